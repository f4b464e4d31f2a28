//! A local quorum of `corum run` processes on loopback, for `corum demo` and the process tests
//! (`tools/tests/tools/common` includes this file with `#[path]`, so it depends on std, libc and
//! anyhow only).
//!
//! | step          | what happens                                                                |
//! |---------------|-----------------------------------------------------------------------------|
//! | [`LocalCluster::create`] | picks 4 free loopback ports per node (controller, `CLIENT` and `KAFKA` listeners, `corum.metrics.listener`), writes `nodeN.properties` (static `controller.quorum.voters`), makes a cluster id (`corum random-uuid`) and runs `corum format` per node |
//! | [`LocalCluster::start`]  | spawns `corum run --config nodeN.properties --no-pin`, stderr appended to `nodeN.log`, and waits for its one stdout line `corum: node N ready: raft A, clients B, kafka C` |
//! | [`LocalCluster::signal`], [`LocalCluster::kill`], [`LocalCluster::terminate`] | SIGTERM / SIGKILL a node and reap it |
//! | drop          | every child still running is SIGKILLed and reaped                          |
//!
//! Children are killed on every exit path: a [`NodeProcess`] kills its child when dropped
//! (normal return and panics alike), and so does any other child started with
//! [`spawn_guarded`] (`corum demo --kafka`'s brokers and Kafka tools); each child gets `PR_SET_PDEATHSIG = SIGKILL` (it dies if
//! the thread that spawned it dies, even by SIGKILL), and every live child pid is listed in a
//! process-wide registry that a signal handler can empty with [`kill_registered_children`].

// The tests include this file and use a different subset of it than the demo does.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;

/// The pids of every child spawned here and not yet reaped.
static LIVE_CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn registry() -> std::sync::MutexGuard<'static, Vec<u32>> {
    // A panic while holding the lock leaves the list itself intact.
    LIVE_CHILDREN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// SIGKILLs every child spawned by this module that has not been reaped yet (for signal
/// handlers: the owners' guards may never run). Returns how many were signalled.
pub fn kill_registered_children() -> usize {
    let pids = registry().clone();
    for &pid in &pids {
        send_signal(pid, libc::SIGKILL);
    }
    pids.len()
}

fn send_signal(pid: u32, signal: libc::c_int) -> bool {
    let pid = libc::pid_t::try_from(pid).expect("a child pid fits in pid_t");
    // SAFETY: kill(2) has no memory-safety preconditions; the pid is one of our unreaped
    // children, so it cannot have been reused by another process.
    unsafe { libc::kill(pid, signal) == 0 }
}

/// What `corum run` prints once its sockets are bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadyLine {
    pub node_id: u32,
    pub raft: SocketAddr,
    pub clients: SocketAddr,
    /// The first Kafka listener, when the node has one.
    pub kafka: Option<SocketAddr>,
}

/// Parses `corum: node N ready: raft HOST:PORT, clients HOST:PORT[, kafka HOST:PORT]`; `None`
/// for any other line.
pub fn parse_ready_line(line: &str) -> Option<ReadyLine> {
    let rest = line.trim().strip_prefix("corum: node ")?;
    let (id, rest) = rest.split_once(" ready: raft ")?;
    let (raft, rest) = rest.split_once(", clients ")?;
    let (clients, kafka) = match rest.split_once(", kafka ") {
        Some((clients, kafka)) => (clients, Some(kafka.trim().parse().ok()?)),
        None => (rest, None),
    };
    Some(ReadyLine {
        node_id: id.parse().ok()?,
        raft: raft.trim().parse().ok()?,
        clients: clients.trim().parse().ok()?,
        kafka,
    })
}

/// Where [`free_loopback_ports`] looks: below Linux's ephemeral range (32768 and up). A client
/// reconnecting to a stopped node's ephemeral port can be handed that very port as its own
/// source port and connect to itself (TCP simultaneous open), holding the port so the node
/// cannot restart on it; librdkafka does this within seconds.
const PORTS: std::ops::Range<u16> = 20_000..32_000;

