//! Runs the deterministic simulator over hundreds of seeds of mixed faults (drops, duplicates,
//! delays, partitions, crashes losing unsynced writes, restarts, voter changes, snapshots,
//! resignations, static quorums upgraded to dynamic ones) with 3 and 5 voters; any violated
//! check fails with the replay command.

use corum_raft::sim::chaos::{run_seeds, Summary};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn assert_clean(s: &Summary) {
    assert!(
        s.violations.is_empty(),
        "{} violation(s):\n{}",
        s.violations.len(),
        s.violations.join("\n")
    );
    assert!(
        s.committed_batches > s.seeds * 10,
        "the workload committed too little: {s:?}"
    );
    assert!(
        s.elections >= s.seeds,
        "every seed elects at least one leader: {s:?}"
    );
    // Hundreds of seeds always have a replica fall behind a compacted log; a handful (a
    // replay with CORUM_SIM_SEEDS) may not.
    assert!(
        s.seeds < 100 || s.snapshots_installed > 0,
        "no replica downloaded a snapshot: the follower's download went untested: {s:?}"
    );
    // One seed in three starts static and is upgraded (kraft.version 1) under faults.
    assert!(
        s.seeds < 100 || s.kraft_upgrades > s.seeds / 10,
        "too few static quorums were upgraded: {s:?}"
    );
}

/// 600 seeds with 3 voters pass every safety and liveness check.
#[test]
fn three_voters() {
    let s = run_seeds(
        env_u64("CORUM_SIM_START", 0),
        env_u64("CORUM_SIM_SEEDS", 600),
        3,
    );
    eprintln!(
        "3 voters: {s:?}",
        s = (
            s.seeds,
            s.elections,
            s.committed_batches,
            s.crashes,
            s.voter_changes,
            s.kraft_upgrades,
            s.snapshots,
            s.snapshots_installed
        )
    );
    assert_clean(&s);
}

/// 400 seeds with 5 voters pass every safety and liveness check.
#[test]
fn five_voters() {
    let s = run_seeds(
        env_u64("CORUM_SIM_START", 1_000_000),
        env_u64("CORUM_SIM_SEEDS", 400),
        5,
    );
    eprintln!(
        "5 voters: {s:?}",
        s = (
            s.seeds,
            s.elections,
            s.committed_batches,
            s.crashes,
            s.voter_changes,
            s.kraft_upgrades,
            s.snapshots,
            s.snapshots_installed
        )
    );
    assert_clean(&s);
}
