//! `corum loadgen`: drives a running quorum through its client listeners and measures it.
//!
//! | workload  | what each client does                                                  | latency recorded |
//! |-----------|------------------------------------------------------------------------|------------------|
//! | `configs` | one IncrementalAlterConfigs of one key of its own broker resource per request (one record each), pipelined with the other clients over the shared connection(s) | request to acknowledgement (= commit) |
//! | `brokers` | `--brokers N` simulated brokers (one shared observer [`MetadataFollower`](corum_client::MetadataFollower)) register, wait to be unfenced, then heartbeat every `--heartbeat-interval-ms` | heartbeat round trip; registration to unfenced separately |
//! | `topics`  | CreateTopics of one new topic with `--partitions P` per request (a few brokers are registered and kept unfenced first) | request to acknowledgement |
//! | `history` | a seeded mix of config sets, deletes and reads on `--keys` keys (and topic creates, deletes and describes of `--topics` names), each written to `--history FILE` with its times and outcome for `corum check-history` ([`history`]) | request to answer |
//!
//! The `--clients` logical clients share `--connections` [`ControllerClient`]s (each one
//! pipelined connection that follows the leader).
//!
//! # What the latency is read against
//!
//! - **The disk** (`--log-dir`, a controller's `metadata.log.dir`): before the load, the raw
//!   4 KiB write + fdatasync p50, the O_DSYNC write p50 and the quorum write (that many O_DSYNC
//!   writes at once until a majority completed) are measured in a fresh subdirectory of it,
//!   with the same code as `corum bench disk` ([`corum_engine::devbench`]): the file system the
//!   nodes' logs are on, not a temporary directory on another one. Without `--log-dir` the disk
//!   is not measured.
//! - **One hop**: with the clients connected, `--rtt-probes` DescribeQuorum round trips at the
//!   active controller. The RPC server answers DescribeQuorum itself from the Raft driver's
//!   status, on the shard that owns the connection, without crossing to the controller shard,
//!   so a probe pays what a write's request and answer pay on the wire and no more.
//! - **The commit floor** (`commit_floor_us`): two such hops (client to leader, leader to the
//!   followers) plus the quorum write, what a commit cannot beat on this host.
//!
//! # CPU (`--metrics`)
//!
//! With `--metrics HOST:PORT,...` (every node's `corum.metrics.listener`), the nodes'
//! `process_cpu_seconds_total` is read before and after the measured phase and the report
//! gives `cpu_us_per_op`, node CPU per acknowledged operation summed over the nodes; the load
//! generator's own (`loadgen_cpu_us_per_op`) is always given ([`cpu`]).
//!
//! # Bounds
//!
//! Clients start no request after `--duration`; requests in flight then get `--grace-ms` to
//! finish, after which the run stops waiting for them (they count neither as acknowledged nor
//! as errors). The `--verify` read-back is bounded by the same grace period.
//!
//! # Verification (`--verify`, `configs` only)
//!
//! Client `i` writes `log.retention.ms` of broker resource `2000000000 + i`; the value encodes
//! this run's nonce and the client's sequence number, so every write is unique and one
//! client's writes are ordered (it has one request in flight). At the end every resource is
//! read back (DescribeConfigs, batched): an acknowledged write is *lost* if the value read is
//! older than it (a write that failed with an unknown outcome may legitimately show up later
//! in the order). Any loss makes the command fail.

use std::cell::Cell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context;
use corum_client::{ClientConfig, ControllerClient};
use corum_engine::devbench::{measure_device, DeviceBenchConfig};
use corum_engine::disk::executor_builder;

use crate::cmd::quorum::{parse_bootstrap, Bootstrap};

pub mod abuse;
mod brokers;
mod configs;
pub mod cpu;
mod history;
mod kafka;
pub mod stats;
mod topics;

pub use stats::{RawDisk, Report};

/// Which protocol the topics workload's requests use.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// corum's own (the client listener).
    #[default]
    Private,
    /// Kafka's wire protocol (CreateTopics v7), to the active controller's Kafka listener.
    Kafka,
}

