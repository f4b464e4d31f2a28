//! The whole-node deterministic simulator: several nodes, each the node's own policy code —
//! the Raft core and the driver's policy ([`DriverCore`](crate::driver::DriverCore)) over the
//! log engine and the node files on a [`SimDisk`](corum_engine::disk::SimDisk), the call table
//! ([`crate::calls`]) and the controller service ([`ServiceCore`](crate::service::core::ServiceCore))
//! with the controller — run from one seed under crashes (power loss, torn writes), restarts,
//! disk errors, and message loss, duplication, delay, reordering and partitions, while
//! clients write configs. Only the sockets, timers and tasks of the real node are replaced
//! (by [`node::SimNode`]'s queues and simulated milliseconds).
//!
//! The quorum is dynamic (kraft.version 1) unless the seed is static (below): every node
//! starts from the same bootstrap voter set of `nodes` voters, each a node id and the directory id of its
//! disk, as `format --initial-controllers` writes it. With `voter_changes`, `spares` more
//! nodes start as observers (not in the bootstrap set, they find the leader by asking a
//! voter), and an admin changes the voter set during the fault phase the way `corum quorum
//! add-controller` / `remove-controller` reach the leader
//! ([`crate::driver::RaftHandle::voter_change`]): an AddVoter or RemoveVoter stepped into the
//! core it believes leads from an id of [`crate::driver::ADMIN_IDS`], answered by the
//! VoterChangeResponse the core sends that id. It removes voters (the leader too), adds
//! observers and adds back removed voters, keeping 1 to 5 voters. A disk wipe (a fault of
//! these seeds) replaces a node's disk by an empty one with a new directory id: the node
//! restarts as an observer and the admin removes its old (id, directory) from the voter set,
//! which it may add again later under the new one.
//!
//! A static seed (`static_quorum`, `corum sim --static`) starts as a static quorum
//! (kraft.version 0): its voters are configured by `controller.quorum.voters`, which names
//! them without directory ids (a voter of the set is any replica of its id), and format writes
//! no bootstrap checkpoint. Its spares are formatted as `format --no-initial-controllers` does
//! (kraft.version 1, no voters; they find the leader through
//! `controller.quorum.bootstrap.servers`, the voters' addresses, and learn the voters only from
//! the upgrade's Voters record). With `voter_changes` its admin first asks the leader to
//! upgrade the quorum (`UpgradeKraftVersion` to 1, as `corum features upgrade --feature
//! kraft.version=1` does, retried after refusals; after the heal too, if it has not happened
//! yet), and makes voter changes only once the leader runs kraft.version 1: the upgrade writes
//! the same voters with the directory ids they answered with. A static quorum has no safe
//! disk replacement (an empty disk of a voter's id would be taken for the voter): no voter's
//! disk is wiped before the upgrade has committed; spares, which vote in no set, may be. A
//! wiped disk of a static seed is formatted to join, like its spares. A static seed without
//! voter changes stays static, and has no spares (nothing would tell them the voters).
//!
//! A seed runs in phases: faults for `fault_ms`; then the heal (every node up, the network
//! reliable, no more faults) while clients go on for a second; then the cluster must settle
//! (one leader, every node replayed to its high watermark, nothing waiting, a static seed
//! with voter changes upgraded); then every node loses power at once and restarts from its
//! disk, and must settle again. [`checker`] says what is checked. A failure names the seed
//! and the command that replays it.
//!
//! `corum sim` runs seeds from the command line; `cargo test` runs 500 of them without
//! voter changes and 500 with, and static seeds: 150 with voter changes, 40 without.

pub mod checker;
pub mod node;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::Instant;

use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use corum_controller::image::ConfigResource;
use corum_controller::records::ConfigResourceType;
use corum_controller::MetadataImage;
use corum_engine::disk::SimFault;
use corum_engine::log::LogConfig;
use corum_raft::message::{
    AddVoterRequest, RemoveVoterRequest, UpgradeKraftVersionRequest, VoterChangeResponse,
};
use corum_raft::sim::network::{NetFaults, Network};
use corum_raft::{Endpoint, Message, ReplicaKey, Role, Voter, VoterSet};
use corum_types::{LogOffset, NodeId, Uuid};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use self::checker::{Checker, Outcome};
use self::node::{NodeOutput, NodeTiming, Route, SimNode};
use crate::config::components::{self, RaftReplica};
use crate::config::values::{HostPort, QuorumVoter};
use crate::config::NodeConfig;
use crate::driver::ADMIN_IDS;
use crate::peer::BOOTSTRAP_IDS;
use crate::protocol::{RequestBody, RequestFrame, ResponseBody, ResponseFrame, RpcError};

/// The config every write of the workload sets, on a broker resource: half of the writes on
/// one of [`SHARED_KEYS`] resources (registers that writes overwrite), the others each on a
/// resource of its own (so the image accumulates every write, and a replica that missed one
/// shows it).
pub const CONFIG_KEY: &str = "log.retention.ms";
pub const SHARED_KEYS: u64 = 4;
/// Concurrent clients.
const CLIENTS: u32 = 4;
/// How long a client waits for an answer before it gives up on a node (the request's own
/// timeout, which the node's call table enforces, is shorter).
const CLIENT_WAIT_MS: u64 = 3_000;
const REQUEST_TIMEOUT_MS: u32 = 1_000;
/// The clients go on this long after the heal.
const AFTER_HEAL_MS: u64 = 1_000;
/// Most simulated time the cluster may take to settle after the heal.
const SETTLE_MS_MAX: u64 = 30_000;
/// The admin keeps the voter set within 1 to this many voters.
pub const VOTERS_MAX: usize = 5;
/// Most observers besides the bootstrap voters.
pub const SPARES_MAX: usize = 4;
/// How long the admin waits for a voter change's answer before it gives up on it (the
/// change may still commit).
const ADMIN_WAIT_MS: u64 = 2_000;

/// The broker resource of workload key `key`.
pub fn config_resource(key: u64) -> ConfigResource {
    ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: (key + 1).to_string(),
    }
}

/// Which faults a seed injects during its fault phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Faults {
    /// Power loss of a node, restarted later.
    pub crashes: bool,
    /// A crash keeps a prefix of the unsynced writes, the last one torn.
    pub torn_writes: bool,
    /// The next write or fsync of a node's disk fails (the node stops, and restarts).
    pub disk_errors: bool,
    /// A node cut off from the others, both ways or one way.
    pub partitions: bool,
    /// A node's controller shard stops for up to 600 ms (its port delivers nothing meanwhile).
    pub stalls: bool,
    /// A node's disk is replaced by an empty one with a new directory id (only with voter
    /// changes, whose admin then swaps the voter's old directory for the new one).
    pub wipes: bool,
    /// Of every Raft message, in percent.
    pub drop_pct: u32,
    pub duplicate_pct: u32,
    /// Messages take 1 ms to this long (different delays reorder them).
    pub delay_ms_max: u64,
    /// A message between a node's driver and its service takes 0 ms to this long (in order):
    /// a slow controller shard, which proposals may outlive the leadership they were made in.
    pub port_delay_ms_max: u64,
}

impl Faults {
    pub const fn all() -> Faults {
        Faults {
            crashes: true,
            torn_writes: true,
            disk_errors: true,
            partitions: true,
            stalls: true,
            wipes: true,
            drop_pct: 5,
            duplicate_pct: 2,
            delay_ms_max: 20,
            port_delay_ms_max: 10,
        }
    }

    pub const fn none() -> Faults {
        Faults {
            crashes: false,
            torn_writes: false,
            disk_errors: false,
            partitions: false,
            stalls: false,
            wipes: false,
            drop_pct: 0,
            duplicate_pct: 0,
            delay_ms_max: 1,
            port_delay_ms_max: 1,
        }
    }
}

/// A defect planted on purpose, to show that the checks catch what they claim to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// The leader releases success answers when it appends a proposal, not at its commit.
    AnswerAtAppend,
    /// Each follower's service skips the first committed data batch it gets at or after
    /// offset 20.
    SkipCommittedBatch,
    /// The admin's voter change is answered Ok when the leader appends its VotersRecord, not
    /// when the record commits.
    VoterChangeAnsweredAtAppend,
    /// A wiped node's empty disk goes by its old directory id: Raft takes the empty replica
    /// for the voter it was (its log and its votes forgotten).
    WipeKeepsDirectoryId,
}

/// A voter change the admin asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoterChange {
    Add(ReplicaKey),
    Remove(ReplicaKey),
    /// KIP-853's upgrade of a static quorum to kraft.version 1: the same voters, now with
    /// their directory ids.
    Upgrade,
}

impl VoterChange {
    /// Whether going from `before` to `after` is this change.
    pub fn made_by(&self, before: &VoterSet, after: &VoterSet) -> bool {
        match self {
            VoterChange::Upgrade => {
                before.len() == after.len()
                    && before.voters().iter().all(|v| v.key.directory_id.is_zero())
                    && after.voters().iter().all(|v| {
                        !v.key.directory_id.is_zero()
                            && before.get(v.key.id).is_some_and(|b| v.key.is(&b.key))
                    })
            }
            VoterChange::Add(k) => {
                !before.contains_id(k.id)
                    && after.contains_key(k)
                    && after.len() == before.len() + 1
            }
            VoterChange::Remove(k) => {
                before.contains_key(k)
                    && !after.contains_id(k.id)
                    && after.len() + 1 == before.len()
            }
        }
    }
}

