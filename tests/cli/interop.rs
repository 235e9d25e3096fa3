//! Units written, approved and accepted with iced-core (the reference implementation) must read the
//! same here and keep their contract hashes. The units are someone else's text: they stay in
//! `../shared/interop/pi-intent` and are copied only into temporary repositories.

use crate::env::TestEnv;
use std::path::{Path, PathBuf};

/// The interop folder, or None (and a note) when this checkout has none, as on a user's machine;
/// with `ICED_REQUIRE_INTEROP=1` a missing folder fails the test instead of skipping it.
fn interop_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("ICED_INTEROP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/interop/pi-intent")
        });
    if dir.join("intent").is_dir() {
        Some(dir)
    } else {
        crate::skip::skipped(
            &crate::harness::test_name(),
            "ICED_REQUIRE_INTEROP",
            &format!(
                "no interop units at {} (set ICED_INTEROP_DIR)",
                dir.display()
            ),
        );
        None
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn unit_ids(dir: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    ids.sort();
    ids
}

/// The stored `contract_hash` of a unit file, read plainly (not through iced).
fn stored_hash(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("contract_hash: "))
        .expect("the unit has a contract_hash")
        .trim()
        .to_owned()
}

#[test]
fn reference_units_keep_their_contract_hashes() {
    let Some(dir) = interop_dir() else { return };
    let env = TestEnv::initialized();
    copy_dir(&dir.join("intent"), &env.path("intent"));
    let ids = unit_ids(&dir.join("intent"));
    assert!(
        ids.len() >= 12,
        "expected the twelve reference units, found {ids:?}"
    );
    for id in &ids {
        let run = env.iced_json(&["lint", id, "--stage", "validate"]);
        let report = run.json();
        let codes: Vec<&str> = report["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["code"].as_str().unwrap())
            .collect();
        if id.starts_with("001-") {
            // SOURCE.md: its contract changed after approval; iced-core recomputes 3ac789c1...
            assert_eq!(codes, ["contract-changed"], "{id}: {report}");
            assert_eq!(run.code, 3);
            let message = report["errors"][0]["message"].as_str().unwrap();
            assert!(
                message
                    .contains("3ac789c1cb80dbb6bb9a54aff2352e1a6ebe015aa337af04b9c19a840f15359f"),
                "{message}"
            );
        } else {
            assert!(codes.is_empty(), "{id} has errors: {report}");
            assert_eq!(run.code, 0);
        }
    }
}

#[test]
fn reference_units_read_at_every_stage_and_list() {
    let Some(dir) = interop_dir() else { return };
    let env = TestEnv::initialized();
    copy_dir(&dir.join("intent"), &env.path("intent"));
    let list = env.iced_json(&["list"]).ok().json();
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), unit_ids(&dir.join("intent")).len());
    for row in rows {
        assert!(row.get("error").is_none(), "{row}");
        let id = row["id"].as_str().unwrap();
        let text = env.read(&format!("intent/{id}/iced.md"));
        assert_eq!(row["contract_hash"], stored_hash(&text), "{id}");
        assert!(row["title"].as_str().is_some_and(|t| !t.is_empty()), "{id}");
        for stage in ["draft", "signoff", "accept", "validate"] {
            let run = env.iced_json(&["lint", id, "--stage", stage]);
            assert!(run.code == 0 || run.code == 3, "{id} at {stage}: {run:?}");
            run.json();
        }
    }
    let accepted = rows.iter().filter(|r| r["status"] == "accepted").count();
    assert_eq!(accepted, 11);
}

#[test]
fn reference_spec_examples_and_legacy_config_are_read() {
    let Some(dir) = interop_dir() else { return };
    let env = TestEnv::initialized();
    // iced-core's own config: a per-host model map and the old `targets`/`verify.runner` keys.
    std::fs::copy(dir.join(".iced/config.json"), env.path(".iced/config.json")).unwrap();
    copy_dir(
        &dir.join("packages/iced-core/spec/examples"),
        &env.path("intent"),
    );
    for id in unit_ids(&dir.join("packages/iced-core/spec/examples")) {
        let run = env.iced_json(&["lint", &id, "--stage", "validate"]);
        assert_eq!(run.json()["errors"], serde_json::json!([]), "{id}: {run:?}");
        let status = env.iced_json(&["status", &id]).ok().json();
        let text = env.read(&format!("intent/{id}/iced.md"));
        assert_eq!(status["contract_hash"], stored_hash(&text));
    }
    let child = env.iced_json(&["status", "003"]).ok().json();
    assert_eq!(child["parent"], "002-billing-portal");
    let parent = env.iced_json(&["status", "002"]).ok().json();
    assert_eq!(
        parent["children"],
        serde_json::json!(["003-invoice-download"])
    );
}

