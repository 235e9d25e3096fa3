//! `iced build --auto-plan` (SPEC 20.16): a planner drafts the unit, two reviewers review each
//! draft, the planner revises after a blocking finding, the loop writes the decision record and
//! approves only at autonomy 3, and the same run builds what it approved. The fake agent plays
//! every role; its log says how often each really ran.

use crate::env::{fake_runner, merge_json, unit_file, TestEnv};
use crate::loop_e2e::last_line;
use crate::snap::{assert_read, assert_refused};
use serde_json::{json, Value};

/// A body the planner drafts: a Goal of two clauses, each covered, verify annotations throughout.
pub(crate) const PLANNED_BODY: &str = "
# Session timeout for idle users

## Intent

### Goal
Idle sessions end after 30 minutes; active sessions stay signed in.

### Constraints
- [C1] No change to how passwords are checked.

### Failure conditions
- [F1] An active person is signed out.

### Scope
- In: session refresh
- Out: password policy

## Context
- [code] Sessions expire after 5 minutes in src/session.rs.

## Expectations
- [E1] An idle session ends after 30 minutes. {goal: G1} {verify: test | tests/session.rs}
- [E2] Activity refreshes the session. {goal: G2} {verify: test | tests/session.rs}
";

/// The same draft with its second clause uncovered: what the record reviewer objects to.
const THIN_BODY: &str = "
# Session timeout for idle users

## Intent

### Goal
Idle sessions end after 30 minutes; active sessions stay signed in.

### Failure conditions
- [F1] An active person is signed out.

### Scope
- In: session refresh
- Out: password policy

## Context
- [code] Sessions expire after 5 minutes in src/session.rs.

## Expectations
- [E1] An idle session ends after 30 minutes. {goal: G1} {verify: test | tests/session.rs}
";

pub(crate) const PASS: &str = r#"report {"verdict": "pass", "expectations": [{"id": "E1", "result": "pass", "evidence": "checkable"}]}"#;

const FINDING: &str = r#"report {"verdict": "fail", "findings": [{"file_path": "intent/x/iced.md", "criterion_ref": "G2", "finding_category": "test-coverage", "severity": "S2-major", "summary": "the second goal clause has no expectation", "failure_scenario": {"inputs": "an active session", "expected": "an expectation checks it stays signed in", "actual": "none does"}}]}"#;

/// The implementer of the build that follows an approval.
const IMPLEMENTER: &str =
    "role implementer\ncommit src/session.txt idle sessions end\nreport-ok E1 E2\n";

/// An initialized repository whose fake agent follows `script` in every role (planner, plan
/// reviewers, implementer), at `autonomy`, with the loop's own checks only; committed.
pub(crate) fn planning(script: &str, autonomy: i64) -> TestEnv {
    let env = TestEnv::initialized();
    std::fs::write(env.outside("planned.md"), PLANNED_BODY).expect("write the draft body");
    std::fs::write(env.outside("thin.md"), THIN_BODY).expect("write the draft body");
    let script = script
        .replace(
            "{planned}",
            &env.outside("planned.md").display().to_string(),
        )
        .replace("{thin}", &env.outside("thin.md").display().to_string());
    let mut config = fake_runner(&env, &script);
    merge_json(
        &mut config,
        &json!({
            "autonomy": autonomy,
            "roles": {"planner": {"runner": "fake"}, "planReviewer": {"runner": "fake"}},
            "verify": {"independent": false, "commands": []}
        }),
    );
    env.patch_config(&config);
    env.commit_all("config");
    env
}

/// `iced build --auto-plan <what> --json`, checked to exit `exit`: the final line and the unit.
pub(crate) fn auto_plan(env: &TestEnv, what: &str, exit: i32) -> (Value, String) {
    let out = env.iced_json(&["build", "--auto-plan", what]);
    assert_eq!(out.code, exit, "build --auto-plan:\n{out:#?}");
    (last_line(&out), planned_id(env))
}

/// The id of the unit `build --auto-plan "<line>"` made: the first.
pub(crate) fn planned_id(env: &TestEnv) -> String {
    std::fs::read_dir(env.path("intent"))
        .expect("intent/")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("001-"))
        .expect("the unit was made")
}

/// How many times the fake agent started as `role` (and `lens`, when given).
pub(crate) fn starts(env: &TestEnv, role: &str, lens: &str) -> usize {
    env.agent_starts()
        .iter()
        .filter(|l| l.contains(&format!(" role={role} lens={lens} ")))
        .count()
}

fn script(parts: &[&str]) -> String {
    parts.join("\n") + "\n"
}

/// Two rounds: the record reviewer's blocking finding on the first draft, the planner's
/// revision, both reviewers passing it; then the implementer (also the crash suite's planning run).
pub(crate) fn revision_script() -> String {
    script(&[
        "role planner",
        "start 1",
        "draft-body {thin}",
        "start 2",
        "draft-body {planned}",
        "start *",
        "role plan-reviewer",
        "lens record",
        "start 1",
        FINDING,
        "start 2",
        PASS,
        "start *",
        "lens design",
        PASS,
        "lens *",
        IMPLEMENTER,
    ])
}

