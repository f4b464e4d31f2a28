//! `corum bench floor`: the CPU and latency of a replicated, durable write at one client
//! before any of corum's code runs, on the runtime corum runs on and on plain blocking
//! threads, side by side.
//!
//! Three voters run as processes of their own (this binary again, as a quorum's nodes are);
//! the client is a thread of this process. All are unpinned and talk over loopback TCP
//! (`TCP_NODELAY`, one write in flight):
//!
//! - the client sends a small request to the leader and waits for the answer;
//! - the leader sends the request to both followers, writes one 4 KiB block
//!   O_DIRECT|O_DSYNC to its own file meanwhile, and answers the client once its block and
//!   both followers' answers are in;
//! - each follower writes one 4 KiB block O_DIRECT|O_DSYNC to its own file and answers.
//!
//! That is the least a write to a 3-voter quorum does at one client: three network hops (the
//! client's, and the leader's to each follower) and three durable writes, and nothing else
//! (no encoding, no log structure, no state machine, no timers). `glommio` runs each voter on
//! a glommio executor built as the node builds its shard with the default settings (ring depth,
//! io arena, no spinning), with glommio's sockets and the log engine's O_DSYNC write
//! ([`UringDisk`]); `std` runs each on one blocking thread (`read`, `write`, `pwrite`). Each
//! voter measures its process's CPU time (`getrusage(RUSAGE_SELF)`) over the measured writes
//! only, so `voters_cpu_us_per_write` compares with `corum loadgen --clients 1 --metrics ...`'s
//! node CPU per write of a real quorum (three nodes summed).
//!
//! Each voter's file is under `--dir` (1,024 blocks written in turn, all written once before
//! the run, so the measured writes overwrite written blocks: the cheapest durable write the
//! device offers) and is removed when the voter ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use corum_engine::buf::AlignedBuf;
use corum_engine::disk::{Disk, DiskFile, OpenMode, UringDisk};
use corum_runtime::RuntimeConfig;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::cmd::loadgen::cpu::cpu_time;

/// Bytes of each request and answer on the wire.
const MESSAGE_BYTES: usize = 64;
/// Bytes each voter makes durable per write.
const BLOCK_BYTES: usize = 4096;
/// Blocks per voter file, written in turn.
const FILE_BLOCKS: u64 = 1024;
/// Unmeasured writes before the measured ones (connections, caches and the device warm).
const WARMUP: Duration = Duration::from_millis(500);
/// At most this many measured writes per runtime.
const WRITES_MAX: u64 = 1_000_000;
/// How long a voter process may take to start listening, or to report after the last write.
const VOTER_TIMEOUT: Duration = Duration::from_secs(30);

/// The first byte of a request: what the voters do with it.
const PHASE_WARMUP: u8 = 0;
const PHASE_MEASURED: u8 = 1;
/// The last request: answered, then every voter reports and exits.
const PHASE_STOP: u8 = 2;

#[derive(clap::Args, Debug)]
pub struct FloorArgs {
    /// A directory on the file system the voters' files go in (the quorum's log device).
    #[arg(long)]
    pub dir: PathBuf,
    /// Seconds of measured writes per runtime.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Which runtimes to measure.
    #[arg(long, value_enum, default_value_t = Which::Both)]
    pub runtime: Which,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Internal: run as this voter of a measurement (started by `corum bench floor`).
    #[arg(long, value_enum, hide = true)]
    pub role: Option<Role>,
    /// Internal: the leader's followers.
    #[arg(long, value_delimiter = ',', hide = true)]
    pub followers: Vec<SocketAddr>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Glommio,
    Std,
    Both,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower0,
    Follower1,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Follower0 => "follower0",
            Role::Follower1 => "follower1",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Glommio,
    Std,
}

