//! One simulated node: the node's own policy code — [`DriverCore`] (the Raft core and the log
//! engine on a [`SimDisk`], the node files on the same disk), the call table
//! ([`PendingCalls`]) and the controller service's [`ServiceCore`] — wired as the async node
//! wires them, with the port's two directions as FIFO queues that deliver after a drawn delay,
//! group commit and snapshot writes that finish after a drawn disk latency, and the loop's
//! timers as simulated milliseconds.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use corum_controller::{Controller, ControllerConfig};
use corum_engine::disk::{SimDisk, SimFault};
use corum_raft::{Message, ProposalId, ReplicaKey, Role, Snapshot};
use corum_types::{Epoch, LogOffset, NodeId};
use futures_lite::future::block_on;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::calls::{CallId, Outgoing, PendingCalls};
use crate::driver::core::store_snapshot;
use crate::driver::{DriverCore, Publisher, RaftDriverConfig};
use crate::histogram::LatencyHistogram;
use crate::port::{Call, Proposal, ToDriver, ToService};
use crate::protocol::RequestFrame;
use crate::service::core::ServiceCore;
use crate::service::ControllerServiceConfig;
use crate::sim::Mutation;

/// Where a call's answer goes: the simulated client and its operation.
pub type Route = (u32, u64);

/// What a node did in one [`SimNode::pump`], for the simulator and its checker.
#[derive(Default)]
pub struct NodeOutput {
    pub messages: Vec<(NodeId, Message)>,
    pub answers: Vec<Outgoing<Route>>,
    /// Proposals the driver appended: the batch and the calls whose answers it holds.
    pub appended: Vec<(ProposalId, Vec<CallId>)>,
    /// Proposals the driver refused.
    pub refused: u64,
    /// Snapshots installed from the leader, and suffixes truncated.
    pub installs: u64,
    pub truncations: u64,
}

/// How the node's disk and port behave (drawn per event from the simulation's generator).
#[derive(Clone, Copy, Debug)]
pub struct NodeTiming {
    pub fsync_ms_max: u64,
    pub port_delay_ms_max: u64,
}

/// A node of the simulated cluster, up or down.
pub struct SimNode {
    pub id: NodeId,
    /// Who this node's disk is to Raft: its id and the directory id its disk was formatted
    /// with (a wipe formats a new one). What the checks count a replica as, whatever its
    /// messages claim.
    pub key: ReplicaKey,
    pub disk: SimDisk,
    config: RaftDriverConfig,
    service_config: ControllerServiceConfig,
    controller_config: ControllerConfig,
    timing: NodeTiming,
    pub run: Option<Running>,
    /// Batches this node's disk durably holds (base → epoch), for the checker: added after
    /// each group-commit round, cut by truncations; what a crash cannot take away.
    pub durable: BTreeMap<LogOffset, Epoch>,
    /// The replicas this node was before wipes, each with what its disk durably held when
    /// wiped: acknowledgements it sent then may still be counted (their copies are gone).
    pub former: Vec<(ReplicaKey, BTreeMap<LogOffset, Epoch>)>,
    /// Faults injected into this node's disk that no fatal error has answered yet: a node may
    /// stop on an error only if one is owed.
    pub faults_owed: u64,
    mutation: Option<Mutation>,
    /// [`Mutation::SkipCommittedBatch`] did its skip.
    skipped: bool,
}

/// A node's running process.
pub struct Running {
    pub driver: DriverCore<SimDisk>,
    pub calls: PendingCalls<Route>,
    pub service: ServiceCore,
    publisher: Publisher,
    /// The high watermark the publisher has been told.
    hwm: LogOffset,
    to_service: VecDeque<(u64, ToService)>,
    to_driver: VecDeque<(u64, ToDriver)>,
    /// Proposals delivered to the driver, waiting for it to admit them.
    proposals: VecDeque<Proposal>,
    /// A group-commit round in progress ends at this time; another is due after it.
    sync_at: Option<u64>,
    sync_again: bool,
    sync_rounds: u64,
    /// The durable end the checker's view was last brought up to.
    durable_seen: LogOffset,
    snapshot_write: Option<(u64, Snapshot)>,
    next_tick: u64,
    next_service_tick: u64,
    /// Leadership as last told to the service, and when it is told again regardless.
    told: Option<(Role, Epoch, Option<NodeId>)>,
    next_status: u64,
    /// Nothing crosses the port before this time (a stalled controller shard).
    stalled_until: u64,
}

