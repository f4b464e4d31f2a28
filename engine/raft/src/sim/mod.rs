//! A deterministic simulator of whole clusters of [`RaftCore`]s.
//!
//! One `u64` seed drives everything: the network ([`network`]: delay, drop, duplicate, reorder,
//! partitions), the clock (simulated milliseconds), the disks (fsync latency per node; a crash
//! loses a random part of what was written but not fsynced), the workload (proposals, voter
//! changes, snapshots) and the fault schedule (crashes, restarts, partitions). The driver code
//! here follows [`crate::Ready`]'s contract exactly, so it doubles as the reference driver.
//! [`checker`] verifies the cluster after every step; [`chaos`] runs seeded fault scenarios.
//!
//! [`Cluster`] is also the scripted harness of the data-driven scenario tests.

pub mod chaos;
pub mod checker;
pub mod network;

use std::collections::{BTreeMap, VecDeque};

use corum_types::{Epoch, LogOffset, NodeId, Uuid};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use self::checker::Checker;
use self::network::{NetFaults, Network};
use crate::config::Config;
use crate::core::{RaftCore, Restore, RestoredBatch, Role};
use crate::error::Result;
use crate::message::Message;
use crate::ready::{LogRead, Ready};
use crate::types::{
    Batch, Endpoint, Payload, QuorumStateRecord, ReplicaKey, Snapshot, Voter, VoterSet,
};

/// A simulated disk: what survives a crash is the quorum state, the snapshot and the log up to
/// `synced_end` (plus whatever part of the unsynced tail the crash happens to keep).
#[derive(Debug, Default)]
pub struct Disk {
    pub quorum_state: QuorumStateRecord,
    pub snapshot: Option<Snapshot>,
    pub log: Vec<Batch>,
    pub synced_end: LogOffset,
}

impl Disk {
    pub fn start(&self) -> LogOffset {
        self.snapshot
            .as_ref()
            .map_or(LogOffset::ZERO, |s| s.id.end_offset)
    }

    pub fn end(&self) -> LogOffset {
        self.log.last().map_or(self.start(), |b| b.end_offset())
    }

    fn epoch_before(&self, end: LogOffset) -> Option<Epoch> {
        if end == self.start() {
            return Some(self.snapshot.as_ref().map_or(Epoch::ZERO, |s| s.id.epoch));
        }
        self.log
            .iter()
            .find(|b| b.end_offset() == end)
            .map(|b| b.epoch)
    }

    fn index_of(&self, offset: LogOffset) -> Option<usize> {
        let i = self.log.partition_point(|b| b.base_offset < offset);
        (i < self.log.len() && self.log[i].base_offset == offset).then_some(i)
    }
}

/// A node of the simulated cluster: its disk survives crashes, its core does not.
#[derive(Debug)]
pub struct Node {
    pub key: ReplicaKey,
    pub endpoints: Vec<Endpoint>,
    pub core: Option<RaftCore>,
    pub disk: Disk,
    /// Fsyncs in flight: completion time and the log end they cover.
    fsyncs: VecDeque<(u64, LogOffset)>,
    reads: VecDeque<(u64, LogRead)>,
    pub fsync_delay_ms: (u64, u64),
    pub incarnation: u64,
    /// Drop payloads of data batches when restoring (exercises [`Ready::reads`]).
    pub restore_without_payloads: bool,
    /// Formatted to join (`--no-initial-controllers`): starts knowing no voter and finds the
    /// leader through bootstrap servers (the bootstrap voters' ids).
    pub bootstrap_only: bool,
}

/// Cluster-wide settings of a simulation.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub seed: u64,
    pub voters: usize,
    pub observers: usize,
    pub raft: Config,
    pub net: NetFaults,
    /// Fsync latency range of every node.
    pub fsync_delay_ms: (u64, u64),
    /// Step granularity: every node is ticked this often.
    pub tick_ms: u64,
    /// KIP-853's `kraft.version` of the quorum (1, dynamic, unless a test sets 0).
    pub kraft_version: u16,
    /// Observers start as controllers formatted to join ([`Node::bootstrap_only`]).
    pub observers_bootstrap_only: bool,
}

