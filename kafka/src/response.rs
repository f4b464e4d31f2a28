//! A response's bytes: size prefix, response header (v0, or v1 with tagged fields for
//! flexible versions; ApiVersions always v0), body at the request's version.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

/// A response that cannot be encoded (a value the version cannot carry).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot encode the {api:?} v{version} response: {reason}")]
pub struct EncodeError {
    pub api: ApiKey,
    pub version: i16,
    pub reason: String,
}

/// Bytes a response buffer starts with when its size is not worked out first: enough for
/// every small answer.
const SMALL_RESPONSE_BYTES: usize = 256;

/// Encodes `body` as the answer to request `correlation_id` of `api` at `version`.
pub fn encode(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, EncodeError> {
    let err = |e: anyhow::Error| EncodeError {
        api,
        version,
        reason: e.to_string(),
    };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = api.response_header_version(version);
    let capacity = match exact_body_bytes(body, version).map_err(err)? {
        Some(body_bytes) => {
            crate::frame::SIZE_PREFIX_BYTES
                + header.compute_size(header_version).map_err(err)?
                + body_bytes
        }
        None => SMALL_RESPONSE_BYTES,
    };
    let mut buf = BytesMut::with_capacity(capacity);
    buf.put_i32(0);
    header.encode(&mut buf, header_version).map_err(err)?;
    body.encode(&mut buf, version).map_err(err)?;
    let size = (buf.len() - crate::frame::SIZE_PREFIX_BYTES) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// The encoded size of the answers that carry a log's bytes (a broker's Fetch of the metadata
/// log, a FetchSnapshot chunk: up to megabytes), worked out before encoding them so that their
/// buffer is allocated once at its size and they are copied once; none for the others.
fn exact_body_bytes(body: &ResponseKind, version: i16) -> anyhow::Result<Option<usize>> {
    Ok(match body {
        ResponseKind::Fetch(b) => Some(b.compute_size(version)?),
        ResponseKind::FetchSnapshot(b) => Some(b.compute_size(version)?),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{fetch_response, fetch_snapshot_response, TopicName};
    use kafka_protocol::messages::{FetchResponse, FetchSnapshotResponse};
    use kafka_protocol::protocol::StrBytes;

    fn fetch_answer(records: usize) -> FetchResponse {
        let partition = fetch_response::PartitionData::default()
            .with_high_watermark(records as i64)
            .with_records(Some(Bytes::from(vec![7u8; records])));
        let mut topic =
            fetch_response::FetchableTopicResponse::default().with_partitions(vec![partition]);
        topic.topic = TopicName(StrBytes::from_static_str("__cluster_metadata"));
        topic.topic_id = uuid::Uuid::from_u64_pair(0, 1);
        FetchResponse::default().with_responses(vec![topic])
    }

    /// The size worked out before encoding `body` (frame prefix, header, body), and the
    /// length encoded.
    fn predicted_and_encoded(
        api: ApiKey,
        version: i16,
        body: &ResponseKind,
    ) -> (Option<usize>, usize) {
        let bytes = encode(api, version, 9, body).expect("encodes");
        assert_eq!(
            i32::from_be_bytes(bytes[..4].try_into().expect("4 bytes")) as usize,
            bytes.len() - 4,
            "the size prefix"
        );
        let header = ResponseHeader::default()
            .with_correlation_id(9)
            .compute_size(api.response_header_version(version))
            .expect("sized");
        let body_bytes = exact_body_bytes(body, version).expect("sized");
        (body_bytes.map(|b| 4 + header + b), bytes.len())
    }

    /// The size worked out before encoding is the size encoded, at every Fetch and
    /// FetchSnapshot version a broker may use (flexible and not), so the answer's buffer is
    /// never grown (a wrong figure would still encode, only with a copy more).
    #[test]
    fn large_answers_are_sized_before_they_are_encoded() {
        for version in 4..=17 {
            for records in [0, 1, 200, 70_000] {
                let body = ResponseKind::Fetch(fetch_answer(records));
                let (predicted, encoded) = predicted_and_encoded(ApiKey::Fetch, version, &body);
                assert_eq!(
                    predicted,
                    Some(encoded),
                    "Fetch v{version}, {records} bytes of records"
                );
            }
        }
        for version in 0..=1 {
            let partition = fetch_snapshot_response::PartitionSnapshot::default()
                .with_size(50_000)
                .with_unaligned_records(Bytes::from(vec![1u8; 50_000]));
            let topic = fetch_snapshot_response::TopicSnapshot::default()
                .with_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
                .with_partitions(vec![partition]);
            let body = ResponseKind::FetchSnapshot(
                FetchSnapshotResponse::default().with_topics(vec![topic]),
            );
            let (predicted, encoded) = predicted_and_encoded(ApiKey::FetchSnapshot, version, &body);
            assert_eq!(predicted, Some(encoded), "FetchSnapshot v{version}");
        }
    }
}
