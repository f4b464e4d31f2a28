//! Runtime benches: the cross-shard link the node's port uses between the driver and the service
//! (`corum_node::port::cross_shard`: a pair of [`corum_runtime::bounded`] channels), TCP frame
//! round trip on loopback, and frame encode + validate per payload size.
//!
//! Shards run unpinned (`Placement::unpinned`), so the figures are meaningful anywhere but
//! include scheduler noise on a busy machine. Each shard-based bench keeps its runtime alive for
//! the whole group: the criterion thread hands an iteration count to a driver shard over a
//! crossbeam channel, the driver shard times the loop itself and reports the elapsed time back
//! (criterion's `iter_custom`), so the hand-off between threads is not measured.
//!
//! | bench (`runtime/cross_shard/...`) | one iteration | throughput unit |
//! |---|---|---|
//! | `round_trip/spin_{0,100}us` | one message up to the controller shard and its answer down (a request crossing an idle link and back) | messages up |
//! | `batch_round_trip/spin_{0,100}us` | one `Vec` of [`BATCH_ITEMS`] items up and one `Vec` of their answers down, as the bridge batches what is ready at once | items |
//! | `one_way_stream/spin_{0,100}us` | one message up, never waited for (the stream's last one is acknowledged) | messages up |

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use corum_runtime::channel::{LinkReceiver, LinkSender};
use corum_runtime::message::{decode_frame, encode_frame};
use corum_runtime::transport::{connect, ConnectionConfig, Listener};
use corum_runtime::{bounded, Placement, Runtime, RuntimeConfig, ShardContext, ShardId};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_channel::{Receiver, Sender};
use rkyv::util::AlignedVec;

/// A message whose archived size is about `body.len()` plus a few bytes of header.
#[derive(rkyv::Archive, rkyv::Serialize, Debug)]
struct Blob {
    seq: u64,
    body: Vec<u8>,
}

fn blob(payload_bytes: usize) -> Blob {
    // The archive adds the u64 and the vector's relative pointer + length (16 bytes).
    let body_len = payload_bytes.saturating_sub(24);
    Blob {
        seq: 1,
        body: vec![0xA5; body_len],
    }
}

const PAYLOAD_SIZES: [usize; 3] = [64, 1024, 64 * 1024];

fn frame_encode_validate(c: &mut Criterion) {
    let mut g = c.benchmark_group("runtime/frame");
    for size in PAYLOAD_SIZES {
        let msg = blob(size);
        let mut buf = AlignedVec::new();
        let payload = encode_frame(&msg, &mut buf, u32::MAX).unwrap();
        g.throughput(Throughput::Bytes(payload as u64));
        g.bench_with_input(BenchmarkId::new("encode", size), &size, |b, _| {
            b.iter(|| encode_frame(&msg, &mut buf, u32::MAX).unwrap())
        });
        let frame = buf.clone();
        g.bench_with_input(BenchmarkId::new("validate", size), &size, |b, _| {
            b.iter(|| decode_frame::<Blob>(&frame, u32::MAX).unwrap().seq)
        });
        g.bench_with_input(BenchmarkId::new("encode+validate", size), &size, |b, _| {
            b.iter(|| {
                encode_frame(&msg, &mut buf, u32::MAX).unwrap();
                decode_frame::<Blob>(&buf, u32::MAX).unwrap().seq
            })
        });
    }
    g.finish();
}

/// Work the criterion thread hands to the driver shard.
enum Job {
    /// Measure `iters` repetitions of the named loop.
    Run {
        kind: usize,
        iters: u64,
    },
    Stop,
}

