//! `corum sim`: runs seeds of a deterministic simulator and prints a summary. By default the
//! whole-node simulator ([`corum_node::sim`]: the driver's and the service's policy, the
//! controller, the log engine and the node files on simulated disks, under crashes, torn
//! writes, disk errors and network faults; with `--static`, a static quorum that the admin of
//! `--voter-changes` upgrades to a dynamic one); with `--raft`, the Raft cluster simulator
//! ([`corum_raft::sim`]: Raft cores alone, with voter changes). Exit status is non-zero if any
//! seed violates a check; each violation names the command that replays it.

use std::time::Instant;

use anyhow::bail;
use corum_node::sim::{run_seed, Faults, SimSpec, Summary};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Number of seeds to run.
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub start: u64,
    /// Run the Raft cluster simulator (Raft cores only, with voter changes) instead of the
    /// whole-node one.
    #[arg(long)]
    pub raft: bool,
    /// Nodes of the whole-node simulator's bootstrap voter set, 1 to 5.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=5))]
    pub nodes: u8,
    /// Whole-node simulator: nodes that start as observers, 0 to 4 (the admin of
    /// `--voter-changes` adds them).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=4))]
    pub spares: u8,
    /// Whole-node simulator: an admin removes and adds voters during the fault phase, and
    /// disks are wiped (a new directory id).
    #[arg(long)]
    pub voter_changes: bool,
    /// Whole-node simulator: a static quorum (kraft.version 0, `controller.quorum.voters`
    /// without directory ids); spares are formatted to join, and the admin of
    /// `--voter-changes` upgrades the quorum to kraft.version 1 before changing it. Without
    /// `--voter-changes` the quorum stays static and takes no spares.
    #[arg(long = "static")]
    pub static_quorum: bool,
    /// Whole-node simulator: simulated milliseconds of faults per seed before the heal.
    #[arg(long, default_value_t = 3_000)]
    pub fault_ms: u64,
    /// Whole-node simulator: Raft messages dropped, in percent.
    #[arg(long, default_value_t = Faults::all().drop_pct, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub drop_pct: u32,
    /// Whole-node simulator: Raft messages duplicated, in percent.
    #[arg(long, default_value_t = Faults::all().duplicate_pct, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub duplicate_pct: u32,
    /// Whole-node simulator: a message takes 1 ms to this long (reordering follows).
    #[arg(long, default_value_t = Faults::all().delay_ms_max, value_parser = clap::value_parser!(u64).range(1..))]
    pub delay_ms_max: u64,
    /// Whole-node simulator: a message between a node's driver and its controller service
    /// takes 0 ms to this long (in order).
    #[arg(long, default_value_t = Faults::all().port_delay_ms_max)]
    pub port_delay_ms_max: u64,
    /// Whole-node simulator: no power loss.
    #[arg(long)]
    pub no_crashes: bool,
    /// Whole-node simulator: a power loss keeps nothing unsynced (no torn writes).
    #[arg(long)]
    pub no_torn_writes: bool,
    /// Whole-node simulator: no failing writes or fsyncs.
    #[arg(long)]
    pub no_disk_errors: bool,
    /// Whole-node simulator: no partitions.
    #[arg(long)]
    pub no_partitions: bool,
    /// Whole-node simulator: no stalled controller shards.
    #[arg(long)]
    pub no_stalls: bool,
    /// Whole-node simulator: no disk wipes (with `--voter-changes`).
    #[arg(long)]
    pub no_wipes: bool,
    /// Raft simulator: voters in the initial voter set (3 or 5).
    #[arg(long, default_value_t = 3, value_parser = parse_voters)]
    pub voters: usize,
    /// Raft simulator: simulated milliseconds of faults per seed before the heal phase.
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
    if args.raft {
        return run_raft(&args);
    }
    if args.static_quorum && args.spares > 0 && !args.voter_changes {
        bail!(
            "--spares with --static needs --voter-changes: spares of a static quorum learn the \
             voters only from the upgrade, which the admin of voter changes asks for"
        );
    }
    let started = Instant::now();
    let template = SimSpec {
        seed: args.start,
        nodes: usize::from(args.nodes),
        spares: usize::from(args.spares),
        voter_changes: args.voter_changes,
        static_quorum: args.static_quorum,
        fault_ms: args.fault_ms,
        faults: Faults {
            crashes: !args.no_crashes,
            torn_writes: !args.no_torn_writes,
            disk_errors: !args.no_disk_errors,
            partitions: !args.no_partitions,
            stalls: !args.no_stalls,
            wipes: !args.no_wipes,
            drop_pct: args.drop_pct,
            duplicate_pct: args.duplicate_pct,
            delay_ms_max: args.delay_ms_max,
            port_delay_ms_max: args.port_delay_ms_max,
        },
        mutation: None,
    };
    let mut summary = Summary::default();
    for seed in args.start..args.start.saturating_add(args.seeds) {
        let report = run_seed(SimSpec { seed, ..template });
        if let Some(v) = &report.violation {
            eprintln!(
                "VIOLATION seed {seed}: {v}\n  replay: {}",
                report.spec.replay_command()
            );
        }
        summary.add(report);
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "seeds {} (from {}, {} nodes, {} spares{}): writes {}, acknowledged {}, crashes {}, \
         disk faults {}, partitions {}, stalls {}, wipes {}, snapshots written {}, installed {}, \
         truncations {}, proposals refused {}, voter changes asked {}, answered Ok {}, \
         committed voter records {}, upgrades asked {}, answered Ok {}, seeds upgraded {} \
         ({} before the heal), elections checked {}, simulated {:.1} s, violations {} in \
         {:.1} s ({:.1} seeds/s)",
        summary.seeds,
        args.start,
        args.nodes,
        args.spares,
        match (args.static_quorum, args.voter_changes) {
            (false, false) => "",
            (false, true) => ", voter changes",
            (true, false) => ", static",
            (true, true) => ", static, voter changes",
        },
        summary.writes,
        summary.acked,
        summary.crashes,
        summary.disk_faults,
        summary.partitions,
        summary.stalls,
        summary.wipes,
        summary.snapshots_written,
        summary.installs,
        summary.truncations,
        summary.proposals_refused,
        summary.voter_changes_asked,
        summary.voter_changes_acked,
        summary.voter_records,
        summary.upgrades_asked,
        summary.upgrades_acked,
        summary.upgraded,
        summary.upgraded_in_faults,
        summary.elections_checked,
        summary.sim_ms as f64 / 1000.0,
        summary.failed.len(),
        secs,
        summary.seeds as f64 / secs.max(1e-9)
    );
    if !summary.failed.is_empty() {
        bail!("{} seed(s) violated a check", summary.failed.len());
    }
    Ok(())
}

/// The Raft cluster simulator.
fn run_raft(args: &Args) -> anyhow::Result<()> {
    use corum_raft::sim::chaos::{run_seed, ChaosSpec, Summary};
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
