//! Remote lanes (SPEC 20.19): the lane branch put on `land.remote` for an agent that works
//! elsewhere, and what it pushed fetched back into the loop's own worktree of the lane, where the
//! receipt checks it as a local lane's.

use crate::run::ctx::Ctx;
use crate::run::state::{Lane, Run};
use std::path::Path;

/// Where the agent's report travels: a last commit of its own that changes this path alone. An
/// `owned` path (SPEC 24.1): in a judged range the guard refuses it, so it never lands.
pub(crate) const REPORT_PATH: &str = ".iced/run/lane-report.json";

/// The loop's record of where the remote lane branch last was, as the loop saw or put it.
pub(crate) fn seen_ref(run: &str, lane: &str) -> String {
    format!("refs/iced/remote/{run}/{lane}")
}

/// Has the loop published this lane to the remote (is it a remote lane)?
pub(crate) fn is_remote_lane(ctx: &Ctx<'_>, run: &str, lane: &str) -> bool {
    seen(ctx.repo.root.as_path(), run, lane).is_some()
}

fn seen(root: &Path, run: &str, lane: &str) -> Option<String> {
    crate::git::run(
        root,
        &["rev-parse", "--verify", "--quiet", &seen_ref(run, lane)],
    )
    .ok()
    .filter(|s| !s.is_empty())
}

fn remote<'a>(ctx: &'a Ctx<'_>) -> Result<&'a str, String> {
    ctx.settings
        .land
        .remote
        .as_deref()
        .ok_or_else(|| "`land.remote` is not set: a remote lane has no remote".to_owned())
}

/// `land.remote`'s URL: a remote's name resolved by `git remote get-url`, else the value as given.
pub(crate) fn remote_url(ctx: &Ctx<'_>) -> String {
    let Ok(name) = remote(ctx) else {
        return String::new();
    };
    crate::git::run(&ctx.repo.root, &["remote", "get-url", "--", name])
        .unwrap_or_else(|_| name.to_owned())
}

/// The remote lane branch's commit now (`git ls-remote`), None when it is not there.
pub(crate) fn remote_tip(ctx: &Ctx<'_>, branch: &str) -> Result<Option<String>, String> {
    let out = crate::git::run(
        &ctx.repo.root,
        &[
            "ls-remote",
            "--heads",
            "--",
            remote(ctx)?,
            &format!("refs/heads/{branch}"),
        ],
    )?;
    // ls-remote matches a pattern at the end of a name: take the branch's own line only.
    let name = format!("refs/heads/{branch}");
    Ok(out.lines().find_map(|l| {
        let (sha, reference) = l.split_once('\t')?;
        (reference == name).then(|| sha.to_owned())
    }))
}

/// Why a remote step failed when listing the branch there failed too: git's error `e`.
fn unreachable(e: String) -> String {
    format!("the remote could not be reached: {e}")
}

/// Why a lane branch was not published: the remote could not be reached (the lane is not at
/// fault: the step runs again after a backoff), or it holds what the run may not overwrite.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unpublished {
    pub why: String,
    pub unreachable: bool,
}

impl Unpublished {
    pub(crate) fn refused(why: String) -> Unpublished {
        Unpublished {
            why,
            unreachable: false,
        }
    }
}

