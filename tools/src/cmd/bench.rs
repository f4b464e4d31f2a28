//! `corum bench disk` and `corum bench log`: the device, then the log engine on it, in one
//! process, reported side by side (and as ratios) so a run says how close the log gets to the
//! hardware. `corum bench net` ([`net`]) measures the host's loopback round trip, the network
//! share of a commit's floor.
//!
//! `bench log` modes:
//! - default: `--appenders N` tasks, each appending one `--record-bytes` batch and waiting for it
//!   to be durable before the next (latency and group commit);
//! - `--no-wait`: one appender appending back to back while a syncer task commits (bandwidth;
//!   use `--record-bytes 1048576`). Like a metadata log that snapshots, it keeps only the last
//!   `--retain-bytes` (default 256 MiB in this mode; 0 keeps everything) by deleting the prefix
//!   as it goes, so deleted segment files are recycled; a warm-up fills the free pool first,
//!   so the measured window is the steady state;
//! - `--recovery-mib N`: also build an N MiB log and time opening it and a full scan of it.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context;
use corum_engine::devbench::{measure_device, DeviceBenchConfig, DeviceReport};
use corum_engine::disk::{executor_builder, UringDisk};
use corum_engine::log::{inspect_dir, Log, LogConfig, LogStats, NewBatch};
use corum_engine::record::Attributes;
use corum_engine::Error as EngineError;
use corum_types::Epoch;
use hdrhistogram::Histogram;
use serde::Serialize;

