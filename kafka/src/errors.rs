//! corum's errors as Kafka error codes and messages.
//!
//! Every [`ApiError`] variant has the code a Kafka client acts on (the match is exhaustive, so
//! a new variant cannot be added without choosing one). Whole-request [`RpcError`]s use
//! [`RpcError::kafka_error_code`].

use corum_controller::ApiError;
use corum_protocol::RpcError;
use kafka_protocol::error::{ParseResponseErrorCode, ResponseError as K};

/// The longest error message a response carries. Messages quote what the client sent (a topic
/// name, a config key, escaped), and a string of a non-flexible version holds at most 32,767
/// bytes: an answer with a longer one would not encode, and the listener would close the
/// connection instead of answering.
pub const MESSAGE_BYTES_MAX: usize = 1024;

/// `message` cut to [`MESSAGE_BYTES_MAX`] bytes (on a character boundary, ending in `…`).
fn bounded(mut message: String) -> String {
    if message.len() > MESSAGE_BYTES_MAX {
        let mut end = MESSAGE_BYTES_MAX - '…'.len_utf8();
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// A Kafka error code with the message a client shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaError {
    pub code: i16,
    pub message: Option<String>,
}

impl KafkaError {
    pub fn new(code: K, message: impl Into<String>) -> KafkaError {
        KafkaError {
            code: code.code(),
            message: Some(bounded(message.into())),
        }
    }

    /// The error of a per-item controller failure.
    pub fn api(e: &ApiError) -> KafkaError {
        KafkaError {
            code: api_error_code(e).code(),
            message: Some(bounded(e.to_string())),
        }
    }

    /// The error of a whole request that failed.
    pub fn rpc(e: &RpcError) -> KafkaError {
        match e {
            RpcError::Api(api) => KafkaError::api(api),
            other => KafkaError {
                code: other
                    .kafka_error_code()
                    .unwrap_or(K::UnknownServerError.code()),
                message: Some(bounded(other.to_string())),
            },
        }
    }
}

/// The Kafka error a client expects for `e`.
pub fn api_error_code(e: &ApiError) -> K {
    match e {
        ApiError::NotController => K::NotController,
        ApiError::UnknownTopic { .. } => K::UnknownTopicOrPartition,
        ApiError::UnknownTopicId { .. } => K::UnknownTopicId,
        ApiError::UnknownPartition { .. } => K::UnknownTopicOrPartition,
        ApiError::InvalidTopicName { .. } => K::InvalidTopicException,
        ApiError::TopicAlreadyExists { .. } => K::TopicAlreadyExists,
        // Kafka answers a create of a topic still being deleted as already existing.
        ApiError::TopicDeletionInProgress { .. } => K::TopicAlreadyExists,
        ApiError::InvalidReplicationFactor { .. } => K::InvalidReplicationFactor,
        ApiError::InvalidPartitions { .. } => K::InvalidPartitions,
        ApiError::InvalidReplicaAssignment { .. } => K::InvalidReplicaAssignment,
        ApiError::StaleBrokerEpoch { .. }
        | ApiError::StaleHeartbeat { .. }
        | ApiError::BrokerLeaseExpired { .. } => K::StaleBrokerEpoch,
        // AlterPartition answers a stale partition epoch with INVALID_UPDATE_VERSION.
        ApiError::StalePartitionEpoch { .. } => K::InvalidUpdateVersion,
        ApiError::FencedLeaderEpoch { .. } => K::FencedLeaderEpoch,
        ApiError::NotLeader { .. } => K::NotLeaderOrFollower,
        ApiError::IneligibleReplica { .. } => K::IneligibleReplica,
        ApiError::InvalidIsr { .. } => K::InvalidRequest,
        ApiError::InvalidConfig { .. } => K::InvalidConfig,
        ApiError::InvalidConfigResource { .. } => K::InvalidRequest,
        ApiError::FeatureLevelOutOfRange { .. } => K::InvalidUpdateVersion,
        ApiError::UnsupportedFeatures { .. } => K::UnsupportedVersion,
        ApiError::BrokerIdNotRegistered { .. } => K::BrokerIdNotRegistered,
        ApiError::DuplicateBrokerRegistration { .. } => K::DuplicateBrokerRegistration,
        ApiError::BrokerNotFenced { .. } => K::InvalidRequest,
        ApiError::ElectionNotNeeded { .. } => K::ElectionNotNeeded,
        ApiError::PreferredLeaderNotAvailable { .. } => K::PreferredLeaderNotAvailable,
        ApiError::EligibleLeadersNotAvailable { .. } => K::EligibleLeadersNotAvailable,
        ApiError::TooManyRecords { .. } => K::PolicyViolation,
        ApiError::InvalidRequest { .. } => K::InvalidRequest,
        ApiError::InvalidRegistration { .. } => K::InvalidRegistration,
        ApiError::NotReplica { .. } => K::NotLeaderOrFollower,
        ApiError::UnsupportedVersion { .. } => K::UnsupportedVersion,
        ApiError::AuthorizationFailed(f) => f
            .kafka_error_code()
            .err()
            .expect("an authorization failure's code is an error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_clients_act_on() {
        assert_eq!(api_error_code(&ApiError::NotController).code(), 41);
        assert_eq!(
            api_error_code(&ApiError::UnknownTopic { name: "t".into() }).code(),
            3
        );
        assert_eq!(
            api_error_code(&ApiError::TopicAlreadyExists { name: "t".into() }).code(),
            36
        );
        let e = KafkaError::rpc(&RpcError::NotController { leader: None });
        assert_eq!(e.code, 41);
        let e = KafkaError::rpc(&RpcError::Timeout { timeout_ms: 5 });
        assert_eq!(e.code, 7);
        let e = KafkaError::rpc(&RpcError::Api(ApiError::InvalidConfig {
            key: "k".into(),
            reason: "bad".into(),
        }));
        assert_eq!(e.code, 40);
        assert!(e.message.unwrap().contains("bad"));
    }

    /// An authorization refusal has Kafka's code for its resource type, whole or per item,
    /// and its message names the permission.
    #[test]
    fn authorization_failures_have_kafka_codes() {
        use corum_controller::acl::{AclOperation, AuthorizationFailure, ResourceType};
        let failure = |t: ResourceType| AuthorizationFailure {
            principal: "User:CN=tenant".into(),
            operation: AclOperation::Create,
            resource_type: t,
            resource_name: "orders".into(),
        };
        for (t, code) in [
            (ResourceType::Topic, 29),
            (ResourceType::Group, 30),
            (ResourceType::Cluster, 31),
            (ResourceType::TransactionalId, 53),
            (ResourceType::DelegationToken, 65),
            (ResourceType::User, 31),
        ] {
            assert_eq!(
                api_error_code(&ApiError::AuthorizationFailed(failure(t))).code(),
                code
            );
            let e = KafkaError::rpc(&RpcError::AuthorizationFailed(Box::new(failure(t))));
            assert_eq!(e.code, code, "{t}");
        }
        let e = KafkaError::api(&ApiError::AuthorizationFailed(failure(ResourceType::Topic)));
        assert_eq!(
            e.message.as_deref(),
            Some("Topic authorization failed: User:CN=tenant is not authorized to CREATE on TOPIC orders")
        );
    }

    #[test]
    fn messages_quoting_the_client_are_bounded() {
        // A name of multi-byte characters, so the cut must find a character boundary.
        let name = "é".repeat(40_000);
        let e = KafkaError::api(&ApiError::UnknownTopic { name: name.clone() });
        let message = e.message.unwrap();
        assert!(
            message.len() <= MESSAGE_BYTES_MAX,
            "{} bytes",
            message.len()
        );
        assert!(message.starts_with("unknown topic") && message.ends_with('…'));
        let e = KafkaError::new(K::InvalidRequest, format!("topic {name:?} twice"));
        assert!(e.message.unwrap().len() <= MESSAGE_BYTES_MAX);
        let e = KafkaError::rpc(&RpcError::Internal { reason: name });
        assert!(e.message.unwrap().len() <= MESSAGE_BYTES_MAX);
        let short = KafkaError::new(K::InvalidRequest, "short");
        assert_eq!(short.message.as_deref(), Some("short"));
    }
}
