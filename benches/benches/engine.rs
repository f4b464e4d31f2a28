//! Engine benches: frame encode/validate, append on `SimDisk`, recovery scan speed.
//!
//! The device-level figures (fsync latency, bandwidth, the log on io_uring) come from
//! `corum bench disk` / `corum bench log`, which need a real file system.

use std::path::PathBuf;

use corum_engine::disk::SimDisk;
use corum_engine::log::{Log, LogConfig, NewBatch};
use corum_engine::record::{
    decode_frame, encode_frame_append, encode_frame_into, frame_bytes_for_payload, Attributes,
    BatchMeta, DEFAULT_FRAME_BYTES_MAX,
};
use corum_types::{Epoch, LogOffset};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures_lite::future::block_on;

fn meta() -> BatchMeta {
    BatchMeta {
        attributes: Attributes::empty(),
        base_offset: LogOffset(42),
        epoch: Epoch(7),
        record_count: 1,
        first_timestamp_ms: 1,
        max_timestamp_ms: 1,
    }
}

fn batch() -> NewBatch {
    NewBatch {
        epoch: Epoch(1),
        attributes: Attributes::empty(),
        record_count: 1,
        first_timestamp_ms: 0,
        max_timestamp_ms: 0,
    }
}

fn frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("frame");
    for size in [128usize, 4096, 1 << 20] {
        let payload = vec![0xABu8; size];
        let mut out = vec![0u8; frame_bytes_for_payload(size)];
        g.throughput(Throughput::Bytes(out.len() as u64));
        g.bench_with_input(BenchmarkId::new("encode", size), &size, |b, _| {
            b.iter(|| {
                encode_frame_into(&mut out, &meta(), &payload, DEFAULT_FRAME_BYTES_MAX).unwrap()
            })
        });
        // What `Log::append` does: encode at the end of the segment tail (copy fused with the
        // checksum), into a buffer that already has the room.
        let mut tail = corum_engine::AlignedBuf::with_capacity(out.len());
        g.bench_with_input(BenchmarkId::new("encode_append", size), &size, |b, _| {
            b.iter(|| {
                tail.clear();
                encode_frame_append(&mut tail, &meta(), &payload, DEFAULT_FRAME_BYTES_MAX).unwrap()
            })
        });
        let frame = corum_engine::AlignedBuf::from_slice(&out);
        g.bench_with_input(BenchmarkId::new("validate", size), &size, |b, _| {
            b.iter(|| {
                decode_frame(&frame, DEFAULT_FRAME_BYTES_MAX)
                    .unwrap()
                    .header()
                    .record_count
            })
        });
    }
    g.finish();
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 20,
        buffered_bytes_max: 16 << 20,
        prefill_ahead_bytes: 0,
        ..LogConfig::default()
    }
}

fn append(c: &mut Criterion) {
    let mut g = c.benchmark_group("append_sim");
    for group in [1usize, 64] {
        let payload = vec![1u8; 128];
        g.throughput(Throughput::Elements(group as u64));
        g.bench_with_input(
            BenchmarkId::new("128B_then_sync_every", group),
            &group,
            |b, &group| {
                let disk = SimDisk::new(1);
                let dir = PathBuf::from("/bench/append");
                let (log, _) = block_on(Log::open(disk, &dir, config())).unwrap();
                b.iter(|| {
                    if log.end_offset().get() - log.start_offset().get() > 100_000 {
                        // Keep the simulated files small: start over at the log's end.
                        block_on(log.delete_prefix(log.end_offset().add(1))).unwrap();
                    }
                    let mut last = LogOffset(0);
                    for _ in 0..group {
                        last = log.append(&batch(), &payload).unwrap().1;
                    }
                    block_on(log.wait_durable(last)).unwrap();
                });
            },
        );
    }
    g.finish();
}

fn recovery(c: &mut Criterion) {
    let mut g = c.benchmark_group("recovery_sim");
    g.sample_size(10);
    let disk = SimDisk::new(2);
    let dir = PathBuf::from("/bench/recovery");
    let mut bytes = 0u64;
    block_on(async {
        let (log, _) = Log::open(disk.clone(), &dir, config()).await.unwrap();
        let payload = vec![7u8; 64 << 10];
        for _ in 0..256 {
            log.append(&batch(), &payload).unwrap();
            bytes += frame_bytes_for_payload(payload.len()) as u64;
            if log.buffered_bytes() > 8 << 20 {
                log.flush().await.unwrap();
            }
        }
        log.close().await.unwrap();
    });
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("open_scan_16MiB_active_segment", |b| {
        b.iter(|| {
            let (log, report) = block_on(Log::open(disk.clone(), &dir, config())).unwrap();
            assert_eq!(report.scanned_bytes, bytes);
            log.end_offset()
        })
    });
    g.finish();
}

criterion_group!(benches, frames, append, recovery);
criterion_main!(benches);
