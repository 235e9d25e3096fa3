//! Step keys (SPEC 21.2): which step of a lane a record is. On disk a key is the string it always
//! was (`implement`, `dod-0-1`, `validate-full`, `integrate-2`, ...), so a state written by an
//! older iced reads the same; in code it is a `StepKey`, so no step is named by a string literal
//! and a landing step's round is a number, not a suffix to split off.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StepKey {
    Brief,
    Worktree,
    Implement,
    Receipt,
    /// Definition-of-done command `cmd` of sequence `seq`, run for the receipt.
    Dod {
        seq: usize,
        cmd: usize,
    },
    /// The same command run again in landing round `round`, after the target came in.
    Retest {
        round: u32,
        seq: usize,
        cmd: usize,
    },
    /// A validator (a lens or a reviewer), by name.
    Validate(String),
    Refute,
    Judge,
    Deliver,
    /// The target's commit a lane with dependencies starts from (a project run).
    Base,
    Integrate(u32),
    LandCommit(u32),
    Land(u32),
    PushBranch,
    PrOpen,
    PrArm,
    Retire,
    /// A person resumed landing round `n`.
    Resume(u32),
    /// The planner of planning round `n` (SPEC 20.16).
    Plan(u32),
    /// A plan reviewer (`design` or `record`) of planning round `round`.
    PlanReview {
        lens: String,
        round: u32,
    },
    /// The loop's decision on the plan: the decision record, the approval, the commit.
    PlanDecide,
    /// The test writer of an attempt (SPEC 20.17).
    TestWrite,
    /// The loop's check of what the test writer changed.
    TestCheck,
}

impl StepKey {
    /// The role of an agent step's agent.
    pub fn role(&self) -> &'static str {
        match self {
            StepKey::Implement => "implementer",
            StepKey::Refute => "refuter",
            StepKey::Plan(_) => "planner",
            StepKey::PlanReview { .. } => "plan-reviewer",
            StepKey::TestWrite => "test-writer",
            _ => "validator",
        }
    }

    /// A definition-of-done command, for the receipt or after landing brought the target in.
    pub fn is_dod(&self) -> bool {
        matches!(self, StepKey::Dod { .. } | StepKey::Retest { .. })
    }

    /// A validator's step or the refuter's: an agent that reads.
    pub fn is_validator(&self) -> bool {
        matches!(self, StepKey::Validate(_) | StepKey::Refute)
    }

    /// A planner's or a plan reviewer's step: an agent of planning (SPEC 20.16).
    pub fn is_plan_agent(&self) -> bool {
        matches!(self, StepKey::Plan(_) | StepKey::PlanReview { .. })
    }

    /// An agent never started twice for its step once its supervisor registered: a planner, a
    /// plan reviewer, a test writer (SPEC 20.16, 20.17).
    pub fn runs_once(&self) -> bool {
        self.is_plan_agent() || *self == StepKey::TestWrite
    }

    /// A step of the landing (a hold no longer stops a lane once one is on record).
    pub fn is_landing(&self) -> bool {
        matches!(
            self,
            StepKey::Integrate(_) | StepKey::LandCommit(_) | StepKey::Land(_) | StepKey::PushBranch
        )
    }

    /// The validator's name (`full`, `ruthless`), or `refute`.
    pub fn validator_name(&self) -> Option<&str> {
        match self {
            StepKey::Validate(name) => Some(name),
            StepKey::Refute => Some("refute"),
            _ => None,
        }
    }
}

impl fmt::Display for StepKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepKey::Brief => f.write_str("brief"),
            StepKey::Worktree => f.write_str("worktree"),
            StepKey::Implement => f.write_str("implement"),
            StepKey::Receipt => f.write_str("receipt"),
            StepKey::Dod { seq, cmd } => write!(f, "dod-{seq}-{cmd}"),
            StepKey::Retest { round, seq, cmd } => write!(f, "retest-{round}-{seq}-{cmd}"),
            StepKey::Validate(name) => write!(f, "validate-{name}"),
            StepKey::Refute => f.write_str("refute"),
            StepKey::Judge => f.write_str("judge"),
            StepKey::Deliver => f.write_str("deliver"),
            StepKey::Base => f.write_str("base"),
            StepKey::Integrate(r) => write!(f, "integrate-{r}"),
            StepKey::LandCommit(r) => write!(f, "landcommit-{r}"),
            StepKey::Land(r) => write!(f, "land-{r}"),
            StepKey::PushBranch => f.write_str("push-branch"),
            StepKey::PrOpen => f.write_str("pr-open"),
            StepKey::PrArm => f.write_str("pr-arm"),
            StepKey::Retire => f.write_str("retire"),
            StepKey::Resume(r) => write!(f, "resume-{r}"),
            StepKey::Plan(r) => write!(f, "plan-{r}"),
            StepKey::PlanReview { lens, round } => write!(f, "planreview-{lens}-{round}"),
            StepKey::PlanDecide => f.write_str("plan-decide"),
            StepKey::TestWrite => f.write_str("test-write"),
            StepKey::TestCheck => f.write_str("test-check"),
        }
    }
}

/// Which run of the definition of done: the receipt's, or a landing round's after the target came
/// into the lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DodRun {
    Receipt,
    Retest(u32),
}

