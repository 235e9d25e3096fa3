//! What a file holds at a commit, kept in the run's folder (`.iced/run/<run>/at-commit/`), so that a
//! later call has it without starting git (issue 36: every `implement step`, a waiting one too,
//! renders each live lane's brief again to check its inputs, and the unit's decision log at the
//! lane's base commit cost a `git cat-file` a call). What a commit holds never changes, so a kept
//! answer never goes stale.
//!
//! A kept file is written whole or not at all (a complete, synced file linked to its name, 0600,
//! in a folder of the loop's that is no link), and read back only when it is whole: its header
//! names the commit, the path and the limit it answers, and the length and sha256 of what follows.
//! One that does not read back so (torn by a crash, edited, a link) is never trusted: the caller
//! asks git again and keeps the answer anew.
//!
//! This module owns the format and the files; it never runs git and decides nothing.

use crate::store;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const MAGIC: &str = "iced at-commit 1";

/// The file that keeps `path` at `commit` as read with `limit`, in `dir`: named by the hash of
/// the three, so that no name a path could choose reaches the file system.
fn kept_file(dir: &Path, commit: &str, path: &str, limit: u64) -> PathBuf {
    let key = Sha256::digest(format!("{commit}\0{path}\0{limit}").as_bytes());
    dir.join(hex(&key))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The header: what the file answers, then the answer's kind, length and hash.
fn header(commit: &str, path: &str, limit: u64, answer: Option<&[u8]>) -> String {
    let path = serde_json::to_string(path).expect("a string serialises");
    let what = match answer {
        None => "absent".to_owned(),
        Some(bytes) => format!("present {} {}", bytes.len(), hex(&Sha256::digest(bytes))),
    };
    format!("{MAGIC}\n{commit}\n{limit}\n{path}\n{what}\n")
}

fn encode(commit: &str, path: &str, limit: u64, answer: Option<&[u8]>) -> Vec<u8> {
    let mut out = header(commit, path, limit, answer).into_bytes();
    out.extend_from_slice(answer.unwrap_or_default());
    out
}

/// The answer `bytes` hold for `path` at `commit` with `limit`, only when they are whole: Some(None)
/// when the commit has no such file, Some(Some(..)) its bytes, None when they answer something
/// else or are not whole.
fn decode(bytes: &[u8], commit: &str, path: &str, limit: u64) -> Option<Option<Vec<u8>>> {
    // The header is five lines; what follows is the answer.
    let mut at = 0;
    for _ in 0..5 {
        at += bytes.get(at..)?.iter().position(|&b| b == b'\n')? + 1;
    }
    let (head, body) = bytes.split_at(at);
    let absent = header(commit, path, limit, None);
    if head == absent.as_bytes() {
        return body.is_empty().then_some(None);
    }
    (head == header(commit, path, limit, Some(body)).as_bytes()).then(|| Some(body.to_vec()))
}

/// What is kept in `dir` for `path` at `commit` read with `limit`, when a whole answer is there.
pub(crate) fn read(dir: &Path, commit: &str, path: &str, limit: u64) -> Option<Option<Vec<u8>>> {
    let file = kept_file(dir, commit, path, limit);
    // Room for the header besides the answer's own limit.
    let bytes =
        store::read_no_follow(&file, limit.saturating_add(4096 + path.len() as u64)).ok()?;
    decode(&bytes, commit, path, limit)
}

/// Keep `answer` for `path` at `commit` read with `limit` in `dir`, created 0700 when missing. A
/// kept file that is not whole is replaced. Nothing here may fail the call: an answer that could
/// not be kept is asked of git again next time.
pub(crate) fn keep(dir: &Path, commit: &str, path: &str, limit: u64, answer: Option<&[u8]>) {
    if crate::run::state::ensure_dir(dir, "at-commit").is_err() {
        return;
    }
    let file = kept_file(dir, commit, path, limit);
    let bytes = encode(commit, path, limit, answer);
    if let Ok(false) = store::create_new_whole(&file, &bytes, 0o600) {
        // Something is there: whole (another call kept the same answer), or not, which goes.
        if read(dir, commit, path, limit).is_none() && store::remove_if_present(&file).is_ok() {
            let _ = store::create_new_whole(&file, &bytes, 0o600);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
    const PATH: &str = "intent/001-x/decisions.md";

    #[test]
    fn an_answer_kept_reads_back_and_answers_only_what_it_was_asked() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("at-commit");
        assert_eq!(read(&d, COMMIT, PATH, 100), None, "nothing kept yet");
        keep(&d, COMMIT, PATH, 100, Some(b"# Decisions\n"));
        assert_eq!(
            read(&d, COMMIT, PATH, 100),
            Some(Some(b"# Decisions\n".to_vec()))
        );
        // Another commit, path or limit is another question.
        let other = "1123456789abcdef0123456789abcdef01234567";
        assert_eq!(read(&d, other, PATH, 100), None);
        assert_eq!(read(&d, COMMIT, "intent/002-y/decisions.md", 100), None);
        assert_eq!(read(&d, COMMIT, PATH, 101), None);
        keep(&d, COMMIT, "intent/none/decisions.md", 100, None);
        assert_eq!(
            read(&d, COMMIT, "intent/none/decisions.md", 100),
            Some(None)
        );
        let file = kept_file(&d, COMMIT, PATH, 100);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&d), 0o700);
    }

    /// A crash while it is written, or a write by anything else, leaves bytes that are not the
    /// whole file: every shorter prefix, and a byte changed anywhere, is never trusted.
    #[test]
    fn a_kept_file_that_is_not_whole_is_never_trusted() {
        for answer in [Some(&b"- Decision: keep it\n- Why: x\n"[..]), None] {
            let whole = encode(COMMIT, PATH, 100, answer);
            let expected = Some(answer.map(<[u8]>::to_vec));
            assert_eq!(decode(&whole, COMMIT, PATH, 100), expected);
            for cut in 0..whole.len() {
                assert_eq!(
                    decode(&whole[..cut], COMMIT, PATH, 100),
                    None,
                    "cut at {cut}"
                );
            }
            for at in 0..whole.len() {
                let mut changed = whole.clone();
                changed[at] ^= 0x01;
                assert_eq!(decode(&changed, COMMIT, PATH, 100), None, "byte {at}");
            }
            let mut longer = whole.clone();
            longer.push(b'x');
            assert_eq!(decode(&longer, COMMIT, PATH, 100), None);
        }
    }

    /// A torn file where the answer goes is replaced by the whole one; a link there is refused as
    /// an answer and replaced, its target untouched.
    #[test]
    fn a_torn_file_or_a_link_is_replaced_by_the_whole_answer() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("at-commit");
        std::fs::create_dir(&d).unwrap();
        let file = kept_file(&d, COMMIT, PATH, 100);
        let whole = encode(COMMIT, PATH, 100, Some(b"text\n"));
        std::fs::write(&file, &whole[..whole.len() - 2]).unwrap();
        assert_eq!(read(&d, COMMIT, PATH, 100), None);
        keep(&d, COMMIT, PATH, 100, Some(b"text\n"));
        assert_eq!(read(&d, COMMIT, PATH, 100), Some(Some(b"text\n".to_vec())));

        let target = dir.path().join("target");
        std::fs::write(&target, &whole).unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&target, &file).unwrap();
        assert_eq!(read(&d, COMMIT, PATH, 100), None, "a link is not read");
        keep(&d, COMMIT, PATH, 100, Some(b"text\n"));
        assert!(!std::fs::symlink_metadata(&file).unwrap().is_symlink());
        assert_eq!(
            std::fs::read(&target).unwrap(),
            whole,
            "the target untouched"
        );
        assert_eq!(read(&d, COMMIT, PATH, 100), Some(Some(b"text\n".to_vec())));
    }

    /// A folder that is a link is not written through.
    #[test]
    fn nothing_is_kept_through_a_linked_folder() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let d = dir.path().join("at-commit");
        std::os::unix::fs::symlink(&elsewhere, &d).unwrap();
        keep(&d, COMMIT, PATH, 100, Some(b"text\n"));
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
}
