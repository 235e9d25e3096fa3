//! One agent of a run as a person reads it: where it ran, who it was, what it cost. Read from the
//! record's `agents` (`record::AgentEntry`), which stay as they are for `--json`.

use crate::run::record::AgentEntry;
use crate::run::state::StepStatus;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub lane: String,
    pub step: String,
    pub attempt: u64,
    pub who: Who,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Who {
    /// An agent handed to the host: what the host said it used, each when said; its cost is never
    /// known to the loop.
    Host {
        model: Option<String>,
        session: Option<String>,
        end: HostEnd,
    },
    /// An agent the loop launched with a runner; each figure when reported.
    Runner {
        runner: Option<String>,
        model: Option<String>,
        turns: Option<u64>,
        cost_usd: Option<f64>,
        duration_ms: Option<u64>,
        /// How it ended: an exit code, a signal, or its timeout.
        end: RunnerEnd,
        /// Its model is the configured one, its harness having reported none.
        model_configured: bool,
    },
}

/// How an agent the loop launched ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunnerEnd {
    Exited(i64),
    Signalled(i64),
    TimedOut,
    /// Nothing recorded says (a record of an older release, or one still running).
    Unknown,
}

/// How a host's agent ended.
#[derive(Debug, Clone, PartialEq)]
pub enum HostEnd {
    Answered,
    /// Its attempt, lane or run ended first, for this reason.
    Unanswered(String),
    /// It answered, and the answer was thrown away (its tree changed).
    Failed,
}

impl Agent {
    /// An agent of a record's `agents`, as JSON (what an entry does not hold is none).
    pub fn read(a: &Value) -> Agent {
        Agent::of(&AgentEntry::deserialize(a).unwrap_or_default())
    }

    /// An agent as `record::agents` wrote it.
    pub fn of(a: &AgentEntry) -> Agent {
        let who = if a.runner.as_deref() == Some("host") {
            Who::Host {
                model: a.model.clone(),
                session: a.session.clone(),
                end: match (a.status, a.ended.as_ref().and_then(Option::as_ref)) {
                    (Some(StepStatus::Done), _) => HostEnd::Answered,
                    (_, Some(why)) => HostEnd::Unanswered(why.clone()),
                    _ => HostEnd::Failed,
                },
            }
        } else {
            Who::Runner {
                runner: a.runner.clone(),
                model: a.model.clone(),
                turns: a.turns,
                cost_usd: a.cost_usd.usd(),
                duration_ms: a.duration_ms,
                end: match (a.timed_out, a.signal, a.exit_code) {
                    (true, _, _) => RunnerEnd::TimedOut,
                    (false, Some(s), _) => RunnerEnd::Signalled(s),
                    (false, None, Some(c)) => RunnerEnd::Exited(c),
                    (false, None, None) => RunnerEnd::Unknown,
                },
                model_configured: a.model_configured,
            }
        };
        Agent {
            lane: a.lane.clone(),
            step: a.step.clone(),
            attempt: u64::from(a.attempt),
            who,
        }
    }
}
