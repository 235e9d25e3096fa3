//! `iced run handover [<run>]`: what a fresh driver needs to continue, from the state alone.

use super::STEP;
use crate::cli::commands::repo;
use crate::cli::render::{handover, run::summary_json};
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::view;
use crate::run::Ctx;
use serde_json::json;

#[derive(clap::Args)]
pub struct Args {
    /// The run (default: every run).
    pub run: Option<String>,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let ctx = Ctx::new(&repo, STEP)?;
    let h = view::handover(&ctx, args.run.as_deref())?;
    let mut text = handover::text(&h);
    let unconfined = crate::run::confinement::unconfined_line(STEP);
    if let Some(line) = unconfined {
        text.push_str(line);
        text.push('\n');
    }
    let runs: Vec<_> = h
        .runs
        .iter()
        .map(|r| {
            let mut summary = summary_json(&r.summary);
            if let Some(budget) = &r.budget {
                summary["budget"] = json!(budget);
            }
            summary
        })
        .collect();
    let mut json = json!({"handover": text, "runs": runs});
    if unconfined.is_some() {
        json["agents_unconfined"] = true.into();
    }
    Ok(Output::new(json, text))
}
