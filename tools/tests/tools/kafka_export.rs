//! `corum dump-log --kafka-export` on a real quorum's data directory, read back by Kafka's own
//! tools.
//!
//! A 3-node dynamic quorum with three simulated brokers gets topics (one deleted again), topic,
//! broker and cluster-default configs; then a burst of config writes until node 1 has taken a
//! snapshot and deleted the log segments below it (1 MiB segments, 64 KiB of records between
//! snapshots, no retention); then the leader hands over and more topics and configs follow.
//! The quorum stops and node 1's directory is exported (which writes nothing into it, and a
//! second export into the same place is refused). Kafka 4.1.2's `kafka.tools.DumpLogSegments
//! --cluster-metadata-decoder` (what `kafka-dump-log.sh` runs) must decode every batch and
//! every record of the segment and of the `.checkpoint` without an error, and what it prints
//! must match corum's own view: the batches (base offset, leader epoch, record count, control)
//! as `corum dump-log` lists them; at every offset, the Kafka record (or control record) type
//! of corum's record there; the snapshot's id, layout, records and voters as node 1's snapshot
//! holds them; and the topics (names, ids, partitions), configs, brokers and features that
//! replaying the snapshot and then the log after it gives are `corum shell --dir`'s. Kafka's
//! metadata shell (`org.apache.kafka.shell.MetadataShell --snapshot ... tree /image`) loads the
//! snapshot into corum's image at it: every partition's replicas, ISR, leader and epochs, the
//! brokers, configs, controllers and `metadata.version`.
//!
//! Run alone: `cargo test -p corum-tools --test tools kafka_export -- --nocapture`. Needs what
//! `compat/install.sh` installs (Java and Kafka's jars, the metadata shell's among them):
//! without them the test fails, saying so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use corum_controller::records::ConfigResourceType;
use corum_controller::records::{aligned, decode_batch};
use corum_controller::{ArchivedMetadataRecord as R, MetadataImage};
use corum_engine::disk::StdDisk;
use corum_engine::log::LogConfig;
use corum_node::data_dir::{visit_frames, DataDir, Mode};
use corum_raft::control::ControlRecord;
use serde_json::Value;

use crate::common::*;

const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
const ELECTION_WAIT: Duration = Duration::from_secs(20);
/// Kafka's tools start a JVM each; decoding tens of thousands of records takes seconds.
const JAVA_TIMEOUT: Duration = Duration::from_secs(180);
/// The burst of config writes runs until node 1 deleted its first segment, at most this long.
const COMPACTION_WAIT: Duration = Duration::from_secs(90);

/// Small snapshot intervals and segments, no retention: the burst makes node 1 write
/// snapshots and delete the segments below the newest.
const SETTINGS: [(&str, &str); 3] = [
    ("metadata.log.max.record.bytes.between.snapshots", "65536"),
    ("metadata.log.segment.bytes", "1048576"),
    ("metadata.max.retention.bytes", "0"),
];

/// The simulated brokers' ids.
const BROKERS: [u64; 3] = [500, 501, 502];

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tools/ has a parent")
}

