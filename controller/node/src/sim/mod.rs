//! The whole-node deterministic simulator: several nodes, each the node's own policy code —
//! the Raft core and the driver's policy ([`DriverCore`](crate::driver::DriverCore)) over the
//! log engine and the node files on a [`SimDisk`](corum_engine::disk::SimDisk), the call table
//! ([`crate::calls`]) and the controller service ([`ServiceCore`](crate::service::core::ServiceCore))
//! with the controller — run from one seed under crashes (power loss, torn writes), restarts,
//! disk errors, and message loss, duplication, delay, reordering and partitions, while
//! clients write configs. Only the sockets, timers and tasks of the real node are replaced
//! (by [`node::SimNode`]'s queues and simulated milliseconds).
//!
//! A seed runs in phases: faults for `fault_ms`; then the heal (every node up, the network
//! reliable, no more faults) while clients go on for a second; then the cluster must settle
//! (one leader, every node replayed to its high watermark, nothing waiting); then every node
//! loses power at once and restarts from its disk, and must settle again. [`checker`] says
//! what is checked. A failure names the seed and the command that replays it.
//!
//! `corum sim` runs seeds from the command line; `cargo test` runs 500 of them.

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
use corum_raft::sim::network::{NetFaults, Network};
use corum_raft::{Endpoint, ReplicaKey, Role, Voter, VoterSet};
use corum_types::{NodeId, Uuid};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use self::checker::{Checker, Outcome};
use self::node::{NodeOutput, NodeTiming, Route, SimNode};
use crate::config::components::{self, RaftReplica};
use crate::config::NodeConfig;
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
}

/// One seed's run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimSpec {
    pub seed: u64,
    /// Voters: 1 to 5.
    pub nodes: usize,
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
            fault_ms: 3_000,
            faults: Faults::all(),
            mutation: None,
        }
    }

    /// The command that runs this seed again.
    pub fn replay_command(&self) -> String {
        let f = &self.faults;
        let mut cmd = format!(
            "corum sim --nodes {} --start {} --seeds 1 --fault-ms {} --drop-pct {} \
             --duplicate-pct {} --delay-ms-max {} --port-delay-ms-max {}",
            self.nodes,
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
        ] {
            if !on {
                cmd.push(' ');
                cmd.push_str(flag);
            }
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

struct Sim {
    spec: SimSpec,
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
        let ids: Vec<u32> = (1..=spec.nodes as u32).collect();
        let voters = VoterSet::new(
            ids.iter()
                .map(|&id| Voter {
                    key: replica_key(id),
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
            let (driver, service) = node_configs(id, &voters, spec.seed)?;
            let disk_seed = rng.gen();
            nodes.insert(
                NodeId(id),
                SimNode::new(
                    NodeId(id),
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
            rng,
            now_ms: 0,
            base: Instant::now(),
            nodes,
            net,
            clients,
            checker: Checker::default(),
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
        Ok(sim)
    }

    fn run(&mut self) -> Result<(), String> {
        // Faults.
        self.run_until(self.spec.fault_ms, |_| false)?;
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
        Ok(())
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
        if self.clients.iter().any(|c| c.waiting.is_some()) {
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
        let hwm = raft.high_watermark();
        self.nodes.values().all(|n| {
            let run = n.run.as_ref().expect("checked up");
            run.service.controller().committed_end() == hwm && run.driver.log().durable_end() == hwm
        })
    }

    fn status_line(&self) -> String {
        let mut parts = Vec::new();
        for n in self.nodes.values() {
            match n.run.as_ref() {
                None => parts.push(format!("{} down", n.id)),
                Some(run) => {
                    let raft = run.driver.raft();
                    parts.push(format!(
                        "{} {:?} epoch {} leader {:?} end {} hwm {} replayed {} calls {} active {}",
                        n.id,
                        raft.role(),
                        raft.epoch(),
                        raft.status().leader,
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
            for (batch, calls) in &out.appended {
                self.checker.appended(id, *batch, calls);
            }
            for (to, msg) in out.messages {
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
        match self.rng.gen_range(0..5) {
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

pub(crate) fn replica_key(id: u32) -> ReplicaKey {
    ReplicaKey {
        id: NodeId(id),
        directory_id: Uuid([id as u8; 16]),
    }
}

pub(crate) fn endpoint(id: u32) -> Endpoint {
    Endpoint {
        listener: "CONTROLLER".into(),
        host: format!("sim-{id}"),
        port: 9093,
    }
}

/// The node's own configuration path for simulated node `id`: the node config's defaults
/// through [`components`], with timeouts, segments and snapshots scaled down so that a few
/// simulated seconds see elections, compaction and snapshot installs.
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
    let mut node = NodeConfig::for_tests();
    node.node_id = NodeId(id);
    node.metadata_log_dir = PathBuf::from(format!("/sim/node-{id}"));
    node.controller_seed = seed;
    let replica = RaftReplica {
        me: replica_key(id),
        endpoints: vec![endpoint(id)],
        bootstrap_voters: voters.clone(),
        kraft_version: 1,
    };
    let mut driver = components::raft_driver(&node, replica).map_err(|e| e.to_string())?;
    driver.raft = corum_raft::Config {
        election_timeout_ms: 150,
        fetch_timeout_ms: 300,
        election_backoff_max_ms: 100,
        heartbeat_interval_ms: 50,
        request_timeout_ms: 200,
        fetch_wait_max_ms: 100,
        snapshot_chunk_bytes_max: 512,
        ..driver.raft
    };
    driver.log = LogConfig {
        segment_bytes: 16 << 10,
        ..LogConfig::default()
    };
    driver.log_retention_bytes = Some(0);
    driver.request_timeout_default_ms = u64::from(REQUEST_TIMEOUT_MS);
    let mut service = components::controller_service(&node, voters);
    service.snapshot_bytes_between = 2 << 10;
    service.controller_tick_interval_ms = 50;
    Ok((driver, service))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fault-free seed settles, acknowledges writes and checks them.
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
            if let Some(f) = summary.failed.first() {
                panic!(
                    "{nodes} nodes: seed {}: {}\nreplay: {}",
                    f.spec.seed,
                    f.violation.as_deref().unwrap_or(""),
                    f.spec.replay_command()
                );
            }
            assert!(summary.acked > 100 * 20, "{nodes} nodes: {summary:?}");
        }
    }

    /// Seeds that once failed, replayed as they were found.
    #[test]
    fn seeds_that_found_bugs() {
        // A follower with a deposed leader's epoch-2 batches installed the leader's snapshot and
        // then refused the leader's epoch-1 batch after it ("frame epoch 1 is below the log's
        // last epoch 2"): the snapshot install now drops such batches with the whole log.
        let r = run_seed(SimSpec::new(1791));
        assert!(
            r.ok(),
            "{:?}\nreplay: {}",
            r.violation,
            r.spec.replay_command()
        );
        assert!(r.installs > 0, "{r:?}");
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
        let mut c = Checker::default();
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
        let mut c = Checker::default();
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
