//! Agents the host drives (SPEC 24.8): an implementer, validator or refuter handed out by
//! `start_agent` is alive from that answer until its receipt, or until the attempt, lane or run
//! that handed it out ends. This module keeps that life on the step records (`handed` on the
//! outcome), counts the living, logs `agent_start`/`agent_end` once each, and keeps what the host
//! says its agent used. Whether an agent may be handed out is `decide`'s choice, never this
//! module's; nothing here reads a clock, a process or anything an agent wrote.

use super::ctx::Ctx;
use super::events::{emit, Event};
use super::outcome::{or_default, BriefOutcome};
use super::state::{Lane, Run, StepRecord, StepStatus};
use super::step_record::{finish, started};
use crate::run::keys::StepKey;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// What the host says its agent used (`implement receipt --model M --session S`): the host's
/// word, kept as given and never checked; `None` where it said nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostAgent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// The longest model or session name a host may give.
pub const LABEL_MAX: usize = 200;

/// A model or session name as the host gives it: kept as given when it is one line of at most
/// [`LABEL_MAX`] characters, not blank, with no control character; else why not.
pub fn check_label(given: &str) -> Result<String, String> {
    if given.trim().is_empty() {
        Err("it is empty".into())
    } else if given.chars().count() > LABEL_MAX {
        Err(format!("it is longer than {LABEL_MAX} characters"))
    } else if given.chars().any(char::is_control) {
        Err("it holds a control character".into())
    } else {
        Ok(given.to_owned())
    }
}

/// Where a host agent's step outcome keeps [`HostAgent`] (a validator's, under `finished`).
pub const SAID: &str = "host_agent";

/// The marks a step's outcome carries when its agent was handed to the host.
#[derive(Debug, Default, Deserialize)]
struct Marks {
    /// Handed out by `start_agent`.
    #[serde(default)]
    handed: bool,
    /// A validator's or refuter's answer is in (`{"host": true, ...}` for a host's).
    #[serde(default)]
    finished: Option<Value>,
}

fn marks(record: &StepRecord) -> Marks {
    record
        .outcome
        .as_ref()
        .and_then(|o| Marks::deserialize(o).ok())
        .unwrap_or_default()
}

/// An agent handed to the host whose receipt is not in: its record is started and handed, and
/// (a validator's) no answer is in.
pub fn is_live(record: &StepRecord) -> bool {
    if record.status != StepStatus::Started {
        return false;
    }
    let m = marks(record);
    m.handed && m.finished.as_ref().is_none_or(Value::is_null)
}

/// How many agents handed to the host are alive in `run` (SPEC 20.9, 24.8): those of the current
/// attempt of each lane still at work, in a run that has not ended.
pub fn alive(run: &Run) -> usize {
    if run.status.is_ended() {
        return 0;
    }
    run.lanes
        .iter()
        .filter(|l| !l.stage.is_final())
        .map(|l| {
            l.steps
                .iter()
                .filter(|r| r.attempt == l.attempt && is_live(r))
                .count()
        })
        .sum()
}

/// Whether a step record (of the state or the history) is of an agent handed to the host: an
/// implementer of a host-driven run, or a validator or refuter marked handed (whose answer, once
/// in, says `host` under `finished`).
pub fn was_handed(record: &StepRecord, host_run: bool) -> bool {
    if record.step == StepKey::Implement {
        return host_run;
    }
    let o = record
        .outcome_as::<super::outcome::ValidatorOutcome>()
        .unwrap_or_default();
    let by_host = |f: &Value| HostMarks::deserialize(f).is_ok_and(|m| m.host.is_some());
    record.step.is_validator() && (o.handed || o.finished.as_ref().is_some_and(by_host))
}

/// What a host agent's outcome holds beside the rest: the host's word on its agent (an
/// implementer's, on the outcome itself), and a validator's answer handed in by the host (under
/// `finished`, marked `host`, with the host's word).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct HostMarks {
    /// Not `null`: handed in by the host.
    #[serde(deserialize_with = "or_default")]
    host: Option<IgnoredAny>,
    /// [`SAID`]; `None` unless it reads as one.
    #[serde(rename = "host_agent", deserialize_with = "or_default")]
    said: Option<HostAgent>,
    #[serde(deserialize_with = "or_default")]
    finished: Option<Box<HostMarks>>,
}

/// What the host said its agent used, from a step record's outcome (JSON), if it said anything.
pub fn said(outcome: &Value) -> HostAgent {
    let marks = HostMarks::deserialize(outcome).unwrap_or_default();
    marks
        .said
        .or_else(|| marks.finished.and_then(|f| f.said))
        .unwrap_or_default()
}

