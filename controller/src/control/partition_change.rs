//! One partition's change, decided as Kafka's `PartitionChangeBuilder` decides it: from the ISR
//! the caller wants (a broker leaving, a leader's AlterPartition, the same ISR for an election),
//! the election to run and who may lead, the one PartitionChange record naming only what
//! differs, or none.
//!
//! # The steps, in Kafka's order
//!
//! | step | with eligible leader replicas (KIP-966) enabled | disabled |
//! |---|---|---|
//! | 1. eligible leader replicas | the target ISR reaches the topic's min ISR: none; else the current ELR and ISR, less the target ISR and any replica that shut down uncleanly, in broker id order | as they are |
//! | 2. election | see below | see below |
//! | 3. a leader elected from the ELR | becomes the ISR alone and leaves the ELR | (the same, for an ELR left from when it was enabled) |
//! | 4. an unclean election (below) | sets the ISR to the leader alone and the leader RECOVERING; the ELR is emptied | the same |
//! | 5. the ELR written | when it differs | emptied (when the partition still has one) |
//! | 6. the ISR written | when it differs, even empty | when it differs and is not empty (the last member stays, the partition has no leader) |
//! | 7. the last known ELR | the ISR becomes empty: the leader it had (once); the partition gets or keeps a leader: emptied | as it is |
//! | 8. the leader recovery state, directories | as the caller asks, when they differ | the same |
//!
//! The election, over the replicas in replica order (the first is the preferred leader); a
//! replica is *valid* when it is in the target ISR (or, the target ISR being empty, in the ELR)
//! and the [`Electorate`] accepts it:
//!
//! | election | leader |
//! |---|---|
//! | online | the current leader if valid; else the first valid replica; else the last known ELR's one broker if accepted (enabled, ISR and ELR empty: unclean); else none |
//! | unclean (the topic's `unclean.leader.election.enable`, or ElectLeaders UNCLEAN) | as online, then the first accepted replica (unclean) |
//! | preferred (ElectLeaders PREFERRED) | the preferred replica if valid; else the current leader if valid; else the first valid replica; else the last known ELR's, as online |
//!
//! Where corum differs: the ELR is kept in broker id order (Kafka's is a `HashSet`'s order,
//! the same for ids below 16); when the ISR becomes empty on a partition that already has no
//! leader, the last known ELR stays as it is (Kafka writes the id -1 there); every caller
//! decides under the feature's rules, where Kafka 4.1 decides an AssignReplicasToDirs change
//! without them (which empties the partition's ELR).

use std::collections::BTreeSet;

use corum_types::{NodeId, Uuid};

use crate::ids::{PartitionId, TopicId};
use crate::image::{MetadataImage, PartitionImage, ReplicaList};
use crate::records::{LeaderChange, LeaderRecoveryState, MetadataRecord, PartitionChangeRecordV2};

/// Who may lead a partition (Kafka's `LeaderAcceptor`): a registered broker that is unfenced
/// and not in controlled shutdown (or `added`, unfenced in the same batch), not among
/// `removed` (leaving in the same batch, or shutting down uncleanly), whose replica's
/// directory is online.
#[derive(Clone, Copy)]
pub(crate) struct Electorate<'a> {
    pub image: &'a MetadataImage,
    pub removed: &'a [NodeId],
    pub added: Option<NodeId>,
}

impl<'a> Electorate<'a> {
    pub(crate) fn new(image: &'a MetadataImage) -> Electorate<'a> {
        Electorate {
            image,
            removed: &[],
            added: None,
        }
    }

    pub(crate) fn accepts(&self, p: &PartitionImage, b: NodeId) -> bool {
        if self.removed.contains(&b) {
            return false;
        }
        let Some(reg) = self.image.brokers.get(b) else {
            return false;
        };
        (self.added == Some(b) || reg.is_eligible())
            && p.directory(b).is_some_and(|d| reg.has_online_dir(&d))
    }
}

/// Which election a change runs (Kafka's `PartitionChangeBuilder.Election`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Election {
    /// Keep the partition online from its ISR (or ELR).
    Online,
    /// As online, then any accepted replica, losing what it does not hold.
    Unclean,
    /// Move leadership to the preferred replica when it is valid.
    Preferred,
}

/// What eligible leader replicas mean for one topic's partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ElrRules {
    /// `eligible.leader.replicas.version` is 1.
    pub enabled: bool,
    /// The topic's effective min ISR: its `min.insync.replicas`, at most its replication
    /// factor (Kafka's `getTopicEffectiveMinIsr`).
    pub min_isr: usize,
}

impl ElrRules {
    /// Eligible leader replicas disabled.
    pub(crate) const DISABLED: ElrRules = ElrRules {
        enabled: false,
        min_isr: 1,
    };
}

/// What a partition is to become (the builder's targets); [`Change::of`] leaves it as it is.
#[derive(Clone, Debug)]
pub(crate) struct Change<'a> {
    pub isr: ReplicaList,
    pub election: Election,
    pub elr: ElrRules,
    /// Replicas whose broker shut down uncleanly: they leave the ELR too.
    pub unclean_shutdown: &'a [NodeId],
    pub leader_recovery_state: LeaderRecoveryState,
    /// The replicas' new log directories, if they change.
    pub directories: Option<Vec<Uuid>>,
}

