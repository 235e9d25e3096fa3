//! What a step recorded, typed (SPEC 21.2). On disk a step record's `outcome` is the JSON it always
//! was, so a state written by an older iced reads the same; in code it is read through these types,
//! one per kind of step, so that no reader looks a key up by its name. A key a type does not know
//! is ignored; a key missing from a record is its default.
//!
//! `Outcome::of` picks the type by the step's key. The readers of one kind use that kind's type
//! directly (`lane.outcome_as::<JudgeOutcome>(&StepKey::Judge)`).

use super::kept::Kept;
use super::keys::StepKey;
use super::state::StepRecord;
use super::validate::Merged;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The brief written for an attempt.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct BriefOutcome {
    pub path: String,
    pub sha256: String,
}

/// The lane's worktree made (or why not).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct WorktreeOutcome {
    pub path: Option<String>,
    pub branch: Option<String>,
    pub error: Option<String>,
    /// The spare worktree (a delivered lane's, SPEC 23.2) the step took: named on its `started`
    /// record before any git runs, so a call that died leaves the next exactly that one.
    pub spare: Option<String>,
}

/// An activity that ended (the implementer, a definition-of-done command), with what the loop
/// added: a harness's result, a crash, a rate limit; or the host's receipt of its agent's report.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct ActivityOutcome {
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub timed_out: bool,
    pub duration_ms: Option<u64>,
    pub spawn_error: Option<String>,
    /// What the child printed, in summary (bytes, lines, whether cut): passed on as it is.
    pub stdout: Option<Value>,
    pub stderr: Option<Value>,
    pub crashed: bool,
    pub rate_limited: bool,
    pub harness_failed: Option<String>,
    pub harness: Option<Value>,
    /// A host's implementer: where its report was handed in.
    pub receipt_path: Option<String>,
    /// The host agent was handed out (its record started).
    pub handed: bool,
    /// Why a host agent's attempt, lane or run ended before it answered.
    pub ended: Option<String>,
    /// Why a remote lane's branch could not be published before its implementer (SPEC 20.19):
    /// nothing was launched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The remote could not be reached: the step runs again after a backoff (SPEC 20.10).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unreachable: bool,
}

/// What a harness reported of its run (SPEC 20.8), as far as the run record uses it.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct HarnessSaid {
    pub model: Option<String>,
    pub turns: Option<u64>,
    /// A number, or `"unknown"`.
    pub cost_usd: Option<Value>,
}

impl ActivityOutcome {
    /// Whether the command's exit code is one of `expected`.
    pub fn passed(&self, expected: &[i32]) -> bool {
        self.exit_code
            .is_some_and(|c| expected.iter().any(|e| i64::from(*e) == c))
    }
}

/// The receipt: its own checks, then, with the definition of done in, whether it verified.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct ReceiptOutcome {
    pub verified: bool,
    pub missing: Vec<String>,
    pub commands: Vec<Value>,
    pub ahead: Option<u64>,
    /// The head and tree the receipt checked: what the validators judge (SPEC 24.3).
    pub head: Option<String>,
    pub tree: Option<String>,
    pub guard: Option<Value>,
    /// The implementer's report as the loop kept it (SPEC 24.5).
    pub report: Option<Kept>,
    pub handback: Option<String>,
    /// The implementer's escalation or questions, numbered by the loop (SPEC 20.7).
    pub escalation: Option<crate::run::escalation::Escalation>,
    /// Why the lane's worktree is not the one git made, when it is not (SPEC 24.6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
    /// The remote could not be reached to fetch what a remote lane's agent pushed (SPEC 20.19):
    /// why; nothing else was checked, and the checks run again after the run's backoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<String>,
}

impl ReceiptOutcome {
    /// The receipt ends with its own checks, no definition of done run: the implementer stopped
    /// for a person, or nothing may be started in the worktree.
    pub fn ends_at_checks(&self) -> bool {
        self.handback.is_some() || self.escalation.is_some() || self.replaced.is_some()
    }
}

/// A path of the test writer's commits the guard denied (SPEC 20.17).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct TestDenied {
    pub path: String,
    pub rule: String,
    pub reason: String,
}

