//! Raw device measurements in a directory's file system, in-process, with the same IO path the
//! log uses (glommio DMA files). `corum bench` and `corum loadgen` report the log's figures as
//! ratios of these.
//!
//! - **fsync latency**: 4 KiB O_DIRECT write + fdatasync at queue depth 1, overwriting blocks
//!   of a file that was fully written and synced first (the log's hot path after prefill).
//!   Alternating with it, the same write as one O_DSYNC write (`DiskFile::write_durable_at`,
//!   how the log makes a small round durable), reported as `dsync_write_*`.
//! - **quorum write latency** (`quorum_writers` > 0): that many files, one 4 KiB O_DSYNC write
//!   to each issued at once (what the voters of a quorum whose logs share this disk do for one
//!   commit), timed until a majority of them completed: the least a commit on such a quorum
//!   waits for disks, before any network hop. On one device the writes queue behind each other
//!   (and behind each other's cache flushes), so it sits well above a lone write.
//! - **sequential write bandwidth**: O_DIRECT writes of [`WRITE_PIECE_BYTES`] (the log's
//!   request size), `queue_depth` in flight (the log keeps [`WRITE_LANES`]), overwriting a file
//!   that was fully written and synced first (what the log's design aims its writes at), one
//!   fdatasync at the end (included in the time). The same writes into a fresh fallocated
//!   (unwritten) file are reported too, as `write_fallocated_mb_per_sec`: there the file system
//!   converts extents as it goes, which is slower on some devices and faster on others.
//! - **sequential read bandwidth**: O_DIRECT reads of the same size and depth of that file.
//!
//! Must run inside a glommio executor. Files are removed afterwards.

use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures_lite::future::zip;
use glommio::io::{DmaBuffer, DmaFile};

use crate::buf::AlignedBuf;
use crate::disk::uring::{WRITE_LANES, WRITE_PIECE_BYTES};
use crate::disk::{io_err, Disk, DiskFile, OpenMode, UringDisk};
use crate::error::Result;

/// What the device does, measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceReport {
    pub fsync_samples: usize,
    pub fsync_p50_us: u64,
    pub fsync_p99_us: u64,
    pub fsyncs_per_sec: f64,
    /// 4 KiB O_DSYNC writes, sampled alternately with the write + fdatasync pairs.
    pub dsync_write_p50_us: u64,
    pub dsync_write_p99_us: u64,
    /// Writers of the quorum write measurement (0: not measured).
    pub quorum_writers: usize,
    /// Time until a majority of `quorum_writers` concurrent 4 KiB O_DSYNC writes completed.
    pub quorum_write_p50_us: u64,
    pub quorum_write_p99_us: u64,
    /// Overwriting written blocks (the headline figure).
    pub write_mb_per_sec: f64,
    /// Writing into freshly fallocated (unwritten) space.
    pub write_fallocated_mb_per_sec: f64,
    pub read_mb_per_sec: f64,
}

/// How long and how much to measure.
#[derive(Clone, Debug)]
pub struct DeviceBenchConfig {
    pub fsync_duration: Duration,
    /// Size of the pre-written file the fsync test cycles through.
    pub fsync_file_bytes: u64,
    pub bandwidth_bytes: u64,
    /// Requests in flight for the bandwidth figures (1..=8).
    pub queue_depth: usize,
    /// Files of the quorum write measurement (0 skips it).
    pub quorum_writers: usize,
    /// How long the quorum write measurement samples.
    pub quorum_duration: Duration,
}

impl Default for DeviceBenchConfig {
    fn default() -> Self {
        Self {
            fsync_duration: Duration::from_secs(2),
            fsync_file_bytes: 4 << 20,
            bandwidth_bytes: 256 << 20,
            queue_depth: WRITE_LANES,
            quorum_writers: 3,
            quorum_duration: Duration::from_secs(1),
        }
    }
}

const CHUNK_BYTES: usize = WRITE_PIECE_BYTES;

/// Percentile `p` (0..=100) of sorted samples.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Run all three measurements in `dir` (created if missing).
pub async fn measure_device(dir: &Path, cfg: &DeviceBenchConfig) -> Result<DeviceReport> {
    let disk = UringDisk;
    disk.create_dir_all(dir).await?;
    let mut report = DeviceReport::default();
    measure_fsync(&disk, dir, cfg, &mut report).await?;
    if cfg.quorum_writers > 0 {
        measure_quorum_writes(&disk, dir, cfg, &mut report).await?;
    }
    measure_bandwidth(&disk, dir, cfg, &mut report).await?;
    Ok(report)
}

