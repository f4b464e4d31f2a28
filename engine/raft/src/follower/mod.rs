//! The follower's side of pull replication, pure (no IO, no clock), shared by the two
//! followers of a corum quorum: the Raft core's follower and observer ([`crate::RaftCore`]) and
//! the broker-side metadata follower of `corum-client` (its `ObserverLog` and
//! `MetadataFollower`).
//!
//! | piece | what |
//! |---|---|
//! | [`fetch_step`] | what a follower's log ([`FollowerLog`]) does with one Fetch answer: append, truncate (Kafka's divergence rule), download a snapshot, or nothing; every answer checked |
//! | [`SnapshotDownload`] | one leader snapshot's FetchSnapshot chunks checked and put back together, bounded by a size limit |
//! | [`Backoff`] | the pause before fetching again after a fetch or a download that gave nothing: doubling per failure in a row, capped |
//!
//! # The follower's fetch loop
//!
//! ```text
//!   Fetch(end, last epoch, HWM)          fetch_request
//!     answer ─► fetch_step ─► Append     → append, HWM up, fetch again
//!                          ─► Truncate   → drop the diverging suffix, fetch again
//!                          ─► Snapshot   → SnapshotDownload: FetchSnapshot(position) ...
//!                          │                 Complete → install, fetch from its end
//!                          │                 NotFound / NotLeader / refused chunk
//!                          │                          → drop it, pause (Backoff), fetch again
//!                          ─► Stale / NotLeader → nothing (see below)
//!                          ─► error      → the answer is dropped
//! ```
//!
//! Shared: the request ([`fetch_request`]), what an answer does to the log ([`fetch_step`],
//! over each follower's [`FollowerLog`] view), the snapshot download and the pause. Not
//! shared, because the two followers differ there by design:
//!
//! - the log itself: the core keeps an index of the replicated log (durable end, voter sets,
//!   payload cache) and appends through the same code as pushed appends; the client keeps a
//!   metadata image of the committed prefix and a buffer of uncommitted batches;
//! - the epoch and leader: the core's role state machine (a higher epoch makes it follow or
//!   go unattached, an observer rediscovers a silent leader) versus the client's highest epoch
//!   seen;
//! - when to ask again: the core answers from its tick (one outstanding fetch, re-sent after
//!   the long-poll wait plus the request timeout; a dropped answer waits for that) and only
//!   the answer to the outstanding fetch moves it; the client's task is one request at a time
//!   and pauses with a [`Backoff`] after an answer that taught nothing;
//! - what a broken answer means: the core drops it and asks again later; the client's image
//!   cannot follow such a log and stops.

mod download;
mod fetch;

pub use download::{DownloadStep, SnapshotDownload, SNAPSHOT_BYTES_MAX};
pub use fetch::{fetch_request, fetch_step, FetchStep, FollowerLog};

/// Failures in a row and the pause they call for: `base_ms` after the first, doubled per
/// further failure, at most `cap_ms`. A success resets it. Used wherever a follower would
/// otherwise re-ask as fast as the leader answers (an empty or refused snapshot chunk, a
/// snapshot the leader no longer has, a fetch answered with nothing new).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    base_ms: u64,
    cap_ms: u64,
    failures: u32,
}

impl Backoff {
    /// No failure yet. `base_ms` must be at least 1 and at most `cap_ms`.
    pub fn new(base_ms: u64, cap_ms: u64) -> Backoff {
        assert!(
            base_ms >= 1 && base_ms <= cap_ms,
            "backoff base {base_ms} ms must be in [1, cap {cap_ms} ms]"
        );
        Backoff {
            base_ms,
            cap_ms,
            failures: 0,
        }
    }

    /// Counts one more failure and returns the pause (ms) before the next attempt.
    pub fn failed(&mut self) -> u64 {
        self.failures = self.failures.saturating_add(1);
        self.pause_ms()
    }

    /// A success: the next failure pauses `base_ms` again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// Failures in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The pause the current run of failures calls for (0 without a failure).
    pub fn pause_ms(&self) -> u64 {
        match self.failures {
            0 => 0,
            n => {
                let doublings = (n - 1).min(63);
                self.base_ms
                    .checked_shl(doublings)
                    .filter(|p| p >> doublings == self.base_ms)
                    .map_or(self.cap_ms, |p| p.min(self.cap_ms))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The pause doubles per failure in a row from the base, stops at the cap, and a success
    /// starts again from the base.
    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(20, 200);
        assert_eq!(b.pause_ms(), 0);
        let pauses: Vec<u64> = (0..6).map(|_| b.failed()).collect();
        assert_eq!(pauses, [20, 40, 80, 160, 200, 200]);
        assert_eq!(b.failures(), 6);
        b.succeeded();
        assert_eq!((b.failures(), b.pause_ms()), (0, 0));
        assert_eq!(b.failed(), 20);
    }

    proptest! {
        /// Any number of failures with any base and cap pauses within `[base, cap]`, never
        /// less than the failure before, and never overflows.
        #[test]
        fn backoff_stays_within_base_and_cap(
            base in 1u64..=u64::MAX / 2,
            extra in 0u64..=u64::MAX / 2,
            failures in 1usize..200,
        ) {
            let cap = base + extra;
            let mut b = Backoff::new(base, cap);
            let mut last = 0;
            for _ in 0..failures {
                let p = b.failed();
                prop_assert!(base <= p && p <= cap, "{p} outside [{base}, {cap}]");
                prop_assert!(p >= last);
                last = p;
            }
        }
    }
}
