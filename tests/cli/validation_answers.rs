//! Validation (SPEC 22.3, 24.4): answers that are not answers, from process and host validators,
//! and reports that carry what only the loop writes. Split from validation.rs, whose helpers it uses.

use crate::env::{git_at, TestEnv};
use crate::loop_e2e::{
    agent_commit, hand_in, host_run, record, run_show, state_fingerprint, step, step_until, str_of,
    worktree_of, GOOD_REPORT,
};
use crate::validation::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

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
        answer.ends_with("activities/validate-expectations-1/out/output.json"),
        "{answer}"
    );
    // Named by run, lane, attempt and lens (SPEC 22.1).
    let sandbox = PathBuf::from(format!(
        "{}.validators/{run_id}-{id}-1-expectations",
        worktree.display()
    ));
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
        str_of(&v2, "receipt_path").ends_with("validate-failures-1/out/output.json"),
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