/// Which workload to run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Single-key config writes (the write-path benchmark).
    Configs,
    /// Simulated brokers registering and heartbeating.
    Brokers,
    /// Topic creations.
    Topics,
    /// A recorded mix of writes and reads for the history checker (`--history FILE`).
    History,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Configs => "configs",
            Workload::Brokers => "brokers",
            Workload::Topics => "topics",
            Workload::History => "history",
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Client endpoints of the controllers (HOST:PORT,...).
    #[arg(long, value_name = "HOST:PORT,...", value_parser = parse_bootstrap)]
    pub bootstrap: Bootstrap,
    #[arg(long, value_enum)]
    pub workload: Workload,
    /// Concurrent logical clients (each with one request in flight).
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Connections the clients share (each a leader-following, pipelined client; the
    /// simulated brokers share them too, so `brokers` needs `--clients` at least as large).
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// topics: send the creations over corum's protocol or Kafka's (then `--kafka-bootstrap`
    /// names the nodes' Kafka listeners, and the clients share `--connections` connections
    /// to the active controller's, pipelining their requests).
    #[arg(long, value_enum, default_value_t = Protocol::Private)]
    pub protocol: Protocol,
    /// The nodes' Kafka listeners (HOST:PORT,...), for `--protocol kafka`.
    #[arg(long, value_name = "HOST:PORT,...", value_parser = parse_bootstrap)]
    pub kafka_bootstrap: Option<Bootstrap>,
    /// configs: read every acknowledged write back at the end; fail if any is lost.
    #[arg(long)]
    pub verify: bool,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// topics: partitions per created topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// brokers: simulated brokers (topics: brokers registered first, at least 3).
    #[arg(long, default_value_t = 100)]
    pub brokers: usize,
    /// brokers: heartbeat interval of each simulated broker.
    #[arg(long, default_value_t = 2_000)]
    pub heartbeat_interval_ms: u64,
    /// Simulated broker ids are BASE, BASE+1, ...; the shared observer is BASE-1.
    #[arg(long, default_value_t = 1_000)]
    pub broker_id_base: u32,
    /// Simulated broker j registers a `KAFKA` listener at the j-th of these (cycled), e.g. the
    /// nodes' Kafka listeners, so that Kafka's clients can reach the brokers they are shown;
    /// without it each registers a made-up `PLAINTEXT` listener.
    #[arg(long, value_name = "HOST:PORT,...", value_parser = parse_bootstrap)]
    pub broker_listeners: Option<Bootstrap>,
    /// A controller's `metadata.log.dir` (or any directory on the file system holding the
    /// voters' logs): the raw disk figures and the commit floor are measured in a subdirectory
    /// of it, removed afterwards. Without it the disk is not measured.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Every node's metrics endpoint (`corum.metrics.listener`): their CPU time is read before
    /// and after the measured phase, for `cpu_us_per_op`.
    #[arg(long, value_name = "HOST:PORT,...", value_parser = parse_bootstrap)]
    pub metrics: Option<Bootstrap>,
    /// Seconds of raw fdatasync sampling before the load (0 skips the measurement).
    #[arg(long, default_value_t = 1.0)]
    pub raw_fsync_seconds: f64,
    /// Files of the quorum write figure: that many O_DSYNC writes at once, until a majority
    /// completed (set it to the voter count; 0 skips it).
    #[arg(long, default_value_t = 3)]
    pub raw_quorum_writers: usize,
    /// DescribeQuorum round trips to the active controller before the load (at most one
    /// second of them; 0 skips): the `rpc_round_trip_p50_us` of the commit floor.
    #[arg(long, default_value_t = 1_000)]
    pub rtt_probes: usize,
    /// Per-attempt request timeout; a call retries leader changes for as long.
    #[arg(long, default_value_t = 5_000)]
    pub request_timeout_ms: u64,
    /// How long requests in flight at the end (and the verify read-back) may still take.
    #[arg(long, default_value_t = 10_000)]
    pub grace_ms: u64,
    /// No live progress line on stderr.
    #[arg(long)]
    pub no_progress: bool,
    /// history: the file the operations are written to (JSON lines, for `corum check-history`).
    #[arg(long, value_name = "FILE.jsonl")]
    pub history: Option<PathBuf>,
    /// history: config keys (registers) the clients share.
    #[arg(long, default_value_t = 4)]
    pub keys: usize,
    /// history: topic names the clients create, delete and describe (0: config operations only).
    #[arg(long, default_value_t = 2)]
    pub topics: usize,
    /// history: the seed of the clients' operations.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A Kafka client properties file: `security.protocol=SSL` and the `ssl.*` keys, for
    /// client listeners mapped to SSL (the private protocol's connections then run TLS).
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<PathBuf>,
    /// Bad clients beside the workload ([`abuse`]), from when its clients are connected to
    /// the end: slow consumers per address of `--slow-at` and `--slow-kafka-at`: connections that
    /// pipeline requests without ever reading an answer (reconnecting when closed).
    #[arg(long, default_value_t = 0)]
    pub slow_consumers: usize,
    /// Client listeners the slow consumers send DescribeQuorum to (default: the first of
    /// `--bootstrap`).
    #[arg(long, value_name = "HOST:PORT,...", value_parser = parse_bootstrap)]
    pub slow_at: Option<Bootstrap>,
    /// Kafka listeners the slow consumers send ApiVersions to.
    #[arg(long, value_name = "HOST:PORT,...", value_parser = parse_bootstrap)]
    pub slow_kafka_at: Option<Bootstrap>,
}

