//! Every refusal code of SPEC section 15, with its exit code and its one shape. A refusal that
//! checks something changes nothing: the unit file, its decisions and the metrics stay as they were.

use crate::env::{unit_file, unit_text, Run, TestEnv};
use serde_json::{json, Value};

/// Everything a refused verb must not touch, for one unit.
struct Untouched {
    unit: Vec<u8>,
    decisions: Option<Vec<u8>>,
    metrics: Option<Vec<u8>>,
    id: String,
}

impl Untouched {
    fn take(env: &TestEnv, id: &str) -> Untouched {
        Untouched {
            unit: env.read_bytes(&unit_file(id)),
            decisions: std::fs::read(env.path(&format!("intent/{id}/decisions.md"))).ok(),
            metrics: std::fs::read(env.path(".iced/metrics.jsonl")).ok(),
            id: id.to_owned(),
        }
    }

    fn check(&self, env: &TestEnv, after: &Run) {
        let id = &self.id;
        assert!(
            env.read_bytes(&unit_file(id)) == self.unit,
            "{id}'s iced.md changed after {after:?}"
        );
        assert_eq!(
            std::fs::read(env.path(&format!("intent/{id}/decisions.md"))).ok(),
            self.decisions,
            "{id}'s decisions.md changed after {after:?}"
        );
        assert_eq!(
            std::fs::read(env.path(".iced/metrics.jsonl")).ok(),
            self.metrics,
            "metrics changed after {after:?}"
        );
    }
}

/// Run `args --json`, expect the refusal, and check the unit is untouched.
fn refused_untouched(env: &TestEnv, id: &str, args: &[&str], exit: i32, code: &str) -> Value {
    let before = Untouched::take(env, id);
    let run = env.iced_json(args);
    let refused = run.refused(exit, code);
    before.check(env, &run);
    refused
}

fn step_of(args: &[&str]) -> String {
    args[0].to_owned()
}

// ---- not-initialized ------------------------------------------------------------------------

const EVERY_VERB: &[&[&str]] = &[
    &["new", "dark mode"],
    &["child", "1", "dark mode"],
    &["list"],
    &["status"],
    &["status", "1"],
    &["lint", "1"],
    &["approve", "1", "--yes"],
    &["accept", "1"],
    &["reject", "1", "no"],
    &["abandon", "1"],
    &["use", "none"],
    &["hold", "1", "why"],
    &["unhold", "1"],
    &["decision", "1", "--decision", "d", "--why", "w"],
    &["autonomy", "2"],
    &["autonomy", "2", "1"],
    &["stats"],
];

#[test]
fn every_verb_but_init_refuses_an_uninitialized_repository() {
    let env = TestEnv::new();
    for args in EVERY_VERB {
        let refused = env.iced_json(args).refused(3, "not-initialized");
        assert_eq!(refused["step"], step_of(args), "{args:?}");
        assert!(
            refused["reason"].as_str().unwrap().contains(".iced"),
            "{refused}"
        );
        assert!(
            refused["remedy"].as_str().unwrap().contains("iced init"),
            "{refused}"
        );
    }
    assert!(!env.path(".iced").exists(), "a refused verb created .iced/");
    assert!(!env.path("intent").exists());
}

#[test]
fn a_repository_with_iced_but_no_intent_folder_is_not_initialized() {
    let env = TestEnv::initialized();
    std::fs::remove_dir_all(env.path("intent")).unwrap();
    for args in EVERY_VERB {
        let refused = env.iced_json(args).refused(3, "not-initialized");
        assert!(
            refused["reason"].as_str().unwrap().contains("intent"),
            "{args:?}: {refused}"
        );
        assert!(refused["remedy"].as_str().unwrap().contains("iced init"));
    }
    assert!(
        !env.path("intent").exists(),
        "a refused verb created intent/"
    );
    // `iced init` repairs it.
    env.iced_json(&["init"]).ok();
    env.iced_json(&["list"]).ok();
}

// ---- naming a unit ----------------------------------------------------------------------------

