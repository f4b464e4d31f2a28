//! Topics and their partitions.
//!
//! Memory layout (compact for ~1M partitions): a topic holds its partitions in one `Vec`, indexed
//! by partition id; a partition is 64 bytes with its replica and ISR lists inline (up to 4 ids
//! each, spilling to the heap beyond), ids as `u32`. Topics are shared `Arc`s in persistent maps,
//! so cloning the image is O(1) and a write after a clone copies only the path to the changed
//! topic plus that topic's partition vector (readers keep their snapshot untouched).
//!
//! Topic lifecycle: `Topic{deleting: false}` creates (with its `Partition` records after it),
//! `Topic{deleting: true}` marks the deletion intent (the name stays taken, the topic is hidden
//! from admin requests), `RemoveTopic` removes the topic, its partitions and its configs.

use std::sync::Arc;

use corum_types::{LogOffset, NodeId};
use imbl::{OrdMap, OrdSet};
use smallvec::SmallVec;

use crate::error::ReplayError;
use crate::ids::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId};
use rkyv::option::ArchivedOption;

/// A list of broker ids stored inline up to 4 entries.
pub type ReplicaList = SmallVec<[NodeId; 4]>;

/// One partition's replication state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionImage {
    /// Assigned replicas; the first is the preferred leader.
    pub replicas: ReplicaList,
    /// In-sync replicas, a non-empty subset of `replicas`.
    pub isr: ReplicaList,
    pub leader: Option<NodeId>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
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
        validate_partition(
            offset,
            &partition.replicas,
            &partition.isr,
            partition.leader,
        )?;
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
        if let Some(l) = leader {
            if !p.replicas.contains(&l) {
                return Err(ReplayError::InvalidPartition {
                    offset,
                    reason: "leader is not a replica",
                });
            }
        }
        let was = usize::from(p.leader.is_none());
        p.leader = leader;
        p.leader_epoch = leader_epoch;
        p.partition_epoch = partition_epoch;
        self.leaderless_count = self.leaderless_count - was + usize::from(leader.is_none());
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

fn validate_partition(
    offset: LogOffset,
    replicas: &[NodeId],
    isr: &[NodeId],
    leader: Option<NodeId>,
) -> Result<(), ReplayError> {
    if replicas.is_empty() || has_duplicates(replicas) {
        return Err(ReplayError::InvalidPartition {
            offset,
            reason: "replicas must be a non-empty set",
        });
    }
    if isr.is_empty() || has_duplicates(isr) || isr.iter().any(|b| !replicas.contains(b)) {
        return Err(ReplayError::InvalidPartition {
            offset,
            reason: "ISR must be a non-empty set of replicas",
        });
    }
    if leader.is_some_and(|l| !replicas.contains(&l)) {
        return Err(ReplayError::InvalidPartition {
            offset,
            reason: "leader is not a replica",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A partition fits in 64 bytes with three replicas inline, the basis of the ≤ 200 bytes per
    /// partition target.
    #[test]
    fn partition_is_compact() {
        assert!(
            std::mem::size_of::<PartitionImage>() <= 64,
            "{}",
            std::mem::size_of::<PartitionImage>()
        );
        let p = PartitionImage {
            replicas: [NodeId(1), NodeId(2), NodeId(3)].into_iter().collect(),
            isr: [NodeId(1), NodeId(2), NodeId(3)].into_iter().collect(),
            leader: Some(NodeId(1)),
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
        };
        assert!(!p.replicas.spilled() && !p.isr.spilled());
    }
}
