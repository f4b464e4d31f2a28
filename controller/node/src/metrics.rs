//! Prometheus metrics of a node (`corum.metrics.listener`): a tiny HTTP/1.1 server answering
//! `GET /metrics` with the text exposition format (version 0.0.4), on the worker shard.
//!
//! [`render`] is pure: a [`MetricsSnapshot`] (the driver's status, the RPC server's counters,
//! the controller service's status) to text. What it exports:
//!
//! | metric                                   | type      | from                                   |
//! |------------------------------------------|-----------|----------------------------------------|
//! | `corum_raft_epoch`, `corum_raft_leader_id` (-1: none), `corum_raft_is_leader`, `corum_raft_role{role}` | gauge | driver status |
//! | `corum_raft_high_watermark`, `corum_raft_log_end_offset`, `corum_raft_log_durable_end_offset`, `corum_raft_log_start_offset` | gauge | driver status |
//! | `corum_raft_snapshot_end_offset`, `corum_raft_snapshot_lag` (HWM minus the newest snapshot's end) | gauge | driver status |
//! | `corum_raft_snapshots_written_total`, `corum_raft_snapshots_installed_total` | counter | driver status |
//! | `corum_raft_sync_rounds_total`, `corum_raft_answers_released_at_commit_total`, `corum_raft_elections_started_total`, `corum_raft_elections_won_total`, `corum_raft_resignations_total`, `corum_raft_truncations_total` | counter | driver status |
//! | `corum_raft_replica_lag{replica,voter}`  | gauge     | leader only: log end minus the replica's |
//! | `corum_controller_active`, `corum_controller_committed_offset`, `corum_controller_metadata_lag` (HWM minus replayed end) | gauge | service status |
//! | `corum_controller_proposals_total`, `corum_controller_proposed_requests_total`, `corum_controller_activations_total` | counter | service status |
//! | `corum_controller_timeouts_total` | counter | call table: requests answered `Timeout` |
//! | `corum_requests_waiting`, `corum_requests_held` | gauge | call table: requests waiting for an answer, and those whose success waits for a commit |
//! | `corum_controller_commit_latency_seconds` | histogram | call table: a proposing request read by the server → its success released at commit |
//! | `corum_request_stage_seconds{stage}` | histogram | call table, per stage: `queued` (read → handed to the service), `to_proposed` (→ appended by the leader), `to_durable` (→ durable in this node's log), `to_committed` (appended → committed and answered), `answered` (read → any answer) |
//! | `corum_controller_replay_latency_seconds` | histogram | service status: a proposal sent to the driver → replayed by the controller |
//! | `corum_log_sync_duration_seconds` | histogram | driver status: each group-commit round of the log (one O_DSYNC write, or writes + fdatasync), the disk's share of every commit |
//! | `corum_brokers{state="active"|"fenced"|"shutting_down"}`, `corum_topics`, `corum_partitions` | gauge | committed image |
//! | `corum_rpc_connections_open`, `corum_rpc_connections_accepted_total`, `corum_rpc_connections_refused_total`, `corum_rpc_requests_total`, `corum_rpc_malformed_total`, `corum_rpc_authorization_refused_total` | gauge/counter | RPC server |
//! | `corum_kafka_connections_open{listener}`, `corum_kafka_requests_total{listener,api}` | gauge/counter | each Kafka listener (`api` as Kafka's request metrics name it: `Fetch`, `BrokerHeartbeat`, ...) |
//! | `corum_kafka_rendered_batches_total{listener,source}` | counter | metadata log batches rendered for brokers' fetches, `source` `cache` (the listener's cache of renderings) or `afresh` |
//! | `process_cpu_seconds_total`, `process_start_time_seconds`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_threads`, `process_open_fds` | counter/gauge | `/proc` at each scrape ([`process`]) |
//!
//! The server reads at most 8 KiB of request head, answers one request per connection and
//! closes it (Prometheus scrapes are one request each); anything but `GET /metrics` gets 404.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::rc::Rc;

