//! The test writer's moves (SPEC 20.17): once a receipt's own checks passed, its test writer is
//! started (once: a test writer whose supervisor registered is never started again), then the loop
//! checks what it changed; a refused or asking test writer ends the receipt at once, a clean one
//! lets the definition of done run on its head.
//!
//! Paths here are `crate::` paths: this file is `decide::tester`, kept beside `decide.rs`.

use crate::run::decide::{DecideView, Next, Waiting};
use crate::run::keys::StepKey;
use crate::run::outcome::TestCheckOutcome;
use crate::run::state::{Lane, StepStatus};

#[derive(Debug, Clone, PartialEq)]
pub enum TesterNext {
    /// Start the attempt's test writer (its `test-write` record made or replaced).
    Launch,
    /// Check what it changed (`test-check`).
    Check,
}

/// What the test writer of a lane whose receipt's own checks passed needs next; None once its
/// work is checked and passed, and the definition of done comes next.
pub fn lane_next(lane: &Lane, view: &DecideView) -> Option<Next> {
    let id = lane.id.clone();
    let tester = |next| Next::Tester {
        lane: lane.id.clone(),
        next,
    };
    match lane.record(&StepKey::TestWrite) {
        None => {
            // A new agent keeps the budget and the pace (SPEC 20.9, 20.10, 20.12).
            if let Some(over) = super::over_budget(lane, view) {
                return Some(over);
            }
            if let Some(why) = super::launch_waits(view) {
                return Some(Next::Wait { lane: id, why });
            }
            return Some(tester(TesterNext::Launch));
        }
        Some(r) if r.status == StepStatus::Started => {
            return Some(Next::Wait {
                lane: id,
                why: Waiting::TestWriterRunning,
            })
        }
        Some(r) if r.status == StepStatus::Failed && super::rate_limited(r) => {
            return Some(Next::Requeue {
                lane: id,
                key: StepKey::TestWrite,
            })
        }
        Some(r) if r.status == StepStatus::Failed => {
            // Its harness said it failed: nothing of it is taken.
            if let Some(why) = r
                .outcome
                .as_ref()
                .and_then(|o| o.get("harness_failed"))
                .and_then(serde_json::Value::as_str)
            {
                return Some(Next::Block {
                    lane: id,
                    reason: format!(
                        "the test writer of attempt {} failed: {why}; it is not run again",
                        lane.attempt
                    ),
                });
            }
            // A supervisor that never registered never ran its agent: it may be started.
            let registered = r
                .outcome
                .as_ref()
                .and_then(|o| o.get("registered"))
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(true);
            return Some(if registered {
                Next::Block {
                    lane: id,
                    reason: format!(
                        "the test writer of attempt {} ended without an outcome; it is not run again",
                        lane.attempt
                    ),
                }
            } else if let Some(why) = super::launch_waits(view) {
                Next::Wait { lane: id, why }
            } else {
                tester(TesterNext::Launch)
            });
        }
        Some(_) => {}
    }
    match lane.record(&StepKey::TestCheck) {
        None => Some(tester(TesterNext::Check)),
        Some(r) if super::in_hand(r) => Some(Next::Wait {
            lane: id,
            why: Waiting::DoingStep {
                step: StepKey::TestCheck,
            },
        }),
        Some(r) if r.status == StepStatus::Started => Some(tester(TesterNext::Check)),
        Some(r) => {
            let o = r.outcome_as::<TestCheckOutcome>().unwrap_or_default();
            (refused(&o).is_some() || o.escalation.is_some())
                .then_some(Next::FinishReceipt { lane: id })
        }
    }
}

/// Why the test writer's work is refused, when it is (SPEC 20.17): each path the guard denied,
/// a dirty worktree, a malformed report; with the commits for the person to read.
pub fn refused(o: &TestCheckOutcome) -> Option<String> {
    let mut why: Vec<String> = o
        .denied
        .iter()
        .map(|d| {
            // The guard's reason without its next step, which is the agent's, not the person's.
            let why = d.reason.split(" Next step:").next().unwrap_or("");
            format!("`{}` ({}): {}", d.path, d.rule, why.trim_end_matches('.'))
        })
        .collect();
    if o.dirty {
        why.push("it left uncommitted or untracked changes in the worktree".into());
    }
    if let Some(p) = &o.problem {
        why.push(p.clone());
    }
    if why.is_empty() {
        return None;
    }
    let short = |s: &Option<String>| {
        let s = s.as_deref().unwrap_or("?");
        s[..s.len().min(12)].to_owned()
    };
    Some(format!(
        "the test writer's work is refused: {}; its commits {}..{} stay on the lane branch for you to read, and nothing of them is validated or lands",
        why.join("; "),
        short(&o.from),
        short(&o.head)
    ))
}