/// Fails (never skips) unless Java and Kafka's jars, the metadata shell's included, are there.
fn require_jars(compat: &Path) {
    let fix = "run compat/install.sh first (it needs a JDK 17 or newer and puts Kafka 4.1.2's \
               jars, kafka-shell among them, in compat/jars)";
    require_java(fix);
    let jars: Vec<String> = std::fs::read_dir(compat.join("jars"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    for prefix in ["kafka_2.13-", "kafka-shell-"] {
        assert!(
            jars.iter()
                .any(|j| j.starts_with(prefix) && j.ends_with(".jar")),
            "no {prefix}*.jar in {}: {fix}",
            compat.join("jars").display()
        );
    }
}

/// Runs one of Kafka's tools (`class` with `args`) from compat/jars, bounded.
fn java(class: &str, args: &[&str]) -> Output {
    let child = kafka_tool(class, "512m")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning java {class}: {e}"));
    Running::new(child).wait(JAVA_TIMEOUT)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `corum` with `args`, asserting success; returns stdout.
fn corum_ok(args: &[&str]) -> String {
    let out = corum(args, COMMAND_TIMEOUT);
    assert!(
        out.status.success(),
        "corum {args:?} failed: {}\n{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    text(&out.stdout)
}

/// One batch as both sides see it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct BatchView {
    base_offset: u64,
    epoch: u64,
    count: u64,
    control: bool,
}

/// The batches `corum dump-log --dir` lists: `position offset epoch count bytes control crc ok`.
fn corum_batches(dump: &str) -> Vec<BatchView> {
    dump.lines()
        .filter(|l| l.trim_end().ends_with(" ok"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 8, "a batch line of corum dump-log: {l:?}");
            BatchView {
                base_offset: f[1].parse().expect("an offset"),
                epoch: f[2].parse().expect("an epoch"),
                count: f[3].parse().expect("a count"),
                control: f[5].parse().expect("a bool"),
            }
        })
        .collect()
}

/// What corum itself holds in node `dir` (decoded in this process, read-only): the Kafka
/// type of every record of its log by offset (a metadata record as
/// `corum_kafka::log::records` maps it, a control record by the name `DumpLogSegments` prints
/// for its type), and its newest snapshot.
struct CorumView {
    types: BTreeMap<u64, &'static str>,
    snapshot: CorumSnapshot,
}

struct CorumSnapshot {
    end_offset: u64,
    epoch: u64,
    /// The Kafka type of each of its records, in order.
    types: Vec<&'static str>,
    image: MetadataImage,
    /// (id, directory id, Raft endpoints as `NAME://HOST:PORT`) of each voter.
    voters: Vec<(u32, String, Vec<String>)>,
    kraft_version: u16,
}

fn corum_view(dir: &Path) -> CorumView {
    futures_lite::future::block_on(async {
        let data = DataDir::open(
            StdDisk::read_only(),
            dir,
            LogConfig::default(),
            Mode::ReadOnly,
        )
        .await
        .expect("node 1's directory opens");
        let mut types = BTreeMap::new();
        visit_frames(&data.log, data.log.start_offset(), data.log_end, |frame| {
            let h = frame.header();
            let base = h.base_offset.get();
            if h.attributes.is_control() {
                let records = corum_raft::control::decode(frame.payload())
                    .expect("corum's control records decode");
                for (i, r) in records.iter().enumerate() {
                    let t = match r {
                        ControlRecord::LeaderChange(_) => "LeaderChange",
                        ControlRecord::Voters(_) => "KRaftVoters",
                        ControlRecord::KRaftVersion(_) => "KRaftVersion",
                    };
                    types.insert(base + i as u64, t);
                }
                return Ok(());
            }
            let payload = aligned(frame.payload());
            let batch = decode_batch(&payload).expect("corum's records decode");
            for (i, r) in batch.iter().enumerate() {
                types.insert(base + i as u64, kafka_type(r));
            }
            Ok::<(), corum_node::data_dir::DataDirError>(())
        })
        .await
        .expect("node 1's log reads");
        let snap = data.snapshot.as_ref().expect("node 1 holds a snapshot");
        let bytes = aligned(&snap.data);
        let records = decode_batch(&bytes).expect("corum's snapshot decodes");
        let image = MetadataImage::from_snapshot(snap.id.end_offset, records)
            .expect("corum's snapshot loads");
        let voters = snap
            .voters
            .voters()
            .iter()
            .map(|v| {
                let endpoints = v
                    .endpoints
                    .iter()
                    .map(|e| format!("{}://{}:{}", e.listener, e.host, e.port))
                    .collect();
                (v.key.id.0, v.key.directory_id.to_string(), endpoints)
            })
            .collect();
        CorumView {
            types,
            snapshot: CorumSnapshot {
                end_offset: snap.id.end_offset.get(),
                epoch: snap.id.epoch.0,
                types: records.iter().map(kafka_type).collect(),
                image,
                voters,
                kraft_version: snap.kraft_version,
            },
        }
    })
}

/// The Kafka metadata record a corum record becomes (the table of `corum_kafka::log::records`).
fn kafka_type(r: &R) -> &'static str {
    match r {
        R::RegisterBroker(_) | R::RegisterBrokerV2(_) => "REGISTER_BROKER_RECORD",
        R::UnregisterBroker(_) => "UNREGISTER_BROKER_RECORD",
        R::FenceBroker(_) => "FENCE_BROKER_RECORD",
        R::UnfenceBroker(_) => "UNFENCE_BROKER_RECORD",
        R::BrokerRegistrationChange(_) | R::BrokerRegistrationChangeV2(_) => {
            "BROKER_REGISTRATION_CHANGE_RECORD"
        }
        R::Topic(t) if t.deleting => "NO_OP_RECORD",
        R::Topic(_) => "TOPIC_RECORD",
        R::RemoveTopic(_) => "REMOVE_TOPIC_RECORD",
        R::Partition(_) | R::PartitionV2(_) | R::PartitionV3(_) => "PARTITION_RECORD",
        R::PartitionLeaderChange(_)
        | R::PartitionIsrChange(_)
        | R::PartitionChange(_)
        | R::PartitionChangeV2(_) => "PARTITION_CHANGE_RECORD",
        R::ClearElr(_) => "CLEAR_ELR_RECORD",
        R::AccessControlEntry(_) => "ACCESS_CONTROL_ENTRY_RECORD",
        R::RemoveAccessControlEntry(_) => "REMOVE_ACCESS_CONTROL_ENTRY_RECORD",
        R::UserScramCredential(_) => "USER_SCRAM_CREDENTIAL_RECORD",
        R::RemoveUserScramCredential(_) => "REMOVE_USER_SCRAM_CREDENTIAL_RECORD",
        R::Config(_) => "CONFIG_RECORD",
        R::FeatureLevel(_) => "FEATURE_LEVEL_RECORD",
        R::ProducerIds(_) => "PRODUCER_IDS_RECORD",
        R::NoOp(_) => "NO_OP_RECORD",
        R::RegisterController(_) => "REGISTER_CONTROLLER_RECORD",
    }
}

/// One file as `DumpLogSegments` printed it.
#[derive(Debug, Default)]
struct KafkaFile {
    path: String,
    /// `Log starting offset: N` of a segment, or the `(end offset, epoch)` of a snapshot.
    log_start: Option<u64>,
    snapshot_id: Option<(u64, u64)>,
    batches: Vec<BatchView>,
    /// Offset, type (a metadata record's `type`, or a control record's kind) and the
    /// metadata record's JSON `data`.
    records: Vec<(u64, String, Value)>,
}

/// The control records `DumpLogSegments` prints by kind, each followed by its JSON.
const CONTROL_KINDS: [&str; 5] = [
    "SnapshotHeader",
    "SnapshotFooter",
    "KRaftVersion",
    "KRaftVoters",
    "LeaderChange",
];

/// A field `name: value` of a `DumpLogSegments` line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let key = format!("{name}: ");
    let at = line
        .find(&key)
        .unwrap_or_else(|| panic!("no {name:?} in {line:?}"))
        + key.len();
    line[at..]
        .split_whitespace()
        .next()
        .unwrap_or_else(|| panic!("no value of {name:?} in {line:?}"))
}

