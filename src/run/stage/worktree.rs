//! The worktree step: the lane's branch checked out beside the repository, off the base the run
//! recorded; one left by a call that died is adopted. Under `land.mode: none` a spare of the run
//! (a delivered lane's worktree, SPEC 23.2) is taken instead when the step holds one: switched to
//! the lane branch, cleaned and moved, never when it is not clean.

use crate::run::ctx::*;
use crate::run::events::{emit, Event};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The lane's worktree at `path` on `branch`, made from `base` with its branch, or adopted: the
/// worktree step's whole git work. A new lane costs one git (issue 16): only when git refuses to
/// make the branch is an earlier run's stale one moved aside (`move_aside_stale`) and what is
/// there looked at. The name the stale branch went to, when this call moved it.
pub(crate) fn make_lane_worktree(
    ctx: &Ctx<'_>,
    (run, lane): (&str, &str),
    path: &Path,
    branch: &str,
    base: &str,
) -> Result<Option<String>, String> {
    if add_new(ctx, path, branch, base).is_ok() {
        return Ok(None);
    }
    let aside = move_aside_stale(ctx, run, lane, path, branch, base)?;
    adopt_or_add(ctx, path, branch, base).map(|()| aside.moved_to())
}

/// How the worktree step made the lane's worktree: from the spare it took, or as usual (with the
/// name a stale branch went to, when it moved one).
#[derive(Debug, PartialEq)]
pub(crate) enum Made {
    FromSpare { moved_aside: Option<String> },
    Added { moved_aside: Option<String> },
}

/// The worktree step's git work: from `spare` when the step took one and it can be reused, else
/// `make_lane_worktree`; a spare not reused is named in a `worktree_kept` event.
pub(crate) fn make_or_reuse(
    ctx: &Ctx<'_>,
    (run, lane): (&str, &str),
    spare: Option<&Path>,
    path: &Path,
    branch: &str,
    base: &str,
) -> Result<Made, String> {
    if let Some(spare) = spare {
        match reuse_spare(ctx, (run, lane), spare, path, branch, base) {
            Ok(moved_aside) => return Ok(Made::FromSpare { moved_aside }),
            Err(SpareRefused::Failed(e)) => return Err(e),
            Err(SpareRefused::Kept(reason)) => emit(
                &ctx.paths,
                run,
                Event::WorktreeKept,
                json!({"lane": lane, "worktree": spare, "reason": reason}),
            ),
        }
    }
    make_lane_worktree(ctx, (run, lane), path, branch, base)
        .map(|moved_aside| Made::Added { moved_aside })
}

/// Why a spare was not made the lane's worktree.
#[derive(Debug)]
pub(crate) enum SpareRefused {
    /// Not reused and not touched (not clean, gone, or git would not switch it): left where it is
    /// for a person; the lane's worktree is made the usual way.
    Kept(String),
    /// Switched to the lane branch, then git would not clean or move it: the step fails.
    Failed(String),
}

