//! The state lock: an exclusive flock on `.iced/run/lock`, held only to read the state, decide and
//! record; never while an agent or a command runs. A caller that finds it held looks again, soon at
//! first (`store::flock_within`), for a bounded time, then refuses naming the holder (written into
//! the lock file by whoever holds it).

use super::state::{ensure_dir, RunPaths, State};
use crate::refusal::Refusal;
use fs2::FileExt;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt as _;
use std::time::Duration;

pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

pub struct StateLock {
    file: File,
}

fn open(paths: &RunPaths, step: &str) -> Result<File, Refusal> {
    ensure_dir(&paths.dir, step)?;
    crate::store::open_lock_file(&paths.lock(), 0o600)
        .map_err(|e| crate::repo::store_refusal(step, e))
}

impl StateLock {
    /// Take the lock, waiting up to `wait`.
    pub fn acquire(paths: &RunPaths, step: &str, wait: Duration) -> Result<StateLock, Refusal> {
        let mut file = open(paths, step)?;
        if !crate::store::flock_within(&file, wait) {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(Refusal::new(
                step,
                "state-locked",
                format!(
                    "the run state is locked by {} and was not free within {} s",
                    if holder.is_empty() { "another iced" } else { holder },
                    // `run.lockWaitSec` may be a fraction: 0.2 s is not "0 s".
                    wait.as_secs_f64()
                ),
                "wait for that invocation to finish and run the command again; the lock is never held while an agent runs, so a long hold means that process is stuck",
            ));
        }
        // Say who holds it, for whoever waits. Best effort: the lock itself is the flock.
        let me = format!(
            "pid {} ({}) since {}\n",
            std::process::id(),
            std::env::args().take(3).collect::<Vec<_>>().join(" "),
            crate::clock::now_iso()
        );
        // A record of one fixed size, written over the blank one the last holder left: no change
        // of the file's size (which the file system journals) in a step or at its end.
        let _ = file.write_all_at(&holder_record(&crate::text::for_terminal(&me)), 0);
        if file
            .metadata()
            .is_ok_and(|m| m.len() != HOLDER_RECORD as u64)
        {
            let _ = file.set_len(HOLDER_RECORD as u64);
        }
        Ok(StateLock { file })
    }
}

/// The size of the holder's record in the lock file.
const HOLDER_RECORD: usize = 256;

/// `text` as the lock file's record: cut to fit (at a character's end), padded with spaces.
fn holder_record(text: &str) -> Vec<u8> {
    let mut end = text.len().min(HOLDER_RECORD - 1);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut record = text[..end].trim_end().as_bytes().to_vec();
    if !record.is_empty() {
        record.push(b'\n');
    }
    record.resize(HOLDER_RECORD, b' ');
    record
}

impl Drop for StateLock {
    fn drop(&mut self) {
        // Blank while nobody holds it (SPEC 21.1).
        let _ = self.file.write_all_at(&holder_record(""), 0);
        let _ = FileExt::unlock(&self.file);
    }
}

/// The logs a step appends to, `events.jsonl` and the repository's `metrics.jsonl`, checked before
/// anything is decided or written: an append to a link or a FIFO fails, and an event that fails
/// is dropped, so the step refuses instead (SPEC 24.6).
fn check_logs(paths: &RunPaths, step: &str) -> Result<(), Refusal> {
    let metrics = paths.dir.parent().map(|iced| iced.join("metrics.jsonl"));
    for path in std::iter::once(paths.events()).chain(metrics) {
        crate::store::check_appendable(&path).map_err(|e| crate::repo::store_refusal(step, e))?;
    }
    Ok(())
}

/// Lock, read, let `f` decide and change the state, write it if it changed, unlock.
pub fn transact<T>(
    paths: &RunPaths,
    step: &str,
    wait: Duration,
    f: impl FnOnce(&mut State) -> Result<T, Refusal>,
) -> Result<T, Refusal> {
    transact_seeing(paths, step, wait, |_, state| f(state))
}

/// [`transact`], `f` shown the state as read beside the copy it changes: what changed is told
/// without a copy of its own.
pub fn transact_seeing<T>(
    paths: &RunPaths,
    step: &str,
    wait: Duration,
    f: impl FnOnce(&State, &mut State) -> Result<T, Refusal>,
) -> Result<T, Refusal> {
    let _lock = StateLock::acquire(paths, step, wait)?;
    check_logs(paths, step)?;
    // The state as read is shared with this process's next read when nothing changes (and its
    // copy is what changes): one copy a transaction, no parse of what this process wrote.
    let before = State::load_known(paths, step)?;
    let mut state = before.state.clone();
    let out = f(&before.state, &mut state)?;
    if state != before.state {
        super::ended::move_out(paths, &mut state, step)?;
        state.save_known(paths, step)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a fractional `run.lockWaitSec` was printed as whole seconds ("within 0 s").
    #[test]
    fn a_fractional_wait_is_named_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let paths = RunPaths::new(dir.path());
        let _held = StateLock::acquire(&paths, "test", Duration::from_secs(1)).unwrap();
        let refused = StateLock::acquire(&paths, "test", Duration::from_millis(200))
            .err()
            .expect("the lock is held");
        assert_eq!(refused.code, "state-locked");
        assert!(
            refused.reason.ends_with("was not free within 0.2 s"),
            "{}",
            refused.reason
        );
    }
}