/// Parses `DumpLogSegments --cluster-metadata-decoder` output, failing on anything Kafka
/// could not decode: an invalid batch, a record it printed an error for in place of its JSON
/// (`Error at OFFSET, skipping. ...`), trailing bytes (`Found N invalid bytes ...`), any line
/// this parser does not know.
fn parse_dump(out: &str) -> Vec<KafkaFile> {
    let mut files: Vec<KafkaFile> = Vec::new();
    for line in out.lines() {
        if let Some(path) = line.strip_prefix("Dumping ") {
            files.push(KafkaFile {
                path: path.to_owned(),
                ..KafkaFile::default()
            });
            continue;
        }
        let file = files.last_mut().expect("a Dumping line first");
        if let Some(start) = line.strip_prefix("Log starting offset: ") {
            file.log_start = Some(start.trim().parse().expect("an offset"));
        } else if let Some(id) = line.strip_prefix("Snapshot end offset: ") {
            let (end, epoch) = id.split_once(", epoch: ").expect("end offset, epoch");
            file.snapshot_id = Some((
                end.trim().parse().expect("an offset"),
                epoch.trim().parse().expect("an epoch"),
            ));
        } else if line.starts_with("baseOffset: ") {
            assert!(
                line.contains("isvalid: true"),
                "Kafka finds it invalid: {line}"
            );
            assert_eq!(field(line, "magic"), "2", "{line}");
            assert_eq!(field(line, "compresscodec"), "none", "{line}");
            let base: u64 = field(line, "baseOffset").parse().expect("an offset");
            let last: u64 = field(line, "lastOffset").parse().expect("an offset");
            let count: u64 = field(line, "count").parse().expect("a count");
            assert_eq!(last + 1 - base, count, "{line}");
            file.batches.push(BatchView {
                base_offset: base,
                epoch: field(line, "partitionLeaderEpoch")
                    .parse()
                    .expect("an epoch"),
                count,
                control: field(line, "isControl").parse().expect("a bool"),
            });
        } else if let Some(rest) = line.strip_prefix("| offset: ") {
            let offset: u64 = rest
                .split_whitespace()
                .next()
                .and_then(|o| o.parse().ok())
                .unwrap_or_else(|| panic!("an offset in {line:?}"));
            let (kind, data) = if let Some(at) = line.find(" payload: ") {
                let json: Value = serde_json::from_str(&line[at + " payload: ".len()..])
                    .unwrap_or_else(|e| panic!("Kafka could not decode ({e}): {line}"));
                let kind = json["type"].as_str().expect("a type").to_owned();
                (kind, json["data"].clone())
            } else {
                // A control record: its kind (LeaderChange with a colon), then its message
                // as JSON.
                let (kind, json) = CONTROL_KINDS
                    .iter()
                    .find_map(|k| {
                        [format!(" {k} {{"), format!(" {k}: {{")]
                            .iter()
                            .find_map(|m| line.find(m.as_str()).map(|at| &line[at + m.len() - 1..]))
                            .map(|json| (*k, json))
                    })
                    .unwrap_or_else(|| panic!("a record line of no known kind: {line}"));
                let data: Value = serde_json::from_str(json)
                    .unwrap_or_else(|e| panic!("Kafka could not decode ({e}): {line}"));
                (kind.to_owned(), data)
            };
            file.records.push((offset, kind, data));
        } else if !line.trim().is_empty() {
            panic!("a line DumpLogSegments is not known to print: {line:?}");
        }
    }
    files
}

