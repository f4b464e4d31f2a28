//! Harness of the node's integration tests (`tests/node/`): deadline-guarded executor
//! runners, condition polling, and the small constructors for keys, endpoints, Raft configs
//! and peer networks that every cluster test needs, and controller nodes (driver + service,
//! with or without an RPC server) on real logs.
//!
//! Cargo compiles `tests/common/mod.rs` only as a module of the test binaries that include it
//! (`tests/node/main.rs`, and the client's tests by path), never as a test binary of its own.
//! Every helper here is used by the node's tests, so that binary checks it for dead code.

mod requests;
pub use requests::heartbeat;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use corum_controller::image::ConfigResource;
use corum_engine::disk::executor_builder;
use corum_engine::log::LogConfig;
use corum_node::config::components::{self, RaftReplica};
use corum_node::peer::{PeerInbox, PeerNetwork, PeerNetworkConfig};
use corum_node::{ControllerServiceConfig, NodeConfig, RaftDriverConfig, RequestBody};
use corum_raft::{Config, Endpoint, ReplicaKey, Voter, VoterSet};
use corum_runtime::{BackoffConfig, Placement, Runtime, RuntimeConfig, ShutdownSignal};
use corum_types::{NodeId, Uuid};

/// How long any one awaited condition may take before the test fails.
pub const WAIT_MAX: Duration = Duration::from_secs(30);
/// The listener name every test endpoint advertises.
pub const LISTENER: &str = "CONTROLLER";

/// Waits for the test thread `handle` to signal on `rx`; fails the test if it has not
/// finished within `deadline`, and re-raises its panic if it panicked.
fn finish_by(deadline: Duration, handle: JoinHandle<()>, rx: mpsc::Receiver<()>) {
    match rx.recv_timeout(deadline) {
        Ok(()) => handle.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("test did not finish within {deadline:?}")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(handle.join().unwrap_err())
        }
    }
}

/// Runs `f` on a glommio executor named `name` on its own thread and fails the test if it
/// has not finished within `deadline`.
pub fn on_executor<F, Fut>(name: &'static str, deadline: Duration, f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        executor_builder(name)
            .make()
            .expect("glommio executor")
            .run(f());
        let _ = tx.send(());
    });
    finish_by(deadline, handle, rx);
}

/// Runs `f` on one unpinned `Runtime` shard and fails the test if it has not finished
/// within `deadline`.
pub fn on_shard<F, Fut>(deadline: Duration, f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let mut f = Some(f);
        let outcomes = Runtime::new(Placement::unpinned(1).unwrap(), RuntimeConfig::default())
            .unwrap()
            .run(move |_| {
                let f = f.take().expect("one shard");
                move |_ctx| f()
            })
            .unwrap();
        for o in outcomes {
            o.result.unwrap();
        }
        let _ = tx.send(());
    });
    finish_by(deadline, handle, rx);
}

/// Polls `cond` every few milliseconds until it holds; fails the test after [`WAIT_MAX`].
pub async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < WAIT_MAX, "timed out waiting for {what}");
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
}

/// An ephemeral loopback address.
pub fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// The replica key of node `id`: its directory id is `id` repeated.
pub fn key(id: u32) -> ReplicaKey {
    ReplicaKey {
        id: NodeId(id),
        directory_id: Uuid([id as u8; 16]),
    }
}

/// The [`LISTENER`] endpoint at `addr`.
pub fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint {
        listener: LISTENER.into(),
        host: addr.ip().to_string(),
        port: addr.port(),
    }
}

/// Raft timings short enough for a loopback cluster to elect and fail over quickly.
pub fn raft_config() -> Config {
    Config {
        election_timeout_ms: 150,
        fetch_timeout_ms: 300,
        election_backoff_max_ms: 100,
        heartbeat_interval_ms: 30,
        request_timeout_ms: 200,
        fetch_wait_max_ms: 100,
        ..Config::default()
    }
}

