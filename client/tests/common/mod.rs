//! Harness of the client tests: the corum-node integration tests' own harness (deadline-guarded
//! runners, polling, keys, Raft configs, peer networks, `start_controller_node_with`, nodes
//! serving RPC), included from `controller/node/tests/common/mod.rs` so there is one copy, plus a
//! 3-node cluster and client configs over it.
//!
//! Cargo compiles `tests/common/mod.rs` only as a module of the test binary that declares it
//! (`tests/client/main.rs`), never as a test binary of its own.

pub mod config_batches;
// The node's harness is checked for dead code in the node's own test binary, which uses every
// helper of it; the client's tests use a part, so what they leave unused is not dead.
#[allow(dead_code)]
#[path = "../../../controller/node/tests/common/mod.rs"]
mod node_harness;
pub use node_harness::*;

use std::path::Path;
use std::time::Duration;

use corum_types::Uuid;

// ---------------------------------------------------------------------------------------------
// Additions for the client tests: nodes serving clients over RPC, and a 3-node cluster.

/// The cluster id of every test cluster.
pub const CLUSTER: Uuid = Uuid([0x5c; 16]);

/// A node serving clients (the corum-node harness's [`RpcNode`]).
pub type Node = RpcNode;

/// Starts nodes 1, 2, 3 with logs under `tmp` (see [`rpc_cluster`] for `client_hints`),
/// waits for an active controller and returns the nodes and its index.
pub async fn cluster(tmp: &Path, client_hints: bool) -> (Vec<Node>, usize) {
    cluster_with(
        tmp,
        client_hints,
        corum_controller::ControllerConfig::default(),
    )
    .await
}

/// [`cluster`] with the controllers' own settings.
pub async fn cluster_with(
    tmp: &Path,
    client_hints: bool,
    controller: corum_controller::ControllerConfig,
) -> (Vec<Node>, usize) {
    let request_bytes_max = corum_node::NodeConfig::for_tests().socket_request_bytes_max;
    rpc_cluster(tmp, CLUSTER, client_hints, request_bytes_max, controller).await
}

/// A client config over the nodes' RPC addresses, listed in the order of `order` (indexes
/// into `nodes`), with short timeouts.
pub fn client_config(nodes: &[Node], order: &[usize]) -> corum_client::ClientConfig {
    corum_client::ClientConfig {
        request_timeout: Duration::from_secs(5),
        retry_deadline: Duration::from_secs(15),
        ..corum_client::ClientConfig::new(order.iter().map(|&i| nodes[i].rpc_addr).collect())
    }
}

/// Stops every node.
pub async fn stop_all(nodes: Vec<Node>) {
    for n in nodes {
        n.stop().await;
    }
}
