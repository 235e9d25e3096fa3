//! The run record (`.iced/run/<run>/record.json`) with its agents and their cost, and the body of a
//! pull request: two ways of telling a run from what the loop recorded, for a machine and a
//! reviewer. What a person reads of a run (`run show`, the handover) is asked of `run::view` and
//! worded by the command line.

use super::ctx::Ctx;
use super::keys::StepKey;
use super::outcome::{ActivityOutcome, HarnessSaid, ValidatorOutcome};
use super::state::{Lane, Run, RunPaths};
use super::state::{StepRecord, StepStatus};
use serde::{Deserialize, Serialize};
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
    // A history line is a step record with its lane beside it.
    let mut records: Vec<(String, StepRecord)> = history
        .iter()
        .filter_map(|h| {
            let mut h = h.clone();
            let lane = h.as_object_mut()?.remove("lane")?.as_str()?.to_owned();
            Some((lane, serde_json::from_value(h).ok()?))
        })
        .collect();
    for lane in &run.lanes {
        for r in &lane.steps {
            records.push((lane.id.clone(), r.clone()));
        }
    }
    let mut out = Vec::new();
    let host_run = run.driver == super::state::Driver::Host;
    for (lane, r) in records {
        let started = r.status == StepStatus::Started;
        if super::host::was_handed(&r, host_run) {
            // Answered, or ended unanswered with its attempt, lane or run; not while alive.
            if !started {
                out.push(host_agent(&lane, &r));
            }
            continue;
        }
        let implementer =
            r.step == StepKey::Implement && run.driver == super::state::Driver::Process;
        let validator = r.step.is_validator() && s.validator.is_some();
        if !(implementer || validator) || r.nonce.is_none() || started {
            continue;
        }
        let (runner, model) = if implementer {
            (&s.implementer, &s.implementer_model)
        } else {
            (&s.validator, &s.validator_model)
        };
        // A validator's outcome keeps its activity's under `finished`.
        let activity: ActivityOutcome = match r.outcome_as::<ValidatorOutcome>() {
            Some(ValidatorOutcome {
                finished: Some(f), ..
            }) if f.is_object() => ActivityOutcome::deserialize(&f).unwrap_or_default(),
            _ => r.outcome_as::<ActivityOutcome>().unwrap_or_default(),
        };
        let said = r
            .outcome_as::<ActivityOutcome>()
            .and_then(|o| o.harness)
            .and_then(|h| HarnessSaid::deserialize(&h).ok())
            .unwrap_or_default();
        out.push(json!({
            "lane": lane,
            "step": r.step,
            "attempt": r.attempt,
            "runner": runner.as_ref().map(|r| r.name.clone()),
            "model": said.model.or_else(|| model.clone()),
            "turns": said.turns,
            "cost_usd": said.cost_usd.filter(Value::is_number).unwrap_or_else(|| "unknown".into()),
            "duration_ms": activity.duration_ms,
            "exit_code": activity.exit_code,
            "status": r.status,
        }));
    }
    out
}

/// An agent handed to the host (SPEC 24.8): what the host said it used, or `unknown`; its cost
/// is never known to the loop.
fn host_agent(lane: &str, r: &StepRecord) -> Value {
    let outcome = r.outcome.clone().unwrap_or(Value::Null);
    let said = super::host::said(&outcome);
    let ended = r.outcome_as::<ActivityOutcome>().and_then(|o| o.ended);
    json!({
        "lane": lane,
        "step": r.step,
        "attempt": r.attempt,
        "runner": "host",
        "model": said.model.as_deref().unwrap_or("unknown"),
        "session": said.session.as_deref().unwrap_or("unknown"),
        "turns": null,
        "cost_usd": "unknown",
        "duration_ms": null,
        "exit_code": null,
        "status": r.status,
        "ended": ended,
    })
}

/// What a run's agents cost: the sum of what was reported, and how many agents reported none (so
/// an unknown is never read as free). Serialised as the record's and `run show`'s `cost`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cost {
    /// Dollars, summed over the agents that reported a cost, rounded to a millionth.
    pub usd: f64,
    /// Every agent counted, whether it reported a cost or not.
    pub agents: usize,
    /// Those of `agents` that reported none.
    pub unknown: usize,
}

/// The run's cost, from [`agents`].
pub fn cost(agents: &[Value]) -> Cost {
    let known: Vec<f64> = agents
        .iter()
        .filter_map(|a| a["cost_usd"].as_f64())
        .collect();
    Cost {
        // A fold from 0.0, not `sum`: the sum of no floats is -0.0, printed `"usd": -0.0`.
        usd: (known.iter().fold(0.0, |total, c| total + c) * 1e6).round() / 1e6,
        agents: agents.len(),
        unknown: agents.len() - known.len(),
    }
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
    if super::state::ensure_dir(&dir, ctx.verb).is_err() {
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
    let receipt = lane
        .outcome(&StepKey::Receipt)
        .cloned()
        .unwrap_or(Value::Null);
    let report: Value = super::kept::load_from(Some(&receipt), "report").unwrap_or(Value::Null);
    if let Some(summary) = report["summary"].as_str() {
        let _ = writeln!(b, "{summary}\n");
    }
    let merged = lane
        .outcome(&StepKey::Judge)
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

#[cfg(test)]
mod cost_tests {
    /// Regression: with no agent that reported a cost, the sum was -0.0 and `run show --json`
    /// printed `"usd": -0.0`.
    #[test]
    fn no_known_cost_sums_to_plus_zero() {
        let cost = super::cost(&[serde_json::json!({"cost_usd": "unknown"})]);
        assert_eq!(
            serde_json::to_string(&serde_json::to_value(cost).unwrap()["usd"]).unwrap(),
            "0.0"
        );
    }
}
