//! The key table: [`CONFIG_KEYS`] has one row per key — its name, type and range, default (or
//! "required"), doc string, which components read it, and how to parse it into its
//! [`NodeConfig`] field and print it back. Defaults live here and nowhere else: the node's
//! components get every value from a [`NodeConfig`] ([`super::components`]), and a
//! [`NodeConfig`] starts from these defaults ([`super::load`]).

use std::fmt;
use std::path::PathBuf;

use corum_types::NodeId;

use super::node_config::{NodeConfig, NODE_SHARDS_MAX};
use super::ssl;
use super::values::{
    join, list_items, parse_listeners, parse_protocol_map, parse_roles, parse_voters, HostPort,
};
use crate::error::ValueError;

/// The type of a key's value, for validation messages and `--help-config`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// An integer in `min..=max`.
    Int {
        min: i64,
        max: i64,
    },
    Bool,
    Path,
    /// A comma-separated list; the text says of what.
    List(&'static str),
    /// A single value of the named form.
    Text(&'static str),
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::Int { min, max } if *max == i64::MAX => write!(f, "int >= {min}"),
            ValueType::Int { min, max } => write!(f, "int in [{min}, {max}]"),
            ValueType::Bool => f.write_str("true|false"),
            ValueType::Path => f.write_str("path"),
            ValueType::List(of) => write!(f, "list of {of}"),
            ValueType::Text(what) => f.write_str(what),
        }
    }
}

/// What reads a key: a component whose configuration [`super::components`] derives from it,
/// or the node itself (start-up checks, `corum format`, the metrics endpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reader {
    /// The node's start-up and format checks, the client and metrics listeners.
    Node,
    /// The Raft core ([`corum_raft::Config`]).
    Raft,
    /// The Raft driver ([`crate::driver::RaftDriverConfig`]): this replica, its voters,
    /// its directory and limits.
    RaftDriver,
    /// The metadata log ([`corum_engine::log::LogConfig`]).
    Log,
    /// The controller-to-controller transport ([`crate::peer::PeerNetworkConfig`]).
    PeerNetwork,
    /// The controller service ([`crate::service::ControllerServiceConfig`]).
    ControllerService,
    /// The controller state machine ([`corum_controller::ControllerConfig`]).
    Controller,
    /// The client-facing RPC server ([`crate::rpc_server::RpcServerConfig`]).
    RpcServer,
    /// The shards: placement ([`corum_runtime::PlacementSpec`]) and executors
    /// ([`corum_runtime::RuntimeConfig`]).
    Runtime,
}

impl fmt::Display for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reader::Node => "node",
            Reader::Raft => "raft",
            Reader::RaftDriver => "raft driver",
            Reader::Log => "log",
            Reader::PeerNetwork => "peer network",
            Reader::ControllerService => "controller service",
            Reader::Controller => "controller",
            Reader::RpcServer => "rpc server",
            Reader::Runtime => "runtime",
        })
    }
}

/// One configuration key: the single description every other part of the configuration is
/// driven by.
pub struct ConfigKey {
    pub name: &'static str,
    pub value_type: ValueType,
    /// The default as text, or `None` if the key is required.
    pub default: Option<&'static str>,
    pub doc: &'static str,
    /// Who reads the value (see [`Reader`]).
    pub readers: &'static [Reader],
    pub(super) set: fn(&mut NodeConfig, &str) -> Result<(), ValueError>,
    get: fn(&NodeConfig) -> String,
}

impl ConfigKey {
    pub fn is_required(&self) -> bool {
        self.default.is_none()
    }

    /// The value of this key in `config`, as properties text.
    pub fn value_of(&self, config: &NodeConfig) -> String {
        (self.get)(config)
    }
}

impl fmt::Debug for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigKey")
            .field("name", &self.name)
            .field("value_type", &self.value_type)
            .field("default", &self.default)
            .field("readers", &self.readers)
            .finish()
    }
}

fn parse_int<T>(v: &str, min: i64, max: i64) -> Result<T, ValueError>
where
    T: TryFrom<i64>,
{
    let n: i64 = v
        .trim()
        .parse()
        .map_err(|_| ValueError::NotAnInteger { min, max })?;
    if n < min || n > max {
        return Err(ValueError::OutOfRange { min, max });
    }
    T::try_from(n).map_err(|_| ValueError::OutOfRange { min, max })
}

fn parse_bool(v: &str) -> Result<bool, ValueError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ValueError::NotABool),
    }
}

/// An integer key: `$name` parsed into field `$field` of type `$ty` within `[$min, $max]`.
macro_rules! int_key {
    ($name:literal, $field:ident, $ty:ty, $min:expr, $max:expr, $default:literal, $readers:expr, $doc:literal) => {
        ConfigKey {
            name: $name,
            value_type: ValueType::Int {
                min: $min as i64,
                max: $max as i64,
            },
            default: Some($default),
            doc: $doc,
            readers: $readers,
            set: |c, v| {
                c.$field = parse_int::<$ty>(v, $min as i64, $max as i64)?;
                Ok(())
            },
            get: |c| c.$field.to_string(),
        }
    };
}

