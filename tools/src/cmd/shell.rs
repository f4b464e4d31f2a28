//! `corum shell --bootstrap HOST:PORT,... [brokers|topics|configs|features|all] [--topic NAME]
//! [--json]`: the metadata image of a running quorum, as an observer replica sees it once it
//! has applied the log up to the leader's high watermark. One-shot, for operators' scripts.
//!
//! | section    | one row per                 | columns                                               |
//! |------------|-----------------------------|-------------------------------------------------------|
//! | `brokers`  | registered broker           | id, epoch, state (fenced/active/shutting-down), rack, listeners |
//! | `topics`   | topic                       | name, id, partitions, state (live/deleting)           |
//! | `topics --topic NAME` | partition of NAME | partition, leader, leader epoch, partition epoch, replicas, ISR |
//! | `configs`  | explicitly set config key   | resource, key=value (`--topic`: that topic's only)    |
//! | `features` | finalized feature           | name, level (the max level), min level                |
//! | `all`      | every section (the default) |                                                       |
//!
//! A header line names the image's end offset, the leader and its epoch, and the high
//! watermark that was waited for. `--json` prints one object with the same header fields and
//! the selected sections.
//!
//! # How the image is obtained
//!
//! 1. The leader's DescribeQuorum ([`describe_leader`], as `corum quorum describe` does) gives
//!    the high watermark, the leader id and epoch, and the voter ids (an observer may not use
//!    one).
//! 2. A [`MetadataFollower`] fetches the log as observer `--observer-id` (long-poll Fetch; it
//!    installs the leader's snapshot when the log it needs is gone) until it has applied up to
//!    that high watermark.
//! 3. Its image is rendered by the pure functions [`render_text`] and [`render_json`].
//!
//! Everything is bounded by `--timeout-ms`; running out names what was waited for.
//!
//! # Offline: `--dir DIR`
//!
//! Instead of `--bootstrap`, a stopped node's `metadata.log.dir` ([`read_directory`]): its
//! newest snapshot, then every data record of its log after it, read without changing anything
//! (for a quorum that lost its majority, or a post-mortem). A stopped node does not know the
//! quorum's high watermark, so the header says the last records may be uncommitted.
//! The observer id must be unique among the replicas fetching from the cluster (the leader
//! holds one fetch per id): the default is `2000000000 + pid % 1000000`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use corum_client::{ClientConfig, ControllerClient, MetadataFollower, ReplicaKey};
use corum_controller::image::{BrokerRegistration, PartitionImage, TopicImage};
use corum_controller::records::ConfigResourceType;
use corum_controller::MetadataImage;
use corum_controller::{aligned, decode_batch};
use corum_engine::disk::{executor_builder, StdDisk};
use corum_engine::log::LogConfig;
use corum_node::data_dir::{visit_frames, DataDir, Mode};
use corum_types::{LogOffset, NodeId, Uuid};
use serde::Serialize;

use crate::cmd::quorum::{describe_leader, parse_bootstrap, Bootstrap};

/// How long one fetch of the observer may wait at the leader.
const FOLLOWER_WAIT_MAX: Duration = Duration::from_millis(500);
/// Per-call timeout of the observer's client (a fetch adds its long-poll wait to it).
const REQUEST_TIMEOUT_MAX: Duration = Duration::from_millis(2_000);
/// Default observer ids are `OBSERVER_ID_BASE + pid % OBSERVER_ID_SPREAD`.
const OBSERVER_ID_BASE: u32 = 2_000_000_000;
const OBSERVER_ID_SPREAD: u32 = 1_000_000;

/// Which part of the image to print.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Section {
    /// Registered brokers.
    Brokers,
    /// Topics (with --topic NAME: its partitions).
    Topics,
    /// Explicitly set configs.
    Configs,
    /// Finalized features.
    Features,
    /// Every section.
    #[default]
    All,
}

impl Section {
    fn shows(self, s: Section) -> bool {
        self == Section::All || self == s
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Client endpoints of the controllers (HOST:PORT,...); any one of them suffices.
    #[arg(
        long,
        value_name = "HOST:PORT,...",
        value_parser = parse_bootstrap,
        required_unless_present = "dir",
        conflicts_with = "dir"
    )]
    pub bootstrap: Option<Bootstrap>,
    /// Instead of a running quorum: a stopped node's `metadata.log.dir` (its newest snapshot
    /// and its log after it; nothing is changed there).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// What to print.
    #[arg(value_enum, default_value_t = Section::All)]
    pub section: Section,
    /// Only this topic, with each of its partitions (topics, configs and all).
    #[arg(long, value_name = "NAME")]
    pub topic: Option<String>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Bound of the whole command: finding the leader, connecting, catching up.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Replica id the observer fetches as; not a voter's, and not one another live fetcher
    /// (a broker) uses. Default: 2000000000 + pid % 1000000.
    #[arg(long, value_name = "ID")]
    pub observer_id: Option<u32>,
}

