//! `.iced/run/state.json`: every run not yet retired, its lanes, and the step records of each lane's
//! current attempt. Reads are strict (unknown fields, a newer schema, an oversized or symlinked file
//! are refused); writes are atomic and 0600. Older attempts' records live in the run's
//! `history.jsonl`, so this file's size does not grow with a run's history.

pub use super::keys::StepKey;
use crate::refusal::Refusal;
use crate::store::{self, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const SCHEMA: u32 = 1;
pub const STATE_LIMIT: u64 = 4 * 1024 * 1024;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub schema: u32,
    #[serde(default)]
    pub runs: BTreeMap<String, Run>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Paused,
    Blocked,
    Delivered,
    Handback,
    Abandoned,
}

impl RunStatus {
    /// A run that will take no more steps.
    pub fn is_ended(self) -> bool {
        matches!(
            self,
            RunStatus::Delivered | RunStatus::Handback | RunStatus::Abandoned
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Blocked => "blocked",
            RunStatus::Delivered => "delivered",
            RunStatus::Handback => "handback",
            RunStatus::Abandoned => "abandoned",
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    Host,
    Process,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Base {
    pub commit: String,
    pub branch: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Run {
    pub id: String,
    pub unit: String,
    pub status: RunStatus,
    pub driver: Driver,
    pub session: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub base: Base,
    pub next_eligible_at: Option<String>,
    /// Rate-limited agent results in a row (SPEC 20.10).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paced: u32,
    /// The pace the run keeps, as recorded when it was admitted or last repaced (SPEC 20.11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<serde_json::Value>,
    /// When the current work window began (real time), with `pace.workMinutes` set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_from: Option<String>,
    /// How many agents were alive over `pace.agents` when the loop last logged `ceiling_overrun`:
    /// logged once per overrun (again only if more come alive), not on every call while it lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrun: Option<usize>,
    /// Which brief layout the run renders (SPEC 20.4): fixed when it is admitted, so a run an
    /// older iced began renders the same bytes all run long. Absent: layout 1, without the
    /// decision log, the product memory or a rejection.
    #[serde(default = "brief_layout_1", skip_serializing_if = "is_brief_layout_1")]
    pub brief_layout: u32,
    /// Why `build next` or `drain` chose this run's unit (SPEC 20.13); absent for `build <id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub picked: Option<super::picked::Picked>,
    /// The sha256 of the rules the run was admitted with, kept in its folder (SPEC 24.16);
    /// absent for a run an older iced admitted, which reads the checkout's config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<String>,
    /// Delivered lanes' worktrees a later lane of the run takes instead of adding its own, under
    /// `land.mode: none` (SPEC 23.2): pushed in the save that records a delivery, taken under the
    /// lock by a worktree step, which names it on its record. Absent when there is none, so a
    /// state an older iced wrote reads the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spares: Vec<String>,
    /// The run's claims on `land.remote` as its last renewal left them (SPEC 24.9.1); absent
    /// until the first renewal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Renewal>,
    /// Live and waiting lanes whole; in a run of several, an ended lane in its ended form, its
    /// whole self in its `lane.json` (SPEC 21.2, `run::ended`).
    #[serde(
        serialize_with = "forms::lanes_out",
        deserialize_with = "forms::lanes_in"
    )]
    pub lanes: Lanes,
}

/// What a run's last renewal of its claims on `land.remote` found (SPEC 24.9.1).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Renewal {
    /// When the claims were last renewed; absent, when the admit took them (the run's
    /// `created_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Renew at the next step, however recent the last renewal: a person resumed a run whose
    /// claim was lost, and whether it is the run's again is known only on the remote.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub now: bool,
    /// The units whose claim the run lost, and why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lost: BTreeMap<String, String>,
}

/// The brief layout a run admitted now renders. From 3 on, a brief ends with the exact command
/// that hands its report in, and a host's `start_agent` answer names the brief and the report
/// from the repository root, no more (SPEC 20.2). From 4 on, a brief says how to escalate or ask
/// (SPEC 20.7). From 5 on, every agent's answer goes to a folder of its own, `out/` of its
/// activity ([`ANSWER_LAYOUT`], SPEC 21.1).
pub const BRIEF_LAYOUT: u32 = 5;

/// The first brief layout whose agents answer into `<activity>/out/` (SPEC 21.1, 24.12).
pub const ANSWER_LAYOUT: u32 = 5;

fn brief_layout_1() -> u32 {
    1
}

fn is_brief_layout_1(n: &u32) -> bool {
    *n == 1
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Planning (SPEC 20.16): the unit is drafted and reviewed before its brief.
    Plan,
    Brief,
    Worktree,
    Implement,
    Receipt,
    Validate,
    Refute,
    Deliver,
    Land,
    Retire,
    Delivered,
    Blocked,
    Handback,
    /// Dropped from its run by a person (`iced run discard`); its branch is kept.
    Discarded,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Plan => "plan",
            Stage::Brief => "brief",
            Stage::Worktree => "worktree",
            Stage::Implement => "implement",
            Stage::Receipt => "receipt",
            Stage::Validate => "validate",
            Stage::Refute => "refute",
            Stage::Deliver => "deliver",
            Stage::Land => "land",
            Stage::Retire => "retire",
            Stage::Delivered => "delivered",
            Stage::Blocked => "blocked",
            Stage::Handback => "handback",
            Stage::Discarded => "discarded",
        }
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            Stage::Delivered | Stage::Blocked | Stage::Handback | Stage::Discarded
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Lane {
    pub id: String,
    pub unit: String,
    pub stage: Stage,
    /// The implementer attempt (1-based). A new attempt supersedes every record of the old one.
    pub attempt: u32,
    /// Crashed activities retried within this lane, across attempts.
    pub crashes: u32,
    pub worktree: Option<String>,
    pub branch: Option<String>,
    /// Why the lane is blocked or handed back, or what the last receipt lacked.
    pub reason: Option<String>,
    pub steps: Vec<StepRecord>,
    /// Findings the loop minted from validators' answers, with what became of each.
    #[serde(default)]
    pub findings: Vec<super::validate::Finding>,
    /// Validator answers thrown away because the validator changed its tree.
    #[serde(default)]
    pub mutations: u32,
    /// The validators of this lane, fixed when it first validates: a config edited during the
    /// run does not change what the loop waits for and judges.
    #[serde(default)]
    pub validators: Vec<String>,
    /// Landing attempts: a target that moves under the landing starts a new round.
    #[serde(default)]
    pub land_round: u32,
    /// Lanes of the same run that must be delivered before this one starts (a project's
    /// children, by their `depends` field).
    #[serde(default)]
    pub depends: Vec<String>,
    /// A blocked or handed-back lane a person released (`iced run release`): it no longer holds
    /// its siblings' landing.
    #[serde(default)]
    pub released: bool,
    /// Attempts a person's resume put behind the lane: its `verify.maxAttempts` count from the one
    /// after them (a resume gives a blocked lane a fresh budget). Absent while none was resumed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts_before: u32,
    /// A person asked for its pull request to be armed (`iced run arm`, `land.arm: human`): the
    /// next step arms it. Absent until asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub arm_requested: bool,
    /// The loop's metrics of this lane as they happened (SPEC 12.1), written once: in the
    /// delivery commit, or to the checkout's metrics when the lane ends without delivering.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<LaneMetric>,
    /// The reason a person gave when they rejected the unit's last delivery (SPEC 20.3): it is
    /// built again, and each brief says why. Absent for a unit built the first time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    /// The lane's last escalation or questions from its implementer, and what the person did
    /// (SPEC 20.7). Absent until one is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<super::escalation::Escalation>,
    /// The unit's text as a person's escalation verb last wrote it during this run (SPEC 20.7),
    /// kept by path and sha256: the delivery's close is made from it. Absent while none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_text: Option<super::kept::Kept>,
    /// What a `review` unit's lane reviews, resolved at admit (SPEC 20.14); absent for every
    /// other lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewTarget>,
    /// Set when the lane has ended in a run of several and the state holds only its ended form
    /// (SPEC 21.2): its steps, findings, metrics and validators are in its `lane.json`, and read
    /// back by `run::ended::whole`. Never written as a field of a whole lane.
    #[serde(skip)]
    pub ended: Option<Ended>,
}

/// A review lane's target (SPEC 20.14): the range as commits, and the files under review.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReviewTarget {
    pub from: String,
    pub to: String,
    /// The range as the unit wrote it (`main~5..main`), absent without `range:`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    pub paths: Vec<String>,
}

