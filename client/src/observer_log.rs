//! [`ObserverLog`]: an observer's copy of the metadata log, pure (no IO, no clock), driven by
//! fetch responses. [`crate::MetadataFollower`] runs it against a real leader; tests drive it
//! with synthetic responses.
//!
//! # Model
//!
//! ```text
//!   0   snapshot end    applied_end                end()
//!   |- snapshot -|- applied -|------ buffered --------|
//!   (in the image)            (fetched, maybe beyond the HWM: may still be truncated)
//! ```
//!
//! The log is a committed, applied prefix (its records are in the [`MetadataImage`]) followed
//! by buffered batches that the leader sent but that may lie beyond the high watermark. Data
//! beyond the HWM is not committed and a new leader may truncate it, so a batch is applied
//! only once the HWM reaches its end; a `Diverging` answer drops buffered batches, never
//! applied ones. Control batches (Raft's own records) advance the offsets without touching
//! the image.
//!
//! A leader deletes its log below its latest snapshot (KIP-630), so an observer starting from
//! 0 or lagging far behind is answered `SnapshotNeeded`. The caller downloads that snapshot
//! ([`crate::SnapshotDownload`]) and hands its bytes to [`ObserverLog::install_snapshot`]: the
//! applied prefix becomes the snapshot (always committed: a leader snapshots only below its
//! HWM), the image is rebuilt from its records, the buffer is dropped, and fetching goes on
//! from the snapshot's end.
//!
//! What a response does to the log is decided by the follower's fetch rules,
//! [`corum_raft::follower::fetch_step`], the ones the Raft core's own followers and observers
//! follow (this log's applied end is its committed end); the table is what they mean here.
//!
//! | response (echoing the current end and last epoch)  | effect |
//! |---|---|
//! | epoch below the highest seen                       | ignored (a deposed leader) |
//! | `Batches { batches, high_watermark }`              | batches appended to the buffer (checked: contiguous, non-empty, epochs non-decreasing and not above the response's); HWM = max(HWM, answer's); buffered batches ending at or below the HWM applied in order |
//! | `Diverging { epoch, end_offset }`                  | truncate to `min(end_offset, my end for epoch)` (Kafka's rule, as the Raft core's follower does); dropping below the applied end is [`ObserverError::CommittedTruncation`] |
//! | `NotLeader`                                        | the epoch is noted; nothing else changes |
//! | `SnapshotNeeded { snapshot }` ending at or above the applied end | [`Progress::snapshot_needed`]; nothing else changes (the caller downloads and installs it) |
//! | `SnapshotNeeded` ending below the applied end      | ignored (a late answer: that data is applied already) |
//! | `SnapshotNeeded` whose epoch is above the response's | [`ObserverError::InvalidResponse`] |
//! | a `Batches` / `Diverging` not echoing the current end and last epoch | ignored (a late answer to an older fetch) |
//!
//! | [`ObserverLog::install_snapshot`] (id, data)       | effect |
//! |---|---|
//! | ends below the applied end                         | refused: [`SnapshotInstall::Behind`], nothing changes |
//! | data not one record batch, or its records do not replay into an empty image | [`ObserverError::BadSnapshot`], nothing changes |
//! | otherwise                                          | image = the snapshot's records replayed at offsets 0, 1, ... with `end_offset` = the snapshot's end; applied end = end() = the snapshot's end; HWM = max(HWM, the snapshot's end); last epoch = the snapshot's epoch; buffer dropped |
//!
//! Invariants (checked by [`ObserverLog::check_invariants`]): `applied_end <= max(HWM seen)`;
//! buffered batches are contiguous from `applied_end`, each non-empty, with non-decreasing
//! epochs not below the last applied one; `image.end_offset <= applied_end`; the last
//! installed snapshot ends at or below `applied_end`, with an epoch at most the last applied
//! one's.

use std::collections::VecDeque;

