//! Small files rewritten whole, over any [`Disk`]: a node's `quorum-state`, `meta.properties`,
//! `bootstrap.checkpoint` and snapshot files go through here, so a simulated disk's crashes,
//! torn writes and EIO reach them as they reach the log.
//!
//! [`write_atomic`] replaces a file so that a reader, after any crash, finds the old or the new
//! contents whole, never a mix. In order ([`WriteStep`]):
//!
//! | step                                                 | a crash here leaves                                   |
//! |------------------------------------------------------|-------------------------------------------------------|
//! | `Create`: open `TMP` (created if missing)            | the old file (and maybe an empty or stale `TMP`)       |
//! | `Write`: the bytes, the last block padded with zeros, then `truncate` to the exact length | the old file, and a partial `TMP` readers never open |
//! | `Sync`: fdatasync `TMP`                              | the old file, and a complete `TMP`                     |
//! | `Rename`: `TMP` -> the file                          | the old or the new file, both complete (rename is atomic, the bytes are durable) |
//! | `SyncDir`: fsync the parent directory                | the new file, durably                                  |
//!
//! Writes follow the [`Disk`] contract: whole blocks ([`crate::buf::BLOCK_BYTES`]) at block positions, at
//! most [`WRITE_CHUNK_BYTES`] per `write_at` (so a large file is not copied into one buffer),
//! the zeros after the data dropped by the `truncate` before the sync. `TMP` is `NAME.tmp`
//! ([`tmp_path`]) unless the caller names another ([`write_atomic_via`]: the snapshot store's
//! `NAME.part`). A stale `TMP` from an interrupted write is overwritten by the next one.
//!
//! [`read_optional`] and [`read_bounded`] read a file whole after checking its size against a
//! limit (a file above it is not one of ours, and its size must not size an allocation).

use std::path::{Path, PathBuf};

use super::{Disk, DiskFile, OpenMode};
use crate::buf::{align_up_block, AlignedBuf};
use crate::error::{Error, Result};

/// Most bytes handed to one `write_at` (and read by one `read_at`).
pub const WRITE_CHUNK_BYTES: usize = 1 << 20;

/// A step of [`write_atomic_via`], in order. Crash tests stop a write before each one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteStep {
    Create,
    Write,
    Sync,
    Rename,
    SyncDir,
}

impl WriteStep {
    /// Every step, in the order a write takes them.
    pub const ALL: [WriteStep; 5] = [
        WriteStep::Create,
        WriteStep::Write,
        WriteStep::Sync,
        WriteStep::Rename,
        WriteStep::SyncDir,
    ];
}

/// Why a bounded read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The disk refused an operation (open, stat, read).
    #[error(transparent)]
    Disk(#[from] Error),
    /// The file is larger than the caller's limit: nothing of it was read.
    #[error("{}: {size_bytes} bytes, above the limit of {max_bytes}", path.display())]
    TooLarge {
        path: PathBuf,
        size_bytes: u64,
        max_bytes: u64,
    },
}

