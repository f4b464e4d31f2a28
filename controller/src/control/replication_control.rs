//! Topics, partitions, ISRs and leaders: CreateTopics, DeleteTopics, CreatePartitions, AlterIsr,
//! ElectLeaders, and the partition changes that fencing, unfencing and controlled shutdown need.
//!
//! A partition change is one logical step written as one `PartitionChange` record (Kafka's
//! PartitionChangeRecord) naming only what changes; replay bumps the partition epoch once per
//! record and the leader epoch when the leader field is set (a new leader, or none). An ISR-only
//! change keeps the leader epoch (as Kafka does from `metadata.version` 3.6). Leaders are chosen
//! as Kafka's `PartitionChangeBuilder` chooses them: the current leader stays while it is an
//! acceptable ISR member, else the first acceptable ISR member in replica order (so the preferred
//! leader wins when it can); acceptable means registered, unfenced, not in controlled shutdown
//! and with its replica's log directory online. An ISR never becomes empty: when its last member
//! leaves, the ISR keeps it and the partition has no leader until it comes back, or, when the
//! topic's `unclean.leader.election.enable` is true, an unclean election makes the first
//! acceptable replica leader with itself as the ISR and the leader RECOVERING.

use std::collections::{BTreeMap, BTreeSet};

use corum_types::{BrokerEpoch, NodeId, Uuid};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config_control::{self, DescribedConfig};
use super::feature_control;
use super::partition_change::{self, Change, Election, Electorate, ElrRules};
use super::{ControllerResult, RequestContext, View};
use crate::config::ControllerConfig;
use crate::error::ApiError;
use crate::ids::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId, MIGRATING_DIR};
use crate::image::{BrokersImage, MetadataImage, PartitionImage, ReplicaList, TopicImage};
use crate::records::{
    ConfigRecordV1, ConfigResourceType, LeaderRecoveryState, MetadataRecord, PartitionRecordV2,
    RemoveTopicRecordV1, TopicRecordV1,
};

/// Longest topic name (Kafka's limit, so a topic name fits in a file name with its suffixes).
pub const TOPIC_NAME_LEN_MAX: usize = 249;

/// Checks a topic name like Kafka: 1..=249 characters of `[a-zA-Z0-9._-]`, not "." or "..".
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    let bad = |reason| {
        Err(ApiError::InvalidTopicName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty".into());
    }
    if name.len() > TOPIC_NAME_LEN_MAX {
        return bad("longer than 249 characters".into());
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are reserved".into());
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
    {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed".into());
    }
    Ok(())
}

/// The election a change of `topic`'s partitions runs: unclean where its
/// `unclean.leader.election.enable` allows it (its own, else the cluster default's, else the
/// static config's: Kafka's `uncleanLeaderElectionEnabledForTopic`), else online.
pub(crate) fn election_of(view: View<'_>, topic: &TopicImage) -> Election {
    if config_control::unclean_leader_election_enabled(view.image, view.config, &topic.name) {
        Election::Unclean
    } else {
        Election::Online
    }
}

/// The eligible leader replica rules of `topic`'s partitions: disabled unless
/// `eligible.leader.replicas.version` is 1, else with the topic's effective min ISR.
pub(crate) fn elr_rules(view: View<'_>, topic: &TopicImage) -> ElrRules {
    if !feature_control::elr_enabled(view.image) {
        return ElrRules::DISABLED;
    }
    ElrRules {
        enabled: true,
        min_isr: effective_min_isr(view.image, view.config, topic),
    }
}

/// A topic's effective min ISR (Kafka's `getTopicEffectiveMinIsr`): its `min.insync.replicas`
/// (its own, else the cluster default's, else the static config's), at most the replication
/// factor of its partition 0.
pub fn effective_min_isr(
    image: &MetadataImage,
    config: &ControllerConfig,
    topic: &TopicImage,
) -> usize {
    let min_isr = config_control::min_insync_replicas(image, config, &topic.name);
    let replication_factor = topic.partitions.first().map_or(1, |p| p.replicas.len());
    min_isr.min(replication_factor)
}

/// The election and ELR rules of one topic, looked up once, when a loop over partitions meets
/// the first partition of the topic it changes.
struct TopicRules<'v> {
    view: View<'v>,
    topic_id: Option<TopicId>,
    rules: (Election, ElrRules),
}

impl<'v> TopicRules<'v> {
    fn new(view: View<'v>) -> TopicRules<'v> {
        TopicRules {
            view,
            topic_id: None,
            rules: (Election::Online, ElrRules::DISABLED),
        }
    }

    fn of(&mut self, topic: &TopicImage) -> (Election, ElrRules) {
        if self.topic_id != Some(topic.topic_id) {
            self.rules = (election_of(self.view, topic), elr_rules(self.view, topic));
            self.topic_id = Some(topic.topic_id);
        }
        self.rules
    }
}

/// Why brokers leave the partitions they replicate (Kafka's `generateLeaderAndIsrUpdates`
/// callers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Removal {
    /// Fenced, or in controlled shutdown: out of every ISR and leadership (Kafka's
    /// `handleBrokerFenced`, `handleBrokerInControlledShutdown`); with eligible leader replicas
    /// enabled, into the ELR of a partition whose ISR falls below its min ISR.
    Leave,
    /// Registered again after an unclean shutdown (KIP-966, eligible leader replicas enabled):
    /// out of every ISR and ELR too, since its log may have lost what it acknowledged (Kafka's
    /// `handleBrokerUncleanShutdown`).
    UncleanShutdown,
    /// Unregistered: out of every ISR; partitions whose ELR names it are decided again
    /// (Kafka's `handleBrokerUnregistered`, which leaves it in an ELR below the min ISR).
    Unregister,
}

/// Appends the partition changes that take `brokers` out of every ISR and move their
/// leaderships to another valid replica (or, where the topic allows unclean elections, to
/// another accepted replica; or to none), each decided by [`partition_change::build`] as the
/// `removal` calls for, stopping before `out` would exceed `records_max`. Returns true if
/// every change fit. With eligible leader replicas disabled an ISR keeps its last member (the
/// partition then has no leader until it comes back); enabled, the ISR may empty, its last
/// members becoming eligible leader replicas.
pub(crate) fn remove_brokers(
    view: View<'_>,
    brokers: &[NodeId],
    removal: Removal,
    records_max: usize,
    out: &mut Vec<MetadataRecord>,
) -> bool {
    let electorate = Electorate {
        image: view.image,
        removed: brokers,
        added: None,
    };
    let unclean_shutdown = if removal == Removal::UncleanShutdown {
        brokers
    } else {
        &[]
    };
    let mut rules = TopicRules::new(view);
    for topic in view.image.topics.iter() {
        for (i, p) in topic.partitions.iter().enumerate() {
            let leader_affected = p.leader.is_some_and(|l| brokers.contains(&l));
            let in_isr = p.isr.iter().any(|b| brokers.contains(b));
            let in_elr = removal != Removal::Leave && p.elr().iter().any(|b| brokers.contains(b));
            if !leader_affected && !in_isr && !in_elr {
                continue;
            }
            if out.len() + 1 > records_max {
                return false;
            }
            let (election, elr) = rules.of(topic);
            let change = Change {
                isr: p
                    .isr
                    .iter()
                    .copied()
                    .filter(|b| !brokers.contains(b))
                    .collect(),
                election,
                elr,
                unclean_shutdown,
                ..Change::of(p, elr)
            };
            let outcome = partition_change::build(
                topic.topic_id,
                PartitionId(i as u32),
                p,
                change,
                electorate,
            );
            out.extend(outcome.record);
        }
    }
    true
}

/// [`remove_brokers`] for brokers that are fenced or shut down: [`Removal::Leave`]. Fencing
/// and controlled shutdown both use it: in both cases the brokers may no longer lead or be in
/// sync (Kafka's `generateLeaderAndIsrUpdates` with them as `brokerToRemove`).
pub(crate) fn move_off_brokers(
    view: View<'_>,
    brokers: &[NodeId],
    records_max: usize,
    out: &mut Vec<MetadataRecord>,
) -> bool {
    remove_brokers(view, brokers, Removal::Leave, records_max, out)
}

/// Appends leader elections for leaderless partitions (of topics not being deleted): from the
/// ISR (or, an empty ISR, the eligible leader replicas, then the last known leader), counting
/// `added` (unfenced in the same batch) as acceptable; outside them where the topic allows
/// unclean elections. Kafka runs this when a broker is unfenced (`handleBrokerUnfenced`) and,
/// for unclean elections, periodically; corum's tick also elects what a full batch left over.
/// Any other change the decision makes (an ELR its min ISR no longer calls for) is written
/// with it. Skips the scan when the image has no leaderless partition. Returns how many
/// partitions got a leader.
pub(crate) fn elect_leaderless(
    view: View<'_>,
    added: Option<NodeId>,
    records_max: usize,
    out: &mut Vec<MetadataRecord>,
) -> usize {
    if view.image.topics.leaderless_count() == 0 {
        return 0;
    }
    let electorate = Electorate {
        image: view.image,
        removed: &[],
        added,
    };
    let mut rules = TopicRules::new(view);
    let mut elected = 0;
    for topic in view.image.topics.iter().filter(|t| !t.deleting) {
        for (i, p) in topic.partitions.iter().enumerate() {
            if p.leader.is_some() {
                continue;
            }
            if out.len() + 1 > records_max {
                return elected;
            }
            let (election, elr) = rules.of(topic);
            let change = Change {
                election,
                ..Change::of(p, elr)
            };
            let outcome = partition_change::build(
                topic.topic_id,
                PartitionId(i as u32),
                p,
                change,
                electorate,
            );
            elected += usize::from(outcome.leader.is_some());
            out.extend(outcome.record);
        }
    }
    elected
}

/// Number of partitions `broker` leads.
pub(crate) fn leadership_count(image: &MetadataImage, broker: NodeId) -> usize {
    image
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter(|p| p.leader == Some(broker))
        .count()
}

// ---------------------------------------------------------------------------------------------
// Replica placement.

/// Places replicas across racks and brokers: brokers are listed rack by rack in turn ("rack
/// alternated"), partition `p`'s leader is the broker at `start + p`, and its followers are taken
/// walking the list from a shift that grows every full round, preferring racks the partition
/// does not use yet. Each partition thus spans `min(rf, racks)` racks and leaders spread evenly.
pub(crate) struct Placer {
    /// Eligible brokers in rack-alternated order, with their rack index.
    brokers: Vec<(NodeId, usize)>,
    racks: usize,
    start: usize,
}

