//! [`fetch_step`]: what a follower's log does with one Fetch answer (KIP-595 pull
//! replication), pure. The Raft core's follower and observer and the client's observer log
//! both ask it, each about its own log through [`FollowerLog`], and carry out the
//! [`FetchStep`] it returns.
//!
//! | answer (its epoch is the leader's) | checked | step |
//! |---|---|---|
//! | `Batches { fetch_offset, last_fetched_epoch, batches, high_watermark }` not echoing the log's end and last epoch | — | [`FetchStep::Stale`] (a late answer to an older fetch) |
//! | `Batches` echoing them | batches continue the log at its end, each non-empty, epochs from the log's last up to the leader's | [`FetchStep::Append`] |
//! | `Diverging { epoch, end_offset, .. }` not echoing the log | — | [`FetchStep::Stale`] |
//! | `Diverging` echoing it | `to = min(end_offset, log.end_for_epoch(epoch))` (Kafka's rule) not below the committed end | [`FetchStep::Truncate`] `{ to }` (`to <= end`; equal: nothing to drop) |
//! | `SnapshotNeeded { snapshot }` | the snapshot's epoch not above the leader's | ending below the committed end: [`FetchStep::Stale`]; else [`FetchStep::Snapshot`] |
//! | `NotLeader` | — | [`FetchStep::NotLeader`] |
//!
//! A failed check is a [`FetchAnswerError`]: a leader never sends one. The log is unchanged
//! (the step is only computed here).

use corum_types::{Epoch, LogOffset};

use crate::error::FetchAnswerError;
use crate::message::{FetchRequest, FetchResult};
use crate::types::{Batch, ReplicaKey, SnapshotId};

/// A follower's log as the fetch rules see it.
pub trait FollowerLog {
    /// The log's end offset (the next fetch offset).
    fn end(&self) -> LogOffset;
    /// The epoch of the log's last entry (of the snapshot it starts from if empty).
    fn last_epoch(&self) -> Epoch;
    /// Kafka's OffsetForLeaderEpoch on this log: the end of the last entry whose epoch is at
    /// most `epoch`, or the log's start if there is none (at most [`FollowerLog::end`]).
    fn end_for_epoch(&self, epoch: Epoch) -> LogOffset;
    /// The end of what the follower knows to be committed: no answer may truncate below it.
    fn committed_end(&self) -> LogOffset;
}

/// What a follower does with a Fetch answer. See the module doc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchStep {
    /// Append `batches` at the log's end (checked to continue it), then take the leader's
    /// `high_watermark` (a follower never moves its own backward).
    Append {
        batches: Vec<Batch>,
        high_watermark: LogOffset,
    },
    /// The log diverges from the leader's: drop everything after `to` (`committed_end <= to
    /// <= end`).
    Truncate { to: LogOffset },
    /// The leader's log starts after this log's end: download this snapshot.
    Snapshot(SnapshotId),
    /// A late answer (to another fetch, or naming a snapshot below the committed end).
    Stale,
    /// The responder does not lead the fetch's epoch.
    NotLeader,
}

/// The next Fetch of `replica` from `log`, in leader epoch `epoch`, telling the leader the
/// high watermark it knows and long-polling up to `wait_max_ms`.
pub fn fetch_request(
    log: &impl FollowerLog,
    epoch: Epoch,
    replica: ReplicaKey,
    high_watermark: LogOffset,
    wait_max_ms: u64,
) -> FetchRequest {
    FetchRequest {
        epoch,
        replica,
        fetch_offset: log.end(),
        last_fetched_epoch: log.last_epoch(),
        high_watermark,
        wait_max_ms,
    }
}

