//! Landing, at the git level: bring the target into the lane, make the landed commit by the
//! repository's strategy, move the target (through the person's checkout when it is checked out
//! there, so their files follow), push, run the forge's commands, and retire a landed lane.
//! Every function is idempotent or says what it found: the stepper records each outcome.

use crate::run::settings::Strategy;
use std::path::{Path, PathBuf};

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    crate::git::run(dir, args)
}

/// Is `a` an ancestor of (or equal to) `b`?
pub fn is_ancestor(dir: &Path, a: &str, b: &str) -> bool {
    crate::git::command(dir)
        .args(["merge-base", "--is-ancestor", a, b])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn rev(dir: &Path, reference: &str) -> Result<String, String> {
    git(
        dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{reference}^{{commit}}"),
        ],
    )
}

/// What bringing the target into the lane did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrated {
    /// The lane already contains the target.
    AlreadyIn,
    /// The target was merged into the lane: the definition of done must run again.
    Merged { head: String },
    /// The merge conflicts in these files; it was aborted.
    Conflict { files: Vec<String> },
}

/// Merge `target_commit` into the lane branch checked out in `worktree`, unless it is in already.
/// `merge` is git's `-c` options for the merge: the identity, and the attributes file that makes
/// iced's append-only files merge by union (SPEC 23.1).
pub fn integrate(
    worktree: &Path,
    target_commit: &str,
    merge: &[String],
) -> Result<Integrated, String> {
    if is_ancestor(worktree, target_commit, "HEAD") {
        return Ok(Integrated::AlreadyIn);
    }
    let mut args: Vec<&str> = merge.iter().map(String::as_str).collect();
    args.extend([
        "merge",
        "--no-ff",
        "--no-edit",
        "-m",
        "iced: bring the target into the lane",
        target_commit,
    ]);
    let mut merged = git(worktree, &args);
    if merged.is_err() && conflicted(worktree).is_empty() {
        // Not a conflict: a merge a killed call left half done (its files written, no commit)
        // stops the next one. HEAD is still the lane's head, which holds everything the lane
        // delivered; what differs from it is put aside in a stash, never thrown away (it may be
        // a person's), and the merge is made once more (SPEC 23.2).
        let mut stash: Vec<&str> = merge.iter().map(String::as_str).collect();
        stash.extend([
            "stash",
            "push",
            "--include-untracked",
            "--quiet",
            "-m",
            "iced: left in the lane's worktree by an interrupted merge",
        ]);
        if git(worktree, &stash).is_ok() {
            // Stashed, not merged: the next call finds a clean worktree and merges at once; the
            // stash stays (SPEC 23.2).
            crate::failpoint::hit("land-after-stash");
            merged = git(worktree, &args);
        }
    }
    match merged {
        Ok(_) => Ok(Integrated::Merged {
            head: git(worktree, &["rev-parse", "HEAD"])?,
        }),
        Err(e) => {
            let files = conflicted(worktree);
            let _ = git(worktree, &["merge", "--abort"]);
            if files.is_empty() {
                Err(e)
            } else {
                Ok(Integrated::Conflict { files })
            }
        }
    }
}

