//! Topics and their partitions.
//!
//! Memory layout (compact for ~1M partitions): a topic holds its partitions in one `Vec`, indexed
//! by partition id; a partition is 96 bytes with its replica and ISR lists inline (up to 4 ids
//! each, spilling to the heap beyond), ids as `u32`, a shared list of its replicas' log
//! directories (16 bytes per replica on the heap), and its eligible leader replicas behind one
//! pointer that is null for a partition without any (the usual case). Topics are shared `Arc`s in persistent maps,
//! so cloning the image is O(1) and a write after a clone copies only the path to the changed
//! topic plus that topic's partition vector (readers keep their snapshot untouched).
//!
//! Topic lifecycle: `Topic{deleting: false}` creates (with its `Partition` records after it),
//! `RemoveTopic` removes the topic, its partitions and its configs (as Kafka's TopicRecord and
//! RemoveTopicRecord). Logs of older controllers also hold `Topic{deleting: true}`, a deletion
//! intent (the name stays taken, the topic is hidden from admin requests) that the active
//! controller completes with `RemoveTopic`.
//!
//! Partition changes (Kafka's `PartitionRegistration.merge`): a `PartitionChange` record sets
//! the fields it names and grows the partition epoch by one, and the leader epoch by one when it
//! names a leader (even the same one). The V1 `PartitionLeaderChange`/`PartitionIsrChange`
//! records of older logs carry their epochs and set them. A partition record without
//! directories (V1, or V2 with an empty list) gives every replica the MIGRATING directory, and a
//! change that leaves only MIGRATING directories resizes them to the replicas, as Kafka does.
//!
//! Eligible leader replicas (KIP-966): a `PartitionChangeV2` sets them like any other field, a
//! `ClearElr` empties them (with the last known ELR) in every partition of one topic, or of all,
//! that has either, growing each such partition's epoch by one as Kafka's `removeTopicElrs`
//! does. With them, an ISR may be empty (the partition then has no leader).

use std::sync::Arc;

use corum_types::{LogOffset, NodeId, Uuid};
use imbl::{OrdMap, OrdSet};
use smallvec::SmallVec;

use crate::error::ReplayError;
use crate::ids::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId, MIGRATING_DIR};
use crate::records::{
    ArchivedLeaderChange, ArchivedPartitionChangeRecordV1, ArchivedPartitionChangeRecordV2,
    LeaderChange, LeaderRecoveryState, PartitionChangeRecordV1, PartitionChangeRecordV2,
};
use rkyv::option::ArchivedOption;

/// A list of broker ids stored inline up to 4 entries.
pub type ReplicaList = SmallVec<[NodeId; 4]>;

/// The log directory of each replica, in replica order (shared: a clone is a reference count).
pub type DirectoryList = Arc<[Uuid]>;

/// A partition's eligible leader replicas and last known ELR (KIP-966): see
/// [`crate::records::PartitionRecordV3`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElrLists {
    pub elr: ReplicaList,
    pub last_known_elr: ReplicaList,
}

/// One partition's replication state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionImage {
    /// Assigned replicas; the first is the preferred leader.
    pub replicas: ReplicaList,
    /// In-sync replicas, a subset of `replicas`; empty only when the partition has no leader
    /// (eligible leader replicas let the last member leave).
    pub isr: ReplicaList,
    /// One per replica, in the same order (KIP-858).
    pub directories: DirectoryList,
    pub leader: Option<NodeId>,
    pub leader_recovery_state: LeaderRecoveryState,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    /// The eligible leader replicas and last known ELR; `None` when both are empty, which
    /// [`PartitionImage::with_elr`] keeps canonical (so equal states compare equal).
    pub elr: Option<Arc<ElrLists>>,
}

impl PartitionImage {
    /// The eligible leader replicas (KIP-966), in the order recorded.
    pub fn elr(&self) -> &[NodeId] {
        self.elr.as_ref().map_or(&[], |e| &e.elr)
    }

    /// The last known ELR: the leader the partition had when its ISR became empty.
    pub fn last_known_elr(&self) -> &[NodeId] {
        self.elr.as_ref().map_or(&[], |e| &e.last_known_elr)
    }

    /// This partition with `elr` and `last_known_elr` as its lists.
    pub fn with_elr(mut self, elr: ReplicaList, last_known_elr: ReplicaList) -> PartitionImage {
        self.elr = elr_lists(elr, last_known_elr);
        self
    }

    /// The log directory of `broker`'s replica, if it is a replica.
    pub fn directory(&self, broker: NodeId) -> Option<Uuid> {
        self.replicas
            .iter()
            .position(|r| *r == broker)
            .map(|i| self.directories[i])
    }
}