impl Runtime {
    fn name(self) -> &'static str {
        match self {
            Runtime::Glommio => "glommio",
            Runtime::Std => "std",
        }
    }
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct FloorReport {
    pub runtime: Runtime,
    pub writes: u64,
    pub writes_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// CPU of the leader's and the two followers' processes per measured write, summed.
    pub voters_cpu_us_per_write: f64,
    pub leader_cpu_us_per_write: f64,
    /// The two followers' mean.
    pub follower_cpu_us_per_write: f64,
    pub client_cpu_us_per_write: f64,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Floors {
    pub runs: Vec<FloorReport>,
    /// glommio's voters' CPU per write over the blocking threads' (present when both ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub glommio_over_std_cpu: Option<f64>,
}

/// A voter's CPU over the measured writes: started at the first measured request, stopped
/// at the stop request.
#[derive(Default)]
struct CpuWindow {
    started: Option<Duration>,
    spent: Duration,
}

impl CpuWindow {
    fn on_request(&mut self, phase: u8) {
        match phase {
            PHASE_MEASURED if self.started.is_none() => {
                self.started = Some(cpu_time(libc::RUSAGE_SELF))
            }
            PHASE_STOP => {
                if let Some(s) = self.started {
                    self.spent = cpu_time(libc::RUSAGE_SELF).saturating_sub(s);
                }
            }
            _ => {}
        }
    }
}

/// A voter's file: named after the measuring process, the runtime and the role.
fn voter_path(dir: &Path, runtime: Runtime, role: Role) -> PathBuf {
    dir.join(format!(
        "corum-bench-floor-{}-{}-{}",
        std::os::unix::process::parent_id(),
        runtime.name(),
        role.name()
    ))
}

/// One 4 KiB block of a repeated byte, 4 KiB-aligned (O_DIRECT needs both).
fn aligned_block() -> AlignedBuf {
    let mut block = AlignedBuf::with_capacity(BLOCK_BYTES);
    block.resize(BLOCK_BYTES, 0x5a);
    block
}

/// Tells the measuring process where this voter listens.
fn announce(addr: SocketAddr) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening {addr}")?;
    out.flush()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Blocking threads.

fn std_open(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
        .open(path)
        .with_context(|| format!("opening {} O_DIRECT|O_DSYNC", path.display()))?;
    let block = aligned_block();
    for i in 0..FILE_BLOCKS {
        file.write_all_at(&block, i * BLOCK_BYTES as u64)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(file)
}

fn std_listen() -> anyhow::Result<TcpListener> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("listening on 127.0.0.1")?;
    announce(l.local_addr()?)?;
    Ok(l)
}

/// A blocking follower: answers each request once its block is durable. Returns its CPU.
fn std_follower(path: &Path) -> anyhow::Result<Duration> {
    use std::os::unix::fs::FileExt;
    let file = std_open(path)?;
    let block = aligned_block();
    let listener = std_listen()?;
    let (mut s, _) = listener.accept().context("accepting the leader")?;
    s.set_nodelay(true)?;
    let mut msg = [0u8; MESSAGE_BYTES];
    let mut cpu = CpuWindow::default();
    for n in 0u64.. {
        s.read_exact(&mut msg).context("reading a request")?;
        cpu.on_request(msg[0]);
        file.write_all_at(&block, (n % FILE_BLOCKS) * BLOCK_BYTES as u64)
            .context("writing a block")?;
        s.write_all(&msg).context("answering")?;
        if msg[0] == PHASE_STOP {
            break;
        }
    }
    Ok(cpu.spent)
}

/// The blocking leader: sends each request to both followers, writes its block, waits for
/// both answers and answers the client.
fn std_leader(followers: &[SocketAddr], path: &Path) -> anyhow::Result<Duration> {
    use std::os::unix::fs::FileExt;
    let file = std_open(path)?;
    let block = aligned_block();
    let mut peers = Vec::new();
    for f in followers {
        let s = TcpStream::connect(f).with_context(|| format!("connecting to {f}"))?;
        s.set_nodelay(true)?;
        peers.push(s);
    }
    let listener = std_listen()?;
    let (mut client, _) = listener.accept().context("accepting the client")?;
    client.set_nodelay(true)?;
    let mut msg = [0u8; MESSAGE_BYTES];
    let mut answer = [0u8; MESSAGE_BYTES];
    let mut cpu = CpuWindow::default();
    for n in 0u64.. {
        client.read_exact(&mut msg).context("reading a request")?;
        cpu.on_request(msg[0]);
        for p in &mut peers {
            p.write_all(&msg).context("sending to a follower")?;
        }
        file.write_all_at(&block, (n % FILE_BLOCKS) * BLOCK_BYTES as u64)
            .context("writing a block")?;
        for p in &mut peers {
            p.read_exact(&mut answer)
                .context("reading a follower's answer")?;
        }
        client.write_all(&msg).context("answering the client")?;
        if msg[0] == PHASE_STOP {
            break;
        }
    }
    Ok(cpu.spent)
}

// ---------------------------------------------------------------------------------------
// A glommio executor.

async fn uring_open(path: &Path) -> anyhow::Result<<UringDisk as Disk>::File> {
    let file = UringDisk
        .open(path, OpenMode::Create)
        .await
        .with_context(|| format!("opening {}", path.display()))?;
    let block = aligned_block();
    for i in 0..FILE_BLOCKS {
        file.write_at(i * BLOCK_BYTES as u64, &block)
            .await
            .with_context(|| format!("writing {}", path.display()))?;
    }
    file.sync().await?;
    Ok(file)
}

fn glommio_listen() -> anyhow::Result<glommio::net::TcpListener> {
    let l = glommio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| anyhow::anyhow!("listening on 127.0.0.1: {e}"))?;
    let a = l
        .local_addr()
        .map_err(|e| anyhow::anyhow!("the listener's address: {e}"))?;
    announce(a)?;
    Ok(l)
}

