//! What a load generator run measures, and how it is shown.
//!
//! | piece        | role                                                                      |
//! |--------------|---------------------------------------------------------------------------|
//! | [`Recorder`] | one run's counters: acknowledged operations, an HDR histogram of their latency (µs), errors by kind; shared by every client task of the executor (`Rc`, no locks) |
//! | [`Progress`] | the live line on stderr, once per second: elapsed, operations, rate over the last second, p99 so far, errors, leader changes |
//! | [`Report`]   | the final figures: the `--json` object and the human summary             |

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::cpu::CpuFigures;

/// Latencies above this (µs) are recorded as this: no request waits longer than a minute.
pub const LATENCY_US_MAX: u64 = 60_000_000;

/// A histogram of microseconds, 3 significant figures, 1 µs .. [`LATENCY_US_MAX`].
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("static histogram bounds are valid")
}

/// p50, p99, p99.9 and max of `h` in µs (zeros when empty).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

/// Counters of one run, shared by the client tasks of one executor.
pub struct Recorder {
    latency: RefCell<Histogram<u64>>,
    ops: Cell<u64>,
    errors: Cell<u64>,
    error_kinds: RefCell<BTreeMap<String, u64>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            latency: RefCell::new(latency_histogram()),
            ops: Cell::new(0),
            errors: Cell::new(0),
            error_kinds: RefCell::new(BTreeMap::new()),
        }
    }
}

impl Recorder {
    /// One acknowledged operation that took `latency`.
    pub fn ok(&self, latency: Duration) {
        self.latency.borrow_mut().saturating_record(micros(latency));
        self.ops.set(self.ops.get() + 1);
    }

    /// One failed operation; `kind` groups errors in the report (keep it short and stable:
    /// an error variant, not a message with numbers in it).
    pub fn error(&self, kind: &str) {
        self.errors.set(self.errors.get() + 1);
        *self
            .error_kinds
            .borrow_mut()
            .entry(kind.to_owned())
            .or_insert(0) += 1;
    }

    pub fn ops(&self) -> u64 {
        self.ops.get()
    }

    pub fn errors(&self) -> u64 {
        self.errors.get()
    }

    pub fn p99_us(&self) -> u64 {
        let h = self.latency.borrow();
        if h.is_empty() {
            0
        } else {
            h.value_at_quantile(0.99)
        }
    }

    pub fn percentiles(&self) -> Percentiles {
        Percentiles::of(&self.latency.borrow())
    }

    pub fn error_kinds(&self) -> BTreeMap<String, u64> {
        self.error_kinds.borrow().clone()
    }
}

/// The short kind of an error message for [`Recorder::error`]: its text up to the first
/// character that is not a letter, space, dash or underscore (numbers, addresses and ids
/// differ between occurrences of the same kind), at most 64 characters.
pub fn error_kind(message: &str) -> String {
    let end = message
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_alphabetic() || c == ' ' || c == '-' || c == '_'))
        .map_or(message.len(), |(i, _)| i);
    let kind = message[..end].trim();
    let kind = if kind.is_empty() { "error" } else { kind };
    kind.chars().take(64).collect()
}

/// The live progress line.
pub struct Progress {
    workload: &'static str,
    start: Instant,
    last_ops: Cell<u64>,
    last_at: Cell<Instant>,
    /// Overwrite the line in place (`\r`) when stderr is a terminal; one line per tick otherwise.
    in_place: bool,
    printed: Cell<bool>,
}

impl Progress {
    pub fn new(workload: &'static str) -> Progress {
        let now = Instant::now();
        // SAFETY: isatty(3) only inspects the descriptor.
        let in_place = unsafe { libc::isatty(libc::STDERR_FILENO) } == 1;
        Progress {
            workload,
            start: now,
            last_ops: Cell::new(0),
            last_at: Cell::new(now),
            in_place,
            printed: Cell::new(false),
        }
    }

