//! From a request's bytes (after the size prefix) to its header and decoded body.
//!
//! | bytes                                                   | result                                    | connection |
//! |---------------------------------------------------------|-------------------------------------------|------------|
//! | a served API at a served version                        | [`Parsed::Request`]                       | kept       |
//! | ApiVersions above the served versions (KIP-511)         | [`Parsed::ApiVersionsTooNew`]: a v0 answer with UNSUPPORTED_VERSION listing ApiVersions' range | kept |
//! | an API key Kafka does not define                        | [`RequestError::UnknownApiKey`]           | closed     |
//! | a Kafka API this listener does not serve, or a version outside the served range | [`RequestError::NotServed`] | closed |
//! | a header or body that does not decode                   | [`RequestError::Malformed`]               | closed     |
//!
//! Bytes left after a decoded body are ignored, as Kafka's brokers ignore them (librdkafka 2.16
//! sends three extra bytes after an all-topics Metadata v13).
//!
//! Decoding uses the `kafka-protocol` crate's generated decoders. They read untrusted lengths;
//! a panic inside them is caught and reported as [`RequestError::Malformed`], and the process's
//! allocator ([`crate::alloc`]) keeps a lying array length from aborting the process.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;

use crate::apis::ServedApis;

/// The parts of a request header every answer needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHead {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

/// A request ready to serve.
#[derive(Debug)]
pub enum Parsed {
    /// The body is boxed: the largest request type is hundreds of bytes.
    Request {
        head: RequestHead,
        body: Box<RequestKind>,
    },
    /// ApiVersions at a version above the served ones: answered at v0 with
    /// UNSUPPORTED_VERSION and ApiVersions' own range, so the client retries lower (KIP-511).
    ApiVersionsTooNew { head: RequestHead },
}

/// Why a request cannot be served; the listener closes the connection and logs this.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("unknown API key {api_key} (correlation id {correlation_id})")]
    UnknownApiKey { api_key: i16, correlation_id: i32 },
    #[error("{api:?} v{version} is not served by this listener{}", served_text(.served))]
    NotServed {
        api: ApiKey,
        version: i16,
        served: Option<(i16, i16)>,
    },
    #[error("malformed {api:?} v{version} request: {reason}")]
    Malformed {
        api: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("request of {len_bytes} bytes is shorter than a request header")]
    Truncated { len_bytes: usize },
}

fn served_text(served: &Option<(i16, i16)>) -> String {
    match served {
        Some((min, max)) => format!(" (served versions {min}-{max})"),
        None => " (not served at any version)".into(),
    }
}

/// Decodes one request. See the module doc for what each outcome means.
pub fn parse(mut bytes: Bytes, served: &ServedApis) -> Result<Parsed, RequestError> {
    if bytes.len() < crate::frame::REQUEST_HEAD_BYTES_MIN {
        return Err(RequestError::Truncated {
            len_bytes: bytes.len(),
        });
    }
    let raw_key = i16::from_be_bytes([bytes[0], bytes[1]]);
    let version = i16::from_be_bytes([bytes[2], bytes[3]]);
    let correlation_id = i32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    let api = ApiKey::try_from(raw_key).map_err(|()| RequestError::UnknownApiKey {
        api_key: raw_key,
        correlation_id,
    })?;
    let malformed = |reason: String| RequestError::Malformed {
        api,
        version,
        reason,
    };
    let header_version = api.request_header_version(version);
    let header = guarded(|| RequestHeader::decode(&mut bytes, header_version))
        .map_err(|e| malformed(format!("request header v{header_version}: {e}")))?;
    let head = RequestHead {
        api_key: api,
        api_version: version,
        correlation_id: header.correlation_id,
        client_id: header.client_id.map(|s| s.as_str().to_owned()),
    };
    let range = served.range(api);
    match range {
        Some((min, max)) if (min..=max).contains(&version) => {}
        Some((_, max)) if api == ApiKey::ApiVersions && version > max => {
            return Ok(Parsed::ApiVersionsTooNew { head });
        }
        _ => {
            return Err(RequestError::NotServed {
                api,
                version,
                served: range,
            })
        }
    }
    let body = guarded(|| RequestKind::decode(api, &mut bytes, version))
        .map_err(|e| malformed(e.to_string()))?;
    // Whatever is left after the body is ignored (see the module doc).
    bytes.advance(bytes.remaining());
    Ok(Parsed::Request {
        head,
        body: Box::new(body),
    })
}

