//! Memory and knowledge are files inside the repository (SPEC 24.15). `memory.product` and each
//! `memory.knowledge` entry go into every brief and the memory agent's prompt; an entry that
//! leaves the root (an absolute path, a `..`, a link committed in the repository) or names a file
//! under `/proc`, `/dev` or `/sys` would put what it names there (iced's environment, a private
//! file) for an agent to read. This module judges paths only: it never reads a memory file.

use super::settings::Settings;
use crate::refusal::Refusal;
use std::path::{Path, PathBuf};

/// Folders of the kernel's, whose files are never a memory file wherever the repository is.
const KERNEL: &[&str] = &["/proc", "/dev", "/sys"];

/// Where `entry` is read from: a path from the root, as a person writes it.
pub fn path_of(root: &Path, entry: &str) -> PathBuf {
    root.join(entry)
}

/// Why `entry` is not a file inside the repository at `root`, or None when it is.
pub fn not_inside(root: &Path, entry: &str) -> Option<String> {
    let path = path_of(root, entry);
    let kernel = |p: &Path| KERNEL.iter().find(|k| p.starts_with(k)).copied();
    if let Some(k) = kernel(&path).or_else(|| kernel(&super::inside::resolved(&path))) {
        return Some(format!("it is under `{k}`"));
    }
    if Path::new(entry).is_absolute() {
        return Some("it is an absolute path".to_owned());
    }
    super::inside::outside(root, &path)
        .map(|at| format!("it leads outside the repository, to `{}`", at.display()))
}

/// Every memory path of `settings` judged (a verb of the loop, before anything runs): the first
/// that is not a file inside the repository is refused, naming its key and the path.
pub fn check(root: &Path, settings: &Settings, step: &str) -> Result<(), Refusal> {
    let entries = settings
        .product
        .iter()
        .map(|p| ("memory.product", p))
        .chain(settings.knowledge.iter().map(|k| ("memory.knowledge", k)));
    for (key, entry) in entries {
        if let Some(why) = not_inside(root, entry) {
            return Err(Refusal::new(
                step,
                "memory-path-refused",
                format!("`{key}` in `.iced/config.json` names `{entry}`, which is not a file inside the repository: {why}; what it names would go into every brief"),
                format!("name a file of the repository in `{key}` (a path from its root, with no link leading out of it), or take the entry out; nothing was read"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_inside_the_root_pass() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join(".iced/memory")).unwrap();
        std::fs::write(dir.path().join("secret.md"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.md"), root.join("out.md")).unwrap();
        std::os::unix::fs::symlink(".iced/memory", root.join("mem")).unwrap();
        for (entry, ok) in [
            (".iced/memory/knowledge.md", true),
            ("mem/knowledge.md", true),
            ("docs/not-yet.md", true),
            ("out.md", false),
            ("../secret.md", false),
            ("docs/../../secret.md", false),
            ("/proc/self/environ", false),
            ("/dev/stdin", false),
            ("/sys/kernel/hostname", false),
        ] {
            assert_eq!(not_inside(&root, entry).is_none(), ok, "{entry}");
        }
    }
}