impl Placer {
    pub(crate) fn new(brokers: &BrokersImage, start_seed: u64) -> Self {
        let mut by_rack: BTreeMap<Option<&str>, Vec<NodeId>> = BTreeMap::new();
        for b in brokers.iter().filter(|b| b.is_eligible()) {
            by_rack
                .entry(b.rack.as_deref())
                .or_default()
                .push(b.broker_id);
        }
        let racks = by_rack.len();
        let mut lists: Vec<std::vec::IntoIter<NodeId>> =
            by_rack.into_values().map(Vec::into_iter).collect();
        let mut out = Vec::new();
        loop {
            let before = out.len();
            for (rack, list) in lists.iter_mut().enumerate() {
                if let Some(b) = list.next() {
                    out.push((b, rack));
                }
            }
            if out.len() == before {
                break;
            }
        }
        let start = if out.is_empty() {
            0
        } else {
            (start_seed % out.len() as u64) as usize
        };
        Placer {
            brokers: out,
            racks,
            start,
        }
    }

    pub(crate) fn available(&self) -> usize {
        self.brokers.len()
    }

    /// Replicas of partition `p` (`rf <= available()`).
    pub(crate) fn place(&self, p: usize, rf: usize) -> ReplicaList {
        let n = self.brokers.len();
        assert!(
            rf >= 1 && rf <= n,
            "placement of {rf} replicas over {n} brokers"
        );
        let first = (self.start + p) % n;
        let shift = if n > 1 { 1 + (p / n) % (n - 1) } else { 0 };
        let mut out = ReplicaList::new();
        let mut used_racks = BTreeSet::new();
        out.push(self.brokers[first].0);
        used_racks.insert(self.brokers[first].1);
        while out.len() < rf {
            if used_racks.len() == self.racks {
                used_racks.clear();
            }
            let pick = (0..n)
                .map(|k| self.brokers[(first + shift + k) % n])
                .find(|(b, rack)| !out.contains(b) && !used_racks.contains(rack))
                .or_else(|| {
                    (0..n)
                        .map(|k| self.brokers[(first + shift + k) % n])
                        .find(|(b, _)| !out.contains(b))
                })
                .expect("rf <= n leaves a broker to pick");
            out.push(pick.0);
            used_racks.insert(pick.1);
        }
        out
    }
}

/// A deterministic generator for one request: seeded from the configured seed and the request's
/// log offset, so the same request at the same offset always draws the same ids.
pub(crate) fn request_rng(seed: u64, ctx: &RequestContext) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ ctx.next_offset.0.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

fn new_topic_id(rng: &mut ChaCha8Rng, image: &MetadataImage, taken: &[TopicId]) -> TopicId {
    loop {
        let bits = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
        let id = TopicId(Uuid::from_random_bits(bits));
        if !image.topics.contains_id(id) && !taken.contains(&id) {
            return id;
        }
    }
}

/// The partition record of a new partition with `replicas`: ISR = the eligible replicas, leader =
/// the first of them, each replica's directory its broker's default (Kafka's `defaultDir`: its
/// only log directory, else UNASSIGNED, or MIGRATING for a broker that named none) or, below
/// `metadata.version` 3.7-IV2, MIGRATING (Kafka's PartitionRecord v0 has no directories). Errors
/// if no replica is eligible.
fn new_partition(
    topic_id: TopicId,
    partition_id: PartitionId,
    replicas: &[NodeId],
    image: &MetadataImage,
) -> Result<MetadataRecord, ApiError> {
    let brokers = &image.brokers;
    let isr: Vec<NodeId> = replicas
        .iter()
        .copied()
        .filter(|b| brokers.is_eligible(*b))
        .collect();
    let Some(&leader) = isr.first() else {
        return Err(ApiError::InvalidReplicaAssignment {
            reason: format!("every replica of partition {partition_id} is fenced or shutting down"),
        });
    };
    let directories = if feature_control::directory_assignment_supported(image) {
        replicas.iter().map(|b| brokers.default_dir(*b)).collect()
    } else {
        vec![MIGRATING_DIR; replicas.len()]
    };
    Ok(MetadataRecord::PartitionV2(PartitionRecordV2 {
        topic_id,
        partition_id,
        replicas: replicas.to_vec(),
        isr,
        leader: Some(leader),
        leader_recovery_state: LeaderRecoveryState::Recovered,
        leader_epoch: LeaderEpoch(0),
        partition_epoch: PartitionEpoch(0),
        directories,
    }))
}

/// Checks a manual assignment: every list has `rf` distinct registered brokers.
fn check_assignment(
    assignment: &[NodeId],
    rf: usize,
    brokers: &BrokersImage,
) -> Result<(), ApiError> {
    if assignment.len() != rf {
        return Err(ApiError::InvalidReplicaAssignment {
            reason: format!("all partitions must have {rf} replicas"),
        });
    }
    for (i, b) in assignment.iter().enumerate() {
        if assignment[..i].contains(b) {
            return Err(ApiError::InvalidReplicaAssignment {
                reason: format!("broker {b} listed twice"),
            });
        }
        if brokers.get(*b).is_none() {
            return Err(ApiError::InvalidReplicaAssignment {
                reason: format!("broker {b} is not registered"),
            });
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// CreateTopics.

/// One topic to create. `num_partitions`/`replication_factor` of -1 take the configured default;
/// a non-empty `assignments` (one replica list per partition) places replicas by hand.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct CreatableTopic {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub assignments: Vec<Vec<NodeId>>,
    pub configs: Vec<(String, String)>,
}

impl CreatableTopic {
    pub fn new(name: &str, num_partitions: i32, replication_factor: i16) -> Self {
        CreatableTopic {
            name: name.to_owned(),
            num_partitions,
            replication_factor,
            assignments: vec![],
            configs: vec![],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct CreateTopicsRequest {
    pub topics: Vec<CreatableTopic>,
    /// Validate and answer as if created, but return no records.
    pub validate_only: bool,
}

/// A created (or, in validate-only mode, creatable) topic.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct CreatedTopic {
    pub topic_id: TopicId,
    pub num_partitions: u32,
    pub replication_factor: u16,
}

/// One result per requested topic, in request order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct CreateTopicsResponse {
    pub topics: Vec<(String, Result<CreatedTopic, ApiError>)>,
}

/// A created (or creatable) topic with its configs described as DescribeConfigs would describe
/// them once it exists: its own settings and every inherited default (Kafka's CreateTopics v5+
/// answers carry them, so a client needs no second round trip).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct CreatedTopicWithConfigs {
    pub topic: CreatedTopic,
    /// Shared: the topics created on the same cluster defaults, with no settings of their
    /// own, share one list ([`super::config_control`]'s cache), so a listener can convert it
    /// once. On the wire it is the list itself (as a `Vec`).
    #[rkyv(with = rkyv::with::Unshare)]
    pub configs: std::sync::Arc<Vec<DescribedConfig>>,
}

/// One result per requested topic, in request order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct CreateTopicsWithConfigsResponse {
    pub topics: Vec<(String, Result<CreatedTopicWithConfigs, ApiError>)>,
}

pub(crate) fn create_topics(
    view: View<'_>,
    req: &CreateTopicsRequest,
    ctx: &RequestContext,
) -> ControllerResult<CreateTopicsResponse> {
    let image = view.image;
    let config = view.config;
    let mut rng = request_rng(config.seed, ctx);
    let placer = Placer::new(&image.brokers, rng.next_u64());
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(req.topics.len());
    let mut taken_ids = Vec::new();
    for (index, topic) in req.topics.iter().enumerate() {
        let duplicate = req
            .topics
            .iter()
            .enumerate()
            .any(|(j, t)| j != index && t.name == topic.name);
        let result = if duplicate {
            Err(ApiError::InvalidRequest {
                reason: "topic named more than once in the request".into(),
            })
        } else {
            let mut topic_records = Vec::new();
            create_one_topic(
                view,
                &placer,
                topic,
                &mut rng,
                &taken_ids,
                &mut topic_records,
            )
            .and_then(|created| {
                if records.len() + topic_records.len() > config.records_per_batch_max {
                    return Err(ApiError::TooManyRecords {
                        records: records.len() + topic_records.len(),
                        max: config.records_per_batch_max,
                    });
                }
                taken_ids.push(created.topic_id);
                records.append(&mut topic_records);
                Ok(created)
            })
        };
        results.push((topic.name.clone(), result));
    }
    if req.validate_only {
        records.clear();
    }
    ControllerResult::new(records, CreateTopicsResponse { topics: results })
}

fn create_one_topic(
    view: View<'_>,
    placer: &Placer,
    topic: &CreatableTopic,
    rng: &mut ChaCha8Rng,
    taken_ids: &[TopicId],
    out: &mut Vec<MetadataRecord>,
) -> Result<CreatedTopic, ApiError> {
    let (image, config) = (view.image, view.config);
    validate_topic_name(&topic.name)?;
    if let Some(existing) = image.topics.get_by_name(&topic.name) {
        return Err(if existing.deleting {
            ApiError::TopicDeletionInProgress {
                name: topic.name.clone(),
            }
        } else {
            ApiError::TopicAlreadyExists {
                name: topic.name.clone(),
            }
        });
    }
    let manual = !topic.assignments.is_empty();
    if manual && (topic.num_partitions != -1 || topic.replication_factor != -1) {
        return Err(ApiError::InvalidRequest {
            reason: "partition count and replication factor must be -1 with a manual assignment"
                .into(),
        });
    }
    let partitions = match topic.num_partitions {
        _ if manual => topic.assignments.len() as i64,
        -1 => i64::from(config_control::default_num_partitions(image, config)),
        n => i64::from(n),
    };
    if partitions < 1 || partitions > i64::from(config.partitions_per_topic_max) {
        return Err(ApiError::InvalidPartitions {
            requested: partitions.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
            reason: "must be between 1 and partitions.per.topic.max".into(),
        });
    }
    let rf = match topic.replication_factor {
        _ if manual => topic.assignments[0].len() as i64,
        -1 => i64::from(config_control::default_replication_factor(image, config)),
        n => i64::from(n),
    };
    if rf < 1
        || rf > i64::from(config.replication_factor_max)
        || (!manual && rf as usize > placer.available())
    {
        return Err(ApiError::InvalidReplicationFactor {
            requested: rf as i32,
            available: placer.available(),
        });
    }
    config_control::validate_new_topic_configs(image, config, &topic.name, &topic.configs)?;
    let (partitions, rf) = (partitions as usize, rf as usize);
    let topic_id = new_topic_id(rng, image, taken_ids);
    out.push(MetadataRecord::Topic(TopicRecordV1 {
        name: topic.name.clone(),
        topic_id,
        deleting: false,
    }));
    for (key, value) in &topic.configs {
        out.push(MetadataRecord::Config(ConfigRecordV1 {
            resource_type: ConfigResourceType::Topic,
            resource_name: topic.name.clone(),
            key: key.clone(),
            value: Some(value.clone()),
        }));
    }
    for p in 0..partitions {
        let replicas = if manual {
            check_assignment(&topic.assignments[p], rf, &image.brokers)?;
            ReplicaList::from_slice(&topic.assignments[p])
        } else {
            placer.place(p, rf)
        };
        out.push(new_partition(
            topic_id,
            PartitionId(p as u32),
            &replicas,
            image,
        )?);
    }
    Ok(CreatedTopic {
        topic_id,
        num_partitions: partitions as u32,
        replication_factor: rf as u16,
    })
}

// ---------------------------------------------------------------------------------------------
// Naming topics: by name or by id (KIP-516).

/// A topic as a client names it: by name, or by its id (Kafka's DeleteTopics v6 and Metadata
/// v10+ take either).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum TopicRef {
    Name(String),
    Id(TopicId),
}

