//! `iced run show <run>`: one run with its lanes, step records, findings and agents; from its
//! record once it has left the state.

use super::STEP;
use crate::cli::commands::repo;
use crate::cli::render::run::{
    agent_lines, budget_line, cost_line, driver, next_move, step_status,
};
use crate::cli::Output;
use crate::refusal::Refusal;
use crate::run::view::{self, LiveRun, RecordedRun, Shown, WorkWent};
use crate::run::Ctx;
use std::fmt::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// The run id (or a unique part of it); default: the one live run, else the latest run.
    pub run: Option<String>,
    /// Write the run's timeline to FILE instead: one self-contained HTML page (no script, no
    /// external URL); refuses a symlink or a destination it cannot write.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Output, Refusal> {
    let repo = repo(STEP)?;
    let ctx = Ctx::new(&repo, STEP)?;
    let name = match args.run {
        Some(name) => name,
        None => view::default_run(&ctx)?,
    };
    let shown = view::show(&ctx, &name)?;
    if let Some(file) = args.html {
        return timeline_output(&ctx, &shown, &file);
    }
    // A live run's can be changed; an ended run's are what it ran under.
    let (how, rules) = match &shown {
        Shown::Live(live) => (
            format!(
                ", fixed when the run was admitted (`iced run resume {} --reload` takes the checkout's config)",
                live.run.id
            ),
            live.run.rules.clone(),
        ),
        Shown::Recorded(r) => (", the run's from its admission".to_owned(), r.run.rules.clone()),
    };
    let mut output = match shown {
        Shown::Live(live) => live_output(*live),
        Shown::Recorded(recorded) => recorded_output(*recorded),
    };
    // The rules it was admitted with (SPEC 24.16); none for a run an older iced admitted.
    // Under the run's first line, which names it.
    if let Some(rules) = rules {
        let line = format!("rules: sha256 {rules}{how}\n");
        let at = output.text.find('\n').map_or(output.text.len(), |i| i + 1);
        output.text.insert_str(at, &line);
        output.json["rules"] = rules.into();
    }
    if let Some(line) = crate::run::confinement::unconfined_line(STEP) {
        output.text.push_str(line);
        output.text.push('\n');
        output.json["agents_unconfined"] = true.into();
    }
    Ok(output)
}

/// `--html <file>`: the run's timeline, written atomically to `file` (never through a symlink).
fn timeline_output(ctx: &Ctx<'_>, shown: &Shown, file: &Path) -> Result<Output, Refusal> {
    let timeline = match shown {
        Shown::Live(live) => view::timeline(ctx, &live.run, &live.agent_views(), live.cost),
        Shown::Recorded(r) => {
            view::timeline(ctx, &r.run, r.agents.as_deref().unwrap_or_default(), r.cost)
        }
    };
    let page = crate::cli::render::timeline::html(&timeline);
    let unwritable = |why: String| {
        Refusal::new(
            STEP,
            "timeline-unwritable",
            format!("cannot write the timeline to `{}`: {why}", file.display()),
            "name a file in a directory you can write, not a symlink (e.g. `--html timeline.html`)",
        )
    };
    // Absolute, so the rename and the sync of its directory name a directory.
    let file = &crate::cli::commands::current_dir(STEP)?.join(file);
    if std::fs::symlink_metadata(file).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(unwritable("it is a symlink".into()));
    }
    let dir = file.parent().unwrap_or(Path::new("/"));
    if !dir.is_dir() {
        return Err(unwritable(format!(
            "`{}` is not a directory",
            dir.display()
        )));
    }
    crate::store::write_atomic(file, page.as_bytes(), 0o644)
        .map_err(|e| unwritable(e.to_string()))?;
    let bars = timeline.bars();
    Ok(Output::new(
        serde_json::json!({"run": timeline.run, "html": file, "bars": bars}),
        format!(
            "wrote the timeline of {} to {} ({bars} bars)",
            timeline.run,
            file.display()
        ),
    ))
}

