//! `corum sim`: runs seeds of the deterministic Raft cluster simulator and prints a summary.
//! Exit status is non-zero if any seed violates a check; each violation names the command that
//! replays it.

use std::time::Instant;

use anyhow::bail;
use corum_raft::sim::chaos::{run_seed, ChaosSpec, Summary};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Number of seeds to run.
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub start: u64,
    /// Voters in the initial voter set (3 or 5).
    #[arg(long, default_value_t = 3, value_parser = parse_voters)]
    pub voters: usize,
    /// Simulated milliseconds of faults per seed before the heal phase.
    #[arg(long, default_value_t = 6_000)]
    pub chaos_ms: u64,
}

fn parse_voters(s: &str) -> Result<usize, String> {
    match s {
        "3" => Ok(3),
        "5" => Ok(5),
        _ => Err(format!("{s:?}: the simulator runs 3 or 5 voters")),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut summary = Summary::default();
    let spec = ChaosSpec {
        chaos_ms: args.chaos_ms,
        ..ChaosSpec::new(args.voters)
    };
    for seed in args.start..args.start.saturating_add(args.seeds) {
        let report = run_seed(seed, spec);
        if let Some(v) = &report.violation {
            eprintln!("VIOLATION {v}");
        }
        summary.add(&report);
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "seeds {} (from {}, {} voters): elections {}, committed batches {}, messages {}, crashes {}, voter changes {}, snapshots {}, log reads {}, violations {} in {:.1} s ({:.0} seeds/s)",
        summary.seeds,
        args.start,
        args.voters,
        summary.elections,
        summary.committed_batches,
        summary.messages,
        summary.crashes,
        summary.voter_changes,
        summary.snapshots,
        summary.reads,
        summary.violations.len(),
        secs,
        summary.seeds as f64 / secs.max(1e-9)
    );
    if !summary.violations.is_empty() {
        bail!("{} seed(s) violated a check", summary.violations.len());
    }
    Ok(())
}