#[test]
fn a_name_that_matches_no_unit_is_not_found() {
    let env = TestEnv::initialized();
    env.iced_json(&["status", "1"]).refused(3, "unit-not-found");
    let id = env.new_unit("dark mode");
    for args in [
        &["status", "42"][..],
        &["status", "nope"],
        &["lint", "2"],
        &["approve", "dark-modes", "--yes"],
        &["hold", "7", "x"],
        &["use", "nope"],
    ] {
        refused_untouched(&env, &id, args, 3, "unit-not-found");
    }
    assert_eq!(env.read(".iced/active"), format!("{id}\n"));
}

#[test]
fn a_number_or_substring_naming_several_units_is_ambiguous() {
    let env = TestEnv::initialized();
    for id in ["004-a", "004-b", "005-login-page", "006-login-api"] {
        env.write(&unit_file(id), unit_text(id));
    }
    for args in [
        &["status", "4"][..],
        &["status", "004"],
        &["approve", "4", "--yes"],
    ] {
        let run = env.iced_json(args);
        run.refused(3, "unit-ambiguous");
        assert_eq!(run.json()["matches"], json!(["004-a", "004-b"]), "{args:?}");
    }
    let run = env.iced_json(&["hold", "login", "why"]);
    let refused = run.refused(3, "unit-ambiguous");
    assert_eq!(
        run.json()["matches"],
        json!(["005-login-page", "006-login-api"])
    );
    let reason = refused["reason"].as_str().unwrap();
    assert!(
        reason.contains("005-login-page") && reason.contains("006-login-api"),
        "{reason}"
    );
    for id in ["004-a", "004-b", "005-login-page", "006-login-api"] {
        assert_eq!(env.read(&unit_file(id)), unit_text(id), "{id} changed");
    }
    // A full id still names one, and lint reports the shared number.
    let status = env.iced_json(&["status", "004-a"]).ok().json();
    assert_eq!(status["id"], "004-a");
    let lint = env.iced_json(&["lint", "004-a"]);
    assert_eq!(lint.code, 3);
    assert_eq!(lint.json()["errors"][0]["code"], "ids-duplicate");
    // An all-digit argument is never a substring: `5` is 005, not every id holding a 5.
    assert_eq!(
        env.iced_json(&["status", "5"]).ok().json()["id"],
        "005-login-page"
    );
    // A substring found in exactly one id names it.
    assert_eq!(
        env.iced_json(&["status", "page"]).ok().json()["id"],
        "005-login-page"
    );
}

// ---- unreadable files ----------------------------------------------------------------------

/// Verbs that read one unit and must refuse a file they cannot read.
fn reading_verbs(id: &str) -> Vec<Vec<String>> {
    [
        &["status", id][..],
        &["lint", id],
        &["lint", id, "--stage", "signoff"],
        &["approve", id, "--yes"],
        &["accept", id],
        &["reject", id, "no"],
        &["abandon", id],
        &["hold", id, "why"],
        &["decision", id, "--decision", "d", "--why", "w"],
        &["autonomy", "2", id],
    ]
    .iter()
    .map(|a| a.iter().map(|s| (*s).to_owned()).collect())
    .collect()
}

fn refused_everywhere(env: &TestEnv, id: &str, code: &str) {
    for args in reading_verbs(id) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let refused = refused_untouched(env, id, &args, 3, code);
        assert!(
            refused["reason"].as_str().unwrap().contains("iced.md"),
            "{args:?}: {refused}"
        );
    }
    let rows = env.iced_json(&["list"]).ok().json();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed: {rows}"));
    assert_eq!(row["error"]["code"], code, "{row}");
    assert_eq!(row["path"], unit_file(id));
}

#[test]
fn a_unit_with_a_nul_byte_is_unreadable() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    let mut bytes = env.read_bytes(&unit_file(&id));
    bytes.splice(20..20, *b"\0");
    env.write(&unit_file(&id), &bytes);
    refused_everywhere(&env, &id, "unit-unreadable");
}

#[test]
fn a_unit_that_is_not_utf8_is_refused() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    let mut bytes = env.read_bytes(&unit_file(&id));
    bytes.extend_from_slice(b"- [code] caf\xe9 latin-1\n");
    env.write(&unit_file(&id), &bytes);
    refused_everywhere(&env, &id, "unit-not-utf8");
}

#[test]
fn a_unit_over_one_mebibyte_is_too_large() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    let mut text = env.read(&unit_file(&id));
    let line = "- [code] padding padding padding padding padding\n";
    text.push_str(&line.repeat(10 * 1024 * 1024 / line.len() + 1));
    assert!(text.len() > 10_000_000);
    env.write(&unit_file(&id), &text);
    refused_everywhere(&env, &id, "unit-too-large");
}

