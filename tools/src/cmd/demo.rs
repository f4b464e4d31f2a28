//! `corum demo`: a local 3-voter quorum as three `corum run` processes on loopback, the
//! brokers, topics and configs workloads against it, one summary, and everything cleaned up.
//!
//! | step | what |
//! |------|------|
//! | 1 | a directory (`--dir`, which must be missing or empty, or a new one under the system temp dir) |
//! | 2 | free loopback ports, `nodeN.properties`, `corum format` per node ([`cluster::LocalCluster`]) |
//! | 3 | three `corum run` children (this executable), each waited for until its ready line |
//! | 4 | DescribeQuorum until a leader answers |
//! | 5 | `brokers`, `topics`, `configs` workloads in-process ([`crate::cmd::loadgen::run_workload`]), `--duration-secs` each, live progress on stderr |
//! | 6 | the summary on stdout: per workload ops/s, p50/p99, errors, node CPU per operation (from every node's `process_cpu_seconds_total`); leader and epoch; the disk figures, measured in node 1's log directory |
//! | 7 | SIGTERM to every node, wait for each, then the directory is removed unless `--keep` |
//!
//! `--dynamic` ([`dynamic`]: voters added, replaced and removed under load) and `--kafka`
//! ([`kafka`]: Apache Kafka's own brokers on the quorum) are other scenarios on the same
//! cluster, signal handling and clean-up.
//!
//! Children die on every exit path: returning or panicking drops the cluster (each node's
//! guard SIGKILLs it), SIGINT/SIGTERM to the demo are caught by a thread that kills every
//! registered child and removes the directory before exiting, and each child has
//! `PR_SET_PDEATHSIG` in case the demo itself is SIGKILLed.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use corum_client::DescribeQuorumResponse;
use corum_engine::disk::executor_builder;

use crate::cmd::loadgen::stats::format_us;
use crate::cmd::loadgen::{run_workload, LoadConfig, Report, Workload};
use crate::cmd::quorum::describe_leader;

pub mod cluster;
pub mod dynamic;
pub mod kafka;

use cluster::{kill_registered_children, ClusterSpec, LocalCluster};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Seconds of load per workload.
    #[arg(long, default_value_t = 5.0)]
    pub duration_secs: f64,
    /// Keep the directory (configs, node logs, metadata logs) afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Where to put the cluster (must be missing or empty; default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// configs workload: concurrent clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// brokers workload: simulated brokers (default 200); with --kafka: Kafka brokers to run
    /// (default 3, 2 to 9).
    #[arg(long)]
    pub brokers: Option<usize>,
    /// brokers workload: heartbeat interval.
    #[arg(long, default_value_t = 500)]
    pub heartbeat_interval_ms: u64,
    /// topics workload: partitions per topic; with --kafka: the demo topic's partitions.
    #[arg(long, default_value_t = 3)]
    pub partitions: u32,
    /// topics workload: concurrent clients.
    #[arg(long, default_value_t = 8)]
    pub topic_clients: usize,
    /// KIP-853 instead: one `--standalone` controller grows to 5 by auto-join, one disk is
    /// replaced, and the quorum shrinks to 3, under a verified configs load of `--clients`
    /// clients (at least 20 s, or `--duration-secs`).
    #[arg(long, conflicts_with = "kafka")]
    pub dynamic: bool,
    /// Apache Kafka's own brokers on the quorum instead: `--brokers` of them registered and
    /// unfenced, a produce/consume round trip with Kafka's tools, one broker SIGKILLed, fenced
    /// and restarted. Needs Java 17+ and Kafka's jars (it says how to get them when missing).
    #[arg(long)]
    pub kafka: bool,
    /// --kafka: the directory of Kafka's jars (default: $CORUM_KAFKA_JARS, else compat/jars
    /// under the current directory or above the corum executable).
    #[arg(long, value_name = "DIR", requires = "kafka")]
    pub kafka_jars: Option<PathBuf>,
    /// --kafka: messages in the produce/consume round trip.
    #[arg(long, default_value_t = 100_000, requires = "kafka")]
    pub messages: u64,
    /// --kafka: the quorum's broker.session.timeout.ms (a killed broker is fenced after it).
    #[arg(long, default_value_t = 6_000, requires = "kafka")]
    pub broker_session_timeout_ms: u64,
    /// --kafka: leave the killed broker down (no restart step).
    #[arg(long, requires = "kafka")]
    pub no_restart: bool,
}

