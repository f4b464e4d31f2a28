//! A real 3-voter quorum of `corum run` processes on loopback: elections, every RPC kind,
//! SIGKILL and SIGTERM of the leader under load, a follower's restart and catch-up, and broker
//! fencing. Clients are `corum loadgen` / `corum quorum describe` children and in-process
//! `corum-client` clients. Every wait polls with a deadline; every child is killed by a guard.

use std::process::Output;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::common::*;

#[path = "../../../controller/node/tests/common/requests.rs"]
mod requests;
use corum_client::{BrokerSession, ClientConfig, ControllerClient, MetadataFollower, ReplicaKey};
use corum_controller::control::cluster_control::UnregisterBrokerRequest;
use corum_controller::control::config_control::ConfigSource;
use corum_controller::control::feature_control::{FeatureUpdate, UpdateFeaturesRequest};
use corum_controller::control::producer_id_control::AllocateProducerIdsRequest;
use corum_controller::control::replication_control::{
    AlterIsrRequest, CreatableTopic, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, ElectLeadersRequest, ElectionType, IsrUpdate, PartitionsIncrease,
};
use corum_controller::image::ConfigResource;
use corum_controller::records::ListenerV1;
use corum_controller::{LeaderEpoch, PartitionEpoch, PartitionId, TargetState};
use corum_node::{RequestBody, ResponseBody};
use corum_raft::message::{FetchRequest, FetchResult};
use corum_types::{Epoch, LogOffset, NodeId, Uuid};
use requests::heartbeat;

const CALL_DEADLINE: Duration = Duration::from_secs(30);
const ELECTION_WAIT: Duration = Duration::from_secs(20);

fn client_config(c: &LocalCluster) -> ClientConfig {
    ClientConfig {
        request_timeout: Duration::from_secs(3),
        retry_deadline: Duration::from_secs(10),
        ..ClientConfig::new(client_addrs(c))
    }
}

/// Waits for a leader among `ids` and returns (leader, epoch).
fn leader(c: &LocalCluster, ids: &[u32]) -> (u32, u64) {
    let bootstrap = bootstrap_of(c, ids);
    let d = wait_until("a leader", ELECTION_WAIT, || describe(&bootstrap, 2_000));
    leader_of(&d)
}

/// A 3-node cluster elects a leader, `quorum describe` reports it with every voter, and the
/// leader serves every request kind through the leader-following client.
#[test]
fn three_nodes_elect_and_serve_every_request_kind() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = start_cluster(tmp.path(), &[]);
    let (l, epoch) = leader(&c, &c.ids());
    assert!(epoch >= 1);
    let d = describe(&c.bootstrap(), 5_000).unwrap();
    assert_eq!(d["node_id"].as_u64(), Some(u64::from(l)));
    let voters = voters_of(&d);
    assert_eq!(voters, [1, 2, 3]);
    let status = corum(
        &[
            "quorum",
            "describe",
            "--bootstrap",
            &c.bootstrap(),
            "--status",
        ],
        Duration::from_secs(20),
    );
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{text}");
    assert!(text.contains(&format!("LeaderId:        {l}")), "{text}");
    // Each voter with its directory id (the leader learns a static voter's from its
    // fetches) and its controller listener.
    for n in &c.nodes {
        assert!(
            text.contains(&format!("\"endpoints\": [\"CONTROLLER://{}\"]", n.raft)),
            "{text}"
        );
    }
    assert!(text.contains("CurrentVoters:   [{\"id\": 1, "), "{text}");
    assert!(
        text.contains(&format!("ClusterId:       {}", c.cluster_id)),
        "{text}"
    );

    let config = client_config(&c);
    let kinds = on_executor(Duration::from_secs(50), move || async move {
        let client = ControllerClient::connect(config).await.unwrap();
        let call = |body: RequestBody| {
            let client = client.clone();
            async move {
                let kind = body.kind();
                match client.call(body).await {
                    Ok(r) => {
                        assert_eq!(r.kind(), kind, "answer kind");
                        r
                    }
                    Err(e) => panic!("{kind}: {e}"),
                }
            }
        };
        let mut served = Vec::new();
        // Three brokers register and report the high watermark as their applied offset, so
        // they are caught up and get unfenced.
        let mut epochs = Vec::new();
        for id in [101u32, 102, 103] {
            let ResponseBody::BrokerHeartbeat(r) = call(heartbeat(id, None, LogOffset(0))).await
            else {
                unreachable!()
            };
            epochs.push(r.broker_epoch);
        }
        served.push("BrokerHeartbeat");
        let start = Instant::now();
        loop {
            let ResponseBody::DescribeQuorum(q) = call(RequestBody::DescribeQuorum).await else {
                unreachable!()
            };
            let mut active = 0;
            for (i, id) in [101u32, 102, 103].into_iter().enumerate() {
                let ResponseBody::BrokerHeartbeat(r) =
                    call(heartbeat(id, Some(epochs[i]), q.high_watermark)).await
                else {
                    unreachable!()
                };
                active += usize::from(r.target_state == TargetState::Active);
            }
            if active == 3 {
                break;
            }
            assert!(start.elapsed() < CALL_DEADLINE, "brokers never unfenced");
            glommio::timer::sleep(Duration::from_millis(20)).await;
        }
        served.push("DescribeQuorum");
        // An observer's first fetch from offset 0 gets the log's first batches.
        let ResponseBody::DescribeQuorum(q) = call(RequestBody::DescribeQuorum).await else {
            unreachable!()
        };
        let ResponseBody::Fetch(fetched) = call(RequestBody::Fetch(FetchRequest {
            epoch: q.leader_epoch,
            replica: ReplicaKey {
                id: NodeId(900),
                directory_id: Uuid([9; 16]),
            },
            fetch_offset: LogOffset(0),
            last_fetched_epoch: Epoch(0),
            high_watermark: LogOffset(0),
            wait_max_ms: 0,
        }))
        .await
        else {
            unreachable!()
        };
        assert_eq!(fetched.leader, q.leader_id);
        match &fetched.result {
            FetchResult::Batches { batches, .. } => assert!(!batches.is_empty(), "{fetched:?}"),
            other => panic!("fetch from 0 answered {other:?}"),
        }
        served.push("Fetch");
        let ResponseBody::CreateTopics(t) = call(RequestBody::CreateTopics(CreateTopicsRequest {
            topics: vec![CreatableTopic::new("orders", 2, 3)],
            validate_only: false,
        }))
        .await
        else {
            unreachable!()
        };
        let created = t.topics[0].1.as_ref().expect("topic created");
        served.push("CreateTopics");
        let ResponseBody::CreatePartitions(p) =
            call(RequestBody::CreatePartitions(CreatePartitionsRequest {
                topics: vec![PartitionsIncrease {
                    name: "orders".into(),
                    count: 3,
                    assignments: vec![],
                }],
                validate_only: false,
            }))
            .await
        else {
            unreachable!()
        };
        assert_eq!(p.topics[0].1, Ok(3));
        served.push("CreatePartitions");
        // AlterIsr from a broker with made-up epochs: answered per partition (an error
        // there is fine; the request kind is served).
        call(RequestBody::AlterIsr(AlterIsrRequest {
            broker_id: NodeId(101),
            broker_epoch: epochs[0],
            partitions: vec![IsrUpdate {
                topic_id: created.topic_id,
                partition_id: PartitionId(0),
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(0),
                new_isr: vec![NodeId(101), NodeId(102), NodeId(103)],
            }],
        }))
        .await;
        served.push("AlterIsr");
        call(RequestBody::ElectLeaders(ElectLeadersRequest {
            election_type: ElectionType::Preferred,
            partitions: None,
        }))
        .await;
        served.push("ElectLeaders");
        let ResponseBody::IncrementalAlterConfigs(a) = call(RequestBody::IncrementalAlterConfigs(
            corum_controller::control::config_control::IncrementalAlterConfigsRequest {
                resources: vec![
                    corum_controller::control::config_control::AlterConfigsResource {
                        resource: ConfigResource::topic("orders"),
                        configs: vec![corum_controller::control::config_control::AlterableConfig {
                            key: "retention.ms".into(),
                            op: corum_controller::control::config_control::AlterConfigOp::Set,
                            value: "3600000".into(),
                        }],
                    },
                ],
                validate_only: false,
            },
        ))
        .await
        else {
            unreachable!()
        };
        assert_eq!(a.resources[0].1, Ok(()));
        served.push("IncrementalAlterConfigs");
        let configs = client
            .describe_config(ConfigResource::topic("orders"))
            .await
            .unwrap();
        let retention = configs.iter().find(|c| c.name == "retention.ms").unwrap();
        assert_eq!(
            (retention.value.as_deref(), retention.source),
            (Some("3600000"), ConfigSource::DynamicTopic)
        );
        served.push("DescribeConfigs");
        call(RequestBody::UpdateFeatures(UpdateFeaturesRequest {
            updates: vec![FeatureUpdate {
                name: "metadata.version".into(),
                min_level: 1,
                max_level: 1,
                allow_downgrade: false,
            }],
            validate_only: true,
        }))
        .await;
        served.push("UpdateFeatures");
        let ResponseBody::AllocateProducerIds(ids) = call(RequestBody::AllocateProducerIds(
            AllocateProducerIdsRequest {
                broker_id: NodeId(101),
                broker_epoch: epochs[0],
            },
        ))
        .await
        else {
            unreachable!()
        };
        assert!(ids.count > 0);
        served.push("AllocateProducerIds");
        let ResponseBody::DescribeCluster(dc) = call(RequestBody::DescribeCluster).await else {
            unreachable!()
        };
        assert_eq!(dc.brokers.len(), 3);
        assert!(dc.brokers.iter().all(|b| !b.fenced));
        assert_eq!((dc.topic_count, dc.partition_count), (1, 3));
        served.push("DescribeCluster");
        let ResponseBody::DeleteTopics(del) =
            call(RequestBody::DeleteTopics(DeleteTopicsRequest {
                names: vec!["orders".into()],
            }))
            .await
        else {
            unreachable!()
        };
        assert_eq!(del.topics[0].1, Ok(created.topic_id));
        served.push("DeleteTopics");
        // A broker is fenced (it asks to be) before it may be unregistered.
        let ResponseBody::DescribeQuorum(q) = call(RequestBody::DescribeQuorum).await else {
            unreachable!()
        };
        let mut fence = heartbeat(103, Some(epochs[2]), q.high_watermark);
        if let RequestBody::BrokerHeartbeat(h) = &mut fence {
            h.want_fence = true;
        }
        let ResponseBody::BrokerHeartbeat(h) = call(fence).await else {
            unreachable!()
        };
        assert_eq!(h.target_state, TargetState::Fenced);
        call(RequestBody::UnregisterBroker(UnregisterBrokerRequest {
            broker_id: NodeId(103),
        }))
        .await;
        served.push("UnregisterBroker");
        served
    });
    assert_eq!(kinds.len(), 14, "{kinds:?}");
}

