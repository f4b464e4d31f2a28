//! `corum sim`: the whole-node simulator and the Raft cluster simulator from the command line.

use std::process::{Command, Output};

fn corum_sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corum"))
        .arg("sim")
        .args(args)
        .output()
        .expect("corum runs")
}

/// `corum sim` with `args`, which must succeed; its standard output.
fn sim_passes(args: &[&str]) -> String {
    let o = corum_sim(args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// The whole-node simulator runs seeds under faults and prints what happened; the Raft one
/// runs with `--raft`; a bad flag is refused.
#[test]
fn sim_runs_both_simulators_and_reports() {
    let out = sim_passes(&["--seeds", "4", "--start", "10", "--nodes", "3"]);
    assert!(
        out.contains("seeds 4 (from 10, 3 nodes, 0 spares)"),
        "{out}"
    );
    assert!(out.contains("violations 0"), "{out}");

    // With voter changes: observers, an admin, wipes; the changes are counted.
    let out = sim_passes(&[
        "--seeds",
        "4",
        "--start",
        "10",
        "--spares",
        "2",
        "--voter-changes",
    ]);
    assert!(
        out.contains("(from 10, 3 nodes, 2 spares, voter changes)"),
        "{out}"
    );
    assert!(out.contains("violations 0"), "{out}");
    let acked: u64 = out
        .split("answered Ok ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no Ok count: {out}"));
    assert!(acked > 0, "{out}");

    // A static quorum that the admin upgrades, then changes; the upgrades are counted.
    let out = sim_passes(&[
        "--seeds",
        "4",
        "--start",
        "10",
        "--spares",
        "2",
        "--voter-changes",
        "--static",
    ]);
    assert!(
        out.contains("(from 10, 3 nodes, 2 spares, static, voter changes)"),
        "{out}"
    );
    assert!(out.contains("seeds upgraded 4 ("), "{out}");
    assert!(out.contains("violations 0"), "{out}");
    // Spares of a static quorum that nobody upgrades would never learn the voters.
    let o = corum_sim(&["--seeds", "1", "--spares", "1", "--static"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("spares of a static quorum"), "{err}");

    let o = corum_sim(&["--raft", "--seeds", "2", "--voters", "3"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("3 voters"), "{out}");

    let o = corum_sim(&["--nodes", "7"]);
    assert!(!o.status.success());
    let o = corum_sim(&["--spares", "5"]);
    assert!(!o.status.success());
}
