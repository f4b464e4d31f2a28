//! A response's bytes: size prefix, response header (v0, or v1 with tagged fields for
//! flexible versions; ApiVersions always v0), body at the request's version.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

use crate::api::raft_fetch::{only_partition, FetchAnswer};
use crate::log::RecordParts;
use crate::service::Answer;

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

/// A response's bytes, size prefix first: one buffer, or (a broker's Fetch answer of at least
/// [`SPLICE_MIN_BYTES`] of records) the answer's head up to its records, the rendered batches
/// where they lie, and the answer's tail, to be sent with one vectored write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    head: Bytes,
    records: Vec<Bytes>,
    tail: Bytes,
}

impl Encoded {
    /// A response in one buffer.
    pub fn one(bytes: Bytes) -> Encoded {
        Encoded {
            head: bytes,
            records: Vec::new(),
            tail: Bytes::new(),
        }
    }

    /// The buffers, in order: head, records, tail.
    fn pieces(&self) -> impl Iterator<Item = &Bytes> + Clone {
        std::iter::once(&self.head)
            .chain(&self.records)
            .chain(std::iter::once(&self.tail))
    }

    /// Bytes in all, size prefix included.
    pub fn len(&self) -> usize {
        self.pieces().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffers to send, in order (none empty).
    pub fn into_parts(self) -> impl Iterator<Item = Bytes> {
        std::iter::once(self.head)
            .chain(self.records)
            .chain(std::iter::once(self.tail))
            .filter(|b| !b.is_empty())
    }

    /// The response as one buffer: itself when it is one, else copied together.
    pub fn to_bytes(&self) -> Bytes {
        crate::log::together(self.pieces())
    }
}

/// Records from which a Fetch answer's rendered batches are sent where they lie rather than
/// copied into the answer: below it, the copy costs less than encoding the answer's head twice
/// to find where they go.
pub const SPLICE_MIN_BYTES: usize = 4096;

/// Encodes `answer`: [`encode`], with a Fetch answer's records ([`Answer::records`]) in its one
/// partition — copied into it below [`SPLICE_MIN_BYTES`], else spliced in where they lie.
pub fn encode_answer(answer: Answer) -> Result<Encoded, EncodeError> {
    let Answer {
        api,
        version,
        correlation_id,
        mut body,
        records,
    } = answer;
    if let (ResponseKind::Fetch(response), Some(_)) = (&mut body, &records) {
        if only_partition(response).is_none() {
            return Err(EncodeError {
                api,
                version,
                reason: "records for a Fetch answer without exactly one partition".into(),
            });
        }
    }
    let body = match (body, records) {
        (ResponseKind::Fetch(response), Some(records)) if records.len() >= SPLICE_MIN_BYTES => {
            return splice(api, version, correlation_id, response, records);
        }
        (ResponseKind::Fetch(response), records) => {
            ResponseKind::Fetch(FetchAnswer { response, records }.into_response())
        }
        (body, _) => body,
    };
    encode(api, version, correlation_id, &body).map(Encoded::one)
}

/// The Fetch answer `fetch` with `records` in its one partition, sent where they lie: the
/// answer is encoded with that partition's records null and empty, which differ only in the
/// records' length field (non-flexible versions: an INT32, -1 against 0; flexible: an unsigned
/// varint of the length plus one, 0 against 1); the head is the bytes before that field, the
/// frame's size and the records' true length written in, the tail the bytes after it.
fn splice(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    mut fetch: FetchResponse,
    records: RecordParts,
) -> Result<Encoded, EncodeError> {
    let err = |reason: &str| EncodeError {
        api,
        version,
        reason: reason.to_string(),
    };
    let mut with_records = |value: Option<Bytes>| {
        only_partition(&mut fetch)
            .expect("one partition, checked by encode_answer")
            .records = value;
        let body = ResponseKind::Fetch(std::mem::take(&mut fetch));
        let encoded = encode(api, version, correlation_id, &body);
        let ResponseKind::Fetch(back) = body else {
            unreachable!("built as a Fetch answer")
        };
        fetch = back;
        encoded
    };
    let null = with_records(None)?;
    let empty = with_records(Some(Bytes::new()))?;
    let at = null
        .iter()
        .zip(empty.iter())
        .position(|(n, e)| n != e)
        .ok_or_else(|| err("null and empty records encode the same"))?;
    let compact = match (null.get(at..at + 4), empty.get(at..at + 4)) {
        _ if null[at] == 0 && empty[at] == 1 => true,
        (Some([0xff, 0xff, 0xff, 0xff]), Some([0, 0, 0, 0])) => false,
        _ => return Err(err("cannot find the records' length field")),
    };
    let len = records.len();
    let too_long = || err("records longer than their length field can say");
    let mut head = BytesMut::with_capacity(at + 5);
    head.extend_from_slice(&empty[..at]);
    if compact {
        let len = u32::try_from(len + 1).map_err(|_| too_long())?;
        crate::metadata::wire::put_uvarint(&mut head, len);
    } else {
        head.put_i32(i32::try_from(len).map_err(|_| too_long())?);
    }
    // The field's width in the encodings without records: a one-byte varint, or an INT32.
    let tail = empty.slice(at + if compact { 1 } else { 4 }..);
    let frame = head.len() - crate::frame::SIZE_PREFIX_BYTES + len + tail.len();
    let frame = i32::try_from(frame).map_err(|_| err("an answer longer than a frame can say"))?;
    head[..crate::frame::SIZE_PREFIX_BYTES].copy_from_slice(&frame.to_be_bytes());
    Ok(Encoded {
        head: head.freeze(),
        records: records.into_parts(),
        tail,
    })
}

/// A response's bytes after the size prefix, as a client reads them: the header's correlation
/// id and the body, with nothing after it.
#[cfg(test)]
pub(crate) fn decode(mut bytes: Bytes, api: ApiKey, version: i16) -> (i32, ResponseKind) {
    use kafka_protocol::protocol::Decodable;
    let header =
        ResponseHeader::decode(&mut bytes, api.response_header_version(version)).expect("a header");
    let body = ResponseKind::decode(api, &mut bytes, version).expect("a body");
    assert!(bytes.is_empty(), "bytes after the body");
    (header.correlation_id, body)
}

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