/// The simulated wall clock at time 0 (2023-11-14, in ms since the Unix epoch): batches carry
/// it plus the simulated time.
pub const SIM_WALL_CLOCK_BASE_MS: i64 = 1_700_000_000_000;

impl ClusterSpec {
    /// Timeouts scaled for fast simulation (the protocol only cares about ratios).
    pub fn sim_config() -> Config {
        Config {
            election_timeout_ms: 150,
            fetch_timeout_ms: 300,
            election_backoff_max_ms: 100,
            heartbeat_interval_ms: 50,
            hwm_linger_ms: 0,
            request_timeout_ms: 200,
            append_inflight_count_max: 4,
            append_inflight_bytes_max: 4096,
            batch_bytes_max: 512,
            fetch_wait_max_ms: 100,
            observer_fetch_interval_ms: 0,
            snapshot_chunk_bytes_max: 64,
            snapshot_bytes_max: 1 << 20,
            retry_backoff_ms: 10,
            payload_cache_bytes_max: 1 << 20,
            auto_join: false,
        }
    }

    pub fn new(seed: u64, voters: usize, observers: usize) -> Self {
        Self {
            seed,
            voters,
            observers,
            raft: Self::sim_config(),
            net: NetFaults::reliable(1),
            fsync_delay_ms: (1, 1),
            tick_ms: 5,
            kraft_version: 1,
            observers_bootstrap_only: false,
        }
    }
}

/// Node ids are 1..=n; directory ids are derived from the id so runs are reproducible.
pub fn replica_key(id: u32) -> ReplicaKey {
    let mut d = [0u8; 16];
    d[0] = 0xd1;
    d[12..].copy_from_slice(&id.to_be_bytes());
    ReplicaKey {
        id: NodeId(id),
        directory_id: Uuid(d),
    }
}

pub fn endpoints(id: u32, generation: u16) -> Vec<Endpoint> {
    vec![Endpoint {
        listener: "CONTROLLER".into(),
        host: format!("n{id}"),
        port: 9000 + generation,
    }]
}

#[derive(Debug)]
pub struct Cluster {
    pub spec: ClusterSpec,
    pub now_ms: u64,
    next_tick_ms: u64,
    pub rng: ChaCha8Rng,
    pub nodes: BTreeMap<NodeId, Node>,
    pub net: Network,
    pub checker: Checker,
    pub bootstrap: VoterSet,
    /// Messages delivered so far (for summaries).
    pub delivered: u64,
    /// Log reads served for evicted payloads ([`Ready::reads`]).
    pub reads_served: u64,
    /// Snapshots downloaded from a leader and installed ([`Ready::snapshot`]).
    pub snapshots_installed: u64,
    /// When set, every delivered message is appended here (scenario traces).
    pub trace: Option<Vec<String>>,
}

