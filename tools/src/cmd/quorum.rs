//! `corum quorum describe --bootstrap HOST:PORT,... --status|--replication [--json]`: the
//! quorum as its leader sees it (DescribeQuorum), what `kafka-metadata-quorum describe` shows.
//! `corum quorum add-controller --config FILE` and `remove-controller --controller-id N
//! --controller-directory-id UUID` change a dynamic quorum's voters (KIP-853), as
//! `kafka-metadata-quorum add-controller/remove-controller` do.
//!
//! | flag            | shows                                                                   |
//! |-----------------|-------------------------------------------------------------------------|
//! | `--status`      | cluster id, leader id, epoch, high watermark, max follower lag, voters (id, directory id, endpoints), observers (id, directory id) |
//! | `--replication` | one row per replica: node id, directory id, log end offset, lag, last fetch and last caught-up ages, Leader/Follower/Observer |
//! | `--json`        | the whole answer as one JSON object (either flag)                      |
//!
//! # Finding the leader
//!
//! Any node answers DescribeQuorum, but only the leader knows every replica's progress. A
//! leader-following [`ControllerClient`] asks a DescribeCluster first (only the active
//! controller answers it, so the client ends up connected to the leader), then
//! DescribeQuorum; an answer from a node that does not lead (leadership moved in between) is
//! asked again, 50 ms apart, until `--timeout-ms` passes.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use corum_client::{
    ClientConfig, ClientError, ControllerClient, DescribeQuorumResponse, ReplicaState, RpcError,
};
use corum_engine::disk::executor_builder;
use corum_node::{RequestBody, ResponseBody};
use corum_raft::message::{AddVoterRequest, RemoveVoterRequest};
use corum_raft::{ReplicaKey, Voter, VoterChangeError};
use corum_runtime::tls::TlsSettings;
use corum_types::NodeId;
use serde::Serialize;

use crate::cmd::admin::describe_client_error;
use crate::cmd::command_config;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Describe the quorum as its leader sees it (DescribeQuorum).
    Describe(DescribeArgs),
    /// Add a running controller as a voter (AddVoter): its id, directory id and controller
    /// listener come from its configuration and its `meta.properties`.
    AddController(AddControllerArgs),
    /// Remove a voter (RemoveVoter), named by its id and directory id.
    RemoveController(RemoveControllerArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct AddControllerArgs {
    /// Client endpoints of the controllers (HOST:PORT,...); any one of them suffices.
    #[arg(long, value_name = "HOST:PORT,...", value_parser = parse_bootstrap)]
    pub bootstrap: Bootstrap,
    /// The new controller's properties file (its `metadata.log.dir` holds its
    /// `meta.properties`).
    #[arg(long)]
    pub config: std::path::PathBuf,
    /// How long to keep asking while the leader answers with a refusal that passes (the
    /// controller not yet caught up, another change pending).
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// A Kafka client properties file: `security.protocol=SSL` and the `ssl.*` keys for
    /// client listeners mapped to SSL.
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<std::path::PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RemoveControllerArgs {
    /// Client endpoints of the controllers (HOST:PORT,...); any one of them suffices.
    #[arg(long, value_name = "HOST:PORT,...", value_parser = parse_bootstrap)]
    pub bootstrap: Bootstrap,
    #[arg(long)]
    pub controller_id: u32,
    /// The voter's directory id (`corum quorum describe --replication` lists it).
    #[arg(long)]
    pub controller_directory_id: corum_types::Uuid,
    /// How long to keep asking while another change is pending.
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// A Kafka client properties file: `security.protocol=SSL` and the `ssl.*` keys for
    /// client listeners mapped to SSL.
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<std::path::PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("view").required(true).args(["status", "replication"])))]
pub struct DescribeArgs {
    /// Client endpoints of the controllers (HOST:PORT,...); any one of them suffices.
    #[arg(long, value_name = "HOST:PORT,...", value_parser = parse_bootstrap)]
    pub bootstrap: Bootstrap,
    /// Cluster id, leader, epoch, high watermark, voters and observers.
    #[arg(long)]
    pub status: bool,
    /// Each replica's log end offset, lag, last fetch and last caught-up time.
    #[arg(long)]
    pub replication: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// How long to look for a leader before failing.
    #[arg(long, default_value_t = 5_000)]
    pub timeout_ms: u64,
    /// A Kafka client properties file: `security.protocol=SSL` and the `ssl.*` keys for
    /// client listeners mapped to SSL.
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<std::path::PathBuf>,
}

