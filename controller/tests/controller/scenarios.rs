//! Data-driven scenario tests: each `testdata/*.txt` holds commands and the expected output after
//! each. Format (etcd-style):
//!
//! ```text
//! # comment
//! command key=value flag ...
//! ----
//! expected output lines
//! <blank line>
//! ```
//!
//! Run with `CORUM_REWRITE=1` to rewrite the expected outputs; review the diff like code.
//! Every mutating command proposes its records (uncommitted) through the in-memory driver;
//! `commit` commits them, cross-checking the controller against a fresh replay of the log.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use crate::common::Driver;
use corum_controller::control::cluster_control::{
    RegisterControllerRequest, TickResponse, UnregisterBrokerRequest,
};
use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsRequest, AlterConfigsResource, AlterableConfig,
    DescribeConfigsRequest, DescribeConfigsResource, IncrementalAlterConfigsRequest,
    ReplacedConfigs,
};
use corum_controller::control::feature_control::{FeatureUpdate, UpdateFeaturesRequest};
use corum_controller::control::producer_id_control::AllocateProducerIdsRequest;
use corum_controller::control::replication_control::{
    AlterIsrRequest, CreatableTopic, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, DeleteTopicsV2Request, DescribeTopicsRequest, DescribedTopic,
    ElectLeadersRequest, ElectionType, IsrUpdate, PartitionsIncrease, TopicRef,
};
use corum_controller::control::ImageReads;
use corum_controller::image::ConfigResource;
use corum_controller::records::{
    ConfigResourceType, ControllerEndpointV1, LeaderChange, ListenerV1, PartitionChangeRecordV1,
    SupportedFeatureV1,
};
use corum_controller::{
    BrokerHeartbeatRequest, ControllerConfig, ControllerResult, MetadataRecord, PartitionId,
    TopicId,
};
use corum_types::{BrokerEpoch, LogOffset, NodeId, Uuid};

struct Scenario {
    driver: Driver,
    names: HashMap<TopicId, String>,
}

struct Args<'a> {
    kv: BTreeMap<&'a str, &'a str>,
    flags: Vec<&'a str>,
    positional: Vec<&'a str>,
}

impl<'a> Args<'a> {
    fn parse(words: &[&'a str]) -> Self {
        let mut a = Args {
            kv: BTreeMap::new(),
            flags: vec![],
            positional: vec![],
        };
        for w in words {
            if let Some((k, v)) = w.split_once('=') {
                if k.contains(':') {
                    a.positional.push(w);
                } else {
                    a.kv.insert(k, v);
                }
            } else if w.contains(':') || w.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                a.positional.push(w);
            } else {
                a.flags.push(w);
            }
        }
        a
    }
    fn u64(&self, k: &str) -> Option<u64> {
        self.kv.get(k).map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{k}={v}: not a number"))
        })
    }
    fn node(&self, k: &str) -> NodeId {
        NodeId(self.u64(k).unwrap_or_else(|| panic!("missing {k}=")) as u32)
    }
    fn flag(&self, f: &str) -> bool {
        self.flags.contains(&f)
    }
}

fn ids(s: &str) -> Vec<NodeId> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| NodeId(x.parse().unwrap()))
        .collect()
}

fn fmt_ids(v: &[NodeId]) -> String {
    let inner: Vec<String> = v.iter().map(|n| n.to_string()).collect();
    format!("[{}]", inner.join(","))
}

/// Directory ids by their first byte (the scenarios make them `[b; 16]`), Kafka's reserved ones
/// by name.
fn fmt_dirs(v: &[Uuid]) -> String {
    let inner: Vec<String> = v
        .iter()
        .map(|d| match *d {
            corum_controller::ids::MIGRATING_DIR => "MIGRATING".to_owned(),
            corum_controller::ids::UNASSIGNED_DIR => "UNASSIGNED".to_owned(),
            corum_controller::ids::LOST_DIR => "LOST".to_owned(),
            d => format!("d{}", d.0[0]),
        })
        .collect();
    format!("[{}]", inner.join(","))
}

fn fmt_leader(l: Option<NodeId>) -> String {
    l.map_or("none".into(), |n| n.to_string())
}

/// `name:lo-hi,...` as supported feature ranges.
fn features(list: &str) -> Vec<SupportedFeatureV1> {
    list.split(',')
        .filter(|f| !f.is_empty())
        .map(|f| {
            let (name, range) = f.split_once(':').unwrap();
            let (lo, hi) = range.split_once('-').unwrap();
            SupportedFeatureV1 {
                name: name.into(),
                min_level: lo.parse().unwrap(),
                max_level: hi.parse().unwrap(),
            }
        })
        .collect()
}

