//! Kafka's KRaft metadata records, generated from Kafka's own message specs.
//!
//! A Kafka controller writes its state as metadata records (RegisterBrokerRecord,
//! TopicRecord, PartitionRecord, ...) into the `__cluster_metadata` log, each one the value of
//! a Kafka record inside a record batch, framed by [`frame`]. This module reads and writes
//! those records byte for byte as Kafka does, so corum can exchange metadata log data and
//! snapshots with Kafka's tools and brokers.
//!
//! | module | what |
//! |---|---|
//! | [`generated`] | one struct per record (and per struct-typed array) with Kafka's defaults, `encode`/`encoded_len`/`decode` per version, [`AnyMetadataRecord`] over all of them; written by `kafka/metadata/generate.py` from the specs in Kafka's jars, never by hand |
//! | [`frame`] | the metadata record frame (frame version, api key, version) around a record |
//! | [`wire`] | the serialization primitives the generated code calls (hand-written) |
//! | [`error`] | encode and decode errors, naming the record and field |
//!
//! Kafka's rules, as the generated code applies them: each field exists in its `versions`;
//! writing a version that lacks a field whose value is not its default is an error unless
//! the field is `ignorable`. Flexible versions write lengths as unsigned varints (length + 1,
//! 0 for null) and end every struct with tagged fields: those whose value differs from the
//! default, in tag order, each as tag, size, value; tags a version does not define are kept
//! ([`RawTaggedField`]) and written back in order. Decoders take untrusted bytes: they never
//! panic, never allocate beyond the bytes left, and refuse a version out of range, a null
//! where the version allows none, a string that is not UTF-8 or longer than 32,767 bytes, a
//! tagged field whose value is shorter than its declared size, tags out of order, and tags
//! the record defines only for other versions.
//!
//! KRaftVersionRecord, a Raft control record rather than a metadata record, is generated here
//! too (the `kafka-protocol` crate has the other control records); it has no api key and is
//! not part of [`AnyMetadataRecord`].

pub mod error;
pub mod frame;
pub mod generated;
pub mod wire;

pub use error::{DecodeError, EncodeError, Malformed};
pub use generated::*;
pub use wire::RawTaggedField;
