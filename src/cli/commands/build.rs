//! `build`, `implement step|receipt`, `run ...` and the hidden supervisor: the loop's verbs.

use super::repo;
use crate::cli::wait::Waiter;
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::engine::{self, exit_for, pick_run, Ctx, StepReport};
use crate::run::state::{RunPaths, RunStatus, State};
use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct BuildArgs {
    /// The unit (id, number or unique part of an id).
    pub id: String,
    /// Name this session in the unit's claim (default: $ICED_SESSION).
    #[arg(long)]
    pub session: Option<String>,
    /// Return once the current activity is launched instead of driving the run to its end.
    #[arg(long)]
    pub no_wait: bool,
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
    /// Resume on the pace in force now, though it differs from the one the run recorded.
    #[arg(long)]
    pub repace: bool,
}

impl PaceArgs {
    fn flags(&self) -> crate::run::pace::Flags {
        crate::run::pace::Flags {
            lanes: self.pace_lanes,
            agents: self.pace_agents,
        }
    }
}

#[derive(clap::Args)]
pub struct RunResume {
    /// The run id (or a unique part of it).
    pub run: String,
    #[command(flatten)]
    pub pace: PaceArgs,
}

#[derive(clap::Subcommand)]
pub enum ImplementCommand {
    /// Do one step of the live run and say what the caller does next: writes the run state; refuses when several runs are live and none is named.
    Step(RunSelect),
    /// Hand in the implementer's report for the current attempt: records it and starts the receipt checks; refuses a report at another path, for a superseded attempt, or one carrying a verdict or an unknown field.
    Receipt(ReceiptArgs),
}

