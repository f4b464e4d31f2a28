//! Errors of the node crate, one enum per concern so a caller can match on what it can act on:
//!
//! - [`ConfigError`]: a node configuration that cannot be parsed or fails validation; every
//!   variant names the key (and the line of the properties file, or `--set`).
//! - [`StorageError`]: a node file (`meta.properties`, `quorum-state`, `bootstrap.checkpoint`)
//!   that is missing, unreadable, corrupt, or disagrees with the configuration.
//! - [`ProtocolError`]: a request or response frame that cannot be encoded or decoded
//!   (`corum-protocol`'s, re-exported).
//! - [`PeerError`]: the controller-to-controller transport ([`crate::peer`]): a message that
//!   cannot be queued, an inbound envelope that is refused, or a network setup failure.
//! - [`DriverError`]: the Raft driver ([`crate::raft_driver`]): a refused proposal, a stopped
//!   driver, or the fatal failures that stop it (log IO, quorum-state IO, a log that disagrees
//!   with the core).
//! - [`RpcServerError`]: the client-facing RPC server ([`crate::rpc_server`]): an unusable
//!   setting, a bind failure. (A client's errors are `corum-protocol`'s
//!   `RpcConnectionError`.)
//! - [`ServiceError`]: the controller service ([`crate::controller_service`]): a committed
//!   batch that does not decode or does not apply to the image (fatal: the log does not fit).

use std::fmt;
use std::path::PathBuf;

use corum_types::{NodeId, Uuid};

pub use corum_protocol::ProtocolError;

/// Where a configuration value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// A line (1-based) of the properties file.
    Line(usize),
    /// A `--set key=value` override (or [`crate::config::NodeConfig::with_overrides`]).
    Override,
    /// The key's built-in default.
    Default,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::Line(n) => write!(f, "line {n}"),
            ConfigSource::Override => f.write_str("--set"),
            ConfigSource::Default => f.write_str("default"),
        }
    }
}

/// A node configuration that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config {at}: {reason}")]
    Syntax { at: ConfigSource, reason: String },
    #[error("config {at}: unknown key {key:?}{}", suggestion.map(|s| format!(" (did you mean {s:?}?)")).unwrap_or_default())]
    UnknownKey {
        key: String,
        at: ConfigSource,
        suggestion: Option<&'static str>,
    },
    #[error("config {at}: key {key:?} given again (first at {first})")]
    Duplicate {
        key: String,
        first: ConfigSource,
        at: ConfigSource,
    },
    #[error("config {at}: invalid value {value:?} for {key}: {reason}")]
    InvalidValue {
        key: &'static str,
        value: String,
        at: ConfigSource,
        reason: String,
    },
    #[error("config: missing required key(s): {}", keys.join(", "))]
    MissingRequired { keys: Vec<&'static str> },
    #[error("config: {key}: {reason}")]
    Invalid { key: &'static str, reason: String },
}

/// A node file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not formatted (no meta.properties); run `corum format` first", dir.display())]
    NotFormatted { dir: PathBuf },
    #[error("{}: already formatted (cluster {cluster_id}); pass --ignore-formatted to keep it", dir.display())]
    AlreadyFormatted { dir: PathBuf, cluster_id: String },
    #[error("{}: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("{}: unsupported format version {version} (this build reads {supported})", path.display())]
    UnsupportedVersion {
        path: PathBuf,
        version: u64,
        supported: u64,
    },
    #[error("{}: {field} is {found} but {expected} was expected", path.display())]
    Mismatch {
        path: PathBuf,
        field: &'static str,
        expected: String,
        found: String,
    },
    #[error("format refused: {reason}")]
    FormatRefused { reason: String },
    #[error("bootstrap voters: {reason}")]
    InvalidVoters { reason: String },
    /// A snapshot ([`crate::snapshot_store`]) whose data or voter set is above the store's
    /// limit: `write` refuses it (nothing is written) and `read` does not load it.
    #[error("{}: snapshot {what} of {size_bytes} bytes exceeds the limit of {max_bytes}", path.display())]
    SnapshotTooLarge {
        path: PathBuf,
        what: &'static str,
        size_bytes: u64,
        max_bytes: u64,
    },
    /// `write` refused a snapshot whose voter set breaks [`corum_raft::VoterSet::validate`]
    /// (nothing is written: a node could not restart from it).
    #[error("{}: snapshot not written: {source}", path.display())]
    SnapshotVoters {
        path: PathBuf,
        #[source]
        source: corum_raft::Error,
    },
}

