//! `corum chaos`: a quorum of `corum run` processes, each in a network namespace of its own,
//! under a recorded workload and a seeded schedule of faults; every round's history is
//! checked (`corum_check`: linearizable per key, no acknowledged write lost).
//!
//! | step | what happens |
//! |---|---|
//! | setup | root, `ip` and `nft` checked; a bridge and a namespace per node ([`net`]); the nodes formatted and started inside their namespaces, listening on their own addresses |
//! | round | `corum loadgen --workload history` (in process, through the bridge) for `--round-seconds`, while `--faults` faults drawn from the seed run one after another, each held 1-3 s and healed |
//! | check | every fault healed, stopped nodes continued, killed ones restarted; the round's history file checked; a violation stops the run (exit 1) with the report, the seed and the files kept |
//! | end | nodes stopped, namespaces and bridge removed (also on Ctrl-C or SIGTERM), the directory removed unless `--keep` or a violation |
//!
//! Faults: a symmetric partition between two nodes, a one-way one, the leader cut off from
//! everyone (clients included), the leader cut off from the other controllers only (clients
//! still reach it), random loss of 10-30% of one node's packets, a pause of one
//! node (SIGSTOP, 1-3 s: longer than the election timeout) and a SIGKILL of one node
//! (restarted when the fault ends). The kernel here has no `netem`: no delay or reordering.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use corum_check::{check, CheckLimits, Conclusion, History, Limits};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cmd::demo::cluster::{kill_registered_children, ClusterSpec, LocalCluster, NodeHost};
use crate::cmd::loadgen::{run_workload, HistoryConfig, LoadConfig, Protocol, Workload};

pub mod net;

use net::{ChaosNet, Rule};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Controllers in the quorum.
    #[arg(long, default_value_t = 3)]
    pub nodes: u32,
    /// Rounds of load and faults.
    #[arg(long, default_value_t = 10)]
    pub rounds: u32,
    /// Seconds of load per round.
    #[arg(long, default_value_t = 8.0)]
    pub round_seconds: f64,
    /// Faults per round (one after another).
    #[arg(long, default_value_t = 3)]
    pub faults: u32,
    /// The seed of the fault schedule and of the clients' operations.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Recording clients.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Config keys the clients share.
    #[arg(long, default_value_t = 3)]
    pub keys: usize,
    /// Topic names the clients create, delete and describe.
    #[arg(long, default_value_t = 2)]
    pub topics: usize,
    /// Where the nodes' files and the histories go (default: a new directory under /var/tmp).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Keep the directory at the end (it is always kept after a violation).
    #[arg(long)]
    pub keep: bool,
}

/// A fault of the schedule, by node id (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    Partition(u32, u32),
    OneWay {
        from: u32,
        to: u32,
    },
    IsolateLeader,
    /// The leader cut off from the other controllers, still reachable by clients.
    LeaderFromPeers,
    Loss {
        node: u32,
        percent: u8,
    },
    Pause(u32),
    Kill(u32),
}

impl Fault {
    /// The kind, as the summary groups faults.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Partition(..) => "partition",
            Fault::OneWay { .. } => "one-way partition",
            Fault::IsolateLeader => "leader isolated",
            Fault::LeaderFromPeers => "leader cut from its peers",
            Fault::Loss { .. } => "packet loss",
            Fault::Pause(_) => "pause",
            Fault::Kill(_) => "kill",
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Partition(a, b) => write!(f, "partition {a}<->{b}"),
            Fault::OneWay { from, to } => write!(f, "one-way {from}->{to}"),
            Fault::IsolateLeader => write!(f, "leader isolated"),
            Fault::LeaderFromPeers => write!(f, "leader cut from its peers"),
            Fault::Loss { node, percent } => write!(f, "loss {percent}% at {node}"),
            Fault::Pause(n) => write!(f, "pause {n}"),
            Fault::Kill(n) => write!(f, "kill {n}"),
        }
    }
}

/// Draws one fault over `nodes` nodes.
pub fn draw_fault(rng: &mut ChaCha8Rng, nodes: u32) -> Fault {
    let node = |rng: &mut ChaCha8Rng| rng.gen_range(1..=nodes);
    // Two different nodes (at least two exist where this is called).
    let two = |rng: &mut ChaCha8Rng| {
        let a = rng.gen_range(1..=nodes);
        let b = (a - 1 + rng.gen_range(1..nodes)) % nodes + 1;
        (a, b)
    };
    match rng.gen_range(0..7) {
        0 if nodes > 1 => {
            let (a, b) = two(rng);
            Fault::Partition(a, b)
        }
        1 if nodes > 1 => {
            let (from, to) = two(rng);
            Fault::OneWay { from, to }
        }
        2 => Fault::IsolateLeader,
        3 => Fault::Loss {
            node: node(rng),
            percent: rng.gen_range(10..=30),
        },
        4 => Fault::Pause(node(rng)),
        5 if nodes > 1 => Fault::LeaderFromPeers,
        _ => Fault::Kill(node(rng)),
    }
}

