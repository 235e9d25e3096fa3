//! `iced implement step|receipt`: the loop's step interface for a driving host, cron or a
//! supervisor. Each call is one step, told as a step report.

use super::repo;
use crate::cli::render::step;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::drive;
use crate::run::host::HostAgent;
use crate::run::Ctx;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum ImplementCommand {
    /// Do one step of the live run and say what the caller does next: writes the run state; refuses when several runs are live and none is named.
    Step(StepArgs),
    /// Hand in the implementer's report for the current attempt: records it and starts the receipt checks; refuses a report at another path, for a superseded attempt, or one carrying a verdict or an unknown field.
    Receipt(ReceiptArgs),
}

#[derive(clap::Args)]
pub struct StepArgs {
    /// The run, when several are live.
    #[arg(long)]
    pub run: Option<String>,
}

#[derive(clap::Args)]
pub struct ReceiptArgs {
    /// The report file: the `receipt_path` that `implement step` named.
    pub path: PathBuf,
    /// The run, when several are live.
    #[arg(long)]
    pub run: Option<String>,
    /// The model the host's agent used, as the host knows it (kept in the run record).
    #[arg(long, value_parser = parse_label)]
    pub model: Option<String>,
    /// The host's session of that agent, as the host names it (kept in the run record).
    #[arg(long, value_parser = parse_label)]
    pub session: Option<String>,
}

fn parse_label(s: &str) -> Result<String, String> {
    crate::run::host::check_label(s)
}

pub fn run(command: ImplementCommand) -> Result<Output, Refusal> {
    match command {
        ImplementCommand::Step(args) => run_step(args),
        ImplementCommand::Receipt(args) => run_receipt(args),
    }
}

/// `implement step`: one step of the live run.
fn run_step(args: StepArgs) -> Result<Output, Refusal> {
    let repo = repo("implement step")?;
    let ctx = Ctx::new(&repo, "implement step")?;
    Ok(step::output(&drive::step_live(&ctx, args.run.as_deref())?))
}

/// `implement receipt <path>`: the implementer's report, handed in.
fn run_receipt(args: ReceiptArgs) -> Result<Output, Refusal> {
    let repo = repo("implement receipt")?;
    let ctx = Ctx::new(&repo, "implement receipt")?;
    let said = HostAgent {
        model: args.model,
        session: args.session,
    };
    Ok(step::output(&drive::receipt(
        &ctx,
        args.run.as_deref(),
        &args.path,
        &said,
    )?))
}