/// A run in the state: every lane with its next move, step records (each outcome cut to 160
/// characters) and findings, then the agents and their cost.
fn live_output(live: LiveRun) -> Output {
    let run = &live.run;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{} {}: {} (driver {}, updated {})",
        run.id,
        run.status.as_str(),
        run.unit,
        driver(run.driver),
        run.updated_at
    );
    // The run's claims on `land.remote` as its last renewal left them (SPEC 24.9.1).
    if let Some(claims) = &run.claims {
        if let Some(at) = &claims.at {
            let _ = writeln!(text, "claims on the remote: renewed at {at}");
        }
        for (unit, why) in &claims.lost {
            let _ = writeln!(text, "claims on the remote: lost `{unit}`: {why}");
        }
    }
    for (lane, next) in run.lanes.iter().zip(&live.next) {
        let _ = writeln!(
            text,
            "lane {} stage {} attempt {} branch {}",
            lane.id,
            lane.stage.as_str(),
            lane.attempt,
            lane.branch.as_deref().unwrap_or("")
        );
        if let Some(reason) = &lane.reason {
            let _ = writeln!(text, "  reason: {reason}");
        }
        let _ = writeln!(text, "  next: {}", next_move(next));
        for r in &lane.steps {
            let _ = writeln!(
                text,
                "  ({}, {}, {}) {:?} {}",
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
            );
        }
        if !lane.findings.is_empty() {
            text.push_str("  findings:\n");
        }
        for f in &lane.findings {
            let _ = writeln!(
                text,
                "    {} {} {} (round {}, by {}): {}",
                f.id, f.evidence.severity, f.status, f.round, f.by, f.evidence.summary
            );
        }
    }
    let _ = writeln!(text, "cost: {}", cost_line(&live.cost));
    if let Some(b) = &live.budget {
        let _ = writeln!(text, "budget: {}", budget_line(b));
    }
    text.push_str(&agent_lines(&live.agent_views()));
    let mut json = serde_json::to_value(run).expect("serialises");
    json["agents"] = serde_json::to_value(&live.agents).expect("serialises");
    json["cost"] = serde_json::to_value(live.cost).expect("serialises");
    if let Some(b) = &live.budget {
        json["budget"] = serde_json::to_value(b).expect("serialises");
    }
    Output::new(json, text)
}

/// A run that has left the state, from its record: where each lane's work went, its step records
/// and findings, then the agents and their cost when the record has them.
fn recorded_output(recorded: RecordedRun) -> Output {
    let run = &recorded.run;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{} ({}, from its record: it has left the state)",
        run.id,
        run.status.as_str()
    );
    for (lane, went) in run.lanes.iter().zip(&recorded.went) {
        let _ = writeln!(
            text,
            "lane {} stage {} attempt {}",
            lane.id,
            lane.stage.as_str(),
            lane.attempt
        );
        match went {
            Some(WorkWent::PullRequest(url)) => {
                let _ = writeln!(text, "  pull request: {url}");
            }
            Some(WorkWent::Landed(commit)) => {
                let _ = writeln!(text, "  landed: {commit}");
            }
            None => {}
        }
        for r in &lane.steps {
            let _ = writeln!(
                text,
                "  ({}, {}) {}",
                r.step,
                r.attempt,
                step_status(r.status)
            );
        }
        for f in &lane.findings {
            let _ = writeln!(
                text,
                "  finding {} {} {}",
                f.id, f.evidence.severity, f.status
            );
        }
    }
    if let Some(agents) = &recorded.agents {
        let _ = writeln!(text, "cost: {}", cost_line(&recorded.cost));
        if let Some(b) = &recorded.budget {
            let _ = writeln!(text, "budget: {}", budget_line(b));
        }
        text.push_str(&agent_lines(agents));
    }
    Output::new(recorded.record, text)
}