/// What to render: the section and the topic filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    pub section: Section,
    pub topic: Option<String>,
}

impl View {
    /// Checks that `--topic` goes with a section it filters.
    pub fn new(section: Section, topic: Option<String>) -> anyhow::Result<View> {
        anyhow::ensure!(
            topic.is_none() || matches!(section, Section::Topics | Section::Configs | Section::All),
            "--topic applies to the topics, configs and all sections, not {section:?}"
        );
        Ok(View { section, topic })
    }
}

/// Where the image came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A running quorum: the leader's answer that set the target, and the observer.
    Quorum {
        leader_id: Option<NodeId>,
        leader_epoch: u64,
        /// The leader's high watermark the observer caught up with.
        high_watermark: u64,
        observer_id: NodeId,
    },
    /// A (stopped) node's `metadata.log.dir`: its newest snapshot and its log after it.
    Directory {
        dir: PathBuf,
        snapshot_end: Option<u64>,
        log_end: u64,
    },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let view = View::new(args.section, args.topic.clone())?;
    anyhow::ensure!(args.timeout_ms >= 1, "--timeout-ms must be at least 1");
    let timeout = Duration::from_millis(args.timeout_ms);
    let observer = NodeId(args.observer_id.unwrap_or_else(default_observer_id));
    let bootstrap = args.bootstrap.as_ref().map(|b| b.0.clone());
    let (image, source) = match (bootstrap, &args.dir) {
        // Offline: blocking reads, no executor (and nothing written into the directory).
        (_, Some(dir)) => futures_lite::future::block_on(read_directory(dir))?,
        (Some(bootstrap), None) => executor_builder("corum-shell")
            .make()
            .map_err(|e| anyhow::anyhow!("starting the glommio executor: {e}"))?
            .run(async move { read_image(&bootstrap, observer, timeout).await })?,
        (None, None) => anyhow::bail!("give --bootstrap or --dir"),
    };
    let out = if args.json {
        render_json(&image, &source, &view)?
    } else {
        render_text(&image, &source, &view)?
    };
    print!("{out}");
    Ok(())
}

/// `2000000000 + pid % 1000000`: away from broker ids in practice, and different for
/// concurrent shells.
fn default_observer_id() -> u32 {
    OBSERVER_ID_BASE + std::process::id() % OBSERVER_ID_SPREAD
}

/// The image a node's `metadata.log.dir` holds: its newest snapshot, then every data record
/// of its log after it, as a start would recover them ([`corum_node::data_dir`], read-only over
/// a read-only `StdDisk`: leftover part files and torn tails stay as they are, and a suffix that
/// does not continue the snapshot is left out). Control batches advance the offset only.
pub async fn read_directory(dir: &Path) -> anyhow::Result<(MetadataImage, Source)> {
    let data = open_directory(dir, LogConfig::default()).await?;
    let image = image_of(&data).await?;
    let source = Source::Directory {
        dir: dir.to_path_buf(),
        snapshot_end: data.snapshot.as_ref().map(|s| s.id.end_offset.0),
        log_end: image.end_offset.0,
    };
    Ok((image, source))
}

/// Opens a (stopped) node's `metadata.log.dir` without changing anything in it.
pub async fn open_directory(dir: &Path, log_config: LogConfig) -> anyhow::Result<DataDir<StdDisk>> {
    DataDir::open(StdDisk::read_only(), dir, log_config, Mode::ReadOnly)
        .await
        .with_context(|| format!("reading the data directory {}", dir.display()))
}

/// The image an opened data directory holds (see [`read_directory`]): its snapshot, then the
/// data records of the log from [`DataDir::log_start`] to [`DataDir::log_end`].
pub async fn image_of(data: &DataDir<StdDisk>) -> anyhow::Result<MetadataImage> {
    image_until(data, data.log_end).await
}

/// The image an opened data directory holds at offset `end` (its records below `end`
/// applied): its snapshot, then the data records of the log from [`DataDir::log_start`] up to
/// `end`. Fails if the snapshot ends past `end` or the log ends before it.
pub async fn image_until(data: &DataDir<StdDisk>, end: LogOffset) -> anyhow::Result<MetadataImage> {
    anyhow::ensure!(
        data.log_start <= end && end <= data.log_end,
        "offset {end} is outside what {} holds from its snapshot on ({} to {})",
        data.dir.display(),
        data.log_start,
        data.log_end
    );
    let mut image = match &data.snapshot {
        Some(snap) => {
            let bytes = aligned(&snap.data);
            decode_batch(&bytes)
                .map_err(anyhow::Error::from)
                .and_then(|batch| Ok(MetadataImage::from_snapshot(snap.id.end_offset, batch)?))
                .with_context(|| format!("loading the snapshot through {}", snap.id.end_offset))?
        }
        None => MetadataImage::default(),
    };
    let mut next = data.log_start;
    visit_frames(&data.log, data.log_start, end, |frame| {
        let h = frame.header();
        next = h.end_offset().min(end);
        if h.attributes.is_control() {
            return Ok(());
        }
        let payload = aligned(frame.payload());
        let batch =
            decode_batch(&payload).with_context(|| format!("batch at offset {}", h.base_offset))?;
        for (i, record) in batch.iter().enumerate() {
            let offset = h.base_offset.add(i as u64);
            if offset >= end {
                break;
            }
            // The error names the record's offset.
            image.replay(offset, record)?;
        }
        anyhow::Ok(())
    })
    .await
    .context("reading the metadata log")?;
    image.end_offset = image.end_offset.max(next);
    Ok(image)
}

