//! The run verbs a person or a host uses to steer a run rather than step it: pick the run a call
//! is about, pause (or pace until a time), resume, abandon, release or discard a lane, retire
//! landed runs, hand in a host's receipt. Each checks, then changes the state in one hold of the
//! lock; what still runs is stopped outside it.

use super::events::{emit, Event};
use super::state::{Lane, Run, RunStatus, Stage, State, StepRecord, StepStatus};
use crate::activity::{self};
use crate::refusal::Refusal;
use crate::run::alive::stop_activities;
use crate::run::ctx::*;
use crate::run::decide::OnResume;
use crate::run::keys::StepKey;
use crate::run::records::*;
use crate::run::reply::*;
use crate::run::stage::receipt::*;
use crate::run::stepper::*;
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};

/// The run a call is about: the one named, or the only live one.
pub fn pick_run(ctx: &Ctx<'_>, run: Option<&str>) -> Result<Option<String>, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    pick_in(ctx, &state, run)
}

/// [`pick_run`], with the sha256 of the rules the run picked was admitted with (SPEC 24.16).
pub(crate) fn pick_run_rules(
    ctx: &Ctx<'_>,
    run: Option<&str>,
) -> Result<Option<(String, Option<String>)>, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    Ok(pick_in(ctx, &state, run)?.map(|id| {
        let rules = state.runs.get(&id).and_then(|r| r.rules.clone());
        (id, rules)
    }))
}

fn pick_in(ctx: &Ctx<'_>, state: &State, run: Option<&str>) -> Result<Option<String>, Refusal> {
    if let Some(r) = run {
        if state.runs.contains_key(r) {
            return Ok(Some(r.to_owned()));
        }
        let hits: Vec<&String> = state.runs.keys().filter(|k| k.contains(r)).collect();
        return match hits.as_slice() {
            [one] => Ok(Some((*one).clone())),
            [] => Err(ctx.refuse(
                "run-not-found",
                format!("no run `{r}`"),
                "`iced run list` shows the runs",
            )),
            _ => Err(ctx.refuse(
                "run-ambiguous",
                format!("`{r}` matches several runs"),
                "name the run by its full id (`iced run list`)",
            )),
        };
    }
    let live: Vec<&Run> = state
        .runs
        .values()
        .filter(|r| !r.status.is_ended())
        .collect();
    match live.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.id.clone())),
        many => Err(ctx.refuse(
            "run-ambiguous",
            format!(
                "{} runs are live: {}",
                many.len(),
                many.iter()
                    .map(|r| r.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "name one with `--run <id>`",
        )),
    }
}

