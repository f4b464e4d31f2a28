//! `corum dump-log --dir DIR [--verify]`: print the segments and batches of a log directory.
//!
//! Every frame is checked (header, length, CRC-32C, padding) and offsets must continue across
//! segments. With `--verify` the command exits non-zero when it finds corruption; a torn tail
//! of the last segment (which opening the log cuts off) is reported but is not corruption.
//! The directory is read through a read-only `StdDisk`: nothing in it is ever written, so it
//! works on a read-only mount.
//!
//! # `--kafka-export OUT`: the log as Kafka's files
//!
//! `corum dump-log --dir DATA --kafka-export OUT` writes a stopped node's metadata log and its
//! newest snapshot into `OUT/__cluster_metadata-0/` in Kafka's own format
//! ([`corum_kafka::log::export`]), for Kafka's tools (`kafka-dump-log
//! --cluster-metadata-decoder`, `kafka-metadata-shell --snapshot`):
//!
//! - the log as segment files (`00000000000000000000.log`, named by the base offset of their
//!   first batch): every batch on disk from the log's first one (after the newest snapshot
//!   once the log was compacted) to where it continues that snapshot (a suffix a node's start
//!   would cut, and a torn tail, are left out), each as the Kafka RecordBatch a broker
//!   fetching it receives: same base offset, leader epoch and record count;
//! - the newest snapshot as `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint` (KIP-630),
//!   in the layout a broker downloading it receives.
//!
//! Rendering is the Kafka listener's ([`corum_kafka::log`]): record versions of the finalized
//! `metadata.version` (the level at the log's end until the log's own FeatureLevel records
//! move it), no timestamps (-1). A VotersRecord lists each voter's Raft
//! endpoints, then its endpoint on the Kafka listener named `--kafka-listener` (default
//! `KAFKA`, the default of `corum.kafka.listener.names`) as the controllers' registrations in
//! the directory state it (a node's listener serves the same, with its own advertised
//! endpoint); a controller registered without that listener is listed with its Raft
//! endpoints only. `DATA` is read as above (nothing written); `OUT/__cluster_metadata-0` must
//! be new or empty, and an export that fails removes what it wrote. One summary line is
//! printed: batches, records, offsets and files, and the snapshot's id.

use std::path::{Path, PathBuf};

use anyhow::Context;
use corum_engine::disk::StdDisk;
use corum_engine::log::{inspect_dir, LogConfig};
use corum_engine::record::DEFAULT_FRAME_BYTES_MAX;
use corum_kafka::log::export::{voter_endpoints, ExportSummary, KafkaExport, SEGMENT_BYTES_MAX};
use corum_kafka::log::{MetadataVersion, RenderContext};
use corum_node::data_dir::{visit_frames, DataDir, LogFit, METADATA_LOG_DIR};
use corum_raft::{Batch, Payload};

use crate::cmd::shell::{image_of, open_directory};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The log directory (<metadata.log.dir>/@metadata-0), or a node's metadata.log.dir
    /// (its metadata log is read then).
    #[arg(long)]
    pub dir: PathBuf,
    /// Exit non-zero if any segment is corrupt.
    #[arg(long)]
    pub verify: bool,
    /// Print only one line per segment.
    #[arg(long)]
    pub summary: bool,
    /// Largest frame accepted, as configured for the log.
    #[arg(long, default_value_t = DEFAULT_FRAME_BYTES_MAX)]
    pub frame_bytes_max: u32,
    /// Instead of printing: write the log and the newest snapshot in Kafka's format into
    /// OUT/__cluster_metadata-0 (new or empty), for Kafka's kafka-dump-log and metadata shell.
    #[arg(long, value_name = "OUT", conflicts_with_all = ["verify", "summary"])]
    pub kafka_export: Option<PathBuf>,
    /// With --kafka-export: the Kafka listener whose registered endpoints the VotersRecords
    /// list after each voter's Raft endpoints.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "KAFKA",
        requires = "kafka_export"
    )]
    pub kafka_listener: String,
}

