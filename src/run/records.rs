//! The bookkeeping of a run's steps beyond one record: a new attempt (the old one's records to
//! the run's history), the end of a run (claims released, its record written), recording the
//! outcome of a step done outside the lock only if it is still current, and the run a verb may
//! steer.

use super::events::{emit, Event};
use super::state::{
    ensure_dir, EscalationKind, Lane, LaneMetric, Run, RunStatus, Stage, State, StepRecord,
    StepStatus,
};
use crate::refusal::Refusal;
use crate::run::ctx::*;
use crate::run::keys::StepKey;
use crate::run::reply::Action;
use crate::run::reply::*;
pub(crate) use crate::run::step_record::{finish, me, new_nonce, owner_alive, started};
use serde_json::json;

/// Start a new attempt of a lane: the current attempt's records move to the run's history.
pub(crate) fn new_attempt(
    ctx: &Ctx<'_>,
    run_id: &str,
    lane: &mut Lane,
    reason: String,
    crashed: bool,
) -> Result<(), Refusal> {
    let attempt = lane.attempt;
    let (mut old, keep): (Vec<StepRecord>, Vec<StepRecord>) = lane.steps.drain(..).partition(|r| {
        r.attempt == attempt && r.step != StepKey::Worktree && r.step != StepKey::Base
    });
    lane.steps = keep;
    super::host::end_with_attempt(ctx, run_id, &lane.id, &mut old);
    archive(ctx, run_id, &lane.id, &old)?;
    lane.attempt += 1;
    if crashed {
        lane.crashes += 1;
    }
    lane.reason = Some(reason);
    lane.stage = Stage::Brief;
    Ok(())
}

pub(crate) fn archive(
    ctx: &Ctx<'_>,
    run_id: &str,
    lane: &str,
    records: &[StepRecord],
) -> Result<(), Refusal> {
    if records.is_empty() {
        return Ok(());
    }
    ensure_dir(&ctx.paths.run_dir(run_id), ctx.verb)?;
    // Appended within a transaction, before the state is saved: a call killed in between leaves
    // these lines, and the next call archives the same records again. A record already there
    // (byte for byte: its nonce, owner and times make it unique) is not appended twice.
    let lines = records.iter().map(|r| {
        let mut v = serde_json::to_value(r).expect("a record serialises");
        v["lane"] = lane.into();
        v.to_string()
    });
    let path = ctx.paths.history(run_id);
    if append_new_lines(&path, super::record::HISTORY_LIMIT, lines, 0o600)
        .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?
    {
        crate::failpoint::hit("archive-after-append");
    }
    Ok(())
}

/// Append to a log each of `lines` it does not hold yet, byte for byte: what a replay of a call
/// killed between its append and its state write uses to write each line once. True when it
/// appended anything.
fn append_new_lines(
    path: &std::path::Path,
    limit: u64,
    lines: impl Iterator<Item = String>,
    new_mode: u32,
) -> Result<bool, crate::store::StoreError> {
    let kept = match crate::store::read_no_follow(path, limit) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.is_not_found() => String::new(),
        Err(e) => return Err(e),
    };
    let held: std::collections::HashSet<&str> = kept.lines().collect();
    let new: Vec<String> = lines.filter(|l| !held.contains(l.as_str())).collect();
    if new.is_empty() {
        return Ok(false);
    }
    // A last line someone left without its newline is not joined to ours.
    let mut text = String::new();
    if !kept.is_empty() && !kept.ends_with('\n') {
        text.push('\n');
    }
    for line in new {
        text.push_str(&line);
        text.push('\n');
    }
    crate::store::append(path, text.as_bytes(), new_mode)?;
    Ok(true)
}

pub(crate) fn end_run(ctx: &Ctx<'_>, run: &mut Run, status: RunStatus) -> Result<(), Refusal> {
    run.status = status;
    super::host::end_stranded(ctx, run);
    write_undelivered_metrics(ctx, run)?;
    release_claims_after_save(ctx, run);
    emit(
        &ctx.paths,
        &run.id,
        Event::RunEnd,
        json!({"status": status.as_str()}),
    );
    super::record::write(ctx, run);
    Ok(())
}