impl TopicRef {
    /// The topic this names in `image`, including one being deleted. An unknown name is
    /// `UnknownTopic` (Kafka's UNKNOWN_TOPIC_OR_PARTITION), an unknown id `UnknownTopicId`
    /// (Kafka's UNKNOWN_TOPIC_ID).
    fn resolve<'a>(&self, image: &'a MetadataImage) -> Result<&'a TopicImage, ApiError> {
        match self {
            TopicRef::Name(name) => image
                .topics
                .get_by_name(name)
                .ok_or_else(|| ApiError::UnknownTopic { name: name.clone() }),
            TopicRef::Id(topic_id) => image.topics.get(*topic_id).ok_or(ApiError::UnknownTopicId {
                topic_id: *topic_id,
            }),
        }
    }

    /// [`TopicRef::resolve`] that hides a topic being deleted, as admin reads do (it is
    /// unknown to them).
    fn resolve_visible<'a>(&self, image: &'a MetadataImage) -> Result<&'a TopicImage, ApiError> {
        match self.resolve(image)? {
            t if !t.deleting => Ok(t),
            t => Err(match self {
                TopicRef::Name(name) => ApiError::UnknownTopic { name: name.clone() },
                TopicRef::Id(_) => ApiError::UnknownTopicId {
                    topic_id: t.topic_id,
                },
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// DeleteTopics.

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DeleteTopicsRequest {
    pub names: Vec<String>,
}

/// One result per requested name: the id of the topic removed.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DeleteTopicsResponse {
    pub topics: Vec<(String, Result<TopicId, ApiError>)>,
}

/// DeleteTopics naming each topic by name or by id (Kafka's DeleteTopics v6): the same
/// deletion as [`DeleteTopicsRequest`], whose results are keyed back by what was sent.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DeleteTopicsV2Request {
    pub topics: Vec<TopicRef>,
}

/// A removed topic: both its id and its name, whichever the request named it by.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DeletedTopic {
    pub topic_id: TopicId,
    pub name: String,
}

/// One result per requested topic, in request order, keyed by the request's own reference.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DeleteTopicsV2Response {
    pub topics: Vec<(TopicRef, Result<DeletedTopic, ApiError>)>,
}

/// Deletion: a `RemoveTopic` record per topic (Kafka's RemoveTopicRecord), which removes the
/// topic, its partitions and its configs. A topic an older controller only marked as being
/// deleted (`Topic{deleting: true}`) is answered TopicDeletionInProgress; the tick removes it
/// ([`remove_deleted_topics`]).
pub(crate) fn delete_topics(
    view: View<'_>,
    req: &DeleteTopicsRequest,
) -> ControllerResult<DeleteTopicsResponse> {
    let refs: Vec<TopicRef> = req.names.iter().cloned().map(TopicRef::Name).collect();
    let (records, results) = mark_deleting(view, &refs);
    let topics = req
        .names
        .iter()
        .cloned()
        .zip(results)
        .map(|(name, r)| (name, r.map(|d| d.topic_id)))
        .collect();
    ControllerResult::new(records, DeleteTopicsResponse { topics })
}

/// [`delete_topics`] with topics named by name or id.
pub(crate) fn delete_topics_v2(
    view: View<'_>,
    req: &DeleteTopicsV2Request,
) -> ControllerResult<DeleteTopicsV2Response> {
    let (records, results) = mark_deleting(view, &req.topics);
    let topics = req.topics.iter().cloned().zip(results).collect();
    ControllerResult::new(records, DeleteTopicsV2Response { topics })
}

/// The removal records of `refs` and one result per reference, in order. A topic named twice
/// (the same reference again, or by its name and by its id) fails the second time.
fn mark_deleting(
    view: View<'_>,
    refs: &[TopicRef],
) -> (Vec<MetadataRecord>, Vec<Result<DeletedTopic, ApiError>>) {
    let twice = || ApiError::InvalidRequest {
        reason: "topic named more than once in the request".into(),
    };
    let mut records = Vec::new();
    let mut marked = BTreeSet::new();
    let mut results = Vec::with_capacity(refs.len());
    for (i, r) in refs.iter().enumerate() {
        let result = if refs[..i].contains(r) {
            Err(twice())
        } else {
            match r.resolve(view.image) {
                Err(e) => Err(e),
                Ok(t) if t.deleting => Err(ApiError::TopicDeletionInProgress {
                    name: t.name.to_string(),
                }),
                Ok(t) if marked.contains(&t.topic_id) => Err(twice()),
                Ok(_) if records.len() >= view.config.records_per_batch_max => {
                    Err(ApiError::TooManyRecords {
                        records: records.len() + 1,
                        max: view.config.records_per_batch_max,
                    })
                }
                Ok(t) => {
                    marked.insert(t.topic_id);
                    records.push(MetadataRecord::RemoveTopic(RemoveTopicRecordV1 {
                        topic_id: t.topic_id,
                    }));
                    Ok(DeletedTopic {
                        topic_id: t.topic_id,
                        name: t.name.to_string(),
                    })
                }
            }
        };
        results.push(result);
    }
    (records, results)
}

/// The end of a deletion an older controller began: `RemoveTopic` for every topic whose
/// deletion intent (`Topic{deleting: true}`, which this controller no longer writes) is
/// committed and that is still present (no removal in flight).
pub(crate) fn remove_deleted_topics(
    view: View<'_>,
    records_max: usize,
    out: &mut Vec<MetadataRecord>,
) {
    for topic_id in view.committed.topics.deleting() {
        if out.len() >= records_max {
            return;
        }
        if view.image.topics.get(topic_id).is_some() {
            out.push(MetadataRecord::RemoveTopic(RemoveTopicRecordV1 {
                topic_id,
            }));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// DescribeTopics: what Kafka's Metadata (v10+) and DescribeTopicPartitions answers need.

/// The topics to describe: `None` describes every topic (Kafka's "all topics" Metadata).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeTopicsRequest {
    pub topics: Option<Vec<TopicRef>>,
}

/// One partition's replication state.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribedPartition {
    pub partition_id: PartitionId,
    /// `None` when the partition has no leader (Kafka: leader -1, LEADER_NOT_AVAILABLE).
    pub leader: Option<NodeId>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    /// Assigned replicas; the first is the preferred leader.
    pub replicas: Vec<NodeId>,
    pub isr: Vec<NodeId>,
    /// Replicas on a broker that is not registered or is fenced, or on a log directory that is
    /// not online on its broker (Kafka's `offline_replicas`, which a broker also fills with
    /// replicas on a broker without the request's listener: the listener knows that). The
    /// eligible leader replicas are in [`DescribedPartitionV2`].
    pub offline_replicas: Vec<NodeId>,
}

/// One partition's replication state with its eligible leader replicas and last known ELR
/// (KIP-966): what Kafka's DescribeTopicPartitions shows.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribedPartitionV2 {
    pub partition: DescribedPartition,
    pub eligible_leader_replicas: Vec<NodeId>,
    pub last_known_elr: Vec<NodeId>,
}

/// A topic and its partitions with their eligible leader replicas, in partition id order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribedTopicV2 {
    pub topic_id: TopicId,
    pub name: String,
    pub partitions: Vec<DescribedPartitionV2>,
}

/// [`DescribeTopicsResponse`] with each partition's eligible leader replicas (the answer to
/// DescribeTopicsV2, for Kafka's DescribeTopicPartitions): the same topics in the same order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeTopicsV2Response {
    pub topics: Vec<(TopicRef, Result<DescribedTopicV2, ApiError>)>,
}

/// A topic and its partitions, in partition id order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribedTopic {
    pub topic_id: TopicId,
    pub name: String,
    pub partitions: Vec<DescribedPartition>,
}

/// One result per requested topic, in request order, keyed by the request's reference; for
/// "all topics", every topic not being deleted, in name order, keyed by name. A topic being
/// deleted is unknown here, as to every admin request.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeTopicsResponse {
    pub topics: Vec<(TopicRef, Result<DescribedTopic, ApiError>)>,
}

/// Describes the topics of `req` as `image` holds them (a read: no records).
pub(crate) fn describe_topics(
    image: &MetadataImage,
    req: &DescribeTopicsRequest,
) -> DescribeTopicsResponse {
    DescribeTopicsResponse {
        topics: describe_each(image, req, describe_topic),
    }
}

/// [`describe_topics`] with each partition's eligible leader replicas and last known ELR.
pub(crate) fn describe_topics_v2(
    image: &MetadataImage,
    req: &DescribeTopicsRequest,
) -> DescribeTopicsV2Response {
    let describe = |brokers: &BrokersImage, t: &TopicImage| {
        let DescribedTopic {
            topic_id,
            name,
            partitions,
        } = describe_topic(brokers, t);
        DescribedTopicV2 {
            topic_id,
            name,
            partitions: partitions
                .into_iter()
                .zip(&t.partitions)
                .map(|(partition, p)| DescribedPartitionV2 {
                    partition,
                    eligible_leader_replicas: p.elr().to_vec(),
                    last_known_elr: p.last_known_elr().to_vec(),
                })
                .collect(),
        }
    };
    DescribeTopicsV2Response {
        topics: describe_each(image, req, describe),
    }
}

