//! A node's data directory (`metadata.log.dir`) opened over any [`Disk`]: the quorum state, the
//! newest snapshot, and the metadata log fitted to continue it. The Raft driver recovers
//! through it at start-up ([`Mode::Recover`]); `corum info`, `corum shell --dir` and `corum
//! dump-log` read through it without changing anything ([`Mode::ReadOnly`], over
//! `StdDisk::read_only`), so they work on a read-only or full directory.
//!
//! ```text
//! <metadata.log.dir>/meta.properties, bootstrap.checkpoint   identity, initial voters (format)
//! <metadata.log.dir>/quorum-state                             election state (crate::quorum_state)
//! <metadata.log.dir>/snapshots/*.snapshot                     snapshots (crate::snapshot_store)
//! <metadata.log.dir>/@metadata-0/*.log, *.index               the metadata log (corum_engine::log)
//! ```
//!
//! | step                          | `Recover`                                         | `ReadOnly`                                   |
//! |-------------------------------|---------------------------------------------------|----------------------------------------------|
//! | the directory                 | created if missing                                | a missing one reads as empty                 |
//! | `quorum-state`                | read                                              | read                                         |
//! | newest snapshot               | part files removed, newest read ([`snapshot_store::load_latest`]) | newest read, nothing removed ([`snapshot_store::newest`]) |
//! | the log                       | [`Log::open`]: a torn tail zeroed, an unfinished roll removed | [`Log::open_read_only`]: both reported, nothing written |
//! | fitted to the snapshot ([`LogFit`]) | a suffix that does not continue it cut, a log ending before it restarted at its end | the same reported; [`DataDir::log_end`] is where the kept part ends |
//!
//! Fitting: the core's log starts at the snapshot's end ([`DataDir::log_start`]). Batches from
//! there on stay if the end is a batch boundary and they are not of an older epoch than the
//! snapshot (else they are a suffix a crash left between installing a leader's snapshot and
//! cutting the log); a log that ends before the snapshot restarts empty at its end; a log that
//! starts after the snapshot's end has a gap ([`DataDirError::Gap`]).

use std::path::{Path, PathBuf};

use corum_engine::disk::Disk;
use corum_engine::log::{Log, LogConfig, RecoveryReport};
use corum_engine::record::FrameView;
use corum_raft::{Payload, RestoredBatch, Snapshot, SnapshotId};
use corum_types::LogOffset;

use crate::error::{DriverError, StorageError};
use crate::quorum_state::QuorumState;
use crate::snapshot_store;

/// The metadata log's directory under `metadata.log.dir`.
pub const METADATA_LOG_DIR: &str = "@metadata-0";

/// Bytes of frames read per `Log::read` call when restoring.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// The metadata log's directory inside a `metadata.log.dir`.
pub fn metadata_log_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(METADATA_LOG_DIR)
}

/// Whether opening may change the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Start-up of a node: recovery cuts what it must, durably.
    Recover,
    /// Offline tools: nothing is written; what recovery would cut is reported.
    ReadOnly,
}

/// What fitting the log to the newest snapshot did ([`Mode::Recover`]) or would do
/// ([`Mode::ReadOnly`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFit {
    /// No snapshot, or the log continues it: nothing cut.
    Continues,
    /// The batches from the snapshot's end on (to `log_end`) do not continue it: cut.
    SuffixCut {
        snapshot_end: LogOffset,
        log_end: LogOffset,
    },
    /// The log ended at `log_end`, before the snapshot's end: it restarts empty there.
    Restarted {
        log_end: LogOffset,
        snapshot_end: LogOffset,
    },
}