/// A TLS key (`ssl.*`): its text, checked by `$check` ([`super::ssl`]), kept as given in
/// [`NodeConfig::ssl`]; `listener.name.<listener>.` before it sets one listener's value.
macro_rules! ssl_key {
    ($name:literal, $type:expr, $check:path, $default:literal, $doc:literal) => {
        ConfigKey {
            name: $name,
            value_type: $type,
            default: Some($default),
            doc: $doc,
            readers: &[Reader::Node],
            set: |c, v| {
                let v = $check(v)?;
                c.ssl.insert($name, v);
                Ok(())
            },
            get: |c| c.ssl.get($name).cloned().unwrap_or_default(),
        }
    };
}

/// `max.connections.per.ip.overrides`: `IP:COUNT` items (an IPv6 address in brackets or not;
/// the count follows the last colon).
fn parse_ip_counts(
    v: &str,
) -> Result<std::collections::BTreeMap<std::net::IpAddr, u32>, ValueError> {
    let mut out = std::collections::BTreeMap::new();
    for item in list_items(v) {
        let bad = || ValueError::Malformed {
            text: item.to_owned(),
            expected: "IP:COUNT (an address, not a host name)",
        };
        let (ip, count) = item.rsplit_once(':').ok_or_else(bad)?;
        let ip = ip.trim_start_matches('[').trim_end_matches(']');
        let ip: std::net::IpAddr = ip.parse().map_err(|_| bad())?;
        let count: u32 = parse_int(count, 0, i32::MAX as i64)?;
        out.insert(ip, count);
    }
    Ok(out)
}

const MIB: i64 = 1 << 20;
const HOUR_MS: i64 = 3_600_000;

use Reader::{
    Controller as CONTROLLER, ControllerService as SERVICE, Log as LOG, Node as NODE,
    PeerNetwork as PEER, Raft as RAFT, RaftDriver as DRIVER, RpcServer as SERVER,
    Runtime as RUNTIME,
};

