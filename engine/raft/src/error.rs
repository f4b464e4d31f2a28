//! Errors of the Raft core. Every variant is something the caller can act on.

use corum_types::{Epoch, LogOffset, NodeId};

use crate::config::ConfigField;
use crate::types::SnapshotId;

/// Why a voter change (AddVoter / RemoveVoter / UpdateVoter) was refused. Also the error code of
/// [`crate::message::VoterChangeResponse`], so it is archivable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum VoterChangeError {
    /// Only the leader changes the voter set; retry at the leader.
    NotLeader,
    /// The previous voter change has not committed yet; retry later.
    ChangePending,
    /// The leader has not yet committed an entry in its epoch; retry later.
    EpochNotCommitted,
    /// AddVoter for an id that already votes.
    AlreadyVoter,
    /// RemoveVoter / UpdateVoter for a (id, directory id) that does not vote.
    NotVoter,
    /// AddVoter for a replica that has not fetched from the leader recently or is behind the HWM.
    NotCaughtUp,
    /// The change would leave no voter.
    WouldBeEmpty,
    /// Leadership was lost before the change committed; it may or may not commit.
    LeadershipLost,
    /// The quorum is static (`kraft.version` 0): its voters are `controller.quorum.voters`.
    /// Appended last: the variant order is the wire format.
    StaticQuorum,
    /// A `kraft.version` this build does not support, or lower than the one in force (it
    /// never goes down).
    UnsupportedKraftVersion,
    /// The `kraft.version` upgrade needs every voter's directory id: some voter has not
    /// answered this leader within the fetch timeout with one; retry once all are up.
    DirectoryIdsUnknown,
}

impl std::fmt::Display for VoterChangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("not the leader (epoch {epoch}, leader {leader:?})")]
    NotLeader {
        epoch: Epoch,
        leader: Option<NodeId>,
    },
    #[error("batch of {bytes} bytes exceeds the limit of {max} bytes")]
    BatchTooLarge { bytes: usize, max: usize },
    #[error("a batch must hold at least one record")]
    EmptyBatch,
    #[error("voter change refused: {0}")]
    VoterChange(VoterChangeError),
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),
    #[error("invalid voter set: {0}")]
    VoterSet(&'static str),
    #[error("cannot decode {what}: {reason}")]
    Decode { what: &'static str, reason: String },
    /// A message from the network whose batches do not continue the log where it says they
    /// start (a gap, an overlap or an empty batch); see [`crate::Message::validate`]. The
    /// sender is broken or hostile: drop the message.
    #[error(
        "batch at {base_offset} ({record_count} records) does not continue the log at {expected}"
    )]
    BatchesNotContiguous {
        base_offset: LogOffset,
        record_count: u32,
        expected: LogOffset,
    },
    #[error("control batch at {offset} has no payload in the restored log")]
    MissingControlPayload { offset: LogOffset },
    #[error("restored log is not contiguous at {offset} (expected {expected})")]
    RestoreGap {
        offset: LogOffset,
        expected: LogOffset,
    },
    #[error("snapshot end {end} is outside [{log_start}, {hwm}] or not at a batch boundary")]
    SnapshotOffset {
        end: LogOffset,
        log_start: LogOffset,
        hwm: LogOffset,
    },
    /// A controller formatted to join (no bootstrap voter) whose log names no voter yet (a
    /// static quorum's, before its upgrade): a snapshot must say who votes at its end, so it
    /// waits until the log does.
    #[error(
        "no voter set is known at snapshot end {end} (a joining controller's log names none yet)"
    )]
    SnapshotWithoutVoters { end: LogOffset },
}

/// A [`crate::Config`] that breaks one of [`crate::Config::validate`]'s rules. `field` is the
/// one to change; `other` (when the rule relates two fields) is what it is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{field} must be > 0")]
    Zero { field: ConfigField },
    #[error("{field} ({value}) must be >= {other} ({other_value})")]
    BelowOther {
        field: ConfigField,
        value: u64,
        other: ConfigField,
        other_value: u64,
    },
    #[error("{field} ({value}) must be at most half of {other} ({other_value})")]
    AboveHalfOfOther {
        field: ConfigField,
        value: u64,
        other: ConfigField,
        other_value: u64,
    },
    #[error("{field} ({value}) must be <= {other} ({other_value})")]
    AboveOther {
        field: ConfigField,
        value: u64,
        other: ConfigField,
        other_value: u64,
    },
    #[error("{field} ({value}) must be < {other} ({other_value})")]
    NotBelowOther {
        field: ConfigField,
        value: u64,
        other: ConfigField,
        other_value: u64,
    },
}