#[derive(clap::Args)]
pub struct RunSelect {
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

#[derive(clap::Subcommand)]
pub enum RunCommand {
    /// List the runs in the state file with their status and stage: writes nothing.
    List,
    /// Show one run: lanes, stages, every step record with its key, status and outcome; writes nothing.
    Show(RunId),
    /// Pause a run: nothing new is launched until it is resumed; refuses a run that has ended.
    Pause(RunPause),
    /// Resume a paused or blocked run (a blocked lane starts a fresh attempt); refuses a run that has ended.
    Resume(RunResume),
    /// End a run: releases its claim and stops its activities, keeps its worktree and branch; refuses a run that has ended.
    Abandon(RunId),
    /// Let a project run's blocked or handed-back lane stop holding its siblings, which then land; the lane stays as it is.
    Release(RunLane),
    /// Drop a lane from a project run: stops its activities, releases its unit, keeps its worktree and branch; refuses a lane that has begun landing.
    Discard(RunLane),
    /// Retire the lanes of delivered runs whose work is in the target: removes their worktrees and branches (never a dirty worktree) and lets the runs leave the state; refuses nothing.
    Retire(OptionalRun),
    /// Print what a fresh driver needs to continue: settings in force, each lane's next move, what is awaited, hazards; writes nothing.
    Handover(OptionalRun),
}

#[derive(clap::Args)]
pub struct OptionalRun {
    /// The run (default: every run).
    pub run: Option<String>,
}

#[derive(clap::Args)]
pub struct RunLane {
    /// The run id (or a unique part of it).
    pub run: String,
    /// The lane (a unit id of the project, or a unique part of it).
    pub lane: String,
}

#[derive(clap::Args)]
pub struct RunPause {
    /// The run id (or a unique part of it).
    pub run: String,
    /// Launch no agent before this time (RFC 3339), without pausing the run (SPEC 20.10).
    #[arg(long)]
    pub until: Option<String>,
}

#[derive(clap::Args)]
pub struct RunId {
    /// The run id (or a unique part of it).
    pub run: String,
}

fn report_text(r: &StepReport) -> String {
    let mut out = match (&r.run, &r.lane) {
        (Some(run), Some(lane)) => format!(
            "{run} {lane}: {} (stage {}, attempt {})",
            r.action,
            r.stage.as_deref().unwrap_or("?"),
            r.attempt.unwrap_or(0)
        ),
        _ => r.action.to_owned(),
    };
    for (label, value) in [
        ("brief", &r.brief),
        ("worktree", &r.worktree),
        ("receipt_path", &r.receipt_path),
        ("receipt_key", &r.receipt_key),
    ] {
        if let Some(v) = value {
            out.push_str(&format!("\n  {label}: {v}"));
        }
    }
    out.push_str(&format!("\nnext: {}", r.next));
    out
}

fn output(report: &StepReport) -> Output {
    let mut out = Output::new(
        serde_json::to_value(report).expect("serialises"),
        report_text(report),
    );
    out.exit = exit_for(report);
    out
}

pub fn build(args: BuildArgs, json: bool) -> Result<Output, Refusal> {
    let step = "build";
    let repo = repo(step)?;
    let mut ctx = Ctx::new(&repo, step)?;
    // Before admit writes anything or a step starts anything (SPEC 24.10).
    crate::trust::require(&repo.root, &ctx.config, &ctx.settings, step)?;
    ctx.set_pace_flags(&args.pace.flags())?;
    let session = args
        .session
        .or_else(|| std::env::var("ICED_SESSION").ok())
        .filter(|s| !s.is_empty());
    let (run_id, resumed) = engine::admit(&ctx, &args.id, session.as_deref())?;
    let live = std::io::stderr().is_terminal() && !json;
    let say = |line: &str| {
        if json {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{}", crate::text::for_terminal(line));
    };
    if resumed {
        // On the pace it recorded, unless the person says otherwise (SPEC 20.11).
        engine::check_pace(&ctx, &run_id, args.pace.repace)?;
        // A person typing `build` again on a blocked or paused run means: go on. A blocked lane
        // gets a fresh attempt (`run resume` does the same).
        let state = State::load(&RunPaths::new(&repo.root), step)?;
        if state
            .runs
            .get(&run_id)
            .is_some_and(|r| matches!(r.status, RunStatus::Blocked | RunStatus::Paused))
        {
            engine::set_paused(&ctx, &run_id, false)?;
        }
    }
    say(&format!(
        "{} run {run_id}",
        if resumed { "resuming" } else { "started" }
    ));
    let mut last_line = String::new();
    let mut last_printed: Option<StepReport> = None;
    let mut waiter = Waiter::new(&ctx.paths, &repo.root, live);
    loop {
        let report = engine::step(&ctx, &run_id)?;
        if json {
            // One line per change, not one per wait (SPEC 20.1).
            if last_printed.as_ref() != Some(&report) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&report).expect("serialises")
                );
                last_printed = Some(report.clone());
            }
        } else {
            let line = format!(
                "  {} {:<9} attempt {}: {}",
                report.lane.as_deref().unwrap_or(""),
                report.stage.as_deref().unwrap_or(""),
                report.attempt.unwrap_or(0),
                report.action
            );
            // One line per change, not one per poll.
            if line != last_line {
                waiter.clear();
                if live && report.action == "waiting" {
                    say(&format!(
                        "{line} ({})",
                        report.next.trim_end_matches("; call again later")
                    ));
                } else {
                    say(&line);
                }
                last_line = line;
            }
        }
        // A pull request waiting for the forge is not something to poll for here: cron or a host
        // stepping the run later retires the lane once it has landed. Nor is a landed lane whose
        // landing is not (or no longer) in the target: only a person changes that.
        let awaiting_forge = report.action == "waiting"
            && (ctx.settings.land.mode == "pr"
                && matches!(report.stage.as_deref(), Some("land" | "retire"))
                || report.stage.as_deref() == Some("retire"));
        if report.is_final() || awaiting_forge || (args.no_wait && report.action == "waiting") {
            let state = State::load(&RunPaths::new(&repo.root), step)?;
            // A run that landed and retired has left the state: its record says how it ended.
            let status = state
                .runs
                .get(&run_id)
                .map(|r| r.status.as_str().to_owned())
                .or_else(|| {
                    crate::run::record::read(&RunPaths::new(&repo.root), &run_id)
                        .and_then(|r| r["run"]["status"].as_str().map(str::to_owned))
                })
                .unwrap_or_else(|| "unknown".to_owned());
            let mut out = output(&report);
            out.json = json!({"run": run_id, "status": status, "action": report.action});
            if report.action == "start_agent" {
                out.text = format!("{}\n\nThis run is host-driven: hand the brief to a fresh agent, then `iced implement receipt <receipt_path>` and `iced implement step` until it is delivered.", report_text(&report));
            }
            return Ok(out);
        }
        if report.action == "waiting" {
            waiter.wait(&ctx, &run_id);
        }
    }
}

