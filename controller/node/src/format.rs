//! Formatting a log directory (`corum format`) and describing one (`corum info`).
//!
//! [`plan_format`] is pure: from the configuration, the cluster id, the bootstrap choice and a
//! directory id drawn by the caller (randomness stays outside), it computes the
//! [`MetaProperties`] and [`BootstrapCheckpoint`] to write, or a precise refusal. [`format_dir`]
//! writes them:
//!
//! | step                                   | a crash here leaves                            |
//! |----------------------------------------|------------------------------------------------|
//! | create `metadata.log.dir`              | an unformatted directory                       |
//! | write `bootstrap.checkpoint` (atomic)  | an unformatted directory (format can be rerun) |
//! | write `meta.properties` (atomic)       | a formatted directory                          |
//!
//! `meta.properties` goes last because its presence is what "formatted" means.
//!
//! Bootstrap choices (as Kafka's `kafka-storage format`):
//!
//! | config `controller.quorum.voters` | flag                          | kraft.version | voters             |
//! |-----------------------------------|-------------------------------|---------------|--------------------|
//! | set (static quorum)               | none                          | 0             | from the config    |
//! | set                               | `--standalone` / `--initial-…` | refused       |                    |
//! | empty (dynamic quorum)            | `--standalone`                | 1             | this node only     |
//! | empty                             | `--initial-controllers`       | 1             | the list given     |
//! | empty                             | `--no-initial-controllers`    | 1             | none: learnt from the leader's log (needs `controller.quorum.bootstrap.servers`) |
//! | empty                             | none                          | refused       |                    |

use std::fs;
use std::path::{Path, PathBuf};

use corum_controller::control::feature_control::{default_bootstrap_features, BootstrapFeature};
use corum_engine::disk::{Disk, StdDisk};
use corum_engine::log::{LogConfig, TornTail};
use corum_raft::SnapshotId;
use corum_types::{LogOffset, Uuid};

use crate::bootstrap::{BootstrapCheckpoint, BootstrapEndpoint, BootstrapVoter, BOOTSTRAP_FILE};
use crate::config::{NodeConfig, QuorumVoter};
use crate::data_dir::{DataDir, DataDirError, LogFit, Mode};
use crate::error::StorageError;
use crate::meta_properties::MetaProperties;
use crate::quorum_state::QuorumState;

/// How the initial voter set is chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootstrapChoice {
    /// Neither flag: only valid with a static `controller.quorum.voters`.
    StaticFromConfig,
    /// `--standalone`: this node is the only voter.
    Standalone,
    /// `--initial-controllers ID@HOST:PORT:DIRECTORY_ID,...`.
    InitialControllers(Vec<QuorumVoter>),
    /// `--no-initial-controllers`: a controller that joins an existing dynamic quorum.
    NoInitialControllers,
}

/// What `format` will write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatPlan {
    pub dir: PathBuf,
    pub meta: MetaProperties,
    pub bootstrap: BootstrapCheckpoint,
}

impl FormatPlan {
    /// The plan with the cluster's bootstrap features replaced (`corum format
    /// --release-version`/`--feature`, from
    /// [`corum_controller::control::feature_control::bootstrap_features`]).
    pub fn with_features(mut self, features: Vec<BootstrapFeature>) -> Result<Self, StorageError> {
        self.bootstrap.features = features;
        self.bootstrap
            .validate()
            .map_err(|reason| StorageError::InvalidBootstrap { reason })?;
        Ok(self)
    }
}

/// What `format` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatOutcome {
    Formatted(FormatPlan),
    /// The directory was already formatted and `--ignore-formatted` left it unchanged.
    AlreadyFormatted {
        dir: PathBuf,
        existing: MetaProperties,
    },
}

fn refuse(reason: impl Into<String>) -> StorageError {
    StorageError::FormatRefused {
        reason: reason.into(),
    }
}

