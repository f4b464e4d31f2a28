//! Why a whole request failed: [`RpcError`], one variant per thing a client can act on, and
//! [`LeaderHint`], where a non-leader says the active controller is.
//!
//! Each variant names the Kafka error code a Kafka client expects for the same failure
//! ([`RpcError::kafka_error_code`]), so a Kafka listener can answer with it and a reader can
//! map corum's answers onto Kafka's documentation:
//!
//! | variant | when | Kafka code |
//! |---|---|---|
//! | `NotController` | this node is not the active controller | `NOT_CONTROLLER` (41) |
//! | `RequestTooLarge` | the frame is above `socket.request.max.bytes` (connection then closed) | none: Kafka closes the connection; the client sees `NETWORK_EXCEPTION` (13) |
//! | `Timeout` | the records did not commit within the request's timeout | `REQUEST_TIMED_OUT` (7) |
//! | `Malformed` | the bytes are not a request of this protocol | `INVALID_REQUEST` (42) |
//! | `Api` | the controller refused the whole request | the [`ApiError`]'s own |
//! | `NotImplemented` | this node does not serve that API (yet) | `UNSUPPORTED_VERSION` (35) |
//! | `ProposalRefused` | the Raft layer refused the request's records | `UNKNOWN_SERVER_ERROR` (-1) |
//! | `ResponseTooLarge` | the answer is above the server's response limit | `UNKNOWN_SERVER_ERROR` (-1) |
//! | `RecordsTooLarge` | the request's records do not fit one batch | `RECORD_LIST_TOO_LARGE` (18) |
//! | `ObserverRefused` | an observer request names a replica that votes | `INVALID_REQUEST` (42) |
//! | `Internal` | a bug in the answering node | `UNKNOWN_SERVER_ERROR` (-1) |
//! | `AuthorizationFailed` | the connection's principal lacks the permission the request needs | the failure's: `CLUSTER_AUTHORIZATION_FAILED` (31), `TOPIC_AUTHORIZATION_FAILED` (29) |
//!
//! The variant order is the wire format (see [`crate::envelope`]): variants are only appended,
//! and every variant is pinned by a line of the golden file.

use corum_controller::acl::AuthorizationFailure;
use corum_controller::ApiError;
use corum_types::NodeId;

/// Where the active controller is, as a non-leader knows it.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct LeaderHint {
    pub id: NodeId,
    pub host: String,
    pub port: u16,
}

