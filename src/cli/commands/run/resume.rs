//! `iced run resume <run>`: a paused or blocked run goes on (a blocked lane with a fresh attempt).

use super::STEP;
use crate::cli::commands::build::PaceArgs;
use crate::cli::commands::repo;
use crate::cli::render::run::summary_json;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::drive;
use crate::run::view::{self, RunSummary};
use crate::run::Ctx;

#[derive(clap::Args)]
pub struct Args {
    /// The run id (or a unique part of it).
    pub run: String,
    #[command(flatten)]
    pub pace: PaceArgs,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let mut ctx = Ctx::new(&repo, STEP)?;
    let id = view::named(&ctx, &args.run)?;
    let run = drive::resume(&mut ctx, &id, &args.pace.flags(), args.pace.repace)?;
    Ok(Output::new(
        summary_json(&RunSummary::of(&run)),
        format!(
            "Resumed {}: `iced implement step` or `iced build {}` drives it on.",
            run.id, run.unit
        ),
    ))
}
