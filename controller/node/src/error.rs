//! Errors of the node crate, one enum per concern so a caller can match on what it can act on:
//!
//! - [`ConfigError`]: a node configuration that cannot be parsed or fails validation; every
//!   variant names the key (and the line of the properties file, or `--set`), with a typed
//!   reason ([`SyntaxError`], [`ValueError`], [`RuleError`]).
//! - [`StorageError`]: a node file (`meta.properties`, `quorum-state`, `bootstrap.checkpoint`)
//!   that is missing, unreadable, corrupt, or disagrees with the configuration.
//! - [`ProtocolError`]: a request or response frame that cannot be encoded or decoded
//!   (`corum-protocol`'s, re-exported).
//! - [`PeerError`]: the controller-to-controller transport ([`crate::peer`]): a message that
//!   cannot be queued, an inbound envelope that is refused, or a network setup failure.
//! - [`DriverError`]: the Raft driver ([`crate::driver`]): a refused proposal, a stopped
//!   driver, or the fatal failures that stop it (log IO, quorum-state IO, a log that disagrees
//!   with the core).
//! - [`RpcServerError`]: the client-facing RPC server ([`crate::rpc_server`]): an unusable
//!   setting, a bind failure. (A client's errors are `corum-protocol`'s
//!   `RpcConnectionError`.)
//! - [`ServiceError`]: the controller service ([`crate::service`]): a committed
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
    /// A command-line flag standing for the key (`--cores` for `corum.cores`).
    Flag(&'static str),
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::Line(n) => write!(f, "line {n}"),
            ConfigSource::Override => f.write_str("--set"),
            ConfigSource::Default => f.write_str("default"),
            ConfigSource::Flag(flag) => f.write_str(flag),
        }
    }
}

/// A node configuration that cannot be used. Every variant but `Syntax` names the key (the
/// key table's name for it), and every reason is typed: a caller can match on what to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A line of the properties file that does not parse.
    #[error("config {at}: {reason}")]
    Syntax {
        at: ConfigSource,
        reason: SyntaxError,
    },
    #[error("config {at}: unknown key {key:?}{}", suggestion.map(|s| format!(" (did you mean {s:?}?)")).unwrap_or_default())]
    UnknownKey {
        key: String,
        at: ConfigSource,
        suggestion: Option<&'static str>,
    },
    #[error("config {at}: key {key:?} given again (first at {first})")]
    Duplicate {
        key: &'static str,
        first: ConfigSource,
        at: ConfigSource,
    },
    /// One value that does not parse, or is out of its key's range.
    #[error("config {at}: invalid value {value:?} for {key}: {reason}")]
    InvalidValue {
        key: &'static str,
        value: String,
        at: ConfigSource,
        reason: ValueError,
    },
    #[error("config: missing required key(s): {}", keys.join(", "))]
    MissingRequired { keys: Vec<&'static str> },
    /// Values that parse but do not work together (or that a component refuses): `key` is the
    /// one to change.
    #[error("config: {key}: {reason}")]
    Invalid {
        key: &'static str,
        reason: RuleError,
    },
    /// A per-listener key (`listener.name.<listener>.ssl.*`) whose value does not parse.
    #[error("config {at}: invalid value {value:?} for {key}: {reason}")]
    InvalidListenerValue {
        key: Box<str>,
        value: Box<str>,
        at: ConfigSource,
        reason: ValueError,
    },
    /// A listener's TLS settings that cannot be used (missing, contradicting, or files that do
    /// not load): `key` is the one to change, prefixed when the value came from one.
    #[error("config: {key}: {reason}")]
    Tls { key: String, reason: String },
    /// A listener's SASL settings that cannot be used: `key` is the one to change. The
    /// reason never quotes a JAAS value (it holds passwords).
    #[error("config: {key}: {reason}")]
    Sasl { key: String, reason: String },
}

impl ConfigError {
    /// The key the error is about (none for a line that does not parse, or several missing
    /// keys).
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key, .. }
            | ConfigError::Tls { key, .. }
            | ConfigError::Sasl { key, .. } => Some(key),
            ConfigError::InvalidListenerValue { key, .. } => Some(key),
            ConfigError::Duplicate { key, .. }
            | ConfigError::InvalidValue { key, .. }
            | ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::Syntax { .. } | ConfigError::MissingRequired { .. } => None,
        }
    }
}