/// What a Kafka broker's metadata image would hold after replaying records (the parts
/// compared with `corum shell --dir --json`).
#[derive(Debug, Default, PartialEq, Eq)]
struct KafkaImage {
    /// Topic id → (name, partition ids).
    topics: BTreeMap<String, (String, BTreeSet<u64>)>,
    /// (resource type, resource name) → key → value.
    configs: BTreeMap<(String, String), BTreeMap<String, String>>,
    /// Broker id → (epoch, fenced).
    brokers: BTreeMap<u64, (u64, bool)>,
    /// Feature name → level.
    features: BTreeMap<String, u64>,
}

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no number {key:?} in {v}"))
}

fn s(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no string {key:?} in {v}"))
        .to_owned()
}

impl KafkaImage {
    /// Replays one decoded metadata record (control records change nothing here).
    fn replay(&mut self, kind: &str, d: &Value) {
        match kind {
            "TOPIC_RECORD" => {
                self.topics
                    .insert(s(d, "topicId"), (s(d, "name"), BTreeSet::new()));
            }
            "REMOVE_TOPIC_RECORD" => {
                let id = s(d, "topicId");
                let (name, _) = self
                    .topics
                    .remove(&id)
                    .unwrap_or_else(|| panic!("RemoveTopic of unknown topic {id}"));
                self.configs.remove(&("topic".to_owned(), name));
            }
            "PARTITION_RECORD" => {
                let id = s(d, "topicId");
                self.topics
                    .get_mut(&id)
                    .unwrap_or_else(|| panic!("a partition of unknown topic {id}"))
                    .1
                    .insert(u(d, "partitionId"));
            }
            "CONFIG_RECORD" => {
                let resource = match u(d, "resourceType") {
                    2 => "topic",
                    4 => "broker",
                    t => panic!("config resource type {t}"),
                };
                let key = (resource.to_owned(), s(d, "resourceName"));
                match d["value"].as_str() {
                    Some(v) => {
                        self.configs
                            .entry(key)
                            .or_default()
                            .insert(s(d, "name"), v.to_owned());
                    }
                    None => {
                        if let Some(c) = self.configs.get_mut(&key) {
                            c.remove(&s(d, "name"));
                            if c.is_empty() {
                                self.configs.remove(&key);
                            }
                        }
                    }
                }
            }
            "REGISTER_BROKER_RECORD" => {
                let fenced = d["fenced"].as_bool().expect("fenced");
                self.brokers
                    .insert(u(d, "brokerId"), (u(d, "brokerEpoch"), fenced));
            }
            "UNREGISTER_BROKER_RECORD" => {
                self.brokers.remove(&u(d, "brokerId"));
            }
            "FENCE_BROKER_RECORD" | "UNFENCE_BROKER_RECORD" => {
                let b = self.brokers.get_mut(&u(d, "id")).expect("a known broker");
                b.1 = kind == "FENCE_BROKER_RECORD";
            }
            "BROKER_REGISTRATION_CHANGE_RECORD" => {
                let b = self
                    .brokers
                    .get_mut(&u(d, "brokerId"))
                    .expect("a known broker");
                match d["fenced"].as_i64().expect("fenced") {
                    1 => b.1 = true,
                    -1 => b.1 = false,
                    _ => {}
                }
            }
            "FEATURE_LEVEL_RECORD" => {
                let level = u(d, "featureLevel");
                if level == 0 {
                    self.features.remove(&s(d, "name"));
                } else {
                    self.features.insert(s(d, "name"), level);
                }
            }
            _ => {}
        }
    }

    /// The same parts of `corum shell --dir --json`'s image.
    fn of_shell(j: &Value) -> KafkaImage {
        let arr = |k: &str| j[k].as_array().unwrap_or_else(|| panic!("no {k} in {j}"));
        let topics = arr("topics")
            .iter()
            .map(|t| {
                assert_eq!(t["deleting"], false, "{t}");
                let n = u(t, "partition_count");
                (s(t, "topic_id"), (s(t, "name"), (0..n).collect()))
            })
            .collect();
        let configs = arr("configs")
            .iter()
            .map(|c| {
                let values = c["configs"]
                    .as_object()
                    .expect("configs")
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().expect("a value").to_owned()))
                    .collect();
                ((s(c, "resource_type"), s(c, "resource_name")), values)
            })
            .collect();
        let brokers = arr("brokers")
            .iter()
            .map(|b| (u(b, "id"), (u(b, "epoch"), b["state"] == "fenced")))
            .collect();
        let features = arr("features")
            .iter()
            .map(|f| (s(f, "name"), u(f, "level")))
            .collect();
        KafkaImage {
            topics,
            configs,
            brokers,
            features,
        }
    }
}

