//! Writing files so that a crash never leaves half of one: a temp file in the same directory,
//! fsync, rename over the target, fsync the directory. Appends go through `O_APPEND` and refuse a
//! symlinked leaf, so a log can never be redirected into some other file.
//!
//! This module never decides what to write, only how.

use nix::fcntl::OFlag;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("`{0}` is a symbolic link; iced does not write through links")]
    Symlink(PathBuf),
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
        file.sync_all()
            .map_err(|e| StoreError::io("fsync", &temp, e))?;
        fs::rename(&temp, path).map_err(|e| StoreError::io("rename", path, e))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// fsync a directory so a rename or a new entry in it survives a crash.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync", dir, e))
}

/// Append `bytes` to `path` (created with `new_mode` when missing) and fsync it. Refuses a
/// symlinked leaf.
pub fn append(path: &Path, bytes: &[u8], new_mode: u32) -> Result<(), StoreError> {
    refuse_symlink(path)?;
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(new_mode)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == nix::errno::Errno::ELOOP as i32 => {
                StoreError::Symlink(path.to_owned())
            }
            _ => StoreError::io("open", path, e),
        })?;
    file.write_all(bytes)
        .map_err(|e| StoreError::io("append to", path, e))?;
    file.sync_data()
        .map_err(|e| StoreError::io("fsync", path, e))
}

/// Read a whole file, refusing one larger than `limit` bytes without reading it all.
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io("read", path, e))?;
    // Sized from the file's length: a small file is read in one call and holds no spare memory.
    let hint = file.metadata().map_or(0, |m| m.len().min(limit));
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
}
