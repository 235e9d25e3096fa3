//! The person's verbs, end to end (SPEC sections 3, 5, 7, 8, 9, 12 and 14): new, edit, lint,
//! approve, status; the frozen contract; the legal moves of the status machine; the autonomy rule;
//! hold, use, decision, autonomy, stats, child and list.

use crate::env::{unit_file, TestEnv, GOOD_BODY, NOW};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::process::{Command, Stdio};

/// SPEC section 7, written out independently of iced: the lines of a `##` section, trailing
/// whitespace stripped, empty lines dropped. (GOOD_BODY holds no HTML comments.)
fn spec_contract_hash(body: &str) -> String {
    let section = |name: &str| -> String {
        let mut inside = false;
        let mut out = Vec::new();
        for line in body.lines() {
            if let Some(heading) = line.strip_prefix("## ") {
                inside = heading.trim().eq_ignore_ascii_case(name);
                continue;
            }
            if inside && !line.trim_end().is_empty() {
                out.push(line.trim_end());
            }
        }
        out.join("\n")
    };
    let payload = format!(
        "## intent\n{}\n## expectations\n{}",
        section("intent"),
        section("expectations")
    );
    Sha256::digest(payload.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn git_head(env: &TestEnv) -> String {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env.root())
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn lint_codes(env: &TestEnv, id: &str, stage: &str) -> (i32, Vec<String>) {
    let run = env.iced_json(&["lint", id, "--stage", stage]);
    let report = run.json();
    let codes = report["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{run:?}"))
        .iter()
        .map(|e| e["code"].as_str().unwrap().to_owned())
        .collect();
    (run.code, codes)
}

fn events(env: &TestEnv, id: &str) -> Vec<Value> {
    env.metrics()
        .into_iter()
        .filter(|e| e["id"] == id)
        .collect()
}

// ---- the main flow ------------------------------------------------------------------------

#[test]
fn new_edit_lint_approve_records_the_signoff() {
    let env = TestEnv::initialized();
    let id = env.new_unit("Session timeout");
    assert_eq!(id, "001-session-timeout");
    env.set_body(&id, GOOD_BODY);
    let run = env.iced_json(&["lint", &id, "--stage", "signoff"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["errors"], json!([]));

    let approved = env.iced_json(&["approve", &id, "--yes"]).ok().json();
    assert_eq!(approved["id"], id);
    assert_eq!(approved["status"], "approved");
    assert_eq!(approved["auto"], false);

    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["status"], "approved");
    assert_eq!(status["approved_by"], "Test Person");
    assert_eq!(status["approved_at"], NOW);
    assert_eq!(status["base_ref"], git_head(&env));
    let hash = status["contract_hash"].as_str().unwrap();
    assert_eq!(hash.len(), 64);
    assert!(
        hash.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{hash}"
    );
    assert_eq!(hash, spec_contract_hash(GOOD_BODY));
    assert_eq!(approved["contract_hash"], hash);
    assert_eq!(approved["approved_at"], NOW);
    assert_eq!(approved["approved_by"], "Test Person");
    assert_eq!(approved["base_ref"], git_head(&env));
    assert_eq!(status["lint"], json!({"errors": 0, "warnings": 0}));
    assert_eq!(lint_codes(&env, &id, "validate"), (0, vec![]));
    assert!(env
        .read(&unit_file(&id))
        .contains(&format!("\ncontract_hash: {hash}\n")));

    let events = env.metrics();
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0]["event"], "created");
    assert_eq!(events[0]["id"], id);
    assert_eq!(events[0]["ts"], NOW);
    assert_eq!(events[0]["type"], "feature");
    assert_eq!(events[0]["tier"], "M");
    assert_eq!(events[0]["risk"], "medium");
    // The unit's one Q item, counted at its first sign-off (SPEC 12.1).
    assert_eq!(events[1]["event"], "questions");
    assert_eq!(events[1]["count"], 1);
    assert_eq!(events[2]["event"], "signoff");
    assert_eq!(events[2]["id"], id);
    assert_eq!(events[2]["result"], "approved");
    assert_eq!(events[2]["auto"], false);
}

