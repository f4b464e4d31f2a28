//! What each component takes from the node's configuration: one function per component
//! configuration, and the only place one is built from a [`NodeConfig`]. A component's config
//! type has no defaults of its own: every value comes from a key of the table
//! ([`super::CONFIG_KEYS`], whose `readers` column names the components below), is derived
//! from keys, or is one of the fixed values below (plumbing between the node's own tasks, not
//! a setting). Tests build components from [`NodeConfig::for_tests`], so they run the
//! table's defaults too.
//!
//! | component config                          | function                 |
//! |-------------------------------------------|--------------------------|
//! | [`corum_raft::Config`]                     | [`raft`]                 |
//! | [`ControllerConfig`]                       | [`controller`]           |
//! | [`LogConfig`]                              | [`log`]                  |
//! | [`RuntimeConfig`] and [`PlacementSpec`]    | [`runtime`], [`placement`] |
//! | [`RaftDriverConfig`]                       | [`raft_replica`], [`raft_driver`] |
//! | [`ControllerServiceConfig`]                | [`controller_service`]   |
//! | [`PeerNetworkConfig`]                      | [`peer_network`]         |
//! | [`RpcServerConfig`]                        | [`rpc_server`]           |
//!
//! A rule a component's own `validate` has is also a rule of [`NodeConfig::validate`], under
//! the key to change; when a component still refuses a configuration (one changed by hand),
//! the error names the key that sets the refused field.

use std::net::SocketAddr;
use std::time::Duration;

use corum_controller::ControllerConfig;
use corum_engine::log::LogConfig;
use corum_raft::{ConfigField, Endpoint, ReplicaKey, Voter, VoterSet};
use corum_runtime::placement::format_core_list;
use corum_runtime::transport::ConnectionConfig;
use corum_runtime::{BackoffConfig, CoreId, PlacementSpec, RuntimeConfig};
use corum_types::Uuid;

use super::node_config::{NodeConfig, NODE_SHARDS_MAX};
use super::values::{is_wildcard_host, HostPort, QuorumVoter};
use crate::bootstrap::BootstrapCheckpoint;
use crate::connections::ConnectionLimits;
use crate::driver::RaftDriverConfig;
use crate::error::{ConfigError, ConfigSource, RuleError, StorageError, ValueError};
use crate::kafka_server::KafkaServerConfig;
use crate::peer::{PeerNetworkConfig, ENVELOPE_OVERHEAD_BYTES};
use crate::raft_config::{bootstrap_voter_set, leader_endpoints};
use crate::rpc_server::RpcServerConfig;
use crate::service::ControllerServiceConfig;

type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// Period of the Raft driver's `tick`: Raft's timeouts resolve to it.
pub const RAFT_TICK_INTERVAL_MS: u64 = 5;
/// Proposals queued for the Raft driver's loop before proposers wait.
pub const RAFT_PROPOSAL_QUEUE_CAPACITY: usize = 1024;
/// On shutdown, how long a resigning leader waits for its EndQuorumEpoch to reach the peers'
/// sockets.
pub const RAFT_RESIGN_SEND_WAIT_MS_MAX: u64 = 500;
/// The controller's periodic tick (lease expiry, fencing) runs every
/// `broker.heartbeat.interval.ms`, but at least this often: a lease expires at most this late.
pub const SERVICE_TICK_INTERVAL_MS_MAX: u64 = 100;
/// Requests the controller service takes from its queue for one batch.
pub const SERVICE_BATCH_REQUESTS_MAX: usize = 1024;
/// Raft messages queued per peer before sends drop (Raft resends on its own timeouts).
pub const PEER_OUTBOUND_QUEUE_CAPACITY: usize = 1024;
/// Inbound Raft messages queued for the driver before the peer connections stop reading.
pub const PEER_INBOUND_QUEUE_CAPACITY: usize = 4096;
/// A Raft message not written to its peer's socket within this drops the connection.
pub const PEER_SEND_TIMEOUT_MS: u64 = 2_000;

fn invalid(key: &'static str, reason: RuleError) -> ConfigError {
    ConfigError::Invalid { key, reason }
}

fn usize_of(key: &'static str, value: u64) -> Result<usize> {
    usize::try_from(value).map_err(|_| invalid(key, RuleError::AddressSpace { value }))
}

/// The node key that sets a field of [`corum_raft::Config`].
pub fn raft_key(field: ConfigField) -> &'static str {
    match field {
        ConfigField::ElectionTimeoutMs => "controller.quorum.election.timeout.ms",
        ConfigField::FetchTimeoutMs => "controller.quorum.fetch.timeout.ms",
        ConfigField::ElectionBackoffMaxMs => "controller.quorum.election.backoff.max.ms",
        ConfigField::HeartbeatIntervalMs => "corum.raft.heartbeat.interval.ms",
        ConfigField::HwmLingerMs => "corum.raft.high.watermark.linger.ms",
        ConfigField::RequestTimeoutMs => "controller.quorum.request.timeout.ms",
        ConfigField::AppendInflightCountMax => "corum.raft.append.inflight.count.max",
        ConfigField::AppendInflightBytesMax => "corum.raft.append.inflight.bytes.max",
        ConfigField::BatchBytesMax => "corum.raft.batch.bytes.max",
        ConfigField::FetchWaitMaxMs => "corum.raft.fetch.wait.max.ms",
        ConfigField::ObserverFetchIntervalMs => "corum.raft.observer.fetch.interval.ms",
        ConfigField::SnapshotChunkBytesMax => "corum.raft.snapshot.chunk.bytes.max",
        ConfigField::SnapshotBytesMax => "corum.raft.snapshot.bytes.max",
        ConfigField::RetryBackoffMs => "controller.quorum.retry.backoff.ms",
        ConfigField::PayloadCacheBytesMax => "corum.raft.payload.cache.bytes.max",
    }
}

/// The Raft core's configuration, validated by [`corum_raft::Config::validate`]; a rule it
/// breaks is reported under the key of the field to change ([`raft_key`]).
pub fn raft(config: &NodeConfig) -> Result<corum_raft::Config> {
    let raft = corum_raft::Config {
        election_timeout_ms: config.election_timeout_ms,
        fetch_timeout_ms: config.fetch_timeout_ms,
        election_backoff_max_ms: config.election_backoff_max_ms,
        heartbeat_interval_ms: config.raft_heartbeat_interval_ms,
        hwm_linger_ms: config.raft_hwm_linger_ms,
        request_timeout_ms: config.quorum_request_timeout_ms,
        append_inflight_count_max: usize_of(
            "corum.raft.append.inflight.count.max",
            config.raft_append_inflight_count_max.into(),
        )?,
        append_inflight_bytes_max: usize_of(
            "corum.raft.append.inflight.bytes.max",
            config.raft_append_inflight_bytes_max,
        )?,
        batch_bytes_max: usize_of(
            "corum.raft.batch.bytes.max",
            config.raft_batch_bytes_max.into(),
        )?,
        fetch_wait_max_ms: config.raft_fetch_wait_ms_max,
        observer_fetch_interval_ms: config.raft_observer_fetch_interval_ms,
        snapshot_chunk_bytes_max: usize_of(
            "corum.raft.snapshot.chunk.bytes.max",
            config.raft_snapshot_chunk_bytes_max.into(),
        )?,
        snapshot_bytes_max: config.raft_snapshot_bytes_max,
        retry_backoff_ms: config.quorum_retry_backoff_ms,
        auto_join: config.quorum_auto_join_enable,
        payload_cache_bytes_max: usize_of(
            "corum.raft.payload.cache.bytes.max",
            config.raft_payload_cache_bytes_max,
        )?,
    };
    raft.validate()
        .map_err(|e| invalid(raft_key(e.field()), RuleError::Raft(e)))?;
    Ok(raft)
}

