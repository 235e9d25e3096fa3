//! Where a lane goes once a step's result is in, and what a person's resume does to it. `decide`
//! chooses every move; the stages and the stepper only apply it (`records::apply_move`), so a
//! stage never names the stage that follows it (tests/cli/layout.rs checks that no file outside
//! `decide` writes a stage or a run status of its own choosing).

use crate::run::decide::{DecideView, Next, Waiting};
use crate::run::keys::StepKey;
use crate::run::outcome::DeliverOutcome;
use crate::run::settings::LandMode;
use crate::run::state::{EscalationKind, Lane, RunStatus, Stage, StepRecord, StepStatus};

/// Where a lane goes once a step's result is in: `decide` chooses, the stages and the stepper
/// apply it.
#[derive(Debug, Clone, PartialEq)]
pub enum LaneMove {
    To(Stage),
    /// A new attempt starts; its brief names the reason.
    Retry {
        reason: String,
    },
    Block {
        reason: String,
    },
    /// The attempt did not verify and the attempts are spent: blocked, like `Block`, and the
    /// attempt counts as a failed verification (SPEC 12.1).
    Spent {
        reason: String,
    },
    Handback {
        reason: String,
    },
    /// The implementer stopped for a person (SPEC 20.7): blocked, with the escalation's metric
    /// (and, for questions, how many it asked), until the person resolves it.
    Escalate {
        kind: EscalationKind,
        reason: String,
        questions: u32,
    },
}

/// What a receipt found, all its checks and commands in.
#[derive(Debug, Clone, Copy)]
pub struct ReceiptFound<'a> {
    pub verified: bool,
    pub handback: Option<&'a str>,
    pub missing: &'a [String],
    /// The implementer's escalation or questions, as the lane records them.
    pub escalation: Option<&'a crate::run::escalation::Escalation>,
    /// Why the test writer's work is refused (SPEC 20.17), when it is.
    pub tests_refused: Option<&'a str>,
    /// Why the lane's worktree is not the one git made, when it is not (SPEC 24.6).
    pub replaced: Option<&'a str>,
}

/// After the receipt (SPEC 20.4): handed back; verified, to validation (or straight to delivery
/// without independent validators); otherwise a new attempt whose brief lists what was missing, or,
/// with the attempts spent, blocked.
pub fn after_receipt(lane: &Lane, view: &DecideView, found: &ReceiptFound<'_>) -> LaneMove {
    // Nothing more is started in what an agent left at the worktree's path (SPEC 24.6): no new
    // attempt, whatever else the receipt found.
    if let Some(why) = found.replaced {
        return LaneMove::Block {
            reason: format!(
                "the worktree `{}` is not the worktree git made: {why}; nothing more is started in it",
                lane.worktree.as_deref().unwrap_or("")
            ),
        };
    }
    if let Some(reason) = found.handback.or(found.tests_refused) {
        return LaneMove::Handback {
            reason: reason.to_owned(),
        };
    }
    // An escalation is a stop for a person, not a failed attempt: its gaps do not count.
    if let Some(e) = found.escalation {
        if let Some(kind) = EscalationKind::of_agent(&e.kind) {
            return LaneMove::Escalate {
                kind,
                reason: e.reason(),
                questions: u32::try_from(e.questions.len()).unwrap_or(u32::MAX),
            };
        }
    }
    if found.verified {
        return LaneMove::To(if view.independent {
            Stage::Validate
        } else {
            Stage::Deliver
        });
    }
    let gaps = found
        .missing
        .iter()
        .map(|m| format!("- {m}"))
        .collect::<Vec<_>>()
        .join("\n");
    if lane.attempts_spent() >= view.max_attempts {
        LaneMove::Spent {
            reason: format!("{} did not verify:\n{gaps}", attempt_of(lane, view)),
        }
    } else {
        LaneMove::Retry { reason: gaps }
    }
}

/// `attempt 2 of 3`; after a resume, `attempt 5 (2 of 3 since the resume)`; past a budget lowered
/// under the run, `attempt 4 (verify.maxAttempts is 3)`: never "attempt 4 of 3".
fn attempt_of(lane: &Lane, view: &DecideView) -> String {
    let (attempt, spent, max) = (lane.attempt, lane.attempts_spent(), view.max_attempts);
    match (lane.attempts_before, spent <= max) {
        (0, true) => format!("attempt {attempt} of {max}"),
        (0, false) => format!("attempt {attempt} (verify.maxAttempts is {max})"),
        (_, true) => format!("attempt {attempt} ({spent} of {max} since the resume)"),
        (_, false) => {
            format!("attempt {attempt} ({spent} since the resume; verify.maxAttempts is {max})")
        }
    }
}