/// Node `id`'s configuration: every key at the key table's default
/// ([`NodeConfig::for_tests`], whose controller listener is [`LISTENER`]).
pub fn node_config(id: u32) -> NodeConfig {
    let mut config = NodeConfig::for_tests();
    config.node_id = NodeId(id);
    config
}

/// Peer network config for node `id` of `cluster` listening on `listen`, with a fast
/// reconnect backoff seeded by `id`.
pub fn peer_config(cluster: Uuid, id: u32, listen: SocketAddr) -> PeerNetworkConfig {
    PeerNetworkConfig {
        backoff: BackoffConfig {
            base: Duration::from_millis(1),
            cap: Duration::from_millis(20),
            seed: u64::from(id),
        },
        ..components::peer_network(&node_config(id), cluster, listen)
    }
}

/// Binds node `id`'s peer network ([`peer_config`]) on `addr`.
pub fn bind(cluster: Uuid, id: u32, addr: SocketAddr) -> (PeerNetwork, PeerInbox) {
    PeerNetwork::bind(peer_config(cluster, id, addr), &ShutdownSignal::detached()).unwrap()
}

/// Binds `addr` again (default backoff), waiting for the previous owner's sockets to close.
pub async fn rebind(cluster: Uuid, id: u32, addr: SocketAddr) -> (PeerNetwork, PeerInbox) {
    let start = Instant::now();
    loop {
        let cfg = components::peer_network(&node_config(id), cluster, addr);
        match PeerNetwork::bind(cfg, &ShutdownSignal::detached()) {
            Ok(net) => return net,
            Err(e) => {
                assert!(start.elapsed() < WAIT_MAX, "cannot bind {addr} again: {e}");
                glommio::timer::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

/// Binds the peer network of each of `ids` ([`bind`]) on an ephemeral loopback port.
pub fn bind_all(cluster: Uuid, ids: &[u32]) -> Vec<(PeerNetwork, PeerInbox)> {
    ids.iter()
        .map(|&id| bind(cluster, id, loopback()))
        .collect()
}

/// The voter set of `ids`, each reachable at the [`endpoint`] its peer network in `nets`
/// (in the same order) listens on.
pub fn voter_set(ids: &[u32], nets: &[(PeerNetwork, PeerInbox)]) -> VoterSet {
    VoterSet::new(
        ids.iter()
            .zip(nets)
            .map(|(&id, (net, _))| Voter {
                key: key(id),
                endpoints: vec![endpoint(net.local_addr())],
            })
            .collect(),
    )
    .unwrap()
}

/// A [`LogConfig`] with small segments, so the tests roll segments.
fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 256 << 10,
        ..LogConfig::default()
    }
}

/// The driver config of node `id` with its metadata log in `dir`, reachable at `addr`, in
/// the cluster of `voters`: [`raft_config`] timings and [`small_segments`].
pub fn driver_config(id: u32, dir: &Path, addr: SocketAddr, voters: &VoterSet) -> RaftDriverConfig {
    let mut node = node_config(id);
    node.metadata_log_dir = dir.to_path_buf();
    let replica = RaftReplica {
        me: key(id),
        endpoints: vec![endpoint(addr)],
        bootstrap_voters: voters.clone(),
        kraft_version: 1,
    };
    let mut config = components::raft_driver(&node, replica).unwrap();
    config.raft = raft_config();
    config.log = small_segments();
    // A snapshot lets the log prefix go at once (tests that snapshot want it gone).
    config.log_retention_bytes = Some(0);
    config
}

/// The controller service config of node `id` among `voters`, ticking every 20 ms.
pub fn service_config(id: u32, voters: &VoterSet) -> ControllerServiceConfig {
    let mut config = components::controller_service(&node_config(id), voters);
    config.controller_tick_interval_ms = 20;
    config.publish_committed_image = true;
    config
}

/// Sets `retention.ms` of topic `topic`.
pub fn set_retention(topic: &str, ms: u64) -> RequestBody {
    RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource: ConfigResource::topic(topic),
            configs: vec![AlterableConfig {
                key: "retention.ms".into(),
                op: AlterConfigOp::Set,
                value: ms.to_string(),
            }],
        }],
        validate_only: false,
    })
}

