//! The metadata image: the state that replaying the log produces.
//!
//! [`MetadataImage::replay`] (an archived record: committed ones) and [`MetadataImage::apply`]
//! (an owned record: the active controller's own proposals) are the only code that changes it;
//! both extract the record's fields and hand them to the same per-domain replay functions
//! (`brokers`, `topics`, ...), so they check and change exactly the same things. Every part is a persistent
//! (structurally shared) map, so `clone()` is O(1): readers (describe handlers, a snapshot writer,
//! the in-flight snapshots of [`crate::Controller`]) take a clone and keep a consistent view while
//! replay goes on; a write after a clone copies only the B-tree path to the changed entry and the
//! changed entry itself (for a partition: its topic's partition vector).

pub mod brokers;
pub mod configs;
pub mod controllers;
pub mod features;
pub mod producer_ids;
pub mod topics;

use corum_types::{BrokerEpoch, LogOffset, NodeId};

use crate::acl::{AclBinding, AclsImage};
use crate::error::ReplayError;
use crate::ids::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId};
use crate::records::{
    ArchivedBatch, ArchivedConfigResourceType, ArchivedFencingChange, ArchivedMetadataRecord,
    ConfigRecordV1, ConfigResourceType, FeatureLevelRecordV1, FencingChange, LeaderRecoveryState,
    MetadataRecord, PartitionRecordV3, ProducerIdsRecordV1, TopicRecordV1,
};
use crate::scram::{ScramCredential, ScramImage, ScramMechanism};

pub use brokers::{BrokerRegistration, BrokersImage};
pub use configs::{ConfigMap, ConfigResource, ConfigsImage};
pub use controllers::{ControllerRegistration, ControllersImage};
pub use features::{FeaturesImage, FinalizedFeature};
pub use producer_ids::ProducerIdsImage;
pub use topics::{DirectoryList, ElrLists, PartitionImage, ReplicaList, TopicImage, TopicsImage};

/// The whole metadata state at one log offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// The offset after the last record applied (0 for an empty image).
    pub end_offset: LogOffset,
    pub brokers: BrokersImage,
    pub topics: TopicsImage,
    pub configs: ConfigsImage,
    pub features: FeaturesImage,
    pub producer_ids: ProducerIdsImage,
    /// Registered controllers (KIP-919).
    pub controllers: ControllersImage,
    /// ACLs (Kafka's AccessControlEntryRecords), indexed for authorization.
    pub acls: AclsImage,
    /// SCRAM credentials (Kafka's UserScramCredentialRecords), by user and mechanism.
    pub scram: ScramImage,
}

