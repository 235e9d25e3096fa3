//! `iced drain` (SPEC 20.13): the queue's units built one after another, each as its own run that
//! `iced build next` would start, until nothing is eligible, the budget is spent, enough units were
//! built or the time has come. What each run did, and what the queue passed over, as data.
//!
//! Every run is driven by `drive` (its steps the stepper's); this module only chooses the next
//! unit, gives each run what is left of the budget, and says when to stop. It prints nothing.

use super::drive::{self, Admitted};
use super::pace::Flags;
use super::queue::{self, Skipped};
use super::state::{Run, RunStatus, Stage, State};
use super::Ctx;
use crate::refusal::Refusal;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// What bounds a drain besides the queue itself.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    pub budget_usd: Option<f64>,
    pub max_units: Option<usize>,
    pub until: Option<DateTime<Utc>>,
}

/// Why a drain stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stopped {
    /// Nothing in the queue is eligible.
    Empty,
    /// The charge of its runs reached `--budget-usd`.
    Budget,
    /// It built `--max-units` units.
    MaxUnits,
    /// `--until` has come.
    Time,
    /// A refusal after its first run was admitted (`Summary::refused` says which).
    Refused,
}

/// The refusal that stopped a drain, and the unit it was building or admitting.
#[derive(Debug, Clone, Serialize)]
pub struct RefusedAt {
    pub unit: String,
    #[serde(flatten)]
    pub refusal: Refusal,
}

/// One run a drain built, and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Built {
    pub unit: String,
    pub run: String,
    pub status: RunStatus,
    /// Why its lane was handed back, blocked or waits; absent when it delivered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What its agents were charged (SPEC 20.12), unknown costs at the estimate.
    pub charged_usd: f64,
    /// It was a run a killed drain left, taken up again.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
}

/// A drain's summary (SPEC 20.13).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub stopped: Stopped,
    pub units: usize,
    pub charged_usd: f64,
    pub budget_usd: Option<f64>,
    pub delivered: Vec<Built>,
    pub handed_back: Vec<Built>,
    /// Runs that wait on a forge or a person without having ended (a pull request open, a pause).
    pub waiting: Vec<Built>,
    pub skipped: Vec<Skipped>,
    /// Eligible units it did not reach (it stopped for its budget, its count or its time).
    pub queued: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<RefusedAt>,
}

/// What a drain tells as it goes: the unit it takes up next (with why), and each run's end.
pub enum Told<'a> {
    Picked {
        unit: &'a str,
        run: &'a str,
        why: Option<&'a str>,
        resumed: bool,
    },
    Ended(&'a Built),
    /// The remote could not be reached to claim `unit` (SPEC 20.13): tried again at `until`.
    Waiting {
        unit: &'a str,
        why: &'a str,
        until: &'a str,
    },
}

