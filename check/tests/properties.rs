//! Property tests: the search agrees with a brute-force one on small random histories (of
//! either answer); histories executed against the model with random real-time overlaps are
//! always accepted; one stale read that real time forbids, injected anywhere, is always
//! rejected, and the shrinker's output still fails, is no larger, and keeps that read.

use corum_check::keys::{partition, register_ops, topic_ops, Key};
use corum_check::model::{
    CreateResult, DeleteResult, Model, RegisterModel, RegisterOp, Timed, TopicModel, TopicOp,
};
use corum_check::search::{search, Limits, Verdict};
use corum_check::synth::{synth, SynthSpec};
use corum_check::{check, CheckLimits, Conclusion, History, Located, Op, OpRecord, Outcome};
use proptest::prelude::*;
use proptest::sample::Index;

/// Tries every order of the operations that respects real time, with each operation of
/// unknown outcome placed somewhere or nowhere. Exponential: for a handful of operations.
fn brute_force<M: Model>(ops: &[Timed<M::Op>]) -> bool {
    fn extend<M: Model>(
        model: &M,
        ops: &[Timed<M::Op>],
        placed: &mut [bool],
        state: &M::State,
        definite_left: usize,
    ) -> bool {
        if definite_left == 0 {
            return true;
        }
        for i in 0..ops.len() {
            if placed[i] {
                continue;
            }
            // Everything that completed before `i` was invoked must be placed already.
            let blocked = (0..ops.len()).any(|j| {
                j != i && !placed[j] && ops[j].complete_ns.is_some_and(|c| c < ops[i].invoke_ns)
            });
            if blocked {
                continue;
            }
            if let Some(next) = model.step(state, &ops[i].op) {
                placed[i] = true;
                let left = definite_left - usize::from(ops[i].complete_ns.is_some());
                if extend(model, ops, placed, &next, left) {
                    return true;
                }
                placed[i] = false;
            }
        }
        false
    }
    let model = M::for_ops(ops);
    let definite = ops.iter().filter(|o| o.complete_ns.is_some()).count();
    extend(
        &model,
        ops,
        &mut vec![false; ops.len()],
        &model.init(),
        definite,
    )
}

fn decided<M: Model>(ops: &[Timed<M::Op>]) -> bool {
    match search::<M>(ops, &Limits::steps(10_000_000)).verdict {
        Verdict::Linearizable => true,
        Verdict::Violation => false,
        Verdict::Undecided(e) => panic!("a tiny history stayed undecided: {e:?}"),
    }
}

/// (invoke, duration, unknown?): times from a small range so that operations overlap often.
fn interval() -> impl Strategy<Value = (u64, u64, bool)> {
    (0u64..30, 0u64..15, prop::bool::weighted(0.2))
}

fn register_op() -> impl Strategy<Value = Timed<RegisterOp>> {
    (interval(), any::<bool>(), prop::option::of(0u32..3)).prop_map(
        |((invoke_ns, duration, unknown), write, value)| {
            // Only writes have unknown outcomes: unknown reads are dropped before the search.
            let unknown = unknown && write;
            Timed {
                invoke_ns,
                complete_ns: (!unknown).then_some(invoke_ns + duration),
                op: if write {
                    RegisterOp::Write(value)
                } else {
                    RegisterOp::Read(value)
                },
            }
        },
    )
}

