//! The judge step (SPEC 22.4): every validator of the round answered (or could not); their answers
//! merged, findings minted by the loop, and the lane sent on to refutation, a fix round, a person,
//! or delivery.

use crate::refusal::Refusal;
use crate::run::ctx::Ctx;
use crate::run::events::{emit, Event};
use crate::run::keys::StepKey;
use crate::run::outcome::{JudgeOutcome, ReceiptOutcome};
use crate::run::records::{apply_move, finish, started};
use crate::run::state::{Lane, Run, Stage, StepStatus};
use crate::run::validate::{self, Finding};
use serde_json::json;

/// Every validator of the round answered (or could not): merge what they said, mint the findings,
/// and go on to refutation, a fix round, a person, or delivery.
pub fn judge(
    ctx: &Ctx<'_>,
    run: &mut Run,
    lane_id: &str,
    validators: &[String],
    view: &crate::run::decide::DecideView,
) -> Result<(), Refusal> {
    let run_id = run.id.clone();
    let lane = run.lane_mut(lane_id).expect("lane");
    let attempt = lane.attempt;
    let keys: Vec<StepKey> = validators
        .iter()
        .map(|v| StepKey::Validate(v.clone()))
        .collect();
    let text = crate::repo::read_text(&ctx.repo.unit_paths(&lane.unit).iced)
        .map_err(|e| e.refusal(ctx.verb))?;
    let unit = crate::unit::parse_unit(&text);
    let answers = crate::run::answer::answers(lane, &keys);
    let merged = validate::merge(&unit, &answers);
    // The verdict is about the head the receipt recorded, which every sandbox checked out.
    let judged = lane
        .outcome_as::<ReceiptOutcome>(&StepKey::Receipt)
        .unwrap_or_default();
    // A review judges no change of the lane: its findings are about the range's end, and the
    // head delivered on is the lane's own, as its worktree holds it (SPEC 20.14).
    let judged = match &lane.review {
        Some(_) => ReceiptOutcome {
            head: lane_head(lane, "HEAD"),
            tree: lane_head(lane, "HEAD^{tree}"),
            ..judged
        },
        None => judged,
    };
    let head = lane
        .review
        .as_ref()
        .map(|t| t.to.clone())
        .or_else(|| judged.head.clone());
    let mut minted = Vec::new();
    let mut mint = |lane: &mut Lane, by: String, evidence: validate::Evidence| {
        let n = lane.findings.len() + 1;
        let finding = Finding {
            id: format!("{}-F{n}", lane.id),
            by,
            head: head.clone(),
            round: attempt,
            status: if matches!(evidence.severity.as_str(), "S1-stop-the-line" | "S2-major") {
                "open".into()
            } else {
                "noted".into()
            },
            evidence,
            refutation: None,
            disposition: None,
        };
        minted.push(finding.id.clone());
        lane.findings.push(finding);
    };
    for (name, answer) in &answers {
        for f in answer.iter().flat_map(|a| a.findings.iter()) {
            mint(lane, name.clone(), f.clone());
        }
    }
    for (by, evidence) in validate::contract_findings(&unit, &merged, &answers) {
        mint(lane, by, evidence);
    }
    let manual = validate::manual_expectations(&unit);
    let undecided: Vec<String> = merged
        .expectations
        .iter()
        .filter(|(id, r)| r.as_str() == "unknown" && !manual.contains(id))
        .map(|(id, _)| id.clone())
        .collect();
    let mut record = started(StepKey::Judge, attempt, None, None);
    record.pid = None;
    record.pid_start = None;
    let needs_human = merged.needs_human || !manual.is_empty();
    finish(
        &mut record,
        StepStatus::Done,
        json!({"merged": merged, "minted": minted, "undecided": undecided, "manual": manual, "needs_human": needs_human, "head": judged.head, "tree": judged.tree}),
    );
    lane.steps
        .retain(|r| !(r.step == StepKey::Judge && r.attempt == attempt));
    lane.steps.push(record);
    emit(
        &ctx.paths,
        &run_id,
        Event::StepDone,
        json!({"lane": lane_id, "step": "judge", "attempt": attempt, "outcome": {"minted": minted, "undecided": undecided, "needs_human": needs_human}}),
    );
    let mv = crate::run::decide::after_judge(lane, view, &undecided);
    apply_move(ctx, &run_id, lane, mv)
}

/// `git rev-parse <rev>` in the lane's worktree.
fn lane_head(lane: &Lane, rev: &str) -> Option<String> {
    let worktree = lane.worktree.as_deref()?;
    crate::git::run(
        std::path::Path::new(worktree),
        &["rev-parse", "--verify", rev],
    )
    .ok()
}

/// What no validator of the round could decide (SPEC 22.4), as the judge step recorded it.
pub fn undecided(lane: &Lane) -> Vec<String> {
    lane.outcome_as::<JudgeOutcome>(&StepKey::Judge)
        .map(|o| o.undecided)
        .unwrap_or_default()
}

/// A lane that judging or refuting blocked blocks its run, and the run says why (SPEC 21.5).
pub fn run_blocked(ctx: &Ctx<'_>, run: &mut Run, lane_id: &str) {
    let Some(lane) = run.lane(lane_id).filter(|l| l.stage == Stage::Blocked) else {
        return;
    };
    let reason = lane.reason.clone();
    run.status = crate::run::decide::waiting_for_a_person();
    emit(
        &ctx.paths,
        &run.id,
        Event::RunBlocked,
        json!({"lane": lane_id, "reason": reason}),
    );
}
