//! Driving a run for the command line: what `iced build`, `iced implement` and `iced run resume`
//! do around the stepper. Starting or resuming a run, stepping it until only someone else can move
//! it, the run a host's call is about, and how a run ended.
//!
//! Every step is the stepper's (`stepper::step`); this module only strings steps together and says
//! when to stop. It prints nothing: whoever drives is handed each report to tell.

use super::control;
use super::host::HostAgent;
use super::pace::Flags;
use super::settings::LandMode;
use super::stage::admit;
use super::state::{Run, RunStatus, State};
use super::stepper::{self, Decided};
use super::{Ctx, StepReport};
use crate::refusal::Refusal;
use crate::run::reply::{Action, HostAnswer};
use crate::run::then::Then;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::ScopedJoinHandle;

/// A run `iced build` drives: the one it admitted, or the one it resumed.
pub struct Admitted {
    pub run: String,
    /// The unit's id (`--auto-plan "<line>"` made it).
    pub unit: String,
    pub resumed: bool,
}

/// Admit `unit` (or find the run already building it) under the pace of `flags`. A person typing
/// `build` again on a blocked or paused run means: go on, on the pace it recorded unless `repace`
/// (SPEC 20.11); a blocked lane gets a fresh attempt, as `run resume` gives it.
pub fn start(
    ctx: &mut Ctx<'_>,
    unit: &str,
    session: Option<&str>,
    flags: &Flags,
    repace: bool,
    picked: Option<&super::picked::Picked>,
) -> Result<Admitted, Refusal> {
    // A run this call went on with before (a drain's) left its rules in force.
    ctx.checkout_rules();
    // Before admit writes anything or a step starts anything (SPEC 24.10).
    crate::trust::require(&ctx.repo.root, &ctx.config, &ctx.settings, ctx.verb)?;
    crate::run::confinement::require(&ctx.settings, ctx.verb)?;
    ctx.set_pace_flags(flags)?;
    let (run, resumed) = admit::admit(ctx, unit, session, picked, false)?;
    if resumed {
        // The run goes on under the rules it was admitted with (SPEC 24.16).
        let rules = State::load(&ctx.paths, ctx.verb)?
            .runs
            .get(&run)
            .and_then(|r| r.rules.clone());
        super::rules::adopt(ctx, &run, rules.as_deref())?;
        ctx.set_pace_flags(flags)?;
        control::check_pace(ctx, &run, repace)?;
        let state = State::load(&ctx.paths, ctx.verb)?;
        if state
            .runs
            .get(&run)
            .is_some_and(|r| matches!(r.status, RunStatus::Blocked | RunStatus::Paused))
        {
            control::set_paused(ctx, &run, false)?;
        }
    }
    Ok(Admitted {
        run,
        unit: unit.to_owned(),
        resumed,
    })
}

/// `build --auto-plan` (SPEC 20.16): plan the unit `what` names, or a new draft made from the
/// line `what` is (it holds whitespace), in a run that starts at stage `plan`; a live run of the
/// unit is resumed as `start` resumes it.
pub fn start_planning(
    ctx: &mut Ctx<'_>,
    what: &str,
    session: Option<&str>,
    flags: &Flags,
) -> Result<Admitted, Refusal> {
    crate::trust::require(&ctx.repo.root, &ctx.config, &ctx.settings, ctx.verb)?;
    crate::run::confinement::require(&ctx.settings, ctx.verb)?;
    ctx.set_pace_flags(flags)?;
    if crate::git::head(&ctx.repo.root).is_none() {
        return Err(ctx.refuse(
            "not-a-git-repo",
            format!("`{}` is not a git work tree with a commit at HEAD", ctx.repo.root.display()),
            "the loop works on branches and worktrees: `git init`, commit the repository, then build again",
        ));
    }
    if ctx.settings.planner.is_none() {
        return Err(ctx.refuse(
            "planner-missing",
            "`--auto-plan` needs a planner, and `roles.planner.runner` names none",
            "name a runner in `roles.planner.runner` of `.iced/config.json` (and `iced trust` it); planning is process-driven only",
        ));
    }
    let id = if what.split_whitespace().nth(1).is_some() {
        let request = crate::record::NewUnit {
            line: what,
            kind: None,
            parent: None,
        };
        crate::record::new_unit(ctx.repo, request, ctx.verb)?.id
    } else {
        what.to_owned()
    };
    let (run, resumed) = admit::admit(ctx, &id, session, None, true)?;
    Ok(Admitted {
        run,
        unit: id,
        resumed,
    })
}

