//! The stepper: one step of a run per call. Under the lock it records what finished activities
//! say (`observe`), checks the attempt's inputs, asks `decide` (pure) what comes next and does the
//! quick part (`under_lock`); then, outside the lock, the side effect (`outside_lock`), whose
//! outcome is recorded only if the step is still current. It knows no stage: each is a module of
//! `stage/` or a module the stages share.
//!
//! The lock is never held while an agent, a command or git runs.

use super::decide::{decide_with, DecideView};
use super::events::{emit, Event};
use super::state::{Run, RunStatus, Stage, State, StepStatus};
use crate::refusal::Refusal;
use crate::run::alive::agents_alive;
use crate::run::ctx::*;
use crate::run::keys::StepKey;
use crate::run::observe::*;
use crate::run::outside_lock::{self, Pending};
use crate::run::reply::Action;
use crate::run::reply::*;
use crate::run::settings::Arm;
use crate::run::stage::brief::*;
use crate::run::under_lock;
use serde_json::json;
use std::path::PathBuf;

/// The view `decide` needs of the settings: plain data, so `decide` stays pure.
pub(crate) fn decide_view(ctx: &Ctx<'_>, run: &Run) -> DecideView {
    DecideView {
        driver: run.driver,
        dod_shape: ctx.settings.dod.iter().map(Vec::len).collect(),
        dod_parallel: ctx.settings.dod_parallel,
        max_attempts: ctx.settings.max_attempts,
        max_crash_retries: ctx.settings.max_crash_retries,
        independent: ctx.settings.independent,
        paused: run.status == RunStatus::Paused,
        validators: run
            .lanes
            .iter()
            .filter(|l| matches!(l.stage, Stage::Validate | Stage::Refute))
            .map(|l| {
                (
                    l.id.clone(),
                    super::stage::validators::pinned_validators(ctx, l),
                )
            })
            .collect(),
        pace_lanes: run_pace(ctx, run).lanes as usize,
        pace_agents: run_pace(ctx, run).agents as usize,
        agents_alive: 0,
        paced_until: paced_until(run),
        validator_driver: super::stage::validators::validator_driver(ctx),
        max_mutations: ctx.settings.max_mutations,
        land_mode: ctx.settings.land.mode,
        arm_auto: ctx.settings.land.arm == Arm::Auto,
        refute: ctx.settings.refute,
        budget: super::record::charge(ctx, run).map(|b| super::decide::Spend {
            budget_usd: b.usd,
            charged_usd: b.charged_usd,
            unknown: b.unknown,
            unknown_cost_usd: b.unknown_cost_usd,
        }),
        plan_rounds: ctx.settings.plan_rounds,
        test_writer: ctx.settings.test_writer.is_some(),
        remote_validators: super::stage::validators::remote_validators(ctx),
        renew_claims: super::stage::claims::due(ctx, run),
    }
}

/// What `decide` made of a step: a move (the step did something, and another may be ready at
/// once), or only a wait (nothing moves until something changes: an activity ends, the state is
/// written by another call, the pace lets a launch go). A driver steps again at once after a
/// move and waits only after a wait (SPEC 20.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decided {
    Moved,
    Waited,
}

/// What a step does once its decision is recorded: report it, or act on the run as decided (a
/// copy, taken under the lock). A report acts on nothing, so a run of a thousand lanes is not
/// copied to say that it waits.
enum Then {
    Report(Box<StepReport>),
    Act(Box<Run>, Pending),
}

