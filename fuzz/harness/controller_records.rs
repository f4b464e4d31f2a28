//! The controller's metadata records (`corum_controller::records::decode_batch`): the rkyv
//! payload of every metadata batch in the log, in Raft messages and in snapshots.
//!
//! The input is one batch payload (copied into an aligned buffer, as the node does with
//! `records::aligned`). It either fails validation with an error or is a batch whose records
//! deserialize into owned values (what the controller and the Kafka renderer do with each),
//! re-encode to bytes that decode to the same records, and replay into an empty image as a
//! snapshot does (`MetadataImage::from_snapshot`) with an error or an image whose structural
//! invariants hold (`check_invariants_structural`: what replay guarantees for any log).

use corum_controller::records::{aligned, decode_batch, encode_batch};
use corum_controller::{MetadataImage, MetadataRecord};
use corum_types::LogOffset;

#[path = "common.rs"]
mod common;

pub fn run(data: &[u8]) {
    let bytes = aligned(data);
    let batch = match decode_batch(&bytes) {
        Ok(batch) => batch,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let records: Vec<MetadataRecord> = batch
        .iter()
        .map(|r| {
            rkyv::deserialize::<MetadataRecord, rkyv::rancor::Error>(r)
                .expect("a validated record deserializes")
        })
        .collect();
    let again = encode_batch(&records);
    let decoded = decode_batch(&again).expect("re-encoded records decode");
    let back: Vec<MetadataRecord> = decoded
        .iter()
        .map(|r| rkyv::deserialize::<MetadataRecord, rkyv::rancor::Error>(r).expect("again"))
        .collect();
    assert_eq!(back, records, "records survive a round trip");
    if let Ok(image) = MetadataImage::from_snapshot(LogOffset(records.len() as u64), batch) {
        image.check_invariants_structural();
    }
}

/// Seeds: a small cluster's records as one batch, each record alone, an empty batch, and a
/// truncated one.
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let records = common::metadata_records();
    let mut seeds = vec![
        ("cluster".to_owned(), encode_batch(&records).to_vec()),
        ("empty".to_owned(), encode_batch(&[]).to_vec()),
    ];
    for (i, r) in records.iter().enumerate() {
        seeds.push((
            format!("record-{i:02}-{}", r.kind()),
            encode_batch(std::slice::from_ref(r)).to_vec(),
        ));
    }
    let whole = encode_batch(&records).to_vec();
    seeds.push(("truncated".to_owned(), whole[..whole.len() / 2].to_vec()));
    seeds
}
