//! `ControllerClient` against three in-process nodes (RaftDriver + ControllerService +
//! RpcServer each, real logs in temporary directories, one glommio executor thread): leader
//! following from a follower with and without client-endpoint hints, pipelined concurrent
//! calls, failover when the leader stops, and an unreachable bootstrap list. Conditions are
//! polled with a deadline, never waited for with a fixed sleep.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use corum_client::{ClientConfig, ClientError, ControllerClient};
use corum_controller::image::ConfigResource;
use corum_controller::records::ConfigResourceType;

use crate::common::{client_config, cluster, on_executor, stop_all, wait_for};

const TEST_DEADLINE: Duration = Duration::from_secs(30);

fn broker_resource(id: u32) -> ConfigResource {
    ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: id.to_string(),
    }
}

/// The follower indexes of a 3-node cluster led by `l`.
fn followers(l: usize) -> Vec<usize> {
    (0..3).filter(|&i| i != l).collect()
}

/// A client whose bootstrap list starts with the two followers ends its first call at the
/// leader whether or not NotController hints name client endpoints (without them the hint
/// names a Raft endpoint, which the client must not use), counts one leader change, and
/// 200 concurrent calls then pipeline on that one connection without moving again.
#[test]
fn calls_sent_to_a_follower_end_at_the_leader() {
    on_executor("client-follow", TEST_DEADLINE, || async {
        for client_hints in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let (nodes, l) = cluster(tmp.path(), client_hints).await;
            let f = followers(l);
            let client = ControllerClient::connect(client_config(&nodes, &[f[0], f[1], l]))
                .await
                .unwrap();
            assert_eq!(client.current_server(), Some(nodes[f[0]].rpc_addr));
            assert_eq!(client.leader_changes(), 0);
            // Any node answers DescribeQuorum; the follower knows only its own progress. It
            // learns the leader from the leader's first append: ask until it has.
            let mut q = client.describe_quorum().await.unwrap();
            for _ in 0..200 {
                if q.leader_id.is_some() {
                    break;
                }
                glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                q = client.describe_quorum().await.unwrap();
            }
            assert_eq!(q.node_id.0, nodes[f[0]].id);
            assert_eq!(q.leader_id.map(|id| id.0), Some(nodes[l].id));
            assert_eq!(client.leader_changes(), 0);
            client
                .alter_config(broker_resource(7), "log.retention.ms", "1000")
                .await
                .unwrap();
            assert_eq!(client.current_server(), Some(nodes[l].rpc_addr));
            assert_eq!(client.leader_changes(), 1, "hints {client_hints}");
            let stats = client.stats();
            if client_hints {
                // Straight from the first follower to the hinted leader.
                assert_eq!(stats.connects, 2, "{stats:?}");
            } else {
                // Round the bootstrap list: the other follower, then the leader.
                assert_eq!(stats.connects, 3, "{stats:?}");
            }

            let calls: Vec<_> = (0..200u32)
                .map(|i| {
                    let client = client.clone();
                    glommio::spawn_local(async move {
                        client
                            .alter_config(broker_resource(i), "log.retention.ms", &i.to_string())
                            .await
                    })
                })
                .collect();
            for call in calls {
                call.await.unwrap();
            }
            assert_eq!(client.leader_changes(), 1);
            assert_eq!(client.stats().connects, stats.connects);
            let described = client.describe_config(broker_resource(42)).await.unwrap();
            let retention = described
                .iter()
                .find(|c| c.name == "log.retention.ms")
                .unwrap();
            assert_eq!(retention.value.as_deref(), Some("42"));
            // The leader's DescribeQuorum fills every voter's replication columns.
            let q = client.describe_quorum_at_leader().await.unwrap();
            assert_eq!(q.node_id.0, nodes[l].id);
            assert_eq!(q.voters.len(), 3);
            assert!(q.voters.iter().all(|v| v.log_end_offset.is_some()), "{q:?}");
            stop_all(nodes).await;
        }
    });
}