/// The claims of an ended run, released once the transaction that ended it is saved (SPEC 20.3).
/// A step of a run that has ended asks again: a call killed between saving the end and releasing
/// left them (they block nobody, but are not left behind either).
pub(crate) fn release_claims_after_save(ctx: &Ctx<'_>, run: &Run) {
    ctx.release_after_save(&run.id, &run.unit);
    for lane in run.lanes.iter().filter(|l| l.unit != run.unit) {
        ctx.release_after_save(&run.id, &lane.unit);
    }
}

/// The metrics of each lane that ends without a delivery commit to carry them (SPEC 12.1), appended
/// to the checkout's `.iced/metrics.jsonl`. Within the run's last transaction, before the state is
/// saved: a line already in the file is not appended again, so a replay writes each once.
fn write_undelivered_metrics(ctx: &Ctx<'_>, run: &Run) -> Result<(), Refusal> {
    // A discarded lane's metrics are in its `lane.json` once it left the state (SPEC 21.2).
    let run = &super::ended::whole(&ctx.paths, run);
    let undelivered = run.lanes.iter().filter(|l| {
        !l.metrics.is_empty() && !matches!(l.stage, Stage::Land | Stage::Retire | Stage::Delivered)
    });
    let mut lines = Vec::new();
    for lane in undelivered {
        let tags = ctx
            .repo
            .read_unit(&lane.unit, ctx.verb)
            .map(|u| crate::record::metric_tags(&u))
            .unwrap_or_default();
        lines.extend(lane.metrics.iter().map(|m| m.line(&lane.unit, &tags)));
    }
    let path = crate::metrics::path(&ctx.repo.root);
    if append_new_lines(&path, crate::metrics::READ_LIMIT, lines.into_iter(), 0o644)
        .map_err(|e| crate::repo::store_refusal(ctx.verb, e))?
    {
        crate::failpoint::hit("end-after-metrics");
    }
    Ok(())
}

/// Re-take the lock and record the outcome of a step done outside it, if its record is still the
/// one we started (same attempt, still `started`, owned by us). Otherwise the work is superseded.
pub(crate) fn record_after(
    ctx: &Ctx<'_>,
    run_id: &str,
    lane_id: &str,
    step: &StepKey,
    f: impl FnOnce(&mut Lane, &mut StepRecord) -> Result<(Action, crate::run::then::Then), Refusal>,
) -> Result<StepReport, Refusal> {
    record_after_in_run(ctx, run_id, lane_id, step, |run, record| {
        f(run.lane_mut(lane_id).expect("lane"), record)
    })
}

