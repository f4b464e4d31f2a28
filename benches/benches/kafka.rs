//! What serving Kafka brokers costs the controller: rendering corum's batches as Kafka's
//! (`corum_kafka::log`), per metadata record, beside the replay of the same batch into an image
//! (which every node does anyway), measured in the same run so the ratio holds on a noisy host.
//!
//! - `kafka/render/configs`: a 1,000-record batch of topic ConfigRecords (the configs workload);
//! - `kafka/render/topics`: TopicRecords each followed by 3 PartitionRecords of 3 replicas;
//! - `kafka/replay/configs`, `kafka/replay/topics`: the same batches replayed into an image;
//! - `kafka/fetch3/afresh/…`, `kafka/fetch3/cached/…`: three brokers fetching the same batch,
//!   each fetch rendering it (as before the listener kept renderings), and through a
//!   listener's [`ObserverMemory`] (rendered by the first, taken from its cache by the others).
//! - `kafka/answer3/configs`: three brokers' Fetch answers of the same 8 batches of 140
//!   ConfigRecords (what a broker fetches at once under the configs workload) through a
//!   listener's [`ObserverMemory`] and [`corum_kafka::response::encode`]: the whole fetch
//!   path's bytes, rendering once and encoding three answers.
//!
//! Throughput is in records; the time per record is criterion's time over 1,000.

use std::sync::Arc;

use bytes::Bytes;
use corum_controller::records::{
    ConfigRecordV1, ConfigResourceType, LeaderRecoveryState, PartitionRecordV2, TopicRecordV1,
};
use corum_controller::{
    decode_batch, encode_batch, LeaderEpoch, MetadataImage, MetadataRecord, PartitionEpoch,
    PartitionId, TopicId,
};
use corum_kafka::log::{render_batch, render_batches, ObserverMemory, RenderContext};
use corum_raft::Batch;
use corum_types::{Epoch, LogOffset, NodeId, Uuid};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_protocol::messages::{fetch_response, ApiKey, FetchResponse, ResponseKind};

const RECORDS: usize = 1_000;

fn config_records() -> Vec<MetadataRecord> {
    (0..RECORDS)
        .map(|i| {
            MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Topic,
                resource_name: format!("topic-{}", i % 64),
                key: "retention.ms".into(),
                value: Some(format!("{}", 86_400_000 + i)),
            })
        })
        .collect()
}

fn topic_records() -> Vec<MetadataRecord> {
    let mut out = Vec::with_capacity(RECORDS);
    let mut t = 0u32;
    while out.len() + 4 <= RECORDS {
        let topic_id = TopicId(Uuid::from_random_bits(u128::from(t) * 0x9e37_79b9 + 1));
        out.push(MetadataRecord::Topic(TopicRecordV1 {
            name: format!("topic-{t}"),
            topic_id,
            deleting: false,
        }));
        for p in 0..3 {
            let replicas: Vec<NodeId> = (0..3).map(|k| NodeId((t + p + k) % 5 + 1)).collect();
            out.push(MetadataRecord::PartitionV2(PartitionRecordV2 {
                topic_id,
                partition_id: PartitionId(p),
                replicas: replicas.clone(),
                isr: replicas.clone(),
                leader: Some(replicas[0]),
                leader_recovery_state: LeaderRecoveryState::Recovered,
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(0),
                directories: replicas.iter().map(|r| Uuid([r.0 as u8; 16])).collect(),
            }));
        }
        t += 1;
    }
    out
}

fn batch(records: &[MetadataRecord]) -> Batch {
    batch_at(1_000, records)
}