fn topic_op() -> impl Strategy<Value = Timed<TopicOp>> {
    (interval(), 0u8..8, prop::option::of(0u32..3)).prop_map(
        |((invoke_ns, duration, unknown), kind, id)| {
            let op = match kind {
                0 if unknown => TopicOp::Create(CreateResult::Unknown),
                1 if unknown => TopicOp::Delete(DeleteResult::Unknown),
                0 | 1 => TopicOp::Create(CreateResult::Created(id)),
                2 => TopicOp::Create(CreateResult::AlreadyExists),
                3 => TopicOp::Delete(DeleteResult::Deleted),
                4 => TopicOp::Delete(DeleteResult::UnknownTopic),
                _ => TopicOp::Describe(id),
            };
            let unknown = matches!(
                op,
                TopicOp::Create(CreateResult::Unknown) | TopicOp::Delete(DeleteResult::Unknown)
            );
            Timed {
                invoke_ns,
                complete_ns: (!unknown).then_some(invoke_ns + duration),
                op,
            }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// On random small register histories, linearizable or not, the search answers as the
    /// brute force does.
    #[test]
    fn register_search_agrees_with_brute_force(ops in prop::collection::vec(register_op(), 0..8)) {
        prop_assert_eq!(decided::<RegisterModel>(&ops), brute_force::<RegisterModel>(&ops));
    }

    /// The same for topics: creates, deletes and describes of every result, ids known or not.
    #[test]
    fn topic_search_agrees_with_brute_force(ops in prop::collection::vec(topic_op(), 0..8)) {
        prop_assert_eq!(decided::<TopicModel>(&ops), brute_force::<TopicModel>(&ops));
    }
}

/// Up to 8 clients (all on one key at worst) and 200 operations: a violation late in such a
/// history takes the search a few million steps (every order of up to 8 concurrent operations
/// at every point before it), which keeps a thousand cases within seconds.
fn spec() -> impl Strategy<Value = SynthSpec> {
    (
        any::<u64>(),
        1usize..=8,
        1usize..=200,
        1usize..=6,
        0usize..=3,
        0u32..=20,
        0u32..=5,
        1u64..5_000,
        0u64..5_000,
    )
        .prop_map(
            |(seed, clients, ops, config_keys, topic_keys, unknown_pct, failed_pct, lat, think)| {
                SynthSpec {
                    seed,
                    clients,
                    ops,
                    config_keys,
                    topic_keys,
                    unknown_pct,
                    failed_pct,
                    latency_ns_max: lat,
                    think_ns_max: think,
                }
            },
        )
}

/// The write that a stale read will show and the write that real time puts after it.
struct Stale {
    shown: Located<OpRecord>,
    after: Located<OpRecord>,
}

/// Every (shown, after) pair of one key where `shown` completed before `after` was invoked,
/// both acknowledged, `shown` leaving a state nothing else in the history leaves (a unique
/// config value, or a topic id its create's answer named) and `after` changing it.
fn stale_pairs(history: &History) -> Vec<Stale> {
    let (keys, _) = partition(history);
    let mut pairs = Vec::new();
    for key in keys {
        for shown in &key.records {
            let shows = matches!(
                (&shown.record.op, &shown.record.outcome),
                (Op::ConfigSet { .. }, Outcome::Ok)
                    | (Op::TopicCreate { .. }, Outcome::Created(Some(_)))
            );
            if !shows {
                continue;
            }
            let done = shown.record.complete_ns.expect("acknowledged");
            for after in &key.records {
                let changes = matches!(
                    (&after.record.op, &after.record.outcome),
                    (
                        Op::ConfigSet { .. } | Op::ConfigDelete { .. } | Op::TopicDelete { .. },
                        Outcome::Ok
                    )
                );
                if changes && done < after.record.invoke_ns {
                    pairs.push(Stale {
                        shown: (*shown).clone(),
                        after: (*after).clone(),
                    });
                }
            }
        }
    }
    pairs
}

/// A read of what `stale.shown` left, invoked `gap` after `stale.after` completed (`gap > 0`:
/// touching at one instant is concurrent).
fn stale_read(stale: &Stale, gap: u64, duration: u64) -> OpRecord {
    let invoke_ns = stale.after.record.complete_ns.expect("acknowledged") + gap;
    let (op, outcome) = match (&stale.shown.record.op, &stale.shown.record.outcome) {
        (
            Op::ConfigSet {
                resource,
                key,
                value,
            },
            _,
        ) => (
            Op::ConfigRead {
                resource: resource.clone(),
                key: key.clone(),
            },
            Outcome::Value(value.clone()),
        ),
        (Op::TopicCreate { topic }, Outcome::Created(Some(id))) => (
            Op::TopicDescribe {
                topic: topic.clone(),
            },
            Outcome::Exists(id.clone()),
        ),
        other => unreachable!("stale_pairs picks no {other:?}"),
    };
    OpRecord {
        client: 999,
        invoke_ns,
        complete_ns: Some(invoke_ns + duration),
        op,
        outcome,
    }
}

fn key_of(record: &OpRecord) -> Key {
    let history = History {
        ops: vec![Located {
            line: 1,
            record: record.clone(),
        }],
        ..History::default()
    };
    partition(&history).0.remove(0).key
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Histories executed against the model in the order of random points inside random
    /// overlapping intervals, with unknown and failed outcomes, always pass every check.
    #[test]
    fn executed_histories_are_accepted(spec in spec()) {
        let history = synth(&spec);
        let report = check(&history, &CheckLimits::steps(20_000_000));
        prop_assert_eq!(report.conclusion(), Conclusion::Pass, "{}", report);
    }

    /// One read that real time forbids — it shows a write after another write completed
    /// over it — injected into an executed history is always reported, on its key; the
    /// shrunk history fails on its own, is no larger than the key's, and holds that read.
    #[test]
    fn an_injected_stale_read_is_rejected_and_shrinks(
        spec in spec(),
        pick in any::<Index>(),
        gap in 1u64..3_000,
        duration in 0u64..3_000,
    ) {
        let mut history = synth(&spec);
        let pairs = stale_pairs(&history);
        prop_assume!(!pairs.is_empty());
        let stale = &pairs[pick.index(pairs.len())];
        let read = stale_read(stale, gap, duration);
        let line = history.ops.len() + 100;
        let key = key_of(&read);
        history.ops.push(Located { line, record: read });

        let report = check(&history, &CheckLimits::steps(20_000_000));
        prop_assert_eq!(report.conclusion(), Conclusion::Violation);
        prop_assert!(report.undecided.is_empty());
        prop_assert_eq!(report.violations.len(), 1, "{}", report);
        let violation = &report.violations[0];
        prop_assert_eq!(&violation.key, &key);
        prop_assert!(violation.shrunk.len() <= violation.ops_total);
        prop_assert!(
            violation.shrunk.iter().any(|o| o.line == line),
            "the shrunk history keeps the stale read:\n{}", report
        );

        // The shrunk history, checked on its own, still fails.
        let alone = History {
            ops: violation.shrunk.clone(),
            ..History::default()
        };
        let (keys, _) = partition(&alone);
        prop_assert_eq!(keys.len(), 1);
        let verdict = match &keys[0].key {
            Key::Config { .. } => search::<RegisterModel>(&register_ops(&keys[0].records), &Limits::steps(20_000_000)).verdict,
            Key::Topic(_) => search::<TopicModel>(&topic_ops(&keys[0].records), &Limits::steps(20_000_000)).verdict,
        };
        prop_assert_eq!(verdict, Verdict::Violation);
    }
}