/// Step `run` until nothing more happens without someone else (or, with `no_wait`, until it waits
/// on something), handing each report to `told` as it comes, and calling `wait` (which returns
/// once the run may have moved on: `cli::wait`) between steps while it waits. A step that did
/// something (a launch answers `waiting` too) is followed by the next at once, since another
/// lane's move may be ready; only a step `decide` found nothing to do in waits (SPEC 20.1).
/// In a run of several lanes, helper threads step beside it while moves are ready (`helpers`);
/// their reports reach `told` too, on this thread. Returns the last report.
pub fn to_end(
    ctx: &Ctx<'_>,
    run: &str,
    no_wait: bool,
    mut told: impl FnMut(&StepReport),
    mut wait: impl FnMut(),
) -> Result<StepReport, Refusal> {
    let most = if no_wait { 0 } else { helpers(ctx, run) };
    let stop = AtomicBool::new(false);
    let (send, heard) = mpsc::channel::<Heard>();
    std::thread::scope(|scope| {
        let mut threads: Vec<ScopedJoinHandle<'_, ()>> = Vec::new();
        // A helper's refusal ends the build with its reason (issue 36: it was dropped, its step
        // stayed `started` by this live process, and the driver waited on it forever).
        let mut watchdog = Watchdog::default();
        let result = loop {
            if let Some(refusal) = drain(&heard, &mut told) {
                break Err(refusal);
            }
            let (report, decided) = match stepper::step_deciding(ctx, run) {
                Ok(stepped) => stepped,
                Err(refusal) => break Err(refusal),
            };
            told(&report);
            if let Some(stalled) = watchdog.watch(ctx, &report) {
                told(&stalled);
            }
            let waiting = report.action == Action::Waiting;
            if ends_driving(ctx, &report) || (no_wait && waiting) {
                break Ok(report);
            }
            // A helper that panicked did not finish its step: the build ends with its panic
            // rather than wait on that step.
            for ended in extract_finished(&mut threads) {
                if let Err(panic) = ended.join() {
                    std::panic::resume_unwind(panic);
                }
            }
            if decided == Decided::Moved && threads.len() < most {
                let (stop, send) = (&stop, send.clone());
                let spawned = std::thread::Builder::new()
                    .name(HELPER.into())
                    .spawn_scoped(scope, move || help(ctx, run, stop, &send));
                if let Ok(thread) = spawned {
                    threads.push(thread);
                }
            }
            if waiting && decided == Decided::Waited {
                if let Some(refusal) = drain(&heard, &mut told) {
                    break Err(refusal);
                }
                wait();
            }
        };
        // The helpers finish the step they are doing, and go.
        stop.store(true, Ordering::SeqCst);
        for thread in threads {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
        match (drain(&heard, &mut told), result) {
            (Some(refusal), Ok(_)) => Err(refusal),
            (_, result) => result,
        }
    })
}

/// The build's watchdog (SPEC 20.1): a step another call or thread is doing, which the driver
/// waits on, is said once it has made no progress for longer than its bound (an event and a
/// line), never waited on silently. Progress is the driver's own clock: the same step, lane and
/// attempt waited on since it first was.
#[derive(Default)]
struct Watchdog {
    since: std::collections::HashMap<(String, String, u32), std::time::Instant>,
    said: std::collections::HashSet<(String, String, u32)>,
}

impl Watchdog {
    /// After the driver's step `report`: the line to tell, once a step it waits on has stalled.
    fn watch(&mut self, ctx: &Ctx<'_>, report: &StepReport) -> Option<StepReport> {
        use super::decide::Waiting;
        use super::keys::StepKey;
        let step = match &report.next {
            Then::Wait { why } => match why {
                Waiting::DoingStep { step } => Some(step.clone()),
                Waiting::MakingWorktree => Some(StepKey::Worktree),
                Waiting::Delivering => Some(StepKey::Deliver),
                Waiting::CheckingReceipt => Some(StepKey::Receipt),
                _ => None,
            },
            _ => None,
        };
        let Some(step) = step else {
            self.since.clear();
            return None;
        };
        let (run, lane) = (report.run.clone()?, report.lane.clone()?);
        let key = (
            lane.clone(),
            step.to_string(),
            report.attempt.unwrap_or_default(),
        );
        let since = *self
            .since
            .entry(key.clone())
            .or_insert_with(std::time::Instant::now);
        let bound = stall_bound();
        if since.elapsed() < bound || !self.said.insert(key.clone()) {
            return None;
        }
        let secs = bound.as_secs();
        super::events::emit(
            &ctx.paths,
            &run,
            super::events::Event::StepStalled,
            serde_json::json!({"lane": lane, "step": step, "attempt": key.2, "secs": secs}),
        );
        Some(StepReport {
            next: Then::Stalled { step, secs },
            ..report.clone()
        })
    }
}

/// How long a step the loop does itself (its git and its files, never an agent: those end at
/// their timeout) may make no progress before the watchdog says so: 300 s, or
/// `ICED_STALL_SEC`.
fn stall_bound() -> std::time::Duration {
    let secs = std::env::var("ICED_STALL_SEC")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    std::time::Duration::from_secs(secs)
}

/// What a helper thread hands the driver: a step that did something, or the refusal that ended
/// it.
enum Heard {
    Report(Box<StepReport>),
    Refused(Refusal),
}

/// Hand `told` every report the helpers sent; the first refusal one sent, if any.
fn drain(heard: &mpsc::Receiver<Heard>, told: &mut dyn FnMut(&StepReport)) -> Option<Refusal> {
    let mut refused = None;
    for heard in heard.try_iter() {
        match heard {
            Heard::Report(report) => told(&report),
            Heard::Refused(refusal) => {
                refused.get_or_insert(refusal);
            }
        }
    }
    refused
}

/// The name of a helper thread (SPEC 20.1).
pub const HELPER: &str = "iced-helper";

/// The threads of `threads` that have ended, taken out of it.
fn extract_finished<'s>(
    threads: &mut Vec<ScopedJoinHandle<'s, ()>>,
) -> Vec<ScopedJoinHandle<'s, ()>> {
    let mut ended = Vec::new();
    let mut i = 0;
    while i < threads.len() {
        if threads[i].is_finished() {
            ended.push(threads.swap_remove(i));
        } else {
            i += 1;
        }
    }
    ended
}

