//! A confined writer's git of its own (SPEC 24.12): an implementer, a test writer or a memory
//! agent commits into `<activity>/git/`, a repository that is all its own (its `HEAD`, refs,
//! index, config and new objects) and reaches the repository's objects read-only, through
//! alternates. It writes nothing git keeps for the checkout: not the object store, not a ref, not
//! the worktree's own git folder. When it has ended, the loop takes its branch back: git copies
//! what the agent committed into the repository (computing every object's id from its content),
//! the lane branch moves from where it was to the agent's head, and the worktree gets the agent's
//! index.

use crate::store;
use std::path::{Path, PathBuf};

/// The git of its own of the agent whose activity folder is `activity`.
pub(crate) fn dir(activity: &Path) -> PathBuf {
    activity.join("git")
}

/// The config the loop writes into an agent's git, at its making and again before it reads from
/// it (the agent can write that file; git reads it when the loop fetches): the repository's own
/// config, included (the person's identity, signing and filters for the repository hold for the
/// agent's commits as they did in a worktree), and what makes it a repository of its own. An
/// object format other than SHA-1 (a 64-digit `commit`) is declared, as git requires.
fn config(common: &Path, commit: &str) -> String {
    let format = if commit.len() == 64 {
        "\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n"
    } else {
        "\trepositoryformatversion = 0\n"
    };
    format!(
        "[include]\n\tpath = {}\n[core]\n\tbare = false\n{format}",
        common.join("config").display()
    )
}

/// The `objects/info/alternates` of an agent's git: the repository's object store, read-only.
fn alternates(common: &Path) -> String {
    format!("{}\n", common.join("objects").display())
}

/// Make the git of its own of the writer of `activity`, working in `worktree`, whose git folder is
/// `admin`, in the repository whose git folder is `common`: `HEAD` and the branch as the worktree
/// has them now, its index, and the repository's objects through alternates. Made beside and
/// renamed into place, so a call killed halfway leaves no half-made git. One an earlier launch of
/// this activity made is kept as it is: its agent's commits are in it.
pub fn prepare(
    common: &Path,
    admin: &Path,
    worktree: &Path,
    activity: &Path,
) -> Result<PathBuf, String> {
    let git = dir(activity);
    match std::fs::symlink_metadata(&git) {
        Ok(m) if m.is_dir() => return Ok(git),
        Ok(_) => return Err(format!("`{}` is not a folder", git.display())),
        Err(_) => {}
    }
    let head = read_small(&admin.join("HEAD"))?;
    // The worktree's commit, read as files where they say it plainly (no git started for a
    // writer's start), else asked of git.
    let named = match head.trim().strip_prefix("ref: ") {
        Some(reference) => read_ref(common, reference),
        None => object_id(&head),
    };
    let commit = match named {
        Some(commit) => commit,
        None => crate::git::run(worktree, &["rev-parse", "--verify", "HEAD^{commit}"])?,
    };
    let new = activity.join("git.new");
    if std::fs::symlink_metadata(&new).is_ok() {
        std::fs::remove_dir_all(&new).map_err(|e| format!("remove `{}`: {e}", new.display()))?;
    }
    let mk = |rel: &str| {
        use std::os::unix::fs::DirBuilderExt;
        let p = new.join(rel);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&p)
            .map_err(|e| format!("create `{}`: {e}", p.display()))
    };
    // Files of a folder nobody else sees until it is renamed into place: written once, not
    // each synced (git does not sync what it writes there either); a git a power cut left torn
    // fails its agent's commit, and the check after it names the gap.
    let put = |rel: &str, bytes: &[u8]| {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let p = new.join(rel);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&p)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| format!("write `{}`: {e}", p.display()))
    };
    for folder in ["objects/info", "objects/pack", "refs/heads", "refs/tags"] {
        mk(folder)?;
    }
    put("objects/info/alternates", alternates(common).as_bytes())?;
    put("config", config(common, &commit).as_bytes())?;
    match head.trim().strip_prefix("ref: ") {
        Some(reference) if plain_branch(reference) => {
            if let Some((folder, _)) = reference.rsplit_once('/') {
                mk(folder)?;
            }
            put(reference, format!("{commit}\n").as_bytes())?;
            put("HEAD", format!("ref: {reference}\n").as_bytes())?;
        }
        _ => put("HEAD", format!("{commit}\n").as_bytes())?,
    }
    let index = admin.join("index");
    if std::fs::symlink_metadata(&index).is_ok_and(|m| m.is_file()) {
        std::fs::copy(&index, new.join("index"))
            .map_err(|e| format!("copy `{}`: {e}", index.display()))?;
    }
    // Not synced either: a git lost to a power cut is made again at the next launch, as the
    // commits git itself wrote into it unsynced would be lost with it.
    std::fs::rename(&new, &git).map_err(|e| format!("rename `{}`: {e}", new.display()))?;
    Ok(git)
}