/// A failure of the controller-to-controller transport.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// `send` to a node that has no outbound link (not a configured voter or observer).
    #[error("no link to node {to}")]
    UnknownPeer { to: NodeId },
    /// `add_peer` for a node that already has a link, or for this node itself.
    #[error("cannot add a link to node {id}: {reason}")]
    InvalidPeer { id: NodeId, reason: &'static str },
    /// The outbound queue to `to` was full: the message was dropped (and counted). Raft
    /// tolerates the loss: it resends on its own timeouts.
    #[error("outbound queue to node {to} is full ({capacity} messages): message dropped")]
    QueueFull { to: NodeId, capacity: usize },
    /// The network is closed; nothing more is sent.
    #[error("peer network is closed")]
    Closed,
    /// An inbound envelope of another cluster (a misconfigured or stale node).
    #[error(
        "envelope from node {from} is for cluster {found}, this node is in cluster {expected}"
    )]
    WrongCluster {
        from: NodeId,
        expected: Uuid,
        found: Uuid,
    },
    /// An inbound envelope addressed to another node (wrong address in someone's config).
    #[error("envelope from node {from} is addressed to node {to}, this is node {me}")]
    WrongAddressee {
        from: NodeId,
        to: NodeId,
        me: NodeId,
    },
    /// An inbound Raft message that passed rkyv validation but breaks a rule of its own
    /// ([`corum_raft::Message::validate`]: batches not contiguous, an unsorted voter set).
    #[error("invalid Raft message from node {from}: {source}")]
    InvalidMessage {
        from: NodeId,
        #[source]
        source: corum_raft::Error,
    },
    /// A setting of [`crate::peer::PeerNetworkConfig`] is unusable.
    #[error("peer network config: {field}: {reason}")]
    Config { field: &'static str, reason: String },
    /// A peer's or this node's host name does not resolve to an address.
    #[error("cannot resolve {host}:{port}: {reason}")]
    Resolve {
        host: String,
        port: u16,
        reason: String,
    },
    /// Binding the listener, or another runtime operation, failed.
    #[error(transparent)]
    Runtime(#[from] corum_runtime::Error),
}

/// A failure of the Raft driver ([`crate::raft_driver`]) or a proposal it refused.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// This node is not the leader: retry at `leader` (unknown while an election runs).
    #[error("not the leader (epoch {epoch}, leader {leader:?})")]
    NotLeader {
        epoch: corum_types::Epoch,
        leader: Option<NodeId>,
    },
    /// The core refused the proposal for another reason (empty or oversized batch).
    #[error("proposal refused: {0}")]
    Proposal(corum_raft::Error),
    /// The driver is not running (shut down, or stopped by a fatal error).
    #[error("the Raft driver is stopped")]
    Stopped,
    /// The Raft core cannot be built from what is on disk (a gap in the log, a control batch
    /// that does not decode, a bad configuration).
    #[error("cannot restore the Raft core: {0}")]
    Restore(corum_raft::Error),
    /// The metadata log failed (an fsync or write error is fatal: the driver stops rather
    /// than guess what reached the disk), or it could not be opened or read.
    #[error("metadata log: {0}")]
    Log(#[from] corum_engine::Error),
    /// The quorum-state file could not be read or written durably.
    #[error("quorum state: {0}")]
    QuorumState(#[from] StorageError),
    /// The peer network could not be set up.
    #[error("peer network: {0}")]
    Peer(#[from] PeerError),
    /// The log on disk and the core's view of it disagree (a bug, or a log edited behind the
    /// driver's back): stop rather than replicate something else than what the core decided.
    #[error("metadata log and Raft core disagree: {reason}")]
    Diverged { reason: String },
    /// An observer request named a replica that votes (or this node): its fetches would move
    /// that voter's progress and with it the high watermark.
    #[error("observer request refused: replica {id} {reason}")]
    ObserverRefused { id: NodeId, reason: &'static str },
    /// A snapshot could not be written to the snapshot store ([`crate::snapshot_store`]).
    #[error("snapshot through offset {end_offset}: {source}")]
    Snapshot {
        end_offset: corum_types::LogOffset,
        #[source]
        source: StorageError,
    },
    /// The newest snapshot in the store cannot be loaded at start-up (the error names the
    /// file; the log below it may be gone, so there is no falling back to an older one).
    #[error("loading the newest snapshot: {0}")]
    SnapshotLoad(#[source] StorageError),
}

/// A fatal failure of the controller service ([`crate::controller_service`]): the committed
/// log does not fit the state machine, so the service stops rather than serve a wrong image.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A committed data batch whose payload is not a valid record batch.
    #[error("committed batch at offset {offset} does not decode: {source}")]
    Decode {
        offset: corum_types::LogOffset,
        #[source]
        source: corum_controller::DecodeError,
    },
    /// A committed data batch whose frame header counts other records than its payload holds.
    #[error(
        "committed batch at offset {offset} holds {decoded} records, its header says {header}"
    )]
    RecordCount {
        offset: corum_types::LogOffset,
        header: u32,
        decoded: usize,
    },
    /// A committed batch (or this controller's own proposal) that does not apply to the image.
    #[error("batch at offset {offset} does not apply to the image: {source}")]
    Replay {
        offset: corum_types::LogOffset,
        #[source]
        source: corum_controller::ReplayError,
    },
}

/// A failure to set up the client-facing RPC server ([`crate::rpc_server::RpcServer`]).
#[derive(Debug, thiserror::Error)]
pub enum RpcServerError {
    /// A setting of [`crate::rpc_server::RpcServerConfig`] is unusable.
    #[error("rpc server config: {field}: {reason}")]
    Config { field: &'static str, reason: String },
    /// The client listener could not be bound.
    #[error("cannot bind the client listener on {addr}: {reason}")]
    Bind {
        addr: std::net::SocketAddr,
        reason: String,
    },
}

/// Why a node ([`crate::node`]) did not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Peer(#[from] PeerError),
    #[error("client listener: {0}")]
    RpcServer(#[from] RpcServerError),
    #[error("raft driver: {0}")]
    Driver(#[from] DriverError),
    #[error("controller: {0}")]
    Service(ServiceError),
    #[error("runtime: {0}")]
    Runtime(#[from] corum_runtime::Error),
    #[error(transparent)]
    Node(#[from] Error),
}

/// Any error of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error(transparent)]
    Peer(#[from] PeerError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