pub fn implement(command: ImplementCommand) -> Result<Output, Refusal> {
    match command {
        ImplementCommand::Step(select) => {
            let step = "implement step";
            let repo = repo(step)?;
            let ctx = Ctx::new(&repo, step)?;
            match pick_run(&ctx, select.run.as_deref())? {
                None => Ok(output(&StepReport::nothing())),
                Some(run) => {
                    // Before the step starts anything (SPEC 24.10).
                    crate::trust::require(&repo.root, &ctx.config, &ctx.settings, step)?;
                    Ok(output(&engine::step(&ctx, &run)?))
                }
            }
        }
        ImplementCommand::Receipt(args) => {
            let step = "implement receipt";
            let repo = repo(step)?;
            let ctx = Ctx::new(&repo, step)?;
            let run = pick_run(&ctx, args.run.as_deref())?.ok_or_else(|| {
                Refusal::new(
                    step,
                    "no-live-run",
                    "no live run is waiting for a receipt",
                    "start one with `iced build <id>`",
                )
            })?;
            let said = crate::run::host::HostAgent {
                model: args.model,
                session: args.session,
            };
            Ok(output(&engine::submit_receipt(
                &ctx, &run, &args.path, &said,
            )?))
        }
    }
}

fn run_summary(run: &crate::run::state::Run) -> Value {
    let lane = engine::focus_lane(run);
    let mut v = json!({"id": run.id, "unit": run.unit, "status": run.status.as_str(), "driver": run.driver,
           "stage": lane.stage.as_str(), "attempt": lane.attempt, "created_at": run.created_at,
           "updated_at": run.updated_at, "reason": lane.reason});
    if run.lanes.len() > 1 {
        v["lanes"] = run
            .lanes
            .iter()
            .map(|l| json!({"id": l.id, "stage": l.stage.as_str(), "attempt": l.attempt}))
            .collect();
    }
    v
}