/// The lane's worktree at `path` on `branch`, made from `spare`, a delivered lane's worktree this
/// step took (SPEC 20.4, 23.2): checked clean, switched to a new `branch` at `base`, its ignored
/// files removed (nothing an earlier lane's agent left reaches this lane), moved to `path`.
/// A lane branch an earlier run left is moved aside first, as `make_lane_worktree` does (SPEC
/// 20.4): the name it went to, when this call moved it. Re-entrant: a call killed after the
/// switch left the branch in the spare, which is cleaned and moved; one killed after the move
/// left it at `path`, adopted; one killed before left no branch, and it is done again.
pub(crate) fn reuse_spare(
    ctx: &Ctx<'_>,
    (run, lane): (&str, &str),
    spare: &Path,
    path: &Path,
    branch: &str,
    base: &str,
) -> Result<Option<String>, SpareRefused> {
    let root = &ctx.repo.root;
    let kept = SpareRefused::Kept;
    // Only a branch at the base is this run's (a killed call's, before any commit).
    let stale = move_aside_stale(ctx, run, lane, path, branch, base).map_err(kept)?;
    let at_base = stale == Stale::AtBase;
    let moved_aside = stale.moved_to();
    let listed = crate::git::worktrees(root).map_err(kept)?;
    match listed.iter().find(|(_, b)| b.as_deref() == Some(branch)) {
        Some((at, _)) if same_path(at, path) => return Ok(moved_aside),
        Some((at, _)) if same_path(at, spare) => {
            // A call killed after its switch: what it saw before is unknown, so it is cleaned.
            return clean_and_move(ctx, spare, path, branch, true).map(|()| moved_aside);
        }
        Some((at, _)) => {
            return Err(kept(format!(
                "the lane branch `{branch}` is checked out at `{}`",
                at.display()
            )))
        }
        None => {}
    }
    if !listed.iter().any(|(at, _)| same_path(at, spare)) {
        return Err(kept("it is no longer a worktree of the repository".into()));
    }
    if at_base {
        return Err(kept(format!("the lane branch `{branch}` exists already")));
    }
    if path.exists() {
        return Err(kept(format!("`{}` exists already", path.display())));
    }
    // Every git below runs in the spare: it must be the worktree git made, not a link to another
    // checkout or a folder whose `.git` names another repository's (SPEC 23.2).
    own_worktree(ctx, spare)
        .map_err(|why| kept(format!("it is not the worktree git made: {why}")))?;
    // One walk says both whether it is clean and whether there is anything ignored to remove.
    let besides = crate::git::besides_head(spare).map_err(kept)?;
    if besides == crate::git::Besides::Changes {
        return Err(kept("it has uncommitted or untracked changes".into()));
    }
    // git will not move a worktree with a submodule checked out in it, and once switched, a spare
    // that cannot move fails the step: a repository with submodules adds its worktrees.
    if spare.join(".gitmodules").exists() {
        return Err(kept(
            "it holds submodules, which `git worktree move` refuses".into(),
        ));
    }
    crate::git::run(spare, &["switch", "-q", "-c", branch, base]).map_err(kept)?;
    crate::failpoint::hit("worktree-reuse-after-switch");
    // The switch removes only tracked files: with nothing ignored before it, there is nothing
    // to clean after it.
    let clean = besides == crate::git::Besides::Ignored;
    clean_and_move(ctx, spare, path, branch, clean).map(|()| moved_aside)
}

/// `dir` is a linked worktree as git made it: a folder (no symbolic link), whose `.git` is a file
/// naming git's folder for it in the repository's `worktrees/`, which names it back. Asked of a
/// spare before it is switched, and of any folder but the checkout an activity is started in.
/// Git's folder for it, or what is wrong.
pub(crate) fn own_worktree(ctx: &Ctx<'_>, dir: &Path) -> Result<std::path::PathBuf, String> {
    let is = |p: &Path, folder: bool| {
        std::fs::symlink_metadata(p).is_ok_and(|m| {
            if folder {
                m.file_type().is_dir()
            } else {
                m.file_type().is_file()
            }
        })
    };
    if !is(dir, true) {
        return Err("a link, a file or nothing is at its path, not a folder".into());
    }
    let dot_git = dir.join(".git");
    if !is(&dot_git, false) {
        return Err("its `.git` is not a file".into());
    }
    // A path git wrote: absolute, or (`worktree.useRelativePaths`) relative to the file's folder.
    let named = |file: &Path| -> Option<std::path::PathBuf> {
        let text = crate::store::read_no_follow(file, 4096).ok()?;
        let text = String::from_utf8(text).ok()?;
        let line = text.lines().next()?;
        let named = Path::new(line.strip_prefix("gitdir:").unwrap_or(line).trim());
        file.parent()?.join(named).canonicalize().ok()
    };
    let admin = named(&dot_git).ok_or("its `.git` names no folder")?;
    let worktrees = ctx
        .claims()
        .common_dir()
        .map(|c| c.join("worktrees"))
        .and_then(|w| w.canonicalize().ok());
    if worktrees.is_none() || admin.parent() != worktrees.as_deref() {
        return Err(format!(
            "its `.git` names `{}`, not a worktree of this repository",
            admin.display()
        ));
    }
    if named(&admin.join("gitdir")) != dot_git.canonicalize().ok() {
        return Err(format!("`{}` does not name it back", admin.display()));
    }
    Ok(admin)
}

/// Remove the locks a git that did not finish left for the lane worktree `dir` (SPEC 24.6):
/// `index.lock` and `HEAD.lock` in its git folder, and the lock of its lane `branch`'s ref. Once
/// nothing of the lane runs there: an agent killed in the middle of `git commit` would otherwise
/// fail every later git that writes the index or moves the branch. Only a worktree git made;
/// each logged as `git_lock_removed`. Err when a lock is there that cannot be removed, or whose
/// git still runs.
pub(crate) fn clear_git_locks(
    ctx: &Ctx<'_>,
    lane_of: (&str, &str),
    step_branch: (&str, Option<&str>),
    dir: &Path,
) -> Result<(), String> {
    // A replaced worktree is judged by its own checks; nothing of it is touched here.
    match own_worktree(ctx, dir) {
        Ok(admin) => remove_git_locks(ctx, lane_of, step_branch, (dir, &admin)),
        Err(_) => Ok(()),
    }
}

