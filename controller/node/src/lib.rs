//! A corum controller node: everything between the pure controller and Raft cores and a process
//! on a host.
//!
//! - [`config`]: the node configuration (Kafka's properties format and key names, `corum.*` keys
//!   for placement and limits), one table of keys driving parsing, defaults and help, and
//!   every component's settings derived from it ([`config::components`]).
//! - [`meta_properties`] and [`quorum_state`]: the node's own files in `metadata.log.dir`, written
//!   atomically by [`fsio`] (tmp file, fsync, verify, rename, fsync directory).
//! - [`bootstrap`]: the initial voter set `corum format` decides (`bootstrap.checkpoint`), and
//!   [`format`](mod@format): formatting (`corum format`) and describing (`corum info`) a log directory.
//! - [`protocol`]: the RPC envelope (rkyv frames carrying the controller's request and response
//!   types), with size limits and validation.
//! - [`dispatch`]: a decoded request to the controller handler serving it, and its result to
//!   "answer now" or "propose, then answer once committed".
//! - [`raft_config`]: the node's files as `corum-raft` takes them (the bootstrap voter set,
//!   replica keys and the quorum state both ways, the peers of a voter set).
//! - [`peer`]: the controller-to-controller transport of Raft messages ([`PeerNetwork`]).
//! - [`raft_driver`]: one Raft replica on a glommio shard: the core, the metadata log on the
//!   real disk, the quorum-state file and the peer network, with a proposal handle and a
//!   channel of committed batches.
//! - [`snapshot_store`]: the snapshots (KIP-630) of the metadata log in `snapshots/`, one
//!   checksummed file each, written durably (part file, fsync, rename, fsync directory).
//! - [`controller_service`]: the controller state machine on the committed stream: replay,
//!   leadership, requests answered once their records commit, the periodic tick.
//! - [`rpc_server`]: the client-facing RPC server over framed TCP (pipelined, size-limited,
//!   leader hints rewritten to client endpoints) and a pipelining [`RpcClient`] that follows
//!   `NotController` redirects.
//! - [`error`]: one error enum per concern.
pub mod answer_gate;
pub mod bootstrap;
pub mod config;
pub mod controller_service;
pub mod dispatch;
pub mod error;
pub mod format;
pub mod fsio;
pub mod meta_properties;
pub mod metrics;
pub mod node;
pub mod peer;
pub mod protocol;
pub mod quorum_state;
pub mod raft_config;
pub mod raft_driver;
pub mod rpc_server;
pub mod shard_bridge;
pub mod snapshot_store;

pub use bootstrap::{BootstrapEndpoint, BootstrapVoter, BootstrapVoters};
pub use config::{CoreSet, HostPort, Listener, NodeConfig, ProcessRole, QuorumVoter};
pub use controller_service::{
    ControllerService, ControllerServiceConfig, ControllerServiceHandle, ServiceStatus,
};
pub use error::{
    ConfigError, ConfigSource, DriverError, Error, NodeError, PeerError, ProtocolError, Result,
    RpcClientError, RpcServerError, RuleError, ServiceError, StorageError, SyntaxError, ValueError,
};
pub use format::{BootstrapChoice, FormatOutcome, FormatPlan};
pub use meta_properties::MetaProperties;
pub use peer::{Inbound, PeerEnvelope, PeerInbox, PeerNetwork, PeerNetworkConfig};
pub use protocol::{RequestBody, RequestFrame, ResponseBody, ResponseFrame, RpcError};
pub use quorum_state::{QuorumState, QuorumStateError, ReplicaKey};
pub use raft_driver::{CommittedBatch, DriverStatus, RaftDriver, RaftDriverConfig, RaftHandle};
pub use rpc_server::{RpcClient, RpcClientConfig, RpcServer, RpcServerConfig, RpcServerStats};