/// A parsed `--bootstrap` list (see [`corum_client::parse_bootstrap`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bootstrap(pub Vec<SocketAddr>);

/// Parses `HOST:PORT,...` for clap.
pub fn parse_bootstrap(s: &str) -> Result<Bootstrap, String> {
    corum_client::parse_bootstrap(s)
        .map(Bootstrap)
        .map_err(|e| e.to_string())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::Describe(a) => run_describe(a),
        What::AddController(a) => {
            let voter = voter_of(&a.config)?;
            let id = voter.key.id;
            let body = |request_id| {
                RequestBody::AddVoter(AddVoterRequest {
                    request_id,
                    voter: voter.clone(),
                })
            };
            change_voters(
                &a.bootstrap.0,
                command_config::load_opt(a.command_config.as_deref())?,
                a.timeout_ms,
                body,
            )?;
            println!("controller {id} is a voter");
            Ok(())
        }
        What::RemoveController(a) => {
            let key = ReplicaKey {
                id: NodeId(a.controller_id),
                directory_id: a.controller_directory_id,
            };
            let body = |request_id| {
                RequestBody::RemoveVoter(RemoveVoterRequest {
                    request_id,
                    voter: key,
                })
            };
            change_voters(
                &a.bootstrap.0,
                command_config::load_opt(a.command_config.as_deref())?,
                a.timeout_ms,
                body,
            )?;
            println!("controller {} is no longer a voter", a.controller_id);
            Ok(())
        }
    }
}

/// The voter a controller's configuration describes: its node id, the directory id in its
/// `meta.properties`, its controller listener's endpoint.
pub fn voter_of(config: &std::path::Path) -> anyhow::Result<Voter> {
    let text =
        std::fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
    let node = corum_node::NodeConfig::load(Some(&text), &[])
        .with_context(|| format!("loading {}", config.display()))?;
    let meta_path = node
        .metadata_log_dir
        .join(corum_node::meta_properties::META_PROPERTIES_FILE);
    let meta_text = std::fs::read_to_string(&meta_path).with_context(|| {
        format!(
            "reading {} (format the controller with --no-initial-controllers first)",
            meta_path.display()
        )
    })?;
    let meta = corum_node::meta_properties::MetaProperties::parse(&meta_text, &meta_path)?;
    anyhow::ensure!(
        meta.node_id == node.node_id,
        "{} says node.id {}, but {} says {}",
        config.display(),
        node.node_id,
        meta_path.display(),
        meta.node_id
    );
    let (key, endpoints) = corum_node::config::components::local_replica(&node, meta.directory_id);
    Ok(Voter { key, endpoints })
}

