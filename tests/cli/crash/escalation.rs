//! The crash suite for escalations (SPEC 20.7): the person's verbs killed between their writes,
//! `iced build` killed right after recording an escalation, and a walk over every failpoint the
//! loop reaches on a run whose implementer escalates, is answered, and delivers. Every time: no
//! implementer attempt starts twice, the decision is logged once, the unit holds the applied
//! contract once, and the delivery carries its hash.

use crate::env::TestEnv;
use crate::escalation::{
    decisions, escalating, escalating_with, file_at, landing_by_merge, starts_of, PROPOSAL,
};
use crate::loop_e2e::{build, lane_branch, own_checks, with_agent};
use std::os::unix::process::ExitStatusExt;

/// `iced escalation apply` killed after its decision entry, and again after writing the unit:
/// applied again, the unit is written once (the same bytes), the decision is logged once, and the
/// lane resumes with each attempt's agent started once.
#[test]
fn an_apply_killed_between_its_writes_is_finished_by_applying_again() {
    let (env, id) = escalating(PROPOSAL);
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{last}");
    let apply = || {
        let mut cmd = env.command();
        cmd.args(["escalation", "apply", &id, "--json"]);
        cmd
    };
    let killed = [
        apply()
            .env("ICED_FAILPOINT", "escalation-after-decision")
            .output(),
        apply()
            .env("ICED_FAILPOINT", "escalation-after-unit")
            .output(),
    ];
    for killed in killed {
        let killed = killed.expect("iced runs");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(killed.status.signal(), Some(9), "killed: {killed:?}");
    }
    // Killed after the unit: it holds the new contract, the escalation is still open.
    assert!(env.read(&format!("intent/{id}/iced.md")).contains("- [E3]"));
    assert_eq!(
        env.iced_json(&["escalation", "show", &id]).json()["status"],
        "open"
    );
    let applied = env.iced_json(&["escalation", "apply", &id]).ok().json();
    assert_eq!(applied["status"], "applied");
    assert_eq!(
        decisions(&env, &id, "applied the change-expectation escalation"),
        1
    );
    let text = env.read(&format!("intent/{id}/iced.md"));
    assert_eq!(text.matches("- [E3]").count(), 1, "{text}");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!((starts_of(&env, 1), starts_of(&env, 2)), (1, 1));
    let closed = file_at(&env, &lane_branch(&id), &format!("intent/{id}/iced.md"));
    assert!(closed.contains(applied["contract_hash"].as_str().unwrap()));
}

