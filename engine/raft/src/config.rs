//! Limits and timeouts of the Raft core, all checked by [`Config::validate`].

use std::fmt;

use crate::error::ConfigError;

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
    /// A newer high watermark with no entries to send goes to a follower this long after it
    /// moved, unless entries carry it sooner (0: at once). At low load this halves the
    /// messages per commit (the next proposal's append carries it); a follower then learns a
    /// commit up to this late, which only delays its own replay. At most
    /// `heartbeat_interval_ms`.
    pub hwm_linger_ms: u64,
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
    /// An observer's fetch (a broker following the log) is answered at most this often while
    /// it is caught up, and woken by a newer high watermark rather than by uncommitted
    /// entries (0: at once, on either). Under a steady write load a commit lands every
    /// millisecond or so; answering each observer at each one costs the leader a request
    /// per observer per commit, which this bounds. An observer then sees a commit up to this
    /// late. At most `fetch_wait_max_ms`.
    pub observer_fetch_interval_ms: u64,
    /// Bytes of snapshot per FetchSnapshot response.
    pub snapshot_chunk_bytes_max: usize,
    /// The largest snapshot a follower downloads (it holds the whole snapshot in memory before
    /// installing it): a larger one is refused at its first chunk.
    pub snapshot_bytes_max: u64,
    /// A follower pauses this long before fetching again after a snapshot download ended
    /// without a snapshot (refused chunk, snapshot no longer served); doubled per such failure
    /// in a row, at most `request_timeout_ms` (Kafka's `controller.quorum.retry.backoff.ms`).
    pub retry_backoff_ms: u64,
    /// Committed payloads kept in memory beyond this are dropped; older batches are then read
    /// back through [`crate::Ready::reads`].
    pub payload_cache_bytes_max: usize,
    /// KIP-853 auto-join (Kafka's `controller.quorum.auto.join.enable`): an observer of a
    /// dynamic quorum that is caught up with its leader asks to be added as a voter (first
    /// removing a voter with its id and another directory id: its replaced disk).
    pub auto_join: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            election_timeout_ms: 1_000,
            fetch_timeout_ms: 2_000,
            election_backoff_max_ms: 1_000,
            heartbeat_interval_ms: 250,
            hwm_linger_ms: 10,
            request_timeout_ms: 2_000,
            append_inflight_count_max: 16,
            append_inflight_bytes_max: 8 << 20,
            batch_bytes_max: 1 << 20,
            fetch_wait_max_ms: 500,
            observer_fetch_interval_ms: 20,
            snapshot_chunk_bytes_max: 1 << 20,
            snapshot_bytes_max: crate::follower::SNAPSHOT_BYTES_MAX,
            retry_backoff_ms: 20,
            payload_cache_bytes_max: 64 << 20,
            auto_join: false,
        }
    }
}

/// A field of [`Config`], named in [`ConfigError`] so a caller that sets it from a key of its
/// own (the node's `controller.quorum.*` and `corum.raft.*`) can name that key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigField {
    ElectionTimeoutMs,
    FetchTimeoutMs,
    ElectionBackoffMaxMs,
    HeartbeatIntervalMs,
    HwmLingerMs,
    RequestTimeoutMs,
    AppendInflightCountMax,
    AppendInflightBytesMax,
    BatchBytesMax,
    FetchWaitMaxMs,
    ObserverFetchIntervalMs,
    SnapshotChunkBytesMax,
    SnapshotBytesMax,
    RetryBackoffMs,
    PayloadCacheBytesMax,
}

impl ConfigField {
    /// Every field, in declaration order.
    pub const ALL: [ConfigField; 15] = [
        ConfigField::ElectionTimeoutMs,
        ConfigField::FetchTimeoutMs,
        ConfigField::ElectionBackoffMaxMs,
        ConfigField::HeartbeatIntervalMs,
        ConfigField::HwmLingerMs,
        ConfigField::RequestTimeoutMs,
        ConfigField::AppendInflightCountMax,
        ConfigField::AppendInflightBytesMax,
        ConfigField::BatchBytesMax,
        ConfigField::FetchWaitMaxMs,
        ConfigField::ObserverFetchIntervalMs,
        ConfigField::SnapshotChunkBytesMax,
        ConfigField::SnapshotBytesMax,
        ConfigField::RetryBackoffMs,
        ConfigField::PayloadCacheBytesMax,
    ];

