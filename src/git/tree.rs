//! A tree made from another with some files put in, through one `git mktree --batch`: no index,
//! so what it costs follows the folders it changes, not the size of the repository (issue 16: the
//! close of a lane was a `read-tree`, an `update-index` and a `write-tree`, each over the whole
//! tree).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;

/// A folder of what is put in: its files (name, blob id) and its folders.
#[derive(Default)]
struct Folder {
    files: BTreeMap<Vec<u8>, String>,
    folders: BTreeMap<Vec<u8>, Folder>,
}

/// Gives a tree object's raw bytes by what names it, None when it names no tree.
pub type ReadTree<'a> = dyn FnMut(&str) -> Result<Option<Vec<u8>>, String> + 'a;

/// One entry of a tree: mode (as git writes it in a tree, `40000` for a folder), name, object id.
type Entry = (String, Vec<u8>, String);

/// The entries of a tree object's raw bytes, whose ids are `id_len` bytes.
fn entries(raw: &[u8], id_len: usize) -> Result<Vec<Entry>, String> {
    let bad = || "a tree git gave could not be read".to_owned();
    let mut out = Vec::new();
    let mut rest = raw;
    while !rest.is_empty() {
        let space = rest.iter().position(|&b| b == b' ').ok_or_else(bad)?;
        let nul = rest.iter().position(|&b| b == 0).ok_or_else(bad)?;
        if nul < space || rest.len() < nul + 1 + id_len {
            return Err(bad());
        }
        let mode = String::from_utf8(rest[..space].to_vec()).map_err(|_| bad())?;
        let name = rest[space + 1..nul].to_vec();
        let id: String = rest[nul + 1..nul + 1 + id_len]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        out.push((mode, name, id));
        rest = &rest[nul + 1 + id_len..];
    }
    Ok(out)
}

/// The tree of `commit` (a full object id) with each of `files` (`<path>`, blob id) put in as a
/// regular file (mode 100644), replacing whatever was at its path, folders made as needed:
/// `read` gives a tree object's raw bytes (None when there is no such tree) by its id, or, for
/// the commit's own, by `<commit>^{tree}`. The new trees are written through one
/// `git mktree --batch` in `dir`; the new root's id.
pub fn with_files(
    dir: &Path,
    commit: &str,
    files: &[(String, String)],
    read: &mut ReadTree<'_>,
) -> Result<String, String> {
    let mut top = Folder::default();
    for (path, blob) in files {
        let parts: Vec<&str> = path.split('/').collect();
        if parts
            .iter()
            .any(|p| p.is_empty() || *p == "." || *p == ".." || p.contains('\0'))
        {
            return Err(format!("`{}` is not a path in a tree", path.escape_debug()));
        }
        let (name, folders) = parts.split_last().expect("split gives one part at least");
        let mut at = &mut top;
        for f in folders {
            at = at.folders.entry(f.as_bytes().to_vec()).or_default();
        }
        at.files.insert(name.as_bytes().to_vec(), blob.clone());
    }
    let mut child = crate::git::command(dir)
        .args(["mktree", "--batch", "-z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git could not be started: {e}"))?;
    let mut mktree = Mktree {
        input: child.stdin.take().expect("piped"),
        output: BufReader::new(child.stdout.take().expect("piped")),
        id_len: commit.len() / 2,
    };
    let made = mktree.write(&top, Some(&format!("{commit}^{{tree}}")), read);
    drop(mktree);
    let out = child
        .wait_with_output()
        .map_err(|e| format!("git mktree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`git mktree` failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .lines()
                .last()
                .unwrap_or("no message")
        ));
    }
    made
}

/// The `git mktree --batch -z` a tree is written through: one tree in, its id out.
struct Mktree {
    input: std::process::ChildStdin,
    output: BufReader<std::process::ChildStdout>,
    id_len: usize,
}