/// Computes what to write, or why not. `random_directory_id` is used unless the node's own
/// directory id comes from `--initial-controllers`.
pub fn plan_format(
    config: &NodeConfig,
    cluster_id: Uuid,
    choice: &BootstrapChoice,
    random_directory_id: Uuid,
) -> Result<FormatPlan, StorageError> {
    if cluster_id.is_zero() {
        return Err(refuse(
            "the all-zero cluster id is reserved; use `corum random-uuid`",
        ));
    }
    if random_directory_id.is_zero() {
        return Err(refuse("the all-zero directory id is reserved"));
    }
    // Kafka's latest release this controller supports, unless the caller names another
    // ([`FormatPlan::with_features`]).
    let features = default_bootstrap_features();
    let node_id = config.node_id;
    let static_quorum = !config.quorum_voters.is_empty();
    let (directory_id, bootstrap) = match (choice, static_quorum) {
        (BootstrapChoice::StaticFromConfig, true) => {
            if !config.quorum_voters.iter().any(|v| v.id == node_id) {
                return Err(refuse(format!(
                    "node.id {node_id} is not in controller.quorum.voters ({})",
                    ids(&config.quorum_voters)
                )));
            }
            // A voter's directory id in the static list wins, so the config and the directory
            // agree.
            let dir = config
                .quorum_voters
                .iter()
                .find(|v| v.id == node_id)
                .and_then(|v| v.directory_id)
                .unwrap_or(random_directory_id);
            (
                dir,
                BootstrapCheckpoint {
                    kraft_version: 0,
                    voters: Vec::new(),
                    features: features.clone(),
                },
            )
        }
        (BootstrapChoice::StaticFromConfig, false) => {
            return Err(refuse(
                "controller.quorum.voters is empty (dynamic quorum): pass --standalone for the first controller, or --initial-controllers ID@HOST:PORT:DIRECTORY_ID,...",
            ))
        }
        (_, true) => {
            return Err(refuse(
                "--standalone, --initial-controllers and --no-initial-controllers are for a dynamic quorum, but controller.quorum.voters is set (static quorum): remove one or the other",
            ))
        }
        (BootstrapChoice::NoInitialControllers, false) => {
            if config.quorum_bootstrap_servers.is_empty() {
                return Err(refuse(
                    "--no-initial-controllers: set controller.quorum.bootstrap.servers, the controllers this one asks for the leader of the quorum it joins",
                ));
            }
            // Its own endpoints must be reachable: the leader answers it there, and adds it.
            controller_endpoints(config)?;
            (
                random_directory_id,
                BootstrapCheckpoint {
                    kraft_version: 1,
                    voters: Vec::new(),
                    features: features.clone(),
                },
            )
        }
        (BootstrapChoice::Standalone, false) => {
            let endpoints = controller_endpoints(config)?;
            (
                random_directory_id,
                BootstrapCheckpoint {
                    kraft_version: 1,
                    voters: vec![BootstrapVoter {
                        id: node_id,
                        directory_id: random_directory_id,
                        endpoints,
                    }],
                    features: features.clone(),
                },
            )
        }
        (BootstrapChoice::InitialControllers(list), false) => {
            let me = list.iter().find(|v| v.id == node_id).ok_or_else(|| {
                refuse(format!(
                    "node.id {node_id} is not in --initial-controllers ({}): format each controller with its own entry",
                    ids(list)
                ))
            })?;
            let name = config.controller_listener().name.clone();
            let mut voters = Vec::with_capacity(list.len());
            for v in list {
                let directory_id = v.directory_id.ok_or_else(|| {
                    refuse(format!(
                        "--initial-controllers entry {v} has no directory id (ID@HOST:PORT:DIRECTORY_ID)"
                    ))
                })?;
                voters.push(BootstrapVoter {
                    id: v.id,
                    directory_id,
                    endpoints: vec![BootstrapEndpoint {
                        name: name.clone(),
                        host: v.endpoint.host.clone(),
                        port: v.endpoint.port,
                    }],
                });
            }
            let dir = me
                .directory_id
                .expect("checked above: every entry has a directory id");
            (
                dir,
                BootstrapCheckpoint {
                    kraft_version: 1,
                    voters,
                    features: features.clone(),
                },
            )
        }
    };
    bootstrap
        .validate()
        .map_err(|reason| StorageError::InvalidBootstrap { reason })?;
    Ok(FormatPlan {
        dir: config.metadata_log_dir.clone(),
        meta: MetaProperties {
            cluster_id,
            node_id,
            directory_id,
        },
        bootstrap,
    })
}

