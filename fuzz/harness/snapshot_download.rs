//! A follower's snapshot download (`corum_raft::follower::SnapshotDownload::on_result`): the
//! chunks a leader answers FetchSnapshot with, decoded from the network
//! (`corum_raft::Message::decode`) and assembled into the snapshot the follower installs.
//!
//! The input is a sequence of messages, each a little-endian `u16` length and that many bytes
//! of a Raft message. Every FetchSnapshot response among them that decodes is handed to one
//! download of snapshot (100, epoch 2), limited to 64 KiB, in order. Each answer is refused
//! with an error that changes nothing (the bytes received stay the same), or accepted: the
//! next position is what was received, and a complete download gives a snapshot of exactly
//! the size every chunk stated, with the voter set they stated.

use corum_raft::follower::{DownloadStep, SnapshotDownload};
use corum_raft::message::{FetchSnapshotResponse, FetchSnapshotResult};
use corum_raft::types::SnapshotId;
use corum_raft::{Message, Payload};
use corum_types::{Epoch, LogOffset, NodeId};

#[path = "common.rs"]
mod common;

/// The snapshot the download asks for.
const SNAPSHOT: SnapshotId = SnapshotId {
    end_offset: LogOffset(100),
    epoch: Epoch(2),
};
/// The largest snapshot the download takes.
const SIZE_MAX: u64 = 64 << 10;

pub fn run(data: &[u8]) {
    let mut download = SnapshotDownload::new(SNAPSHOT, SIZE_MAX);
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let end = (2 + len).min(rest.len());
        let message = &rest[2..end];
        rest = &rest[end..];
        let Ok(Message::FetchSnapshotResponse(response)) = Message::decode(message) else {
            continue;
        };
        let received = download.received();
        match download.on_result(response.result.clone()) {
            Ok(DownloadStep::Next { position }) => {
                assert_eq!(position, download.received());
                assert!(!download.is_complete());
            }
            Ok(DownloadStep::Complete) => {
                let snapshot = download.snapshot_complete().expect("a complete snapshot");
                assert_eq!(Some(snapshot.data.len() as u64), download.size_total());
                assert!(snapshot.data.len() as u64 <= SIZE_MAX);
                assert_eq!(snapshot.id, SNAPSHOT);
                let FetchSnapshotResult::Chunk { voters, .. } = response.result else {
                    panic!("only a chunk completes a download");
                };
                assert_eq!(snapshot.voters, voters);
            }
            Ok(DownloadStep::NotFound | DownloadStep::NotLeader) => {
                assert_eq!(download.received(), received);
            }
            Err(e) => {
                assert_eq!(
                    download.received(),
                    received,
                    "a refused chunk changes nothing"
                );
                assert!(!e.to_string().is_empty());
            }
        }
        if let Some(total) = download.size_total() {
            assert!(download.received() <= total && total <= SIZE_MAX);
        }
    }
}

/// One chunk of `data` from `position`, as a framed message of the input.
fn chunk(data: &[u8], position: usize, len: usize, size_total: u64) -> Vec<u8> {
    let message = Message::FetchSnapshotResponse(FetchSnapshotResponse {
        epoch: Epoch(3),
        leader: Some(NodeId(1)),
        result: FetchSnapshotResult::Chunk {
            snapshot: SNAPSHOT,
            voters: common::voter_set(),
            kraft_version: 1,
            size_total,
            position: position as u64,
            bytes: Payload::from(&data[position..(position + len).min(data.len())]),
        },
    });
    let bytes = message.encode();
    let mut out = (bytes.len() as u16).to_le_bytes().to_vec();
    out.extend_from_slice(&bytes);
    out
}

/// Seeds: a controller snapshot's data downloaded in three chunks, in one, out of order, with
/// a NotLeader answer between chunks, and an empty snapshot.
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let data = corum_controller::encode_batch(&common::metadata_records()).to_vec();
    let total = data.len() as u64;
    let third = data.len().div_ceil(3);
    let in_three: Vec<u8> = (0..3)
        .flat_map(|i| chunk(&data, i * third, third, total))
        .collect();
    let mut not_leader = chunk(&data, 0, third, total);
    let nl = Message::FetchSnapshotResponse(FetchSnapshotResponse {
        epoch: Epoch(4),
        leader: None,
        result: FetchSnapshotResult::NotLeader,
    })
    .encode();
    not_leader.extend_from_slice(&(nl.len() as u16).to_le_bytes());
    not_leader.extend_from_slice(&nl);
    not_leader.extend_from_slice(&chunk(&data, third, data.len(), total));
    let mut out_of_order = chunk(&data, third, third, total);
    out_of_order.extend_from_slice(&chunk(&data, 0, third, total));
    vec![
        ("three-chunks".to_owned(), in_three),
        ("one-chunk".to_owned(), chunk(&data, 0, data.len(), total)),
        ("not-leader-between".to_owned(), not_leader),
        ("out-of-order".to_owned(), out_of_order),
        ("empty-snapshot".to_owned(), chunk(&[], 0, 0, 0)),
    ]
}
