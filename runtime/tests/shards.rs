//! Shards, cross-shard channels, timers and shutdown, run on real (unpinned) glommio executors.

mod common;
use common::RunBounded;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use corum_runtime::channel::TrySendError;
use corum_runtime::placement::{CoreId, PlacementSpec, ShardRole};
use corum_runtime::{
    ChannelConfig, Error, Placement, Runtime, RuntimeConfig, ShardChannels, ShardId, ShardLinks,
};

fn runtime(shards: usize) -> Runtime {
    Runtime::new(
        Placement::unpinned(shards).unwrap(),
        RuntimeConfig::default(),
    )
    .unwrap()
}

#[test]
fn every_shard_runs_and_returns_its_result() {
    // Each shard runs its own entry function with its own context, and run() returns every
    // result in shard order.
    let outcomes = runtime(3)
        .run_bounded(move |spec| {
            let id = spec.id;
            move |ctx: corum_runtime::ShardContext| async move {
                assert_eq!(ctx.id(), id);
                assert_eq!(ctx.core(), None);
                (ctx.id().0 * 10, ctx.role())
            }
        })
        .unwrap();
    let got: Vec<_> = outcomes
        .into_iter()
        .map(|o| (o.shard, o.result.unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![
            (ShardId(0), (0, ShardRole::Worker)),
            (ShardId(1), (10, ShardRole::Worker)),
            (ShardId(2), (20, ShardRole::Controller)),
        ]
    );
}

#[test]
fn shutdown_from_outside_reaches_every_shard() {
    // Triggering the handle from another thread (as the signal thread does) makes every shard's
    // signal fire, whether the shard subscribed before or after the trigger.
    let rt = runtime(3);
    let handle = rt.shutdown_handle();
    let trigger = std::thread::spawn(move || handle.trigger());
    let outcomes = rt
        .run_bounded(move |_| {
            |ctx: corum_runtime::ShardContext| async move {
                ctx.shutdown().wait().await;
                ctx.shutdown().is_triggered()
            }
        })
        .unwrap();
    trigger.join().unwrap();
    assert!(outcomes.iter().all(|o| *o.result.as_ref().unwrap()));
}

#[test]
fn shutdown_from_one_shard_drains_the_others() {
    // One shard triggering the global handle stops shards that are blocked waiting for it,
    // and they get to run their drain code before returning.
    let outcomes = runtime(2)
        .run_bounded(move |_| {
            |ctx: corum_runtime::ShardContext| async move {
                if ctx.id() == ShardId(0) {
                    ctx.global_shutdown().trigger();
                }
                ctx.shutdown().wait().await;
                "drained"
            }
        })
        .unwrap();
    assert!(outcomes
        .iter()
        .all(|o| *o.result.as_ref().unwrap() == "drained"));
}

#[test]
fn a_panicking_shard_is_reported_and_stops_the_others() {
    // A shard panic becomes ShardPanicked for that shard and shuts the other shards down.
    let outcomes = runtime(3)
        .run_bounded(move |_| {
            |ctx: corum_runtime::ShardContext| async move {
                if ctx.id() == ShardId(1) {
                    panic!("boom in shard 1");
                }
                ctx.shutdown().wait().await;
            }
        })
        .unwrap();
    for o in outcomes {
        match o.shard {
            ShardId(1) => match o.result {
                Err(Error::ShardPanicked { shard, message }) => {
                    assert_eq!(shard, ShardId(1));
                    assert!(message.contains("boom in shard 1"));
                }
                other => panic!("expected a panic report, got {other:?}"),
            },
            _ => assert!(o.result.is_ok()),
        }
    }
}

#[test]
fn pinning_to_a_missing_core_fails_before_any_shard_runs() {
    // An executor that can't be created is reported as ExecutorSetup and no shard code runs.
    // (The placement is resolved against a fake online set so it passes validation.)
    let placement = PlacementSpec {
        cores: Some(vec![CoreId(0), CoreId(4000)]),
        ..Default::default()
    }
    .resolve(&[CoreId(0), CoreId(4000)])
    .unwrap();
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ran_in_shards = ran.clone();
    let result = Runtime::new(placement, RuntimeConfig::default())
        .unwrap()
        .run_bounded(move |_| {
            let ran = ran_in_shards.clone();
            move |_ctx: corum_runtime::ShardContext| async move {
                ran.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        });
    match result {
        Err(Error::ExecutorSetup { shard, core, .. }) => {
            assert_eq!(shard, ShardId(1));
            assert_eq!(core, Some(CoreId(4000)));
        }
        other => panic!("expected ExecutorSetup, got {other:?}"),
    }
    assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
}

#[derive(Debug, PartialEq)]
enum Up {
    Request(u32),
}

#[derive(Debug, PartialEq)]
enum Down {
    Response(u32),
}

fn split_links(placement: &Placement, config: ChannelConfig) -> Vec<Option<ShardLinks<Up, Down>>> {
    ShardChannels::<Up, Down>::new(placement, config)
        .unwrap()
        .into_per_shard(placement.shards().len())
}

#[test]
fn workers_and_controller_exchange_requests_and_responses() {
    // Two workers send requests up to the controller, which answers each one down to its
    // sender; every reply reaches the right worker, in order.
    let placement = Placement::unpinned(3).unwrap();
    let mut links = split_links(&placement, ChannelConfig::default());
    const N: u32 = 200;
    let outcomes = Runtime::new(placement, RuntimeConfig::default())
        .unwrap()
        .run_bounded(move |spec| {
            let link = links[spec.id.0].take().unwrap();
            move |_ctx: corum_runtime::ShardContext| async move {
                match link {
                    ShardLinks::Controller(c) => {
                        let mut ports = c.connect().await;
                        let mut served = 0;
                        while let Some((from, Up::Request(n))) = ports.recv().await {
                            ports.send_to(from, Down::Response(n * 2)).await.unwrap();
                            served += 1;
                        }
                        served
                    }
                    ShardLinks::Worker(w) => {
                        let ports = w.connect().await;
                        for n in 0..N {
                            ports.send(Up::Request(n)).await.unwrap();
                            assert_eq!(ports.recv().await, Some(Down::Response(n * 2)));
                        }
                        ports.close();
                        N
                    }
                }
            }
        })
        .unwrap();
    let results: Vec<u32> = outcomes.into_iter().map(|o| o.result.unwrap()).collect();
    assert_eq!(results, vec![N, N, 2 * N]);
}

#[test]
fn a_full_channel_reports_full_and_blocks_the_sender() {
    // With capacity 2 and a controller that isn't reading: two try_sends pass, the third
    // reports Full, an async send stays pending, and it completes once the controller drains.
    let placement = Placement::unpinned(2).unwrap();
    let mut links = split_links(
        &placement,
        ChannelConfig {
            up_capacity: 2,
            down_capacity: 2,
        },
    );
    let barrier = Arc::new(Barrier::new(2));
    let outcomes = Runtime::new(placement, RuntimeConfig::default())
        .unwrap()
        .run_bounded(move |spec| {
            let link = links[spec.id.0].take().unwrap();
            let barrier = barrier.clone();
            move |_ctx: corum_runtime::ShardContext| async move {
                match link {
                    ShardLinks::Controller(c) => {
                        let mut ports = c.connect().await;
                        // Not reading until the worker has filled the channel.
                        barrier.wait();
                        let mut got = Vec::new();
                        while let Some((_, Up::Request(n))) = ports.recv().await {
                            got.push(n);
                        }
                        got
                    }
                    ShardLinks::Worker(w) => {
                        let ports = w.connect().await;
                        ports.try_send(Up::Request(1)).unwrap();
                        ports.try_send(Up::Request(2)).unwrap();
                        assert_eq!(
                            ports.try_send(Up::Request(3)),
                            Err(TrySendError::Full(Up::Request(3)))
                        );
                        let mut blocked = Box::pin(ports.send(Up::Request(3)));
                        assert!(futures_lite::future::poll_once(&mut blocked)
                            .await
                            .is_none());
                        barrier.wait();
                        blocked.await.unwrap();
                        ports.close();
                        vec![]
                    }
                }
            }
        })
        .unwrap();
    assert_eq!(outcomes[1].result.as_ref().unwrap(), &vec![1, 2, 3]);
}

#[test]
fn a_send_to_a_gone_receiver_reports_closed() {
    // When the controller has dropped its ends, a worker's try_send reports Closed, not Full.
    let placement = Placement::unpinned(2).unwrap();
    let mut links = split_links(&placement, ChannelConfig::default());
    let outcomes = Runtime::new(placement, RuntimeConfig::default())
        .unwrap()
        .run_bounded(move |spec| {
            let link = links[spec.id.0].take().unwrap();
            move |_ctx: corum_runtime::ShardContext| async move {
                match link {
                    ShardLinks::Controller(c) => {
                        let ports = c.connect().await;
                        drop(ports);
                        true
                    }
                    ShardLinks::Worker(w) => {
                        let ports = w.connect().await;
                        // The controller closes its down link when dropping; wait for that.
                        assert_eq!(ports.recv().await, None);
                        matches!(ports.try_send(Up::Request(1)), Err(TrySendError::Closed(_)))
                    }
                }
            }
        })
        .unwrap();
    assert!(outcomes.iter().all(|o| *o.result.as_ref().unwrap()));
}

#[test]
fn periodic_ticker_runs_until_shutdown_on_the_latency_queue() {
    // A periodic task ticks on a shard's latency queue and stops when shutdown arrives; a
    // background task runs alongside it on the other queue.
    let outcomes = runtime(1)
        .run_bounded(move |_| {
            |ctx: corum_runtime::ShardContext| async move {
                let global = ctx.global_shutdown().clone();
                let bg = ctx.spawn_background(async { 7 });
                let mut count = 0;
                let ticks = ctx
                    .spawn_latency(corum_runtime::timer::run_periodic(
                        Duration::from_millis(1),
                        ctx.shutdown().clone(),
                        move |_now| {
                            count += 1;
                            if count == 3 {
                                global.trigger();
                            }
                            async {}
                        },
                    ))
                    .await;
                (ticks, bg.await)
            }
        })
        .unwrap();
    let (ticks, bg) = outcomes[0].result.as_ref().unwrap();
    assert!(*ticks >= 3, "ticks {ticks}");
    assert_eq!(*bg, 7);
}

#[test]
fn the_controller_fans_in_fairly_from_busy_workers() {
    // When two workers have filled their channels before the controller reads, the controller
    // receives their messages alternately instead of draining one worker first.
    let placement = Placement::unpinned(3).unwrap();
    const K: u32 = 8;
    let mut links = split_links(
        &placement,
        ChannelConfig {
            up_capacity: K as usize,
            down_capacity: 1,
        },
    );
    let barrier = Arc::new(Barrier::new(3));
    let outcomes = Runtime::new(placement, RuntimeConfig::default())
        .unwrap()
        .run_bounded(move |spec| {
            let link = links[spec.id.0].take().unwrap();
            let barrier = barrier.clone();
            move |_ctx: corum_runtime::ShardContext| async move {
                match link {
                    ShardLinks::Controller(c) => {
                        let mut ports = c.connect().await;
                        barrier.wait();
                        let mut from = Vec::new();
                        while let Some((shard, Up::Request(_))) = ports.recv().await {
                            from.push(shard.0);
                        }
                        from
                    }
                    ShardLinks::Worker(w) => {
                        let ports = w.connect().await;
                        for n in 0..K {
                            ports.try_send(Up::Request(n)).unwrap();
                        }
                        barrier.wait();
                        ports.close();
                        vec![]
                    }
                }
            }
        })
        .unwrap();
    let from = outcomes[2].result.as_ref().unwrap();
    assert_eq!(from.len(), 2 * K as usize);
    for pair in from.chunks(2) {
        assert_ne!(pair[0], pair[1], "{from:?}");
    }
}
