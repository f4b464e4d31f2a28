//! Controller service benches: the leader's proposal path through the sans-IO service core.
//!
//! - `service/propose_64_alter_configs`: one group of 64 IncrementalAlterConfigs requests (one
//!   broker config key each, as `corum loadgen --workload configs` writes) handed to an active
//!   [`ServiceCore`] at once: each dispatched to the controller, its records sized, applied as in
//!   flight and added to the group, and the group encoded into the proposal that goes to the
//!   driver. Throughput in requests/s; the time per element is the service core's CPU per write
//!   request. The proposals are then committed back to the core outside the timed part (replay
//!   is every node's cost, not the proposal path's), so every iteration starts from the same
//!   state: nothing in flight, the same 64 configs in the image.
//! - `service/cycle_64_alter_configs/{counts,image}`: the whole cycle of such a group on the
//!   service's loop — proposed, committed back and replayed — with the service's status taken
//!   after each of the two events as `ControllerService::run` takes it, over an image of the
//!   configs of 10,240 brokers that the writes spread over: with the counts a node
//!   keeps (`counts`), and with the committed image kept in the status
//!   (`publish_committed_image`, `image`), which makes every replay copy the paths it shares with
//!   the previous status's image and the status's replacement drop them.

use std::time::{Duration, Instant};

use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use corum_controller::image::configs::ConfigResource;
use corum_controller::records::ConfigResourceType;
use corum_controller::{Controller, ControllerConfig};
use corum_node::calls::CallId;
use corum_node::port::{Call, CommittedBatch, DriverStatus, ToDriver};
use corum_node::service::core::ServiceCore;
use corum_node::{ControllerServiceConfig, RequestBody, RequestFrame};
use corum_raft::{Payload, Role};
use corum_types::{Epoch, LogOffset, NodeId};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const ME: NodeId = NodeId(1);
const EPOCH: Epoch = Epoch(3);
const REQUESTS: usize = 64;
/// Brokers whose configs the cycle bench's image holds.
const BROKERS: usize = 10_240;

/// The limits a node runs with by default (`corum.controller.records.per.batch.max`, seven
/// eighths of `corum.raft.batch.bytes.max`): 64 one-record requests fit one batch.
fn config() -> ControllerServiceConfig {
    config_publishing(false)
}

fn config_publishing(publish_committed_image: bool) -> ControllerServiceConfig {
    ControllerServiceConfig {
        node_id: ME,
        leader_endpoints: Vec::new(),
        controller_listener_name: "CONTROLLER".into(),
        controller_tick_interval_ms: 1_000,
        batch_records_max: 10_000,
        batch_bytes_max: 7 * 1024 * 1024 / 8,
        batch_requests_max: 1_024,
        snapshot_bytes_between: 0,
        idle_noop_interval_ms: 0,
        publish_committed_image,
        acls: Default::default(),
    }
}

/// An active core of epoch 3 whose log ends at 5 (its LeaderChange batch at 4 committed).
fn active_core() -> ServiceCore {
    active_core_with(config())
}

fn active_core_with(config: ControllerServiceConfig) -> ServiceCore {
    let controller = Controller::new(ControllerConfig::default(), ME).expect("valid config");
    let mut core = ServiceCore::new(config, controller);
    let mut status = DriverStatus::starting();
    status.raft.leader = Some(ME);
    status.raft.role = Role::Leader;
    status.raft.epoch = EPOCH;
    status.raft.log_end_offset = LogOffset(5);
    core.on_status(&status, 0);
    core.on_committed(
        &CommittedBatch {
            base_offset: LogOffset(4),
            epoch: EPOCH,
            record_count: 1,
            control: true,
            payload: Payload::from(&b"leader change"[..]),
            snapshot: false,
        },
        0,
    )
    .expect("a control batch is noted");
    assert!(core.is_active());
    // The activation proposes the bootstrap features first: commit them back.
    for m in core.take_outbox() {
        if let ToDriver::Propose(p) = m {
            core.on_committed(
                &CommittedBatch {
                    base_offset: p.batch.base_offset,
                    epoch: p.batch.epoch,
                    record_count: p.record_count,
                    control: false,
                    payload: p.payload,
                    snapshot: false,
                },
                0,
            )
            .expect("the activation's batch replays");
        }
    }
    core
}

