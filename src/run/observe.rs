//! What finished activities say, recorded under the lock before anything is decided: an outcome
//! file read into its step record, a crashed supervisor found, a harness's result and pace (a
//! rate limit, the work window). Nothing here chooses the next move.

use super::events::{emit, Event};
use super::state::{Driver, Run, StepStatus};
use crate::activity::{self, Observation};
use crate::refusal::Refusal;
use crate::run::ctx::*;
use crate::run::keys::StepKey;
use crate::run::launch::*;
use crate::run::records::*;
use serde_json::json;

/// Record the outcomes of finished activities of the run's lanes. A supervisor that is gone
/// without an outcome, or a launch whose launcher died before its supervisor registered, is a
/// crash. An outcome whose nonce is not the record's is superseded and ignored.
pub(crate) fn observe(ctx: &Ctx<'_>, run: &mut Run) -> Result<(), Refusal> {
    let run_id = run.id.clone();
    // Whether an implementer ended rate limited, or ended otherwise (SPEC 20.10).
    let mut rate_limited: Option<bool> = None;
    for lane in &mut run.lanes {
        let attempt = lane.attempt;
        let lane_id = lane.id.clone();
        for record in lane
            .steps
            .iter_mut()
            .filter(|r| r.status == StepStatus::Started)
        {
            let validator_process = record.step.is_validator()
                && ctx.settings.validator.is_some()
                && record.nonce.is_some()
                && record
                    .outcome
                    .as_ref()
                    .is_none_or(|o| o.get("finished").is_none());
            let is_activity = record.step == StepKey::Implement && run.driver == Driver::Process
                || record.step.is_dod()
                || validator_process;
            if !is_activity {
                // A synchronous step whose call died: clear its owner, so `decide` redoes it.
                if record.pid.is_some() && !owner_alive(record) {
                    record.pid = None;
                    record.pid_start = None;
                    emit(
                        &ctx.paths,
                        &run_id,
                        Event::OwnerGone,
                        json!({"lane": lane_id, "step": record.step, "attempt": record.attempt}),
                    );
                }
                continue;
            }
            if record.attempt != attempt {
                continue;
            }
            let Some(nonce) = record.nonce.clone() else {
                continue;
            };
            let dir = ctx.activity_dir(&run_id, &lane_id, &record.step, attempt);
            match activity::observe(&dir) {
                Observation::Finished(outcome) if outcome.nonce == nonce && validator_process => {
                    // A validator's tree and answer are checked outside the lock, next step.
                    let summary = serde_json::to_value(&outcome).expect("an outcome serialises");
                    super::stage::validators::observed_finished(record, summary);
                    emit(
                        &ctx.paths,
                        &run_id,
                        Event::AgentEnd,
                        json!({"lane": lane_id, "attempt": attempt, "role": if record.step == StepKey::Refute { "refuter" } else { "validator" }, "step": record.step, "outcome": {"exit_code": outcome.exit_code, "timed_out": outcome.timed_out}}),
                    );
                }
                Observation::Finished(outcome) if outcome.nonce == nonce => {
                    let harness = (record.step == StepKey::Implement)
                        .then_some(ctx.settings.implementer.as_ref())
                        .flatten()
                        .filter(|r| r.kind.is_harness())
                        .map(|r| {
                            let receipt = ctx.receipt_path(&run_id, &lane_id, attempt);
                            let transcript =
                                ctx.transcript_path(&run_id, &lane_id, "implementer", attempt);
                            read_harness(
                                &dir,
                                r,
                                (outcome.exit_code, outcome.timed_out),
                                false,
                                &receipt,
                                r.transcripts.then_some(transcript.as_path()),
                            )
                        });
                    crate::failpoint::hit("observe-before-record");
                    let mut summary =
                        serde_json::to_value(&outcome).expect("an outcome serialises");
                    if let Some((result, failed)) = &harness {
                        summary["harness"] = result.clone();
                        let limited = result["rate_limited"] == true;
                        rate_limited = Some(limited || rate_limited == Some(true));
                        if let Some(why) = failed {
                            // The harness says the run failed: a crash, whatever it exited with;
                            // unless the provider asked to slow down, which is nobody's fault.
                            if limited {
                                summary["rate_limited"] = true.into();
                            } else {
                                summary["crashed"] = true.into();
                            }
                            summary["harness_failed"] = why.clone().into();
                            finish(record, StepStatus::Failed, summary);
                            emit(
                                &ctx.paths,
                                &run_id,
                                Event::AgentEnd,
                                json!({"lane": lane_id, "attempt": attempt, "role": "implementer", "outcome": {"exit_code": outcome.exit_code, "harness_failed": why}}),
                            );
                            emit(
                                &ctx.paths,
                                &run_id,
                                Event::StepFailed,
                                json!({"lane": lane_id, "step": record.step, "attempt": attempt, "outcome": "harness_failed"}),
                            );
                            continue;
                        }
                    }
                    finish(record, StepStatus::Done, summary);
                    let short = json!({"exit_code": outcome.exit_code, "signal": outcome.signal, "timed_out": outcome.timed_out, "duration_ms": outcome.duration_ms});
                    if record.step == StepKey::Implement {
                        emit(
                            &ctx.paths,
                            &run_id,
                            Event::AgentEnd,
                            json!({"lane": lane_id, "attempt": attempt, "role": "implementer", "outcome": short}),
                        );
                    }
                    emit(
                        &ctx.paths,
                        &run_id,
                        Event::StepDone,
                        json!({"lane": lane_id, "step": record.step, "attempt": attempt, "outcome": short}),
                    );
                }
                Observation::Finished(outcome) => {
                    emit(
                        &ctx.paths,
                        &run_id,
                        Event::Superseded,
                        json!({"lane": lane_id, "step": record.step, "attempt": attempt, "nonce": outcome.nonce}),
                    );
                }
                Observation::Running { .. } => {}
                Observation::NotRegistered if owner_alive(record) && !launch_stale(&dir) => {}
                Observation::NotRegistered | Observation::Gone => {
                    // Whatever the dead supervisor's child left running must not go on working
                    // in the worktree while the next attempt starts.
                    activity::kill_orphans(&dir);
                    finish(record, StepStatus::Failed, json!({"crashed": true}));
                    if record.step == StepKey::Implement || validator_process {
                        emit(
                            &ctx.paths,
                            &run_id,
                            Event::AgentEnd,
                            json!({"lane": lane_id, "attempt": attempt, "role": record.step.role(), "step": record.step, "outcome": "crashed"}),
                        );
                    }
                    emit(
                        &ctx.paths,
                        &run_id,
                        Event::StepFailed,
                        json!({"lane": lane_id, "step": record.step, "attempt": attempt, "outcome": "crashed"}),
                    );
                }
            }
        }
    }
    // Validators' results are checked outside the lock; their pace is applied here, once per
    // record (marked `pace_applied`), so a call killed after recording a check loses nothing.
    for lane in &mut run.lanes {
        for record in lane
            .steps
            .iter_mut()
            .filter(|r| r.step.is_validator() && r.status != StepStatus::Started)
        {
            let Some(o) = record.outcome.as_mut() else {
                continue;
            };
            if !o["harness"].is_object() || o.get("pace_applied").is_some() {
                continue;
            }
            let limited = o["harness"]["rate_limited"] == true;
            rate_limited = Some(limited || rate_limited == Some(true));
            o["pace_applied"] = true.into();
        }
    }
    match rate_limited {
        Some(true) => pace_after_rate_limit(ctx, run),
        Some(false) => run.paced = 0,
        None => {}
    }
    Ok(())
}

