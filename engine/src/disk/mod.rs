//! The `Disk` seam: the few file operations the log needs, as an async trait for a
//! single-threaded executor.
//!
//! glommio futures are `!Send`, and the log lives on one shard, so the traits use `async fn`
//! without `Send` bounds and handles are shared with `Rc`. Two implementations:
//!
//! - [`UringDisk`]: glommio `DmaFile`s — O_DIRECT, aligned DMA buffers, io_uring. Must run inside
//!   a glommio executor (see [`executor_builder`]).
//! - [`SimDisk`]: in memory, deterministic (seeded), with injectable faults. Its futures are
//!   always ready, so it runs under any executor, including `futures_lite::future::block_on`.
//! - [`StdDisk`]: blocking `std::fs` (page cache, no O_DIRECT), futures ready at once: for the
//!   offline tools outside glommio; [`StdDisk::read_only`] refuses every change.
//!
//! [`files`] writes and reads small files whole over any of them (atomic replace: temporary
//! file, sync, rename, directory sync), for the node's own files and snapshots.
//!
//! # Contract (what the log relies on)
//!
//! - `write_at` positions and lengths are multiples of [`crate::buf::BLOCK_BYTES`].
//! - Data written by `write_at` and size changes by `allocate`/`truncate` are durable once a
//!   later `sync` (fdatasync) on the same file returns `Ok`. Before that a crash may keep any
//!   prefix of the unsynced writes, the last one torn at any byte.
//! - Directory entries (create, `rename`, `remove`) are durable once `sync_dir` of the parent
//!   returns `Ok`.
//! - `write_durable_at` is `write_at` and `sync` as one operation (an O_DSYNC write: one
//!   request to the disk instead of two in a row): its data is durable when it returns `Ok`. It
//!   says nothing of earlier unsynced writes (a device with FUA persists just this write), so
//!   the log issues one only when the file has none (every round ends durable). Its `Err`
//!   means what a `sync` error means.
//! - Any `Err` from `sync` means the state of the unsynced data is unknown; the log treats it
//!   as fatal.
//! - When `open` returns, every write an earlier process issued to the file has landed: none
//!   can change the file afterwards (`UringDisk` waits for a killed process's in-flight
//!   requests, see [`uring`]; the other disks have none in flight).

pub mod files;
pub mod sim;
pub mod std_fs;
pub mod uring;

use std::path::{Path, PathBuf};

pub use sim::{SimDisk, SimFault};
pub use std_fs::StdDisk;
pub use uring::{executor_builder, UringDisk};

use crate::buf::AlignedBuf;
use crate::error::Result;

/// Whether `open` may create the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Open an existing file; `NotFound` otherwise.
    Existing,
    /// Open, creating an empty file if missing.
    Create,
}

/// A file system: the directory-level operations.
#[allow(
    async_fn_in_trait,
    reason = "single-threaded executors: futures are !Send by design"
)]
pub trait Disk: Clone + 'static {
    type File: DiskFile;

    async fn open(&self, path: &Path, mode: OpenMode) -> Result<Self::File>;
    async fn remove(&self, path: &Path) -> Result<()>;
    async fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Names (not paths) of the regular files in `dir`, sorted.
    async fn list(&self, dir: &Path) -> Result<Vec<String>>;
    async fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Make the directory's entries (creates, renames, removes) durable.
    async fn sync_dir(&self, dir: &Path) -> Result<()>;
}

/// An open file.
#[allow(
    async_fn_in_trait,
    reason = "single-threaded executors: futures are !Send by design"
)]
pub trait DiskFile: 'static {
    fn path(&self) -> &Path;
    async fn size(&self) -> Result<u64>;
    /// Read up to `len` bytes at `pos` (fewer at end of file) into a fresh aligned buffer.
    async fn read_at(&self, pos: u64, len: usize) -> Result<AlignedBuf>;
    /// Write all of `data` at `pos`; both block-aligned.
    async fn write_at(&self, pos: u64, data: &[u8]) -> Result<()>;
    /// Write all of `data` at `pos` (block-aligned) and make it durable before returning (see
    /// the contract above). The file must have no unsynced writes or size changes.
    async fn write_durable_at(&self, pos: u64, data: &[u8]) -> Result<()>;
    /// fdatasync: make written data and size changes durable.
    async fn sync(&self) -> Result<()>;
    /// Grow the file to at least `len` bytes of allocated, zero-reading space.
    async fn allocate(&self, len: u64) -> Result<()>;
    /// Set the file size to `len`, dropping everything after it.
    async fn truncate(&self, len: u64) -> Result<()>;
    async fn close(self) -> Result<()>;
}

pub(crate) fn io_err(op: &'static str, path: &Path, source: std::io::Error) -> crate::Error {
    crate::Error::Io {
        op,
        path: PathBuf::from(path),
        source,
    }
}