/// The topics `req` names (every one not being deleted, by name, for none), each described
/// by `describe` or refused.
fn describe_each<T>(
    image: &MetadataImage,
    req: &DescribeTopicsRequest,
    describe: impl Fn(&BrokersImage, &TopicImage) -> T,
) -> Vec<(TopicRef, Result<T, ApiError>)> {
    match &req.topics {
        Some(refs) => refs
            .iter()
            .map(|r| {
                let described = r
                    .resolve_visible(image)
                    .map(|t| describe(&image.brokers, t));
                (r.clone(), described)
            })
            .collect(),
        None => image
            .topics
            .names()
            .filter_map(|(name, id)| {
                image
                    .topics
                    .get(id)
                    .filter(|t| !t.deleting)
                    .map(|t| (name, t))
            })
            .map(|(name, t)| {
                (
                    TopicRef::Name(name.to_owned()),
                    Ok(describe(&image.brokers, t)),
                )
            })
            .collect(),
    }
}

fn describe_topic(brokers: &BrokersImage, t: &TopicImage) -> DescribedTopic {
    DescribedTopic {
        topic_id: t.topic_id,
        name: t.name.to_string(),
        partitions: t
            .partitions
            .iter()
            .enumerate()
            .map(|(i, p)| DescribedPartition {
                partition_id: PartitionId(i as u32),
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                replicas: p.replicas.to_vec(),
                isr: p.isr.to_vec(),
                offline_replicas: p
                    .replicas
                    .iter()
                    .zip(p.directories.iter())
                    .filter(|(b, dir)| {
                        brokers
                            .get(**b)
                            .is_none_or(|r| r.fenced || !r.has_online_dir(dir))
                    })
                    .map(|(b, _)| *b)
                    .collect(),
            })
            .collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// CreatePartitions.

/// Grow a topic to `count` partitions; `assignments` (optional) places the new ones by hand.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PartitionsIncrease {
    pub name: String,
    pub count: u32,
    pub assignments: Vec<Vec<NodeId>>,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct CreatePartitionsRequest {
    pub topics: Vec<PartitionsIncrease>,
    pub validate_only: bool,
}

/// One result per topic: the new partition count.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct CreatePartitionsResponse {
    pub topics: Vec<(String, Result<u32, ApiError>)>,
}

pub(crate) fn create_partitions(
    view: View<'_>,
    req: &CreatePartitionsRequest,
    ctx: &RequestContext,
) -> ControllerResult<CreatePartitionsResponse> {
    let mut rng = request_rng(view.config.seed, ctx);
    let placer = Placer::new(&view.image.brokers, rng.next_u64());
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(req.topics.len());
    for (i, inc) in req.topics.iter().enumerate() {
        let result = if req.topics[..i].iter().any(|t| t.name == inc.name) {
            Err(ApiError::InvalidRequest {
                reason: "topic named more than once in the request".into(),
            })
        } else {
            let mut out = Vec::new();
            grow_topic(view, &placer, inc, &mut out).and_then(|count| {
                if records.len() + out.len() > view.config.records_per_batch_max {
                    return Err(ApiError::TooManyRecords {
                        records: records.len() + out.len(),
                        max: view.config.records_per_batch_max,
                    });
                }
                records.append(&mut out);
                Ok(count)
            })
        };
        results.push((inc.name.clone(), result));
    }
    if req.validate_only {
        records.clear();
    }
    ControllerResult::new(records, CreatePartitionsResponse { topics: results })
}

fn visible_topic<'a>(image: &'a MetadataImage, name: &str) -> Result<&'a TopicImage, ApiError> {
    match image.topics.get_by_name(name) {
        Some(t) if !t.deleting => Ok(t),
        _ => Err(ApiError::UnknownTopic {
            name: name.to_owned(),
        }),
    }
}

fn grow_topic(
    view: View<'_>,
    placer: &Placer,
    inc: &PartitionsIncrease,
    out: &mut Vec<MetadataRecord>,
) -> Result<u32, ApiError> {
    let topic = visible_topic(view.image, &inc.name)?;
    let current = topic.partitions.len();
    let requested = inc.count as usize;
    if requested <= current {
        return Err(ApiError::InvalidPartitions {
            requested: inc.count.min(i32::MAX as u32) as i32,
            reason: "must be above the current partition count".into(),
        });
    }
    if inc.count > view.config.partitions_per_topic_max {
        return Err(ApiError::InvalidPartitions {
            requested: inc.count.min(i32::MAX as u32) as i32,
            reason: "above partitions.per.topic.max".into(),
        });
    }
    let rf = topic.partitions.first().map_or(1, |p| p.replicas.len());
    let new = requested - current;
    if !inc.assignments.is_empty() && inc.assignments.len() != new {
        return Err(ApiError::InvalidReplicaAssignment {
            reason: format!(
                "{} assignments given for {new} new partitions",
                inc.assignments.len()
            ),
        });
    }
    if inc.assignments.is_empty() && rf > placer.available() {
        return Err(ApiError::InvalidReplicationFactor {
            requested: rf as i32,
            available: placer.available(),
        });
    }
    for p in current..requested {
        let replicas = if inc.assignments.is_empty() {
            placer.place(p, rf)
        } else {
            let a = &inc.assignments[p - current];
            check_assignment(a, rf, &view.image.brokers)?;
            ReplicaList::from_slice(a)
        };
        out.push(new_partition(
            topic.topic_id,
            PartitionId(p as u32),
            &replicas,
            view.image,
        )?);
    }
    Ok(inc.count)
}

// ---------------------------------------------------------------------------------------------
// AlterPartition (and the older AlterIsr).
//
// Kafka's checks (`ReplicationControlManager.validateAlterPartitionData`), in its order, each
// answered per partition:
//
// | request for one partition                                      | answer                      |
// |----------------------------------------------------------------|-----------------------------|
// | the requester's broker epoch is not its registration's          | StaleBrokerEpoch (whole request), BrokerIdNotRegistered without one |
// | unknown topic id / partition                                    | UnknownTopicId / UnknownPartition |
// | leader or partition epoch above the current one                 | NotController (this controller is behind: find the new one) |
// | leader epoch below the current one                              | FencedLeaderEpoch           |
// | the requester does not lead the partition                       | InvalidRequest              |
// | partition epoch below the current one                           | StalePartitionEpoch (INVALID_UPDATE_VERSION) |
// | ISR with a duplicate or a non-replica, or without the leader    | InvalidIsr (INVALID_REQUEST) |
// | RECOVERING with more than one ISR member; RECOVERED → RECOVERING | InvalidRequest             |
// | an ISR member not registered, in controlled shutdown, fenced, or of another broker epoch than the one named | IneligibleReplica (KIP-903) |
// | otherwise                                                       | one PartitionChange (ISR, recovery state) if anything differs; the partition's state after it |
//
// The leader stays: it is in the new ISR and eligible (checked above), so Kafka's election keeps
// it too.

/// One ISR member with the broker epoch the leader knows it by (Kafka's `BrokerState`);
/// `None` (Kafka's -1) skips the epoch check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct IsrMember {
    pub broker_id: NodeId,
    pub broker_epoch: Option<BrokerEpoch>,
}

/// A leader's request to change one partition (Kafka's AlterPartition `PartitionData`, v3).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PartitionAlteration {
    pub partition_id: PartitionId,
    /// The leader epoch the leader knows; it must be current.
    pub leader_epoch: LeaderEpoch,
    pub new_isr_with_epochs: Vec<IsrMember>,
    pub leader_recovery_state: LeaderRecoveryState,
    /// The partition epoch the leader last saw; the change applies only if it is current.
    pub partition_epoch: PartitionEpoch,
}

/// The partitions of one topic to change.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AlterPartitionTopic {
    pub topic_id: TopicId,
    pub partitions: Vec<PartitionAlteration>,
}

/// Kafka's AlterPartition (KIP-497, KIP-704, KIP-841, KIP-903): a partition leader changes the
/// ISR and the leader recovery state of partitions it leads.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AlterPartitionRequest {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
    pub topics: Vec<AlterPartitionTopic>,
}

/// A partition's state after an accepted AlterPartition (what Kafka's response carries).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AlteredPartition {
    pub leader: Option<NodeId>,
    pub leader_epoch: LeaderEpoch,
    pub isr: Vec<NodeId>,
    pub leader_recovery_state: LeaderRecoveryState,
    pub partition_epoch: PartitionEpoch,
}

/// One topic's results, one per requested partition in request order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AlterPartitionTopicResult {
    pub topic_id: TopicId,
    pub partitions: Vec<(PartitionId, Result<AlteredPartition, ApiError>)>,
}

/// One result per requested topic, in request order. Whole-request errors (the requester's
/// broker epoch) are the handler's error instead.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AlterPartitionResponse {
    pub topics: Vec<AlterPartitionTopicResult>,
}

/// A leader's request to change one partition's ISR (corum's first version of AlterPartition:
/// no recovery state, no member epochs; served by [`alter_partition`] as Kafka serves
/// AlterPartition v0: members unchecked by epoch, state RECOVERED).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct IsrUpdate {
    pub topic_id: TopicId,
    pub partition_id: PartitionId,
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch the leader last saw; the change applies only if it is current.
    pub partition_epoch: PartitionEpoch,
    pub new_isr: Vec<NodeId>,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AlterIsrRequest {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
    pub partitions: Vec<IsrUpdate>,
}

/// The partition state after an accepted change.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct IsrUpdated {
    pub isr: Vec<NodeId>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
}

/// One result per requested partition, in request order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AlterIsrResponse {
    pub partitions: Vec<(TopicId, PartitionId, Result<IsrUpdated, ApiError>)>,
}

/// The requester's registration must be the one of `broker_epoch` (Kafka's
/// `checkBrokerEpoch`).
pub(crate) fn check_broker_epoch(
    image: &MetadataImage,
    broker_id: NodeId,
    broker_epoch: BrokerEpoch,
) -> Result<(), ApiError> {
    let reg = image
        .brokers
        .get(broker_id)
        .ok_or(ApiError::BrokerIdNotRegistered { broker_id })?;
    if reg.broker_epoch != broker_epoch {
        return Err(ApiError::StaleBrokerEpoch {
            broker_id,
            current: reg.broker_epoch,
            request: broker_epoch,
        });
    }
    Ok(())
}