mod forms;
pub use forms::Ended;
mod known;
mod lanes;
pub use lanes::Lanes;
mod lines;
pub(crate) use known::Known;

/// One metric event of a lane, with the time it happened (`ts`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "lowercase", deny_unknown_fields)]
pub enum LaneMetric {
    /// An attempt that did not verify (only failures are kept: a pass is the delivery's).
    Verify {
        ts: String,
        result: VerifyResult,
        attempt: u32,
    },
    Escalation {
        ts: String,
        kind: EscalationKind,
        reason: String,
    },
    /// Questions an implementer asked (SPEC 20.7).
    Questions { ts: String, count: u32 },
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum VerifyResult {
    Pass,
    Fail,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EscalationKind {
    /// The implementer handed the lane back.
    Handback,
    /// The loop stopped the lane for a person.
    Blocked,
    /// The implementer stopped for a person (SPEC 20.7), for one of seed 000's five reasons, or
    /// to ask questions.
    Ambiguity,
    Conflict,
    #[serde(rename = "change-expectation")]
    ChangeExpectation,
    Irreversible,
    Stuck,
    Questions,
    /// A test writer's `research_request` or `spec_change_request` (SPEC 20.17).
    Research,
    #[serde(rename = "spec-change")]
    SpecChange,
}

impl EscalationKind {
    /// An agent's word for why it stopped: one of the five, or `questions`.
    pub fn of_agent(word: &str) -> Option<EscalationKind> {
        Some(match word {
            "ambiguity" => EscalationKind::Ambiguity,
            "conflict" => EscalationKind::Conflict,
            "change-expectation" => EscalationKind::ChangeExpectation,
            "irreversible" => EscalationKind::Irreversible,
            "stuck" => EscalationKind::Stuck,
            "questions" => EscalationKind::Questions,
            "research" => EscalationKind::Research,
            "spec-change" => EscalationKind::SpecChange,
            _ => return None,
        })
    }
}

impl LaneMetric {
    /// An attempt of the lane that did not verify, now.
    pub fn failed(attempt: u32) -> LaneMetric {
        LaneMetric::Verify {
            ts: crate::clock::now_iso(),
            result: VerifyResult::Fail,
            attempt,
        }
    }

    /// The lane stopped for a person, now.
    pub fn escalation(kind: EscalationKind, reason: &str) -> LaneMetric {
        LaneMetric::Escalation {
            ts: crate::clock::now_iso(),
            kind,
            reason: reason.to_owned(),
        }
    }

    /// The metrics line (SPEC 12.1): `{ts, id, event, ...}`, then the unit's risk and autonomy.
    pub fn line(&self, unit: &str, tags: &serde_json::Map<String, Value>) -> String {
        let Value::Object(fields) = serde_json::to_value(self).expect("serialises") else {
            unreachable!("a tagged enum serialises as an object")
        };
        let mut line = serde_json::Map::new();
        line.insert("ts".into(), fields["ts"].clone());
        line.insert("id".into(), unit.into());
        line.extend(fields.into_iter().filter(|(k, _)| k != "ts"));
        line.extend(tags.clone());
        serde_json::to_string(&line).expect("serialises")
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    Started,
    Done,
    Failed,
}

/// One step of one attempt: the unit of idempotency, keyed `(lane, step, attempt)`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StepRecord {
    pub step: super::keys::StepKey,
    pub attempt: u32,
    pub status: StepStatus,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// sha256 of what the step consumed; a re-entry with other inputs is refused.
    pub inputs: Option<String>,
    /// Names the launch of an activity (or a host's receipt key).
    pub nonce: Option<String>,
    pub pid: Option<u32>,
    pub pid_start: Option<u64>,
    pub outcome: Option<Value>,
}

impl Lane {
    /// A lane that leaves the state in its ended form (SPEC 21.2): in a run of several, delivered
    /// or discarded.
    pub fn has_ended(&self) -> bool {
        matches!(self.stage, Stage::Delivered | Stage::Discarded)
    }

    /// The commit of the lane's close: its `deliver` step's, or, in its ended form, as kept.
    pub fn close_commit(&self) -> Option<String> {
        match &self.ended {
            Some(ended) => ended.close.clone(),
            None => self
                .outcome(&StepKey::Deliver)
                .and_then(|o| o["commit"].as_str())
                .map(str::to_owned),
        }
    }

    /// The lane in its ended form: what the state keeps of it once its whole self is in its
    /// `lane.json` (SPEC 21.2).
    pub fn ended_form(&self) -> Lane {
        let ended = Ended {
            close: self.close_commit(),
            retired: self.retired(),
        };
        forms::ended_lane(self, ended)
    }

    /// Whether its `retire` step retired it (its work is in the target, its worktree and branch
    /// gone), as the step's outcome says or, in its ended form, as kept.
    pub fn retired(&self) -> bool {
        match &self.ended {
            Some(ended) => ended.retired,
            None => self
                .outcome(&StepKey::Retire)
                .is_some_and(|o| o["retired"] == true),
        }
    }

    /// The attempts this lane has spent of its budget: since its last resume, this one included.
    pub fn attempts_spent(&self) -> u32 {
        self.attempt.saturating_sub(self.attempts_before)
    }

    pub fn record(&self, step: &StepKey) -> Option<&StepRecord> {
        self.steps
            .iter()
            .find(|r| r.step == *step && r.attempt == self.attempt)
    }

    /// Take the records of `step` in the current attempt out of the lane (to archive them, so the
    /// step runs again).
    pub fn take_current(&mut self, step: &StepKey) -> Vec<StepRecord> {
        let attempt = self.attempt;
        let (taken, kept) = std::mem::take(&mut self.steps)
            .into_iter()
            .partition(|r| r.step == *step && r.attempt == attempt);
        self.steps = kept;
        taken
    }

    pub fn record_mut(&mut self, step: &StepKey) -> Option<&mut StepRecord> {
        let attempt = self.attempt;
        self.steps
            .iter_mut()
            .find(|r| r.step == *step && r.attempt == attempt)
    }

    /// The commit a lane with dependencies started from: its `base` step's, of whichever attempt
    /// took it. Taken once: a later attempt (a crash, a refused receipt, a person's resume) goes
    /// on in the same worktree, on the branch that started there, while the target may have moved
    /// (SPEC 23.6).
    pub fn taken_base(&self) -> Option<&str> {
        self.steps
            .iter()
            .rev()
            .find(|r| r.step == StepKey::Base && r.status == StepStatus::Done)
            .and_then(|r| r.outcome.as_ref())
            .and_then(|o| o["commit"].as_str())
    }

    pub fn is_done(&self, step: &StepKey) -> bool {
        self.record(step)
            .is_some_and(|r| r.status == StepStatus::Done)
    }

    /// The outcome of a done step of the current attempt, read as `T` (`run::outcome`).
    pub fn outcome_as<T: serde::de::DeserializeOwned>(&self, step: &StepKey) -> Option<T> {
        self.record(step)
            .filter(|r| r.status == StepStatus::Done)
            .and_then(StepRecord::outcome_as)
    }

    pub fn outcome(&self, step: &StepKey) -> Option<&Value> {
        self.record(step)
            .filter(|r| r.status == StepStatus::Done)
            .and_then(|r| r.outcome.as_ref())
    }
}

impl Run {
    /// The commit a lane starts from: the target as its dependencies left it (step `base`, SPEC
    /// 23.6), else the run's base.
    pub fn base_of<'a>(&'a self, lane: &'a Lane) -> &'a str {
        lane.taken_base().unwrap_or(&self.base.commit)
    }

    pub fn lane(&self, id: &str) -> Option<&Lane> {
        self.lanes.iter().find(|l| l.id == id)
    }

    pub fn lane_mut(&mut self, id: &str) -> Option<&mut Lane> {
        self.lanes.find_mut(|l| l.id == id)
    }
}

/// Where a repository's run files are.
#[derive(Debug, Clone)]
pub struct RunPaths {
    pub dir: PathBuf,
}

impl RunPaths {
    pub fn new(root: &Path) -> RunPaths {
        RunPaths {
            dir: root.join(".iced").join("run"),
        }
    }
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    pub fn lock(&self) -> PathBuf {
        self.dir.join("lock")
    }
    pub fn events(&self) -> PathBuf {
        self.dir.join("events.jsonl")
    }
    /// Where an older iced kept claims (SPEC 24.9: they live in the common git directory now).
    pub fn claims(&self) -> PathBuf {
        self.dir.join("claims")
    }
    pub fn run_dir(&self, run: &str) -> PathBuf {
        self.dir.join(run)
    }
    pub fn lane_dir(&self, run: &str, lane: &str) -> PathBuf {
        self.run_dir(run).join(lane)
    }
    pub fn history(&self, run: &str) -> PathBuf {
        self.run_dir(run).join("history.jsonl")
    }
    /// Where a project run's ended lane is kept whole (SPEC 21.2).
    pub fn ended_lane(&self, run: &str, lane: &str) -> PathBuf {
        self.lane_dir(run, lane).join("lane.json")
    }
}

/// Create a directory of the loop's (0700), refusing one that is a symlink.
pub fn ensure_dir(dir: &Path, step: &str) -> Result<(), Refusal> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(crate::repo::store_refusal(
                step,
                StoreError::Symlink(dir.to_owned()),
            ))
        }
        Ok(meta) if meta.is_dir() => {
            if meta.permissions().mode() & 0o777 != 0o700 {
                let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
            }
            return Ok(());
        }
        _ => {}
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| crate::refusal::io_error(step, format!("create `{}`: {e}", dir.display())))
}