/// A runtime on a background thread with a driver shard taking [`Job`]s.
struct Harness {
    jobs: Sender<Job>,
    elapsed: Receiver<Duration>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Harness {
    fn measure(&self, kind: usize, iters: u64) -> Duration {
        self.jobs.send(Job::Run { kind, iters }).unwrap();
        self.elapsed.recv().unwrap()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.jobs.send(Job::Stop);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// Worker → controller traffic.
#[derive(Debug)]
enum Up {
    Ping(u64),
    /// Several items in one message, as the bridge moves everything ready at once.
    Batch(Vec<u64>),
    /// One-way stream; the controller acknowledges only the last one.
    Stream {
        last: bool,
    },
}

/// Controller → worker traffic.
#[derive(Debug)]
enum Down {
    Pong(u64),
    Batch(Vec<u64>),
    StreamDone,
}

/// Items per message of the batched round trip (the bridge moves up to 512).
const BATCH_ITEMS: usize = 64;
/// Messages queued on each link (the bridge's capacity).
const LINK_CAPACITY: usize = 256;

const CROSS_SHARD_ROUND_TRIP: usize = 0;
const CROSS_SHARD_BATCH_ROUND_TRIP: usize = 1;
const CROSS_SHARD_STREAM: usize = 2;

/// One shard's ends of the worker ↔ controller link.
enum Ends {
    Worker(LinkSender<Up>, LinkReceiver<Down>),
    Controller(LinkReceiver<Up>, LinkSender<Down>),
}

/// The controller shard: answers every message until the worker closes its link.
async fn controller_loop(up: LinkReceiver<Up>, down: LinkSender<Down>) {
    // Both sides connect the up link first (see `corum_runtime::channel`).
    let (up, down) = (up.connect().await, down.connect().await);
    while let Some(msg) = up.recv().await {
        let answer = match msg {
            Up::Ping(n) => Some(Down::Pong(n)),
            Up::Batch(items) => Some(Down::Batch(items.into_iter().map(|n| n + 1).collect())),
            Up::Stream { last: true } => Some(Down::StreamDone),
            Up::Stream { last: false } => None,
        };
        if let Some(a) = answer {
            down.send(a).await.unwrap();
        }
    }
}

/// Two unpinned shards: shard 0 (worker) drives, shard 1 (controller) answers.
fn cross_shard_harness(config: RuntimeConfig) -> Harness {
    let (jobs_tx, jobs_rx) = crossbeam_channel::bounded::<Job>(1);
    let (elapsed_tx, elapsed_rx) = crossbeam_channel::bounded::<Duration>(1);
    let thread = std::thread::spawn(move || {
        let (up_tx, up_rx) = bounded::<Up>(LINK_CAPACITY).unwrap();
        let (down_tx, down_rx) = bounded::<Down>(LINK_CAPACITY).unwrap();
        let mut ends = [
            Some(Ends::Worker(up_tx, down_rx)),
            Some(Ends::Controller(up_rx, down_tx)),
        ];
        let outcomes = Runtime::new(Placement::unpinned(2).unwrap(), config)
            .unwrap()
            .run(|spec| {
                let end = ends[spec.id.0].take().unwrap();
                let jobs = jobs_rx.clone();
                let elapsed = elapsed_tx.clone();
                move |_ctx: ShardContext| async move {
                    match end {
                        Ends::Controller(up, down) => controller_loop(up, down).await,
                        Ends::Worker(up, down) => {
                            let (up, down) = (up.connect().await, down.connect().await);
                            let batch: Vec<u64> = (0..BATCH_ITEMS as u64).collect();
                            // Blocking on the job channel is fine: nothing else runs here.
                            while let Ok(Job::Run { kind, iters }) = jobs.recv() {
                                let start = Instant::now();
                                match kind {
                                    CROSS_SHARD_ROUND_TRIP => {
                                        for i in 0..iters {
                                            up.send(Up::Ping(i)).await.unwrap();
                                            let Some(Down::Pong(n)) = down.recv().await else {
                                                panic!("expected a pong")
                                            };
                                            assert_eq!(n, i);
                                        }
                                    }
                                    CROSS_SHARD_BATCH_ROUND_TRIP => {
                                        for _ in 0..iters {
                                            up.send(Up::Batch(batch.clone())).await.unwrap();
                                            let Some(Down::Batch(answers)) = down.recv().await
                                            else {
                                                panic!("expected a batch of answers")
                                            };
                                            assert_eq!(answers.len(), BATCH_ITEMS);
                                        }
                                    }
                                    _ => {
                                        for i in 0..iters {
                                            let last = i + 1 == iters;
                                            up.send(Up::Stream { last }).await.unwrap();
                                        }
                                        assert!(matches!(
                                            down.recv().await,
                                            Some(Down::StreamDone)
                                        ));
                                    }
                                }
                                elapsed.send(start.elapsed()).unwrap();
                            }
                            up.close();
                        }
                    }
                }
            })
            .unwrap();
        for o in outcomes {
            o.result.unwrap();
        }
    });
    Harness {
        jobs: jobs_tx,
        elapsed: elapsed_rx,
        thread: Some(thread),
    }
}

fn cross_shard(c: &mut Criterion) {
    let mut g = c.benchmark_group("runtime/cross_shard");
    // Parking idle shards (the default) versus spinning 100 us before parking, which keeps the
    // receiving shard awake between messages at the cost of CPU.
    for spin_us in [0u64, 100] {
        let harness = cross_shard_harness(RuntimeConfig {
            spin_before_park_us: spin_us,
            ..RuntimeConfig::default()
        });
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("round_trip/spin_{spin_us}us"), |b| {
            b.iter_custom(|iters| harness.measure(CROSS_SHARD_ROUND_TRIP, iters))
        });
        g.throughput(Throughput::Elements(BATCH_ITEMS as u64));
        g.bench_function(format!("batch_round_trip/spin_{spin_us}us"), |b| {
            b.iter_custom(|iters| harness.measure(CROSS_SHARD_BATCH_ROUND_TRIP, iters))
        });
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("one_way_stream/spin_{spin_us}us"), |b| {
            b.iter_custom(|iters| harness.measure(CROSS_SHARD_STREAM, iters.max(1)))
        });
    }
    g.finish();
}

/// Two unpinned shards: shard 1 runs an echo server on 127.0.0.1, shard 0 a client driven by
/// jobs; `kind` indexes [`PAYLOAD_SIZES`].
fn tcp_harness() -> Harness {
    let (jobs_tx, jobs_rx) = crossbeam_channel::bounded::<Job>(1);
    let (elapsed_tx, elapsed_rx) = crossbeam_channel::bounded::<Duration>(1);
    let (addr_tx, addr_rx) = crossbeam_channel::bounded::<SocketAddr>(1);
    let thread = std::thread::spawn(move || {
        let config = ConnectionConfig {
            payload_bytes_max: 1 << 20,
            nodelay: true,
        };
        let outcomes = Runtime::new(Placement::unpinned(2).unwrap(), RuntimeConfig::default())
            .unwrap()
            .run(|spec| {
                let jobs = jobs_rx.clone();
                let elapsed = elapsed_tx.clone();
                let addr_tx = addr_tx.clone();
                let addr_rx = addr_rx.clone();
                let server = spec.id == ShardId(1);
                move |ctx: ShardContext| async move {
                    if server {
                        let listener =
                            Listener::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
                        addr_tx.send(listener.local_addr()).unwrap();
                        let stop = ctx.shutdown().clone();
                        listener
                            .serve(ctx.shutdown().clone(), None, move |mut conn| {
                                let stop = stop.clone();
                                async move {
                                    while let Some(m) = stop.run_until(conn.recv::<Blob>()).await {
                                        let m = m?;
                                        let reply = Blob {
                                            seq: m.seq.to_native(),
                                            body: m.body.to_vec(),
                                        };
                                        conn.send(&reply).await?;
                                    }
                                    Ok(())
                                }
                            })
                            .await;
                    } else {
                        let addr = addr_rx.recv().unwrap();
                        let mut conn = connect(addr, config).await.unwrap();
                        let msgs: Vec<Blob> = PAYLOAD_SIZES.iter().map(|s| blob(*s)).collect();
                        while let Ok(Job::Run { kind, iters }) = jobs.recv() {
                            let start = Instant::now();
                            for _ in 0..iters {
                                conn.send(&msgs[kind]).await.unwrap();
                                let r = conn.recv::<Blob>().await.unwrap();
                                assert_eq!(r.body.len(), msgs[kind].body.len());
                            }
                            elapsed.send(start.elapsed()).unwrap();
                        }
                        drop(conn);
                        ctx.global_shutdown().trigger();
                    }
                }
            })
            .unwrap();
        for o in outcomes {
            o.result.unwrap();
        }
    });
    Harness {
        jobs: jobs_tx,
        elapsed: elapsed_rx,
        thread: Some(thread),
    }
}

fn tcp_round_trip(c: &mut Criterion) {
    let harness = tcp_harness();
    let mut g = c.benchmark_group("runtime/tcp_loopback");
    for (kind, size) in PAYLOAD_SIZES.iter().enumerate() {
        // Bytes moved per iteration: the request and the echoed reply.
        g.throughput(Throughput::Bytes(2 * *size as u64));
        g.bench_with_input(BenchmarkId::new("round_trip", size), size, |b, _| {
            b.iter_custom(|iters| harness.measure(kind, iters))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = frame_encode_validate, cross_shard, tcp_round_trip
}
criterion_main!(benches);
