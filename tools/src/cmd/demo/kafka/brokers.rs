//! Apache Kafka's brokers and tools as child processes of `corum demo --kafka`: each broker a
//! JVM (`kafka.Kafka server.properties`) with its own directory, formatted with Kafka's
//! `StorageTool`; each tool (producer, consumer) a JVM run to completion with a deadline. All
//! of them are spawned with [`spawn_guarded`], so they die with the demo on every exit path.
//!
//! Files, under the demo's `kafka/` directory:
//!
//! ```text
//! broker-ID/server.properties   the broker's configuration (below)
//! broker-ID/log4j2.properties   its log goes to logs/server.log (appended across restarts)
//! broker-ID/data/               log.dirs (formatted: meta.properties with corum's cluster id)
//! broker-ID/logs/               server.log, stdout.log (the JVM's own output), format.log
//! tools/NAME.out, NAME.err      each tool run's stdout and stderr
//! log4j2-tools.properties       the tools log warnings and errors to stderr
//! ```
//!
//! A broker's configuration is the one `compat/brokers.sh` runs the broker suite with: a
//! static corum quorum's Kafka listeners as `controller.quorum.voters`, that listener's name as
//! `controller.listener.names`, one `PLAINTEXT` listener on loopback, internal topics and
//! thread pools small enough for a laptop, and the JVM's heap capped at [`BROKER_HEAP`].

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::install::KafkaInstall;
use crate::cmd::demo::cluster::{spawn_guarded, GuardedChild};

/// A broker JVM's heap (several brokers and three corum nodes share a small host).
pub const BROKER_HEAP: &str = "384m";
/// A tool JVM's heap.
const TOOL_HEAP: &str = "256m";
/// Every JVM's heap to start with (it grows up to its cap when needed).
const HEAP_START: &str = "64m";
/// Longer lines of a quoted log are cut (a broker's request dumps run to kilobytes a line).
const TAIL_LINE_CHARS_MAX: usize = 400;
/// The JVM options of every broker and tool: the serial collector and the client compiler
/// only start fastest and take the least CPU from the others on a 2-core host.
const JVM_OPTS: &[&str] = &[
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
];
/// What a broker logs once the controller unfenced it and its listeners accept (Kafka's
/// `BrokerServer` start-up waits for both).
pub const STARTED_LINE: &str = "Kafka Server started";
/// How much of a log a failure message quotes.
const TAIL_BYTES: u64 = 3_000;

/// What every broker shares.
#[derive(Clone, Debug)]
pub struct BrokerSpec {
    pub install: KafkaInstall,
    /// The demo's `kafka/` directory.
    pub dir: PathBuf,
    pub cluster_id: String,
    /// `controller.quorum.voters`: each corum node's id at its Kafka listener.
    pub quorum_voters: String,
    /// The name of corum's Kafka listener.
    pub controller_listener: String,
    /// `broker.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: u64,
    /// `broker.session.timeout.ms` (what fences is corum's own; written here to match).
    pub session_timeout_ms: u64,
    /// The replication factor of Kafka's internal topics and the default one.
    pub replication_factor: u16,
}

impl BrokerSpec {
    /// `min.insync.replicas` for the replication factor: 2 of 3 (one broker may be down and
    /// acks=all still succeeds), else 1.
    pub fn min_insync_replicas(&self) -> u16 {
        if self.replication_factor >= 3 {
            2
        } else {
            1
        }
    }
}

/// One broker: its identity, files and process.
pub struct KafkaBroker {
    pub id: u32,
    pub port: u16,
    pub dir: PathBuf,
    process: Option<GuardedChild>,
    /// Where this run's part of `logs/server.log` starts.
    log_start: u64,
    /// Where this run's part of `logs/stdout.log` (the JVM's own output) starts.
    stdout_start: u64,
}

impl KafkaBroker {
    pub fn server_log(&self) -> PathBuf {
        self.dir.join("logs/server.log")
    }

    fn config(&self) -> PathBuf {
        self.dir.join("server.properties")
    }
}

/// The demo's brokers.
pub struct KafkaBrokers {
    pub spec: BrokerSpec,
    pub brokers: Vec<KafkaBroker>,
}