pub mod floor;
pub mod net;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Measure the device under --dir: 4 KiB write + fdatasync latency, sequential bandwidth.
    Disk(DiskArgs),
    /// Drive the log engine under --dir and compare with the device.
    Log(LogArgs),
    /// Loopback TCP round trip between two threads: the host's floor for one hop.
    Net(net::NetArgs),
    /// A 3-voter write at one client with nothing but its hops and durable writes, on glommio
    /// and on blocking threads: the CPU and latency floor under corum's own code.
    Floor(floor::FloorArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct RawArgs {
    /// Seconds of 4 KiB write + fdatasync samples.
    #[arg(long, default_value_t = 2.0)]
    pub raw_seconds: f64,
    /// MiB written and read for the bandwidth figures.
    #[arg(long, default_value_t = 256)]
    pub raw_bandwidth_mib: u64,
    /// IOs in flight for the bandwidth figures (1..=8); the default is what the log keeps.
    #[arg(long, default_value_t = corum_engine::disk::uring::WRITE_LANES)]
    pub raw_queue_depth: usize,
    /// Files of the quorum write figure: that many 4 KiB O_DSYNC writes at once, timed until a
    /// majority completed (what a commit waits for when the voters share this disk; 0 skips).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=15))]
    pub raw_quorum_writers: u8,
}

#[derive(clap::Args, Debug)]
pub struct DiskArgs {
    /// A directory on the file system to measure.
    #[arg(long)]
    pub dir: PathBuf,
    #[command(flatten)]
    pub raw: RawArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct LogArgs {
    /// A directory on the file system to measure (a scratch log is made under it).
    #[arg(long)]
    pub dir: PathBuf,
    /// Concurrent appenders, each waiting for durability before its next append.
    #[arg(long, default_value_t = 1)]
    pub appenders: usize,
    /// Payload bytes per batch (one record per batch).
    #[arg(long, default_value_t = 128)]
    pub record_bytes: usize,
    /// Seconds of appending (0 skips the append phase).
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// One appender appending without waiting; a syncer task commits behind it.
    #[arg(long)]
    pub no_wait: bool,
    /// Segment size in MiB.
    #[arg(long, default_value_t = 64)]
    pub segment_mib: u64,
    /// Rounds of at most this many bytes are one O_DSYNC write instead of a write and an
    /// fdatasync (0: always fdatasync). Default: the log's (512 KiB).
    #[arg(long, value_name = "BYTES")]
    pub durable_write_bytes_max: Option<usize>,
    /// Also build a log of this many MiB and measure recovery (0: skip).
    #[arg(long, default_value_t = 0)]
    pub recovery_mib: u64,
    /// With --no-wait: delete the log prefix beyond this many appended bytes as the run goes
    /// (deleted segments are recycled); 0 keeps everything. Default 256 MiB.
    #[arg(long)]
    pub retain_bytes: Option<u64>,
    /// Disable the background prefill of zeroed blocks ahead of the writer.
    #[arg(long)]
    pub no_prefill: bool,
    #[command(flatten)]
    pub raw: RawArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, Debug, Default)]
pub struct Report {
    pub raw_fsync_p50_us: u64,
    pub raw_fsync_p99_us: u64,
    pub raw_fsyncs_per_sec: f64,
    /// 4 KiB O_DSYNC write (one request; how the log makes a small round durable).
    pub raw_dsync_write_p50_us: u64,
    pub raw_dsync_write_p99_us: u64,
    /// That many 4 KiB O_DSYNC writes at once, until a majority completed.
    pub raw_quorum_writers: usize,
    pub raw_quorum_write_p50_us: u64,
    pub raw_quorum_write_p99_us: u64,
    /// Sequential O_DIRECT overwrite of written blocks (the figure the log is compared with).
    pub raw_mb_per_sec: f64,
    /// The same writes into freshly fallocated (unwritten) space.
    pub raw_fallocated_mb_per_sec: f64,
    pub raw_read_mb_per_sec: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogFigures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryFigures>,
}

#[derive(Serialize, Debug, Default, Clone)]
pub struct LogFigures {
    pub appenders: usize,
    pub record_bytes: usize,
    pub wait_for_durable: bool,
    pub seconds: f64,
    pub records: u64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub durable_p50_us: u64,
    pub durable_p99_us: u64,
    pub durable_max_us: u64,
    pub fsyncs_per_sec: f64,
    pub records_per_fsync: f64,
    pub bytes_written_per_record: f64,
    /// Share of the run the group-commit rounds spent writing, and in fdatasync.
    pub round_write_share: f64,
    pub round_sync_share: f64,
    /// `durable_p50_us / raw_fsync_p50_us`.
    pub durable_p50_over_raw_fsync_p50: f64,
    /// `records_per_sec / raw_fsyncs_per_sec`.
    pub records_per_sec_over_raw_fsyncs_per_sec: f64,
    /// `mb_per_sec / raw_mb_per_sec`.
    pub mb_per_sec_over_raw: f64,
    /// Bytes kept by the prefix deletion of the bulk mode (0: none deleted).
    pub retain_bytes: u64,
    /// Rounds up to this many bytes were one O_DSYNC write (0: every round wrote, then
    /// fdatasynced). The raw figures are always write + fdatasync.
    pub durable_write_bytes_max: usize,
    /// Seconds of warm-up before the measured window (filling the free segment pool).
    pub warmup_seconds: f64,
    /// Segment files made by rolls in the measured window: overwritten free files, fresh files.
    pub segments_recycled: u64,
    pub segments_created: u64,
}

#[derive(Serialize, Debug, Default, Clone)]
pub struct RecoveryFigures {
    pub log_mib: u64,
    pub segments: usize,
    /// `Log::open`: index files of sealed segments, a scan of the active one.
    pub open_ms: f64,
    pub open_scanned_mb: f64,
    /// A full check of every frame of every segment (what rebuilding all indexes costs).
    pub full_scan_ms: f64,
    pub full_scan_mb_per_sec: f64,
    /// `full_scan_mb_per_sec / raw_read_mb_per_sec`.
    pub full_scan_over_raw_read: f64,
}

fn device_config(raw: &RawArgs) -> DeviceBenchConfig {
    DeviceBenchConfig {
        fsync_duration: Duration::from_secs_f64(raw.raw_seconds.max(0.1)),
        fsync_file_bytes: 4 << 20,
        bandwidth_bytes: raw.raw_bandwidth_mib.max(1) << 20,
        queue_depth: raw.raw_queue_depth.max(1),
        quorum_writers: usize::from(raw.raw_quorum_writers),
        quorum_duration: Duration::from_secs_f64((raw.raw_seconds / 2.0).max(0.1)),
    }
}

fn raw_into(report: &mut Report, d: &DeviceReport) {
    report.raw_fsync_p50_us = d.fsync_p50_us;
    report.raw_fsync_p99_us = d.fsync_p99_us;
    report.raw_fsyncs_per_sec = d.fsyncs_per_sec;
    report.raw_dsync_write_p50_us = d.dsync_write_p50_us;
    report.raw_dsync_write_p99_us = d.dsync_write_p99_us;
    report.raw_quorum_writers = d.quorum_writers;
    report.raw_quorum_write_p50_us = d.quorum_write_p50_us;
    report.raw_quorum_write_p99_us = d.quorum_write_p99_us;
    report.raw_mb_per_sec = d.write_mb_per_sec;
    report.raw_fallocated_mb_per_sec = d.write_fallocated_mb_per_sec;
    report.raw_read_mb_per_sec = d.read_mb_per_sec;
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::Disk(a) => run_disk(a),
        What::Log(a) => run_log(a),
        What::Net(a) => net::run(a),
        What::Floor(a) => floor::run(a),
    }
}

