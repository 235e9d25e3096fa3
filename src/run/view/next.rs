//! A lane's next move as a person needs it: what it waits for and where, from the state alone.
//! It reports what `decide` and the stages will do; it never chooses.

use super::super::decide;
use super::super::state::{Lane, Run, Stage, StepStatus};
use crate::run::keys::StepKey;
use crate::run::outcome::LandOutcome;
use crate::run::Ctx;
use std::path::PathBuf;

/// What a lane needs next and where it is awaited.
#[derive(Debug, Clone, PartialEq)]
pub enum NextMove {
    /// Not started, and another lane holds the run.
    QueuedBehind {
        holder: String,
    },
    /// Not started, waiting for a lane of the pace to free up.
    QueuedForLane,
    /// Not started, waiting for the lanes it depends on.
    QueuedAfter {
        depends: Vec<String>,
    },
    /// Validated, and another lane holds the run before landing.
    WaitsToLand {
        holder: String,
    },
    /// Blocked: a person fixes what the reason names and resumes the run.
    Blocked {
        release: Option<Release>,
    },
    /// Blocked by its implementer's escalation or questions (SPEC 20.7): the person answers them.
    Escalated {
        unit: String,
        questions: bool,
        /// Who stopped: `implementer` or `test writer`.
        by: &'static str,
    },
    /// Handed back: a person decides what comes next.
    HandedBack {
        release: Option<Release>,
    },
    Discarded,
    /// The implementer runs (or was handed out); its report is awaited here.
    AwaitingReport {
        receipt: PathBuf,
    },
    StartImplementer,
    /// Validating or refuting: these steps are running.
    Awaiting {
        steps: Vec<String>,
    },
    /// Delivered on its branch (`land.mode: none`): landing it is a person's move.
    DeliveredOnBranch {
        branch: String,
    },
    Done,
    /// Its pull request is open and waits to land on the forge.
    AwaitingPullRequest {
        url: String,
    },
    /// These steps of the current attempt are running.
    InProgress {
        steps: Vec<String>,
    },
    /// The stage it goes through next.
    Next {
        stage: Stage,
    },
}

/// A lane of a project run that holds its siblings and was not released: a person can release or
/// discard it.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    pub run: String,
    pub lane: String,
}

/// The next move of `lane`, a lane of `run`.
pub fn next_move(ctx: &Ctx<'_>, run: &Run, lane: &Lane) -> NextMove {
    use Stage::*;
    let started: Vec<String> = lane
        .steps
        .iter()
        .filter(|r| r.attempt == lane.attempt && r.status == StepStatus::Started)
        .map(|r| r.step.to_string())
        .collect();
    let holder = decide::holder(run).filter(|h| h.id != lane.id && run.lanes.len() > 1);
    if !decide::started(lane) {
        return match (lane.depends.is_empty(), holder) {
            (_, Some(h)) => NextMove::QueuedBehind {
                holder: h.id.clone(),
            },
            (true, None) => NextMove::QueuedForLane,
            (false, None) => NextMove::QueuedAfter {
                depends: lane.depends.clone(),
            },
        };
    }
    if let Some(h) = holder.filter(|_| lane.stage == Land && !decide::landing_begun(lane)) {
        return NextMove::WaitsToLand {
            holder: h.id.clone(),
        };
    }
    let release = (run.lanes.len() > 1 && !lane.released).then(|| Release {
        run: run.id.clone(),
        lane: lane.id.clone(),
    });
    match lane.stage {
        Blocked => match lane.escalation.as_ref() {
            Some(e) if e.is_open_at(lane.attempt) => NextMove::Escalated {
                unit: lane.unit.clone(),
                questions: e.kind == "questions",
                by: e.by(),
            },
            _ => NextMove::Blocked { release },
        },
        Handback => NextMove::HandedBack { release },
        Discarded => NextMove::Discarded,
        Implement if lane.record(&StepKey::Implement).is_some() => NextMove::AwaitingReport {
            receipt: ctx.receipt_path(run, &lane.id, lane.attempt),
        },
        Implement => NextMove::StartImplementer,
        Validate | Refute if !started.is_empty() => NextMove::Awaiting { steps: started },
        Delivered if lane.outcome(&StepKey::Retire).is_none() => NextMove::DeliveredOnBranch {
            branch: lane.branch.clone().unwrap_or_default(),
        },
        Delivered => NextMove::Done,
        Retire if lane.outcome(&StepKey::PrOpen).is_some() => NextMove::AwaitingPullRequest {
            url: lane
                .outcome_as::<LandOutcome>(&StepKey::PrOpen)
                .and_then(|o| o.url)
                .unwrap_or_default(),
        },
        _ if !started.is_empty() => NextMove::InProgress { steps: started },
        stage => NextMove::Next { stage },
    }
}
