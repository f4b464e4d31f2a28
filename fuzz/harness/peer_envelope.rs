//! The peer envelope (`corum_node::PeerEnvelope`): one Raft message between two controllers,
//! as a node's peer listener receives it — a runtime frame
//! (`corum_runtime::message::decode_frame`, the frame checks and rkyv's validation), the
//! envelope deserialized, then `PeerEnvelope::check` (cluster, addressee, routes, the Raft
//! message's own rules).
//!
//! The first byte picks the input's form: even, the rest is an envelope archive, framed by the
//! harness with a correct checksum so the mutations reach rkyv's validation; odd, the rest is
//! the frame bytes as they come off the socket. Either is refused with an error, or gives an
//! envelope that survives a frame round trip and that `check` accepts or refuses with an error.

use corum_node::peer::{PeerEnvelope, PeerRoute};
use corum_raft::message::{AppendRequest, VoteRequest};
use corum_raft::types::ReplicaKey;
use corum_raft::Message;
use corum_runtime::message::{decode_frame, encode_frame};
use corum_types::{Epoch, LogOffset, NodeId, Uuid};
use rkyv::util::AlignedVec;

#[path = "common.rs"]
mod common;

/// The frame limit the harness receives under.
const PAYLOAD_BYTES_MAX: u32 = 1 << 20;
/// The receiving node's cluster and id.
const CLUSTER: Uuid = Uuid([5; 16]);
const ME: NodeId = NodeId(2);

pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let framed;
    let frame: &[u8] = if selector % 2 == 0 {
        let mut out = Vec::new();
        corum_runtime::frame::encode(rest, &mut out);
        framed = out;
        &framed
    } else {
        rest
    };
    let validated = match decode_frame::<PeerEnvelope>(frame, PAYLOAD_BYTES_MAX) {
        Ok(v) => v,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let envelope: PeerEnvelope =
        rkyv::deserialize::<PeerEnvelope, rkyv::rancor::Error>(validated.get())
            .expect("a validated envelope deserializes");
    if let Err(e) = envelope.check(CLUSTER, ME) {
        assert!(!e.to_string().is_empty());
    }
    let mut buf = AlignedVec::new();
    encode_frame(&envelope, &mut buf, u32::MAX).expect("a received envelope encodes");
    let again =
        decode_frame::<PeerEnvelope>(&buf, u32::MAX).expect("a re-encoded envelope decodes");
    let back: PeerEnvelope =
        rkyv::deserialize::<PeerEnvelope, rkyv::rancor::Error>(again.get()).expect("deserializes");
    assert_eq!(back, envelope, "an envelope survives a round trip");
}

/// Seeds: envelopes of a vote and of an append with real batches, with and without routes,
/// as archives (selector 0) and as whole frames (selector 1).
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let envelope = |message: Message, routes: Vec<PeerRoute>| PeerEnvelope {
        cluster_id: CLUSTER,
        from: NodeId(1),
        to: ME,
        message,
        routes,
    };
    let vote = Message::Vote(VoteRequest {
        epoch: Epoch(4),
        candidate: ReplicaKey {
            id: NodeId(1),
            directory_id: Uuid([1; 16]),
        },
        last_epoch: Epoch(3),
        end_offset: LogOffset(133),
        pre_vote: false,
    });
    let append = Message::Append(AppendRequest {
        epoch: Epoch(3),
        leader: NodeId(1),
        seq: 9,
        prev_end: LogOffset(120),
        prev_epoch: Epoch(3),
        batches: common::batches(120),
        high_watermark: LogOffset(118),
        snapshot: None,
    });
    let route = PeerRoute {
        id: NodeId(1),
        host: "controller-1".into(),
        port: 9093,
    };
    let mut seeds = Vec::new();
    for (name, e) in [
        ("vote", envelope(vote, vec![])),
        (
            "vote-routes",
            envelope(vote_clone_free(), vec![route.clone()]),
        ),
        ("append", envelope(append, vec![route])),
    ] {
        let mut buf = AlignedVec::new();
        let payload = encode_frame(&e, &mut buf, PAYLOAD_BYTES_MAX).expect("fits");
        let frame_start = corum_runtime::frame::HEADER_BYTES;
        let mut archive = vec![0u8];
        archive.extend_from_slice(&buf[frame_start..frame_start + payload]);
        seeds.push((format!("archive-{name}"), archive));
        let mut frame = vec![1u8];
        frame.extend_from_slice(&buf);
        seeds.push((format!("frame-{name}"), frame));
    }
    seeds
}

/// A pre-vote from node 3 (a second vote seed without cloning the first).
fn vote_clone_free() -> Message {
    Message::Vote(VoteRequest {
        epoch: Epoch(5),
        candidate: ReplicaKey {
            id: NodeId(3),
            directory_id: Uuid([3; 16]),
        },
        last_epoch: Epoch(4),
        end_offset: LogOffset(140),
        pre_vote: true,
    })
}
