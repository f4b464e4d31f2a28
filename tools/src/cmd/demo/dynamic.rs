//! `corum demo --dynamic`: KIP-853 end to end on a local quorum, under a verified configs
//! load that runs throughout.
//!
//! | step | what |
//! |------|------|
//! | 1 | node 1 formatted `--standalone`, nodes 2-5 `--no-initial-controllers`, all with `controller.quorum.auto.join.enable=true`; node 1 started and leading |
//! | 2 | nodes 2 and 3 started: they find the leader through `controller.quorum.bootstrap.servers`, catch up and join (3 voters) |
//! | 3 | nodes 4 and 5 started: 5 voters |
//! | 4 | node 5's disk replaced (killed, formatted again under a new directory id, started): it removes its old replica and joins again |
//! | 5 | nodes 4 and 5 stopped and removed (`remove-controller`): 3 voters |
//!
//! The summary gives the voter set after each step and how long the step took, the total,
//! and the load's figures (no acknowledged write may be lost).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use corum_client::DescribeQuorumResponse;
use corum_node::RequestBody;
use corum_raft::message::RemoveVoterRequest;
use corum_raft::ReplicaKey;
use corum_types::NodeId;

use super::cluster::{ClusterSpec, LocalCluster};
use super::{describe, stop_cleanly, Args};
use crate::cmd::loadgen::stats::format_us;
use crate::cmd::loadgen::{run_workload, LoadConfig, Report, Workload};
use crate::cmd::quorum::change_voters;

/// Nodes of the scenario.
const NODES: u32 = 5;
/// Shortest load: it should outlast every step (about 8 s on an idle 2-core host).
const LOAD_SECS_MIN: f64 = 20.0;
/// Longest wait for one step's voter set.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// One step of the scenario, as the summary shows it.
pub struct Step {
    pub what: String,
    /// The leader's voters after it: (id, directory id).
    pub voters: Vec<(u32, String)>,
    pub took: Duration,
}

/// The leader's voters, sorted by id.
fn voters_of(d: &DescribeQuorumResponse) -> Vec<(u32, String)> {
    let mut v: Vec<(u32, String)> = d
        .voters
        .iter()
        .map(|r| {
            (
                r.replica_id.0,
                r.directory_id.map_or_else(String::new, |u| u.to_string()),
            )
        })
        .collect();
    v.sort();
    v
}