impl Cluster {
    pub fn new(spec: ClusterSpec) -> Result<Self> {
        let rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let n = spec.voters + spec.observers;
        // A static quorum's configuration names no directory ids (`controller.quorum.voters`);
        // its replicas have them all the same.
        let bootstrap = VoterSet::new(
            (1..=spec.voters as u32)
                .map(|i| Voter {
                    key: if spec.kraft_version == 0 {
                        ReplicaKey {
                            id: NodeId(i),
                            directory_id: Uuid::ZERO,
                        }
                    } else {
                        replica_key(i)
                    },
                    endpoints: endpoints(i, 0),
                })
                .collect(),
        )?;
        let mut nodes = BTreeMap::new();
        for i in 1..=n as u32 {
            let key = replica_key(i);
            let node = Node {
                key,
                endpoints: endpoints(i, 0),
                core: None,
                disk: Disk::default(),
                fsyncs: VecDeque::new(),
                reads: VecDeque::new(),
                fsync_delay_ms: spec.fsync_delay_ms,
                incarnation: 0,
                restore_without_payloads: false,
                bootstrap_only: i as usize > spec.voters && spec.observers_bootstrap_only,
            };
            nodes.insert(key.id, node);
        }
        let net = Network::new(spec.net);
        let checker = Checker::new();
        let mut c = Self {
            spec,
            now_ms: 0,
            next_tick_ms: 0,
            rng,
            nodes,
            net,
            checker,
            bootstrap,
            delivered: 0,
            reads_served: 0,
            snapshots_installed: 0,
            trace: None,
        };
        let ids: Vec<NodeId> = c.nodes.keys().copied().collect();
        for id in ids {
            c.start(id)?;
        }
        Ok(c)
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    pub fn core(&self, id: NodeId) -> Option<&RaftCore> {
        self.nodes.get(&id).and_then(|n| n.core.as_ref())
    }

    pub fn core_mut(&mut self, id: NodeId) -> Option<&mut RaftCore> {
        self.nodes.get_mut(&id).and_then(|n| n.core.as_mut())
    }

    /// The live leader with the highest epoch.
    pub fn leader(&self) -> Option<NodeId> {
        self.nodes
            .values()
            .filter_map(|n| n.core.as_ref())
            .filter(|c| c.role() == Role::Leader)
            .max_by_key(|c| c.epoch())
            .map(|c| c.id())
    }

    /// (Re)starts a node from its disk.
    pub fn start(&mut self, id: NodeId) -> Result<()> {
        let seed = self.rng.gen::<u64>();
        let now = self.now_ms;
        let node = self.nodes.get_mut(&id).expect("known node");
        assert!(node.core.is_none(), "node {id} already running");
        node.incarnation += 1;
        if let Some(t) = &mut self.trace {
            t.push(format!(
                "{now:>6}ms start {id} log=[{},{}) synced={}",
                node.disk.start().0,
                node.disk.end().0,
                node.disk.synced_end.0
            ));
        }
        let log = node
            .disk
            .log
            .iter()
            .map(|b| {
                let mut r = RestoredBatch::from(b);
                if node.restore_without_payloads && !b.control {
                    r.payload = None;
                }
                r
            })
            .collect();
        node.disk.synced_end = node.disk.end();
        let restore = Restore {
            quorum_state: node.disk.quorum_state,
            snapshot: node.disk.snapshot.clone(),
            log,
            bootstrap_voters: if node.bootstrap_only {
                VoterSet::default()
            } else {
                self.bootstrap.clone()
            },
            // `--no-initial-controllers` writes kraft.version 1 whatever the quorum runs.
            kraft_version: if node.bootstrap_only {
                1
            } else {
                self.spec.kraft_version
            },
        };
        let mut core = RaftCore::new(
            self.spec.raft.clone(),
            node.key,
            node.endpoints.clone(),
            restore,
            seed,
            now,
        )?;
        if node.bootstrap_only {
            core.set_bootstrap_servers(self.bootstrap.ids().collect());
        }
        node.core = Some(core);
        self.checker.on_start(id, node.incarnation);
        self.drain(id);
        Ok(())
    }

    /// Crashes a node: its core is lost and its disk keeps the synced log plus a random part
    /// of the unsynced tail.
    pub fn crash(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).expect("known node");
        if node.core.take().is_none() {
            return;
        }
        node.fsyncs.clear();
        node.reads.clear();
        let synced = node
            .disk
            .log
            .partition_point(|b| b.end_offset() <= node.disk.synced_end);
        let keep = synced + self.rng.gen_range(0..=node.disk.log.len() - synced);
        node.disk.log.truncate(keep);
        if let Some(t) = &mut self.trace {
            t.push(format!(
                "{:>6}ms crash {id} synced={} kept end={}",
                self.now_ms,
                node.disk.synced_end.0,
                node.disk.end().0
            ));
        }
    }

    /// Replaces a node's disk: it loses power, comes back with an empty log under a new
    /// directory id, formatted to join ([`Node::bootstrap_only`]).
    pub fn replace_disk(&mut self, id: NodeId) -> Result<()> {
        self.crash(id);
        let node = self.nodes.get_mut(&id).expect("known node");
        node.disk = Disk::default();
        node.key.directory_id.0[1] = node.key.directory_id.0[1].wrapping_add(1);
        node.bootstrap_only = true;
        if let Some(t) = &mut self.trace {
            t.push(format!("{:>6}ms replace the disk of {id}", self.now_ms));
        }
        self.start(id)
    }

