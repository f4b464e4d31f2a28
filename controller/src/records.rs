//! Metadata records: the only things the controller writes to the `@metadata` log.
//!
//! # Versioning
//!
//! [`MetadataRecord`] is an enum whose variants each hold one versioned struct
//! (`RegisterBrokerRecordV1`, ...). rkyv archives an enum as a one-byte discriminant (the variant
//! index) followed by the variant's fields, so the variant *order is the format*:
//!
//! - a variant is never removed or reordered; new variants are appended at the end;
//! - a v2 of a record is a new variant appended at the end (e.g. `RegisterBrokerV2(
//!   Box<RegisterBrokerRecordV2>)`), and `replay` keeps a match arm for every version ever
//!   written, so a log written by an older controller replays unchanged; once corum is released,
//!   a controller may write a new version only when every voter reads it (a feature level every
//!   voter supports); before that release every node runs one build, and the controller writes
//!   the newest versions;
//! - the golden test (`testdata/records_v1.golden`) pins the bytes of one of each record, so any
//!   accidental change to a V1 layout fails the build's tests;
//! - an archived record is as large as its largest variant ([`ARCHIVED_RECORD_BYTES`], the
//!   stride of a batch's record array), so a variant that would be larger goes in a `Box`
//!   (archived as a 4-byte relative pointer), like `RegisterBrokerV2`.
//!
//! # Kafka's records
//!
//! Every record has one Kafka metadata record as its counterpart, and the records the
//! controller writes today replay as Kafka's brokers replay those: `RegisterBrokerV2` is
//! RegisterBrokerRecord v3, `BrokerRegistrationChangeV2` BrokerRegistrationChangeRecord (what
//! Kafka's controller writes to fence, unfence and start a controlled shutdown),
//! `PartitionV2` PartitionRecord v1, `PartitionChange` PartitionChangeRecord v1 (no epochs:
//! replay counts them), `PartitionV3` and `PartitionChangeV2` the same with KIP-966's eligible
//! leader replicas (Kafka's v2 of both; written only when they carry those, see
//! [`MetadataRecord::partition`]), `ClearElr` ClearElrRecord, `Topic` TopicRecord,
//! `RemoveTopic` RemoveTopicRecord, `AccessControlEntry` AccessControlEntryRecord,
//! `RemoveAccessControlEntry` RemoveAccessControlEntryRecord, `UserScramCredential`
//! UserScramCredentialRecord, `RemoveUserScramCredential` RemoveUserScramCredentialRecord, `Config` ConfigRecord, `FeatureLevel` FeatureLevelRecord
//! (its `max_level` is Kafka's level), `ProducerIds`, `NoOp`, `RegisterController` and
//! `UnregisterBroker` theirs. The V1 records that the V2 ones replaced (RegisterBroker,
//! Fence/UnfenceBroker, BrokerRegistrationChange, Partition, PartitionLeaderChange,
//! PartitionIsrChange) are only replayed (older logs).
//!
//! # Batches
//!
//! One log entry (one Raft proposal) carries a batch: a `Vec<MetadataRecord>` archived as one rkyv
//! payload. [`encode_batch`] produces the payload, or [`BatchBuilder`] part by part as requests
//! arrive (the same bytes; the exact length known after each part, so a batch is cut before it
//! outgrows its limit without encoding anything twice); [`decode_batch`] validates untrusted
//! bytes with bytecheck (every relative pointer, length, UTF-8 string, enum tag and bool) and
//! returns a zero-copy view. After that, [`crate::Controller::replay`] works directly on
//! `&ArchivedMetadataRecord` without copying.
//!
//! Byte layout of a batch (rkyv 0.8, little-endian, 8-byte aligned buffer): the record bodies
//! (strings, vectors) come first, then the array of archived records (each `size_of::<
//! ArchivedMetadataRecord>()` bytes: a u8 tag, padding, the variant's inline fields, where a
//! string or vector is a 4-byte relative offset plus a 4-byte length), and last, the root: an
//! `ArchivedVec` (4-byte relative offset to the array, 4-byte record count) in the final 8 bytes.

use corum_types::{BrokerEpoch, NodeId, Uuid};
use rkyv::rancor;
use rkyv::util::AlignedVec;
use rkyv::vec::ArchivedVec;

use crate::error::DecodeError;
use crate::ids::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId};

/// One network listener of a broker (KIP-631 `EndPoints`).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ListenerV1 {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// The range of levels a broker supports for one feature (KIP-584).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct SupportedFeatureV1 {
    pub name: String,
    pub min_level: u16,
    pub max_level: u16,
}

/// A broker registered (a heartbeat in INITIAL state). The broker starts fenced.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct RegisterBrokerRecordV1 {
    pub broker_id: NodeId,
    /// Random per process start; tells a retried registration from a new process.
    pub incarnation_id: Uuid,
    /// The log end offset just before this record: this record's own offset.
    pub broker_epoch: BrokerEpoch,
    pub listeners: Vec<ListenerV1>,
    pub features: Vec<SupportedFeatureV1>,
    pub rack: Option<String>,
}

/// A broker left the cluster for good (its registration is removed).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct UnregisterBrokerRecordV1 {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
}

/// A broker was fenced (lease expired, or it asked to be).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct FenceBrokerRecordV1 {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
}

/// A broker caught up with the log and was unfenced.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct UnfenceBrokerRecordV1 {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
}

/// A change to a registration that is neither fencing nor unfencing: controlled shutdown.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct BrokerRegistrationChangeRecordV1 {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
    pub in_controlled_shutdown: bool,
}

/// A topic was created, or (with `deleting`) its deletion was decided.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct TopicRecordV1 {
    pub name: String,
    pub topic_id: TopicId,
    pub deleting: bool,
}

/// A topic's deletion completed: the topic, its partitions and its configs are gone.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct RemoveTopicRecordV1 {
    pub topic_id: TopicId,
}

/// The full state of one partition (creation, or a snapshot of it).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PartitionRecordV1 {
    pub topic_id: TopicId,
    pub partition_id: PartitionId,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    pub leader: Option<NodeId>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
}

/// A partition's leader changed. (Not the Raft control record of the same thread name: this one
/// is about a data partition.) `partition_epoch` is the epoch after the change.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PartitionLeaderChangeRecordV1 {
    pub topic_id: TopicId,
    pub partition_id: PartitionId,
    pub leader: Option<NodeId>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
}

/// A partition's in-sync replica set changed. `partition_epoch` is the epoch after the change;
/// when a leader change and an ISR change are one logical change, both records carry the same one.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PartitionIsrChangeRecordV1 {
    pub topic_id: TopicId,
    pub partition_id: PartitionId,
    pub isr: Vec<NodeId>,
    pub partition_epoch: PartitionEpoch,
}

/// What a config entry belongs to.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum ConfigResourceType {
    /// `resource_name` is a topic name.
    Topic = 0,
    /// `resource_name` is a broker id in decimal, or empty for the cluster-wide default.
    Broker = 1,
}

/// One config key set (`value` is `Some`) or deleted (`None`).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ConfigRecordV1 {
    pub resource_type: ConfigResourceType,
    pub resource_name: String,
    pub key: String,
    pub value: Option<String>,
}

/// The finalized level range of one feature. `max_level == 0` removes the feature (level 0 means
/// "disabled" in KIP-584); otherwise `1 <= min_level <= max_level`.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct FeatureLevelRecordV1 {
    pub name: String,
    pub min_level: u16,
    pub max_level: u16,
}

/// A block of producer ids was handed to a broker: ids below `next_producer_id` are taken.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ProducerIdsRecordV1 {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
    pub next_producer_id: u64,
}

/// A record that changes nothing (a new active controller commits one to learn its commit point).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct NoOpRecordV1 {}

/// One listener of a controller (KIP-919 `EndPoints` of Kafka's RegisterControllerRecord).
/// `security_protocol` is Kafka's code: see [`SecurityProtocol`].
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ControllerEndpointV1 {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: i16,
}

/// Kafka's security protocols by their wire codes (`SecurityProtocol` in Kafka), the values a
/// [`ControllerEndpointV1::security_protocol`] may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i16)]
pub enum SecurityProtocol {
    Plaintext = 0,
    Ssl = 1,
    SaslPlaintext = 2,
    SaslSsl = 3,
}