/// The node key of a value the controller names in its [`corum_controller::ConfigError`]:
/// Kafka's keys as they are, its own limits without our `corum.controller.` prefix.
fn controller_key(name: &'static str) -> &'static str {
    match name {
        "partitions.per.topic.max" => "corum.controller.partitions.per.topic.max",
        "replication.factor.max" => "corum.controller.replication.factor.max",
        "records.per.batch.max" => "corum.controller.records.per.batch.max",
        "producer.id.block.size" => "corum.controller.producer.id.block.size",
        "seed" => "corum.controller.seed",
        other => other,
    }
}

/// The controller state machine's configuration, validated by [`ControllerConfig::validate`].
pub fn controller(config: &NodeConfig) -> Result<ControllerConfig> {
    let c = ControllerConfig {
        session_timeout_ms: config.broker_session_timeout_ms,
        heartbeat_interval_ms: config.broker_heartbeat_interval_ms,
        default_partitions: config.num_partitions,
        default_replication_factor: config.default_replication_factor,
        min_insync_replicas: config.min_insync_replicas,
        partitions_per_topic_max: config.controller_partitions_per_topic_max,
        replication_factor_max: config.controller_replication_factor_max,
        records_per_batch_max: usize_of(
            "corum.controller.records.per.batch.max",
            config.controller_records_per_batch_max.into(),
        )?,
        producer_id_block_size: config.controller_producer_id_block_size,
        seed: config.controller_seed,
        // What the node was formatted with replaces this (`NodePlan::prepare`).
        bootstrap_features: corum_controller::control::feature_control::default_bootstrap_features(
        ),
    };
    c.validate().map_err(|e| {
        let corum_controller::ConfigError::Invalid { name, .. } = e;
        invalid(controller_key(name), RuleError::Controller(e))
    })?;
    Ok(c)
}

/// The metadata log's configuration: segments of `metadata.log.segment.bytes`, frames and
/// buffers big enough for `corum.raft.batch.bytes.max`, `corum.log.durable.write.bytes.max`;
/// the rest is the log engine's own tuning ([`LogConfig::default`]: index interval, prefill,
/// reuse of free segments, the in-memory tail), which no key sets.
pub fn log(config: &NodeConfig) -> Result<LogConfig> {
    let engine = LogConfig::default();
    let frame_bytes_max = corum_engine::record::frame_bytes_for_payload(usize_of(
        "corum.raft.batch.bytes.max",
        config.raft_batch_bytes_max.into(),
    )?);
    let log = LogConfig {
        segment_bytes: config.metadata_log_segment_bytes,
        frame_bytes_max: u32::try_from(frame_bytes_max)
            .unwrap_or(u32::MAX)
            .max(engine.frame_bytes_max),
        buffered_bytes_max: engine.buffered_bytes_max.max(4 * frame_bytes_max),
        durable_write_bytes_max: usize_of(
            "corum.log.durable.write.bytes.max",
            config.log_durable_write_bytes_max,
        )?,
        ..engine
    };
    log.validate().map_err(|e| {
        invalid(
            "metadata.log.segment.bytes",
            RuleError::Log {
                reason: e.to_string(),
            },
        )
    })?;
    Ok(log)
}

/// The shards' executor settings: `corum.spin.before.park.us`; the rest is the runtime's own
/// tuning ([`RuntimeConfig::default`]).
pub fn runtime(config: &NodeConfig) -> Result<RuntimeConfig> {
    let runtime = RuntimeConfig {
        spin_before_park_us: config.spin_before_park_us,
        ..RuntimeConfig::default()
    };
    runtime.validate().map_err(|e| {
        invalid(
            "corum.spin.before.park.us",
            RuleError::Runtime {
                reason: e.to_string(),
            },
        )
    })?;
    Ok(runtime)
}

/// The placement `corum.cores`, `corum.controller.core` and `corum.no.pin` ask for, each
/// overridden by its command-line flag in `flags` (`--cores`, `--controller-core`,
/// `--no-pin`), with the core set decided: a node runs at most [`NODE_SHARDS_MAX`] shards
/// (a worker and the controller), so a set of more cores is refused (their shards would run
/// nothing), and when no set is named it is two of the `online` cores: the controller core
/// (`corum.controller.core`, or the highest) and the lowest other one; one if only one is
/// online. Whether the cores exist is [`PlacementSpec::resolve`]'s check.
pub fn placement(
    config: &NodeConfig,
    flags: &PlacementSpec,
    online: &[CoreId],
) -> Result<PlacementSpec> {
    let from_config = PlacementSpec {
        cores: config
            .cores
            .as_ref()
            .map(|c| c.0.iter().map(|&n| CoreId(n as usize)).collect()),
        controller_core: config.controller_core.map(|n| CoreId(n as usize)),
        no_pin: config.no_pin,
    };
    let mut spec = from_config.overridden_by(flags);
    match &spec.cores {
        Some(cores) => {
            let mut distinct = cores.clone();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.len() > NODE_SHARDS_MAX {
                // The configuration's own value was refused when it was parsed: this is the
                // flag's.
                return Err(ConfigError::InvalidValue {
                    key: "corum.cores",
                    value: format_core_list(cores),
                    at: ConfigSource::Flag("--cores"),
                    reason: ValueError::TooManyCores {
                        count: distinct.len(),
                        max: NODE_SHARDS_MAX,
                    },
                });
            }
        }
        None => {
            let controller = spec
                .controller_core
                .or_else(|| online.iter().max().copied());
            let worker = online
                .iter()
                .filter(|c| Some(**c) != controller)
                .min()
                .copied();
            let cores: Vec<CoreId> = worker.into_iter().chain(controller).collect();
            if !cores.is_empty() {
                spec.cores = Some(cores);
            }
        }
    }
    Ok(spec)
}

/// Who this replica is to Raft and the voter set it starts from, before any VotersRecord: the
/// inputs of [`raft_driver`] that come from the node's files rather than its configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftReplica {
    /// `RaftCore::new`'s `me`: the node id and the directory id.
    pub me: ReplicaKey,
    /// `RaftCore::new`'s `endpoints`: the controller listener.
    pub endpoints: Vec<Endpoint>,
    /// The dynamic quorum's bootstrap checkpoint (kraft.version 1), or
    /// `controller.quorum.voters` (kraft.version 0).
    pub bootstrap_voters: VoterSet,
    /// KIP-853's `kraft.version`: 1 with the bootstrap checkpoint's voters, 0 with
    /// `controller.quorum.voters` (the voter set never changes: [`corum_raft::Restore`]).
    pub kraft_version: u16,
}

