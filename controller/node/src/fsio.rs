//! The node's files over the engine's [`Disk`] seam: [`corum_engine::disk::files`] (atomic
//! replace through `NAME.tmp`, bounded reads) with its errors turned into [`StorageError`]s
//! naming the file. The write steps and what a crash at each leaves are documented there.
//!
//! Every node file goes through a `Disk`: `UringDisk` in a running node (no blocking call on
//! the reactor), `SimDisk` in the simulators and crash tests, `StdDisk` in the offline tools
//! and `corum format`.

use std::path::Path;

use corum_engine::disk::files::{self, ReadError};
use corum_engine::disk::Disk;

use crate::error::StorageError;

/// A disk error as a storage error. The disk seam reports IO errors only; anything else is
/// named with `path` and kept as its text.
pub(crate) fn storage_error(e: corum_engine::Error, path: &Path) -> StorageError {
    match e {
        corum_engine::Error::Io { op, path, source } => StorageError::Io { op, path, source },
        other => StorageError::Corrupt {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    }
}

/// Reads `path` whole, or `None` if it does not exist. Refuses files above `max_bytes` (as
/// [`StorageError::Corrupt`]): every file read here is small, so a big one is not ours.
pub async fn read_optional<D: Disk>(
    disk: &D,
    path: &Path,
    max_bytes: u64,
) -> Result<Option<Vec<u8>>, StorageError> {
    files::read_optional(disk, path, max_bytes)
        .await
        .map_err(|e| match e {
            ReadError::Disk(e) => storage_error(e, path),
            ReadError::TooLarge { size_bytes, .. } => StorageError::Corrupt {
                path: path.to_path_buf(),
                reason: format!("{size_bytes} bytes, larger than {max_bytes} bytes"),
            },
        })
}

/// Replaces `path` with `bytes` durably and atomically ([`files::write_atomic`]).
pub async fn write_atomic<D: Disk>(
    disk: &D,
    path: &Path,
    bytes: &[u8],
) -> Result<(), StorageError> {
    files::write_atomic(disk, path, bytes)
        .await
        .map_err(|e| storage_error(e, path))
}

#[cfg(test)]
mod tests {
    use corum_engine::disk::{SimDisk, SimFault};
    use futures_lite::future::block_on;

    use super::*;

    /// A write replaces the whole file and leaves no tmp file behind; a bounded read refuses a
    /// larger file; a missing file is `None`; an EIO is an IO error naming the file.
    #[test]
    fn replaces_whole_file() {
        block_on(async {
            let disk = SimDisk::new(1);
            let p = Path::new("/d/f");
            write_atomic(&disk, p, b"a long first version")
                .await
                .unwrap();
            write_atomic(&disk, p, b"short").await.unwrap();
            assert_eq!(disk.paths(), vec![p.to_path_buf()]);
            assert_eq!(read_optional(&disk, p, 5).await.unwrap().unwrap(), b"short");
            let e = read_optional(&disk, p, 4).await.unwrap_err();
            assert!(matches!(e, StorageError::Corrupt { .. }), "{e}");
            assert!(e.to_string().contains("larger than 4 bytes"), "{e}");
            assert!(read_optional(&disk, Path::new("/d/none"), 4)
                .await
                .unwrap()
                .is_none());
            disk.inject(SimFault::FailNextSync);
            let e = write_atomic(&disk, p, b"new").await.unwrap_err();
            assert!(
                matches!(&e, StorageError::Io { op: "fdatasync", path, .. } if path.ends_with("f.tmp")),
                "{e}"
            );
            assert_eq!(read_optional(&disk, p, 5).await.unwrap().unwrap(), b"short");
        });
    }
}
