//! The core's in-memory view of the log: every batch's offset range and epoch, and the payloads
//! of recent batches for pipelined sends.
//!
//! Payloads of committed batches beyond [`crate::Config::payload_cache_bytes_max`] are dropped
//! (oldest first); when a send needs one, the core asks the driver to read it back
//! ([`crate::Ready::reads`]). Batches from a restored log may also come without payloads.

use std::collections::VecDeque;

use corum_types::{Epoch, LogOffset};

use crate::types::{Batch, Payload, SnapshotId};

#[derive(Clone, Debug)]
pub(crate) struct IndexedBatch {
    pub base: LogOffset,
    pub count: u32,
    pub epoch: Epoch,
    pub control: bool,
    pub timestamp_ms: i64,
    pub bytes: usize,
    pub payload: Option<Payload>,
}

impl IndexedBatch {
    pub fn end(&self) -> LogOffset {
        self.base.add(u64::from(self.count))
    }
}

/// Why batches could not be served from memory.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Gap {
    /// `from` is below the log start (compacted into a snapshot).
    BeforeStart,
    /// The payload at `from` was evicted: read it from disk.
    NotCached,
}

#[derive(Debug)]
pub(crate) struct LogIndex {
    start: LogOffset,
    start_epoch: Epoch,
    batches: VecDeque<IndexedBatch>,
    cached_bytes: usize,
}

impl LogIndex {
    pub fn new(start: SnapshotId) -> Self {
        Self {
            start: start.end_offset,
            start_epoch: start.epoch,
            batches: VecDeque::new(),
            cached_bytes: 0,
        }
    }

    pub fn start(&self) -> LogOffset {
        self.start
    }

    pub fn start_id(&self) -> SnapshotId {
        SnapshotId {
            end_offset: self.start,
            epoch: self.start_epoch,
        }
    }

    pub fn end(&self) -> LogOffset {
        self.batches.back().map_or(self.start, |b| b.end())
    }

    pub fn last_epoch(&self) -> Epoch {
        self.batches.back().map_or(self.start_epoch, |b| b.epoch)
    }

    #[cfg(test)]
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    /// Index of the batch containing `offset`.
    fn find(&self, offset: LogOffset) -> Option<usize> {
        if offset < self.start || offset >= self.end() {
            return None;
        }
        let i = self.batches.partition_point(|b| b.base <= offset);
        Some(i - 1)
    }

    /// The epoch of the entry just before `end` (the snapshot's epoch at the log start); `None`
    /// if that entry is below the log start or beyond the end.
    pub fn epoch_before(&self, end: LogOffset) -> Option<Epoch> {
        if end == self.start {
            return Some(self.start_epoch);
        }
        let prev = end.prev()?;
        self.find(prev).map(|i| self.batches[i].epoch)
    }

    /// True if a batch starts at `offset` (or it is the log start/end).
    pub fn is_boundary(&self, offset: LogOffset) -> bool {
        offset == self.start
            || offset == self.end()
            || self
                .find(offset)
                .is_some_and(|i| self.batches[i].base == offset)
    }

    /// The largest batch boundary `<= offset` (clamped to the log start).
    pub fn boundary_at_or_below(&self, offset: LogOffset) -> LogOffset {
        if offset >= self.end() {
            return self.end();
        }
        match self.find(offset) {
            Some(i) => self.batches[i].base,
            None => self.start.min(offset),
        }
    }

    /// The batch starting exactly at `offset` with `epoch`, if any.
    pub fn has_batch(&self, offset: LogOffset, epoch: Epoch, count: u32) -> bool {
        self.find(offset)
            .map(|i| &self.batches[i])
            .is_some_and(|b| b.base == offset && b.epoch == epoch && b.count == count)
    }

    /// Start offset of the run of batches with the same epoch that ends at `end`.
    pub fn epoch_run_start(&self, end: LogOffset) -> LogOffset {
        let Some(prev) = end.prev() else {
            return self.start;
        };
        let Some(mut i) = self.find(prev) else {
            return self.start.min(end);
        };
        let e = self.batches[i].epoch;
        while i > 0 && self.batches[i - 1].epoch == e {
            i -= 1;
        }
        self.batches[i].base
    }

    /// Kafka's OffsetForLeaderEpoch: the largest epoch `<= epoch` in the log and the end offset
    /// of its last batch; `None` if the answer lies inside the snapshot (the asker needs it).
    pub fn end_for_epoch(&self, epoch: Epoch) -> Option<(Epoch, LogOffset)> {
        let i = self.batches.partition_point(|b| b.epoch <= epoch);
        if i == 0 {
            return (self.start_epoch <= epoch).then_some((self.start_epoch, self.start));
        }
        let b = &self.batches[i - 1];
        Some((b.epoch, b.end()))
    }

