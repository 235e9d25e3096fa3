//! The few git questions the record asks (HEAD, the top level, who is signing off). Always argv,
//! never a shell, with the variables that would point git at some other repository removed, and
//! with every setting that makes git start a program a repository's configuration names switched
//! off (SPEC 24.13): an agent can write that configuration.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod no_programs;
pub mod tree;
pub mod worktrees;

/// Variables that redirect git away from the repository we were asked about.
const SCRUBBED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
];

/// Every git iced starts: in `dir`, its standard input empty, pointed at no other repository, and
/// starting no program a configuration file names ([`no_programs`]).
pub fn command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).stdin(Stdio::null());
    for var in SCRUBBED {
        cmd.env_remove(var);
    }
    no_programs::switch_off(&mut cmd);
    cmd
}

pub use no_programs::config_env;

/// Run git and return its trimmed stdout, or None when git is missing or the command fails.
fn output(dir: &Path, args: &[&str]) -> Option<String> {
    let out = command(dir)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The commit HEAD points at, or None outside git or before the first commit.
pub fn head(dir: &Path) -> Option<String> {
    output(dir, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
}

pub fn toplevel(dir: &Path) -> Option<PathBuf> {
    output(dir, &["rev-parse", "--show-toplevel"]).map(PathBuf::from)
}

/// Who a person is, for `approved_by` / `accepted_by`: git's user.name, else $USER, else "human".
pub fn person(dir: &Path) -> String {
    output(dir, &["config", "user.name"])
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.trim().is_empty()))
        .unwrap_or_else(|| "human".to_owned())
}

/// Run git; stdout (trimmed at the end) or the reason it failed (its stderr).
pub fn run(dir: &Path, args: &[&str]) -> Result<String, String> {
    finish(command(dir), args)
}

/// Run `cmd` with `args`; stdout (trimmed at the end) or the reason it failed (its stderr).
fn finish(mut cmd: Command, args: &[&str]) -> Result<String, String> {
    let out = cmd
        .args(args)
        .output()
        .map_err(|e| format!("git could not be started: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
    } else {
        Err(format!(
            "`git {}` failed: {}",
            args.join(" "),
            what_failed(&out.stderr)
        ))
    }
}

/// What git said went wrong: its first `fatal:` or `error:` line (which names what failed; the
/// advice after it does not), else its last line.
pub fn what_failed(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.trim().lines().map(str::trim).collect();
    lines
        .iter()
        .find(|l| l.starts_with("fatal:") || l.starts_with("error:"))
        .or(lines.last())
        .copied()
        .unwrap_or("no message")
        .to_owned()
}

/// The branch HEAD is on (`main`), or None when detached.
pub fn current_branch(dir: &Path) -> Option<String> {
    output(dir, &["symbolic-ref", "--quiet", "--short", "HEAD"])
}

/// What a lane's worktree `dir` stands on, through one git: the commit and tree of
/// `refs/heads/<branch>` (None when there is no such branch), and the branch HEAD is on (None
/// when detached; a ref outside `refs/heads/` by its full name).
pub fn branch_at(dir: &Path, branch: &str) -> (Option<(String, String)>, Option<String>) {
    let on = |name: &str| match name.strip_prefix("refs/heads/") {
        _ if name == "HEAD" || name.is_empty() => None,
        Some(short) => Some(short.to_owned()),
        None => Some(name.to_owned()),
    };
    // `--` after them: a file named HEAD in the worktree is no revision.
    let asked = output(
        dir,
        &[
            "rev-parse",
            &format!("refs/heads/{branch}^{{commit}}"),
            &format!("refs/heads/{branch}^{{tree}}"),
            "--symbolic-full-name",
            "HEAD",
            "--",
        ],
    );
    if let Some(out) = asked {
        if let [commit, tree, head, "--"] = out.lines().collect::<Vec<_>>().as_slice() {
            return (Some(((*commit).to_owned(), (*tree).to_owned())), on(head));
        }
    }
    (None, current_branch(dir))
}

pub fn branch_exists(dir: &Path, branch: &str) -> bool {
    command(dir)
        .args([
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ])
        .status()
        .is_ok_and(|s| s.success())
}

/// The worktree that has `branch` checked out, if any.
pub fn worktree_of_branch(dir: &Path, branch: &str) -> Option<PathBuf> {
    worktrees(dir)
        .ok()?
        .into_iter()
        .find(|(_, on)| on.as_deref() == Some(branch))
        .map(|(path, _)| path)
}

/// Every worktree git lists for the repository of `dir`, with the branch checked out there (None
/// when detached or bare): one git.
pub fn worktrees(dir: &Path) -> Result<Vec<(PathBuf, Option<String>)>, String> {
    let list = run(dir, &["worktree", "list", "--porcelain"])?;
    let mut found: Vec<(PathBuf, Option<String>)> = Vec::new();
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            found.push((PathBuf::from(p), None));
        } else if let Some(b) = line.strip_prefix("branch refs/heads/") {
            if let Some(last) = found.last_mut() {
                last.1 = Some(b.to_owned());
            }
        }
    }
    Ok(found)
}