/// `count` distinct free TCP ports on 127.0.0.1 below the ephemeral range (all bound at once,
/// then released), from a start that differs between processes.
pub fn free_loopback_ports(count: usize) -> anyhow::Result<Vec<u16>> {
    let span = u32::from(PORTS.end - PORTS.start);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let start = (std::process::id().wrapping_mul(7919) ^ nanos) % span;
    let mut listeners = Vec::with_capacity(count);
    for i in 0..span {
        if listeners.len() == count {
            break;
        }
        let port = PORTS.start + ((start + i) % span) as u16;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
            listeners.push(l);
        }
    }
    anyhow::ensure!(
        listeners.len() == count,
        "only {} free loopback ports in {PORTS:?}, {count} needed",
        listeners.len()
    );
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// A child process spawned by [`spawn_guarded`]. Dropping it SIGKILLs and reaps the child.
pub struct GuardedChild {
    child: Child,
}

/// Spawns `cmd` so that it dies with the demo: its signal mask cleared (the demo blocks
/// SIGINT and SIGTERM to handle them on a thread of its own, and a blocked mask survives
/// exec), `PR_SET_PDEATHSIG = SIGKILL` (it dies if the spawning thread dies, even by
/// SIGKILL), its pid in the registry [`kill_registered_children`] empties, and a guard that
/// kills it when dropped.
pub fn spawn_guarded(cmd: &mut Command) -> std::io::Result<GuardedChild> {
    // SAFETY: the closure runs in the forked child before exec and calls only
    // sigemptyset, pthread_sigmask and prctl, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            let rc = libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            if rc != 0 {
                return Err(std::io::Error::from_raw_os_error(rc));
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    registry().push(child.id());
    Ok(GuardedChild { child })
}

impl GuardedChild {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child's stdout, if it was piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// Sends `signal` (the process may already have exited; that is not an error).
    pub fn signal(&self, signal: libc::c_int) {
        send_signal(self.child.id(), signal);
    }

    /// Waits up to `timeout` for the process to exit; `None` if it is still running.
    pub fn wait_timeout(&mut self, timeout: Duration) -> anyhow::Result<Option<ExitStatus>> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().context("waiting for a child")? {
                registry().retain(|&p| p != self.child.id());
                return Ok(Some(status));
            }
            if start.elapsed() >= timeout {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for GuardedChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        registry().retain(|&p| p != self.child.id());
    }
}

/// A running `corum run` child. Dropping it SIGKILLs and reaps the child.
pub struct NodeProcess {
    child: GuardedChild,
    ready: ReadyLine,
}

impl NodeProcess {
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    pub fn ready(&self) -> ReadyLine {
        self.ready
    }

    /// Sends `signal` (the process may already have exited; that is not an error).
    pub fn signal(&self, signal: libc::c_int) {
        self.child.signal(signal);
    }

    /// Waits up to `timeout` for the process to exit; `None` if it is still running.
    pub fn wait_timeout(&mut self, timeout: Duration) -> anyhow::Result<Option<ExitStatus>> {
        self.child.wait_timeout(timeout)
    }
}

/// What [`ClusterSpec::settings`] values replace by the node id.
pub const NODE_ID_PLACEHOLDER: &str = "{id}";

/// How to build a [`LocalCluster`].
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// The `corum` binary.
    pub exe: PathBuf,
    /// Where configs, logs and data directories go (created if missing).
    pub dir: PathBuf,
    /// Node ids are `1..=voters`.
    pub voters: u32,
    /// Extra `key=value` lines for every node's properties file; `{id}` in a value becomes
    /// the node's id (a per-node keystore: `ssl.keystore.location=/certs/controller-{id}.pem`).
    pub settings: Vec<(String, String)>,
    /// How long a started node may take to print its ready line.
    pub ready_timeout: Duration,
    /// `RUST_LOG` of the nodes.
    pub rust_log: String,
    /// A dynamic quorum (KIP-853, `kraft.version` 1): every node is formatted with
    /// `--initial-controllers` (the voters with their directory ids, in the bootstrap
    /// checkpoint) and configured with `controller.quorum.bootstrap.servers` instead of
    /// `controller.quorum.voters`, so voters can be added and removed at run time.
    pub dynamic: bool,
    /// How many nodes (the highest ids) are formatted with `--no-initial-controllers` and
    /// configured with `controller.quorum.bootstrap.servers` (the other nodes): they start as
    /// observers and join (with `controller.quorum.auto.join.enable`, or `corum quorum
    /// add-controller`) a dynamic quorum, or a static one once it is upgraded (`corum features
    /// upgrade --feature kraft.version=1`).
    pub joining: u32,
    /// Where each node runs (node `i + 1` at `hosts[i]`); empty: every node on loopback with
    /// free ports.
    pub hosts: Vec<NodeHost>,
}