/// The lists as a partition keeps them: `None` when both are empty.
pub(crate) fn elr_lists(elr: ReplicaList, last_known_elr: ReplicaList) -> Option<Arc<ElrLists>> {
    if elr.is_empty() && last_known_elr.is_empty() {
        return None;
    }
    Some(Arc::new(ElrLists {
        elr,
        last_known_elr,
    }))
}

/// `dirs` as a partition of `replicas` holds them: an empty or all-MIGRATING list becomes one
/// MIGRATING directory per replica (Kafka's `defaultToMigrating`).
pub(crate) fn directories_for(replicas: usize, dirs: Vec<Uuid>) -> DirectoryList {
    if dirs.iter().all(|d| *d == MIGRATING_DIR) {
        return vec![MIGRATING_DIR; replicas].into();
    }
    dirs.into()
}

/// One partition change, decoded from a record (owned or archived) before it is checked.
pub(crate) struct PartitionDelta {
    pub isr: Option<ReplicaList>,
    pub leader: LeaderChange,
    pub replicas: Option<ReplicaList>,
    pub leader_recovery_state: Option<LeaderRecoveryState>,
    pub directories: Option<Vec<Uuid>>,
    pub elr: Option<ReplicaList>,
    pub last_known_elr: Option<ReplicaList>,
}

impl PartitionDelta {
    pub(crate) fn from_archived(r: &ArchivedPartitionChangeRecordV1) -> PartitionDelta {
        PartitionDelta {
            isr: r.isr.as_ref().map(ids_from),
            leader: match &r.leader {
                ArchivedLeaderChange::Unchanged => LeaderChange::Unchanged,
                ArchivedLeaderChange::NoLeader => LeaderChange::NoLeader,
                ArchivedLeaderChange::Broker(b) => LeaderChange::Broker(NodeId::from(b)),
            },
            replicas: r.replicas.as_ref().map(ids_from),
            leader_recovery_state: r
                .leader_recovery_state
                .as_ref()
                .map(LeaderRecoveryState::from_archived),
            directories: r
                .directories
                .as_ref()
                .map(|d| d.iter().map(Uuid::from).collect()),
            elr: None,
            last_known_elr: None,
        }
    }

    pub(crate) fn from_archived_v2(r: &ArchivedPartitionChangeRecordV2) -> PartitionDelta {
        PartitionDelta {
            isr: r.isr.as_ref().map(ids_from),
            leader: match &r.leader {
                ArchivedLeaderChange::Unchanged => LeaderChange::Unchanged,
                ArchivedLeaderChange::NoLeader => LeaderChange::NoLeader,
                ArchivedLeaderChange::Broker(b) => LeaderChange::Broker(NodeId::from(b)),
            },
            replicas: r.replicas.as_ref().map(ids_from),
            leader_recovery_state: r
                .leader_recovery_state
                .as_ref()
                .map(LeaderRecoveryState::from_archived),
            directories: r
                .directories
                .as_ref()
                .map(|d| d.iter().map(Uuid::from).collect()),
            elr: r.eligible_leader_replicas.as_ref().map(ids_from),
            last_known_elr: r.last_known_elr.as_ref().map(ids_from),
        }
    }

    pub(crate) fn from_record(r: &PartitionChangeRecordV1) -> PartitionDelta {
        PartitionDelta {
            isr: r.isr.as_deref().map(ReplicaList::from_slice),
            leader: r.leader,
            replicas: r.replicas.as_deref().map(ReplicaList::from_slice),
            leader_recovery_state: r.leader_recovery_state,
            directories: r.directories.clone(),
            elr: None,
            last_known_elr: None,
        }
    }

    pub(crate) fn from_record_v2(r: &PartitionChangeRecordV2) -> PartitionDelta {
        PartitionDelta {
            elr: r
                .eligible_leader_replicas
                .as_deref()
                .map(ReplicaList::from_slice),
            last_known_elr: r.last_known_elr.as_deref().map(ReplicaList::from_slice),
            ..PartitionDelta::from_record(&r.without_elr())
        }
    }
}

/// One topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicImage {
    pub topic_id: TopicId,
    pub name: Arc<str>,
    pub deleting: bool,
    pub partitions: Vec<PartitionImage>,
}

/// Every topic, by id and by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicsImage {
    by_id: OrdMap<TopicId, Arc<TopicImage>>,
    by_name: OrdMap<Arc<str>, TopicId>,
    deleting: OrdSet<TopicId>,
    partition_count: usize,
    /// Partitions without a leader, so the periodic election can skip its scan when none.
    leaderless_count: usize,
}