async fn measure_fsync(
    disk: &UringDisk,
    dir: &Path,
    cfg: &DeviceBenchConfig,
    out: &mut DeviceReport,
) -> Result<()> {
    let path = dir.join("corum-devbench-fsync.tmp");
    let size = cfg.fsync_file_bytes.max(CHUNK_BYTES as u64);
    let f = prewritten_file(disk, &path, size).await?;
    let block = AlignedBuf::from_slice(&[0xA5; crate::buf::BLOCK_BYTES]);
    let (mut samples, mut dsync_samples) = (Vec::new(), Vec::new());
    let mut fsync_time = Duration::ZERO;
    let start = Instant::now();
    let mut pos = 0u64;
    while start.elapsed() < cfg.fsync_duration || samples.len() < 10 || dsync_samples.len() < 10 {
        let t = Instant::now();
        if samples.len() <= dsync_samples.len() {
            f.write_at(pos, &block).await?;
            f.sync().await?;
            fsync_time += t.elapsed();
            samples.push(t.elapsed().as_micros() as u64);
        } else {
            f.write_durable_at(pos, &block).await?;
            dsync_samples.push(t.elapsed().as_micros() as u64);
        }
        pos = (pos + block.len() as u64) % size;
    }
    f.close().await?;
    disk.remove(&path).await?;
    // The rate one stream of write + fdatasync pairs sustains.
    out.fsyncs_per_sec = samples.len() as f64 / fsync_time.as_secs_f64().max(1e-9);
    out.fsync_samples = samples.len();
    (out.fsync_p50_us, out.fsync_p99_us) = p50_p99(samples);
    (out.dsync_write_p50_us, out.dsync_write_p99_us) = p50_p99(dsync_samples);
    Ok(())
}

/// The p50 and p99 of `samples`.
fn p50_p99(mut samples: Vec<u64>) -> (u64, u64) {
    samples.sort_unstable();
    (percentile(&samples, 50.0), percentile(&samples, 99.0))
}

/// A file of `size` bytes, written through and synced (so later writes overwrite written
/// blocks).
async fn prewritten_file(
    disk: &UringDisk,
    path: &Path,
    size: u64,
) -> Result<<UringDisk as Disk>::File> {
    let f = disk.open(path, OpenMode::Create).await?;
    let zeros = AlignedBuf::zeroed(CHUNK_BYTES);
    let mut pos = 0;
    while pos < size {
        f.write_at(pos, &zeros).await?;
        pos += CHUNK_BYTES as u64;
    }
    f.sync().await?;
    Ok(f)
}

async fn measure_quorum_writes(
    disk: &UringDisk,
    dir: &Path,
    cfg: &DeviceBenchConfig,
    out: &mut DeviceReport,
) -> Result<()> {
    let n = cfg.quorum_writers;
    let majority = n / 2 + 1;
    let size = CHUNK_BYTES as u64;
    let mut files = Vec::with_capacity(n);
    for i in 0..n {
        let path = dir.join(format!("corum-devbench-quorum-{i}.tmp"));
        files.push((Rc::new(prewritten_file(disk, &path, size).await?), path));
    }
    let block = Rc::new(AlignedBuf::from_slice(&[0x3C; crate::buf::BLOCK_BYTES]));
    let mut samples = Vec::new();
    let start = Instant::now();
    let mut pos = 0u64;
    while start.elapsed() < cfg.quorum_duration || samples.len() < 10 {
        // One task per writer, so the writes go to the kernel together; each notes when its
        // write returned.
        let t = Instant::now();
        let tasks: Vec<_> = files
            .iter()
            .map(|(f, _)| {
                let (f, block) = (f.clone(), block.clone());
                glommio::spawn_local(async move {
                    f.write_durable_at(pos, &block).await?;
                    Ok::<_, crate::Error>(t.elapsed())
                })
            })
            .collect();
        let mut took = Vec::with_capacity(n);
        for task in tasks {
            took.push(task.await?);
        }
        took.sort_unstable();
        samples.push(took[majority - 1].as_micros() as u64);
        pos = (pos + block.len() as u64) % size;
    }
    for (f, path) in files {
        if let Ok(f) = Rc::try_unwrap(f) {
            f.close().await?;
        }
        disk.remove(&path).await?;
    }
    out.quorum_writers = n;
    (out.quorum_write_p50_us, out.quorum_write_p99_us) = p50_p99(samples);
    Ok(())
}