    pub fn append(&mut self, b: &Batch) {
        assert_eq!(b.base_offset, self.end(), "append must continue the log");
        assert!(
            b.epoch >= self.last_epoch(),
            "epochs in the log never decrease"
        );
        assert!(b.record_count > 0, "batches hold at least one record");
        self.cached_bytes += b.payload.len();
        self.batches.push_back(IndexedBatch {
            base: b.base_offset,
            count: b.record_count,
            epoch: b.epoch,
            control: b.control,
            timestamp_ms: b.timestamp_ms,
            bytes: b.payload.len(),
            payload: Some(b.payload.clone()),
        });
    }

    /// Appends a restored batch whose payload may be absent.
    pub fn append_restored(&mut self, b: IndexedBatch) {
        assert_eq!(b.base, self.end());
        if let Some(p) = &b.payload {
            self.cached_bytes += p.len();
        }
        self.batches.push_back(b);
    }

    /// Removes every batch at or after `to` (a batch straddling `to` goes too). Returns the new
    /// end.
    pub fn truncate(&mut self, to: LogOffset) -> LogOffset {
        while self.batches.back().is_some_and(|b| b.end() > to) {
            let b = self.batches.pop_back().expect("checked non-empty");
            if b.payload.is_some() {
                self.cached_bytes -= b.bytes;
            }
        }
        self.end()
    }

    /// Drops every batch below `id.end_offset` (a batch boundary) and makes it the log start.
    pub fn compact(&mut self, id: SnapshotId) {
        assert!(id.end_offset >= self.start);
        while self
            .batches
            .front()
            .is_some_and(|b| b.end() <= id.end_offset)
        {
            let b = self.batches.pop_front().expect("checked non-empty");
            if b.payload.is_some() {
                self.cached_bytes -= b.bytes;
            }
        }
        assert!(
            self.batches.front().is_none_or(|b| b.base == id.end_offset),
            "compaction point is a batch boundary"
        );
        self.start = id.end_offset;
        self.start_epoch = id.epoch;
    }

    /// Forgets the whole log: it now starts (empty) after snapshot `id`.
    pub fn reset(&mut self, id: SnapshotId) {
        self.batches.clear();
        self.cached_bytes = 0;
        self.start = id.end_offset;
        self.start_epoch = id.epoch;
    }

    /// Whole batches from `from` (a batch boundary), up to `bytes_max` bytes of payload plus
    /// [`crate::types::BATCH_OVERHEAD_BYTES`] per batch (at least one batch), stopping at the
    /// first batch without a cached payload.
    pub fn read(&self, from: LogOffset, bytes_max: usize) -> Result<Vec<Batch>, Gap> {
        if from < self.start {
            return Err(Gap::BeforeStart);
        }
        let mut out = Vec::new();
        let Some(mut i) = self.find(from) else {
            return Ok(out);
        };
        assert_eq!(
            self.batches[i].base, from,
            "reads start at a batch boundary"
        );
        let mut bytes = 0usize;
        while let Some(b) = self.batches.get(i) {
            let Some(p) = &b.payload else { break };
            let cost = b.bytes + crate::types::BATCH_OVERHEAD_BYTES;
            if !out.is_empty() && bytes + cost > bytes_max {
                break;
            }
            bytes += cost;
            out.push(Batch {
                base_offset: b.base,
                epoch: b.epoch,
                record_count: b.count,
                control: b.control,
                timestamp_ms: b.timestamp_ms,
                payload: p.clone(),
            });
            i += 1;
        }
        if out.is_empty() {
            return Err(Gap::NotCached);
        }
        Ok(out)
    }

    /// Drops the oldest payloads below `committed` while the cache holds more than `bytes_max`.
    pub fn evict(&mut self, committed: LogOffset, bytes_max: usize) {
        for b in self.batches.iter_mut() {
            if self.cached_bytes <= bytes_max || b.end() > committed {
                break;
            }
            if let Some(p) = b.payload.take() {
                self.cached_bytes -= p.len();
            }
        }
    }

