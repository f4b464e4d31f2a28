//! The node configuration: Kafka's properties format, Kafka's key names where one exists, and
//! `corum.`-prefixed keys for what only corum has (core placement, pipelining limits, metrics).
//!
//! # Sources and precedence
//!
//! A [`NodeConfig`] is built by [`NodeConfig::load`] from an optional properties file and a list
//! of `--set key=value` overrides: built-in default < file < override. A key given twice in the
//! file is an error (one of the two lines is a mistake); an override may repeat a file key (that
//! is what it is for), and a later override wins over an earlier one.
//!
//! # The properties format
//!
//! As `java.util.Properties` reads it, minus the parts nobody uses in a server config:
//!
//! - one `key=value` per logical line; the key ends at the first unescaped `=`, `:` or
//!   whitespace; whitespace around the separator is dropped, and trailing whitespace of the value
//!   is trimmed too (Java keeps it; in a server config it is always a mistake);
//! - lines whose first non-blank character is `#` or `!` are comments; blank lines are skipped;
//! - a line ending in an odd number of backslashes continues on the next line (whose leading
//!   whitespace is dropped);
//! - escapes: `\t`, `\n`, `\r`, `\f`, `\uXXXX` (BMP, no surrogates), and `\` before any other
//!   character stands for that character (`\=`, `\:`, `\ `, `\\`, `\#`).
//!
//! # Keys
//!
//! [`CONFIG_KEYS`] is the one table of every key: its type, default (or "required"), doc string,
//! and how to parse and print it. Everything else (defaults, required-key checks, unknown-key
//! errors with a suggestion, `--help-config`, rendering back to properties) is driven from it.
//! Relations between keys are checked by [`NodeConfig::validate`].

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use corum_controller::ControllerConfig;
use corum_types::{NodeId, Uuid};

use crate::error::{ConfigError, ConfigSource};

type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// What a node does. Only `controller` exists so far; `broker` (KIP-631's combined mode) is
/// named so the error for it can say it is not supported yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcessRole {
    Controller,
}

impl fmt::Display for ProcessRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessRole::Controller => f.write_str("controller"),
        }
    }
}

/// A host and a port. IPv6 literals are written in brackets (`[::1]:9093`) and stored without.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    /// Parses `host:port` or `[v6]:port`. The host may be empty only if `allow_empty_host`
    /// (Kafka's listeners use an empty host for "every interface").
    fn parse_with(s: &str, allow_empty_host: bool) -> Result<Self, String> {
        let s = s.trim();
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("{s:?}: missing ']' after an IPv6 address"))?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| format!("{s:?}: expected ':PORT' after ']'"))?;
            (host, port)
        } else {
            s.rsplit_once(':')
                .ok_or_else(|| format!("{s:?}: expected HOST:PORT"))?
        };
        if host.is_empty() && !allow_empty_host {
            return Err(format!("{s:?}: empty host"));
        }
        if host.contains(|c: char| c.is_whitespace() || c == '/' || c == '@' || c == ',') {
            return Err(format!("{s:?}: invalid host {host:?}"));
        }
        if !s.starts_with('[') && host.contains(':') {
            return Err(format!(
                "{s:?}: write IPv6 addresses in brackets, e.g. [::1]:9093"
            ));
        }
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("{s:?}: invalid port {port:?} (expected 0..=65535)"))?;
        Ok(HostPort {
            host: host.to_owned(),
            port,
        })
    }
}

impl FromStr for HostPort {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        HostPort::parse_with(s, false)
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// One entry of `listeners`: `NAME://HOST:PORT`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Listener {
    pub name: String,
    pub endpoint: HostPort,
}

impl FromStr for Listener {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (name, rest) = s
            .split_once("://")
            .ok_or_else(|| format!("{s:?}: expected NAME://HOST:PORT"))?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "{s:?}: listener name {name:?} must be letters, digits and '_'"
            ));
        }
        Ok(Listener {
            name: name.to_ascii_uppercase(),
            endpoint: HostPort::parse_with(rest, true)?,
        })
    }
}

impl fmt::Display for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.name, self.endpoint)
    }
}

/// One voter of `controller.quorum.voters` (`ID@HOST:PORT`) or of `--initial-controllers`
/// (`ID@HOST:PORT:DIRECTORY_ID`, KIP-853).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuorumVoter {
    pub id: NodeId,
    pub endpoint: HostPort,
    /// The voter's directory id (replica UUID), when given.
    pub directory_id: Option<Uuid>,
}

impl FromStr for QuorumVoter {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (id, rest) = s
            .split_once('@')
            .ok_or_else(|| format!("{s:?}: expected ID@HOST:PORT[:DIRECTORY_ID]"))?;
        let id = id
            .parse::<NodeId>()
            .map_err(|_| format!("{s:?}: invalid node id {id:?}"))?;
        // Either HOST:PORT or HOST:PORT:DIRID; a bracketed IPv6 host hides its own colons.
        let tail_start = if rest.starts_with('[') {
            rest.find(']').map(|i| i + 1).unwrap_or(0)
        } else {
            0
        };
        let colons: Vec<usize> = rest[tail_start..]
            .match_indices(':')
            .map(|(i, _)| i + tail_start)
            .collect();
        let (endpoint, directory_id) = match colons.len() {
            1 => (rest, None),
            2 => {
                let (ep, dir) = rest.split_at(colons[1]);
                let dir = &dir[1..];
                let uuid = dir
                    .parse::<Uuid>()
                    .map_err(|_| format!("{s:?}: invalid directory id {dir:?} (expected 22 characters of URL-safe base64)"))?;
                if uuid.is_zero() {
                    return Err(format!("{s:?}: the all-zero directory id means none"));
                }
                (ep, Some(uuid))
            }
            _ => return Err(format!("{s:?}: expected ID@HOST:PORT[:DIRECTORY_ID]")),
        };
        let endpoint: HostPort = endpoint.parse()?;
        if endpoint.port == 0 {
            return Err(format!("{s:?}: a voter needs a fixed port, not 0"));
        }
        Ok(QuorumVoter {
            id,
            endpoint,
            directory_id,
        })
    }
}

impl fmt::Display for QuorumVoter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.id, self.endpoint)?;
        if let Some(d) = self.directory_id {
            write!(f, ":{d}")?;
        }
        Ok(())
    }
}

/// Parses a comma-separated voter list and checks that ids are unique.
pub fn parse_voters(s: &str) -> Result<Vec<QuorumVoter>, String> {
    let voters = list_items(s)
        .map(QuorumVoter::from_str)
        .collect::<Result<Vec<_>, _>>()?;
    for (i, v) in voters.iter().enumerate() {
        if voters[..i].iter().any(|w| w.id == v.id) {
            return Err(format!("voter id {} is listed twice", v.id));
        }
    }
    Ok(voters)
}

/// A set of CPU cores, written `0-3,6` (ranges and single cores, like `taskset -c`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CoreSet(pub Vec<u32>);