/// What taking an agent's branch back found.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Taken {
    /// The lane branch moved: from, to.
    pub moved: Option<(String, String)>,
    /// What the receipt counts as missing (the agent's git left off the lane branch, say).
    pub gaps: Vec<String>,
}

/// Take back the branch `branch` the agent of `activity` committed to in its own git, into the
/// repository at `root` and the worktree whose git folder is `admin`. Nothing when the agent had
/// no git of its own. Re-entrant: the copy and the move are skipped when the branch is already
/// the agent's head, and the index is given again.
pub(crate) fn take_back(
    (root, common): (&Path, &Path),
    branch: &str,
    admin: &Path,
    activity: &Path,
) -> Result<Taken, String> {
    let git = dir(activity);
    match std::fs::symlink_metadata(&git) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("`{}` is not a folder", git.display())),
        Err(_) => return Ok(Taken::default()),
    }
    let mut taken = Taken::default();
    let reference = format!("refs/heads/{branch}");
    let head = read_small(&git.join("HEAD")).unwrap_or_default();
    if head.trim() != format!("ref: {reference}") {
        taken.gaps.push(format!(
            "the agent's git is on `{}`, not on the lane branch `{branch}`: nothing it committed there was taken",
            head.trim().trim_start_matches("ref: refs/heads/")
        ));
        return Ok(taken);
    }
    let Some(theirs) = read_ref(&git, &reference) else {
        taken.gaps.push(format!(
            "the agent's git has no lane branch `{branch}`: nothing it committed there was taken"
        ));
        return Ok(taken);
    };
    let ours = match read_ref(common, &reference) {
        Some(ours) => ours,
        None => crate::git::run(root, &["rev-parse", "--verify", &reference])?,
    };
    if ours != theirs {
        // The agent has ended: its git's config and alternates are the loop's again before git
        // reads them.
        store::write_atomic(
            &git.join("config"),
            config(common, &theirs).as_bytes(),
            0o600,
        )
        .map_err(|e| e.to_string())?;
        store::write_atomic(
            &git.join("objects/info/alternates"),
            alternates(common).as_bytes(),
            0o600,
        )
        .map_err(|e| e.to_string())?;
        copy_objects(root, &git, (&ours, &theirs))?;
        crate::failpoint::hit("take-back-after-copy");
        crate::git::run(
            root,
            &[
                "update-ref",
                "-m",
                "iced: the agent's commits, from its own git",
                &reference,
                &theirs,
                &ours,
            ],
        )?;
        crate::failpoint::hit("take-back-after-ref");
        taken.moved = Some((ours, theirs));
    }
    let index = git.join("index");
    if std::fs::symlink_metadata(&index).is_ok_and(|m| m.is_file()) {
        let copy = admin.join("index.iced-new");
        std::fs::copy(&index, &copy).map_err(|e| format!("copy `{}`: {e}", index.display()))?;
        std::fs::rename(&copy, admin.join("index"))
            .map_err(|e| format!("rename `{}`: {e}", copy.display()))?;
    }
    Ok(taken)
}

