//! Shards, cross-shard channels and shutdown, run on real (unpinned) glommio executors.

use std::sync::{Arc, Barrier};

use corum_runtime::channel::{LinkReceiver, LinkSender, TrySendError};
use corum_runtime::placement::{CoreId, PlacementSpec, ShardRole};
use corum_runtime::{bounded, Error, Placement, Runtime, RuntimeConfig, ShardId};

use crate::common::RunBounded;

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

/// One shard's ends of a two-way link: a request link up and a response link down.
enum Ends {
    Client(LinkSender<Up>, LinkReceiver<Down>),
    Server(LinkReceiver<Up>, LinkSender<Down>),
}

/// A two-way link between shard 0 (client) and shard 1 (server), each way `capacity`
/// messages, as a node links its shards; one slot per shard for `Runtime::run`'s `make`.
fn two_way_link(capacity: usize) -> Vec<Option<Ends>> {
    let (up_tx, up_rx) = bounded(capacity).unwrap();
    let (down_tx, down_rx) = bounded(capacity).unwrap();
    vec![
        Some(Ends::Client(up_tx, down_rx)),
        Some(Ends::Server(up_rx, down_tx)),
    ]
}

#[test]
fn a_two_way_link_carries_requests_and_responses_in_order() {
    // The client shard sends requests up, the server shard answers each one down; every
    // answer arrives in order, and closing the up link ends the server's loop.
    let mut ends = two_way_link(16);
    const N: u32 = 200;
    let outcomes = runtime(2)
        .run_bounded(move |spec| {
            let end = ends[spec.id.0].take().unwrap();
            move |_ctx: corum_runtime::ShardContext| async move {
                match end {
                    Ends::Server(up, down) => {
                        let (up, down) = (up.connect().await, down.connect().await);
                        let mut served = 0;
                        while let Some(Up::Request(n)) = up.recv().await {
                            down.send(Down::Response(n * 2)).await.unwrap();
                            served += 1;
                        }
                        served
                    }
                    Ends::Client(up, down) => {
                        let (up, down) = (up.connect().await, down.connect().await);
                        for n in 0..N {
                            up.send(Up::Request(n)).await.unwrap();
                            assert_eq!(down.recv().await, Some(Down::Response(n * 2)));
                        }
                        up.close();
                        N
                    }
                }
            }
        })
        .unwrap();
    let results: Vec<u32> = outcomes.into_iter().map(|o| o.result.unwrap()).collect();
    assert_eq!(results, vec![N, N]);
}

#[test]
fn a_full_channel_reports_full_and_blocks_the_sender() {
    // With capacity 2 and a server that isn't reading: two try_sends pass, the third reports
    // Full, an async send stays pending, and it completes once the server drains.
    let mut ends = two_way_link(2);
    let barrier = Arc::new(Barrier::new(2));
    let outcomes = runtime(2)
        .run_bounded(move |spec| {
            let end = ends[spec.id.0].take().unwrap();
            let barrier = barrier.clone();
            move |_ctx: corum_runtime::ShardContext| async move {
                match end {
                    Ends::Server(up, down) => {
                        let (up, _down) = (up.connect().await, down.connect().await);
                        // Not reading until the client has filled the channel.
                        barrier.wait();
                        let mut got = Vec::new();
                        while let Some(Up::Request(n)) = up.recv().await {
                            got.push(n);
                        }
                        got
                    }
                    Ends::Client(up, down) => {
                        let (up, _down) = (up.connect().await, down.connect().await);
                        up.try_send(Up::Request(1)).unwrap();
                        up.try_send(Up::Request(2)).unwrap();
                        assert_eq!(
                            up.try_send(Up::Request(3)),
                            Err(TrySendError::Full(Up::Request(3)))
                        );
                        let mut blocked = Box::pin(up.send(Up::Request(3)));
                        assert!(futures_lite::future::poll_once(&mut blocked)
                            .await
                            .is_none());
                        barrier.wait();
                        blocked.await.unwrap();
                        up.close();
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
    // When the server has dropped its ends, the client's try_send reports Closed, not Full.
    let mut ends = two_way_link(4);
    let outcomes = runtime(2)
        .run_bounded(move |spec| {
            let end = ends[spec.id.0].take().unwrap();
            move |_ctx: corum_runtime::ShardContext| async move {
                match end {
                    Ends::Server(up, down) => {
                        let both = (up.connect().await, down.connect().await);
                        drop(both);
                        true
                    }
                    Ends::Client(up, down) => {
                        let (up, down) = (up.connect().await, down.connect().await);
                        // Dropping the server's sender closes the down link; wait for that.
                        assert_eq!(down.recv().await, None);
                        matches!(up.try_send(Up::Request(1)), Err(TrySendError::Closed(_)))
                    }
                }
            }
        })
        .unwrap();
    assert!(outcomes.iter().all(|o| *o.result.as_ref().unwrap()));
}