/// `record_after`, for an outcome that changes the run besides the lane (its `spares`, SPEC
/// 23.2): `f` is handed the whole run, the record taken out of its lane while `f` runs.
pub(crate) fn record_after_in_run(
    ctx: &Ctx<'_>,
    run_id: &str,
    lane_id: &str,
    step: &StepKey,
    f: impl FnOnce(&mut Run, &mut StepRecord) -> Result<(Action, crate::run::then::Then), Refusal>,
) -> Result<StepReport, Refusal> {
    let (mine, _) = me();
    ctx.transact(|state| {
        let run = state.runs.get_mut(run_id).ok_or_else(|| {
            ctx.refuse(
                "run-not-found",
                format!("run `{run_id}` is gone"),
                "`iced run list`",
            )
        })?;
        let lane = run.lane_mut(lane_id).expect("lane");
        let attempt = lane.attempt;
        let Some(index) = lane.steps.iter().position(|r| {
            r.step == *step
                && r.attempt == attempt
                && r.status == StepStatus::Started
                && r.pid == Some(mine)
        }) else {
            emit(
                &ctx.paths,
                run_id,
                Event::Superseded,
                json!({"lane": lane_id, "step": step, "attempt": attempt}),
            );
            let lane = run.lane(lane_id).expect("lane");
            return Ok(StepReport::for_lane(
                run,
                lane,
                Action::Waiting,
                crate::run::then::Then::MovedOn { step: step.clone() },
            ));
        };
        let mut record = lane.steps.remove(index);
        let (action, next) = f(run, &mut record)?;
        let waits = record
            .outcome_as::<crate::run::outcome::LandOutcome>()
            .is_some_and(|o| o.again);
        let event = match record.status {
            StepStatus::Done => Some(Event::StepDone),
            StepStatus::Failed if waits => Some(Event::StepWaits),
            StepStatus::Failed => Some(Event::StepFailed),
            StepStatus::Started => None,
        };
        if let Some(event) = event {
            emit(
                &ctx.paths,
                run_id,
                event,
                json!({"lane": lane_id, "step": step, "attempt": attempt, "outcome": record.outcome}),
            );
        }
        run.lane_mut(lane_id)
            .expect("lane")
            .steps
            .insert(index, record);
        let lane = run.lane(lane_id).expect("lane");
        Ok(StepReport::for_lane(run, lane, action, next))
    })
}

/// The run a verb steers, which must not have ended; `doing` says what the verb would do.
pub(crate) fn open_run<'s>(
    ctx: &Ctx<'_>,
    state: &'s mut State,
    run_id: &str,
    doing: &str,
) -> Result<&'s mut Run, Refusal> {
    let run = state.runs.get_mut(run_id).ok_or_else(|| {
        ctx.refuse(
            "run-not-found",
            format!("no run `{run_id}`"),
            "`iced run list` shows the runs",
        )
    })?;
    if run.status.is_ended() {
        return Err(ctx.refuse(
            "run-ended",
            format!("run `{run_id}` has ended ({})", run.status.as_str()),
            format!("nothing to {doing}"),
        ));
    }
    Ok(run)
}

/// Apply the move `decide` chose for a lane once a step's result is in: a stage, a new attempt
/// (its records to the history), blocked or handed back with the reason.
pub(crate) fn apply_move(
    ctx: &Ctx<'_>,
    run_id: &str,
    lane: &mut Lane,
    mv: crate::run::decide::LaneMove,
) -> Result<(), Refusal> {
    use crate::run::decide::LaneMove;
    match mv {
        LaneMove::To(stage) => {
            // Past its delivery a lane's last reason (a fix round's findings, a failed receipt's
            // gaps) is history: it is kept for the brief only until the close is committed.
            if matches!(stage, Stage::Land | Stage::Delivered) {
                lane.reason = None;
            }
            lane.stage = stage;
        }
        LaneMove::Retry { reason } => {
            lane.metrics.push(LaneMetric::failed(lane.attempt));
            new_attempt(ctx, run_id, lane, reason, false)?
        }
        LaneMove::Block { reason } => {
            lane.metrics
                .push(LaneMetric::escalation(EscalationKind::Blocked, &reason));
            lane.stage = Stage::Blocked;
            lane.reason = Some(reason);
        }
        LaneMove::Spent { reason } => {
            lane.metrics.push(LaneMetric::failed(lane.attempt));
            apply_move(ctx, run_id, lane, LaneMove::Block { reason })?;
        }
        LaneMove::Escalate {
            kind,
            reason,
            questions,
        } => {
            lane.metrics.push(LaneMetric::escalation(kind, &reason));
            if questions > 0 {
                lane.metrics.push(LaneMetric::Questions {
                    ts: crate::clock::now_iso(),
                    count: questions,
                });
            }
            lane.stage = Stage::Blocked;
            lane.reason = Some(reason);
        }
        LaneMove::Handback { reason } => {
            lane.metrics
                .push(LaneMetric::escalation(EscalationKind::Handback, &reason));
            lane.stage = Stage::Handback;
            lane.reason = Some(reason);
        }
    }
    Ok(())
}
