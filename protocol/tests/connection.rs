//! `RpcConnection` against scripted servers on loopback (the runtime's listener, answering
//! from the test): what a call gets for each thing a server can do, and pipelining. Each test
//! runs on its own glommio executor under a deadline; nothing waits by sleeping.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use corum_controller::control::cluster_control::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, UnregisterBrokerRequest,
};
use corum_controller::control::replication_control::{CreatableTopic, CreateTopicsRequest};
use corum_controller::TargetState;
use corum_protocol::{
    LeaderHint, ProtocolError, RequestBody, RequestFrame, ResponseBody, ResponseFrame,
    RpcConnection, RpcConnectionConfig, RpcConnectionError, RpcError,
};
use corum_raft::message::{FetchRequest, FetchResponse, FetchResult};
use corum_raft::{Batch, ReplicaKey};
use corum_runtime::transport::{ConnectionConfig, Listener, TcpConnection};
use corum_runtime::ShutdownSignal;
use corum_types::{BrokerEpoch, Epoch, LogOffset, NodeId, Uuid};

const TEST_DEADLINE: Duration = Duration::from_secs(30);
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `f` on a glommio executor of its own thread; fails if it takes over `TEST_DEADLINE`.
fn on_executor<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::default()
            .name("protocol-test")
            .io_memory(1 << 20)
            .make()
            .expect("glommio executor")
            .run(f());
        let _ = tx.send(());
    });
    match rx.recv_timeout(TEST_DEADLINE) {
        Ok(()) => handle.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test did not finish in time"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(handle.join().unwrap_err())
        }
    }
}

/// Serves every connection with `script` (one task per connection) until the returned signal
/// fires; returns the address.
fn scripted<F, Fut>(script: F) -> (SocketAddr, ShutdownSignal)
where
    F: Fn(TcpConnection) -> Fut + 'static,
    Fut: Future<Output = corum_runtime::Result<()>> + 'static,
{
    let listener =
        Listener::bind("127.0.0.1:0".parse().unwrap(), ConnectionConfig::default()).unwrap();
    let addr = listener.local_addr();
    let stop = ShutdownSignal::detached();
    glommio::spawn_local(listener.serve(stop.clone(), None, script)).detach();
    (addr, stop)
}

fn heartbeat(broker: u32) -> RequestBody {
    RequestBody::BrokerHeartbeat(BrokerHeartbeatRequest {
        broker_id: NodeId(broker),
        broker_epoch: None,
        incarnation_id: Uuid([1; 16]),
        listeners: vec![],
        features: vec![],
        rack: None,
        next_metadata_offset: LogOffset(0),
        want_fence: false,
        want_shutdown: false,
    })
}

fn fetch() -> RequestBody {
    RequestBody::Fetch(FetchRequest {
        epoch: Epoch(1),
        replica: ReplicaKey {
            id: NodeId(100),
            directory_id: Uuid([100; 16]),
        },
        fetch_offset: LogOffset(0),
        last_fetched_epoch: Epoch(0),
        high_watermark: LogOffset(0),
        wait_max_ms: 0,
    })
}