/// Finds the leader's high watermark, follows the log as `observer` until it has applied that
/// far, and returns the image (see the module doc). Fails naming what it waited for when
/// `timeout` passes first.
async fn read_image(
    bootstrap: &[SocketAddr],
    observer: NodeId,
    timeout: Duration,
) -> anyhow::Result<(MetadataImage, Source)> {
    let start = Instant::now();
    let d = describe_leader(bootstrap, None, timeout)
        .await
        .context("finding the leader's high watermark")?;
    anyhow::ensure!(
        !d.voters.iter().any(|v| v.replica_id == observer),
        "--observer-id {observer} is a voter's id; observers need ids of their own"
    );
    let source = Source::Quorum {
        leader_id: d.leader_id,
        leader_epoch: d.leader_epoch.0,
        high_watermark: d.high_watermark.0,
        observer_id: observer,
    };
    let left = |what: &str| -> anyhow::Result<Duration> {
        let left = timeout.saturating_sub(start.elapsed());
        anyhow::ensure!(
            !left.is_zero(),
            "--timeout-ms {} passed before {what}",
            timeout.as_millis()
        );
        Ok(left)
    };
    let budget = left("connecting the observer")?;
    let config = ClientConfig {
        request_timeout: REQUEST_TIMEOUT_MAX.min(budget),
        retry_deadline: budget,
        ..ClientConfig::new(bootstrap.to_vec())
    };
    let client = ControllerClient::connect(config)
        .await
        .context("connecting the observer to the quorum")?;
    let replica = ReplicaKey {
        id: observer,
        directory_id: Uuid::from_random_bits(random_bits()),
    };
    let follower = MetadataFollower::start(client, replica, FOLLOWER_WAIT_MAX.min(budget));
    let budget = left("the observer started fetching")?;
    if follower.wait_for(d.high_watermark, budget).await {
        return Ok((follower.image(), source));
    }
    let why = match (follower.failure(), follower.last_error()) {
        (Some(f), _) => format!("; the observer stopped: {f}"),
        (None, Some(e)) => format!("; last fetch error: {e}"),
        (None, None) => String::new(),
    };
    anyhow::bail!(
        "observer {observer} had applied the metadata log up to offset {} of the leader's high \
         watermark {} when --timeout-ms {} passed{why}",
        follower.next_offset().0,
        d.high_watermark.0,
        timeout.as_millis()
    )
}

/// 128 bits from the clock and the pid, for the observer's directory id.
fn random_bits() -> u128 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    nanos ^ (u128::from(std::process::id()) << 96)
}

// ---------------------------------------------------------------------------------------------
// The JSON shape: plain serializable copies of the parts of the image shown.

/// One broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BrokerJson {
    pub id: u32,
    pub epoch: u64,
    pub incarnation_id: String,
    /// `fenced`, `active` or `shutting-down`.
    pub state: &'static str,
    pub rack: Option<String>,
    /// `NAME://HOST:PORT` each.
    pub listeners: Vec<String>,
}

/// One partition of a topic (`--topic`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartitionJson {
    pub partition: u32,
    pub leader: Option<u32>,
    pub leader_epoch: u32,
    pub partition_epoch: u32,
    pub replicas: Vec<u32>,
    pub isr: Vec<u32>,
}

/// One topic; `partitions` only with `--topic`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TopicJson {
    pub name: String,
    pub topic_id: String,
    pub partition_count: usize,
    pub deleting: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<PartitionJson>>,
}

/// The set keys of one resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigJson {
    /// `topic` or `broker`.
    pub resource_type: &'static str,
    /// A topic name, a broker id, or empty for the cluster-wide broker default.
    pub resource_name: String,
    pub configs: std::collections::BTreeMap<String, String>,
}

/// One finalized feature.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FeatureJson {
    pub name: String,
    pub level: u16,
    pub min_level: u16,
}

/// The `--json` object; absent sections were not selected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShellJson {
    pub end_offset: u64,
    /// `quorum` (read from a running quorum) or `directory` (from a node's data directory).
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_id: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_epoch: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub high_watermark: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observer_id: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// Directory: the end offset of the snapshot the image starts from (none: offset 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_end: Option<u64>,
    /// Directory: the log's end offset. A stopped node does not know the quorum's high
    /// watermark: its last records may be uncommitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_end: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brokers: Option<Vec<BrokerJson>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<TopicJson>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configs: Option<Vec<ConfigJson>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<FeatureJson>>,
}