/// Reference unit 002 (accepted, with a `# ` heading and an empty `## Open questions`) copied into
/// a fresh repository with `edit` applied to its text: how iced-core writes a unit, changed in one
/// place. Returns the environment and the unit's id.
fn reference_unit_with(edit: impl Fn(&str) -> String) -> Option<(TestEnv, String)> {
    let dir = interop_dir()?;
    let id = "002-fix-finding-1-from-bug-hunt-report-md-mu".to_owned();
    let env = TestEnv::initialized();
    copy_dir(
        &dir.join("intent").join(&id),
        &env.path(&format!("intent/{id}")),
    );
    let file = env.path(&format!("intent/{id}/iced.md"));
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit changed nothing");
    std::fs::write(&file, edited).unwrap();
    Some((env, id))
}

fn error_codes(report: &serde_json::Value) -> Vec<(String, Option<u64>)> {
    report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["code"].as_str().unwrap().to_owned(), e["line"].as_u64()))
        .collect()
}

#[test]
fn an_empty_answer_leaves_a_question_open_as_in_iced_core() {
    // iced-core: `item.answer = text.slice(idx + 5).trim()` and `if (!q.answer)` is open.
    let Some((env, id)) = reference_unit_with(|t| {
        t.replace(
            "## Open questions\n",
            "## Open questions\n- [Q1] SSO too? -> A:\n- [Q2] Audit log? -> A:   \n- [Q3] Mobile? -> A: No.\n",
        )
    }) else {
        return;
    };
    let run = env.iced_json(&["lint", &id, "--stage", "validate"]);
    let codes = error_codes(&run.json());
    assert_eq!(
        codes,
        [
            ("open-questions".to_owned(), Some(57)),
            ("open-questions".to_owned(), Some(58))
        ],
        "{run:?}"
    );
    assert_eq!(run.code, 3);
    let status = env.iced(&["status", &id]).ok().stdout;
    assert!(status.contains("[Q1] SSO too? (OPEN)"), "{status}");
    assert!(status.contains("[Q2] Audit log? (OPEN)"), "{status}");
    assert!(status.contains("[Q3] Mobile? -> No."), "{status}");
}

#[test]
fn a_false_status_gets_no_signoff_rules_at_validate_as_in_iced_core() {
    // iced-core: `stage === "validate" && status && ...`: a falsy status is no status there,
    // while the enum check (`fm[key] != null`) still reports it.
    for status in ["false", "0"] {
        let Some((env, id)) = reference_unit_with(|t| {
            t.replace("status: accepted", &format!("status: {status}"))
                .replace(
                    "## Open questions\n",
                    "## Open questions\n- [Q1] SSO too?\n",
                )
        }) else {
            return;
        };
        let report = env.iced_json(&["lint", &id, "--stage", "validate"]).json();
        let codes: Vec<String> = error_codes(&report).into_iter().map(|c| c.0).collect();
        assert_eq!(codes, ["field-invalid"], "status {status}: {report}");
        // At sign-off the rules apply whatever the status says.
        let report = env.iced_json(&["lint", &id, "--stage", "signoff"]).json();
        let codes: Vec<String> = error_codes(&report).into_iter().map(|c| c.0).collect();
        assert!(codes.contains(&"open-questions".to_owned()), "{report}");
    }
}

#[test]
fn a_false_title_shows_the_first_heading_as_in_iced_core() {
    // iced-core: `title: fm.data.title ?? null`, then `if (!parsed.title)` takes the first `# `.
    let heading = "Prevent protected-field multi-edit bypass";
    for (title, missing) in [("''", true), ("0", false), ("false", false), ("\"\"", true)] {
        let Some((env, id)) = reference_unit_with(|t| {
            t.replace(&format!("title: {heading}"), &format!("title: {title}"))
        }) else {
            return;
        };
        let status = env.iced_json(&["status", &id]).ok().json();
        assert_eq!(status["title"], heading, "title {title}");
        let list = env.iced_json(&["list"]).ok().json();
        assert_eq!(list[0]["title"], heading, "title {title}");
        // Lint reports an empty title as missing; `0` and `false` are values iced-core accepts.
        let report = env.iced_json(&["lint", &id, "--stage", "draft"]).json();
        let empty = report["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["message"] == "Missing required field `title`.");
        assert_eq!(empty, missing, "title {title}: {report}");
    }
    // A quoted "0" is a string, true in JavaScript: it stays the title.
    let Some((env, id)) =
        reference_unit_with(|t| t.replace(&format!("title: {heading}"), "title: \"0\""))
    else {
        return;
    };
    assert_eq!(env.iced_json(&["status", &id]).ok().json()["title"], "0");
}
