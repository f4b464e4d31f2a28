//! The history format: JSON lines, one [`Record`] per line, as recorders write them (the load
//! generator, `corum chaos`) and the checker reads them.
//!
//! ```text
//! {"type":"run","seed":42,"replay":"corum chaos --seed 42"}
//! {"type":"op","client":1,"invoke_ns":1000,"complete_ns":2000,"op":{"kind":"config_set","resource":{"type":"broker","name":"1"},"key":"log.retention.ms","value":"5"},"outcome":"ok"}
//! {"type":"op","client":2,"invoke_ns":1500,"complete_ns":2600,"op":{"kind":"config_read","resource":{"type":"broker","name":"1"},"key":"log.retention.ms"},"outcome":{"value":"5"}}
//! {"type":"op","client":3,"invoke_ns":3000,"complete_ns":9000,"op":{"kind":"topic_create","topic":"t1"},"outcome":"unknown"}
//! {"type":"op","client":3,"invoke_ns":9100,"complete_ns":9900,"op":{"kind":"topic_describe","topic":"t1"},"outcome":{"exists":"kZ9vG3bMRRiVx2aDe0gqhQ"}}
//! {"type":"broker_registered","broker_id":1,"incarnation_id":"x1","invoke_ns":500,"complete_ns":800,"broker_epoch":17}
//! {"type":"offset_observed","observer":"broker-1","at_ns":4000,"offset":120}
//! ```
//!
//! # Times
//!
//! Every time is nanoseconds of one monotonic clock (`CLOCK_MONOTONIC` of the host that runs
//! every recording client): the checker compares times of different clients, so they must
//! come from the same clock. `invoke_ns` is taken before the request leaves, `complete_ns`
//! after its answer arrived; an operation took effect, if at all, somewhere in between.
//!
//! # Outcomes
//!
//! | operation | outcomes (besides `"unknown"` and `{"failed": why}`) |
//! |---|---|
//! | `config_set` (`value`), `config_delete` of `key` on `resource` | `"ok"` |
//! | `config_read` of `key` on `resource` | `{"value": v}`, `"absent"` (the key is not set on the resource) |
//! | `topic_create` | `{"created": id}` (`id` as the answer gave it, `null` if it gave none), `"already_exists"` |
//! | `topic_delete` | `"ok"`, `"unknown_topic"` |
//! | `topic_describe` | `{"exists": id}`, `"absent"` |
//!
//! `"unknown"`: the client does not know whether the operation took effect (it timed out, its
//! connection broke). It may take effect at any time after its invocation, also after the
//! client gave up, or never; `complete_ns`, if given, is when the client gave up, and means
//! nothing to the checks. `{"failed": why}`: the operation certainly had no effect (the
//! controller refused it before writing anything: a validation error, `NOT_CONTROLLER` for a
//! proposal it never appended); the checks ignore it. Deciding which answers are certain is
//! the recorder's job: when in doubt, `"unknown"`.
//!
//! # Observers and registrations
//!
//! `offset_observed`: the metadata offset an observer (a broker's metadata follower) had
//! applied at `at_ns`. Name an observer per process incarnation (`broker-1#2`): a restarted
//! follower starts again from its snapshot and may legitimately be behind its previous life.
//! `broker_registered`: an acknowledged broker registration and the epoch it was given.

use std::fmt;
use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One line of a history file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// What produced the history: printed with a violation so that it can be replayed.
    Run(RunInfo),
    /// One client operation.
    Op(OpRecord),
    /// An acknowledged broker registration.
    BrokerRegistered(Registration),
    /// A metadata offset an observer had applied.
    OffsetObserved(OffsetObservation),
}

/// What produced a history.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunInfo {
    /// The seed of the run (`corum chaos --seed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The command that replays the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<String>,
}

/// One client operation: what it asked, when, and what it was told.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpRecord {
    /// Which client (informational: the checks do not assume a client has one operation in
    /// flight at a time).
    pub client: u64,
    pub invoke_ns: u64,
    /// When the answer arrived; required unless the outcome is `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_ns: Option<u64>,
    pub op: Op,
    pub outcome: Outcome,
}

/// A config resource (Kafka's `ConfigResource`): a topic, or a broker (`name` empty: the
/// cluster-wide default).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    #[serde(rename = "type")]
    pub resource_type: ResourceType,
    pub name: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceType {
    Topic,
    Broker,
}