/// Every key a node accepts, in the order `--help-config` prints them.
pub const CONFIG_KEYS: &[ConfigKey] = &[
    ConfigKey {
        name: "node.id",
        value_type: ValueType::Int {
            min: 0,
            max: u32::MAX as i64,
        },
        default: None,
        doc: "This node's id; controllers and brokers share one id space.",
        readers: &[NODE, DRIVER, SERVICE, PEER, SERVER],
        set: |c, v| {
            c.node_id = NodeId(parse_int::<u32>(v, 0, u32::MAX as i64)?);
            Ok(())
        },
        get: |c| c.node_id.to_string(),
    },
    ConfigKey {
        name: "process.roles",
        value_type: ValueType::List("roles (controller)"),
        default: None,
        doc: "What this node does. Only `controller` is supported: brokers are separate processes.",
        readers: &[NODE],
        set: |c, v| {
            c.process_roles = parse_roles(v)?;
            Ok(())
        },
        get: |c| join(&c.process_roles),
    },
    ConfigKey {
        name: "listeners",
        value_type: ValueType::List("NAME://HOST:PORT"),
        default: None,
        doc: "Addresses this node listens on, e.g. CONTROLLER://127.0.0.1:9093 (an empty host means every interface).",
        readers: &[NODE, DRIVER],
        set: |c, v| {
            c.listeners = parse_listeners(v)?;
            Ok(())
        },
        get: |c| join(&c.listeners),
    },
    ConfigKey {
        name: "controller.listener.names",
        value_type: ValueType::List("listener names"),
        default: None,
        doc: "Which of `listeners` serve the controller protocol (Raft and controller RPCs); the first is advertised to voters.",
        readers: &[NODE, DRIVER, SERVICE],
        set: |c, v| {
            let names: Vec<String> = list_items(v).map(str::to_ascii_uppercase).collect();
            if names.is_empty() {
                return Err(ValueError::Empty {
                    expected: "name at least one listener",
                });
            }
            c.controller_listener_names = names;
            Ok(())
        },
        get: |c| c.controller_listener_names.join(","),
    },
    ConfigKey {
        name: "corum.client.listener.name",
        value_type: ValueType::Text("listener name"),
        default: Some("CLIENT"),
        doc: "Which of `listeners` serves broker and admin RPCs (`corum run` needs it; it must not be a controller listener, which carries Raft).",
        readers: &[NODE],
        set: |c, v| {
            let name = v.trim().to_ascii_uppercase();
            if name.is_empty() {
                return Err(ValueError::Empty {
                    expected: "name a listener",
                });
            }
            c.client_listener_name = name;
            Ok(())
        },
        get: |c| c.client_listener_name.clone(),
    },
    ConfigKey {
        name: "corum.kafka.listener.names",
        value_type: ValueType::List("listener names"),
        default: Some("KAFKA"),
        doc: "Which of `listeners` speak Kafka's wire protocol (admin APIs for Kafka's clients and tools); a name not among `listeners` opens nothing.",
        readers: &[NODE],
        set: |c, v| {
            c.kafka_listener_names = list_items(v).map(str::to_ascii_uppercase).collect();
            Ok(())
        },
        get: |c| c.kafka_listener_names.join(","),
    },
    ConfigKey {
        name: "advertised.listeners",
        value_type: ValueType::List("NAME://HOST:PORT"),
        default: Some(""),
        doc: "Where clients reach this node's listeners, when that differs from `listeners` (a host of 0.0.0.0 cannot be reached); empty means `listeners`, with an empty or wildcard host replaced by this machine's host name. The controller listener's entry is where the other controllers reach this one in a dynamic quorum (formatted, or announced to the leader); there a wildcard is refused rather than replaced.",
        readers: &[NODE, DRIVER],
        set: |c, v| {
            c.advertised_listeners = if v.trim().is_empty() {
                Vec::new()
            } else {
                parse_listeners(v)?
            };
            Ok(())
        },
        get: |c| join(&c.advertised_listeners),
    },
    ConfigKey {
        name: "listener.security.protocol.map",
        value_type: ValueType::List("NAME:PROTOCOL"),
        default: Some("CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT,KAFKA:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
        doc: "The security protocol of each listener name (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), as in Kafka; every listener must be mapped.",
        readers: &[NODE],
        set: |c, v| {
            c.listener_security_protocols = parse_protocol_map(v)?;
            Ok(())
        },
        get: |c| {
            c.listener_security_protocols
                .iter()
                .map(|(n, p)| format!("{n}:{p}"))
                .collect::<Vec<_>>()
                .join(",")
        },
    },
    ConfigKey {
        name: "controller.quorum.voters",
        value_type: ValueType::List("ID@HOST:PORT[:DIRECTORY_ID]"),
        default: Some(""),
        doc: "A static voter set. Leave empty for a dynamic quorum (KIP-853), whose voters come from the bootstrap checkpoint written by `corum format` and later VotersRecords.",
        readers: &[NODE, DRIVER],
        set: |c, v| {
            c.quorum_voters = parse_voters(v)?;
            Ok(())
        },
        get: |c| join(&c.quorum_voters),
    },
    ConfigKey {
        name: "controller.quorum.bootstrap.servers",
        value_type: ValueType::List("HOST:PORT"),
        default: Some(""),
        doc: "Controller endpoints to ask for the current leader (dynamic quorum, KIP-853): clients and a controller that is not a voter (observer) ask one of them.",
        readers: &[NODE, DRIVER],
        set: |c, v| {
            c.quorum_bootstrap_servers = list_items(v)
                .map(str::parse::<HostPort>)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(())
        },
        get: |c| join(&c.quorum_bootstrap_servers),
    },
    ConfigKey {
        name: "authorizer.class.name",
        value_type: ValueType::Text("empty, or org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
        default: Some(""),
        doc: "The authorizer of the Kafka listeners: empty for none (every request allowed, the ACL APIs answer SECURITY_DISABLED), or Kafka's StandardAuthorizer, which authorizes every request against the ACLs in the metadata log.",
        readers: &[NODE],
        set: |c, v| {
            let v = v.trim();
            if !v.is_empty() && v != super::node_config::STANDARD_AUTHORIZER {
                return Err(ValueError::Malformed {
                    text: v.to_owned(),
                    expected: "empty, or org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                });
            }
            c.authorizer_class_name = v.to_owned();
            Ok(())
        },
        get: |c| c.authorizer_class_name.clone(),
    },
    ConfigKey {
        name: "super.users",
        value_type: ValueType::Text("principals separated by ';' (User:admin;User:broker)"),
        default: Some(""),
        doc: "Principals allowed every operation whatever the ACLs say (with an authorizer).",
        readers: &[NODE],
        set: |c, v| {
            let users = corum_controller::acl::AuthorizerConfig::parse_super_users(v);
            for u in &users {
                corum_controller::acl::check_principal(u).map_err(|_| ValueError::Malformed {
                    text: u.clone(),
                    expected: "a principal Type:name",
                })?;
            }
            c.super_users = users;
            Ok(())
        },
        get: |c| c.super_users.join(";"),
    },
    ConfigKey {
        name: "allow.everyone.if.no.acl.found",
        value_type: ValueType::Bool,
        default: Some("false"),
        doc: "With an authorizer: a resource no ACL matches is open to everyone (else closed to all but super users).",
        readers: &[NODE],
        set: |c, v| {
            c.allow_everyone_if_no_acl_found = parse_bool(v)?;
            Ok(())
        },
        get: |c| c.allow_everyone_if_no_acl_found.to_string(),
    },
    ConfigKey {
        name: "controller.quorum.auto.join.enable",
        value_type: ValueType::Bool,
        default: Some("false"),
        doc: "A controller that is not a voter of its dynamic quorum asks the leader to add it once it has caught up (KIP-853), first asking to remove a voter with its node id and another directory id (its replaced disk). Stop a controller before removing it for good, or it joins again.",
        readers: &[RAFT],
        set: |c, v| {
            c.quorum_auto_join_enable = parse_bool(v)?;
            Ok(())
        },
        get: |c| c.quorum_auto_join_enable.to_string(),
    },
    ConfigKey {
        name: "metadata.log.dir",
        value_type: ValueType::Path,
        default: None,
        doc: "Directory of meta.properties, quorum-state and the @metadata-0 log.",
        readers: &[NODE, DRIVER],
        set: |c, v| {
            if v.trim().is_empty() {
                return Err(ValueError::Empty {
                    expected: "name a directory",
                });
            }
            c.metadata_log_dir = PathBuf::from(v.trim());
            Ok(())
        },
        get: |c| c.metadata_log_dir.display().to_string(),
    },
    int_key!(
        "controller.quorum.election.timeout.ms",
        election_timeout_ms,
        u64,
        1,
        HOUR_MS,
        "1000",
        &[RAFT],
        "Base election timeout: a voter that hears from no leader waits a random time in [t, 2t) before a pre-vote."
    ),
    int_key!(
        "controller.quorum.fetch.timeout.ms",
        fetch_timeout_ms,
        u64,
        1,
        HOUR_MS,
        "2000",
        &[RAFT],
        "Check-quorum: a leader that has not heard from a majority within this resigns; a follower that has not heard from its leader starts an election."
    ),
    int_key!(
        "controller.quorum.election.backoff.max.ms",
        election_backoff_max_ms,
        u64,
        1,
        HOUR_MS,
        "1000",
        &[RAFT],
        "Longest random back-off after a lost election round."
    ),
    int_key!(
        "controller.quorum.request.timeout.ms",
        quorum_request_timeout_ms,
        u64,
        1,
        HOUR_MS,
        "2000",
        &[RAFT],
        "A Raft request between controllers unanswered for this long is given up (an append sends its follower back to probing; a fetch is sent again). Client requests have their own deadline: corum.controller.request.timeout.ms."
    ),
    int_key!(
        "controller.quorum.retry.backoff.ms",
        quorum_retry_backoff_ms,
        u64,
        1,
        HOUR_MS,
        "20",
        &[RAFT],
        "A follower whose snapshot download ended without a snapshot (a refused chunk, a snapshot the leader no longer has) waits this long before fetching again, doubled per such download in a row, at most controller.quorum.request.timeout.ms."
    ),
    int_key!(
        "broker.session.timeout.ms",
        broker_session_timeout_ms,
        u64,
        1,
        HOUR_MS,
        "9000",
        &[CONTROLLER],
        "A broker is fenced when it has not heartbeated for this long; also the lease in heartbeat responses."
    ),
    int_key!(
        "broker.heartbeat.interval.ms",
        broker_heartbeat_interval_ms,
        u64,
        1,
        HOUR_MS,
        "2000",
        &[CONTROLLER, SERVICE],
        "How often brokers should heartbeat; the active controller's periodic tick (fencing) runs this often too, but at least every 100 ms."
    ),
    int_key!(
        "metadata.log.segment.bytes",
        metadata_log_segment_bytes,
        u64,
        MIB,
        i64::MAX,
        "1073741824",
        &[LOG],
        "Size at which a log segment is rolled; a multiple of 4096."
    ),
    int_key!(
        "corum.log.durable.write.bytes.max",
        log_durable_write_bytes_max,
        u64,
        0,
        64 * MIB,
        "524288",
        &[LOG],
        "A group-commit round of the metadata log writing at most this many bytes makes them durable with one O_DSYNC write instead of a write and then an fdatasync (one disk request per commit instead of two in a row); larger rounds write in parallel and fdatasync once. 0: always fdatasync."
    ),
    int_key!(
        "metadata.log.max.record.bytes.between.snapshots",
        metadata_log_record_bytes_between_snapshots_max,
        u64,
        1,
        i64::MAX,
        "20971520",
        &[SERVICE],
        "Bytes of records appended since the last snapshot that trigger a new one."
    ),
    int_key!(
        "metadata.max.retention.bytes",
        metadata_retention_bytes_max,
        i64,
        -1,
        i64::MAX,
        "104857600",
        &[DRIVER],
        "Once the whole log segments below the newest snapshot hold more than this many bytes, the log start moves up to the snapshot and they are deleted (replicas and brokers behind it load the snapshot instead). -1: the log is never deleted (snapshots still shorten restarts)."
    ),
    int_key!(
        "metadata.max.idle.interval.ms",
        metadata_idle_interval_ms_max,
        u64,
        0,
        HOUR_MS,
        "500",
        &[SERVICE],
        "The active controller appends a NoOp record when the log has been idle this long, so brokers see the HWM advance (0: never)."
    ),
    int_key!(
        "socket.request.max.bytes",
        socket_request_bytes_max,
        u32,
        1024,
        i32::MAX,
        "104857600",
        &[SERVER],
        "Largest request frame accepted; a larger one is answered RequestTooLarge and its connection closed."
    ),
    int_key!(
        "corum.socket.response.max.bytes",
        socket_response_bytes_max,
        u32,
        1024,
        i32::MAX,
        "16777216",
        &[SERVER],
        "Largest response frame sent to a client; a larger answer is replaced by an error."
    ),
    int_key!(
        "num.partitions",
        num_partitions,
        u32,
        1,
        1_000_000,
        "1",
        &[CONTROLLER],
        "Partitions of a topic created with a partition count of -1."
    ),
    int_key!(
        "default.replication.factor",
        default_replication_factor,
        u16,
        1,
        i16::MAX,
        "1",
        &[CONTROLLER],
        "Replicas per partition of a topic created with a replication factor of -1."
    ),
    int_key!(
        "min.insync.replicas",
        min_insync_replicas,
        u16,
        1,
        i16::MAX,
        "1",
        &[CONTROLLER],
        "The min ISR of topics that set none (nor the cluster default), for eligible leader replicas (KIP-966); the first controller of a cluster formatted with them writes it as the cluster default, as Kafka's does."
    ),
    ConfigKey {
        name: "corum.cores",
        value_type: ValueType::List("cores or ranges (0-1), at most 2"),
        default: Some(""),
        doc: "CPU cores of this node's shards: two cores give a worker shard (network, Raft, the log) and a controller shard; one core runs both on one shard. A node has no work for more. Empty: two of the cores the process may use (the lowest and the highest), or the one it has.",
        readers: &[RUNTIME],
        set: |c, v| {
            c.cores = if v.trim().is_empty() {
                None
            } else {
                let cores: super::values::CoreSet = v.parse()?;
                if cores.0.len() > NODE_SHARDS_MAX {
                    return Err(ValueError::TooManyCores {
                        count: cores.0.len(),
                        max: NODE_SHARDS_MAX,
                    });
                }
                Some(cores)
            };
            Ok(())
        },
        get: |c| c.cores.as_ref().map(ToString::to_string).unwrap_or_default(),
    },
    ConfigKey {
        name: "corum.controller.core",
        value_type: ValueType::Text("a core id, or empty"),
        default: Some(""),
        doc: "The core of the controller state machine's shard (empty: the highest of corum.cores).",
        readers: &[RUNTIME],
        set: |c, v| {
            c.controller_core = if v.trim().is_empty() {
                None
            } else {
                Some(parse_int::<u32>(
                    v,
                    0,
                    super::values::CORE_MAX.into(),
                )?)
            };
            Ok(())
        },
        get: |c| c.controller_core.map(|n| n.to_string()).unwrap_or_default(),
    },
    ConfigKey {
        name: "corum.no.pin",
        value_type: ValueType::Bool,
        default: Some("false"),
        doc: "Run shards unpinned (tests, laptops, CI).",
        readers: &[RUNTIME],
        set: |c, v| {
            c.no_pin = parse_bool(v)?;
            Ok(())
        },
        get: |c| c.no_pin.to_string(),
    },
    int_key!(
        "corum.spin.before.park.us",
        spin_before_park_us,
        u64,
        0,
        10_000,
        "0",
        &[RUNTIME],
        "Microseconds an idle shard polls for work before it sleeps. Saves the wake-up of a sleeping core on each request (tens of microseconds on virtual machines) where every shard has a core of its own; on shared cores it steals time from the others (three nodes on two cores: 50 us took the 1-client p50 from 730 to 960 us)."
    ),
    int_key!(
        "corum.raft.heartbeat.interval.ms",
        raft_heartbeat_interval_ms,
        u64,
        1,
        HOUR_MS,
        "250",
        &[RAFT],
        "The Raft leader sends an empty append to an idle follower this often (at most half the election timeout)."
    ),
    int_key!(
        "corum.raft.high.watermark.linger.ms",
        raft_hwm_linger_ms,
        u64,
        0,
        HOUR_MS,
        "10",
        &[RAFT],
        "A newer high watermark with no entries to send goes to a follower this long after it moved, unless the next entries carry it sooner (0: at once). At low load this halves the Raft messages per commit; a follower then learns of a commit up to this late, which only delays its own replay (clients are answered by the leader at commit). At most corum.raft.heartbeat.interval.ms."
    ),
    int_key!(
        "corum.raft.append.inflight.count.max",
        raft_append_inflight_count_max,
        u32,
        1,
        65_536,
        "16",
        &[RAFT],
        "Appends in flight per follower (pipelining depth)."
    ),
    int_key!(
        "corum.raft.append.inflight.bytes.max",
        raft_append_inflight_bytes_max,
        u64,
        1024,
        i64::MAX,
        "8388608",
        &[RAFT],
        "Payload bytes in flight per follower."
    ),
    int_key!(
        "corum.raft.batch.bytes.max",
        raft_batch_bytes_max,
        u32,
        1024,
        i32::MAX,
        "1048576",
        &[RAFT, LOG, PEER, SERVICE],
        "Payload bytes per proposed batch and per append or fetch response; the log's frames and the peer connections' frames are sized for it."
    ),
    int_key!(
        "corum.raft.fetch.wait.max.ms",
        raft_fetch_wait_ms_max,
        u64,
        0,
        HOUR_MS,
        "500",
        &[RAFT],
        "Longest time the leader holds a caught-up observer's Fetch (long-poll); below the fetch timeout."
    ),
    int_key!(
        "corum.raft.observer.fetch.interval.ms",
        raft_observer_fetch_interval_ms,
        u64,
        0,
        HOUR_MS,
        "20",
        &[RAFT],
        "An observer's Fetch (a Kafka broker or a corum client following the metadata log) is answered at most this often while it is caught up, and woken by a newer high watermark rather than by uncommitted entries (0: at once, on either). Under a steady write load a commit lands every millisecond or so, and answering each observer at each one costs the leader a request per observer per commit; an observer then sees a commit up to this late (only under load: the first commit after a quieter spell is answered at once). Each answer costs the leader and the broker a fixed part besides its records, so fewer, larger answers cost both less per write (with 3 Kafka brokers under the configs workload: 20 ms against 5 ms halved their fetches, and cut the brokers' CPU per write by a fifth). At most corum.raft.fetch.wait.max.ms."
    ),
    int_key!(
        "corum.raft.snapshot.chunk.bytes.max",
        raft_snapshot_chunk_bytes_max,
        u32,
        1024,
        i32::MAX,
        "1048576",
        &[RAFT, PEER],
        "Bytes of snapshot per FetchSnapshot response (to a follower or an observer)."
    ),
    int_key!(
        "corum.raft.snapshot.bytes.max",
        raft_snapshot_bytes_max,
        u64,
        1024,
        1_i64 << 30,
        "1073741824",
        &[RAFT],
        "The largest snapshot a follower downloads from the leader (it is held in memory until installed); a larger one is refused at its first chunk. At most the snapshot file limit, 1 GiB."
    ),
    int_key!(
        "corum.raft.payload.cache.bytes.max",
        raft_payload_cache_bytes_max,
        u64,
        0,
        i64::MAX,
        "67108864",
        &[RAFT],
        "Payload bytes of recent batches the Raft core keeps in memory to send to followers and observers; older batches are read back from the log."
    ),
    int_key!(
        "corum.raft.uncommitted.records.max",
        raft_uncommitted_records_max,
        u64,
        1,
        1 << 30,
        "4096",
        &[DRIVER],
        "The leader takes no new proposal while this many records are appended but not committed (proposers wait): a leader flooded faster than it replicates would otherwise starve its followers and lose leadership."
    ),
    int_key!(
        "corum.controller.request.timeout.ms",
        controller_request_timeout_ms,
        u64,
        1,
        HOUR_MS,
        "2000",
        &[DRIVER],
        "Deadline of a client request that gives none (timeout 0): the call table answers a request still waiting then Timeout (its records may still commit)."
    ),
    int_key!(
        "corum.controller.request.timeout.max.ms",
        controller_request_timeout_ms_max,
        u64,
        1,
        HOUR_MS,
        "30000",
        &[DRIVER],
        "No client request waits longer than this, whatever timeout it gives."
    ),
    int_key!(
        "corum.controller.queue.capacity",
        controller_queue_capacity,
        u32,
        1,
        1_048_576,
        "4096",
        &[DRIVER],
        "Client requests queued on their way from the connections to the call table and the controller before the connections wait (then stop reading: back-pressure)."
    ),
    int_key!(
        "corum.connection.inflight.requests.max",
        connection_inflight_requests_max,
        u32,
        1,
        65_536,
        "256",
        &[SERVER],
        "Requests one connection may have outstanding (pipelined) before its reads pause."
    ),
    int_key!(
        "max.connections",
        connections_max,
        u32,
        1,
        i32::MAX,
        "20000",
        &[SERVER],
        "Connections open at once on the client listener and the Kafka listeners together; one more is closed at accept (logged, rate-limited), before anything is read or allocated for it. Connections between controllers do not count."
    ),
    int_key!(
        "max.connections.per.ip",
        connections_per_ip_max,
        u32,
        1,
        i32::MAX,
        "2147483647",
        &[SERVER],
        "Connections open at once from one client address on the client and Kafka listeners; one more is closed at accept."
    ),
    ConfigKey {
        name: "max.connections.per.ip.overrides",
        value_type: ValueType::List("IP:COUNT"),
        default: Some(""),
        doc: "Per-address exceptions to `max.connections.per.ip`, e.g. 127.0.0.1:200,10.0.0.7:50 (addresses only: host names are not resolved).",
        readers: &[SERVER],
        set: |c, v| {
            c.connections_per_ip_overrides = parse_ip_counts(v)?;
            Ok(())
        },
        get: |c| {
            c.connections_per_ip_overrides
                .iter()
                .map(|(ip, n)| match ip {
                    std::net::IpAddr::V4(_) => format!("{ip}:{n}"),
                    std::net::IpAddr::V6(_) => format!("[{ip}]:{n}"),
                })
                .collect::<Vec<_>>()
                .join(",")
        },
    },
    int_key!(
        "connections.max.idle.ms",
        connections_idle_ms_max,
        u64,
        1,
        i64::MAX,
        "600000",
        &[SERVER],
        "A client or Kafka connection on which no request arrives (or finishes arriving) for this long, while none of its requests is being served, is closed."
    ),
    int_key!(
        "corum.connection.send.timeout.ms",
        connection_send_timeout_ms,
        u64,
        1,
        i64::MAX,
        "30000",
        &[SERVER],
        "A write of answers to a client or Kafka connection that makes no progress for this long (the client stopped reading) closes the connection. Until then the connection is backpressured: its reader stops once `corum.connection.inflight.requests.max` requests wait for their answers to leave."
    ),
    int_key!(
        "corum.controller.partitions.per.topic.max",
        controller_partitions_per_topic_max,
        u32,
        1,
        1_000_000,
        "100000",
        &[CONTROLLER],
        "Most partitions one topic may have."
    ),
    int_key!(
        "corum.controller.replication.factor.max",
        controller_replication_factor_max,
        u16,
        1,
        i16::MAX,
        "16",
        &[CONTROLLER],
        "Most replicas per partition."
    ),
    int_key!(
        "corum.controller.records.per.batch.max",
        controller_records_per_batch_max,
        u32,
        8,
        1_000_000,
        "10000",
        &[CONTROLLER, SERVICE],
        "Most records one request may turn into (one Raft proposal), and most records of one batch of requests."
    ),
    int_key!(
        "corum.controller.producer.id.block.size",
        controller_producer_id_block_size,
        u64,
        1,
        1_048_576,
        "1000",
        &[CONTROLLER],
        "Producer ids handed out per AllocateProducerIds request."
    ),
    int_key!(
        "corum.controller.seed",
        controller_seed,
        u64,
        0,
        i64::MAX,
        "109330312817920",
        &[CONTROLLER, DRIVER],
        "Seed of the controller's deterministic generator (topic ids, placement start); the same on every node. Mixed with node.id, it also seeds Raft's election jitter."
    ),
    ConfigKey {
        name: "corum.metrics.listener",
        value_type: ValueType::Text("HOST:PORT, or empty"),
        default: Some(""),
        doc: "Where Prometheus metrics are served over HTTP (empty: no metrics endpoint).",
        readers: &[NODE],
        set: |c, v| {
            c.metrics_listener = if v.trim().is_empty() {
                None
            } else {
                Some(v.parse()?)
            };
            Ok(())
        },
        get: |c| {
            c.metrics_listener
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        },
    },
    ssl_key!(
        "ssl.keystore.type",
        ValueType::Text("PEM"),
        ssl::check_store_type,
        "PEM",
        "The keystore's format: PEM only (a JKS or PKCS12 store converts with `openssl pkcs12 -nodes`). Every `ssl.*` key may be given for one listener as `listener.name.<listener>.ssl.*`, which wins over the unprefixed one."
    ),
    ssl_key!(
        "ssl.keystore.location",
        ValueType::Path,
        ssl::check_text,
        "",
        "A PEM file holding this node's private key (PKCS#8) and certificate chain, leaf first: what a TLS listener presents, and what a controller presents when it dials the other controllers. Re-read when it changes."
    ),
    ssl_key!(
        "ssl.keystore.certificate.chain",
        ValueType::Text("PEM certificates"),
        ssl::check_text,
        "",
        "The certificate chain inline (PEM), with `ssl.keystore.key`, instead of `ssl.keystore.location`."
    ),
    ssl_key!(
        "ssl.keystore.key",
        ValueType::Text("PEM private key"),
        ssl::check_text,
        "",
        "The private key inline (PEM, unencrypted PKCS#8), with `ssl.keystore.certificate.chain`."
    ),
    ssl_key!(
        "ssl.truststore.type",
        ValueType::Text("PEM"),
        ssl::check_store_type,
        "PEM",
        "The truststore's format: PEM only."
    ),
    ssl_key!(
        "ssl.truststore.location",
        ValueType::Path,
        ssl::check_text,
        "",
        "A PEM file of the CA certificates peers' certificates must chain to: client certificates on a listener with `ssl.client.auth`, the other controllers' on the controller listener. Re-read when it changes."
    ),
    ssl_key!(
        "ssl.truststore.certificates",
        ValueType::Text("PEM certificates"),
        ssl::check_text,
        "",
        "The CA certificates inline (PEM), instead of `ssl.truststore.location`."
    ),
    ssl_key!(
        "ssl.client.auth",
        ValueType::Text("none|requested|required"),
        ssl::check_client_auth,
        "none",
        "Whether a TLS listener asks clients for a certificate: `required` refuses a client without one from the truststore's CAs, `requested` accepts one without. The controller listener always requires one (mutual TLS between controllers)."
    ),
    ssl_key!(
        "ssl.endpoint.identification.algorithm",
        ValueType::Text("https or empty"),
        ssl::check_endpoint_identification,
        "https",
        "`https`: a controller dialing another checks that the certificate names the address it dialed (an IP or DNS subject alternative name); empty checks the chain only."
    ),
    ssl_key!(
        "ssl.principal.mapping.rules",
        ValueType::Text("DEFAULT, or RULE:<pattern>/<replacement>/[L|U], separated by commas"),
        ssl::check_principal_mapping_rules,
        "DEFAULT",
        "How a client certificate becomes a principal, as Kafka's: rules tried in order on the subject's distinguished name (RFC 2253, e.g. `CN=admin,O=example`). `DEFAULT` keeps it (`User:CN=admin,O=example`); `RULE:<pattern>/<replacement>/` applies when the regular expression matches the whole name and gives `User:` and the replacement (`$1` inserts a group), lower-cased with `/L`, upper-cased with `/U` (e.g. `RULE:^CN=([^,]+),O=example$/$1/L,DEFAULT`). A certificate no rule applies to is refused at the handshake."
    ),
    ssl_key!(
        "sasl.enabled.mechanisms",
        ValueType::Text("PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, separated by commas"),
        super::sasl::check_mechanisms,
        "GSSAPI",
        "The SASL mechanisms of a Kafka listener mapped to SASL_PLAINTEXT or SASL_SSL (also as listener.name.<listener>.sasl.enabled.mechanisms). Kafka's default GSSAPI is not served: set PLAIN (users in listener.name.<listener>.plain.sasl.jaas.config) and/or SCRAM-SHA-256/SCRAM-SHA-512 (credentials in the metadata log: corum users)."
    ),
    ssl_key!(
        "connections.max.reauth.ms",
        ValueType::Text("milliseconds, 0 or more"),
        super::sasl::check_reauth_ms,
        "0",
        "How long a SASL authentication holds (KIP-368): a client re-authenticates before it ends, else its connection is closed at its next request; 0 for as long as the connection lives. Also as listener.name.<listener>.connections.max.reauth.ms."
    ),
];

/// The key named `name`, if it exists.
pub fn config_key(name: &str) -> Option<&'static ConfigKey> {
    CONFIG_KEYS.iter().find(|k| k.name == name)
}

/// The known key closest to an unknown one (for "did you mean"), if any is close.
pub(super) fn suggest(name: &str) -> Option<&'static str> {
    fn distance(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut prev: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut cur = vec![i + 1; b.len() + 1];
            for (j, cb) in b.iter().enumerate() {
                let sub = prev[j] + usize::from(ca != *cb);
                cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
            }
            prev = cur;
        }
        prev[b.len()]
    }
    // The distance is at least the difference of the lengths (key names are ASCII): keys too
    // far in length are skipped before the quadratic comparison, so a long unknown name (a
    // corrupt or hostile file) costs no more than a short one.
    let len = name.chars().count();
    let within = |d: usize, k: &str| d <= 3.max(k.len() / 6);
    CONFIG_KEYS
        .iter()
        .filter(|k| within(len.abs_diff(k.name.len()), k.name))
        .map(|k| (distance(name, k.name), k.name))
        .filter(|(d, k)| within(*d, k))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The table of keys as text: name, type and range, default, readers, doc (for
/// `corum run --help-config`).
pub fn help_text() -> String {
    let mut out = String::new();
    for key in CONFIG_KEYS {
        let default = match key.default {
            None => "required".to_owned(),
            Some("") => "empty".to_owned(),
            Some(d) => format!("default {d}"),
        };
        out.push_str(&format!(
            "{}  ({}; {}; read by {})\n    {}\n",
            key.name,
            key.value_type,
            default,
            key.readers
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            key.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key is listed once, has a doc and at least one reader, and every built-in default
    /// parses and prints back as itself.
    #[test]
    fn table_is_consistent() {
        let mut c = NodeConfig::for_tests();
        for key in CONFIG_KEYS {
            assert!(!key.doc.is_empty(), "{}", key.name);
            assert!(!key.readers.is_empty(), "{}", key.name);
            if let Some(d) = key.default {
                (key.set)(&mut c, d).unwrap_or_else(|e| panic!("{}: {e}", key.name));
                assert_eq!(key.value_of(&c), d, "key {}", key.name);
            }
            if let ValueType::Int { min, max } = key.value_type {
                assert!(min <= max, "{}", key.name);
            }
        }
        let mut names: Vec<_> = CONFIG_KEYS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CONFIG_KEYS.len(), "a key is listed twice");
    }

    /// `--help-config` prints every key with its type, range, default and readers.
    #[test]
    fn help_lists_every_key() {
        let help = help_text();
        assert!(
            help.contains("node.id  (int in [0, 4294967295]; required; read by node, raft driver, controller service, peer network, rpc server)"),
            "{help}"
        );
        assert!(help.contains(
            "controller.quorum.request.timeout.ms  (int in [1, 3600000]; default 2000; read by raft)"
        ));
        assert!(help.contains(
            "corum.controller.request.timeout.ms  (int in [1, 3600000]; default 2000; read by raft driver)"
        ));
        for key in CONFIG_KEYS {
            assert!(help.contains(&format!("\n{}  (", key.name)) || help.starts_with(key.name));
            assert!(help.contains(key.doc), "{}", key.name);
        }
    }

    /// Suggestions find a near miss and nothing for a far one.
    #[test]
    fn suggestions() {
        assert_eq!(
            suggest("controller.quorum.election.timeout"),
            Some("controller.quorum.election.timeout.ms")
        );
        assert_eq!(
            suggest("corum.raft.batch.byte.max"),
            Some("corum.raft.batch.bytes.max")
        );
        assert_eq!(suggest("zzz"), None);
    }

    #[test]
    fn a_long_unknown_name_is_cheap() {
        // Found by the properties_config fuzz target: an unknown key of N bytes was compared
        // with every key in O(N × key length) with an allocation per character, hundreds of
        // milliseconds for a few KiB. Keys too different in length are now skipped first.
        let name = "x".repeat(1 << 20);
        let started = std::time::Instant::now();
        assert_eq!(suggest(&name), None);
        assert_eq!(suggest(&format!("{name}node.id")), None);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "took {:?}",
            started.elapsed()
        );
    }
}