/// How often the driver's status goes to the service besides on a change (as the node's
/// status forwarder does).
const STATUS_REFRESH_MS: u64 = 500;

impl SimNode {
    pub fn new(
        key: ReplicaKey,
        seed: u64,
        config: RaftDriverConfig,
        service_config: ControllerServiceConfig,
        timing: NodeTiming,
        mutation: Option<Mutation>,
    ) -> SimNode {
        SimNode {
            id: key.id,
            key,
            disk: SimDisk::new(seed),
            config,
            service_config,
            controller_config: ControllerConfig::default(),
            timing,
            run: None,
            durable: BTreeMap::new(),
            former: Vec::new(),
            faults_owed: 0,
            mutation,
            skipped: false,
        }
    }

    pub fn is_up(&self) -> bool {
        self.run.is_some()
    }

    /// The configuration its process starts with (its disk's format's).
    pub fn config(&self) -> &RaftDriverConfig {
        &self.config
    }

    /// Starts the node's process on its disk: recovery, a fresh controller that replays
    /// everything from the snapshot on.
    pub fn start(&mut self, now_ms: u64) -> Result<(), String> {
        assert!(self.run.is_none(), "{} is already up", self.id);
        let (driver, _) = block_on(DriverCore::recover(
            self.disk.clone(),
            self.config.clone(),
            now_ms,
        ))
        .map_err(|e| format!("{} failed to recover: {e}", self.id))?;
        let controller = Controller::new(self.controller_config.clone(), self.id)
            .map_err(|e| format!("controller config: {e}"))?;
        let service = ServiceCore::new(self.service_config.clone(), controller);
        let publisher = driver.publisher();
        // What recovery found is durable: the checker's view restarts from it.
        let start = driver.log().start_offset();
        self.durable.split_off(&start);
        let durable_seen = start;
        self.run = Some(Running {
            hwm: driver.raft().high_watermark(),
            driver,
            calls: PendingCalls::default(),
            service,
            publisher,
            to_service: VecDeque::new(),
            to_driver: VecDeque::new(),
            proposals: VecDeque::new(),
            sync_at: None,
            sync_again: false,
            sync_rounds: 0,
            durable_seen,
            snapshot_write: None,
            next_tick: now_ms,
            next_service_tick: now_ms,
            told: None,
            next_status: now_ms,
            stalled_until: 0,
        });
        self.note_durable()?;
        Ok(())
    }

    /// Power loss: the process is gone and the disk keeps what it synced (`torn`: plus a
    /// prefix of what it did not, the last write torn).
    pub fn crash(&mut self, torn: bool) {
        self.run = None;
        if torn {
            self.disk.crash_torn();
        } else {
            self.disk.crash();
        }
    }

    /// The node loses power and its disk is replaced by an empty one formatted as `key` (a new
    /// directory id), with `config` for its process: it starts over as a replica Raft has not
    /// seen, which recovers nothing and fetches everything.
    pub fn wipe(
        &mut self,
        key: ReplicaKey,
        seed: u64,
        config: RaftDriverConfig,
        service_config: ControllerServiceConfig,
    ) {
        assert_eq!(key.id, self.id, "a wipe keeps the node id");
        self.run = None;
        let durable = std::mem::take(&mut self.durable);
        self.former
            .push((std::mem::replace(&mut self.key, key), durable));
        self.disk = SimDisk::new(seed);
        self.config = config;
        self.service_config = service_config;
        // The faults injected into the old disk went with it.
        self.faults_owed = 0;
    }

    /// The next write or fsync of this node's disk fails.
    pub fn inject(&mut self, fault: SimFault) {
        self.faults_owed += 1;
        self.disk.inject(fault);
    }

    /// The port stalls until `until` (a controller shard that stops running for a while):
    /// what is queued on it and what is sent meanwhile is delivered then, in order.
    pub fn stall(&mut self, until: u64) {
        if let Some(run) = self.run.as_mut() {
            run.stalled_until = run.stalled_until.max(until);
            for (t, _) in run.to_service.iter_mut() {
                *t = (*t).max(until);
            }
            for (t, _) in run.to_driver.iter_mut() {
                *t = (*t).max(until);
            }
        }
    }