#[test]
fn approve_outside_git_records_a_null_base_ref() {
    let env = TestEnv::without_git();
    env.iced_json(&["init"]).ok();
    let id = env.good_unit("Session timeout");
    let approved = env.iced_json(&["approve", &id, "--yes"]).ok().json();
    assert_eq!(approved["base_ref"], Value::Null);
    // No git user, no $USER: the spec's last fallback.
    assert_eq!(approved["approved_by"], "human");
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["status"], "approved");
    assert_eq!(status["base_ref"], Value::Null);
    assert!(env.read(&unit_file(&id)).contains("\nbase_ref: null\n"));
}

#[test]
fn approve_in_a_repository_without_commits_records_a_null_base_ref() {
    let env = TestEnv::without_git();
    env.git(&["init", "-q", "-b", "main"]);
    env.iced_json(&["init"]).ok();
    let id = env.good_unit("Session timeout");
    let approved = env.iced_json(&["approve", &id, "--yes"]).ok().json();
    assert_eq!(approved["base_ref"], Value::Null);
}

// ---- the frozen contract --------------------------------------------------------------------

#[test]
fn editing_an_expectation_after_approval_changes_the_contract() {
    let env = TestEnv::initialized();
    let id = env.approved_unit("Session timeout");
    let rel = unit_file(&id);
    let text = env.read(&rel);
    env.write(
        &rel,
        text.replace(
            "Activity extends the session.",
            "Activity extends the session a bit.",
        ),
    );
    let (code, codes) = lint_codes(&env, &id, "validate");
    assert_eq!(code, 3);
    assert_eq!(codes, ["contract-changed"]);
    let (code, codes) = lint_codes(&env, &id, "accept");
    assert_eq!(code, 3);
    assert!(codes.contains(&"contract-changed".to_owned()), "{codes:?}");
}

#[test]
fn editing_the_goal_after_approval_changes_the_contract() {
    let env = TestEnv::initialized();
    let id = env.approved_unit("Session timeout");
    let rel = unit_file(&id);
    let text = env.read(&rel);
    env.write(
        &rel,
        text.replace("while they are active", "while they are busy"),
    );
    assert_eq!(
        lint_codes(&env, &id, "validate"),
        (3, vec!["contract-changed".to_owned()])
    );
}

#[test]
fn editing_context_or_answered_questions_keeps_the_contract() {
    let env = TestEnv::initialized();
    let id = env.approved_unit("Session timeout");
    let rel = unit_file(&id);
    let text = env.read(&rel);
    let edited = text
        .replace(
            "- [code] Sessions expire after 5 minutes in src/session.rs.",
            "- [code] Sessions expire after 5 minutes in src/session.rs.\n- [product] Support gets calls about it.",
        )
        .replace("-> A: 30 minutes.", "-> A: 30 minutes, as today.");
    assert_ne!(edited, text);
    env.write(&rel, edited);
    assert_eq!(lint_codes(&env, &id, "validate"), (0, vec![]));
}

#[test]
fn editing_the_title_keeps_the_contract() {
    let env = TestEnv::initialized();
    let id = env.approved_unit("Session timeout");
    env.set_field(&id, "title", "Sessions that last while people work");
    assert_eq!(lint_codes(&env, &id, "validate"), (0, vec![]));
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["title"], "Sessions that last while people work");
}

#[test]
fn a_crlf_rewrite_keeps_the_contract() {
    let env = TestEnv::initialized();
    let id = env.approved_unit("Session timeout");
    let rel = unit_file(&id);
    let text = env.read(&rel);
    env.write(&rel, text.replace('\n', "\r\n"));
    assert_eq!(lint_codes(&env, &id, "validate"), (0, vec![]));
}

// ---- legal moves of the status machine ------------------------------------------------------

#[test]
fn approving_a_blocked_unit_clears_blocked_from() {
    let env = TestEnv::initialized();
    let id = env.good_unit("Session timeout");
    env.set_field(&id, "status", "blocked");
    env.set_field(&id, "blocked_from", "draft");
    let approved = env.iced_json(&["approve", &id, "--yes"]).ok().json();
    assert_eq!(approved["status"], "approved");
    let text = env.read(&unit_file(&id));
    assert!(text.contains("\nstatus: approved\n"), "{text}");
    assert!(text.contains("\nblocked_from: null\n"), "{text}");
    assert_eq!(text.matches("blocked_from:").count(), 1);
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["blocked_from"], Value::Null);
}

