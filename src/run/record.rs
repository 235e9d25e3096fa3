//! The run record (`.iced/run/<run>/record.json`), the body of a pull request, and the handover
//! block: three ways of telling a run from what the loop recorded, for a machine, a reviewer and a
//! fresh driver.

use super::engine::Ctx;
use super::state::{Lane, Run, RunPaths, StepStatus};
use serde_json::{json, Value};
use std::fmt::Write;

/// The record of a run: the run as the state holds it, every step record of earlier attempts
/// (from `history.jsonl`), and the settings it ran under.
pub fn record(ctx: &Ctx<'_>, run: &Run) -> Value {
    let history = history(ctx, &run.id);
    let s = &ctx.settings;
    json!({
        "run": run,
        "history": history,
        "settings": {
            "implementer": s.implementer.as_ref().map(|r| json!({"runner": r.name, "argv": r.argv, "model": s.implementer_model})),
            "validator": s.validator.as_ref().map(|r| json!({"runner": r.name, "argv": r.argv, "model": s.validator_model})),
            "lenses": s.lenses, "reviewers": s.reviewers, "refute": s.refute,
            "max_attempts": s.max_attempts, "independent": s.independent,
            "land": {"mode": s.land.mode, "target": s.land.target, "strategy": s.land.strategy, "remote": s.land.remote, "arm": s.land.arm},
        },
        "agents": agents(ctx, run, &history),
        "cost": cost(&agents(ctx, run, &history)),
        "written_at": crate::clock::now_iso(),
    })
}

/// Every agent the run launched or handed to the host, earlier attempts included: runner, model
/// (as the harness reported it, else as configured; a host's as the host said, else `unknown`),
/// turns, cost (`unknown` when not reported, and always for a host's), duration, exit.
pub fn agents(ctx: &Ctx<'_>, run: &Run, history: &[Value]) -> Vec<Value> {
    let s = &ctx.settings;
    let mut records: Vec<(String, Value)> = history
        .iter()
        .map(|h| (h["lane"].as_str().unwrap_or("").to_owned(), h.clone()))
        .collect();
    for lane in &run.lanes {
        for r in &lane.steps {
            records.push((
                lane.id.clone(),
                serde_json::to_value(r).expect("serialises"),
            ));
        }
    }
    let mut out = Vec::new();
    let host_run = run.driver == super::state::Driver::Host;
    for (lane, r) in records {
        let step = r["step"].as_str().unwrap_or("");
        if super::host::was_handed(step, &r, host_run) {
            // Answered, or ended unanswered with its attempt, lane or run; not while alive.
            if r["status"] != "started" {
                out.push(host_agent(&lane, step, &r));
            }
            continue;
        }
        let implementer = step == "implement" && run.driver == super::state::Driver::Process;
        let validator = super::judging::is_validator_step(step) && s.validator.is_some();
        if !(implementer || validator) || r["nonce"].is_null() || r["status"] == "started" {
            continue;
        }
        let (runner, model) = if implementer {
            (&s.implementer, &s.implementer_model)
        } else {
            (&s.validator, &s.validator_model)
        };
        let o = &r["outcome"];
        // A validator's outcome keeps its activity's under `finished`.
        let ended = if o["finished"].is_object() {
            &o["finished"]
        } else {
            o
        };
        let h = &o["harness"];
        out.push(json!({
            "lane": lane,
            "step": step,
            "attempt": r["attempt"],
            "runner": runner.as_ref().map(|r| r.name.clone()),
            "model": h["model"].as_str().map(str::to_owned).or_else(|| model.clone()),
            "turns": h["turns"],
            "cost_usd": if h["cost_usd"].is_number() { h["cost_usd"].clone() } else { "unknown".into() },
            "duration_ms": ended["duration_ms"],
            "exit_code": ended["exit_code"],
            "status": r["status"],
        }));
    }
    out
}

/// An agent handed to the host (SPEC 24.8): what the host said it used, or `unknown`; its cost
/// is never known to the loop.
fn host_agent(lane: &str, step: &str, r: &Value) -> Value {
    let said = super::host::said(&r["outcome"]);
    json!({
        "lane": lane,
        "step": step,
        "attempt": r["attempt"],
        "runner": "host",
        "model": said.model.as_deref().unwrap_or("unknown"),
        "session": said.session.as_deref().unwrap_or("unknown"),
        "turns": null,
        "cost_usd": "unknown",
        "duration_ms": null,
        "exit_code": null,
        "status": r["status"],
        "ended": r["outcome"]["ended"],
    })
}

