//! The validation stage end to end (SPEC section 22): independent validators as activities, each in
//! a read-only sandbox, their answers checked strictly, merged, findings minted by the loop,
//! refuted or confirmed, fix rounds with dispositions, and the close a person reads.
//!
//! `fixtures/fake-agent` plays every role: the implementer, each validator (`role validator`,
//! `lens <name>` sections) and the refuter (`role refuter`). Under the process driver
//! `roles.validator.runner` is the fake runner too; under the host driver the test is the host.
//! A script may say `{lane}`: it is replaced by the lane's id (the unit's) before the run starts.

use crate::env::{fake_runner, git_at, merge_json, TestEnv, NOW};
use crate::loop_e2e::{
    agent_commit, build, hand_in, host_run, record, run_show, state_fingerprint, step, step_until,
    str_of, worktree_of, GOOD_REPORT, WAIT,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---- answers ----------------------------------------------------------------------------------

/// Everything kept: both expectations pass, F1 not triggered, C1 not violated.
pub(crate) const PASS: &str = r#"{"verdict": "pass", "expectations": [{"id": "E1", "result": "pass", "evidence": "tests/session.rs::refresh passes"}, {"id": "E2", "result": "pass", "evidence": "tests/session.rs::idle passes"}], "failures": [{"id": "F1", "triggered": false, "evidence": "an active session was never signed out"}], "constraints": [{"id": "C1", "violated": false, "evidence": "src/password.rs is untouched"}], "notes": "read the diff and ran the tests"}"#;

/// The expectations pass, but an S2 finding blocks.
pub(crate) const FAIL_S2: &str = r#"{"verdict": "fail", "expectations": [{"id": "E1", "result": "pass", "evidence": "refresh works"}, {"id": "E2", "result": "pass", "evidence": "idle test passes"}], "findings": [{"file_path": "src/session.rs", "criterion_ref": "E2", "finding_category": "correctness", "severity": "S2-major", "summary": "a background poll counts as activity", "failure_scenario": {"inputs": "an idle tab polling every minute", "expected": "the session ends after 30 minutes", "actual": "the session never ends"}}]}"#;

/// The refuter confirms `{lane}-F<n>` for the n given, with a sharper scenario.
pub(crate) fn confirm(ns: &[u32]) -> String {
    let entries: Vec<String> = ns
        .iter()
        .map(|n| format!(r#"{{"finding_id": "{{lane}}-F{n}", "decision": "confirmed", "reason": "reproduced with two tabs", "failure_scenario": {{"inputs": "two tabs, one idle and polling", "expected": "signed out at 30 minutes", "actual": "signed in after 2 hours"}}}}"#))
        .collect();
    format!(r#"{{"findings": [{}]}}"#, entries.join(", "))
}

// ---- scripts ----------------------------------------------------------------------------------

/// A section of a fake agent script: the lines of `body` apply to this attempt, role and lens
/// (each `*` for any), on every start.
pub(crate) fn section(attempt: &str, role: &str, lens: &str, body: &str) -> String {
    format!("attempt {attempt}\nrole {role}\nlens {lens}\nstart *\n{body}\n")
}

/// An implementer that commits and reports evidence for E1 and E2 on attempt 1, followed by
/// `later`: the sections of later attempts and of the other roles.
pub(crate) fn implementer(later: &str) -> String {
    format!(
        "{}{later}",
        section(
            "1",
            "implementer",
            "*",
            "commit src/session.rs sessions refresh on activity\nreport-ok E1 E2"
        )
    )
}

// ---- helpers ----------------------------------------------------------------------------------

/// A buildable unit whose implementer and validators are the fake agent following `script`
/// (`{lane}` replaced), with these lenses, no definition-of-done command, and `patch` on top.
pub(crate) fn validated(script: &str, lenses: &[&str], patch: Value) -> (TestEnv, String) {
    let (env, id) = TestEnv::buildable_with(|env| {
        let mut config = fake_runner(env, "");
        merge_json(
            &mut config,
            &json!({
                "roles": {"validator": {"runner": "fake"}},
                "verify": {"independent": true, "lenses": lenses, "commands": []}
            }),
        );
        merge_json(&mut config, &patch);
        config
    });
    set_script(&env, &id, script);
    (env, id)
}

pub(crate) fn set_script(env: &TestEnv, id: &str, script: &str) {
    std::fs::write(env.agent_script(), script.replace("{lane}", id)).unwrap();
}

/// One logged start of the fake agent.
#[derive(Debug, Clone, PartialEq)]
struct Start {
    attempt: u32,
    role: String,
    lens: String,
}

fn starts(env: &TestEnv) -> Vec<Start> {
    env.agent_starts()
        .iter()
        .map(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(&format!("{name}=")))
                    .unwrap_or_else(|| panic!("no {name}= in `{line}`"))
                    .to_owned()
            };
            Start {
                attempt: field("attempt").parse().unwrap(),
                role: field("role"),
                lens: field("lens"),
            }
        })
        .collect()
}

/// The attempts in which `role` (with `lens`, `*` for any) started, in order.
pub(crate) fn attempts_of(env: &TestEnv, role: &str, lens: &str) -> Vec<u32> {
    starts(env)
        .iter()
        .filter(|s| s.role == role && (lens == "*" || s.lens == lens))
        .map(|s| s.attempt)
        .collect()
}

pub(crate) fn events(env: &TestEnv) -> Vec<Value> {
    env.read(".iced/run/events.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Every step record of a run that went to its history (older attempts, redone validators).
pub(crate) fn history(env: &TestEnv, run: &str) -> Vec<Value> {
    std::fs::read_to_string(env.path(&format!(".iced/run/{run}/history.jsonl")))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn lane_branch(id: &str) -> String {
    format!("iced/{id}/{id}")
}

/// A file of the delivered lane branch.
pub(crate) fn delivered(env: &TestEnv, id: &str, name: &str) -> String {
    env.git_out(&["show", &format!("{}:intent/{id}/{name}", lane_branch(id))])
}

pub(crate) fn verify_json(env: &TestEnv, id: &str) -> Value {
    serde_json::from_str(&delivered(env, id, "verify.json")).expect("verify.json is JSON")
}

/// The finding `id` of a lane as `run show --json` has it.
pub(crate) fn finding<'a>(show: &'a Value, id: &str) -> &'a Value {
    show["lanes"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no finding {id} in {:#}", show["lanes"][0]["findings"]))
}

pub(crate) fn lane_dir(env: &TestEnv, run: &str, id: &str) -> PathBuf {
    env.path(&format!(".iced/run/{run}/{id}"))
}

/// `iced build` to its end; its final line and the run id.
pub(crate) fn build_to_end(env: &TestEnv, id: &str, exit: i32, status: &str) -> (Value, String) {
    let (out, last) = build(env, id, &[], exit);
    assert_eq!(
        last["status"],
        status,
        "{out:#?}\nstate:\n{}",
        env.read(".iced/run/state.json")
    );
    let run = str_of(&last, "run").to_owned();
    (last, run)
}

// ---- 1. every validator passes ----------------------------------------------------------------

#[test]
fn validators_that_all_pass_deliver_the_lane() {
    let script = implementer("") + &section("*", "validator", "*", &format!("report {PASS}"));
    let (env, id) = validated(&script, &["expectations", "failures"], json!({}));
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    // Every step report says what comes next.
    for line in out.stdout.lines().filter(|l| l.contains("\"next\"")) {
        let report: Value = serde_json::from_str(line).unwrap();
        assert!(
            !str_of(&report, "next").is_empty(),
            "a step without a next: {line}"
        );
    }

    // The implementer once, each validator once, as a validator with its lens; no refuter.
    assert_eq!(attempts_of(&env, "implementer", "*"), [1]);
    assert_eq!(attempts_of(&env, "validator", "expectations"), [1]);
    assert_eq!(attempts_of(&env, "validator", "failures"), [1]);
    assert_eq!(starts(&env).len(), 3, "{:?}", starts(&env));

    // Each validator had its own prompt, with its focus, and a sandbox that is gone now.
    let lane = lane_dir(&env, &run, &id);
    for lens in ["expectations", "failures"] {
        let prompt =
            std::fs::read_to_string(lane.join(format!("activities/validate-{lens}-1/prompt.md")))
                .unwrap_or_else(|e| panic!("the prompt of {lens}: {e}"));
        assert!(prompt.contains(&format!("(validator {lens})")), "{prompt}");
        assert!(prompt.contains("## Your focus"), "{prompt}");
        assert!(
            prompt.contains("[E1] Activity extends the session."),
            "{prompt}"
        );
    }
    let sandboxes = PathBuf::from(format!("{}.validators", worktree_of(&env, &id).display()));
    assert!(
        !sandboxes.exists(),
        "the sandboxes are left: {}",
        sandboxes.display()
    );
    let worktrees = env.git_out(&["worktree", "list", "--porcelain"]);
    assert!(!worktrees.contains(".validators"), "{worktrees}");

    let verify = verify_json(&env, &id);
    assert_eq!(verify["verdict"], "pass");
    assert_eq!(verify["independent"], true);
    assert_eq!(verify["needs_human"], false);
    assert_eq!(verify["attempt"], 1);
    let expectations = verify["expectations"].as_array().expect("expectations");
    assert_eq!(expectations.len(), 2, "{verify:#}");
    for e in expectations {
        assert_eq!(e["result"], "pass", "{verify:#}");
    }
    assert_eq!(verify["failures"], json!({"F1": false}));
    assert_eq!(verify["constraints"], json!({"C1": false}));
    let validators: Vec<&str> = verify["validators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| str_of(v, "name"))
        .collect();
    assert_eq!(validators, ["expectations", "failures"]);
    assert!(verify["validators"]
        .as_array()
        .unwrap()
        .iter()
        .all(|v| v["answered"] == true && v["verdict"] == "pass"));
    assert_eq!(verify["findings"], json!([]));

    let evidence = delivered(&env, &id, "evidence.md");
    assert!(evidence.contains("## Findings\n\nNone.\n"), "{evidence}");
    assert!(
        evidence.contains("independent validators (expectations, failures)"),
        "{evidence}"
    );

    // The verify metric travelled with the delivery.
    let metrics = env.git_out(&["show", &format!("{}:.iced/metrics.jsonl", lane_branch(&id))]);
    assert!(
        metrics
            .lines()
            .any(|l| l.contains("\"event\":\"verify\"") && l.contains("\"result\":\"pass\"")),
        "{metrics}"
    );

    // The events name each validator's role and lens, and the judge's outcome.
    let events = events(&env);
    for lens in ["expectations", "failures"] {
        assert!(
            events.iter().any(|e| e["event"] == "agent_start"
                && e["role"] == "validator"
                && e["lens"] == lens),
            "no agent_start of {lens}: {events:#?}"
        );
    }
    assert!(events
        .iter()
        .any(|e| e["event"] == "step_done" && e["step"] == "judge"));
    // `run show` has the judge's merge.
    let show = run_show(&env, &run);
    assert_eq!(
        record(&show, "judge")["outcome"]["merged"]["expectations"],
        json!({"E1": "pass", "E2": "pass"})
    );
}

// ---- 2. a refuted finding ---------------------------------------------------------------------

#[test]
fn a_finding_the_refuter_refutes_is_closed_without_a_fix_round() {
    let script = implementer("")
        + &section("*", "validator", "expectations", &format!("report {PASS}"))
        + &section("*", "validator", "failures", &format!("report {FAIL_S2}"))
        + &section(
            "*",
            "refuter",
            "*",
            r#"report {"findings": [{"finding_id": "{lane}-F1", "decision": "refuted", "reason": "the poll sends no credentials: it is not activity"}]}"#,
        );
    let (env, id) = validated(&script, &["expectations", "failures"], json!({}));
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let run = str_of(&last, "run").to_owned();
    // At the refute stage the steps speak of the refuter, not of "the validators" (issue 11).
    let at_refute: Vec<String> = crate::loop_e2e::json_lines(&out)
        .iter()
        .filter(|l| l["stage"] == "refute")
        .map(|l| str_of(l, "next").to_owned())
        .collect();
    assert!(
        at_refute.iter().any(|n| n.contains("the refuter is"))
            && at_refute.iter().all(|n| !n.contains("the validators are")),
        "{at_refute:#?}"
    );

    assert_eq!(
        attempts_of(&env, "implementer", "*"),
        [1],
        "a fix round ran"
    );
    assert_eq!(attempts_of(&env, "refuter", "refute"), [1]);
    let show = run_show(&env, &run);
    assert_eq!(show["lanes"][0]["attempt"], 1);
    let f1 = finding(&show, &format!("{id}-F1"));
    assert_eq!(f1["status"], "refuted", "{f1:#}");
    assert_eq!(f1["by"], "failures");
    assert_eq!(f1["round"], 1);
    assert_eq!(f1["evidence"]["severity"], "S2-major");
    assert!(
        str_of(&f1["refutation"], "reason").contains("not activity"),
        "{f1:#}"
    );

    // The refuter's prompt named the finding; it was told it did not find it.
    let prompt =
        std::fs::read_to_string(lane_dir(&env, &run, &id).join("activities/refute-1/prompt.md"))
            .expect("the refuter's prompt");
    assert!(
        prompt.contains(&format!("## {id}-F1 (S2-major")),
        "{prompt}"
    );

    let verify = verify_json(&env, &id);
    assert_eq!(verify["findings"][0]["id"], format!("{id}-F1"));
    assert_eq!(verify["findings"][0]["status"], "refuted");
    let evidence = delivered(&env, &id, "evidence.md");
    assert!(
        evidence.contains("refuted: the poll sends no credentials"),
        "{evidence}"
    );
}

// ---- 3. a confirmed finding: a fix round ------------------------------------------------------

#[test]
fn a_confirmed_finding_is_fixed_in_a_second_attempt_and_ends_applied() {
    let script = implementer(&section(
        "2",
        "implementer",
        "*",
        "commit src/session.rs sessions refresh on activity, not on polls\nreport-fix {lane}-F1 E1 E2",
    )) + &section("1", "validator", "full", &format!("report {FAIL_S2}"))
        + &section("2", "validator", "full", &format!("report {PASS}"))
        + &section("*", "refuter", "*", &format!("report {}", confirm(&[1])));
    let (env, id) = validated(&script, &["full"], json!({}));
    let (_, run) = build_to_end(&env, &id, 0, "delivered");

    assert_eq!(attempts_of(&env, "implementer", "*"), [1, 2]);
    assert_eq!(attempts_of(&env, "validator", "full"), [1, 2]);
    assert_eq!(
        attempts_of(&env, "refuter", "*"),
        [1],
        "no refuter without a finding"
    );

    // Attempt 2's brief lists the finding by id, with the refuter's sharper scenario.
    let lane = lane_dir(&env, &run, &id);
    let brief = std::fs::read_to_string(lane.join("brief-2.md")).expect("brief-2.md");
    assert!(brief.contains("## Findings to dispose of"), "{brief}");
    assert!(
        brief.contains(&format!("### {id}-F1 (S2-major, correctness)")),
        "{brief}"
    );
    assert!(brief.contains("two tabs, one idle and polling"), "{brief}");
    // The attempt-2 validator judged the new head.
    assert!(lane.join("activities/validate-full-2/prompt.md").is_file());

    // The finding ends applied, with the fix's commit, which is on the branch.
    let branch = lane_branch(&id);
    let fix = env
        .git_out(&["rev-parse", &format!("{branch}~1")])
        .trim()
        .to_owned();
    assert_eq!(
        env.git_out(&["log", "-1", "--format=%s", &fix]).trim(),
        "fake agent: src/session.rs"
    );
    let show = run_show(&env, &run);
    let f1 = finding(&show, &format!("{id}-F1"));
    assert_eq!(f1["status"], "applied", "{f1:#}");
    assert_eq!(f1["disposition"]["commit"], fix.as_str(), "{f1:#}");
    assert_eq!(f1["disposition"]["attempt"], 2, "{f1:#}");
    assert_eq!(f1["refutation"]["decision"], "confirmed", "{f1:#}");
    assert_eq!(
        f1["evidence"]["failure_scenario"]["actual"],
        "signed in after 2 hours"
    );
    assert_eq!(show["lanes"][0]["findings"].as_array().unwrap().len(), 1);

    let verify = verify_json(&env, &id);
    assert_eq!(verify["attempt"], 2);
    assert_eq!(verify["findings"][0]["status"], "applied");
    let evidence = delivered(&env, &id, "evidence.md");
    assert!(
        evidence.contains(&format!("applied in {fix}")),
        "{evidence}"
    );
    // Attempt 1's judge went to the history with its minted finding.
    let judged: Vec<Value> = history(&env, &run)
        .into_iter()
        .filter(|r| r["step"] == "judge")
        .collect();
    assert_eq!(judged.len(), 1);
    assert_eq!(judged[0]["outcome"]["minted"], json!([format!("{id}-F1")]));
}

// ---- 4. a finding rejected in writing ---------------------------------------------------------

#[test]
fn a_finding_rejected_in_writing_is_shown_to_the_next_rounds_validators() {
    const REASON: &str =
        "a poll is activity by the contract: Goal says active, and the tab is open";
    let rejected = format!(
        r#"report {{"summary": "kept as is", "evidence": [{{"expectation": "E1", "kind": "test", "ref": "t1"}}, {{"expectation": "E2", "kind": "test", "ref": "t2"}}], "dispositions": [{{"finding_id": "{{lane}}-F1", "action": "rejected", "reason": "{REASON}"}}]}}"#
    );
    let script = implementer(&section("2", "implementer", "*", &rejected))
        + &section("*", "validator", "expectations", &format!("report {PASS}"))
        + &section("1", "validator", "failures", &format!("report {FAIL_S2}"))
        + &section("2", "validator", "failures", &format!("report {PASS}"))
        + &section("*", "refuter", "*", &format!("report {}", confirm(&[1])));
    let (env, id) = validated(&script, &["expectations", "failures"], json!({}));
    let (_, run) = build_to_end(&env, &id, 0, "delivered");
    assert_eq!(attempts_of(&env, "implementer", "*"), [1, 2]);

    let lane = lane_dir(&env, &run, &id);
    for lens in ["expectations", "failures"] {
        let prompt =
            std::fs::read_to_string(lane.join(format!("activities/validate-{lens}-2/prompt.md")))
                .expect("the round-2 prompt");
        assert!(prompt.contains("rejected in writing"), "{prompt}");
        let line = prompt
            .lines()
            .find(|l| l.contains(&format!("{id}-F1")))
            .unwrap_or_else(|| panic!("{lens}: the prompt does not name {id}-F1:\n{prompt}"));
        assert!(line.contains(REASON), "{line}");
        let first =
            std::fs::read_to_string(lane.join(format!("activities/validate-{lens}-1/prompt.md")))
                .unwrap();
        assert!(!first.contains("rejected in writing"), "{first}");
    }
    // A rejected finding does not block: the round-2 validators judged the reason and passed.
    let show = run_show(&env, &run);
    let f1 = finding(&show, &format!("{id}-F1"));
    assert_eq!(f1["status"], "rejected", "{f1:#}");
    assert_eq!(f1["disposition"]["reason"], REASON);
    assert_eq!(show["status"], "delivered");
    let evidence = delivered(&env, &id, "evidence.md");
    assert!(
        evidence.contains(&format!("rejected in writing: {REASON}")),
        "{evidence}"
    );
}

// ---- 5. findings that stay open -----------------------------------------------------------------

#[test]
fn open_findings_after_max_attempts_block_the_run_naming_them() {
    let script = implementer(&section(
        "2",
        "implementer",
        "*",
        "commit src/session.rs sessions refresh on activity, not on polls\nreport-fix {lane}-F1 E1 E2",
    )) + &section("*", "validator", "*", &format!("report {FAIL_S2}"))
        + &section("*", "refuter", "*", &format!("report {}", confirm(&[1, 2])));
    let (env, id) = validated(&script, &["full"], json!({"verify": {"maxAttempts": 2}}));
    let (last, run) = build_to_end(&env, &id, 4, "blocked");
    assert_eq!(last["action"], "blocked");

    assert_eq!(attempts_of(&env, "implementer", "*"), [1, 2]);
    assert_eq!(attempts_of(&env, "validator", "full"), [1, 2]);
    assert_eq!(attempts_of(&env, "refuter", "*"), [1, 2]);
    let show = run_show(&env, &run);
    assert_eq!(show["status"], "blocked");
    let lane = &show["lanes"][0];
    assert_eq!(lane["stage"], "blocked");
    let reason = str_of(lane, "reason");
    assert!(reason.contains(&format!("{id}-F2")), "{reason}");
    assert!(
        !reason.contains(&format!("{id}-F1 ")),
        "F1 was applied: {reason}"
    );
    assert!(reason.contains("2 attempts"), "{reason}");
    assert_eq!(finding(&show, &format!("{id}-F1"))["status"], "applied");
    assert_eq!(finding(&show, &format!("{id}-F2"))["status"], "open");
    // Nothing was delivered, and the run says why in its events.
    let tip = env.git_out(&["log", "-1", "--format=%s", &lane_branch(&id)]);
    assert_eq!(tip.trim(), "fake agent: src/session.rs");
    let blocked: Vec<Value> = events(&env)
        .into_iter()
        .filter(|e| e["event"] == "run_blocked")
        .collect();
    assert_eq!(blocked.len(), 1, "{blocked:#?}");
    assert!(
        str_of(&blocked[0], "reason").contains(&format!("{id}-F2")),
        "{blocked:#?}"
    );
}

// ---- 6. validators that change their tree ------------------------------------------------------

/// Each case: what the validator does on its first start, and what the record must say moved.
const MUTATIONS: &[(&str, &str)] = &[
    (
        "write notes.txt a validator's scratch file",
        "files changed: notes.txt",
    ),
    ("commit notes.txt a validator's commit", "HEAD moved from"),
    (
        "git checkout -q -b x",
        "the branch changed from a detached HEAD to x",
    ),
];

#[test]
fn a_validator_that_changes_its_tree_is_discarded_and_run_again() {
    std::thread::scope(|scope| {
        for &(act, moved) in MUTATIONS {
            scope.spawn(move || {
                let script = implementer("")
                    + &section("*", "validator", "expectations", &format!("report {PASS}"))
                    + &format!("attempt *\nrole validator\nlens full\nstart 1\n{act}\nstart *\nreport {PASS}\n");
                let (env, id) = validated(&script, &["expectations", "full"], json!({}));
                let (_, run) = build_to_end(&env, &id, 0, "delivered");

                assert_eq!(attempts_of(&env, "validator", "full"), [1, 1], "{act}: run again once");
                assert_eq!(attempts_of(&env, "validator", "expectations"), [1], "{act}: a validator beside it is not blamed");
                let mutation: Vec<Value> = events(&env)
                    .into_iter()
                    .filter(|e| e["event"] == "validator_mutation")
                    .collect();
                assert_eq!(mutation.len(), 1, "{act}: {mutation:#?}");
                assert_eq!(mutation[0]["step"], "validate-full");
                assert!(mutation[0]["moved"].to_string().contains(moved), "{act}: {mutation:#?}");
                let failed: Vec<Value> = history(&env, &run)
                    .into_iter()
                    .filter(|r| r["step"] == "validate-full")
                    .collect();
                assert_eq!(failed.len(), 1, "{act}: {failed:#?}");
                assert_eq!(failed[0]["status"], "failed");
                let what = failed[0]["outcome"]["mutation"].to_string();
                assert!(what.contains(moved), "{act}: the record says {what}");
                assert!(failed[0]["outcome"].get("answer").is_none(), "{act}: the answer was kept");

                let show = run_show(&env, &run);
                assert_eq!(show["lanes"][0]["mutations"], 1);
                assert_eq!(record(&show, "validate-full")["status"], "done");
                // The lane branch and the person's checkout did not move.
                let subjects = env.git_out(&["log", "--format=%s", &lane_branch(&id)]);
                assert!(!subjects.contains("notes.txt"), "{act}: {subjects}");
                assert_eq!(env.git_out(&["status", "--porcelain"]), "", "{act}");
                assert!(!env.path("notes.txt").exists());
            });
        }
    });
}

#[test]
fn a_validator_that_always_changes_its_tree_blocks_the_lane_naming_it() {
    let script = implementer("")
        + &section(
            "*",
            "validator",
            "full",
            &format!("write notes.txt scratch\nreport {PASS}"),
        );
    let (env, id) = validated(&script, &["full"], json!({}));
    let (_, run) = build_to_end(&env, &id, 4, "blocked");
    // Two re-runs (max_mutations), then blocked.
    assert_eq!(attempts_of(&env, "validator", "full"), [1, 1, 1]);
    let show = run_show(&env, &run);
    let reason = str_of(&show["lanes"][0], "reason");
    assert!(reason.contains("validate-full"), "{reason}");
    assert!(
        reason.contains("3 times"),
        "the validator changed its tree 3 times: {reason}"
    );
    let mutations = events(&env)
        .iter()
        .filter(|e| e["event"] == "validator_mutation")
        .count();
    assert_eq!(mutations, 3);
    assert!(nothing_delivered(&env, &id));
}

/// Nothing was delivered on the lane branch.
fn nothing_delivered(env: &TestEnv, id: &str) -> bool {
    env.git_out(&["log", "-1", "--format=%s", &lane_branch(id)])
        .trim()
        .starts_with("fake agent")
}

#[test]
fn a_validator_that_moves_the_lane_branch_blocks_the_lane_at_once() {
    let script = implementer("")
        + &section(
            "*",
            "validator",
            "full",
            &format!("git update-ref refs/heads/iced/{{lane}}/{{lane}} HEAD~1\nreport {PASS}"),
        );
    let (env, id) = validated(&script, &["full"], json!({}));
    let (_, run) = build_to_end(&env, &id, 4, "blocked");
    assert_eq!(attempts_of(&env, "validator", "full"), [1], "not run again");
    let show = run_show(&env, &run);
    let reason = str_of(&show["lanes"][0], "reason");
    assert!(
        reason.contains("changed the lane itself: the lane branch moved"),
        "{reason}"
    );
    assert!(reason.contains("validate-full"), "{reason}");
    assert_eq!(record(&show, "validate-full")["status"], "failed");
    assert!(
        events(&env).iter().any(|e| e["event"] == "run_blocked"
            && e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("the lane branch moved"))),
        "no run_blocked event"
    );
}

/// SPEC 22.2: a validator that writes into the lane's own worktree (not its sandbox) changed the
/// lane: it blocks at once, naming the file.
#[test]
fn a_validator_that_writes_into_the_lane_worktree_blocks_the_lane_at_once() {
    // The sandbox is `<worktrees>/<lane>.validators/full-1`; the lane's worktree is beside it.
    let script = implementer("")
        + &section(
            "*",
            "validator",
            "full",
            &format!("write ../../{{lane}}/stray.txt left by a validator\nreport {PASS}"),
        );
    let (env, id) = validated(&script, &["full"], json!({}));
    let (_, run) = build_to_end(&env, &id, 4, "blocked");
    let show = run_show(&env, &run);
    let reason = str_of(&show["lanes"][0], "reason");
    assert!(
        reason.contains("the lane's worktree changed: stray.txt"),
        "{reason}"
    );
    assert_eq!(attempts_of(&env, "validator", "full"), [1], "not run again");
}

// ---- 7. answers that are not answers ------------------------------------------------------------

/// A valid finding, to be spoiled.
const FINDING: &str = r#"{"file_path": "src/session.rs", "criterion_ref": "E2", "finding_category": "correctness", "severity": "S3-minor", "summary": "s", "failure_scenario": {"inputs": "i", "expected": "e", "actual": "a"}}"#;

/// The bad answers the issue names: (what, the answer, the field its problem must name).
fn bad_answers() -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "an unknown key",
            PASS.replacen(
                r#""verdict": "pass""#,
                r#""verdict": "pass", "confidence": 0.9"#,
                1,
            ),
            "confidence",
        ),
        (
            "a bare S2",
            format!(
                r#"{{"verdict": "fail", "findings": [{}]}}"#,
                FINDING.replace("S3-minor", "S2")
            ),
            "severity",
        ),
        (
            "an identity field in a finding",
            format!(
                r#"{{"verdict": "fail", "findings": [{}]}}"#,
                FINDING.replacen('{', r#"{"finding_id": "X-F9", "#, 1)
            ),
            "finding_id",
        ),
        (
            "no JSON at all",
            "I looked at it and it seems fine to me.".to_owned(),
            "answer-unparsable",
        ),
    ]
}

#[test]
fn process_validators_with_bad_answers_are_no_answer_and_need_a_person() {
    // One good lens decides every expectation; each bad one is recorded as no answer.
    let bad = bad_answers();
    let lenses = ["failures", "rules", "full", "ruthless"];
    let mut script =
        implementer("") + &section("*", "validator", "expectations", &format!("report {PASS}"));
    for (lens, (_, answer, _)) in lenses.iter().zip(&bad) {
        script += &section("*", "validator", lens, &format!("report {answer}"));
    }
    let (env, id) = validated(
        &script,
        &["expectations", "failures", "rules", "full"],
        json!({"verify": {"reviewers": ["ruthless"]}}),
    );
    let (_, run) = build_to_end(&env, &id, 0, "delivered");
    assert_eq!(starts(&env).len(), 6, "{:?}", starts(&env));

    let show = run_show(&env, &run);
    for (lens, (what, _, field)) in lenses.iter().zip(&bad) {
        let r = record(&show, &format!("validate-{lens}"));
        assert_eq!(r["status"], "done", "{what}: {r:#}");
        assert_eq!(r["outcome"]["answer"], Value::Null, "{what}: {r:#}");
        let problem = str_of(&r["outcome"], "problem");
        assert!(
            problem.contains(field),
            "{what}: the problem does not name `{field}`: {problem}"
        );
    }
    let judge = &record(&show, "judge")["outcome"];
    assert_eq!(judge["needs_human"], true, "{judge:#}");
    assert_eq!(judge["merged"]["unanswered"], json!(lenses), "{judge:#}");
    assert_eq!(judge["undecided"], json!([]), "{judge:#}");
    // Nothing a bad answer said was minted.
    assert_eq!(show["lanes"][0]["findings"], json!([]));

    let verify = verify_json(&env, &id);
    assert_eq!(verify["needs_human"], true);
    assert_eq!(verify["status"], "done", "a person accepts it");
    for v in verify["validators"].as_array().unwrap() {
        let answered = v["name"] == "expectations";
        assert_eq!(v["answered"], answered, "{v}");
        assert_eq!(v["problem"].is_string(), !answered, "{v}");
    }
    let unit = delivered(&env, &id, "iced.md");
    assert!(unit.lines().any(|l| l == "status: done"), "{unit}");
    // The person is told why they are asked.
    let evidence = delivered(&env, &id, "evidence.md");
    assert!(
        evidence.contains("because no usable answer from failures, rules, full, ruthless"),
        "{evidence}"
    );
}

#[test]
fn a_lens_without_an_answer_blocks_when_no_other_decides_the_expectations() {
    let (_, answer, _) = bad_answers().swap_remove(0);
    let script = implementer("")
        + &section("*", "validator", "failures", &format!("report {answer}"))
        + &section(
            "*",
            "validator",
            "rules",
            r#"report {"verdict": "pass", "constraints": [{"id": "C1", "violated": false}]}"#,
        );
    let (env, id) = validated(&script, &["failures", "rules"], json!({}));
    let (_, run) = build_to_end(&env, &id, 4, "blocked");
    let show = run_show(&env, &run);
    let reason = str_of(&show["lanes"][0], "reason");
    assert!(reason.contains("needs a person"), "{reason}");
    assert!(reason.contains("E1, E2"), "{reason}");
    assert_eq!(record(&show, "judge")["outcome"]["needs_human"], true);
    assert!(nothing_delivered(&env, &id));
}

#[test]
fn host_validators_with_bad_answers_are_refused_at_the_receipt() {
    let (env, id) = TestEnv::buildable(json!({
        "verify": {"independent": true, "lenses": ["expectations", "failures"], "commands": []}
    }));
    let (run_id, agent) = host_run(&env, &id);
    let worktree = worktree_of(&env, &id);

    // The implementer's report may not carry a verdict: refused, naming it.
    let receipt = str_of(&agent, "receipt_path").to_owned();
    agent_commit(&worktree, "src/session.rs", "fixed\n");
    std::fs::write(
        &receipt,
        GOOD_REPORT.replacen('{', r#"{"verdict": "pass", "#, 1),
    )
    .unwrap();
    let before = state_fingerprint(&env);
    let r = hand_in(&env, &receipt).refused(3, "report-forged");
    assert!(str_of(&r, "reason").contains("`verdict`"), "{r}");
    assert!(
        state_fingerprint(&env) == before,
        "a forged report changed the state"
    );
    std::fs::write(&receipt, GOOD_REPORT).unwrap();
    hand_in(&env, &receipt).ok();

    // The first validator, handed to the host: read only, in its own sandbox.
    let v = step_until(&env, |s| s["action"] == "start_agent");
    assert_eq!(v["role"], "validator", "{v:#}");
    assert_eq!(v["read_only"], true, "{v:#}");
    assert_eq!(v["stage"], "validate", "{v:#}");
    assert_eq!(v["attempt"], 1, "{v:#}");
    let dir = lane_dir(&env, &run_id, &id).join("activities/validate-expectations-1");
    assert!(same(str_of(&v, "brief"), &dir.join("prompt.md")), "{v:#}");
    let answer = str_of(&v, "receipt_path").to_owned();
    assert!(
        answer.ends_with("activities/validate-expectations-1/output.json"),
        "{answer}"
    );
    let sandbox = PathBuf::from(format!("{}.validators/expectations-1", worktree.display()));
    assert!(same(str_of(&v, "worktree"), &sandbox), "{v:#}");
    let lane_head = git_at(&worktree, &["rev-parse", "HEAD"]);
    assert_eq!(git_at(&sandbox, &["rev-parse", "HEAD"]), lane_head);
    let detached = std::process::Command::new("git")
        .args(["symbolic-ref", "-q", "HEAD"])
        .current_dir(&sandbox)
        .status()
        .unwrap();
    assert!(!detached.success(), "the sandbox is on a branch");

    // Each malformed answer is refused, naming the field, and nothing is recorded.
    for (what, text, field) in bad_answers().into_iter().take(3) {
        std::fs::write(&answer, &text).unwrap();
        let before = state_fingerprint(&env);
        let out = hand_in(&env, &answer);
        let code = out.json()["refused"]["code"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(
            code == "answer-invalid" || code == "answer-forged",
            "{what}: {out:#?}"
        );
        let r = out.refused(3, &code);
        assert!(
            str_of(&r, "reason").contains(field),
            "{what}: the refusal does not name `{field}`: {r}"
        );
        assert!(
            state_fingerprint(&env) == before,
            "{what}: the state changed"
        );
    }
    assert_eq!(
        hand_in(&env, &answer).json()["refused"]["code"],
        "answer-forged",
        "an identity field is forged, not merely invalid"
    );

    // An answer with no JSON is taken: that lens needs a person.
    std::fs::write(&answer, "I could not tell.").unwrap();
    let taken = hand_in(&env, &answer).ok().json();
    assert_eq!(taken["action"], "advanced", "{taken:#}");

    // The second validator, once the first is checked; it answers well and decides everything.
    let v2 = step_until(&env, |s| s["action"] == "start_agent");
    assert!(
        str_of(&v2, "receipt_path").ends_with("validate-failures-1/output.json"),
        "{v2:#}"
    );
    assert_ne!(v2["receipt_key"], v["receipt_key"]);
    std::fs::write(str_of(&v2, "receipt_path"), PASS).unwrap();
    hand_in(&env, str_of(&v2, "receipt_path")).ok();
    step_until(&env, |s| s["action"] == "delivered");

    let show = run_show(&env, &run_id);
    let r = record(&show, "validate-expectations");
    assert_eq!(r["outcome"]["answer"], Value::Null, "{r:#}");
    assert!(
        str_of(&r["outcome"], "problem").contains("answer-unparsable"),
        "{r:#}"
    );
    let verify = verify_json(&env, &id);
    assert_eq!(verify["needs_human"], true);
    assert_eq!(verify["independent"], true);
    // The host's validators were logged as started and ended, with their lens.
    let events = events(&env);
    for lens in ["expectations", "failures"] {
        for kind in ["agent_start", "agent_end"] {
            assert!(
                events
                    .iter()
                    .any(|e| e["event"] == kind && e["lens"] == lens && e["driver"] == "host"),
                "no {kind} of {lens}"
            );
        }
    }
    assert_eq!(step(&env)["action"], "nothing");
}

fn same(a: &str, b: &Path) -> bool {
    Path::new(a).canonicalize().ok() == b.canonicalize().ok()
}

#[test]
fn a_process_report_carrying_a_verdict_fails_its_receipt_naming_it() {
    let script = section(
        "*",
        "implementer",
        "*",
        &format!(
            "commit src/session.rs fixed\nreport {}",
            GOOD_REPORT
                .replace('\n', " ")
                .replacen('{', r#"{"verdict": "pass", "#, 1)
        ),
    );
    let (env, id) = validated(&script, &["full"], json!({"verify": {"maxAttempts": 1}}));
    let (_, run) = build_to_end(&env, &id, 4, "blocked");
    let show = run_show(&env, &run);
    let receipt = record(&show, "receipt");
    assert_eq!(receipt["status"], "failed");
    let missing = receipt["outcome"]["missing"].to_string();
    assert!(
        missing.contains("report-forged") && missing.contains("`verdict`"),
        "{missing}"
    );
    assert_eq!(
        attempts_of(&env, "validator", "*"),
        Vec::<u32>::new(),
        "validators judged a forged report"
    );
}

// ---- 8. validators run in parallel ----------------------------------------------------------------

/// Six validators (three lenses, three reviewers), each taking a second: the validate stage, from
/// the first validator's `agent_start` to the judge's `step_done` as they appear in events.jsonl,
/// ends well before six seconds. Watched from outside (the events' own `ts` has whole seconds).
#[test]
fn six_validators_of_a_second_each_take_about_a_second_together() {
    let script =
        implementer("") + &section("*", "validator", "*", &format!("sleep 1\nreport {PASS}"));
    let (env, id) = validated(
        &script,
        &["expectations", "failures", "rules"],
        // Room for all six at once (the default ceiling is 2).
        json!({"verify": {"reviewers": ["ruthless", "security", "fidelity"]}, "pace": {"agents": 6}}),
    );
    let mut child = env
        .command()
        .args(["build", &id, "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("iced starts");
    let started = Instant::now();
    let (mut first_start, mut judged) = (None, None);
    let status = loop {
        let text = std::fs::read_to_string(env.path(".iced/run/events.jsonl")).unwrap_or_default();
        for line in text.lines() {
            let e: Value = serde_json::from_str(line).unwrap();
            if first_start.is_none() && e["event"] == "agent_start" && e["role"] == "validator" {
                first_start = Some(Instant::now());
            }
            if judged.is_none() && e["event"] == "step_done" && e["step"] == "judge" {
                judged = Some(Instant::now());
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < WAIT,
            "the build did not end within {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "build: {status:?}");
    let (first_start, judged) = (
        first_start.expect("a validator agent_start"),
        judged.expect("the judge's step_done"),
    );
    let took = judged - first_start;
    eprintln!(
        "six one-second validators: {} ms from the first validator's start to the judge",
        took.as_millis()
    );
    assert!(
        took < Duration::from_millis(4500),
        "the validate stage took {took:?}"
    );
    let mut lenses: Vec<String> = starts(&env)
        .into_iter()
        .filter(|s| s.role == "validator")
        .map(|s| s.lens)
        .collect();
    lenses.sort();
    assert_eq!(
        lenses,
        [
            "expectations",
            "failures",
            "fidelity",
            "rules",
            "ruthless",
            "security"
        ]
    );
    let verify = verify_json(&env, &id);
    assert_eq!(verify["validators"].as_array().unwrap().len(), 6);
}

// ---- 9. the close a person reads --------------------------------------------------------------------

/// `evidence.md` of a delivered run with one refuted and one noted finding, with what differs from
/// run to run replaced: the unit id, the run id, commit shas, command durations.
#[test]
fn evidence_md_reads_well_to_a_person() {
    let expectations = r#"report {"verdict": "pass", "expectations": [{"id": "E1", "result": "pass", "evidence": "tests/session.rs::refresh passes"}, {"id": "E2", "result": "pass", "evidence": "tests/session.rs::idle passes"}], "findings": [{"file_path": "src/session.rs", "criterion_ref": "E1", "finding_category": "maintainability", "severity": "S3-minor", "summary": "the refresh interval is a magic number", "failure_scenario": {"inputs": "a change of the idle limit", "expected": "one constant to edit", "actual": "300 is written in two places"}}], "notes": "ran the session tests"}"#;
    let failures = r#"report {"verdict": "fail", "failures": [{"id": "F1", "triggered": false, "evidence": "an active person stayed signed in for 2 hours"}], "findings": [{"file_path": "src/session.rs", "criterion_ref": "F1", "finding_category": "correctness", "severity": "S2-major", "summary": "a refresh racing a sign-out signs the person back in", "failure_scenario": {"inputs": "sign out in one tab while another refreshes", "expected": "signed out", "actual": "signed in again"}}]}"#;
    let script = implementer("")
        + &section("*", "validator", "expectations", expectations)
        + &section("*", "validator", "failures", failures)
        + &section(
            "*",
            "refuter",
            "*",
            r#"report {"findings": [{"finding_id": "{lane}-F2", "decision": "refuted", "reason": "sign-out revokes the token first; the racing refresh is rejected (src/session.rs:88)"}]}"#,
        );
    let (env, id) = validated(
        &script,
        &["expectations", "failures"],
        json!({"verify": {"commands": ["true"]}}),
    );
    let (_, run) = build_to_end(&env, &id, 0, "delivered");
    let text = delivered(&env, &id, "evidence.md");
    let mut normal = text
        .replace(&run, "<run>")
        .replace(&id, "<unit>")
        .replace(NOW, "<now>");
    for sha in env
        .git_out(&["rev-list", &lane_branch(&id)])
        .lines()
        .filter(|s| !s.is_empty())
    {
        normal = normal.replace(sha, "<sha>");
    }
    let normal = replace_ms(&normal);
    if normal != EVIDENCE_MD {
        panic!("evidence.md differs from the snapshot; it reads:\n{normal}\n--- (as delivered:)\n{text}");
    }
}

/// `(123 ms)` -> `(<n> ms)`.
fn replace_ms(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let (head, tail) = rest.split_at(open);
        out.push_str(head);
        let digits = tail[1..].chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && tail[1 + digits..].starts_with(" ms)") {
            out.push_str("(<n> ms)");
            rest = &tail[1 + digits + 4..];
        } else {
            out.push('(');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

const EVIDENCE_MD: &str = r#"# Evidence: <unit>

session timeout

Verdict: **PASS** (attempt 1, <now>, run `<run>`): independent validators (expectations, failures) pass it, and no blocking finding is open.
A person accepts it (the unit's autonomy asks for that): `iced accept <unit>`.

## Builder summary

the fake agent did attempt 1

## Definition of done

- `true`: exit 0 (<n> ms)

## Expectations

### [E1] Activity extends the session.

- Result: **pass**
- Verify: test | tests/session.rs
- Builder evidence: test: fake test for E1
- Judged pass by `expectations`: tests/session.rs::refresh passes

### [E2] An idle session still ends after 30 minutes.

- Result: **pass**
- Verify: test | tests/session.rs
- Builder evidence: test: fake test for E2
- Judged pass by `expectations`: tests/session.rs::idle passes

## Failure conditions and constraints

- [F1] not triggered: An active person is signed out.
- [C1] not violated: No change to how passwords are checked.

## Findings

### <unit>-F1: the refresh interval is a magic number

- S3-minor, maintainability; found in round 1 by `expectations`
- File: `src/session.rs`
- Criterion: E1
- Scenario: given a change of the idle limit, expected one constant to edit, actually 300 is written in two places
- Outcome: noted (does not block)

### <unit>-F2: a refresh racing a sign-out signs the person back in

- S2-major, correctness; found in round 1 by `failures`
- File: `src/session.rs`
- Criterion: F1
- Scenario: given sign out in one tab while another refreshes, expected signed out, actually signed in again
- Outcome: refuted: sign-out revokes the token first; the racing refresh is rejected (src/session.rs:88)

## Commits

- <sha> fake agent: src/session.rs
"#;

/// The agents alive at once at their most, from events.jsonl: each agent from its `agent_start`
/// to its `agent_end` (by lane, attempt and step), positions taken from the log's order; an end
/// with no start counts for nothing (SPEC 21.5).
fn most_agents_alive(env: &TestEnv) -> usize {
    let text = std::fs::read_to_string(env.path(".iced/run/events.jsonl")).unwrap_or_default();
    let key = |e: &Value| {
        format!(
            "{} {} {}",
            e["lane"],
            e["attempt"],
            e["step"].as_str().unwrap_or("implement")
        )
    };
    let (mut alive, mut most) = (std::collections::BTreeSet::new(), 0);
    for line in text.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        match e["event"].as_str() {
            Some("agent_start") => {
                alive.insert(key(&e));
            }
            Some("agent_end") => {
                alive.remove(&key(&e));
            }
            _ => {}
        }
        most = most.max(alive.len());
    }
    most
}

/// SPEC 20.9: with `pace.agents: 2`, six validators never have more than two agents alive at
/// once (the implementer included), and all six still answer: the run is delivered.
#[test]
fn six_validators_under_a_ceiling_of_two_never_run_more_than_two_at_once() {
    let script =
        implementer("") + &section("*", "validator", "*", &format!("sleep 0.3\nreport {PASS}"));
    let (env, id) = validated(
        &script,
        &["expectations", "failures", "rules"],
        json!({"verify": {"reviewers": ["ruthless", "security", "fidelity"]}, "pace": {"agents": 2}}),
    );
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let validators = starts(&env)
        .iter()
        .filter(|s| s.role == "validator")
        .count();
    assert_eq!(validators, 6, "{:?}", starts(&env));
    assert_eq!(
        most_agents_alive(&env),
        2,
        "{}",
        env.read(".iced/run/events.jsonl")
    );
    assert!(
        out.stdout.contains("ceiling (pace.agents)"),
        "a validator waited its turn, and the report said so: {out:#?}"
    );
}

/// SPEC 20.10: `iced run pause <run> --until T` launches no agent before T (the run is not paused:
/// what needs no agent goes on), and `iced run resume` lifts it.
#[test]
fn a_run_paced_until_later_launches_no_validator_until_resumed() {
    let script = implementer("") + &section("*", "validator", "*", &format!("report {PASS}"));
    let (env, id) = validated(&script, &["full"], json!({}));
    let (_, last) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&last, "run").to_owned();
    let later = (chrono::Utc::now() + chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let paced = env
        .iced_json(&["run", "pause", &run, "--until", &later])
        .ok()
        .json();
    assert_eq!(paced["status"], "running", "{paced}");
    let waiting = step_until(&env, |s| {
        s["action"] == "waiting" && str_of(s, "next").contains("paced")
    });
    assert!(str_of(&waiting, "next").contains(&later), "{waiting}");
    assert!(
        !starts(&env).iter().any(|s| s.role == "validator"),
        "a validator started while paced"
    );
    env.iced_json(&["run", "pause", &run, "--until", "tomorrow"])
        .refused(3, "time-invalid");
    env.iced_json(&["run", "resume", &run]).ok();
    step_until(&env, |s| s["action"] == "delivered");
    assert_eq!(
        starts(&env)
            .iter()
            .filter(|s| s.role == "validator")
            .count(),
        1
    );
}

/// SPEC 20.11: a run records the pace in force when admitted (a dated ruling over the config's
/// own value, a flag over both); resuming it on another pace is refused until `--repace`.
#[test]
fn a_run_keeps_its_pace_and_a_resume_on_another_is_refused_until_repaced() {
    let script = implementer("") + &section("*", "validator", "*", &format!("report {PASS}"));
    let (env, id) = validated(
        &script,
        &["full"],
        json!({"pace": {"agents": 3, "rulings": [
            {"from": "2020-01-01T00:00:00Z", "agents": 1, "why": "quota halved"},
            {"from": "2999-01-01T00:00:00Z", "agents": 9, "why": "later"}
        ]}}),
    );
    env.commit_all("pace");
    let (_, last) = build(&env, &id, &["--no-wait"], 0);
    let run = str_of(&last, "run").to_owned();
    let shown = run_show(&env, &run);
    assert_eq!(shown["pace"]["agents"], 1, "the ruling in force: {shown:#}");
    assert_eq!(shown["pace"]["ruling"]["why"], "quota halved");
    let handover = env.iced(&["run", "handover"]).ok().stdout;
    assert!(
        handover.contains("1 agent at once (ruling of 2020-01-01T00:00:00Z: quota halved)"),
        "{handover}"
    );

    // The config changes under the live run: a person resuming it is told so.
    env.patch_config(&json!({"pace": {"rulings": []}}));
    env.commit_all("no more rulings");
    let refused = env.iced_json(&["build", &id]).refused(3, "pace-changed");
    assert!(
        str_of(&refused, "reason").contains("agents 1 -> 3"),
        "{refused}"
    );
    env.iced_json(&["run", "resume", &run])
        .refused(3, "pace-changed");
    // A flag wins over the config; --repace records it.
    let (_, last) = build(&env, &id, &["--pace-agents", "2", "--repace"], 0);
    assert_eq!(last["status"], "delivered");
    let shown = run_show(&env, &run);
    assert_eq!(shown["pace"]["agents"], 2, "{shown:#}");
    let events = env.read(".iced/run/events.jsonl");
    assert!(
        events.contains(r#""event":"repaced""#) && events.contains("agents 1 -> 2"),
        "{events}"
    );
}

/// SPEC 20.11: with a work window, a run that has worked `workMinutes` launches nothing for
/// `pauseMinutes`, then goes on to delivery.
#[test]
fn a_work_window_pauses_launches_then_the_run_goes_on() {
    let script =
        implementer("") + &section("*", "validator", "*", &format!("sleep 0.5\nreport {PASS}"));
    let (env, id) = validated(
        &script,
        &["full"],
        // 0.3 s of work, then 0.6 s launching nothing.
        json!({"pace": {"workMinutes": 0.005, "pauseMinutes": 0.01}}),
    );
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let events = env.read(".iced/run/events.jsonl");
    assert!(events.contains(r#""why":"work_window""#), "{events}");
}

/// SPEC 20.9: a new run is not admitted while the agents alive fill the ceiling; once they end,
/// it is.
#[test]
fn a_new_run_is_refused_while_the_ceiling_is_full() {
    let script = section(
        "*",
        "implementer",
        "*",
        "sleep 1\ncommit src/session.rs sessions refresh on activity\nreport-ok E1 E2",
    );
    let (env, first) = validated(
        &script,
        &["full"],
        json!({"pace": {"agents": 1}, "verify": {"independent": false}}),
    );
    let second = env.approved_unit("idle sessions end");
    env.commit_all("a second unit");
    let (_, last) = build(&env, &first, &["--no-wait"], 0);
    assert_eq!(last["action"], "waiting", "{last}");
    let refused = env
        .iced_json(&["build", &second])
        .refused(3, "ceiling-full");
    assert!(
        str_of(&refused, "reason").contains("pace.agents is 1"),
        "{refused}"
    );
    // The first run's agent ends: the second is admitted.
    build(&env, &first, &[], 0);
    let (_, last) = build(&env, &second, &[], 0);
    assert_eq!(last["status"], "delivered", "{last}");
}