    /// A client's request arrives: registered in the call table (`None`: the node is down;
    /// `Err`: the answer at once).
    pub fn call(
        &mut self,
        route: Route,
        frame: RequestFrame,
        now: Instant,
        now_ms: u64,
    ) -> Result<Option<CallId>, Outgoing<Route>> {
        let Some(run) = self.run.as_mut() else {
            return Ok(None);
        };
        let timeout_ms = crate::dispatch::effective_timeout_ms(
            frame.timeout_ms,
            self.config.request_timeout_default_ms,
            self.config.request_timeout_max_ms,
        );
        let timeout_ms = u32::try_from(timeout_ms).unwrap_or(u32::MAX);
        match run
            .calls
            .register(route, frame.correlation_id, timeout_ms, now)
        {
            Ok(id) => {
                // Calls queued together reach the service together, as the forwarder sends them.
                if let Some((_, ToService::Calls(calls))) = run.to_service.back_mut() {
                    calls.push(Call { id, frame });
                } else {
                    let at = now_ms.max(run.stalled_until);
                    run.to_service
                        .push_back((at, ToService::Calls(vec![Call { id, frame }])));
                }
                Ok(Some(id))
            }
            Err(answer) => Err(answer),
        }
    }

    /// A Raft message from a peer.
    pub fn step(&mut self, from: NodeId, message: Message) {
        if let Some(run) = self.run.as_mut() {
            run.driver.step(from, message);
        }
    }