use corum_runtime::ShutdownSignal;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpListener;

use crate::calls::CallStats;
use crate::driver::{DriverStatus, RaftHandle};
use crate::kafka_server::KafkaServerStats;
use crate::port::ServiceStatus;
use crate::rpc_server::RpcServerStats;

pub mod process;

pub use crate::histogram::{LatencyHistogram, LATENCY_BUCKETS_S};

/// Everything one scrape shows.
#[derive(Clone, Debug)]
pub struct MetricsSnapshot {
    pub driver: DriverStatus,
    /// The call table's figures ([`RaftHandle::call_stats`]).
    pub calls: CallStats,
    pub service: ServiceStatus,
    pub rpc: RpcServerStats,
    /// Each Kafka listener's counters, by listener name.
    pub kafka: Vec<(String, KafkaServerStats)>,
}

fn role_name(role: corum_raft::Role) -> &'static str {
    match role {
        corum_raft::Role::Unattached => "unattached",
        corum_raft::Role::Prospective => "prospective",
        corum_raft::Role::Candidate => "candidate",
        corum_raft::Role::Leader => "leader",
        corum_raft::Role::Follower => "follower",
        corum_raft::Role::Resigned => "resigned",
    }
}

const ROLES: [corum_raft::Role; 6] = [
    corum_raft::Role::Unattached,
    corum_raft::Role::Prospective,
    corum_raft::Role::Candidate,
    corum_raft::Role::Leader,
    corum_raft::Role::Follower,
    corum_raft::Role::Resigned,
];