/// The loop's check of what a test writer changed (SPEC 20.17): the commits `from..head`, the
/// paths the guard denied, a dirty worktree, a malformed report, or the request it made.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct TestCheckOutcome {
    pub from: Option<String>,
    pub head: Option<String>,
    pub tree: Option<String>,
    pub commits: Vec<String>,
    pub denied: Vec<TestDenied>,
    pub dirty: bool,
    pub problem: Option<String>,
    pub escalation: Option<crate::run::escalation::Escalation>,
    pub report: Option<Kept>,
}

/// One definition-of-done command as the receipt recorded it, as far as a reader words it; the
/// receipt's `commands` stay as they were written, for `verify.json` to carry whole.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct CommandRan {
    pub command: String,
    /// None for a command that was skipped, killed by a signal or could not start.
    pub exit_code: Option<i64>,
    pub duration_ms: Option<u64>,
}

impl CommandRan {
    /// The command a receipt's entry records (defaults for what it does not hold).
    pub fn of(entry: &Value) -> CommandRan {
        CommandRan::deserialize(entry).unwrap_or_default()
    }
}

/// A field that does not read as `T` is `T`'s default, as a missing one is (with
/// `#[serde(default, deserialize_with = "or_default")]`): what the loop wrote is read as
/// tolerantly as it was when it was looked up key by key.
pub(crate) fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    Ok(T::deserialize(Value::deserialize(d)?).unwrap_or_default())
}

/// What a harness's result says of the provider's pace: whether it asked to slow down.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct HarnessPace {
    #[serde(default, deserialize_with = "or_default")]
    pub rate_limited: bool,
}

/// The lane moved after it was judged: the verdict's head, where the branch is, what was added.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Moved {
    pub judged: String,
    pub head: String,
    pub commits: Vec<String>,
}

/// A validator's or the refuter's step, from prepared to answered.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct ValidatorOutcome {
    pub prepared: bool,
    pub worktree: Option<String>,
    pub output: Option<String>,
    /// Handed to the host (its agent counts as alive until it answers).
    pub handed: bool,
    /// The activity ended (a process validator), or the host handed its answer in.
    pub finished: Option<Value>,
    pub answer: Option<Kept>,
    pub problem: Option<String>,
    /// The validator changed its tree: what moved.
    pub mutation: Option<Vec<String>>,
    pub moved: Option<Moved>,
    pub harness: Option<Value>,
    pub crashed: bool,
    pub rate_limited: bool,
    pub harness_failed: Option<String>,
    pub pace_applied: bool,
    /// Why a host validator's attempt, lane or run ended before it answered.
    pub ended: Option<String>,
    /// Why the lane branch could not be published before remote validators (SPEC 20.19).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The remote could not be reached: the step runs again after a backoff (SPEC 20.10).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unreachable: bool,
}

/// A round's verdict.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct JudgeOutcome {
    pub merged: Merged,
    pub minted: Vec<String>,
    pub undecided: Vec<String>,
    pub manual: Vec<String>,
    pub needs_human: bool,
    /// The head and tree judged (SPEC 24.3).
    pub head: Option<String>,
    pub tree: Option<String>,
}

/// The close committed on the lane branch; or prepared and not yet there; or why not.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct DeliverOutcome {
    pub commit: Option<String>,
    pub prepared: Option<String>,
    pub moved: Option<Moved>,
    pub error: Option<String>,
    /// The failure is the guard's refusal of the range delivered (SPEC 24.2): the agent's work,
    /// not the loop's, so a resume starts a fresh attempt rather than delivering again.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub denied: bool,
}

/// A landing step (`base`, `integrate-<r>`, `landcommit-<r>`, `land-<r>`, `push-branch`,
/// `pr-open`, `pr-arm`, `retire`): what it did, or that the world is not there yet (`again`), or
/// why it failed.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct LandOutcome {
    pub commit: Option<String>,
    pub target: Option<String>,
    pub target_commit: Option<String>,
    /// The target's changes came into the lane: the definition of done runs again.
    pub merged: bool,
    pub head: Option<String>,
    pub accepted: Option<String>,
    pub accepted_commits: Vec<String>,
    pub landed: Option<String>,
    pub from: Option<String>,
    pub url: Option<String>,
    pub number: Option<u64>,
    pub armed: bool,
    pub retired: bool,
    pub kept: Option<String>,
    /// Not a failure: try again, in this round or (`new_round`) the next.
    pub again: bool,
    pub new_round: bool,
    pub why: Option<String>,
    pub error: Option<String>,
    /// `land.remote` could not be reached (SPEC 20.19): tried again after the run's backoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<String>,
}

