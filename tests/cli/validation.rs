//! The validation stage end to end (SPEC section 22): independent validators as activities, each in
//! a read-only sandbox, their answers checked strictly, merged, findings minted by the loop,
//! refuted or confirmed, fix rounds with dispositions, and the close a person reads.
//!
//! `fixtures/fake-agent` plays every role: the implementer, each validator (`role validator`,
//! `lens <name>` sections) and the refuter (`role refuter`). Under the process driver
//! `roles.validator.runner` is the fake runner too; under the host driver the test is the host.
//! A script may say `{lane}`: it is replaced by the lane's id (the unit's) before the run starts.

use crate::env::{fake_runner, merge_json, TestEnv, NOW};
use crate::loop_e2e::{build, record, run_show, str_of, worktree_of};
use serde_json::{json, Value};
use std::path::PathBuf;

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
pub(crate) struct Start {
    pub(crate) attempt: u32,
    pub(crate) role: String,
    pub(crate) lens: String,
}

pub(crate) fn starts(env: &TestEnv) -> Vec<Start> {
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

pub(crate) fn lane_branch(id: &str) -> String {
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
pub(crate) fn validators_that_all_pass_deliver_the_lane() {
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
pub(crate) fn a_finding_the_refuter_refutes_is_closed_without_a_fix_round() {
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
pub(crate) fn a_confirmed_finding_is_fixed_in_a_second_attempt_and_ends_applied() {
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
pub(crate) fn a_finding_rejected_in_writing_is_shown_to_the_next_rounds_validators() {
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
pub(crate) fn open_findings_after_max_attempts_block_the_run_naming_them() {
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
pub(crate) const MUTATIONS: &[(&str, &str)] = &[
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
pub(crate) fn a_validator_that_changes_its_tree_is_discarded_and_run_again() {
    std::thread::scope(|scope| {
        for &(act, moved) in MUTATIONS {
            scope.spawn(move || {
                let script = implementer("")
                    + &section("*", "validator", "expectations", &format!("report {PASS}"))
                    + &format!("attempt *\nrole validator\nlens full\nstart 1\n{act}\nstart *\nreport {PASS}\n");
                let (env, id) = validated(&script, &["expectations", "full"], json!({}));
                // The loop's own check, behind the confinement (SPEC 24.12) that would refuse the write.
                env.unconfined();
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
pub(crate) fn a_validator_that_always_changes_its_tree_blocks_the_lane_naming_it() {
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
pub(crate) fn nothing_delivered(env: &TestEnv, id: &str) -> bool {
    env.git_out(&["log", "-1", "--format=%s", &lane_branch(id)])
        .trim()
        .starts_with("fake agent")
}

#[test]
pub(crate) fn a_validator_that_moves_the_lane_branch_blocks_the_lane_at_once() {
    let script = implementer("")
        + &section(
            "*",
            "validator",
            "full",
            &format!("git update-ref refs/heads/iced/{{lane}}/{{lane}} HEAD~1\nreport {PASS}"),
        );
    let (env, id) = validated(&script, &["full"], json!({}));
    // The loop's own check, behind the confinement (SPEC 24.12) that would refuse the write.
    env.unconfined();
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
pub(crate) fn a_validator_that_writes_into_the_lane_worktree_blocks_the_lane_at_once() {
    // The sandbox is `<worktrees>/<lane>.validators/<run>-<lane>-1-full`; the lane's worktree is
    // beside it.
    let script = implementer("")
        + &section(
            "*",
            "validator",
            "full",
            &format!("write ../../{{lane}}/stray.txt left by a validator\nreport {PASS}"),
        );
    let (env, id) = validated(&script, &["full"], json!({}));
    // The loop's own check, behind the confinement (SPEC 24.12) that would refuse the write.
    env.unconfined();
    let (_, run) = build_to_end(&env, &id, 4, "blocked");
    let show = run_show(&env, &run);
    let reason = str_of(&show["lanes"][0], "reason");
    assert!(
        reason.contains("the lane's worktree changed: stray.txt"),
        "{reason}"
    );
    assert_eq!(attempts_of(&env, "validator", "full"), [1], "not run again");
}

// ---- 8. validators run in parallel ----------------------------------------------------------------

/// Six validators (three lenses, three reviewers) run at once: each answers only once all six
/// have started, so a loop that ran fewer at a time would leave the first waiting for a start that
/// never comes (the fake agent gives up, exit 94, and the lens is not passed). Shown by the order
/// of the starts, not by a clock a busy machine can beat.
#[test]
pub(crate) fn six_validators_run_at_once() {
    let script = implementer("")
        + &section(
            "*",
            "validator",
            "*",
            &format!("await-starts validator 6\nreport {PASS}"),
        );
    let (env, id) = validated(
        &script,
        &["expectations", "failures", "rules"],
        // Room for all six at once (the default ceiling is 2).
        json!({"verify": {"reviewers": ["ruthless", "security", "fidelity"]}, "pace": {"agents": 6}}),
    );
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
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
pub(crate) fn evidence_md_reads_well_to_a_person() {
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
pub(crate) fn replace_ms(text: &str) -> String {
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

pub(crate) const EVIDENCE_MD: &str = r#"# Evidence: <unit>

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