/// `agent_start`/`agent_end` fields of a host agent: where, who, a validator's lens, and (at its
/// end without a receipt) why it ended.
#[derive(Serialize)]
struct AgentFields<'a> {
    lane: &'a str,
    attempt: u32,
    role: &'static str,
    step: &'a StepKey,
    driver: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lens: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'a str>,
}

fn fields(lane: &str, record: &StepRecord, ended: Option<&str>) -> Value {
    let fields = AgentFields {
        lane,
        attempt: record.attempt,
        role: record.step.role(),
        step: &record.step,
        driver: "host",
        lens: match &record.step {
            StepKey::Validate(lens) => Some(lens.as_str()),
            _ => None,
        },
        outcome: ended,
    };
    serde_json::to_value(fields).expect("serialises")
}

/// The lane's implementer, handed to the host: recorded started and handed, with no owner
/// process (the host's agent is not ours to watch), and logged `step_start` and `agent_start`,
/// once. Asked again for the same attempt, it changes nothing (SPEC 20.2).
pub fn hand_implementer(ctx: &Ctx<'_>, run_id: &str, lane: &mut Lane) {
    if lane.record(&StepKey::Implement).is_some() {
        return;
    }
    let brief_sha = lane
        .outcome_as::<BriefOutcome>(&StepKey::Brief)
        .map(|o| o.sha256)
        .filter(|s| !s.is_empty());
    let mut record = started(
        StepKey::Implement,
        lane.attempt,
        brief_sha,
        Some(super::step_record::new_nonce()),
    );
    record.pid = None;
    record.pid_start = None;
    record.outcome = Some(json!({"handed": true}));
    emit(
        &ctx.paths,
        run_id,
        Event::StepStart,
        json!({"lane": lane.id, "step": "implement", "attempt": lane.attempt, "driver": "host"}),
    );
    // Logged with the answer that hands it out, under the same lock (SPEC 21.5).
    emit(
        &ctx.paths,
        run_id,
        Event::AgentStart,
        fields(&lane.id, &record, None),
    );
    lane.steps.push(record);
}

/// A host agent that ended without its receipt: its record fails with `ended` saying why (a
/// receipt for it is refused from now on); the fields of its `agent_end`.
fn end(lane: &str, record: &mut StepRecord, why: &str) -> Value {
    let mut outcome = record.outcome.take().unwrap_or_else(|| json!({}));
    // A mark added to the outcome as recorded, which stays as it was otherwise.
    outcome["ended"] = why.into();
    finish(record, StepStatus::Failed, outcome);
    fields(lane, record, Some(why))
}

/// End the live host agents of the lanes that are final (blocked, handed back, discarded,
/// delivered) and of a run that has ended: nothing they hand in would be taken. Each is ended
/// once, and logged `agent_end`; a call that finds none changes nothing.
pub fn end_stranded(ctx: &Ctx<'_>, run: &mut Run) {
    for f in strand(run) {
        emit(&ctx.paths, &run.id, Event::AgentEnd, f);
    }
}

fn strand(run: &mut Run) -> Vec<Value> {
    let run_ended = run.status.is_ended();
    let mut ended = Vec::new();
    // A live host agent of the lane's current attempt.
    let live_now = |attempt: u32, r: &StepRecord| r.attempt == attempt && is_live(r);
    let stranded = |l: &Lane| {
        (run_ended || l.stage.is_final()) && l.steps.iter().any(|r| live_now(l.attempt, r))
    };
    for lane in run.lanes.iter_mut_where(stranded) {
        let why = if run_ended {
            format!("the run ended ({})", run.status.as_str())
        } else {
            format!("the lane is {}", lane.stage.as_str())
        };
        let attempt = lane.attempt;
        for record in lane.steps.iter_mut().filter(|r| live_now(attempt, r)) {
            ended.push(end(&lane.id, record, &why));
        }
    }
    ended
}

