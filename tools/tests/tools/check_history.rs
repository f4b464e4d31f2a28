//! `corum check-history` through the binary: a linearizable history exits 0, a stale read
//! exits 1 with the shrunk sub-history in the report, and a malformed line exits 2 naming it.

use std::path::Path;
use std::process::{Command, Output};

use corum_check::{Op, OpRecord, Outcome, Record, Resource, ResourceType};

fn corum_check_history(file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corum"))
        .args(["check-history"])
        .arg(file)
        .output()
        .expect("corum runs")
}

fn resource() -> Resource {
    Resource {
        resource_type: ResourceType::Broker,
        name: "1".into(),
    }
}

fn write(client: u64, invoke_ns: u64, complete_ns: u64, value: &str) -> Record {
    Record::Op(OpRecord {
        client,
        invoke_ns,
        complete_ns: Some(complete_ns),
        op: Op::ConfigSet {
            resource: resource(),
            key: "log.retention.ms".into(),
            value: value.into(),
        },
        outcome: Outcome::Ok,
    })
}

fn read(client: u64, invoke_ns: u64, complete_ns: u64, seen: &str) -> Record {
    Record::Op(OpRecord {
        client,
        invoke_ns,
        complete_ns: Some(complete_ns),
        op: Op::ConfigRead {
            resource: resource(),
            key: "log.retention.ms".into(),
        },
        outcome: Outcome::Value(seen.into()),
    })
}

fn lines(records: &[Record]) -> String {
    records.iter().map(|r| r.to_json_line() + "\n").collect()
}

#[test]
fn check_history_exits_by_its_verdict() {
    let dir = tempfile::tempdir().unwrap();
    // Client 2 reads "1" although "2" was written after "1" completed and before the read
    // began: stale. A read overlapping the second write may see either.
    let ok = dir.path().join("ok.jsonl");
    std::fs::write(
        &ok,
        lines(&[
            write(1, 0, 10, "1"),
            write(1, 20, 40, "2"),
            read(2, 25, 35, "1"),
            read(2, 50, 60, "2"),
        ]),
    )
    .unwrap();
    let out = corum_check_history(&ok);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    let stale = dir.path().join("stale.jsonl");
    std::fs::write(
        &stale,
        lines(&[
            write(1, 0, 10, "1"),
            write(1, 20, 30, "2"),
            read(3, 32, 33, "2"),
            read(2, 40, 50, "1"),
        ]),
    )
    .unwrap();
    let out = corum_check_history(&stale);
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.contains("log.retention.ms"), "{report}");

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        format!("{}{{not json\n", lines(&[write(1, 0, 10, "1")])),
    )
    .unwrap();
    let out = corum_check_history(&bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 2"), "{err}");
}
