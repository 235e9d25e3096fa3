//! The run record (`.iced/run/<run>/record.json`) with its agents and their cost, and the body of a
//! pull request: two ways of telling a run from what the loop recorded, for a machine and a
//! reviewer. What a person reads of a run (`run show`, the handover) is asked of `run::view` and
//! worded by the command line.

use super::ctx::Ctx;
use super::kept::load;
use super::keys::StepKey;
use super::outcome::{
    or_default, ActivityOutcome, CommandRan, HarnessSaid, JudgeOutcome, ReceiptOutcome,
    ValidatorOutcome,
};
use super::report::Report;
use super::state::{Lane, Run, RunPaths};
use super::state::{StepRecord, StepStatus};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Number, Value};
use std::fmt::Write;

/// One agent of a run, as the record's `agents` and `run show --json` write it: one the loop
/// launched with a runner, or one handed to the host (`session` and `ended` only for those). Read
/// back from a record leniently: what an entry does not hold is none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentEntry {
    #[serde(deserialize_with = "or_default")]
    pub lane: String,
    #[serde(deserialize_with = "or_default")]
    pub step: String,
    #[serde(deserialize_with = "or_default")]
    pub attempt: u32,
    /// `host` for an agent handed to the host.
    #[serde(deserialize_with = "or_default")]
    pub runner: Option<String>,
    #[serde(deserialize_with = "or_default")]
    pub model: Option<String>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "or_default"
    )]
    pub session: Option<String>,
    #[serde(deserialize_with = "or_default")]
    pub turns: Option<u64>,
    #[serde(deserialize_with = "or_default")]
    pub cost_usd: CostUsd,
    #[serde(deserialize_with = "or_default")]
    pub duration_ms: Option<u64>,
    #[serde(deserialize_with = "or_default")]
    pub exit_code: Option<i64>,
    /// The signal that ended it, when one did (absent otherwise).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "or_default"
    )]
    pub signal: Option<i64>,
    /// It ran out of its time and was stopped (absent otherwise).
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "or_default"
    )]
    pub timed_out: bool,
    /// Its model is the configured one: its harness reported none (absent when it did).
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "or_default"
    )]
    pub model_configured: bool,
    #[serde(deserialize_with = "or_default")]
    pub status: Option<StepStatus>,
    /// A host's agent only, always written (`null` when it answered or failed): why its attempt,
    /// lane or run ended before it answered.
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub ended: Option<Option<String>>,
}

/// A key that is there, even as `null` or not a string, is `Some`; a missing one (the field's
/// default) is `None`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(or_default(d)?))
}

/// What an agent cost, in dollars as its harness reported the number (an integer stays one), or
/// `"unknown"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CostUsd {
    Usd(Number),
    /// Not reported: written `"unknown"`.
    Unknown(String),
}

impl Default for CostUsd {
    fn default() -> Self {
        CostUsd::Unknown("unknown".to_owned())
    }
}

impl CostUsd {
    /// The dollars, when reported.
    pub fn usd(&self) -> Option<f64> {
        match self {
            // A negative cost an older release recorded is unknown too (SPEC 20.12).
            CostUsd::Usd(n) => n.as_f64().and_then(crate::runner::cost),
            CostUsd::Unknown(_) => None,
        }
    }
}

/// A record written when a run left the state, as far as `run show` reads it: the run, and its
/// agents and their cost (records of older releases have neither).
#[derive(Debug, Clone, Deserialize)]
pub struct RunRecord {
    pub run: Run,
    /// `None` when the record has no list of agents, or one that does not read.
    #[serde(default, deserialize_with = "or_default")]
    pub agents: Option<Vec<AgentEntry>>,
    /// Zero when the record has none, or one that does not read.
    #[serde(default, deserialize_with = "or_default")]
    pub cost: Cost,
    /// Present for a run with a budget (SPEC 20.12).
    #[serde(default, deserialize_with = "or_default")]
    pub budget: Option<Budget>,
}

