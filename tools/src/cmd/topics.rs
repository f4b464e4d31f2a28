//! `corum topics create|delete|describe|list`: topics, in the shape of Kafka's `kafka-topics`.
//!
//! | command | request | prints |
//! |---|---|---|
//! | `create NAME [--partitions N] [--replication-factor N] [--replica-assignment 0:1,1:2] [--config K=V ...] [--validate-only]` | CreateTopics | the topic's id, partition count and replication factor |
//! | `delete NAME ... [--id ID ...]` | DeleteTopicsV2 (by name or by id) | each topic's name and id, now being deleted |
//! | `describe [NAME ...] [--id ID ...]` | DescribeTopics (none named: every topic) | each topic, then one line per partition: leader, epochs, replicas, ISR, offline replicas |
//! | `list` | DescribeTopics of every topic | one name per line |
//!
//! Without `--partitions`/`--replication-factor` the controller's defaults apply (Kafka's -1:
//! `num.partitions`, `default.replication.factor`). `--replica-assignment` places replicas by
//! hand, as `kafka-topics` takes it: partitions separated by commas, the broker ids of one
//! partition by colons, the first of them the preferred leader; the partition count and
//! replication factor then follow from it. A topic being deleted is unknown to `describe` and
//! `list`, as to every admin read. See [`crate::cmd::admin`] for `--bootstrap`, `--json` and
//! the exit code.

use std::fmt::Write as _;

use corum_client::{RequestBody, ResponseBody};
use corum_controller::control::replication_control::{
    CreatableTopic, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsV2Request,
    DeleteTopicsV2Response, DescribeTopicsRequest, DescribeTopicsResponse, DescribedTopic,
    TopicRef,
};
use corum_controller::TopicId;
use corum_types::{NodeId, Uuid};
use serde::Serialize;

use crate::cmd::admin::{call, finish, to_json, with_client, ConnectArgs, ItemError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Create a topic (CreateTopics).
    Create(CreateArgs),
    /// Delete topics by name or id (DeleteTopics).
    Delete(DeleteArgs),
    /// Describe topics and their partitions; every topic when none is named.
    Describe(DescribeArgs),
    /// List every topic's name.
    List(ListArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct CreateArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
    /// The topic's name.
    pub name: String,
    /// Partitions (default: the controller's `num.partitions`).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
    pub partitions: Option<i32>,
    /// Replicas per partition (default: the controller's `default.replication.factor`).
    #[arg(long, value_parser = clap::value_parser!(i16).range(1..))]
    pub replication_factor: Option<i16>,
    /// Replicas by hand: `B:B,B:B,...`, one colon-separated broker list per partition, the
    /// first broker of each the preferred leader.
    #[arg(
        long,
        value_name = "B:B,B:B,...",
        value_parser = parse_assignment,
        conflicts_with_all = ["partitions", "replication_factor"]
    )]
    pub replica_assignment: Option<Assignment>,
    /// A topic config `KEY=VALUE` (repeat for more).
    #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub configs: Vec<(String, String)>,
    /// Check that the topic could be created, without creating it.
    #[arg(long)]
    pub validate_only: bool,
}

#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("topics").required(true).multiple(true).args(["names", "ids"])))]
pub struct DeleteArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
    /// Topics to delete, by name.
    pub names: Vec<String>,
    /// A topic to delete by its id (repeat for more).
    #[arg(
        long = "id",
        value_name = "TOPIC_ID",
        value_parser = parse_topic_id,
        allow_hyphen_values = true
    )]
    pub ids: Vec<TopicId>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct DescribeArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
    /// Topics to describe, by name (none, and no --id: every topic).
    pub names: Vec<String>,
    /// A topic to describe by its id (repeat for more).
    #[arg(
        long = "id",
        value_name = "TOPIC_ID",
        value_parser = parse_topic_id,
        allow_hyphen_values = true
    )]
    pub ids: Vec<TopicId>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ListArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
}

/// A parsed `--replica-assignment`: one replica list per partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment(pub Vec<Vec<NodeId>>);

