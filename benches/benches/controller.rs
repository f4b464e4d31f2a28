//! Controller benches: replay throughput, heartbeat handling rate, image build time and memory.
//!
//! - `controller/replay`: replaying archived records (zero-copy views of encoded batches) into an
//!   image; throughput in records/s (target ≥ 2M/s on one core).
//! - `controller/heartbeat_10k_brokers`: steady-state heartbeats of 10,000 active brokers through
//!   `Controller::broker_heartbeat` (lease renewal, no records); throughput in heartbeats/s
//!   (target ≥ 1M/s).
//! - `controller/image_build_100k_topics_x10`: building the image of 100,000 topics × 10
//!   partitions × 3 replicas from encoded batches. The image's heap footprint is measured once
//!   with a counting global allocator and printed as bytes per partition (target ≤ 200).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use corum_controller::records::{
    ConfigRecordV1, ConfigResourceType, EncodedBatch, ListenerV1, PartitionIsrChangeRecordV1,
    PartitionLeaderChangeRecordV1, PartitionRecordV1, RegisterBrokerRecordV1, SupportedFeatureV1,
    TopicRecordV1, UnfenceBrokerRecordV1,
};
use corum_controller::{
    decode_batch, encode_batch, BrokerHeartbeatRequest, Controller, ControllerConfig, LeaderEpoch,
    MetadataImage, MetadataRecord, PartitionEpoch, PartitionId, RequestContext, TopicId,
};
use corum_types::{BrokerEpoch, LogOffset, NodeId, Uuid};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

/// Counts live heap bytes so the image's footprint can be reported.
struct CountingAlloc;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

const BATCH_RECORDS: usize = 1_000;

fn register(id: u32, epoch: u64) -> [MetadataRecord; 2] {
    [
        MetadataRecord::RegisterBroker(RegisterBrokerRecordV1 {
            broker_id: NodeId(id),
            incarnation_id: Uuid([id as u8; 16]),
            broker_epoch: BrokerEpoch(epoch),
            listeners: vec![ListenerV1 {
                name: "PLAINTEXT".into(),
                host: format!("b{id}"),
                port: 9092,
            }],
            features: vec![SupportedFeatureV1 {
                name: "metadata.version".into(),
                min_level: 1,
                max_level: 3,
            }],
            rack: Some(format!("r{}", id % 3)),
        }),
        MetadataRecord::UnfenceBroker(UnfenceBrokerRecordV1 {
            broker_id: NodeId(id),
            broker_epoch: BrokerEpoch(epoch),
        }),
    ]
}

/// Records of `brokers` registered brokers and `topics` topics of `partitions` partitions with 3
/// replicas each.
fn cluster_records(brokers: u32, topics: u32, partitions: u32) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for id in 0..brokers {
        let epoch = out.len() as u64;
        out.extend(register(id, epoch));
    }
    for t in 0..topics {
        let topic_id = TopicId(Uuid::from_random_bits(
            u128::from(t) * 0x9e37_79b9_7f4a_7c15 + 1,
        ));
        out.push(MetadataRecord::Topic(TopicRecordV1 {
            name: format!("topic-{t}"),
            topic_id,
            deleting: false,
        }));
        for p in 0..partitions {
            let r: Vec<NodeId> = (0..3).map(|k| NodeId((t + p + k) % brokers)).collect();
            out.push(MetadataRecord::Partition(PartitionRecordV1 {
                topic_id,
                partition_id: PartitionId(p),
                replicas: r.clone(),
                isr: r.clone(),
                leader: Some(r[0]),
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(0),
            }));
        }
    }
    out
}

fn encode_all(records: &[MetadataRecord]) -> Vec<(LogOffset, EncodedBatch)> {
    records
        .chunks(BATCH_RECORDS)
        .enumerate()
        .map(|(i, chunk)| (LogOffset((i * BATCH_RECORDS) as u64), encode_batch(chunk)))
        .collect()
}

fn replay_all(
    image: &mut MetadataImage,
    batches: &[(LogOffset, EncodedBatch)],
    first: u64,
) -> usize {
    let mut n = 0;
    for (base, bytes) in batches {
        let batch = decode_batch(bytes).expect("valid batch");
        for (i, r) in batch.iter().enumerate() {
            image
                .replay(LogOffset(first + base.0 + i as u64), r)
                .expect("replays");
            n += 1;
        }
    }
    n
}

