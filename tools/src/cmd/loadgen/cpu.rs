//! CPU per acknowledged operation: the nodes' (`--metrics`, read from each node's Prometheus
//! endpoint) and the load generator's own (`getrusage`).
//!
//! | figure                  | how                                                             |
//! |-------------------------|-----------------------------------------------------------------|
//! | `cpu_us_per_op`         | the growth of `process_cpu_seconds_total` over the measured phase, summed over every `--metrics` endpoint, divided by the acknowledged operations |
//! | `node_cpu_cores`        | the same sum divided by the measured phase's length: cores the nodes kept busy |
//! | `loadgen_cpu_us_per_op` | this process's user + system CPU time over the measured phase (`getrusage(RUSAGE_SELF)`), per acknowledged operation |
//!
//! | `stage_mean_us`         | where a write's time went on the leader: the growth of each `corum_request_stage_seconds{stage}` sum over the growth of its count, every node together (only the leader serves writes) — `queued` (read to handed to the controller), `to_proposed`, `to_durable`, `to_committed`, `answered` |
//!
//! Each endpoint is read right before the measured phase starts and right after its last
//! request was answered (before `--verify` reads back), so preparation and verification are
//! not counted. A node whose `process_start_time_seconds` changed between the two reads
//! restarted: its counter started again, and the node figures are left out with the reason.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use serde::Serialize;

/// How long one scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest scrape read (a node's page is a few KiB).
const SCRAPE_BYTES_MAX: u64 = 4 << 20;

/// What one node's endpoint said.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSample {
    pub cpu_seconds: f64,
    pub start_time_seconds: f64,
    /// `corum_request_stage_seconds` per stage: (stage, sum in seconds, count); empty for a
    /// node that does not export it.
    pub stages: Vec<(String, f64, f64)>,
}

/// Every figure read at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// One per `--metrics` endpoint, in order (empty when one could not be read).
    pub nodes: Vec<(SocketAddr, NodeSample)>,
    /// Why the endpoints could not be read.
    pub nodes_error: Option<String>,
    /// This process's CPU time so far.
    pub loadgen_cpu_seconds: f64,
}

/// One node's share over the measured phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeCpu {
    /// The node's metrics endpoint.
    pub metrics: String,
    pub cpu_seconds: f64,
    pub cpu_us_per_op: f64,
}

/// The CPU figures of a run (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CpuFigures {
    /// Node CPU per acknowledged operation, every `--metrics` node together (absent without
    /// `--metrics`, or when a node restarted or could not be read at the end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_op: Option<f64>,
    /// Cores the nodes kept busy on average over the measured phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_cpu_cores: Option<f64>,
    /// Per node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_cpu: Vec<NodeCpu>,
    /// Why the node figures are absent although `--metrics` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_cpu_error: Option<String>,
    /// The load generator's own CPU per acknowledged operation.
    pub loadgen_cpu_us_per_op: f64,
    /// Cores the load generator kept busy on average.
    pub loadgen_cpu_cores: f64,
    /// Mean µs a request spent in each stage on the nodes during the run (see the module
    /// doc); empty without `--metrics` or when the nodes do not export the stages.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub stage_mean_us: std::collections::BTreeMap<String, f64>,
}

fn per_op_us(cpu_seconds: f64, ops: u64) -> f64 {
    if ops == 0 {
        0.0
    } else {
        cpu_seconds * 1e6 / ops as f64
    }
}

fn cores(cpu_seconds: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        cpu_seconds / secs
    } else {
        0.0
    }
}

