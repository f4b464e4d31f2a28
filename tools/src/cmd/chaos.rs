//! `corum chaos`: a quorum of `corum run` processes, each in a network namespace of its own
//! and on a small filesystem of its own, under a recorded workload and a seeded schedule of
//! faults; every round's history is checked (`corum_check`: linearizable per key, no
//! acknowledged write lost), and so is every node's metadata image.
//!
//! | step | what happens |
//! |---|---|
//! | setup | root, `ip`, `nft`, `iptables-restore`, `losetup`, `mkfs.ext4` and the blkio cgroup checked; what dead runs left removed ([`sweep`], one line per run; `--cleanup` does only this); a bridge and a namespace per node ([`net`]), and (with packet faults drawn) a packet queue worker bound and sent node 1's packets once ([`packet_queue`]); per node an ext4 filesystem of `--disk-mib` on a loop device, mounted as its `metadata.log.dir`, and a blkio cgroup for the run ([`disk`]); the nodes formatted and started inside their namespaces, listening on their own addresses |
//! | round | `corum loadgen --workload history` (in process, through the bridge) for `--round-seconds`, while `--faults` faults drawn from the seed (of the `--fault-kinds`) run one after another, each held 1-3 s and healed |
//! | check | every fault healed, stopped nodes continued, killed ones restarted; the round's history file checked; every node's image, read from its directory at the leader's high watermark once each node has committed that far, equal to the others'; a node that stopped at a full disk said so naming the file, and its log verified clean on the full disk; a violation stops the run (exit 1) with the report, the seed and the files kept |
//! | end | nodes stopped; packet queue workers stopped at each heal (their rules removed first); filesystems unmounted, loop devices detached, the cgroup, namespaces and bridge removed (also on Ctrl-C or SIGTERM); the directory removed unless `--keep` or a violation |
//!
//! Faults: a symmetric partition between two nodes, a one-way one, the leader cut off from
//! everyone (clients included), a follower cut off from everyone (the majority split: the
//! leader and the other follower go on), the leader cut off from the other controllers only
//! (clients still reach it), packet faults (`loss`: 5-30% of the packets dropped; `delay`:
//! each packet held 20-200 ms ± up to a quarter of that, in order; `reorder`: each packet held
//! from 0 up to a spread of 10-50 ms and let go on its own time, so later ones overtake), on
//! one node's every packet or on those between the leader and another node, each by a packet
//! queue worker in that node's namespace with the schedule's seed ([`packet_queue`]: the
//! kernel here has no `netem`), a pause of one node
//! (SIGSTOP, 1-3 s: longer than the election timeout), a SIGKILL of one node (restarted when
//! the fault ends), a full disk (`disk-full`: a filler file takes every free block of one
//! node's filesystem until the node stops at ENOSPC, at most [`DISK_FULL_WAIT`]; the offline
//! tools then read its directory on the full disk, the filler is removed and the node
//! restarted) and a slow disk (`slow-disk`: the leader's or a follower's process in the blkio
//! cgroup, its writes to its loop device throttled to [`SLOW_DISK_IOPS`] requests and
//! [`SLOW_DISK_BPS`] bytes per second). The summary gives, per kind, the time from healing to
//! the next acknowledged write, and the rate and latency of acknowledged writes while a slow
//! disk held (on the leader, on a follower) against the time without faults. The kernel here
//! has no device-mapper (no `dm-delay`, `dm-flakey`).

use std::collections::BTreeMap;
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
use crate::cmd::shell::{image_until, open_directory};

pub mod disk;
pub mod net;
pub mod packet_queue;
pub mod sweep;

use disk::Disks;
use net::{ChaosNet, Rule};
use packet_queue::{Netem, PacketQueue};

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
    /// Size of each node's filesystem (its metadata.log.dir), in MiB.
    #[arg(long, default_value_t = 64)]
    pub disk_mib: u64,
    /// The kinds of fault to draw from (comma-separated; default: all): partition, one-way,
    /// isolate-leader, isolate-follower, leader-from-peers, loss (5-30% of packets dropped),
    /// delay (20-200 ms each way, with jitter), reorder (each packet held from 0 up to a
    /// spread of 10-50 ms, later ones overtaking), pause, kill, disk-full, slow-disk. Loss, delay and reorder touch a
    /// node's every packet or those between the leader and another node, through a netfilter
    /// queue (iptables' NFQUEUE target).
    #[arg(long, value_delimiter = ',', value_name = "KIND,...")]
    pub fault_kinds: Vec<String>,
    /// Only remove what dead runs left behind (a run killed with SIGKILL cannot clean up):
    /// their node processes, mounts, loop devices, blkio cgroups, veth pairs, namespaces and
    /// bridges, then exit (1 if something could not be removed); the runs' directories stay
    /// and live runs are left alone. Every run does this when it starts; other options are
    /// ignored.
    #[arg(long)]
    pub cleanup: bool,
}

/// How long `disk-full` waits for the node to stop at ENOSPC before it heals anyway.
pub const DISK_FULL_WAIT: Duration = Duration::from_secs(6);
/// Write requests per second a `slow-disk` node may send its disk.
pub const SLOW_DISK_IOPS: u32 = 20;
/// Bytes per second a `slow-disk` node may write to its disk.
pub const SLOW_DISK_BPS: u64 = 1 << 20;

/// Settings of every node: segments and snapshots small enough for a filesystem of a few tens
/// of MiB (a roll or a snapshot every few seconds of load, so a full disk is met soon).
const NODE_SETTINGS: [(&str, &str); 3] = [
    ("metadata.log.segment.bytes", "1048576"),
    ("metadata.log.max.record.bytes.between.snapshots", "524288"),
    ("metadata.max.retention.bytes", "4194304"),
];