/// A node's own address and network namespace (`corum chaos`): it listens on
/// [`NodeHost::PORTS`] of `addr`, inside the namespace `netns` names (a file such as
/// `/run/netns/NAME`, entered before exec).
#[derive(Clone, Debug)]
pub struct NodeHost {
    pub addr: std::net::IpAddr,
    pub netns: Option<PathBuf>,
}

impl NodeHost {
    /// The controller, `CLIENT`, `KAFKA` and metrics ports of a node with an address of its
    /// own.
    pub const PORTS: [u16; 4] = [9093, 9092, 9094, 9095];
}

impl ClusterSpec {
    pub fn new(exe: impl Into<PathBuf>, dir: impl Into<PathBuf>) -> ClusterSpec {
        ClusterSpec {
            exe: exe.into(),
            dir: dir.into(),
            voters: 3,
            settings: Vec::new(),
            ready_timeout: Duration::from_secs(20),
            rust_log: "info".into(),
            dynamic: false,
            joining: 0,
            hosts: Vec::new(),
        }
    }

    /// Adds `key=value` to every node's configuration.
    pub fn set(mut self, key: &str, value: impl ToString) -> ClusterSpec {
        self.settings.push((key.into(), value.to_string()));
        self
    }
}

/// One node's files and endpoints, and its process while it runs.
pub struct NodeSlot {
    pub id: u32,
    pub raft: SocketAddr,
    pub client: SocketAddr,
    /// The `KAFKA` listener (Kafka's wire protocol).
    pub kafka: SocketAddr,
    /// Where Prometheus text is served (`corum.metrics.listener`).
    pub metrics: SocketAddr,
    pub config: PathBuf,
    pub data: PathBuf,
    /// The node's stderr (appended across restarts).
    pub log: PathBuf,
    pub process: Option<NodeProcess>,
}

/// A formatted local quorum of `corum run` processes (see the module doc).
pub struct LocalCluster {
    pub spec: ClusterSpec,
    pub cluster_id: String,
    pub nodes: Vec<NodeSlot>,
    /// Whether any node ever started (its ports are then fixed: the logs know the voters).
    started: bool,
}