/// Parses `--replica-assignment` (`0:1:2,1:2:0`): commas between partitions, colons between
/// the brokers of one partition. Only the syntax is checked here; the controller checks the
/// brokers (registered, not repeated, the same count for every partition).
pub fn parse_assignment(s: &str) -> Result<Assignment, String> {
    let mut partitions = Vec::new();
    for (p, part) in s.split(',').enumerate() {
        let mut replicas = Vec::new();
        for b in part.split(':') {
            let b = b.trim();
            let id = b.parse::<u32>().map_err(|_| {
                format!("partition {p}: {b:?} is not a broker id (expected B:B,B:B,...)")
            })?;
            replicas.push(NodeId(id));
        }
        partitions.push(replicas);
    }
    Ok(Assignment(partitions))
}

/// Parses `KEY=VALUE` (the value may hold `=`; the key may not be empty).
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// Parses a topic id as corum and Kafka print it (22 characters of URL-safe base64, which
/// may start with `-`: `--id` takes such a value as it is).
pub fn parse_topic_id(s: &str) -> Result<TopicId, String> {
    s.parse::<Uuid>()
        .map(TopicId)
        .map_err(|e| format!("{s:?} is not a topic id: {e}"))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::Create(a) => {
            let req = create_request(&a);
            let validate_only = a.validate_only;
            let r = with_client(&a.conn, |client| async move {
                call(&client, RequestBody::CreateTopics(req), |r| match r {
                    ResponseBody::CreateTopics(r) => Ok(r),
                    other => Err(other),
                })
                .await
            })?;
            finish(render_created(&r, validate_only), a.conn.json)
        }
        What::Delete(a) => {
            let topics = refs(&a.names, &a.ids);
            let r = with_client(&a.conn, |client| async move {
                let req = DeleteTopicsV2Request { topics };
                call(&client, RequestBody::DeleteTopicsV2(req), |r| match r {
                    ResponseBody::DeleteTopicsV2(r) => Ok(r),
                    other => Err(other),
                })
                .await
            })?;
            finish(render_deleted(&r), a.conn.json)
        }
        What::Describe(a) => {
            let topics = refs(&a.names, &a.ids);
            let topics = (!topics.is_empty()).then_some(topics);
            let r = with_client(
                &a.conn,
                |client| async move { describe(&client, topics).await },
            )?;
            finish(render_described(&r), a.conn.json)
        }
        What::List(a) => {
            let r = with_client(
                &a.conn,
                |client| async move { describe(&client, None).await },
            )?;
            finish(render_list(&r), a.conn.json)
        }
    }
}

/// DescribeTopics at the active controller (`None`: every topic).
pub async fn describe(
    client: &corum_client::ControllerClient,
    topics: Option<Vec<TopicRef>>,
) -> anyhow::Result<DescribeTopicsResponse> {
    let req = DescribeTopicsRequest { topics };
    call(client, RequestBody::DescribeTopics(req), |r| match r {
        ResponseBody::DescribeTopics(r) => Ok(r),
        other => Err(other),
    })
    .await
}

fn refs(names: &[String], ids: &[TopicId]) -> Vec<TopicRef> {
    names
        .iter()
        .cloned()
        .map(TopicRef::Name)
        .chain(ids.iter().copied().map(TopicRef::Id))
        .collect()
}

/// The CreateTopics request of `a` (-1 for what the controller defaults).
pub fn create_request(a: &CreateArgs) -> CreateTopicsRequest {
    let assignments = a
        .replica_assignment
        .as_ref()
        .map(|x| x.0.clone())
        .unwrap_or_default();
    let topic = CreatableTopic {
        name: a.name.clone(),
        num_partitions: a.partitions.unwrap_or(-1),
        replication_factor: a.replication_factor.unwrap_or(-1),
        assignments,
        configs: a.configs.clone(),
    };
    CreateTopicsRequest {
        topics: vec![topic],
        validate_only: a.validate_only,
    }
}

/// How an item is named in error lines.
fn item(r: &TopicRef) -> String {
    match r {
        TopicRef::Name(name) => format!("topic {name:?}"),
        TopicRef::Id(id) => format!("topic id {id}"),
    }
}

#[derive(Serialize)]
struct CreatedJson {
    name: String,
    topic_id: Option<String>,
    partitions: Option<u32>,
    replication_factor: Option<u16>,
    error: Option<ItemError>,
}