impl Args {
    /// The slow consumers these arguments ask for ([`abuse`]).
    pub fn abuse(&self) -> abuse::AbuseConfig {
        abuse::AbuseConfig {
            slow_consumers: self.slow_consumers,
            slow_at: self
                .slow_at
                .as_ref()
                .map_or_else(|| self.bootstrap.0[..1].to_vec(), |b| b.0.clone()),
            slow_kafka_at: self
                .slow_kafka_at
                .as_ref()
                .map(|b| b.0.clone())
                .unwrap_or_default(),
        }
    }
}

/// The `history` workload's settings.
#[derive(Clone, Debug)]
pub struct HistoryConfig {
    pub file: PathBuf,
    pub keys: usize,
    pub topics: usize,
    pub seed: u64,
    /// Where this run's keys start among the workload's broker resources (below 100,000
    /// times `HISTORY_NAMES_MAX`); `None`: drawn from the run's nonce. Runs on one quorum
    /// need keys of their own: the checker takes every key to start unset.
    pub key_base: Option<u64>,
    /// The zero of the history's times (`None`: the workload's start), so that a caller can
    /// place its own events (`corum chaos`'s faults) on the same clock.
    pub origin: Option<Instant>,
}

/// Most `--keys` and `--topics` of the history workload: few keys make clients meet, and a
/// key's history must stay small enough to check.
pub const HISTORY_NAMES_MAX: usize = 1_000;

/// One run's settings (the arguments, checked; `corum demo` builds them directly).
#[derive(Clone, Debug)]
pub struct LoadConfig {
    pub bootstrap: Vec<SocketAddr>,
    pub workload: Workload,
    pub clients: usize,
    pub connections: usize,
    pub duration: Duration,
    pub protocol: Protocol,
    /// The nodes' Kafka listeners (`--protocol kafka`).
    pub kafka_bootstrap: Vec<SocketAddr>,
    pub verify: bool,
    pub partitions: u32,
    pub brokers: usize,
    pub heartbeat_interval: Duration,
    pub broker_id_base: u32,
    /// Where simulated brokers say they listen (empty: made-up endpoints).
    pub broker_listeners: Vec<SocketAddr>,
    pub log_dir: Option<PathBuf>,
    /// Metrics endpoints of the nodes (empty: node CPU not measured).
    pub metrics: Vec<SocketAddr>,
    pub raw_fsync: Duration,
    pub raw_quorum_writers: usize,
    pub rtt_probes: usize,
    pub request_timeout: Duration,
    pub grace: Duration,
    pub progress: bool,
    /// The history workload's settings (`None` for the others).
    pub history: Option<HistoryConfig>,
    /// TLS to the client listeners (`--command-config`).
    pub tls: Option<corum_runtime::tls::TlsSettings>,
}

/// Largest `--clients` (each client owns a broker resource id above 2e9).
pub const CLIENTS_MAX: usize = 1_000_000;

