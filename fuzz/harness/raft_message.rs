//! Raft messages (`corum_raft::Message::decode`, the body of every peer frame's message) and
//! control batches (`corum_raft::control::decode`, the voter set, leader change and
//! `kraft.version` records in the log, in snapshots and in snapshot chunks).
//!
//! The first byte picks the decoder (even: a message, odd: a control batch); the rest is its
//! input. Bytes either decode or fail with an error, never a panic; what decodes meets the
//! decoder's rules (a message's `validate`, a control batch's voter sets) and survives a round
//! trip: its encoding decodes to an equal value.

use corum_raft::control;
use corum_raft::message::{
    AddVoterRequest, AppendRequest, AppendResponse, AppendResult, FetchRequest, FetchResponse,
    FetchResult, FetchSnapshotRequest, FetchSnapshotResponse, FetchSnapshotResult,
    UpgradeKraftVersionRequest, VoteRequest, VoterChangeResponse,
};
use corum_raft::types::{ReplicaKey, SnapshotId};
use corum_raft::{Message, Payload};
use corum_types::{Epoch, LogOffset, NodeId, Uuid};

#[path = "common.rs"]
mod common;

pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector % 2 == 0 {
        match Message::decode(rest) {
            Ok(m) => {
                m.validate().expect("a decoded message is valid");
                let again = Message::decode(&m.encode()).expect("a re-encoded message decodes");
                assert_eq!(again, m, "a message survives a round trip");
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    } else {
        match control::decode(rest) {
            Ok(records) => {
                assert!(!records.is_empty());
                let payload = control::encode(records.clone());
                let again = control::decode(&payload).expect("re-encoded control records decode");
                assert_eq!(again, records, "control records survive a round trip");
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}

/// Seeds: one message of each kind a node sends (batches in appends and fetch answers, a
/// snapshot chunk with its voter set), and control batches.
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let me = ReplicaKey {
        id: NodeId(2),
        directory_id: Uuid([2; 16]),
    };
    let snapshot = SnapshotId {
        end_offset: LogOffset(100),
        epoch: Epoch(2),
    };
    let voters = common::voter_set();
    let messages: Vec<(&str, Message)> = vec![
        (
            "vote",
            Message::Vote(VoteRequest {
                epoch: Epoch(3),
                candidate: me,
                last_epoch: Epoch(2),
                end_offset: LogOffset(120),
                pre_vote: true,
            }),
        ),
        (
            "append",
            Message::Append(AppendRequest {
                epoch: Epoch(3),
                leader: NodeId(1),
                seq: 7,
                prev_end: LogOffset(120),
                prev_epoch: Epoch(3),
                batches: common::batches(120),
                high_watermark: LogOffset(118),
                snapshot: Some(snapshot),
            }),
        ),
        (
            "append-response",
            Message::AppendResponse(AppendResponse {
                epoch: Epoch(3),
                replica: me,
                seq: 7,
                result: AppendResult::Mismatch {
                    end_offset: LogOffset(110),
                    last_epoch: Epoch(2),
                    last_epoch_start: LogOffset(90),
                },
            }),
        ),
        (
            "fetch",
            Message::Fetch(FetchRequest {
                epoch: Epoch(3),
                replica: me,
                fetch_offset: LogOffset(120),
                last_fetched_epoch: Epoch(3),
                high_watermark: LogOffset(118),
                wait_max_ms: 500,
            }),
        ),
        (
            "fetch-response",
            Message::FetchResponse(FetchResponse {
                epoch: Epoch(3),
                leader: Some(NodeId(1)),
                result: FetchResult::Batches {
                    fetch_offset: LogOffset(120),
                    last_fetched_epoch: Epoch(3),
                    batches: common::batches(120),
                    high_watermark: LogOffset(130),
                },
            }),
        ),
        (
            "fetch-snapshot",
            Message::FetchSnapshot(FetchSnapshotRequest {
                epoch: Epoch(3),
                replica: me,
                snapshot,
                position: 4096,
            }),
        ),
        (
            "snapshot-chunk",
            Message::FetchSnapshotResponse(FetchSnapshotResponse {
                epoch: Epoch(3),
                leader: Some(NodeId(1)),
                result: FetchSnapshotResult::Chunk {
                    snapshot,
                    voters: voters.clone(),
                    kraft_version: 1,
                    size_total: 9000,
                    position: 4096,
                    bytes: Payload::from(&[0x5au8; 64][..]),
                },
            }),
        ),
        (
            "add-voter",
            Message::AddVoter(AddVoterRequest {
                request_id: 11,
                voter: voters.voters()[0].clone(),
            }),
        ),
        (
            "voter-change-response",
            Message::VoterChangeResponse(VoterChangeResponse {
                request_id: 11,
                result: Ok(()),
                leader: Some(NodeId(1)),
            }),
        ),
        (
            "upgrade-kraft-version",
            Message::UpgradeKraftVersion(UpgradeKraftVersionRequest {
                request_id: 12,
                version: 1,
                validate_only: false,
            }),
        ),
    ];
    let mut seeds: Vec<(String, Vec<u8>)> = messages
        .into_iter()
        .map(|(name, m)| {
            let mut bytes = vec![0u8];
            bytes.extend_from_slice(&m.encode());
            (format!("message-{name}"), bytes)
        })
        .collect();
    for (name, records) in [
        ("all", common::control_records()),
        ("voters", common::control_records()[1..2].to_vec()),
    ] {
        let mut bytes = vec![1u8];
        bytes.extend_from_slice(&control::encode(records));
        seeds.push((format!("control-{name}"), bytes));
    }
    seeds.push(("message-empty".to_owned(), vec![0]));
    seeds
}
