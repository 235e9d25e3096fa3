//! The handover (`iced run handover`): what a fresh driver reads once to continue, as data. The
//! settings in force, each live lane's next move, what is awaited and where, and the hazards, from
//! the state alone.

use super::super::settings::Runner;
use super::super::state::{Run, Stage, State};
use super::{named, next_move, NextMove, RunSummary};
use crate::refusal::Refusal;
use crate::run::Ctx;

pub struct Handover {
    pub in_force: InForce,
    /// The runs handed over: the one named, else every run that has not ended.
    pub runs: Vec<HandoverRun>,
}

/// The settings a driver continues under.
pub struct InForce {
    pub implementer: Role,
    /// `None` without independent validators (the loop's own checks only).
    pub validators: Option<Validators>,
    pub max_attempts: u32,
    /// `land.mode`.
    pub land_mode: crate::run::settings::LandMode,
    pub pace_lanes: u64,
    pub pace_agents: u64,
    /// The dated ruling the pace comes from, when one is in force.
    pub ruling: Option<Ruling>,
}

/// Who plays a role: a configured runner, or an agent the host starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Role {
    Runner { name: String, model: Option<String> },
    Host,
}

pub struct Validators {
    pub role: Role,
    /// `None` is `auto` (picked per unit).
    pub lenses: Option<Vec<String>>,
    pub reviewers: Vec<String>,
}

/// A pace ruling as the settings carry it: when it took effect, and why when it says so in words.
pub struct Ruling {
    pub from: String,
    pub why: Option<String>,
}

pub struct HandoverRun {
    pub summary: RunSummary,
    pub lanes: Vec<HandoverLane>,
    /// No agent starts before this time (a person's `--until`, a rate limit's backoff).
    pub paced_until: Option<String>,
    /// The run's budget, what was charged and what is left (SPEC 20.12); `None` without one.
    pub budget: Option<crate::run::record::Budget>,
}

pub struct HandoverLane {
    pub id: String,
    pub stage: Stage,
    pub attempt: u32,
    /// Attempts it may still start before it blocks (`verify.maxAttempts`, counted since its last
    /// resume).
    pub attempts_left: u32,
    pub next: NextMove,
    /// The ids of its open findings.
    pub open_findings: Vec<String>,
    /// The first line of the reason a blocked lane gives.
    pub blocked: Option<String>,
    /// The first line of the reason a handed-back lane gives (its agent's, or the budget's).
    pub handed_back: Option<String>,
}

fn role(runner: &Option<Runner>, model: &Option<String>) -> Role {
    match runner {
        Some(r) => Role::Runner {
            name: r.name.clone(),
            model: model.clone(),
        },
        None => Role::Host,
    }
}

/// The handover of the run `name` names (from its record once it has left the state: it shows how
/// the run ended), or of every live run.
pub fn handover(ctx: &Ctx<'_>, name: Option<&str>) -> Result<Handover, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    let chosen: Vec<Run> = match name {
        Some(n) if !state.runs.keys().any(|k| k.contains(n)) => {
            vec![super::recorded(ctx, n)?.run]
        }
        Some(n) => {
            let id = named(ctx, n)?;
            state.runs.get(&id).cloned().into_iter().collect()
        }
        None => state
            .runs
            .values()
            .filter(|r| !r.status.is_ended())
            .cloned()
            .collect(),
    };
    // Every lane whole: an ended lane's findings are in its `lane.json` (SPEC 21.2).
    let chosen: Vec<Run> = chosen
        .iter()
        .map(|r| crate::run::ended::whole(&ctx.paths, r))
        .collect();
    let s = &ctx.settings;
    let in_force = InForce {
        implementer: role(&s.implementer, &s.implementer_model),
        validators: s.independent.then(|| Validators {
            role: role(&s.validator, &s.validator_model),
            lenses: s.lenses.clone(),
            reviewers: s.reviewers.clone(),
        }),
        max_attempts: s.max_attempts,
        land_mode: s.land.mode,
        pace_lanes: s.pace.lanes,
        pace_agents: s.pace.agents,
        ruling: s.pace.ruling.as_ref().map(|r| Ruling {
            from: r.from.clone(),
            why: r.reason().map(str::to_owned),
        }),
    };
    let runs = chosen
        .iter()
        .map(|run| HandoverRun {
            summary: RunSummary::of(run),
            budget: crate::run::record::charge(ctx, run),
            paced_until: run
                .next_eligible_at
                .clone()
                .filter(|_| !run.status.is_ended()),
            lanes: run
                .lanes
                .iter()
                .map(|lane| HandoverLane {
                    id: lane.id.clone(),
                    stage: lane.stage,
                    attempt: lane.attempt,
                    attempts_left: s.max_attempts.saturating_sub(lane.attempts_spent()),
                    next: next_move(ctx, run, lane),
                    open_findings: lane
                        .findings
                        .iter()
                        .filter(|f| f.status == "open")
                        .map(|f| f.id.clone())
                        .collect(),
                    blocked: lane
                        .reason
                        .as_ref()
                        .filter(|_| lane.stage == Stage::Blocked)
                        .map(|r| r.lines().next().unwrap_or_default().to_owned()),
                    handed_back: lane
                        .reason
                        .as_ref()
                        .filter(|_| lane.stage == Stage::Handback)
                        .map(|r| r.lines().next().unwrap_or_default().to_owned()),
                })
                .collect(),
        })
        .collect();
    Ok(Handover { in_force, runs })
}