#[test]
fn a_call_gets_what_its_server_does() {
    // Against a scripted server: a request never answered fails with NoAnswer after the
    // call's wait; NotController is handed back as it is (a connection follows nobody: the
    // server sees the request once); a Fetch answer whose batches leave a gap is
    // InvalidResponse and the connection keeps serving; a connection the server drops fails
    // the waiting call with ConnectionLost, and every later call at once.
    on_executor(|| async {
        let (addr, stop) = scripted(move |mut conn| async move {
            loop {
                let frame = RequestFrame::from_archived(conn.recv::<RequestFrame>().await?.get());
                let body = match frame.body {
                    RequestBody::DescribeCluster => Err(RpcError::NotController {
                        leader: Some(LeaderHint {
                            id: NodeId(9),
                            host: "127.0.0.1".into(),
                            port: 1,
                        }),
                    }),
                    RequestBody::Fetch(_) => Ok(ResponseBody::Fetch(Box::new(FetchResponse {
                        epoch: Epoch(1),
                        leader: Some(NodeId(1)),
                        result: FetchResult::Batches {
                            fetch_offset: LogOffset(0),
                            last_fetched_epoch: Epoch(0),
                            batches: vec![Batch {
                                base_offset: LogOffset(5),
                                epoch: Epoch(1),
                                record_count: 1,
                                control: false,
                                timestamp_ms: -1,
                                payload: vec![1u8].into(),
                            }],
                            high_watermark: LogOffset(6),
                        },
                    }))),
                    RequestBody::BrokerHeartbeat(_) => {
                        Ok(ResponseBody::BrokerHeartbeat(BrokerHeartbeatResponse {
                            broker_epoch: BrokerEpoch(1),
                            target_state: TargetState::Fenced,
                            lease_duration_ms: 1,
                            is_caught_up: false,
                        }))
                    }
                    // Never answered.
                    RequestBody::CreateTopics(_) => continue,
                    // The connection is dropped.
                    _ => return Ok(()),
                };
                conn.send(&ResponseFrame {
                    correlation_id: frame.correlation_id,
                    body,
                })
                .await?;
            }
        });
        let conn = RpcConnection::connect(addr, RpcConnectionConfig::default())
            .await
            .unwrap();
        assert_eq!(conn.addr(), addr);

        let answer = conn
            .call(
                RequestBody::CreateTopics(CreateTopicsRequest {
                    topics: vec![CreatableTopic::new("t", 1, 1)],
                    validate_only: false,
                }),
                Duration::from_millis(50),
            )
            .await;
        assert!(
            matches!(
                answer,
                Err(RpcConnectionError::NoAnswer { waited_ms: 50, .. })
            ),
            "{answer:?}"
        );

        let answer = conn.call(RequestBody::DescribeCluster, CALL_TIMEOUT).await;
        assert!(
            matches!(
                answer,
                Err(RpcConnectionError::Rpc(RpcError::NotController { leader: Some(ref h) })) if h.id == NodeId(9)
            ),
            "{answer:?}"
        );

        let answer = conn.call(fetch(), CALL_TIMEOUT).await;
        assert!(
            matches!(
                &answer,
                Err(RpcConnectionError::InvalidResponse {
                    source: ProtocolError::Raft(corum_raft::Error::BatchesNotContiguous { .. }),
                    ..
                })
            ),
            "{answer:?}"
        );
        let answer = conn.call(heartbeat(1), CALL_TIMEOUT).await;
        assert!(
            matches!(answer, Ok(ResponseBody::BrokerHeartbeat(_))),
            "{answer:?}"
        );

        let answer = conn
            .call(
                RequestBody::UnregisterBroker(UnregisterBrokerRequest {
                    broker_id: NodeId(1),
                }),
                CALL_TIMEOUT,
            )
            .await;
        assert!(
            matches!(answer, Err(RpcConnectionError::ConnectionLost { addr: a, .. }) if a == addr),
            "{answer:?}"
        );
        assert!(conn.is_broken());
        let answer = conn.call(heartbeat(1), CALL_TIMEOUT).await;
        assert!(
            matches!(answer, Err(RpcConnectionError::ConnectionLost { .. })),
            "{answer:?}"
        );
        stop.fire();
    });
}

#[test]
fn pipelined_calls_get_their_own_answers_in_any_order() {
    // 64 concurrent calls share one connection; the server reads all 64 before answering and
    // answers them in reverse order: each call still gets the answer to its own request.
    const CALLS: u32 = 64;
    on_executor(|| async {
        let (addr, stop) = scripted(move |mut conn| async move {
            let mut frames = Vec::new();
            while frames.len() < CALLS as usize {
                frames.push(RequestFrame::from_archived(
                    conn.recv::<RequestFrame>().await?.get(),
                ));
            }
            for frame in frames.into_iter().rev() {
                let RequestBody::BrokerHeartbeat(h) = frame.body else {
                    panic!("unexpected {:?}", frame.body)
                };
                conn.send(&ResponseFrame {
                    correlation_id: frame.correlation_id,
                    body: Ok(ResponseBody::BrokerHeartbeat(BrokerHeartbeatResponse {
                        broker_epoch: BrokerEpoch(h.broker_id.0.into()),
                        target_state: TargetState::Fenced,
                        lease_duration_ms: 1,
                        is_caught_up: false,
                    })),
                })
                .await?;
            }
            Ok(())
        });
        let conn = std::rc::Rc::new(
            RpcConnection::connect(addr, RpcConnectionConfig::default())
                .await
                .unwrap(),
        );
        let calls: Vec<_> = (0..CALLS)
            .map(|i| {
                let conn = conn.clone();
                glommio::spawn_local(
                    async move { (i, conn.call(heartbeat(i), CALL_TIMEOUT).await) },
                )
            })
            .collect();
        for call in calls {
            let (i, answer) = call.await;
            match answer {
                Ok(ResponseBody::BrokerHeartbeat(r)) => {
                    assert_eq!(r.broker_epoch, BrokerEpoch(i.into()))
                }
                other => panic!("call {i}: {other:?}"),
            }
        }
        stop.fire();
    });
}