    /// O(n) invariant check.
    pub fn check(&self) {
        let mut at = self.start;
        let mut epoch = self.start_epoch;
        let mut cached = 0;
        for b in &self.batches {
            assert_eq!(b.base, at, "log index is contiguous");
            assert!(b.epoch >= epoch, "epochs never decrease along the log");
            assert!(b.count > 0);
            at = b.end();
            epoch = b.epoch;
            cached += b.payload.as_ref().map_or(0, |p| p.len());
        }
        assert_eq!(cached, self.cached_bytes, "cached byte count is exact");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: u64, n: u32, e: u64) -> Batch {
        Batch {
            base_offset: LogOffset(base),
            epoch: Epoch(e),
            record_count: n,
            control: false,
            timestamp_ms: -1,
            payload: Payload::from(vec![0u8; 10]),
        }
    }

    fn log(spec: &[(u32, u64)]) -> LogIndex {
        let mut l = LogIndex::new(SnapshotId {
            end_offset: LogOffset(0),
            epoch: Epoch(0),
        });
        for &(n, e) in spec {
            let b = batch(l.end().0, n, e);
            l.append(&b);
        }
        l
    }

    /// A read of many tiny batches stays within its byte cap once archived (payload plus each
    /// batch's own fields): the message carrying it fits the frame limit derived from the cap.
    #[test]
    fn reads_of_tiny_batches_archive_within_their_cap() {
        let spec: Vec<(u32, u64)> = (0..40_000).map(|_| (1, 1)).collect();
        let l = log(&spec);
        let cap = 64 << 10;
        let batches = l.read(LogOffset(0), cap).unwrap();
        assert!(batches.len() > 100 && batches.len() < 40_000);
        let archived = rkyv::to_bytes::<rkyv::rancor::Error>(&batches).unwrap();
        assert!(
            archived.len() <= cap,
            "{} batches archive to {} bytes, over the {cap}-byte cap",
            batches.len(),
            archived.len()
        );
    }

    /// Epoch lookups, epoch runs and OffsetForLeaderEpoch answer over batch boundaries.
    #[test]
    fn epoch_queries() {
        let l = log(&[(2, 1), (3, 1), (1, 3), (2, 5)]); // [0,2)e1 [2,5)e1 [5,6)e3 [6,8)e5
        assert_eq!(l.end(), LogOffset(8));
        assert_eq!(l.epoch_before(LogOffset(0)), Some(Epoch(0)));
        assert_eq!(l.epoch_before(LogOffset(5)), Some(Epoch(1)));
        assert_eq!(l.epoch_before(LogOffset(6)), Some(Epoch(3)));
        assert_eq!(l.epoch_before(LogOffset(9)), None);
        assert_eq!(l.epoch_run_start(LogOffset(5)), LogOffset(0));
        assert_eq!(l.epoch_run_start(LogOffset(8)), LogOffset(6));
        assert_eq!(l.end_for_epoch(Epoch(2)), Some((Epoch(1), LogOffset(5))));
        assert_eq!(l.end_for_epoch(Epoch(4)), Some((Epoch(3), LogOffset(6))));
        assert_eq!(l.end_for_epoch(Epoch(9)), Some((Epoch(5), LogOffset(8))));
        assert_eq!(l.boundary_at_or_below(LogOffset(4)), LogOffset(2));
        assert!(l.is_boundary(LogOffset(5)) && !l.is_boundary(LogOffset(3)));
    }

    /// Truncation drops straddling batches; compaction and eviction keep the byte count exact,
    /// and reads report evicted payloads and compacted offsets.
    #[test]
    fn truncate_compact_evict_read() {
        let mut l = log(&[(2, 1), (3, 1), (1, 3), (2, 5)]);
        assert_eq!(l.truncate(LogOffset(7)), LogOffset(6));
        l.check();
        l.compact(SnapshotId {
            end_offset: LogOffset(2),
            epoch: Epoch(1),
        });
        assert_eq!(l.read(LogOffset(0), 100), Err(Gap::BeforeStart));
        // Two batches of 10 payload bytes cost 2 * (10 + BATCH_OVERHEAD_BYTES).
        let two = 2 * (10 + crate::types::BATCH_OVERHEAD_BYTES);
        assert_eq!(l.read(LogOffset(2), two).unwrap().len(), 2);
        assert_eq!(l.read(LogOffset(2), two - 1).unwrap().len(), 1);
        assert_eq!(
            l.read(LogOffset(2), 5).unwrap().len(),
            1,
            "byte cap, but at least one batch"
        );
        l.evict(LogOffset(5), 10);
        l.check();
        assert_eq!(l.cached_bytes(), 10);
        assert_eq!(l.read(LogOffset(2), 100), Err(Gap::NotCached));
        assert_eq!(l.read(LogOffset(5), 100).unwrap().len(), 1);
        assert_eq!(
            l.end_for_epoch(Epoch(0)),
            None,
            "epoch 0 ended inside the snapshot"
        );
    }
}