/// The run's cost: the sum of what was reported, and how many agents reported none (so an
/// unknown is never read as free).
pub fn cost(agents: &[Value]) -> Value {
    let known: Vec<f64> = agents
        .iter()
        .filter_map(|a| a["cost_usd"].as_f64())
        .collect();
    let unknown = agents.len() - known.len();
    // A fold from 0.0, not `sum`: the sum of no floats is -0.0, printed `"usd": -0.0`.
    let usd = (known.iter().fold(0.0, |total, c| total + c) * 1e6).round() / 1e6;
    json!({"usd": usd, "agents": agents.len(), "unknown": unknown})
}

/// `$0.0032 over 2 agents, and 1 more that reported none`; `unknown (...)` when none reported.
pub fn cost_line(cost: &Value) -> String {
    let agents = cost["agents"].as_u64().unwrap_or(0);
    let unknown = cost["unknown"].as_u64().unwrap_or(0);
    if agents == 0 {
        return "no agent ran".into();
    }
    let n = |k: u64| format!("{k} agent{}", if k == 1 { "" } else { "s" });
    if unknown == agents {
        return format!("unknown ({} that reported none)", n(agents));
    }
    let usd = cost["usd"].as_f64().unwrap_or(0.0);
    if unknown == 0 {
        format!("${usd} over {}", n(agents))
    } else {
        format!(
            "${usd} over {}, and {} more that reported none",
            n(agents - unknown),
            n(unknown)
        )
    }
}

/// One line per agent, for a person: where, who, what it cost.
pub fn agent_lines(agents: &[Value]) -> String {
    let mut b = String::new();
    for a in agents {
        if a["runner"] == "host" {
            let _ = writeln!(
                b,
                "  agent {} {} attempt {}: runner host, model {}, session {}, cost unknown, {}",
                a["lane"].as_str().unwrap_or(""),
                a["step"].as_str().unwrap_or(""),
                a["attempt"],
                a["model"].as_str().unwrap_or("unknown"),
                a["session"].as_str().unwrap_or("unknown"),
                match (a["status"].as_str(), a["ended"].as_str()) {
                    (Some("done"), _) => "answered".to_owned(),
                    (_, Some(why)) => format!("ended unanswered: {why}"),
                    // Answered, and the answer thrown away (its tree changed).
                    _ => "failed".to_owned(),
                },
            );
            continue;
        }
        let cost = a["cost_usd"]
            .as_f64()
            .map_or_else(|| "cost unknown".to_owned(), |c| format!("${c}"));
        let _ = writeln!(
            b,
            "  agent {} {} attempt {}: runner {}, model {}, {} turns, {cost}, {} ms, exit {}",
            a["lane"].as_str().unwrap_or(""),
            a["step"].as_str().unwrap_or(""),
            a["attempt"],
            a["runner"].as_str().unwrap_or("?"),
            a["model"].as_str().unwrap_or("not reported"),
            a["turns"]
                .as_u64()
                .map_or("?".to_owned(), |t| t.to_string()),
            a["duration_ms"]
                .as_u64()
                .map_or("?".to_owned(), |d| d.to_string()),
            a["exit_code"]
                .as_i64()
                .map_or("none".to_owned(), |c| c.to_string()),
        );
    }
    b
}

/// The history of a run's earlier attempts (`history.jsonl`), each record with its lane.
pub fn history(ctx: &Ctx<'_>, run: &str) -> Vec<Value> {
    read_history(&ctx.paths, run)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `history.jsonl` as text (empty when there is none yet): the loop's own file, so never through
/// a link, and at most [`HISTORY_LIMIT`] bytes.
pub fn read_history(paths: &RunPaths, run: &str) -> Result<String, crate::store::StoreError> {
    match crate::store::read_no_follow(&paths.history(run), HISTORY_LIMIT) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.is_not_found() => Ok(String::new()),
        Err(e) => Err(e),
    }
}

/// A run's history holds one line per superseded step record: far below this.
const HISTORY_LIMIT: u64 = 64 * 1024 * 1024;

/// Write the record (atomic, 0600). Called when a run ends; kept after the run leaves the state.
pub fn write(ctx: &Ctx<'_>, run: &Run) {
    let dir = ctx.paths.run_dir(&run.id);
    if super::state::ensure_dir(&dir, ctx.step).is_err() {
        return;
    }
    let mut text = serde_json::to_vec_pretty(&record(ctx, run)).expect("serialises");
    text.push(b'\n');
    let _ = crate::store::write_atomic(&dir.join("record.json"), &text, 0o600);
}