/// An approved unit the loop has taken to `done` (here by hand), with or without its evidence.
fn done_unit(env: &TestEnv, evidence: bool) -> String {
    let id = env.approved_unit("Session timeout");
    env.set_field(&id, "status", "done");
    if evidence {
        env.write(
            &format!("intent/{id}/evidence.md"),
            "# Evidence\n\nAll green.\n",
        );
    }
    id
}

#[test]
fn accepting_a_done_unit_with_evidence_records_who_and_when() {
    let env = TestEnv::initialized();
    let id = done_unit(&env, true);
    let accepted = env.iced_json(&["accept", &id]).ok().json();
    assert_eq!(
        accepted,
        json!({"id": id, "status": "accepted", "accepted_at": NOW, "accepted_by": "Test Person"})
    );
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["status"], "accepted");
    assert_eq!(status["accepted_at"], NOW);
    assert_eq!(status["accepted_by"], "Test Person");
    let last = env.metrics().pop().unwrap();
    assert_eq!(last["event"], "accept");
    assert_eq!(last["id"], id);
    assert_eq!(last["auto"], false);
}

#[test]
fn accepting_without_evidence_is_refused_with_lint_errors() {
    let env = TestEnv::initialized();
    let id = done_unit(&env, false);
    let before = env.read_bytes(&unit_file(&id));
    let metrics_before = env.metrics();
    let run = env.iced_json(&["accept", &id]);
    run.refused(3, "lint-errors");
    let report = run.json();
    let codes: Vec<&str> = report["lint"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["evidence-missing"]);
    assert_eq!(env.read_bytes(&unit_file(&id)), before);
    assert_eq!(env.metrics(), metrics_before);
}

#[test]
fn rejecting_a_done_unit_sends_it_back_to_building_with_the_reason_logged() {
    let env = TestEnv::initialized();
    let id = done_unit(&env, true);
    let decisions_before = env.read(&format!("intent/{id}/decisions.md"));
    let run = env
        .iced_json(&[
            "reject", &id, "The", "idle", "timeout", "is", "still", "5", "minutes",
        ])
        .ok()
        .json();
    let reason = "The idle timeout is still 5 minutes";
    assert_eq!(
        run,
        json!({"id": id, "status": "building", "reason": reason})
    );
    assert!(env.read(&unit_file(&id)).contains("\nstatus: building\n"));
    let decisions = env.read(&format!("intent/{id}/decisions.md"));
    assert_eq!(
        decisions,
        format!(
            "{decisions_before}\n## {NOW} (person)\n- Decision: rejected at acceptance\n- Why: {reason}\n"
        )
    );
    let last = env.metrics().pop().unwrap();
    assert_eq!(last["event"], "reject");
    assert_eq!(last["reason"], reason);
}

#[test]
fn abandoning_a_draft_closes_it_as_rejected() {
    let env = TestEnv::initialized();
    let id = env.new_unit("dark mode");
    let run = env.iced_json(&["abandon", &id]).ok().json();
    assert_eq!(run, json!({"id": id, "status": "rejected"}));
    assert!(env.read(&unit_file(&id)).contains("\nstatus: rejected\n"));
    let last = env.metrics().pop().unwrap();
    assert_eq!(last["event"], "abandon");
    assert_eq!(last["id"], id);
}

#[test]
fn abandoning_an_approved_or_blocked_unit_is_allowed() {
    let env = TestEnv::initialized();
    let approved = env.approved_unit("one");
    env.iced_json(&["abandon", &approved]).ok();
    let blocked = env.good_unit("two");
    env.set_field(&blocked, "status", "blocked");
    env.iced_json(&["abandon", &blocked]).ok();
    for id in [approved, blocked] {
        let status = env.iced_json(&["status", &id]).ok().json();
        assert_eq!(status["status"], "rejected", "{id}");
    }
}

// ---- the autonomy rule ----------------------------------------------------------------------

/// A good unit with no Q items, autonomy 3 and the given risk.
fn autonomous_unit(env: &TestEnv, risk: &str) -> String {
    let id = env.new_unit("Session timeout");
    env.set_body(
        &id,
        &GOOD_BODY.replace("- [Q1] How long is idle? -> A: 30 minutes.\n", ""),
    );
    env.set_field(&id, "autonomy", "3");
    env.set_field(&id, "risk", risk);
    id
}