/// Do one step of `run_id`.
pub(crate) fn step_once(ctx: &Ctx<'_>, run_id: &str) -> Result<(StepReport, Decided), Refusal> {
    // Phase 1, under the lock: record what finished activities say, then decide.
    let (then, started, decided) = ctx.transact_seeing(|read, state| {
        // The agents of the other runs that are still alive (SPEC 20.9).
        let elsewhere: usize = state
            .runs
            .values()
            .filter(|r| r.id != run_id && !r.status.is_ended())
            .map(|r| agents_alive(ctx, r, true))
            .sum();
        let Some(run) = state.runs.get_mut(run_id) else {
            // Landed and retired (by a concurrent call, since this one chose the run): the run
            // has left the state, and its record says how it ended.
            if let Some(run) = super::record::read(&ctx.paths, run_id)
                .and_then(|r| serde_json::from_value::<Run>(r["run"].clone()).ok())
                .filter(|r| r.status.is_ended())
            {
                // Its end is saved: claims a call killed before releasing them left go now.
                super::records::release_claims_after_save(ctx, &run);
                return Ok((
                    Then::Report(Box::new(ended_report(&run))),
                    None,
                    Decided::Moved,
                ));
            }
            return Err(ctx.refuse(
                "run-not-found",
                format!("no run `{run_id}`"),
                "`iced run list` shows the runs",
            ));
        };
        // The run as read, before this step changed anything.
        let before = read.runs.get(run_id).expect("the copy holds what was read");
        if run.status.is_ended() {
            super::records::release_claims_after_save(ctx, run);
        }
        observe(ctx, run)?;
        check_inputs(ctx, run)?;
        keep_work_window(ctx, run);
        let mut view = decide_view(ctx, run);
        // This run's were just observed: those recorded running are.
        view.agents_alive = elsewhere + agents_alive(ctx, run, false);
        let over = (view.agents_alive > view.pace_agents).then_some(view.agents_alive);
        let newly = match (over, run.overrun) {
            (Some(alive), Some(logged)) => alive > logged,
            (over, _) => over.is_some(),
        };
        // Remember the overrun logged, and forget it once it is over.
        if over.is_none() || newly {
            run.overrun = over;
        }
        if newly {
            emit(
                &ctx.paths,
                run_id,
                Event::CeilingOverrun,
                json!({"alive": view.agents_alive, "ceiling": view.pace_agents, "ruling": run_pace(ctx, run).ruling}),
            );
        }
        let expected = |i: usize, j: usize| ctx.settings.dod[i][j].expected_exit_codes.clone();
        let next = decide_with(run, &view, &expected);
        let decided = if matches!(next, super::decide::Next::Wait { .. }) {
            Decided::Waited
        } else {
            Decided::Moved
        };
        // Quick decisions are applied here, under the same lock.
        let applied = under_lock::apply(ctx, run, &next, &view)?;
        settle(ctx, run)?;
        super::host::end_stranded(ctx, run);
        // Only a step that changed something is an update: asking again (a host polling for its
        // `start_agent`) must write nothing (SPEC 20.2).
        if run != before {
            run.updated_at = crate::clock::now_iso();
        }
        let started = started_step(&applied).map(|(lane, step)| {
            let attempt = run.lane(lane).map_or(0, |l| l.attempt);
            // A step a killed call began (its record was started before this call) is taken up
            // again, not started: the story has one `step_start` per step and attempt (SPEC 21.5).
            let replay = before.lane(lane).is_some_and(|l| {
                l.attempt == attempt
                    && l.steps.iter().any(|r| {
                        r.step.to_string() == step
                            || (step == "validate" && matches!(r.step, StepKey::Validate(_)))
                    })
            });
            (lane.to_owned(), step, attempt, replay)
        });
        // A delivery that landed and retired leaves the state; its record stays (SPEC 23.3).
        // What acts outside the lock gets a copy of the run; a report acts on nothing, and a
        // run of a thousand lanes is not copied to say that it waits.
        let leaves = run.status == RunStatus::Delivered && is_retired(run);
        let then = match applied {
            Pending::Report(report) => Then::Report(report),
            applied => Then::Act(Box::new(run.clone()), applied),
        };
        if leaves {
            state.runs.remove(run_id);
        }
        Ok((then, started, decided))
    })?;
    if let Some((lane, step, attempt, replay)) = started {
        emit(
            &ctx.paths,
            run_id,
            if replay {
                Event::StepReplay
            } else {
                Event::StepStart
            },
            json!({"lane": lane, "step": step, "attempt": attempt}),
        );
    }
    // Phase 2: act outside the lock, when the decision has a side effect.
    let report = match then {
        Then::Report(report) => *report,
        Then::Act(run, next) => outside_lock::act(ctx, &run, next)?,
    };
    if report.action == Action::Blocked {
        blocked(ctx, run_id)?;
    }
    Ok((report, decided))
}

/// The lane and the step a pending move starts, when it starts one (logged as `step_start`).
fn started_step(next: &Pending) -> Option<(&str, String)> {
    let (lane, step) = match next {
        Pending::AddWorktree { lane, .. } => Some((lane, StepKey::Worktree.to_string())),
        Pending::LaunchImplementer { lane, .. } => Some((lane, StepKey::Implement.to_string())),
        Pending::CheckReceipt { lane } => Some((lane, StepKey::Receipt.to_string())),
        Pending::TesterLaunch { lane, .. } => Some((lane, StepKey::TestWrite.to_string())),
        Pending::TesterCheck { lane } => Some((lane, StepKey::TestCheck.to_string())),
        Pending::Deliver { lane } => Some((lane, StepKey::Deliver.to_string())),
        // The stage, not one validator's step: preparing covers several.
        Pending::PrepareValidators { lane, keys } => Some((
            lane,
            if keys.iter().all(|k| *k == StepKey::Refute) {
                StepKey::Refute.to_string()
            } else {
                "validate".to_owned()
            },
        )),
        Pending::Sync { lane, step } => Some((lane, step.to_string())),
        Pending::Plan(crate::run::stage::plan::PlanPending::Decide { lane }) => {
            Some((lane, StepKey::PlanDecide.to_string()))
        }
        Pending::Plan(crate::run::stage::plan::PlanPending::Launch { lane, keys }) => {
            Some((lane, keys[0].0.to_string()))
        }
        Pending::Report(_)
        | Pending::RenewClaims
        | Pending::Plan(_)
        | Pending::LaunchDod { .. }
        | Pending::LaunchValidators { .. }
        | Pending::CheckValidator { .. } => None,
    }?;
    Some((lane.as_str(), step))
}