    /// The line for the current state of `rec` (the rate is over the time since the last line).
    pub fn line(&self, rec: &Recorder, leader_changes: u64, note: &str) -> String {
        let now = Instant::now();
        let ops = rec.ops();
        let window = now.duration_since(self.last_at.get()).as_secs_f64();
        let rate = if window > 0.0 {
            (ops - self.last_ops.get()) as f64 / window
        } else {
            0.0
        };
        self.last_ops.set(ops);
        self.last_at.set(now);
        format!(
            "[{:>4.0}s] {:<7} ops {ops:>9}  {rate:>9.0}/s  p99 {:>8}  errors {}  leader changes {leader_changes}{note}",
            now.duration_since(self.start).as_secs_f64(),
            self.workload,
            format_us(rec.p99_us()),
            rec.errors(),
        )
    }

    /// Prints [`Progress::line`] to stderr.
    pub fn print(&self, rec: &Recorder, leader_changes: u64, note: &str) {
        let line = self.line(rec, leader_changes, note);
        let mut err = std::io::stderr().lock();
        if self.in_place {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.printed.set(true);
    }

    /// Ends an in-place line so what follows starts on a fresh line.
    pub fn finish(&self) {
        if self.in_place && self.printed.get() {
            eprintln!();
        }
    }
}

/// `1234` µs as `1.23 ms`, `56` µs as `56 µs`, seconds above 10 s.
pub fn format_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us} µs")
    } else if us < 10_000_000 {
        format!("{:.2} ms", us as f64 / 1_000.0)
    } else {
        format!("{:.1} s", us as f64 / 1_000_000.0)
    }
}

/// Broker workload figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BrokerFigures {
    pub brokers: usize,
    pub heartbeat_interval_ms: u64,
    /// Brokers that reached the Active state.
    pub unfenced: u64,
    /// From sending the registration to the heartbeat answer that unfenced the broker.
    pub registration_to_unfenced_p50_us: u64,
    pub registration_to_unfenced_p99_us: u64,
    pub registration_to_unfenced_max_us: u64,
}

/// The raw figures of the nodes' disk a run's latencies are read against (measured under
/// `--log-dir` with the same code as `corum bench disk`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RawDisk {
    /// 4 KiB write + fdatasync p50.
    pub raw_fsync_p50_us: u64,
    /// 4 KiB O_DSYNC write p50: how the log makes a small round durable.
    pub raw_dsync_write_p50_us: u64,
    /// Files of the quorum write figure (one per voter).
    pub raw_quorum_writers: usize,
    /// `raw_quorum_writers` 4 KiB O_DSYNC writes issued at once, until a majority completed
    /// (p50): what a commit waits for disks when the voters' logs share this disk.
    pub raw_quorum_write_p50_us: u64,
}

impl RawDisk {
    /// The quorum write figure as a sentence, when measured.
    pub fn quorum_line(&self, p50_over: f64) -> Option<String> {
        (self.raw_quorum_write_p50_us > 0).then(|| {
            format!(
                "quorum write: {} O_DSYNC writes at once on this disk, a majority done in {} (p50 latency = {:.2} x that)",
                self.raw_quorum_writers,
                format_us(self.raw_quorum_write_p50_us),
                p50_over
            )
        })
    }
}

/// The result of one run: the `--json` object (every field the issue names, plus context).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub workload: &'static str,
    /// The slow consumers' counts (`--slow-consumers`; absent without).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abuse: Option<super::abuse::AbuseReport>,
    pub clients: usize,
    pub connections: usize,
    /// How long the measured phase lasted.
    pub duration_secs: f64,
    /// Acknowledged operations (for `brokers`: heartbeats answered).
    pub ops: u64,
    pub ops_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    /// Client loops (brokers) still waiting for an answer when the grace period ended; they
    /// were stopped, their requests counted neither as acknowledged nor as errors.
    pub unfinished: u64,
    /// Leader changes the clients saw (redirects and reconnections to a new leader).
    pub leader_changes: u64,
    /// Where the disk figures were measured (`--log-dir`; absent: not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_dir: Option<String>,
    /// The disk's own figures (0s when not measured).
    #[serde(flatten)]
    pub raw: RawDisk,
    /// `p50_us / raw_fsync_p50_us` (0 when not measured).
    pub p50_over_raw_fsync_p50: f64,
    /// `p50_us / raw_quorum_write_p50_us` (0 when not measured).
    pub p50_over_raw_quorum_write_p50: f64,
    /// DescribeQuorum round trip to the active controller before the load, p50 (0 when not
    /// measured): one hop through corum's network path that writes nothing and does not cross
    /// to the controller shard (the RPC server answers it from the Raft driver's status).
    pub rpc_round_trip_p50_us: u64,
    /// What a write cannot beat here: two such round trips (client to leader, leader to the
    /// followers) plus `raw_quorum_write_p50_us` (0 unless both are measured).
    pub commit_floor_us: u64,
    /// `p50_us / commit_floor_us` (0 when not measured).
    pub p50_over_commit_floor: f64,
    /// CPU per acknowledged operation: the nodes' (`--metrics`) and the load generator's.
    #[serde(flatten)]
    pub cpu: CpuFigures,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub broker: Option<BrokerFigures>,
    /// With `--verify`: writes acknowledged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<u64>,
    /// With `--verify`: acknowledged writes missing when read back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// The history workload: operations written to the history file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_ops: Option<u64>,
}