/// A record written earlier, for a run no longer in the state.
pub fn read(paths: &RunPaths, run: &str) -> Option<Value> {
    let bytes =
        crate::store::read_no_follow(&paths.run_dir(run).join("record.json"), 16 * 1024 * 1024)
            .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The body of a lane's pull request: the unit, each expectation's result, the findings and
/// what became of them, the commands and their exit codes.
pub fn pr_body(run: &Run, lane: &Lane) -> String {
    let mut b = String::new();
    let _ = writeln!(
        b,
        "Delivers ICED unit `{}` (run `{}`, attempt {}).\n",
        lane.unit, run.id, lane.attempt
    );
    // The implementer's report as the loop kept it (SPEC 24.5).
    let receipt = lane.outcome("receipt").cloned().unwrap_or(Value::Null);
    let report: Value = super::kept::load_from(Some(&receipt), "report").unwrap_or(Value::Null);
    if let Some(summary) = report["summary"].as_str() {
        let _ = writeln!(b, "{summary}\n");
    }
    let merged = lane
        .outcome("judge")
        .map(|j| j["merged"].clone())
        .unwrap_or(Value::Null);
    let _ = writeln!(b, "## Expectations\n");
    match merged["expectations"].as_object() {
        Some(map) => {
            for (id, result) in map {
                let _ = writeln!(b, "- {id}: {}", result.as_str().unwrap_or("?"));
            }
        }
        None => {
            let _ = writeln!(
                b,
                "Judged by the loop's own checks only (no independent validator): the definition of done passed and the implementer gave evidence for each expectation.\n"
            );
            for e in report["evidence"].as_array().into_iter().flatten() {
                let _ = writeln!(
                    b,
                    "- {}: verified by the loop's checks; evidence: {} `{}`",
                    e["expectation"].as_str().unwrap_or("?"),
                    e["kind"].as_str().unwrap_or(""),
                    e["ref"].as_str().unwrap_or("")
                );
            }
        }
    }
    let _ = writeln!(b, "\n## Findings\n");
    if lane.findings.is_empty() {
        let _ = writeln!(b, "None.");
    }
    for f in &lane.findings {
        let _ = writeln!(
            b,
            "- {} ({}): {} — {}",
            f.id, f.evidence.severity, f.evidence.summary, f.status
        );
    }
    let _ = writeln!(b, "\n## Definition of done\n");
    for c in receipt["commands"].as_array().into_iter().flatten() {
        let _ = writeln!(
            b,
            "- `{}`: exit {}",
            c["command"].as_str().unwrap_or(""),
            c["exit_code"]
        );
    }
    let _ = writeln!(
        b,
        "\nThe unit's close (status, evidence.md, verify.json) is part of this change."
    );
    b
}

/// A short block a fresh driver reads once to continue: settings in force, each live lane's next
/// move, what is awaited and where, and the hazards. From the state alone.
pub fn handover(ctx: &Ctx<'_>, runs: &[&Run]) -> String {
    let s = &ctx.settings;
    let mut b = String::new();
    let role = |r: &Option<super::settings::Runner>, m: &Option<String>| match r {
        Some(r) => format!(
            "runner `{}`{}",
            r.name,
            m.as_ref()
                .map(|m| format!(", model {m}"))
                .unwrap_or_default()
        ),
        None => "the host starts it".to_owned(),
    };
    let _ = writeln!(b, "# Handover\n");
    let _ = writeln!(
        b,
        "In force: implementer {}; {}; up to {} attempts; landing `{}`; pace: {} lane{} and {} agent{} at once{}.\n",
        role(&s.implementer, &s.implementer_model),
        if s.independent {
            format!(
                "validators {} ({}{})",
                role(&s.validator, &s.validator_model),
                s.lenses
                    .as_ref()
                    .map_or("auto lenses".to_owned(), |l| l.join(", ")),
                if s.reviewers.is_empty() {
                    String::new()
                } else {
                    format!(" + {}", s.reviewers.join(", "))
                }
            )
        } else {
            "no independent validators (the loop's own checks only)".to_owned()
        },
        s.max_attempts,
        s.land.mode,
        s.pace.lanes,
        if s.pace.lanes == 1 { "" } else { "s" },
        s.pace.agents,
        if s.pace.agents == 1 { "" } else { "s" },
        s.pace.ruling.as_ref().map_or(String::new(), |r| format!(
            " (ruling of {}: {})",
            r["from"].as_str().unwrap_or("?"),
            r["why"].as_str().unwrap_or("no reason given")
        ))
    );
    if runs.is_empty() {
        let _ = writeln!(b, "No live run. Start one with `iced build <id>`.");
        return b;
    }
    for run in runs {
        let _ = writeln!(
            b,
            "## {} ({}, {} driver)\n",
            run.id,
            run.status.as_str(),
            match run.driver {
                super::state::Driver::Host => "host",
                super::state::Driver::Process => "process",
            }
        );
        for lane in &run.lanes {
            let _ = writeln!(
                b,
                "- {}: {} (attempt {}). {}",
                lane.id,
                lane.stage.as_str(),
                lane.attempt,
                next_move(ctx, run, lane)
            );
            let open: Vec<&str> = lane
                .findings
                .iter()
                .filter(|f| f.status == "open")
                .map(|f| f.id.as_str())
                .collect();
            if !open.is_empty() {
                let _ = writeln!(b, "  Open findings: {}.", open.join(", "));
            }
            if let Some(reason) = lane
                .reason
                .as_ref()
                .filter(|_| lane.stage == super::state::Stage::Blocked)
            {
                let _ = writeln!(b, "  Blocked: {}", reason.lines().next().unwrap_or(""));
            }
        }
        b.push('\n');
    }
    let _ = writeln!(
        b,
        "Drive it with `iced implement step` (repeat while it says `advanced` or `waiting`)."
    );
    b
}

/// One sentence: what this lane needs next and where it is awaited.
pub fn next_move(ctx: &Ctx<'_>, run: &Run, lane: &Lane) -> String {
    use super::state::Stage::*;
    let started: Vec<&str> = lane
        .steps
        .iter()
        .filter(|r| r.attempt == lane.attempt && r.status == StepStatus::Started)
        .map(|r| r.step.as_str())
        .collect();
    let holder = super::decide::holder(run).filter(|h| h.id != lane.id && run.lanes.len() > 1);
    if !super::decide::started(lane) {
        return match (lane.depends.is_empty(), holder) {
            (_, Some(h)) => format!("Queued; nothing starts while `{}` holds the run.", h.id),
            (true, None) => "Queued for a free lane.".into(),
            (false, None) => format!("Queued after {}.", lane.depends.join(", ")),
        };
    }
    if let Some(h) = holder.filter(|_| lane.stage == Land && !super::decide::landing_begun(lane)) {
        return format!("Validated; waits to land while `{}` holds the run.", h.id);
    }
    let release = if run.lanes.len() > 1 && !lane.released {
        format!(
            " It holds the other lanes: `iced run release {} {}` or `iced run discard {} {}`.",
            run.id, lane.id, run.id, lane.id
        )
    } else {
        String::new()
    };
    match lane.stage {
        Blocked => format!(
            "Needs a person (`iced run resume` after fixing what the reason names).{release}"
        ),
        Handback => format!("Handed back: the contract needs a person.{release}"),
        Discarded => "Discarded; its branch is kept.".into(),
        Implement if lane.record("implement").is_some() => format!(
            "Awaiting the implementer's report at `{}`.",
            ctx.receipt_path(&run.id, &lane.id, lane.attempt).display()
        ),
        Implement => "Next: start the implementer.".into(),
        Validate | Refute if !started.is_empty() => format!("Awaiting {}.", started.join(", ")),
        // Delivered on its branch (`land.mode: none`): landing it is a person's move.
        Delivered if lane.outcome("retire").is_none() => format!(
            "Delivered on `{}`: merge it, then `iced run retire`.",
            lane.branch.as_deref().unwrap_or("")
        ),
        Delivered => "Done.".into(),
        Retire if lane.outcome("pr-open").is_some() => format!(
            "Awaiting pull request {} to land.",
            lane.outcome("pr-open")
                .map_or("", |o| o["url"].as_str().unwrap_or(""))
        ),
        _ if !started.is_empty() => format!("In progress: {}.", started.join(", ")),
        stage => format!("Next: {}.", stage.as_str()),
    }
}

#[cfg(test)]
mod tests {
    /// Regression: with no agent that reported a cost, the sum was -0.0 and `run show --json`
    /// printed `"usd": -0.0`.
    #[test]
    fn no_known_cost_sums_to_plus_zero() {
        let cost = super::cost(&[serde_json::json!({"cost_usd": "unknown"})]);
        assert_eq!(serde_json::to_string(&cost["usd"]).unwrap(), "0.0");
    }
}
