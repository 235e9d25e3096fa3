//! Planning's next move (SPEC 20.16): which planner or reviewers start, whose output the loop
//! checks, when the loop decides, and where the lane goes after. A pure function of the plan
//! lane's records, like the rest of `decide`.
//!
//! Paths here are `crate::` paths: this file is `decide::plan`, kept beside `decide.rs`.

use crate::run::decide::moves::LaneMove;
use crate::run::keys::StepKey;
use crate::run::state::Stage;
use crate::run::state::{Lane, StepRecord, StepStatus};
use serde_json::Value;

/// The two reviewers of every round: design and feasibility; record discipline and goal coverage.
pub const LENSES: [&str; 2] = ["design", "record"];

/// What planning does next.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanNext {
    /// Start these agents: the planner of a round, or the reviewers of one not yet started.
    Launch(Vec<StepKey>),
    /// The agents of round `round` are working (or another call is deciding): nothing to do.
    Wait { round: u32 },
    /// An agent's outcome is in: the loop checks what it wrote (the draft, the answer).
    Check(StepKey),
    /// The loop's decision: the record, the approval when the grounds hold, the commit.
    Decide,
    /// Planning is over: the lane moves.
    Move(LaneMove),
}

/// The reviewers of round `round`.
pub fn reviewers(round: u32) -> Vec<StepKey> {
    LENSES
        .iter()
        .map(|l| StepKey::PlanReview {
            lens: (*l).to_owned(),
            round,
        })
        .collect()
}