/// Before the loop launches an agent that works in `lane`'s worktree (its implementer, its test
/// writer; `step` names which): nothing of the lane runs there now, so a git lock the last
/// attempt's agent or a killed definition-of-done command left goes before the agent's own git
/// meets it and the attempt is spent on it (SPEC 24.6). One that cannot go is left to the
/// receipt or the writer's check, which name it.
pub(crate) fn clear_git_locks_for_agent(
    ctx: &Ctx<'_>,
    run: &str,
    lane: &crate::run::state::Lane,
    step: &str,
    worktree: &Path,
) {
    let _ = clear_git_locks(
        ctx,
        (run, &lane.id),
        (step, lane.branch.as_deref()),
        worktree,
    );
}

/// How long a lock's git that still runs is waited for before the step gives up (SPEC 24.6).
const GIT_STILL_RUNNING: Duration = Duration::from_secs(30);

/// [`clear_git_locks`], for a worktree `dir` already found to be the one git made: `admin` is
/// git's folder for it (`own_worktree`'s answer).
pub(crate) fn remove_git_locks(
    ctx: &Ctx<'_>,
    (run, lane): (&str, &str),
    (step, branch): (&str, Option<&str>),
    (dir, admin): (&Path, &Path),
) -> Result<(), String> {
    let mut locks = vec![admin.join("index.lock"), admin.join("HEAD.lock")];
    // `<common>/worktrees/<name>`: the common folder is two up.
    if let (Some(common), Some(branch)) = (admin.parent().and_then(Path::parent), branch) {
        locks.push(common.join(format!("refs/heads/{branch}.lock")));
    }
    let there = |lock: &PathBuf| std::fs::symlink_metadata(lock).is_ok();
    if !locks.iter().any(there) {
        return Ok(());
    }
    // A git still running there (a killed call's, which outlived it; a person's) owns its lock.
    let waiting = |pids: &[u32]| {
        emit(
            &ctx.paths,
            run,
            Event::GitLockWaiting,
            json!({"lane": lane, "step": step, "pids": pids}),
        )
    };
    match wait_for_gits(dir, &locks, GIT_STILL_RUNNING, waiting) {
        Waited::None => {}
        Waited::Ended { pids, ms } => emit(
            &ctx.paths,
            run,
            Event::GitLockWaited,
            json!({"lane": lane, "step": step, "pids": pids, "ms": ms}),
        ),
        Waited::Running(working) => {
            let lock = locks.iter().find(|l| there(l)).unwrap_or(&locks[0]);
            return Err(format!(
                "git's lock `{}` is held by a git still running in the worktree (pid {}: `{}`) after {} s; it was left as it is: once that process has ended, or been stopped, `iced run resume {run}` goes on",
                lock.display(),
                working.pid,
                working.command,
                GIT_STILL_RUNNING.as_secs()
            ));
        }
    }
    for lock in locks {
        let Ok(meta) = std::fs::symlink_metadata(&lock) else {
            continue;
        };
        let cannot = |why: String| {
            format!(
                "git's lock `{}` (a git command that did not finish left it) could not be removed: {why}",
                lock.display()
            )
        };
        if meta.is_dir() {
            return Err(cannot("it is a folder".into()));
        }
        std::fs::remove_file(&lock).map_err(|e| cannot(e.to_string()))?;
        crate::failpoint::hit("git-lock-after-remove");
        emit(
            &ctx.paths,
            run,
            Event::GitLockRemoved,
            json!({"lane": lane, "step": step, "path": lock}),
        );
    }
    Ok(())
}

/// What waiting for the gits still working in a worktree came to.
#[derive(Debug, PartialEq, Eq)]
enum Waited {
    /// None was running.
    None,
    /// Those that ran have ended, after `ms`.
    Ended { pids: Vec<u32>, ms: u64 },
    /// One still runs after the bound.
    Running(crate::activity::Working),
}