pub fn run_verb(command: RunCommand) -> Result<Output, Refusal> {
    let step = "run";
    let repo = repo(step)?;
    let ctx = Ctx::new(&repo, step)?;
    let state = State::load(&ctx.paths, step)?;
    let find = |r: &str| pick_run(&ctx, Some(r)).map(|id| id.expect("a named run"));
    match command {
        RunCommand::List => {
            let runs: Vec<Value> = state.runs.values().map(run_summary).collect();
            let text = if runs.is_empty() {
                "No runs. Start one with `iced build <id>`.".to_owned()
            } else {
                runs.iter()
                    .map(|r| {
                        format!(
                            "{}  {:<10} {:<9} attempt {}  {}",
                            r["id"].as_str().unwrap_or(""),
                            r["status"].as_str().unwrap_or(""),
                            r["stage"].as_str().unwrap_or(""),
                            r["attempt"],
                            r["unit"].as_str().unwrap_or("")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(Output::new(Value::Array(runs), text))
        }
        RunCommand::Show(id) if !state.runs.keys().any(|k| k.contains(&id.run)) => {
            // A run that left the state (landed and retired): its record.
            let record = std::fs::read_dir(&ctx.paths.dir)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|name| name.contains(&id.run))
                .find_map(|name| crate::run::record::read(&ctx.paths, &name))
                .ok_or_else(|| {
                    Refusal::new(
                        step,
                        "run-not-found",
                        format!("no run `{}`", id.run),
                        "`iced run list` shows the runs",
                    )
                })?;
            let run = &record["run"];
            let mut text = format!(
                "{} ({}, from its record: it has left the state)\n",
                run["id"].as_str().unwrap_or(""),
                run["status"].as_str().unwrap_or("")
            );
            for lane in run["lanes"].as_array().into_iter().flatten() {
                text.push_str(&format!(
                    "lane {} stage {} attempt {}\n",
                    lane["id"].as_str().unwrap_or(""),
                    lane["stage"].as_str().unwrap_or(""),
                    lane["attempt"]
                ));
                // Where the work went: the landed commit, or the pull request.
                let steps = lane["steps"].as_array().cloned().unwrap_or_default();
                let done = |prefix: &str| {
                    steps
                        .iter()
                        .rev()
                        .find(|r| {
                            r["status"] == "done"
                                && r["step"].as_str().is_some_and(|s| s.starts_with(prefix))
                        })
                        .map(|r| r["outcome"].clone())
                };
                if let Some(url) =
                    done("pr-open").and_then(|o| o["url"].as_str().map(str::to_owned))
                {
                    text.push_str(&format!("  pull request: {url}\n"));
                } else if let Some(commit) =
                    done("land-").and_then(|o| o["commit"].as_str().map(str::to_owned))
                {
                    text.push_str(&format!("  landed: {commit}\n"));
                }
                for r in lane["steps"].as_array().into_iter().flatten() {
                    text.push_str(&format!(
                        "  ({}, {}) {}\n",
                        r["step"].as_str().unwrap_or(""),
                        r["attempt"],
                        r["status"].as_str().unwrap_or("")
                    ));
                }
                for f in lane["findings"].as_array().into_iter().flatten() {
                    text.push_str(&format!(
                        "  finding {} {} {}\n",
                        f["id"].as_str().unwrap_or(""),
                        f["evidence"]["severity"].as_str().unwrap_or(""),
                        f["status"].as_str().unwrap_or("")
                    ));
                }
            }
            if let Some(agents) = record["agents"].as_array() {
                text.push_str(&format!(
                    "cost: {}\n{}",
                    crate::run::record::cost_line(&record["cost"]),
                    crate::run::record::agent_lines(agents)
                ));
            }
            Ok(Output::new(record, text))
        }
        RunCommand::Show(id) => {
            let run_id = find(&id.run)?;
            let run = state.runs.get(&run_id).expect("found");
            let json = serde_json::to_value(run).expect("serialises");
            let mut text = format!(
                "{} {}: {} (driver {}, updated {})\n",
                run.id,
                run.status.as_str(),
                run.unit,
                if run.driver == crate::run::state::Driver::Host {
                    "host"
                } else {
                    "process"
                },
                run.updated_at
            );
            for lane in &run.lanes {
                text.push_str(&format!(
                    "lane {} stage {} attempt {} branch {}\n",
                    lane.id,
                    lane.stage.as_str(),
                    lane.attempt,
                    lane.branch.as_deref().unwrap_or("")
                ));
                if let Some(reason) = &lane.reason {
                    text.push_str(&format!("  reason: {reason}\n"));
                }
                text.push_str(&format!(
                    "  next: {}\n",
                    crate::run::record::next_move(&ctx, run, lane)
                ));
                for r in &lane.steps {
                    text.push_str(&format!(
                        "  ({}, {}, {}) {:?} {}\n",
                        lane.id,
                        r.step,
                        r.attempt,
                        r.status,
                        r.outcome
                            .as_ref()
                            .map(|o| o.to_string())
                            .unwrap_or_default()
                            .chars()
                            .take(160)
                            .collect::<String>()
                    ));
                }
                if !lane.findings.is_empty() {
                    text.push_str("  findings:\n");
                }
                for f in &lane.findings {
                    text.push_str(&format!(
                        "    {} {} {} (round {}, by {}): {}\n",
                        f.id, f.evidence.severity, f.status, f.round, f.by, f.evidence.summary
                    ));
                }
            }
            let agents =
                crate::run::record::agents(&ctx, run, &crate::run::record::history(&ctx, &run.id));
            let cost = crate::run::record::cost(&agents);
            text.push_str(&format!(
                "cost: {}\n{}",
                crate::run::record::cost_line(&cost),
                crate::run::record::agent_lines(&agents)
            ));
            let mut json = json;
            json["agents"] = agents.into();
            json["cost"] = cost;
            Ok(Output::new(json, text))
        }
        RunCommand::Pause(p) if p.until.is_some() => {
            let until = p.until.as_deref().unwrap_or_default();
            let run = engine::pace_until(&ctx, &find(&p.run)?, until)?;
            Ok(Output::new(
                run_summary(&run),
                format!(
                    "{} launches no agent before {}; `iced run resume {}` lifts it.",
                    run.id,
                    run.next_eligible_at.as_deref().unwrap_or(until),
                    run.id
                ),
            ))
        }
        RunCommand::Pause(p) => {
            let run = engine::set_paused(&ctx, &find(&p.run)?, true)?;
            Ok(Output::new(
                run_summary(&run),
                format!("Paused {}.", run.id),
            ))
        }
        RunCommand::Resume(r) => {
            let run_id = find(&r.run)?;
            let mut ctx = ctx;
            ctx.set_pace_flags(&r.pace.flags())?;
            engine::check_pace(&ctx, &run_id, r.pace.repace)?;
            let run = engine::set_paused(&ctx, &run_id, false)?;
            Ok(Output::new(
                run_summary(&run),
                format!(
                    "Resumed {}: `iced implement step` or `iced build {}` drives it on.",
                    run.id, run.unit
                ),
            ))
        }
        RunCommand::Retire(which) => {
            let run = match &which.run {
                Some(r) => Some(find(r)?),
                None => None,
            };
            let results = engine::retire_runs(&ctx, run.as_deref())?;
            let text = if results.is_empty() {
                "No ended run to retire.".to_owned()
            } else {
                results
                    .iter()
                    .map(|r| {
                        let lanes: Vec<String> = r["lanes"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|l| {
                                format!(
                                    "{}: {}",
                                    l["lane"].as_str().unwrap_or(""),
                                    l["result"].as_str().unwrap_or("")
                                )
                            })
                            .collect();
                        format!(
                            "{} {}: {}",
                            r["run"].as_str().unwrap_or(""),
                            if r["retired"] == true {
                                "retired"
                            } else {
                                "kept"
                            },
                            lanes.join("; ")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(Output::new(Value::Array(results), text))
        }
        RunCommand::Handover(which) => {
            let chosen: Vec<&crate::run::state::Run> = match &which.run {
                Some(r) => {
                    let id = find(r)?;
                    state.runs.get(&id).into_iter().collect()
                }
                None => state
                    .runs
                    .values()
                    .filter(|r| !r.status.is_ended())
                    .collect(),
            };
            let text = crate::run::record::handover(&ctx, &chosen);
            Ok(Output::new(
                json!({"handover": text, "runs": chosen.iter().map(|r| run_summary(r)).collect::<Vec<_>>()}),
                text,
            ))
        }
        RunCommand::Release(rl) => {
            let run = engine::release(&ctx, &find(&rl.run)?, &rl.lane)?;
            Ok(Output::new(
                run_summary(&run),
                format!(
                    "Released lane {} of {}: the other lanes may land; `iced implement step` or `iced build {}` drives it on.",
                    rl.lane, run.id, run.unit
                ),
            ))
        }
        RunCommand::Discard(rl) => {
            let run = engine::discard(&ctx, &find(&rl.run)?, &rl.lane)?;
            Ok(Output::new(
                run_summary(&run),
                format!(
                    "Discarded lane {} of {}; its worktree and branch are kept. `iced implement step` or `iced build {}` drives the rest on.",
                    rl.lane, run.id, run.unit
                ),
            ))
        }
        RunCommand::Abandon(id) => {
            let run = engine::abandon(&ctx, &find(&id.run)?)?;
            Ok(Output::new(
                run_summary(&run),
                format!("Abandoned {}; its worktree and branch are kept.", run.id),
            ))
        }
    }
}

/// The hidden supervisor: `iced __supervise <dir>`.
pub fn supervise(dir: PathBuf) -> i32 {
    crate::activity::supervise(&dir, &engine::RunGate)
}
