//! [`Ready`]: everything the core asks its driver to do, and in which order.

use corum_types::{LogOffset, NodeId};

use crate::message::Message;
use crate::types::{Batch, QuorumStateRecord, Snapshot};

/// A request to read batches back from the log because their payloads are no longer in the
/// core's memory. The driver reads whole batches starting at `from` (a batch boundary), in
/// order, at least one and no more than `bytes_max` payload bytes beyond the first, and hands
/// them to [`crate::RaftCore::read_completed`] with the same `id`. It may read entries that
/// are written but not yet fsynced. If the log no longer has `from`, it passes an empty vec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRead {
    pub id: u64,
    pub from: LogOffset,
    pub bytes_max: usize,
}

/// The output of one round of the core ([`crate::RaftCore::ready`]).
///
/// # The driver's contract, in order
///
/// 1. **`quorum_state`**: write it durably (write + fsync the quorum-state file) before sending
///    *any* of `messages`: a vote or a leader's first message depends on it.
/// 2. **`snapshot`**: write it durably and replace the whole log with an empty log starting at
///    `snapshot.id.end_offset`, before sending any of `messages` and before steps 3–4. The
///    state machine reloads from it.
/// 3. **`truncate_to`**: remove every entry at offset `>=` it, before writing `entries`. It must
///    be durable no later than the entries written after it (a log that fsyncs in order does
///    this).
/// 4. **`entries`**: append these batches, in order (each continues the log). They need not be
///    durable before `messages` leave: followers only acknowledge durable offsets and the leader
///    counts its own log only once told. After an fsync, call
///    [`crate::RaftCore::persisted`] with the end offset and epoch of the last durable batch.
/// 5. **`messages`**: send each to its node (after 1 and 2). Delivery may fail, repeat or
///    reorder: the protocol tolerates it.
/// 6. **`high_watermark`**: every entry below it is committed: apply it to the state machine
///    (entries at or above the driver's log start). Never moves backward.
/// 7. **`log_start_offset`**: entries below it are covered by a snapshot and may be deleted.
/// 8. **`reads`**: serve each with [`crate::RaftCore::read_completed`] (asynchronously is fine).
#[derive(Debug, Default)]
pub struct Ready {
    pub quorum_state: Option<QuorumStateRecord>,
    pub snapshot: Option<Snapshot>,
    pub truncate_to: Option<LogOffset>,
    pub entries: Vec<Batch>,
    pub messages: Vec<(NodeId, Message)>,
    pub high_watermark: Option<LogOffset>,
    pub log_start_offset: Option<LogOffset>,
    pub reads: Vec<LogRead>,
}

impl Ready {
    pub fn is_empty(&self) -> bool {
        self.quorum_state.is_none()
            && self.snapshot.is_none()
            && self.truncate_to.is_none()
            && self.entries.is_empty()
            && self.messages.is_empty()
            && self.high_watermark.is_none()
            && self.log_start_offset.is_none()
            && self.reads.is_empty()
    }
}