/// Appends one metric family: its HELP and TYPE lines, then one line per labelled sample.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// The text exposition of `m`.
pub fn render(m: &MetricsSnapshot) -> String {
    let mut out = String::with_capacity(4096);
    let (d, c, s, rpc) = (&m.driver, &m.calls, &m.service, &m.rpc);
    let r = &d.raft;
    let flag = |b: bool| f64::from(u8::from(b));
    // Families of one unlabelled sample: (name, type, help, value).
    let singles: [(&str, &str, &str, f64); 31] = [
        ("corum_raft_epoch", "gauge", "The Raft epoch this replica is in.", r.epoch.get() as f64),
        ("corum_raft_leader_id", "gauge", "The leader's node id (-1 while unknown).", r.leader.map_or(-1.0, |l| f64::from(l.get()))),
        ("corum_raft_is_leader", "gauge", "1 on the leader.", flag(r.role == corum_raft::Role::Leader)),
        ("corum_raft_high_watermark", "gauge", "The committed end of the metadata log.", r.high_watermark.get() as f64),
        ("corum_raft_log_end_offset", "gauge", "The metadata log's end offset.", d.log_end_offset.get() as f64),
        ("corum_raft_log_durable_end_offset", "gauge", "The metadata log's fsynced end offset.", d.log_durable_end.get() as f64),
        ("corum_raft_log_start_offset", "gauge", "The metadata log's first offset.", r.log_start_offset.get() as f64),
        ("corum_raft_snapshot_end_offset", "gauge", "End offset of the newest snapshot in the snapshot store (0: none).", d.snapshot_end_offset.get() as f64),
        ("corum_raft_snapshot_lag", "gauge", "Records committed since the newest snapshot (high watermark minus its end).", r.high_watermark.get().saturating_sub(d.snapshot_end_offset.get()) as f64),
        ("corum_raft_snapshots_written_total", "counter", "Snapshots of the controller's state this replica wrote.", d.snapshots_written as f64),
        ("corum_raft_snapshots_installed_total", "counter", "Snapshots this replica downloaded from the leader and installed.", d.stats.snapshots_installed as f64),
        ("corum_raft_sync_rounds_total", "counter", "Group-commit rounds (fdatasync) of the log.", d.sync_rounds as f64),
        ("corum_raft_answers_released_at_commit_total", "counter", "Success answers the Raft driver sent the moment their batch committed (before the controller replayed it).", c.released_at_commit as f64),
        ("corum_raft_elections_started_total", "counter", "Elections this replica started.", d.stats.elections_started as f64),
        ("corum_raft_elections_won_total", "counter", "Elections this replica won.", d.stats.elections_won as f64),
        ("corum_raft_resignations_total", "counter", "Times this replica gave up leadership.", d.stats.resignations as f64),
        ("corum_raft_truncations_total", "counter", "Log suffix truncations (divergence).", d.stats.truncations as f64),
        ("corum_controller_active", "gauge", "1 while this node is the active controller.", flag(s.active_epoch.is_some())),
        ("corum_controller_committed_offset", "gauge", "The end of the committed log replayed into the controller's image.", s.committed_end.get() as f64),
        ("corum_controller_metadata_lag", "gauge", "Records committed but not yet replayed by the controller (high watermark minus replayed end).", r.high_watermark.get().saturating_sub(s.committed_end.get()) as f64),
        ("corum_controller_proposals_total", "counter", "Batches proposed by the active controller.", s.proposals as f64),
        ("corum_controller_proposed_requests_total", "counter", "Requests whose records were proposed (several share a batch).", s.proposed_requests as f64),
        ("corum_controller_timeouts_total", "counter", "Requests answered Timeout.", c.timeouts as f64),
        ("corum_raft_proposals_appended_total", "counter", "Proposals of the controller this leader appended at their predicted offsets.", d.proposals_appended as f64),
        ("corum_raft_proposals_refused_total", "counter", "Proposals of the controller this node refused (not the leader of their epoch, not at the log end, or after a refused one).", d.proposals_refused as f64),
        ("corum_requests_waiting", "gauge", "Client requests waiting for their answer.", d.calls_waiting as f64),
        ("corum_requests_held", "gauge", "Client requests whose success answer waits for their batch to commit.", d.calls_held as f64),
        ("corum_controller_activations_total", "counter", "Times this node became the active controller.", s.activations as f64),
        ("corum_topics", "gauge", "Topics in the committed image.", s.topics as f64),
        ("corum_partitions", "gauge", "Partitions in the committed image.", s.partitions as f64),
        ("corum_rpc_connections_open", "gauge", "Client connections open.", rpc.open as f64),
    ];
    for (name, kind, help, value) in singles {
        family(&mut out, name, kind, help, &[(String::new(), value)]);
    }
    let counters: [(&str, &str, u64); 5] = [
        (
            "corum_rpc_connections_accepted_total",
            "Client connections accepted.",
            rpc.accepted,
        ),
        (
            "corum_rpc_connections_refused_total",
            "Client connections refused (connections_max).",
            rpc.refused,
        ),
        (
            "corum_rpc_requests_total",
            "Client requests served.",
            rpc.requests,
        ),
        (
            "corum_rpc_malformed_total",
            "Client frames answered Malformed.",
            rpc.malformed,
        ),
        (
            "corum_rpc_authorization_refused_total",
            "Client requests refused by the authorizer, whole or some of their items.",
            rpc.authorization_refused,
        ),
    ];
    for (name, help, value) in counters {
        family(
            &mut out,
            name,
            "counter",
            help,
            &[(String::new(), value as f64)],
        );
    }
    let kafka_open: Vec<(String, f64)> = m
        .kafka
        .iter()
        .map(|(listener, k)| (format!("{{listener=\"{listener}\"}}"), k.open as f64))
        .collect();
    family(
        &mut out,
        "corum_kafka_connections_open",
        "gauge",
        "Connections open on each Kafka listener.",
        &kafka_open,
    );
    let kafka_requests: Vec<(String, f64)> = m
        .kafka
        .iter()
        .flat_map(|(listener, k)| {
            k.by_api.iter().map(move |(api, n)| {
                (
                    format!(
                        "{{listener=\"{listener}\",api=\"{}\"}}",
                        corum_kafka::api_name(*api)
                    ),
                    *n as f64,
                )
            })
        })
        .collect();
    family(
        &mut out,
        "corum_kafka_requests_total",
        "counter",
        "Requests served on each Kafka listener, by API.",
        &kafka_requests,
    );
    let rendered: Vec<(String, f64)> = m
        .kafka
        .iter()
        .flat_map(|(listener, k)| {
            [
                ("cache", k.rendered_from_cache),
                ("afresh", k.rendered_afresh),
            ]
            .map(|(source, n)| {
                (
                    format!("{{listener=\"{listener}\",source=\"{source}\"}}"),
                    n as f64,
                )
            })
        })
        .collect();
    family(
        &mut out,
        "corum_kafka_rendered_batches_total",
        "counter",
        "Metadata log batches rendered in Kafka's format for brokers' fetches on each Kafka listener: taken from the listener's cache, or rendered afresh.",
        &rendered,
    );
    let roles: Vec<(String, f64)> = ROLES
        .iter()
        .map(|&role| {
            (
                format!("{{role=\"{}\"}}", role_name(role)),
                flag(r.role == role),
            )
        })
        .collect();
    family(
        &mut out,
        "corum_raft_role",
        "gauge",
        "1 for the replica's current role.",
        &roles,
    );
    let lags: Vec<(String, f64)> = d
        .replicas
        .iter()
        .map(|p| {
            (
                format!("{{replica=\"{}\",voter=\"{}\"}}", p.key.id, p.voter),
                d.log_end_offset
                    .get()
                    .saturating_sub(p.log_end_offset.get()) as f64,
            )
        })
        .collect();
    family(
        &mut out,
        "corum_raft_replica_lag",
        "gauge",
        "Leader only: records each replica is behind the leader's log end.",
        &lags,
    );
    let b = &s.brokers;
    family(
        &mut out,
        "corum_brokers",
        "gauge",
        "Registered brokers by state, in the committed image.",
        &[
            ("{state=\"active\"}".into(), b.active as f64),
            ("{state=\"fenced\"}".into(), b.fenced as f64),
            ("{state=\"shutting_down\"}".into(), b.shutting_down as f64),
        ],
    );
    histogram(
        &mut out,
        "corum_controller_commit_latency_seconds",
        "A proposing request read by the server to its success answer, released when its records commit.",
        &c.commit_latency,
    );
    histograms(
        &mut out,
        "corum_request_stage_seconds",
        "Where a request's time goes: queued (read to handed to the controller), to_proposed (to its records appended by the leader), to_durable (appended to durable in this node's log), to_committed (appended to committed and answered), answered (read to any answer).",
        "stage",
        &[
            ("queued", &c.queued),
            ("to_proposed", &c.to_proposed),
            ("to_durable", &c.to_durable),
            ("to_committed", &c.to_committed),
            ("answered", &c.answered),
        ],
    );
    histogram(
        &mut out,
        "corum_controller_replay_latency_seconds",
        "A proposal sent to the Raft driver to its replay by the controller.",
        &s.replay_latency,
    );
    histogram(
        &mut out,
        "corum_log_sync_duration_seconds",
        "Group-commit rounds of the metadata log: everything appended since the last round made durable (one O_DSYNC write, or writes then fdatasync).",
        &d.sync_duration,
    );
    out
}