/// Copy into the repository at `root` what `theirs` holds that `ours` does not, from the agent's
/// `git`: packed there (`pack-objects`, which fails on an object the history needs and the git
/// does not have) and unpacked here (`unpack-objects`, which computes every object's id from its
/// content: nothing is taken by the name the agent gave it). Two gits, the objects in a pipe.
fn copy_objects(root: &Path, git: &Path, (ours, theirs): (&str, &str)) -> Result<(), String> {
    use std::io::Write;
    use std::process::Stdio;
    let mut pack = crate::git::command(root);
    pack.env("GIT_DIR", git)
        .args(["pack-objects", "--revs", "--stdout", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut packing = pack.spawn().map_err(|e| format!("git pack-objects: {e}"))?;
    let mut unpack = crate::git::command(root);
    unpack
        .args(["unpack-objects", "-q"])
        .stdin(packing.stdout.take().expect("piped"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let unpacking = unpack.spawn();
    let wants = format!("{theirs}\n^{ours}\n");
    let fed = packing
        .stdin
        .take()
        .expect("piped")
        .write_all(wants.as_bytes());
    let packed = packing.wait_with_output();
    let unpacked = unpacking
        .map_err(|e| format!("git unpack-objects: {e}"))?
        .wait_with_output()
        .map_err(|e| format!("git unpack-objects: {e}"))?;
    let packed = packed.map_err(|e| format!("git pack-objects: {e}"))?;
    fed.map_err(|e| format!("git pack-objects: {e}"))?;
    let said = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).trim().to_owned();
    if !packed.status.success() {
        return Err(format!(
            "git pack-objects in the agent's git: {}",
            said(&packed)
        ));
    }
    if !unpacked.status.success() {
        return Err(format!("git unpack-objects: {}", said(&unpacked)));
    }
    Ok(())
}

/// [`take_back`] for a check of what the agent did: what it found missing, with a failure to take
/// the branch back as one more gap (the check runs again on the next attempt's git).
pub(crate) fn gaps_taking_back(
    ctx: &crate::run::ctx::Ctx<'_>,
    branch: &str,
    admin: &Path,
    activity: &Path,
) -> Vec<String> {
    let root = &ctx.repo.root;
    let common = ctx
        .claims()
        .common_dir()
        .map_or_else(|| root.join(".git"), Path::to_owned);
    match take_back((root, &common), branch, admin, activity) {
        Ok(taken) => taken.gaps,
        Err(e) => vec![format!(
            "what the agent committed could not be taken from its own git: {e}"
        )],
    }
}

/// A `refs/heads/...` name of plain parts: no `.` or `..` part, no empty one.
fn plain_branch(reference: &str) -> bool {
    reference.strip_prefix("refs/heads/").is_some_and(|b| {
        b.split('/')
            .all(|part| !matches!(part, "" | "." | "..") && !part.contains('\\'))
    })
}

/// The commit `reference` names in `git`, loose or packed, read as files (no git runs in what
/// the agent wrote): None when it is not there or not an object id.
fn read_ref(git: &Path, reference: &str) -> Option<String> {
    if !plain_branch(reference) {
        return None;
    }
    if let Ok(text) = read_small(&git.join(reference)) {
        return object_id(&text);
    }
    let packed = store::read_no_follow(&git.join("packed-refs"), 16 << 20).ok()?;
    String::from_utf8_lossy(&packed).lines().find_map(|line| {
        let (oid, name) = line.split_once(' ')?;
        (name == reference).then(|| object_id(oid)).flatten()
    })
}

/// `text` as an object id (40 or 64 hex digits), when it is one.
fn object_id(text: &str) -> Option<String> {
    let s = text.trim();
    (matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| s.to_ascii_lowercase())
}

fn read_small(path: &Path) -> Result<String, String> {
    store::read_no_follow(path, 4096)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> String {
        let mut cmd = Command::new("git");
        cmd.current_dir(dir).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// A repository with one commit and a linked worktree on `iced/u/l`: (root, worktree, admin).
    fn lane(tmp: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let root = tmp.join("repo");
        std::fs::create_dir_all(&root).unwrap();
        git(&root, &["init", "-q", "-b", "main"], &[]);
        git(&root, &["config", "user.name", "t"], &[]);
        git(&root, &["config", "user.email", "t@example.test"], &[]);
        std::fs::write(root.join("a"), "a\n").unwrap();
        git(&root, &["add", "a"], &[]);
        git(&root, &["commit", "-q", "-m", "one"], &[]);
        let worktree = tmp.join("wt");
        let shown = worktree.display().to_string();
        git(
            &root,
            &["worktree", "add", "-q", "-b", "iced/u/l", &shown],
            &[],
        );
        let admin = root.join(".git/worktrees/wt");
        (root, worktree, admin)
    }

    /// An agent's commits in its git of its own come into the repository, and the worktree's
    /// status is what it left; taking back again changes nothing.
    #[test]
    fn the_agents_commits_are_taken_back_once() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, worktree, admin) = lane(tmp.path());
        let activity = tmp.path().join("activity");
        std::fs::create_dir_all(&activity).unwrap();
        let common = root.join(".git");
        let own = prepare(&common, &admin, &worktree, &activity).unwrap();
        let base = git(&root, &["rev-parse", "iced/u/l"], &[]);
        let env = [
            ("GIT_DIR", own.as_path()),
            ("GIT_WORK_TREE", worktree.as_path()),
        ];
        std::fs::write(worktree.join("b"), "b\n").unwrap();
        git(&worktree, &["add", "b"], &env);
        git(&worktree, &["commit", "-q", "-m", "two"], &env);
        let theirs = git(&worktree, &["rev-parse", "HEAD"], &env);
        // Nothing of it is in the repository yet: its objects are the agent's.
        assert_eq!(git(&root, &["rev-parse", "iced/u/l"], &[]), base);
        assert!(
            Command::new("git")
                .current_dir(&root)
                .args(["cat-file", "-e", &theirs])
                .status()
                .unwrap()
                .code()
                != Some(0)
        );

        let taken = take_back((&root, &root.join(".git")), "iced/u/l", &admin, &activity).unwrap();
        assert_eq!(taken.moved, Some((base.clone(), theirs.clone())));
        assert!(taken.gaps.is_empty());
        assert_eq!(git(&root, &["rev-parse", "iced/u/l"], &[]), theirs);
        assert_eq!(git(&worktree, &["status", "--porcelain"], &[]), "");
        let again = take_back((&root, &root.join(".git")), "iced/u/l", &admin, &activity).unwrap();
        assert_eq!(again, Taken::default());
        // A later launch of the same activity keeps the git and what is in it.
        assert_eq!(prepare(&common, &admin, &worktree, &activity).unwrap(), own);
        assert_eq!(git(&worktree, &["rev-parse", "HEAD"], &env), theirs);
    }

    /// An agent's git left on another branch is a gap, and nothing is taken.
    #[test]
    fn a_git_off_the_lane_branch_is_a_gap() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, worktree, admin) = lane(tmp.path());
        let activity = tmp.path().join("activity");
        std::fs::create_dir_all(&activity).unwrap();
        let own = prepare(&root.join(".git"), &admin, &worktree, &activity).unwrap();
        let env = [
            ("GIT_DIR", own.as_path()),
            ("GIT_WORK_TREE", worktree.as_path()),
        ];
        git(&worktree, &["checkout", "-q", "-b", "main"], &env);
        git(
            &worktree,
            &["commit", "-q", "--allow-empty", "-m", "mine"],
            &env,
        );
        let main = git(&root, &["rev-parse", "main"], &[]);
        let taken = take_back((&root, &root.join(".git")), "iced/u/l", &admin, &activity).unwrap();
        assert_eq!(taken.moved, None);
        assert!(taken.gaps[0].contains("is on `main`"), "{:?}", taken.gaps);
        assert_eq!(git(&root, &["rev-parse", "main"], &[]), main);
    }

    #[test]
    fn only_a_plain_branch_is_copied() {
        assert!(plain_branch("refs/heads/iced/p/a"));
        assert!(plain_branch("refs/heads/main"));
        for bad in [
            "refs/heads/./main",
            "refs/heads/a/../main",
            "refs/tags/x",
            "HEAD",
        ] {
            assert!(!plain_branch(bad), "{bad}");
        }
    }
}