impl LoadConfig {
    /// Checks the arguments and turns them into a config.
    pub fn from_args(a: &Args) -> anyhow::Result<LoadConfig> {
        let secs = |what: &str, s: f64| -> anyhow::Result<Duration> {
            anyhow::ensure!(
                (0.0..=86_400.0).contains(&s),
                "{what} must be between 0 and 86400 seconds, not {s}"
            );
            Ok(Duration::from_secs_f64(s))
        };
        let config = LoadConfig {
            bootstrap: a.bootstrap.0.clone(),
            workload: a.workload,
            clients: a.clients,
            connections: a.connections,
            duration: secs("--duration", a.duration)?,
            protocol: a.protocol,
            kafka_bootstrap: a
                .kafka_bootstrap
                .as_ref()
                .map(|b| b.0.clone())
                .unwrap_or_default(),
            verify: a.verify,
            partitions: a.partitions,
            brokers: a.brokers,
            heartbeat_interval: Duration::from_millis(a.heartbeat_interval_ms),
            broker_id_base: a.broker_id_base,
            broker_listeners: a
                .broker_listeners
                .as_ref()
                .map(|b| b.0.clone())
                .unwrap_or_default(),
            log_dir: a.log_dir.clone(),
            metrics: a.metrics.as_ref().map(|m| m.0.clone()).unwrap_or_default(),
            raw_fsync: secs("--raw-fsync-seconds", a.raw_fsync_seconds)?,
            raw_quorum_writers: a.raw_quorum_writers,
            rtt_probes: a.rtt_probes,
            request_timeout: Duration::from_millis(a.request_timeout_ms),
            grace: Duration::from_millis(a.grace_ms),
            progress: !a.no_progress,
            history: a.history.clone().map(|file| HistoryConfig {
                file,
                keys: a.keys,
                topics: a.topics,
                seed: a.seed,
                key_base: None,
                origin: None,
            }),
            tls: crate::cmd::command_config::load_opt(a.command_config.as_deref())?,
        };
        config.validate()?;
        Ok(config)
    }

    /// The relations between settings.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.bootstrap.is_empty(), "--bootstrap names no server");
        anyhow::ensure!(
            (1..=CLIENTS_MAX).contains(&self.clients),
            "--clients must be between 1 and {CLIENTS_MAX}"
        );
        anyhow::ensure!(
            (1..=self.clients).contains(&self.connections),
            "--connections must be between 1 and --clients ({})",
            self.clients
        );
        anyhow::ensure!(
            !self.verify || self.workload == Workload::Configs,
            "--verify applies to the configs workload only"
        );
        anyhow::ensure!(
            self.protocol == Protocol::Private || self.workload == Workload::Topics,
            "--protocol kafka applies to the topics workload only"
        );
        anyhow::ensure!(
            self.protocol == Protocol::Private || !self.kafka_bootstrap.is_empty(),
            "--protocol kafka needs --kafka-bootstrap (the nodes' Kafka listeners)"
        );
        anyhow::ensure!(
            self.partitions >= 1 && i32::try_from(self.partitions).is_ok(),
            "--partitions must be at least 1"
        );
        anyhow::ensure!(self.brokers >= 1, "--brokers must be at least 1");
        anyhow::ensure!(
            self.raw_quorum_writers <= 15,
            "--raw-quorum-writers must be at most 15 (a voter set larger than that is not a \
             quorum one disk should hold)"
        );
        anyhow::ensure!(
            !self.heartbeat_interval.is_zero(),
            "--heartbeat-interval-ms must be at least 1"
        );
        anyhow::ensure!(
            self.broker_id_base >= 1
                && u64::from(self.broker_id_base) + (self.brokers as u64) < u64::from(u32::MAX),
            "--broker-id-base must be at least 1 and leave room for --brokers ids"
        );
        anyhow::ensure!(
            !self.request_timeout.is_zero(),
            "--request-timeout-ms must be at least 1"
        );
        anyhow::ensure!(
            (self.workload == Workload::History) == self.history.is_some(),
            "--history FILE goes with the history workload, and it needs one"
        );
        if let Some(h) = &self.history {
            anyhow::ensure!(
                (1..=HISTORY_NAMES_MAX).contains(&h.keys),
                "--keys must be between 1 and {HISTORY_NAMES_MAX}"
            );
            anyhow::ensure!(
                h.topics <= HISTORY_NAMES_MAX,
                "--topics must be at most {HISTORY_NAMES_MAX}"
            );
        }
        Ok(())
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = LoadConfig::from_args(&args)?;
    let report = run_workload_with(config, args.abuse())?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.render());
    }
    if let Some(lost) = report.lost.filter(|&l| l > 0) {
        anyhow::bail!("{lost} acknowledged writes were lost");
    }
    Ok(())
}