/// The files a merge left conflicted in `worktree`.
fn conflicted(worktree: &Path) -> Vec<String> {
    git(worktree, &["diff", "--name-only", "--diff-filter=U"])
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Make the commit the target moves to, by strategy, from a lane head that contains the target.
pub fn landed_commit(
    dir: &Path,
    strategy: Strategy,
    lane_head: &str,
    target_commit: &str,
    message: &str,
    identity: &[String],
) -> Result<String, String> {
    match strategy {
        Strategy::Ff => Ok(lane_head.to_owned()),
        Strategy::Merge | Strategy::Squash => {
            if lane_head == target_commit {
                return Ok(lane_head.to_owned());
            }
            let tree = git(dir, &["rev-parse", &format!("{lane_head}^{{tree}}")])?;
            let mut args: Vec<&str> = identity.iter().map(String::as_str).collect();
            args.extend(["commit-tree", &tree, "-p", target_commit]);
            if strategy == Strategy::Merge {
                args.extend(["-p", lane_head]);
            }
            args.extend(["-m", message]);
            git(dir, &args)
        }
    }
}

/// Write the loop's attributes file (`.iced/run/attributes`, SPEC 23.1) if it is not as it should
/// be, and return the `-c` options that make a git merge read it.
pub fn union_attributes(run_dir: &Path) -> Result<Vec<String>, String> {
    let path = run_dir.join("attributes");
    let want = format!("{}\n", crate::init::UNION_ATTRIBUTES.join("\n"));
    let have = crate::store::read_no_follow(&path, 4096).ok();
    if have.as_deref() != Some(want.as_bytes()) {
        crate::store::create_dir_all(run_dir).map_err(|e| e.to_string())?;
        crate::store::write_atomic(&path, want.as_bytes(), 0o600).map_err(|e| e.to_string())?;
        // Written, the merge not made: a replay finds the file as it should be.
        crate::failpoint::hit("land-after-attributes");
    }
    let absolute = std::path::absolute(&path).map_err(|e| e.to_string())?;
    Ok(vec![
        "-c".to_owned(),
        format!("core.attributesFile={}", absolute.display()),
    ])
}

/// The worktree that has `branch` checked out, if any.
pub fn checked_out_at(root: &Path, branch: &str) -> Option<PathBuf> {
    crate::git::worktree_of_branch(root, branch)
}

/// A file the loop itself left uncommitted in the person's checkout, with the bytes it wrote there:
/// the lane's unit and its decision log as a person's escalation verbs left them (SPEC 20.7, 23.2).
pub struct Ours<'a> {
    pub path: &'a str,
    pub text: &'a [u8],
}

/// Move `target` from `old` to `new`: through its checkout with a fast-forward merge when it is
/// checked out (the files follow, and git refuses rather than overwrite uncommitted work; the
/// loop's own uncommitted file is restored first, `restore_ours`), else by a compare-and-swap of
/// the ref. Already at `new` is success.
pub fn move_target(
    root: &Path,
    target: &str,
    old: &str,
    new: &str,
    ours: &[Ours<'_>],
) -> Result<(), String> {
    let current = rev(root, &format!("refs/heads/{target}"))?;
    if current == new {
        return Ok(());
    }
    if current != old {
        return Err(format!(
            "`{target}` moved to {current} while landing; landing starts again"
        ));
    }
    match checked_out_at(root, target) {
        Some(checkout) => ours
            .iter()
            .try_for_each(|o| {
                if restore_ours(&checkout, new, o)? {
                    // Restored, the target not moved: a replay finds the file as `HEAD` has it
                    // and merges.
                    crate::failpoint::hit("land-after-restore");
                }
                Ok(())
            })
            .and_then(|()| fast_forward(&checkout, new))
            .map_err(|e| {
                format!(
                    "`{target}` is checked out at `{}` and could not be fast-forwarded there: {e}",
                    checkout.display()
                )
            }),
        None => git(
            root,
            &["update-ref", &format!("refs/heads/{target}"), new, old],
        )
        .map(|_| ()),
    }
}

/// SPEC 23.2: the loop's own uncommitted change to the checkout is put back to `HEAD` before the
/// fast-forward, which brings the same text (closed): only when the file holds exactly the bytes the
/// loop wrote, its index entry is `HEAD`'s or those bytes, and the landing changes the file. Any
/// other state is left for git to refuse, naming the file, so a person's edit is never discarded.
/// After a pull request landed, the same restore leaves the checkout for `git pull` (SPEC 23.3).
/// Whether it restored the file.
pub fn restore_ours(checkout: &Path, new: &str, ours: &Ours<'_>) -> Result<bool, String> {
    let file = checkout.join(ours.path);
    let regular = std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_file());
    if !regular || std::fs::read(&file).ok().as_deref() != Some(ours.text) {
        return Ok(false);
    }
    let blob = |spec: String| git(checkout, &["rev-parse", "--verify", "--quiet", &spec]).ok();
    let (Some(head), landed) = (
        blob(format!("HEAD:{}", ours.path)),
        blob(format!("{new}:{}", ours.path)),
    ) else {
        return Ok(false);
    };
    let index = blob(format!(":0:{}", ours.path));
    let work = git(checkout, &["hash-object", "--", ours.path]).ok();
    let unchanged = work.as_deref() == Some(head.as_str());
    let staged_other = index.as_deref() != Some(head.as_str()) && index != work;
    if unchanged || staged_other || landed.as_deref() == Some(head.as_str()) {
        return Ok(false);
    }
    git(checkout, &["checkout", "--quiet", "HEAD", "--", ours.path])?;
    Ok(true)
}

