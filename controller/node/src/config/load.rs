//! Building a [`NodeConfig`] from the key table: its defaults, a properties file, `--set`
//! overrides; and back to properties text.
//!
//! Precedence: built-in default < file < override. A key given twice in the file is an error
//! (one of the two lines is a mistake); an override may repeat a file key (that is what it is
//! for), and a later override wins over an earlier one.

use std::collections::HashMap;
use std::path::PathBuf;

use corum_types::NodeId;

use super::keys::{config_key, suggest, ConfigKey, CONFIG_KEYS};
use super::node_config::NodeConfig;
use super::properties::{escape_value, parse_properties};
use crate::error::{ConfigError, ConfigSource};

type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// The required keys' values in [`NodeConfig::for_tests`]: a single-voter static quorum on
/// loopback. Ports are fixed (a voter needs one); tests that bind change them.
const FOR_TESTS: &[(&str, &str)] = &[
    ("node.id", "1"),
    ("process.roles", "controller"),
    (
        "listeners",
        "CONTROLLER://127.0.0.1:9093,CLIENT://127.0.0.1:9094",
    ),
    ("controller.listener.names", "CONTROLLER"),
    ("controller.quorum.voters", "1@127.0.0.1:9093"),
    ("metadata.log.dir", "/var/tmp/corum-for-tests"),
];

impl NodeConfig {
    /// Every field at its key's default; required keys' fields empty (not a valid
    /// configuration until they are set).
    fn defaults() -> NodeConfig {
        let mut c = NodeConfig {
            node_id: NodeId(0),
            process_roles: Vec::new(),
            listeners: Vec::new(),
            controller_listener_names: Vec::new(),
            client_listener_name: String::new(),
            kafka_listener_names: Vec::new(),
            advertised_listeners: Vec::new(),
            listener_security_protocols: Vec::new(),
            ssl: Default::default(),
            listener_ssl: Default::default(),
            quorum_voters: Vec::new(),
            quorum_bootstrap_servers: Vec::new(),
            quorum_auto_join_enable: false,
            metadata_log_dir: PathBuf::new(),
            authorizer_class_name: String::new(),
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: false,
            election_timeout_ms: 0,
            fetch_timeout_ms: 0,
            election_backoff_max_ms: 0,
            quorum_request_timeout_ms: 0,
            quorum_retry_backoff_ms: 0,
            raft_hwm_linger_ms: 0,
            broker_session_timeout_ms: 0,
            broker_heartbeat_interval_ms: 0,
            metadata_log_segment_bytes: 0,
            log_durable_write_bytes_max: 0,
            metadata_log_record_bytes_between_snapshots_max: 0,
            metadata_retention_bytes_max: 0,
            metadata_idle_interval_ms_max: 0,
            socket_request_bytes_max: 0,
            socket_response_bytes_max: 0,
            num_partitions: 0,
            default_replication_factor: 0,
            min_insync_replicas: 0,
            cores: None,
            controller_core: None,
            no_pin: false,
            spin_before_park_us: 0,
            raft_heartbeat_interval_ms: 0,
            raft_append_inflight_count_max: 0,
            raft_append_inflight_bytes_max: 0,
            raft_batch_bytes_max: 0,
            raft_fetch_wait_ms_max: 0,
            raft_observer_fetch_interval_ms: 0,
            raft_snapshot_chunk_bytes_max: 0,
            raft_snapshot_bytes_max: 0,
            raft_payload_cache_bytes_max: 0,
            raft_uncommitted_records_max: 0,
            controller_request_timeout_ms: 0,
            controller_request_timeout_ms_max: 0,
            controller_queue_capacity: 0,
            connection_inflight_requests_max: 0,
            connections_max: 0,
            connections_per_ip_max: 0,
            connections_per_ip_overrides: Default::default(),
            connections_idle_ms_max: 0,
            connection_send_timeout_ms: 0,
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

    /// A valid configuration for tests and examples: every key at its default from the key
    /// table, and placeholder values for the required keys (node 1, the only voter of a static
    /// quorum, `CONTROLLER://127.0.0.1:9093` and `CLIENT://127.0.0.1:9094`). Change what a test
    /// needs with [`NodeConfig::with_overrides`] or by hand (then [`NodeConfig::validate`]).
    pub fn for_tests() -> NodeConfig {
        let sets: Vec<(String, String)> = FOR_TESTS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        NodeConfig::load(None, &sets).expect("the test configuration is valid")
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
            if super::ssl::set_listener_value(&mut c, name, value, at)? {
                continue;
            }
            let key = known_key(name, at)?;
            if let (Some(&first @ ConfigSource::Line(_)), ConfigSource::Line(_)) =
                (given.get(key.name), at)
            {
                return Err(ConfigError::Duplicate {
                    key: key.name,
                    first,
                    at,
                });
            }
            set(&mut c, key, value, at)?;
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
            if super::ssl::set_listener_value(&mut c, name.trim(), value, ConfigSource::Override)? {
                continue;
            }
            let key = known_key(name.trim(), ConfigSource::Override)?;
            set(&mut c, key, value, ConfigSource::Override)?;
        }
        c.validate()?;
        Ok(c)
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
        for (listener, values) in &self.listener_ssl {
            for (key, value) in values {
                out.push_str(&format!(
                    "{}={}\n",
                    super::ssl::listener_key(listener, key),
                    escape_value(value)
                ));
            }
        }
        out
    }
}

fn known_key(name: &str, at: ConfigSource) -> Result<&'static ConfigKey> {
    config_key(name).ok_or_else(|| ConfigError::UnknownKey {
        key: name.to_owned(),
        at,
        suggestion: suggest(name),
    })
}