/// Runs one workload on a glommio executor of its own thread and returns its report.
pub fn run_workload(config: LoadConfig) -> anyhow::Result<Report> {
    run_workload_with(config, abuse::AbuseConfig::default())
}

/// [`run_workload`] with slow consumers beside it ([`abuse`]), from when the workload's clients
/// are connected to the end of the run.
pub fn run_workload_with(config: LoadConfig, abuse: abuse::AbuseConfig) -> anyhow::Result<Report> {
    config.validate()?;
    executor_builder("corum-loadgen")
        .spawn(move || async move { run_on_executor(config, abuse).await })
        .map_err(|e| anyhow::anyhow!("starting the glommio executor: {e}"))?
        .join()
        .map_err(|e| anyhow::anyhow!("the load generator's executor failed: {e}"))?
}

/// What every workload gets.
pub(crate) struct Ctx {
    pub config: LoadConfig,
    /// Shared by the logical clients, client `i` uses `clients[i % len]`.
    pub clients: Vec<ControllerClient>,
    pub recorder: Rc<stats::Recorder>,
    /// No request starts after this.
    pub end: Instant,
    /// Nothing is waited for after this.
    pub hard_end: Instant,
    /// Distinguishes this run's values and names from earlier runs'.
    pub nonce: u64,
    /// Set while the measured phase runs (for the progress line).
    pub measuring: Rc<Cell<bool>>,
    /// The clients' leader changes before the run (finding the first leader).
    pub leader_changes_before: u64,
    /// CPU figures when the measured phase started and ended ([`cpu`]).
    pub cpu_before: cpu::Sample,
    pub cpu_after: cpu::Sample,
}

impl Ctx {
    pub fn client(&self, i: usize) -> &ControllerClient {
        &self.clients[i % self.clients.len()]
    }

    /// Leader changes the clients saw since the run started.
    pub fn leader_changes(&self) -> u64 {
        let total: u64 = self
            .clients
            .iter()
            .map(ControllerClient::leader_changes)
            .sum();
        total - self.leader_changes_before
    }
}

/// A nonce from the clock and the pid: different for every run, within `1..9_000_000` (it
/// is the high part of a Long config value).
fn run_nonce() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mixed = nanos ^ (u64::from(std::process::id()) << 32);
    // A multiplicative hash spreads close timestamps apart.
    1 + mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 8_999_999
}

/// The raw figures of the disk under `--log-dir` (0s when not measured).
async fn raw_disk(config: &LoadConfig) -> anyhow::Result<RawDisk> {
    let Some(log_dir) = config
        .log_dir
        .as_ref()
        .filter(|_| !config.raw_fsync.is_zero())
    else {
        return Ok(RawDisk::default());
    };
    anyhow::ensure!(
        log_dir.is_dir(),
        "--log-dir {} is not a directory (give a controller's metadata.log.dir)",
        log_dir.display()
    );
    // A directory of our own beside the node's files, on the same file system.
    let dir = log_dir.join(format!("corum-loadgen-{}", std::process::id()));
    let cfg = DeviceBenchConfig {
        fsync_duration: config.raw_fsync,
        // Only the fsync figure is used: keep the bandwidth pass short.
        bandwidth_bytes: 4 << 20,
        quorum_writers: config.raw_quorum_writers,
        quorum_duration: config.raw_fsync / 2,
        ..DeviceBenchConfig::default()
    };
    let result = measure_device(&dir, &cfg).await;
    let _ = std::fs::remove_dir_all(&dir);
    let d = result.with_context(|| format!("measuring the disk under {}", dir.display()))?;
    Ok(RawDisk {
        raw_fsync_p50_us: d.fsync_p50_us,
        raw_dsync_write_p50_us: d.dsync_write_p50_us,
        raw_quorum_writers: d.quorum_writers,
        raw_quorum_write_p50_us: d.quorum_write_p50_us,
    })
}