#[test]
fn the_autonomy_rule_approves_without_asking() {
    let env = TestEnv::initialized();
    let id = autonomous_unit(&env, "low");
    // No --yes, and stdin is not a terminal.
    let approved = env.iced_json(&["approve", &id]).ok().json();
    assert_eq!(approved["auto"], true);
    assert_eq!(approved["approved_by"], "auto");
    assert_eq!(approved["status"], "approved");
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["approved_by"], "auto");
    let last = env.metrics().pop().unwrap();
    assert_eq!(last["event"], "signoff");
    assert_eq!(last["auto"], true);
    assert_eq!(last["result"], "approved");
}

#[test]
fn an_answered_question_means_a_person_signs_off() {
    let env = TestEnv::initialized();
    let id = autonomous_unit(&env, "low");
    let rel = unit_file(&id);
    env.write(
        &rel,
        format!("{}- [Q1] Is 30 minutes right? -> A: Yes.\n", env.read(&rel)),
    );
    let before = env.read_bytes(&rel);
    env.iced_json(&["approve", &id])
        .refused(4, "confirmation-needed");
    assert_eq!(env.read_bytes(&rel), before);
}

#[test]
fn high_risk_means_a_person_signs_off() {
    let env = TestEnv::initialized();
    let id = autonomous_unit(&env, "high");
    env.iced_json(&["approve", &id])
        .refused(4, "confirmation-needed");
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["effective_autonomy"], 1);
    assert_eq!(status["status"], "draft");
}

#[test]
fn a_max_autonomy_below_three_means_a_person_signs_off() {
    let env = TestEnv::initialized();
    let mut config: Value = serde_json::from_str(&env.read(".iced/config.json")).unwrap();
    config["maxAutonomy"] = json!(2);
    env.write(".iced/config.json", config.to_string());
    let id = autonomous_unit(&env, "low");
    env.iced_json(&["approve", &id])
        .refused(4, "confirmation-needed");
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["effective_autonomy"], 2);
    // With --yes the person approves it, and it is not recorded as automatic.
    let approved = env.iced_json(&["approve", &id, "--yes"]).ok().json();
    assert_eq!(approved["auto"], false);
    assert_eq!(approved["approved_by"], "Test Person");
}

// ---- hold and unhold --------------------------------------------------------------------------

#[test]
fn hold_adds_one_line_and_unhold_removes_it() {
    let env = TestEnv::initialized();
    let id = env.good_unit("Session timeout");
    // Comments, an unknown key and a blank line in the frontmatter must all survive.
    env.set_field(&id, "team", "payments # the owners");
    let rel = unit_file(&id);
    let original = env
        .read(&rel)
        .replacen("---\n", "---\n# kept comment\n\n", 1);
    env.write(&rel, &original);

    let held = env
        .iced_json(&["hold", &id, "waiting", "on", "legal"])
        .ok()
        .json();
    assert_eq!(held, json!({"id": id, "held": "waiting on legal"}));
    let close = original[3..].find("\n---\n").unwrap() + 4;
    let expected = format!(
        "{}held: waiting on legal\n{}",
        &original[..close],
        &original[close..]
    );
    assert_eq!(env.read(&rel), expected);
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["held"], "waiting on legal");

    // Holding again replaces the reason in place.
    env.iced_json(&["hold", &id, "legal: still waiting"]).ok();
    let text = env.read(&rel);
    assert_eq!(
        text,
        expected.replace("held: waiting on legal", "held: \"legal: still waiting\"")
    );

    let released = env.iced_json(&["unhold", &id]).ok().json();
    assert_eq!(released, json!({"id": id, "held": null}));
    assert_eq!(env.read(&rel), original);
}

#[test]
fn unhold_of_a_unit_that_is_not_held_changes_nothing() {
    let env = TestEnv::initialized();
    let id = env.good_unit("Session timeout");
    let rel = unit_file(&id);
    let before = env.read_bytes(&rel);
    let run = env.iced_json(&["unhold", &id]).ok().json();
    assert_eq!(run, json!({"id": id, "held": null}));
    assert_eq!(env.read_bytes(&rel), before);
    // Also on a closed unit that is not held: nothing to change, nothing refused.
    env.iced_json(&["abandon", &id]).ok();
    let before = env.read_bytes(&rel);
    env.iced_json(&["unhold", &id]).ok();
    assert_eq!(env.read_bytes(&rel), before);
}

