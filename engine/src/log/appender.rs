//! Appending and group commit.
//!
//! An IO round (run by whoever holds the [`super::notify::IoLock`]):
//!
//! | step | what                                                                         |
//! |------|------------------------------------------------------------------------------|
//! | 1    | snapshot `end_offset` as the round's target; take each segment's tail bytes  |
//! |      | (whole blocks, the partial last block copied back to the tail for next time) |
//! | 2    | create files of newly rolled segments (fallocate)                            |
//! | 3    | write the taken chunks                                                       |
//! | 4    | fdatasync every file written; fsync the directory if a file was created      |
//! | 5    | write `.index` files of segments sealed in this round                        |
//! | 6    | publish: `durable_end = target`, wake every waiter                           |
//!
//! Any error in steps 2-5 marks the log failed (see the module doc of [`super`]).

use std::path::PathBuf;
use std::rc::Rc;

use corum_types::LogOffset;

use super::index::SealedIndex;
use super::segment::{index_file_name, Segment};
use super::{Log, NewBatch, State, SPARE_BUFFERS_MAX};
use crate::buf::{align_down_block, align_up_block, AlignedBuf, BLOCK_BYTES};
use crate::disk::{Disk, DiskFile, OpenMode};
use crate::error::{Error, Result};
use crate::record::{
    encode_frame_append, frame_bytes_for_payload, BatchHeader, BatchMeta, HEADER_BYTES,
};

/// Capacity of an active segment's tail buffer: everything `buffered_bytes_max` lets the
/// appenders buffer, plus the partial block a round leaves behind and one block of slack. Sized
/// once so that the tail never grows: growing an aligned buffer allocates, copies everything and
/// faults in fresh pages, which cost a bulk writer more than writing the bytes. The allocation
/// is virtual until touched, and the two tail buffers (one filling, one being written) are
/// recycled round after round, so their pages stay mapped.
fn tail_capacity_bytes(config: &super::LogConfig) -> usize {
    config.buffered_bytes_max + 2 * BLOCK_BYTES
}

struct Work<F> {
    base: LogOffset,
    path: PathBuf,
    file: Option<Rc<F>>,
    from_free: Option<PathBuf>,
    created: bool,
    chunk: Option<(u64, Rc<AlignedBuf>, u64)>,
    index: Option<SealedIndex>,
}

impl<D: Disk> Log<D> {
    /// Leader append: assign `[base, last]` starting at the log end and buffer the frame.
    /// Returns at once; use [`Log::wait_durable`] for durability.
    pub fn append(&self, batch: &NewBatch, payload: &[u8]) -> Result<(LogOffset, LogOffset)> {
        let mut st = self.inner.state.borrow_mut();
        st.check_failed()?;
        let meta = BatchMeta {
            attributes: batch.attributes,
            base_offset: st.end_offset,
            epoch: batch.epoch,
            record_count: batch.record_count,
            first_timestamp_ms: batch.first_timestamp_ms,
            max_timestamp_ms: batch.max_timestamp_ms,
        };
        crate::record::check_meta(&meta, payload.len(), self.inner.config.frame_bytes_max)?;
        let padded = frame_bytes_for_payload(payload.len());
        self.admit(&mut st, batch.epoch, padded)?;
        let seg = st.segments.last_mut().expect("never empty");
        let header = encode_frame_append(
            &mut seg.tail,
            &meta,
            payload,
            self.inner.config.frame_bytes_max,
        )?;
        Ok(self.commit_append(&mut st, &header))
    }