/// Put the remote lane branch at `commit` (SPEC 20.19). The run's first publish never overwrites a
/// branch someone else left; a later one replaces what the run's own agents pushed, with a lease on
/// the value it just read. A branch already at `commit` is taken as published. The remote could not
/// be reached when listing the branch fails, before the push or after a push that failed.
pub(crate) fn publish(
    ctx: &Ctx<'_>,
    run: &str,
    lane: &str,
    branch: &str,
    commit: &str,
) -> Result<(), Unpublished> {
    let root = ctx.repo.root.as_path();
    let remote = remote(ctx).map_err(Unpublished::refused)?;
    let down = |e: String| Unpublished {
        why: unreachable(e),
        unreachable: true,
    };
    let now = remote_tip(ctx, branch).map_err(down)?;
    let first = seen(root, run, lane).is_none();
    if now.as_deref() != Some(commit) {
        if let (true, Some(other)) = (first, &now) {
            return Err(Unpublished::refused(format!(
                "the remote's `{branch}` is at {}, which this run did not put there; it is not overwritten: delete or rename it on the remote, then resume the run",
                short(other)
            )));
        }
        let lease = format!(
            "--force-with-lease=refs/heads/{branch}:{}",
            now.as_deref().unwrap_or("")
        );
        let pushed = crate::git::run(
            root,
            &[
                "push",
                "--quiet",
                &lease,
                "--",
                remote,
                &format!("{commit}:refs/heads/{branch}"),
            ],
        );
        if let Err(e) = pushed {
            // A push the remote refused leaves it listable; one that never got there does not.
            remote_tip(ctx, branch).map_err(down)?;
            return Err(Unpublished::refused(format!(
                "the remote's `{branch}` could not be put at {}: {e}",
                short(commit)
            )));
        }
        // Pushed, not yet known as the loop's: a replay finds the branch at `commit`.
        crate::failpoint::hit("remote-after-push");
    }
    crate::git::run(root, &["update-ref", &seen_ref(run, lane), commit])
        .map(|_| ())
        .map_err(Unpublished::refused)
}

/// Once the lane is retired (SPEC 20.19): the remote lane branch is deleted, with a lease on where
/// the loop last put it, so a later run of the unit finds no branch it would refuse to overwrite;
/// then the loop's record of it. A branch someone moved since (a forge's pull request head that a
/// person pushed to) is left and said. `Ok(None)` when deleted or not a remote lane.
pub(crate) fn unpublish(
    ctx: &Ctx<'_>,
    run: &str,
    lane: &str,
    branch: &str,
) -> Result<Option<String>, String> {
    // A run with no remote runner publishes nothing: no git asked at every retire.
    if !ctx.settings.has_remote_runner() {
        return Ok(None);
    }
    let root = ctx.repo.root.as_path();
    let Some(seen) = seen(root, run, lane) else {
        return Ok(None);
    };
    let left = match remote_tip(ctx, branch)? {
        None => None,
        Some(tip) if tip == seen => {
            crate::git::run(
                root,
                &[
                    "push",
                    "--quiet",
                    &format!("--force-with-lease=refs/heads/{branch}:{seen}"),
                    "--",
                    remote(ctx)?,
                    &format!(":refs/heads/{branch}"),
                ],
            )
            .map_err(|e| format!("the remote's `{branch}` could not be deleted: {e}"))?;
            // Deleted, the loop's record still there: a replay finds no branch and drops it.
            crate::failpoint::hit("retire-after-unpublish");
            None
        }
        Some(tip) => Some(format!(
            "the remote's `{branch}` is at {}, where the loop did not put it: it is left there",
            short(&tip)
        )),
    };
    crate::git::run(root, &["update-ref", "-d", &seen_ref(run, lane)])?;
    Ok(left)
}

/// The receipt's first part for a remote lane (SPEC 20.19): fetch what the agent pushed, take its
/// report commit's report into the attempt's report path, fast-forward the loop's worktree of the
/// lane to the judged head, and publish that head back. The gaps it found; none when the worktree
/// now holds the pushed work and the report came as it should.
pub(crate) fn take_pushed(ctx: &Ctx<'_>, run: &Run, lane: &Lane) -> Result<Vec<String>, String> {
    let mut gaps = Vec::new();
    if let Err(gap) = fetch_into_worktree(ctx, run, lane, &mut gaps) {
        // A remote that cannot be reached says nothing of the agent's work: not a gap (which would
        // start a new attempt over work that may well be there), but a receipt to check again.
        let branch = lane.branch.clone().unwrap_or_default();
        remote_tip(ctx, &branch).map_err(unreachable)?;
        gaps.push(gap);
    }
    Ok(gaps)
}