/// This replica for a formatted node: the voter set from the dynamic quorum's `bootstrap`
/// checkpoint when it has one (kraft.version 1), or else from `controller.quorum.voters`. The
/// replica always goes by its id and `directory_id` (from `meta.properties`): a dynamic quorum
/// tells replicas apart by it, a static one names voters without it (any directory of that id
/// is the voter, as in Kafka) but its leader learns it from each voter's requests, which an
/// upgrade to kraft.version 1 writes into the voter set. A static voter's own endpoint is its
/// `controller.quorum.voters` entry, the address every peer dials (its listener may be a
/// wildcard): so the voter set the upgrade writes is one its voters agree with, and none of
/// them sends an UpdateVoter for a mere spelling of its listener.
pub fn raft_replica(
    config: &NodeConfig,
    directory_id: Uuid,
    bootstrap: Option<&BootstrapCheckpoint>,
) -> crate::Result<RaftReplica> {
    let dynamic = match bootstrap {
        Some(b) => {
            bootstrap_voter_set(b).map_err(|reason| StorageError::InvalidBootstrap { reason })?
        }
        None => None,
    };
    let (me, mut endpoints) = local_replica(config, directory_id);
    let kraft_version = u16::from(dynamic.is_some());
    let bootstrap_voters = match dynamic {
        Some(v) => v,
        // A static quorum upgraded to kraft.version 1 whose nodes dropped
        // `controller.quorum.voters` for `controller.quorum.bootstrap.servers`: its voters
        // are in its log or snapshot (the core refuses to start if they are not).
        None if config.quorum_voters.is_empty() => VoterSet::default(),
        None => static_voter_set(config)?,
    };
    match bootstrap_voters.get(me.id) {
        Some(v) if kraft_version == 0 => endpoints = v.endpoints.clone(),
        // Announced to the other voters (UpdateVoter, AddVoter): it must reach this node.
        _ => {
            if let Some(e) = endpoints.iter().find(|e| is_wildcard_host(&e.host)) {
                return Err(invalid(
                    "advertised.listeners",
                    RuleError::NotReachable {
                        listener: format!("{}://{}:{}", e.listener, e.host, e.port),
                    },
                )
                .into());
            }
        }
    }
    Ok(RaftReplica {
        me,
        endpoints,
        bootstrap_voters,
        kraft_version,
    })
}

/// The Raft driver's configuration for `replica`: the Raft core's ([`raft`]) and the log's
/// ([`log`]) settings, `metadata.log.dir`, the controller listener's name, the retention of
/// `metadata.max.retention.bytes`, `corum.raft.uncommitted.records.max`, the call table's
/// request deadlines (`corum.controller.request.timeout.ms` and `.max.ms`) and
/// `corum.controller.queue.capacity` queued calls; the seed mixes
/// `corum.controller.seed` with the node id, so voters draw different election jitter.
pub fn raft_driver(config: &NodeConfig, replica: RaftReplica) -> Result<RaftDriverConfig> {
    let RaftReplica {
        me,
        endpoints,
        bootstrap_voters,
        kraft_version,
    } = replica;
    Ok(RaftDriverConfig {
        data_dir: config.metadata_log_dir.clone(),
        raft: raft(config)?,
        me,
        endpoints,
        bootstrap_voters,
        kraft_version,
        listener_name: config.controller_listener().name.clone(),
        bootstrap_servers: config
            .quorum_bootstrap_servers
            .iter()
            .map(|s| (s.host.clone(), s.port))
            .collect(),
        log: log(config)?,
        tick_interval_ms: RAFT_TICK_INTERVAL_MS,
        seed: config.controller_seed ^ u64::from(me.id.get()).rotate_left(32),
        proposal_queue_capacity: RAFT_PROPOSAL_QUEUE_CAPACITY,
        uncommitted_records_max: config.raft_uncommitted_records_max,
        call_queue_capacity: usize::try_from(config.controller_queue_capacity)
            .expect("u32 fits in usize"),
        request_timeout_default_ms: config.controller_request_timeout_ms,
        request_timeout_max_ms: config.controller_request_timeout_ms_max,
        resign_send_wait_ms_max: RAFT_RESIGN_SEND_WAIT_MS_MAX,
        log_retention_bytes: u64::try_from(config.metadata_retention_bytes_max).ok(),
    })
}

/// The controller service's configuration: leader hints from `voters` on the controller
/// listener, a tick every `broker.heartbeat.interval.ms` but at least every
/// [`SERVICE_TICK_INTERVAL_MS_MAX`], batches of at most `corum.controller.records.per.batch.max`
/// records and seven eighths of `corum.raft.batch.bytes.max` (the rest is left for the
/// batch's own archive overhead, which a group's sum of per-request encodings does not count),
/// a snapshot every `metadata.log.max.record.bytes.between.snapshots`, a NoOp after
/// `metadata.max.idle.interval.ms` of quiet.
pub fn controller_service(config: &NodeConfig, voters: &VoterSet) -> ControllerServiceConfig {
    let raft_batch = usize::try_from(config.raft_batch_bytes_max).expect("u32 fits in usize");
    ControllerServiceConfig {
        node_id: config.node_id,
        leader_endpoints: leader_endpoints(voters, &config.controller_listener().name),
        controller_listener_name: config.controller_listener().name.clone(),
        controller_tick_interval_ms: config
            .broker_heartbeat_interval_ms
            .min(SERVICE_TICK_INTERVAL_MS_MAX),
        batch_records_max: usize::try_from(config.controller_records_per_batch_max)
            .expect("u32 fits in usize"),
        batch_bytes_max: raft_batch - raft_batch / 8,
        batch_requests_max: SERVICE_BATCH_REQUESTS_MAX,
        snapshot_bytes_between: config.metadata_log_record_bytes_between_snapshots_max,
        idle_noop_interval_ms: config.metadata_idle_interval_ms_max,
        publish_committed_image: false,
        acls: crate::acl_slot::AclSlot::new(config.authorizer()),
    }
}

/// The peer network's configuration: this node in `cluster_id`, listening on `listen` (the
/// controller listener, resolved by the caller), frames big enough for the largest append
/// (`corum.raft.batch.bytes.max`) and snapshot chunk (`corum.raft.snapshot.chunk.bytes.max`)
/// plus [`ENVELOPE_OVERHEAD_BYTES`], the runtime's reconnect backoff.
pub fn peer_network(
    config: &NodeConfig,
    cluster_id: Uuid,
    listen: SocketAddr,
) -> PeerNetworkConfig {
    let payload = config
        .raft_batch_bytes_max
        .max(config.raft_snapshot_chunk_bytes_max);
    PeerNetworkConfig {
        cluster_id,
        node_id: config.node_id,
        listen,
        outbound_queue_capacity: PEER_OUTBOUND_QUEUE_CAPACITY,
        inbound_queue_capacity: PEER_INBOUND_QUEUE_CAPACITY,
        connection: ConnectionConfig {
            payload_bytes_max: payload.saturating_add(ENVELOPE_OVERHEAD_BYTES),
            nodelay: true,
        },
        backoff: BackoffConfig::default(),
        send_timeout: Duration::from_millis(PEER_SEND_TIMEOUT_MS),
    }
}

/// The limits the client and Kafka listeners share ([`crate::connections`]):
/// `max.connections`, `max.connections.per.ip`, `max.connections.per.ip.overrides`,
/// `connections.max.idle.ms`, `corum.connection.send.timeout.ms`.
pub fn connection_limits(config: &NodeConfig) -> ConnectionLimits {
    ConnectionLimits {
        max: config.connections_max,
        per_ip_max: config.connections_per_ip_max,
        per_ip_overrides: config.connections_per_ip_overrides.clone(),
        idle: Duration::from_millis(config.connections_idle_ms_max),
        send_timeout: Duration::from_millis(config.connection_send_timeout_ms),
    }
}

/// The client RPC server's configuration: this node in `cluster_id` (for DescribeQuorum),
/// `socket.request.max.bytes`, `corum.socket.response.max.bytes`, the connection limits
/// ([`connection_limits`]), `corum.connection.inflight.requests.max`.
pub fn rpc_server(config: &NodeConfig, cluster_id: Uuid) -> RpcServerConfig {
    RpcServerConfig {
        request_bytes_max: config.socket_request_bytes_max,
        response_bytes_max: config.socket_response_bytes_max,
        limits: connection_limits(config),
        in_flight_per_connection_max: usize::try_from(config.connection_inflight_requests_max)
            .expect("u32 fits in usize"),
        cluster_id,
        node_id: config.node_id,
    }
}