fn run_disk(args: DiskArgs) -> anyhow::Result<()> {
    let cfg = device_config(&args.raw);
    let dir = args.dir.clone();
    let d = executor_builder("corum-bench")
        .make()
        .map_err(|e| anyhow::anyhow!("starting the glommio executor: {e}"))?
        .run(async move { measure_device(&dir, &cfg).await })
        .with_context(|| format!("measuring the device under {}", args.dir.display()))?;
    let mut report = Report::default();
    raw_into(&mut report, &d);
    print_report(&report, args.json)
}

fn run_log(args: LogArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.appenders >= 1, "--appenders must be at least 1");
    anyhow::ensure!(args.record_bytes >= 1, "--record-bytes must be at least 1");
    let exec = executor_builder("corum-bench")
        .make()
        .map_err(|e| anyhow::anyhow!("starting the glommio executor: {e}"))?;
    let report = exec.run(async move { log_bench(args).await })?;
    print_report(&report.0, report.1)
}

async fn log_bench(args: LogArgs) -> anyhow::Result<(Report, bool)> {
    let mut report = Report::default();
    let cfg = device_config(&args.raw);
    let d = measure_device(&args.dir, &cfg)
        .await
        .with_context(|| format!("measuring the device under {}", args.dir.display()))?;
    raw_into(&mut report, &d);
    let mut log_cfg = LogConfig {
        segment_bytes: args.segment_mib.max(1) << 20,
        ..LogConfig::default()
    };
    if args.no_prefill {
        log_cfg.prefill_ahead_bytes = 0;
    }
    if let Some(max) = args.durable_write_bytes_max {
        log_cfg.durable_write_bytes_max = max;
    }
    log_cfg.frame_bytes_max = log_cfg.frame_bytes_max.max(args.record_bytes as u32 + 4096);
    log_cfg.buffered_bytes_max = log_cfg
        .buffered_bytes_max
        .max(4 * log_cfg.frame_bytes_max as usize);
    if args.duration > 0.0 {
        let dir = args.dir.join("corum-bench-log");
        remove_dir(&dir)?;
        let figures = append_phase(&args, &dir, log_cfg.clone(), &d).await?;
        remove_dir(&dir)?;
        report.log = Some(figures);
    }
    if args.recovery_mib > 0 {
        let dir = args.dir.join("corum-bench-recovery");
        remove_dir(&dir)?;
        let figures = recovery_phase(&args, &dir, log_cfg, &d).await?;
        remove_dir(&dir)?;
        report.recovery = Some(figures);
    }
    Ok((report, args.json))
}

fn remove_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", dir.display())),
    }
}