impl Report {
    /// Fills the throughput and latency fields from `rec` over `elapsed`, and the ratio to
    /// `raw`.
    pub fn measured(&mut self, rec: &Recorder, elapsed: Duration, raw: RawDisk) {
        let p = rec.percentiles();
        self.duration_secs = elapsed.as_secs_f64();
        self.ops = rec.ops();
        self.ops_per_sec = if self.duration_secs > 0.0 {
            self.ops as f64 / self.duration_secs
        } else {
            0.0
        };
        self.p50_us = p.p50_us;
        self.p99_us = p.p99_us;
        self.p999_us = p.p999_us;
        self.max_us = p.max_us;
        self.errors = rec.errors();
        self.error_kinds = rec.error_kinds();
        self.set_raw(raw);
    }

    /// Record the data directory's figures and the ratios of the p50 latency to them.
    pub fn set_raw(&mut self, raw: RawDisk) {
        self.raw = raw;
        self.ratios();
    }

    /// Record the round trip of a request that writes nothing (see `rpc_round_trip_p50_us`).
    pub fn set_rpc_round_trip(&mut self, p50_us: u64) {
        self.rpc_round_trip_p50_us = p50_us;
        self.ratios();
    }

    /// The commit floor and the ratios of the p50 latency to the measured baselines.
    fn ratios(&mut self) {
        let ratio = |base: u64| {
            if base > 0 {
                self.p50_us as f64 / base as f64
            } else {
                0.0
            }
        };
        self.commit_floor_us =
            if self.rpc_round_trip_p50_us > 0 && self.raw.raw_quorum_write_p50_us > 0 {
                2 * self.rpc_round_trip_p50_us + self.raw.raw_quorum_write_p50_us
            } else {
                0
            };
        self.p50_over_raw_fsync_p50 = ratio(self.raw.raw_fsync_p50_us);
        self.p50_over_raw_quorum_write_p50 = ratio(self.raw.raw_quorum_write_p50_us);
        self.p50_over_commit_floor = ratio(self.commit_floor_us);
    }

    /// The commit floor as a sentence, when measured.
    pub fn floor_line(&self) -> Option<String> {
        (self.commit_floor_us > 0).then(|| {
            format!(
                "commit floor: 2 round trips of a request answered without a write or a hop to the controller shard ({} each) + the quorum write ({}) = {} (p50 latency = {:.2} x that)",
                format_us(self.rpc_round_trip_p50_us),
                format_us(self.raw.raw_quorum_write_p50_us),
                format_us(self.commit_floor_us),
                self.p50_over_commit_floor
            )
        })
    }