/// The outcome of a CreateTopics answer.
pub fn render_created(r: &CreateTopicsResponse, validate_only: bool) -> Outcome {
    let mut out = Outcome::default();
    let mut rows = Vec::new();
    for (name, result) in &r.topics {
        let row = match result {
            Ok(t) => {
                let shape = format!(
                    "topic id {}, {} partitions, replication factor {}",
                    t.topic_id, t.num_partitions, t.replication_factor
                );
                let _ = if validate_only {
                    writeln!(
                        out.text,
                        "Topic {name:?} can be created ({shape}): validate only, nothing created."
                    )
                } else {
                    writeln!(out.text, "Created topic {name:?} ({shape}).")
                };
                CreatedJson {
                    name: name.clone(),
                    topic_id: Some(t.topic_id.to_string()),
                    partitions: Some(t.num_partitions),
                    replication_factor: Some(t.replication_factor),
                    error: None,
                }
            }
            Err(e) => {
                let e = ItemError::api(e);
                out.failures
                    .push((item(&TopicRef::Name(name.clone())), e.clone()));
                CreatedJson {
                    name: name.clone(),
                    topic_id: None,
                    partitions: None,
                    replication_factor: None,
                    error: Some(e),
                }
            }
        };
        rows.push(row);
    }
    out.json = serde_json::json!({ "validate_only": validate_only, "topics": to_json(&rows) });
    out
}

#[derive(Serialize)]
struct DeletedJson {
    name: Option<String>,
    topic_id: Option<String>,
    error: Option<ItemError>,
}

/// The outcome of a DeleteTopicsV2 answer.
pub fn render_deleted(r: &DeleteTopicsV2Response) -> Outcome {
    let mut out = Outcome::default();
    let mut rows = Vec::new();
    for (asked, result) in &r.topics {
        let (name, id) = match asked {
            TopicRef::Name(n) => (Some(n.clone()), None),
            TopicRef::Id(id) => (None, Some(id.to_string())),
        };
        rows.push(match result {
            Ok(d) => {
                let _ = writeln!(
                    out.text,
                    "Deleted topic {:?} (topic id {}).",
                    d.name, d.topic_id
                );
                DeletedJson {
                    name: Some(d.name.clone()),
                    topic_id: Some(d.topic_id.to_string()),
                    error: None,
                }
            }
            Err(e) => {
                let e = ItemError::api(e);
                out.failures.push((item(asked), e.clone()));
                DeletedJson {
                    name,
                    topic_id: id,
                    error: Some(e),
                }
            }
        });
    }
    out.json = serde_json::json!({ "topics": to_json(&rows) });
    out
}

#[derive(Serialize)]
struct PartitionJson {
    partition: u32,
    leader: Option<u32>,
    leader_epoch: u32,
    partition_epoch: u32,
    replicas: Vec<u32>,
    isr: Vec<u32>,
    offline_replicas: Vec<u32>,
}

#[derive(Serialize)]
struct TopicJson {
    name: Option<String>,
    topic_id: Option<String>,
    partition_count: Option<usize>,
    replication_factor: Option<usize>,
    partitions: Vec<PartitionJson>,
    error: Option<ItemError>,
}

fn ids(v: &[NodeId]) -> Vec<u32> {
    v.iter().map(|n| n.0).collect()
}