/// With `retry_after_sending` off, a write the follower answers `NotController` is not
/// retried: it fails as `OutcomeUnknown` (a deposed leader answers the same for a write
/// that may still commit), the client has moved on by then, and the next write goes to the
/// leader and succeeds. DescribeQuorum, which any node answers, is unaffected.
#[test]
fn a_call_that_may_have_reached_a_server_is_not_retried_when_asked() {
    on_executor("client-no-retry", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (nodes, l) = cluster(tmp.path(), true).await;
        let f = followers(l);
        // The follower must know the leader to hint it: wait until it does.
        let probe = ControllerClient::connect(client_config(&nodes, &[f[0]]))
            .await
            .unwrap();
        for _ in 0..500 {
            if probe
                .describe_quorum()
                .await
                .is_ok_and(|q| q.leader_id.is_some())
            {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        let config = ClientConfig {
            retry_after_sending: false,
            ..client_config(&nodes, &[f[0], f[1], l])
        };
        let client = ControllerClient::connect(config).await.unwrap();
        let first = client
            .alter_config(broker_resource(7), "log.retention.ms", "1000")
            .await;
        assert!(
            matches!(first, Err(ClientError::OutcomeUnknown { .. })),
            "{first:?}"
        );
        assert_eq!(client.stats().retries, 0);
        assert_eq!(client.current_server(), Some(nodes[l].rpc_addr));
        client
            .alter_config(broker_resource(7), "log.retention.ms", "2000")
            .await
            .unwrap();
        stop_all(nodes).await;
    });
}

/// A stream of writes keeps succeeding while the leader stops: calls in flight or sent
/// during the election are retried until the new leader answers, none fails, and the
/// client counts the change of leader.
#[test]
fn calls_survive_the_leaders_shutdown() {
    on_executor("client-failover", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (mut nodes, l) = cluster(tmp.path(), false).await;
        let client =
            ControllerClient::connect(client_config(&nodes, &[l, (l + 1) % 3, (l + 2) % 3]))
                .await
                .unwrap();
        let done = Rc::new(Cell::new(0u32));
        let stop_writing = Rc::new(Cell::new(false));
        let writer = {
            let (client, done, stop_writing) = (client.clone(), done.clone(), stop_writing.clone());
            glommio::spawn_local(async move {
                let mut errors = Vec::new();
                let mut i = 0u32;
                while !stop_writing.get() {
                    i += 1;
                    let r = client
                        .alter_config(broker_resource(1), "log.retention.ms", &i.to_string())
                        .await;
                    match r {
                        Ok(()) => done.set(done.get() + 1),
                        Err(e) => errors.push(e),
                    }
                }
                (i, errors)
            })
            .detach()
        };
        wait_for("writes to the first leader", || done.get() >= 20).await;
        let old = nodes.remove(l);
        let old_addr = old.rpc_addr;
        old.stop().await;
        let after_stop = done.get();
        wait_for("writes to the next leader", || {
            done.get() >= after_stop + 20
        })
        .await;
        stop_writing.set(true);
        let (last, errors) = writer.await.unwrap();
        assert!(errors.is_empty(), "writes failed: {errors:?}");
        assert!(client.leader_changes() >= 1);
        assert_ne!(client.current_server(), Some(old_addr));
        let leader = nodes.iter().position(crate::common::Node::active).unwrap();
        assert_eq!(client.current_server(), Some(nodes[leader].rpc_addr));
        // The last acknowledged write is what the new leader holds.
        let described = client.describe_config(broker_resource(1)).await.unwrap();
        let retention = described
            .iter()
            .find(|c| c.name == "log.retention.ms")
            .unwrap();
        assert_eq!(retention.value.as_deref(), Some(last.to_string().as_str()));

        // A client whose bootstrap list lacks the leader cannot reach it (it connects to
        // bootstrap servers only) and says which endpoint is missing.
        let follower_only = ControllerClient::connect(ClientConfig {
            retry_deadline: Duration::from_millis(300),
            ..client_config(&nodes, &[1 - leader])
        })
        .await
        .unwrap();
        match follower_only
            .alter_config(broker_resource(1), "log.retention.ms", "2")
            .await
        {
            Err(ClientError::LeaderNotFound { last, .. }) => assert!(
                last.contains(&format!(
                    "node {}'s client endpoint is not among the bootstrap servers",
                    nodes[leader].id
                )),
                "{last}"
            ),
            other => panic!("expected LeaderNotFound, got {other:?}"),
        }

        // With the second leader gone too, the last node cannot be elected: a call keeps
        // meeting NotController until its retry deadline and then says so.
        let leader = nodes.remove(leader);
        leader.stop().await;
        let short = ControllerClient::connect(ClientConfig {
            retry_deadline: Duration::from_millis(500),
            ..client_config(&nodes, &[0])
        })
        .await
        .unwrap();
        let started = std::time::Instant::now();
        match short
            .alter_config(broker_resource(1), "log.retention.ms", "1")
            .await
        {
            Err(ClientError::LeaderNotFound {
                request, attempts, ..
            }) => {
                assert_eq!(request, "IncrementalAlterConfigs");
                assert!(attempts > 1);
            }
            other => panic!("expected LeaderNotFound, got {other:?}"),
        }
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(500) && took < Duration::from_secs(5),
            "{took:?}"
        );
        stop_all(nodes).await;
    });
}