/// What `run retire` did to one run: retired (every lane's work gone from the checkout), or kept.
#[derive(Debug, Clone, Serialize)]
pub struct Retirement {
    pub run: String,
    pub retired: bool,
    pub lanes: Vec<LaneRetirement>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LaneRetirement {
    pub lane: String,
    /// `retired`, or why the lane was kept.
    pub result: String,
}

/// `iced run retire`: retire the lanes of delivered runs whose work is in the target (a person
/// merged a `none`-mode delivery, or a retire was left undone), and let those runs leave the state.
pub fn retire_runs(ctx: &Ctx<'_>, only: Option<&str>) -> Result<Vec<Retirement>, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    let mut out = Vec::new();
    for run in state
        .runs
        .values()
        .filter(|r| r.status.is_ended() && only.is_none_or(|o| o == r.id))
    {
        let target = super::stage::land::target(ctx, run).unwrap_or_default();
        // Landed means in the remote's target when a remote is set (SPEC 23.3), fetched now.
        let landed_in = match &ctx.settings.land.remote {
            Some(remote) => super::stage::land::git::fetch(&ctx.repo.root, remote, &target),
            None => super::stage::land::git::rev(&ctx.repo.root, &format!("refs/heads/{target}")),
        }
        .unwrap_or_default();
        let mut all = true;
        let mut lanes = Vec::new();
        // Where each lane landed is in its step records: an ended lane's in its `lane.json`.
        for lane in &super::ended::whole(&ctx.paths, run).lanes {
            let worktree = lane.worktree.as_deref().map(PathBuf::from);
            let branch = lane.branch.clone().unwrap_or_default();
            let result = if run.status == RunStatus::Delivered {
                let landed = super::stage::land::landed_by_loop(lane);
                super::stage::land::git::retire(
                    (&ctx.repo.root, ctx.claims().common_dir()),
                    worktree.as_deref(),
                    &branch,
                    &landed_in,
                    landed.as_ref().map(|(c, h)| (c.as_str(), h.as_str())),
                )
            } else {
                // An abandoned or handed-back run's work never landed: its branch is kept for a
                // person; only a clean worktree goes.
                Ok(super::stage::land::git::Retired::NotLanded)
            };
            let said = match result {
                Ok(super::stage::land::git::Retired::Removed) => "retired".to_owned(),
                Ok(super::stage::land::git::Retired::DirtyKept(p)) => {
                    format!("kept: `{}` has uncommitted changes", p.display())
                }
                Ok(super::stage::land::git::Retired::NotLanded) => {
                    format!("not landed in `{target}` yet")
                }
                Err(e) => e,
            };
            all &= said == "retired";
            lanes.push(LaneRetirement {
                lane: lane.id.clone(),
                result: said,
            });
        }
        if all {
            ctx.transact(|state| {
                if let Some(r) = state.runs.get(&run.id) {
                    super::record::write(ctx, r);
                }
                state.runs.remove(&run.id);
                Ok(())
            })?;
            emit(&ctx.paths, &run.id, Event::RunRetired, json!({}));
        }
        out.push(Retirement {
            run: run.id.clone(),
            retired: all,
            lanes,
        });
    }
    Ok(out)
}

/// A person resuming a run on a pace other than the one it recorded (SPEC 20.11): refused
/// (`pace-changed`, naming the differences) unless `repace`, which records the new pace.
pub fn check_pace(ctx: &Ctx<'_>, run_id: &str, repace: bool) -> Result<(), Refusal> {
    ctx.transact(|state| {
        let Some(run) = state.runs.get_mut(run_id) else {
            return Ok(());
        };
        let recorded = run_pace(ctx, run);
        let now = &ctx.settings.pace;
        let diffs = recorded.differences(now);
        if diffs.is_empty() {
            return Ok(());
        }
        if !repace {
            return Err(ctx.refuse(
                "pace-changed",
                format!(
                    "run `{}` keeps the pace it recorded, and the pace in force now differs: {}",
                    run.id,
                    diffs.join(", ")
                ),
                "add `--repace` to go on at the new pace, or restore the settings (`pace` in .iced/config.json, its rulings, your user config, the flags)",
            ));
        }
        run.pace = Some(now.to_value());
        run.updated_at = crate::clock::now_iso();
        emit(
            &ctx.paths,
            run_id,
            Event::Repaced,
            json!({"changes": diffs, "ruling": now.ruling}),
        );
        Ok(())
    })
}

/// `iced run pause <run> --until T`: no agent launched before `T` (SPEC 20.10).
pub fn pace_until(ctx: &Ctx<'_>, run_id: &str, until: &str) -> Result<Run, Refusal> {
    let at = chrono::DateTime::parse_from_rfc3339(until).map_err(|e| {
        ctx.refuse(
            "time-invalid",
            format!("`{until}` is not an RFC 3339 time: {e}"),
            "give a time like 2026-12-01T09:00:00Z",
        )
    })?;
    let until = at
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, "pause")?;
        run.next_eligible_at = Some(until.clone());
        run.updated_at = crate::clock::now_iso();
        emit(
            &ctx.paths,
            run_id,
            Event::Paced,
            json!({"until": until, "why": "pause"}),
        );
        Ok(run.clone())
    })
}

