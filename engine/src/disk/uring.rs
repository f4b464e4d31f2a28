//! `UringDisk`: glommio DMA files (O_DIRECT, aligned buffers, io_uring).
//!
//! `write_durable_at` goes through a second handle of the file opened with O_DSYNC (on first
//! use): the write returns once its data is durable, one io_uring request where `write_at` +
//! `sync` are two in a row (and io_uring runs every fdatasync on a kernel worker thread, a
//! thread hand-off each way). The two handles share the inode and both bypass the page cache.
//!
//! Every write copies the caller's bytes into glommio `DmaBuffer`s (registered memory when the
//! executor's `io_memory` arena has room, the heap otherwise), [`WRITE_PIECE_BYTES`] at a time
//! with [`WRITE_LANES`] writes in flight; each lane reuses its buffer for all its pieces. The copy
//! keeps the trait free of glommio types; it is one memory pass per byte written.
//!
//! Why the copy stays: glommio 0.9 allocates every `DmaBuffer` itself (no way to wrap the log's
//! tail buffers), writes a `DmaBuffer` whole, and shrinks one only destructively. Building the
//! tail in a `DmaBuffer` would therefore need a fresh DMA allocation per round (fresh pages, a
//! fault per 4 KiB, which costs a bulk writer more than the copy) or one write per round
//! instead of pieces in lanes. A profile of `corum bench log --no-wait` (1 MiB batches) spends
//! about 28% of its CPU in memmove (the append's copy and this one) and 10% in crc32c.
//!
//! Measured, and dropped: a tail built of whole-`DmaBuffer` pieces written without the copy.
//! Outside the registered arena (which the 8 MiB locked-memory limit keeps small) each write
//! then pins its pages (`get_user_pages`, 12% of the CPU) and the bulk figure fell from
//! 2.5-3.0 to 2.2 GB/s; with a 48 MiB registered arena it matched the copy (3.2 GB/s both).
//! The copy into a lane's registered buffer costs about what pinning would.
//!
//! # Writes that outlive their process
//!
//! A process killed with io_uring requests in flight does not take them with it: the kernel
//! tears its rings down after the process is gone, and a write already issued to the device
//! still lands, milliseconds after `waitpid` returned (measured here: in 8 of 30 kills of a
//! writer with 8 MiB in flight, its file was still referenced 5-12 ms after the parent reaped
//! it). A restarted node that reads and writes the file in that window sees the dead process's
//! writes land over its own: after a later crash, recovery found a stale frame behind the new
//! tail, and a late write could as well overwrite a batch the new process had made durable.
//!
//! So every handle `UringDisk` writes through holds a shared `flock` on its open file
//! description, which lives as long as any request of the dead process still references it,
//! and `open` first waits until it can take the lock exclusively, that is, until no earlier
//! process's request is left (see [`wait_for_earlier_writers`]). Within one process the wait
//! happens once per file (a handle this process already holds shares the lock); a live second
//! process on the same directory is refused earlier by the node's data-directory lock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::io::{DmaFile, OpenOptions};
use glommio::LocalExecutorBuilder;

use super::{io_err, Disk, DiskFile, OpenMode};
use crate::buf::{AlignedBuf, BLOCK_BYTES};
use crate::error::Result;

/// io_uring registered buffer memory per executor. Small on purpose: glommio locks it, and the
/// default locked-memory limit is 8 MiB. Larger transfers fall back to heap buffers.
pub const IO_MEMORY_BYTES: usize = 4 << 20;

/// A glommio executor builder sized for the engine under the default 8 MiB locked-memory limit.
pub fn executor_builder(name: &str) -> LocalExecutorBuilder {
    LocalExecutorBuilder::default()
        .name(name)
        .io_memory(IO_MEMORY_BYTES)
}

/// The real disk. Must be used from inside a glommio executor.
#[derive(Clone, Copy, Debug, Default)]
pub struct UringDisk;

/// An open O_DIRECT file.
pub struct UringFile {
    file: Rc<DmaFile>,
    /// A second handle of the same file opened with O_DSYNC, for `write_durable_at` (opened on
    /// first use: most files never need it).
    dsync: std::cell::RefCell<Option<Rc<DmaFile>>>,
    path: PathBuf,
    /// (device, inode), counted in [`OPEN_HERE`] while this is open.
    inode: (u64, u64),
}