/// What `git status` says of a worktree, with where its HEAD is.
pub struct Status {
    /// The branch HEAD is on (None when detached).
    pub branch: Option<String>,
    /// The commit HEAD points at (None before the first).
    pub head: Option<String>,
    /// No change against HEAD and no untracked file (ignored files aside).
    pub clean: bool,
}

/// The status of the worktree `dir` and its HEAD, through one git
/// (`status --porcelain=v2 --branch`). An untracked folder is named once, not file by file
/// (`--untracked-files=normal`). Like every status the loop asks, it takes no lock and writes no
/// index (`--no-optional-locks`, [`LOOKING`]).
pub fn status(dir: &Path) -> Result<Status, String> {
    let out = run(
        dir,
        &[
            LOOKING,
            "status",
            "--porcelain=v2",
            "-z",
            "--branch",
            "--untracked-files=normal",
        ],
    )?;
    let mut status = Status {
        branch: None,
        head: None,
        clean: true,
    };
    for field in out.split('\0').filter(|f| !f.is_empty()) {
        if let Some(oid) = field.strip_prefix("# branch.oid ") {
            status.head = (oid != "(initial)").then(|| oid.to_owned());
        } else if let Some(name) = field.strip_prefix("# branch.head ") {
            status.branch = (name != "(detached)").then(|| name.to_owned());
        } else if !field.starts_with("# ") {
            // An entry: a change, an unmerged path, an untracked file (or a rename's other
            // name, which comes with its entry).
            status.clean = false;
        }
    }
    Ok(status)
}

/// git's option that keeps a status from taking the index's lock to write back what it learned
/// (`--no-optional-locks`), given before the command. A status the loop asks only looks: in the
/// person's checkout its lock would fail the person's own `git commit` made at that moment, and in
/// a lane's worktree each write was a new index file for nothing the loop reads (issue 16: two
/// of them a lane, each rewriting an index of every tracked file).
pub const LOOKING: &str = "--no-optional-locks";

/// Does `path` hold no change against HEAD and no untracked file (ignored files aside)?
pub fn is_clean(dir: &Path, paths: &[&str]) -> Result<bool, String> {
    let mut args = vec![
        LOOKING,
        "status",
        "--porcelain",
        "--untracked-files=all",
        "--",
    ];
    args.extend(paths);
    run(dir, &args).map(|out| out.is_empty())
}

/// What a worktree holds beside its HEAD's tree.
#[derive(Debug, PartialEq, Eq)]
pub enum Besides {
    /// Nothing: no change, no untracked file, no ignored file.
    Nothing,
    /// Ignored files only (build products, say).
    Ignored,
    /// A change against HEAD or an untracked file.
    Changes,
}