impl DodRun {
    /// The step of command `cmd` of sequence `seq` in this run.
    pub fn key(self, seq: usize, cmd: usize) -> StepKey {
        match self {
            DodRun::Receipt => StepKey::Dod { seq, cmd },
            DodRun::Retest(round) => StepKey::Retest { round, seq, cmd },
        }
    }
}

/// A key that names no step this iced knows.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownKey(pub String);

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` names no step", self.0)
    }
}

impl FromStr for StepKey {
    type Err = UnknownKey;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownKey(s.to_owned());
        let numbers = |rest: &str| -> Result<Vec<u64>, UnknownKey> {
            rest.split('-')
                .map(|n| n.parse::<u64>().map_err(|_| unknown()))
                .collect()
        };
        let round =
            |rest: &str| -> Result<u32, UnknownKey> { rest.parse::<u32>().map_err(|_| unknown()) };
        Ok(match s {
            "brief" => StepKey::Brief,
            "worktree" => StepKey::Worktree,
            "implement" => StepKey::Implement,
            "receipt" => StepKey::Receipt,
            "refute" => StepKey::Refute,
            "judge" => StepKey::Judge,
            "deliver" => StepKey::Deliver,
            "base" => StepKey::Base,
            "push-branch" => StepKey::PushBranch,
            "pr-open" => StepKey::PrOpen,
            "pr-arm" => StepKey::PrArm,
            "retire" => StepKey::Retire,
            "plan-decide" => StepKey::PlanDecide,
            "test-write" => StepKey::TestWrite,
            "test-check" => StepKey::TestCheck,
            _ => {
                if let Some(rest) = s.strip_prefix("dod-") {
                    match numbers(rest)?.as_slice() {
                        [seq, cmd] => StepKey::Dod {
                            seq: *seq as usize,
                            cmd: *cmd as usize,
                        },
                        _ => return Err(unknown()),
                    }
                } else if let Some(rest) = s.strip_prefix("retest-") {
                    match numbers(rest)?.as_slice() {
                        [round, seq, cmd] => StepKey::Retest {
                            round: u32::try_from(*round).map_err(|_| unknown())?,
                            seq: *seq as usize,
                            cmd: *cmd as usize,
                        },
                        _ => return Err(unknown()),
                    }
                } else if let Some(name) = s.strip_prefix("validate-").filter(|n| !n.is_empty()) {
                    StepKey::Validate(name.to_owned())
                } else if let Some(r) = s.strip_prefix("integrate-") {
                    StepKey::Integrate(round(r)?)
                } else if let Some(r) = s.strip_prefix("landcommit-") {
                    StepKey::LandCommit(round(r)?)
                } else if let Some(r) = s.strip_prefix("land-") {
                    StepKey::Land(round(r)?)
                } else if let Some(r) = s.strip_prefix("resume-") {
                    StepKey::Resume(round(r)?)
                } else if let Some(r) = s.strip_prefix("plan-") {
                    StepKey::Plan(round(r)?)
                } else if let Some(rest) = s.strip_prefix("planreview-") {
                    let (lens, r) = rest.rsplit_once('-').ok_or_else(unknown)?;
                    if lens.is_empty() {
                        return Err(unknown());
                    }
                    StepKey::PlanReview {
                        lens: lens.to_owned(),
                        round: round(r)?,
                    }
                } else {
                    return Err(unknown());
                }
            }
        })
    }
}

impl Serialize for StepKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StepKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_reads_back_as_the_string_it_was() {
        let keys = [
            StepKey::Brief,
            StepKey::Worktree,
            StepKey::Implement,
            StepKey::Receipt,
            StepKey::Dod { seq: 0, cmd: 1 },
            StepKey::Retest {
                round: 2,
                seq: 1,
                cmd: 0,
            },
            StepKey::Validate("full".into()),
            StepKey::Validate("ruthless".into()),
            StepKey::Refute,
            StepKey::Judge,
            StepKey::Deliver,
            StepKey::Base,
            StepKey::Integrate(1),
            StepKey::LandCommit(3),
            StepKey::Land(2),
            StepKey::PushBranch,
            StepKey::PrOpen,
            StepKey::PrArm,
            StepKey::Retire,
            StepKey::Resume(2),
            StepKey::Plan(1),
            StepKey::PlanReview {
                lens: "design".into(),
                round: 2,
            },
            StepKey::PlanDecide,
            StepKey::TestWrite,
            StepKey::TestCheck,
        ];
        let strings = [
            "brief",
            "worktree",
            "implement",
            "receipt",
            "dod-0-1",
            "retest-2-1-0",
            "validate-full",
            "validate-ruthless",
            "refute",
            "judge",
            "deliver",
            "base",
            "integrate-1",
            "landcommit-3",
            "land-2",
            "push-branch",
            "pr-open",
            "pr-arm",
            "retire",
            "resume-2",
            "plan-1",
            "planreview-design-2",
            "plan-decide",
            "test-write",
            "test-check",
        ];
        for (key, text) in keys.iter().zip(strings) {
            assert_eq!(key.to_string(), text);
            assert_eq!(text.parse::<StepKey>().as_ref(), Ok(key));
            assert_eq!(serde_json::to_value(key).unwrap(), text);
        }
        for bad in [
            "",
            "dod-1",
            "dod-a-b",
            "land-",
            "validate-",
            "integrate-x",
            "plan-x",
            "planreview-2",
            "nope",
        ] {
            assert!(bad.parse::<StepKey>().is_err(), "{bad}");
        }
    }
}