/// What a client asked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// IncrementalAlterConfigs SET of one key.
    ConfigSet {
        resource: Resource,
        key: String,
        value: String,
    },
    /// IncrementalAlterConfigs DELETE of one key.
    ConfigDelete { resource: Resource, key: String },
    /// DescribeConfigs of one key: the value set on the resource itself (not a default).
    ConfigRead { resource: Resource, key: String },
    /// CreateTopics of one topic.
    TopicCreate { topic: String },
    /// DeleteTopics of one topic, by name.
    TopicDelete { topic: String },
    /// Describe (Metadata) of one topic, by name.
    TopicDescribe { topic: String },
}

/// What a client was told.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The write was applied (config set/delete, topic delete).
    Ok,
    /// The client does not know whether the operation took effect.
    Unknown,
    /// The operation certainly had no effect; the reason as the client saw it.
    Failed(String),
    /// A config read: the value set.
    Value(String),
    /// A config read: the key is not set; a topic describe: no such topic.
    Absent,
    /// A topic create: created, with the topic id if the answer carried one.
    Created(Option<String>),
    /// A topic create: the topic exists already.
    AlreadyExists,
    /// A topic delete: no such topic.
    UnknownTopic,
    /// A topic describe: the topic exists with this id.
    Exists(String),
}

/// An acknowledged broker registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    pub broker_id: i32,
    /// The broker process's incarnation id (any text that tells incarnations apart).
    pub incarnation_id: String,
    pub invoke_ns: u64,
    pub complete_ns: u64,
    pub broker_epoch: i64,
}

/// The metadata offset `observer` had applied at `at_ns`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffsetObservation {
    pub observer: String,
    pub at_ns: u64,
    pub offset: u64,
}

/// A record and the line it was read from (counted from 1; for records built in memory, their
/// position counted from 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located<T> {
    pub line: usize,
    pub record: T,
}

/// A whole history, in file order, every record checked against the format's rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    pub run: Option<RunInfo>,
    pub ops: Vec<Located<OpRecord>>,
    pub registrations: Vec<Located<Registration>>,
    pub observations: Vec<Located<OffsetObservation>>,
}

impl Op {
    /// Whether the outcome is one this operation can have.
    pub fn admits(&self, outcome: &Outcome) -> bool {
        use Outcome as O;
        matches!(
            (self, outcome),
            (_, O::Unknown | O::Failed(_))
                | (Op::ConfigSet { .. } | Op::ConfigDelete { .. }, O::Ok)
                | (Op::ConfigRead { .. }, O::Value(_) | O::Absent)
                | (Op::TopicCreate { .. }, O::Created(_) | O::AlreadyExists)
                | (Op::TopicDelete { .. }, O::Ok | O::UnknownTopic)
                | (Op::TopicDescribe { .. }, O::Exists(_) | O::Absent)
        )
    }

    /// Whether the operation changes nothing whatever its outcome.
    pub fn is_read(&self) -> bool {
        matches!(self, Op::ConfigRead { .. } | Op::TopicDescribe { .. })
    }
}

impl Record {
    /// The record as one line of JSON, without the newline.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a record is plain data: it always serializes")
    }

    /// The record's own rules; `Err` is the reason.
    fn validate(&self) -> std::result::Result<(), String> {
        match self {
            Record::Run(_) => Ok(()),
            Record::Op(op) => {
                if !op.op.admits(&op.outcome) {
                    return Err(format!(
                        "outcome {} is not one a {} can have",
                        serde_json::to_string(&op.outcome).expect("plain data"),
                        op.op.kind_name()
                    ));
                }
                match op.complete_ns {
                    None if op.outcome != Outcome::Unknown => Err(format!(
                        "complete_ns is missing: only an unknown outcome may lack it (outcome {})",
                        serde_json::to_string(&op.outcome).expect("plain data")
                    )),
                    Some(c) if c < op.invoke_ns => Err(format!(
                        "complete_ns {c} is before invoke_ns {}",
                        op.invoke_ns
                    )),
                    _ => Ok(()),
                }
            }
            Record::BrokerRegistered(r) if r.complete_ns < r.invoke_ns => Err(format!(
                "complete_ns {} is before invoke_ns {}",
                r.complete_ns, r.invoke_ns
            )),
            Record::BrokerRegistered(_) | Record::OffsetObserved(_) => Ok(()),
        }
    }
}

