//! Three `RaftDriver`s with a `ControllerService` and an `RpcServer` each, on loopback with
//! real metadata logs (`UringDisk`) in temporary directories, sharing one unpinned glommio
//! executor thread; clients are `RpcConnection`s and raw framed connections. Conditions are polled
//! with a timeout (never a fixed sleep to wait for something) and the whole test runs under a
//! deadline guard.

use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_controller::control::replication_control::{CreatableTopic, CreateTopicsRequest};
use corum_controller::TargetState;
use corum_node::protocol::{decode_request, encode_request, peek_correlation_id, LeaderHint};
use corum_node::rpc_server::describe_quorum;
use corum_node::{
    RequestBody, RequestFrame, ResponseBody, ResponseFrame, RpcError, RpcServer, RpcServerConfig,
};
use corum_protocol::{RpcConnection, RpcConnectionConfig, RpcConnectionError};
use corum_runtime::transport::{connect, ConnectionConfig};
use corum_runtime::ShutdownSignal;
use corum_types::{LogOffset, NodeId, Uuid};

use crate::common::{
    heartbeat, on_executor, rpc_cluster, set_cluster_default_retention, set_retention, wait_for,
    RpcNode, WAIT_MAX,
};

const TEST_DEADLINE: Duration = Duration::from_secs(120);
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const CLUSTER: Uuid = Uuid([0x7c; 16]);
const REQUEST_BYTES_MAX: u32 = 64 << 10;

type Node = RpcNode;

/// Starts three nodes whose RPC servers know each other's client endpoints; waits for an
/// active controller and returns the nodes and its index.
async fn cluster(tmp: &Path) -> (Vec<Node>, usize) {
    let controller = corum_controller::ControllerConfig::default();
    rpc_cluster(tmp, CLUSTER, true, REQUEST_BYTES_MAX, controller).await
}

fn config_ok(body: &Result<ResponseBody, RpcConnectionError>) -> bool {
    matches!(body, Ok(ResponseBody::IncrementalAlterConfigs(r)) if r.resources.iter().all(|t| t.1.is_ok()))
}

/// A request frame as its raw archive bytes (a frame payload).
fn request_bytes(correlation_id: u64, body: RequestBody) -> Vec<u8> {
    let frame = RequestFrame {
        correlation_id,
        timeout_ms: 10_000,
        body,
    };
    encode_request(&frame, usize::MAX).unwrap().to_vec()
}

/// A whole transport frame carrying `payload` as it is.
fn raw_frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    corum_runtime::frame::encode(payload, &mut out);
    out
}