    /// When this node next has something to do on its own.
    pub fn next_wakeup(&self) -> Option<u64> {
        let run = self.run.as_ref()?;
        [
            Some(run.next_tick),
            Some(run.next_service_tick),
            Some(run.next_status),
            run.sync_at,
            run.snapshot_write.as_ref().map(|(t, _)| *t),
            run.to_service.front().map(|(t, _)| *t),
            run.to_driver.front().map(|(t, _)| *t),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs everything due at `now_ms` until nothing more is: timers, the port's deliveries,
    /// the driver's rounds, the publisher, group commit and snapshot writes. `Err` is a
    /// fatal error of the node (the process stops, as the node's would).
    pub fn pump(
        &mut self,
        now_ms: u64,
        base: Instant,
        rng: &mut ChaCha8Rng,
        out: &mut NodeOutput,
    ) -> Result<(), String> {
        let now = base + Duration::from_millis(now_ms);
        let timing = self.timing;
        let Some(run) = self.run.as_mut() else {
            return Ok(());
        };
        let tick_ms = self.config.tick_interval_ms;
        let service_tick_ms = self.service_config.controller_tick_interval_ms;
        if run.next_tick <= now_ms {
            run.driver.tick(now_ms);
            run.next_tick = now_ms + tick_ms;
        }
        if run.next_service_tick <= now_ms {
            run.service.tick(now_ms).map_err(|e| e.to_string())?;
            run.next_service_tick = now_ms + service_tick_ms;
        }
        if run.sync_at.is_some_and(|t| t <= now_ms) {
            run.sync_at = None;
            block_on(run.driver.log().flush_now()).map_err(|e| format!("log sync: {e}"))?;
            run.sync_rounds += 1;
            run.driver.synced(&mut run.calls, now);
            if std::mem::take(&mut run.sync_again) {
                run.sync_at = Some(now_ms + rng.gen_range(1..=timing.fsync_ms_max));
            }
        }
        if run
            .snapshot_write
            .as_ref()
            .is_some_and(|(t, _)| *t <= now_ms)
        {
            let (_, s) = run.snapshot_write.take().expect("checked");
            let dir = self.config.snapshot_dir();
            let outcome = block_on(store_snapshot(run.driver.disk(), &dir, &s));
            run.driver
                .snapshot_written(s.id, s.data, outcome)
                .map_err(|e| e.to_string())?;
        }
        loop {
            let mut progress = false;
            // The service's inputs due now, then what it produced.
            while run.to_service.front().is_some_and(|(t, _)| *t <= now_ms) {
                let (_, m) = run.to_service.pop_front().expect("checked");
                progress = true;
                match m {
                    ToService::Calls(calls) => {
                        run.calls.forwarded(calls.iter().map(|c| c.id), now);
                        run.service
                            .on_calls(calls, now_ms)
                            .map_err(|e| e.to_string())?;
                    }
                    ToService::Committed(mut batches) => {
                        if self.mutation == Some(Mutation::SkipCommittedBatch)
                            && !run.service.is_active()
                            && !self.skipped
                        {
                            // A batch whose effect no later write undoes.
                            let skip = batches.iter().position(|b| {
                                !b.control
                                    && !b.snapshot
                                    && b.base_offset >= LogOffset(20)
                                    && writes_an_own_resource(b)
                            });
                            if let Some(i) = skip {
                                batches.remove(i);
                                self.skipped = true;
                            }
                        }
                        for b in &batches {
                            run.service
                                .on_committed(b, now_ms)
                                .map_err(|e| e.to_string())?;
                        }
                    }
                    ToService::Status(s) => run.service.on_status(&s, now_ms),
                    ToService::Refused {
                        batch,
                        activation,
                        log_end,
                        reason,
                    } => run
                        .service
                        .on_refused(batch, activation, reason, log_end, now_ms),
                }
                run.service.check_invariants();
            }
            if let Some(due) = run.service.take_snapshot_due() {
                let (end_offset, data) = due.encode();
                run.service.snapshot_taken();
                let at = deliver_at(&run.to_driver, now_ms, run.stalled_until, rng, timing);
                run.to_driver
                    .push_back((at, ToDriver::Snapshot { end_offset, data }));
            }
            for m in run.service.take_outbox() {
                let at = deliver_at(&run.to_driver, now_ms, run.stalled_until, rng, timing);
                run.to_driver.push_back((at, m));
            }
            // The driver's side of the port.
            while run.to_driver.front().is_some_and(|(t, _)| *t <= now_ms) {
                let (_, m) = run.to_driver.pop_front().expect("checked");
                progress = true;
                match m {
                    ToDriver::Propose(p) => run.proposals.push_back(p),
                    ToDriver::Answers(answers) => {
                        for (id, body) in answers {
                            out.answers.extend(run.calls.answer(id, body, now));
                        }
                    }
                    ToDriver::Snapshot { end_offset, data } => {
                        if run.snapshot_write.is_none() {
                            if let Some(s) = run.driver.snapshot_offer(end_offset, data) {
                                let at = now_ms + rng.gen_range(1..=timing.fsync_ms_max);
                                run.snapshot_write = Some((at, s));
                            }
                        }
                    }
                    ToDriver::Status(_) => {}
                }
            }
            while run.driver.admits_proposals() {
                let Some(p) = run.proposals.pop_front() else {
                    break;
                };
                progress = true;
                let batch = p.batch;
                let ids: Vec<CallId> = p.answers.iter().map(|(id, _)| *id).collect();
                let outcome = run.driver.on_proposal(p, &mut run.calls, now);
                out.answers.extend(outcome.answers);
                match outcome.refused {
                    Some(refused) => {
                        out.refused += 1;
                        let at =
                            deliver_at(&run.to_service, now_ms, run.stalled_until, rng, timing);
                        run.to_service.push_back((at, refused));
                    }
                    None => {
                        out.appended.push((batch, ids));
                        if self.mutation == Some(Mutation::AnswerAtAppend) {
                            let epoch = batch.epoch;
                            out.answers.extend(run.calls.committed(
                                batch.end_offset,
                                |_| Some(epoch),
                                || None,
                                now,
                            ));
                        }
                    }
                }
            }
            // The driver's rounds.
            while let Some(carried) =
                block_on(run.driver.next_ready()).map_err(|e| e.to_string())?
            {
                progress = true;
                if let Some(to) = carried.truncated_to {
                    out.truncations += 1;
                    self.durable.split_off(&to);
                    run.durable_seen = run.durable_seen.min(to);
                }
                if let Some(id) = carried.installed {
                    out.installs += 1;
                    self.durable.split_off(&id.end_offset);
                    run.durable_seen = id.end_offset;
                }
                if carried.appended {
                    if run.sync_at.is_some() {
                        run.sync_again = true;
                    } else {
                        run.sync_at = Some(now_ms + rng.gen_range(1..=timing.fsync_ms_max));
                    }
                }
                if let Some(hwm) = carried.high_watermark {
                    out.answers
                        .extend(run.driver.committed(hwm, &mut run.calls, now));
                    run.hwm = run.hwm.max(hwm);
                }
                out.messages.extend(carried.messages);
            }
            // The publisher.
            while let Some(batches) = block_on(run.publisher.next_chunk(run.driver.log(), run.hwm))
                .map_err(|e| format!("publisher: {e}"))?
            {
                progress = true;
                let at = deliver_at(&run.to_service, now_ms, run.stalled_until, rng, timing);
                run.to_service
                    .push_back((at, ToService::Committed(batches)));
            }
            out.answers.extend(run.driver.settle(&mut run.calls, now));
            // The status, when leadership changed or now and then.
            let raft = run.driver.raft();
            let key = (raft.role(), raft.epoch(), raft.status().leader);
            if run.told != Some(key) || run.next_status <= now_ms {
                run.told = Some(key);
                run.next_status = now_ms + STATUS_REFRESH_MS;
                let status = run.driver.status(
                    &run.calls,
                    run.sync_rounds,
                    &LatencyHistogram::default(),
                    true,
                );
                let at = deliver_at(&run.to_service, now_ms, run.stalled_until, rng, timing);
                run.to_service
                    .push_back((at, ToService::Status(Box::new(status))));
                progress = true;
            }
            if !progress {
                break;
            }
        }
        // The checker's view of what this disk durably holds.
        self.note_durable()?;
        let run = self.run.as_ref().expect("up");
        run.driver.check_invariants();
        run.calls.check_invariants();
        Ok(())
    }

    /// Adds the batches that became durable since the last look to [`SimNode::durable`].
    fn note_durable(&mut self) -> Result<(), String> {
        let Some(run) = self.run.as_mut() else {
            return Ok(());
        };
        let log = run.driver.log();
        let to = log.durable_end();
        let mut at = run.durable_seen.max(log.start_offset());
        while at < to {
            let chunk = block_on(log.read(at, 1 << 20)).map_err(|e| format!("log read: {e}"))?;
            let Some(end) = chunk.end_offset() else {
                return Err(format!(
                    "{}: reading the log at {at} returned nothing",
                    self.id
                ));
            };
            for f in chunk.frames() {
                let h = f.header();
                if h.base_offset < to {
                    self.durable.insert(h.base_offset, h.epoch);
                }
            }
            at = end;
        }
        run.durable_seen = to;
        Ok(())
    }

    /// Whether this node's disk durably holds the batch `batch` (its entry stays when a
    /// snapshot covers it and the log prefix goes).
    pub fn holds(&self, batch: ProposalId) -> bool {
        self.holds_at(batch.base_offset, batch.epoch)
    }

    /// Whether this node's disk durably holds the batch at `base` of `epoch`.
    pub fn holds_at(&self, base: LogOffset, epoch: Epoch) -> bool {
        self.durable.get(&base) == Some(&epoch)
    }

    /// Whether voter `key` held the batch at `base` of `epoch` durably: this node's disk if
    /// it is that replica, or the disk it had as that replica until wiped. A static voter
    /// (no directory id) is any disk of its id ([`ReplicaKey::is`]).
    pub fn held_as(&self, key: &ReplicaKey, base: LogOffset, epoch: Epoch) -> bool {
        if self.key.is(key) && self.holds_at(base, epoch) {
            return true;
        }
        self.former
            .iter()
            .any(|(k, d)| k.is(key) && d.get(&base) == Some(&epoch))
    }

    /// The last batch this node's disk durably holds below `end`: its base and epoch.
    pub fn durable_before(&self, end: LogOffset) -> Option<(LogOffset, Epoch)> {
        self.durable.range(..end).next_back().map(|(b, e)| (*b, *e))
    }
}

/// When a message queued now on `queue` (FIFO) is delivered.
fn deliver_at<T>(
    queue: &VecDeque<(u64, T)>,
    now_ms: u64,
    stalled_until: u64,
    rng: &mut ChaCha8Rng,
    timing: NodeTiming,
) -> u64 {
    let at = (now_ms + rng.gen_range(0..=timing.port_delay_ms_max)).max(stalled_until);
    queue.back().map_or(at, |(last, _)| at.max(*last))
}

/// Whether `b` sets the config of a workload resource of its own (one no other write
/// touches: see [`super::CONFIG_KEY`]).
fn writes_an_own_resource(b: &crate::port::CommittedBatch) -> bool {
    use corum_controller::records::ArchivedMetadataRecord;
    let bytes = corum_controller::aligned(&b.payload);
    corum_controller::decode_batch(&bytes).is_ok_and(|batch| {
        batch.iter().any(|r| {
            matches!(r, ArchivedMetadataRecord::Config(c)
                if c.resource_name.as_str().parse::<u64>().is_ok_and(|n| n > super::SHARED_KEYS))
        })
    })
}
