//! Three `RaftDriver`s, each with a `ControllerService` on its committed stream, on loopback
//! with real metadata logs (`UringDisk`) in temporary directories, sharing one unpinned glommio
//! executor thread. Conditions are polled with a timeout (never a fixed sleep to wait for
//! something) and the whole test runs under a deadline guard.

use std::cell::Cell;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_controller::control::replication_control::{CreatableTopic, CreateTopicsRequest};
use corum_controller::{ApiError, Controller, TargetState};
use corum_node::peer::PeerNetwork;
use corum_node::protocol::LeaderHint;
use corum_node::{
    ControllerServiceConfig, RaftDriverConfig, RaftHandle, RequestBody, RequestFrame, ResponseBody,
    ResponseFrame, RpcError,
};
use corum_raft::VoterSet;
use corum_types::{LogOffset, NodeId, Uuid};

use crate::common::{
    bind_all, heartbeat, on_executor, rebind, set_retention, voter_set, wait_for, ControllerNode,
    WAIT_MAX,
};

const TEST_DEADLINE: Duration = Duration::from_secs(120);
const CLUSTER: Uuid = Uuid([0x6b; 16]);

/// One node: a driver and the controller service on its committed stream.
struct Node {
    id: u32,
    dir: PathBuf,
    addr: SocketAddr,
    /// The driver and the service (`raft`, `service`, `stop` read through `Deref`).
    node: ControllerNode,
}

impl std::ops::Deref for Node {
    type Target = ControllerNode;
    fn deref(&self) -> &ControllerNode {
        &self.node
    }
}

impl Node {
    async fn start(
        id: u32,
        dir: &Path,
        net: (PeerNetwork, corum_node::PeerInbox),
        voters: &VoterSet,
    ) -> Node {
        Node::start_tweaked(id, dir, net, voters, |_, _| {}).await
    }

    /// [`Node::start`] with `tweak` applied to the driver's and the service's configs.
    async fn start_tweaked(
        id: u32,
        dir: &Path,
        net: (PeerNetwork, corum_node::PeerInbox),
        voters: &VoterSet,
        tweak: impl FnOnce(&mut RaftDriverConfig, &mut ControllerServiceConfig),
    ) -> Node {
        let addr = net.0.local_addr();
        let controller = corum_controller::ControllerConfig::default();
        let n = crate::common::start_controller_node_tweaked(
            id, dir, net, voters, false, controller, tweak,
        )
        .await;
        Node {
            id,
            dir: dir.to_path_buf(),
            addr,
            node: n,
        }
    }

    /// Sends `body` with a 10 s timeout. A successful registration or topic creation must find
    /// the batch it waited for committed: the driver's high watermark and the service's replay
    /// at or past the batch's end.
    async fn call(&self, correlation_id: u64, body: RequestBody) -> ResponseFrame {
        call_checked(&self.raft, &self.service, correlation_id, body).await
    }

    fn active(&self) -> bool {
        self.service.status().active_epoch.is_some()
    }
}

enum Kind {
    Registration,
    Create,
    Config,
    Other,
}