impl Mktree {
    /// `folder` put into the tree `existing` (none: a new folder), written; its id. Folders
    /// first, deepest first: a tree names its folders by the ids of trees already written.
    fn write(
        &mut self,
        folder: &Folder,
        existing: Option<&str>,
        read: &mut ReadTree<'_>,
    ) -> Result<String, String> {
        let mut list = match existing {
            Some(id) => match read(id)? {
                Some(raw) => entries(&raw, self.id_len)?,
                None => return Err(format!("the tree {id} could not be read")),
            },
            None => Vec::new(),
        };
        for (name, sub) in &folder.folders {
            let was = list
                .iter()
                .find(|(mode, n, _)| n == name && mode == "40000")
                .map(|(_, _, id)| id.clone());
            let id = self.write(sub, was.as_deref(), read)?;
            list.retain(|(_, n, _)| n != name);
            list.push(("40000".into(), name.clone(), id));
        }
        for (name, blob) in &folder.files {
            list.retain(|(_, n, _)| n != name);
            list.push(("100644".into(), name.clone(), blob.clone()));
        }
        // `<mode> <type> <id>\t<name>` each ended by a NUL; an empty one ends the tree. git
        // sorts the entries itself.
        let mut text = Vec::new();
        for (mode, name, id) in &list {
            let kind = match mode.as_str() {
                "40000" => "tree",
                "160000" => "commit",
                _ => "blob",
            };
            text.extend_from_slice(format!("{mode} {kind} {id}\t").as_bytes());
            text.extend_from_slice(name);
            text.push(0);
        }
        text.push(0);
        let failed = |e: std::io::Error| format!("git mktree: {e}");
        self.input
            .write_all(&text)
            .and_then(|()| self.input.flush())
            .map_err(failed)?;
        let mut line = String::new();
        self.output.read_line(&mut line).map_err(failed)?;
        let id = line.trim();
        if id.len() != self.id_len * 2 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("`git mktree` gave no tree".into());
        }
        Ok(id.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(root: &Path, args: &[&str]) -> String {
        let out = crate::git::command(root)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// The tree made is the one an index would make: the head's, each file put in (a changed
    /// one, a new one in a new folder, a file where a folder was), everything else as it was
    /// (an executable, a link, a name with a tab), compared with `read-tree` + `update-index`
    /// + `write-tree` on the same commit.
    #[test]
    fn with_files_makes_the_tree_an_index_would() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        std::fs::create_dir_all(root.join("intent/u")).unwrap();
        std::fs::create_dir_all(root.join("intent/v/deep")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("intent/u/iced.md"), "old\n").unwrap();
        std::fs::write(root.join("intent/u/keep.md"), "keep\n").unwrap();
        std::fs::write(root.join("intent/v/deep/x"), "x\n").unwrap();
        std::fs::write(root.join("src/run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(root.join("src/a\tb"), "tab\n").unwrap();
        std::os::unix::fs::symlink("run.sh", root.join("src/link")).unwrap();
        git(root, &["add", "-A"]);
        git(root, &["update-index", "--chmod=+x", "src/run.sh"]);
        git(root, &["commit", "-q", "-m", "one"]);
        let head = git(root, &["rev-parse", "HEAD"]);
        let blob = |text: &str| {
            let scratch = root.join(".git");
            crate::git::write_blobs(root, &scratch, &[text.as_bytes()]).unwrap()[0].clone()
        };
        let files = vec![
            ("intent/u/iced.md".to_owned(), blob("new\n")),
            ("intent/u/evidence.md".to_owned(), blob("evidence\n")),
            (".iced/metrics.jsonl".to_owned(), blob("{}\n")),
            ("intent/v/deep".to_owned(), blob("a file now\n")),
        ];
        let mut reads = 0;
        let made = with_files(root, &head, &files, &mut |spec| {
            reads += 1;
            crate::git::Blobs::open(root)?.object(spec, "tree", 1 << 20)
        })
        .unwrap();
        // The root, intent, intent/u and intent/v: only the folders on the way are read.
        assert_eq!(reads, 4);

        let index = root.join(".git/other-index");
        let with_index = |args: &[&str], input: &str| {
            use std::io::Write;
            let mut child = crate::git::command(root)
                .env("GIT_INDEX_FILE", &index)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "git {args:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        };
        with_index(&["read-tree", &head], "");
        with_index(&["rm", "-q", "--cached", "-r", "intent/v/deep"], "");
        let lines: String = files
            .iter()
            .map(|(path, id)| format!("100644 {id}\t{path}\n"))
            .collect();
        with_index(&["update-index", "--index-info"], &lines);
        let expected = with_index(&["write-tree"], "");
        assert_eq!(made, expected);
        let listed = git(root, &["ls-tree", "-r", &made]);
        assert!(listed.contains("100755 blob"), "{listed}");
        assert!(listed.contains("120000 blob"), "{listed}");
    }

    /// A path that is not one in a tree is refused before git is asked.
    #[test]
    fn with_files_refuses_a_path_with_an_empty_or_dot_part() {
        let dir = tempfile::tempdir().unwrap();
        for path in ["a//b", "../x", "a/./b", "/a", "a/"] {
            let files = vec![(path.to_owned(), "0".repeat(40))];
            let err =
                with_files(dir.path(), &"0".repeat(40), &files, &mut |_| Ok(None)).unwrap_err();
            assert!(err.contains("is not a path in a tree"), "{path}: {err}");
        }
    }
}