pub fn run(mut args: Args) -> anyhow::Result<()> {
    if let Some(out) = args.kafka_export.clone() {
        let summary = kafka_export(&args, &out)?;
        println!("{}", summary_line(&summary));
        return Ok(());
    }
    // A node's data directory holds its metadata log in @metadata-0: read that one.
    let nested = corum_node::data_dir::metadata_log_dir(&args.dir);
    if args.dir.join("meta.properties").exists() && nested.is_dir() {
        args.dir = nested;
    }
    // Blocking reads through a read-only disk: no executor, nothing written into the directory.
    let segments = futures_lite::future::block_on(inspect_dir(
        &StdDisk::read_only(),
        &args.dir,
        args.frame_bytes_max,
    ))
    .with_context(|| format!("reading log directory {}", args.dir.display()))?;
    let mut corrupt = 0usize;
    let mut batches = 0usize;
    for seg in &segments {
        println!(
            "segment {}  base {}  file {} bytes  data {} bytes  batches {}",
            seg.path.display(),
            seg.base_offset.get(),
            seg.file_bytes,
            seg.end_position,
            seg.batches.len()
        );
        if !args.summary {
            println!(
                "  {:>12} {:>12} {:>8} {:>7} {:>9} {:>7} {:>10} checksum",
                "position", "offset", "epoch", "count", "bytes", "control", "crc32c"
            );
            // Opened at the first control batch, then kept for the segment's others.
            let mut file = None;
            for (pos, h) in &seg.batches {
                println!(
                    "  {:>12} {:>12} {:>8} {:>7} {:>9} {:>7} {:>#10x} ok",
                    pos,
                    h.base_offset.get(),
                    h.epoch.get(),
                    h.record_count,
                    h.frame_len,
                    h.attributes.is_control(),
                    h.crc32c
                );
                if h.attributes.is_control() {
                    println!(
                        "{:>16}{}",
                        "",
                        control_records(&mut file, &seg.path, *pos, h)
                    );
                }
            }
        }
        batches += seg.batches.len();
        if let Some(problem) = &seg.problem {
            if seg.torn_tail_only {
                println!(
                    "  torn tail at byte {}: {problem} (opening the log cuts it off)",
                    seg.end_position
                );
            } else {
                println!("  CORRUPTION at byte {}: {problem}", seg.end_position);
                corrupt += 1;
            }
        }
    }
    println!(
        "{} segments, {batches} batches, {corrupt} corrupt",
        segments.len()
    );
    if args.verify && corrupt > 0 {
        anyhow::bail!("{corrupt} corrupt segment(s) in {}", args.dir.display());
    }
    Ok(())
}

/// What a control batch holds (Raft's own records: LeaderChange, Voters, KRaftVersion), one
/// line, read from the segment at `position` (the frame passed its checksum in the scan);
/// `file` is the segment, opened on first use.
fn control_records(
    file: &mut Option<std::fs::File>,
    segment: &std::path::Path,
    position: u64,
    header: &corum_engine::record::BatchHeader,
) -> String {
    use corum_raft::control::ControlRecord;
    use std::io::{Read, Seek, SeekFrom};
    let start = position + corum_engine::record::HEADER_BYTES as u64;
    let mut payload = vec![0u8; header.payload_len()];
    let read = (|| {
        if file.is_none() {
            *file = Some(std::fs::File::open(segment)?);
        }
        let f = file.as_mut().expect("opened above");
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut payload)
    })();
    if let Err(e) = read {
        return format!("(control records unreadable: {e})");
    }
    let records = match corum_raft::control::decode(&payload) {
        Ok(r) => r,
        Err(e) => return format!("(control records undecodable: {e})"),
    };
    let shown: Vec<String> = records
        .iter()
        .map(|r| match r {
            ControlRecord::LeaderChange(l) => format!(
                "LeaderChange(epoch {}, leader {}, granted by {:?})",
                l.epoch.0,
                l.leader.0,
                l.granted_by.iter().map(|n| n.0).collect::<Vec<_>>()
            ),
            ControlRecord::Voters(v) => {
                let voters: Vec<String> = v
                    .voters
                    .voters()
                    .iter()
                    .map(|voter| {
                        let endpoints: Vec<String> = voter
                            .endpoints
                            .iter()
                            .map(|e| format!("{}://{}:{}", e.listener, e.host, e.port))
                            .collect();
                        format!(
                            "{}:{} {}",
                            voter.key.id.0,
                            voter.key.directory_id,
                            endpoints.join(",")
                        )
                    })
                    .collect();
                format!("Voters[{}]", voters.join("; "))
            }
            ControlRecord::KRaftVersion(k) => format!("KRaftVersion({})", k.version),
        })
        .collect();
    shown.join(" ")
}