use corum_controller::{aligned, decode_batch, MetadataImage};
use corum_raft::follower::{fetch_request, fetch_step, FetchStep, FollowerLog};
use corum_raft::message::{FetchRequest, FetchResponse};
use corum_raft::{Batch, FetchAnswerError, ReplicaKey, SnapshotId};
use corum_types::{Epoch, LogOffset, NodeId};

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
    /// The leader's log starts after this log's end: download this snapshot and
    /// [`ObserverLog::install_snapshot`] it, then fetch again.
    pub snapshot_needed: Option<SnapshotId>,
}

/// What [`ObserverLog::install_snapshot`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotInstall {
    /// The image was rebuilt from the snapshot's `records`; `dropped_records` buffered
    /// records were dropped (fetched again from the snapshot's end if still in the log).
    Installed { records: u64, dropped_records: u64 },
    /// The snapshot ends below the applied end: installing it would go back; nothing changed.
    Behind { applied_end: LogOffset },
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
    /// `SnapshotNeeded` answers acted on (reported in [`Progress::snapshot_needed`]).
    pub snapshots_needed: u64,
    /// Snapshots installed, and the records replayed from them.
    pub snapshots_installed: u64,
    pub snapshot_records_applied: u64,
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
    /// The last snapshot installed.
    snapshot: Option<SnapshotId>,
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

    /// The last snapshot installed, if any.
    pub fn snapshot(&self) -> Option<SnapshotId> {
        self.snapshot
    }

    pub fn stats(&self) -> ObserverStats {
        self.stats
    }

    /// Notes the epoch and leader a response states (a fetch's, or a FetchSnapshot's). An
    /// epoch below the highest seen changes nothing; a higher one forgets the old leader.
    /// Returns whether the response's epoch is below the highest seen (it is then stale).
    pub fn observe_epoch(&mut self, epoch: Epoch, leader: Option<NodeId>) -> bool {
        if epoch < self.epoch {
            return true;
        }
        if epoch > self.epoch {
            self.epoch = epoch;
            self.leader = None;
        }
        if leader.is_some() {
            self.leader = leader;
        }
        false
    }

    /// The next fetch of `replica`, long-polling up to `wait_max_ms`.
    pub fn fetch_request(&self, replica: ReplicaKey, wait_max_ms: u64) -> FetchRequest {
        fetch_request(
            &self.view(),
            self.epoch,
            replica,
            self.high_watermark,
            wait_max_ms,
        )
    }

    /// This log as the follower's fetch rules see it: committed up to the applied end.
    fn view(&self) -> View<'_> {
        View(self)
    }

    /// Takes one fetch response (see the module doc). On error nothing was changed except
    /// what [`ObserverError::Replay`] / [`ObserverError::Decode`] interrupted: the image then
    /// no longer follows the log and the observer must stop.
    pub fn on_response(&mut self, resp: FetchResponse) -> Result<Progress, ObserverError> {
        self.stats.responses += 1;
        let mut progress = Progress::default();
        if self.observe_epoch(resp.epoch, resp.leader) {
            progress.ignored = true;
            self.stats.ignored_responses += 1;
            return Ok(progress);
        }
        let step = fetch_step(&self.view(), resp.epoch, resp.result).map_err(|e| match e {
            FetchAnswerError::CommittedTruncation { to, committed } => {
                ObserverError::CommittedTruncation {
                    to,
                    applied: committed,
                }
            }
            other => ObserverError::InvalidResponse {
                reason: other.to_string(),
            },
        })?;
        match step {
            FetchStep::NotLeader => {
                progress.ignored = true;
                progress.not_leader = true;
                self.stats.ignored_responses += 1;
            }
            FetchStep::Stale => {
                progress.ignored = true;
                self.stats.ignored_responses += 1;
            }
            FetchStep::Snapshot(snapshot) => {
                self.stats.snapshots_needed += 1;
                progress.snapshot_needed = Some(snapshot);
            }
            FetchStep::Append {
                batches,
                high_watermark,
            } => {
                progress.fetched_batches = batches.len();
                self.buffered.extend(batches);
                self.high_watermark = self.high_watermark.max(high_watermark);
                self.apply(&mut progress)?;
            }
            FetchStep::Truncate { to } => {
                self.stats.diverging += 1;
                progress.truncated_records = self.truncate(to);
            }
        }
        Ok(progress)
    }

    /// Replaces the applied prefix with a snapshot the leader sent: `data` is its bytes (one
    /// controller record batch, as [`corum_controller::encode_batch`] of
    /// [`MetadataImage::snapshot_records`] makes it). See the module doc's second table. The
    /// whole image is rebuilt before anything changes, so on error the log is as it was.
    pub fn install_snapshot(
        &mut self,
        snapshot: SnapshotId,
        data: &[u8],
    ) -> Result<SnapshotInstall, ObserverError> {
        if snapshot.end_offset < self.applied_end {
            return Ok(SnapshotInstall::Behind {
                applied_end: self.applied_end,
            });
        }
        let (image, records) = snapshot_image(snapshot, data)?;
        let dropped_records = self.buffered_records();
        self.image = image;
        self.buffered.clear();
        self.applied_end = snapshot.end_offset;
        self.applied_last_epoch = snapshot.epoch;
        self.high_watermark = self.high_watermark.max(snapshot.end_offset);
        self.snapshot = Some(snapshot);
        self.stats.snapshots_installed += 1;
        self.stats.snapshot_records_applied += records;
        Ok(SnapshotInstall::Installed {
            records,
            dropped_records,
        })
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
        if let Some(s) = self.snapshot {
            assert!(
                s.end_offset <= self.applied_end,
                "snapshot beyond the applied end"
            );
            assert!(
                s.epoch <= self.applied_last_epoch,
                "snapshot epoch beyond the log's"
            );
        }
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

/// An [`ObserverLog`] seen by the follower's fetch rules ([`FollowerLog`]): its applied prefix
/// is committed.
struct View<'a>(&'a ObserverLog);