/// A fault of the schedule, by node id (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    Partition(u32, u32),
    OneWay {
        from: u32,
        to: u32,
    },
    IsolateLeader,
    /// A follower cut off from everyone (the leader and the other nodes are the majority).
    IsolateFollower,
    /// The leader cut off from the other controllers, still reachable by clients.
    LeaderFromPeers,
    /// `percent` of the packets `at` names dropped.
    Loss {
        at: PacketsOf,
        percent: u8,
        seed: u64,
    },
    /// Each packet `at` names held `delay_ms` ± `jitter_ms`, in the order they came.
    Delay {
        at: PacketsOf,
        delay_ms: u32,
        jitter_ms: u32,
        seed: u64,
    },
    /// Each packet `at` names held from 0 to `spread_ms`, released when its own time comes: a
    /// later packet overtakes an earlier one.
    Reorder {
        at: PacketsOf,
        spread_ms: u32,
        seed: u64,
    },
    Pause(u32),
    Kill(u32),
    /// Node `n`'s filesystem filled.
    DiskFull(u32),
    /// The leader's (or a follower's) writes to its disk throttled.
    SlowDisk {
        leader: bool,
    },
}

/// The packets a packet fault (`loss`, `delay`, `reorder`) touches, both ways.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketsOf {
    /// Every packet of node `n` (to and from the other nodes and the clients).
    Node(u32),
    /// The packets between the leader and one other node (the `k`-th of the others, modulo
    /// their number), chosen when the fault starts: two followers hardly talk to each other.
    LeaderAnd(u32),
}

impl std::fmt::Display for PacketsOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PacketsOf::Node(n) => write!(f, "at {n}"),
            PacketsOf::LeaderAnd(_) => write!(f, "between the leader and a follower"),
        }
    }
}

/// Every fault kind, as `--fault-kinds` names it, in the order [`draw_fault`] numbers them.
pub const FAULT_KINDS: [&str; 12] = [
    "partition",
    "one-way",
    "isolate-leader",
    "loss",
    "pause",
    "leader-from-peers",
    "kill",
    "isolate-follower",
    "disk-full",
    "slow-disk",
    "delay",
    "reorder",
];

impl Fault {
    /// The kind, as the summary groups faults.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Partition(..) => "partition",
            Fault::OneWay { .. } => "one-way partition",
            Fault::IsolateLeader => "leader isolated",
            Fault::LeaderFromPeers => "leader cut from its peers",
            Fault::Loss { .. } => "packet loss",
            Fault::Delay { .. } => "delay",
            Fault::Reorder { .. } => "reorder",
            Fault::Pause(_) => "pause",
            Fault::Kill(_) => "kill",
            Fault::IsolateFollower => "follower isolated",
            Fault::DiskFull(_) => "disk full",
            Fault::SlowDisk { .. } => "slow disk",
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
            Fault::Loss { at, percent, .. } => write!(f, "loss {percent}% {at}"),
            Fault::Delay {
                at,
                delay_ms,
                jitter_ms,
                ..
            } => write!(f, "delay {delay_ms}±{jitter_ms} ms each way {at}"),
            Fault::Reorder { at, spread_ms, .. } => {
                write!(f, "reorder (each packet held 0-{spread_ms} ms) {at}")
            }
            Fault::Pause(n) => write!(f, "pause {n}"),
            Fault::Kill(n) => write!(f, "kill {n}"),
            Fault::IsolateFollower => write!(f, "follower isolated"),
            Fault::DiskFull(n) => write!(f, "disk full at {n}"),
            Fault::SlowDisk { leader: true } => write!(f, "slow disk at the leader"),
            Fault::SlowDisk { leader: false } => write!(f, "slow disk at a follower"),
        }
    }
}

impl Fault {
    /// A packet fault's packets and what its worker does with them.
    pub fn netem(&self) -> Option<(PacketsOf, Netem)> {
        match *self {
            Fault::Loss { at, percent, seed } => Some((
                at,
                Netem {
                    delay_ms: 0,
                    jitter_ms: 0,
                    loss_percent: percent,
                    reorder: false,
                    seed,
                },
            )),
            Fault::Delay {
                at,
                delay_ms,
                jitter_ms,
                seed,
            } => Some((
                at,
                Netem {
                    delay_ms,
                    jitter_ms,
                    loss_percent: 0,
                    reorder: false,
                    seed,
                },
            )),
            Fault::Reorder {
                at,
                spread_ms,
                seed,
            } => Some((
                at,
                Netem {
                    delay_ms: spread_ms / 2,
                    jitter_ms: spread_ms - spread_ms / 2,
                    loss_percent: 0,
                    reorder: true,
                    seed,
                },
            )),
            _ => None,
        }
    }
}

/// The indexes into [`FAULT_KINDS`] that `names` selects (all when empty).
pub fn parse_fault_kinds(names: &[String]) -> anyhow::Result<Vec<usize>> {
    if names.is_empty() {
        return Ok((0..FAULT_KINDS.len()).collect());
    }
    let mut kinds = Vec::new();
    for name in names {
        let i = FAULT_KINDS
            .iter()
            .position(|k| k == name)
            .with_context(|| {
                format!(
                    "unknown fault kind {name:?} (known: {})",
                    FAULT_KINDS.join(", ")
                )
            })?;
        if !kinds.contains(&i) {
            kinds.push(i);
        }
    }
    Ok(kinds)
}

