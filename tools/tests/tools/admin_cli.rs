//! The admin commands (`corum topics|configs|features|leaders|brokers`) as child processes
//! against one real 3-node quorum with three simulated brokers heartbeating (a `corum loadgen
//! --workload brokers` child): each command's JSON is parsed and checked against what the
//! commands before it did, and every refusal exits non-zero naming Kafka's error.

use std::process::Output;
use std::time::{Duration, Instant};

use crate::common::*;

use corum_client::{ClientConfig, ControllerClient, ListenerV1, RequestBody, ResponseBody};
use corum_controller::control::cluster_control::BrokerHeartbeatRequest;
use corum_controller::control::feature_control::supported_features;
use corum_types::{LogOffset, NodeId, Uuid};
use serde_json::Value;

const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
const ELECTION_WAIT: Duration = Duration::from_secs(20);
/// The simulated brokers' ids: 500, 501, 502.
const BROKERS: [u64; 3] = [500, 501, 502];
/// A broker registered once and never heartbeating again: it stays fenced.
const SILENT_BROKER: u32 = 700;

/// One finished admin command.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    fn of(out: Output) -> Run {
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The `--json` document on stdout.
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "no JSON on stdout ({e}): {:?}; stderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    /// Asserts success and returns the JSON.
    fn ok_json(&self) -> Value {
        assert!(self.ok, "failed: {}\nstdout: {}", self.stderr, self.stdout);
        self.json()
    }

    /// Asserts failure with Kafka's error `name` in the error line, and returns the JSON.
    fn failed_with(&self, name: &str) -> Value {
        assert!(!self.ok, "succeeded: {}", self.stdout);
        assert!(
            self.stderr.contains(&format!(": {name}: ")),
            "no {name} in: {}",
            self.stderr
        );
        self.json()
    }
}

/// The admin commands of every CLI test, against one quorum and three live brokers.
#[test]
fn admin_commands_against_a_quorum() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = start_cluster(tmp.path(), &[]);
    let bootstrap = c.bootstrap();
    wait_until("a leader", ELECTION_WAIT, || describe(&bootstrap, 2_000));
    // Three brokers that keep heartbeating (killed when the guard drops).
    let _brokers = spawn_loadgen(
        &bootstrap,
        &[
            "--workload",
            "brokers",
            "--brokers",
            "3",
            "--clients",
            "3",
            "--broker-id-base",
            "500",
            "--heartbeat-interval-ms",
            "300",
            "--duration",
            "600",
            "--rtt-probes",
            "0",
        ],
    );
    // Text when `json` is false; the bootstrap list goes last, after the leaf command's
    // arguments.
    let run = |args: &[&str], json: bool| {
        let mut v = args.to_vec();
        v.extend_from_slice(&["--bootstrap", bootstrap.as_str()]);
        if json {
            v.push("--json");
        }
        Run::of(corum(&v, COMMAND_TIMEOUT))
    };
    let json = |args: &[&str]| run(args, true);

    brokers_come_up(&json);
    topics(&json, &run);
    configs(&json, &run);
    features(&json, &run);
    leaders(&json, &run);
    brokers(&c, &json, &run);
}

