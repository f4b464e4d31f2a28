//! Shared by the metadata record tests: proptest strategies for every record at every version
//! ([`arbitrary`]) and records as Kafka's JSON converters write them ([`json`]), both generated
//! by `kafka/metadata/generate.py` next to the codecs, and the hand-written pieces they are
//! built from.

// Each test uses its own part.
#![allow(dead_code)]

pub mod arbitrary;
pub mod json;

use bytes::Bytes;
use corum_kafka::metadata::{AnyMetadataRecord, RawTaggedField};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::Value;
use uuid::Uuid;

pub fn any_uuid() -> impl Strategy<Value = Uuid> {
    any::<u128>().prop_map(Uuid::from_u128)
}

/// Any Unicode text (control characters and non-BMP characters included), short.
pub fn any_string() -> impl Strategy<Value = String> {
    proptest::string::string_regex("(?s).{0,12}").expect("a valid regex")
}

pub fn any_bytes() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..12).prop_map(Bytes::from)
}

/// Any float but NaN (NaN is not equal to itself, so a round trip could not compare it).
pub fn any_f64() -> impl Strategy<Value = f64> {
    use proptest::num::f64::{INFINITE, NEGATIVE, NORMAL, POSITIVE, SUBNORMAL, ZERO};
    POSITIVE | NEGATIVE | NORMAL | SUBNORMAL | ZERO | INFINITE
}

/// Unknown tagged fields: increasing tags none of which the struct defines (in any version),
/// small ones mostly, up to Kafka's largest (`i32::MAX`: Java reads tags into an int).
pub fn unknown_tags(defined: &'static [u32]) -> impl Strategy<Value = Vec<RawTaggedField>> {
    let tag = prop_oneof![4 => 0u32..24, 1 => 0u32..=i32::MAX as u32];
    btree_map(tag, vec(any::<u8>(), 0..6), 0..3).prop_map(move |fields| {
        fields
            .into_iter()
            .filter(|(tag, _)| !defined.contains(tag))
            .map(|(tag, data)| RawTaggedField {
                tag,
                data: Bytes::from(data),
            })
            .collect()
    })
}

/// Every (api key, version) of every metadata record.
pub fn record_versions() -> Vec<(i16, i16)> {
    AnyMetadataRecord::TYPES
        .iter()
        .flat_map(|t| (t.lowest_version..=t.highest_version).map(move |v| (t.api_key, v)))
        .collect()
}

/// Any metadata record at any of its versions (each record version equally likely), with
/// that version.
pub fn any_framed() -> impl Strategy<Value = (AnyMetadataRecord, i16)> {
    Union::new(record_versions().into_iter().map(|(api_key, version)| {
        arbitrary::metadata_record(api_key, version)
            .prop_map(move |record| (record, version))
            .boxed()
    }))
}

/// Base64 of `bytes` with the alphabet Kafka uses there, padded or not.
fn base64(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(alphabet[(n >> (18 - 6 * i) & 0x3f) as usize]));
        }
        if pad {
            out.push_str(&"=="[..3 - chunk.len()]);
        }
    }
    out
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A uuid as Kafka's `Uuid.toString()` writes it: URL-safe base64, unpadded.
pub fn uuid_json(uuid: &Uuid) -> Value {
    Value::from(base64(uuid.as_bytes(), URL_SAFE, false))
}

/// Bytes as Jackson writes a binary node: standard base64, padded.
pub fn bytes_json(bytes: &Bytes) -> Value {
    Value::from(base64(bytes, STANDARD, true))
}

/// A float as Jackson writes a double node: a number, or a string for the infinities.
pub fn f64_json(value: f64) -> Value {
    if value.is_finite() {
        Value::from(value)
    } else if value > 0.0 {
        Value::from("Infinity")
    } else {
        Value::from("-Infinity")
    }
}