impl SecurityProtocol {
    /// The protocol of Kafka code `code`, if it names one.
    pub fn from_code(code: i16) -> Option<SecurityProtocol> {
        Some(match code {
            0 => SecurityProtocol::Plaintext,
            1 => SecurityProtocol::Ssl,
            2 => SecurityProtocol::SaslPlaintext,
            3 => SecurityProtocol::SaslSsl,
            _ => return None,
        })
    }

    /// Kafka's name of the protocol (as `listener.security.protocol.map` spells it).
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// A controller registered itself (KIP-919's RegisterControllerRecord): where it listens and
/// the feature levels it supports. A later registration of the same id replaces it.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct RegisterControllerRecordV1 {
    pub controller_id: NodeId,
    /// Random per process start: tells a re-sent registration from a restarted process.
    pub incarnation_id: Uuid,
    pub end_points: Vec<ControllerEndpointV1>,
    pub features: Vec<SupportedFeatureV1>,
}

/// One listener of a broker with its security protocol (Kafka's `BrokerEndpoint` of
/// RegisterBrokerRecord). `security_protocol` is Kafka's code: see [`SecurityProtocol`].
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct BrokerEndpointV1 {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: i16,
}

impl BrokerEndpointV1 {
    /// The endpoint of a [`ListenerV1`] (which names no protocol): PLAINTEXT, the only
    /// protocol corum's listeners speak. [`RegisterBrokerRecordV1`] replays with it.
    pub fn plaintext(l: &ListenerV1) -> BrokerEndpointV1 {
        BrokerEndpointV1 {
            name: l.name.clone(),
            host: l.host.clone(),
            port: l.port,
            security_protocol: SecurityProtocol::Plaintext as i16,
        }
    }

    /// The listener of this endpoint, without its protocol (what DescribeCluster carries).
    pub fn listener(&self) -> ListenerV1 {
        ListenerV1 {
            name: self.name.clone(),
            host: self.host.clone(),
            port: self.port,
        }
    }
}

/// A broker registered, or amended its registration (Kafka's RegisterBrokerRecord v3: KIP-631,
/// KIP-858's log directories). A new registration (a new broker epoch) starts fenced and not in
/// controlled shutdown; an amendment by the same process keeps its epoch and both flags.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct RegisterBrokerRecordV2 {
    pub broker_id: NodeId,
    /// Random per process start; tells a retried registration from a new process.
    pub incarnation_id: Uuid,
    /// The offset of the record that started this registration (a new one: its own offset).
    pub broker_epoch: BrokerEpoch,
    pub endpoints: Vec<BrokerEndpointV1>,
    pub features: Vec<SupportedFeatureV1>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
    /// The ids of the broker's online log directories (KIP-858); empty when the broker named
    /// none or `metadata.version` is below 3.7-IV2.
    pub log_dirs: Vec<Uuid>,
}

/// How a [`BrokerRegistrationChangeRecordV2`] changes the fencing of a broker (Kafka's
/// `BrokerRegistrationFencingChange`: 0, 1, -1 in the record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum FencingChange {
    /// Leaves it as it is (Kafka: 0).
    Unchanged = 0,
    /// Fences the broker (Kafka: 1).
    Fence = 1,
    /// Unfences the broker (Kafka: -1).
    Unfence = 2,
}

/// A change to one registration (Kafka's BrokerRegistrationChangeRecord, which Kafka's
/// controller writes for fencing, unfencing and controlled shutdown): fencing changes as
/// `fenced` says; `in_controlled_shutdown: true` puts the broker in controlled shutdown and
/// `false` leaves that flag as it is (only a new registration clears it, as in Kafka). Unlike
/// [`FenceBrokerRecordV1`], fencing leaves `in_controlled_shutdown` as it is.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct BrokerRegistrationChangeRecordV2 {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
    pub fenced: FencingChange,
    pub in_controlled_shutdown: bool,
}

/// Whether a partition's leader is recovering from an unclean election (KIP-704; Kafka's
/// `LeaderRecoveryState`, the byte of PartitionRecord and PartitionChangeRecord).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[repr(u8)]
pub enum LeaderRecoveryState {
    /// The leader was elected from the ISR, or has recovered (Kafka: 0).
    #[default]
    Recovered = 0,
    /// The leader was elected outside the ISR and its ISR is itself alone until it recovers
    /// (Kafka: 1).
    Recovering = 1,
}

impl LeaderRecoveryState {
    /// The value of an archived state.
    pub fn from_archived(a: &ArchivedLeaderRecoveryState) -> LeaderRecoveryState {
        match a {
            ArchivedLeaderRecoveryState::Recovered => LeaderRecoveryState::Recovered,
            ArchivedLeaderRecoveryState::Recovering => LeaderRecoveryState::Recovering,
        }
    }
}

/// The full state of one partition (Kafka's PartitionRecord v1, without reassignment, which
/// corum does not implement), for a partition without eligible leader replicas (see
/// [`PartitionRecordV3`] for one with them). `directories` holds the log
/// directory of each replica, in replica order; an empty list means every replica's is
/// [`crate::ids::MIGRATING_DIR`] (as Kafka reads a PartitionRecord without directories).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PartitionRecordV2 {
    pub topic_id: TopicId,
    pub partition_id: PartitionId,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    pub leader: Option<NodeId>,
    pub leader_recovery_state: LeaderRecoveryState,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    pub directories: Vec<Uuid>,
}

/// The leader field of a [`PartitionChangeRecordV1`] (Kafka's -2, -1 or a broker id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug, PartialEq, Eq))]
pub enum LeaderChange {
    /// The leader stays, and so does the leader epoch (Kafka: -2).
    Unchanged,
    /// The partition has no leader now (Kafka: -1); the leader epoch grows by one.
    NoLeader,
    /// The broker leads now, possibly the same one again; the leader epoch grows by one.
    Broker(NodeId),
}

/// One change to a partition (Kafka's PartitionChangeRecord v1, without reassignment) that
/// leaves the eligible leader replicas as they are (see [`PartitionChangeRecordV2`] for one that
/// changes them): every `None` field stays as it is. It carries no epochs: replay
/// grows the partition epoch by one for every such record, and the leader epoch by one exactly
/// when `leader` is not [`LeaderChange::Unchanged`] (Kafka's `PartitionRegistration.merge`),
/// so a broker replaying the same changes counts the same epochs.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PartitionChangeRecordV1 {
    pub topic_id: TopicId,
    pub partition_id: PartitionId,
    pub isr: Option<Vec<NodeId>>,
    pub leader: LeaderChange,
    /// New replicas, with `directories` for them (corum's controller never writes it: it does
    /// not reassign partitions).
    pub replicas: Option<Vec<NodeId>>,
    pub leader_recovery_state: Option<LeaderRecoveryState>,
    /// The new log directory of every replica, in replica order.
    pub directories: Option<Vec<Uuid>>,
}

/// The full state of one partition with its eligible leader replicas (Kafka's PartitionRecord
/// v2, KIP-966): [`PartitionRecordV2`]'s fields and
///
/// - `eligible_leader_replicas`: replicas outside the ISR that are safe leaders (they left an
///   ISR smaller than `min.insync.replicas`, which no high watermark moved past without them),
///   in broker id order, none in the ISR;
/// - `last_known_elr`: the leader the partition had when its ISR became empty (at most one: the
///   last resort of Kafka's "balanced recovery").
///
/// The controller writes it only for a partition that has either (a snapshot of one): others
/// are [`PartitionRecordV2`], which replays as this record with both lists empty.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PartitionRecordV3 {
    pub topic_id: TopicId,
    pub partition_id: PartitionId,
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    pub leader: Option<NodeId>,
    pub leader_recovery_state: LeaderRecoveryState,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    pub directories: Vec<Uuid>,
    pub eligible_leader_replicas: Vec<NodeId>,
    pub last_known_elr: Vec<NodeId>,
}