impl FromStr for CoreSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut cores = Vec::new();
        for item in list_items(s) {
            let (lo, hi) = match item.split_once('-') {
                Some((lo, hi)) => (lo.trim(), hi.trim()),
                None => (item, item),
            };
            let lo = lo
                .parse::<u32>()
                .map_err(|_| format!("invalid core {lo:?}"))?;
            let hi = hi
                .parse::<u32>()
                .map_err(|_| format!("invalid core {hi:?}"))?;
            if lo > hi {
                return Err(format!("range {item:?} runs backwards"));
            }
            if hi >= 4096 {
                return Err(format!("core {hi} is above 4095"));
            }
            cores.extend(lo..=hi);
        }
        if cores.is_empty() {
            return Err("empty core set".into());
        }
        cores.sort_unstable();
        cores.dedup();
        Ok(CoreSet(cores))
    }
}

impl fmt::Display for CoreSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Print maximal runs as ranges so the text parses back to the same set.
        let mut i = 0;
        let mut first = true;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

/// A node's configuration, every value typed. Build it with [`NodeConfig::load`] (or
/// [`NodeConfig::from_properties`]); fields are public for reading, and a value changed by hand
/// should be re-checked with [`NodeConfig::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    // Identity and quorum.
    pub node_id: NodeId,
    pub process_roles: Vec<ProcessRole>,
    pub listeners: Vec<Listener>,
    pub controller_listener_names: Vec<String>,
    pub client_listener_name: String,
    pub quorum_voters: Vec<QuorumVoter>,
    pub quorum_bootstrap_servers: Vec<HostPort>,
    pub metadata_log_dir: PathBuf,
    // Raft timing (KIP-595).
    pub election_timeout_ms: u64,
    pub fetch_timeout_ms: u64,
    pub election_backoff_max_ms: u64,
    pub request_timeout_ms: u64,
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
    // Topic defaults.
    pub num_partitions: u32,
    pub default_replication_factor: u16,
    // Placement (corum.*).
    pub cores: Option<CoreSet>,
    pub controller_core: Option<u32>,
    pub no_pin: bool,
    pub spin_before_park_us: u64,
    // Pipelining and limits (corum.*).
    pub raft_heartbeat_interval_ms: u64,
    pub raft_append_inflight_count_max: u32,
    pub raft_append_inflight_bytes_max: u64,
    pub raft_batch_bytes_max: u32,
    pub raft_fetch_wait_ms_max: u64,
    pub controller_queue_capacity: u32,
    pub connection_inflight_requests_max: u32,
    pub connections_max: u32,
    pub controller_partitions_per_topic_max: u32,
    pub controller_replication_factor_max: u16,
    pub controller_records_per_batch_max: u32,
    pub controller_producer_id_block_size: u64,
    pub controller_seed: u64,
    pub metrics_listener: Option<HostPort>,
}

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

/// One configuration key: the single description every other part of this module is driven by.
pub struct ConfigKey {
    pub name: &'static str,
    pub value_type: ValueType,
    /// The default as text, or `None` if the key is required.
    pub default: Option<&'static str>,
    pub doc: &'static str,
    set: fn(&mut NodeConfig, &str) -> Result<(), String>,
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
            .finish()
    }
}

