//! Claims on units (SPEC 20.3, 24.9): which run, of which checkout, holds a unit. A claim stops a
//! second run of the same unit from this checkout or from any other checkout of the repository (a
//! linked worktree too); it never stops anyone from stepping the run that holds it.
//!
//! Claims live in the repository's common git directory, `<common>/iced/claims/<unit>.json`,
//! which every checkout shares. A claim is created only where none exists (a finished temp file
//! hard-linked into place: never a replace). It is removed only by the run that holds it, or when
//! it is stale (orphaned, or of an ended run) while the state lock of the
//! checkout it names is held, so a claim being written with its run is never taken for an orphan.
//! Every removal also holds the claims' own lock and removes only the bytes it judged, so two
//! callers can never both remove one claim and then both create theirs.
//!
//! Claims an older iced wrote under `.iced/run/claims/` are read (and released) too, for one
//! release. This module never holds two checkouts' state locks at once, and never decides anything
//! about a unit but who holds it.

use super::lock::StateLock;
use super::state::{ensure_dir, RunPaths, State};
use crate::refusal::{io_error, Refusal};

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A claim file is small; anything larger is not one.
const CLAIM_LIMIT: u64 = 64 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub run: String,
    pub session: Option<String>,
    pub host: String,
    pub pid: u32,
    pub at: String,
    /// The checkout whose run holds the unit (its root, absolute). Absent only in a claim an older
    /// iced wrote into a checkout's own `.iced/run/claims/`: that checkout is the holder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
}

/// A claim as found on disk: what it says, the checkout holding it, and its bytes (a removal
/// removes these bytes only, never a claim written since).
#[derive(Debug, Clone)]
pub struct Found {
    pub claim: Claim,
    pub root: PathBuf,
    pub path: PathBuf,
    bytes: Vec<u8>,
}

/// Where the run a claim names stands in the state of the checkout holding the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Live,
    Ended,
    /// The state does not hold the run (an admit died between its claim and its run), or the
    /// checkout is gone: nobody holds the unit.
    Orphaned,
}

impl Standing {
    pub fn of(state: &State, run: &str) -> Standing {
        match state.runs.get(run) {
            None => Standing::Orphaned,
            Some(r) if r.status.is_ended() => Standing::Ended,
            Some(_) => Standing::Live,
        }
    }
}

/// Whether a claim stops a new run (SPEC 20.3): a live run's does; one of an ended run (its end
/// was saved and the call died before releasing it) or an orphaned one does not.
pub fn blocks(standing: Standing) -> bool {
    standing == Standing::Live
}

/// What taking the claims of a new run came to.
#[derive(Debug, PartialEq)]
pub enum Taken {
    /// Every unit is claimed for the new run.
    All,
    /// A live run of this checkout claimed the run's own unit first: resume it instead.
    LiveHere(String),
}

/// The claims of one checkout's repository. Made once per call (`git rev-parse` runs once).
#[derive(Debug, Clone)]
pub struct Claims {
    /// `<common>/iced/claims` (below it the iced root's path in its work tree, when the root is
    /// not the top); `None` outside git, where no run can start.
    dir: Option<PathBuf>,
    /// The repository's common git directory, canonical; `None` outside git.
    common: Option<PathBuf>,
    /// `.iced/run/claims` of this checkout, where an older iced wrote claims.
    legacy: PathBuf,
    /// This checkout's root, canonical: what a claim's `root` is compared with.
    root: PathBuf,
}

impl Claims {
    pub fn open(root: &Path) -> Claims {
        let legacy = RunPaths::new(root).claims();
        let root = root.canonicalize().unwrap_or_else(|_| root.to_owned());
        let asked = crate::git::run(&root, &["rev-parse", "--git-common-dir", "--show-prefix"])
            .ok()
            .and_then(|out| {
                let mut lines = out.lines();
                let common = PathBuf::from(lines.next()?.trim());
                let prefix = lines.next().unwrap_or("").trim().trim_end_matches('/');
                let common = if common.is_absolute() {
                    common
                } else {
                    root.join(common)
                };
                let common = common.canonicalize().unwrap_or(common);
                let dir = common.join("iced").join("claims");
                let dir = if prefix.is_empty() {
                    dir
                } else {
                    dir.join(prefix)
                };
                Some((dir, common))
            });
        let (dir, common) = asked.unzip();
        Claims {
            dir,
            common,
            legacy,
            root,
        }
    }