/// Why a line of a properties file does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    #[error("empty key")]
    EmptyKey,
    #[error("dangling backslash at the end of the line")]
    DanglingBackslash,
    #[error("invalid escape \\u{hex}: expected 4 hex digits")]
    UnicodeEscape { hex: String },
    #[error("invalid escape \\u{hex}: a surrogate")]
    Surrogate { hex: String },
}

/// Why one value does not parse for its key (the key and the value are in
/// [`ConfigError::InvalidValue`]; `text` is the offending item of a list).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("expected an integer in [{min}, {max}]")]
    NotAnInteger { min: i64, max: i64 },
    #[error("must be in [{min}, {max}]")]
    OutOfRange { min: i64, max: i64 },
    #[error("expected true or false")]
    NotABool,
    /// An empty value where one is needed; `expected` says what to write.
    #[error("empty: {expected}")]
    Empty { expected: &'static str },
    #[error("role `broker` is not supported: corum nodes are controllers only (set process.roles=controller)")]
    BrokerRole,
    #[error("unknown role {role:?} (expected controller)")]
    UnknownRole { role: String },
    /// An item a list may hold once (a role, a listener name, a voter id).
    #[error("{what} {item} is listed twice")]
    Twice { what: &'static str, item: String },
    /// An item that is not of the form `expected`.
    #[error("{text:?}: expected {expected}")]
    Malformed {
        text: String,
        expected: &'static str,
    },
    /// A rule of `ssl.principal.mapping.rules` that does not parse.
    #[error("rule {rule:?}: {reason}")]
    PrincipalMappingRule { rule: String, reason: String },
    #[error("{text:?}: empty host")]
    EmptyHost { text: String },
    #[error("{text:?}: invalid host (no whitespace, '/', '@' or ',')")]
    InvalidHost { text: String },
    #[error("{text:?}: write IPv6 addresses in brackets, e.g. [::1]:9093")]
    UnbracketedIpv6 { text: String },
    #[error("{text:?}: invalid port (expected 0..=65535)")]
    InvalidPort { text: String },
    #[error("{text:?}: the listener name must be letters, digits and '_'")]
    ListenerName { text: String },
    #[error("{text:?}: invalid node id (expected 0..=4294967295)")]
    NodeId { text: String },
    #[error("{text:?}: invalid directory id (expected 22 characters of URL-safe base64)")]
    DirectoryId { text: String },
    #[error("{text:?}: the all-zero directory id means none")]
    ZeroDirectoryId { text: String },
    #[error("{text:?}: a voter needs a fixed port, not 0")]
    VoterPortZero { text: String },
    #[error("invalid core {text:?}")]
    Core { text: String },
    #[error("range {text:?} runs backwards")]
    CoreRangeBackwards { text: String },
    #[error("core {core} is above {max}")]
    CoreTooHigh { core: u32, max: u32 },
    /// More cores than a node has shards to run on them: the rest would start shards that
    /// run nothing.
    #[error("{count} cores, but a node runs at most {max} shards (a worker for the network, Raft and the log, and the controller); name {max} cores, or 1 to run both on one shard")]
    TooManyCores { count: usize, max: usize },
}

/// Why values that each parse do not work together, or why a component refuses them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("listener {name} has no entry in listener.security.protocol.map")]
    UnmappedListener { name: String },
    #[error(
        "listener {name} is mapped to {protocol}: SASL is served on Kafka listeners only (corum.kafka.listener.names); the controller and client listeners authenticate with TLS client certificates"
    )]
    UnsupportedSecurityProtocol { name: String, protocol: String },
    #[error("listener {name} cannot speak Kafka's protocol: it is the controller or the client listener")]
    ListenerServesTwo { name: String },
    #[error("{listener}: an advertised listener needs a host and a port clients can reach")]
    NotReachable { listener: String },
    #[error("must be exactly `controller` (the only role corum supports)")]
    NotControllerOnly,
    #[error("at least one listener is needed")]
    NoListeners,
    #[error("name at least one listener")]
    NoControllerListener,
    #[error("{name} is not one of the listeners ({})", listeners.join(", "))]
    NotAListener {
        name: String,
        listeners: Vec<String>,
    },
    #[error("{name} is a controller listener (Raft); clients need a listener of their own")]
    ClientListenerIsController { name: String },
    #[error("no {name} listener: clients (brokers, admins, loadgen) need one, e.g. {name}://127.0.0.1:9094 (the name is corum.client.listener.name)")]
    NoClientListener { name: String },
    #[error("set controller.quorum.voters (static quorum) or controller.quorum.bootstrap.servers (dynamic quorum)")]
    NoQuorum,
    #[error(
        "node.id {node_id} is not one of the static voters: a controller-only node must be a voter"
    )]
    NotAVoter { node_id: NodeId },
    #[error("empty path")]
    EmptyPath,
    /// `value` must be at least `other`'s value.
    #[error("{value} is below {other} ({other_value})")]
    BelowOther {
        value: u64,
        other: &'static str,
        other_value: u64,
    },
    /// `value` must be at most `other`'s value; `why` says what breaks otherwise.
    #[error("{value} is above {other} ({other_value}){why}")]
    AboveOther {
        value: u64,
        other: &'static str,
        other_value: u64,
        why: &'static str,
    },
    /// `value` must be at most half of `other`'s value.
    #[error("{value} is above half of {other} ({other_value}){why}")]
    AboveHalfOfOther {
        value: u64,
        other: &'static str,
        other_value: u64,
        why: &'static str,
    },
    /// `value` must be below `other`'s value.
    #[error("{value} must be below {other} ({other_value})")]
    NotBelowOther {
        value: u64,
        other: &'static str,
        other_value: u64,
    },
    #[error("{value} is not a multiple of {multiple}")]
    NotAMultiple { value: u64, multiple: u64 },
    #[error("core {core} is not in corum.cores ({cores})")]
    ControllerCoreOutside { core: u32, cores: String },
    #[error(
        "{cores} leaves no core besides the controller core for Raft, the log and the network"
    )]
    NoWorkerCore { cores: String },
    #[error("{value} does not fit in this machine's address space")]
    AddressSpace { value: u64 },
    #[error("invalid voter set: {0}")]
    Voters(corum_raft::Error),
    #[error("the Raft core refuses it: {0}")]
    Raft(corum_raft::ConfigError),
    #[error("the controller refuses it: {0}")]
    Controller(corum_controller::ConfigError),
    #[error("the log engine refuses it: {reason}")]
    Log { reason: String },
    #[error("the runtime refuses it: {reason}")]
    Runtime { reason: String },
    #[error("cannot listen on {addr}: {kind}")]
    CannotListen {
        addr: std::net::SocketAddr,
        kind: std::io::ErrorKind,
    },
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
    /// Another process holds the directory's lock file `lock` ([`crate::dir_lock`]).
    #[error("{}: in use by another process{} (it holds {}); a data directory belongs to one node", dir.display(), holder.map(|p| format!(" (pid {p})")).unwrap_or_default(), lock.display())]
    DirectoryInUse {
        dir: PathBuf,
        lock: PathBuf,
        holder: Option<u32>,
    },
    #[error("bootstrap checkpoint: {reason}")]
    InvalidBootstrap { reason: String },
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
    /// An envelope whose `from` is not the controller its TLS certificate names.
    #[error("envelope from node {from}, but the connection's certificate is {principal} (a controller may only speak as the node its certificate names)")]
    NotTheCertifiedController { from: NodeId, principal: String },
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
    /// An inbound envelope with a route no node may dial ([`crate::peer::PeerRoute`]).
    #[error("envelope from node {from} carries an invalid route: {reason}")]
    InvalidRoute { from: NodeId, reason: &'static str },
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

/// A failure of the Raft driver ([`crate::driver`]) or a proposal it refused.
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

/// A fatal failure of the controller service ([`crate::service`]): the committed
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
    #[error("cannot bind the Kafka listener {listener} on {addr}: {reason}")]
    KafkaBind {
        listener: String,
        addr: std::net::SocketAddr,
        reason: String,
    },
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