/// Wait, at most `bound`, until no process works in `dir` or holds one of `locks` open
/// (`activity::working_in`); `waiting` is told the first ones found, once, when there are any.
fn wait_for_gits(
    dir: &Path,
    locks: &[PathBuf],
    bound: Duration,
    waiting: impl FnOnce(&[u32]),
) -> Waited {
    let mut waiting = Some(waiting);
    let start = Instant::now();
    let mut seen: Vec<u32> = Vec::new();
    loop {
        let working = crate::activity::working_in(dir, locks);
        let Some(first) = working.first() else {
            return if seen.is_empty() {
                Waited::None
            } else {
                Waited::Ended {
                    pids: seen,
                    ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                }
            };
        };
        if start.elapsed() >= bound {
            return Waited::Running(first.clone());
        }
        for w in &working {
            if !seen.contains(&w.pid) {
                seen.push(w.pid);
            }
        }
        if let Some(waiting) = waiting.take() {
            waiting(&seen);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The second half of `reuse_spare`, once `branch` is checked out in the spare: what git ignores
/// removed (when `clean`), then the worktree moved to `path`.
fn clean_and_move(
    ctx: &Ctx<'_>,
    spare: &Path,
    path: &Path,
    branch: &str,
    clean: bool,
) -> Result<(), SpareRefused> {
    let failed = SpareRefused::Failed;
    if clean {
        crate::git::run(spare, &["clean", "-ffdxq"]).map_err(failed)?;
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| failed(format!("create `{}`: {e}", parent.display())))?;
    }
    let (from, to) = (spare.display().to_string(), path.display().to_string());
    let mut moved = ctx.worktree_git(&["worktree", "move", &from, &to]);
    // The `git worktree move` of a call that died may still be running (it outlives that call)
    // and have moved it first: adopted once git lists the branch at `path`. Bounded.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while moved.is_err() && std::time::Instant::now() < give_up {
        if crate::git::worktree_of_branch(&ctx.repo.root, branch)
            .is_some_and(|at| same_path(&at, path))
        {
            moved = Ok(String::new());
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    moved.map_err(failed)?;
    crate::failpoint::hit("worktree-reuse-after-move");
    Ok(())
}

/// `git worktree add -b`: the branch and its worktree at once, one git. git refuses a branch that
/// is there already.
fn add_new(ctx: &Ctx<'_>, path: &Path, branch: &str, base: &str) -> Result<String, String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("create `{}`: {e}", parent.display()))?;
    }
    // `--quiet`: git prints nothing, so if this call dies, the `git worktree add` it started
    // (which outlives it) is not killed by SIGPIPE halfway and does not undo its own work under a
    // later call that has already adopted the worktree.
    let path_s = path.display().to_string();
    ctx.worktree_git(&["worktree", "add", "--quiet", "-b", branch, &path_s, base])
}

pub(crate) fn add_worktree(
    ctx: &Ctx<'_>,
    path: &Path,
    branch: &str,
    base: &str,
) -> Result<(), String> {
    // A new lane: its branch and worktree at once, one git (issue 16); only then is what is
    // there looked at.
    if add_new(ctx, path, branch, base).is_ok() {
        return Ok(());
    }
    adopt_or_add(ctx, path, branch, base)
}

/// After `add_new` was refused: adopt the worktree a crashed call (or a person) made for
/// `branch` at `path`, or add one for the branch that is there (or, gone meanwhile, a new one).
fn adopt_or_add(ctx: &Ctx<'_>, path: &Path, branch: &str, base: &str) -> Result<(), String> {
    let root = &ctx.repo.root;
    let is_ours = |existing: &Path| same_path(existing, path);
    let path_s = path.display().to_string();
    let add = |exists: bool| {
        if exists {
            ctx.worktree_git(&["worktree", "add", "--quiet", &path_s, branch])
        } else {
            add_new(ctx, path, branch, base)
        }
    };
    // Adopt what a crashed call (or a person) already made. No worktree holds a branch that does
    // not exist.
    let exists = crate::git::branch_exists(root, branch);
    if let Some(existing) = exists
        .then(|| crate::git::worktree_of_branch(root, branch))
        .flatten()
    {
        if is_ours(&existing) {
            return Ok(());
        }
        return Err(format!(
            "branch `{branch}` is checked out at `{}`, not at `{}`",
            existing.display(),
            path.display()
        ));
    }
    let mut added = add(exists);
    // The `git worktree add` of a call that died may still be running (it outlives that call)
    // and have taken the path first: adopt its worktree once it is there, or add again if it gave
    // up. Bounded: a directory someone else left at the path fails after a short wait.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while added.is_err() && std::time::Instant::now() < give_up {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if crate::git::worktree_of_branch(root, branch).is_some_and(|e| is_ours(&e)) {
            return Ok(());
        }
        if !path.exists() {
            added = add(crate::git::branch_exists(root, branch));
        }
    }
    added.map(|_| ())
}