/// One change to a partition that also sets its eligible leader replicas or last known ELR
/// (Kafka's PartitionChangeRecord v2, KIP-966): [`PartitionChangeRecordV1`]'s fields, and the
/// two lists, each `None` when it stays as it is. The controller writes it only when one of the
/// two is set: every other change is a [`PartitionChangeRecordV1`], which replays as this record
/// with both `None`.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PartitionChangeRecordV2 {
    pub topic_id: TopicId,
    pub partition_id: PartitionId,
    pub isr: Option<Vec<NodeId>>,
    pub leader: LeaderChange,
    pub replicas: Option<Vec<NodeId>>,
    pub leader_recovery_state: Option<LeaderRecoveryState>,
    pub directories: Option<Vec<Uuid>>,
    pub eligible_leader_replicas: Option<Vec<NodeId>>,
    pub last_known_elr: Option<Vec<NodeId>>,
}

impl PartitionChangeRecordV2 {
    /// The same change without the two lists (what a [`PartitionChangeRecordV1`] says).
    pub fn without_elr(&self) -> PartitionChangeRecordV1 {
        PartitionChangeRecordV1 {
            topic_id: self.topic_id,
            partition_id: self.partition_id,
            isr: self.isr.clone(),
            leader: self.leader,
            replicas: self.replicas.clone(),
            leader_recovery_state: self.leader_recovery_state,
            directories: self.directories.clone(),
        }
    }
}

/// Clears the eligible leader replicas and last known ELR of every partition of the topic named
/// `topic_name`, or of every topic when it is empty (Kafka's ClearElrRecord, which its
/// controller writes when `min.insync.replicas` changes, with eligible leader replicas enabled).
/// Replay grows the partition epoch of each partition that had either, as a PartitionChange
/// setting both to empty would (Kafka's `removeTopicElrs`); the leader epoch stays.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ClearElrRecordV1 {
    pub topic_name: String,
}

/// An ACL was created (Kafka's AccessControlEntryRecord): Kafka's fields and int8 codes (see
/// [`crate::acl`] for the codes; replay refuses one that names no ACL value, or an id in use).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AccessControlEntryRecordV1 {
    pub id: Uuid,
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission_type: i8,
}

/// An ACL was removed (Kafka's RemoveAccessControlEntryRecord).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct RemoveAccessControlEntryRecordV1 {
    pub id: Uuid,
}

/// A user's SCRAM credential for one mechanism was set (Kafka's UserScramCredentialRecord):
/// the mechanism's Kafka code (1 SCRAM-SHA-256, 2 SCRAM-SHA-512), the salt, `StoredKey`,
/// `ServerKey` and the iterations (see [`crate::scram`]). It replaces the user's credential
/// for that mechanism; replay refuses an unknown mechanism, keys of another length than the
/// mechanism's hash, an empty salt or name, and iterations outside Kafka's 4096-16384.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct UserScramCredentialRecordV1 {
    pub name: String,
    pub mechanism: i8,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

/// A user's SCRAM credential for one mechanism was removed (Kafka's
/// RemoveUserScramCredentialRecord); replay refuses one that names no credential.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct RemoveUserScramCredentialRecordV1 {
    pub name: String,
    pub mechanism: i8,
}

/// Every metadata record. Append new variants (and new versions) at the end only; see the module
/// doc.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum MetadataRecord {
    RegisterBroker(RegisterBrokerRecordV1),
    UnregisterBroker(UnregisterBrokerRecordV1),
    FenceBroker(FenceBrokerRecordV1),
    UnfenceBroker(UnfenceBrokerRecordV1),
    BrokerRegistrationChange(BrokerRegistrationChangeRecordV1),
    Topic(TopicRecordV1),
    RemoveTopic(RemoveTopicRecordV1),
    Partition(PartitionRecordV1),
    PartitionLeaderChange(PartitionLeaderChangeRecordV1),
    PartitionIsrChange(PartitionIsrChangeRecordV1),
    Config(ConfigRecordV1),
    FeatureLevel(FeatureLevelRecordV1),
    ProducerIds(ProducerIdsRecordV1),
    NoOp(NoOpRecordV1),
    RegisterController(RegisterControllerRecordV1),
    // An archived record is as large as its largest variant and a batch is an array of them,
    // so a new variant larger than every one above would change the layout of every batch ever
    // written ([`ARCHIVED_RECORD_BYTES`] pins it): such a variant is boxed (archived as a
    // 4-byte relative pointer to its fields).
    RegisterBrokerV2(Box<RegisterBrokerRecordV2>),
    BrokerRegistrationChangeV2(BrokerRegistrationChangeRecordV2),
    PartitionV2(PartitionRecordV2),
    PartitionChange(PartitionChangeRecordV1),
    PartitionV3(Box<PartitionRecordV3>),
    PartitionChangeV2(Box<PartitionChangeRecordV2>),
    ClearElr(ClearElrRecordV1),
    AccessControlEntry(AccessControlEntryRecordV1),
    RemoveAccessControlEntry(RemoveAccessControlEntryRecordV1),
    UserScramCredential(UserScramCredentialRecordV1),
    RemoveUserScramCredential(RemoveUserScramCredentialRecordV1),
}

/// The size of one archived record (the largest variant's, with its tag): the stride of a
/// batch's record array. It must never change (see the variants' comment).
pub const ARCHIVED_RECORD_BYTES: usize = 72;

impl MetadataRecord {
    /// The record the controller writes for the partition state `r`: a [`PartitionRecordV2`]
    /// when it has no eligible leader replicas and no last known ELR, else a
    /// [`PartitionRecordV3`] (the oldest version that says it all, so a cluster that never
    /// enables eligible leader replicas writes the records it always did).
    pub fn partition(r: PartitionRecordV3) -> MetadataRecord {
        if !r.eligible_leader_replicas.is_empty() || !r.last_known_elr.is_empty() {
            return MetadataRecord::PartitionV3(Box::new(r));
        }
        MetadataRecord::PartitionV2(PartitionRecordV2 {
            topic_id: r.topic_id,
            partition_id: r.partition_id,
            replicas: r.replicas,
            isr: r.isr,
            leader: r.leader,
            leader_recovery_state: r.leader_recovery_state,
            leader_epoch: r.leader_epoch,
            partition_epoch: r.partition_epoch,
            directories: r.directories,
        })
    }

    /// The record the controller writes for the change `c`: a [`PartitionChangeRecordV1`] when
    /// it sets neither list, else a [`PartitionChangeRecordV2`] (as [`MetadataRecord::partition`]
    /// chooses).
    pub fn partition_change(c: PartitionChangeRecordV2) -> MetadataRecord {
        if c.eligible_leader_replicas.is_some() || c.last_known_elr.is_some() {
            return MetadataRecord::PartitionChangeV2(Box::new(c));
        }
        MetadataRecord::PartitionChange(c.without_elr())
    }

    /// The record's type name, for logs and scenario output.
    pub fn kind(&self) -> &'static str {
        match self {
            MetadataRecord::RegisterBroker(_) => "RegisterBroker",
            MetadataRecord::UnregisterBroker(_) => "UnregisterBroker",
            MetadataRecord::FenceBroker(_) => "FenceBroker",
            MetadataRecord::UnfenceBroker(_) => "UnfenceBroker",
            MetadataRecord::BrokerRegistrationChange(_) => "BrokerRegistrationChange",
            MetadataRecord::Topic(_) => "Topic",
            MetadataRecord::RemoveTopic(_) => "RemoveTopic",
            MetadataRecord::Partition(_) => "Partition",
            MetadataRecord::PartitionLeaderChange(_) => "PartitionLeaderChange",
            MetadataRecord::PartitionIsrChange(_) => "PartitionIsrChange",
            MetadataRecord::Config(_) => "Config",
            MetadataRecord::FeatureLevel(_) => "FeatureLevel",
            MetadataRecord::ProducerIds(_) => "ProducerIds",
            MetadataRecord::NoOp(_) => "NoOp",
            MetadataRecord::RegisterController(_) => "RegisterController",
            MetadataRecord::RegisterBrokerV2(_) => "RegisterBrokerV2",
            MetadataRecord::BrokerRegistrationChangeV2(_) => "BrokerRegistrationChangeV2",
            MetadataRecord::PartitionV2(_) => "PartitionV2",
            MetadataRecord::PartitionChange(_) => "PartitionChange",
            MetadataRecord::PartitionV3(_) => "PartitionV3",
            MetadataRecord::PartitionChangeV2(_) => "PartitionChangeV2",
            MetadataRecord::ClearElr(_) => "ClearElr",
            MetadataRecord::AccessControlEntry(_) => "AccessControlEntry",
            MetadataRecord::RemoveAccessControlEntry(_) => "RemoveAccessControlEntry",
            MetadataRecord::UserScramCredential(_) => "UserScramCredential",
            MetadataRecord::RemoveUserScramCredential(_) => "RemoveUserScramCredential",
        }
    }
}

