//! Harness of the process tests: a local quorum of `corum run` children (the demo's
//! [`LocalCluster`], included from the binary's sources), `corum quorum describe` and
//! `corum loadgen` as child processes, polling with deadlines, and a glommio executor for
//! in-process clients.

#![allow(dead_code)]

use std::future::Future;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "../../../src/cmd/demo/cluster.rs"]
mod cluster;

/// `corum chaos`'s loop filesystems (as root).
#[path = "../../../src/cmd/chaos/disk.rs"]
pub mod disk;

pub use cluster::{ClusterSpec, LocalCluster};

/// Held by each process test for its whole run: the tests of one binary run on parallel
/// threads, and three clusters of three nodes at once on a 2-core machine would turn timing
/// assertions (failover, handover) into measurements of the scheduler.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes the [`SERIAL`] lock (a test that panicked while holding it does not block the rest).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The repository's root (the workspace holding `tools/`).
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tools/ has a parent")
}

/// Fails the test, saying `fix`, unless `java -version` runs.
pub fn require_java(fix: &str) {
    let java = Command::new("java")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(
        matches!(java, Ok(s) if s.success()),
        "java is not runnable (a JDK 17 or newer is needed): {fix}"
    );
}

/// Writes configs through every node for 3 s (enough records for a snapshot at the test
/// settings), asserts every node wrote a snapshot, then stops every node and starts them all
/// again: what a test needs to show state survives snapshots and restarts.
pub fn snapshot_and_restart_all(c: &mut LocalCluster) {
    let out = spawn_loadgen(
        &bootstrap_of(c, &c.ids()),
        &["--workload", "configs", "--clients", "8", "--duration", "3"],
    )
    .wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for id in c.ids() {
        let snapshots = std::fs::read_dir(c.node(id).data.join("snapshots"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert!(snapshots > 0, "node {id} wrote no snapshot\n{}", logs(c));
    }
    for (id, r) in c.terminate_all(Duration::from_secs(30)) {
        r.unwrap_or_else(|e| panic!("stopping node {id}: {e:#}"));
    }
    if let Err(e) = c.start_all() {
        panic!("restarting the cluster: {e:#}\n{}", logs(c));
    }
}

/// A command running `class` of Kafka's tools from compat/jars (what compat/install.sh
/// copies), with a small heap, a fast start and warnings to stderr
/// (compat/log4j2-tools.properties); the caller adds the arguments.
pub fn kafka_tool(class: &str, heap: &str) -> Command {
    let compat = repo_root().join("compat");
    let mut java = Command::new("java");
    java.arg(format!("-Xmx{heap}"))
        .args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
        .arg(format!(
            "-Dlog4j2.configurationFile={}",
            compat.join("log4j2-tools.properties").display()
        ))
        .arg("-cp")
        .arg(format!("{}/*", compat.join("jars").display()))
        .arg(class)
        .stdin(Stdio::null());
    java
}

/// Processes whose command line mentions `needle` (to find a demo's nodes and brokers by their directory).
pub fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(needle) {
                found.push(pid);
            }
        }
    }
    found
}

/// The binary under test.
pub fn corum_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_corum"))
}

/// A spec for a 3-voter cluster under `dir` with `settings` added to every node. The nodes
/// log at `info`, or at `CORUM_TEST_NODE_LOG` when set (a `RUST_LOG` filter); a failing test
/// prints the tail of every node's log.
pub fn spec(dir: &Path, settings: &[(&str, &str)]) -> ClusterSpec {
    let mut s = ClusterSpec::new(corum_exe(), dir);
    s.rust_log = std::env::var("CORUM_TEST_NODE_LOG").unwrap_or_else(|_| "info".into());
    for (k, v) in settings {
        s = s.set(k, v);
    }
    s
}

/// Formats and starts a 3-voter cluster; panics with the nodes' logs on failure.
pub fn start_cluster(dir: &Path, settings: &[(&str, &str)]) -> LocalCluster {
    let mut c = LocalCluster::create(spec(dir, settings)).expect("formatting the cluster");
    if let Err(e) = c.start_all() {
        panic!("starting the cluster: {e:#}\n{}", logs(&c));
    }
    c
}