/// The record of a run: the run as the state holds it, every step record of earlier attempts
/// (from `history.jsonl`), and the settings it ran under.
pub fn record(ctx: &Ctx<'_>, run: &Run) -> Value {
    // Every lane whole, an ended one as its `lane.json` holds it (SPEC 21.2).
    let run = &super::ended::whole(&ctx.paths, run);
    let history = history(ctx, &run.id);
    let s = &ctx.settings;
    let mut record = json!({
        "run": run,
        "history": history,
        "settings": {
            "implementer": s.implementer.as_ref().map(|r| json!({"runner": r.name, "argv": r.argv, "model": s.implementer_model})),
            "validator": s.validator.as_ref().map(|r| json!({"runner": r.name, "argv": r.argv, "model": s.validator_model, "models": s.verify_models, "effort": s.verify_effort})),
            "lenses": s.lenses, "reviewers": s.reviewers, "refute": s.refute,
            "max_attempts": s.max_attempts, "independent": s.independent,
            "land": {"mode": s.land.mode, "target": s.land.target, "strategy": s.land.strategy, "remote": s.land.remote, "arm": s.land.arm},
        },
        "agents": agents(ctx, run, &history),
        "cost": cost(&agents(ctx, run, &history)),
        "written_at": crate::clock::now_iso(),
    });
    // Only a run with a budget says what is left of it (SPEC 20.12).
    if let Some(b) = budget(&super::ctx::run_pace(ctx, run), &agents(ctx, run, &history)) {
        record["budget"] = serde_json::to_value(b).expect("a budget serialises");
    }
    record
}

/// Every agent the run launched or handed to the host, earlier attempts included: runner, model
/// (as the harness reported it, else as configured; a host's as the host said, else `unknown`),
/// turns, cost (`unknown` when not reported, and always for a host's), duration, exit.
pub fn agents(ctx: &Ctx<'_>, run: &Run, history: &[Value]) -> Vec<AgentEntry> {
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
        let planning = r.step.is_plan_agent();
        let tester = r.step == StepKey::TestWrite;
        if !(implementer || validator || planning || tester) || r.nonce.is_none() || started {
            continue;
        }
        // A validator's model is the one `verify.model`'s rotation gave it (SPEC 11).
        let (runner, model) = if implementer {
            (&s.implementer, s.implementer_model.clone())
        } else if tester {
            let model = s
                .test_writer
                .as_ref()
                .and_then(|t| t.model_for(r.attempt).0);
            (&s.implementer, model)
        } else if let StepKey::Plan(_) = r.step {
            (&s.planner, s.planner_model.clone())
        } else if planning {
            (&s.plan_reviewer, s.plan_reviewer_model.clone())
        } else {
            let name = r.step.validator_name().unwrap_or("");
            (&s.validator, s.validator_model_for(name).0)
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
        out.push(AgentEntry {
            lane,
            step: r.step.to_string(),
            attempt: r.attempt,
            runner: runner.as_ref().map(|r| r.name.clone()),
            model_configured: said.model.is_none() && model.is_some(),
            model: said.model.or(model),
            session: None,
            turns: said.turns,
            cost_usd: match said.cost_usd {
                Some(Value::Number(n)) if n.as_f64().and_then(crate::runner::cost).is_some() => {
                    CostUsd::Usd(n)
                }
                _ => CostUsd::default(),
            },
            duration_ms: activity.duration_ms,
            exit_code: activity.exit_code,
            signal: activity.signal,
            timed_out: activity.timed_out,
            status: Some(r.status),
            ended: None,
        });
    }
    out
}

