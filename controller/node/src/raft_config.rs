//! From the node's configuration and files to what [`corum_raft`] takes, and back.
//!
//! | node side                                   | Raft side                          | function                    |
//! |---------------------------------------------|------------------------------------|-----------------------------|
//! | [`NodeConfig`] timeouts and `corum.raft.*`  | [`corum_raft::Config`]             | [`raft_config`]             |
//! | `controller.quorum.voters` ([`QuorumVoter`]) | [`VoterSet`] (static bootstrap)    | [`static_voter_set`]        |
//! | `bootstrap.checkpoint` ([`BootstrapVoters`]) | [`VoterSet`] (dynamic bootstrap)   | [`bootstrap_voter_set`]     |
//! | this node's listener and directory id       | `me` and `endpoints` of `RaftCore::new` | [`local_replica`]      |
//! | `quorum-state` ([`QuorumState`])            | [`QuorumStateRecord`]              | [`to_raft_quorum_state`] / [`from_raft_quorum_state`] |
//!
//! # Directory ids
//!
//! corum-node writes "no directory id" as `None` (a static voter named only by
//! `ID@HOST:PORT`); the Raft crate uses [`Uuid::ZERO`] for the same thing. The conversions map
//! one to the other both ways, and never produce `Some(Uuid::ZERO)` (the node's parsers refuse
//! the all-zero id as a real directory id).
//!
//! # Keys without a node setting
//!
//! `snapshot_chunk_bytes_max` and `payload_cache_bytes_max` have no configuration key yet: they
//! keep [`corum_raft::Config::default`]'s values.

use corum_raft::{Endpoint, QuorumStateRecord, ReplicaKey as RaftReplicaKey, Voter, VoterSet};
use corum_types::{NodeId, Uuid};

use crate::bootstrap::BootstrapVoters;
use crate::config::{NodeConfig, QuorumVoter};
use crate::error::ConfigError;
use crate::quorum_state::{QuorumState, ReplicaKey};

/// The node configuration key that sets a field of [`corum_raft::Config`], for error messages.
fn key_of_raft_field(message: &str) -> &'static str {
    const FIELDS: &[(&str, &str)] = &[
        (
            "election_timeout_ms",
            "controller.quorum.election.timeout.ms",
        ),
        ("fetch_timeout_ms", "controller.quorum.fetch.timeout.ms"),
        (
            "election_backoff_max_ms",
            "controller.quorum.election.backoff.max.ms",
        ),
        ("heartbeat_interval_ms", "corum.raft.heartbeat.interval.ms"),
        ("request_timeout_ms", "controller.quorum.request.timeout.ms"),
        (
            "append_inflight_count_max",
            "corum.raft.append.inflight.count.max",
        ),
        (
            "append_inflight_bytes_max",
            "corum.raft.append.inflight.bytes.max",
        ),
        ("batch_bytes_max", "corum.raft.batch.bytes.max"),
        ("fetch_wait_max_ms", "corum.raft.fetch.wait.max.ms"),
    ];
    // The field named first in the message is the one the rule is about.
    FIELDS
        .iter()
        .filter_map(|(f, k)| message.find(f).map(|at| (at, *k)))
        .min()
        .map_or("corum.raft", |(_, k)| k)
}

/// The Raft core's configuration from the node's, validated by [`corum_raft::Config::validate`].
/// A rule the Raft crate breaks is reported under the node key that sets the field.
pub fn raft_config(config: &NodeConfig) -> Result<corum_raft::Config, ConfigError> {
    let usize_of = |key: &'static str, v: u64| {
        usize::try_from(v).map_err(|_| ConfigError::Invalid {
            key,
            reason: format!("{v} does not fit in this machine's address space"),
        })
    };
    let raft = corum_raft::Config {
        election_timeout_ms: config.election_timeout_ms,
        fetch_timeout_ms: config.fetch_timeout_ms,
        election_backoff_max_ms: config.election_backoff_max_ms,
        heartbeat_interval_ms: config.raft_heartbeat_interval_ms,
        request_timeout_ms: config.request_timeout_ms,
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
        ..corum_raft::Config::default()
    };
    raft.validate().map_err(|e| {
        let reason = e.to_string();
        ConfigError::Invalid {
            key: key_of_raft_field(&reason),
            reason,
        }
    })?;
    Ok(raft)
}