fn fetch_into_worktree(
    ctx: &Ctx<'_>,
    run: &Run,
    lane: &Lane,
    gaps: &mut Vec<String>,
) -> Result<(), String> {
    let root = ctx.repo.root.as_path();
    let branch = lane.branch.clone().unwrap_or_default();
    let worktree = std::path::PathBuf::from(lane.worktree.clone().unwrap_or_default());
    let seen = seen_ref(&run.id, &lane.id);
    crate::git::run(
        root,
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            "--",
            remote(ctx)?,
            &format!("+refs/heads/{branch}:{seen}"),
        ],
    )
    .map_err(|e| format!("the lane branch `{branch}` could not be fetched from the remote: {e}"))?;
    let tip = crate::git::run(
        root,
        &["rev-parse", "--verify", &format!("{seen}^{{commit}}")],
    )?;
    // A last commit that is not a report commit as it should be is judged whole: its report's
    // path is then in the range, where the guard refuses it.
    let judged = match report_commit(root, &tip) {
        Ok(Some(report)) => {
            let receipt = ctx.receipt_path(run, &lane.id, lane.attempt);
            crate::run::state::ensure_dir(receipt.parent().expect("a report's folder"), ctx.verb)
                .map_err(|r| r.reason)?;
            crate::store::write_atomic(&receipt, &report, 0o600)
                .map_err(|e| format!("the pushed report could not be kept: {e}"))?;
            crate::git::run(root, &["rev-parse", "--verify", &format!("{tip}^1")])?
        }
        Ok(None) => tip.clone(),
        Err(gap) => {
            gaps.push(gap);
            tip.clone()
        }
    };
    let head = crate::git::run(&worktree, &["rev-parse", "--verify", "HEAD^{commit}"])?;
    if head != judged {
        let descends = crate::git::command(root)
            .args(["merge-base", "--is-ancestor", &head, &judged])
            .status()
            .is_ok_and(|s| s.success());
        if !descends {
            return Err(format!(
                "the pushed branch `{branch}` ({}) does not descend from the lane's head {}",
                short(&judged),
                short(&head)
            ));
        }
        crate::git::run(&worktree, &["merge", "--ff-only", "--quiet", &judged])?;
    }
    crate::failpoint::hit("receipt-after-fetch");
    if tip != judged {
        publish(ctx, &run.id, &lane.id, &branch, &judged).map_err(|u| u.why)?;
    }
    Ok(())
}

/// The report a last commit carries, when it is a report commit: one parent, the report's path
/// added or changed, nothing else. A last commit that changes the report's path and more is a gap.
fn report_commit(root: &Path, tip: &str) -> Result<Option<Vec<u8>>, String> {
    let changed = crate::git::run(
        root,
        &[
            "diff-tree",
            "--no-commit-id",
            "--name-only",
            "--no-renames",
            "-r",
            "-m",
            "--first-parent",
            tip,
        ],
    )?;
    let paths: Vec<&str> = changed.lines().filter(|l| !l.is_empty()).collect();
    if !paths.contains(&REPORT_PATH) {
        return Ok(None);
    }
    let parents = crate::git::run(root, &["rev-list", "--parents", "-n", "1", tip])?;
    if paths.len() != 1 || parents.split_whitespace().count() != 2 {
        return Err(format!(
            "the report commit {} changes more than {REPORT_PATH}: a report commit has one parent and changes that path alone",
            short(tip)
        ));
    }
    match crate::git::blob_at(root, tip, REPORT_PATH, crate::run::report::REPORT_LIMIT)? {
        Some(bytes) => Ok(Some(bytes)),
        None => Err(format!(
            "the report commit {} holds no readable {REPORT_PATH}",
            short(tip)
        )),
    }
}

/// The placeholders a remote agent gets besides section 20.1's (SPEC 20.19).
pub(crate) fn values(
    ctx: &Ctx<'_>,
    run: &Run,
    lane: &Lane,
    head: &str,
) -> Vec<(&'static str, String)> {
    vec![
        ("remote_url", remote_url(ctx)),
        ("branch", lane.branch.clone().unwrap_or_default()),
        ("base", run.base_of(lane).to_owned()),
        ("head", head.to_owned()),
    ]
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}
