//! A whole controller node on the runtime's shards: what `corum run` starts.
//!
//! [`NodePlan::prepare`] does every check that needs no executor, on the calling thread, so a
//! bad configuration or directory fails before any shard starts: the directory is formatted
//! for this node (and this cluster, when the operator names it), the client listener exists,
//! the Raft, service and server settings are derived. [`run_node`] then starts the shards:
//!
//! | shard role  | runs                                                                     |
//! |-------------|--------------------------------------------------------------------------|
//! | worker      | peer network, [`RaftDriver`] (log on [`UringDisk`], the call table), [`RpcServer`], metrics endpoint ([`crate::metrics`], when `corum.metrics.listener` is set) |
//! | controller  | [`ControllerService`] alone on its (pinned) core                         |
//! | combined    | (one core) all of the above                                              |
//!
//! The service and the driver talk over one port ([`crate::port`]): a pair of local channels
//! on a combined shard, a pair of bounded cross-shard channels otherwise. Nothing else differs
//! between the placements.
//!
//! On a placement with more than one worker, the first worker runs the node and the others
//! stay idle (the metadata log is one stream; more workers would serve more client
//! connections, which no workload here needs yet).
//!
//! # Stopping
//!
//! SIGTERM/SIGINT (the runtime's shutdown) reaches every shard: the driver resigns leadership
//! (EndQuorumEpoch, so the next leader need not wait for a timeout), flushes and closes the log;
//! the service answers what waits `NotController`; the RPC server closes its connections after
//! answering what they have in flight. A fatal error on any shard (a log write or fsync error, a
//! committed batch the controller cannot apply) triggers the same shutdown everywhere and is
//! returned.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use corum_controller::control::cluster_control::RegisterControllerRequest;
use corum_controller::records::ControllerEndpointV1;
use corum_controller::{Controller, ControllerConfig};
use corum_engine::disk::{StdDisk, UringDisk};
use corum_raft::VoterSet;
use corum_runtime::tls::{TlsClient, TlsServer, TlsSettings};
use corum_runtime::{Placement, Runtime, ShardContext, ShardRole};
use corum_types::{NodeId, Uuid};

use crate::config::{components, HostPort, NodeConfig, SecurityProtocol};
use crate::connections::ConnectionGate;
use crate::dir_lock::DataDirLock;
use crate::driver::{RaftDriver, RaftDriverConfig, Recovered};
use crate::error::{ConfigError, NodeError, RuleError};
use crate::format::check_formatted;
use crate::forward::{ForwardConfig, NodeBackend};
use crate::kafka_server::KafkaServer;
use crate::meta_properties::MetaProperties;
use crate::metrics::{self, MetricsSources};
use crate::peer::{resolve, PeerNetwork, PeerNetworkConfig, PeerTls};
use crate::port::{self, DriverLink, ServiceLink};
use crate::protocol::LeaderHint;
use crate::registration;
use crate::rpc_server::{RpcServer, RpcServerConfig};
use crate::service::{ControllerService, ControllerServiceConfig};

pub type Result<T, E = NodeError> = std::result::Result<T, E>;

/// Everything a node needs, checked before any shard starts.
#[derive(Clone, Debug)]
pub struct NodePlan {
    pub config: NodeConfig,
    pub meta: MetaProperties,
    pub driver: RaftDriverConfig,
    pub service: ControllerServiceConfig,
    pub server: RpcServerConfig,
    pub peer: PeerNetworkConfig,
    pub controller: ControllerConfig,
    /// Where clients connect (`corum.client.listener.name`).
    pub client_addr: SocketAddr,
    /// The Kafka listeners (`corum.kafka.listener.names`): name and address to bind.
    pub kafka_listeners: Vec<(String, SocketAddr)>,
    /// The TLS settings of each listener mapped to SSL, by listener name (their files load:
    /// checked by [`NodePlan::prepare`]).
    pub tls: BTreeMap<String, TlsSettings>,
    /// The data directory's lock, held from the check until the node (every clone of the
    /// plan) is gone.
    pub dir_lock: Arc<DataDirLock>,
}