async fn call_checked(
    raft: &RaftHandle,
    service: &crate::common::ServiceView,
    correlation_id: u64,
    body: RequestBody,
) -> ResponseFrame {
    let body_kind = match &body {
        RequestBody::BrokerHeartbeat(h) if h.broker_epoch.is_none() => Kind::Registration,
        RequestBody::CreateTopics(_) => Kind::Create,
        RequestBody::IncrementalAlterConfigs(_) => Kind::Config,
        _ => Kind::Other,
    };
    let before = service.status();
    let predicted = before.next_offset;
    let frame = RequestFrame {
        correlation_id,
        timeout_ms: 10_000,
        body,
    };
    let answer = service.call(frame).await;
    assert_eq!(answer.correlation_id, correlation_id);
    // Requests whose success means records: a registration, a topic created.
    let proposes = match (&body_kind, &answer.body) {
        (Kind::Registration, Ok(_)) => true,
        (Kind::Create, Ok(ResponseBody::CreateTopics(r))) => r.topics.iter().all(|t| t.1.is_ok()),
        (Kind::Config, Ok(ResponseBody::IncrementalAlterConfigs(r))) => {
            r.resources.iter().all(|t| t.1.is_ok())
        }
        _ => false,
    };
    if proposes {
        let hwm = raft.status().raft.high_watermark;
        assert!(
            hwm > predicted,
            "answered before its batch at {predicted} committed (high watermark {hwm})"
        );
        let after = service.status();
        let batch_end = after.next_offset;
        assert!(batch_end > predicted);
        // Requests here are sequential: when this request's batch is the only one proposed
        // since, it ends where the next proposal would start. (A tick may propose beside it: an
        // idle NoOp when a slow machine spaces the calls wider than the idle interval.)
        // Committed, not necessarily replayed yet: the driver sends a success answer the
        // moment the high watermark passes its batch.
        if after.proposals == before.proposals + 1 {
            assert!(
                hwm >= batch_end,
                "answered before its batch {predicted}..{batch_end} committed (high watermark {hwm}, replayed {})",
                after.committed_end
            );
        }
    }
    answer
}

/// Starts a 3-node cluster in `tmp` and waits for an active controller; returns the nodes,
/// the voters and the index of the active one.
async fn cluster(tmp: &Path) -> (Vec<Option<Node>>, VoterSet, usize) {
    cluster_tweaked(tmp, |_, _| {}).await
}

/// [`cluster`] with `tweak` applied to every node's driver and service configs.
async fn cluster_tweaked(
    tmp: &Path,
    tweak: impl Fn(&mut RaftDriverConfig, &mut ControllerServiceConfig),
) -> (Vec<Option<Node>>, VoterSet, usize) {
    let ids = [1u32, 2, 3];
    let nets: Vec<_> = bind_all(CLUSTER, &ids);
    let voters = voter_set(&ids, &nets);
    let mut nodes: Vec<Option<Node>> = Vec::new();
    for (&id, net) in ids.iter().zip(nets) {
        let dir = tmp.join(format!("node-{id}"));
        nodes.push(Some(
            Node::start_tweaked(id, &dir, net, &voters, &tweak).await,
        ));
    }
    wait_for("an active controller", || active_of(&nodes).is_some()).await;
    let l = active_of(&nodes).unwrap();
    (nodes, voters, l)
}

/// Stops a node cleanly; its service returns its (inactive) controller.
async fn stop(node: Node) -> Controller {
    let service = node.service.clone();
    let controller = node.node.shut_down().await;
    assert!(!controller.is_active());
    assert!(!service.status().running);
    controller
}

fn config_ok(answer: &ResponseFrame) -> bool {
    matches!(&answer.body, Ok(ResponseBody::IncrementalAlterConfigs(r)) if r.resources.iter().all(|t| t.1.is_ok()))
}

fn create(name: &str) -> RequestBody {
    RequestBody::CreateTopics(CreateTopicsRequest {
        topics: vec![CreatableTopic::new(name, 2, 1)],
        validate_only: false,
    })
}

/// The single topic result of a CreateTopics answer.
fn topic_result(answer: &ResponseFrame) -> Result<(), ApiError> {
    match &answer.body {
        Ok(ResponseBody::CreateTopics(r)) => {
            assert_eq!(r.topics.len(), 1);
            r.topics[0].1.clone().map(|_| ())
        }
        other => panic!("expected a CreateTopics response, got {other:?}"),
    }
}

/// The index of the node whose service is active (the newest epoch if two briefly are).
fn active_of(nodes: &[Option<Node>]) -> Option<usize> {
    (0..nodes.len())
        .filter(|&i| nodes[i].as_ref().is_some_and(Node::active))
        .max_by_key(|&i| nodes[i].as_ref().unwrap().service.status().active_epoch)
}

