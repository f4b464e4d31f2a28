//! Property tests over random operation sequences driven through the in-memory driver.
//!
//! Besides the controller's own invariants, every commit checks the image against a model of
//! what a Kafka broker computes from the same records rendered as Kafka's (the `kafka_model`
//! module below): the partition epoch grows by one per PartitionChange, the leader epoch when
//! the change names a leader, fencing leaves the controlled-shutdown flag, and so on.

use crate::common::{replay_log, Driver};
use corum_controller::control::cluster_control::{
    BrokerRegistrationRequest, PreviousBrokerEpoch, RegisterControllerRequest,
    UnregisterBrokerRequest,
};
use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use corum_controller::control::feature_control::{
    elr_enabled, supported_features, FeatureUpdate, UpdateFeaturesRequest,
    ELIGIBLE_LEADER_REPLICAS_VERSION,
};
use corum_controller::control::replication_control::{
    effective_min_isr, AlterIsrRequest, AlterPartitionRequest, AlterPartitionTopic,
    AssignReplicasToDirsRequest, CreatableTopic, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, DeleteTopicsV2Request, DescribeTopicsRequest, DirectoryAssignment,
    ElectLeadersRequest, ElectionType, IsrMember, IsrUpdate, PartitionAlteration,
    PartitionsIncrease, TopicPartitions, TopicRef,
};
use corum_controller::control::ImageReads;
use corum_controller::image::ConfigResource;
use corum_controller::records::{
    BrokerEndpointV1, ConfigResourceType, ControllerEndpointV1, LeaderRecoveryState, ListenerV1,
    SupportedFeatureV1,
};
use corum_controller::{
    decode_batch, encode_batch, BrokerHeartbeatRequest, ControllerConfig, MetadataImage,
    MetadataRecord, PartitionId,
};
use corum_types::{BrokerEpoch, LogOffset, NodeId, Uuid};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Register {
        broker: u32,
        incarnation: u8,
    },
    Heartbeat {
        broker: u32,
        caught_up: bool,
        shutdown: bool,
        fence: bool,
    },
    /// Every registered broker heartbeats, caught up (keeps leases alive).
    HeartbeatAll,
    Advance {
        ms: u64,
    },
    Tick,
    CreateTopic {
        name: u8,
        partitions: i32,
        rf: i16,
    },
    DeleteTopic {
        name: u8,
    },
    CreatePartitions {
        name: u8,
        count: u32,
    },
    AlterIsr {
        name: u8,
        partition: u32,
        mask: u8,
    },
    Elect {
        unclean: bool,
    },
    Unregister {
        broker: u32,
    },
    /// A controller registers (again), with one of two ports and feature ranges.
    RegisterController {
        controller: u32,
        incarnation: u8,
        variant: bool,
    },
    /// DeleteTopics naming the topic by its id.
    DeleteTopicById {
        name: u8,
    },
    /// A broker registers with Kafka's BrokerRegistration and `dirs` log directories (0:
    /// refused), saying of its previous registration: 0 nothing (killed), 1 its epoch (a clean
    /// shutdown), 2 a wrong epoch, 3 that it cannot say (before v3).
    RegisterBroker {
        broker: u32,
        incarnation: u8,
        dirs: u8,
        previous: u8,
    },
    /// The leader of a partition sends AlterPartition: ISR from `mask`, member epochs named or
    /// not (or wrong), the recovery state it asks for.
    AlterPartition {
        name: u8,
        partition: u32,
        mask: u8,
        epochs: u8,
        recovered: bool,
    },
    /// A broker assigns its replica of a partition to one of its directories, or (`which` 3)
    /// to one it does not have.
    AssignDirs {
        broker: u32,
        name: u8,
        partition: u32,
        which: u8,
    },
    /// `unclean.leader.election.enable` set for a topic, or the cluster default (`None`).
    Unclean {
        name: Option<u8>,
        on: bool,
    },
    /// `eligible.leader.replicas.version` set to 1, or back to 0 (KIP-966).
    Elr {
        on: bool,
    },
    /// `min.insync.replicas` set (1 to 3) or deleted, for a topic or the cluster default
    /// (`None`), or for broker 1 (`Some(9)`: refused while eligible leader replicas are on).
    MinIsr {
        name: Option<u8>,
        value: Option<u8>,
    },
    Commit,
    FailOver,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1..6u32, 0..2u8).prop_map(|(broker, incarnation)| Op::Register { broker, incarnation }),
        4 => Just(Op::HeartbeatAll),
        4 => (1..6u32, prop::bool::weighted(0.7), prop::bool::weighted(0.05), prop::bool::weighted(0.05))
            .prop_map(|(broker, caught_up, shutdown, fence)| Op::Heartbeat { broker, caught_up, shutdown, fence }),
        2 => (0..4000u64).prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::Tick),
        3 => (0..4u8, 1..5i32, 1..4i16).prop_map(|(name, partitions, rf)| Op::CreateTopic { name, partitions, rf }),
        1 => (0..4u8).prop_map(|name| Op::DeleteTopic { name }),
        1 => (0..4u8, 1..7u32).prop_map(|(name, count)| Op::CreatePartitions { name, count }),
        3 => (0..4u8, 0..5u32, any::<u8>()).prop_map(|(name, partition, mask)| Op::AlterIsr { name, partition, mask }),
        1 => any::<bool>().prop_map(|unclean| Op::Elect { unclean }),
        1 => (1..6u32).prop_map(|broker| Op::Unregister { broker }),
        1 => (1..4u32, 0..2u8, any::<bool>())
            .prop_map(|(controller, incarnation, variant)| Op::RegisterController { controller, incarnation, variant }),
        1 => (0..4u8).prop_map(|name| Op::DeleteTopicById { name }),
        3 => (1..6u32, 0..2u8, 0..3u8, 0..4u8)
            .prop_map(|(broker, incarnation, dirs, previous)| Op::RegisterBroker { broker, incarnation, dirs, previous }),
        3 => (0..4u8, 0..5u32, any::<u8>(), 0..3u8, any::<bool>())
            .prop_map(|(name, partition, mask, epochs, recovered)| Op::AlterPartition { name, partition, mask, epochs, recovered }),
        2 => (1..6u32, 0..4u8, 0..5u32, 0..4u8)
            .prop_map(|(broker, name, partition, which)| Op::AssignDirs { broker, name, partition, which }),
        1 => (proptest::option::of(0..4u8), any::<bool>()).prop_map(|(name, on)| Op::Unclean { name, on }),
        1 => any::<bool>().prop_map(|on| Op::Elr { on }),
        2 => (proptest::option::of(prop_oneof![0..4u8, Just(9u8)]), proptest::option::of(1..4u8))
            .prop_map(|(name, value)| Op::MinIsr { name, value }),
        4 => Just(Op::Commit),
        1 => Just(Op::FailOver),
    ]
}

