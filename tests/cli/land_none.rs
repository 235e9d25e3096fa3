//! `land.mode: none` (SPEC 23): the run is delivered when the close is committed on the lane
//! branch, which stays for a person to merge; the lane's worktree goes with the delivery, unless
//! something wrote in it after the receipt saw it clean: then git keeps it and the loop says so.

use crate::env::TestEnv;
use crate::landing::{
    assert_checkout_follows, branch_exists, dod_commands, landing_env, reports, state, AGENT,
};
use crate::loop_e2e::{build, lane_branch, run_show, str_of, worktree_of};
use iced::run::state::RunStatus;
use serde_json::{json, Value};

/// `land.mode: none`: the run is delivered on its branch, which is reported and stays (its worktree
/// goes with the delivery), and the run stays in the state. `iced run retire` retires it once a
/// person merged it.
#[test]
pub(crate) fn with_mode_none_the_branch_is_reported_and_run_retire_retires_it_once_merged() {
    let (env, id) = landing_env(AGENT, 1, json!({"mode": "none"}));
    let branch = lane_branch(&id);
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let final_report = reports(&out).pop().unwrap();
    assert_eq!(final_report["action"], "delivered");
    assert!(
        str_of(&final_report, "next").contains(&format!("`{branch}`")),
        "the final report names the lane branch: {final_report}"
    );
    assert!(branch_exists(&env, &branch));
    // The work is on the branch; the lane's worktree went with the delivery (SPEC 23).
    assert!(
        !worktree_of(&env, &id).exists(),
        "the delivered lane's worktree is removed"
    );
    let s = state(&env);
    assert_eq!(
        s.runs[&run].status,
        RunStatus::Delivered,
        "the run stays in the state"
    );
    assert!(s.runs[&run].lanes[0]
        .steps
        .iter()
        .all(|r| !r.step.to_string().starts_with("land")));

    // Not merged yet: nothing is retired.
    let kept = env.iced_json(&["run", "retire"]).ok().json();
    assert_eq!(kept[0]["run"], run.as_str());
    assert_eq!(kept[0]["retired"], false, "{kept}");
    assert_eq!(kept[0]["lanes"][0]["result"], "not landed in `main` yet");
    assert!(branch_exists(&env, &branch));
    assert_eq!(state(&env).runs.len(), 1);

    // A person merges the branch; `run retire` retires the lane and the run leaves the state.
    env.git(&[
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "merge the delivery",
        &branch,
    ]);
    let retired = env.iced_json(&["run", "retire", &run]).ok().json();
    assert_eq!(retired[0]["retired"], true, "{retired}");
    assert_eq!(retired[0]["lanes"][0]["result"], "retired");
    assert!(!branch_exists(&env, &branch), "the branch is deleted");
    assert!(!worktree_of(&env, &id).exists(), "the worktree is removed");
    assert!(state(&env).runs.is_empty(), "the run left the state");
    let record = run_show(&env, &run);
    assert_eq!(record["run"]["status"], "delivered");
    assert_checkout_follows(&env, &id);
    // Nothing left to retire.
    assert_eq!(env.iced_json(&["run", "retire"]).ok().json(), json!([]));
}

/// Something wrote in the lane's worktree after the receipt saw it clean (here a
/// definition-of-done command leaving a file git does not ignore, as a build or an escaped process
/// might): git will not remove the worktree, so it is kept, and the delivery says where and why,
/// in the step's words and the event `worktree_kept`. The delivery itself stands: the close is
/// made from the judged head's trees, never from the worktree.
#[test]
fn a_worktree_written_after_the_receipt_is_kept_and_named() {
    let (env, id) = TestEnv::buildable_with(|env| {
        let mut config = crate::env::fake_runner(env, AGENT);
        let mut commands = dod_commands(env, 1);
        commands
            .as_array_mut()
            .unwrap()
            .push(json!({"argv": ["sh", "-c", "echo left > stray.txt"], "timeoutSec": 30}));
        crate::env::merge_json(
            &mut config,
            &json!({"verify": {"independent": false, "commands": commands}, "land": {"mode": "none"}}),
        );
        config
    });
    let branch = lane_branch(&id);
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert!(branch_exists(&env, &branch));
    let worktree = worktree_of(&env, &id);
    assert!(
        worktree.join("stray.txt").is_file(),
        "the worktree git would not remove is kept, with what was written there"
    );
    let said = reports(&out)
        .into_iter()
        .map(|r| str_of(&r, "next").to_owned())
        .find(|n| n.contains("is kept"))
        .unwrap_or_else(|| panic!("no step said the worktree is kept: {out:#?}"));
    assert!(
        said.contains(&format!("`{}`", worktree.display()))
            && said.contains("git would not remove it"),
        "the step names the worktree and why: {said}"
    );
    crate::snap::assert_read!(&env, "worktree_kept_next", said);
    let events = std::fs::read_to_string(env.path(".iced/run/events.jsonl")).unwrap();
    let kept: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "worktree_kept")
        .collect();
    assert_eq!(kept.len(), 1, "one worktree_kept event: {events}");
    assert_eq!(kept[0]["worktree"], worktree.display().to_string());
    assert!(
        kept[0]["reason"] == "it has uncommitted or untracked changes",
        "git's reason: {}",
        kept[0]
    );
}
