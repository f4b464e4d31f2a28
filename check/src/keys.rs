//! Splitting a history by key, and each key's records into a model's operations.
//!
//! Linearizability is compositional (Herlihy & Wing): a history is linearizable iff the
//! history of each object is. corum's objects are the config keys (one register per resource
//! and key) and the topic names, so each is checked alone, which keeps every search small.
//! That holds as long as no operation touches two of them: a workload that deletes topics
//! must not also read configs of those topics (a topic's deletion deletes its configs, a
//! write to two objects at once that the per-key models do not see).
//!
//! What the checks ignore: operations that failed (certainly no effect), and reads of unknown
//! outcome (they constrain nothing).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::history::{History, Located, Op, OpRecord, Outcome, Resource};
use crate::model::{CreateResult, DeleteResult, RegisterOp, Timed, TopicOp};

/// An object of the history.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// One config key of one resource.
    Config { resource: Resource, key: String },
    /// One topic name.
    Topic(String),
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Config { resource, key } => write!(f, "config {key} of {resource}"),
            Key::Topic(name) => write!(f, "topic {name:?}"),
        }
    }
}

/// The operations of one key that the checks look at.
#[derive(Clone, Debug)]
pub struct KeyHistory<'h> {
    pub key: Key,
    /// In file order.
    pub records: Vec<&'h Located<OpRecord>>,
}

/// The keys of a history in key order, and how many operations were ignored.
pub fn partition(history: &History) -> (Vec<KeyHistory<'_>>, usize) {
    let mut keys: BTreeMap<Key, Vec<&Located<OpRecord>>> = BTreeMap::new();
    let mut ignored = 0;
    for located in &history.ops {
        let record = &located.record;
        let unknown_read = record.outcome == Outcome::Unknown && record.op.is_read();
        if matches!(record.outcome, Outcome::Failed(_)) || unknown_read {
            ignored += 1;
            continue;
        }
        keys.entry(key_of(&record.op)).or_default().push(located);
    }
    let keys = keys
        .into_iter()
        .map(|(key, records)| KeyHistory { key, records })
        .collect();
    (keys, ignored)
}

fn key_of(op: &Op) -> Key {
    match op {
        Op::ConfigSet { resource, key, .. }
        | Op::ConfigDelete { resource, key }
        | Op::ConfigRead { resource, key } => Key::Config {
            resource: resource.clone(),
            key: key.clone(),
        },
        Op::TopicCreate { topic } | Op::TopicDelete { topic } | Op::TopicDescribe { topic } => {
            Key::Topic(topic.clone())
        }
    }
}

/// Interns texts (config values, topic ids) as small numbers, per key.
#[derive(Default)]
struct Interner<'h> {
    ids: HashMap<&'h str, u32>,
}

impl<'h> Interner<'h> {
    fn id(&mut self, text: &'h str) -> u32 {
        let next = u32::try_from(self.ids.len()).expect("fewer than 2^32 distinct values per key");
        *self.ids.entry(text).or_insert(next)
    }
}

fn timed<O>(record: &OpRecord, op: O) -> Timed<O> {
    let unknown = record.outcome == Outcome::Unknown;
    Timed {
        invoke_ns: record.invoke_ns,
        complete_ns: if unknown { None } else { record.complete_ns },
        op,
    }
}

/// A config key's records as register operations.
///
/// Values no read saw all become one value: only reads tell values apart, so a history is
/// linearizable with them distinct iff it is with them equal, and equal they make the
/// search's configurations after any of those writes one (the concurrent writes of a busy
/// key are mostly such: overwritten before anybody read them).
///
/// Panics if a record is not a config operation with an outcome `partition` keeps: the
/// records come from `partition` under a `Key::Config`.
pub fn register_ops<'h>(records: &[&'h Located<OpRecord>]) -> Vec<Timed<RegisterOp>> {
    let mut values = Interner::default();
    for located in records {
        if let Outcome::Value(v) = &located.record.outcome {
            values.id(v);
        }
    }
    let unread = u32::try_from(values.ids.len()).expect("fewer than 2^32 values per key");
    let value_id = |v: &'h str| values.ids.get(v).copied().unwrap_or(unread);
    records
        .iter()
        .map(|located| {
            let r = &located.record;
            let op = match (&r.op, &r.outcome) {
                (Op::ConfigSet { value, .. }, Outcome::Ok | Outcome::Unknown) => {
                    RegisterOp::Write(Some(value_id(value)))
                }
                (Op::ConfigDelete { .. }, Outcome::Ok | Outcome::Unknown) => {
                    RegisterOp::Write(None)
                }
                (Op::ConfigRead { .. }, Outcome::Value(v)) => RegisterOp::Read(Some(value_id(v))),
                (Op::ConfigRead { .. }, Outcome::Absent) => RegisterOp::Read(None),
                (op, outcome) => panic!(
                    "line {}: {op:?} -> {outcome:?} is not a kept config operation",
                    located.line
                ),
            };
            timed(r, op)
        })
        .collect()
}