fn broker_state(b: &BrokerRegistration) -> &'static str {
    // A broker fenced during (or at the end of) its controlled shutdown keeps the shutdown
    // flag, as in Kafka: fenced is what matters then.
    if b.fenced {
        "fenced"
    } else if b.in_controlled_shutdown {
        "shutting-down"
    } else {
        "active"
    }
}

fn broker_json(b: &BrokerRegistration) -> BrokerJson {
    BrokerJson {
        id: b.broker_id.0,
        epoch: b.broker_epoch.0,
        incarnation_id: b.incarnation_id.to_string(),
        state: broker_state(b),
        rack: b.rack.as_deref().map(str::to_owned),
        listeners: b
            .endpoints
            .iter()
            .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
            .collect(),
    }
}

fn partition_json(index: usize, p: &PartitionImage) -> PartitionJson {
    PartitionJson {
        partition: u32::try_from(index).expect("partition ids are u32"),
        leader: p.leader.map(|l| l.0),
        leader_epoch: p.leader_epoch.0,
        partition_epoch: p.partition_epoch.0,
        replicas: p.replicas.iter().map(|r| r.0).collect(),
        isr: p.isr.iter().map(|r| r.0).collect(),
    }
}

fn topic_json(t: &TopicImage, with_partitions: bool) -> TopicJson {
    TopicJson {
        name: t.name.to_string(),
        topic_id: t.topic_id.to_string(),
        partition_count: t.partitions.len(),
        deleting: t.deleting,
        partitions: with_partitions.then(|| {
            t.partitions
                .iter()
                .enumerate()
                .map(|(i, p)| partition_json(i, p))
                .collect()
        }),
    }
}

fn resource_type_name(t: ConfigResourceType) -> &'static str {
    match t {
        ConfigResourceType::Topic => "topic",
        ConfigResourceType::Broker => "broker",
    }
}

/// The topics shown: all, or the one `--topic` names (an unknown name is an error).
fn selected_topics<'a>(
    image: &'a MetadataImage,
    view: &View,
) -> anyhow::Result<Vec<&'a TopicImage>> {
    match &view.topic {
        None => {
            // By name: what a person scans for (the image keeps them by id).
            let mut all: Vec<&TopicImage> = image.topics.iter().collect();
            all.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(all)
        }
        Some(name) => match image.topics.get_by_name(name) {
            Some(t) => Ok(vec![t]),
            None => anyhow::bail!(
                "topic {name:?} is not in the image at offset {} ({} topics)",
                image.end_offset.0,
                image.topics.len()
            ),
        },
    }
}

/// The configs shown: all, or only the `--topic` one's.
fn selected_configs(image: &MetadataImage, view: &View) -> Vec<ConfigJson> {
    image
        .configs
        .iter()
        .filter(|(rt, name, _)| {
            view.topic
                .as_ref()
                .is_none_or(|topic| *rt == ConfigResourceType::Topic && name == topic)
        })
        .map(|(rt, name, entries)| ConfigJson {
            resource_type: resource_type_name(rt),
            resource_name: name.to_owned(),
            configs: entries
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        })
        .collect()
}

/// The `--json` object of `view` (pure). Fails for an unknown `--topic`.
pub fn shell_json(
    image: &MetadataImage,
    source: &Source,
    view: &View,
) -> anyhow::Result<ShellJson> {
    let s = view.section;
    // The topic is checked whichever section filters by it, so a typo is never silent.
    let topics = selected_topics(image, view)?;
    let (leader_id, leader_epoch, high_watermark, observer_id) = match source {
        Source::Quorum {
            leader_id,
            leader_epoch,
            high_watermark,
            observer_id,
        } => (
            leader_id.map(|l| l.0),
            Some(*leader_epoch),
            Some(*high_watermark),
            Some(observer_id.0),
        ),
        Source::Directory { .. } => (None, None, None, None),
    };
    let (dir, snapshot_end, log_end) = match source {
        Source::Directory {
            dir,
            snapshot_end,
            log_end,
        } => (
            Some(dir.display().to_string()),
            *snapshot_end,
            Some(*log_end),
        ),
        Source::Quorum { .. } => (None, None, None),
    };
    Ok(ShellJson {
        end_offset: image.end_offset.0,
        source: if dir.is_some() { "directory" } else { "quorum" },
        leader_id,
        leader_epoch,
        high_watermark,
        observer_id,
        dir,
        snapshot_end,
        log_end,
        brokers: s
            .shows(Section::Brokers)
            .then(|| image.brokers.iter().map(broker_json).collect()),
        topics: s.shows(Section::Topics).then(|| {
            topics
                .iter()
                .map(|t| topic_json(t, view.topic.is_some()))
                .collect()
        }),
        configs: s
            .shows(Section::Configs)
            .then(|| selected_configs(image, view)),
        features: s.shows(Section::Features).then(|| {
            image
                .features
                .iter()
                .map(|(name, f)| FeatureJson {
                    name: name.to_owned(),
                    level: f.max_level,
                    min_level: f.min_level,
                })
                .collect()
        }),
    })
}

