//! From the node's configuration and files to what [`corum_raft`] takes, and back.
//!
//! | node side                                    | Raft side                          | function                    |
//! |----------------------------------------------|------------------------------------|-----------------------------|
//! | `bootstrap.checkpoint` ([`BootstrapCheckpoint`]) | [`VoterSet`] (dynamic bootstrap)   | [`bootstrap_voter_set`]     |
//! | `quorum-state` ([`QuorumState`])             | [`QuorumStateRecord`]              | [`to_raft_quorum_state`] / [`from_raft_quorum_state`] |
//! | [`ReplicaKey`] (directory id or none)        | [`RaftReplicaKey`] (zero for none) | [`to_raft_replica_key`] / [`from_raft_replica_key`] |
//! | a voter set and this node                    | the peers to connect to            | [`peer_endpoints`]          |
//!
//! What comes from the node's configuration (the Raft core's [`corum_raft::Config`], the static
//! voter set of `controller.quorum.voters`, this replica's identity) is derived in
//! [`crate::config::components`].
//!
//! # Directory ids
//!
//! corum-node writes "no directory id" as `None` (a static voter named only by
//! `ID@HOST:PORT`); the Raft crate uses [`Uuid::ZERO`] for the same thing. The conversions map
//! one to the other both ways, and never produce `Some(Uuid::ZERO)` (the node's parsers refuse
//! the all-zero id as a real directory id).
//!
use corum_raft::{Endpoint, QuorumStateRecord, ReplicaKey as RaftReplicaKey, Voter, VoterSet};
use corum_types::{NodeId, Uuid};

use crate::bootstrap::BootstrapCheckpoint;
use crate::protocol::LeaderHint;
use crate::quorum_state::{QuorumState, ReplicaKey};

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

/// The initial voter set of a dynamic quorum's `bootstrap.checkpoint` (kraft.version 1).
/// `None` for a static quorum (kraft.version 0: use [`crate::config::components::static_voter_set`]).
pub fn bootstrap_voter_set(bootstrap: &BootstrapCheckpoint) -> Result<Option<VoterSet>, String> {
    if bootstrap.kraft_version == 0 {
        return Ok(None);
    }
    if bootstrap.is_joining() {
        return Ok(Some(VoterSet::default()));
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

/// Each voter's endpoint on `listener`, as leader hints.
pub fn leader_endpoints(voters: &VoterSet, listener: &str) -> Vec<LeaderHint> {
    voters
        .voters()
        .iter()
        .filter_map(|v| {
            v.endpoints
                .iter()
                .find(|e| e.listener == listener)
                .map(|e| LeaderHint {
                    id: v.key.id,
                    host: e.host.clone(),
                    port: e.port,
                })
        })
        .collect()
}

/// The leader `leader` as a `NotController` hint from the voter set in force: its endpoint on
/// `listener`, or `None` when the set does not hold it (not yet known, or removed).
pub fn voter_hint(voters: &VoterSet, leader: NodeId, listener: &str) -> Option<LeaderHint> {
    let e = voters
        .get(leader)?
        .endpoints
        .iter()
        .find(|e| e.listener == listener)?;
    Some(LeaderHint {
        id: leader,
        host: e.host.clone(),
        port: e.port,
    })
}

/// The leader `leader` as a `NotController` hint: its entry in `endpoints`, or its id alone
/// when its endpoint is unknown (the id still helps a client that knows the node).
pub fn leader_hint(endpoints: &[LeaderHint], leader: NodeId) -> LeaderHint {
    endpoints
        .iter()
        .find(|h| h.id == leader)
        .cloned()
        .unwrap_or(LeaderHint {
            id: leader,
            host: String::new(),
            port: 0,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::{BootstrapEndpoint, BootstrapVoter};
    use corum_types::Epoch;
    use proptest::prelude::*;

    /// Every voter but this node is a peer, reached on the named listener; a voter without
    /// an endpoint of that name is left out.
    #[test]
    fn peers_are_the_other_voters() {
        let voter = |id: u32, listener: &str| Voter {
            key: RaftReplicaKey {
                id: NodeId(id),
                directory_id: Uuid::ZERO,
            },
            endpoints: vec![Endpoint {
                listener: listener.into(),
                host: format!("127.0.0.{id}"),
                port: 9093,
            }],
        };
        let set = VoterSet::new(vec![
            voter(1, "CONTROLLER"),
            voter(2, "CONTROLLER"),
            voter(3, "CONTROLLER"),
            voter(4, "OTHER"),
        ])
        .unwrap();
        let peers = peer_endpoints(&set, NodeId(1), "CONTROLLER");
        assert_eq!(
            peers
                .iter()
                .map(|(id, e)| (id.0, e.host.as_str()))
                .collect::<Vec<_>>(),
            [(2, "127.0.0.2"), (3, "127.0.0.3")]
        );
        assert_eq!(peer_endpoints(&set, NodeId(1), "OTHER").len(), 1);
        assert!(peer_endpoints(&set, NodeId(4), "NONE").is_empty());
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
        let b = BootstrapCheckpoint {
            kraft_version: 1,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
            voters: vec![voter(3), voter(1)],
        };
        let set = bootstrap_voter_set(&b).unwrap().unwrap();
        assert_eq!(set.ids().collect::<Vec<_>>(), [NodeId(1), NodeId(3)]);
        let v3 = set.get(NodeId(3)).unwrap();
        assert_eq!(v3.key.directory_id, Uuid([3; 16]));
        assert_eq!(v3.endpoints[0].host, "h3");
        assert_eq!(v3.endpoints[0].port, 9003);
        let static_ = BootstrapCheckpoint {
            kraft_version: 0,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
            voters: vec![],
        };
        assert_eq!(bootstrap_voter_set(&static_).unwrap(), None);
        let dup = BootstrapCheckpoint {
            kraft_version: 1,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
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
        /// node -> Raft -> node is the identity for every quorum state; the Raft side writes
        /// "none" as the zero id.
        #[test]
        fn quorum_state_round_trip(s in arb_state()) {
            let r = to_raft_quorum_state(&s);
            prop_assert_eq!(from_raft_quorum_state(&r), s);
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

    /// Leader hints come from each voter's endpoint on the named listener.
    #[test]
    fn leader_endpoints_use_the_listener() {
        use corum_raft::{Endpoint, ReplicaKey, Voter};
        use corum_types::Uuid;
        let voter = |id: u32, listener: &str| Voter {
            key: ReplicaKey {
                id: NodeId(id),
                directory_id: Uuid([id as u8; 16]),
            },
            endpoints: vec![Endpoint {
                listener: listener.into(),
                host: format!("10.0.0.{id}"),
                port: 9093,
            }],
        };
        let voters = VoterSet::new(vec![voter(1, "CONTROLLER"), voter(2, "OTHER")]).unwrap();
        let hints = leader_endpoints(&voters, "CONTROLLER");
        assert_eq!(
            leader_hint(&hints, NodeId(2)).port,
            0,
            "no endpoint: the id alone"
        );
        assert_eq!(
            hints,
            vec![LeaderHint {
                id: NodeId(1),
                host: "10.0.0.1".into(),
                port: 9093
            }]
        );
    }
}
