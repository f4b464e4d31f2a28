//! History checker benches (`corum-check`): what `corum check-history` costs.
//!
//! - `check/10k_ops_100_keys_8_clients`: every check of a linearizable history of 10,000
//!   operations over 90 config keys and 10 topics, 8 clients, 2% unknown outcomes; throughput
//!   in operations/s.
//! - `check/100k_ops_1000_keys_64_clients`: the same shape, ten times larger, 64 clients.
//! - `check/hot_key_10k_ops_8_clients`: 10,000 operations on one config key from 8 clients
//!   without pause (up to 8 concurrent operations on the key at every point).
//! - `check/stale_read_end_of_hot_key`: a violation the search must exhaust: one key, 8
//!   clients without pause, 200 operations, then a read of a value overwritten long before;
//!   the search tries every order of the concurrent operations at every point before it,
//!   and shrinking re-checks candidates. The figure per run, with the steps, is printed.

use std::time::Instant;

use corum_check::synth::{synth, SynthSpec};
use corum_check::{check, CheckLimits, Conclusion, History, Located, Op, OpRecord, Outcome};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn spec(ops: usize, config_keys: usize, topic_keys: usize, clients: usize) -> SynthSpec {
    SynthSpec {
        seed: 18,
        clients,
        ops,
        config_keys,
        topic_keys,
        unknown_pct: 2,
        failed_pct: 1,
        ..SynthSpec::default()
    }
}

/// A busy key's history with a stale read appended after everything completed.
fn stale_read_at_end() -> History {
    let mut history = synth(&SynthSpec {
        seed: 18,
        clients: 8,
        ops: 200,
        config_keys: 1,
        topic_keys: 0,
        unknown_pct: 5,
        failed_pct: 1,
        latency_ns_max: 2_000,
        think_ns_max: 0,
    });
    let end = history
        .ops
        .iter()
        .filter_map(|o| o.record.complete_ns)
        .max()
        .expect("operations");
    let first = history
        .ops
        .iter()
        .find(|o| matches!(o.record.op, Op::ConfigSet { .. }) && o.record.outcome == Outcome::Ok)
        .expect("a set")
        .record
        .clone();
    let Op::ConfigSet {
        resource,
        key,
        value,
    } = first.op
    else {
        unreachable!("found a set")
    };
    history.ops.push(Located {
        line: 10_000,
        record: OpRecord {
            client: 99,
            invoke_ns: end + 1,
            complete_ns: Some(end + 1_000),
            op: Op::ConfigRead { resource, key },
            outcome: Outcome::Value(value),
        },
    });
    history
}

fn bench_check(c: &mut Criterion) {
    let mut group = c.benchmark_group("check");
    group.sample_size(10);
    let cases = [
        ("10k_ops_100_keys_8_clients", spec(10_000, 90, 10, 8)),
        ("100k_ops_1000_keys_64_clients", spec(100_000, 900, 100, 64)),
        (
            "hot_key_10k_ops_8_clients",
            SynthSpec {
                think_ns_max: 0,
                ..spec(10_000, 1, 0, 8)
            },
        ),
    ];
    for (name, spec) in cases {
        let history = synth(&spec);
        let started = Instant::now();
        let report = check(&history, &CheckLimits::default());
        assert_eq!(report.conclusion(), Conclusion::Pass, "{report}");
        println!(
            "check/{name}: {} steps, {:?} once",
            report.steps,
            started.elapsed()
        );
        group.throughput(Throughput::Elements(spec.ops as u64));
        group.bench_function(name, |b| {
            b.iter(|| check(&history, &CheckLimits::default()))
        });
    }
    let stale = stale_read_at_end();
    let report = check(&stale, &CheckLimits::default());
    assert_eq!(report.conclusion(), Conclusion::Violation, "{report}");
    println!("check/stale_read_end_of_hot_key: {} steps", report.steps);
    group.throughput(Throughput::Elements(stale.ops.len() as u64));
    group.bench_function("stale_read_end_of_hot_key", |b| {
        b.iter(|| check(&stale, &CheckLimits::default()))
    });
    group.finish();
}

criterion_group!(benches, bench_check);
criterion_main!(benches);
