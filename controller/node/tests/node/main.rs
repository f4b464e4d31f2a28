//! The node's integration tests, one test binary (every test binary links the whole
//! dependency graph; one binary with a module per subject links once): the peer transport
//! (`peer_network`), Raft cores over it (`raft_over_tcp`), the Raft driver on real logs
//! (`raft_driver`), the controller service over it (`controller_service`), the RPC server
//! (`rpc_server`), a whole node as `corum run` starts it (`node`), and the module graph read
//! from the source (`module_graph`).
//!
//! The harness stays in `tests/common/`, beside this directory: the client's tests include it
//! too, and the process tests of corum-tools include `common/requests.rs`, both by path.

#[path = "../common/mod.rs"]
mod common;
mod controller_service;
mod kafka_listener;
mod module_graph;
mod node;
mod peer_network;
mod raft_driver;
mod raft_over_tcp;
mod rpc_server;