    /// The repository's common git directory, canonical; `None` outside git.
    pub fn common_dir(&self) -> Option<&Path> {
        self.common.as_deref()
    }

    /// This checkout's root, as claims name it.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the claim on `unit` lives (in the common git directory).
    pub fn path(&self, unit: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{unit}.json")))
    }

    fn legacy_path(&self, unit: &str) -> PathBuf {
        self.legacy.join(format!("{unit}.json"))
    }

    /// The claim on `unit`, if any: the shared one, else one an older iced left in this checkout.
    pub fn read(&self, unit: &str, step: &str) -> Result<Option<Found>, Refusal> {
        if let Some(found) = self.read_shared(unit, step)? {
            return Ok(Some(found));
        }
        self.read_legacy(unit, step)
    }

    fn read_shared(&self, unit: &str, step: &str) -> Result<Option<Found>, Refusal> {
        let Some(path) = self.path(unit) else {
            return Ok(None);
        };
        let Some((claim, bytes)) = read_claim(&path, unit, step)? else {
            return Ok(None);
        };
        let Some(root) = claim.root.clone() else {
            return Err(unreadable(&path, unit, "it names no checkout", step));
        };
        Ok(Some(Found {
            claim,
            root,
            path,
            bytes,
        }))
    }

    fn read_legacy(&self, unit: &str, step: &str) -> Result<Option<Found>, Refusal> {
        let path = self.legacy_path(unit);
        let Some((claim, bytes)) = read_claim(&path, unit, step)? else {
            return Ok(None);
        };
        Ok(Some(Found {
            claim,
            root: self.root.clone(),
            path,
            bytes,
        }))
    }

    /// Where the run of `found` stands: in `here` (this checkout's state, as the caller read it)
    /// when the claim is this checkout's, else in the other checkout's state, read under its lock.
    /// Never call this for another checkout while holding this checkout's lock.
    fn standing(
        &self,
        found: &Found,
        here: &State,
        step: &str,
        wait: Duration,
    ) -> Result<Standing, Refusal> {
        if found.root == self.root {
            return Ok(Standing::of(here, &found.claim.run));
        }
        elsewhere(&found.root, step, wait, |state| {
            Ok(Standing::of(state, &found.claim.run))
        })
    }

    /// The check of SPEC 20.3 (`unit-claimed`), read-only: refuses when another run, of this
    /// checkout or another, holds `unit`. `here` is this checkout's state; the caller does not
    /// hold its lock.
    pub fn check(
        &self,
        unit: &str,
        here: &State,
        step: &str,
        wait: Duration,
    ) -> Result<(), Refusal> {
        let found = [self.read_shared(unit, step)?, self.read_legacy(unit, step)?];
        for found in found.into_iter().flatten() {
            let standing = self.standing(&found, here, step, wait)?;
            if blocks(standing) {
                return Err(self.claimed(unit, &found, step));
            }
        }
        Ok(())
    }

