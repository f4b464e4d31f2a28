//! Errors of the controller crate.
//!
//! - [`ApiError`]: the precise code a request (or one item of a batch request) is rejected with.
//!   A rejected request or item produces no records.
//! - [`DecodeError`]: bytes that are not a valid record batch.
//! - [`ReplayError`]: a committed record that does not fit the image (a corrupt or foreign log):
//!   the node must stop rather than guess, because every replica would otherwise diverge.
//! - [`ConfigError`]: a [`crate::ControllerConfig`] that fails `validate()`.

use std::borrow::Cow;

use corum_types::{BrokerEpoch, LogOffset, NodeId};

use crate::ids::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId};

/// A fixed explanation in an [`ApiError`]: a static string when the controller builds it, an owned
/// one when it was decoded from the wire.
pub type Reason = Cow<'static, str>;

/// The code a request or an item of a request is rejected with.
///
/// Archivable with rkyv so responses carry it as-is (`corum-protocol`). Like the records,
/// the variant order is the wire format: append new variants at the end only.
#[derive(
    Clone, Debug, PartialEq, Eq, thiserror::Error, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub enum ApiError {
    #[error("this controller is not the active controller")]
    NotController,
    #[error("unknown topic {name:?}")]
    UnknownTopic { name: String },
    #[error("unknown topic id {topic_id}")]
    UnknownTopicId { topic_id: TopicId },
    #[error("unknown partition {partition} of topic {topic_id}")]
    UnknownPartition {
        topic_id: TopicId,
        partition: PartitionId,
    },
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName {
        name: String,
        #[rkyv(with = rkyv::with::AsOwned)]
        reason: Reason,
    },
    #[error("topic {name:?} already exists")]
    TopicAlreadyExists { name: String },
    #[error("topic {name:?} is being deleted")]
    TopicDeletionInProgress { name: String },
    #[error("invalid replication factor {requested}: {available} unfenced brokers available")]
    InvalidReplicationFactor { requested: i32, available: usize },
    #[error("invalid partition count {requested}: {reason}")]
    InvalidPartitions {
        requested: i32,
        #[rkyv(with = rkyv::with::AsOwned)]
        reason: Reason,
    },
    #[error("invalid replica assignment: {reason}")]
    InvalidReplicaAssignment { reason: String },
    #[error("stale broker epoch for broker {broker_id}: current {current}, request {request}")]
    StaleBrokerEpoch {
        broker_id: NodeId,
        current: BrokerEpoch,
        request: BrokerEpoch,
    },
    #[error(
        "heartbeat of broker {broker_id} ignored: offset {request} is below {seen} already seen"
    )]
    StaleHeartbeat {
        broker_id: NodeId,
        seen: LogOffset,
        request: LogOffset,
    },
    #[error("lease of broker {broker_id} expired: register again for a new epoch")]
    BrokerLeaseExpired { broker_id: NodeId },
    #[error(
        "stale partition epoch for {topic_id}/{partition}: current {current}, request {request}"
    )]
    StalePartitionEpoch {
        topic_id: TopicId,
        partition: PartitionId,
        current: PartitionEpoch,
        request: PartitionEpoch,
    },
    #[error(
        "fenced leader epoch for {topic_id}/{partition}: current {current}, request {request}"
    )]
    FencedLeaderEpoch {
        topic_id: TopicId,
        partition: PartitionId,
        current: LeaderEpoch,
        request: LeaderEpoch,
    },
    #[error("broker {broker_id} is not the leader of {topic_id}/{partition}")]
    NotLeader {
        broker_id: NodeId,
        topic_id: TopicId,
        partition: PartitionId,
    },
    #[error("broker {broker_id} cannot join the ISR: {reason}")]
    IneligibleReplica {
        broker_id: NodeId,
        #[rkyv(with = rkyv::with::AsOwned)]
        reason: Reason,
    },
    #[error("invalid ISR: {reason}")]
    InvalidIsr {
        #[rkyv(with = rkyv::with::AsOwned)]
        reason: Reason,
    },
    #[error("invalid config {key:?}: {reason}")]
    InvalidConfig { key: String, reason: String },
    #[error("unknown config resource: {reason}")]
    InvalidConfigResource { reason: String },
    #[error("feature {feature:?} level range [{min_level}, {max_level}] out of range: {reason}")]
    FeatureLevelOutOfRange {
        feature: String,
        min_level: u16,
        max_level: u16,
        reason: String,
    },
    #[error("broker {broker_id} does not support finalized feature {feature:?}")]
    UnsupportedFeatures { broker_id: NodeId, feature: String },
    #[error("broker {broker_id} is not registered")]
    BrokerIdNotRegistered { broker_id: NodeId },
    #[error("broker {broker_id} is already registered by a live process (another incarnation)")]
    DuplicateBrokerRegistration { broker_id: NodeId },
    #[error("broker {broker_id} must be fenced first")]
    BrokerNotFenced { broker_id: NodeId },
    #[error("election not needed for {topic_id}/{partition}")]
    ElectionNotNeeded {
        topic_id: TopicId,
        partition: PartitionId,
    },
    #[error("preferred leader not available for {topic_id}/{partition}")]
    PreferredLeaderNotAvailable {
        topic_id: TopicId,
        partition: PartitionId,
    },
    #[error("no eligible leader for {topic_id}/{partition}")]
    EligibleLeadersNotAvailable {
        topic_id: TopicId,
        partition: PartitionId,
    },
    #[error("request would produce {records} records, above the limit of {max}")]
    TooManyRecords { records: usize, max: usize },
    #[error("invalid request: {reason}")]
    InvalidRequest {
        #[rkyv(with = rkyv::with::AsOwned)]
        reason: Reason,
    },
    /// A broker registration the controller refuses (Kafka's INVALID_REGISTRATION): its log
    /// directories (none, a reserved id, one twice, one another broker registered) or its
    /// listeners.
    #[error("invalid registration of broker {broker_id}: {reason}")]
    InvalidRegistration {
        broker_id: NodeId,
        #[rkyv(with = rkyv::with::AsOwned)]
        reason: Reason,
    },
    /// The broker holds no replica of the partition (Kafka's NOT_LEADER_OR_FOLLOWER).
    #[error("broker {broker_id} holds no replica of {topic_id}/{partition}")]
    NotReplica {
        broker_id: NodeId,
        topic_id: TopicId,
        partition: PartitionId,
    },
    /// The request needs a feature level the cluster has not finalized (Kafka's
    /// UNSUPPORTED_VERSION).
    #[error("unsupported: {reason}")]
    UnsupportedVersion {
        #[rkyv(with = rkyv::with::AsOwned)]
        reason: Reason,
    },
    /// The requester may not do this (the authorizer refused it; nothing reached the
    /// controller). Kafka: the failure's own code, TOPIC_AUTHORIZATION_FAILED (29) or
    /// CLUSTER_AUTHORIZATION_FAILED (31) here
    /// ([`crate::acl::AuthorizationFailure::kafka_error_code`]).
    #[error("{0}")]
    AuthorizationFailed(crate::acl::AuthorizationFailure),
}

