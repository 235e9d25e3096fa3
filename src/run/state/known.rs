//! The state file as this process last wrote or read it, with the state it reads as (issue 16).
//! The threads of a build step one run, and each transaction reads what the one before wrote: a
//! load that finds the very bytes known takes a copy of their state instead of parsing them
//! again. Keyed by the file's path and its whole text, so a file another process wrote (or a
//! person edited) is parsed as ever; only what this process holds is saved the parse.

use super::State;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A state file's text and the state it reads as.
pub struct Known {
    path: PathBuf,
    bytes: Vec<u8>,
    pub state: State,
}

static LAST: Mutex<Option<Arc<Known>>> = Mutex::new(None);

/// The known state of `path` when its text is `bytes`.
pub fn get(path: &Path, bytes: &[u8]) -> Option<Arc<Known>> {
    let last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    let known = last
        .as_ref()
        .filter(|k| k.path == path && k.bytes == bytes)?
        .clone();
    drop(last);
    // Every test and every debug build checks that the copy is what a parse gives.
    if cfg!(debug_assertions) {
        let parsed = State::parse(bytes).ok();
        assert!(
            parsed.as_ref() == Some(&known.state),
            "the state known for `{}` is not what its text reads as",
            path.display()
        );
    }
    Some(known)
}

impl Known {
    /// No file: nothing to key, kept by no one.
    pub fn of_nothing(state: State) -> Known {
        Known {
            path: PathBuf::new(),
            bytes: Vec::new(),
            state,
        }
    }
}

/// Remember `state` as what `bytes`, the text of `path`, reads as.
pub fn keep(path: &Path, bytes: Vec<u8>, state: State) -> Arc<Known> {
    let known = Arc::new(Known {
        path: path.to_owned(),
        bytes,
        state,
    });
    *LAST.lock().unwrap_or_else(|p| p.into_inner()) = Some(known.clone());
    known
}