fn fmt_features(fs: &[SupportedFeatureV1]) -> String {
    let inner: Vec<String> = fs
        .iter()
        .map(|f| format!("{}:{}-{}", f.name, f.min_level, f.max_level))
        .collect();
    format!("[{}]", inner.join(","))
}

fn fmt_end_points(es: &[ControllerEndpointV1]) -> String {
    let inner: Vec<String> = es
        .iter()
        .map(|e| format!("{}://{}:{}/{}", e.name, e.host, e.port, e.security_protocol))
        .collect();
    format!("[{}]", inner.join(","))
}

/// A topic id no topic has.
const UNKNOWN_TOPIC_ID: TopicId = TopicId(Uuid([0xee; 16]));

impl Scenario {
    fn new() -> Self {
        let config = ControllerConfig {
            default_partitions: 1,
            default_replication_factor: 1,
            ..Default::default()
        };
        Scenario {
            driver: Driver::new(config),
            names: HashMap::new(),
        }
    }

    fn tname(&self, id: TopicId) -> String {
        self.names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }

    fn fmt_record(&mut self, r: &MetadataRecord) -> String {
        match r {
            MetadataRecord::RegisterBroker(r) => format!(
                "RegisterBroker broker={} epoch={} rack={}",
                r.broker_id,
                r.broker_epoch.0,
                r.rack.as_deref().unwrap_or("-")
            ),
            MetadataRecord::UnregisterBroker(r) => format!(
                "UnregisterBroker broker={} epoch={}",
                r.broker_id, r.broker_epoch.0
            ),
            MetadataRecord::FenceBroker(r) => format!(
                "FenceBroker broker={} epoch={}",
                r.broker_id, r.broker_epoch.0
            ),
            MetadataRecord::UnfenceBroker(r) => format!(
                "UnfenceBroker broker={} epoch={}",
                r.broker_id, r.broker_epoch.0
            ),
            MetadataRecord::BrokerRegistrationChange(r) => format!(
                "BrokerRegistrationChange broker={} epoch={} controlled_shutdown={}",
                r.broker_id, r.broker_epoch.0, r.in_controlled_shutdown
            ),
            MetadataRecord::Topic(r) => {
                self.names.insert(r.topic_id, r.name.clone());
                format!("Topic {} deleting={}", r.name, r.deleting)
            }
            MetadataRecord::RemoveTopic(r) => format!("RemoveTopic {}", self.tname(r.topic_id)),
            MetadataRecord::Partition(r) => format!(
                "Partition {}/{} replicas={} isr={} leader={} le={} pe={}",
                self.tname(r.topic_id),
                r.partition_id.0,
                fmt_ids(&r.replicas),
                fmt_ids(&r.isr),
                fmt_leader(r.leader),
                r.leader_epoch.0,
                r.partition_epoch.0
            ),
            MetadataRecord::PartitionLeaderChange(r) => format!(
                "PartitionLeaderChange {}/{} leader={} le={} pe={}",
                self.tname(r.topic_id),
                r.partition_id.0,
                fmt_leader(r.leader),
                r.leader_epoch.0,
                r.partition_epoch.0
            ),
            MetadataRecord::PartitionIsrChange(r) => format!(
                "PartitionIsrChange {}/{} isr={} pe={}",
                self.tname(r.topic_id),
                r.partition_id.0,
                fmt_ids(&r.isr),
                r.partition_epoch.0
            ),
            MetadataRecord::Config(r) => format!(
                "Config {:?}:{} {}={}",
                r.resource_type,
                r.resource_name,
                r.key,
                r.value.as_deref().unwrap_or("<delete>")
            ),
            MetadataRecord::FeatureLevel(r) => {
                format!("FeatureLevel {} [{}, {}]", r.name, r.min_level, r.max_level)
            }
            MetadataRecord::ProducerIds(r) => format!(
                "ProducerIds broker={} next={}",
                r.broker_id, r.next_producer_id
            ),
            MetadataRecord::NoOp(_) => "NoOp".into(),
            MetadataRecord::RegisterController(r) => format!(
                "RegisterController controller={} incarnation={} end_points={} features={}",
                r.controller_id,
                r.incarnation_id.0[0],
                fmt_end_points(&r.end_points),
                fmt_features(&r.features)
            ),
            MetadataRecord::RegisterBrokerV2(r) => format!(
                "RegisterBrokerV2 broker={} epoch={} incarnation={} rack={} fenced={} shutdown={} log_dirs={}",
                r.broker_id,
                r.broker_epoch.0,
                r.incarnation_id.0[0],
                r.rack.as_deref().unwrap_or("-"),
                r.fenced,
                r.in_controlled_shutdown,
                fmt_dirs(&r.log_dirs)
            ),
            MetadataRecord::BrokerRegistrationChangeV2(r) => format!(
                "BrokerRegistrationChangeV2 broker={} epoch={} fenced={:?} shutdown={}",
                r.broker_id, r.broker_epoch.0, r.fenced, r.in_controlled_shutdown
            ),
            MetadataRecord::PartitionV2(r) => format!(
                "PartitionV2 {}/{} replicas={} isr={} leader={} le={} pe={} lrs={:?} dirs={}",
                self.tname(r.topic_id),
                r.partition_id.0,
                fmt_ids(&r.replicas),
                fmt_ids(&r.isr),
                fmt_leader(r.leader),
                r.leader_epoch.0,
                r.partition_epoch.0,
                r.leader_recovery_state,
                fmt_dirs(&r.directories)
            ),
            MetadataRecord::PartitionChange(r) => self.fmt_change("PartitionChange", r, None, None),
            MetadataRecord::PartitionChangeV2(r) => self.fmt_change(
                "PartitionChangeV2",
                &r.without_elr(),
                r.eligible_leader_replicas.as_deref(),
                r.last_known_elr.as_deref(),
            ),
            MetadataRecord::PartitionV3(r) => format!(
                "PartitionV3 {}/{} replicas={} isr={} leader={} le={} pe={} lrs={:?} dirs={} elr={} last_known_elr={}",
                self.tname(r.topic_id),
                r.partition_id.0,
                fmt_ids(&r.replicas),
                fmt_ids(&r.isr),
                fmt_leader(r.leader),
                r.leader_epoch.0,
                r.partition_epoch.0,
                r.leader_recovery_state,
                fmt_dirs(&r.directories),
                fmt_ids(&r.eligible_leader_replicas),
                fmt_ids(&r.last_known_elr)
            ),
            MetadataRecord::ClearElr(r) if r.topic_name.is_empty() => "ClearElr (every topic)".into(),
            MetadataRecord::ClearElr(r) => format!("ClearElr {}", r.topic_name),
            MetadataRecord::AccessControlEntry(r) => format!(
                "AccessControlEntry {} type={} name={} pattern={} principal={} host={} op={} perm={}",
                r.id, r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host,
                r.operation, r.permission_type
            ),
            MetadataRecord::RemoveAccessControlEntry(r) => {
                format!("RemoveAccessControlEntry {}", r.id)
            }
            MetadataRecord::UserScramCredential(r) => format!(
                "UserScramCredential {} mechanism={} iterations={}",
                r.name, r.mechanism, r.iterations
            ),
            MetadataRecord::RemoveUserScramCredential(r) => {
                format!("RemoveUserScramCredential {} mechanism={}", r.name, r.mechanism)
            }
        }
    }