fn run_corum(exe: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(exe)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} {}", exe.display(), args.join(" ")))?;
    anyhow::ensure!(
        out.status.success(),
        "`corum {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Writes node `n`'s properties file with the initial `voters` (`ID@HOST:PORT`): as
/// `controller.quorum.voters` for a node of a static quorum's configuration, as
/// `controller.quorum.bootstrap.servers` for the rest.
fn write_config(spec: &ClusterSpec, n: &NodeSlot, voters: &[String]) -> anyhow::Result<()> {
    let mut text = format!(
        "# corum local cluster node {id}\n\
         node.id={id}\n\
         process.roles=controller\n\
         listeners=CONTROLLER://{raft},CLIENT://{client},KAFKA://{kafka}\n\
         controller.listener.names=CONTROLLER\n\
         metadata.log.dir={data}\n\
         corum.metrics.listener={metrics}\n",
        id = n.id,
        raft = n.raft,
        client = n.client,
        kafka = n.kafka,
        metrics = n.metrics,
        data = n.data.display(),
    );
    if spec.dynamic || n.id > spec.voters.saturating_sub(spec.joining) {
        let servers: Vec<&str> = voters
            .iter()
            .filter_map(|v| v.split_once('@').map(|(_, addr)| addr))
            .collect();
        text.push_str(&format!(
            "controller.quorum.bootstrap.servers={}\n",
            servers.join(",")
        ));
    } else {
        text.push_str(&format!("controller.quorum.voters={}\n", voters.join(",")));
    }
    for (k, v) in &spec.settings {
        let v = v.replace(NODE_ID_PLACEHOLDER, &n.id.to_string());
        text.push_str(&format!("{k}={v}\n"));
    }
    std::fs::write(&n.config, text).with_context(|| format!("writing {}", n.config.display()))
}

/// Gives every node four new free loopback ports (controller, client, Kafka, metrics) and
/// (re)writes every configuration with them (the static voter set names every node's
/// controller port). Formatting does not record ports, so a formatted cluster that never ran
/// can move.
fn assign_ports(spec: &ClusterSpec, nodes: &mut [NodeSlot]) -> anyhow::Result<()> {
    if spec.hosts.is_empty() {
        let ports = free_loopback_ports(4 * nodes.len())?;
        let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        for (n, four) in nodes.iter_mut().zip(ports.chunks(4)) {
            n.raft = addr(four[0]);
            n.client = addr(four[1]);
            n.kafka = addr(four[2]);
            n.metrics = addr(four[3]);
        }
    } else {
        anyhow::ensure!(
            spec.hosts.len() == nodes.len(),
            "{} hosts for {} nodes",
            spec.hosts.len(),
            nodes.len()
        );
        for (n, host) in nodes.iter_mut().zip(&spec.hosts) {
            let [raft, client, kafka, metrics] = NodeHost::PORTS;
            n.raft = SocketAddr::new(host.addr, raft);
            n.client = SocketAddr::new(host.addr, client);
            n.kafka = SocketAddr::new(host.addr, kafka);
            n.metrics = SocketAddr::new(host.addr, metrics);
        }
    }
    // A static quorum's voters are the nodes not formatted to join; a dynamic quorum's
    // controllers all serve as bootstrap servers.
    let initial_count = spec.voters.saturating_sub(spec.joining);
    let voters: Vec<String> = nodes
        .iter()
        .filter(|n| spec.dynamic || n.id <= initial_count)
        .map(|n| format!("{}@{}", n.id, n.raft))
        .collect();
    for n in nodes.iter() {
        write_config(spec, n, &voters)?;
    }
    Ok(())
}

/// Formats every node of a cluster that never ran: with the static voters of its
/// configuration, or (dynamic) with `--initial-controllers` naming every node at its
/// controller port with a new directory id (a node formatted before is formatted afresh).
fn format_all(spec: &ClusterSpec, nodes: &[NodeSlot], cluster_id: &str) -> anyhow::Result<()> {
    // `=` keeps an id starting with `-` from being read as a flag.
    let cluster_flag = format!("--cluster-id={cluster_id}");
    let mut initial = None;
    let initial_count = spec.voters.saturating_sub(spec.joining);
    if spec.dynamic {
        let mut voters = Vec::new();
        for n in nodes.iter().filter(|n| n.id <= initial_count) {
            let directory_id = run_corum(&spec.exe, &["random-uuid"])?.trim().to_owned();
            voters.push(format!("{}@{}:{directory_id}", n.id, n.raft));
        }
        initial = Some(if initial_count == 1 {
            "--standalone".to_owned()
        } else {
            format!("--initial-controllers={}", voters.join(","))
        });
    }
    for n in nodes {
        if n.id > initial_count {
            format_joining(spec, n, cluster_id)?;
            continue;
        }
        if spec.dynamic && n.data.exists() {
            std::fs::remove_dir_all(&n.data)
                .with_context(|| format!("removing {}", n.data.display()))?;
        }
        let config = n.config.display().to_string();
        let mut args = vec!["format", "--config", &config, &cluster_flag];
        if let Some(list) = &initial {
            args.push(list);
        }
        run_corum(&spec.exe, &args)?;
    }
    Ok(())
}

/// Formats node `n` afresh (a new directory id) with `--no-initial-controllers`: a controller
/// that joins the dynamic quorum.
fn format_joining(spec: &ClusterSpec, n: &NodeSlot, cluster_id: &str) -> anyhow::Result<()> {
    if n.data.exists() {
        std::fs::remove_dir_all(&n.data)
            .with_context(|| format!("removing {}", n.data.display()))?;
    }
    let config = n.config.display().to_string();
    let cluster_flag = format!("--cluster-id={cluster_id}");
    run_corum(
        &spec.exe,
        &[
            "format",
            "--config",
            &config,
            &cluster_flag,
            "--no-initial-controllers",
        ],
    )?;
    Ok(())
}

/// How long a node that closed its stdout without a ready line is given to exit.
const EXIT_AFTER_STDOUT_CLOSED: Duration = Duration::from_secs(5);

/// Marks a node that could not bind a port someone else took after it was picked.
const PORT_TAKEN: &str = "a port picked for it is taken";

/// First starts that lose a picked port to another process, before moving the cluster to
/// new ports gives up.
const PORT_ATTEMPTS: usize = 3;

impl LocalCluster {
    /// Picks ports, writes the configurations and formats every node (nothing runs yet).
    pub fn create(spec: ClusterSpec) -> anyhow::Result<LocalCluster> {
        anyhow::ensure!(spec.voters >= 1, "a cluster needs at least one voter");
        std::fs::create_dir_all(&spec.dir)
            .with_context(|| format!("creating {}", spec.dir.display()))?;
        let unbound = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut nodes: Vec<NodeSlot> = (1..=spec.voters)
            .map(|id| NodeSlot {
                id,
                raft: unbound,
                client: unbound,
                kafka: unbound,
                metrics: unbound,
                config: spec.dir.join(format!("node{id}.properties")),
                data: spec.dir.join(format!("node{id}")),
                log: spec.dir.join(format!("node{id}.log")),
                process: None,
            })
            .collect();
        assign_ports(&spec, &mut nodes)?;
        let cluster_id = run_corum(&spec.exe, &["random-uuid"])?.trim().to_owned();
        format_all(&spec, &nodes, &cluster_id)?;
        Ok(LocalCluster {
            spec,
            cluster_id,
            nodes,
            started: false,
        })
    }

    /// The client endpoints of every node, `HOST:PORT,...` (a `--bootstrap` value).
    pub fn bootstrap(&self) -> String {
        let v: Vec<String> = self.nodes.iter().map(|n| n.client.to_string()).collect();
        v.join(",")
    }

    pub fn ids(&self) -> Vec<u32> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    pub fn node(&self, id: u32) -> &NodeSlot {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id} in this cluster"))
    }

    fn node_mut(&mut self, id: u32) -> &mut NodeSlot {
        self.nodes
            .iter_mut()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id} in this cluster"))
    }

    /// Replaces node `id`'s disk (it must be stopped): its data directory is removed and
    /// formatted again with `--no-initial-controllers`, under a new directory id. Started, it
    /// joins as a new replica (dynamic quorums only).
    pub fn replace_disk(&mut self, id: u32) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.spec.dynamic,
            "only a dynamic quorum's controller can rejoin"
        );
        anyhow::ensure!(
            !self.is_running(id),
            "stop node {id} before replacing its disk"
        );
        format_joining(&self.spec, self.node(id), &self.cluster_id)
    }

    /// Moves stopped node `id`'s controller listener to a new free port (its configuration
    /// rewritten; dynamic quorums only: started, it announces the new endpoint with
    /// UpdateVoter). Returns the new address.
    pub fn move_controller_port(&mut self, id: u32) -> anyhow::Result<SocketAddr> {
        anyhow::ensure!(self.spec.dynamic, "a static quorum's voters are configured");
        anyhow::ensure!(
            !self.is_running(id),
            "stop node {id} before moving its port"
        );
        let port = free_loopback_ports(1)?[0];
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        self.node_mut(id).raft = addr;
        let voters: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("{}@{}", n.id, n.raft))
            .collect();
        write_config(&self.spec, self.node(id), &voters)?;
        Ok(addr)
    }

    pub fn is_running(&self, id: u32) -> bool {
        self.node(id).process.is_some()
    }

    /// Starts every node that is not running: all are spawned first, then each is waited for.
    /// On the cluster's first start, a node that finds one of its ports taken (another
    /// process got it between picking and binding) stops the attempt: the cluster moves to
    /// new ports and starts again, up to [`PORT_ATTEMPTS`] times.
    pub fn start_all(&mut self) -> anyhow::Result<()> {
        let first_start = !self.started;
        let mut attempt = 1;
        loop {
            match self.try_start_all(first_start) {
                Err(e)
                    if first_start
                        && attempt < PORT_ATTEMPTS
                        && format!("{e:#}").contains(PORT_TAKEN) =>
                {
                    for n in &mut self.nodes {
                        n.process = None;
                    }
                    assign_ports(&self.spec, &mut self.nodes)?;
                    if self.spec.dynamic {
                        // The bootstrap checkpoint names the voters' ports: format again.
                        format_all(&self.spec, &self.nodes, &self.cluster_id)?;
                    }
                    attempt += 1;
                }
                other => {
                    self.started |= other.is_ok();
                    return other;
                }
            }
        }
    }

    fn try_start_all(&mut self, first_start: bool) -> anyhow::Result<()> {
        let ids: Vec<u32> = self
            .nodes
            .iter()
            .filter(|n| n.process.is_none())
            .map(|n| n.id)
            .collect();
        let mut pending = Vec::new();
        for id in ids {
            pending.push((id, self.spawn(id)?));
        }
        for (id, p) in pending {
            let process = self.await_ready(id, p, !first_start)?;
            self.node_mut(id).process = Some(process);
        }
        Ok(())
    }

    /// Starts node `id` and waits for its ready line. A node that exits before it because its
    /// port is still held (a restart right after a kill) is started again until the ready
    /// timeout.
    pub fn start(&mut self, id: u32) -> anyhow::Result<()> {
        anyhow::ensure!(!self.is_running(id), "node {id} is already running");
        let p = self.spawn(id)?;
        let process = self.await_ready(id, p, true)?;
        self.node_mut(id).process = Some(process);
        self.started = true;
        Ok(())
    }

    fn spawn(&self, id: u32) -> anyhow::Result<Spawned> {
        let n = self.node(id);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&n.log)
            .with_context(|| format!("opening {}", n.log.display()))?;
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let mut cmd = Command::new(&self.spec.exe);
        let netns = self
            .spec
            .hosts
            .get(
                self.nodes
                    .iter()
                    .position(|m| m.id == id)
                    .expect("a node of this cluster"),
            )
            .and_then(|h| h.netns.as_ref());
        // Kept open until the child is spawned: the child enters the namespace before exec.
        let netns_file = match netns {
            Some(path) => Some(
                File::open(path)
                    .with_context(|| format!("opening the network namespace {}", path.display()))?,
            ),
            None => None,
        };
        if let Some(f) = &netns_file {
            use std::os::fd::AsRawFd;
            let fd = f.as_raw_fd();
            // SAFETY: setns is a plain system call on an fd the child inherited; it runs in
            // the forked child before exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd.arg("run")
            .arg("--config")
            .arg(&n.config)
            .arg("--no-pin")
            .env("RUST_LOG", &self.spec.rust_log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        let mut child = spawn_guarded(&mut cmd)
            .with_context(|| format!("spawning {} run", self.spec.exe.display()))?;
        drop(netns_file);
        let stdout = child.take_stdout().expect("stdout was piped");
        let (tx, rx) = mpsc::channel();
        // Reads the ready line, then drains stdout until the child closes it, so the child
        // never blocks on a full pipe.
        std::thread::Builder::new()
            .name(format!("corum-node{id}-stdout"))
            .spawn(move || {
                let mut sent = false;
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if !sent {
                        if let Some(r) = parse_ready_line(&line) {
                            let _ = tx.send(r);
                            sent = true;
                        }
                    }
                }
            })
            .context("spawning a stdout reader thread")?;
        Ok(Spawned {
            process: NodeProcess {
                child,
                ready: ReadyLine {
                    node_id: id,
                    raft: n.raft,
                    clients: n.client,
                    kafka: Some(n.kafka),
                },
            },
            ready: rx,
            log_start,
        })
    }

    /// Waits for the ready line of `s`. A node that exits because a port is in use is
    /// started again while `retry_in_use` (its own previous process may still hold the port
    /// for a moment); otherwise that fails at once naming [`PORT_TAKEN`]. A node that closes
    /// its stdout without a ready line has exited or is exiting: it is waited for (a few
    /// seconds at most) and judged by its log like one seen to exit.
    fn await_ready(
        &self,
        id: u32,
        mut s: Spawned,
        retry_in_use: bool,
    ) -> anyhow::Result<NodeProcess> {
        let start = Instant::now();
        let no_ready_line = |log_start: u64| {
            let tail = self.log_since(id, log_start);
            anyhow::anyhow!(
                "node {id} printed no ready line within {:?}; its log:\n{tail}",
                start.elapsed()
            )
        };
        loop {
            let left = self.spec.ready_timeout.saturating_sub(start.elapsed());
            let status = match s.ready.recv_timeout(left.min(Duration::from_millis(50))) {
                Ok(r) => {
                    anyhow::ensure!(
                        r.node_id == id,
                        "node {id} says it is node {} ({})",
                        r.node_id,
                        self.node(id).config.display()
                    );
                    s.process.ready = r;
                    return Ok(s.process);
                }
                // Still starting, unless it already exited.
                Err(mpsc::RecvTimeoutError::Timeout) if left > Duration::ZERO => {
                    match s.process.wait_timeout(Duration::ZERO)? {
                        Some(status) => status,
                        None => continue,
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return Err(no_ready_line(s.log_start)),
                // Its stdout closed without a ready line: the node is on its way out.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    match s.process.wait_timeout(EXIT_AFTER_STDOUT_CLOSED)? {
                        Some(status) => status,
                        None => return Err(no_ready_line(s.log_start)),
                    }
                }
            };
            let tail = self.log_since(id, s.log_start);
            if tail.contains("in use") {
                anyhow::ensure!(
                    retry_in_use,
                    "node {id} exited before it was ready: {PORT_TAKEN}:\n{tail}"
                );
                if start.elapsed() < self.spec.ready_timeout {
                    std::thread::sleep(Duration::from_millis(100));
                    s = self.spawn(id)?;
                    continue;
                }
            }
            anyhow::bail!("node {id} exited before it was ready ({status}):\n{tail}");
        }
    }

    /// The last lines (at most 4 KiB) node `id` wrote to its log since byte `from`.
    fn log_since(&self, id: u32, from: u64) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.node(id).log) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let start = from.max(len.saturating_sub(4096));
            if f.seek(SeekFrom::Start(start)).is_ok() {
                let _ = f.read_to_string(&mut text);
            }
        }
        text
    }

    /// The last 4 KiB of node `id`'s log (for failure messages).
    pub fn log_tail(&self, id: u32) -> String {
        self.log_since(id, 0)
    }

    /// Sends `signal` to node `id` if it runs; returns whether it was running.
    pub fn signal(&self, id: u32, signal: libc::c_int) -> bool {
        match &self.node(id).process {
            Some(p) => {
                p.signal(signal);
                true
            }
            None => false,
        }
    }

    /// SIGKILLs node `id` and reaps it.
    pub fn kill(&mut self, id: u32) {
        // Dropping the guard kills and reaps.
        self.node_mut(id).process = None;
    }

    /// SIGTERMs node `id` and waits up to `timeout` for it to exit; a node still running
    /// then is SIGKILLed and the call fails. Returns the exit status.
    pub fn terminate(&mut self, id: u32, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let mut p = self
            .node_mut(id)
            .process
            .take()
            .with_context(|| format!("node {id} is not running"))?;
        p.signal(libc::SIGTERM);
        match p.wait_timeout(timeout)? {
            Some(status) => Ok(status),
            None => {
                drop(p);
                anyhow::bail!("node {id} did not exit within {timeout:?} of SIGTERM")
            }
        }
    }

    /// SIGTERMs every running node at once, then waits for each (see [`Self::terminate`]).
    pub fn terminate_all(&mut self, timeout: Duration) -> Vec<(u32, anyhow::Result<ExitStatus>)> {
        let ids: Vec<u32> = self
            .nodes
            .iter()
            .filter(|n| n.process.is_some())
            .map(|n| n.id)
            .collect();
        for &id in &ids {
            self.signal(id, libc::SIGTERM);
        }
        ids.into_iter()
            .map(|id| (id, self.terminate(id, timeout)))
            .collect()
    }
}