#[test]
fn a_held_unit_is_still_shown_linted_and_logged() {
    let env = TestEnv::initialized();
    let id = env.good_unit("Session timeout");
    env.iced_json(&["hold", &id, "legal"]).ok();
    env.iced_json(&["status", &id]).ok();
    assert_eq!(lint_codes(&env, &id, "signoff"), (0, vec![]));
    env.iced_json(&["decision", &id, "--decision", "d", "--why", "w"])
        .ok();
    env.iced_json(&["autonomy", "2", &id]).ok();
    env.iced_json(&["abandon", &id]).ok();
}

// ---- use --------------------------------------------------------------------------------------

#[test]
fn use_sets_and_clears_the_active_unit() {
    let env = TestEnv::initialized();
    let first = env.new_unit("first");
    let second = env.new_unit("second");
    assert_eq!(env.read(".iced/active"), format!("{second}\n"));
    let run = env.iced_json(&["use", "1"]).ok().json();
    assert_eq!(run, json!({"active": first}));
    assert_eq!(env.read(".iced/active"), format!("{first}\n"));
    let status = env.iced_json(&["status"]).ok().json();
    assert_eq!(status["id"], first);
    assert_eq!(status["active"], true);
    let list = env.iced_json(&["list"]).ok().json();
    let active: Vec<&Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["active"] == true)
        .map(|u| &u["id"])
        .collect();
    assert_eq!(active, [&json!(first)]);
    let run = env.iced_json(&["use", "none"]).ok().json();
    assert_eq!(run, json!({"active": null}));
    assert!(!env.path(".iced/active").exists());
    // Clearing twice is fine.
    env.iced_json(&["use", "none"]).ok();
}

// ---- decision ---------------------------------------------------------------------------------

#[test]
fn decision_appends_the_spec_block() {
    let env = TestEnv::initialized();
    let id = env.new_unit("Session timeout");
    let rel = format!("intent/{id}/decisions.md");
    let header = env.read(&rel);
    assert!(
        header.starts_with(&format!("# Decisions: {id}\n")),
        "{header}"
    );
    let run = env
        .iced_json(&[
            "decision",
            &id,
            "--decision",
            "Refresh on every request",
            "--why",
            "It is what the middleware already does",
        ])
        .ok()
        .json();
    assert_eq!(run, json!({"id": id, "path": rel}));
    let one = format!(
        "\n## {NOW} (agent)\n- Decision: Refresh on every request\n- Why: It is what the middleware already does\n"
    );
    assert_eq!(env.read(&rel), format!("{header}{one}"));

    env.iced_json(&[
        "decision",
        &id,
        "--decision",
        "Keep the\ncookie name",
        "--why",
        "Clients\n\n## pin it",
        "--alternatives",
        "A new cookie\n- or a header",
    ])
    .ok();
    let two = format!(
        "\n## {NOW} (agent)\n- Decision: Keep the cookie name\n- Why: Clients ## pin it\n- Alternatives: A new cookie - or a header\n"
    );
    assert_eq!(env.read(&rel), format!("{header}{one}{two}"));
}

// ---- autonomy ---------------------------------------------------------------------------------

#[test]
fn autonomy_of_a_unit_sets_its_field_and_reports_the_effective_level() {
    let env = TestEnv::initialized();
    let id = env.new_unit("dark mode");
    let run = env.iced_json(&["autonomy", "2", &id]).ok().json();
    assert_eq!(
        run,
        json!({"id": id, "autonomy": 2, "effective_autonomy": 2})
    );
    assert!(env.read(&unit_file(&id)).contains("\nautonomy: 2\n"));
    env.set_field(&id, "risk", "high");
    let run = env.iced_json(&["autonomy", "3", &id]).ok().json();
    assert_eq!(
        run,
        json!({"id": id, "autonomy": 3, "effective_autonomy": 1})
    );
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["autonomy"], 3);
    assert_eq!(status["effective_autonomy"], 1);
}

