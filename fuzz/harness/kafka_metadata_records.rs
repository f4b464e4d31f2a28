//! Kafka's metadata records (`corum_kafka::metadata::AnyMetadataRecord::decode_framed`): the
//! framed record values of `__cluster_metadata` that brokers fetch from a controller and that
//! `corum kafka-import` reads from a Kafka log.
//!
//! The input is one framed record value. It either fails with an error or decodes to a record
//! and version at which the record encodes (`encode_framed`, exactly `framed_len` bytes) to
//! bytes that decode to the same version and encode to the same bytes again.

use bytes::{Bytes, BytesMut};
use corum_kafka::log::records::kafka_record;
use corum_kafka::log::MetadataVersion;
use corum_kafka::metadata::AnyMetadataRecord;

#[path = "common.rs"]
mod common;

pub fn run(data: &[u8]) {
    match AnyMetadataRecord::decode_framed(Bytes::copy_from_slice(data)) {
        Ok((record, version)) => {
            let mut buf = BytesMut::new();
            record
                .encode_framed(version, &mut buf)
                .expect("a decoded record encodes at its version");
            assert_eq!(buf.len(), record.framed_len(version), "framed_len is exact");
            let bytes = buf.freeze();
            let (again, again_version) = AnyMetadataRecord::decode_framed(bytes.clone())
                .expect("a re-encoded record decodes");
            assert_eq!(again_version, version);
            // Compared as bytes, not values: a float64 field may decode to a NaN, which equals
            // nothing, itself included.
            let mut twice = BytesMut::new();
            again
                .encode_framed(version, &mut twice)
                .expect("a decoded record encodes at its version");
            assert_eq!(twice.freeze(), bytes, "a record survives a round trip");
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// Seeds: every record type at every version with its fields at their defaults, and a small
/// cluster's records as corum renders them for brokers at the oldest and newest metadata
/// version it serves.
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for t in AnyMetadataRecord::TYPES {
        let record = AnyMetadataRecord::default_for(t.api_key).expect("a type's default");
        for version in t.lowest_version..=t.highest_version {
            let mut buf = BytesMut::new();
            if record.encode_framed(version, &mut buf).is_ok() {
                seeds.push((format!("default-{}-v{version}", t.name), buf.to_vec()));
            }
        }
    }
    for mv in [MetadataVersion::MINIMUM, MetadataVersion::LATEST] {
        for (i, r) in common::metadata_records().iter().enumerate() {
            let (record, version) = kafka_record(r.clone(), mv);
            let mut buf = BytesMut::new();
            // A record the metadata version cannot carry (a broker's log dirs before
            // 3.7-IV2) is skipped: a cluster at that version never writes one.
            if record.encode_framed(version, &mut buf).is_err() {
                continue;
            }
            seeds.push((
                format!("cluster-mv{}-{i:02}-{}-v{version}", mv.0, record.name()),
                buf.to_vec(),
            ));
        }
    }
    seeds
}
