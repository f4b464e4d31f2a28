//! The private wire protocol between corum clients (brokers, admins, the `corum` tools) and
//! controller nodes, shared by both sides so that neither links the other.
//!
//! # Model
//!
//! A client opens a TCP connection to a node's client listener and sends frames of the
//! runtime's framing ([`corum_runtime::frame`]: header, crc32c, 8-byte aligned payload). Each
//! payload is one rkyv archive: a [`RequestFrame`] from the client, a [`ResponseFrame`] from
//! the server. The bodies are the controller's own request and response types and
//! `corum-raft`'s messages, carried as they are. Requests pipeline: the server answers each
//! with its `correlation_id`, in any order. Bytes are validated once, where they enter
//! ([`decode_request`], [`decode_response`], the runtime's frame reader), with size limits
//! checked before anything is buffered.
//!
//! A whole request that fails gets an [`RpcError`]: one variant per thing a client can act on
//! (not the active controller, timed out, not implemented, too large, ...), each mapped to the
//! Kafka error code a Kafka client expects ([`RpcError::kafka_error_code`]).
//!
//! | module | what |
//! |---|---|
//! | [`envelope`] | [`RequestFrame`], [`ResponseFrame`], the bodies, encode / decode with limits, the golden bytes |
//! | [`rpc_error`] | [`RpcError`] and its Kafka codes, [`LeaderHint`] |
//! | [`describe_quorum`] | [`DescribeQuorumResponse`]: the quorum as one node sees it |
//! | [`connection`] | [`RpcConnection`]: one pipelined connection to one server (no leader following) |
//! | [`error`] | [`ProtocolError`] (codec), [`RpcConnectionError`] (a call on a connection) |
//!
//! The server lives in `corum-node` (`rpc_server`); the leader-following client, which moves
//! between bootstrap servers on `NotController`, in `corum-client` (`ControllerClient`).
pub mod connection;
pub mod describe_quorum;
pub mod envelope;
pub mod error;
pub mod rpc_error;

pub use connection::{RpcConnection, RpcConnectionConfig};
pub use describe_quorum::{DescribeQuorumResponse, ReplicaState};
pub use envelope::{
    decode_request, decode_response, encode_request, encode_response, peek_correlation_id,
    rpc_error_for, ArchivedRequestFrame, ArchivedResponseFrame, EncodedFrame, LocalRead,
    RequestBody, RequestFrame, ResponseBody, ResponseFrame,
};
pub use error::{ProtocolError, RpcConnectionError};
pub use rpc_error::{LeaderHint, RpcError};
