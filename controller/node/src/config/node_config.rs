//! [`NodeConfig`]: a node's configuration, every value typed, and the rules between values
//! ([`NodeConfig::validate`]). Building one from text is [`super::load`]'s; what each
//! component takes from it is [`super::components`]'.

use std::collections::BTreeMap;
use std::path::PathBuf;

use corum_types::NodeId;

use super::values::{CoreSet, HostPort, Listener, ProcessRole, QuorumVoter, SecurityProtocol};
use crate::error::{ConfigError, RuleError};

type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// Shards a node runs: a worker (peer network, Raft, the log, the RPC server) and the
/// controller; on one core, one shard runs both. More cores would start shards with nothing
/// to run, so `corum.cores` may name at most this many.
pub const NODE_SHARDS_MAX: usize = 2;

/// A segment size must be a whole number of the log's 4 KiB blocks (O_DIRECT).
pub const SEGMENT_BYTES_MULTIPLE: u64 = 4096;

/// A node's configuration, every value typed. Build it with [`NodeConfig::load`] (or
/// [`NodeConfig::from_properties`], [`NodeConfig::for_tests`]); fields are public for reading,
/// and a value changed by hand should be re-checked with [`NodeConfig::validate`]. Each field is
/// set by one key of [`super::CONFIG_KEYS`], whose default is the field's default.
/// The `authorizer.class.name` that turns authorization on: Kafka's KRaft authorizer, whose
/// semantics [`corum_controller::acl::Authorizer`] implements.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    // Identity and quorum.
    pub node_id: NodeId,
    pub process_roles: Vec<ProcessRole>,
    pub listeners: Vec<Listener>,
    pub controller_listener_names: Vec<String>,
    pub client_listener_name: String,
    /// `corum.kafka.listener.names`: listeners that speak Kafka's wire protocol.
    pub kafka_listener_names: Vec<String>,
    /// `advertised.listeners`: where clients reach each listener (empty: as `listeners`).
    pub advertised_listeners: Vec<Listener>,
    /// `listener.security.protocol.map`: each listener name's security protocol.
    pub listener_security_protocols: Vec<(String, SecurityProtocol)>,
    /// `ssl.*`: each TLS key's value as given (its default when not), see [`super::ssl`].
    pub ssl: BTreeMap<&'static str, String>,
    /// `listener.name.<listener>.ssl.*`: per-listener values over `ssl` (listener names upper
    /// case, as in `listeners`).
    pub listener_ssl: BTreeMap<String, BTreeMap<&'static str, String>>,
    pub quorum_voters: Vec<QuorumVoter>,
    pub quorum_bootstrap_servers: Vec<HostPort>,
    /// `controller.quorum.auto.join.enable`.
    pub quorum_auto_join_enable: bool,
    pub metadata_log_dir: PathBuf,
    // Authorization (Kafka's keys).
    /// `authorizer.class.name`: empty (no authorizer: everything allowed) or Kafka's
    /// StandardAuthorizer ([`STANDARD_AUTHORIZER`]).
    pub authorizer_class_name: String,
    /// `super.users`: principals allowed everything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: bool,
    // Raft timing (KIP-595).
    pub election_timeout_ms: u64,
    pub fetch_timeout_ms: u64,
    pub election_backoff_max_ms: u64,
    /// `controller.quorum.request.timeout.ms`: Kafka's meaning, a Raft request between
    /// controllers unanswered this long is given up. Not the deadline of client requests
    /// (`controller_request_timeout_ms`).
    pub quorum_request_timeout_ms: u64,
    /// `controller.quorum.retry.backoff.ms`: Kafka's meaning, the pause before a failed Raft
    /// fetch is tried again (here: after a snapshot download that gave nothing).
    pub quorum_retry_backoff_ms: u64,
    /// `corum.raft.high.watermark.linger.ms` (Raft's `hwm_linger_ms`).
    pub raft_hwm_linger_ms: u64,
    // Brokers (KIP-631).
    pub broker_session_timeout_ms: u64,
    pub broker_heartbeat_interval_ms: u64,
    // Log and snapshots.
    pub metadata_log_segment_bytes: u64,
    pub log_durable_write_bytes_max: u64,
    pub metadata_log_record_bytes_between_snapshots_max: u64,
    pub metadata_retention_bytes_max: i64,
    pub metadata_idle_interval_ms_max: u64,
    // Requests.
    pub socket_request_bytes_max: u32,
    pub socket_response_bytes_max: u32,
    // Topic defaults.
    pub num_partitions: u32,
    pub default_replication_factor: u16,
    pub min_insync_replicas: u16,
    // Placement (corum.*).
    pub cores: Option<CoreSet>,
    pub controller_core: Option<u32>,
    pub no_pin: bool,
    pub spin_before_park_us: u64,
    // Raft pipelining and limits (corum.raft.*).
    pub raft_heartbeat_interval_ms: u64,
    pub raft_append_inflight_count_max: u32,
    pub raft_append_inflight_bytes_max: u64,
    pub raft_batch_bytes_max: u32,
    pub raft_fetch_wait_ms_max: u64,
    /// `corum.raft.observer.fetch.interval.ms` (Raft's `observer_fetch_interval_ms`).
    pub raft_observer_fetch_interval_ms: u64,
    pub raft_snapshot_chunk_bytes_max: u32,
    pub raft_snapshot_bytes_max: u64,
    pub raft_payload_cache_bytes_max: u64,
    pub raft_uncommitted_records_max: u64,
    // The controller service and the state machine (corum.controller.*).
    pub controller_request_timeout_ms: u64,
    pub controller_request_timeout_ms_max: u64,
    pub controller_queue_capacity: u32,
    pub connection_inflight_requests_max: u32,
    /// `max.connections` (node-wide, client-facing listeners).
    pub connections_max: u32,
    /// `max.connections.per.ip`.
    pub connections_per_ip_max: u32,
    /// `max.connections.per.ip.overrides`.
    pub connections_per_ip_overrides: std::collections::BTreeMap<std::net::IpAddr, u32>,
    /// `connections.max.idle.ms`.
    pub connections_idle_ms_max: u64,
    /// `corum.connection.send.timeout.ms`.
    pub connection_send_timeout_ms: u64,
    pub controller_partitions_per_topic_max: u32,
    pub controller_replication_factor_max: u16,
    pub controller_records_per_batch_max: u32,
    pub controller_producer_id_block_size: u64,
    pub controller_seed: u64,
    pub metrics_listener: Option<HostPort>,
}