impl Change<'_> {
    /// `p` as it is, with an online election under `elr`.
    pub(crate) fn of(p: &PartitionImage, elr: ElrRules) -> Change<'static> {
        Change {
            isr: p.isr.clone(),
            election: Election::Online,
            elr,
            unclean_shutdown: &[],
            leader_recovery_state: p.leader_recovery_state,
            directories: None,
        }
    }
}

/// The partition after a change, and the record that makes it (`None`: nothing changes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub record: Option<MetadataRecord>,
    pub leader: Option<NodeId>,
    pub isr: ReplicaList,
    pub leader_recovery_state: LeaderRecoveryState,
}

impl Outcome {
    /// Whether the record names a leader (a new one, or none): the leader epoch grows.
    pub(crate) fn changes_leader(&self) -> bool {
        match &self.record {
            Some(MetadataRecord::PartitionChange(r)) => r.leader != LeaderChange::Unchanged,
            Some(MetadataRecord::PartitionChangeV2(r)) => r.leader != LeaderChange::Unchanged,
            _ => false,
        }
    }
}

/// Decides `change` of partition `topic_id`/`partition_id`, currently `p` (see the module doc).
pub(crate) fn build(
    topic_id: TopicId,
    partition_id: PartitionId,
    p: &PartitionImage,
    change: Change<'_>,
    electorate: Electorate<'_>,
) -> Outcome {
    let enabled = change.elr.enabled;
    let mut isr = change.isr;
    let mut elr: ReplicaList = p.elr().into();
    // 1. The ELR the target ISR calls for.
    if enabled {
        if isr.len() >= change.elr.min_isr {
            elr.clear();
        } else {
            let candidates: BTreeSet<NodeId> = elr.iter().chain(p.isr.iter()).copied().collect();
            elr = candidates
                .into_iter()
                .filter(|b| !isr.contains(b) && !change.unclean_shutdown.contains(b))
                .collect();
        }
    }
    // 2. The election.
    let (elected, unclean) = elect(p, &isr, &elr, change.election, enabled, |b| {
        electorate.accepts(p, b)
    });
    let mut record_isr: Option<ReplicaList> = None;
    let mut record_leader = LeaderChange::Unchanged;
    let mut record_lrs: Option<LeaderRecoveryState> = None;
    if elected != p.leader {
        if let Some(l) = elected {
            // 3. From the ELR: the ISR is the new leader alone.
            if elr.contains(&l) {
                isr = ReplicaList::from_slice(&[l]);
                elr.retain(|b| *b != l);
            }
            // 4. Unclean: so is the ISR, and the leader recovers.
            if unclean {
                record_isr = Some(ReplicaList::from_slice(&[l]));
                if p.leader_recovery_state != LeaderRecoveryState::Recovering {
                    record_lrs = Some(LeaderRecoveryState::Recovering);
                }
            }
        }
        record_leader = match elected {
            None => LeaderChange::NoLeader,
            Some(l) => LeaderChange::Broker(l),
        };
    }
    // 5. The ELR.
    if record_isr.is_some() || !enabled {
        elr.clear();
    }
    let record_elr = (elr[..] != *p.elr()).then(|| elr.to_vec());
    // 6. The ISR (empty only with the ELR enabled).
    if record_isr.is_none() && (!isr.is_empty() || enabled) && isr != p.isr {
        record_isr = Some(isr);
    }
    // 7. The last known ELR: the last leader, while the partition has none.
    let mut record_last_known = None;
    if enabled {
        let last_known = p.last_known_elr();
        let emptied = record_isr.as_ref().is_some_and(|i| i.is_empty());
        let has_leader = matches!(record_leader, LeaderChange::Broker(_))
            || (p.leader.is_some() && record_leader != LeaderChange::NoLeader);
        if emptied {
            if let Some(l) = p.leader.filter(|l| last_known != [*l]) {
                record_last_known = Some(vec![l]);
            }
        } else if has_leader && !last_known.is_empty() {
            record_last_known = Some(Vec::new());
        }
    }
    // 8. What the caller asks for.
    if change.leader_recovery_state != p.leader_recovery_state {
        record_lrs = Some(change.leader_recovery_state);
    }
    let directories = change
        .directories
        .filter(|d| d.as_slice() != &p.directories[..]);
    let leader = match record_leader {
        LeaderChange::Unchanged => p.leader,
        LeaderChange::NoLeader => None,
        LeaderChange::Broker(b) => Some(b),
    };
    let isr_after = record_isr.clone().unwrap_or_else(|| p.isr.clone());
    let lrs_after = record_lrs.unwrap_or(p.leader_recovery_state);
    let nothing = record_isr.is_none()
        && record_leader == LeaderChange::Unchanged
        && record_lrs.is_none()
        && directories.is_none()
        && record_elr.is_none()
        && record_last_known.is_none();
    let record = (!nothing).then(|| {
        MetadataRecord::partition_change(PartitionChangeRecordV2 {
            topic_id,
            partition_id,
            isr: record_isr.map(|i| i.to_vec()),
            leader: record_leader,
            replicas: None,
            leader_recovery_state: record_lrs,
            directories,
            eligible_leader_replicas: record_elr,
            last_known_elr: record_last_known,
        })
    });
    Outcome {
        record,
        leader,
        isr: isr_after,
        leader_recovery_state: lrs_after,
    }
}