impl CpuFigures {
    /// The figures between two samples of the same endpoints, for `ops` acknowledged
    /// operations over `elapsed`.
    pub fn between(before: &Sample, after: &Sample, ops: u64, elapsed: Duration) -> CpuFigures {
        let mut f = CpuFigures::default();
        let loadgen = (after.loadgen_cpu_seconds - before.loadgen_cpu_seconds).max(0.0);
        f.loadgen_cpu_us_per_op = per_op_us(loadgen, ops);
        f.loadgen_cpu_cores = cores(loadgen, elapsed);
        if let Some(e) = before.nodes_error.as_ref().or(after.nodes_error.as_ref()) {
            f.node_cpu_error = Some(e.clone());
            return f;
        }
        if before.nodes.is_empty() {
            return f;
        }
        assert_eq!(
            before.nodes.len(),
            after.nodes.len(),
            "samples of the same endpoints"
        );
        f.stage_mean_us = stage_means(before, after);
        let mut total = 0.0;
        for ((addr, b), (addr_after, a)) in before.nodes.iter().zip(&after.nodes) {
            assert_eq!(addr, addr_after, "samples of the same endpoints, in order");
            if a.start_time_seconds != b.start_time_seconds {
                f.node_cpu.clear();
                f.node_cpu_error = Some(format!(
                    "the node at {addr} restarted during the run (its CPU counter started again)"
                ));
                return f;
            }
            let used = (a.cpu_seconds - b.cpu_seconds).max(0.0);
            total += used;
            f.node_cpu.push(NodeCpu {
                metrics: addr.to_string(),
                cpu_seconds: used,
                cpu_us_per_op: per_op_us(used, ops),
            });
        }
        f.cpu_us_per_op = Some(per_op_us(total, ops));
        f.node_cpu_cores = Some(cores(total, elapsed));
        f
    }

    /// Where a request's time went, when the nodes told (see the module doc).
    pub fn stages_line(&self) -> Option<String> {
        if self.stage_mean_us.is_empty() {
            return None;
        }
        let order = [
            "queued",
            "to_proposed",
            "to_durable",
            "to_committed",
            "answered",
        ];
        let parts: Vec<String> = order
            .iter()
            .filter_map(|s| self.stage_mean_us.get(*s).map(|us| format!("{s} {us:.0}")))
            .collect();
        Some(format!(
            "where a request's time went on the leader (mean µs): {}",
            parts.join(", ")
        ))
    }

    /// The summary line.
    pub fn line(&self) -> String {
        let loadgen = format!(
            "loadgen {:.1} µs ({:.2} cores)",
            self.loadgen_cpu_us_per_op, self.loadgen_cpu_cores
        );
        match (
            self.cpu_us_per_op,
            self.node_cpu_cores,
            &self.node_cpu_error,
        ) {
            (Some(us), Some(c), _) => format!(
                "CPU per acknowledged op: nodes {us:.1} µs ({} nodes, {c:.2} cores), {loadgen}",
                self.node_cpu.len()
            ),
            (_, _, Some(e)) => {
                format!("CPU per acknowledged op: {loadgen}; nodes not measured: {e}")
            }
            _ => format!("CPU per acknowledged op: {loadgen}; nodes not measured (--metrics)"),
        }
    }
}

/// The value of the unlabelled sample `name` in a Prometheus text page.
pub fn sample_value(page: &str, name: &str) -> Option<f64> {
    page.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let mut parts = l.split_whitespace();
        (parts.next() == Some(name)).then(|| parts.next()?.parse().ok())?
    })
}

/// The mean of each stage over the run: the growth of its sum over the growth of its count,
/// every node's together (a node restarted during the run is left out by the caller).
fn stage_means(before: &Sample, after: &Sample) -> std::collections::BTreeMap<String, f64> {
    let mut totals: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    for ((_, b), (_, a)) in before.nodes.iter().zip(&after.nodes) {
        for (stage, sum, count) in &a.stages {
            let (sum0, count0) = b
                .stages
                .iter()
                .find(|(s, _, _)| s == stage)
                .map_or((0.0, 0.0), |(_, s, c)| (*s, *c));
            let t = totals.entry(stage.clone()).or_default();
            t.0 += (sum - sum0).max(0.0);
            t.1 += (count - count0).max(0.0);
        }
    }
    totals
        .into_iter()
        .filter(|(_, (_, count))| *count > 0.0)
        .map(|(stage, (sum, count))| (stage, sum * 1e6 / count))
        .collect()
}