thread_local! {
    /// Devices (st_dev) whose io_uring poll support glommio has probed on this thread.
    static PROBED_DEVICES: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// glommio decides whether a device supports polled IO by reading the first block of the first
/// file it opens there, and caches the answer per thread. If that file is empty the read
/// succeeds trivially, the device is wrongly taken as pollable, and every later read fails with
/// EOPNOTSUPP. So before opening anything on a device, open a one-block file on it once.
async fn ensure_poll_probed(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let dev = std::fs::metadata(dir)
        .map_err(|e| io_err("stat", dir, e))?
        .dev();
    if PROBED_DEVICES.with(|p| p.borrow().contains(&dev)) {
        return Ok(());
    }
    let probe = dir.join(format!(".corum-poll-probe-{}", std::process::id()));
    if let Err(e) = std::fs::write(&probe, vec![0u8; BLOCK_BYTES]) {
        // On a full disk the file may exist, empty: it must not stay behind.
        let _ = std::fs::remove_file(&probe);
        return Err(io_err("write", &probe, e));
    }
    let opened = OpenOptions::new().read(true).dma_open(&probe).await;
    let _ = std::fs::remove_file(&probe);
    let f = opened.map_err(|e| io_err("open", &probe, os_error(e)))?;
    f.close()
        .await
        .map_err(|e| io_err("close", &probe, os_error(e)))?;
    PROBED_DEVICES.with(|p| p.borrow_mut().push(dev));
    Ok(())
}

/// How long `open` waits for an earlier process's writes to a file to land before it fails.
pub const EARLIER_WRITERS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Files (device, inode) whose earlier writers this process has waited for, with the number
/// of its `UringFile`s open on each: while one is open every lock on the inode is this
/// process's own, so a new handle only joins the shared lock. The entry goes with the last one.
static OPEN_HERE: std::sync::Mutex<BTreeMap<(u64, u64), usize>> =
    std::sync::Mutex::new(BTreeMap::new());

/// `flock(op | LOCK_NB)` on `file`'s description: whether it was taken.
fn try_flock(file: &DmaFile, op: libc::c_int, path: &Path) -> Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor `file` holds open.
    if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(io_err("flock", path, e)),
    }
}

/// Wait until no open file description of another process holds a `flock` on `file`'s inode
/// (the handles of a killed process whose io_uring requests are still in flight), then hold a
/// shared one on `file`'s description, so that the next process waits for this one's requests.
/// Fails after [`EARLIER_WRITERS_TIMEOUT`] with an error naming the file. Returns the inode
/// (device, inode number, as glommio read them at open), counted in [`OPEN_HERE`].
async fn wait_for_earlier_writers(file: &DmaFile, path: &Path) -> Result<(u64, u64)> {
    let inode = (
        u64::from(file.dev_major()) << 32 | u64::from(file.dev_minor()),
        file.inode(),
    );
    let started = std::time::Instant::now();
    let mut warned = false;
    let mut slept = false;
    loop {
        {
            let mut open_here = OPEN_HERE.lock().expect("not poisoned");
            // With the inode open here, every lock on it is this process's own (shared). Else
            // converting never waits: nothing else holds a lock once ours is exclusive.
            let done = if open_here.contains_key(&inode) {
                try_flock(file, libc::LOCK_SH, path)?
            } else {
                try_flock(file, libc::LOCK_EX, path)? && try_flock(file, libc::LOCK_SH, path)?
            };
            if done {
                *open_here.entry(inode).or_insert(0) += 1;
                break;
            }
        }
        let elapsed = started.elapsed();
        if elapsed >= EARLIER_WRITERS_TIMEOUT {
            return Err(io_err(
                "flock",
                path,
                std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    format!(
                        "another process has held the file open for writing for {} s: a second \
                         process on the same directory, or the unfinished writes of a killed one",
                        elapsed.as_secs()
                    ),
                ),
            ));
        }
        if !warned && elapsed >= std::time::Duration::from_secs(1) {
            warned = true;
            tracing::warn!(file = %path.display(), "waiting for another process's writes to the file to finish");
        }
        glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        slept = true;
    }
    if slept {
        let waited_ms = started.elapsed().as_millis() as u64;
        tracing::info!(file = %path.display(), waited_ms, "waited for the writes of an earlier process to the file to land");
    }
    Ok(inode)
}

impl Drop for UringFile {
    /// Give the lock up now, while the descriptors are surely open (glommio closes a dropped
    /// file on a later turn of its reactor, or never once the executor is gone) and before the
    /// count says the inode is no longer open here.
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        let mut open_here = OPEN_HERE.lock().expect("not poisoned");
        for f in std::iter::once(&self.file).chain(self.dsync.borrow().as_ref()) {
            // SAFETY: flock on a descriptor `self` still holds open. Unlocking cannot fail on
            // a valid descriptor; if it did, the lock would go with the descriptor.
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) };
        }
        if let Some(n) = open_here.get_mut(&self.inode) {
            *n -= 1;
            if *n == 0 {
                open_here.remove(&self.inode);
            }
        }
    }
}

