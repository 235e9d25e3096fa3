//! `decide` for a remote that could not be reached when a lane branch was published (SPEC 20.19,
//! 20.10): not the lane's fault, so no attempt, no crash and no block; the step runs again once
//! the run's backoff has passed. A branch the run may not overwrite still blocks. The state
//! builders are `decide/tests.rs`', whose module this is.

use super::super::*;
use super::{lane, record, run, view};
use crate::run::state::StepRecord;
use serde_json::{json, Value};

fn failed(step: &str, outcome: serde_json::Value) -> StepRecord {
    let mut r = record(step, outcome);
    r.status = StepStatus::Failed;
    r
}

/// What comes next for lane `a` at `stage` whose `step` failed with `outcome`, its crash budget
/// spent (a crash would block).
fn next_with_no_crash_left(v: &DecideView, stage: Stage, step: &str, outcome: Value) -> Next {
    let mut l = lane("a", stage, vec![failed(step, outcome)]);
    l.crashes = v.max_crash_retries;
    decide(&run(Driver::Process, vec![l]), v)
}

#[test]
fn an_implementer_whose_remote_could_not_be_reached_is_queued_again_not_blocked() {
    let v = view(Driver::Process);
    let next_of = |outcome| next_with_no_crash_left(&v, Stage::Implement, "implement", outcome);
    assert_eq!(
        next_of(json!({"remote": "the remote could not be reached: x", "unreachable": true})),
        Next::Requeue {
            lane: "a".into(),
            key: StepKey::Implement
        }
    );
    assert_eq!(
        next_of(json!({"remote": "the remote's branch is someone else's"})),
        Next::Block {
            lane: "a".into(),
            reason: "remote: the remote's branch is someone else's".into()
        }
    );
}

#[test]
fn a_validator_whose_remote_could_not_be_reached_is_prepared_again_whatever_the_crash_budget() {
    let mut v = view(Driver::Process);
    v.validators.insert("a".into(), vec!["full".into()]);
    v.remote_validators = true;
    let next_of = |outcome| next_with_no_crash_left(&v, Stage::Validate, "validate-full", outcome);
    assert_eq!(
        next_of(json!({"remote": "the remote could not be reached: x", "unreachable": true})),
        Next::RedoValidator {
            lane: "a".into(),
            key: "validate-full".parse().unwrap()
        }
    );
    assert!(matches!(
        next_of(json!({"crashed": true})),
        Next::Block { .. }
    ));
}

#[test]
fn remote_validators_are_prepared_only_once_the_backoff_has_passed() {
    let mut v = view(Driver::Process);
    v.validators.insert("a".into(), vec!["full".into()]);
    v.paced_until = Some("2026-09-30T11:05:00Z".into());
    let r = run(Driver::Process, vec![lane("a", Stage::Validate, vec![])]);
    // Local validators are prepared at once (only their launch keeps the pace).
    assert!(matches!(decide(&r, &v), Next::PrepareValidators { .. }));
    // Remote ones publish the lane branch as they are prepared: they wait.
    v.remote_validators = true;
    assert_eq!(
        decide(&r, &v),
        Next::Wait {
            lane: "a".into(),
            why: Waiting::Paced {
                until: "2026-09-30T11:05:00Z".into()
            }
        }
    );
    v.paced_until = None;
    assert!(matches!(decide(&r, &v), Next::PrepareValidators { .. }));
}

/// Paced: lane `a` of `r` waits for the backoff to pass before `step` runs again.
fn assert_waits_for_the_backoff(r: &Run, v: &mut DecideView, step: StepKey) {
    let until = "2026-09-30T11:05:00Z".to_owned();
    v.paced_until = Some(until.clone());
    let why = Waiting::Unreachable { step, until };
    assert_eq!(
        decide(r, v),
        Next::Wait {
            lane: "a".into(),
            why
        }
    );
}

#[test]
fn a_receipt_that_could_not_reach_the_remote_is_checked_again_once_the_backoff_has_passed() {
    let mut v = view(Driver::Process);
    v.dod_shape = vec![1];
    let checked = record(
        "receipt",
        json!({"unreachable": "the remote could not be reached: x"}),
    );
    let r = run(
        Driver::Process,
        vec![lane("a", Stage::Receipt, vec![checked])],
    );
    assert_waits_for_the_backoff(&r, &mut v, StepKey::Receipt);
    // Not a gap: no definition of done, no new attempt; the checks again.
    v.paced_until = None;
    assert_eq!(decide(&r, &v), Next::CheckReceipt { lane: "a".into() });
}

#[test]
fn a_landing_step_that_could_not_reach_the_remote_is_tried_again_once_the_backoff_has_passed() {
    let mut v = view(Driver::Process);
    let outcome = json!({"again": true, "new_round": false, "why": "x", "unreachable": "`origin` could not be reached: x"});
    let r = run(
        Driver::Process,
        vec![lane("a", Stage::Retire, vec![failed("retire", outcome)])],
    );
    assert_waits_for_the_backoff(&r, &mut v, StepKey::Retire);
    v.paced_until = None;
    assert_eq!(
        decide(&r, &v),
        Next::Sync {
            lane: "a".into(),
            step: StepKey::Retire
        }
    );
    // A failure with the remote there blocks, as it always did.
    let r = run(
        Driver::Process,
        vec![lane(
            "a",
            Stage::Retire,
            vec![failed("retire", json!({"error": "refused"}))],
        )],
    );
    assert!(matches!(decide(&r, &v), Next::Block { .. }));
}