pub fn set_paused(ctx: &Ctx<'_>, run_id: &str, paused: bool) -> Result<Run, Refusal> {
    ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, if paused { "pause" } else { "resume" })?;
        if !paused {
            // A resume lifts a pace a person set, or a backoff, too.
            run.next_eligible_at = None;
            // A lost claim is forgotten, and the claims renewed before any lane moves: the lanes
            // go on only if the claims are the run's again (SPEC 24.9.1).
            if let Some(kept) = run.claims.as_mut().filter(|k| !k.lost.is_empty()) {
                kept.lost.clear();
                kept.now = true;
            }
        }
        if paused {
            run.status = RunStatus::Paused;
        } else if run.status == RunStatus::Paused {
            run.status = RunStatus::Running;
        } else if run.status == RunStatus::Blocked {
            // Resuming a blocked run: a fresh attempt of every blocked lane, with a fresh budget;
            // a lane that blocked while landing (its close is committed) lands again instead, in
            // a new round that takes whatever the person did on its branch; one whose delivery
            // failed for the loop's own reasons is delivered again (SPEC 23.3).
            let run_id = run.id.clone();
            // An implementer's escalation waits for the person's answer, not for a resume
            // (SPEC 20.7): its lane stays blocked while the others resume; with nothing else
            // to resume, the resume is refused and says what the escalation waits for.
            let escalated = |l: &crate::run::state::Lane| {
                l.stage == Stage::Blocked
                    && l.escalation.as_ref().is_some_and(|e| e.is_open_at(l.attempt))
            };
            let resumable = run
                .lanes
                .iter()
                .any(|l| l.stage == Stage::Blocked && !escalated(l));
            if let Some(lane) = run.lanes.iter().find(|l| escalated(l)).filter(|_| !resumable) {
                let e = lane.escalation.as_ref().expect("found open");
                let how = if e.kind == "questions" {
                    format!("`iced answer {} <Q id> <text>`", lane.unit)
                } else {
                    format!(
                        "`iced escalation apply {0}`, `iced escalation edit {0} --file <path>` or `iced escalation reject {0} <guidance>`",
                        lane.unit
                    )
                };
                return Err(ctx.refuse(
                    "escalation-open",
                    format!(
                        "lane `{}` waits for a person: its {} stopped with {}",
                        lane.id,
                        e.by(),
                        e.reason()
                    ),
                    format!(
                        "read it with `iced escalation show {}`, resolve it with {how}, then resume",
                        lane.unit
                    ),
                ));
            }
            for lane in run.lanes.iter_mut_where(|l| l.stage == Stage::Blocked && !escalated(l)) {
                let on_resume = crate::run::decide::on_resume(lane);
                // Its delivery failed for the loop's own reasons: delivered again, a close commit
                // it prepared adopted.
                if on_resume == OnResume::DeliverAgain {
                    if let Some(failed) = crate::run::decide::deliver_again(lane) {
                        archive(ctx, &run_id, &lane.id, &[failed])?;
                    }
                    continue;
                }
                if on_resume != OnResume::NewAttempt {
                    if on_resume == OnResume::PullRequestArmed {
                        return Err(ctx.refuse(
                            "pr-armed",
                            format!(
                                "lane `{}` has an armed pull request ({}); the loop never pushes to a pull request after arming it",
                                lane.id,
                                lane.outcome(&StepKey::PrOpen).and_then(|o| o["url"].as_str()).unwrap_or("?")
                            ),
                            "change it on the forge yourself, or close it and abandon this run (`iced run abandon`), then build again",
                        ));
                    }
                    // Landing steps that are not keyed by round are tried afresh.
                    let attempt = lane.attempt;
                    let failed: Vec<StepRecord> = lane
                        .steps
                        .iter()
                        .filter(|r| r.attempt == attempt && r.status == StepStatus::Failed)
                        .filter(|r| matches!(r.step, StepKey::PushBranch | StepKey::PrOpen | StepKey::PrArm | StepKey::Retire))
                        .cloned()
                        .collect();
                    lane.steps.retain(|r| !failed.contains(r));
                    archive(ctx, &run_id, &lane.id, &failed)?;
                    apply_move(ctx, &run_id, lane, OnResume::landing_again())?;
                    lane.released = false;
                    lane.land_round = lane.land_round.max(1) + 1;
                    lane.crashes = 0;
                    // A person resumed this round: what they did on the lane branch is theirs to
                    // land (SPEC 23.3, 24.3); the landing records what it takes.
                    let mut record = started(StepKey::Resume(lane.land_round), lane.attempt, None, None);
                    record.pid = None;
                    record.pid_start = None;
                    finish(&mut record, StepStatus::Done, json!({"by": "person"}));
                    lane.steps.push(record);
                    continue;
                }
                lane.released = false;
                // A fresh budget: `verify.maxAttempts` more, counted from the attempt that starts now.
                lane.attempts_before = lane.attempt;
                let reason = lane.reason.clone().unwrap_or_else(|| "resumed".into());
                let had_worktree = lane.worktree.is_some();
                new_attempt(
                    ctx,
                    &run_id,
                    lane,
                    format!("resumed after: {reason}"),
                    false,
                )?;
                lane.crashes = 0;
                if !had_worktree {
                    lane.steps.retain(|r| r.step != StepKey::Worktree);
                }
            }
            run.status = RunStatus::Running;
        }
        emit(
            &ctx.paths,
            run_id,
            if paused { Event::RunPaused } else { Event::RunResumed },
            json!({}),
        );
        Ok(run.clone())
    })
}