    /// Checks before buffering a frame of `padded` bytes; rolls the segment if needed.
    fn admit(&self, st: &mut State<D>, epoch: corum_types::Epoch, padded: usize) -> Result<()> {
        if epoch < st.last_epoch {
            return Err(Error::EpochRegression {
                last: st.last_epoch.get(),
                found: epoch.get(),
            });
        }
        let limit = self.inner.config.buffered_bytes_max;
        if st.buffered_bytes + padded > limit {
            return Err(Error::Backpressure {
                buffered_bytes: st.buffered_bytes,
                limit_bytes: limit,
            });
        }
        let active = st.segments.last().expect("never empty");
        if active.size_bytes > 0
            && active.size_bytes + padded as u64 > self.inner.config.segment_bytes
        {
            let base = st.end_offset;
            st.segments.last_mut().expect("never empty").sealed = true;
            let mut seg = Segment::new_empty(&self.inner.dir, base);
            // Reuse a free file if there is one: its blocks are written, so the writes that
            // fill it overwrite instead of converting unwritten extents.
            if st.free.first().is_some_and(|f| f.stale_end <= base) {
                seg.from_free = Some(st.free.remove(0));
                seg.stale_after = true;
                seg.prefilled_bytes = self.inner.config.segment_bytes;
            }
            // Start the new tail in the big spare buffer, if there is one: a bulk writer
            // rolls often, and growing a fresh buffer page by page costs more than the bytes.
            let mut tail = st.spare.pop().unwrap_or_else(|| {
                AlignedBuf::with_capacity(tail_capacity_bytes(&self.inner.config))
            });
            tail.clear();
            seg.tail = tail;
            // Readers right behind the writer need the sealed segment's end for a while, not
            // the one before it.
            if let Some(old) = st.segments.len().checked_sub(2) {
                st.segments[old].recent.clear();
                st.segments[old].recent_batches.clear();
            }
            st.segments.push(seg);
        }
        Ok(())
    }

    fn commit_append(&self, st: &mut State<D>, header: &BatchHeader) -> (LogOffset, LogOffset) {
        let interval = self.inner.config.index_interval_bytes;
        let seg = st.segments.last_mut().expect("never empty");
        let position = seg.size_bytes;
        seg.size_bytes += header.padded_len() as u64;
        seg.note_batch(header, position, interval);
        st.buffered_bytes += header.padded_len();
        let mut stats = self.inner.stats.get();
        stats.batches_appended += 1;
        self.inner.stats.set(stats);
        self.inner.appended.notify_all();
        st.end_offset = header.end_offset();
        st.note_epoch(header.epoch, header.base_offset);
        (header.base_offset, header.last_offset())
    }

    /// Resolve once `offset` is durable. Becomes the syncer if no IO round is running.
    pub async fn wait_durable(&self, offset: LogOffset) -> Result<()> {
        self.durable_through(offset, true).await
    }

    /// [`Log::wait_durable`]; a syncer that `gathers` first lets every ready task run (to
    /// append what it has) before its round starts.
    async fn durable_through(&self, offset: LogOffset, gather: bool) -> Result<()> {
        loop {
            let listen = self.inner.changed.listen();
            {
                let st = self.inner.state.borrow();
                st.check_failed()?;
                if offset < st.durable_end {
                    return Ok(());
                }
                if offset >= st.end_offset {
                    return Err(Error::OffsetOutOfRange {
                        requested: offset,
                        start: st.start_offset(),
                        end: st.end_offset,
                    });
                }
            }
            if let Some(_guard) = self.inner.io.try_lock(&self.inner.changed) {
                // Let every task that is ready run first (those just woken by the previous
                // round append their next batch now), so this round carries them too. One pass
                // of the scheduler, not a timer.
                if gather {
                    futures_lite::future::yield_now().await;
                }
                self.sync_round().await?;
                continue;
            }
            listen.await;
        }
    }

    /// Make everything appended so far durable; returns the durable end.
    pub async fn flush(&self) -> Result<LogOffset> {
        self.flush_with(true).await
    }

    /// [`Log::flush`] for the log's only appender, once it has appended everything it has
    /// (the Raft driver): the round starts at once, instead of first letting every ready task
    /// run so that the round carries their appends too. That pass of the scheduler is what
    /// many concurrent appenders need to share rounds; with one appender it only puts the
    /// disk write behind whatever else was ready (on a Raft leader, its sends to the
    /// followers: tens of microseconds each).
    pub async fn flush_now(&self) -> Result<LogOffset> {
        self.flush_with(false).await
    }

    async fn flush_with(&self, gather: bool) -> Result<LogOffset> {
        let end = self.end_offset();
        match end.prev() {
            Some(last) if last >= self.durable_end() => self.durable_through(last, gather).await?,
            _ => self.inner.state.borrow().check_failed()?,
        }
        Ok(self.durable_end())
    }

