//! Goal coverage (SPEC 10.3): every clause of the Goal is covered by an expectation before a unit is
//! signed off; the map is in `iced status`; a unit signed off before the rule is not judged again.

use crate::env::{unit_file, TestEnv, GOOD_BODY};
use crate::snap::{assert_read, both, refused};

/// A Goal of two clauses (cut by `;`); E2 checks the second clause but does not say so, so only
/// G1 is covered.
const TWO_CLAUSES: &str = "
# Greet people by name

## Intent

### Goal
A person who gives their name is greeted by it;
anyone else still gets the general greeting.

### Failure conditions
- [F1] A named person is greeted as \"world\".

## Expectations
- [E1] `sh greet.sh Ada` prints `Hello, Ada`. {goal: G1} {verify: check | sh test.sh}
- [E2] `sh greet.sh` still prints `Hello, world`. {verify: check | sh test.sh}

## Open questions
";

fn two_clause_unit(env: &TestEnv) -> String {
    let id = env.new_unit("greet people by name");
    env.set_body(&id, TWO_CLAUSES);
    id
}

fn error_codes(report: &serde_json::Value) -> Vec<&str> {
    report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect()
}

#[test]
fn an_uncovered_clause_blocks_signoff_until_an_expectation_names_it() {
    let env = TestEnv::initialized();
    let id = two_clause_unit(&env);
    let before = env.snapshot();
    // `approve` refuses, naming the clause, and changes nothing.
    assert_read!(
        &env,
        "approve_refused_uncovered_clause",
        refused(&env, &["approve", &id, "--yes"], 3, "lint-errors")
    );
    assert_eq!(env.snapshot(), before, "a refusal changes nothing");
    let refusal = env.iced_json(&["approve", &id, "--yes"]).json();
    assert_eq!(refusal["lint"]["errors"][0]["code"], "goal-uncovered");
    assert!(refusal["lint"]["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("G2 \"anyone else still gets the general greeting.\""));
    assert_read!(
        &env,
        "lint_uncovered_clause",
        both(&env, &["lint", &id, "--stage", "signoff"])
    );
    // The draft's rules at `validate` do not include sign-off rules, this one neither.
    assert_eq!(env.iced_json(&["lint", &id]).ok().code, 0);
    // The map shows what covers what, as JSON and as text.
    assert_read!(
        &env,
        "status_uncovered_clause",
        both(&env, &["status", &id])
    );

    // E2 names the clause it checks: the goal is covered and the sign-off goes through.
    let file = unit_file(&id);
    env.write(
        &file,
        env.read(&file).replace(
            "`Hello, world`. {verify",
            "`Hello, world`. {goal: G2} {verify",
        ),
    );
    let lint = env.iced_json(&["lint", &id, "--stage", "signoff"]).ok();
    assert!(error_codes(&lint.json()).is_empty(), "{lint:?}");
    let approved = env.iced_json(&["approve", &id, "--yes"]).ok().json();
    assert_eq!(approved["status"], "approved");
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(
        status["coverage"]["clauses"][1]["covered_by"],
        serde_json::json!(["E2"])
    );
    assert_eq!(status["coverage"]["uncovered"], serde_json::json!([]));
    // The annotation stays part of the item text.
    assert!(env.iced(&["status", &id]).ok().stdout.contains(
        "[E2] `sh greet.sh` still prints `Hello, world`. {goal: G2}  (check: sh test.sh)"
    ));
}

#[test]
fn an_annotation_naming_a_clause_the_goal_lacks_blocks_signoff() {
    let env = TestEnv::initialized();
    let id = two_clause_unit(&env);
    let file = unit_file(&id);
    env.write(
        &file,
        env.read(&file).replace(
            "`Hello, world`. {verify",
            "`Hello, world`. {goal: G2, G3} {verify",
        ),
    );
    assert_read!(
        &env,
        "lint_unknown_clause",
        both(&env, &["lint", &id, "--stage", "signoff"])
    );
    let run = env.iced_json(&["approve", &id, "--yes"]);
    run.refused(3, "lint-errors");
    assert_eq!(error_codes(&run.json()["lint"]), ["goal-clause-unknown"]);
}

#[test]
fn a_one_clause_goal_is_covered_by_expectations_without_annotations() {
    let env = TestEnv::initialized();
    let id = env.good_unit("session timeout");
    let goal = "Signed-in people stay signed in while they are active.";
    let line = 1 + env
        .read(&unit_file(&id))
        .lines()
        .position(|l| l == goal)
        .unwrap();
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(
        status["coverage"],
        serde_json::json!({
            "clauses": [{
                "id": "G1",
                "text": goal,
                "line": line,
                "covered_by": ["E1", "E2"]
            }],
            "uncovered": [],
            "unknown": []
        })
    );
    // One clause, covered: the text shows no clause list.
    let text = env.iced(&["status", &id]).ok().stdout;
    assert!(!text.contains("[G1]"), "{text}");
    // Without any expectation the one clause is uncovered, beside `expectations-missing`.
    env.set_body(
        &id,
        &GOOD_BODY.replace(
            "- [E1] Activity extends the session. {verify: test | tests/session.rs}\n- [E2] An idle session still ends after 30 minutes. {verify: test | tests/session.rs}\n",
            "",
        ),
    );
    let report = env.iced_json(&["lint", &id, "--stage", "signoff"]).json();
    assert_eq!(
        error_codes(&report),
        ["expectations-missing", "goal-uncovered"]
    );
}

#[test]
fn a_unit_signed_off_before_the_rule_is_not_judged_again() {
    let env = TestEnv::initialized();
    let id = two_clause_unit(&env);
    // Signed off by hand, as iced-core (which has no coverage rule) would have: the right hash.
    let text = env.read(&unit_file(&id));
    env.set_field(&id, "status", "approved");
    env.set_field(&id, "contract_hash", &iced::unit::contract_hash(&text));
    for stage in ["signoff", "validate", "accept", "draft"] {
        let run = env.iced_json(&["lint", &id, "--stage", stage]);
        assert!(error_codes(&run.json()).is_empty(), "{stage}: {run:?}");
    }
    // `status` still shows the map, and what it lacks.
    let status = env.iced_json(&["status", &id]).ok().json();
    assert_eq!(status["coverage"]["uncovered"], serde_json::json!(["G2"]));
    assert!(env
        .iced(&["status", &id])
        .ok()
        .stdout
        .contains("  [G2] anyone else still gets the general greeting.  (UNCOVERED)"));
    // `build` admits it: its sign-off stands.
    env.patch_config(&crate::loop_e2e::own_checks(serde_json::json!([])));
    env.commit_all(&format!("approve {id}"));
    let (_, last) = crate::loop_e2e::build(&env, &id, &["--no-wait"], 0);
    assert!(last["run"].is_string(), "{last}");
    // Back to blocked (by hand, the file only), a new sign-off judges it like any other.
    env.set_field(&id, "status", "blocked");
    let report = env.iced_json(&["lint", &id, "--stage", "signoff"]).json();
    assert_eq!(error_codes(&report), ["goal-uncovered"]);
}
