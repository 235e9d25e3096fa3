//! `iced implement step|receipt`: the loop's step interface for a driving host, cron or a
//! supervisor. Each call is one step, told as a step report; with `--until-host`, the steps that
//! follow it too, each its own, until the answer needs the host (SPEC 20.2).

use super::repo;
use crate::cli::render::step;
use crate::cli::wait::Waiter;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::drive;
use crate::run::host::HostAgent;
use crate::run::reply::HostAnswer;
use crate::run::Ctx;
use crate::run::StepReport;
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    #[command(flatten)]
    pub host: UntilHost,
}

/// How far one call goes (SPEC 20.2).
#[derive(clap::Args, Default)]
pub struct UntilHost {
    /// Go on stepping, each step its own, until the answer needs the host (start_agent, delivered, blocked, handback, paused) or the run only waits.
    #[arg(long)]
    pub until_host: bool,
    /// With --until-host: while the run only waits on the loop's own activities, wait for them (without polling) up to this many seconds, then answer.
    #[arg(long, value_name = "SECONDS", requires = "until_host")]
    pub wait: Option<u64>,
}

#[derive(clap::Args)]
pub struct ReceiptArgs {
    /// The report file: the `receipt_path` that `implement step` named (a relative path not found from here is read from the repository root, as a small `start_agent` names it).
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
    #[command(flatten)]
    pub host: UntilHost,
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

/// `implement step`: one step of the live run (with `--until-host`, the steps after it too).
fn run_step(args: StepArgs) -> Result<Output, Refusal> {
    let repo = repo("implement step")?;
    let mut ctx = Ctx::new(&repo, "implement step")?;
    // Watching from before the first step, so that what changes during it still wakes a wait.
    let mut waiter = args
        .host
        .wait
        .map(|_| Waiter::new(&ctx.paths, &repo.root, false));
    let (run, report) = drive::step_live(&mut ctx, args.run.as_deref())?;
    match run {
        Some(run) if args.host.until_host => go_on(&ctx, &run, report, &args.host, &mut waiter),
        _ => Ok(step::output(&report)),
    }
}

/// `implement receipt <path>`: the implementer's report, handed in (with `--until-host`, and the
/// steps after it).
fn run_receipt(args: ReceiptArgs) -> Result<Output, Refusal> {
    let repo = repo("implement receipt")?;
    let mut ctx = Ctx::new(&repo, "implement receipt")?;
    let said = HostAgent {
        model: args.model,
        session: args.session,
    };
    let mut waiter = args
        .host
        .wait
        .map(|_| Waiter::new(&ctx.paths, &repo.root, false));
    // A path from the repository root, as a small `start_agent` names it, wherever the host is.
    let path = if args.path.is_relative() && !args.path.exists() {
        repo.root.join(&args.path)
    } else {
        args.path
    };
    let (run, report) = drive::receipt(&mut ctx, args.run.as_deref(), &path, &said)?;
    if args.host.until_host {
        go_on(&ctx, &run, report, &args.host, &mut waiter)
    } else {
        Ok(step::output(&report))
    }
}

/// Step on after `first` until the host must act, waiting up to `--wait` seconds on the run's
/// own activities; the answer a host is given, small for a `start_agent`.
fn go_on(
    ctx: &Ctx<'_>,
    run: &str,
    first: StepReport,
    host: &UntilHost,
    waiter: &mut Option<Waiter>,
) -> Result<Output, Refusal> {
    let until = Instant::now() + Duration::from_secs(host.wait.unwrap_or(0));
    let wait = |run: &str| {
        let left = until.saturating_duration_since(Instant::now());
        match waiter.as_mut() {
            Some(w) if !left.is_zero() => {
                w.wait_at_most(ctx, run, left);
                true
            }
            _ => false,
        }
    };
    let report = drive::until_host(ctx, run, first, wait)?;
    Ok(match drive::for_host(ctx, report)? {
        HostAnswer::Start(small) => step::small_output(&small),
        HostAnswer::Report(report) => step::output(&report),
    })
}