async fn measure_bandwidth(
    disk: &UringDisk,
    dir: &Path,
    cfg: &DeviceBenchConfig,
    out: &mut DeviceReport,
) -> Result<()> {
    let path = dir.join("corum-devbench-bw.tmp");
    let total =
        cfg.bandwidth_bytes.max(CHUNK_BYTES as u64) / CHUNK_BYTES as u64 * CHUNK_BYTES as u64;
    let chunks = total / CHUNK_BYTES as u64;
    // `run_lanes` runs at most 8 lanes.
    let qd = cfg.queue_depth.clamp(1, 8) as u64;
    {
        // Create and preallocate through the Disk (which also primes glommio's poll probe).
        let f = disk.open(&path, OpenMode::Create).await?;
        f.allocate(total).await?;
        f.sync().await?;
        f.close().await?;
    }
    // The writes go straight to glommio with buffers filled once, so the figure is the
    // device's, without the copy a `Disk::write_at` makes.
    let f = glommio::io::OpenOptions::new()
        .read(true)
        .write(true)
        .dma_open(&path)
        .await
        .map_err(|e| io_err("open", &path, e.into()))?;
    let bufs: Vec<Rc<DmaBuffer>> = (0..qd)
        .map(|_| {
            let mut b = f.alloc_dma_buffer(CHUNK_BYTES);
            b.as_bytes_mut().fill(0x5A);
            Rc::new(b)
        })
        .collect();
    // First pass: into fallocated space. It also writes every block, so the second pass
    // overwrites written blocks.
    let start = Instant::now();
    write_all_chunks(&f, &path, &bufs, chunks).await?;
    out.write_fallocated_mb_per_sec = total as f64 / 1e6 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    write_all_chunks(&f, &path, &bufs, chunks).await?;
    out.write_mb_per_sec = total as f64 / 1e6 / start.elapsed().as_secs_f64();
    drop(bufs);
    f.close()
        .await
        .map_err(|e| io_err("close", &path, e.into()))?;
    let f = disk.open(&path, OpenMode::Existing).await?;
    let read_lanes = |lane: u64| {
        let f = &f;
        async move {
            let mut c = lane;
            while c < chunks {
                let got = f.read_at(c * CHUNK_BYTES as u64, CHUNK_BYTES).await?;
                assert_eq!(got.len(), CHUNK_BYTES, "file was written in full");
                c += qd;
            }
            Ok::<(), crate::Error>(())
        }
    };
    let start = Instant::now();
    run_lanes(qd, &read_lanes).await?;
    out.read_mb_per_sec = total as f64 / 1e6 / start.elapsed().as_secs_f64();
    f.close().await?;
    disk.remove(&path).await
}

/// Write chunks `0..chunks` of `f` with one lane per buffer, each lane writing every
/// `bufs.len()`-th chunk (so `bufs.len()` writes are in flight), then fdatasync.
async fn write_all_chunks(
    f: &DmaFile,
    path: &Path,
    bufs: &[Rc<DmaBuffer>],
    chunks: u64,
) -> Result<()> {
    let qd = bufs.len() as u64;
    let lanes = |lane: u64| async move {
        let buf = &bufs[lane as usize];
        let mut c = lane;
        while c < chunks {
            let n = f
                .write_rc_at(buf.clone(), c * CHUNK_BYTES as u64)
                .await
                .map_err(|e| io_err("write", path, e.into()))?;
            if n != CHUNK_BYTES {
                return Err(io_err(
                    "write",
                    path,
                    std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        format!("short O_DIRECT write of {n} bytes"),
                    ),
                ));
            }
            c += qd;
        }
        Ok::<(), crate::Error>(())
    };
    run_lanes(qd, &lanes).await?;
    f.fdatasync()
        .await
        .map_err(|e| io_err("fdatasync", path, e.into()))
}

/// Run `lane(0..n)` concurrently (n <= 8, joined pairwise).
async fn run_lanes<F, Fut>(n: u64, lane: &F) -> Result<()>
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut futs: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + '_>>> =
        (0..n.min(8)).map(|i| Box::pin(lane(i)) as _).collect();
    while futs.len() > 1 {
        let a = futs.pop().expect("len > 1");
        let b = futs.pop().expect("len > 1");
        futs.push(Box::pin(async move {
            let (x, y) = zip(a, b).await;
            x.and(y)
        }));
    }
    match futs.pop() {
        Some(f) => f.await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        // Proves the percentile helper picks the nearest-rank sample.
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 51);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[], 50.0), 0);
    }
}