#[test]
fn autonomy_without_a_unit_sets_the_config_and_keeps_other_keys() {
    let env = TestEnv::initialized();
    let mut config: Value = serde_json::from_str(&env.read(".iced/config.json")).unwrap();
    config["ourOwnKey"] = json!({"nested": [1, 2, 3]});
    config["gate"] = json!("warn");
    env.write(
        ".iced/config.json",
        serde_json::to_string_pretty(&config).unwrap(),
    );
    let run = env.iced_json(&["autonomy", "2"]).ok().json();
    assert_eq!(run, json!({"autonomy": 2}));
    let after: Value = serde_json::from_str(&env.read(".iced/config.json")).unwrap();
    let mut expected = config.clone();
    expected["autonomy"] = json!(2);
    assert_eq!(after, expected);
    // New units start at the new default.
    let id = env.new_unit("dark mode");
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["autonomy"], 2);
}

#[test]
fn new_units_start_at_autonomy_by_risk_when_set() {
    let env = TestEnv::initialized();
    let mut config: Value = serde_json::from_str(&env.read(".iced/config.json")).unwrap();
    config["autonomyByRisk"]["medium"] = json!(0);
    env.write(".iced/config.json", config.to_string());
    let id = env.new_unit("dark mode");
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["autonomy"], 0);
    assert_eq!(status["risk"], "medium");
}

// ---- stats ------------------------------------------------------------------------------------

fn accepted_history(units: usize) -> String {
    let mut out = String::new();
    for i in 1..=units {
        let id = format!("{i:03}-unit");
        for (event, extra) in [
            ("created", json!({"type": "chore", "tier": "S"})),
            ("signoff", json!({"result": "approved", "auto": false})),
            ("verify", json!({"result": "pass", "attempt": 1})),
            ("accept", json!({"auto": false})),
        ] {
            let mut line = json!({
                "ts": format!("2026-09-{:02}T10:00:00Z", i),
                "id": id, "event": event, "risk": "low", "autonomy": 1
            });
            for (k, v) in extra.as_object().unwrap() {
                line[k] = v.clone();
            }
            out.push_str(&format!("{line}\n"));
        }
    }
    out
}

#[test]
fn stats_suggest_promoting_low_risk_after_ten_clean_acceptances() {
    let env = TestEnv::initialized();
    env.write(
        ".iced/metrics.jsonl",
        format!("{}not json\n", accepted_history(10)),
    );
    let stats = env.iced_json(&["stats"]).ok().json();
    let suggestions = stats["suggestions"].as_array().unwrap();
    assert_eq!(suggestions.len(), 1, "{stats}");
    assert_eq!(suggestions[0]["risk"], "low");
    assert_eq!(suggestions[0]["from"], 1);
    assert_eq!(suggestions[0]["to"], 2);
    assert!(suggestions[0]["reason"]
        .as_str()
        .is_some_and(|r| !r.is_empty()));
    assert_eq!(stats["overall"]["units"], 10);
    assert_eq!(stats["overall"]["accepted"], 10);
    assert_eq!(stats["overall"]["signoffFirstApprovalRate"], 100.0);
    assert_eq!(stats["overall"]["verifyFirstPassRate"], 100.0);
    assert_eq!(stats["overall"]["humanRejectionRate"], 0.0);
    assert_eq!(stats["byRisk"]["low"]["units"], 10);
    assert_eq!(stats["byAutonomy"]["1"]["units"], 10);
    // Only a suggestion: the config is not changed.
    let config: Value = serde_json::from_str(&env.read(".iced/config.json")).unwrap();
    assert_eq!(config["autonomyByRisk"]["low"], Value::Null);
}

#[test]
fn stats_do_not_suggest_after_a_rejection_or_too_few_units() {
    let env = TestEnv::initialized();
    env.write(".iced/metrics.jsonl", accepted_history(9));
    let stats = env.iced_json(&["stats"]).ok().json();
    assert_eq!(stats["suggestions"], json!([]));

    let rejected = format!(
        "{}{}\n",
        accepted_history(10),
        json!({"ts": "2026-09-05T11:00:00Z", "id": "005-unit", "event": "reject", "reason": "no", "risk": "low", "autonomy": 1})
    );
    env.write(".iced/metrics.jsonl", rejected);
    let stats = env.iced_json(&["stats"]).ok().json();
    assert_eq!(stats["suggestions"], json!([]));
    assert_eq!(stats["overall"]["humanRejectionRate"], 10.0);
}

