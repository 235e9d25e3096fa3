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
