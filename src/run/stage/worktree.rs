//! The worktree step: the lane's branch checked out beside the repository, off the base the run
//! recorded; one left by a call that died is adopted.

use crate::run::ctx::*;
use crate::run::events::{emit, Event};
use serde_json::json;
use std::path::Path;

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
    adopt_or_add(ctx, path, branch, base).map(|()| aside)
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
    crate::git::run(
        &ctx.repo.root,
        &["worktree", "add", "--quiet", "-b", branch, &path_s, base],
    )
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
            crate::git::run(root, &["worktree", "add", "--quiet", &path_s, branch])
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
/// the base (SPEC 20.4). The name it went to, when this call moved it. Re-entrant: a call killed
/// after the worktree's move finds the branch checked out elsewhere and renames it; one killed
/// after the rename finds no branch.
fn move_aside_stale(
    ctx: &Ctx<'_>,
    run: &str,
    lane: &str,
    path: &Path,
    branch: &str,
    base: &str,
) -> Result<Option<String>, String> {
    let root = &ctx.repo.root;
    if !crate::git::branch_exists(root, branch) {
        return Ok(None);
    }
    let commit_of = |name: &str| {
        crate::git::run(
            root,
            &["rev-parse", "--verify", &format!("{name}^{{commit}}")],
        )
    };
    let tip = commit_of(&format!("refs/heads/{branch}"))?;
    if tip == commit_of(base)? {
        return Ok(None);
    }
    let short = &tip[..12.min(tip.len())];
    let moved_to = format!("{branch}-{short}");
    if let Some(existing) =
        crate::git::worktree_of_branch(root, branch).filter(|e| same_path(e, path))
    {
        let aside = format!("{}-{short}", existing.display());
        crate::git::run(
            root,
            &["worktree", "move", &existing.display().to_string(), &aside],
        )?;
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
    Ok(Some(moved_to))
}

/// `existing` (as git lists a worktree) is `path`.
fn same_path(existing: &Path, path: &Path) -> bool {
    existing == path || existing.canonicalize().ok() == path.canonicalize().ok()
}