/// Draws one fault over `nodes` nodes, of one of the `kinds` (indexes into [`FAULT_KINDS`]).
pub fn draw_fault(rng: &mut ChaCha8Rng, nodes: u32, kinds: &[usize]) -> Fault {
    let node = |rng: &mut ChaCha8Rng| rng.gen_range(1..=nodes);
    // Two different nodes (at least two exist where this is called).
    let two = |rng: &mut ChaCha8Rng| {
        let a = rng.gen_range(1..=nodes);
        let b = (a - 1 + rng.gen_range(1..nodes)) % nodes + 1;
        (a, b)
    };
    // A packet fault's packets: a node's every packet, or (half the time, with two nodes or
    // more) those between the leader and another node.
    let target = |rng: &mut ChaCha8Rng| {
        if nodes > 1 && rng.gen_bool(0.5) {
            PacketsOf::LeaderAnd(rng.gen_range(0..nodes - 1))
        } else {
            PacketsOf::Node(node(rng))
        }
    };
    match kinds[rng.gen_range(0..kinds.len())] {
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
            at: target(rng),
            percent: rng.gen_range(5..=30),
            seed: rng.gen(),
        },
        10 => {
            let at = target(rng);
            let delay_ms = rng.gen_range(20..=200);
            Fault::Delay {
                at,
                delay_ms,
                jitter_ms: rng.gen_range(0..=delay_ms / 4),
                seed: rng.gen(),
            }
        }
        11 => Fault::Reorder {
            at: target(rng),
            spread_ms: rng.gen_range(10..=50),
            seed: rng.gen(),
        },
        4 => Fault::Pause(node(rng)),
        5 if nodes > 1 => Fault::LeaderFromPeers,
        7 if nodes > 1 => Fault::IsolateFollower,
        8 => Fault::DiskFull(node(rng)),
        9 => Fault::SlowDisk {
            leader: nodes == 1 || rng.gen_bool(0.5),
        },
        _ => Fault::Kill(node(rng)),
    }
}

