//! Value types shared by the core, its messages and its driver: replica identity, voter sets,
//! batches, snapshots and the persisted quorum state.

use std::sync::Arc;

use corum_types::{Epoch, LogOffset, NodeId, Uuid};

use crate::error::{Error, Result};

/// Opaque payload bytes of a batch or snapshot; cheap to clone (messages and the in-memory cache
/// share one allocation).
pub type Payload = Arc<[u8]>;

/// A replica's identity (KIP-853): its node id and the directory id of its metadata log dir. A
/// re-formatted disk gets a new directory id, so a replica that lost its log cannot vote as the
/// voter it replaced.
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
#[rkyv(derive(Debug))]
pub struct ReplicaKey {
    pub id: NodeId,
    pub directory_id: Uuid,
}

impl ReplicaKey {
    /// True if this replica (a key a replica sends of itself) is the one `voter` names: the
    /// same id, and the same directory id unless `voter` names none (a static voter of
    /// `controller.quorum.voters`, kraft.version 0, which every directory of that id answers
    /// to, as in Kafka).
    pub fn is(&self, voter: &ReplicaKey) -> bool {
        self.id == voter.id
            && (self.directory_id == voter.directory_id || voter.directory_id.is_zero())
    }
}

/// A listener a voter can be reached on.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: u16,
}

/// One entry of a voter set.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct Voter {
    pub key: ReplicaKey,
    pub endpoints: Vec<Endpoint>,
}

/// A voter set, sorted by node id with unique ids. Majority = `len / 2 + 1`.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct VoterSet {
    voters: Vec<Voter>,
}

impl VoterSet {
    /// Sorts by id; rejects an empty set and duplicate ids.
    pub fn new(mut voters: Vec<Voter>) -> Result<Self> {
        if voters.is_empty() {
            return Err(Error::VoterSet("a voter set needs at least one voter"));
        }
        voters.sort_by_key(|v| v.key.id);
        if voters.windows(2).any(|w| w[0].key.id == w[1].key.id) {
            return Err(Error::VoterSet("duplicate voter id"));
        }
        Ok(Self { voters })
    }

    /// Checks the invariants `new` establishes (for bytes decoded from disk or network).
    pub fn validate(&self) -> Result<()> {
        if self.voters.is_empty() {
            return Err(Error::VoterSet("a voter set needs at least one voter"));
        }
        if self.voters.windows(2).any(|w| w[0].key.id >= w[1].key.id) {
            return Err(Error::VoterSet("voter ids not sorted and unique"));
        }
        Ok(())
    }

    pub fn voters(&self) -> &[Voter] {
        &self.voters
    }

    pub fn len(&self) -> usize {
        self.voters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.voters.is_empty()
    }

    pub fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    pub fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.voters.iter().map(|v| v.key.id)
    }

    pub fn get(&self, id: NodeId) -> Option<&Voter> {
        self.voters
            .binary_search_by_key(&id, |v| v.key.id)
            .ok()
            .map(|i| &self.voters[i])
    }

    pub fn contains_id(&self, id: NodeId) -> bool {
        self.get(id).is_some()
    }

    /// True if `key` votes: same id and same directory id. A voter without a directory id
    /// (a static voter, kraft.version 0, whose configuration names no directory) is matched
    /// by its id alone, as Kafka does: a static quorum has no way to tell directories apart.
    pub fn contains_key(&self, key: &ReplicaKey) -> bool {
        self.get(key.id).is_some_and(|v| key.is(&v.key))
    }

    /// The set with `voter` added (error if its id already votes).
    pub fn with_added(&self, voter: Voter) -> Result<Self> {
        if self.contains_id(voter.key.id) {
            return Err(Error::VoterSet("id already votes"));
        }
        let mut v = self.voters.clone();
        v.push(voter);
        Self::new(v)
    }

    /// The set without `key` (error if absent or if the set would be empty).
    pub fn with_removed(&self, key: &ReplicaKey) -> Result<Self> {
        if !self.contains_key(key) {
            return Err(Error::VoterSet("not a voter"));
        }
        Self::new(
            self.voters
                .iter()
                .filter(|v| v.key != *key)
                .cloned()
                .collect(),
        )
    }

    /// True if every majority of `self` intersects every majority of `other`: the safety
    /// condition KIP-853 keeps by changing one voter at a time. Computed exactly: the largest
    /// disjoint pair of majorities uses the voters that are in only one set first.
    pub fn majorities_intersect(&self, other: &VoterSet) -> bool {
        let shared = self.ids().filter(|id| other.contains_id(*id)).count();
        let only_self = self.len() - shared;
        let only_other = other.len() - shared;
        let need_self = self.majority().saturating_sub(only_self);
        let need_other = other.majority().saturating_sub(only_other);
        need_self + need_other > shared
    }
}

/// What one batch costs in a message beyond its payload (its fields and the archive's
/// relative pointers, rounded up generously). Size caps on messages that carry batches (an
/// Append, a Fetch answer) count it per batch, so a message of many small batches stays
/// within the frame limit its payload cap implies.
pub const BATCH_OVERHEAD_BYTES: usize = 64;

