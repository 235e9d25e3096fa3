//! The simulator's planning (`build --auto-plan`, SPEC 20.16), as `stage::plan` does it: the
//! round's agents (the planner, then the two plan reviewers) are agents of the model's world; the
//! loop's check of what each wrote (a planner's draft now and then refused, a reviewer's answer
//! now and then with an open finding, which starts another round while rounds are left); the
//! loop's decision (approved: the lane goes on to its brief in the same run; otherwise handed
//! back); and the lane's move, applied under the lock.

use super::{apply_move, finish, Sim};
use crate::run::decide::plan::PlanNext;
use crate::run::keys::StepKey;
use crate::run::state::StepStatus;
use serde_json::{json, Value};

impl Sim {
    /// Planning goes on only from a draft the loop took: a refused draft is never reviewed or
    /// decided on, and a lane leaves `plan` for its brief only once the loop approved the plan.
    pub(super) fn check_plan(&self, next: &crate::run::decide::Next) {
        let crate::run::decide::Next::Plan { lane, next } = next else {
            return;
        };
        let l = self.run.lane(lane).expect("a move names a lane of the run");
        let round = crate::run::decide::plan::round_of(l);
        let refused = l
            .record(&StepKey::Plan(round))
            .and_then(|r| r.outcome.as_ref())
            .is_some_and(|o| o["refused"].is_string());
        let goes_on = match next {
            PlanNext::Launch(keys) => keys.iter().any(|k| matches!(k, StepKey::PlanReview { .. })),
            PlanNext::Decide => true,
            _ => false,
        };
        assert!(
            !(refused && goes_on),
            "lane `{lane}` went on ({next:?}) from a refused draft"
        );
        if let PlanNext::Move(crate::run::decide::LaneMove::To(_)) = next {
            let approved = l
                .record(&StepKey::PlanDecide)
                .filter(|r| r.status == StepStatus::Done)
                .and_then(|r| r.outcome.as_ref())
                .is_some_and(|o| o["approved"] == true);
            assert!(approved, "lane `{lane}` left planning unapproved: {next:?}");
        }
    }

    /// `stage::plan::under_lock`: a launch or a decision is marked started (`mark_started`) and
    /// done outside; a check only outside; a move here. True when there is work outside.
    pub(super) fn plan_under_lock(&mut self, lane: &str, next: &PlanNext) -> bool {
        match next {
            PlanNext::Launch(_) | PlanNext::Decide => {
                super::mark_started(
                    &mut self.run,
                    &plan_move(lane, next),
                    self.case.validator_driver,
                );
                true
            }
            PlanNext::Check(_) => true,
            PlanNext::Move(mv) => {
                apply_move(self.lane_mut(lane), mv.clone());
                false
            }
            PlanNext::Wait { .. } => unreachable!("decide reports a wait itself"),
        }
    }

    /// `stage::plan`'s launch, check and decision, with the world's outcome drawn from the dice.
    pub(super) fn plan_outside(&mut self, lane: &str, next: &PlanNext) {
        match next {
            PlanNext::Launch(keys) => {
                for key in keys {
                    let limited = self.budget.rate_limits > 0 && self.dice.chance(8);
                    self.budget.rate_limits -= u32::from(limited);
                    let exit = (!self.dice.chance(10)).then_some(0);
                    self.spawn(lane, key, exit, limited, true);
                }
            }
            PlanNext::Check(key) => {
                let refused = matches!(key, StepKey::Plan(_)) && self.dice.chance(10);
                let finding = match key {
                    StepKey::PlanReview { lens, round } if self.dice.chance(40) => {
                        Some((lens.clone(), *round))
                    }
                    _ => None,
                };
                let l = self.lane_mut(lane);
                if let Some((lens, round)) = finding {
                    let n = l.findings.len() + 1;
                    let mut f =
                        crate::run::decide::tests::finding(&l.id, n, round, "S2-major", "open");
                    f.by = lens;
                    l.findings.push(f);
                }
                let record = l.record_mut(key).expect("a finished agent");
                let o = record.outcome.get_or_insert_with(|| json!({}));
                o["checked"] = Value::Bool(true);
                if refused {
                    o["refused"] = "the draft is not a unit".into();
                }
            }
            PlanNext::Decide => {
                let approved = self.dice.chance(70);
                let l = self.lane_mut(lane);
                let record = l.record_mut(&StepKey::PlanDecide).expect("marked");
                let outcome = if approved {
                    json!({"approved": true, "commit": "c"})
                } else {
                    json!({"approved": false, "reason": "the record leaves a decision open"})
                };
                finish(record, StepStatus::Done, outcome);
            }
            PlanNext::Move(_) | PlanNext::Wait { .. } => {}
        }
    }
}

/// The move as `decide` gave it, to mark it started.
fn plan_move(lane: &str, next: &PlanNext) -> crate::run::decide::Next {
    crate::run::decide::Next::Plan {
        lane: lane.to_owned(),
        next: next.clone(),
    }
}
