//! The test writer (SPEC 20.17): after the implementer, a fresh agent writes tests on the lane
//! branch; the loop judges what its commits changed (only test paths), runs the definition of done
//! on its head, and turns its requests into escalations. The kills are in `crash/tester.rs`.

use crate::env::TestEnv;
use crate::loop_e2e::{build, lane_branch, own_checks, run_show, str_of, with_agent};
use crate::snap::{assert_read, text_block};
use serde_json::{json, Value};

/// The implementer's part of every script here: one commit, evidence for E1 and E2.
const IMPLEMENTER: &str =
    "role implementer\ncommit src/session.rs fn session() {}\nreport-ok E1 E2\n";

/// A buildable unit whose implementer and test writer are the fake agent following `tester` after
/// [`IMPLEMENTER`], with the test writer on and `commands` as the definition of done.
pub(crate) fn tester_env(tester: &str, commands: Value) -> (TestEnv, String) {
    let mut patch = own_checks(commands);
    crate::env::merge_json(
        &mut patch,
        &json!({"build": {"testWriter": true, "testWriterModel": "m-tests:high"}}),
    );
    with_agent(&format!("{IMPLEMENTER}role test-writer\n{tester}"), patch)
}

/// A test writer that commits a test the definition of done runs.
pub(crate) const GOOD_TESTER: &str =
    "commit tests/session_test.sh grep -q session src/session.rs\n";

/// The fake agent's starts in `role`.
pub(crate) fn starts(env: &TestEnv, role: &str) -> Vec<String> {
    env.agent_starts()
        .into_iter()
        .filter(|l| l.contains(&format!(" role={role} ")))
        .collect()
}

#[test]
fn a_test_writer_adds_its_tests_and_the_lane_delivers_both_commits() {
    let (env, id) = tester_env(GOOD_TESTER, json!(["bash tests/session_test.sh"]));
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let log = env.git_out(&["log", "--reverse", "--format=%s", &lane_branch(&id)]);
    let subjects: Vec<&str> = log.lines().rev().take(3).collect();
    assert_eq!(
        subjects,
        [
            format!("iced: deliver {id}").as_str(),
            "fake agent: tests/session_test.sh",
            "fake agent: src/session.rs"
        ],
        "{log}"
    );
    // One implementer, one test writer, with the test writer's model and effort.
    assert_eq!(starts(&env, "implementer").len(), 1);
    let testers = starts(&env, "test-writer");
    assert_eq!(testers.len(), 1, "{testers:?}");
    assert!(
        testers[0].contains(" model=m-tests effort=high"),
        "{testers:?}"
    );
    // The definition of done ran on the test writer's head, and that head is the one delivered.
    let run = str_of(&last, "run").to_owned();
    let shown = run_show(&env, &run);
    let steps = shown["lanes"][0]["steps"].as_array().unwrap();
    let of = |key: &str| {
        steps
            .iter()
            .find(|r| r["step"] == key)
            .unwrap_or_else(|| panic!("{key}: {shown:#}"))
    };
    assert_eq!(of("test-write")["status"], "done");
    let check = &of("test-check")["outcome"];
    assert_eq!(check["denied"], json!([]), "{check:#}");
    let tested = env.git_out(&["rev-parse", &format!("{}~1", lane_branch(&id))]);
    assert_eq!(of("receipt")["outcome"]["head"], tested.trim());
    assert_eq!(check["head"], tested.trim());
    // What `run show` says of it, as a person reads it.
    assert_read!(
        &env,
        "tester_run_show",
        crate::snap_step::run_show_text(&env, &run)
    );
}

