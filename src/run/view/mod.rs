//! What a person or a program asks about runs, as values: the runs in the state, one run (live, or
//! from its record once it has left the state), each lane's next move, the agents and their cost,
//! the handover, what retiring did. The command line words them; nothing here is a sentence.
//!
//! Reads the state and the run records and writes nothing: it never takes a step, never changes a
//! run (`control` and the stepper do), and never decides a move (`decide` does; this only reports it).

mod agent;
mod handover;
mod next;
mod timeline;

pub use agent::{Agent, HostEnd, RunnerEnd, Who};
pub use handover::{
    handover, Handover, HandoverLane, HandoverRun, InForce, Role, Ruling, Validators,
};
pub use next::{next_move, NextMove, Release};
pub use timeline::{
    timeline, AgentFacts, Bar, BarOutcome, FindingFate, LaneFindings, Row, RowKind, Timeline,
};

/// What `run retire` did, as `control::retire_runs` reports it.
pub use super::control::{LaneRetirement, Retirement};

use super::control;
use super::keys::StepKey;
use super::outcome::LandOutcome;
use super::record::{self, AgentEntry, Cost, RunRecord};
use super::reply::focus_lane;
use super::state::{Driver, Run, RunStatus, Stage, State, StepStatus};
use super::Ctx;
use crate::refusal::Refusal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One run in a line: `run list`, and the run a verb that changed it prints.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub id: String,
    pub unit: String,
    pub status: RunStatus,
    pub driver: Driver,
    /// The stage and attempt of the lane the run is about ([`crate::run::reply::focus_lane`]).
    pub stage: Stage,
    pub attempt: u32,
    pub created_at: String,
    pub updated_at: String,
    pub reason: Option<String>,
    /// Every lane, for a project run (more than one lane).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lanes: Option<Vec<LaneSummary>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LaneSummary {
    pub id: String,
    pub stage: Stage,
    pub attempt: u32,
}

impl RunSummary {
    pub fn of(run: &Run) -> RunSummary {
        let lane = focus_lane(run);
        RunSummary {
            id: run.id.clone(),
            unit: run.unit.clone(),
            status: run.status,
            driver: run.driver,
            stage: lane.stage,
            attempt: lane.attempt,
            created_at: run.created_at.clone(),
            updated_at: run.updated_at.clone(),
            reason: lane.reason.clone(),
            lanes: (run.lanes.len() > 1).then(|| {
                run.lanes
                    .iter()
                    .map(|l| LaneSummary {
                        id: l.id.clone(),
                        stage: l.stage,
                        attempt: l.attempt,
                    })
                    .collect()
            }),
        }
    }
}

/// Every run in the state, in the order of their ids.
pub fn list(ctx: &Ctx<'_>) -> Result<Vec<RunSummary>, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    Ok(state.runs.values().map(RunSummary::of).collect())
}

/// The run in the state that `name` names: its full id, or a unique part of it.
pub fn named(ctx: &Ctx<'_>, name: &str) -> Result<String, Refusal> {
    // `pick_run` answers a name with a run or a refusal, never with none.
    control::pick_run(ctx, Some(name))?.ok_or_else(|| {
        Refusal::new(
            ctx.verb,
            "run-not-found",
            format!("no run `{name}`"),
            "`iced run list` shows the runs",
        )
    })
}

/// The run a verb means when none is named: the one live run in the state; with none live, the
/// latest run there or, none there, the latest that left it for its record. Several live runs are
/// ambiguous; no run at all is not found.
/// The latest run of the repository, in the state or (landed and retired, it has left the state)
/// by its record. Run ids begin with their start time (`run-YYYYMMDDTHHMMSS-...`): the greatest
/// is the latest.
pub fn latest_run(ctx: &Ctx<'_>) -> Result<Option<String>, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    let mut folders: Vec<String> = std::fs::read_dir(&ctx.paths.dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|id| id.starts_with("run-"))
        .collect();
    // Latest first: only records that could be the latest are read (`implement step` with no
    // live run asks this on every call cron makes).
    folders.sort_unstable_by(|a, b| b.cmp(a));
    let in_state = state.runs.keys().max();
    let recorded = folders
        .into_iter()
        .take_while(|id| in_state.is_none_or(|s| id > s))
        .find(|id| record::read(&ctx.paths, id).is_some());
    Ok(in_state.cloned().max(recorded))
}

pub fn default_run(ctx: &Ctx<'_>) -> Result<String, Refusal> {
    if let Some(live) = control::pick_run(ctx, None)? {
        return Ok(live);
    }
    latest_run(ctx)?.ok_or_else(|| {
        Refusal::new(
            ctx.verb,
            "run-not-found",
            "this repository has no run yet",
            "`iced build <id>` starts one",
        )
    })
}

/// `run show`: a run in the state, or the record of one that has left it.
pub enum Shown {
    Live(Box<LiveRun>),
    Recorded(Box<RecordedRun>),
}

/// A run as the state holds it, with each lane's next move and what its agents cost.
pub struct LiveRun {
    pub run: Run,
    /// One per lane of `run`, in the same order.
    pub next: Vec<NextMove>,
    /// Every agent the run launched or handed out (the record's `agents`).
    pub agents: Vec<AgentEntry>,
    pub cost: Cost,
    /// What the run charged against its budget, when it has one (SPEC 20.12).
    pub budget: Option<record::Budget>,
}

impl LiveRun {
    /// The agents, read for a person.
    pub fn agent_views(&self) -> Vec<Agent> {
        self.agents.iter().map(Agent::of).collect()
    }
}