fn parse_int<T>(v: &str, min: i64, max: i64) -> Result<T, String>
where
    T: TryFrom<i64>,
{
    let n: i64 = v
        .trim()
        .parse()
        .map_err(|_| format!("expected an integer in [{min}, {max}]"))?;
    if n < min || n > max {
        return Err(format!("must be in [{min}, {max}]"));
    }
    T::try_from(n).map_err(|_| format!("must be in [{min}, {max}]"))
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

fn list_items(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn join<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// An integer key: `$name` parsed into field `$field` of type `$ty` within `[$min, $max]`.
macro_rules! int_key {
    ($name:literal, $field:ident, $ty:ty, $min:expr, $max:expr, $default:literal, $doc:literal) => {
        ConfigKey {
            name: $name,
            value_type: ValueType::Int {
                min: $min as i64,
                max: $max as i64,
            },
            default: Some($default),
            doc: $doc,
            set: |c, v| {
                c.$field = parse_int::<$ty>(v, $min as i64, $max as i64)?;
                Ok(())
            },
            get: |c| c.$field.to_string(),
        }
    };
}

const MIB: i64 = 1 << 20;

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
        set: |c, v| {
            let mut roles = Vec::new();
            for r in list_items(v) {
                let role = match r.to_ascii_lowercase().as_str() {
                    "controller" => ProcessRole::Controller,
                    "broker" => {
                        return Err(
                            "role `broker` is not supported: corum nodes are controllers only (set process.roles=controller)"
                                .into(),
                        )
                    }
                    _ => return Err(format!("unknown role {r:?} (expected controller)")),
                };
                if roles.contains(&role) {
                    return Err(format!("role {r:?} listed twice"));
                }
                roles.push(role);
            }
            if roles.is_empty() {
                return Err("empty: set process.roles=controller".into());
            }
            c.process_roles = roles;
            Ok(())
        },
        get: |c| join(&c.process_roles),
    },
    ConfigKey {
        name: "listeners",
        value_type: ValueType::List("NAME://HOST:PORT"),
        default: None,
        doc: "Addresses this node listens on, e.g. CONTROLLER://127.0.0.1:9093 (an empty host means every interface).",
        set: |c, v| {
            let ls = list_items(v)
                .map(Listener::from_str)
                .collect::<Result<Vec<_>, _>>()?;
            if ls.is_empty() {
                return Err("empty: at least one listener is needed".into());
            }
            for (i, l) in ls.iter().enumerate() {
                if ls[..i].iter().any(|m| m.name == l.name) {
                    return Err(format!("listener name {} is used twice", l.name));
                }
            }
            c.listeners = ls;
            Ok(())
        },
        get: |c| join(&c.listeners),
    },
    ConfigKey {
        name: "controller.listener.names",
        value_type: ValueType::List("listener names"),
        default: None,
        doc: "Which of `listeners` serve the controller protocol (Raft and controller RPCs); the first is advertised to voters.",
        set: |c, v| {
            let names: Vec<String> = list_items(v).map(str::to_ascii_uppercase).collect();
            if names.is_empty() {
                return Err("empty: name at least one listener".into());
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
        set: |c, v| {
            let name = v.trim().to_ascii_uppercase();
            if name.is_empty() {
                return Err("empty: name a listener".into());
            }
            c.client_listener_name = name;
            Ok(())
        },
        get: |c| c.client_listener_name.clone(),
    },
    ConfigKey {
        name: "controller.quorum.voters",
        value_type: ValueType::List("ID@HOST:PORT[:DIRECTORY_ID]"),
        default: Some(""),
        doc: "A static voter set. Leave empty for a dynamic quorum (KIP-853), whose voters come from the bootstrap checkpoint written by `corum format` and later VotersRecords.",
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
        doc: "Controller endpoints to ask for the current leader (dynamic quorum, KIP-853).",
        set: |c, v| {
            c.quorum_bootstrap_servers = list_items(v)
                .map(HostPort::from_str)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(())
        },
        get: |c| join(&c.quorum_bootstrap_servers),
    },
    ConfigKey {
        name: "metadata.log.dir",
        value_type: ValueType::Path,
        default: None,
        doc: "Directory of meta.properties, quorum-state and the @metadata-0 log.",
        set: |c, v| {
            if v.trim().is_empty() {
                return Err("empty path".into());
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
        3_600_000,
        "1000",
        "Base election timeout: a voter that hears from no leader waits a random time in [t, 2t) before a pre-vote."
    ),
    int_key!(
        "controller.quorum.fetch.timeout.ms",
        fetch_timeout_ms,
        u64,
        1,
        3_600_000,
        "2000",
        "Check-quorum: a leader that has not heard from a majority within this resigns; a follower that has not heard from its leader starts an election."
    ),
    int_key!(
        "controller.quorum.election.backoff.max.ms",
        election_backoff_max_ms,
        u64,
        1,
        3_600_000,
        "1000",
        "Longest random back-off after a lost election round."
    ),
    int_key!(
        "controller.quorum.request.timeout.ms",
        request_timeout_ms,
        u64,
        1,
        3_600_000,
        "2000",
        "A Raft request unanswered for this long is given up (and the peer probed again)."
    ),
    int_key!(
        "broker.session.timeout.ms",
        broker_session_timeout_ms,
        u64,
        1,
        3_600_000,
        "9000",
        "A broker is fenced when it has not heartbeated for this long; also the lease in heartbeat responses."
    ),
    int_key!(
        "broker.heartbeat.interval.ms",
        broker_heartbeat_interval_ms,
        u64,
        1,
        3_600_000,
        "2000",
        "How often brokers should heartbeat; the active controller's periodic tick (fencing) runs this often too."
    ),
    int_key!(
        "metadata.log.segment.bytes",
        metadata_log_segment_bytes,
        u64,
        MIB,
        i64::MAX,
        "1073741824",
        "Size at which a log segment is rolled."
    ),
    int_key!(
        "corum.log.durable.write.bytes.max",
        log_durable_write_bytes_max,
        u64,
        0,
        64 * MIB,
        "524288",
        "A group-commit round of the metadata log writing at most this many bytes makes them durable with one O_DSYNC write instead of a write and then an fdatasync (one disk request per commit instead of two in a row); larger rounds write in parallel and fdatasync once. 0: always fdatasync."
    ),
    int_key!(
        "metadata.log.max.record.bytes.between.snapshots",
        metadata_log_record_bytes_between_snapshots_max,
        u64,
        1,
        i64::MAX,
        "20971520",
        "Bytes of records appended since the last snapshot that trigger a new one."
    ),
    int_key!(
        "metadata.max.retention.bytes",
        metadata_retention_bytes_max,
        i64,
        -1,
        i64::MAX,
        "104857600",
        "Once the whole log segments below the newest snapshot hold more than this many bytes, the log start moves up to the snapshot and they are deleted (replicas and brokers behind it load the snapshot instead). -1: the log is never deleted (snapshots still shorten restarts)."
    ),
    int_key!(
        "metadata.max.idle.interval.ms",
        metadata_idle_interval_ms_max,
        u64,
        0,
        3_600_000,
        "500",
        "The active controller appends a NoOp record when the log has been idle this long, so brokers see the HWM advance (0: never)."
    ),
    int_key!(
        "socket.request.max.bytes",
        socket_request_bytes_max,
        u32,
        1024,
        i32::MAX,
        "104857600",
        "Largest request frame accepted; a larger one is answered RequestTooLarge and its connection closed."
    ),
    int_key!(
        "num.partitions",
        num_partitions,
        u32,
        1,
        1_000_000,
        "1",
        "Partitions of a topic created with a partition count of -1."
    ),
    int_key!(
        "default.replication.factor",
        default_replication_factor,
        u16,
        1,
        i16::MAX,
        "1",
        "Replicas per partition of a topic created with a replication factor of -1."
    ),
    ConfigKey {
        name: "corum.cores",
        value_type: ValueType::List("cores or ranges (0-3,6)"),
        default: Some(""),
        doc: "CPU cores for this node's shards (empty: every core the process may use).",
        set: |c, v| {
            c.cores = if v.trim().is_empty() {
                None
            } else {
                Some(v.parse()?)
            };
            Ok(())
        },
        get: |c| c.cores.as_ref().map(ToString::to_string).unwrap_or_default(),
    },
    ConfigKey {
        name: "corum.controller.core",
        value_type: ValueType::Text("a core id, or empty"),
        default: Some(""),
        doc: "The core of the controller state machine's shard (empty: the last of corum.cores).",
        set: |c, v| {
            c.controller_core = if v.trim().is_empty() {
                None
            } else {
                Some(parse_int::<u32>(v, 0, 4095)?)
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
        "Microseconds an idle shard polls for work before it sleeps. Saves the wake-up of a sleeping core on each request (tens of microseconds on virtual machines) where every shard has a core of its own; on shared cores it steals time from the others (three nodes on two cores: 50 us took the 1-client p50 from 730 to 960 us)."
    ),
    int_key!(
        "corum.raft.heartbeat.interval.ms",
        raft_heartbeat_interval_ms,
        u64,
        1,
        3_600_000,
        "250",
        "The Raft leader sends an empty append to an idle follower this often (at most half the election timeout)."
    ),
    int_key!(
        "corum.raft.append.inflight.count.max",
        raft_append_inflight_count_max,
        u32,
        1,
        65_536,
        "16",
        "Appends in flight per follower (pipelining depth)."
    ),
    int_key!(
        "corum.raft.append.inflight.bytes.max",
        raft_append_inflight_bytes_max,
        u64,
        1024,
        i64::MAX,
        "8388608",
        "Payload bytes in flight per follower."
    ),
    int_key!(
        "corum.raft.batch.bytes.max",
        raft_batch_bytes_max,
        u32,
        1024,
        i32::MAX,
        "1048576",
        "Payload bytes per proposed batch and per append or fetch response."
    ),
    int_key!(
        "corum.raft.fetch.wait.max.ms",
        raft_fetch_wait_ms_max,
        u64,
        0,
        3_600_000,
        "500",
        "Longest time the leader holds a caught-up observer's Fetch (long-poll); below the fetch timeout."
    ),
    int_key!(
        "corum.controller.queue.capacity",
        controller_queue_capacity,
        u32,
        1,
        1_048_576,
        "4096",
        "Requests queued from the network shards to the controller core before the network stops reading (back-pressure)."
    ),
    int_key!(
        "corum.connection.inflight.requests.max",
        connection_inflight_requests_max,
        u32,
        1,
        65_536,
        "256",
        "Requests one connection may have outstanding (pipelined) before its reads pause."
    ),
    int_key!(
        "corum.connections.max",
        connections_max,
        u32,
        1,
        1_048_576,
        "20000",
        "Client connections accepted at once; more are refused."
    ),
    int_key!(
        "corum.controller.partitions.per.topic.max",
        controller_partitions_per_topic_max,
        u32,
        1,
        1_000_000,
        "100000",
        "Most partitions one topic may have."
    ),
    int_key!(
        "corum.controller.replication.factor.max",
        controller_replication_factor_max,
        u16,
        1,
        i16::MAX,
        "16",
        "Most replicas per partition."
    ),
    int_key!(
        "corum.controller.records.per.batch.max",
        controller_records_per_batch_max,
        u32,
        8,
        1_000_000,
        "10000",
        "Most records one request may turn into (one Raft proposal)."
    ),
    int_key!(
        "corum.controller.producer.id.block.size",
        controller_producer_id_block_size,
        u64,
        1,
        1_048_576,
        "1000",
        "Producer ids handed out per AllocateProducerIds request."
    ),
    int_key!(
        "corum.controller.seed",
        controller_seed,
        u64,
        0,
        i64::MAX,
        "109330312817920",
        "Seed of the controller's deterministic generator (topic ids, placement start); the same on every node."
    ),
    ConfigKey {
        name: "corum.metrics.listener",
        value_type: ValueType::Text("HOST:PORT, or empty"),
        default: Some(""),
        doc: "Where Prometheus metrics are served over HTTP (empty: no metrics endpoint).",
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
];

/// The key named `name`, if it exists.
pub fn config_key(name: &str) -> Option<&'static ConfigKey> {
    CONFIG_KEYS.iter().find(|k| k.name == name)
}

/// The known key closest to an unknown one (for "did you mean"), if any is close.
fn suggest(name: &str) -> Option<&'static str> {
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
    CONFIG_KEYS
        .iter()
        .map(|k| (distance(name, k.name), k.name))
        .filter(|(d, k)| *d <= 3.max(k.len() / 6))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// One `key=value` entry of a properties file, with the line it starts on (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyEntry {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// Parses properties text into entries, in file order (see the module doc for the format).
/// Duplicates are kept: what they mean is the caller's decision.
pub fn parse_properties(text: &str) -> Result<Vec<PropertyEntry>> {
    let mut entries = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((index, raw)) = lines.next() {
        let start_line = index + 1;
        let first = raw.trim_start();
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes escapes the newline.
        let mut logical = String::from(first);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let at = ConfigSource::Line(start_line);
        let (key, value) =
            split_entry(&logical).map_err(|reason| ConfigError::Syntax { at, reason })?;
        if key.is_empty() {
            return Err(ConfigError::Syntax {
                at,
                reason: "empty key".into(),
            });
        }
        entries.push(PropertyEntry {
            key,
            value,
            line: start_line,
        });
    }
    Ok(entries)
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// Splits one logical line into an unescaped key and value.
fn split_entry(line: &str) -> Result<(String, String), String> {
    let mut key = String::new();
    let mut chars = line.chars().peekable();
    // The key ends at the first unescaped '=', ':' or whitespace.
    let mut separator_seen = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => key.push(unescape(&mut chars)?),
            '=' | ':' => {
                separator_seen = true;
                break;
            }
            c if c.is_whitespace() => break,
            c => key.push(c),
        }
    }
    // Whitespace, then at most one '=' or ':' (if whitespace ended the key), then whitespace.
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    if !separator_seen && matches!(chars.peek(), Some('=') | Some(':')) {
        chars.next();
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
    }
    let mut value = String::new();
    // Trailing whitespace is trimmed unless escaped: remember where the escaped part ends.
    let mut keep_len = 0;
    while let Some(c) = chars.next() {
        if c == '\\' {
            value.push(unescape(&mut chars)?);
            keep_len = value.len();
        } else {
            value.push(c);
            if !c.is_whitespace() {
                keep_len = value.len();
            }
        }
    }
    value.truncate(keep_len);
    Ok((key, value))
}

fn unescape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<char, String> {
    match chars.next() {
        None => Err("dangling backslash at the end of the line".into()),
        Some('t') => Ok('\t'),
        Some('n') => Ok('\n'),
        Some('r') => Ok('\r'),
        Some('f') => Ok('\u{c}'),
        Some('u') => {
            let hex: String = (0..4).filter_map(|_| chars.next()).collect();
            let code = u32::from_str_radix(&hex, 16)
                .ok()
                .filter(|_| hex.len() == 4)
                .ok_or_else(|| format!("invalid escape \\u{hex}: expected 4 hex digits"))?;
            char::from_u32(code).ok_or_else(|| format!("invalid escape \\u{hex}: a surrogate"))
        }
        Some(c) => Ok(c),
    }
}

/// Escapes a value so that [`parse_properties`] reads it back unchanged.
pub fn escape_value(value: &str) -> String {
    let count = value.chars().count();
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            // Leading and trailing whitespace would be dropped by the parser: escape it.
            c if c.is_whitespace() && (i == 0 || i + 1 == count) => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

impl NodeConfig {
    /// A configuration with every default applied and placeholder values for required keys.
    fn defaults() -> NodeConfig {
        let mut c = NodeConfig {
            node_id: NodeId(0),
            process_roles: Vec::new(),
            listeners: Vec::new(),
            controller_listener_names: Vec::new(),
            client_listener_name: String::new(),
            quorum_voters: Vec::new(),
            quorum_bootstrap_servers: Vec::new(),
            metadata_log_dir: PathBuf::new(),
            election_timeout_ms: 0,
            fetch_timeout_ms: 0,
            election_backoff_max_ms: 0,
            request_timeout_ms: 0,
            broker_session_timeout_ms: 0,
            broker_heartbeat_interval_ms: 0,
            metadata_log_segment_bytes: 0,
            log_durable_write_bytes_max: 0,
            metadata_log_record_bytes_between_snapshots_max: 0,
            metadata_retention_bytes_max: 0,
            metadata_idle_interval_ms_max: 0,
            socket_request_bytes_max: 0,
            num_partitions: 0,
            default_replication_factor: 0,
            cores: None,
            controller_core: None,
            no_pin: false,
            spin_before_park_us: 0,
            raft_heartbeat_interval_ms: 0,
            raft_append_inflight_count_max: 0,
            raft_append_inflight_bytes_max: 0,
            raft_batch_bytes_max: 0,
            raft_fetch_wait_ms_max: 0,
            controller_queue_capacity: 0,
            connection_inflight_requests_max: 0,
            connections_max: 0,
            controller_partitions_per_topic_max: 0,
            controller_replication_factor_max: 0,
            controller_records_per_batch_max: 0,
            controller_producer_id_block_size: 0,
            controller_seed: 0,
            metrics_listener: None,
        };
        for key in CONFIG_KEYS {
            if let Some(default) = key.default {
                (key.set)(&mut c, default).expect("every built-in default parses");
            }
        }
        c
    }

    /// Builds a configuration from an optional properties file and `--set` overrides (applied in
    /// order, after the file), then validates it. Errors name the key and where it was given.
    pub fn load(properties: Option<&str>, overrides: &[(String, String)]) -> Result<NodeConfig> {
        let mut c = NodeConfig::defaults();
        let mut given: HashMap<&'static str, ConfigSource> = HashMap::new();
        let entries = match properties {
            Some(text) => parse_properties(text)?,
            None => Vec::new(),
        };
        let file = entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str(), ConfigSource::Line(e.line)));
        let sets = overrides
            .iter()
            .map(|(k, v)| (k.trim(), v.as_str(), ConfigSource::Override));
        for (name, value, at) in file.chain(sets) {
            let key = config_key(name).ok_or_else(|| ConfigError::UnknownKey {
                key: name.to_owned(),
                at,
                suggestion: suggest(name),
            })?;
            if let (Some(&first @ ConfigSource::Line(_)), ConfigSource::Line(_)) =
                (given.get(key.name), at)
            {
                return Err(ConfigError::Duplicate {
                    key: name.to_owned(),
                    first,
                    at,
                });
            }
            (key.set)(&mut c, value).map_err(|reason| ConfigError::InvalidValue {
                key: key.name,
                value: value.to_owned(),
                at,
                reason,
            })?;
            given.insert(key.name, at);
        }
        let missing: Vec<&'static str> = CONFIG_KEYS
            .iter()
            .filter(|k| k.is_required() && !given.contains_key(k.name))
            .map(|k| k.name)
            .collect();
        if !missing.is_empty() {
            return Err(ConfigError::MissingRequired { keys: missing });
        }
        c.validate()?;
        Ok(c)
    }

    /// Parses and validates a properties file with no overrides.
    pub fn from_properties(text: &str) -> Result<NodeConfig> {
        NodeConfig::load(Some(text), &[])
    }

    /// This configuration with `overrides` applied (as `--set` would), validated again.
    pub fn with_overrides(&self, overrides: &[(String, String)]) -> Result<NodeConfig> {
        let mut c = self.clone();
        for (name, value) in overrides {
            let name = name.trim();
            let key = config_key(name).ok_or_else(|| ConfigError::UnknownKey {
                key: name.to_owned(),
                at: ConfigSource::Override,
                suggestion: suggest(name),
            })?;
            (key.set)(&mut c, value).map_err(|reason| ConfigError::InvalidValue {
                key: key.name,
                value: value.clone(),
                at: ConfigSource::Override,
                reason,
            })?;
        }
        c.validate()?;
        Ok(c)
    }

    /// Checks the relations between values (each value alone was checked when parsed).
    pub fn validate(&self) -> Result<()> {
        let invalid = |key, reason: String| Err(ConfigError::Invalid { key, reason });
        if self.process_roles != [ProcessRole::Controller] {
            return invalid(
                "process.roles",
                "must be exactly `controller` (the only role corum supports)".into(),
            );
        }
        if self.listeners.is_empty() {
            return invalid("listeners", "at least one listener is needed".into());
        }
        if self.controller_listener_names.is_empty() {
            return invalid(
                "controller.listener.names",
                "name at least one listener".into(),
            );
        }
        for name in &self.controller_listener_names {
            if !self.listeners.iter().any(|l| &l.name == name) {
                return invalid(
                    "controller.listener.names",
                    format!(
                        "{name} is not one of the listeners ({})",
                        self.listeners
                            .iter()
                            .map(|l| l.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
        if self
            .controller_listener_names
            .contains(&self.client_listener_name)
        {
            return invalid(
                "corum.client.listener.name",
                format!(
                    "{} is a controller listener (Raft); clients need a listener of their own",
                    self.client_listener_name
                ),
            );
        }
        if self.quorum_voters.is_empty() && self.quorum_bootstrap_servers.is_empty() {
            return invalid(
                "controller.quorum.voters",
                "set controller.quorum.voters (static quorum) or controller.quorum.bootstrap.servers (dynamic quorum)".into(),
            );
        }
        if !self.quorum_voters.is_empty()
            && !self.quorum_voters.iter().any(|v| v.id == self.node_id)
        {
            return invalid(
                "controller.quorum.voters",
                format!(
                    "node.id {} is not one of the static voters: a controller-only node must be a voter",
                    self.node_id
                ),
            );
        }
        if self.metadata_log_dir.as_os_str().is_empty() {
            return invalid("metadata.log.dir", "empty path".into());
        }
        if self.fetch_timeout_ms < self.election_timeout_ms {
            return invalid(
                "controller.quorum.fetch.timeout.ms",
                format!(
                    "{} is below controller.quorum.election.timeout.ms ({})",
                    self.fetch_timeout_ms, self.election_timeout_ms
                ),
            );
        }
        if self.raft_heartbeat_interval_ms * 2 > self.election_timeout_ms {
            return invalid(
                "corum.raft.heartbeat.interval.ms",
                format!(
                    "{} is above half of controller.quorum.election.timeout.ms ({})",
                    self.raft_heartbeat_interval_ms, self.election_timeout_ms
                ),
            );
        }
        if self.raft_fetch_wait_ms_max >= self.fetch_timeout_ms {
            return invalid(
                "corum.raft.fetch.wait.max.ms",
                format!(
                    "{} must be below controller.quorum.fetch.timeout.ms ({})",
                    self.raft_fetch_wait_ms_max, self.fetch_timeout_ms
                ),
            );
        }
        if self.broker_heartbeat_interval_ms * 2 > self.broker_session_timeout_ms {
            return invalid(
                "broker.heartbeat.interval.ms",
                format!(
                    "{} is above half of broker.session.timeout.ms ({}): one lost heartbeat would fence a broker",
                    self.broker_heartbeat_interval_ms, self.broker_session_timeout_ms
                ),
            );
        }
        if u64::from(self.raft_batch_bytes_max) > self.raft_append_inflight_bytes_max {
            return invalid(
                "corum.raft.batch.bytes.max",
                format!(
                    "{} is above corum.raft.append.inflight.bytes.max ({})",
                    self.raft_batch_bytes_max, self.raft_append_inflight_bytes_max
                ),
            );
        }
        if self.raft_batch_bytes_max > self.socket_request_bytes_max {
            return invalid(
                "corum.raft.batch.bytes.max",
                format!(
                    "{} is above socket.request.max.bytes ({}): an append could not be sent",
                    self.raft_batch_bytes_max, self.socket_request_bytes_max
                ),
            );
        }
        if u64::from(self.raft_batch_bytes_max) > self.metadata_log_segment_bytes {
            return invalid(
                "metadata.log.segment.bytes",
                format!(
                    "{} is below corum.raft.batch.bytes.max ({}): a batch must fit in a segment",
                    self.metadata_log_segment_bytes, self.raft_batch_bytes_max
                ),
            );
        }
        if self.num_partitions > self.controller_partitions_per_topic_max {
            return invalid(
                "num.partitions",
                format!(
                    "{} is above corum.controller.partitions.per.topic.max ({})",
                    self.num_partitions, self.controller_partitions_per_topic_max
                ),
            );
        }
        if self.default_replication_factor > self.controller_replication_factor_max {
            return invalid(
                "default.replication.factor",
                format!(
                    "{} is above corum.controller.replication.factor.max ({})",
                    self.default_replication_factor, self.controller_replication_factor_max
                ),
            );
        }
        if let (Some(core), Some(cores)) = (self.controller_core, &self.cores) {
            if !cores.0.contains(&core) {
                return invalid(
                    "corum.controller.core",
                    format!("core {core} is not in corum.cores ({cores})"),
                );
            }
            if cores.0.len() < 2 {
                return invalid(
                    "corum.cores",
                    format!("{cores} leaves no core besides the controller core for Raft, the log and the network"),
                );
            }
        }
        // The controller's own checks, under the names of our keys.
        self.controller_config().validate().map_err(|e| {
            let corum_controller::ConfigError::Invalid { name, .. } = &e;
            // The controller names Kafka's keys as they are and its own limits without our
            // `corum.controller.` prefix.
            let key = config_key(name)
                .or_else(|| config_key(&format!("corum.controller.{name}")))
                .map_or("corum.controller", |k| k.name);
            ConfigError::Invalid {
                key,
                reason: e.to_string(),
            }
        })?;
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
    pub fn client_listener(&self) -> Option<&Listener> {
        self.listeners
            .iter()
            .find(|l| l.name == self.client_listener_name)
    }

    /// The controller state machine's configuration.
    pub fn controller_config(&self) -> ControllerConfig {
        ControllerConfig {
            session_timeout_ms: self.broker_session_timeout_ms,
            heartbeat_interval_ms: self.broker_heartbeat_interval_ms,
            default_partitions: self.num_partitions,
            default_replication_factor: self.default_replication_factor,
            partitions_per_topic_max: self.controller_partitions_per_topic_max,
            replication_factor_max: self.controller_replication_factor_max,
            records_per_batch_max: self.controller_records_per_batch_max as usize,
            producer_id_block_size: self.controller_producer_id_block_size,
            seed: self.controller_seed,
        }
    }

    /// Every key and its value as properties text (comments give each key's doc); parsing it
    /// back gives this configuration.
    pub fn to_properties(&self) -> String {
        let mut out = String::new();
        for key in CONFIG_KEYS {
            out.push_str(&format!(
                "# {}\n{}={}\n",
                key.doc,
                key.name,
                escape_value(&key.value_of(self))
            ));
        }
        out
    }
}

/// The table of keys as text: name, type, default, doc (for `corum run --help-config`).
pub fn help_text() -> String {
    let mut out = String::new();
    for key in CONFIG_KEYS {
        let default = match key.default {
            None => "required".to_owned(),
            Some("") => "empty".to_owned(),
            Some(d) => format!("default {d}"),
        };
        out.push_str(&format!(
            "{}  ({}; {})\n    {}\n",
            key.name, key.value_type, default, key.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MINIMAL: &str = "\
node.id=1
process.roles=controller
listeners=CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
metadata.log.dir=/var/lib/corum
";

    fn set(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn load_err(text: &str) -> ConfigError {
        NodeConfig::from_properties(text).unwrap_err()
    }

    /// A minimal file gives Kafka's defaults for every other key.
    #[test]
    fn minimal_file_gets_defaults() {
        let c = NodeConfig::from_properties(MINIMAL).unwrap();
        assert_eq!(c.node_id, NodeId(1));
        assert_eq!(c.process_roles, vec![ProcessRole::Controller]);
        assert_eq!(c.controller_listener().endpoint.port, 9093);
        assert_eq!(c.quorum_voters.len(), 3);
        assert_eq!(
            c.quorum_voters[2].endpoint,
            "127.0.0.1:9095".parse().unwrap()
        );
        assert_eq!(c.election_timeout_ms, 1000);
        assert_eq!(c.fetch_timeout_ms, 2000);
        assert_eq!(c.election_backoff_max_ms, 1000);
        assert_eq!(c.request_timeout_ms, 2000);
        assert_eq!(c.broker_session_timeout_ms, 9000);
        assert_eq!(c.broker_heartbeat_interval_ms, 2000);
        assert_eq!(c.metadata_log_record_bytes_between_snapshots_max, 20 << 20);
        assert_eq!(c.metadata_idle_interval_ms_max, 500);
        assert_eq!(c.controller_config(), ControllerConfig::default());
        assert!(!c.no_pin);
        assert_eq!(c.cores, None);
        assert_eq!(c.spin_before_park_us, 0);
        assert_eq!(c.log_durable_write_bytes_max, 512 << 10);
    }

    /// The example file shipped in testdata parses and means what its comments say.
    #[test]
    fn example_file() {
        let text = include_str!("../testdata/example.properties");
        let c = NodeConfig::from_properties(text).unwrap();
        assert_eq!(c.quorum_bootstrap_servers.len(), 3);
        assert!(c.quorum_voters.is_empty());
        assert_eq!(c.cores, Some(CoreSet(vec![0, 1])));
        assert_eq!(c.controller_core, Some(1));
        assert_eq!(c.metrics_listener, Some("127.0.0.1:9100".parse().unwrap()));
    }

    /// Every built-in default parses and the defaults table agrees with the typed defaults.
    #[test]
    fn defaults_table_is_consistent() {
        let c = NodeConfig::defaults();
        for key in CONFIG_KEYS {
            if let Some(d) = key.default {
                assert_eq!(key.value_of(&c), d, "key {}", key.name);
            }
            assert!(!key.doc.is_empty());
        }
        let mut names: Vec<_> = CONFIG_KEYS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CONFIG_KEYS.len(), "a key is listed twice");
        assert!(help_text().contains("node.id  (int in [0, 4294967295]; required)"));
    }

    /// Comments, blank lines, ':' and whitespace separators, continuations and escapes parse as
    /// Java's Properties reads them.
    #[test]
    fn properties_syntax() {
        let text = "# comment\n  ! another\n\n a = b \nc:d\ne f\ng\\=h=i\\tj\\u0041\\\\\n\
                    long=one,\\\n     two\nempty=\nsp=\\ x\\ \n";
        let e = parse_properties(text).unwrap();
        let kv: Vec<(&str, &str)> = e
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            kv,
            vec![
                ("a", "b"),
                ("c", "d"),
                ("e", "f"),
                ("g=h", "i\tjA\\"),
                ("long", "one,two"),
                ("empty", ""),
                ("sp", " x "),
            ]
        );
        assert_eq!(e[4].line, 8);
        assert_eq!(e[5].line, 10);
    }

    /// Malformed escapes are syntax errors naming the line.
    #[test]
    fn bad_escapes_name_the_line() {
        let err = parse_properties("a=1\nb=\\u12x4\n").unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Syntax {
                    at: ConfigSource::Line(2),
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = parse_properties("a=\\ud800\n").unwrap_err();
        assert!(err.to_string().contains("surrogate"), "{err}");
        let err = parse_properties("=value\n").unwrap_err();
        assert!(err.to_string().contains("empty key"), "{err}");
    }

    /// An unknown key is an error naming it and its line, with a suggestion when one is close.
    #[test]
    fn unknown_key() {
        let err = load_err(&format!("{MINIMAL}controller.quorum.election.timeout=5\n"));
        match &err {
            ConfigError::UnknownKey {
                key,
                at,
                suggestion,
            } => {
                assert_eq!(key, "controller.quorum.election.timeout");
                assert_eq!(*at, ConfigSource::Line(7));
                assert_eq!(*suggestion, Some("controller.quorum.election.timeout.ms"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("did you mean"), "{err}");
        let err = NodeConfig::load(Some(MINIMAL), &set(&[("zzz", "1")])).unwrap_err();
        assert_eq!(
            err,
            ConfigError::UnknownKey {
                key: "zzz".into(),
                at: ConfigSource::Override,
                suggestion: None
            }
        );
    }

    /// A key given twice in the file is an error; an override of a file key is not.
    #[test]
    fn duplicates() {
        let err = load_err(&format!("{MINIMAL}node.id=2\n"));
        assert_eq!(
            err,
            ConfigError::Duplicate {
                key: "node.id".into(),
                first: ConfigSource::Line(1),
                at: ConfigSource::Line(7)
            }
        );
        let c =
            NodeConfig::load(Some(MINIMAL), &set(&[("node.id", "2"), ("node.id", "3")])).unwrap();
        assert_eq!(c.node_id, NodeId(3));
    }

    /// Missing required keys are listed together.
    #[test]
    fn missing_required() {
        let err = NodeConfig::load(None, &set(&[("node.id", "1")])).unwrap_err();
        assert_eq!(
            err,
            ConfigError::MissingRequired {
                keys: vec![
                    "process.roles",
                    "listeners",
                    "controller.listener.names",
                    "metadata.log.dir"
                ]
            }
        );
        assert!(
            err.to_string().contains("process.roles, listeners"),
            "{err}"
        );
    }

    /// `--set` alone can give every required key.
    #[test]
    fn overrides_alone() {
        let c = NodeConfig::load(
            None,
            &set(&[
                ("node.id", "4"),
                ("process.roles", "controller"),
                ("listeners", "CONTROLLER://[::1]:19093"),
                ("controller.listener.names", "controller"),
                (
                    "controller.quorum.bootstrap.servers",
                    "[::1]:19093, localhost:9093",
                ),
                ("metadata.log.dir", "/tmp/x"),
            ]),
        )
        .unwrap();
        assert_eq!(c.controller_listener().endpoint.host, "::1");
        assert_eq!(c.quorum_bootstrap_servers[1].host, "localhost");
        let c2 = c.with_overrides(&set(&[("corum.no.pin", "TRUE")])).unwrap();
        assert!(c2.no_pin);
        let err = c
            .with_overrides(&set(&[("corum.no.pin", "yes")]))
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::InvalidValue {
                key: "corum.no.pin",
                at: ConfigSource::Override,
                ..
            }
        ));
        let err = c.with_overrides(&set(&[("nope", "1")])).unwrap_err();
        assert!(matches!(err, ConfigError::UnknownKey { .. }));
    }

    /// Each kind of bad value is rejected with the key, the value, the line and a reason.
    #[test]
    fn bad_values() {
        let cases: &[(&str, &str, &str)] = &[
            ("node.id", "-1", "must be in"),
            ("node.id", "x", "expected an integer"),
            ("process.roles", "broker", "not supported"),
            ("process.roles", "controller,controller", "twice"),
            ("process.roles", "admin", "unknown role"),
            ("process.roles", "", "empty"),
            ("listeners", "127.0.0.1:9093", "NAME://"),
            ("listeners", "A://h:1,A://h:2", "used twice"),
            ("listeners", "A://h:99999", "invalid port"),
            ("listeners", "A-B://h:1", "letters"),
            ("listeners", "A://::1:9093", "brackets"),
            ("listeners", "A://[::1", "missing ']'"),
            ("listeners", "A://[::1]9093", "expected ':PORT'"),
            ("listeners", "", "empty"),
            ("controller.listener.names", " , ", "empty"),
            ("controller.quorum.voters", "1@h", "expected ID@"),
            ("controller.quorum.voters", "h:1", "ID@"),
            ("controller.quorum.voters", "x@h:1", "invalid node id"),
            ("controller.quorum.voters", "1@h:1,1@h:2", "listed twice"),
            ("controller.quorum.voters", "1@h:0", "fixed port"),
            (
                "controller.quorum.voters",
                "1@h:1:nope",
                "invalid directory id",
            ),
            (
                "controller.quorum.voters",
                "1@h:1:AAAAAAAAAAAAAAAAAAAAAA",
                "all-zero",
            ),
            ("controller.quorum.voters", "1@h:1:a:b", "expected ID@"),
            ("controller.quorum.voters", "1@:1", "empty host"),
            ("controller.quorum.bootstrap.servers", "h", "HOST:PORT"),
            ("metadata.log.dir", "  ", "empty path"),
            ("controller.quorum.election.timeout.ms", "0", "must be in"),
            ("metadata.log.segment.bytes", "1000", "must be in"),
            ("metadata.max.retention.bytes", "-2", "must be in"),
            ("socket.request.max.bytes", "4294967296", "must be in"),
            ("default.replication.factor", "0", "must be in"),
            ("corum.cores", "3-1", "backwards"),
            ("corum.cores", "a", "invalid core"),
            ("corum.cores", "5000", "above 4095"),
            ("corum.cores", ",", "empty core set"),
            ("corum.controller.core", "-1", "must be in"),
            ("corum.metrics.listener", "nope", "HOST:PORT"),
        ];
        for (key, value, reason) in cases {
            let err = NodeConfig::load(Some(MINIMAL), &set(&[(key, value)])).unwrap_err();
            match &err {
                ConfigError::InvalidValue {
                    key: k,
                    value: v,
                    at,
                    reason: r,
                } => {
                    assert_eq!(k, key);
                    assert_eq!(v, value);
                    assert_eq!(*at, ConfigSource::Override);
                    assert!(r.contains(reason), "{key}={value}: {r}");
                }
                other => panic!("{key}={value}: unexpected {other:?}"),
            }
            // The same value from the file: replace the key's line, or append it.
            let line = format!("{key}={}", escape_value(value));
            let text = if MINIMAL.contains(&format!("\n{key}=")) || MINIMAL.starts_with(key) {
                MINIMAL
                    .lines()
                    .map(|l| {
                        if l.starts_with(&format!("{key}=")) {
                            line.clone()
                        } else {
                            l.to_owned()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            } else {
                format!("{MINIMAL}{line}\n")
            };
            let err = load_err(&text);
            assert!(
                matches!(
                    err,
                    ConfigError::InvalidValue {
                        at: ConfigSource::Line(_),
                        ..
                    }
                ),
                "{key}={value}: {err}"
            );
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    /// Relations between keys are checked by validate() under the key to fix.
    #[test]
    fn relations() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("controller.listener.names", "OTHER")],
                "controller.listener.names",
            ),
            (
                &[("controller.quorum.voters", "")],
                "controller.quorum.voters",
            ),
            (&[("node.id", "4")], "controller.quorum.voters"),
            (
                &[("controller.quorum.fetch.timeout.ms", "500")],
                "controller.quorum.fetch.timeout.ms",
            ),
            (
                &[("corum.raft.heartbeat.interval.ms", "600")],
                "corum.raft.heartbeat.interval.ms",
            ),
            (
                &[("corum.raft.fetch.wait.max.ms", "2000")],
                "corum.raft.fetch.wait.max.ms",
            ),
            (
                &[("broker.heartbeat.interval.ms", "5000")],
                "broker.heartbeat.interval.ms",
            ),
            (
                &[("corum.raft.batch.bytes.max", "16777216")],
                "corum.raft.batch.bytes.max",
            ),
            (
                &[("socket.request.max.bytes", "2048")],
                "corum.raft.batch.bytes.max",
            ),
            (
                &[
                    ("metadata.log.segment.bytes", "1048576"),
                    ("corum.raft.batch.bytes.max", "2097152"),
                ],
                "metadata.log.segment.bytes",
            ),
            (
                &[
                    ("num.partitions", "20"),
                    ("corum.controller.partitions.per.topic.max", "10"),
                ],
                "num.partitions",
            ),
            (
                &[("default.replication.factor", "20")],
                "default.replication.factor",
            ),
            (
                &[("corum.cores", "0-1"), ("corum.controller.core", "3")],
                "corum.controller.core",
            ),
            (
                &[("corum.cores", "1"), ("corum.controller.core", "1")],
                "corum.cores",
            ),
        ];
        for (pairs, key) in cases {
            let err = NodeConfig::load(Some(MINIMAL), &set(pairs)).unwrap_err();
            match &err {
                ConfigError::Invalid { key: k, .. } => assert_eq!(k, key, "{err}"),
                other => panic!("{pairs:?}: unexpected {other:?}"),
            }
        }
        // A value set by hand outside its range is caught by the controller's own check, under
        // our key name.
        let mut c = NodeConfig::from_properties(MINIMAL).unwrap();
        c.controller_records_per_batch_max = 2;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Invalid {
                key: "corum.controller.records.per.batch.max",
                ..
            })
        ));
        let mut c = NodeConfig::from_properties(MINIMAL).unwrap();
        c.process_roles.clear();
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Invalid {
                key: "process.roles",
                ..
            })
        ));
        let c = NodeConfig::load(
            Some(MINIMAL),
            &set(&[("corum.cores", "0-1"), ("corum.controller.core", "1")]),
        )
        .unwrap();
        assert_eq!(c.cores, Some(CoreSet(vec![0, 1])));
    }

    /// KIP-853 voters carry a directory id that prints back the same way.
    #[test]
    fn voters_with_directory_ids() {
        let dir = Uuid([9; 16]);
        let text = format!("1@h1:9093:{dir},2@[::1]:9094:{dir},3@h3:9095");
        let v = parse_voters(&text).unwrap();
        assert_eq!(v[0].directory_id, Some(dir));
        assert_eq!(v[1].endpoint.host, "::1");
        assert_eq!(v[2].directory_id, None);
        assert_eq!(join(&v), text);
    }

    /// The rendered properties parse back to the same configuration.
    #[test]
    fn to_properties_round_trip() {
        let c = NodeConfig::load(
            Some(MINIMAL),
            &set(&[
                ("corum.cores", "0-3,6,8-9"),
                ("corum.controller.core", "6"),
                ("corum.metrics.listener", "[::1]:9100"),
                ("metadata.log.dir", " /path with spaces/x"),
            ]),
        )
        .unwrap();
        assert_eq!(c.metadata_log_dir, PathBuf::from("/path with spaces/x"));
        let back = NodeConfig::from_properties(&c.to_properties()).unwrap();
        assert_eq!(back, c);
    }

    proptest! {
        /// Any text either parses or is rejected with an error: the parser never panics.
        #[test]
        fn parser_never_panics(text in "\\PC*") {
            let _ = parse_properties(&text);
            let _ = NodeConfig::from_properties(&text);
        }

        /// Any value escaped and written as `k=value` reads back unchanged.
        #[test]
        fn escape_round_trip(value in "\\PC{0,40}") {
            let text = format!("k={}\n", escape_value(&value));
            let e = parse_properties(&text).unwrap();
            prop_assert_eq!(e.len(), 1);
            prop_assert_eq!(&e[0].value, &value);
        }

        /// Any value for any key is accepted or rejected with an error naming that key, never a
        /// panic; an accepted configuration renders to properties that parse back to itself.
        #[test]
        fn any_value_for_any_key(
            key in proptest::sample::select(CONFIG_KEYS.iter().map(|k| k.name).collect::<Vec<_>>()),
            value in prop_oneof!["\\PC{0,30}", "[0-9]{1,12}", "-?[0-9]{1,20}", "[A-Z]{1,5}://[a-z.]{1,9}:[0-9]{1,5}", "[0-9]{1,3}@[a-z]{1,5}:[0-9]{1,5}(,[0-9]{1,3}@[a-z]{1,5}:[0-9]{1,5}){0,2}"],
        ) {
            match NodeConfig::load(Some(MINIMAL), &set(&[(key, value.as_str())])) {
                Ok(c) => {
                    let back = NodeConfig::from_properties(&c.to_properties()).unwrap();
                    prop_assert_eq!(back, c);
                }
                Err(ConfigError::InvalidValue { key: k, .. }) => prop_assert_eq!(k, key),
                Err(ConfigError::Invalid { .. }) => {}
                Err(other) => prop_assert!(false, "{key}={value:?}: unexpected {other:?}"),
            }
        }

        /// Core sets print as ranges that parse back to the same set.
        #[test]
        fn core_set_round_trip(mut cores in proptest::collection::vec(0u32..64, 1..20)) {
            cores.sort_unstable();
            cores.dedup();
            let set = CoreSet(cores);
            prop_assert_eq!(set.to_string().parse::<CoreSet>().unwrap(), set);
        }
    }
}
