//! The segmented log: append, group commit, read, truncate, recover.
//!
//! # Model
//!
//! The log is a sequence of batches (frames, see [`crate::record`]) with contiguous offsets
//! `[start_offset, end_offset)`, stored in segment files under one directory:
//!
//! ```text
//! <dir>/00000000000000000000.log     frames from offset 0, preallocated to segment_bytes
//! <dir>/00000000000000000000.index   sparse index of that segment, written when it is sealed
//! <dir>/00000000000000004711.log     the active segment (no .index file)
//! ```
//!
//! The log lives on one shard; `Log` is a cheap `Rc` handle that tasks on that shard share.
//!
//! # Durability contract
//!
//! - [`Log::append`] assigns offsets and returns at once; nothing is on disk yet. The batch is
//!   readable immediately.
//! - [`Log::durable_end`] is the exclusive end of what is durable: every batch below it was
//!   written and fdatasync'ed. [`Log::wait_durable`] resolves once an offset is durable.
//! - **Group commit:** whoever waits for durability while no IO round is running becomes the
//!   syncer: it takes every byte appended so far, writes it (whole 4 KiB blocks; the partial last
//!   block is kept in memory and rewritten next time), fdatasyncs, and publishes the new durable
//!   end. Appends arriving meanwhile are carried by the next round. There is no timer or linger:
//!   the syncer only yields once to the scheduler before taking the bytes, so that tasks the
//!   previous round just woke can append first and ride along.
//! - A small round (at most [`LogConfig::durable_write_bytes_max`] bytes, to the active segment
//!   only) is one O_DSYNC write instead of a write and an fdatasync: the latency of a commit
//!   is one disk request. Measured here (`corum bench log`, 1 appender, 128 B): durable p50
//!   88-90 µs, against 151-159 µs with `--durable-write-bytes-max 0` (write, then an fdatasync
//!   that io_uring runs on a kernel worker thread).
//! - Any write or fdatasync error makes the log **failed**: every later append, sync, truncation
//!   returns [`Error::Failed`]. Nothing is retried; reopen the log to recover what is on disk.
//! - [`Log::truncate_suffix`] and [`Log::delete_prefix`] are durable when they return.
//! - Reads right behind the writer (the last [`LogConfig::recent_bytes_max`] bytes that reached
//!   the file, and what is still in memory) need no disk read: committing a batch and handing it
//!   to the state machine or a follower does not wait for the disk twice.
//! - On [`Log::open`], everything that was durable is recovered. A torn or unsynced tail of the
//!   last segment is cut off and reported in the [`RecoveryReport`]. Damage followed by valid
//!   frames, or anywhere in a sealed segment, is [`Error::Corruption`]: never skipped.
//!   [`Log::open_read_only`] reads the same log without writing anything (offline tools): its
//!   report says what `open` would cut, and the log refuses writes.
//!
//! # Physical layout decisions
//!
//! Segments are preallocated (fallocate) when created. An optional background task
//! ([`Log::run_prefill`]) writes zeros a little ahead of the writer whenever the log is idle, so
//! that the latency-critical write + fdatasync overwrites blocks that are already written, which
//! avoids a metadata journal commit per sync on file systems that journal unwritten extents.
//! `corum bench log` runs it; the node does not (measured on this project's VM with the
//! configs workload at 256 clients: 102-106k writes/s with it, 99-111k without, within the
//! noise; and its zero-writes take the IO lock in idle gaps, which a lone client would wait
//! behind). Bulk writers outrun the prefill; for them the
//! log **recycles** segment files, so that they too overwrite written blocks.
//!
//! # Segment recycling
//!
//! [`Log::delete_prefix`] renames up to [`LogConfig::free_segments_max`] deleted segment files
//! to `<end>.free` instead of unlinking them (`<end>` is the deleted segment's end offset). A
//! roll takes the oldest free file and the IO round that creates the segment renames it to
//! `<base>.log` and fsyncs the directory **before** writing into it. The file keeps its old
//! frames after the new data.
//!
//! **Invariant (the bound):** every frame in a file named `<end>.free` has a base offset below
//! `<end>`, and `<end> <=` the log start `<=` the base of every segment created later. It holds
//! because a file holds, when it is freed, only (a) its segment's own batches, all below the
//! segment's end; (b) older stale frames, below an older bound, by induction; and nothing else:
//! a torn round's bytes are zeroed by recovery before the segment takes new data (from the stop
//! to the first intact old frame, at least a header), and `truncate_suffix` ftruncates at the
//! cut. On open a free file whose bound is above the log start (a reset past the end that
//! crashed before its new segment was durable restarts the log at 0), or beyond the pool limit,
//! is deleted. So an old frame is never mistaken for a batch of the segment: the scan takes a
//! frame only if its base offset is exactly the next expected offset, which is `>= base`.
//!
//! **Writes:** every write of a recycled segment (and of any segment recovery reopened) ends
//! with zeros that hold a whole header after the last frame: the block padding, plus one zero
//! block when the padding is shorter than a header (data ending on a block boundary or less
//! than 64 bytes before one). Otherwise a scan would read the header at the end from the zeros
//! *and* the stale block after them: a bad frame instead of a clean end.
//!
//! What a scan finds after the last frame that continues the segment:
//!
//! | what follows the last batch of a segment          | scan outcome ([`segment::ScanEnd`]) | recovery                                      |
//! |---------------------------------------------------|-------------------------------------|-----------------------------------------------|
//! | at least a header of zeros (padding, guard, zeroed torn tail, fresh space) | `Clean`    | end of the log; non-zero bytes in the rest of the block zeroed |
//! | an intact old frame (base offset < segment base)  | `Stale`: a clean end                | end of the log; nothing written               |
//! | part of an old frame, or a torn new frame (of the same or a different alignment: the header is new, old or mixed) | `Bad` | torn tail if no frame in reach continues the log: zeroed up to the first intact old frame, at least a header; else `Corruption` |
//! | a valid frame at or above the base that does not continue the offsets | `Bad`        | as above (cannot come from an old frame: the bound) |
//! | a valid frame that continues the log              | it is a batch                       | it is data                                    |
//!
//! Every state a recycled file can be in after a crash (directory entries are durable once the
//! directory is fsynced, or earlier if the file system commits them on its own; rename is
//! atomic; a crash keeps, per file, a prefix of the unsynced writes, the first lost one torn at
//! any byte):
//!
//! | state after the crash                                         | what recovery sees                         | outcome |
//! |---------------------------------------------------------------|--------------------------------------------|---------|
//! | `delete_prefix` crashed: some doomed segments renamed, some not | a contiguous suffix of segments, free files with their bounds | each doomed segment is in the log or in the pool; no frame is written into a `.free` file |
//! | roll: rename not durable                                      | `<end>.free`, unchanged (no write precedes the directory fsync) | still pooled |
//! | roll: rename durable, nothing of the first write kept          | `<base>.log` starting with an old frame    | `Stale` at byte 0: an empty segment at `base` (cut as unfinished if a later segment exists) |
//! | first write kept whole, fdatasync lost                         | new batches, then zeros (padding/guard)    | `Clean`: the batches are recovered and synced before use |
//! | first (or a later) write torn at a frame boundary              | new batches, then an old frame, old zeros or a piece of an old frame | `Stale` / `Clean` / `Bad`: the log ends at the boundary; a piece is zeroed |
//! | write torn inside a frame                                      | new header, old payload (checksum), or a mixed header | `Bad`: torn tail cut and zeroed up to the first intact old frame |
//! | the round also rolled on into a later (fresh or recycled) file, whose directory entry the rename's fsync made durable | a non-last segment without an index file that ends early or in a bad frame | the unfinished roll is cut there: later segments removed (they hold only bytes of rounds that never finished), the torn segment recovered as the active one |
//! | the round also sealed the previous segment (its index pending) | a complete non-last segment without an index, then the torn one | every unindexed segment is checked, not only the first (this was the false `Corruption`) |
//! | bit rot in a synced batch                                      | a bad frame followed by a batch that continues the log, or by a segment sealed by a finished round | `Corruption` |
//!
//! Why cutting at an unfinished unindexed segment never drops an acknowledged batch: a round
//! writes index files of the segments it sealed after all its fdatasyncs and before publishing
//! its durable end, and an index that recovery rebuilt by a scan is written by the next round
//! (after the segment was synced). So every batch ever reported durable lies in a segment all
//! of whose predecessors have index files.
//!
//! `truncate_suffix` removes later segments (never pooled: their frames lie above the cut, so
//! they could continue the log) and ftruncates the kept one at the cut, which also drops any
//! old frames of a recycled file there. A reset past the end (`delete_prefix` beyond the log
//! end) deletes its segments and the free files a pending roll had taken.

