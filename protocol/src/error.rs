//! Errors of the protocol crate, one enum per concern:
//!
//! - [`ProtocolError`]: a frame that cannot be encoded or decoded (the server answers the
//!   request's [`crate::RpcError`] for it with [`crate::rpc_error_for`]).
//! - [`RpcConnectionError`]: why an [`crate::RpcConnection`] call did not produce a response
//!   body.
//!
//! What the *server* says about a request is not an error of this crate's code but a value on
//! the wire: [`crate::RpcError`].

use std::net::SocketAddr;

use crate::rpc_error::RpcError;

/// A frame that cannot be encoded or decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("frame of {len_bytes} bytes exceeds the limit of {max_bytes}")]
    TooLarge { len_bytes: usize, max_bytes: usize },
    #[error("frame of {len_bytes} bytes is shorter than its root")]
    Truncated { len_bytes: usize },
    #[error("frame buffer at {address:#x} is not aligned to {align} bytes")]
    Misaligned { address: usize, align: usize },
    #[error("frame failed validation: {reason}")]
    Invalid { reason: String },
    #[error("cannot encode frame: {reason}")]
    Encode { reason: String },
    /// A Raft body (Fetch, FetchSnapshot answer) that is a valid archive but breaks the Raft
    /// crate's own rules ([`corum_raft::Message::validate`]).
    #[error("invalid Raft body: {0}")]
    Raft(corum_raft::Error),
}

/// Why an [`crate::RpcConnection`] call did not produce a response body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcConnectionError {
    /// The server answered with an error (including its own `Timeout`, and `NotController`:
    /// a connection does not follow leaders; `corum_client::ControllerClient` does).
    #[error(transparent)]
    Rpc(RpcError),
    /// No answer came within the caller's wait (the server may be hung or cut off; the
    /// request may still take effect).
    #[error("no answer from {addr} within {waited_ms} ms")]
    NoAnswer { addr: SocketAddr, waited_ms: u64 },
    /// A setting of [`crate::RpcConnectionConfig`] is unusable.
    #[error("rpc connection config: {field}: {reason}")]
    Config { field: &'static str, reason: String },
    /// The server could not be reached.
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: SocketAddr, reason: String },
    /// The connection broke before the answer came (the request may have taken effect). A
    /// broken connection stays broken: open a new one.
    #[error("connection to {addr} lost: {reason}")]
    ConnectionLost { addr: SocketAddr, reason: String },
    /// The server's answer is a valid frame whose Raft body breaks the Raft crate's rules
    /// ([`crate::ResponseBody::validate_raft`]): a server bug; the connection keeps serving.
    #[error("invalid answer from {addr}: {source}")]
    InvalidResponse {
        addr: SocketAddr,
        #[source]
        source: ProtocolError,
    },
    /// The request does not fit the connection's `request_bytes_max` (nothing was sent).
    #[error("cannot send the request: {0}")]
    Encode(ProtocolError),
}
