//! How bytes reach the disk and come back. Writes: a temp file in the same directory, fsync,
//! rename over the target, fsync the directory, so a crash never leaves half of one. Appends go
//! through `O_APPEND` and refuse a symlinked leaf, so a log can never be redirected into some other
//! file. Reads: [`open_regular`] is the one way iced opens a file to read it (SPEC 24.6): without
//! blocking, and only if the open descriptor is a regular file, so a FIFO, a socket or a device
//! where a file should be is refused at once instead of hanging the caller (which may hold the
//! state lock). Every read is size-limited.
//!
//! This module never decides what to write, only how.

use nix::fcntl::OFlag;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("`{0}` is a symbolic link; iced does not read or write through links here")]
    Symlink(PathBuf),
    #[error("`{path}` is {kind}, not a regular file; iced reads and writes only regular files")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("`{path}` is larger than {limit} bytes")]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{op} `{path}`: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl StoreError {
    pub fn io(op: &'static str, path: &Path, source: io::Error) -> StoreError {
        StoreError::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// The error of an `open` of `path`: `ELOOP` under `O_NOFOLLOW` is a symlinked leaf, and
    /// `ENXIO` is a socket (or a FIFO opened for writing that nobody reads).
    fn of_open(op: &'static str, path: &Path, e: io::Error, no_follow: bool) -> StoreError {
        match e.raw_os_error() {
            Some(code) if no_follow && code == nix::errno::Errno::ELOOP as i32 => {
                StoreError::Symlink(path.to_owned())
            }
            Some(code) if code == nix::errno::Errno::ENXIO as i32 => StoreError::NotRegular {
                path: path.to_owned(),
                kind: "a special file",
            },
            _ => StoreError::io(op, path, e),
        }
    }
}

/// How a read treats a symbolic link at the path itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    /// A person's file (the config, a unit, a knowledge file): a link to a regular file is read.
    Follow,
    /// A file the loop owns or an agent wrote (the state, a report, an answer): a link is refused,
    /// so an agent cannot point the loop at some other file.
    Refuse,
}

