//! The state lock: an exclusive flock on `.iced/run/lock`, held only to read the state, decide and
//! record; never while an agent or a command runs. A caller that finds it held polls for a bounded
//! time, then refuses naming the holder (written into the lock file by whoever holds it).

use super::state::{ensure_dir, RunPaths, State};
use crate::refusal::Refusal;
use fs2::FileExt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

pub struct StateLock {
    file: File,
}

fn open(paths: &RunPaths, step: &str) -> Result<File, Refusal> {
    ensure_dir(&paths.dir, step)?;
    let path = paths.lock();
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&path)
        .map_err(|e| {
            if e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) {
                crate::repo::store_refusal(step, crate::store::StoreError::Symlink(path.clone()))
            } else {
                crate::refusal::io_error(step, format!("open `{}`: {e}", path.display()))
            }
        })
}

impl StateLock {
    /// Take the lock, waiting up to `wait`.
    pub fn acquire(paths: &RunPaths, step: &str, wait: Duration) -> Result<StateLock, Refusal> {
        let mut file = open(paths, step)?;
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock_exclusive() {
                Ok(()) => break,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(_) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    let holder = holder.trim();
                    return Err(Refusal::new(
                        step,
                        "state-locked",
                        format!(
                            "the run state is locked by {} and was not free within {} s",
                            if holder.is_empty() { "another iced" } else { holder },
                            wait.as_secs()
                        ),
                        "wait for that invocation to finish and run the command again; the lock is never held while an agent runs, so a long hold means that process is stuck",
                    ));
                }
            }
        }
        // Say who holds it, for whoever waits. Best effort: the lock itself is the flock.
        let me = format!(
            "pid {} ({}) since {}\n",
            std::process::id(),
            std::env::args().take(3).collect::<Vec<_>>().join(" "),
            crate::clock::now_iso()
        );
        let _ = file.set_len(0);
        let _ = file.seek(SeekFrom::Start(0));
        let _ = file.write_all(crate::text::for_terminal(&me).as_bytes());
        Ok(StateLock { file })
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = FileExt::unlock(&self.file);
    }
}

/// Lock, read, let `f` decide and change the state, write it if it changed, unlock.
pub fn transact<T>(
    paths: &RunPaths,
    step: &str,
    wait: Duration,
    f: impl FnOnce(&mut State) -> Result<T, Refusal>,
) -> Result<T, Refusal> {
    let _lock = StateLock::acquire(paths, step, wait)?;
    let mut state = State::load(paths, step)?;
    let before = state.clone();
    let out = f(&mut state)?;
    if state != before {
        state.save(paths, step)?;
    }
    Ok(out)
}
