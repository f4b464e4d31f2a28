//! One module per group of Kafka APIs: each turns a Kafka request into corum requests through
//! the [`crate::Backend`] and the answers into the Kafka response at the request's version.

pub mod acls;
pub mod api_versions;
pub mod brokers;
pub mod cluster;
pub mod configs;
pub mod envelope;
pub mod features;
pub mod metadata;
pub mod nodes;
pub mod raft_fetch;
pub mod scram;
pub mod topics;
pub mod voters;

use corum_types::Uuid;
use kafka_protocol::protocol::StrBytes;

/// A Kafka string.
pub(crate) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A Kafka string taking `s` as it is: a static one is not copied, an owned one is moved.
pub(crate) fn cow_text(s: std::borrow::Cow<'static, str>) -> StrBytes {
    match s {
        std::borrow::Cow::Borrowed(s) => StrBytes::from_static_str(s),
        std::borrow::Cow::Owned(s) => StrBytes::from_string(s),
    }
}

/// A Kafka UUID.
pub(crate) fn kafka_uuid(id: Uuid) -> uuid::Uuid {
    uuid::Uuid::from_bytes(id.0)
}

/// corum's UUID of a Kafka one.
pub(crate) fn corum_uuid(id: uuid::Uuid) -> Uuid {
    Uuid(*id.as_bytes())
}