fn ids(voters: &[QuorumVoter]) -> String {
    voters
        .iter()
        .map(|v| v.id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// This node's controller listeners as voter endpoints; each needs a concrete host.
fn controller_endpoints(config: &NodeConfig) -> Result<Vec<BootstrapEndpoint>, StorageError> {
    let mut out = Vec::new();
    for name in &config.controller_listener_names {
        let e = config
            .controller_endpoint(name)
            .expect("validate() requires every controller listener name to be a listener");
        if e.is_wildcard() {
            return Err(refuse(format!(
                "controller listener {name} at {e} has no concrete host: other voters could not reach this one; give the listener a host name or address, or set advertised.listeners={name}://HOST:PORT"
            )));
        }
        if e.port == 0 {
            return Err(refuse(format!(
                "controller listener {name} at {e} has port 0: a voter needs a fixed port"
            )));
        }
        out.push(BootstrapEndpoint {
            name: name.clone(),
            host: e.host,
            port: e.port,
        });
    }
    Ok(out)
}

/// Writes the plan on `disk` (`StdDisk` for `corum format`) unless the directory is already
/// formatted: then it fails, or with `ignore_formatted` leaves the directory unchanged.
pub async fn format_dir<D: Disk>(
    disk: &D,
    plan: &FormatPlan,
    ignore_formatted: bool,
) -> Result<FormatOutcome, StorageError> {
    disk.create_dir_all(&plan.dir)
        .await
        .map_err(|e| crate::fsio::storage_error(e, &plan.dir))?;
    if let Some(existing) = MetaProperties::read(disk, &plan.dir).await? {
        if ignore_formatted {
            return Ok(FormatOutcome::AlreadyFormatted {
                dir: plan.dir.clone(),
                existing,
            });
        }
        return Err(StorageError::AlreadyFormatted {
            dir: plan.dir.clone(),
            cluster_id: existing.cluster_id.to_string(),
        });
    }
    plan.bootstrap.write(disk, &plan.dir).await?;
    plan.meta.write(disk, &plan.dir).await?;
    Ok(FormatOutcome::Formatted(plan.clone()))
}

/// One file or directory found in a log directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Relative to the log directory.
    pub path: PathBuf,
    pub is_dir: bool,
    pub len_bytes: u64,
}

/// What a log directory holds. Each node file is decoded independently, so one damaged file
/// does not hide the others.
#[derive(Debug)]
pub struct DirectoryInfo {
    pub dir: PathBuf,
    pub meta: Result<Option<MetaProperties>, StorageError>,
    pub quorum_state: Result<Option<QuorumState>, StorageError>,
    pub bootstrap: Result<Option<BootstrapCheckpoint>, StorageError>,
    /// The snapshot store's snapshots, oldest first ([`crate::snapshot_store::list`]).
    pub snapshots: Result<Vec<SnapshotId>, StorageError>,
    /// Whether the newest snapshot loads (`None`: there is none), as `corum run` would load it.
    pub newest_snapshot: Option<Result<SnapshotSummary, StorageError>>,
    /// The metadata log as recovery would find it ([`crate::data_dir`], read-only).
    pub log: Result<LogSummary, DataDirError>,
    /// Every entry of the directory and of its subdirectories (one level, e.g. `@metadata-0/`),
    /// sorted by path.
    pub entries: Vec<DirEntry>,
}

/// The metadata log of a data directory as a start would recover it, for `corum info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSummary {
    /// The offsets the node would start with: from the snapshot's end (or the log start) to
    /// the end of the part that continues it.
    pub start_offset: LogOffset,
    pub end_offset: LogOffset,
    /// What recovery would cut: a torn tail, the segments of an unfinished roll, a suffix that
    /// does not continue the snapshot.
    pub torn_tail: Option<TornTail>,
    pub unfinished_segments: usize,
    pub fit: LogFit,
}

/// What a readable snapshot holds, for `corum info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotSummary {
    pub id: SnapshotId,
    pub voters: usize,
    pub data_bytes: usize,
}

impl DirectoryInfo {
    pub fn is_formatted(&self) -> bool {
        matches!(self.meta, Ok(Some(_)))
    }
}

/// Describes a log directory (`corum info`) without writing anything: every file is read
/// through a read-only `StdDisk`, the log as [`crate::data_dir`] would recover it. Fails only
/// if the directory cannot be listed.
pub fn inspect_dir(dir: &Path) -> Result<DirectoryInfo, StorageError> {
    let mut entries = Vec::new();
    list(dir, Path::new(""), 1, &mut entries)?;
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    futures_lite::future::block_on(describe(StdDisk::read_only(), dir, entries))
}