/// The settings of the Kafka listener `listener` (one of [`NodeConfig::kafka_listeners`]),
/// advertised at `advertised` (see [`NodeConfig::advertised`]).
pub fn kafka_server(
    config: &NodeConfig,
    cluster_id: Uuid,
    listener: &str,
    advertised: &HostPort,
) -> KafkaServerConfig {
    KafkaServerConfig {
        listener_name: listener.to_owned(),
        advertised_host: advertised.host.clone(),
        advertised_port: advertised.port,
        request_bytes_max: config.socket_request_bytes_max,
        limits: connection_limits(config),
        in_flight_per_connection_max: usize::try_from(config.connection_inflight_requests_max)
            .expect("u32 fits in usize"),
        request_timeout_ms: u32::try_from(config.controller_request_timeout_ms).unwrap_or(u32::MAX),
        cluster_id,
        node_id: config.node_id,
        client_listener_name: config.client_listener_name.clone(),
        controller_listener_name: config.controller_listener().name.clone(),
    }
}

/// One `controller.quorum.voters` entry as a Raft voter reachable on `listener_name` (the
/// node's controller listener: static voters all listen under the same name).
pub fn raft_voter(voter: &QuorumVoter, listener_name: &str) -> Voter {
    Voter {
        key: ReplicaKey {
            id: voter.id,
            directory_id: voter.directory_id.unwrap_or(Uuid::ZERO),
        },
        endpoints: vec![Endpoint {
            listener: listener_name.to_owned(),
            host: voter.endpoint.host.clone(),
            port: voter.endpoint.port,
        }],
    }
}

/// The static voter set of `controller.quorum.voters` (kraft.version 0), with endpoints under
/// the controller listener's name: [`corum_raft::Restore::bootstrap_voters`] for a static
/// quorum.
pub fn static_voter_set(config: &NodeConfig) -> Result<VoterSet> {
    let name = &config.controller_listener().name;
    VoterSet::new(
        config
            .quorum_voters
            .iter()
            .map(|v| raft_voter(v, name))
            .collect(),
    )
    .map_err(|e| invalid("controller.quorum.voters", RuleError::Voters(e)))
}

/// This node's identity and endpoints as [`corum_raft::RaftCore::new`] takes them (`me`,
/// `endpoints`): the node id, `directory_id`, and the controller listener where the other
/// controllers reach it ([`NodeConfig::controller_endpoint`]: its `advertised.listeners`
/// entry, else the listener).
pub fn local_replica(config: &NodeConfig, directory_id: Uuid) -> (ReplicaKey, Vec<Endpoint>) {
    let name = &config.controller_listener().name;
    let at = config
        .controller_endpoint(name)
        .expect("the controller listener is a listener");
    (
        ReplicaKey {
            id: config.node_id,
            directory_id,
        },
        vec![Endpoint {
            listener: name.clone(),
            host: at.host,
            port: at.port,
        }],
    )
}

/// Every component derived from `config` for a fresh node (the tests' view of it).
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Derived {
    pub raft: corum_raft::Config,
    pub controller: ControllerConfig,
    pub log: LogConfig,
    pub runtime: RuntimeConfig,
    pub placement: PlacementSpec,
    pub driver: RaftDriverConfig,
    pub service: ControllerServiceConfig,
    pub peer: PeerNetworkConfig,
    pub server: RpcServerConfig,
}