pub fn abandon(ctx: &Ctx<'_>, run_id: &str) -> Result<Run, Refusal> {
    let run = ctx.transact(|state| {
        // An abandon that died after ending the run and before stopping its activities is
        // finished by the next one (SPEC 20.6): the run is abandoned already, what runs stops.
        if let Some(run) = state
            .runs
            .get(run_id)
            .filter(|r| r.status == RunStatus::Abandoned)
        {
            return Ok(run.clone());
        }
        let run = open_run(ctx, state, run_id, "abandon")?;
        end_run(ctx, run, RunStatus::Abandoned)?;
        Ok(run.clone())
    })?;
    crate::failpoint::hit("abandon-before-stop");
    // Stop what still runs (outside the lock); their outcomes no longer matter.
    for lane in &run.lanes {
        stop_activities(ctx, &run.id, lane);
    }
    Ok(run)
}

/// Stop what ended runs of these units left running (an abandon killed before it stopped them,
/// SPEC 20.3) and wait until none of it runs, at most the kill grace and two seconds more: the
/// supervisor kills its child at the end of the grace, so a new agent never shares the lane's
/// worktree with an old one.
pub(crate) fn stop_leftovers(ctx: &Ctx<'_>, state: &State, units: &[String]) {
    let mut started = Vec::new();
    for r in state.runs.values().filter(|r| r.status.is_ended()) {
        for l in r.lanes.iter().filter(|l| units.contains(&l.unit)) {
            // A discarded lane's records are in its `lane.json` (SPEC 21.2).
            let l = super::ended::whole_lane(&ctx.paths, &r.id, l);
            started.extend(
                l.steps
                    .iter()
                    .filter(|s| s.status == StepStatus::Started && s.nonce.is_some())
                    .map(|s| ctx.activity_dir(&r.id, &l.id, &s.step, s.attempt)),
            );
        }
    }
    let dirs: Vec<PathBuf> = started
        .into_iter()
        .filter(|d| matches!(activity::observe(d), activity::Observation::Running { .. }))
        .collect();
    if dirs.is_empty() {
        return;
    }
    for dir in &dirs {
        let _ = activity::stop(dir);
        activity::kill_orphans(dir);
    }
    let deadline =
        std::time::Instant::now() + ctx.settings.kill_grace + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < deadline
        && dirs
            .iter()
            .any(|d| matches!(activity::observe(d), activity::Observation::Running { .. }))
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The lane of a run a verb names: by id, or by a unique part of it.
pub(crate) fn named_lane<'r>(
    ctx: &Ctx<'_>,
    run: &'r mut Run,
    lane: &str,
) -> Result<&'r mut Lane, Refusal> {
    let hits: Vec<usize> = run
        .lanes
        .iter()
        .enumerate()
        .filter(|(_, l)| l.id == lane || l.id.contains(lane))
        .map(|(i, _)| i)
        .collect();
    let exact = run.lanes.iter().position(|l| l.id == lane);
    match (exact, hits.as_slice()) {
        (Some(i), _) => Ok(&mut run.lanes[i]),
        (None, [i]) => Ok(&mut run.lanes[*i]),
        (None, []) => Err(ctx.refuse(
            "lane-not-found",
            format!("run `{}` has no lane `{lane}`", run.id),
            format!("`iced run show {}` lists its lanes", run.id),
        )),
        (None, _) => Err(ctx.refuse(
            "lane-ambiguous",
            format!("`{lane}` matches several lanes of run `{}`", run.id),
            "name the lane by its full id",
        )),
    }
}

/// `iced run release <run> <lane>`: a blocked or handed-back lane stops holding its siblings'
/// landing (SPEC 23.6). The lane itself stays as it is.
pub fn release(ctx: &Ctx<'_>, run_id: &str, lane: &str) -> Result<Run, Refusal> {
    ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, "release")?;
        let l = named_lane(ctx, run, lane)?;
        if !matches!(l.stage, Stage::Blocked | Stage::Handback) {
            return Err(ctx.refuse(
                "lane-not-held",
                format!(
                    "lane `{}` is {}; only a blocked or handed-back lane holds its siblings",
                    l.id,
                    l.stage.as_str()
                ),
                "`iced run show` says where each lane stands",
            ));
        }
        l.released = true;
        let lane_id = l.id.clone();
        if run.status == RunStatus::Blocked {
            run.status = RunStatus::Running;
        }
        run.updated_at = crate::clock::now_iso();
        emit(
            &ctx.paths,
            run_id,
            Event::LaneReleased,
            json!({"lane": lane_id}),
        );
        Ok(run.clone())
    })
}