/// The features every broker of these tests supports: this controller's (Kafka 4.1's
/// `metadata.version` range, eligible leader replicas, the group and transaction versions), so
/// brokers register with a cluster formatted at 4.1.
fn features() -> Vec<SupportedFeatureV1> {
    supported_features()
}

/// Log directory `i` of broker `broker`'s incarnation `incarnation` (distinct per broker).
fn log_dir(broker: u32, incarnation: u8, i: u8) -> Uuid {
    let mut b = [0x5a; 16];
    b[0] = broker as u8;
    b[1] = incarnation;
    b[2] = i;
    Uuid(b)
}

fn heartbeat(
    d: &Driver,
    broker: u32,
    incarnation: u8,
    register: bool,
    caught_up: bool,
) -> BrokerHeartbeatRequest {
    let id = NodeId(broker);
    let epoch = d.controller.image().brokers.get(id).map(|b| b.broker_epoch);
    let seen = d
        .controller
        .leases()
        .get(id)
        .map_or(LogOffset(0), |l| l.offset_seen);
    let offset = if caught_up {
        d.committed_end.max(seen)
    } else {
        seen
    };
    BrokerHeartbeatRequest {
        broker_id: id,
        broker_epoch: if register { None } else { epoch },
        incarnation_id: Uuid([incarnation; 16]),
        listeners: vec![ListenerV1 {
            name: "P".into(),
            host: "h".into(),
            port: 1,
        }],
        features: features(),
        rack: Some(format!("r{}", broker % 3)),
        next_metadata_offset: offset,
        want_fence: false,
        want_shutdown: false,
    }
}

