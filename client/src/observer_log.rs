//! [`ObserverLog`]: an observer's copy of the metadata log, pure (no IO, no clock), driven by
//! fetch responses. [`crate::MetadataFollower`] runs it against a real leader; tests drive it
//! with synthetic responses.
//!
//! # Model
//!
//! ```text
//!   0            applied_end                end()
//!   |--- applied ---|------ buffered --------|
//!   (in the image)   (fetched, maybe beyond the HWM: may still be truncated)
//! ```
//!
//! The log is a committed, applied prefix (its records are in the [`MetadataImage`]) followed
//! by buffered batches that the leader sent but that may lie beyond the high watermark. Data
//! beyond the HWM is not committed and a new leader may truncate it, so a batch is applied
//! only once the HWM reaches its end; a `Diverging` answer drops buffered batches, never
//! applied ones. Control batches (Raft's own records) advance the offsets without touching
//! the image.
//!
//! | response (echoing the current end and last epoch)  | effect |
//! |---|---|
//! | epoch below the highest seen                       | ignored (a deposed leader) |
//! | `Batches { batches, high_watermark }`              | batches appended to the buffer (checked: contiguous, non-empty, epochs non-decreasing and not above the response's); HWM = max(HWM, answer's); buffered batches ending at or below the HWM applied in order |
//! | `Diverging { epoch, end_offset }`                  | truncate to `min(end_offset, my end for epoch)` (Kafka's rule, as the Raft core's follower does); dropping below the applied end is [`ObserverError::CommittedTruncation`] |
//! | `NotLeader`                                        | the epoch is noted; nothing else changes |
//! | `SnapshotNeeded`                                   | [`ObserverError::SnapshotNeeded`] |
//! | a `Batches` / `Diverging` not echoing the current end and last epoch | ignored (a late answer to an older fetch) |
//!
//! Invariants (checked by [`ObserverLog::check_invariants`]): `applied_end <= max(HWM seen)`;
//! buffered batches are contiguous from `applied_end`, each non-empty, with non-decreasing
//! epochs not below the last applied one; `image.end_offset <= applied_end`.

use std::collections::VecDeque;

use corum_controller::{decode_batch, MetadataImage};
use corum_raft::message::{FetchRequest, FetchResponse, FetchResult};
use corum_raft::{Batch, ReplicaKey};
use corum_types::{Epoch, LogOffset, NodeId};
use rkyv::util::AlignedVec;

use crate::error::ObserverError;

/// A batch moved from the buffer into the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppliedBatch {
    pub base_offset: LogOffset,
    pub end_offset: LogOffset,
    pub epoch: Epoch,
    /// A Raft control batch (offsets only, nothing replayed).
    pub control: bool,
}

/// What one response did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The response was for an older fetch, from an older epoch, or said `NotLeader`: nothing
    /// changed except perhaps the known epoch and leader.
    pub ignored: bool,
    /// The responder does not lead the fetch's epoch.
    pub not_leader: bool,
    /// Batches appended to the buffer.
    pub fetched_batches: usize,
    /// Batches applied, in log order.
    pub applied: Vec<AppliedBatch>,
    /// Records dropped from the buffer by a `Diverging` answer.
    pub truncated_records: u64,
}

/// Counters of an [`ObserverLog`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObserverStats {
    pub responses: u64,
    pub ignored_responses: u64,
    pub batches_applied: u64,
    pub records_applied: u64,
    pub control_batches_applied: u64,
    pub diverging: u64,
    pub records_truncated: u64,
}

/// An observer's log and image. See the module doc.
#[derive(Clone, Debug, Default)]
pub struct ObserverLog {
    /// The highest leader epoch seen in any response (sent in fetches).
    epoch: Epoch,
    leader: Option<NodeId>,
    applied_end: LogOffset,
    /// The epoch of the entry just before `applied_end` (0 for an empty prefix).
    applied_last_epoch: Epoch,
    high_watermark: LogOffset,
    buffered: VecDeque<Batch>,
    image: MetadataImage,
    stats: ObserverStats,
}

impl ObserverLog {
    /// An empty log at offset 0, epoch 0.
    pub fn new() -> ObserverLog {
        ObserverLog::default()
    }

