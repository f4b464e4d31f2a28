//! Hand-written histories with known answers: the register examples of Porcupine's
//! documentation and of Herlihy & Wing, stale reads, operations of unknown outcome that must
//! or must not be assumed applied, topic lifecycles, and the report a person reads.

use corum_check::{
    check, CheckLimits, Conclusion, History, Op, OpRecord, Outcome, Record, Report, Resource,
    ResourceType,
};

fn broker() -> Resource {
    Resource {
        resource_type: ResourceType::Broker,
        name: "1".into(),
    }
}

/// An operation on config `k` of broker 1 or on topic `t`; `complete: None` only for unknown
/// outcomes.
fn rec(client: u64, invoke_ns: u64, complete_ns: Option<u64>, op: Op, outcome: Outcome) -> Record {
    Record::Op(OpRecord {
        client,
        invoke_ns,
        complete_ns,
        op,
        outcome,
    })
}

fn set(client: u64, invoke: u64, complete: u64, value: &str) -> Record {
    let op = Op::ConfigSet {
        resource: broker(),
        key: "k".into(),
        value: value.into(),
    };
    rec(client, invoke, Some(complete), op, Outcome::Ok)
}

fn set_unknown(client: u64, invoke: u64, value: &str) -> Record {
    let op = Op::ConfigSet {
        resource: broker(),
        key: "k".into(),
        value: value.into(),
    };
    rec(client, invoke, None, op, Outcome::Unknown)
}

fn read(client: u64, invoke: u64, complete: u64, seen: Option<&str>) -> Record {
    let op = Op::ConfigRead {
        resource: broker(),
        key: "k".into(),
    };
    let outcome = seen.map_or(Outcome::Absent, |v| Outcome::Value(v.into()));
    rec(client, invoke, Some(complete), op, outcome)
}

fn topic(
    client: u64,
    invoke: u64,
    complete: Option<u64>,
    op: fn(String) -> Op,
    outcome: Outcome,
) -> Record {
    rec(client, invoke, complete, op("t".into()), outcome)
}

fn create(topic: String) -> Op {
    Op::TopicCreate { topic }
}

fn delete(topic: String) -> Op {
    Op::TopicDelete { topic }
}

fn describe(topic: String) -> Op {
    Op::TopicDescribe { topic }
}

fn run(records: Vec<Record>) -> Report {
    let history = History::from_records(records).expect("valid records");
    check(&history, &CheckLimits::steps(1_000_000))
}

fn linearizable(records: Vec<Record>) -> bool {
    let report = run(records);
    assert!(
        report.undecided.is_empty(),
        "decided within budget:\n{report}"
    );
    report.violations.is_empty()
}

/// Porcupine's README, first history: a put of 100 overlaps a get that sees 100 and a get
/// that sees the initial value; putting the put between them works.
#[test]
fn porcupine_concurrent_gets_either_side_of_a_put() {
    assert!(linearizable(vec![
        set(0, 0, 50, "100"),
        read(1, 10, 40, Some("100")),
        read(2, 20, 30, None),
    ]));
}

/// Porcupine's README, second history: a get saw 200 and returned before another get began
/// that saw the initial value: no order has both.
#[test]
fn porcupine_a_get_sees_the_old_value_after_another_saw_the_new() {
    assert!(!linearizable(vec![
        set(0, 0, 50, "200"),
        read(1, 10, 20, Some("200")),
        read(2, 30, 40, None),
    ]));
}

/// Herlihy & Wing's register: a read after a write completed must not see the value before
/// it (a stale read), and the report's smallest history is the two writes and the read.
#[test]
fn a_stale_read_after_a_completed_write_is_a_violation() {
    let report = run(vec![
        set(0, 0, 10, "1"),
        set(1, 20, 30, "2"),
        read(2, 40, 50, Some("1")),
        read(3, 60, 70, Some("2")),
    ]);
    assert_eq!(report.conclusion(), Conclusion::Violation);
    assert_eq!(report.violations.len(), 1);
    let shrunk: Vec<usize> = report.violations[0].shrunk.iter().map(|o| o.line).collect();
    assert_eq!(shrunk, vec![1, 2, 3]);
    assert!(report.violations[0].minimal);
}

/// A read concurrent with a write may see it or not: both histories are linearizable.
#[test]
fn a_read_concurrent_with_a_write_may_see_either() {
    assert!(linearizable(vec![set(0, 0, 10, "1"), read(1, 5, 15, None)]));
    assert!(linearizable(vec![
        set(0, 0, 10, "1"),
        read(1, 5, 15, Some("1"))
    ]));
    // Touching at one instant counts as concurrent.
    assert!(linearizable(vec![
        set(0, 0, 10, "1"),
        read(1, 10, 15, None)
    ]));
    assert!(!linearizable(vec![
        set(0, 0, 10, "1"),
        read(1, 11, 15, None)
    ]));
}