/// Runs one operation; asserts that the handler left the image untouched.
fn apply(d: &mut Driver, op: &Op) {
    let ctx = d.ctx();
    let before = d.controller.image().clone();
    let records = match op {
        Op::Register {
            broker,
            incarnation,
        } => {
            let req = heartbeat(d, *broker, *incarnation, true, false);
            d.controller
                .broker_heartbeat(&req, &ctx)
                .map(|r| r.records)
                .unwrap_or_default()
        }
        Op::Heartbeat {
            broker,
            caught_up,
            shutdown,
            fence,
        } => {
            let mut req = heartbeat(d, *broker, 0, false, *caught_up);
            req.want_shutdown = *shutdown;
            req.want_fence = *fence;
            if req.broker_epoch.is_none() {
                return;
            }
            d.controller
                .broker_heartbeat(&req, &ctx)
                .map(|r| r.records)
                .unwrap_or_default()
        }
        Op::HeartbeatAll => {
            let ids: Vec<u32> = d
                .controller
                .image()
                .brokers
                .iter()
                .map(|b| b.broker_id.0)
                .collect();
            for id in ids {
                apply(
                    d,
                    &Op::Heartbeat {
                        broker: id,
                        caught_up: true,
                        shutdown: false,
                        fence: false,
                    },
                );
            }
            return;
        }
        Op::Advance { ms } => {
            d.now_ms += ms;
            return;
        }
        Op::Tick => d.controller.tick(&ctx).unwrap().records,
        Op::CreateTopic {
            name,
            partitions,
            rf,
        } => {
            let req = CreateTopicsRequest {
                topics: vec![CreatableTopic::new(&format!("t{name}"), *partitions, *rf)],
                validate_only: false,
            };
            d.controller.create_topics(&req, &ctx).unwrap().records
        }
        Op::DeleteTopic { name } => {
            d.controller
                .delete_topics(&DeleteTopicsRequest {
                    names: vec![format!("t{name}")],
                })
                .unwrap()
                .records
        }
        Op::CreatePartitions { name, count } => {
            let req = CreatePartitionsRequest {
                topics: vec![PartitionsIncrease {
                    name: format!("t{name}"),
                    count: *count,
                    assignments: vec![],
                }],
                validate_only: false,
            };
            d.controller.create_partitions(&req, &ctx).unwrap().records
        }
        Op::AlterIsr {
            name,
            partition,
            mask,
        } => {
            let image = d.controller.image();
            let Some(t) = image.topics.get_by_name(&format!("t{name}")) else {
                return;
            };
            let Some(p) = t.partitions.get(*partition as usize) else {
                return;
            };
            let Some(leader) = p.leader else { return };
            let Some(reg) = image.brokers.get(leader) else {
                return;
            };
            let mut isr: Vec<NodeId> = p
                .replicas
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, b)| *b)
                .collect();
            if !isr.contains(&leader) && mask & 0x80 != 0 {
                isr.push(leader);
            }
            let req = AlterIsrRequest {
                broker_id: leader,
                broker_epoch: reg.broker_epoch,
                partitions: vec![IsrUpdate {
                    topic_id: t.topic_id,
                    partition_id: PartitionId(*partition),
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    new_isr: isr,
                }],
            };
            d.controller.alter_isr(&req).unwrap().records
        }
        Op::Elect { unclean } => {
            let election_type = if *unclean {
                ElectionType::Unclean
            } else {
                ElectionType::Preferred
            };
            d.controller
                .elect_leaders(&ElectLeadersRequest {
                    election_type,
                    partitions: None,
                })
                .unwrap()
                .records
        }
        Op::Unregister { broker } => {
            let req = UnregisterBrokerRequest {
                broker_id: NodeId(*broker),
            };
            d.controller
                .unregister_broker(&req)
                .map(|r| r.records)
                .unwrap_or_default()
        }
        Op::RegisterController {
            controller,
            incarnation,
            variant,
        } => {
            let req = RegisterControllerRequest {
                controller_id: NodeId(*controller),
                incarnation_id: Uuid([*incarnation; 16]),
                end_points: vec![ControllerEndpointV1 {
                    name: "CONTROLLER".into(),
                    host: format!("c{controller}"),
                    port: if *variant { 9093 } else { 19093 },
                    security_protocol: 0,
                }],
                features: supported_features()
                    .into_iter()
                    .map(|mut f| {
                        if f.name == "metadata.version" && !variant {
                            f.max_level = 20;
                        }
                        f
                    })
                    .collect(),
            };
            let r = d.controller.register_controller(&req).unwrap();
            // Registering what the image already holds writes nothing.
            let again = d
                .controller
                .image()
                .controllers
                .get(req.controller_id)
                .is_some_and(|c| {
                    c.incarnation_id == req.incarnation_id
                        && c.end_points == req.end_points
                        && c.features == req.features
                });
            assert_eq!(r.records.is_empty(), again, "{op:?}");
            r.records
        }
        Op::DeleteTopicById { name } => {
            let Some(t) = d.controller.image().topics.get_by_name(&format!("t{name}")) else {
                return;
            };
            let req = DeleteTopicsV2Request {
                topics: vec![TopicRef::Id(t.topic_id)],
            };
            d.controller.delete_topics_v2(&req).unwrap().records
        }
        Op::RegisterBroker {
            broker,
            incarnation,
            dirs,
            previous,
        } => {
            let current = d.controller.image().brokers.get(NodeId(*broker));
            let previous_broker_epoch = match (previous, current) {
                (1, Some(r)) => PreviousBrokerEpoch::Epoch(r.broker_epoch),
                (2, _) => PreviousBrokerEpoch::Epoch(BrokerEpoch(1_000_000)),
                (3, _) => PreviousBrokerEpoch::NotSent,
                _ => PreviousBrokerEpoch::Unnamed,
            };
            let req = BrokerRegistrationRequest {
                broker_id: NodeId(*broker),
                incarnation_id: Uuid([*incarnation; 16]),
                endpoints: vec![BrokerEndpointV1 {
                    name: "SSL".into(),
                    host: format!("b{broker}"),
                    port: 9093,
                    security_protocol: 1,
                }],
                features: features(),
                rack: Some(format!("r{}", broker % 3)),
                log_dirs: (0..*dirs)
                    .map(|i| log_dir(*broker, *incarnation, i))
                    .collect(),
                previous_broker_epoch,
            };
            d.controller
                .register_broker(&req, &ctx)
                .map(|r| r.records)
                .unwrap_or_default()
        }
        Op::AlterPartition {
            name,
            partition,
            mask,
            epochs,
            recovered,
        } => {
            let image = d.controller.image();
            let Some(t) = image.topics.get_by_name(&format!("t{name}")) else {
                return;
            };
            let Some(p) = t.partitions.get(*partition as usize) else {
                return;
            };
            let Some(leader) = p.leader else { return };
            let Some(reg) = image.brokers.get(leader) else {
                return;
            };
            let mut isr: Vec<NodeId> = p
                .replicas
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, b)| *b)
                .collect();
            if !isr.contains(&leader) && mask & 0x80 != 0 {
                isr.push(leader);
            }
            let new_isr_with_epochs = isr
                .iter()
                .map(|&b| IsrMember {
                    broker_id: b,
                    broker_epoch: match epochs {
                        0 => None,
                        1 => image.brokers.get(b).map(|r| r.broker_epoch),
                        _ => Some(BrokerEpoch(1_000_000)),
                    },
                })
                .collect();
            let req = AlterPartitionRequest {
                broker_id: leader,
                broker_epoch: reg.broker_epoch,
                topics: vec![AlterPartitionTopic {
                    topic_id: t.topic_id,
                    partitions: vec![PartitionAlteration {
                        partition_id: PartitionId(*partition),
                        leader_epoch: p.leader_epoch,
                        new_isr_with_epochs,
                        leader_recovery_state: if *recovered {
                            LeaderRecoveryState::Recovered
                        } else {
                            p.leader_recovery_state
                        },
                        partition_epoch: p.partition_epoch,
                    }],
                }],
            };
            d.controller.alter_partition(&req).unwrap().records
        }
        Op::AssignDirs {
            broker,
            name,
            partition,
            which,
        } => {
            let image = d.controller.image();
            let Some(reg) = image.brokers.get(NodeId(*broker)) else {
                return;
            };
            let Some(t) = image.topics.get_by_name(&format!("t{name}")) else {
                return;
            };
            let directory_id = match reg.log_dirs.get(usize::from(*which)) {
                Some(dir) if *which < 3 => *dir,
                _ => Uuid([0x99; 16]),
            };
            let req = AssignReplicasToDirsRequest {
                broker_id: reg.broker_id,
                broker_epoch: reg.broker_epoch,
                directories: vec![DirectoryAssignment {
                    directory_id,
                    topics: vec![TopicPartitions {
                        topic_id: t.topic_id,
                        partitions: vec![PartitionId(*partition)],
                    }],
                }],
            };
            d.controller.assign_replicas_to_dirs(&req).unwrap().records
        }
        Op::Unclean { name, on } => {
            let resource = match name {
                Some(n) => ConfigResource::topic(&format!("t{n}")),
                None => ConfigResource {
                    resource_type: ConfigResourceType::Broker,
                    name: String::new(),
                },
            };
            let req = IncrementalAlterConfigsRequest {
                resources: vec![AlterConfigsResource {
                    resource,
                    configs: vec![AlterableConfig {
                        key: "unclean.leader.election.enable".into(),
                        op: AlterConfigOp::Set,
                        value: on.to_string(),
                    }],
                }],
                validate_only: false,
            };
            d.controller
                .incremental_alter_configs(&req)
                .unwrap()
                .records
        }
        Op::Elr { on } => {
            let req = UpdateFeaturesRequest {
                updates: vec![FeatureUpdate {
                    name: ELIGIBLE_LEADER_REPLICAS_VERSION.into(),
                    min_level: 1,
                    max_level: u16::from(*on),
                    allow_downgrade: !on,
                }],
                validate_only: false,
            };
            d.controller.update_features(&req).unwrap().records
        }
        Op::MinIsr { name, value } => {
            let resource = match name {
                Some(9) => ConfigResource {
                    resource_type: ConfigResourceType::Broker,
                    name: "1".into(),
                },
                Some(n) => ConfigResource::topic(&format!("t{n}")),
                None => ConfigResource {
                    resource_type: ConfigResourceType::Broker,
                    name: String::new(),
                },
            };
            let req = IncrementalAlterConfigsRequest {
                resources: vec![AlterConfigsResource {
                    resource,
                    configs: vec![AlterableConfig {
                        key: "min.insync.replicas".into(),
                        op: if value.is_some() {
                            AlterConfigOp::Set
                        } else {
                            AlterConfigOp::Delete
                        },
                        value: value.map_or(String::new(), |v| v.to_string()),
                    }],
                }],
                validate_only: false,
            };
            d.controller
                .incremental_alter_configs(&req)
                .unwrap()
                .records
        }
        Op::Commit => {
            d.commit();
            return;
        }
        Op::FailOver => {
            d.fail_over();
            return;
        }
    };
    assert_eq!(
        &before,
        d.controller.image(),
        "a handler mutated the image ({op:?})"
    );
    if !elr_enabled(&before) {
        // Without eligible leader replicas a change may only empty a list left from when
        // they were on, never fill one.
        for r in &records {
            match r {
                MetadataRecord::PartitionChangeV2(c) => assert!(
                    c.eligible_leader_replicas
                        .as_ref()
                        .is_none_or(Vec::is_empty)
                        && c.last_known_elr.is_none(),
                    "{op:?} wrote {c:?} with the feature off"
                ),
                MetadataRecord::PartitionV3(_) | MetadataRecord::ClearElr(_) => {
                    panic!("{op:?} wrote {r:?} with the feature off")
                }
                _ => {}
            }
        }
    }
    d.propose(&records);
}