    /// The human summary (several lines).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let w = &mut out;
        let what = match self.workload {
            "brokers" => "heartbeats",
            "topics" => "topic creations",
            _ => "config writes",
        };
        let _ = writeln!(
            w,
            "workload {}: {} clients over {} connection(s), {:.1} s",
            self.workload, self.clients, self.connections, self.duration_secs
        );
        if let Some(p) = self.partitions {
            let _ = writeln!(w, "  partitions per topic: {p}");
        }
        let _ = writeln!(
            w,
            "  {what}: {} acknowledged, {:.0}/s",
            self.ops, self.ops_per_sec
        );
        let _ = writeln!(
            w,
            "  latency: p50 {}  p99 {}  p99.9 {}  max {}",
            format_us(self.p50_us),
            format_us(self.p99_us),
            format_us(self.p999_us),
            format_us(self.max_us)
        );
        match &self.log_dir {
            Some(dir) if self.raw.raw_fsync_p50_us > 0 => {
                let _ = writeln!(w, "  disk measured under {dir}");
            }
            Some(_) => {
                let _ = writeln!(w, "  disk not measured (--raw-fsync-seconds 0)");
            }
            None => {
                let _ = writeln!(
                    w,
                    "  disk not measured (--log-dir names the nodes' log directory)"
                );
            }
        }
        if self.raw.raw_fsync_p50_us > 0 {
            let _ = writeln!(
                w,
                "  raw fdatasync p50 {} (p50 latency = {:.2} x raw fsync); O_DSYNC write p50 {}",
                format_us(self.raw.raw_fsync_p50_us),
                self.p50_over_raw_fsync_p50,
                format_us(self.raw.raw_dsync_write_p50_us)
            );
        }
        if let Some(line) = self.raw.quorum_line(self.p50_over_raw_quorum_write_p50) {
            let _ = writeln!(w, "  {line}");
        }
        if let Some(line) = self.floor_line() {
            let _ = writeln!(w, "  {line}");
        }
        let _ = writeln!(w, "  {}", self.cpu.line());
        if let Some(line) = self.cpu.stages_line() {
            let _ = writeln!(w, "  {line}");
        }
        if let Some(b) = &self.broker {
            let _ = writeln!(
                w,
                "  brokers: {} simulated, heartbeat every {} ms, {} unfenced",
                b.brokers, b.heartbeat_interval_ms, b.unfenced
            );
            let _ = writeln!(
                w,
                "  registration to unfenced: p50 {}  p99 {}  max {}",
                format_us(b.registration_to_unfenced_p50_us),
                format_us(b.registration_to_unfenced_p99_us),
                format_us(b.registration_to_unfenced_max_us)
            );
        }
        let kinds: Vec<String> = self
            .error_kinds
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let _ = writeln!(
            w,
            "  errors: {}{}  leader changes: {}",
            self.errors,
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            },
            self.leader_changes
        );
        if self.unfinished > 0 {
            let _ = writeln!(
                w,
                "  {} client(s) still waiting at the end of the grace period were stopped",
                self.unfinished
            );
        }
        if let (Some(a), Some(l)) = (self.acknowledged, self.lost) {
            let _ = writeln!(
                w,
                "  verify: {a} acknowledged writes read back, {l} lost{}",
                if l == 0 { "" } else { "  <-- DATA LOSS" }
            );
        }
        if let Some(n) = self.history_ops {
            let _ = writeln!(
                w,
                "  history: {n} operations written (check them: corum check-history FILE)"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rates, percentiles and the fsync ratio come out of the recorded samples; errors are
    /// grouped by kind.
    #[test]
    fn report_math() {
        let rec = Recorder::default();
        for us in 1..=1000u64 {
            rec.ok(Duration::from_micros(us));
        }
        rec.error("not the active controller");
        rec.error("not the active controller");
        rec.error("timeout");
        let mut r = Report {
            workload: "configs",
            clients: 4,
            connections: 1,
            ..Report::default()
        };
        r.measured(
            &rec,
            Duration::from_secs(2),
            RawDisk {
                raw_fsync_p50_us: 250,
                raw_quorum_writers: 3,
                raw_quorum_write_p50_us: 400,
                ..RawDisk::default()
            },
        );
        assert_eq!(r.ops, 1000);
        assert!((r.ops_per_sec - 500.0).abs() < 1e-9);
        assert!((499..=501).contains(&r.p50_us), "{}", r.p50_us);
        assert!((989..=991).contains(&r.p99_us), "{}", r.p99_us);
        assert!((998..=1000).contains(&r.p999_us), "{}", r.p999_us);
        assert_eq!(r.max_us, 1000);
        assert_eq!(r.errors, 3);
        assert_eq!(r.error_kinds["not the active controller"], 2);
        assert!((r.p50_over_raw_fsync_p50 - r.p50_us as f64 / 250.0).abs() < 1e-9);
        assert!((r.p50_over_raw_quorum_write_p50 - r.p50_us as f64 / 400.0).abs() < 1e-9);
        assert_eq!((r.commit_floor_us, r.p50_over_commit_floor), (0, 0.0));
        r.set_rpc_round_trip(50);
        assert_eq!(r.commit_floor_us, 2 * 50 + 400);
        assert!((r.p50_over_commit_floor - r.p50_us as f64 / 500.0).abs() < 1e-9);
        r.log_dir = Some("/var/lib/corum/node1".into());
        let text = r.render();
        assert!(
            text.contains("disk measured under /var/lib/corum/node1"),
            "{text}"
        );
        assert!(text.contains("3 O_DSYNC writes at once"), "{text}");
        assert!(
            text.contains("(50 µs each) + the quorum write (400 µs) = 500 µs"),
            "{text}"
        );
        assert!(text.contains("CPU per acknowledged op: loadgen"), "{text}");
        assert!(text.contains("1000 acknowledged, 500/s"), "{text}");
        assert!(text.contains("2 not the active controller"), "{text}");
    }

    /// An empty run reports zeros, not a division by zero or a panic.
    #[test]
    fn empty_report() {
        let mut r = Report::default();
        r.measured(&Recorder::default(), Duration::ZERO, RawDisk::default());
        assert_eq!((r.ops, r.p50_us, r.max_us), (0, 0, 0));
        assert_eq!(r.ops_per_sec, 0.0);
        assert_eq!(r.p50_over_raw_fsync_p50, 0.0);
        assert!(!r.render().contains("quorum write"));
        assert!(
            r.render().contains("disk not measured (--log-dir"),
            "{}",
            r.render()
        );
        // A round trip without the quorum write makes no floor.
        r.set_rpc_round_trip(80);
        assert_eq!((r.commit_floor_us, r.p50_over_commit_floor), (0, 0.0));
        assert!(!r.render().contains("commit floor"));
    }

    /// The JSON object has every field the issue lists; the verify fields only with
    /// `--verify`, the broker fields (flattened) only for the brokers workload.
    #[test]
    fn json_shape() {
        let mut r = Report {
            workload: "configs",
            ..Report::default()
        };
        let v = serde_json::to_value(&r).unwrap();
        for key in [
            "workload",
            "clients",
            "ops_per_sec",
            "p50_us",
            "p99_us",
            "p999_us",
            "max_us",
            "errors",
            "leader_changes",
            "raw_fsync_p50_us",
            "raw_quorum_write_p50_us",
            "rpc_round_trip_p50_us",
            "commit_floor_us",
            "p50_over_commit_floor",
            "loadgen_cpu_us_per_op",
            "loadgen_cpu_cores",
        ] {
            assert!(v.get(key).is_some(), "missing {key}: {v}");
        }
        for key in [
            "acknowledged",
            "lost",
            "brokers",
            "partitions",
            "log_dir",
            "cpu_us_per_op",
            "node_cpu",
        ] {
            assert!(v.get(key).is_none(), "unexpected {key}: {v}");
        }
        r.acknowledged = Some(10);
        r.lost = Some(0);
        r.broker = Some(BrokerFigures {
            brokers: 7,
            ..BrokerFigures::default()
        });
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["acknowledged"], 10);
        assert_eq!(v["lost"], 0);
        assert_eq!(v["brokers"], 7);
        assert!(v.get("registration_to_unfenced_p99_us").is_some(), "{v}");
    }

    /// Error kinds drop the varying parts of a message.
    #[test]
    fn error_kinds_are_stable() {
        assert_eq!(
            error_kind("not the active controller; leader is 2 at 127.0.0.1:9"),
            "not the active controller"
        );
        assert_eq!(
            error_kind("cannot connect to 127.0.0.1:1: refused"),
            "cannot connect to"
        );
        assert_eq!(error_kind("42"), "error");
        assert_eq!(error_kind(&"x".repeat(100)).len(), 64);
    }

    /// Durations print in the unit a reader expects.
    #[test]
    fn formatting_units() {
        assert_eq!(format_us(56), "56 µs");
        assert_eq!(format_us(1_234), "1.23 ms");
        assert_eq!(format_us(12_000_000), "12.0 s");
    }
}