impl KafkaBrokers {
    /// Writes each broker's files (nothing runs yet); `ids` and `ports` pair up.
    pub fn create(spec: BrokerSpec, ids: &[u32], ports: &[u16]) -> anyhow::Result<KafkaBrokers> {
        assert_eq!(ids.len(), ports.len(), "one port per broker");
        std::fs::create_dir_all(spec.dir.join("tools"))
            .with_context(|| format!("creating {}", spec.dir.display()))?;
        write_file(&spec.dir.join("log4j2-tools.properties"), TOOLS_LOG4J)?;
        let mut brokers = Vec::new();
        for (&id, &port) in ids.iter().zip(ports) {
            let b = KafkaBroker {
                id,
                port,
                dir: spec.dir.join(format!("broker-{id}")),
                process: None,
                log_start: 0,
                stdout_start: 0,
            };
            std::fs::create_dir_all(b.dir.join("logs"))
                .with_context(|| format!("creating {}", b.dir.display()))?;
            write_file(&b.config(), &broker_properties(&spec, &b))?;
            let log4j = BROKER_LOG4J.replace("SERVER_LOG", &b.server_log().display().to_string());
            write_file(&b.dir.join("log4j2.properties"), &log4j)?;
            brokers.push(b);
        }
        Ok(KafkaBrokers { spec, brokers })
    }

    pub fn ids(&self) -> Vec<u32> {
        self.brokers.iter().map(|b| b.id).collect()
    }

    pub fn broker(&self, id: u32) -> &KafkaBroker {
        self.brokers
            .iter()
            .find(|b| b.id == id)
            .unwrap_or_else(|| panic!("no broker {id} in the demo"))
    }

    fn broker_mut(&mut self, id: u32) -> &mut KafkaBroker {
        self.brokers
            .iter_mut()
            .find(|b| b.id == id)
            .unwrap_or_else(|| panic!("no broker {id} in the demo"))
    }

    /// The brokers' client listeners, `127.0.0.1:P,...` (a `bootstrap.servers` value).
    pub fn bootstrap(&self) -> String {
        self.bootstrap_of(&self.ids())
    }