/// The metadata shell's `tree` output as path → value: a line ending with `:` names a node
/// (two spaces of indentation a level), any other line is the value of the node above it.
fn parse_tree(out: &str) -> BTreeMap<String, String> {
    let mut path: Vec<String> = Vec::new();
    let mut values = BTreeMap::new();
    for line in out.lines() {
        let indent = line.len() - line.trim_start().len();
        assert_eq!(indent % 2, 0, "tree indentation: {line:?}");
        let depth = indent / 2;
        let t = line.trim();
        if let Some(name) = t.strip_suffix(':') {
            assert!(depth <= path.len(), "a node below nothing: {line:?}");
            path.truncate(depth);
            path.push(name.to_owned());
        } else {
            assert_eq!(depth, path.len(), "a value beside its node: {line:?}");
            values.insert(path.join("/"), t.to_owned());
        }
    }
    values
}

/// `name=VALUE` in a `toString()` of Kafka's (`VALUE` up to the next `, ` or `)`, or a
/// bracketed list).
fn attr<'a>(text: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=");
    let at = [format!("({key}"), format!(", {key}")]
        .iter()
        .find_map(|k| text.find(k.as_str()).map(|at| at + k.len()))
        .unwrap_or_else(|| panic!("no {name} in {text}"));
    let rest = &text[at..];
    let end = if rest.starts_with('[') {
        rest.find(']').expect("a closed list") + 1
    } else {
        rest.find([',', ')']).unwrap_or(rest.len())
    };
    &rest[..end]
}

/// A partition as Kafka's `PartitionRegistration` prints it and corum's image holds it.
fn partition_string(replicas: &[u32], isr: &[u32], leader: i64, le: u32, pe: u32) -> String {
    let list = |v: &[u32]| {
        format!(
            "[{}]",
            v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        )
    };
    format!(
        "replicas={} isr={} leader={leader} leaderEpoch={le} partitionEpoch={pe}",
        list(replicas),
        list(isr)
    )
}

/// The parts of an image the metadata shell's `tree /image` shows, as strings to compare.
#[derive(Debug, Default, PartialEq, Eq)]
struct ShellImage {
    /// Topic name → (id, partition → its replication state).
    topics: BTreeMap<String, (String, BTreeMap<u32, String>)>,
    /// Broker id → (epoch, fenced).
    brokers: BTreeMap<u64, (u64, bool)>,
    /// `TOPIC:name`, `BROKER:id` or `BROKER` → key → value.
    configs: BTreeMap<String, BTreeMap<String, String>>,
    controllers: BTreeSet<u64>,
}

impl ShellImage {
    /// From `tree /image`.
    fn of_tree(tree: &BTreeMap<String, String>) -> ShellImage {
        let mut out = ShellImage::default();
        for (path, value) in tree {
            let parts: Vec<&str> = path.split('/').collect();
            match parts[..] {
                ["topics", "byName", name, "id"] => {
                    out.topics.entry(name.to_owned()).or_default().0 = value.clone();
                }
                ["topics", "byName", name, "name"] => assert_eq!(name, value),
                ["topics", "byName", name, partition] => {
                    let p = partition_string(
                        &ids(attr(value, "replicas")),
                        &ids(attr(value, "isr")),
                        attr(value, "leader").parse().expect("a leader"),
                        attr(value, "leaderEpoch").parse().expect("an epoch"),
                        attr(value, "partitionEpoch").parse().expect("an epoch"),
                    );
                    let partition = partition.parse().expect("a partition id");
                    out.topics
                        .entry(name.to_owned())
                        .or_default()
                        .1
                        .insert(partition, p);
                }
                ["cluster", "brokers", id] => {
                    out.brokers.insert(
                        id.parse().expect("a broker id"),
                        (
                            attr(value, "epoch").parse().expect("an epoch"),
                            attr(value, "fenced").parse().expect("a bool"),
                        ),
                    );
                }
                ["cluster", "controllers", id] => {
                    out.controllers.insert(id.parse().expect("a controller id"));
                }
                ["configs", resource, key] => {
                    out.configs
                        .entry(resource.to_owned())
                        .or_default()
                        .insert(key.to_owned(), value.clone());
                }
                _ => {}
            }
        }
        out
    }

    /// From corum's own image.
    fn of_corum(image: &MetadataImage) -> ShellImage {
        let nodes = |v: &[corum_types::NodeId]| v.iter().map(|n| n.0).collect::<Vec<_>>();
        let topics = image
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let leader = p.leader.map_or(-1, |l| i64::from(l.0));
                        let s = partition_string(
                            &nodes(&p.replicas),
                            &nodes(&p.isr),
                            leader,
                            p.leader_epoch.0,
                            p.partition_epoch.0,
                        );
                        (i as u32, s)
                    })
                    .collect();
                (t.name.to_string(), (t.topic_id.0.to_string(), partitions))
            })
            .collect();
        let brokers = image
            .brokers
            .iter()
            .map(|b| (u64::from(b.broker_id.0), (b.broker_epoch.0, b.fenced)))
            .collect();
        let configs = image
            .configs
            .iter()
            .map(|(rt, name, entries)| {
                let resource = match (rt, name) {
                    (ConfigResourceType::Topic, name) => format!("TOPIC:{name}"),
                    (ConfigResourceType::Broker, "") => "BROKER".to_owned(),
                    (ConfigResourceType::Broker, id) => format!("BROKER:{id}"),
                };
                let entries = entries
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                (resource, entries)
            })
            .collect();
        let controllers = image
            .controllers
            .iter()
            .map(|c| u64::from(c.controller_id.0))
            .collect();
        ShellImage {
            topics,
            brokers,
            configs,
            controllers,
        }
    }
}

