//! `iced run pause <run> [--until <time>]`: launch nothing until resumed, or before a time.

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
    /// Launch no agent before this time (RFC 3339), without pausing the run (SPEC 20.10).
    #[arg(long)]
    pub until: Option<String>,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let ctx = Ctx::new(&repo, STEP)?;
    let id = view::named(&ctx, &args.run)?;
    match args.until.as_deref() {
        Some(until) => {
            let run = control::pace_until(&ctx, &id, until)?;
            Ok(Output::new(
                summary_json(&RunSummary::of(&run)),
                format!(
                    "{} launches no agent before {}; `iced run resume {}` lifts it.",
                    run.id,
                    run.next_eligible_at.as_deref().unwrap_or(until),
                    run.id
                ),
            ))
        }
        None => {
            let run = control::set_paused(&ctx, &id, true)?;
            Ok(Output::new(
                summary_json(&RunSummary::of(&run)),
                format!("Paused {}.", run.id),
            ))
        }
    }
}