/// Derives every component of `config` (a static quorum, or without `controller.quorum.voters`
/// a controller formatted to join; placement with no flags on cores 0-7), failing on the
/// first that refuses it.
#[cfg(test)]
pub(crate) fn check(config: &NodeConfig) -> crate::Result<Derived> {
    let online: Vec<CoreId> = (0..8).map(CoreId).collect();
    let joining = crate::bootstrap::BootstrapCheckpoint {
        kraft_version: 1,
        voters: Vec::new(),
        features: corum_controller::control::feature_control::default_bootstrap_features(),
    };
    let bootstrap = config.quorum_voters.is_empty().then_some(&joining);
    let driver = raft_driver(config, raft_replica(config, Uuid([7; 16]), bootstrap)?)?;
    let service = controller_service(config, &driver.bootstrap_voters);
    let peer = peer_network(config, Uuid([3; 16]), SocketAddr::from(([127, 0, 0, 1], 0)));
    let server = rpc_server(config, Uuid([3; 16]));
    peer.validate()?;
    server
        .validate()
        .expect("every limit of the server has a key whose range starts at 1");
    Ok(Derived {
        raft: raft(config)?,
        controller: controller(config)?,
        log: log(config)?,
        runtime: runtime(config)?,
        placement: placement(config, &PlacementSpec::default(), &online)?,
        driver,
        service,
        peer,
        server,
    })
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use corum_types::NodeId;

    use super::*;
    use crate::bootstrap::{BootstrapEndpoint, BootstrapVoter};
    use crate::config::keys::{Reader, CONFIG_KEYS};
    use crate::config::values::CoreSet;

    fn config(extra: &[(&str, &str)]) -> NodeConfig {
        let sets: Vec<(String, String)> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        NodeConfig::for_tests().with_overrides(&sets).unwrap()
    }

    fn num<T: std::str::FromStr>(v: &str) -> T
    where
        T::Err: std::fmt::Debug,
    {
        v.parse().unwrap()
    }

    /// Whether a derived component reflects a key's value (given as text).
    type Check = fn(&Derived, &str) -> bool;
    /// Overrides of the test configuration.
    type Sets = &'static [(&'static str, &'static str)];
    /// A change made by hand to a configuration.
    type Change = fn(&mut NodeConfig);

    /// Every (key, component) pair of the key table's `readers` column (but the node's own
    /// reads, which build no component): the overrides that give the key a value other than
    /// the test configuration's (the key's own first), and how the component shows the value.
    const READS: &[(&str, Reader, Sets, Check)] = {
        use Reader::*;
        const STATIC_2: &[(&str, &str)] = &[
            ("node.id", "2"),
            ("controller.quorum.voters", "2@127.0.0.1:9093"),
        ];
        &[
            ("node.id", RaftDriver, STATIC_2, |d, v| {
                d.driver.me.id.to_string() == v
            }),
            ("node.id", ControllerService, STATIC_2, |d, v| {
                d.service.node_id.to_string() == v
            }),
            ("node.id", PeerNetwork, STATIC_2, |d, v| {
                d.peer.node_id.to_string() == v
            }),
            ("node.id", RpcServer, STATIC_2, |d, v| {
                d.server.node_id.to_string() == v
            }),
            (
                "listeners",
                RaftDriver,
                // A controller that joins advertises its listener (a static voter, its
                // `controller.quorum.voters` entry).
                &[
                    (
                        "listeners",
                        "CONTROLLER://127.0.0.2:9093,CLIENT://127.0.0.1:9094",
                    ),
                    ("controller.quorum.voters", ""),
                    ("controller.quorum.bootstrap.servers", "127.0.0.1:9093"),
                ],
                |d, _| d.driver.endpoints[0].host == "127.0.0.2",
            ),
            (
                "advertised.listeners",
                RaftDriver,
                // A controller that joins announces its advertised controller listener.
                &[
                    ("advertised.listeners", "CONTROLLER://10.0.0.5:9093"),
                    ("controller.quorum.voters", ""),
                    ("controller.quorum.bootstrap.servers", "127.0.0.1:9093"),
                ],
                |d, v| {
                    let want = if v.is_empty() {
                        "127.0.0.1"
                    } else {
                        "10.0.0.5"
                    };
                    d.driver.endpoints[0].host == want
                },
            ),
            (
                "controller.listener.names",
                RaftDriver,
                &[
                    ("controller.listener.names", "RAFT"),
                    ("listeners", "RAFT://127.0.0.1:9093,CLIENT://127.0.0.1:9094"),
                    (
                        "listener.security.protocol.map",
                        "RAFT:PLAINTEXT,CLIENT:PLAINTEXT",
                    ),
                ],
                |d, v| d.driver.listener_name == v && d.driver.endpoints[0].listener == v,
            ),
            (
                "controller.listener.names",
                ControllerService,
                &[
                    ("controller.listener.names", "RAFT"),
                    ("listeners", "RAFT://127.0.0.1:9093,CLIENT://127.0.0.1:9094"),
                    (
                        "listener.security.protocol.map",
                        "RAFT:PLAINTEXT,CLIENT:PLAINTEXT",
                    ),
                ],
                |d, _| d.service.leader_endpoints.len() == 1,
            ),
            (
                "controller.quorum.voters",
                RaftDriver,
                &[(
                    "controller.quorum.voters",
                    "1@127.0.0.1:9093,2@127.0.0.1:9095",
                )],
                |d, v| d.driver.bootstrap_voters.len() == v.split(',').count(),
            ),
            (
                "metadata.log.dir",
                RaftDriver,
                &[("metadata.log.dir", "/tmp/elsewhere")],
                |d, v| d.driver.data_dir == Path::new(v),
            ),
            (
                "controller.quorum.election.timeout.ms",
                Raft,
                &[("controller.quorum.election.timeout.ms", "1500")],
                |d, v| d.raft.election_timeout_ms == num::<u64>(v),
            ),
            (
                "controller.quorum.fetch.timeout.ms",
                Raft,
                &[("controller.quorum.fetch.timeout.ms", "3000")],
                |d, v| d.raft.fetch_timeout_ms == num::<u64>(v),
            ),
            (
                "controller.quorum.election.backoff.max.ms",
                Raft,
                &[("controller.quorum.election.backoff.max.ms", "700")],
                |d, v| d.raft.election_backoff_max_ms == num::<u64>(v),
            ),
            (
                "controller.quorum.request.timeout.ms",
                Raft,
                &[("controller.quorum.request.timeout.ms", "2500")],
                |d, v| d.raft.request_timeout_ms == num::<u64>(v),
            ),
            (
                "controller.quorum.retry.backoff.ms",
                Raft,
                &[("controller.quorum.retry.backoff.ms", "50")],
                |d, v| d.raft.retry_backoff_ms == num::<u64>(v),
            ),
            (
                "controller.quorum.auto.join.enable",
                Raft,
                &[("controller.quorum.auto.join.enable", "true")],
                |d, v| d.raft.auto_join == (v == "true"),
            ),
            (
                "controller.quorum.bootstrap.servers",
                RaftDriver,
                &[(
                    "controller.quorum.bootstrap.servers",
                    "127.0.0.1:9093,127.0.0.1:9095",
                )],
                |d, v| {
                    d.driver.bootstrap_servers.len()
                        == v.split(',').filter(|s| !s.is_empty()).count()
                },
            ),
            (
                "broker.session.timeout.ms",
                Controller,
                &[("broker.session.timeout.ms", "12000")],
                |d, v| d.controller.session_timeout_ms == num::<u64>(v),
            ),
            (
                "broker.heartbeat.interval.ms",
                Controller,
                &[("broker.heartbeat.interval.ms", "50")],
                |d, v| d.controller.heartbeat_interval_ms == num::<u64>(v),
            ),
            (
                "broker.heartbeat.interval.ms",
                ControllerService,
                &[("broker.heartbeat.interval.ms", "50")],
                |d, v| {
                    d.service.controller_tick_interval_ms
                        == num::<u64>(v).min(SERVICE_TICK_INTERVAL_MS_MAX)
                },
            ),
            (
                "metadata.log.segment.bytes",
                Log,
                &[("metadata.log.segment.bytes", "2097152")],
                |d, v| d.log.segment_bytes == num::<u64>(v),
            ),
            (
                "corum.log.durable.write.bytes.max",
                Log,
                &[("corum.log.durable.write.bytes.max", "0")],
                |d, v| d.log.durable_write_bytes_max == num::<usize>(v),
            ),
            (
                "metadata.log.max.record.bytes.between.snapshots",
                ControllerService,
                &[("metadata.log.max.record.bytes.between.snapshots", "1000")],
                |d, v| d.service.snapshot_bytes_between == num::<u64>(v),
            ),
            (
                "metadata.max.retention.bytes",
                RaftDriver,
                &[("metadata.max.retention.bytes", "-1")],
                |d, v| d.driver.log_retention_bytes == v.parse::<u64>().ok(),
            ),
            (
                "metadata.max.idle.interval.ms",
                ControllerService,
                &[("metadata.max.idle.interval.ms", "0")],
                |d, v| d.service.idle_noop_interval_ms == num::<u64>(v),
            ),
            (
                "socket.request.max.bytes",
                RpcServer,
                &[("socket.request.max.bytes", "2097152")],
                |d, v| d.server.request_bytes_max == num::<u32>(v),
            ),
            (
                "corum.socket.response.max.bytes",
                RpcServer,
                &[("corum.socket.response.max.bytes", "33554432")],
                |d, v| d.server.response_bytes_max == num::<u32>(v),
            ),
            (
                "num.partitions",
                Controller,
                &[("num.partitions", "3")],
                |d, v| d.controller.default_partitions == num::<u32>(v),
            ),
            (
                "default.replication.factor",
                Controller,
                &[("default.replication.factor", "3")],
                |d, v| d.controller.default_replication_factor == num::<u16>(v),
            ),
            (
                "min.insync.replicas",
                Controller,
                &[("min.insync.replicas", "2")],
                |d, v| d.controller.min_insync_replicas == num::<u16>(v),
            ),
            ("corum.cores", Runtime, &[("corum.cores", "2,5")], |d, v| {
                let cores = if v.is_empty() {
                    vec![0, 7]
                } else {
                    num::<CoreSet>(v).0
                };
                d.placement.cores == Some(cores.into_iter().map(|c| CoreId(c as usize)).collect())
            }),
            (
                "corum.controller.core",
                Runtime,
                &[("corum.controller.core", "2"), ("corum.cores", "2,5")],
                |d, v| d.placement.controller_core == v.parse().ok().map(CoreId),
            ),
            (
                "corum.no.pin",
                Runtime,
                &[("corum.no.pin", "true")],
                |d, v| d.placement.no_pin == num::<bool>(v),
            ),
            (
                "corum.spin.before.park.us",
                Runtime,
                &[("corum.spin.before.park.us", "50")],
                |d, v| d.runtime.spin_before_park_us == num::<u64>(v),
            ),
            (
                "corum.raft.heartbeat.interval.ms",
                Raft,
                &[("corum.raft.heartbeat.interval.ms", "100")],
                |d, v| d.raft.heartbeat_interval_ms == num::<u64>(v),
            ),
            (
                "corum.raft.high.watermark.linger.ms",
                Raft,
                &[("corum.raft.high.watermark.linger.ms", "7")],
                |d, v| d.raft.hwm_linger_ms == num::<u64>(v),
            ),
            (
                "corum.raft.append.inflight.count.max",
                Raft,
                &[("corum.raft.append.inflight.count.max", "9")],
                |d, v| d.raft.append_inflight_count_max == num::<usize>(v),
            ),
            (
                "corum.raft.append.inflight.bytes.max",
                Raft,
                &[("corum.raft.append.inflight.bytes.max", "4194304")],
                |d, v| d.raft.append_inflight_bytes_max == num::<usize>(v),
            ),
            (
                "corum.raft.batch.bytes.max",
                Raft,
                &[("corum.raft.batch.bytes.max", "65536")],
                |d, v| d.raft.batch_bytes_max == num::<usize>(v),
            ),
            (
                "corum.raft.batch.bytes.max",
                Log,
                &[
                    ("corum.raft.batch.bytes.max", "16777216"),
                    ("corum.raft.append.inflight.bytes.max", "33554432"),
                ],
                |d, v| {
                    let frame = corum_engine::record::frame_bytes_for_payload(num(v));
                    d.log.frame_bytes_max as usize
                        == frame.max(LogConfig::default().frame_bytes_max as usize)
                        && d.log.buffered_bytes_max >= frame + 4096
                },
            ),
            (
                "corum.raft.batch.bytes.max",
                PeerNetwork,
                &[
                    ("corum.raft.batch.bytes.max", "16777216"),
                    ("corum.raft.append.inflight.bytes.max", "33554432"),
                ],
                |d, v| {
                    d.peer.connection.payload_bytes_max
                        == num::<u32>(v).max(d.raft.snapshot_chunk_bytes_max as u32)
                            + ENVELOPE_OVERHEAD_BYTES
                },
            ),
            (
                "corum.raft.batch.bytes.max",
                ControllerService,
                &[("corum.raft.batch.bytes.max", "65536")],
                |d, v| d.service.batch_bytes_max == num::<usize>(v) / 8 * 7,
            ),
            (
                "corum.raft.fetch.wait.max.ms",
                Raft,
                &[("corum.raft.fetch.wait.max.ms", "400")],
                |d, v| d.raft.fetch_wait_max_ms == num::<u64>(v),
            ),
            (
                "corum.raft.observer.fetch.interval.ms",
                Raft,
                &[("corum.raft.observer.fetch.interval.ms", "7")],
                |d, v| d.raft.observer_fetch_interval_ms == num::<u64>(v),
            ),
            (
                "corum.raft.snapshot.chunk.bytes.max",
                Raft,
                &[("corum.raft.snapshot.chunk.bytes.max", "65536")],
                |d, v| d.raft.snapshot_chunk_bytes_max == num::<usize>(v),
            ),
            (
                "corum.raft.snapshot.bytes.max",
                Raft,
                &[("corum.raft.snapshot.bytes.max", "1048576")],
                |d, v| d.raft.snapshot_bytes_max == num::<u64>(v),
            ),
            (
                "corum.raft.snapshot.chunk.bytes.max",
                PeerNetwork,
                &[("corum.raft.snapshot.chunk.bytes.max", "2097152")],
                |d, v| {
                    d.peer.connection.payload_bytes_max
                        == num::<u32>(v).max(d.raft.batch_bytes_max as u32)
                            + ENVELOPE_OVERHEAD_BYTES
                },
            ),
            (
                "corum.raft.payload.cache.bytes.max",
                Raft,
                &[("corum.raft.payload.cache.bytes.max", "1024")],
                |d, v| d.raft.payload_cache_bytes_max == num::<usize>(v),
            ),
            (
                "corum.raft.uncommitted.records.max",
                RaftDriver,
                &[("corum.raft.uncommitted.records.max", "100")],
                |d, v| d.driver.uncommitted_records_max == num::<u64>(v),
            ),
            (
                "corum.controller.request.timeout.ms",
                RaftDriver,
                &[("corum.controller.request.timeout.ms", "5000")],
                |d, v| d.driver.request_timeout_default_ms == num::<u64>(v),
            ),
            (
                "corum.controller.request.timeout.max.ms",
                RaftDriver,
                &[("corum.controller.request.timeout.max.ms", "60000")],
                |d, v| d.driver.request_timeout_max_ms == num::<u64>(v),
            ),
            (
                "corum.controller.queue.capacity",
                RaftDriver,
                &[("corum.controller.queue.capacity", "64")],
                |d, v| d.driver.call_queue_capacity == num::<usize>(v),
            ),
            (
                "corum.connection.inflight.requests.max",
                RpcServer,
                &[("corum.connection.inflight.requests.max", "8")],
                |d, v| d.server.in_flight_per_connection_max == num::<usize>(v),
            ),
            (
                "max.connections",
                RpcServer,
                &[("max.connections", "100")],
                |d, v| d.server.limits.max == num::<u32>(v),
            ),
            (
                "max.connections.per.ip",
                RpcServer,
                &[("max.connections.per.ip", "7")],
                |d, v| d.server.limits.per_ip_max == num::<u32>(v),
            ),
            (
                "max.connections.per.ip.overrides",
                RpcServer,
                &[("max.connections.per.ip.overrides", "127.0.0.1:3,[::1]:4")],
                |d, v| {
                    let limits = &d.server.limits;
                    if v.is_empty() {
                        limits.per_ip_overrides.is_empty()
                    } else {
                        limits.per_ip_overrides.len() == 2
                            && limits.per_ip_max_of([127, 0, 0, 1].into()) == 3
                            && limits.per_ip_max_of(std::net::Ipv6Addr::LOCALHOST.into()) == 4
                    }
                },
            ),
            (
                "connections.max.idle.ms",
                RpcServer,
                &[("connections.max.idle.ms", "1234")],
                |d, v| d.server.limits.idle == Duration::from_millis(num(v)),
            ),
            (
                "corum.connection.send.timeout.ms",
                RpcServer,
                &[("corum.connection.send.timeout.ms", "4321")],
                |d, v| d.server.limits.send_timeout == Duration::from_millis(num(v)),
            ),
            (
                "corum.controller.partitions.per.topic.max",
                Controller,
                &[("corum.controller.partitions.per.topic.max", "500")],
                |d, v| d.controller.partitions_per_topic_max == num::<u32>(v),
            ),
            (
                "corum.controller.replication.factor.max",
                Controller,
                &[("corum.controller.replication.factor.max", "5")],
                |d, v| d.controller.replication_factor_max == num::<u16>(v),
            ),
            (
                "corum.controller.records.per.batch.max",
                Controller,
                &[("corum.controller.records.per.batch.max", "100")],
                |d, v| d.controller.records_per_batch_max == num::<usize>(v),
            ),
            (
                "corum.controller.records.per.batch.max",
                ControllerService,
                &[("corum.controller.records.per.batch.max", "100")],
                |d, v| d.service.batch_records_max == num::<usize>(v),
            ),
            (
                "corum.controller.producer.id.block.size",
                Controller,
                &[("corum.controller.producer.id.block.size", "50")],
                |d, v| d.controller.producer_id_block_size == num::<u64>(v),
            ),
            (
                "corum.controller.seed",
                Controller,
                &[("corum.controller.seed", "7")],
                |d, v| d.controller.seed == num::<u64>(v),
            ),
            (
                "corum.controller.seed",
                RaftDriver,
                &[("corum.controller.seed", "7")],
                |d, v| d.driver.seed == num::<u64>(v) ^ 1u64.rotate_left(32),
            ),
        ]
    };

    /// Every component derived from the test configuration (every key at the table's default)
    /// holds the table's default for every key it reads, and follows the key when it is set to
    /// something else: a component default drifting from the table, or a component ignoring
    /// its key, fails here. A reader added to the table without a row here fails too.
    #[test]
    fn components_hold_the_table_defaults_and_follow_the_keys() {
        let base = NodeConfig::for_tests();
        let defaults = check(&base).unwrap();
        let mut declared: Vec<(&str, Reader)> = CONFIG_KEYS
            .iter()
            .flat_map(|k| k.readers.iter().map(move |r| (k.name, *r)))
            .filter(|(_, r)| *r != Reader::Node)
            .collect();
        let mut tested: Vec<(&str, Reader)> = READS.iter().map(|(k, r, _, _)| (*k, *r)).collect();
        declared.sort_unstable();
        tested.sort_unstable();
        assert_eq!(tested, declared, "READS and the table's readers differ");
        for (name, reader, overrides, reads) in READS {
            let key = crate::config::config_key(name).unwrap();
            if let Some(default) = key.default {
                if key.value_of(&base) == default {
                    assert!(
                        reads(&defaults, default),
                        "{reader} does not hold {name}'s default {default}: {defaults:#?}"
                    );
                }
            }
            let (first, value) = overrides[0];
            assert_eq!(first, *name, "the key's own override comes first");
            assert_ne!(key.value_of(&base), value, "{name}: not a change");
            let changed = check(&config(overrides)).unwrap();
            assert!(
                reads(&changed, value),
                "{reader} does not follow {name}={value}: {changed:#?}"
            );
        }
    }

    /// The Raft crate's and the controller's own defaults (what their simulators and tests
    /// run) are the key table's, and so are the fixed values of the components.
    #[test]
    fn other_crates_defaults_are_the_tables() {
        let d = check(&NodeConfig::for_tests()).unwrap();
        assert_eq!(d.raft, corum_raft::Config::default());
        assert_eq!(d.controller, ControllerConfig::default());
        assert_eq!(d.driver.raft, d.raft);
        assert_eq!(d.driver.log, d.log);
        assert_eq!(d.driver.tick_interval_ms, RAFT_TICK_INTERVAL_MS);
        assert_eq!(
            d.driver.proposal_queue_capacity,
            RAFT_PROPOSAL_QUEUE_CAPACITY
        );
        assert_eq!(
            d.driver.resign_send_wait_ms_max,
            RAFT_RESIGN_SEND_WAIT_MS_MAX
        );
        assert_eq!(d.service.batch_requests_max, SERVICE_BATCH_REQUESTS_MAX);
        assert_eq!(d.peer.outbound_queue_capacity, PEER_OUTBOUND_QUEUE_CAPACITY);
        assert_eq!(d.peer.inbound_queue_capacity, PEER_INBOUND_QUEUE_CAPACITY);
        assert_eq!(
            d.peer.send_timeout,
            Duration::from_millis(PEER_SEND_TIMEOUT_MS)
        );
    }

    /// A value set by hand that the Raft core refuses is reported under the key of the field
    /// to change, with the Raft crate's typed reason.
    #[test]
    fn raft_rule_names_the_node_key() {
        let cases: [(Change, &str); 4] = [
            (
                |c| c.raft_append_inflight_count_max = 0,
                "corum.raft.append.inflight.count.max",
            ),
            (
                |c| c.election_backoff_max_ms = 0,
                "controller.quorum.election.backoff.max.ms",
            ),
            (
                |c| c.raft_heartbeat_interval_ms = 600,
                "corum.raft.heartbeat.interval.ms",
            ),
            (
                |c| c.raft_fetch_wait_ms_max = 5000,
                "corum.raft.fetch.wait.max.ms",
            ),
        ];
        for (change, key) in cases {
            let mut c = NodeConfig::for_tests();
            change(&mut c);
            match raft(&c).unwrap_err() {
                ConfigError::Invalid {
                    key: k,
                    reason: RuleError::Raft(e),
                } => {
                    assert_eq!(k, key);
                    assert_eq!(raft_key(e.field()), key);
                }
                other => panic!("{key}: {other:?}"),
            }
        }
        // Every field has a key of the table.
        for field in ConfigField::ALL {
            assert!(
                crate::config::config_key(raft_key(field)).is_some(),
                "{field}"
            );
        }
    }

    /// A value set by hand that the controller, the log engine or the runtime refuses is
    /// reported under the key that sets it.
    #[test]
    fn component_rules_name_the_node_key() {
        let mut c = NodeConfig::for_tests();
        c.controller_records_per_batch_max = 2;
        assert!(matches!(
            controller(&c),
            Err(ConfigError::Invalid {
                key: "corum.controller.records.per.batch.max",
                reason: RuleError::Controller(_),
            })
        ));
        let mut c = NodeConfig::for_tests();
        c.controller_partitions_per_topic_max = 0;
        assert!(matches!(
            controller(&c),
            Err(ConfigError::Invalid {
                key: "corum.controller.partitions.per.topic.max",
                ..
            })
        ));
        let mut c = NodeConfig::for_tests();
        c.broker_heartbeat_interval_ms = c.broker_session_timeout_ms;
        assert!(matches!(
            controller(&c),
            Err(ConfigError::Invalid {
                key: "broker.heartbeat.interval.ms",
                ..
            })
        ));
        let mut c = NodeConfig::for_tests();
        c.metadata_log_segment_bytes = (1 << 20) + 1;
        assert!(matches!(
            log(&c),
            Err(ConfigError::Invalid {
                key: "metadata.log.segment.bytes",
                reason: RuleError::Log { .. },
            })
        ));
        let mut c = NodeConfig::for_tests();
        c.spin_before_park_us = 1 << 30;
        assert!(matches!(
            runtime(&c),
            Err(ConfigError::Invalid {
                key: "corum.spin.before.park.us",
                reason: RuleError::Runtime { .. },
            })
        ));
    }

    /// The placement: at most two cores, chosen from the online ones when none are named,
    /// the flags over the configuration, and `--cores` refused beyond two naming the key and
    /// the flag.
    #[test]
    fn placement_uses_at_most_two_cores() {
        let online = |n: usize| (0..n).map(CoreId).collect::<Vec<_>>();
        let cores = |s: &[usize]| Some(s.iter().copied().map(CoreId).collect::<Vec<_>>());
        let none = PlacementSpec::default();
        let c = NodeConfig::for_tests();
        assert_eq!(
            placement(&c, &none, &online(8)).unwrap().cores,
            cores(&[0, 7])
        );
        assert_eq!(
            placement(&c, &none, &online(2)).unwrap().cores,
            cores(&[0, 1])
        );
        assert_eq!(placement(&c, &none, &online(1)).unwrap().cores, cores(&[0]));
        assert_eq!(placement(&c, &none, &[]).unwrap().cores, None);
        let c3 = config(&[("corum.controller.core", "3")]);
        let p = placement(&c3, &none, &online(8)).unwrap();
        assert_eq!(p.cores, cores(&[0, 3]));
        assert_eq!(p.controller_core, Some(CoreId(3)));
        let p = placement(&c3, &none, &[CoreId(3)]).unwrap();
        assert_eq!(p.cores, cores(&[3]));
        let c1 = config(&[("corum.cores", "1")]);
        assert_eq!(
            placement(&c1, &none, &online(8)).unwrap().cores,
            cores(&[1])
        );
        let flags = PlacementSpec {
            cores: cores(&[4, 6]),
            controller_core: None,
            no_pin: true,
        };
        let p = placement(&c1, &flags, &online(8)).unwrap();
        assert_eq!((p.cores, p.no_pin), (cores(&[4, 6]), true));
        let too_many = PlacementSpec {
            cores: cores(&[0, 1, 2, 3]),
            ..none.clone()
        };
        let err = placement(&c, &too_many, &online(8)).unwrap_err();
        assert_eq!(
            err,
            ConfigError::InvalidValue {
                key: "corum.cores",
                value: "0-3".into(),
                at: ConfigSource::Flag("--cores"),
                reason: ValueError::TooManyCores { count: 4, max: 2 },
            }
        );
        let text = err.to_string();
        assert!(
            text.contains("--cores") && text.contains("corum.cores"),
            "{text}"
        );
        assert!(text.contains("at most 2 shards"), "{text}");
        // Every placement it gives resolves to at most two shards.
        for n in 1..6 {
            let p = placement(&c, &none, &online(n)).unwrap();
            assert!(p.resolve(&online(n)).unwrap().shards().len() <= NODE_SHARDS_MAX);
        }
    }

    /// The static voters become a sorted voter set with the controller listener's name, the
    /// directory id mapped from `None` to zero, and this replica's identity and endpoints.
    #[test]
    fn static_voters_and_local_replica() {
        let c = config(&[(
            "controller.quorum.voters",
            "1@127.0.0.1:9093,2@127.0.0.2:9093:AAAAAAAAAAAAAAAAAAAAAQ,3@127.0.0.3:9093",
        )]);
        let set = static_voter_set(&c).unwrap();
        assert_eq!(
            set.ids().collect::<Vec<_>>(),
            [NodeId(1), NodeId(2), NodeId(3)]
        );
        let v1 = set.get(NodeId(1)).unwrap();
        assert_eq!(v1.key.directory_id, Uuid::ZERO);
        assert_eq!(
            v1.endpoints,
            vec![Endpoint {
                listener: "CONTROLLER".into(),
                host: "127.0.0.1".into(),
                port: 9093
            }]
        );
        let mut dir = [0u8; 16];
        dir[15] = 1;
        assert_eq!(set.get(NodeId(2)).unwrap().key.directory_id, Uuid(dir));
        let (me, eps) = local_replica(&c, Uuid([7; 16]));
        assert_eq!(me.id, NodeId(1));
        assert_eq!(me.directory_id, Uuid([7; 16]));
        assert_eq!(eps, v1.endpoints);
    }

    fn three_voters(node: u32) -> NodeConfig {
        config(&[
            ("node.id", &node.to_string()),
            (
                "listeners",
                &format!("CONTROLLER://127.0.0.{node}:9093,CLIENT://127.0.0.1:9094"),
            ),
            (
                "controller.quorum.voters",
                "1@127.0.0.1:9093,2@127.0.0.2:9093,3@127.0.0.3:9093",
            ),
            ("metadata.log.dir", "/var/corum"),
        ])
    }

    /// A static quorum's driver takes the voters of `controller.quorum.voters`, this replica's
    /// directory id (a static voter names none, so any directory of its id is the voter; the
    /// leader learns it for an upgrade), its own voters entry as its endpoint (not its
    /// wildcard listener), its log under `metadata.log.dir`, and a seed that differs between
    /// nodes.
    #[test]
    fn raft_driver_of_a_static_quorum() {
        let mut c = three_voters(2);
        c.listeners[0].endpoint.host = "0.0.0.0".into();
        let d = raft_driver(&c, raft_replica(&c, Uuid([2; 16]), None).unwrap()).unwrap();
        assert_eq!(d.me.id, NodeId(2));
        assert_eq!(d.me.directory_id, Uuid([2; 16]));
        assert_eq!(d.kraft_version, 0, "a static quorum's bootstrap");
        assert!(d.bootstrap_voters.contains_key(&d.me));
        assert_eq!(d.endpoints[0].host, "127.0.0.2");
        assert_eq!(d.listener_name, "CONTROLLER");
        assert_eq!(
            d.bootstrap_voters.ids().collect::<Vec<_>>(),
            vec![NodeId(1), NodeId(2), NodeId(3)]
        );
        assert_eq!(d.log_dir(), PathBuf::from("/var/corum/@metadata-0"));
        let c3 = three_voters(3);
        let d3 = raft_driver(&c3, raft_replica(&c3, Uuid([3; 16]), None).unwrap()).unwrap();
        assert_ne!(d.seed, d3.seed);
    }

    /// A dynamic quorum's bootstrap checkpoint (kraft.version 1) wins over the static list and
    /// gives this replica its directory id; a static checkpoint (kraft.version 0) does not; a
    /// checkpoint with a voter twice is refused.
    #[test]
    fn raft_replica_prefers_a_dynamic_bootstrap_checkpoint() {
        let c = three_voters(2);
        let voter = |id: u32| BootstrapVoter {
            id: NodeId(id),
            directory_id: Uuid([id as u8; 16]),
            endpoints: vec![BootstrapEndpoint {
                name: "CONTROLLER".into(),
                host: format!("127.0.0.{id}"),
                port: 9093,
            }],
        };
        let dynamic = BootstrapCheckpoint {
            kraft_version: 1,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
            voters: vec![voter(2), voter(5)],
        };
        let r = raft_replica(&c, Uuid([2; 16]), Some(&dynamic)).unwrap();
        assert_eq!(
            r.bootstrap_voters.ids().collect::<Vec<_>>(),
            vec![NodeId(2), NodeId(5)]
        );
        assert_eq!(r.me.directory_id, Uuid([2; 16]));
        assert_eq!(r.kraft_version, 1);
        let static_one = BootstrapCheckpoint {
            kraft_version: 0,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
            voters: vec![],
        };
        let r = raft_replica(&c, Uuid([2; 16]), Some(&static_one)).unwrap();
        assert_eq!(r.bootstrap_voters.len(), 3);
        assert_eq!(r.kraft_version, 0);
        let twice = BootstrapCheckpoint {
            kraft_version: 1,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
            voters: vec![voter(2), voter(2)],
        };
        assert!(matches!(
            raft_replica(&c, Uuid([2; 16]), Some(&twice)),
            Err(crate::Error::Storage(StorageError::InvalidBootstrap { .. }))
        ));
    }

    /// A controller of a dynamic quorum announces where the others reach it: its
    /// `advertised.listeners` entry for the controller listener, else the listener; a wildcard
    /// there reaches no one and is refused, naming the key. An upgraded static quorum's node
    /// configured without voters takes them from its log (an empty bootstrap set).
    #[test]
    fn a_dynamic_replica_announces_a_reachable_controller_endpoint() {
        let joining = BootstrapCheckpoint {
            kraft_version: 1,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
            voters: vec![],
        };
        let wildcard = config(&[
            (
                "listeners",
                "CONTROLLER://0.0.0.0:9093,CLIENT://127.0.0.1:9094",
            ),
            ("controller.quorum.voters", ""),
            ("controller.quorum.bootstrap.servers", "127.0.0.1:9093"),
        ]);
        let refused = raft_replica(&wildcard, Uuid([2; 16]), Some(&joining)).unwrap_err();
        assert!(
            refused.to_string().contains("advertised.listeners"),
            "{refused}"
        );
        let mut advertised = wildcard.clone();
        advertised.advertised_listeners = vec![crate::config::Listener {
            name: "CONTROLLER".into(),
            endpoint: HostPort {
                host: "10.0.0.5".into(),
                port: 9093,
            },
        }];
        let r = raft_replica(&advertised, Uuid([2; 16]), Some(&joining)).unwrap();
        assert_eq!(
            (r.endpoints[0].host.as_str(), r.endpoints[0].port),
            ("10.0.0.5", 9093)
        );
        let static_dir = BootstrapCheckpoint {
            kraft_version: 0,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
            voters: vec![],
        };
        let r = raft_replica(&advertised, Uuid([2; 16]), Some(&static_dir)).unwrap();
        assert!(r.bootstrap_voters.is_empty());
        assert_eq!(r.kraft_version, 0);
    }

    /// The service's leader hints are the voters' endpoints on the controller listener.
    #[test]
    fn controller_service_hints_on_the_controller_listener() {
        let c = three_voters(2);
        let s = controller_service(&c, &static_voter_set(&c).unwrap());
        assert_eq!(s.node_id, NodeId(2));
        assert_eq!(s.leader_endpoints.len(), 3);
        assert_eq!(s.leader_endpoints[1].host, "127.0.0.2");
        assert_eq!(s.leader_endpoints[1].port, 9093);
    }
}
