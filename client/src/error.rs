//! Errors of the client crate.
//!
//! | error | raised by | what the caller does |
//! |---|---|---|
//! | [`ClientError::Config`] | [`crate::ClientConfig::validate`] | fix the setting |
//! | [`ClientError::NoServerReachable`] | [`crate::ControllerClient::connect`] | check the bootstrap list; retry later |
//! | [`ClientError::LeaderNotFound`] | any call, after `retry_deadline` of retriable failures | the quorum has no reachable leader; retry later |
//! | [`ClientError::OutcomeUnknown`] | any call, with `retry_after_sending` off: it may have reached the server, and was not retried | the request may or may not take effect |
//! | [`ClientError::Rpc`] | any call: a non-retriable answer (`Api`, `Timeout`, `NotImplemented`, `RecordsTooLarge`, `Malformed`, ...) | act on the [`RpcError`] |
//! | [`ClientError::InvalidResponse`] | any call: an answer whose Raft body breaks the Raft rules | a server bug: report it |
//! | [`ClientError::Encode`] | any call: the request does not fit `request_bytes_max` | send less |
//! | [`ClientError::UnexpectedResponse`] | typed helpers: the server answered another kind | a server bug: report it |
//! | [`ClientError::Api`] | typed helpers with one item (`alter_config`, `create_topic`): the item's own error | act on the [`ApiError`] |
//! | [`ClientError::Timeout`] | waits of [`crate::BrokerSession`] | the cluster is slow or the follower stalled |
//! | [`ObserverError`] | [`crate::ObserverLog::on_response`], [`crate::ObserverLog::install_snapshot`] | the follower stops: its image cannot follow this log |
//!
//! A snapshot chunk the download refuses is corum-raft's [`corum_raft::SnapshotChunkError`]
//! (re-exported as [`crate::SnapshotChunkError`]): the follower drops the download and fetches
//! again after a backoff.

use std::net::SocketAddr;

use corum_controller::{ApiError, DecodeError, ReplayError};
use corum_protocol::{ProtocolError, RpcError};
use corum_raft::SnapshotId;
use corum_types::LogOffset;

/// Result of this crate.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// Why a client operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// A setting of [`crate::ClientConfig`] is unusable.
    #[error("client config: {field}: {reason}")]
    Config { field: &'static str, reason: String },
    /// No bootstrap server accepted a connection within the retry deadline.
    #[error("no bootstrap server reachable within {waited_ms} ms (tried {tried:?}): {last}")]
    NoServerReachable {
        tried: Vec<SocketAddr>,
        waited_ms: u64,
        last: String,
    },
    /// A call kept meeting retriable failures (`NotController`, lost connections, unreachable
    /// servers) until the retry deadline ran out.
    #[error("no active controller answered {request} within {waited_ms} ms ({attempts} attempts); last: {last}")]
    LeaderNotFound {
        request: &'static str,
        waited_ms: u64,
        attempts: u32,
        last: String,
    },
    /// The call may have reached a server and was not retried
    /// ([`crate::ClientConfig::retry_after_sending`] off): it may take effect, or not.
    #[error("{request} may or may not have taken effect ({reason}); not retried")]
    OutcomeUnknown {
        request: &'static str,
        reason: String,
    },
    /// The active controller (or the server asked) refused the whole request.
    #[error(transparent)]
    Rpc(RpcError),
    /// The server's answer is a valid frame whose Raft body breaks the Raft crate's rules
    /// (batches that do not continue the log, an unsorted voter set): a server bug.
    #[error("invalid answer from {server}: {source}")]
    InvalidResponse {
        server: SocketAddr,
        source: ProtocolError,
    },
    /// The request does not fit the client's `request_bytes_max`; nothing was sent.
    #[error("cannot send the request: {0}")]
    Encode(ProtocolError),
    /// The server answered a request with the response of another kind.
    #[error("{request} was answered with a {response} response")]
    UnexpectedResponse {
        request: &'static str,
        response: &'static str,
    },
    /// The one item of a single-item request failed.
    #[error(transparent)]
    Api(ApiError),
    /// A bounded wait ran out.
    #[error("timed out after {waited_ms} ms waiting for {what}")]
    Timeout { what: &'static str, waited_ms: u64 },
}

/// Why an observer's log cannot go on following the leader's. Each is final for that log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ObserverError {
    /// A fetch response that breaks the protocol (batches not continuing the log, epochs
    /// going backwards or beyond the response's epoch).
    #[error("invalid fetch response: {reason}")]
    InvalidResponse { reason: String },
    /// The leader asked to truncate below what was already applied (committed data never
    /// diverges in Raft: a leader or log bug).
    #[error("leader asks to truncate to {to}, below the applied end {applied}")]
    CommittedTruncation { to: LogOffset, applied: LogOffset },
    /// A committed data batch whose payload is not a record batch.
    #[error("batch at {offset} does not decode: {source}")]
    Decode {
        offset: LogOffset,
        source: DecodeError,
    },
    /// A committed record that does not apply to the image.
    #[error(transparent)]
    Replay(ReplayError),
    /// A downloaded snapshot whose bytes are not a record batch, or whose records do not
    /// rebuild an image (committed data this image cannot take, like [`ObserverError::Decode`]
    /// and [`ObserverError::Replay`] for a batch). The log was left as it was.
    #[error("snapshot {snapshot:?} does not load: {reason}")]
    BadSnapshot {
        snapshot: SnapshotId,
        reason: String,
    },
}
