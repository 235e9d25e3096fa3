//! The work a step does under the state lock: a decision that needs no side effect outside the
//! state (or only a small file of the loop's own) is applied here; anything else is recorded
//! `started` and handed to `outside_lock` as pending work.

use super::decide::Next;
use super::events::{emit, Event};
use super::outcome::{BriefOutcome, DeliverOutcome, WorktreeOutcome};
use super::state::{ensure_dir, Run, RunStatus, Stage, StepStatus};
use crate::refusal::Refusal;
use crate::run::ctx::*;
use crate::run::keys::StepKey;
use crate::run::outside_lock::Pending;
use crate::run::records::*;
use crate::run::reply::Action;
use crate::run::reply::*;
use crate::run::stage::brief::*;
use crate::run::stage::receipt::*;
use crate::run::then::Then;
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;

/// Apply a decision that needs no side effect outside the state (or only a small file of the
/// loop's own), and turn the rest into work for phase 2.
pub(crate) fn apply(
    ctx: &Ctx<'_>,
    run: &mut Run,
    next: &Next,
    view: &super::decide::DecideView,
) -> Result<Pending, Refusal> {
    let run_id = run.id.clone();
    let report = |run: &Run, lane_id: &str, action: Action, next: Then| {
        let lane = run.lane(lane_id).expect("the lane exists");
        Pending::Report(Box::new(StepReport::for_lane(run, lane, action, next)))
    };
    Ok(match next {
        Next::Ended => Pending::Report(Box::new(ended_report(run))),
        Next::Paused => {
            let lane = &run.lanes[0];
            Pending::Report(Box::new(StepReport::for_lane(
                run,
                lane,
                Action::Paused,
                Then::Paused {
                    run: run_id.clone(),
                },
            )))
        }
        Next::Wait { lane, why } => {
            report(run, lane, Action::Waiting, Then::Wait { why: why.clone() })
        }
        Next::RenderBrief { lane } => {
            let worktree = run
                .lane(lane)
                .and_then(|l| l.worktree.clone())
                .map(PathBuf::from)
                .unwrap_or_else(|| ctx.worktree_path(lane));
            let l = run.lane(lane).expect("lane");
            let text = render_brief(ctx, run, l, &worktree)?;
            let path = ctx.brief_path(&run_id, lane, l.attempt);
            ensure_dir(&ctx.lane_dir(&run_id, lane), ctx.verb)?;
            // The folder the report goes to, for a host's agent as for the loop's (SPEC 21.1).
            let receipt = ctx.receipt_path(run, lane, l.attempt);
            ensure_dir(receipt.parent().expect("a report's folder"), ctx.verb)?;
            crate::store::write_atomic(&path, text.as_bytes(), 0o600)
                .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?;
            crate::failpoint::hit("brief-after-write");
            let sha = sha256_hex(text.as_bytes());
            let l = run.lane_mut(lane).expect("lane");
            let mut record = started(StepKey::Brief, l.attempt, Some(sha.clone()), None);
            finish(
                &mut record,
                StepStatus::Done,
                json!({"path": path, "sha256": sha}),
            );
            l.steps
                .retain(|r| !(r.step == StepKey::Brief && r.attempt == record.attempt));
            l.steps.push(record);
            let mv = super::decide::after_brief(l);
            apply_move(ctx, &run_id, l, mv)?;
            emit(
                &ctx.paths,
                &run_id,
                Event::StepDone,
                json!({"lane": lane, "step": "brief", "attempt": l.attempt, "outcome": {"sha256": sha}}),
            );
            report(run, lane, Action::Advanced, Then::BriefWritten)
        }
        Next::AddWorktree { lane } => {
            // A spare of the run (SPEC 23.2), taken here under the lock and named on the record
            // before any git runs: no two lanes take the same one, and the spare a dead call of
            // this step took is the one its next call finishes with.
            let taken = run
                .lane(lane)
                .and_then(|l| {
                    l.steps
                        .iter()
                        .find(|r| r.step == StepKey::Worktree && r.status == StepStatus::Started)
                })
                .and_then(|r| r.outcome_as::<WorktreeOutcome>())
                .and_then(|o| o.spare);
            let spare = taken.or_else(|| run.spares.pop());
            let l = run.lane_mut(lane).expect("lane");
            let mut record = started(StepKey::Worktree, l.attempt, Some(run_id.clone()), None);
            if let Some(spare) = &spare {
                record.outcome = Some(json!({ "spare": spare }));
            }
            l.steps.retain(|r| r.step != StepKey::Worktree);
            l.steps.push(record);
            Pending::AddWorktree {
                lane: lane.clone(),
                spare: spare.map(PathBuf::from),
            }
        }
        Next::LaunchImplementer { lane } => {
            let l = run.lane_mut(lane).expect("lane");
            let brief_sha = l
                .outcome_as::<BriefOutcome>(&StepKey::Brief)
                .map(|o| o.sha256);
            let nonce = new_nonce();
            let record = started(
                StepKey::Implement,
                l.attempt,
                brief_sha,
                Some(nonce.clone()),
            );
            l.steps
                .retain(|r| !(r.step == StepKey::Implement && r.attempt == record.attempt));
            l.steps.push(record);
            Pending::LaunchImplementer {
                lane: lane.clone(),
                nonce,
            }
        }
        Next::HandToHost { lane } => {
            super::host::hand_implementer(ctx, &run_id, run.lane_mut(lane).expect("lane"));
            Pending::Report(Box::new(start_agent_report(ctx, run, lane)))
        }
        Next::CheckReceipt { lane } => {
            let l = run.lane_mut(lane).expect("lane");
            apply_move(ctx, &run_id, l, super::decide::after_implementer())?;
            let record = started(StepKey::Receipt, l.attempt, None, None);
            l.steps
                .retain(|r| !(r.step == StepKey::Receipt && r.attempt == record.attempt));
            l.steps.push(record);
            Pending::CheckReceipt { lane: lane.clone() }
        }
        Next::LaunchDod {
            lane,
            run: which,
            slots,
        } => {
            let l = run.lane_mut(lane).expect("lane");
            let mut keys = Vec::new();
            for &(i, j) in slots {
                let key = which.key(i, j);
                let nonce = new_nonce();
                let record = started(key.clone(), l.attempt, None, Some(nonce.clone()));
                l.steps
                    .retain(|r| !(r.step == key && r.attempt == record.attempt));
                l.steps.push(record);
                keys.push((key, i, j, nonce));
            }
            Pending::LaunchDod {
                lane: lane.clone(),
                keys,
            }
        }
        Next::FinishReceipt { lane } => {
            finish_receipt(ctx, run, lane, view)?;
            let l = run.lane(lane).expect("lane");
            let action = match l.stage {
                Stage::Blocked => Action::Blocked,
                Stage::Handback => Action::Handback,
                _ => Action::Advanced,
            };
            let next = match l.stage {
                Stage::Deliver => Then::ReceiptVerified,
                Stage::Validate => Then::ReceiptToValidators,
                Stage::Brief => Then::ReceiptNotVerified { attempt: l.attempt },
                _ => super::reply::escalated(l)
                    .unwrap_or_else(|| Then::Reason(l.reason.clone().unwrap_or_default())),
            };
            // A lane whose stage is final (here blocked or handed back) says why in its reason.
            let reason = l.reason.clone().unwrap_or_default();
            // A receipt that did not verify listed its gaps in the reason, one `- ` line each.
            let missing: Vec<String> = if matches!(l.stage, Stage::Brief | Stage::Blocked) {
                reason
                    .lines()
                    .filter_map(|g| g.strip_prefix("- "))
                    .map(str::to_owned)
                    .collect()
            } else {
                Vec::new()
            };
            if run.lanes.iter().all(|l| l.stage.is_final()) {
                let status = super::decide::run_status(run, view, &|i, j| ctx.expected(i, j));
                if status.is_ended() {
                    end_run(ctx, run, status)?;
                } else {
                    run.status = status;
                    emit(
                        &ctx.paths,
                        &run_id,
                        Event::RunBlocked,
                        json!({"reason": reason}),
                    );
                }
            }
            let lane_ref = run.lane(lane).expect("lane");
            let mut told = StepReport::for_lane(run, lane_ref, action, next);
            told.missing = missing;
            Pending::Report(Box::new(told))
        }
        Next::Retry {
            lane,
            reason,
            crashed,
        } => {
            let l = run.lane_mut(lane).expect("lane");
            new_attempt(ctx, &run_id, l, reason.clone(), *crashed)?;
            report(
                run,
                lane,
                Action::Advanced,
                Then::AttemptStarts {
                    attempt: run.lane(lane).expect("lane").attempt,
                    reason: reason.clone(),
                },
            )
        }
        Next::Requeue { lane, key } => {
            let old = run.lane_mut(lane).expect("lane").take_current(key);
            archive(ctx, &run_id, lane, &old)?;
            let until = run.next_eligible_at.clone().unwrap_or_default();
            let unreachable = old
                .iter()
                .filter_map(|r| r.outcome_as::<super::outcome::ActivityOutcome>())
                .find(|o| o.unreachable)
                .and_then(|o| o.remote);
            report(
                run,
                lane,
                Action::Advanced,
                Then::RateLimited {
                    key: key.clone(),
                    until,
                    unreachable,
                },
            )
        }
        Next::RelaunchDod { lane, key } => {
            let l = run.lane_mut(lane).expect("lane");
            let old = l.take_current(key);
            l.crashes += 1;
            archive(ctx, &run_id, lane, &old)?;
            report(
                run,
                lane,
                Action::Advanced,
                Then::Crashed { key: key.clone() },
            )
        }
        Next::OverBudget { lane, reason } => {
            // No agent starts (SPEC 20.12): the lane is handed back, and a run whose lanes are
            // all final ends so.
            let l = run.lane_mut(lane).expect("lane");
            let mv = super::decide::LaneMove::Handback {
                reason: reason.clone(),
            };
            apply_move(ctx, &run_id, l, mv)?;
            emit(
                &ctx.paths,
                &run_id,
                Event::BudgetSpent,
                json!({"lane": lane, "charged_usd": view.budget.map(|b| b.charged_usd), "budget_usd": view.budget.map(|b| b.budget_usd), "unknown": view.budget.map(|b| b.unknown), "unknown_cost_usd": view.budget.map(|b| b.unknown_cost_usd)}),
            );
            if run.lanes.iter().all(|l| l.stage.is_final()) {
                let status = super::decide::run_status(run, view, &|i, j| ctx.expected(i, j));
                if status.is_ended() {
                    end_run(ctx, run, status)?;
                    return Ok(Pending::Report(Box::new(ended_report(run))));
                }
            }
            report(run, lane, Action::Handback, Then::Reason(reason.clone()))
        }
        Next::Block { lane, reason } => {
            let l = run.lane_mut(lane).expect("lane");
            let mv = super::decide::LaneMove::Block {
                reason: reason.clone(),
            };
            apply_move(ctx, &run_id, l, mv)?;
            run.status = super::decide::waiting_for_a_person();
            emit(
                &ctx.paths,
                &run_id,
                Event::RunBlocked,
                json!({"lane": lane, "reason": reason}),
            );
            report(
                run,
                lane,
                Action::Blocked,
                Then::FixThenResume {
                    reason: reason.clone(),
                    run: run_id.clone(),
                },
            )
        }
        Next::Deliver { lane } => {
            let l = run.lane_mut(lane).expect("lane");
            let mut record = started(StepKey::Deliver, l.attempt, None, None);
            // A delivery commit a dead call prepared is kept: the next call adopts exactly it.
            record.outcome = l
                .record(&StepKey::Deliver)
                .and_then(|r| r.outcome.clone())
                .filter(|o| DeliverOutcome::deserialize(o).is_ok_and(|d| d.prepared.is_some()));
            l.steps
                .retain(|r| !(r.step == StepKey::Deliver && r.attempt == record.attempt));
            l.steps.push(record);
            Pending::Deliver { lane: lane.clone() }
        }
        Next::PrepareValidators { lane, keys } => {
            let l = run.lane_mut(lane).expect("lane");
            super::stage::validators::mark_prepare(l, keys);
            Pending::PrepareValidators {
                lane: lane.clone(),
                keys: keys.clone(),
            }
        }
        Next::LaunchValidators { lane, keys } => {
            let l = run.lane_mut(lane).expect("lane");
            let keys = super::stage::validators::mark_launch(l, keys);
            Pending::LaunchValidators {
                lane: lane.clone(),
                keys,
            }
        }
        Next::HandValidator { lane, key } => Pending::Report(Box::new(
            super::stage::validators::hand(ctx, run, lane, key),
        )),
        Next::CheckValidator { lane, key } => {
            let (pid, pid_start) = me();
            let l = run.lane_mut(lane).expect("lane");
            let r = l.record_mut(key).expect("a finished validator");
            r.pid = Some(pid);
            r.pid_start = pid_start;
            Pending::CheckValidator {
                lane: lane.clone(),
                key: key.clone(),
            }
        }
        Next::RedoValidator { lane, key } => {
            let l = run.lane_mut(lane).expect("lane");
            let said = super::stage::validators::redo(ctx, &run_id, l, key)?;
            report(run, lane, Action::Advanced, said)
        }
        Next::Judge { lane } => {
            let validators =
                super::stage::validators::pinned_validators(ctx, run.lane(lane).expect("lane"));
            super::stage::judge::judge(ctx, run, lane, &validators, view)?;
            super::stage::judge::run_blocked(ctx, run, lane);
            let l = run.lane(lane).expect("lane");
            let (action, next) = match l.stage {
                Stage::Refute => (Action::Advanced, Then::ToRefuter),
                Stage::Deliver => (Action::Advanced, Then::ValidatorsPass),
                Stage::Blocked => (
                    Action::Blocked,
                    Then::Reason(l.reason.clone().unwrap_or_default()),
                ),
                _ => (Action::Advanced, Then::FixRound { attempt: l.attempt }),
            };
            report(run, lane, action, next)
        }
        Next::FinishRefute { lane } => {
            super::stage::refute::finish_refute(ctx, run, lane, view)?;
            super::stage::judge::run_blocked(ctx, run, lane);
            let l = run.lane(lane).expect("lane");
            let (action, next) = match l.stage {
                Stage::Deliver => (Action::Advanced, Then::AllRefuted),
                Stage::Blocked => (
                    Action::Blocked,
                    Then::Reason(l.reason.clone().unwrap_or_default()),
                ),
                _ => (
                    Action::Advanced,
                    Then::ConfirmedFixRound { attempt: l.attempt },
                ),
            };
            report(run, lane, action, next)
        }
        Next::Finish => {
            let status = super::decide::run_status(run, view, &|i, j| ctx.expected(i, j));
            if status == RunStatus::Blocked {
                // Not an end: `iced run resume` starts the blocked lanes' next attempts.
                run.status = status;
                let lane = focus_lane(run).id.clone();
                emit(
                    &ctx.paths,
                    &run_id,
                    Event::RunBlocked,
                    json!({"lane": lane}),
                );
            } else {
                end_run(ctx, run, status)?;
            }
            Pending::Report(Box::new(ended_report(run)))
        }
        // Done outside the lock; a renewal killed before recording is done again, whole.
        Next::RenewClaims => Pending::RenewClaims,
        Next::Stall { lane, reason } => {
            run.status = super::decide::waiting_for_a_person();
            emit(
                &ctx.paths,
                &run_id,
                Event::RunBlocked,
                json!({"lane": lane, "reason": reason}),
            );
            Pending::Report(Box::new(ended_report(run)))
        }
        Next::Sync { lane, step } => {
            let l = run.lane_mut(lane).expect("lane");
            let record = started(step.clone(), l.attempt, None, None);
            l.steps
                .retain(|r| !(r.step == *step && r.attempt == record.attempt));
            l.steps.push(record);
            Pending::Sync {
                lane: lane.clone(),
                step: step.clone(),
            }
        }
        Next::Plan { lane, next } => match super::stage::plan::under_lock(ctx, run, lane, next)? {
            Ok(pending) => Pending::Plan(pending),
            Err(report) => Pending::Report(Box::new(report)),
        },
        Next::Tester { lane, next } => {
            use super::decide::tester::TesterNext;
            let l = run.lane_mut(lane).expect("lane");
            let (key, nonce) = match next {
                TesterNext::Launch => (StepKey::TestWrite, Some(new_nonce())),
                TesterNext::Check => (StepKey::TestCheck, None),
            };
            let record = started(key.clone(), l.attempt, None, nonce.clone());
            l.steps
                .retain(|r| !(r.step == key && r.attempt == record.attempt));
            l.steps.push(record);
            match nonce {
                Some(nonce) => Pending::TesterLaunch {
                    lane: lane.clone(),
                    nonce,
                },
                None => Pending::TesterCheck { lane: lane.clone() },
            }
        }
        Next::LandAgain { lane } => {
            let l = run.lane_mut(lane).expect("lane");
            l.land_round += 1;
            let round = l.land_round;
            report(run, lane, Action::Advanced, Then::LandAgain { round })
        }
    })
}