/// After a round's verdict (SPEC 22.4): findings this round opened go to the refuter first (with
/// `verify.refute` on); otherwise as [`resolve`].
pub fn after_judge(lane: &Lane, view: &DecideView, undecided: &[String]) -> LaneMove {
    // A review has no change to refute or fix: its findings are its delivery (SPEC 20.14).
    if lane.review.is_some() {
        return LaneMove::To(Stage::Deliver);
    }
    let fresh = lane
        .findings
        .iter()
        .any(|f| f.round == lane.attempt && f.status == "open");
    if fresh && view.refute {
        return LaneMove::To(Stage::Refute);
    }
    resolve(lane, view, undecided)
}

/// After judging and refuting (SPEC 22.4): a fix round for open blocking findings (blocked when the
/// attempts are spent), a person for an expectation no validator could decide, or delivery.
pub fn resolve(lane: &Lane, view: &DecideView, undecided: &[String]) -> LaneMove {
    let open: Vec<String> = lane
        .findings
        .iter()
        .filter(|f| f.status == "open")
        .map(|f| {
            format!(
                "- {} ({}): {}",
                f.id, f.evidence.severity, f.evidence.summary
            )
        })
        .collect();
    if !open.is_empty() {
        let listed = open.join("\n");
        return if lane.attempts_spent() >= view.max_attempts {
            LaneMove::Spent {
                reason: format!("open findings after {} attempts:\n{listed}", lane.attempt),
            }
        } else {
            LaneMove::Retry {
                reason: format!("fix round: dispose of every finding below (apply it with a commit, or reject it in writing)\n{listed}"),
            }
        };
    }
    if !undecided.is_empty() {
        return LaneMove::Block {
            reason: format!(
                "needs a person: no validator could judge {}",
                undecided.join(", ")
            ),
        };
    }
    LaneMove::To(Stage::Deliver)
}

/// The brief is written: the lane's worktree next, or, when it has one (a later attempt), the
/// implementer.
pub fn after_brief(lane: &Lane) -> LaneMove {
    LaneMove::To(if lane.worktree.is_some() {
        Stage::Implement
    } else {
        Stage::Worktree
    })
}

/// The worktree step's result: the implementer next, or blocked when git could not make it.
pub fn after_worktree(made: Result<(), &str>) -> LaneMove {
    match made {
        Ok(()) => LaneMove::To(Stage::Implement),
        Err(e) => LaneMove::Block {
            reason: format!("worktree: {e}"),
        },
    }
}

/// The worktree step's result for a lane: a review lane goes straight to its reviewers (no
/// implementer runs, SPEC 20.14); any other as [`after_worktree`].
pub fn after_worktree_of(lane: &Lane, made: Result<(), &str>) -> LaneMove {
    match after_worktree(made) {
        LaneMove::To(Stage::Implement) if lane.review.is_some() => LaneMove::To(Stage::Validate),
        other => other,
    }
}

/// The implementer ended (its activity, or a host's hand-in): the receipt checks what it did.
pub fn after_implementer() -> LaneMove {
    LaneMove::To(Stage::Receipt)
}

/// What the deliver step found.
#[derive(Debug, Clone, Copy)]
pub enum Delivered<'a> {
    /// The close is committed on the judged head.
    Committed,
    /// The lane moved after it was judged: nothing was delivered, and the failed record says so;
    /// the next `decide` starts a new attempt or blocks.
    Moved,
    Failed(&'a str),
}

/// After the deliver step (SPEC 23.1): delivered on the lane branch when nothing lands it
/// (`land.mode: none`), otherwise the landing; blocked when the close could not be made.
pub fn after_deliver(mode: LandMode, delivered: Delivered<'_>) -> Option<LaneMove> {
    match delivered {
        Delivered::Committed if mode == LandMode::None => Some(LaneMove::To(Stage::Delivered)),
        Delivered::Committed => Some(LaneMove::To(Stage::Land)),
        Delivered::Moved => None,
        Delivered::Failed(e) => Some(LaneMove::Block {
            reason: format!("deliver: {e}"),
        }),
    }
}

/// A validator changed the lane branch itself (SPEC 24.6): re-running it on a clean tree would
/// need the lane restored by force, which the loop never does, so a person restores it.
pub fn after_validator_moved_lane(key: &StepKey, moved: &[String]) -> LaneMove {
    LaneMove::Block {
        reason: format!(
            "`{key}` changed the lane itself: {}; restore it and resume",
            moved.join("; ")
        ),
    }
}

