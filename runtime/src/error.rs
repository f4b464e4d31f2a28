//! Errors of the runtime crate. Every variant names something a caller can act on.

use std::net::SocketAddr;

use crate::frame::FrameError;
use crate::placement::{CoreId, PlacementError, ShardId};

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in the runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The core placement is invalid; nothing was started.
    #[error(transparent)]
    Placement(#[from] PlacementError),

    /// The runtime configuration is invalid; nothing was started.
    #[error("invalid runtime config: {field} {reason}")]
    Config { field: &'static str, reason: String },

    /// Reading the set of online cores from the OS failed.
    #[error("cannot read the online CPU set: {source}")]
    OnlineCores {
        #[source]
        source: std::io::Error,
    },

    /// A shard's glommio executor could not be created (io_uring setup, locked memory limit,
    /// pinning to a core). The other shards were stopped.
    #[error("shard {shard} (core {core:?}) could not start its executor: {reason}")]
    ExecutorSetup {
        shard: ShardId,
        core: Option<CoreId>,
        reason: String,
    },

    /// A shard's thread could not be spawned.
    #[error("shard {shard}: cannot spawn its thread: {source}")]
    ThreadSpawn {
        shard: ShardId,
        #[source]
        source: std::io::Error,
    },

    /// A shard's code panicked; the runtime triggered shutdown for the others.
    #[error("shard {shard} panicked: {message}")]
    ShardPanicked { shard: ShardId, message: String },

    /// A frame failed its header or checksum checks; the connection was closed.
    #[error("bad frame from {peer}: {source}")]
    BadFrame {
        peer: SocketAddr,
        #[source]
        source: FrameError,
    },

    /// A frame's checksum was fine but its payload is not a valid archive of the expected type;
    /// the connection was closed.
    #[error("invalid payload from {peer}: {reason}")]
    InvalidPayload { peer: SocketAddr, reason: String },

    /// A payload did not pass rkyv validation (outside any connection).
    #[error("payload failed validation: {reason}")]
    Validation { reason: String },

    /// Serialising a message failed.
    #[error("cannot encode message: {reason}")]
    Encode { reason: String },

    /// A message to send is larger than the frame limit.
    #[error(
        "message of {payload_bytes} bytes exceeds the frame limit of {payload_bytes_max} bytes"
    )]
    MessageTooLarge {
        payload_bytes: usize,
        payload_bytes_max: u32,
    },

    /// A TLS handshake with `peer` failed or was refused (logged); nothing was read from it.
    #[error("TLS with {peer}: {source}")]
    Tls {
        peer: SocketAddr,
        #[source]
        source: crate::tls::TlsError,
    },

    /// A network operation failed.
    #[error("{op} {peer}: {source}")]
    Io {
        op: &'static str,
        peer: SocketAddr,
        #[source]
        source: std::io::Error,
    },

    /// The peer closed the connection cleanly between frames.
    #[error("connection to {peer} closed by the peer")]
    ConnectionClosed { peer: SocketAddr },

    /// The connection was closed earlier after an error and can't be used any more.
    #[error("connection to {peer} was closed earlier: {reason}")]
    ConnectionBroken { peer: SocketAddr, reason: String },

    /// Shutdown was triggered while waiting.
    #[error("shutting down")]
    ShuttingDown,

    /// Installing the SIGINT/SIGTERM handlers failed.
    #[error("cannot install signal handlers: {source}")]
    Signals {
        #[source]
        source: std::io::Error,
    },

    /// Creating a shard-local resource (e.g. the shutdown watcher) failed.
    #[error("shard setup: {op}: {source}")]
    ShardSetup {
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
}
