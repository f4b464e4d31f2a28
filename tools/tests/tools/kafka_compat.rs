//! Kafka's own clients against a corum quorum: the compatibility suite (`compat/run.sh`: kcat,
//! confluent-kafka, kafka-python and its CLI, aiokafka, kafkajs, Kafka's Java AdminClient and
//! command-line tools) against 3 `corum run` processes, with the active controller SIGKILLed
//! in the middle of every session. Each session checks its answers and, after the failover,
//! that everything it was told was written is still there.
//!
//! Brokers: three simulated brokers (`corum loadgen --workload brokers`) with the controllers'
//! ids, each registering the Kafka listener of its node as its endpoint — Kafka's combined mode,
//! where every node a client sees is both a broker it can reach and a controller.
//!
//! Needs what `compat/install.sh` installs (the README's test command runs it first); a
//! missing client fails its session.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corum_client::ControllerClient;
use corum_node::{RequestBody, ResponseBody};

use crate::common::*;

/// The whole suite, failovers included (about 4 minutes here).
const SUITE_DEADLINE: Duration = Duration::from_secs(1_200);

/// Registered brokers that are not fenced.
fn unfenced_brokers(c: &LocalCluster) -> usize {
    let config = corum_client::ClientConfig::new(client_addrs(c));
    on_executor(Duration::from_secs(30), move || async move {
        let Ok(client) = ControllerClient::connect(config).await else {
            return 0;
        };
        match client.call(RequestBody::DescribeCluster).await {
            Ok(ResponseBody::DescribeCluster(d)) => d.brokers.iter().filter(|b| !b.fenced).count(),
            _ => 0,
        }
    })
}

/// SIGKILLs the leader, waits for another, restarts the killed node.
fn failover(c: &mut LocalCluster) {
    let bootstrap = bootstrap_of(c, &c.ids());
    let (l, epoch) = leader_of(&wait_until("a leader", Duration::from_secs(30), || {
        describe(&bootstrap, 2_000)
    }));
    c.kill(l);
    let others: Vec<u32> = c.ids().into_iter().filter(|&i| i != l).collect();
    let rest = bootstrap_of(c, &others);
    wait_until("a new leader", Duration::from_secs(30), || {
        describe(&rest, 2_000)
            .filter(|d| leader_of(d).0 != l && leader_of(d).1 > epoch)
            .map(|_| ())
    });
    if let Err(e) = c.start(l) {
        panic!("restarting node {l}: {e:#}\n{}", logs(c));
    }
}

