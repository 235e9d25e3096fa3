//! Git's worktree bookkeeping, one git at a time per repository (SPEC 21.3). `git worktree add`,
//! `remove`, `move` and `prune` each write the repository's `worktrees/` folder and name an entry
//! by its worktree folder's name; two at once (two threads of one `build`, cron and a person) can
//! drop, reuse or half-write each other's entry. So every such git runs holding an exclusive
//! flock on `<common>/iced/worktrees.lock`, which the git itself holds too (the lock file is its
//! standard input): a git that outlives a killed caller keeps the others out until it ends.
//!
//! This lock is the innermost iced takes: it is held for the one git call and nothing else, and
//! no other lock (the state lock, a claim) is asked for while it is held, so a call holding the
//! state lock may wait for it and it never waits for the state lock.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long a call waits for another's worktree git before it gives up. A worktree git takes a
/// second or so on a busy machine; several calls may queue.
const WAIT: Duration = Duration::from_secs(120);

/// The lock file of the repository whose common git folder is `common`.
pub fn lock_path(common: &Path) -> PathBuf {
    common.join("iced").join("worktrees.lock")
}

/// Run `git <args>` in `root` (a `worktree` subcommand that changes git's list of worktrees)
/// holding the repository's worktree lock, `common` its common git folder (asked of git when
/// `None`). Stdout, or why it failed.
pub fn run(common: Option<&Path>, root: &Path, args: &[&str]) -> Result<String, String> {
    lock(common, root)?.git(args)
}

/// The repository's worktree lock, held: what is looked at and done while it is held is one
/// step of git's bookkeeping (a sandbox found there and removed, with no other git between).
pub struct Held {
    file: File,
    root: PathBuf,
}

impl Held {
    /// `git <args>` in the repository, the lock held by the git too.
    pub fn git(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = super::command(&self.root);
        // The git holds the lock as long as it runs, whatever becomes of this call.
        let stdin = self
            .file
            .try_clone()
            .map_err(|e| format!("the worktree lock could not be shared with git: {e}"))?;
        cmd.stdin(Stdio::from(stdin));
        super::finish(cmd, args)
    }
}

/// Take the worktree lock of the repository at `root`, `common` its common git folder (asked of
/// git when `None`), waiting at most [`WAIT`].
pub fn lock(common: Option<&Path>, root: &Path) -> Result<Held, String> {
    let asked;
    let common = match common {
        Some(c) => c,
        None => {
            asked = common_dir(root)?;
            &asked
        }
    };
    Ok(Held {
        file: take(common)?,
        root: root.to_owned(),
    })
}

/// The repository's common git folder, canonical.
fn common_dir(root: &Path) -> Result<PathBuf, String> {
    let out = super::run(root, &["rev-parse", "--git-common-dir"])?;
    let common = PathBuf::from(out.trim());
    let common = if common.is_absolute() {
        common
    } else {
        root.join(common)
    };
    Ok(common.canonicalize().unwrap_or(common))
}

/// Open and take the lock, waiting at most [`WAIT`].
fn take(common: &Path) -> Result<File, String> {
    let dir = common.join("iced");
    if !dir.is_dir() {
        use std::os::unix::fs::DirBuilderExt;
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir);
        if let Err(e) = made {
            return Err(format!("create `{}`: {e}", dir.display()));
        }
    }
    let path = lock_path(common);
    let file = crate::store::open_lock_file(&path, 0o600).map_err(|e| e.to_string())?;
    if !crate::store::flock_within(&file, WAIT) {
        return Err(format!(
            "git's worktrees are locked (`{}`) by another git for more than {} s; run the command again once it has ended",
            path.display(),
            WAIT.as_secs()
        ));
    }
    Ok(file)
}
