//! The data directory's lock: one node per directory.
//!
//! Two processes on one metadata log would overwrite each other's frames and quorum state.
//! Like Kafka (a `.lock` file in every log directory), a node holds an exclusive `flock` on
//! `<metadata.log.dir>/.lock` from the moment its directory is checked until it exits; a second
//! node (or one started while the first is still stopping) is refused with the holder's pid.
//! The kernel drops the lock with the process, however it ends, so a crash leaves no stale lock
//! to clean up: the file's presence means nothing, only the lock does.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::StorageError;

/// The lock file's name inside the data directory (Kafka's).
pub const LOCK_FILE_NAME: &str = ".lock";

/// A held directory lock; dropping it gives the lock up.
#[derive(Debug)]
pub struct DataDirLock {
    /// Holds the lock: it goes when this descriptor closes.
    _file: File,
}

impl DataDirLock {
    /// Take the lock of `dir` (which must exist), or say which process holds it.
    pub fn acquire(dir: &Path) -> Result<DataDirLock, StorageError> {
        let path = dir.join(LOCK_FILE_NAME);
        let io = |op, source| StorageError::Io {
            op,
            path: path.clone(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io("open", e))?;
        // SAFETY: flock on a descriptor `file` owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io("flock", e));
            }
            let mut text = String::new();
            let holder = file
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse::<u32>().ok());
            return Err(StorageError::DirectoryInUse {
                dir: dir.to_path_buf(),
                lock: path,
                holder,
            });
        }
        // Who holds it, for the message a second node prints (not needed for the lock).
        file.set_len(0).map_err(|e| io("truncate", e))?;
        file.rewind().map_err(|e| io("seek", e))?;
        writeln!(file, "{}", std::process::id()).map_err(|e| io("write", e))?;
        Ok(DataDirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_with_the_holder_and_taken_once_the_first_goes() {
        // Proves one holder at a time (two descriptions in one process conflict like two
        // processes), the refusal names this process, and dropping the lock frees it.
        let tmp = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(tmp.path()).unwrap();
        assert!(tmp.path().join(LOCK_FILE_NAME).exists());
        match DataDirLock::acquire(tmp.path()) {
            Err(StorageError::DirectoryInUse { dir, lock, holder }) => {
                assert_eq!(dir, tmp.path());
                assert_eq!(lock, tmp.path().join(LOCK_FILE_NAME));
                assert_eq!(holder, Some(std::process::id()));
            }
            other => panic!("expected DirectoryInUse, got {other:?}"),
        }
        drop(first);
        let again = DataDirLock::acquire(tmp.path()).unwrap();
        drop(again);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let err = DataDirLock::acquire(&tmp.path().join("absent")).unwrap_err();
        assert!(err.to_string().contains(".lock"), "{err}");
    }
}