/// A batch of records: what the engine stores as one frame (base offset, epoch, record count,
/// attributes with the control bit, opaque payload).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct Batch {
    pub base_offset: LogOffset,
    pub epoch: Epoch,
    pub record_count: u32,
    /// Raft control records (see [`crate::control`]) rather than state-machine records.
    pub control: bool,
    /// When the leader appended it: its wall clock, in ms since the Unix epoch
    /// ([`crate::RaftCore::set_wall_clock_ms`]); replicated with the batch and kept in the log
    /// frame. Kafka's batch append time, which brokers' lag metrics read. [`NO_TIMESTAMP`]
    /// when unknown (a batch written before corum kept it).
    pub timestamp_ms: i64,
    pub payload: Payload,
}

/// A batch's [`Batch::timestamp_ms`] when unknown (Kafka's `NO_TIMESTAMP`).
pub const NO_TIMESTAMP: i64 = -1;

impl Batch {
    /// The offset after this batch's last record.
    pub fn end_offset(&self) -> LogOffset {
        self.base_offset.add(u64::from(self.record_count))
    }
}

/// Identifies a snapshot: it holds every record below `end_offset`; `epoch` is the epoch of the
/// last of them.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct SnapshotId {
    pub end_offset: LogOffset,
    pub epoch: Epoch,
}

/// A snapshot as the core sees it: its id, the voter set and `kraft.version` in force at its end
/// (KIP-853 stores the VotersRecord and KRaftVersion record in the snapshot) and the state
/// machine's opaque bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub id: SnapshotId,
    pub voters: VoterSet,
    /// KIP-853's `kraft.version` in force at the snapshot's end (Kafka's snapshots carry a
    /// KRaftVersion record): 1 once a static quorum was upgraded, whatever the bootstrap says.
    pub kraft_version: u16,
    pub data: Payload,
}

/// The election state that must survive a restart: the epoch, the leader known for it and the
/// vote cast in it (voter id and directory id, [`Uuid::ZERO`] for none). The core hands it out
/// in [`crate::Ready::quorum_state`] and takes it back in [`crate::Restore`]; how it is stored
/// is the driver's business (the node's `quorum-state` file has its own byte format).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuorumStateRecord {
    pub epoch: Epoch,
    pub leader: Option<NodeId>,
    pub voted_for: Option<ReplicaKey>,
}

/// A proposal appended by the leader: committed once the high watermark reaches `end_offset`
/// while the batch at `base_offset` still has `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProposalId {
    pub epoch: Epoch,
    pub base_offset: LogOffset,
    pub end_offset: LogOffset,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(ids: &[u32]) -> VoterSet {
        VoterSet::new(
            ids.iter()
                .map(|&i| Voter {
                    key: ReplicaKey {
                        id: NodeId(i),
                        directory_id: Uuid([i as u8; 16]),
                    },
                    endpoints: vec![],
                })
                .collect(),
        )
        .unwrap()
    }

    /// Naive check: no majority of `a` is disjoint from a majority of `b` (by enumeration).
    fn naive_intersect(a: &[u32], b: &[u32]) -> bool {
        let univ: Vec<u32> = {
            let mut u: Vec<u32> = a.iter().chain(b).copied().collect();
            u.sort();
            u.dedup();
            u
        };
        let n = univ.len();
        for ma in 0u32..(1 << n) {
            let ca = univ
                .iter()
                .enumerate()
                .filter(|(i, x)| ma >> i & 1 == 1 && a.contains(x))
                .count();
            if ca <= a.len() / 2
                || univ
                    .iter()
                    .enumerate()
                    .any(|(i, x)| ma >> i & 1 == 1 && !a.contains(x))
            {
                continue;
            }
            for mb in 0u32..(1 << n) {
                if ma & mb != 0 {
                    continue;
                }
                let cb = univ
                    .iter()
                    .enumerate()
                    .filter(|(i, x)| mb >> i & 1 == 1 && b.contains(x))
                    .count();
                if cb > b.len() / 2
                    && !univ
                        .iter()
                        .enumerate()
                        .any(|(i, x)| mb >> i & 1 == 1 && !b.contains(x))
                {
                    return false;
                }
            }
        }
        true
    }

    proptest! {
        /// The closed-form majority-intersection test agrees with enumeration of all majorities.
        #[test]
        fn majorities_intersect_matches_naive(a in proptest::collection::btree_set(0u32..7, 1..6),
                                              b in proptest::collection::btree_set(0u32..7, 1..6)) {
            let a: Vec<u32> = a.into_iter().collect();
            let b: Vec<u32> = b.into_iter().collect();
            prop_assert_eq!(set(&a).majorities_intersect(&set(&b)), naive_intersect(&a, &b));
        }
    }

    /// Adding then removing one voter keeps majorities intersecting; swapping two does not.
    #[test]
    fn one_change_at_a_time() {
        let s3 = set(&[1, 2, 3]);
        let s4 = set(&[1, 2, 3, 4]);
        assert!(s3.majorities_intersect(&s4));
        assert!(!s3.majorities_intersect(&set(&[1, 4, 5])));
        assert!(VoterSet::new(vec![]).is_err());
        assert!(s3.with_added(s3.voters()[0].clone()).is_err());
        assert_eq!(s4.with_removed(&s4.voters()[3].key).unwrap(), s3);
    }
}
