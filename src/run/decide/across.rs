//! Rules across the lanes of a run, beside `decide` (this file is `decide::across`): what one
//! lane's move waits for in another's.

use super::{in_hand, Next, Waiting};
use crate::run::state::{Lane, Run};

/// One landing at a time in a run (SPEC 23.2): a landing step moves the target, and may merge
/// into its checkout (its index, its lock); two lanes' landings at once, by two drivers or one
/// build's threads (SPEC 20.1), would contend for them. `next` waits while another lane's
/// landing step is in hand.
pub(super) fn one_landing_at_a_time(run: &Run, lane: &Lane, next: Next) -> Next {
    let Next::Sync { step, .. } = &next else {
        return next;
    };
    if !step.is_landing() {
        return next;
    }
    let landing = run
        .lanes
        .iter()
        .filter(|other| other.id != lane.id)
        .flat_map(|other| other.steps.iter())
        .find(|r| r.step.is_landing() && in_hand(r));
    match landing {
        Some(r) => Next::Wait {
            lane: lane.id.clone(),
            why: Waiting::DoingStep {
                step: r.step.clone(),
            },
        },
        None => next,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{in_hand, lane, record, run, view};
    use super::super::{decide, Next, Waiting};
    use crate::run::keys::StepKey;
    use crate::run::state::{Driver, Lane, Stage, StepRecord, StepStatus};
    use serde_json::json;

    /// A delivered lane about to land, nothing of its landing done.
    fn landing(id: &str) -> Lane {
        Lane {
            land_round: 1,
            ..lane(id, Stage::Land, vec![])
        }
    }

    /// A lane landing, `before` done and the step `now` in hand.
    fn to_land(id: &str, mut steps: Vec<StepRecord>, now: &str) -> Lane {
        steps.push(in_hand(now));
        Lane {
            steps,
            ..landing(id)
        }
    }

    /// One landing at a time in a run (SPEC 23.2): while lane `a`'s landing step is in hand
    /// (another driver, or a thread of this one, is doing it), lane `b` does not start its own;
    /// a lane not landing is not held, and once `a`'s owner is gone `a` takes its step again.
    #[test]
    fn a_lane_lands_only_while_no_other_lane_is_landing() {
        let mut v = view(Driver::Process);
        v.land_mode = "merge".into();
        let done = |step: &str, outcome| {
            let mut r = record(step, outcome);
            r.status = StepStatus::Done;
            r
        };
        let merged = done("integrate-1", json!({"merged": false}));
        #[rustfmt::skip]
        let rows: Vec<(&str, Vec<StepRecord>)> = vec![
            ("integrate-1", vec![]),
            ("landcommit-1", vec![merged.clone()]),
            ("land-1", vec![merged.clone(), done("landcommit-1", json!({}))]),
        ];
        for (step, before) in rows {
            let mut r = run(
                Driver::Process,
                vec![to_land("a", before, step), landing("b")],
            );
            let next = decide(&r, &v);
            assert!(
                matches!(
                    &next,
                    Next::Wait {
                        why: Waiting::DoingStep { .. },
                        ..
                    }
                ),
                "{step} of `a` in hand: {next:?}"
            );
            r.lanes[1] = lane("b", Stage::Deliver, vec![]);
            assert_eq!(decide(&r, &v), Next::Deliver { lane: "b".into() }, "{step}");
            r.lanes[1] = landing("b");
            r.lanes[0].steps.iter_mut().for_each(|s| s.pid = None);
            assert!(
                matches!(decide(&r, &v), Next::Sync { lane, .. } if lane == "a"),
                "{step} whose owner is gone"
            );
        }
        // Nothing in hand: the first lane lands.
        assert_eq!(
            decide(&run(Driver::Process, vec![landing("a"), landing("b")]), &v),
            Next::Sync {
                lane: "a".into(),
                step: StepKey::Integrate(1)
            }
        );
    }
}