#[test]
fn rpc_servers_redirect_pipeline_and_contain_bad_clients() {
    // Over real disks and sockets: a follower's RPC server answers NotController naming the
    // leader's client endpoint, and a connection to that endpoint reaches the leader; through
    // one connection a broker registers and is unfenced, a topic is created and 32 pipelined config
    // writes all succeed, each acknowledged only once committed; a raw connection sending
    // garbage mid-stream is closed while the client keeps working; an oversized frame is
    // answered RequestTooLarge and closed; a malformed payload in an intact frame is answered
    // Malformed with its correlation id and its connection keeps serving; a voter change is
    // refused by the leader's Raft core with its reason; an answer above the response limit
    // is replaced by
    // ResponseTooLarge.
    on_executor("rpc-server-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (nodes, l) = cluster(tmp.path()).await;
        let leader = &nodes[l];
        let follower = &nodes[(l + 1) % 3];

        // The follower's answer names the leader at its RPC server.
        let direct = RpcConnection::connect(follower.rpc_addr, RpcConnectionConfig::default())
            .await
            .unwrap();
        // The follower learns the leader from its first append: ask until it names one.
        let mut answer = direct
            .call(RequestBody::DescribeCluster, CALL_TIMEOUT)
            .await;
        for _ in 0..200 {
            if !matches!(
                answer,
                Err(RpcConnectionError::Rpc(RpcError::NotController {
                    leader: None
                }))
            ) {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
            answer = direct
                .call(RequestBody::DescribeCluster, CALL_TIMEOUT)
                .await;
        }
        let hint = LeaderHint {
            id: NodeId(leader.id),
            host: "127.0.0.1".into(),
            port: leader.rpc_addr.port(),
        };
        assert_eq!(
            answer,
            Err(RpcConnectionError::Rpc(RpcError::NotController {
                leader: Some(hint.clone())
            }))
        );

        // A connection to the hinted endpoint is served by the leader.
        let hinted: std::net::SocketAddr = format!("{}:{}", hint.host, hint.port).parse().unwrap();
        let client = Rc::new(
            RpcConnection::connect(hinted, RpcConnectionConfig::default())
                .await
                .unwrap(),
        );
        let answer = client
            .call(RequestBody::DescribeCluster, CALL_TIMEOUT)
            .await;
        assert!(
            matches!(answer, Ok(ResponseBody::DescribeCluster(_))),
            "{answer:?}"
        );
        assert_eq!(client.addr(), leader.rpc_addr);

        // A voter change reaches the leader's Raft core: adding a replica that never fetched
        // is refused with KIP-853's reason, and the connection keeps serving.
        let add_voter = RequestBody::AddVoter(corum_raft::message::AddVoterRequest {
            request_id: 1,
            voter: corum_raft::Voter {
                key: corum_raft::ReplicaKey {
                    id: NodeId(4),
                    directory_id: Uuid([4; 16]),
                },
                endpoints: vec![],
            },
        });
        match client.call(add_voter, CALL_TIMEOUT).await {
            Ok(ResponseBody::AddVoter(r)) => {
                assert_eq!(r.result, Err(corum_raft::VoterChangeError::NotCaughtUp));
            }
            other => panic!("AddVoter answered {other:?}"),
        }

        // DescribeQuorum is answered from the driver's status.
        match client.call(RequestBody::DescribeQuorum, CALL_TIMEOUT).await {
            Ok(ResponseBody::DescribeQuorum(q)) => {
                assert_eq!(q.cluster_id, CLUSTER);
                assert_eq!(q.leader_id, Some(NodeId(leader.id)));
                assert_eq!(
                    q.voters.iter().map(|v| v.replica_id).collect::<Vec<_>>(),
                    vec![NodeId(1), NodeId(2), NodeId(3)]
                );
            }
            other => panic!("DescribeQuorum answered {other:?}"),
        }

        // Register broker 100, then heartbeat it caught up so it is unfenced.
        let reg = match client
            .call(heartbeat(100, None, LogOffset(0)), CALL_TIMEOUT)
            .await
        {
            Ok(ResponseBody::BrokerHeartbeat(r)) => r,
            other => panic!("registration failed: {other:?}"),
        };
        assert!(leader.raft.status().raft.high_watermark > LogOffset(0));
        let caught_up = leader.raft.status().raft.high_watermark;
        match client
            .call(
                heartbeat(100, Some(reg.broker_epoch), caught_up),
                CALL_TIMEOUT,
            )
            .await
        {
            Ok(ResponseBody::BrokerHeartbeat(hb)) => {
                assert_eq!(hb.target_state, TargetState::Active, "{hb:?}")
            }
            other => panic!("heartbeat failed: {other:?}"),
        }

        // A topic.
        let created = client
            .call(
                RequestBody::CreateTopics(CreateTopicsRequest {
                    topics: vec![CreatableTopic::new("orders", 2, 1)],
                    validate_only: false,
                })
                .clone(),
                CALL_TIMEOUT,
            )
            .await;
        match &created {
            Ok(ResponseBody::CreateTopics(r)) => assert!(r.topics.iter().all(|t| t.1.is_ok())),
            other => panic!("CreateTopics answered {other:?}"),
        }

        // 32 concurrent writes pipelined on the one connection, in rounds for a throughput
        // figure; every write's batch is committed when its answer arrives.
        const CONCURRENT: u64 = 32;
        const ROUNDS: u64 = 8;
        let before = leader.service.status().committed_end;
        let start = Instant::now();
        for round in 0..ROUNDS {
            let writers: Vec<_> = (0..CONCURRENT)
                .map(|i| {
                    let client = client.clone();
                    let value = 10_000 + round * CONCURRENT + i;
                    glommio::spawn_local(async move {
                        client
                            .call(set_retention("orders", value), CALL_TIMEOUT)
                            .await
                    })
                    .detach()
                })
                .collect();
            for w in writers {
                let answer = w.await.unwrap();
                assert!(config_ok(&answer), "{answer:?}");
            }
        }
        let elapsed = start.elapsed();
        let writes = CONCURRENT * ROUNDS;
        eprintln!(
            "{writes} config writes, {CONCURRENT} pipelined on one connection: {:.0} writes/s",
            writes as f64 / elapsed.as_secs_f64()
        );
        // Committed when answered; the controller's replay follows right behind.
        assert!(leader.raft.status().raft.high_watermark >= before.add(writes));
        wait_for("the controller to replay the writes", || {
            leader.service.status().committed_end >= before.add(writes)
        })
        .await;

        // Asked on the leader, DescribeQuorum --replication shows every voter's progress; once
        // the writes are committed and acknowledged, the followers catch up (lag 0).
        let leader_id = NodeId(leader.id);
        wait_for("the followers to catch up", || {
            let q = describe_quorum(CLUSTER, leader_id, &leader.raft.status());
            q.voters.len() == 3 && q.voters.iter().all(|v| v.lag == Some(0))
        })
        .await;
        match client.call(RequestBody::DescribeQuorum, CALL_TIMEOUT).await {
            Ok(ResponseBody::DescribeQuorum(q)) => {
                assert_eq!(q.node_id, leader_id);
                assert_eq!(q.leader_id, Some(leader_id));
                assert_eq!(q.voters.len(), 3, "{q:?}");
                for v in &q.voters {
                    assert!(v.log_end_offset.is_some(), "{q:?}");
                    assert!(v.lag.is_some() && v.last_fetch_age_ms.is_some(), "{q:?}");
                    assert!(v.directory_id.is_some(), "{q:?}");
                }
                let leader_end = q
                    .voters
                    .iter()
                    .find(|v| v.replica_id == leader_id)
                    .and_then(|v| v.log_end_offset)
                    .unwrap();
                assert!(leader_end >= before.add(writes), "{q:?}");
            }
            other => panic!("DescribeQuorum answered {other:?}"),
        }

        // A raw connection: one good request, then garbage mid-stream: it is answered, then
        // closed, and the client's connection keeps working.
        let mut raw = connect(leader.rpc_addr, ConnectionConfig::default())
            .await
            .unwrap();
        raw.send_raw(&raw_frame(&request_bytes(41, RequestBody::DescribeCluster)))
            .await
            .unwrap();
        let answer = ResponseFrame::from_archived(raw.recv::<ResponseFrame>().await.unwrap().get());
        assert_eq!(answer.correlation_id, 41);
        assert!(matches!(answer.body, Ok(ResponseBody::DescribeCluster(_))));
        raw.send_raw(b"this is not a frame header, nor anything else")
            .await
            .unwrap();
        assert!(
            raw.recv::<ResponseFrame>().await.is_err(),
            "a connection sending garbage stays open"
        );
        let answer = client.call(set_retention("orders", 7), CALL_TIMEOUT).await;
        assert!(config_ok(&answer), "{answer:?}");

        // An oversized frame: RequestTooLarge (correlation id 0, its body is never read),
        // then the connection closes.
        let mut raw = connect(leader.rpc_addr, ConnectionConfig::default())
            .await
            .unwrap();
        let huge = vec![0u8; REQUEST_BYTES_MAX as usize + 8];
        raw.send_raw(&raw_frame(&huge)).await.unwrap();
        let answer = ResponseFrame::from_archived(raw.recv::<ResponseFrame>().await.unwrap().get());
        assert_eq!(answer.correlation_id, 0);
        assert_eq!(
            answer.body,
            Err(RpcError::RequestTooLarge {
                len_bytes: huge.len() as u64,
                max_bytes: REQUEST_BYTES_MAX.into(),
            })
        );
        assert!(raw.recv::<ResponseFrame>().await.is_err());

        // A malformed payload in an intact frame: Malformed with the peeked correlation id,
        // and the connection keeps serving. The payload is a valid request with one byte
        // changed so that validation fails while the root's correlation id is intact.
        let good = request_bytes(55, RequestBody::DescribeCluster);
        let bad = (0..good.len())
            .map(|i| {
                let mut b = good.clone();
                b[i] = 0xff;
                b
            })
            .find(|b| {
                let mut aligned = rkyv::util::AlignedVec::<16>::new();
                aligned.extend_from_slice(b);
                decode_request(&aligned, usize::MAX).is_err() && peek_correlation_id(b) == Some(55)
            })
            .expect("some byte of a request frame is validated");
        let mut raw = connect(leader.rpc_addr, ConnectionConfig::default())
            .await
            .unwrap();
        raw.send_raw(&raw_frame(&bad)).await.unwrap();
        let answer = ResponseFrame::from_archived(raw.recv::<ResponseFrame>().await.unwrap().get());
        assert_eq!(answer.correlation_id, 55);
        assert!(
            matches!(answer.body, Err(RpcError::Malformed { .. })),
            "{answer:?}"
        );
        raw.send_raw(&raw_frame(&request_bytes(56, RequestBody::DescribeCluster)))
            .await
            .unwrap();
        let answer = ResponseFrame::from_archived(raw.recv::<ResponseFrame>().await.unwrap().get());
        assert_eq!(answer.correlation_id, 56);
        assert!(matches!(answer.body, Ok(ResponseBody::DescribeCluster(_))));

        // Limits: a server for at most one connection, one request in flight per connection,
        // 256-byte responses. Pipelined calls are served one at a time and all succeed; a
        // larger answer is replaced by ResponseTooLarge; a second connection is closed on
        // accept; once the first closes, a new one is served.
        const RESPONSE_BYTES_MAX: u32 = 256;
        let limited = RpcServer::bind(
            "127.0.0.1:0".parse().unwrap(),
            RpcServerConfig {
                limits: corum_node::connections::ConnectionLimits {
                    max: 1,
                    ..corum_node::connections::ConnectionLimits::unlimited()
                },
                in_flight_per_connection_max: 1,
                response_bytes_max: RESPONSE_BYTES_MAX,
                ..corum_node::config::components::rpc_server(
                    &crate::common::node_config(leader.id),
                    CLUSTER,
                )
            },
        )
        .unwrap();
        let (limited_addr, limited_stats) = (limited.local_addr(), limited.stats());
        let limited_stop = ShutdownSignal::detached();
        let limited_run =
            glommio::spawn_local(limited.run(leader.raft.clone(), limited_stop.clone())).detach();
        let one = Rc::new(
            RpcConnection::connect(limited_addr, RpcConnectionConfig::default())
                .await
                .unwrap(),
        );
        let writers: Vec<_> = (0..8u64)
            .map(|i| {
                let one = one.clone();
                glommio::spawn_local(async move {
                    one.call(set_retention("orders", 20_000 + i), CALL_TIMEOUT)
                        .await
                })
                .detach()
            })
            .collect();
        for w in writers {
            let answer = w.await.unwrap();
            assert!(config_ok(&answer), "{answer:?}");
        }
        let mut second = connect(limited_addr, ConnectionConfig::default())
            .await
            .unwrap();
        assert!(
            second.recv::<ResponseFrame>().await.is_err(),
            "a connection over the cap was served"
        );
        assert_eq!(limited_stats.borrow().refused, 1);
        // Every key of a topic with its value does not fit 256 bytes.
        let described = one
            .call(
                RequestBody::DescribeConfigs(
                    corum_controller::control::config_control::DescribeConfigsRequest::all(vec![
                        corum_controller::image::ConfigResource::topic("orders"),
                    ]),
                ),
                CALL_TIMEOUT,
            )
            .await;
        assert!(
            matches!(
                described,
                Err(RpcConnectionError::Rpc(RpcError::ResponseTooLarge { bytes, max }))
                    if bytes > u64::from(RESPONSE_BYTES_MAX) && max == u64::from(RESPONSE_BYTES_MAX)
            ),
            "{described:?}"
        );
        drop(one);
        wait_for("the limited server's connection to close", || {
            limited_stats.borrow().open == 0
        })
        .await;
        let again = RpcConnection::connect(limited_addr, RpcConnectionConfig::default())
            .await
            .unwrap();
        let answer = again
            .call(set_retention("orders", 30_000), CALL_TIMEOUT)
            .await;
        assert!(config_ok(&answer), "{answer:?}");
        drop(again);
        limited_stop.fire();
        let stats = limited_run.await.unwrap();
        assert_eq!((stats.accepted, stats.refused), (2, 1), "{stats:?}");

        let leader_id = leader.id;
        drop((direct, client, raw));
        for node in nodes {
            let id = node.id;
            let stats = node.stop().await;
            if id == leader_id {
                assert_eq!(stats.malformed, 1, "{stats:?}");
                assert_eq!(stats.too_large, 1, "{stats:?}");
                assert_eq!(stats.framing_errors, 1, "{stats:?}");
                assert!(stats.requests > writes, "{stats:?}");
            }
        }
    });
}

