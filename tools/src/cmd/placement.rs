//! `corum placement`: resolve the core-pinning flags the way `corum run` will, print the shard
//! layout, and with `--start` actually start one executor per shard and report the CPU each one
//! runs on — a dry run of the placement on this host before a node is deployed with it.

use anyhow::Context;
use corum_runtime::{PlacementArgs, Runtime, RuntimeConfig, ShardRole};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// Start the shards (io_uring executors, pinned unless --no-pin) and report where each runs.
    #[arg(long)]
    pub start: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let placement = args
        .placement
        .resolve()
        .context("resolving the placement flags")?;
    println!("{:<6} {:<6} role", "shard", "core");
    for s in placement.shards() {
        let core = s.core.map_or_else(|| "any".to_string(), |c| c.to_string());
        println!("{:<6} {:<6} {}", s.id.to_string(), core, role_name(s.role));
    }
    if !args.start {
        return Ok(());
    }
    let runtime = Runtime::new(placement, RuntimeConfig::default())?;
    let outcomes = runtime
        .run(|_spec| {
            |ctx: corum_runtime::ShardContext| async move {
                // SAFETY: sched_getcpu has no preconditions; it returns -1 on error.
                let cpu = unsafe { libc::sched_getcpu() };
                (ctx.id(), cpu)
            }
        })
        .context("starting the shards")?;
    for outcome in outcomes {
        let (shard, cpu) = outcome.result?;
        println!("{shard} started and ran on cpu {cpu}");
    }
    Ok(())
}

fn role_name(role: ShardRole) -> &'static str {
    match role {
        ShardRole::Controller => "controller (controller state machine only)",
        ShardRole::Worker => "worker (raft, log, network)",
        ShardRole::Combined => "combined (one core: controller and worker share it)",
    }
}