#[test]
fn real_kafka_clients_pass_their_sessions_through_a_leader_sigkill() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_cluster(tmp.path(), &[]);
    let kafka: Vec<String> = c.nodes.iter().map(|n| n.kafka.to_string()).collect();
    let kafka = kafka.join(",");
    let _brokers = spawn_loadgen(
        &bootstrap_of(&c, &c.ids()),
        &[
            "--workload",
            "brokers",
            "--brokers",
            "3",
            "--clients",
            "3",
            "--broker-id-base",
            "1",
            "--broker-listeners",
            &kafka,
            "--heartbeat-interval-ms",
            "500",
            "--duration",
            "1500",
            "--raw-quorum-writers",
            "0",
            "--rtt-probes",
            "0",
        ],
    );
    wait_until("three unfenced brokers", Duration::from_secs(60), || {
        (unfenced_brokers(&c) == 3).then_some(())
    });

    // run.sh runs the failover command at each session's pause; it hands the failover to
    // this thread through two files and waits for it.
    let sync = tmp.path().join("failover");
    std::fs::create_dir_all(&sync).unwrap();
    let request = sync.join("request");
    let done = sync.join("done");
    let failover_cmd = format!(
        "touch {r}; for i in $(seq 1200); do if [ -e {d} ]; then rm -f {r} {d}; exit 0; fi; sleep 0.1; done; exit 1",
        r = request.display(),
        d = done.display()
    );
    let logs_dir = tmp.path().join("compat-logs");
    let mut suite = Command::new(repo_root().join("compat/run.sh"))
        .args([
            "--bootstrap",
            &kafka,
            "--controller-bootstrap",
            &kafka,
            "--broker-ids",
            "1,2,3",
            "--through-failover",
            "--failover-cmd",
            &failover_cmd,
            "--session-timeout-s",
            "300",
            "--log-dir",
            logs_dir.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("running compat/run.sh (run compat/install.sh first)");
    let started = Instant::now();
    let mut failovers = 0;
    let status = loop {
        if let Some(status) = suite.try_wait().unwrap() {
            break status;
        }
        if request.exists() && !done.exists() {
            failover(&mut c);
            failovers += 1;
            std::fs::write(&done, b"").unwrap();
        }
        if started.elapsed() > SUITE_DEADLINE {
            let _ = suite.kill();
            panic!(
                "the compatibility suite ran over {SUITE_DEADLINE:?}\n{}",
                logs(&c)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    use std::io::Read;
    suite
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    eprintln!("{out}");
    let session_logs: String = std::fs::read_dir(&logs_dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let text = std::fs::read_to_string(e.path()).ok()?;
                    Some(format!("== {}\n{}", e.path().display(), text))
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(
        status.success(),
        "compat/run.sh failed ({status}):\n{out}\n{session_logs}\n{}",
        logs(&c)
    );
    assert!(out.contains("8 passed, 0 failed"), "{out}");
    assert_eq!(failovers, 8, "one leader SIGKILL per session");

    // The load generator's Kafka client, after the failovers: it finds the active controller
    // and pipelines CreateTopics v7 on two connections shared by eight clients.
    let out = spawn_loadgen(
        &bootstrap_of(&c, &c.ids()),
        &[
            "--workload",
            "topics",
            "--protocol",
            "kafka",
            "--kafka-bootstrap",
            &kafka,
            "--clients",
            "8",
            "--connections",
            "2",
            "--broker-id-base",
            "100",
            "--duration",
            "1",
            "--raw-quorum-writers",
            "0",
            "--rtt-probes",
            "0",
        ],
    )
    .wait(Duration::from_secs(120));
    let report = loadgen_json(&out);
    assert!(
        out.status.success() && report["ops"].as_u64() > Some(0) && report["errors"] == 0,
        "{report}\n{}",
        logs(&c)
    );
}

/// Runs `compat/sessions/kafka_quorum_voters.py` (Kafka 4.1's `kafka-metadata-quorum` from
/// `compat/jars`) with `args` against `c`'s Kafka listeners; panics with its output and the
/// nodes' logs unless it passes.
fn quorum_voters_session(c: &LocalCluster, args: &[&str]) -> String {
    let kafka: Vec<String> = c.nodes.iter().map(|n| n.kafka.to_string()).collect();
    let out = Command::new(repo_root().join("compat/.venv/bin/python"))
        .arg(repo_root().join("compat/sessions/kafka_quorum_voters.py"))
        .args(["--controller-bootstrap", &kafka.join(",")])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running compat/sessions/kafka_quorum_voters.py (run compat/install.sh first)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    assert!(
        out.status.success() && text.contains("PASS"),
        "the kafka-metadata-quorum session failed ({}):\n{text}\n{}",
        out.status,
        logs(c)
    );
    text
}

/// A node's directory id, from its `meta.properties`.
fn directory_id(c: &LocalCluster, id: u32) -> String {
    let meta = std::fs::read_to_string(c.node(id).data.join("meta.properties")).unwrap();
    meta.lines()
        .find_map(|l| l.strip_prefix("directory.id="))
        .expect("meta.properties names a directory id")
        .to_owned()
}

/// Kafka's own `kafka-metadata-quorum --bootstrap-controller` changes a dynamic corum quorum's
/// voters over the Kafka listener (AddRaftVoter, RemoveRaftVoter, DescribeQuorum v2): describe
/// --status lists every voter with its directory id and controller endpoint, remove-controller
/// takes a follower out (it keeps fetching, listed as an observer), add-controller puts the same
/// running controller back from its own properties file, and describe --replication shows it a
/// voter again. corum's own view agrees at the end.
#[test]
fn kafka_metadata_quorum_removes_and_adds_a_controller_of_a_dynamic_quorum() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut spec = spec(tmp.path(), &[]);
    spec.dynamic = true;
    let mut c = LocalCluster::create(spec).expect("formatting the cluster");
    if let Err(e) = c.start_all() {
        panic!("starting the cluster: {e:#}\n{}", logs(&c));
    }
    let bootstrap = bootstrap_of(&c, &c.ids());
    let (l, _) = leader_of(&wait_until("a leader", Duration::from_secs(30), || {
        describe(&bootstrap, 2_000)
    }));
    let f = c.ids().into_iter().find(|&id| id != l).unwrap();
    let config = c.node(f).config.display().to_string();
    let out = quorum_voters_session(&c, &["--controller-config", &config]);
    assert!(out.contains(&format!("remove-controller --controller-id {f}")));
    let d = describe(&bootstrap, 5_000).expect("a leader answers DescribeQuorum");
    let voters = voters_of(&d);
    assert_eq!(voters, [1, 2, 3], "{d}");
}

/// A static quorum (`controller.quorum.voters`) refuses Kafka's `remove-controller`, and the
/// tool reports why: UNSUPPORTED_VERSION saying the quorum is static. Kafka's `kafka-features
/// upgrade --feature kraft.version=1` then makes it dynamic (KIP-853): `describe` shows the
/// level, every voter gets its directory id, and the same `remove-controller` succeeds.
#[test]
fn kafka_features_upgrades_a_static_quorum_that_refused_remove_controller() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = start_cluster(tmp.path(), &[]);
    let bootstrap = bootstrap_of(&c, &c.ids());
    let (l, _) = leader_of(&wait_until("a leader", Duration::from_secs(30), || {
        describe(&bootstrap, 2_000)
    }));
    let f = c.ids().into_iter().find(|&id| id != l).unwrap();
    let dir = directory_id(&c, f);
    quorum_voters_session(
        &c,
        &[
            "--static",
            "--controller-id",
            &f.to_string(),
            "--controller-directory-id",
            &dir,
        ],
    );
    let d = describe(&bootstrap, 5_000).expect("a leader answers DescribeQuorum");
    let voters = voters_of(&d);
    let rest: Vec<u64> = c
        .ids()
        .into_iter()
        .filter(|&id| id != f)
        .map(u64::from)
        .collect();
    assert_eq!(voters, rest, "{d}");
}
