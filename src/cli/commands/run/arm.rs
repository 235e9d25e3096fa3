//! `iced run arm <run> [<lane>]`: a person arms a lane's open pull request (`land.arm: human`);
//! the run then takes its next step, which arms it.

use super::STEP;
use crate::cli::commands::repo;
use crate::cli::render::step;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::view;
use crate::run::{control, drive, Ctx};

#[derive(clap::Args)]
pub struct Args {
    /// The run id (or a unique part of it).
    pub run: String,
    /// The lane (needed only when the run has several).
    pub lane: Option<String>,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let mut ctx = Ctx::new(&repo, STEP)?;
    let run = control::request_arm(&ctx, &view::named(&ctx, &args.run)?, args.lane.as_deref())?;
    // The arming is the run's next step: taken now, as `iced implement step` would.
    let (_, report) = drive::step_live(&mut ctx, Some(&run.id))?;
    let mut out = step::output(&report);
    out.text = format!(
        "Arming asked for in run {}: the loop never pushes to the pull request after it is armed.\n{}",
        run.id, out.text
    );
    Ok(out)
}
