//! The forms a lane of a run of several takes in the state file besides its whole self (SPEC
//! 21.2): an ended lane's (what `decide`, `run list` and `status` need; the rest is in its
//! `lane.json`) and a waiting lane's (a lane that has not started: what admit gave it, written
//! only when it reads back as the very same lane, so nothing is lost and nothing needs a file of
//! its own). The state in memory holds every lane as a `Lane`; only the file is compact.

use super::{Lane, Lanes, ReviewTarget, Stage, State};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::cell::Cell;
use std::sync::Arc;

/// What the ended form of a lane keeps beside its id, unit, stage, attempt, branch and reason.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Ended {
    /// The commit of the lane's close (its `deliver` step), when it has one: what `status` reads
    /// the unit's status from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close: Option<String>,
    /// Its `retire` step retired it (SPEC 23.3).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
}

/// A lane in its ended form, as the state file writes it.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EndedLane {
    id: String,
    /// Left out when it is the id (a project's lanes are named by their units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unit: Option<String>,
    stage: Stage,
    attempt: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    ended: Ended,
}

impl EndedLane {
    pub(super) fn of(lane: &Lane, ended: &Ended) -> EndedLane {
        EndedLane {
            id: lane.id.clone(),
            unit: unit_unless_id(lane),
            stage: lane.stage,
            attempt: lane.attempt,
            branch: lane.branch.clone(),
            reason: lane.reason.clone(),
            ended: ended.clone(),
        }
    }

    fn into_lane(self) -> Lane {
        Lane {
            unit: self.unit.unwrap_or_else(|| self.id.clone()),
            id: self.id,
            stage: self.stage,
            attempt: self.attempt,
            crashes: 0,
            worktree: None,
            branch: self.branch,
            reason: self.reason,
            steps: Vec::new(),
            findings: Vec::new(),
            mutations: 0,
            validators: Vec::new(),
            land_round: 0,
            depends: Vec::new(),
            released: false,
            attempts_before: 0,
            arm_requested: false,
            metrics: Vec::new(),
            rejected: None,
            escalation: None,
            unit_text: None,
            review: None,
            ended: Some(self.ended),
        }
    }
}

thread_local! {
    /// Set while `file_text` writes the state file: only there does a lane take a short form on
    /// a line of its own. A run serialized for anything else (shown, recorded) is written as
    /// before: whole lanes, an ended lane as its form's object.
    static IN_FILE: Cell<bool> = const { Cell::new(false) };
}