/// Why a data directory cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// The directory could not be created, or `quorum-state` not read.
    #[error("{0}")]
    Storage(#[from] StorageError),
    /// The newest snapshot does not load (the error names the file; the log below it may be
    /// gone, so there is no falling back to an older one).
    #[error("loading the newest snapshot: {0}")]
    Snapshot(#[source] StorageError),
    /// The metadata log could not be opened (corruption, IO) or read.
    #[error("metadata log: {0}")]
    Log(#[from] corum_engine::Error),
    /// The log starts after the newest snapshot's end: batches in between are missing.
    #[error("the log starts at {log_start} after the newest snapshot's end {snapshot_end}: a gap")]
    Gap {
        log_start: LogOffset,
        snapshot_end: LogOffset,
    },
    /// A read of the log returned nothing below its end (the log changed under the read).
    #[error("reading the log at {at} returned nothing before its end {end}")]
    ShortRead { at: LogOffset, end: LogOffset },
}

impl From<DataDirError> for DriverError {
    fn from(e: DataDirError) -> Self {
        match e {
            DataDirError::Storage(e) => DriverError::QuorumState(e),
            DataDirError::Snapshot(e) => DriverError::SnapshotLoad(e),
            DataDirError::Log(e) => DriverError::Log(e),
            e @ (DataDirError::Gap { .. } | DataDirError::ShortRead { .. }) => {
                DriverError::Diverged {
                    reason: e.to_string(),
                }
            }
        }
    }
}

/// An opened data directory (see the module doc).
pub struct DataDir<D: Disk> {
    pub dir: PathBuf,
    pub mode: Mode,
    pub quorum_state: Option<QuorumState>,
    /// The newest snapshot, which the log continues.
    pub snapshot: Option<Snapshot>,
    pub log: Log<D>,
    /// What opening the log did (or, read-only, would do): a torn tail, an unfinished roll.
    pub log_report: RecoveryReport,
    pub fit: LogFit,
    /// Where the core's log starts: the snapshot's end, or the log's start without one.
    pub log_start: LogOffset,
    /// Where the part of the log that continues `log_start` ends (in [`Mode::Recover`] the
    /// log's end: the rest was cut).
    pub log_end: LogOffset,
}

impl<D: Disk> DataDir<D> {
    /// Opens the data directory `dir` on `disk` (see the module doc for what each mode does).
    pub async fn open(
        disk: D,
        dir: &Path,
        log_config: LogConfig,
        mode: Mode,
    ) -> Result<DataDir<D>, DataDirError> {
        let read_only = mode == Mode::ReadOnly;
        if !read_only {
            disk.create_dir_all(dir)
                .await
                .map_err(|e| crate::fsio::storage_error(e, dir))?;
        }
        let quorum_state = QuorumState::read(&disk, dir).await?;
        let store = snapshot_store::snapshot_dir(dir);
        let snapshot = if read_only {
            snapshot_store::newest(&disk, &store).await
        } else {
            snapshot_store::load_latest(&disk, &store).await
        }
        .map_err(DataDirError::Snapshot)?;
        let log_dir = metadata_log_dir(dir);
        let (log, log_report) = if read_only {
            Log::open_read_only(disk, &log_dir, log_config).await?
        } else {
            Log::open(disk, &log_dir, log_config).await?
        };
        let (fit, log_start, log_end) = match &snapshot {
            Some(s) => fit_log_to_snapshot(&log, s.id).await?,
            None => (LogFit::Continues, log.start_offset(), log.end_offset()),
        };
        Ok(DataDir {
            dir: dir.to_path_buf(),
            mode,
            quorum_state,
            snapshot,
            log,
            log_report,
            fit,
            log_start,
            log_end,
        })
    }

    /// Every batch of the fitted log ([`DataDir::log_start`] to [`DataDir::log_end`]), as the
    /// Raft core restores it.
    pub async fn restore(&self) -> Result<Vec<RestoredBatch>, DataDirError> {
        restore_log(&self.log, self.log_start, self.log_end).await
    }
}

/// Makes `log` continue snapshot `id` (see the module doc), or, on a read-only log, says what
/// that would cut: `(what, the core's log start, where the kept log ends)`.
async fn fit_log_to_snapshot<D: Disk>(
    log: &Log<D>,
    id: SnapshotId,
) -> Result<(LogFit, LogOffset, LogOffset), DataDirError> {
    let end = id.end_offset;
    if log.start_offset() > end {
        return Err(DataDirError::Gap {
            log_start: log.start_offset(),
            snapshot_end: end,
        });
    }
    let log_end = log.end_offset();
    let mut fit = LogFit::Continues;
    if log_end > end {
        let chunk = log.read(end, 1).await?;
        let fits = chunk
            .frames()
            .next()
            .is_some_and(|f| f.header().base_offset == end && f.header().epoch >= id.epoch);
        if !fits {
            fit = LogFit::SuffixCut {
                snapshot_end: end,
                log_end,
            };
            if !log.is_read_only() {
                log.truncate_suffix(end).await?;
            }
        }
    } else if log_end < end {
        fit = LogFit::Restarted {
            log_end,
            snapshot_end: end,
        };
    }
    // A cut inside a batch (the snapshot's end is no batch boundary) leaves the log ending
    // before the snapshot too: either way it restarts empty at the snapshot's end.
    if !log.is_read_only() && log.end_offset() < end {
        log.delete_prefix(end).await?;
    }
    let kept_end = match fit {
        LogFit::Continues => log_end,
        LogFit::SuffixCut { .. } | LogFit::Restarted { .. } => end,
    };
    Ok((fit, end, kept_end))
}

/// A frame's [`corum_raft::Batch::timestamp_ms`]: its first timestamp, which corum writes as the
/// leader's append time; an older corum wrote 0 there, which reads as unknown.
pub fn batch_timestamp(h: &corum_engine::record::BatchHeader) -> i64 {
    if h.first_timestamp_ms > 0 {
        h.first_timestamp_ms
    } else {
        corum_raft::NO_TIMESTAMP
    }
}

/// Every batch of `log` from `from` to `to`, with payloads for control batches (the core
/// rebuilds the voter set from them; other payloads are read back on demand).
pub async fn restore_log<D: Disk>(
    log: &Log<D>,
    from: LogOffset,
    to: LogOffset,
) -> Result<Vec<RestoredBatch>, DataDirError> {
    let mut out = Vec::new();
    visit_frames(log, from, to, |frame| {
        let h = frame.header();
        let control = h.attributes.is_control();
        out.push(RestoredBatch {
            base_offset: h.base_offset,
            epoch: h.epoch,
            record_count: h.record_count,
            control,
            timestamp_ms: batch_timestamp(h),
            payload_bytes: frame.payload().len(),
            payload: control.then(|| Payload::from(frame.payload())),
        });
        Ok::<(), DataDirError>(())
    })
    .await?;
    Ok(out)
}

/// Calls `visit` with every frame of `log` whose batch starts in `from..to`, in offset order,
/// reading about a mebibyte at a time; `from` must be where a batch starts. The frames passed
/// their checks when read. Stops at the first error `visit` returns.
pub async fn visit_frames<D: Disk, E: From<DataDirError>>(
    log: &Log<D>,
    from: LogOffset,
    to: LogOffset,
    mut visit: impl FnMut(FrameView<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let mut at = from;
    while at < to {
        let chunk = log
            .read(at, READ_CHUNK_BYTES)
            .await
            .map_err(|e| E::from(DataDirError::Log(e)))?;
        let Some(end) = chunk.end_offset() else {
            return Err(DataDirError::ShortRead { at, end: to }.into());
        };
        for frame in chunk.frames() {
            if frame.header().base_offset >= to {
                break;
            }
            visit(frame)?;
        }
        at = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use corum_engine::disk::SimDisk;
    use corum_engine::log::NewBatch;
    use corum_engine::record::Attributes;
    use corum_types::Epoch;
    use futures_lite::future::block_on;

    use super::*;

    const DATA: &str = "/sim/data";

    /// A data directory on a simulated disk whose log holds `batches` (epoch, record count)
    /// from offset 0, and, with `snapshot`, a snapshot with that (end, epoch).
    async fn sim_dir(disk: &SimDisk, batches: &[(u64, u32)], snapshot: Option<(u64, u64)>) {
        let (log, _) = Log::open(
            disk.clone(),
            &metadata_log_dir(Path::new(DATA)),
            LogConfig::default(),
        )
        .await
        .unwrap();
        for &(epoch, count) in batches {
            let meta = NewBatch {
                epoch: Epoch(epoch),
                attributes: Attributes::empty(),
                record_count: count,
                first_timestamp_ms: 0,
                max_timestamp_ms: 0,
            };
            log.append(&meta, format!("{epoch}/{count}").as_bytes())
                .unwrap();
        }
        log.flush().await.unwrap();
        log.close().await.unwrap();
        if let Some((end, epoch)) = snapshot {
            let voters = corum_raft::VoterSet::new(vec![corum_raft::Voter {
                key: corum_raft::ReplicaKey {
                    id: corum_types::NodeId(1),
                    directory_id: corum_types::Uuid::ZERO,
                },
                endpoints: vec![corum_raft::Endpoint {
                    listener: "CONTROLLER".into(),
                    host: "h".into(),
                    port: 1,
                }],
            }])
            .unwrap();
            let s = Snapshot {
                id: SnapshotId {
                    end_offset: LogOffset(end),
                    epoch: Epoch(epoch),
                },
                voters,
                kraft_version: 1,
                data: Payload::from(&b"state"[..]),
            };
            snapshot_store::write(disk, &snapshot_store::snapshot_dir(Path::new(DATA)), &s)
                .await
                .unwrap();
        }
    }

    /// `(fit, log_start, log_end, base offsets restored)` of a read-only open, which must change
    /// nothing, then of a recovering open, which must cut what the read-only one reported; then
    /// what survives a crash (the cut is durable).
    async fn both_views(disk: &SimDisk) -> (LogFit, u64, u64, Vec<u64>) {
        let before: Vec<_> = disk
            .paths()
            .iter()
            .map(|p| (p.clone(), disk.contents(p)))
            .collect();
        let ro = DataDir::open(
            disk.clone(),
            Path::new(DATA),
            LogConfig::default(),
            Mode::ReadOnly,
        )
        .await
        .unwrap();
        let ro_view = view(&ro).await;
        drop(ro);
        let after: Vec<_> = disk
            .paths()
            .iter()
            .map(|p| (p.clone(), disk.contents(p)))
            .collect();
        assert_eq!(before, after, "a read-only open changes nothing");
        let rw = DataDir::open(
            disk.clone(),
            Path::new(DATA),
            LogConfig::default(),
            Mode::Recover,
        )
        .await
        .unwrap();
        let rw_view = view(&rw).await;
        assert_eq!(
            rw_view, ro_view,
            "recovery cuts what the read-only open reported"
        );
        assert_eq!(rw.log_end, rw.log.end_offset(), "recovery cut the rest");
        drop(rw);
        disk.crash();
        let again = DataDir::open(
            disk.clone(),
            Path::new(DATA),
            LogConfig::default(),
            Mode::Recover,
        )
        .await
        .unwrap();
        assert_eq!(again.fit, LogFit::Continues, "the cut was durable");
        assert_eq!(
            view(&again).await.1..=view(&again).await.2,
            ro_view.1..=ro_view.2
        );
        ro_view
    }

    async fn view(d: &DataDir<SimDisk>) -> (LogFit, u64, u64, Vec<u64>) {
        let bases = d
            .restore()
            .await
            .unwrap()
            .iter()
            .map(|b| b.base_offset.get())
            .collect();
        (d.fit, d.log_start.get(), d.log_end.get(), bases)
    }

    /// Fitting the log to the snapshot a node starts from, in every state a crash can leave
    /// between installing a leader's snapshot and cutting the log (or a compaction): the batches
    /// from the snapshot's end stay when they continue it; a suffix of an older epoch, a batch
    /// across the end, or a log ending before it are cut (the log restarting empty at the end);
    /// a log starting after the end is a gap. The read-only open reports the same cut without
    /// making it.
    #[test]
    fn the_log_is_fitted_to_the_snapshot_it_continues() {
        block_on(async {
            // No snapshot: the whole log.
            let disk = SimDisk::new(1);
            sim_dir(&disk, &[(1, 1); 3], None).await;
            assert_eq!(
                both_views(&disk).await,
                (LogFit::Continues, 0, 3, vec![0, 1, 2])
            );

            // Continues the snapshot: kept, the core's log starts at the end.
            let disk = SimDisk::new(1);
            sim_dir(&disk, &[(1, 1); 10], Some((5, 1))).await;
            assert_eq!(
                both_views(&disk).await,
                (LogFit::Continues, 5, 10, vec![5, 6, 7, 8, 9])
            );

            // The end falls inside a batch: the batch goes, the log restarts empty at the end.
            let disk = SimDisk::new(2);
            sim_dir(&disk, &[(1, 2); 5], Some((5, 1))).await;
            let cut = LogFit::SuffixCut {
                snapshot_end: LogOffset(5),
                log_end: LogOffset(10),
            };
            assert_eq!(both_views(&disk).await, (cut, 5, 5, vec![]));

            // Batches of an older epoch than the snapshot's from its end on: cut there.
            let disk = SimDisk::new(3);
            sim_dir(&disk, &[(1, 1); 10], Some((5, 2))).await;
            let cut = LogFit::SuffixCut {
                snapshot_end: LogOffset(5),
                log_end: LogOffset(10),
            };
            assert_eq!(both_views(&disk).await, (cut, 5, 5, vec![]));

            // A log that ends before the snapshot: empty at its end.
            let disk = SimDisk::new(4);
            sim_dir(&disk, &[(1, 1); 3], Some((8, 1))).await;
            let restarted = LogFit::Restarted {
                log_end: LogOffset(3),
                snapshot_end: LogOffset(8),
            };
            assert_eq!(both_views(&disk).await, (restarted, 8, 8, vec![]));

            // A log that starts after the snapshot's end: a gap, refused in both modes.
            let disk = SimDisk::new(5);
            sim_dir(&disk, &[], None).await;
            let (log, _) = Log::open(
                disk.clone(),
                &metadata_log_dir(Path::new(DATA)),
                LogConfig::default(),
            )
            .await
            .unwrap();
            log.delete_prefix(LogOffset(20)).await.unwrap();
            drop(log);
            sim_dir(&disk, &[], Some((10, 1))).await;
            for mode in [Mode::ReadOnly, Mode::Recover] {
                let e = DataDir::open(disk.clone(), Path::new(DATA), LogConfig::default(), mode)
                    .await
                    .err()
                    .unwrap();
                assert!(matches!(e, DataDirError::Gap { .. }), "{e}");
                assert!(DriverError::from(e).to_string().contains("gap"));
            }
        });
    }

    /// A read-only open of a directory that does not exist is an empty node (no state, no
    /// snapshot, an empty log) and creates nothing; a recovering open creates the log.
    #[test]
    fn missing_directory() {
        block_on(async {
            let disk = SimDisk::new(1);
            let d = DataDir::open(
                disk.clone(),
                Path::new(DATA),
                LogConfig::default(),
                Mode::ReadOnly,
            )
            .await
            .unwrap();
            assert_eq!((d.quorum_state, d.snapshot.is_none()), (None, true));
            assert_eq!((d.log_start, d.log_end), (LogOffset(0), LogOffset(0)));
            assert!(disk.paths().is_empty());
            drop(d);
            DataDir::open(
                disk.clone(),
                Path::new(DATA),
                LogConfig::default(),
                Mode::Recover,
            )
            .await
            .unwrap();
            assert!(!disk.paths().is_empty());
        });
    }
}