/// What the worktree `dir` holds beside HEAD, by one walk (`status --ignored=matching`, which
/// names an ignored directory without walking it).
pub fn besides_head(dir: &Path) -> Result<Besides, String> {
    let out = run(
        dir,
        &[
            LOOKING,
            "status",
            "--porcelain",
            "-z",
            "--ignored=matching",
            "--untracked-files=all",
        ],
    )?;
    let mut found = Besides::Nothing;
    for entry in out.split('\0').filter(|f| !f.is_empty()) {
        if !entry.starts_with("!! ") {
            return Ok(Besides::Changes);
        }
        found = Besides::Ignored;
    }
    Ok(found)
}

/// The paths under `paths` that differ from HEAD or are untracked (ignored files aside), as
/// `git status` names them (a rename by both its names): one git for any number of paths.
pub fn unclean_paths(dir: &Path, paths: &[&str]) -> Result<Vec<String>, String> {
    let mut args = vec![
        LOOKING,
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=all",
        "--",
    ];
    args.extend(paths);
    let out = run(dir, &args)?;
    let mut found = Vec::new();
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    // `XY <path>`, and after a rename or a copy its original path as a field of its own.
    while let Some(entry) = fields.next() {
        let (xy, path) = entry.split_at(entry.len().min(3));
        found.push(path.to_owned());
        if xy.contains(['R', 'C']) {
            found.extend(fields.next().map(str::to_owned));
        }
    }
    Ok(found)
}

/// Write each of `bodies` into the object store as a blob through one git; their ids, in order.
/// Each goes through a scratch file in `scratch` (a folder of the caller's), removed after.
pub fn write_blobs(dir: &Path, scratch: &Path, bodies: &[&[u8]]) -> Result<Vec<String>, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut paths = Vec::new();
    let written = (|| {
        for (i, body) in bodies.iter().enumerate() {
            let path = scratch.join(format!("blob-{i}"));
            let _ = std::fs::remove_file(&path);
            // A new file, never one someone put there (nor a link): `create_new`.
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            paths.push(path.clone());
            file.write_all(body)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let list: String = paths.iter().map(|p| format!("{}\n", p.display())).collect();
        with_input(
            command(dir),
            &["hash-object", "-w", "--stdin-paths", "--no-filters"],
            list.as_bytes(),
        )
    })();
    for path in &paths {
        let _ = std::fs::remove_file(path);
    }
    let ids: Vec<String> = written?.lines().map(str::to_owned).collect();
    if ids.len() != bodies.len() {
        return Err(format!(
            "`git hash-object` gave {} ids for {} files",
            ids.len(),
            bodies.len()
        ));
    }
    Ok(ids)
}