/// An encoded batch: the rkyv payload of one log entry, 16-byte aligned.
pub type EncodedBatch = AlignedVec;

/// The archived form of a batch: a zero-copy view into the log bytes.
pub type ArchivedBatch = ArchivedVec<ArchivedMetadataRecord>;

/// Archives a batch of records as one rkyv payload (8-byte aligned, ready to frame).
pub fn encode_batch(records: &[MetadataRecord]) -> EncodedBatch {
    // Serialising owned in-memory values into a growable buffer cannot fail: rkyv only errors
    // on allocation failure or on sizes above its 32-bit relative pointers (a batch is capped far
    // below 2 GiB by `ControllerConfig::records_per_batch_max`).
    rkyv::to_bytes::<rancor::Error>(&BatchRef(records))
        .expect("archiving owned records into memory cannot fail")
}

/// A borrowed batch that archives exactly like `Vec<MetadataRecord>`, so encoding a slice does
/// not need an owned vector.
struct BatchRef<'a>(&'a [MetadataRecord]);

impl rkyv::Archive for BatchRef<'_> {
    type Archived = ArchivedBatch;
    type Resolver = rkyv::vec::VecResolver;

    fn resolve(&self, resolver: Self::Resolver, out: rkyv::Place<Self::Archived>) {
        ArchivedVec::resolve_from_slice(self.0, resolver, out);
    }
}

impl<S> rkyv::Serialize<S> for BatchRef<'_>
where
    S: rancor::Fallible + rkyv::ser::Allocator + rkyv::ser::Writer + ?Sized,
    MetadataRecord: rkyv::Serialize<S>,
{
    fn serialize(&self, serializer: &mut S) -> Result<Self::Resolver, S::Error> {
        ArchivedVec::<ArchivedMetadataRecord>::serialize_from_slice(self.0, serializer)
    }
}

/// A batch encoded part by part as its records arrive: what [`encode_batch`] makes of all of
/// them, byte for byte, with each record encoded once.
///
/// An rkyv batch is the records' bodies (strings, vectors) in record order, then the array of
/// fixed-size archived records pointing back into them, then the root. [`BatchBuilder::push`]
/// writes a part's bodies at once, at their final positions, and keeps each record with the
/// rkyv resolver (the positions of its bodies) that the array entry is later built from;
/// [`BatchBuilder::finish`] writes the array and the root. So the exact encoded length is
/// known after every part ([`BatchBuilder::encoded_len`]), and a part that would take the
/// batch over a limit is taken back out ([`BatchBuilder::push_within`]) before anything else
/// is written.
pub struct BatchBuilder {
    /// The bodies of `records`, in order, from position 0 of the batch.
    bytes: EncodedBatch,
    records: Vec<MetadataRecord>,
    /// `resolvers[i]` is what serializing `records[i]`'s bodies into `bytes` returned.
    resolvers: Vec<<MetadataRecord as rkyv::Archive>::Resolver>,
}

/// A part [`BatchBuilder::push_within`] gave back: with it the batch would have been
/// `encoded_len` bytes.
#[derive(Debug)]
pub struct PartTooLarge {
    pub records: Vec<MetadataRecord>,
    pub encoded_len: usize,
}

/// The serializer a [`BatchBuilder`] writes through: into its buffer, scratch space from
/// rkyv's arena, no shared pointers (records have none).
type BuilderSerializer<'a, 'b> = rancor::Strategy<
    rkyv::ser::Serializer<
        &'a mut EncodedBatch,
        rkyv::ser::allocator::ArenaHandle<'b>,
        rkyv::ser::sharing::Unshare,
    >,
    rancor::Error,
>;

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder::new()
    }
}

/// What [`BatchBuilder::with_capacity`] reserves per record for its bodies: a config
/// record's resource name, key and value, a broker heartbeat's few fields.
const BODY_BYTES_PER_RECORD_EXPECTED: usize = 64;

impl BatchBuilder {
    pub fn new() -> BatchBuilder {
        BatchBuilder::with_capacity(0)
    }

    /// A builder with room for `records` records (their bodies at a usual size, and the array
    /// of archived records [`BatchBuilder::finish`] writes) before it grows: a batch of
    /// hundreds of writes then grows none of its buffers on the way. Room for none allocates
    /// nothing.
    pub fn with_capacity(records: usize) -> BatchBuilder {
        let per_record =
            BODY_BYTES_PER_RECORD_EXPECTED + std::mem::size_of::<ArchivedMetadataRecord>();
        BatchBuilder {
            bytes: EncodedBatch::with_capacity(records * per_record),
            records: Vec::with_capacity(records),
            resolvers: Vec::with_capacity(records),
        }
    }

    /// The records pushed so far, in order.
    pub fn records(&self) -> &[MetadataRecord] {
        &self.records
    }

    /// How many records were pushed.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The length of the batch [`BatchBuilder::finish`] would produce now: the bodies, the
    /// array of archived records (aligned) and the root (aligned).
    pub fn encoded_len(&self) -> usize {
        let array_at = self
            .bytes
            .len()
            .next_multiple_of(std::mem::align_of::<ArchivedMetadataRecord>());
        let array_end =
            array_at + self.records.len() * std::mem::size_of::<ArchivedMetadataRecord>();
        array_end.next_multiple_of(std::mem::align_of::<ArchivedBatch>())
            + std::mem::size_of::<ArchivedBatch>()
    }

    /// Appends `records`, encoding their bodies now.
    pub fn push(&mut self, records: Vec<MetadataRecord>) {
        let bytes = &mut self.bytes;
        let resolvers = &mut self.resolvers;
        rkyv::util::with_arena(|arena| {
            let mut serializer =
                rkyv::ser::Serializer::new(bytes, arena.acquire(), rkyv::ser::sharing::Unshare);
            let s: &mut BuilderSerializer<'_, '_> = rancor::Strategy::wrap(&mut serializer);
            for r in &records {
                // As in `encode_batch`: writing owned values into memory cannot fail.
                let resolver = rkyv::Serialize::serialize(r, s)
                    .expect("archiving owned records into memory cannot fail");
                resolvers.push(resolver);
            }
        });
        self.records.extend(records);
    }

    /// Appends `records` if the batch then stays within `bytes_max` encoded bytes; otherwise
    /// gives them back, with the batch as it was (their bodies' bytes dropped).
    pub fn push_within(
        &mut self,
        records: Vec<MetadataRecord>,
        bytes_max: usize,
    ) -> Result<(), PartTooLarge> {
        let (bytes_before, records_before) = (self.bytes.len(), self.records.len());
        self.push(records);
        let encoded_len = self.encoded_len();
        if encoded_len <= bytes_max {
            return Ok(());
        }
        self.bytes.resize(bytes_before, 0);
        self.resolvers.truncate(records_before);
        Err(PartTooLarge {
            records: self.records.split_off(records_before),
            encoded_len,
        })
    }

    /// The encoded batch: exactly [`encode_batch`] of [`BatchBuilder::records`].
    pub fn finish(self) -> EncodedBatch {
        use rkyv::ser::WriterExt;
        let BatchBuilder {
            mut bytes,
            records,
            resolvers,
        } = self;
        assert_eq!(records.len(), resolvers.len(), "one resolver per record");
        rkyv::util::with_arena(|arena| {
            let mut serializer = rkyv::ser::Serializer::new(
                &mut bytes,
                arena.acquire(),
                rkyv::ser::sharing::Unshare,
            );
            let s: &mut BuilderSerializer<'_, '_> = rancor::Strategy::wrap(&mut serializer);
            let write = |s: &mut BuilderSerializer<'_, '_>| -> Result<(), rancor::Error> {
                let array_at = s.align_for::<ArchivedMetadataRecord>()?;
                for (r, resolver) in records.iter().zip(resolvers) {
                    // SAFETY: `resolver` is what serializing `r`'s bodies into these bytes
                    // returned (`push` keeps them pairwise, `push_within` drops both), and
                    // the position is aligned for an archived record just above; each entry
                    // is a whole archived record, so the next one stays aligned.
                    unsafe { s.resolve_aligned(r, resolver)? };
                }
                s.align_for::<ArchivedBatch>()?;
                // SAFETY: the root of a vector is resolved from the position of its array,
                // written just above, and the position is aligned for it.
                unsafe {
                    s.resolve_aligned(
                        &BatchRef(&records),
                        rkyv::vec::VecResolver::from_pos(array_at),
                    )?
                };
                Ok(())
            };
            write(s).expect("archiving owned records into memory cannot fail");
        });
        bytes
    }
}

