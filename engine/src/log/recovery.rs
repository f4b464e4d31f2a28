//! Opening a log: load sealed segments from their index files, scan the active segment, cut
//! off a torn tail, refuse corruption.
//!
//! | where the scan stops                                         | outcome                          |
//! |--------------------------------------------------------------|----------------------------------|
//! | active segment: at zeros / end of file                       | clean; nothing dropped           |
//! | active segment: at an old frame of a recycled file (base < segment base) | clean; nothing dropped |
//! | active segment: at zeros, non-zero bytes later in that block | torn tail: block zeroed, reported |
//! | active segment: at a bad frame, nothing valid after it in reach of a write | torn tail: zeroed, reported |
//! | active segment: at a bad frame followed by a valid later frame | `Corruption`                   |
//! | a non-last segment without an index file, early or at a bad frame | unfinished roll: later segments removed, this one recovered as the active one (see `drop_unfinished_roll`) |
//! | the same, but a later segment has an index file               | `Corruption` (a finished round followed the damage) |
//! | anywhere in a sealed segment whose index file exists but is damaged | `Corruption`               |
//! | segments not contiguous                                      | `Corruption`                     |
//!
//! "In reach of a write" is the region one IO round can have written past the durable end:
//! `buffered_bytes_max` plus a block. After a bad frame, everything non-zero there (up to the
//! first intact old frame of a recycled file, and at least the header at the stop) is zeroed
//! (and synced) before the log accepts appends, so torn unsynced bytes can never be mistaken
//! for frames later, and the next scan ends cleanly at the same place. A valid frame that would
//! continue the log anywhere in reach is `Corruption`, whatever stopped the scan. A bit flip in
//! the very last synced batch is indistinguishable from a torn write and is cut off (and
//! reported); anywhere else it is reported as corruption. Why a recycled file's old frames
//! never cause either: the tables in [`super`] ("Segment recycling").

use std::path::{Path, PathBuf};
use std::rc::Rc;

use corum_types::{Epoch, LogOffset};

use super::index::{IndexEntry, SealedIndex};
use super::notify::{IoLock, Notify};
use super::segment::{
    corruption, index_file_name, parse_free_name, parse_segment_name, scan, ScanEnd, Segment,
};
use super::{FreeSegment, Inner, Log, LogConfig, State};
use crate::buf::{align_down_block, align_up_block, AlignedBuf};
use crate::disk::{Disk, DiskFile, OpenMode};
use crate::error::Result;
use crate::record::{decode_frame, FRAME_ALIGN_BYTES, HEADER_BYTES};

/// What `open` found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments: usize,
    pub start_offset: LogOffset,
    pub end_offset: LogOffset,
    /// Bytes of the active segment scanned.
    pub scanned_bytes: u64,
    /// Sealed segments whose index file was missing or damaged and was rebuilt by a scan.
    pub rebuilt_indexes: usize,
    /// Segments of an unfinished roll that were removed (see `drop_unfinished_roll`).
    pub removed_unfinished_segments: usize,
    pub torn_tail: Option<TornTail>,
}

/// A cut-off tail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    pub segment: PathBuf,
    pub position: u64,
    /// Non-zero bytes found (and zeroed) from `position` on.
    pub dropped_bytes: u64,
    pub reason: String,
}

/// One segment as seen by [`inspect_dir`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentReport {
    pub path: PathBuf,
    pub base_offset: LogOffset,
    pub file_bytes: u64,
    /// `(position, header)` of each valid batch.
    pub batches: Vec<(u64, crate::record::BatchHeader)>,
    pub end_position: u64,
    /// `None` when the scan ended cleanly; otherwise what stopped it.
    pub problem: Option<String>,
    /// The problem is at the end of the last segment with nothing valid after it: a torn tail
    /// that `open` cuts off, not corruption.
    pub torn_tail_only: bool,
}