/// KIP-966's invariants that hold while eligible leader replicas stay enabled, on top of the
/// image's own (an eligible leader replica is a replica, outside the ISR, named once; at most
/// one last known leader): a partition has eligible leader replicas only while its ISR is
/// below its effective min ISR (or, right after a leader was elected from them with a min ISR
/// of 1, the ISR is that leader alone: Kafka empties them at the next change), and a last
/// known leader only while it has no leader.
fn check_elr(image: &MetadataImage, config: &ControllerConfig) {
    for t in image.topics.iter() {
        let min_isr = effective_min_isr(image, config, t);
        for (i, p) in t.partitions.iter().enumerate() {
            assert!(
                p.elr().is_empty() || p.isr.len() < min_isr.max(2),
                "{}/{i}: ELR {:?} with ISR {:?} at min ISR {min_isr}",
                t.name,
                p.elr(),
                p.isr
            );
            assert!(
                p.last_known_elr().is_empty() || p.leader.is_none(),
                "{}/{i}: last known ELR {:?} with leader {:?}",
                t.name,
                p.last_known_elr(),
                p.leader
            );
        }
    }
}

/// A driver whose cluster starts as `corum format` at 4.1 leaves it: every feature finalized
/// (eligible leader replicas among them) and the cluster default `min.insync.replicas`, as the
/// first active controller writes them.
fn formatted_at_4_1(config: ControllerConfig) -> Driver {
    let mut d = Driver::new(config);
    let records = d.controller.bootstrap_records();
    assert!(!records.is_empty());
    d.propose(&records);
    d.commit();
    assert!(elr_enabled(d.controller.image()));
    d
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// After any sequence of operations (with roomy or tiny batch limits): handlers never mutate
    /// the image (heartbeats and unregistration only touch leases), every batch keeps the
    /// invariants (leaders in their ISR on unfenced brokers, or none), and replaying the
    /// committed log from scratch — twice — gives exactly the controller's image.
    #[test]
    fn random_operations_keep_invariants(
        ops in proptest::collection::vec(op(), 1..200),
        small_batches in any::<bool>(),
    ) {
        let records_per_batch_max = if small_batches { 8 } else { 10_000 };
        let config = ControllerConfig { default_replication_factor: 2, records_per_batch_max, ..Default::default() };
        run(Driver::new(config), &ops, false)?;
    }

    /// The same, on a cluster formatted at 4.1, so with eligible leader replicas enabled from
    /// the start and never disabled (and replication factors up to 3): every commit also keeps
    /// KIP-966's invariants ([`check_elr`]).
    #[test]
    fn eligible_leader_replicas_keep_their_invariants(
        ops in proptest::collection::vec(
            op().prop_filter("eligible leader replicas stay on", |o| !matches!(o, Op::Elr { on: false })),
            1..200,
        ),
        small_batches in any::<bool>(),
    ) {
        let records_per_batch_max = if small_batches { 8 } else { 10_000 };
        let config = ControllerConfig { default_replication_factor: 3, records_per_batch_max, ..Default::default() };
        run(formatted_at_4_1(config), &ops, true)?;
    }
}

