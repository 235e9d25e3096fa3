//! The activities of a run that are running now, as the state and their folders say: what a caller
//! waiting on the run watches for an outcome, and what it shows a person meanwhile.
//!
//! It reads; it never records, decides or signals anything, and takes no lock (the state file is
//! replaced atomically, so a read sees one whole version of it).

use super::ctx::Ctx;
use super::outcome::ValidatorOutcome;
use super::state::{State, StepStatus};
use crate::activity::{self, files};
use std::path::PathBuf;
use std::time::SystemTime;

/// One launched activity whose outcome the loop has not recorded yet.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveActivity {
    pub lane: String,
    /// The step it runs: `implement`, a definition-of-done command `dod-<i>-<j>`, a validator.
    pub step: String,
    pub attempt: u32,
    /// Its folder (SPEC 21.4): `outcome.json` appears there when it ends, and `stdout.txt` and
    /// `stderr.txt` hold the ends of its output.
    pub dir: PathBuf,
    /// When it was launched: the time of its `spec.json` (file system time, as in SPEC 21.4, so a
    /// pinned `ICED_NOW` does not hide how long it has run).
    pub launched: Option<SystemTime>,
    /// The launch's nonce: an `outcome.json` with another is not this launch's.
    pub nonce: String,
}

impl LiveActivity {
    /// Its outcome is there now: the next step records it.
    pub fn finished(&self) -> bool {
        activity::read_outcome(&self.dir).is_some_and(|o| o.nonce == self.nonce)
    }
}

/// The activities of `run_id` in `state` that were launched and whose outcome the loop has not
/// recorded: step records `started` with a nonce in the lane's current attempt, not yet marked
/// `finished`, whose folder holds a `spec.json`.
pub fn live_activities(ctx: &Ctx<'_>, state: &State, run_id: &str) -> Vec<LiveActivity> {
    let Some(run) = state.runs.get(run_id) else {
        return Vec::new();
    };
    let mut live = Vec::new();
    for lane in &run.lanes {
        for record in lane.steps.iter().filter(|r| {
            r.status == StepStatus::Started
                && r.attempt == lane.attempt
                && r.outcome_as::<ValidatorOutcome>()
                    .is_none_or(|o| o.finished.is_none())
        }) {
            let Some(nonce) = &record.nonce else {
                continue;
            };
            let dir = ctx.activity_dir(&run.id, &lane.id, &record.step, record.attempt);
            let Ok(spec) = std::fs::symlink_metadata(dir.join(files::SPEC)) else {
                // A host's receipt key, or a launch that has not written its spec yet.
                continue;
            };
            live.push(LiveActivity {
                lane: lane.id.clone(),
                step: record.step.to_string(),
                attempt: record.attempt,
                dir,
                launched: spec.modified().ok(),
                nonce: nonce.clone(),
            });
        }
    }
    live
}