/// Drain the queue within `limits`. `drive_run` drives one admitted run until only someone else
/// can move it (the command line's `drive::to_end` with its waiting); `told` hears each unit.
pub fn drain(
    ctx: &mut Ctx<'_>,
    limits: &Limits,
    session: Option<&str>,
    mut told: impl FnMut(Told<'_>),
    mut drive_run: impl FnMut(&Ctx<'_>, &str) -> Result<(), Refusal>,
) -> Result<Summary, Refusal> {
    // A host-driven run waits for its host at every agent: a drain would only start them all.
    if ctx.driver() == super::state::Driver::Host {
        return Err(ctx.refuse(
            "drain-needs-runner",
            "a drain builds one unit after another itself, but no implementer runner is configured: each run would wait for a host to start its agents",
            "name a runner in `roles.implementer.runner` of `.iced/config.json` (then `iced trust`), or have the host build the units one by one with `iced build next`",
        ));
    }
    // The budget one run may spend by the config, before this drain's flags (SPEC 20.13).
    let per_run = ctx.settings.pace.budget_usd;
    let mut summary = Summary {
        stopped: Stopped::Empty,
        units: 0,
        charged_usd: 0.0,
        budget_usd: limits.budget_usd,
        delivered: Vec::new(),
        handed_back: Vec::new(),
        waiting: Vec::new(),
        skipped: Vec::new(),
        queued: Vec::new(),
        refused: None,
    };
    // A unit is built once per drain, whatever its run left it as.
    let mut built: Vec<String> = Vec::new();
    // Units someone else has (SPEC 24.9.1): claimed on the remote or by another checkout after
    // the survey, or landed on the remote's target; passed over for the rest of the drain.
    let mut passed: Vec<Skipped> = Vec::new();
    // Admits in a row that could not reach the remote: the wait before the next doubles.
    let mut outages: u32 = 0;
    loop {
        if limits.until.is_some_and(|t| crate::clock::real_now() >= t) {
            summary.stopped = Stopped::Time;
            break;
        }
        if limits.max_units.is_some_and(|n| summary.units >= n) {
            summary.stopped = Stopped::MaxUnits;
            break;
        }
        let left = limits
            .budget_usd
            .map(|b| round_usd(b - summary.charged_usd));
        if left.is_some_and(|l| l <= 0.0) {
            summary.stopped = Stopped::Budget;
            break;
        }
        // First a run a killed drain left running; else the queue's readiest unit.
        let state = State::load(&ctx.paths, ctx.verb)?;
        let left_running = state
            .runs
            .values()
            .filter(|r| r.status == RunStatus::Running && picked_by(r) == Some("drain"))
            .filter(|r| !built.contains(&r.unit))
            .min_by(|a, b| a.created_at.cmp(&b.created_at))
            .map(|r| r.unit.clone());
        let (unit, picked) = match left_running {
            Some(unit) => (unit, None),
            None => {
                let mut survey = queue::survey_in(ctx, &state)?;
                // A remote the survey cannot ask is met again by the admit, whose refusal the
                // drain reports with what it built so far.
                let _ = queue::passed_over_on_remote(ctx, &state, &mut survey);
                survey.eligible.retain(|r| {
                    !built.contains(&r.unit) && !passed.iter().any(|p| p.unit == r.unit)
                });
                summary.skipped = survey.skipped.clone();
                match queue::picked("drain", &survey) {
                    Some(p) => (p.unit().to_owned(), Some(p)),
                    None => {
                        summary.stopped = Stopped::Empty;
                        break;
                    }
                }
            }
        };
        let resumed = picked.is_none();
        let flags = Flags {
            budget_usd: match (per_run, left) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            ..Flags::default()
        };
        // A run a killed drain left goes on at the pace in force now, with what is left.
        let run = match drive::start(ctx, &unit, session, &flags, resumed, picked.as_ref()) {
            Ok(Admitted { run, .. }) => run,
            // Another machine (or checkout) has it: the next unit, not a stop.
            Err(refusal) if !resumed && someone_else_has_it(&refusal) => {
                passed.push(Skipped {
                    unit,
                    code: refusal.code.to_owned(),
                    reason: refusal.reason,
                });
                continue;
            }
            // Before the first run, the refusal is the drain's own (the repository's checks).
            Err(refusal) if summary.units == 0 => return Err(refusal),
            // An outage after that says nothing of the queue: waited out, as a run waits out
            // one (SPEC 20.10), then the queue is surveyed again.
            Err(refusal) if !resumed && refusal.code == "claim-remote-unreachable" => {
                let wait = backoff(ctx, outages, limits.until);
                outages += 1;
                let until = (crate::clock::real_now() + wait)
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                told(Told::Waiting {
                    unit: &unit,
                    why: &refusal.reason,
                    until: &until,
                });
                std::thread::sleep(wait.to_std().unwrap_or_default());
                continue;
            }
            Err(refusal) => return Ok(refused(summary, &built, unit, refusal)),
        };
        outages = 0;
        built.push(unit.clone());
        summary.units += 1;
        told(Told::Picked {
            unit: &unit,
            run: &run,
            why: picked.as_ref().map(|p| p.why.as_str()),
            resumed,
        });
        let ended = drive_run(ctx, &run).and_then(|()| run_as_it_stands(ctx, &run));
        let ended = match ended {
            Ok(Some(ended)) => ended,
            Ok(None) => continue,
            Err(refusal) => return Ok(refused(summary, &built, unit, refusal)),
        };
        let charged = super::record::charged_usd(ctx, &ended);
        summary.charged_usd = round_usd(summary.charged_usd + charged);
        let entry = Built {
            unit,
            run: run.clone(),
            status: ended.status,
            reason: (ended.status != RunStatus::Delivered).then(|| reason_of(&ended)),
            charged_usd: charged,
            resumed,
        };
        told(Told::Ended(&entry));
        match ended.status {
            RunStatus::Delivered => summary.delivered.push(entry),
            RunStatus::Handback | RunStatus::Blocked | RunStatus::Abandoned => {
                summary.handed_back.push(entry)
            }
            RunStatus::Running | RunStatus::Paused => summary.waiting.push(entry),
        }
        // Between two units: every run so far has ended or waits, recorded in the state.
        crate::failpoint::hit("drain-between-units");
    }
    if summary.stopped != Stopped::Empty {
        // Stopped with work left: what the queue holds now, passed over or not reached.
        let mut survey = queue::survey(ctx)?;
        survey
            .eligible
            .retain(|r| !built.contains(&r.unit) && !passed.iter().any(|p| p.unit == r.unit));
        summary.queued = survey.eligible.into_iter().map(|r| r.unit).collect();
        summary.skipped = survey.skipped;
    }
    // Only the units still in the queue are worth naming as skipped.
    summary.skipped.retain(|s| !built.contains(&s.unit));
    for p in passed {
        summary.skipped.retain(|s| s.unit != p.unit);
        summary.skipped.push(p);
    }
    Ok(summary)
}

/// How long a drain waits after `outages` admits in a row could not reach the remote: the pace's
/// backoff doubled for each, capped (SPEC 20.10), and never past `--until`.
fn backoff(ctx: &Ctx<'_>, outages: u32, until: Option<DateTime<Utc>>) -> chrono::Duration {
    let ms = super::backoff::delay_ms(&ctx.settings.pace, outages).max(1.0);
    let wait = chrono::Duration::milliseconds(ms as i64);
    match until {
        Some(t) => wait
            .min(t - crate::clock::real_now())
            .max(chrono::Duration::zero()),
        None => wait,
    }
}

/// A refusal of a unit's admit that says someone else has the unit (SPEC 20.13, 24.9.1).
fn someone_else_has_it(refusal: &Refusal) -> bool {
    matches!(refusal.code, "unit-claimed" | "unit-done-on-remote")
}

/// The summary of a drain a refusal stopped: what it did so far, and the refusal.
fn refused(mut summary: Summary, built: &[String], unit: String, refusal: Refusal) -> Summary {
    summary.stopped = Stopped::Refused;
    summary
        .skipped
        .retain(|s| !built.contains(&s.unit) && s.unit != unit);
    summary.refused = Some(RefusedAt { unit, refusal });
    summary
}

/// Who chose a run's unit: `next`, `drain`, or none (`build <id>`).
fn picked_by(run: &Run) -> Option<&str> {
    run.picked.as_ref().map(|p| p.by.as_str())
}

/// The run in the state, else (landed and retired) as its record keeps it.
fn run_as_it_stands(ctx: &Ctx<'_>, run: &str) -> Result<Option<Run>, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    Ok(state.runs.get(run).cloned().or_else(|| {
        super::record::read(&ctx.paths, run)
            .and_then(|r| serde_json::from_value::<Run>(r["run"].clone()).ok())
    }))
}

/// Why a run did not deliver: its first lane handed back or blocked says, else how it stands.
fn reason_of(run: &Run) -> String {
    run.lanes
        .iter()
        .find(|l| matches!(l.stage, Stage::Handback | Stage::Blocked) && l.reason.is_some())
        .and_then(|l| l.reason.clone())
        .unwrap_or_else(|| format!("the run is {}", run.status.as_str()))
}

fn round_usd(x: f64) -> f64 {
    (x * 1e6).round() / 1e6 + 0.0
}