/// The round planning is in: the highest planner's round on record (0 before the first).
pub fn round_of(lane: &Lane) -> u32 {
    lane.steps
        .iter()
        .filter_map(|r| match r.step {
            StepKey::Plan(n) => Some(n),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// Before `key` launches: a planner of round `r` revises what round `r - 1`'s reviewers found,
/// so those findings are no longer open.
pub fn revise_for(lane: &mut Lane, key: &StepKey) {
    let StepKey::Plan(round) = key else {
        return;
    };
    for f in lane
        .findings
        .iter_mut()
        .filter(|f| f.round + 1 == *round && f.status == "open")
    {
        f.status = "revised".into();
    }
}

/// The loop checked what the agent of this record wrote (`checked` in its outcome).
pub fn checked(record: &StepRecord) -> bool {
    record
        .outcome
        .as_ref()
        .is_some_and(|o| o["checked"] == true)
}

/// A failed agent record whose supervisor never registered: the agent never ran, and may start.
fn never_ran(record: &StepRecord) -> bool {
    record.status == StepStatus::Failed
        && record
            .outcome
            .as_ref()
            .is_some_and(|o| o["crashed"] == true && o["registered"] == false)
}

/// The next planning move of `lane` (at stage `plan`), with `rounds` rounds at most.
pub fn next(lane: &Lane, rounds: u32) -> PlanNext {
    let round = round_of(lane);
    if round == 0 {
        return PlanNext::Launch(vec![StepKey::Plan(1)]);
    }
    let planner = lane
        .record(&StepKey::Plan(round))
        .expect("the round's planner");
    match planner.status {
        StepStatus::Started => return PlanNext::Wait { round },
        StepStatus::Failed if never_ran(planner) => {
            return PlanNext::Launch(vec![StepKey::Plan(round)])
        }
        StepStatus::Failed => {
            return PlanNext::Move(LaneMove::Handback {
                reason: format!(
                    "the planner of round {round} ended without an outcome; it is not run again (`iced build --auto-plan {}` plans anew)",
                    lane.unit
                ),
            })
        }
        StepStatus::Done if !checked(planner) => return PlanNext::Check(StepKey::Plan(round)),
        StepStatus::Done => {}
    }
    if let Some(why) = planner.outcome.as_ref().and_then(|o| o["refused"].as_str()) {
        return PlanNext::Move(LaneMove::Handback {
            reason: format!(
                "plan-draft-refused: {why}; the unit is as it was: `iced build --auto-plan {0}` plans anew, or write it yourself and `iced approve {0}`",
                lane.unit
            ),
        });
    }
    let keys = reviewers(round);
    let launch: Vec<StepKey> = keys
        .iter()
        .filter(|k| lane.record(k).is_none_or(never_ran))
        .cloned()
        .collect();
    if !launch.is_empty() {
        return PlanNext::Launch(launch);
    }
    if let Some(key) = keys.iter().find(|k| {
        lane.record(k)
            .is_some_and(|r| r.status == StepStatus::Done && !checked(r))
    }) {
        return PlanNext::Check(key.clone());
    }
    if keys.iter().any(|k| {
        lane.record(k)
            .is_some_and(|r| r.status == StepStatus::Started)
    }) {
        return PlanNext::Wait { round };
    }
    let open = lane
        .findings
        .iter()
        .any(|f| f.round == round && f.status == "open");
    if open && round < rounds {
        return PlanNext::Launch(vec![StepKey::Plan(round + 1)]);
    }
    match lane.record(&StepKey::PlanDecide) {
        None => PlanNext::Decide,
        Some(r) if r.status == StepStatus::Started && r.pid.is_some() => PlanNext::Wait { round },
        Some(r) if r.status == StepStatus::Done => PlanNext::Move(after_decide(r.outcome.as_ref())),
        Some(_) => PlanNext::Decide,
    }
}

/// The move of a lane at stage `plan`, as `decide` gives it: a wait, or a planning move whose
/// launches keep the pace and the ceiling as every agent does (SPEC 20.9).
pub fn lane_next(lane: &Lane, view: &crate::run::decide::DecideView) -> crate::run::decide::Next {
    use crate::run::decide::{Next, Waiting};
    let id = lane.id.clone();
    match next(lane, view.plan_rounds) {
        PlanNext::Wait { round } => Next::Wait {
            lane: id,
            why: Waiting::Planning { round },
        },
        PlanNext::Launch(keys) => match super::launch_waits(view) {
            Some(why) => Next::Wait { lane: id, why },
            None => {
                let room = view.pace_agents.saturating_sub(view.agents_alive).max(1);
                Next::Plan {
                    lane: id,
                    next: PlanNext::Launch(keys.into_iter().take(room).collect()),
                }
            }
        },
        next => Next::Plan { lane: id, next },
    }
}

/// Where the lane goes once the loop decided: approved, on to its brief in the same run;
/// otherwise handed back, awaiting a person's approval.
pub fn after_decide(outcome: Option<&Value>) -> LaneMove {
    let outcome = outcome.cloned().unwrap_or_default();
    if outcome["approved"] == true {
        return LaneMove::To(Stage::Brief);
    }
    LaneMove::Handback {
        reason: outcome["reason"]
            .as_str()
            .unwrap_or("awaits approval")
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A plan lane holding `steps` (each `(key, status, outcome)`) and `findings`.
    fn lane(steps: &[(&str, &str, Value)], findings: Value) -> Lane {
        let steps: Vec<Value> = steps
            .iter()
            .map(|(key, status, outcome)| {
                json!({"step": key, "attempt": 1, "status": status, "started_at": "t", "ended_at": null,
                       "inputs": null, "nonce": "n", "pid": null, "pid_start": null, "outcome": outcome})
            })
            .collect();
        serde_json::from_value(
            json!({"id": "u", "unit": "u", "stage": "plan", "attempt": 1,
            "crashes": 0, "worktree": null, "branch": null, "reason": null, "steps": steps,
            "findings": findings}),
        )
        .expect("a lane")
    }

    fn checked() -> Value {
        json!({"exit_code": 0, "checked": true})
    }

    #[test]
    fn planning_moves_row_by_row() {
        let review = |lens: &str, round: u32| StepKey::PlanReview {
            lens: lens.into(),
            round,
        };
        assert_eq!(
            next(&lane(&[], json!([])), 2),
            PlanNext::Launch(vec![StepKey::Plan(1)])
        );
        // A planner that never registered starts again; one that ran and vanished never does.
        let never = json!({"crashed": true, "registered": false});
        assert_eq!(
            next(&lane(&[("plan-1", "failed", never)], json!([])), 2),
            PlanNext::Launch(vec![StepKey::Plan(1)])
        );
        let ran = json!({"crashed": true, "registered": true});
        assert!(matches!(
            next(&lane(&[("plan-1", "failed", ran)], json!([])), 2),
            PlanNext::Move(LaneMove::Handback { .. })
        ));
        // Its outcome is in: checked first, then its reviewers start, or a refusal hands back.
        assert_eq!(
            next(
                &lane(&[("plan-1", "done", json!({"exit_code": 0}))], json!([])),
                2
            ),
            PlanNext::Check(StepKey::Plan(1))
        );
        assert_eq!(
            next(&lane(&[("plan-1", "done", checked())], json!([])), 2),
            PlanNext::Launch(vec![review("design", 1), review("record", 1)])
        );
        let refused = json!({"exit_code": 0, "checked": true, "refused": "no"});
        assert_eq!(
            next(&lane(&[("plan-1", "done", refused)], json!([])), 2),
            PlanNext::Move(LaneMove::Handback {
                reason: "plan-draft-refused: no; the unit is as it was: `iced build --auto-plan u` plans anew, or write it yourself and `iced approve u`".into()
            })
        );
        // Both reviews in: an open finding starts round 2, unless the rounds are spent.
        let reviewed = [
            ("plan-1", "done", checked()),
            ("planreview-design-1", "done", checked()),
            ("planreview-record-1", "done", checked()),
        ];
        let open = json!([{"id": "u-P1", "by": "record", "round": 1, "status": "open",
            "evidence": {"file_path": "f", "criterion_ref": "G2", "finding_category": "test-coverage",
            "severity": "S2-major", "summary": "s", "failure_scenario": {"inputs": "i", "expected": "e", "actual": "a"}}}]);
        assert_eq!(
            next(&lane(&reviewed, open.clone()), 2),
            PlanNext::Launch(vec![StepKey::Plan(2)])
        );
        assert_eq!(next(&lane(&reviewed, open), 1), PlanNext::Decide);
        assert_eq!(next(&lane(&reviewed, json!([])), 2), PlanNext::Decide);
        // The decision made: approved goes on to the brief, otherwise handed back.
        let mut decided = reviewed.to_vec();
        decided.push(("plan-decide", "done", json!({"approved": true})));
        assert_eq!(
            next(&lane(&decided, json!([])), 2),
            PlanNext::Move(LaneMove::To(Stage::Brief))
        );
    }
}