/// With no server listening, connect gives up after the retry deadline naming what it tried.
#[test]
fn connect_reports_unreachable_servers() {
    on_executor("client-unreachable", TEST_DEADLINE, || async {
        // Bind and drop to get a port nothing listens on.
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let config = ClientConfig {
            retry_deadline: Duration::from_millis(200),
            ..ClientConfig::new(vec![addr])
        };
        match ControllerClient::connect(config).await {
            Err(ClientError::NoServerReachable {
                tried, waited_ms, ..
            }) => {
                assert_eq!(tried, vec![addr]);
                assert!(waited_ms >= 200);
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("connected to a closed port"),
        }
    });
}

/// A server that accepts connections but never answers (hung) makes the first call time out;
/// the timeout is returned, not retried, and moves the client on, so the next call reaches
/// the leader.
#[test]
fn a_timeout_moves_later_calls_to_another_server() {
    on_executor("client-timeout", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (nodes, l) = cluster(tmp.path(), false).await;
        // The hung server: accepts and keeps every connection open without reading.
        let silent = glommio::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let silent_addr = silent.local_addr().unwrap();
        let hold = glommio::spawn_local(async move {
            let mut held = Vec::new();
            while let Ok(stream) = silent.accept().await {
                held.push(stream);
            }
        })
        .detach();
        let mut bootstrap = vec![silent_addr];
        bootstrap.extend(nodes.iter().map(|n| n.rpc_addr));
        let client = ControllerClient::connect(ClientConfig {
            request_timeout: Duration::from_secs(1),
            ..ClientConfig::new(bootstrap)
        })
        .await
        .unwrap();
        assert_eq!(client.current_server(), Some(silent_addr));
        match client
            .alter_config(broker_resource(3), "log.retention.ms", "5")
            .await
        {
            Err(ClientError::Rpc(corum_client::RpcError::Timeout { timeout_ms })) => {
                assert_eq!(timeout_ms, 1000)
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert_eq!(client.stats().timeouts, 1);
        assert_ne!(client.current_server(), Some(silent_addr));
        client
            .alter_config(broker_resource(3), "log.retention.ms", "6")
            .await
            .unwrap();
        assert_eq!(client.current_server(), Some(nodes[l].rpc_addr));
        hold.cancel();
        stop_all(nodes).await;
    });
}