/// A run that landed and retired, from the record written when it left the state.
pub struct RecordedRun {
    /// The record as written: what `run show --json` prints.
    pub record: Value,
    pub run: Run,
    /// One per lane of `run`, in the same order: where its work went.
    pub went: Vec<Option<WorkWent>>,
    /// The agents and their cost, when the record has them (records of older releases do not).
    pub agents: Option<Vec<Agent>>,
    pub cost: Cost,
    pub budget: Option<record::Budget>,
}

/// Where a finished lane's work went.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkWent {
    /// The pull request that carries it.
    PullRequest(String),
    /// The commit that landed it in the target.
    Landed(String),
}

/// `run show <name>`: the run in the state when a run's id there holds `name`, else the record of
/// a run that has left the state whose id holds it.
pub fn show(ctx: &Ctx<'_>, name: &str) -> Result<Shown, Refusal> {
    let state = State::load(&ctx.paths, ctx.verb)?;
    if !state.runs.keys().any(|k| k.contains(name)) {
        return recorded(ctx, name).map(|r| Shown::Recorded(Box::new(r)));
    }
    let id = named(ctx, name)?;
    let run = state
        .runs
        .get(&id)
        .map(|r| super::ended::whole(&ctx.paths, r))
        .ok_or_else(|| not_found(ctx, name))?;
    let next = run.lanes.iter().map(|l| next_move(ctx, &run, l)).collect();
    let agents = record::agents(ctx, &run, &record::history(ctx, &run.id));
    let cost = record::cost(&agents);
    let budget = record::budget(&super::ctx::run_pace(ctx, &run), &agents);
    Ok(Shown::Live(Box::new(LiveRun {
        run,
        next,
        agents,
        cost,
        budget,
    })))
}

fn not_found(ctx: &Ctx<'_>, name: &str) -> Refusal {
    Refusal::new(
        ctx.verb,
        "run-not-found",
        format!("no run `{name}`"),
        "`iced run list` shows the runs",
    )
}

/// The first readable record of a run whose id holds `name`.
pub(super) fn recorded(ctx: &Ctx<'_>, name: &str) -> Result<RecordedRun, Refusal> {
    let (record, run) = std::fs::read_dir(&ctx.paths.dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|id| id.contains(name))
        .find_map(|id| {
            let record = record::read(&ctx.paths, &id)?;
            let read = RunRecord::deserialize(&record).ok()?;
            Some((record, read))
        })
        .ok_or_else(|| not_found(ctx, name))?;
    let RunRecord {
        run,
        agents,
        cost,
        budget,
    } = run;
    let went = run.lanes.iter().map(|l| work_went(&l.steps)).collect();
    Ok(RecordedRun {
        record,
        run,
        went,
        agents: agents.map(|a| a.iter().map(Agent::of).collect()),
        cost,
        budget,
    })
}

/// The pull request a lane opened, else the commit it landed: from its last done step of each.
fn work_went(steps: &[super::state::StepRecord]) -> Option<WorkWent> {
    let done = |which: &dyn Fn(&StepKey) -> bool| {
        steps
            .iter()
            .rev()
            .find(|r| r.status == StepStatus::Done && which(&r.step))
            .and_then(|r| r.outcome_as::<LandOutcome>())
    };
    done(&|k| *k == StepKey::PrOpen)
        .and_then(|o| o.url)
        .map(WorkWent::PullRequest)
        .or_else(|| {
            done(&|k| matches!(k, StepKey::Land(_)))
                .and_then(|o| o.commit)
                .map(WorkWent::Landed)
        })
}

/// `run retire [<name>]`: retire the ended runs (or the one named) whose work is in the target.
pub fn retire(ctx: &Ctx<'_>, name: Option<&str>) -> Result<Vec<Retirement>, Refusal> {
    let run = name.map(|n| named(ctx, n)).transpose()?;
    control::retire_runs(ctx, run.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::state::StepRecord;
    use serde_json::json;

    fn record(step: &str, status: StepStatus, outcome: Value) -> StepRecord {
        StepRecord {
            step: step.parse().expect("a step key"),
            attempt: 1,
            status,
            started_at: String::new(),
            ended_at: None,
            inputs: None,
            nonce: None,
            pid: None,
            pid_start: None,
            outcome: Some(outcome),
        }
    }

    /// A lane's work went into its pull request when one was opened, else into the commit its
    /// last done landing made; a failed step says nothing.
    #[test]
    fn where_work_went_is_the_pull_request_else_the_landed_commit() {
        let landed = record("land-1", StepStatus::Done, json!({"commit": "c1"}));
        let relanded = record("land-2", StepStatus::Done, json!({"commit": "c2"}));
        let pr = record(
            "pr-open",
            StepStatus::Done,
            json!({"url": "https://x/pr/1"}),
        );
        let failed_pr = record(
            "pr-open",
            StepStatus::Failed,
            json!({"url": "https://x/pr/2"}),
        );
        assert_eq!(work_went(&[]), None);
        assert_eq!(
            work_went(&[landed.clone(), relanded]),
            Some(WorkWent::Landed("c2".into()))
        );
        assert_eq!(
            work_went(&[landed.clone(), pr]),
            Some(WorkWent::PullRequest("https://x/pr/1".into()))
        );
        assert_eq!(
            work_went(&[landed, failed_pr]),
            Some(WorkWent::Landed("c1".into()))
        );
    }
}