    /// The field's name in [`Config`].
    pub fn name(self) -> &'static str {
        match self {
            ConfigField::ElectionTimeoutMs => "election_timeout_ms",
            ConfigField::FetchTimeoutMs => "fetch_timeout_ms",
            ConfigField::ElectionBackoffMaxMs => "election_backoff_max_ms",
            ConfigField::HeartbeatIntervalMs => "heartbeat_interval_ms",
            ConfigField::HwmLingerMs => "hwm_linger_ms",
            ConfigField::RequestTimeoutMs => "request_timeout_ms",
            ConfigField::AppendInflightCountMax => "append_inflight_count_max",
            ConfigField::AppendInflightBytesMax => "append_inflight_bytes_max",
            ConfigField::BatchBytesMax => "batch_bytes_max",
            ConfigField::FetchWaitMaxMs => "fetch_wait_max_ms",
            ConfigField::ObserverFetchIntervalMs => "observer_fetch_interval_ms",
            ConfigField::SnapshotChunkBytesMax => "snapshot_chunk_bytes_max",
            ConfigField::SnapshotBytesMax => "snapshot_bytes_max",
            ConfigField::RetryBackoffMs => "retry_backoff_ms",
            ConfigField::PayloadCacheBytesMax => "payload_cache_bytes_max",
        }
    }
}

impl fmt::Display for ConfigField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Config {
    /// The value of `field`, widened to `u64` for error reports.
    pub fn value_of(&self, field: ConfigField) -> u64 {
        let wide = |v: usize| v as u64;
        match field {
            ConfigField::ElectionTimeoutMs => self.election_timeout_ms,
            ConfigField::FetchTimeoutMs => self.fetch_timeout_ms,
            ConfigField::ElectionBackoffMaxMs => self.election_backoff_max_ms,
            ConfigField::HeartbeatIntervalMs => self.heartbeat_interval_ms,
            ConfigField::HwmLingerMs => self.hwm_linger_ms,
            ConfigField::RequestTimeoutMs => self.request_timeout_ms,
            ConfigField::AppendInflightCountMax => wide(self.append_inflight_count_max),
            ConfigField::AppendInflightBytesMax => wide(self.append_inflight_bytes_max),
            ConfigField::BatchBytesMax => wide(self.batch_bytes_max),
            ConfigField::FetchWaitMaxMs => self.fetch_wait_max_ms,
            ConfigField::ObserverFetchIntervalMs => self.observer_fetch_interval_ms,
            ConfigField::SnapshotChunkBytesMax => wide(self.snapshot_chunk_bytes_max),
            ConfigField::SnapshotBytesMax => self.snapshot_bytes_max,
            ConfigField::RetryBackoffMs => self.retry_backoff_ms,
            ConfigField::PayloadCacheBytesMax => wide(self.payload_cache_bytes_max),
        }
    }

