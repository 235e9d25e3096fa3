//! `iced drain`: build the queue's units one after another (SPEC 20.13) until nothing is
//! eligible, the budget is spent, enough units were built or the time has come, telling each step
//! on stderr, and end with a summary of what was delivered, handed back and skipped.

use super::repo;
use crate::cli::render::{queue, step};
use crate::cli::wait::Waiter;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::drain::{self, Limits, Told};
use crate::run::{drive, Ctx};

#[derive(clap::Args)]
pub struct DrainArgs {
    /// What the whole drain may spend on agents, in dollars; each run gets what is left (or
    /// `pace.budgetUsd`, when smaller). An agent of unknown cost counts as `pace.unknownCostUsd`.
    #[arg(long, value_name = "USD")]
    pub budget_usd: Option<f64>,
    /// Build at most this many units.
    #[arg(long, value_name = "N")]
    pub max_units: Option<usize>,
    /// Start no unit at or after this time (RFC 3339, e.g. 2026-12-01T07:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Name this session in each unit's claim (default: $ICED_SESSION).
    #[arg(long)]
    pub session: Option<String>,
}

pub fn run(args: DrainArgs, json: bool) -> Result<Output, Refusal> {
    let repo = repo("drain")?;
    let mut ctx = Ctx::new(&repo, "drain")?;
    let until = match &args.until {
        None => None,
        Some(t) => Some(
            chrono::DateTime::parse_from_rfc3339(t)
                .map_err(|e| {
                    Refusal::new(
                        "drain",
                        "time-invalid",
                        format!("`{t}` is not an RFC 3339 time: {e}"),
                        "give a time like 2026-12-01T07:00:00Z",
                    )
                })?
                .with_timezone(&chrono::Utc),
        ),
    };
    if let Some(b) = args.budget_usd {
        if !(b.is_finite() && b > 0.0) {
            return Err(Refusal::new(
                "drain",
                "usage",
                format!("--budget-usd {b}: the budget must be a positive number of dollars"),
                "give a budget above zero, such as `--budget-usd 20`",
            )
            .exit(crate::refusal::Exit::Usage));
        }
    }
    let limits = Limits {
        budget_usd: args.budget_usd,
        max_units: args.max_units,
        until,
    };
    let session = args
        .session
        .or_else(|| std::env::var("ICED_SESSION").ok())
        .filter(|s| !s.is_empty());
    let say = |line: &str| crate::cli::render::say(json, line);
    let told = |t: Told<'_>| say(&queue::told(&t));
    let drive_run = |ctx: &Ctx<'_>, run: &str| -> Result<(), Refusal> {
        let mut waiter = Waiter::new(&ctx.paths, &repo.root, false);
        let mut last = String::new();
        let told = |report: &crate::run::StepReport| {
            let line = step::progress_line(report);
            if line != last {
                say(&line);
                last = line;
            }
        };
        drive::to_end(ctx, run, false, told, || waiter.wait(ctx, run))?;
        Ok(())
    };
    let summary = drain::drain(&mut ctx, &limits, session.as_deref(), told, drive_run)?;
    let mut out = Output::new(
        serde_json::to_value(&summary).expect("a summary serialises"),
        queue::summary_text(&summary),
    );
    if let Some(r) = &summary.refused {
        out.exit = r.refusal.exit;
    }
    Ok(out)
}