async fn glommio_accept(
    listener: &glommio::net::TcpListener,
    whom: &str,
) -> anyhow::Result<glommio::net::TcpStream> {
    let s = listener
        .accept()
        .await
        .map_err(|e| anyhow::anyhow!("accepting the {whom}: {e}"))?;
    s.set_nodelay(true)
        .map_err(|e| anyhow::anyhow!("setting TCP_NODELAY: {e}"))?;
    Ok(s)
}

async fn glommio_follower(path: &Path) -> anyhow::Result<Duration> {
    let file = uring_open(path).await?;
    let block = aligned_block();
    let listener = glommio_listen()?;
    let mut s = glommio_accept(&listener, "leader").await?;
    let mut msg = [0u8; MESSAGE_BYTES];
    let mut cpu = CpuWindow::default();
    for n in 0u64.. {
        s.read_exact(&mut msg).await.context("reading a request")?;
        cpu.on_request(msg[0]);
        file.write_durable_at((n % FILE_BLOCKS) * BLOCK_BYTES as u64, &block)
            .await
            .context("writing a block")?;
        s.write_all(&msg).await.context("answering")?;
        if msg[0] == PHASE_STOP {
            break;
        }
    }
    file.close().await?;
    Ok(cpu.spent)
}

/// Sends a request to a follower and reads its answer.
async fn ask(p: &mut glommio::net::TcpStream, msg: [u8; MESSAGE_BYTES]) -> anyhow::Result<()> {
    let mut answer = [0u8; MESSAGE_BYTES];
    p.write_all(&msg).await.context("sending to a follower")?;
    p.read_exact(&mut answer)
        .await
        .context("reading a follower's answer")?;
    Ok(())
}

async fn glommio_leader(followers: &[SocketAddr], path: &Path) -> anyhow::Result<Duration> {
    let file = uring_open(path).await?;
    let block = aligned_block();
    let [f0, f1] = followers else {
        anyhow::bail!("the leader needs two followers, not {}", followers.len());
    };
    let connect = |f: SocketAddr| async move {
        let s = glommio::net::TcpStream::connect(f)
            .await
            .map_err(|e| anyhow::anyhow!("connecting to {f}: {e}"))?;
        s.set_nodelay(true)
            .map_err(|e| anyhow::anyhow!("setting TCP_NODELAY: {e}"))?;
        anyhow::Ok(s)
    };
    let mut p0 = connect(*f0).await?;
    let mut p1 = connect(*f1).await?;
    let listener = glommio_listen()?;
    let mut client = glommio_accept(&listener, "client").await?;
    let mut msg = [0u8; MESSAGE_BYTES];
    let mut cpu = CpuWindow::default();
    for n in 0u64.. {
        client
            .read_exact(&mut msg)
            .await
            .context("reading a request")?;
        cpu.on_request(msg[0]);
        let own = async {
            file.write_durable_at((n % FILE_BLOCKS) * BLOCK_BYTES as u64, &block)
                .await
                .context("writing a block")
        };
        let (a, (b, c)) = futures_lite::future::zip(
            own,
            futures_lite::future::zip(ask(&mut p0, msg), ask(&mut p1, msg)),
        )
        .await;
        a?;
        b?;
        c?;
        client
            .write_all(&msg)
            .await
            .context("answering the client")?;
        if msg[0] == PHASE_STOP {
            break;
        }
    }
    file.close().await?;
    Ok(cpu.spent)
}

// ---------------------------------------------------------------------------------------
// One voter (a child process).

