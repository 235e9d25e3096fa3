//! The crash suite on planning (SPEC 20.16): `iced build --auto-plan` killed with SIGKILL at each
//! failpoint of a planning run that crosses two rounds (a blocking finding, a revision), then
//! `iced build <id>` picks the same run up and builds it to delivery. No planner or reviewer runs
//! twice: the fake agent's log holds exactly two planners, two design and two record reviewers,
//! and one implementer; the plan is committed once and the loop's decision logged once.

use crate::auto_plan::{planning, revision_script, starts};
use crate::env::{assert_killed, unit_file, TestEnv};
use crate::loop_e2e::last_line;
use iced::run::state::{State, StepStatus};
use std::process::Command;

/// How the first call is killed: `ICED_FAILPOINT` set on it (each written out, so the failpoint
/// walk of tests/cli/crash finds the name here).
type Arm = fn(&mut Command);

const CASES: &[(&str, Arm)] = &[
    ("plan-launch-after-record (the planner)", |c| {
        c.env("ICED_FAILPOINT", "plan-launch-after-record");
    }),
    ("plan-launch-after-record:2 (a reviewer)", |c| {
        c.env("ICED_FAILPOINT", "plan-launch-after-record:2");
    }),
    ("plan-launch-after-spawn (the planner)", |c| {
        c.env("ICED_FAILPOINT", "plan-launch-after-spawn");
    }),
    ("plan-launch-after-spawn:3 (the second reviewer)", |c| {
        c.env("ICED_FAILPOINT", "plan-launch-after-spawn:3");
    }),
    ("plan-launch-after-spawn:4 (round 2's planner)", |c| {
        c.env("ICED_FAILPOINT", "plan-launch-after-spawn:4");
    }),
    ("plan-check-before-record (the draft)", |c| {
        c.env("ICED_FAILPOINT", "plan-check-before-record");
    }),
    ("plan-check-before-record:2 (an answer)", |c| {
        c.env("ICED_FAILPOINT", "plan-check-before-record:2");
    }),
    ("observe-before-record:2 (a reviewer's outcome)", |c| {
        c.env("ICED_FAILPOINT", "observe-before-record:2");
    }),
    ("plan-decide-after-write", |c| {
        c.env("ICED_FAILPOINT", "plan-decide-after-write");
    }),
    ("plan-decide-after-approve", |c| {
        c.env("ICED_FAILPOINT", "plan-decide-after-approve");
    }),
    ("plan-decide-after-commit", |c| {
        c.env("ICED_FAILPOINT", "plan-decide-after-commit");
    }),
];

fn unit_id(env: &TestEnv) -> String {
    std::fs::read_dir(env.path("intent"))
        .expect("intent/")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("001-"))
        .expect("the unit was made")
}

#[test]
fn auto_plan_killed_at_every_planning_failpoint_plans_and_delivers_once() {
    for (name, arm) in CASES {
        let env = planning(&revision_script(), 3);
        let mut first = env.command();
        first.args([
            "build",
            "--auto-plan",
            "session timeout for idle users",
            "--json",
        ]);
        arm(&mut first);
        assert_killed(&first.output().expect("iced runs"), name);
        let id = unit_id(&env);
        let again = env.iced_json(&["build", &id]);
        assert_eq!(again.code, 0, "{name}: the resumed build:\n{again:#?}");
        assert_eq!(
            last_line(&again)["status"],
            "delivered",
            "{name}: {again:#?}"
        );
        for (role, lens, n) in [
            ("planner", "", 2),
            ("plan-reviewer", "design", 2),
            ("plan-reviewer", "record", 2),
            ("implementer", "", 1),
        ] {
            assert_eq!(
                starts(&env, role, lens),
                n,
                "{name}: {role} {lens} started {} times:\n{:#?}",
                starts(&env, role, lens),
                env.agent_starts()
            );
        }
        let plans = env.git_out(&["log", "--format=%s"]);
        assert_eq!(
            plans
                .lines()
                .filter(|l| l.starts_with("iced: plan "))
                .count(),
            1,
            "{name}: one plan commit:\n{plans}"
        );
        let decisions = env.read(&format!("intent/{id}/decisions.md"));
        assert_eq!(
            decisions.matches("approved by the loop in run").count(),
            1,
            "{name}: {decisions}"
        );
        assert!(env.read(&unit_file(&id)).contains("approved_by: auto"));
        let record = env.read(&format!("intent/{id}/plan-decision.md"));
        assert!(
            record.contains(&format!("- {id}-P1 (round 1, record, S2-major): revised:")),
            "{name}: {record}"
        );
        // The state reads strictly, and no step was left started.
        if let Ok(bytes) = std::fs::read(env.path(".iced/run/state.json")) {
            let state = State::parse(&bytes)
                .unwrap_or_else(|e| panic!("{name}: state.json does not parse strictly: {e:?}"));
            for run in state.runs.values() {
                for lane in &run.lanes {
                    assert!(
                        lane.steps.iter().all(|r| r.status != StepStatus::Started),
                        "{name}: a step left started: {:#?}",
                        lane.steps
                    );
                }
            }
        }
    }
}
