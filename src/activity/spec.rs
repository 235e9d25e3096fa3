//! The three records an activity directory holds, as they are serialised: what to run
//! (`spec.json`, written by the launcher), who runs it (`supervisor.json`, written by the
//! supervisor before it asks the gate), and how it ended (`outcome.json`, written last).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What to run. Serialised as `spec.json` in the activity directory.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct ActivitySpec {
    /// `argv[0]` is the program, looked up on the `PATH` of `env` as `std::process::Command` does.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The child's complete environment: nothing of the supervisor's own is passed on.
    pub env: BTreeMap<String, String>,
    /// Measured from the moment the child is spawned.
    pub timeout_ms: u64,
    /// The wait between SIGINT and SIGTERM, and again between SIGTERM and SIGKILL.
    pub grace_ms: u64,
    pub nonce: String,
    /// Opaque to this module: handed back to the [`Gate`](super::Gate) unread.
    pub gate: serde_json::Value,
}

/// `supervisor.json`: the supervisor's identity. A pid alone is not one (pids are reused), so the
/// start time from `/proc/<pid>/stat` comes with it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SupervisorRecord {
    pub pid: u32,
    pub pid_start: u64,
    pub nonce: String,
}

/// `outcome.json`: how the activity ended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    pub nonce: String,
    /// `None` when the child was killed by a signal or never started.
    pub exit_code: Option<i32>,
    /// The signal that ended the child, if one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// The supervisor was asked to stop (SIGTERM, SIGINT or SIGHUP) before the child ended.
    pub stopped: bool,
    pub duration_ms: u64,
    pub stdout: StreamSummary,
    pub stderr: StreamSummary,
    /// Why the child could not be started (program not found, no such `cwd`, ...).
    pub spawn_error: Option<String>,
    /// The supervisor's own peak resident memory, in KiB (getrusage), so a test can show it stays
    /// bounded whatever the child printed.
    #[serde(default)]
    pub supervisor_max_rss_kb: Option<u64>,
}

/// `child.json`: the child's pid (also its process group) and start time, written once it runs, so
/// a later caller can clear what is left of the group after a supervisor was killed outright.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChildRecord {
    pub pid: u32,
    pub pid_start: u64,
}

/// The whole of one output stream, counted; its tail is in `stdout.txt` or `stderr.txt`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct StreamSummary {
    pub bytes: u64,
    /// Newlines, plus one for a final line without one.
    pub lines: u64,
    /// Something was dropped: the tail file holds less than the child printed.
    pub truncated: bool,
}