/// An observer's Fetch at `offset` (epoch of its last batch `last_epoch`), waiting up to
/// `wait_ms` for news.
fn observer_fetch(
    id: u32,
    epoch: corum_types::Epoch,
    offset: LogOffset,
    last_epoch: corum_types::Epoch,
    hwm: LogOffset,
    wait_ms: u64,
) -> RequestBody {
    RequestBody::Fetch(corum_raft::message::FetchRequest {
        epoch,
        replica: corum_raft::ReplicaKey {
            id: NodeId(id),
            directory_id: Uuid([id as u8; 16]),
        },
        fetch_offset: offset,
        last_fetched_epoch: last_epoch,
        high_watermark: hwm,
        wait_max_ms: wait_ms,
    })
}

#[test]
fn observers_fetch_the_log_from_the_leader_over_rpc() {
    // Over real disks and sockets: an observer's Fetch at the leader returns the committed
    // batches from offset 0 and the high watermark; a Fetch at the end waits (long poll) and
    // returns as soon as a new batch commits, well before its wait; the leader's DescribeQuorum
    // lists the observer; a follower answers NotController naming the leader's client
    // endpoint; a Fetch naming a voter's id is refused (it would count as that voter's
    // progress) and the connection keeps serving.
    on_executor("rpc-server-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (nodes, l) = cluster(tmp.path()).await;
        let leader = &nodes[l];
        let follower = &nodes[(l + 1) % 3];
        let connection_config = RpcConnectionConfig::default();
        let client = RpcConnection::connect(leader.rpc_addr, connection_config)
            .await
            .unwrap();
        let epoch = leader.raft.status().raft.epoch;

        // From the start: at least the leader's LeaderChange batch. The leader serves its log
        // to its end, committed or not (as Kafka's leader does: the fetcher applies only up to
        // the high watermark), so the observer fetches until it holds the whole log and the
        // high watermark has reached its end.
        let mut end = LogOffset::ZERO;
        let mut last_epoch = corum_types::Epoch::ZERO;
        let mut high_watermark = LogOffset::ZERO;
        for round in 0.. {
            assert!(
                round < 200,
                "the observer never caught up: {end} / {high_watermark}"
            );
            let answer = client
                .call(
                    observer_fetch(100, epoch, end, last_epoch, high_watermark, 0),
                    CALL_TIMEOUT,
                )
                .await
                .unwrap();
            let ResponseBody::Fetch(r) = answer else {
                panic!("{answer:?}")
            };
            let corum_raft::message::FetchResult::Batches {
                batches,
                high_watermark: hwm,
                ..
            } = r.result
            else {
                panic!("{:?}", r.result)
            };
            if round == 0 {
                assert!(!batches.is_empty());
                assert_eq!(batches[0].base_offset, LogOffset::ZERO);
            }
            if let Some(b) = batches.first() {
                assert_eq!(b.base_offset, end, "batches start at the fetch offset");
            }
            if let Some(last) = batches.last() {
                end = last.end_offset();
                last_epoch = last.epoch;
            }
            high_watermark = hwm;
            if batches.is_empty() && high_watermark >= end {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(high_watermark, end);

        // A long poll at the end returns once something new commits, not after its wait.
        let poll_client = Rc::new(
            RpcConnection::connect(leader.rpc_addr, connection_config)
                .await
                .unwrap(),
        );
        let started = Instant::now();
        let poll = {
            let c = poll_client.clone();
            glommio::spawn_local(async move {
                c.call(
                    observer_fetch(100, epoch, end, last_epoch, high_watermark, 8_000),
                    Duration::from_secs(20),
                )
                .await
            })
        };
        let registered = client
            .call(heartbeat(7, None, LogOffset::ZERO), CALL_TIMEOUT)
            .await;
        assert!(
            matches!(registered, Ok(ResponseBody::BrokerHeartbeat(_))),
            "{registered:?}"
        );
        let polled = poll.await.unwrap();
        let waited = started.elapsed();
        let ResponseBody::Fetch(r) = polled else {
            panic!("{polled:?}")
        };
        let corum_raft::message::FetchResult::Batches { batches, .. } = r.result else {
            panic!("{:?}", r.result)
        };
        assert!(!batches.is_empty(), "the long poll returned empty");
        assert_eq!(batches[0].base_offset, end);
        assert!(waited < Duration::from_secs(6), "long poll took {waited:?}");

        // The leader lists the observer.
        let answer = client
            .call(RequestBody::DescribeQuorum, CALL_TIMEOUT)
            .await
            .unwrap();
        let ResponseBody::DescribeQuorum(q) = answer else {
            panic!("{answer:?}")
        };
        assert!(
            q.observers.iter().any(|o| o.replica_id == NodeId(100)),
            "{q:?}"
        );

        // A follower redirects to the leader's client endpoint. While it knows no leader (the
        // leader's BeginQuorumEpoch or first fetch answer has not reached it yet, or a fetch
        // timed out on a loaded machine) it answers without a hint, so ask until it names one.
        let at_follower = RpcConnection::connect(follower.rpc_addr, connection_config)
            .await
            .unwrap();
        let asked = Instant::now();
        let answer = loop {
            let answer = at_follower
                .call(
                    observer_fetch(
                        100,
                        epoch,
                        LogOffset::ZERO,
                        corum_types::Epoch::ZERO,
                        LogOffset::ZERO,
                        0,
                    ),
                    CALL_TIMEOUT,
                )
                .await;
            let unhinted = RpcConnectionError::Rpc(RpcError::NotController { leader: None });
            if answer.as_ref().err() != Some(&unhinted) {
                break answer;
            }
            assert!(
                asked.elapsed() < WAIT_MAX,
                "node {} never named the leader",
                follower.id
            );
            glommio::timer::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(
            answer,
            Err(RpcConnectionError::Rpc(RpcError::NotController {
                leader: Some(LeaderHint {
                    id: NodeId(leader.id),
                    host: "127.0.0.1".into(),
                    port: leader.rpc_addr.port(),
                })
            }))
        );

        // A voter's id is refused; the connection keeps serving.
        let answer = client
            .call(
                observer_fetch(
                    follower.id,
                    epoch,
                    LogOffset::ZERO,
                    corum_types::Epoch::ZERO,
                    LogOffset::ZERO,
                    0,
                ),
                CALL_TIMEOUT,
            )
            .await;
        assert!(
            matches!(&answer, Err(RpcConnectionError::Rpc(RpcError::ObserverRefused { replica_id, reason }))
                if *replica_id == NodeId(follower.id) && reason.contains("vot")),
            "{answer:?}"
        );
        let answer = client
            .call(RequestBody::DescribeCluster, CALL_TIMEOUT)
            .await;
        assert!(
            matches!(answer, Ok(ResponseBody::DescribeCluster(_))),
            "{answer:?}"
        );

        for n in nodes {
            n.stop().await;
        }
    });
}

/// Writes the cluster default through `client` until it commits. A proposal in flight when
/// the leader appends a VotersRecord is refused (its predicted offset moved) and answered
/// NotController; the service takes proposals again at once, so a retry commits.
async fn write_eventually(client: &RpcConnection, value: u64) {
    let start = Instant::now();
    loop {
        let written = client
            .call(
                set_cluster_default_retention(&value.to_string()),
                CALL_TIMEOUT,
            )
            .await;
        if config_ok(&written) {
            return;
        }
        assert!(
            matches!(
                written,
                Err(RpcConnectionError::Rpc(RpcError::NotController { .. }))
            ) && start.elapsed() < WAIT_MAX,
            "{written:?}"
        );
        glommio::timer::sleep(Duration::from_millis(20)).await;
    }
}

/// The voter ids the leader behind `client` reports.
async fn voter_ids(client: &RpcConnection) -> Vec<u32> {
    match client.call(RequestBody::DescribeQuorum, CALL_TIMEOUT).await {
        Ok(ResponseBody::DescribeQuorum(q)) => q.voters.iter().map(|v| v.replica_id.0).collect(),
        other => panic!("DescribeQuorum answered {other:?}"),
    }
}

#[test]
fn voters_are_removed_and_added_back_over_rpc() {
    // Over real disks and sockets, a dynamic quorum of three (replicas with directory ids):
    // RemoveVoter of a follower sent to the other follower is NotController; sent to the
    // leader it is answered once the two-voter set commits, DescribeQuorum then lists two
    // voters and writes still commit (after a retry: see `write_eventually`). The removed replica, cut off from the leader's appends,
    // fetches, so AddVoter takes it back once it is caught up (refused NotCaughtUp until
    // then), and a second AddVoter of it is AlreadyVoter.
    on_executor("rpc-voters-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (nodes, l) = cluster(tmp.path()).await;
        let leader = &nodes[l];
        let gone = &nodes[(l + 1) % 3];
        let other = &nodes[(l + 2) % 3];
        let connect = |addr| RpcConnection::connect(addr, RpcConnectionConfig::default());
        let to_leader = connect(leader.rpc_addr).await.unwrap();
        let to_other = connect(other.rpc_addr).await.unwrap();
        let key = crate::common::key(gone.id);
        let remove = RequestBody::RemoveVoter(corum_raft::message::RemoveVoterRequest {
            request_id: 1,
            voter: key,
        });
        let at_other = to_other.call(remove.clone(), CALL_TIMEOUT).await;
        assert!(
            matches!(
                at_other,
                Err(RpcConnectionError::Rpc(RpcError::NotController { .. }))
            ),
            "{at_other:?}"
        );
        match to_leader.call(remove, CALL_TIMEOUT).await {
            Ok(ResponseBody::RemoveVoter(r)) => assert_eq!(r.result, Ok(())),
            other => panic!("RemoveVoter answered {other:?}"),
        }
        let mut two = vec![leader.id, other.id];
        two.sort_unstable();
        assert_eq!(voter_ids(&to_leader).await, two);
        write_eventually(&to_leader, 1_000).await;

        let voter = corum_raft::Voter {
            key,
            endpoints: vec![crate::common::endpoint(gone.raft_addr)],
        };
        let add = |request_id| {
            RequestBody::AddVoter(corum_raft::message::AddVoterRequest {
                request_id,
                voter: voter.clone(),
            })
        };
        let start = Instant::now();
        let mut refusals = Vec::new();
        loop {
            match to_leader.call(add(2), CALL_TIMEOUT).await {
                Ok(ResponseBody::AddVoter(r)) if r.result.is_ok() => break,
                Ok(ResponseBody::AddVoter(r)) => refusals.push(r.result.unwrap_err()),
                other => panic!("AddVoter answered {other:?}"),
            }
            assert!(
                start.elapsed() < WAIT_MAX,
                "the removed replica was never added back: {refusals:?}"
            );
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            refusals
                .iter()
                .all(|e| *e == corum_raft::VoterChangeError::NotCaughtUp),
            "{refusals:?}"
        );
        assert_eq!(voter_ids(&to_leader).await, vec![1, 2, 3]);
        match to_leader.call(add(3), CALL_TIMEOUT).await {
            Ok(ResponseBody::AddVoter(r)) => {
                assert_eq!(r.result, Err(corum_raft::VoterChangeError::AlreadyVoter))
            }
            other => panic!("AddVoter answered {other:?}"),
        }
        write_eventually(&to_leader, 2_000).await;
    });
}
