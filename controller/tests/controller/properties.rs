//! Property tests over random operation sequences driven through the in-memory driver.

use crate::common::{replay_log, Driver};
use corum_controller::control::cluster_control::{
    RegisterControllerRequest, UnregisterBrokerRequest,
};
use corum_controller::control::replication_control::{
    AlterIsrRequest, CreatableTopic, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, DeleteTopicsV2Request, DescribeTopicsRequest, ElectLeadersRequest,
    ElectionType, IsrUpdate, PartitionsIncrease, TopicRef,
};
use corum_controller::control::ImageReads;
use corum_controller::records::{ControllerEndpointV1, ListenerV1, SupportedFeatureV1};
use corum_controller::{
    decode_batch, encode_batch, BrokerHeartbeatRequest, ControllerConfig, PartitionId,
};
use corum_types::{LogOffset, NodeId, Uuid};
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
        4 => Just(Op::Commit),
        1 => Just(Op::FailOver),
    ]
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
        features: vec![SupportedFeatureV1 {
            name: "metadata.version".into(),
            min_level: 1,
            max_level: 3,
        }],
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
                features: vec![SupportedFeatureV1 {
                    name: "metadata.version".into(),
                    min_level: 7,
                    max_level: if *variant { 27 } else { 20 },
                }],
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
    d.propose(&records);
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
        let mut d = Driver::new(config);
        for op in &ops {
            apply(&mut d, op);
            d.controller.check_invariants();
            // A standby that replayed the committed log answers every local read as the
            // active controller's committed reads do.
            if matches!(op, Op::Commit) {
                let standby = replay_log(&d.log);
                let (ours, theirs) = (d.controller.committed_reads(), ImageReads::new(&standby, d.controller.config()));
                let all = DescribeTopicsRequest { topics: None };
                prop_assert_eq!(ours.describe_topics(&all), theirs.describe_topics(&all));
                prop_assert_eq!(ours.describe_controllers(), theirs.describe_controllers());
                prop_assert_eq!(ours.describe_features(), theirs.describe_features());
                prop_assert_eq!(ours.describe_cluster(NodeId(1)), theirs.describe_cluster(NodeId(1)));
                // "All topics" are those not being deleted, each as the image holds it.
                let described = theirs.describe_topics(&all).topics;
                let visible: Vec<&str> = standby.topics.names()
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
                        prop_assert!(p.offline_replicas.iter().all(|b| !standby.brokers.is_unfenced(*b)));
                    }
                }
            }
        }
        d.commit();
        let a = replay_log(&d.log);
        let b = replay_log(&d.log);
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(&a, d.controller.image());
        a.check_invariants();
        // And the snapshot of the final image rebuilds it.
        let snap = encode_batch(&a.snapshot_records());
        let rebuilt = corum_controller::MetadataImage::from_snapshot(
            a.end_offset,
            decode_batch(&snap).unwrap(),
        )
        .unwrap();
        rebuilt.check_invariants();
        prop_assert_eq!(rebuilt, a);
    }
}
