//! `iced run release <run> <lane>`: a blocked or handed-back lane stops holding its siblings.

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
    let run = control::release(&ctx, &view::named(&ctx, &args.run)?, &args.lane)?;
    Ok(Output::new(
        summary_json(&RunSummary::of(&run)),
        format!(
            "Released lane {} of {}: the other lanes may land; `iced implement step` or `iced build {}` drives it on.",
            args.lane, run.id, run.unit
        ),
    ))
}
