//! Limits and timeouts of the Raft core, all checked by [`Config::validate`].

use crate::error::{Error, Result};

/// Timeouts are in milliseconds of the driver's clock (passed to `tick`). Byte limits count
/// payload bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Base election timeout; each wait is drawn uniformly from `[t, 2t)`.
    pub election_timeout_ms: u64,
    /// Check-quorum: a leader that has not heard from a majority within this resigns; a voter
    /// follower that has not heard from its leader within this starts a pre-vote.
    pub fetch_timeout_ms: u64,
    /// After a lost election round, wait a random time in `[1, max]` before the next one.
    pub election_backoff_max_ms: u64,
    /// The leader sends an (empty) append to an idle follower this often.
    pub heartbeat_interval_ms: u64,
    /// An in-flight append unanswered for this long sends the follower back to probing; an
    /// unanswered fetch / fetch-snapshot is re-sent after this (plus the long-poll wait).
    pub request_timeout_ms: u64,
    /// Appends in flight per follower (pipelining depth).
    pub append_inflight_count_max: usize,
    /// Payload bytes in flight per follower: no append leaves once this many are in flight, so
    /// the window holds at most this plus one message (`batch_bytes_max`).
    pub append_inflight_bytes_max: usize,
    /// Payload bytes per append / fetch response message, and per proposed batch.
    pub batch_bytes_max: usize,
    /// Longest time the leader holds a caught-up observer's fetch (long-poll).
    pub fetch_wait_max_ms: u64,
    /// Bytes of snapshot per FetchSnapshot response.
    pub snapshot_chunk_bytes_max: usize,
    /// Committed payloads kept in memory beyond this are dropped; older batches are then read
    /// back through [`crate::Ready::reads`].
    pub payload_cache_bytes_max: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            election_timeout_ms: 1_000,
            fetch_timeout_ms: 2_000,
            election_backoff_max_ms: 1_000,
            heartbeat_interval_ms: 250,
            request_timeout_ms: 2_000,
            append_inflight_count_max: 16,
            append_inflight_bytes_max: 8 << 20,
            batch_bytes_max: 1 << 20,
            fetch_wait_max_ms: 500,
            snapshot_chunk_bytes_max: 1 << 20,
            payload_cache_bytes_max: 64 << 20,
        }
    }
}

impl Config {
    pub fn validate(&self) -> Result<()> {
        if self.election_timeout_ms == 0 {
            return Err(Error::Config("election_timeout_ms must be > 0"));
        }
        if self.fetch_timeout_ms < self.election_timeout_ms {
            return Err(Error::Config(
                "fetch_timeout_ms must be >= election_timeout_ms",
            ));
        }
        if self.election_backoff_max_ms == 0 {
            return Err(Error::Config("election_backoff_max_ms must be > 0"));
        }
        if self.heartbeat_interval_ms == 0
            || self.heartbeat_interval_ms * 2 > self.election_timeout_ms
        {
            return Err(Error::Config(
                "heartbeat_interval_ms must be in (0, election_timeout_ms / 2]",
            ));
        }
        if self.request_timeout_ms == 0 {
            return Err(Error::Config("request_timeout_ms must be > 0"));
        }
        if self.append_inflight_count_max == 0 {
            return Err(Error::Config("append_inflight_count_max must be > 0"));
        }
        if self.batch_bytes_max == 0 || self.append_inflight_bytes_max < self.batch_bytes_max {
            return Err(Error::Config(
                "need 0 < batch_bytes_max <= append_inflight_bytes_max",
            ));
        }
        if self.fetch_wait_max_ms >= self.fetch_timeout_ms {
            return Err(Error::Config(
                "fetch_wait_max_ms must be < fetch_timeout_ms",
            ));
        }
        if self.snapshot_chunk_bytes_max == 0 {
            return Err(Error::Config("snapshot_chunk_bytes_max must be > 0"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are valid and each rule rejects a broken value.
    #[test]
    fn validate_rules() {
        Config::default().validate().unwrap();
        let bad = [
            Config {
                election_timeout_ms: 0,
                ..Config::default()
            },
            Config {
                fetch_timeout_ms: 10,
                ..Config::default()
            },
            Config {
                heartbeat_interval_ms: 900,
                ..Config::default()
            },
            Config {
                append_inflight_count_max: 0,
                ..Config::default()
            },
            Config {
                batch_bytes_max: 1 << 30,
                ..Config::default()
            },
            Config {
                fetch_wait_max_ms: 5_000,
                ..Config::default()
            },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