impl Op {
    /// The `kind` of the operation as the format spells it.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Op::ConfigSet { .. } => "config_set",
            Op::ConfigDelete { .. } => "config_delete",
            Op::ConfigRead { .. } => "config_read",
            Op::TopicCreate { .. } => "topic_create",
            Op::TopicDelete { .. } => "topic_delete",
            Op::TopicDescribe { .. } => "topic_describe",
        }
    }
}

impl History {
    /// Reads a history file.
    pub fn read(path: &Path) -> Result<History> {
        let file = std::fs::File::open(path).map_err(|source| Error::Io {
            op: "opening",
            path: path.to_path_buf(),
            source,
        })?;
        let mut history = History::default();
        for (index, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|source| Error::Io {
                op: "reading",
                path: path.to_path_buf(),
                source,
            })?;
            history.push_line(index + 1, &line)?;
        }
        Ok(history)
    }

    /// Parses a history from text.
    pub fn parse(text: &str) -> Result<History> {
        let mut history = History::default();
        for (index, line) in text.lines().enumerate() {
            history.push_line(index + 1, line)?;
        }
        Ok(history)
    }

    /// A history of records built in memory (tests, generators); each is located at its
    /// position counted from 1.
    pub fn from_records(records: impl IntoIterator<Item = Record>) -> Result<History> {
        let mut history = History::default();
        for (index, record) in records.into_iter().enumerate() {
            history.push(index + 1, record)?;
        }
        Ok(history)
    }

    /// The history as JSON lines, in the order `from_records` or the file gave (runs first).
    pub fn to_json_lines(&self) -> String {
        let mut lines: Vec<(usize, Record)> = Vec::new();
        if let Some(run) = &self.run {
            lines.push((0, Record::Run(run.clone())));
        }
        lines.extend(
            self.ops
                .iter()
                .map(|o| (o.line, Record::Op(o.record.clone()))),
        );
        lines.extend(
            self.registrations
                .iter()
                .map(|r| (r.line, Record::BrokerRegistered(r.record.clone()))),
        );
        lines.extend(
            self.observations
                .iter()
                .map(|o| (o.line, Record::OffsetObserved(o.record.clone()))),
        );
        lines.sort_by_key(|(line, _)| *line);
        let mut out = String::new();
        for (_, record) in lines {
            out.push_str(&record.to_json_line());
            out.push('\n');
        }
        out
    }

    fn push_line(&mut self, line: usize, text: &str) -> Result<()> {
        if text.trim().is_empty() {
            return Ok(());
        }
        let record: Record =
            serde_json::from_str(text).map_err(|source| Error::Json { line, source })?;
        self.push(line, record)
    }

    fn push(&mut self, line: usize, record: Record) -> Result<()> {
        record
            .validate()
            .map_err(|reason| Error::Invalid { line, reason })?;
        match record {
            Record::Run(run) => {
                if self.run.is_some() {
                    return Err(Error::Invalid {
                        line,
                        reason: "a second run record: a history describes one run".into(),
                    });
                }
                self.run = Some(run);
            }
            Record::Op(record) => self.ops.push(Located { line, record }),
            Record::BrokerRegistered(record) => self.registrations.push(Located { line, record }),
            Record::OffsetObserved(record) => self.observations.push(Located { line, record }),
        }
        Ok(())
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = match self.resource_type {
            ResourceType::Topic => "topic",
            ResourceType::Broker => "broker",
        };
        if self.name.is_empty() {
            write!(f, "{t}:<default>")
        } else {
            write!(f, "{t}:{}", self.name)
        }
    }
}

