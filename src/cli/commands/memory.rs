//! `iced memory draft` (SPEC 20.15): a memory agent proposes `.iced/memory/*` on a branch of its
//! own; the person merges it.

use super::repo;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::Ctx;

#[derive(clap::Subcommand)]
pub enum MemoryCommand {
    /// An agent in the `memory` role drafts `.iced/memory/*` from the repository on a branch of its own, which the loop checks (only `.iced/memory/` may change) and leaves for you to merge; refuses without a runner, and a branch that changes anything else or nothing.
    Draft,
}

pub fn run(command: MemoryCommand) -> Result<Output, Refusal> {
    match command {
        MemoryCommand::Draft => draft(),
    }
}

fn draft() -> Result<Output, Refusal> {
    let repo = repo("memory draft")?;
    let ctx = Ctx::new(&repo, "memory draft")?;
    let drafted = crate::run::memory::draft(&ctx)?;
    let mut text = format!(
        "The memory draft is on branch `{}` (from {}), for you to merge; it changes:",
        drafted.branch,
        drafted.base.get(..12).unwrap_or(&drafted.base)
    );
    for f in &drafted.files {
        text.push_str(&format!("\n  {f}"));
    }
    text.push_str(&format!(
        "\n\nLook at it: {}\nMerge it:   {}",
        drafted.diff, drafted.merge
    ));
    Ok(Output::new(
        serde_json::to_value(&drafted).expect("serialises"),
        text,
    ))
}