/// An agent handed to the host (SPEC 24.8): what the host said it used, or `unknown`; its cost
/// is never known to the loop.
fn host_agent(lane: &str, r: &StepRecord) -> AgentEntry {
    let outcome = r.outcome.clone().unwrap_or(Value::Null);
    let said = super::host::said(&outcome);
    let ended = r.outcome_as::<ActivityOutcome>().and_then(|o| o.ended);
    let unknown = || Some("unknown".to_owned());
    AgentEntry {
        lane: lane.to_owned(),
        step: r.step.to_string(),
        attempt: r.attempt,
        runner: Some("host".to_owned()),
        model: said.model.or_else(unknown),
        session: said.session.or_else(unknown),
        turns: None,
        cost_usd: CostUsd::default(),
        duration_ms: None,
        exit_code: None,
        signal: None,
        timed_out: false,
        model_configured: false,
        status: Some(r.status),
        ended: Some(ended),
    }
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
pub fn cost(agents: &[AgentEntry]) -> Cost {
    let known: Vec<f64> = agents.iter().filter_map(|a| a.cost_usd.usd()).collect();
    Cost {
        // A fold from 0.0, not `sum`: the sum of no floats is -0.0, printed `"usd": -0.0`.
        usd: (known.iter().fold(0.0, |total, c| total + c) * 1e6).round() / 1e6,
        agents: agents.len(),
        unknown: agents.len() - known.len(),
    }
}

/// What a run with a budget charged against it and has left (SPEC 20.12): every agent that
/// ended, at its reported cost, or at the estimate when its cost is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub usd: f64,
    pub charged_usd: f64,
    /// Never below zero.
    pub left_usd: f64,
    /// The agents charged the estimate.
    pub unknown: usize,
    pub unknown_cost_usd: f64,
}

impl Budget {
    /// No agent may start: the charge has reached the budget.
    pub fn spent(&self) -> bool {
        self.charged_usd >= self.usd
    }
}

/// The budget of a run keeping `pace`, charged for `agents`; `None` without a budget.
pub fn budget(pace: &super::pace::Pace, agents: &[AgentEntry]) -> Option<Budget> {
    let usd = pace.budget_usd?;
    let estimate = pace
        .unknown_cost_usd
        .unwrap_or(super::pace::UNKNOWN_COST_USD);
    let cost = cost(agents);
    let charged = round_usd(cost.usd + cost.unknown as f64 * estimate);
    Some(Budget {
        usd,
        charged_usd: charged,
        left_usd: round_usd((usd - charged).max(0.0)),
        unknown: cost.unknown,
        unknown_cost_usd: estimate,
    })
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    fn agent(cost: Value) -> AgentEntry {
        serde_json::from_value(json!({"cost_usd": cost})).unwrap()
    }

    /// An unknown cost is charged the estimate, never zero; what is left never goes below zero.
    #[test]
    fn unknown_costs_are_charged_the_estimate() {
        let pace = super::super::pace::Pace {
            budget_usd: Some(2.0),
            unknown_cost_usd: Some(0.75),
            ..Default::default()
        };
        let agents = [
            agent(json!(0.5)),
            agent(json!("unknown")),
            agent(json!("unknown")),
        ];
        let b = budget(&pace, &agents).unwrap();
        assert_eq!((b.charged_usd, b.left_usd, b.unknown), (2.0, 0.0, 2));
        assert!(b.spent());
        let b = budget(&pace, &agents[..2]).unwrap();
        assert_eq!((b.charged_usd, b.left_usd), (1.25, 0.75));
        assert!(!b.spent());
        let none = super::super::pace::Pace::default();
        assert_eq!(budget(&none, &agents), None);
    }

    /// Issue 35, why-case 8: a cost of -1000 recorded for an agent (by an older release) paid the
    /// budget back; it is unknown, and charged the estimate.
    #[test]
    fn a_negative_cost_is_charged_as_unknown() {
        let pace = super::super::pace::Pace {
            budget_usd: Some(1.5),
            ..Default::default()
        };
        let agents = [agent(json!(-1000)), agent(json!(-0.5))];
        let b = budget(&pace, &agents).unwrap();
        assert_eq!((b.charged_usd, b.unknown), (2.0, 2));
        assert!(b.spent());
        assert_eq!(
            cost(&agents),
            Cost {
                usd: 0.0,
                agents: 2,
                unknown: 2
            }
        );
    }
}

/// Dollars to a millionth, as `cost` rounds them.
fn round_usd(x: f64) -> f64 {
    (x * 1e6).round() / 1e6 + 0.0
}

/// The charge of a run as it stands (SPEC 20.12): its agents so far, earlier attempts included.
pub fn charge(ctx: &Ctx<'_>, run: &Run) -> Option<Budget> {
    charge_with(ctx, run, &super::ctx::run_pace(ctx, run))
}