/// Scan every segment of a log directory without changing anything (for `corum dump-log`).
/// Each frame is fully checked; offsets must continue across segments.
pub async fn inspect_dir<D: Disk>(
    disk: &D,
    dir: &Path,
    frame_bytes_max: u32,
) -> Result<Vec<SegmentReport>> {
    let mut out = Vec::new();
    let mut expected: Option<LogOffset> = None;
    let mut epoch = Epoch::ZERO;
    let names = segment_names(disk, dir).await?;
    let count = names.len();
    for (i, (base, name)) in names.into_iter().enumerate() {
        let path = dir.join(&name);
        let file = disk.open(&path, OpenMode::Existing).await?;
        let size = file.size().await?;
        let s = scan(
            &file,
            base,
            0,
            base,
            epoch,
            size,
            frame_bytes_max,
            |_, _| {},
        )
        .await?;
        let mut problem = match &s.stop {
            ScanEnd::Clean | ScanEnd::Stale | ScanEnd::EndOfFile => None,
            ScanEnd::Bad(r) => Some(r.clone()),
        };
        if let Some(e) = expected {
            if e != base && problem.is_none() {
                problem = Some(format!("segment starts at {base}, previous ended at {e}"));
            }
        }
        let mut torn_tail_only = false;
        if problem.is_some() && i + 1 == count {
            let region = file
                .read_at(s.end_position, (size - s.end_position) as usize)
                .await?;
            let last = s.batches.last().map_or(epoch, |(_, h)| h.epoch);
            torn_tail_only =
                find_successor(&region, 0, s.end_offset, last, frame_bytes_max).is_none();
        }
        expected = Some(s.end_offset);
        if let Some((_, h)) = s.batches.last() {
            epoch = h.epoch;
        }
        out.push(SegmentReport {
            path,
            base_offset: base,
            file_bytes: size,
            batches: s.batches,
            end_position: s.end_position,
            problem,
            torn_tail_only,
        });
        file.close().await?;
    }
    Ok(out)
}

async fn segment_names<D: Disk>(disk: &D, dir: &Path) -> Result<Vec<(LogOffset, String)>> {
    let mut v: Vec<_> = disk
        .list(dir)
        .await?
        .into_iter()
        .filter_map(|n| parse_segment_name(&n).map(|b| (b, n)))
        .collect();
    v.sort();
    Ok(v)
}

/// The first frame after byte `from + 8` of `region` that decodes and could continue a log
/// ending at `end_offset` with `last_epoch`: `(its base offset, its index in region)`.
fn find_successor(
    region: &[u8],
    from: usize,
    end_offset: LogOffset,
    last_epoch: Epoch,
    frame_bytes_max: u32,
) -> Option<(LogOffset, usize)> {
    let rest = region.get(from..)?;
    find_frame(
        rest,
        |h| h.base_offset >= end_offset && h.epoch >= last_epoch,
        frame_bytes_max,
    )
    .map(|(offset, at)| (offset, from + at))
}

/// The first frame at a frame-aligned index after 0 of `region` that decodes and satisfies
/// `wanted`: `(its base offset, its index in region)`.
fn find_frame(
    region: &[u8],
    wanted: impl Fn(&crate::record::BatchHeader) -> bool,
    frame_bytes_max: u32,
) -> Option<(LogOffset, usize)> {
    let mut at = FRAME_ALIGN_BYTES;
    while at + crate::record::HEADER_BYTES <= region.len() {
        if region[at..at + 4] == crate::record::FRAME_MAGIC {
            if let Ok(v) = decode_frame(&region[at..], frame_bytes_max) {
                if wanted(v.header()) {
                    return Some((v.header().base_offset, at));
                }
            }
        }
        at += FRAME_ALIGN_BYTES;
    }
    None
}

fn entries_of(
    batches: &[(u64, crate::record::BatchHeader)],
    interval: u64,
) -> (Vec<IndexEntry>, u64) {
    let mut entries: Vec<IndexEntry> = Vec::new();
    let mut since = 0u64;
    for (pos, h) in batches {
        let epoch_changed = entries.last().map(|e| e.epoch) != Some(h.epoch);
        if entries.is_empty() || epoch_changed || since >= interval {
            entries.push(IndexEntry {
                offset: h.base_offset,
                position: *pos,
                epoch: h.epoch,
            });
            since = 0;
        }
        since += h.padded_len() as u64;
    }
    (entries, since)
}

impl<D: Disk> Log<D> {
    /// Open (or create) the log in `dir`, recovering what is on disk.
    pub async fn open(disk: D, dir: &Path, config: LogConfig) -> Result<(Self, RecoveryReport)> {
        Self::open_with(disk, dir, config, false).await
    }