/// A run's lanes as the state file writes them: whole, or in a short form (ended; waiting in a
/// run of several) as one line of compact JSON.
pub(super) fn lanes_out<S: serde::Serializer>(lanes: &Lanes, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    #[serde(untagged)]
    enum Out<'a> {
        Whole(&'a Lane),
        Ended(EndedLane),
        Line(&'a RawValue),
    }
    let several = lanes.len() > 1;
    if !IN_FILE.get() {
        return s.collect_seq(lanes.iter().map(|l| match &l.ended {
            Some(ended) => Out::Ended(EndedLane::of(l, ended)),
            None => Out::Whole(l),
        }));
    }
    // In the file: each lane's short form, when it has one, as a line this thread keeps.
    let make = |l: &Lane| match &l.ended {
        Some(ended) => Some(line(&EndedLane::of(l, ended))),
        None if several => WaitingLane::of(l).map(|form| line(&form)),
        None => None,
    };
    super::lines::with_lines(lanes.shared(), several, make, |lines| {
        s.collect_seq(lanes.iter().zip(lines).map(|(l, line)| match line {
            Some(line) => Out::Line(line),
            None => Out::Whole(l),
        }))
    })
}

/// A short form as one line of compact JSON.
fn line(form: &impl Serialize) -> Box<RawValue> {
    serde_json::value::to_raw_value(form).expect("a lane serialises")
}

/// A run's lanes read back: a lane with an `ended` field is in its ended form, one with `waiting`
/// in its waiting form, any other whole. Each lane is read straight from its text, first for
/// which form it has, then as that form.
pub(super) fn lanes_in<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Lanes, D::Error> {
    use serde::de::Error;
    let lanes = Vec::<Box<RawValue>>::deserialize(d)?;
    super::lines::with_read(|read| {
        lanes
            .iter()
            .map(|raw| {
                read.lane(raw.get(), lane_in)
                    .map_err(|e| D::Error::custom(without_position(&e)))
            })
            .collect()
    })
}

/// Which form a lane's text is in, read without the rest of it.
#[derive(Default, Deserialize)]
struct FormOf {
    #[serde(default, deserialize_with = "present")]
    ended: bool,
    #[serde(default, deserialize_with = "present")]
    waiting: bool,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

fn lane_in(text: &str) -> Result<Lane, serde_json::Error> {
    // Most lanes of a long run are in a short form, which this file writes with its mark last:
    // that form is tried first. Each names every field it may have, so a lane in another form
    // fails it at its first other field, and is read as below.
    if text.ends_with(r#","waiting":true}"#) {
        if let Ok(waiting) = serde_json::from_str::<WaitingLane>(text) {
            return waiting.into_briefing_lane();
        }
    } else if let Ok(ended) = serde_json::from_str::<EndedLane>(text) {
        return Ok(ended.into_lane());
    }
    // Not an object at all: the whole lane's parse says what it should have been.
    let form = serde_json::from_str::<FormOf>(text).unwrap_or_default();
    if form.ended {
        serde_json::from_str::<EndedLane>(text).map(EndedLane::into_lane)
    } else if form.waiting {
        serde_json::from_str::<WaitingLane>(text).and_then(WaitingLane::into_briefing_lane)
    } else {
        serde_json::from_str::<Lane>(text)
    }
}

/// An error within one lane's text, without that text's line and column: the file's reader says
/// where the lanes are.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let at = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&at) {
        Some(bare) if e.line() != 0 => bare.to_owned(),
        _ => text,
    }
}

/// A lane's unit as a short form writes it: left out when it is the lane's id.
fn unit_unless_id(lane: &Lane) -> Option<String> {
    (lane.unit != lane.id).then(|| lane.unit.clone())
}

/// The lane as the state file's text reads back: a lane that has ended keeps only what its
/// ended form keeps (every other lane is written whole, or in a form it reads back as).
/// A lane that is so already stays as it is (shared).
pub(super) fn as_read_back(lane: Arc<Lane>) -> Arc<Lane> {
    if is_read_back(&lane) {
        debug_assert!(
            lane.ended.is_none() || read_back((*lane).clone()) == *lane,
            "lane `{}` is taken as read back and is not",
            lane.id
        );
        return lane;
    }
    Arc::new(read_back(Arc::unwrap_or_clone(lane)))
}

fn read_back(lane: Lane) -> Lane {
    let Some(ended) = lane.ended.clone() else {
        return lane;
    };
    EndedLane {
        unit: (lane.unit != lane.id).then_some(lane.unit),
        id: lane.id,
        stage: lane.stage,
        attempt: lane.attempt,
        branch: lane.branch,
        reason: lane.reason,
        ended,
    }
    .into_lane()
}

/// Whether the lane is as its text reads back already: not ended, or ended with nothing beside
/// what its ended form keeps (as every ended lane a load or a save made is). Named field by
/// field, so a field added to `Lane` is a question asked here.
fn is_read_back(lane: &Lane) -> bool {
    let Lane {
        id: _,
        unit: _,
        stage: _,
        attempt: _,
        branch: _,
        reason: _,
        ended,
        crashes,
        worktree,
        steps,
        findings,
        mutations,
        validators,
        land_round,
        depends,
        released,
        attempts_before,
        arm_requested,
        metrics,
        rejected,
        escalation,
        unit_text,
        review,
    } = lane;
    ended.is_none()
        || (*crashes == 0
            && worktree.is_none()
            && steps.is_empty()
            && findings.is_empty()
            && *mutations == 0
            && validators.is_empty()
            && *land_round == 0
            && depends.is_empty()
            && !released
            && *attempts_before == 0
            && !arm_requested
            && metrics.is_empty()
            && rejected.is_none()
            && escalation.is_none()
            && unit_text.is_none()
            && review.is_none())
}

