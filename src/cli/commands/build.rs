//! `iced build`: admit a unit (or resume its run) and drive the run to its end, telling each step
//! on stderr as it happens.

use super::repo;
use crate::cli::render::step;
use crate::cli::wait::Waiter;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::drive;
use crate::run::reply::Action;
use crate::run::{Ctx, StepReport};
use serde_json::json;
use std::cell::RefCell;
use std::io::{IsTerminal, Write};

#[derive(clap::Args)]
pub struct BuildArgs {
    /// The unit (id, number or unique part of an id), or `next`: the readiest of the queue.
    pub id: String,
    /// Name this session in the unit's claim (default: $ICED_SESSION).
    #[arg(long)]
    pub session: Option<String>,
    /// Return once the current activity is launched instead of driving the run to its end.
    #[arg(long)]
    pub no_wait: bool,
    /// Plan first (SPEC 20.16): `<id>` is a draft, or a one-line request (it holds a space) that
    /// becomes one; a planner drafts it, two reviewers review it, and the loop decides.
    #[arg(long)]
    pub auto_plan: bool,
    #[command(flatten)]
    pub pace: PaceArgs,
}

/// The pace given on the command line (SPEC 20.11): it wins over rulings and configs.
#[derive(clap::Args, Default)]
pub struct PaceArgs {
    /// Lanes of a project run active at once, for this run.
    #[arg(long)]
    pub pace_lanes: Option<u64>,
    /// Agents alive at once, for this run.
    #[arg(long)]
    pub pace_agents: Option<u64>,
    /// What this run may spend on agents, in dollars (over `pace.budgetUsd`); an agent of
    /// unknown cost counts as `pace.unknownCostUsd`.
    #[arg(long, value_name = "USD")]
    pub budget_usd: Option<f64>,
    /// Resume on the pace in force now, though it differs from the one the run recorded.
    #[arg(long)]
    pub repace: bool,
}

impl PaceArgs {
    pub fn flags(&self) -> crate::run::pace::Flags {
        crate::run::pace::Flags {
            lanes: self.pace_lanes,
            agents: self.pace_agents,
            budget_usd: self.budget_usd,
        }
    }
}

pub fn run(args: BuildArgs, json: bool) -> Result<Output, Refusal> {
    let repo = repo("build")?;
    let mut ctx = Ctx::new(&repo, "build")?;
    let session = args
        .session
        .or_else(|| std::env::var("ICED_SESSION").ok())
        .filter(|s| !s.is_empty());
    let say = |line: &str| crate::cli::render::say(json, line);
    // `next`: the queue chooses, and says why before anything starts (SPEC 20.13).
    let picked = if args.id == crate::unit::id::RESERVED {
        let survey = crate::run::queue::survey_to_pick(&ctx)?;
        let picked = crate::run::queue::picked("next", &survey)
            .ok_or_else(|| crate::run::queue::empty(&ctx, &survey))?;
        for line in crate::cli::render::queue::survey_lines(&survey) {
            say(&line);
        }
        Some(picked)
    } else {
        None
    };
    let unit = match &picked {
        Some(p) => p.unit().to_owned(),
        None => args.id.clone(),
    };
    let admitted = if args.auto_plan {
        drive::start_planning(&mut ctx, &unit, session.as_deref(), &args.pace.flags())?
    } else {
        drive::start(
            &mut ctx,
            &unit,
            session.as_deref(),
            &args.pace.flags(),
            args.pace.repace,
            picked.as_ref(),
        )?
    };
    // Ctrl-C stops this driver only: say that the agents go on, and what picks the run up.
    crate::cli::interrupt::on_interrupt(&crate::text::for_terminal(&format!(
        "interrupted: this `iced build` stops here, run {run} does not: its running agents keep running. `iced build {id}` picks it up again; `iced run show {run}` shows where it is.",
        run = admitted.run,
        id = admitted.unit,
    )));
    let live = std::io::stderr().is_terminal() && !json;
    say(&format!(
        "{} run {}",
        if admitted.resumed {
            "resuming"
        } else {
            "started"
        },
        admitted.run
    ));
    let mut last_line = String::new();
    let mut last_printed: Option<serde_json::Value> = None;
    // Told a report, the live lines give way to it; asked to wait, they are drawn again.
    let waiter = RefCell::new(Waiter::new(&ctx.paths, &repo.root, live));
    let told = |report: &StepReport| {
        if json {
            // One line per change, not one per wait (SPEC 20.1): a line that would read the
            // same as the last one is not printed, whichever step said it.
            let line = step::json(report);
            if last_printed.as_ref() != Some(&line) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                last_printed = Some(line);
            }
            return;
        }
        let line = step::progress_line(report);
        // One line per change, not one per poll.
        if line != last_line {
            waiter.borrow_mut().clear();
            if live && report.action == Action::Waiting {
                say(&format!(
                    "{line} ({})",
                    super::super::render::then::words(&report.next)
                        .trim_end_matches("; call again later")
                ));
            } else {
                say(&line);
            }
            last_line = line;
        }
    };
    let wait = || waiter.borrow_mut().wait(&ctx, &admitted.run);
    let report = drive::to_end(&ctx, &admitted.run, args.no_wait, told, wait)?;
    waiter.borrow_mut().clear();
    let status = drive::status(&ctx, &admitted.run)?;
    let mut out = step::output(&report);
    out.json = json!({
        "run": admitted.run,
        "status": status.map_or("unknown", |s| s.as_str()),
        "action": report.action,
    });
    if let Some(picked) = picked {
        out.json["picked"] = serde_json::to_value(picked).expect("a choice serialises");
    }
    if report.action == Action::StartAgent {
        out.text = format!("{}\n\nThis run is host-driven: hand the brief to a fresh agent, then `iced implement receipt <receipt_path> --until-host --wait 600`, which answers the next agent to start or how the run ended (`iced help agent`).", step::text(&report));
    }
    Ok(out)
}