pub(crate) fn ids_from(a: &rkyv::vec::ArchivedVec<corum_types::ArchivedNodeId>) -> ReplicaList {
    a.iter().map(NodeId::from).collect()
}

pub(crate) fn leader_from(a: &ArchivedOption<corum_types::ArchivedNodeId>) -> Option<NodeId> {
    a.as_ref().map(NodeId::from)
}

fn has_duplicates(ids: &[NodeId]) -> bool {
    ids.iter().enumerate().any(|(i, a)| ids[..i].contains(a))
}

impl TopicsImage {
    pub fn get(&self, topic_id: TopicId) -> Option<&TopicImage> {
        self.by_id.get(&topic_id).map(|t| &**t)
    }

    pub fn get_by_name(&self, name: &str) -> Option<&TopicImage> {
        self.by_name.get(name).and_then(|id| self.get(*id))
    }

    /// Shared handle of a topic, for readers that keep it past the image's lifetime.
    pub fn get_shared(&self, topic_id: TopicId) -> Option<Arc<TopicImage>> {
        self.by_id.get(&topic_id).cloned()
    }

    pub fn partition(&self, topic_id: TopicId, partition: PartitionId) -> Option<&PartitionImage> {
        self.get(topic_id)
            .and_then(|t| t.partitions.get(partition.0 as usize))
    }