async fn describe<D: Disk>(
    disk: D,
    dir: &Path,
    entries: Vec<DirEntry>,
) -> Result<DirectoryInfo, StorageError> {
    let store = crate::snapshot_store::snapshot_dir(dir);
    let listed = crate::snapshot_store::list(&disk, &store).await;
    let newest_snapshot = match &listed {
        Ok(l) => match l.last() {
            Some((_, path)) => {
                Some(
                    crate::snapshot_store::read(&disk, path)
                        .await
                        .map(|s| SnapshotSummary {
                            id: s.id,
                            voters: s.voters.len(),
                            data_bytes: s.data.len(),
                        }),
                )
            }
            None => None,
        },
        Err(_) => None,
    };
    let log = DataDir::open(disk.clone(), dir, LogConfig::default(), Mode::ReadOnly)
        .await
        .map(|d| LogSummary {
            start_offset: d.log_start,
            end_offset: d.log_end,
            torn_tail: d.log_report.torn_tail.clone(),
            unfinished_segments: d.log_report.removed_unfinished_segments,
            fit: d.fit,
        });
    Ok(DirectoryInfo {
        dir: dir.to_path_buf(),
        meta: MetaProperties::read(&disk, dir).await,
        quorum_state: QuorumState::read(&disk, dir).await,
        bootstrap: BootstrapCheckpoint::read(&disk, dir).await,
        snapshots: listed.map(|l| l.into_iter().map(|(id, _)| id).collect()),
        newest_snapshot,
        log,
        entries,
    })
}

fn list(dir: &Path, rel: &Path, depth: usize, out: &mut Vec<DirEntry>) -> Result<(), StorageError> {
    let full = dir.join(rel);
    let io = |op, source| StorageError::Io {
        op,
        path: full.clone(),
        source,
    };
    for e in fs::read_dir(&full).map_err(|e| io("list", e))? {
        let e = e.map_err(|e| io("list", e))?;
        let md = e.metadata().map_err(|e| io("stat", e))?;
        let path = rel.join(e.file_name());
        out.push(DirEntry {
            path: path.clone(),
            is_dir: md.is_dir(),
            len_bytes: md.len(),
        });
        if md.is_dir() && depth > 0 {
            list(dir, &path, depth - 1, out)?;
        }
    }
    Ok(())
}

