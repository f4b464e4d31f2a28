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
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut buf, api.response_header_version(version))
        .map_err(err)?;
    body.encode(&mut buf, version).map_err(err)?;
    let size = (buf.len() - crate::frame::SIZE_PREFIX_BYTES) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}