#[test]
fn stats_with_no_metrics_have_nothing_to_rate() {
    let env = TestEnv::initialized();
    let stats = env.iced_json(&["stats"]).ok().json();
    assert_eq!(stats["overall"]["units"], 0);
    assert_eq!(stats["overall"]["signoffFirstApprovalRate"], Value::Null);
    assert_eq!(stats["overall"]["questionsPerUnit"], 0.0);
    assert_eq!(stats["suggestions"], json!([]));
}

// ---- new, child and list ----------------------------------------------------------------------

#[test]
fn new_infers_the_type_from_the_first_word() {
    let env = TestEnv::initialized();
    // (line, extra args, type, tier, title)
    let cases: [(&str, &[&str], &str, &str, &str); 7] = [
        (
            "fix the login timeout",
            &[],
            "bug",
            "S",
            "fix the login timeout",
        ),
        ("Bug: crash on save", &[], "bug", "S", "crash on save"),
        ("chore: x", &[], "chore", "S", "x"),
        (
            "project:   billing   portal",
            &[],
            "project",
            "L",
            "billing portal",
        ),
        (
            "dark mode in settings",
            &[],
            "feature",
            "M",
            "dark mode in settings",
        ),
        (
            "debug: the flaky test",
            &[],
            "feature",
            "M",
            "debug: the flaky test",
        ),
        (
            "fix the login timeout",
            &["--type", "review"],
            "review",
            "S",
            "fix the login timeout",
        ),
    ];
    for (line, extra, kind, tier, title) in cases {
        let mut args = vec!["new", line];
        args.extend_from_slice(extra);
        let id = env.iced_json(&args).ok().json()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let status = env.iced_json(&["status", &id]).ok().json();
        assert_eq!(status["type"], kind, "{line}");
        assert_eq!(status["tier"], tier, "{line}");
        assert_eq!(status["title"], title, "{line}");
        assert_eq!(status["status"], "draft");
        assert_eq!(status["risk"], "medium");
        assert_eq!(status["autonomy"], 1);
        assert_eq!(status["attempts"], 0);
        assert_eq!(status["created"], NOW);
        assert_eq!(status["parent"], Value::Null);
        assert_eq!(status["iced"], "0.1");
    }
}

#[test]
fn new_refuses_an_unknown_type_or_an_empty_line() {
    let env = TestEnv::initialized();
    env.iced_json(&["new", "x", "--type", "epic"])
        .refused(2, "usage");
    env.iced_json(&["new", "   "]).refused(2, "usage");
    assert_eq!(env.iced_json(&["list"]).ok().json(), json!([]));
}

#[test]
fn new_numbers_after_the_highest_folder() {
    let env = TestEnv::initialized();
    assert_eq!(
        env.new_unit("Café: make it déjà-vu!"),
        "001-cafe-make-it-deja-vu"
    );
    std::fs::create_dir_all(env.path("intent/007-x")).unwrap();
    assert_eq!(env.new_unit("next one"), "008-next-one");
    let run = env.iced_json(&["new", "next one"]).ok().json();
    assert_eq!(run["id"], "009-next-one");
    assert_eq!(run["path"], "intent/009-next-one/iced.md");
    assert!(env.path("intent/009-next-one/decisions.md").is_file());
    std::fs::create_dir_all(env.path("intent/999-last")).unwrap();
    assert_eq!(env.new_unit("!!!"), "1000-unit");
}

#[test]
fn child_sets_the_parent_and_the_parent_lists_it() {
    let env = TestEnv::initialized();
    let parent = env.new_unit("project: billing portal");
    let child = env
        .iced_json(&["child", "1", "invoice download"])
        .ok()
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = env
        .iced_json(&["new", "fix: refund rounding", "--parent", "billing"])
        .ok()
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for id in [&child, &other] {
        let status = env.iced_json(&["status", id]).ok().json();
        assert_eq!(status["parent"], parent, "{id}");
    }
    assert!(env
        .read(&unit_file(&child))
        .contains(&format!("\nparent: {parent}\n")));
    let status = env.iced_json(&["status", &parent]).ok().json();
    assert_eq!(status["children"], json!([child, other]));
    let created: Vec<Value> = events(&env, &child);
    assert_eq!(created[0]["event"], "created");
}

