//! A lane branch an earlier run of the same unit left (handed back, kept for a person) is not the
//! new run's starting point (SPEC 20.4): it is moved aside, kept, and the lane starts from the new
//! run's base.

use crate::env::TestEnv;
use crate::loop_e2e::{
    build, lane_branch, own_checks, record, run_show, str_of, with_agent, worktree_of,
};
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;

/// Run 1 commits and hands back; `main` moves on. The run that leaves the lane branch behind.
fn handed_back_then_main_moves(env: &TestEnv, id: &str) -> (Value, String) {
    let (_, first) = build(env, id, &[], 4);
    assert_eq!(first["status"], "handback", "{first}");
    let refused = rev(env, &lane_branch(id));
    assert_eq!(
        env.git_out(&["log", "-1", "--format=%s", &refused]).trim(),
        "fake agent: src/session.rs"
    );
    env.write("NEWS.md", "newer work on main\n");
    env.commit_all("newer work on main");
    (first, refused)
}

const REFUSED_THEN_HANDBACK: &str =
    "commit src/session.rs the refused attempt\nhandback the contract contradicts itself\n";

/// Run 2 of the same unit: the lane starts from the new base, the old commit is not in it, and
/// the old branch (and its worktree) is kept under another name, which the step and an event say.
#[test]
fn a_new_run_does_not_start_from_an_earlier_runs_branch() {
    let (env, id) = with_agent(REFUSED_THEN_HANDBACK, own_checks(json!([])));
    let (first, refused) = handed_back_then_main_moves(&env, &id);
    let main_tip = rev(&env, "main");
    let branch = lane_branch(&id);

    // Run 2 hands back at once, committing nothing: the lane branch is what it started from.
    std::fs::write(env.agent_script(), "handback still contradictory\n").unwrap();
    let (_, second) = build(&env, &id, &[], 4);
    assert_eq!(second["status"], "handback", "{second}");
    assert_ne!(second["run"], first["run"]);
    assert_eq!(
        rev(&env, &branch),
        main_tip,
        "the new run's lane starts from the old run's branch"
    );
    let moved_to = format!("{branch}-{}", &refused[..12]);
    assert_eq!(rev(&env, &moved_to), refused, "the old branch is kept");
    let worktree = worktree_of(&env, &id);
    let aside = format!("{}-{}", worktree.display(), &refused[..12]);
    assert_eq!(
        git_in(std::path::Path::new(&aside), &["symbolic-ref", "HEAD"]),
        format!("refs/heads/{moved_to}"),
        "the old worktree is kept, on the moved branch"
    );
    assert_eq!(
        git_in(&worktree, &["symbolic-ref", "HEAD"]),
        format!("refs/heads/{branch}")
    );

    let run2 = str_of(&second, "run");
    let shown = run_show(&env, run2);
    assert_eq!(
        record(&shown, "worktree")["outcome"]["moved_aside"],
        moved_to.as_str(),
        "{shown:#}"
    );
    let events = moved_aside_events(&env, run2);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["branch"], branch.as_str());
    assert_eq!(events[0]["moved_to"], moved_to.as_str());
    assert_eq!(events[0]["tip"], refused.as_str());
    assert_eq!(events[0]["worktree"], aside.as_str());
}

/// The kills after moving the old worktree and after renaming the old branch: the next `iced
/// build` takes the run up, the lane starts from the new base, it delivers once, and the old
/// branch is kept.
/// The variable and the failpoint each case kills at.
const KILLS: &[(&str, &str)] = &[
    ("ICED_FAILPOINT", "worktree-after-move-worktree"),
    ("ICED_FAILPOINT", "worktree-after-move-aside"),
];

#[test]
fn a_build_killed_while_moving_an_old_branch_aside_delivers_once() {
    for &(var, point) in KILLS {
        let (env, id) = with_agent(REFUSED_THEN_HANDBACK, own_checks(json!([])));
        let (_, refused) = handed_back_then_main_moves(&env, &id);
        let main_tip = rev(&env, "main");
        std::fs::write(
            env.agent_script(),
            "commit src/session.rs the fix\nreport-ok E1 E2\n",
        )
        .unwrap();
        let out = env
            .command()
            .env(var, point)
            .args(["build", &id, "--json"])
            .output()
            .expect("iced runs");
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{point}: not killed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (out, last) = build(&env, &id, &[], 0);
        assert_eq!(last["status"], "delivered", "{point}: {out:#?}");
        let branch = lane_branch(&id);
        let log = env.git_out(&["log", "--format=%H %s", &format!("{main_tip}..{branch}")]);
        let subjects: Vec<&str> = log.lines().map(|l| &l[41..]).collect();
        assert_eq!(
            subjects,
            [
                format!("iced: deliver {id}").as_str(),
                "fake agent: src/session.rs"
            ],
            "{point}: one delivery, on the new base, without the old commit"
        );
        assert!(!log.contains(&refused), "{point}: the old commit came back");
        assert_eq!(
            rev(&env, &format!("{branch}-{}", &refused[..12])),
            refused,
            "{point}: the old branch is kept"
        );
        // Two runs of the implementer in all: the refused one, and the one that delivered.
        assert_eq!(env.agent_starts().len(), 2, "{point}");
        assert_eq!(
            moved_aside_events(&env, str_of(&last, "run")).len(),
            1,
            "{point}"
        );
    }
}

fn moved_aside_events(env: &TestEnv, run: &str) -> Vec<Value> {
    env.read(".iced/run/events.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "branch_moved_aside" && e["run"] == run)
        .collect()
}

fn rev(env: &TestEnv, name: &str) -> String {
    env.git_out(&["rev-parse", name]).trim().to_owned()
}

fn git_in(dir: &std::path::Path, args: &[&str]) -> String {
    crate::env::git_at(dir, args).trim().to_owned()
}
