//! Claims every checkout sees (SPEC 24.9): a linked `git worktree` of the repository is another
//! checkout with its own `.iced/run`, and it must see the claims of the first one; stale claims
//! are taken over across checkouts, and claims an older iced left in `.iced/run/claims/` are read.

use crate::env::TestEnv;
use crate::loop_e2e::{build, last_line, str_of, wait_for, with_agent};
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

/// The loop's own checks only, nothing to run for them: the implementer alone decides.
fn own_checks() -> Value {
    json!({"verify": {"independent": false, "commands": []}, "run": {"killGraceSec": 0.3}})
}

/// A linked worktree of the repository at `name` (outside it), on a new branch, with the config
/// the repository committed trusted there, as the person working in it would.
fn linked_checkout(env: &TestEnv, name: &str) -> PathBuf {
    let dir = env.outside(name);
    env.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        name,
        &dir.display().to_string(),
    ]);
    env.iced_json_in(&dir, &["trust"]).ok();
    dir
}

fn claim(env: &TestEnv, unit: &str) -> Value {
    serde_json::from_slice(&std::fs::read(env.claim_path(unit)).expect("a claim"))
        .expect("the claim is JSON")
}

fn canonical(path: &Path) -> String {
    path.canonicalize().unwrap().display().to_string()
}

/// `iced build <id> --json` in `dir`, killed at `failpoint`: what a build that died there left.
fn build_killed_at(env: &TestEnv, dir: &Path, id: &str, failpoint: &str) {
    let out = env
        .command_in(dir)
        .env("ICED_FAILPOINT", failpoint)
        .args(["build", id, "--json"])
        .output()
        .expect("iced runs");
    assert_eq!(
        out.status.signal(),
        Some(9),
        "not killed at {failpoint}: {out:?}"
    );
}

/// Regression: a linked `git worktree` of the same repository did not see the first checkout's
/// claim (claims lived in each checkout's `.iced/run/claims/`), so two runs built one unit.
#[test]
fn a_linked_worktree_sees_the_first_checkouts_claim() {
    let (env, id) = with_agent("hang\n", own_checks());
    let (_, first) = build(&env, &id, &["--no-wait"], 0);
    let first_run = str_of(&first, "run").to_owned();
    let held = claim(&env, &id);
    assert_eq!(held["run"], first_run.as_str());
    assert_eq!(held["root"], canonical(env.root()));
    wait_for("the agent to start", || !env.agent_starts().is_empty());

    let other = linked_checkout(&env, "second");
    let refused = env
        .iced_json_in(&other, &["build", &id])
        .refused(3, "unit-claimed");
    let reason = str_of(&refused, "reason");
    assert!(reason.contains(&first_run), "{refused}");
    assert!(reason.contains(&canonical(env.root())), "{refused}");
    assert!(
        str_of(&refused, "remedy").contains(&format!("iced run abandon {first_run}")),
        "{refused}"
    );
    assert!(
        !other.join(".iced/run/state.json").exists(),
        "the refused build wrote a state"
    );
    assert_eq!(
        claim(&env, &id),
        held,
        "the refused build touched the claim"
    );
    assert_eq!(env.agent_starts().len(), 1, "a second agent started");

    // The first run ends: its claim goes, and the other checkout may build. The person clears
    // what the abandoned lane kept (its worktree holds the lane branch), and the agent now works.
    env.iced_json(&["run", "abandon", &first_run]).ok();
    assert!(!env.claim_path(&id).exists(), "abandon kept the claim");
    let lane_worktree = env.outside("repo.iced-worktrees").join(&id);
    env.git(&[
        "worktree",
        "remove",
        "--force",
        &lane_worktree.display().to_string(),
    ]);
    env.git(&["branch", "-D", &format!("iced/{id}/{id}")]);
    std::fs::write(
        env.agent_script(),
        "commit src/session.rs fixed\nreport-ok E1 E2\n",
    )
    .unwrap();
    let out = env.iced_json_in(&other, &["build", &id]);
    assert_eq!(out.code, 0, "{out:#?}");
    let last = last_line(&out);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_ne!(last["run"], first_run.as_str());
    assert!(!env.claim_path(&id).exists(), "the claim outlived delivery");
    assert_eq!(env.agent_starts().len(), 2);
}