/// Sends the voter change `body(request_id)` to the leader until it commits. A refusal that
/// passes (another change pending, the leader's epoch not yet committed, the new voter not
/// yet caught up) is asked again, 200 ms apart, until `timeout_ms`; any other fails at once
/// with the reason.
pub fn change_voters(
    bootstrap: &[SocketAddr],
    tls: Option<TlsSettings>,
    timeout_ms: u64,
    body: impl Fn(u64) -> RequestBody,
) -> anyhow::Result<()> {
    let bootstrap = bootstrap.to_vec();
    let timeout = Duration::from_millis(timeout_ms);
    executor_builder("corum-quorum")
        .make()
        .map_err(|e| anyhow::anyhow!("starting the glommio executor: {e}"))?
        .run(async move {
            let config = ClientConfig {
                retry_deadline: timeout.max(Duration::from_millis(1)),
                tls,
                ..ClientConfig::new(bootstrap)
            };
            let client = ControllerClient::connect(config)
                .await
                .context("connecting to the quorum")?;
            let start = Instant::now();
            let mut request_id = 0;
            loop {
                request_id += 1;
                let answer = client
                    .call(body(request_id))
                    .await
                    .map_err(|e| anyhow::anyhow!("{}", describe_client_error(&e)))?;
                let refused = match answer {
                    ResponseBody::AddVoter(r) | ResponseBody::RemoveVoter(r) => match r.result {
                        Ok(()) => return Ok(()),
                        Err(e) => e,
                    },
                    other => anyhow::bail!("the leader answered {}", other.kind()),
                };
                let passes = matches!(
                    refused,
                    VoterChangeError::ChangePending
                        | VoterChangeError::EpochNotCommitted
                        | VoterChangeError::NotCaughtUp
                        | VoterChangeError::LeadershipLost
                );
                if !passes || start.elapsed() >= timeout {
                    anyhow::bail!("the leader refused: {}", voter_change_reason(refused));
                }
                glommio::timer::sleep(Duration::from_millis(200)).await;
            }
        })
}

/// What a voter change refusal means, for an operator.
pub fn voter_change_reason(e: VoterChangeError) -> &'static str {
    match e {
        VoterChangeError::NotLeader => "the node asked is not the leader",
        VoterChangeError::ChangePending => "another voter change has not committed yet",
        VoterChangeError::EpochNotCommitted => "the leader has not committed its epoch yet",
        VoterChangeError::AlreadyVoter => "that node id is already a voter",
        VoterChangeError::NotVoter => "no voter has that id and directory id",
        VoterChangeError::NotCaughtUp => {
            "the controller is not caught up: it must be running and fetching from the leader"
        }
        VoterChangeError::WouldBeEmpty => "the quorum would have no voter left",
        VoterChangeError::LeadershipLost => {
            "the leader lost its leadership before the change committed (it may or may not \
             have committed: describe the quorum)"
        }
        VoterChangeError::StaticQuorum => {
            "the quorum is static (controller.quorum.voters, kraft.version 0): its voters \
             cannot change until it is upgraded (corum features upgrade --feature \
             kraft.version=1)"
        }
        VoterChangeError::UnsupportedKraftVersion => {
            "kraft.version can only go up, to a version every controller supports (at most 1)"
        }
        VoterChangeError::DirectoryIdsUnknown => {
            "not every voter has answered the leader with its directory id yet: every voter \
             must be running; retry shortly"
        }
    }
}

fn run_describe(args: DescribeArgs) -> anyhow::Result<()> {
    let bootstrap = args.bootstrap.0.clone();
    let timeout = Duration::from_millis(args.timeout_ms);
    let tls = command_config::load_opt(args.command_config.as_deref())?;
    let d = executor_builder("corum-quorum")
        .make()
        .map_err(|e| anyhow::anyhow!("starting the glommio executor: {e}"))?
        .run(async move { describe_leader(&bootstrap, tls, timeout).await })?;
    let out = if args.json {
        let mut s = serde_json::to_string_pretty(&QuorumJson::from(&d))?;
        s.push('\n');
        s
    } else if args.replication {
        render_replication(&d)
    } else {
        render_status(&d)
    };
    print!("{out}");
    Ok(())
}

