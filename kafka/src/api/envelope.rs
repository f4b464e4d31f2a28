//! Envelope (KIP-590): an admin request a broker forwards to its controller on behalf of one of
//! its clients, with that client's principal and address.
//!
//! The wrapped bytes are a whole request (header and body). It is parsed and served as if it had
//! come in on this listener, and its whole response (header and body, no size prefix) goes back
//! in the envelope. What is wrong with the envelope itself is its error code: a wrapped request
//! that does not parse, that is itself an Envelope, or a principal that does not decode, is
//! INVALID_REQUEST; one this listener does not serve is UNSUPPORTED_VERSION. The principal and
//! client address travel with the request into the log line (corum authorizes nothing yet;
//! security is issue #17's).

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use kafka_protocol::error::ResponseError as K;
use kafka_protocol::messages::{ApiKey, DefaultPrincipalData, EnvelopeRequest, EnvelopeResponse};
use kafka_protocol::protocol::Decodable;

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

/// Serves an Envelope.
pub fn envelope<'a, B: Backend>(
    ctx: &'a ListenerContext,
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
        let answer = service::serve(ctx, backend, parsed).await;
        match response::encode(
            answer.api,
            answer.version,
            answer.correlation_id,
            &answer.body,
        ) {
            Ok(bytes) => {
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