/// Run `cmd` with `args`, `input` on its standard input; its trimmed stdout, or why it failed.
fn with_input(mut cmd: Command, args: &[&str], input: &[u8]) -> Result<String, String> {
    use std::io::Write;
    let shown = args.join(" ");
    let mut child = cmd
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git could not be started: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let written = stdin.write_all(input);
    drop(stdin);
    let out = child
        .wait_with_output()
        .map_err(|e| format!("git {shown}: {e}"))?;
    written.map_err(|e| format!("git {shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`git {shown}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The bytes of `path` in `commit`, if it is a file there no larger than `limit` bytes: `Ok(None)`
/// when the path is absent (or not a blob), an error when git fails or the blob is larger. One
/// git; for several files, [`Blobs`] reads them all through one.
pub fn blob_at(
    dir: &Path,
    commit: &str,
    path: &str,
    limit: u64,
) -> Result<Option<Vec<u8>>, String> {
    Blobs::open(dir)?.get(commit, path, limit)
}

/// Files read from commits through one `git cat-file --batch`, however many (issue 16: a lane's
/// receipt and delivery read a file or two per changed path, each once a git of its own).
pub struct Blobs {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Blobs {
    pub fn open(dir: &Path) -> Result<Blobs, String> {
        let mut child = command(dir)
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("git could not be started: {e}"))?;
        let input = child.stdin.take().expect("piped");
        let output = std::io::BufReader::new(child.stdout.take().expect("piped"));
        Ok(Blobs {
            child,
            input,
            output,
        })
    }

    /// As [`blob_at`]. A blob over `limit` is read past, unkept, so the next answer lines up.
    pub fn get(&mut self, commit: &str, path: &str, limit: u64) -> Result<Option<Vec<u8>>, String> {
        if path.contains('\n') {
            return Err(format!("`{path}` names no file git can look up"));
        }
        self.object(&format!("{commit}:{path}"), "blob", limit)
    }

    /// The bytes of the object `spec` names (`<commit>:<path>`, an object id), if it is of `kind`
    /// (`blob`, `tree`) and no larger than `limit`: `Ok(None)` when it is missing or of another
    /// kind, an error when git fails or it is larger.
    pub fn object(
        &mut self,
        spec: &str,
        kind_asked: &str,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, String> {
        use std::io::{BufRead, Read, Write};
        if spec.contains('\n') {
            return Err(format!("`{spec}` names no object git can look up"));
        }
        let failed = |e: std::io::Error| format!("`git cat-file --batch` for {spec}: {e}");
        self.input
            .write_all(format!("{spec}\n").as_bytes())
            .and_then(|()| self.input.flush())
            .map_err(failed)?;
        let mut header = String::new();
        self.output.read_line(&mut header).map_err(failed)?;
        // `<sha> <type> <size>`, or `<spec> missing` (or `ambiguous`).
        let fields: Vec<&str> = header.split_whitespace().collect();
        let [_, kind, size] = fields.as_slice() else {
            return Ok(None);
        };
        let size: u64 = size
            .parse()
            .map_err(|e| format!("git cat-file --batch: {e}"))?;
        // The object's bytes and the newline after them.
        let mut bytes = Vec::with_capacity(if size <= limit { size as usize } else { 0 });
        let keep = *kind == kind_asked && size <= limit;
        let read = if keep {
            (&mut self.output).take(size).read_to_end(&mut bytes)
        } else {
            std::io::copy(&mut (&mut self.output).take(size), &mut std::io::sink())
                .map(|n| n as usize)
        }
        .map_err(failed)?;
        let mut newline = [0u8; 1];
        self.output.read_exact(&mut newline).map_err(failed)?;
        if read as u64 != size {
            return Err(format!("`git cat-file --batch` for {spec} ended early"));
        }
        if *kind != kind_asked {
            return Ok(None);
        }
        if size > limit {
            return Err(format!("`{spec}` is {size} bytes, over {limit}"));
        }
        Ok(Some(bytes))
    }
}

impl Drop for Blobs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A git in `root` with an identity, asserting it succeeds.
    pub(crate) fn git_in(root: &Path) -> impl Fn(&[&str]) + '_ {
        move |args: &[&str]| {
            let ok = command(root)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        }
    }

    /// A file, a folder, a missing path and a file over the limit, as `blob_at` reads them.
    #[test]
    fn blob_at_reads_a_file_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = git_in(root);
        git(&["init", "-q"]);
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/f.txt"), "hello\n").unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "one"]);
        let at = |path: &str, limit: u64| blob_at(root, "HEAD", path, limit);
        assert_eq!(at("d/f.txt", 100).unwrap(), Some(b"hello\n".to_vec()));
        assert_eq!(at("d", 100).unwrap(), None, "a folder is no file");
        assert_eq!(at("nope.txt", 100).unwrap(), None);
        assert_eq!(blob_at(root, "no-such-rev", "d/f.txt", 100).unwrap(), None);
        let over = at("d/f.txt", 3).unwrap_err();
        assert!(over.contains("is 6 bytes, over 3"), "{over}");

        // Through one git, one answer after another stays in line: after a folder, a missing
        // path and a file over the limit, the next file still reads whole.
        let mut blobs = Blobs::open(root).unwrap();
        assert_eq!(blobs.get("HEAD", "d", 100).unwrap(), None);
        assert_eq!(blobs.get("HEAD", "nope.txt", 100).unwrap(), None);
        assert!(blobs.get("HEAD", "d/f.txt", 3).is_err());
        assert_eq!(
            blobs.get("HEAD", "d/f.txt", 100).unwrap(),
            Some(b"hello\n".to_vec())
        );
        assert_eq!(
            blobs.get("HEAD", "d/f.txt", 100).unwrap(),
            Some(b"hello\n".to_vec())
        );
    }

    /// Several blobs through one git: ids in order, as git names them, scratch files gone.
    #[test]
    fn write_blobs_gives_each_its_id_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert!(command(root)
            .args(["init", "-q"])
            .status()
            .unwrap()
            .success());
        let scratch = root.join("scratch");
        std::fs::create_dir(&scratch).unwrap();
        let bodies: [&[u8]; 3] = [b"one\n", b"", b"three\r\n"];
        let ids = write_blobs(root, &scratch, &bodies).unwrap();
        for (id, body) in ids.iter().zip(bodies) {
            assert_eq!(
                with_input(command(root), &["hash-object", "--stdin"], body).unwrap(),
                *id
            );
            let kept = command(root)
                .args(["cat-file", "blob", id])
                .output()
                .unwrap();
            assert_eq!(kept.stdout, body);
        }
        assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
    }

    /// A worktree's status with its HEAD, through one git: the branch and commit, clean; then
    /// an untracked file, a staged change, a detached HEAD.
    #[test]
    fn status_gives_the_branch_the_head_and_whether_it_is_clean() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = git_in(root);
        git(&["init", "-q", "-b", "lane"]);
        std::fs::write(root.join("a.txt"), "a\n").unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "one"]);
        let head = self::head(root).unwrap();
        let s = status(root).unwrap();
        assert_eq!(
            (s.branch.as_deref(), s.head.as_deref(), s.clean),
            (Some("lane"), Some(head.as_str()), true)
        );
        std::fs::write(root.join("new file.txt"), "n\n").unwrap();
        assert!(!status(root).unwrap().clean, "an untracked file");
        std::fs::remove_file(root.join("new file.txt")).unwrap();
        std::fs::write(root.join("a.txt"), "changed\n").unwrap();
        git(&["add", "a.txt"]);
        assert!(!status(root).unwrap().clean, "a staged change");
        git(&["reset", "-q", "--hard"]);
        git(&["checkout", "-q", "--detach"]);
        let s = status(root).unwrap();
        assert_eq!((s.branch, s.head, s.clean), (None, Some(head), true));
    }

    /// A status the loop asks only looks: it leaves the index as it was and takes no lock (a
    /// person's `git commit` at that moment is not refused), and it still sees a file made right
    /// after the last (within its second), in a folder whose modification time is then set back
    /// to what it was (as an agent may), or in a new folder.
    #[test]
    fn status_looks_without_a_lock_and_sees_a_file_made_after_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = git_in(root);
        git(&["init", "-q"]);
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f.txt"), "f\n").unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "one"]);
        // Its time set back: a status that may write refreshes the entry and writes the index.
        let day = std::time::Duration::from_secs(86_400);
        std::fs::File::options()
            .write(true)
            .open(root.join("a/b/f.txt"))
            .unwrap()
            .set_modified(std::time::SystemTime::now() - day)
            .unwrap();
        let index = std::fs::read(root.join(".git/index")).unwrap();
        assert!(status(root).unwrap().clean);
        assert!(is_clean(root, &[]).unwrap());
        assert!(unclean_paths(root, &["a"]).unwrap().is_empty());
        assert_eq!(besides_head(root).unwrap(), Besides::Nothing);
        assert!(
            std::fs::read(root.join(".git/index")).unwrap() == index,
            "a status wrote the index"
        );
        // The lock a person's git holds does not fail the loop's status either.
        std::fs::write(root.join(".git/index.lock"), "").unwrap();
        assert!(status(root).unwrap().clean, "a status under a held lock");
        std::fs::remove_file(root.join(".git/index.lock")).unwrap();
        std::fs::write(root.join("a/b/new.txt"), "n\n").unwrap();
        assert!(!status(root).unwrap().clean, "made right after");
        std::fs::remove_file(root.join("a/b/new.txt")).unwrap();
        assert!(status(root).unwrap().clean);
        let folder = root.join("a/b");
        let was = std::fs::metadata(&folder).unwrap().modified().unwrap();
        std::fs::write(folder.join("hidden.txt"), "h\n").unwrap();
        std::fs::File::open(&folder)
            .unwrap()
            .set_modified(was)
            .unwrap();
        assert_eq!(std::fs::metadata(&folder).unwrap().modified().unwrap(), was);
        assert!(!status(root).unwrap().clean, "the folder's time set back");
        std::fs::remove_file(folder.join("hidden.txt")).unwrap();
        assert!(status(root).unwrap().clean);
        std::fs::create_dir_all(root.join("a/c")).unwrap();
        std::fs::write(root.join("a/c/deep.txt"), "d\n").unwrap();
        assert!(!status(root).unwrap().clean, "a new folder");
    }

    /// What a worktree holds beside HEAD, by one walk: nothing; ignored files only (a folder
    /// that matches a pattern named once, not walked); then a change, an untracked file.
    #[test]
    fn besides_head_tells_ignored_files_from_changes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = git_in(root);
        git(&["init", "-q"]);
        std::fs::write(root.join(".gitignore"), "target/\n*.o\n").unwrap();
        std::fs::write(root.join("a.txt"), "a\n").unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "one"]);
        assert_eq!(besides_head(root).unwrap(), Besides::Nothing);
        std::fs::create_dir_all(root.join("target/deep")).unwrap();
        std::fs::write(root.join("target/deep/x"), "x").unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::write(root.join("build/y.o"), "y").unwrap();
        assert_eq!(besides_head(root).unwrap(), Besides::Ignored);
        std::fs::write(root.join("build/notes.txt"), "n").unwrap();
        assert_eq!(besides_head(root).unwrap(), Besides::Changes, "untracked");
        std::fs::remove_file(root.join("build/notes.txt")).unwrap();
        std::fs::write(root.join("a.txt"), "changed\n").unwrap();
        assert_eq!(besides_head(root).unwrap(), Besides::Changes, "changed");
    }

    /// What `git status` says of several folders, through one git: a changed file, an untracked
    /// one, both names of a staged rename, and nothing of a clean folder or one outside.
    #[test]
    fn unclean_paths_names_each_change_under_the_paths_asked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = git_in(root);
        git(&["init", "-q"]);
        for d in ["a", "b", "c", "d", "e"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
            std::fs::write(root.join(d).join("f.md"), format!("{d}\n")).unwrap();
        }
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "one"]);
        let asked = ["a", "b", "c", "d"];
        assert!(unclean_paths(root, &asked).unwrap().is_empty());
        std::fs::write(root.join("a/f.md"), "changed\n").unwrap();
        std::fs::write(root.join("b/new file.md"), "new\n").unwrap();
        git(&["mv", "c/f.md", "c/g.md"]);
        std::fs::write(root.join("e/f.md"), "not asked\n").unwrap();
        let mut found = unclean_paths(root, &asked).unwrap();
        found.sort();
        assert_eq!(found, ["a/f.md", "b/new file.md", "c/f.md", "c/g.md"]);
    }
}