/// What a file is, in words, for a refusal.
fn kind_name(t: &fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

/// `Ok` for a regular file; a link is `Symlink` (only `symlink_metadata` shows one), anything else
/// `NotRegular`.
fn check_kind(path: &Path, t: &fs::FileType) -> Result<(), StoreError> {
    if t.is_file() {
        Ok(())
    } else if t.is_symlink() {
        Err(StoreError::Symlink(path.to_owned()))
    } else {
        Err(StoreError::NotRegular {
            path: path.to_owned(),
            kind: kind_name(t),
        })
    }
}

/// Flags of every open that must not wait: `O_NONBLOCK` makes opening a FIFO return at once (it
/// does nothing to a regular file), `O_NOCTTY` keeps a terminal from becoming ours.
fn no_wait() -> OFlag {
    OFlag::O_NONBLOCK | OFlag::O_NOCTTY
}

/// Open `path` to read it, only if it is a regular file (SPEC 24.6). It is looked at before the
/// open (opening a device can do things of its own) and the open descriptor again after (the path
/// may have been replaced in between); the open never waits, whatever is there.
pub fn open_regular(path: &Path, links: Links) -> Result<File, StoreError> {
    let look = match links {
        Links::Follow => fs::metadata(path),
        Links::Refuse => fs::symlink_metadata(path),
    };
    let meta = look.map_err(|e| StoreError::io("read", path, e))?;
    check_kind(path, &meta.file_type())?;
    let mut flags = no_wait();
    if links == Links::Refuse {
        flags |= OFlag::O_NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .map_err(|e| StoreError::of_open("read", path, e, links == Links::Refuse))?;
    let meta = file
        .metadata()
        .map_err(|e| StoreError::io("inspect", path, e))?;
    check_kind(path, &meta.file_type())?;
    Ok(file)
}

/// Read a whole file that a person keeps (a link to a regular file is followed), refusing one that
/// is not a regular file or is larger than `limit` bytes, without reading it all.
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, StoreError> {
    read_all(open_regular(path, Links::Follow)?, path, limit)
}

/// [`read_limited`] for a file the loop owns or an agent wrote: a symbolic link is refused too.
pub fn read_no_follow(path: &Path, limit: u64) -> Result<Vec<u8>, StoreError> {
    read_all(open_regular(path, Links::Refuse)?, path, limit)
}

fn read_all(file: File, path: &Path, limit: u64) -> Result<Vec<u8>, StoreError> {
    let len = file.metadata().map_or(0, |m| m.len());
    // A regular file's length is its size (files of /proc say 0 and are read to find out).
    if len > limit {
        return Err(StoreError::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    // Sized from the file's length: a small file is read in one call and holds no spare memory.
    let hint = len;
    let mut bytes = Vec::with_capacity(hint as usize + 1);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| StoreError::io("read", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(StoreError::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

/// Whether an append to `path` could go ahead: it is missing or a regular file. A link is
/// `Symlink`, anything else `NotRegular`. The loop checks its logs with this before a step
/// writes anything, so that no event is dropped silently (SPEC 24.6).
pub fn check_appendable(path: &Path) -> Result<(), StoreError> {
    match fs::symlink_metadata(path) {
        Ok(meta) => check_kind(path, &meta.file_type()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("inspect", path, e)),
    }
}

/// Open (creating it, `mode`, when missing) a lock file to read and write: never through a link,
/// never waiting on a FIFO, and only a regular file.
pub fn open_lock_file(path: &Path, mode: u32) -> Result<File, StoreError> {
    open_to_write(path, OpenOptions::new().read(true).truncate(false), mode)
}

/// Take the exclusive flock of `file`, waiting at most `wait`: whether it was taken. The holder is
/// another call's transaction (a few milliseconds), so the wait is looked at again after 1 ms,
/// then each time twice as long, at most 16 ms apart: a lock freed soon is taken soon, and a long
/// hold costs a few looks a second.
pub fn flock_within(file: &File, wait: std::time::Duration) -> bool {
    use fs2::FileExt;
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + wait;
    let mut gap = Duration::from_millis(1);
    loop {
        if file.try_lock_exclusive().is_ok() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(gap.min(deadline - now));
        gap = (gap * 2).min(Duration::from_millis(16));
    }
}

/// Open `path` to write (created with `mode` when missing) with `options`: never through a link,
/// never waiting on a FIFO, and only a regular file.
fn open_to_write(path: &Path, options: &mut OpenOptions, mode: u32) -> Result<File, StoreError> {
    check_appendable(path)?;
    let file = options
        .write(true)
        .create(true)
        .mode(mode)
        .custom_flags((no_wait() | OFlag::O_NOFOLLOW).bits())
        .open(path)
        .map_err(|e| StoreError::of_open("open", path, e, true))?;
    let meta = file
        .metadata()
        .map_err(|e| StoreError::io("inspect", path, e))?;
    check_kind(path, &meta.file_type())?;
    Ok(file)
}

fn refuse_symlink(path: &Path) -> Result<Option<fs::Metadata>, StoreError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(StoreError::Symlink(path.to_owned())),
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("inspect", path, e)),
    }
}

/// Replace `path` with `bytes` atomically. An existing file keeps its permission bits; a new one
/// gets `new_mode`. Refuses when `path` is a symlink.
pub fn write_atomic(path: &Path, bytes: &[u8], new_mode: u32) -> Result<(), StoreError> {
    replace(path, bytes, new_mode, true)
}

/// [`write_atomic`] without the fsyncs: for a record that means nothing after the machine
/// restarts (a process id), so that writing it costs no wait on the disk.
pub fn write_atomic_unsynced(path: &Path, bytes: &[u8], new_mode: u32) -> Result<(), StoreError> {
    replace(path, bytes, new_mode, false)
}

fn replace(path: &Path, bytes: &[u8], new_mode: u32, sync: bool) -> Result<(), StoreError> {
    let existing = refuse_symlink(path)?;
    let mode = existing.map_or(new_mode, |m| m.permissions().mode() & 0o7777);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .custom_flags(OFlag::O_NOFOLLOW.bits())
            .open(&temp)
            .map_err(|e| StoreError::io("create", &temp, e))?;
        // The mode given to open() is filtered by the umask; set it exactly.
        file.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(|e| StoreError::io("chmod", &temp, e))?;
        file.write_all(bytes)
            .map_err(|e| StoreError::io("write", &temp, e))?;
        if sync {
            file.sync_all()
                .map_err(|e| StoreError::io("fsync", &temp, e))?;
        }
        fs::rename(&temp, path).map_err(|e| StoreError::io("rename", path, e))?;
        if sync {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Create `path` holding `bytes` (mode `mode`) only if nothing is there: a complete, synced temp
/// file is hard-linked to the name, so a crash leaves no file or a whole one, and of several
/// callers exactly one creates it. `Ok(false)` when something was there already.
pub fn create_new_whole(path: &Path, bytes: &[u8], mode: u32) -> Result<bool, StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{name}.new-{}-{}",
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    ));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(OFlag::O_NOFOLLOW.bits())
            .open(&temp)
            .map_err(|e| StoreError::io("create", &temp, e))?;
        file.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(|e| StoreError::io("chmod", &temp, e))?;
        file.write_all(bytes)
            .map_err(|e| StoreError::io("write", &temp, e))?;
        file.sync_all()
            .map_err(|e| StoreError::io("fsync", &temp, e))
    })();
    let linked = written.and_then(|()| match fs::hard_link(&temp, path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(StoreError::io("link", path, e)),
    });
    let _ = fs::remove_file(&temp);
    let created = linked?;
    if created {
        sync_dir(dir)?;
    }
    Ok(created)
}

/// fsync a directory so a rename or a new entry in it survives a crash.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    OpenOptions::new()
        .read(true)
        .custom_flags((no_wait() | OFlag::O_DIRECTORY).bits())
        .open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync", dir, e))
}