/// Simulated brokers of the brokers workload when `--brokers` is not given.
const WORKLOAD_BROKERS_DEFAULT: usize = 200;

/// What the signal thread needs to clean up: the directory and whether to keep it.
static CLEANUP: Mutex<Option<(PathBuf, bool)>> = Mutex::new(None);
/// Set by the signal thread before it kills the nodes: the main thread, seeing its nodes
/// die, must not report that as the demo's own failure and exit first.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.duration_secs.is_finite() && args.duration_secs > 0.0 && args.duration_secs <= 3600.0,
        "--duration-secs must be above 0 and at most 3600"
    );
    // Java and Kafka's jars are looked for before anything is created or started: when either
    // is missing the demo only says how to get it.
    let install = if args.kafka {
        kafka::validate(&args)?;
        Some(kafka::install::KafkaInstall::find(
            args.kafka_jars.as_deref(),
        )?)
    } else {
        None
    };
    let dir = prepare_dir(args.dir.as_deref())?;
    *CLEANUP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((dir.clone(), args.keep));
    watch_signals()?;
    let exe = std::env::current_exe().context("locating the corum executable")?;
    let result = if let Some(install) = &install {
        kafka::demo(&args, install, &exe, &dir)
    } else if args.dynamic {
        dynamic::demo(&args, &exe, &dir)
    } else {
        demo(&args, &exe, &dir)
    };
    if INTERRUPTED.load(Ordering::SeqCst) {
        // The signal thread cleans up and exits the process.
        loop {
            std::thread::park();
        }
    }
    if args.kafka && result.is_err() {
        // The brokers' logs say why; the error names the failing one's.
        eprintln!(
            "corum demo: kept {} for its logs: corum nodes nodeN.log, brokers kafka/broker-ID/logs/server.log, Kafka's tools kafka/tools/",
            dir.display()
        );
    } else if args.keep {
        eprintln!("corum demo: kept {}", dir.display());
    } else if let Err(e) = std::fs::remove_dir_all(&dir) {
        eprintln!("corum demo: could not remove {}: {e}", dir.display());
    }
    result
}

