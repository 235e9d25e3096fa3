//! Making and finishing a step record (SPEC 21.2): who started it (pid and start time, so a dead
//! owner is noticed), its nonce, its outcome. The lowest layer of the loop's bookkeeping: it imports
//! nothing of the loop but the state's types.

use super::state::{StepKey, StepRecord, StepStatus};
use crate::activity;
use serde_json::Value;

pub(crate) fn new_nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

pub(crate) fn me() -> (u32, Option<u64>) {
    let pid = std::process::id();
    (pid, activity::pid_start_time(pid))
}

/// Is the invocation that recorded `started` on this record still running?
pub(crate) fn owner_alive(record: &StepRecord) -> bool {
    match (record.pid, record.pid_start) {
        (Some(pid), Some(start)) => activity::pid_start_time(pid) == Some(start),
        _ => false,
    }
}

pub(crate) fn started(
    step: StepKey,
    attempt: u32,
    inputs: Option<String>,
    nonce: Option<String>,
) -> StepRecord {
    let (pid, pid_start) = me();
    StepRecord {
        step,
        attempt,
        status: StepStatus::Started,
        started_at: crate::clock::now_iso(),
        ended_at: None,
        inputs,
        nonce,
        pid: Some(pid),
        pid_start,
        outcome: None,
    }
}

pub(crate) fn finish(record: &mut StepRecord, status: StepStatus, outcome: Value) {
    record.status = status;
    record.ended_at = Some(crate::clock::now_iso());
    record.outcome = Some(outcome);
}