/// The directory id as the Raft crate writes it (`Uuid::ZERO` for none).
pub fn raft_directory_id(directory_id: Option<Uuid>) -> Uuid {
    directory_id.unwrap_or(Uuid::ZERO)
}

/// The directory id as corum-node writes it (`None` for `Uuid::ZERO`).
pub fn node_directory_id(directory_id: Uuid) -> Option<Uuid> {
    (!directory_id.is_zero()).then_some(directory_id)
}

/// A node [`ReplicaKey`] as the Raft crate's.
pub fn to_raft_replica_key(key: ReplicaKey) -> RaftReplicaKey {
    RaftReplicaKey {
        id: key.id,
        directory_id: raft_directory_id(key.directory_id),
    }
}

/// A Raft [`RaftReplicaKey`] as the node's.
pub fn from_raft_replica_key(key: RaftReplicaKey) -> ReplicaKey {
    ReplicaKey {
        id: key.id,
        directory_id: node_directory_id(key.directory_id),
    }
}

/// The persisted `quorum-state` as the Raft core's record (for [`corum_raft::Restore`]).
pub fn to_raft_quorum_state(state: &QuorumState) -> QuorumStateRecord {
    QuorumStateRecord {
        epoch: state.epoch,
        leader: state.leader,
        voted_for: state.voted_for.map(to_raft_replica_key),
    }
}

/// The Raft core's record (from [`corum_raft::Ready::quorum_state`]) as the node's file.
pub fn from_raft_quorum_state(record: &QuorumStateRecord) -> QuorumState {
    QuorumState {
        epoch: record.epoch,
        leader: record.leader,
        voted_for: record.voted_for.map(from_raft_replica_key),
    }
}