/// An IncrementalAlterConfigs setting the cluster-wide broker default `log.retention.ms` to
/// `value` (a write that needs no topic or broker).
pub fn set_cluster_default_retention(value: &str) -> RequestBody {
    RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource: ConfigResource {
                resource_type: corum_controller::records::ConfigResourceType::Broker,
                name: String::new(),
            },
            configs: vec![AlterableConfig {
                key: "log.retention.ms".into(),
                op: AlterConfigOp::Set,
                value: value.to_owned(),
            }],
        }],
        validate_only: false,
    })
}

/// How a test talks to a node's controller service: calls through the driver's call table,
/// and the service's own status (on its shard).
#[derive(Clone)]
pub struct ServiceView {
    raft: corum_node::RaftHandle,
    status: std::rc::Rc<std::cell::RefCell<corum_node::ServiceStatus>>,
}

impl ServiceView {
    pub async fn call(&self, frame: corum_node::RequestFrame) -> corum_node::ResponseFrame {
        self.raft.call(frame).await
    }

    pub fn status(&self) -> corum_node::ServiceStatus {
        self.status.borrow().clone()
    }

    /// The committed image through the status's `committed_end` (the tests' services publish
    /// it: [`service_config`]).
    pub fn image(&self) -> corum_controller::image::MetadataImage {
        self.status
            .borrow()
            .committed_image
            .clone()
            .expect("the test's service publishes its committed image")
    }
}

/// A Raft driver on a real disk and the controller service on its end of the port, both
/// spawned on the current executor.
pub struct ControllerNode {
    /// Stops the driver (and the service too when it was started with `service_follows_stop`).
    pub stop: ShutdownSignal,
    pub raft: corum_node::RaftHandle,
    pub service: ServiceView,
    pub driver_run: glommio::task::JoinHandle<Result<(), corum_node::DriverError>>,
    pub service_run:
        glommio::task::JoinHandle<Result<corum_controller::Controller, corum_node::ServiceError>>,
}

impl ControllerNode {
    /// Fires the stop signal, waits for the driver and the service and returns the service's
    /// controller (the service must follow the stop signal).
    pub async fn shut_down(self) -> corum_controller::Controller {
        self.stop.fire();
        self.driver_run.await.unwrap().unwrap();
        self.service_run.await.unwrap().unwrap()
    }
}

/// Starts node `id` with its log under `dir` and the controller's own settings (session
/// timeout, ...). With `service_follows_stop` the service stops on the same signal as the
/// driver; without it, the service runs until the driver's end of the port goes away (the tests
/// that check what a service returns when its driver goes away).
pub async fn start_controller_node_with(
    id: u32,
    dir: &Path,
    net: (PeerNetwork, PeerInbox),
    voters: &VoterSet,
    service_follows_stop: bool,
    controller_config: corum_controller::ControllerConfig,
) -> ControllerNode {
    let keep = |_: &mut RaftDriverConfig, _: &mut ControllerServiceConfig| {};
    start_controller_node_tweaked(
        id,
        dir,
        net,
        voters,
        service_follows_stop,
        controller_config,
        keep,
    )
    .await
}