    /// The client listeners of `ids` only.
    pub fn bootstrap_of(&self, ids: &[u32]) -> String {
        ids.iter()
            .map(|&id| format!("127.0.0.1:{}", self.broker(id).port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Formats every broker's log directory with Kafka's `StorageTool` and corum's cluster
    /// id, all at once, each within `timeout`.
    pub fn format_all(&self, timeout: Duration) -> anyhow::Result<()> {
        let mut runs = Vec::new();
        for b in &self.brokers {
            let log = b.dir.join("logs/format.log");
            let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
            let err = out.try_clone().context("duplicating a file handle")?;
            let mut cmd = self.java(TOOL_HEAP, &self.spec.dir.join("log4j2-tools.properties"));
            cmd.arg("kafka.tools.StorageTool")
                .arg("format")
                .arg("--cluster-id")
                .arg(&self.spec.cluster_id)
                .arg("--config")
                .arg(b.config())
                .stdin(Stdio::null())
                .stdout(Stdio::from(out))
                .stderr(Stdio::from(err));
            let child = spawn_guarded(&mut cmd).with_context(|| {
                format!("running {} (StorageTool)", self.spec.install.java.display())
            })?;
            runs.push((b.id, log, child));
        }
        let start = Instant::now();
        for (id, log, mut child) in runs {
            let status = child.wait_timeout(timeout.saturating_sub(start.elapsed()))?;
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            match status {
                Some(s) if s.success() => {}
                Some(s) => anyhow::bail!(
                    "formatting broker {id} with Kafka's StorageTool failed ({s}):\n{}",
                    text.trim()
                ),
                None => anyhow::bail!(
                    "formatting broker {id} with Kafka's StorageTool took over {timeout:?}: {}",
                    log.display()
                ),
            }
        }
        Ok(())
    }

    /// Starts broker `id`'s JVM (it must not be running). Its log continues
    /// `logs/server.log`, after a line marking this start.
    pub fn start(&mut self, id: u32) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.broker(id).process.is_none(),
            "broker {id} is already running"
        );
        let b = self.broker(id);
        let log = b.server_log();
        let mut marker = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("opening {}", log.display()))?;
        let log_start = marker.metadata().map(|m| m.len()).unwrap_or(0);
        writeln!(marker, "=== corum demo: broker {id} starts")
            .with_context(|| format!("writing {}", log.display()))?;
        let stdout_log = b.dir.join("logs/stdout.log");
        let stdout = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stdout_log)
            .with_context(|| format!("opening {}", stdout_log.display()))?;
        let stdout_start = stdout.metadata().map(|m| m.len()).unwrap_or(0);
        let stderr = stdout.try_clone().context("duplicating a file handle")?;
        let mut cmd = self.java(BROKER_HEAP, &b.dir.join("log4j2.properties"));
        cmd.arg("kafka.Kafka")
            .arg(b.config())
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr));
        let child = spawn_guarded(&mut cmd).with_context(|| {
            format!(
                "starting broker {id} ({})",
                self.spec.install.java.display()
            )
        })?;
        let b = self.broker_mut(id);
        b.process = Some(child);
        b.log_start = log_start;
        b.stdout_start = stdout_start;
        Ok(())
    }

    /// Fails, quoting the end of its log, if broker `id` was started and has exited.
    pub fn check_alive(&mut self, id: u32) -> anyhow::Result<()> {
        let b = self.broker_mut(id);
        let Some(p) = b.process.as_mut() else {
            return Ok(());
        };
        if let Some(status) = p.wait_timeout(Duration::ZERO)? {
            b.process = None;
            anyhow::bail!("broker {id} exited ({status}); {}", self.log_tail(id));
        }
        Ok(())
    }

    /// Whether this run of broker `id` logged [`STARTED_LINE`].
    pub fn started(&self, id: u32) -> bool {
        let b = self.broker(id);
        read_from(&b.server_log(), b.log_start).contains(STARTED_LINE)
    }

    /// SIGKILLs broker `id` and reaps it.
    pub fn kill(&mut self, id: u32) {
        // Dropping the guard kills and reaps.
        self.broker_mut(id).process = None;
    }

    /// SIGTERMs every running broker at once (Kafka's controlled shutdown: each asks the
    /// controller to move its leaders first), then waits up to `timeout` for all of them; one
    /// still running then is SIGKILLed. Returns each broker's outcome.
    pub fn terminate_all(&mut self, timeout: Duration) -> Vec<(u32, anyhow::Result<ExitStatus>)> {
        for b in &self.brokers {
            if let Some(p) = &b.process {
                p.signal(libc::SIGTERM);
            }
        }
        let start = Instant::now();
        let mut out = Vec::new();
        for b in &mut self.brokers {
            let Some(mut p) = b.process.take() else {
                continue;
            };
            let outcome = match p.wait_timeout(timeout.saturating_sub(start.elapsed())) {
                Ok(Some(status)) => Ok(status),
                Ok(None) => Err(anyhow::anyhow!(
                    "broker {} did not exit within {timeout:?} of SIGTERM (killed)",
                    b.id
                )),
                Err(e) => Err(e),
            };
            out.push((b.id, outcome));
        }
        out
    }

    /// The end of broker `id`'s log (this run's part, at most a few KiB, long lines cut),
    /// and of its JVM's own output when there is any (a JVM that cannot start says why there),
    /// each under its path: for failure messages.
    pub fn log_tail(&self, id: u32) -> String {
        let b = self.broker(id);
        let mut out = format!(
            "the end of {}:\n{}",
            b.server_log().display(),
            tail(&read_from(&b.server_log(), b.log_start))
        );
        let stdout_log = b.dir.join("logs/stdout.log");
        let jvm = read_from(&stdout_log, b.stdout_start);
        if !jvm.trim().is_empty() {
            out.push_str(&format!(
                "\nthe end of {} (the JVM's output):\n{}",
                stdout_log.display(),
                tail(&jvm)
            ));
        }
        out
    }

    /// A JVM command line for a class of the jars, with `heap` and `log4j` (the caller adds
    /// the class and its arguments).
    fn java(&self, heap: &str, log4j: &Path) -> Command {
        let mut cmd = Command::new(&self.spec.install.java);
        let mut log4j_flag = OsString::from("-Dlog4j2.configurationFile=");
        log4j_flag.push(log4j);
        cmd.arg(format!("-Xmx{heap}"))
            .arg(format!("-Xms{}", HEAP_START))
            .args(JVM_OPTS)
            .arg(log4j_flag)
            .arg("-cp")
            .arg(self.spec.install.classpath());
        cmd
    }

    /// Runs one of Kafka's tools (`class` with `args`) to completion, its output in
    /// `tools/NAME.out` and `.err`, SIGKILLed after `timeout`.
    pub fn run_tool(
        &self,
        name: &str,
        class: &str,
        args: &[String],
        timeout: Duration,
    ) -> anyhow::Result<ToolRun> {
        let dir = self.spec.dir.join("tools");
        let out_path = dir.join(format!("{name}.out"));
        let err_path = dir.join(format!("{name}.err"));
        let out =
            File::create(&out_path).with_context(|| format!("creating {}", out_path.display()))?;
        let err =
            File::create(&err_path).with_context(|| format!("creating {}", err_path.display()))?;
        let mut cmd = self.java(TOOL_HEAP, &self.spec.dir.join("log4j2-tools.properties"));
        cmd.arg(class)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        let start = Instant::now();
        let mut child = spawn_guarded(&mut cmd)
            .with_context(|| format!("running {class} ({})", self.spec.install.java.display()))?;
        let status = child.wait_timeout(timeout)?;
        let took = start.elapsed();
        drop(child);
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        let Some(status) = status else {
            anyhow::bail!(
                "{class} did not finish within {timeout:?} (killed); its output: {}, {}; the end of its stderr:\n{}",
                out_path.display(),
                err_path.display(),
                last_lines(&stderr, 10)
            );
        };
        Ok(ToolRun {
            status,
            took,
            stdout: out_path,
            stderr,
        })
    }
}

