//! `decide` for a run's claims on `land.remote` (SPEC 24.9.1): a lane whose unit's claim was lost
//! blocks before it moves again (every live lane, when the run's own unit's was); claims due are
//! renewed before any lane moves, or waited for while the remote is backed off; a run whose every
//! lane is final renews nothing. The state builders are `decide/tests.rs`', whose module this is.

use super::super::*;
use super::{lane, run, view};
use crate::run::state::Renewal;

/// A run of lanes `a` (implementing) and `b` (validating, its validators answered), whose last
/// renewal lost the claims on `lost`.
fn run_that_lost(lost: &[&str]) -> Run {
    let mut r = run(
        Driver::Process,
        vec![
            lane("a", Stage::Implement, vec![]),
            lane("b", Stage::Validate, vec![]),
        ],
    );
    r.claims = Some(Renewal {
        at: Some("2026-09-30T12:00:00Z".into()),
        now: false,
        lost: lost
            .iter()
            .map(|u| ((*u).to_owned(), format!("run `x` holds `{u}`")))
            .collect(),
    });
    r
}

fn blocked_lane(next: &Next) -> Option<(&str, &str)> {
    match next {
        Next::Block { lane, reason } => Some((lane, reason)),
        _ => None,
    }
}

#[test]
fn a_lane_whose_claim_was_lost_blocks_and_the_others_go_on() {
    let v = view(Driver::Process);
    let r = run_that_lost(&["b"]);
    let next = decide(&r, &v);
    let (lane, reason) = blocked_lane(&next).expect("a block");
    assert_eq!(lane, "b");
    assert!(reason.starts_with("the run's claim on `b` on the remote was lost: run `x` holds `b`; another machine may be building it"), "{reason}");
    assert!(reason.contains("`iced run discard run-1 b`"), "{reason}");
    // Once it is blocked, the other lane moves as it would have.
    let mut r = r;
    r.lane_mut("b").unwrap().stage = Stage::Blocked;
    let mut clean = r.clone();
    clean.claims = None;
    assert_eq!(decide(&r, &v), decide(&clean, &v));
    assert!(blocked_lane(&decide(&r, &v)).is_none());
}

#[test]
fn the_run_s_own_unit_lost_blocks_every_lane() {
    let v = view(Driver::Process);
    let mut r = run_that_lost(&["u"]);
    for expected in ["a", "b"] {
        let next = decide(&r, &v);
        let (lane, reason) = blocked_lane(&next).expect("a block");
        assert_eq!(lane, expected);
        assert!(reason.contains("claim on `u`"), "{reason}");
        r.lane_mut(expected).unwrap().stage = Stage::Blocked;
    }
}

#[test]
fn claims_due_are_renewed_before_any_lane_moves_and_waited_for_while_backed_off() {
    let mut v = view(Driver::Process);
    let r = run(
        Driver::Process,
        vec![
            lane("a", Stage::Implement, vec![]),
            lane("b", Stage::Deliver, vec![]),
        ],
    );
    assert!(!matches!(decide(&r, &v), Next::RenewClaims));
    v.renew_claims = true;
    assert_eq!(decide(&r, &v), Next::RenewClaims);
    v.paced_until = Some("2026-10-01T09:00:00Z".into());
    assert_eq!(
        decide(&r, &v),
        Next::Wait {
            lane: "a".into(),
            why: Waiting::Renewing {
                until: "2026-10-01T09:00:00Z".into()
            }
        }
    );
    // A lost claim blocks first: a renewal cannot give it back.
    let mut lost = r.clone();
    lost.claims = run_that_lost(&["a"]).claims;
    assert_eq!(blocked_lane(&decide(&lost, &v)).map(|b| b.0), Some("a"));
}

#[test]
fn a_run_whose_lanes_are_all_final_renews_nothing() {
    let mut v = view(Driver::Process);
    v.renew_claims = true;
    let r = run(
        Driver::Process,
        vec![
            lane("a", Stage::Delivered, vec![]),
            lane("b", Stage::Delivered, vec![]),
        ],
    );
    assert_eq!(decide(&r, &v), Next::Finish);
}