fn batch() -> NewBatch {
    NewBatch {
        epoch: Epoch(1),
        attributes: Attributes::empty(),
        record_count: 1,
        first_timestamp_ms: 0,
        max_timestamp_ms: 0,
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("static histogram bounds are valid")
}

async fn append_phase(
    args: &LogArgs,
    dir: &Path,
    cfg: LogConfig,
    device: &DeviceReport,
) -> anyhow::Result<LogFigures> {
    let durable_write_bytes_max = cfg.durable_write_bytes_max;
    let (log, _) = Log::open(UringDisk, dir, cfg)
        .await
        .with_context(|| format!("opening the bench log in {}", dir.display()))?;
    let background = glommio::executor().create_task_queue(
        glommio::Shares::Static(100),
        glommio::Latency::NotImportant,
        "bench-background",
    );
    glommio::spawn_local_into(
        {
            let log = log.clone();
            async move { log.run_prefill().await }
        },
        background,
    )
    .map_err(|e| anyhow::anyhow!("spawning the prefill task: {e}"))?
    .detach();
    let hist = Rc::new(RefCell::new(new_histogram()));
    let records = Rc::new(Cell::new(0u64));
    let duration = Duration::from_secs_f64(args.duration);
    let start = Instant::now();
    let deadline = start + duration;
    // Where the measured window starts (after the bulk mode's warm-up).
    let measured_start = Cell::new(start);
    let progress = (args.duration > 3.0).then(|| {
        let records = records.clone();
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(Duration::from_secs(1)).await;
                let t = start.elapsed().as_secs_f64();
                if t > duration.as_secs_f64() {
                    break;
                }
                eprint!(
                    "\r[bench log] {t:>5.1}/{:.0} s  {} records",
                    duration.as_secs_f64(),
                    records.get()
                );
                let _ = std::io::stderr().flush();
            }
        })
        .detach()
    });
    let payload = vec![0xC5u8; args.record_bytes];
    let mut retain_bytes = 0;
    let mut warmup_seconds = 0.0;
    let mut stats_before = log.stats();
    if args.no_wait {
        // The syncer in its own task queue: the scheduler alternates between it and the
        // appender by shares instead of running them FIFO in one queue.
        let syncer_queue = glommio::executor().create_task_queue(
            glommio::Shares::Static(1000),
            glommio::Latency::NotImportant,
            "bench-syncer",
        );
        glommio::spawn_local_into(
            {
                let log = log.clone();
                async move { log.run_syncer().await }
            },
            syncer_queue,
        )
        .map_err(|e| anyhow::anyhow!("spawning the syncer task: {e}"))?
        .detach();
        retain_bytes = args.retain_bytes.unwrap_or(256 << 20);
        let mut bulk = Bulk::new(log.clone(), retain_bytes);
        if retain_bytes > 0 && log.config().free_segments_max > 0 {
            // Warm up until a roll has reused a deleted segment file: from then on the log is
            // in the steady state of a log that deletes its prefix (each deletion feeds the
            // pool, each roll takes from it). Bounded: the retained bytes plus a few segments,
            // twice.
            let warm = Instant::now();
            let limit = 2
                * (retain_bytes
                    + (log.config().free_segments_max as u64 + 2) * log.config().segment_bytes);
            while log.stats().segments_recycled == 0 {
                anyhow::ensure!(
                    bulk.appended_bytes < limit,
                    "the warm-up wrote {limit} bytes without recycling a segment file"
                );
                bulk.step(&payload, None).await?;
            }
            log.flush().await.context("warm-up flush")?;
            warmup_seconds = warm.elapsed().as_secs_f64();
            stats_before = log.stats();
        }
        let start = Instant::now();
        let deadline = start + duration;
        measured_start.set(start);
        let mut pending: VecDeque<(corum_types::LogOffset, Instant)> = VecDeque::new();
        while Instant::now() < deadline {
            if bulk.step(&payload, Some(&mut pending)).await? {
                records.set(records.get() + 1);
            }
            let durable = log.durable_end();
            while pending.front().is_some_and(|(o, _)| *o < durable) {
                let (_, t) = pending.pop_front().expect("checked non-empty");
                hist.borrow_mut()
                    .record(t.elapsed().as_micros().max(1) as u64)?;
            }
        }
        log.flush().await.context("final flush")?;
        for (_, t) in pending {
            hist.borrow_mut()
                .record(t.elapsed().as_micros().max(1) as u64)?;
        }
        bulk.finish().await?;
    } else {
        let mut tasks = Vec::new();
        for _ in 0..args.appenders {
            let log = log.clone();
            let hist = hist.clone();
            let records = records.clone();
            let payload = payload.clone();
            tasks.push(glommio::spawn_local(async move {
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let (_, last) = log.append(&batch(), &payload)?;
                    log.wait_durable(last).await?;
                    hist.borrow_mut()
                        .record(t.elapsed().as_micros().max(1) as u64)
                        .expect("latency within histogram bounds");
                    records.set(records.get() + 1);
                }
                Ok::<(), EngineError>(())
            }));
        }
        for t in tasks {
            t.await.context("appender")?;
        }
    }
    let elapsed = measured_start.get().elapsed().as_secs_f64();
    if progress.is_some() {
        eprintln!();
    }
    let stats = stats_delta(log.stats(), stats_before);
    log.close().await.context("closing the bench log")?;
    let n = records.get();
    let hist = hist.borrow();
    let records_per_sec = n as f64 / elapsed;
    let mb_per_sec = (n as f64 * args.record_bytes as f64) / 1e6 / elapsed;
    let durable_p50_us = hist.value_at_quantile(0.50);
    Ok(LogFigures {
        appenders: if args.no_wait { 1 } else { args.appenders },
        record_bytes: args.record_bytes,
        wait_for_durable: !args.no_wait,
        seconds: elapsed,
        records: n,
        records_per_sec,
        mb_per_sec,
        durable_p50_us,
        durable_p99_us: hist.value_at_quantile(0.99),
        durable_max_us: hist.max(),
        fsyncs_per_sec: stats.syncs as f64 / elapsed,
        records_per_fsync: n as f64 / stats.syncs.max(1) as f64,
        bytes_written_per_record: stats.bytes_written as f64 / n.max(1) as f64,
        round_write_share: stats.write_us as f64 / 1e6 / elapsed,
        round_sync_share: stats.sync_us as f64 / 1e6 / elapsed,
        durable_p50_over_raw_fsync_p50: durable_p50_us as f64 / device.fsync_p50_us.max(1) as f64,
        records_per_sec_over_raw_fsyncs_per_sec: records_per_sec / device.fsyncs_per_sec.max(1e-9),
        mb_per_sec_over_raw: mb_per_sec / device.write_mb_per_sec.max(1e-9),
        retain_bytes,
        durable_write_bytes_max,
        warmup_seconds,
        segments_recycled: stats.segments_recycled,
        segments_created: stats.segments_created,
    })
}