/// Runs `ops` on `d`, checking after each (see the tests above); `elr` adds [`check_elr`].
fn run(mut d: Driver, ops: &[Op], elr: bool) -> Result<(), TestCaseError> {
    for op in ops {
        apply(&mut d, op);
        d.controller.check_invariants();
        if elr {
            check_elr(d.controller.image(), d.controller.config());
        }
        // A standby that replayed the committed log answers every local read as the
        // active controller's committed reads do.
        if matches!(op, Op::Commit) {
            let standby = replay_log(&d.log);
            kafka_model::check(&d.log, &standby);
            let (ours, theirs) = (
                d.controller.committed_reads(),
                ImageReads::new(&standby, d.controller.config()),
            );
            let all = DescribeTopicsRequest { topics: None };
            prop_assert_eq!(ours.describe_topics(&all), theirs.describe_topics(&all));
            prop_assert_eq!(
                ours.describe_topics_v2(&all),
                theirs.describe_topics_v2(&all)
            );
            prop_assert_eq!(ours.describe_controllers(), theirs.describe_controllers());
            prop_assert_eq!(ours.describe_features(), theirs.describe_features());
            prop_assert_eq!(
                ours.describe_cluster(NodeId(1)),
                theirs.describe_cluster(NodeId(1))
            );
            // "All topics" are those not being deleted, each as the image holds it.
            let described = theirs.describe_topics(&all).topics;
            // DescribeTopicsV2 is DescribeTopics with each partition's lists from the image.
            let described_v2 = theirs.describe_topics_v2(&all).topics;
            prop_assert_eq!(described.len(), described_v2.len());
            for ((r, t), (r2, t2)) in described.iter().zip(&described_v2) {
                prop_assert_eq!(r, r2);
                let (t, t2) = (t.as_ref().unwrap(), t2.as_ref().unwrap());
                prop_assert_eq!((t.topic_id, &t.name), (t2.topic_id, &t2.name));
                let image = standby.topics.get(t.topic_id).unwrap();
                for ((p, p2), ip) in t
                    .partitions
                    .iter()
                    .zip(&t2.partitions)
                    .zip(&image.partitions)
                {
                    prop_assert_eq!(p, &p2.partition);
                    prop_assert_eq!(&p2.eligible_leader_replicas[..], ip.elr());
                    prop_assert_eq!(&p2.last_known_elr[..], ip.last_known_elr());
                }
            }
            let visible: Vec<&str> = standby
                .topics
                .names()
                .filter(|(_, id)| !standby.topics.get(*id).unwrap().deleting)
                .map(|(n, _)| n)
                .collect();
            prop_assert_eq!(described.len(), visible.len());
            for ((r, t), name) in described.iter().zip(visible) {
                prop_assert_eq!(r, &TopicRef::Name(name.to_owned()));
                let t = t.as_ref().unwrap();
                let image = standby.topics.get(t.topic_id).unwrap();
                prop_assert_eq!(t.partitions.len(), image.partitions.len());
                for (p, ip) in t.partitions.iter().zip(&image.partitions) {
                    prop_assert_eq!(&p.replicas[..], &ip.replicas[..]);
                    prop_assert_eq!(&p.isr[..], &ip.isr[..]);
                    prop_assert_eq!(p.leader, ip.leader);
                    // Offline: on a broker that is not registered or fenced, or on a
                    // directory not online on its broker.
                    let offline: Vec<NodeId> = ip
                        .replicas
                        .iter()
                        .zip(ip.directories.iter())
                        .filter(|(b, dir)| {
                            standby
                                .brokers
                                .get(**b)
                                .is_none_or(|r| r.fenced || !r.has_online_dir(dir))
                        })
                        .map(|(b, _)| *b)
                        .collect();
                    prop_assert_eq!(&p.offline_replicas, &offline);
                }
            }
        }
    }
    d.commit();
    let a = replay_log(&d.log);
    kafka_model::check(&d.log, &a);
    let b = replay_log(&d.log);
    prop_assert_eq!(&a, &b);
    prop_assert_eq!(&a, d.controller.image());
    a.check_invariants();
    // And the snapshot of the final image rebuilds it.
    let snap = encode_batch(&a.snapshot_records());
    let rebuilt =
        corum_controller::MetadataImage::from_snapshot(a.end_offset, decode_batch(&snap).unwrap())
            .unwrap();
    rebuilt.check_invariants();
    prop_assert_eq!(rebuilt, a);
    Ok(())
}