/// The lane in its ended form, `ended` kept beside its id, unit, stage, attempt, branch and reason.
pub(super) fn ended_lane(lane: &Lane, ended: Ended) -> Lane {
    EndedLane::of(lane, &ended).into_lane()
}

/// A lane of a run of several that has not started, as the state file writes it (SPEC 21.2):
/// what admit gave it, and `"waiting": true`. Read back, it is the lane admit made.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitingLane {
    id: String,
    /// Left out when it is the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unit: Option<String>,
    stage: Stage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    branch: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    depends: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rejected: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    review: Option<ReviewTarget>,
    waiting: Yes,
}

/// `true`, the only value `waiting` takes.
#[derive(Clone, Copy)]
struct Yes;

impl Serialize for Yes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(true)
    }
}

impl<'de> Deserialize<'de> for Yes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Yes, D::Error> {
        match bool::deserialize(d)? {
            true => Ok(Yes),
            false => Err(serde::de::Error::custom("`waiting` is true when present")),
        }
    }
}

impl WaitingLane {
    /// The lane in its waiting form, when it has one: a lane that has not started (briefing or
    /// planning, first attempt, no step, nothing recorded) and that the form reads back as.
    fn of(lane: &Lane) -> Option<WaitingLane> {
        if lane.ended.is_some() || !matches!(lane.stage, Stage::Brief | Stage::Plan) {
            return None;
        }
        let form = WaitingLane {
            id: lane.id.clone(),
            unit: unit_unless_id(lane),
            stage: lane.stage,
            branch: lane.branch.clone(),
            depends: lane.depends.clone(),
            rejected: lane.rejected.clone(),
            review: lane.review.clone(),
            waiting: Yes,
        };
        (form.clone().into_lane() == *lane).then_some(form)
    }

    /// The lane, when it is one a waiting form may be read as: a lane that briefs or plans.
    fn into_briefing_lane(self) -> Result<Lane, serde_json::Error> {
        use serde::de::Error;
        match self.stage {
            Stage::Brief | Stage::Plan => Ok(self.into_lane()),
            other => Err(serde_json::Error::custom(format!(
                "a waiting lane briefs or plans, not `{}`",
                other.as_str()
            ))),
        }
    }

    fn into_lane(self) -> Lane {
        Lane {
            unit: self.unit.unwrap_or_else(|| self.id.clone()),
            id: self.id,
            stage: self.stage,
            attempt: 1,
            crashes: 0,
            worktree: None,
            branch: self.branch,
            reason: None,
            steps: Vec::new(),
            findings: Vec::new(),
            mutations: 0,
            validators: Vec::new(),
            land_round: 0,
            depends: self.depends,
            released: false,
            attempts_before: 0,
            arm_requested: false,
            metrics: Vec::new(),
            rejected: self.rejected,
            escalation: None,
            unit_text: None,
            review: self.review,
            ended: None,
        }
    }
}

/// The state file's text: pretty, but each lane of a run in a short form (ended, or waiting in a
/// run of several) on a line of its own, so the file's size follows the lanes alive (SPEC 21.2).
/// Only the file: a run shown or recorded shows every lane whole. Written straight from the
/// state, with no `Value` between.
pub(super) fn file_text(state: &State) -> Vec<u8> {
    struct Writing;
    impl Drop for Writing {
        fn drop(&mut self) {
            IN_FILE.set(false);
        }
    }
    IN_FILE.set(true);
    let _writing = Writing;
    let mut text = Vec::with_capacity(16 * 1024);
    serde_json::to_writer_pretty(&mut text, state).expect("the state serialises");
    text.push(b'\n');
    text
}