/// Waits until the leader's voters satisfy `done`; returns them.
fn wait_for(
    bootstrap: &[SocketAddr],
    what: &str,
    done: impl Fn(&[(u32, String)]) -> bool,
) -> anyhow::Result<Vec<(u32, String)>> {
    let start = Instant::now();
    loop {
        if let Ok(d) = describe(bootstrap, Duration::from_secs(5)) {
            let v = voters_of(&d);
            if done(&v) {
                return Ok(v);
            }
            anyhow::ensure!(
                start.elapsed() < STEP_TIMEOUT,
                "{what}: the voters are still {:?} after {STEP_TIMEOUT:?}",
                v.iter().map(|(id, _)| id).collect::<Vec<_>>()
            );
        }
        anyhow::ensure!(start.elapsed() < STEP_TIMEOUT, "{what}: no leader answered");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ids(v: &[(u32, String)]) -> Vec<u32> {
    v.iter().map(|(id, _)| *id).collect()
}

pub fn demo(args: &Args, exe: &Path, dir: &Path) -> anyhow::Result<()> {
    eprintln!(
        "corum demo --dynamic: formatting {NODES} controllers in {} (node 1 --standalone, the others --no-initial-controllers)",
        dir.display()
    );
    let mut spec = ClusterSpec::new(exe, dir);
    spec.voters = NODES;
    spec.dynamic = true;
    spec.joining = NODES - 1;
    spec.settings.extend([
        (
            "metadata.log.segment.bytes".into(),
            (64u64 << 20).to_string(),
        ),
        ("controller.quorum.auto.join.enable".into(), "true".into()),
    ]);
    let online = corum_runtime::placement::online_cores().unwrap_or_default();
    if online.len() < 2 * NODES as usize {
        let core = online.first().map_or(0, |c| c.0);
        spec.settings.push(("corum.cores".into(), core.to_string()));
    }
    let mut cluster = LocalCluster::create(spec)?;
    let bootstrap: Vec<SocketAddr> = cluster.nodes.iter().map(|n| n.client).collect();
    let scenario = Instant::now();
    let mut steps = Vec::new();
    let mut step = |what: &str, voters: Vec<(u32, String)>, since: Instant| {
        eprintln!(
            "corum demo --dynamic: {what}: voters {:?} ({:.1} s)",
            ids(&voters),
            since.elapsed().as_secs_f64()
        );
        steps.push(Step {
            what: what.to_owned(),
            voters,
            took: since.elapsed(),
        });
    };

    let t = Instant::now();
    cluster.start(1)?;
    let v = wait_for(&bootstrap, "node 1 leads", |v| ids(v) == [1])?;
    step("node 1 started (--standalone)", v, t);

    let load_secs = args.duration_secs.max(LOAD_SECS_MIN);
    let config = LoadConfig {
        bootstrap: bootstrap.clone(),
        workload: Workload::Configs,
        clients: args.clients,
        connections: 1,
        duration: Duration::from_secs_f64(load_secs),
        protocol: crate::cmd::loadgen::Protocol::Private,
        kafka_bootstrap: Vec::new(),
        verify: true,
        partitions: 1,
        brokers: 1,
        heartbeat_interval: Duration::from_millis(args.heartbeat_interval_ms),
        broker_id_base: 1_000,
        broker_listeners: Vec::new(),
        log_dir: None,
        metrics: Vec::new(),
        raw_fsync: Duration::ZERO,
        raw_quorum_writers: 0,
        rtt_probes: 0,
        request_timeout: Duration::from_secs(8),
        grace: Duration::from_secs(15),
        progress: false,
        history: None,
        tls: None,
    };
    eprintln!(
        "corum demo --dynamic: verified configs load, {} clients, {load_secs:.0} s",
        args.clients
    );
    let load = std::thread::Builder::new()
        .name("corum-demo-load".into())
        .spawn(move || run_workload(config))
        .context("starting the load thread")?;

    let t = Instant::now();
    cluster.start(2)?;
    cluster.start(3)?;
    let v = wait_for(&bootstrap, "nodes 2 and 3 join", |v| ids(v) == [1, 2, 3])?;
    step("nodes 2, 3 started: auto-join", v, t);

    let t = Instant::now();
    cluster.start(4)?;
    cluster.start(5)?;
    let v = wait_for(&bootstrap, "nodes 4 and 5 join", |v| {
        ids(v) == [1, 2, 3, 4, 5]
    })?;
    step("nodes 4, 5 started: auto-join", v.clone(), t);

    let t = Instant::now();
    let old = v.iter().find(|(id, _)| *id == 5).map(|(_, d)| d.clone());
    cluster.kill(5);
    cluster.replace_disk(5)?;
    cluster.start(5)?;
    let v = wait_for(&bootstrap, "node 5 rejoins with its new disk", |v| {
        v.len() == 5 && v.iter().any(|(id, d)| *id == 5 && Some(d) != old.as_ref())
    })?;
    step("node 5's disk replaced: rejoined", v.clone(), t);

    let t = Instant::now();
    for id in [4, 5] {
        // Stopped first: with auto-join on, a running controller would join again.
        cluster.terminate(id, Duration::from_secs(15))?;
        let directory_id = v
            .iter()
            .find(|(n, _)| *n == id)
            .and_then(|(_, d)| d.parse().ok())
            .with_context(|| format!("node {id}'s directory id"))?;
        let key = ReplicaKey {
            id: NodeId(id),
            directory_id,
        };
        change_voters(&bootstrap, None, 30_000, |request_id| {
            RequestBody::RemoveVoter(RemoveVoterRequest {
                request_id,
                voter: key,
            })
        })
        .with_context(|| format!("removing node {id}"))?;
    }
    let v = wait_for(&bootstrap, "shrink to 3", |v| ids(v) == [1, 2, 3])?;
    step("nodes 4, 5 stopped and removed", v, t);
    let total = scenario.elapsed();
    if total.as_secs_f64() > load_secs {
        eprintln!(
            "corum demo --dynamic: the steps took {:.1} s, longer than the load's {load_secs:.0} s: give --duration-secs more",
            total.as_secs_f64()
        );
    }

    let report = load
        .join()
        .map_err(|_| anyhow::anyhow!("the load thread panicked"))??;
    let d = describe(&bootstrap, Duration::from_secs(10))?;
    print!(
        "{}",
        render_dynamic_summary(&cluster.cluster_id, &steps, total, &report, &d)
    );
    stop_cleanly(
        &mut cluster,
        report.lost.unwrap_or(0),
        "corum demo --dynamic",
    )
}

/// The summary: one row per step (voters with their directory ids, time taken), the total,
/// and the load's figures.
pub fn render_dynamic_summary(
    cluster_id: &str,
    steps: &[Step],
    total: Duration,
    load: &Report,
    last: &DescribeQuorumResponse,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "\ncorum demo --dynamic summary (cluster {cluster_id})");
    let _ = writeln!(
        w,
        "  {:<34} {:>7}  voters (id:directory id)",
        "step", "took"
    );
    for s in steps {
        let voters: Vec<String> = s.voters.iter().map(|(id, d)| format!("{id}:{d}")).collect();
        let _ = writeln!(
            w,
            "  {:<34} {:>6.1}s  {}",
            s.what,
            s.took.as_secs_f64(),
            voters.join(" ")
        );
    }
    let _ = writeln!(
        w,
        "  grew 1 -> 5 voters, replaced a disk and shrank to 3 in {:.1} s; leader node {} at epoch {}",
        total.as_secs_f64(),
        last.node_id,
        last.leader_epoch.0
    );
    let _ = writeln!(
        w,
        "  load: configs, {} clients, {:.0} ops/s, p50 {}, p99 {}, max {}, {} errors, {} leader changes; acknowledged {}, lost {}",
        load.clients,
        load.ops_per_sec,
        format_us(load.p50_us),
        format_us(load.p99_us),
        format_us(load.max_us),
        load.errors,
        load.leader_changes,
        load.acknowledged.unwrap_or(0),
        load.lost.unwrap_or(0)
    );
    out
}