/// What `log` does with `result`, answered by the leader of `leader_epoch` (see the module
/// doc). Computes only; on error the caller drops the answer.
pub fn fetch_step(
    log: &impl FollowerLog,
    leader_epoch: Epoch,
    result: FetchResult,
) -> Result<FetchStep, FetchAnswerError> {
    let current = (log.end(), log.last_epoch());
    match result {
        FetchResult::NotLeader => Ok(FetchStep::NotLeader),
        FetchResult::SnapshotNeeded { snapshot } => {
            if snapshot.epoch > leader_epoch {
                return Err(FetchAnswerError::SnapshotEpochAboveLeader {
                    snapshot,
                    leader_epoch,
                });
            }
            if snapshot.end_offset < log.committed_end() {
                return Ok(FetchStep::Stale);
            }
            Ok(FetchStep::Snapshot(snapshot))
        }
        FetchResult::Batches {
            fetch_offset,
            last_fetched_epoch,
            batches,
            high_watermark,
        } => {
            if (fetch_offset, last_fetched_epoch) != current {
                return Ok(FetchStep::Stale);
            }
            check_batches(fetch_offset, last_fetched_epoch, leader_epoch, &batches)?;
            Ok(FetchStep::Append {
                batches,
                high_watermark,
            })
        }
        FetchResult::Diverging {
            fetch_offset,
            last_fetched_epoch,
            epoch,
            end_offset,
        } => {
            if (fetch_offset, last_fetched_epoch) != current {
                return Ok(FetchStep::Stale);
            }
            let to = end_offset.min(log.end_for_epoch(epoch)).min(log.end());
            let committed = log.committed_end();
            if to < committed {
                return Err(FetchAnswerError::CommittedTruncation { to, committed });
            }
            Ok(FetchStep::Truncate { to })
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
) -> Result<(), FetchAnswerError> {
    let mut at = start;
    let mut epoch = last_epoch;
    for b in batches {
        if b.base_offset != at {
            return Err(FetchAnswerError::NotContinuing {
                base_offset: b.base_offset,
                expected: at,
            });
        }
        if b.record_count == 0 {
            return Err(FetchAnswerError::EmptyBatch { base_offset: at });
        }
        if b.epoch < epoch {
            return Err(FetchAnswerError::EpochBackwards {
                base_offset: at,
                epoch: b.epoch,
                previous: epoch,
            });
        }
        if b.epoch > leader_epoch {
            return Err(FetchAnswerError::EpochAboveLeader {
                base_offset: at,
                epoch: b.epoch,
                leader_epoch,
            });
        }
        at = b.end_offset();
        epoch = b.epoch;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A log of batches `(base, count, epoch)` after a start `(offset, epoch)`, committed up
    /// to `committed`.
    struct Log {
        start: (u64, u64),
        batches: Vec<(u64, u32, u64)>,
        committed: u64,
    }

    impl FollowerLog for Log {
        fn end(&self) -> LogOffset {
            LogOffset(
                self.batches
                    .last()
                    .map_or(self.start.0, |b| b.0 + u64::from(b.1)),
            )
        }
        fn last_epoch(&self) -> Epoch {
            Epoch(self.batches.last().map_or(self.start.1, |b| b.2))
        }
        fn end_for_epoch(&self, epoch: Epoch) -> LogOffset {
            LogOffset(
                self.batches
                    .iter()
                    .rev()
                    .find(|b| b.2 <= epoch.0)
                    .map_or(self.start.0, |b| b.0 + u64::from(b.1)),
            )
        }
        fn committed_end(&self) -> LogOffset {
            LogOffset(self.committed)
        }
    }

    fn batch(base: u64, count: u32, epoch: u64) -> Batch {
        Batch {
            base_offset: LogOffset(base),
            epoch: Epoch(epoch),
            record_count: count,
            control: false,
            timestamp_ms: -1,
            payload: crate::types::Payload::from(&b"x"[..]),
        }
    }

    fn log() -> Log {
        // [0,2) e1, [2,5) e2, [5,6) e3; committed to 2.
        Log {
            start: (0, 0),
            batches: vec![(0, 2, 1), (2, 3, 2), (5, 1, 3)],
            committed: 2,
        }
    }

    fn batches(fetch: (u64, u64), b: Vec<Batch>, hwm: u64) -> FetchResult {
        FetchResult::Batches {
            fetch_offset: LogOffset(fetch.0),
            last_fetched_epoch: Epoch(fetch.1),
            batches: b,
            high_watermark: LogOffset(hwm),
        }
    }

    fn diverging(fetch: (u64, u64), epoch: u64, end: u64) -> FetchResult {
        FetchResult::Diverging {
            fetch_offset: LogOffset(fetch.0),
            last_fetched_epoch: Epoch(fetch.1),
            epoch: Epoch(epoch),
            end_offset: LogOffset(end),
        }
    }

    /// The request asks from the log's end and last epoch.
    #[test]
    fn the_request_asks_from_the_end() {
        let key = ReplicaKey {
            id: corum_types::NodeId(9),
            directory_id: corum_types::Uuid([9; 16]),
        };
        let r = fetch_request(&log(), Epoch(3), key, LogOffset(2), 500);
        assert_eq!(
            (
                r.fetch_offset,
                r.last_fetched_epoch,
                r.epoch,
                r.high_watermark
            ),
            (LogOffset(6), Epoch(3), Epoch(3), LogOffset(2))
        );
        assert_eq!(r.wait_max_ms, 500);
    }

    /// Batches echoing the log's end are appended; an answer to another fetch is stale.
    #[test]
    fn batches_continue_the_log_or_are_stale() {
        let b = vec![batch(6, 2, 3), batch(8, 1, 4)];
        assert_eq!(
            fetch_step(&log(), Epoch(4), batches((6, 3), b.clone(), 7)),
            Ok(FetchStep::Append {
                batches: b.clone(),
                high_watermark: LogOffset(7)
            })
        );
        for other in [(5, 3), (6, 2)] {
            assert_eq!(
                fetch_step(&log(), Epoch(4), batches(other, b.clone(), 7)),
                Ok(FetchStep::Stale)
            );
        }
    }

    /// Batches with a gap, an empty batch, epochs going back or above the leader's are
    /// refused with the check they failed.
    #[test]
    fn invalid_batches_are_refused() {
        let cases = [
            (
                vec![batch(7, 1, 3)],
                FetchAnswerError::NotContinuing {
                    base_offset: LogOffset(7),
                    expected: LogOffset(6),
                },
            ),
            (
                vec![batch(6, 0, 3)],
                FetchAnswerError::EmptyBatch {
                    base_offset: LogOffset(6),
                },
            ),
            (
                vec![batch(6, 1, 2)],
                FetchAnswerError::EpochBackwards {
                    base_offset: LogOffset(6),
                    epoch: Epoch(2),
                    previous: Epoch(3),
                },
            ),
            (
                vec![batch(6, 1, 5)],
                FetchAnswerError::EpochAboveLeader {
                    base_offset: LogOffset(6),
                    epoch: Epoch(5),
                    leader_epoch: Epoch(4),
                },
            ),
        ];
        for (b, want) in cases {
            assert_eq!(
                fetch_step(&log(), Epoch(4), batches((6, 3), b, 7)),
                Err(want)
            );
        }
    }

    /// Diverging truncates to the smaller of the leader's end for the epoch and this log's
    /// end for it; never below the committed end; an answer to another fetch is stale.
    #[test]
    fn diverging_truncates_by_kafkas_rule() {
        // The leader's e2 ends at 4: ours ends at 5, so 4.
        assert_eq!(
            fetch_step(&log(), Epoch(4), diverging((6, 3), 2, 4)),
            Ok(FetchStep::Truncate { to: LogOffset(4) })
        );
        // The leader's e2 ends at 9, ours at 5: 5.
        assert_eq!(
            fetch_step(&log(), Epoch(4), diverging((6, 3), 2, 9)),
            Ok(FetchStep::Truncate { to: LogOffset(5) })
        );
        // The leader's last epoch at or below ours is 0, ending at 0: below the committed 2.
        assert_eq!(
            fetch_step(&log(), Epoch(4), diverging((6, 3), 0, 0)),
            Err(FetchAnswerError::CommittedTruncation {
                to: LogOffset(0),
                committed: LogOffset(2)
            })
        );
        assert_eq!(
            fetch_step(&log(), Epoch(4), diverging((5, 3), 2, 4)),
            Ok(FetchStep::Stale)
        );
    }

    /// SnapshotNeeded names the snapshot unless it ends below the committed end (stale); one
    /// of an epoch above the leader's is refused. NotLeader is passed on.
    #[test]
    fn snapshot_needed_and_not_leader() {
        let id = |end, epoch| SnapshotId {
            end_offset: LogOffset(end),
            epoch: Epoch(epoch),
        };
        let needed = |s| FetchResult::SnapshotNeeded { snapshot: s };
        assert_eq!(
            fetch_step(&log(), Epoch(4), needed(id(2, 1))),
            Ok(FetchStep::Snapshot(id(2, 1)))
        );
        assert_eq!(
            fetch_step(&log(), Epoch(4), needed(id(1, 1))),
            Ok(FetchStep::Stale)
        );
        assert_eq!(
            fetch_step(&log(), Epoch(4), needed(id(9, 5))),
            Err(FetchAnswerError::SnapshotEpochAboveLeader {
                snapshot: id(9, 5),
                leader_epoch: Epoch(4)
            })
        );
        assert_eq!(
            fetch_step(&log(), Epoch(4), FetchResult::NotLeader),
            Ok(FetchStep::NotLeader)
        );
    }

    fn arb_result() -> impl Strategy<Value = FetchResult> {
        let fetch = (0u64..9, 0u64..5);
        prop_oneof![
            Just(FetchResult::NotLeader),
            (0u64..9, 0u64..6).prop_map(|(end, epoch)| FetchResult::SnapshotNeeded {
                snapshot: SnapshotId {
                    end_offset: LogOffset(end),
                    epoch: Epoch(epoch)
                }
            }),
            (fetch.clone(), 0u64..5, 0u64..12).prop_map(|(f, epoch, end)| diverging(f, epoch, end)),
            (
                fetch,
                proptest::collection::vec((0u64..12, 0u32..3, 0u64..6), 0..4),
                0u64..12
            )
                .prop_map(|(f, b, hwm)| batches(
                    f,
                    b.into_iter()
                        .map(|(base, n, e)| batch(base, n, e))
                        .collect(),
                    hwm
                )),
        ]
    }

    proptest! {
        /// Any answer gives a step that keeps the log sound or an error: appended batches
        /// continue the log with sound epochs, a truncation lies in `[committed, end]`, a
        /// snapshot ends at or above the committed end with an epoch the leader may have.
        #[test]
        fn every_step_keeps_the_log_sound(
            leader_epoch in 0u64..6,
            result in arb_result(),
        ) {
            let log = log();
            match fetch_step(&log, Epoch(leader_epoch), result) {
                Ok(FetchStep::Append { batches, .. }) => {
                    let mut at = log.end();
                    let mut epoch = log.last_epoch();
                    for b in batches {
                        prop_assert_eq!(b.base_offset, at);
                        prop_assert!(b.record_count > 0);
                        prop_assert!(epoch <= b.epoch && b.epoch.0 <= leader_epoch);
                        at = b.end_offset();
                        epoch = b.epoch;
                    }
                }
                Ok(FetchStep::Truncate { to }) => {
                    prop_assert!(log.committed_end() <= to && to <= log.end());
                }
                Ok(FetchStep::Snapshot(s)) => {
                    prop_assert!(s.end_offset >= log.committed_end());
                    prop_assert!(s.epoch.0 <= leader_epoch);
                }
                Ok(FetchStep::Stale | FetchStep::NotLeader) | Err(_) => {}
            }
        }
    }
}
