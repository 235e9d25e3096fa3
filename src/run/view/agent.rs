//! One agent of a run as a person reads it: where it ran, who it was, what it cost. Read from the
//! record's `agents` (`record::agents`), which stay as they are for `--json`.

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
        exit_code: Option<i64>,
    },
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
    pub fn read(a: &Value) -> Agent {
        let text = |key: &str| a[key].as_str().map(str::to_owned);
        let who = if a["runner"] == "host" {
            Who::Host {
                model: text("model"),
                session: text("session"),
                end: match (a["status"].as_str(), a["ended"].as_str()) {
                    (Some("done"), _) => HostEnd::Answered,
                    (_, Some(why)) => HostEnd::Unanswered(why.to_owned()),
                    _ => HostEnd::Failed,
                },
            }
        } else {
            Who::Runner {
                runner: text("runner"),
                model: text("model"),
                turns: a["turns"].as_u64(),
                cost_usd: a["cost_usd"].as_f64(),
                duration_ms: a["duration_ms"].as_u64(),
                exit_code: a["exit_code"].as_i64(),
            }
        };
        Agent {
            lane: text("lane").unwrap_or_default(),
            step: text("step").unwrap_or_default(),
            attempt: a["attempt"].as_u64().unwrap_or_default(),
            who,
        }
    }
}