impl ConfigError {
    /// The field to change.
    pub fn field(&self) -> ConfigField {
        match *self {
            ConfigError::Zero { field }
            | ConfigError::BelowOther { field, .. }
            | ConfigError::AboveHalfOfOther { field, .. }
            | ConfigError::AboveOther { field, .. }
            | ConfigError::NotBelowOther { field, .. } => field,
        }
    }
}

/// Why a FetchSnapshot answer does not continue a [`crate::follower::SnapshotDownload`]. The
/// download is unchanged; a leader never sends these, so the caller drops the download and
/// fetches again after a pause (the Raft core counts them in
/// [`crate::Stats::snapshot_downloads_abandoned`] and keeps the last one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotChunkError {
    /// The chunk belongs to another snapshot than the one asked for.
    #[error("asked for snapshot {asked:?}, got a chunk of {got:?}")]
    OtherSnapshot { asked: SnapshotId, got: SnapshotId },
    /// The chunk does not start where the bytes received so far end.
    #[error("chunk at position {position}, expected {received}")]
    Position { position: u64, received: u64 },
    /// The snapshot's total size changed between chunks.
    #[error("snapshot size changed from {was} to {now} bytes")]
    SizeChanged { was: u64, now: u64 },
    /// The chunk at `position` states another voter set than the first chunk.
    #[error("the chunk at position {position} states another voter set than the first")]
    VotersChanged { position: u64 },
    /// The snapshot is larger than the download accepts (`snapshot_bytes_max`).
    #[error("snapshot of {size_total} bytes exceeds the limit of {size_max} bytes")]
    TooLarge { size_total: u64, size_max: u64 },
    /// The chunk holds bytes beyond the snapshot's total size.
    #[error("chunk ends at {end}, beyond the snapshot's {size_total} bytes")]
    BeyondSize { end: u64, size_total: u64 },
    /// An empty chunk of a snapshot not yet complete (or after it completed).
    #[error("empty chunk at position {position} of {size_total} bytes")]
    NoProgress { position: u64, size_total: u64 },
    /// The finished snapshot states a voter set that breaks [`crate::VoterSet::validate`].
    #[error("the snapshot's voter set is invalid: {reason}")]
    InvalidVoters { reason: &'static str },
}

/// A Fetch answer that breaks the pull-replication rules ([`crate::follower::fetch_step`]). A
/// leader never sends one: the follower drops the answer (the Raft core then fetches again
/// after the request timeout; the client's observer log stops, its image cannot follow).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FetchAnswerError {
    /// A batch does not start where the log (or the batch before) ends.
    #[error("batch at {base_offset} does not continue the log at {expected}")]
    NotContinuing {
        base_offset: LogOffset,
        expected: LogOffset,
    },
    /// A batch of no record.
    #[error("empty batch at {base_offset}")]
    EmptyBatch { base_offset: LogOffset },
    /// A batch's epoch is below the one before it.
    #[error("batch at {base_offset} has epoch {epoch} below the previous {previous}")]
    EpochBackwards {
        base_offset: LogOffset,
        epoch: Epoch,
        previous: Epoch,
    },
    /// A batch's epoch is above the answering leader's.
    #[error("batch at {base_offset} has epoch {epoch} above the leader's {leader_epoch}")]
    EpochAboveLeader {
        base_offset: LogOffset,
        epoch: Epoch,
        leader_epoch: Epoch,
    },
    /// A snapshot named with an epoch above the answering leader's.
    #[error("snapshot {snapshot:?} has an epoch above the leader's {leader_epoch}")]
    SnapshotEpochAboveLeader {
        snapshot: SnapshotId,
        leader_epoch: Epoch,
    },
    /// A divergence that would truncate committed entries (committed data never diverges in
    /// Raft: a leader or log bug).
    #[error("the leader asks to truncate to {to}, below the committed end {committed}")]
    CommittedTruncation { to: LogOffset, committed: LogOffset },
}

pub type Result<T> = std::result::Result<T, Error>;