    /// Open the log in `dir` without writing anything (for offline tools, on a read-only or
    /// full directory, over [`crate::disk::StdDisk::read_only`]): the log [`Log::open`] would
    /// recover, read from the files as they are. The [`RecoveryReport`] says what `open` would
    /// cut (a torn tail it would zero, the segments of an unfinished roll it would remove);
    /// nothing is zeroed, removed, synced or created. A missing directory is an empty log.
    /// The log refuses every write ([`Log::failure`] says why); [`Log::close`] only closes.
    pub async fn open_read_only(
        disk: D,
        dir: &Path,
        config: LogConfig,
    ) -> Result<(Self, RecoveryReport)> {
        Self::open_with(disk, dir, config, true).await
    }

    async fn open_with(
        disk: D,
        dir: &Path,
        config: LogConfig,
        read_only: bool,
    ) -> Result<(Self, RecoveryReport)> {
        config.validate()?;
        if !read_only {
            disk.create_dir_all(dir).await?;
        }
        let listed = match disk.list(dir).await {
            Ok(names) => names,
            Err(e) if read_only && crate::disk::files::is_not_found(&e) => Vec::new(),
            Err(e) => return Err(e),
        };
        if !read_only {
            for name in &listed {
                if name.ends_with(".tmp") {
                    disk.remove(&dir.join(name)).await?;
                }
            }
        }
        let mut names: Vec<_> = listed
            .iter()
            .filter_map(|n| parse_segment_name(n).map(|b| (b, n.clone())))
            .collect();
        names.sort();
        let mut report = RecoveryReport::default();
        let mut segments: Vec<Segment<D>> = Vec::new();
        let mut last_epoch = Epoch::ZERO;
        if names.is_empty() && read_only {
            // What `open` would create: an empty log at 0 (no file: nothing is ever read).
            segments.push(Segment::new_empty(dir, LogOffset::ZERO));
        } else if names.is_empty() {
            let mut seg = Segment::new_empty(dir, LogOffset::ZERO);
            let f = disk.open(&seg.path, OpenMode::Create).await?;
            f.allocate(config.segment_bytes).await?;
            f.sync().await?;
            disk.sync_dir(dir).await?;
            seg.file = Some(Rc::new(f));
            segments.push(seg);
        } else {
            let names =
                Self::drop_unfinished_roll(&disk, dir, &config, names, read_only, &mut report)
                    .await?;
            let last_i = names.len() - 1;
            for (i, (base, name)) in names.iter().enumerate() {
                let path = dir.join(name);
                if let Some(prev) = segments.last() {
                    if prev.end_offset != *base {
                        return Err(corruption(
                            &path,
                            0,
                            format!(
                                "segment starts at {base} but the previous one ends at {}",
                                prev.end_offset
                            ),
                        ));
                    }
                }
                let file = disk.open(&path, OpenMode::Existing).await?;
                let seg = if i < last_i {
                    Self::load_sealed(
                        &disk,
                        &config,
                        *base,
                        file,
                        last_epoch,
                        read_only,
                        &mut report,
                    )
                    .await?
                } else {
                    let index_path = dir.join(index_file_name(*base));
                    if !read_only && disk.list(dir).await?.contains(&index_file_name(*base)) {
                        // A stale index of a segment that became active again (truncation).
                        disk.remove(&index_path).await?;
                        disk.sync_dir(dir).await?;
                    }
                    Self::recover_active(
                        dir,
                        &config,
                        *base,
                        file,
                        last_epoch,
                        read_only,
                        &mut report,
                    )
                    .await?
                };
                if let Some(e) = seg.last_epoch() {
                    last_epoch = e;
                }
                segments.push(seg);
            }
        }
        let mut epochs: Vec<(Epoch, LogOffset)> = Vec::new();
        for e in segments.iter().flat_map(|s| s.entries.iter()) {
            if epochs.last().map(|x| x.0) != Some(e.epoch) {
                epochs.push((e.epoch, e.offset));
            }
        }
        let end = segments.last().expect("at least one segment").end_offset;
        // A read-only log never rolls: it keeps no free files (and removes none).
        let free = if read_only {
            Vec::new()
        } else {
            Self::load_free(&disk, dir, &config, segments[0].base).await?
        };
        report.segments = segments.len();
        report.start_offset = segments[0].base;
        report.end_offset = end;
        let state = State {
            segments,
            end_offset: end,
            durable_end: end,
            last_epoch,
            epochs,
            buffered_bytes: 0,
            failed: read_only.then(|| {
                format!(
                    "{} was opened read-only (an offline view): it takes no writes",
                    dir.display()
                )
            }),
            free,
            spare: Vec::new(),
        };
        let log = Log {
            inner: Rc::new(Inner {
                disk,
                dir: dir.to_path_buf(),
                config,
                state: std::cell::RefCell::new(state),
                changed: Notify::default(),
                appended: Notify::default(),
                io: IoLock::default(),
                closed: std::cell::Cell::new(false),
                read_only,
                stats: std::cell::Cell::new(super::LogStats::default()),
            }),
        };
        if let Some(t) = report.torn_tail.as_ref().filter(|_| !read_only) {
            tracing::warn!(segment = %t.segment.display(), position = t.position, dropped_bytes = t.dropped_bytes, reason = %t.reason, "recovery cut off a torn tail");
        }
        Ok((log, report))
    }

