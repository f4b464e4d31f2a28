//! One segment: a file of frames laid end to end, named by its base offset.
//!
//! A segment file is preallocated to `segment_bytes` and starts with its first frame at byte 0.
//! Bytes after the last frame read as zero (fresh allocation, prefill, truncation, or the block
//! padding every write carries), so a scanner finds the end where the magic stops; in a
//! recycled file old frames may follow, and the scan stops at them by their offsets
//! ([`ScanEnd::Stale`]). The segment tracks, in memory:
//!
//! - `size_bytes`: end of the last appended frame (appended, maybe not yet written);
//! - `written_bytes`: how much of that has been handed to the disk;
//! - the `tail`: the bytes from `tail_pos` (block-aligned) to `size_bytes` that the next write
//!   will carry. It always starts with the partial last block, so O_DIRECT writes stay whole
//!   blocks: the partial block is rewritten, with the same prefix, each time batches arrive.
//!
//! Rewriting a block that holds durable frames is safe against the faults we model: a torn write
//! leaves a prefix of the new block, and the new block's prefix *is* the durable bytes.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use corum_types::{Epoch, LogOffset};

use super::index::IndexEntry;
use super::recent::{RecentBatches, RecentBytes};
use crate::buf::AlignedBuf;
use crate::disk::{Disk, DiskFile};
use crate::error::{Error, FrameError, Result};
use crate::record::{decode_frame, BatchHeader, HEADER_BYTES};

/// `00000000000000001234.log`.
pub fn segment_file_name(base: LogOffset) -> String {
    format!("{:020}.log", base.get())
}

/// `00000000000000001234.index`.
pub fn index_file_name(base: LogOffset) -> String {
    format!("{:020}.index", base.get())
}

/// `00000000000000001234.free`: a former segment kept for reuse, every frame in it below 1234.
pub fn free_file_name(stale_end: LogOffset) -> String {
    format!("{:020}.free", stale_end.get())
}

/// The bound of a free (recyclable) file name, if it is one.
pub fn parse_free_name(name: &str) -> Option<LogOffset> {
    let digits = name.strip_suffix(".free")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(LogOffset)
}

/// The base offset of a segment file name, if it is one.
pub fn parse_segment_name(name: &str) -> Option<LogOffset> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(LogOffset)
}

/// In-memory state of one segment.
pub(crate) struct Segment<D: Disk> {
    pub base: LogOffset,
    pub path: PathBuf,
    /// `None` until the syncer creates the file (a freshly rolled segment).
    pub file: Option<Rc<D::File>>,
    pub end_offset: LogOffset,
    pub size_bytes: u64,
    pub written_bytes: u64,
    pub tail: AlignedBuf,
    pub tail_pos: u64,
    /// A chunk being written right now: `(position, bytes)`, kept for reads.
    pub inflight: Option<(u64, Rc<AlignedBuf>)>,
    pub entries: Vec<IndexEntry>,
    /// Bytes appended since the last index entry.
    pub bytes_since_entry: u64,
    pub sealed: bool,
    pub index_written: bool,
    /// How far zeros have been written ahead of the data (prefill), in bytes.
    pub prefilled_bytes: u64,
    /// The bytes after the data may be stale frames (a recycled file, or an active segment
    /// reopened without knowing): a write whose block padding is shorter than a header (data
    /// ending on a block boundary or less than a header before one) then carries one zero block
    /// more, so the scan always finds a zero header right after the last frame.
    pub stale_after: bool,
    /// The free file a roll picked for this segment; the IO round that creates the segment's
    /// file renames it into place instead of creating a fresh one.
    pub from_free: Option<super::FreeSegment>,
    /// The last bytes that reached the file, for readers right behind the writer.
    pub recent: RecentBytes,
    /// Positions of the latest batches, so such reads start at their batch.
    pub recent_batches: RecentBatches,
}

impl<D: Disk> Segment<D> {
    pub fn new_empty(dir: &Path, base: LogOffset) -> Self {
        Self {
            base,
            path: dir.join(segment_file_name(base)),
            file: None,
            end_offset: base,
            size_bytes: 0,
            written_bytes: 0,
            tail: AlignedBuf::with_capacity(crate::buf::BLOCK_BYTES),
            tail_pos: 0,
            inflight: None,
            entries: Vec::new(),
            bytes_since_entry: 0,
            sealed: false,
            index_written: false,
            prefilled_bytes: 0,
            stale_after: false,
            from_free: None,
            recent: RecentBytes::default(),
            recent_batches: RecentBatches::default(),
        }
    }

    pub fn last_epoch(&self) -> Option<Epoch> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Record a batch appended at `position` in the index (and the epoch list).
    pub fn note_batch(&mut self, header: &BatchHeader, position: u64, interval_bytes: u64) {
        let epoch_changed = self.last_epoch() != Some(header.epoch);
        if self.entries.is_empty() || epoch_changed || self.bytes_since_entry >= interval_bytes {
            self.entries.push(IndexEntry {
                offset: header.base_offset,
                position,
                epoch: header.epoch,
            });
            self.bytes_since_entry = 0;
        }
        self.recent_batches.push(header.base_offset, position);
        self.bytes_since_entry += header.padded_len() as u64;
        self.end_offset = header.end_offset();
    }
}