    /// Topics in id order.
    pub fn iter(&self) -> impl Iterator<Item = &TopicImage> + '_ {
        self.by_id.values().map(|t| &**t)
    }

    /// Topic names in name order, with their ids.
    pub fn names(&self) -> impl Iterator<Item = (&str, TopicId)> + '_ {
        self.by_name.iter().map(|(n, id)| (&**n, *id))
    }

    /// Topics whose deletion is decided but not yet complete, in id order.
    pub fn deleting(&self) -> impl Iterator<Item = TopicId> + '_ {
        self.deleting.iter().copied()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn partition_count(&self) -> usize {
        self.partition_count
    }

    /// Partitions that have no leader.
    pub fn leaderless_count(&self) -> usize {
        self.leaderless_count
    }

    /// True if `topic_id` is already used by a topic.
    pub fn contains_id(&self, topic_id: TopicId) -> bool {
        self.by_id.contains_key(&topic_id)
    }

    pub(crate) fn replay_topic(
        &mut self,
        offset: LogOffset,
        topic_id: TopicId,
        name: &str,
        deleting: bool,
    ) -> Result<(), ReplayError> {
        if let Some(existing) = self.by_name.get(name) {
            if *existing != topic_id {
                return Err(ReplayError::TopicNameTaken {
                    offset,
                    name: name.to_owned(),
                    existing: *existing,
                });
            }
        }
        match self.by_id.get_mut(&topic_id) {
            Some(topic) => {
                // An existing topic: only the deletion flag may change (a rename is not a thing).
                if &*topic.name != name {
                    return Err(ReplayError::TopicNameTaken {
                        offset,
                        name: name.to_owned(),
                        existing: topic_id,
                    });
                }
                Arc::make_mut(topic).deleting = deleting;
            }
            None => {
                let name: Arc<str> = Arc::from(name);
                self.by_name.insert(name.clone(), topic_id);
                self.by_id.insert(
                    topic_id,
                    Arc::new(TopicImage {
                        topic_id,
                        name,
                        deleting,
                        partitions: Vec::new(),
                    }),
                );
            }
        }
        if deleting {
            self.deleting.insert(topic_id);
        } else {
            self.deleting.remove(&topic_id);
        }
        Ok(())
    }

    /// Removes a topic; returns its name so its configs can go too.
    pub(crate) fn replay_remove(
        &mut self,
        offset: LogOffset,
        topic_id: TopicId,
    ) -> Result<Arc<str>, ReplayError> {
        let topic = self
            .by_id
            .remove(&topic_id)
            .ok_or(ReplayError::UnknownTopic { offset, topic_id })?;
        self.by_name.remove(&*topic.name);
        self.deleting.remove(&topic_id);
        self.partition_count -= topic.partitions.len();
        self.leaderless_count -= topic
            .partitions
            .iter()
            .filter(|p| p.leader.is_none())
            .count();
        Ok(topic.name.clone())
    }

    fn topic_mut(
        &mut self,
        offset: LogOffset,
        topic_id: TopicId,
    ) -> Result<&mut TopicImage, ReplayError> {
        self.by_id
            .get_mut(&topic_id)
            .map(Arc::make_mut)
            .ok_or(ReplayError::UnknownTopic { offset, topic_id })
    }

    pub(crate) fn replay_partition(
        &mut self,
        offset: LogOffset,
        topic_id: TopicId,
        pid: PartitionId,
        partition: PartitionImage,
    ) -> Result<(), ReplayError> {
        validate_partition(offset, &partition)?;
        let leaderless = usize::from(partition.leader.is_none());
        let topic = self.topic_mut(offset, topic_id)?;
        let count = topic.partitions.len();
        let index = pid.0 as usize;
        if index < count {
            let was = usize::from(topic.partitions[index].leader.is_none());
            topic.partitions[index] = partition;
            self.leaderless_count = self.leaderless_count - was + leaderless;
        } else if index == count {
            topic.partitions.push(partition);
            self.partition_count += 1;
            self.leaderless_count += leaderless;
        } else {
            return Err(ReplayError::UnknownPartition {
                offset,
                topic_id,
                partition: pid,
                count,
            });
        }
        Ok(())
    }

    fn partition_mut(
        &mut self,
        offset: LogOffset,
        topic_id: TopicId,
        pid: PartitionId,
    ) -> Result<&mut PartitionImage, ReplayError> {
        let topic = self.topic_mut(offset, topic_id)?;
        let count = topic.partitions.len();
        topic
            .partitions
            .get_mut(pid.0 as usize)
            .ok_or(ReplayError::UnknownPartition {
                offset,
                topic_id,
                partition: pid,
                count,
            })
    }

    pub(crate) fn replay_leader_change(
        &mut self,
        offset: LogOffset,
        topic_id: TopicId,
        pid: PartitionId,
        leader: Option<NodeId>,
        leader_epoch: LeaderEpoch,
        partition_epoch: PartitionEpoch,
    ) -> Result<(), ReplayError> {
        let p = self.partition_mut(offset, topic_id, pid)?;
        // The partition it leaves must be valid (a leader is a replica, and only a partition
        // with a non-empty ISR has one), else nothing changes.
        let next = PartitionImage {
            leader,
            leader_epoch,
            partition_epoch,
            ..p.clone()
        };
        validate_partition(offset, &next)?;
        let was = usize::from(p.leader.is_none());
        *p = next;
        self.leaderless_count = self.leaderless_count - was + usize::from(leader.is_none());
        Ok(())
    }

    /// Applies a PartitionChange record (see the module doc): the partition it leaves must be
    /// valid, else nothing changes.
    pub(crate) fn replay_change(
        &mut self,
        offset: LogOffset,
        topic_id: TopicId,
        pid: PartitionId,
        delta: PartitionDelta,
    ) -> Result<(), ReplayError> {
        let p = self.partition_mut(offset, topic_id, pid)?;
        let replicas = delta.replicas.unwrap_or_else(|| p.replicas.clone());
        let directories = match delta.directories {
            Some(dirs) => directories_for(replicas.len(), dirs),
            None if p.directories.iter().all(|d| *d == MIGRATING_DIR) => {
                directories_for(replicas.len(), Vec::new())
            }
            None => p.directories.clone(),
        };
        // A record can carry an epoch at its maximum: the change is then refused, not wrapped.
        let at_max = || ReplayError::InvalidPartition {
            offset,
            reason: "the partition's epoch is at its maximum",
        };
        let (leader, leader_epoch) = match delta.leader {
            LeaderChange::Unchanged => (p.leader, p.leader_epoch),
            LeaderChange::NoLeader => (None, p.leader_epoch.checked_next().ok_or_else(at_max)?),
            LeaderChange::Broker(b) => (Some(b), p.leader_epoch.checked_next().ok_or_else(at_max)?),
        };
        let partition_epoch = p.partition_epoch.checked_next().ok_or_else(at_max)?;
        let next = PartitionImage {
            replicas,
            isr: delta.isr.unwrap_or_else(|| p.isr.clone()),
            directories,
            leader,
            leader_recovery_state: delta
                .leader_recovery_state
                .unwrap_or(p.leader_recovery_state),
            leader_epoch,
            partition_epoch,
            elr: None,
        }
        .with_elr(
            delta.elr.unwrap_or_else(|| p.elr().into()),
            delta
                .last_known_elr
                .unwrap_or_else(|| p.last_known_elr().into()),
        );
        validate_partition(offset, &next)?;
        let was = usize::from(p.leader.is_none());
        *p = next;
        self.leaderless_count = self.leaderless_count - was + usize::from(leader.is_none());
        Ok(())
    }

    /// Applies a ClearElr record (see the module doc): `topic_name` empty clears every topic,
    /// else the topic of that name, which must exist.
    pub(crate) fn replay_clear_elr(
        &mut self,
        offset: LogOffset,
        topic_name: &str,
    ) -> Result<(), ReplayError> {
        let ids: Vec<TopicId> = if topic_name.is_empty() {
            self.by_id
                .iter()
                .filter(|(_, t)| t.partitions.iter().any(|p| p.elr.is_some()))
                .map(|(id, _)| *id)
                .collect()
        } else {
            vec![*self
                .by_name
                .get(topic_name)
                .ok_or_else(|| ReplayError::UnknownTopicName {
                    offset,
                    name: topic_name.to_owned(),
                })?]
        };
        // Every epoch is checked before anything changes: a refused record changes nothing.
        for &topic_id in &ids {
            let topic = self.topic_mut(offset, topic_id)?;
            if topic
                .partitions
                .iter()
                .any(|p| p.elr.is_some() && p.partition_epoch.checked_next().is_none())
            {
                return Err(ReplayError::InvalidPartition {
                    offset,
                    reason: "the partition's epoch is at its maximum",
                });
            }
        }
        for topic_id in ids {
            let topic = self.topic_mut(offset, topic_id)?;
            for p in topic.partitions.iter_mut().filter(|p| p.elr.is_some()) {
                p.elr = None;
                p.partition_epoch = p.partition_epoch.next();
            }
        }
        Ok(())
    }

    pub(crate) fn replay_isr_change(
        &mut self,
        offset: LogOffset,
        topic_id: TopicId,
        pid: PartitionId,
        isr: ReplicaList,
        partition_epoch: PartitionEpoch,
    ) -> Result<(), ReplayError> {
        let p = self.partition_mut(offset, topic_id, pid)?;
        if isr.is_empty() || has_duplicates(&isr) || isr.iter().any(|b| !p.replicas.contains(b)) {
            return Err(ReplayError::InvalidPartition {
                offset,
                reason: "ISR must be a non-empty set of replicas",
            });
        }
        p.isr = isr;
        p.partition_epoch = partition_epoch;
        Ok(())
    }
}

