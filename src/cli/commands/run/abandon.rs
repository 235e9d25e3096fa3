//! `iced run abandon <run>`: end a run, keeping its worktree and branch.

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
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let ctx = Ctx::new(&repo, STEP)?;
    let run = control::abandon(&ctx, &view::named(&ctx, &args.run)?)?;
    Ok(Output::new(
        summary_json(&RunSummary::of(&run)),
        format!("Abandoned {}; its worktree and branch are kept.", run.id),
    ))
}