#[test]
fn a_unit_of_exactly_one_mebibyte_is_read() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    let mut text = env.read(&unit_file(&id));
    text.push_str(&"x".repeat(1_048_576 - text.len() - 1));
    text.push('\n');
    assert_eq!(text.len(), 1_048_576);
    env.write(&unit_file(&id), &text);
    env.iced_json(&["status", &id]).ok();
    text.push('\n');
    env.write(&unit_file(&id), &text);
    env.iced_json(&["status", &id]).refused(3, "unit-too-large");
}

// ---- path-symlink ----------------------------------------------------------------------------

#[test]
fn iced_never_writes_through_a_symlinked_unit_file() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("unit.md");
    let text = env.read(&unit_file(&id));
    std::fs::write(&target, &text).unwrap();
    std::fs::remove_file(env.path(&unit_file(&id))).unwrap();
    std::os::unix::fs::symlink(&target, env.path(&unit_file(&id))).unwrap();

    for args in [
        &["hold", &id, "waiting"][..],
        &["approve", &id, "--yes"],
        &["autonomy", "2", &id],
        &["abandon", &id],
    ] {
        let metrics = env.metrics();
        let refused = env.iced_json(args).refused(3, "path-symlink");
        assert!(
            refused["reason"].as_str().unwrap().contains("iced.md"),
            "{refused}"
        );
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            text,
            "{args:?} wrote through the link"
        );
        assert!(std::fs::symlink_metadata(env.path(&unit_file(&id)))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(env.metrics(), metrics, "{args:?} recorded an event");
    }
}

#[test]
fn iced_never_appends_through_a_symlinked_decision_log() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("log.md");
    std::fs::write(&target, "someone else's file\n").unwrap();
    let log = env.path(&format!("intent/{id}/decisions.md"));
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&target, &log).unwrap();
    env.iced_json(&["decision", &id, "--decision", "d", "--why", "w"])
        .refused(3, "path-symlink");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "someone else's file\n"
    );
}

// ---- config-invalid --------------------------------------------------------------------------

#[test]
fn an_invalid_config_is_refused_naming_the_key() {
    for (config, key) in [
        ("{\"autonomy\": \"high\"}", "autonomy"),
        ("{\"maxAutonomy\": 9}", "maxAutonomy"),
        ("{\"gate\": \"loose\"}", "gate"),
        (
            "{\"verify\": {\"commands\": \"npm test\"}}",
            "verify.commands",
        ),
        ("{\"autonomy\": 1,", "config.json"),
        ("[]", "config.json"),
    ] {
        let env = TestEnv::initialized();
        let id = env.good_unit("dark mode");
        env.write(".iced/config.json", config);
        for args in [
            &["list"][..],
            &["status", &id],
            &["new", "another"],
            &["approve", &id, "--yes"],
            &["stats"],
            &["autonomy", "2", &id],
        ] {
            let refused = refused_untouched(&env, &id, args, 3, "config-invalid");
            assert!(
                refused["reason"].as_str().unwrap().contains(key),
                "{config}: {refused}"
            );
        }
        // `autonomy <n>` without a unit edits the config: an invalid one is refused, not replaced
        // (unless the invalid key is `autonomy` itself, which the command sets right).
        if key != "autonomy" {
            env.iced_json(&["autonomy", "2"])
                .refused(3, "config-invalid");
            assert_eq!(env.read(".iced/config.json"), config);
        }
        assert_eq!(
            env.iced_json(&["list"]).json()["refused"]["code"],
            "config-invalid"
        );
    }
}

// ---- lint-errors ------------------------------------------------------------------------------