    /// A Fetch answer as a broker may get it: any of the fields around the records set or
    /// not (tagged fields included), with `records` in its one partition.
    fn broker_answer(
        records: Option<Bytes>,
        error: i16,
        hwm: i64,
        tagged: bool,
        endpoints: usize,
    ) -> FetchResponse {
        let mut partition = fetch_response::PartitionData::default()
            .with_error_code(error)
            .with_high_watermark(hwm)
            .with_records(records);
        if tagged {
            partition.current_leader = fetch_response::LeaderIdAndEpoch::default()
                .with_leader_id(2.into())
                .with_leader_epoch(9);
            partition.diverging_epoch = fetch_response::EpochEndOffset::default()
                .with_epoch(3)
                .with_end_offset(hwm / 2);
        }
        let mut topic =
            fetch_response::FetchableTopicResponse::default().with_partitions(vec![partition]);
        topic.topic = TopicName(StrBytes::from_static_str("__cluster_metadata"));
        topic.topic_id = uuid::Uuid::from_u64_pair(0, 1);
        let endpoints = (0..endpoints)
            .map(|i| {
                fetch_response::NodeEndpoint::default()
                    .with_node_id((i as i32).into())
                    .with_host(StrBytes::from_string(format!("controller-{i}.example")))
                    .with_port(9093)
            })
            .collect();
        FetchResponse::default()
            .with_responses(vec![topic])
            .with_node_endpoints(endpoints)
    }