#[test]
fn services_serve_through_the_leader_answer_after_commit_and_fail_over() {
    // Over real disks and sockets: a follower answers NotController naming the leader and its
    // endpoint; a broker registers and is unfenced and a topic is created through the active
    // controller, each answered only once committed; the three images end identical; when the
    // leader stops (with a CreateTopics in flight, which may be answered with success only if
    // it committed), another node becomes active with the topic already in its image, rejects
    // the same name with TopicAlreadyExists and creates a new one.
    on_executor("controller-service-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (mut nodes, voters, l) = cluster(tmp.path()).await;
        let leader = nodes[l].as_ref().unwrap();
        assert!(leader.raft.status().is_leader(NodeId(leader.id)));

        // A follower redirects to the leader, with its endpoint. It learns the leader from
        // BeginQuorumEpoch or a fetch answer, which may come after the leader is active (the
        // leader and the other follower are a majority): until then it answers without a
        // hint, so ask until it names one.
        let f = (l + 1) % 3;
        let follower = nodes[f].as_ref().unwrap();
        let asked = Instant::now();
        let answer = loop {
            let answer = follower.call(1, RequestBody::DescribeCluster).await;
            if answer.body != Err(RpcError::NotController { leader: None }) {
                break answer;
            }
            assert!(
                asked.elapsed() < WAIT_MAX,
                "node {f} never learned the leader"
            );
            glommio::timer::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(
            answer.body,
            Err(RpcError::NotController {
                leader: Some(LeaderHint {
                    id: NodeId(leader.id),
                    host: "127.0.0.1".into(),
                    port: leader.addr.port(),
                })
            })
        );
        // Raft requests are not the controller's: not implemented, by name.
        let answer = leader.call(2, RequestBody::DescribeQuorum).await;
        assert_eq!(
            answer.body,
            Err(RpcError::NotImplemented {
                api: "DescribeQuorum".into()
            })
        );

        // Register broker 100, then heartbeat it caught up so it is unfenced.
        let answer = leader.call(3, heartbeat(100, None, LogOffset(0))).await;
        let Ok(ResponseBody::BrokerHeartbeat(reg)) = answer.body else {
            panic!("registration failed: {answer:?}");
        };
        assert_eq!(reg.target_state, TargetState::Fenced);
        let caught_up = leader.raft.status().raft.high_watermark;
        let answer = leader
            .call(4, heartbeat(100, Some(reg.broker_epoch), caught_up))
            .await;
        let Ok(ResponseBody::BrokerHeartbeat(hb)) = answer.body else {
            panic!("heartbeat failed: {answer:?}");
        };
        assert_eq!(hb.target_state, TargetState::Active, "{hb:?}");

        // A topic, answered after commit (`call` checks the high watermark); the controller
        // replays it right behind the answer.
        let answer = leader.call(5, create("orders")).await;
        assert_eq!(topic_result(&answer), Ok(()));
        let deadline = Instant::now() + Duration::from_secs(5);
        while leader
            .service
            .image()
            .topics
            .get_by_name("orders")
            .is_none()
        {
            assert!(
                Instant::now() < deadline,
                "the committed topic was never replayed"
            );
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }

        // Sequential config writes, each answered after its commit (latency printed).
        let mut latencies_us = Vec::new();
        for i in 0..100u64 {
            let t = Instant::now();
            let answer = leader
                .call(100 + i, set_retention("orders", 1_000 + i))
                .await;
            latencies_us.push(t.elapsed().as_micros());
            assert!(config_ok(&answer), "{answer:?}");
        }
        latencies_us.sort_unstable();
        eprintln!(
            "sequential config write through the service, 3 nodes: p50 {} us, p99 {} us",
            latencies_us[49], latencies_us[98]
        );
        // Concurrent writes: many proposals wait at once, each answered once its own batch
        // commits.
        let before = leader.service.status().committed_end;
        let writers: Vec<_> = (0..64u64)
            .map(|i| {
                let service = leader.service.clone();
                glommio::spawn_local(async move {
                    service
                        .call(RequestFrame {
                            correlation_id: 1_000 + i,
                            timeout_ms: 10_000,
                            body: set_retention("orders", 5_000 + i),
                        })
                        .await
                })
                .detach()
            })
            .collect();
        // A read arriving while they are in flight is answered only once they are committed.
        let start = Instant::now();
        while leader.service.status().next_offset == before {
            assert!(start.elapsed() < WAIT_MAX, "the writes were never proposed");
            futures_lite::future::yield_now().await;
        }
        let proposed = leader.service.status().next_offset;
        let read = leader
            .service
            .call(RequestFrame {
                correlation_id: 999,
                timeout_ms: 10_000,
                body: RequestBody::DescribeCluster,
            })
            .await;
        assert!(matches!(read.body, Ok(ResponseBody::DescribeCluster(_))));
        let status = leader.service.status();
        assert!(
            status.committed_end >= proposed,
            "a read answered at {} while {proposed} was proposed",
            status.committed_end
        );
        for (i, w) in writers.into_iter().enumerate() {
            let answer = w.await.unwrap();
            assert_eq!(answer.correlation_id, 1_000 + i as u64);
            assert!(config_ok(&answer), "{answer:?}");
        }
        // Committed when answered; the controller's replay follows right behind.
        assert!(leader.raft.status().raft.high_watermark >= before.add(64));
        wait_for("the leader to replay the writes", || {
            leader.service.status().committed_end >= before.add(64)
        })
        .await;
        assert_eq!(leader.service.status().waiting_requests, 0);
        // The driver sent the writes' success answers itself, as their batches committed.
        assert!(
            leader.raft.call_stats().released_at_commit >= 64,
            "{:?}",
            leader.raft.call_stats()
        );

        // Every node ends with the same image.
        let end = leader.raft.status().raft.high_watermark;
        wait_for("every service to replay the topic", || {
            nodes
                .iter()
                .flatten()
                .all(|n| n.service.status().committed_end >= end)
        })
        .await;
        let images: Vec<_> = nodes.iter().flatten().map(|n| n.service.image()).collect();
        assert_eq!(images[0].end_offset, end);
        assert!(images.iter().all(|i| *i == images[0]));
        assert_eq!(images[0].brokers.len(), 1);

        // Stop the leader with a CreateTopics in flight.
        let old = nodes[l].take().unwrap();
        let racing_done = Rc::new(Cell::new(false));
        let racing = {
            let (raft, service) = (old.raft.clone(), old.service.clone());
            let done = racing_done.clone();
            glommio::spawn_local(async move {
                let answer = call_checked(&raft, &service, 6, create("racing")).await;
                done.set(true);
                answer
            })
            .detach()
        };
        // Stop the moment its batch is proposed and waits for its commit (or it was answered).
        let start = Instant::now();
        while old.service.status().waiting_requests == 0 && !racing_done.get() {
            assert!(
                start.elapsed() < WAIT_MAX,
                "the racing request was never proposed"
            );
            futures_lite::future::yield_now().await;
        }
        let (old_id, old_dir, old_addr, old_service) =
            (old.id, old.dir.clone(), old.addr, old.service.clone());
        stop(old).await;
        let racing_answer = racing.await.unwrap();
        let racing_ok = match &racing_answer.body {
            Ok(_) => {
                assert_eq!(topic_result(&racing_answer), Ok(()));
                true
            }
            // A node going away names no leader (least of all itself).
            Err(RpcError::NotController { leader: None } | RpcError::Timeout { .. }) => false,
            other => panic!("unexpected answer to the racing request: {other:?}"),
        };
        // A stopped service answers NotController.
        let answer = old_service.call(RequestFrame {
            correlation_id: 7,
            timeout_ms: 0,
            body: RequestBody::DescribeCluster,
        });
        assert_eq!(
            answer.await.body,
            Err(RpcError::NotController { leader: None })
        );

        // Another node takes over with everything committed already in its image.
        wait_for("a new active controller", || active_of(&nodes).is_some()).await;
        let n = active_of(&nodes).unwrap();
        let new_leader = nodes[n].as_ref().unwrap();
        let image = new_leader.service.image();
        assert!(image.topics.get_by_name("orders").is_some());
        if racing_ok {
            assert!(
                image.topics.get_by_name("racing").is_some(),
                "a CreateTopics answered with success is missing after the failover"
            );
        }
        eprintln!(
            "racing request: {:?}; committed after the failover: {}",
            racing_answer.body.as_ref().err(),
            image.topics.get_by_name("racing").is_some()
        );
        let answer = new_leader.call(8, create("orders")).await;
        assert!(
            matches!(
                topic_result(&answer),
                Err(ApiError::TopicAlreadyExists { .. })
            ),
            "{answer:?}"
        );
        // The lease of broker 100 was extended at activation: it still serves a new topic.
        let answer = new_leader.call(9, create("payments")).await;
        assert_eq!(topic_result(&answer), Ok(()));

        // The two survivors agree (on everything committed: answers leave at the commit, the
        // replay follows).
        let end = new_leader.raft.status().raft.high_watermark;
        wait_for("the survivors to replay the new topic", || {
            nodes
                .iter()
                .flatten()
                .all(|n| n.service.status().committed_end >= end)
        })
        .await;
        let images: Vec<_> = nodes.iter().flatten().map(|n| n.service.image()).collect();
        assert_eq!(images.len(), 2);
        assert_eq!(images[0], images[1]);
        assert_eq!(
            images[0].topics.len(),
            2 + usize::from(images[0].topics.get_by_name("racing").is_some())
        );

        // The old leader restarts from its directory: its fresh service replays the whole log
        // from offset 0 and ends with the same image as the others.
        let net = rebind(CLUSTER, old_id, old_addr).await;
        nodes[l] = Some(Node::start(old_id, &old_dir, net, &voters).await);
        // On a loaded host a stalled executor can let an election happen meanwhile and its new
        // leader append more, so the three are compared where they all stand at one offset.
        let end = nodes[n].as_ref().unwrap().service.status().committed_end;
        let start = Instant::now();
        let restarted_image = loop {
            let statuses: Vec<_> = nodes.iter().flatten().map(|n| n.service.status()).collect();
            let images: Vec<_> = statuses
                .iter()
                .map(|s| s.committed_image.clone().unwrap())
                .collect();
            let ends: Vec<_> = statuses.iter().map(|s| s.committed_end).collect();
            if ends.iter().all(|e| *e >= end && *e == ends[0])
                && images.iter().all(|i| *i == images[0])
            {
                break images[l].clone();
            }
            let differing: Vec<_> = images
                .iter()
                .map(|i| i.differing_parts(&images[0]))
                .collect();
            assert!(
                start.elapsed() < WAIT_MAX,
                "the restarted node never agreed with the others: committed ends {ends:?} \
                 (wanted {end} or more), parts differing from the first node's: {differing:?}"
            );
            glommio::timer::sleep(Duration::from_millis(5)).await;
        };
        // Unless the leader appended meanwhile (an expired lease fences), it is the survivors'
        // image from before the restart.
        if restarted_image.end_offset == images[0].end_offset {
            assert_eq!(
                restarted_image.differing_parts(&images[0]),
                Vec::<&str>::new()
            );
        }
        assert!(restarted_image.topics.get_by_name("payments").is_some());

        for node in nodes.into_iter().flatten() {
            stop(node).await;
        }
    });
}