/// The checks every partition a broker's request names goes through first, in Kafka's order:
/// named once in the request, room for one more record in the batch (`proposed` so far of at
/// most `max`), a known topic.
fn partition_named<'a>(
    seen: &mut BTreeSet<(TopicId, PartitionId)>,
    proposed: usize,
    max: usize,
    topic_id: TopicId,
    partition: PartitionId,
    topic: Option<&'a TopicImage>,
) -> Result<&'a TopicImage, ApiError> {
    if !seen.insert((topic_id, partition)) {
        return Err(ApiError::InvalidRequest {
            reason: "partition named more than once in the request".into(),
        });
    }
    if proposed + 1 > max {
        return Err(ApiError::TooManyRecords {
            records: proposed + 1,
            max,
        });
    }
    topic.ok_or(ApiError::UnknownTopicId { topic_id })
}

pub(crate) fn alter_partition(
    view: View<'_>,
    req: &AlterPartitionRequest,
) -> Result<ControllerResult<AlterPartitionResponse>, ApiError> {
    let image = view.image;
    check_broker_epoch(image, req.broker_id, req.broker_epoch)?;
    let max = view.config.records_per_batch_max;
    let mut records = Vec::new();
    let mut seen = BTreeSet::new();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        let topic = image.topics.get(t.topic_id);
        let partitions = t
            .partitions
            .iter()
            .map(|u| {
                let result = partition_named(
                    &mut seen,
                    records.len(),
                    max,
                    t.topic_id,
                    u.partition_id,
                    topic,
                )
                .and_then(|topic| alter_one(view, req.broker_id, topic, u, &mut records));
                (u.partition_id, result)
            })
            .collect();
        topics.push(AlterPartitionTopicResult {
            topic_id: t.topic_id,
            partitions,
        });
    }
    Ok(ControllerResult::new(
        records,
        AlterPartitionResponse { topics },
    ))
}

fn alter_one(
    view: View<'_>,
    broker_id: NodeId,
    topic: &TopicImage,
    u: &PartitionAlteration,
    out: &mut Vec<MetadataRecord>,
) -> Result<AlteredPartition, ApiError> {
    let (topic_id, partition) = (topic.topic_id, u.partition_id);
    let p = topic
        .partitions
        .get(partition.0 as usize)
        .ok_or(ApiError::UnknownPartition {
            topic_id,
            partition,
        })?;
    if u.leader_epoch > p.leader_epoch || u.partition_epoch > p.partition_epoch {
        // The leader knows a newer state than this controller: it is no longer the active one.
        return Err(ApiError::NotController);
    }
    if u.leader_epoch < p.leader_epoch {
        return Err(ApiError::FencedLeaderEpoch {
            topic_id,
            partition,
            current: p.leader_epoch,
            request: u.leader_epoch,
        });
    }
    if p.leader != Some(broker_id) {
        return Err(ApiError::InvalidRequest {
            reason: format!(
                "broker {broker_id} is not the leader of {topic_id}/{partition} (the leader is {})",
                p.leader.map_or("none".to_owned(), |l| l.to_string())
            )
            .into(),
        });
    }
    if u.partition_epoch < p.partition_epoch {
        return Err(ApiError::StalePartitionEpoch {
            topic_id,
            partition,
            current: p.partition_epoch,
            request: u.partition_epoch,
        });
    }
    let isr: ReplicaList = u.new_isr_with_epochs.iter().map(|m| m.broker_id).collect();
    if isr.iter().enumerate().any(|(i, b)| isr[..i].contains(b)) {
        return Err(ApiError::InvalidIsr {
            reason: "a broker is listed twice".into(),
        });
    }
    if isr.iter().any(|b| !p.replicas.contains(b)) {
        return Err(ApiError::InvalidIsr {
            reason: "every member must be a replica".into(),
        });
    }
    if !isr.contains(&broker_id) {
        return Err(ApiError::InvalidIsr {
            reason: "must contain the leader".into(),
        });
    }
    if u.leader_recovery_state == LeaderRecoveryState::Recovering && isr.len() > 1 {
        return Err(ApiError::InvalidRequest {
            reason: "a leader recovering from an unclean election must be the whole ISR".into(),
        });
    }
    if p.leader_recovery_state == LeaderRecoveryState::Recovered
        && u.leader_recovery_state == LeaderRecoveryState::Recovering
    {
        return Err(ApiError::InvalidRequest {
            reason: "the leader recovery state cannot go from RECOVERED to RECOVERING".into(),
        });
    }
    for m in &u.new_isr_with_epochs {
        let ineligible = |reason: String| {
            Err(ApiError::IneligibleReplica {
                broker_id: m.broker_id,
                reason: reason.into(),
            })
        };
        match view.image.brokers.get(m.broker_id) {
            None => return ineligible("not registered".into()),
            Some(r) if r.in_controlled_shutdown => {
                return ineligible("in controlled shutdown".into())
            }
            Some(r) if r.fenced => return ineligible("fenced".into()),
            Some(r) => {
                if let Some(e) = m.broker_epoch.filter(|e| *e != r.broker_epoch) {
                    return ineligible(format!(
                        "broker epoch {e} is not the registered {}",
                        r.broker_epoch
                    ));
                }
            }
        }
    }
    let change = Change {
        isr,
        leader_recovery_state: u.leader_recovery_state,
        ..Change::of(p, elr_rules(view, topic))
    };
    let outcome =
        partition_change::build(topic_id, partition, p, change, Electorate::new(view.image));
    let (leader_epoch, partition_epoch) = match &outcome.record {
        None => (p.leader_epoch, p.partition_epoch),
        Some(_) if outcome.changes_leader() => (p.leader_epoch.next(), p.partition_epoch.next()),
        Some(_) => (p.leader_epoch, p.partition_epoch.next()),
    };
    out.extend(outcome.record);
    Ok(AlteredPartition {
        leader: outcome.leader,
        leader_epoch,
        isr: outcome.isr.to_vec(),
        leader_recovery_state: outcome.leader_recovery_state,
        partition_epoch,
    })
}

/// AlterIsr, served as AlterPartition (see [`IsrUpdate`]), its answers cut back to its own.
pub(crate) fn alter_isr(
    view: View<'_>,
    req: &AlterIsrRequest,
) -> Result<ControllerResult<AlterIsrResponse>, ApiError> {
    let as_partition = AlterPartitionRequest {
        broker_id: req.broker_id,
        broker_epoch: req.broker_epoch,
        topics: req
            .partitions
            .iter()
            .map(|u| AlterPartitionTopic {
                topic_id: u.topic_id,
                partitions: vec![PartitionAlteration {
                    partition_id: u.partition_id,
                    leader_epoch: u.leader_epoch,
                    new_isr_with_epochs: u
                        .new_isr
                        .iter()
                        .map(|&broker_id| IsrMember {
                            broker_id,
                            broker_epoch: None,
                        })
                        .collect(),
                    leader_recovery_state: LeaderRecoveryState::Recovered,
                    partition_epoch: u.partition_epoch,
                }],
            })
            .collect(),
    };
    let ControllerResult { records, response } = alter_partition(view, &as_partition)?;
    let partitions = response
        .topics
        .into_iter()
        .flat_map(|t| {
            t.partitions.into_iter().map(move |(partition_id, r)| {
                let r = r.map(|a| IsrUpdated {
                    isr: a.isr,
                    leader_epoch: a.leader_epoch,
                    partition_epoch: a.partition_epoch,
                });
                (t.topic_id, partition_id, r)
            })
        })
        .collect();
    Ok(ControllerResult::new(
        records,
        AlterIsrResponse { partitions },
    ))
}

// ---------------------------------------------------------------------------------------------
// AssignReplicasToDirs (KIP-858).
//
// | request                                                    | answer                              |
// |------------------------------------------------------------|-------------------------------------|
// | `metadata.version` below 3.7-IV2                            | UnsupportedVersion (whole request)  |
// | the broker epoch is not the registration's                  | StaleBrokerEpoch (whole request), BrokerIdNotRegistered without one |
// | unknown topic id / partition                                | UnknownTopicId / UnknownPartition   |
// | the broker is not a replica                                 | NotReplica (NOT_LEADER_OR_FOLLOWER) |
// | a partition named twice                                     | InvalidRequest                      |
// | otherwise                                                   | a PartitionChange with the new directories if they differ; for a directory that is not online on the broker (not among its log directories), the same record also takes the broker out of the ISR and moves its leadership, as Kafka does for a replica on an offline directory |

/// The partitions of one topic whose replica on the requesting broker is in one directory.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct TopicPartitions {
    pub topic_id: TopicId,
    pub partitions: Vec<PartitionId>,
}

/// The replicas a broker placed in one of its log directories.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DirectoryAssignment {
    pub directory_id: Uuid,
    pub topics: Vec<TopicPartitions>,
}

/// Kafka's AssignReplicasToDirs: a broker tells the controller in which of its log directories
/// each of its replicas lives.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AssignReplicasToDirsRequest {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
    pub directories: Vec<DirectoryAssignment>,
}

/// One topic's results, one per requested partition in request order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct TopicPartitionResults {
    pub topic_id: TopicId,
    pub partitions: Vec<(PartitionId, Result<(), ApiError>)>,
}

/// One directory's results, its topics in request order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DirectoryAssignmentResult {
    pub directory_id: Uuid,
    pub topics: Vec<TopicPartitionResults>,
}

/// One result per requested directory, in request order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AssignReplicasToDirsResponse {
    pub directories: Vec<DirectoryAssignmentResult>,
}