/// Bytes that are not a valid record batch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("batch of {len_bytes} bytes is shorter than its root")]
    Truncated { len_bytes: usize },
    #[error("batch buffer at {address:#x} is not 8-byte aligned")]
    Misaligned { address: usize },
    #[error("batch failed validation: {reason}")]
    Invalid { reason: String },
}

/// A committed record that does not apply to the image.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("record at {offset}: ACL {id} names a resource type, pattern type, operation or permission type that is none of Kafka's")]
    InvalidAcl {
        offset: LogOffset,
        id: corum_types::Uuid,
    },
    #[error("record at {offset}: ACL id {id} is zero or already in use")]
    DuplicateAclId {
        offset: LogOffset,
        id: corum_types::Uuid,
    },
    #[error("record at {offset}: SCRAM credential of user {user:?} is invalid: {reason}")]
    InvalidScramCredential {
        offset: LogOffset,
        user: String,
        reason: &'static str,
    },
    #[error("record at {offset}: user {user:?} has no SCRAM credential of mechanism code {mechanism} to remove")]
    UnknownScramCredential {
        offset: LogOffset,
        user: String,
        mechanism: i8,
    },
    #[error("record at {offset}: no ACL {id} to remove")]
    UnknownAcl {
        offset: LogOffset,
        id: corum_types::Uuid,
    },
    #[error("record at {offset}: broker {broker_id} is not registered")]
    UnknownBroker {
        offset: LogOffset,
        broker_id: NodeId,
    },
    #[error(
        "record at {offset}: broker {broker_id} epoch {record} does not match registered {current}"
    )]
    BrokerEpochMismatch {
        offset: LogOffset,
        broker_id: NodeId,
        current: BrokerEpoch,
        record: BrokerEpoch,
    },
    #[error("record at {offset}: unknown topic id {topic_id}")]
    UnknownTopic {
        offset: LogOffset,
        topic_id: TopicId,
    },
    #[error("record at {offset}: unknown topic name {name:?}")]
    UnknownTopicName { offset: LogOffset, name: String },
    #[error("record at {offset}: topic name {name:?} already names topic {existing}")]
    TopicNameTaken {
        offset: LogOffset,
        name: String,
        existing: TopicId,
    },
    #[error(
        "record at {offset}: partition {partition} of {topic_id} does not exist (count {count})"
    )]
    UnknownPartition {
        offset: LogOffset,
        topic_id: TopicId,
        partition: PartitionId,
        count: usize,
    },
    #[error("record at {offset}: invalid partition state: {reason}")]
    InvalidPartition {
        offset: LogOffset,
        reason: &'static str,
    },
    #[error(
        "record at {offset}: invalid feature level for {name:?}: min {min_level} max {max_level}"
    )]
    InvalidFeatureLevel {
        offset: LogOffset,
        name: String,
        min_level: u16,
        max_level: u16,
    },
    #[error("record at {offset}: producer id block moves backwards ({record} < {current})")]
    ProducerIdsBackwards {
        offset: LogOffset,
        current: u64,
        record: u64,
    },
    #[error("committed record at {offset} skips in-flight proposals from {inflight_base}: call on_resign first")]
    InflightProposalsSkipped {
        offset: LogOffset,
        inflight_base: LogOffset,
    },
    #[error("record at {offset} is not after the last applied offset {applied}")]
    OffsetNotIncreasing {
        offset: LogOffset,
        applied: LogOffset,
    },
}

/// A controller configuration that fails validation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config {name}={value} is invalid: {reason}")]
    Invalid {
        name: &'static str,
        value: u64,
        reason: &'static str,
    },
}

/// The crate's catch-all result for operations that may fail in several of the ways above.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