/// Counters of `now` minus those of `before`.
fn stats_delta(now: LogStats, before: LogStats) -> LogStats {
    LogStats {
        rounds: now.rounds - before.rounds,
        syncs: now.syncs - before.syncs,
        bytes_written: now.bytes_written - before.bytes_written,
        batches_appended: now.batches_appended - before.batches_appended,
        write_us: now.write_us - before.write_us,
        sync_us: now.sync_us - before.sync_us,
        segments_created: now.segments_created - before.segments_created,
        segments_recycled: now.segments_recycled - before.segments_recycled,
        segments_freed: now.segments_freed - before.segments_freed,
    }
}

/// The bulk (no-wait) appender: appends back to back, and keeps only the last `retain_bytes`
/// by deleting the prefix in a separate task (one deletion at a time).
struct Bulk {
    log: Log<UringDisk>,
    retain_bytes: u64,
    appended_bytes: u64,
    /// `(end offset after a batch, appended bytes at that point)`, oldest first.
    marks: VecDeque<(corum_types::LogOffset, u64)>,
    deleting: Rc<Cell<bool>>,
    failed: Rc<RefCell<Option<EngineError>>>,
}

impl Bulk {
    fn new(log: Log<UringDisk>, retain_bytes: u64) -> Self {
        Self {
            log,
            retain_bytes,
            appended_bytes: 0,
            marks: VecDeque::new(),
            deleting: Rc::new(Cell::new(false)),
            failed: Rc::new(RefCell::new(None)),
        }
    }