    /// A partition change as the scenarios print it: the fields it sets.
    fn fmt_change(
        &self,
        kind: &str,
        r: &PartitionChangeRecordV1,
        elr: Option<&[NodeId]>,
        last_known_elr: Option<&[NodeId]>,
    ) -> String {
        let mut line = format!("{kind} {}/{}", self.tname(r.topic_id), r.partition_id.0);
        if let Some(isr) = &r.isr {
            write!(line, " isr={}", fmt_ids(isr)).unwrap();
        }
        match r.leader {
            LeaderChange::Unchanged => {}
            LeaderChange::NoLeader => line.push_str(" leader=none"),
            LeaderChange::Broker(b) => write!(line, " leader={b}").unwrap(),
        }
        if let Some(replicas) = &r.replicas {
            write!(line, " replicas={}", fmt_ids(replicas)).unwrap();
        }
        if let Some(lrs) = r.leader_recovery_state {
            write!(line, " lrs={lrs:?}").unwrap();
        }
        if let Some(dirs) = &r.directories {
            write!(line, " dirs={}", fmt_dirs(dirs)).unwrap();
        }
        if let Some(elr) = elr {
            write!(line, " elr={}", fmt_ids(elr)).unwrap();
        }
        if let Some(lke) = last_known_elr {
            write!(line, " last_known_elr={}", fmt_ids(lke)).unwrap();
        }
        line
    }

    /// `name` or `id:name` (the id of the topic once named so; `id:unknown` is an id no topic
    /// has) as a topic reference.
    fn topic_ref(&self, word: &str) -> TopicRef {
        match word.strip_prefix("id:") {
            Some("unknown") => TopicRef::Id(UNKNOWN_TOPIC_ID),
            Some(name) => TopicRef::Id(
                self.names
                    .iter()
                    .find(|(_, n)| n.as_str() == name)
                    .map(|(id, _)| *id)
                    .unwrap_or_else(|| panic!("no topic was ever named {name:?}")),
            ),
            None => TopicRef::Name(word.to_owned()),
        }
    }