#[test]
fn from_one_line_to_a_delivered_unit_at_autonomy_3() {
    let env = planning(
        &script(&[
            "role planner",
            "draft-body {planned}",
            "role plan-reviewer",
            PASS,
            IMPLEMENTER,
        ]),
        3,
    );
    let (last, id) = auto_plan(&env, "session timeout for idle users", 0);
    assert_eq!(last["status"], "delivered", "{last}");
    let unit = env.read(&unit_file(&id));
    assert!(unit.contains("status: approved"), "{unit}");
    assert!(unit.contains("approved_by: auto"), "{unit}");
    assert!(unit.contains("{goal: G2}"), "the draft is the unit: {unit}");
    assert_eq!(starts(&env, "planner", ""), 1);
    assert_eq!(starts(&env, "plan-reviewer", "design"), 1);
    assert_eq!(starts(&env, "plan-reviewer", "record"), 1);
    assert_eq!(starts(&env, "implementer", ""), 1);
    // The plan is committed, and the run built on top of it.
    let log = env.git_out(&["log", "--format=%s", "-n", "1"]);
    assert_eq!(log.trim(), format!("iced: plan {id}"));
    let decisions = env.read(&format!("intent/{id}/decisions.md"));
    assert!(
        decisions.contains("approved by the loop in run run-"),
        "{decisions}"
    );
    assert_read!(
        &env,
        "plan_decision_autonomy_3",
        env.read(&format!("intent/{id}/plan-decision.md"))
    );
}

#[test]
fn at_autonomy_1_the_plan_waits_for_a_person() {
    let env = planning(
        &script(&[
            "role planner",
            "draft-body {planned}",
            "role plan-reviewer",
            PASS,
            IMPLEMENTER,
        ]),
        1,
    );
    let (last, id) = auto_plan(&env, "session timeout for idle users", 4);
    assert_eq!(last["status"], "handback", "{last}");
    let unit = env.read(&unit_file(&id));
    assert!(unit.contains("status: draft"), "{unit}");
    assert_eq!(starts(&env, "implementer", ""), 0);
    let show = env.iced_json(&["run", "show"]).json();
    let reason = show["lanes"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason.starts_with("awaits approval: the effective autonomy is 3 (it is 1)"),
        "{reason}"
    );
    assert!(reason.contains(&format!("`iced approve {id}`")), "{reason}");
    assert_read!(
        &env,
        "plan_decision_autonomy_1",
        env.read(&format!("intent/{id}/plan-decision.md"))
    );
    // What `run show --json` says of a run that planned and waits for a person (its text cuts
    // each outcome at a width, which the filtered durations would move).
    assert_read!(
        &env,
        "run_show_planned",
        crate::snap::json(&env, &["run", "show"])
    );
    // The person's remedy works: approve, commit, build.
    env.iced_json(&["approve", &id, "--yes"]).ok();
    env.commit_all("approve");
    let out = env.iced_json(&["build", &id]);
    assert_eq!(last_line(&out)["status"], "delivered", "{out:#?}");
}

#[test]
fn a_blocking_finding_makes_the_planner_revise() {
    let env = planning(&revision_script(), 3);
    let (last, id) = auto_plan(&env, "session timeout for idle users", 0);
    assert_eq!(last["status"], "delivered", "{last}");
    assert_eq!(starts(&env, "planner", ""), 2);
    assert_eq!(starts(&env, "plan-reviewer", "record"), 2);
    assert_eq!(starts(&env, "plan-reviewer", "design"), 2);
    let record = env.read(&format!("intent/{id}/plan-decision.md"));
    assert!(
        record.contains(&format!("- {id}-P1 (round 1, record, S2-major): revised:")),
        "{record}"
    );
    // The second planner was given the finding by the id the loop minted.
    let prompt =
        std::fs::read_to_string(glob_one(&env, "plan-2-1/prompt.md").expect("round 2's prompt"))
            .unwrap();
    assert!(
        prompt.contains(&format!("- {id}-P1 (record, S2-major)")),
        "{prompt}"
    );
    assert_read!(&env, "plan_decision_revised", record);
}

#[test]
fn findings_still_open_after_the_last_round_wait_for_a_person() {
    let env = planning(
        &script(&[
            "role planner",
            "draft-body {thin}",
            "role plan-reviewer",
            "lens record",
            FINDING,
            "lens design",
            PASS,
        ]),
        3,
    );
    env.patch_config(&json!({"plan": {"rounds": 1}}));
    env.commit_all("one round");
    let (last, id) = auto_plan(&env, "session timeout for idle users", 4);
    assert_eq!(last["status"], "handback", "{last}");
    assert_eq!(starts(&env, "planner", ""), 1);
    let record = env.read(&format!("intent/{id}/plan-decision.md"));
    assert!(
        record.contains("- [ ] no open S1 or S2 finding of the last round (1 open)"),
        "{record}"
    );
    assert!(
        record.contains("G2 \"active sessions stay signed in.\": uncovered"),
        "{record}"
    );
}

