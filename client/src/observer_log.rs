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

/// The tests' batch builder, shared with the `metadata_follower` integration test.
#[cfg(test)]
#[path = "../tests/common/config_batches.rs"]
mod config_batches;

#[cfg(test)]
mod tests {
    use super::config_batches::batch;
    use super::*;
    use corum_controller::image::ConfigResource;
    use corum_controller::records::ConfigResourceType;
    use corum_raft::message::FetchResponse;
    use corum_types::Uuid;
    use proptest::prelude::*;

    fn replica() -> ReplicaKey {
        ReplicaKey {
            id: NodeId(100),
            directory_id: Uuid([100; 16]),
        }
    }

    fn cluster_default() -> ConfigResource {
        ConfigResource {
            resource_type: ConfigResourceType::Broker,
            name: String::new(),
        }
    }

    fn batches_response(
        log: &ObserverLog,
        epoch: u64,
        batches: Vec<Batch>,
        hwm: u64,
    ) -> FetchResponse {
        FetchResponse {
            epoch: Epoch(epoch),
            leader: Some(NodeId(1)),
            result: FetchResult::Batches {
                fetch_offset: log.end(),
                last_fetched_epoch: log.last_epoch(),
                batches,
                high_watermark: LogOffset(hwm),
            },
        }
    }

    fn value(log: &ObserverLog, key: &str) -> Option<String> {
        log.image()
            .configs
            .value(&cluster_default(), key)
            .map(str::to_owned)
    }