/// Kafka's `electLeader`: the leader `election` gives, and whether the election was unclean
/// (see the module doc).
fn elect(
    p: &PartitionImage,
    isr: &[NodeId],
    elr: &[NodeId],
    election: Election,
    enabled: bool,
    accepts: impl Fn(NodeId) -> bool,
) -> (Option<NodeId>, bool) {
    let valid =
        |b: NodeId| (isr.contains(&b) || (isr.is_empty() && elr.contains(&b))) && accepts(b);
    let last_known = || match p.last_known_elr() {
        [l] if enabled && isr.is_empty() && elr.is_empty() && accepts(*l) => Some(*l),
        _ => None,
    };
    let clean = |b: Option<NodeId>| b.map(|b| (Some(b), false));
    let unclean = |b: Option<NodeId>| b.map(|b| (Some(b), true));
    let current = p.leader.filter(|l| valid(*l));
    let found = match election {
        Election::Preferred => {
            let preferred = p.replicas[0];
            clean(valid(preferred).then_some(preferred))
                .or_else(|| clean(current))
                .or_else(|| clean(p.replicas[1..].iter().copied().find(|b| valid(*b))))
                .or_else(|| unclean(last_known()))
        }
        Election::Online | Election::Unclean => clean(current)
            .or_else(|| clean(p.replicas.iter().copied().find(|b| valid(*b))))
            .or_else(|| unclean(last_known()))
            .or_else(|| {
                let any = p.replicas.iter().copied().find(|b| accepts(*b));
                unclean(any.filter(|_| election == Election::Unclean))
            }),
    };
    found.unwrap_or((None, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{LeaderEpoch, PartitionEpoch};
    use crate::image::topics::directories_for;

    fn ids(v: &[u32]) -> ReplicaList {
        v.iter().map(|b| NodeId(*b)).collect()
    }

    /// A partition of replicas 1, 2, 3 with `isr`, `leader`, `elr` and `last_known`.
    fn partition(
        isr: &[u32],
        leader: Option<u32>,
        elr: &[u32],
        last_known: &[u32],
    ) -> PartitionImage {
        PartitionImage {
            replicas: ids(&[1, 2, 3]),
            isr: ids(isr),
            directories: directories_for(3, vec![]),
            leader: leader.map(NodeId),
            leader_recovery_state: LeaderRecoveryState::Recovered,
            leader_epoch: LeaderEpoch(1),
            partition_epoch: PartitionEpoch(1),
            elr: None,
        }
        .with_elr(ids(elr), ids(last_known))
    }

    const ENABLED: ElrRules = ElrRules {
        enabled: true,
        min_isr: 2,
    };

    fn run(p: &PartitionImage, change: Change<'_>, accepted: &[u32]) -> (Option<NodeId>, bool) {
        let accepted: Vec<NodeId> = ids(accepted).to_vec();
        elect(
            p,
            &change.isr,
            p.elr(),
            change.election,
            change.elr.enabled,
            |b| accepted.contains(&b),
        )
    }

    /// The election table of the module doc, row by row: the current leader stays while
    /// valid; else the first valid replica; an empty ISR makes the ELR valid; the last known
    /// leader comes after (unclean) only with ISR and ELR empty and the feature on; an unclean
    /// election takes any accepted replica last; a preferred one prefers the first replica.
    #[test]
    fn elections_follow_kafkas_order() {
        let p = partition(&[1, 2, 3], Some(2), &[], &[]);
        assert_eq!(
            run(&p, Change::of(&p, ENABLED), &[1, 2, 3]),
            (Some(NodeId(2)), false)
        );
        assert_eq!(
            run(&p, Change::of(&p, ENABLED), &[1, 3]),
            (Some(NodeId(1)), false)
        );
        let mut preferred = Change::of(&p, ENABLED);
        preferred.election = Election::Preferred;
        assert_eq!(
            run(&p, preferred.clone(), &[1, 2, 3]),
            (Some(NodeId(1)), false)
        );
        assert_eq!(run(&p, preferred, &[2, 3]), (Some(NodeId(2)), false));
        // ISR empty: the ELR leads.
        let p = partition(&[], None, &[2, 3], &[1]);
        assert_eq!(
            run(&p, Change::of(&p, ENABLED), &[3]),
            (Some(NodeId(3)), false)
        );
        // ELR not accepted: the last known leader is not tried while the ELR is not empty.
        assert_eq!(run(&p, Change::of(&p, ENABLED), &[1]), (None, false));
        let mut unclean = Change::of(&p, ENABLED);
        unclean.election = Election::Unclean;
        assert_eq!(run(&p, unclean, &[1]), (Some(NodeId(1)), true));
        // ISR and ELR empty: the last known leader, if accepted, and only with the feature.
        let p = partition(&[], None, &[], &[3]);
        assert_eq!(
            run(&p, Change::of(&p, ENABLED), &[3]),
            (Some(NodeId(3)), true)
        );
        assert_eq!(run(&p, Change::of(&p, ENABLED), &[1]), (None, false));
        assert_eq!(
            run(&p, Change::of(&p, ElrRules::DISABLED), &[3]),
            (None, false)
        );
    }

    /// KIP-966's rules end to end: requests to an active controller, their records committed
    /// and replayed (the harness checks the image's invariants after every batch).
    mod through_the_controller {
        use corum_types::BrokerEpoch;

        use crate::control::cluster_control::{PreviousBrokerEpoch, UnregisterBrokerRequest};
        use crate::control::config_control::{
            AlterConfigOp, AlterConfigsRequest, AlterConfigsResource, AlterableConfig,
            IncrementalAlterConfigsRequest, ReplacedConfigs,
        };
        use crate::control::feature_control::{
            FeatureUpdate, UpdateFeaturesRequest, ELIGIBLE_LEADER_REPLICAS_VERSION,
        };
        use crate::control::replication_control::{
            AlterPartitionRequest, AlterPartitionTopic, ElectLeadersRequest, ElectionType,
            IsrMember, PartitionAlteration,
        };
        use crate::control::test_harness::{dir, Harness};
        use crate::error::ApiError;
        use crate::ids::{PartitionId, TopicId};
        use crate::image::{ConfigResource, PartitionImage};
        use crate::records::{
            ClearElrRecordV1, ConfigRecordV1, ConfigResourceType, FeatureLevelRecordV1,
            LeaderChange, LeaderRecoveryState, MetadataRecord,
        };
        use corum_types::{NodeId, Uuid};

        fn ids(v: &[u32]) -> Vec<NodeId> {
            v.iter().map(|b| NodeId(*b)).collect()
        }

        /// `(leader, isr, elr, last known elr)` of a partition.
        fn state(p: &PartitionImage) -> (Option<u32>, Vec<NodeId>, Vec<NodeId>, Vec<NodeId>) {
            (
                p.leader.map(|l| l.0),
                p.isr.to_vec(),
                p.elr().to_vec(),
                p.last_known_elr().to_vec(),
            )
        }

        /// Broker `b` asks to be fenced (as the tick fences one whose lease expired).
        fn fence(h: &mut Harness, b: u32) -> Vec<MetadataRecord> {
            let mut req = h.heartbeat_request(b, h.c.committed_end());
            req.want_fence = true;
            let ctx = h.ctx();
            let r = h.c.broker_heartbeat(&req, &ctx).expect("a heartbeat");
            h.commit(&r.records);
            r.records
        }

        /// Broker `b` registers a new incarnation after its old lease expired, saying
        /// `previous` of the registration before.
        fn restart(h: &mut Harness, b: u32, previous: PreviousBrokerEpoch) -> Vec<MetadataRecord> {
            h.now_ms += 60_000;
            let mut req = h.registration(b, vec![dir(b as u8)]);
            req.incarnation_id = Uuid([0x80 | b as u8; 16]);
            req.previous_broker_epoch = previous;
            let ctx = h.ctx();
            let r =
                h.c.register_broker(&req, &ctx)
                    .expect("a new incarnation registers");
            h.commit(&r.records);
            r.records
        }

        /// The heartbeat that unfences broker `b` (a new incarnation heartbeats as itself).
        fn unfence(h: &mut Harness, b: u32, incarnation: u8) -> Vec<MetadataRecord> {
            let mut req = h.heartbeat_request(b, h.c.committed_end());
            req.incarnation_id = Uuid([incarnation; 16]);
            let ctx = h.ctx();
            let r = h.c.broker_heartbeat(&req, &ctx).expect("a heartbeat");
            h.commit(&r.records);
            r.records
        }

        fn alter(h: &Harness, t: TopicId, isr: &[u32]) -> AlterPartitionRequest {
            let p = h.partition(t, 0);
            let leader = p.leader.expect("a leader");
            AlterPartitionRequest {
                broker_id: leader,
                broker_epoch: h.c.image().brokers.get(leader).unwrap().broker_epoch,
                topics: vec![AlterPartitionTopic {
                    topic_id: t,
                    partitions: vec![PartitionAlteration {
                        partition_id: PartitionId(0),
                        leader_epoch: p.leader_epoch,
                        new_isr_with_epochs: isr
                            .iter()
                            .map(|b| IsrMember {
                                broker_id: NodeId(*b),
                                broker_epoch: None,
                            })
                            .collect(),
                        leader_recovery_state: p.leader_recovery_state,
                        partition_epoch: p.partition_epoch,
                    }],
                }],
            }
        }

        fn set_config(
            resource: ConfigResource,
            key: &str,
            op: AlterConfigOp,
            value: &str,
        ) -> IncrementalAlterConfigsRequest {
            IncrementalAlterConfigsRequest {
                resources: vec![AlterConfigsResource {
                    resource,
                    configs: vec![AlterableConfig {
                        key: key.into(),
                        op,
                        value: value.into(),
                    }],
                }],
                validate_only: false,
            }
        }

        fn broker_resource(name: &str) -> ConfigResource {
            ConfigResource {
                resource_type: ConfigResourceType::Broker,
                name: name.into(),
            }
        }

        /// Three brokers and topic `t` on all three, min ISR `min_isr`, the feature enabled.
        fn three(min_isr: u16) -> (Harness, TopicId) {
            let mut h = Harness::with_elr(min_isr);
            h.brokers(&[1, 2, 3]);
            let t = h.topic("t", &[&[1, 2, 3]]);
            (h, t)
        }

        /// Fencing shrinks the ISR; once it is below the min ISR (2) each member that leaves
        /// (cleanly) becomes an eligible leader replica, the last one too: the ISR empties, the
        /// partition has no leader, and its last leader is the last known ELR. A shrink that
        /// keeps the min ISR writes no ELR field (the old record version).
        #[test]
        fn an_isr_below_the_min_isr_moves_its_leavers_into_the_elr() {
            let (mut h, t) = three(2);
            let records = fence(&mut h, 3);
            assert!(
                matches!(records[0], MetadataRecord::PartitionChange(_)),
                "{records:?}"
            );
            assert_eq!(
                state(&h.partition(t, 0)),
                (Some(1), ids(&[1, 2]), vec![], vec![])
            );
            fence(&mut h, 2);
            assert_eq!(
                state(&h.partition(t, 0)),
                (Some(1), ids(&[1]), ids(&[2]), vec![])
            );
            let before = h.partition(t, 0);
            let records = fence(&mut h, 1);
            match &records[0] {
                MetadataRecord::PartitionChangeV2(c) => {
                    assert_eq!(c.isr.as_deref(), Some(&[][..]));
                    assert_eq!(c.leader, LeaderChange::NoLeader);
                    assert_eq!(
                        c.eligible_leader_replicas.as_deref(),
                        Some(&ids(&[1, 2])[..])
                    );
                    assert_eq!(c.last_known_elr.as_deref(), Some(&ids(&[1])[..]));
                }
                other => panic!("{other:?}"),
            }
            let p = h.partition(t, 0);
            assert_eq!(state(&p), (None, vec![], ids(&[1, 2]), ids(&[1])));
            assert_eq!(p.leader_epoch, before.leader_epoch.next());
            assert_eq!(p.partition_epoch, before.partition_epoch.next());
            // A leader's own shrink below the min ISR does the same.
            let (h, t) = three(2);
            let r = h.c.alter_partition(&alter(&h, t, &[1])).unwrap();
            let answer = r.response.topics[0].partitions[0].1.clone().unwrap();
            assert_eq!(answer.isr, ids(&[1]));
            match &r.records[..] {
                [MetadataRecord::PartitionChangeV2(c)] => {
                    assert_eq!(
                        c.eligible_leader_replicas.as_deref(),
                        Some(&ids(&[2, 3])[..])
                    );
                    assert_eq!(c.leader, LeaderChange::Unchanged);
                }
                other => panic!("{other:?}"),
            }
        }

        /// With an empty ISR the first eligible leader replica back leads, alone in the ISR
        /// (a clean election: RECOVERED), the rest staying eligible, the last known ELR
        /// emptied; once the ISR reaches the min ISR again the ELR is emptied too.
        #[test]
        fn the_elr_elects_and_the_min_isr_clears_it() {
            let (mut h, t) = three(2);
            for b in [3, 2, 1] {
                fence(&mut h, b);
            }
            assert_eq!(
                state(&h.partition(t, 0)),
                (None, vec![], ids(&[1, 2]), ids(&[1]))
            );
            unfence(&mut h, 2, 2);
            let p = h.partition(t, 0);
            assert_eq!(state(&p), (Some(2), ids(&[2]), ids(&[1]), vec![]));
            assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovered);
            unfence(&mut h, 1, 1);
            assert_eq!(
                state(&h.partition(t, 0)),
                (Some(2), ids(&[2]), ids(&[1]), vec![])
            );
            let r = h.c.alter_partition(&alter(&h, t, &[2, 1])).unwrap();
            h.commit(&r.records);
            assert_eq!(
                state(&h.partition(t, 0)),
                (Some(2), ids(&[2, 1]), vec![], vec![])
            );
        }

        /// With the ISR empty an eligible leader replica is elected before any unclean
        /// election, even where the topic allows one and another replica came back first; the
        /// unclean election happens only when no eligible one is acceptable, and then empties
        /// the ELR. ElectLeaders PREFERRED elects from the ELR too.
        #[test]
        fn the_elr_comes_before_unclean_elections() {
            let (mut h, t) = three(3);
            h.config("t", "unclean.leader.election.enable", "true");
            for b in [3, 2] {
                fence(&mut h, b);
            }
            fence(&mut h, 1);
            // ISR [1] < 3 when 2 left: 2 and 3 eligible; 1 joined them when the ISR emptied.
            assert_eq!(
                state(&h.partition(t, 0)),
                (None, vec![], ids(&[1, 2, 3]), ids(&[1]))
            );
            // Broker 1 restarts uncleanly: it leaves the ELR.
            restart(&mut h, 1, PreviousBrokerEpoch::Unnamed);
            assert_eq!(
                state(&h.partition(t, 0)),
                (None, vec![], ids(&[2, 3]), ids(&[1]))
            );
            // Only broker 1 back: not eligible, but the topic allows an unclean election, which
            // takes it and empties the ELR.
            let mut h2 = h.clone();
            unfence(&mut h2, 1, 0x81);
            let p = h2.partition(t, 0);
            assert_eq!(state(&p), (Some(1), ids(&[1]), vec![], vec![]));
            assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);
            // Brokers 3 then 1 back: 3 leads from the ELR, cleanly, and 1 waits.
            unfence(&mut h, 3, 3);
            let p = h.partition(t, 0);
            assert_eq!(state(&p), (Some(3), ids(&[3]), ids(&[2]), vec![]));
            assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovered);
            unfence(&mut h, 1, 0x81);
            assert_eq!(h.partition(t, 0).leader, Some(NodeId(3)));
            // A preferred election elects from the ELR where the ISR is empty.
            let (mut h, t) = three(2);
            for b in [3, 2, 1] {
                fence(&mut h, b);
            }
            h.commit(&[MetadataRecord::BrokerRegistrationChangeV2(
                crate::records::BrokerRegistrationChangeRecordV2 {
                    broker_id: NodeId(2),
                    broker_epoch: h.c.image().brokers.get(NodeId(2)).unwrap().broker_epoch,
                    fenced: crate::records::FencingChange::Unfence,
                    in_controlled_shutdown: false,
                },
            )]);
            let r =
                h.c.elect_leaders(&ElectLeadersRequest {
                    election_type: ElectionType::Preferred,
                    partitions: Some(vec![("t".into(), PartitionId(0))]),
                })
                .unwrap();
            assert_eq!(r.response.partitions[0].2, Ok(NodeId(2)));
            h.commit(&r.records);
            assert_eq!(
                state(&h.partition(t, 0)),
                (Some(2), ids(&[2]), ids(&[1]), vec![])
            );
        }

        /// A broker that registers again without naming its last epoch (killed) leaves every
        /// ISR and ELR; one that names it (a clean shutdown) or cannot say (BrokerRegistration
        /// before v3) stays eligible. An ISR member that restarts uncleanly does not become
        /// eligible where a clean one would.
        #[test]
        fn an_unclean_shutdown_leaves_the_elr() {
            for (previous, elr) in [
                (PreviousBrokerEpoch::Unnamed, vec![1]),
                (PreviousBrokerEpoch::Epoch(BrokerEpoch(999)), vec![1]),
                (PreviousBrokerEpoch::NotSent, vec![1, 2]),
                (
                    PreviousBrokerEpoch::Epoch(BrokerEpoch(u64::MAX)),
                    vec![1, 2],
                ),
            ] {
                let (mut h, t) = three(2);
                for b in [3, 2, 1] {
                    fence(&mut h, b);
                }
                let previous = match previous {
                    // The epoch of the registration it replaces.
                    PreviousBrokerEpoch::Epoch(BrokerEpoch(u64::MAX)) => {
                        PreviousBrokerEpoch::Epoch(
                            h.c.image().brokers.get(NodeId(2)).unwrap().broker_epoch,
                        )
                    }
                    other => other,
                };
                let records = restart(&mut h, 2, previous);
                let p = h.partition(t, 0);
                assert_eq!(p.elr(), ids(&elr), "{previous:?}: {records:?}");
            }
            // An ISR member restarting while its old registration is still unfenced.
            for (previous, elr) in [
                (PreviousBrokerEpoch::Unnamed, vec![]),
                (PreviousBrokerEpoch::NotSent, vec![3]),
            ] {
                let (mut h, t) = three(3);
                restart(&mut h, 3, previous);
                let p = h.partition(t, 0);
                assert_eq!(
                    state(&p),
                    (Some(1), ids(&[1, 2]), ids(&elr), vec![]),
                    "{previous:?}"
                );
                assert!(h.c.image().brokers.get(NodeId(3)).unwrap().fenced);
            }
        }

        /// A partition whose ISR and ELR are empty elects its last known leader as a last
        /// resort when it comes back (unclean: RECOVERING, as Kafka's balanced recovery), even
        /// without unclean elections; without the feature the ISR keeps that broker instead
        /// and it comes back as a clean leader.
        #[test]
        fn the_last_known_leader_is_the_last_resort() {
            let mut h = Harness::with_elr(1);
            h.brokers(&[1]);
            let t = h.topic("t", &[&[1]]);
            fence(&mut h, 1);
            assert_eq!(
                state(&h.partition(t, 0)),
                (None, vec![], ids(&[1]), ids(&[1]))
            );
            restart(&mut h, 1, PreviousBrokerEpoch::Unnamed);
            assert_eq!(state(&h.partition(t, 0)), (None, vec![], vec![], ids(&[1])));
            unfence(&mut h, 1, 0x81);
            let p = h.partition(t, 0);
            assert_eq!(state(&p), (Some(1), ids(&[1]), vec![], vec![]));
            assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);

            let mut h = Harness::new();
            h.brokers(&[1]);
            let t = h.topic("t", &[&[1]]);
            fence(&mut h, 1);
            assert_eq!(state(&h.partition(t, 0)), (None, ids(&[1]), vec![], vec![]));
            restart(&mut h, 1, PreviousBrokerEpoch::Unnamed);
            unfence(&mut h, 1, 0x81);
            let p = h.partition(t, 0);
            assert_eq!(state(&p), (Some(1), ids(&[1]), vec![], vec![]));
            assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovered);
        }

        /// With the feature disabled nothing writes an ELR field: every change is the old
        /// record version, the ISR keeps its last member, restarts change nothing more.
        #[test]
        fn without_the_feature_no_elr_is_written() {
            let mut h = Harness::new();
            h.brokers(&[1, 2, 3]);
            h.config("", "min.insync.replicas", "3");
            let t = h.topic("t", &[&[1, 2, 3]]);
            let mut all = Vec::new();
            for b in [3, 2, 1] {
                all.extend(fence(&mut h, b));
            }
            all.extend(restart(&mut h, 2, PreviousBrokerEpoch::Unnamed));
            all.extend(unfence(&mut h, 2, 0x82));
            assert!(
                all.iter().all(|r| !matches!(
                    r,
                    MetadataRecord::PartitionChangeV2(_)
                        | MetadataRecord::PartitionV3(_)
                        | MetadataRecord::ClearElr(_)
                )),
                "{all:?}"
            );
            let p = h.partition(t, 0);
            assert_eq!(state(&p), (None, ids(&[1]), vec![], vec![]));
            let r =
                h.c.incremental_alter_configs(&set_config(
                    ConfigResource::topic("t"),
                    "min.insync.replicas",
                    AlterConfigOp::Set,
                    "2",
                ))
                .unwrap();
            assert_eq!(r.records.len(), 1, "no ClearElr: {:?}", r.records);
        }

        /// A topic's `min.insync.replicas` written clears that topic's ELR, the cluster
        /// default's every topic's (each partition with one counts an epoch); a broker's own
        /// is refused, and so is deleting the cluster default, while the feature is enabled.
        #[test]
        fn min_isr_changes_clear_the_elr() {
            let (mut h, t) = three(3);
            fence(&mut h, 3);
            assert_eq!(h.partition(t, 0).elr(), ids(&[3]));
            let r =
                h.c.incremental_alter_configs(&set_config(
                    broker_resource(""),
                    "min.insync.replicas",
                    AlterConfigOp::Set,
                    "3",
                ))
                .unwrap();
            assert!(
                r.records.is_empty(),
                "the same value writes nothing: {:?}",
                r.records
            );
            let r =
                h.c.incremental_alter_configs(&set_config(
                    ConfigResource::topic("t"),
                    "min.insync.replicas",
                    AlterConfigOp::Set,
                    "2",
                ))
                .unwrap();
            assert_eq!(
                r.records[1],
                MetadataRecord::ClearElr(ClearElrRecordV1 {
                    topic_name: "t".into()
                })
            );
            let before = h.partition(t, 0);
            h.commit(&r.records);
            let p = h.partition(t, 0);
            assert!(p.elr().is_empty());
            assert_eq!(p.partition_epoch, before.partition_epoch.next());
            assert_eq!(p.leader_epoch, before.leader_epoch);
            // The cluster default: every topic.
            let (mut h, t) = three(3);
            fence(&mut h, 3);
            let r =
                h.c.incremental_alter_configs(&set_config(
                    broker_resource(""),
                    "min.insync.replicas",
                    AlterConfigOp::Set,
                    "1",
                ))
                .unwrap();
            assert_eq!(
                r.records[1],
                MetadataRecord::ClearElr(ClearElrRecordV1 {
                    topic_name: String::new()
                })
            );
            h.commit(&r.records);
            assert!(h.partition(t, 0).elr().is_empty());
            // Refusals.
            for (req, message) in [
                (
                    set_config(
                        broker_resource("2"),
                        "min.insync.replicas",
                        AlterConfigOp::Set,
                        "2",
                    ),
                    "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
                ),
                (
                    set_config(
                        broker_resource("2"),
                        "min.insync.replicas",
                        AlterConfigOp::Delete,
                        "",
                    ),
                    "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
                ),
                (
                    set_config(
                        broker_resource(""),
                        "min.insync.replicas",
                        AlterConfigOp::Delete,
                        "",
                    ),
                    "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
                ),
            ] {
                let r = h.c.incremental_alter_configs(&req).unwrap();
                assert!(r.records.is_empty());
                assert_eq!(
                    r.response.resources[0].1,
                    Err(ApiError::InvalidConfig {
                        key: "min.insync.replicas".into(),
                        reason: message.into()
                    })
                );
            }
            // The legacy AlterConfigs of the cluster default without the key deletes it.
            let r =
                h.c.alter_configs(&AlterConfigsRequest {
                    resources: vec![ReplacedConfigs {
                        resource: broker_resource(""),
                        configs: vec![("log.retention.ms".into(), Some("1000".into()))],
                    }],
                    validate_only: false,
                })
                .unwrap();
            assert!(r.records.is_empty());
            assert!(matches!(
                r.response.resources[0].1,
                Err(ApiError::InvalidConfig { .. })
            ));
        }

        /// Enabling the feature with UpdateFeatures first writes the cluster default
        /// `min.insync.replicas` (the static value, when none is set) and deletes every
        /// broker's own; it needs `metadata.version` 4.0-IV1, which may then not be lowered
        /// under it; disabling it writes only the feature, and the next change of a partition
        /// empties its ELR.
        #[test]
        fn enabling_and_disabling_the_feature() {
            let update = |level: u16, downgrade: bool| UpdateFeaturesRequest {
                updates: vec![FeatureUpdate {
                    name: ELIGIBLE_LEADER_REPLICAS_VERSION.into(),
                    min_level: 1,
                    max_level: level,
                    allow_downgrade: downgrade,
                }],
                validate_only: false,
            };
            let mut h = Harness::new();
            h.brokers(&[1, 2, 3]);
            h.commit(&[MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Broker,
                resource_name: "2".into(),
                key: "min.insync.replicas".into(),
                value: Some("2".into()),
            })]);
            let t = h.topic("t", &[&[1, 2, 3]]);
            let r = h.c.update_features(&update(1, false)).unwrap();
            assert_eq!(r.response.results[0].1, Ok(()));
            let config = |name: &str, value: Option<&str>| {
                MetadataRecord::Config(ConfigRecordV1 {
                    resource_type: ConfigResourceType::Broker,
                    resource_name: name.into(),
                    key: "min.insync.replicas".into(),
                    value: value.map(str::to_owned),
                })
            };
            assert_eq!(
                r.records,
                vec![
                    config("", Some("1")),
                    config("2", None),
                    MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                        name: ELIGIBLE_LEADER_REPLICAS_VERSION.into(),
                        min_level: 1,
                        max_level: 1,
                    }),
                ]
            );
            h.commit(&r.records);
            // Validate-only writes nothing.
            let mut check = update(1, false);
            check.validate_only = true;
            assert!(h.c.update_features(&check).unwrap().records.is_empty());
            // metadata.version may not go under the feature's dependency.
            let lower = UpdateFeaturesRequest {
                updates: vec![FeatureUpdate {
                    name: "metadata.version".into(),
                    min_level: 1,
                    max_level: 22,
                    allow_downgrade: true,
                }],
                validate_only: false,
            };
            let r = h.c.update_features(&lower).unwrap();
            assert!(
                matches!(&r.response.results[0].1, Err(ApiError::FeatureLevelOutOfRange { reason, .. }) if reason.contains("depends on metadata.version level 23"))
            );
            // An ELR, then the feature disabled: only the feature record; the ELR stays until
            // the partition changes.
            h.config("", "min.insync.replicas", "3");
            fence(&mut h, 3);
            assert_eq!(h.partition(t, 0).elr(), ids(&[3]));
            assert!(h
                .c
                .update_features(&update(0, false))
                .unwrap()
                .response
                .results[0]
                .1
                .is_err());
            let r = h.c.update_features(&update(0, true)).unwrap();
            assert_eq!(r.records.len(), 1);
            h.commit(&r.records);
            assert_eq!(h.partition(t, 0).elr(), ids(&[3]));
            fence(&mut h, 2);
            assert_eq!(
                state(&h.partition(t, 0)),
                (Some(1), ids(&[1]), vec![], vec![])
            );
            // Below 4.0-IV1 the feature cannot be enabled.
            let mut old = Harness::at_metadata_version(22);
            old.brokers(&[1]);
            let r = old.c.update_features(&update(1, false)).unwrap();
            assert!(r.records.is_empty());
            assert!(
                matches!(&r.response.results[0].1, Err(ApiError::FeatureLevelOutOfRange { reason, .. }) if reason.contains("depends on metadata.version level 23"))
            );
        }

        /// Unregistering a broker decides again the partitions whose ELR names it (Kafka's
        /// `handleBrokerUnregistered`): an ELR its min ISR no longer calls for is emptied.
        #[test]
        fn unregistering_decides_the_elr_again() {
            let (mut h, t) = three(3);
            fence(&mut h, 3);
            assert_eq!(h.partition(t, 0).elr(), ids(&[3]));
            // The min ISR lowered while the feature was off: no ClearElr was written.
            h.commit(&[MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Topic,
                resource_name: "t".into(),
                key: "min.insync.replicas".into(),
                value: Some("2".into()),
            })]);
            let r =
                h.c.unregister_broker(&UnregisterBrokerRequest {
                    broker_id: NodeId(3),
                })
                .unwrap();
            h.commit(&r.records);
            assert!(h.partition(t, 0).elr().is_empty(), "{:?}", r.records);
            assert!(h.c.image().brokers.get(NodeId(3)).is_none());
        }
    }
}