/// The leader's DescribeQuorum through a leader-following client (see the module doc),
/// retried until `timeout`. Fails naming the last problem seen when no leader answers in time.
pub async fn describe_leader(
    bootstrap: &[SocketAddr],
    tls: Option<TlsSettings>,
    timeout: Duration,
) -> anyhow::Result<DescribeQuorumResponse> {
    let start = Instant::now();
    let config = ClientConfig {
        request_timeout: Duration::from_millis(1_000).min(timeout.max(Duration::from_millis(1))),
        retry_deadline: timeout.max(Duration::from_millis(1)),
        tls,
        ..ClientConfig::new(bootstrap.to_vec())
    };
    let client = ControllerClient::connect(config)
        .await
        .context("connecting to the quorum")?;
    loop {
        let problem = match client.describe_quorum_at_leader().await {
            // The leader may have changed between the two requests: only an answer from
            // the node that leads counts.
            Ok(d) if d.leader_id == Some(d.node_id) => return Ok(d),
            Ok(d) => format!("node {} answered, but it does not lead", d.node_id),
            // Asking again will not change the ACLs.
            Err(e @ ClientError::Rpc(RpcError::AuthorizationFailed(_))) => {
                anyhow::bail!("DescribeQuorum: {}", describe_client_error(&e))
            }
            Err(e) => e.to_string(),
        };
        if start.elapsed() >= timeout {
            anyhow::bail!(
                "no leader answered DescribeQuorum within {} ms (last: {problem})",
                timeout.as_millis()
            );
        }
        glommio::timer::sleep(Duration::from_millis(50)).await;
    }
}

/// A replica's role in the `--replication` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ReplicaRole {
    Leader,
    Follower,
    Observer,
}

/// One row of `--replication`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReplicaJson {
    pub node_id: u32,
    pub directory_id: Option<String>,
    pub log_end_offset: Option<u64>,
    pub lag: Option<u64>,
    pub last_fetch_age_ms: Option<u64>,
    pub last_caught_up_age_ms: Option<u64>,
    pub status: ReplicaRole,
    /// A voter's listeners (`NAME://HOST:PORT`); empty for an observer.
    pub endpoints: Vec<String>,
}

/// The `--json` object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QuorumJson {
    pub cluster_id: String,
    /// The node that answered (the leader).
    pub node_id: u32,
    pub leader_id: Option<u32>,
    pub leader_epoch: u64,
    pub high_watermark: u64,
    pub max_follower_lag: Option<u64>,
    pub voters: Vec<u32>,
    pub observers: Vec<u32>,
    pub replicas: Vec<ReplicaJson>,
}

impl From<&DescribeQuorumResponse> for QuorumJson {
    fn from(d: &DescribeQuorumResponse) -> QuorumJson {
        QuorumJson {
            cluster_id: d.cluster_id.to_string(),
            node_id: d.node_id.0,
            leader_id: d.leader_id.map(|l| l.0),
            leader_epoch: d.leader_epoch.0,
            high_watermark: d.high_watermark.0,
            max_follower_lag: d.max_follower_lag(),
            voters: d.voters.iter().map(|r| r.replica_id.0).collect(),
            observers: d.observers.iter().map(|r| r.replica_id.0).collect(),
            replicas: rows(d)
                .map(|(r, role)| ReplicaJson {
                    node_id: r.replica_id.0,
                    directory_id: r.directory_id.map(|u| u.to_string()),
                    log_end_offset: r.log_end_offset.map(|o| o.0),
                    lag: r.lag,
                    last_fetch_age_ms: r.last_fetch_age_ms,
                    last_caught_up_age_ms: r.last_caught_up_age_ms,
                    status: role,
                    endpoints: r.endpoints.iter().map(endpoint).collect(),
                })
                .collect(),
        }
    }
}

/// Voters (the leader first, then by id), then observers, each with its role.
fn rows(d: &DescribeQuorumResponse) -> impl Iterator<Item = (&ReplicaState, ReplicaRole)> + '_ {
    let leader = d.leader_id;
    let leaders = d
        .voters
        .iter()
        .filter(move |r| Some(r.replica_id) == leader);
    let followers = d
        .voters
        .iter()
        .filter(move |r| Some(r.replica_id) != leader);
    leaders
        .map(|r| (r, ReplicaRole::Leader))
        .chain(followers.map(|r| (r, ReplicaRole::Follower)))
        .chain(d.observers.iter().map(|r| (r, ReplicaRole::Observer)))
}

/// `NAME://HOST:PORT`, an IPv6 host in brackets (as Kafka prints a listener).
fn endpoint(e: &corum_raft::Endpoint) -> String {
    if e.host.contains(':') {
        format!("{}://[{}]:{}", e.listener, e.host, e.port)
    } else {
        format!("{}://{}:{}", e.listener, e.host, e.port)
    }
}