fn batch_at(base_offset: u64, records: &[MetadataRecord]) -> Batch {
    let bytes = encode_batch(records);
    Batch {
        base_offset: LogOffset(base_offset),
        epoch: Epoch(3),
        record_count: records.len() as u32,
        control: false,
        timestamp_ms: -1,
        payload: Arc::from(bytes.as_slice()),
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("kafka");
    for (name, records) in [("configs", config_records()), ("topics", topic_records())] {
        let b = batch(&records);
        g.throughput(Throughput::Elements(records.len() as u64));
        let ctx = RenderContext::default();
        let mut out = bytes::BytesMut::with_capacity(1 << 20);
        let mut scratch = bytes::BytesMut::new();
        g.bench_function(format!("render/{name}"), |bench| {
            bench.iter(|| {
                out.clear();
                render_batch(&b, &ctx, &mut out, &mut scratch).expect("renders");
                out.len()
            })
        });
        let fetched = std::slice::from_ref(&b);
        g.bench_function(format!("fetch3/afresh/{name}"), |bench| {
            bench.iter(|| {
                (0..3)
                    .map(|_| {
                        render_batches(fetched, &ctx, usize::MAX)
                            .expect("renders")
                            .len()
                    })
                    .sum::<usize>()
            })
        });
        g.bench_function(format!("fetch3/cached/{name}"), |bench| {
            bench.iter(|| {
                let memory = ObserverMemory::default();
                (0..3)
                    .map(|_| {
                        let ctx = RenderContext::default();
                        let r = memory.render(fetched, &ctx, usize::MAX).expect("renders");
                        r.len()
                    })
                    .sum::<usize>()
            })
        });
        let payload = encode_batch(&records);
        g.bench_function(format!("replay/{name}"), |bench| {
            bench.iter(|| {
                let mut image = MetadataImage::default();
                let archived = decode_batch(&payload).expect("valid batch");
                for (i, r) in archived.iter().enumerate() {
                    // Replay may refuse a record whose topic is unknown (configs of topics
                    // never created): the work of checking it is what is measured.
                    let _ = image.replay(LogOffset(1_000 + i as u64), r);
                }
                image.end_offset
            })
        });
    }
    answers(&mut g);
    g.finish();
}

/// Batches in one broker's answer, and records per batch. Under the configs workload at 256
/// clients the leader's proposals carry about 140 writes, and a broker's answer carried
/// 900-1,700 writes (3 × writes/s over the brokers' fetches/s in `brokers-overhead.sh`,
/// 2026-12-05: 67,000-79,000 writes/s, 138-243 fetches/s): about 8 batches.
const ANSWER_BATCHES: u64 = 8;
const BATCH_RECORDS: usize = 140;
/// A Fetch version brokers send (flexible, topics named by id).
const FETCH_VERSION: i16 = 17;

fn fetch_answer(records: Option<Bytes>) -> ResponseKind {
    let partition = fetch_response::PartitionData::default()
        .with_high_watermark(1)
        .with_records(records);
    let mut topic =
        fetch_response::FetchableTopicResponse::default().with_partitions(vec![partition]);
    topic.topic_id = corum_kafka::api::raft_fetch::METADATA_TOPIC_ID;
    ResponseKind::Fetch(FetchResponse::default().with_responses(vec![topic]))
}

/// Three brokers' answers of the same batches: rendered once, and each answer encoded with the
/// renderings spliced in where they lie (`answer3`, what the listener sends), or copied
/// together and into the answer's buffer (`answer3/copied`, the baseline: the listener before
/// it sent answers as parts).
fn answers(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    let records = config_records();
    let batches: Vec<Batch> = (0..ANSWER_BATCHES)
        .map(|i| batch_at(1_000 + i * BATCH_RECORDS as u64, &records[..BATCH_RECORDS]))
        .collect();
    g.throughput(Throughput::Elements(ANSWER_BATCHES * BATCH_RECORDS as u64));
    for (name, spliced) in [("answer3/configs", true), ("answer3/copied/configs", false)] {
        g.bench_function(name, |bench| {
            bench.iter(|| {
                let memory = ObserverMemory::default();
                (0..3)
                    .map(|_| {
                        let ctx = RenderContext::default();
                        let r = memory.render(&batches, &ctx, usize::MAX).expect("renders");
                        let answer = |body, records| corum_kafka::service::Answer {
                            api: ApiKey::Fetch,
                            version: FETCH_VERSION,
                            correlation_id: 7,
                            body,
                            records,
                        };
                        let answer = if spliced {
                            answer(fetch_answer(None), Some(r))
                        } else {
                            answer(fetch_answer(Some(r.to_bytes())), None)
                        };
                        corum_kafka::response::encode_answer(answer)
                            .expect("encodes")
                            .into_parts()
                            .map(|p| p.len())
                            .sum::<usize>()
                    })
                    .sum::<usize>()
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
