//! Synthetic histories that are linearizable by construction, for tests and benches.
//!
//! Each client issues one operation at a time, on a random key; each operation is given a
//! *linearization point* inside its interval, and the operations are executed in the order of
//! those points against one copy of the state, which decides every result. Since each point
//! lies between its operation's invocation and completion, that order respects real time, so
//! the history is linearizable. Operations of unknown outcome take effect at a point after
//! their invocation (possibly after the client gave up) or, half of them, never; failed ones
//! never. Config values and topic ids are unique per write and per creation.
//!
//! Deterministic: one seed, one history (SplitMix64; no dependency).

use std::collections::HashMap;

use crate::history::{History, Located, Op, OpRecord, Outcome, Resource, ResourceType, RunInfo};

/// The shape of a synthetic history.
#[derive(Clone, Copy, Debug)]
pub struct SynthSpec {
    pub seed: u64,
    pub clients: usize,
    pub ops: usize,
    /// Config keys (registers); spread over broker resources, four keys each.
    pub config_keys: usize,
    /// Topic names.
    pub topic_keys: usize,
    /// Operations of unknown outcome, in percent.
    pub unknown_pct: u32,
    /// Operations that failed (no effect), in percent.
    pub failed_pct: u32,
    /// Time from invocation to the linearization point, and from it to the completion: each
    /// uniform in 0..=latency_ns_max.
    pub latency_ns_max: u64,
    /// A client's pause between operations, uniform in 0..=think_ns_max.
    pub think_ns_max: u64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            seed: 0,
            clients: 8,
            ops: 1_000,
            config_keys: 8,
            topic_keys: 2,
            unknown_pct: 2,
            failed_pct: 1,
            latency_ns_max: 2_000_000,
            think_ns_max: 500_000,
        }
    }
}

/// SplitMix64: small, fast, and good enough to draw workloads.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "a range to draw from");
        self.next_u64() % n
    }

    /// Uniform in `0..=max`.
    pub fn up_to(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            self.next_u64()
        } else {
            self.below(max + 1)
        }
    }

    /// True `pct` percent of the time.
    pub fn pct(&mut self, pct: u32) -> bool {
        self.below(100) < u64::from(pct)
    }
}

const CONFIG_NAMES: [&str; 4] = [
    "log.retention.ms",
    "log.segment.bytes",
    "min.insync.replicas",
    "log.cleanup.policy",
];

