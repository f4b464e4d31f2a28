//! Suffix truncation (Raft divergence) and prefix deletion (after a snapshot).
//!
//! Both hold the IO lock, so no group-commit round runs concurrently, and both are durable
//! when they return. Their order of steps keeps every crash point recoverable:
//!
//! `truncate_suffix`: (1) flush pending appends; (2) remove later segments newest first and
//! the kept segment's `.index`, then fsync the directory; (3) ftruncate the kept segment at the
//! cut (the file system zeroes what follows), re-extend it, fdatasync. A crash after (2) leaves
//! a shorter but contiguous log whose last segment still holds the old tail: a valid older
//! state. After (3) no stale frame exists past the end, so none can ever be rescanned.
//!
//! `delete_prefix` removes whole segments only, oldest first (the newest of them renamed into the
//! free pool, see "Segment recycling" in [`super`]), then fsyncs the directory: a crash
//! leaves a contiguous suffix of segments. The log start becomes the base of the first segment
//! kept. Deleting past the end (a snapshot newer than the log) removes every segment and starts
//! an empty one at `before`; a crash in between may leave an empty directory, which opens as an
//! empty log at offset 0 — callers re-apply their snapshot position after a restart.

use std::rc::Rc;

use corum_types::LogOffset;

use super::index::floor_entry;
use super::segment::{free_file_name, index_file_name, scan, Segment};
use super::{FreeSegment, Log};
use crate::buf::align_down_block;
use crate::disk::{Disk, DiskFile, OpenMode};
use crate::error::Result;

