//! `corum format`: writes `meta.properties` and the bootstrap voter set into `metadata.log.dir`.
//!
//! The configuration comes from `--config FILE` and/or repeated `--set key=value` (the same keys
//! as `corum run`). The cluster id is `--cluster-id` (make one with `corum random-uuid`). The
//! voter set is `--standalone` (this node alone, a quorum of one: adding voters at run time,
//! KIP-853's AddVoter, is not served yet),
//! `--initial-controllers ID@HOST:PORT:DIRECTORY_ID,...` (every initial voter, each formatted
//! with the same list), or neither when the config has a static `controller.quorum.voters`.
//! The rules are in `corum_node::format`.
//!
//! The cluster's features, as Kafka's `kafka-storage format`: `--release-version` (default
//! 4.1; a release such as `4.0` means its latest `metadata.version`, or a level such as
//! `3.7-IV2`) sets `metadata.version` and the default levels of the other features, and
//! `--feature NAME=LEVEL` overrides one of those (`group.version=0`). They are kept in
//! `bootstrap.checkpoint` and finalized by the first active controller; later changes are
//! UpdateFeatures (`corum features upgrade`, `kafka-features`). Every controller of a cluster
//! is formatted with the same release; only the first active one's counts.

use std::path::PathBuf;

use anyhow::Context;
use corum_controller::control::feature_control::{
    bootstrap_features, metadata_version_name, BootstrapFeature, DEFAULT_RELEASE, METADATA_VERSION,
};
use corum_engine::disk::StdDisk;
use corum_node::config::{parse_voters, NodeConfig};
use corum_node::format::{format_dir, plan_format, BootstrapChoice, FormatOutcome};
use corum_types::Uuid;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Node configuration (Kafka properties format).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Set or override one configuration key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub set: Vec<(String, String)>,
    /// The cluster id (22 characters of URL-safe base64; `corum random-uuid` makes one).
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    pub cluster_id: String,
    /// Make this node the only initial voter of a dynamic quorum.
    #[arg(long, conflicts_with_all = ["initial_controllers", "no_initial_controllers"])]
    pub standalone: bool,
    /// The initial voters of a dynamic quorum: ID@HOST:PORT:DIRECTORY_ID,...
    #[arg(long, value_name = "VOTERS", conflicts_with = "no_initial_controllers")]
    pub initial_controllers: Option<String>,
    /// A controller that will join an existing dynamic quorum: it starts as an observer,
    /// finds the leader through controller.quorum.bootstrap.servers, and is added with
    /// `corum quorum add-controller` or by itself (controller.quorum.auto.join.enable).
    #[arg(long)]
    pub no_initial_controllers: bool,
    /// Leave an already formatted directory unchanged instead of failing.
    #[arg(long)]
    pub ignore_formatted: bool,
    /// The Kafka release whose metadata.version (and default feature levels) the cluster
    /// starts at: a release (4.0: its latest level) or a level (3.7-IV2).
    #[arg(long, short = 'r', value_name = "VERSION", default_value = DEFAULT_RELEASE)]
    pub release_version: String,
    /// Set one feature's level at format time, overriding the release's default (repeatable):
    /// group.version=0, transaction.version=1, ...
    #[arg(long = "feature", short = 'f', value_name = "NAME=LEVEL", value_parser = parse_feature)]
    pub features: Vec<(String, u16)>,
}

/// Parses `NAME=LEVEL` for `--feature`.
fn parse_feature(s: &str) -> Result<(String, u16), String> {
    let (name, level) = parse_key_value(s)?;
    let level = level
        .parse()
        .map_err(|_| format!("{s:?}: the level must be a number from 0 to 32767"))?;
    Ok((name, level))
}

/// Parses `key=value` for `--set`.
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected KEY=VALUE"))?;
    let k = k.trim();
    if k.is_empty() {
        return Err(format!("{s:?}: empty key"));
    }
    Ok((k.to_owned(), v.trim().to_owned()))
}

/// Loads the node configuration from `--config` and `--set` (shared with other subcommands).
pub fn load_config(
    config: Option<&PathBuf>,
    set: &[(String, String)],
) -> anyhow::Result<NodeConfig> {
    let text = match config {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading config file {}", path.display()))?,
        ),
        None => None,
    };
    let what = match config {
        Some(path) => path.display().to_string(),
        None => "--set".to_owned(),
    };
    NodeConfig::load(text.as_deref(), set)
        .with_context(|| format!("invalid configuration ({what})"))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = load_config(args.config.as_ref(), &args.set)?;
    let cluster_id: Uuid = args
        .cluster_id
        .parse()
        .with_context(|| format!("--cluster-id {:?}", args.cluster_id))?;
    let choice = match (&args.initial_controllers, args.standalone) {
        (Some(list), _) => BootstrapChoice::InitialControllers(
            parse_voters(list).map_err(|e| anyhow::anyhow!("--initial-controllers: {e}"))?,
        ),
        (None, true) => BootstrapChoice::Standalone,
        (None, false) if args.no_initial_controllers => BootstrapChoice::NoInitialControllers,
        (None, false) => BootstrapChoice::StaticFromConfig,
    };
    let features = bootstrap_features(&args.release_version, &args.features)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let plan = plan_format(&config, cluster_id, &choice, super::uuid::random_uuid()?)?
        .with_features(features)?;
    // Outside glommio: the blocking disk.
    let disk = StdDisk::new();
    match futures_lite::future::block_on(format_dir(&disk, &plan, args.ignore_formatted))? {
        FormatOutcome::Formatted(p) => {
            println!(
                "Formatted {} for cluster {} node {} directory {} (kraft.version {}, {}, {} bootstrap voter(s){})",
                p.dir.display(),
                p.meta.cluster_id,
                p.meta.node_id,
                p.meta.directory_id,
                p.bootstrap.kraft_version,
                describe_features(&p.bootstrap.features),
                p.bootstrap.voters.len(),
                if p.bootstrap.is_joining() {
                    ": joins the quorum of controller.quorum.bootstrap.servers"
                } else {
                    ""
                }
            );
        }
        FormatOutcome::AlreadyFormatted { dir, existing } => {
            println!(
                "{} is already formatted (cluster {} node {}); left unchanged",
                dir.display(),
                existing.cluster_id,
                existing.node_id
            );
        }
    }
    Ok(())
}

/// `metadata.version 4.1-IV1 (27), eligible.leader.replicas.version 1, group.version 1,
/// transaction.version 2`: the features set above level 0, as `corum format` and `corum info`
/// print them.
pub fn describe_features(features: &[BootstrapFeature]) -> String {
    // metadata.version first, then the others in name order.
    let mut ordered: Vec<&BootstrapFeature> = features.iter().collect();
    ordered.sort_by_key(|f| f.name != METADATA_VERSION);
    let set: Vec<String> = ordered
        .into_iter()
        .filter(|f| f.level > 0)
        .map(|f| match metadata_version_name(f.level) {
            Some(name) if f.name == METADATA_VERSION => format!("{} {name} ({})", f.name, f.level),
            _ => format!("{} {}", f.name, f.level),
        })
        .collect();
    set.join(", ")
}
