//! `.iced/run/events.jsonl`: what happened, one object per line, appended (0600, no symlinks).
//! Events are for people and tools reading a run's story; no decision is ever made from them.

use super::state::RunPaths;
use serde_json::{Map, Value};

/// Append `{ts, run, event, pid, ...fields}`. A failure to log never fails the step that happened.
pub fn emit(paths: &RunPaths, run: &str, event: &str, fields: Value) {
    let mut line = Map::new();
    line.insert("ts".into(), crate::clock::now_iso().into());
    line.insert("run".into(), run.into());
    line.insert("event".into(), event.into());
    line.insert("pid".into(), std::process::id().into());
    if let Value::Object(fields) = fields {
        line.extend(fields);
    }
    let mut text = serde_json::to_string(&line).expect("an event serialises");
    text.push('\n');
    let _ = crate::store::append(&paths.events(), text.as_bytes(), 0o600);
}
