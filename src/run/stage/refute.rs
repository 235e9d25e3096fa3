//! The refute step (SPEC 22.4): the refuter's answer closes what it refuted and sharpens what it
//! confirmed; what it left alone stays open.

use crate::refusal::Refusal;
use crate::run::ctx::Ctx;
use crate::run::events::{emit, Event};
use crate::run::keys::StepKey;
use crate::run::state::Run;
use crate::run::validate::{self};
use serde_json::json;

/// The refuter answered: refuted findings close; confirmed (or unanswered) ones stay open.
pub fn finish_refute(
    ctx: &Ctx<'_>,
    run: &mut Run,
    lane_id: &str,
    view: &crate::run::decide::DecideView,
) -> Result<(), Refusal> {
    let run_id = run.id.clone();
    let lane = run.lane_mut(lane_id).expect("lane");
    let attempt = lane.attempt;
    let answer = crate::run::kept::load_from::<validate::RefuteAnswer>(
        lane.record(&StepKey::Refute)
            .and_then(|r| r.outcome.as_ref()),
        "answer",
    );
    for f in lane
        .findings
        .iter_mut()
        .filter(|f| f.round == attempt && f.status == "open")
    {
        let said = answer
            .as_ref()
            .and_then(|a| a.findings.iter().find(|r| r.finding_id == f.id));
        match said {
            Some(r) if r.decision == "refuted" => {
                f.status = "refuted".into();
                f.refutation = Some(serde_json::to_value(r).expect("serialises"));
            }
            Some(r) => {
                f.refutation = Some(serde_json::to_value(r).expect("serialises"));
                if let Some(s) = &r.failure_scenario {
                    f.evidence.failure_scenario = s.clone();
                }
            }
            // Not refuted is not refuted: a finding the refuter left alone still bounces.
            None => {}
        }
    }
    emit(
        &ctx.paths,
        &run_id,
        Event::StepDone,
        json!({"lane": lane_id, "step": "refute", "attempt": attempt, "outcome": {"findings": lane.findings.iter().filter(|f| f.round == attempt).map(validate::finding_json).collect::<Vec<_>>()}}),
    );
    let undecided = crate::run::stage::judge::undecided(lane);
    let mv = crate::run::decide::resolve(lane, view, &undecided);
    crate::run::records::apply_move(ctx, &run_id, lane, mv)
}