/// What the signal thread must undo: the `ip` commands of the network, the directory and
/// whether to keep it.
struct Cleanup {
    commands: Vec<Vec<String>>,
    dir: PathBuf,
    keep: bool,
}

static CLEANUP: Mutex<Option<Cleanup>> = Mutex::new(None);

/// Blocks SIGINT and SIGTERM in every thread and handles them on one: kill the nodes, remove
/// the network (and the directory unless kept), exit 128 + the signal.
fn watch_signals() -> anyhow::Result<()> {
    // SAFETY: sigset_t is plain data initialised by sigemptyset/sigaddset before use;
    // pthread_sigmask changes only this thread's mask (threads started later inherit it).
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        anyhow::ensure!(rc == 0, "blocking SIGINT/SIGTERM failed: error {rc}");
        set
    };
    std::thread::Builder::new()
        .name("corum-chaos-signals".into())
        .spawn(move || {
            let mut signal: libc::c_int = 0;
            // SAFETY: `set` is initialised and blocked in every thread of the process.
            if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
                return;
            }
            eprintln!("\ncorum chaos: interrupted: stopping the nodes, removing the network");
            kill_registered_children();
            std::thread::sleep(Duration::from_millis(100));
            let cleanup = CLEANUP
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(Cleanup {
                commands,
                dir,
                keep,
            }) = cleanup
            {
                for args in commands {
                    let _ = std::process::Command::new("ip").args(&args).status();
                }
                if keep {
                    eprintln!("corum chaos: kept {}", dir.display());
                } else {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
            std::process::exit(128 + signal);
        })
        .context("starting the signal thread")?;
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!((1..=9).contains(&args.nodes), "--nodes must be 1 to 9");
    anyhow::ensure!(args.rounds >= 1, "--rounds must be at least 1");
    anyhow::ensure!(
        (1.0..=600.0).contains(&args.round_seconds),
        "--round-seconds must be 1 to 600"
    );
    net::check_host()?;
    let exe = std::env::current_exe().context("finding the corum binary")?;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => PathBuf::from(format!("/var/tmp/corum-chaos-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    watch_signals()?;
    let net = ChaosNet::create(args.nodes, std::process::id())?;
    *CLEANUP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Cleanup {
        commands: net.cleanup_commands(),
        dir: dir.clone(),
        keep: args.keep,
    });
    let outcome = rounds(&args, &exe, &dir, &net);
    drop(net);
    let keep = args.keep || outcome.as_ref().map_or(true, |violations| *violations > 0);
    if keep {
        eprintln!("corum chaos: files kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    match outcome? {
        0 => Ok(()),
        n => anyhow::bail!("{n} round(s) failed their check (seed {})", args.seed),
    }
}

/// Runs the rounds; returns how many failed their check (it stops at the first).
fn rounds(args: &Args, exe: &Path, dir: &Path, net: &ChaosNet) -> anyhow::Result<u32> {
    let mut spec = ClusterSpec::new(exe, dir.join("cluster"));
    spec.voters = args.nodes;
    spec.hosts = (1..=args.nodes)
        .map(|i| NodeHost {
            addr: IpAddr::V4(net.addr(i)),
            netns: Some(net.netns_path(i)),
        })
        .collect();
    spec.rust_log = "warn".into();
    let mut cluster = LocalCluster::create(spec)?;
    cluster.start_all()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(e) = leader(&cluster) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the quorum elected no leader: {e:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let bootstrap: Vec<SocketAddr> = cluster.nodes.iter().map(|n| n.client).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let started = Instant::now();
    let mut faults_total = 0u32;
    // Per fault kind: ms from its healing to the next acknowledged write's completion.
    let mut resumed: std::collections::BTreeMap<&'static str, Vec<f64>> = Default::default();
    eprintln!(
        "corum chaos: {} nodes at {}.. (host {}), seed {}, {} rounds of {} s with {} faults",
        args.nodes,
        net.addr(1),
        net.host_addr(),
        args.seed,
        args.rounds,
        args.round_seconds,
        args.faults
    );
    for round in 1..=args.rounds {
        let file = dir.join(format!("round-{round}.jsonl"));
        let origin = Instant::now();
        let config = LoadConfig {
            bootstrap: bootstrap.clone(),
            workload: Workload::History,
            clients: args.clients,
            connections: args.clients.min(4),
            duration: Duration::from_secs_f64(args.round_seconds),
            protocol: Protocol::Private,
            kafka_bootstrap: Vec::new(),
            verify: false,
            partitions: 1,
            brokers: 3,
            heartbeat_interval: Duration::from_millis(500),
            // A round's brokers stay registered (their leases live on) into the next round.
            broker_id_base: 1_000 + 10 * round,
            broker_listeners: Vec::new(),
            log_dir: None,
            metrics: Vec::new(),
            raw_fsync: Duration::ZERO,
            raw_quorum_writers: 0,
            rtt_probes: 0,
            request_timeout: Duration::from_secs(2),
            grace: Duration::from_secs(15),
            progress: false,
            tls: None,
            history: Some(HistoryConfig {
                file: file.clone(),
                keys: args.keys,
                topics: args.topics,
                seed: args.seed.wrapping_mul(1_000).wrapping_add(u64::from(round)),
                // Fresh keys every round: the checker takes each to start unset.
                key_base: Some(u64::from(round) * crate::cmd::loadgen::HISTORY_NAMES_MAX as u64),
                origin: Some(origin),
            }),
        };
        let load = std::thread::Builder::new()
            .name("corum-chaos-load".into())
            .spawn(move || run_workload(config))
            .context("starting the load")?;
        let schedule: Vec<Fault> = (0..args.faults)
            .map(|_| draw_fault(&mut rng, args.nodes))
            .collect();
        // The load registers its brokers first: the faults start a second in.
        std::thread::sleep(Duration::from_secs(1));
        let mut applied = Vec::new();
        // (fault, when it was healed, ns since `origin`)
        let mut healed: Vec<(&Fault, u64)> = Vec::new();
        for fault in &schedule {
            let hold = Duration::from_millis(rng.gen_range(1_000..=3_000));
            match apply(fault, &mut cluster, net, hold) {
                Ok(()) => {
                    applied.push(fault.to_string());
                    healed.push((fault, origin.elapsed().as_nanos() as u64));
                }
                Err(e) => applied.push(format!("{fault} (not applied: {e:#})")),
            }
            std::thread::sleep(Duration::from_millis(rng.gen_range(300..=1_000)));
        }
        let report = load
            .join()
            .map_err(|_| anyhow::anyhow!("the load thread panicked"))?
            .with_context(|| format!("round {round}: the load"))?;
        faults_total += schedule.len() as u32;
        let history = History::read(&file)
            .with_context(|| format!("round {round}: reading {}", file.display()))?;
        let unknown = history
            .ops
            .iter()
            .filter(|o| o.record.outcome == corum_check::history::Outcome::Unknown)
            .count();
        let limits = CheckLimits {
            per_key: Limits {
                steps_max: 5_000_000,
                cache_bytes_max: 256 << 20,
                deadline: None,
            },
            shrink_steps_max: 50_000_000,
        };
        let verdict = check(&history, &limits);
        for (fault, at) in healed {
            if let Some(ms) = write_resumed_ms(&history, at) {
                resumed.entry(fault.kind()).or_default().push(ms);
            }
        }
        eprintln!(
            "corum chaos: round {round}: {} ops ({} acknowledged, {unknown} unknown), faults: {}; {}",
            history.ops.len(),
            report.ops,
            applied.join(", "),
            match verdict.conclusion() {
                Conclusion::Pass => "linearizable, nothing lost",
                Conclusion::Violation => "VIOLATION",
                Conclusion::Undecided => "undecided",
            }
        );
        match verdict.conclusion() {
            Conclusion::Pass => {}
            Conclusion::Violation | Conclusion::Undecided => {
                print!("{verdict}");
                eprintln!(
                    "corum chaos: replay with: corum chaos --nodes {} --seed {} --rounds {round} \
                     --round-seconds {} --faults {} (history: {})",
                    args.nodes,
                    args.seed,
                    args.round_seconds,
                    args.faults,
                    file.display()
                );
                return Ok(1);
            }
        }
    }
    let _ = cluster.terminate_all(Duration::from_secs(10));
    for (kind, mut ms) in resumed {
        ms.sort_by(f64::total_cmp);
        eprintln!(
            "corum chaos: {kind}: healed to the next acknowledged write: median {:.0} ms, max \
             {:.0} ms ({} faults)",
            ms[ms.len() / 2],
            ms[ms.len() - 1],
            ms.len()
        );
    }
    eprintln!(
        "corum chaos: {} rounds, {faults_total} faults, every history linearizable with no \
         acknowledged write lost ({:.0} s)",
        args.rounds,
        started.elapsed().as_secs_f64()
    );
    Ok(0)
}

/// Milliseconds from `healed_ns` to the completion of the first acknowledged config write
/// invoked at or after it (`None`: no such write).
fn write_resumed_ms(history: &History, healed_ns: u64) -> Option<f64> {
    history
        .ops
        .iter()
        .map(|o| &o.record)
        .filter(|o| {
            o.invoke_ns >= healed_ns
                && o.outcome == corum_check::history::Outcome::Ok
                && matches!(o.op, corum_check::history::Op::ConfigSet { .. })
        })
        .filter_map(|o| o.complete_ns)
        .min()
        .map(|c| (c - healed_ns) as f64 / 1e6)
}

/// The current leader's id, asked through `corum quorum describe`.
fn leader(cluster: &LocalCluster) -> anyhow::Result<u32> {
    let exe = &cluster.spec.exe;
    let out = std::process::Command::new(exe)
        .args([
            "quorum",
            "describe",
            "--bootstrap",
            &cluster.bootstrap(),
            "--status",
            "--json",
            "--timeout-ms",
            "2000",
        ])
        .env("RUST_LOG", "off")
        .output()
        .context("running corum quorum describe")?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "corum quorum describe printed no JSON ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })?;
    v["leader_id"]
        .as_u64()
        .and_then(|l| u32::try_from(l).ok())
        .with_context(|| format!("no leader in {v}"))
}

/// Applies `fault` for `hold`, then heals it.
fn apply(
    fault: &Fault,
    cluster: &mut LocalCluster,
    net: &ChaosNet,
    hold: Duration,
) -> anyhow::Result<()> {
    match *fault {
        Fault::Partition(a, b) => {
            net.set_rules(a, &[Rule::DropTo(net.addr(b)), Rule::DropFrom(net.addr(b))])?;
            net.set_rules(b, &[Rule::DropTo(net.addr(a)), Rule::DropFrom(net.addr(a))])?;
            std::thread::sleep(hold);
            net.heal()
        }
        Fault::OneWay { from, to } => {
            net.set_rules(from, &[Rule::DropTo(net.addr(to))])?;
            std::thread::sleep(hold);
            net.heal()
        }
        Fault::IsolateLeader => {
            let l = leader(cluster).context("finding the leader to isolate")?;
            net.set_rules(l, &[Rule::Isolate])?;
            std::thread::sleep(hold);
            net.heal()
        }
        Fault::LeaderFromPeers => {
            let l = leader(cluster).context("finding the leader to cut off")?;
            let peers: Vec<Rule> = cluster
                .ids()
                .into_iter()
                .filter(|&id| id != l)
                .flat_map(|id| [Rule::DropTo(net.addr(id)), Rule::DropFrom(net.addr(id))])
                .collect();
            net.set_rules(l, &peers)?;
            std::thread::sleep(hold);
            net.heal()
        }
        Fault::Loss { node, percent } => {
            net.set_rules(node, &[Rule::Loss(percent)])?;
            std::thread::sleep(hold);
            net.heal()
        }
        Fault::Pause(n) => {
            anyhow::ensure!(cluster.signal(n, libc::SIGSTOP), "node {n} is not running");
            std::thread::sleep(hold);
            cluster.signal(n, libc::SIGCONT);
            Ok(())
        }
        Fault::Kill(n) => {
            cluster.kill(n);
            std::thread::sleep(hold);
            cluster.start(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schedule is a function of the seed, names only existing nodes, never partitions a
    /// node from itself, and draws every kind of fault.
    #[test]
    fn the_schedule_is_seeded_and_well_formed() {
        let draw = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..600)
                .map(|_| draw_fault(&mut rng, 3))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
        let faults = draw(5);
        let mut kinds = std::collections::BTreeSet::new();
        for f in &faults {
            kinds.insert(f.kind());
            match *f {
                Fault::Partition(a, b) | Fault::OneWay { from: a, to: b } => {
                    assert!(
                        (1..=3).contains(&a) && (1..=3).contains(&b) && a != b,
                        "{f}"
                    )
                }
                Fault::Loss { node, percent } => {
                    assert!((1..=3).contains(&node) && (10..=30).contains(&percent))
                }
                Fault::Pause(n) | Fault::Kill(n) => assert!((1..=3).contains(&n)),
                Fault::IsolateLeader | Fault::LeaderFromPeers => {}
            }
        }
        assert_eq!(kinds.len(), 7);
    }
}
