//! `iced run <verb>`: inspect and steer runs. One file per verb, each with its arguments and the
//! function that runs it; the runs themselves are asked of `run::view` and changed by `run::control` and the stepper.

pub mod abandon;
pub mod arm;
pub mod discard;
pub mod handover;
pub mod list;
pub mod pause;
pub mod release;
pub mod resume;
pub mod retire;
pub mod show;

use crate::cli::Output;
use crate::refusal::Refusal;

/// The step every run verb names in its refusals.
const STEP: &str = "run";

#[derive(clap::Subcommand)]
pub enum RunCommand {
    /// List the runs in the state file with their status and stage: writes nothing.
    List,
    /// Show one run (default: the live one, else the latest): lanes, stages, every step record with its key, status and outcome; writes nothing, except with --html its timeline page, refused when that file is a symlink or cannot be written.
    Show(show::Args),
    /// Pause a run: nothing new is launched until it is resumed; refuses a run that has ended.
    Pause(pause::Args),
    /// Resume a paused or blocked run (a blocked lane starts a fresh attempt); refuses a run that has ended.
    Resume(resume::Args),
    /// End a run: releases its claim and stops its activities, keeps its worktree and branch; refuses a run that has ended.
    Abandon(abandon::Args),
    /// Let a project run's blocked or handed-back lane stop holding its siblings, which then land; the lane stays as it is.
    Release(release::Args),
    /// Drop a lane from a project run: stops its activities, releases its unit, keeps its worktree and branch; refuses a lane that has begun landing.
    Discard(discard::Args),
    /// Arm a lane's open pull request (land.arm human): the run's next step, taken now, arms it with land.pr.arm; refuses a lane with no open pull request.
    Arm(arm::Args),
    /// Retire the lanes of delivered runs whose work is in the target: removes their worktrees and branches (never a dirty worktree) and lets the runs leave the state; refuses nothing.
    Retire(retire::Args),
    /// Print what a fresh driver needs to continue: settings in force, each lane's next move, what is awaited, hazards; writes nothing.
    Handover(handover::Args),
}

pub fn run(command: RunCommand) -> Result<Output, Refusal> {
    match command {
        RunCommand::List => list::run(),
        RunCommand::Show(args) => show::run(args),
        RunCommand::Pause(args) => pause::run(args),
        RunCommand::Resume(args) => resume::run(args),
        RunCommand::Abandon(args) => abandon::run(args),
        RunCommand::Release(args) => release::run(args),
        RunCommand::Discard(args) => discard::run(args),
        RunCommand::Retire(args) => retire::run(args),
        RunCommand::Arm(args) => arm::run(args),
        RunCommand::Handover(args) => handover::run(args),
    }
}
