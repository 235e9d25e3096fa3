//! `decide` row by row for the test writer (SPEC 20.17): where it comes in a lane's receipt, what
//! a crash of it does, and why its work is refused. The state builders are `decide/tests.rs`'.

use super::tests::{lane, record, run, view};
use super::*;
use crate::run::state::StepRecord;
use serde_json::{json, Value};

/// SPEC 20.17: with `build.testWriter`, a receipt whose own checks passed starts the test writer
/// once, waits for it, has what it changed checked, and only then runs the definition of done; a
/// refused or asking test writer ends the receipt at once.
#[test]
fn the_test_writer_comes_between_the_receipts_checks_and_the_definition_of_done() {
    use crate::run::decide::tester::TesterNext;
    let mut v = view(Driver::Process);
    v.test_writer = true;
    v.dod_shape = vec![1];
    let checked = record("receipt", json!({"missing": [], "head": "h1"}));
    let finished = |step: &str, status: StepStatus, outcome: Value| {
        let mut r = record(step, outcome);
        r.status = status;
        r
    };
    let next_of = |steps: Vec<StepRecord>, v: &DecideView| {
        decide(
            &run(Driver::Process, vec![lane("a", Stage::Receipt, steps)]),
            v,
        )
    };
    let tester = |next| Next::Tester {
        lane: "a".into(),
        next,
    };
    let a = || "a".to_owned();
    assert_eq!(
        next_of(vec![checked.clone()], &v),
        tester(TesterNext::Launch)
    );
    // Without it, the definition of done comes at once.
    let mut off = v.clone();
    off.test_writer = false;
    assert!(matches!(
        next_of(vec![checked.clone()], &off),
        Next::LaunchDod { .. }
    ));
    // A receipt that lacks something does not start it: that attempt is the implementer's.
    let lacking = record("receipt", json!({"missing": ["no commit"], "head": "h1"}));
    assert!(matches!(next_of(vec![lacking], &v), Next::LaunchDod { .. }));
    // The pace and the ceiling hold it back like any agent.
    let mut full = v.clone();
    full.agents_alive = 1;
    assert!(matches!(
        next_of(vec![checked.clone()], &full),
        Next::Wait { .. }
    ));
    let running = record("test-write", json!({}));
    assert_eq!(
        next_of(vec![checked.clone(), running], &v),
        Next::Wait {
            lane: a(),
            why: Waiting::TestWriterRunning
        }
    );
    let wrote = finished("test-write", StepStatus::Done, json!({"exit_code": 0}));
    assert_eq!(
        next_of(vec![checked.clone(), wrote.clone()], &v),
        tester(TesterNext::Check)
    );
    // Crashed after its supervisor registered: never started again; before: started.
    let gone = finished(
        "test-write",
        StepStatus::Failed,
        json!({"crashed": true, "registered": true}),
    );
    assert!(
        matches!(next_of(vec![checked.clone(), gone], &v), Next::Block { reason, .. } if reason.contains("not run again"))
    );
    let never = finished(
        "test-write",
        StepStatus::Failed,
        json!({"crashed": true, "registered": false}),
    );
    assert_eq!(
        next_of(vec![checked.clone(), never], &v),
        tester(TesterNext::Launch)
    );
    // Checked clean: the definition of done; refused or asking: the receipt ends now.
    let clean = finished(
        "test-check",
        StepStatus::Done,
        json!({"from": "h1", "head": "h2", "denied": []}),
    );
    assert!(matches!(
        next_of(vec![checked.clone(), wrote.clone(), clean], &v),
        Next::LaunchDod { .. }
    ));
    let outside = finished(
        "test-check",
        StepStatus::Done,
        json!({"from": "h1", "head": "h2", "denied": [{"path": "src/a.rs", "rule": "test-path-only", "reason": "no. Next step: x."}]}),
    );
    assert_eq!(
        next_of(vec![checked.clone(), wrote.clone(), outside.clone()], &v),
        Next::FinishReceipt { lane: a() }
    );
    let asked = finished(
        "test-check",
        StepStatus::Done,
        json!({"escalation": {"attempt": 1, "kind": "research", "message": "m", "status": "open"}}),
    );
    assert_eq!(
        next_of(vec![checked, wrote, asked], &v),
        Next::FinishReceipt { lane: a() }
    );
    // The refusal hands the lane back, naming the path and the commits.
    let o = outside
        .outcome_as::<crate::run::outcome::TestCheckOutcome>()
        .unwrap();
    let why = tester::refused(&o).expect("refused");
    assert_eq!(why, "the test writer's work is refused: `src/a.rs` (test-path-only): no; its commits h1..h2 stay on the lane branch for you to read, and nothing of them is validated or lands");
    let found = ReceiptFound {
        verified: false,
        handback: None,
        missing: &[],
        escalation: None,
        tests_refused: Some(&why),
        replaced: None,
    };
    assert_eq!(
        after_receipt(&lane("a", Stage::Receipt, vec![]), &v, &found),
        LaneMove::Handback {
            reason: why.clone()
        }
    );
}