impl Disk for UringDisk {
    type File = UringFile;

    async fn open(&self, path: &Path, mode: OpenMode) -> Result<UringFile> {
        ensure_poll_probed(path).await?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(mode == OpenMode::Create)
            .dma_open(path)
            .await
            .map_err(|e| io_err("open", path, os_error(e)))?;
        let inode = wait_for_earlier_writers(&file, path).await?;
        Ok(UringFile {
            inode,
            file: Rc::new(file),
            dsync: std::cell::RefCell::new(None),
            path: path.to_path_buf(),
        })
    }

    async fn remove(&self, path: &Path) -> Result<()> {
        glommio::io::remove(path)
            .await
            .map_err(|e| io_err("remove", path, os_error(e)))
    }

    async fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        glommio::io::rename(from, to)
            .await
            .map_err(|e| io_err("rename", from, os_error(e)))
    }

    async fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io_err("list", dir, e))? {
            let entry = entry.map_err(|e| io_err("list", dir, e))?;
            let is_file = entry
                .file_type()
                .map_err(|e| io_err("stat", &entry.path(), e))?
                .is_file();
            if is_file {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_string());
                }
            }
        }
        names.sort();
        Ok(names)
    }

    async fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| io_err("create_dir_all", dir, e))
    }

    async fn sync_dir(&self, dir: &Path) -> Result<()> {
        // `""` (the parent of a bare file name) is the current directory.
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let d = glommio::io::Directory::open(dir)
            .await
            .map_err(|e| io_err("open dir", dir, os_error(e)))?;
        d.sync()
            .await
            .map_err(|e| io_err("sync dir", dir, os_error(e)))?;
        d.close()
            .await
            .map_err(|e| io_err("close dir", dir, os_error(e)))
    }
}

/// Size of one O_DIRECT write request. [`crate::devbench`] measures the device with the same
/// request size and [`WRITE_LANES`] requests in flight, so the two figures compare.
pub const WRITE_PIECE_BYTES: usize = 512 << 10;
/// Write requests in flight per `write_at`.
pub const WRITE_LANES: usize = 4;

impl UringFile {
    /// `write_at` through `file` (the plain or the O_DSYNC handle).
    async fn write_through(&self, file: &DmaFile, pos: u64, data: &[u8]) -> Result<()> {
        assert_eq!(
            pos % BLOCK_BYTES as u64,
            0,
            "O_DIRECT write position is block-aligned"
        );
        assert_eq!(
            data.len() % BLOCK_BYTES,
            0,
            "O_DIRECT write length is block-aligned"
        );
        // Large writes go out as WRITE_PIECE_BYTES pieces, WRITE_LANES in flight: buffers stay
        // within the registered arena and the device sees a queue.
        let pieces = data.len().div_ceil(WRITE_PIECE_BYTES);
        let lane = |first: usize| self.write_lane(file, pos, data, first);
        if pieces <= 1 {
            return lane(0).await;
        }
        // Join the lanes pairwise into one future (no spawning: the caller's task drives them).
        let mut futs: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + '_>>> =
            (0..WRITE_LANES.min(pieces))
                .map(|i| Box::pin(lane(i)) as _)
                .collect();
        while futs.len() > 1 {
            let a = futs.pop().expect("len > 1");
            let b = futs.pop().expect("len > 1");
            futs.insert(
                0,
                Box::pin(async move {
                    let (x, y) = futures_lite::future::zip(a, b).await;
                    x.and(y)
                }),
            );
        }
        futs.pop().expect("at least one lane").await
    }

    /// One lane of a `write_at`: write the pieces `first, first + WRITE_LANES, ...` of `data`
    /// (at file position `pos`), one at a time, through one DMA buffer the lane reuses. Reusing
    /// it keeps a registered buffer (when the arena had room) for the whole write, and spares
    /// the allocator and the page-fault path a fresh buffer per piece.
    async fn write_lane(&self, file: &DmaFile, pos: u64, data: &[u8], first: usize) -> Result<()> {
        let pieces = data.len().div_ceil(WRITE_PIECE_BYTES);
        let mut spare: Option<glommio::io::DmaBuffer> = None;
        let mut i = first;
        while i < pieces {
            let start = i * WRITE_PIECE_BYTES;
            let end = (start + WRITE_PIECE_BYTES).min(data.len());
            let piece = &data[start..end];
            let mut dma = match spare.take() {
                Some(buf) if buf.len() == piece.len() => buf,
                _ => file.alloc_dma_buffer(piece.len()),
            };
            dma.as_bytes_mut().copy_from_slice(piece);
            let dma = Rc::new(dma);
            self.write_all(file, pos + start as u64, &dma).await?;
            spare = Rc::try_unwrap(dma).ok();
            i += WRITE_LANES;
        }
        Ok(())
    }