/// After `report`, no driver of the run steps on: the run ended, or waits on a forge or a person.
fn ends_driving(ctx: &Ctx<'_>, report: &StepReport) -> bool {
    report.is_final() || awaits_someone_else(ctx.settings.land.mode, report)
}

/// How many helper threads may step `run` beside its driver (SPEC 20.1).
fn helpers(ctx: &Ctx<'_>, run: &str) -> usize {
    let lanes = State::load(&ctx.paths, ctx.verb)
        .ok()
        .and_then(|s| s.runs.get(run).map(|r| r.lanes.len()))
        .unwrap_or(1);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    helper_count(ctx.settings.drivers, cpus, ctx.settings.pace.lanes, lanes)
}

/// `build.drivers` (the machine's `cpus`, at most 4, when unset) less the driver, never more than
/// the lanes at once (`pace_lanes`) less one; none for a run of one lane.
fn helper_count(drivers: Option<usize>, cpus: usize, pace_lanes: u64, lanes: usize) -> usize {
    if lanes < 2 {
        return 0;
    }
    let drivers = drivers.unwrap_or(cpus.min(4));
    let at_once = usize::try_from(pace_lanes).unwrap_or(usize::MAX);
    drivers.min(at_once).min(lanes).saturating_sub(1)
}

/// A helper thread (SPEC 20.1): steps `run` with a context of its own, handing on every step that
/// did something, until a step finds nothing to do, the run ends or waits on someone else, a step
/// is refused (handed to the driver, which ends the build with it), or the driver stops.
fn help(ctx: &Ctx<'_>, run: &str, stop: &AtomicBool, send: &mpsc::Sender<Heard>) {
    let ctx = ctx.fork();
    while !stop.load(Ordering::SeqCst) {
        let (report, decided) = match stepper::step_deciding(&ctx, run) {
            Ok(stepped) => stepped,
            Err(refusal) => {
                let _ = send.send(Heard::Refused(refusal));
                return;
            }
        };
        let done = decided == Decided::Waited || ends_driving(&ctx, &report);
        // A wait says nothing the driver's own steps do not.
        if decided == Decided::Moved && send.send(Heard::Report(Box::new(report))).is_err() {
            return;
        }
        if done {
            return;
        }
    }
}