/// A finished tool run.
pub struct ToolRun {
    pub status: ExitStatus,
    /// From spawn to exit (the JVM's start included).
    pub took: Duration,
    /// Where its stdout is (a consumer's may be large).
    pub stdout: PathBuf,
    pub stderr: String,
}

/// The end of a log (at most [`TAIL_BYTES`], from a whole line), each line indented and cut
/// at [`TAIL_LINE_CHARS_MAX`] characters.
fn tail(text: &str) -> String {
    let text = text.trim_end();
    let cut = text.len().saturating_sub(TAIL_BYTES as usize);
    let cut = (cut..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    let mut tail = &text[cut..];
    if cut > 0 {
        tail = tail.split_once('\n').map_or(tail, |(_, rest)| rest);
    }
    tail.lines()
        .map(|l| match l.char_indices().nth(TAIL_LINE_CHARS_MAX) {
            Some((cut, _)) => format!("    {} ...", &l[..cut]),
            None => format!("    {l}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The last `n` lines of `text`, indented, for failure messages.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The file from byte `from` on (lossy), empty if it cannot be read.
fn read_from(path: &Path, from: u64) -> String {
    let mut bytes = Vec::new();
    if let Ok(mut f) = File::open(path) {
        if f.seek(SeekFrom::Start(from)).is_ok() {
            let _ = f.read_to_end(&mut bytes);
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Broker `b`'s `server.properties`.
fn broker_properties(spec: &BrokerSpec, b: &KafkaBroker) -> String {
    let rf = spec.replication_factor;
    let min_isr = spec.min_insync_replicas();
    let cl = &spec.controller_listener;
    format!(
        "# corum demo --kafka: broker {id} of a corum quorum\n\
         process.roles=broker\n\
         node.id={id}\n\
         controller.quorum.voters={voters}\n\
         controller.listener.names={cl}\n\
         listeners=PLAINTEXT://127.0.0.1:{port}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
         inter.broker.listener.name=PLAINTEXT\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,{cl}:PLAINTEXT\n\
         log.dirs={data}\n\
         num.partitions=1\n\
         default.replication.factor={rf}\n\
         auto.create.topics.enable=false\n\
         min.insync.replicas={min_isr}\n\
         offsets.topic.replication.factor={rf}\n\
         offsets.topic.num.partitions=10\n\
         transaction.state.log.replication.factor={rf}\n\
         transaction.state.log.min.isr={min_isr}\n\
         transaction.state.log.num.partitions=10\n\
         share.coordinator.state.topic.replication.factor={rf}\n\
         share.coordinator.state.topic.min.isr={min_isr}\n\
         broker.session.timeout.ms={session}\n\
         broker.heartbeat.interval.ms={heartbeat}\n\
         group.initial.rebalance.delay.ms=0\n\
         num.network.threads=2\n\
         num.io.threads=2\n\
         num.replica.fetchers=1\n\
         background.threads=2\n\
         log.cleaner.threads=1\n\
         num.recovery.threads.per.data.dir=1\n",
        id = b.id,
        voters = spec.quorum_voters,
        port = b.port,
        data = b.dir.join("data").display(),
        session = spec.session_timeout_ms,
        heartbeat = spec.heartbeat_interval_ms,
    )
}

/// A broker's logging: INFO and up to its `server.log` (`SERVER_LOG` is replaced).
const BROKER_LOG4J: &str = "status = warn
appender.server.type = File
appender.server.name = server
appender.server.fileName = SERVER_LOG
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.server.ref = server
";

/// The tools' logging: warnings and errors to stderr.
const TOOLS_LOG4J: &str = "status = error
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = stderr
";

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rf: u16) -> BrokerSpec {
        BrokerSpec {
            install: KafkaInstall {
                java: "/usr/bin/java".into(),
                java_version: "17".into(),
                jars: "/jars".into(),
                kafka_version: "4.1.2".into(),
            },
            dir: "/d/kafka".into(),
            cluster_id: "abc".into(),
            quorum_voters: "1@127.0.0.1:9001,2@127.0.0.1:9002".into(),
            controller_listener: "KAFKA".into(),
            heartbeat_interval_ms: 1_000,
            session_timeout_ms: 6_000,
            replication_factor: rf,
        }
    }

    /// A broker's properties point it at corum's Kafka listeners as a static quorum, name
    /// that listener as the controller listener, and size the replication to the cluster.
    #[test]
    fn broker_configuration() {
        let b = KafkaBroker {
            id: 5,
            port: 21_005,
            dir: "/d/kafka/broker-5".into(),
            process: None,
            log_start: 0,
            stdout_start: 0,
        };
        let text = broker_properties(&spec(3), &b);
        for line in [
            "process.roles=broker",
            "node.id=5",
            "controller.quorum.voters=1@127.0.0.1:9001,2@127.0.0.1:9002",
            "controller.listener.names=KAFKA",
            "listeners=PLAINTEXT://127.0.0.1:21005",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT",
            "log.dirs=/d/kafka/broker-5/data",
            "offsets.topic.replication.factor=3",
            "min.insync.replicas=2",
            "broker.session.timeout.ms=6000",
            "broker.heartbeat.interval.ms=1000",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing:\n{text}");
        }
        let two = broker_properties(&spec(2), &b);
        assert!(two.lines().any(|l| l == "min.insync.replicas=1"), "{two}");
        assert!(
            two.lines().any(|l| l == "default.replication.factor=2"),
            "{two}"
        );
    }

    /// The tail of a log starts at a whole line, keeps the end and cuts long lines.
    #[test]
    fn tails() {
        let long = "x".repeat(1_000);
        let text = format!("first\n{long}\n{}last\n", "line\n".repeat(700));
        let t = tail(&text);
        assert!(t.ends_with("    last"), "{t}");
        assert!(!t.contains("first") && !t.contains(&long), "{t}");
        assert!(t
            .lines()
            .all(|l| l.starts_with("    line") || l == "    last"));
        let t = tail(&format!("a\n{long}\n"));
        assert_eq!(t.lines().next(), Some("    a"));
        assert_eq!(t.lines().nth(1).map(str::len), Some(4 + 400 + 4));
        assert_eq!(last_lines("a\nb\nc\n", 2), "    b\n    c");
        assert_eq!(last_lines("", 2), "");
    }
}
