//! `corum dump-log --dir DIR [--verify]`: print the segments and batches of a log directory.
//!
//! Every frame is checked (header, length, CRC-32C, padding) and offsets must continue across
//! segments. With `--verify` the command exits non-zero when it finds corruption; a torn tail
//! of the last segment (which opening the log cuts off) is reported but is not corruption.
//! The directory is read through a read-only `StdDisk`: nothing in it is ever written, so it
//! works on a read-only mount.

use std::path::PathBuf;

use anyhow::Context;
use corum_engine::disk::StdDisk;
use corum_engine::log::inspect_dir;
use corum_engine::record::DEFAULT_FRAME_BYTES_MAX;

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
}

pub fn run(mut args: Args) -> anyhow::Result<()> {
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
