//! corum's metadata records as Kafka's, one for one, framed as Kafka frames a metadata record
//! in a record's value (frame version 1, API key, record version, body).
//!
//! | corum record | Kafka record |
//! |---|---|
//! | `RegisterBroker`, `RegisterBrokerV2` | `RegisterBrokerRecord` (V1 names no security protocol: PLAINTEXT) |
//! | `UnregisterBroker` | `UnregisterBrokerRecord` |
//! | `FenceBroker`, `UnfenceBroker` | `FenceBrokerRecord`, `UnfenceBrokerRecord` |
//! | `BrokerRegistrationChange`, `BrokerRegistrationChangeV2` | `BrokerRegistrationChangeRecord` (fencing, unfencing, controlled shutdown) |
//! | `Topic` | `TopicRecord`; a deletion decided (`deleting`) is `NoOpRecord`: Kafka has no such step, the topic goes with its `RemoveTopicRecord` |
//! | `RemoveTopic` | `RemoveTopicRecord` |
//! | `Partition`, `PartitionV2`, `PartitionV3` | `PartitionRecord` (V1 has no directories: UNASSIGNED; V3's eligible leader replicas and last known ELR where the version has them, each only when not empty, as Kafka writes them) |
//! | `PartitionChange`, `PartitionChangeV2` | `PartitionChangeRecord` (V2's eligible leader replicas and last known ELR where the version has them) |
//! | `ClearElr` | `ClearElrRecord` |
//! | `AccessControlEntry`, `RemoveAccessControlEntry` | `AccessControlEntryRecord`, `RemoveAccessControlEntryRecord` (Kafka's brokers' own authorizers load them) |
//! | `UserScramCredential`, `RemoveUserScramCredential` | `UserScramCredentialRecord`, `RemoveUserScramCredentialRecord` (Kafka's brokers authenticate SCRAM clients with them) |
//! | `PartitionLeaderChange`, `PartitionIsrChange` (written before `PartitionChange` existed) | `PartitionChangeRecord` (leader, or ISR); a pair written for one change counts two partition epochs on a broker where corum counted one |
//! | `Config` | `ConfigRecord` (resource type TOPIC 2, BROKER 4) |
//! | `FeatureLevel` | `FeatureLevelRecord` (the range's top level; 0 removes the feature) |
//! | `ProducerIds` | `ProducerIdsRecord` |
//! | `NoOp` | `NoOpRecord` |
//! | `RegisterController` | `RegisterControllerRecord` |
//!
//! Record versions follow the finalized `metadata.version`, as Kafka's controller picks them:
//! from 3.7-IV2 (level 17) registrations carry log directories and partitions their replicas'
//! directories; from 4.0-IV1 (level 23) PartitionRecord and PartitionChangeRecord are v2, with
//! KIP-966's eligible leader replicas (a version below drops those lists: Kafka's controller
//! never has them there, since the feature needs 4.0-IV1, but a `metadata.version` lowered
//! under it after they were written would). Kafka writes each record at the level in force when it was written; corum
//! renders at fetch time, so a record older than an upgrade is rendered at the newer level,
//! which every registered broker supports (UpdateFeatures checks that).

use std::cell::Cell;

use bytes::BytesMut;
use corum_controller::control::feature_control::{self, METADATA_VERSION};
use corum_controller::records::{
    aligned, decode_batch, ConfigResourceType, FencingChange, LeaderChange, LeaderRecoveryState,
    MetadataRecord, PartitionChangeRecordV1, SupportedFeatureV1,
};
use corum_controller::ArchivedMetadataRecord;
use corum_types::NodeId;

use crate::api::kafka_uuid;

use crate::metadata as k;

/// A `metadata.version` feature level (Kafka's `MetadataVersion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetadataVersion(pub i16);

impl MetadataVersion {
    /// 3.3-IV3: the lowest level a Kafka 4 broker supports.
    pub const MINIMUM: MetadataVersion = MetadataVersion(7);
    /// 3.4-IV0: registrations may carry `IsMigratingZkBroker`.
    pub const IBP_3_4_IV0: MetadataVersion = MetadataVersion(8);
    /// 3.7-IV2: JBOD directory assignment (KIP-858).
    pub const IBP_3_7_IV2: MetadataVersion = MetadataVersion(17);
    /// 4.0-IV1: eligible leader replicas in partition records (KIP-966, Kafka's
    /// `isElrSupported`).
    pub const IBP_4_0_IV1: MetadataVersion = MetadataVersion(23);
    /// The highest level corum's controller supports (and finalizes by default).
    pub const LATEST: MetadataVersion = MetadataVersion(
        feature_control::METADATA_VERSIONS[feature_control::METADATA_VERSIONS.len() - 1].0 as i16,
    );