/// The `corum_request_stage_seconds` sums and counts of a page, by stage.
fn parse_stages(page: &str) -> Vec<(String, f64, f64)> {
    const SUM: &str = "corum_request_stage_seconds_sum{stage=\"";
    const COUNT: &str = "corum_request_stage_seconds_count{stage=\"";
    let value = |l: &str, prefix: &str| -> Option<(String, f64)> {
        let rest = l.strip_prefix(prefix)?;
        let (stage, rest) = rest.split_once("\"}")?;
        Some((stage.to_owned(), rest.trim().parse().ok()?))
    };
    let mut out: Vec<(String, f64, f64)> = Vec::new();
    for l in page.lines() {
        if let Some((stage, sum)) = value(l, SUM) {
            match out.iter_mut().find(|(s, _, _)| *s == stage) {
                Some(e) => e.1 = sum,
                None => out.push((stage, sum, 0.0)),
            }
        } else if let Some((stage, count)) = value(l, COUNT) {
            match out.iter_mut().find(|(s, _, _)| *s == stage) {
                Some(e) => e.2 = count,
                None => out.push((stage, 0.0, count)),
            }
        }
    }
    out
}

/// The CPU figures of one node's page.
pub fn parse_node_sample(page: &str) -> anyhow::Result<NodeSample> {
    let get = |name: &str| {
        sample_value(page, name).with_context(|| {
            format!("the page has no {name} (a node that does not export process metrics?)")
        })
    };
    Ok(NodeSample {
        cpu_seconds: get("process_cpu_seconds_total")?,
        start_time_seconds: get("process_start_time_seconds")?,
        stages: parse_stages(page),
    })
}

/// The body of an HTTP/1.x `200` response; an error for any other status.
pub fn http_body(response: &[u8]) -> anyhow::Result<&str> {
    let text = std::str::from_utf8(response).context("the answer is not UTF-8")?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("the answer has no end of headers")?;
    let status = head.lines().next().unwrap_or("");
    anyhow::ensure!(
        status.starts_with("HTTP/1.") && status.split(' ').nth(1) == Some("200"),
        "the answer is {status:?}, not 200"
    );
    Ok(body)
}

/// `GET /metrics` from `addr`.
async fn scrape(addr: SocketAddr) -> anyhow::Result<NodeSample> {
    let work = async {
        let mut stream = glommio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| anyhow::anyhow!("connecting: {e}"))?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: corum\r\nConnection: close\r\n\r\n")
            .await
            .context("sending the request")?;
        let mut response = Vec::new();
        (&mut stream)
            .take(SCRAPE_BYTES_MAX)
            .read_to_end(&mut response)
            .await
            .context("reading the answer")?;
        parse_node_sample(http_body(&response)?)
    };
    let expired = async {
        glommio::timer::sleep(SCRAPE_TIMEOUT).await;
        Err(anyhow::anyhow!("no answer within {SCRAPE_TIMEOUT:?}"))
    };
    futures_lite::future::or(work, expired)
        .await
        .with_context(|| format!("reading the metrics at {addr}"))
}

/// User + system CPU time of the calling thread (`libc::RUSAGE_THREAD`) or of the whole
/// process (`libc::RUSAGE_SELF`).
pub fn cpu_time(who: libc::c_int) -> std::time::Duration {
    // SAFETY: getrusage fills the zeroed struct it is given and has no other effect.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let rc = libc::getrusage(who, &mut usage);
        assert_eq!(
            rc, 0,
            "getrusage cannot fail with a valid pointer and `who`"
        );
        usage
    };
    let d = |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    d(usage.ru_utime) + d(usage.ru_stime)
}

/// This process's user + system CPU time.
pub fn own_cpu_seconds() -> f64 {
    cpu_time(libc::RUSAGE_SELF).as_secs_f64()
}