#[test]
fn a_leader_without_a_quorum_never_acknowledges_its_proposal() {
    // With both followers stopped, the leader proposes a registration that cannot commit: the
    // request is answered Timeout (or NotController once the leader gives up its epoch), never
    // with success, and the service's committed end does not reach the batch.
    on_executor("controller-service-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (mut nodes, _voters, l) = cluster(tmp.path()).await;
        let leader = nodes[l].take().unwrap();
        for node in nodes.into_iter().flatten() {
            stop(node).await;
        }
        let predicted = leader.service.status().next_offset;
        let answer = leader
            .service
            .call(RequestFrame {
                correlation_id: 11,
                timeout_ms: 100,
                body: heartbeat(200, None, LogOffset(0)),
            })
            .await;
        eprintln!("registration without a quorum: {:?}", answer.body);
        match answer.body {
            Err(RpcError::Timeout { timeout_ms: 100 }) => {
                assert_eq!(leader.raft.call_stats().timeouts, 1);
            }
            Err(RpcError::NotController { .. }) => {}
            other => panic!("a proposal without a quorum was answered {other:?}"),
        }
        let status = leader.service.status();
        assert!(status.committed_end <= predicted, "{status:?}");
        assert!(leader.raft.status().raft.high_watermark <= predicted);
        assert!(status
            .committed_image
            .as_ref()
            .unwrap()
            .brokers
            .get(NodeId(200))
            .is_none());
        stop(leader).await;
    });
}