#[test]
fn approving_a_unit_with_signoff_lint_errors_is_refused_with_the_report() {
    let env = TestEnv::initialized();
    let id = env.new_unit("dark mode");
    let before = Untouched::take(&env, &id);
    let run = env.iced_json(&["approve", &id, "--yes"]);
    let refused = run.refused(3, "lint-errors");
    assert_eq!(refused["step"], "approve");
    let report = run.json();
    let codes: Vec<&str> = report["lint"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    for code in ["goal-missing", "failures-missing", "expectations-missing"] {
        assert!(codes.contains(&code), "{code} not in {codes:?}");
    }
    before.check(&env, &run);
    assert!(env.read(&unit_file(&id)).contains("\nstatus: draft\n"));

    let text = env.read(&unit_file(&id));
    env.set_body(
        &id,
        &crate::env::GOOD_BODY.replace(" -> A: 30 minutes.", ""),
    );
    let run = env.iced_json(&["approve", &id, "--yes"]);
    run.refused(3, "lint-errors");
    assert_eq!(run.json()["lint"]["errors"][0]["code"], "open-questions");
    assert_ne!(env.read(&unit_file(&id)), text);
}

// ---- transition-illegal ---------------------------------------------------------------------

#[test]
fn illegal_transitions_are_refused_and_change_nothing() {
    let env = TestEnv::initialized();
    let draft = env.good_unit("draft one");
    let approved = env.approved_unit("approved one");
    let building = env.approved_unit("building one");
    env.set_field(&building, "status", "building");
    let verifying = env.approved_unit("verifying one");
    env.set_field(&verifying, "status", "verifying");
    let done = env.approved_unit("done one");
    env.set_field(&done, "status", "done");
    env.write(&format!("intent/{done}/evidence.md"), "ok\n");

    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("draft", vec!["accept", &draft]),
        ("draft", vec!["reject", &draft, "not", "good"]),
        ("approved", vec!["approve", &approved, "--yes"]),
        ("approved", vec!["accept", &approved]),
        ("approved", vec!["reject", &approved, "no"]),
        ("building", vec!["abandon", &building]),
        ("building", vec!["approve", &building, "--yes"]),
        ("building", vec!["accept", &building]),
        ("verifying", vec!["abandon", &verifying]),
        ("verifying", vec!["reject", &verifying, "no"]),
        ("done", vec!["abandon", &done]),
        ("done", vec!["approve", &done, "--yes"]),
    ];
    for (status, args) in cases {
        let id = args[1];
        let refused = refused_untouched(&env, id, &args, 3, "transition-illegal");
        assert_eq!(refused["step"], args[0]);
        assert!(
            refused["reason"].as_str().unwrap().contains(status),
            "{args:?}: {refused}"
        );
        let text = env.read(&unit_file(id));
        assert!(text.contains(&format!("\nstatus: {status}\n")), "{args:?}");
    }
}

#[test]
fn a_transition_refusal_has_the_one_shape() {
    let env = TestEnv::initialized();
    let id = env.new_unit("dark mode");
    let run = env.iced_json(&["accept", &id]);
    let json = run.json();
    let refused = json["refused"].as_object().unwrap();
    let mut keys: Vec<&str> = refused.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["code", "reason", "remedy", "step"]);
    assert_eq!(json["refused"]["step"], "accept");
    assert_eq!(json["refused"]["code"], "transition-illegal");
    assert_eq!(run.code, 3);
    assert_eq!(
        run.stderr, "",
        "with --json the refusal goes to stdout only"
    );
    // Naming the statuses a draft can move to.
    let reason = json["refused"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("approved") && reason.contains("rejected"),
        "{reason}"
    );
}

// ---- unit-held --------------------------------------------------------------------------------

#[test]
fn a_held_unit_is_not_approved() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    env.iced_json(&["hold", &id, "waiting", "for", "legal"])
        .ok();
    let refused = refused_untouched(&env, &id, &["approve", &id, "--yes"], 3, "unit-held");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("waiting for legal"),
        "{refused}"
    );
    assert!(refused["remedy"].as_str().unwrap().contains("unhold"));
    // The hold comes before the status check.
    let approved = env.approved_unit("other");
    env.iced_json(&["hold", &approved, "x"]).ok();
    refused_untouched(
        &env,
        &approved,
        &["approve", &approved, "--yes"],
        3,
        "unit-held",
    );
    // Released, it approves.
    env.iced_json(&["unhold", &id]).ok();
    env.iced_json(&["approve", &id, "--yes"]).ok();
}

// ---- unit-closed ------------------------------------------------------------------------------