    /// A roll creates the new segment file(s) in the same IO round that writes the old
    /// segment's tail, and the old segment's index file is written (tmp file + rename) only
    /// after every file of that round is synced; a round publishes its durable end only after
    /// that. An index rebuilt by recovery is written by the next round, before it publishes. So
    /// every batch ever reported durable lies in a segment all of whose predecessors have index
    /// files, and a non-last segment without an index file belongs to a round that may not have
    /// finished. The directory entries of such a round can be durable before its data (recycling
    /// fsyncs the directory before the round's first write, and a file system may commit entries
    /// on its own), so *every* such segment is checked, oldest first, not only the first one.
    ///
    /// The first one whose frames end in a bad frame, or before the next segment's base offset,
    /// is unfinished: nothing from its stop on was reported durable, and the segments after it
    /// hold only bytes of rounds that never finished. Those are removed and the segment is
    /// recovered as the active one (torn tail cut). If a later segment has an index file, a
    /// round after the damage finished, so the damage is bit rot: `Corruption`. An index file
    /// that exists but is damaged is bit rot too: that segment is rebuilt by a scan, and damage
    /// in it is `Corruption`.
    async fn drop_unfinished_roll(
        disk: &D,
        dir: &Path,
        config: &LogConfig,
        mut names: Vec<(LogOffset, String)>,
        read_only: bool,
        report: &mut RecoveryReport,
    ) -> Result<Vec<(LogOffset, String)>> {
        let listed = disk.list(dir).await?;
        let last = names.len() - 1;
        let mut unfinished = None;
        for i in 0..last {
            let (base, name) = &names[i];
            if listed.contains(&index_file_name(*base)) {
                continue;
            }
            let file = disk.open(&dir.join(name), OpenMode::Existing).await?;
            let size = file.size().await?;
            let s = scan(
                &file,
                *base,
                0,
                *base,
                Epoch::ZERO,
                size,
                config.frame_bytes_max,
                |_, _| {},
            )
            .await?;
            file.close().await?;
            if matches!(s.stop, ScanEnd::Bad(_)) || s.end_offset < names[i + 1].0 {
                unfinished = Some((i, s));
                break;
            }
        }
        let Some((i, s)) = unfinished else {
            return Ok(names);
        };
        if let Some((later, _)) = names[i + 1..last]
            .iter()
            .find(|(b, _)| listed.contains(&index_file_name(*b)))
        {
            let reason = match s.stop {
                ScanEnd::Bad(r) => r,
                _ => format!("frames end at {}", s.end_offset),
            };
            return Err(corruption(
                &dir.join(&names[i].1),
                s.end_position,
                format!("{reason}; the later segment {later} was sealed by a finished round"),
            ));
        }
        for (later, later_name) in names[i + 1..].iter().rev() {
            report.removed_unfinished_segments += 1;
            if read_only {
                continue;
            }
            let path = dir.join(later_name);
            tracing::warn!(segment = %path.display(), "removing a segment of an unfinished roll");
            disk.remove(&path).await?;
            if listed.contains(&index_file_name(*later)) {
                disk.remove(&dir.join(index_file_name(*later))).await?;
            }
        }
        if !read_only {
            disk.sync_dir(dir).await?;
        }
        names.truncate(i + 1);
        Ok(names)
    }