/// `iced run arm <run> [<lane>]` (SPEC 23.2, `land.arm: human`): a person says the lane's open
/// pull request may be armed; the next step arms it with `land.pr.arm`, and from then on the loop
/// never pushes to it. Asked again, or of one armed already, nothing changes. The lane, when the
/// run has one only, need not be named.
pub fn request_arm(ctx: &Ctx<'_>, run_id: &str, lane: Option<&str>) -> Result<Run, Refusal> {
    use crate::run::settings::LandMode;
    ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, "arm")?;
        let run_key = run.id.clone();
        let l = match lane {
            Some(name) => named_lane(ctx, run, name)?,
            None if run.lanes.len() == 1 => &mut run.lanes[0],
            None => {
                return Err(ctx.refuse(
                    "lane-ambiguous",
                    format!("run `{run_key}` has several lanes"),
                    format!("name the lane: `iced run arm {run_key} <lane>`"),
                ))
            }
        };
        let open = ctx.settings.land.mode == LandMode::Pr
            && l.stage == Stage::Retire
            && l.is_done(&StepKey::PrOpen);
        if !open {
            return Err(ctx.refuse(
                "pr-not-open",
                format!(
                    "lane `{}` has no open pull request waiting for a person (land.mode {}, the lane is at {})",
                    l.id,
                    ctx.settings.land.mode,
                    l.stage.as_str()
                ),
                format!("`iced run show {run_key}` says where the lane stands"),
            ));
        }
        if ctx.settings.land.pr_arm.is_empty() {
            return Err(ctx.refuse(
                "config-invalid",
                "`land.pr.arm` is not set: nothing can arm the pull request",
                "set `land.pr.arm` to the argv that arms a pull request (`iced schema config`), run `iced trust`, then arm it again",
            ));
        }
        if !l.arm_requested && !l.is_done(&StepKey::PrArm) {
            l.arm_requested = true;
            let lane_id = l.id.clone();
            run.updated_at = crate::clock::now_iso();
            emit(
                &ctx.paths,
                run_id,
                Event::ArmRequested,
                json!({"lane": lane_id}),
            );
        }
        Ok(run.clone())
    })
}

/// `iced run discard <run> <lane>`: the lane leaves the run (SPEC 23.6): its activities are
/// stopped, its claim released; its worktree and branch are kept.
pub fn discard(ctx: &Ctx<'_>, run_id: &str, lane: &str) -> Result<Run, Refusal> {
    let (run, lane_id) = ctx.transact(|state| {
        let run = open_run(ctx, state, run_id, "discard")?;
        let run_key = run.id.clone();
        let l = named_lane(ctx, run, lane)?;
        if l.stage == Stage::Discarded {
            // Again: finish what a call killed after recording it left (its claim, its activities).
            let id = l.id.clone();
            return Ok((run.clone(), id));
        }
        if l.stage == Stage::Delivered {
            return Err(ctx.refuse(
                "lane-final",
                format!("lane `{}` is already delivered", l.id),
                "nothing to discard",
            ));
        }
        if super::decide::landing_begun(l) || matches!(l.stage, Stage::Retire) {
            return Err(ctx.refuse(
                "lane-landing",
                format!(
                    "lane `{}` has begun landing; discarding it now could leave half a landing",
                    l.id
                ),
                format!("let it land (`iced run resume {run_key}`), or abandon the whole run"),
            ));
        }
        l.stage = Stage::Discarded;
        l.reason = Some("discarded by a person".into());
        let lane_id = l.id.clone();
        super::host::end_stranded(ctx, run);
        if run.status == RunStatus::Blocked {
            run.status = RunStatus::Running;
        }
        run.updated_at = crate::clock::now_iso();
        emit(
            &ctx.paths,
            run_id,
            Event::LaneDiscarded,
            json!({"lane": lane_id}),
        );
        Ok((run.clone(), lane_id))
    })?;
    // The lane left the run first; only then may its unit be claimed by another run.
    crate::failpoint::hit("discard-before-release");
    if let Some(lane) = run.lane(&lane_id).filter(|l| l.unit != run.unit) {
        ctx.release_claim(&lane.unit, &run.id)?;
    }
    // Stop what still runs (outside the lock); the gate refuses what has not started.
    if let Some(lane) = run.lane(&lane_id) {
        // Discarded again, the lane is in its ended form: what ran is in its `lane.json`.
        stop_activities(
            ctx,
            &run.id,
            &super::ended::whole_lane(&ctx.paths, &run.id, lane),
        );
    }
    Ok(run)
}

/// `implement receipt <path>`: the host hands in its agent's report for the current attempt.
/// `said` is what the host says its agent used (SPEC 24.8), kept on the step's outcome.
pub fn submit_receipt(
    ctx: &Ctx<'_>,
    run_id: &str,
    path: &Path,
    said: &super::host::HostAgent,
) -> Result<StepReport, Refusal> {
    logged(ctx, run_id, submit_receipt_once(ctx, run_id, path, said))
        .map(|r| lane_not_run(ctx, run_id, r))
}