#[test]
fn every_verb_that_would_change_a_closed_unit_refuses_it() {
    let env = TestEnv::initialized();
    let accepted = env.approved_unit("accepted one");
    env.set_field(&accepted, "status", "done");
    env.write(&format!("intent/{accepted}/evidence.md"), "ok\n");
    env.iced_json(&["accept", &accepted]).ok();
    let rejected = env.new_unit("rejected one");
    env.iced_json(&["abandon", &rejected]).ok();
    let held_and_accepted = env.approved_unit("held and accepted");
    env.set_field(&held_and_accepted, "status", "accepted");
    env.set_field(&held_and_accepted, "held", "frozen");

    for id in [&accepted, &rejected, &held_and_accepted] {
        for args in [
            &["approve", id, "--yes"][..],
            &["approve", id],
            &["accept", id],
            &["reject", id, "not", "good"],
            &["abandon", id],
            &["hold", id, "why"],
            &["decision", id, "--decision", "d", "--why", "w"],
            &["autonomy", "2", id],
        ] {
            let refused = refused_untouched(&env, id, args, 3, "unit-closed");
            assert_eq!(refused["step"], args[0]);
        }
    }
    // unhold of a held closed unit would change it.
    refused_untouched(
        &env,
        &held_and_accepted,
        &["unhold", &held_and_accepted],
        3,
        "unit-closed",
    );
}

// ---- parent-not-found -------------------------------------------------------------------------