/// One histogram family with one series per value of `label`.
fn histograms(
    out: &mut String,
    name: &str,
    help: &str,
    label: &str,
    series: &[(&str, &LatencyHistogram)],
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (value, h) in series {
        write_series(out, name, &format!("{label}=\"{value}\","), h);
    }
}

/// One histogram, cumulative as Prometheus wants it.
fn histogram(out: &mut String, name: &str, help: &str, h: &LatencyHistogram) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    write_series(out, name, "", h);
}

/// The samples of one histogram series: cumulative buckets, sum, count. `labels` is empty
/// or ends with a comma (`stage="queued",`).
fn write_series(out: &mut String, name: &str, labels: &str, h: &LatencyHistogram) {
    let mut cumulative = 0;
    for (i, bound) in LATENCY_BUCKETS_S.iter().enumerate() {
        cumulative += h.counts[i];
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{bound}\"}} {cumulative}");
    }
    cumulative += h.counts[LATENCY_BUCKETS_S.len()];
    let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {cumulative}");
    let own = labels.trim_end_matches(',');
    let braces = if own.is_empty() {
        String::new()
    } else {
        format!("{{{own}}}")
    };
    let _ = writeln!(out, "{name}_sum{braces} {}", h.sum_us as f64 / 1e6);
    let _ = writeln!(out, "{name}_count{braces} {}", h.count);
}