fn config_key(i: usize) -> (Resource, String) {
    (
        Resource {
            resource_type: ResourceType::Broker,
            name: (i / CONFIG_NAMES.len()).to_string(),
        },
        CONFIG_NAMES[i % CONFIG_NAMES.len()].to_string(),
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    Definite,
    Unknown,
    Failed,
}

struct Planned {
    client: u64,
    invoke_ns: u64,
    complete_ns: u64,
    /// When it takes effect; `None`: never.
    point_ns: Option<u64>,
    op: Op,
    fate: Fate,
}

/// A linearizable history of `spec`'s shape, with a run record naming the seed.
pub fn synth(spec: &SynthSpec) -> History {
    assert!(spec.clients > 0, "a history needs a client");
    assert!(
        spec.config_keys + spec.topic_keys > 0,
        "a history needs a key"
    );
    let mut rng = SplitMix64::new(spec.seed);
    let mut clock: Vec<u64> = (0..spec.clients)
        .map(|_| rng.up_to(spec.think_ns_max))
        .collect();
    let keys = (spec.config_keys + spec.topic_keys) as u64;
    let mut planned: Vec<Planned> = Vec::with_capacity(spec.ops);
    for seq in 0..spec.ops {
        // The client that is free first goes next: the history comes out in invocation order.
        let client = (0..spec.clients)
            .min_by_key(|&c| (clock[c], c))
            .expect("at least one client");
        let invoke_ns = clock[client];
        let k = rng.below(keys) as usize;
        let op = if k < spec.config_keys {
            let (resource, key) = config_key(k);
            match rng.below(20) {
                0..=8 => Op::ConfigSet {
                    resource,
                    key,
                    value: format!("v{seq}"),
                },
                9..=10 => Op::ConfigDelete { resource, key },
                _ => Op::ConfigRead { resource, key },
            }
        } else {
            let topic = format!("topic-{}", k - spec.config_keys);
            match rng.below(20) {
                0..=6 => Op::TopicCreate { topic },
                7..=11 => Op::TopicDelete { topic },
                _ => Op::TopicDescribe { topic },
            }
        };
        let fate = if rng.pct(spec.unknown_pct) {
            Fate::Unknown
        } else if rng.pct(spec.failed_pct) {
            Fate::Failed
        } else {
            Fate::Definite
        };
        let lat = spec.latency_ns_max;
        let (point_ns, complete_ns) = match fate {
            Fate::Definite => {
                let point = invoke_ns + rng.up_to(lat);
                (Some(point), point + rng.up_to(lat))
            }
            // The client gives up after a while; the operation may land later still.
            Fate::Unknown => {
                let gave_up = invoke_ns + rng.up_to(2 * lat);
                let point = (rng.below(2) == 0).then(|| invoke_ns + rng.up_to(4 * lat));
                (point, gave_up)
            }
            Fate::Failed => (None, invoke_ns + rng.up_to(2 * lat)),
        };
        clock[client] = complete_ns + rng.up_to(spec.think_ns_max);
        planned.push(Planned {
            client: client as u64,
            invoke_ns,
            complete_ns,
            point_ns,
            op,
            fate,
        });
    }

    // Execute in linearization order; each operation's outcome is what the state says then.
    let mut order: Vec<usize> = (0..planned.len())
        .filter(|&i| planned[i].point_ns.is_some())
        .collect();
    order.sort_by_key(|&i| (planned[i].point_ns, i));
    let mut configs: HashMap<(Resource, String), String> = HashMap::new();
    let mut topics: HashMap<String, String> = HashMap::new();
    let mut outcomes: Vec<Outcome> = planned
        .iter()
        .map(|p| match p.fate {
            Fate::Unknown => Outcome::Unknown,
            Fate::Failed => Outcome::Failed("synthetic".into()),
            Fate::Definite => Outcome::Unknown, // set below: every definite one has a point
        })
        .collect();
    for i in order {
        let p = &planned[i];
        let outcome = match &p.op {
            Op::ConfigSet {
                resource,
                key,
                value,
            } => {
                configs.insert((resource.clone(), key.clone()), value.clone());
                Outcome::Ok
            }
            Op::ConfigDelete { resource, key } => {
                configs.remove(&(resource.clone(), key.clone()));
                Outcome::Ok
            }
            Op::ConfigRead { resource, key } => {
                match configs.get(&(resource.clone(), key.clone())) {
                    Some(v) => Outcome::Value(v.clone()),
                    None => Outcome::Absent,
                }
            }
            Op::TopicCreate { topic } => {
                if topics.contains_key(topic) {
                    Outcome::AlreadyExists
                } else {
                    let id = format!("id{i}");
                    topics.insert(topic.clone(), id.clone());
                    // One answer in five does not carry the id.
                    Outcome::Created((i % 5 != 0).then_some(id))
                }
            }
            Op::TopicDelete { topic } => match topics.remove(topic) {
                Some(_) => Outcome::Ok,
                None => Outcome::UnknownTopic,
            },
            Op::TopicDescribe { topic } => match topics.get(topic) {
                Some(id) => Outcome::Exists(id.clone()),
                None => Outcome::Absent,
            },
        };
        if p.fate == Fate::Definite {
            outcomes[i] = outcome;
        }
    }

    let ops = planned
        .into_iter()
        .zip(outcomes)
        .enumerate()
        .map(|(i, (p, outcome))| Located {
            line: i + 2,
            record: OpRecord {
                client: p.client,
                invoke_ns: p.invoke_ns,
                complete_ns: Some(p.complete_ns),
                op: p.op,
                outcome,
            },
        })
        .collect();
    History {
        run: Some(RunInfo {
            seed: Some(spec.seed),
            replay: Some(format!("synthetic history, {spec:?}")),
        }),
        ops,
        registrations: Vec::new(),
        observations: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One seed gives one history, and its records obey the format's rules (it reads back).
    #[test]
    fn deterministic_and_valid() {
        let spec = SynthSpec {
            ops: 300,
            ..SynthSpec::default()
        };
        let a = synth(&spec);
        assert_eq!(a, synth(&spec));
        assert_ne!(a, synth(&SynthSpec { seed: 1, ..spec }));
        let back = History::parse(&a.to_json_lines()).expect("a synthetic history is valid");
        assert_eq!(back, a);
    }
}