/// `--until-host` (SPEC 20.2): after `first` (a step or a receipt of `run`), step on, each step
/// its own keyed, recorded step, until the answer needs the host (`start_agent`, an end, a pause)
/// or the run only waits. While it waits on the loop's own activities (no agent it handed to the
/// host is alive, nothing only a forge or a person moves on), `wait` is asked to wait; it returns
/// `false` once its time is up, and the waiting answer is the last.
pub fn until_host(
    ctx: &Ctx<'_>,
    run: &str,
    first: StepReport,
    mut wait: impl FnMut(&str) -> bool,
) -> Result<StepReport, Refusal> {
    let mut report = first;
    loop {
        match report.action {
            Action::Advanced => {}
            Action::Waiting => {
                if awaits_someone_else(ctx.settings.land.mode, &report)
                    || host_agent_alive(ctx, run)?
                    || !wait(run)
                {
                    return Ok(report);
                }
            }
            _ => return Ok(report),
        }
        report = stepper::step(ctx, run)?;
    }
}

/// The answer a host that asked `--until-host` is given: a `start_agent` of a run whose briefs say
/// the rest (layout 3 on) is made small (`reply::small_start`); older runs answer as they did.
pub fn for_host(ctx: &Ctx<'_>, report: StepReport) -> Result<HostAnswer, Refusal> {
    let Some(run) = report.run.as_deref() else {
        return Ok(HostAnswer::Report(report));
    };
    let state = State::load(&ctx.paths, ctx.verb)?;
    let small = state.runs.get(run).is_some_and(|r| r.brief_layout >= 3);
    Ok(if small {
        super::reply::small_start(report, &ctx.repo.root)
    } else {
        HostAnswer::Report(report)
    })
}

/// An agent `run` handed to the host is alive: its receipt is the host's to hand in, so waiting
/// for it here would only hold the host's turn.
fn host_agent_alive(ctx: &Ctx<'_>, run: &str) -> Result<bool, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    Ok(state
        .runs
        .get(run)
        .is_some_and(|r| super::host::alive(r) > 0))
}

/// A pull request waiting for the forge is not something a driver polls for: cron or a host
/// stepping the run later retires the lane once it has landed. Nor is a landed lane whose landing
/// is not (or no longer) in the target: only a person changes that.
/// A wait on another call of the loop doing a step (a second `iced build`, cron) is not one: that
/// call ends soon, and this driver goes on after it (issue 11: it never returns early for it).
fn awaits_someone_else(land_mode: LandMode, report: &StepReport) -> bool {
    let stage = report.stage.as_deref();
    let on_another_call = matches!(&report.next, Then::Wait { why } if why.on_another_call());
    report.action == Action::Waiting
        && !on_another_call
        && (land_mode == LandMode::Pr && matches!(stage, Some("land" | "retire"))
            || stage == Some("retire"))
}

/// How `run` stands now: its status in the state, else (landed and retired, it has left the
/// state) the status its record gives; `None` when neither has it.
pub fn status(ctx: &Ctx<'_>, run: &str) -> Result<Option<RunStatus>, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    Ok(state.runs.get(run).map(|r| r.status).or_else(|| {
        super::record::read(&ctx.paths, run)
            .and_then(|r| serde_json::from_value::<RunStatus>(r["run"]["status"].clone()).ok())
    }))
}

/// `implement step`: one step of the live run (or the one named); none without a live run.
/// Returns the run stepped, with the report.
pub fn step_live(
    ctx: &mut Ctx<'_>,
    run: Option<&str>,
) -> Result<(Option<String>, StepReport), Refusal> {
    let picked = match control::pick_run_rules(ctx, run) {
        // A host whose call died as its run ended names that run, which may since have landed
        // and left the state for its record: the step answers how it ended.
        Err(e) if e.code == "run-not-found" && run.is_some_and(|r| left_the_state(ctx, r)) => {
            run.map(|r| (r.to_owned(), None))
        }
        picked => picked?,
    };
    match picked {
        None => {
            let last = match super::view::latest_run(ctx)? {
                Some(run) => status(ctx, &run)?.map(|s| (run, s)),
                None => None,
            };
            let report = StepReport {
                next: Then::NoLiveRun { last },
                ..StepReport::nothing()
            };
            Ok((None, report))
        }
        Some((run, rules)) => {
            under_rules(ctx, &run, rules.as_deref())?;
            crate::run::confinement::require(&ctx.settings, ctx.verb)?;
            let report = stepper::step(ctx, &run)?;
            Ok((Some(run), report))
        }
    }
}