/// End the live host agents among `records`, the current attempt's, as the attempt ends and they
/// leave the lane for the history; each logged `agent_end`.
pub fn end_with_attempt(ctx: &Ctx<'_>, run_id: &str, lane: &str, records: &mut [StepRecord]) {
    for record in records.iter_mut().filter(|r| is_live(r)) {
        emit(
            &ctx.paths,
            run_id,
            Event::AgentEnd,
            end(lane, record, "the attempt ended"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::state::{Base, Driver, RunStatus, Stage};

    fn record(step: &str, status: StepStatus, outcome: Value) -> StepRecord {
        StepRecord {
            step: step.parse().expect("a step key"),
            attempt: 1,
            status,
            started_at: "2026-09-30T11:00:00Z".into(),
            ended_at: None,
            inputs: None,
            nonce: Some("n".into()),
            pid: None,
            pid_start: None,
            outcome: Some(outcome),
        }
    }

    #[test]
    fn a_handed_agent_lives_until_its_answer_is_in() {
        assert!(is_live(&record(
            "implement",
            StepStatus::Started,
            json!({"handed": true})
        )));
        assert!(is_live(&record(
            "validate-full",
            StepStatus::Started,
            json!({"prepared": true, "handed": true})
        )));
        // Answered: a validator's answer is in, an implementer's receipt recorded it done.
        assert!(!is_live(&record(
            "validate-full",
            StepStatus::Started,
            json!({"handed": true, "finished": {"host": true}})
        )));
        assert!(!is_live(&record(
            "implement",
            StepStatus::Done,
            json!({"handed": true})
        )));
        // Prepared, not yet handed; a process agent (never handed).
        assert!(!is_live(&record(
            "validate-full",
            StepStatus::Started,
            json!({"prepared": true})
        )));
        assert!(!is_live(&record(
            "implement",
            StepStatus::Started,
            Value::Null
        )));
    }

    fn lane(id: &str, stage: Stage, steps: Vec<StepRecord>) -> Lane {
        Lane {
            id: id.into(),
            unit: id.into(),
            stage,
            attempt: 1,
            crashes: 0,
            worktree: None,
            branch: None,
            reason: None,
            steps,
            findings: Vec::new(),
            mutations: 0,
            validators: Vec::new(),
            land_round: 0,
            depends: Vec::new(),
            released: false,
            attempts_before: 0,
            arm_requested: false,
            review: None,
            metrics: Vec::new(),
            rejected: None,
            escalation: None,
            unit_text: None,
            ended: None,
        }
    }

    fn run(lanes: Vec<Lane>) -> Run {
        Run {
            id: "run-1".into(),
            unit: "u".into(),
            status: RunStatus::Running,
            driver: Driver::Host,
            session: None,
            created_at: "2026-09-30T11:00:00Z".into(),
            updated_at: "2026-09-30T11:00:00Z".into(),
            base: Base {
                commit: "0".repeat(40),
                branch: None,
            },
            next_eligible_at: None,
            overrun: None,
            brief_layout: 1,
            picked: None,
            rules: None,
            paced: 0,
            pace: None,
            window_from: None,
            spares: Vec::new(),
            claims: None,
            lanes: lanes.into(),
        }
    }

    /// A lane at work keeps its agent; a blocked one's ends, once; a run that ended ends them all.
    #[test]
    fn agents_of_final_lanes_and_ended_runs_end_once() {
        let handed = || record("implement", StepStatus::Started, json!({"handed": true}));
        let validator = || {
            record(
                "validate-full",
                StepStatus::Started,
                json!({"prepared": true, "handed": true}),
            )
        };
        let mut r = run(vec![
            lane("a", Stage::Implement, vec![handed()]),
            lane("b", Stage::Blocked, vec![validator()]),
        ]);
        assert_eq!(alive(&r), 1, "a blocked lane's agent does not count");
        let ended = strand(&mut r);
        assert_eq!(
            ended,
            vec![
                json!({"lane": "b", "attempt": 1, "role": "validator", "step": "validate-full",
                "driver": "host", "lens": "full", "outcome": "the lane is blocked"})
            ]
        );
        let b = &r.lanes[1].steps[0];
        assert_eq!(b.status, StepStatus::Failed);
        assert_eq!(b.outcome.as_ref().unwrap()["ended"], "the lane is blocked");
        assert!(strand(&mut r).is_empty(), "ended twice");
        assert!(is_live(&r.lanes[0].steps[0]));

        r.status = RunStatus::Abandoned;
        assert_eq!(alive(&r), 0);
        let ended = strand(&mut r);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0]["outcome"], "the run ended (abandoned)");
        assert_eq!(ended[0]["role"], "implementer");
    }

    #[test]
    fn a_label_is_one_short_printable_line() {
        assert_eq!(check_label("claude-opus-4"), Ok("claude-opus-4".into()));
        assert!(check_label("").is_err());
        assert!(check_label("  ").is_err());
        assert!(check_label("a\nb").is_err());
        assert!(check_label("\u{1b}[31mred").is_err());
        assert!(check_label(&"x".repeat(LABEL_MAX)).is_ok());
        assert!(check_label(&"x".repeat(LABEL_MAX + 1)).is_err());
    }

    #[test]
    fn what_the_host_said_is_read_back_wherever_the_step_keeps_it() {
        let given = HostAgent {
            model: Some("m".into()),
            session: None,
        };
        let v = serde_json::to_value(&given).unwrap();
        assert_eq!(said(&json!({"receipt_path": "/r", SAID: v})), given);
        assert_eq!(
            said(&json!({"answer": null, "finished": {"host": true, SAID: v}})),
            given
        );
        assert_eq!(said(&json!({"receipt_path": "/r"})), HostAgent::default());
    }
}