    /// The free segment files to keep: at most `free_segments_max` whose frames all lie below
    /// the log start `start` (a file from before a crash that restarted the log lower, or
    /// beyond the limit, is deleted).
    async fn load_free(
        disk: &D,
        dir: &Path,
        config: &LogConfig,
        start: LogOffset,
    ) -> Result<Vec<FreeSegment>> {
        let mut found: Vec<FreeSegment> = disk
            .list(dir)
            .await?
            .into_iter()
            .filter_map(|n| {
                parse_free_name(&n).map(|stale_end| FreeSegment {
                    stale_end,
                    path: dir.join(n),
                })
            })
            .collect();
        found.sort_by_key(|f| f.stale_end);
        let mut keep = Vec::new();
        let mut removed = false;
        for f in found {
            if f.stale_end <= start && keep.len() < config.free_segments_max {
                keep.push(f);
            } else {
                tracing::warn!(file = %f.path.display(), start = %start, "removing a free segment file that cannot be reused");
                disk.remove(&f.path).await?;
                removed = true;
            }
        }
        if removed {
            disk.sync_dir(dir).await?;
        }
        Ok(keep)
    }

    async fn load_sealed(
        disk: &D,
        config: &LogConfig,
        base: LogOffset,
        file: D::File,
        prev_epoch: Epoch,
        read_only: bool,
        report: &mut RecoveryReport,
    ) -> Result<Segment<D>> {
        let path = file.path().to_path_buf();
        let dir = path
            .parent()
            .expect("a segment file is in the log directory");
        let index_path = dir.join(index_file_name(base));
        let loaded = match disk.open(&index_path, OpenMode::Existing).await {
            Ok(f) => {
                let size = f.size().await?;
                let bytes = f.read_at(0, size as usize).await?;
                f.close().await?;
                SealedIndex::decode(&bytes, base)
            }
            Err(_) => Err("index file missing".to_string()),
        };
        let file_size = file.size().await?;
        let mut rebuilt = false;
        let idx = match loaded {
            Ok(idx) if idx.size_bytes <= file_size && idx.entries[0].epoch >= prev_epoch => idx,
            other => {
                let why = other
                    .err()
                    .unwrap_or_else(|| "index disagrees with its segment".into());
                tracing::warn!(segment = %path.display(), reason = %why, "rebuilding sealed segment index by scan");
                let s = scan(
                    &file,
                    base,
                    0,
                    base,
                    prev_epoch,
                    file_size,
                    config.frame_bytes_max,
                    |_, _| {},
                )
                .await?;
                if let ScanEnd::Bad(reason) = s.stop {
                    return Err(corruption(&path, s.end_position, reason));
                }
                if s.batches.is_empty() {
                    return Err(corruption(&path, 0, "sealed segment holds no batch"));
                }
                let (entries, _) = entries_of(&s.batches, config.index_interval_bytes);
                report.rebuilt_indexes += 1;
                // The frames may have been written but never synced (the round that sealed the
                // segment died before its fdatasync): sync before relying on them.
                if !read_only {
                    file.sync().await?;
                }
                rebuilt = true;
                SealedIndex {
                    base_offset: base,
                    end_offset: s.end_offset,
                    size_bytes: s.end_position,
                    entries,
                }
            }
        };
        let mut seg = Segment::new_empty(dir, base);
        seg.file = Some(Rc::new(file));
        seg.end_offset = idx.end_offset;
        seg.size_bytes = idx.size_bytes;
        seg.written_bytes = idx.size_bytes;
        seg.tail_pos = idx.size_bytes;
        seg.prefilled_bytes = config.segment_bytes;
        seg.entries = idx.entries;
        seg.sealed = true;
        // A rebuilt index is written by the next IO round (see `drop_unfinished_roll`).
        seg.index_written = !rebuilt;
        Ok(seg)
    }