/// One seed's run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimSpec {
    pub seed: u64,
    /// The bootstrap voters: 1 to 5.
    pub nodes: usize,
    /// Nodes that start as observers: 0 to [`SPARES_MAX`].
    pub spares: usize,
    /// An admin changes the voter set during the fault phase (and disks may be wiped).
    pub voter_changes: bool,
    /// A static quorum (kraft.version 0, voters without directory ids) that the admin of
    /// `voter_changes` upgrades before changing it (see the module doc).
    pub static_quorum: bool,
    /// Simulated milliseconds of faults before the heal.
    pub fault_ms: u64,
    pub faults: Faults,
    /// None, except in the tests of the checks themselves.
    pub mutation: Option<Mutation>,
}

impl SimSpec {
    pub fn new(seed: u64) -> SimSpec {
        SimSpec {
            seed,
            nodes: 3,
            spares: 0,
            voter_changes: false,
            static_quorum: false,
            fault_ms: 3_000,
            faults: Faults::all(),
            mutation: None,
        }
    }

    /// A seed with voter changes: 3 bootstrap voters and 2 observers.
    pub fn with_voter_changes(seed: u64) -> SimSpec {
        SimSpec {
            spares: 2,
            voter_changes: true,
            ..SimSpec::new(seed)
        }
    }

    /// A static seed with voter changes: 3 voters of a static quorum and 2 observers
    /// formatted to join, upgraded by the admin.
    pub fn static_with_voter_changes(seed: u64) -> SimSpec {
        SimSpec {
            static_quorum: true,
            ..SimSpec::with_voter_changes(seed)
        }
    }

    /// The command that runs this seed again.
    pub fn replay_command(&self) -> String {
        let f = &self.faults;
        let mut cmd = format!(
            "corum sim --nodes {} --spares {} --start {} --seeds 1 --fault-ms {} --drop-pct {} \
             --duplicate-pct {} --delay-ms-max {} --port-delay-ms-max {}",
            self.nodes,
            self.spares,
            self.seed,
            self.fault_ms,
            f.drop_pct,
            f.duplicate_pct,
            f.delay_ms_max,
            f.port_delay_ms_max
        );
        for (on, flag) in [
            (f.crashes, "--no-crashes"),
            (f.torn_writes, "--no-torn-writes"),
            (f.disk_errors, "--no-disk-errors"),
            (f.partitions, "--no-partitions"),
            (f.stalls, "--no-stalls"),
            (f.wipes, "--no-wipes"),
        ] {
            if !on {
                cmd.push(' ');
                cmd.push_str(flag);
            }
        }
        if self.voter_changes {
            cmd.push_str(" --voter-changes");
        }
        if self.static_quorum {
            cmd.push_str(" --static");
        }
        cmd
    }
}

/// What one seed did, and whether a check failed.
#[derive(Clone, Debug)]
pub struct SeedReport {
    pub spec: SimSpec,
    /// The first violation (or panic) and when, in simulated ms.
    pub violation: Option<String>,
    pub writes: u64,
    pub acked: u64,
    pub answers_checked: u64,
    pub crashes: u64,
    pub disk_faults: u64,
    pub partitions: u64,
    pub stalls: u64,
    /// The highest epoch any node reached.
    pub epoch_max: u64,
    pub snapshots_written: u64,
    pub installs: u64,
    pub truncations: u64,
    pub proposals_refused: u64,
    /// Voter changes the admin asked for, and those the leader answered Ok (each checked
    /// against the committed history).
    pub voter_changes_asked: u64,
    pub voter_changes_acked: u64,
    /// Committed VotersRecords (the committed history's length, less the bootstrap set; the
    /// upgrade's included).
    pub voter_records: u64,
    /// Static seeds: upgrades the admin asked for, and those the leader answered Ok (each
    /// checked against the committed history).
    pub upgrades_asked: u64,
    pub upgrades_acked: u64,
    /// Static seeds: the upgrade committed during the fault phase, or at all (the admin
    /// finishes it after the heal).
    pub upgraded_in_faults: bool,
    pub upgraded: bool,
    /// The kraft.version every node ended with.
    pub kraft_version: u16,
    pub wipes: u64,
    /// Elections whose votes were checked.
    pub elections_checked: u64,
    pub committed_end: u64,
    pub sim_ms: u64,
}

impl SeedReport {
    pub fn ok(&self) -> bool {
        self.violation.is_none()
    }
}

/// Runs one seed (a panic in a component's invariant checks is a violation too).
pub fn run_seed(spec: SimSpec) -> SeedReport {
    let mut report = SeedReport {
        spec,
        violation: None,
        writes: 0,
        acked: 0,
        answers_checked: 0,
        crashes: 0,
        disk_faults: 0,
        partitions: 0,
        stalls: 0,
        epoch_max: 0,
        snapshots_written: 0,
        installs: 0,
        truncations: 0,
        proposals_refused: 0,
        voter_changes_asked: 0,
        voter_changes_acked: 0,
        voter_records: 0,
        upgrades_asked: 0,
        upgrades_acked: 0,
        upgraded_in_faults: false,
        upgraded: false,
        kraft_version: 0,
        wipes: 0,
        elections_checked: 0,
        committed_end: 0,
        sim_ms: 0,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut sim = Sim::new(spec)?;
        let result = sim.run();
        sim.fill(&mut report);
        result.map_err(|e| format!("at {} ms: {e}", sim.now_ms))
    }));
    report.violation = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(panic) => Some(format!(
            "panic: {}",
            panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)")
        )),
    };
    report
}

/// Totals over seeds.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub seeds: u64,
    pub failed: Vec<SeedReport>,
    pub writes: u64,
    pub acked: u64,
    pub crashes: u64,
    pub disk_faults: u64,
    pub partitions: u64,
    pub stalls: u64,
    pub snapshots_written: u64,
    pub installs: u64,
    pub truncations: u64,
    pub proposals_refused: u64,
    pub voter_changes_asked: u64,
    pub voter_changes_acked: u64,
    pub voter_records: u64,
    pub upgrades_asked: u64,
    pub upgrades_acked: u64,
    /// Seeds whose upgrade committed during the fault phase, and at all.
    pub upgraded_in_faults: u64,
    pub upgraded: u64,
    pub wipes: u64,
    pub elections_checked: u64,
    pub sim_ms: u64,
}

impl Summary {
    pub fn add(&mut self, r: SeedReport) {
        self.seeds += 1;
        self.writes += r.writes;
        self.acked += r.acked;
        self.crashes += r.crashes;
        self.disk_faults += r.disk_faults;
        self.partitions += r.partitions;
        self.stalls += r.stalls;
        self.snapshots_written += r.snapshots_written;
        self.installs += r.installs;
        self.truncations += r.truncations;
        self.proposals_refused += r.proposals_refused;
        self.voter_changes_asked += r.voter_changes_asked;
        self.voter_changes_acked += r.voter_changes_acked;
        self.voter_records += r.voter_records;
        self.upgrades_asked += r.upgrades_asked;
        self.upgrades_acked += r.upgrades_acked;
        self.upgraded_in_faults += u64::from(r.upgraded_in_faults);
        self.upgraded += u64::from(r.upgraded);
        self.wipes += r.wipes;
        self.elections_checked += r.elections_checked;
        self.sim_ms += r.sim_ms;
        if !r.ok() {
            self.failed.push(r);
        }
    }
}

/// Runs `count` seeds from `template.seed` on.
pub fn run_seeds(template: SimSpec, count: u64) -> Summary {
    let mut summary = Summary::default();
    for i in 0..count {
        summary.add(run_seed(SimSpec {
            seed: template.seed + i,
            ..template
        }));
    }
    summary
}

/// A client of the workload: one write at a time, to the node it believes leads.
struct Client {
    id: u32,
    guess: Option<NodeId>,
    /// The operation it waits for, and when it gives up.
    waiting: Option<(u64, u64)>,
    next_at: u64,
}

/// The admin's voter change waiting for its answer.
struct AdminCall {
    /// The id of [`ADMIN_IDS`] it was stepped from, and its request id.
    from: NodeId,
    request_id: u64,
    change: VoterChange,
    /// An upgrade that only checks whether it would be accepted (it writes nothing).
    validate_only: bool,
    give_up_at: u64,
    /// The end of the committed voter history when it was sent: an Ok must be answered by a
    /// record at or after it.
    history_end: LogOffset,
}

/// The operator that changes the voter set: one change at a time, to the node it believes
/// leads.
struct Admin {
    waiting: Option<AdminCall>,
    next_at: u64,
    next_id: u32,
    next_request_id: u64,
    asked: u64,
    upgrades_asked: u64,
}

struct Sim {
    spec: SimSpec,
    /// The bootstrap voter set every voter is formatted with (a static seed's: without
    /// directory ids), and its spares' bootstrap servers.
    bootstrap: VoterSet,
    admin: Admin,
    /// A static seed's upgrade committed before the heal.
    upgraded_in_faults: bool,
    wipes: u64,
    rng: ChaCha8Rng,
    now_ms: u64,
    base: Instant,
    nodes: BTreeMap<NodeId, SimNode>,
    net: Network,
    clients: Vec<Client>,
    checker: Checker,
    next_op: u64,
    /// Down nodes and when they restart.
    restarts: BTreeMap<NodeId, u64>,
    faulting: bool,
    next_fault: u64,
    heal_partition_at: Option<u64>,
    issuing: bool,
    crashes: u64,
    disk_faults: u64,
    partitions: u64,
    stalls: u64,
    snapshots_written: u64,
    installs: u64,
    truncations: u64,
    proposals_refused: u64,
    epoch_max: u64,
}