#[test]
fn requests_arriving_together_share_a_batch_and_see_each_other() {
    // 64 requests queued at once (two creations of one topic among 62 config writes) are
    // handled in order against the image holding the ones before them — the second creation
    // of the name gets TopicAlreadyExists — and go out in a few batches, not 64; every
    // success is answered only once its batch committed, and the committed image holds
    // every write.
    on_executor("controller-service-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        // No idle NoOp: on a loaded machine a commit can take longer than the idle interval,
        // and a NoOp proposed then would sit past the batches this test checks.
        let (mut nodes, _voters, l) = cluster_tweaked(tmp.path(), |_, service| {
            service.idle_noop_interval_ms = 3_600_000;
        })
        .await;
        let leader = nodes[l].take().unwrap();
        let answer = leader.call(1, heartbeat(100, None, LogOffset(0))).await;
        let Ok(ResponseBody::BrokerHeartbeat(reg)) = answer.body else {
            panic!("registration failed: {answer:?}");
        };
        let caught_up = leader.raft.status().raft.high_watermark;
        let answer = leader
            .call(2, heartbeat(100, Some(reg.broker_epoch), caught_up))
            .await;
        assert!(matches!(answer.body, Ok(ResponseBody::BrokerHeartbeat(_))));
        let answer = leader.call(3, create("orders")).await;
        assert_eq!(topic_result(&answer), Ok(()));

        let before = leader.service.status();
        let tasks: Vec<_> = (0..64u64)
            .map(|i| {
                let service = leader.service.clone();
                let body = match i {
                    10 | 20 => create("twice"),
                    _ => set_retention("orders", 5_000 + i),
                };
                glommio::spawn_local(async move {
                    let answer = service
                        .call(RequestFrame {
                            correlation_id: 1_000 + i,
                            timeout_ms: 10_000,
                            body,
                        })
                        .await;
                    (i, answer)
                })
            })
            .collect();
        let mut creations = Vec::new();
        for t in tasks {
            let (i, answer) = t.await;
            assert_eq!(answer.correlation_id, 1_000 + i);
            match i {
                10 | 20 => creations.push(topic_result(&answer)),
                _ => assert!(config_ok(&answer), "{answer:?}"),
            }
        }
        assert_eq!(creations[0], Ok(()));
        assert!(
            matches!(creations[1], Err(ApiError::TopicAlreadyExists { .. })),
            "{creations:?}"
        );
        let after = leader.service.status();
        let batches = after.proposals - before.proposals;
        let requests = after.proposed_requests - before.proposed_requests;
        eprintln!("64 queued requests: {requests} proposed in {batches} batches");
        assert_eq!(
            requests, 63,
            "every write but the refused creation proposes"
        );
        assert!(batches <= 8, "{batches} batches for 63 requests");
        // Answered at commit: the high watermark covers every batch; the replay follows.
        let hwm = leader.raft.status().raft.high_watermark;
        assert!(hwm >= after.next_offset, "{hwm} < {}", after.next_offset);
        wait_for("the leader to replay its batches", || {
            leader.service.status().committed_end >= after.next_offset
        })
        .await;
        let last = leader
            .call(
                9_999,
                RequestBody::DescribeConfigs(
                    corum_controller::control::config_control::DescribeConfigsRequest::all(vec![
                        corum_controller::image::configs::ConfigResource::topic("orders"),
                    ]),
                ),
            )
            .await;
        assert!(format!("{last:?}").contains("\"5063\""), "{last:?}");
        for node in nodes.into_iter().flatten() {
            stop(node).await;
        }
        stop(leader).await;
    });
}