/// Append `bytes` to `path` (created with `new_mode` when missing) and fsync it. Refuses a
/// symlinked leaf and anything that is not a regular file (a FIFO would otherwise block the open
/// until someone read it).
pub fn append(path: &Path, bytes: &[u8], new_mode: u32) -> Result<(), StoreError> {
    let mut file = open_to_write(path, OpenOptions::new().append(true), new_mode)?;
    file.write_all(bytes)
        .map_err(|e| StoreError::io("append to", path, e))?;
    file.sync_data()
        .map_err(|e| StoreError::io("fsync", path, e))
}

/// Remove a file; a missing one is fine. Refuses nothing else.
pub fn remove_if_present(path: &Path) -> Result<bool, StoreError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StoreError::io("remove", path, e)),
    }
}

pub fn create_dir_all(dir: &Path) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(|e| StoreError::io("create directory", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_atomic(&p, b"one", 0o600).unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
    }

    #[test]
    fn symlinks_are_refused_for_writes_and_appends() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(
            write_atomic(&link, b"x", 0o600),
            Err(StoreError::Symlink(_))
        ));
        assert!(matches!(
            append(&link, b"x", 0o600),
            Err(StoreError::Symlink(_))
        ));
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn read_limited_refuses_large_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        fs::write(&p, vec![b'a'; 11]).unwrap();
        assert!(matches!(
            read_limited(&p, 10),
            Err(StoreError::TooLarge { .. })
        ));
        assert_eq!(read_limited(&p, 11).unwrap().len(), 11);
    }

    /// `f` on another thread, failing the test (instead of hanging it) when it does not return
    /// within 10 seconds: a regression here is a read that waits for a FIFO's writer forever.
    fn at_once<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the call did not return at once")
    }

    fn fifo(path: &Path) {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    }

    fn not_regular(result: Result<impl std::fmt::Debug, StoreError>, path: &Path, kind: &str) {
        match result {
            Err(StoreError::NotRegular { path: p, kind: k }) => {
                assert_eq!((p.as_path(), k), (path, kind));
            }
            other => panic!("expected NotRegular for {}: {other:?}", path.display()),
        }
    }

    #[test]
    fn only_regular_files_are_read_and_a_fifo_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = dir.path().join("pipe");
        fifo(&pipe);
        let p = pipe.clone();
        not_regular(at_once(move || read_limited(&p, 10)), &pipe, "a FIFO");
        let p = pipe.clone();
        not_regular(at_once(move || read_no_follow(&p, 10)), &pipe, "a FIFO");
        // Through a link, to a person's file: still a FIFO, still refused at once.
        let link = dir.path().join("link-to-pipe");
        std::os::unix::fs::symlink(&pipe, &link).unwrap();
        let l = link.clone();
        not_regular(at_once(move || read_limited(&l, 10)), &link, "a FIFO");

        not_regular(read_limited(dir.path(), 10), dir.path(), "a directory");
        not_regular(
            read_limited(Path::new("/dev/null"), 10),
            Path::new("/dev/null"),
            "a character device",
        );
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        not_regular(read_limited(&socket, 10), &socket, "a socket");

        let missing = read_limited(&dir.path().join("missing"), 10).unwrap_err();
        assert!(missing.is_not_found(), "{missing:?}");
    }

    #[test]
    fn read_no_follow_refuses_a_link_that_read_limited_follows() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, "text").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(read_limited(&link, 10).unwrap(), b"text");
        assert!(matches!(read_no_follow(&link, 10), Err(StoreError::Symlink(p)) if p == link));
        assert_eq!(read_no_follow(&target, 10).unwrap(), b"text");
    }

    #[test]
    fn appends_and_lock_files_refuse_what_is_not_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = dir.path().join("events.jsonl");
        fifo(&pipe);
        let p = pipe.clone();
        not_regular(at_once(move || append(&p, b"x\n", 0o600)), &pipe, "a FIFO");
        not_regular(check_appendable(&pipe), &pipe, "a FIFO");
        let p = pipe.clone();
        not_regular(at_once(move || open_lock_file(&p, 0o600)), &pipe, "a FIFO");
        not_regular(check_appendable(dir.path()), dir.path(), "a directory");

        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).unwrap();
        assert!(matches!(
            check_appendable(&link),
            Err(StoreError::Symlink(_))
        ));
        assert!(matches!(
            open_lock_file(&link, 0o600),
            Err(StoreError::Symlink(_))
        ));
        assert!(
            !dir.path().join("elsewhere").exists(),
            "nothing was created through the link"
        );

        let log = dir.path().join("log");
        check_appendable(&log).unwrap();
        append(&log, b"one\n", 0o600).unwrap();
        check_appendable(&log).unwrap();
        append(&log, b"two\n", 0o600).unwrap();
        assert_eq!(fs::read(&log).unwrap(), b"one\ntwo\n");
        open_lock_file(&dir.path().join("lock"), 0o600).unwrap();
    }
}
