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
    /// Record the checkout's config (once trusted) as the run's rules, in place of those it was
    /// admitted with, and say what changed.
    #[arg(long)]
    pub reload: bool,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let mut ctx = Ctx::new(&repo, STEP)?;
    let id = view::named(&ctx, &args.run)?;
    let reloaded = match args.reload {
        true => Some(crate::run::rules::reload(&ctx, &id)?),
        false => None,
    };
    let run = drive::resume(&mut ctx, &id, &args.pace.flags(), args.pace.repace)?;
    let mut json = summary_json(&RunSummary::of(&run));
    let mut text = String::new();
    if let Some(r) = &reloaded {
        json["rules_reloaded"] = serde_json::to_value(r).expect("serialises");
        text = match (&r.was, r.changed.as_slice()) {
            (Some(was), []) if *was == r.sha256 => {
                "The checkout's config is the run's rules already: nothing reloaded.\n".to_owned()
            }
            (_, changed) => format!(
                "The run's rules are now the checkout's config (sha256 {}); changed: {}.\n",
                r.sha256,
                if changed.is_empty() {
                    "nothing but its form".to_owned()
                } else {
                    changed.join(", ")
                }
            ),
        };
    }
    text.push_str(&format!(
        "Resumed {}: `iced implement step` or `iced build {}` drives it on.",
        run.id, run.unit
    ));
    Ok(Output::new(json, text))
}