/// What a run's agents were charged (SPEC 20.12), with or without a budget: reported costs, and
/// each unknown one at the run's estimate (`pace.unknownCostUsd`, else its default).
pub fn charged_usd(ctx: &Ctx<'_>, run: &Run) -> f64 {
    let mut pace = super::ctx::run_pace(ctx, run);
    pace.budget_usd.get_or_insert(f64::MAX);
    charge_with(ctx, run, &pace).map_or(0.0, |b| b.charged_usd)
}

fn charge_with(ctx: &Ctx<'_>, run: &Run, pace: &super::pace::Pace) -> Option<Budget> {
    // Without a budget nothing is charged: the history is not read on every step for nothing.
    pace.budget_usd?;
    budget(pace, &agents(ctx, run, &history(ctx, &run.id)))
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
pub(crate) const HISTORY_LIMIT: u64 = 64 * 1024 * 1024;

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
        .outcome_as::<ReceiptOutcome>(&StepKey::Receipt)
        .unwrap_or_default();
    let report: Option<Report> = receipt.report.as_ref().and_then(load);
    if let Some(report) = &report {
        let _ = writeln!(b, "{}\n", report.summary);
    }
    let merged = lane
        .outcome_as::<JudgeOutcome>(&StepKey::Judge)
        .map(|j| j.merged);
    let _ = writeln!(b, "## Expectations\n");
    match merged {
        Some(merged) => {
            for (id, result) in &merged.expectations {
                let _ = writeln!(b, "- {id}: {result}");
            }
        }
        None => {
            let _ = writeln!(
                b,
                "Judged by the loop's own checks only (no independent validator): the definition of done passed and the implementer gave evidence for each expectation.\n"
            );
            for e in report.iter().flat_map(|r| &r.evidence) {
                let _ = writeln!(
                    b,
                    "- {}: verified by the loop's checks; evidence: {} `{}`",
                    e.expectation, e.kind, e.reference
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
    for c in receipt.commands.iter().map(CommandRan::of) {
        let exit = c
            .exit_code
            .map_or_else(|| "null".to_owned(), |e| e.to_string());
        let _ = writeln!(b, "- `{}`: exit {exit}", c.command);
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
        let cost =
            super::cost(&[
                serde_json::from_value(serde_json::json!({"cost_usd": "unknown"})).unwrap(),
            ]);
        assert_eq!(
            serde_json::to_string(&serde_json::to_value(cost).unwrap()["usd"]).unwrap(),
            "0.0"
        );
    }
}

#[cfg(test)]
mod agent_tests {
    use super::AgentEntry;

    /// An agent entry writes the bytes the record's `agents` always held (`session` and `ended`
    /// only for a host's, `ended` even as `null`; a reported cost as the harness gave the number),
    /// and reads them back to the same bytes.
    #[test]
    fn agent_entries_keep_their_bytes() {
        for line in [
            r#"{"lane":"u1","step":"implement","attempt":1,"runner":"host","model":"m","session":"s","turns":null,"cost_usd":"unknown","duration_ms":null,"exit_code":null,"status":"done","ended":null}"#,
            r#"{"lane":"u1","step":"implement","attempt":2,"runner":"host","model":"unknown","session":"unknown","turns":null,"cost_usd":"unknown","duration_ms":null,"exit_code":null,"status":"failed","ended":"the run ended (abandoned)"}"#,
            r#"{"lane":"u1","step":"implement","attempt":1,"runner":"claude","model":"opus","turns":7,"cost_usd":0.25,"duration_ms":1200,"exit_code":0,"status":"done"}"#,
            r#"{"lane":"u1","step":"validate-tests","attempt":1,"runner":"pi","model":null,"turns":null,"cost_usd":0,"duration_ms":null,"exit_code":null,"status":"failed"}"#,
        ] {
            let entry: AgentEntry = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&entry).unwrap(), line);
        }
    }

    /// A field that does not read as its type is none, as it was when read key by key.
    #[test]
    fn an_odd_field_is_none_and_the_rest_reads() {
        let entry: AgentEntry =
            serde_json::from_str(r#"{"lane":"u1","turns":"many","cost_usd":{},"ended":3}"#)
                .unwrap();
        assert_eq!(entry.lane, "u1");
        assert_eq!(entry.turns, None);
        assert_eq!(entry.cost_usd.usd(), None);
        assert_eq!(entry.ended, Some(None));
    }
}