/// Where a scrape reads its values.
pub struct MetricsSources {
    /// The driver's status, and the service's as it last reported it.
    pub raft: RaftHandle,
    pub rpc: Rc<RefCell<RpcServerStats>>,
    /// Each Kafka listener's name and counters.
    pub kafka: Vec<(String, Rc<RefCell<KafkaServerStats>>)>,
}

impl MetricsSources {
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            driver: self.raft.status(),
            calls: self.raft.call_stats(),
            service: self.raft.service_status(),
            rpc: *self.rpc.borrow(),
            kafka: self
                .kafka
                .iter()
                .map(|(name, stats)| (name.clone(), stats.borrow().clone()))
                .collect(),
        }
    }
}

/// Largest request head read.
const HEAD_BYTES_MAX: usize = 8 << 10;

/// Serves `GET /metrics` on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, sources: MetricsSources, shutdown: ShutdownSignal) {
    let sources = Rc::new(sources);
    loop {
        let Some(accepted) = shutdown.run_until(listener.accept()).await else {
            return;
        };
        let Ok(mut stream) = accepted else {
            continue;
        };
        let sources = sources.clone();
        glommio::spawn_local(async move {
            let mut head = Vec::with_capacity(512);
            let mut buf = [0u8; 1024];
            let complete = loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break false,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
                if head.windows(4).any(|w| w == b"\r\n\r\n") {
                    break true;
                }
                if head.len() > HEAD_BYTES_MAX {
                    break false;
                }
            };
            let response = if complete && is_metrics_request(&head) {
                let mut body = render(&sources.snapshot());
                process::render_into(&mut body);
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned()
            };
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.close().await;
        })
        .detach();
    }
}