/// What a handback of a refused draft says to do after its reason.
pub(crate) fn refused_remedy(id: &str) -> String {
    format!("; the unit is as it was: `iced build --auto-plan {id}` plans anew, or write it yourself and `iced approve {id}`")
}

#[test]
fn a_draft_that_changes_what_the_loop_keeps_is_refused() {
    let env = planning(
        &script(&[
            "role planner",
            "draft-sed s/^status: draft/status: approved/",
            "role plan-reviewer",
            PASS,
        ]),
        3,
    );
    let (last, id) = auto_plan(&env, "session timeout for idle users", 4);
    assert_eq!(last["status"], "handback", "{last}");
    let show = env.iced_json(&["run", "show"]).json();
    assert_eq!(
        show["lanes"][0]["reason"],
        format!(
            "plan-draft-refused: the draft changes `status`, which the loop keeps{}",
            refused_remedy(&id)
        )
    );
    assert!(env.read(&unit_file(&id)).contains("status: draft"));
    assert_eq!(
        starts(&env, "plan-reviewer", "design"),
        0,
        "no review of a refused draft"
    );
}

#[test]
fn a_planner_that_writes_anything_but_its_draft_is_refused() {
    let env = planning(
        &script(&[
            "role planner",
            "write src/sneaky.txt the planner was here",
            "draft-body {planned}",
        ]),
        3,
    );
    // The loop's own check, behind the confinement (SPEC 24.12) that would refuse the write itself.
    env.unconfined();
    let (_, id) = auto_plan(&env, "session timeout for idle users", 4);
    let show = env.iced_json(&["run", "show"]).json();
    assert_eq!(
        show["lanes"][0]["reason"],
        format!(
            "plan-draft-refused: the planner changed the checkout; its only output is the draft{}",
            refused_remedy(&id)
        )
    );
}

#[test]
fn refusals_of_auto_plan() {
    let env = TestEnv::initialized();
    env.commit_all("init");
    assert_refused!(
        &env,
        "planner-missing",
        3,
        &["build", "--auto-plan", "a new thing"]
    );
    let id = env.approved_unit("session timeout");
    let config = fake_runner(&env, "exit 0\n");
    env.patch_config(
        &json!({"runners": config["runners"], "roles": {"planner": {"runner": "fake"}}}),
    );
    env.commit_all("approved");
    assert_refused!(&env, "plan-not-draft", 3, &["build", "--auto-plan", &id]);
}

/// The one path under `.iced/run` ending in `tail`.
fn glob_one(env: &TestEnv, tail: &str) -> Option<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, tail: &str) -> Option<std::path::PathBuf> {
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if let Some(p) = walk(&path, tail) {
                    return Some(p);
                }
            } else if path.display().to_string().ends_with(tail) {
                return Some(path);
            }
        }
        None
    }
    walk(&env.path(".iced/run"), tail)
}

#[test]
fn planning_keeps_the_agent_ceiling() {
    let env = planning(
        &script(&[
            "role planner",
            "draft-body {planned}",
            "role plan-reviewer",
            "sleep 0.3",
            PASS,
            IMPLEMENTER,
        ]),
        3,
    );
    let out = env.iced_json(&[
        "build",
        "--auto-plan",
        "session timeout for idle users",
        "--pace-agents",
        "1",
    ]);
    assert_eq!(last_line(&out)["status"], "delivered", "{out:#?}");
    // The events say at most one agent was alive at any time: the reviewers took turns.
    let mut alive: i64 = 0;
    let mut most = 0;
    for line in env.read(".iced/run/events.jsonl").lines() {
        let e: Value = serde_json::from_str(line).expect("an event is JSON");
        match e["event"].as_str() {
            Some("agent_start") => alive += 1,
            Some("agent_end") => alive -= 1,
            _ => {}
        }
        most = most.max(alive);
    }
    assert_eq!(most, 1, "agents alive at once");
    assert_eq!(starts(&env, "plan-reviewer", "design"), 1);
    assert_eq!(starts(&env, "plan-reviewer", "record"), 1);
}

#[test]
fn a_reviewer_that_writes_has_no_answer() {
    let env = planning(
        &script(&[
            "role planner",
            "draft-body {planned}",
            "role plan-reviewer",
            "lens design",
            "write src/notes.txt the reviewer was here",
            "lens *",
            PASS,
        ]),
        3,
    );
    // The loop's own check, behind the confinement (SPEC 24.12) that would refuse the write itself.
    env.unconfined();
    env.patch_config(&json!({"plan": {"rounds": 1}}));
    env.commit_all("one round");
    let (last, id) = auto_plan(&env, "session timeout for idle users", 4);
    assert_eq!(last["status"], "handback", "{last}");
    let record = env.read(&format!("intent/{id}/plan-decision.md"));
    assert!(
        record.contains("- Round 1 design: no usable answer (the reviewer changed the checkout; a reviewer only reads)"),
        "{record}"
    );
    assert!(
        record.contains("- [ ] the design reviewer of the last round answered"),
        "{record}"
    );
    assert!(env.read(&unit_file(&id)).contains("status: draft"));
}