/// Bytes aligned for [`decode_batch`]: borrowed when they already are (payload allocations
/// normally are), else an aligned copy ([`aligned`]).
pub enum Aligned<'a> {
    Borrowed(&'a [u8]),
    Copied(AlignedVec<16>),
}

impl std::ops::Deref for Aligned<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Aligned::Borrowed(b) => b,
            Aligned::Copied(v) => v,
        }
    }
}

/// `bytes` as [`decode_batch`] needs them: as they are if aligned, else copied once.
pub fn aligned(bytes: &[u8]) -> Aligned<'_> {
    if (bytes.as_ptr() as usize) % std::mem::align_of::<ArchivedBatch>() == 0 {
        Aligned::Borrowed(bytes)
    } else {
        let mut v = AlignedVec::<16>::with_capacity(bytes.len());
        v.extend_from_slice(bytes);
        Aligned::Copied(v)
    }
}

/// Validates untrusted bytes as a batch and returns a zero-copy view of it.
///
/// Rejects misaligned buffers, truncated or oversized payloads, bad relative pointers, bad enum
/// tags, invalid UTF-8 and invalid bools. Never panics.
pub fn decode_batch(bytes: &[u8]) -> Result<&ArchivedBatch, DecodeError> {
    if bytes.len() < std::mem::size_of::<ArchivedBatch>() {
        return Err(DecodeError::Truncated {
            len_bytes: bytes.len(),
        });
    }
    if (bytes.as_ptr() as usize) % std::mem::align_of::<ArchivedBatch>() != 0 {
        return Err(DecodeError::Misaligned {
            address: bytes.as_ptr() as usize,
        });
    }
    rkyv::access::<ArchivedBatch, rancor::Error>(bytes).map_err(|e| DecodeError::Invalid {
        reason: e.to_string(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One record of every kind, with every optional field set at least once.
    pub(crate) fn one_of_each() -> Vec<MetadataRecord> {
        let t = TopicId(Uuid([7; 16]));
        vec![
            MetadataRecord::RegisterBroker(RegisterBrokerRecordV1 {
                broker_id: NodeId(1),
                incarnation_id: Uuid([1; 16]),
                broker_epoch: BrokerEpoch(10),
                listeners: vec![ListenerV1 {
                    name: "PLAINTEXT".into(),
                    host: "h1".into(),
                    port: 9092,
                }],
                features: vec![SupportedFeatureV1 {
                    name: "metadata.version".into(),
                    min_level: 1,
                    max_level: 3,
                }],
                rack: Some("a".into()),
            }),
            MetadataRecord::UnregisterBroker(UnregisterBrokerRecordV1 {
                broker_id: NodeId(2),
                broker_epoch: BrokerEpoch(11),
            }),
            MetadataRecord::FenceBroker(FenceBrokerRecordV1 {
                broker_id: NodeId(1),
                broker_epoch: BrokerEpoch(10),
            }),
            MetadataRecord::UnfenceBroker(UnfenceBrokerRecordV1 {
                broker_id: NodeId(1),
                broker_epoch: BrokerEpoch(10),
            }),
            MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecordV1 {
                broker_id: NodeId(1),
                broker_epoch: BrokerEpoch(10),
                in_controlled_shutdown: true,
            }),
            MetadataRecord::Topic(TopicRecordV1 {
                name: "orders".into(),
                topic_id: t,
                deleting: false,
            }),
            MetadataRecord::RemoveTopic(RemoveTopicRecordV1 { topic_id: t }),
            MetadataRecord::Partition(PartitionRecordV1 {
                topic_id: t,
                partition_id: PartitionId(0),
                replicas: vec![NodeId(1), NodeId(2), NodeId(3)],
                isr: vec![NodeId(1), NodeId(2)],
                leader: Some(NodeId(1)),
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(0),
            }),
            MetadataRecord::PartitionLeaderChange(PartitionLeaderChangeRecordV1 {
                topic_id: t,
                partition_id: PartitionId(0),
                leader: None,
                leader_epoch: LeaderEpoch(1),
                partition_epoch: PartitionEpoch(1),
            }),
            MetadataRecord::PartitionIsrChange(PartitionIsrChangeRecordV1 {
                topic_id: t,
                partition_id: PartitionId(0),
                isr: vec![NodeId(2)],
                partition_epoch: PartitionEpoch(2),
            }),
            MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Topic,
                resource_name: "orders".into(),
                key: "retention.ms".into(),
                value: Some("1000".into()),
            }),
            MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Broker,
                resource_name: String::new(),
                key: "log.retention.ms".into(),
                value: None,
            }),
            MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                name: "metadata.version".into(),
                min_level: 1,
                max_level: 2,
            }),
            MetadataRecord::ProducerIds(ProducerIdsRecordV1 {
                broker_id: NodeId(1),
                broker_epoch: BrokerEpoch(10),
                next_producer_id: 1000,
            }),
            MetadataRecord::NoOp(NoOpRecordV1 {}),
        ]
    }

    /// Records appended to [`MetadataRecord`] after the first V1 set, one of each, in variant
    /// order. The golden file pins each alone in a batch, after the first set's batch, so the
    /// first set's lines never change.
    pub(crate) fn appended() -> Vec<MetadataRecord> {
        let t = TopicId(Uuid([7; 16]));
        let dir = |b: u8| Uuid([b; 16]);
        vec![
            MetadataRecord::RegisterController(RegisterControllerRecordV1 {
                controller_id: NodeId(3000),
                incarnation_id: Uuid([0x33; 16]),
                end_points: vec![
                    ControllerEndpointV1 {
                        name: "CONTROLLER".into(),
                        host: "c3.example".into(),
                        port: 9093,
                        security_protocol: SecurityProtocol::Plaintext as i16,
                    },
                    ControllerEndpointV1 {
                        name: "KAFKA".into(),
                        host: "c3.example".into(),
                        port: 9092,
                        security_protocol: SecurityProtocol::SaslSsl as i16,
                    },
                ],
                features: vec![SupportedFeatureV1 {
                    name: "metadata.version".into(),
                    min_level: 7,
                    max_level: 27,
                }],
            }),
            MetadataRecord::RegisterBrokerV2(Box::new(RegisterBrokerRecordV2 {
                broker_id: NodeId(4),
                incarnation_id: Uuid([0x44; 16]),
                broker_epoch: BrokerEpoch(40),
                endpoints: vec![BrokerEndpointV1 {
                    name: "SASL".into(),
                    host: "b4.example".into(),
                    port: 9094,
                    security_protocol: SecurityProtocol::SaslSsl as i16,
                }],
                features: vec![SupportedFeatureV1 {
                    name: "metadata.version".into(),
                    min_level: 7,
                    max_level: 27,
                }],
                rack: Some("r4".into()),
                fenced: true,
                in_controlled_shutdown: false,
                log_dirs: vec![dir(0x41), dir(0x42)],
            })),
            MetadataRecord::BrokerRegistrationChangeV2(BrokerRegistrationChangeRecordV2 {
                broker_id: NodeId(4),
                broker_epoch: BrokerEpoch(40),
                fenced: FencingChange::Unfence,
                in_controlled_shutdown: true,
            }),
            MetadataRecord::PartitionV2(PartitionRecordV2 {
                topic_id: t,
                partition_id: PartitionId(1),
                replicas: vec![NodeId(4), NodeId(5)],
                isr: vec![NodeId(4)],
                leader: Some(NodeId(4)),
                leader_recovery_state: LeaderRecoveryState::Recovering,
                leader_epoch: LeaderEpoch(3),
                partition_epoch: PartitionEpoch(9),
                directories: vec![dir(0x41), crate::ids::UNASSIGNED_DIR],
            }),
            MetadataRecord::PartitionChange(PartitionChangeRecordV1 {
                topic_id: t,
                partition_id: PartitionId(1),
                isr: Some(vec![NodeId(4), NodeId(5)]),
                leader: LeaderChange::Broker(NodeId(5)),
                replicas: None,
                leader_recovery_state: Some(LeaderRecoveryState::Recovered),
                directories: Some(vec![dir(0x41), dir(0x51)]),
            }),
            MetadataRecord::PartitionChange(PartitionChangeRecordV1 {
                topic_id: t,
                partition_id: PartitionId(1),
                isr: None,
                leader: LeaderChange::NoLeader,
                replicas: Some(vec![NodeId(5), NodeId(4), NodeId(6)]),
                leader_recovery_state: None,
                directories: None,
            }),
            MetadataRecord::PartitionV3(Box::new(PartitionRecordV3 {
                topic_id: t,
                partition_id: PartitionId(2),
                replicas: vec![NodeId(4), NodeId(5), NodeId(6)],
                isr: vec![],
                leader: None,
                leader_recovery_state: LeaderRecoveryState::Recovered,
                leader_epoch: LeaderEpoch(6),
                partition_epoch: PartitionEpoch(11),
                directories: vec![dir(0x41), dir(0x51), dir(0x61)],
                eligible_leader_replicas: vec![NodeId(5), NodeId(6)],
                last_known_elr: vec![NodeId(4)],
            })),
            MetadataRecord::PartitionChangeV2(Box::new(PartitionChangeRecordV2 {
                topic_id: t,
                partition_id: PartitionId(2),
                isr: Some(vec![]),
                leader: LeaderChange::NoLeader,
                replicas: None,
                leader_recovery_state: None,
                directories: None,
                eligible_leader_replicas: Some(vec![NodeId(5), NodeId(6)]),
                last_known_elr: Some(vec![NodeId(4)]),
            })),
            MetadataRecord::PartitionChangeV2(Box::new(PartitionChangeRecordV2 {
                topic_id: t,
                partition_id: PartitionId(2),
                isr: Some(vec![NodeId(5)]),
                leader: LeaderChange::Broker(NodeId(5)),
                replicas: None,
                leader_recovery_state: Some(LeaderRecoveryState::Recovered),
                directories: Some(vec![dir(0x41), dir(0x52), dir(0x61)]),
                eligible_leader_replicas: Some(vec![NodeId(6)]),
                last_known_elr: None,
            })),
            MetadataRecord::ClearElr(ClearElrRecordV1 {
                topic_name: "orders".into(),
            }),
            MetadataRecord::ClearElr(ClearElrRecordV1 {
                topic_name: String::new(),
            }),
            MetadataRecord::AccessControlEntry(AccessControlEntryRecordV1 {
                id: Uuid([0x71; 16]),
                resource_type: 2,
                resource_name: "payments-".into(),
                pattern_type: 4,
                principal: "User:alice".into(),
                host: "*".into(),
                operation: 4,
                permission_type: 3,
            }),
            MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecordV1 {
                id: Uuid([0x71; 16]),
            }),
            MetadataRecord::UserScramCredential(UserScramCredentialRecordV1 {
                name: "alice".into(),
                mechanism: 1,
                salt: vec![0x5a; 16],
                stored_key: vec![0x3c; 32],
                server_key: vec![0x4d; 32],
                iterations: 8192,
            }),
            MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecordV1 {
                name: "alice".into(),
                mechanism: 1,
            }),
        ]
    }

    /// Every kind of record: the first set and the appended ones.
    fn all_kinds() -> Vec<MetadataRecord> {
        let mut all = one_of_each();
        all.extend(appended());
        all
    }

    fn to_hex(bytes: &[u8]) -> String {
        let mut s = String::new();
        for (i, chunk) in bytes.chunks(32).enumerate() {
            s.push_str(&format!("{:06x}:", i * 32));
            for b in chunk {
                s.push_str(&format!(" {b:02x}"));
            }
            s.push('\n');
        }
        s
    }

    /// The bytes of one of each V1 record are exactly those pinned in the golden file, so any
    /// change to the record format shows up as a test failure (rewrite with CORUM_REWRITE=1).
    #[test]
    fn golden_bytes_of_v1_records() {
        let bytes = encode_batch(&one_of_each());
        let mut hex = to_hex(&bytes);
        for r in appended() {
            hex.push_str(&format!("# {}, alone in a batch\n", r.kind()));
            hex.push_str(&to_hex(&encode_batch(std::slice::from_ref(&r))));
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/records_v1.golden");
        if corum_types::golden::rewrite_requested() {
            std::fs::write(path, &hex).unwrap();
        }
        let golden =
            std::fs::read_to_string(path).expect("golden file exists (CORUM_REWRITE=1 creates it)");
        assert_eq!(
            hex, golden,
            "record format changed: review and rewrite with CORUM_REWRITE=1"
        );
        // And the golden bytes still decode to the same records.
        let batch = decode_batch(&bytes).unwrap();
        let back: Vec<MetadataRecord> =
            rkyv::deserialize::<Vec<MetadataRecord>, rancor::Error>(batch).unwrap();
        assert_eq!(back, one_of_each());
        for r in appended() {
            let bytes = encode_batch(std::slice::from_ref(&r));
            let back: Vec<MetadataRecord> =
                rkyv::deserialize::<Vec<MetadataRecord>, rancor::Error>(
                    decode_batch(&bytes).unwrap(),
                )
                .unwrap();
            assert_eq!(back, vec![r]);
        }
    }

    /// Encoding then decoding gives back the same records, and the tag order is the variant order.
    #[test]
    fn round_trip_and_tags() {
        let recs = one_of_each();
        let bytes = encode_batch(&recs);
        let batch = decode_batch(&bytes).unwrap();
        assert_eq!(batch.len(), recs.len());
        assert!(matches!(
            batch[0],
            ArchivedMetadataRecord::RegisterBroker(_)
        ));
        assert!(matches!(
            batch[recs.len() - 1],
            ArchivedMetadataRecord::NoOp(_)
        ));
        // The appended variants take the tags after NoOp's (13), in order.
        let bytes = encode_batch(&appended());
        let batch = decode_batch(&bytes).unwrap();
        assert!(matches!(
            batch[0],
            ArchivedMetadataRecord::RegisterController(_)
        ));
        let all = all_kinds();
        let kinds: std::collections::BTreeSet<&str> =
            all.iter().map(MetadataRecord::kind).collect();
        assert_eq!(kinds.len(), 26, "a record of each of the 26 kinds");
        let empty = encode_batch(&[]);
        assert_eq!(decode_batch(&empty).unwrap().len(), 0);
    }

    /// A partition state or change without eligible leader replicas or last known ELR is
    /// written as the older record (the bytes a cluster without them always wrote); with
    /// either, as the new one; and the new one without its lists says what the old one says.
    #[test]
    fn partition_records_take_the_oldest_version_that_says_it_all() {
        let t = TopicId(Uuid([7; 16]));
        let state = |elr: Vec<NodeId>, last_known_elr: Vec<NodeId>| PartitionRecordV3 {
            topic_id: t,
            partition_id: PartitionId(0),
            replicas: vec![NodeId(1), NodeId(2)],
            isr: vec![NodeId(1)],
            leader: Some(NodeId(1)),
            leader_recovery_state: LeaderRecoveryState::Recovered,
            leader_epoch: LeaderEpoch(1),
            partition_epoch: PartitionEpoch(2),
            directories: vec![],
            eligible_leader_replicas: elr,
            last_known_elr,
        };
        assert!(matches!(
            MetadataRecord::partition(state(vec![], vec![])),
            MetadataRecord::PartitionV2(PartitionRecordV2 {
                partition_epoch: PartitionEpoch(2),
                ..
            })
        ));
        for (elr, lke) in [(vec![NodeId(2)], vec![]), (vec![], vec![NodeId(2)])] {
            let r = state(elr, lke);
            assert_eq!(
                MetadataRecord::partition(r.clone()),
                MetadataRecord::PartitionV3(Box::new(r))
            );
        }
        let change = |elr: Option<Vec<NodeId>>, last_known_elr: Option<Vec<NodeId>>| {
            PartitionChangeRecordV2 {
                topic_id: t,
                partition_id: PartitionId(0),
                isr: Some(vec![NodeId(1)]),
                leader: LeaderChange::Unchanged,
                replicas: None,
                leader_recovery_state: None,
                directories: None,
                eligible_leader_replicas: elr,
                last_known_elr,
            }
        };
        let plain = change(None, None);
        assert_eq!(
            MetadataRecord::partition_change(plain.clone()),
            MetadataRecord::PartitionChange(plain.without_elr())
        );
        // An empty list is a change (it clears them), so it needs the new version.
        for (elr, lke) in [(Some(vec![]), None), (None, Some(vec![NodeId(2)]))] {
            let c = change(elr, lke);
            assert_eq!(
                MetadataRecord::partition_change(c.clone()),
                MetadataRecord::PartitionChangeV2(Box::new(c))
            );
        }
    }

    /// An archived record is exactly as large as it always was: a batch is an array of them,
    /// so a variant that outgrows the old ones would move every record of every old batch.
    #[test]
    fn archived_record_size_never_changes() {
        assert_eq!(
            std::mem::size_of::<ArchivedMetadataRecord>(),
            ARCHIVED_RECORD_BYTES
        );
    }

    /// Kafka's security protocol codes map to their names and back; other codes name none.
    #[test]
    fn security_protocols_are_kafkas_codes() {
        let names: Vec<&str> = (0..4)
            .map(|c| {
                let p = SecurityProtocol::from_code(c).expect("a Kafka code");
                assert_eq!(p as i16, c);
                p.name()
            })
            .collect();
        assert_eq!(names, ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]);
        assert_eq!(SecurityProtocol::from_code(-1), None);
        assert_eq!(SecurityProtocol::from_code(4), None);
    }

    /// Short and misaligned inputs are rejected with a precise error.
    #[test]
    fn rejects_short_and_misaligned() {
        assert!(matches!(
            decode_batch(&[]),
            Err(DecodeError::Truncated { .. })
        ));
        let bytes = encode_batch(&one_of_each());
        let mut shifted = AlignedVec::<16>::new();
        shifted.push(0);
        shifted.extend_from_slice(&bytes);
        assert!(matches!(
            decode_batch(&shifted[1..]),
            Err(DecodeError::Misaligned { .. })
        ));
        // `aligned` copies such bytes once (and borrows aligned ones): then they decode.
        assert!(matches!(aligned(&shifted[1..]), Aligned::Copied(_)));
        assert_eq!(
            decode_batch(&aligned(&shifted[1..])).unwrap().len(),
            one_of_each().len()
        );
        assert!(matches!(aligned(&bytes), Aligned::Borrowed(_)));
    }

    /// Records of every kind with strings of 0 to 20 bytes (short ones are stored inline by
    /// rkyv, longer ones out of line) and vectors of 0 to 5 items, so bodies of every length
    /// and alignment meet.
    fn any_record() -> impl Strategy<Value = MetadataRecord> {
        let text = || "[a-z.]{0,20}";
        let nodes = || proptest::collection::vec((0..9u32).prop_map(NodeId), 0..5);
        let topic_id = || any::<[u8; 16]>().prop_map(|b| TopicId(Uuid(b)));
        prop_oneof![
            (
                text(),
                proptest::collection::vec((text(), text(), any::<u16>()), 0..3),
                proptest::collection::vec(text(), 0..3),
                proptest::option::of(text())
            )
                .prop_map(|(host, listeners, features, rack)| {
                    MetadataRecord::RegisterBroker(RegisterBrokerRecordV1 {
                        broker_id: NodeId(host.len() as u32),
                        incarnation_id: Uuid([3; 16]),
                        broker_epoch: BrokerEpoch(7),
                        listeners: listeners
                            .into_iter()
                            .map(|(name, host, port)| ListenerV1 { name, host, port })
                            .collect(),
                        features: features
                            .into_iter()
                            .map(|name| SupportedFeatureV1 {
                                name,
                                min_level: 1,
                                max_level: 2,
                            })
                            .collect(),
                        rack,
                    })
                }),
            (text(), topic_id(), any::<bool>()).prop_map(|(name, topic_id, deleting)| {
                MetadataRecord::Topic(TopicRecordV1 {
                    name,
                    topic_id,
                    deleting,
                })
            }),
            (topic_id(), nodes(), nodes(), proptest::option::of(0..9u32)).prop_map(
                |(topic_id, replicas, isr, leader)| {
                    MetadataRecord::Partition(PartitionRecordV1 {
                        topic_id,
                        partition_id: PartitionId(replicas.len() as u32),
                        replicas,
                        isr,
                        leader: leader.map(NodeId),
                        leader_epoch: LeaderEpoch(1),
                        partition_epoch: PartitionEpoch(2),
                    })
                }
            ),
            (topic_id(), nodes()).prop_map(|(topic_id, isr)| {
                MetadataRecord::PartitionIsrChange(PartitionIsrChangeRecordV1 {
                    topic_id,
                    partition_id: PartitionId(0),
                    isr,
                    partition_epoch: PartitionEpoch(3),
                })
            }),
            (any::<bool>(), text(), text(), proptest::option::of(text())).prop_map(
                |(topic, resource_name, key, value)| {
                    MetadataRecord::Config(ConfigRecordV1 {
                        resource_type: if topic {
                            ConfigResourceType::Topic
                        } else {
                            ConfigResourceType::Broker
                        },
                        resource_name,
                        key,
                        value,
                    })
                }
            ),
            (text(), any::<u16>()).prop_map(|(name, max_level)| {
                MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                    name,
                    min_level: 1,
                    max_level,
                })
            }),
            Just(MetadataRecord::NoOp(NoOpRecordV1 {})),
            (
                any::<[u8; 16]>(),
                (text(), text(), text()),
                any::<[i8; 4]>()
            )
                .prop_map(|(id, (resource_name, principal, host), codes)| {
                    MetadataRecord::AccessControlEntry(AccessControlEntryRecordV1 {
                        id: Uuid(id),
                        resource_type: codes[0],
                        resource_name,
                        pattern_type: codes[1],
                        principal,
                        host,
                        operation: codes[2],
                        permission_type: codes[3],
                    })
                }),
            (
                any::<u32>(),
                proptest::collection::vec((text(), text(), any::<u16>(), any::<i16>()), 0..3),
                proptest::collection::vec((text(), any::<u16>(), any::<u16>()), 0..3),
            )
                .prop_map(|(id, end_points, features)| {
                    MetadataRecord::RegisterController(RegisterControllerRecordV1 {
                        controller_id: NodeId(id),
                        incarnation_id: Uuid([id as u8; 16]),
                        end_points: end_points
                            .into_iter()
                            .map(
                                |(name, host, port, security_protocol)| ControllerEndpointV1 {
                                    name,
                                    host,
                                    port,
                                    security_protocol,
                                },
                            )
                            .collect(),
                        features: features
                            .into_iter()
                            .map(|(name, min_level, max_level)| SupportedFeatureV1 {
                                name,
                                min_level,
                                max_level,
                            })
                            .collect(),
                    })
                }),
            (0..9u32).prop_map(|b| MetadataRecord::FenceBroker(FenceBrokerRecordV1 {
                broker_id: NodeId(b),
                broker_epoch: BrokerEpoch(u64::from(b)),
            })),
            (
                text(),
                proptest::collection::vec((text(), text(), any::<u16>(), any::<i16>()), 0..3),
                proptest::option::of(text()),
                any::<(bool, bool)>(),
                proptest::collection::vec(any::<[u8; 16]>().prop_map(Uuid), 0..3),
            )
                .prop_map(|(name, endpoints, rack, (fenced, shutdown), log_dirs)| {
                    MetadataRecord::RegisterBrokerV2(Box::new(RegisterBrokerRecordV2 {
                        broker_id: NodeId(name.len() as u32),
                        incarnation_id: Uuid([5; 16]),
                        broker_epoch: BrokerEpoch(8),
                        endpoints: endpoints
                            .into_iter()
                            .map(|(name, host, port, security_protocol)| BrokerEndpointV1 {
                                name,
                                host,
                                port,
                                security_protocol,
                            })
                            .collect(),
                        features: vec![SupportedFeatureV1 {
                            name,
                            min_level: 0,
                            max_level: 1,
                        }],
                        rack,
                        fenced,
                        in_controlled_shutdown: shutdown,
                        log_dirs,
                    }))
                }),
            (0..9u32, 0..3u8, any::<bool>()).prop_map(|(b, f, shutdown)| {
                MetadataRecord::BrokerRegistrationChangeV2(BrokerRegistrationChangeRecordV2 {
                    broker_id: NodeId(b),
                    broker_epoch: BrokerEpoch(3),
                    fenced: [
                        FencingChange::Unchanged,
                        FencingChange::Fence,
                        FencingChange::Unfence,
                    ][usize::from(f)],
                    in_controlled_shutdown: shutdown,
                })
            }),
            (topic_id(), nodes(), nodes(), any::<bool>()).prop_map(
                |(topic_id, replicas, isr, recovering)| {
                    MetadataRecord::PartitionV2(PartitionRecordV2 {
                        topic_id,
                        partition_id: PartitionId(isr.len() as u32),
                        directories: replicas.iter().map(|b| Uuid([b.0 as u8; 16])).collect(),
                        leader: replicas.first().copied(),
                        replicas,
                        isr,
                        leader_recovery_state: if recovering {
                            LeaderRecoveryState::Recovering
                        } else {
                            LeaderRecoveryState::Recovered
                        },
                        leader_epoch: LeaderEpoch(4),
                        partition_epoch: PartitionEpoch(5),
                    })
                }
            ),
            (
                topic_id(),
                proptest::option::of(nodes()),
                0..3u8,
                proptest::option::of(nodes()),
                proptest::option::of(any::<bool>()),
            )
                .prop_map(|(topic_id, isr, leader, replicas, recovering)| {
                    MetadataRecord::PartitionChange(PartitionChangeRecordV1 {
                        topic_id,
                        partition_id: PartitionId(2),
                        directories: replicas
                            .as_ref()
                            .map(|r| r.iter().map(|b| Uuid([b.0 as u8; 16])).collect()),
                        isr,
                        leader: match leader {
                            0 => LeaderChange::Unchanged,
                            1 => LeaderChange::NoLeader,
                            _ => LeaderChange::Broker(NodeId(7)),
                        },
                        replicas,
                        leader_recovery_state: recovering.map(|r| {
                            if r {
                                LeaderRecoveryState::Recovering
                            } else {
                                LeaderRecoveryState::Recovered
                            }
                        }),
                    })
                }),
            (topic_id(), nodes(), nodes(), nodes(), nodes()).prop_map(
                |(topic_id, replicas, isr, elr, last_known_elr)| {
                    MetadataRecord::PartitionV3(Box::new(PartitionRecordV3 {
                        topic_id,
                        partition_id: PartitionId(elr.len() as u32),
                        directories: replicas.iter().map(|b| Uuid([b.0 as u8; 16])).collect(),
                        leader: isr.first().copied(),
                        replicas,
                        isr,
                        leader_recovery_state: LeaderRecoveryState::Recovered,
                        leader_epoch: LeaderEpoch(7),
                        partition_epoch: PartitionEpoch(8),
                        eligible_leader_replicas: elr,
                        last_known_elr,
                    }))
                }
            ),
            (
                topic_id(),
                proptest::option::of(nodes()),
                proptest::option::of(nodes()),
                proptest::option::of(nodes()),
            )
                .prop_map(|(topic_id, isr, elr, last_known_elr)| {
                    MetadataRecord::PartitionChangeV2(Box::new(PartitionChangeRecordV2 {
                        topic_id,
                        partition_id: PartitionId(3),
                        isr,
                        leader: LeaderChange::NoLeader,
                        replicas: None,
                        leader_recovery_state: None,
                        directories: None,
                        eligible_leader_replicas: elr,
                        last_known_elr,
                    }))
                }),
            text().prop_map(|topic_name| MetadataRecord::ClearElr(ClearElrRecordV1 { topic_name })),
        ]
    }

    /// The parts of a batch: each a few records.
    fn parts() -> impl Strategy<Value = Vec<Vec<MetadataRecord>>> {
        proptest::collection::vec(proptest::collection::vec(any_record(), 0..6), 0..12)
    }

    /// An empty builder finishes as the empty batch.
    #[test]
    fn an_empty_builder_is_the_empty_batch() {
        let b = BatchBuilder::new();
        assert_eq!(b.encoded_len(), encode_batch(&[]).len());
        assert_eq!(&b.finish()[..], &encode_batch(&[])[..]);
    }

    proptest! {
        /// A batch built part by part is byte for byte `encode_batch` of all its records, and
        /// `encoded_len` is its exact length after every part.
        #[test]
        fn built_batches_are_encode_batch(parts in parts()) {
            let mut b = BatchBuilder::new();
            let mut all = Vec::new();
            for part in parts {
                all.extend(part.iter().cloned());
                b.push(part);
                prop_assert_eq!(b.records(), &all[..]);
                prop_assert_eq!(b.encoded_len(), encode_batch(&all).len());
            }
            let built = b.finish();
            prop_assert_eq!(&built[..], &encode_batch(&all)[..]);
            prop_assert_eq!(decode_batch(&built).unwrap().len(), all.len());
        }

        /// Parts pushed within a byte limit: a refused part leaves the batch exactly as it
        /// was (the batch goes on as if it had never been offered) and reports the length the
        /// batch would have had; what is accepted never takes the batch over the limit; and a
        /// part that fits after others fits alone (records never encode shorter after others),
        /// which is why a group refuses by a part's length alone only when it is empty.
        #[test]
        fn parts_within_a_limit(parts in parts(), bytes_max in 8usize..2_000) {
            let mut b = BatchBuilder::new();
            let mut accepted = Vec::new();
            for part in parts {
                let before = b.encoded_len();
                let alone = encode_batch(&part).len();
                let mut with = accepted.clone();
                with.extend(part.iter().cloned());
                match b.push_within(part.clone(), bytes_max) {
                    Ok(()) => {
                        prop_assert!(b.encoded_len() <= bytes_max);
                        prop_assert!(alone <= b.encoded_len());
                        accepted = with;
                    }
                    Err(refused) => {
                        prop_assert_eq!(&refused.records, &part);
                        prop_assert_eq!(refused.encoded_len, encode_batch(&with).len());
                        prop_assert!(refused.encoded_len > bytes_max);
                        prop_assert_eq!(b.encoded_len(), before);
                    }
                }
                prop_assert_eq!(b.records(), &accepted[..]);
            }
            let built = b.finish();
            prop_assert!(built.len() <= bytes_max.max(encode_batch(&[]).len()));
            prop_assert_eq!(&built[..], &encode_batch(&accepted)[..]);
        }
    }

    proptest! {
        /// Random bytes never panic the decoder: they are rejected or decode to a valid batch.
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut buf = AlignedVec::<16>::new();
            buf.extend_from_slice(&data);
            if let Ok(batch) = decode_batch(&buf) {
                let _ = rkyv::deserialize::<Vec<MetadataRecord>, rancor::Error>(batch).unwrap();
            }
        }

        /// Flipping, truncating or overwriting bytes of a valid batch never panics the decoder:
        /// the result is an error or a batch that deserializes cleanly.
        #[test]
        fn mutated_batches_never_panic(
            pos in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in any::<prop::sample::Index>(),
            truncate in any::<bool>(),
        ) {
            let bytes = encode_batch(&all_kinds());
            let mut buf = AlignedVec::<16>::new();
            buf.extend_from_slice(&bytes);
            let i = pos.index(buf.len());
            buf[i] ^= byte | 1;
            let len = if truncate { cut.index(buf.len()) } else { buf.len() };
            if let Ok(batch) = decode_batch(&buf[..len]) {
                let _ = rkyv::deserialize::<Vec<MetadataRecord>, rancor::Error>(batch).unwrap();
                // Whatever survived validation replays or is refused, never panics.
                let mut image = crate::MetadataImage::default();
                for (i, r) in batch.iter().enumerate() {
                    let _ = image.replay(corum_types::LogOffset(i as u64), r);
                }
                image.check_invariants_structural();
            }
        }
    }
}