impl FollowerLog for View<'_> {
    fn end(&self) -> LogOffset {
        self.0.end()
    }

    fn last_epoch(&self) -> Epoch {
        self.0.last_epoch()
    }

    /// The end of the last batch whose epoch is at most `epoch`; the applied end if no
    /// buffered one is and the applied prefix ends in such an epoch, else 0 (below anything
    /// applied: the rules refuse to truncate there).
    fn end_for_epoch(&self, epoch: Epoch) -> LogOffset {
        let log = self.0;
        match log.buffered.iter().rposition(|b| b.epoch <= epoch) {
            Some(i) => log.buffered[i].end_offset(),
            None if log.applied_last_epoch <= epoch => log.applied_end,
            None => LogOffset(0),
        }
    }

    fn committed_end(&self) -> LogOffset {
        self.0.applied_end
    }
}

/// The image a snapshot's records rebuild (KIP-630: replayed at offsets 0, 1, ... into an
/// empty image, which then ends at the snapshot's end), and how many records it held.
fn snapshot_image(
    snapshot: SnapshotId,
    data: &[u8],
) -> Result<(MetadataImage, u64), ObserverError> {
    let bad = |reason: String| ObserverError::BadSnapshot { snapshot, reason };
    let bytes = aligned(data);
    let batch = decode_batch(&bytes).map_err(|e| bad(e.to_string()))?;
    let image =
        MetadataImage::from_snapshot(snapshot.end_offset, batch).map_err(|e| bad(e.to_string()))?;
    Ok((image, batch.len() as u64))
}

