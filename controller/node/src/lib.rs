//! A corum controller node: everything between the pure controller and Raft cores and a process
//! on a host.
//!
//! - [`config`]: the node configuration (Kafka's properties format and key names, `corum.*` keys
//!   for placement and limits), one table of keys driving parsing, defaults and help, and
//!   every component's settings derived from it ([`config::components`]).
//! - [`meta_properties`] and [`quorum_state`]: the node's own files in `metadata.log.dir`, written
//!   atomically over the engine's `Disk` seam by [`fsio`] (tmp file, fsync, rename, fsync
//!   directory), so simulated disk faults reach them.
//! - [`data_dir`]: a data directory opened over any `Disk`: the quorum state, the newest
//!   snapshot and the metadata log fitted to continue it; recovery at start-up, or read-only
//!   for the offline tools.
//! - [`bootstrap`]: the initial voter set `corum format` decides (`bootstrap.checkpoint`), and
//!   [`format`](mod@format): formatting (`corum format`) and describing (`corum info`) a log directory.
//! - [`protocol`]: the `corum-protocol` crate (the RPC envelope, its errors, the client
//!   connection), re-exported under its old path.
//! - [`dispatch`]: a decoded request to the controller handler serving it, and its result to
//!   "answer now" or "propose, then answer once committed".
//! - [`raft_config`]: the node's files as `corum-raft` takes them (the bootstrap voter set,
//!   replica keys and the quorum state both ways, the peers of a voter set).
//! - [`peer`]: the controller-to-controller transport of Raft messages ([`PeerNetwork`]).
//! - [`driver`]: one Raft replica on a glommio shard: the core, the metadata log on the real
//!   disk, the quorum-state file and the peer network, and the table of calls waiting for an
//!   answer ([`calls`]).
//! - [`calls`]: the table of calls waiting for their one answer (pure), kept by the driver.
//! - [`port`]: the one boundary between the driver and the controller service: two message
//!   types over a pair of bounded channels (local, or across shards).
//! - [`snapshot_store`]: the snapshots (KIP-630) of the metadata log in `snapshots/`, one
//!   checksummed file each, written durably (part file, fsync, rename, fsync directory).
//! - [`service`]: the controller state machine on the committed stream: replay, leadership,
//!   requests turned into proposals and verdicts, the periodic tick ([`service::core`] is its
//!   policy, sans IO).
//! - [`histogram`]: the latency histogram every figure of a node uses; [`metrics`] renders
//!   them for Prometheus.
//! - [`raft_features`]: `kraft.version`, the feature Raft keeps: UpdateFeatures naming it goes
//!   to the Raft core, DescribeFeatures shows it.
//! - [`rpc_server`]: the client-facing RPC server over framed TCP (pipelined, size-limited,
//!   leader hints rewritten to client endpoints), authorizing each request with Kafka's ACL
//!   model when the node has an authorizer ([`rpc_auth`]); [`principal`]: who a connection to
//!   a client-facing listener is (its client certificate's principal).
//! - [`error`]: one error enum per concern.
pub mod acl_slot;
pub mod bootstrap;
pub mod calls;
pub mod config;
pub mod connections;
pub mod data_dir;
pub mod dir_lock;
pub mod dispatch;
pub mod driver;
pub mod error;
pub mod format;
pub mod forward;
pub mod fsio;
pub mod histogram;
pub mod kafka_server;
pub mod meta_properties;
pub mod metrics;
pub mod node;
pub mod peer;
pub mod port;
pub mod principal;
pub use corum_protocol as protocol;
pub mod quorum_state;
pub mod raft_config;
pub mod raft_features;
pub mod registration;
pub mod rpc_auth;
pub mod rpc_server;
pub mod service;
pub mod sim;
pub mod snapshot_store;
#[cfg(test)]
mod task_size;

pub use bootstrap::{BootstrapCheckpoint, BootstrapEndpoint, BootstrapVoter};
pub use config::{CoreSet, HostPort, Listener, NodeConfig, ProcessRole, QuorumVoter};
pub use driver::{CommittedBatch, DriverStatus, RaftDriver, RaftDriverConfig, RaftHandle};
pub use error::{
    ConfigError, ConfigSource, DriverError, Error, NodeError, PeerError, ProtocolError, Result,
    RpcServerError, RuleError, ServiceError, StorageError, SyntaxError, ValueError,
};
pub use format::{BootstrapChoice, FormatOutcome, FormatPlan};
pub use meta_properties::MetaProperties;
pub use peer::{Inbound, PeerEnvelope, PeerInbox, PeerNetwork, PeerNetworkConfig};
pub use protocol::{RequestBody, RequestFrame, ResponseBody, ResponseFrame, RpcError};
pub use quorum_state::{QuorumState, QuorumStateError, ReplicaKey};
pub use rpc_server::{RpcServer, RpcServerConfig, RpcServerStats};
pub use service::{ControllerService, ControllerServiceConfig, ServiceStatus};
