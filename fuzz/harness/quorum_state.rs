//! The node's `quorum-state` file (`corum_node::QuorumState::decode_bytes`): the epoch, leader
//! and vote a controller must remember across a restart.
//!
//! The input is the file's bytes. They either fail with an error or decode to a state whose
//! encoding is exactly the input (the layout has one spelling: reserved bytes must be zero,
//! flags agree with the fields).

use corum_node::quorum_state::{QuorumState, ReplicaKey};
use corum_types::{Epoch, NodeId, Uuid};

pub fn run(data: &[u8]) {
    match QuorumState::decode_bytes(data) {
        Ok(state) => assert_eq!(
            &state.encode()[..],
            data,
            "a decoded quorum state re-encodes to its own bytes"
        ),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// Seeds: a fresh state, one with a leader, one with a vote (with and without a directory
/// id), and damaged ones.
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let states = [
        (
            "empty",
            QuorumState {
                epoch: Epoch(0),
                leader: None,
                voted_for: None,
            },
        ),
        (
            "leader",
            QuorumState {
                epoch: Epoch(5),
                leader: Some(NodeId(2)),
                voted_for: None,
            },
        ),
        (
            "voted",
            QuorumState {
                epoch: Epoch(6),
                leader: None,
                voted_for: Some(ReplicaKey {
                    id: NodeId(3),
                    directory_id: Some(Uuid([3; 16])),
                }),
            },
        ),
        (
            "voted-leader-no-directory",
            QuorumState {
                epoch: Epoch(7),
                leader: Some(NodeId(1)),
                voted_for: Some(ReplicaKey {
                    id: NodeId(1),
                    directory_id: None,
                }),
            },
        ),
    ];
    let mut seeds: Vec<(String, Vec<u8>)> = states
        .iter()
        .map(|(name, s)| (name.to_string(), s.encode().to_vec()))
        .collect();
    let mut flipped = states[1].1.encode().to_vec();
    flipped[9] ^= 1;
    seeds.push(("bad-checksum".to_owned(), flipped));
    let whole = states[2].1.encode();
    seeds.push(("truncated".to_owned(), whole[..whole.len() - 3].to_vec()));
    seeds
}