/// Replicas as `kafka-metadata-quorum describe --status` lists them: one JSON-like object
/// each, with the directory id when known and the endpoints when any.
fn replicas(rs: &[ReplicaState]) -> String {
    let v: Vec<String> = rs
        .iter()
        .map(|r| {
            let mut s = format!("{{\"id\": {}", r.replica_id.0);
            if let Some(d) = r.directory_id {
                let _ = write!(s, ", \"directoryId\": \"{d}\"");
            }
            if !r.endpoints.is_empty() {
                let e: Vec<String> = r
                    .endpoints
                    .iter()
                    .map(|e| format!("\"{}\"", endpoint(e)))
                    .collect();
                let _ = write!(s, ", \"endpoints\": [{}]", e.join(", "));
            }
            s.push('}');
            s
        })
        .collect();
    format!("[{}]", v.join(", "))
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn age(ms: Option<u64>) -> String {
    ms.map_or_else(|| "-".into(), |ms| format!("{ms} ms ago"))
}

/// The `--status` text.
pub fn render_status(d: &DescribeQuorumResponse) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "ClusterId:       {}", d.cluster_id);
    let _ = writeln!(w, "LeaderId:        {}", opt(d.leader_id.map(|l| l.0)));
    let _ = writeln!(w, "LeaderEpoch:     {}", d.leader_epoch.0);
    let _ = writeln!(w, "HighWatermark:   {}", d.high_watermark.0);
    let _ = writeln!(w, "MaxFollowerLag:  {}", opt(d.max_follower_lag()));
    let _ = writeln!(w, "CurrentVoters:   {}", replicas(&d.voters));
    let _ = writeln!(w, "CurrentObservers: {}", replicas(&d.observers));
    out
}

