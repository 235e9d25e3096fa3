//! Why `build next` or `drain` chose a run's unit (SPEC 20.13), as the run keeps it: data only,
//! so the state can hold it without knowing the queue that made it (`run::queue`).

use serde::{Deserialize, Serialize};

/// A unit of the queue that a check failed, with the check's code and reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub unit: String,
    pub code: String,
    pub reason: String,
}

/// What a run keeps of why its unit was chosen (SPEC 20.13): by whom, why, what ranked it, the
/// whole ranking (the chosen unit first) and the units passed over (at most 32).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Picked {
    /// `next` or `drain`.
    pub by: String,
    pub why: String,
    pub priority: Option<i64>,
    pub created: Option<String>,
    pub eligible: Vec<String>,
    pub skipped: Vec<Skipped>,
}

impl Picked {
    /// The unit chosen: the first of the ranking.
    pub fn unit(&self) -> &str {
        self.eligible.first().map_or("", String::as_str)
    }
}