fn invalid(step: &str, path: &Path, why: impl std::fmt::Display) -> Refusal {
    Refusal::new(
        step,
        "state-invalid",
        format!("`{}` {why}", path.display()),
        format!(
            "read it (`cat {0}`; `iced schema state` prints its shape) and repair it, or, damaged beyond use, move it aside (`mv {0} {0}.damaged`): its runs are then forgotten, their worktrees and branches stay",
            path.display()
        ),
    )
}

impl State {
    /// Read the state file; a missing one is an empty state.
    pub fn load(paths: &RunPaths, step: &str) -> Result<State, Refusal> {
        let path = paths.state();
        match State::read_file(&path, step)? {
            None => Ok(State::empty()),
            Some(bytes) => match known::get(&path, &bytes) {
                Some(known) => Ok(known.state.clone()),
                None => State::parse_file(&path, &bytes, step),
            },
        }
    }

    /// Read the state file as `load` does, and keep what it reads as, to be shared: what a
    /// transaction changes a copy of, and compares with (`known`).
    pub(crate) fn load_known(paths: &RunPaths, step: &str) -> Result<Arc<Known>, Refusal> {
        let path = paths.state();
        match State::read_file(&path, step)? {
            None => Ok(Arc::new(Known::of_nothing(State::empty()))),
            Some(bytes) => match known::get(&path, &bytes) {
                Some(known) => Ok(known),
                None => {
                    let state = State::parse_file(&path, &bytes, step)?;
                    Ok(known::keep(&path, bytes, state))
                }
            },
        }
    }