struct Spawned {
    process: NodeProcess,
    ready: mpsc::Receiver<ReadyLine>,
    log_start: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ready line parses into its node id and both endpoints; anything else is ignored.
    #[test]
    fn ready_line_parsing() {
        assert_eq!(
            parse_ready_line("corum: node 3 ready: raft 127.0.0.1:4001, clients 127.0.0.1:4002\n"),
            Some(ReadyLine {
                node_id: 3,
                raft: "127.0.0.1:4001".parse().unwrap(),
                clients: "127.0.0.1:4002".parse().unwrap(),
                kafka: None,
            })
        );
        assert_eq!(
            parse_ready_line(
                "corum: node 3 ready: raft 127.0.0.1:4001, clients 127.0.0.1:4002, kafka 127.0.0.1:4003"
            )
            .and_then(|r| r.kafka),
            Some("127.0.0.1:4003".parse().unwrap())
        );
        for bad in [
            "",
            "corum: node x ready: raft 127.0.0.1:1, clients 127.0.0.1:2",
            "corum: node 1 ready: raft 127.0.0.1, clients 127.0.0.1:2",
            "corum: node 1 started",
            "INFO corum: node 1 ready: raft 127.0.0.1:1 clients 127.0.0.1:2",
        ] {
            assert_eq!(parse_ready_line(bad), None, "{bad:?}");
        }
    }