    pub fn is_up(&self, id: NodeId) -> bool {
        self.core(id).is_some()
    }

    /// Runs one input against a node's core and then drains its Ready. The core's wall clock
    /// is the simulated time after [`SIM_WALL_CLOCK_BASE_MS`].
    pub fn with_core<R>(&mut self, id: NodeId, f: impl FnOnce(&mut RaftCore) -> R) -> Option<R> {
        let wall = SIM_WALL_CLOCK_BASE_MS + self.now_ms as i64;
        let core = self.core_mut(id)?;
        core.set_wall_clock_ms(wall);
        let r = f(core);
        self.drain(id);
        Some(r)
    }

    /// Proposes a payload at `id`.
    pub fn propose(&mut self, id: NodeId, payload: &[u8]) -> Option<Result<crate::ProposalId>> {
        let r = self.with_core(id, |c| c.propose(Payload::from(payload), 1))?;
        if let Ok(p) = &r {
            self.checker.on_proposed(p.epoch, p.base_offset, payload);
        }
        Some(r)
    }

    /// Applies every Ready of node `id`, following the driver contract.
    pub fn drain(&mut self, id: NodeId) {
        while let Some(ready) = self
            .nodes
            .get_mut(&id)
            .and_then(|n| n.core.as_mut())
            .and_then(|c| c.ready())
        {
            self.apply_ready(id, ready);
        }
        self.checker.check_node(id, &self.nodes[&id]);
    }

    fn apply_ready(&mut self, id: NodeId, r: Ready) {
        let now = self.now_ms;
        let node = self.nodes.get_mut(&id).expect("known node");
        // 1. Quorum state, durable before any message.
        if let Some(qs) = r.quorum_state {
            node.disk.quorum_state = qs;
        }
        // 2. Snapshot replaces the log, durable at once.
        if let Some(s) = r.snapshot {
            self.snapshots_installed += 1;
            self.checker.on_snapshot_installed(id, &s);
            node.disk.log.clear();
            node.disk.synced_end = s.id.end_offset;
            node.disk.snapshot = Some(s);
            node.fsyncs.clear();
        }
        // 3. Truncation (durable in order with later appends: applied to the synced view too).
        if let Some(t) = r.truncate_to {
            node.disk.log.retain(|b| b.end_offset() <= t);
            node.disk.synced_end = node.disk.synced_end.min(t);
            for f in node.fsyncs.iter_mut() {
                f.1 = f.1.min(t);
            }
        }
        // 4. Entries: written now, durable when the fsync completes.
        if !r.entries.is_empty() {
            for b in r.entries {
                assert_eq!(
                    b.base_offset,
                    node.disk.end(),
                    "node {id}: entries continue the log"
                );
                node.disk.log.push(b);
            }
            let (lo, hi) = node.fsync_delay_ms;
            let delay = self.rng.gen_range(lo..=hi);
            // Fsyncs complete in order.
            let at = node
                .fsyncs
                .back()
                .map_or(now + delay, |f| f.0.max(now + delay));
            node.fsyncs.push_back((at, node.disk.end()));
        }
        // 5. Messages.
        for (to, msg) in r.messages {
            self.net.send(&mut self.rng, now, id, to, msg);
        }
        // 6. HWM: checked by the checker after the drain.
        // 7. Log start: delete the prefix covered by the snapshot.
        if let Some(start) = r.log_start_offset {
            let node = self.nodes.get_mut(&id).expect("known node");
            let snapshot = node
                .core
                .as_ref()
                .and_then(|c| c.latest_snapshot().cloned());
            if let Some(s) = snapshot {
                if s.id.end_offset == start {
                    node.disk.log.retain(|b| b.base_offset >= start);
                    node.disk.snapshot = Some(s);
                }
            }
        }
        // 8. Reads, served a little later.
        let node = self.nodes.get_mut(&id).expect("known node");
        for read in r.reads {
            node.reads.push_back((now + 1, read));
        }
    }