    fn empty() -> State {
        State {
            schema: SCHEMA,
            runs: BTreeMap::new(),
        }
    }

    /// The state file's bytes, checked; None when there is none.
    fn read_file(path: &Path, step: &str) -> Result<Option<Vec<u8>>, Refusal> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(invalid(
                    step,
                    path,
                    "is a symbolic link; iced reads its state only from a regular file",
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(crate::refusal::io_error(
                    step,
                    format!("inspect `{}`: {e}", path.display()),
                ))
            }
        }
        let bytes = store::read_no_follow(path, STATE_LIMIT).map_err(|e| match e {
            StoreError::TooLarge { .. } => invalid(step, path, "is over 4 MiB"),
            StoreError::Symlink(_) => invalid(
                step,
                path,
                "is a symbolic link; iced reads its state only from a regular file",
            ),
            e @ StoreError::NotRegular { .. } => crate::repo::store_refusal(step, e),
            e => crate::refusal::io_error(step, e),
        })?;
        Ok(Some(bytes))
    }

    fn parse_file(path: &Path, bytes: &[u8], step: &str) -> Result<State, Refusal> {
        State::parse(bytes).map_err(|why| match why {
            ParseError::Newer(n) => Refusal::new(
                step,
                "state-newer",
                format!(
                    "`{}` has schema {n}; this iced knows schema {SCHEMA}",
                    path.display()
                ),
                "upgrade iced; the file is left as it is",
            ),
            ParseError::Invalid(why) => invalid(step, path, format!("does not parse: {why}")),
        })
    }

    pub fn parse(bytes: &[u8]) -> Result<State, ParseError> {
        // A state this iced wrote is read straight from its bytes, strictly.
        if let Ok(state) = serde_json::from_slice::<State>(bytes) {
            if state.schema == SCHEMA {
                return Ok(state);
            }
        }
        // Anything else is read again through a `Value`, so that the schema is checked before
        // the strict parse (a newer file is named as newer rather than as a file with unknown
        // fields) and a refusal says what it always said.
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| ParseError::Invalid(e.to_string()))?;
        match value.get("schema").and_then(Value::as_u64) {
            Some(n) if n > u64::from(SCHEMA) => return Err(ParseError::Newer(n)),
            Some(n) if n == u64::from(SCHEMA) => {}
            _ => return Err(ParseError::Invalid("`schema` is missing or not 1".into())),
        }
        serde_json::from_value(value).map_err(|e| ParseError::Invalid(e.to_string()))
    }

    /// Write the state atomically (0600), each lane in a short form on a line of its own (SPEC
    /// 21.2, `forms::file_text`).
    pub fn save(&self, paths: &RunPaths, step: &str) -> Result<(), Refusal> {
        self.write(paths, step).map(drop)
    }

    /// `save`, then keep the state as what the file now reads as (`known`), for this process's
    /// next load: the lanes written in their ended form are taken in it.
    pub(crate) fn save_known(mut self, paths: &RunPaths, step: &str) -> Result<(), Refusal> {
        let text = self.write(paths, step)?;
        for run in self.runs.values_mut() {
            run.lanes.map_shared(forms::as_read_back);
        }
        known::keep(&paths.state(), text, self);
        Ok(())
    }

    /// Write the file; its text.
    fn write(&self, paths: &RunPaths, step: &str) -> Result<Vec<u8>, Refusal> {
        let text = forms::file_text(self);
        // A state a read would refuse is never written: the file stays as it was, and every run in
        // it stays readable (SPEC 24.5).
        if text.len() as u64 > STATE_LIMIT {
            return Err(Refusal::new(
                step,
                "state-full",
                format!(
                    "recording this step would make `{}` {} bytes, over the {STATE_LIMIT} a read accepts; nothing was written",
                    paths.state().display(),
                    text.len()
                ),
                "the runs in it are intact: end one you no longer need (`iced run abandon <run>`, `iced run retire`), then call again",
            ));
        }
        store::write_atomic(&paths.state(), &text, 0o600).map_err(|e| match e {
            StoreError::Symlink(p) => invalid(
                step,
                &p,
                "is a symbolic link; iced writes its state only to a regular file",
            ),
            e => crate::refusal::io_error(step, e),
        })?;
        Ok(text)
    }

    /// The live run of a unit, if any (not ended).
    pub fn live_run_of(&self, unit: &str) -> Option<&Run> {
        self.runs
            .values()
            .find(|r| r.unit == unit && !r.status.is_ended())
    }
}