/// Replays a data batch into `image`, checking the payload first.
fn replay(image: &mut MetadataImage, b: &Batch) -> Result<(), ObserverError> {
    let offset = b.base_offset;
    // The payload's allocation is normally aligned enough for the archive; copy if not.
    let bytes = aligned(&b.payload);
    let batch = decode_batch(&bytes).map_err(|source| ObserverError::Decode { offset, source })?;
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
    use corum_controller::records::{ConfigResourceType, MetadataRecord, UnfenceBrokerRecordV1};
    use corum_raft::message::{FetchResponse, FetchResult, FetchSnapshotResult};
    use corum_types::{BrokerEpoch, Uuid};
    use proptest::prelude::*;
    use rkyv::util::AlignedVec;

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
    /// above the leader's, a snapshot of an epoch above the leader's.
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
        assert!(matches!(
            log.on_response(snapshot_needed(1, snap_id(10, 2))),
            Err(ObserverError::InvalidResponse { .. })
        ));
    }

    // ----- snapshots -----

    fn snap_id(end: u64, epoch: u64) -> SnapshotId {
        SnapshotId {
            end_offset: LogOffset(end),
            epoch: Epoch(epoch),
        }
    }

    fn snapshot_needed(epoch: u64, snapshot: SnapshotId) -> FetchResponse {
        FetchResponse {
            epoch: Epoch(epoch),
            leader: Some(NodeId(1)),
            result: FetchResult::SnapshotNeeded { snapshot },
        }
    }

    /// The snapshot bytes a leader whose image is `image` writes.
    fn snapshot_data(image: &MetadataImage) -> Vec<u8> {
        corum_controller::encode_batch(&image.snapshot_records()).to_vec()
    }

    /// A leader's committed log of data batches `[0, 6)` in epochs 1 and 2, with a control
    /// batch between.
    fn leader_log() -> Vec<Batch> {
        vec![
            batch(0, 1, 1, true),
            batch(1, 2, 1, false),
            batch(3, 1, 2, true),
            batch(4, 2, 2, false),
        ]
    }

    /// A `SnapshotNeeded` answer is not an error: it names the snapshot in the progress and
    /// changes nothing else; one ending below the applied end is a stale answer, ignored.
    #[test]
    fn snapshot_needed_names_the_snapshot() {
        let mut log = ObserverLog::new();
        let p = log.on_response(snapshot_needed(2, snap_id(6, 2))).unwrap();
        assert_eq!(p.snapshot_needed, Some(snap_id(6, 2)));
        assert!(!p.ignored);
        assert_eq!((log.applied_end(), log.end()), (LogOffset(0), LogOffset(0)));
        assert_eq!(
            log.epoch(),
            Epoch(2),
            "the epoch is learnt as from any answer"
        );
        assert_eq!(log.stats().snapshots_needed, 1);

        log.on_response(batches_response(&log, 2, vec![batch(0, 3, 2, false)], 3))
            .unwrap();
        let p = log.on_response(snapshot_needed(2, snap_id(2, 2))).unwrap();
        assert!(p.ignored && p.snapshot_needed.is_none());
        // Ending exactly at the applied end is still acted on (it replaces a diverging buffer).
        let p = log.on_response(snapshot_needed(2, snap_id(3, 2))).unwrap();
        assert_eq!(p.snapshot_needed, Some(snap_id(3, 2)));
    }

    /// An installed snapshot gives the image the original records replay into; offsets,
    /// HWM and last epoch move to the snapshot's end and epoch, the next fetch asks from
    /// there, and a `Batches` answer at that offset applies on top of it.
    #[test]
    fn an_installed_snapshot_rebuilds_the_image_and_fetching_continues() {
        let original = reference_image(&leader_log(), LogOffset(6));
        assert_eq!(original.end_offset, LogOffset(6));
        let data = snapshot_data(&original);

        let mut log = ObserverLog::new();
        let p = log.on_response(snapshot_needed(2, snap_id(6, 2))).unwrap();
        let id = p.snapshot_needed.expect("a snapshot is needed");
        let installed = log.install_snapshot(id, &data).unwrap();
        assert_eq!(
            installed,
            SnapshotInstall::Installed {
                records: original.snapshot_records().len() as u64,
                dropped_records: 0
            }
        );
        assert_eq!(log.image(), &original);
        assert_eq!(
            (log.applied_end(), log.end(), log.high_watermark()),
            (LogOffset(6), LogOffset(6), LogOffset(6))
        );
        assert_eq!(log.last_epoch(), Epoch(2));
        assert_eq!(log.buffered_records(), 0);
        assert_eq!(log.snapshot(), Some(id));
        assert_eq!(log.stats().snapshots_installed, 1);
        log.check_invariants();

        let req = log.fetch_request(replica(), 500);
        assert_eq!(
            (
                req.fetch_offset,
                req.last_fetched_epoch,
                req.epoch,
                req.high_watermark
            ),
            (LogOffset(6), Epoch(2), Epoch(2), LogOffset(6))
        );
        let p = log
            .on_response(batches_response(&log, 2, vec![batch(6, 2, 2, false)], 8))
            .unwrap();
        assert_eq!(p.applied.len(), 1);
        assert_eq!(log.applied_end(), LogOffset(8));
        let mut full = leader_log();
        full.push(batch(6, 2, 2, false));
        assert_eq!(log.image(), &reference_image(&full, LogOffset(8)));
        log.check_invariants();
    }

    /// A snapshot replaces applied data and drops the buffer when it ends beyond them, and is
    /// refused (nothing changes) when it ends below the applied end.
    #[test]
    fn a_snapshot_below_the_applied_end_is_refused() {
        let mut log = ObserverLog::new();
        // [0,3) applied, [3,5) buffered.
        log.on_response(batches_response(
            &log,
            1,
            vec![batch(0, 3, 1, false), batch(3, 2, 1, false)],
            3,
        ))
        .unwrap();
        let image = log.image().clone();
        let data = snapshot_data(&reference_image(&leader_log(), LogOffset(2)));
        assert_eq!(
            log.install_snapshot(snap_id(2, 1), &data),
            Ok(SnapshotInstall::Behind {
                applied_end: LogOffset(3)
            })
        );
        assert_eq!(log.image(), &image);
        assert_eq!((log.applied_end(), log.end()), (LogOffset(3), LogOffset(5)));
        assert_eq!(log.snapshot(), None);

        // One ending at 4, inside the buffer: the buffer goes, fetching resumes at 4.
        let at4 = reference_image(&[batch(0, 4, 1, false)], LogOffset(4));
        let installed = log
            .install_snapshot(snap_id(4, 1), &snapshot_data(&at4))
            .unwrap();
        assert!(matches!(
            installed,
            SnapshotInstall::Installed {
                dropped_records: 2,
                ..
            }
        ));
        assert_eq!((log.applied_end(), log.end()), (LogOffset(4), LogOffset(4)));
        assert_eq!(log.image(), &at4);
        log.check_invariants();
    }

    /// Bytes that are not a record batch, and records that do not replay into an empty image
    /// (unfencing a broker never registered), are a `BadSnapshot` error and leave the log as it
    /// was; the same bytes unaligned in memory load like aligned ones.
    #[test]
    fn a_bad_snapshot_is_an_error_and_changes_nothing() {
        let mut log = ObserverLog::new();
        log.on_response(batches_response(&log, 1, vec![batch(0, 2, 1, false)], 2))
            .unwrap();
        let before = (log.image().clone(), log.applied_end(), log.end());
        let id = snap_id(10, 1);
        for data in [vec![], vec![1u8, 2, 3], vec![0xff; 64]] {
            assert!(matches!(
                log.install_snapshot(id, &data),
                Err(ObserverError::BadSnapshot { snapshot, .. }) if snapshot == id
            ));
        }
        let orphan = corum_controller::encode_batch(&[MetadataRecord::UnfenceBroker(
            UnfenceBrokerRecordV1 {
                broker_id: NodeId(7),
                broker_epoch: BrokerEpoch(1),
            },
        )]);
        assert!(matches!(
            log.install_snapshot(id, &orphan),
            Err(ObserverError::BadSnapshot { .. })
        ));
        assert_eq!((log.image().clone(), log.applied_end(), log.end()), before);
        assert_eq!(log.stats().snapshots_installed, 0);

        // Unaligned good bytes are copied, not refused.
        let good = snapshot_data(&reference_image(&leader_log(), LogOffset(6)));
        let mut shifted = AlignedVec::<16>::new();
        shifted.extend_from_slice(&[0]);
        shifted.extend_from_slice(&good);
        log.install_snapshot(snap_id(6, 2), &shifted[1..]).unwrap();
        assert_eq!(log.image(), &reference_image(&leader_log(), LogOffset(6)));
        log.check_invariants();
    }

    // ----- property test against a model leader -----

    /// The leader's side of the model: its log, epoch, the committed prefix and the prefix
    /// replaced by a snapshot.
    #[derive(Clone, Debug)]
    struct ModelLeader {
        log: Vec<Batch>,
        epoch: u64,
        /// Batches `..committed` are committed (never truncated).
        committed: usize,
        /// Batches `..start` are deleted, replaced by a snapshot (`start <= committed`).
        start: usize,
    }

    impl ModelLeader {
        /// The log start: the snapshot's id (end 0, epoch 0 without one).
        fn start_id(&self) -> SnapshotId {
            self.log[..self.start]
                .last()
                .map_or(snap_id(0, 0), |b| snap_id(b.end_offset().0, b.epoch.0))
        }

        fn end(&self) -> u64 {
            self.log.last().map_or(0, |b| b.end_offset().0)
        }

        fn committed_end(&self) -> u64 {
            self.log[..self.committed]
                .last()
                .map_or(0, |b| b.end_offset().0)
        }

        fn epoch_before(&self, offset: u64) -> Option<u64> {
            let start = self.start_id();
            if offset == start.end_offset.0 {
                return Some(start.epoch.0);
            }
            self.log[self.start..]
                .iter()
                .find(|b| b.base_offset.0 < offset && offset <= b.end_offset().0)
                .map(|b| b.epoch.0)
        }

        /// As the Raft log's: the retained batches, else the log start if its epoch fits.
        fn end_for_epoch(&self, epoch: u64) -> Option<(u64, u64)> {
            let start = self.start_id();
            match self.log[self.start..]
                .iter()
                .rev()
                .find(|b| b.epoch.0 <= epoch)
            {
                Some(b) => Some((b.epoch.0, b.end_offset().0)),
                None => (start.epoch.0 <= epoch).then_some((start.epoch.0, start.end_offset.0)),
            }
        }

        /// What the Raft core's `serve_fetch` answers (never holding).
        fn serve(&self, req: &FetchRequest, max_batches: usize, hwm: u64) -> FetchResponse {
            // A fetch of a newer epoch deposes this leader (it answers NotLeader as well).
            let result = if req.epoch.0 != self.epoch {
                FetchResult::NotLeader
            } else {
                let at = req.fetch_offset.0;
                if at < self.start_id().end_offset.0 {
                    FetchResult::SnapshotNeeded {
                        snapshot: self.start_id(),
                    }
                } else if at > self.end() || self.epoch_before(at) != Some(req.last_fetched_epoch.0)
                {
                    match self.end_for_epoch(req.last_fetched_epoch.0) {
                        Some((epoch, end)) => FetchResult::Diverging {
                            fetch_offset: req.fetch_offset,
                            last_fetched_epoch: req.last_fetched_epoch,
                            epoch: Epoch(epoch),
                            end_offset: LogOffset(end.min(at)),
                        },
                        None => FetchResult::SnapshotNeeded {
                            snapshot: self.start_id(),
                        },
                    }
                } else {
                    FetchResult::Batches {
                        fetch_offset: req.fetch_offset,
                        last_fetched_epoch: req.last_fetched_epoch,
                        batches: self.log[self.start..]
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
        /// The leader snapshots up to `n` more committed batches and deletes them.
        Snapshot { n: usize },
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
            1 => (1usize..4).prop_map(|n| Action::Snapshot { n }),
        ]
    }

    /// An image without its end offset: a replayed image ends after its last data record, one
    /// installed from a snapshot at the snapshot's end (control batches may lie between).
    fn state(image: &MetadataImage) -> MetadataImage {
        MetadataImage {
            end_offset: LogOffset(0),
            ..image.clone()
        }
    }

    /// Hands `resp` to `obs`; when it needs a snapshot, installs the one a leader whose
    /// committed batches are `committed` wrote (it must install: it is never behind).
    fn deliver(obs: &mut ObserverLog, resp: FetchResponse, committed: &[Batch]) -> Progress {
        let p = obs.on_response(resp).unwrap();
        if let Some(id) = p.snapshot_needed {
            let data = snapshot_data(&reference_image(committed, id.end_offset));
            let installed = obs.install_snapshot(id, &data).unwrap();
            assert!(matches!(installed, SnapshotInstall::Installed { .. }));
            assert_eq!(obs.applied_end(), id.end_offset);
        }
        p
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
        /// Against a model leader that appends, commits, snapshots and deletes its log prefix,
        /// loses leadership to successors that truncate uncommitted data, reports lagging
        /// HWMs and whose answers arrive late or twice: the observer never applies beyond the
        /// highest HWM reported, everything it applies is committed and stays so (never
        /// truncated later), its image is exactly the committed data below its applied end
        /// (also when installed from a snapshot), and once everything commits a few fetches
        /// catch it up. A deposed leader may answer too (its HWM is a commit point).
        #[test]
        fn applied_data_is_committed_and_never_truncated(
            actions in proptest::collection::vec(arb_action(), 1..80),
        ) {
            let mut leader = ModelLeader { log: Vec::new(), epoch: 1, committed: 0, start: 0 };
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
                        let p = deliver(&mut obs, resp, &leader.log[..leader.committed]);
                        applied.extend(p.applied);
                    }
                    Action::Deposed { max_batches } => {
                        if let Some(old) = &deposed {
                            let req = obs.fetch_request(replica(), 0);
                            let hwm = old.committed_end();
                            hwm_max = hwm_max.max(hwm);
                            let resp = old.serve(&req, max_batches, hwm);
                            let p = deliver(&mut obs, resp, &old.log[..old.committed]);
                            applied.extend(p.applied);
                        }
                    }
                    Action::Replay => {
                        if let Some(resp) = last.clone() {
                            let p = deliver(&mut obs, resp, &leader.log[..leader.committed]);
                            applied.extend(p.applied);
                        }
                    }
                    Action::Snapshot { n } => {
                        leader.start = (leader.start + n).min(leader.committed);
                    }
                }
                obs.check_invariants();
                // A snapshot is a commit point, like a reported HWM.
                if let Some(id) = obs.snapshot() {
                    hwm_max = hwm_max.max(id.end_offset.0);
                }
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
                    state(obs.image()),
                    state(&reference_image(&leader.log[..leader.committed], obs.applied_end()))
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
                deliver(&mut obs, resp, &leader.log);
            }
            prop_assert_eq!(obs.applied_end().0, end);
            prop_assert_eq!(
                state(obs.image()),
                state(&reference_image(&leader.log, LogOffset(end)))
            );
        }
    }

    /// A junk chunk answer: delivered before the leader's chunk number `.0`, stating size
    /// `.1` and position `.2`, holding `.3`.
    type Junk = (usize, u64, u64, Vec<u8>);

    /// Snapshot bytes (the good snapshot damaged, or arbitrary), the sizes of the leader's
    /// chunks of them (used in turn), and junk answers to put among those chunks.
    fn arb_chunks() -> impl Strategy<Value = (Vec<u8>, Vec<usize>, Vec<Junk>)> {
        let good = snapshot_data(&reference_image(&leader_log(), LogOffset(6)));
        let data = prop_oneof![
            // The good snapshot with a few bytes changed and maybe cut short.
            (
                proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
                any::<prop::sample::Index>(),
                any::<bool>(),
            )
                .prop_map(move |(flips, cut, truncate)| {
                    let mut d = good.clone();
                    for (at, v) in flips {
                        let i = at.index(d.len());
                        d[i] = v;
                    }
                    if truncate {
                        d.truncate(cut.index(d.len()));
                    }
                    d
                }),
            proptest::collection::vec(any::<u8>(), 0..200),
        ];
        (
            data,
            proptest::collection::vec(1usize..64, 1..40),
            proptest::collection::vec(
                (
                    0usize..40,
                    0u64..300,
                    0u64..300,
                    proptest::collection::vec(any::<u8>(), 0..8),
                ),
                0..6,
            ),
        )
    }

    proptest! {
        /// Arbitrary snapshot bytes, cut into arbitrary chunks with junk answers among them,
        /// never panic the download or the install: the download holds exactly the bytes of
        /// the chunks it accepted; the install either rebuilds the image and
        /// moves the log to the snapshot's end, or is a `BadSnapshot` that changes nothing.
        #[test]
        fn snapshot_download_and_install_never_panic(
            (data, sizes, junk) in arb_chunks(),
        ) {
            let id = snap_id(6, 2);
            let mut download = crate::SnapshotDownload::new(id, 4096);
            // The leader's chunks in order, with junk answers (wrong position, size or id)
            // delivered before some of them.
            let mut answers: Vec<FetchSnapshotResult> = Vec::new();
            let mut at = 0usize;
            let mut sizes = sizes.into_iter().cycle();
            let mut i = 0usize;
            loop {
                for (before, size, pos, bytes) in &junk {
                    if *before == i {
                        answers.push(FetchSnapshotResult::Chunk {
                            kraft_version: 1,
                            snapshot: if pos % 3 == 0 { snap_id(7, 2) } else { id },
                            voters: corum_raft::VoterSet::default(),
                            size_total: *size,
                            position: *pos,
                            bytes: bytes.as_slice().into(),
                        });
                    }
                }
                let n = sizes.next().expect("cycled").min(data.len() - at);
                answers.push(FetchSnapshotResult::Chunk {
                    kraft_version: 1,
                    snapshot: id,
                    voters: corum_raft::VoterSet::default(),
                    size_total: data.len() as u64,
                    position: at as u64,
                    bytes: data[at..at + n].into(),
                });
                at += n;
                i += 1;
                if at == data.len() {
                    break;
                }
            }
            let mut accepted: Vec<u8> = Vec::new();
            for a in answers {
                if download.is_complete() {
                    break;
                }
                let bytes = match &a {
                    FetchSnapshotResult::Chunk { bytes, .. } => bytes.to_vec(),
                    _ => Vec::new(),
                };
                if download.on_result(a).is_ok() {
                    accepted.extend_from_slice(&bytes);
                }
            }
            prop_assert_eq!(download.data(), &accepted[..]);
            // Junk may have fixed another size first: then the download never completes.
            if !download.is_complete() {
                return Ok(());
            }

            let mut log = ObserverLog::new();
            log.on_response(batches_response(&log, 1, vec![batch(0, 2, 1, false)], 1))
                .unwrap();
            let before = (log.image().clone(), log.applied_end(), log.end(), log.last_epoch());
            match log.install_snapshot(id, download.data()) {
                Ok(SnapshotInstall::Installed { .. }) => {
                    prop_assert_eq!((log.applied_end(), log.end()), (LogOffset(6), LogOffset(6)));
                    prop_assert_eq!(log.image().end_offset, LogOffset(6));
                }
                Ok(SnapshotInstall::Behind { .. }) => prop_assert!(false, "never behind"),
                Err(ObserverError::BadSnapshot { snapshot, .. }) => {
                    prop_assert_eq!(snapshot, id);
                    prop_assert_eq!(
                        (log.image().clone(), log.applied_end(), log.end(), log.last_epoch()),
                        before
                    );
                }
                Err(e) => prop_assert!(false, "unexpected {e:?}"),
            }
            log.check_invariants();
        }
    }
}