fn joined(v: &[NodeId]) -> String {
    v.iter()
        .map(|n| n.0.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The replication factor as Kafka's tools show it: the replica count of the first partition.
fn replication_factor(t: &DescribedTopic) -> usize {
    t.partitions.first().map_or(0, |p| p.replicas.len())
}

/// The outcome of a DescribeTopics answer: per topic a header line, then one line per
/// partition (tab-separated `Key: value` fields, as `kafka-topics --describe` prints them).
pub fn render_described(r: &DescribeTopicsResponse) -> Outcome {
    let mut out = Outcome::default();
    let mut rows = Vec::new();
    for (asked, result) in &r.topics {
        match result {
            Ok(t) => {
                let _ = writeln!(
                    out.text,
                    "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {}",
                    t.name,
                    t.topic_id,
                    t.partitions.len(),
                    replication_factor(t)
                );
                for p in &t.partitions {
                    let leader = p
                        .leader
                        .map_or_else(|| "none".to_owned(), |l| l.to_string());
                    let _ = writeln!(
                        out.text,
                        "\tTopic: {}\tPartition: {}\tLeader: {leader}\tLeaderEpoch: {}\t\
                         PartitionEpoch: {}\tReplicas: {}\tIsr: {}\tOffline: {}",
                        t.name,
                        p.partition_id.get(),
                        p.leader_epoch.get(),
                        p.partition_epoch.get(),
                        joined(&p.replicas),
                        joined(&p.isr),
                        joined(&p.offline_replicas),
                    );
                }
                rows.push(TopicJson {
                    name: Some(t.name.clone()),
                    topic_id: Some(t.topic_id.to_string()),
                    partition_count: Some(t.partitions.len()),
                    replication_factor: Some(replication_factor(t)),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| PartitionJson {
                            partition: p.partition_id.get(),
                            leader: p.leader.map(|l| l.0),
                            leader_epoch: p.leader_epoch.get(),
                            partition_epoch: p.partition_epoch.get(),
                            replicas: ids(&p.replicas),
                            isr: ids(&p.isr),
                            offline_replicas: ids(&p.offline_replicas),
                        })
                        .collect(),
                    error: None,
                });
            }
            Err(e) => {
                let e = ItemError::api(e);
                out.failures.push((item(asked), e.clone()));
                let (name, topic_id) = match asked {
                    TopicRef::Name(n) => (Some(n.clone()), None),
                    TopicRef::Id(id) => (None, Some(id.to_string())),
                };
                rows.push(TopicJson {
                    name,
                    topic_id,
                    partition_count: None,
                    replication_factor: None,
                    partitions: Vec::new(),
                    error: Some(e),
                });
            }
        }
    }
    out.json = serde_json::json!({ "topics": to_json(&rows) });
    out
}

/// The outcome of an all-topics DescribeTopics answer as a list: names, one per line; the
/// JSON has each name with its id and partition count.
pub fn render_list(r: &DescribeTopicsResponse) -> Outcome {
    let mut out = Outcome::default();
    let mut rows = Vec::new();
    for (asked, result) in &r.topics {
        match result {
            Ok(t) => {
                let _ = writeln!(out.text, "{}", t.name);
                rows.push(serde_json::json!({
                    "name": t.name,
                    "topic_id": t.topic_id.to_string(),
                    "partition_count": t.partitions.len(),
                }));
            }
            // An all-topics answer lists only topics it found; a failure here is a server bug
            // worth showing rather than hiding.
            Err(e) => out.failures.push((item(asked), ItemError::api(e))),
        }
    }
    out.json = serde_json::json!({ "topics": rows });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use corum_controller::control::replication_control::{
        CreatedTopic, DeletedTopic, DescribedPartition,
    };
    use corum_controller::{ApiError, LeaderEpoch, PartitionEpoch, PartitionId};

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        what: What,
    }

    fn parse(args: &[&str]) -> Result<What, clap::Error> {
        let mut v = vec!["topics"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| c.what)
    }

    const B: &str = "--bootstrap=127.0.0.1:9";

    fn topic_id(b: u8) -> TopicId {
        TopicId(Uuid([b; 16]))
    }

    /// `--replica-assignment` follows kafka-topics' syntax; anything but broker ids is refused
    /// with the partition named.
    #[test]
    fn assignment_syntax() {
        assert_eq!(
            parse_assignment("1:2:3,2:3:1").unwrap(),
            Assignment(vec![
                vec![NodeId(1), NodeId(2), NodeId(3)],
                vec![NodeId(2), NodeId(3), NodeId(1)]
            ])
        );
        assert_eq!(
            parse_assignment("7").unwrap(),
            Assignment(vec![vec![NodeId(7)]])
        );
        let e = parse_assignment("1:2,1:x").unwrap_err();
        assert!(e.contains("partition 1") && e.contains("\"x\""), "{e}");
        assert!(parse_assignment("1:2,").is_err());
        assert!(parse_assignment("1::2").is_err());
        assert!(parse_assignment("-1").is_err());
    }

    /// `KEY=VALUE` splits at the first `=`; an empty key or no `=` is refused.
    #[test]
    fn key_value_syntax() {
        assert_eq!(
            parse_key_value("retention.ms=1000").unwrap(),
            ("retention.ms".into(), "1000".into())
        );
        assert_eq!(
            parse_key_value("a=b=c").unwrap(),
            ("a".into(), "b=c".into())
        );
        assert_eq!(parse_key_value("a=").unwrap(), ("a".into(), "".into()));
        assert!(parse_key_value("=1").is_err());
        assert!(parse_key_value("novalue").is_err());
    }

    /// The create request carries the arguments, -1 for the controller's defaults, and the
    /// assignment; an assignment with a partition count or replication factor is refused.
    #[test]
    fn create_request_from_arguments() {
        let What::Create(a) = parse(&[
            "create",
            B,
            "orders",
            "--partitions",
            "3",
            "--config",
            "retention.ms=5",
            "--config",
            "cleanup.policy=compact",
            "--validate-only",
        ])
        .unwrap() else {
            panic!("not create")
        };
        let r = create_request(&a);
        assert!(r.validate_only);
        let t = &r.topics[0];
        assert_eq!(
            (t.name.as_str(), t.num_partitions, t.replication_factor),
            ("orders", 3, -1)
        );
        assert_eq!(
            t.configs,
            [
                ("retention.ms".to_owned(), "5".to_owned()),
                ("cleanup.policy".to_owned(), "compact".to_owned())
            ]
        );
        assert!(t.assignments.is_empty());

        let What::Create(a) =
            parse(&["create", B, "x", "--replica-assignment", "1:2,2:1"]).unwrap()
        else {
            panic!("not create")
        };
        let t = &create_request(&a).topics[0];
        assert_eq!((t.num_partitions, t.replication_factor), (-1, -1));
        assert_eq!(
            t.assignments,
            [[NodeId(1), NodeId(2)], [NodeId(2), NodeId(1)]]
        );
        assert!(!create_request(&a).validate_only);

        assert!(parse(&[
            "create",
            B,
            "x",
            "--replica-assignment",
            "1",
            "--partitions",
            "2"
        ])
        .is_err());
        assert!(parse(&["create", B, "x", "--partitions", "0"]).is_err());
        assert!(parse(&["create", B, "x", "--replication-factor", "-1"]).is_err());
        assert!(parse(&["create", "x"]).is_err(), "--bootstrap is required");
    }

    /// Delete needs at least one topic, by name or id; ids are parsed.
    #[test]
    fn delete_arguments() {
        assert!(parse(&["delete", B]).is_err());
        let id = topic_id(3);
        let What::Delete(a) = parse(&["delete", B, "a", "--id", &id.to_string()]).unwrap() else {
            panic!("not delete")
        };
        assert_eq!(
            refs(&a.names, &a.ids),
            [TopicRef::Name("a".into()), TopicRef::Id(id)]
        );
        assert!(parse(&["delete", B, "--id", "not-an-id"]).is_err());
        // An id may start with '-' (URL-safe base64): it is still the option's value.
        let dash = TopicId(Uuid([0xfb; 16]));
        assert!(dash.to_string().starts_with('-'), "{dash}");
        for what in ["delete", "describe"] {
            let ids = match parse(&[what, B, "--id", &dash.to_string()]).unwrap() {
                What::Delete(a) => a.ids,
                What::Describe(a) => a.ids,
                other => panic!("{other:?}"),
            };
            assert_eq!(ids, [dash]);
        }
    }

    /// A created topic is printed with its id and shape; a failed one is a failure named with
    /// Kafka's error, in the JSON too.
    #[test]
    fn created_and_failed_topics() {
        let r = CreateTopicsResponse {
            topics: vec![
                (
                    "a".into(),
                    Ok(CreatedTopic {
                        topic_id: topic_id(1),
                        num_partitions: 2,
                        replication_factor: 3,
                    }),
                ),
                (
                    "b".into(),
                    Err(ApiError::TopicAlreadyExists { name: "b".into() }),
                ),
            ],
        };
        let o = render_created(&r, false);
        assert!(
            o.text.starts_with(&format!(
                "Created topic \"a\" (topic id {}, 2 partitions, replication factor 3).\n",
                topic_id(1)
            )),
            "{}",
            o.text
        );
        assert!(!o.text.contains("\"b\""), "{}", o.text);
        assert_eq!(o.failures.len(), 1);
        assert_eq!(o.failures[0].0, "topic \"b\"");
        assert_eq!(o.failures[0].1.name, "TOPIC_ALREADY_EXISTS");
        assert_eq!(o.json["topics"][0]["partitions"], 2);
        assert_eq!(o.json["topics"][0]["error"], serde_json::Value::Null);
        assert_eq!(o.json["topics"][1]["error"]["code"], 36);
        assert_eq!(o.json["topics"][1]["error"]["name"], "TOPIC_ALREADY_EXISTS");
        assert_eq!(o.json["validate_only"], false);

        let o = render_created(&r, true);
        assert!(
            o.text.starts_with("Topic \"a\" can be created"),
            "{}",
            o.text
        );
        assert!(o.text.contains("nothing created"), "{}", o.text);
    }

    /// Deleted topics show name and id whichever way they were named; unknown ones fail with
    /// Kafka's names for unknown names and ids.
    #[test]
    fn deleted_topics() {
        let r = DeleteTopicsV2Response {
            topics: vec![
                (
                    TopicRef::Id(topic_id(1)),
                    Ok(DeletedTopic {
                        topic_id: topic_id(1),
                        name: "a".into(),
                    }),
                ),
                (
                    TopicRef::Name("x".into()),
                    Err(ApiError::UnknownTopic { name: "x".into() }),
                ),
                (
                    TopicRef::Id(topic_id(2)),
                    Err(ApiError::UnknownTopicId {
                        topic_id: topic_id(2),
                    }),
                ),
            ],
        };
        let o = render_deleted(&r);
        assert_eq!(
            o.text,
            format!("Deleted topic \"a\" (topic id {}).\n", topic_id(1))
        );
        let names: Vec<&str> = o.failures.iter().map(|(_, e)| e.name.as_str()).collect();
        assert_eq!(names, ["UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID"]);
        assert_eq!(o.failures[1].0, format!("topic id {}", topic_id(2)));
        assert_eq!(o.json["topics"][0]["name"], "a");
        assert_eq!(o.json["topics"][2]["topic_id"], topic_id(2).to_string());
        assert_eq!(o.json["topics"][2]["name"], serde_json::Value::Null);
    }

    fn described(name: &str, b: u8) -> DescribedTopic {
        DescribedTopic {
            topic_id: topic_id(b),
            name: name.into(),
            partitions: vec![
                DescribedPartition {
                    partition_id: PartitionId(0),
                    leader: Some(NodeId(2)),
                    leader_epoch: LeaderEpoch(4),
                    partition_epoch: PartitionEpoch(6),
                    replicas: vec![NodeId(2), NodeId(1), NodeId(3)],
                    isr: vec![NodeId(2), NodeId(1)],
                    offline_replicas: vec![NodeId(3)],
                },
                DescribedPartition {
                    partition_id: PartitionId(1),
                    leader: None,
                    leader_epoch: LeaderEpoch(1),
                    partition_epoch: PartitionEpoch(2),
                    replicas: vec![NodeId(3), NodeId(2), NodeId(1)],
                    isr: vec![NodeId(3)],
                    offline_replicas: vec![NodeId(3)],
                },
            ],
        }
    }

    /// Describe prints kafka-topics' fields per topic and partition (a leaderless partition
    /// as `none`, `null` in the JSON); an unknown topic is a failure; list prints names.
    #[test]
    fn described_topics_and_list() {
        let r = DescribeTopicsResponse {
            topics: vec![
                (TopicRef::Name("orders".into()), Ok(described("orders", 1))),
                (
                    TopicRef::Name("nope".into()),
                    Err(ApiError::UnknownTopic {
                        name: "nope".into(),
                    }),
                ),
            ],
        };
        let o = render_described(&r);
        let lines: Vec<&str> = o.text.lines().collect();
        assert_eq!(lines.len(), 3, "{}", o.text);
        assert_eq!(
            lines[0],
            format!(
                "Topic: orders\tTopicId: {}\tPartitionCount: 2\tReplicationFactor: 3",
                topic_id(1)
            )
        );
        assert_eq!(
            lines[1],
            "\tTopic: orders\tPartition: 0\tLeader: 2\tLeaderEpoch: 4\tPartitionEpoch: 6\t\
             Replicas: 2,1,3\tIsr: 2,1\tOffline: 3"
        );
        assert!(lines[2].contains("Leader: none"), "{}", lines[2]);
        assert_eq!(o.failures[0].1.name, "UNKNOWN_TOPIC_OR_PARTITION");
        let t = &o.json["topics"][0];
        assert_eq!(t["partition_count"], 2);
        assert_eq!(t["partitions"][0]["replicas"], serde_json::json!([2, 1, 3]));
        assert_eq!(t["partitions"][1]["leader"], serde_json::Value::Null);
        assert_eq!(o.json["topics"][1]["error"]["code"], 3);

        let all = DescribeTopicsResponse {
            topics: vec![
                (TopicRef::Name("a".into()), Ok(described("a", 1))),
                (TopicRef::Name("b".into()), Ok(described("b", 2))),
            ],
        };
        let o = render_list(&all);
        assert_eq!(o.text, "a\nb\n");
        assert!(o.failures.is_empty());
        assert_eq!(o.json["topics"][1]["name"], "b");
        assert_eq!(o.json["topics"][1]["topic_id"], topic_id(2).to_string());
    }
}