/// Two reads concurrent with a write and with each other see new then old: fine unless the
/// one that saw the new value finished before the other began.
#[test]
fn reads_may_not_go_back_once_ordered() {
    assert!(linearizable(vec![
        set(0, 0, 100, "1"),
        read(1, 10, 30, Some("1")),
        read(2, 20, 40, None),
    ]));
    assert!(!linearizable(vec![
        set(0, 0, 100, "1"),
        read(1, 10, 30, Some("1")),
        read(2, 31, 40, None),
    ]));
}

/// A write of unknown outcome that a read saw must be assumed applied (before the read).
#[test]
fn an_unknown_write_that_was_seen_took_effect() {
    assert!(linearizable(vec![
        set_unknown(0, 0, "1"),
        read(1, 10, 20, Some("1"))
    ]));
}

/// A write of unknown outcome that nobody saw may never have taken effect.
#[test]
fn an_unknown_write_that_was_not_seen_may_never_apply() {
    assert!(linearizable(vec![
        set_unknown(0, 0, "1"),
        read(1, 10, 20, None),
        read(1, 30, 40, None),
    ]));
}

/// A write of unknown outcome may take effect after its client gave up, even after later
/// acknowledged writes.
#[test]
fn an_unknown_write_may_land_after_the_client_gave_up() {
    let mut late = set_unknown(0, 0, "1");
    if let Record::Op(op) = &mut late {
        op.complete_ns = Some(5);
    }
    assert!(linearizable(vec![
        late,
        set(1, 10, 20, "2"),
        read(2, 30, 40, Some("1")),
    ]));
}

/// A write of unknown outcome cannot take effect before it was invoked.
#[test]
fn an_unknown_write_cannot_apply_before_its_invocation() {
    assert!(!linearizable(vec![
        read(1, 0, 10, Some("1")),
        set_unknown(0, 20, "1")
    ]));
}

/// A write of unknown outcome, once seen, cannot be taken back: a later read of the value
/// before it is a violation.
#[test]
fn an_unknown_write_once_seen_stays() {
    assert!(!linearizable(vec![
        set_unknown(0, 0, "1"),
        read(1, 10, 20, Some("1")),
        read(2, 30, 40, None),
    ]));
}

/// A write of unknown outcome takes effect once: after a later acknowledged write was seen,
/// its value cannot come back by itself.
#[test]
fn an_unknown_write_applies_at_most_once() {
    assert!(!linearizable(vec![
        set_unknown(0, 0, "1"),
        read(1, 10, 20, Some("1")),
        set(2, 30, 40, "2"),
        read(3, 50, 60, Some("2")),
        read(3, 70, 80, Some("1")),
    ]));
}

/// A failed write had no effect: a read of its value is a violation (a value nobody wrote),
/// and the smallest history is that read alone.
#[test]
fn a_failed_write_had_no_effect() {
    let failed = rec(
        0,
        0,
        Some(10),
        Op::ConfigSet {
            resource: broker(),
            key: "k".into(),
            value: "9".into(),
        },
        Outcome::Failed("INVALID_CONFIG".into()),
    );
    let report = run(vec![failed, read(1, 20, 30, Some("9"))]);
    assert_eq!(report.violations.len(), 1);
    let shrunk: Vec<usize> = report.violations[0].shrunk.iter().map(|o| o.line).collect();
    assert_eq!(shrunk, vec![2]);
}

/// Deletes are writes of "absent".
#[test]
fn a_delete_is_seen_as_absent() {
    let del = |invoke, complete| {
        rec(
            0,
            invoke,
            Some(complete),
            Op::ConfigDelete {
                resource: broker(),
                key: "k".into(),
            },
            Outcome::Ok,
        )
    };
    assert!(linearizable(vec![
        set(0, 0, 10, "1"),
        del(20, 30),
        read(1, 40, 50, None)
    ]));
    assert!(!linearizable(vec![
        set(0, 0, 10, "1"),
        del(20, 30),
        read(1, 40, 50, Some("1"))
    ]));
}

/// A created topic cannot be absent to a describe after the creation completed; the report
/// also calls it a lost write.
#[test]
fn a_created_topic_does_not_vanish() {
    let report = run(vec![
        topic(0, 0, Some(10), create, Outcome::Created(Some("A".into()))),
        topic(1, 20, Some(30), describe, Outcome::Absent),
    ]);
    assert_eq!(report.violations.len(), 1);
    assert_eq!(report.lost_writes.len(), 1);
    assert_eq!(report.lost_writes[0].write.line, 1);
}

/// Two creates that both succeed need a delete between them.
#[test]
fn a_topic_is_created_once_until_deleted() {
    assert!(!linearizable(vec![
        topic(0, 0, Some(10), create, Outcome::Created(None)),
        topic(1, 20, Some(30), create, Outcome::Created(None)),
    ]));
    assert!(linearizable(vec![
        topic(0, 0, Some(10), create, Outcome::Created(None)),
        topic(2, 12, Some(18), delete, Outcome::Ok),
        topic(1, 20, Some(30), create, Outcome::Created(None)),
    ]));
    // "Already exists" needs a creation before it; "unknown topic" a state without one.
    assert!(!linearizable(vec![topic(
        0,
        0,
        Some(10),
        create,
        Outcome::AlreadyExists
    )]));
    assert!(linearizable(vec![
        topic(0, 0, Some(10), create, Outcome::Created(None)),
        topic(1, 5, Some(15), delete, Outcome::UnknownTopic),
    ]));
    assert!(!linearizable(vec![
        topic(0, 0, Some(10), create, Outcome::Created(None)),
        topic(1, 11, Some(15), delete, Outcome::UnknownTopic),
    ]));
}