/// `[1, 2, 3]` as ids.
fn ids(list: &str) -> Vec<u32> {
    list.trim_matches(['[', ']'])
        .split(", ")
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("an id"))
        .collect()
}

/// A real quorum's log and snapshot, exported, are read by Kafka's `DumpLogSegments` and
/// metadata shell exactly as corum reads them (see the module doc).
#[test]
fn kafkas_tools_read_the_exported_log_and_snapshot() {
    let _serial = serial();
    let compat = repo_root().join("compat");
    require_jars(&compat);
    // Kept on failure (a panic leaves it for the logs), removed after a pass.
    let dir = tempfile::Builder::new()
        .prefix("corum-kafka-export.")
        .tempdir()
        .expect("a temporary directory")
        .keep();
    // A dynamic quorum (`kraft.version` 1): its log and snapshots carry the voter set.
    let mut spec = spec(&dir.join("quorum"), &SETTINGS);
    spec.dynamic = true;
    let mut c = LocalCluster::create(spec).expect("formatting the cluster");
    if let Err(e) = c.start_all() {
        panic!("starting the cluster: {e:#}\n{}", logs(&c));
    }
    let bootstrap = c.bootstrap();
    wait_until("a leader", ELECTION_WAIT, || describe(&bootstrap, 2_000));
    let admin = |args: &[&str]| {
        let mut v = args.to_vec();
        v.extend_from_slice(&["--bootstrap", bootstrap.as_str()]);
        corum_ok(&v)
    };

    // Brokers to place partitions on, heartbeating until the quorum stops.
    let brokers = spawn_loadgen(
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
    wait_until("three active brokers", Duration::from_secs(30), || {
        let list: Value = serde_json::from_str(&admin(&["brokers", "list", "--json"])).ok()?;
        let active: Vec<u64> = list["brokers"]
            .as_array()?
            .iter()
            .filter(|b| b["state"] == "active")
            .filter_map(|b| b["id"].as_u64())
            .collect();
        (active == BROKERS).then_some(())
    });

    // Before the snapshot.
    admin(&[
        "topics",
        "create",
        "orders",
        "--partitions",
        "6",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=86400000",
    ]);
    admin(&[
        "topics",
        "create",
        "payments",
        "--partitions",
        "2",
        "--replication-factor",
        "2",
    ]);
    admin(&["topics", "create", "doomed", "--partitions", "1"]);
    admin(&["topics", "delete", "doomed"]);
    admin(&[
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "payments",
        "--add-config",
        "cleanup.policy=compact,max.message.bytes=2048",
    ]);
    admin(&[
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.ms=3600000",
    ]);
    admin(&[
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "501",
        "--add-config",
        "log.cleaner.threads=2",
    ]);

    // The burst: config writes until node 1 has a snapshot and deleted its first segment.
    let node1 = c.node(1).data.clone();
    let first_segment = node1.join("@metadata-0").join(format!("{:020}.log", 0));
    let burst = spawn_loadgen(
        &bootstrap,
        &[
            "--workload",
            "configs",
            "--clients",
            "16",
            "--duration",
            "120",
        ],
    );
    let t0 = Instant::now();
    wait_until(
        "node 1 deleting its first segment below a snapshot",
        COMPACTION_WAIT,
        || (!first_segment.exists()).then_some(()),
    );
    drop(burst);
    eprintln!(
        "node 1 compacted its log after {:.1} s of config writes",
        t0.elapsed().as_secs_f64()
    );

    // After it: the leader hands over (a LeaderChange batch in a new epoch), a topic created,
    // one deleted, configs changed.
    let before = wait_until("a leader", ELECTION_WAIT, || describe(&bootstrap, 2_000));
    let (old_leader, old_epoch) = leader_of(&before);
    let stopped = c
        .terminate(old_leader, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("stopping the leader: {e:#}\n{}", logs(&c)));
    assert!(stopped.success(), "node {old_leader} exited with {stopped}");
    c.start(old_leader)
        .unwrap_or_else(|e| panic!("restarting node {old_leader}: {e:#}\n{}", logs(&c)));
    wait_until("a leader in a later epoch", ELECTION_WAIT, || {
        let d = describe(&bootstrap, 2_000)?;
        (leader_of(&d).1 > old_epoch).then_some(())
    });
    admin(&["topics", "create", "late", "--partitions", "3"]);
    admin(&[
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "orders",
        "--add-config",
        "segment.bytes=1048576",
        "--delete-config",
        "retention.ms",
    ]);
    admin(&["topics", "delete", "payments"]);
    admin(&[
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "late",
        "--add-config",
        "segment.ms=60000",
    ]);

    drop(brokers);
    for (id, r) in c.terminate_all(Duration::from_secs(30)) {
        let status = r.unwrap_or_else(|e| panic!("node {id} did not stop: {e:#}\n{}", logs(&c)));
        assert!(status.success(), "node {id} exited with {status}");
    }

    // The export.
    let out = dir.join("export");
    let node1_arg = node1.display().to_string();
    let out_arg = out.display().to_string();
    let untouched = file_tree(&node1);
    let summary = corum_ok(&["dump-log", "--dir", &node1_arg, "--kafka-export", &out_arg]);
    assert_eq!(
        file_tree(&node1),
        untouched,
        "the export wrote into node 1's directory"
    );
    eprintln!("{}", summary.trim());
    assert_eq!(summary.lines().count(), 1, "one summary line: {summary}");
    let again = corum(
        &["dump-log", "--dir", &node1_arg, "--kafka-export", &out_arg],
        COMMAND_TIMEOUT,
    );
    assert!(!again.status.success(), "a second export was not refused");
    assert!(
        text(&again.stderr).contains("is not empty"),
        "{}",
        text(&again.stderr)
    );

    let partition = out.join("__cluster_metadata-0");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&partition)
        .expect("the partition directory")
        .map(|e| e.expect("an entry").path())
        .collect();
    files.sort();
    let checkpoints: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "checkpoint"))
        .collect();
    assert_eq!(checkpoints.len(), 1, "{files:?}");
    let segments: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert_eq!(segments.len() + 1, files.len(), "{files:?}");

    // Kafka's decoder on every file.
    let list: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let dump = java(
        "kafka.tools.DumpLogSegments",
        &[
            "--cluster-metadata-decoder",
            "--deep-iteration",
            "--files",
            &list.join(","),
        ],
    );
    let dump_out = text(&dump.stdout);
    assert!(
        dump.status.success() && dump.stderr.is_empty(),
        "DumpLogSegments failed ({}): {}\n{}",
        dump.status,
        text(&dump.stderr),
        dump_out.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    let kafka = parse_dump(&dump_out);
    assert_eq!(kafka.len(), files.len());

    // corum's own view of node 1.
    let corum_dump = corum_ok(&["dump-log", "--dir", &node1_arg]);
    let shell: Value = serde_json::from_str(&corum_ok(&["shell", "--dir", &node1_arg, "--json"]))
        .expect("shell --json prints JSON");
    let snapshot_end = u(&shell, "snapshot_end");
    let log_end = u(&shell, "log_end");

    // The segments: every batch of corum's log, in order, as corum lists it.
    let expected = corum_batches(&corum_dump);
    let log_start = expected[0].base_offset;
    assert!(
        log_start > 0 && log_start <= snapshot_end,
        "the log was compacted to a start at or below the snapshot: {log_start} vs {snapshot_end}"
    );
    let mut got = Vec::new();
    let mut records = Vec::new();
    for (f, path) in kafka.iter().zip(&files) {
        assert_eq!(f.path, path.display().to_string());
        if path.extension().is_some_and(|e| e == "log") {
            let base = f.batches[0].base_offset;
            assert_eq!(f.log_start, Some(base), "named by its first batch");
            got.extend(f.batches.iter().cloned());
            records.extend(f.records.iter().cloned());
        }
    }
    assert_eq!(got, expected, "Kafka's batches are corum's");
    assert_eq!(got.last().map(|b| b.base_offset + b.count), Some(log_end));
    // At every offset, the record corum's becomes.
    let corum_side = corum_view(&node1);
    let kafka_types: BTreeMap<u64, &str> =
        records.iter().map(|(o, k, _)| (*o, k.as_str())).collect();
    assert_eq!(kafka_types.len(), records.len(), "each offset once");
    assert_eq!(
        kafka_types, corum_side.types,
        "Kafka's record types are corum's records"
    );
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in kafka_types.values() {
        *counts.entry(t).or_default() += 1;
    }
    eprintln!("log records by Kafka type: {counts:?}");

    // The snapshot: node 1's newest, named by its id, in Kafka's layout: a header batch
    // (SnapshotHeader, KRaftVersion 1, the voters), corum's records, a footer batch.
    let corum_snap = &corum_side.snapshot;
    let snap = kafka
        .iter()
        .find(|f| f.snapshot_id.is_some())
        .expect("the checkpoint");
    let (end, epoch) = snap.snapshot_id.expect("an id");
    assert_eq!((end, epoch), (corum_snap.end_offset, corum_snap.epoch));
    assert_eq!(end, snapshot_end, "the snapshot the shell starts from");
    let mut next = 0;
    for b in &snap.batches {
        assert_eq!((b.base_offset, b.epoch), (next, epoch), "{b:?}");
        next += b.count;
    }
    let kinds: Vec<&str> = snap.records.iter().map(|(_, k, _)| k.as_str()).collect();
    let body = &kinds[3..kinds.len() - 1];
    assert_eq!(
        [&kinds[..3], &kinds[kinds.len() - 1..]].concat(),
        [
            "SnapshotHeader",
            "KRaftVersion",
            "KRaftVoters",
            "SnapshotFooter"
        ]
    );
    assert_eq!(body, &corum_snap.types[..], "the records are corum's");
    assert_eq!(corum_snap.kraft_version, 1);
    assert_eq!(snap.records[1].2["kRaftVersion"], 1);
    // Each voter with its Raft endpoint, then its Kafka listener (its registration).
    let voters: Vec<(u32, String, Vec<String>)> = snap.records[2].2["voters"]
        .as_array()
        .expect("voters")
        .iter()
        .map(|v| {
            let endpoints = v["endpoints"]
                .as_array()
                .expect("endpoints")
                .iter()
                .map(|e| format!("{}://{}:{}", s(e, "name"), s(e, "host"), u(e, "port")))
                .collect();
            (u(v, "voterId") as u32, s(v, "voterDirectoryId"), endpoints)
        })
        .collect();
    let expected_voters: Vec<(u32, String, Vec<String>)> = corum_snap
        .voters
        .iter()
        .map(|(id, dir, raft)| {
            let mut endpoints = raft.clone();
            endpoints.push(format!("KAFKA://{}", c.node(*id).kafka));
            (*id, dir.clone(), endpoints)
        })
        .collect();
    assert_eq!(voters, expected_voters);
    assert_eq!(voters.len(), 3);

    // Replaying Kafka's decoding of the snapshot, then of the log after it (as a broker
    // starting from the snapshot would), gives corum's image at the log's end.
    let mut image = KafkaImage::default();
    for (_, kind, data) in &snap.records[3..snap.records.len() - 1] {
        image.replay(kind, data);
    }
    let after = records.iter().filter(|r| r.0 >= snapshot_end).count();
    assert!(after > 0, "records after the snapshot");
    for (offset, kind, data) in &records {
        if *offset >= snapshot_end {
            image.replay(kind, data);
        }
    }
    assert_eq!(
        image,
        KafkaImage::of_shell(&shell),
        "replaying Kafka's decoding gives corum's image"
    );
    let names: BTreeSet<&str> = image.topics.values().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["late", "orders"]));

    // Kafka's metadata shell loads the snapshot into the image corum's snapshot holds.
    let checkpoint = checkpoints[0].display().to_string();
    // The shell runs its command once its loader has applied an offset, which can be before
    // the loader's publisher has filled the tree the command prints (Kafka's
    // `MetadataShell::waitUntilCaughtUp` polls `lastAppliedOffset() > 0`): on a loaded machine
    // it prints an empty `/image` now and then. An empty tree is asked again, a few times; a
    // loader that never fills it still fails below.
    let mut loaded = ShellImage::default();
    let mut tree = BTreeMap::new();
    for _attempt in 0..4 {
        let shell = java(
            "org.apache.kafka.shell.MetadataShell",
            &["--snapshot", &checkpoint, "tree", "/image"],
        );
        let stderr = text(&shell.stderr);
        assert!(
            shell.status.success(),
            "MetadataShell failed ({}): {stderr}\n{}",
            shell.status,
            text(&shell.stdout)
        );
        // The shell's snapshot reader says it skips the snapshot's control records, and
        // nothing else.
        for line in stderr.lines() {
            assert!(
                [
                    "SNAPSHOT_HEADER",
                    "KRAFT_VERSION",
                    "KRAFT_VOTERS",
                    "SNAPSHOT_FOOTER"
                ]
                .iter()
                .any(|t| line.contains(&format!("Ignoring control record with type {t} "))),
                "the metadata shell: {line}"
            );
        }
        tree = parse_tree(&text(&shell.stdout));
        loaded = ShellImage::of_tree(&tree);
        if loaded != ShellImage::default() {
            break;
        }
        eprintln!("the metadata shell printed an empty image; asking again");
    }
    assert_eq!(
        loaded,
        ShellImage::of_corum(&corum_snap.image),
        "Kafka's loader replaying the snapshot holds corum's image at it"
    );
    assert!(loaded.topics.contains_key("orders") && loaded.brokers.len() == 3);
    // corum's level 27 is Kafka 4.1's 4.1-IV1.
    assert_eq!(
        tree.get("features/metadataVersion").map(String::as_str),
        Some("Optional[4.1-IV1]")
    );

    let _ = std::fs::remove_dir_all(&dir);
}