/// One `controller.quorum.voters` entry as a Raft voter reachable on `listener_name` (the
/// node's controller listener: static voters all listen under the same name).
pub fn raft_voter(voter: &QuorumVoter, listener_name: &str) -> Voter {
    Voter {
        key: RaftReplicaKey {
            id: voter.id,
            directory_id: raft_directory_id(voter.directory_id),
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
pub fn static_voter_set(config: &NodeConfig) -> Result<VoterSet, ConfigError> {
    let name = &config.controller_listener().name;
    VoterSet::new(
        config
            .quorum_voters
            .iter()
            .map(|v| raft_voter(v, name))
            .collect(),
    )
    .map_err(|e| ConfigError::Invalid {
        key: "controller.quorum.voters",
        reason: e.to_string(),
    })
}

/// The initial voter set of a dynamic quorum's `bootstrap.checkpoint` (kraft.version 1).
/// `None` for a static quorum (kraft.version 0: use [`static_voter_set`]).
pub fn bootstrap_voter_set(bootstrap: &BootstrapVoters) -> Result<Option<VoterSet>, String> {
    if bootstrap.kraft_version == 0 {
        return Ok(None);
    }
    VoterSet::new(
        bootstrap
            .voters
            .iter()
            .map(|v| Voter {
                key: RaftReplicaKey {
                    id: v.id,
                    directory_id: v.directory_id,
                },
                endpoints: v
                    .endpoints
                    .iter()
                    .map(|e| Endpoint {
                        listener: e.name.clone(),
                        host: e.host.clone(),
                        port: e.port,
                    })
                    .collect(),
            })
            .collect(),
    )
    .map(Some)
    .map_err(|e| e.to_string())
}

/// This node's identity and endpoints as [`corum_raft::RaftCore::new`] takes them (`me`,
/// `endpoints`): the node id, the directory id of `meta.properties`, and the controller
/// listener.
pub fn local_replica(config: &NodeConfig, directory_id: Uuid) -> (RaftReplicaKey, Vec<Endpoint>) {
    let listener = config.controller_listener();
    (
        RaftReplicaKey {
            id: config.node_id,
            directory_id,
        },
        vec![Endpoint {
            listener: listener.name.clone(),
            host: listener.endpoint.host.clone(),
            port: listener.endpoint.port,
        }],
    )
}

/// Where to reach every voter but `me`, on the listener named `listener_name`: the peers the
/// node's [`crate::peer::PeerNetwork`] connects to. A voter without an endpoint of that name is
/// left out (it cannot be reached).
pub fn peer_endpoints(
    voters: &VoterSet,
    me: NodeId,
    listener_name: &str,
) -> Vec<(NodeId, Endpoint)> {
    voters
        .voters()
        .iter()
        .filter(|v| v.key.id != me)
        .filter_map(|v| {
            v.endpoints
                .iter()
                .find(|e| e.listener == listener_name)
                .map(|e| (v.key.id, e.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::{BootstrapEndpoint, BootstrapVoter};
    use corum_types::Epoch;
    use proptest::prelude::*;

    fn base(extra: &[(&str, &str)]) -> NodeConfig {
        let mut overrides: Vec<(String, String)> = vec![
            ("node.id".into(), "1".into()),
            ("process.roles".into(), "controller".into()),
            ("listeners".into(), "CONTROLLER://127.0.0.1:9093".into()),
            ("controller.listener.names".into(), "CONTROLLER".into()),
            (
                "controller.quorum.voters".into(),
                "1@127.0.0.1:9093,2@127.0.0.2:9093:AAAAAAAAAAAAAAAAAAAAAQ,3@127.0.0.3:9093".into(),
            ),
            ("metadata.log.dir".into(), "/tmp/x".into()),
        ];
        overrides.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        NodeConfig::load(None, &overrides).unwrap()
    }

    /// Every Raft key of the node configuration lands in its field, the rest keep the Raft
    /// crate's defaults, and the result is valid.
    #[test]
    fn keys_map_to_fields() {
        let c = base(&[
            ("controller.quorum.election.timeout.ms", "1500"),
            ("controller.quorum.fetch.timeout.ms", "3000"),
            ("controller.quorum.election.backoff.max.ms", "700"),
            ("controller.quorum.request.timeout.ms", "2500"),
            ("corum.raft.heartbeat.interval.ms", "100"),
            ("corum.raft.append.inflight.count.max", "9"),
            ("corum.raft.append.inflight.bytes.max", "4194304"),
            ("corum.raft.batch.bytes.max", "65536"),
            ("corum.raft.fetch.wait.max.ms", "400"),
        ]);
        let r = raft_config(&c).unwrap();
        let d = corum_raft::Config::default();
        assert_eq!(
            r,
            corum_raft::Config {
                election_timeout_ms: 1500,
                fetch_timeout_ms: 3000,
                election_backoff_max_ms: 700,
                heartbeat_interval_ms: 100,
                request_timeout_ms: 2500,
                append_inflight_count_max: 9,
                append_inflight_bytes_max: 4 << 20,
                batch_bytes_max: 65536,
                fetch_wait_max_ms: 400,
                snapshot_chunk_bytes_max: d.snapshot_chunk_bytes_max,
                payload_cache_bytes_max: d.payload_cache_bytes_max,
            }
        );
        raft_config(&base(&[])).unwrap();
    }

    /// A value the node's own validation lets through but the Raft core refuses is reported
    /// under the key that sets it.
    #[test]
    fn raft_rule_names_the_node_key() {
        let mut c = base(&[]);
        c.raft_append_inflight_count_max = 0;
        let e = raft_config(&c).unwrap_err();
        assert!(
            matches!(
                &e,
                ConfigError::Invalid {
                    key: "corum.raft.append.inflight.count.max",
                    ..
                }
            ),
            "{e:?}"
        );
        let mut c = base(&[]);
        c.election_backoff_max_ms = 0;
        let e = raft_config(&c).unwrap_err();
        assert!(
            matches!(
                &e,
                ConfigError::Invalid {
                    key: "controller.quorum.election.backoff.max.ms",
                    ..
                }
            ),
            "{e:?}"
        );
    }

    /// The static voters become a sorted voter set with the controller listener's name, the
    /// directory id mapped from `None` to zero, and every voter but this node is a peer.
    #[test]
    fn static_voters_and_peers() {
        let c = base(&[]);
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
        let peers = peer_endpoints(&set, NodeId(1), "CONTROLLER");
        assert_eq!(
            peers
                .iter()
                .map(|(id, e)| (id.0, e.host.as_str()))
                .collect::<Vec<_>>(),
            [(2, "127.0.0.2"), (3, "127.0.0.3")]
        );
        assert!(peer_endpoints(&set, NodeId(1), "OTHER").is_empty());
        let (me, eps) = local_replica(&c, Uuid([7; 16]));
        assert_eq!(me.id, NodeId(1));
        assert_eq!(me.directory_id, Uuid([7; 16]));
        assert_eq!(eps, v1.endpoints);
    }

    /// A dynamic bootstrap checkpoint becomes the same voters with their endpoints; a static
    /// one gives no set; duplicate ids are refused.
    #[test]
    fn bootstrap_voters_convert() {
        let voter = |id: u32| BootstrapVoter {
            id: NodeId(id),
            directory_id: Uuid([id as u8; 16]),
            endpoints: vec![BootstrapEndpoint {
                name: "CONTROLLER".into(),
                host: format!("h{id}"),
                port: 9000 + id as u16,
            }],
        };
        let b = BootstrapVoters {
            kraft_version: 1,
            voters: vec![voter(3), voter(1)],
        };
        let set = bootstrap_voter_set(&b).unwrap().unwrap();
        assert_eq!(set.ids().collect::<Vec<_>>(), [NodeId(1), NodeId(3)]);
        let v3 = set.get(NodeId(3)).unwrap();
        assert_eq!(v3.key.directory_id, Uuid([3; 16]));
        assert_eq!(v3.endpoints[0].host, "h3");
        assert_eq!(v3.endpoints[0].port, 9003);
        let static_ = BootstrapVoters {
            kraft_version: 0,
            voters: vec![],
        };
        assert_eq!(bootstrap_voter_set(&static_).unwrap(), None);
        let dup = BootstrapVoters {
            kraft_version: 1,
            voters: vec![voter(1), voter(1)],
        };
        assert!(bootstrap_voter_set(&dup).is_err());
    }

    fn arb_state() -> impl Strategy<Value = QuorumState> {
        (
            1u64..,
            proptest::option::of(any::<u32>()),
            proptest::option::of((any::<u32>(), proptest::option::of(1u128..))),
        )
            .prop_map(|(e, l, v)| QuorumState {
                epoch: Epoch(e),
                leader: l.map(NodeId),
                voted_for: v.map(|(id, d)| ReplicaKey {
                    id: NodeId(id),
                    directory_id: d.map(Uuid::from_random_bits),
                }),
            })
    }

    proptest! {
        /// node -> Raft -> node is the identity for every quorum state, and so is the way
        /// through the Raft crate's own encoding; the Raft side writes "none" as the zero id.
        #[test]
        fn quorum_state_round_trip(s in arb_state()) {
            let r = to_raft_quorum_state(&s);
            prop_assert_eq!(from_raft_quorum_state(&r), s);
            let back = QuorumStateRecord::decode(&r.encode()).unwrap();
            prop_assert_eq!(from_raft_quorum_state(&back), s);
            if let Some(v) = s.voted_for {
                let rv = r.voted_for.unwrap();
                prop_assert_eq!(rv.directory_id.is_zero(), v.directory_id.is_none());
            }
        }

        /// Raft -> node -> Raft is the identity too (zero maps to None and back to zero).
        #[test]
        fn raft_record_round_trip(e in any::<u64>(), l in proptest::option::of(any::<u32>()),
                                  v in proptest::option::of((any::<u32>(), any::<[u8; 16]>()))) {
            let r = QuorumStateRecord {
                epoch: Epoch(e),
                leader: l.map(NodeId),
                voted_for: v.map(|(id, d)| RaftReplicaKey { id: NodeId(id), directory_id: Uuid(d) }),
            };
            prop_assert_eq!(to_raft_quorum_state(&from_raft_quorum_state(&r)), r);
        }
    }
}