/// SIGKILL of the leader while `corum loadgen --workload configs --verify` runs: the load
/// generator exits 0 with every acknowledged write read back, and a new leader acknowledges
/// writes within the election timeout plus a margin.
#[test]
fn leader_sigkill_under_verified_load_loses_nothing() {
    const ELECTION_TIMEOUT_MS: u64 = 1_000;
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let timeout = ELECTION_TIMEOUT_MS.to_string();
    let mut c = start_cluster(
        tmp.path(),
        &[
            ("controller.quorum.election.timeout.ms", &timeout),
            ("controller.quorum.fetch.timeout.ms", &timeout),
        ],
    );
    let (l, epoch) = leader(&c, &c.ids());
    let load = verified_load(&c, 6);
    let killed_at = Instant::now();
    c.kill(l);
    let others: Vec<u32> = c.ids().into_iter().filter(|&id| id != l).collect();
    let config = ClientConfig::new(others.iter().map(|&id| c.node(id).client).collect());
    let failover = on_executor(Duration::from_secs(30), move || async move {
        let client = ControllerClient::connect(config).await.unwrap();
        loop {
            let r = client
                .alter_config(
                    corum_controller::image::ConfigResource {
                        resource_type: corum_controller::records::ConfigResourceType::Broker,
                        name: "77".into(),
                    },
                    "log.retention.ms",
                    &killed_at.elapsed().as_micros().to_string(),
                )
                .await;
            if r.is_ok() {
                return killed_at.elapsed();
            }
            assert!(
                killed_at.elapsed() < Duration::from_secs(20),
                "no write acknowledged: {r:?}"
            );
        }
    });
    let (new_leader, new_epoch) = leader(&c, &others);
    assert_ne!(new_leader, l);
    assert!(new_epoch > epoch);
    eprintln!(
        "leader SIGKILL to the next acknowledged write: {} ms",
        failover.as_millis()
    );
    // Followers notice at once (the killed leader's port refuses) and campaign within a
    // quarter election timeout, or, without that report, after the fetch timeout plus up to a
    // quarter election timeout; the bound is the latter's, with room for a split vote (one
    // more election timeout) and a loaded 2-core machine.
    let bound = Duration::from_millis(3 * ELECTION_TIMEOUT_MS + 1_000);
    assert!(
        failover < bound,
        "failover took {failover:?} (bound {bound:?})"
    );

    verified_load_lost_nothing(load);
}