pub(crate) fn assign_replicas_to_dirs(
    view: View<'_>,
    req: &AssignReplicasToDirsRequest,
) -> Result<ControllerResult<AssignReplicasToDirsResponse>, ApiError> {
    let image = view.image;
    if !feature_control::directory_assignment_supported(image) {
        return Err(ApiError::UnsupportedVersion {
            reason: format!(
                "directory assignment needs metadata.version {} (3.7-IV2) or above; it is {}",
                feature_control::DIRECTORY_ASSIGNMENT_LEVEL,
                feature_control::metadata_version(image)
            )
            .into(),
        });
    }
    check_broker_epoch(image, req.broker_id, req.broker_epoch)?;
    let reg = image
        .brokers
        .get(req.broker_id)
        .expect("check_broker_epoch found the registration");
    let max = view.config.records_per_batch_max;
    let mut records = Vec::new();
    let mut seen = BTreeSet::new();
    let mut directories = Vec::with_capacity(req.directories.len());
    for d in &req.directories {
        let online = reg.has_online_dir(&d.directory_id);
        let mut topics = Vec::with_capacity(d.topics.len());
        for t in &d.topics {
            let topic = image.topics.get(t.topic_id);
            let partitions = t
                .partitions
                .iter()
                .map(|&partition| {
                    let result = partition_named(
                        &mut seen,
                        records.len(),
                        max,
                        t.topic_id,
                        partition,
                        topic,
                    )
                    .and_then(|topic| assign_one(view, req.broker_id, topic, partition, d, online))
                    .map(|change| records.extend(change));
                    (partition, result)
                })
                .collect();
            topics.push(TopicPartitionResults {
                topic_id: t.topic_id,
                partitions,
            });
        }
        directories.push(DirectoryAssignmentResult {
            directory_id: d.directory_id,
            topics,
        });
    }
    Ok(ControllerResult::new(
        records,
        AssignReplicasToDirsResponse { directories },
    ))
}

/// The change (if any) that puts `broker`'s replica of `topic`/`partition` in directory `d`.
fn assign_one(
    view: View<'_>,
    broker: NodeId,
    topic: &TopicImage,
    partition: PartitionId,
    d: &DirectoryAssignment,
    online: bool,
) -> Result<Option<MetadataRecord>, ApiError> {
    let topic_id = topic.topic_id;
    let p = topic
        .partitions
        .get(partition.0 as usize)
        .ok_or(ApiError::UnknownPartition {
            topic_id,
            partition,
        })?;
    let Some(index) = p.replicas.iter().position(|r| *r == broker) else {
        return Err(ApiError::NotReplica {
            broker_id: broker,
            topic_id,
            partition,
        });
    };
    let mut directories = p.directories.to_vec();
    directories[index] = d.directory_id;
    // Kafka decides the assignment with an online election, and a replica leaving for an
    // offline directory as a broker leaving (the topic's election). It runs the assignment's
    // builder without the eligible leader replica rules, which empties a partition's ELR: corum
    // keeps them (one rule for every change).
    let mut change = Change {
        directories: Some(directories),
        ..Change::of(p, elr_rules(view, topic))
    };
    let removed = [broker];
    let mut electorate = Electorate::new(view.image);
    if !online {
        // A replica on an offline directory can neither lead nor be in sync.
        change.isr.retain(|b| *b != broker);
        change.election = election_of(view, topic);
        electorate.removed = &removed;
    }
    Ok(partition_change::build(topic_id, partition, p, change, electorate).record)
}

// ---------------------------------------------------------------------------------------------
// ElectLeaders.

#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum ElectionType {
    /// Move leadership to the first replica if it is an eligible ISR member.
    Preferred,
    /// For a leaderless partition: elect an eligible ISR member, or failing that any eligible
    /// replica (which becomes the whole ISR, possibly losing data, its leader RECOVERING).
    Unclean,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ElectLeadersRequest {
    pub election_type: ElectionType,
    /// Partitions by topic name; `None` means every partition (then only partitions that changed
    /// or failed with something other than "not needed" are reported).
    pub partitions: Option<Vec<(String, PartitionId)>>,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ElectLeadersResponse {
    pub partitions: Vec<(String, PartitionId, Result<NodeId, ApiError>)>,
}

pub(crate) fn elect_leaders(
    view: View<'_>,
    req: &ElectLeadersRequest,
) -> ControllerResult<ElectLeadersResponse> {
    let image = view.image;
    let max = view.config.records_per_batch_max;
    let mut records = Vec::new();
    let mut results = Vec::new();
    match &req.partitions {
        Some(list) => {
            for (i, (name, pid)) in list.iter().enumerate() {
                let result = if list[..i].iter().any(|(n, q)| n == name && q == pid) {
                    Err(ApiError::InvalidRequest {
                        reason: "partition named more than once in the request".into(),
                    })
                } else if records.len() + 1 > max {
                    Err(ApiError::TooManyRecords {
                        records: records.len() + 1,
                        max,
                    })
                } else {
                    visible_topic(image, name).and_then(|t| {
                        let p =
                            t.partitions
                                .get(pid.0 as usize)
                                .ok_or(ApiError::UnknownPartition {
                                    topic_id: t.topic_id,
                                    partition: *pid,
                                })?;
                        elect_one(view, t, *pid, p, req.election_type, &mut records)
                    })
                };
                results.push((name.clone(), *pid, result));
            }
        }
        None => {
            'topics: for t in image.topics.iter().filter(|t| !t.deleting) {
                for (i, p) in t.partitions.iter().enumerate() {
                    if records.len() + 1 > max {
                        break 'topics;
                    }
                    let pid = PartitionId(i as u32);
                    match elect_one(view, t, pid, p, req.election_type, &mut records) {
                        Err(ApiError::ElectionNotNeeded { .. }) => {}
                        r => results.push((t.name.to_string(), pid, r)),
                    }
                }
            }
        }
    }
    ControllerResult::new(
        records,
        ElectLeadersResponse {
            partitions: results,
        },
    )
}