mod appender;
pub mod index;
mod notify;
mod reader;
mod recent;
mod recovery;
pub mod segment;
mod truncation;

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use corum_types::{Epoch, LogOffset};

pub use reader::ReadBatch;

pub use recovery::{inspect_dir, RecoveryReport, SegmentReport, TornTail};

use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::record::{Attributes, DEFAULT_FRAME_BYTES_MAX, HEADER_BYTES};
use notify::{IoLock, Notify};
use segment::Segment;

/// Limits and sizes of a log. Checked by [`LogConfig::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// A segment rolls when the next batch would take it past this size. Multiple of 4 KiB.
    pub segment_bytes: u64,
    /// Largest frame (header + payload) accepted.
    pub frame_bytes_max: u32,
    /// A sparse index entry at least every this many bytes.
    pub index_interval_bytes: u64,
    /// Appends fail with `Backpressure` while this many bytes wait for the disk.
    pub buffered_bytes_max: usize,
    /// The prefill keeps this many zeroed bytes ahead of the writer; 0 disables it.
    pub prefill_ahead_bytes: u64,
    /// Bytes of zeros written per prefill step (bounds the delay it can add to a sync).
    pub prefill_chunk_bytes: u64,
    /// Segment files [`Log::delete_prefix`] keeps (as `.free` files) for later rolls to
    /// overwrite instead of writing into fresh space; 0 deletes them.
    pub free_segments_max: usize,
    /// Bytes of each of the last two segments kept in memory after they reached the file, so
    /// that reads right behind the writer (commits, followers, observers) need no disk read;
    /// 0 turns it off.
    pub recent_bytes_max: usize,
    /// A group-commit round that writes at most this many bytes, all to the active segment
    /// and with no file to create or index to write, makes them durable with one O_DSYNC write
    /// ([`crate::disk::DiskFile::write_durable_at`]) instead of a write and then an fdatasync:
    /// one disk request instead of two in a row. Larger rounds write in parallel pieces and
    /// fdatasync once. 0 always uses fdatasync.
    pub durable_write_bytes_max: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 64 << 20,
            frame_bytes_max: DEFAULT_FRAME_BYTES_MAX,
            index_interval_bytes: 64 << 10,
            buffered_bytes_max: 32 << 20,
            prefill_ahead_bytes: 1 << 20,
            prefill_chunk_bytes: 64 << 10,
            free_segments_max: 2,
            recent_bytes_max: 256 << 10,
            durable_write_bytes_max: crate::disk::uring::WRITE_PIECE_BYTES,
        }
    }
}