/// The p50 of up to `probes` DescribeQuorum round trips to the active controller (at most
/// one second of them; 0 when `probes` is 0): the RPC server answers it on the shard that
/// owns the connection, from the Raft driver's status, without crossing to the controller
/// shard (the path of a write's request and answer, without the write). Only answers the
/// leader gave count: `client` was moved to the leader by a DescribeCluster, and after a
/// leader change it is moved again.
async fn rpc_round_trip(client: &ControllerClient, probes: usize) -> anyhow::Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(1);
    let rec = stats::Recorder::default();
    while (rec.ops() as usize) < probes && Instant::now() < deadline {
        let t = Instant::now();
        let q = client
            .describe_quorum()
            .await
            .context("measuring the round trip to the active controller")?;
        let took = t.elapsed();
        if q.leader_id == Some(q.node_id) {
            rec.ok(took);
        } else {
            match client.describe_cluster().await {
                // A history client moved on without retrying: the next probe asks there.
                Ok(_) | Err(corum_client::ClientError::OutcomeUnknown { .. }) => {}
                Err(e) => {
                    return Err(anyhow::Error::new(e).context("finding the active controller again"))
                }
            }
        }
    }
    Ok(rec.percentiles().p50_us)
}

async fn run_on_executor(
    config: LoadConfig,
    abuse_config: abuse::AbuseConfig,
) -> anyhow::Result<Report> {
    let raw = raw_disk(&config).await?;
    let client_config = ClientConfig {
        request_timeout: config.request_timeout,
        retry_deadline: config.request_timeout,
        tls: config.tls.clone(),
        ..ClientConfig::new(config.bootstrap.clone())
    };
    let mut clients = Vec::with_capacity(config.connections);
    let mut leader_changes_before = 0;
    for _ in 0..config.connections {
        let client = ControllerClient::connect(client_config.clone())
            .await
            .context("connecting to the quorum")?;
        // One request that only the active controller answers, so that finding the leader
        // at the start is not counted as a leader change of the run.
        // (A history client does not retry a NotController answer itself, a quorum that
        // just started may time out its first request, and one electing a leader after a
        // fault may outlast a call's own retries: ask again, within the grace.)
        let deadline = Instant::now() + config.grace.max(Duration::from_secs(10));
        loop {
            match client.describe_cluster().await {
                Ok(_) => break,
                Err(
                    corum_client::ClientError::OutcomeUnknown { .. }
                    | corum_client::ClientError::LeaderNotFound { .. }
                    | corum_client::ClientError::Rpc(corum_client::RpcError::Timeout { .. }),
                ) if Instant::now() < deadline => {
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => {
                    return Err(anyhow::Error::new(e).context("finding the active controller"))
                }
            }
        }
        leader_changes_before += client.leader_changes();
        clients.push(client);
    }
    let rpc_round_trip = rpc_round_trip(&clients[0], config.rtt_probes).await?;
    // A wrong --metrics endpoint fails here, before any load.
    let probe = cpu::sample(&config.metrics).await;
    if let Some(e) = probe.nodes_error {
        anyhow::bail!("--metrics: {e}");
    }
    // The bad clients start once the workload's clients hold their connections.
    let abuse = (!abuse_config.is_empty()).then(|| abuse::Abuse::start(&abuse_config));
    let now = Instant::now();
    let mut ctx = Ctx {
        leader_changes_before,
        end: now + config.duration,
        hard_end: now + config.duration + config.grace,
        config,
        clients,
        recorder: Rc::new(stats::Recorder::default()),
        nonce: run_nonce(),
        measuring: Rc::new(Cell::new(false)),
        cpu_before: cpu::Sample::default(),
        cpu_after: cpu::Sample::default(),
    };
    let mut report = Report {
        workload: ctx.config.workload.name(),
        clients: ctx.config.clients,
        connections: ctx.config.connections,
        ..Report::default()
    };
    // Each workload may prepare (register brokers) before the measured phase; it resets the
    // clock with `start_measuring`.
    let progress = ctx.config.progress.then(|| {
        let rec = ctx.recorder.clone();
        let clients = ctx.clients.clone();
        let before = ctx.leader_changes_before;
        let measuring = ctx.measuring.clone();
        let p = Rc::new(stats::Progress::new(ctx.config.workload.name()));
        let printer = p.clone();
        let task = glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(Duration::from_secs(1)).await;
                let total: u64 = clients.iter().map(ControllerClient::leader_changes).sum();
                let changes = total - before;
                let note = if measuring.get() { "" } else { "  (preparing)" };
                printer.print(&rec, changes, note);
            }
        });
        (p, task)
    });
    let outcome = match ctx.config.workload {
        Workload::Configs => configs::run(&mut ctx, &mut report).await,
        Workload::Brokers => brokers::run(&mut ctx, &mut report).await,
        Workload::Topics => topics::run(&mut ctx, &mut report).await,
        Workload::History => history::run(&mut ctx, &mut report).await,
    };
    if let Some((p, task)) = progress {
        drop(task);
        p.finish();
    }
    report.abuse = abuse.map(abuse::Abuse::stop);
    let elapsed = outcome?;
    report.measured(&ctx.recorder, elapsed, raw);
    report.set_rpc_round_trip(rpc_round_trip);
    report.leader_changes = ctx.leader_changes();
    report.log_dir = ctx.config.log_dir.as_ref().map(|d| d.display().to_string());
    report.cpu = cpu::CpuFigures::between(&ctx.cpu_before, &ctx.cpu_after, report.ops, elapsed);
    Ok(report)
}

