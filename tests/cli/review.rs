//! Review units (SPEC 20.14): `iced build <review-unit>` runs read-only reviewers over the range
//! or paths the unit names and lands only `intent/<id>/review.md` (and the unit's status), with
//! findings the loop minted. No implementer runs.

use crate::env::{fake_runner, merge_json, TestEnv};
use crate::loop_e2e::{build, str_of};
use crate::snap::{assert_read, assert_refused};
use crate::validation::{attempts_of, events, section, set_script, starts};

/// E1 passes, and an S2 finding about the file under review.
pub(crate) const FAIL_S2: &str = r#"{"verdict": "fail", "expectations": [{"id": "E1", "result": "pass", "evidence": "refresh extends it"}], "findings": [{"file_path": "src/session.rs", "criterion_ref": "E1", "finding_category": "correctness", "severity": "S2-major", "summary": "a background poll counts as activity", "failure_scenario": {"inputs": "an idle tab polling every minute", "expected": "the session ends after 30 minutes", "actual": "the session never ends"}}]}"#;
use serde_json::{json, Value};

/// A review body: a goal, the Scope's `In:` line when `paths` is given, one expectation.
fn review_body(paths: Option<&str>) -> String {
    let scope = paths
        .map(|p| format!("\n### Scope\n- In: {p}\n"))
        .unwrap_or_default();
    format!(
        "
# Review of the session code

## Intent

### Goal
The session code keeps people signed in while they are active.
{scope}
## Expectations
- [E1] Activity extends the session. {{verify: manual}}
"
    )
}

/// An initialized repository with two commits of code on top, and a review unit of the range
/// between them (`range` as written, `{from}` and `{to}` replaced) approved and committed, with
/// the fake agent as the validator role following `script`, and landing by merge.
pub(crate) fn review_env(
    range: Option<&str>,
    paths: Option<&str>,
    script: &str,
) -> (TestEnv, String) {
    let env = TestEnv::initialized();
    env.write("src/session.rs", "pub fn refresh() {}\n");
    env.commit_all("add the session module");
    let from = env.git_out(&["rev-parse", "HEAD"]).trim().to_owned();
    env.write("src/session.rs", "pub fn refresh() { extend(); }\n");
    env.commit_all("sessions refresh on activity");
    let to = env.git_out(&["rev-parse", "HEAD"]).trim().to_owned();
    let id = env.new_unit("review: the session refresh");
    env.set_body(&id, &review_body(paths));
    if let Some(range) = range {
        env.set_field(
            &id,
            "range",
            &range.replace("{from}", &from).replace("{to}", &to),
        );
    }
    env.iced_json(&["approve", &id, "--yes"]).ok();
    let mut config = fake_runner(&env, "");
    merge_json(
        &mut config,
        &json!({
            "roles": {"validator": {"runner": "fake"}},
            "verify": {"independent": true, "commands": []},
            "land": {"mode": "merge", "strategy": "merge"}
        }),
    );
    env.patch_config(&config);
    env.commit_all(&format!("approve {id}"));
    set_script(&env, &id, script);
    (env, id)
}