impl LogConfig {
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        let block = crate::buf::BLOCK_BYTES as u64;
        if self.segment_bytes < block || self.segment_bytes % block != 0 {
            return bad(format!(
                "segment_bytes {} must be a positive multiple of 4096",
                self.segment_bytes
            ));
        }
        if (self.frame_bytes_max as usize) < HEADER_BYTES {
            return bad(format!(
                "frame_bytes_max {} is below the header size",
                self.frame_bytes_max
            ));
        }
        if self.buffered_bytes_max < self.frame_bytes_max as usize + crate::buf::BLOCK_BYTES {
            return bad("buffered_bytes_max must hold at least one maximal frame".into());
        }
        if self.index_interval_bytes == 0 {
            return bad("index_interval_bytes must be positive".into());
        }
        if self.prefill_chunk_bytes == 0 || self.prefill_chunk_bytes % block != 0 {
            return bad("prefill_chunk_bytes must be a positive multiple of 4096".into());
        }
        Ok(())
    }
}

/// A batch for the leader's [`Log::append`]: everything but the base offset, which the log
/// assigns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewBatch {
    pub epoch: Epoch,
    pub attributes: Attributes,
    pub record_count: u32,
    pub first_timestamp_ms: i64,
    pub max_timestamp_ms: i64,
}

/// Tail buffers kept for reuse.
pub(crate) const SPARE_BUFFERS_MAX: usize = 2;