    /// The offset after the last applied record: what a broker reports as NextMetadataOffset.
    pub fn applied_end(&self) -> LogOffset {
        self.applied_end
    }

    /// The highest high watermark any leader reported.
    pub fn high_watermark(&self) -> LogOffset {
        self.high_watermark
    }

    /// The end of the log including buffered batches (the next fetch offset).
    pub fn end(&self) -> LogOffset {
        self.buffered
            .back()
            .map_or(self.applied_end, Batch::end_offset)
    }

    /// The epoch of the log's last entry, buffered ones included.
    pub fn last_epoch(&self) -> Epoch {
        self.buffered
            .back()
            .map_or(self.applied_last_epoch, |b| b.epoch)
    }

    /// The highest leader epoch seen.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The leader named by the last response that named one.
    pub fn leader(&self) -> Option<NodeId> {
        self.leader
    }

    /// Records fetched but not applied.
    pub fn buffered_records(&self) -> u64 {
        self.end().0 - self.applied_end.0
    }

    /// The image of the applied prefix (O(1) to clone).
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    pub fn stats(&self) -> ObserverStats {
        self.stats
    }

    /// The next fetch of `replica`, long-polling up to `wait_max_ms`.
    pub fn fetch_request(&self, replica: ReplicaKey, wait_max_ms: u64) -> FetchRequest {
        FetchRequest {
            epoch: self.epoch,
            replica,
            fetch_offset: self.end(),
            last_fetched_epoch: self.last_epoch(),
            high_watermark: self.high_watermark,
            wait_max_ms,
        }
    }

    /// Takes one fetch response (see the module doc). On error nothing was changed except
    /// what [`ObserverError::Replay`] / [`ObserverError::Decode`] interrupted: the image then
    /// no longer follows the log and the observer must stop.
    pub fn on_response(&mut self, resp: FetchResponse) -> Result<Progress, ObserverError> {
        self.stats.responses += 1;
        let mut progress = Progress::default();
        if resp.epoch < self.epoch {
            progress.ignored = true;
            self.stats.ignored_responses += 1;
            return Ok(progress);
        }
        if resp.epoch > self.epoch {
            self.epoch = resp.epoch;
            self.leader = None;
        }
        if resp.leader.is_some() {
            self.leader = resp.leader;
        }
        let current = (self.end(), self.last_epoch());
        match resp.result {
            FetchResult::NotLeader => {
                progress.ignored = true;
                progress.not_leader = true;
                self.stats.ignored_responses += 1;
            }
            FetchResult::SnapshotNeeded { snapshot } => {
                return Err(ObserverError::SnapshotNeeded {
                    fetch_offset: self.end(),
                    snapshot,
                });
            }
            FetchResult::Batches {
                fetch_offset,
                last_fetched_epoch,
                batches,
                high_watermark,
            } => {
                if (fetch_offset, last_fetched_epoch) != current {
                    progress.ignored = true;
                    self.stats.ignored_responses += 1;
                    return Ok(progress);
                }
                check_batches(fetch_offset, last_fetched_epoch, resp.epoch, &batches)?;
                progress.fetched_batches = batches.len();
                self.buffered.extend(batches);
                self.high_watermark = self.high_watermark.max(high_watermark);
                self.apply(&mut progress)?;
            }
            FetchResult::Diverging {
                fetch_offset,
                last_fetched_epoch,
                epoch,
                end_offset,
            } => {
                if (fetch_offset, last_fetched_epoch) != current {
                    progress.ignored = true;
                    self.stats.ignored_responses += 1;
                    return Ok(progress);
                }
                self.stats.diverging += 1;
                let to = end_offset.min(self.end_for_epoch(epoch));
                if to < self.applied_end {
                    return Err(ObserverError::CommittedTruncation {
                        to,
                        applied: self.applied_end,
                    });
                }
                progress.truncated_records = self.truncate(to);
            }
        }
        Ok(progress)
    }

    /// Kafka's OffsetForLeaderEpoch on this log: the end of the last batch whose epoch is at
    /// most `epoch`; the applied end if no buffered one is and the applied prefix ends in such
    /// an epoch, else 0 (below anything applied: the caller refuses to truncate there).
    fn end_for_epoch(&self, epoch: Epoch) -> LogOffset {
        match self.buffered.iter().rposition(|b| b.epoch <= epoch) {
            Some(i) => self.buffered[i].end_offset(),
            None if self.applied_last_epoch <= epoch => self.applied_end,
            None => LogOffset(0),
        }
    }