#[test]
fn a_flooded_leader_without_a_quorum_pushes_back_and_recovers() {
    // With both followers stopped and room for only 8 uncommitted records, 300 concurrent
    // writes reach the leader: the driver admits what fits, the rest wait in bounded queues
    // (port, call queue) while the service waits to send. Nothing deadlocks: every call is
    // answered by its deadline (Timeout or NotController), none with success, the log never
    // holds more uncommitted records than one admitted batch past the limit, and once the
    // followers return the quorum commits again.
    on_executor("controller-service-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (mut nodes, voters, l) = cluster_tweaked(tmp.path(), |driver, service| {
            driver.uncommitted_records_max = 8;
            driver.call_queue_capacity = 4;
            service.batch_records_max = 4;
        })
        .await;
        let leader = nodes[l].take().unwrap();
        let mut stopped = Vec::new();
        for node in nodes.into_iter().flatten() {
            stopped.push((node.id, node.dir.clone(), node.addr));
            stop(node).await;
        }
        let before = leader.raft.status();
        let calls: Vec<_> = (0..300u64)
            .map(|i| {
                let service = leader.service.clone();
                glommio::spawn_local(async move {
                    service
                        .call(RequestFrame {
                            correlation_id: i,
                            timeout_ms: 300,
                            body: alter_broker(1_000 + i as u32),
                        })
                        .await
                })
                .detach()
            })
            .collect();
        let started = Instant::now();
        let mut outcomes = (0, 0);
        for c in calls {
            let answer = c.await.unwrap();
            match answer.body {
                Err(RpcError::Timeout { .. }) => outcomes.0 += 1,
                Err(RpcError::NotController { .. }) => outcomes.1 += 1,
                other => panic!("a write without a quorum was answered {other:?}"),
            }
        }
        eprintln!(
            "300 writes without a quorum: {} Timeout, {} NotController in {:?}",
            outcomes.0,
            outcomes.1,
            started.elapsed()
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "answers were held up"
        );
        let s = leader.raft.status();
        assert_eq!(s.raft.high_watermark, before.raft.high_watermark);
        // Admitted while fewer than 8 were uncommitted, a batch of at most 4 at a time.
        let uncommitted = s.log_end_offset.get() - s.raft.high_watermark.get();
        assert!(uncommitted <= 8 + 3, "{uncommitted} uncommitted records");
        assert!(s.proposals_appended > before.proposals_appended);
        assert_eq!(s.calls_waiting, 0, "every call left the table");

        // The followers return: the quorum commits again and a new write succeeds.
        let mut nodes = vec![Some(leader)];
        for (id, dir, addr) in stopped {
            let net = rebind(CLUSTER, id, addr).await;
            nodes.push(Some(Node::start(id, &dir, net, &voters).await));
        }
        let start = Instant::now();
        loop {
            assert!(
                start.elapsed() < WAIT_MAX,
                "no write succeeded after the heal"
            );
            let Some(a) = active_of(&nodes) else {
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let answer = nodes[a]
                .as_ref()
                .unwrap()
                .call(7_777, alter_broker(42))
                .await;
            if config_ok(&answer) {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        for node in nodes.into_iter().flatten() {
            stop(node).await;
        }
    });
}

