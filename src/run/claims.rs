//! `.iced/run/claims/<unit>.json`: which run and session hold a unit. A claim stops a second run of
//! the same unit; it never stops anyone from stepping the run that holds it.

use super::state::{ensure_dir, RunPaths};
use crate::refusal::Refusal;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub run: String,
    pub session: Option<String>,
    pub host: String,
    pub pid: u32,
    pub at: String,
}

pub fn read(paths: &RunPaths, unit: &str) -> Option<Claim> {
    let bytes = crate::store::read_no_follow(&paths.claim(unit), 64 * 1024).ok()?;
    serde_json::from_slice(&bytes).ok()
}

pub fn write(paths: &RunPaths, unit: &str, claim: &Claim, step: &str) -> Result<(), Refusal> {
    ensure_dir(&paths.claims(), step)?;
    let mut text = serde_json::to_vec_pretty(claim).expect("a claim serialises");
    text.push(b'\n');
    crate::store::write_atomic(&paths.claim(unit), &text, 0o600)
        .map_err(|e| crate::repo::store_refusal(step, e))
}

pub fn release(paths: &RunPaths, unit: &str, run: &str, step: &str) -> Result<(), Refusal> {
    // Only the run that holds the claim releases it.
    if read(paths, unit).is_some_and(|c| c.run != run) {
        return Ok(());
    }
    crate::store::remove_if_present(&paths.claim(unit))
        .map(|_| ())
        .map_err(|e| crate::repo::store_refusal(step, e))
}

/// This machine's name, for claims (a claim names where its holder runs).
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}
