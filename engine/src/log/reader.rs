//! Reading batches: `read(from_offset, max_bytes)` returns whole, checked frames in one aligned
//! buffer, so every payload can be accessed zero-copy.
//!
//! Bytes come from memory for what is still buffered or being written (so a batch is readable
//! as soon as `append` returns) and for the last `LogConfig::recent_bytes_max` bytes that
//! reached the file (see `recent`), and from the disk for the rest. A read starts at the batch
//! that holds `from` when that batch is among the segment's latest ones, at the sparse index
//! entry before it otherwise.

use corum_types::LogOffset;

use super::index::floor_entry;
use super::segment::corruption;
use super::Log;
use crate::buf::AlignedBuf;
use crate::disk::{Disk, DiskFile};
use crate::error::{Error, FrameError, Result};
use crate::record::{decode_frame, BatchHeader, FrameView, HEADER_BYTES};

/// Frames returned by [`Log::read`]: checked once, viewed without copies.
#[derive(Debug)]
pub struct ReadBatch {
    buf: AlignedBuf,
    /// `(start in buf, header)` of each frame, in offset order.
    frames: Vec<(usize, BatchHeader)>,
}

impl ReadBatch {
    fn empty() -> Self {
        Self {
            buf: AlignedBuf::with_capacity(0),
            frames: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Number of batches.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn frames(&self) -> impl Iterator<Item = FrameView<'_>> + '_ {
        self.frames
            .iter()
            .map(|(at, h)| FrameView::from_checked(*h, &self.buf[*at..*at + h.padded_len()]))
    }

    /// All frames back to back (what a leader sends in one fetch response).
    pub fn bytes(&self) -> &[u8] {
        match (self.frames.first(), self.frames.last()) {
            (Some((a, _)), Some((b, h))) => &self.buf[*a..*b + h.padded_len()],
            _ => &[],
        }
    }

    /// The offset after the last batch, if any.
    pub fn end_offset(&self) -> Option<LogOffset> {
        self.frames.last().map(|(_, h)| h.end_offset())
    }
}

impl<D: Disk> Log<D> {
    /// Batches starting with the one that holds `from`, up to `max_bytes` of frames but always at
    /// least one whole batch if `from < end_offset`. Empty at `end_offset`. Stays within one
    /// segment; call again from `end_offset()` of the result for more.
    pub async fn read(&self, from: LogOffset, max_bytes: usize) -> Result<ReadBatch> {
        let frame_max = self.inner.config.frame_bytes_max;
        let (seg_base, start_pos, limit) = {
            let st = self.inner.state.borrow();
            if from < st.start_offset() || from > st.end_offset {
                return Err(Error::OffsetOutOfRange {
                    requested: from,
                    start: st.start_offset(),
                    end: st.end_offset,
                });
            }
            if from == st.end_offset {
                return Ok(ReadBatch::empty());
            }
            let seg = &st.segments[st.segment_for(from)];
            let position = seg.recent_batches.position_of(from).unwrap_or_else(|| {
                floor_entry(&seg.entries, from)
                    .expect("a non-empty segment has entry 0")
                    .position
            });
            (seg.base, position, seg.size_bytes)
        };
        let interval = self.inner.config.index_interval_bytes as usize;
        let mut want = (max_bytes.max(HEADER_BYTES) + interval + 2 * HEADER_BYTES) as u64;
        loop {
            let end = (start_pos + want).min(limit);
            let buf = self.fetch(seg_base, start_pos, end).await?;
            let mut frames = Vec::new();
            let mut at = 0usize;
            let mut total = 0usize;
            let mut need_more = None;
            while at < buf.len() {
                match decode_frame(&buf[at..], frame_max) {
                    Ok(v) => {
                        let h = *v.header();
                        if h.end_offset() > from {
                            if !frames.is_empty() && total + h.padded_len() > max_bytes {
                                break;
                            }
                            total += h.padded_len();
                            frames.push((at, h));
                        }
                        at += h.padded_len();
                    }
                    Err(FrameError::Truncated { needed, .. }) => {
                        need_more = Some(at + needed);
                        break;
                    }
                    Err(e) => {
                        let path = self.segment_path(seg_base);
                        return Err(corruption(&path, start_pos + at as u64, e.to_string()));
                    }
                }
            }
            match need_more {
                Some(n) if frames.is_empty() && end < limit => {
                    want = want.max(n as u64);
                    continue;
                }
                Some(_) if frames.is_empty() => {
                    let path = self.segment_path(seg_base);
                    return Err(corruption(
                        &path,
                        start_pos + at as u64,
                        "frame runs past segment end",
                    ));
                }
                _ => {}
            }
            if frames.is_empty() {
                // The segment ended before `from`: the log changed under us (truncation).
                let st = self.inner.state.borrow();
                return Err(Error::OffsetOutOfRange {
                    requested: from,
                    start: st.start_offset(),
                    end: st.end_offset,
                });
            }
            return Ok(ReadBatch { buf, frames });
        }
    }

    fn segment_path(&self, base: LogOffset) -> std::path::PathBuf {
        self.inner.dir.join(super::segment::segment_file_name(base))
    }

    /// Bytes `[a, b)` of a segment, from disk and memory.
    async fn fetch(&self, base: LogOffset, a: u64, b: u64) -> Result<AlignedBuf> {
        let (file, disk_end, mem) = {
            let st = self.inner.state.borrow();
            let Some(seg) = st.segments.iter().find(|s| s.base == base) else {
                return Err(Error::OffsetOutOfRange {
                    requested: base,
                    start: st.start_offset(),
                    end: st.end_offset,
                });
            };
            let mem_start = seg
                .inflight
                .as_ref()
                .map_or(seg.tail_pos, |(p, _)| *p)
                .min(seg.tail_pos);
            // The window of recently written bytes serves what lies before `mem_start` when it
            // reaches up to there (or to `b`).
            let (window_start, window_end) = seg.recent.range();
            let mem_from = if window_start < window_end && window_end >= mem_start.min(b) {
                window_start.min(mem_start)
            } else {
                mem_start
            };
            let disk_end = b.min(mem_from).max(a);
            // Sized once for every byte the memory can give: no growth on the way, and when
            // the memory holds the whole range this buffer is the answer (no second copy).
            let mut mem = AlignedBuf::with_capacity((b - disk_end) as usize);
            let mut p = disk_end;
            if p < b.min(mem_start) {
                let to = b.min(mem_start);
                mem.extend_from_slice(seg.recent.slice(p, to));
                p = to;
            }
            if let Some((ip, chunk)) = &seg.inflight {
                while p < b && p < seg.tail_pos {
                    let n = (b.min(seg.tail_pos) - p) as usize;
                    let off = (p - ip) as usize;
                    mem.extend_from_slice(&chunk[off..off + n]);
                    p += n as u64;
                }
            }
            if p < b {
                let off = (p - seg.tail_pos) as usize;
                let n = ((b - p) as usize).min(seg.tail.len() - off);
                mem.extend_from_slice(&seg.tail[off..off + n]);
            }
            (seg.file.clone(), disk_end, mem)
        };
        if disk_end <= a {
            return Ok(mem);
        }
        let file = file.expect("bytes below the memory tail were written to a file");
        let mut out = file.read_at(a, (disk_end - a) as usize).await?;
        if (out.len() as u64) < disk_end - a {
            return Err(corruption(
                file.path(),
                a + out.len() as u64,
                "segment file shorter than its written data",
            ));
        }
        out.extend_from_slice(&mem);
        Ok(out)
    }
}