/// Starts the measured phase (after a workload's preparation): reads the CPU figures, then
/// restarts the clock of `ctx`. Fails when a `--metrics` endpoint cannot be read.
pub(crate) async fn start_measuring(ctx: &mut Ctx) -> anyhow::Result<Instant> {
    ctx.cpu_before = cpu::sample(&ctx.config.metrics).await;
    if let Some(e) = &ctx.cpu_before.nodes_error {
        anyhow::bail!("--metrics at the start of the measured phase: {e}");
    }
    let now = Instant::now();
    ctx.end = now + ctx.config.duration;
    ctx.hard_end = ctx.end + ctx.config.grace;
    ctx.measuring.set(true);
    Ok(now)
}

/// Ends the measured phase that started at `start` (the last request answered or given up):
/// returns its length and reads the CPU figures. A node that cannot be read now leaves the
/// node CPU figures out (with the reason) rather than failing the run.
pub(crate) async fn stop_measuring(ctx: &mut Ctx, start: Instant) -> Duration {
    let elapsed = start.elapsed();
    ctx.cpu_after = cpu::sample(&ctx.config.metrics).await;
    elapsed
}

/// Runs `count` client loops (`make(i)` builds loop `i`) until they finish or `hard_end`
/// passes; loops still running then are cancelled. Returns how many were cancelled.
pub(crate) async fn run_clients<F, Fut>(count: usize, hard_end: Instant, mut make: F) -> u64
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (done_tx, done_rx) = glommio::channels::local_channel::new_unbounded::<()>();
    let done_tx = Rc::new(done_tx);
    // Dropping a glommio `Task` cancels it: `tasks` going out of scope stops stragglers.
    let tasks: Vec<glommio::Task<()>> = (0..count)
        .map(|i| {
            let fut = make(i);
            let tx = done_tx.clone();
            glommio::spawn_local(async move {
                fut.await;
                let _ = tx.try_send(());
            })
        })
        .collect();
    let mut finished = 0;
    while finished < count {
        let left = hard_end.saturating_duration_since(Instant::now());
        let got = glommio::timer::timeout(left, async { Ok(done_rx.recv().await) }).await;
        match got {
            Ok(Some(())) => finished += 1,
            Ok(None) | Err(_) => break,
        }
    }
    drop(tasks);
    (count - finished) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        let mut v = vec!["loadgen"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| c.args)
    }

    /// The documented flags parse, with their defaults, and become a valid config.
    #[test]
    fn arguments_parse() {
        let a = parse(&[
            "--bootstrap",
            "127.0.0.1:9001,127.0.0.1:9002",
            "--workload",
            "configs",
            "--clients",
            "8",
            "--duration",
            "2.5",
            "--verify",
            "--json",
        ])
        .unwrap();
        assert_eq!(a.workload, Workload::Configs);
        assert_eq!(a.bootstrap.0.len(), 2);
        assert!(a.verify && a.json);
        let c = LoadConfig::from_args(&a).unwrap();
        assert_eq!(c.clients, 8);
        assert_eq!(c.connections, 1);
        assert_eq!(c.duration, Duration::from_millis(2_500));
        assert_eq!(c.heartbeat_interval, Duration::from_secs(2));
        assert_eq!(
            (c.log_dir, c.metrics.len()),
            (None, 0),
            "not measured by default"
        );

        let a = parse(&[
            "--bootstrap",
            "127.0.0.1:9001",
            "--workload",
            "configs",
            "--log-dir",
            "/var/tmp/corum/node1",
            "--metrics",
            "127.0.0.1:9291,127.0.0.1:9292,127.0.0.1:9293",
        ])
        .unwrap();
        let c = LoadConfig::from_args(&a).unwrap();
        assert_eq!(c.log_dir, Some(PathBuf::from("/var/tmp/corum/node1")));
        assert_eq!(c.metrics.len(), 3);
        assert_eq!(c.metrics[2], SocketAddr::from(([127, 0, 0, 1], 9293)));

        let a = parse(&[
            "--bootstrap",
            "127.0.0.1:9001",
            "--workload",
            "brokers",
            "--brokers",
            "500",
            "--heartbeat-interval-ms",
            "250",
            "--duration",
            "1",
        ])
        .unwrap();
        let c = LoadConfig::from_args(&a).unwrap();
        assert_eq!((c.workload, c.brokers), (Workload::Brokers, 500));
        assert_eq!(c.heartbeat_interval, Duration::from_millis(250));

        let a = parse(&[
            "--bootstrap",
            "127.0.0.1:9001",
            "--workload",
            "topics",
            "--partitions",
            "6",
        ])
        .unwrap();
        assert_eq!(LoadConfig::from_args(&a).unwrap().partitions, 6);
    }

    /// Unusable combinations are refused with the flag named.
    #[test]
    fn bad_arguments_are_refused() {
        assert!(
            parse(&["--workload", "configs"]).is_err(),
            "bootstrap required"
        );
        assert!(parse(&["--bootstrap", "127.0.0.1:1", "--workload", "nope"]).is_err());
        let bad = |extra: &[&str], needle: &str| {
            let mut v = vec!["--bootstrap", "127.0.0.1:1"];
            v.extend_from_slice(extra);
            let a = parse(&v).unwrap();
            let e = LoadConfig::from_args(&a).unwrap_err().to_string();
            assert!(e.contains(needle), "{extra:?}: {e}");
        };
        bad(&["--workload", "configs", "--clients", "0"], "--clients");
        bad(
            &[
                "--workload",
                "configs",
                "--clients",
                "2",
                "--connections",
                "3",
            ],
            "--connections",
        );
        bad(&["--workload", "topics", "--verify"], "--verify");
        bad(
            &["--workload", "topics", "--partitions", "0"],
            "--partitions",
        );
        bad(&["--workload", "configs", "--duration=-1"], "--duration");
        assert!(
            parse(&[
                "--bootstrap",
                "127.0.0.1:1",
                "--workload",
                "configs",
                "--metrics",
                "nowhere"
            ])
            .is_err(),
            "a metrics endpoint must be HOST:PORT"
        );
        bad(
            &["--workload", "brokers", "--heartbeat-interval-ms", "0"],
            "--heartbeat-interval-ms",
        );
    }

    /// Nonces stay inside the range the config values leave for them.
    #[test]
    fn nonce_range() {
        for _ in 0..100 {
            let n = run_nonce();
            assert!((1..9_000_000).contains(&n), "{n}");
        }
    }
}