    /// Free ports are distinct, never 0, and below the ephemeral range. (Whether one is still free a moment later
    /// depends on the other processes of the machine: `start_all` copes with that.)
    #[test]
    fn free_ports_are_distinct() {
        let ports = free_loopback_ports(6).unwrap();
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 6);
        assert!(ports.iter().all(|&p| PORTS.contains(&p)));
    }

    /// A one-node cluster under `dir` whose "corum" is the shell script `script` (nothing
    /// formatted: only starting is exercised).
    fn scripted_cluster(dir: &Path, script: &str) -> LocalCluster {
        use std::os::unix::fs::PermissionsExt;
        let exe = dir.join("fake-corum");
        std::fs::write(&exe, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        LocalCluster {
            spec: ClusterSpec::new(&exe, dir),
            cluster_id: "unused".into(),
            nodes: vec![NodeSlot {
                id: 1,
                raft: addr,
                client: addr,
                kafka: addr,
                metrics: addr,
                config: dir.join("node1.properties"),
                data: dir.join("node1"),
                log: dir.join("node1.log"),
                process: None,
            }],
            started: false,
        }
    }

    /// A node that exits at once because its port is taken is reported as such, however
    /// its stdout's closing and its exit interleave (the first start then moves to new
    /// ports; a bare "no ready line" would end the attempt instead).
    #[test]
    fn a_node_losing_its_port_is_reported_as_port_taken() {
        let dir = tempfile::tempdir().unwrap();
        let c = scripted_cluster(
            dir.path(),
            "echo 'error: running the node: bind 127.0.0.1:1: Address already in use (os error 98)' >&2; exit 1",
        );
        for _ in 0..5 {
            let spawned = c.spawn(1).unwrap();
            let e = c
                .await_ready(1, spawned, false)
                .err()
                .expect("no ready line");
            assert!(format!("{e:#}").contains(PORT_TAKEN), "{e:#}");
        }
    }

    /// A node that exits for another reason is reported with its exit status and log; one
    /// that closes its stdout and lingers is given up on after [`EXIT_AFTER_STDOUT_CLOSED`],
    /// not at the ready timeout.
    #[test]
    fn a_node_exiting_early_is_reported_promptly() {
        let dir = tempfile::tempdir().unwrap();
        let c = scripted_cluster(dir.path(), "echo 'error: the log is damaged' >&2; exit 3");
        let e = c
            .await_ready(1, c.spawn(1).unwrap(), true)
            .err()
            .expect("no ready line");
        let text = format!("{e:#}");
        assert!(text.contains("exited before it was ready"), "{text}");
        assert!(text.contains("the log is damaged"), "{text}");

        // A ready timeout far above the wait for an exit: giving up early is told apart from
        // reaching the timeout even on a slow, shared host.
        let mut c = scripted_cluster(dir.path(), "exec >&-; sleep 300");
        c.spec.ready_timeout = Duration::from_secs(120);
        let start = Instant::now();
        let e = c
            .await_ready(1, c.spawn(1).unwrap(), true)
            .err()
            .expect("no ready line");
        assert!(format!("{e:#}").contains("printed no ready line"), "{e:#}");
        assert!(
            start.elapsed() < c.spec.ready_timeout / 2,
            "{:?}",
            start.elapsed()
        );
    }

    /// Dropping a process guard kills its child and clears it from the registry.
    #[test]
    fn guard_kills_child() {
        let child = spawn_guarded(Command::new("sleep").arg("30")).unwrap();
        let pid = child.pid();
        assert!(registry().contains(&pid));
        let p = NodeProcess {
            child,
            ready: ReadyLine {
                node_id: 1,
                raft: "127.0.0.1:1".parse().unwrap(),
                clients: "127.0.0.1:2".parse().unwrap(),
                kafka: None,
            },
        };
        drop(p);
        assert!(!registry().contains(&pid));
        // The pid was reaped: signalling it fails (it is no longer our child).
        assert!(!send_signal(pid, 0));
    }
}