/// Operations and outcomes as a person reads them in a report: `set log.retention.ms = "5"`.
impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::ConfigSet { key, value, .. } => write!(f, "set {key} = {value:?}"),
            Op::ConfigDelete { key, .. } => write!(f, "delete {key}"),
            Op::ConfigRead { key, .. } => write!(f, "read {key}"),
            Op::TopicCreate { topic } => write!(f, "create topic {topic:?}"),
            Op::TopicDelete { topic } => write!(f, "delete topic {topic:?}"),
            Op::TopicDescribe { topic } => write!(f, "describe topic {topic:?}"),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok => write!(f, "ok"),
            Outcome::Unknown => write!(f, "unknown"),
            Outcome::Failed(why) => write!(f, "failed ({why})"),
            Outcome::Value(v) => write!(f, "{v:?}"),
            Outcome::Absent => write!(f, "absent"),
            Outcome::Created(Some(id)) => write!(f, "created, id {id}"),
            Outcome::Created(None) => write!(f, "created"),
            Outcome::AlreadyExists => write!(f, "already exists"),
            Outcome::UnknownTopic => write!(f, "unknown topic"),
            Outcome::Exists(id) => write!(f, "exists, id {id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module doc's example lines parse, and each record writes back to the same line.
    #[test]
    fn the_documented_lines_parse_and_round_trip() {
        let doc = include_str!("history.rs");
        let lines: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("//! {"))
            .collect();
        assert_eq!(lines.len(), 7, "the doc shows seven example lines");
        for rest in lines {
            let line = format!("{{{rest}");
            let record: Record = serde_json::from_str(&line).expect(&line);
            record.validate().expect(&line);
            assert_eq!(record.to_json_line(), line);
        }
    }

    /// A line that is not JSON, or not a record, is an error naming its line.
    #[test]
    fn malformed_lines_are_named() {
        let good = r#"{"type":"offset_observed","observer":"b","at_ns":1,"offset":2}"#;
        let text = format!("{good}\n\n{good}\n{{\"type\":\"op\",\"client\":1\n");
        match History::parse(&text) {
            Err(Error::Json { line: 4, .. }) => {}
            other => panic!("expected a JSON error on line 4, got {other:?}"),
        }
        let text = format!(
            "{good}\n{}\n",
            r#"{"type":"offset_observed","observer":"b","at_ns":1,"offset":2,"extra":1}"#
        );
        match History::parse(&text) {
            Err(Error::Json { line: 2, .. }) => {}
            other => panic!("an unknown field is refused, got {other:?}"),
        }
        let text = r#"{"type":"op","client":1,"invoke_ns":5,"complete_ns":6,"op":{"kind":"config_frob","resource":{"type":"broker","name":"1"},"key":"k"},"outcome":"ok"}"#;
        match History::parse(text) {
            Err(e @ Error::Json { line: 1, .. }) => assert!(e.to_string().starts_with("line 1:")),
            other => panic!("an unknown operation is refused, got {other:?}"),
        }
    }

    /// Records that are JSON of the right shape but break a rule are refused with the reason.
    #[test]
    fn records_that_break_a_rule_are_refused() {
        let cases = [
            (
                r#"{"type":"op","client":1,"invoke_ns":5,"complete_ns":6,"op":{"kind":"config_read","resource":{"type":"broker","name":"1"},"key":"k"},"outcome":"ok"}"#,
                "not one a config_read can have",
            ),
            (
                r#"{"type":"op","client":1,"invoke_ns":5,"op":{"kind":"topic_create","topic":"t"},"outcome":"already_exists"}"#,
                "complete_ns is missing",
            ),
            (
                r#"{"type":"op","client":1,"invoke_ns":5,"complete_ns":4,"op":{"kind":"topic_delete","topic":"t"},"outcome":"ok"}"#,
                "before invoke_ns",
            ),
            (
                r#"{"type":"broker_registered","broker_id":1,"incarnation_id":"a","invoke_ns":5,"complete_ns":4,"broker_epoch":3}"#,
                "before invoke_ns",
            ),
        ];
        for (line, reason) in cases {
            match History::parse(line) {
                Err(Error::Invalid { line: 1, reason: r }) => assert!(r.contains(reason), "{r}"),
                other => panic!("{line}: expected {reason:?}, got {other:?}"),
            }
        }
        let run = r#"{"type":"run","seed":1}"#;
        match History::parse(&format!("{run}\n{run}")) {
            Err(Error::Invalid { line: 2, .. }) => {}
            other => panic!("a second run record is refused, got {other:?}"),
        }
        // An unknown outcome needs no completion time.
        let unknown = r#"{"type":"op","client":1,"invoke_ns":5,"op":{"kind":"topic_create","topic":"t"},"outcome":"unknown"}"#;
        assert_eq!(History::parse(unknown).expect("valid").ops.len(), 1);
    }

    /// A history written with `to_json_lines` reads back equal.
    #[test]
    fn histories_round_trip() {
        let doc = include_str!("history.rs");
        let text: String = doc
            .lines()
            .filter_map(|l| l.strip_prefix("//! {"))
            .map(|l| format!("{{{l}\n"))
            .collect();
        let history = History::parse(&text).expect("the doc's lines");
        assert_eq!(history.ops.len(), 4);
        assert_eq!(history.to_json_lines(), text);
        assert_eq!(
            History::parse(&history.to_json_lines()).expect("again"),
            history
        );
    }
}