/// The files the commits of `range` on the current branch changed.
pub(crate) fn changed(env: &TestEnv, range: &str) -> Vec<String> {
    env.git_out(&["diff", "--name-only", range])
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_review_unit_lands_only_its_review_md_with_minted_findings() {
    let script = section("*", "validator", "*", &format!("report {FAIL_S2}"));
    let (env, id) = review_env(Some("{from}..{to}"), None, &script);
    let before = env.git_out(&["rev-parse", "HEAD"]).trim().to_owned();
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");

    // No implementer ran; the one reviewer (`full`) ran once.
    assert!(
        starts(&env).iter().all(|s| s.role == "validator"),
        "{:#?}",
        starts(&env)
    );
    assert_eq!(attempts_of(&env, "validator", "full"), [1]);
    // Its prompt names the range under review and the file it changed.
    let prompt = std::fs::read_dir(env.path(".iced/run"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| {
            e.path()
                .join(&id)
                .join("activities/validate-full-1/prompt.md")
        })
        .find(|p| p.exists())
        .expect("the reviewer's prompt");
    let prompt = std::fs::read_to_string(prompt).unwrap();
    assert!(prompt.contains("src/session.rs"), "{prompt}");

    // On main: only review.md and the unit's status changed.
    let landed = changed(&env, &format!("{before}..HEAD"));
    assert_eq!(
        landed,
        [
            format!("intent/{id}/iced.md"),
            format!("intent/{id}/review.md")
        ]
    );
    let review = env.read(&format!("intent/{id}/review.md"));
    assert!(
        review.contains(&format!("### {id}-F1 (S2-major, correctness)")),
        "{review}"
    );
    assert!(review.contains("- Found by: full"), "{review}");
    let unit = env.read(&format!("intent/{id}/iced.md"));
    assert!(unit.contains("\nstatus: done\n"), "{unit}");
    assert_read!(&env, "review_md", review);
}

#[test]
fn a_review_of_scope_paths_without_a_range_reviews_those_paths() {
    let script = section(
        "*",
        "validator",
        "*",
        r#"report {"verdict": "pass", "expectations": [{"id": "E1", "result": "pass", "evidence": "read it"}]}"#,
    );
    let (env, id) = review_env(None, Some("src/session.rs"), &script);
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    let review = env.read(&format!("intent/{id}/review.md"));
    assert!(review.contains("- `src/session.rs`"), "{review}");
    assert!(review.contains("No findings."), "{review}");
    assert!(review.contains("- E1: pass"), "{review}");
}

#[test]
fn a_reviewer_that_writes_to_its_sandbox_is_caught_and_run_again() {
    let script = format!(
        "attempt *\nrole validator\nlens full\nstart 1\nwrite notes.txt a reviewer's scratch file\nstart *\nreport {FAIL_S2}\n"
    );
    let (env, id) = review_env(Some("{from}..{to}"), None, &script);
    let before = env.git_out(&["rev-parse", "HEAD"]).trim().to_owned();
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(
        attempts_of(&env, "validator", "full"),
        [1, 1],
        "run again once"
    );
    let mutation: Vec<Value> = events(&env)
        .into_iter()
        .filter(|e| e["event"] == "validator_mutation")
        .collect();
    assert_eq!(mutation.len(), 1, "{mutation:#?}");
    assert!(
        mutation[0]["moved"].to_string().contains("notes.txt"),
        "{mutation:#?}"
    );
    // What it wrote never reaches the target.
    let landed = changed(&env, &format!("{before}..HEAD"));
    assert!(
        !landed.iter().any(|p| p.contains("notes.txt")),
        "{landed:?}"
    );
}

#[test]
fn a_reviewer_that_keeps_writing_blocks_the_review_and_nothing_lands() {
    let script = section("*", "validator", "*", "write notes.txt scratch");
    let (env, id) = review_env(Some("{from}..{to}"), None, &script);
    let before = env.git_out(&["rev-parse", "HEAD"]).trim().to_owned();
    let (out, last) = build(&env, &id, &[], 4);
    assert_eq!(last["status"], "blocked", "{out:#?}");
    assert_eq!(env.git_out(&["rev-parse", "HEAD"]).trim(), before);
    assert!(!env.path(&format!("intent/{id}/review.md")).exists());
    let _ = str_of(&last, "run");
}

#[test]
fn a_review_with_nothing_to_review_or_a_bad_range_is_refused() {
    let (env, id) = review_env(None, None, "");
    assert_refused!(&env, "review-no-target", 3, &["build", &id]);
    let (env, id) = review_env(Some("{from}..no-such-rev"), None, "");
    assert_refused!(&env, "review-range-invalid", 3, &["build", &id]);
    assert!(!env.path(".iced/run/state.json").exists());
}

#[test]
fn a_review_runs_its_reviewers_even_with_independent_validation_off() {
    let script = section("*", "validator", "*", &format!("report {FAIL_S2}"));
    let (env, id) = review_env(Some("{from}..{to}"), None, &script);
    env.patch_config(&json!({"verify": {"independent": false}}));
    env.commit_all("no independent validation");
    let (out, last) = build(&env, &id, &[], 0);
    assert_eq!(last["status"], "delivered", "{out:#?}");
    assert_eq!(attempts_of(&env, "validator", "full"), [1]);
    let review = env.read(&format!("intent/{id}/review.md"));
    assert!(review.contains(&format!("### {id}-F1 ")), "{review}");
}