/// `corum loadgen --workload history` records config sets, deletes and reads on 3 keys and
/// topic creates, deletes and describes of 2 names from 8 clients while the leader is
/// SIGKILLed; `corum check-history` finds the history linearizable, with no acknowledged write
/// lost. The same history with one read's value changed to one nobody wrote is a violation
/// (the check is not vacuous on this history).
#[test]
fn a_history_recorded_through_a_leader_sigkill_checks_linearizable() {
    const ELECTION_TIMEOUT_MS: &str = "1000";
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_cluster(
        tmp.path(),
        &[
            ("controller.quorum.election.timeout.ms", ELECTION_TIMEOUT_MS),
            ("controller.quorum.fetch.timeout.ms", ELECTION_TIMEOUT_MS),
        ],
    );
    let (l, _) = leader(&c, &c.ids());
    let file = tmp.path().join("history.jsonl");
    let file_arg = file.display().to_string();
    let load = spawn_loadgen(
        &c.bootstrap(),
        &[
            "--workload",
            "history",
            "--history",
            &file_arg,
            "--clients",
            "8",
            "--keys",
            "3",
            "--topics",
            "2",
            "--seed",
            "7",
            "--duration",
            "6",
            "--request-timeout-ms",
            "2000",
        ],
    );
    std::thread::sleep(Duration::from_secs(3));
    c.kill(l);
    let out = load.wait(Duration::from_secs(60));
    let report = loadgen_json(&out);
    assert!(
        out.status.success(),
        "loadgen failed: {report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ops = report["history_ops"].as_u64().unwrap();
    assert!(ops >= 100, "{report}");
    let text = std::fs::read_to_string(&file).unwrap();
    let reads_with_values = text
        .lines()
        .filter(|l| l.contains(r#""kind":"config_read""#) && l.contains(r#""outcome":{"value""#))
        .count();
    assert!(reads_with_values >= 5, "too few reads saw a value:\n{text}");
    eprintln!(
        "history: {ops} operations, {} unknown, {} failed, {reads_with_values} reads of a value",
        text.matches(r#""outcome":"unknown""#).count(),
        text.matches(r#""outcome":{"failed""#).count(),
    );
    let check = corum(&["check-history", &file_arg], Duration::from_secs(120));
    assert!(
        check.status.success(),
        "check-history: {}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    // One read's value replaced by a value nobody wrote.
    let mut tampered = String::new();
    let mut changed = false;
    for line in text.lines() {
        if !changed
            && line.contains(r#""kind":"config_read""#)
            && line.contains(r#""outcome":{"value""#)
        {
            let at = line.find(r#""outcome":{"value":""#).unwrap();
            tampered.push_str(&line[..at]);
            tampered.push_str(r#""outcome":{"value":"999999999999"}}"#);
            changed = true;
        } else {
            tampered.push_str(line);
        }
        tampered.push('\n');
    }
    let bad = tmp.path().join("tampered.jsonl");
    std::fs::write(&bad, tampered).unwrap();
    let check = corum(
        &["check-history", &bad.display().to_string()],
        Duration::from_secs(120),
    );
    assert_eq!(
        check.status.code(),
        Some(1),
        "a read of a value never written passed: {}",
        String::from_utf8_lossy(&check.stdout)
    );
}

/// A SIGKILLed idle follower restarts, recovers its log and catches up with what was
/// written while it was down: the leader reports it with lag 0 at or past that high watermark.
#[test]
fn killed_follower_restarts_and_catches_up() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_cluster(tmp.path(), &[]);
    let (l, _) = leader(&c, &c.ids());
    let f = c.ids().into_iter().find(|&id| id != l).unwrap();
    c.kill(f);
    let others: Vec<u32> = c.ids().into_iter().filter(|&id| id != f).collect();
    let out = spawn_loadgen(
        &bootstrap_of(&c, &others),
        &[
            "--workload",
            "configs",
            "--clients",
            "8",
            "--duration",
            "1.5",
        ],
    )
    .wait(Duration::from_secs(30));
    restart_and_catch_up(&mut c, f, &others, &out);
}

/// A snapshot every 64 KiB of records, 1 MiB segments, deleted as soon as a snapshot covers
/// them: the snapshot and compaction paths run many times in a short test.
const SNAPSHOT_OFTEN: [(&str, &str); 3] = [
    ("metadata.log.max.record.bytes.between.snapshots", "65536"),
    ("metadata.log.segment.bytes", "1048576"),
    ("metadata.max.retention.bytes", "0"),
];

/// With a small snapshot interval and 1 MiB segments, the nodes write snapshots and delete
/// whole segments below them; a follower SIGKILLed before that restarts behind the leader's
/// log start, installs the leader's snapshot and catches up; a verified load loses nothing;
/// new brokers, whose observer starts at offset 0, install the snapshot and get unfenced; a
/// node restarted afterwards starts from its own snapshot.
#[test]
fn snapshots_bound_the_log_and_a_follower_behind_them_installs_one() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_cluster(tmp.path(), &SNAPSHOT_OFTEN);
    let (l, _) = leader(&c, &c.ids());
    let f = c.ids().into_iter().find(|&id| id != l).unwrap();
    c.kill(f);
    let others: Vec<u32> = c.ids().into_iter().filter(|&id| id != f).collect();
    let out = spawn_loadgen(
        &bootstrap_of(&c, &others),
        &[
            "--workload",
            "configs",
            "--clients",
            "16",
            "--duration",
            "3",
            "--verify",
        ],
    )
    .wait(Duration::from_secs(60));
    let report = loadgen_json(&out);
    assert_eq!(report["lost"].as_u64(), Some(0), "{report}");
    let slot = |id: u32| c.nodes.iter().find(|n| n.id == id).unwrap().data.clone();
    let (l, _) = leader(&c, &others);
    let snapshots: Vec<String> = std::fs::read_dir(slot(l).join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !snapshots.is_empty() && snapshots.len() <= 2,
        "the leader keeps its newest snapshots: {snapshots:?}"
    );
    let first_segment = slot(l).join("@metadata-0").join(format!("{:020}.log", 0));
    assert!(
        !first_segment.exists(),
        "the first segment is below a snapshot and deleted"
    );
    let info = corum(
        &["info", "--dir", &slot(l).display().to_string()],
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(info.status.success() && text.contains(": loads"), "{text}");
    restart_and_catch_up(&mut c, f, &others, &out);
    assert!(
        c.log_tail(f).contains("snapshot installed from the leader"),
        "node {f} installed no snapshot:\n{}",
        c.log_tail(f)
    );
    // New brokers follow the log from offset 0, which is gone: their observer installs the
    // leader's snapshot, catches up and gets them unfenced.
    let out = spawn_loadgen(
        &c.bootstrap(),
        &[
            "--workload",
            "brokers",
            "--brokers",
            "20",
            "--heartbeat-interval-ms",
            "200",
            "--duration",
            "1",
        ],
    )
    .wait(Duration::from_secs(60));
    let report = loadgen_json(&out);
    assert!(out.status.success(), "{report}");
    assert_eq!(report["unfenced"].as_u64(), Some(20), "{report}");
    // The leader restarts from its own snapshot (SIGTERM: a clean handover). Stopped, its
    // directory shows the image offline: its snapshot, then its log after it.
    let online = corum(
        &["shell", "--bootstrap", &c.bootstrap(), "--json"],
        Duration::from_secs(30),
    );
    let online: serde_json::Value = serde_json::from_slice(&online.stdout).unwrap();
    c.terminate(l, Duration::from_secs(15)).unwrap();
    let offline = corum(
        &[
            "shell",
            "--dir",
            &c.node(l).data.display().to_string(),
            "--json",
        ],
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&offline.stdout);
    assert!(
        offline.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&offline.stderr)
    );
    let offline: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(offline["source"], "directory", "{offline}");
    assert!(offline["snapshot_end"].as_u64().unwrap() > 0, "{offline}");
    assert_eq!(offline["end_offset"], offline["log_end"], "{offline}");
    assert_eq!(offline["brokers"], online["brokers"]);
    assert_eq!(offline["configs"], online["configs"]);
    c.start(l)
        .unwrap_or_else(|e| panic!("restarting node {l}: {e:#}\n{}", logs(&c)));
    let hwm = describe(&c.bootstrap(), 5_000).unwrap()["high_watermark"]
        .as_u64()
        .unwrap();
    wait_for_catch_up(&c, l, hwm);
    assert!(
        c.log_tail(l)
            .contains("controller state loaded from a snapshot"),
        "node {l} did not start from its snapshot:\n{}",
        c.log_tail(l)
    );
}

/// Snapshots and compaction under a crash: with a snapshot every 64 KiB of records and 1 MiB
/// segments deleted as soon as a snapshot covers them, the leader is SIGKILLed under a verified
/// load after it wrote snapshots: nothing acknowledged is lost, and the killed node restarts
/// (from its newest snapshot) and catches up with the new leader, whose log start has moved.
#[test]
fn leader_sigkill_with_snapshots_and_compaction_loses_nothing() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_cluster(
        tmp.path(),
        &[
            ("controller.quorum.election.timeout.ms", "1000"),
            ("controller.quorum.fetch.timeout.ms", "1000"),
            SNAPSHOT_OFTEN[0],
            SNAPSHOT_OFTEN[1],
            SNAPSHOT_OFTEN[2],
        ],
    );
    let (l, _) = leader(&c, &c.ids());
    let load = verified_load(&c, 6);
    let store = c.node(l).data.join("snapshots");
    // A complete snapshot: a `.part` file is one being written, and a kill before its
    // rename leaves the node nothing to restart from.
    wait_until("a snapshot on the leader", Duration::from_secs(15), || {
        std::fs::read_dir(&store)
            .ok()?
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().ends_with(".snapshot"))
            .then_some(())
    });
    c.kill(l);
    let others: Vec<u32> = c.ids().into_iter().filter(|&id| id != l).collect();
    verified_load_lost_nothing(load);
    let hwm = describe(&bootstrap_of(&c, &others), 5_000).unwrap()["high_watermark"]
        .as_u64()
        .unwrap();
    c.start(l)
        .unwrap_or_else(|e| panic!("restarting node {l}: {e:#}\n{}", logs(&c)));
    wait_for_catch_up(&c, l, hwm);
    let tail = c.log_tail(l);
    let restart = tail
        .lines()
        .rev()
        .find(|line| line.contains("metadata log recovered"))
        .unwrap_or_default();
    assert!(
        restart.contains("snapshot_end=") && !restart.contains("snapshot_end=@0 "),
        "node {l} did not restart from a snapshot:\n{tail}"
    );
}

/// An idle quorum moves its high watermark only while `metadata.max.idle.interval.ms` is on:
/// the active controller appends a NoOp every interval (100 ms here) when nothing else is
/// written, and none with 0. The "none" half is judged over a window that ends with an event,
/// not a sleep: a silent broker's session (1.5 s) expiring, which the same controller tick
/// that would append the NoOp turns into a FenceBroker record. So the tick provably ran after
/// a long idle stretch, and any NoOp interval below the session (the 500 ms default
/// included) would have written a NoOp first; the records of the window are read back.
#[test]
fn an_idle_active_controller_appends_noops_only_when_asked() {
    let _serial = serial();
    let hwm = |c: &LocalCluster| {
        describe(&c.bootstrap(), 5_000)
            .and_then(|d| d["high_watermark"].as_u64())
            .expect("the leader answers DescribeQuorum")
    };
    {
        let tmp = tempfile::tempdir().unwrap();
        let c = start_cluster(tmp.path(), &[("metadata.max.idle.interval.ms", "100")]);
        leader(&c, &c.ids());
        let before = hwm(&c);
        // Five NoOps take about 0.5 s; the deadline only bounds a failure.
        wait_until("five idle NoOps", Duration::from_secs(15), || {
            (hwm(&c) >= before + 5).then_some(())
        });
    }
    let tmp = tempfile::tempdir().unwrap();
    let c = start_cluster(
        tmp.path(),
        &[
            ("metadata.max.idle.interval.ms", "0"),
            ("broker.session.timeout.ms", "1500"),
            ("broker.heartbeat.interval.ms", "300"),
        ],
    );
    leader(&c, &c.ids());
    let config = client_config(&c);
    let window = on_executor(Duration::from_secs(60), move || async move {
        let (client, _follower, _session) = unfenced_broker(config, 600, 6, 601, 61).await;
        // From here the broker is silent and nothing else writes: the window opens at the
        // committed end, and closes when the broker is seen fenced.
        let from = client
            .describe_quorum_at_leader()
            .await
            .unwrap()
            .high_watermark;
        let start = Instant::now();
        loop {
            let dc = client.describe_cluster().await.unwrap();
            if dc
                .brokers
                .iter()
                .any(|b| b.broker_id == NodeId(601) && b.fenced)
            {
                break;
            }
            assert!(
                start.elapsed() < CALL_DEADLINE,
                "the silent broker was never fenced"
            );
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        let to = client
            .describe_quorum_at_leader()
            .await
            .unwrap()
            .high_watermark;
        (records_between(&client, from, to).await, start.elapsed())
    });
    let (records, took) = window;
    assert!(
        took >= Duration::from_millis(1_000),
        "fenced after only {took:?} of a 1500 ms session"
    );
    assert!(
        records.iter().any(|r| r == "FenceBroker(601)"),
        "no fence in the window: {records:?}"
    );
    assert!(
        !records.iter().any(|r| r == "NoOp"),
        "NoOp records with metadata.max.idle.interval.ms=0: {records:?}"
    );
}

/// The state-machine records committed in `[from, to)`, read as an observer from offset 0
/// (so the fetch position is always valid): `NoOp`, `FenceBroker(<id>)` (a FenceBroker record or
/// a registration change that fences), or the record's kind.
async fn records_between(client: &ControllerClient, from: LogOffset, to: LogOffset) -> Vec<String> {
    use corum_controller::records::{
        aligned, decode_batch, ArchivedFencingChange, ArchivedMetadataRecord,
    };
    let observer = ReplicaKey {
        id: NodeId(902),
        directory_id: Uuid([92; 16]),
    };
    let (mut offset, mut last_epoch) = (LogOffset(0), Epoch(0));
    let mut out = Vec::new();
    while offset < to {
        let epoch = client.describe_quorum().await.unwrap().leader_epoch;
        let fetched = client
            .fetch(
                FetchRequest {
                    epoch,
                    replica: observer,
                    fetch_offset: offset,
                    last_fetched_epoch: last_epoch,
                    high_watermark: LogOffset(0),
                    wait_max_ms: 0,
                },
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        let FetchResult::Batches { batches, .. } = fetched.result else {
            panic!(
                "an observer fetch at {offset} answered {:?}",
                fetched.result
            );
        };
        assert!(!batches.is_empty(), "no batch at {offset}, below {to}");
        for b in batches {
            (offset, last_epoch) = (b.end_offset(), b.epoch);
            if b.control || b.end_offset() <= from {
                continue;
            }
            let bytes = aligned(&b.payload);
            for r in decode_batch(&bytes).unwrap().iter() {
                out.push(match r {
                    ArchivedMetadataRecord::NoOp(_) => "NoOp".to_owned(),
                    ArchivedMetadataRecord::FenceBroker(f) => {
                        format!("FenceBroker({})", f.broker_id.0.to_native())
                    }
                    // How fencing is written since the records follow Kafka's.
                    ArchivedMetadataRecord::BrokerRegistrationChangeV2(c)
                        if c.fenced == ArchivedFencingChange::Fence =>
                    {
                        format!("FenceBroker({})", c.broker_id.0.to_native())
                    }
                    other => format!("{other:?}").chars().take(40).collect(),
                });
            }
        }
    }
    out
}

/// Every node serves the standard `process_*` metrics, consistent with what the kernel says
/// about its process, and `corum loadgen --metrics --log-dir` turns them into CPU per
/// acknowledged write and measures the disk in the nodes' log directory.
#[test]
fn nodes_export_process_metrics_and_loadgen_reports_cpu_per_write() {
    let _serial = serial();
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let tmp = tempfile::tempdir().unwrap();
    let c = start_cluster(tmp.path(), &[]);
    leader(&c, &c.ids());
    for n in &c.nodes {
        let page = scrape_metrics(n.metrics);
        let value = |name: &str| {
            page.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or_else(|| panic!("node {}: no {name} in\n{page}", n.id))
        };
        let pid = n.process.as_ref().expect("running").pid();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = value("process_start_time_seconds");
        assert!(
            start >= started - 1.0 && start <= now,
            "node {} started at {start}, the test at {started}, now {now}",
            n.id
        );
        assert!(value("process_cpu_seconds_total") > 0.0, "{page}");
        let rss = value("process_resident_memory_bytes");
        assert!(
            rss > f64::from(1 << 20) && rss < f64::from(u32::MAX),
            "rss {rss}"
        );
        // The kernel's own counts, read a moment later (a node's thread and descriptor counts
        // are steady once it serves).
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let threads: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            (value("process_threads") - threads).abs() <= 2.0,
            "{threads}\n{page}"
        );
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count() as f64;
        assert!(
            (value("process_open_fds") - fds).abs() <= 8.0,
            "{fds}\n{page}"
        );
    }
    let metrics: Vec<String> = c.nodes.iter().map(|n| n.metrics.to_string()).collect();
    let log_dir = c.node(1).data.display().to_string();
    let out = spawn_loadgen(
        &c.bootstrap(),
        &[
            "--workload",
            "configs",
            "--clients",
            "4",
            "--duration",
            "1",
            "--metrics",
            &metrics.join(","),
            "--log-dir",
            &log_dir,
            "--raw-fsync-seconds",
            "0.2",
            "--rtt-probes",
            "50",
        ],
    )
    .wait(Duration::from_secs(60));
    let r = loadgen_json(&out);
    assert!(out.status.success(), "{r}");
    assert!(r["ops"].as_u64().unwrap() > 0, "{r}");
    assert!(r["cpu_us_per_op"].as_f64().unwrap() > 0.0, "{r}");
    let per_node = r["node_cpu"].as_array().unwrap();
    assert_eq!(per_node.len(), 3, "{r}");
    assert!(
        per_node
            .iter()
            .all(|n| n["cpu_seconds"].as_f64().unwrap() > 0.0),
        "every voter works for a write: {r}"
    );
    assert!(r["loadgen_cpu_us_per_op"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["log_dir"].as_str(), Some(log_dir.as_str()), "{r}");
    assert!(r["raw_quorum_write_p50_us"].as_u64().unwrap() > 0, "{r}");
    assert!(r["commit_floor_us"].as_u64().unwrap() > 0, "{r}");
    // The measurement cleaned up after itself in the node's directory.
    let left: Vec<_> = std::fs::read_dir(&c.node(1).data)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("corum-loadgen"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The body of `GET /metrics` at `addr`.
fn scrape_metrics(addr: std::net::SocketAddr) -> String {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: corum\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// Waits until the leader reports follower `f` with lag 0 at or past `offset`; fails with
/// the last answer and the nodes' logs.
fn wait_for_catch_up(c: &LocalCluster, f: u32, offset: u64) {
    let mut last = None;
    let start = Instant::now();
    let row = loop {
        let d = describe(&c.bootstrap(), 2_000);
        let row = d.as_ref().and_then(|d| {
            d["replicas"]
                .as_array()?
                .iter()
                .find(|r| r["node_id"].as_u64() == Some(u64::from(f)))
                .cloned()
        });
        if let Some(r) = row.filter(|r| {
            r["lag"].as_u64() == Some(0)
                && r["log_end_offset"].as_u64().is_some_and(|o| o >= offset)
                && r["status"] == "Follower"
        }) {
            break r;
        }
        last = d.or(last);
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "node {f} did not catch up to {offset}; last describe: {last:?}\n{}",
            logs(c)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(row["last_caught_up_age_ms"].as_u64().is_some(), "{row}");
}

/// A follower SIGKILLed under load restarts, recovers its log and catches up: the leader
/// reports it with lag 0 at or past the high watermark reached while it was down.
#[test]
fn follower_killed_under_load_restarts_and_catches_up() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_cluster(tmp.path(), &[]);
    let (l, _) = leader(&c, &c.ids());
    let f = c.ids().into_iter().find(|&id| id != l).unwrap();
    let others: Vec<u32> = c.ids().into_iter().filter(|&id| id != f).collect();
    let load = spawn_loadgen(
        &c.bootstrap(),
        &["--workload", "configs", "--clients", "8", "--duration", "3"],
    );
    // The follower has replicated part of the load when it is killed.
    wait_until("the follower to replicate", Duration::from_secs(15), || {
        let d = describe(&c.bootstrap(), 2_000)?;
        d["replicas"]
            .as_array()?
            .iter()
            .find(|r| r["node_id"].as_u64() == Some(u64::from(f)))?["log_end_offset"]
            .as_u64()
            .filter(|&o| o > 500)
    });
    c.kill(f);
    let out = load.wait(Duration::from_secs(30));
    restart_and_catch_up(&mut c, f, &others, &out);
    assert!(
        c.log_tail(f).contains("recovered"),
        "node {f} logged no recovery:\n{}",
        c.log_tail(f)
    );
}

/// SIGTERM of the leader under a verified write load hands leadership over without waiting
/// for an election timeout: with a 5 s timeout the next leader is there well before it, the
/// old leader exits 0, and no acknowledged write is lost.
#[test]
fn leader_sigterm_hands_over_before_the_election_timeout() {
    const ELECTION_TIMEOUT_MS: u64 = 5_000;
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let timeout = ELECTION_TIMEOUT_MS.to_string();
    let mut c = start_cluster(
        tmp.path(),
        &[
            ("controller.quorum.election.timeout.ms", &timeout),
            ("controller.quorum.fetch.timeout.ms", &timeout),
        ],
    );
    let (l, epoch) = wait_until("a first leader", Duration::from_secs(30), || {
        describe(&c.bootstrap(), 2_000).map(|d| leader_of(&d))
    });
    let others: Vec<u32> = c.ids().into_iter().filter(|&id| id != l).collect();
    let others_bootstrap = bootstrap_of(&c, &others);
    // Under verified load: the resignation must not acknowledge a write it then loses (the
    // leader's answers leave as their batches commit, some on the worker shard).
    let load = verified_load(&c, 4);
    let sent = Instant::now();
    assert!(c.signal(l, libc::SIGTERM));
    let (new_leader, new_epoch) = wait_until("a new leader", Duration::from_secs(20), || {
        describe(&others_bootstrap, 500)
            .map(|d| leader_of(&d))
            .filter(|&(id, _)| id != l)
    });
    let handover = sent.elapsed();
    eprintln!("SIGTERM to a new leader: {} ms", handover.as_millis());
    assert!(new_epoch > epoch && others.contains(&new_leader));
    assert!(
        handover < Duration::from_millis(ELECTION_TIMEOUT_MS / 2),
        "handover took {handover:?}, not clearly faster than the {ELECTION_TIMEOUT_MS} ms timeout"
    );
    let status = c.terminate(l, Duration::from_secs(10)).unwrap();
    assert!(status.success(), "the resigned leader exited with {status}");
    verified_load_lost_nothing(load);
}

/// SIGKILL of the leader: its followers' connections from it close and its port refuses, so
/// they elect a new leader at once rather than after the fetch timeout. With a 60 s fetch
/// timeout, a new leader well within it can only come from that report.
#[test]
fn a_killed_leader_is_replaced_before_the_fetch_timeout() {
    const FETCH_TIMEOUT_MS: u64 = 60_000;
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let fetch_timeout = FETCH_TIMEOUT_MS.to_string();
    let mut c = start_cluster(
        tmp.path(),
        &[
            ("controller.quorum.election.timeout.ms", "1000"),
            ("controller.quorum.fetch.timeout.ms", &fetch_timeout),
        ],
    );
    let (l, epoch) = wait_until("a first leader", Duration::from_secs(30), || {
        describe(&c.bootstrap(), 2_000).map(|d| leader_of(&d))
    });
    let others: Vec<u32> = c.ids().into_iter().filter(|&id| id != l).collect();
    let others_bootstrap = bootstrap_of(&c, &others);
    let killed_at = Instant::now();
    c.kill(l);
    let (new_leader, new_epoch) = wait_until(
        "a new leader",
        Duration::from_millis(FETCH_TIMEOUT_MS / 2),
        || {
            describe(&others_bootstrap, 500)
                .map(|d| leader_of(&d))
                .filter(|&(id, e)| id != l && e > epoch)
        },
    );
    eprintln!(
        "leader SIGKILL to a new leader (fetch timeout {FETCH_TIMEOUT_MS} ms): {} ms",
        killed_at.elapsed().as_millis()
    );
    assert!(others.contains(&new_leader) && new_epoch > epoch);
    for id in &others {
        let log = std::fs::read_to_string(&c.node(*id).log).unwrap_or_default();
        assert!(
            log.contains("reporting its process gone"),
            "node {id} did not report the killed leader:\n{log}"
        );
    }
}

/// A broker that stops heartbeating is fenced after its session timeout, and unfenced again
/// once it heartbeats and its metadata follower has caught up.
#[test]
fn silent_broker_is_fenced_then_unfenced_after_returning() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = start_cluster(
        tmp.path(),
        &[
            ("broker.session.timeout.ms", "1000"),
            ("broker.heartbeat.interval.ms", "200"),
        ],
    );
    leader(&c, &c.ids());
    let config = client_config(&c);
    on_executor(Duration::from_secs(50), move || async move {
        let (client, follower, mut session) = unfenced_broker(config, 500, 5, 501, 51).await;
        let fenced = |want: bool| {
            let client = client.clone();
            async move {
                let start = Instant::now();
                loop {
                    let dc = client.describe_cluster().await.unwrap();
                    let b = dc.brokers.iter().find(|b| b.broker_id == NodeId(501));
                    if b.is_some_and(|b| b.fenced == want) {
                        return start.elapsed();
                    }
                    assert!(
                        start.elapsed() < CALL_DEADLINE,
                        "broker never fenced={want}"
                    );
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        fenced(false).await;
        let silent = Instant::now();
        fenced(true).await;
        let fenced_after = silent.elapsed();
        assert!(
            fenced_after >= Duration::from_millis(900),
            "fenced after only {fenced_after:?} of a 1000 ms session"
        );
        // Back: heartbeats (re-registering if the controller asks) until unfenced.
        session.heartbeat().await.unwrap();
        session
            .run_until_unfenced(Duration::from_millis(50), Duration::from_secs(15))
            .await
            .unwrap();
        assert_eq!(session.state(), TargetState::Active);
        fenced(false).await;
        assert!(follower.next_offset() > LogOffset(0));
    });
}

/// `corum demo` runs the three workloads against three node processes, prints the summary,
/// stops the nodes cleanly and removes its directory.
#[test]
fn demo_runs_every_workload_and_cleans_up() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let d = dir.display().to_string();
    let out = corum(
        &[
            "demo",
            "--duration-secs",
            "1",
            "--brokers",
            "20",
            "--clients",
            "8",
            "--dir",
            &d,
        ],
        Duration::from_secs(50),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for needle in [
        "corum demo summary",
        "leader node",
        "brokers: 20 of 20 unfenced",
        "0 lost",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
    }
    for workload in ["brokers", "topics", "configs"] {
        assert!(
            stdout.lines().any(|l| l.trim_start().starts_with(workload)),
            "no {workload} row:\n{stdout}"
        );
    }
    assert!(stderr.contains("all nodes stopped cleanly"), "{stderr}");
    assert!(!dir.exists(), "the demo left {d}");
    assert!(processes_mentioning(&d).is_empty());
}

/// `corum demo --dynamic`: one `--standalone` controller grows to 5 by auto-join, a disk is
/// replaced, the quorum shrinks to 3, under a verified load that loses nothing; the summary
/// shows the voter set after each step.
#[test]
fn dynamic_demo_grows_replaces_a_disk_and_shrinks() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let d = dir.display().to_string();
    let out = corum(
        &["demo", "--dynamic", "--clients", "16", "--dir", &d],
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{stdout}
{stderr}"
    );
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains("s  1:")).collect();
    let voter_counts: Vec<usize> = rows
        .iter()
        .map(|l| {
            l.split_whitespace()
                .filter(|w| {
                    w.split_once(':')
                        .is_some_and(|(id, d)| id.parse::<u32>().is_ok() && d.len() == 22)
                })
                .count()
        })
        .collect();
    assert_eq!(voter_counts, [1, 3, 5, 5, 3], "{stdout}");
    for needle in [
        "corum demo --dynamic summary",
        "node 1 started (--standalone)",
        "node 5's disk replaced",
        "grew 1 -> 5 voters, replaced a disk and shrank to 3",
        "lost 0",
    ] {
        assert!(
            stdout.contains(needle),
            "{needle:?} missing:
{stdout}"
        );
    }
    // Node 5's directory id changed with its disk.
    let dir_of_5 = |row: &str| {
        row.split_whitespace()
            .find_map(|w| w.strip_prefix("5:"))
            .map(str::to_owned)
    };
    assert_ne!(dir_of_5(rows[2]), dir_of_5(rows[3]), "{stdout}");
    assert!(stderr.contains("all nodes stopped cleanly"), "{stderr}");
    assert!(!dir.exists(), "the demo left {d}");
    assert!(processes_mentioning(&d).is_empty());
}

/// SIGINT to `corum demo` while it runs a workload kills every node it started and removes
/// its directory; the demo exits with 128 + SIGINT.
#[test]
fn interrupted_demo_leaves_no_process_behind() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let d = dir.display().to_string();
    let child = std::process::Command::new(corum_exe())
        .args([
            "demo",
            "--duration-secs",
            "20",
            "--brokers",
            "20",
            "--dir",
            &d,
        ])
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let demo = Running::new(child);
    // Three nodes up (their command lines name the demo's directory), then interrupt.
    let nodes = wait_until("three demo nodes", Duration::from_secs(30), || {
        let p = processes_mentioning(&format!("{d}/node"));
        (p.len() == 3).then_some(p)
    });
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
    let out = demo.wait(Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(128 + libc::SIGINT), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");
    wait_until("the nodes to be gone", Duration::from_secs(5), || {
        nodes
            .iter()
            .all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
            .then_some(())
    });
    assert!(!dir.exists(), "the interrupted demo left {d}");
}

/// A `configs --verify` load of 16 clients for `seconds`, returned once it is flowing (the high
/// watermark has moved well past where it was).
fn verified_load(c: &LocalCluster, seconds: u32) -> Running {
    let hwm0 = describe(&c.bootstrap(), 5_000).unwrap()["high_watermark"]
        .as_u64()
        .unwrap();
    let seconds = seconds.to_string();
    let load = spawn_loadgen(
        &c.bootstrap(),
        &[
            "--workload",
            "configs",
            "--clients",
            "16",
            "--duration",
            &seconds,
            "--verify",
            "--request-timeout-ms",
            "8000",
            "--grace-ms",
            "15000",
        ],
    );
    wait_until("writes under load", Duration::from_secs(15), || {
        describe(&c.bootstrap(), 2_000)
            .and_then(|d| d["high_watermark"].as_u64())
            .filter(|&h| h > hwm0 + 200)
    });
    load
}

/// Waits for a [`verified_load`] and checks it: it succeeded, acknowledged writes, lost none of
/// them, and saw the leader change.
fn verified_load_lost_nothing(load: Running) {
    let out = load.wait(Duration::from_secs(45));
    let report = loadgen_json(&out);
    assert!(
        out.status.success(),
        "loadgen failed: {report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["lost"].as_u64(), Some(0), "{report}");
    assert!(report["acknowledged"].as_u64().unwrap() > 0, "{report}");
    assert!(report["leader_changes"].as_u64().unwrap() >= 1, "{report}");
}

/// After a load `out` that ran while follower `f` was down (the others serving): checks the
/// load wrote, restarts `f` and waits until it has caught up with the high watermark reached
/// meanwhile.
fn restart_and_catch_up(c: &mut LocalCluster, f: u32, others: &[u32], out: &Output) {
    let report = loadgen_json(out);
    assert!(out.status.success(), "{report}");
    assert!(report["ops"].as_u64().unwrap() > 0, "{report}");
    let hwm_while_down = describe(&bootstrap_of(c, others), 5_000).unwrap()["high_watermark"]
        .as_u64()
        .unwrap();
    c.start(f)
        .unwrap_or_else(|e| panic!("restarting node {f}: {e:#}\n{}", logs(c)));
    wait_for_catch_up(c, f, hwm_while_down);
}

/// `corum shell` shows what the topics workload wrote: its brokers and topics in the JSON of
/// every section, and one topic's partitions (leader, epochs, replicas, ISR) with `--topic`,
/// from an image at or past the leader's high watermark; an unknown topic fails.
#[test]
fn shell_shows_the_brokers_and_topics_a_workload_created() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = start_cluster(tmp.path(), &[]);
    leader(&c, &c.ids());
    let out = spawn_loadgen(
        &c.bootstrap(),
        &[
            "--workload",
            "topics",
            "--partitions",
            "2",
            "--duration",
            "0.5",
            "--broker-id-base",
            "500",
        ],
    )
    .wait(Duration::from_secs(30));
    let report = loadgen_json(&out);
    assert!(out.status.success(), "{report}");
    let created = report["ops"].as_u64().unwrap();
    assert!(created > 0, "{report}");
    let hwm = describe(&c.bootstrap(), 5_000).unwrap()["high_watermark"]
        .as_u64()
        .unwrap();

    let bootstrap = c.bootstrap();
    let shell = |args: &[&str]| {
        let mut v = vec!["shell", "--bootstrap", &bootstrap, "--timeout-ms", "8000"];
        v.extend_from_slice(args);
        corum(&v, Duration::from_secs(20))
    };
    let out = shell(&["--json"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "shell failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let image: serde_json::Value = serde_json::from_str(&text).expect("shell --json prints JSON");
    assert!(
        image["end_offset"].as_u64().unwrap() >= hwm,
        "{hwm}: {text}"
    );
    assert!(image["leader_id"].as_u64().is_some(), "{text}");
    let brokers: Vec<u64> = image["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_u64().unwrap())
        .collect();
    assert_eq!(brokers, [500, 501, 502], "the workload's brokers");
    let topics = image["topics"].as_array().unwrap();
    // At least every acknowledged topic (one whose answer was lost may be there too).
    assert!(
        topics.len() as u64 >= created,
        "{created} acknowledged: {text}"
    );
    assert!(topics
        .iter()
        .all(|t| t["partition_count"] == 2 && t["name"].as_str().unwrap().starts_with("loadgen-")));
    assert!(image["configs"].is_array() && image["features"].is_array());

    let name = topics[0]["name"].as_str().unwrap();
    let out = shell(&["topics", "--topic", name]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(&format!("Partitions of {name}\n")), "{text}");
    assert!(
        !text.contains("Brokers"),
        "only the topics section:\n{text}"
    );
    for p in ["0", "1"] {
        let row: Vec<&str> = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(p))
            .unwrap_or_else(|| panic!("no partition {p}:\n{text}"))
            .split_whitespace()
            .collect();
        // Partition, leader, leader epoch, partition epoch, replicas, ISR: three replicas
        // on the workload's brokers.
        assert_eq!(row.len(), 6, "{text}");
        assert_eq!(row[4].split(',').count(), 3, "{text}");
        assert!(
            row[4]
                .split(',')
                .all(|b| ["500", "501", "502"].contains(&b)),
            "{text}"
        );
    }

    let out = shell(&["topics", "--topic", "no-such-topic"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"no-such-topic\""), "{err}");
}

/// A client of the quorum, an observer `observer` (directory id `[observer_dir; 16]`) following
/// its log, and broker `broker` (incarnation `[incarnation; 16]`) registered through them and
/// run until unfenced.
async fn unfenced_broker(
    config: ClientConfig,
    observer: u32,
    observer_dir: u8,
    broker: u32,
    incarnation: u8,
) -> (ControllerClient, Rc<MetadataFollower>, BrokerSession) {
    let client = ControllerClient::connect(config).await.unwrap();
    let follower = Rc::new(MetadataFollower::start(
        client.clone(),
        ReplicaKey {
            id: NodeId(observer),
            directory_id: Uuid([observer_dir; 16]),
        },
        Duration::from_millis(200),
    ));
    let mut session = BrokerSession::register(
        client.clone(),
        NodeId(broker),
        Uuid([incarnation; 16]),
        vec![ListenerV1 {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9092,
        }],
        follower.clone(),
    )
    .await
    .unwrap();
    session
        .run_until_unfenced(Duration::from_millis(50), Duration::from_secs(15))
        .await
        .unwrap();
    (client, follower, session)
}

/// Regression (#15): in a static quorum, a voter whose controller listener is written
/// differently from its `controller.quorum.voters` entry (bound to `0.0.0.0` here) leaves the
/// voter set alone. Before, it sent UpdateVoter as a follower and the leader committed a
/// VotersRecord naming the wildcard, which replaced the configured voters on every node.
#[test]
fn a_static_voter_on_a_wildcard_listener_leaves_the_voter_set_alone() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_cluster(tmp.path(), &[]);
    let (l, _) = leader(&c, &c.ids());
    let f = c.ids().into_iter().find(|&id| id != l).unwrap();
    c.terminate(f, Duration::from_secs(10)).unwrap();
    let raft = c.node(f).raft;
    let config = c.node(f).config.clone();
    let text = std::fs::read_to_string(&config).unwrap();
    let bound = text.replace(
        &format!("CONTROLLER://{raft}"),
        &format!("CONTROLLER://0.0.0.0:{}", raft.port()),
    );
    assert_ne!(bound, text);
    std::fs::write(&config, bound).unwrap();
    if let Err(e) = c.start(f) {
        panic!("restarting node {f}: {e:#}\n{}", logs(&c));
    }
    // A follower sends UpdateVoter at its first fetch; give it a few seconds and a write.
    let out = spawn_loadgen(
        &c.bootstrap(),
        &["--workload", "configs", "--clients", "4", "--duration", "3"],
    )
    .wait(Duration::from_secs(60));
    assert!(out.status.success(), "{}", logs(&c));
    let (l, _) = leader(&c, &c.ids());
    let dump = corum(
        &["dump-log", "--dir", c.node(l).data.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(
        dump.status.success() && text.contains("LeaderChange("),
        "{text}"
    );
    assert!(
        !text.contains("Voters["),
        "a static quorum's log holds a VotersRecord:\n{text}"
    );
}

/// The directory id in node `id`'s `meta.properties`.
fn directory_id(c: &LocalCluster, id: u32) -> String {
    let meta = std::fs::read_to_string(c.node(id).data.join("meta.properties")).unwrap();
    meta.lines()
        .find_map(|l| l.strip_prefix("directory.id="))
        .expect("meta.properties names a directory id")
        .to_owned()
}

/// `corum quorum remove-controller` of (`id`, `directory_id`) through `c`'s client listeners.
fn remove_controller(c: &LocalCluster, id: u32, directory_id: &str) -> std::process::Output {
    corum(
        &[
            "quorum",
            "remove-controller",
            "--bootstrap",
            &c.bootstrap(),
            "--controller-id",
            &id.to_string(),
            "--controller-directory-id",
            directory_id,
        ],
        Duration::from_secs(60),
    )
}

/// The voter ids of the leader's DescribeQuorum.
fn voter_ids(c: &LocalCluster) -> Vec<u64> {
    voters_of(&describe(&c.bootstrap(), 5_000).expect("a leader answers DescribeQuorum"))
}

/// A dynamic quorum (formatted with `--initial-controllers`) changes its voters with `corum
/// quorum remove-controller` and `add-controller`, under a verified load that loses nothing:
/// a follower is removed (two voters), keeps running and fetching, and is added back from its
/// own configuration (three voters). Removing an unknown directory id is refused with the
/// reason; a static quorum refuses voter changes, saying why.
#[test]
fn a_dynamic_quorum_removes_and_adds_a_controller_under_load() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = start_dynamic_cluster(tmp.path(), 3, 0, &[]);
    let (l, _) = leader(&c, &c.ids());
    let f = c.ids().into_iter().find(|&id| id != l).unwrap();
    let load = verified_load(&c, 6);
    let wrong = remove_controller(&c, f, "AAAAAAAAAAAAAAAAAAAAAA");
    let said = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        !wrong.status.success() && said.contains("no voter has that id and directory id"),
        "{said}"
    );
    let removed = remove_controller(&c, f, &directory_id(&c, f));
    assert!(
        removed.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&removed.stderr),
        logs(&c)
    );
    assert!(!voter_ids(&c).contains(&u64::from(f)));
    assert_eq!(voter_ids(&c).len(), 2);
    let config = c.node(f).config.display().to_string();
    let added = corum(
        &[
            "quorum",
            "add-controller",
            "--bootstrap",
            &c.bootstrap(),
            "--config",
            &config,
        ],
        Duration::from_secs(60),
    );
    assert!(
        added.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&added.stderr),
        logs(&c)
    );
    assert_eq!(voter_ids(&c), vec![1, 2, 3]);
    verified_load_acknowledged(&c, load);
}

/// A static quorum refuses a voter change, and `corum quorum remove-controller` says why.
#[test]
fn a_static_quorum_refuses_remove_controller() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = start_cluster(tmp.path(), &[]);
    let (l, _) = leader(&c, &c.ids());
    let f = c.ids().into_iter().find(|&id| id != l).unwrap();
    let out = remove_controller(&c, f, "AAAAAAAAAAAAAAAAAAAAAA");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("the quorum is static"),
        "{said}"
    );
    assert_eq!(voter_ids(&c).len(), 3);
}

/// Formats a dynamic quorum of `nodes` controllers, the last `joining` of them with
/// `--no-initial-controllers`, and starts them all; panics with the nodes' logs on failure.
fn start_dynamic_cluster(
    dir: &std::path::Path,
    nodes: u32,
    joining: u32,
    settings: &[(&str, &str)],
) -> LocalCluster {
    let mut spec = spec(dir, settings);
    spec.voters = nodes;
    spec.dynamic = true;
    spec.joining = joining;
    let mut c = LocalCluster::create(spec).expect("formatting the cluster");
    if let Err(e) = c.start_all() {
        panic!("starting the cluster: {e:#}\n{}", logs(&c));
    }
    c
}

/// Waits for a [`verified_load`] and checks it acknowledged writes and lost none.
fn verified_load_acknowledged(c: &LocalCluster, load: Running) {
    let out = load.wait(Duration::from_secs(120));
    let report = loadgen_json(&out);
    assert!(out.status.success(), "{report}\n{}", logs(c));
    assert_eq!(report["lost"].as_u64(), Some(0), "{report}");
    assert!(report["acknowledged"].as_u64() > Some(0), "{report}");
}

/// The directory ids of the leader's voters, by node id.
fn voter_directories(c: &LocalCluster) -> Vec<(u64, String)> {
    let d = describe(&c.bootstrap(), 5_000).expect("a leader answers DescribeQuorum");
    d["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] != "Observer")
        .map(|r| {
            (
                r["node_id"].as_u64().unwrap(),
                r["directory_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Waits until the leader's voters are exactly `ids`.
fn wait_for_voters(c: &LocalCluster, ids: &[u64], within: Duration) {
    let mut want = ids.to_vec();
    want.sort_unstable();
    wait_until(&format!("voters {want:?}"), within, || {
        let mut v: Vec<u64> = describe(&c.bootstrap(), 2_000)?["voters"]
            .as_array()?
            .iter()
            .filter_map(|x| x.as_u64())
            .collect();
        v.sort_unstable();
        (v == want).then_some(())
    });
}

/// KIP-853 growth and repair with real processes: node 1 is formatted `--standalone` (the
/// only initial controller), nodes 2 and 3 with `--no-initial-controllers`. With
/// `controller.quorum.auto.join.enable` they find the leader through
/// `controller.quorum.bootstrap.servers`, fetch as observers, and are added one at a time
/// while a verified load runs. Then node 3's disk is replaced: formatted again under a new
/// directory id, it joins as a new replica — the old (id, directory id) is removed first, the
/// empty replica never counted as the old voter — and the load loses nothing.
#[test]
fn controllers_formatted_to_join_are_added_by_auto_join_and_a_replaced_disk_rejoins() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_dynamic_cluster(
        tmp.path(),
        3,
        2,
        &[("controller.quorum.auto.join.enable", "true")],
    );
    wait_for_voters(&c, &[1, 2, 3], Duration::from_secs(30));
    let load = verified_load(&c, 8);
    let before = voter_directories(&c);
    let old_dir = before.iter().find(|(id, _)| *id == 3).unwrap().1.clone();
    assert_eq!(old_dir, directory_id(&c, 3));
    c.kill(3);
    c.replace_disk(3).unwrap();
    let new_dir = directory_id(&c, 3);
    assert_ne!(new_dir, old_dir);
    c.start(3)
        .unwrap_or_else(|e| panic!("starting node 3 again: {e:#}\n{}", logs(&c)));
    let rejoined = (0..150).any(|_| {
        std::thread::sleep(Duration::from_millis(200));
        voter_directories(&c).contains(&(3, new_dir.clone()))
    });
    assert!(rejoined, "{:?}\n{}", voter_directories(&c), logs(&c));
    let after = voter_directories(&c);
    assert_eq!(after.len(), 3, "{after:?}");
    assert!(!after.iter().any(|(_, d)| *d == old_dir), "{after:?}");
    verified_load_acknowledged(&c, load);
}

/// `corum quorum add-controller` of `config`, running in the background.
fn spawn_add_controller(c: &LocalCluster, config: &std::path::Path) -> Running {
    let child = std::process::Command::new(corum_exe())
        .args([
            "quorum",
            "add-controller",
            "--bootstrap",
            &c.bootstrap(),
            "--config",
            &config.display().to_string(),
            "--timeout-ms",
            "30000",
        ])
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawning corum quorum add-controller");
    Running::new(child)
}

/// The leader is SIGKILLed while it adds a controller (formatted to join, observing): the
/// change either committed or is absent — the surviving voters elect a leader whose voter
/// set is one of the two, never a mix — and once the killed node is back, asking again
/// ends with four voters. A verified load loses nothing throughout.
#[test]
fn a_leader_killed_during_add_voter_leaves_the_change_whole_or_absent() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_dynamic_cluster(tmp.path(), 4, 1, &[]);
    wait_for_voters(&c, &[1, 2, 3], Duration::from_secs(30));
    let load = verified_load(&c, 8);
    // Node 4 observes (no auto-join): wait until the leader lists it as an observer.
    wait_until("node 4 observing", Duration::from_secs(30), || {
        describe(&c.bootstrap(), 2_000)
            .and_then(|d| d["observers"].as_array().cloned())
            .filter(|o| o.iter().any(|x| x.as_u64() == Some(4)))
    });
    let (l, epoch) = leader(&c, &[1, 2, 3]);
    let adding = spawn_add_controller(&c, &c.node(4).config.clone());
    std::thread::sleep(Duration::from_millis(30));
    c.kill(l);
    let _ = adding.wait(Duration::from_secs(60));
    // Node 4 may lead now (the change committed): clients need its endpoint too.
    let others: Vec<u32> = c.ids().into_iter().filter(|&id| id != l).collect();
    let started = Instant::now();
    let d = loop {
        let d = describe(&bootstrap_of(&c, &others), 2_000);
        if let Some(d) = d.filter(|d| {
            d["leader_epoch"].as_u64() > Some(epoch)
                && d["leader_id"].as_u64() != Some(u64::from(l))
        }) {
            break d;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no new leader after killing {l}\n{}",
            logs(&c)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut voters: Vec<u64> = d["voters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    voters.sort_unstable();
    assert!(
        voters == [1, 2, 3] || voters == [1, 2, 3, 4],
        "voters after the failover: {voters:?}"
    );
    c.start(l)
        .unwrap_or_else(|e| panic!("restarting node {l}: {e:#}\n{}", logs(&c)));
    if voters == [1, 2, 3] {
        let again =
            spawn_add_controller(&c, &c.node(4).config.clone()).wait(Duration::from_secs(60));
        assert!(
            again.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&again.stderr),
            logs(&c)
        );
    }
    wait_for_voters(&c, &[1, 2, 3, 4], Duration::from_secs(30));
    verified_load_acknowledged(&c, load);
}

/// The leader removes itself: it keeps leading until the change commits, then resigns; the
/// two remaining voters elect a leader among themselves, and the verified load loses
/// nothing. The removed node keeps running as an observer.
#[test]
fn the_leader_removes_itself_and_the_others_carry_on() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = start_dynamic_cluster(tmp.path(), 3, 0, &[]);
    let (l, _) = leader(&c, &c.ids());
    let load = verified_load(&c, 6);
    let removed = remove_controller(&c, l, &directory_id(&c, l));
    assert!(
        removed.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&removed.stderr),
        logs(&c)
    );
    let rest: Vec<u64> = [1, 2, 3]
        .into_iter()
        .filter(|&id| id != l)
        .map(u64::from)
        .collect();
    wait_for_voters(&c, &rest, Duration::from_secs(30));
    let d = describe(&c.bootstrap(), 5_000).unwrap();
    assert_ne!(d["leader_id"].as_u64(), Some(u64::from(l)), "{d}");
    assert!(c.is_running(l), "the removed leader keeps running");
    wait_until(
        "the removed leader observing",
        Duration::from_secs(30),
        || {
            describe(&c.bootstrap(), 2_000)
                .and_then(|d| d["observers"].as_array().cloned())
                .filter(|o| o.iter().any(|x| x.as_u64() == Some(u64::from(l))))
        },
    );
    verified_load_acknowledged(&c, load);
}

/// A voter restarted with its controller listener on another port announces it (its first
/// envelopes carry its new address, then UpdateVoter commits the new endpoint): the leader
/// lists the new endpoint, and after the leader is killed the two others elect a leader
/// over the new address; a verified load loses nothing.
#[test]
fn a_voter_restarted_on_a_new_port_updates_its_endpoint() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_dynamic_cluster(tmp.path(), 3, 0, &[]);
    let (l, _) = leader(&c, &c.ids());
    let f = c.ids().into_iter().find(|&id| id != l).unwrap();
    let load = verified_load(&c, 8);
    c.terminate(f, Duration::from_secs(15)).unwrap();
    let moved = c.move_controller_port(f).unwrap();
    c.start(f)
        .unwrap_or_else(|e| panic!("restarting node {f}: {e:#}\n{}", logs(&c)));
    let want = format!("CONTROLLER://{moved}");
    wait_until(
        "the new endpoint committed",
        Duration::from_secs(30),
        || {
            describe(&c.bootstrap(), 2_000).filter(|d| {
                d["replicas"].as_array().is_some_and(|rows| {
                    rows.iter().any(|r| {
                        r["node_id"].as_u64() == Some(u64::from(f))
                            && r["endpoints"].to_string().contains(&want)
                    })
                })
            })
        },
    );
    let (l, epoch) = leader(&c, &c.ids());
    c.kill(l);
    let others: Vec<u32> = c.ids().into_iter().filter(|&id| id != l).collect();
    wait_until(
        "a leader over the new address",
        Duration::from_secs(30),
        || {
            describe(&bootstrap_of(&c, &others), 2_000)
                .filter(|d| d["leader_epoch"].as_u64() > Some(epoch))
        },
    );
    c.start(l)
        .unwrap_or_else(|e| panic!("restarting node {l}: {e:#}\n{}", logs(&c)));
    verified_load_acknowledged(&c, load);
}

/// A controller formatted to join is paused (SIGSTOP, longer than the fetch timeout: cut off
/// from everyone) while it catches up under load: the quorum keeps committing without it,
/// and once resumed it catches up and auto-joins; the load loses nothing.
#[test]
fn a_joining_controller_paused_mid_catch_up_joins_once_resumed() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut spec = spec(
        tmp.path(),
        &[("controller.quorum.auto.join.enable", "true")],
    );
    spec.voters = 4;
    spec.dynamic = true;
    spec.joining = 1;
    let mut c = LocalCluster::create(spec).expect("formatting the cluster");
    for id in 1..=3 {
        c.start(id)
            .unwrap_or_else(|e| panic!("starting node {id}: {e:#}\n{}", logs(&c)));
    }
    wait_for_voters(&c, &[1, 2, 3], Duration::from_secs(30));
    let load = verified_load(&c, 10);
    c.start(4)
        .unwrap_or_else(|e| panic!("starting node 4: {e:#}\n{}", logs(&c)));
    assert!(c.signal(4, libc::SIGSTOP));
    let hwm = |c: &LocalCluster| {
        describe(&bootstrap_of(c, &[1, 2, 3]), 2_000)
            .and_then(|d| d["high_watermark"].as_u64())
            .unwrap_or(0)
    };
    let paused_at = hwm(&c);
    std::thread::sleep(Duration::from_secs(3));
    assert!(hwm(&c) > paused_at + 100, "the quorum stopped committing");
    assert!(c.signal(4, libc::SIGCONT));
    wait_for_voters(&c, &[1, 2, 3, 4], Duration::from_secs(30));
    verified_load_acknowledged(&c, load);
}

/// `corum features` with `args` against `c`'s client listeners, as JSON.
fn features(c: &LocalCluster, args: &[&str]) -> (bool, serde_json::Value, String) {
    let bootstrap = c.bootstrap();
    let mut all = vec!["features"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--bootstrap", &bootstrap, "--json"]);
    let out = corum(&all, Duration::from_secs(60));
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.success(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The finalized `kraft.version` `corum features describe` reports (0 when not finalized),
/// with its supported range.
fn kraft_version(c: &LocalCluster) -> (u64, (u64, u64)) {
    let (ok, json, err) = features(c, &["describe"]);
    assert!(ok, "{err}");
    let f = json["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "kraft.version")
        .unwrap_or_else(|| panic!("kraft.version is described: {json}"))
        .clone();
    (
        f["finalized_level"].as_u64().unwrap_or(0),
        (
            f["supported_min_level"].as_u64().unwrap(),
            f["supported_max_level"].as_u64().unwrap(),
        ),
    )
}

/// KIP-853's upgrade of a static quorum with real processes, under a verified load: three
/// voters of `controller.quorum.voters` and a fourth controller formatted with
/// `--no-initial-controllers` and auto-join, which the static quorum cannot add. `corum
/// features upgrade --feature kraft.version=1` (a dry run first, which changes nothing) makes
/// the quorum dynamic: every voter's directory id is in the voter set, the fourth controller
/// joins by itself, and a downgrade is refused. Every node writes a snapshot past the upgrade
/// (its log below deleted); restarted in turn, each keeps kraft.version 1 and the four voters
/// (from its snapshot, whatever `controller.quorum.voters` says), one of them with
/// `controller.quorum.voters` replaced by `controller.quorum.bootstrap.servers`. The loads
/// lose nothing.
#[test]
fn a_static_quorum_upgraded_to_kraft_version_1_grows() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut settings = vec![("controller.quorum.auto.join.enable", "true")];
    settings.extend_from_slice(&SNAPSHOT_OFTEN);
    let mut spec = spec(tmp.path(), &settings);
    spec.voters = 4;
    spec.joining = 1;
    let mut c = LocalCluster::create(spec).expect("formatting the cluster");
    if let Err(e) = c.start_all() {
        panic!("starting the cluster: {e:#}\n{}", logs(&c));
    }
    let (_, _) = leader(&c, &[1, 2, 3]);
    let load = verified_load(&c, 12);
    assert_eq!(kraft_version(&c), (0, (0, 1)));
    // Node 4 fetches as an observer; the static quorum refuses to add it.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(voter_ids(&c), vec![1, 2, 3]);
    let (ok, json, err) = features(
        &c,
        &["upgrade", "--feature", "kraft.version=1", "--dry-run"],
    );
    assert!(ok, "{err}\n{json}");
    assert_eq!(kraft_version(&c).0, 0, "a dry run changes nothing");
    let upgraded = (0..20).any(|_| {
        let asked = Instant::now();
        let (ok, _, _) = features(&c, &["upgrade", "--feature", "kraft.version=1"]);
        if ok {
            // The command's wall time, process start included (measured, not asserted).
            eprintln!("kraft.version upgraded in {:?} under load", asked.elapsed());
        }
        ok || {
            std::thread::sleep(Duration::from_millis(500));
            false
        }
    });
    assert!(upgraded, "{}", logs(&c));
    assert_eq!(kraft_version(&c).0, 1);
    let upgraded_by = describe(&c.bootstrap(), 5_000).unwrap()["high_watermark"]
        .as_u64()
        .unwrap();
    wait_for_voters(&c, &[1, 2, 3, 4], Duration::from_secs(30));
    let dirs = voter_directories(&c);
    for id in 1..=4u32 {
        assert!(
            dirs.contains(&(u64::from(id), directory_id(&c, id))),
            "voter {id} with its directory id: {dirs:?}"
        );
    }
    let (ok, _, err) = features(&c, &["downgrade", "--feature", "kraft.version=0"]);
    assert!(!ok && err.contains("never goes down"), "{err}");
    for id in c.ids() {
        let snapshots = c.node(id).data.join("snapshots");
        wait_until(
            &format!("node {id}: a snapshot past offset {upgraded_by}"),
            Duration::from_secs(30),
            || {
                std::fs::read_dir(&snapshots).ok()?.find_map(|e| {
                    let name = e.ok()?.file_name().to_string_lossy().into_owned();
                    let end: u64 = name.split('-').next()?.parse().ok()?;
                    (name.ends_with(".snapshot") && end > upgraded_by).then_some(())
                })
            },
        );
    }
    // Restarted in turn: nodes 1 and 2 as configured, node 3 with `controller.quorum.voters`
    // replaced by `controller.quorum.bootstrap.servers` (its voters from its snapshot alone).
    let servers: Vec<String> = [1, 2, 3]
        .iter()
        .map(|&id| c.node(id).raft.to_string())
        .collect();
    for id in c.ids() {
        c.terminate(id, Duration::from_secs(10)).unwrap();
        if id == 3 {
            let config = c.node(id).config.clone();
            let text: String = std::fs::read_to_string(&config)
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with("controller.quorum.voters="))
                .map(|l| format!("{l}\n"))
                .collect();
            let text = format!(
                "{text}controller.quorum.bootstrap.servers={}\n",
                servers.join(",")
            );
            std::fs::write(&config, text).unwrap();
        }
        c.start(id)
            .unwrap_or_else(|e| panic!("restarting node {id}: {e:#}\n{}", logs(&c)));
        wait_for_voters(&c, &[1, 2, 3, 4], Duration::from_secs(30));
    }
    assert_eq!(kraft_version(&c).0, 1);
    verified_load_acknowledged(&c, load);
    // Writes go on with node 3 restarted without configured voters.
    verified_load_acknowledged(&c, verified_load(&c, 2));
    wait_for_voters(&c, &[1, 2, 3, 4], Duration::from_secs(30));
    // Node 3, without configured voters, follows as a voter: the leader sees it caught up.
    wait_until(
        "node 3 caught up as a voter",
        Duration::from_secs(30),
        || {
            let d = describe(&c.bootstrap(), 2_000)?;
            d["replicas"].as_array()?.iter().find(|r| {
                r["node_id"] == 3 && r["status"] != "Observer" && r["lag"].as_u64() == Some(0)
            })?;
            Some(())
        },
    );
}