    /// Checks every rule; the error names the field to change (the first of the rule's
    /// fields) and the other field the rule relates it to.
    pub fn validate(&self) -> Result<(), ConfigError> {
        use ConfigField as F;
        for field in [
            F::ElectionTimeoutMs,
            F::ElectionBackoffMaxMs,
            F::HeartbeatIntervalMs,
            F::RequestTimeoutMs,
            F::AppendInflightCountMax,
            F::BatchBytesMax,
            F::SnapshotChunkBytesMax,
            F::SnapshotBytesMax,
            F::RetryBackoffMs,
        ] {
            if self.value_of(field) == 0 {
                return Err(ConfigError::Zero { field });
            }
        }
        let related = |field, other| (field, self.value_of(field), other, self.value_of(other));
        let (field, value, other, other_value) = related(F::FetchTimeoutMs, F::ElectionTimeoutMs);
        if value < other_value {
            return Err(ConfigError::BelowOther {
                field,
                value,
                other,
                other_value,
            });
        }
        let (field, value, other, other_value) =
            related(F::HeartbeatIntervalMs, F::ElectionTimeoutMs);
        if value.saturating_mul(2) > other_value {
            return Err(ConfigError::AboveHalfOfOther {
                field,
                value,
                other,
                other_value,
            });
        }
        let (field, value, other, other_value) =
            related(F::BatchBytesMax, F::AppendInflightBytesMax);
        if value > other_value {
            return Err(ConfigError::AboveOther {
                field,
                value,
                other,
                other_value,
            });
        }
        let (field, value, other, other_value) = related(F::RetryBackoffMs, F::RequestTimeoutMs);
        if value > other_value {
            return Err(ConfigError::AboveOther {
                field,
                value,
                other,
                other_value,
            });
        }
        let (field, value, other, other_value) = related(F::HwmLingerMs, F::HeartbeatIntervalMs);
        if value > other_value {
            return Err(ConfigError::AboveOther {
                field,
                value,
                other,
                other_value,
            });
        }
        let (field, value, other, other_value) =
            related(F::ObserverFetchIntervalMs, F::FetchWaitMaxMs);
        if value > other_value {
            return Err(ConfigError::AboveOther {
                field,
                value,
                other,
                other_value,
            });
        }
        let (field, value, other, other_value) = related(F::FetchWaitMaxMs, F::FetchTimeoutMs);
        if value >= other_value {
            return Err(ConfigError::NotBelowOther {
                field,
                value,
                other,
                other_value,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are valid, and each rule rejects a broken value with an error naming the
    /// field to change and the field it is measured against.
    #[test]
    fn validate_rules() {
        Config::default().validate().unwrap();
        let d = Config::default;
        let cases = [
            (
                Config {
                    election_timeout_ms: 0,
                    ..d()
                },
                ConfigError::Zero {
                    field: ConfigField::ElectionTimeoutMs,
                },
            ),
            (
                Config {
                    election_backoff_max_ms: 0,
                    ..d()
                },
                ConfigError::Zero {
                    field: ConfigField::ElectionBackoffMaxMs,
                },
            ),
            (
                Config {
                    request_timeout_ms: 0,
                    ..d()
                },
                ConfigError::Zero {
                    field: ConfigField::RequestTimeoutMs,
                },
            ),
            (
                Config {
                    append_inflight_count_max: 0,
                    ..d()
                },
                ConfigError::Zero {
                    field: ConfigField::AppendInflightCountMax,
                },
            ),
            (
                Config {
                    snapshot_chunk_bytes_max: 0,
                    ..d()
                },
                ConfigError::Zero {
                    field: ConfigField::SnapshotChunkBytesMax,
                },
            ),
            (
                Config {
                    snapshot_bytes_max: 0,
                    ..d()
                },
                ConfigError::Zero {
                    field: ConfigField::SnapshotBytesMax,
                },
            ),
            (
                Config {
                    retry_backoff_ms: 0,
                    ..d()
                },
                ConfigError::Zero {
                    field: ConfigField::RetryBackoffMs,
                },
            ),
            (
                Config {
                    retry_backoff_ms: 2_001,
                    ..d()
                },
                ConfigError::AboveOther {
                    field: ConfigField::RetryBackoffMs,
                    value: 2_001,
                    other: ConfigField::RequestTimeoutMs,
                    other_value: 2_000,
                },
            ),
            (
                Config {
                    hwm_linger_ms: 251,
                    ..d()
                },
                ConfigError::AboveOther {
                    field: ConfigField::HwmLingerMs,
                    value: 251,
                    other: ConfigField::HeartbeatIntervalMs,
                    other_value: 250,
                },
            ),
            (
                Config {
                    heartbeat_interval_ms: 0,
                    ..d()
                },
                ConfigError::Zero {
                    field: ConfigField::HeartbeatIntervalMs,
                },
            ),
            (
                Config {
                    fetch_timeout_ms: 10,
                    ..d()
                },
                ConfigError::BelowOther {
                    field: ConfigField::FetchTimeoutMs,
                    value: 10,
                    other: ConfigField::ElectionTimeoutMs,
                    other_value: 1_000,
                },
            ),
            (
                Config {
                    heartbeat_interval_ms: 900,
                    ..d()
                },
                ConfigError::AboveHalfOfOther {
                    field: ConfigField::HeartbeatIntervalMs,
                    value: 900,
                    other: ConfigField::ElectionTimeoutMs,
                    other_value: 1_000,
                },
            ),
            (
                Config {
                    batch_bytes_max: 1 << 30,
                    ..d()
                },
                ConfigError::AboveOther {
                    field: ConfigField::BatchBytesMax,
                    value: 1 << 30,
                    other: ConfigField::AppendInflightBytesMax,
                    other_value: 8 << 20,
                },
            ),
            (
                Config {
                    observer_fetch_interval_ms: 501,
                    ..d()
                },
                ConfigError::AboveOther {
                    field: ConfigField::ObserverFetchIntervalMs,
                    value: 501,
                    other: ConfigField::FetchWaitMaxMs,
                    other_value: 500,
                },
            ),
            (
                Config {
                    fetch_wait_max_ms: 5_000,
                    ..d()
                },
                ConfigError::NotBelowOther {
                    field: ConfigField::FetchWaitMaxMs,
                    value: 5_000,
                    other: ConfigField::FetchTimeoutMs,
                    other_value: 2_000,
                },
            ),
        ];
        for (config, want) in cases {
            assert_eq!(config.validate(), Err(want), "{config:?}");
            assert!(want.to_string().contains(want.field().name()), "{want}");
        }
    }

    /// Every field has a distinct name, and `value_of` reads the field it names.
    #[test]
    fn fields_name_themselves() {
        let c = Config {
            election_timeout_ms: 1,
            fetch_timeout_ms: 2,
            election_backoff_max_ms: 3,
            heartbeat_interval_ms: 4,
            hwm_linger_ms: 5,
            request_timeout_ms: 6,
            append_inflight_count_max: 7,
            append_inflight_bytes_max: 8,
            batch_bytes_max: 9,
            fetch_wait_max_ms: 10,
            observer_fetch_interval_ms: 11,
            snapshot_chunk_bytes_max: 12,
            snapshot_bytes_max: 13,
            retry_backoff_ms: 14,
            payload_cache_bytes_max: 15,
            auto_join: false,
        };
        let mut names: Vec<&str> = ConfigField::ALL.iter().map(|f| f.name()).collect();
        for (i, f) in ConfigField::ALL.iter().enumerate() {
            assert_eq!(c.value_of(*f), i as u64 + 1, "{f}");
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ConfigField::ALL.len());
    }
}