/// What a Kafka broker computes from the committed records, each rendered as the Kafka record
/// of the same offset, written independently of the image's code (Kafka's own conventions:
/// -1 for no leader, int epochs): `ClusterDelta` and `PartitionRegistration.merge` in miniature.
/// Records the controller must no longer write (the V1 versions the V2 ones replaced, and
/// `Topic{deleting: true}`) fail the check.
mod kafka_model {
    use std::collections::BTreeMap;

    use corum_controller::ids::MIGRATING_DIR;
    use corum_controller::records::{FencingChange, LeaderChange};
    use corum_controller::{decode_batch, MetadataImage, MetadataRecord, TopicId};
    use corum_types::{LogOffset, Uuid};
    use rkyv::util::AlignedVec;

    #[derive(Debug, PartialEq, Eq)]
    struct Broker {
        epoch: u64,
        incarnation: Uuid,
        endpoints: Vec<(String, String, u16, i16)>,
        fenced: bool,
        in_controlled_shutdown: bool,
        log_dirs: Vec<Uuid>,
    }

    #[derive(Debug, PartialEq, Eq)]
    struct Partition {
        replicas: Vec<u32>,
        isr: Vec<u32>,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        leader_recovery_state: i8,
        directories: Vec<Uuid>,
        elr: Vec<u32>,
        last_known_elr: Vec<u32>,
    }