#[derive(Debug)]
pub enum ParseError {
    Newer(u64),
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state a read would refuse is never written (SPEC 24.5): the file keeps its last good
    /// bytes, and the refusal names `state-full`.
    #[test]
    fn a_state_over_the_read_limit_is_refused_before_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let paths = RunPaths::new(dir.path());
        ensure_dir(&paths.dir, "test").unwrap();
        let small = State {
            schema: SCHEMA,
            runs: BTreeMap::new(),
        };
        small.save(&paths, "test").unwrap();
        let good = std::fs::read(paths.state()).unwrap();
        let mut big = small.clone();
        let run = Run {
            id: "r".into(),
            unit: "u".into(),
            status: RunStatus::Running,
            driver: Driver::Host,
            session: Some("x".repeat(STATE_LIMIT as usize)),
            created_at: String::new(),
            updated_at: String::new(),
            base: Base {
                commit: String::new(),
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
            lanes: Lanes::new(),
        };
        big.runs.insert("r".into(), run);
        let refused = big.save(&paths, "test").unwrap_err();
        assert_eq!(refused.code, "state-full");
        assert_eq!(std::fs::read(paths.state()).unwrap(), good);
        assert!(State::load(&paths, "test").is_ok());
    }

    /// The schema `iced schema state` ships names every field the state file is written with
    /// (issue 11: a schema that lags the struct tells a reader what is not so).
    #[test]
    fn the_shipped_schema_names_every_field_the_state_writes() {
        let full = br#"{"schema": 1, "runs": {"r": {
            "id": "r", "unit": "001-a", "status": "running", "driver": "host", "session": "s",
            "created_at": "2026-09-30T11:00:00Z", "updated_at": "2026-09-30T11:00:00Z",
            "base": {"commit": "c", "branch": "main"}, "next_eligible_at": null, "paced": 1,
            "pace": {}, "window_from": "2026-09-30T11:00:00Z", "overrun": 3, "brief_layout": 2,
            "spares": ["/w/001-z"],
            "picked": {"by": "next", "why": "the only eligible unit", "priority": 1,
                "created": "t", "eligible": ["001-a"],
                "skipped": [{"unit": "002-b", "code": "unit-held", "reason": "r"}]},
            "lanes": [{"id": "001-a", "unit": "001-a", "stage": "brief", "attempt": 2,
                "crashes": 0, "worktree": null, "branch": null, "reason": null,
                "steps": [{"step": "brief", "attempt": 2, "status": "done",
                    "started_at": "t", "ended_at": null, "inputs": null, "nonce": null,
                    "pid": null, "pid_start": null, "outcome": null}],
                "findings": [], "mutations": 1, "validators": ["full"], "land_round": 1,
                "depends": ["002-b"], "released": true, "attempts_before": 1,
                "arm_requested": true,
                "metrics": [{"event": "verify", "ts": "t", "result": "fail", "attempt": 1},
                    {"event": "escalation", "ts": "t", "kind": "blocked", "reason": "r"},
                    {"event": "escalation", "ts": "t", "kind": "change-expectation", "reason": "r"},
                    {"event": "questions", "ts": "t", "count": 2}],
                "rejected": "why",
                "escalation": {"attempt": 1, "kind": "questions", "message": "m",
                    "questions": [{"id": "Q2", "text": "q", "answer": "a"}], "status": "answered"},
                "unit_text": {"path": "/p", "sha256": "s"},
                "review": {"from": "a", "to": "b", "range": "main~1..main", "paths": ["src/x.rs"]}}]}}}"#;
        let state = State::parse(full).unwrap();
        let written = serde_json::to_value(&state).unwrap();
        let schema: Value =
            serde_json::from_str(include_str!("../../spec/schema/state.schema.json")).unwrap();
        let named = |def: &str| -> Vec<String> {
            schema["$defs"][def]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        let run = &written["runs"]["r"];
        let lane = &run["lanes"][0];
        for (def, value) in [("run", run), ("lane", lane), ("step", &lane["steps"][0])] {
            let mut have = keys(value);
            let mut want = named(def);
            have.sort();
            want.sort();
            assert_eq!(have, want, "`{def}`: written vs the schema");
        }
        let picked = &schema["$defs"]["run"]["properties"]["picked"];
        let mut want: Vec<String> = picked["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let mut have = keys(&run["picked"]);
        have.sort();
        want.sort();
        assert_eq!(have, want, "`picked`: written vs the schema");
    }

    /// A run's spares (SPEC 23.2) are written only when it has some, so a state an older iced
    /// wrote reads and writes as before; both reads (straight from the bytes, and through a
    /// `Value`) give them back.
    #[test]
    fn spares_are_written_only_when_a_run_has_some() {
        let dir = tempfile::tempdir().unwrap();
        let paths = RunPaths::new(dir.path());
        ensure_dir(&paths.dir, "test").unwrap();
        let older = br#"{"schema": 1, "runs": {"r": {
            "id": "r", "unit": "001-p", "status": "running", "driver": "process", "session": null,
            "created_at": "t", "updated_at": "t", "base": {"commit": "c", "branch": "main"},
            "next_eligible_at": null, "lanes": []}}}"#;
        let mut state = State::parse(older).unwrap();
        assert!(state.runs["r"].spares.is_empty());
        state.save(&paths, "test").unwrap();
        assert!(!String::from_utf8(std::fs::read(paths.state()).unwrap())
            .unwrap()
            .contains("spares"));
        state.runs.get_mut("r").unwrap().spares = vec!["/w/002-a".into()];
        state.save(&paths, "test").unwrap();
        let bytes = std::fs::read(paths.state()).unwrap();
        let strict = State::parse(&bytes).unwrap();
        let through_value: State =
            serde_json::from_value(serde_json::from_slice(&bytes).unwrap()).unwrap();
        for read in [strict, through_value] {
            assert_eq!(read.runs["r"].spares, ["/w/002-a"]);
        }
    }

    #[test]
    fn unknown_fields_and_newer_schemas_are_refused() {
        assert!(matches!(
            State::parse(br#"{"schema": 2, "runs": {}}"#),
            Err(ParseError::Newer(2))
        ));
        assert!(matches!(
            State::parse(br#"{"schema": 1, "runs": {}, "x": 1}"#),
            Err(ParseError::Invalid(_))
        ));
        assert!(matches!(
            State::parse(br#"{"schema": 1, "runs": {"#),
            Err(ParseError::Invalid(_))
        ));
        assert!(matches!(
            State::parse(br#"{"runs": {}}"#),
            Err(ParseError::Invalid(_))
        ));
        assert_eq!(
            State::parse(br#"{"schema": 1, "runs": {}}"#)
                .unwrap()
                .runs
                .len(),
            0
        );
    }
}
