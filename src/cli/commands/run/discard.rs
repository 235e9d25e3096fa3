//! `iced run discard <run> <lane>`: drop a lane from a project run, keeping its worktree and
//! branch.

use super::STEP;
use crate::cli::commands::repo;
use crate::cli::render::run::summary_json;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::control;
use crate::run::view::{self, RunSummary};
use crate::run::Ctx;

#[derive(clap::Args)]
pub struct Args {
    /// The run id (or a unique part of it).
    pub run: String,
    /// The lane (a unit id of the project, or a unique part of it).
    pub lane: String,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let ctx = Ctx::new(&repo, STEP)?;
    let run = control::discard(&ctx, &view::named(&ctx, &args.run)?, &args.lane)?;
    Ok(Output::new(
        summary_json(&RunSummary::of(&run)),
        format!(
            "Discarded lane {} of {}; its worktree and branch are kept. `iced implement step` or `iced build {}` drives the rest on.",
            args.lane, run.id, run.unit
        ),
    ))
}