impl NodeConfig {
    /// The authorizer's settings when one is configured (`authorizer.class.name`).
    pub fn authorizer(&self) -> Option<corum_controller::acl::AuthorizerConfig> {
        (!self.authorizer_class_name.is_empty()).then(|| corum_controller::acl::AuthorizerConfig {
            super_users: self.super_users.clone(),
            allow_everyone_if_no_acl_found: self.allow_everyone_if_no_acl_found,
        })
    }

    /// Checks the relations between values (each value alone was checked when parsed, within
    /// its key's range). Every rule a component's own `validate` has (the Raft core's, the
    /// controller's, the log engine's) is checked here too, under the key to change, so a
    /// configuration that passes derives every component ([`super::components`]).
    pub fn validate(&self) -> Result<()> {
        let invalid = |key, reason| Err(ConfigError::Invalid { key, reason });
        if self.process_roles != [ProcessRole::Controller] {
            return invalid("process.roles", RuleError::NotControllerOnly);
        }
        if self.listeners.is_empty() {
            return invalid("listeners", RuleError::NoListeners);
        }
        if self.controller_listener_names.is_empty() {
            return invalid("controller.listener.names", RuleError::NoControllerListener);
        }
        for name in &self.controller_listener_names {
            if !self.listeners.iter().any(|l| &l.name == name) {
                return invalid(
                    "controller.listener.names",
                    RuleError::NotAListener {
                        name: name.clone(),
                        listeners: self.listeners.iter().map(|l| l.name.clone()).collect(),
                    },
                );
            }
        }
        if self
            .controller_listener_names
            .contains(&self.client_listener_name)
        {
            return invalid(
                "corum.client.listener.name",
                RuleError::ClientListenerIsController {
                    name: self.client_listener_name.clone(),
                },
            );
        }
        for l in &self.listeners {
            match self.security_protocol(&l.name) {
                None => {
                    return invalid(
                        "listener.security.protocol.map",
                        RuleError::UnmappedListener {
                            name: l.name.clone(),
                        },
                    )
                }
                Some(SecurityProtocol::Plaintext) => {}
                Some(SecurityProtocol::Ssl) => {
                    self.listener_tls(&l.name)?;
                }
                Some(SecurityProtocol::SaslSsl | SecurityProtocol::SaslPlaintext)
                    if self.kafka_listener_names.contains(&l.name) =>
                {
                    self.listener_sasl(&l.name)?;
                    self.listener_tls(&l.name)?;
                }
                Some(protocol) => {
                    return invalid(
                        "listener.security.protocol.map",
                        RuleError::UnsupportedSecurityProtocol {
                            name: l.name.clone(),
                            protocol: protocol.to_string(),
                        },
                    )
                }
            }
        }
        self.check_listener_ssl()?;
        for name in &self.kafka_listener_names {
            if self.controller_listener_names.contains(name) || *name == self.client_listener_name {
                return invalid(
                    "corum.kafka.listener.names",
                    RuleError::ListenerServesTwo { name: name.clone() },
                );
            }
        }
        for a in &self.advertised_listeners {
            if !self.listeners.iter().any(|l| l.name == a.name) {
                return invalid(
                    "advertised.listeners",
                    RuleError::NotAListener {
                        name: a.name.clone(),
                        listeners: self.listeners.iter().map(|l| l.name.clone()).collect(),
                    },
                );
            }
            if a.endpoint.is_wildcard() || a.endpoint.port == 0 {
                return invalid(
                    "advertised.listeners",
                    RuleError::NotReachable {
                        listener: a.to_string(),
                    },
                );
            }
        }
        if self.quorum_voters.is_empty() && self.quorum_bootstrap_servers.is_empty() {
            return invalid("controller.quorum.voters", RuleError::NoQuorum);
        }
        if !self.quorum_voters.is_empty()
            && !self.quorum_voters.iter().any(|v| v.id == self.node_id)
        {
            return invalid(
                "controller.quorum.voters",
                RuleError::NotAVoter {
                    node_id: self.node_id,
                },
            );
        }
        if self.metadata_log_dir.as_os_str().is_empty() {
            return invalid("metadata.log.dir", RuleError::EmptyPath);
        }
        if self.metadata_log_segment_bytes % SEGMENT_BYTES_MULTIPLE != 0 {
            return invalid(
                "metadata.log.segment.bytes",
                RuleError::NotAMultiple {
                    value: self.metadata_log_segment_bytes,
                    multiple: SEGMENT_BYTES_MULTIPLE,
                },
            );
        }
        if self.fetch_timeout_ms < self.election_timeout_ms {
            return invalid(
                "controller.quorum.fetch.timeout.ms",
                RuleError::BelowOther {
                    value: self.fetch_timeout_ms,
                    other: "controller.quorum.election.timeout.ms",
                    other_value: self.election_timeout_ms,
                },
            );
        }
        if self.raft_heartbeat_interval_ms * 2 > self.election_timeout_ms {
            return invalid(
                "corum.raft.heartbeat.interval.ms",
                RuleError::AboveHalfOfOther {
                    value: self.raft_heartbeat_interval_ms,
                    other: "controller.quorum.election.timeout.ms",
                    other_value: self.election_timeout_ms,
                    why: "",
                },
            );
        }
        if self.raft_fetch_wait_ms_max >= self.fetch_timeout_ms {
            return invalid(
                "corum.raft.fetch.wait.max.ms",
                RuleError::NotBelowOther {
                    value: self.raft_fetch_wait_ms_max,
                    other: "controller.quorum.fetch.timeout.ms",
                    other_value: self.fetch_timeout_ms,
                },
            );
        }
        if self.raft_observer_fetch_interval_ms > self.raft_fetch_wait_ms_max {
            return invalid(
                "corum.raft.observer.fetch.interval.ms",
                RuleError::AboveOther {
                    value: self.raft_observer_fetch_interval_ms,
                    other: "corum.raft.fetch.wait.max.ms",
                    other_value: self.raft_fetch_wait_ms_max,
                    why: ": a caught-up observer's fetch is answered by then anyway",
                },
            );
        }
        if self.quorum_retry_backoff_ms > self.quorum_request_timeout_ms {
            return invalid(
                "controller.quorum.retry.backoff.ms",
                RuleError::AboveOther {
                    value: self.quorum_retry_backoff_ms,
                    other: "controller.quorum.request.timeout.ms",
                    other_value: self.quorum_request_timeout_ms,
                    why: ": the pause after a failed fetch stops doubling at the request timeout",
                },
            );
        }
        if self.raft_hwm_linger_ms > self.raft_heartbeat_interval_ms {
            return invalid(
                "corum.raft.high.watermark.linger.ms",
                RuleError::AboveOther {
                    value: self.raft_hwm_linger_ms,
                    other: "corum.raft.heartbeat.interval.ms",
                    other_value: self.raft_heartbeat_interval_ms,
                    why: ": a heartbeat carries the high watermark anyway",
                },
            );
        }
        if self.broker_heartbeat_interval_ms * 2 > self.broker_session_timeout_ms {
            return invalid(
                "broker.heartbeat.interval.ms",
                RuleError::AboveHalfOfOther {
                    value: self.broker_heartbeat_interval_ms,
                    other: "broker.session.timeout.ms",
                    other_value: self.broker_session_timeout_ms,
                    why: ": one lost heartbeat would fence a broker",
                },
            );
        }
        let batch = u64::from(self.raft_batch_bytes_max);
        let above = |value, other, other_value, why| {
            invalid(
                "corum.raft.batch.bytes.max",
                RuleError::AboveOther {
                    value,
                    other,
                    other_value,
                    why,
                },
            )
        };
        if batch > self.raft_append_inflight_bytes_max {
            return above(
                batch,
                "corum.raft.append.inflight.bytes.max",
                self.raft_append_inflight_bytes_max,
                "",
            );
        }
        if self.raft_batch_bytes_max > self.socket_request_bytes_max {
            return above(
                batch,
                "socket.request.max.bytes",
                self.socket_request_bytes_max.into(),
                ": an append could not be sent",
            );
        }
        if self.raft_batch_bytes_max > self.socket_response_bytes_max {
            return above(
                batch,
                "corum.socket.response.max.bytes",
                self.socket_response_bytes_max.into(),
                ": a fetch answer to an observer could not be sent",
            );
        }
        if self.raft_snapshot_chunk_bytes_max > self.socket_response_bytes_max {
            return invalid(
                "corum.raft.snapshot.chunk.bytes.max",
                RuleError::AboveOther {
                    value: self.raft_snapshot_chunk_bytes_max.into(),
                    other: "corum.socket.response.max.bytes",
                    other_value: self.socket_response_bytes_max.into(),
                    why: ": a snapshot chunk for an observer could not be sent",
                },
            );
        }
        if batch > self.metadata_log_segment_bytes {
            return invalid(
                "metadata.log.segment.bytes",
                RuleError::BelowOther {
                    value: self.metadata_log_segment_bytes,
                    other: "corum.raft.batch.bytes.max",
                    other_value: batch,
                },
            );
        }
        if self.controller_request_timeout_ms > self.controller_request_timeout_ms_max {
            return invalid(
                "corum.controller.request.timeout.ms",
                RuleError::AboveOther {
                    value: self.controller_request_timeout_ms,
                    other: "corum.controller.request.timeout.max.ms",
                    other_value: self.controller_request_timeout_ms_max,
                    why: "",
                },
            );
        }
        if self.num_partitions > self.controller_partitions_per_topic_max {
            return invalid(
                "num.partitions",
                RuleError::AboveOther {
                    value: self.num_partitions.into(),
                    other: "corum.controller.partitions.per.topic.max",
                    other_value: self.controller_partitions_per_topic_max.into(),
                    why: "",
                },
            );
        }
        if self.default_replication_factor > self.controller_replication_factor_max {
            return invalid(
                "default.replication.factor",
                RuleError::AboveOther {
                    value: self.default_replication_factor.into(),
                    other: "corum.controller.replication.factor.max",
                    other_value: self.controller_replication_factor_max.into(),
                    why: "",
                },
            );
        }
        if let (Some(core), Some(cores)) = (self.controller_core, &self.cores) {
            if !cores.0.contains(&core) {
                return invalid(
                    "corum.controller.core",
                    RuleError::ControllerCoreOutside {
                        core,
                        cores: cores.to_string(),
                    },
                );
            }
            if cores.0.len() < 2 {
                return invalid(
                    "corum.cores",
                    RuleError::NoWorkerCore {
                        cores: cores.to_string(),
                    },
                );
            }
        }
        Ok(())
    }