/// Runs a decoder of the codec crate over untrusted bytes, turning a panic into an error.
fn guarded<T>(decode: impl FnOnce() -> anyhow::Result<T>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(decode)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(panic) => Err(format!(
            "the decoder panicked: {}",
            panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into())
        )),
    }
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use proptest::prelude::*;

    use super::*;

    fn request<T: Encodable>(api: ApiKey, version: i16, body: &T) -> BytesMut {
        let mut buf = BytesMut::new();
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(42)
            .with_client_id(Some(StrBytes::from_static_str("test")));
        header
            .encode(&mut buf, api.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).unwrap();
        buf
    }

    fn served() -> ServedApis {
        ServedApis::controller()
    }

    #[test]
    fn a_served_request_decodes_with_its_header() {
        let bytes = request(ApiKey::Metadata, 12, &MetadataRequest::default());
        let Parsed::Request { head, body } = parse(bytes.freeze(), &served()).unwrap() else {
            panic!("expected a request");
        };
        assert_eq!(head.api_key, ApiKey::Metadata);
        assert_eq!(head.api_version, 12);
        assert_eq!(head.correlation_id, 42);
        assert_eq!(head.client_id.as_deref(), Some("test"));
        assert!(matches!(*body, RequestKind::Metadata(_)));
    }

    #[test]
    fn bytes_after_the_body_are_ignored() {
        // librdkafka 2.16 sends three extra bytes after an all-topics Metadata v13.
        let mut bytes = request(ApiKey::Metadata, 13, &MetadataRequest::default());
        bytes.put_slice(&[0, 0, 0]);
        assert!(matches!(
            parse(bytes.freeze(), &served()),
            Ok(Parsed::Request { .. })
        ));
    }

    #[test]
    fn a_too_new_api_versions_gets_the_kip_511_answer() {
        // v9 does not exist: its header is v2 like v3 and later.
        let mut bytes = request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        bytes[2..4].copy_from_slice(&9i16.to_be_bytes());
        let Parsed::ApiVersionsTooNew { head } = parse(bytes.freeze(), &served()).unwrap() else {
            panic!("expected the KIP-511 fallback");
        };
        assert_eq!(head.correlation_id, 42);
    }

    #[test]
    fn what_cannot_be_served_closes_the_connection() {
        let mut unknown = request(ApiKey::Metadata, 1, &MetadataRequest::default());
        unknown[0..2].copy_from_slice(&999i16.to_be_bytes());
        assert_eq!(
            parse(unknown.freeze(), &served()).unwrap_err(),
            RequestError::UnknownApiKey {
                api_key: 999,
                correlation_id: 42
            }
        );
        let produce = request(ApiKey::Metadata, 1, &MetadataRequest::default());
        let mut produce = produce.to_vec();
        produce[0..2].copy_from_slice(&(ApiKey::Produce as i16).to_be_bytes());
        assert!(matches!(
            parse(Bytes::from(produce), &served()),
            Err(RequestError::NotServed {
                api: ApiKey::Produce,
                served: None,
                ..
            })
        ));
        let mut too_new = request(ApiKey::Metadata, 1, &MetadataRequest::default());
        too_new[2..4].copy_from_slice(&99i16.to_be_bytes());
        assert!(matches!(
            parse(too_new.freeze(), &served()),
            Err(RequestError::NotServed {
                api: ApiKey::Metadata,
                version: 99,
                served: Some((0, 13)),
            })
        ));
        let truncated = request(ApiKey::Metadata, 12, &MetadataRequest::default());
        let cut = truncated.freeze().slice(..10);
        assert!(matches!(
            parse(cut, &served()),
            Err(RequestError::Malformed { .. })
        ));
    }

    #[test]
    fn a_lying_array_length_is_an_error_not_an_abort() {
        // Metadata v4: header v1, then the topics array's i32 length.
        let mut bytes = request(ApiKey::Metadata, 4, &MetadataRequest::default());
        let at = bytes.len() - 5; // the array length (-1) and allow_auto_topic_creation
        bytes[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            parse(bytes.freeze(), &served()),
            Err(RequestError::Malformed { .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any bytes: a parsed request or an error, never a panic or an abort.
        #[test]
        fn any_bytes_parse_or_fail_cleanly(
            key in prop_oneof![Just(3i16), Just(18), Just(19), Just(32), Just(44), Just(60), 0i16..80],
            version in -1i16..16,
            tail in proptest::collection::vec(any::<u8>(), 0..96),
        ) {
            let mut bytes = BytesMut::new();
            bytes.put_i16(key);
            bytes.put_i16(version);
            bytes.put_i32(7);
            bytes.put_slice(&tail);
            let _ = parse(bytes.freeze(), &served());
        }

        /// Every served request at every served version survives a round trip through the
        /// encoder of its default value.
        #[test]
        fn served_defaults_round_trip(index in 0usize..crate::apis::SERVED.len(), pick in 0i16..20) {
            let api = crate::apis::SERVED[index];
            let (min, max) = served().range(api).expect("served");
            let version = min + pick % (max - min + 1);
            let body = crate::apis::default_request(api).expect("served");
            let mut buf = BytesMut::new();
            let header = RequestHeader::default()
                .with_request_api_key(api as i16)
                .with_request_api_version(version)
                .with_correlation_id(1);
            header.encode(&mut buf, api.request_header_version(version)).unwrap();
            body.encode(&mut buf, version).unwrap();
            let parsed = parse(buf.freeze(), &served());
            prop_assert!(matches!(parsed, Ok(Parsed::Request { .. })), "{:?} v{}: {:?}", api, version, parsed.err());
        }
    }
}