    #[derive(Debug, Default, PartialEq, Eq)]
    struct BrokerView {
        brokers: BTreeMap<u32, Broker>,
        topics: BTreeMap<TopicId, (String, BTreeMap<u32, Partition>)>,
    }

    fn migrating_if_empty(dirs: Vec<Uuid>, replicas: usize) -> Vec<Uuid> {
        if dirs.iter().all(|d| *d == MIGRATING_DIR) {
            vec![MIGRATING_DIR; replicas]
        } else {
            dirs
        }
    }

    impl BrokerView {
        fn replay(&mut self, r: &MetadataRecord) {
            match r {
                MetadataRecord::RegisterBrokerV2(r) => {
                    self.brokers.insert(
                        r.broker_id.0,
                        Broker {
                            epoch: r.broker_epoch.0,
                            incarnation: r.incarnation_id,
                            endpoints: r
                                .endpoints
                                .iter()
                                .map(|e| {
                                    (e.name.clone(), e.host.clone(), e.port, e.security_protocol)
                                })
                                .collect(),
                            fenced: r.fenced,
                            in_controlled_shutdown: r.in_controlled_shutdown,
                            log_dirs: r.log_dirs.clone(),
                        },
                    );
                }
                MetadataRecord::BrokerRegistrationChangeV2(r) => {
                    let b = self.brokers.get_mut(&r.broker_id.0).expect("registered");
                    assert_eq!(b.epoch, r.broker_epoch.0);
                    match r.fenced {
                        FencingChange::Unchanged => {}
                        FencingChange::Fence => b.fenced = true,
                        FencingChange::Unfence => b.fenced = false,
                    }
                    if r.in_controlled_shutdown {
                        b.in_controlled_shutdown = true;
                    }
                }
                MetadataRecord::UnregisterBroker(r) => {
                    self.brokers.remove(&r.broker_id.0);
                }
                MetadataRecord::Topic(r) => {
                    assert!(!r.deleting, "Kafka has no deletion intent: {r:?}");
                    self.topics
                        .insert(r.topic_id, (r.name.clone(), BTreeMap::new()));
                }
                MetadataRecord::RemoveTopic(r) => {
                    self.topics.remove(&r.topic_id);
                }
                MetadataRecord::PartitionV2(r) => {
                    let parts = &mut self.topics.get_mut(&r.topic_id).expect("topic").1;
                    parts.insert(
                        r.partition_id.0,
                        Partition {
                            replicas: r.replicas.iter().map(|b| b.0).collect(),
                            isr: r.isr.iter().map(|b| b.0).collect(),
                            leader: r.leader.map_or(-1, |l| l.0 as i32),
                            leader_epoch: r.leader_epoch.0 as i32,
                            partition_epoch: r.partition_epoch.0 as i32,
                            leader_recovery_state: r.leader_recovery_state as i8,
                            directories: migrating_if_empty(
                                r.directories.clone(),
                                r.replicas.len(),
                            ),
                            elr: vec![],
                            last_known_elr: vec![],
                        },
                    );
                }
                MetadataRecord::PartitionV3(r) => {
                    let parts = &mut self.topics.get_mut(&r.topic_id).expect("topic").1;
                    parts.insert(
                        r.partition_id.0,
                        Partition {
                            replicas: r.replicas.iter().map(|b| b.0).collect(),
                            isr: r.isr.iter().map(|b| b.0).collect(),
                            leader: r.leader.map_or(-1, |l| l.0 as i32),
                            leader_epoch: r.leader_epoch.0 as i32,
                            partition_epoch: r.partition_epoch.0 as i32,
                            leader_recovery_state: r.leader_recovery_state as i8,
                            directories: migrating_if_empty(
                                r.directories.clone(),
                                r.replicas.len(),
                            ),
                            elr: r.eligible_leader_replicas.iter().map(|b| b.0).collect(),
                            last_known_elr: r.last_known_elr.iter().map(|b| b.0).collect(),
                        },
                    );
                }
                MetadataRecord::PartitionChangeV2(r) => {
                    self.replay(&MetadataRecord::PartitionChange(r.without_elr()));
                    let parts = &mut self.topics.get_mut(&r.topic_id).expect("topic").1;
                    let p = parts.get_mut(&r.partition_id.0).expect("partition");
                    if let Some(elr) = &r.eligible_leader_replicas {
                        p.elr = elr.iter().map(|b| b.0).collect();
                    }
                    if let Some(lke) = &r.last_known_elr {
                        p.last_known_elr = lke.iter().map(|b| b.0).collect();
                    }
                }
                MetadataRecord::ClearElr(r) => {
                    // Kafka's `TopicDelta.replay(ClearElrRecord)`: each partition with either
                    // list empties both, as a PartitionChangeRecord setting them would.
                    for (name, parts) in self.topics.values_mut() {
                        if !r.topic_name.is_empty() && *name != r.topic_name {
                            continue;
                        }
                        for p in parts.values_mut() {
                            if !p.elr.is_empty() || !p.last_known_elr.is_empty() {
                                p.elr.clear();
                                p.last_known_elr.clear();
                                p.partition_epoch += 1;
                            }
                        }
                    }
                }
                MetadataRecord::PartitionChange(r) => {
                    let parts = &mut self.topics.get_mut(&r.topic_id).expect("topic").1;
                    let p = parts.get_mut(&r.partition_id.0).expect("partition");
                    if let Some(replicas) = &r.replicas {
                        p.replicas = replicas.iter().map(|b| b.0).collect();
                    }
                    if let Some(dirs) = &r.directories {
                        p.directories = dirs.clone();
                    }
                    p.directories =
                        migrating_if_empty(std::mem::take(&mut p.directories), p.replicas.len());
                    if let Some(isr) = &r.isr {
                        p.isr = isr.iter().map(|b| b.0).collect();
                    }
                    match r.leader {
                        LeaderChange::Unchanged => {}
                        LeaderChange::NoLeader => {
                            p.leader = -1;
                            p.leader_epoch += 1;
                        }
                        LeaderChange::Broker(b) => {
                            p.leader = b.0 as i32;
                            p.leader_epoch += 1;
                        }
                    }
                    if let Some(lrs) = r.leader_recovery_state {
                        p.leader_recovery_state = lrs as i8;
                    }
                    p.partition_epoch += 1;
                }
                MetadataRecord::Config(_)
                | MetadataRecord::FeatureLevel(_)
                | MetadataRecord::ProducerIds(_)
                | MetadataRecord::NoOp(_)
                | MetadataRecord::RegisterController(_) => {}
                old => panic!("the controller wrote a replaced record version: {old:?}"),
            }
        }

