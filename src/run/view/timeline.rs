//! A run's timeline as a value (`run show --html`, SPEC 20.6): a row per lane, per agent and per
//! kind of work (definition-of-done commands, landing, waits for the pace), each with its bars in
//! seconds from the run's start, and each lane's findings with their fate. Read from the run (its
//! step records), its agents and its `paced` events; `cli::render::timeline` draws it.

use super::agent::{Agent, Who};
use crate::run::keys::StepKey;
use crate::run::outcome::LandOutcome;
use crate::run::record::Cost;
use crate::run::state::{Lane, Run, RunPaths, Stage, StepRecord, StepStatus};
use crate::run::Ctx;
use chrono::{DateTime, Utc};
use serde::Deserialize;

/// The events log is read up to this many bytes: a timeline is worth less than a bounded read.
const EVENTS_LIMIT: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub run: String,
    pub unit: String,
    /// The unit's title, as its file says (none when it cannot be read).
    pub title: Option<String>,
    /// The run's status, as the state spells it.
    pub status: &'static str,
    /// Seconds from the run's start to the end of its last bar.
    pub span: i64,
    pub rows: Vec<Row>,
    pub findings: Vec<LaneFindings>,
    pub cost: Cost,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The lane it belongs to; none for the run's own pace.
    pub lane: Option<String>,
    pub kind: RowKind,
    pub bars: Vec<Bar>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RowKind {
    /// The lane from its first step to its last, ending in `stage`; its unit's title.
    Lane { stage: Stage, title: Option<String> },
    /// One agent: an implementer, a validator (by name) or the refuter, in one attempt.
    Agent { step: StepKey, attempt: u32 },
    /// The lane's definition-of-done commands (and their runs again when landing).
    Commands,
    /// Deliver, integrate, land, push, pull request.
    Landing,
    /// The run waiting for its pace (rate limits, the work window, a pause until a time).
    Pace,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The step (`implement`, `dod-0-0`, `land-1`), or `pace` for a wait.
    pub step: String,
    pub attempt: u32,
    /// Seconds from the run's start.
    pub start: i64,
    /// Seconds from the run's start; none while it runs.
    pub end: Option<i64>,
    pub outcome: BarOutcome,
    /// What its agent was, for an agent's bar.
    pub agent: Option<AgentFacts>,
    /// How long it took in milliseconds, when something measured it (else the end less the start,
    /// in seconds, is all that is known).
    pub duration_ms: Option<u64>,
    /// Why a wait for the pace was (`rate_limited`, `work_window`, `pause`).
    pub why: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarOutcome {
    Done,
    Failed,
    /// Failed because the world was not there yet (a moved target, an unmerged pull request).
    Waits,
    Running,
    /// A wait for the pace.
    Paced,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentFacts {
    pub runner: Option<String>,
    pub model: Option<String>,
    /// In US dollars; none when it was not reported (never read as zero).
    pub cost_usd: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LaneFindings {
    pub lane: String,
    pub findings: Vec<FindingFate>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FindingFate {
    pub id: String,
    pub severity: String,
    pub by: String,
    pub round: u32,
    /// `open`, `refuted`, `applied`, `rejected` or `noted`.
    pub status: String,
    pub summary: String,
}

impl Timeline {
    /// Every bar of every row.
    pub fn bars(&self) -> usize {
        self.rows.iter().map(|r| r.bars.len()).sum()
    }
}

/// The timeline of `run`, with its agents (as `run show` reads them), its events and the titles
/// of its units.
pub fn timeline(ctx: &Ctx<'_>, run: &Run, agents: &[Agent], cost: Cost) -> Timeline {
    let title = |unit: &str| {
        crate::repo::read_text(&ctx.repo.unit_paths(unit).iced)
            .ok()
            .and_then(|t| crate::unit::parse_unit(&t).title)
    };
    build(&ctx.paths, &title, run, agents, cost)
}

/// Titles of units, by id.
type Titles<'a> = dyn Fn(&str) -> Option<String> + 'a;

fn build(paths: &RunPaths, titles: &Titles, run: &Run, agents: &[Agent], cost: Cost) -> Timeline {
    let start = at(&run.created_at).unwrap_or_default();
    let secs = |s: &str| at(s).map_or(0, |t| (t - start).num_seconds().max(0));
    let mut rows = Vec::new();
    let pace = pace_bars(paths, &run.id, &secs);
    if !pace.is_empty() {
        rows.push(Row {
            lane: None,
            kind: RowKind::Pace,
            bars: pace,
        });
    }
    for lane in &run.lanes {
        lane_rows(lane, titles(&lane.unit), agents, &secs, &mut rows);
    }
    let span = rows
        .iter()
        .flat_map(|r| &r.bars)
        .map(|b| b.end.unwrap_or(b.start))
        .max()
        .unwrap_or(0)
        .max(secs(&run.updated_at));
    let findings = run
        .lanes
        .iter()
        .filter(|l| !l.findings.is_empty())
        .map(|l| LaneFindings {
            lane: l.id.clone(),
            findings: l
                .findings
                .iter()
                .map(|f| FindingFate {
                    id: f.id.clone(),
                    severity: f.evidence.severity.clone(),
                    by: f.by.clone(),
                    round: f.round,
                    status: f.status.clone(),
                    summary: f.evidence.summary.clone(),
                })
                .collect(),
        })
        .collect();
    Timeline {
        run: run.id.clone(),
        unit: run.unit.clone(),
        title: titles(&run.unit),
        status: run.status.as_str(),
        span,
        rows,
        findings,
        cost,
    }
}

fn at(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The lane's row, then one per agent in the order they started, then its commands and landing.
fn lane_rows(
    lane: &Lane,
    title: Option<String>,
    agents: &[Agent],
    secs: &dyn Fn(&str) -> i64,
    rows: &mut Vec<Row>,
) {
    let bar = |r: &StepRecord| step_bar(lane, r, agents, secs);
    let first = lane.steps.iter().map(|r| secs(&r.started_at)).min();
    let last = lane
        .steps
        .iter()
        .map(|r| r.ended_at.as_deref().map(secs))
        .try_fold(0, |max, end| end.map(|e| max.max(e)));
    if let Some(first) = first {
        rows.push(Row {
            lane: Some(lane.id.clone()),
            kind: RowKind::Lane {
                stage: lane.stage,
                title,
            },
            bars: vec![Bar {
                step: lane.stage.as_str().to_owned(),
                attempt: lane.attempt,
                start: first,
                end: if lane.stage.is_final() { last } else { None },
                outcome: match lane.stage {
                    Stage::Delivered => BarOutcome::Done,
                    Stage::Blocked | Stage::Handback | Stage::Discarded => BarOutcome::Failed,
                    _ => BarOutcome::Running,
                },
                agent: None,
                duration_ms: None,
                why: None,
            }],
        });
    }
    for r in lane.steps.iter().filter(|r| {
        matches!(r.step, StepKey::Implement | StepKey::TestWrite) || r.step.is_validator()
    }) {
        rows.push(Row {
            lane: Some(lane.id.clone()),
            kind: RowKind::Agent {
                step: r.step.clone(),
                attempt: r.attempt,
            },
            bars: vec![bar(r)],
        });
    }
    let kinds: [(RowKind, StepKind); 2] = [
        (RowKind::Commands, StepKey::is_dod),
        (RowKind::Landing, |k| {
            k.is_landing() || matches!(k, StepKey::Deliver | StepKey::PrOpen | StepKey::PrArm)
        }),
    ];
    for (kind, which) in kinds {
        let bars: Vec<Bar> = lane
            .steps
            .iter()
            .filter(|r| which(&r.step))
            .map(bar)
            .collect();
        if !bars.is_empty() {
            rows.push(Row {
                lane: Some(lane.id.clone()),
                kind,
                bars,
            });
        }
    }
}

fn step_bar(lane: &Lane, r: &StepRecord, agents: &[Agent], secs: &dyn Fn(&str) -> i64) -> Bar {
    let key = r.step.to_string();
    let agent = agents
        .iter()
        .find(|a| a.lane == lane.id && a.step == key && a.attempt == u64::from(r.attempt));
    let waits = r.outcome_as::<LandOutcome>().is_some_and(|o| o.again);
    let start = secs(&r.started_at);
    let end = r.ended_at.as_deref().map(secs);
    let measured = r.outcome.as_ref().and_then(|o| {
        o["duration_ms"]
            .as_u64()
            .or(o["finished"]["duration_ms"].as_u64())
    });
    let (facts, agent_ms) = match agent.map(|a| &a.who) {
        Some(Who::Runner {
            runner,
            model,
            cost_usd,
            duration_ms,
            ..
        }) => (
            Some(AgentFacts {
                runner: runner.clone(),
                model: model.clone(),
                cost_usd: *cost_usd,
            }),
            *duration_ms,
        ),
        Some(Who::Host { model, .. }) => (
            Some(AgentFacts {
                runner: Some("host".into()),
                model: model.clone(),
                cost_usd: None,
            }),
            None,
        ),
        None if matches!(r.step, StepKey::Implement | StepKey::TestWrite)
            || r.step.is_validator() =>
        {
            (
                Some(AgentFacts {
                    runner: None,
                    model: None,
                    cost_usd: None,
                }),
                None,
            )
        }
        None => (None, None),
    };
    Bar {
        step: key,
        attempt: r.attempt,
        start,
        end,
        outcome: match r.status {
            StepStatus::Done => BarOutcome::Done,
            StepStatus::Failed if waits => BarOutcome::Waits,
            StepStatus::Failed => BarOutcome::Failed,
            StepStatus::Started => BarOutcome::Running,
        },
        agent: facts,
        duration_ms: agent_ms.or(measured),
        why: None,
    }
}

/// Which steps a row of a lane holds.
type StepKind = fn(&StepKey) -> bool;

/// One line of the events log, as far as a wait for the pace needs it.
#[derive(Deserialize)]
struct PacedLine {
    #[serde(default)]
    run: String,
    #[serde(default)]
    event: String,
    #[serde(default)]
    ts: String,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    why: Option<String>,
}

/// Each `paced` event of `run`: a wait from the event to its `until`.
fn pace_bars(paths: &RunPaths, run: &str, secs: &dyn Fn(&str) -> i64) -> Vec<Bar> {
    let Ok(bytes) = crate::store::read_no_follow(&paths.events(), EVENTS_LIMIT) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str::<PacedLine>(l).ok())
        .filter(|l| l.run == run && l.event == "paced")
        .map(|l| {
            let start = secs(&l.ts);
            let end = l.until.as_deref().map(secs).map(|e| e.max(start));
            Bar {
                step: "pace".into(),
                attempt: 0,
                start,
                end,
                outcome: BarOutcome::Paced,
                agent: None,
                duration_ms: None,
                why: l.why,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::record::AgentEntry;
    use serde_json::json;

    /// A bar's start, end and outcome.
    type Span = (i64, Option<i64>, BarOutcome);

    fn step(
        key: &str,
        attempt: u32,
        status: &str,
        from: &str,
        to: Option<&str>,
    ) -> serde_json::Value {
        json!({"step": key, "attempt": attempt, "status": status, "started_at": from,
               "ended_at": to, "inputs": null, "nonce": null, "pid": null, "pid_start": null,
               "outcome": if key == "land-1" { json!({"again": true}) } else { json!({}) }})
    }

    /// A run of two fix rounds with a refuter, a landing that waits and a wait for the pace: each
    /// bar in seconds from the run's start, on its row, coloured by how it ended, with its agent.
    #[test]
    fn a_run_becomes_rows_of_bars_from_its_start() {
        let t0 = "2026-09-30T11:00:00Z";
        let at = |s: u32| format!("2026-09-30T11:{:02}:{:02}Z", s / 60, s % 60);
        let run: Run = serde_json::from_value(json!({
            "id": "run-1", "unit": "u", "status": "running", "driver": "process", "session": null,
            "created_at": t0, "updated_at": at(100), "base": {"commit": "c", "branch": "main"},
            "next_eligible_at": null,
            "lanes": [{
                "id": "u", "unit": "u", "stage": "land", "attempt": 2, "crashes": 0,
                "worktree": null, "branch": null, "reason": null,
                "steps": [
                    step("implement", 1, "done", &at(0), Some(&at(30))),
                    step("dod-0-0", 1, "failed", &at(30), Some(&at(32))),
                    step("implement", 2, "done", &at(40), Some(&at(70))),
                    step("validate-full", 2, "done", &at(70), Some(&at(80))),
                    step("refute", 2, "failed", &at(80), Some(&at(85))),
                    step("land-1", 1, "failed", &at(90), Some(&at(95))),
                    step("land-1", 2, "started", &at(96), None),
                ],
                "findings": [{"id": "u-F1", "by": "full", "round": 2, "status": "refuted",
                              "evidence": {"file_path": "a", "criterion_ref": "E1", "finding_category": "c", "severity": "S2-major", "summary": "<b>x</b>", "failure_scenario": {"inputs": "i", "expected": "e", "actual": "a"}}}],
            }],
        }))
        .expect("a run");
        let dir = tempfile::tempdir().unwrap();
        let paths = RunPaths::new(dir.path());
        std::fs::create_dir_all(&paths.dir).unwrap();
        std::fs::write(
            paths.events(),
            format!(
                "{}\n{}\nnot json\n",
                json!({"ts": at(32), "run": "run-1", "event": "paced", "until": at(40), "why": "rate_limited"}),
                json!({"ts": at(33), "run": "run-2", "event": "paced", "until": at(50)}),
            ),
        )
        .unwrap();
        let agent = |step: &str, attempt: u32, cost: serde_json::Value| {
            super::super::Agent::of(
                &AgentEntry::deserialize(json!({"lane": "u", "step": step, "attempt": attempt,
                    "runner": "cc", "model": "m", "cost_usd": cost, "duration_ms": 29000,
                    "status": "done"}))
                .unwrap(),
            )
        };
        let agents = [
            agent("implement", 1, json!(0.5)),
            agent("implement", 2, json!("unknown")),
        ];
        let titles = |unit: &str| (unit == "u").then(|| "A <title>".to_owned());
        let t = build(&paths, &titles, &run, &agents, Cost::default());
        let rows: Vec<(Option<&str>, &RowKind, Vec<Span>)> = t
            .rows
            .iter()
            .map(|r| {
                let bars = r.bars.iter().map(|b| (b.start, b.end, b.outcome)).collect();
                (r.lane.as_deref(), &r.kind, bars)
            })
            .collect();
        use BarOutcome::*;
        let agent_row = |step: StepKey, attempt| RowKind::Agent { step, attempt };
        assert_eq!(
            rows,
            vec![
                (None, &RowKind::Pace, vec![(32, Some(40), Paced)]),
                (
                    Some("u"),
                    &RowKind::Lane {
                        stage: Stage::Land,
                        title: Some("A <title>".into())
                    },
                    vec![(0, None, Running)]
                ),
                (
                    Some("u"),
                    &agent_row(StepKey::Implement, 1),
                    vec![(0, Some(30), Done)]
                ),
                (
                    Some("u"),
                    &agent_row(StepKey::Implement, 2),
                    vec![(40, Some(70), Done)]
                ),
                (
                    Some("u"),
                    &agent_row(StepKey::Validate("full".into()), 2),
                    vec![(70, Some(80), Done)]
                ),
                (
                    Some("u"),
                    &agent_row(StepKey::Refute, 2),
                    vec![(80, Some(85), Failed)]
                ),
                (Some("u"), &RowKind::Commands, vec![(30, Some(32), Failed)]),
                (
                    Some("u"),
                    &RowKind::Landing,
                    vec![(90, Some(95), Waits), (96, None, Running)]
                ),
            ]
        );
        assert_eq!(t.span, 100);
        assert_eq!(t.bars(), 9);
        let facts = |i: usize| t.rows[i].bars[0].agent.clone().unwrap();
        assert_eq!(facts(2).cost_usd, Some(0.5));
        assert_eq!(facts(3).cost_usd, None, "an unknown cost stays unknown");
        assert_eq!(facts(2).model.as_deref(), Some("m"));
        assert_eq!(t.rows[2].bars[0].duration_ms, Some(29000));
        assert_eq!(
            facts(5).runner,
            None,
            "a refuter with no agent entry is still an agent"
        );
        assert_eq!(t.rows[0].bars[0].why.as_deref(), Some("rate_limited"));
        assert_eq!(t.findings[0].findings[0].status, "refuted");
        assert_eq!(
            t.findings[0].findings[0].summary, "<b>x</b>",
            "escaped when drawn, not here"
        );
    }
}