#[test]
fn a_test_writer_whose_write_is_outside_the_test_paths_is_refused_by_the_guard() {
    let (env, id) = tester_env(
        "commit tests/session_test.sh true\ncommit src/session.rs fn session() { /* weakened */ }\n",
        json!(["true"]),
    );
    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "handback", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    let shown = run_show(&env, &run);
    let lane = &shown["lanes"][0];
    assert_eq!(lane["stage"], "handback");
    let reason = lane["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("the test writer's work is refused: `src/session.rs` (test-path-only): A test writer writes tests only"),
        "{reason}"
    );
    // Only the code path is denied; the test it wrote is a test path.
    assert!(!reason.contains("`tests/session_test.sh`"), "{reason}");
    // Nothing was validated or delivered, and the test writer ran once.
    let tip = env.git_out(&["log", "-1", "--format=%s", &lane_branch(&id)]);
    assert_eq!(tip.trim(), "fake agent: src/session.rs");
    assert_eq!(starts(&env, "test-writer").len(), 1);
    assert!(!lane["steps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["step"].as_str().unwrap().starts_with("dod-")));
    let handover = env.iced(&["run", "handover", &run]);
    assert_read!(
        &env,
        "tester_outside_test_paths_handover",
        text_block(&["run", "handover", "[RUN]"], &handover)
    );
}

#[test]
fn a_test_writer_that_leaves_work_uncommitted_or_a_bad_report_is_refused() {
    let (env, id) = tester_env(
        "commit tests/session_test.sh true\nwrite tests/later.sh true\nreport {\"summary\": \"done\", \"verdict\": \"pass\"}\n",
        json!(["true"]),
    );
    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "handback", "{out:#?}");
    let shown = run_show(&env, str_of(&last, "run"));
    let reason = shown["lanes"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("the test writer's work is refused: it left uncommitted or untracked changes in the worktree; its report `"),
        "{reason}"
    );
    assert!(reason.contains("unknown field `verdict`"), "{reason}");
}

#[test]
fn a_red_test_the_code_fails_sends_the_work_back_to_the_implementer() {
    // Attempt 1's code fails the test its test writer commits; attempt 2's implementer fixes it.
    let script = "attempt 1\nrole implementer\ncommit src/session.rs broken\nreport-ok E1 E2\nrole test-writer\ncommit tests/session_test.sh grep -q fixed src/session.rs\nattempt 2\nrole implementer\ncommit src/session.rs fixed\nreport-ok E1 E2\nrole test-writer\nprint nothing more to test\n";
    let mut patch = own_checks(json!(["bash tests/session_test.sh"]));
    crate::env::merge_json(&mut patch, &json!({"build": {"testWriter": true}}));
    let (env, id) = with_agent(script, patch);
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(starts(&env, "implementer").len(), 2);
    assert_eq!(starts(&env, "test-writer").len(), 2);
    let log = env.git_out(&["log", "--format=%s", &lane_branch(&id)]);
    assert!(log.contains("fake agent: tests/session_test.sh"), "{log}");
    // Attempt 2's brief names the failing command.
    let run = str_of(&last, "run").to_owned();
    let brief = env.read(&format!(".iced/run/{run}/{id}/brief-2.md"));
    assert!(
        brief.contains("tests/session_test.sh") && brief.contains("exited 1"),
        "{brief}"
    );
}

#[test]
fn a_research_request_is_an_escalation_the_person_sees() {
    let report = r#"{"summary": "E2 needs a clock I cannot fake", "research_request": {"question": "How does the service read the time?", "blocking": true, "tried": ["grep for now()", "read src/session.rs"]}}"#;
    let (env, id) = tester_env(&format!("report {report}\n"), json!(["true"]));
    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    // What comes next names who waits, and the person's verbs.
    assert!(
        out.stdout.contains(&format!(
            "the test writer waits for a person: `iced escalation show {id}`"
        )),
        "{out:#?}"
    );
    let shown = env.iced_json(&["escalation", "show", &id]).ok().json();
    assert_eq!(shown["kind"], "research");
    assert_eq!(shown["status"], "open");
    assert_eq!(
        shown["message"],
        "research request: How does the service read the time?; tried: grep for now(); read src/session.rs"
    );
    assert!(shown.get("proposal").is_none(), "{shown:#}");
    let text = env.iced(&["escalation", "show", &id]).ok();
    assert!(text.stdout.contains("research"), "{text:#?}");
    // The person answers it with guidance: the escalation is resolved for the next attempt.
    let rejected = env
        .iced_json(&["escalation", "reject", &id, "use the injected clock"])
        .ok()
        .json();
    assert_eq!(rejected["status"], "rejected");
    // The next attempt's implementer reads the person's answer as the test writer's request,
    // not as an escalation of its own.
    build(&env, &id, &[], 4);
    let run = crate::loop_e2e::str_of(&last, "run");
    let brief =
        std::fs::read_to_string(env.path(&format!(".iced/run/{run}/{id}/brief-2.md"))).unwrap();
    assert!(
        brief.contains(
            "the person rejected the test writer's research escalation: use the injected clock"
        ),
        "{brief}"
    );
}

#[test]
fn a_spec_change_request_carries_its_contract_lines_as_a_proposal() {
    let report = json!({"summary": "E2 is untestable as written", "spec_change_request": {
        "criterion_ref": "E2", "assumption": "idle means no request", "evidence": "the service has no idle clock",
        "changes": "- [E2] An idle session ends after 30 minutes without a request. {verify: test | tests/session_test.sh}",
        "sites": ["src/session.rs"], "blocking": true}});
    let (env, id) = tester_env(&format!("report {report}\n"), json!(["true"]));
    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    let shown = env.iced_json(&["escalation", "show", &id]).ok().json();
    assert_eq!(shown["kind"], "spec-change");
    assert_eq!(shown["changes"][0]["id"], "E2", "{shown:#}");
    assert!(shown["changes"][0]["becomes"]
        .as_str()
        .unwrap()
        .contains("without a request"));
    let applied = env.iced_json(&["escalation", "apply", &id]).ok().json();
    assert_eq!(applied["status"], "applied");
}

#[test]
fn the_test_writer_needs_the_implementer_runner() {
    let env = TestEnv::initialized();
    env.patch_config(&json!({"build": {"testWriter": true}}));
    let out = env.iced_json(&["list"]);
    let refused = out.refused(3, "config-invalid");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("`build.testWriter` is true, but no implementer runner is"),
        "{refused}"
    );
}
