//! Harness of the client tests: the corum-node integration tests' own harness (deadline-guarded
//! runners, polling, keys, Raft configs, peer networks, `start_controller_node`), included from
//! `controller/node/tests/common/mod.rs` so there is one copy, plus nodes serving clients over
//! RPC and a 3-node cluster.
//!
//! Cargo compiles `tests/common/mod.rs` only as a module of each test binary that declares
//! `mod common;`, never as a test binary of its own.

// Each test binary uses a different subset of these helpers, so whatever one binary leaves
// unused would otherwise warn (and fail `clippy -D warnings`).
#![allow(dead_code)]

#[path = "../../../controller/node/tests/common/mod.rs"]
mod node_harness;
pub use node_harness::*;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use corum_node::peer::{PeerInbox, PeerNetwork};
use corum_raft::VoterSet;
use corum_runtime::ShutdownSignal;
use corum_types::{NodeId, Uuid};

// ---------------------------------------------------------------------------------------------
// Additions for the client tests: nodes serving clients over RPC, and a 3-node cluster.

/// The cluster id of every test cluster.
pub const CLUSTER: Uuid = Uuid([0x5c; 16]);

/// One node: a driver, the controller service on its committed stream, and its RPC server.
pub struct Node {
    pub id: u32,
    pub rpc_addr: SocketAddr,
    pub stop: ShutdownSignal,
    pub raft: corum_node::RaftHandle,
    pub service: corum_node::ControllerServiceHandle,
    pub driver_run: glommio::task::JoinHandle<Result<(), corum_node::DriverError>>,
    pub service_run:
        glommio::task::JoinHandle<Result<corum_controller::Controller, corum_node::ServiceError>>,
    pub rpc_run: glommio::task::JoinHandle<corum_node::RpcServerStats>,
}

impl Node {
    /// Starts node `id` with its log under `dir`, serving clients on `rpc`.
    pub async fn start(
        id: u32,
        dir: &Path,
        net: (PeerNetwork, PeerInbox),
        voters: &VoterSet,
        rpc: corum_node::RpcServer,
        controller: corum_controller::ControllerConfig,
    ) -> Node {
        let n = start_controller_node_with(id, dir, net, voters, true, controller).await;
        let rpc_addr = rpc.local_addr();
        let rpc_run =
            glommio::spawn_local(rpc.run(n.service.clone(), Some(n.raft.clone()), n.stop.clone()))
                .detach();
        Node {
            id,
            rpc_addr,
            stop: n.stop,
            raft: n.raft,
            service: n.service,
            driver_run: n.driver_run,
            service_run: n.service_run,
            rpc_run,
        }
    }

    /// Whether this node's controller is active (it leads and has replayed its epoch start).
    pub fn active(&self) -> bool {
        self.service.status().active_epoch.is_some()
    }

    /// Stops the node and waits for its tasks to end.
    pub async fn stop(self) {
        self.stop.fire();
        self.driver_run.await.unwrap().unwrap();
        self.service_run.await.unwrap().unwrap();
        self.rpc_run.await.unwrap();
    }
}

/// Starts nodes 1, 2, 3 with logs under `tmp`, waits for an active controller and returns the
/// nodes and its index. With `client_hints` the RPC servers know each other's client
/// endpoints (NotController names the leader's client address); without, hints name the
/// leader's Raft endpoint, which a client must not connect to.
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
    let ids = [1u32, 2, 3];
    let nets: Vec<_> = bind_all(CLUSTER, &ids);
    let mut servers: Vec<corum_node::RpcServer> = ids
        .iter()
        .map(|&id| {
            let config = corum_node::RpcServerConfig::new(CLUSTER, NodeId(id));
            corum_node::RpcServer::bind(loopback(), config).unwrap()
        })
        .collect();
    if client_hints {
        let client_endpoints: Vec<corum_node::protocol::LeaderHint> = ids
            .iter()
            .zip(&servers)
            .map(|(&id, s)| corum_node::protocol::LeaderHint {
                id: NodeId(id),
                host: "127.0.0.1".into(),
                port: s.local_addr().port(),
            })
            .collect();
        for s in &mut servers {
            s.set_client_endpoints(client_endpoints.clone());
        }
    }
    let voters = voter_set(&ids, &nets);
    let mut nodes = Vec::new();
    for ((&id, net), rpc) in ids.iter().zip(nets).zip(servers) {
        let dir = tmp.join(format!("node-{id}"));
        nodes.push(Node::start(id, &dir, net, &voters, rpc, controller.clone()).await);
    }
    wait_for("an active controller", || nodes.iter().any(Node::active)).await;
    let l = nodes.iter().position(Node::active).unwrap();
    (nodes, l)
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