fn bench_replay(c: &mut Criterion) {
    // A base image of 30 brokers and 10,000 topics × 10 partitions; the replayed load is leader
    // and ISR changes spread over all partitions (the steady-state kind of record).
    let base_records = cluster_records(30, 10_000, 10);
    let base_batches = encode_all(&base_records);
    let mut base = MetadataImage::default();
    replay_all(&mut base, &base_batches, 0);
    let ids: Vec<TopicId> = base.topics.iter().map(|t| t.topic_id).collect();
    let mut load = Vec::new();
    for round in 0..2u32 {
        for (i, topic_id) in ids.iter().enumerate() {
            for p in 0..5u32 {
                let part = base
                    .topics
                    .partition(*topic_id, PartitionId(p))
                    .expect("exists");
                let pe = PartitionEpoch(part.partition_epoch.0 + 1 + round);
                load.push(MetadataRecord::PartitionIsrChange(
                    PartitionIsrChangeRecordV1 {
                        topic_id: *topic_id,
                        partition_id: PartitionId(p),
                        isr: part.isr[..2].to_vec(),
                        partition_epoch: pe,
                    },
                ));
                load.push(MetadataRecord::PartitionLeaderChange(
                    PartitionLeaderChangeRecordV1 {
                        topic_id: *topic_id,
                        partition_id: PartitionId(p),
                        leader: Some(part.replicas[(i + round as usize) % 2]),
                        leader_epoch: LeaderEpoch(part.leader_epoch.0 + 1 + round),
                        partition_epoch: pe,
                    },
                ));
            }
        }
    }
    let batches = encode_all(&load);
    let first = base.end_offset.0;
    let mut g = c.benchmark_group("controller");
    g.throughput(Throughput::Elements(load.len() as u64));
    g.sample_size(10);
    g.bench_function("replay", |b| {
        b.iter_batched(
            || base.clone(),
            |mut image| {
                assert_eq!(replay_all(&mut image, &batches, first), load.len());
                image
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn bench_replay_configs(c: &mut Criterion) {
    // The configs workload's records as a follower replays them: `log.retention.ms` set on
    // 1,000 broker resources, 100 times each, over a base that already holds them.
    let record = |broker: u32, value: u64| {
        MetadataRecord::Config(ConfigRecordV1 {
            resource_type: ConfigResourceType::Broker,
            resource_name: broker.to_string(),
            key: "log.retention.ms".into(),
            value: Some(value.to_string()),
        })
    };
    let base_records: Vec<_> = (1..=1_000).map(|b| record(b, 1)).collect();
    let mut base = MetadataImage::default();
    replay_all(&mut base, &encode_all(&base_records), 0);
    let load: Vec<_> = (0..100_000u32)
        .map(|i| record(1 + i % 1_000, 1_000_000 + u64::from(i)))
        .collect();
    let batches = encode_all(&load);
    let first = base.end_offset.0;
    let mut g = c.benchmark_group("controller");
    g.throughput(Throughput::Elements(load.len() as u64));
    g.sample_size(10);
    g.bench_function("replay_configs", |b| {
        b.iter_batched(
            || base.clone(),
            |mut image| {
                assert_eq!(replay_all(&mut image, &batches, first), load.len());
                image
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn bench_heartbeats(c: &mut Criterion) {
    const BROKERS: u32 = 10_000;
    let records: Vec<MetadataRecord> = (0..BROKERS)
        .flat_map(|id| register(id, u64::from(id) * 2))
        .collect();
    let batches = encode_all(&records);
    let mut controller =
        Controller::new(ControllerConfig::default(), NodeId(100_000)).expect("valid config");
    for (base, bytes) in &batches {
        controller
            .replay_batch(*base, decode_batch(bytes).expect("valid"))
            .expect("replays");
    }
    controller.on_become_active(0);
    let hwm = LogOffset(records.len() as u64);
    let requests: Vec<BrokerHeartbeatRequest> = (0..BROKERS)
        .map(|id| BrokerHeartbeatRequest {
            broker_id: NodeId(id),
            broker_epoch: Some(BrokerEpoch(u64::from(id) * 2)),
            incarnation_id: Uuid([id as u8; 16]),
            listeners: vec![],
            features: vec![],
            rack: None,
            next_metadata_offset: hwm,
            want_fence: false,
            want_shutdown: false,
        })
        .collect();
    let mut now_ms = 0;
    let mut g = c.benchmark_group("controller");
    g.throughput(Throughput::Elements(u64::from(BROKERS)));
    g.bench_function("heartbeat_10k_brokers", |b| {
        b.iter(|| {
            now_ms += 1;
            let ctx = RequestContext {
                now_ms,
                next_offset: hwm,
                high_watermark: hwm,
            };
            let mut active = 0;
            for req in &requests {
                let r = controller.broker_heartbeat(req, &ctx).expect("live broker");
                debug_assert!(r.records.is_empty());
                active +=
                    usize::from(r.response.target_state == corum_controller::TargetState::Active);
            }
            assert_eq!(active, BROKERS as usize);
        })
    });
    g.finish();
}

fn bench_image_build(c: &mut Criterion) {
    const TOPICS: u32 = 100_000;
    const PARTITIONS: u32 = 10;
    let records = cluster_records(30, TOPICS, PARTITIONS);
    let batches = encode_all(&records);
    drop(records);

    // Footprint: live heap bytes held by the built image.
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let mut image = MetadataImage::default();
    replay_all(&mut image, &batches, 0);
    let bytes = LIVE_BYTES.load(Ordering::Relaxed) - before;
    let partitions = image.topics.partition_count();
    eprintln!(
        "controller/image_build: {} topics, {partitions} partitions (3 replicas): {:.1} MiB heap, {:.1} bytes/partition",
        image.topics.len(),
        bytes as f64 / (1 << 20) as f64,
        bytes as f64 / partitions as f64
    );
    image.check_invariants();
    drop(image);

    let mut g = c.benchmark_group("controller");
    g.sample_size(10);
    g.throughput(Throughput::Elements(u64::from(TOPICS * PARTITIONS)));
    g.bench_function("image_build_100k_topics_x10", |b| {
        b.iter(|| {
            let mut image = MetadataImage::default();
            replay_all(&mut image, &batches, 0);
            image
        })
    });
    g.finish();
}

fn bench_fence(c: &mut Criterion) {
    // Fencing one expired broker in an image of 100,000 topics × 10 partitions on 30 brokers:
    // the tick scans every partition and moves ~33k leaderships and ~100k ISR memberships.
    let records = cluster_records(30, 100_000, 10);
    let batches = encode_all(&records);
    drop(records);
    let config = ControllerConfig {
        records_per_batch_max: 1_000_000,
        ..ControllerConfig::default()
    };
    let mut controller = Controller::new(config, NodeId(100_000)).expect("valid config");
    for (base, bytes) in &batches {
        controller
            .replay_batch(*base, decode_batch(bytes).expect("valid"))
            .expect("replays");
    }
    drop(batches);
    controller.on_become_active(0);
    // Every broker but broker 0 heartbeats at 9,000 ms; at 9,001 ms only broker 0 has expired.
    let hwm = controller.committed_end();
    for id in 1..30 {
        let reg = controller
            .image()
            .brokers
            .get(NodeId(id))
            .expect("registered")
            .clone();
        let req = BrokerHeartbeatRequest {
            broker_id: NodeId(id),
            broker_epoch: Some(reg.broker_epoch),
            incarnation_id: reg.incarnation_id,
            listeners: vec![],
            features: vec![],
            rack: None,
            next_metadata_offset: hwm,
            want_fence: false,
            want_shutdown: false,
        };
        let ctx = RequestContext {
            now_ms: 9_000,
            next_offset: hwm,
            high_watermark: hwm,
        };
        controller.broker_heartbeat(&req, &ctx).expect("live");
    }
    let ctx = RequestContext {
        now_ms: 9_001,
        next_offset: hwm,
        high_watermark: hwm,
    };
    let records = controller.tick(&ctx).expect("active").records.len();
    eprintln!("controller/fence_broker_1m_partitions: {records} records in the fencing batch");
    let mut g = c.benchmark_group("controller");
    g.sample_size(10);
    g.bench_function("fence_broker_1m_partitions", |b| {
        b.iter(|| {
            let r = controller.tick(&ctx).expect("active");
            assert_eq!(r.records.len(), records);
            r
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_replay,
    bench_replay_configs,
    bench_heartbeats,
    bench_image_build,
    bench_fence
);
criterion_main!(benches);