/// What the signal thread must undo: the commands that unmount and detach the disks and
/// remove the cgroup, then the `ip` commands of the network; the directory and whether to
/// keep it.
struct Cleanup {
    disks: Vec<(String, Vec<String>)>,
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
            eprintln!(
                "\ncorum chaos: interrupted: stopping the nodes, removing the disks and the network"
            );
            kill_registered_children();
            std::thread::sleep(Duration::from_millis(100));
            let cleanup = CLEANUP
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(Cleanup {
                disks,
                commands,
                dir,
                keep,
            }) = cleanup
            {
                disk::run_cleanup(&disks);
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

/// Where a run's files go without `--dir`.
pub fn default_dir(pid: u32) -> PathBuf {
    PathBuf::from(format!("/var/tmp/corum-chaos-{pid}"))
}

/// Removes what dead runs left ([`sweep::sweep`]), printing a line per run; with `verbose`
/// (`--cleanup`) also the live runs left alone, or that there was nothing. Returns how many
/// parts could not be removed.
fn sweep_dead_runs(verbose: bool) -> usize {
    let swept = sweep::sweep(std::process::id());
    let mut errors = 0;
    let mut removed = 0;
    for run in &swept {
        match &run.outcome {
            sweep::Outcome::Live(_) if !verbose => continue,
            sweep::Outcome::Live(_) => {}
            sweep::Outcome::Removed(r) => {
                errors += r.errors.len();
                removed += 1;
            }
        }
        for line in run.lines() {
            eprintln!("{line}");
        }
    }
    if verbose && removed == 0 {
        eprintln!("corum chaos: nothing to remove");
    }
    errors
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.cleanup {
        net::check_host()?;
        let errors = sweep_dead_runs(true);
        anyhow::ensure!(errors == 0, "{errors} leftover(s) could not be removed");
        return Ok(());
    }
    anyhow::ensure!((1..=9).contains(&args.nodes), "--nodes must be 1 to 9");
    anyhow::ensure!(args.rounds >= 1, "--rounds must be at least 1");
    anyhow::ensure!(
        (1.0..=600.0).contains(&args.round_seconds),
        "--round-seconds must be 1 to 600"
    );
    anyhow::ensure!(
        (16..=4096).contains(&args.disk_mib),
        "--disk-mib must be 16 to 4096"
    );
    let kinds = parse_fault_kinds(&args.fault_kinds)?;
    net::check_host()?;
    disk::check_host()?;
    // Before anything of this run exists: a dead run's names (its tag may be this run's) and
    // mounts (its directory may be this run's) would be in the way.
    sweep_dead_runs(false);
    let exe = std::env::current_exe().context("finding the corum binary")?;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => default_dir(std::process::id()),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    watch_signals()?;
    let register = |net: Option<&ChaosNet>, disks: Option<&Disks>| {
        *CLEANUP
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Cleanup {
            disks: disks.map(Disks::cleanup).unwrap_or_default(),
            commands: net.map(ChaosNet::cleanup_commands).unwrap_or_default(),
            dir: dir.clone(),
            keep: args.keep,
        });
    };
    let net = ChaosNet::create(args.nodes, std::process::id())?;
    register(Some(&net), None);
    if kinds
        .iter()
        .any(|&k| matches!(FAULT_KINDS[k], "loss" | "delay" | "reorder"))
    {
        probe_packet_queue(&net).context(
            "the packet faults (loss, delay, reorder) need iptables' NFQUEUE target and \
             netfilter queues (Debian: apt-get install iptables; the kernel's \
             CONFIG_NETFILTER_XT_TARGET_NFQUEUE and CONFIG_NETFILTER_NETLINK_QUEUE)",
        )?;
    }
    let mounts: Vec<PathBuf> = (1..=args.nodes)
        .map(|i| cluster_dir(&dir).join(format!("node{i}")))
        .collect();
    let outcome = match Disks::create(
        &dir.join("disks"),
        &mounts,
        args.disk_mib,
        std::process::id(),
    ) {
        Ok(mut disks) => {
            register(Some(&net), Some(&disks));
            let outcome = rounds(&args, &kinds, &exe, &dir, &net, &mut disks);
            if !matches!(outcome, Ok(0)) {
                for (i, fs) in disks.nodes.iter().enumerate() {
                    eprintln!(
                        "corum chaos: node {}'s data directory is on {} (mount -o loop {} DIR)",
                        i + 1,
                        fs.image.display(),
                        fs.image.display()
                    );
                }
            }
            // The nodes are stopped (the cluster is dropped inside): the disks can go.
            drop(disks);
            outcome
        }
        Err(e) => Err(e),
    };
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

/// Where the nodes' configurations, logs and data directories go.
fn cluster_dir(dir: &Path) -> PathBuf {
    dir.join("cluster")
}

/// A stretch of a round's history and what held during it (for the write rates).
struct Window {
    label: &'static str,
    start_ns: u64,
    end_ns: u64,
}

/// What applying faults found beside the history: windows to measure, and problems (a node
/// that stopped without saying why, an offline tool that failed on a full disk) that fail the
/// round like a violation.
struct Round {
    origin: Instant,
    windows: Vec<Window>,
    problems: Vec<String>,
    /// Per slow-disk fault: its label, the slow node's log syncs and the others' meanwhile.
    syncs: Vec<(&'static str, SyncTotals, SyncTotals)>,
}

impl Round {
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// The window label of the time between faults.
const BETWEEN_FAULTS: &str = "between faults";
const SLOW_LEADER: &str = "slow disk at the leader";
const SLOW_FOLLOWER: &str = "slow disk at a follower";

/// Runs the rounds; returns how many failed their check (it stops at the first).
fn rounds(
    args: &Args,
    kinds: &[usize],
    exe: &Path,
    dir: &Path,
    net: &ChaosNet,
    disks: &mut Disks,
) -> anyhow::Result<u32> {
    let mut spec = ClusterSpec::new(exe, cluster_dir(dir));
    spec.voters = args.nodes;
    spec.hosts = (1..=args.nodes)
        .map(|i| NodeHost {
            addr: IpAddr::V4(net.addr(i)),
            netns: Some(net.netns_path(i)),
        })
        .collect();
    spec.rust_log = "warn".into();
    for (k, v) in NODE_SETTINGS {
        spec = spec.set(k, v);
    }
    let mut cluster = LocalCluster::create(spec)?;
    cluster.start_all()?;
    wait_for_leader(&cluster).context("after the start")?;
    let bootstrap: Vec<SocketAddr> = cluster.nodes.iter().map(|n| n.client).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let started = Instant::now();
    let mut faults_total = 0u32;
    // Per fault kind: ms from its healing to the next acknowledged write's completion.
    let mut resumed: BTreeMap<&'static str, Vec<f64>> = Default::default();
    // Per window label: (seconds, acknowledged writes' latencies in ms).
    let mut rates: BTreeMap<&'static str, (f64, Vec<f64>)> = Default::default();
    // Per slow-disk label: the slow nodes' log syncs, and the other nodes' meanwhile.
    let mut syncs: BTreeMap<&'static str, (SyncTotals, SyncTotals)> = Default::default();
    eprintln!(
        "corum chaos: {} nodes at {}.. (host {}) on {} MiB filesystems, seed {}, {} rounds of {} \
         s with {} faults",
        args.nodes,
        net.addr(1),
        net.host_addr(),
        args.disk_mib,
        args.seed,
        args.rounds,
        args.round_seconds,
        args.faults
    );
    for round in 1..=args.rounds {
        // A round starts on a quorum with a leader: the previous round's last fault may have
        // been healed moments ago, and an election on a loaded host can take seconds (the
        // time from healing to the next write is measured and reported per fault instead).
        if round > 1 {
            wait_for_leader(&cluster).with_context(|| format!("before round {round}"))?;
        }
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
            .map(|_| draw_fault(&mut rng, args.nodes, kinds))
            .collect();
        // The load registers its brokers first: the faults start a second in.
        std::thread::sleep(Duration::from_secs(1));
        let mut applied = Vec::new();
        let mut state = Round {
            origin,
            windows: Vec::new(),
            problems: Vec::new(),
            syncs: Vec::new(),
        };
        // (fault, when it was healed, ns since `origin`)
        let mut healed: Vec<(&Fault, u64)> = Vec::new();
        for fault in &schedule {
            let hold = Duration::from_millis(rng.gen_range(1_000..=3_000));
            match apply(fault, &mut cluster, net, disks, hold, &mut state) {
                Ok(note) => {
                    applied.push(format!("{fault}{note}"));
                    healed.push((fault, state.now_ns()));
                }
                Err(e) => applied.push(format!("{fault} (not applied: {e:#})")),
            }
            let gap = Duration::from_millis(rng.gen_range(300..=1_000));
            let start_ns = state.now_ns();
            std::thread::sleep(gap);
            state.windows.push(Window {
                label: BETWEEN_FAULTS,
                start_ns,
                end_ns: state.now_ns(),
            });
        }
        let report = load
            .join()
            .map_err(|_| anyhow::anyhow!("the load thread panicked"))?
            .with_context(|| format!("round {round}: the load"))?;
        faults_total += schedule.len() as u32;
        // Every node runs again (a node that stopped by itself is a problem; it is restarted
        // for the rounds after).
        for id in cluster.ids() {
            if let Some(status) = exited(&mut cluster, id)? {
                state.problems.push(format!(
                    "node {id} stopped by itself ({status}):\n{}",
                    cluster.log_tail(id)
                ));
                cluster.start(id)?;
            }
        }
        let images = images_agree(&cluster, Duration::from_secs(30));
        match &images {
            Ok(Ok(_)) => {}
            Ok(Err(mismatch)) => state.problems.push(mismatch.clone()),
            Err(e) => state
                .problems
                .push(format!("the images could not be compared: {e:#}")),
        }
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
        for w in &state.windows {
            let entry = rates.entry(w.label).or_default();
            entry.0 += (w.end_ns - w.start_ns) as f64 / 1e9;
            entry
                .1
                .extend(write_latencies_ms(&history, w.start_ns, w.end_ns));
        }
        for (label, slow, others) in &state.syncs {
            let entry = syncs.entry(label).or_default();
            entry.0.add(slow);
            entry.1.add(others);
        }
        let passed = verdict.conclusion() == Conclusion::Pass && state.problems.is_empty();
        eprintln!(
            "corum chaos: round {round}: {} ops ({} acknowledged, {unknown} unknown), faults: {}; \
             {}; {}",
            history.ops.len(),
            report.ops,
            applied.join(", "),
            match verdict.conclusion() {
                Conclusion::Pass => "linearizable, nothing lost",
                Conclusion::Violation => "VIOLATION",
                Conclusion::Undecided => "undecided",
            },
            match &images {
                Ok(Ok(offset)) => format!("images identical at offset {offset}"),
                Ok(Err(_)) => "IMAGES DIFFER".to_owned(),
                Err(_) => "images not compared".to_owned(),
            }
        );
        if !passed {
            if verdict.conclusion() != Conclusion::Pass {
                print!("{verdict}");
            }
            for p in &state.problems {
                println!("round {round}: {p}");
            }
            eprintln!(
                "corum chaos: replay with: corum chaos --nodes {} --seed {} --rounds {round} \
                 --round-seconds {} --faults {}{} (history: {})",
                args.nodes,
                args.seed,
                args.round_seconds,
                args.faults,
                if args.fault_kinds.is_empty() {
                    String::new()
                } else {
                    format!(" --fault-kinds {}", args.fault_kinds.join(","))
                },
                file.display()
            );
            return Ok(1);
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
    for (label, (seconds, mut ms)) in rates {
        // The time between faults is the baseline of the windows measured while a fault
        // held: slow disks' and packet faults'.
        let measured =
            |k: &usize| matches!(FAULT_KINDS[*k], "slow-disk" | "loss" | "delay" | "reorder");
        if label == BETWEEN_FAULTS && !kinds.iter().any(measured) {
            continue;
        }
        ms.sort_by(f64::total_cmp);
        let pct = |q: f64| ms.get(((ms.len() as f64 * q) as usize).min(ms.len().saturating_sub(1)));
        eprintln!(
            "corum chaos: {label}: {:.0} acknowledged writes/s, latency median {} ms, p99 {} \
             ms ({} writes in {seconds:.1} s)",
            ms.len() as f64 / seconds.max(1e-9),
            pct(0.5).map_or("-".to_owned(), |v| format!("{v:.1}")),
            pct(0.99).map_or("-".to_owned(), |v| format!("{v:.1}")),
            ms.len()
        );
    }
    for (label, (slow, others)) in syncs {
        eprintln!(
            "corum chaos: {label}: its log syncs took {} on average ({} syncs), the other \
             nodes' {} ({} syncs)",
            slow.mean_ms(),
            slow.rounds,
            others.mean_ms(),
            others.rounds
        );
    }
    eprintln!(
        "corum chaos: {} rounds, {faults_total} faults, every history linearizable with no \
         acknowledged write lost, every node's image identical ({:.0} s)",
        args.rounds,
        started.elapsed().as_secs_f64()
    );
    Ok(0)
}

/// The latencies (ms) of the acknowledged config writes invoked in `[start_ns, end_ns)` and
/// completed by `end_ns`.
fn write_latencies_ms(history: &History, start_ns: u64, end_ns: u64) -> Vec<f64> {
    history
        .ops
        .iter()
        .map(|o| &o.record)
        .filter(|o| {
            o.invoke_ns >= start_ns
                && o.outcome == corum_check::history::Outcome::Ok
                && matches!(o.op, corum_check::history::Op::ConfigSet { .. })
        })
        .filter_map(|o| {
            o.complete_ns
                .filter(|&c| c <= end_ns)
                .map(|c| (c - o.invoke_ns) as f64 / 1e6)
        })
        .collect()
}

/// Node `id`'s exit status if its process exited by itself (it is then marked stopped).
fn exited(cluster: &mut LocalCluster, id: u32) -> anyhow::Result<Option<std::process::ExitStatus>> {
    let slot = cluster
        .nodes
        .iter_mut()
        .find(|n| n.id == id)
        .with_context(|| format!("no node {id}"))?;
    let Some(p) = slot.process.as_mut() else {
        return Ok(None);
    };
    let status = p.wait_timeout(Duration::ZERO)?;
    if status.is_some() {
        slot.process = None;
    }
    Ok(status)
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

/// `corum quorum describe --status --json` of the cluster.
fn describe(cluster: &LocalCluster) -> anyhow::Result<serde_json::Value> {
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
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "corum quorum describe printed no JSON ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

/// The current leader's id, asked through `corum quorum describe`.
/// Waits up to 60 s for a node to name a leader; no leader by then fails the run.
fn wait_for_leader(cluster: &LocalCluster) -> anyhow::Result<u32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match leader(cluster) {
            Ok(l) => return Ok(l),
            Err(e) if Instant::now() >= deadline => {
                return Err(e.context("the quorum elected no leader within 60 s"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn leader(cluster: &LocalCluster) -> anyhow::Result<u32> {
    let v = describe(cluster)?;
    v["leader_id"]
        .as_u64()
        .and_then(|l| u32::try_from(l).ok())
        .with_context(|| format!("no leader in {v}"))
}

/// Applies `fault` for `hold`, then heals it; returns a note for the round's line (empty
/// for most faults).
fn apply(
    fault: &Fault,
    cluster: &mut LocalCluster,
    net: &ChaosNet,
    disks: &mut Disks,
    hold: Duration,
    round: &mut Round,
) -> anyhow::Result<String> {
    match *fault {
        Fault::Partition(a, b) => {
            net.set_rules(a, &[Rule::DropTo(net.addr(b)), Rule::DropFrom(net.addr(b))])?;
            net.set_rules(b, &[Rule::DropTo(net.addr(a)), Rule::DropFrom(net.addr(a))])?;
            std::thread::sleep(hold);
            net.heal()?;
        }
        Fault::OneWay { from, to } => {
            net.set_rules(from, &[Rule::DropTo(net.addr(to))])?;
            std::thread::sleep(hold);
            net.heal()?;
        }
        Fault::IsolateLeader => {
            let l = leader(cluster).context("finding the leader to isolate")?;
            net.set_rules(l, &[Rule::Isolate])?;
            std::thread::sleep(hold);
            net.heal()?;
            return Ok(format!(" ({l})"));
        }
        Fault::IsolateFollower => {
            let f = follower(cluster).context("finding a follower to isolate")?;
            net.set_rules(f, &[Rule::Isolate])?;
            std::thread::sleep(hold);
            net.heal()?;
            return Ok(format!(" ({f})"));
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
            net.heal()?;
        }
        Fault::Loss { .. } | Fault::Delay { .. } | Fault::Reorder { .. } => {
            let (at, netem) = fault.netem().expect("a packet fault");
            return packet_fault(cluster, net, at, netem, hold, fault.kind(), round);
        }
        Fault::Pause(n) => {
            anyhow::ensure!(cluster.signal(n, libc::SIGSTOP), "node {n} is not running");
            std::thread::sleep(hold);
            cluster.signal(n, libc::SIGCONT);
        }
        Fault::Kill(n) => {
            cluster.kill(n);
            std::thread::sleep(hold);
            cluster.start(n)?;
        }
        Fault::DiskFull(n) => return disk_full(n, cluster, disks, hold, round),
        Fault::SlowDisk { leader: on_leader } => {
            let n = if on_leader {
                leader(cluster).context("finding the leader")?
            } else {
                follower(cluster).context("finding a follower")?
            };
            let pid = cluster
                .node(n)
                .process
                .as_ref()
                .map(|p| p.pid())
                .with_context(|| format!("node {n} is not running"))?;
            let before = sync_totals(cluster);
            disks.throttle(n, pid, SLOW_DISK_IOPS, SLOW_DISK_BPS)?;
            let start_ns = round.now_ns();
            std::thread::sleep(hold);
            let end_ns = round.now_ns();
            let after = sync_totals(cluster);
            disks.unthrottle()?;
            let label = if on_leader {
                SLOW_LEADER
            } else {
                SLOW_FOLLOWER
            };
            round.windows.push(Window {
                label,
                start_ns,
                end_ns,
            });
            // The log's group-commit rounds (write + fdatasync, or one O_DSYNC write) while
            // it held: the slow node's against the others' in the same time.
            let mut slow = SyncTotals::default();
            let mut others = SyncTotals::default();
            for ((id, b), (_, a)) in before.iter().zip(&after) {
                let (Some(b), Some(a)) = (b, a) else { continue };
                let d = SyncTotals {
                    seconds: a.seconds - b.seconds,
                    rounds: a.rounds.saturating_sub(b.rounds),
                };
                if *id == n {
                    slow.add(&d);
                } else {
                    others.add(&d);
                }
            }
            round.syncs.push((label, slow, others));
            return Ok(format!(
                " ({n}: log sync mean {} over {} rounds, the others' {})",
                slow.mean_ms(),
                slow.rounds,
                others.mean_ms()
            ));
        }
    }
    Ok(String::new())
}

/// How long a packet queue worker outlives its fault's hold at most (it then lets every
/// packet go and stops by itself, should the heal never come).
const PACKET_QUEUE_SLACK: Duration = Duration::from_secs(10);

/// A packet fault on the packets `at` names: a worker in the namespace of the node they
/// are at, bound to the queue, then the rules that send it the packets; after `hold` the
/// rules go first (no packet queued after), then the worker, which lets every held packet go.
fn packet_fault(
    cluster: &LocalCluster,
    net: &ChaosNet,
    at: PacketsOf,
    netem: Netem,
    hold: Duration,
    label: &'static str,
    round: &mut Round,
) -> anyhow::Result<String> {
    let (node, peer) = match at {
        PacketsOf::Node(n) => (n, None),
        PacketsOf::LeaderAnd(k) => {
            let l = leader(cluster).context("finding the leader")?;
            let others: Vec<u32> = cluster.ids().into_iter().filter(|&id| id != l).collect();
            anyhow::ensure!(!others.is_empty(), "the leader has no peer");
            (l, Some(others[k as usize % others.len()]))
        }
    };
    let worker = PacketQueue::start(&net.netns_path(node), netem, hold + PACKET_QUEUE_SLACK)?;
    net.queue_packets(node, peer.map(|p| net.addr(p)))?;
    let start_ns = round.now_ns();
    std::thread::sleep(hold);
    round.windows.push(Window {
        label,
        start_ns,
        end_ns: round.now_ns(),
    });
    let unqueued = net.unqueue_packets(node);
    let stats = worker.stop();
    unqueued?;
    let stats = stats?;
    Ok(match peer {
        Some(p) => format!(" ({node}<->{p}: {stats})"),
        None => format!(" ({stats})"),
    })
}

/// Binds a packet queue worker in node 1's namespace and sends it the node's packets, then
/// undoes both: what the packet faults need works on this host.
fn probe_packet_queue(net: &ChaosNet) -> anyhow::Result<()> {
    let worker = PacketQueue::start(
        &net.netns_path(1),
        Netem {
            delay_ms: 0,
            jitter_ms: 0,
            loss_percent: 0,
            reorder: false,
            seed: 0,
        },
        PACKET_QUEUE_SLACK,
    )?;
    let queued = net.queue_packets(1, None);
    let unqueued = net.unqueue_packets(1);
    worker.stop()?;
    queued?;
    unqueued
}

/// `disk-full` at node `n`: fills its filesystem and waits (at least `hold`, at most
/// [`DISK_FULL_WAIT`]) for the node to stop; a node that stopped must have said so naming a
/// file of its directory, and `dump-log --verify`, `info` and `shell --dir` must read the
/// directory on the full disk. Then the filler goes and a stopped node is restarted.
fn disk_full(
    n: u32,
    cluster: &mut LocalCluster,
    disks: &Disks,
    hold: Duration,
    round: &mut Round,
) -> anyhow::Result<String> {
    let fs = disks.node(n);
    let log = cluster.node(n).log.clone();
    let log_start = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let filled = fs.fill()?;
    let (left, _) = fs.free()?;
    let start = Instant::now();
    let mut status = None;
    while start.elapsed() < DISK_FULL_WAIT || start.elapsed() < hold {
        status = exited(cluster, n)?;
        if status.is_some() || start.elapsed() >= DISK_FULL_WAIT {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let note = match status {
        None => format!(
            " ({} MiB filled, {left} bytes left; still running after {:.1} s: nothing it \
             wrote needed a new block)",
            filled >> 20,
            start.elapsed().as_secs_f64()
        ),
        Some(status) => {
            let data = cluster.node(n).data.clone();
            let said = log_since(&log, log_start);
            let line = said
                .lines()
                .find(|l| l.contains("No space left on device"))
                .map(str::to_owned);
            match &line {
                Some(l) if l.contains(&data.display().to_string()) => {}
                _ => round.problems.push(format!(
                    "node {n} stopped ({status}) on a full disk without an error naming a file \
                     of {}:\n{said}",
                    data.display()
                )),
            }
            let exe = cluster.spec.exe.clone();
            for tool in [
                &["dump-log", "--verify", "--summary", "--dir"][..],
                &["info", "--dir"],
                &["shell", "--dir"],
            ] {
                let out = std::process::Command::new(&exe)
                    .args(tool)
                    .arg(&data)
                    .env("RUST_LOG", "warn")
                    .stdin(std::process::Stdio::null())
                    .output()
                    .context("running an offline tool")?;
                if !out.status.success() {
                    round.problems.push(format!(
                        "`corum {} {}` failed on node {n}'s full disk ({}): {}{}",
                        tool.join(" "),
                        data.display(),
                        out.status,
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
            }
            format!(
                " (stopped after {:.1} s: {}; dump-log --verify, info and shell --dir ran on \
                 the full disk)",
                start.elapsed().as_secs_f64(),
                line.as_deref()
                    .map_or("no ENOSPC line".to_owned(), |l| l.trim().to_owned())
            )
        }
    };
    fs.unfill()?;
    if status.is_some() {
        cluster.start(n)?;
    }
    Ok(note)
}

/// What `log` holds from byte `from` on.
fn log_since(log: &Path, from: u64) -> String {
    use std::io::{Read, Seek};
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        if f.seek(std::io::SeekFrom::Start(from)).is_ok() {
            let _ = f.read_to_string(&mut text);
        }
    }
    text
}

/// A running node that is not the leader.
fn follower(cluster: &LocalCluster) -> anyhow::Result<u32> {
    let l = leader(cluster)?;
    cluster
        .ids()
        .into_iter()
        .find(|&id| id != l && cluster.is_running(id))
        .context("no follower runs")
}

/// A node's `corum_log_sync_duration_seconds` totals.
#[derive(Clone, Copy, Debug, Default)]
struct SyncTotals {
    seconds: f64,
    rounds: u64,
}

impl SyncTotals {
    fn add(&mut self, other: &SyncTotals) {
        self.seconds += other.seconds;
        self.rounds += other.rounds;
    }

    fn mean_ms(&self) -> String {
        if self.rounds == 0 {
            return "- ms".to_owned();
        }
        format!("{:.2} ms", self.seconds * 1e3 / self.rounds as f64)
    }
}

/// Each node's log sync totals (`None`: its metrics could not be read).
fn sync_totals(cluster: &LocalCluster) -> Vec<(u32, Option<SyncTotals>)> {
    cluster
        .nodes
        .iter()
        .map(|n| {
            let totals = scrape(n.metrics).ok().and_then(|body| {
                Some(SyncTotals {
                    seconds: metric_value(&body, "corum_log_sync_duration_seconds_sum")?,
                    rounds: metric_value(&body, "corum_log_sync_duration_seconds_count")? as u64,
                })
            });
            (n.id, totals)
        })
        .collect()
}

/// The value of the first sample of `metric` in a Prometheus text body.
fn metric_value(body: &str, metric: &str) -> Option<f64> {
    body.lines().find_map(|l| {
        l.strip_prefix(metric)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The body of `GET /metrics` at `addr`.
fn scrape(addr: SocketAddr) -> anyhow::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: corum\r\n\r\n")?;
    let mut response = String::new();
    s.read_to_string(&mut response)
        .with_context(|| format!("reading the metrics of {addr}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("no HTTP answer from {addr}"))?;
    anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "{addr}: {head}");
    Ok(body.to_owned())
}

/// Whether every node holds the same metadata image: at the leader's high watermark `X`,
/// once every node reports a high watermark of at least `X` (its log below it is then the
/// committed one), each node's image at `X` is read from its directory (read-only, as
/// `corum shell --dir` does: its newest snapshot, then its log up to `X`) and compared.
/// `Ok(Ok(X))`: identical; `Ok(Err(what))`: they differ (twice in a row, at two offsets);
/// `Err`: no comparison within `timeout` (a node behind, or a directory changing under
/// the reader: a newer snapshot past `X`, a segment deleted meanwhile, are tried again).
fn images_agree(cluster: &LocalCluster, timeout: Duration) -> anyhow::Result<Result<u64, String>> {
    let deadline = Instant::now() + timeout;
    let mut last_error = anyhow::anyhow!("no attempt");
    let mut mismatches = 0;
    while Instant::now() < deadline {
        let attempt = (|| -> anyhow::Result<Result<u64, String>> {
            let x = describe(cluster)?["high_watermark"]
                .as_u64()
                .context("no high watermark")?;
            for n in &cluster.nodes {
                loop {
                    let hwm = metric_value(&scrape(n.metrics)?, "corum_raft_high_watermark")
                        .unwrap_or(0.0);
                    if hwm >= x as f64 {
                        break;
                    }
                    anyhow::ensure!(
                        Instant::now() < deadline,
                        "node {} is at high watermark {hwm}, below {x}",
                        n.id
                    );
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            let mut images = Vec::new();
            for n in &cluster.nodes {
                let image = futures_lite::future::block_on(async {
                    let data =
                        open_directory(&n.data, corum_engine::log::LogConfig::default()).await?;
                    image_until(&data, corum_types::LogOffset(x)).await
                })
                .with_context(|| format!("node {}'s image at {x}", n.id))?;
                images.push((n.id, image));
            }
            let (first_id, first) = &images[0];
            let mut differ = Vec::new();
            for (id, image) in &images[1..] {
                if image != first {
                    differ.push(format!(
                        "node {id}'s image at offset {x} differs from node {first_id}'s in: {}",
                        first.differing_parts(image).join(", ")
                    ));
                }
            }
            Ok(if differ.is_empty() {
                Ok(x)
            } else {
                Err(differ.join("; "))
            })
        })();
        match attempt {
            Ok(Ok(x)) => return Ok(Ok(x)),
            Ok(Err(what)) => {
                mismatches += 1;
                if mismatches >= 2 {
                    return Ok(Err(what));
                }
            }
            Err(e) => last_error = e,
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(last_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schedule is a function of the seed, names only existing nodes, never partitions a
    /// node from itself, and draws every kind of fault; `--fault-kinds` restricts it.
    #[test]
    fn the_schedule_is_seeded_and_well_formed() {
        let all = parse_fault_kinds(&[]).unwrap();
        let draw = |seed, kinds: &[usize]| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..600)
                .map(|_| draw_fault(&mut rng, 3, kinds))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(5, &all), draw(5, &all));
        assert_ne!(draw(5, &all), draw(6, &all));
        let faults = draw(5, &all);
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
                Fault::Loss { .. } | Fault::Delay { .. } | Fault::Reorder { .. } => {
                    let (at, n) = f.netem().expect("a packet fault");
                    match at {
                        PacketsOf::Node(node) => assert!((1..=3).contains(&node), "{f}"),
                        PacketsOf::LeaderAnd(k) => assert!(k < 2, "{f}"),
                    }
                    match *f {
                        Fault::Loss { percent, .. } => {
                            assert!((5..=30).contains(&percent));
                            assert_eq!(
                                (n.loss_percent, n.delay_ms, n.reorder),
                                (percent, 0, false)
                            );
                        }
                        Fault::Delay {
                            delay_ms,
                            jitter_ms,
                            ..
                        } => {
                            assert!((20..=200).contains(&delay_ms) && jitter_ms <= delay_ms / 4);
                            assert_eq!(
                                (n.delay_ms, n.jitter_ms, n.reorder),
                                (delay_ms, jitter_ms, false)
                            );
                        }
                        Fault::Reorder { spread_ms, .. } => {
                            assert!((10..=50).contains(&spread_ms));
                            // Held from 0 to the spread, each packet on its own time.
                            assert_eq!(n.delay_ms - n.jitter_ms.min(n.delay_ms), 0);
                            assert_eq!(n.delay_ms + n.jitter_ms, spread_ms);
                            assert!(n.reorder && n.loss_percent == 0);
                        }
                        _ => unreachable!(),
                    }
                }
                Fault::Pause(n) | Fault::Kill(n) | Fault::DiskFull(n) => {
                    assert!((1..=3).contains(&n))
                }
                Fault::IsolateLeader
                | Fault::LeaderFromPeers
                | Fault::IsolateFollower
                | Fault::SlowDisk { .. } => {}
            }
        }
        assert_eq!(kinds.len(), FAULT_KINDS.len());
        let disk = parse_fault_kinds(&["disk-full".into(), "slow-disk".into()]).unwrap();
        let faults = draw(5, &disk);
        assert!(faults
            .iter()
            .all(|f| matches!(f, Fault::DiskFull(_) | Fault::SlowDisk { .. })));
        assert!(faults.contains(&Fault::SlowDisk { leader: true }));
        assert!(faults.contains(&Fault::SlowDisk { leader: false }));
        // Packet faults touch a node's every packet or those between the leader and another
        // node; a node alone has no other.
        let packets =
            parse_fault_kinds(&["delay".into(), "loss".into(), "reorder".into()]).unwrap();
        let faults = draw(5, &packets);
        assert!(faults.iter().all(|f| f.netem().is_some()));
        assert!(faults
            .iter()
            .any(|f| matches!(f.netem(), Some((PacketsOf::LeaderAnd(_), _)))));
        assert!(faults
            .iter()
            .any(|f| matches!(f.netem(), Some((PacketsOf::Node(_), _)))));
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        assert!((0..100).all(|_| matches!(
            draw_fault(&mut rng, 1, &packets).netem(),
            Some((PacketsOf::Node(1), _))
        )));
        let err = parse_fault_kinds(&["flood".into()]).unwrap_err();
        assert!(
            format!("{err}").contains("unknown fault kind \"flood\""),
            "{err}"
        );
    }
}
