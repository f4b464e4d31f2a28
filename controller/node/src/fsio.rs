//! Small, durable file replacement for the node's own files (`meta.properties`, `quorum-state`,
//! `bootstrap.checkpoint`), which are rewritten whole and must never be seen half-written.
//!
//! [`write_atomic`] does, in order:
//!
//! | step                                   | a crash here leaves                                  |
//! |----------------------------------------|------------------------------------------------------|
//! | write `NAME.tmp` (create, truncate)    | the old `NAME`, and a partial tmp file readers ignore |
//! | fsync `NAME.tmp`                       | the old `NAME`                                        |
//! | read `NAME.tmp` back, compare          | the old `NAME` (a short or torn tmp is never renamed)  |
//! | rename `NAME.tmp` -> `NAME`            | the old or the new `NAME`, both complete              |
//! | fsync the directory                    | the new `NAME`, durably                               |
//!
//! Readers only ever open `NAME`; a stale `NAME.tmp` is overwritten by the next write.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::StorageError;

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StorageError + 'a {
    move |source| StorageError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// The temporary name `path` is written under before the rename.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Replaces `path` with `bytes` durably and atomically (see the module doc).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    write_atomic_with(path, bytes, &|_| {})
}

/// [`write_atomic`] with a hook run on the tmp file's path after it is synced and before it is
/// verified and renamed: crash-safety tests use it to tear the tmp file.
pub(crate) fn write_atomic_with(
    path: &Path,
    bytes: &[u8],
    before_verify: &dyn Fn(&Path),
) -> Result<(), StorageError> {
    let tmp = tmp_path(path);
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io("create", &tmp))?;
        f.write_all(bytes).map_err(io("write", &tmp))?;
        f.sync_all().map_err(io("fsync", &tmp))?;
    }
    before_verify(&tmp);
    let written = fs::read(&tmp).map_err(io("read back", &tmp))?;
    if written != bytes {
        return Err(StorageError::Corrupt {
            path: tmp,
            reason: format!(
                "read back {} bytes that differ from the {} written; {} left unchanged",
                written.len(),
                bytes.len(),
                path.display()
            ),
        });
    }
    fs::rename(&tmp, path).map_err(io("rename", &tmp))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Fsyncs a directory so that a rename or create in it is durable.
pub fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync directory", dir))
}

/// Reads `path` whole, or `None` if it does not exist. Refuses files above `max_bytes`: every
/// file read here is small, so a big one is not ours.
pub fn read_optional(path: &Path, max_bytes: u64) -> Result<Option<Vec<u8>>, StorageError> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("open", path)(e)),
    };
    let mut bytes = Vec::new();
    f.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(io("read", path))?;
    if bytes.len() as u64 > max_bytes {
        return Err(StorageError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("larger than {max_bytes} bytes"),
        });
    }
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write replaces the whole file and leaves no tmp file behind.
    #[test]
    fn replaces_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_atomic(&p, b"a long first version").unwrap();
        write_atomic(&p, b"short").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"short");
        assert!(!tmp_path(&p).exists());
        assert_eq!(read_optional(&p, 5).unwrap().unwrap(), b"short");
        assert!(read_optional(&p, 4).is_err());
        assert!(read_optional(&dir.path().join("none"), 4)
            .unwrap()
            .is_none());
    }

    /// A tmp file torn after its sync (short write, bad sector) is never renamed over the good
    /// file: the write fails and the old contents stay.
    #[test]
    fn torn_tmp_is_not_renamed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_atomic(&p, b"good contents").unwrap();
        let err = write_atomic_with(&p, b"new contents", &|tmp| {
            let f = OpenOptions::new().write(true).open(tmp).unwrap();
            f.set_len(4).unwrap();
        })
        .unwrap_err();
        assert!(matches!(err, StorageError::Corrupt { .. }), "{err}");
        assert_eq!(fs::read(&p).unwrap(), b"good contents");
        let err = write_atomic_with(&p, b"new contents", &|tmp| {
            fs::write(tmp, b"new contentX").unwrap();
        })
        .unwrap_err();
        assert!(err.to_string().contains("left unchanged"), "{err}");
        assert_eq!(fs::read(&p).unwrap(), b"good contents");
    }
}