/// A topic name's records as topic operations.
///
/// Panics if a record is not a topic operation with an outcome `partition` keeps.
pub fn topic_ops(records: &[&Located<OpRecord>]) -> Vec<Timed<TopicOp>> {
    let mut ids = Interner::default();
    records
        .iter()
        .map(|located| {
            let r = &located.record;
            let op = match (&r.op, &r.outcome) {
                (Op::TopicCreate { .. }, Outcome::Created(id)) => {
                    TopicOp::Create(CreateResult::Created(id.as_deref().map(|i| ids.id(i))))
                }
                (Op::TopicCreate { .. }, Outcome::AlreadyExists) => {
                    TopicOp::Create(CreateResult::AlreadyExists)
                }
                (Op::TopicCreate { .. }, Outcome::Unknown) => {
                    TopicOp::Create(CreateResult::Unknown)
                }
                (Op::TopicDelete { .. }, Outcome::Ok) => TopicOp::Delete(DeleteResult::Deleted),
                (Op::TopicDelete { .. }, Outcome::UnknownTopic) => {
                    TopicOp::Delete(DeleteResult::UnknownTopic)
                }
                (Op::TopicDelete { .. }, Outcome::Unknown) => {
                    TopicOp::Delete(DeleteResult::Unknown)
                }
                (Op::TopicDescribe { .. }, Outcome::Exists(id)) => {
                    TopicOp::Describe(Some(ids.id(id)))
                }
                (Op::TopicDescribe { .. }, Outcome::Absent) => TopicOp::Describe(None),
                (op, outcome) => panic!(
                    "line {}: {op:?} -> {outcome:?} is not a kept topic operation",
                    located.line
                ),
            };
            timed(r, op)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::ResourceType;

    /// Failed operations and unknown reads are left out; the rest go to their key, with
    /// unknown outcomes losing their completion time, equal texts the same number, and values
    /// nobody read one number.
    #[test]
    fn partition_and_convert() {
        let broker = Resource {
            resource_type: ResourceType::Broker,
            name: "1".into(),
        };
        let config = |op: Op, complete_ns: Option<u64>, outcome: Outcome| OpRecord {
            client: 1,
            invoke_ns: 10,
            complete_ns,
            op,
            outcome,
        };
        let set = |v: &str| Op::ConfigSet {
            resource: broker.clone(),
            key: "k".into(),
            value: v.into(),
        };
        let read = Op::ConfigRead {
            resource: broker.clone(),
            key: "k".into(),
        };
        let history = History::from_records([
            crate::Record::Op(config(set("a"), Some(20), Outcome::Ok)),
            crate::Record::Op(config(set("b"), Some(20), Outcome::Unknown)),
            crate::Record::Op(config(
                set("c"),
                Some(20),
                Outcome::Failed("INVALID".into()),
            )),
            crate::Record::Op(config(read.clone(), None, Outcome::Unknown)),
            crate::Record::Op(config(read, Some(30), Outcome::Value("a".into()))),
            crate::Record::Op(config(
                Op::TopicDescribe { topic: "t".into() },
                Some(30),
                Outcome::Absent,
            )),
        ])
        .expect("valid records");
        let (keys, ignored) = partition(&history);
        assert_eq!(ignored, 2);
        assert_eq!(keys.len(), 2);
        assert!(matches!(keys[0].key, Key::Config { .. }));
        assert_eq!(keys[1].key, Key::Topic("t".into()));
        let ops = register_ops(&keys[0].records);
        let got: Vec<(Option<u64>, RegisterOp)> =
            ops.iter().map(|o| (o.complete_ns, o.op)).collect();
        // "a" was read (value 0); "b" was not (the one value of everything unread, 1).
        assert_eq!(
            got,
            vec![
                (Some(20), RegisterOp::Write(Some(0))),
                (None, RegisterOp::Write(Some(1))),
                (Some(30), RegisterOp::Read(Some(0))),
            ]
        );
        assert_eq!(topic_ops(&keys[1].records)[0].op, TopicOp::Describe(None));
    }
}
