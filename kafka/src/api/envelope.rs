//! Envelope (KIP-590): an admin request a broker forwards to its controller on behalf of one of
//! its clients, with that client's principal and address.
//!
//! The wrapped bytes are a whole request (header and body). It is parsed and served as if it had
//! come in on this listener, and its whole response (header and body, no size prefix) goes back
//! in the envelope. What is wrong with the envelope itself is its error code: a wrapped request
//! that does not parse, that is itself an Envelope, or a principal that does not decode, is
//! INVALID_REQUEST; one this listener does not serve is UNSUPPORTED_VERSION. The principal and
//! client address travel with the request: it is authorized as that principal from that
//! address ([`forwarded_session`]), once the broker itself passed CLUSTER_ACTION.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use kafka_protocol::error::ResponseError as K;
use kafka_protocol::messages::{ApiKey, DefaultPrincipalData, EnvelopeRequest, EnvelopeResponse};
use kafka_protocol::protocol::Decodable;

use crate::auth::Session;
use crate::backend::{Backend, ListenerContext};
use crate::request::{self, Parsed, RequestError};
use crate::{response, service};

/// Who the broker says sent the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub principal_type: String,
    pub name: String,
}

/// Decodes a forwarded principal (Kafka's `DefaultPrincipalData`: an int16 version, then the
/// message at that version).
pub fn principal(bytes: &Bytes) -> Option<Principal> {
    let mut b = bytes.clone();
    if b.len() < 2 {
        return None;
    }
    let version = i16::from_be_bytes([b[0], b[1]]);
    if version != 0 {
        return None;
    }
    let _ = bytes::Buf::get_i16(&mut b);
    let p = DefaultPrincipalData::decode(&mut b, version).ok()?;
    Some(Principal {
        principal_type: p._type.to_string(),
        name: p.name.to_string(),
    })
}

/// The session a forwarded request is served (and authorized) as: the principal and client
/// address the broker forwarded, each falling back to the broker's own.
pub fn forwarded_session(
    broker: &Session,
    who: Option<&Principal>,
    client_host_address: &Bytes,
) -> Session {
    let host = match client_host_address.len() {
        4 => Some(std::net::IpAddr::from(
            <[u8; 4]>::try_from(&client_host_address[..]).expect("4 bytes"),
        )),
        16 => Some(std::net::IpAddr::from(
            <[u8; 16]>::try_from(&client_host_address[..]).expect("16 bytes"),
        )),
        _ => None,
    };
    Session {
        principal: who.map_or_else(
            || broker.principal.clone(),
            |p| format!("{}:{}", p.principal_type, p.name),
        ),
        client_host: host.map_or_else(|| broker.client_host.clone(), |h| h.to_string()),
        // A forwarded principal is authorized by the ACLs alone; without one the request is
        // the broker's own.
        super_user: who.is_none() && broker.super_user,
    }
}