/// A listener's TLS server side, or a config error naming the key whose file or value does
/// not load.
fn tls_server(config: &NodeConfig, listener: &str, settings: &TlsSettings) -> Result<TlsServer> {
    let server = TlsServer::new(listener, settings.clone()).map_err(|e| {
        NodeError::Config(ConfigError::Tls {
            key: crate::config::ssl::key_of_tls_error(config, listener, &e),
            reason: e.to_string(),
        })
    })?;
    Ok(
        if config
            .controller_listener_names
            .iter()
            .any(|n| n == listener)
        {
            server.with_identity_check(crate::peer::controller_identity_check())
        } else {
            server
        },
    )
}

/// A listener's TLS client side (controllers dialing each other, a standby forwarding to the
/// leader's client listener): the listener's truststore, presenting its keystore.
fn tls_client(config: &NodeConfig, listener: &str, settings: &TlsSettings) -> Result<TlsClient> {
    if settings.truststore.is_none() {
        return Err(NodeError::Config(ConfigError::Tls {
            key: config.ssl_value(listener, "ssl.truststore.location").0,
            reason: format!("listener {listener}: controllers connect to this listener on each other (a standby forwards writes to the leader's) and need the CAs to check its certificate"),
        }));
    }
    TlsClient::new(settings.clone()).map_err(|e| {
        NodeError::Config(ConfigError::Tls {
            key: crate::config::ssl::key_of_tls_error(config, listener, &e),
            reason: e.to_string(),
        })
    })
}

/// Where to listen for `endpoint` (an empty host means every interface).
fn listen_addr(endpoint: &HostPort) -> Result<SocketAddr> {
    Ok(if endpoint.host.is_empty() {
        SocketAddr::from(([0, 0, 0, 0], endpoint.port))
    } else {
        resolve(&endpoint.host, endpoint.port)?
    })
}

impl NodePlan {
    /// Checks the directory and the configuration: formatted for `config.node_id` (and for
    /// `cluster_id` when given), a client listener that is not the controller listener,
    /// listeners that resolve; and derives every component's settings
    /// ([`crate::config::components`]).
    pub fn prepare(config: NodeConfig, cluster_id: Option<Uuid>) -> Result<NodePlan> {
        config.validate()?;
        let client = config.client_listener().ok_or_else(|| {
            NodeError::Config(ConfigError::Invalid {
                key: "listeners",
                reason: RuleError::NoClientListener {
                    name: config.client_listener_name.clone(),
                },
            })
        })?;
        let client_addr = listen_addr(&client.endpoint)?;
        let raft_addr = listen_addr(&config.controller_listener().endpoint)?;
        let kafka_listeners = config
            .kafka_listeners()
            .map(|l| Ok((l.name.clone(), listen_addr(&l.endpoint)?)))
            .collect::<Result<Vec<_>>>()?;
        let mut tls = BTreeMap::new();
        for l in &config.listeners {
            if let Some(settings) = config.listener_tls(&l.name)? {
                // Load the files now: a node that cannot serve TLS does not start.
                tls_server(&config, &l.name, &settings)?;
                if l.name == config.controller_listener().name
                    || l.name == config.client_listener_name
                {
                    tls_client(&config, &l.name, &settings)?;
                }
                tls.insert(l.name.clone(), settings);
            }
        }
        // Before any shard runs (outside glommio): the blocking disk, read-only.
        let (meta, bootstrap) = futures_lite::future::block_on(check_formatted(
            &StdDisk::read_only(),
            &config,
            cluster_id,
        ))?;
        let dir_lock = Arc::new(DataDirLock::acquire(&config.metadata_log_dir)?);
        let replica = components::raft_replica(&config, meta.directory_id, Some(&bootstrap))?;
        let driver = components::raft_driver(&config, replica)?;
        let service = components::controller_service(&config, &driver.bootstrap_voters);
        let server = components::rpc_server(&config, meta.cluster_id);
        server.validate()?;
        let peer = components::peer_network(&config, meta.cluster_id, raft_addr);
        peer.validate()?;
        let mut controller = components::controller(&config)?;
        // What `corum format` decided (`--release-version`, `--feature`), checked when read.
        controller.bootstrap_features = bootstrap.features.clone();
        Ok(NodePlan {
            config,
            meta,
            driver,
            service,
            server,
            peer,
            controller,
            client_addr,
            kafka_listeners,
            tls,
            dir_lock,
        })
    }