/// A lane branch an earlier run left (handed back, blocked, abandoned: kept for a person) is not
/// this run's starting point: its tip is not the lane's base, which a branch this run made (a
/// killed call's, before any commit) always has. It is moved aside to `<branch>-<12 hex of its
/// tip>`, its worktree too when that is at `path`, so the worktree step makes the lane fresh from
/// the base (SPEC 20.4). What it found, with the name it went to when this call moved it. Re-entrant: a call killed
/// after the worktree's move finds the branch checked out elsewhere and renames it; one killed
/// after the rename finds no branch.
fn move_aside_stale(
    ctx: &Ctx<'_>,
    run: &str,
    lane: &str,
    path: &Path,
    branch: &str,
    base: &str,
) -> Result<Stale, String> {
    let root = &ctx.repo.root;
    if !crate::git::branch_exists(root, branch) {
        return Ok(Stale::Absent);
    }
    let commit_of = |name: &str| {
        crate::git::run(
            root,
            &["rev-parse", "--verify", &format!("{name}^{{commit}}")],
        )
    };
    let tip = commit_of(&format!("refs/heads/{branch}"))?;
    if tip == commit_of(base)? {
        return Ok(Stale::AtBase);
    }
    let short = &tip[..12.min(tip.len())];
    let moved_to = format!("{branch}-{short}");
    if let Some(existing) =
        crate::git::worktree_of_branch(root, branch).filter(|e| same_path(e, path))
    {
        let aside = format!("{}-{short}", existing.display());
        ctx.worktree_git(&["worktree", "move", &existing.display().to_string(), &aside])?;
        crate::failpoint::hit("worktree-after-move-worktree");
    }
    crate::git::run(root, &["branch", "-m", branch, &moved_to])?;
    emit(
        &ctx.paths,
        run,
        Event::BranchMovedAside,
        json!({
            "lane": lane,
            "branch": branch,
            "moved_to": moved_to,
            "tip": tip,
            "worktree": crate::git::worktree_of_branch(root, &moved_to),
        }),
    );
    crate::failpoint::hit("worktree-after-move-aside");
    Ok(Stale::MovedTo(moved_to))
}

/// The lane branch as `move_aside_stale` left it.
#[derive(Debug, PartialEq)]
enum Stale {
    /// There is none.
    Absent,
    /// There is one at the base: this run's.
    AtBase,
    /// An earlier run's, moved aside to this name: the lane's name is free.
    MovedTo(String),
}

impl Stale {
    fn moved_to(self) -> Option<String> {
        match self {
            Stale::MovedTo(name) => Some(name),
            Stale::Absent | Stale::AtBase => None,
        }
    }
}

/// `existing` (as git lists a worktree) is `path`.
fn same_path(existing: &Path, path: &Path) -> bool {
    existing == path || existing.canonicalize().ok() == path.canonicalize().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::git_sleeping;

    #[test]
    fn a_git_still_working_is_waited_for_and_one_that_outlasts_the_bound_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let (bin, dir) = (tmp.path().join("bin"), tmp.path().join("lane"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let locks = [dir.join("index.lock")];
        assert_eq!(
            wait_for_gits(&dir, &locks, Duration::from_secs(5), |_| {}),
            Waited::None
        );
        let mut short = git_sleeping(&bin, &dir, "0.4");
        let waited = wait_for_gits(&dir, &locks, Duration::from_secs(5), |_| {});
        short.wait().unwrap();
        match waited {
            Waited::Ended { pids, ms } => {
                assert_eq!(pids, [short.id()]);
                assert!(ms >= 300, "{ms}");
            }
            other => panic!("{other:?}"),
        }
        let mut long = git_sleeping(&bin, &dir, "30");
        let waited = wait_for_gits(&dir, &locks, Duration::from_millis(200), |_| {});
        long.kill().unwrap();
        long.wait().unwrap();
        match waited {
            Waited::Running(w) => assert_eq!(w.pid, long.id()),
            other => panic!("{other:?}"),
        }
    }
}
