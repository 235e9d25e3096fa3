//! `iced run list`: the runs in the state, one line each.

use super::STEP;
use crate::cli::commands::repo;
use crate::cli::render::run::{summary_json, summary_line};
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::view;
use crate::run::Ctx;
use serde_json::Value;

pub fn run() -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let ctx = Ctx::new(&repo, STEP)?;
    let runs = view::list(&ctx)?;
    let text = if runs.is_empty() {
        "No runs. Start one with `iced build <id>`.".to_owned()
    } else {
        runs.iter().map(summary_line).collect::<Vec<_>>().join("\n")
    };
    Ok(Output::new(
        Value::Array(runs.iter().map(summary_json).collect()),
        text,
    ))
}