/// Reads every endpoint (in order) and this process's CPU time. An endpoint that cannot be
/// read leaves the node figures out, with the reason in [`Sample::nodes_error`].
pub async fn sample(endpoints: &[SocketAddr]) -> Sample {
    let mut out = Sample::default();
    for &addr in endpoints {
        match scrape(addr).await {
            Ok(s) => out.nodes.push((addr, s)),
            Err(e) => {
                out.nodes.clear();
                out.nodes_error = Some(format!("{e:#}"));
                break;
            }
        }
    }
    out.loadgen_cpu_seconds = own_cpu_seconds();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str =
        "# HELP corum_raft_epoch x\n# TYPE corum_raft_epoch gauge\ncorum_raft_epoch 3\n\
        corum_raft_role{role=\"leader\"} 1\n# TYPE process_cpu_seconds_total counter\n\
        process_cpu_seconds_total 12.5\nprocess_cpu_seconds_total_extra 99\n\
        process_start_time_seconds 1700000000.25\n";

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn samples_are_found_by_exact_name() {
        // The unlabelled sample of that exact name, not one whose name only starts with it.
        assert_eq!(sample_value(PAGE, "process_cpu_seconds_total"), Some(12.5));
        assert_eq!(sample_value(PAGE, "corum_raft_epoch"), Some(3.0));
        assert_eq!(sample_value(PAGE, "corum_raft_role"), None, "labelled");
        assert_eq!(sample_value(PAGE, "process_cpu"), None);
        assert_eq!(
            parse_node_sample(PAGE).unwrap(),
            NodeSample {
                cpu_seconds: 12.5,
                start_time_seconds: 1_700_000_000.25,
                stages: Vec::new(),
            }
        );
        let e = parse_node_sample("corum_raft_epoch 3\n").unwrap_err();
        assert!(e.to_string().contains("process_cpu_seconds_total"), "{e}");
    }

    #[test]
    fn http_answers_other_than_200_are_refused() {
        // The body of a 200 comes back; a 404, a truncated head or another protocol do not.
        let ok = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{PAGE}",
            PAGE.len()
        );
        assert_eq!(http_body(ok.as_bytes()).unwrap(), PAGE);
        for bad in [
            &b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5",
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"\xff\xfe\r\n\r\n",
        ] {
            assert!(
                http_body(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    fn sample(nodes: &[(u16, f64, f64)], loadgen: f64) -> Sample {
        Sample {
            nodes: nodes
                .iter()
                .map(|&(port, cpu, start)| {
                    (
                        addr(port),
                        NodeSample {
                            cpu_seconds: cpu,
                            start_time_seconds: start,
                            stages: Vec::new(),
                        },
                    )
                })
                .collect(),
            nodes_error: None,
            loadgen_cpu_seconds: loadgen,
        }
    }

    #[test]
    fn cpu_per_op_sums_the_nodes() {
        // Three nodes use 0.5 + 0.25 + 0.25 s over 2 s for 50 000 ops: 20 µs per op together,
        // 0.5 cores; the load generator 0.1 s: 2 µs per op.
        let before = sample(&[(1, 10.0, 5.0), (2, 20.0, 5.0), (3, 30.0, 6.0)], 1.0);
        let after = sample(&[(1, 10.5, 5.0), (2, 20.25, 5.0), (3, 30.25, 6.0)], 1.1);
        let f = CpuFigures::between(&before, &after, 50_000, Duration::from_secs(2));
        assert!((f.cpu_us_per_op.unwrap() - 20.0).abs() < 1e-9, "{f:?}");
        assert!((f.node_cpu_cores.unwrap() - 0.5).abs() < 1e-9, "{f:?}");
        assert_eq!(f.node_cpu.len(), 3);
        assert!((f.node_cpu[0].cpu_us_per_op - 10.0).abs() < 1e-9, "{f:?}");
        assert!((f.loadgen_cpu_us_per_op - 2.0).abs() < 1e-9, "{f:?}");
        assert!((f.loadgen_cpu_cores - 0.05).abs() < 1e-9, "{f:?}");
        assert!(
            f.line().contains("nodes 20.0 µs (3 nodes, 0.50 cores)"),
            "{}",
            f.line()
        );
        let v = serde_json::to_value(&f).unwrap();
        for key in [
            "cpu_us_per_op",
            "node_cpu_cores",
            "node_cpu",
            "loadgen_cpu_us_per_op",
        ] {
            assert!(v.get(key).is_some(), "missing {key}: {v}");
        }
    }

    #[test]
    fn a_restart_or_a_missing_end_sample_leaves_the_node_figures_out() {
        // A changed start time means the counter started again: no node figure, a reason.
        let before = sample(&[(1, 10.0, 5.0), (2, 20.0, 5.0)], 1.0);
        let after = sample(&[(1, 10.5, 5.0), (2, 0.1, 9.0)], 1.1);
        let f = CpuFigures::between(&before, &after, 100, Duration::from_secs(1));
        assert_eq!((f.cpu_us_per_op, f.node_cpu.len()), (None, 0));
        assert!(f
            .node_cpu_error
            .as_deref()
            .unwrap()
            .contains("127.0.0.1:2 restarted"));
        assert!(
            f.line().contains("nodes not measured: the node at"),
            "{}",
            f.line()
        );
        let v = serde_json::to_value(&f).unwrap();
        assert!(
            v.get("cpu_us_per_op").is_none() && v.get("node_cpu_error").is_some(),
            "{v}"
        );
        // Without --metrics there is no node figure and no error.
        let none = sample(&[], 1.0);
        let f = CpuFigures::between(&none, &sample(&[], 1.5), 10, Duration::from_secs(1));
        assert_eq!((f.cpu_us_per_op, f.node_cpu_error.clone()), (None, None));
        assert!((f.loadgen_cpu_us_per_op - 50_000.0).abs() < 1e-6, "{f:?}");
        assert!(
            f.line().contains("nodes not measured (--metrics)"),
            "{}",
            f.line()
        );
        // An end sample that could not read the nodes names why, and still has the loadgen's.
        let failed = Sample {
            nodes_error: Some("refused".into()),
            ..sample(&[], 1.5)
        };
        let f = CpuFigures::between(&before, &failed, 10, Duration::from_secs(1));
        assert_eq!(f.node_cpu_error.as_deref(), Some("refused"));
        assert!(f.loadgen_cpu_us_per_op > 0.0, "{f:?}");
        // No operation: zeros, not a division by zero.
        let f = CpuFigures::between(&before, &before, 0, Duration::ZERO);
        assert_eq!((f.cpu_us_per_op, f.loadgen_cpu_us_per_op), (Some(0.0), 0.0));
    }

    #[test]
    fn own_cpu_time_grows_with_work() {
        // getrusage sees this process's CPU time grow while it spins.
        let before = own_cpu_seconds();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(own_cpu_seconds() > before);
    }

    /// Proves the stage means are the growth of each stage's sum over the growth of its
    /// count, summed over the nodes, read from the labelled samples of a real page's shape.
    #[test]
    fn stage_means_come_from_the_growth_of_sums_and_counts() {
        let page = |sum_q: f64, count_q: f64, sum_c: f64, count_c: f64| {
            format!(
                "process_cpu_seconds_total 1\nprocess_start_time_seconds 5\n\
                 corum_request_stage_seconds_bucket{{stage=\"queued\",le=\"0.001\"}} 3\n\
                 corum_request_stage_seconds_sum{{stage=\"queued\"}} {sum_q}\n\
                 corum_request_stage_seconds_count{{stage=\"queued\"}} {count_q}\n\
                 corum_request_stage_seconds_sum{{stage=\"to_committed\"}} {sum_c}\n\
                 corum_request_stage_seconds_count{{stage=\"to_committed\"}} {count_c}\n"
            )
        };
        let node = |text: String| (addr(1), parse_node_sample(&text).unwrap());
        let before = Sample {
            nodes: vec![node(page(1.0, 1000.0, 2.0, 1000.0))],
            ..Sample::default()
        };
        let after = Sample {
            nodes: vec![node(page(1.1, 2000.0, 2.5, 2000.0))],
            ..Sample::default()
        };
        let f = CpuFigures::between(&before, &after, 1000, Duration::from_secs(1));
        assert!((f.stage_mean_us["queued"] - 100.0).abs() < 1e-6, "{f:?}");
        assert!(
            (f.stage_mean_us["to_committed"] - 500.0).abs() < 1e-6,
            "{f:?}"
        );
        let line = f.stages_line().unwrap();
        assert!(line.contains("queued 100, to_committed 500"), "{line}");
        // A node that does not export the stages: no stage figures, no line.
        let plain = |cpu: f64| Sample {
            nodes: vec![(
                addr(1),
                parse_node_sample(&format!(
                    "process_cpu_seconds_total {cpu}\nprocess_start_time_seconds 5\n"
                ))
                .unwrap(),
            )],
            ..Sample::default()
        };
        let f = CpuFigures::between(&plain(1.0), &plain(2.0), 10, Duration::from_secs(1));
        assert!(f.stage_mean_us.is_empty() && f.stages_line().is_none());
    }
}