/// Runs this process as one voter: prints `listening ADDR` once it listens and `cpu_ns N`
/// after the stop request.
fn run_voter(
    runtime: Runtime,
    role: Role,
    dir: &Path,
    followers: &[SocketAddr],
) -> anyhow::Result<()> {
    let path = voter_path(dir, runtime, role);
    let spent = match runtime {
        Runtime::Std => match role {
            Role::Leader => std_leader(followers, &path),
            Role::Follower0 | Role::Follower1 => std_follower(&path),
        },
        Runtime::Glommio => {
            let config = RuntimeConfig::default();
            let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
                .name(&format!("floor-{}", role.name()))
                .io_memory(config.io_memory_bytes)
                .ring_depth(config.ring_depth)
                .make()
                .map_err(|e| anyhow::anyhow!("starting the executor: {e}"))?;
            ex.run(async {
                match role {
                    Role::Leader => glommio_leader(followers, &path).await,
                    Role::Follower0 | Role::Follower1 => glommio_follower(&path).await,
                }
            })
        }
    };
    let removed = std::fs::remove_file(&path);
    let spent = spent?;
    removed.with_context(|| format!("removing {}", path.display()))?;
    println!("cpu_ns {}", spent.as_nanos());
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The measuring process.

/// A voter process, killed if dropped before it reported; its stdout's lines come through
/// a thread so that every wait on it is bounded.
struct Voter {
    role: Role,
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Voter {
    fn start(
        dir: &Path,
        runtime: Runtime,
        role: Role,
        followers: &[SocketAddr],
    ) -> anyhow::Result<(Self, SocketAddr)> {
        let exe = std::env::current_exe().context("finding this program")?;
        let mut cmd = Command::new(exe);
        cmd.args(["bench", "floor", "--dir"]).arg(dir).args([
            "--runtime",
            runtime.name(),
            "--role",
            role.name(),
        ]);
        if !followers.is_empty() {
            let list: Vec<String> = followers.iter().map(ToString::to_string).collect();
            cmd.args(["--followers", &list.join(",")]);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting the {}", role.name()))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut voter = Voter { role, child, lines };
        let line = voter.line()?;
        let addr = line
            .strip_prefix("listening ")
            .and_then(|a| a.parse().ok())
            .with_context(|| format!("the {} said {line:?}, not where it listens", role.name()))?;
        Ok((voter, addr))
    }

    fn line(&mut self) -> anyhow::Result<String> {
        self.lines.recv_timeout(VOTER_TIMEOUT).map_err(|_| {
            let status = self.child.try_wait().ok().flatten();
            anyhow::anyhow!(
                "the {} stopped reporting (exit status: {status:?}; its errors are above)",
                self.role.name()
            )
        })
    }

    /// The CPU the voter spent on the measured writes; waits for it to exit.
    fn finish(mut self) -> anyhow::Result<Duration> {
        let line = self.line()?;
        let ns: u64 = line
            .strip_prefix("cpu_ns ")
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("the {} said {line:?}, not its CPU", self.role.name()))?;
        let status = self.child.wait()?;
        anyhow::ensure!(
            status.success(),
            "the {} exited with {status}",
            self.role.name()
        );
        Ok(Duration::from_nanos(ns))
    }
}

impl Drop for Voter {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The client: warm-up, then measured writes for `duration`, then the stop request. Returns
/// the latencies, the measured time and the client thread's CPU over it.
fn client(
    leader: SocketAddr,
    duration: Duration,
) -> anyhow::Result<(Histogram<u64>, Duration, Duration)> {
    let mut s = TcpStream::connect(leader).with_context(|| format!("connecting to {leader}"))?;
    s.set_nodelay(true)?;
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("static histogram bounds");
    let mut msg = [0u8; MESSAGE_BYTES];
    let mut round = |s: &mut TcpStream, phase: u8| -> anyhow::Result<Duration> {
        msg[0] = phase;
        let t = Instant::now();
        s.write_all(&msg).context("sending a request")?;
        s.read_exact(&mut msg).context("reading an answer")?;
        Ok(t.elapsed())
    };
    let warm = Instant::now();
    while warm.elapsed() < WARMUP {
        round(&mut s, PHASE_WARMUP)?;
    }
    let cpu = cpu_time(libc::RUSAGE_THREAD);
    let started = Instant::now();
    while started.elapsed() < duration && hist.len() < WRITES_MAX {
        let took = round(&mut s, PHASE_MEASURED)?;
        hist.saturating_record(took.as_nanos().max(1) as u64);
    }
    let elapsed = started.elapsed();
    let cpu = cpu_time(libc::RUSAGE_THREAD).saturating_sub(cpu);
    round(&mut s, PHASE_STOP)?;
    Ok((hist, elapsed, cpu))
}

fn measure_one(dir: &Path, runtime: Runtime, duration: Duration) -> anyhow::Result<FloorReport> {
    let (f0, a0) = Voter::start(dir, runtime, Role::Follower0, &[])?;
    let (f1, a1) = Voter::start(dir, runtime, Role::Follower1, &[])?;
    let (leader, leader_addr) = Voter::start(dir, runtime, Role::Leader, &[a0, a1])?;
    let (hist, elapsed, client_cpu) = client(leader_addr, duration)?;
    let leader = leader.finish()?;
    let followers = [f0.finish()?, f1.finish()?];
    let writes = hist.len().max(1);
    let per = |d: Duration| d.as_secs_f64() * 1e6 / writes as f64;
    let us = |ns: u64| ns.div_ceil(1_000);
    Ok(FloorReport {
        runtime,
        writes: hist.len(),
        writes_per_sec: hist.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        p50_us: us(hist.value_at_quantile(0.5)),
        p99_us: us(hist.value_at_quantile(0.99)),
        voters_cpu_us_per_write: per(leader + followers[0] + followers[1]),
        leader_cpu_us_per_write: per(leader),
        follower_cpu_us_per_write: per(followers[0] + followers[1]) / 2.0,
        client_cpu_us_per_write: per(client_cpu),
    })
}

/// Measures the chosen runtimes one after the other.
pub fn measure(dir: &Path, duration: Duration, which: Which) -> anyhow::Result<Floors> {
    let runtimes: &[Runtime] = match which {
        Which::Both => &[Runtime::Glommio, Runtime::Std],
        Which::Glommio => &[Runtime::Glommio],
        Which::Std => &[Runtime::Std],
    };
    let mut runs = Vec::new();
    for &runtime in runtimes {
        runs.push(
            measure_one(dir, runtime, duration)
                .with_context(|| format!("the {} run", runtime.name()))?,
        );
    }
    let cpu = |r: Runtime| {
        runs.iter()
            .find(|x| x.runtime == r)
            .map(|x| x.voters_cpu_us_per_write)
    };
    let glommio_over_std_cpu = match (cpu(Runtime::Glommio), cpu(Runtime::Std)) {
        (Some(g), Some(s)) if s > 0.0 => Some(g / s),
        _ => None,
    };
    Ok(Floors {
        runs,
        glommio_over_std_cpu,
    })
}

pub fn run(args: FloorArgs) -> anyhow::Result<()> {
    if let Some(role) = args.role {
        let runtime = match args.runtime {
            Which::Glommio => Runtime::Glommio,
            Which::Std => Runtime::Std,
            Which::Both => anyhow::bail!("a voter runs one --runtime, not both"),
        };
        return run_voter(runtime, role, &args.dir, &args.followers);
    }
    anyhow::ensure!(
        args.seconds > 0.0 && args.seconds <= 600.0,
        "--seconds must be above 0 and at most 600, not {}",
        args.seconds
    );
    anyhow::ensure!(
        args.dir.is_dir(),
        "--dir {} is not a directory",
        args.dir.display()
    );
    let floors = measure(
        &args.dir,
        Duration::from_secs_f64(args.seconds),
        args.runtime,
    )?;
    if args.json {
        println!("{}", serde_json::to_string(&floors)?);
        return Ok(());
    }
    println!("a 3-voter write at one client: 3 hops and 3 O_DSYNC 4 KiB writes, nothing else");
    println!(
        "{:<8} {:>8} {:>9} {:>7} {:>7} {:>13} {:>10} {:>12} {:>10}",
        "runtime",
        "writes",
        "writes/s",
        "p50 us",
        "p99 us",
        "voters' CPU",
        "leader",
        "follower",
        "client"
    );
    for r in &floors.runs {
        println!(
            "{:<8} {:>8} {:>9.0} {:>7} {:>7} {:>10.1} us {:>7.1} us {:>9.1} us {:>7.1} us",
            r.runtime.name(),
            r.writes,
            r.writes_per_sec,
            r.p50_us,
            r.p99_us,
            r.voters_cpu_us_per_write,
            r.leader_cpu_us_per_write,
            r.follower_cpu_us_per_write,
            r.client_cpu_us_per_write
        );
    }
    if let Some(x) = floors.glommio_over_std_cpu {
        println!("voters' CPU per write, glommio / std: {x:.2}");
    }
    Ok(())
}
