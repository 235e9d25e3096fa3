//! What the loop took from an agent (a lane report, a validator's or the refuter's answer), kept as
//! a parsed copy in a file of its own and named in the state by path and sha256 (SPEC 24.5). The
//! state file then grows by a line per answer, never by the answer: no agent can make it too large
//! to read. A copy whose bytes no longer match its hash is not used.
//!
//! This module never judges what it keeps; the caller has already checked it strictly.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The largest copy read back: the answers and reports it holds were capped before they were kept.
const COPY_LIMIT: u64 = 1024 * 1024;

/// A kept copy: where it is and the sha256 of its bytes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Kept {
    pub path: PathBuf,
    pub sha256: String,
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Write `value` to `path` (0600, atomically) and say where and what it is. Written again whole by
/// a call that died before recording it: the same value gives the same bytes and hash.
pub fn keep<T: Serialize>(path: &Path, value: &T) -> Result<Kept, crate::store::StoreError> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("a kept value serialises");
    bytes.push(b'\n');
    if let Some(dir) = path.parent() {
        crate::store::create_dir_all(dir)?;
    }
    crate::store::write_atomic(path, &bytes, 0o600)?;
    Ok(Kept {
        path: path.to_owned(),
        sha256: hex(&bytes),
    })
}

/// The kept value, if its file is still the one recorded.
pub fn load<T: DeserializeOwned>(kept: &Kept) -> Option<T> {
    let bytes = crate::store::read_no_follow(&kept.path, COPY_LIMIT).ok()?;
    if hex(&bytes) != kept.sha256 {
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

/// The bytes of a kept copy that is not JSON (a planner's draft): read never through a link, at
/// most `limit`, and `Err` saying why unless they still hash to what was recorded.
pub fn load_bytes(kept: &Kept, limit: u64) -> Result<Vec<u8>, String> {
    let bytes = crate::store::read_no_follow(&kept.path, limit).map_err(|e| e.to_string())?;
    if hex(&bytes) != kept.sha256 {
        return Err(format!(
            "`{}` changed after the loop checked it (its sha256 is not the one recorded)",
            kept.path.display()
        ));
    }
    Ok(bytes)
}

/// The kept value a step's outcome names under `key` (`{"path", "sha256"}`), if any and intact.
pub fn load_from<T: DeserializeOwned>(outcome: Option<&serde_json::Value>, key: &str) -> Option<T> {
    let kept: Kept = serde_json::from_value(outcome?.get(key)?.clone()).ok()?;
    load(&kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_copy_reads_back_and_a_changed_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("answer.json");
        let kept = keep(&path, &serde_json::json!({"verdict": "pass"})).unwrap();
        let back: serde_json::Value = load(&kept).unwrap();
        assert_eq!(back["verdict"], "pass");
        std::fs::write(&path, "{\"verdict\": \"fail\"}\n").unwrap();
        assert!(load::<serde_json::Value>(&kept).is_none());
        let outcome = serde_json::json!({"answer": kept});
        assert!(load_from::<serde_json::Value>(Some(&outcome), "answer").is_none());
    }
}