    /// The initial voter set (before any VotersRecord in the log).
    pub fn bootstrap_voters(&self) -> &VoterSet {
        &self.driver.bootstrap_voters
    }
}

/// What a node reports once its sockets are bound and its log recovered.
#[derive(Clone, Debug)]
pub struct NodeReady {
    pub node_id: NodeId,
    pub raft_addr: SocketAddr,
    pub client_addr: SocketAddr,
    /// Each Kafka listener's name and bound address.
    pub kafka_addrs: Vec<(String, SocketAddr)>,
    /// Where Prometheus scrapes `/metrics`, when `corum.metrics.listener` is set.
    pub metrics_addr: Option<SocketAddr>,
    pub recovered: Recovered,
}

/// Called once, on the worker shard, when the node is ready.
pub type OnReady = Box<dyn FnOnce(NodeReady) + Send>;

/// Starts the shards of `placement` and runs the node until the runtime's shutdown (see the
/// module doc). Returns the first fatal error of any shard.
pub fn run_node(
    plan: NodePlan,
    placement: Placement,
    runtime: Runtime,
    on_ready: OnReady,
) -> Result<()> {
    let plan = Arc::new(plan);
    let split = placement.shards().len() > 1;
    let (service_link, driver_link) = if split {
        let (s, d) = port::cross_shard(port::CAPACITY);
        (Some(s), Some(d))
    } else {
        (None, None)
    };
    let node_worker = placement
        .workers()
        .next()
        .unwrap_or_else(|| placement.controller());
    let driver_link = Mutex::new(driver_link);
    let service_link = Mutex::new(service_link);
    let on_ready = Mutex::new(Some(on_ready));
    let outcomes = runtime.run(|spec| {
        let plan = plan.clone();
        let role = spec.role;
        let (w, c, ready) = match role {
            ShardRole::Worker if spec.id == node_worker => (
                driver_link.lock().expect("not poisoned").take(),
                None,
                on_ready.lock().expect("not poisoned").take(),
            ),
            ShardRole::Combined => (None, None, on_ready.lock().expect("not poisoned").take()),
            ShardRole::Controller => (
                None,
                service_link.lock().expect("not poisoned").take(),
                None,
            ),
            ShardRole::Worker => (None, None, None),
        };
        move |ctx: ShardContext| async move {
            let result = match (role, c, ready) {
                (ShardRole::Controller, Some(ends), _) => controller_shard(&ctx, &plan, ends).await,
                (ShardRole::Worker | ShardRole::Combined, _, Some(ready)) => {
                    worker_shard(&ctx, &plan, w, ready).await
                }
                // An extra worker: nothing to run (see the module doc).
                _ => Ok(()),
            };
            if let Err(e) = &result {
                tracing::error!(shard = %ctx.id(), error = %e, "shard failed; stopping the node");
                ctx.global_shutdown().trigger();
            }
            result
        }
    })?;
    let mut first_error = None;
    for outcome in outcomes {
        match outcome.result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(NodeError::Runtime(e));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The worker shard: network, driver, RPC server; the service too on a combined shard.
async fn worker_shard(
    ctx: &ShardContext,
    plan: &NodePlan,
    link: Option<DriverLink>,
    on_ready: OnReady,
) -> Result<()> {
    let stop = ctx.shutdown().clone();
    let config = &plan.config;
    let server_tls = |name: &str| -> Result<Option<Rc<TlsServer>>> {
        plan.tls
            .get(name)
            .map(|s| tls_server(config, name, s).map(Rc::new))
            .transpose()
    };
    let client_tls = |name: &str| -> Result<Option<Rc<TlsClient>>> {
        plan.tls
            .get(name)
            .map(|s| tls_client(config, name, s).map(Rc::new))
            .transpose()
    };
    let controller_name = &config.controller_listener().name;
    let peer_tls = match (server_tls(controller_name)?, client_tls(controller_name)?) {
        (Some(server), Some(client)) => Some(PeerTls { server, client }),
        _ => None,
    };
    let (network, inbox) = PeerNetwork::bind_tls(plan.peer, &stop, peer_tls)?;
    let raft_addr = network.local_addr();
    let mut server = RpcServer::bind(plan.client_addr, plan.server.clone())?;
    // One count of client-facing connections for the client and Kafka listeners
    // (`max.connections`, `max.connections.per.ip`).
    let gate = ConnectionGate::new(plan.server.limits.clone());
    server.set_gate(gate.clone());
    server.set_tls(server_tls(&config.client_listener_name)?);
    server.set_acls(plan.service.acls.clone());
    let forward_tls = client_tls(&config.client_listener_name)?;
    server.set_raft_endpoints(plan.service.leader_endpoints.clone());
    let client_addr = server.local_addr();
    let host = host_name();
    let mut kafka_servers = Vec::new();
    for (name, addr) in &plan.kafka_listeners {
        let advertised = plan
            .config
            .advertised(name, 0, &host)
            .expect("a Kafka listener is one of `listeners`");
        let config =
            components::kafka_server(&plan.config, plan.meta.cluster_id, name, &advertised);
        let mut kafka = KafkaServer::bind(*addr, config)?;
        kafka.set_tls(server_tls(name)?);
        kafka.set_sasl(
            plan.config
                .listener_sasl(name)
                .map_err(NodeError::Config)?
                .map(Rc::new),
        );
        kafka.set_gate(gate.clone());
        kafka_servers.push(kafka);
    }
    let kafka_addrs: Vec<(String, SocketAddr)> = plan
        .kafka_listeners
        .iter()
        .zip(&kafka_servers)
        .map(|((name, _), s)| (name.clone(), s.local_addr()))
        .collect();
    let metrics_listener = match &plan.config.metrics_listener {
        Some(hp) => {
            let addr = resolve(&hp.host, hp.port)?;
            let listener = metrics::bind(addr).map_err(|e| {
                NodeError::Config(ConfigError::Invalid {
                    key: "corum.metrics.listener",
                    reason: RuleError::CannotListen {
                        addr,
                        kind: e.kind(),
                    },
                })
            })?;
            Some(listener)
        }
        None => None,
    };
    let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
    // This node's own hint names its client endpoint (the others' are unknown: a client
    // follows a hint it cannot reach by trying its other bootstrap servers).
    server.set_client_endpoints([LeaderHint {
        id: plan.config.node_id,
        host: if client_addr.ip().is_unspecified() {
            "127.0.0.1".to_owned()
        } else {
            client_addr.ip().to_string()
        },
        port: client_addr.port(),
    }]);
    let (driver_end, service) = match link {
        Some(link) => (link.connect().await, None),
        None => {
            let (service_end, driver_end) = port::local(port::CAPACITY);
            let service = ControllerService::new(
                plan.service.clone(),
                new_controller(plan),
                service_end,
                stop.clone(),
            );
            (driver_end, Some(service))
        }
    };
    let (driver, raft, recovered) = RaftDriver::start(
        UringDisk,
        plan.driver.clone(),
        network,
        inbox,
        driver_end,
        stop.clone(),
    )
    .await?;
    tracing::info!(
        node = %plan.config.node_id,
        snapshot_end = %recovered.snapshot.map_or(corum_types::LogOffset::ZERO, |s| s.end_offset),
        log_start = %recovered.log_start_offset,
        log_end = %recovered.log_end_offset,
        batches = recovered.batches,
        torn_tail_bytes = recovered.torn_tail_bytes,
        "metadata log recovered"
    );
    let service_task = service.map(|s| glommio::spawn_local(s.run()));
    on_ready(NodeReady {
        node_id: plan.config.node_id,
        raft_addr,
        client_addr,
        kafka_addrs: kafka_addrs.clone(),
        metrics_addr,
        recovered,
    });
    if let Some(listener) = metrics_listener {
        let sources = MetricsSources {
            raft: raft.clone(),
            rpc: server.stats(),
            kafka: kafka_servers
                .iter()
                .map(|k| (k.listener_name().to_owned(), k.stats()))
                .collect(),
        };
        glommio::spawn_local(metrics::serve(listener, sources, stop.clone())).detach();
    }
    let backend = Rc::new(
        NodeBackend::new(
            raft.clone(),
            ForwardConfig {
                cluster_id: plan.meta.cluster_id,
                node_id: plan.config.node_id,
                request_timeout_ms: request_timeout_ms(plan),
                request_bytes_max: plan.config.socket_request_bytes_max,
                client_listener_name: plan.config.client_listener_name.clone(),
            },
        )
        .with_acls(plan.service.acls.clone())
        .with_tls(forward_tls),
    );
    let registration = registration_request(plan, &host, raft_addr, client_addr, &kafka_addrs);
    glommio::spawn_local(registration::keep_registered(
        backend.clone(),
        registration,
        request_timeout_ms(plan),
        stop.clone(),
    ))
    .detach();
    let kafka_tasks: Vec<_> = kafka_servers
        .into_iter()
        .map(|k| glommio::spawn_local(k.run(backend.clone(), stop.clone())))
        .collect();
    let server_task = glommio::spawn_local(server.run(raft, stop.clone()));
    let driver_result = driver.run().await;
    if driver_result.is_err() {
        // The server and the service stop on the same signal.
        ctx.global_shutdown().trigger();
    }
    let service_result = match service_task {
        Some(t) => t.await.map(|_| ()).map_err(NodeError::Service),
        None => Ok(()),
    };
    for task in kafka_tasks {
        let stats = task.await;
        tracing::info!(
            accepted = stats.accepted,
            requests = stats.requests,
            closed_on_bad_request = stats.closed_on_bad_request,
            "Kafka listener stopped"
        );
    }
    tracing::info!(
        forwarded = backend.forwarded(),
        "requests forwarded to the leader"
    );
    let stats = server_task.await;
    tracing::info!(
        accepted = stats.accepted,
        refused = stats.refused,
        "client server stopped"
    );
    driver_result?;
    service_result
}

fn request_timeout_ms(plan: &NodePlan) -> u32 {
    u32::try_from(plan.config.controller_request_timeout_ms).unwrap_or(u32::MAX)
}

/// This node's registration: every listener at its advertised endpoint (the bound port where
/// the configuration says 0).
fn registration_request(
    plan: &NodePlan,
    host: &str,
    raft_addr: SocketAddr,
    client_addr: SocketAddr,
    kafka_addrs: &[(String, SocketAddr)],
) -> RegisterControllerRequest {
    let config = &plan.config;
    let bound = |name: &str| -> u16 {
        if name == config.controller_listener().name {
            raft_addr.port()
        } else if name == config.client_listener_name {
            client_addr.port()
        } else {
            kafka_addrs
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, a)| a.port())
        }
    };
    let end_points = config
        .listeners
        .iter()
        .filter_map(|l| {
            let advertised = config.advertised(&l.name, bound(&l.name), host)?;
            Some(ControllerEndpointV1 {
                name: l.name.clone(),
                host: advertised.host,
                port: advertised.port,
                security_protocol: config
                    .security_protocol(&l.name)
                    .map_or(0, SecurityProtocol::code),
            })
        })
        .filter(|e| e.port != 0)
        .collect();
    RegisterControllerRequest {
        controller_id: config.node_id,
        incarnation_id: registration::incarnation_id(),
        end_points,
        features: corum_controller::control::feature_control::supported_features(),
    }
}

/// This machine's host name: what an empty or wildcard listener host advertises.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(name) if rc == 0 && !name.is_empty() => name.to_owned(),
        _ => "localhost".to_owned(),
    }
}

/// A fresh (standby) controller with the node's settings.
fn new_controller(plan: &NodePlan) -> Controller {
    Controller::new(plan.controller.clone(), plan.config.node_id)
        .expect("NodePlan::prepare validated the controller's config")
}

/// The controller shard: the service alone, on its end of the port.
async fn controller_shard(ctx: &ShardContext, plan: &NodePlan, link: ServiceLink) -> Result<()> {
    let controller = new_controller(plan);
    let port = link.connect().await;
    let service = ControllerService::new(
        plan.service.clone(),
        controller,
        port,
        ctx.shutdown().clone(),
    );
    service.run().await.map(|_| ()).map_err(NodeError::Service)
}