    /// One group-commit round. The caller holds the IO lock.
    pub(crate) async fn sync_round(&self) -> Result<()> {
        let (target, work) = {
            let mut st = self.inner.state.borrow_mut();
            st.check_failed()?;
            let target = st.end_offset;
            let mut work = Vec::new();
            let mut spare = std::mem::take(&mut st.spare);
            let tail_capacity = tail_capacity_bytes(&self.inner.config);
            let segment_bytes = self.inner.config.segment_bytes;
            for seg in st.segments.iter_mut() {
                let has_data = seg.size_bytes > seg.written_bytes;
                let needs_index = seg.sealed && !seg.index_written;
                if !has_data && !needs_index && seg.file.is_some() {
                    continue;
                }
                let chunk = has_data.then(|| {
                    let keep_from = align_down_block(seg.size_bytes);
                    // A sealed segment gets no more appends: a small buffer holds its last
                    // partial block, and the big ones stay with the active segment.
                    let mut new_tail = if seg.sealed {
                        AlignedBuf::with_capacity(2 * BLOCK_BYTES)
                    } else {
                        spare
                            .pop()
                            .unwrap_or_else(|| AlignedBuf::with_capacity(tail_capacity))
                    };
                    new_tail.clear();
                    new_tail.extend_from_slice(&seg.tail[(keep_from - seg.tail_pos) as usize..]);
                    let mut taken = std::mem::replace(&mut seg.tail, new_tail);
                    let pos = seg.tail_pos;
                    seg.tail_pos = keep_from;
                    taken.resize(align_up_block(taken.len() as u64) as usize, 0);
                    // In a file with stale bytes after the data, the zeros padding the last
                    // block must hold a whole header, or a scan would read the next block's
                    // stale bytes as the rest of the header (a bad frame, not a clean end):
                    // data ending on a block boundary or less than a header before one carries
                    // one zero block more.
                    let padding_bytes = align_up_block(seg.size_bytes) - seg.size_bytes;
                    if seg.stale_after
                        && padding_bytes < HEADER_BYTES as u64
                        && align_up_block(seg.size_bytes) < segment_bytes
                    {
                        taken.resize(taken.len() + BLOCK_BYTES, 0);
                    }
                    let taken = Rc::new(taken);
                    seg.inflight = Some((pos, taken.clone()));
                    (pos, taken, seg.size_bytes)
                });
                let index = needs_index.then(|| SealedIndex {
                    base_offset: seg.base,
                    end_offset: seg.end_offset,
                    size_bytes: seg.size_bytes,
                    entries: seg.entries.clone(),
                });
                work.push(Work {
                    base: seg.base,
                    path: seg.path.clone(),
                    file: seg.file.clone(),
                    from_free: seg.from_free.as_ref().map(|f| f.path.clone()),
                    created: false,
                    chunk,
                    index,
                });
            }
            st.spare = spare;
            (target, work)
        };
        match self.run_round(work).await {
            Ok(done) => {
                let mut st = self.inner.state.borrow_mut();
                let mut reusable = Vec::new();
                for w in done {
                    let Some(seg) = st.segments.iter_mut().find(|s| s.base == w.base) else {
                        continue;
                    };
                    let mut freed = 0;
                    if let Some((pos, buf, new_written)) = w.chunk {
                        seg.recent.written(
                            pos,
                            &buf[..(new_written - pos) as usize],
                            self.inner.config.recent_bytes_max,
                        );
                        freed = (new_written - seg.written_bytes) as usize;
                        seg.written_bytes = new_written;
                        seg.inflight = None;
                        if let Ok(buf) = Rc::try_unwrap(buf) {
                            reusable.push(buf);
                        }
                    }
                    if w.index.is_some() {
                        seg.index_written = true;
                    }
                    st.buffered_bytes -= freed;
                }
                let tail_capacity = tail_capacity_bytes(&self.inner.config);
                for buf in reusable {
                    if buf.capacity() >= tail_capacity && st.spare.len() < SPARE_BUFFERS_MAX {
                        st.spare.push(buf);
                    }
                }
                if target > st.durable_end {
                    st.durable_end = target;
                }
                drop(st);
                self.inner.changed.notify_all();
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Mark the log failed with `e` as the reason; wake everyone; return the error.
    pub(crate) fn fail(&self, e: Error) -> Error {
        {
            let mut st = self.inner.state.borrow_mut();
            if st.failed.is_none() {
                tracing::error!(dir = %self.inner.dir.display(), error = %e, "log failed; refusing further writes");
                st.failed = Some(e.to_string());
            }
        }
        self.inner.changed.notify_all();
        e
    }

    async fn run_round(&self, mut work: Vec<Work<D::File>>) -> Result<Vec<Work<D::File>>> {
        let disk = &self.inner.disk;
        let mut dir_dirty = false;
        let write_started = std::time::Instant::now();
        let mut renamed = false;
        for w in work.iter_mut() {
            if w.file.is_none() {
                let mut stats = self.inner.stats.get();
                let f = match &w.from_free {
                    Some(free) => {
                        disk.rename(free, &w.path).await?;
                        renamed = true;
                        stats.segments_recycled += 1;
                        disk.open(&w.path, OpenMode::Existing).await?
                    }
                    None => {
                        stats.segments_created += 1;
                        dir_dirty = true;
                        disk.open(&w.path, OpenMode::Create).await?
                    }
                };
                self.inner.stats.set(stats);
                f.allocate(self.inner.config.segment_bytes).await?;
                let f = Rc::new(f);
                w.file = Some(f.clone());
                w.created = true;
                let mut st = self.inner.state.borrow_mut();
                if let Some(seg) = st.segments.iter_mut().find(|s| s.base == w.base) {
                    seg.file = Some(f);
                    seg.from_free = None;
                }
            }
        }
        if renamed {
            // The new name must be durable before any new frame is written into the file:
            // otherwise a crash could bring back the `.free` name over an inode holding frames
            // above its bound (see the module doc).
            disk.sync_dir(&self.inner.dir).await?;
        }
        // A small round to one existing file: one O_DSYNC write (the file has no unsynced
        // writes: every round, prefill step, truncation and recovery ends with its sync).
        let durable_write = match work.as_slice() {
            [w] => {
                !w.created
                    && w.index.is_none()
                    && w.chunk.as_ref().is_some_and(|(_, buf, _)| {
                        buf.len() <= self.inner.config.durable_write_bytes_max
                    })
            }
            _ => false,
        };
        for w in work.iter() {
            if let (Some(f), Some((pos, buf, _))) = (&w.file, &w.chunk) {
                if durable_write {
                    f.write_durable_at(*pos, buf).await?;
                } else {
                    f.write_at(*pos, buf).await?;
                }
            }
        }
        let write_us = write_started.elapsed().as_micros() as u64;
        let sync_started = std::time::Instant::now();
        let (mut syncs, mut bytes) = (0, 0);
        for w in &work {
            if durable_write {
                // Its write was the sync.
                syncs += 1;
            } else if w.chunk.is_some() || w.created {
                w.file.as_ref().expect("opened above").sync().await?;
                syncs += 1;
            }
            if let Some((_, buf, _)) = &w.chunk {
                bytes += buf.len() as u64;
            }
        }
        // Read the counters only now: appends may have bumped them during the awaits.
        let mut stats = self.inner.stats.get();
        stats.syncs += syncs;
        stats.bytes_written += bytes;
        stats.rounds += 1;
        stats.write_us += write_us;
        stats.sync_us += sync_started.elapsed().as_micros() as u64;
        self.inner.stats.set(stats);
        if dir_dirty {
            disk.sync_dir(&self.inner.dir).await?;
        }
        for w in &work {
            if let Some(idx) = &w.index {
                self.write_index_file(idx).await?;
            }
        }
        Ok(work)
    }

    /// Write `<base>.index` atomically: tmp file, fdatasync, rename, directory fsync.
    pub(crate) async fn write_index_file(&self, idx: &SealedIndex) -> Result<()> {
        let disk = &self.inner.disk;
        let path = self.inner.dir.join(index_file_name(idx.base_offset));
        let tmp = path.with_extension("index.tmp");
        let f = disk.open(&tmp, OpenMode::Create).await?;
        f.truncate(0).await?;
        f.write_at(0, &AlignedBuf::from_slice(&idx.encode()))
            .await?;
        f.sync().await?;
        f.close().await?;
        disk.rename(&tmp, &path).await?;
        disk.sync_dir(&self.inner.dir).await
    }

    /// One prefill step: if the log is idle, write and sync one chunk of zeros ahead of the
    /// active segment's data. Returns whether it did any work.
    pub async fn prefill_step(&self) -> Result<bool> {
        let cfg = &self.inner.config;
        if cfg.prefill_ahead_bytes == 0 {
            return Ok(false);
        }
        let Some(_guard) = self.inner.io.try_lock(&self.inner.changed) else {
            return Ok(false);
        };
        let (file, from, len, base) = {
            let st = self.inner.state.borrow();
            if st.failed.is_some() || st.buffered_bytes > 0 {
                return Ok(false);
            }
            let seg = st.segments.last().expect("never empty");
            let Some(file) = seg.file.clone() else {
                return Ok(false);
            };
            let from = seg.prefilled_bytes.max(align_up_block(seg.size_bytes));
            let limit = (seg.size_bytes + cfg.prefill_ahead_bytes).min(cfg.segment_bytes);
            if from >= limit {
                return Ok(false);
            }
            (
                file,
                from,
                cfg.prefill_chunk_bytes.min(align_up_block(limit) - from),
                seg.base,
            )
        };
        let zeros = AlignedBuf::zeroed(len as usize);
        let r = async {
            file.write_at(from, &zeros).await?;
            file.sync().await
        }
        .await;
        if let Err(e) = r {
            return Err(self.fail(e));
        }
        let mut st = self.inner.state.borrow_mut();
        if let Some(seg) = st.segments.iter_mut().find(|s| s.base == base) {
            seg.prefilled_bytes = seg.prefilled_bytes.max(from + len);
        }
        Ok(true)
    }

    /// Background loop: prefill whenever the log is idle, until the log fails or is closed.
    /// Spawn it as a task of its own on the log's shard.
    pub async fn run_prefill(&self) {
        while !self.inner.closed.get() {
            match self.prefill_step().await {
                Ok(true) => continue,
                // Listen only now: a listener from before the step would be woken by the step's
                // own lock release and spin. Missing a change here only delays the prefill.
                Ok(false) => self.inner.changed.listen().await,
                Err(_) => return,
            }
        }
    }

    /// Resolve once `frame_bytes` more bytes fit under `buffered_bytes_max` (or the log failed).
    pub async fn wait_for_space(&self, frame_bytes: usize) -> Result<()> {
        loop {
            let listen = self.inner.changed.listen();
            {
                let st = self.inner.state.borrow();
                st.check_failed()?;
                if st.buffered_bytes + frame_bytes <= self.inner.config.buffered_bytes_max {
                    return Ok(());
                }
            }
            listen.await;
        }
    }

    /// Background loop for callers that append without waiting (a pipelining leader, a bulk
    /// writer): start a group-commit round whenever appended bytes are not durable, so the
    /// disk stays busy while the appender keeps filling the next round in memory. Ends when the
    /// log is closed or fails.
    pub async fn run_syncer(&self) {
        while !self.inner.closed.get() {
            let listen = self.inner.appended.listen();
            let behind = {
                let st = self.inner.state.borrow();
                if st.failed.is_some() {
                    return;
                }
                st.durable_end < st.end_offset
            };
            if behind {
                if self.flush().await.is_err() {
                    return;
                }
            } else {
                listen.await;
            }
        }
    }

    /// Flush, then close every file. Other handles see a closed log (prefill stops).
    pub async fn close(self) -> Result<()> {
        // A read-only log has nothing to flush (and refuses to).
        let flushed = if self.inner.read_only {
            Ok(self.end_offset())
        } else {
            self.flush().await
        };
        self.inner.closed.set(true);
        self.inner.changed.notify_all();
        self.inner.appended.notify_all();
        let _guard = self.inner.io.lock(&self.inner.changed).await;
        let files: Vec<_> = {
            let mut st = self.inner.state.borrow_mut();
            st.segments
                .iter_mut()
                .filter_map(|s| s.file.take())
                .collect()
        };
        for f in files {
            if let Ok(f) = Rc::try_unwrap(f) {
                f.close().await?;
            }
        }
        flushed.map(|_| ())
    }
}