/// The `--replication` table, columns aligned.
pub fn render_replication(d: &DescribeQuorumResponse) -> String {
    let header = [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetch",
        "LastCaughtUp",
        "Status",
    ];
    let mut table: Vec<[String; 7]> = vec![header.map(String::from)];
    for (r, role) in rows(d) {
        table.push([
            r.replica_id.0.to_string(),
            opt(r.directory_id),
            opt(r.log_end_offset.map(|o| o.0)),
            opt(r.lag),
            age(r.last_fetch_age_ms),
            age(r.last_caught_up_age_ms),
            format!("{role:?}"),
        ]);
    }
    let mut widths = [0usize; 7];
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_types::{Epoch, LogOffset, NodeId, Uuid};

    fn replica(id: u32, leo: u64, lag: Option<u64>) -> ReplicaState {
        ReplicaState {
            replica_id: NodeId(id),
            directory_id: Some(Uuid([id as u8; 16])),
            log_end_offset: Some(LogOffset(leo)),
            lag,
            last_fetch_age_ms: Some(5),
            last_caught_up_age_ms: lag.map(|l| l * 10),
            endpoints: vec![corum_raft::Endpoint {
                listener: "CONTROLLER".into(),
                host: if id == 3 {
                    "::1".into()
                } else {
                    format!("h{id}")
                },
                port: 9093,
            }],
        }
    }

    fn sample() -> DescribeQuorumResponse {
        DescribeQuorumResponse {
            cluster_id: Uuid([7; 16]),
            node_id: NodeId(2),
            leader_id: Some(NodeId(2)),
            leader_epoch: Epoch(4),
            high_watermark: LogOffset(120),
            voters: vec![
                replica(1, 118, Some(2)),
                replica(2, 120, Some(0)),
                replica(3, 120, Some(0)),
            ],
            observers: vec![ReplicaState {
                endpoints: Vec::new(),
                ..replica(1000, 100, Some(20))
            }],
        }
    }

    /// Bootstrap lists parse in order; malformed items are refused with the item named.
    #[test]
    fn bootstrap_parsing() {
        let b = parse_bootstrap("127.0.0.1:9001, 127.0.0.1:9002").unwrap();
        assert_eq!(
            b.0,
            vec![
                "127.0.0.1:9001".parse::<SocketAddr>().unwrap(),
                "127.0.0.1:9002".parse::<SocketAddr>().unwrap()
            ]
        );
        assert!(parse_bootstrap("").is_err());
        assert!(parse_bootstrap("127.0.0.1")
            .unwrap_err()
            .contains("127.0.0.1"));
        assert!(parse_bootstrap("127.0.0.1:99999")
            .unwrap_err()
            .contains("99999"));
    }

    /// The leader comes first in the table and the JSON, followers next, observers last,
    /// each with its role; the status names the leader, epoch, max follower lag and ids.
    #[test]
    fn rendering_orders_roles() {
        let d = sample();
        let j = QuorumJson::from(&d);
        let order: Vec<(u32, ReplicaRole)> =
            j.replicas.iter().map(|r| (r.node_id, r.status)).collect();
        assert_eq!(
            order,
            [
                (2, ReplicaRole::Leader),
                (1, ReplicaRole::Follower),
                (3, ReplicaRole::Follower),
                (1000, ReplicaRole::Observer)
            ]
        );
        assert_eq!(j.max_follower_lag, Some(2));
        assert_eq!(j.voters, [1, 2, 3]);
        assert_eq!(j.observers, [1000]);
        let v = serde_json::to_value(&j).unwrap();
        for key in [
            "cluster_id",
            "leader_id",
            "leader_epoch",
            "high_watermark",
            "voters",
            "observers",
            "replicas",
        ] {
            assert!(v.get(key).is_some(), "missing {key}: {v}");
        }
        assert_eq!(v["replicas"][3]["status"], "Observer");

        let s = render_status(&d);
        assert!(s.contains("LeaderId:        2"), "{s}");
        assert!(s.contains("LeaderEpoch:     4"), "{s}");
        assert!(s.contains("HighWatermark:   120"), "{s}");
        assert!(s.contains("MaxFollowerLag:  2"), "{s}");
        let dir = |id: u8| Uuid([id; 16]).to_string();
        assert!(
            s.contains(&format!(
                "CurrentVoters:   [{{\"id\": 1, \"directoryId\": \"{}\", \"endpoints\": \
                 [\"CONTROLLER://h1:9093\"]}}, ",
                dir(1)
            )),
            "{s}"
        );
        assert!(
            s.contains("\"endpoints\": [\"CONTROLLER://[::1]:9093\"]}]"),
            "{s}"
        );
        assert!(
            s.contains(&format!(
                "CurrentObservers: [{{\"id\": 1000, \"directoryId\": \"{}\"}}]",
                Uuid([1000u32 as u8; 16])
            )),
            "{s}"
        );
        assert_eq!(v["replicas"][1]["endpoints"][0], "CONTROLLER://h1:9093");

        let t = render_replication(&d);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert!(lines[0].starts_with("NodeId"), "{t}");
        assert!(
            lines[1].starts_with("2 ") && lines[1].ends_with("Leader"),
            "{t}"
        );
        assert!(lines[4].starts_with("1000") && lines[4].ends_with("Observer"));
        assert!(lines[2].contains("20 ms ago"), "{t}");
        // Columns line up: every row puts its status at the same position as the header.
        let col = lines[0].find("Status").unwrap();
        assert!(lines[1..].iter().all(|l| l.len() > col));
    }

    /// A replica the leader knows nothing about shows dashes, not zeros.
    #[test]
    fn unknown_values_show_dashes() {
        let mut d = sample();
        d.voters[0] = ReplicaState {
            replica_id: NodeId(1),
            directory_id: None,
            log_end_offset: None,
            lag: None,
            last_fetch_age_ms: None,
            last_caught_up_age_ms: None,
            endpoints: Vec::new(),
        };
        let t = render_replication(&d);
        assert!(render_status(&d).contains("CurrentVoters:   [{\"id\": 1}, "));
        let row = t.lines().find(|l| l.starts_with("1 ")).unwrap();
        assert_eq!(
            row.split_whitespace().filter(|c| *c == "-").count(),
            5,
            "{t}"
        );
    }
}