/// Serves an Envelope sent by the broker of `session`.
pub fn envelope<'a, B: Backend>(
    ctx: &'a ListenerContext,
    session: &'a Session,
    backend: &'a B,
    r: EnvelopeRequest,
) -> Pin<Box<dyn Future<Output = EnvelopeResponse> + 'a>> {
    // Boxed: serving the wrapped request may come back here (and is refused there).
    Box::pin(async move {
        let mut response = EnvelopeResponse::default();
        let who = match r.request_principal.as_ref().map(principal) {
            Some(Some(p)) => Some(p),
            Some(None) => {
                response.error_code = K::InvalidRequest.code();
                return response;
            }
            None => None,
        };
        let parsed = match request::parse(r.request_data, &ctx.served) {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(error = %e, "a forwarded request does not parse");
                response.error_code = match e {
                    RequestError::NotServed { .. } | RequestError::UnknownApiKey { .. } => {
                        K::UnsupportedVersion.code()
                    }
                    _ => K::InvalidRequest.code(),
                };
                return response;
            }
        };
        if let Parsed::Request { head, .. } = &parsed {
            if head.api_key == ApiKey::Envelope {
                response.error_code = K::InvalidRequest.code();
                return response;
            }
            tracing::debug!(
                api = ?head.api_key,
                version = head.api_version,
                principal = ?who,
                client = ?r.client_host_address,
                "serving a request a broker forwarded"
            );
        }
        let inner = forwarded_session(session, who.as_ref(), &r.client_host_address);
        let answer = service::serve_as(ctx, &inner, backend, parsed).await;
        match response::encode_answer(answer) {
            Ok(encoded) => {
                let bytes = encoded.to_bytes();
                response.response_data = Some(bytes.slice(crate::frame::SIZE_PREFIX_BYTES..));
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot encode the answer to a forwarded request");
                response.error_code = K::UnknownServerError.code();
            }
        }
        response
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use bytes::{BufMut, BytesMut};
    use corum_protocol::{RequestBody, ResponseBody, RpcError};
    use corum_types::{NodeId, Uuid};
    use kafka_protocol::messages::{
        create_topics_request, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
        ListPartitionReassignmentsRequest, ProduceRequest, RequestHeader, RequestKind,
        ResponseKind, TopicName,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;

    fn ctx() -> ListenerContext {
        ListenerContext::for_tests(Uuid([9; 16]))
    }

    fn broker() -> Session {
        Session::anonymous("10.0.0.9")
    }

    /// A node that is not the active controller, counting what it is asked.
    #[derive(Default)]
    struct Standby {
        calls: Cell<usize>,
    }

    impl Backend for Standby {
        async fn call(
            &self,
            _body: RequestBody,
            _timeout_ms: u32,
        ) -> Result<ResponseBody, RpcError> {
            self.calls.set(self.calls.get() + 1);
            Err(RpcError::NotController { leader: None })
        }

        fn leader(&self) -> Option<NodeId> {
            None
        }

        fn wall_clock_ms(&self) -> i64 {
            0
        }
    }

    fn run<F: Future>(f: F) -> F::Output {
        futures_lite::future::block_on(f)
    }

    /// A request as a broker wraps it: header and body, no size prefix.
    fn request(api: ApiKey, version: i16, correlation_id: i32, body: &RequestKind) -> Bytes {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("adminclient-1")))
            .encode(&mut buf, api.request_header_version(version))
            .expect("a header encodes");
        body.encode(&mut buf, version).expect("a body encodes");
        buf.freeze()
    }

    fn create_topics() -> Bytes {
        let topic = create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("orders")))
            .with_num_partitions(3)
            .with_replication_factor(2);
        request(
            ApiKey::CreateTopics,
            7,
            31,
            &RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(vec![topic])),
        )
    }

    /// Kafka's serialized principal: an int16 version, then DefaultPrincipalData.
    fn principal_bytes(version: i16, principal_type: &str, name: &str, token: bool) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i16(version);
        DefaultPrincipalData::default()
            .with_type(StrBytes::from_string(principal_type.into()))
            .with_name(StrBytes::from_string(name.into()))
            .with_token_authenticated(token)
            .encode(&mut buf, 0)
            .expect("a principal encodes");
        buf.freeze()
    }

    fn wrap(data: Bytes, principal: Option<Bytes>) -> EnvelopeRequest {
        EnvelopeRequest::default()
            .with_request_data(data)
            .with_request_principal(principal)
            .with_client_host_address(Bytes::from_static(&[10, 0, 0, 7]))
    }

    /// The wrapped request's response as the forwarding broker reads it: header, then body.
    fn unwrap(r: &EnvelopeResponse, api: ApiKey, version: i16) -> (i32, ResponseKind) {
        response::decode(r.response_data.clone().expect("a response"), api, version)
    }

    /// The wrapped request is served as if it had come in directly: the envelope carries the
    /// same bytes a direct answer has (without the size prefix), under the wrapped request's
    /// correlation id, and the backend is asked as for a direct request.
    #[test]
    fn a_wrapped_request_is_served_as_if_received_directly() {
        let ctx = ctx();
        let direct = {
            let backend = Standby::default();
            let parsed = request::parse(create_topics(), &ctx.served).expect("it parses");
            let a = run(service::serve(&ctx, &backend, parsed));
            response::encode(a.api, a.version, a.correlation_id, &a.body).expect("it encodes")
        };
        let backend = Standby::default();
        let alice = principal_bytes(0, "User", "alice", false);
        let r = run(envelope(
            &ctx,
            &broker(),
            &backend,
            wrap(create_topics(), Some(alice)),
        ));
        assert_eq!(r.error_code, 0);
        assert_eq!(backend.calls.get(), 1, "served through the backend");
        assert_eq!(
            r.response_data.as_deref(),
            Some(&direct[crate::frame::SIZE_PREFIX_BYTES..])
        );
        let (correlation_id, body) = unwrap(&r, ApiKey::CreateTopics, 7);
        assert_eq!(correlation_id, 31);
        let ResponseKind::CreateTopics(CreateTopicsResponse { topics, .. }) = body else {
            panic!("a CreateTopics response: {body:?}");
        };
        assert_eq!(topics.len(), 1);
        assert_eq!(topics[0].error_code, K::NotController.code());
    }

    /// Without a principal the wrapped request is served too; a KIP-511 ApiVersions above the
    /// served versions is answered inside the envelope at v0 with UNSUPPORTED_VERSION.
    #[test]
    fn no_principal_and_a_too_new_api_versions() {
        let backend = Standby::default();
        let wrapped = request(
            ApiKey::ListPartitionReassignments,
            0,
            5,
            &RequestKind::ListPartitionReassignments(ListPartitionReassignmentsRequest::default()),
        );
        let r = run(envelope(&ctx(), &broker(), &backend, wrap(wrapped, None)));
        assert_eq!(r.error_code, 0);
        let (correlation_id, body) = unwrap(&r, ApiKey::ListPartitionReassignments, 0);
        assert_eq!(correlation_id, 5);
        assert!(matches!(body, ResponseKind::ListPartitionReassignments(l) if l.topics.is_empty()));

        let mut too_new = request(
            ApiKey::ApiVersions,
            3,
            6,
            &RequestKind::ApiVersions(Default::default()),
        )
        .to_vec();
        too_new[2..4].copy_from_slice(&99i16.to_be_bytes());
        let r = run(envelope(
            &ctx(),
            &broker(),
            &backend,
            wrap(too_new.into(), None),
        ));
        assert_eq!(r.error_code, 0);
        let (correlation_id, body) = unwrap(&r, ApiKey::ApiVersions, 0);
        assert_eq!(correlation_id, 6);
        let ResponseKind::ApiVersions(ApiVersionsResponse { error_code, .. }) = body else {
            panic!("an ApiVersions response: {body:?}");
        };
        assert_eq!(error_code, K::UnsupportedVersion.code());
    }

    /// What is wrong with the envelope is its own error code, with no response and nothing
    /// asked of the backend: a nested Envelope, wrapped bytes that do not parse and a
    /// principal that does not decode are INVALID_REQUEST; a wrapped API this listener does
    /// not serve (or does not know) is UNSUPPORTED_VERSION.
    #[test]
    fn envelope_errors() {
        let alice = || Some(principal_bytes(0, "User", "alice", false));
        let nested = request(
            ApiKey::Envelope,
            0,
            7,
            &RequestKind::Envelope(wrap(create_topics(), alice())),
        );
        let mut truncated = create_topics().to_vec();
        truncated.truncate(truncated.len() - 5);
        let mut unknown_key = create_topics().to_vec();
        unknown_key[..2].copy_from_slice(&999i16.to_be_bytes());
        let produce = request(
            ApiKey::Produce,
            9,
            8,
            &RequestKind::Produce(ProduceRequest::default()),
        );
        let mut bad_version = principal_bytes(0, "User", "alice", false).to_vec();
        bad_version[..2].copy_from_slice(&1i16.to_be_bytes());
        let whole = principal_bytes(0, "User", "alice", false);
        let cases: Vec<(&str, EnvelopeRequest, K)> = vec![
            ("nested", wrap(nested, alice()), K::InvalidRequest),
            (
                "garbage",
                wrap(Bytes::from_static(&[0xff, 1, 2]), alice()),
                K::InvalidRequest,
            ),
            ("empty", wrap(Bytes::new(), alice()), K::InvalidRequest),
            (
                "truncated",
                wrap(truncated.into(), alice()),
                K::InvalidRequest,
            ),
            ("not served", wrap(produce, alice()), K::UnsupportedVersion),
            (
                "unknown API",
                wrap(unknown_key.into(), alice()),
                K::UnsupportedVersion,
            ),
            (
                "principal version",
                wrap(create_topics(), Some(bad_version.into())),
                K::InvalidRequest,
            ),
            (
                "principal cut short",
                wrap(create_topics(), Some(whole.slice(..whole.len() - 3))),
                K::InvalidRequest,
            ),
            (
                "empty principal",
                wrap(create_topics(), Some(Bytes::new())),
                K::InvalidRequest,
            ),
        ];
        for (what, r, code) in cases {
            let backend = Standby::default();
            let r = run(envelope(&ctx(), &broker(), &backend, r));
            assert_eq!(r.error_code, code.code(), "{what}");
            assert!(r.response_data.is_none(), "{what}");
            assert_eq!(backend.calls.get(), 0, "{what}: the backend was asked");
        }
    }

    /// A principal decodes from its version (0, the only one) and Kafka's
    /// DefaultPrincipalData; another version, or too few bytes, is none.
    #[test]
    fn principals_decode() {
        assert_eq!(
            principal(&principal_bytes(0, "User", "alice", false)),
            Some(Principal {
                principal_type: "User".into(),
                name: "alice".into(),
            })
        );
        assert_eq!(
            principal(&principal_bytes(0, "Group", "", true)),
            Some(Principal {
                principal_type: "Group".into(),
                name: String::new(),
            })
        );
        for version in [1, -1, i16::MAX] {
            assert_eq!(
                principal(&principal_bytes(version, "User", "alice", false)),
                None,
                "version {version}"
            );
        }
        let whole = principal_bytes(0, "User", "alice", false);
        for len in 0..whole.len() {
            assert_eq!(principal(&whole.slice(..len)), None, "{len} bytes");
        }
    }
}