    fn next_event_ms(&self) -> u64 {
        let mut t = self.next_tick_ms;
        if let Some(n) = self.net.next_at() {
            t = t.min(n);
        }
        for node in self.nodes.values() {
            if let Some(f) = node.fsyncs.front() {
                t = t.min(f.0);
            }
            if let Some(r) = node.reads.front() {
                t = t.min(r.0);
            }
        }
        t.max(self.now_ms)
    }

    /// Advances to the next event time and processes everything due then.
    pub fn step(&mut self) {
        self.now_ms = self.next_event_ms();
        let now = self.now_ms;
        while let Some(env) = self.net.pop_due(now) {
            if !self.is_up(env.to) {
                continue;
            }
            self.delivered += 1;
            if let Some(t) = &mut self.trace {
                t.push(format!(
                    "{now:>6}ms {} -> {}: {}",
                    env.from,
                    env.to,
                    describe(&env.msg)
                ));
            }
            let (from, mut msg) = (env.from, env.msg);
            if self.delivered % 8 == 0 {
                // Ship every eighth message through its wire form, as the network layer will.
                msg = Message::decode(&msg.encode())
                    .expect("a message decodes from its own encoding");
            }
            self.with_core(env.to, |c| {
                c.tick(now);
                c.step(from, msg)
            });
        }
        let ids = self.ids();
        for &id in &ids {
            loop {
                let node = self.nodes.get_mut(&id).expect("known node");
                let Some(&(at, end)) = node.fsyncs.front() else {
                    break;
                };
                if at > now {
                    break;
                }
                node.fsyncs.pop_front();
                if end > node.disk.synced_end && end <= node.disk.end() {
                    node.disk.synced_end = end;
                    if let Some(epoch) = node.disk.epoch_before(end) {
                        self.with_core(id, |c| c.persisted(end, epoch));
                    }
                }
            }
            loop {
                let node = self.nodes.get_mut(&id).expect("known node");
                let Some(&(at, _)) = node.reads.front() else {
                    break;
                };
                if at > now {
                    break;
                }
                let (_, read) = node.reads.pop_front().expect("checked");
                self.reads_served += 1;
                let batches = match node.disk.index_of(read.from) {
                    None => Vec::new(),
                    Some(i) => {
                        let mut out: Vec<Batch> = Vec::new();
                        let mut bytes = 0;
                        for b in &node.disk.log[i..] {
                            if !out.is_empty() && bytes + b.payload.len() > read.bytes_max {
                                break;
                            }
                            bytes += b.payload.len();
                            out.push(b.clone());
                        }
                        out
                    }
                };
                self.with_core(id, |c| c.read_completed(read.id, batches));
            }
        }
        if now >= self.next_tick_ms {
            self.next_tick_ms = now + self.spec.tick_ms;
            for &id in &ids {
                self.with_core(id, |c| c.tick(now));
            }
        }
        self.checker.check_cluster(&self.nodes, now);
    }

    /// Runs until `now_ms + ms`.
    pub fn run_for(&mut self, ms: u64) {
        let end = self.now_ms + ms;
        while self.now_ms < end {
            if self.next_event_ms() > end {
                self.now_ms = end;
                break;
            }
            self.step();
        }
    }

    /// Runs until `pred` holds or `ms` elapsed; returns whether it held.
    pub fn run_until(&mut self, ms: u64, mut pred: impl FnMut(&Cluster) -> bool) -> bool {
        let end = self.now_ms + ms;
        while self.now_ms < end {
            if pred(self) {
                return true;
            }
            self.step();
        }
        pred(self)
    }

    /// Makes `id` take a snapshot at its HWM (the state machine's bytes are the checker's digest
    /// of the committed prefix).
    pub fn snapshot(&mut self, id: NodeId) -> Option<Result<crate::SnapshotId>> {
        let hwm = self.core(id)?.high_watermark();
        let data = self.checker.digest_at(hwm)?;
        self.with_core(id, |c| c.snapshot_created(hwm, data))
    }
}