/// Every node's log tail, for failure messages.
pub fn logs(c: &LocalCluster) -> String {
    c.ids()
        .into_iter()
        .map(|id| format!("--- node {id} ---\n{}", c.log_tail(id)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Polls `f` every 20 ms until it returns `Some`, failing after `timeout` with `what`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the binary with `args` to completion, killing it after `timeout`.
pub fn corum(args: &[&str], timeout: Duration) -> Output {
    let child = Command::new(corum_exe())
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning corum");
    Running::new(child).wait(timeout)
}

/// A child process killed when dropped, whose output is collected by threads (so neither
/// pipe fills up while it runs).
pub struct Running {
    child: Child,
    stdout: mpsc::Receiver<Vec<u8>>,
    stderr: mpsc::Receiver<Vec<u8>>,
}

fn drain(mut r: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

impl Running {
    pub fn new(mut child: Child) -> Running {
        let stdout = drain(child.stdout.take().expect("stdout piped"));
        let stderr = drain(child.stderr.take().expect("stderr piped"));
        Running {
            child,
            stdout,
            stderr,
        }
    }

    /// Waits for the exit (killing the child after `timeout`, which fails the test).
    pub fn wait(mut self, timeout: Duration) -> Output {
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("waiting for a child") {
                break s;
            }
            if start.elapsed() >= timeout {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let err = self
                    .stderr
                    .recv_timeout(Duration::from_secs(5))
                    .unwrap_or_default();
                panic!(
                    "child did not finish within {timeout:?}; stderr:\n{}",
                    String::from_utf8_lossy(&err)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Output {
            status,
            stdout: self
                .stdout
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_default(),
            stderr: self
                .stderr
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_default(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts `corum loadgen --json` with `args` in the background (without a disk measurement
/// unless `args` asks for one with `--raw-fsync-seconds`).
pub fn spawn_loadgen(bootstrap: &str, args: &[&str]) -> Running {
    let no_disk: &[&str] = if args.contains(&"--raw-fsync-seconds") {
        &[]
    } else {
        &["--raw-fsync-seconds", "0"]
    };
    let child = Command::new(corum_exe())
        .args([
            "loadgen",
            "--bootstrap",
            bootstrap,
            "--json",
            "--no-progress",
        ])
        .args(no_disk)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning corum loadgen");
    Running::new(child)
}

/// The JSON object a finished `corum loadgen --json` printed.
pub fn loadgen_json(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "loadgen printed no JSON ({e}): status {}, stdout {text:?}, stderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The leader's `corum quorum describe --replication --json`, or `None` while no leader
/// answers within `timeout_ms`.
pub fn describe(bootstrap: &str, timeout_ms: u64) -> Option<serde_json::Value> {
    describe_with(bootstrap, timeout_ms, &[])
}

/// [`describe`] with more arguments (`--command-config FILE`).
pub fn describe_with(bootstrap: &str, timeout_ms: u64, more: &[&str]) -> Option<serde_json::Value> {
    let t = timeout_ms.to_string();
    let mut args = vec![
        "quorum",
        "describe",
        "--bootstrap",
        bootstrap,
        "--replication",
        "--json",
        "--timeout-ms",
        &t,
    ];
    args.extend_from_slice(more);
    let out = corum(
        &args,
        Duration::from_millis(timeout_ms) + Duration::from_secs(10),
    );
    if !out.status.success() {
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).expect("describe --json prints JSON"))
}

/// The leader id and epoch in a describe answer.
/// The voter ids of a [`describe`] answer.
pub fn voters_of(d: &serde_json::Value) -> Vec<u64> {
    d["voters"]
        .as_array()
        .expect("a voters array")
        .iter()
        .map(|v| v.as_u64().expect("a voter id"))
        .collect()
}

pub fn leader_of(d: &serde_json::Value) -> (u32, u64) {
    (
        d["leader_id"].as_u64().expect("a leader id") as u32,
        d["leader_epoch"].as_u64().expect("an epoch"),
    )
}

/// The client endpoints of `ids` in `c`, as a `--bootstrap` value.
pub fn bootstrap_of(c: &LocalCluster, ids: &[u32]) -> String {
    ids.iter()
        .map(|&id| c.node(id).client.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Every node's client endpoint.
pub fn client_addrs(c: &LocalCluster) -> Vec<SocketAddr> {
    c.nodes.iter().map(|n| n.client).collect()
}

/// Runs `f` on a glommio executor thread and returns its result; fails the test after
/// `deadline`.
pub fn on_executor<T, F, Fut>(deadline: Duration, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
{
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let v = corum_engine::disk::executor_builder("corum-test")
            .make()
            .expect("glommio executor")
            .run(f());
        let _ = tx.send(v);
    });
    match rx.recv_timeout(deadline) {
        Ok(v) => {
            handle.join().unwrap();
            v
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("executor work exceeded {deadline:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(handle.join().unwrap_err())
        }
    }
}

/// Every file and directory under `dir`: (path, length, modification time), sorted; what a
/// test compares to show that nothing was written there.
pub fn file_tree(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read dir") {
            let e = e.expect("entry");
            let md = e.metadata().expect("stat");
            if md.is_dir() {
                todo.push(e.path());
            }
            out.push((e.path(), md.len(), md.modified().expect("mtime")));
        }
    }
    out.sort();
    out
}

/// Runs `corum certs ARGS` (the test PKI), which must succeed.
pub fn certs(args: &[&str]) {
    let mut all = vec!["certs"];
    all.extend_from_slice(args);
    let out = corum(&all, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "corum {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