        /// The same view of corum's image.
        fn of(image: &MetadataImage) -> BrokerView {
            let mut out = BrokerView::default();
            for b in image.brokers.iter() {
                out.brokers.insert(
                    b.broker_id.0,
                    Broker {
                        epoch: b.broker_epoch.0,
                        incarnation: b.incarnation_id,
                        endpoints: b
                            .endpoints
                            .iter()
                            .map(|e| (e.name.clone(), e.host.clone(), e.port, e.security_protocol))
                            .collect(),
                        fenced: b.fenced,
                        in_controlled_shutdown: b.in_controlled_shutdown,
                        log_dirs: b.log_dirs.clone(),
                    },
                );
            }
            for t in image.topics.iter() {
                let parts = t
                    .partitions
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        (
                            i as u32,
                            Partition {
                                replicas: p.replicas.iter().map(|b| b.0).collect(),
                                isr: p.isr.iter().map(|b| b.0).collect(),
                                leader: p.leader.map_or(-1, |l| l.0 as i32),
                                leader_epoch: p.leader_epoch.0 as i32,
                                partition_epoch: p.partition_epoch.0 as i32,
                                leader_recovery_state: p.leader_recovery_state as i8,
                                directories: p.directories.to_vec(),
                                elr: p.elr().iter().map(|b| b.0).collect(),
                                last_known_elr: p.last_known_elr().iter().map(|b| b.0).collect(),
                            },
                        )
                    })
                    .collect();
                out.topics.insert(t.topic_id, (t.name.to_string(), parts));
            }
            out
        }
    }

    /// The model replayed from `log` equals `image`'s view.
    pub(super) fn check(log: &[(LogOffset, AlignedVec)], image: &MetadataImage) {
        let mut model = BrokerView::default();
        for (_, bytes) in log {
            let records: Vec<MetadataRecord> =
                rkyv::deserialize::<Vec<MetadataRecord>, rkyv::rancor::Error>(
                    decode_batch(bytes).expect("committed batches decode"),
                )
                .expect("validated batches deserialize");
            for r in &records {
                model.replay(r);
            }
        }
        assert_eq!(
            model,
            BrokerView::of(image),
            "a Kafka broker's view differs"
        );
    }
}