    /// The listener voters and brokers reach this node's controller on: the first of
    /// `controller.listener.names`.
    pub fn controller_listener(&self) -> &Listener {
        let name = self
            .controller_listener_names
            .first()
            .expect("validate() requires a controller listener name");
        self.listeners
            .iter()
            .find(|l| &l.name == name)
            .expect("validate() requires every controller listener name to be a listener")
    }

    /// The listener serving broker and admin RPCs (`corum.client.listener.name`), if
    /// `listeners` has it.
    /// The security protocol `listener.security.protocol.map` gives listener `name`.
    pub fn security_protocol(&self, name: &str) -> Option<SecurityProtocol> {
        self.listener_security_protocols
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, p)| p)
    }

    /// The listeners that speak Kafka's protocol (`corum.kafka.listener.names`).
    pub fn kafka_listeners(&self) -> impl Iterator<Item = &Listener> {
        self.listeners
            .iter()
            .filter(|l| self.kafka_listener_names.contains(&l.name))
    }

    /// Where the other controllers reach controller listener `name`: its `advertised.listeners`
    /// entry, else the listener's own address (a wildcard host there reaches no one: see
    /// [`HostPort::is_wildcard`]).
    pub fn controller_endpoint(&self, name: &str) -> Option<HostPort> {
        self.advertised_listeners
            .iter()
            .chain(&self.listeners)
            .find(|l| l.name == name)
            .map(|l| l.endpoint.clone())
    }

    /// Where clients reach listener `name`: its `advertised.listeners` entry, else its own
    /// address with an empty or wildcard host replaced by `host_name` and port 0 by
    /// `bound_port` (the port the node actually bound).
    pub fn advertised(&self, name: &str, bound_port: u16, host_name: &str) -> Option<HostPort> {
        if let Some(a) = self.advertised_listeners.iter().find(|l| l.name == name) {
            return Some(a.endpoint.clone());
        }
        let l = self.listeners.iter().find(|l| l.name == name)?;
        let host = if l.endpoint.is_wildcard() {
            host_name.to_owned()
        } else {
            l.endpoint.host.clone()
        };
        let port = if l.endpoint.port == 0 {
            bound_port
        } else {
            l.endpoint.port
        };
        Some(HostPort { host, port })
    }

    pub fn client_listener(&self) -> Option<&Listener> {
        self.listeners
            .iter()
            .find(|l| l.name == self.client_listener_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> Result<NodeConfig> {
        let sets: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        NodeConfig::for_tests().with_overrides(&sets)
    }

    /// Kafka's listener keys: every listener mapped to a security protocol (PLAINTEXT or SSL;
    /// SASL on Kafka listeners only), a Kafka listener that is neither the controller nor the client one,
    /// advertised listeners that name a listener and a reachable address; what is advertised.
    #[test]
    fn listener_keys() {
        let base = "CONTROLLER://127.0.0.1:9093,CLIENT://127.0.0.1:9094,KAFKA://:9092";
        let err = |pairs: &[(&str, &str)]| match with(pairs) {
            Err(ConfigError::Invalid { key, reason }) => (key, reason),
            other => panic!("{pairs:?}: expected a rule error, got {other:?}"),
        };
        assert_eq!(
            err(&[(
                "listeners",
                "CONTROLLER://127.0.0.1:9093,CLIENT://127.0.0.1:9094,RAFT://127.0.0.1:1"
            )]),
            (
                "listener.security.protocol.map",
                RuleError::UnmappedListener {
                    name: "RAFT".into()
                }
            )
        );
        assert_eq!(
            err(&[
                ("listeners", base),
                (
                    "listener.security.protocol.map",
                    "CONTROLLER:PLAINTEXT,CLIENT:SASL_SSL,KAFKA:PLAINTEXT"
                ),
            ]),
            (
                "listener.security.protocol.map",
                RuleError::UnsupportedSecurityProtocol {
                    name: "CLIENT".into(),
                    protocol: "SASL_SSL".into()
                }
            )
        );
        assert_eq!(
            err(&[
                ("listeners", base),
                ("corum.kafka.listener.names", "CLIENT")
            ]),
            (
                "corum.kafka.listener.names",
                RuleError::ListenerServesTwo {
                    name: "CLIENT".into()
                }
            )
        );
        assert_eq!(
            err(&[
                ("listeners", base),
                ("advertised.listeners", "KAFKA://0.0.0.0:9092")
            ]),
            (
                "advertised.listeners",
                RuleError::NotReachable {
                    listener: "KAFKA://0.0.0.0:9092".into()
                }
            )
        );
        assert!(matches!(
            err(&[("listeners", base), ("advertised.listeners", "OTHER://h:1")]),
            ("advertised.listeners", RuleError::NotAListener { .. })
        ));
        // Defaults: KAFKA speaks Kafka; a wildcard host advertises the host name, port 0 the
        // bound port; advertised.listeners wins.
        let c = with(&[(
            "listeners",
            "CONTROLLER://127.0.0.1:9093,CLIENT://127.0.0.1:9094,KAFKA://:0",
        )])
        .unwrap();
        assert_eq!(
            c.kafka_listeners()
                .map(|l| l.name.as_str())
                .collect::<Vec<_>>(),
            ["KAFKA"]
        );
        let a = c.advertised("KAFKA", 19092, "box1").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("box1", 19092));
        let c = with(&[
            ("listeners", base),
            ("advertised.listeners", "KAFKA://kafka.example:9092"),
        ])
        .unwrap();
        let a = c.advertised("KAFKA", 1, "box1").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("kafka.example", 9092));
        assert_eq!(
            c.security_protocol("KAFKA"),
            Some(SecurityProtocol::Plaintext)
        );
        // A configuration without a KAFKA listener has no Kafka listener.
        assert_eq!(NodeConfig::for_tests().kafka_listeners().count(), 0);
    }

    /// Each relation between keys is checked under the key to change, with a typed reason
    /// naming the other key and both values.
    #[test]
    fn relations() {
        let above = |value, other, other_value, why| RuleError::AboveOther {
            value,
            other,
            other_value,
            why,
        };
        type Sets = &'static [(&'static str, &'static str)];
        let cases: Vec<(Sets, &str, RuleError)> = vec![
            (
                &[("controller.listener.names", "OTHER")],
                "controller.listener.names",
                RuleError::NotAListener {
                    name: "OTHER".into(),
                    listeners: vec!["CONTROLLER".into(), "CLIENT".into()],
                },
            ),
            (
                &[("corum.client.listener.name", "CONTROLLER")],
                "corum.client.listener.name",
                RuleError::ClientListenerIsController {
                    name: "CONTROLLER".into(),
                },
            ),
            (
                &[("controller.quorum.voters", "")],
                "controller.quorum.voters",
                RuleError::NoQuorum,
            ),
            (
                &[("node.id", "4")],
                "controller.quorum.voters",
                RuleError::NotAVoter { node_id: NodeId(4) },
            ),
            (
                &[("metadata.log.segment.bytes", "1048577")],
                "metadata.log.segment.bytes",
                RuleError::NotAMultiple {
                    value: 1048577,
                    multiple: 4096,
                },
            ),
            (
                &[("controller.quorum.fetch.timeout.ms", "500")],
                "controller.quorum.fetch.timeout.ms",
                RuleError::BelowOther {
                    value: 500,
                    other: "controller.quorum.election.timeout.ms",
                    other_value: 1000,
                },
            ),
            (
                &[("corum.raft.heartbeat.interval.ms", "600")],
                "corum.raft.heartbeat.interval.ms",
                RuleError::AboveHalfOfOther {
                    value: 600,
                    other: "controller.quorum.election.timeout.ms",
                    other_value: 1000,
                    why: "",
                },
            ),
            (
                &[("corum.raft.fetch.wait.max.ms", "2000")],
                "corum.raft.fetch.wait.max.ms",
                RuleError::NotBelowOther {
                    value: 2000,
                    other: "controller.quorum.fetch.timeout.ms",
                    other_value: 2000,
                },
            ),
            (
                &[("broker.heartbeat.interval.ms", "5000")],
                "broker.heartbeat.interval.ms",
                RuleError::AboveHalfOfOther {
                    value: 5000,
                    other: "broker.session.timeout.ms",
                    other_value: 9000,
                    why: ": one lost heartbeat would fence a broker",
                },
            ),
            (
                &[("corum.raft.batch.bytes.max", "16777216")],
                "corum.raft.batch.bytes.max",
                above(
                    16 << 20,
                    "corum.raft.append.inflight.bytes.max",
                    8 << 20,
                    "",
                ),
            ),
            (
                &[("socket.request.max.bytes", "2048")],
                "corum.raft.batch.bytes.max",
                above(
                    1 << 20,
                    "socket.request.max.bytes",
                    2048,
                    ": an append could not be sent",
                ),
            ),
            (
                &[("corum.socket.response.max.bytes", "4096")],
                "corum.raft.batch.bytes.max",
                above(
                    1 << 20,
                    "corum.socket.response.max.bytes",
                    4096,
                    ": a fetch answer to an observer could not be sent",
                ),
            ),
            (
                &[
                    ("corum.socket.response.max.bytes", "2097152"),
                    ("corum.raft.snapshot.chunk.bytes.max", "4194304"),
                ],
                "corum.raft.snapshot.chunk.bytes.max",
                above(
                    4 << 20,
                    "corum.socket.response.max.bytes",
                    2 << 20,
                    ": a snapshot chunk for an observer could not be sent",
                ),
            ),
            (
                &[
                    ("metadata.log.segment.bytes", "1048576"),
                    ("corum.raft.batch.bytes.max", "2097152"),
                ],
                "metadata.log.segment.bytes",
                RuleError::BelowOther {
                    value: 1 << 20,
                    other: "corum.raft.batch.bytes.max",
                    other_value: 2 << 20,
                },
            ),
            (
                &[("corum.controller.request.timeout.ms", "40000")],
                "corum.controller.request.timeout.ms",
                above(40000, "corum.controller.request.timeout.max.ms", 30000, ""),
            ),
            (
                &[
                    ("num.partitions", "20"),
                    ("corum.controller.partitions.per.topic.max", "10"),
                ],
                "num.partitions",
                above(20, "corum.controller.partitions.per.topic.max", 10, ""),
            ),
            (
                &[("default.replication.factor", "20")],
                "default.replication.factor",
                above(20, "corum.controller.replication.factor.max", 16, ""),
            ),
            (
                &[("corum.cores", "0-1"), ("corum.controller.core", "3")],
                "corum.controller.core",
                RuleError::ControllerCoreOutside {
                    core: 3,
                    cores: "0-1".into(),
                },
            ),
            (
                &[("corum.cores", "1"), ("corum.controller.core", "1")],
                "corum.cores",
                RuleError::NoWorkerCore { cores: "1".into() },
            ),
        ];
        for (pairs, key, reason) in cases {
            assert_eq!(
                with(pairs).unwrap_err(),
                ConfigError::Invalid { key, reason },
                "{pairs:?}"
            );
        }
        let c = with(&[("corum.cores", "0-1"), ("corum.controller.core", "1")]).unwrap();
        assert_eq!(c.cores, Some(CoreSet(vec![0, 1])));
    }

    /// Values that only a hand edit can produce (every key's parser refuses them) are caught
    /// by validate() too.
    #[test]
    fn hand_edits_are_checked() {
        let mut c = NodeConfig::for_tests();
        c.process_roles.clear();
        assert_eq!(
            c.validate(),
            Err(ConfigError::Invalid {
                key: "process.roles",
                reason: RuleError::NotControllerOnly
            })
        );
        let mut c = NodeConfig::for_tests();
        c.listeners.clear();
        assert_eq!(
            c.validate(),
            Err(ConfigError::Invalid {
                key: "listeners",
                reason: RuleError::NoListeners
            })
        );
        let mut c = NodeConfig::for_tests();
        c.controller_listener_names.clear();
        assert_eq!(
            c.validate(),
            Err(ConfigError::Invalid {
                key: "controller.listener.names",
                reason: RuleError::NoControllerListener
            })
        );
        let mut c = NodeConfig::for_tests();
        c.metadata_log_dir = PathBuf::new();
        assert_eq!(
            c.validate(),
            Err(ConfigError::Invalid {
                key: "metadata.log.dir",
                reason: RuleError::EmptyPath
            })
        );
    }

    /// The listener accessors find the controller and client listeners by name.
    #[test]
    fn listeners_by_name() {
        let c = NodeConfig::for_tests();
        assert_eq!(c.controller_listener().endpoint.port, 9093);
        assert_eq!(c.client_listener().unwrap().endpoint.port, 9094);
        let c = with(&[("corum.client.listener.name", "OTHER")]).unwrap();
        assert!(c.client_listener().is_none());
    }
}
