//! The few git questions the record asks (HEAD, the top level, who is signing off). Always argv,
//! never a shell, and with the variables that would point git at some other repository removed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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

pub fn command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).stdin(Stdio::null());
    for var in SCRUBBED {
        cmd.env_remove(var);
    }
    cmd
}

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
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "`git {}` failed: {}",
            args.join(" "),
            err.trim().lines().last().unwrap_or("no message")
        ))
    }
}

/// The branch HEAD is on (`main`), or None when detached.
pub fn current_branch(dir: &Path) -> Option<String> {
    output(dir, &["symbolic-ref", "--quiet", "--short", "HEAD"])
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
    let list = output(dir, &["worktree", "list", "--porcelain"])?;
    let mut path: Option<&str> = None;
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            path = Some(p);
        } else if line == format!("branch refs/heads/{branch}") {
            return path.map(PathBuf::from);
        }
    }
    None
}

/// Does `path` hold no change against HEAD and no untracked file (ignored files aside)?
pub fn is_clean(dir: &Path, paths: &[&str]) -> Result<bool, String> {
    let mut args = vec!["status", "--porcelain", "--untracked-files=all", "--"];
    args.extend(paths);
    run(dir, &args).map(|out| out.is_empty())
}

/// Run git with its index at `index` (a temporary index of the caller's), so that what the
/// command builds never depends on the worktree's own index.
pub fn run_with_index(dir: &Path, index: &Path, args: &[&str]) -> Result<String, String> {
    let mut cmd = command(dir);
    cmd.env("GIT_INDEX_FILE", index);
    finish(cmd, args)
}

/// Write `bytes` into the object store as a blob; its id.
pub fn write_blob(dir: &Path, bytes: &[u8]) -> Result<String, String> {
    use std::io::Write;
    let mut child = command(dir)
        .args(["hash-object", "-w", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git could not be started: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let written = stdin.write_all(bytes);
    drop(stdin);
    let out = child
        .wait_with_output()
        .map_err(|e| format!("git hash-object: {e}"))?;
    written.map_err(|e| format!("git hash-object: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`git hash-object` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The bytes of `path` in `commit`, if it is a file there no larger than `limit` bytes: `Ok(None)`
/// when the path is absent (or not a blob), an error when git fails or the blob is larger.
pub fn blob_at(
    dir: &Path,
    commit: &str,
    path: &str,
    limit: u64,
) -> Result<Option<Vec<u8>>, String> {
    let spec = format!("{commit}:{path}");
    let kind = command(dir)
        .args(["cat-file", "-t", &spec])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("git could not be started: {e}"))?;
    if !kind.status.success() || String::from_utf8_lossy(&kind.stdout).trim() != "blob" {
        return Ok(None);
    }
    let size: u64 = run(dir, &["cat-file", "-s", &spec])?
        .trim()
        .parse()
        .map_err(|e| format!("git cat-file -s: {e}"))?;
    if size > limit {
        return Err(format!(
            "`{path}` at {commit} is {size} bytes, over {limit}"
        ));
    }
    let out = command(dir)
        .args(["cat-file", "blob", &spec])
        .output()
        .map_err(|e| format!("git could not be started: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`git cat-file blob {spec}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(Some(out.stdout))
}