/// Start-up check for `corum run`: the directory (on `disk`) is formatted for this node (and
/// this cluster, when the caller knows it). Returns the identity and the bootstrap voters. A
/// directory formatted for a static quorum may run without `controller.quorum.voters` once the
/// quorum was upgraded to kraft.version 1: its voters are then in its log or snapshot (the
/// Raft core refuses to start when they are not).
pub async fn check_formatted<D: Disk>(
    disk: &D,
    config: &NodeConfig,
    cluster_id: Option<Uuid>,
) -> Result<(MetaProperties, BootstrapCheckpoint), StorageError> {
    let dir = &config.metadata_log_dir;
    let meta = MetaProperties::read_required(disk, dir).await?;
    meta.check(dir, cluster_id, config.node_id)?;
    let bootstrap = BootstrapCheckpoint::read(disk, dir).await?.ok_or_else(|| StorageError::Corrupt {
        path: dir.join(BOOTSTRAP_FILE),
        reason: "missing, though meta.properties exists: the directory was not formatted by corum format".into(),
    })?;
    if bootstrap.kraft_version == 1 && !config.quorum_voters.is_empty() {
        return Err(StorageError::Mismatch {
            path: dir.join(BOOTSTRAP_FILE),
            field: "kraft.version",
            expected: "0 (controller.quorum.voters is set: a static quorum)".into(),
            found: "1 (formatted for a dynamic quorum)".into(),
        });
    }
    Ok((meta, bootstrap))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_voters;
    use futures_lite::future::block_on;

    // Formatting runs outside glommio, as `corum format` does: over `StdDisk`.
    fn format_dir(
        plan: &FormatPlan,
        ignore_formatted: bool,
    ) -> Result<FormatOutcome, StorageError> {
        block_on(super::format_dir(&StdDisk::new(), plan, ignore_formatted))
    }
    fn check_formatted(
        config: &NodeConfig,
        cluster_id: Option<Uuid>,
    ) -> Result<(MetaProperties, BootstrapCheckpoint), StorageError> {
        block_on(super::check_formatted(
            &StdDisk::read_only(),
            config,
            cluster_id,
        ))
    }

    fn config(dir: &Path, extra: &[(&str, &str)]) -> NodeConfig {
        let mut sets: Vec<(String, String)> = [
            ("node.id", "1"),
            ("process.roles", "controller"),
            ("listeners", "CONTROLLER://127.0.0.1:9093"),
            ("controller.listener.names", "CONTROLLER"),
            ("controller.quorum.bootstrap.servers", "127.0.0.1:9093"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        sets.push(("metadata.log.dir".into(), dir.display().to_string()));
        sets.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        NodeConfig::load(None, &sets).unwrap()
    }

    const CLUSTER: Uuid = Uuid([5; 16]);
    const RANDOM: Uuid = Uuid([6; 16]);

    /// Standalone: one voter, this node, with the random directory id and its controller
    /// listener; the files read back and the start-up check passes.
    #[test]
    fn standalone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let c = config(&dir, &[]);
        let plan = plan_format(&c, CLUSTER, &BootstrapChoice::Standalone, RANDOM).unwrap();
        assert_eq!(plan.meta.directory_id, RANDOM);
        assert_eq!(plan.bootstrap.kraft_version, 1);
        assert_eq!(plan.bootstrap.voters.len(), 1);
        assert_eq!(plan.bootstrap.voters[0].endpoints[0].port, 9093);
        assert!(matches!(
            format_dir(&plan, false).unwrap(),
            FormatOutcome::Formatted(_)
        ));
        let (meta, boot) = check_formatted(&c, Some(CLUSTER)).unwrap();
        assert_eq!(meta, plan.meta);
        assert_eq!(boot, plan.bootstrap);
        // Twice: refused, or left alone with --ignore-formatted.
        let other = plan_format(&c, Uuid([8; 16]), &BootstrapChoice::Standalone, RANDOM).unwrap();
        assert!(matches!(
            format_dir(&other, false),
            Err(StorageError::AlreadyFormatted { .. })
        ));
        assert!(matches!(
            format_dir(&other, true).unwrap(),
            FormatOutcome::AlreadyFormatted { existing, .. } if existing == plan.meta
        ));
        assert_eq!(
            block_on(MetaProperties::read(&StdDisk::read_only(), &dir)).unwrap(),
            Some(plan.meta)
        );
        assert!(matches!(
            check_formatted(&c, Some(Uuid([8; 16]))),
            Err(StorageError::Mismatch {
                field: "cluster.id",
                ..
            })
        ));
        let info = inspect_dir(&dir).unwrap();
        assert!(info.is_formatted());
        let names: Vec<_> = info
            .entries
            .iter()
            .map(|e| e.path.display().to_string())
            .collect();
        assert_eq!(names, vec!["bootstrap.checkpoint", "meta.properties"]);
        assert_eq!(info.snapshots.as_ref().unwrap().len(), 0);
        assert!(info.newest_snapshot.is_none());

        // Snapshots in the store: listed, and the newest one checked as a start would load it.
        let store = crate::snapshot_store::snapshot_dir(&dir);
        let voters = crate::config::components::static_voter_set(&config(
            tmp.path(),
            &[("controller.quorum.voters", "1@127.0.0.1:9093")],
        ))
        .unwrap();
        for end in [10u64, 20] {
            let s = corum_raft::Snapshot {
                id: SnapshotId {
                    end_offset: corum_types::LogOffset(end),
                    epoch: corum_types::Epoch(2),
                },
                voters: voters.clone(),
                kraft_version: 0,
                data: corum_raft::Payload::from(&b"state"[..]),
            };
            block_on(crate::snapshot_store::write(&StdDisk::new(), &store, &s)).unwrap();
        }
        let info = inspect_dir(&dir).unwrap();
        let ends: Vec<u64> = info
            .snapshots
            .as_ref()
            .unwrap()
            .iter()
            .map(|i| i.end_offset.0)
            .collect();
        assert_eq!(ends, vec![10, 20]);
        let newest = info.newest_snapshot.unwrap().unwrap();
        assert_eq!(
            (newest.id.end_offset.0, newest.voters, newest.data_bytes),
            (20, 1, 5)
        );
        let newest_path = store.join(crate::snapshot_store::file_name(newest.id));
        std::fs::write(&newest_path, b"garbage").unwrap();
        assert!(inspect_dir(&dir).unwrap().newest_snapshot.unwrap().is_err());
    }

    /// `--no-initial-controllers`: a joining controller of a dynamic quorum, with a random
    /// directory id and no voter (it learns them from the leader's log); it needs
    /// `controller.quorum.bootstrap.servers`, a reachable listener, and no static voters.
    #[test]
    fn no_initial_controllers() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let c = config(&dir, &[]);
        let plan =
            plan_format(&c, CLUSTER, &BootstrapChoice::NoInitialControllers, RANDOM).unwrap();
        assert_eq!(plan.meta.directory_id, RANDOM);
        assert_eq!(plan.bootstrap.kraft_version, 1);
        assert!(plan.bootstrap.voters.is_empty());
        assert!(plan.bootstrap.is_joining());
        format_dir(&plan, false).unwrap();
        let (_, boot) = check_formatted(&c, Some(CLUSTER)).unwrap();
        assert!(boot.is_joining());
        let replica = crate::config::components::raft_replica(&c, RANDOM, Some(&boot)).unwrap();
        assert_eq!(replica.kraft_version, 1);
        assert!(replica.bootstrap_voters.is_empty());
        assert_eq!(replica.me.directory_id, RANDOM);

        let refusal = |c: &NodeConfig| {
            plan_format(c, CLUSTER, &BootstrapChoice::NoInitialControllers, RANDOM)
                .unwrap_err()
                .to_string()
        };
        let stat = config(
            tmp.path(),
            &[
                ("controller.quorum.voters", "1@127.0.0.1:9093"),
                ("controller.quorum.bootstrap.servers", ""),
            ],
        );
        assert!(refusal(&stat).contains("controller.quorum.voters is set"));
        let wildcard = config(tmp.path(), &[("listeners", "CONTROLLER://0.0.0.0:9093")]);
        assert!(refusal(&wildcard).contains("no concrete host"));
    }

    /// Initial controllers: the node's directory id comes from its entry; every voter gets the
    /// controller listener's name; a node that is not listed is refused.
    #[test]
    fn initial_controllers() {
        let tmp = tempfile::tempdir().unwrap();
        let c = config(tmp.path(), &[]);
        let d = |i: u8| Uuid::from_random_bits(u128::from(i)).to_string();
        let list = parse_voters(&format!(
            "1@127.0.0.1:9093:{},2@127.0.0.1:9094:{},3@127.0.0.1:9095:{}",
            d(1),
            d(2),
            d(3)
        ))
        .unwrap();
        let plan = plan_format(
            &c,
            CLUSTER,
            &BootstrapChoice::InitialControllers(list.clone()),
            RANDOM,
        )
        .unwrap();
        assert_eq!(plan.meta.directory_id.to_string(), d(1));
        assert_eq!(plan.bootstrap.voters.len(), 3);
        assert!(plan
            .bootstrap
            .voters
            .iter()
            .all(|v| v.endpoints[0].name == "CONTROLLER"));
        let c4 = config(tmp.path(), &[("node.id", "4")]);
        let err = plan_format(
            &c4,
            CLUSTER,
            &BootstrapChoice::InitialControllers(list),
            RANDOM,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("node.id 4 is not in --initial-controllers (1, 2, 3)"),
            "{err}"
        );
        let no_dir = parse_voters("1@h:1,2@h:2").unwrap();
        let err = plan_format(
            &c,
            CLUSTER,
            &BootstrapChoice::InitialControllers(no_dir),
            RANDOM,
        )
        .unwrap_err();
        assert!(err.to_string().contains("no directory id"), "{err}");
        let same_dir = parse_voters(&format!("1@h:1:{},2@h:2:{}", d(1), d(1))).unwrap();
        let err = plan_format(
            &c,
            CLUSTER,
            &BootstrapChoice::InitialControllers(same_dir),
            RANDOM,
        )
        .unwrap_err();
        assert!(
            matches!(err, StorageError::InvalidBootstrap { .. }),
            "{err}"
        );
    }

    /// The static/dynamic table of the module doc, and the reserved ids.
    #[test]
    fn bootstrap_choices() {
        let tmp = tempfile::tempdir().unwrap();
        let dynamic = config(tmp.path(), &[]);
        let stat = config(
            tmp.path(),
            &[(
                "controller.quorum.voters",
                "1@127.0.0.1:9093,2@127.0.0.1:9094",
            )],
        );
        let err = |c, ch| plan_format(c, CLUSTER, ch, RANDOM).unwrap_err().to_string();
        assert!(err(&dynamic, &BootstrapChoice::StaticFromConfig).contains("pass --standalone"));
        assert!(err(&stat, &BootstrapChoice::Standalone).contains("static quorum"));
        let p = plan_format(&stat, CLUSTER, &BootstrapChoice::StaticFromConfig, RANDOM).unwrap();
        assert_eq!(p.bootstrap.kraft_version, 0);
        assert_eq!(p.meta.directory_id, RANDOM);
        // validate() already refuses such a config; format checks again for a config built by
        // hand.
        let mut stat3 = stat.clone();
        stat3.node_id = corum_types::NodeId(3);
        assert!(err(&stat3, &BootstrapChoice::StaticFromConfig)
            .contains("not in controller.quorum.voters"));
        assert!(
            plan_format(&dynamic, Uuid::ZERO, &BootstrapChoice::Standalone, RANDOM)
                .unwrap_err()
                .to_string()
                .contains("all-zero cluster id")
        );
        let any_host = config(tmp.path(), &[("listeners", "CONTROLLER://:9093")]);
        assert!(err(&any_host, &BootstrapChoice::Standalone).contains("no concrete host"));
        // A static-quorum directory starts without configured voters (an upgraded quorum's
        // voters are in its log: the Raft core checks).
        format_dir(&p, false).unwrap();
        check_formatted(&dynamic, None).unwrap();
        check_formatted(&stat, Some(CLUSTER)).unwrap();
        // A dynamic quorum's directory does not start with static voters.
        let other = tempfile::tempdir().unwrap();
        let dynamic = config(other.path(), &[]);
        let stat = config(
            other.path(),
            &[(
                "controller.quorum.voters",
                "1@127.0.0.1:9093,2@127.0.0.1:9094",
            )],
        );
        let d = plan_format(&dynamic, CLUSTER, &BootstrapChoice::Standalone, RANDOM).unwrap();
        format_dir(&d, false).unwrap();
        assert!(matches!(
            check_formatted(&stat, None),
            Err(StorageError::Mismatch {
                field: "kraft.version",
                ..
            })
        ));
    }

    /// A crash after the bootstrap file and before meta.properties leaves an unformatted
    /// directory that format completes on the next run (with the new plan's voters).
    #[test]
    fn crash_between_files_is_recoverable() {
        let tmp = tempfile::tempdir().unwrap();
        let c = config(tmp.path(), &[]);
        let first = plan_format(&c, CLUSTER, &BootstrapChoice::Standalone, RANDOM).unwrap();
        block_on(first.bootstrap.write(&StdDisk::new(), tmp.path())).unwrap();
        // A torn meta.properties tmp file is also left behind.
        std::fs::write(
            tmp.path().join("meta.properties.tmp"),
            b"version=1\ncluster",
        )
        .unwrap();
        assert!(matches!(
            check_formatted(&c, None),
            Err(StorageError::NotFormatted { .. })
        ));
        let second = plan_format(&c, CLUSTER, &BootstrapChoice::Standalone, Uuid([7; 16])).unwrap();
        assert!(matches!(
            format_dir(&second, false).unwrap(),
            FormatOutcome::Formatted(_)
        ));
        let (meta, boot) = check_formatted(&c, Some(CLUSTER)).unwrap();
        assert_eq!(meta.directory_id, Uuid([7; 16]));
        assert_eq!(boot.voters[0].directory_id, Uuid([7; 16]));
        assert!(!tmp.path().join("meta.properties.tmp").exists());
    }

    /// An unformatted directory is reported as such at start-up and by inspect.
    #[test]
    fn unformatted() {
        let tmp = tempfile::tempdir().unwrap();
        let c = config(tmp.path(), &[]);
        assert!(matches!(
            check_formatted(&c, None),
            Err(StorageError::NotFormatted { .. })
        ));
        let info = inspect_dir(tmp.path()).unwrap();
        assert!(!info.is_formatted());
        assert!(matches!(info.quorum_state, Ok(None)));
        assert!(inspect_dir(&tmp.path().join("missing")).is_err());
    }
}
