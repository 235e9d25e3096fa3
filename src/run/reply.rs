//! What one call did and what the caller does next (`implement step --json` prints it): the
//! reply for a lane, for a run that ended or stands blocked, for an agent the host must start, and
//! the exit code it maps to.

use super::state::{Lane, Run, RunStatus, Stage, StepStatus};
use crate::refusal::Exit;
use crate::run::ctx::*;
use crate::run::keys::StepKey;
use crate::run::outcome::LandOutcome;
use crate::run::then::{Ending, ProjectStands, Retirement, Then};
use serde::Serialize;
use std::path::Path;

/// What a call did, as `implement step --json` names it (SPEC 20.2).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// The host starts a fresh agent (`role`, `brief`, `worktree`, `receipt_path`).
    StartAgent,
    /// An activity runs, or the pace holds the next launch: call again later.
    Waiting,
    Paused,
    /// A step was done: call again.
    Advanced,
    Delivered,
    Blocked,
    Handback,
    /// No live run.
    Nothing,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::StartAgent => "start_agent",
            Action::Waiting => "waiting",
            Action::Paused => "paused",
            Action::Advanced => "advanced",
            Action::Delivered => "delivered",
            Action::Blocked => "blocked",
            Action::Handback => "handback",
            Action::Nothing => "nothing",
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one call did, and what the caller does next. `implement step --json` prints this.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepReport {
    pub run: Option<String>,
    pub lane: Option<String>,
    pub stage: Option<String>,
    pub attempt: Option<u32>,
    pub action: Action,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// For a validator: which lens or reviewer it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lens: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brief: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt_key: Option<String>,
    /// What a receipt that did not verify lacked, one gap each (absent otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// What the caller does next, as a value; the command line words it (`next` in its JSON).
    #[serde(skip)]
    pub next: Then,
}

impl StepReport {
    pub(super) fn for_lane(run: &Run, lane: &Lane, action: Action, next: Then) -> Self {
        StepReport {
            run: Some(run.id.clone()),
            lane: Some(lane.id.clone()),
            stage: Some(lane.stage.as_str().to_owned()),
            attempt: Some(lane.attempt),
            action,
            role: None,
            read_only: None,
            lens: None,
            brief: None,
            worktree: None,
            receipt_path: None,
            receipt_key: None,
            missing: Vec::new(),
            next,
        }
    }

    pub fn nothing() -> Self {
        StepReport {
            run: None,
            lane: None,
            stage: None,
            attempt: None,
            action: Action::Nothing,
            role: None,
            read_only: None,
            lens: None,
            brief: None,
            worktree: None,
            receipt_path: None,
            receipt_key: None,
            missing: Vec::new(),
            next: Then::NoLiveRun { last: None },
        }
    }

    /// Whether the caller should stop driving (nothing more happens without someone else).
    pub fn is_final(&self) -> bool {
        matches!(
            self.action,
            Action::Delivered
                | Action::Blocked
                | Action::Handback
                | Action::Nothing
                | Action::Paused
                | Action::StartAgent
        )
    }
}

/// The lane a report about the whole run is about: one that holds the run, else one not
/// delivered, else the first.
pub fn focus_lane(run: &Run) -> &Lane {
    super::decide::holder(run)
        .or_else(|| {
            run.lanes
                .iter()
                .find(|l| matches!(l.stage, Stage::Blocked | Stage::Handback))
        })
        .or_else(|| run.lanes.iter().find(|l| !l.stage.is_final()))
        .unwrap_or(&run.lanes[0])
}

/// What comes next for a lane whose implementer stopped for a person and waits on the answer
/// (SPEC 20.7): the person's verbs, not a resume.
pub(crate) fn escalated(lane: &Lane) -> Option<Then> {
    let e = lane.escalation.as_ref()?;
    e.is_open_at(lane.attempt).then(|| Then::Escalated {
        reason: e.reason(),
        unit: lane.unit.clone(),
        questions: e.kind == "questions",
        by: e.by(),
    })
}

pub(crate) fn ended_report(run: &Run) -> StepReport {
    if run.lanes.len() > 1 {
        return project_report(run);
    }
    let lane = &run.lanes[0];
    let (action, next) = match run.status {
        RunStatus::Delivered => {
            let landed = lane
                .steps
                .iter()
                .rev()
                .find(|r| matches!(r.step, StepKey::Land(_)) && r.status == StepStatus::Done)
                .and_then(|r| r.outcome_as::<LandOutcome>());
            let pr = lane
                .outcome_as::<LandOutcome>(&StepKey::PrOpen)
                .and_then(|o| o.url);
            // A worktree with uncommitted changes is kept (SPEC 23.3): the run stays in the
            // state until `iced run retire` finds it clean.
            let retired = match lane.outcome_as::<LandOutcome>(&StepKey::Retire) {
                Some(o) if o.retired => Retirement::Retired,
                Some(o) => Retirement::Kept {
                    path: o.kept.unwrap_or_default(),
                },
                None => Retirement::NotYet,
            };
            let ending = match (landed, pr) {
                (Some(o), _) => Ending::Landed {
                    target: o.target.unwrap_or_default(),
                    commit: o.commit.unwrap_or_default(),
                    retired,
                },
                (None, Some(url)) => Ending::LandedByPullRequest { url, retired },
                (None, None) => Ending::OnBranch {
                    branch: lane.branch.clone().unwrap_or_default(),
                },
            };
            (Action::Delivered, Then::Ended(ending))
        }
        RunStatus::Handback => (
            Action::Handback,
            Then::Ended(Ending::HandedBack {
                reason: lane.reason.clone().unwrap_or_default(),
            }),
        ),
        RunStatus::Abandoned => (Action::Nothing, Then::Ended(Ending::Abandoned)),
        RunStatus::Blocked => (
            Action::Blocked,
            escalated(lane).unwrap_or_else(|| Then::FixThenResume {
                reason: lane.reason.clone().unwrap_or_default(),
                run: run.id.clone(),
            }),
        ),
        RunStatus::Paused | RunStatus::Running => (Action::Nothing, Then::Nothing),
    };
    StepReport::for_lane(run, lane, action, next)
}