/// A rate-limited agent result: the run launches nothing before a backoff has passed, doubled
/// for each such result in a row, capped, with up to 20% jitter either way (SPEC 20.10).
pub(crate) fn pace_after_rate_limit(ctx: &Ctx<'_>, run: &mut Run) {
    let pace = run_pace(ctx, run);
    let base = pace.backoff_sec * 1000.0;
    let cap = pace.backoff_max_sec * 1000.0;
    let doubled = base * 2f64.powi(run.paced.min(20) as i32);
    // Jitter from the clock's nanoseconds: enough to spread runs that were limited together.
    let nanos = f64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos()),
    );
    let jitter = 0.8 + 0.4 * (nanos / 1e9);
    let wait_ms = (doubled.min(cap) * jitter).max(1.0) as i64;
    let until = crate::clock::real_now() + chrono::Duration::milliseconds(wait_ms);
    // Whole seconds, rounded up: never earlier than the wait.
    let until = until
        .checked_add_signed(chrono::Duration::milliseconds(999))
        .map_or(until, |t| t)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    run.paced += 1;
    run.next_eligible_at = Some(until.clone());
    emit(
        &ctx.paths,
        &run.id,
        Event::Paced,
        json!({"until": until, "why": "rate_limited", "backoff_ms": wait_ms, "in_a_row": run.paced, "ruling": pace.ruling}),
    );
}

/// The work window (SPEC 20.11): after `workMinutes` of work, `pauseMinutes` launching nothing.
pub(crate) fn keep_work_window(ctx: &Ctx<'_>, run: &mut Run) {
    let pace = run_pace(ctx, run);
    let (Some(work), Some(pause)) = (pace.work_minutes, pace.pause_minutes) else {
        return;
    };
    let now = crate::clock::real_now();
    let iso =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let from = run
        .window_from
        .as_deref()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&chrono::Utc));
    let Some(from) = from else {
        run.window_from = Some(iso(now));
        return;
    };
    let minutes = |m: f64| chrono::Duration::milliseconds((m * 60_000.0) as i64);
    if now >= from + minutes(work) {
        let until = now + minutes(pause);
        run.next_eligible_at = Some(iso(until));
        run.window_from = Some(iso(until));
        emit(
            &ctx.paths,
            &run.id,
            Event::Paced,
            json!({"until": iso(until), "why": "work_window", "work_minutes": work, "pause_minutes": pause, "ruling": pace.ruling}),
        );
    }
}

/// Whether `run` may launch an agent now: `None`, or the time it may.
pub(crate) fn paced_until(run: &Run) -> Option<String> {
    let until = run.next_eligible_at.as_deref()?;
    let at = chrono::DateTime::parse_from_rfc3339(until).ok()?;
    (at > crate::clock::real_now()).then(|| until.to_owned())
}