/// A step done outside the lock blocked its lane: the run is blocked, unless (a project run) its
/// other lanes may still move (SPEC 23.6).
fn blocked(ctx: &Ctx<'_>, run_id: &str) -> Result<(), Refusal> {
    ctx.transact(|state| {
        let Some(run) = state.runs.get_mut(run_id) else {
            return Ok(());
        };
        if !run.status.is_ended() && run.lanes.iter().any(|l| l.stage == Stage::Blocked) {
            run.status = super::decide::waiting_for_a_person();
            settle(ctx, run)?;
        }
        Ok(())
    })
}

/// `step`, logging a refusal as an event of the run it refused.
pub fn step(ctx: &Ctx<'_>, run_id: &str) -> Result<StepReport, Refusal> {
    step_deciding(ctx, run_id).map(|(report, _)| report)
}

/// [`step`], and what `decide` made of it.
pub fn step_deciding(ctx: &Ctx<'_>, run_id: &str) -> Result<(StepReport, Decided), Refusal> {
    logged(ctx, run_id, step_once(ctx, run_id))
        .map(|(report, decided)| (lane_not_run(ctx, run_id, report), decided))
}

/// In a project run, one lane blocking or handed back ends nothing while the run goes on: the
/// report says what happened to the lane and asks to call again (SPEC 23.6). Only the run's own
/// end, or a run every lane of which waits for a person, is final for the caller.
pub(crate) fn lane_not_run(ctx: &Ctx<'_>, run_id: &str, mut report: StepReport) -> StepReport {
    if !matches!(report.action, Action::Blocked | Action::Handback) {
        return report;
    }
    let Ok(state) = State::load(&ctx.paths, ctx.verb) else {
        return report;
    };
    let Some(run) = state.runs.get(run_id) else {
        return report;
    };
    if run.lanes.len() < 2 || run.status != RunStatus::Running {
        return report;
    }
    report.next = crate::run::then::Then::OthersGoOn {
        lane: report.lane.clone().unwrap_or_default(),
        handed_back: report.action != Action::Blocked,
        then: Box::new(report.next.clone()),
    };
    report.action = Action::Advanced;
    report
}

pub(crate) fn logged<T>(
    ctx: &Ctx<'_>,
    run_id: &str,
    result: Result<T, Refusal>,
) -> Result<T, Refusal> {
    if let Err(r) = &result {
        emit(
            &ctx.paths,
            run_id,
            Event::Refusal,
            json!({"step": r.step, "code": r.code}),
        );
    }
    result
}

/// A re-entry whose inputs changed is refused: the brief of the current attempt must still render
/// to the bytes the agent was (or will be) given.
pub(crate) fn check_inputs(ctx: &Ctx<'_>, run: &Run) -> Result<(), Refusal> {
    for lane in &run.lanes {
        // The brief feeds the attempt's work up to its validation; from delivery on the lane
        // works from its own branch, and landing rightly changes the unit in the person's checkout.
        if lane.stage.is_final()
            || matches!(lane.stage, Stage::Deliver | Stage::Land | Stage::Retire)
        {
            continue;
        }
        let Some(record) = lane
            .record(&StepKey::Brief)
            .filter(|r| r.status == StepStatus::Done)
        else {
            continue;
        };
        let Some(worktree) = lane
            .worktree
            .as_deref()
            .map(PathBuf::from)
            .or_else(|| Some(ctx.worktree_path(&lane.id)))
        else {
            continue;
        };
        let text = render_brief(ctx, run, lane, &worktree)?;
        let now = sha256_hex(text.as_bytes());
        if record.inputs.as_deref() != Some(now.as_str()) {
            return Err(ctx.refuse(
                "inputs-changed",
                format!("the brief of `{}` attempt {} no longer renders as it did (the unit, an ancestor, a knowledge file or the definition of done changed under the live run)", lane.id, lane.attempt),
                format!("restore what changed (`git diff` in the repository), or end the run (`iced run abandon {}`) and build again", run.id),
            ));
        }
    }
    Ok(())
}

/// A blocked run takes the status its lanes give it (`decide::run_status`, SPEC 23.6): a project
/// run whose other lanes can move again is running; one whose every lane is final ends as its
/// lanes say (handed back, say, when one lane was handed back and its dependant then blocked),
/// its claims released and its record written.
pub(crate) fn settle(ctx: &Ctx<'_>, run: &mut Run) -> Result<(), Refusal> {
    if run.status != RunStatus::Blocked {
        return Ok(());
    }
    let view = decide_view(ctx, run);
    let status = super::decide::run_status(run, &view, &|i, j| ctx.expected(i, j));
    if run.lanes.iter().all(|l| l.stage.is_final()) {
        if status.is_ended() {
            super::records::end_run(ctx, run, status)?;
        }
    } else if run.lanes.len() > 1 {
        run.status = status;
    }
    Ok(())
}

/// Every lane of the run has landed and been retired.
pub(crate) fn is_retired(run: &Run) -> bool {
    run.lanes
        .iter()
        .all(|l| l.stage == Stage::Discarded || l.retired())
}