impl MetadataImage {
    /// The parts in which `self` and `other` differ, by name (empty when they are equal): for
    /// a report comparing two nodes' images. Every field is named here (the destructuring is
    /// exhaustive), so a new part cannot be left out of the comparison.
    pub fn differing_parts(&self, other: &MetadataImage) -> Vec<&'static str> {
        let MetadataImage {
            end_offset,
            brokers,
            topics,
            configs,
            features,
            producer_ids,
            controllers,
            acls,
            scram,
        } = self;
        [
            (end_offset == &other.end_offset, "end offset"),
            (brokers == &other.brokers, "brokers"),
            (topics == &other.topics, "topics"),
            (configs == &other.configs, "configs"),
            (features == &other.features, "features"),
            (producer_ids == &other.producer_ids, "producer ids"),
            (controllers == &other.controllers, "controllers"),
            (acls == &other.acls, "acls"),
            (scram == &other.scram, "scram credentials"),
        ]
        .into_iter()
        .filter_map(|(same, name)| (!same).then_some(name))
        .collect()
    }

    /// Applies one record found at `offset`. On error the image is unchanged (every record is
    /// checked before anything is written) and the caller must stop: the log does not fit.
    pub fn replay(
        &mut self,
        offset: LogOffset,
        record: &ArchivedMetadataRecord,
    ) -> Result<(), ReplayError> {
        use ArchivedMetadataRecord as R;
        self.check_offset(offset)?;
        match record {
            R::RegisterBroker(r) => self
                .brokers
                .replay_register(offset, BrokerRegistration::from_archived(r)),
            R::UnregisterBroker(r) => self.brokers.replay_unregister(
                offset,
                NodeId::from(&r.broker_id),
                BrokerEpoch::from(&r.broker_epoch),
            )?,
            R::FenceBroker(r) => self.fence(
                offset,
                NodeId::from(&r.broker_id),
                BrokerEpoch::from(&r.broker_epoch),
            )?,
            R::UnfenceBroker(r) => self.unfence(
                offset,
                NodeId::from(&r.broker_id),
                BrokerEpoch::from(&r.broker_epoch),
            )?,
            R::BrokerRegistrationChange(r) => self.registration_change(
                offset,
                NodeId::from(&r.broker_id),
                BrokerEpoch::from(&r.broker_epoch),
                r.in_controlled_shutdown,
            )?,
            R::Topic(r) => self.topics.replay_topic(
                offset,
                TopicId::from_archived(&r.topic_id),
                r.name.as_str(),
                r.deleting,
            )?,
            R::RemoveTopic(r) => self.remove_topic(offset, TopicId::from_archived(&r.topic_id))?,
            R::Partition(r) => self.topics.replay_partition(
                offset,
                TopicId::from_archived(&r.topic_id),
                PartitionId::from_archived(&r.partition_id),
                PartitionImage {
                    directories: topics::directories_for(r.replicas.len(), Vec::new()),
                    replicas: topics::ids_from(&r.replicas),
                    isr: topics::ids_from(&r.isr),
                    leader: topics::leader_from(&r.leader),
                    leader_recovery_state: LeaderRecoveryState::Recovered,
                    leader_epoch: LeaderEpoch::from_archived(&r.leader_epoch),
                    partition_epoch: PartitionEpoch::from_archived(&r.partition_epoch),
                    elr: None,
                },
            )?,
            R::PartitionLeaderChange(r) => self.topics.replay_leader_change(
                offset,
                TopicId::from_archived(&r.topic_id),
                PartitionId::from_archived(&r.partition_id),
                topics::leader_from(&r.leader),
                LeaderEpoch::from_archived(&r.leader_epoch),
                PartitionEpoch::from_archived(&r.partition_epoch),
            )?,
            R::PartitionIsrChange(r) => self.topics.replay_isr_change(
                offset,
                TopicId::from_archived(&r.topic_id),
                PartitionId::from_archived(&r.partition_id),
                topics::ids_from(&r.isr),
                PartitionEpoch::from_archived(&r.partition_epoch),
            )?,
            R::Config(r) => self.configs.replay(
                match r.resource_type {
                    ArchivedConfigResourceType::Topic => ConfigResourceType::Topic,
                    ArchivedConfigResourceType::Broker => ConfigResourceType::Broker,
                },
                r.resource_name.as_str(),
                r.key.as_str(),
                r.value.as_ref().map(|v| v.as_str()),
            ),
            R::FeatureLevel(r) => self.features.replay(
                offset,
                r.name.as_str(),
                r.min_level.to_native(),
                r.max_level.to_native(),
            )?,
            R::ProducerIds(r) => self.producer_ids.replay(
                offset,
                NodeId::from(&r.broker_id),
                BrokerEpoch::from(&r.broker_epoch),
                r.next_producer_id.to_native(),
            )?,
            R::NoOp(_) => {}
            R::RegisterController(r) => self
                .controllers
                .replay_register(ControllerRegistration::from_archived(r)),
            R::RegisterBrokerV2(r) => self
                .brokers
                .replay_register(offset, BrokerRegistration::from_archived_v2(r)),
            R::BrokerRegistrationChangeV2(r) => self.registration_change_v2(
                offset,
                NodeId::from(&r.broker_id),
                BrokerEpoch::from(&r.broker_epoch),
                match r.fenced {
                    ArchivedFencingChange::Unchanged => FencingChange::Unchanged,
                    ArchivedFencingChange::Fence => FencingChange::Fence,
                    ArchivedFencingChange::Unfence => FencingChange::Unfence,
                },
                r.in_controlled_shutdown,
            )?,
            R::PartitionV2(r) => self.topics.replay_partition(
                offset,
                TopicId::from_archived(&r.topic_id),
                PartitionId::from_archived(&r.partition_id),
                PartitionImage {
                    directories: topics::directories_for(
                        r.replicas.len(),
                        r.directories.iter().map(corum_types::Uuid::from).collect(),
                    ),
                    replicas: topics::ids_from(&r.replicas),
                    isr: topics::ids_from(&r.isr),
                    leader: topics::leader_from(&r.leader),
                    leader_recovery_state: LeaderRecoveryState::from_archived(
                        &r.leader_recovery_state,
                    ),
                    leader_epoch: LeaderEpoch::from_archived(&r.leader_epoch),
                    partition_epoch: PartitionEpoch::from_archived(&r.partition_epoch),
                    elr: None,
                },
            )?,
            R::PartitionChange(r) => self.topics.replay_change(
                offset,
                TopicId::from_archived(&r.topic_id),
                PartitionId::from_archived(&r.partition_id),
                topics::PartitionDelta::from_archived(r),
            )?,
            R::PartitionV3(r) => self.topics.replay_partition(
                offset,
                TopicId::from_archived(&r.topic_id),
                PartitionId::from_archived(&r.partition_id),
                PartitionImage {
                    directories: topics::directories_for(
                        r.replicas.len(),
                        r.directories.iter().map(corum_types::Uuid::from).collect(),
                    ),
                    replicas: topics::ids_from(&r.replicas),
                    isr: topics::ids_from(&r.isr),
                    leader: topics::leader_from(&r.leader),
                    leader_recovery_state: LeaderRecoveryState::from_archived(
                        &r.leader_recovery_state,
                    ),
                    leader_epoch: LeaderEpoch::from_archived(&r.leader_epoch),
                    partition_epoch: PartitionEpoch::from_archived(&r.partition_epoch),
                    elr: None,
                }
                .with_elr(
                    topics::ids_from(&r.eligible_leader_replicas),
                    topics::ids_from(&r.last_known_elr),
                ),
            )?,
            R::PartitionChangeV2(r) => self.topics.replay_change(
                offset,
                TopicId::from_archived(&r.topic_id),
                PartitionId::from_archived(&r.partition_id),
                topics::PartitionDelta::from_archived_v2(r),
            )?,
            R::ClearElr(r) => self
                .topics
                .replay_clear_elr(offset, r.topic_name.as_str())?,
            R::AccessControlEntry(r) => self.create_acl(
                offset,
                corum_types::Uuid::from(&r.id),
                AclBinding::from_record_fields(
                    r.resource_type,
                    r.resource_name.as_str(),
                    r.pattern_type,
                    r.principal.as_str(),
                    r.host.as_str(),
                    r.operation,
                    r.permission_type,
                ),
            )?,
            R::RemoveAccessControlEntry(r) => {
                self.remove_acl(offset, corum_types::Uuid::from(&r.id))?
            }
            R::UserScramCredential(r) => self.upsert_scram(
                offset,
                r.name.as_str(),
                r.mechanism,
                ScramCredential {
                    salt: r.salt.to_vec(),
                    stored_key: r.stored_key.to_vec(),
                    server_key: r.server_key.to_vec(),
                    iterations: r.iterations.to_native(),
                },
            )?,
            R::RemoveUserScramCredential(r) => {
                self.remove_scram(offset, r.name.as_str(), r.mechanism)?
            }
        }
        self.end_offset = offset.next();
        Ok(())
    }

    /// [`MetadataImage::replay`] of an owned record: the same checks and the same changes
    /// (a property test holds the two equal), for the active controller's own proposals,
    /// which it applies from the records it built rather than from bytes it would have to
    /// decode (see [`crate::Controller::on_proposed`]).
    pub fn apply(&mut self, offset: LogOffset, record: &MetadataRecord) -> Result<(), ReplayError> {
        use MetadataRecord as R;
        self.check_offset(offset)?;
        match record {
            R::RegisterBroker(r) => self
                .brokers
                .replay_register(offset, BrokerRegistration::from_record(r)),
            R::UnregisterBroker(r) => {
                self.brokers
                    .replay_unregister(offset, r.broker_id, r.broker_epoch)?
            }
            R::FenceBroker(r) => self.fence(offset, r.broker_id, r.broker_epoch)?,
            R::UnfenceBroker(r) => self.unfence(offset, r.broker_id, r.broker_epoch)?,
            R::BrokerRegistrationChange(r) => self.registration_change(
                offset,
                r.broker_id,
                r.broker_epoch,
                r.in_controlled_shutdown,
            )?,
            R::Topic(r) => self
                .topics
                .replay_topic(offset, r.topic_id, &r.name, r.deleting)?,
            R::RemoveTopic(r) => self.remove_topic(offset, r.topic_id)?,
            R::Partition(r) => self.topics.replay_partition(
                offset,
                r.topic_id,
                r.partition_id,
                PartitionImage {
                    replicas: ReplicaList::from_slice(&r.replicas),
                    isr: ReplicaList::from_slice(&r.isr),
                    directories: topics::directories_for(r.replicas.len(), Vec::new()),
                    leader: r.leader,
                    leader_recovery_state: LeaderRecoveryState::Recovered,
                    leader_epoch: r.leader_epoch,
                    partition_epoch: r.partition_epoch,
                    elr: None,
                },
            )?,
            R::PartitionLeaderChange(r) => self.topics.replay_leader_change(
                offset,
                r.topic_id,
                r.partition_id,
                r.leader,
                r.leader_epoch,
                r.partition_epoch,
            )?,
            R::PartitionIsrChange(r) => self.topics.replay_isr_change(
                offset,
                r.topic_id,
                r.partition_id,
                ReplicaList::from_slice(&r.isr),
                r.partition_epoch,
            )?,
            R::Config(r) => self.configs.replay(
                r.resource_type,
                &r.resource_name,
                &r.key,
                r.value.as_deref(),
            ),
            R::FeatureLevel(r) => {
                self.features
                    .replay(offset, &r.name, r.min_level, r.max_level)?
            }
            R::ProducerIds(r) => {
                self.producer_ids
                    .replay(offset, r.broker_id, r.broker_epoch, r.next_producer_id)?
            }
            R::NoOp(_) => {}
            R::RegisterController(r) => self
                .controllers
                .replay_register(ControllerRegistration::from_record(r)),
            R::RegisterBrokerV2(r) => self
                .brokers
                .replay_register(offset, BrokerRegistration::from_record_v2(r)),
            R::BrokerRegistrationChangeV2(r) => self.registration_change_v2(
                offset,
                r.broker_id,
                r.broker_epoch,
                r.fenced,
                r.in_controlled_shutdown,
            )?,
            R::PartitionV2(r) => self.topics.replay_partition(
                offset,
                r.topic_id,
                r.partition_id,
                PartitionImage {
                    replicas: ReplicaList::from_slice(&r.replicas),
                    isr: ReplicaList::from_slice(&r.isr),
                    directories: topics::directories_for(r.replicas.len(), r.directories.clone()),
                    leader: r.leader,
                    leader_recovery_state: r.leader_recovery_state,
                    leader_epoch: r.leader_epoch,
                    partition_epoch: r.partition_epoch,
                    elr: None,
                },
            )?,
            R::PartitionChange(r) => self.topics.replay_change(
                offset,
                r.topic_id,
                r.partition_id,
                topics::PartitionDelta::from_record(r),
            )?,
            R::PartitionV3(r) => self.topics.replay_partition(
                offset,
                r.topic_id,
                r.partition_id,
                PartitionImage {
                    replicas: ReplicaList::from_slice(&r.replicas),
                    isr: ReplicaList::from_slice(&r.isr),
                    directories: topics::directories_for(r.replicas.len(), r.directories.clone()),
                    leader: r.leader,
                    leader_recovery_state: r.leader_recovery_state,
                    leader_epoch: r.leader_epoch,
                    partition_epoch: r.partition_epoch,
                    elr: None,
                }
                .with_elr(
                    ReplicaList::from_slice(&r.eligible_leader_replicas),
                    ReplicaList::from_slice(&r.last_known_elr),
                ),
            )?,
            R::PartitionChangeV2(r) => self.topics.replay_change(
                offset,
                r.topic_id,
                r.partition_id,
                topics::PartitionDelta::from_record_v2(r),
            )?,
            R::ClearElr(r) => self.topics.replay_clear_elr(offset, &r.topic_name)?,
            R::AccessControlEntry(r) => self.create_acl(
                offset,
                r.id,
                AclBinding::from_record_fields(
                    r.resource_type,
                    &r.resource_name,
                    r.pattern_type,
                    &r.principal,
                    &r.host,
                    r.operation,
                    r.permission_type,
                ),
            )?,
            R::RemoveAccessControlEntry(r) => self.remove_acl(offset, r.id)?,
            R::UserScramCredential(r) => self.upsert_scram(
                offset,
                &r.name,
                r.mechanism,
                ScramCredential {
                    salt: r.salt.clone(),
                    stored_key: r.stored_key.clone(),
                    server_key: r.server_key.clone(),
                    iterations: r.iterations,
                },
            )?,
            R::RemoveUserScramCredential(r) => self.remove_scram(offset, &r.name, r.mechanism)?,
        }
        self.end_offset = offset.next();
        Ok(())
    }

    fn check_offset(&self, offset: LogOffset) -> Result<(), ReplayError> {
        if offset < self.end_offset {
            return Err(ReplayError::OffsetNotIncreasing {
                offset,
                applied: self.end_offset,
            });
        }
        Ok(())
    }

    fn fence(
        &mut self,
        offset: LogOffset,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
    ) -> Result<(), ReplayError> {
        self.brokers
            .replay_change(offset, broker_id, broker_epoch, |b| {
                b.fenced = true;
                b.in_controlled_shutdown = false;
            })
    }

    fn unfence(
        &mut self,
        offset: LogOffset,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
    ) -> Result<(), ReplayError> {
        self.brokers
            .replay_change(offset, broker_id, broker_epoch, |b| b.fenced = false)
    }

    fn registration_change(
        &mut self,
        offset: LogOffset,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
        in_controlled_shutdown: bool,
    ) -> Result<(), ReplayError> {
        self.brokers
            .replay_change(offset, broker_id, broker_epoch, |b| {
                b.in_controlled_shutdown = in_controlled_shutdown
            })
    }

    /// A BrokerRegistrationChangeV2: Kafka's BrokerRegistrationChangeRecord (fencing leaves
    /// the controlled-shutdown flag as it is).
    fn registration_change_v2(
        &mut self,
        offset: LogOffset,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
        fenced: FencingChange,
        in_controlled_shutdown: bool,
    ) -> Result<(), ReplayError> {
        self.brokers
            .replay_change(offset, broker_id, broker_epoch, |b| {
                match fenced {
                    FencingChange::Unchanged => {}
                    FencingChange::Fence => b.fenced = true,
                    FencingChange::Unfence => b.fenced = false,
                }
                if in_controlled_shutdown {
                    b.in_controlled_shutdown = true;
                }
            })
    }

    /// An AccessControlEntry record: a valid ACL (`None`: a code that names no value) under a
    /// new id.
    fn create_acl(
        &mut self,
        offset: LogOffset,
        id: corum_types::Uuid,
        acl: Option<AclBinding>,
    ) -> Result<(), ReplayError> {
        let acl = acl.ok_or(ReplayError::InvalidAcl { offset, id })?;
        if id.is_zero() || self.acls.contains_id(id) {
            return Err(ReplayError::DuplicateAclId { offset, id });
        }
        self.acls.replay_create(id, acl);
        Ok(())
    }

    fn remove_acl(&mut self, offset: LogOffset, id: corum_types::Uuid) -> Result<(), ReplayError> {
        if !self.acls.replay_remove(id) {
            return Err(ReplayError::UnknownAcl { offset, id });
        }
        Ok(())
    }

    /// A UserScramCredential record: a known mechanism, a user name, and a credential of that
    /// mechanism's shape (see [`ScramCredential::is_valid`]).
    fn upsert_scram(
        &mut self,
        offset: LogOffset,
        user: &str,
        mechanism: i8,
        credential: ScramCredential,
    ) -> Result<(), ReplayError> {
        let invalid = |reason| ReplayError::InvalidScramCredential {
            offset,
            user: user.to_owned(),
            reason,
        };
        let mechanism =
            ScramMechanism::from_code(mechanism).ok_or_else(|| invalid("unknown mechanism"))?;
        if user.is_empty() {
            return Err(invalid("empty user name"));
        }
        if !credential.is_valid(mechanism) {
            return Err(invalid(
                "keys not of the mechanism's hash length, an empty salt, or iterations outside 4096-16384",
            ));
        }
        self.scram.replay_upsert(user, mechanism, credential);
        Ok(())
    }

    fn remove_scram(
        &mut self,
        offset: LogOffset,
        user: &str,
        mechanism: i8,
    ) -> Result<(), ReplayError> {
        let removed =
            ScramMechanism::from_code(mechanism).is_some_and(|m| self.scram.replay_remove(user, m));
        if !removed {
            return Err(ReplayError::UnknownScramCredential {
                offset,
                user: user.to_owned(),
                mechanism,
            });
        }
        Ok(())
    }

    fn remove_topic(&mut self, offset: LogOffset, topic_id: TopicId) -> Result<(), ReplayError> {
        let name = self.topics.replay_remove(offset, topic_id)?;
        self.configs.remove_topic(&name);
        Ok(())
    }

    /// The image a snapshot (KIP-630) holds: its records ([`MetadataImage::snapshot_records`]
    /// of the image it was taken from) replayed at offsets 0, 1, ... into an empty image, which
    /// then ends at the snapshot's `end_offset`. Fails on the first record that does not apply.
    pub fn from_snapshot(
        end_offset: LogOffset,
        records: &ArchivedBatch,
    ) -> Result<MetadataImage, ReplayError> {
        let mut image = MetadataImage::default();
        for (i, record) in records.iter().enumerate() {
            image.replay(LogOffset(i as u64), record)?;
        }
        image.end_offset = end_offset;
        Ok(image)
    }

    /// Records that rebuild this image from an empty one (the body of a KIP-630 snapshot):
    /// replaying them in order gives an image equal to this one except for `end_offset`.
    /// Brokers first (so features and partitions can refer to them), then controllers,
    /// features, topics with their partitions, configs, ACLs (in id order), and the producer-id
    /// high-water mark.
    /// Each is written in its newest version: one RegisterBrokerV2 per broker (with its fencing
    /// and controlled shutdown) and one PartitionV2 per partition (PartitionV3 for one with
    /// eligible leader replicas or a last known ELR), as Kafka's image writer does.
    pub fn snapshot_records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for b in self.brokers.iter() {
            out.push(MetadataRecord::RegisterBrokerV2(Box::new(b.to_record())));
        }
        for c in self.controllers.iter() {
            out.push(MetadataRecord::RegisterController(c.to_record()));
        }
        for (name, f) in self.features.iter() {
            out.push(MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                name: name.to_owned(),
                min_level: f.min_level,
                max_level: f.max_level,
            }));
        }
        for t in self.topics.iter() {
            out.push(MetadataRecord::Topic(TopicRecordV1 {
                name: t.name.to_string(),
                topic_id: t.topic_id,
                deleting: t.deleting,
            }));
            for (i, p) in t.partitions.iter().enumerate() {
                out.push(MetadataRecord::partition(PartitionRecordV3 {
                    topic_id: t.topic_id,
                    partition_id: PartitionId(i as u32),
                    replicas: p.replicas.to_vec(),
                    isr: p.isr.to_vec(),
                    leader: p.leader,
                    leader_recovery_state: p.leader_recovery_state,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    directories: p.directories.to_vec(),
                    eligible_leader_replicas: p.elr().to_vec(),
                    last_known_elr: p.last_known_elr().to_vec(),
                }));
            }
        }
        for (resource_type, name, entries) in self.configs.iter() {
            for (key, value) in entries {
                out.push(MetadataRecord::Config(ConfigRecordV1 {
                    resource_type,
                    resource_name: name.to_owned(),
                    key: key.to_owned(),
                    value: Some(value.to_owned()),
                }));
            }
        }
        for (id, acl) in self.acls.iter() {
            out.push(MetadataRecord::AccessControlEntry(acl.to_record(id)));
        }
        for (name, mechanism, c) in self.scram.iter() {
            out.push(MetadataRecord::UserScramCredential(
                crate::records::UserScramCredentialRecordV1 {
                    name: name.to_owned(),
                    mechanism: mechanism.code(),
                    salt: c.salt.clone(),
                    stored_key: c.stored_key.clone(),
                    server_key: c.server_key.clone(),
                    iterations: c.iterations,
                },
            ));
        }
        if let Some((broker_id, broker_epoch)) = self.producer_ids.last_block_owner {
            out.push(MetadataRecord::ProducerIds(ProducerIdsRecordV1 {
                broker_id,
                broker_epoch,
                next_producer_id: self.producer_ids.next_producer_id,
            }));
        }
        out
    }

    /// Checks the image's invariants (O(partitions)); tests and the simulator call it after every
    /// batch. Panics with a description of the first violation.
    ///
    /// - every partition's replicas and ISR are duplicate-free, the ISR is a subset of the
    ///   replicas (empty only without a leader), the leader (if any) is in the ISR and on a
    ///   registered unfenced broker, every replica has a directory, and a recovering leader's
    ///   ISR is the leader alone (or empty, the leader gone with eligible leader replicas on);
    /// - eligible leader replicas (KIP-966) and the last known ELR are duplicate-free subsets of
    ///   the replicas; the eligible ones are outside the ISR, and the last known ELR names one
    ///   broker at most (Kafka keeps the last leader there);
    /// - the name and id indexes and the deleting set agree with the topics;
    /// - every finalized feature range is valid;
    /// - every controller registration is filed under its id, its lists in name order, and
    ///   valid (`ControllerRegistration::invalid_reason`).
    pub fn check_invariants(&self) {
        self.check_structure(true);
    }

    /// The part of [`Self::check_invariants`] that replay alone guarantees for any log, even one
    /// the controller did not write (leaders are then only required to be replicas).
    pub fn check_invariants_structural(&self) {
        self.check_structure(false);
    }

    fn check_structure(&self, written_by_controller: bool) {
        let mut partitions = 0;
        let mut leaderless = 0;
        for topic in self.topics.iter() {
            assert_eq!(
                self.topics.get_by_name(&topic.name).map(|t| t.topic_id),
                Some(topic.topic_id)
            );
            assert_eq!(
                topic.deleting,
                self.topics.deleting().any(|d| d == topic.topic_id),
                "deleting set of {}",
                topic.name
            );
            for (i, p) in topic.partitions.iter().enumerate() {
                partitions += 1;
                leaderless += usize::from(p.leader.is_none());
                let at = || format!("{}/{i}: {p:?}", topic.name);
                assert!(!p.replicas.is_empty(), "no replicas at {}", at());
                assert!(
                    !p.isr.is_empty() || p.leader.is_none(),
                    "empty ISR with a leader at {}",
                    at()
                );
                for list in [&p.isr[..], p.elr(), p.last_known_elr()] {
                    assert!(
                        list.iter().all(|b| p.replicas.contains(b)),
                        "ISR, ELR or last known ELR not within replicas at {}",
                        at()
                    );
                }
                for list in [&p.replicas[..], &p.isr[..], p.elr(), p.last_known_elr()] {
                    assert!(
                        list.iter().enumerate().all(|(j, b)| !list[..j].contains(b)),
                        "duplicate at {}",
                        at()
                    );
                }
                assert!(
                    p.elr
                        .as_ref()
                        .is_none_or(|e| !e.elr.is_empty() || !e.last_known_elr.is_empty()),
                    "empty ELR lists kept at {}",
                    at()
                );
                if written_by_controller {
                    assert!(
                        p.elr().iter().all(|b| !p.isr.contains(b)),
                        "an eligible leader replica in the ISR at {}",
                        at()
                    );
                    assert!(
                        p.last_known_elr().len() <= 1,
                        "more than one last known leader at {}",
                        at()
                    );
                }
                if let Some(leader) = p.leader {
                    assert!(
                        p.replicas.contains(&leader),
                        "leader not a replica at {}",
                        at()
                    );
                }
                assert_eq!(
                    p.directories.len(),
                    p.replicas.len(),
                    "one directory per replica at {}",
                    at()
                );
                if written_by_controller {
                    // With eligible leader replicas a recovering leader may leave too: the
                    // ISR is then empty (the state stays until a leader recovers).
                    assert!(
                        p.leader_recovery_state == LeaderRecoveryState::Recovered
                            || p.isr.len() <= 1,
                        "a recovering leader's ISR is itself alone at {}",
                        at()
                    );
                }
                if let Some(leader) = p.leader.filter(|_| written_by_controller) {
                    assert!(p.isr.contains(&leader), "leader not in ISR at {}", at());
                    assert!(
                        self.brokers.is_unfenced(leader),
                        "leader on a fenced or unknown broker at {}",
                        at()
                    );
                }
            }
        }
        assert_eq!(partitions, self.topics.partition_count());
        assert_eq!(leaderless, self.topics.leaderless_count());
        assert_eq!(self.topics.names().count(), self.topics.len());
        for (name, f) in self.features.iter() {
            assert!(
                1 <= f.min_level && f.min_level <= f.max_level,
                "feature {name}: {f:?}"
            );
        }
        self.controllers.check_structure(written_by_controller);
        self.acls.check_structure();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{LeaderEpoch, PartitionEpoch};
    use crate::records::*;
    use corum_types::Uuid;
    use proptest::prelude::*;

    #[test]
    fn differing_parts_name_the_part() {
        let set = |value: &str| {
            let mut image = MetadataImage::default();
            let record = MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Topic,
                resource_name: "t".into(),
                key: "retention.ms".into(),
                value: Some(value.into()),
            });
            image
                .apply(LogOffset(0), &record)
                .expect("a config record applies");
            image
        };
        assert!(set("1").differing_parts(&set("1")).is_empty());
        assert_eq!(set("1").differing_parts(&set("2")), vec!["configs"]);
        assert_eq!(
            MetadataImage::default().differing_parts(&set("1")),
            vec!["end offset", "configs"]
        );
    }

    fn lrs(recovering: bool) -> LeaderRecoveryState {
        if recovering {
            LeaderRecoveryState::Recovering
        } else {
            LeaderRecoveryState::Recovered
        }
    }

    fn record() -> impl Strategy<Value = MetadataRecord> {
        let node = || (0..4u32).prop_map(NodeId);
        let nodes = move || proptest::collection::vec(node(), 0..4);
        let topic = || (0..3u8).prop_map(|t| TopicId(Uuid([t; 16])));
        let epoch = || (0..3u64).prop_map(BrokerEpoch);
        // A few directory ids, MIGRATING among them.
        let dir = || (0..3u8).prop_map(|d| Uuid([d; 16]));
        prop_oneof![
            (node(), epoch()).prop_map(|(broker_id, broker_epoch)| MetadataRecord::RegisterBroker(
                RegisterBrokerRecordV1 {
                    broker_id,
                    incarnation_id: Uuid::ZERO,
                    broker_epoch,
                    listeners: vec![],
                    features: vec![],
                    rack: None,
                }
            )),
            (node(), epoch(), proptest::option::of("[ab]{0,2}")).prop_map(
                |(broker_id, broker_epoch, rack)| MetadataRecord::RegisterBroker(
                    RegisterBrokerRecordV1 {
                        broker_id,
                        incarnation_id: Uuid([broker_id.0 as u8; 16]),
                        broker_epoch,
                        listeners: vec![ListenerV1 {
                            name: "PLAINTEXT".into(),
                            host: format!("b{broker_id}"),
                            port: 9092,
                        }],
                        // Out of order: replay sorts them.
                        features: ["z.version", "metadata.version"]
                            .into_iter()
                            .map(|name| SupportedFeatureV1 {
                                name: name.into(),
                                min_level: 1,
                                max_level: 2,
                            })
                            .collect(),
                        rack,
                    }
                )
            ),
            (node(), epoch(), any::<bool>()).prop_map(|(broker_id, broker_epoch, shutdown)| {
                MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecordV1 {
                    broker_id,
                    broker_epoch,
                    in_controlled_shutdown: shutdown,
                })
            }),
            (any::<bool>(), 0..3u8, 0..2u8, proptest::option::of(0..3u8)).prop_map(
                |(topic, name, key, value)| MetadataRecord::Config(ConfigRecordV1 {
                    resource_type: if topic {
                        ConfigResourceType::Topic
                    } else {
                        ConfigResourceType::Broker
                    },
                    resource_name: format!("n{name}"),
                    key: format!("k{key}"),
                    value: value.map(|v| v.to_string()),
                })
            ),
            Just(MetadataRecord::NoOp(NoOpRecordV1 {})),
            (node(), epoch()).prop_map(|(broker_id, broker_epoch)| MetadataRecord::UnfenceBroker(
                UnfenceBrokerRecordV1 {
                    broker_id,
                    broker_epoch
                }
            )),
            (node(), epoch()).prop_map(|(broker_id, broker_epoch)| MetadataRecord::FenceBroker(
                FenceBrokerRecordV1 {
                    broker_id,
                    broker_epoch
                }
            )),
            (node(), epoch()).prop_map(|(broker_id, broker_epoch)| {
                MetadataRecord::UnregisterBroker(UnregisterBrokerRecordV1 {
                    broker_id,
                    broker_epoch,
                })
            }),
            (topic(), 0..3u8, any::<bool>()).prop_map(|(topic_id, n, deleting)| {
                MetadataRecord::Topic(TopicRecordV1 {
                    name: format!("n{n}"),
                    topic_id,
                    deleting,
                })
            }),
            topic()
                .prop_map(|topic_id| MetadataRecord::RemoveTopic(RemoveTopicRecordV1 { topic_id })),
            (
                topic(),
                0..3u32,
                nodes(),
                nodes(),
                proptest::option::of(node())
            )
                .prop_map(|(topic_id, p, replicas, isr, leader)| {
                    MetadataRecord::Partition(PartitionRecordV1 {
                        topic_id,
                        partition_id: PartitionId(p),
                        replicas,
                        isr,
                        leader,
                        leader_epoch: LeaderEpoch(0),
                        partition_epoch: PartitionEpoch(0),
                    })
                }),
            (topic(), 0..3u32, proptest::option::of(node())).prop_map(|(topic_id, p, leader)| {
                MetadataRecord::PartitionLeaderChange(PartitionLeaderChangeRecordV1 {
                    topic_id,
                    partition_id: PartitionId(p),
                    leader,
                    leader_epoch: LeaderEpoch(1),
                    partition_epoch: PartitionEpoch(1),
                })
            }),
            (topic(), 0..3u32, nodes()).prop_map(|(topic_id, p, isr)| {
                MetadataRecord::PartitionIsrChange(PartitionIsrChangeRecordV1 {
                    topic_id,
                    partition_id: PartitionId(p),
                    isr,
                    partition_epoch: PartitionEpoch(1),
                })
            }),
            (0..3u16, 0..3u16).prop_map(|(min_level, max_level)| MetadataRecord::FeatureLevel(
                FeatureLevelRecordV1 {
                    name: "f".into(),
                    min_level,
                    max_level
                }
            )),
            (0..3000u64).prop_map(|next_producer_id| MetadataRecord::ProducerIds(
                ProducerIdsRecordV1 {
                    broker_id: NodeId(0),
                    broker_epoch: BrokerEpoch(0),
                    next_producer_id
                }
            )),
            (
                node(),
                epoch(),
                any::<(bool, bool)>(),
                proptest::collection::vec(dir(), 0..3)
            )
                .prop_map(|(broker_id, broker_epoch, (fenced, shutdown), log_dirs)| {
                    MetadataRecord::RegisterBrokerV2(Box::new(RegisterBrokerRecordV2 {
                        broker_id,
                        incarnation_id: Uuid([broker_id.0 as u8; 16]),
                        broker_epoch,
                        endpoints: vec![BrokerEndpointV1 {
                            name: "SSL".into(),
                            host: format!("b{broker_id}"),
                            port: 9093,
                            security_protocol: 1,
                        }],
                        // Out of order: replay sorts them.
                        features: ["z.version", "metadata.version"]
                            .into_iter()
                            .map(|name| SupportedFeatureV1 {
                                name: name.into(),
                                min_level: 1,
                                max_level: 2,
                            })
                            .collect(),
                        rack: None,
                        fenced,
                        in_controlled_shutdown: shutdown,
                        log_dirs,
                    }))
                }),
            (node(), epoch(), 0..3u8, any::<bool>()).prop_map(
                |(broker_id, broker_epoch, f, shutdown)| {
                    MetadataRecord::BrokerRegistrationChangeV2(BrokerRegistrationChangeRecordV2 {
                        broker_id,
                        broker_epoch,
                        fenced: [
                            FencingChange::Unchanged,
                            FencingChange::Fence,
                            FencingChange::Unfence,
                        ][usize::from(f)],
                        in_controlled_shutdown: shutdown,
                    })
                }
            ),
            (
                topic(),
                0..3u32,
                nodes(),
                nodes(),
                proptest::option::of(node()),
                any::<bool>(),
                proptest::option::of(proptest::collection::vec(dir(), 0..4)),
            )
                .prop_map(|(topic_id, p, replicas, isr, leader, recovering, dirs)| {
                    MetadataRecord::PartitionV2(PartitionRecordV2 {
                        topic_id,
                        partition_id: PartitionId(p),
                        // Mostly one per replica; sometimes none (MIGRATING) or a wrong count.
                        directories: dirs.unwrap_or_else(|| {
                            replicas.iter().map(|b| Uuid([b.0 as u8 + 1; 16])).collect()
                        }),
                        replicas,
                        isr,
                        leader,
                        leader_recovery_state: lrs(recovering),
                        leader_epoch: LeaderEpoch(0),
                        partition_epoch: PartitionEpoch(0),
                    })
                }),
            (
                topic(),
                0..3u32,
                proptest::option::of(nodes()),
                proptest::option::of(proptest::option::of(node())),
                proptest::option::of(nodes()),
                proptest::option::of(any::<bool>()),
                proptest::option::of(proptest::collection::vec(dir(), 0..4)),
            )
                .prop_map(
                    |(topic_id, p, isr, leader, replicas, recovering, directories)| {
                        MetadataRecord::PartitionChange(PartitionChangeRecordV1 {
                            topic_id,
                            partition_id: PartitionId(p),
                            isr,
                            leader: match leader {
                                None => LeaderChange::Unchanged,
                                Some(None) => LeaderChange::NoLeader,
                                Some(Some(b)) => LeaderChange::Broker(b),
                            },
                            replicas,
                            leader_recovery_state: recovering.map(lrs),
                            directories,
                        })
                    }
                ),
            (
                topic(),
                0..3u32,
                nodes(),
                nodes(),
                proptest::option::of(node()),
                nodes(),
                nodes(),
            )
                .prop_map(
                    |(topic_id, p, replicas, isr, leader, elr, last_known_elr)| {
                        MetadataRecord::PartitionV3(Box::new(PartitionRecordV3 {
                            topic_id,
                            partition_id: PartitionId(p),
                            directories: replicas
                                .iter()
                                .map(|b| Uuid([b.0 as u8 + 1; 16]))
                                .collect(),
                            replicas,
                            isr,
                            leader,
                            leader_recovery_state: LeaderRecoveryState::Recovered,
                            leader_epoch: LeaderEpoch(0),
                            partition_epoch: PartitionEpoch(0),
                            eligible_leader_replicas: elr,
                            last_known_elr,
                        }))
                    }
                ),
            (
                topic(),
                0..3u32,
                proptest::option::of(nodes()),
                proptest::option::of(proptest::option::of(node())),
                proptest::option::of(nodes()),
                proptest::option::of(nodes()),
            )
                .prop_map(|(topic_id, p, isr, leader, elr, last_known_elr)| {
                    MetadataRecord::PartitionChangeV2(Box::new(PartitionChangeRecordV2 {
                        topic_id,
                        partition_id: PartitionId(p),
                        isr,
                        leader: match leader {
                            None => LeaderChange::Unchanged,
                            Some(None) => LeaderChange::NoLeader,
                            Some(Some(b)) => LeaderChange::Broker(b),
                        },
                        replicas: None,
                        leader_recovery_state: None,
                        directories: None,
                        eligible_leader_replicas: elr,
                        last_known_elr,
                    }))
                }),
            (0..4u8).prop_map(|n| MetadataRecord::ClearElr(ClearElrRecordV1 {
                // "" clears every topic; n3 names no topic of these records.
                topic_name: if n == 0 {
                    String::new()
                } else {
                    format!("n{}", n - 1)
                },
            })),
            (
                node(),
                0..3u8,
                proptest::collection::vec((0..3u8, 0..3u16), 0..3)
            )
                .prop_map(|(controller_id, incarnation, features)| {
                    MetadataRecord::RegisterController(RegisterControllerRecordV1 {
                        controller_id,
                        incarnation_id: Uuid([incarnation; 16]),
                        // Out of order: replay sorts them.
                        end_points: ["KAFKA", "CONTROLLER"]
                            .into_iter()
                            .map(|name| ControllerEndpointV1 {
                                name: name.into(),
                                host: format!("c{controller_id}"),
                                port: 9093,
                                security_protocol: 0,
                            })
                            .collect(),
                        features: features
                            .into_iter()
                            .map(|(f, max_level)| SupportedFeatureV1 {
                                name: format!("f{f}"),
                                min_level: 0,
                                max_level,
                            })
                            .collect(),
                    })
                }),
            // SCRAM credentials: a few users, mechanism codes 0 (unknown) to 2, keys of the
            // right length or not, iterations in Kafka's range or below it.
            (0..3u8, 0..3i8, any::<bool>(), any::<bool>(), 0..3u8).prop_map(
                |(user, mechanism, good_len, good_iterations, salt)| {
                    let len = match (good_len, mechanism) {
                        (true, 2) => 64,
                        (true, _) => 32,
                        (false, _) => 31,
                    };
                    MetadataRecord::UserScramCredential(
                        crate::records::UserScramCredentialRecordV1 {
                            name: if user == 0 {
                                String::new()
                            } else {
                                format!("u{user}")
                            },
                            mechanism,
                            salt: vec![salt; usize::from(salt)],
                            stored_key: vec![salt; len],
                            server_key: vec![user; len],
                            iterations: if good_iterations { 4096 } else { 4095 },
                        },
                    )
                }
            ),
            (0..3u8, 0..3i8).prop_map(|(user, mechanism)| {
                MetadataRecord::RemoveUserScramCredential(
                    crate::records::RemoveUserScramCredentialRecordV1 {
                        name: format!("u{user}"),
                        mechanism,
                    },
                )
            }),
        ]
    }

    #[test]
    fn an_epoch_at_its_maximum_is_refused_not_wrapped() {
        // Found by the controller_records fuzz target: a PartitionChange (or ClearElr) on a
        // partition whose epoch a record set to u32::MAX overflowed in replay (a panic with
        // overflow checks, a wrapped epoch without). It is now refused, changing nothing.
        let t = TopicId(Uuid([7; 16]));
        let partition = |leader_epoch: u32, partition_epoch: u32, elr: Vec<NodeId>| {
            MetadataRecord::PartitionV3(Box::new(PartitionRecordV3 {
                topic_id: t,
                partition_id: PartitionId(0),
                replicas: vec![NodeId(1), NodeId(2)],
                isr: vec![NodeId(1)],
                leader: Some(NodeId(1)),
                leader_recovery_state: LeaderRecoveryState::Recovered,
                leader_epoch: LeaderEpoch(leader_epoch),
                partition_epoch: PartitionEpoch(partition_epoch),
                directories: vec![],
                eligible_leader_replicas: elr,
                last_known_elr: vec![],
            }))
        };
        let change = |leader: LeaderChange| {
            MetadataRecord::PartitionChange(PartitionChangeRecordV1 {
                topic_id: t,
                partition_id: PartitionId(0),
                isr: None,
                leader,
                replicas: None,
                leader_recovery_state: None,
                directories: None,
            })
        };
        let topic = MetadataRecord::Topic(TopicRecordV1 {
            name: "t".into(),
            topic_id: t,
            deleting: false,
        });
        let clear = MetadataRecord::ClearElr(ClearElrRecordV1 {
            topic_name: "t".into(),
        });
        for (p, last) in [
            (
                partition(1, u32::MAX, vec![]),
                change(LeaderChange::Unchanged),
            ),
            (
                partition(u32::MAX, 1, vec![]),
                change(LeaderChange::Broker(NodeId(2))),
            ),
            (
                partition(u32::MAX, 1, vec![]),
                change(LeaderChange::NoLeader),
            ),
            (partition(1, u32::MAX, vec![NodeId(2)]), clear.clone()),
        ] {
            let mut image = MetadataImage::default();
            image.apply(LogOffset(0), &topic).unwrap();
            image.apply(LogOffset(1), &p).unwrap();
            let before = image.clone();
            let bytes = encode_batch(std::slice::from_ref(&last));
            let err = image
                .replay(LogOffset(2), &decode_batch(&bytes).unwrap()[0])
                .unwrap_err();
            assert!(
                matches!(err, ReplayError::InvalidPartition { .. }),
                "{last:?}: {err}"
            );
            assert_eq!(image, before, "{last:?} changed the image");
            assert_eq!(image.apply(LogOffset(2), &last).unwrap_err(), err);
        }
        // Below the maximum, the same changes apply.
        let mut image = MetadataImage::default();
        image.apply(LogOffset(0), &topic).unwrap();
        image
            .apply(LogOffset(1), &partition(u32::MAX - 1, u32::MAX - 1, vec![]))
            .unwrap();
        image
            .apply(LogOffset(2), &change(LeaderChange::Broker(NodeId(1))))
            .unwrap();
    }

    proptest! {
        /// Arbitrary (possibly inconsistent) records never panic replay: each applies, or is
        /// rejected leaving the image exactly as it was; and replaying the same records twice
        /// yields the same image.
        #[test]
        fn replay_rejects_without_change(records in proptest::collection::vec(record(), 0..40)) {
            let bytes = encode_batch(&records);
            let batch = decode_batch(&bytes).unwrap();
            let mut a = MetadataImage::default();
            let mut b = MetadataImage::default();
            for (i, r) in batch.iter().enumerate() {
                let before = a.clone();
                let ra = a.replay(LogOffset(i as u64), r);
                let rb = b.replay(LogOffset(i as u64), r);
                prop_assert_eq!(ra.is_ok(), rb.is_ok());
                if ra.is_err() {
                    prop_assert_eq!(&before, &a);
                }
                prop_assert_eq!(&a, &b);
            }
            a.check_invariants_structural();
        }
    }

    proptest! {
        /// Applying owned records (the active controller's own proposals) checks and changes
        /// exactly what replaying their encoding does: the same result for every record, the
        /// same image after each, whatever the (possibly inconsistent) sequence.
        #[test]
        fn apply_is_replay_of_the_encoding(records in proptest::collection::vec(record(), 0..60)) {
            let bytes = encode_batch(&records);
            let batch = decode_batch(&bytes).unwrap();
            let mut replayed = MetadataImage::default();
            let mut applied = MetadataImage::default();
            for (i, (owned, archived)) in records.iter().zip(batch.iter()).enumerate() {
                let offset = LogOffset(i as u64);
                prop_assert_eq!(
                    applied.apply(offset, owned),
                    replayed.replay(offset, archived),
                    "record {} {:?}", i, owned
                );
                prop_assert_eq!(&applied, &replayed);
            }
            // And both refuse an offset already applied.
            if let Some(r) = records.first() {
                let past = LogOffset(0);
                if applied.end_offset > past {
                    prop_assert!(applied.apply(past, r).is_err());
                }
            }
        }
    }

    /// Topic `a` (id `t`) and its partition 0 without a leader.
    fn topic_a_with_partition_0(
        t: TopicId,
        replicas: Vec<NodeId>,
        isr: Vec<NodeId>,
    ) -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::Topic(TopicRecordV1 {
                name: "a".into(),
                topic_id: t,
                deleting: false,
            }),
            MetadataRecord::Partition(PartitionRecordV1 {
                topic_id: t,
                partition_id: PartitionId(0),
                replicas,
                isr,
                leader: None,
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(0),
            }),
        ]
    }

    /// A reader's clone is a frozen snapshot: later replay on the original does not show in it,
    /// and the clone shares structure (no deep copy happened until the write).
    #[test]
    fn clones_are_independent_snapshots() {
        let t = TopicId(Uuid([1; 16]));
        let mut recs = topic_a_with_partition_0(t, vec![NodeId(1)], vec![NodeId(1)]);
        recs.push(MetadataRecord::RemoveTopic(RemoveTopicRecordV1 {
            topic_id: t,
        }));
        let bytes = encode_batch(&recs);
        let batch = decode_batch(&bytes).unwrap();
        let mut image = MetadataImage::default();
        image.replay(LogOffset(0), &batch[0]).unwrap();
        image.replay(LogOffset(1), &batch[1]).unwrap();
        let reader = image.clone();
        let shared = reader.topics.get_shared(t).unwrap();
        assert!(std::sync::Arc::ptr_eq(
            &shared,
            &image.topics.get_shared(t).unwrap()
        ));
        image.replay(LogOffset(2), &batch[2]).unwrap();
        assert!(image.topics.get(t).is_none());
        assert_eq!(reader.topics.get(t).unwrap().partitions.len(), 1);
        assert_eq!(reader.end_offset, LogOffset(2));
    }

    /// A V1 leader change that would give a leader to a partition with an empty ISR is refused
    /// and changes nothing: a snapshot of the image it left would not load (found by
    /// `snapshot_records_rebuild_the_image`).
    #[test]
    fn a_leader_needs_an_isr() {
        let t = TopicId(Uuid([1; 16]));
        let leader_change = |leader| {
            MetadataRecord::PartitionLeaderChange(PartitionLeaderChangeRecordV1 {
                topic_id: t,
                partition_id: PartitionId(0),
                leader,
                leader_epoch: LeaderEpoch(1),
                partition_epoch: PartitionEpoch(1),
            })
        };
        let mut recs = topic_a_with_partition_0(t, vec![NodeId(1), NodeId(2)], vec![]);
        recs.extend([leader_change(Some(NodeId(2))), leader_change(None)]);
        let bytes = encode_batch(&recs);
        let batch = decode_batch(&bytes).unwrap();
        let mut image = MetadataImage::default();
        image.replay(LogOffset(0), &batch[0]).unwrap();
        image.replay(LogOffset(1), &batch[1]).unwrap();
        let before = image.topics.clone();
        assert!(matches!(
            image.replay(LogOffset(2), &batch[2]),
            Err(ReplayError::InvalidPartition { .. })
        ));
        assert_eq!(image.topics, before);
        image.replay(LogOffset(3), &batch[3]).unwrap();
        let p = image.topics.partition(t, PartitionId(0)).unwrap();
        assert_eq!((p.leader, p.partition_epoch), (None, PartitionEpoch(1)));
        let snap = encode_batch(&image.snapshot_records());
        let rebuilt =
            MetadataImage::from_snapshot(image.end_offset, decode_batch(&snap).unwrap()).unwrap();
        assert_eq!(rebuilt, image);
    }

    /// ClearElr empties the eligible leader replicas and last known ELR of the named topic's
    /// partitions (or every topic's, with no name), growing the partition epoch of each one
    /// that had either and of no other; a name no topic has is refused, changing nothing.
    #[test]
    fn clear_elr_empties_the_lists_and_counts_an_epoch() {
        let (a, b) = (TopicId(Uuid([1; 16])), TopicId(Uuid([2; 16])));
        let ids = |v: &[u32]| v.iter().map(|b| NodeId(*b)).collect::<Vec<_>>();
        let partition = |topic_id, p: u32, elr: &[u32], lke: &[u32]| {
            MetadataRecord::partition(PartitionRecordV3 {
                topic_id,
                partition_id: PartitionId(p),
                replicas: ids(&[1, 2, 3]),
                isr: vec![],
                leader: None,
                leader_recovery_state: LeaderRecoveryState::Recovered,
                leader_epoch: LeaderEpoch(4),
                partition_epoch: PartitionEpoch(9),
                directories: vec![],
                eligible_leader_replicas: ids(elr),
                last_known_elr: ids(lke),
            })
        };
        let topic = |name: &str, topic_id| {
            MetadataRecord::Topic(TopicRecordV1 {
                name: name.into(),
                topic_id,
                deleting: false,
            })
        };
        let clear = |name: &str| {
            MetadataRecord::ClearElr(ClearElrRecordV1 {
                topic_name: name.into(),
            })
        };
        let mut image = MetadataImage::default();
        let setup = [
            topic("a", a),
            partition(a, 0, &[2, 3], &[]),
            partition(a, 1, &[], &[1]),
            partition(a, 2, &[], &[]),
            topic("b", b),
            partition(b, 0, &[1], &[2]),
        ];
        for (i, r) in setup.iter().enumerate() {
            image.apply(LogOffset(i as u64), r).unwrap();
        }
        let epochs = |image: &MetadataImage, t| {
            image
                .topics
                .get(t)
                .unwrap()
                .partitions
                .iter()
                .map(|p| p.partition_epoch.0)
                .collect::<Vec<_>>()
        };
        let before = image.clone();
        assert!(matches!(
            image.apply(LogOffset(6), &clear("c")),
            Err(ReplayError::UnknownTopicName { .. })
        ));
        assert_eq!(image, before);
        image.apply(LogOffset(6), &clear("a")).unwrap();
        assert_eq!(epochs(&image, a), [10, 10, 9]);
        assert!(image
            .topics
            .get(a)
            .unwrap()
            .partitions
            .iter()
            .all(|p| p.elr.is_none()));
        assert_eq!(epochs(&image, b), [9]);
        assert_eq!(
            image.topics.partition(b, PartitionId(0)).unwrap().elr(),
            ids(&[1])
        );
        image.apply(LogOffset(7), &clear("")).unwrap();
        assert_eq!(epochs(&image, a), [10, 10, 9]);
        assert_eq!(epochs(&image, b), [10]);
        let p = image.topics.partition(b, PartitionId(0)).unwrap();
        assert!(p.elr().is_empty() && p.last_known_elr().is_empty());
        image.check_invariants_structural();
    }

    proptest! {
        /// Snapshot records of any image reachable by replay rebuild exactly that image.
        #[test]
        fn snapshot_records_rebuild_the_image(records in proptest::collection::vec(record(), 0..60)) {
            let bytes = encode_batch(&records);
            let mut image = MetadataImage::default();
            for (i, r) in decode_batch(&bytes).unwrap().iter().enumerate() {
                let _ = image.replay(LogOffset(i as u64), r);
            }
            let snap = encode_batch(&image.snapshot_records());
            let rebuilt =
                MetadataImage::from_snapshot(image.end_offset, decode_batch(&snap).unwrap()).unwrap();
            prop_assert_eq!(rebuilt, image);
        }
    }
}