    /// Drops buffered batches ending after `to` (a batch straddling `to` goes whole: it is
    /// fetched again). Returns the records dropped.
    fn truncate(&mut self, to: LogOffset) -> u64 {
        let before = self.end();
        while self.buffered.back().is_some_and(|b| b.end_offset() > to) {
            self.buffered.pop_back();
        }
        let dropped = before.0 - self.end().0;
        self.stats.records_truncated += dropped;
        dropped
    }

    /// Applies buffered batches that end at or below the HWM.
    fn apply(&mut self, progress: &mut Progress) -> Result<(), ObserverError> {
        while let Some(b) = self.buffered.front() {
            if b.end_offset() > self.high_watermark {
                break;
            }
            let b = self.buffered.pop_front().expect("front exists");
            if !b.control {
                replay(&mut self.image, &b)?;
                self.stats.records_applied += u64::from(b.record_count);
            } else {
                self.stats.control_batches_applied += 1;
            }
            self.stats.batches_applied += 1;
            self.applied_end = b.end_offset();
            self.applied_last_epoch = b.epoch;
            progress.applied.push(AppliedBatch {
                base_offset: b.base_offset,
                end_offset: b.end_offset(),
                epoch: b.epoch,
                control: b.control,
            });
        }
        Ok(())
    }

    /// Asserts the invariants of the module doc (O(buffered batches)).
    pub fn check_invariants(&self) {
        assert!(
            self.applied_end <= self.high_watermark,
            "applied {} beyond the HWM {}",
            self.applied_end,
            self.high_watermark
        );
        assert!(self.image.end_offset <= self.applied_end);
        let mut at = self.applied_end;
        let mut epoch = self.applied_last_epoch;
        for b in &self.buffered {
            assert_eq!(b.base_offset, at, "buffered batches are contiguous");
            assert!(b.record_count > 0);
            assert!(b.epoch >= epoch, "epochs never decrease");
            at = b.end_offset();
            epoch = b.epoch;
        }
    }
}

/// Batches of an answer must continue the log at `start`, be non-empty, and carry epochs
/// from the log's last epoch up to the answering leader's.
fn check_batches(
    start: LogOffset,
    last_epoch: Epoch,
    leader_epoch: Epoch,
    batches: &[Batch],
) -> Result<(), ObserverError> {
    let mut at = start;
    let mut epoch = last_epoch;
    for b in batches {
        let reason = if b.base_offset != at {
            Some(format!(
                "batch at {} does not continue the log at {at}",
                b.base_offset
            ))
        } else if b.record_count == 0 {
            Some(format!("empty batch at {at}"))
        } else if b.epoch < epoch {
            Some(format!(
                "batch at {at} has epoch {} below the previous {epoch}",
                b.epoch
            ))
        } else if b.epoch > leader_epoch {
            Some(format!(
                "batch at {at} has epoch {} above the leader's {leader_epoch}",
                b.epoch
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(ObserverError::InvalidResponse { reason });
        }
        at = b.end_offset();
        epoch = b.epoch;
    }
    Ok(())
}

/// Replays a data batch into `image`, checking the payload first.
fn replay(image: &mut MetadataImage, b: &Batch) -> Result<(), ObserverError> {
    let offset = b.base_offset;
    // The payload's allocation is normally aligned enough for the archive; copy if not.
    let copy;
    let bytes: &[u8] = if (b.payload.as_ptr() as usize) % 16 == 0 {
        &b.payload
    } else {
        let mut v = AlignedVec::<16>::with_capacity(b.payload.len());
        v.extend_from_slice(&b.payload);
        copy = v;
        &copy
    };
    let batch = decode_batch(bytes).map_err(|source| ObserverError::Decode { offset, source })?;
    if batch.len() != b.record_count as usize {
        return Err(ObserverError::InvalidResponse {
            reason: format!(
                "batch at {offset} holds {} records but counts {}",
                batch.len(),
                b.record_count
            ),
        });
    }
    for (i, record) in batch.iter().enumerate() {
        image
            .replay(offset.add(i as u64), record)
            .map_err(ObserverError::Replay)?;
    }
    Ok(())
}