/// The configs workload's write: one broker's `log.retention.ms`.
fn alter(id: u64, broker: usize, value: u64) -> Call {
    Call {
        id: CallId(id),
        frame: RequestFrame {
            correlation_id: id,
            timeout_ms: 0,
            body: RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
                resources: vec![AlterConfigsResource {
                    resource: ConfigResource {
                        resource_type: ConfigResourceType::Broker,
                        name: (1_000_000 + broker).to_string(),
                    },
                    configs: vec![AlterableConfig {
                        key: "log.retention.ms".into(),
                        op: AlterConfigOp::Set,
                        value: (1_000_000_000_000 + value).to_string(),
                    }],
                }],
                validate_only: false,
            }),
        },
    }
}

/// Commits the proposals in `out` back to the core, as the driver's publisher would.
fn commit(core: &mut ServiceCore, out: Vec<ToDriver>) -> usize {
    let mut proposals = 0;
    for m in out {
        if let ToDriver::Propose(p) = m {
            assert_eq!(p.answers.len(), REQUESTS, "every request in one proposal");
            core.on_committed(
                &CommittedBatch {
                    base_offset: p.batch.base_offset,
                    epoch: p.batch.epoch,
                    record_count: p.record_count,
                    control: false,
                    payload: p.payload,
                    snapshot: false,
                },
                0,
            )
            .expect("the core's own batch replays");
            proposals += 1;
        }
    }
    proposals
}

fn bench_propose(c: &mut Criterion) {
    let mut core = active_core();
    let mut next_id = 0u64;
    let mut g = c.benchmark_group("service");
    g.throughput(Throughput::Elements(REQUESTS as u64));
    g.bench_function("propose_64_alter_configs", |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                let calls: Vec<Call> = (0..REQUESTS)
                    .map(|i| {
                        next_id += 1;
                        alter(next_id, i, next_id)
                    })
                    .collect();
                let start = Instant::now();
                core.on_calls(calls, 1).expect("the calls are served");
                let out = core.take_outbox();
                took += start.elapsed();
                assert_eq!(commit(&mut core, out), 1, "one proposal per group");
            }
            took
        })
    });
    g.finish();
    core.check_invariants();
}

fn bench_cycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("service/cycle_64_alter_configs");
    g.throughput(Throughput::Elements(REQUESTS as u64));
    for (name, publish) in [("counts", false), ("image", true)] {
        let mut core = active_core_with(config_publishing(publish));
        let mut next_id = 0u64;
        // An image of the configs of BROKERS brokers, which each group's writes spread over.
        for group in 0..BROKERS / REQUESTS {
            let calls: Vec<Call> = (0..REQUESTS)
                .map(|i| {
                    next_id += 1;
                    alter(next_id, group * REQUESTS + i, next_id)
                })
                .collect();
            core.on_calls(calls, 1).expect("the calls are served");
            let out = core.take_outbox();
            assert_eq!(commit(&mut core, out), 1, "one proposal per group");
        }
        // The status the loop keeps: replaced after every event.
        let mut status = core.status(true);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    let calls: Vec<Call> = (0..REQUESTS)
                        .map(|i| {
                            next_id += 1;
                            let broker = (next_id as usize).wrapping_mul(7919) % BROKERS;
                            alter(next_id, broker + i % 2, next_id)
                        })
                        .collect();
                    let start = Instant::now();
                    core.on_calls(calls, 1).expect("the calls are served");
                    let out = core.take_outbox();
                    status = core.status(true);
                    assert_eq!(commit(&mut core, out), 1, "one proposal per group");
                    status = core.status(true);
                    took += start.elapsed();
                }
                took
            })
        });
        assert_eq!(status.committed_image.is_some(), publish);
        core.check_invariants();
    }
    g.finish();
}

criterion_group!(benches, bench_propose, bench_cycle);
criterion_main!(benches);
