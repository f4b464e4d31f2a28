//! The metadata log on disk: batch frames (`corum_engine::record::decode_frame`), sealed
//! segments' index files (`corum_engine::log::index::SealedIndex::decode`) and the recovery
//! scan of a log directory (`inspect_dir`, `Log::open`) over an in-memory `SimDisk`.
//!
//! The first byte picks what the rest is (modulo 3):
//! - 0: a stream of frames, decoded one after another until one fails. A frame that decodes
//!   re-encodes, from its header and payload, to exactly its own bytes.
//! - 1: an index file of the segment based at offset 0. One that decodes re-encodes to bytes
//!   that decode to the same index.
//! - 2: the active segment file of a log directory (`00000000000000000000.log`, padded with
//!   zeros to a whole block). `inspect_dir` reports it without error or panic; `Log::open`
//!   either refuses it with an error or recovers a log whose batches all read back, whose
//!   invariants hold, and which a second open finds clean, at the same end (recovery zeroed
//!   any torn tail it cut).

use std::path::Path;

use corum_engine::disk::{Disk, DiskFile, OpenMode, SimDisk};
use corum_engine::log::index::{IndexEntry, SealedIndex};
use corum_engine::log::segment::segment_file_name;
use corum_engine::log::{inspect_dir, Log, LogConfig};
use corum_engine::record::{decode_frame, encode_frame, Attributes, BatchMeta};
use corum_types::{Epoch, LogOffset};
use futures_lite::future::block_on;

#[path = "common.rs"]
mod common;

/// The largest frame the harness's logs take.
const FRAME_BYTES_MAX: u32 = 4096;
const BLOCK_BYTES: usize = 4096;
/// A segment file is at most this long (a longer input is cut).
const SEGMENT_BYTES: u64 = 16 << 10;

fn dir() -> &'static Path {
    Path::new("/data/__cluster_metadata-0")
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: SEGMENT_BYTES,
        frame_bytes_max: FRAME_BYTES_MAX,
        index_interval_bytes: 512,
        buffered_bytes_max: 64 << 10,
        prefill_ahead_bytes: 8192,
        prefill_chunk_bytes: 4096,
        free_segments_max: 2,
        recent_bytes_max: 1024,
        durable_write_bytes_max: 4096,
    }
}

pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector % 3 {
        0 => frames(rest),
        1 => index(rest),
        _ => segment(rest),
    }
}

fn frames(mut rest: &[u8]) {
    while !rest.is_empty() {
        match decode_frame(rest, FRAME_BYTES_MAX) {
            Ok(view) => {
                let h = *view.header();
                let meta = BatchMeta {
                    attributes: h.attributes,
                    base_offset: h.base_offset,
                    epoch: h.epoch,
                    record_count: h.record_count,
                    first_timestamp_ms: h.first_timestamp_ms,
                    max_timestamp_ms: h.max_timestamp_ms,
                };
                let again = encode_frame(&meta, view.payload(), FRAME_BYTES_MAX)
                    .expect("an accepted frame's header and payload encode");
                assert_eq!(again, view.bytes(), "a frame re-encodes to its own bytes");
                rest = &rest[view.bytes().len()..];
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                break;
            }
        }
    }
}

fn index(bytes: &[u8]) {
    match SealedIndex::decode(bytes, LogOffset(0)) {
        Ok(index) => {
            let again = SealedIndex::decode(&index.encode(), LogOffset(0))
                .expect("a re-encoded index decodes");
            assert_eq!(again, index, "an index survives a round trip");
        }
        Err(reason) => assert!(!reason.is_empty()),
    }
}

fn segment(bytes: &[u8]) {
    let bytes = &bytes[..bytes.len().min(SEGMENT_BYTES as usize)];
    let mut padded = bytes.to_vec();
    padded.resize(
        bytes.len().next_multiple_of(BLOCK_BYTES).max(BLOCK_BYTES),
        0,
    );
    block_on(async {
        let disk = SimDisk::new(1);
        disk.create_dir_all(dir()).await.expect("a directory");
        let file = disk
            .open(
                &dir().join(segment_file_name(LogOffset(0))),
                OpenMode::Create,
            )
            .await
            .expect("a segment file");
        file.write_at(0, &padded).await.expect("written");
        file.sync().await.expect("synced");
        file.close().await.expect("closed");

        let reports = inspect_dir(&disk, dir(), FRAME_BYTES_MAX)
            .await
            .expect("inspecting a readable directory succeeds");
        assert_eq!(reports.len(), 1);

        let Ok((log, report)) = Log::open(disk.clone(), dir(), config()).await else {
            return;
        };
        log.check_invariants();
        let end = log.end_offset();
        assert_eq!(report.end_offset, end);
        let mut at = log.start_offset();
        while at < end {
            let read = log
                .read(at, 1 << 20)
                .await
                .expect("a recovered batch reads back");
            let mut frames = 0;
            for f in read.frames() {
                at = f.header().end_offset();
                frames += 1;
            }
            assert!(frames > 0, "a read below the end returns a batch");
        }
        log.close().await.expect("closed");

        let (again, second) = Log::open(disk.clone(), dir(), config())
            .await
            .expect("a recovered log opens again");
        assert_eq!(
            again.end_offset(),
            end,
            "the second open ends where the first did"
        );
        assert_eq!(second.torn_tail, None, "the first open cut the torn tail");
        again.close().await.expect("closed");
    });
}

/// The frames of `common::batches` from offset 0, back to back, as a segment holds them.
fn segment_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    for b in common::batches(0) {
        let meta = BatchMeta {
            attributes: if b.control {
                Attributes::CONTROL
            } else {
                Attributes::empty()
            },
            base_offset: b.base_offset,
            epoch: b.epoch,
            record_count: b.record_count,
            first_timestamp_ms: b.timestamp_ms,
            max_timestamp_ms: b.timestamp_ms,
        };
        out.extend_from_slice(&encode_frame(&meta, &b.payload, FRAME_BYTES_MAX).expect("fits"));
    }
    out
}

/// Seeds: real batches as frames, an index file, and segment files (whole, torn in the last
/// frame, with a bit flipped in the first frame, recycled with an older frame after the end).
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let with = |selector: u8, bytes: &[u8]| {
        let mut out = vec![selector];
        out.extend_from_slice(bytes);
        out
    };
    let segment = segment_bytes();
    let mut seeds = vec![
        ("frames".to_owned(), with(0, &segment)),
        ("frames-truncated".to_owned(), with(0, &segment[..40])),
    ];
    let index = SealedIndex {
        base_offset: LogOffset(0),
        end_offset: LogOffset(12),
        size_bytes: segment.len() as u64,
        entries: vec![
            IndexEntry {
                offset: LogOffset(0),
                position: 0,
                epoch: Epoch(3),
            },
            IndexEntry {
                offset: LogOffset(3),
                position: 512,
                epoch: Epoch(3),
            },
        ],
    };
    seeds.push(("index".to_owned(), with(1, &index.encode())));
    seeds.push(("segment".to_owned(), with(2, &segment)));
    seeds.push((
        "segment-torn".to_owned(),
        with(2, &segment[..segment.len() - 20]),
    ));
    let mut flipped = segment.clone();
    flipped[70] ^= 4;
    seeds.push(("segment-bit-flip".to_owned(), with(2, &flipped)));
    let mut recycled = segment.clone();
    recycled.resize(2048, 0);
    recycled.extend_from_slice(&segment);
    seeds.push(("segment-recycled".to_owned(), with(2, &recycled)));
    seeds
}