/// Why a whole request failed (per-item failures are [`ApiError`]s inside the response body).
/// Append new variants at the end only.
#[derive(
    Clone, Debug, PartialEq, Eq, thiserror::Error, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub enum RpcError {
    /// This node is not the active controller; retry at `leader` when known.
    /// Kafka: `NOT_CONTROLLER` (41).
    #[error("not the active controller{}", leader.as_ref().map(|l| format!("; leader is {} at {}:{}", l.id, l.host, l.port)).unwrap_or_else(|| "; leader unknown".into()))]
    NotController { leader: Option<LeaderHint> },
    /// The request frame was above the server's `socket.request.max.bytes`; the server
    /// closes the connection after this answer (correlation id 0: the body is never read).
    /// Kafka has no code for it: its broker closes the connection at once, which a Kafka
    /// client reports as `NETWORK_EXCEPTION` (13).
    #[error("request of {len_bytes} bytes exceeds the limit of {max_bytes}")]
    RequestTooLarge { len_bytes: u64, max_bytes: u64 },
    /// The request's records were not committed within its timeout; they may still commit.
    /// Kafka: `REQUEST_TIMED_OUT` (7).
    #[error("request timed out after {timeout_ms} ms")]
    Timeout { timeout_ms: u32 },
    /// The request's bytes are not a request of this protocol (they fail rkyv validation: a
    /// broken client, or a variant this build does not know). Kafka: `INVALID_REQUEST` (42).
    #[error("malformed request: {reason}")]
    Malformed { reason: String },
    /// The controller rejected the whole request. Kafka: the [`ApiError`]'s own code.
    #[error(transparent)]
    Api(ApiError),
    /// This node does not serve the API `api` (a voter change, or a Raft request at a server
    /// without a Raft handle): sending it again to the same node will not help. Kafka:
    /// `UNSUPPORTED_VERSION` (35), what a Kafka client raises for an API the node does not
    /// list in its ApiVersions answer.
    #[error("{api} is not served by this node")]
    NotImplemented { api: String },
    /// The Raft layer refused to append the request's records for a reason other than
    /// leadership (the controller resigned and reactivates; nothing of the request was
    /// applied). Retrying may succeed. Kafka: `UNKNOWN_SERVER_ERROR` (-1), what Kafka's
    /// controller answers when its Raft client refuses an append.
    #[error("proposal refused: {reason}")]
    ProposalRefused { reason: String },
    /// The answer takes `bytes`, above the server's response limit of `max` (ask for less,
    /// e.g. a smaller fetch). Kafka: `UNKNOWN_SERVER_ERROR` (-1); Kafka bounds responses by
    /// the request's own limits instead.
    #[error("response of {bytes} bytes exceeds the server's limit of {max}")]
    ResponseTooLarge { bytes: u64, max: u64 },
    /// The request's records take `bytes` once encoded, more than one batch may hold (`max`,
    /// the controller's batch limit): split the request. Nothing was applied. Kafka:
    /// `RECORD_LIST_TOO_LARGE` (18).
    #[error("the request's records take {bytes} bytes, more than one batch may hold ({max})")]
    RecordsTooLarge { bytes: u64, max: u64 },
    /// An observer request (Fetch, FetchSnapshot) named replica `replica_id`, which votes or
    /// is the answering node: its fetches would count as that voter's progress. Fetch as an
    /// observer with an id of its own. Kafka: `INVALID_REQUEST` (42).
    #[error("observer request refused: replica {replica_id} {reason}")]
    ObserverRefused { replica_id: NodeId, reason: String },
    /// A bug in the answering node: one of its components answered in a way the protocol
    /// does not allow (the reason says which). Report it. Kafka: `UNKNOWN_SERVER_ERROR` (-1).
    #[error("internal error in the answering node: {reason}")]
    Internal { reason: String },
    /// The connection's principal may not make this request (the node has an authorizer,
    /// `authorizer.class.name`, and no ACL allows it; see [`AuthorizationFailure`] for the
    /// permission it lacks). Nothing was applied. A request answered per item (CreateTopics,
    /// the configs requests, ...) carries `ApiError::AuthorizationFailed` on each refused
    /// item instead. Kafka: the failure's own code, CLUSTER_AUTHORIZATION_FAILED (31) for the
    /// cluster's operations.
    #[error("{0}")]
    AuthorizationFailed(Box<AuthorizationFailure>),
}

/// Kafka's `UNKNOWN_SERVER_ERROR`.
pub const KAFKA_UNKNOWN_SERVER_ERROR: i16 = -1;
/// Kafka's `REQUEST_TIMED_OUT`.
pub const KAFKA_REQUEST_TIMED_OUT: i16 = 7;
/// Kafka's `NETWORK_EXCEPTION`.
pub const KAFKA_NETWORK_EXCEPTION: i16 = 13;
/// Kafka's `RECORD_LIST_TOO_LARGE`.
pub const KAFKA_RECORD_LIST_TOO_LARGE: i16 = 18;
/// Kafka's `UNSUPPORTED_VERSION`.
pub const KAFKA_UNSUPPORTED_VERSION: i16 = 35;
/// Kafka's `NOT_CONTROLLER`.
pub const KAFKA_NOT_CONTROLLER: i16 = 41;
/// Kafka's `INVALID_REQUEST`.
pub const KAFKA_INVALID_REQUEST: i16 = 42;

