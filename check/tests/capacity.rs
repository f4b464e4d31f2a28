//! How much history the checker decides within its default budget: a run-sized history
//! (10,000 operations over 100 keys, 8 clients) passes, and a stale read at the very end of a
//! busy key's history (8 clients on one key, every order of their concurrent operations to try
//! at every point before it) is found. Steps are deterministic; the times printed are this
//! machine's (`cargo test -p corum-check --test capacity -- --nocapture`).

use std::time::Instant;

use corum_check::synth::{synth, SynthSpec};
use corum_check::{check, CheckLimits, Conclusion, Located, Op, OpRecord, Outcome};

/// 10,000 operations over 90 config keys and 10 topics, 8 clients, 2% unknown outcomes.
#[test]
fn ten_thousand_operations_over_a_hundred_keys_pass() {
    let spec = SynthSpec {
        seed: 18,
        clients: 8,
        ops: 10_000,
        config_keys: 90,
        topic_keys: 10,
        unknown_pct: 2,
        failed_pct: 1,
        ..SynthSpec::default()
    };
    let history = synth(&spec);
    let started = Instant::now();
    let report = check(&history, &CheckLimits::default());
    println!(
        "10,000 ops / 100 keys / 8 clients: {:?}, {} steps, {:?}",
        report.conclusion(),
        report.steps,
        started.elapsed()
    );
    assert_eq!(report.conclusion(), Conclusion::Pass, "{report}");
    assert_eq!(report.keys, 100);
    // About one step per operation: the search hardly ever backtracks on such a history.
    assert!(report.steps < 20 * 10_000, "{} steps", report.steps);
}

/// One key, 8 clients without pause, 200 operations, and at the end a read of a value
/// overwritten before it began: decided a violation within the default budget, and shrunk.
#[test]
fn a_late_stale_read_on_a_busy_key_is_found() {
    let spec = SynthSpec {
        seed: 18,
        clients: 8,
        ops: 200,
        config_keys: 1,
        topic_keys: 0,
        unknown_pct: 5,
        failed_pct: 1,
        latency_ns_max: 2_000,
        think_ns_max: 0,
    };
    let mut history = synth(&spec);
    let end = history
        .ops
        .iter()
        .filter_map(|o| o.record.complete_ns)
        .max()
        .expect("operations");
    // The first acknowledged set: some later write completed over it long before the end.
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
    let started = Instant::now();
    let report = check(&history, &CheckLimits::default());
    println!(
        "stale read after 200 ops on one key, 8 clients: {:?}, {} steps, shrunk to {}, {:?}",
        report.conclusion(),
        report.steps,
        report.violations.first().map_or(0, |v| v.shrunk.len()),
        started.elapsed()
    );
    assert_eq!(report.conclusion(), Conclusion::Violation, "{report}");
    assert_eq!(report.violations.len(), 1);
    assert!(report.violations[0].shrunk.iter().any(|o| o.line == 10_000));
}