impl<D: Disk> Log<D> {
    /// Remove every batch at or after `end`. If `end` falls inside a batch, that whole batch is
    /// removed too. Returns the new end offset. Durable when it returns.
    pub async fn truncate_suffix(&self, end: LogOffset) -> Result<LogOffset> {
        let _guard = self.inner.io.lock(&self.inner.changed).await;
        self.inner.state.borrow().check_failed()?;
        let needs_flush = self.inner.state.borrow().buffered_bytes > 0
            || self
                .inner
                .state
                .borrow()
                .segments
                .iter()
                .any(|s| s.file.is_none() || (s.sealed && !s.index_written));
        if needs_flush {
            self.sync_round().await?;
        }
        match self.truncate_locked(end).await {
            Ok(new_end) => {
                self.inner.changed.notify_all();
                Ok(new_end)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    async fn truncate_locked(&self, end: LogOffset) -> Result<LogOffset> {
        let disk = &self.inner.disk;
        let cfg = &self.inner.config;
        // Which segment keeps the cut, and where in it.
        let (keep_i, keep_base, file, entry, seg_size, to_remove) = {
            let st = self.inner.state.borrow();
            if end >= st.end_offset {
                return Ok(st.end_offset);
            }
            let end = end.max(st.start_offset());
            let mut keep_i = st.segment_for(end);
            if st.segments[keep_i].base == end && keep_i > 0 {
                keep_i -= 1;
            }
            let seg = &st.segments[keep_i];
            let entry = if seg.end_offset <= end {
                None
            } else {
                floor_entry(&seg.entries, end).copied()
            };
            let to_remove: Vec<_> = st.segments[keep_i + 1..]
                .iter()
                .map(|s| (s.base, s.path.clone()))
                .collect();
            (
                keep_i,
                seg.base,
                seg.file.clone().expect("flushed: every segment has a file"),
                entry,
                seg.size_bytes,
                to_remove,
            )
        };
        // Find the batch boundary at or before `end`.
        let (cut_pos, new_end) = match entry {
            None => (
                seg_size,
                self.inner.state.borrow().segments[keep_i].end_offset,
            ),
            Some(e) => {
                let mut cut = (e.position, e.offset);
                let s = scan(
                    &*file,
                    keep_base,
                    e.position,
                    e.offset,
                    e.epoch,
                    seg_size,
                    cfg.frame_bytes_max,
                    |_, _| {},
                )
                .await?;
                for (pos, h) in &s.batches {
                    if h.end_offset() > end {
                        break;
                    }
                    cut = (pos + h.padded_len() as u64, h.end_offset());
                }
                if s.end_offset < end.min(self.inner.state.borrow().segments[keep_i].end_offset) {
                    return Err(super::segment::corruption(
                        file.path(),
                        s.end_position,
                        "truncation scan stopped early",
                    ));
                }
                cut
            }
        };
        for (base, path) in to_remove.iter().rev() {
            disk.remove(path).await?;
            let idx = self.inner.dir.join(index_file_name(*base));
            if disk
                .list(&self.inner.dir)
                .await?
                .contains(&index_file_name(*base))
            {
                disk.remove(&idx).await?;
            }
        }
        if disk
            .list(&self.inner.dir)
            .await?
            .contains(&index_file_name(keep_base))
        {
            disk.remove(&self.inner.dir.join(index_file_name(keep_base)))
                .await?;
        }
        disk.sync_dir(&self.inner.dir).await?;
        file.truncate(cut_pos).await?;
        file.allocate(cfg.segment_bytes).await?;
        file.sync().await?;
        let tail_pos = align_down_block(cut_pos);
        let tail = file
            .read_at(tail_pos, (cut_pos - tail_pos) as usize)
            .await?;
        let mut st = self.inner.state.borrow_mut();
        st.segments.truncate(keep_i + 1);
        let seg = &mut st.segments[keep_i];
        seg.sealed = false;
        seg.index_written = false;
        seg.size_bytes = cut_pos;
        seg.written_bytes = cut_pos;
        seg.tail_pos = tail_pos;
        seg.tail = tail;
        seg.end_offset = new_end;
        seg.prefilled_bytes = cut_pos;
        // The ftruncate dropped whatever followed the cut, stale frames of a recycled file too.
        seg.stale_after = false;
        seg.entries.retain(|e| e.offset < new_end);
        seg.recent.truncate(cut_pos);
        seg.recent_batches.truncate(new_end);
        seg.bytes_since_entry = cut_pos - seg.entries.last().map_or(0, |e| e.position);
        st.end_offset = new_end;
        st.durable_end = st.durable_end.min(new_end);
        st.epochs.retain(|e| e.1 < new_end);
        // A log cut back to its start holds no batch: any epoch may come next (a follower
        // dropping a deposed leader's batch right after a snapshot, then taking an older
        // epoch's batch from the new leader).
        st.last_epoch = st
            .epochs
            .last()
            .map_or(corum_types::Epoch::ZERO, |last| last.0);
        Ok(new_end)
    }

    /// Delete whole segments that hold only offsets below `before`. Returns the new start
    /// offset. If `before` is past the end, the log restarts empty at `before`.
    pub async fn delete_prefix(&self, before: LogOffset) -> Result<LogOffset> {
        let _guard = self.inner.io.lock(&self.inner.changed).await;
        self.inner.state.borrow().check_failed()?;
        let r = if before > self.end_offset() {
            self.reset_locked(before).await
        } else {
            self.delete_locked(before).await
        };
        match r {
            Ok(start) => {
                self.inner.changed.notify_all();
                Ok(start)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    async fn delete_locked(&self, before: LogOffset) -> Result<LogOffset> {
        let disk = &self.inner.disk;
        let doomed: Vec<_> = {
            let st = self.inner.state.borrow();
            let n = st.segments.len();
            st.segments[..n - 1]
                .iter()
                .take_while(|s| s.end_offset <= before)
                .map(|s| (s.base, s.path.clone(), s.end_offset))
                .collect()
        };
        if doomed.is_empty() {
            return Ok(self.start_offset());
        }
        // A sealed segment might not be written yet (rolled, no round since): flush first.
        let unwritten = {
            let st = self.inner.state.borrow();
            st.segments[..doomed.len()].iter().any(|s| s.file.is_none())
        };
        if unwritten || self.buffered_bytes() > 0 {
            self.sync_round().await?;
        }
        let names = disk.list(&self.inner.dir).await?;
        // Oldest first: the newest doomed segments go to the free pool (the pool keeps the
        // freshest files when it is full); the others are deleted. Either way the `.log` name
        // is gone, so a crash leaves a contiguous suffix of segments.
        let free_room = self
            .inner
            .config
            .free_segments_max
            .saturating_sub(self.inner.state.borrow().free.len());
        let keep_from = doomed.len().saturating_sub(free_room);
        let mut freed = Vec::new();
        for (i, (base, path, end)) in doomed.iter().enumerate() {
            if i >= keep_from {
                let free = FreeSegment {
                    stale_end: *end,
                    path: self.inner.dir.join(free_file_name(*end)),
                };
                disk.rename(path, &free.path).await?;
                freed.push(free);
            } else {
                disk.remove(path).await?;
            }
            if names.contains(&index_file_name(*base)) {
                disk.remove(&self.inner.dir.join(index_file_name(*base)))
                    .await?;
            }
        }
        disk.sync_dir(&self.inner.dir).await?;
        {
            let mut st = self.inner.state.borrow_mut();
            let mut stats = self.inner.stats.get();
            stats.segments_freed += freed.len() as u64;
            self.inner.stats.set(stats);
            st.free.extend(freed);
        }
        let removed: Vec<_> = {
            let mut st = self.inner.state.borrow_mut();
            let removed: Vec<_> = st
                .segments
                .drain(..doomed.len())
                .filter_map(|s| s.file)
                .collect();
            let start = st.start_offset();
            let keep_from = st
                .epochs
                .partition_point(|e| e.1 <= start)
                .saturating_sub(1);
            st.epochs.drain(..keep_from);
            if let Some(first) = st.epochs.first_mut() {
                first.1 = first.1.max(start);
            }
            removed
        };
        for f in removed {
            if let Ok(f) = Rc::try_unwrap(f) {
                f.close().await?;
            }
        }
        Ok(self.start_offset())
    }

    async fn reset_locked(&self, before: LogOffset) -> Result<LogOffset> {
        let disk = &self.inner.disk;
        let cfg = &self.inner.config;
        let (old, limbo): (Vec<_>, Vec<_>) = {
            let st = self.inner.state.borrow();
            (
                st.segments
                    .iter()
                    .map(|s| (s.base, s.path.clone()))
                    .collect(),
                // Free files picked by a roll whose round has not run: no longer pooled.
                st.segments
                    .iter()
                    .filter_map(|s| s.from_free.as_ref().map(|f| f.path.clone()))
                    .collect(),
            )
        };
        let names = disk.list(&self.inner.dir).await?;
        for path in &limbo {
            disk.remove(path).await?;
        }
        for (base, path) in &old {
            if names.contains(&super::segment::segment_file_name(*base)) {
                disk.remove(path).await?;
            }
            if names.contains(&index_file_name(*base)) {
                disk.remove(&self.inner.dir.join(index_file_name(*base)))
                    .await?;
            }
        }
        disk.sync_dir(&self.inner.dir).await?;
        let mut seg = Segment::new_empty(&self.inner.dir, before);
        let f = disk.open(&seg.path, OpenMode::Create).await?;
        f.allocate(cfg.segment_bytes).await?;
        f.sync().await?;
        disk.sync_dir(&self.inner.dir).await?;
        seg.file = Some(Rc::new(f));
        let mut st = self.inner.state.borrow_mut();
        st.segments = vec![seg];
        st.end_offset = before;
        st.durable_end = before;
        st.buffered_bytes = 0;
        st.epochs.clear();
        st.last_epoch = corum_types::Epoch::ZERO;
        Ok(before)
    }
}