/// `NAME.tmp`: where [`write_atomic`] writes `path` before the rename.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// The directory whose entries hold `path`.
fn parent_dir(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

/// Replaces `path` with `bytes` durably and atomically (see the module doc).
pub async fn write_atomic<D: Disk>(disk: &D, path: &Path, bytes: &[u8]) -> Result<()> {
    let done = write_atomic_via(disk, path, &tmp_path(path), &[bytes], None).await?;
    debug_assert!(done, "a write without a stop point completes");
    Ok(())
}

/// Replaces `path` with the concatenation of `parts` through the temporary file `tmp` (in the
/// same directory). With `stop_before`, returns `Ok(false)` just before that step, as a process
/// killed there would leave things (crash tests then crash the disk); otherwise `Ok(true)` once
/// the new file is durable. Any error leaves `path` as it was, or (an error of the final
/// `SyncDir`) replaced but maybe not durably.
pub async fn write_atomic_via<D: Disk>(
    disk: &D,
    path: &Path,
    tmp: &Path,
    parts: &[&[u8]],
    stop_before: Option<WriteStep>,
) -> Result<bool> {
    assert_eq!(
        parent_dir(path),
        parent_dir(tmp),
        "the temporary file is in the same directory (the rename must not cross it)"
    );
    let stop = |step| stop_before == Some(step);
    if stop(WriteStep::Create) {
        return Ok(false);
    }
    let file = disk.open(tmp, OpenMode::Create).await?;
    let written = write_and_sync(&file, parts, &stop).await;
    let closed = file.close().await;
    if !written? {
        return Ok(false);
    }
    closed?;
    if stop(WriteStep::Rename) {
        return Ok(false);
    }
    disk.rename(tmp, path).await?;
    if stop(WriteStep::SyncDir) {
        return Ok(false);
    }
    disk.sync_dir(parent_dir(path)).await?;
    Ok(true)
}

/// The `Write` and `Sync` steps; `Ok(false)` where `stop` says so.
async fn write_and_sync<F: DiskFile>(
    file: &F,
    parts: &[&[u8]],
    stop: &dyn Fn(WriteStep) -> bool,
) -> Result<bool> {
    if stop(WriteStep::Write) {
        return Ok(false);
    }
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut chunk =
        AlignedBuf::with_capacity(WRITE_CHUNK_BYTES.min(align_up_block(len as u64) as usize));
    let mut pos = 0u64;
    for part in parts {
        let mut rest = *part;
        while !rest.is_empty() {
            let take = rest.len().min(WRITE_CHUNK_BYTES - chunk.len());
            chunk.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if chunk.len() == WRITE_CHUNK_BYTES {
                file.write_at(pos, &chunk).await?;
                pos += chunk.len() as u64;
                chunk.clear();
            }
        }
    }
    if !chunk.is_empty() {
        // The last block padded with zeros (writes are whole blocks); the truncate drops them.
        let padded = align_up_block(chunk.len() as u64) as usize;
        chunk.resize(padded, 0);
        file.write_at(pos, &chunk).await?;
    }
    // Also drops whatever a longer stale temporary file held after the new bytes.
    file.truncate(len as u64).await?;
    if stop(WriteStep::Sync) {
        return Ok(false);
    }
    file.sync().await?;
    Ok(true)
}

/// Reads `path` whole, or `None` if it does not exist. A file above `max_bytes` is
/// [`ReadError::TooLarge`], refused from its size before anything is read.
pub async fn read_optional<D: Disk>(
    disk: &D,
    path: &Path,
    max_bytes: u64,
) -> Result<Option<Vec<u8>>, ReadError> {
    match read_bounded(disk, path, max_bytes).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(ReadError::Disk(e)) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads `path` whole (which must exist); a file above `max_bytes` is
/// [`ReadError::TooLarge`], refused from its size before anything is read.
pub async fn read_bounded<D: Disk>(
    disk: &D,
    path: &Path,
    max_bytes: u64,
) -> Result<Vec<u8>, ReadError> {
    let file = disk.open(path, OpenMode::Existing).await?;
    let read = read_file(&file, max_bytes).await;
    let closed = file.close().await;
    let bytes = read?;
    closed?;
    Ok(bytes)
}

async fn read_file<F: DiskFile>(file: &F, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let size_bytes = file.size().await?;
    let too_large = || ReadError::TooLarge {
        path: file.path().to_path_buf(),
        size_bytes,
        max_bytes,
    };
    if size_bytes > max_bytes {
        return Err(too_large());
    }
    let size = usize::try_from(size_bytes).map_err(|_| too_large())?;
    let mut bytes = Vec::with_capacity(size);
    // Up to the size seen above: a file that grows meanwhile is not read past it (nor past the
    // limit); one that shrinks ends the read early.
    while bytes.len() < size {
        let want = (size - bytes.len()).min(WRITE_CHUNK_BYTES);
        let got = file.read_at(bytes.len() as u64, want).await?;
        if got.is_empty() {
            break;
        }
        bytes.extend_from_slice(&got);
    }
    Ok(bytes)
}

/// Whether `e` says a file or directory does not exist.
pub fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use futures_lite::future::block_on;

    use super::*;
    use crate::buf::BLOCK_BYTES;
    use crate::disk::{SimDisk, SimFault, StdDisk};

    const DIR: &str = "/d";

    fn path() -> PathBuf {
        Path::new(DIR).join("f")
    }

    /// Contents whose length and bytes derive from `n`: a mix of two versions shows.
    fn version(n: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| n.wrapping_mul(31).wrapping_add(i as u8))
            .collect()
    }

    /// What a reader finds at `path()` after the crash.
    fn read_back(disk: &SimDisk) -> Option<Vec<u8>> {
        block_on(read_optional(disk, &path(), 64 << 20)).unwrap()
    }

    /// Sizes around the block and chunk boundaries.
    const SIZES: [usize; 7] = [
        0,
        1,
        44,
        BLOCK_BYTES,
        BLOCK_BYTES + 1,
        WRITE_CHUNK_BYTES,
        WRITE_CHUNK_BYTES + 3 * BLOCK_BYTES + 5,
    ];

    /// Written files read back with their exact length (the block padding is cut), a rewrite
    /// with shorter contents leaves no stale bytes, and no temporary file stays.
    #[test]
    fn writes_read_back_exactly() {
        block_on(async {
            let disk = SimDisk::new(1);
            for len in SIZES.into_iter().chain(SIZES.into_iter().rev()) {
                let v = version(len as u8, len);
                write_atomic(&disk, &path(), &v).await.unwrap();
                assert_eq!(read_back(&disk).unwrap(), v, "{len}");
                disk.crash();
                assert_eq!(read_back(&disk).unwrap(), v, "{len} after a crash");
            }
            assert_eq!(disk.paths(), vec![path()]);
            // Parts are concatenated.
            let parts: [&[u8]; 3] = [b"head", &[7; 5000], b"tail"];
            write_atomic_via(&disk, &path(), &tmp_path(&path()), &parts, None)
                .await
                .unwrap();
            assert_eq!(read_back(&disk).unwrap(), parts.concat());
            assert_eq!(tmp_path(&path()), Path::new("/d/f.tmp"));
        });
    }

    /// A write stopped before any step, then a power loss (all unsynced state lost, or a torn
    /// prefix of it kept), leaves the old file or the new one, each whole, never a mix; a
    /// stop before the final directory sync may leave either; a completed write is the new one.
    #[test]
    fn a_crash_at_every_step_leaves_old_or_new() {
        for seed in 0..40u64 {
            for &(old_len, new_len) in &[
                (44, 44),
                (10, 9000),
                (9000, 10),
                (5000, WRITE_CHUNK_BYTES + 7),
            ] {
                for stop in WriteStep::ALL.map(Some).into_iter().chain([None]) {
                    for torn in [false, true] {
                        block_on(async {
                            let disk = SimDisk::new(seed);
                            let old = version(1, old_len);
                            let new = version(2, new_len);
                            write_atomic(&disk, &path(), &old).await.unwrap();
                            // A stale temporary file from an earlier interrupted write.
                            if seed % 2 == 1 {
                                write_atomic_via(
                                    &disk,
                                    &path(),
                                    &tmp_path(&path()),
                                    &[&version(3, 7000)],
                                    Some(WriteStep::Rename),
                                )
                                .await
                                .unwrap();
                            }
                            let done =
                                write_atomic_via(&disk, &path(), &tmp_path(&path()), &[&new], stop)
                                    .await
                                    .unwrap();
                            assert_eq!(done, stop.is_none());
                            if torn {
                                disk.crash_torn();
                            } else {
                                disk.crash();
                            }
                            let found = read_back(&disk).expect("the file never vanishes");
                            let what = format!(
                                "seed {seed} {old_len}->{new_len} stop {stop:?} torn {torn}"
                            );
                            match stop {
                                None => assert_eq!(found, new, "{what}"),
                                Some(WriteStep::SyncDir) => {
                                    assert!(found == old || found == new, "{what}")
                                }
                                Some(_) => assert_eq!(found, old, "{what}"),
                            }
                            // The next write succeeds over whatever the crash left.
                            write_atomic(&disk, &path(), &new).await.unwrap();
                            assert_eq!(read_back(&disk).unwrap(), new, "{what}");
                        });
                    }
                }
            }
        }
    }

    /// EIO on the write or on the sync is returned, and the old file stays whole, before and
    /// after a crash.
    #[test]
    fn eio_is_reported_and_the_old_file_stays() {
        for fault in [SimFault::FailNextWrite, SimFault::FailNextSync] {
            block_on(async {
                let disk = SimDisk::new(7);
                let old = version(1, 100);
                write_atomic(&disk, &path(), &old).await.unwrap();
                disk.inject(fault);
                let e = write_atomic(&disk, &path(), &version(2, 6000))
                    .await
                    .unwrap_err();
                assert!(e.to_string().contains("simulated EIO"), "{fault:?}: {e}");
                assert_eq!(read_back(&disk).unwrap(), old, "{fault:?}");
                disk.crash_torn();
                assert_eq!(read_back(&disk).unwrap(), old, "{fault:?} after a crash");
            });
        }
    }

    /// A bounded read refuses a file above the limit from its size, reads one at the limit,
    /// and a missing file is `None` (any other error is returned).
    #[test]
    fn bounded_reads() {
        block_on(async {
            let disk = SimDisk::new(1);
            assert!(read_optional(&disk, &path(), 10).await.unwrap().is_none());
            assert!(matches!(
                read_bounded(&disk, &path(), 10).await,
                Err(ReadError::Disk(e)) if is_not_found(&e)
            ));
            write_atomic(&disk, &path(), &version(1, 11)).await.unwrap();
            let reads = disk.read_count();
            let e = read_optional(&disk, &path(), 10).await.unwrap_err();
            assert!(
                matches!(
                    e,
                    ReadError::TooLarge {
                        size_bytes: 11,
                        max_bytes: 10,
                        ..
                    }
                ),
                "{e}"
            );
            assert_eq!(
                disk.read_count(),
                reads,
                "nothing read from a file above the limit"
            );
            assert_eq!(
                read_optional(&disk, &path(), 11)
                    .await
                    .unwrap()
                    .unwrap()
                    .len(),
                11
            );
        });
    }

    /// The same helpers over the real file system (`StdDisk`): exact lengths, no temporary file
    /// left, missing files, the limit.
    #[test]
    fn over_std_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f");
        block_on(async {
            let disk = StdDisk::new();
            assert!(read_optional(&disk, &p, 100).await.unwrap().is_none());
            for len in SIZES {
                let v = version(len as u8, len);
                write_atomic(&disk, &p, &v).await.unwrap();
                assert_eq!(std::fs::read(&p).unwrap(), v);
                assert_eq!(
                    read_optional(&disk, &p, 64 << 20).await.unwrap().unwrap(),
                    v
                );
            }
            assert!(!tmp_path(&p).exists());
            assert!(matches!(
                read_optional(&disk, &p, 10).await,
                Err(ReadError::TooLarge { .. })
            ));
        });
    }
}