    fn directories(self) -> bool {
        self >= Self::IBP_3_7_IV2
    }

    /// Whether partition records carry eligible leader replicas at this level.
    pub fn elr(self) -> bool {
        self >= Self::IBP_4_0_IV1
    }

    pub fn register_broker_version(self) -> i16 {
        if self.directories() {
            3
        } else if self >= Self::IBP_3_4_IV0 {
            2
        } else {
            1
        }
    }

    pub fn broker_registration_change_version(self) -> i16 {
        if self.directories() {
            2
        } else if self >= Self::IBP_3_4_IV0 {
            1
        } else {
            0
        }
    }

    /// PartitionRecord's and PartitionChangeRecord's version (Kafka's
    /// `partitionRecordVersion`, `partitionChangeRecordVersion`).
    pub fn partition_version(self) -> i16 {
        if self.elr() {
            2
        } else {
            i16::from(self.directories())
        }
    }
}

/// What rendering needs besides the records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderContext {
    /// The finalized `metadata.version` the records are written at (Kafka's controllers
    /// write each record at the level in force; every broker supports the finalized one).
    /// Rendering a FeatureLevel record of `metadata.version` moves it, so the records after
    /// an upgrade in the same fetch follow the new level; the caller reads it back to start
    /// the next fetch there.
    pub metadata_version: Cell<MetadataVersion>,
    /// The time a rendered snapshot carries (its header's last contained log time, and its
    /// batches' timestamps): corum's snapshots do not keep the append time of their last
    /// batch, so -1 (Kafka's "no timestamp"). Log batches carry their own
    /// ([`corum_raft::Batch::timestamp_ms`]).
    pub timestamp_ms: i64,
    /// Where each controller serves brokers (its Kafka listener, from its KIP-919
    /// registration), added to its entry in a VotersRecord: a Kafka broker reaches the voters
    /// by the name of its `controller.listener.names`, and corum's voters replicate among
    /// themselves on another listener.
    pub voter_endpoints: Vec<(corum_types::NodeId, corum_raft::Endpoint)>,
}

impl Default for RenderContext {
    fn default() -> Self {
        RenderContext {
            metadata_version: Cell::new(MetadataVersion::LATEST),
            timestamp_ms: -1,
            voter_endpoints: Vec::new(),
        }
    }
}

fn id(n: NodeId) -> i32 {
    n.0 as i32
}

fn ids(v: &[NodeId]) -> Vec<i32> {
    v.iter().map(|&n| id(n)).collect()
}

/// Kafka's resource type codes (`ConfigResource.Type`).
fn resource_type(t: ConfigResourceType) -> i8 {
    match t {
        ConfigResourceType::Topic => 2,
        ConfigResourceType::Broker => 4,
    }
}

fn features(f: &[SupportedFeatureV1]) -> Vec<k::RegisterBrokerRecordBrokerFeature> {
    f.iter()
        .map(|f| k::RegisterBrokerRecordBrokerFeature {
            name: f.name.clone(),
            min_supported_version: f.min_level as i16,
            max_supported_version: f.max_level as i16,
            ..Default::default()
        })
        .collect()
}

fn recovery(s: LeaderRecoveryState) -> i8 {
    match s {
        LeaderRecoveryState::Recovered => 0,
        LeaderRecoveryState::Recovering => 1,
    }
}

/// A list of PartitionRecord v2 (written only when not empty, as Kafka's `toRecord` does), or
/// `None` at a version without it.
fn elr_list(v: &[NodeId], version: i16) -> Option<Vec<i32>> {
    (version >= 2 && !v.is_empty()).then(|| ids(v))
}

/// The directory Kafka assumes for a replica no directory was assigned to.
const UNASSIGNED_DIR: uuid::Uuid = uuid::Uuid::nil();

