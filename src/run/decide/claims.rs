//! What a run's claims on `land.remote` ask of it (SPEC 24.9.1), before any lane moves: a lane
//! whose unit's claim the run lost is blocked (another machine may be building it, so nothing
//! more of the lane runs or lands), and claims due to be renewed are renewed first, or, while
//! the remote cannot be reached, waited for. Pure, like the rest of `decide`: whether the claims
//! are due is the stepper's reading of the clock, handed in by the view.

use super::{DecideView, Next, Waiting};
use crate::run::state::Run;

/// The move the run's claims call for, if any comes before the lanes' own.
pub(super) fn next(run: &Run, view: &DecideView) -> Option<Next> {
    let live = || run.lanes.iter().filter(|l| !l.stage.is_final());
    if let Some(lost) = run.claims.as_ref().map(|c| &c.lost) {
        for lane in live() {
            // The run's own unit lost takes every lane with it.
            let unit = if lost.contains_key(&lane.unit) {
                &lane.unit
            } else {
                &run.unit
            };
            let Some(why) = lost.get(unit) else {
                continue;
            };
            return Some(Next::Block {
                lane: lane.id.clone(),
                reason: format!(
                    "the run's claim on `{unit}` on the remote was lost: {why}; another machine may be building it, so nothing more of this lane runs or lands. `iced run discard {} {}` drops the lane; once no other machine builds it, resume the run",
                    run.id, lane.id
                ),
            });
        }
    }
    if !view.renew_claims {
        return None;
    }
    // With every lane final the run ends, and its end releases the claims.
    let lane = live().next()?;
    Some(match &view.paced_until {
        None => Next::RenewClaims,
        Some(until) => Next::Wait {
            lane: lane.id.clone(),
            why: Waiting::Renewing {
                until: until.clone(),
            },
        },
    })
}