/// A landing step that is done (SPEC 23.2): the target moved (or a pull request armed, or opened
/// when a person arms it) leaves retiring; retiring delivers. Any other step keeps the lane
/// landing; a failed one is `decide`'s to read on the next call.
pub fn after_land_step(step: &StepKey, arm_auto: bool) -> Option<LaneMove> {
    match step {
        StepKey::Land(_) | StepKey::PrArm => Some(LaneMove::To(Stage::Retire)),
        StepKey::PrOpen if !arm_auto => Some(LaneMove::To(Stage::Retire)),
        StepKey::Retire => Some(LaneMove::To(Stage::Delivered)),
        _ => None,
    }
}

/// A lane blocked, or no lane can move: the run waits for a person (SPEC 23.6), until `settle`
/// finds that its other lanes can move, or that none ever will.
pub fn waiting_for_a_person() -> RunStatus {
    RunStatus::Blocked
}

/// What `iced run resume` does to a blocked lane (SPEC 23.3).
#[derive(Debug, Clone, PartialEq)]
pub enum OnResume {
    /// Its close is committed: it lands again, in a new round that takes what the person did on
    /// its branch.
    LandAgain,
    /// Its pull request is armed: the loop never pushes to it again, so a resume is refused.
    PullRequestArmed,
    /// Its delivery failed for the loop's own reasons (git failed, a lock's git still ran), not
    /// the guard's: delivered again in the same attempt, a close commit it prepared adopted. Its
    /// work was verified, and its branch may hold that close already.
    DeliverAgain,
    /// A fresh attempt with a fresh budget.
    NewAttempt,
}

impl OnResume {
    /// Where a lane that lands again goes: back to the landing, whose new round takes the branch
    /// as the person left it.
    pub fn landing_again() -> LaneMove {
        LaneMove::To(Stage::Land)
    }
}

pub fn on_resume(lane: &Lane) -> OnResume {
    if !lane.is_done(&StepKey::Deliver) {
        // Failed for the loop's own reasons: not moved under it, not refused by the guard.
        let loops_own = lane
            .record(&StepKey::Deliver)
            .filter(|r| r.status == StepStatus::Failed)
            .and_then(|r| r.outcome_as::<DeliverOutcome>())
            .is_some_and(|o| o.error.is_some() && o.moved.is_none() && !o.denied);
        if loops_own {
            OnResume::DeliverAgain
        } else {
            OnResume::NewAttempt
        }
    } else if lane.is_done(&StepKey::PrArm) {
        OnResume::PullRequestArmed
    } else {
        OnResume::LandAgain
    }
}

/// An agent's record failed because the provider asked to slow down: not the agent's fault.
pub fn rate_limited(record: &StepRecord) -> bool {
    // The implementer's record and a validator's say it the same way.
    record
        .outcome_as::<crate::run::outcome::ActivityOutcome>()
        .is_some_and(|o| o.rate_limited)
}

/// A step that failed only because the remote could not be reached (SPEC 20.19).
pub fn remote_unreachable(record: &StepRecord) -> bool {
    record
        .outcome_as::<crate::run::outcome::ActivityOutcome>()
        .is_some_and(|o| o.unreachable)
}

/// A step that failed through no fault of its lane, and runs again once the run's backoff has
/// passed (SPEC 20.10): rate limited, or its remote could not be reached.
pub fn backs_off(record: &StepRecord) -> bool {
    rate_limited(record) || remote_unreachable(record)
}

/// Why an implementer step could not publish its remote lane branch (SPEC 20.19), as the lane's
/// reason.
pub fn remote_failed(record: &StepRecord) -> Option<String> {
    let why = record
        .outcome_as::<crate::run::outcome::ActivityOutcome>()?
        .remote?;
    Some(format!("remote: {why}"))
}

/// Why no new agent may start now (SPEC 20.9, 20.10, 24.8): the run is paced until a time, or the
/// agents alive in the repository are at `pace.agents`. Either driver; a paused run never gets
/// this far.
pub(super) fn launch_waits(view: &DecideView) -> Option<Waiting> {
    if let Some(until) = &view.paced_until {
        Some(Waiting::Paced {
            until: until.clone(),
        })
    } else if view.agents_alive >= view.pace_agents {
        Some(Waiting::Ceiling {
            alive: view.agents_alive,
        })
    } else {
        None
    }
}