/// Before a step of `run` starts anything: the rules it was admitted with in force (SPEC 24.16),
/// trusted then; a run an older iced admitted reads the checkout's config, whose trust is asked
/// now (SPEC 24.10).
fn under_rules(ctx: &mut Ctx<'_>, run: &str, rules: Option<&str>) -> Result<(), Refusal> {
    match rules {
        Some(_) => super::rules::adopt(ctx, run, rules),
        None => crate::trust::require(&ctx.repo.root, &ctx.config, &ctx.settings, ctx.verb),
    }
}

/// Whether `run` (its full id) has left the state for its record, ended.
fn left_the_state(ctx: &Ctx<'_>, run: &str) -> bool {
    // A run's id names its folder: nothing else is looked up.
    let an_id =
        run.starts_with("run-") && run.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    an_id && status(ctx, run).is_ok_and(|s| s.is_some_and(|s| s.is_ended()))
}

/// `implement receipt`: hand in the implementer's report at `path` for the live run (or the one
/// named). Returns the run, with the report.
pub fn receipt(
    ctx: &mut Ctx<'_>,
    run: Option<&str>,
    path: &Path,
    said: &HostAgent,
) -> Result<(String, StepReport), Refusal> {
    let (run, rules) = control::pick_run_rules(ctx, run)?.ok_or_else(|| {
        Refusal::new(
            ctx.verb,
            "no-live-run",
            "no live run is waiting for a receipt",
            "start one with `iced build <id>`",
        )
    })?;
    under_rules(ctx, &run, rules.as_deref())?;
    let report = control::submit_receipt(ctx, &run, path, said)?;
    Ok((run, report))
}

/// `run resume`: on the pace in force now when `repace`, else on the one the run recorded, which
/// must still hold (SPEC 20.11).
pub fn resume(ctx: &mut Ctx<'_>, run: &str, flags: &Flags, repace: bool) -> Result<Run, Refusal> {
    ctx.set_pace_flags(flags)?;
    control::check_pace(ctx, run, repace)?;
    control::set_paused(ctx, run, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(action: Action, stage: &str) -> StepReport {
        StepReport {
            action,
            stage: Some(stage.to_owned()),
            ..StepReport::nothing()
        }
    }

    /// A run of several lanes gets helpers up to `build.drivers` (the CPUs, at most 4, unset),
    /// never more threads than lanes at once, and a run of one lane none.
    #[test]
    fn helpers_are_bounded_by_drivers_lanes_at_once_and_lanes() {
        assert_eq!(helper_count(None, 2, 8, 100), 1);
        assert_eq!(helper_count(None, 16, 8, 100), 3);
        assert_eq!(helper_count(None, 1, 8, 100), 0);
        assert_eq!(helper_count(Some(1), 16, 8, 100), 0);
        assert_eq!(helper_count(Some(8), 2, 8, 100), 7);
        assert_eq!(helper_count(Some(8), 2, 3, 100), 2);
        assert_eq!(helper_count(Some(8), 2, 8, 2), 1);
        assert_eq!(helper_count(Some(8), 16, 8, 1), 0);
        assert_eq!(helper_count(None, 4, 0, 10), 0);
    }

    /// `iced build` stops waiting where only a forge or a person moves the lane on, and nowhere
    /// else: every stage a lane waits in, under each landing mode.
    #[test]
    fn a_driver_stops_waiting_only_for_a_forge_or_a_person() {
        let stages = [
            "implement",
            "validate",
            "refute",
            "deliver",
            "land",
            "retire",
        ];
        for mode in [LandMode::None, LandMode::Merge, LandMode::Pr] {
            for stage in stages {
                let expected = stage == "retire" || mode == LandMode::Pr && stage == "land";
                assert_eq!(
                    awaits_someone_else(mode, &report(Action::Waiting, stage)),
                    expected,
                    "{mode} {stage}"
                );
                // A step that did something is never a wait.
                assert!(!awaits_someone_else(mode, &report(Action::Advanced, stage)));
                // Nor is another call doing the step: the driver waits that out.
                let mut busy = report(Action::Waiting, stage);
                busy.next = Then::Wait {
                    why: crate::run::decide::Waiting::DoingStep {
                        step: crate::run::keys::StepKey::Retire,
                    },
                };
                assert!(!awaits_someone_else(mode, &busy), "{mode} {stage}");
            }
        }
    }
}