    async fn recover_active(
        dir: &Path,
        config: &LogConfig,
        base: LogOffset,
        file: D::File,
        prev_epoch: Epoch,
        read_only: bool,
        report: &mut RecoveryReport,
    ) -> Result<Segment<D>> {
        let path = file.path().to_path_buf();
        let file_size = file.size().await?;
        let s = scan(
            &file,
            base,
            0,
            base,
            prev_epoch,
            file_size,
            config.frame_bytes_max,
            |_, _| {},
        )
        .await?;
        report.scanned_bytes = s.end_position;
        let p = s.end_position;
        // Look at everything one IO round could have written past the stop.
        let reach_end =
            (align_up_block(p) + config.buffered_bytes_max as u64 + crate::buf::BLOCK_BYTES as u64)
                .min(file_size);
        let block_start = align_down_block(p);
        let region = if reach_end > block_start {
            file.read_at(block_start, (reach_end - block_start) as usize)
                .await?
        } else {
            AlignedBuf::with_capacity(0)
        };
        let rel = (p - block_start) as usize;
        let after = &region[rel.min(region.len())..];
        // How far damage can reach (see the module doc's table): a bad frame, to the last
        // non-zero byte one round could have written, but not into the old content of a
        // recycled file (its first intact stale frame); after a clean end, the rest of the
        // block, which our writes always fill with zeros.
        let damage_len = match &s.stop {
            ScanEnd::Bad(_) => {
                let stale = find_frame(after, |h| h.base_offset < base, config.frame_bytes_max)
                    .map_or(after.len(), |(_, at)| at);
                // The header at the stop may reach into a stale block beyond the zeros.
                let header = HEADER_BYTES.min(after.len());
                after[..stale]
                    .iter()
                    .rposition(|&b| b != 0)
                    .or_else(|| after[..header].iter().rposition(|&b| b != 0))
                    .map(|nz| nz + 1)
            }
            ScanEnd::Clean | ScanEnd::EndOfFile => {
                let block_end =
                    (crate::buf::BLOCK_BYTES - rel % crate::buf::BLOCK_BYTES).min(after.len());
                after[..block_end]
                    .iter()
                    .rposition(|&b| b != 0)
                    .map(|nz| nz + 1)
            }
            ScanEnd::Stale => None,
        };
        // A valid frame that would continue the log after the stop means the damage is not a
        // torn tail (whatever the stop).
        let last_epoch = s.batches.last().map_or(prev_epoch, |(_, h)| h.epoch);
        if let Some((offset, at)) = find_successor(
            &region,
            rel,
            s.end_offset,
            last_epoch,
            config.frame_bytes_max,
        ) {
            let reason = match &s.stop {
                ScanEnd::Bad(r) => r.clone(),
                _ => "a valid batch after the end of the log".to_string(),
            };
            return Err(corruption(
                &path,
                p,
                format!(
                    "{reason}; a valid batch at {offset} follows at byte {}",
                    block_start + at as u64
                ),
            ));
        }
        if let Some(dropped) = damage_len {
            let reason = match &s.stop {
                ScanEnd::Bad(r) => r.clone(),
                _ => "non-zero bytes after the last frame".to_string(),
            };
            let dropped = dropped as u64;
            // Rewrite the block holding `p` with zeros after `p`, and zero the rest: at least
            // a header's worth, so that the next scan ends cleanly at `p` (zeros cutting into a
            // stale frame of a recycled file destroy nothing that is data).
            let header = (HEADER_BYTES as u64).min(file_size.saturating_sub(p));
            let zero_end = align_up_block(p + dropped.max(header));
            if !read_only {
                let mut fix = AlignedBuf::zeroed((zero_end - block_start) as usize);
                fix[..rel].copy_from_slice(&region[..rel]);
                file.write_at(block_start, &fix).await?;
            }
            report.torn_tail = Some(TornTail {
                segment: path.clone(),
                position: p,
                dropped_bytes: dropped,
                reason,
            });
        }
        // What we recovered may have been written but never synced (the process died before
        // its fdatasync): sync now, before calling it durable.
        if !read_only {
            file.sync().await?;
        }
        let mut seg = Segment::new_empty(dir, base);
        let (entries, since) = entries_of(&s.batches, config.index_interval_bytes);
        seg.entries = entries;
        seg.bytes_since_entry = since;
        seg.end_offset = s.end_offset;
        seg.size_bytes = p;
        seg.written_bytes = p;
        seg.tail_pos = block_start;
        seg.tail.extend_from_slice(&region[..rel.min(region.len())]);
        if seg.tail.len() < rel {
            // The file ended inside the block (never with our writes); read what is there.
            let got = file.read_at(block_start, rel).await?;
            seg.tail.clear();
            seg.tail.extend_from_slice(&got);
        }
        seg.prefilled_bytes = p;
        // The file may be a recycled one: assume stale bytes follow the data.
        seg.stale_after = true;
        seg.file = Some(Rc::new(file));
        Ok(seg)
    }
}