fn validate_partition(offset: LogOffset, p: &PartitionImage) -> Result<(), ReplayError> {
    let (replicas, isr, leader) = (&p.replicas[..], &p.isr[..], p.leader);
    if replicas.is_empty() || has_duplicates(replicas) {
        return Err(ReplayError::InvalidPartition {
            offset,
            reason: "replicas must be a non-empty set",
        });
    }
    if has_duplicates(isr) || isr.iter().any(|b| !replicas.contains(b)) {
        return Err(ReplayError::InvalidPartition {
            offset,
            reason: "ISR must be a set of replicas",
        });
    }
    if isr.is_empty() && leader.is_some() {
        return Err(ReplayError::InvalidPartition {
            offset,
            reason: "a partition with a leader has a non-empty ISR",
        });
    }
    for list in [p.elr(), p.last_known_elr()] {
        if has_duplicates(list) || list.iter().any(|b| !replicas.contains(b)) {
            return Err(ReplayError::InvalidPartition {
                offset,
                reason: "eligible leader replicas and last known ELR must be sets of replicas",
            });
        }
    }
    if leader.is_some_and(|l| !replicas.contains(&l)) {
        return Err(ReplayError::InvalidPartition {
            offset,
            reason: "leader is not a replica",
        });
    }
    if p.directories.len() != replicas.len() {
        return Err(ReplayError::InvalidPartition {
            offset,
            reason: "one directory per replica",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A partition fits in 96 bytes with three replicas inline (and 48 bytes of directories
    /// plus the shared list's header on the heap; eligible leader replicas only when it has
    /// some), the basis of the ≤ 200 bytes per partition target.
    #[test]
    fn partition_is_compact() {
        assert!(
            std::mem::size_of::<PartitionImage>() <= 96,
            "{}",
            std::mem::size_of::<PartitionImage>()
        );
        let p = PartitionImage {
            replicas: [NodeId(1), NodeId(2), NodeId(3)].into_iter().collect(),
            isr: [NodeId(1), NodeId(2), NodeId(3)].into_iter().collect(),
            directories: directories_for(3, vec![]),
            leader: Some(NodeId(1)),
            leader_recovery_state: LeaderRecoveryState::Recovered,
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
            elr: None,
        };
        assert!(!p.replicas.spilled() && !p.isr.spilled());
    }
}
