//! `decide` for a lane whose worktree an agent replaced (SPEC 24.6): the receipt that finds it so
//! runs no definition of done, and the lane blocks at once, naming the worktree. The state builders
//! are `decide/tests.rs`', whose module this is.

use super::super::*;
use super::{lane, record, run, view};
use serde_json::json;

#[test]
fn a_receipt_that_finds_the_worktree_replaced_runs_nothing_and_blocks_the_lane() {
    let mut v = view(Driver::Process);
    v.dod_shape = vec![1];
    let checked = |outcome| vec![record("receipt", outcome)];
    let next_of = |steps| {
        decide(
            &run(Driver::Process, vec![lane("a", Stage::Receipt, steps)]),
            &v,
        )
    };
    // Checks in, the worktree git's: the definition of done is next. Replaced: nothing is.
    assert!(matches!(
        next_of(checked(json!({"missing": [], "head": "h1"}))),
        Next::LaunchDod { .. }
    ));
    let gap = "the worktree is not the worktree git made: a link";
    assert_eq!(
        next_of(checked(json!({"missing": [gap], "replaced": "a link"}))),
        Next::FinishReceipt { lane: "a".into() }
    );

    // Blocked at once, first attempt or not, handed back or not: no new attempt is started there.
    let gaps = vec![gap.to_owned()];
    let found = ReceiptFound {
        verified: false,
        handback: Some("the unit is wrong"),
        missing: &gaps,
        escalation: None,
        tests_refused: None,
        replaced: Some("a link"),
    };
    let mut at = lane("a", Stage::Receipt, vec![]);
    at.worktree = Some("/w/a".into());
    let reason =
        "the worktree `/w/a` is not the worktree git made: a link; nothing more is started in it";
    assert_eq!(
        after_receipt(&at, &v, &found),
        LaneMove::Block {
            reason: reason.into()
        }
    );
}