    /// Write all of `dma` at `pos`, reissuing the rest after a short (whole-block) write.
    async fn write_all(
        &self,
        file: &DmaFile,
        pos: u64,
        dma: &Rc<glommio::io::DmaBuffer>,
    ) -> Result<()> {
        let n = file
            .write_rc_at(dma.clone(), pos)
            .await
            .map_err(|e| io_err("write", &self.path, os_error(e)))?;
        if n == dma.len() {
            return Ok(());
        }
        if n == 0 || n % BLOCK_BYTES != 0 {
            return Err(short_write(&self.path, n));
        }
        // Rare: the kernel wrote a whole-block prefix. Write the rest from a fresh buffer.
        let mut done = n;
        while done < dma.len() {
            let rest = &dma.as_bytes()[done..];
            let mut more = file.alloc_dma_buffer(rest.len());
            more.as_bytes_mut().copy_from_slice(rest);
            let n = file
                .write_at(more, pos + done as u64)
                .await
                .map_err(|e| io_err("write", &self.path, os_error(e)))?;
            if n == 0 || n % BLOCK_BYTES != 0 {
                return Err(short_write(&self.path, n));
            }
            done += n;
        }
        Ok(())
    }
}

/// The operating system's error under a glommio error: glommio's own text names the
/// operation, path and fd again (which [`io_err`] names already), and its conversion into an
/// `io::Error` keeps that text and loses the OS error code.
fn os_error<T>(e: glommio::GlommioError<T>) -> std::io::Error {
    match e {
        glommio::GlommioError::EnhancedIoError { source, .. } => source,
        other => other.into(),
    }
}

fn short_write(path: &Path, n: usize) -> crate::Error {
    io_err(
        "write",
        path,
        std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!("short O_DIRECT write of {n} bytes"),
        ),
    )
}

impl DiskFile for UringFile {
    fn path(&self) -> &Path {
        &self.path
    }

    async fn size(&self) -> Result<u64> {
        self.file
            .file_size()
            .await
            .map_err(|e| io_err("stat", &self.path, os_error(e)))
    }

    async fn read_at(&self, pos: u64, len: usize) -> Result<AlignedBuf> {
        let r = self.file.read_at(pos, len).await.map_err(|e| {
            let e = os_error(e);
            io_err(
                "read",
                &self.path,
                std::io::Error::new(e.kind(), format!("{len} bytes at {pos}: {e}")),
            )
        })?;
        Ok(AlignedBuf::from_slice(&r))
    }

    async fn write_at(&self, pos: u64, data: &[u8]) -> Result<()> {
        self.write_through(&self.file, pos, data).await
    }

    async fn write_durable_at(&self, pos: u64, data: &[u8]) -> Result<()> {
        let opened = self.dsync.borrow().clone();
        let dsync = match opened {
            Some(f) => f,
            None => {
                let f = OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_DSYNC)
                    .dma_open(&self.path)
                    .await
                    .map_err(|e| io_err("open O_DSYNC", &self.path, os_error(e)))?;
                // The inode is open here (this file): its locks are all this process's, shared.
                if !try_flock(&f, libc::LOCK_SH, &self.path)? {
                    return Err(io_err(
                        "flock",
                        &self.path,
                        std::io::Error::from(std::io::ErrorKind::WouldBlock),
                    ));
                }
                let f = Rc::new(f);
                *self.dsync.borrow_mut() = Some(f.clone());
                f
            }
        };
        self.write_through(&dsync, pos, data).await
    }

    async fn sync(&self) -> Result<()> {
        self.file
            .fdatasync()
            .await
            .map_err(|e| io_err("fdatasync", &self.path, os_error(e)))
    }

    async fn allocate(&self, len: u64) -> Result<()> {
        if self.size().await? >= len {
            return Ok(());
        }
        self.file
            .pre_allocate(len, false)
            .await
            .map_err(|e| io_err("fallocate", &self.path, os_error(e)))
    }

    async fn truncate(&self, len: u64) -> Result<()> {
        self.file
            .truncate(len)
            .await
            .map_err(|e| io_err("truncate", &self.path, os_error(e)))
    }

    async fn close(self) -> Result<()> {
        let dsync = self.dsync.borrow().clone();
        let file = self.file.clone();
        let path = self.path.clone();
        // Unlocks and uncounts (see `Drop`); the clones keep the descriptors open until closed.
        drop(self);
        if let Some(f) = dsync {
            f.close_rc()
                .await
                .map_err(|e| io_err("close", &path, os_error(e)))?;
        }
        file.close_rc()
            .await
            .map_err(|e| io_err("close", &path, os_error(e)))?;
        Ok(())
    }
}
