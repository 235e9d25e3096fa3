//! `iced run retire [<run>]`: the lanes of delivered runs whose work is in the target leave the
//! checkout, and those runs leave the state.

use super::STEP;
use crate::cli::commands::repo;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::view;
use crate::run::Ctx;

#[derive(clap::Args)]
pub struct Args {
    /// The run (default: every run).
    pub run: Option<String>,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let ctx = Ctx::new(&repo, STEP)?;
    let results = view::retire(&ctx, args.run.as_deref())?;
    let text = if results.is_empty() {
        "No ended run to retire.".to_owned()
    } else {
        results
            .iter()
            .map(|r| {
                let lanes: Vec<String> = r
                    .lanes
                    .iter()
                    .map(|l| format!("{}: {}", l.lane, l.result))
                    .collect();
                format!(
                    "{} {}: {}",
                    r.run,
                    if r.retired { "retired" } else { "kept" },
                    lanes.join("; ")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(Output::new(
        serde_json::to_value(&results).expect("serialises"),
        text,
    ))
}