/// A claim whose checkout's state does not hold its run (a build killed between writing the claim
/// and recording its run), or whose checkout is gone, holds nothing: another checkout takes the
/// unit over, and the claim then names it.
#[test]
fn an_orphaned_claim_of_another_checkout_is_taken_over() {
    let (env, id) = with_agent("hang\n", own_checks());

    // Orphaned in a checkout that still exists.
    let other = linked_checkout(&env, "second");
    build_killed_at(&env, &other, &id, "admit-after-claim");
    let orphan = claim(&env, &id);
    assert_eq!(orphan["root"], canonical(&other));
    let (_, taken) = build(&env, &id, &["--no-wait"], 0);
    let run_id = str_of(&taken, "run").to_owned();
    assert_ne!(orphan["run"], run_id.as_str());
    let now = claim(&env, &id);
    assert_eq!(now["run"], run_id.as_str());
    assert_eq!(now["root"], canonical(env.root()));
    // While that run lives, the checkout that left the orphan is refused like any other.
    env.iced_json_in(&other, &["build", &id])
        .refused(3, "unit-claimed");
    wait_for("the agent to start", || !env.agent_starts().is_empty());
    env.iced_json(&["run", "abandon", &run_id]).ok();
    let lane_worktree = env.outside("repo.iced-worktrees").join(&id);
    env.git(&[
        "worktree",
        "remove",
        "--force",
        &lane_worktree.display().to_string(),
    ]);
    env.git(&["branch", "-D", &format!("iced/{id}/{id}")]);

    // Orphaned by a checkout that is gone.
    let third = linked_checkout(&env, "third");
    build_killed_at(&env, &third, &id, "admit-after-claim");
    assert_eq!(claim(&env, &id)["root"], canonical(&third));
    env.git(&[
        "worktree",
        "remove",
        "--force",
        &third.display().to_string(),
    ]);
    assert!(!third.exists());
    let out = env.iced_json_in(&other, &["build", &id, "--no-wait"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let second_run = str_of(&last_line(&out), "run").to_owned();
    let now = claim(&env, &id);
    assert_eq!(now["run"], second_run.as_str());
    assert_eq!(now["root"], canonical(&other));
    wait_for("the second agent to start", || {
        env.agent_starts().len() == 2
    });
    env.iced_json_in(&other, &["run", "abandon", &second_run])
        .ok();
}

/// Two checkouts build one unit at the same moment: exactly one run gets it, the other build is
/// refused, and the claim names the winner.
#[test]
fn two_checkouts_building_at_once_make_one_run() {
    let (env, id) = with_agent("hang\n", own_checks());
    let other = linked_checkout(&env, "second");
    let spawn = |dir: &Path| {
        env.command_in(dir)
            .args(["build", &id, "--no-wait", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("iced starts")
    };
    let children = [spawn(env.root()), spawn(&other)];
    let outs: Vec<crate::env::Run> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            crate::env::Run {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        })
        .collect();
    let won: Vec<(usize, &crate::env::Run)> = outs
        .iter()
        .enumerate()
        .filter(|(_, o)| o.code == 0)
        .collect();
    assert_eq!(won.len(), 1, "{outs:#?}");
    let (winner, out) = won[0];
    let loser = &outs[1 - winner];
    loser.refused(3, "unit-claimed");
    let run_id = str_of(&last_line(out), "run").to_owned();
    let dirs = [env.root().to_owned(), other.clone()];
    let held = claim(&env, &id);
    assert_eq!(held["run"], run_id.as_str());
    assert_eq!(held["root"], canonical(&dirs[winner]));
    wait_for("the agent to start", || !env.agent_starts().is_empty());
    env.iced_json_in(&dirs[winner], &["run", "abandon", &run_id])
        .ok();
    assert_eq!(env.agent_starts().len(), 1, "{:?}", env.agent_starts());
}

/// A claim an older iced wrote into `.iced/run/claims/` (no `root`: it is this checkout's) is
/// read for one release: an ended run's is taken over (by any session, as any claim of an ended
/// run is), and the old file goes when it is.
#[test]
fn a_claim_an_older_iced_left_in_the_checkout_is_still_read() {
    let (env, id) = with_agent("hang\n", own_checks());
    let (_, old) = build(&env, &id, &["--no-wait", "--session", "X"], 0);
    let old_run = str_of(&old, "run").to_owned();
    wait_for("the agent to start", || !env.agent_starts().is_empty());
    env.iced_json(&["run", "abandon", &old_run]).ok();
    assert!(!env.claim_path(&id).exists());
    let legacy = format!(".iced/run/claims/{id}.json");
    env.write(
        &legacy,
        serde_json::to_string_pretty(&json!({
            "run": old_run, "session": "X", "host": "elsewhere", "pid": 1, "at": "2026-09-30T10:00:00Z"
        }))
        .unwrap(),
    );

    let lane_worktree = env.outside("repo.iced-worktrees").join(&id);
    env.git(&[
        "worktree",
        "remove",
        "--force",
        &lane_worktree.display().to_string(),
    ]);
    env.git(&["branch", "-D", &format!("iced/{id}/{id}")]);
    let (_, new) = build(&env, &id, &["--no-wait", "--session", "B"], 0);
    let new_run = str_of(&new, "run").to_owned();
    assert!(!env.path(&legacy).exists(), "the old claim was kept");
    assert_eq!(claim(&env, &id)["run"], new_run.as_str());
    wait_for("the second agent to start", || {
        env.agent_starts().len() == 2
    });
    env.iced_json(&["run", "abandon", &new_run]).ok();

    // And one naming a run no state holds is an orphan, here as anywhere.
    env.write(
        &legacy,
        serde_json::to_string_pretty(&json!({
            "run": "run-gone", "session": null, "host": "elsewhere", "pid": 1, "at": "2026-09-30T10:00:00Z"
        }))
        .unwrap(),
    );
    env.git(&[
        "worktree",
        "remove",
        "--force",
        &lane_worktree.display().to_string(),
    ]);
    env.git(&["branch", "-D", &format!("iced/{id}/{id}")]);
    let out = env.iced_json(&["build", &id, "--no-wait"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let third = str_of(&last_line(&out), "run").to_owned();
    assert!(
        !env.path(&legacy).exists(),
        "the orphaned old claim was kept"
    );
    wait_for("the third agent to start", || env.agent_starts().len() == 3);
    env.iced_json(&["run", "abandon", &third]).ok();
}