#[test]
fn a_parent_that_names_no_unit_is_refused() {
    let env = TestEnv::initialized();
    env.new_unit("billing");
    let before = env.snapshot();
    for args in [
        &["new", "dark mode", "--parent", "999"][..],
        &["new", "dark mode", "--parent", "nope"],
        &["child", "nope", "x"],
        &["child", "2", "x"],
    ] {
        let refused = env.iced_json(args).refused(3, "parent-not-found");
        assert_eq!(refused["step"], args[0]);
        assert_eq!(env.snapshot(), before, "{args:?} wrote something");
    }
    assert_eq!(
        env.iced_json(&["list"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

// ---- no-active-unit ---------------------------------------------------------------------------

#[test]
fn status_without_an_id_needs_an_active_unit() {
    let env = TestEnv::initialized();
    env.iced_json(&["status"]).refused(3, "no-active-unit");
    let id = env.new_unit("dark mode");
    env.iced_json(&["status"]).ok();
    env.iced_json(&["use", "none"]).ok();
    let refused = env.iced_json(&["status"]).refused(3, "no-active-unit");
    assert!(refused["remedy"].as_str().unwrap().contains("iced use"));
    env.write(".iced/active", "\n");
    env.iced_json(&["status"]).refused(3, "no-active-unit");
    env.write(".iced/active", "042-gone\n");
    env.iced_json(&["status"]).refused(3, "no-active-unit");
    env.write(".iced/active", format!("{id}\n"));
    assert_eq!(env.iced_json(&["status"]).ok().json()["id"], id);
}

// ---- confirmation-needed ----------------------------------------------------------------------

#[test]
fn approving_off_a_terminal_without_yes_needs_a_person() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    let refused = refused_untouched(&env, &id, &["approve", &id], 4, "confirmation-needed");
    assert!(refused["remedy"].as_str().unwrap().contains("--yes"));
    // Without --json: exit 4, the text refusal on stderr, nothing on stdout.
    let run = env.iced(&["approve", &id]);
    assert_eq!(run.code, 4);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("code: confirmation-needed"),
        "{}",
        run.stderr
    );
}

// ---- usage ------------------------------------------------------------------------------------

#[test]
fn bad_arguments_are_usage_errors() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    for args in [
        &["approve"][..],
        &["frobnicate"],
        &["autonomy", "7"],
        &["autonomy", "two"],
        &["lint", &id, "--stage", "build"],
        &["new", "x", "--type", "epic"],
        &["hold", &id],
        &["decision", &id, "--decision", "d"],
        &["list", "--bogus"],
        &[],
    ] {
        let refused = refused_untouched(&env, &id, args, 2, "usage");
        assert_eq!(refused["step"], "usage", "{args:?}");
        let run = env.iced(args);
        assert_eq!(run.code, 2, "{args:?} without --json: {run:?}");
    }
    // Empty text where words are needed.
    refused_untouched(&env, &id, &["new", " \t "], 2, "usage");
    refused_untouched(&env, &id, &["hold", &id, " "], 2, "usage");
    refused_untouched(&env, &id, &["reject", &id, ""], 2, "usage");
    refused_untouched(
        &env,
        &id,
        &["decision", &id, "--decision", " ", "--why", "w"],
        2,
        "usage",
    );
}

#[test]
fn a_bad_iced_now_is_a_usage_error_naming_it() {
    let env = TestEnv::initialized();
    let id = env.good_unit("dark mode");
    let before = Untouched::take(&env, &id);
    for value in ["yesterday", "2026-09-30", "2026-13-01T00:00:00Z", ""] {
        let run = crate::env::run(
            env.command()
                .env("ICED_NOW", value)
                .args(["approve", &id, "--yes", "--json"]),
        );
        let refused = run.refused(2, "usage");
        assert!(
            refused["reason"].as_str().unwrap().contains("ICED_NOW"),
            "{refused}"
        );
        before.check(&env, &run);
        let run = crate::env::run(env.command().env("ICED_NOW", value).args(["list"]));
        assert_eq!(run.code, 2);
        assert!(run.stderr.contains("ICED_NOW"), "{}", run.stderr);
        assert!(run.stderr.contains("code: usage"), "{}", run.stderr);
    }
    // Other RFC 3339 forms are fine, and stored in UTC.
    crate::env::run(
        env.command()
            .env("ICED_NOW", "2026-09-30T13:00:00+02:00")
            .args(["approve", &id, "--yes"]),
    )
    .ok();
    assert!(env
        .read(&unit_file(&id))
        .contains("\napproved_at: 2026-09-30T11:00:00Z\n"));
}

// ---- io-error ---------------------------------------------------------------------------------

#[test]
fn a_failed_write_is_an_io_error() {
    let env = TestEnv::initialized();
    let id = env.new_unit("dark mode");
    // `.iced/active` is a directory: replacing it with a file cannot work.
    std::fs::remove_file(env.path(".iced/active")).unwrap();
    std::fs::create_dir(env.path(".iced/active")).unwrap();
    let run = env.iced_json(&["use", &id]);
    let refused = run.refused(1, "io-error");
    assert!(
        refused["reason"].as_str().unwrap().contains("active"),
        "{refused}"
    );
    let run = env.iced(&["use", &id]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("code: io-error"), "{}", run.stderr);
}

/// Bookkeeping that fails after the change was made must not report the change as failed: a
/// person who saw exit 1 from `new` would run it again and get a second unit.
#[test]
fn a_metric_that_cannot_be_recorded_is_a_warning_not_a_failed_change() {
    let env = TestEnv::initialized();
    std::fs::create_dir_all(env.path(".iced/metrics.jsonl")).unwrap();
    let run = env.iced_json(&["new", "dark mode"]).ok();
    let json = run.json();
    let warning = json["warnings"][0].as_str().unwrap();
    assert!(warning.contains("metrics.jsonl"), "{json}");
    let units = env.iced_json(&["list"]).ok().json();
    assert_eq!(
        units.as_array().unwrap().len(),
        1,
        "exactly one unit: {units}"
    );
    let run = env.iced(&["abandon", json["id"].as_str().unwrap()]).ok();
    assert!(run.stderr.starts_with("warning: "), "{}", run.stderr);
    assert!(run.stderr.contains("abandon"), "{}", run.stderr);
    let status = env
        .iced_json(&["status", json["id"].as_str().unwrap()])
        .ok()
        .json();
    assert_eq!(status["status"], "rejected");
}

#[test]
fn a_metrics_file_too_large_to_read_is_an_io_error_for_stats() {
    let env = TestEnv::initialized();
    // Over the 256 MiB iced reads (sparse: it takes no room).
    std::fs::File::create(env.path(".iced/metrics.jsonl"))
        .unwrap()
        .set_len(256 * 1024 * 1024 + 1)
        .unwrap();
    env.iced_json(&["stats"]).refused(1, "io-error");
}

/// A directory is not a file iced reads (SPEC 24.6): a refusal naming it, not an I/O failure.
#[test]
fn a_metrics_file_that_is_a_directory_is_not_a_regular_file_for_stats() {
    let env = TestEnv::initialized();
    std::fs::create_dir_all(env.path(".iced/metrics.jsonl")).unwrap();
    let r = env.iced_json(&["stats"]).refused(3, "not-a-regular-file");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("metrics.jsonl` is a directory"),
        "{r}"
    );
}
