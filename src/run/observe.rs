//! What finished activities say, recorded under the lock before anything is decided: an outcome
//! file read into its step record, a crashed supervisor found, a harness's result and pace (a
//! rate limit, the work window). Nothing here chooses the next move.

use super::events::{emit, Event};
use super::state::{Driver, Run, StepRecord, StepStatus};
use crate::activity::{self, Observation};
use crate::refusal::Refusal;
use crate::run::ctx::*;
use crate::run::keys::StepKey;
use crate::run::launch::*;
use crate::run::outcome::{or_default, HarnessPace};
use crate::run::records::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// An implementer's or a command's outcome as its step records it: the supervisor's outcome,
/// then what the loop read of a harness, each only when there is something to say.
#[derive(Serialize)]
struct ActivitySummary<'a> {
    #[serde(flatten)]
    outcome: &'a activity::Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    harness: Option<&'a Value>,
    /// The harness failed because the provider asked to slow down (nobody's fault)...
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    rate_limited: bool,
    /// ...or for any other reason: a crash, whatever it exited with.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    crashed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    harness_failed: Option<&'a str>,
}

/// What a validator's finished outcome says of its harness's pace, and whether it was applied.
#[derive(Default, Deserialize)]
#[serde(default)]
struct ValidatorPace {
    /// `None` unless the harness's result is an object.
    #[serde(deserialize_with = "or_default")]
    harness: Option<HarnessPace>,
    /// Present (never written but `true`) once the pace was applied.
    #[serde(deserialize_with = "or_default")]
    pace_applied: Option<serde::de::IgnoredAny>,
}