/// The demo's directory: `dir` if given (created; refused if it holds anything), else a new
/// one under `$TMPDIR`, or `/var/tmp` when `TMPDIR` is unset: the log is written with
/// O_DIRECT, which tmpfs (often mounted on `/tmp`) refuses, and `/var/tmp` is on disk on
/// every common distribution.
fn prepare_dir(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let base = match std::env::var_os("TMPDIR") {
                Some(t) if !t.is_empty() => PathBuf::from(t),
                _ if Path::new("/var/tmp").is_dir() => PathBuf::from("/var/tmp"),
                _ => std::env::temp_dir(),
            };
            base.join(format!("corum-demo-{}-{nanos}", std::process::id()))
        }
    };
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
        anyhow::ensure!(
            entries.next().is_none(),
            "{} is not empty: give --dir a new or empty directory",
            dir.display()
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Blocks SIGINT and SIGTERM in this thread (and so in every thread spawned after it) and
/// starts a thread that waits for them: it kills every child, removes the directory unless
/// `--keep`, and exits with 128 + the signal number. The mask survives exec, so
/// [`LocalCluster`] clears it in each child before exec: SIGTERM still reaches the nodes.
fn watch_signals() -> anyhow::Result<()> {
    // SAFETY: sigset_t is plain data initialised by sigemptyset/sigaddset before use;
    // pthread_sigmask changes only this thread's mask.
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
        .name("corum-demo-signals".into())
        .spawn(move || {
            let mut signal: libc::c_int = 0;
            // SAFETY: `set` is initialised and blocked in every thread of the process.
            let rc = unsafe { libc::sigwait(&set, &mut signal) };
            if rc != 0 {
                return;
            }
            INTERRUPTED.store(true, Ordering::SeqCst);
            eprintln!("\ncorum demo: interrupted: stopping the nodes");
            let killed = kill_registered_children();
            // Give the kernel a moment to reap what we killed before removing its files.
            std::thread::sleep(Duration::from_millis(100));
            let cleanup = CLEANUP
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            if let Some((dir, keep)) = cleanup {
                if keep {
                    eprintln!("corum demo: kept {}", dir.display());
                } else {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
            eprintln!("corum demo: killed {killed} node(s)");
            std::process::exit(128 + signal);
        })
        .context("starting the signal thread")?;
    Ok(())
}

fn describe(bootstrap: &[SocketAddr], timeout: Duration) -> anyhow::Result<DescribeQuorumResponse> {
    let bootstrap = bootstrap.to_vec();
    executor_builder("corum-demo")
        .spawn(move || async move { describe_leader(&bootstrap, None, timeout).await })
        .map_err(|e| anyhow::anyhow!("starting the glommio executor: {e}"))?
        .join()
        .map_err(|e| anyhow::anyhow!("the describe executor failed: {e}"))?
}

/// The 3-voter quorum of `corum demo` and `--kafka` in `dir`: segments of 64 MiB, and on a
/// small host one shard per node.
fn quorum_spec(exe: &Path, dir: &Path, who: &str) -> ClusterSpec {
    let mut spec = ClusterSpec::new(exe, dir);
    // Segments of 64 MiB rather than the 1 GiB default: three nodes preallocate one each.
    spec.settings.push((
        "metadata.log.segment.bytes".into(),
        (64u64 << 20).to_string(),
    ));
    // Three nodes of two shards each would oversubscribe a small host (every shard is a busy
    // thread): below two cores per node, each node runs one shard (the controller shares it).
    let online = corum_runtime::placement::online_cores().unwrap_or_default();
    if online.len() < 2 * spec.voters as usize {
        let core = online.first().map_or(0, |c| c.0);
        spec.settings.push(("corum.cores".into(), core.to_string()));
        eprintln!(
            "{who}: {} cores for {} nodes: each node runs on one shard (with {} or more cores each gets a worker and a controller shard)",
            online.len(),
            spec.voters,
            2 * spec.voters
        );
    }
    spec
}

fn demo(args: &Args, exe: &Path, dir: &Path) -> anyhow::Result<()> {
    eprintln!("corum demo: formatting 3 controllers in {}", dir.display());
    let spec = quorum_spec(exe, dir, "corum demo");
    let mut cluster = LocalCluster::create(spec)?;
    cluster.start_all()?;
    for n in &cluster.nodes {
        eprintln!(
            "corum demo: node {} running (raft {}, clients {}, kafka {}, log {})",
            n.id,
            n.raft,
            n.client,
            n.kafka,
            n.log.display()
        );
    }
    let kafka: Vec<String> = cluster.nodes.iter().map(|n| n.kafka.to_string()).collect();
    eprintln!(
        "corum demo: see the cluster with a Kafka tool: kcat -L -b {}",
        kafka.join(",")
    );
    let bootstrap: Vec<SocketAddr> = cluster.nodes.iter().map(|n| n.client).collect();
    let first = describe(&bootstrap, Duration::from_secs(20)).context("waiting for a leader")?;
    eprintln!(
        "corum demo: node {} leads (epoch {})",
        first.node_id, first.leader_epoch.0
    );
    let mut reports = Vec::new();
    let mut raw = None;
    for workload in [Workload::Brokers, Workload::Topics, Workload::Configs] {
        eprintln!("corum demo: {} workload", workload.name());
        let config = LoadConfig {
            bootstrap: bootstrap.clone(),
            workload,
            clients: match workload {
                Workload::Configs => args.clients,
                Workload::Topics => args.topic_clients,
                Workload::Brokers | Workload::History => 1,
            },
            connections: 1,
            duration: Duration::from_secs_f64(args.duration_secs),
            protocol: super::loadgen::Protocol::Private,
            kafka_bootstrap: Vec::new(),
            verify: workload == Workload::Configs,
            partitions: args.partitions,
            brokers: args.brokers.unwrap_or(WORKLOAD_BROKERS_DEFAULT),
            heartbeat_interval: Duration::from_millis(args.heartbeat_interval_ms),
            // Each workload registers its own brokers: ids of one run must not collide with
            // the still-live registrations of the run before.
            broker_id_base: match workload {
                Workload::Topics => 100,
                _ => 1_000,
            },
            broker_listeners: Vec::new(),
            // The nodes' own log directory (node 1's: all three share the file system).
            log_dir: Some(cluster.nodes[0].data.clone()),
            metrics: cluster.nodes.iter().map(|n| n.metrics).collect(),
            // Measured once, before the first workload.
            raw_fsync: if raw.is_none() {
                Duration::from_secs(1)
            } else {
                Duration::ZERO
            },
            raw_quorum_writers: 3,
            rtt_probes: 1_000,
            request_timeout: Duration::from_secs(5),
            grace: Duration::from_secs(5),
            progress: true,
            history: None,
            tls: None,
        };
        let mut report = run_workload(config)
            .with_context(|| format!("running the {} workload", workload.name()))?;
        match raw {
            None => raw = Some(report.raw),
            Some(r) => report.set_raw(r),
        }
        reports.push(report);
    }
    let last = describe(&bootstrap, Duration::from_secs(10)).context("describing the quorum")?;
    print!(
        "{}",
        render_summary(&cluster.cluster_id, &first, &last, &reports)
    );
    eprintln!("corum demo: stopping the nodes (SIGTERM)");
    let lost: u64 = reports.iter().filter_map(|r| r.lost).sum();
    stop_cleanly(&mut cluster, lost, "corum demo")
}

/// SIGTERMs every node and waits for each; fails if one did not exit cleanly or if the load
/// lost `lost` acknowledged writes.
fn stop_cleanly(cluster: &mut LocalCluster, lost: u64, who: &str) -> anyhow::Result<()> {
    let mut failures = Vec::new();
    for (id, outcome) in cluster.terminate_all(Duration::from_secs(15)) {
        match outcome {
            Ok(status) if status.success() => {}
            Ok(status) => failures.push(format!("node {id} exited with {status}")),
            Err(e) => failures.push(format!("{e:#}")),
        }
    }
    anyhow::ensure!(lost == 0, "{lost} acknowledged config writes were lost");
    anyhow::ensure!(failures.is_empty(), "{}", failures.join("; "));
    eprintln!("{who}: all nodes stopped cleanly");
    Ok(())
}

/// The summary: the quorum, then one row per workload, then the broker and fsync figures.
pub fn render_summary(
    cluster_id: &str,
    first: &DescribeQuorumResponse,
    last: &DescribeQuorumResponse,
    reports: &[Report],
) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "\ncorum demo summary (cluster {cluster_id})");
    let _ = writeln!(
        w,
        "  quorum: 3 voters; leader node {} at epoch {} (first leader: node {} at epoch {}); high watermark {}",
        last.node_id, last.leader_epoch.0, first.node_id, first.leader_epoch.0, last.high_watermark.0
    );
    let _ = writeln!(
        w,
        "  {:<8} {:>7} {:>9} {:>10} {:>10} {:>10} {:>7} {:>8} {:>12}",
        "workload", "clients", "ops/s", "p50", "p99", "max", "errors", "leaders", "node cpu/op"
    );
    for r in reports {
        let clients = r.broker.as_ref().map_or(r.clients, |b| b.brokers);
        let cpu = r
            .cpu
            .cpu_us_per_op
            .map_or("-".to_owned(), |us| format!("{us:.1} µs"));
        let _ = writeln!(
            w,
            "  {:<8} {:>7} {:>9.0} {:>10} {:>10} {:>10} {:>7} {:>8} {:>12}",
            r.workload,
            clients,
            r.ops_per_sec,
            format_us(r.p50_us),
            format_us(r.p99_us),
            format_us(r.max_us),
            r.errors,
            r.leader_changes,
            cpu
        );
    }
    for r in reports {
        let _ = writeln!(w, "  {}: {}", r.workload, r.cpu.line());
    }
    for r in reports {
        if let Some(b) = &r.broker {
            let _ = writeln!(
                w,
                "  brokers: {} of {} unfenced; registration to unfenced p50 {}, p99 {}; heartbeat every {} ms",
                b.unfenced,
                b.brokers,
                format_us(b.registration_to_unfenced_p50_us),
                format_us(b.registration_to_unfenced_p99_us),
                b.heartbeat_interval_ms
            );
        }
        if let Some(p) = r.partitions {
            let _ = writeln!(w, "  topics: {} created with {p} partitions each", r.ops);
        }
        if let (Some(a), Some(l)) = (r.acknowledged, r.lost) {
            let _ = writeln!(
                w,
                "  configs: {a} acknowledged writes verified by reading back, {l} lost"
            );
        }
    }
    if let Some(r) = reports.iter().find(|r| r.workload == "configs") {
        if r.raw.raw_fsync_p50_us > 0 {
            let _ = writeln!(
                w,
                "  raw fdatasync p50 {} (O_DSYNC write {}): with {} clients a config write is acknowledged in {:.2} x that (p50)",
                format_us(r.raw.raw_fsync_p50_us),
                format_us(r.raw.raw_dsync_write_p50_us),
                r.clients,
                r.p50_over_raw_fsync_p50
            );
        }
        if let Some(line) = r.raw.quorum_line(r.p50_over_raw_quorum_write_p50) {
            let _ = writeln!(w, "  {line}");
        }
        if let Some(line) = r.floor_line() {
            let _ = writeln!(w, "  {line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::loadgen::cpu::CpuFigures;
    use crate::cmd::loadgen::stats::BrokerFigures;
    use crate::cmd::loadgen::RawDisk;
    use corum_types::{Epoch, LogOffset, NodeId, Uuid};

    fn quorum(leader: u32, epoch: u64) -> DescribeQuorumResponse {
        DescribeQuorumResponse {
            cluster_id: Uuid([1; 16]),
            node_id: NodeId(leader),
            leader_id: Some(NodeId(leader)),
            leader_epoch: Epoch(epoch),
            high_watermark: LogOffset(999),
            voters: vec![],
            observers: vec![],
        }
    }

    /// The summary names the leader and epoch and has one row per workload with its rate,
    /// latencies and errors, plus the broker, topic, verify and fsync lines.
    #[test]
    fn summary_has_every_figure() {
        let reports = vec![
            Report {
                workload: "brokers",
                ops_per_sec: 400.0,
                p50_us: 300,
                p99_us: 900,
                broker: Some(BrokerFigures {
                    brokers: 200,
                    unfenced: 200,
                    registration_to_unfenced_p50_us: 20_000,
                    ..BrokerFigures::default()
                }),
                ..Report::default()
            },
            Report {
                workload: "topics",
                ops: 50,
                partitions: Some(3),
                ..Report::default()
            },
            Report {
                workload: "configs",
                clients: 64,
                ops_per_sec: 12_345.0,
                p50_us: 2_000,
                p99_us: 5_000,
                errors: 2,
                raw: RawDisk {
                    raw_fsync_p50_us: 1_000,
                    raw_dsync_write_p50_us: 700,
                    raw_quorum_writers: 3,
                    raw_quorum_write_p50_us: 1_500,
                },
                p50_over_raw_fsync_p50: 2.0,
                p50_over_raw_quorum_write_p50: 1.33,
                rpc_round_trip_p50_us: 100,
                commit_floor_us: 1_700,
                p50_over_commit_floor: 1.18,
                cpu: CpuFigures {
                    cpu_us_per_op: Some(18.5),
                    node_cpu_cores: Some(0.9),
                    loadgen_cpu_us_per_op: 3.0,
                    loadgen_cpu_cores: 0.2,
                    ..CpuFigures::default()
                },
                acknowledged: Some(10),
                lost: Some(0),
                ..Report::default()
            },
        ];
        let s = render_summary("abc", &quorum(2, 3), &quorum(2, 3), &reports);
        assert!(s.contains("leader node 2 at epoch 3"), "{s}");
        let row = s
            .lines()
            .find(|l| l.trim_start().starts_with("configs "))
            .unwrap();
        for cell in ["64", "12345", "2.00 ms", "5.00 ms"] {
            assert!(row.contains(cell), "{cell} missing in {row:?}");
        }
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells[cells.len() - 4..],
            ["2", "0", "18.5", "µs"],
            "errors, leader changes, node CPU per op: {row}"
        );
        let brokers_row = s
            .lines()
            .find(|l| l.trim_start().starts_with("brokers "))
            .unwrap();
        assert!(
            brokers_row.ends_with(" -"),
            "no CPU figure: {brokers_row:?}"
        );
        assert!(
            s.contains("configs: CPU per acknowledged op: nodes 18.5 µs"),
            "{s}"
        );
        assert!(s.contains("200 of 200 unfenced"), "{s}");
        assert!(s.contains("50 created with 3 partitions"), "{s}");
        assert!(s.contains("10 acknowledged writes verified"), "{s}");
        assert!(s.contains("(O_DSYNC write 700 µs)"), "{s}");
        assert!(
            s.contains("a majority done in 1.50 ms (p50 latency = 1.33 x that)"),
            "{s}"
        );
        assert!(
            s.contains("with 64 clients a config write is acknowledged in 2.00 x that"),
            "{s}"
        );
        assert!(
            s.contains(
                "(100 µs each) + the quorum write (1.50 ms) = 1.70 ms (p50 latency = 1.18 x that)"
            ),
            "{s}"
        );
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        use clap::Parser as _;
        Cli::try_parse_from(std::iter::once("demo").chain(args.iter().copied())).map(|c| c.args)
    }

    /// `--kafka`'s own flags need `--kafka`, `--dynamic` excludes it, and `--brokers` is left
    /// unset for each mode to pick its default.
    #[test]
    fn kafka_flags() {
        let a = parse(&[]).unwrap();
        assert!(!a.kafka && a.brokers.is_none());
        assert_eq!((a.messages, a.broker_session_timeout_ms), (100_000, 6_000));
        let a = parse(&[
            "--kafka",
            "--brokers",
            "2",
            "--messages",
            "10",
            "--no-restart",
        ])
        .unwrap();
        assert!(a.kafka && a.no_restart);
        assert_eq!((a.brokers, a.messages), (Some(2), 10));
        let a = parse(&["--kafka", "--kafka-jars", "/k/libs"]).unwrap();
        assert_eq!(a.kafka_jars.as_deref(), Some(Path::new("/k/libs")));
        for alone in [
            &["--messages", "10"][..],
            &["--kafka-jars", "/k"],
            &["--no-restart"],
            &["--broker-session-timeout-ms", "9000"],
            &["--kafka", "--dynamic"],
        ] {
            assert!(parse(alone).is_err(), "{alone:?} parsed");
        }
    }

    /// A given directory must be new or empty; a missing one is created.
    #[test]
    fn directory_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let fresh = tmp.path().join("new");
        assert_eq!(prepare_dir(Some(&fresh)).unwrap(), fresh);
        assert!(fresh.is_dir());
        assert_eq!(prepare_dir(Some(&fresh)).unwrap(), fresh, "empty is fine");
        std::fs::write(fresh.join("x"), "x").unwrap();
        let e = prepare_dir(Some(&fresh)).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
    }
}