pub(super) fn set(
    c: &mut NodeConfig,
    key: &'static ConfigKey,
    value: &str,
    at: ConfigSource,
) -> Result<()> {
    (key.set)(c, value).map_err(|reason| ConfigError::InvalidValue {
        key: key.name,
        value: value.to_owned(),
        at,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::values::CoreSet;
    use crate::config::ProcessRole;
    use crate::error::ValueError;
    use corum_types::Uuid;
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
        assert_eq!(c.quorum_request_timeout_ms, 2000);
        assert_eq!(c.controller_request_timeout_ms, 2000);
        assert_eq!(c.broker_session_timeout_ms, 9000);
        assert_eq!(c.broker_heartbeat_interval_ms, 2000);
        assert_eq!(c.metadata_log_record_bytes_between_snapshots_max, 20 << 20);
        assert_eq!(c.metadata_idle_interval_ms_max, 500);
        assert!(!c.no_pin);
        assert_eq!(c.cores, None);
        assert_eq!(c.spin_before_park_us, 0);
        assert_eq!(c.log_durable_write_bytes_max, 512 << 10);
    }

    /// The test configuration is the defaults plus the required keys, and valid.
    #[test]
    fn for_tests_is_the_defaults() {
        let c = NodeConfig::for_tests();
        c.validate().unwrap();
        let mut d = NodeConfig::defaults();
        for (k, v) in FOR_TESTS {
            (config_key(k).unwrap().set)(&mut d, v).unwrap();
        }
        assert_eq!(c, d);
        for key in CONFIG_KEYS {
            if let Some(default) = key.default {
                if !FOR_TESTS.iter().any(|(k, _)| *k == key.name) {
                    assert_eq!(key.value_of(&c), default, "{}", key.name);
                }
            }
        }
    }

    /// The example file shipped in testdata parses and means what its comments say.
    #[test]
    fn example_file() {
        let text = include_str!("../../testdata/example.properties");
        let c = NodeConfig::from_properties(text).unwrap();
        assert_eq!(c.quorum_bootstrap_servers.len(), 3);
        assert!(c.quorum_voters.is_empty());
        assert_eq!(c.cores, Some(CoreSet(vec![0, 1])));
        assert_eq!(c.controller_core, Some(1));
        assert_eq!(c.metrics_listener, Some("127.0.0.1:9100".parse().unwrap()));
    }

    /// An unknown key is an error naming it and its line, with a suggestion when one is close.
    #[test]
    fn unknown_key() {
        let err = load_err(&format!("{MINIMAL}controller.quorum.election.timeout=5\n"));
        assert_eq!(
            err,
            ConfigError::UnknownKey {
                key: "controller.quorum.election.timeout".into(),
                at: ConfigSource::Line(7),
                suggestion: Some("controller.quorum.election.timeout.ms"),
            }
        );
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
        assert_eq!(err.key(), Some("zzz"));
    }

    /// A key given twice in the file is an error; an override of a file key is not.
    #[test]
    fn duplicates() {
        let err = load_err(&format!("{MINIMAL}node.id=2\n"));
        assert_eq!(
            err,
            ConfigError::Duplicate {
                key: "node.id",
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
        assert_eq!(err.key(), None);
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
        assert_eq!(
            err,
            ConfigError::InvalidValue {
                key: "corum.no.pin",
                value: "yes".into(),
                at: ConfigSource::Override,
                reason: ValueError::NotABool,
            }
        );
        let err = c.with_overrides(&set(&[("nope", "1")])).unwrap_err();
        assert!(matches!(err, ConfigError::UnknownKey { .. }));
    }

    /// Each kind of bad value is rejected with the key, the value, where it was given and a
    /// typed reason.
    #[test]
    fn bad_values() {
        let text = |s: &str| s.to_owned();
        let malformed = |t: &str, expected| ValueError::Malformed {
            text: text(t),
            expected,
        };
        let u32_range = ValueError::OutOfRange {
            min: 0,
            max: u32::MAX.into(),
        };
        let cases: Vec<(&str, &str, ValueError)> = vec![
            ("node.id", "-1", u32_range.clone()),
            (
                "node.id",
                "x",
                ValueError::NotAnInteger {
                    min: 0,
                    max: u32::MAX.into(),
                },
            ),
            ("process.roles", "broker", ValueError::BrokerRole),
            (
                "process.roles",
                "controller,controller",
                ValueError::Twice {
                    what: "role",
                    item: text("controller"),
                },
            ),
            (
                "process.roles",
                "admin",
                ValueError::UnknownRole {
                    role: text("admin"),
                },
            ),
            (
                "process.roles",
                "",
                ValueError::Empty {
                    expected: "set process.roles=controller",
                },
            ),
            (
                "listeners",
                "127.0.0.1:9093",
                malformed("127.0.0.1:9093", "NAME://HOST:PORT"),
            ),
            (
                "listeners",
                "A://h:1,A://h:2",
                ValueError::Twice {
                    what: "listener name",
                    item: text("A"),
                },
            ),
            (
                "listeners",
                "A://h:99999",
                ValueError::InvalidPort {
                    text: text("h:99999"),
                },
            ),
            (
                "listeners",
                "A-B://h:1",
                ValueError::ListenerName {
                    text: text("A-B://h:1"),
                },
            ),
            (
                "listeners",
                "A://::1:9093",
                ValueError::UnbracketedIpv6 {
                    text: text("::1:9093"),
                },
            ),
            (
                "listeners",
                "A://[::1",
                malformed("[::1", "']' after an IPv6 address"),
            ),
            (
                "listeners",
                "A://[::1]9093",
                malformed("[::1]9093", "':PORT' after ']'"),
            ),
            (
                "listeners",
                "A://h h:1",
                ValueError::InvalidHost {
                    text: text("h h:1"),
                },
            ),
            (
                "listeners",
                "",
                ValueError::Empty {
                    expected: "at least one listener is needed",
                },
            ),
            (
                "controller.listener.names",
                " , ",
                ValueError::Empty {
                    expected: "name at least one listener",
                },
            ),
            (
                "controller.quorum.voters",
                "1@h",
                malformed("1@h", "ID@HOST:PORT[:DIRECTORY_ID]"),
            ),
            (
                "controller.quorum.voters",
                "h:1",
                malformed("h:1", "ID@HOST:PORT[:DIRECTORY_ID]"),
            ),
            (
                "controller.quorum.voters",
                "x@h:1",
                ValueError::NodeId {
                    text: text("x@h:1"),
                },
            ),
            (
                "controller.quorum.voters",
                "1@h:1,1@h:2",
                ValueError::Twice {
                    what: "voter id",
                    item: text("1"),
                },
            ),
            (
                "controller.quorum.voters",
                "1@h:0",
                ValueError::VoterPortZero {
                    text: text("1@h:0"),
                },
            ),
            (
                "controller.quorum.voters",
                "1@h:1:nope",
                ValueError::DirectoryId {
                    text: text("1@h:1:nope"),
                },
            ),
            (
                "controller.quorum.voters",
                "1@h:1:AAAAAAAAAAAAAAAAAAAAAA",
                ValueError::ZeroDirectoryId {
                    text: text("1@h:1:AAAAAAAAAAAAAAAAAAAAAA"),
                },
            ),
            (
                "controller.quorum.voters",
                "1@h:1:a:b",
                malformed("1@h:1:a:b", "ID@HOST:PORT[:DIRECTORY_ID]"),
            ),
            (
                "controller.quorum.voters",
                "1@:1",
                ValueError::EmptyHost { text: text(":1") },
            ),
            (
                "controller.quorum.bootstrap.servers",
                "h",
                malformed("h", "HOST:PORT"),
            ),
            (
                "metadata.log.dir",
                "  ",
                ValueError::Empty {
                    expected: "name a directory",
                },
            ),
            (
                "controller.quorum.election.timeout.ms",
                "0",
                ValueError::OutOfRange {
                    min: 1,
                    max: 3_600_000,
                },
            ),
            (
                "metadata.log.segment.bytes",
                "1000",
                ValueError::OutOfRange {
                    min: 1 << 20,
                    max: i64::MAX,
                },
            ),
            (
                "metadata.max.retention.bytes",
                "-2",
                ValueError::OutOfRange {
                    min: -1,
                    max: i64::MAX,
                },
            ),
            (
                "socket.request.max.bytes",
                "4294967296",
                ValueError::OutOfRange {
                    min: 1024,
                    max: i32::MAX.into(),
                },
            ),
            (
                "default.replication.factor",
                "0",
                ValueError::OutOfRange {
                    min: 1,
                    max: i16::MAX.into(),
                },
            ),
            (
                "corum.cores",
                "3-1",
                ValueError::CoreRangeBackwards { text: text("3-1") },
            ),
            ("corum.cores", "a", ValueError::Core { text: text("a") }),
            (
                "corum.cores",
                "5000",
                ValueError::CoreTooHigh {
                    core: 5000,
                    max: 4095,
                },
            ),
            (
                "corum.cores",
                ",",
                ValueError::Empty {
                    expected: "name at least one core, or leave the value empty",
                },
            ),
            (
                "corum.cores",
                "0-2",
                ValueError::TooManyCores { count: 3, max: 2 },
            ),
            (
                "corum.cores",
                "0,4,9,12",
                ValueError::TooManyCores { count: 4, max: 2 },
            ),
            (
                "corum.controller.core",
                "-1",
                ValueError::OutOfRange { min: 0, max: 4095 },
            ),
            (
                "corum.metrics.listener",
                "nope",
                malformed("nope", "HOST:PORT"),
            ),
            ("corum.no.pin", "yes", ValueError::NotABool),
        ];
        for (key, value, reason) in cases {
            let err = NodeConfig::load(Some(MINIMAL), &set(&[(key, value)])).unwrap_err();
            assert_eq!(
                err,
                ConfigError::InvalidValue {
                    key: config_key(key).unwrap().name,
                    value: value.to_owned(),
                    at: ConfigSource::Override,
                    reason: reason.clone(),
                },
                "{key}={value}"
            );
            // The same value from the file: replace the key's line, or append it.
            let line = format!("{key}={}", escape_value(value));
            let file = if MINIMAL.contains(&format!("\n{key}=")) || MINIMAL.starts_with(key) {
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
            match load_err(&file) {
                ConfigError::InvalidValue {
                    key: k,
                    at: ConfigSource::Line(_),
                    reason: r,
                    ..
                } => {
                    assert_eq!(k, key);
                    assert_eq!(r, reason);
                }
                other => panic!("{key}={value}: unexpected {other:?}"),
            }
        }
    }

    /// The rendered properties parse back to the same configuration.
    #[test]
    fn to_properties_round_trip() {
        let c = NodeConfig::load(
            Some(MINIMAL),
            &set(&[
                ("corum.cores", "3,6"),
                ("corum.controller.core", "6"),
                ("corum.metrics.listener", "[::1]:9100"),
                ("metadata.log.dir", " /path with spaces/x"),
                (
                    "controller.quorum.voters",
                    &format!("1@h:1:{}", Uuid([5; 16])),
                ),
            ]),
        )
        .unwrap();
        assert_eq!(c.metadata_log_dir, PathBuf::from("/path with spaces/x"));
        let back = NodeConfig::from_properties(&c.to_properties()).unwrap();
        assert_eq!(back, c);
    }

    proptest! {
        /// Any text either loads or is rejected with an error: loading never panics.
        #[test]
        fn load_never_panics(text in "\\PC*") {
            let _ = NodeConfig::from_properties(&text);
        }

        /// Any value for any key is accepted or rejected with an error naming that key, never a
        /// panic; an accepted configuration renders to properties that parse back to itself,
        /// and derives every component.
        #[test]
        fn any_value_for_any_key(
            key in proptest::sample::select(CONFIG_KEYS.iter().map(|k| k.name).collect::<Vec<_>>()),
            value in prop_oneof!["\\PC{0,30}", "[0-9]{1,12}", "-?[0-9]{1,20}", "[A-Z]{1,5}://[a-z.]{1,9}:[0-9]{1,5}", "[0-9]{1,3}@[a-z]{1,5}:[0-9]{1,5}(,[0-9]{1,3}@[a-z]{1,5}:[0-9]{1,5}){0,2}"],
        ) {
            match NodeConfig::load(Some(MINIMAL), &set(&[(key, value.as_str())])) {
                Ok(c) => {
                    let back = NodeConfig::from_properties(&c.to_properties()).unwrap();
                    prop_assert_eq!(&back, &c);
                    crate::config::components::check(&c).unwrap();
                }
                Err(ConfigError::InvalidValue { key: k, .. }) => prop_assert_eq!(k, key),
                Err(ConfigError::Invalid { .. }) => {}
                Err(other) => prop_assert!(false, "{key}={value:?}: unexpected {other:?}"),
            }
        }
    }
}