/// Record the outcomes of finished activities of the run's lanes. A supervisor that is gone
/// without an outcome, or a launch whose launcher died before its supervisor registered, is a
/// crash. An outcome whose nonce is not the record's is superseded and ignored.
pub(crate) fn observe(ctx: &Ctx<'_>, run: &mut Run) -> Result<(), Refusal> {
    let run_id = run.id.clone();
    let layout = run.brief_layout;
    // Whether an implementer ended rate limited, or ended otherwise (SPEC 20.10).
    let mut rate_limited: Option<bool> = None;
    let is_started = |r: &StepRecord| r.status == StepStatus::Started;
    for lane in run.lanes.iter_mut_where(|l| l.steps.iter().any(is_started)) {
        let attempt = lane.attempt;
        let lane_id = lane.id.clone();
        for record in lane.steps.iter_mut().filter(|r| is_started(r)) {
            let validator_process = record.step.is_validator()
                && ctx.settings.validator.is_some()
                && record.nonce.is_some()
                && record
                    .outcome
                    .as_ref()
                    .is_none_or(|o| o.get("finished").is_none());
            let is_activity = record.step == StepKey::Implement && run.driver == Driver::Process
                || record.step.is_dod()
                || record.step.runs_once()
                || validator_process;
            // A receipt whose own checks are recorded stays started until its commands are in: the
            // call that checked has ended as it should, and nothing is redone.
            let checked = record.step == StepKey::Receipt && record.outcome.is_some();
            if !is_activity {
                // A synchronous step whose call died: clear its owner, so `decide` redoes it.
                if !checked && record.pid.is_some() && !owner_alive(record) {
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
            match activity::observe_launch(&dir, Some(&nonce)) {
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
                    // The implementer and the test writer run on the implementer's runner; a
                    // harness's final answer is their report (SPEC 20.8, 20.17).
                    let writes = matches!(record.step, StepKey::Implement | StepKey::TestWrite);
                    let harness = writes
                        .then_some(ctx.settings.implementer.as_ref())
                        .flatten()
                        .filter(|r| r.kind.is_harness())
                        .map(|r| {
                            let receipt = if record.step == StepKey::TestWrite {
                                super::stage::tester::report_path(
                                    ctx,
                                    (&run_id, layout),
                                    &lane_id,
                                    attempt,
                                )
                            } else {
                                ctx.receipt_path_of(&run_id, layout, &lane_id, attempt)
                            };
                            let transcript =
                                ctx.transcript_path(&run_id, &lane_id, record.step.role(), attempt);
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
                    let mut summary = ActivitySummary {
                        outcome: &outcome,
                        harness: None,
                        rate_limited: false,
                        crashed: false,
                        harness_failed: None,
                    };
                    if let Some((result, failed)) = &harness {
                        summary.harness = Some(result);
                        let limited = HarnessPace::deserialize(result)
                            .unwrap_or_default()
                            .rate_limited;
                        rate_limited = Some(limited || rate_limited == Some(true));
                        if let Some(why) = failed {
                            // The harness says the run failed: a crash, whatever it exited with;
                            // unless the provider asked to slow down, which is nobody's fault.
                            summary.rate_limited = limited;
                            summary.crashed = !limited;
                            summary.harness_failed = Some(why);
                            finish(record, StepStatus::Failed, summary.to_value());
                            emit(
                                &ctx.paths,
                                &run_id,
                                Event::AgentEnd,
                                json!({"lane": lane_id, "attempt": attempt, "role": record.step.role(), "outcome": {"exit_code": outcome.exit_code, "harness_failed": why}}),
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
                    finish(record, StepStatus::Done, summary.to_value());
                    let short = json!({"exit_code": outcome.exit_code, "signal": outcome.signal, "timed_out": outcome.timed_out, "duration_ms": outcome.duration_ms});
                    if record.step == StepKey::Implement || record.step.runs_once() {
                        emit(
                            &ctx.paths,
                            &run_id,
                            Event::AgentEnd,
                            json!({"lane": lane_id, "attempt": attempt, "role": record.step.role(), "step": record.step, "outcome": short}),
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
                Observation::Running { .. } | Observation::Starting { .. } => {}
                Observation::NotRegistered
                    if owner_alive(record) && !launch_stale(&dir, &nonce) => {}
                // A validator (or the refuter) whose launching call died before its supervisor
                // registered never ran: its record goes back to prepared, and the next call
                // launches it again in the same sandbox with a new nonce. Taken for a crash, it
                // was prepared again and its stage started a second time (the random-kill walk's
                // `validate` of attempt 2 started twice), and a kill of the loop spent the lane's
                // crash budget (SPEC 21.4). A supervisor of the old launch still starting finds
                // its nonce gone and starts nothing; one that wrote its record (and may have
                // registered) is never taken for one that did not.
                Observation::NotRegistered
                    if validator_process
                        && !owner_alive(record)
                        && !activity::registered_as(&dir, &nonce) =>
                {
                    record.nonce = None;
                    record.pid = None;
                    record.pid_start = None;
                    emit(
                        &ctx.paths,
                        &run_id,
                        Event::AgentEnd,
                        json!({"lane": lane_id, "attempt": attempt, "role": record.step.role(), "step": record.step, "outcome": "never started"}),
                    );
                    emit(
                        &ctx.paths,
                        &run_id,
                        Event::OwnerGone,
                        json!({"lane": lane_id, "step": record.step, "attempt": attempt}),
                    );
                }
                Observation::NotRegistered | Observation::Gone => {
                    // Whatever the dead supervisor's child left running must not go on working
                    // in the worktree while the next attempt starts.
                    activity::kill_orphans(&dir);
                    // A planning agent whose supervisor never registered never ran, and may be
                    // started; one that did is never started again (SPEC 20.16).
                    let crashed = if record.step.runs_once() {
                        json!({"crashed": true, "registered": dir.join(activity::files::SUPERVISOR).exists()})
                    } else {
                        json!({"crashed": true})
                    };
                    finish(record, StepStatus::Failed, crashed);
                    if record.step == StepKey::Implement
                        || validator_process
                        || record.step.runs_once()
                    {
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
    let validated = |r: &StepRecord| r.step.is_validator() && r.status != StepStatus::Started;
    for lane in run.lanes.iter_mut_where(|l| l.steps.iter().any(validated)) {
        for record in lane.steps.iter_mut().filter(|r| validated(r)) {
            let Some(o) = record.outcome.as_mut() else {
                continue;
            };
            let (Some(harness), None) = ValidatorPace::deserialize(&*o)
                .map(|p| (p.harness, p.pace_applied))
                .unwrap_or_default()
            else {
                continue;
            };
            rate_limited = Some(harness.rate_limited || rate_limited == Some(true));
            // A mark added to the outcome as recorded, which stays as it was otherwise.
            o["pace_applied"] = true.into();
        }
    }
    match rate_limited {
        Some(true) => super::backoff::pace_after(ctx, run, super::backoff::Backoff::RateLimited),
        Some(false) => run.paced = 0,
        None => {}
    }
    Ok(())
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

impl ActivitySummary<'_> {
    fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("an outcome serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary writes the bytes the outcome held when it was built key by key: the
    /// supervisor's outcome, then `harness`, then `rate_limited` or `crashed`, then
    /// `harness_failed`, each only when there is something to say.
    #[test]
    fn an_activity_summary_keeps_its_bytes() {
        let outcome: activity::Outcome = serde_json::from_value(json!({
            "nonce": "n", "exit_code": 1, "signal": null, "timed_out": false, "stopped": false,
            "duration_ms": 12, "stdout": {"bytes": 3, "lines": 1, "truncated": false},
            "stderr": {"bytes": 0, "lines": 0, "truncated": false}, "spawn_error": null,
            "supervisor_max_rss_kb": 900
        }))
        .unwrap();
        let harness = json!({"model": "m", "rate_limited": true});
        for (limited, failed) in [(false, None), (true, Some("slow down")), (false, Some("x"))] {
            let mut old = serde_json::to_value(&outcome).unwrap();
            old["harness"] = harness.clone();
            if let Some(why) = failed {
                if limited {
                    old["rate_limited"] = true.into();
                } else {
                    old["crashed"] = true.into();
                }
                old["harness_failed"] = why.into();
            }
            let new = ActivitySummary {
                outcome: &outcome,
                harness: Some(&harness),
                rate_limited: failed.is_some() && limited,
                crashed: failed.is_some() && !limited,
                harness_failed: failed,
            };
            assert_eq!(new.to_value().to_string(), old.to_string());
        }
        let bare = ActivitySummary {
            outcome: &outcome,
            harness: None,
            rate_limited: false,
            crashed: false,
            harness_failed: None,
        };
        assert_eq!(
            bare.to_value().to_string(),
            serde_json::to_value(&outcome).unwrap().to_string()
        );
    }
}