impl Sim {
    fn new(spec: SimSpec) -> Result<Sim, String> {
        if !(1..=5).contains(&spec.nodes) {
            return Err(format!("{} nodes: the simulator runs 1 to 5", spec.nodes));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        if spec.spares > SPARES_MAX {
            return Err(format!(
                "{} spares: the simulator runs 0 to {SPARES_MAX}",
                spec.spares
            ));
        }
        if spec.static_quorum && spec.spares > 0 && !spec.voter_changes {
            return Err(format!(
                "{} spares of a static quorum without voter changes: they learn the voters \
                 only from the upgrade, which the admin of voter changes asks for",
                spec.spares
            ));
        }
        let ids: Vec<u32> = (1..=(spec.nodes + spec.spares) as u32).collect();
        // A static quorum's `controller.quorum.voters` names no directory ids.
        let voters = VoterSet::new(
            ids[..spec.nodes]
                .iter()
                .map(|&id| Voter {
                    key: if spec.static_quorum {
                        ReplicaKey {
                            id: NodeId(id),
                            directory_id: Uuid::ZERO,
                        }
                    } else {
                        replica_key(id)
                    },
                    endpoints: vec![endpoint(id)],
                })
                .collect(),
        )
        .map_err(|e| e.to_string())?;
        let timing = NodeTiming {
            fsync_ms_max: 3,
            port_delay_ms_max: spec.faults.port_delay_ms_max,
        };
        let mut nodes = BTreeMap::new();
        for &id in &ids {
            let format = if !spec.static_quorum {
                Format::Dynamic(&voters)
            } else if voters.contains_id(NodeId(id)) {
                Format::Static(&voters)
            } else {
                Format::Join(&voters)
            };
            let (driver, service) = node_configs_of(replica_key(id), format, spec.seed)?;
            let disk_seed = rng.gen();
            nodes.insert(
                NodeId(id),
                SimNode::new(
                    replica_key(id),
                    disk_seed,
                    driver,
                    service,
                    timing,
                    spec.mutation,
                ),
            );
        }
        let f = spec.faults;
        let net = Network::new(NetFaults {
            drop_pct: f.drop_pct,
            duplicate_pct: f.duplicate_pct,
            delay_min_ms: 1,
            delay_max_ms: f.delay_ms_max.max(1),
        });
        let clients = (0..CLIENTS)
            .map(|id| Client {
                id,
                guess: None,
                waiting: None,
                next_at: 0,
            })
            .collect();
        let mut sim = Sim {
            spec,
            bootstrap: voters.clone(),
            admin: Admin {
                waiting: None,
                next_at: 0,
                next_id: *ADMIN_IDS.end(),
                next_request_id: 1,
                asked: 0,
                upgrades_asked: 0,
            },
            upgraded_in_faults: false,
            wipes: 0,
            rng,
            now_ms: 0,
            base: Instant::now(),
            nodes,
            net,
            clients,
            checker: Checker::new(voters),
            next_op: 0,
            restarts: BTreeMap::new(),
            faulting: true,
            next_fault: 0,
            heal_partition_at: None,
            issuing: true,
            crashes: 0,
            disk_faults: 0,
            partitions: 0,
            stalls: 0,
            snapshots_written: 0,
            installs: 0,
            truncations: 0,
            proposals_refused: 0,
            epoch_max: 0,
        };
        for n in sim.nodes.values_mut() {
            n.start(0)?;
        }
        sim.next_fault = sim.rng.gen_range(100..400);
        if spec.voter_changes {
            sim.admin.next_at = sim.rng.gen_range(200..600);
        }
        Ok(sim)
    }

    fn run(&mut self) -> Result<(), String> {
        // Faults.
        self.run_until(self.spec.fault_ms, |_| false)?;
        self.upgraded_in_faults = self.checker.voters.upgrade_committed().is_some();
        // The heal: everything up, a reliable network, no more faults.
        self.faulting = false;
        self.net.heal();
        self.heal_partition_at = None;
        self.net.faults = NetFaults::reliable(1);
        let now = self.now_ms;
        for t in self.restarts.values_mut() {
            *t = now;
        }
        self.run_until(self.now_ms + AFTER_HEAL_MS, |_| false)?;
        self.issuing = false;
        let before = self.settle("after the heal")?;
        self.checker.close();
        self.checker.check_final(&before)?;
        let voters = self.checker.voters.check_final(&self.nodes)?;
        let version = self.check_kraft_version()?;
        // Every node loses power at once and restarts from its disk.
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in ids {
            self.power_off(id, false);
        }
        let now = self.now_ms;
        for n in self.nodes.values_mut() {
            n.start(now)?;
        }
        let after = self.settle("after every node restarted")?;
        let state = |i: &MetadataImage| MetadataImage {
            end_offset: corum_types::LogOffset::ZERO,
            ..i.clone()
        };
        if state(&before) != state(&after) {
            return Err(format!(
                "the image replayed from the disks after a restart (end {}) differs from the \
                 one before it (end {})",
                after.end_offset, before.end_offset
            ));
        }
        self.checker.check_final(&after)?;
        let voters_after = self.checker.voters.check_final(&self.nodes)?;
        if voters_after != voters {
            return Err(format!(
                "the voter set replayed from the disks after a restart, {}, differs from the \
                 one before it, {}",
                checker::keys(&voters_after),
                checker::keys(&voters)
            ));
        }
        let version_after = self.check_kraft_version()?;
        if version_after != version {
            return Err(format!(
                "kraft.version {version_after} replayed from the disks after a restart, \
                 {version} before it"
            ));
        }
        Ok(())
    }

    /// After the heal: every node runs the same kraft.version, 1 unless the seed is static and
    /// never upgraded (an upgrade answered Ok, or any in a static seed with voter changes,
    /// which must end upgraded); returns it.
    fn check_kraft_version(&self) -> Result<u16, String> {
        let version = checker::same_kraft_version(&self.nodes)?;
        let v = &self.checker.voters;
        let upgraded = v.upgrade_committed().is_some();
        let must_upgrade = self.spec.static_quorum && self.spec.voter_changes;
        if self.spec.static_quorum && (must_upgrade || v.upgrades_acked > 0) && !upgraded {
            return Err(format!(
                "a static seed ends without the upgrade in its committed voter history (voter \
                 changes: {}, upgrades answered Ok: {})",
                self.spec.voter_changes, v.upgrades_acked
            ));
        }
        let expected = u16::from(!self.spec.static_quorum || upgraded);
        if version != expected {
            return Err(format!(
                "every node runs kraft.version {version}, not {expected} (static: {}, the \
                 upgrade committed: {upgraded}, answered Ok {} times)",
                self.spec.static_quorum, v.upgrades_acked
            ));
        }
        Ok(version)
    }

    /// Runs until every node is up, one leader leads all of them, every node has replayed
    /// the leader's whole log and nothing waits; returns the (identical) committed image.
    fn settle(&mut self, when: &str) -> Result<MetadataImage, String> {
        let deadline = self.now_ms + SETTLE_MS_MAX;
        let settled = self.run_until(deadline, |sim| sim.settled())?;
        if !settled {
            return Err(format!(
                "the cluster did not settle {when} within {SETTLE_MS_MAX} ms: {}",
                self.status_line()
            ));
        }
        checker::same_images(&self.nodes)
    }

    fn settled(&self) -> bool {
        if self.clients.iter().any(|c| c.waiting.is_some()) || self.admin.waiting.is_some() {
            return false;
        }
        let mut leader = None;
        for n in self.nodes.values() {
            let Some(run) = n.run.as_ref() else {
                return false;
            };
            let raft = run.driver.raft();
            let s = raft.status();
            if s.leader.is_none() || leader.is_some_and(|l| Some(l) != s.leader) {
                return false;
            }
            leader = s.leader;
            if !run.calls.is_empty() {
                return false;
            }
        }
        let Some(l) = leader.and_then(|l| self.nodes.get(&l)) else {
            return false;
        };
        let lrun = l.run.as_ref().expect("checked up");
        let raft = lrun.driver.raft();
        if raft.role() != Role::Leader
            || raft.high_watermark() != raft.log_end_offset()
            || !lrun.service.is_active()
        {
            return false;
        }
        if self.spec.static_quorum && self.spec.voter_changes && raft.kraft_version() == 0 {
            return false;
        }
        let hwm = raft.high_watermark();
        let set = raft.voter_set();
        if self.stale_voters(set).next().is_some() {
            return false;
        }
        self.nodes.values().all(|n| {
            let run = n.run.as_ref().expect("checked up");
            let raft = run.driver.raft();
            run.service.controller().committed_end() == hwm
                && run.driver.log().durable_end() == hwm
                && raft.voter_set() == set
        })
    }

    /// The voters of `set` whose node no longer has their disk (wiped since; a static voter
    /// is any disk of its id).
    fn stale_voters<'a>(&'a self, set: &'a VoterSet) -> impl Iterator<Item = ReplicaKey> + 'a {
        set.voters()
            .iter()
            .map(|v| v.key)
            .filter(|k| self.nodes.get(&k.id).is_none_or(|n| !n.key.is(k)))
    }

    /// The node that leads the highest epoch, as far as the nodes say.
    fn leader(&self) -> Option<NodeId> {
        self.nodes
            .values()
            .filter_map(|n| n.run.as_ref().map(|r| (n.id, r.driver.raft())))
            .filter(|(_, raft)| raft.role() == Role::Leader)
            .max_by_key(|(_, raft)| raft.epoch())
            .map(|(id, _)| id)
    }

    fn status_line(&self) -> String {
        let mut parts = Vec::new();
        for n in self.nodes.values() {
            match n.run.as_ref() {
                None => parts.push(format!("{} down", n.id)),
                Some(run) => {
                    let raft = run.driver.raft();
                    parts.push(format!(
                        "{}/{} {:?} epoch {} leader {:?} kraft.version {} voters {} end {} \
                         hwm {} replayed {} calls {} active {}",
                        n.id,
                        n.key.directory_id.0[1],
                        raft.role(),
                        raft.epoch(),
                        raft.status().leader,
                        raft.kraft_version(),
                        checker::keys(raft.voter_set()),
                        raft.log_end_offset(),
                        raft.high_watermark(),
                        run.service.controller().committed_end(),
                        run.calls.len(),
                        run.service.is_active()
                    ));
                }
            }
        }
        parts.join("; ")
    }

    /// Steps events until `until` or until `stop` holds (checked between events); true if
    /// `stop` held.
    fn run_until(&mut self, until: u64, stop: impl Fn(&Sim) -> bool) -> Result<bool, String> {
        let mut steps_at_now = 0u32;
        loop {
            if stop(self) {
                return Ok(true);
            }
            let next = self.next_event().min(until);
            if next <= self.now_ms {
                steps_at_now += 1;
                if steps_at_now > 100_000 {
                    return Err(format!(
                        "the simulation does not advance past {} ms: {}",
                        self.now_ms,
                        self.status_line()
                    ));
                }
            } else {
                steps_at_now = 0;
            }
            self.now_ms = self.now_ms.max(next);
            if self.now_ms >= until && next >= until {
                self.step()?;
                return Ok(stop(self));
            }
            self.step()?;
        }
    }

    fn next_event(&self) -> u64 {
        let mut next = u64::MAX;
        let mut at = |t: Option<u64>| {
            if let Some(t) = t {
                next = next.min(t);
            }
        };
        at(self.net.next_at());
        for n in self.nodes.values() {
            at(n.next_wakeup());
        }
        for c in &self.clients {
            at(c.waiting.map(|(_, give_up)| give_up));
            if c.waiting.is_none() && self.issuing {
                at(Some(c.next_at));
            }
        }
        at(self.restarts.values().min().copied());
        if self.spec.voter_changes {
            match &self.admin.waiting {
                Some(c) => at(Some(c.give_up_at)),
                None => at(Some(self.admin.next_at)),
            }
        }
        if self.faulting {
            at(Some(self.next_fault));
        }
        at(self.heal_partition_at);
        next
    }

    fn step(&mut self) -> Result<(), String> {
        let now = self.now_ms;
        if self.faulting && self.next_fault <= now {
            self.fault();
            self.next_fault = now + self.rng.gen_range(100..400);
        }
        if self.heal_partition_at.is_some_and(|t| t <= now) {
            self.heal_partition_at = None;
            self.net.heal();
        }
        let due: Vec<NodeId> = self
            .restarts
            .iter()
            .filter(|(_, &t)| t <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.restarts.remove(&id);
            let node = self.nodes.get_mut(&id).expect("a node of the cluster");
            node.start(now)?;
        }
        while let Some(env) = self.net.pop_due(now) {
            if let Some(n) = self.nodes.get_mut(&env.to) {
                n.step(env.from, env.msg);
            }
        }
        self.clients_step()?;
        self.admin_step()?;
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in ids {
            let mut out = NodeOutput::default();
            let node = self.nodes.get_mut(&id).expect("listed");
            if !node.is_up() {
                continue;
            }
            let pumped = node.pump(now, self.base, &mut self.rng, &mut out);
            if let Some(run) = node.run.as_ref() {
                self.epoch_max = self.epoch_max.max(run.driver.raft().epoch().get());
            }
            self.installs += out.installs;
            self.truncations += out.truncations;
            self.proposals_refused += out.refused;
            self.checker.voters.observe(id, &self.nodes)?;
            for (batch, calls) in &out.appended {
                self.checker.appended(id, *batch, calls);
            }
            let key = self.nodes[&id].key;
            for (to, msg) in out.messages {
                let to = if BOOTSTRAP_IDS.contains(&to.0) {
                    self.bootstrap_server(id, to)?
                } else {
                    to
                };
                match msg {
                    Message::VoterChangeResponse(r) if ADMIN_IDS.contains(&to.0) => {
                        self.on_admin_answer(to, r)?;
                        continue;
                    }
                    Message::VoteResponse(ref v) if v.granted && !v.pre_vote => {
                        self.checker.voters.vote_granted(v.request_epoch, to, key);
                    }
                    _ => {}
                }
                if ADMIN_IDS.contains(&to.0) {
                    return Err(format!("{id} sent the admin {msg:?}"));
                }
                self.net.send(&mut self.rng, now, id, to, msg);
            }
            for (route, frame) in out.answers {
                self.on_answer(route, frame)?;
            }
            if let Err(fatal) = pumped {
                // The node's process stops on a fatal error, which only an injected disk fault
                // may cause; it is restarted like a crash.
                let node = self.nodes.get_mut(&id).expect("listed");
                if node.faults_owed == 0 {
                    return Err(format!("{id} stopped without an injected fault: {fatal}"));
                }
                node.faults_owed -= 1;
                self.stop_node(id, false);
            }
        }
        Ok(())
    }

    /// The node listening at the bootstrap server that node `from` sends to as `to` (an id of
    /// [`BOOTSTRAP_IDS`]: the index of the server in its configuration).
    fn bootstrap_server(&self, from: NodeId, to: NodeId) -> Result<NodeId, String> {
        let servers = &self.nodes[&from].config().bootstrap_servers;
        usize::try_from(to.0 - BOOTSTRAP_IDS.start)
            .ok()
            .and_then(|i| servers.get(i))
            .and_then(|(host, _)| host.strip_prefix("sim-")?.parse().ok())
            .map(NodeId)
            .filter(|id| self.nodes.contains_key(id))
            .ok_or_else(|| {
                format!("{from} sent to bootstrap id {to}, which none of {servers:?} is")
            })
    }

    fn stop_node(&mut self, id: NodeId, torn: bool) {
        let delay = self.rng.gen_range(50..1_500);
        self.power_off(id, torn);
        let at = if self.faulting {
            self.now_ms + delay
        } else {
            self.now_ms
        };
        self.restarts.insert(id, at);
    }

    /// Node `id` loses power; the snapshots its process wrote are counted first.
    fn power_off(&mut self, id: NodeId, torn: bool) {
        let node = self.nodes.get_mut(&id).expect("a node of the cluster");
        self.snapshots_written += node
            .run
            .as_ref()
            .map_or(0, |r| r.driver.snapshots_written());
        node.crash(torn);
    }

    /// One fault of the seeded schedule (or none).
    fn fault(&mut self) {
        let f = self.spec.faults;
        let up: Vec<NodeId> = self
            .nodes
            .values()
            .filter(|n| n.is_up())
            .map(|n| n.id)
            .collect();
        if up.is_empty() {
            return;
        }
        // Half of the faults hit the leader, if there is one.
        let leader = up.iter().copied().find(|id| {
            self.nodes[id]
                .run
                .as_ref()
                .is_some_and(|r| r.driver.raft().role() == Role::Leader)
        });
        let victim = match leader {
            Some(l) if self.rng.gen_bool(0.5) => l,
            _ => up[self.rng.gen_range(0..up.len())],
        };
        let kinds = if f.wipes && self.spec.voter_changes {
            6
        } else {
            5
        };
        match self.rng.gen_range(0..kinds) {
            5 => self.wipe(victim),
            0 if f.crashes => {
                let torn = f.torn_writes && self.rng.gen_bool(0.5);
                self.crashes += 1;
                self.stop_node(victim, torn);
            }
            1 if f.disk_errors => {
                self.disk_faults += 1;
                let fault = if self.rng.gen_bool(0.5) {
                    SimFault::FailNextWrite
                } else {
                    SimFault::FailNextSync
                };
                self.nodes
                    .get_mut(&victim)
                    .expect("a node of the cluster")
                    .inject(fault);
            }
            2 if f.partitions && self.heal_partition_at.is_none() && self.nodes.len() > 1 => {
                self.partitions += 1;
                let others: Vec<NodeId> = self
                    .nodes
                    .keys()
                    .copied()
                    .filter(|&id| id != victim)
                    .collect();
                if self.rng.gen_bool(0.5) {
                    self.net.partition(&[victim], &others);
                } else {
                    // One way: the victim hears nothing (it will call elections).
                    for &o in &others {
                        self.net.cut(o, victim);
                    }
                }
                self.heal_partition_at = Some(self.now_ms + self.rng.gen_range(200..1_500));
            }
            3 if f.stalls => {
                self.stalls += 1;
                let until = self.now_ms + self.rng.gen_range(50..600);
                self.nodes
                    .get_mut(&victim)
                    .expect("a node of the cluster")
                    .stall(until);
            }
            _ => {}
        }
    }

    /// Wipes `victim`'s disk (see the module doc) unless that could take a majority's data or
    /// leave the quorum without one, or leave the node without a bootstrap voter to ask for
    /// the leader. A voter's disk is wiped only when no change is under way
    /// anywhere — every node up, each log's latest voter set the last committed one — and
    /// that set has 3 voters or more, none of them wiped before: a VotersRecord waiting in
    /// some log could otherwise commit a set that needs the lost voter. In a static seed, only
    /// once the upgrade has committed (a static voter is any disk of its id, the empty one
    /// too); the new disk is formatted to join.
    fn wipe(&mut self, victim: NodeId) {
        // A wiped node finds the leader by asking a voter of its bootstrap set other than
        // itself: the sole bootstrap voter would find nobody to ask.
        if self.bootstrap.ids().all(|id| id == victim) {
            return;
        }
        let committed = self
            .checker
            .voters
            .history
            .values()
            .next_back()
            .expect("the bootstrap set");
        let in_some_set = committed.contains_id(victim)
            || self.nodes.values().any(|n| {
                n.run
                    .as_ref()
                    .is_none_or(|r| r.driver.raft().voter_set().contains_id(victim))
            });
        if in_some_set {
            let dynamic =
                !self.spec.static_quorum || self.checker.voters.upgrade_committed().is_some();
            let settled = dynamic
                && committed.len() >= 3
                && self.stale_voters(committed).next().is_none()
                && self.admin.waiting.is_none()
                && self.nodes.values().all(|n| {
                    n.run
                        .as_ref()
                        .is_some_and(|r| r.driver.raft().voter_set() == committed)
                });
            if !settled {
                return;
            }
        }
        self.wipes += 1;
        let old = self.nodes[&victim].key;
        let key = replica_key_of(victim.0, old.directory_id.0[1] + 1);
        // The defect: the node's configuration goes by the old directory, its disk is new.
        let configured = if self.spec.mutation == Some(Mutation::WipeKeepsDirectoryId) {
            old
        } else {
            key
        };
        let format = if self.spec.static_quorum {
            Format::Join(&self.bootstrap)
        } else {
            Format::Dynamic(&self.bootstrap)
        };
        let (driver, service) = node_configs_of(configured, format, self.spec.seed)
            .expect("the configuration the node started with");
        let disk_seed = self.rng.gen();
        self.power_off(victim, false);
        self.nodes
            .get_mut(&victim)
            .expect("a node of the cluster")
            .wipe(key, disk_seed, driver, service);
        let delay = self.rng.gen_range(50..1_500);
        self.restarts.insert(victim, self.now_ms + delay);
    }

    /// The admin: gives up on an answer that does not come; otherwise, when due, asks the
    /// node that leads for one change — in a static seed whose leader runs kraft.version 0 the
    /// upgrade (at any time; a quarter of the requests validate only), else during the fault
    /// phase a random one (remove a voter, the leader a third of the time; add an observer
    /// that is up), at any time first the removal of a wiped voter.
    fn admin_step(&mut self) -> Result<(), String> {
        let now = self.now_ms;
        if !self.spec.voter_changes {
            return Ok(());
        }
        if let Some(c) = &self.admin.waiting {
            if c.give_up_at > now {
                return Ok(());
            }
            self.admin.waiting = None;
            self.admin.next_at = now;
        }
        if self.admin.next_at > now {
            return Ok(());
        }
        self.admin.next_at = now + self.rng.gen_range(100..400);
        let Some(leader) = self.leader() else {
            return Ok(());
        };
        let raft = self.nodes[&leader]
            .run
            .as_ref()
            .expect("a leader is up")
            .driver
            .raft();
        let set = raft.voter_set().clone();
        let changes_before = raft.voter_set_changes();
        let end_before = raft.log_end_offset();
        let stale = self.stale_voters(&set).next();
        let change = if self.spec.static_quorum && raft.kraft_version() == 0 {
            VoterChange::Upgrade
        } else if let Some(k) = stale {
            VoterChange::Remove(k)
        } else if !self.faulting {
            return Ok(());
        } else {
            let adds: Vec<ReplicaKey> = self
                .nodes
                .values()
                .filter(|n| n.is_up() && !set.contains_id(n.id))
                .map(|n| n.key)
                .collect();
            let can_add = set.len() < VOTERS_MAX && !adds.is_empty();
            let can_remove = set.len() > 1;
            if can_add && (!can_remove || self.rng.gen_bool(0.5)) {
                VoterChange::Add(adds[self.rng.gen_range(0..adds.len())])
            } else if can_remove {
                let voters = set.voters();
                let k = if set.contains_id(leader) && self.rng.gen_ratio(1, 3) {
                    voters
                        .iter()
                        .find(|v| v.key.id == leader)
                        .expect("checked")
                        .key
                } else {
                    voters[self.rng.gen_range(0..voters.len())].key
                };
                VoterChange::Remove(k)
            } else {
                return Ok(());
            }
        };
        let from = NodeId(self.admin.next_id);
        self.admin.next_id = if self.admin.next_id == *ADMIN_IDS.start() {
            *ADMIN_IDS.end()
        } else {
            self.admin.next_id - 1
        };
        let request_id = self.admin.next_request_id;
        self.admin.next_request_id += 1;
        let validate_only = change == VoterChange::Upgrade && self.rng.gen_ratio(1, 4);
        match change {
            VoterChange::Upgrade if validate_only => {}
            VoterChange::Upgrade => self.admin.upgrades_asked += 1,
            _ => self.admin.asked += 1,
        }
        let message = match change {
            VoterChange::Upgrade => Message::UpgradeKraftVersion(UpgradeKraftVersionRequest {
                request_id,
                version: 1,
                validate_only,
            }),
            VoterChange::Add(key) => Message::AddVoter(AddVoterRequest {
                request_id,
                voter: Voter {
                    key,
                    endpoints: vec![endpoint(key.id.0)],
                },
            }),
            VoterChange::Remove(key) => Message::RemoveVoter(RemoveVoterRequest {
                request_id,
                voter: key,
            }),
        };
        self.admin.waiting = Some(AdminCall {
            from,
            request_id,
            change,
            validate_only,
            give_up_at: now + ADMIN_WAIT_MS,
            history_end: self.checker.voters.end,
        });
        let node = self.nodes.get_mut(&leader).expect("listed");
        node.step(from, message);
        let raft = node.run.as_ref().expect("a leader is up").driver.raft();
        let appended = raft.voter_set_changes() != changes_before;
        if validate_only && raft.log_end_offset() != end_before {
            return Err(format!(
                "{leader} appended to its log for an upgrade that validates only (log end \
                 {end_before}, then {})",
                raft.log_end_offset()
            ));
        }
        if appended && self.spec.mutation == Some(Mutation::VoterChangeAnsweredAtAppend) {
            self.on_admin_answer(
                from,
                VoterChangeResponse {
                    request_id,
                    result: Ok(()),
                    leader: Some(leader),
                },
            )?;
        }
        Ok(())
    }

    /// The answer to the admin's change from id `to`: an Ok is checked against the committed
    /// voter history; an answer to a change the admin gave up on is dropped.
    fn on_admin_answer(&mut self, to: NodeId, r: VoterChangeResponse) -> Result<(), String> {
        let Some(c) = self.admin.waiting.as_ref() else {
            return Ok(());
        };
        if c.from != to || c.request_id != r.request_id {
            return Ok(());
        }
        let c = self.admin.waiting.take().expect("checked");
        // A validation's Ok commits nothing.
        if r.result.is_ok() && !c.validate_only {
            self.checker.voters.change_acked(c.change, c.history_end)?;
        }
        self.admin.next_at = self.now_ms + self.rng.gen_range(50..400);
        Ok(())
    }

    /// Clients give up on answers that do not come, and idle ones send their next write.
    fn clients_step(&mut self) -> Result<(), String> {
        let now = self.now_ms;
        for i in 0..self.clients.len() {
            if self.clients[i]
                .waiting
                .is_some_and(|(_, give_up)| give_up <= now)
            {
                let c = &mut self.clients[i];
                c.waiting = None;
                c.guess = None;
                c.next_at = now;
            }
            let c = &self.clients[i];
            if !self.issuing || c.waiting.is_some() || c.next_at > now {
                continue;
            }
            let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
            let target = match c.guess {
                Some(g) => g,
                None => ids[self.rng.gen_range(0..ids.len())],
            };
            self.next_op += 1;
            let op = self.next_op;
            let key = if self.rng.gen_bool(0.5) {
                self.rng.gen_range(0..SHARED_KEYS)
            } else {
                SHARED_KEYS + op
            };
            let value = op;
            self.checker.invoked(op, key, value, now);
            let client = c.id;
            self.clients[i].waiting = Some((op, now + CLIENT_WAIT_MS));
            let frame = RequestFrame {
                correlation_id: op,
                timeout_ms: REQUEST_TIMEOUT_MS,
                body: RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
                    resources: vec![AlterConfigsResource {
                        resource: config_resource(key),
                        configs: vec![AlterableConfig {
                            key: CONFIG_KEY.into(),
                            op: AlterConfigOp::Set,
                            value: value.to_string(),
                        }],
                    }],
                    validate_only: false,
                }),
            };
            let at = self.base + std::time::Duration::from_millis(now);
            let node = self.nodes.get_mut(&target).expect("a node of the cluster");
            match node.call((client, op), frame, at, now) {
                Ok(Some(id)) => self.checker.registered(op, target, id),
                // A node that is down: no answer, the client gives up in time.
                Ok(None) => {}
                Err((route, frame)) => self.on_answer(route, frame)?,
            }
        }
        Ok(())
    }

    fn on_answer(&mut self, (client, op): Route, frame: ResponseFrame) -> Result<(), String> {
        let (outcome, guess) = match frame.body {
            Ok(ResponseBody::IncrementalAlterConfigs(r)) => {
                if r.resources.iter().all(|(_, res)| res.is_ok()) {
                    (Outcome::Acked, None)
                } else {
                    (Outcome::Failed, None)
                }
            }
            Ok(other) => return Err(format!("op {op}: a write answered {other:?}")),
            Err(RpcError::NotController { leader }) => (Outcome::Unknown, leader.map(|h| h.id)),
            Err(RpcError::Timeout { .. }) => (Outcome::Unknown, None),
            Err(_) => (Outcome::Failed, None),
        };
        if outcome == Outcome::Unknown {
            // Only a success or a refusal decides a write: leave it open.
            self.checker.answered_unknown(op)?;
        } else {
            self.checker
                .completed(op, outcome, self.now_ms, &self.nodes)?;
        }
        let now = self.now_ms;
        if let Some(c) = self.clients.iter_mut().find(|c| c.id == client) {
            if c.waiting.is_some_and(|(o, _)| o == op) {
                c.waiting = None;
                c.guess = if outcome == Outcome::Unknown {
                    guess
                } else {
                    c.guess.or(guess)
                };
                c.next_at = now + self.rng.gen_range(0..20);
            }
        }
        Ok(())
    }

    fn fill(&self, r: &mut SeedReport) {
        r.writes = self.checker.writes.len() as u64;
        r.acked = self.checker.acked;
        r.answers_checked = self.checker.answers_checked;
        r.crashes = self.crashes;
        r.disk_faults = self.disk_faults;
        r.partitions = self.partitions;
        r.stalls = self.stalls;
        r.epoch_max = self.epoch_max;
        r.installs = self.installs;
        r.truncations = self.truncations;
        r.proposals_refused = self.proposals_refused;
        r.voter_changes_asked = self.admin.asked;
        r.voter_changes_acked = self.checker.voters.changes_acked;
        r.voter_records = self.checker.voters.history.len() as u64 - 1;
        r.upgrades_asked = self.admin.upgrades_asked;
        r.upgrades_acked = self.checker.voters.upgrades_acked;
        r.upgraded_in_faults = self.upgraded_in_faults;
        r.upgraded = self.checker.voters.upgrade_committed().is_some();
        r.kraft_version = self
            .nodes
            .values()
            .filter_map(|n| n.run.as_ref())
            .map(|r| r.driver.raft().kraft_version())
            .max()
            .unwrap_or(0);
        r.wipes = self.wipes;
        r.elections_checked = self.checker.voters.elections_checked;
        r.snapshots_written = self.snapshots_written
            + self
                .nodes
                .values()
                .filter_map(|n| n.run.as_ref())
                .map(|r| r.driver.snapshots_written())
                .sum::<u64>();
        r.committed_end = self
            .nodes
            .values()
            .filter_map(|n| n.run.as_ref())
            .map(|r| r.driver.raft().high_watermark().get())
            .max()
            .unwrap_or(0);
        r.sim_ms = self.now_ms;
    }
}