/// A synchronous landing step: what it needs next, or None when it is done.
pub(super) fn sync_step(lane: &Lane, view: &DecideView, step: StepKey) -> Option<Next> {
    let id = lane.id.clone();
    match lane.record(&step) {
        None => Some(Next::Sync {
            lane: id,
            step: step.clone(),
        }),
        Some(r) if super::in_hand(r) => Some(Next::Wait {
            lane: id,
            why: Waiting::DoingStep { step: step.clone() },
        }),
        Some(r) if r.status == StepStatus::Started => Some(Next::Sync {
            lane: id,
            step: step.clone(),
        }),
        Some(r) if r.status == StepStatus::Failed => {
            let o = r
                .outcome_as::<crate::run::outcome::LandOutcome>()
                .unwrap_or_default();
            if let (true, Some(_), Some(until)) = (o.again, &o.unreachable, &view.paced_until) {
                // `land.remote` could not be reached (SPEC 20.19): once the backoff has passed.
                return Some(Next::Wait {
                    lane: id,
                    why: Waiting::Unreachable {
                        step,
                        until: until.clone(),
                    },
                });
            }
            if o.again {
                // Not a failure of the work: the world is not there yet (a target moved, a pull
                // request waits to be merged). The step is tried again, by this round or the next.
                if o.new_round {
                    Some(Next::LandAgain { lane: id })
                } else {
                    Some(Next::Sync {
                        lane: id,
                        step: step.clone(),
                    })
                }
            } else {
                Some(Next::Block {
                    lane: id,
                    reason: o.error.unwrap_or_else(|| "landing failed".to_owned()),
                })
            }
        }
        Some(_) => None,
    }
}

/// A person's resume of a lane whose delivery failed for the loop's own reasons
/// ([`OnResume::DeliverAgain`]): the failed record becomes that of a call that died in the
/// delivery (started, its owner gone, a commit it prepared kept), so the next step delivers again,
/// that same commit when one was prepared, adopting the branch where it already moved. Returns
/// the failed record, for the history; None (nothing changed) when the lane is not such a lane.
pub fn deliver_again(lane: &mut Lane) -> Option<StepRecord> {
    if on_resume(lane) != OnResume::DeliverAgain {
        return None;
    }
    let record = lane.record_mut(&StepKey::Deliver)?;
    let failed = record.clone();
    let prepared = failed.outcome_as::<DeliverOutcome>()?.prepared;
    record.status = StepStatus::Started;
    record.ended_at = None;
    record.pid = None;
    record.pid_start = None;
    record.outcome = prepared.map(|p| serde_json::json!({ "prepared": p }));
    lane.stage = Stage::Deliver;
    lane.released = false;
    lane.crashes = 0;
    Some(failed)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{lane, record, run, view};
    use super::*;
    use crate::run::decide::decide_with;
    use crate::run::state::Driver;
    use serde_json::{json, Value};

    /// A lane blocked by its delivery, whose record says `outcome`.
    fn blocked_delivering(outcome: Value) -> Lane {
        let mut failed = record("deliver", outcome);
        failed.status = StepStatus::Failed;
        failed.ended_at = Some("2026-09-30T11:00:01Z".into());
        failed.pid = Some(4242);
        lane("a", Stage::Blocked, vec![failed])
    }

    /// SPEC 23.3 "Resuming a delivery": each failed delivery, what a resume does with it, and
    /// what `decide` does next.
    #[test]
    fn a_delivery_that_failed_for_the_loop_s_reasons_is_delivered_again_on_resume() {
        let rows = [
            (
                json!({"error": "git failed", "prepared": "c1"}),
                OnResume::DeliverAgain,
                Some(json!({"prepared": "c1"})),
            ),
            (json!({"error": "git failed"}), OnResume::DeliverAgain, None),
            (
                json!({"error": "the guard refused", "denied": true}),
                OnResume::NewAttempt,
                None,
            ),
            (
                json!({"moved": {"judged": "a1", "head": "b2", "commits": []}}),
                OnResume::NewAttempt,
                None,
            ),
        ];
        for (outcome, resume, kept) in rows {
            let mut l = blocked_delivering(outcome.clone());
            assert_eq!(on_resume(&l), resume, "{outcome}");
            let failed = deliver_again(&mut l);
            if resume != OnResume::DeliverAgain {
                assert_eq!(failed, None, "{outcome}");
                assert_eq!(l.stage, Stage::Blocked);
                continue;
            }
            assert_eq!(
                failed.as_ref().and_then(|r| r.outcome.clone()),
                Some(outcome.clone())
            );
            assert_eq!(l.stage, Stage::Deliver);
            assert_eq!(l.attempt, 1, "the same attempt");
            let r = l.record(&StepKey::Deliver).expect("kept");
            assert_eq!(
                (r.status, r.pid, r.outcome.clone()),
                (StepStatus::Started, None, kept),
                "{outcome}"
            );
            // Nobody holds it: `decide` delivers again.
            let run = run(Driver::Process, vec![l]);
            let next = decide_with(&run, &view(Driver::Process), &|_, _| vec![0]);
            assert!(
                matches!(&next, Next::Deliver { lane } if lane == "a"),
                "{next:?}"
            );
        }
    }
}