    /// The answer with `parts` as its records, sent as parts, and the same answer encoded
    /// with the parts copied into it.
    fn spliced_and_copied(version: i16, body: FetchResponse, parts: &[Bytes]) -> (Encoded, Bytes) {
        let records: RecordParts = parts.iter().cloned().collect();
        let copied = FetchAnswer {
            response: body.clone(),
            records: Some(records.clone()),
        }
        .into_response();
        let copied =
            encode(ApiKey::Fetch, version, 5, &ResponseKind::Fetch(copied)).expect("encodes");
        let answer = Answer {
            api: ApiKey::Fetch,
            version,
            correlation_id: 5,
            body: ResponseKind::Fetch(body),
            records: Some(records),
        };
        (encode_answer(answer).expect("encodes"), copied)
    }

    /// An answer's rendered batches spliced in where they lie send the bytes the answer with
    /// them copied into it encodes to, at every Fetch version (non-flexible: an INT32 length;
    /// flexible: a varint of one to three bytes here), and the batches are sent as they are
    /// (the same memory), not copied; below `SPLICE_MIN_BYTES` the answer is one buffer.
    #[test]
    fn spliced_answers_send_the_bytes_of_the_answer_with_its_records() {
        let part = |n: usize, fill: u8| Bytes::from(vec![fill; n]);
        for version in 4..=17 {
            for parts in [
                vec![part(100, 1)],
                vec![part(SPLICE_MIN_BYTES - 1, 2)],
                vec![part(SPLICE_MIN_BYTES, 3)],
                vec![part(40, 4), part(5_000, 5), part(60, 6)],
                vec![part(8_397, 7); 8],
                vec![part(70_000, 8), part(1 << 21, 9)],
            ] {
                let body = broker_answer(None, 0, 1_234, version >= 12, 2);
                let (spliced, copied) = spliced_and_copied(version, body, &parts);
                let total: usize = parts.iter().map(Bytes::len).sum();
                assert_eq!(spliced.to_bytes(), copied, "v{version}, {total} bytes");
                assert_eq!(spliced.len(), copied.len());
                let sent: Vec<Bytes> = spliced.into_parts().collect();
                if total < SPLICE_MIN_BYTES {
                    assert_eq!(sent.len(), 1, "v{version}: one buffer");
                } else {
                    // Before v12 the records end the answer: no tail.
                    let tail = usize::from(version >= 12);
                    assert_eq!(
                        sent.len(),
                        1 + parts.len() + tail,
                        "v{version}: head, parts, tail"
                    );
                    for (s, p) in sent[1..].iter().zip(&parts) {
                        assert_eq!(s.as_ptr(), p.as_ptr(), "v{version}: sent where it lies");
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Whatever the answer around them, spliced records send the bytes of the answer with
        /// them in it.
        #[test]
        fn spliced_answers_match_the_copied_encoding(
            version in 4i16..=17,
            sizes in proptest::collection::vec(0usize..20_000, 1..6),
            error in 0i16..120,
            hwm in -1i64..i64::MAX,
            tagged in proptest::bool::ANY,
            endpoints in 0usize..4,
        ) {
            let parts: Vec<Bytes> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| Bytes::from(vec![i as u8; n]))
                .collect();
            let body = broker_answer(None, error, hwm, tagged, endpoints);
            let (spliced, copied) = spliced_and_copied(version, body, &parts);
            proptest::prop_assert_eq!(spliced.to_bytes(), copied);
        }
    }

    /// An answer that is not a Fetch, or a Fetch without records apart, is encoded as
    /// `encode` encodes it.
    #[test]
    fn other_answers_are_encoded_whole() {
        let body = broker_answer(Some(Bytes::from(vec![3u8; 9_000])), 0, 7, true, 1);
        let whole =
            encode(ApiKey::Fetch, 17, 5, &ResponseKind::Fetch(body.clone())).expect("encodes");
        let answer = Answer {
            api: ApiKey::Fetch,
            version: 17,
            correlation_id: 5,
            body: ResponseKind::Fetch(body),
            records: None,
        };
        let encoded = encode_answer(answer).expect("encodes");
        assert_eq!(encoded, Encoded::one(whole));
    }
}