/// `iced answer` killed after writing the unit: answered again, the Q item is there once.
#[test]
fn an_answer_killed_after_writing_the_unit_is_finished_by_answering_again() {
    let (env, id) = with_agent(
        "attempt 1\nask Which store?\nattempt 2\ncommit src/session.rs fixed\nreport-ok E1 E2\n",
        own_checks(serde_json::json!(["true"])),
    );
    build(&env, &id, &[], 4);
    let killed = env
        .command()
        .env("ICED_FAILPOINT", "escalation-after-unit")
        .args(["answer", &id, "Q2", "sqlite", "--json"])
        .output()
        .expect("iced runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(9), "{killed:?}");
    assert_eq!(
        env.iced_json(&["escalation", "show", &id]).json()["status"],
        "open"
    );
    env.iced_json(&["answer", &id, "Q2", "sqlite"]).ok();
    let text = env.read(&format!("intent/{id}/iced.md"));
    assert_eq!(text.matches("- [Q2]").count(), 1, "{text}");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!((starts_of(&env, 1), starts_of(&env, 2)), (1, 1));
}

/// `iced build` killed right after the receipt recorded the escalation: built again, the lane is
/// blocked on the same escalation, and attempt 1's agent ran once.
#[test]
fn a_build_killed_after_recording_the_escalation_waits_on_it_without_running_the_agent_again() {
    let (env, id) = escalating(PROPOSAL);
    let killed = env
        .command()
        .env("ICED_FAILPOINT", "receipt-after-record")
        .args(["build", &id, "--json"])
        .output()
        .expect("iced runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(9), "{killed:?}");
    let (_, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{last}");
    let shown = env.iced_json(&["escalation", "show", &id]).ok().json();
    assert_eq!(shown["status"], "open");
    assert_eq!(shown["attempt"], 1);
    assert_eq!(starts_of(&env, 1), 1);
    assert_eq!(starts_of(&env, 2), 0);
}

/// The loop's failpoints a process-driven build reaches without validators or a landing, except
/// `launch-after-record` (a kill there is a crashed attempt, retried as the next one by design,
/// which would shift the scripted attempts), and the person's own two.
fn reached_by_this_run(name: &str) -> bool {
    const ELSEWHERE: &[&str] = &[
        "launch-after-record",
        "end-after-metrics",
        "discard-before-release",
        "abandon-before-stop",
        "answer-after-write",
        "transcript-after-copy",
        "archive-after-append",
        "retire-after-remove",
        "retire-after-restore",
        "retire-after-unpublish",
    ];
    !ELSEWHERE.contains(&name)
        && ![
            "land-",
            "push-",
            "pr-",
            "validator-",
            "supervisor-",
            "tester-",
        ]
        .iter()
        .any(|p| name.starts_with(p))
}

/// `iced build` of a run whose implementer escalates, then `escalation apply`, then `iced build`
/// to delivery, each killed at the same failpoint (where it is reached) and run again: every
/// attempt's implementer started once, the decision logged once, the delivery carrying the
/// applied contract's hash.
#[test]
fn an_escalating_run_killed_at_every_failpoint_delivers_the_applied_contract_once() {
    let killed_by = |env: &TestEnv, point: &str, args: &[&str]| -> Option<std::process::Output> {
        let out = env
            .command()
            .env("ICED_FAILPOINT", point)
            .args(args)
            .arg("--json")
            .output()
            .expect("iced runs");
        // Killed: None; else what it said, for the caller to check it went on as without a kill.
        (out.status.signal() != Some(9)).then_some(out)
    };
    let last_status = |out: &std::process::Output| -> String {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last: serde_json::Value =
            serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap();
        last["status"].as_str().unwrap_or("").to_owned()
    };
    let mut killed = 0;
    for &point in iced::failpoint::ALL
        .iter()
        .filter(|p| reached_by_this_run(p))
    {
        let (env, id) = escalating(PROPOSAL);
        match killed_by(&env, point, &["build", &id]) {
            None => {
                killed += 1;
                let (_, last) = build(&env, &id, &[], 4);
                assert_eq!(last["status"], "blocked", "{point}: {last}");
            }
            Some(out) => assert_eq!(last_status(&out), "blocked", "{point}: {out:?}"),
        }
        if killed_by(&env, point, &["escalation", "apply", &id]).is_none() {
            killed += 1;
            env.iced_json(&["escalation", "apply", &id]).ok();
        }
        let hash = env.iced_json(&["escalation", "show", &id]).json()["contract_hash"]
            .as_str()
            .unwrap_or_else(|| panic!("{point}: applied"))
            .to_owned();
        match killed_by(&env, point, &["build", &id]) {
            None => {
                killed += 1;
                // Killed once the delivery was saved (`end-before-release`): nothing to resume.
                let shown = env.iced_json(&["run", "show"]).json();
                if shown["status"] != "delivered" {
                    let (out, last) = build(&env, &id, &[], 0);
                    assert_eq!(last["status"], "delivered", "{point}: {out:#?}");
                }
            }
            Some(out) => assert_eq!(last_status(&out), "delivered", "{point}: {out:?}"),
        }
        assert_eq!(
            (starts_of(&env, 1), starts_of(&env, 2), starts_of(&env, 3)),
            (1, 1, 0),
            "{point}: {:#?}",
            env.agent_starts()
        );
        assert_eq!(
            decisions(&env, &id, "applied the change-expectation escalation"),
            1,
            "{point}"
        );
        let closed = file_at(&env, &lane_branch(&id), &format!("intent/{id}/iced.md"));
        assert!(
            closed.contains(&format!("contract_hash: {hash}")),
            "{point}: {closed}"
        );
        assert_eq!(closed.matches("- [E3]").count(), 1, "{point}: {closed}");
        // The state parses strictly, and no step was left `started`.
        let state = iced::run::state::State::parse(
            &std::fs::read(env.path(".iced/run/state.json")).unwrap(),
        )
        .unwrap_or_else(|e| panic!("{point}: {e:?}"));
        let left: Vec<String> = state
            .runs
            .values()
            .flat_map(|r| &r.lanes)
            .flat_map(|l| &l.steps)
            .filter(|r| r.status == iced::run::state::StepStatus::Started)
            .map(|r| r.step.to_string())
            .collect();
        assert!(left.is_empty(), "{point}: left started: {left:?}");
    }
    assert!(killed >= 10, "the walk killed only {killed} times");
}

/// SPEC 23.2: the landing killed after restoring the unit an `apply` left uncommitted, before the
/// fast-forward: the checkout has `HEAD`'s unit, and building again lands the applied contract once.
#[test]
fn a_landing_killed_after_restoring_the_applied_unit_lands_on_the_next_build() {
    let (env, id) = escalating_with(PROPOSAL, landing_by_merge());
    let unit = format!("intent/{id}/iced.md");
    build(&env, &id, &[], 4);
    let applied = env.iced_json(&["escalation", "apply", &id]).ok().json();
    let base = env.git_out(&["rev-parse", "main"]);
    let killed = env
        .command()
        .env("ICED_FAILPOINT", "land-after-restore")
        .args(["build", &id, "--json"])
        .output()
        .expect("iced runs");
    assert_eq!(killed.status.signal(), Some(9), "{killed:?}");
    assert_eq!(
        env.git_out(&["rev-parse", "main"]),
        base,
        "main did not move"
    );
    assert_eq!(env.read(&unit), file_at(&env, "main", &unit), "restored");

    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let landed = file_at(&env, "main", &unit);
    assert!(landed.contains(applied["contract_hash"].as_str().unwrap()));
    assert_eq!(env.read(&unit), landed);
    assert_eq!((starts_of(&env, 1), starts_of(&env, 2)), (1, 1));
}