/// `brokers list` shows the three simulated brokers once they are unfenced.
fn brokers_come_up(json: &dyn Fn(&[&str]) -> Run) {
    let start = Instant::now();
    loop {
        let list = json(&["brokers", "list"]).ok_json();
        assert!(list["controller_id"].as_u64().is_some(), "{list}");
        let active: Vec<u64> = list["brokers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["state"] == "active")
            .map(|b| b["id"].as_u64().unwrap())
            .collect();
        if active == BROKERS {
            let b = &list["brokers"][0];
            assert_eq!(b["fenced"], false, "{list}");
            assert_eq!(b["listeners"].as_array().unwrap().len(), 1, "{list}");
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "brokers never all active: {list}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// create (defaults, explicit, by assignment, validate-only, refused), list, describe,
/// delete by name and by id.
fn topics(json: &dyn Fn(&[&str]) -> Run, run: &dyn Fn(&[&str], bool) -> Run) {
    let created = json(&[
        "topics",
        "create",
        "orders",
        "--partitions",
        "2",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=1000",
    ])
    .ok_json();
    let t = &created["topics"][0];
    assert_eq!(
        (&t["name"], &t["partitions"], &t["replication_factor"]),
        (&Value::from("orders"), &Value::from(2), &Value::from(3)),
        "{created}"
    );
    assert_eq!(t["error"], Value::Null);
    let orders_id = t["topic_id"].as_str().unwrap().to_owned();

    // Text output, and the same name again.
    let text = run(&["topics", "create", "shipments"], false);
    assert!(text.ok, "{}", text.stderr);
    assert!(
        text.stdout
            .starts_with("Created topic \"shipments\" (topic id "),
        "{}",
        text.stdout
    );
    let again = json(&["topics", "create", "orders"]).failed_with("TOPIC_ALREADY_EXISTS");
    assert_eq!(again["topics"][0]["error"]["code"], 36);
    assert!(run(&["topics", "create", "orders"], false)
        .stderr
        .contains("topic \"orders\": TOPIC_ALREADY_EXISTS: "));

    json(&["topics", "create", "bad", "--config", "no.such.key=1"]).failed_with("INVALID_CONFIG");
    json(&["topics", "create", "big", "--replication-factor", "4"])
        .failed_with("INVALID_REPLICATION_FACTOR");
    json(&[
        "topics",
        "create",
        "odd",
        "--replica-assignment",
        "500:501,999:500",
    ])
    .failed_with("INVALID_REPLICA_ASSIGNMENT");
    let v = json(&["topics", "create", "dry", "--validate-only"]).ok_json();
    assert_eq!(v["validate_only"], true);
    assert_eq!(v["topics"][0]["error"], Value::Null);

    let placed = json(&[
        "topics",
        "create",
        "placed",
        "--replica-assignment",
        "502:500,501:502",
    ])
    .ok_json();
    assert_eq!(placed["topics"][0]["partitions"], 2);
    assert_eq!(placed["topics"][0]["replication_factor"], 2);

    // Bad arguments are refused before anything is sent.
    let usage = run(
        &["topics", "create", "x", "--replica-assignment", "a:b"],
        false,
    );
    assert!(
        !usage.ok && usage.stderr.contains("not a broker id"),
        "{}",
        usage.stderr
    );

    // list: every created topic and none of the refused or validate-only ones.
    let list = json(&["topics", "list"]).ok_json();
    let names: Vec<&str> = list["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["orders", "placed", "shipments"], "{list}");
    let text = run(&["topics", "list"], false);
    assert_eq!(text.stdout, "orders\nplaced\nshipments\n");

    // describe: partitions on the live brokers, the assignment as given.
    let d = json(&["topics", "describe", "orders", "placed"]).ok_json();
    let orders = &d["topics"][0];
    assert_eq!(orders["topic_id"].as_str(), Some(orders_id.as_str()));
    assert_eq!(orders["partition_count"], 2);
    assert_eq!(orders["replication_factor"], 3);
    for p in orders["partitions"].as_array().unwrap() {
        let mut replicas: Vec<u64> = p["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_u64().unwrap())
            .collect();
        assert!(BROKERS.contains(&p["leader"].as_u64().unwrap()), "{d}");
        assert_eq!(
            p["leader"], p["replicas"][0],
            "the preferred replica leads: {d}"
        );
        replicas.sort_unstable();
        assert_eq!(replicas, BROKERS, "{d}");
    }
    let placed = &d["topics"][1]["partitions"];
    assert_eq!(placed[0]["replicas"], serde_json::json!([502, 500]), "{d}");
    assert_eq!(placed[1]["replicas"], serde_json::json!([501, 502]), "{d}");
    assert_eq!(placed[0]["leader"], 502, "{d}");
    let text = run(&["topics", "describe", "orders"], false);
    assert!(
        text.stdout.starts_with(&format!(
            "Topic: orders\tTopicId: {orders_id}\tPartitionCount: 2\tReplicationFactor: 3\n"
        )),
        "{}",
        text.stdout
    );
    assert_eq!(text.stdout.lines().count(), 3, "{}", text.stdout);
    let by_id = json(&["topics", "describe", "--id", &orders_id]).ok_json();
    assert_eq!(by_id["topics"][0]["name"], "orders");
    let all = json(&["topics", "describe"]).ok_json();
    assert_eq!(all["topics"].as_array().unwrap().len(), 3, "{all}");
    let unknown =
        json(&["topics", "describe", "orders", "nope"]).failed_with("UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(
        unknown["topics"][0]["name"], "orders",
        "known topics are still shown"
    );
    assert_eq!(unknown["topics"][1]["error"]["code"], 3);

    // delete: by id and by name; then they are gone from list.
    let shipments_id = all["topics"][2]["topic_id"].as_str().unwrap().to_owned();
    let deleted = json(&["topics", "delete", "--id", &shipments_id]).ok_json();
    assert_eq!(deleted["topics"][0]["name"], "shipments");
    // Deletion has two phases: until the second is committed, deleting again is refused as
    // "being deleted"; then the topic is unknown.
    let start = Instant::now();
    loop {
        let again = json(&["topics", "delete", "shipments"]);
        assert!(!again.ok, "deleted twice: {}", again.stdout);
        if !again.stderr.contains("is being deleted") {
            again.failed_with("UNKNOWN_TOPIC_OR_PARTITION");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never deleted: {}",
            again.stderr
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    json(&["topics", "delete", "--id", &shipments_id]).failed_with("UNKNOWN_TOPIC_ID");
    let list = json(&["topics", "list"]).ok_json();
    assert_eq!(list["topics"].as_array().unwrap().len(), 2, "{list}");
}

/// The names and sources of one resource's described configs.
fn config_rows(d: &Value, i: usize) -> Vec<(String, String, String)> {
    d["resources"][i]["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["value"].as_str().unwrap_or("").to_owned(),
                c["source"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// describe (own values, --all, every topic, the brokers' default), alter (set, list value,
/// delete), and the refusals.
fn configs(json: &dyn Fn(&[&str]) -> Run, run: &dyn Fn(&[&str], bool) -> Run) {
    let topic = ["--entity-type", "topics", "--entity-name", "orders"];
    let describe = |extra: &[&str]| {
        let mut v = vec!["configs", "describe"];
        v.extend_from_slice(&topic);
        v.extend_from_slice(extra);
        json(&v).ok_json()
    };
    // The config given at creation is the topic's own value.
    let d = describe(&[]);
    assert_eq!(
        config_rows(&d, 0),
        [(
            "retention.ms".to_owned(),
            "1000".to_owned(),
            "DYNAMIC_TOPIC_CONFIG".to_owned()
        )],
        "{d}"
    );
    let all = describe(&["--all"]);
    let rows = config_rows(&all, 0);
    assert!(rows.len() > 1, "{all}");
    assert!(
        rows.iter()
            .any(|(k, _, s)| k == "cleanup.policy" && s == "DEFAULT_CONFIG"),
        "{all}"
    );

    let mut alter = vec!["configs", "alter"];
    alter.extend_from_slice(&topic);
    let mut set = alter.clone();
    set.extend_from_slice(&[
        "--add-config",
        "cleanup.policy=[compact,delete],max.message.bytes=2048",
        "--delete-config",
        "retention.ms",
    ]);
    let altered = json(&set).ok_json();
    assert_eq!(altered["resources"][0]["entity_name"], "orders");
    assert_eq!(altered["resources"][0]["error"], Value::Null);
    let mut rows = config_rows(&describe(&[]), 0);
    rows.sort();
    assert_eq!(
        rows,
        [
            (
                "cleanup.policy".to_owned(),
                "compact,delete".to_owned(),
                "DYNAMIC_TOPIC_CONFIG".to_owned()
            ),
            (
                "max.message.bytes".to_owned(),
                "2048".to_owned(),
                "DYNAMIC_TOPIC_CONFIG".to_owned()
            )
        ]
    );
    let text = run(&set[..], false);
    assert_eq!(text.stdout, "Completed updating config for topic orders.\n");

    // Refusals: an unknown key, a bad value, an unknown topic. Nothing changes.
    let mut bad_key = alter.clone();
    bad_key.extend_from_slice(&["--add-config", "no.such.key=1"]);
    let refused = json(&bad_key).failed_with("INVALID_CONFIG");
    assert_eq!(refused["resources"][0]["error"]["code"], 40);
    let mut bad_value = alter.clone();
    bad_value.extend_from_slice(&["--add-config", "max.message.bytes=lots"]);
    json(&bad_value).failed_with("INVALID_CONFIG");
    assert_eq!(config_rows(&describe(&[]), 0).len(), 2);
    json(&[
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "nope",
        "--add-config",
        "retention.ms=1",
    ])
    .failed_with("UNKNOWN_TOPIC_OR_PARTITION");
    json(&[
        "configs",
        "describe",
        "--entity-type",
        "topics",
        "--entity-name",
        "nope",
    ])
    .failed_with("UNKNOWN_TOPIC_OR_PARTITION");

    // Every topic at once: one resource per live topic.
    let every = json(&["configs", "describe", "--entity-type", "topics"]).ok_json();
    let names: Vec<&str> = every["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["entity_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["orders", "placed"], "{every}");

    // The brokers' default: set there, inherited by every broker.
    json(&[
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.ms=5000",
    ])
    .ok_json();
    let d = json(&[
        "configs",
        "describe",
        "--entity-type",
        "brokers",
        "--entity-default",
    ])
    .ok_json();
    assert_eq!(d["resources"][0]["entity_name"], Value::Null);
    // With `min.insync.replicas`, which a cluster formatted at 4.1 (eligible leader replicas
    // on) starts with, as Kafka's first controller writes it.
    let row = |k: &str, v: &str| {
        (
            k.to_owned(),
            v.to_owned(),
            "DYNAMIC_DEFAULT_BROKER_CONFIG".to_owned(),
        )
    };
    assert_eq!(
        config_rows(&d, 0),
        [
            row("log.retention.ms", "5000"),
            row("min.insync.replicas", "1")
        ]
    );
    let b = json(&[
        "configs",
        "describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "500",
        "--all",
    ])
    .ok_json();
    assert!(
        config_rows(&b, 0).contains(&(
            "log.retention.ms".to_owned(),
            "5000".to_owned(),
            "DYNAMIC_DEFAULT_BROKER_CONFIG".to_owned()
        )),
        "{b}"
    );
    // Without a name, every registered broker.
    let every = json(&["configs", "describe", "--entity-type", "brokers"]).ok_json();
    let names: Vec<&str> = every["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["entity_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["500", "501", "502"], "{every}");
    // Alter needs a named entity.
    let unnamed = run(
        &[
            "configs",
            "alter",
            "--entity-type",
            "brokers",
            "--add-config",
            "log.retention.ms=1",
        ],
        false,
    );
    assert!(
        !unnamed.ok && unnamed.stderr.contains("--entity-name"),
        "{}",
        unnamed.stderr
    );
}

/// The finalized level of metadata.version in a `features describe --json`.
fn metadata_version(d: &Value) -> Option<u64> {
    d["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "metadata.version")
        .and_then(|f| f["finalized_level"].as_u64())
}

/// describe, downgrade, upgrade, dry run, and the refusals (an upgrade that lowers the level,
/// a level no controller supports, a level under a finalized feature's dependency).
fn features(json: &dyn Fn(&[&str]) -> Run, run: &dyn Fn(&[&str], bool) -> Run) {
    let d = json(&["features", "describe"]).ok_json();
    let mv = d["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "metadata.version")
        .unwrap_or_else(|| panic!("metadata.version not listed: {d}"));
    assert_eq!(mv["supported_min_level"], 7, "{d}");
    assert_eq!(mv["supported_max_level"], 27, "{d}");

    // A downgrade may set any supported level, whatever is finalized now, but not one below
    // what a finalized feature depends on: eligible leader replicas (on at 4.1) need 4.0-IV1
    // (23), unless the same request turns them off.
    let refused = json(&["features", "downgrade", "--feature", "metadata.version=10"]);
    refused.failed_with("INVALID_UPDATE_VERSION");
    assert!(
        refused
            .stderr
            .contains("depends on metadata.version level 23"),
        "{}",
        refused.stderr
    );
    let down = json(&[
        "features",
        "downgrade",
        "--feature",
        "eligible.leader.replicas.version=0",
        "--feature",
        "metadata.version=10",
    ])
    .ok_json();
    let level_of = |name: &str| {
        down["features"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {down}"))["level"]
            .clone()
    };
    assert_eq!(level_of("metadata.version"), 10);
    assert_eq!(level_of("eligible.leader.replicas.version"), 0);
    assert_eq!(
        metadata_version(&json(&["features", "describe"]).ok_json()),
        Some(10)
    );
    let up = run(
        &["features", "upgrade", "--feature", "metadata.version=20"],
        false,
    );
    assert_eq!(
        up.stdout, "metadata.version was upgraded to 20.\n",
        "{}",
        up.stderr
    );
    let d = json(&["features", "describe"]).ok_json();
    assert_eq!(metadata_version(&d), Some(20));
    assert!(d["finalized_epoch"].as_u64().is_some(), "{d}");

    json(&["features", "upgrade", "--feature", "metadata.version=15"])
        .failed_with("INVALID_UPDATE_VERSION");
    json(&["features", "upgrade", "--feature", "metadata.version=99"])
        .failed_with("INVALID_UPDATE_VERSION");
    let dry = json(&[
        "features",
        "upgrade",
        "--feature",
        "metadata.version=27",
        "--dry-run",
    ])
    .ok_json();
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        metadata_version(&json(&["features", "describe"]).ok_json()),
        Some(20)
    );
    let text = run(&["features", "describe"], false);
    assert!(
        text.stdout.contains(
            "Feature: metadata.version\tSupportedMinVersion: 7\tSupportedMaxVersion: 27\tFinalizedVersionLevel: 20\t"
        ),
        "{}",
        text.stdout
    );
}

/// Elections whose leader is already in place, on an unknown partition, and over every
/// partition.
fn leaders(json: &dyn Fn(&[&str]) -> Run, run: &dyn Fn(&[&str], bool) -> Run) {
    let one = [
        "leaders",
        "elect",
        "--election-type",
        "preferred",
        "--topic",
        "placed",
        "--partition",
        "1",
    ];
    let r = json(&one).ok_json();
    let p = &r["partitions"][0];
    assert_eq!(p["outcome"], "not_needed", "{r}");
    assert_eq!(p["error"]["name"], "ELECTION_NOT_NEEDED", "{r}");
    let text = run(&one, false);
    assert!(text.ok, "{}", text.stderr);
    assert_eq!(
        text.stdout,
        "Valid replica already elected for partitions placed-1\n"
    );

    json(&[
        "leaders",
        "elect",
        "--election-type",
        "preferred",
        "--topic",
        "placed",
        "--partition",
        "7",
    ])
    .failed_with("UNKNOWN_TOPIC_OR_PARTITION");
    let all = json(&[
        "leaders",
        "elect",
        "--election-type",
        "unclean",
        "--all-topic-partitions",
    ])
    .ok_json();
    assert_eq!(all["election_type"], "unclean");
    assert_eq!(
        all["partitions"],
        serde_json::json!([]),
        "every leader is in place: {all}"
    );
}

/// A fenced broker is listed as such and can be unregistered; an active or unknown one
/// cannot.
fn brokers(c: &LocalCluster, json: &dyn Fn(&[&str]) -> Run, run: &dyn Fn(&[&str], bool) -> Run) {
    register_fenced_broker(c, SILENT_BROKER);
    let list = json(&["brokers", "list"]).ok_json();
    let silent = list["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == SILENT_BROKER)
        .unwrap_or_else(|| panic!("broker {SILENT_BROKER} not listed: {list}"));
    assert_eq!(silent["state"], "fenced", "{list}");
    let text = run(&["brokers", "list"], false);
    assert!(
        text.stdout.starts_with("ActiveController: "),
        "{}",
        text.stdout
    );
    assert_eq!(text.stdout.lines().count(), 2 + 4, "{}", text.stdout);

    let id = SILENT_BROKER.to_string();
    let done = run(&["brokers", "unregister", &id], false);
    assert_eq!(
        done.stdout,
        format!("Broker {id} is no longer registered.\n"),
        "{}",
        done.stderr
    );
    let gone = json(&["brokers", "unregister", &id]).failed_with("BROKER_ID_NOT_REGISTERED");
    assert_eq!(gone["broker_id"], SILENT_BROKER);
    json(&["brokers", "unregister", "500"]).failed_with("INVALID_REQUEST");
    let list = json(&["brokers", "list"]).ok_json();
    let ids: Vec<u64> = list["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, BROKERS, "{list}");
}

/// Registers broker `id` with one heartbeat and never sends another: it stays fenced.
fn register_fenced_broker(c: &LocalCluster, id: u32) {
    let config = ClientConfig {
        request_timeout: Duration::from_secs(3),
        retry_deadline: Duration::from_secs(10),
        ..ClientConfig::new(client_addrs(c))
    };
    on_executor(Duration::from_secs(30), move || async move {
        let client = ControllerClient::connect(config).await.unwrap();
        let req = BrokerHeartbeatRequest {
            broker_id: NodeId(id),
            broker_epoch: None,
            incarnation_id: Uuid([7; 16]),
            listeners: vec![ListenerV1 {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }],
            features: supported_features(),
            rack: None,
            next_metadata_offset: LogOffset(0),
            want_fence: false,
            want_shutdown: false,
        };
        match client.call(RequestBody::BrokerHeartbeat(req)).await {
            Ok(ResponseBody::BrokerHeartbeat(_)) => {}
            other => panic!("registering broker {id}: {other:?}"),
        }
    });
}