/// Sets `log.retention.ms` of broker `id` (a config write that needs no topic or broker).
fn alter_broker(id: u32) -> RequestBody {
    use corum_controller::control::config_control::{
        AlterConfigOp, AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
    };
    RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource: corum_controller::image::configs::ConfigResource {
                resource_type: corum_controller::records::ConfigResourceType::Broker,
                name: id.to_string(),
            },
            configs: vec![AlterableConfig {
                key: "log.retention.ms".into(),
                op: AlterConfigOp::Set,
                value: "1000".into(),
            }],
        }],
        validate_only: false,
    })
}

/// An IncrementalAlterConfigs of the cluster-wide broker default `log.retention.ms` whose
/// value is padded with `padding_bytes` spaces: the controller trims a number before parsing
/// it, so the request is valid and its record is as large as the test needs.
fn padded_retention(padding_bytes: usize) -> RequestBody {
    crate::common::set_cluster_default_retention(&format!("{}60000", " ".repeat(padding_bytes)))
}

#[test]
fn oversized_and_refused_proposals_get_their_own_errors() {
    // On a single voter whose Raft batches hold 64 KiB while its service batches 1 MiB (limits
    // a node's own configuration never sets apart): a request whose records take more than
    // the service's batch limit is answered RecordsTooLarge with its size and the limit; one
    // between the two limits reaches the Raft core, which refuses it: ProposalRefused; the
    // controller then activates again and serves an ordinary write.
    on_executor("controller-service-test", TEST_DEADLINE, || async {
        const RAFT_BATCH_BYTES_MAX: usize = 64 << 10;
        let tmp = tempfile::tempdir().unwrap();
        let mut nets = bind_all(CLUSTER, &[1]);
        let voters = voter_set(&[1], &nets);
        let net = nets.pop().unwrap();
        let service_batch_bytes_max = crate::common::service_config(1, &voters).batch_bytes_max;
        assert!(service_batch_bytes_max > 2 * RAFT_BATCH_BYTES_MAX);
        let node = crate::common::start_controller_node_tweaked(
            1,
            &tmp.path().join("node-1"),
            net,
            &voters,
            true,
            corum_controller::ControllerConfig::default(),
            |driver, _| driver.raft.batch_bytes_max = RAFT_BATCH_BYTES_MAX,
        )
        .await;
        let active = || node.service.status().active_epoch.is_some();
        wait_for("the single voter to activate", active).await;

        let answer = call_checked(&node.raft, &node.service, 1, padded_retention(2 << 20)).await;
        match answer.body {
            Err(RpcError::RecordsTooLarge { bytes, max }) => {
                assert!(bytes > 2 << 20, "{bytes}");
                assert_eq!(max, service_batch_bytes_max as u64);
            }
            other => panic!("a 2 MiB record answered {other:?}"),
        }

        let answer = call_checked(&node.raft, &node.service, 2, padded_retention(128 << 10)).await;
        match answer.body {
            Err(RpcError::ProposalRefused { reason }) => {
                assert!(reason.contains("exceeds the limit"), "{reason}")
            }
            other => panic!("a 128 KiB record answered {other:?}"),
        }

        // The service hears of the refusal, resigns (reverting the refused records) and
        // activates again.
        wait_for("the controller to activate again", || {
            let s = node.service.status();
            s.activations >= 2 && s.active_epoch.is_some()
        })
        .await;
        let answer = call_checked(&node.raft, &node.service, 3, padded_retention(0)).await;
        assert!(config_ok(&answer), "{answer:?}");
        node.shut_down().await;
    });
}
