//! Snapshot files (`corum_node::snapshot_store::decode`): what a node loads at start and what a
//! follower writes from a snapshot it downloaded (KIP-630), with the voter set and
//! `kraft.version` at its end.
//!
//! The input is the file's bytes. They either fail with an error naming the file, or decode to
//! a snapshot whose voter set validates and which `snapshot_store::encode` (the layout `write`
//! puts on disk) turns back into exactly the input. The data of an accepted snapshot is then
//! decoded as the controller does (`decode_batch`, then replayed as a snapshot), which must
//! fail with an error or give an image whose structural invariants hold.

use std::path::Path;

use corum_controller::records::{aligned, decode_batch, encode_batch};
use corum_controller::MetadataImage;
use corum_node::snapshot_store::{decode, encode};
use corum_raft::{Payload, Snapshot, SnapshotId};
use corum_types::{Epoch, LogOffset};

#[path = "common.rs"]
mod common;

fn path() -> &'static Path {
    Path::new("/data/snapshots/00000000000000000100-0000000002.snapshot")
}

pub fn run(data: &[u8]) {
    match decode(data, path()) {
        Ok(snapshot) => {
            snapshot
                .voters
                .validate()
                .expect("a decoded voter set is valid");
            let again = encode(path(), &snapshot).expect("a decoded snapshot encodes");
            assert_eq!(again, data, "a snapshot re-encodes to its own bytes");
            let bytes = aligned(&snapshot.data);
            if let Ok(batch) = decode_batch(&bytes) {
                if let Ok(image) = MetadataImage::from_snapshot(snapshot.id.end_offset, batch) {
                    image.check_invariants_structural();
                }
            }
        }
        Err(e) => assert!(e.to_string().contains("snapshot")),
    }
}

/// Seeds: a controller snapshot of a small cluster (kraft.version 0 and 1), an empty one, and
/// damaged ones.
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let snapshot = |kraft_version: u16, data: &[u8]| Snapshot {
        id: SnapshotId {
            end_offset: LogOffset(100),
            epoch: Epoch(2),
        },
        voters: common::voter_set(),
        kraft_version,
        data: Payload::from(data),
    };
    let cluster = encode_batch(&common::metadata_records()).to_vec();
    let file = |s: &Snapshot| encode(path(), s).expect("a valid snapshot");
    let whole = file(&snapshot(1, &cluster));
    let mut flipped = whole.clone();
    flipped[40] ^= 2;
    vec![
        ("cluster".to_owned(), whole.clone()),
        ("cluster-static".to_owned(), file(&snapshot(0, &cluster))),
        ("empty-data".to_owned(), file(&snapshot(1, &[]))),
        ("bit-flip".to_owned(), flipped),
        ("truncated".to_owned(), whole[..whole.len() - 5].to_vec()),
    ]
}