/// [`start_controller_node_with`] with `tweak` applied to the driver's and the service's
/// configs.
pub async fn start_controller_node_tweaked(
    id: u32,
    dir: &Path,
    net: (PeerNetwork, PeerInbox),
    voters: &VoterSet,
    service_follows_stop: bool,
    controller_config: corum_controller::ControllerConfig,
    tweak: impl FnOnce(&mut RaftDriverConfig, &mut ControllerServiceConfig),
) -> ControllerNode {
    let addr = net.0.local_addr();
    let mut config = driver_config(id, dir, addr, voters);
    let mut service_config = service_config(id, voters);
    tweak(&mut config, &mut service_config);
    let stop = ShutdownSignal::detached();
    let (service_end, driver_end) = corum_node::port::local(corum_node::port::CAPACITY);
    let (driver, raft, _) = corum_node::RaftDriver::start(
        corum_engine::disk::UringDisk,
        config,
        net.0,
        net.1,
        driver_end,
        stop.clone(),
    )
    .await
    .expect("driver starts");
    let controller = corum_controller::Controller::new(controller_config, NodeId(id))
        .expect("the test's controller config is valid");
    let service_stop = if service_follows_stop {
        stop.clone()
    } else {
        ShutdownSignal::detached()
    };
    let service =
        corum_node::ControllerService::new(service_config, controller, service_end, service_stop);
    let view = ServiceView {
        raft: raft.clone(),
        status: service.status(),
    };
    ControllerNode {
        stop,
        raft,
        service: view,
        driver_run: glommio::spawn_local(driver.run()).detach(),
        service_run: glommio::spawn_local(service.run()).detach(),
    }
}

/// One node serving clients: a driver, the controller service on its committed stream, and
/// its RPC server.
pub struct RpcNode {
    pub id: u32,
    pub rpc_addr: SocketAddr,
    /// Where its Raft listener is (its voter endpoint).
    pub raft_addr: SocketAddr,
    /// The driver and the service (`raft`, `service`, `stop` read through `Deref`).
    pub node: ControllerNode,
    pub rpc_run: glommio::task::JoinHandle<corum_node::RpcServerStats>,
}

impl std::ops::Deref for RpcNode {
    type Target = ControllerNode;
    fn deref(&self) -> &ControllerNode {
        &self.node
    }
}

impl RpcNode {
    /// Starts node `id` with its log under `dir`, serving clients on `rpc`.
    pub async fn start(
        id: u32,
        dir: &Path,
        net: (PeerNetwork, PeerInbox),
        voters: &VoterSet,
        rpc: corum_node::RpcServer,
        controller: corum_controller::ControllerConfig,
    ) -> RpcNode {
        let raft_addr = net.0.local_addr();
        let n = start_controller_node_with(id, dir, net, voters, true, controller).await;
        let rpc_addr = rpc.local_addr();
        let rpc_run = glommio::spawn_local(rpc.run(n.raft.clone(), n.stop.clone())).detach();
        RpcNode {
            id,
            rpc_addr,
            raft_addr,
            node: n,
            rpc_run,
        }
    }

    /// Whether this node's controller is active (it leads and has replayed its epoch start).
    pub fn active(&self) -> bool {
        self.service.status().active_epoch.is_some()
    }

    /// Stops the node, waits for its tasks to end and returns its RPC server's counters.
    pub async fn stop(self) -> corum_node::RpcServerStats {
        self.node.shut_down().await;
        self.rpc_run.await.unwrap()
    }
}

/// Starts nodes 1, 2, 3 of `cluster` with logs under `tmp` and RPC servers taking requests of
/// up to `request_bytes_max`, waits for an active controller and returns the nodes and its
/// index. With `client_hints` the RPC servers know each other's client endpoints
/// (NotController names the leader's client address); without, hints name the leader's Raft
/// endpoint, which a client must not connect to.
pub async fn rpc_cluster(
    tmp: &Path,
    cluster: Uuid,
    client_hints: bool,
    request_bytes_max: u32,
    controller: corum_controller::ControllerConfig,
) -> (Vec<RpcNode>, usize) {
    let ids = [1u32, 2, 3];
    let nets: Vec<_> = bind_all(cluster, &ids);
    let mut servers: Vec<corum_node::RpcServer> = ids
        .iter()
        .map(|&id| {
            let config = corum_node::RpcServerConfig {
                request_bytes_max,
                ..components::rpc_server(&node_config(id), cluster)
            };
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
        nodes.push(RpcNode::start(id, &dir, net, &voters, rpc, controller.clone()).await);
    }
    wait_for("an active controller", || nodes.iter().any(RpcNode::active)).await;
    let l = nodes.iter().position(RpcNode::active).unwrap();
    (nodes, l)
}
