//! Whether a path the config names is inside the checkout (SPEC 24.14, 24.15): where a read or a
//! git there would end up, its links resolved as far as they exist. Reads nothing but the names
//! of the folders on the way.

use std::path::{Component, Path, PathBuf};

/// `path` (absolute) with its links resolved as far as it exists, and the rest of its words
/// (`..` included) added as written: where a read or a git there would end up.
pub fn resolved(path: &Path) -> PathBuf {
    let words: Vec<Component> = path.components().collect();
    for n in (1..=words.len()).rev() {
        let Ok(mut out) = words[..n].iter().collect::<PathBuf>().canonicalize() else {
            continue;
        };
        for word in &words[n..] {
            match word {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                other => out.push(other),
            }
        }
        return out;
    }
    path.to_path_buf()
}

/// Whether `path` (absolute) ends up inside `root` once resolved: `None` when it does, else where
/// it ends up.
pub fn outside(root: &Path, path: &Path) -> Option<PathBuf> {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_owned());
    let at = resolved(path);
    (!at.starts_with(&root)).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_through_what_exists() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        assert_eq!(resolved(&root.join("a/b/../c")), root.join("a/c"));
        assert_eq!(
            resolved(&root.join("a/../../x")),
            root.parent().unwrap().join("x")
        );
        std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap();
        assert!(!resolved(&root.join("out/x")).starts_with(&root));
        assert!(outside(&root, &root.join("out/x")).is_some());
        assert_eq!(outside(&root, &root.join("a/../b")), None);
    }
}