#[test]
fn list_returns_every_unit_object_by_number() {
    let env = TestEnv::initialized();
    let parent = env.approved_unit("Session timeout");
    let child = env
        .iced_json(&["child", &parent, "fix: idle check"])
        .ok()
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let third = env.new_unit("chore: bump deps");
    env.set_field(&third, "team", "payments");
    let rows = env.iced_json(&["list"]).ok().json();
    let rows = rows.as_array().unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [parent.as_str(), child.as_str(), third.as_str()]);
    for row in rows {
        for key in [
            "iced",
            "id",
            "title",
            "type",
            "tier",
            "parent",
            "status",
            "autonomy",
            "risk",
            "attempts",
            "created",
            "path",
            "effective_autonomy",
            "active",
            "children",
            "lint",
        ] {
            assert!(row.get(key).is_some(), "{key} missing from {row}");
        }
        assert!(row["lint"]["errors"].is_u64() && row["lint"]["warnings"].is_u64());
        assert_eq!(row["path"], unit_file(row["id"].as_str().unwrap()));
    }
    assert_eq!(rows[0]["children"], json!([child]));
    assert_eq!(rows[0]["status"], "approved");
    assert_eq!(rows[0]["contract_hash"], spec_contract_hash(GOOD_BODY));
    assert_eq!(rows[0]["lint"], json!({"errors": 0, "warnings": 0}));
    assert_eq!(rows[1]["parent"], parent);
    assert_eq!(rows[1]["type"], "bug");
    assert_eq!(rows[2]["team"], "payments", "unknown keys are listed too");
    assert_eq!(rows[2]["active"], true);
    assert_eq!(rows[0]["active"], false);
}

#[test]
fn list_shows_an_unreadable_unit_with_its_error() {
    let env = TestEnv::initialized();
    let good = env.new_unit("good");
    let bad = env.new_unit("bad");
    env.write(&unit_file(&bad), b"---\nid: x\0\n---\n");
    let rows = env.iced_json(&["list"]).ok().json();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["id"], good);
    assert_eq!(rows[1]["id"], bad);
    assert_eq!(rows[1]["path"], unit_file(&bad));
    assert_eq!(rows[1]["error"]["code"], "unit-unreadable");
    assert!(rows[1]["error"]["reason"]
        .as_str()
        .is_some_and(|r| !r.is_empty()));
    assert!(rows[1].get("status").is_none(), "{}", rows[1]);
}

/// Run `iced approve <id>` on a real terminal (a pty made by util-linux `script`), typing `answer`.
/// None when `script` is not installed.
fn approve_on_a_terminal(env: &TestEnv, id: &str, answer: &str) -> Option<crate::env::Run> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: util-linux `script` is not installed, so no pty to ask on");
        return None;
    }
    let iced = env!("CARGO_BIN_EXE_iced");
    let mut cmd = Command::new("script");
    cmd.args([
        "-q",
        "-e",
        "-c",
        &format!("'{iced}' approve {id}"),
        "/dev/null",
    ])
    .current_dir(env.root())
    .env_clear()
    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
    .env("HOME", env.root())
    .env("GIT_CONFIG_NOSYSTEM", "1")
    .env("ICED_NOW", NOW)
    .env("TERM", "dumb")
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("script starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Some(crate::env::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

#[test]
fn approve_on_a_terminal_shows_the_contract_and_asks() {
    let env = TestEnv::initialized();
    let id = env.good_unit("session timeout");
    let before = env.read(&format!("intent/{id}/iced.md"));

    let Some(run) = approve_on_a_terminal(&env, &id, "n\n") else {
        return;
    };
    assert_eq!(run.code, 0, "{run:?}");
    // The person saw the contract before the question (the pty merges stderr into stdout).
    assert!(
        run.stdout.contains("Goal: Signed-in people stay signed in"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("[E1] Activity extends the session."),
        "{run:?}"
    );
    assert!(run.stdout.contains("Approve"), "{run:?}");
    assert!(run.stdout.contains("Not approved"), "{run:?}");
    assert_eq!(
        env.read(&format!("intent/{id}/iced.md")),
        before,
        "declining changes nothing"
    );
    let events = env.read(".iced/metrics.jsonl");
    let last: serde_json::Value = serde_json::from_str(events.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["event"].as_str(), last["result"].as_str()),
        (Some("signoff"), Some("changes"))
    );

    let run = approve_on_a_terminal(&env, &id, "y\n").unwrap();
    assert_eq!(run.code, 0, "{run:?}");
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["status"], "approved");
    assert_eq!(status["approved_by"], "Test Person");
}
