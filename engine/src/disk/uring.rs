//! `UringDisk`: glommio DMA files (O_DIRECT, aligned buffers, io_uring).
//!
//! Every write copies the caller's bytes into a glommio `DmaBuffer` (registered memory when the
//! executor's `io_memory` arena has room, the heap otherwise). The copy keeps the trait free of
//! glommio types; at memory bandwidth it costs a few percent of a device write.

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
    path: PathBuf,
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
    std::fs::write(&probe, vec![0u8; BLOCK_BYTES]).map_err(|e| io_err("write", &probe, e))?;
    let opened = OpenOptions::new().read(true).dma_open(&probe).await;
    let _ = std::fs::remove_file(&probe);
    let f = opened.map_err(|e| io_err("open", &probe, e.into()))?;
    f.close()
        .await
        .map_err(|e| io_err("close", &probe, e.into()))?;
    PROBED_DEVICES.with(|p| p.borrow_mut().push(dev));
    Ok(())
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
            .map_err(|e| io_err("open", path, e.into()))?;
        Ok(UringFile {
            file: Rc::new(file),
            path: path.to_path_buf(),
        })
    }

    async fn remove(&self, path: &Path) -> Result<()> {
        glommio::io::remove(path)
            .await
            .map_err(|e| io_err("remove", path, e.into()))
    }

    async fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        glommio::io::rename(from, to)
            .await
            .map_err(|e| io_err("rename", from, e.into()))
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
        let d = glommio::io::Directory::open(dir)
            .await
            .map_err(|e| io_err("open dir", dir, e.into()))?;
        d.sync()
            .await
            .map_err(|e| io_err("sync dir", dir, e.into()))?;
        d.close()
            .await
            .map_err(|e| io_err("close dir", dir, e.into()))
    }
}

/// Size of one O_DIRECT write request.
const WRITE_PIECE_BYTES: usize = 512 << 10;
/// Write requests in flight per `write_at`.
const WRITE_LANES: usize = 8;

impl UringFile {
    async fn write_piece(&self, pos: u64, data: &[u8]) -> Result<()> {
        let mut done = 0usize;
        while done < data.len() {
            let rest = &data[done..];
            let mut dma = self.file.alloc_dma_buffer(rest.len());
            dma.as_bytes_mut().copy_from_slice(rest);
            let n = self
                .file
                .write_at(dma, pos + done as u64)
                .await
                .map_err(|e| io_err("write", &self.path, e.into()))?;
            if n == 0 || n % BLOCK_BYTES != 0 {
                return Err(io_err(
                    "write",
                    &self.path,
                    std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        format!("short O_DIRECT write of {n} bytes"),
                    ),
                ));
            }
            done += n;
        }
        Ok(())
    }
}

impl DiskFile for UringFile {
    fn path(&self) -> &Path {
        &self.path
    }

    async fn size(&self) -> Result<u64> {
        self.file
            .file_size()
            .await
            .map_err(|e| io_err("stat", &self.path, e.into()))
    }

    async fn read_at(&self, pos: u64, len: usize) -> Result<AlignedBuf> {
        let r = self.file.read_at(pos, len).await.map_err(|e| {
            let e: std::io::Error = e.into();
            io_err(
                "read",
                &self.path,
                std::io::Error::new(e.kind(), format!("{len} bytes at {pos}: {e}")),
            )
        })?;
        Ok(AlignedBuf::from_slice(&r))
    }

    async fn write_at(&self, pos: u64, data: &[u8]) -> Result<()> {
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
        let lane = |first: usize| async move {
            let mut i = first;
            while i < pieces {
                let start = i * WRITE_PIECE_BYTES;
                let end = (start + WRITE_PIECE_BYTES).min(data.len());
                self.write_piece(pos + start as u64, &data[start..end])
                    .await?;
                i += WRITE_LANES;
            }
            Ok::<(), crate::Error>(())
        };
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

    async fn sync(&self) -> Result<()> {
        self.file
            .fdatasync()
            .await
            .map_err(|e| io_err("fdatasync", &self.path, e.into()))
    }

    async fn allocate(&self, len: u64) -> Result<()> {
        if self.size().await? >= len {
            return Ok(());
        }
        self.file
            .pre_allocate(len, false)
            .await
            .map_err(|e| io_err("fallocate", &self.path, e.into()))
    }

    async fn truncate(&self, len: u64) -> Result<()> {
        self.file
            .truncate(len)
            .await
            .map_err(|e| io_err("truncate", &self.path, e.into()))
    }

    async fn close(self) -> Result<()> {
        self.file
            .close_rc()
            .await
            .map_err(|e| io_err("close", &self.path, e.into()))?;
        Ok(())
    }
}