/// One corum record as its Kafka counterpart and the version to write it at.
pub fn kafka_record(r: MetadataRecord, mv: MetadataVersion) -> (k::AnyMetadataRecord, i16) {
    use k::AnyMetadataRecord as A;
    match r {
        MetadataRecord::RegisterBroker(r) => (
            A::RegisterBroker(k::RegisterBrokerRecord {
                broker_id: id(r.broker_id),
                incarnation_id: kafka_uuid(r.incarnation_id),
                broker_epoch: r.broker_epoch.0 as i64,
                end_points: r
                    .listeners
                    .iter()
                    .map(|l| k::RegisterBrokerRecordBrokerEndpoint {
                        name: l.name.clone(),
                        host: l.host.clone(),
                        port: l.port,
                        security_protocol: 0,
                        ..Default::default()
                    })
                    .collect(),
                features: features(&r.features),
                rack: r.rack,
                fenced: true,
                ..Default::default()
            }),
            mv.register_broker_version(),
        ),
        MetadataRecord::UnregisterBroker(r) => (
            A::UnregisterBroker(k::UnregisterBrokerRecord {
                broker_id: id(r.broker_id),
                broker_epoch: r.broker_epoch.0 as i64,
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::FenceBroker(r) => (
            A::FenceBroker(k::FenceBrokerRecord {
                id: id(r.broker_id),
                epoch: r.broker_epoch.0 as i64,
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::UnfenceBroker(r) => (
            A::UnfenceBroker(k::UnfenceBrokerRecord {
                id: id(r.broker_id),
                epoch: r.broker_epoch.0 as i64,
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::BrokerRegistrationChange(r) => (
            A::BrokerRegistrationChange(k::BrokerRegistrationChangeRecord {
                broker_id: id(r.broker_id),
                broker_epoch: r.broker_epoch.0 as i64,
                // Kafka's BrokerRegistrationInControlledShutdownChange: 0 none, 1 in
                // controlled shutdown.
                in_controlled_shutdown: i8::from(r.in_controlled_shutdown),
                ..Default::default()
            }),
            mv.broker_registration_change_version().max(1),
        ),
        MetadataRecord::Topic(r) if r.deleting => (A::NoOp(k::NoOpRecord::default()), 0),
        MetadataRecord::Topic(r) => (
            A::Topic(k::TopicRecord {
                name: r.name,
                topic_id: kafka_uuid(r.topic_id.0),
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::RemoveTopic(r) => (
            A::RemoveTopic(k::RemoveTopicRecord {
                topic_id: kafka_uuid(r.topic_id.0),
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::Partition(r) => {
            let version = mv.partition_version();
            (
                A::Partition(k::PartitionRecord {
                    partition_id: r.partition_id.0 as i32,
                    topic_id: kafka_uuid(r.topic_id.0),
                    replicas: ids(&r.replicas),
                    isr: ids(&r.isr),
                    leader: r.leader.map_or(-1, id),
                    leader_epoch: r.leader_epoch.0 as i32,
                    partition_epoch: r.partition_epoch.0 as i32,
                    directories: if version >= 1 {
                        vec![UNASSIGNED_DIR; r.replicas.len()]
                    } else {
                        Vec::new()
                    },
                    ..Default::default()
                }),
                version,
            )
        }
        MetadataRecord::PartitionLeaderChange(r) => (
            A::PartitionChange(k::PartitionChangeRecord {
                partition_id: r.partition_id.0 as i32,
                topic_id: kafka_uuid(r.topic_id.0),
                leader: r.leader.map_or(-1, id),
                ..Default::default()
            }),
            mv.partition_version(),
        ),
        MetadataRecord::PartitionIsrChange(r) => (
            A::PartitionChange(k::PartitionChangeRecord {
                partition_id: r.partition_id.0 as i32,
                topic_id: kafka_uuid(r.topic_id.0),
                isr: Some(ids(&r.isr)),
                ..Default::default()
            }),
            mv.partition_version(),
        ),
        MetadataRecord::Config(r) => (
            A::Config(k::ConfigRecord {
                resource_type: resource_type(r.resource_type),
                resource_name: r.resource_name,
                name: r.key,
                value: r.value,
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::FeatureLevel(r) => (
            A::FeatureLevel(k::FeatureLevelRecord {
                name: r.name,
                feature_level: r.max_level as i16,
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::ProducerIds(r) => (
            A::ProducerIds(k::ProducerIdsRecord {
                broker_id: id(r.broker_id),
                broker_epoch: r.broker_epoch.0 as i64,
                next_producer_id: r.next_producer_id as i64,
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::RegisterBrokerV2(r) => (
            A::RegisterBroker(k::RegisterBrokerRecord {
                broker_id: id(r.broker_id),
                incarnation_id: kafka_uuid(r.incarnation_id),
                broker_epoch: r.broker_epoch.0 as i64,
                end_points: r
                    .endpoints
                    .iter()
                    .map(|e| k::RegisterBrokerRecordBrokerEndpoint {
                        name: e.name.clone(),
                        host: e.host.clone(),
                        port: e.port,
                        security_protocol: e.security_protocol,
                        ..Default::default()
                    })
                    .collect(),
                features: features(&r.features),
                rack: r.rack,
                fenced: r.fenced,
                in_controlled_shutdown: r.in_controlled_shutdown,
                log_dirs: r.log_dirs.iter().map(|&d| kafka_uuid(d)).collect(),
                ..Default::default()
            }),
            mv.register_broker_version(),
        ),
        MetadataRecord::BrokerRegistrationChangeV2(r) => (
            A::BrokerRegistrationChange(k::BrokerRegistrationChangeRecord {
                broker_id: id(r.broker_id),
                broker_epoch: r.broker_epoch.0 as i64,
                // Kafka's BrokerRegistrationFencingChange: 0 none, 1 fence, -1 unfence.
                fenced: match r.fenced {
                    FencingChange::Unchanged => 0,
                    FencingChange::Fence => 1,
                    FencingChange::Unfence => -1,
                },
                in_controlled_shutdown: i8::from(r.in_controlled_shutdown),
                ..Default::default()
            }),
            mv.broker_registration_change_version(),
        ),
        MetadataRecord::PartitionV2(r) => {
            let version = mv.partition_version();
            (
                A::Partition(k::PartitionRecord {
                    partition_id: r.partition_id.0 as i32,
                    topic_id: kafka_uuid(r.topic_id.0),
                    replicas: ids(&r.replicas),
                    isr: ids(&r.isr),
                    leader: r.leader.map_or(-1, id),
                    leader_recovery_state: recovery(r.leader_recovery_state),
                    leader_epoch: r.leader_epoch.0 as i32,
                    partition_epoch: r.partition_epoch.0 as i32,
                    directories: if version >= 1 {
                        r.directories.iter().map(|&d| kafka_uuid(d)).collect()
                    } else {
                        Vec::new()
                    },
                    ..Default::default()
                }),
                version,
            )
        }
        MetadataRecord::PartitionChange(r) => {
            let version = mv.partition_version();
            (
                A::PartitionChange(partition_change(&r, None, None, version)),
                version,
            )
        }
        MetadataRecord::PartitionChangeV2(r) => {
            let version = mv.partition_version();
            let list = |v: &Option<Vec<NodeId>>| v.as_deref().filter(|_| version >= 2).map(ids);
            (
                A::PartitionChange(partition_change(
                    &r.without_elr(),
                    list(&r.eligible_leader_replicas),
                    list(&r.last_known_elr),
                    version,
                )),
                version,
            )
        }
        MetadataRecord::PartitionV3(r) => {
            let version = mv.partition_version();
            (
                A::Partition(k::PartitionRecord {
                    partition_id: r.partition_id.0 as i32,
                    topic_id: kafka_uuid(r.topic_id.0),
                    replicas: ids(&r.replicas),
                    isr: ids(&r.isr),
                    leader: r.leader.map_or(-1, id),
                    leader_recovery_state: recovery(r.leader_recovery_state),
                    leader_epoch: r.leader_epoch.0 as i32,
                    partition_epoch: r.partition_epoch.0 as i32,
                    directories: if version >= 1 {
                        r.directories.iter().map(|&d| kafka_uuid(d)).collect()
                    } else {
                        Vec::new()
                    },
                    eligible_leader_replicas: elr_list(&r.eligible_leader_replicas, version),
                    last_known_elr: elr_list(&r.last_known_elr, version),
                    ..Default::default()
                }),
                version,
            )
        }
        MetadataRecord::ClearElr(r) => (
            A::ClearElr(k::ClearElrRecord {
                topic_name: r.topic_name,
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::AccessControlEntry(r) => (
            A::AccessControlEntry(k::AccessControlEntryRecord {
                id: kafka_uuid(r.id),
                resource_type: r.resource_type,
                resource_name: r.resource_name,
                pattern_type: r.pattern_type,
                principal: r.principal,
                host: r.host,
                operation: r.operation,
                permission_type: r.permission_type,
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::RemoveAccessControlEntry(r) => (
            A::RemoveAccessControlEntry(k::RemoveAccessControlEntryRecord {
                id: kafka_uuid(r.id),
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::UserScramCredential(r) => (
            A::UserScramCredential(k::UserScramCredentialRecord {
                name: r.name,
                mechanism: r.mechanism,
                salt: bytes::Bytes::from(r.salt),
                stored_key: bytes::Bytes::from(r.stored_key),
                server_key: bytes::Bytes::from(r.server_key),
                iterations: r.iterations,
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::RemoveUserScramCredential(r) => (
            A::RemoveUserScramCredential(k::RemoveUserScramCredentialRecord {
                name: r.name,
                mechanism: r.mechanism,
                ..Default::default()
            }),
            0,
        ),
        MetadataRecord::NoOp(_) => (A::NoOp(k::NoOpRecord::default()), 0),
        MetadataRecord::RegisterController(r) => (
            A::RegisterController(k::RegisterControllerRecord {
                controller_id: id(r.controller_id),
                incarnation_id: kafka_uuid(r.incarnation_id),
                zk_migration_ready: false,
                end_points: r
                    .end_points
                    .iter()
                    .map(|e| k::RegisterControllerRecordControllerEndpoint {
                        name: e.name.clone(),
                        host: e.host.clone(),
                        port: e.port,
                        security_protocol: e.security_protocol,
                        ..Default::default()
                    })
                    .collect(),
                features: r
                    .features
                    .iter()
                    .map(|f| k::RegisterControllerRecordControllerFeature {
                        name: f.name.clone(),
                        min_supported_version: f.min_level as i16,
                        max_supported_version: f.max_level as i16,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            0,
        ),
    }
}

/// A PartitionChangeRecord of `r` with the eligible leader replicas and last known ELR given
/// (already `None` at a version without them).
fn partition_change(
    r: &PartitionChangeRecordV1,
    eligible_leader_replicas: Option<Vec<i32>>,
    last_known_elr: Option<Vec<i32>>,
    version: i16,
) -> k::PartitionChangeRecord {
    k::PartitionChangeRecord {
        partition_id: r.partition_id.0 as i32,
        topic_id: kafka_uuid(r.topic_id.0),
        isr: r.isr.as_deref().map(ids),
        // Kafka's sentinels: -2 no change, -1 no leader.
        leader: match r.leader {
            LeaderChange::Unchanged => -2,
            LeaderChange::NoLeader => -1,
            LeaderChange::Broker(b) => id(b),
        },
        replicas: r.replicas.as_deref().map(ids),
        leader_recovery_state: r.leader_recovery_state.map_or(-1, recovery),
        directories: if version >= 1 {
            r.directories
                .as_ref()
                .map(|d| d.iter().map(|&d| kafka_uuid(d)).collect())
        } else {
            None
        },
        eligible_leader_replicas,
        last_known_elr,
        ..Default::default()
    }
}

/// Renders every record of an encoded corum batch, calling `emit` with each framed Kafka
/// record value in order. `scratch` holds each value while it is emitted.
pub fn render_payload(
    payload: &[u8],
    ctx: &RenderContext,
    mut emit: impl FnMut(&[u8]),
    scratch: &mut BytesMut,
) -> Result<(), String> {
    let bytes = aligned(payload);
    let batch = decode_batch(&bytes).map_err(|e| e.to_string())?;
    for archived in batch.iter() {
        let owned = owned(archived)?;
        if let MetadataRecord::FeatureLevel(f) = &owned {
            if f.name == METADATA_VERSION && f.max_level > 0 {
                ctx.metadata_version.set(MetadataVersion(
                    i16::try_from(f.max_level).unwrap_or(i16::MAX),
                ));
            }
        }
        let kind = owned.kind();
        let (record, version) = kafka_record(owned, ctx.metadata_version.get());
        scratch.clear();
        record
            .encode_framed(version, scratch)
            .map_err(|e| format!("{kind} as a Kafka record: {e}"))?;
        emit(scratch);
    }
    Ok(())
}

fn owned(a: &ArchivedMetadataRecord) -> Result<MetadataRecord, String> {
    rkyv::deserialize::<MetadataRecord, rkyv::rancor::Error>(a).map_err(|e| e.to_string())
}