/// What a step recorded, by the kind of step it is.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Brief(BriefOutcome),
    Worktree(WorktreeOutcome),
    Activity(ActivityOutcome),
    Receipt(ReceiptOutcome),
    TestCheck(TestCheckOutcome),
    Validator(ValidatorOutcome),
    Judge(JudgeOutcome),
    Deliver(DeliverOutcome),
    Land(LandOutcome),
    /// A person resumed a landing round.
    Resume,
    /// A step of planning (SPEC 20.16), as recorded.
    Plan(Value),
}

impl Outcome {
    /// The typed outcome of `record`, if it has one that reads as its kind.
    pub fn of(record: &StepRecord) -> Option<Outcome> {
        let value = record.outcome.as_ref()?;
        fn read<T: serde::de::DeserializeOwned>(v: &Value) -> Option<T> {
            T::deserialize(v).ok()
        }
        Some(match &record.step {
            StepKey::Brief => Outcome::Brief(read(value)?),
            StepKey::Worktree => Outcome::Worktree(read(value)?),
            StepKey::Implement
            | StepKey::TestWrite
            | StepKey::Dod { .. }
            | StepKey::Retest { .. } => Outcome::Activity(read(value)?),
            StepKey::Receipt => Outcome::Receipt(read(value)?),
            StepKey::TestCheck => Outcome::TestCheck(read(value)?),
            StepKey::Validate(_) | StepKey::Refute => Outcome::Validator(read(value)?),
            StepKey::Judge => Outcome::Judge(read(value)?),
            StepKey::Deliver => Outcome::Deliver(read(value)?),
            StepKey::Base
            | StepKey::Integrate(_)
            | StepKey::LandCommit(_)
            | StepKey::Land(_)
            | StepKey::PushBranch
            | StepKey::PrOpen
            | StepKey::PrArm
            | StepKey::Retire => Outcome::Land(read(value)?),
            StepKey::Resume(_) => Outcome::Resume,
            StepKey::Plan(_) | StepKey::PlanReview { .. } | StepKey::PlanDecide => {
                Outcome::Plan(value.clone())
            }
        })
    }
}

impl StepRecord {
    /// This record's outcome read as `T` (defaults for what it does not hold); `None` without an
    /// outcome, or when it does not read as `T`.
    pub fn outcome_as<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        T::deserialize(self.outcome.as_ref()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::state::StepStatus;
    use serde_json::json;

    fn record(step: StepKey, outcome: Value) -> StepRecord {
        StepRecord {
            step,
            attempt: 1,
            status: StepStatus::Done,
            started_at: String::new(),
            ended_at: None,
            inputs: None,
            nonce: None,
            pid: None,
            pid_start: None,
            outcome: Some(outcome),
        }
    }

    /// The shapes today's iced writes (tests/cli/compat.rs holds real ones) read as their types.
    #[test]
    fn every_kind_of_step_reads_as_its_type() {
        let r = record(
            StepKey::Receipt,
            json!({"verified": true, "missing": [], "commands": [], "ahead": 1, "head": "h", "tree": "t", "guard": [], "report": {"path": "/p", "sha256": "s"}, "handback": null}),
        );
        match Outcome::of(&r) {
            Some(Outcome::Receipt(o)) => {
                assert!(o.verified);
                assert_eq!(o.head.as_deref(), Some("h"));
                assert_eq!(o.report.map(|k| k.sha256), Some("s".into()));
            }
            other => panic!("{other:?}"),
        }
        let r = record(
            StepKey::Deliver,
            json!({"moved": {"judged": "a", "head": "b", "commits": ["b x"]}}),
        );
        assert_eq!(
            r.outcome_as::<DeliverOutcome>()
                .and_then(|d| d.moved)
                .map(|m| m.commits),
            Some(vec!["b x".to_owned()])
        );
        let r = record(
            StepKey::Integrate(2),
            json!({"again": true, "new_round": true, "why": "moved"}),
        );
        match Outcome::of(&r) {
            Some(Outcome::Land(o)) => assert!(o.again && o.new_round),
            other => panic!("{other:?}"),
        }
        let r = record(
            StepKey::Dod { seq: 0, cmd: 0 },
            json!({"nonce": "n", "exit_code": 2, "timed_out": false}),
        );
        assert!(r.outcome_as::<ActivityOutcome>().unwrap().passed(&[0, 2]));
    }
}