    fn fmt_ref(&self, r: &TopicRef) -> String {
        match r {
            TopicRef::Name(name) => name.clone(),
            TopicRef::Id(id) if *id == UNKNOWN_TOPIC_ID => "id:unknown".into(),
            TopicRef::Id(id) => format!("id:{}", self.tname(*id)),
        }
    }

    fn fmt_described_topic(&self, out: &mut String, t: &DescribedTopic) {
        writeln!(out, "  topic {} partitions={}", t.name, t.partitions.len()).unwrap();
        for p in &t.partitions {
            writeln!(
                out,
                "  {}/{} leader={} le={} pe={} replicas={} isr={} offline={}",
                t.name,
                p.partition_id.0,
                fmt_leader(p.leader),
                p.leader_epoch.0,
                p.partition_epoch.0,
                fmt_ids(&p.replicas),
                fmt_ids(&p.isr),
                fmt_ids(&p.offline_replicas)
            )
            .unwrap();
        }
    }

    /// The reads a command asks for: the active controller's (in-flight records included),
    /// or with `committed` the committed image's, as any node answers them.
    fn reads(&self, committed: bool) -> ImageReads<'_> {
        if committed {
            return self.driver.controller.committed_reads();
        }
        // The active controller's read methods are these plus the check that it is active
        // (the driver keeps it active).
        assert!(self.driver.controller.is_active());
        ImageReads::new(
            self.driver.controller.image(),
            self.driver.controller.config(),
        )
    }

    /// Proposes the records and prints them and the response.
    fn outcome<R: std::fmt::Debug>(
        &mut self,
        result: Result<ControllerResult<R>, corum_controller::ApiError>,
    ) -> String {
        let mut out = String::new();
        match result {
            Err(e) => writeln!(out, "error: {e:?}").unwrap(),
            Ok(r) => {
                for rec in &r.records {
                    let line = self.fmt_record(rec);
                    writeln!(out, "{line}").unwrap();
                }
                self.driver.propose(&r.records);
                let resp = format!("{:?}", r.response);
                writeln!(out, "response: {}", self.rename_ids(&resp)).unwrap();
            }
        }
        out
    }

    /// Replaces topic ids in debug output by names so outputs read well.
    fn rename_ids(&self, s: &str) -> String {
        let mut s = s.to_owned();
        for (id, name) in &self.names {
            s = s.replace(&format!("TopicId(Uuid({id}))"), name);
        }
        s.replace(&format!("TopicId(Uuid({UNKNOWN_TOPIC_ID}))"), "unknown")
    }

    fn heartbeat_request(&self, a: &Args<'_>) -> BrokerHeartbeatRequest {
        let broker_id = a.node("broker");
        let registering = a.flag("initial");
        let broker_epoch = if registering {
            None
        } else {
            Some(match a.u64("epoch") {
                Some(e) => BrokerEpoch(e),
                None => self
                    .driver
                    .controller
                    .image()
                    .brokers
                    .get(broker_id)
                    .map_or(BrokerEpoch(0), |b| b.broker_epoch),
            })
        };
        let features = match a.kv.get("features") {
            Some(list) => features(list),
            // What a Kafka 4.1 broker supports.
            None => vec![SupportedFeatureV1 {
                name: "metadata.version".into(),
                min_level: 7,
                max_level: 27,
            }],
        };
        BrokerHeartbeatRequest {
            broker_id,
            broker_epoch,
            incarnation_id: Uuid(
                [a.u64("incarnation").unwrap_or(u64::from(broker_id.0)) as u8; 16],
            ),
            listeners: vec![ListenerV1 {
                name: "PLAINTEXT".into(),
                host: format!("b{broker_id}"),
                port: 9092,
            }],
            features,
            rack: a.kv.get("rack").map(|s| s.to_string()),
            next_metadata_offset: LogOffset(a.u64("offset").unwrap_or(0)),
            want_fence: a.flag("fence"),
            want_shutdown: a.flag("shutdown"),
        }
    }

    fn topic_id(&self, name: &str) -> TopicId {
        self.driver
            .controller
            .image()
            .topics
            .get_by_name(name)
            .map(|t| t.topic_id)
            .unwrap_or_default()
    }

    fn run(&mut self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (cmd, rest) = words.split_first().expect("non-empty command");
        let a = Args::parse(rest);
        if let Some(t) = a.u64("now") {
            self.driver.now_ms = t;
        }
        let ctx = self.driver.ctx();
        match *cmd {
            "register" | "heartbeat" => {
                let mut req = self.heartbeat_request(&a);
                if *cmd == "register" {
                    req.broker_epoch = None;
                }
                let r = self.driver.controller.broker_heartbeat(&req, &ctx);
                self.outcome(r)
            }
            "config" => {
                assert!(
                    self.driver.log.is_empty() && self.driver.pending.is_empty(),
                    "config must come first"
                );
                let config = ControllerConfig {
                    records_per_batch_max: a.u64("records-max").map_or(10_000, |v| v as usize),
                    ..ControllerConfig::default()
                };
                config.validate().unwrap();
                self.driver = Driver::new(config);
                format!(
                    "records_per_batch_max={}\n",
                    self.driver.controller.config().records_per_batch_max
                )
            }
            "advance" => {
                self.driver.now_ms += a.u64("ms").expect("ms=");
                format!("now={}\n", self.driver.now_ms)
            }
            "tick" => {
                let r: Result<ControllerResult<TickResponse>, _> =
                    self.driver.controller.tick(&ctx);
                self.outcome(r)
            }
            "commit" => {
                let n = self.driver.commit();
                format!(
                    "committed {n} batches; hwm={}\n",
                    self.driver.committed_end.0
                )
            }
            "fail-over" => {
                self.driver.fail_over();
                "reverted in-flight proposals; active again\n".into()
            }
            "unregister" => {
                let r = self
                    .driver
                    .controller
                    .unregister_broker(&UnregisterBrokerRequest {
                        broker_id: a.node("broker"),
                    });
                self.outcome(r)
            }
            "create-topics" => {
                let topics = a
                    .positional
                    .iter()
                    .map(|spec| {
                        let parts: Vec<&str> = spec.split(':').collect();
                        let mut t = CreatableTopic::new(
                            parts[0],
                            parts[1].parse().unwrap(),
                            parts[2].parse().unwrap(),
                        );
                        if let Some(assign) = parts.get(3).filter(|a| !a.is_empty()) {
                            t.assignments = assign.split('/').map(ids).collect();
                            t.num_partitions = -1;
                            t.replication_factor = -1;
                        }
                        if let Some(cfg) = parts.get(4) {
                            t.configs = cfg
                                .split(';')
                                .filter(|kv| !kv.is_empty())
                                .map(|kv| {
                                    let (k, v) = kv.split_once('=').unwrap();
                                    (k.to_owned(), v.to_owned())
                                })
                                .collect();
                        }
                        t
                    })
                    .collect();
                let req = CreateTopicsRequest {
                    topics,
                    validate_only: a.flag("validate-only"),
                };
                let r = self.driver.controller.create_topics(&req, &ctx);
                if let Ok(ok) = &r {
                    for (name, res) in &ok.response.topics {
                        if let Ok(c) = res {
                            self.names.insert(c.topic_id, name.clone());
                        }
                    }
                }
                self.outcome(r)
            }
            "delete-topics" => {
                let req = DeleteTopicsRequest {
                    names: rest.iter().map(|s| s.to_string()).collect(),
                };
                let r = self.driver.controller.delete_topics(&req);
                self.outcome(r)
            }
            "delete-topics-v2" => {
                // delete-topics-v2 orders id:events id:unknown
                let req = DeleteTopicsV2Request {
                    topics: rest.iter().map(|w| self.topic_ref(w)).collect(),
                };
                let r = self.driver.controller.delete_topics_v2(&req);
                let mut out = String::new();
                match r {
                    Err(e) => writeln!(out, "error: {e:?}").unwrap(),
                    Ok(r) => {
                        for rec in &r.records {
                            let line = self.fmt_record(rec);
                            writeln!(out, "{line}").unwrap();
                        }
                        self.driver.propose(&r.records);
                        for (reference, result) in &r.response.topics {
                            let shown = match result {
                                Ok(d) => format!(
                                    "deleted {} ({})",
                                    d.name,
                                    self.fmt_ref(&TopicRef::Id(d.topic_id))
                                ),
                                Err(e) => self.rename_ids(&format!("{e:?}")),
                            };
                            writeln!(out, "{}: {shown}", self.fmt_ref(reference)).unwrap();
                        }
                    }
                }
                out
            }
            "describe-topics" => {
                // describe-topics [committed] [name | id:name | id:unknown ...]; no topic: all
                let committed = rest.first() == Some(&"committed");
                let words = &rest[usize::from(committed)..];
                let req = DescribeTopicsRequest {
                    topics: (!words.is_empty())
                        .then(|| words.iter().map(|w| self.topic_ref(w)).collect()),
                };
                let response = self
                    .driver
                    .controller
                    .describe_topics(&req)
                    .expect("the driver keeps the controller active");
                let response = if committed {
                    self.reads(true).describe_topics(&req)
                } else {
                    assert_eq!(response, self.reads(false).describe_topics(&req));
                    response
                };
                let mut out = String::new();
                for (reference, result) in &response.topics {
                    match result {
                        Ok(t) => {
                            writeln!(out, "{}:", self.fmt_ref(reference)).unwrap();
                            self.fmt_described_topic(&mut out, t);
                        }
                        Err(e) => writeln!(
                            out,
                            "{}: error {}",
                            self.fmt_ref(reference),
                            self.rename_ids(&format!("{e:?}"))
                        )
                        .unwrap(),
                    }
                }
                if out.is_empty() {
                    out.push_str("no topics\n");
                }
                out
            }
            "register-controller" => {
                // register-controller id=1 incarnation=1 end-points=CONTROLLER:h1:9093:0,... features=metadata.version:7-27
                let end_points =
                    a.kv.get("end-points")
                        .map(|list| {
                            list.split(',')
                                .filter(|e| !e.is_empty())
                                .map(|e| {
                                    let parts: Vec<&str> = e.split(':').collect();
                                    ControllerEndpointV1 {
                                        name: parts[0].into(),
                                        host: parts[1].into(),
                                        port: parts[2].parse().unwrap(),
                                        security_protocol: parts[3].parse().unwrap(),
                                    }
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                let controller_id = a.node("id");
                let req = RegisterControllerRequest {
                    controller_id,
                    incarnation_id: Uuid(
                        [a.u64("incarnation").unwrap_or(u64::from(controller_id.0)) as u8; 16],
                    ),
                    end_points,
                    features: a.kv.get("features").map_or_else(Vec::new, |l| features(l)),
                };
                let r = self.driver.controller.register_controller(&req);
                self.outcome(r)
            }
            "describe-controllers" => {
                let committed = a.flag("committed");
                let response = match self.driver.controller.describe_controllers() {
                    Err(e) => return format!("error: {e:?}\n"),
                    Ok(r) if !committed => r,
                    Ok(_) => self.reads(true).describe_controllers(),
                };
                let mut out = String::new();
                for c in &response.controllers {
                    writeln!(
                        out,
                        "controller {} incarnation={} end_points={} features={}",
                        c.controller_id,
                        c.incarnation_id.0[0],
                        fmt_end_points(&c.end_points),
                        fmt_features(&c.features)
                    )
                    .unwrap();
                }
                if out.is_empty() {
                    out.push_str("no controllers\n");
                }
                out
            }
            "describe-features" => {
                let committed = a.flag("committed");
                let response = match self.driver.controller.describe_features() {
                    Err(e) => return format!("error: {e:?}\n"),
                    Ok(r) if !committed => r,
                    Ok(_) => self.reads(true).describe_features(),
                };
                let finalized: Vec<String> = response
                    .finalized
                    .iter()
                    .map(|f| format!("{}:{}-{}", f.name, f.min_level, f.max_level))
                    .collect();
                format!(
                    "finalized=[{}] epoch={} supported={}\n",
                    finalized.join(","),
                    response
                        .finalized_epoch
                        .map_or("none".into(), |e| e.0.to_string()),
                    fmt_features(&response.supported)
                )
            }
            "create-partitions" => {
                let topics = a
                    .positional
                    .iter()
                    .map(|spec| {
                        let (name, count) = spec.split_once(':').unwrap();
                        PartitionsIncrease {
                            name: name.into(),
                            count: count.parse().unwrap(),
                            assignments: vec![],
                        }
                    })
                    .collect();
                let req = CreatePartitionsRequest {
                    topics,
                    validate_only: a.flag("validate-only"),
                };
                let r = self.driver.controller.create_partitions(&req, &ctx);
                self.outcome(r)
            }
            "alter-isr" => {
                let broker_id = a.node("broker");
                let (name, pid) = a.kv["partition"].split_once('/').unwrap();
                let topic_id = self.topic_id(name);
                let pid = PartitionId(pid.parse().unwrap());
                let image = self.driver.controller.image();
                let cur = image.topics.partition(topic_id, pid);
                let update = IsrUpdate {
                    topic_id,
                    partition_id: pid,
                    leader_epoch: a.u64("le").map_or_else(
                        || cur.map(|p| p.leader_epoch).unwrap_or_default(),
                        |v| corum_controller::LeaderEpoch(v as u32),
                    ),
                    partition_epoch: a.u64("pe").map_or_else(
                        || cur.map(|p| p.partition_epoch).unwrap_or_default(),
                        |v| corum_controller::PartitionEpoch(v as u32),
                    ),
                    new_isr: ids(a.kv["isr"]),
                };
                let broker_epoch = match a.u64("epoch") {
                    Some(e) => BrokerEpoch(e),
                    None => image
                        .brokers
                        .get(broker_id)
                        .map_or(BrokerEpoch(0), |b| b.broker_epoch),
                };
                let req = AlterIsrRequest {
                    broker_id,
                    broker_epoch,
                    partitions: vec![update],
                };
                let r = self.driver.controller.alter_isr(&req);
                self.outcome(r)
            }
            "elect" => {
                let election_type = if a.flag("unclean") {
                    ElectionType::Unclean
                } else {
                    ElectionType::Preferred
                };
                let partitions = if a.positional.is_empty() {
                    None
                } else {
                    Some(
                        a.positional
                            .iter()
                            .map(|s| {
                                let (n, p) = s.split_once(':').unwrap();
                                (n.to_owned(), PartitionId(p.parse().unwrap()))
                            })
                            .collect(),
                    )
                };
                let r = self.driver.controller.elect_leaders(&ElectLeadersRequest {
                    election_type,
                    partitions,
                });
                self.outcome(r)
            }
            "alter-configs" => {
                // alter-configs topic:orders set:retention.ms=5 delete:segment.bytes append:cleanup.policy=compact
                let (rtype, name) = a.positional[0].split_once(':').unwrap();
                let resource = ConfigResource {
                    resource_type: if rtype == "topic" {
                        ConfigResourceType::Topic
                    } else {
                        ConfigResourceType::Broker
                    },
                    name: name.to_owned(),
                };
                let configs = a.positional[1..]
                    .iter()
                    .map(|s| {
                        let (op, kv) = s.split_once(':').unwrap();
                        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
                        let op = match op {
                            "set" => AlterConfigOp::Set,
                            "delete" => AlterConfigOp::Delete,
                            "append" => AlterConfigOp::Append,
                            "subtract" => AlterConfigOp::Subtract,
                            other => panic!("unknown op {other}"),
                        };
                        AlterableConfig {
                            key: key.into(),
                            op,
                            value: value.into(),
                        }
                    })
                    .collect();
                let req = IncrementalAlterConfigsRequest {
                    resources: vec![AlterConfigsResource { resource, configs }],
                    validate_only: a.flag("validate-only"),
                };
                let r = self.driver.controller.incremental_alter_configs(&req);
                self.outcome(r)
            }
            "replace-configs" => {
                // replace-configs broker:1 set:num.io.threads=16 null:background.threads
                // (the legacy AlterConfigs: keys not named are deleted)
                let (rtype, name) = a.positional[0].split_once(':').unwrap();
                let resource = ConfigResource {
                    resource_type: if rtype == "topic" {
                        ConfigResourceType::Topic
                    } else {
                        ConfigResourceType::Broker
                    },
                    name: name.to_owned(),
                };
                let configs = a.positional[1..]
                    .iter()
                    .map(|s| match s.split_once(':').unwrap() {
                        ("set", kv) => {
                            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                            (k.to_owned(), Some(v.to_owned()))
                        }
                        ("null", k) => (k.to_owned(), None),
                        (other, _) => panic!("unknown entry {other}"),
                    })
                    .collect();
                let req = AlterConfigsRequest {
                    resources: vec![ReplacedConfigs { resource, configs }],
                    validate_only: a.flag("validate-only"),
                };
                let r = self.driver.controller.alter_configs(&req);
                self.outcome(r)
            }
            "describe-configs" => {
                // describe-configs topic:t [keys:retention.ms,segment.ms] [synonyms] [docs]
                let (rtype, name) = a.positional[0]
                    .split_once(':')
                    .unwrap_or((a.positional[0], ""));
                let resource = ConfigResource {
                    resource_type: if rtype == "topic" {
                        ConfigResourceType::Topic
                    } else {
                        ConfigResourceType::Broker
                    },
                    name: name.to_owned(),
                };
                let names = a.positional[1..]
                    .iter()
                    .find_map(|p| p.strip_prefix("keys:"))
                    .map(|k| k.split(',').map(str::to_owned).collect());
                let req = DescribeConfigsRequest {
                    resources: vec![DescribeConfigsResource { resource, names }],
                    include_synonyms: a.flag("synonyms"),
                    include_documentation: a.flag("docs"),
                };
                let mut out = String::new();
                match self.driver.controller.describe_configs(&req) {
                    Err(e) => writeln!(out, "error: {e:?}").unwrap(),
                    Ok(r) => {
                        for (_, res) in r.resources {
                            match res {
                                Err(e) => writeln!(out, "error: {e:?}").unwrap(),
                                Ok(list) => {
                                    for c in list {
                                        let value = c.value.as_deref().unwrap_or("<null>");
                                        write!(
                                            out,
                                            "{}={value} ({:?}) {}",
                                            c.name,
                                            c.source,
                                            c.config_type.name()
                                        )
                                        .unwrap();
                                        if c.read_only {
                                            out.push_str(" read-only");
                                        }
                                        if c.sensitive {
                                            out.push_str(" sensitive");
                                        }
                                        for syn in &c.synonyms {
                                            let v = syn.value.as_deref().unwrap_or("<null>");
                                            write!(out, " <- {}={v} ({:?})", syn.name, syn.source)
                                                .unwrap();
                                        }
                                        if let Some(doc) = &c.documentation {
                                            write!(out, " # {doc}").unwrap();
                                        }
                                        out.push('\n');
                                    }
                                }
                            }
                        }
                    }
                }
                out
            }
            "update-features" => {
                let updates = a
                    .positional
                    .iter()
                    .map(|s| {
                        let (name, range) = s.split_once(':').unwrap();
                        let (lo, hi) = range.split_once('-').unwrap();
                        FeatureUpdate {
                            name: name.into(),
                            min_level: lo.parse().unwrap(),
                            max_level: hi.parse().unwrap(),
                            allow_downgrade: a.flag("downgrade"),
                        }
                    })
                    .collect();
                let r = self
                    .driver
                    .controller
                    .update_features(&UpdateFeaturesRequest {
                        updates,
                        validate_only: false,
                    });
                self.outcome(r)
            }
            "allocate-pids" => {
                let broker_id = a.node("broker");
                let broker_epoch = self
                    .driver
                    .controller
                    .image()
                    .brokers
                    .get(broker_id)
                    .map_or(BrokerEpoch(0), |b| b.broker_epoch);
                let r = self
                    .driver
                    .controller
                    .allocate_producer_ids(&AllocateProducerIdsRequest {
                        broker_id,
                        broker_epoch,
                    });
                self.outcome(r)
            }
            "describe-cluster" => match self.driver.controller.describe_cluster() {
                Err(e) => format!("error: {e:?}\n"),
                Ok(r) => {
                    let mut out = format!(
                        "controller={} topics={} partitions={}\n",
                        r.controller_id, r.topic_count, r.partition_count
                    );
                    for b in r.brokers {
                        writeln!(
                            out,
                            "broker {} epoch={} rack={} fenced={} controlled_shutdown={}",
                            b.broker_id,
                            b.broker_epoch.0,
                            b.rack.as_deref().unwrap_or("-"),
                            b.fenced,
                            b.in_controlled_shutdown
                        )
                        .unwrap();
                    }
                    out
                }
            },
            "image" => {
                let image = self.driver.controller.image();
                let mut out = String::new();
                for b in image.brokers.iter() {
                    writeln!(
                        out,
                        "broker {} epoch={} fenced={} shutdown={}",
                        b.broker_id, b.broker_epoch.0, b.fenced, b.in_controlled_shutdown
                    )
                    .unwrap();
                }
                for (name, id) in image.topics.names() {
                    let t = image.topics.get(id).unwrap();
                    for (i, p) in t.partitions.iter().enumerate() {
                        writeln!(
                            out,
                            "{name}/{i}{} replicas={} isr={} leader={} le={} pe={}",
                            if t.deleting { " (deleting)" } else { "" },
                            fmt_ids(&p.replicas),
                            fmt_ids(&p.isr),
                            fmt_leader(p.leader),
                            p.leader_epoch.0,
                            p.partition_epoch.0
                        )
                        .unwrap();
                    }
                }
                for (name, f) in image.features.iter() {
                    writeln!(out, "feature {name} [{}, {}]", f.min_level, f.max_level).unwrap();
                }
                for c in image.controllers.iter() {
                    writeln!(
                        out,
                        "controller {} end_points={}",
                        c.controller_id,
                        fmt_end_points(&c.end_points)
                    )
                    .unwrap();
                }
                if out.is_empty() {
                    out.push_str("empty\n");
                }
                out
            }
            other => panic!("unknown command {other:?}"),
        }
    }
}

fn run_file(path: &std::path::Path) -> (String, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut scenario = Scenario::new();
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        // A command, then `----`, then the expected output up to a blank line.
        out.push_str(line);
        out.push('\n');
        assert_eq!(
            lines.next(),
            Some("----"),
            "{}: expected ---- after {line:?}",
            path.display()
        );
        while lines.peek().is_some_and(|l| !l.is_empty()) {
            lines.next();
        }
        out.push_str("----\n");
        let result = scenario.run(line);
        out.push_str(&result);
        out.push('\n');
        lines.next();
    }
    (text, out)
}

/// Every scenario file produces exactly its expected output (CORUM_REWRITE=1 rewrites them).
#[test]
fn scenarios() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    // Only CORUM_REWRITE=1 rewrites (`corum_types::golden`); 0 or any other value checks.
    let rewrite = corum_types::golden::rewrite_requested();
    let mut failed = vec![];
    for path in files {
        let (expected, actual) = run_file(&path);
        if rewrite {
            std::fs::write(&path, &actual).unwrap();
        } else if expected != actual {
            eprintln!("--- {} differs; actual:\n{actual}", path.display());
            failed.push(path.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "scenario mismatches (rewrite with CORUM_REWRITE=1): {failed:?}"
    );
}