/// A topic recreated has the new creation's id; describing the old id afterwards is a
/// violation, even with a creation of unknown outcome around (it cannot have made an id that
/// another creation's answer named).
#[test]
fn a_recreated_topic_has_the_new_id() {
    let lifecycle = || {
        vec![
            topic(0, 0, Some(10), create, Outcome::Created(Some("A".into()))),
            topic(0, 20, Some(30), delete, Outcome::Ok),
            topic(0, 40, None, create, Outcome::Unknown),
        ]
    };
    let mut old = lifecycle();
    old.push(topic(
        1,
        50,
        Some(60),
        describe,
        Outcome::Exists("A".into()),
    ));
    assert!(!linearizable(old));
    let mut new = lifecycle();
    new.push(topic(
        1,
        50,
        Some(60),
        describe,
        Outcome::Exists("B".into()),
    ));
    assert!(linearizable(new.clone()));
    // And once seen as B it stays B until deleted.
    new.push(topic(
        1,
        70,
        Some(80),
        describe,
        Outcome::Exists("C".into()),
    ));
    assert!(!linearizable(new));
}

/// Keys are checked apart: each key's history is linearizable, so the whole is.
#[test]
fn keys_are_checked_apart() {
    let other = |r: Record| match r {
        Record::Op(mut op) => {
            if let Op::ConfigSet { key, .. } | Op::ConfigRead { key, .. } = &mut op.op {
                *key = "other".into();
            }
            Record::Op(op)
        }
        r => r,
    };
    let report = run(vec![
        set(0, 0, 10, "1"),
        other(set(0, 20, 30, "2")),
        read(1, 40, 50, Some("1")),
        other(read(1, 60, 70, Some("2"))),
    ]);
    assert_eq!(report.keys, 2);
    assert_eq!(report.conclusion(), Conclusion::Pass);
}

/// The report names the key, shows the smallest history with times relative to its first
/// invocation, and ends with the verdict; a tiny budget makes a key undecided.
#[test]
fn the_report_reads_well() {
    let mut records = vec![Record::Run(corum_check::RunInfo {
        seed: Some(7),
        replay: Some("corum chaos --seed 7".into()),
    })];
    records.extend([
        set(3, 1_000_000_000, 1_001_204_000, "5"),
        set(5, 1_002_100_000, 1_002_900_000, "6"),
        read(1, 1_003_000_000, 1_003_500_000, Some("5")),
    ]);
    let report = run(records.clone());
    let text = report.to_string();
    assert!(
        text.contains("run: seed 7; replay: corum chaos --seed 7"),
        "{text}"
    );
    assert!(
        text.contains("NOT LINEARIZABLE: config k of broker:1"),
        "{text}"
    );
    assert!(
        text.contains("3 of its 3 operations (nothing more can be dropped)"),
        "{text}"
    );
    let violation = &text[..text.find("LOST WRITE").expect("the write of 6 is lost too")];
    let rows: Vec<&str> = violation
        .lines()
        .filter(|l| l.contains("set k") || l.contains("read k"))
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert!(
        rows[0].contains("+0.000") && rows[0].contains("+1.204"),
        "{text}"
    );
    assert!(
        rows[2].contains("+3.000") && rows[2].contains("+3.500") && rows[2].contains("\"5\""),
        "{text}"
    );
    assert!(text.ends_with("verdict: VIOLATION\n"), "{text}");

    let history = History::from_records(records[..3].to_vec()).expect("valid");
    let undecided = check(&history, &CheckLimits::steps(1));
    assert_eq!(undecided.conclusion(), Conclusion::Undecided);
    assert!(undecided.to_string().contains(
        "UNDECIDED: config k of broker:1 (2 operations): the step budget ran out after 1 steps"
    ));
}

/// A describe that names the id of a creation of unknown outcome pins that incarnation's id,
/// so it may not be linearized greedily as a read: here the describe of "X" must wait for the
/// second creation, after the describe of "Y" pinned the first and the delete removed it.
#[test]
fn a_describe_that_pins_an_id_is_not_taken_greedily() {
    let records = vec![
        topic(0, 0, None, create, Outcome::Unknown),
        topic(1, 10, Some(100), describe, Outcome::Exists("X".into())),
        topic(2, 10, Some(20), describe, Outcome::Exists("Y".into())),
        topic(3, 30, Some(40), delete, Outcome::Ok),
        topic(4, 50, None, create, Outcome::Unknown),
    ];
    assert!(linearizable(records));
}