/// `GET /metrics` (with or without a query string), any HTTP/1.x version.
fn is_metrics_request(head: &[u8]) -> bool {
    let line_end = head.iter().position(|&b| b == b'\r').unwrap_or(head.len());
    let Ok(line) = std::str::from_utf8(&head[..line_end]) else {
        return false;
    };
    let mut parts = line.split(' ');
    let (Some("GET"), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let path = path.split('?').next().unwrap_or("");
    path == "/metrics" && version.starts_with("HTTP/1.")
}

/// Binds the metrics listener.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).map_err(|e| std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn only_get_metrics_is_served() {
        assert!(is_metrics_request(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
        ));
        assert!(is_metrics_request(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"));
        assert!(!is_metrics_request(b"POST /metrics HTTP/1.1\r\n\r\n"));
        assert!(!is_metrics_request(b"GET / HTTP/1.1\r\n\r\n"));
        assert!(!is_metrics_request(b"GET /metrics\r\n\r\n"));
        assert!(!is_metrics_request(b"\xff\xfe"));
    }

    #[test]
    fn latency_buckets_are_exclusive_then_cumulative_when_rendered() {
        let mut h = LatencyHistogram::default();
        h.record(Duration::from_micros(50));
        h.record(Duration::from_micros(300));
        h.record(Duration::from_secs(10));
        assert_eq!(h.counts[0], 0);
        assert_eq!(h.counts[1], 1, "50 µs: at most 0.00005 s");
        assert_eq!(h.counts[4], 1, "300 µs: at most 0.0005 s");
        assert_eq!(h.counts[LATENCY_BUCKETS_S.len()], 1);
        assert_eq!(h.count, 3);
        let mut service = ServiceStatus::starting();
        service.proposals = 7;
        service.topics = 3;
        service.partitions = 12;
        service.brokers = crate::port::BrokerCounts {
            active: 2,
            fenced: 1,
            shutting_down: 0,
        };
        let mut driver = DriverStatus::starting();
        let calls = CallStats {
            commit_latency: h.clone(),
            to_durable: h,
            ..CallStats::default()
        };
        driver.sync_duration.record(Duration::from_micros(180));
        let text = render(&MetricsSnapshot {
            driver,
            calls,
            service,
            rpc: RpcServerStats::default(),
            kafka: vec![(
                "KAFKA".into(),
                KafkaServerStats {
                    open: 2,
                    by_api: [(1, 40), (63, 3)].into_iter().collect(),
                    rendered_from_cache: 7,
                    rendered_afresh: 2,
                    ..KafkaServerStats::default()
                },
            )],
        });
        assert!(
            text.contains("corum_kafka_connections_open{listener=\"KAFKA\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("corum_topics 3\n"));
        assert!(text.contains("corum_partitions 12\n"));
        assert!(
            text.contains("corum_brokers{state=\"active\"} 2\ncorum_brokers{state=\"fenced\"} 1\n")
        );
        assert!(text.contains("corum_kafka_requests_total{listener=\"KAFKA\",api=\"Fetch\"} 40\n"));
        assert!(text.contains(
            "corum_kafka_requests_total{listener=\"KAFKA\",api=\"BrokerHeartbeat\"} 3\n"
        ));
        assert!(text.contains(
            "corum_kafka_rendered_batches_total{listener=\"KAFKA\",source=\"cache\"} 7\n\
             corum_kafka_rendered_batches_total{listener=\"KAFKA\",source=\"afresh\"} 2\n"
        ));
        assert!(
            text.contains("corum_controller_commit_latency_seconds_bucket{le=\"0.000025\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("corum_controller_commit_latency_seconds_bucket{le=\"0.00005\"} 1\n"));
        assert!(text.contains("corum_controller_commit_latency_seconds_bucket{le=\"0.0001\"} 1\n"));
        assert!(text.contains("corum_controller_commit_latency_seconds_bucket{le=\"0.0005\"} 2\n"));
        assert!(text.contains("corum_controller_commit_latency_seconds_bucket{le=\"5\"} 2\n"));
        assert!(text.contains("corum_controller_commit_latency_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("corum_controller_commit_latency_seconds_count 3\n"));
        assert!(text.contains(
            "corum_request_stage_seconds_bucket{stage=\"to_durable\",le=\"0.00005\"} 1\n"
        ));
        assert!(text.contains("corum_request_stage_seconds_count{stage=\"to_durable\"} 3\n"));
        assert!(text.contains("corum_request_stage_seconds_count{stage=\"queued\"} 0\n"));
        assert!(text.contains("corum_controller_proposals_total 7\n"));
        assert!(text.contains("corum_log_sync_duration_seconds_bucket{le=\"0.0001\"} 0\n"));
        assert!(text.contains("corum_log_sync_duration_seconds_bucket{le=\"0.00025\"} 1\n"));
        assert!(
            text.contains("corum_log_sync_duration_seconds_sum 0.00018\n"),
            "{text}"
        );
        assert!(text.contains("corum_raft_leader_id -1\n"));
        assert!(text.contains("corum_raft_role{role=\"unattached\"} 1\n"));
        // Every sample line belongs to a declared metric.
        let declared: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(
                declared
                    .iter()
                    .any(|d| name == *d || name.starts_with(&format!("{d}_"))),
                "{line}"
            );
        }
    }
}