/// One-line description of a message for traces.
pub fn describe(m: &Message) -> String {
    use crate::message::{AppendResult, FetchResult, FetchSnapshotResult};
    match m {
        Message::Vote(v) => format!(
            "{} e{} last=e{}@{}",
            if v.pre_vote { "PreVote" } else { "Vote" },
            v.epoch.0,
            v.last_epoch.0,
            v.end_offset.0
        ),
        Message::VoteResponse(v) => format!(
            "{}Response e{} granted={}",
            if v.pre_vote { "PreVote" } else { "Vote" },
            v.epoch.0,
            v.granted
        ),
        Message::BeginQuorumEpoch(b) => format!("BeginQuorumEpoch e{}", b.epoch.0),
        Message::EndQuorumEpoch(e) => format!(
            "EndQuorumEpoch e{} successors={:?}",
            e.epoch.0,
            e.preferred_successors
                .iter()
                .map(|n| n.0)
                .collect::<Vec<_>>()
        ),
        Message::Append(a) => format!(
            "Append e{} prev=e{}@{} batches={} hwm={}{}",
            a.epoch.0,
            a.prev_epoch.0,
            a.prev_end.0,
            a.batches
                .iter()
                .map(|b| format!("[{}..{})e{}", b.base_offset.0, b.end_offset().0, b.epoch.0))
                .collect::<Vec<_>>()
                .join(""),
            a.high_watermark.0,
            a.snapshot.map_or(String::new(), |s| format!(
                " snapshot=e{}@{}",
                s.epoch.0, s.end_offset.0
            ))
        ),
        Message::AppendResponse(r) => match &r.result {
            AppendResult::Ok {
                received_end,
                durable_end,
            } => {
                format!(
                    "AppendResponse e{} ok received={} durable={}",
                    r.epoch.0, received_end.0, durable_end.0
                )
            }
            AppendResult::Mismatch {
                end_offset,
                last_epoch,
                last_epoch_start,
            } => format!(
                "AppendResponse e{} mismatch end={} last=e{} from {}",
                r.epoch.0, end_offset.0, last_epoch.0, last_epoch_start.0
            ),
            AppendResult::StaleEpoch => format!("AppendResponse e{} stale", r.epoch.0),
        },
        Message::Fetch(f) => format!(
            "Fetch e{} at e{}@{} hwm={}",
            f.epoch.0, f.last_fetched_epoch.0, f.fetch_offset.0, f.high_watermark.0
        ),
        Message::FetchResponse(f) => match &f.result {
            FetchResult::Batches {
                batches,
                high_watermark,
                ..
            } => {
                format!(
                    "FetchResponse e{} batches={} hwm={}",
                    f.epoch.0,
                    batches.len(),
                    high_watermark.0
                )
            }
            FetchResult::Diverging {
                epoch, end_offset, ..
            } => {
                format!(
                    "FetchResponse e{} diverging e{}@{}",
                    f.epoch.0, epoch.0, end_offset.0
                )
            }
            FetchResult::SnapshotNeeded { snapshot } => {
                format!(
                    "FetchResponse e{} snapshot-needed e{}@{}",
                    f.epoch.0, snapshot.epoch.0, snapshot.end_offset.0
                )
            }
            FetchResult::NotLeader => format!(
                "FetchResponse e{} not-leader leader={:?}",
                f.epoch.0,
                f.leader.map(|l| l.0)
            ),
        },
        Message::FetchSnapshot(f) => format!(
            "FetchSnapshot @{} pos={}",
            f.snapshot.end_offset.0, f.position
        ),
        Message::FetchSnapshotResponse(f) => match &f.result {
            FetchSnapshotResult::Chunk {
                position,
                bytes,
                size_total,
                ..
            } => {
                format!(
                    "FetchSnapshotResponse pos={} len={} total={}",
                    position,
                    bytes.len(),
                    size_total
                )
            }
            other => format!("FetchSnapshotResponse {other:?}"),
        },
        Message::AddVoter(a) => format!("AddVoter {}", a.voter.key.id),
        Message::RemoveVoter(r) => format!("RemoveVoter {}", r.voter.id),
        Message::UpdateVoter(u) => format!("UpdateVoter {}", u.voter.key.id),
        Message::VoterChangeResponse(v) => format!("VoterChangeResponse {:?}", v.result),
        Message::UpgradeKraftVersion(u) => format!("UpgradeKraftVersion {}", u.version),
    }
}