#[cfg(test)]
mod tests {
    use super::super::*;

    /// An ended lane of a run of several is written in its ended form (SPEC 21.2), with what
    /// `decide`, `run list` and `status` need of it, reads back as that form, and names every
    /// field the schema's `ended_lane` names.
    #[test]
    fn an_ended_lane_is_written_and_read_in_its_ended_form() {
        let whole = br#"{"schema": 1, "runs": {"r": {
            "id": "r", "unit": "001-p", "status": "running", "driver": "process", "session": null,
            "created_at": "2026-09-30T11:00:00Z", "updated_at": "2026-09-30T11:00:00Z",
            "base": {"commit": "c", "branch": "main"}, "next_eligible_at": null,
            "lanes": [{"id": "002-a", "unit": "a", "stage": "delivered", "attempt": 2,
                "crashes": 1, "worktree": "/w/002-a", "branch": "iced/001-p/002-a",
                "reason": "why", "depends": ["003-b"],
                "steps": [{"step": "deliver", "attempt": 2, "status": "done",
                    "started_at": "t", "ended_at": "t", "inputs": null, "nonce": null,
                    "pid": null, "pid_start": null, "outcome": {"commit": "close"}},
                    {"step": "retire", "attempt": 2, "status": "done",
                    "started_at": "t", "ended_at": "t", "inputs": null, "nonce": null,
                    "pid": null, "pid_start": null, "outcome": {"retired": true}}]},
                {"id": "003-b", "unit": "003-b", "stage": "brief", "attempt": 1,
                "crashes": 0, "worktree": null, "branch": null, "reason": null, "steps": []}]}}}"#;
        let mut state = State::parse(whole).unwrap();
        let run = state.runs.get_mut("r").unwrap();
        let lane = &run.lanes[0];
        assert_eq!(
            (lane.close_commit().as_deref(), lane.retired()),
            (Some("close"), true)
        );
        run.lanes[0] = run.lanes[0].ended_form();
        let written = serde_json::to_value(&state).unwrap();
        assert_eq!(
            written["runs"]["r"]["lanes"][0],
            serde_json::json!({"id": "002-a", "unit": "a", "stage": "delivered",
                "attempt": 2, "branch": "iced/001-p/002-a", "reason": "why",
                "ended": {"close": "close", "retired": true}})
        );
        assert!(
            written["runs"]["r"]["lanes"][1]["steps"].is_array(),
            "a live lane stays whole"
        );
        let read = State::parse(written.to_string().as_bytes()).unwrap();
        assert_eq!(read, state);
        let lane = &read.runs["r"].lanes[0];
        assert_eq!(
            (lane.stage, lane.close_commit().as_deref(), lane.retired()),
            (Stage::Delivered, Some("close"), true)
        );
        assert!(lane.steps.is_empty() && lane.depends.is_empty());

        let schema: Value =
            serde_json::from_str(include_str!("../../../spec/schema/state.schema.json")).unwrap();
        let def = &schema["$defs"]["ended_lane"];
        let mut named: Vec<&String> = def["properties"].as_object().unwrap().keys().collect();
        let form = written["runs"]["r"]["lanes"][0].as_object().unwrap();
        let mut have: Vec<&String> = form.keys().collect();
        named.sort();
        have.sort();
        assert_eq!(have, named, "the ended form vs the schema");
        let mut ended: Vec<&String> = form["ended"].as_object().unwrap().keys().collect();
        let mut named: Vec<&String> = def["properties"]["ended"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        ended.sort();
        named.sort();
        assert_eq!(ended, named, "`ended` vs the schema");
        // An ended form with a field it does not have is refused, as any unknown field.
        let odd = written
            .to_string()
            .replace(r#""ended":{"#, r#""ended":{"x":1,"#);
        assert!(matches!(
            State::parse(odd.as_bytes()),
            Err(ParseError::Invalid(_))
        ));
    }

    /// The state file is written straight from the state, no `Value` between (issue 16), and
    /// byte for byte as before: each compatibility fixture's state, written by an earlier
    /// release, is written back as it was, and a project's state with lanes in each form reads
    /// back and is written again the same.
    #[test]
    fn a_state_is_written_back_byte_for_byte() {
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/compat");
        let mut seen = 0;
        for entry in std::fs::read_dir(fixtures).unwrap() {
            let path = entry.unwrap().path().join("run").join("state.json");
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let state = State::parse(&bytes).unwrap();
            assert_eq!(
                String::from_utf8(super::file_text(&state)).unwrap(),
                String::from_utf8(bytes).unwrap(),
                "{}",
                path.display()
            );
            seen += 1;
        }
        assert!(seen >= 4, "the fixtures are there");
        let mut state = State::parse(ADMITTED).unwrap();
        let run = state.runs.get_mut("r").unwrap();
        run.lanes[2].stage = Stage::Discarded;
        run.lanes[2] = run.lanes[2].ended_form();
        let text = super::file_text(&state);
        assert!(
            String::from_utf8_lossy(&text).contains(
                "\n        {\"id\":\"004-c\",\"stage\":\"discarded\",\"attempt\":1,\"ended\":{}},\n"
            ),
            "{}",
            String::from_utf8_lossy(&text)
        );
        let read = State::parse(&text).unwrap();
        assert_eq!(read, state);
        assert_eq!(super::file_text(&read), text);
        // Shown or recorded, a run is written as before: its lanes whole, an ended lane as its
        // form's object, none on a line of its own.
        let shown = serde_json::to_string_pretty(&state.runs["r"]).unwrap();
        assert!(shown.contains("\n      \"id\": \"002-a\",\n"), "{shown}");
        assert!(!shown.contains("\"waiting\""), "{shown}");
    }

    /// A project's lanes as admit makes them (briefing, none started; the second reviews and
    /// was rejected once), a lane at work, and a lane that crashed once before it began.
    const ADMITTED: &[u8] = br#"{"schema": 1, "runs": {"r": {
        "id": "r", "unit": "001-p", "status": "running", "driver": "process", "session": null,
        "created_at": "2026-09-30T11:00:00Z", "updated_at": "2026-09-30T11:00:00Z",
        "base": {"commit": "c", "branch": "main"}, "next_eligible_at": null,
        "lanes": [{"id": "002-a", "unit": "002-a", "stage": "brief", "attempt": 1,
            "crashes": 0, "worktree": null, "branch": "iced/001-p/002-a", "reason": null,
            "steps": [], "findings": [], "mutations": 0, "validators": [], "land_round": 0,
            "depends": ["003-b"], "released": false},
            {"id": "003-b", "unit": "b", "stage": "plan", "attempt": 1,
            "crashes": 0, "worktree": null, "branch": "iced/001-p/003-b", "reason": null,
            "steps": [], "depends": [], "rejected": "too wide",
            "review": {"from": "a", "to": "b", "range": "main~1..main", "paths": ["src/x.rs"]}},
            {"id": "004-c", "unit": "004-c", "stage": "brief", "attempt": 1,
            "crashes": 0, "worktree": null, "branch": null, "reason": null,
            "steps": [{"step": "brief", "attempt": 1, "status": "started",
                "started_at": "t", "ended_at": null, "inputs": null, "nonce": null,
                "pid": null, "pid_start": null, "outcome": null}]},
            {"id": "005-d", "unit": "005-d", "stage": "brief", "attempt": 1,
            "crashes": 1, "worktree": null, "branch": null, "reason": null, "steps": []}]}}}"#;

    /// The file as `State::save` writes it.
    fn saved_text(state: &State) -> String {
        let dir = tempfile::tempdir().unwrap();
        let paths = RunPaths::new(dir.path());
        ensure_dir(&paths.dir, "test").unwrap();
        state.save(&paths, "test").unwrap();
        std::fs::read_to_string(paths.state()).unwrap()
    }

    /// The file as `State::save` writes it, parsed.
    fn saved(state: &State) -> Value {
        serde_json::from_str(&saved_text(state)).unwrap()
    }

    /// A lane of a run of several that has not started is written in its waiting form (SPEC
    /// 21.2): what admit gave it, no more; it reads back as the very lane admit made. A lane
    /// that has begun (a step, a crash) stays whole, and so does the lane of a run of one. A
    /// state written whole before the form (as above) reads as it is.
    #[test]
    fn a_lane_not_started_is_written_in_its_waiting_form_and_reads_back_the_same() {
        let state = State::parse(ADMITTED).unwrap();
        let file = saved(&state);
        let lanes = file["runs"]["r"]["lanes"].as_array().unwrap();
        assert_eq!(
            lanes[0],
            serde_json::json!({"id": "002-a", "stage": "brief",
                "branch": "iced/001-p/002-a", "depends": ["003-b"], "waiting": true})
        );
        assert_eq!(
            lanes[1],
            serde_json::json!({"id": "003-b", "unit": "b", "stage": "plan",
                "branch": "iced/001-p/003-b", "rejected": "too wide",
                "review": {"from": "a", "to": "b", "range": "main~1..main", "paths": ["src/x.rs"]},
                "waiting": true})
        );
        for begun in &lanes[2..] {
            assert!(
                begun.get("waiting").is_none() && begun["steps"].is_array(),
                "{begun}"
            );
        }
        let read = State::parse(file.to_string().as_bytes()).unwrap();
        assert_eq!(read, state, "nothing is lost");
        // Each short form on a line of its own; a lane at work pretty, as before.
        let text = saved_text(&state);
        assert!(
            text.contains(
                "\n        {\"id\":\"002-a\",\"stage\":\"brief\",\"branch\":\"iced/001-p/002-a\",\"depends\":[\"003-b\"],\"waiting\":true},\n"
            ),
            "{text}"
        );
        assert!(text.contains("\n          \"id\": \"004-c\",\n"), "{text}");

        // The waiting form names every field the schema's `waiting_lane` names, no other.
        let schema: Value =
            serde_json::from_str(include_str!("../../../spec/schema/state.schema.json")).unwrap();
        let mut named: Vec<&String> = schema["$defs"]["waiting_lane"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        let mut have: Vec<&String> = lanes[0]
            .as_object()
            .unwrap()
            .keys()
            .chain(lanes[1].as_object().unwrap().keys())
            .collect();
        named.sort();
        have.sort();
        have.dedup();
        assert_eq!(have, named, "the waiting form vs the schema");

        // The lane of a run of one stays whole.
        let mut one = state.clone();
        one.runs.get_mut("r").unwrap().lanes.truncate(1);
        let file = saved(&one);
        assert!(file["runs"]["r"]["lanes"][0]["steps"].is_array(), "{file}");
    }

    /// A waiting form that says `waiting: false`, has a field it does not have, or a stage a lane
    /// that has not started cannot be at, is refused, as any field the state does not know.
    #[test]
    fn a_waiting_form_that_is_not_one_is_refused() {
        let file = saved(&State::parse(ADMITTED).unwrap()).to_string();
        let waiting = r#""depends":["003-b"],"waiting":true"#;
        assert!(file.contains(waiting), "{file}");
        assert!(State::parse(file.as_bytes()).is_ok());
        for odd in [
            r#""depends":["003-b"],"waiting":false"#,
            r#""depends":["003-b"],"waiting":true,"attempt":2"#,
            r#""depends":["003-b"],"waiting":true,"x":1"#,
        ] {
            let odd = file.replace(waiting, odd);
            assert!(
                matches!(State::parse(odd.as_bytes()), Err(ParseError::Invalid(_))),
                "{odd}"
            );
        }
        let odd = file.replacen(r#""stage":"brief""#, r#""stage":"delivered""#, 1);
        assert!(
            matches!(State::parse(odd.as_bytes()), Err(ParseError::Invalid(_))),
            "{odd}"
        );
    }
}