    /// Append one batch (or wait for buffer space); start a prefix deletion when the log holds
    /// more than `retain_bytes`. Returns whether a batch was appended.
    async fn step(
        &mut self,
        payload: &[u8],
        pending: Option<&mut VecDeque<(corum_types::LogOffset, Instant)>>,
    ) -> anyhow::Result<bool> {
        if let Some(e) = self.failed.borrow_mut().take() {
            return Err(e).context("deleting the log prefix");
        }
        let appended = match self.log.append(&batch(), payload) {
            Ok((_, last)) => {
                if let Some(p) = pending {
                    p.push_back((last, Instant::now()));
                }
                self.appended_bytes += payload.len() as u64;
                self.marks.push_back((last.next(), self.appended_bytes));
                true
            }
            Err(EngineError::Backpressure { .. }) => {
                self.log
                    .wait_for_space(payload.len() + 4096)
                    .await
                    .context("waiting for buffer space")?;
                false
            }
            Err(e) => return Err(e).context("append"),
        };
        if self.retain_bytes > 0 {
            let mut before = None;
            while self
                .marks
                .front()
                .is_some_and(|m| self.appended_bytes - m.1 > self.retain_bytes)
            {
                before = self.marks.pop_front().map(|m| m.0);
            }
            if let (Some(before), false) = (before, self.deleting.get()) {
                self.deleting.set(true);
                let (log, deleting, failed) =
                    (self.log.clone(), self.deleting.clone(), self.failed.clone());
                glommio::spawn_local(async move {
                    if let Err(e) = log.delete_prefix(before).await {
                        *failed.borrow_mut() = Some(e);
                    }
                    deleting.set(false);
                })
                .detach();
            }
        }
        // Give the syncer, the deleter and the reactor a turn after every batch.
        futures_lite::future::yield_now().await;
        Ok(appended)
    }

    /// Wait for a running prefix deletion; report its error.
    async fn finish(&self) -> anyhow::Result<()> {
        while self.deleting.get() {
            futures_lite::future::yield_now().await;
        }
        match self.failed.borrow_mut().take() {
            Some(e) => Err(e).context("deleting the log prefix"),
            None => Ok(()),
        }
    }
}

async fn recovery_phase(
    args: &LogArgs,
    dir: &Path,
    cfg: LogConfig,
    device: &DeviceReport,
) -> anyhow::Result<RecoveryFigures> {
    let target = args.recovery_mib << 20;
    {
        let (log, _) = Log::open(UringDisk, dir, cfg.clone())
            .await
            .context("opening the recovery log")?;
        glommio::spawn_local({
            let log = log.clone();
            async move { log.run_syncer().await }
        })
        .detach();
        let payload = vec![0x3Cu8; (1 << 20) - 4096];
        let mut written = 0u64;
        let mut last_report = Instant::now();
        while written < target {
            match log.append(&batch(), &payload) {
                Ok(_) => written += payload.len() as u64,
                Err(EngineError::Backpressure { .. }) => {
                    log.wait_for_space(payload.len() + 4096).await?;
                }
                Err(e) => return Err(e).context("append"),
            }
            if last_report.elapsed() > Duration::from_secs(1) {
                eprint!(
                    "\r[bench log] writing recovery log: {} / {} MiB",
                    written >> 20,
                    args.recovery_mib
                );
                let _ = std::io::stderr().flush();
                last_report = Instant::now();
            }
            futures_lite::future::yield_now().await;
        }
        eprintln!();
        log.close().await.context("closing the recovery log")?;
    }
    let t = Instant::now();
    let (log, report) = Log::open(UringDisk, dir, cfg.clone())
        .await
        .context("recovering the log")?;
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    let segments = log.segment_count();
    log.close().await?;
    let t = Instant::now();
    let scanned = inspect_dir(&UringDisk, dir, cfg.frame_bytes_max)
        .await
        .context("full scan")?;
    let full = t.elapsed().as_secs_f64();
    let bytes: u64 = scanned.iter().map(|s| s.end_position).sum();
    anyhow::ensure!(
        scanned.iter().all(|s| s.problem.is_none()),
        "the recovery log has damage"
    );
    let mbps = bytes as f64 / 1e6 / full;
    Ok(RecoveryFigures {
        log_mib: bytes >> 20,
        segments,
        open_ms,
        open_scanned_mb: report.scanned_bytes as f64 / 1e6,
        full_scan_ms: full * 1e3,
        full_scan_mb_per_sec: mbps,
        full_scan_over_raw_read: mbps / device.read_mb_per_sec.max(1e-9),
    })
}