#[test]
fn requests_over_the_limit_are_not_sent_and_zero_limits_are_refused() {
    // A request above `request_bytes_max` fails with Encode before anything is sent (the
    // server never sees it; the connection keeps serving); a config with a zero limit is
    // refused naming the field.
    on_executor(|| async {
        let (addr, stop) = scripted(move |mut conn| async move {
            loop {
                let frame = RequestFrame::from_archived(conn.recv::<RequestFrame>().await?.get());
                let RequestBody::BrokerHeartbeat(h) = frame.body else {
                    panic!("the oversized request reached the server: {:?}", frame.body)
                };
                conn.send(&ResponseFrame {
                    correlation_id: frame.correlation_id,
                    body: Ok(ResponseBody::BrokerHeartbeat(BrokerHeartbeatResponse {
                        broker_epoch: BrokerEpoch(h.broker_id.0.into()),
                        target_state: TargetState::Fenced,
                        lease_duration_ms: 1,
                        is_caught_up: false,
                    })),
                })
                .await?;
            }
        });
        let config = RpcConnectionConfig {
            request_bytes_max: 4096,
            ..RpcConnectionConfig::default()
        };
        let conn = RpcConnection::connect(addr, config).await.unwrap();
        let huge = RequestBody::CreateTopics(CreateTopicsRequest {
            topics: vec![CreatableTopic::new(&"x".repeat(8192), 1, 1)],
            validate_only: false,
        });
        let answer = conn.call(huge, CALL_TIMEOUT).await;
        assert!(
            matches!(
                answer,
                Err(RpcConnectionError::Encode(ProtocolError::TooLarge {
                    max_bytes: 4096,
                    ..
                }))
            ),
            "{answer:?}"
        );
        let answer = conn.call(heartbeat(3), CALL_TIMEOUT).await;
        assert!(
            matches!(answer, Ok(ResponseBody::BrokerHeartbeat(ref r)) if r.broker_epoch == BrokerEpoch(3)),
            "{answer:?}"
        );
        for (field, bad) in [
            (
                "outgoing_queue_capacity",
                RpcConnectionConfig {
                    outgoing_queue_capacity: 0,
                    ..RpcConnectionConfig::default()
                },
            ),
            (
                "request_bytes_max",
                RpcConnectionConfig {
                    request_bytes_max: 0,
                    ..RpcConnectionConfig::default()
                },
            ),
            (
                "response_bytes_max",
                RpcConnectionConfig {
                    response_bytes_max: 0,
                    ..RpcConnectionConfig::default()
                },
            ),
        ] {
            match RpcConnection::connect(addr, bad).await {
                Err(RpcConnectionError::Config { field: f, .. }) => assert_eq!(f, field),
                Err(other) => panic!("{field}: {other:?}"),
                Ok(_) => panic!("{field}: a zero limit was accepted"),
            }
        }
        stop.fire();
    });
}

#[test]
fn a_server_that_stops_reading_pushes_back_on_callers() {
    // The server accepts and never reads: the writer task fills the socket's buffers and
    // blocks, the outgoing queue fills to its capacity and stays there, and further calls wait
    // for room (never growing the queue) until their timeout answers them NoAnswer.
    on_executor(|| async {
        // A plain socket on a thread of its own: accepted, held, never read.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (release, released) = mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let (_held, _) = listener.accept().unwrap();
            let _ = released.recv();
        });
        const CAPACITY: usize = 4;
        let config = RpcConnectionConfig {
            outgoing_queue_capacity: CAPACITY,
            ..RpcConnectionConfig::default()
        };
        let conn = std::rc::Rc::new(RpcConnection::connect(addr, config).await.unwrap());
        let big = || {
            RequestBody::CreateTopics(CreateTopicsRequest {
                topics: vec![CreatableTopic::new(&"x".repeat(8_000), 1, 1)],
                validate_only: false,
            })
        };
        let calls: Vec<_> = (0..3_000)
            .map(|_| {
                let conn = conn.clone();
                glommio::spawn_local(async move { conn.call(big(), Duration::from_secs(3)).await })
                    .detach()
            })
            .collect();
        let start = std::time::Instant::now();
        let mut full_seen = 0;
        while full_seen < 50 {
            let queued = conn.queued_requests();
            assert!(!conn.is_broken(), "the connection broke");
            assert!(queued <= CAPACITY, "{queued} requests queued");
            if queued == CAPACITY {
                full_seen += 1;
            }
            assert!(
                start.elapsed() < Duration::from_secs(3),
                "the queue never filled: the socket took everything"
            );
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
        for c in calls {
            let answer = c.await.unwrap();
            assert!(
                matches!(answer, Err(RpcConnectionError::NoAnswer { .. })),
                "{answer:?}"
            );
        }
        assert!(conn.queued_requests() <= CAPACITY);
        release.send(()).unwrap();
        server.join().unwrap();
    });
}