/// Node `id`'s replica on the disk it was formatted with `wipes` times: the directory id
/// holds both (byte 0 the id, byte 1 the wipes).
pub(crate) fn replica_key_of(id: u32, wipes: u8) -> ReplicaKey {
    let mut dir = [0xd1; 16];
    dir[0] = id as u8;
    dir[1] = wipes;
    ReplicaKey {
        id: NodeId(id),
        directory_id: Uuid(dir),
    }
}

/// Node `id`'s replica on its first disk.
pub(crate) fn replica_key(id: u32) -> ReplicaKey {
    replica_key_of(id, 0)
}

pub(crate) fn endpoint(id: u32) -> Endpoint {
    Endpoint {
        listener: "CONTROLLER".into(),
        host: format!("sim-{id}"),
        port: 9093,
    }
}

/// How a node's disk was formatted (`corum format`), and so what its Raft replica starts from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Format<'a> {
    /// `--initial-controllers`: a dynamic quorum's bootstrap voters (kraft.version 1).
    Dynamic(&'a VoterSet),
    /// No bootstrap checkpoint, `controller.quorum.voters` naming these voters (without
    /// directory ids): a static quorum (kraft.version 0).
    Static(&'a VoterSet),
    /// `--no-initial-controllers`: kraft.version 1 and no voters, the leader found through
    /// `controller.quorum.bootstrap.servers`, these voters' addresses.
    Join(&'a VoterSet),
}

/// The node's own configuration path for simulated node `id` of a dynamic quorum of `voters`:
/// the node config's defaults through [`components`], with timeouts, segments and snapshots
/// scaled down so that a few simulated seconds see elections, compaction and snapshot
/// installs.
#[cfg(test)]
pub(crate) fn node_configs(
    id: u32,
    voters: &VoterSet,
    seed: u64,
) -> Result<
    (
        crate::driver::RaftDriverConfig,
        crate::service::ControllerServiceConfig,
    ),
    String,
> {
    node_configs_of(replica_key(id), Format::Dynamic(voters), seed)
}

/// [`node_configs`] for the replica `key` (a node on a disk after wipes) formatted as
/// `format` says.
pub(crate) fn node_configs_of(
    key: ReplicaKey,
    format: Format<'_>,
    seed: u64,
) -> Result<
    (
        crate::driver::RaftDriverConfig,
        crate::service::ControllerServiceConfig,
    ),
    String,
> {
    let id = key.id.0;
    let mut node = NodeConfig::for_tests();
    node.node_id = key.id;
    node.metadata_log_dir = PathBuf::from(format!("/sim/node-{id}"));
    // Each disk of a node draws its own election jitter.
    node.controller_seed = seed ^ u64::from(key.directory_id.0[1]);
    let address = |v: &Voter| {
        let e = &v.endpoints[0];
        HostPort {
            host: e.host.clone(),
            port: e.port,
        }
    };
    let replica = match format {
        Format::Dynamic(voters) => RaftReplica {
            me: key,
            endpoints: vec![endpoint(id)],
            bootstrap_voters: voters.clone(),
            kraft_version: 1,
        },
        Format::Static(voters) => {
            node.quorum_voters = voters
                .voters()
                .iter()
                .map(|v| QuorumVoter {
                    id: v.key.id,
                    endpoint: address(v),
                    directory_id: None,
                })
                .collect();
            components::raft_replica(&node, key.directory_id, None).map_err(|e| e.to_string())?
        }
        Format::Join(voters) => {
            node.quorum_voters = Vec::new();
            node.quorum_bootstrap_servers = voters.voters().iter().map(address).collect();
            let joining = crate::bootstrap::BootstrapCheckpoint {
                kraft_version: 1,
                voters: Vec::new(),
                features: corum_controller::control::feature_control::default_bootstrap_features(),
            };
            RaftReplica {
                // Its controller listener, as the simulator names it.
                endpoints: vec![endpoint(id)],
                ..components::raft_replica(&node, key.directory_id, Some(&joining))
                    .map_err(|e| e.to_string())?
            }
        }
    };
    let service_voters = replica.bootstrap_voters.clone();
    let mut driver = components::raft_driver(&node, replica).map_err(|e| e.to_string())?;
    driver.raft = corum_raft::Config {
        election_timeout_ms: 150,
        fetch_timeout_ms: 300,
        election_backoff_max_ms: 100,
        heartbeat_interval_ms: 50,
        request_timeout_ms: 200,
        fetch_wait_max_ms: 100,
        snapshot_chunk_bytes_max: 512,
        // Observers served at once, on either event: the Raft simulator runs the pacing
        // (`corum_raft::Config::observer_fetch_interval_ms`) on half of its seeds; the seeds
        // of this one's mutation tests were found without it.
        observer_fetch_interval_ms: 0,
        ..driver.raft
    };
    driver.log = LogConfig {
        segment_bytes: 16 << 10,
        ..LogConfig::default()
    };
    driver.log_retention_bytes = Some(0);
    driver.request_timeout_default_ms = u64::from(REQUEST_TIMEOUT_MS);
    let mut service = components::controller_service(&node, &service_voters);
    service.snapshot_bytes_between = 2 << 10;
    service.controller_tick_interval_ms = 50;
    Ok((driver, service))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fault-free seed settles, acknowledges writes and checks them.
    /// Runs `spec`'s seed, which must pass every check.
    fn passing_seed(spec: SimSpec) -> SeedReport {
        let r = run_seed(spec);
        assert!(
            r.ok(),
            "{:?}\nreplay: {}",
            r.violation,
            r.spec.replay_command()
        );
        r
    }

    /// Panics with the first failed seed's violation and replay command, if any.
    fn assert_no_failure(summary: &Summary) {
        if let Some(f) = summary.failed.first() {
            panic!(
                "{} of {} seeds failed; first: seed {}: {}\nreplay: {}",
                summary.failed.len(),
                summary.seeds,
                f.spec.seed,
                f.violation.as_deref().unwrap_or(""),
                f.spec.replay_command()
            );
        }
    }

    #[test]
    fn a_quiet_cluster_acknowledges_and_agrees() {
        let r = run_seed(SimSpec {
            faults: Faults::none(),
            ..SimSpec::new(1)
        });
        eprintln!("{r:?}");
        assert!(
            r.ok(),
            "{:?}\nreplay: {}",
            r.violation,
            r.spec.replay_command()
        );
        assert!(r.acked > 50, "{r:?}");
        assert_eq!(r.answers_checked, r.acked);
        assert!(r.snapshots_written > 0, "{r:?}");
    }

    /// Seeds under every fault.
    #[test]
    fn seeds_under_faults_keep_every_acknowledged_write() {
        let count = std::env::var("CORUM_NODE_SIM_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(500);
        let summary = run_seeds(SimSpec::new(1_000), count);
        assert_no_failure(&summary);
        assert!(summary.acked > count * 20, "{summary:?}");
        // The faults happened, and reached the paths they exist for.
        assert!(summary.crashes > 0 && summary.disk_faults > 0 && summary.partitions > 0);
        assert!(
            summary.installs > 0 && summary.truncations > 0,
            "{summary:?}"
        );
        assert!(summary.proposals_refused > 0, "{summary:?}");
    }

    /// Five nodes (two may fail) and one node (no replication at all) under the same faults.
    #[test]
    fn seeds_with_five_nodes_and_with_one() {
        for nodes in [5, 1] {
            let summary = run_seeds(
                SimSpec {
                    nodes,
                    ..SimSpec::new(20_000)
                },
                100,
            );
            assert_no_failure(&summary);
            assert!(summary.acked > 100 * 20, "{nodes} nodes: {summary:?}");
        }
    }

    /// Seeds with voter changes: 3 bootstrap voters and 2 observers, 1 and 2, 5 and 1, under
    /// every fault and disk wipes, while an admin removes and adds voters.
    #[test]
    fn seeds_with_voter_changes_keep_every_acknowledged_write() {
        let count: u64 = std::env::var("CORUM_NODE_SIM_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(500);
        let mut total = Summary::default();
        for (nodes, spares, share) in [(3, 2, 3), (1, 2, 1), (5, 1, 1)] {
            let seeds = count * share / 5;
            let summary = run_seeds(
                SimSpec {
                    nodes,
                    spares,
                    ..SimSpec::with_voter_changes(40_000 + 10_000 * nodes as u64)
                },
                seeds,
            );
            assert_no_failure(&summary);
            assert!(
                summary.acked > seeds * 20,
                "{nodes} + {spares}: {summary:?}"
            );
            // A single voter is down often (every fault hits it): fewer changes get through.
            assert!(
                summary.voter_changes_acked > seeds / 2 && summary.voter_records > seeds / 2,
                "{nodes} + {spares}: {summary:?}"
            );
            eprintln!("{nodes} + {spares}: {summary:?}");
            total.seeds += summary.seeds;
            total.wipes += summary.wipes;
            total.elections_checked += summary.elections_checked;
            total.installs += summary.installs;
        }
        assert!(total.wipes > 0 && total.installs > 0, "{total:?}");
        assert!(total.elections_checked > total.seeds, "{total:?}");
    }

    /// Static seeds with voter changes: 3 voters of a static quorum and 2 spares formatted to
    /// join, under every fault; the admin upgrades the quorum to kraft.version 1 (most of the
    /// time before the heal), then changes the voter set, and voters' disks are wiped once it
    /// is dynamic.
    #[test]
    fn static_seeds_upgrade_and_keep_every_acknowledged_write() {
        let count: u64 = std::env::var("CORUM_NODE_SIM_STATIC_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(150);
        let summary = run_seeds(SimSpec::static_with_voter_changes(70_000), count);
        assert_no_failure(&summary);
        eprintln!("static 3 + 2: {summary:?}");
        assert!(summary.acked > count * 20, "{summary:?}");
        // Every seed ends upgraded (checked per seed); most did under faults, and then went on
        // to change the voter set and wipe disks.
        assert_eq!(summary.upgraded, count, "{summary:?}");
        assert!(
            summary.upgraded_in_faults > count / 2 && summary.upgrades_acked > count / 2,
            "{summary:?}"
        );
        assert!(
            summary.upgrades_asked > summary.upgrades_acked,
            "{summary:?}"
        );
        assert!(
            summary.voter_changes_acked > count / 2 && summary.wipes > 0,
            "{summary:?}"
        );
        assert!(summary.installs > 0 && summary.elections_checked > count);
    }

    /// A static quorum without voter changes stays static under every fault: every node ends
    /// at kraft.version 0 with the voter set of `controller.quorum.voters`.
    #[test]
    fn static_seeds_without_voter_changes_stay_static() {
        let summary = run_seeds(
            SimSpec {
                static_quorum: true,
                ..SimSpec::new(80_000)
            },
            40,
        );
        assert_no_failure(&summary);
        assert!(summary.acked > 40 * 20, "{summary:?}");
        assert_eq!(summary.upgraded + summary.upgrades_asked, 0, "{summary:?}");
        assert!(summary.elections_checked > 40, "{summary:?}");
        // Spares would never learn the voters: refused.
        let r = run_seed(SimSpec {
            static_quorum: true,
            spares: 1,
            ..SimSpec::new(1)
        });
        assert!(r.violation.is_some_and(|v| v.contains("spares")));
    }

    /// An Ok released when the VotersRecord is appended is caught at once: the change is not
    /// in the committed history.
    #[test]
    fn the_checks_catch_a_voter_change_answered_before_its_commit() {
        let r = run_seed(SimSpec {
            mutation: Some(Mutation::VoterChangeAnsweredAtAppend),
            faults: Faults::none(),
            ..SimSpec::with_voter_changes(9)
        });
        let v = r.violation.unwrap_or_else(|| panic!("not caught"));
        assert!(v.contains("answered Ok"), "{v}");
        // The upgrade's Ok, likewise (the admin's first request of a static seed).
        let r = run_seed(SimSpec {
            mutation: Some(Mutation::VoterChangeAnsweredAtAppend),
            faults: Faults::none(),
            ..SimSpec::static_with_voter_changes(9)
        });
        let v = r.violation.unwrap_or_else(|| panic!("not caught"));
        assert!(v.contains("Upgrade was answered Ok"), "{v}");
    }

    /// A wiped node that keeps its old directory id is taken for the voter it was, with its
    /// log and votes forgotten: caught within 40 seeds (a leader won with its vote, counted it
    /// for a commit, or leads as it).
    #[test]
    fn the_checks_catch_an_empty_replica_taken_for_the_voter_it_was() {
        let caught: Vec<(u64, String)> = (0..40)
            .filter_map(|seed| {
                let r = run_seed(SimSpec {
                    mutation: Some(Mutation::WipeKeepsDirectoryId),
                    ..SimSpec::with_voter_changes(seed)
                });
                r.violation.map(|v| (seed, v))
            })
            .collect();
        // Seeds 10 and 33: a leader won with the vote of a wiped replica (3/1, 2/1) counted
        // as the voter it was.
        assert!(caught.len() >= 2, "{caught:?}");
        for (seed, v) in &caught {
            assert!(
                v.contains("votes of") || v.contains("durable on") || v.contains("leads"),
                "seed {seed}: {v}"
            );
        }
    }

    /// The voter checks, on histories written by hand: two uncommitted changes in a leader's
    /// log, two leaders in an epoch, a leader short of votes, a removed leader that goes on,
    /// histories that differ, an Ok change that never committed.
    #[test]
    fn the_voter_checks_catch_what_they_claim() {
        let (s1, s12, s123) = (voters(&[1]), voters(&[1, 2]), voters(&[1, 2, 3]));
        let at = |o: u64| LogOffset(o);
        let k = replica_key;
        let e = |n: u64| corum_types::Epoch(n);

        let mut v = checker::Voters::new(s12.clone());
        v.merge(
            NodeId(1),
            &[(at(0), s12.clone()), (at(5), s123.clone())],
            at(10),
        )
        .unwrap();
        assert_eq!(v.end, at(10));
        // A second change appended past the committed end while the first is uncommitted.
        let log = [
            (at(0), s12.clone()),
            (at(5), s123.clone()),
            (at(12), s12.clone()),
            (at(14), s1.clone()),
        ];
        let err = v.leader(k(1), e(2), &log, at(10), true).unwrap_err();
        assert!(err.contains("2 voter changes"), "{err}");
        // One is fine; the votes: 1 alone of [1, 2, 3] lacks a majority.
        let log = &log[..3];
        let err = v.leader(k(1), e(3), log, at(10), true).unwrap_err();
        assert!(err.contains("votes"), "{err}");
        v.vote_granted(e(4), NodeId(1), k(2));
        v.leader(k(1), e(4), log, at(10), true).unwrap();
        // A vote of a replica on another disk than the voter's does not count.
        v.vote_granted(e(5), NodeId(1), replica_key_of(2, 1));
        assert!(v.leader(k(1), e(5), log, at(10), true).is_err());
        // Epoch 4 had leader 1.
        v.vote_granted(e(4), NodeId(2), k(1));
        let err = v.leader(k(2), e(4), log, at(10), true).unwrap_err();
        assert!(err.contains("two leaders"), "{err}");
        // A leadership that committed nothing of its epoch is not counted (it may have been
        // in memory only): another leader of epoch 7 is not a second one.
        v.vote_granted(e(7), NodeId(1), k(2));
        v.leader(k(1), e(7), log, at(10), false).unwrap();
        v.vote_granted(e(7), NodeId(2), k(1));
        v.leader(k(2), e(7), log, at(10), true).unwrap();
        // 3 leads after its removal committed in its own log.
        let log = [
            (at(0), s12.clone()),
            (at(5), s123.clone()),
            (at(12), s12.clone()),
        ];
        let err = v.leader(k(3), e(6), &log, at(13), true).unwrap_err();
        assert!(err.contains("outside"), "{err}");

        // Another node's committed history says 1 alone at 5.
        let err = v
            .merge(
                NodeId(2),
                &[(at(0), s12.clone()), (at(5), s1.clone())],
                at(8),
            )
            .unwrap_err();
        assert!(err.contains("differ at offset @5"), "{err}");
        // A snapshot base at 7 with the set in force there agrees.
        v.merge(NodeId(2), &[(at(7), s123.clone())], at(9)).unwrap();
        // Adding 3 committed at 5; removing 3 did not commit.
        v.change_acked(VoterChange::Add(k(3)), at(0)).unwrap();
        let err = v
            .change_acked(VoterChange::Remove(k(3)), at(0))
            .unwrap_err();
        assert!(err.contains("answered Ok"), "{err}");
        // An Ok must come from a record after the end the history had when asked.
        assert!(v.change_acked(VoterChange::Add(k(3)), at(10)).is_err());
    }

    /// The voter checks of static seeds, on histories written by hand: a static voter is any
    /// replica of its id, for votes as for the leader itself; a node formatted to join knows
    /// no set before its first Voters record, and agrees from there; an upgrade answered Ok
    /// must be a committed set of the same voters with directory ids.
    #[test]
    fn the_static_voter_checks_catch_what_they_claim() {
        let at = |o: u64| LogOffset(o);
        let e = |n: u64| corum_types::Epoch(n);
        let k = replica_key;
        let (s123, d123, d12) = (
            static_voters(&[1, 2, 3]),
            voters(&[1, 2, 3]),
            voters(&[1, 2]),
        );

        assert!(VoterChange::Upgrade.made_by(&s123, &d123));
        assert!(!VoterChange::Upgrade.made_by(&s123, &d12));
        assert!(!VoterChange::Upgrade.made_by(&s123, &voters(&[1, 2, 4])));
        assert!(!VoterChange::Upgrade.made_by(&d123, &d123));
        assert!(!VoterChange::Upgrade.made_by(&s123, &s123));

        let mut v = checker::Voters::new(s123.clone());
        // 1 (on its disk 1/0) won epoch 1 with the vote of 2's disk: a majority of the static
        // set; 3 won nothing in epoch 2.
        v.vote_granted(e(1), NodeId(1), k(2));
        v.leader(k(1), e(1), &[(at(0), s123.clone())], at(4), true)
            .unwrap();
        let err = v
            .leader(k(3), e(2), &[(at(0), s123.clone())], at(4), true)
            .unwrap_err();
        assert!(err.contains("votes"), "{err}");
        // A joiner knows nothing before the upgrade's record; the upgrade is not committed yet.
        let joiner = [(at(0), VoterSet::default()), (at(6), d123.clone())];
        v.merge(NodeId(4), &joiner, at(5)).unwrap();
        assert_eq!(v.upgrade_committed(), None);
        let err = v.change_acked(VoterChange::Upgrade, at(0)).unwrap_err();
        assert!(err.contains("answered Ok"), "{err}");
        // Then it is, at 6, as the joiner's history says; an Ok must come from a record at or
        // after the end the history had when asked.
        v.merge(NodeId(4), &joiner, at(8)).unwrap();
        assert_eq!(v.upgrade_committed(), Some(at(6)));
        v.change_acked(VoterChange::Upgrade, at(5)).unwrap();
        assert!(v.change_acked(VoterChange::Upgrade, at(7)).is_err());
        assert_eq!(v.upgrades_acked, 1);
        // A voter whose log has another set there disagrees; a joiner whose first record is
        // another set too.
        let err = v
            .merge(
                NodeId(1),
                &[(at(0), s123.clone()), (at(6), d12.clone())],
                at(8),
            )
            .unwrap_err();
        assert!(err.contains("differ at offset @6"), "{err}");
        let err = v
            .merge(
                NodeId(5),
                &[(at(0), VoterSet::default()), (at(6), d12)],
                at(8),
            )
            .unwrap_err();
        assert!(err.contains("differ"), "{err}");
        // Past the upgrade (a snapshot base at 7) a vote counts only from the disk the voter
        // names.
        let log = [(at(7), d123)];
        v.vote_granted(e(3), NodeId(1), replica_key_of(2, 1));
        let err = v.leader(k(1), e(3), &log, at(8), true).unwrap_err();
        assert!(err.contains("votes"), "{err}");
        v.vote_granted(e(4), NodeId(1), k(3));
        v.leader(k(1), e(4), &log, at(8), true).unwrap();
    }

    fn static_voters(ids: &[u32]) -> VoterSet {
        VoterSet::new(
            ids.iter()
                .map(|&id| Voter {
                    key: ReplicaKey {
                        id: NodeId(id),
                        directory_id: Uuid::ZERO,
                    },
                    endpoints: vec![endpoint(id)],
                })
                .collect(),
        )
        .unwrap()
    }

    fn voters(ids: &[u32]) -> VoterSet {
        VoterSet::new(
            ids.iter()
                .map(|&id| Voter {
                    key: replica_key(id),
                    endpoints: vec![endpoint(id)],
                })
                .collect(),
        )
        .unwrap()
    }

    /// Seeds that once failed, replayed as they were found.
    #[test]
    fn seeds_that_found_bugs() {
        // A follower with a deposed leader's epoch-2 batches installed the leader's snapshot and
        // then refused the leader's epoch-1 batch after it ("frame epoch 1 is below the log's
        // last epoch 2"): the snapshot install now drops such batches with the whole log.
        let r = passing_seed(SimSpec::new(1791));
        assert!(r.installs > 0, "{r:?}");
        // A static seed: a controller resigned by the refusal of a proposal of its epoch-1
        // activation, when the log ended at 8, led epoch 4 after a truncation to 6 and waited
        // for offset 8 for good, so nobody proposed and the cluster never settled: a
        // refusal's barrier now holds in its own epoch only.
        let r = passing_seed(SimSpec {
            spares: 0,
            ..SimSpec::static_with_voter_changes(100_590)
        });
        assert!(r.proposals_refused > 0 && r.truncations > 0, "{r:?}");
        // A static seed of one voter: a controller that joined held the leader's addition of
        // it, which the leader lost (unsynced) and re-elected itself without, in epoch 2,
        // while the joiner had reached epoch 3; the leader, whose voter set no longer named
        // it, refused its pre-votes for good and neither learnt the other's epoch. A replica
        // refused by a leader of an older epoch now probes it (a fetch at its own epoch).
        passing_seed(SimSpec {
            nodes: 1,
            ..SimSpec::static_with_voter_changes(204_966)
        });
    }

    /// Answers released at append instead of commit are caught at the first one.
    #[test]
    fn the_checks_catch_an_answer_released_before_its_commit() {
        let r = run_seed(SimSpec {
            mutation: Some(Mutation::AnswerAtAppend),
            ..SimSpec::new(7)
        });
        let v = r.violation.expect("the defect is caught");
        assert!(v.contains("before its batch"), "{v}");
    }

    /// A replica that skips a committed batch ends with another image than the others.
    #[test]
    fn the_checks_catch_a_replica_that_skips_a_batch() {
        let r = run_seed(SimSpec {
            mutation: Some(Mutation::SkipCommittedBatch),
            faults: Faults::none(),
            ..SimSpec::new(8)
        });
        let v = r
            .violation
            .clone()
            .unwrap_or_else(|| panic!("not caught: {r:?}"));
        assert!(v.contains("images") || v.contains("stopped"), "{v}");
    }

    /// The history checks, on histories written by hand.
    #[test]
    fn lost_and_doubly_answered_writes_are_violations() {
        let mut c = Checker::new(voters(&[1]));
        c.invoked(1, 0, 1, 0);
        c.invoked(2, 0, 2, 20);
        let nodes = BTreeMap::new();
        // Acknowledged with no node holding its batch: a violation too, but of another check.
        assert!(c.completed(1, Outcome::Failed, 10, &nodes).is_ok());
        assert!(c.answered_unknown(1).unwrap_err().contains("twice"));
        c.close();
        // Key 0 ends with op 1's value, which was refused.
        let e = c.check_values(|_| Some("1".into())).unwrap_err();
        assert!(e.contains("refused"), "{e}");
        // Op 2 is unknown: its value or none are both fine.
        c.check_values(|_| Some("2".into())).unwrap();
        c.check_values(|_| None).unwrap();
        // A value nobody wrote.
        let e = c.check_values(|_| Some("9".into())).unwrap_err();
        assert!(e.contains("never written"), "{e}");

        // Op 3 acknowledged at 40, op 4 acknowledged after it began at 50: the final value
        // cannot be op 3's.
        let mut c = Checker::new(voters(&[1]));
        c.invoked(3, 0, 3, 30);
        c.invoked(4, 0, 4, 50);
        c.writes.get_mut(&3).unwrap().outcome = Outcome::Acked;
        c.writes.get_mut(&3).unwrap().completed_ms = Some(40);
        c.writes.get_mut(&4).unwrap().outcome = Outcome::Acked;
        c.writes.get_mut(&4).unwrap().completed_ms = Some(60);
        let e = c.check_values(|_| Some("3".into())).unwrap_err();
        assert!(e.contains("lost"), "{e}");
        c.check_values(|_| Some("4".into())).unwrap();
        let e = c.check_values(|_| None).unwrap_err();
        assert!(e.contains("lost"), "{e}");
    }
}