fn print_report(r: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(&flatten(r)?)?);
        return Ok(());
    }
    println!(
        "device (4 KiB write + fdatasync, QD1; sequential O_DIRECT in {} KiB writes)",
        corum_engine::disk::uring::WRITE_PIECE_BYTES >> 10
    );
    println!(
        "  fsync p50 / p99        {:>10} / {} us",
        r.raw_fsync_p50_us, r.raw_fsync_p99_us
    );
    println!("  fsyncs per sec         {:>10.0}", r.raw_fsyncs_per_sec);
    println!(
        "  O_DSYNC write p50 / p99{:>10} / {} us",
        r.raw_dsync_write_p50_us, r.raw_dsync_write_p99_us
    );
    if r.raw_quorum_writers > 0 {
        println!(
            "  {} O_DSYNC writes at once, majority done p50 / p99 {} / {} us",
            r.raw_quorum_writers, r.raw_quorum_write_p50_us, r.raw_quorum_write_p99_us
        );
    }
    println!("  write MB/s             {:>10.1}", r.raw_mb_per_sec);
    println!(
        "  write MB/s (fallocated){:>10.1}",
        r.raw_fallocated_mb_per_sec
    );
    println!("  read MB/s              {:>10.1}", r.raw_read_mb_per_sec);
    if let Some(l) = &r.log {
        println!(
            "log ({} appender(s), {} B records, {})",
            l.appenders,
            l.record_bytes,
            if l.wait_for_durable {
                "each waits for durability"
            } else {
                "no waiting"
            }
        );
        if l.durable_write_bytes_max > 0 {
            println!(
                "  (rounds up to {} KiB are one O_DSYNC write; fsyncs below count them)",
                l.durable_write_bytes_max >> 10
            );
        }
        println!(
            "  records per sec        {:>10.0}   ({:.1} x raw fsyncs/s)",
            l.records_per_sec, l.records_per_sec_over_raw_fsyncs_per_sec
        );
        println!(
            "  MB/s                   {:>10.1}   ({:.0}% of raw)",
            l.mb_per_sec,
            l.mb_per_sec_over_raw * 100.0
        );
        println!(
            "  durable p50 / p99      {:>10} / {} us   (p50 = {:.2} x raw fsync p50)",
            l.durable_p50_us, l.durable_p99_us, l.durable_p50_over_raw_fsync_p50
        );
        println!("  fsyncs per sec         {:>10.0}", l.fsyncs_per_sec);
        println!("  records per fsync      {:>10.1}", l.records_per_fsync);
    }
    if let Some(c) = &r.recovery {
        println!("recovery ({} MiB, {} segments)", c.log_mib, c.segments);
        println!(
            "  open                   {:>10.1} ms (scanned {:.1} MB)",
            c.open_ms, c.open_scanned_mb
        );
        println!(
            "  full scan              {:>10.1} ms, {:.0} MB/s ({:.0}% of raw read)",
            c.full_scan_ms,
            c.full_scan_mb_per_sec,
            c.full_scan_over_raw_read * 100.0
        );
    }
    Ok(())
}

/// One flat JSON object: raw figures, then the log's, then recovery's (prefixed).
fn flatten(r: &Report) -> anyhow::Result<serde_json::Value> {
    let mut v = serde_json::to_value(r)?;
    let obj = v.as_object_mut().expect("a struct serializes to an object");
    if let Some(serde_json::Value::Object(log)) = obj.remove("log") {
        obj.extend(log);
    }
    if let Some(serde_json::Value::Object(rec)) = obj.remove("recovery") {
        obj.extend(rec.into_iter().map(|(k, v)| (format!("recovery_{k}"), v)));
    }
    Ok(v)
}