/// How a project run ended or stands: a line per lane that is not simply delivered.
pub(crate) fn project_report(run: &Run) -> StepReport {
    let lane = focus_lane(run);
    let count = |stage: Stage| run.lanes.iter().filter(|l| l.stage == stage).count();
    let (action, stands) = match run.status {
        RunStatus::Delivered => (Action::Delivered, ProjectStands::Tally),
        RunStatus::Handback => (
            Action::Handback,
            ProjectStands::HandedBack {
                lane: lane.id.clone(),
                reason: lane.reason.clone().unwrap_or_default(),
            },
        ),
        RunStatus::Abandoned => (Action::Nothing, ProjectStands::Abandoned),
        RunStatus::Blocked => (
            Action::Blocked,
            ProjectStands::Blocked {
                run: run.id.clone(),
                lane: lane.id.clone(),
                stage: matches!(lane.stage, Stage::Blocked | Stage::Handback)
                    .then(|| lane.stage.as_str()),
                // A child whose implementer stopped is answered before any resume (SPEC 20.7).
                reason: match escalated(lane) {
                    Some(Then::Escalated { reason, unit, .. }) => {
                        format!("{reason} (answer it first: `iced escalation show {unit}`)")
                    }
                    _ => lane.reason.clone().unwrap_or_default(),
                },
            },
        ),
        RunStatus::Paused | RunStatus::Running => (Action::Nothing, ProjectStands::Tally),
    };
    let next = Then::Project {
        delivered: count(Stage::Delivered),
        lanes: run.lanes.len(),
        discarded: count(Stage::Discarded),
        stands,
    };
    StepReport::for_lane(run, lane, action, next)
}

pub(crate) fn start_agent_report(ctx: &Ctx<'_>, run: &Run, lane_id: &str) -> StepReport {
    let lane = run.lane(lane_id).expect("lane");
    let key = lane
        .record(&StepKey::Implement)
        .and_then(|r| r.nonce.clone());
    let receipt = ctx.receipt_path(run, lane_id, lane.attempt);
    let mut report = StepReport::for_lane(run, lane, Action::StartAgent, Then::StartImplementer);
    report.role = Some("implementer");
    report.read_only = Some(false);
    report.brief = Some(
        ctx.brief_path(&run.id, lane_id, lane.attempt)
            .display()
            .to_string(),
    );
    report.worktree = lane.worktree.clone();
    report.receipt_path = Some(receipt.display().to_string());
    report.receipt_key = key;
    report
}

/// A `start_agent` answer as small as a host needs it (SPEC 20.2, brief layout 3 on): the run,
/// who to start, and the brief named from the repository root; `next` gives the exact command
/// that hands the report in. The brief holds the rest (the worktree, the branch, the report).
/// Under 512 bytes whatever the repository's path.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SmallStart {
    pub run: String,
    pub action: Action,
    pub role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lens: Option<String>,
    pub read_only: bool,
    pub brief: String,
    #[serde(skip)]
    pub next: Then,
}

/// What a host that asked `--until-host` is answered: a small `start_agent`, or the report as any
/// call gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum HostAnswer {
    Start(SmallStart),
    Report(StepReport),
}

/// `report` made small when it is a `start_agent`: paths from the repository `root`.
pub fn small_start(report: StepReport, root: &Path) -> HostAnswer {
    let from_root = |p: &str| match Path::new(p).strip_prefix(root) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => p.to_owned(),
    };
    match (
        &report.action,
        &report.run,
        &report.brief,
        &report.receipt_path,
    ) {
        (Action::StartAgent, Some(run), Some(brief), Some(receipt)) => {
            let role = report.role.unwrap_or("implementer");
            HostAnswer::Start(SmallStart {
                run: run.clone(),
                action: Action::StartAgent,
                role,
                lens: report.lens.clone(),
                read_only: report.read_only.unwrap_or(false),
                brief: from_root(brief),
                next: Then::StartFromBrief {
                    role,
                    receipt: from_root(receipt),
                },
            })
        }
        _ => HostAnswer::Report(report),
    }
}

pub fn exit_for(report: &StepReport) -> Exit {
    match report.action {
        Action::Blocked | Action::Handback => Exit::NeedsPerson,
        _ => Exit::Ok,
    }
}