    /// Remove the stale claims on `units` that name another checkout, each while that
    /// checkout's state lock is held. Called after every check passed and before this checkout's
    /// lock is taken (two checkouts' locks are never held at once). A claim found to block is left
    /// alone: `take` reports it.
    pub fn clear_elsewhere(
        &self,
        units: &[String],
        step: &str,
        wait: Duration,
    ) -> Result<(), Refusal> {
        for unit in units {
            let Some(found) = self.read_shared(unit, step)? else {
                continue;
            };
            if found.root == self.root {
                continue;
            }
            elsewhere(&found.root, step, wait, |state| {
                if !blocks(Standing::of(state, &found.claim.run)) {
                    self.remove(&found, step, wait)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Claim `units` for `claim`'s run, under this checkout's state lock (`state` is what it
    /// holds). A stale claim of this checkout is removed and the unit claimed; a claim of another
    /// checkout found now was made after the checks, and wins. On any refusal the claims made
    /// here are removed again, so a refused admit leaves none.
    pub fn take(
        &self,
        units: &[String],
        claim: &Claim,
        state: &State,
        step: &str,
        wait: Duration,
    ) -> Result<Taken, Refusal> {
        let mut made: Vec<String> = Vec::new();
        for (i, unit) in units.iter().enumerate() {
            match self.take_one(unit, claim, state, step, wait) {
                Ok(None) => made.push(unit.clone()),
                Ok(Some((found, standing))) => {
                    self.undo(&made, &claim.run, step, wait);
                    if i == 0 && standing == Standing::Live && found.root == self.root {
                        return Ok(Taken::LiveHere(found.claim.run));
                    }
                    return Err(self.claimed(unit, &found, step));
                }
                Err(refusal) => {
                    self.undo(&made, &claim.run, step, wait);
                    return Err(refusal);
                }
            }
        }
        Ok(Taken::All)
    }

    /// Claim one unit; `Some` is the claim that blocks it.
    fn take_one(
        &self,
        unit: &str,
        claim: &Claim,
        state: &State,
        step: &str,
        wait: Duration,
    ) -> Result<Option<(Found, Standing)>, Refusal> {
        // An older iced's claim in this checkout: judged like any claim of this checkout.
        if let Some(old) = self.read_legacy(unit, step)? {
            let standing = Standing::of(state, &old.claim.run);
            if blocks(standing) {
                return Ok(Some((old, standing)));
            }
            self.remove(&old, step, wait)?;
        }
        // A claim removed between our create and our read is gone: create again. Bounded, as
        // every round needs another caller to create and remove a claim in between.
        for _ in 0..5 {
            if self.create(unit, claim, step)? {
                return Ok(None);
            }
            let Some(found) = self.read_shared(unit, step)? else {
                continue;
            };
            if found.root != self.root {
                // Its standing could only be read under the other checkout's lock, which is never
                // taken while this one's is held; made after our checks, it is live or about to be.
                return Ok(Some((found, Standing::Live)));
            }
            let standing = Standing::of(state, &found.claim.run);
            if blocks(standing) {
                return Ok(Some((found, standing)));
            }
            self.remove(&found, step, wait)?;
        }
        Err(Refusal::new(
            step,
            "unit-claimed",
            format!("`{unit}` was claimed and released by other callers while this one tried to claim it"),
            "build again",
        ))
    }

    /// Create the claim on `unit` if none exists: false when one does. A temp file, complete and
    /// synced, is hard-linked into place: `link` fails on an existing name, so a claim is never
    /// replaced, and a crash leaves either no claim or a whole one.
    fn create(&self, unit: &str, claim: &Claim, step: &str) -> Result<bool, Refusal> {
        let (Some(dir), Some(path)) = (self.dir.as_ref(), self.path(unit)) else {
            return Err(Refusal::new(
                step,
                "not-a-git-repo",
                format!(
                    "`{}` is not in a git repository, where claims are kept",
                    self.root.display()
                ),
                "the loop works on branches and worktrees: `git init`, commit the repository, then build again",
            ));
        };
        ensure_dir(dir, step)?;
        let mut text = serde_json::to_vec_pretty(claim).expect("a claim serialises");
        text.push(b'\n');
        crate::store::create_new_whole(&path, &text, 0o600)
            .map_err(|e| io_error(step, format!("create the claim `{}`: {e}", path.display())))
    }

    /// Remove `found` if the file still holds exactly its bytes, under the claims' lock (so no
    /// other remover can remove it, and a creator cannot write over it, in between).
    fn remove(&self, found: &Found, step: &str, wait: Duration) -> Result<(), Refusal> {
        let _lock = self.removal_lock(step, wait)?;
        let unit = found
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        match read_claim(&found.path, &unit, step)? {
            Some((_, bytes)) if bytes == found.bytes => {
                crate::store::remove_if_present(&found.path)
                    .map_err(|e| crate::repo::store_refusal(step, e))?;
                if let Some(dir) = found.path.parent() {
                    let _ = crate::store::sync_dir(dir);
                }
                Ok(())
            }
            // Gone, or another claim since: not ours to remove.
            _ => Ok(()),
        }
    }

    /// Release the claim on `unit` when `run` holds it (the run ended, or the lane left it).
    pub fn release(&self, unit: &str, run: &str, step: &str) -> Result<(), Refusal> {
        let wait = super::lock::DEFAULT_WAIT;
        let found = [self.read_shared(unit, step)?, self.read_legacy(unit, step)?];
        for found in found.into_iter().flatten() {
            if found.claim.run == run {
                self.remove(&found, step, wait)?;
            }
        }
        Ok(())
    }

    /// Best effort: remove the claims this call made for `run` before it was refused. What is
    /// left names a run no state holds, which the next admit takes for an orphan anyway.
    fn undo(&self, units: &[String], run: &str, step: &str, wait: Duration) {
        for unit in units {
            if let Ok(Some(found)) = self.read_shared(unit, step) {
                if found.claim.run == run {
                    let _ = self.remove(&found, step, wait);
                }
            }
        }
    }

    /// The lock every removal holds: `<claims>/.lock`, a flock held for a read and an unlink.
    fn removal_lock(&self, step: &str, wait: Duration) -> Result<Option<File>, Refusal> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        ensure_dir(dir, step)?;
        lock_within(
            &dir.join(".lock"),
            wait,
            step,
            "the claims' lock",
            "another iced is removing a claim; run the command again",
        )
        .map(Some)
    }

    /// `unit-claimed`, naming the run, and the checkout when it is another one.
    fn claimed(&self, unit: &str, found: &Found, step: &str) -> Refusal {
        let c = &found.claim;
        let mine = found.root == self.root;
        let checkout = if mine {
            String::new()
        } else {
            format!(" of the checkout `{}`", found.root.display())
        };
        // Only a live run's claim blocks (`blocks`), so the remedy is about that run.
        let remedy = if mine {
            format!(
                "step that run instead (`iced implement step --run {}`), or end it: `iced run abandon {}`",
                c.run, c.run
            )
        } else {
            format!(
                "that run belongs to the checkout `{}`: step it there (`iced implement step --run {}`), or end it there: `iced run abandon {}`",
                found.root.display(),
                c.run,
                c.run
            )
        };
        Refusal::new(
            step,
            "unit-claimed",
            format!(
                "`{unit}` is claimed by run `{}`{checkout} (session {}, host {}, pid {}, since {})",
                c.run,
                c.session.as_deref().unwrap_or("none"),
                c.host,
                c.pid,
                c.at
            ),
            remedy,
        )
    }
}

/// Run `f` on the state of the checkout at `root`, under that checkout's state lock. A checkout
/// that is gone, or never ran the loop, holds no run: `f` sees an empty state, under no lock.
fn elsewhere<T>(
    root: &Path,
    step: &str,
    wait: Duration,
    f: impl FnOnce(&State) -> Result<T, Refusal>,
) -> Result<T, Refusal> {
    let paths = RunPaths::new(root);
    if !paths.dir.is_dir() {
        return f(&State::default());
    }
    let _lock = StateLock::acquire(&paths, step, wait)?;
    let state = State::load(&paths, step)?;
    f(&state)
}

/// Read a claim file: `None` when there is none. Opened without following a link or blocking on
/// a FIFO; anything but a regular file holding a claim is refused, naming it.
fn read_claim(path: &Path, unit: &str, step: &str) -> Result<Option<(Claim, Vec<u8>)>, Refusal> {
    use crate::store::StoreError;
    let bytes = match crate::store::read_no_follow(path, CLAIM_LIMIT) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(StoreError::TooLarge { .. }) => {
            return Err(unreadable(path, unit, "it is too large", step))
        }
        Err(e @ StoreError::NotRegular { .. }) => {
            return Err(Refusal::new(
                step,
                "not-a-regular-file",
                e.to_string(),
                format!("remove it; if no run is building `{unit}`, build again"),
            ))
        }
        Err(e) => return Err(crate::repo::store_refusal(step, e)),
    };
    match serde_json::from_slice::<Claim>(&bytes) {
        Ok(claim) => Ok(Some((claim, bytes))),
        Err(e) => Err(unreadable(path, unit, &e.to_string(), step)),
    }
}

fn unreadable(path: &Path, unit: &str, why: &str, step: &str) -> Refusal {
    Refusal::new(
        step,
        "unit-claimed",
        format!("`{}` is not a claim iced can read ({why})", path.display()),
        format!("if no run is building `{unit}` in any checkout, remove that file and build again"),
    )
}

/// This machine's name, for claims (a claim names where its holder runs).
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Take the flock of `path` (created 0600), waiting at most `wait`; else `state-locked`, naming
/// `what` the lock is, with `remedy`.
pub(crate) fn lock_within(
    path: &Path,
    wait: Duration,
    step: &str,
    what: &str,
    remedy: &str,
) -> Result<File, Refusal> {
    let file = crate::store::open_lock_file(path, 0o600)
        .map_err(|e| crate::repo::store_refusal(step, e))?;
    if !crate::store::flock_within(&file, wait) {
        return Err(Refusal::new(
            step,
            "state-locked",
            // `run.lockWaitSec` may be a fraction: 0.2 s is not "0 s".
            format!(
                "{what} `{}` was not free within {} s",
                path.display(),
                wait.as_secs_f64()
            ),
            remedy,
        ));
    }
    Ok(file)
}