/// One partition's election (Kafka's `electLeader`, see [`partition_change`]): PREFERRED elects
/// the first replica when it is valid, else keeps a valid current leader (then the preferred
/// one is not available), else elects the first valid replica; UNCLEAN elects for a leaderless
/// partition from the ISR (or its eligible leader replicas), else the first acceptable replica
/// with itself as the ISR, RECOVERING. The change is written only when it names a new leader:
/// where Kafka would also write one that only tidies the eligible leader replicas (and answer
/// success), corum answers that no leader is available and leaves that to the next change.
fn elect_one(
    view: View<'_>,
    topic: &TopicImage,
    partition: PartitionId,
    p: &PartitionImage,
    election_type: ElectionType,
    out: &mut Vec<MetadataRecord>,
) -> Result<NodeId, ApiError> {
    let topic_id = topic.topic_id;
    let (election, not_available) = match election_type {
        ElectionType::Preferred if p.leader == Some(p.replicas[0]) => {
            return Err(ApiError::ElectionNotNeeded {
                topic_id,
                partition,
            })
        }
        ElectionType::Unclean if p.leader.is_some() => {
            return Err(ApiError::ElectionNotNeeded {
                topic_id,
                partition,
            })
        }
        ElectionType::Preferred => (
            Election::Preferred,
            ApiError::PreferredLeaderNotAvailable {
                topic_id,
                partition,
            },
        ),
        ElectionType::Unclean => (
            Election::Unclean,
            ApiError::EligibleLeadersNotAvailable {
                topic_id,
                partition,
            },
        ),
    };
    let change = Change {
        election,
        ..Change::of(p, elr_rules(view, topic))
    };
    let outcome =
        partition_change::build(topic_id, partition, p, change, Electorate::new(view.image));
    match (outcome.leader, outcome.changes_leader()) {
        (Some(leader), true) => {
            out.extend(outcome.record);
            Ok(leader)
        }
        _ => Err(not_available),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{
        decode_batch, encode_batch, RegisterBrokerRecordV1, UnfenceBrokerRecordV1,
    };
    use corum_types::{BrokerEpoch, LogOffset};
    use proptest::prelude::*;

    fn brokers(racks: &[Option<u8>]) -> MetadataImage {
        let mut recs = Vec::new();
        for (i, rack) in racks.iter().enumerate() {
            let broker_id = NodeId(i as u32 + 1);
            let broker_epoch = BrokerEpoch(i as u64);
            recs.push(MetadataRecord::RegisterBroker(RegisterBrokerRecordV1 {
                broker_id,
                incarnation_id: Uuid::ZERO,
                broker_epoch,
                listeners: vec![],
                features: vec![],
                rack: rack.map(|r| format!("r{r}")),
            }));
            recs.push(MetadataRecord::UnfenceBroker(UnfenceBrokerRecordV1 {
                broker_id,
                broker_epoch,
            }));
        }
        let bytes = encode_batch(&recs);
        let mut image = MetadataImage::default();
        for (i, r) in decode_batch(&bytes).unwrap().iter().enumerate() {
            image.replay(LogOffset(i as u64), r).unwrap();
        }
        image
    }

    proptest! {
        /// Placement gives every partition `rf` distinct eligible brokers spanning
        /// `min(rf, racks)` racks, and over `3 × brokers` partitions every broker leads exactly 3.
        #[test]
        fn placement_spreads_racks_and_leaders(
            racks in proptest::collection::vec(proptest::option::of(0..4u8), 1..12),
            rf in 1..5usize,
            seed in any::<u64>(),
        ) {
            let image = brokers(&racks);
            let placer = Placer::new(&image.brokers, seed);
            let n = placer.available();
            let rf = rf.min(n);
            let rack_count = racks.iter().collect::<BTreeSet<_>>().len();
            let mut leaders = BTreeMap::new();
            for p in 0..n * 3 {
                let replicas = placer.place(p, rf);
                prop_assert_eq!(replicas.len(), rf);
                prop_assert!(replicas.iter().enumerate().all(|(i, b)| !replicas[..i].contains(b)));
                let used: BTreeSet<_> =
                    replicas.iter().map(|b| image.brokers.get(*b).unwrap().rack.clone()).collect();
                prop_assert_eq!(used.len(), rf.min(rack_count));
                *leaders.entry(replicas[0]).or_insert(0) += 1;
            }
            prop_assert_eq!(leaders.len(), n);
            prop_assert!(leaders.values().all(|c| *c == 3));
        }
    }

    /// Topic names follow Kafka's rules.
    #[test]
    fn topic_names() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        for bad in ["", ".", "..", "a b", "a/b", "ü"] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
    }

    mod kafka_semantics {
        use super::*;
        use crate::control::cluster_control::BrokerHeartbeatRequest;
        use crate::control::test_harness::{dir, Harness};
        use crate::ids::{MIGRATING_DIR, UNASSIGNED_DIR};
        use crate::records::{LeaderChange, PartitionChangeRecordV1};
        use crate::Controller;

        fn member(b: u32, epoch: Option<u64>) -> IsrMember {
            IsrMember {
                broker_id: NodeId(b),
                broker_epoch: epoch.map(BrokerEpoch),
            }
        }

        /// An AlterPartition of one partition from its current leader with `isr`.
        fn alter(h: &Harness, t: TopicId, p: u32, isr: &[u32]) -> AlterPartitionRequest {
            let part = h.partition(t, p);
            let leader = part.leader.expect("the partition has a leader");
            AlterPartitionRequest {
                broker_id: leader,
                broker_epoch: h.c.image().brokers.get(leader).unwrap().broker_epoch,
                topics: vec![AlterPartitionTopic {
                    topic_id: t,
                    partitions: vec![PartitionAlteration {
                        partition_id: PartitionId(p),
                        leader_epoch: part.leader_epoch,
                        new_isr_with_epochs: isr.iter().map(|b| member(*b, None)).collect(),
                        leader_recovery_state: part.leader_recovery_state,
                        partition_epoch: part.partition_epoch,
                    }],
                }],
            }
        }

        fn part(r: &mut AlterPartitionRequest) -> &mut PartitionAlteration {
            &mut r.topics[0].partitions[0]
        }

        /// The one partition result of `req`, with the records it would write.
        fn one(
            c: &Controller,
            req: &AlterPartitionRequest,
        ) -> (Vec<MetadataRecord>, Result<AlteredPartition, ApiError>) {
            let r = c.alter_partition(req).unwrap();
            let result = r.response.topics[0].partitions[0].1.clone();
            (r.records, result)
        }

        /// Three brokers with one directory each, topic `t` with one partition on all three
        /// (leader 1).
        fn three() -> (Harness, TopicId) {
            let mut h = Harness::new();
            h.brokers(&[1, 2, 3]);
            let t = h.topic("t", &[&[1, 2, 3]]);
            (h, t)
        }

        /// A leader's ISR shrink and expansion: one PartitionChange naming only the ISR;
        /// the partition epoch grows, the leader epoch does not (Kafka from 3.6); the answer
        /// is the partition's state after the change, and a request that changes nothing
        /// writes nothing and answers the current state.
        #[test]
        fn isr_changes_keep_the_leader_epoch() {
            let (mut h, t) = three();
            let before = h.partition(t, 0);
            let req = alter(&h, t, 0, &[1, 2]);
            let (records, result) = one(&h.c, &req);
            assert_eq!(
                records,
                vec![MetadataRecord::PartitionChange(PartitionChangeRecordV1 {
                    topic_id: t,
                    partition_id: PartitionId(0),
                    isr: Some(vec![NodeId(1), NodeId(2)]),
                    leader: LeaderChange::Unchanged,
                    replicas: None,
                    leader_recovery_state: None,
                    directories: None,
                })]
            );
            let answered = result.unwrap();
            h.commit(&records);
            let after = h.partition(t, 0);
            assert_eq!(after.leader_epoch, before.leader_epoch);
            assert_eq!(after.partition_epoch, before.partition_epoch.next());
            assert_eq!(
                answered,
                AlteredPartition {
                    leader: Some(NodeId(1)),
                    leader_epoch: after.leader_epoch,
                    isr: after.isr.to_vec(),
                    leader_recovery_state: LeaderRecoveryState::Recovered,
                    partition_epoch: after.partition_epoch,
                }
            );
            let req = alter(&h, t, 0, &[1, 2]);
            let (records, result) = one(&h.c, &req);
            assert!(records.is_empty());
            assert_eq!(result.unwrap().partition_epoch, after.partition_epoch);
        }

        /// Every refusal of Kafka's AlterPartition checks, in its order, with Kafka's codes.
        #[test]
        fn alter_partition_refusals() {
            let (mut h, t) = three();
            let base = alter(&h, t, 0, &[1, 2, 3]);
            let check = |h: &Harness,
                         f: &dyn Fn(&mut AlterPartitionRequest),
                         want: &dyn Fn(&ApiError) -> bool| {
                let mut req = base.clone();
                f(&mut req);
                let (records, result) = one(&h.c, &req);
                let e = result.unwrap_err();
                assert!(records.is_empty());
                assert!(want(&e), "{e:?}");
            };
            // The requester's own epoch is the whole request's.
            let mut stale = base.clone();
            stale.broker_epoch = BrokerEpoch(99);
            assert!(matches!(
                h.c.alter_partition(&stale),
                Err(ApiError::StaleBrokerEpoch { .. })
            ));
            let mut unknown = base.clone();
            unknown.broker_id = NodeId(9);
            assert!(matches!(
                h.c.alter_partition(&unknown),
                Err(ApiError::BrokerIdNotRegistered { .. })
            ));
            check(
                &h,
                &|r| r.topics[0].topic_id = TopicId(Uuid([0xee; 16])),
                &|e| matches!(e, ApiError::UnknownTopicId { .. }),
            );
            check(&h, &|r| part(r).partition_id = PartitionId(5), &|e| {
                matches!(e, ApiError::UnknownPartition { .. })
            });
            check(&h, &|r| part(r).leader_epoch = LeaderEpoch(7), &|e| {
                *e == ApiError::NotController
            });
            check(&h, &|r| part(r).partition_epoch = PartitionEpoch(7), &|e| {
                *e == ApiError::NotController
            });
            check(
                &h,
                &|r| part(r).new_isr_with_epochs.push(member(2, None)),
                &|e| matches!(e, ApiError::InvalidIsr { .. }),
            );
            check(
                &h,
                &|r| part(r).new_isr_with_epochs.push(member(4, None)),
                &|e| matches!(e, ApiError::InvalidIsr { .. }),
            );
            check(
                &h,
                &|r| {
                    part(r).new_isr_with_epochs.remove(0);
                },
                &|e| matches!(e, ApiError::InvalidIsr { .. }),
            );
            check(
                &h,
                &|r| part(r).leader_recovery_state = LeaderRecoveryState::Recovering,
                &|e| matches!(e, ApiError::InvalidRequest { .. }),
            );
            check(
                &h,
                &|r| part(r).new_isr_with_epochs[1].broker_epoch = Some(BrokerEpoch(77)),
                &|e| {
                    matches!(
                        e,
                        ApiError::IneligibleReplica {
                            broker_id: NodeId(2),
                            ..
                        }
                    )
                },
            );
            // Another broker than the leader.
            let mut other = alter(&h, t, 0, &[1, 2, 3]);
            other.broker_id = NodeId(2);
            other.broker_epoch = h.c.image().brokers.get(NodeId(2)).unwrap().broker_epoch;
            let (_, result) = one(&h.c, &other);
            assert!(matches!(result, Err(ApiError::InvalidRequest { .. })));
            // A change moves both epochs on: the old ones are fenced or stale.
            let shrink = alter(&h, t, 0, &[1, 2]);
            let r = h.c.alter_partition(&shrink).unwrap();
            h.commit(&r.records);
            let (_, result) = one(&h.c, &base);
            assert!(matches!(result, Err(ApiError::StalePartitionEpoch { .. })));
            let mut fenced_epoch = alter(&h, t, 0, &[1, 2]);
            fenced_epoch.topics[0].partitions[0].leader_epoch = LeaderEpoch(0);
            h.commit(&[MetadataRecord::PartitionChange(PartitionChangeRecordV1 {
                topic_id: t,
                partition_id: PartitionId(0),
                isr: None,
                leader: LeaderChange::Broker(NodeId(1)),
                replicas: None,
                leader_recovery_state: None,
                directories: None,
            })]);
            let (_, result) = one(&h.c, &fenced_epoch);
            assert!(matches!(result, Err(ApiError::FencedLeaderEpoch { .. })));
        }

        /// KIP-903: every member of the new ISR must be registered, unfenced and not in
        /// controlled shutdown (members already in the ISR too), with the epoch the leader
        /// named (none skips that check).
        #[test]
        fn ineligible_isr_members_are_refused() {
            let mut h = Harness::new();
            h.brokers(&[1, 2, 3, 4]);
            let t = h.topic("t", &[&[1, 2, 3, 4]]);
            let ineligible = |h: &Harness, isr: &[u32]| {
                let (records, result) = one(&h.c, &alter(h, t, 0, isr));
                assert!(records.is_empty());
                match result {
                    Err(ApiError::IneligibleReplica { broker_id, reason }) => (broker_id.0, reason),
                    other => panic!("{other:?}"),
                }
            };
            // Broker 2 fenced, broker 3 shutting down (it leads nothing: it is fenced at once,
            // so make it lead a partition first), broker 4 unregistered.
            let mut req = h.heartbeat_request(2, h.c.committed_end());
            req.want_fence = true;
            h.send_heartbeat(&req);
            assert_eq!(ineligible(&h, &[1, 2]).0, 2);
            h.topic("led", &[&[3]]);
            let mut req = h.heartbeat_request(3, h.c.committed_end());
            req.want_shutdown = true;
            h.send_heartbeat(&req);
            let (b, reason) = ineligible(&h, &[1, 3]);
            assert_eq!((b, &*reason), (3, "in controlled shutdown"));
            let mut fence4 = h.heartbeat_request(4, h.c.committed_end());
            fence4.want_fence = true;
            h.send_heartbeat(&fence4);
            let r =
                h.c.unregister_broker(&crate::control::cluster_control::UnregisterBrokerRequest {
                    broker_id: NodeId(4),
                });
            h.run(r);
            let (b, reason) = ineligible(&h, &[1, 4]);
            assert_eq!((b, &*reason), (4, "not registered"));
            // Broker 1 alone is fine.
            let (_, result) = one(&h.c, &alter(&h, t, 0, &[1]));
            assert!(result.is_ok());
        }

        /// After an unclean election the leader is RECOVERING with itself as the ISR: it may
        /// not add members while RECOVERING, nor go back from RECOVERED; RECOVERING →
        /// RECOVERED with a larger ISR is accepted.
        #[test]
        fn leader_recovery_state_moves_only_to_recovered() {
            let (mut h, t) = three();
            h.commit(&[MetadataRecord::PartitionChange(PartitionChangeRecordV1 {
                topic_id: t,
                partition_id: PartitionId(0),
                isr: Some(vec![NodeId(1)]),
                leader: LeaderChange::Broker(NodeId(1)),
                replicas: None,
                leader_recovery_state: Some(LeaderRecoveryState::Recovering),
                directories: None,
            })]);
            let mut req = alter(&h, t, 0, &[1, 2]);
            let (_, result) = one(&h.c, &req);
            assert!(
                matches!(result, Err(ApiError::InvalidRequest { .. })),
                "{result:?}"
            );
            req.topics[0].partitions[0].leader_recovery_state = LeaderRecoveryState::Recovered;
            let (records, result) = one(&h.c, &req);
            assert_eq!(
                result.unwrap().leader_recovery_state,
                LeaderRecoveryState::Recovered
            );
            h.commit(&records);
            assert_eq!(
                h.partition(t, 0).leader_recovery_state,
                LeaderRecoveryState::Recovered
            );
        }

        /// The older AlterIsr is served by AlterPartition: the same records and results.
        #[test]
        fn alter_isr_is_alter_partition() {
            let (h, t) = three();
            let p = h.partition(t, 0);
            let req = AlterIsrRequest {
                broker_id: NodeId(1),
                broker_epoch: h.c.image().brokers.get(NodeId(1)).unwrap().broker_epoch,
                partitions: vec![IsrUpdate {
                    topic_id: t,
                    partition_id: PartitionId(0),
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    new_isr: vec![NodeId(1), NodeId(3)],
                }],
            };
            let old = h.c.alter_isr(&req).unwrap();
            let new = h.c.alter_partition(&alter(&h, t, 0, &[1, 3])).unwrap();
            assert_eq!(old.records, new.records);
            let (_, _, result) = &old.response.partitions[0];
            assert_eq!(result.as_ref().unwrap().isr, vec![NodeId(1), NodeId(3)]);
        }

        /// A new replica's directory is its broker's only log directory, UNASSIGNED when it
        /// has several, MIGRATING when it registered none (Kafka's defaultDir).
        #[test]
        fn new_replicas_get_their_brokers_default_directory() {
            let mut h = Harness::new();
            h.register(1, vec![dir(1)]);
            h.register(2, vec![dir(2), dir(22)]);
            let legacy = BrokerHeartbeatRequest {
                broker_id: NodeId(3),
                broker_epoch: None,
                incarnation_id: Uuid([3; 16]),
                listeners: vec![crate::records::ListenerV1 {
                    name: "PLAINTEXT".into(),
                    host: "b3".into(),
                    port: 9092,
                }],
                features: crate::control::feature_control::supported_features(),
                rack: None,
                next_metadata_offset: LogOffset(0),
                want_fence: false,
                want_shutdown: false,
            };
            h.send_heartbeat(&legacy);
            for b in [1, 2, 3] {
                h.heartbeat(b);
            }
            let t = h.topic("t", &[&[1, 2, 3]]);
            assert_eq!(
                &h.partition(t, 0).directories[..],
                &[dir(1), UNASSIGNED_DIR, MIGRATING_DIR]
            );
        }

        fn assign(
            h: &Harness,
            broker: u32,
            dir_id: Uuid,
            t: TopicId,
            partitions: &[u32],
        ) -> AssignReplicasToDirsRequest {
            AssignReplicasToDirsRequest {
                broker_id: NodeId(broker),
                broker_epoch: h
                    .c
                    .image()
                    .brokers
                    .get(NodeId(broker))
                    .unwrap()
                    .broker_epoch,
                directories: vec![DirectoryAssignment {
                    directory_id: dir_id,
                    topics: vec![TopicPartitions {
                        topic_id: t,
                        partitions: partitions.iter().map(|p| PartitionId(*p)).collect(),
                    }],
                }],
            }
        }

        fn results(r: &AssignReplicasToDirsResponse) -> Vec<Result<(), ApiError>> {
            r.directories
                .iter()
                .flat_map(|d| d.topics.iter())
                .flat_map(|t| t.partitions.iter().map(|(_, r)| r.clone()))
                .collect()
        }

        /// AssignReplicasToDirs sets the broker's replica's directory with one PartitionChange
        /// (nothing when it is already there); a partition the broker holds no replica of is
        /// NotReplica, an unknown one UnknownPartition, an unknown topic UnknownTopicId; the
        /// broker epoch is the whole request's; below 3.7-IV2 the request is unsupported.
        #[test]
        fn replicas_are_assigned_to_directories() {
            let mut h = Harness::new();
            h.register(1, vec![dir(1), dir(11)]);
            h.brokers(&[2, 3]);
            h.heartbeat(1);
            let t = h.topic("t", &[&[1, 2], &[2, 3]]);
            assert_eq!(
                &h.partition(t, 0).directories[..],
                &[UNASSIGNED_DIR, dir(2)]
            );
            let req = assign(&h, 1, dir(11), t, &[0, 1, 7, 0]);
            let r = h.c.assign_replicas_to_dirs(&req).unwrap();
            assert_eq!(r.records.len(), 1);
            let rs = results(&r.response);
            assert!(rs[0].is_ok());
            assert!(matches!(rs[1], Err(ApiError::NotReplica { .. })));
            assert!(matches!(rs[2], Err(ApiError::UnknownPartition { .. })));
            assert!(matches!(rs[3], Err(ApiError::InvalidRequest { .. })));
            let before = h.partition(t, 0);
            h.commit(&r.records);
            let after = h.partition(t, 0);
            assert_eq!(&after.directories[..], &[dir(11), dir(2)]);
            assert_eq!(after.leader_epoch, before.leader_epoch);
            assert_eq!(after.partition_epoch, before.partition_epoch.next());
            // Again: nothing to change.
            let r = h.c.assign_replicas_to_dirs(&req).unwrap();
            assert!(r.records.is_empty());
            let unknown = assign(&h, 1, dir(1), TopicId(Uuid([0xee; 16])), &[0]);
            let r = h.c.assign_replicas_to_dirs(&unknown).unwrap();
            assert!(matches!(
                results(&r.response)[0],
                Err(ApiError::UnknownTopicId { .. })
            ));
            let mut stale = req.clone();
            stale.broker_epoch = BrokerEpoch(99);
            assert!(matches!(
                h.c.assign_replicas_to_dirs(&stale),
                Err(ApiError::StaleBrokerEpoch { .. })
            ));
            let old = Harness::at_metadata_version(16);
            assert!(matches!(
                old.c.assign_replicas_to_dirs(&req),
                Err(ApiError::UnsupportedVersion { .. })
            ));
        }

        /// A replica assigned to a directory its broker does not have online (not among its
        /// log directories) is offline, as in Kafka: the same record takes the broker out of
        /// the ISR and moves its leadership, and it is not elected while there.
        #[test]
        fn a_replica_on_an_offline_directory_leaves_isr_and_leadership() {
            let (mut h, t) = three();
            let req = assign(&h, 1, dir(99), t, &[0]);
            let r = h.c.assign_replicas_to_dirs(&req).unwrap();
            match &r.records[..] {
                [MetadataRecord::PartitionChange(c)] => {
                    assert_eq!(c.leader, LeaderChange::Broker(NodeId(2)));
                    assert_eq!(c.isr.as_deref(), Some(&[NodeId(2), NodeId(3)][..]));
                    assert_eq!(
                        c.directories.as_deref(),
                        Some(&[dir(99), dir(2), dir(3)][..])
                    );
                }
                other => panic!("{other:?}"),
            }
            h.commit(&r.records);
            // The preferred leader (1) cannot be elected back while its replica is offline.
            let r = h.c.elect_leaders(&ElectLeadersRequest {
                election_type: ElectionType::Preferred,
                partitions: Some(vec![("t".into(), PartitionId(0))]),
            });
            assert!(matches!(
                r.unwrap().response.partitions[0].2,
                Err(ApiError::PreferredLeaderNotAvailable { .. })
            ));
        }

        /// With `unclean.leader.election.enable` (the topic's, or the cluster default's),
        /// fencing the last ISR member elects another live replica with itself as the ISR,
        /// RECOVERING (leader epoch and partition epoch each grow by one, one record); without
        /// it the partition is left without a leader.
        #[test]
        fn unclean_elections_follow_the_topic_config() {
            for (topic_config, cluster_config, unclean) in [
                (None, None, false),
                (Some("true"), None, true),
                (None, Some("true"), true),
                (Some("false"), Some("true"), false),
            ] {
                let (mut h, t) = three();
                // Only broker 1 in the ISR.
                let r = h.c.alter_partition(&alter(&h, t, 0, &[1])).unwrap();
                h.commit(&r.records);
                if let Some(v) = topic_config {
                    h.config("t", "unclean.leader.election.enable", v);
                }
                if let Some(v) = cluster_config {
                    h.config("", "unclean.leader.election.enable", v);
                }
                let before = h.partition(t, 0);
                let mut req = h.heartbeat_request(1, h.c.committed_end());
                req.want_fence = true;
                let ctx = h.ctx();
                let r = h.c.broker_heartbeat(&req, &ctx).unwrap();
                let changes = r
                    .records
                    .iter()
                    .filter(|r| matches!(r, MetadataRecord::PartitionChange(_)))
                    .count();
                assert_eq!(changes, 1);
                h.commit(&r.records);
                let p = h.partition(t, 0);
                assert_eq!(p.leader_epoch, before.leader_epoch.next());
                assert_eq!(p.partition_epoch, before.partition_epoch.next());
                if unclean {
                    assert_eq!(p.leader, Some(NodeId(2)));
                    assert_eq!(&p.isr[..], &[NodeId(2)]);
                    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);
                } else {
                    assert_eq!(p.leader, None);
                    assert_eq!(&p.isr[..], &[NodeId(1)]);
                    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovered);
                }
            }
        }

        /// The periodic tick elects unclean leaders for leaderless partitions whose topic
        /// allows it (Kafka's maybeElectUncleanLeaders), once a replica can lead.
        #[test]
        fn the_tick_elects_unclean_leaders() {
            let (mut h, t) = three();
            let r = h.c.alter_partition(&alter(&h, t, 0, &[1])).unwrap();
            h.commit(&r.records);
            let mut req = h.heartbeat_request(1, h.c.committed_end());
            req.want_fence = true;
            h.send_heartbeat(&req);
            assert_eq!(h.partition(t, 0).leader, None);
            let ctx = h.ctx();
            let tick = h.c.tick(&ctx);
            assert_eq!(h.run(tick).leaders_elected, 0);
            h.config("t", "unclean.leader.election.enable", "TRUE");
            let ctx = h.ctx();
            let tick = h.c.tick(&ctx);
            assert_eq!(h.run(tick).leaders_elected, 1);
            let p = h.partition(t, 0);
            assert_eq!(
                (p.leader, p.leader_recovery_state),
                (Some(NodeId(2)), LeaderRecoveryState::Recovering)
            );
        }
    }
}