/// Why a scan stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanEnd {
    /// All bytes from the stop position read as zero for at least a header: a clean end.
    Clean,
    /// End of the file.
    EndOfFile,
    /// A valid frame whose base offset lies below the segment's base: left over from the file's
    /// life as an older segment (recycling). A clean end, like `Clean`.
    Stale,
    /// A frame failed to decode or did not continue the offsets/epochs.
    Bad(String),
}

/// Result of scanning a segment from a known frame position.
pub struct Scan {
    pub batches: Vec<(u64, BatchHeader)>,
    /// Where the valid frames end.
    pub end_position: u64,
    pub end_offset: LogOffset,
    pub stop: ScanEnd,
}

/// Bytes read per IO while scanning.
pub const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// Scan frames from `position` (which must hold the batch starting at `expected`) of the segment
/// whose base offset is `base`, checking each frame and that offsets continue and epochs never
/// go down, until the first frame that fails or `limit_bytes`. `visit` sees each valid frame.
/// Reads `SCAN_CHUNK_BYTES` at a time.
///
/// A valid frame that does not continue the offsets ends the scan as [`ScanEnd::Stale`] if its
/// base offset is below `base` (a recycled file's old content: never data of this segment),
/// and as [`ScanEnd::Bad`] otherwise.
#[allow(clippy::too_many_arguments, reason = "one scan, every bound explicit")]
pub async fn scan<F: DiskFile>(
    file: &F,
    base: LogOffset,
    mut position: u64,
    mut expected: LogOffset,
    mut last_epoch: Epoch,
    limit_bytes: u64,
    frame_bytes_max: u32,
    mut visit: impl FnMut(u64, &crate::record::FrameView<'_>),
) -> Result<Scan> {
    let mut batches = Vec::new();
    let mut window = AlignedBuf::with_capacity(0);
    let mut window_pos = 0u64;
    let stop = loop {
        if position >= limit_bytes {
            break ScanEnd::EndOfFile;
        }
        // Make sure the window holds at least a header at `position`, then the whole frame.
        let mut need = HEADER_BYTES as u64;
        let decoded = loop {
            let have = (window_pos + window.len() as u64).saturating_sub(position);
            if position < window_pos || have < need {
                let start = crate::buf::align_down_block(position);
                let len = (SCAN_CHUNK_BYTES as u64).max(need + (position - start) + 4096);
                let len = len.min(limit_bytes - start);
                window = file.read_at(start, len as usize).await?;
                window_pos = start;
                let have = (window_pos + window.len() as u64).saturating_sub(position);
                if have < need {
                    let at = ((position - window_pos) as usize).min(window.len());
                    let rest_zero = window[at..].iter().all(|&b| b == 0);
                    break Err(if rest_zero {
                        None
                    } else {
                        Some(Some(FrameError::Truncated {
                            needed: need as usize,
                            available: have as usize,
                        }))
                    });
                }
            }
            let at = (position - window_pos) as usize;
            let bytes = &window[at..];
            match decode_frame(bytes, frame_bytes_max) {
                Ok(v) => {
                    visit(position, &v);
                    break Ok(*v.header());
                }
                Err(FrameError::Truncated { needed, .. }) if need < needed as u64 => {
                    need = needed as u64;
                }
                Err(e) => {
                    let zero = bytes.len() >= HEADER_BYTES
                        && bytes[..HEADER_BYTES].iter().all(|&b| b == 0);
                    break Err(Some(if zero { None } else { Some(e) }));
                }
            }
        };
        match decoded {
            Ok(h) => {
                if h.base_offset < base {
                    break ScanEnd::Stale;
                }
                if h.base_offset != expected {
                    break ScanEnd::Bad(format!(
                        "batch base offset {} does not continue the log at {}",
                        h.base_offset, expected
                    ));
                }
                if h.epoch < last_epoch {
                    break ScanEnd::Bad(format!("epoch {} after epoch {}", h.epoch, last_epoch));
                }
                batches.push((position, h));
                expected = h.end_offset();
                last_epoch = h.epoch;
                position += h.padded_len() as u64;
            }
            Err(None) => break ScanEnd::EndOfFile,
            Err(Some(None)) => break ScanEnd::Clean,
            Err(Some(Some(e))) => break ScanEnd::Bad(e.to_string()),
        }
    };
    Ok(Scan {
        batches,
        end_position: position,
        end_offset: expected,
        stop,
    })
}

/// Make a corruption error for `path` at `position`.
pub fn corruption(path: &Path, position: u64, reason: impl Into<String>) -> Error {
    Error::Corruption {
        segment: path.to_path_buf(),
        position,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_roundtrip() {
        // Proves segment names parse back to their base offset and other names are ignored.
        assert_eq!(
            segment_file_name(LogOffset(1234)),
            "00000000000000001234.log"
        );
        assert_eq!(
            parse_segment_name("00000000000000001234.log"),
            Some(LogOffset(1234))
        );
        assert_eq!(parse_segment_name("00000000000000001234.index"), None);
        assert_eq!(parse_segment_name("1234.log"), None);
        assert_eq!(parse_segment_name("0000000000000000123x.log"), None);
    }
}