/// [`shell_json`] as pretty JSON text ending in a newline, the fields in their declared order
/// (a `serde_json::Value` would sort them).
pub fn render_json(image: &MetadataImage, source: &Source, view: &View) -> anyhow::Result<String> {
    let mut s = serde_json::to_string_pretty(&shell_json(image, source, view)?)?;
    s.push('\n');
    Ok(s)
}

// ---------------------------------------------------------------------------------------------
// Tables.

/// Rows with columns aligned to the widest cell; two spaces between columns.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, &w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    if rows.is_empty() {
        out.push_str("(none)\n");
    }
    out
}

fn ids(list: &[u32]) -> String {
    let v: Vec<String> = list.iter().map(u32::to_string).collect();
    v.join(",")
}

fn dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// The tables of `view` (pure). Fails for an unknown `--topic`.
pub fn render_text(image: &MetadataImage, source: &Source, view: &View) -> anyhow::Result<String> {
    let j = shell_json(image, source, view)?;
    let mut out = String::new();
    match source {
        Source::Quorum { .. } => {
            let _ = writeln!(
                out,
                "Metadata image at end offset {} (leader {}, epoch {}; high watermark {} applied \
                 by observer {})",
                j.end_offset,
                dash(j.leader_id),
                dash(j.leader_epoch),
                dash(j.high_watermark),
                dash(j.observer_id)
            );
        }
        Source::Directory { dir, .. } => {
            let _ = writeln!(
                out,
                "Metadata image at end offset {} read from {} (snapshot through {}, log to {}; \
                 a stopped node does not know the high watermark: its last records may be \
                 uncommitted)",
                j.end_offset,
                dir.display(),
                dash(j.snapshot_end),
                dash(j.log_end)
            );
        }
    }
    if let Some(brokers) = &j.brokers {
        let _ = writeln!(out, "\nBrokers ({})", brokers.len());
        let rows: Vec<Vec<String>> = brokers
            .iter()
            .map(|b| {
                vec![
                    b.id.to_string(),
                    b.epoch.to_string(),
                    b.state.to_owned(),
                    dash(b.rack.as_deref()),
                    b.listeners.join(","),
                ]
            })
            .collect();
        out.push_str(&table(
            &["Id", "Epoch", "State", "Rack", "Listeners"],
            &rows,
        ));
    }
    if let Some(topics) = &j.topics {
        let _ = writeln!(out, "\nTopics ({})", topics.len());
        let rows: Vec<Vec<String>> = topics
            .iter()
            .map(|t| {
                vec![
                    t.name.clone(),
                    t.topic_id.clone(),
                    t.partition_count.to_string(),
                    if t.deleting { "deleting" } else { "live" }.to_owned(),
                ]
            })
            .collect();
        out.push_str(&table(&["Topic", "TopicId", "Partitions", "State"], &rows));
        for t in topics {
            let Some(partitions) = &t.partitions else {
                continue;
            };
            let _ = writeln!(out, "\nPartitions of {}", t.name);
            let rows: Vec<Vec<String>> = partitions
                .iter()
                .map(|p| {
                    vec![
                        p.partition.to_string(),
                        dash(p.leader),
                        p.leader_epoch.to_string(),
                        p.partition_epoch.to_string(),
                        ids(&p.replicas),
                        ids(&p.isr),
                    ]
                })
                .collect();
            out.push_str(&table(
                &[
                    "Partition",
                    "Leader",
                    "LeaderEpoch",
                    "PartitionEpoch",
                    "Replicas",
                    "Isr",
                ],
                &rows,
            ));
        }
    }
    if let Some(configs) = &j.configs {
        let keys: usize = configs.iter().map(|c| c.configs.len()).sum();
        let _ = writeln!(out, "\nConfigs ({} resources, {keys} keys)", configs.len());
        let rows: Vec<Vec<String>> = configs
            .iter()
            .flat_map(|c| {
                let resource = match (c.resource_type, c.resource_name.as_str()) {
                    ("broker", "") => "broker:<default>".to_owned(),
                    (t, name) => format!("{t}:{name}"),
                };
                c.configs
                    .iter()
                    .map(move |(k, v)| vec![resource.clone(), format!("{k}={v}")])
            })
            .collect();
        out.push_str(&table(&["Resource", "Config"], &rows));
    }
    if let Some(features) = &j.features {
        let _ = writeln!(out, "\nFeatures ({})", features.len());
        let rows: Vec<Vec<String>> = features
            .iter()
            .map(|f| vec![f.name.clone(), f.level.to_string(), f.min_level.to_string()])
            .collect();
        out.push_str(&table(&["Feature", "Level", "MinLevel"], &rows));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use corum_controller::records::PartitionRecordV1;
    use corum_controller::records::{
        BrokerRegistrationChangeRecordV1, ConfigRecordV1, FeatureLevelRecordV1, ListenerV1,
        RegisterBrokerRecordV1, TopicRecordV1, UnfenceBrokerRecordV1,
    };
    use corum_controller::{
        decode_batch, encode_batch, LeaderEpoch, MetadataRecord, PartitionEpoch, PartitionId,
        TopicId,
    };
    use corum_types::{BrokerEpoch, LogOffset};

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        let mut v = vec!["shell"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| c.args)
    }

    fn register(id: u32, epoch: u64, rack: Option<&str>) -> MetadataRecord {
        MetadataRecord::RegisterBroker(RegisterBrokerRecordV1 {
            broker_id: NodeId(id),
            incarnation_id: Uuid([id as u8; 16]),
            broker_epoch: BrokerEpoch(epoch),
            listeners: vec![ListenerV1 {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9000 + id as u16,
            }],
            features: vec![],
            rack: rack.map(str::to_owned),
        })
    }

    fn unfence(id: u32, epoch: u64) -> MetadataRecord {
        MetadataRecord::UnfenceBroker(UnfenceBrokerRecordV1 {
            broker_id: NodeId(id),
            broker_epoch: BrokerEpoch(epoch),
        })
    }

    fn partition(t: TopicId, p: u32, replicas: &[u32], leader: Option<u32>) -> MetadataRecord {
        let ids: Vec<NodeId> = replicas.iter().copied().map(NodeId).collect();
        MetadataRecord::Partition(PartitionRecordV1 {
            topic_id: t,
            partition_id: PartitionId(p),
            replicas: ids.clone(),
            isr: ids,
            leader: leader.map(NodeId),
            leader_epoch: LeaderEpoch(3),
            partition_epoch: PartitionEpoch(5),
        })
    }

    fn config(t: ConfigResourceType, name: &str, key: &str, value: &str) -> MetadataRecord {
        MetadataRecord::Config(ConfigRecordV1 {
            resource_type: t,
            resource_name: name.into(),
            key: key.into(),
            value: Some(value.into()),
        })
    }

    const ORDERS: TopicId = TopicId(Uuid([0xAA; 16]));
    const EVENTS: TopicId = TopicId(Uuid([0xBB; 16]));

    /// Brokers 1 (active, rack r1), 2 (fenced), 3 (active, in controlled shutdown); topics
    /// `orders` (2 partitions) and `events` (1, leaderless); a topic, a broker and a default
    /// config; one feature. Replayed from encoded records, as an observer does.
    fn image() -> MetadataImage {
        let records = vec![
            register(1, 10, Some("r1")),
            unfence(1, 10),
            register(2, 11, None),
            register(3, 12, None),
            unfence(3, 12),
            MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecordV1 {
                broker_id: NodeId(3),
                broker_epoch: BrokerEpoch(12),
                in_controlled_shutdown: true,
            }),
            MetadataRecord::Topic(TopicRecordV1 {
                name: "orders".into(),
                topic_id: ORDERS,
                deleting: false,
            }),
            partition(ORDERS, 0, &[1, 3], Some(1)),
            partition(ORDERS, 1, &[3, 1], Some(3)),
            MetadataRecord::Topic(TopicRecordV1 {
                name: "events".into(),
                topic_id: EVENTS,
                deleting: false,
            }),
            partition(EVENTS, 0, &[2], None),
            config(ConfigResourceType::Topic, "orders", "retention.ms", "60000"),
            config(ConfigResourceType::Broker, "1", "log.retention.ms", "123"),
            config(ConfigResourceType::Broker, "", "num.io.threads", "8"),
            MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                name: "metadata.version".into(),
                min_level: 1,
                max_level: 7,
            }),
        ];
        let bytes = encode_batch(&records);
        let batch = decode_batch(&bytes).expect("a batch just encoded decodes");
        let mut image = MetadataImage::default();
        for (i, r) in batch.iter().enumerate() {
            image.replay(LogOffset(100 + i as u64), r).expect("replays");
        }
        image
    }

    fn source() -> Source {
        Source::Quorum {
            leader_id: Some(NodeId(2)),
            leader_epoch: 4,
            high_watermark: 115,
            observer_id: NodeId(2_000_000_042),
        }
    }

    fn view(section: Section, topic: Option<&str>) -> View {
        View::new(section, topic.map(str::to_owned)).unwrap()
    }

    fn row<'a>(text: &'a str, first: &str) -> Vec<&'a str> {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(first))
            .unwrap_or_else(|| panic!("no row {first:?} in\n{text}"))
            .split_whitespace()
            .collect()
    }

    /// An image read from a data directory says so: no leader fields, the directory, the
    /// snapshot and log ends, and the warning that the last records may be uncommitted.
    #[test]
    fn a_directory_source_is_named() {
        let offline = Source::Directory {
            dir: PathBuf::from("/var/corum/node1"),
            snapshot_end: Some(90),
            log_end: 115,
        };
        let v: serde_json::Value = serde_json::from_str(
            &render_json(&image(), &offline, &view(Section::Brokers, None)).unwrap(),
        )
        .unwrap();
        assert_eq!(v["source"], "directory");
        assert_eq!(
            (v["snapshot_end"].as_u64(), v["log_end"].as_u64()),
            (Some(90), Some(115))
        );
        assert!(
            v.get("leader_id").is_none() && v.get("observer_id").is_none(),
            "{v}"
        );
        let text = render_text(&image(), &offline, &view(Section::Brokers, None)).unwrap();
        let header = text.lines().next().unwrap();
        assert!(header.contains("read from /var/corum/node1"), "{header}");
        assert!(
            header.contains("snapshot through 90, log to 115"),
            "{header}"
        );
        assert!(header.contains("may be uncommitted"), "{header}");
        let quorum = render_json(&image(), &source(), &view(Section::Brokers, None)).unwrap();
        assert!(quorum.contains("\"source\": \"quorum\""), "{quorum}");
    }

    /// The documented arguments parse with their defaults; --topic with a section it does
    /// not filter is refused with the flag named.
    #[test]
    fn arguments_parse() {
        let a = parse(&["--bootstrap", "127.0.0.1:9191,127.0.0.1:9192"]).unwrap();
        assert_eq!(a.section, Section::All);
        assert_eq!(a.bootstrap.as_ref().unwrap().0.len(), 2);
        assert_eq!((a.timeout_ms, a.json, a.observer_id), (10_000, false, None));
        // Exactly one of --bootstrap and --dir.
        let a = parse(&["--dir", "/var/corum", "brokers"]).unwrap();
        assert_eq!(a.dir.as_deref(), Some(Path::new("/var/corum")));
        assert!(a.bootstrap.is_none());
        assert!(parse(&["brokers"]).is_err());
        assert!(parse(&["--dir", "/x", "--bootstrap", "127.0.0.1:1"]).is_err());
        let a = parse(&[
            "--bootstrap",
            "127.0.0.1:1",
            "topics",
            "--topic",
            "orders",
            "--json",
            "--timeout-ms",
            "500",
            "--observer-id",
            "7000",
        ])
        .unwrap();
        assert_eq!(a.section, Section::Topics);
        assert_eq!(a.topic.as_deref(), Some("orders"));
        assert_eq!(
            (a.timeout_ms, a.json, a.observer_id),
            (500, true, Some(7000))
        );
        assert!(parse(&["topics"]).is_err(), "bootstrap required");
        assert!(parse(&["--bootstrap", "127.0.0.1:1", "partitions"]).is_err());
        let e = View::new(Section::Brokers, Some("orders".into())).unwrap_err();
        assert!(e.to_string().contains("--topic"), "{e}");
        assert!(View::new(Section::All, Some("orders".into())).is_ok());
        let id = default_observer_id();
        assert!((OBSERVER_ID_BASE..OBSERVER_ID_BASE + OBSERVER_ID_SPREAD).contains(&id));
    }

    /// Every section's table has a row per entry with the image's values, and the header
    /// names the end offset, the leader and its epoch.
    #[test]
    fn tables_show_every_section() {
        let image = image();
        let t = render_text(&image, &source(), &view(Section::All, None)).unwrap();
        let header = t.lines().next().unwrap();
        assert!(
            header.contains("end offset 115") && header.contains("leader 2, epoch 4"),
            "{t}"
        );
        assert!(
            t.contains("\nBrokers (3)\n") && t.contains("\nTopics (2)\n"),
            "{t}"
        );
        assert_eq!(
            row(&t, "1"),
            ["1", "10", "active", "r1", "PLAINTEXT://127.0.0.1:9001"]
        );
        assert_eq!(
            row(&t, "2"),
            ["2", "11", "fenced", "-", "PLAINTEXT://127.0.0.1:9002"]
        );
        assert_eq!(row(&t, "3")[2], "shutting-down");
        assert_eq!(
            row(&t, "orders"),
            ["orders", &ORDERS.to_string(), "2", "live"]
        );
        assert_eq!(row(&t, "events")[2], "1");
        assert_eq!(
            row(&t, "topic:orders"),
            ["topic:orders", "retention.ms=60000"]
        );
        assert_eq!(row(&t, "broker:1"), ["broker:1", "log.retention.ms=123"]);
        assert_eq!(row(&t, "broker:<default>")[1], "num.io.threads=8");
        assert_eq!(row(&t, "metadata.version"), ["metadata.version", "7", "1"]);
        assert!(
            !t.contains("Partitions of"),
            "partitions only with --topic:\n{t}"
        );
        // Columns line up: the State column starts at the same position in every row.
        let lines: Vec<&str> = t.lines().filter(|l| l.contains("active")).collect();
        let col = t
            .lines()
            .find(|l| l.starts_with("Id "))
            .unwrap()
            .find("State");
        assert!(lines.iter().all(|l| l.find("active") == col), "{t}");
    }

    /// One section alone prints only it; `--topic` adds the partition table (leader "-" when
    /// there is none) and narrows the configs to the topic's.
    #[test]
    fn topic_filter_shows_partitions() {
        let image = image();
        let t = render_text(&image, &source(), &view(Section::Topics, Some("orders"))).unwrap();
        assert!(!t.contains("Brokers") && !t.contains("Features"), "{t}");
        assert!(t.contains("Topics (1)") && !t.contains("events"), "{t}");
        assert!(t.contains("\nPartitions of orders\n"), "{t}");
        assert_eq!(row(&t, "0"), ["0", "1", "3", "5", "1,3", "1,3"]);
        assert_eq!(row(&t, "1"), ["1", "3", "3", "5", "3,1", "3,1"]);
        let t = render_text(&image, &source(), &view(Section::Topics, Some("events"))).unwrap();
        assert_eq!(row(&t, "0"), ["0", "-", "3", "5", "2", "2"]);
        let t = render_text(&image, &source(), &view(Section::Configs, Some("orders"))).unwrap();
        assert!(t.contains("topic:orders") && !t.contains("broker:"), "{t}");
        let t = render_text(
            &MetadataImage::default(),
            &source(),
            &view(Section::Brokers, None),
        )
        .unwrap();
        assert!(
            t.contains("Brokers (0)\nId") && t.ends_with("(none)\n"),
            "{t}"
        );
    }

    /// The JSON holds the header fields and the selected sections only, with each broker's,
    /// topic's, config's and feature's fields; partitions only for `--topic`.
    #[test]
    fn json_holds_the_selected_sections() {
        let image = image();
        let json = |v: &View| -> serde_json::Value {
            serde_json::from_str(&render_json(&image, &source(), v).unwrap()).unwrap()
        };
        let v = json(&view(Section::All, None));
        assert_eq!(v["end_offset"], 115);
        assert_eq!(v["leader_id"], 2);
        assert_eq!(v["leader_epoch"], 4);
        assert_eq!(v["high_watermark"], 115);
        let brokers = v["brokers"].as_array().unwrap();
        assert_eq!(brokers.len(), 3);
        assert_eq!(brokers[0]["id"], 1);
        assert_eq!(brokers[0]["epoch"], 10);
        assert_eq!(brokers[0]["state"], "active");
        assert_eq!(brokers[0]["rack"], "r1");
        assert_eq!(brokers[0]["listeners"][0], "PLAINTEXT://127.0.0.1:9001");
        assert_eq!(brokers[1]["state"], "fenced");
        assert!(brokers[1]["rack"].is_null());
        let orders = v["topics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "orders")
            .unwrap();
        assert_eq!(orders["topic_id"], ORDERS.to_string());
        assert_eq!(orders["partition_count"], 2);
        assert!(orders.get("partitions").is_none(), "{v}");
        let configs = v["configs"].as_array().unwrap();
        assert_eq!(configs.len(), 3);
        assert!(configs.iter().any(|c| c["resource_type"] == "topic"
            && c["resource_name"] == "orders"
            && c["configs"]["retention.ms"] == "60000"));
        assert_eq!(v["features"][0]["name"], "metadata.version");
        assert_eq!(v["features"][0]["level"], 7);

        let v = json(&view(Section::Topics, Some("orders")));
        assert!(
            v.get("brokers").is_none() && v.get("features").is_none(),
            "{v}"
        );
        assert!(v.get("configs").is_none(), "{v}");
        let topics = v["topics"].as_array().unwrap();
        assert_eq!(topics.len(), 1);
        let p = &topics[0]["partitions"];
        assert_eq!(p.as_array().unwrap().len(), 2);
        assert_eq!(p[1]["partition"], 1);
        assert_eq!(p[1]["leader"], 3);
        assert_eq!(p[1]["leader_epoch"], 3);
        assert_eq!(p[1]["replicas"], serde_json::json!([3, 1]));
        assert_eq!(p[1]["isr"], serde_json::json!([3, 1]));
    }

    /// A `--topic` the image does not hold is an error naming it, in every section that
    /// filters by it and in both renderings.
    #[test]
    fn unknown_topic_is_an_error() {
        let image = image();
        for section in [Section::Topics, Section::Configs, Section::All] {
            let v = view(section, Some("nope"));
            let e = render_text(&image, &source(), &v).unwrap_err().to_string();
            assert!(e.contains("\"nope\"") && e.contains("offset 115"), "{e}");
            assert!(render_json(&image, &source(), &v).is_err());
        }
    }
}