    /// Fetched batches beyond the high watermark are buffered, not applied; they are applied
    /// (data replayed, control skipped) once a later answer moves the HWM past their end.
    #[test]
    fn only_batches_below_the_hwm_are_applied() {
        let mut log = ObserverLog::new();
        let req = log.fetch_request(replica(), 500);
        assert_eq!(
            (req.fetch_offset, req.last_fetched_epoch, req.epoch),
            (LogOffset(0), Epoch(0), Epoch(0))
        );
        let resp = batches_response(
            &log,
            1,
            vec![
                batch(0, 1, 1, true),
                batch(1, 2, 1, false),
                batch(3, 1, 1, false),
            ],
            3,
        );
        let p = log.on_response(resp).unwrap();
        assert_eq!(p.fetched_batches, 3);
        assert_eq!(
            p.applied.iter().map(|a| a.end_offset.0).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert!(p.applied[0].control);
        assert_eq!(log.applied_end(), LogOffset(3));
        assert_eq!(log.end(), LogOffset(4));
        assert_eq!(log.buffered_records(), 1);
        assert_eq!(value(&log, "k1").as_deref(), Some("e1"));
        assert_eq!(value(&log, "k3"), None);
        assert_eq!(log.image().end_offset, LogOffset(3));
        log.check_invariants();

        let req = log.fetch_request(replica(), 500);
        assert_eq!((req.fetch_offset, req.epoch), (LogOffset(4), Epoch(1)));
        assert_eq!(req.high_watermark, LogOffset(3));
        let p = log
            .on_response(batches_response(&log, 1, vec![], 4))
            .unwrap();
        assert_eq!(p.applied.len(), 1);
        assert_eq!(value(&log, "k3").as_deref(), Some("e1"));
        assert_eq!(log.stats().control_batches_applied, 1);
        assert_eq!(log.stats().records_applied, 3);
        log.check_invariants();
    }

    /// A Diverging answer drops the uncommitted buffered suffix (never applied data), the next
    /// fetch starts where the leader said, and the image ends up with the new leader's data.
    #[test]
    fn diverging_drops_unapplied_data_and_refetches() {
        let mut log = ObserverLog::new();
        // Epoch 1: [0,2) committed, [2,4) fetched but not committed.
        let resp = batches_response(
            &log,
            1,
            vec![batch(0, 2, 1, false), batch(2, 2, 1, false)],
            2,
        );
        log.on_response(resp).unwrap();
        assert_eq!((log.applied_end(), log.end()), (LogOffset(2), LogOffset(4)));
        // Epoch 2's leader has [2,3) of its own: our (4, e1) diverges; its end for e1 is 2.
        let req = log.fetch_request(replica(), 500);
        let p = log
            .on_response(FetchResponse {
                epoch: Epoch(2),
                leader: Some(NodeId(2)),
                result: FetchResult::Diverging {
                    fetch_offset: req.fetch_offset,
                    last_fetched_epoch: req.last_fetched_epoch,
                    epoch: Epoch(1),
                    end_offset: LogOffset(2),
                },
            })
            .unwrap();
        assert_eq!(p.truncated_records, 2);
        assert!(p.applied.is_empty());
        assert_eq!((log.applied_end(), log.end()), (LogOffset(2), LogOffset(2)));
        assert_eq!(log.epoch(), Epoch(2));
        assert_eq!(log.leader(), Some(NodeId(2)));
        let req = log.fetch_request(replica(), 500);
        assert_eq!(
            (req.fetch_offset, req.last_fetched_epoch, req.epoch),
            (LogOffset(2), Epoch(1), Epoch(2))
        );
        log.on_response(batches_response(&log, 2, vec![batch(2, 1, 2, false)], 3))
            .unwrap();
        assert_eq!(log.applied_end(), LogOffset(3));
        assert_eq!(value(&log, "k2").as_deref(), Some("e2"));
        assert_eq!(value(&log, "k3"), None);
        assert_eq!(log.stats().diverging, 1);
        log.check_invariants();
    }

    /// A leader asking to truncate applied (committed) data is refused with an error and the
    /// log is left as it was.
    #[test]
    fn truncating_applied_data_is_an_error() {
        let mut log = ObserverLog::new();
        log.on_response(batches_response(&log, 1, vec![batch(0, 3, 1, false)], 3))
            .unwrap();
        let before = (log.applied_end(), log.end());
        let err = log
            .on_response(FetchResponse {
                epoch: Epoch(2),
                leader: Some(NodeId(2)),
                result: FetchResult::Diverging {
                    fetch_offset: LogOffset(3),
                    last_fetched_epoch: Epoch(1),
                    epoch: Epoch(1),
                    end_offset: LogOffset(1),
                },
            })
            .unwrap_err();
        assert_eq!(
            err,
            ObserverError::CommittedTruncation {
                to: LogOffset(1),
                applied: LogOffset(3)
            }
        );
        assert_eq!((log.applied_end(), log.end()), before);
    }

    /// Answers from an older epoch, answers to an older fetch and NotLeader change nothing but
    /// the known epoch; a NotLeader from a newer epoch is what the next fetch carries.
    #[test]
    fn stale_answers_are_ignored() {
        let mut log = ObserverLog::new();
        let p = log
            .on_response(FetchResponse {
                epoch: Epoch(3),
                leader: Some(NodeId(2)),
                result: FetchResult::NotLeader,
            })
            .unwrap();
        assert!(p.ignored && p.not_leader);
        assert_eq!(log.fetch_request(replica(), 1).epoch, Epoch(3));
        // A deposed leader of epoch 2 offering data.
        let old = batches_response(&log, 2, vec![batch(0, 1, 2, false)], 1);
        assert!(log.on_response(old).unwrap().ignored);
        // A late answer to a fetch at another offset.
        let late = FetchResponse {
            epoch: Epoch(3),
            leader: Some(NodeId(2)),
            result: FetchResult::Batches {
                fetch_offset: LogOffset(5),
                last_fetched_epoch: Epoch(3),
                batches: vec![batch(5, 1, 3, false)],
                high_watermark: LogOffset(6),
            },
        };
        assert!(log.on_response(late).unwrap().ignored);
        assert_eq!((log.applied_end(), log.end()), (LogOffset(0), LogOffset(0)));
        assert_eq!(log.stats().ignored_responses, 3);
    }

    /// Answers breaking the protocol are errors: a gap, an empty batch, epochs going back or
    /// above the leader's; a snapshot request is an error this observer reports.
    #[test]
    fn invalid_answers_are_refused() {
        let cases = [
            vec![batch(1, 1, 1, false)],
            vec![Batch {
                record_count: 0,
                ..batch(0, 1, 1, false)
            }],
            vec![batch(0, 1, 2, false), batch(1, 1, 1, false)],
            vec![batch(0, 1, 5, false)],
        ];
        for batches in cases {
            let mut log = ObserverLog::new();
            let resp = batches_response(&log, 2, batches, 2);
            assert!(matches!(
                log.on_response(resp),
                Err(ObserverError::InvalidResponse { .. })
            ));
            assert_eq!(log.end(), LogOffset(0));
        }
        let mut log = ObserverLog::new();
        // A data batch whose payload is not a record batch.
        let mut b = batch(0, 1, 1, false);
        b.payload = vec![1u8, 2, 3].into();
        let resp = batches_response(&log, 1, vec![b], 1);
        assert!(matches!(
            log.on_response(resp),
            Err(ObserverError::Decode { .. })
        ));
        let mut log = ObserverLog::new();
        let resp = FetchResponse {
            epoch: Epoch(1),
            leader: Some(NodeId(1)),
            result: FetchResult::SnapshotNeeded {
                snapshot: corum_raft::SnapshotId {
                    end_offset: LogOffset(10),
                    epoch: Epoch(1),
                },
            },
        };
        assert!(matches!(
            log.on_response(resp),
            Err(ObserverError::SnapshotNeeded { .. })
        ));
    }

    // ----- property test against a model leader -----

    /// The leader's side of the model: its log, epoch, and the committed prefix.
    #[derive(Clone, Debug)]
    struct ModelLeader {
        log: Vec<Batch>,
        epoch: u64,
        /// Batches `..committed` are committed (never truncated).
        committed: usize,
    }

    impl ModelLeader {
        fn end(&self) -> u64 {
            self.log.last().map_or(0, |b| b.end_offset().0)
        }

        fn committed_end(&self) -> u64 {
            self.log[..self.committed]
                .last()
                .map_or(0, |b| b.end_offset().0)
        }

        fn epoch_before(&self, offset: u64) -> Option<u64> {
            if offset == 0 {
                return Some(0);
            }
            self.log
                .iter()
                .find(|b| b.base_offset.0 < offset && offset <= b.end_offset().0)
                .map(|b| b.epoch.0)
        }

        fn end_for_epoch(&self, epoch: u64) -> (u64, u64) {
            self.log
                .iter()
                .rev()
                .find(|b| b.epoch.0 <= epoch)
                .map_or((0, 0), |b| (b.epoch.0, b.end_offset().0))
        }

        /// What the Raft core's `serve_fetch` answers (never holding).
        fn serve(&self, req: &FetchRequest, max_batches: usize, hwm: u64) -> FetchResponse {
            // A fetch of a newer epoch deposes this leader (it answers NotLeader as well).
            let result = if req.epoch.0 != self.epoch {
                FetchResult::NotLeader
            } else {
                let at = req.fetch_offset.0;
                if at > self.end() || self.epoch_before(at) != Some(req.last_fetched_epoch.0) {
                    let (epoch, end) = self.end_for_epoch(req.last_fetched_epoch.0);
                    FetchResult::Diverging {
                        fetch_offset: req.fetch_offset,
                        last_fetched_epoch: req.last_fetched_epoch,
                        epoch: Epoch(epoch),
                        end_offset: LogOffset(end.min(at)),
                    }
                } else {
                    FetchResult::Batches {
                        fetch_offset: req.fetch_offset,
                        last_fetched_epoch: req.last_fetched_epoch,
                        batches: self
                            .log
                            .iter()
                            .filter(|b| b.base_offset.0 >= at)
                            .take(max_batches)
                            .cloned()
                            .collect(),
                        high_watermark: LogOffset(hwm),
                    }
                }
            };
            FetchResponse {
                epoch: Epoch(self.epoch),
                leader: Some(NodeId(1)),
                result,
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Action {
        /// The leader appends a batch of `count` records (a control batch if `control`).
        Append { count: u32, control: bool },
        /// Up to `n` more batches commit.
        Commit { n: usize },
        /// A new leader (next epoch) keeps the committed prefix and `keep` uncommitted batches.
        NewLeader { keep: usize },
        /// The observer fetches; the answer holds up to `max_batches` batches and reports a
        /// HWM `lag` batches below the commit point (a new leader may not know it yet).
        Fetch { max_batches: usize, lag: usize },
        /// The last answer is delivered again, late.
        Replay,
        /// The previous leader, not yet aware it was deposed, answers the observer's fetch.
        Deposed { max_batches: usize },
    }

    fn arb_action() -> impl Strategy<Value = Action> {
        prop_oneof![
            3 => (1u32..4, proptest::bool::weighted(0.2))
                .prop_map(|(count, control)| Action::Append { count, control }),
            2 => (0usize..3).prop_map(|n| Action::Commit { n }),
            1 => (0usize..3).prop_map(|keep| Action::NewLeader { keep }),
            4 => (1usize..4, proptest::prop_oneof![3 => Just(0usize), 1 => 0usize..3])
                .prop_map(|(max_batches, lag)| Action::Fetch { max_batches, lag }),
            1 => Just(Action::Replay),
            1 => (1usize..4).prop_map(|max_batches| Action::Deposed { max_batches }),
        ]
    }

    /// The image a log's committed data batches below `end` replay into.
    fn reference_image(batches: &[Batch], end: LogOffset) -> MetadataImage {
        let mut image = MetadataImage::default();
        for b in batches
            .iter()
            .filter(|b| b.end_offset() <= end && !b.control)
        {
            replay(&mut image, b).unwrap();
        }
        image
    }

    proptest! {
        /// Against a model leader that appends, commits, loses leadership to successors that
        /// truncate uncommitted data, reports lagging HWMs and whose answers arrive late or
        /// twice: the observer never applies beyond the highest HWM reported, everything it
        /// applies is committed and stays so (never truncated later), its image is exactly
        /// the committed data below its applied end, and once everything commits a few
        /// fetches catch it up. A deposed leader may answer too (its HWM is a commit point).
        #[test]
        fn applied_data_is_committed_and_never_truncated(
            actions in proptest::collection::vec(arb_action(), 1..80),
        ) {
            let mut leader = ModelLeader { log: Vec::new(), epoch: 1, committed: 0 };
            let mut obs = ObserverLog::new();
            let mut applied: Vec<AppliedBatch> = Vec::new();
            let mut last: Option<FetchResponse> = None;
            let mut hwm_max = 0u64;
            let mut deposed: Option<ModelLeader> = None;
            for action in actions {
                match action {
                    Action::Append { count, control } => {
                        let b = batch(leader.end(), count, leader.epoch, control);
                        leader.log.push(b);
                    }
                    Action::Commit { n } => {
                        leader.committed = (leader.committed + n).min(leader.log.len());
                    }
                    Action::NewLeader { keep } => {
                        deposed = Some(leader.clone());
                        let keep_to = (leader.committed + keep).min(leader.log.len());
                        leader.log.truncate(keep_to);
                        leader.epoch += 1;
                    }
                    Action::Fetch { max_batches, lag } => {
                        let req = obs.fetch_request(replica(), 0);
                        let hwm_at = leader.committed.saturating_sub(lag);
                        let hwm = leader.log[..hwm_at].last().map_or(0, |b| b.end_offset().0);
                        hwm_max = hwm_max.max(hwm);
                        let resp = leader.serve(&req, max_batches, hwm);
                        last = Some(resp.clone());
                        let p = obs.on_response(resp).unwrap();
                        applied.extend(p.applied);
                    }
                    Action::Deposed { max_batches } => {
                        if let Some(old) = &deposed {
                            let req = obs.fetch_request(replica(), 0);
                            let hwm = old.committed_end();
                            hwm_max = hwm_max.max(hwm);
                            let p = obs.on_response(old.serve(&req, max_batches, hwm)).unwrap();
                            applied.extend(p.applied);
                        }
                    }
                    Action::Replay => {
                        if let Some(resp) = last.clone() {
                            let p = obs.on_response(resp).unwrap();
                            applied.extend(p.applied);
                        }
                    }
                }
                obs.check_invariants();
                prop_assert!(obs.applied_end().0 <= hwm_max);
                prop_assert!(obs.applied_end().0 <= leader.committed_end());
                // Everything applied so far is in the committed prefix, unchanged.
                for a in &applied {
                    let b = leader.log[..leader.committed]
                        .iter()
                        .find(|b| b.base_offset == a.base_offset);
                    prop_assert!(
                        b.is_some_and(|b| b.epoch == a.epoch && b.end_offset() == a.end_offset),
                        "applied {:?} is not committed in {:?}", a, &leader.log[..leader.committed]
                    );
                }
                prop_assert_eq!(
                    obs.image().clone(),
                    reference_image(&leader.log[..leader.committed], obs.applied_end())
                );
            }
            // Everything commits; a bounded number of fetches catches the observer up.
            leader.committed = leader.log.len();
            let end = leader.committed_end();
            for _ in 0..(4 * leader.log.len() + 8) {
                if obs.applied_end().0 == end {
                    break;
                }
                let req = obs.fetch_request(replica(), 0);
                let resp = leader.serve(&req, 4, end);
                obs.on_response(resp).unwrap();
            }
            prop_assert_eq!(obs.applied_end().0, end);
            prop_assert_eq!(obs.image().clone(), reference_image(&leader.log, LogOffset(end)));
        }
    }
}