/// `git merge --ff-only <new>` in a checkout. When git refuses because the checkout's own changes
/// would be overwritten, the error names those files (git lists them on lines of their own).
fn fast_forward(checkout: &Path, new: &str) -> Result<(), String> {
    let out = crate::git::command(checkout)
        .args(["merge", "--ff-only", "--quiet", new])
        .output()
        .map_err(|e| format!("git could not start: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let files: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with('\t'))
        .map(str::trim)
        .collect();
    if files.is_empty() {
        Err(err
            .trim()
            .lines()
            .last()
            .unwrap_or("git refused")
            .to_owned())
    } else {
        Err(format!(
            "its uncommitted changes to {} would be overwritten; commit or stash them, then `iced run resume`",
            files.join(", ")
        ))
    }
}

/// The lane's changes are in the target by content, though not by ancestry: every file the lane
/// changed (since it parted from the target) is the same at the target. That is how a squash
/// merge, by the forge or by a person, shows.
pub fn content_landed(root: &Path, head: &str, target: &str) -> bool {
    let Ok(base) = git(root, &["merge-base", head, target]) else {
        return false;
    };
    let Ok(files) = git(root, &["diff", "--name-only", &base, head]) else {
        return false;
    };
    let files: Vec<&str> = files.lines().filter(|f| !f.is_empty()).collect();
    if files.is_empty() {
        return false;
    }
    let mut args = vec!["diff", "--quiet", head, target, "--"];
    args.extend(files);
    crate::git::command(root)
        .args(&args)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// After the landed commit was pushed: bring the local `target` along when that is a
/// fast-forward (through its checkout, so the person's files follow). The landing happened at the
/// remote, so a local target with commits of its own, or a checkout that refuses, is left where it
/// is and said (`Err`), not a failure of the landing.
pub fn follow(root: &Path, target: &str, new: &str, ours: &[Ours<'_>]) -> Result<(), String> {
    let current = rev(root, &format!("refs/heads/{target}"))
        .map_err(|_| format!("there is no local `{target}` to bring along"))?;
    if current == new {
        return Ok(());
    }
    if !is_ancestor(root, &current, new) {
        return Err(format!(
            "the local `{target}` has commits the remote's has not; it is left as it is"
        ));
    }
    move_target(root, target, &current, new, ours)
}

/// Push `commit` to `<remote> <branch>` (never forced). A rejection is `Ok(false)`.
pub fn push(root: &Path, remote: &str, commit: &str, branch: &str) -> Result<bool, String> {
    let out = crate::git::command(root)
        .args([
            "push",
            "--quiet",
            "--",
            remote,
            &format!("{commit}:refs/heads/{branch}"),
        ])
        .output()
        .map_err(|e| format!("git push could not start: {e}"))?;
    if out.status.success() {
        return Ok(true);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("rejected") || err.contains("non-fast-forward") || err.contains("fetch first") {
        Ok(false)
    } else {
        Err(format!(
            "git push {remote} failed: {}",
            crate::git::what_failed(&out.stderr)
        ))
    }
}

/// `<remote>/<branch>` as the remote has it now (fetched).
pub fn remote_head(root: &Path, remote: &str, branch: &str) -> Result<Option<String>, String> {
    let out = git(
        root,
        &[
            "ls-remote",
            "--heads",
            "--",
            remote,
            &format!("refs/heads/{branch}"),
        ],
    )?;
    Ok(out.split_whitespace().next().map(str::to_owned))
}

/// `<remote>/<branch>` as the remote has it now, its commit fetched. `FETCH_HEAD` is not written
/// nor read: two calls fetching at once (two drivers, or one `build`'s threads, SPEC 20.1) would
/// otherwise read each other's, or none while git rewrites it. The remote-tracking branch follows
/// as a fetch makes it; a fetch that fails (another holding its lock) or a branch moved between
/// the listing and the fetch is tried again, a few times.
pub fn fetch(root: &Path, remote: &str, branch: &str) -> Result<String, String> {
    let reference = format!("refs/heads/{branch}");
    let have = |sha: &str| git(root, &["cat-file", "-e", &format!("{sha}^{{commit}}")]).is_ok();
    let mut failed = None;
    for _ in 0..5 {
        let sha = remote_head(root, remote, branch)?
            .ok_or_else(|| format!("the remote `{remote}` has no branch `{branch}`"))?;
        // Fetched even when the commit is here: the remote-tracking branch follows.
        let fetched = git(
            root,
            &[
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--",
                remote,
                &reference,
            ],
        );
        if have(&sha) {
            return Ok(sha);
        }
        failed = fetched.err();
    }
    Err(failed.unwrap_or_else(|| {
        format!("`{branch}` on the remote `{remote}` moved every time this call fetched it")
    }))
}

/// Run a forge command (argv, never a shell) in `dir` and return its stdout.
pub fn forge(dir: &Path, argv: &[String]) -> Result<String, String> {
    let Some((program, args)) = argv.split_first() else {
        return Err("the forge command is empty".into());
    };
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("`{program}` could not start: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "`{program}` exited {}: {}",
            out.status
                .code()
                .map_or("by a signal".into(), |c| c.to_string()),
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .lines()
                .last()
                .unwrap_or("")
        ))
    }
}

/// The pull request URL an open command printed (its last line that looks like a URL), and the
/// number at its end.
pub fn pr_from_output(stdout: &str) -> Option<(String, Option<u64>)> {
    let url = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| {
            l.starts_with("http://") || l.starts_with("https://") || l.starts_with("file://")
        })?
        .to_owned();
    let digits: String = url
        .trim_end_matches('/')
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Some((url, digits.parse().ok()))
}

/// What retiring a lane did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retired {
    Removed,
    /// The worktree has uncommitted or untracked changes: kept, and said.
    DirtyKept(PathBuf),
    /// The lane's head is not in the target yet.
    NotLanded,
}

/// Remove a landed lane's worktree and branch. The person's branch need not be fast-forwarded:
/// landing is judged against the target (or the remote target), not against HEAD. `landed` is
/// the commit the loop moved the target to and the lane head it was made from, when the loop
/// landed it: a squash is not a descendant of the lane's head, and such a lane has landed once
/// that commit is in the target and the branch holds nothing after it. `common` is the
/// repository's common git folder, whose worktree lock the removal holds (SPEC 21.3).
pub fn retire(
    (root, common): (&Path, Option<&Path>),
    worktree: Option<&Path>,
    branch: &str,
    landed_in: &str,
    landed: Option<(&str, &str)>,
) -> Result<Retired, String> {
    let head = rev(root, &format!("refs/heads/{branch}")).ok();
    let in_target = |commit: &str| is_ancestor(root, commit, landed_in);
    let is_landed = match (landed, &head) {
        (Some((commit, from)), Some(h)) => in_target(commit) && (h == from || in_target(h)),
        (Some((commit, _)), None) => in_target(commit),
        (None, Some(h)) => in_target(h) || content_landed(root, h, landed_in),
        (None, None) => true,
    };
    if !is_landed {
        return Ok(Retired::NotLanded);
    }
    let held = crate::git::worktrees::lock(common, root)?;
    if let Some(w) = worktree.filter(|w| w.exists()) {
        if !crate::git::is_clean(w, &[]).unwrap_or(false) {
            return Ok(Retired::DirtyKept(w.to_owned()));
        }
        let shown = w.display().to_string();
        held.git(&["worktree", "remove", &shown])?;
        // The loop's own `<repo>.iced-worktrees` folder goes with its last worktree (a folder the
        // person named in `build.worktreeDir` stays).
        if let Some(parent) = w
            .parent()
            .filter(|p| p.to_string_lossy().ends_with(".iced-worktrees"))
        {
            let _ = std::fs::remove_dir(parent);
        }
    } else if let Some(at) = crate::git::worktree_of_branch(root, branch).filter(|at| !at.exists())
    {
        // A worktree gone another way (a person's `rm`) leaves git's entry, which holds the
        // branch: that entry is removed by its path, never by `git worktree prune`, which drops
        // every entry whose folder is missing at that moment.
        let _ = held.git(&["worktree", "remove", "--force", &at.display().to_string()]);
    }
    drop(held);
    if head.is_some() {
        git(root, &["branch", "-D", branch])?;
    }
    Ok(Retired::Removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pr_url_and_number_come_from_the_output() {
        assert_eq!(
            pr_from_output("Creating pull request...\nhttps://forge.test/o/r/pull/42\n"),
            Some(("https://forge.test/o/r/pull/42".into(), Some(42)))
        );
        assert_eq!(pr_from_output("no url here"), None);
        assert_eq!(pr_from_output("https://x/pull/\n").map(|p| p.1), Some(None));
    }

    /// A merge a killed call left half done (the target's files written in the lane's worktree,
    /// no commit) does not stop the next: what it left is stashed, not lost, and the merge made.
    /// The target on the remote is fetched without `FETCH_HEAD` or a ref: eight fetches at once
    /// each get the remote's commit (with `git fetch` + `rev-parse FETCH_HEAD` some read an
    /// empty or another's `FETCH_HEAD`), and a missing branch is said.
    #[test]
    fn fetching_the_target_writes_no_fetch_head_and_calls_at_once_agree() {
        let dir = tempfile::tempdir().unwrap();
        let (remote, local) = (dir.path().join("remote.git"), dir.path().join("local"));
        let run = |at: &Path, args: &[&str]| git(at, args).unwrap();
        run(
            dir.path(),
            &["init", "-q", "--bare", "-b", "main", "remote.git"],
        );
        run(dir.path(), &["init", "-q", "-b", "main", "local"]);
        std::fs::write(local.join("a.txt"), "a\n").unwrap();
        run(&local, &["add", "."]);
        let id = ["-c", "user.name=t", "-c", "user.email=t@t.invalid"];
        run(&local, &[&id[..], &["commit", "-q", "-m", "a"]].concat());
        let url = remote.display().to_string();
        run(&local, &["push", "-q", &url, "main"]);
        // The remote moves on from elsewhere: the local repository lacks its commit.
        let other = dir.path().join("other");
        run(dir.path(), &["clone", "-q", &url, "other"]);
        std::fs::write(other.join("b.txt"), "b\n").unwrap();
        run(&other, &["add", "."]);
        run(&other, &[&id[..], &["commit", "-q", "-m", "b"]].concat());
        run(&other, &["push", "-q", "origin", "main"]);
        let head = run(&other, &["rev-parse", "HEAD"]);
        let fetched: Vec<Result<String, String>> = std::thread::scope(|s| {
            let calls: Vec<_> = (0..8)
                .map(|_| s.spawn(|| fetch(&local, &url, "main")))
                .collect();
            calls.into_iter().map(|c| c.join().unwrap()).collect()
        });
        for f in fetched {
            assert_eq!(f.as_deref(), Ok(head.as_str()));
        }
        assert!(!local.join(".git/FETCH_HEAD").exists());
        let missing = fetch(&local, &url, "nope").unwrap_err();
        assert!(missing.contains("has no branch `nope`"), "{missing}");
    }

    #[test]
    fn a_merge_left_half_done_is_stashed_and_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let run = |args: &[&str]| git(root, args).unwrap();
        let id = ["-c", "user.name=t", "-c", "user.email=t@t.invalid"];
        let commit = |msg: &str| {
            let mut a = id.to_vec();
            a.extend(["commit", "-q", "-m", msg]);
            run(&a)
        };
        run(&["init", "-q", "-b", "main"]);
        std::fs::write(root.join("a.txt"), "a\n").unwrap();
        run(&["add", "."]);
        commit("base");
        run(&["checkout", "-q", "-b", "lane"]);
        std::fs::write(root.join("lane.txt"), "lane\n").unwrap();
        run(&["add", "."]);
        commit("lane");
        run(&["checkout", "-q", "main"]);
        std::fs::write(root.join("a.txt"), "target\n").unwrap();
        std::fs::write(root.join("new.txt"), "new\n").unwrap();
        run(&["add", "."]);
        commit("target");
        let target = run(&["rev-parse", "HEAD"]);
        run(&["checkout", "-q", "lane"]);
        let lane_head = run(&["rev-parse", "HEAD"]);
        // What the killed merge wrote before it could commit.
        std::fs::write(root.join("a.txt"), "target\n").unwrap();
        std::fs::write(root.join("new.txt"), "new\n").unwrap();
        let identity: Vec<String> = id.iter().map(|s| s.to_string()).collect();
        match integrate(root, &target, &identity).unwrap() {
            Integrated::Merged { head } => {
                assert_eq!(run(&["rev-parse", "HEAD^1"]), lane_head);
                assert_eq!(run(&["rev-parse", "HEAD^2"]), target);
                assert_eq!(head, run(&["rev-parse", "HEAD"]));
            }
            other => panic!("not merged: {other:?}"),
        }
        assert!(run(&["status", "--porcelain"]).is_empty());
        assert!(
            run(&["stash", "list"]).contains("interrupted merge"),
            "what the merge left is kept in a stash"
        );
    }
}