/// The node's `metadata.log.dir` that `dir` names: itself, or the parent of its `@metadata-0`.
fn data_dir_of(dir: &Path) -> anyhow::Result<PathBuf> {
    if dir.join(METADATA_LOG_DIR).is_dir() {
        return Ok(dir.to_path_buf());
    }
    match dir.parent() {
        Some(parent) if dir.file_name().is_some_and(|n| n == METADATA_LOG_DIR) => {
            Ok(parent.to_path_buf())
        }
        _ => anyhow::bail!(
            "{} is neither a node's metadata.log.dir nor its {METADATA_LOG_DIR}: --kafka-export \
             needs the data directory (its snapshots are beside the log)",
            dir.display()
        ),
    }
}

/// Writes the data directory's log and newest snapshot into `out` (see the module doc).
fn kafka_export(args: &Args, out: &Path) -> anyhow::Result<ExportSummary> {
    let dir = data_dir_of(&args.dir)?;
    let log_config = LogConfig {
        frame_bytes_max: args.frame_bytes_max,
        ..LogConfig::default()
    };
    futures_lite::future::block_on(async {
        let data = open_directory(&dir, log_config).await?;
        // The registrations the VotersRecords need are in the image at the log's end.
        let image = image_of(&data).await?;
        // Records before the log's first FeatureLevel record are rendered at the level
        // finalized at its end, as a node's Kafka listener renders them.
        let metadata_version = MetadataVersion(
            i16::try_from(corum_controller::control::feature_control::metadata_version(&image))
                .unwrap_or(i16::MAX),
        );
        let ctx = RenderContext {
            voter_endpoints: voter_endpoints(&image.controllers, &args.kafka_listener),
            metadata_version: std::cell::Cell::new(metadata_version),
            ..RenderContext::default()
        };
        let mut export = KafkaExport::create(out, ctx, SEGMENT_BYTES_MAX)
            .with_context(|| format!("exporting into {}", out.display()))?;
        match write_export(&data, &mut export).await {
            Ok(()) => export
                .finish()
                .with_context(|| format!("exporting into {}", out.display())),
            Err(e) => {
                export.discard();
                Err(e)
            }
        }
    })
}

/// Appends every batch of the log from its start to where it continues the newest snapshot,
/// then writes that snapshot.
async fn write_export(data: &DataDir<StdDisk>, export: &mut KafkaExport) -> anyhow::Result<()> {
    // From the log's first batch on disk (what the snapshot summarizes too, as Kafka keeps
    // it) to the end of the part that continues the snapshot. When fitting would cut (a
    // suffix that does not continue it, a log ending before it), the kept part ends at the
    // snapshot's end, and a batch across that end is not part of its history.
    let from = data.log.start_offset();
    let to = data.log_end.min(data.log.end_offset());
    let whole_history_end = match data.fit {
        LogFit::Continues => None,
        LogFit::SuffixCut { snapshot_end, .. } | LogFit::Restarted { snapshot_end, .. } => {
            Some(snapshot_end)
        }
    };
    visit_frames(&data.log, from, to, |frame| {
        let h = frame.header();
        if whole_history_end.is_some_and(|end| h.end_offset() > end) {
            return Ok(());
        }
        let batch = Batch {
            base_offset: h.base_offset,
            epoch: h.epoch,
            record_count: h.record_count,
            control: h.attributes.is_control(),
            timestamp_ms: corum_node::data_dir::batch_timestamp(h),
            payload: Payload::from(frame.payload()),
        };
        export
            .append(&batch)
            .with_context(|| format!("exporting the batch at offset {}", h.base_offset))
    })
    .await?;
    if let Some(snapshot) = &data.snapshot {
        export.write_snapshot(snapshot).with_context(|| {
            format!(
                "exporting the snapshot through offset {} (epoch {})",
                snapshot.id.end_offset, snapshot.id.epoch.0
            )
        })?;
    }
    Ok(())
}

/// The one line `--kafka-export` prints.
fn summary_line(s: &ExportSummary) -> String {
    let file_name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let log = match s.offsets {
        Some((first, end)) => format!(
            "{} batches ({} control), {} records, offsets {} to {} in {} segment(s) ({} bytes, first {})",
            s.batches,
            s.control_batches,
            s.records,
            first.0,
            end.0.saturating_sub(1),
            s.segments.len(),
            s.log_bytes,
            s.segments.first().map(|p| file_name(p)).unwrap_or_default()
        ),
        None => "no batches".to_owned(),
    };
    let snapshot = match &s.snapshot {
        Some(snap) => format!(
            "snapshot {}-{} ({} records, {} bytes, {})",
            snap.id.end_offset.0,
            snap.id.epoch.0,
            snap.records,
            snap.bytes,
            file_name(&snap.path)
        ),
        None => "no snapshot".to_owned(),
    };
    format!("exported to {}: {log}; {snapshot}", s.dir.display())
}