impl RpcError {
    /// The Kafka error code a Kafka client expects for this failure (see each variant);
    /// `None` for [`RpcError::Api`], whose [`ApiError`] carries the code of its own kind.
    pub fn kafka_error_code(&self) -> Option<i16> {
        Some(match self {
            RpcError::NotController { .. } => KAFKA_NOT_CONTROLLER,
            RpcError::RequestTooLarge { .. } => KAFKA_NETWORK_EXCEPTION,
            RpcError::Timeout { .. } => KAFKA_REQUEST_TIMED_OUT,
            RpcError::Malformed { .. } => KAFKA_INVALID_REQUEST,
            RpcError::Api(_) => return None,
            RpcError::NotImplemented { .. } => KAFKA_UNSUPPORTED_VERSION,
            RpcError::ProposalRefused { .. } => KAFKA_UNKNOWN_SERVER_ERROR,
            RpcError::ResponseTooLarge { .. } => KAFKA_UNKNOWN_SERVER_ERROR,
            RpcError::RecordsTooLarge { .. } => KAFKA_RECORD_LIST_TOO_LARGE,
            RpcError::ObserverRefused { .. } => KAFKA_INVALID_REQUEST,
            RpcError::Internal { .. } => KAFKA_UNKNOWN_SERVER_ERROR,
            RpcError::AuthorizationFailed(f) => f.kafka_error_code(),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One of each variant, in wire order (the index is the archived tag).
    pub(crate) fn one_of_each() -> Vec<RpcError> {
        vec![
            RpcError::NotController { leader: None },
            RpcError::RequestTooLarge {
                len_bytes: 2,
                max_bytes: 1,
            },
            RpcError::Timeout { timeout_ms: 1 },
            RpcError::Malformed {
                reason: "bad tag".into(),
            },
            RpcError::Api(ApiError::NotController),
            RpcError::NotImplemented {
                api: "AddVoter".into(),
            },
            RpcError::ProposalRefused {
                reason: "a batch must hold at least one record".into(),
            },
            RpcError::ResponseTooLarge { bytes: 9, max: 8 },
            RpcError::RecordsTooLarge { bytes: 9, max: 8 },
            RpcError::ObserverRefused {
                replica_id: NodeId(2),
                reason: "votes".into(),
            },
            RpcError::Internal {
                reason: "answer of another kind".into(),
            },
            RpcError::AuthorizationFailed(Box::new(AuthorizationFailure {
                principal: "User:CN=tenant,O=corum".into(),
                operation: corum_controller::acl::AclOperation::Alter,
                resource_type: corum_controller::acl::ResourceType::Cluster,
                resource_name: "kafka-cluster".into(),
            })),
        ]
    }

    /// The wire tag of a variant; fails to compile when a variant is added, so
    /// [`one_of_each`] cannot silently fall behind.
    fn index(e: &RpcError) -> usize {
        match e {
            RpcError::NotController { .. } => 0,
            RpcError::RequestTooLarge { .. } => 1,
            RpcError::Timeout { .. } => 2,
            RpcError::Malformed { .. } => 3,
            RpcError::Api(_) => 4,
            RpcError::NotImplemented { .. } => 5,
            RpcError::ProposalRefused { .. } => 6,
            RpcError::ResponseTooLarge { .. } => 7,
            RpcError::RecordsTooLarge { .. } => 8,
            RpcError::ObserverRefused { .. } => 9,
            RpcError::Internal { .. } => 10,
            RpcError::AuthorizationFailed(_) => 11,
        }
    }

    /// `one_of_each` lists every variant once, in wire order.
    #[test]
    fn one_of_each_is_complete_and_in_order() {
        let tags: Vec<usize> = one_of_each().iter().map(index).collect();
        assert_eq!(tags, (0..12).collect::<Vec<_>>());
    }

    /// Each variant maps to the Kafka code its doc names, `Api` to none (its ApiError has
    /// its own), and the distinct failures this crate added do not collapse into
    /// `Malformed`'s INVALID_REQUEST except the one that is an invalid request.
    #[test]
    fn kafka_codes_are_the_documented_ones() {
        let codes: Vec<Option<i16>> = one_of_each()
            .iter()
            .map(RpcError::kafka_error_code)
            .collect();
        assert_eq!(
            codes,
            [
                Some(41),
                Some(13),
                Some(7),
                Some(42),
                None,
                Some(35),
                Some(-1),
                Some(-1),
                Some(18),
                Some(42),
                Some(-1),
                Some(31),
            ]
        );
    }

    /// The messages name what a reader needs: the API not served, the sizes and limits,
    /// the refused replica.
    #[test]
    fn messages_name_the_facts() {
        let text: Vec<String> = one_of_each().iter().map(|e| e.to_string()).collect();
        assert_eq!(text[5], "AddVoter is not served by this node");
        assert_eq!(
            text[7],
            "response of 9 bytes exceeds the server's limit of 8"
        );
        assert_eq!(
            text[8],
            "the request's records take 9 bytes, more than one batch may hold (8)"
        );
        assert_eq!(text[9], "observer request refused: replica 2 votes");
        assert_eq!(
            text[11],
            "Cluster authorization failed: User:CN=tenant,O=corum is not authorized to ALTER on CLUSTER kafka-cluster"
        );
    }
}
