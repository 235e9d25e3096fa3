//! `.iced/run/events.jsonl`: what happened, one object per line, appended (0600, no symlinks).
//! Events are for people and tools reading a run's story; no decision is ever made from them.

use super::state::RunPaths;
use serde_json::{Map, Value};

/// What happened (SPEC 21.5), as the `event` of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    RunStart,
    RunEnd,
    RunBlocked,
    RunPaused,
    RunResumed,
    RunRetired,
    Repaced,
    Paced,
    StepStart,
    /// A step a killed call began, taken up again by a later call.
    StepReplay,
    StepDone,
    StepFailed,
    /// A step found the world not there yet (a target that moved, a pull request not merged): it
    /// is tried again; not a failure.
    StepWaits,
    AgentStart,
    AgentEnd,
    Superseded,
    OwnerGone,
    StepStalled,
    Refusal,
    CeilingOverrun,
    LaneReleased,
    LaneDiscarded,
    LaneMoved,
    /// A lane branch an earlier run left, moved aside before the worktree step (SPEC 20.4).
    BranchMovedAside,
    /// A spare worktree (a delivered lane's, SPEC 23.2) a lane would have taken, not reused and
    /// left where it is.
    WorktreeKept,
    LandAccepted,
    ValidatorMutation,
    ArmRequested,
    /// No agent started: the run's charge reached its budget (SPEC 20.12).
    BudgetSpent,
    /// The run's claims on `land.remote` were renewed (SPEC 24.9.1).
    ClaimsRenewed,
    /// A git lock a git that did not finish left in a lane worktree's git folder, removed
    /// (SPEC 24.6).
    GitLockRemoved,
    /// A git lock was found while a git still ran in the lane's worktree; the loop waited for
    /// it to end before removing what it left (SPEC 24.6).
    GitLockWaiting,
    RulesReloaded,
    GitLockWaited,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::RunStart => "run_start",
            Event::BudgetSpent => "budget_spent",
            Event::RunEnd => "run_end",
            Event::RunBlocked => "run_blocked",
            Event::RunPaused => "run_paused",
            Event::RunResumed => "run_resumed",
            Event::RunRetired => "run_retired",
            Event::Repaced => "repaced",
            Event::Paced => "paced",
            Event::StepStart => "step_start",
            Event::StepReplay => "step_replay",
            Event::StepDone => "step_done",
            Event::StepFailed => "step_failed",
            Event::StepWaits => "step_waits",
            Event::AgentStart => "agent_start",
            Event::AgentEnd => "agent_end",
            Event::Superseded => "superseded",
            Event::OwnerGone => "owner_gone",
            Event::StepStalled => "step_stalled",
            Event::Refusal => "refusal",
            Event::CeilingOverrun => "ceiling_overrun",
            Event::LaneReleased => "lane_released",
            Event::LaneDiscarded => "lane_discarded",
            Event::LaneMoved => "lane_moved",
            Event::BranchMovedAside => "branch_moved_aside",
            Event::WorktreeKept => "worktree_kept",
            Event::LandAccepted => "land_accepted",
            Event::ValidatorMutation => "validator_mutation",
            Event::ArmRequested => "arm_requested",
            Event::ClaimsRenewed => "claims_renewed",
            Event::GitLockRemoved => "git_lock_removed",
            Event::GitLockWaiting => "git_lock_waiting",
            Event::RulesReloaded => "rules_reloaded",
            Event::GitLockWaited => "git_lock_waited",
        }
    }
}

/// Append `{ts, run, event, pid, ...fields}`. A failure to log never fails the step that happened.
pub fn emit(paths: &RunPaths, run: &str, event: Event, fields: Value) {
    let mut line = Map::new();
    line.insert("ts".into(), crate::clock::now_iso().into());
    line.insert("run".into(), run.into());
    line.insert("event".into(), event.as_str().into());
    line.insert("pid".into(), std::process::id().into());
    if let Value::Object(fields) = fields {
        line.extend(fields);
    }
    let mut text = serde_json::to_string(&line).expect("an event serialises");
    text.push('\n');
    let _ = crate::store::append(&paths.events(), text.as_bytes(), 0o600);
}