pub(crate) struct State<D: Disk> {
    /// Ordered by base offset; the last one is active; never empty.
    pub segments: Vec<Segment<D>>,
    pub end_offset: LogOffset,
    pub durable_end: LogOffset,
    pub last_epoch: Epoch,
    /// `(epoch, first offset)` for each epoch present in the log, ascending.
    pub epochs: Vec<(Epoch, LogOffset)>,
    pub buffered_bytes: usize,
    pub failed: Option<String>,
    /// Free segment files for the next rolls, oldest first (see the module doc).
    pub free: Vec<FreeSegment>,
    /// Written chunks' buffers, reused as the next tails so big rounds do not allocate (at
    /// most [`SPARE_BUFFERS_MAX`]: one fills while one is written, and a roll needs a third).
    pub spare: Vec<crate::buf::AlignedBuf>,
}

/// A former segment file kept for reuse: `<stale_end>.free`, every frame in it below
/// `stale_end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FreeSegment {
    pub stale_end: LogOffset,
    pub path: PathBuf,
}

impl<D: Disk> State<D> {
    pub fn start_offset(&self) -> LogOffset {
        self.segments[0].base
    }

    pub fn check_failed(&self) -> Result<()> {
        match &self.failed {
            Some(reason) => Err(Error::Failed {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Index of the segment holding `offset` (the last one whose base is <= offset).
    pub fn segment_for(&self, offset: LogOffset) -> usize {
        self.segments
            .partition_point(|s| s.base <= offset)
            .saturating_sub(1)
    }

    pub fn note_epoch(&mut self, epoch: Epoch, offset: LogOffset) {
        // An entry at the new batch's own offset describes no batch (an epoch carried over a
        // prefix delete that emptied the log): the new epoch replaces it, as a reopen would.
        if self
            .epochs
            .last()
            .is_some_and(|e| e.0 != epoch && e.1 == offset)
        {
            self.epochs.pop();
        }
        if self.epochs.last().map(|e| e.0) != Some(epoch) {
            self.epochs.push((epoch, offset));
        }
        self.last_epoch = epoch;
    }
}

pub(crate) struct Inner<D: Disk> {
    pub disk: D,
    pub dir: PathBuf,
    pub config: LogConfig,
    pub state: RefCell<State<D>>,
    pub changed: Notify,
    /// Woken by every append (only `run_syncer` listens).
    pub appended: Notify,
    pub io: IoLock,
    pub closed: Cell<bool>,
    /// Opened with [`Log::open_read_only`]: nothing is ever written.
    pub read_only: bool,
    pub stats: Cell<LogStats>,
}

/// Counters since the log was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Group-commit rounds completed.
    pub rounds: u64,
    /// fdatasync calls made by rounds (one per file written in a round).
    pub syncs: u64,
    /// Bytes handed to the disk by rounds (whole blocks, rewrites included).
    pub bytes_written: u64,
    /// Batches appended.
    pub batches_appended: u64,
    /// Time rounds spent writing, and in fdatasync (microseconds).
    pub write_us: u64,
    pub sync_us: u64,
    /// Segment files created fresh (fallocated) and taken from the free pool by rolls.
    pub segments_created: u64,
    pub segments_recycled: u64,
    /// Segment files `delete_prefix` kept in the free pool rather than deleting.
    pub segments_freed: u64,
}

/// A handle to an open log. Clones share the log (one shard only).
pub struct Log<D: Disk> {
    pub(crate) inner: Rc<Inner<D>>,
}

impl<D: Disk> Clone for Log<D> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<D: Disk> Log<D> {
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The disk the log is on (the node writes its other files there too).
    pub fn disk(&self) -> &D {
        &self.inner.disk
    }

    /// Whether the log was opened with [`Log::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    pub fn config(&self) -> &LogConfig {
        &self.inner.config
    }

    /// First offset still in the log.
    pub fn start_offset(&self) -> LogOffset {
        self.inner.state.borrow().start_offset()
    }

    /// The offset the next appended record gets.
    pub fn end_offset(&self) -> LogOffset {
        self.inner.state.borrow().end_offset
    }

    /// Every offset below this is durable.
    pub fn durable_end(&self) -> LogOffset {
        self.inner.state.borrow().durable_end
    }

    /// The last durable offset ("durable through N"), if any record is durable.
    pub fn durable_offset(&self) -> Option<LogOffset> {
        let st = self.inner.state.borrow();
        if st.durable_end > st.start_offset() {
            st.durable_end.prev()
        } else {
            None
        }
    }

    /// Epoch of the last batch appended (or carried over from before a full prefix delete).
    pub fn last_epoch(&self) -> Epoch {
        self.inner.state.borrow().last_epoch
    }

    /// Bytes appended but not yet handed to the disk.
    pub fn buffered_bytes(&self) -> usize {
        self.inner.state.borrow().buffered_bytes
    }

    /// Why the log refuses writes, if it does.
    pub fn failure(&self) -> Option<String> {
        self.inner.state.borrow().failed.clone()
    }

    /// Counters since open.
    pub fn stats(&self) -> LogStats {
        self.inner.stats.get()
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.inner.state.borrow().segments.len()
    }

    /// Bytes of the whole segments that [`Log::delete_prefix`]`(before)` would delete: every
    /// segment but the active one that holds only offsets below `before`.
    pub fn prefix_bytes(&self, before: LogOffset) -> u64 {
        let st = self.inner.state.borrow();
        let n = st.segments.len();
        st.segments[..n - 1]
            .iter()
            .take_while(|s| s.end_offset <= before)
            .map(|s| s.size_bytes)
            .sum()
    }

    /// Number of free segment files waiting to be reused by a roll.
    pub fn free_segment_count(&self) -> usize {
        self.inner.state.borrow().free.len()
    }

    /// The epoch of the batch holding `offset`, if the offset is in the log.
    pub fn epoch_at(&self, offset: LogOffset) -> Option<Epoch> {
        let st = self.inner.state.borrow();
        if offset < st.start_offset() || offset >= st.end_offset {
            return None;
        }
        let i = st.epochs.partition_point(|e| e.1 <= offset);
        i.checked_sub(1).map(|i| st.epochs[i].0)
    }

    /// KIP-595's end offset for an epoch: the largest epoch `<= epoch` present in the log and
    /// the exclusive end offset of its batches (the start of the next epoch, or the log end).
    /// `None` if no epoch `<= epoch` is in the log.
    pub fn end_offset_for_epoch(&self, epoch: Epoch) -> Option<(Epoch, LogOffset)> {
        let st = self.inner.state.borrow();
        let i = st.epochs.partition_point(|e| e.0 <= epoch);
        let found = st.epochs.get(i.checked_sub(1)?)?.0;
        let end = st.epochs.get(i).map_or(st.end_offset, |e| e.1);
        Some((found, end))
    }

    /// `(epoch, first offset)` of every epoch in the log, ascending.
    pub fn epoch_start_offsets(&self) -> Vec<(Epoch, LogOffset)> {
        self.inner.state.borrow().epochs.clone()
    }

    /// O(n) consistency checks for tests and the simulator.
    pub fn check_invariants(&self) {
        let st = self.inner.state.borrow();
        assert!(!st.segments.is_empty());
        assert!(st.durable_end <= st.end_offset);
        for w in st.segments.windows(2) {
            assert_eq!(w[0].end_offset, w[1].base, "segments are contiguous");
            assert!(w[0].sealed);
        }
        let last = st.segments.last().expect("non-empty");
        assert!(!last.sealed);
        assert_eq!(last.end_offset, st.end_offset);
        let mut buffered = 0;
        for s in &st.segments {
            assert!(s.written_bytes <= s.size_bytes);
            assert!(s.tail_pos <= s.written_bytes || s.inflight.is_some());
            assert_eq!(s.tail_pos + s.tail.len() as u64, s.size_bytes);
            buffered += (s.size_bytes - s.written_bytes) as usize;
            assert!(s.entries.windows(2).all(|w| w[0].offset < w[1].offset));
        }
        assert_eq!(buffered, st.buffered_bytes);
        assert!(st.free.len() <= self.inner.config.free_segments_max);
        for f in &st.free {
            assert!(
                f.stale_end <= st.start_offset(),
                "a free file's frames lie below the log start"
            );
        }
        assert!(
            st.epochs
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
            "epochs ascend: {:?}",
            st.epochs
        );
    }
}

#[cfg(test)]
mod tests;
