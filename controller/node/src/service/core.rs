//! The controller service's policy, sans IO: what the service does with each input, as a
//! deterministic state machine. The async shell ([`super::ControllerService`]) only moves
//! messages between it and the port ([`crate::port`]) and feeds it the clock.
//!
//! | input                                              | effect                                                                 |
//! |----------------------------------------------------|------------------------------------------------------------------------|
//! | [`ServiceCore::on_status`]: the driver's status     | activation or resignation (below)                                      |
//! | [`ServiceCore::on_committed`]: a data batch        | validated, replayed; deferred answers it covers released; maybe a snapshot due |
//! | [`ServiceCore::on_committed`]: a control batch     | its epoch and end noted                                                |
//! | [`ServiceCore::on_committed`]: a snapshot          | resignation, then the controller's state is the snapshot's             |
//! | a committed batch of another epoch than the active one | resignation first (the controller's rule), then as above           |
//! | [`ServiceCore::on_calls`] while inactive: a local read (`RequestBody::is_local_read`) | answered now from the committed image (`dispatch::local_read`): DescribeCluster, DescribeConfigs, DescribeTopics, DescribeControllers, DescribeFeatures |
//! | [`ServiceCore::on_calls`] while inactive: any other call | `NotController` with the leader's hint                          |
//! | [`ServiceCore::on_calls`]: a read (a local read too) | answered now, or — when it read records still in flight — with the batch holding them, or after they are replayed |
//! | [`ServiceCore::on_calls`]: a write                 | its records applied as in flight and proposed with the others that arrived together; its success answer travels with the proposal |
//! | [`ServiceCore::on_refused`]: a proposal of this activation the driver did not append | resignation (in-flight state reverted), activation held back until the log end at the refusal is replayed |
//! | [`ServiceCore::tick`] while active                 | the cluster's bootstrap records when missing (`metadata.version`, [`Controller::bootstrap_records`]), the controller's tick (fencing, ...); a NoOp after `idle_noop_interval_ms` without a proposal |
//!
//! # Activation
//!
//! A new leader's first batch is its LeaderChange control batch; once a batch of the leader's
//! own epoch is committed, everything before it is too, and this core has replayed it all
//! (the stream is in log order). Only then is the controller active, so its image holds every
//! record an earlier leader committed. Proposals are numbered by activation; after a refusal
//! the driver refuses every later proposal of the same activation (their records were built
//! on the refused one), and the core activates again only once the committed end reaches the
//! log end the driver reported with the refusal.
//!
//! # Offsets of proposals
//!
//! Handlers need the offset their records will get (broker epochs are derived from it). The
//! core is the only proposer: it predicts each batch's offsets (the log end at activation,
//! then each proposal's end) and proposes without waiting; the driver appends a proposal only
//! at the predicted offsets in the predicted epoch.
//!
//! # Records encoded once
//!
//! A write's records join the group of calls handled together through a
//! [`BatchBuilder`]: encoded there once, at their place in the batch the group becomes, which
//! gives the group's exact encoded length after each call (a group is cut before it would
//! outgrow `batch_bytes_max`; a call over the limit alone is refused `RecordsTooLarge` with its
//! exact length). The controller applies them as in flight from the records themselves
//! ([`Controller::on_proposed`]), so nothing this core encoded is decoded or bytechecked here;
//! a committed batch is validated once, when replayed (`replay_committed`), as on every
//! node.
//!
//! # Reads at a standby
//!
//! A core that is not active replays every committed batch the driver publishes, whether
//! this node leads, follows or is still catching up before an activation (`on_committed` does
//! not look at the role), so its committed image is the log's committed prefix as far as this
//! node has learned it. Local reads are answered from it; nothing is in flight there, so
//! there is nothing to wait for.
//!
//! # Answers
//!
//! The core never holds a caller: each call gets one verdict from it, in a
//! [`ToDriver::Answers`] message (sent at once) or with its proposal (released by the
//! driver's call table at commit). A read computed from an image holding records not yet
//! committed travels with the batch holding them when that batch is still being formed;
//! otherwise the core keeps it until those records are replayed (a resignation answers it
//! `NotController`).

use std::collections::VecDeque;

use corum_controller::records::{MetadataRecord, NoOpRecordV1};
use corum_controller::RequestContext;
use corum_controller::{
    aligned, decode_batch, encode_batch, BatchBuilder, Controller, MetadataImage,
};
use corum_raft::{Payload, ProposalId};
use corum_types::{Epoch, LogOffset};

use super::{ControllerServiceConfig, Result, ServiceStatus};
use crate::calls::CallId;
use crate::dispatch::{dispatch, local_read, Dispatch};
use crate::error::ServiceError;
use crate::histogram::LatencyHistogram;
use crate::port::{Call, Proposal, Refusal, ToDriver};
use crate::port::{CommittedBatch, DriverStatus};
use crate::protocol::{LeaderHint, RequestBody, ResponseBody, RpcError};
use crate::raft_config::leader_hint;

/// A read answered from records in flight, waiting for them to be replayed.
#[derive(Debug)]
struct Deferred {
    wait_for: LogOffset,
    call: CallId,
    body: ResponseBody,
}

/// Records of calls handled together, to be proposed as one batch from `base`: encoded as
/// each call's records join (once: the builder's bytes become the proposal's payload), so the
/// group knows its exact encoded length at every step.
struct Group {
    base: LogOffset,
    batch: BatchBuilder,
    answers: Vec<(CallId, ResponseBody)>,
    /// Calls whose records are in the group (the others of `answers` are reads of them).
    proposing: usize,
}

impl Group {
    /// An empty group at `base`, with room for the records and answers of `calls` calls of
    /// one record each (the common write; more grow it).
    fn new(base: LogOffset, calls: usize) -> Group {
        Group {
            base,
            batch: BatchBuilder::with_capacity(calls),
            answers: Vec::with_capacity(calls),
            proposing: 0,
        }
    }

    /// The offset after the group's records.
    fn end(&self) -> LogOffset {
        self.base.add(self.batch.len() as u64)
    }

    fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }
}

/// A snapshot the core wants taken: the committed image through `end_offset` (a free clone),
/// to encode off the shard and offer to the driver ([`ToDriver::Snapshot`]). Report
/// [`ServiceCore::snapshot_taken`] when done.
#[derive(Debug)]
pub struct SnapshotDue {
    pub image: MetadataImage,
    pub end_offset: LogOffset,
}

impl SnapshotDue {
    /// The snapshot's records, encoded (a whole-image pass: run it off the shard's loop).
    pub fn encode(self) -> (LogOffset, Payload) {
        let encoded = encode_batch(&self.image.snapshot_records());
        (self.end_offset, Payload::from(&encoded[..]))
    }
}

/// What the driver last said about itself, as far as the service cares.
#[derive(Clone, Debug)]
struct DriverView {
    running: bool,
    leader: Option<corum_types::NodeId>,
    epoch: Epoch,
    log_end: LogOffset,
}

/// The service's state machine. See the module doc.
pub struct ServiceCore {
    config: ControllerServiceConfig,
    controller: Controller,
    /// The voter set in force, from the driver's last status (for leader hints).
    voters: std::sync::Arc<corum_raft::VoterSet>,
    driver: DriverView,
    active_epoch: Option<Epoch>,
    /// Activations so far: proposals carry the number of theirs.
    activation: u64,
    /// The offset the current activation started proposing at.
    active_from: LogOffset,
    /// Epoch and end of the last committed batch seen (data or control).
    committed_epoch: Option<Epoch>,
    committed_end: LogOffset,
    /// The committed end must reach this offset before the controller activates again in
    /// this epoch: the log end a refusal of a proposal of that epoch reported. An activation
    /// in a later epoch waits for that epoch's LeaderChange instead, which follows everything
    /// committed before it (the tail the refusal saw may have been truncated since: nothing
    /// would ever replay it).
    activation_barrier: Option<(Epoch, LogOffset)>,
    /// The offset the next proposal gets (while active).
    next_offset: LogOffset,
    /// Reads answered from records in flight, in arrival order.
    deferred: VecDeque<Deferred>,
    /// The messages for the driver, in order.
    outbox: Vec<ToDriver>,
    /// Verdicts gathered for the next [`ToDriver::Answers`].
    answers: Vec<(CallId, std::result::Result<ResponseBody, RpcError>)>,
    snapshot_due: Option<SnapshotDue>,
    snapshot_building: bool,
    bytes_since_snapshot: u64,
    /// When this controller last proposed or activated (ms on the core's clock).
    last_proposal_ms: u64,
    stopping: bool,
    proposals: u64,
    proposed_requests: u64,
    replay_latency: LatencyHistogram,
}

impl ServiceCore {
    /// A core for `controller` (inactive, nothing in flight).
    pub fn new(config: ControllerServiceConfig, controller: Controller) -> ServiceCore {
        assert!(
            !controller.is_active() && controller.inflight_batches() == 0,
            "the service starts with an inactive controller"
        );
        let committed_end = controller.committed_end();
        ServiceCore {
            config,
            controller,
            voters: std::sync::Arc::default(),
            driver: DriverView {
                running: true,
                leader: None,
                epoch: Epoch::ZERO,
                log_end: LogOffset::ZERO,
            },
            active_epoch: None,
            activation: 0,
            active_from: LogOffset::ZERO,
            committed_epoch: None,
            committed_end,
            activation_barrier: None,
            next_offset: committed_end,
            deferred: VecDeque::new(),
            outbox: Vec::new(),
            answers: Vec::new(),
            snapshot_due: None,
            snapshot_building: false,
            bytes_since_snapshot: 0,
            last_proposal_ms: 0,
            stopping: false,
            proposals: 0,
            proposed_requests: 0,
            replay_latency: LatencyHistogram::default(),
        }
    }

    /// The messages for the driver produced since the last call, in order (verdicts gathered
    /// into one [`ToDriver::Answers`] after the proposals they may depend on).
    pub fn take_outbox(&mut self) -> Vec<ToDriver> {
        if !self.answers.is_empty() {
            let answers = std::mem::take(&mut self.answers);
            self.outbox.push(ToDriver::Answers(answers));
        }
        std::mem::take(&mut self.outbox)
    }

    /// A snapshot to take, if one is due (one at a time).
    pub fn take_snapshot_due(&mut self) -> Option<SnapshotDue> {
        self.snapshot_due.take()
    }

    /// The snapshot handed out by [`ServiceCore::take_snapshot_due`] was offered (or dropped).
    pub fn snapshot_taken(&mut self) {
        self.snapshot_building = false;
    }

    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    pub fn into_controller(self) -> Controller {
        self.controller
    }

    pub fn is_active(&self) -> bool {
        self.active_epoch.is_some()
    }

    /// The driver's status changed: activate or resign as it allows.
    pub fn on_status(&mut self, status: &DriverStatus, now_ms: u64) {
        self.voters = status.voter_set.clone();
        self.driver = DriverView {
            running: status.running,
            leader: status.raft.leader,
            epoch: status.raft.epoch,
            log_end: status.raft.log_end_offset,
        };
        self.follow_leadership(now_ms);
    }

    /// Replays one committed batch (or loads a snapshot) and releases the reads it covers.
    pub fn on_committed(&mut self, b: &CommittedBatch, now_ms: u64) -> Result<()> {
        if b.snapshot {
            // Everything so far is replaced: what is in flight has an unknown outcome.
            self.resign();
            load_committed_snapshot(&mut self.controller, b)?;
            self.committed_epoch = Some(b.epoch);
            self.committed_end = b.end_offset();
            self.bytes_since_snapshot = 0;
            tracing::info!(end = %b.end_offset(), "controller state loaded from a snapshot");
            return Ok(());
        }
        if self.active_epoch.is_some_and(|e| e != b.epoch) {
            // The controller's rule: resign before replaying anything of another leader.
            self.resign();
        }
        if !b.control {
            replay_committed(&mut self.controller, b)?;
            self.bytes_since_snapshot += b.payload.len() as u64;
        } else if self.active_epoch == Some(b.epoch) && b.end_offset() > self.next_offset {
            // A control batch the Raft core appended on its own (the VotersRecord of a voter
            // change) where this controller's next proposal would go: one proposed there
            // meanwhile is refused (and resigns it); the next goes after it.
            self.next_offset = b.end_offset();
        }
        self.committed_epoch = Some(b.epoch);
        self.committed_end = b.end_offset();
        if self.config.snapshot_bytes_between > 0
            && self.bytes_since_snapshot >= self.config.snapshot_bytes_between
            && !self.snapshot_building
        {
            self.bytes_since_snapshot = 0;
            self.snapshot_building = true;
            self.snapshot_due = Some(SnapshotDue {
                image: self.controller.committed_image().clone(),
                end_offset: self.committed_end,
            });
        }
        while self
            .deferred
            .front()
            .is_some_and(|d| d.wait_for <= self.committed_end)
        {
            let d = self.deferred.pop_front().expect("front exists");
            self.answers.push((d.call, Ok(d.body)));
        }
        // A batch of this leader's epoch may be what activation waits for.
        self.follow_leadership(now_ms);
        Ok(())
    }

    /// The driver did not append `batch`, proposed in activation `activation`, for `reason`;
    /// the log ended at `log_end`.
    pub fn on_refused(
        &mut self,
        batch: ProposalId,
        activation: u64,
        reason: Refusal,
        log_end: LogOffset,
        now_ms: u64,
    ) {
        let ours = self.active_epoch == Some(batch.epoch) && activation == self.activation;
        if !ours {
            return; // A proposal of an earlier activation: that one resigned already.
        }
        tracing::info!(
            predicted = %batch.base_offset,
            %log_end,
            ?reason,
            "proposal not appended where predicted; resigning until the log end is replayed"
        );
        self.resign();
        let barrier = match self.activation_barrier {
            Some((epoch, end)) if epoch == batch.epoch => end.max(log_end),
            _ => log_end,
        };
        self.activation_barrier = Some((batch.epoch, barrier));
        self.follow_leadership(now_ms);
    }

    /// Serves calls that arrived together: each is handled in order against the image holding
    /// the ones before it, and the records of all of them go out as one proposal (several
    /// when the batch limits are reached).
    pub fn on_calls(&mut self, calls: Vec<Call>, now_ms: u64) -> Result<()> {
        let Some(epoch) = self.active_epoch else {
            let hint = self.leader_hint();
            let leader = hint.as_ref().map(|h| h.id);
            for c in calls {
                let answer = match &c.frame.body {
                    RequestBody::LocalRead(read) => local_read(&self.controller, read, leader),
                    _ => Err(RpcError::NotController {
                        leader: hint.clone(),
                    }),
                };
                self.answers.push((c.id, answer));
            }
            return Ok(());
        };
        let calls_total = calls.len();
        let mut group = Group::new(self.next_offset, calls_total);
        for (i, Call { id, frame }) in calls.into_iter().enumerate() {
            let ctx = RequestContext {
                now_ms,
                next_offset: group.end(),
                high_watermark: self.committed_end,
            };
            match dispatch(&mut self.controller, &frame.body, &ctx) {
                Err(RpcError::NotController { .. }) => {
                    let leader = self.leader_hint();
                    self.answers
                        .push((id, Err(RpcError::NotController { leader })));
                }
                Err(e) => self.answers.push((id, Err(e))),
                Ok(Dispatch::Answer(body)) if group.end() <= self.committed_end => {
                    self.answers.push((id, Ok(body)));
                }
                Ok(Dispatch::Answer(body)) if !group.is_empty() => {
                    // Read from records in flight, the newest of them in this group: it
                    // leaves with the group's batch and is released when that commits.
                    group.answers.push((id, body));
                }
                Ok(Dispatch::Answer(body)) => {
                    self.deferred.push_back(Deferred {
                        wait_for: group.end(),
                        call: id,
                        body,
                    });
                }
                Ok(Dispatch::Propose { records, response }) => {
                    let count = records.len();
                    let (records_max, bytes_max) =
                        (self.config.batch_records_max, self.config.batch_bytes_max);
                    // An empty group takes any number of records (the handlers cap a
                    // request's), never more bytes than `batch_bytes_max`.
                    if !group.is_empty() && group.batch.len() + count > records_max {
                        self.close_group(epoch, &mut group, now_ms, calls_total - i);
                    }
                    let joined = match group.batch.push_within(records, bytes_max) {
                        Err(part) if !group.is_empty() => {
                            // The group is full: it leaves, and the call starts the next one.
                            self.close_group(epoch, &mut group, now_ms, calls_total - i);
                            group.batch.push_within(part.records, bytes_max)
                        }
                        joined => joined,
                    };
                    if let Err(part) = joined {
                        // Over the limit alone in a batch, by its exact encoded length. (A
                        // part that fits a group fits alone: its records encode no shorter
                        // after others, whose bytes only come before them.)
                        self.answers.push((
                            id,
                            Err(RpcError::RecordsTooLarge {
                                bytes: part.encoded_len as u64,
                                max: bytes_max as u64,
                            }),
                        ));
                        continue;
                    }
                    let start = group.batch.len() - count;
                    let base = group.base.add(start as u64);
                    let part = &group.batch.records()[start..];
                    // One revert point per batch: the first request's; the others continue it.
                    let applied = if start == 0 {
                        self.controller.on_proposed(base, part)
                    } else {
                        self.controller.on_proposed_more(base, part)
                    };
                    applied.map_err(|source| ServiceError::Replay {
                        offset: base,
                        source,
                    })?;
                    group.answers.push((id, response));
                    group.proposing += 1;
                }
            }
        }
        self.propose(epoch, group, now_ms);
        Ok(())
    }

    /// The controller's periodic tick while active; its records are proposed with nobody
    /// waiting, and a NoOp when nothing was proposed for `idle_noop_interval_ms`.
    pub fn tick(&mut self, now_ms: u64) -> Result<()> {
        let Some(epoch) = self.active_epoch else {
            return Ok(());
        };
        let ctx = RequestContext {
            now_ms,
            next_offset: self.next_offset,
            high_watermark: self.committed_end,
        };
        // What the cluster must hold from its start (metadata.version) goes first, once.
        let mut records = self.controller.bootstrap_records();
        records.extend(
            crate::dispatch::tick(&mut self.controller, &ctx)
                .map(|r| r.records)
                .unwrap_or_default(),
        );
        let idle_ms = self.config.idle_noop_interval_ms;
        if records.is_empty()
            && idle_ms > 0
            && now_ms.saturating_sub(self.last_proposal_ms) >= idle_ms
        {
            records.push(MetadataRecord::NoOp(NoOpRecordV1 {}));
        }
        self.propose_own(epoch, records, now_ms)
    }

    /// Proposes records nobody waits for (the tick's, the bootstrap records) as one batch.
    fn propose_own(
        &mut self,
        epoch: Epoch,
        records: Vec<MetadataRecord>,
        now_ms: u64,
    ) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let base = self.next_offset;
        self.controller
            .on_proposed(base, &records)
            .map_err(|source| ServiceError::Replay {
                offset: base,
                source,
            })?;
        // The records go out whole (the controller caps them per tick, as a handler caps a
        // request's).
        let mut group = Group::new(base, 0);
        group.batch.push(records);
        self.propose(epoch, group, now_ms);
        Ok(())
    }

    /// The service stops: it resigns, and what it kept gets `NotController` with no hint.
    pub fn stop(&mut self) {
        self.stopping = true;
        self.resign();
    }

    /// What the service shows.
    pub fn status(&self, running: bool) -> ServiceStatus {
        ServiceStatus {
            active_epoch: self.active_epoch,
            committed_end: self.committed_end,
            next_offset: self.next_offset,
            topics: self.controller.committed_image().topics.len(),
            partitions: self.controller.committed_image().topics.partition_count(),
            brokers: crate::port::BrokerCounts::default(),
            committed_image: self
                .config
                .publish_committed_image
                .then(|| self.controller.committed_image().clone()),
            waiting_requests: self.deferred.len(),
            activations: self.activation,
            proposals: self.proposals,
            proposed_requests: self.proposed_requests,
            replay_latency: self.replay_latency.clone(),
            running,
        }
    }

    /// The committed image's brokers by state (a walk of every broker).
    pub fn broker_counts(&self) -> crate::port::BrokerCounts {
        crate::port::BrokerCounts::of(self.controller.committed_image())
    }

    /// Records how long a proposal took from its proposing to its replay here.
    pub fn record_replay_latency(&mut self, took: std::time::Duration) {
        self.replay_latency.record(took);
    }

    /// The core's invariants (cheap enough for every step of a simulation).
    pub fn check_invariants(&self) {
        assert_eq!(self.controller.is_active(), self.active_epoch.is_some());
        if self.active_epoch.is_some() {
            assert!(
                self.next_offset >= self.committed_end,
                "proposals are ahead of replay"
            );
            assert!(self.next_offset >= self.active_from);
        } else {
            assert_eq!(
                self.controller.inflight_batches(),
                0,
                "nothing in flight while inactive"
            );
            assert!(self.deferred.is_empty(), "an inactive core keeps no reads");
        }
        assert!(
            self.deferred
                .iter()
                .zip(self.deferred.iter().skip(1))
                .all(|(a, b)| a.wait_for <= b.wait_for),
            "deferred reads wait in offset order"
        );
    }

    /// Proposes a group's records (already applied as in flight) as one batch at the
    /// predicted offsets, with its success answers.
    fn propose(&mut self, epoch: Epoch, group: Group, now_ms: u64) {
        if group.is_empty() {
            debug_assert!(group.answers.is_empty(), "answers travel with records");
            return;
        }
        let end = group.end();
        let record_count = u32::try_from(group.batch.len()).expect("records per batch fit in u32");
        let encoded = group.batch.finish();
        self.next_offset = end;
        self.last_proposal_ms = now_ms;
        self.proposals += 1;
        self.proposed_requests += group.proposing as u64;
        self.outbox.push(ToDriver::Propose(Proposal {
            batch: ProposalId {
                epoch,
                base_offset: group.base,
                end_offset: end,
            },
            activation: self.activation,
            payload: Payload::from(&encoded[..]),
            record_count,
            answers: group.answers,
        }));
    }

    /// Proposes `group` and puts an empty one in its place, from the offset after it, sized
    /// for the `calls` still to serve.
    fn close_group(&mut self, epoch: Epoch, group: &mut Group, now_ms: u64, calls: usize) {
        let full = std::mem::replace(group, Group::new(LogOffset::ZERO, 0));
        self.propose(epoch, full, now_ms);
        *group = Group::new(self.next_offset, calls);
    }

    /// The leader hint of a `NotController` answer, from the driver's view of the leader.
    fn leader_hint(&self) -> Option<LeaderHint> {
        if self.stopping || !self.driver.running {
            return None;
        }
        let leader = self.driver.leader?;
        // The voter set in force names voters added or moved since start; the configured
        // endpoints cover a leader it does not hold (a removed leader finishing its term).
        Some(
            crate::raft_config::voter_hint(
                &self.voters,
                leader,
                &self.config.controller_listener_name,
            )
            .unwrap_or_else(|| leader_hint(&self.config.leader_endpoints, leader)),
        )
    }

    /// Resigns or activates as the driver's status and the committed stream allow.
    fn follow_leadership(&mut self, now_ms: u64) {
        let me = self.config.node_id;
        let leads = !self.stopping && self.driver.running && self.driver.leader == Some(me);
        match self.active_epoch {
            Some(epoch) if !leads || self.driver.epoch != epoch => self.resign(),
            Some(_) => {}
            None => {
                let epoch = self.driver.epoch;
                let barred = self
                    .activation_barrier
                    .is_some_and(|(e, end)| e == epoch && self.committed_end < end);
                if leads && self.committed_epoch == Some(epoch) && !barred {
                    self.controller.on_become_active(now_ms);
                    self.active_epoch = Some(epoch);
                    self.activation += 1;
                    self.last_proposal_ms = now_ms;
                    self.next_offset = self.committed_end.max(self.driver.log_end);
                    self.active_from = self.next_offset;
                    tracing::info!(%epoch, next_offset = %self.next_offset, "active controller");
                    // A log without metadata.version gets the features the cluster was
                    // formatted with before anything else is handled (Kafka writes its
                    // bootstrap records as it activates), so no request sees a level the
                    // cluster will not have.
                    let records = self.controller.bootstrap_records();
                    if let Err(e) = self.propose_own(epoch, records, now_ms) {
                        tracing::error!(error = %e, "cannot propose the bootstrap records");
                        self.resign();
                    }
                }
            }
        }
    }

    /// Stops being the active controller (if it was): in-flight state reverted, kept reads
    /// answered `NotController`. Calls whose records were proposed are the driver's to
    /// answer (their batches may still commit).
    fn resign(&mut self) {
        if self.active_epoch.take().is_some() {
            self.controller.on_resign();
        }
        let hint = self.leader_hint();
        for d in std::mem::take(&mut self.deferred) {
            self.answers.push((
                d.call,
                Err(RpcError::NotController {
                    leader: hint.clone(),
                }),
            ));
        }
    }
}

/// Validates a snapshot's data (one record batch) and loads it into the controller.
fn load_committed_snapshot(controller: &mut Controller, b: &CommittedBatch) -> Result<()> {
    let offset = b.base_offset;
    let bytes = aligned(&b.payload);
    let batch = decode_batch(&bytes).map_err(|source| ServiceError::Decode { offset, source })?;
    controller
        .load_snapshot(offset, batch)
        .map_err(|source| ServiceError::Replay { offset, source })
}

/// Validates a committed data batch and replays it.
pub(crate) fn replay_committed(controller: &mut Controller, b: &CommittedBatch) -> Result<()> {
    let offset = b.base_offset;
    // The payload's allocation is normally aligned enough for the archive; copied if not.
    let bytes = aligned(&b.payload);
    let batch = decode_batch(&bytes).map_err(|source| ServiceError::Decode { offset, source })?;
    if batch.len() != b.record_count as usize {
        return Err(ServiceError::RecordCount {
            offset,
            header: b.record_count,
            decoded: batch.len(),
        });
    }
    controller
        .replay_batch(offset, batch)
        .map_err(|source| ServiceError::Replay { offset, source })
}

#[cfg(test)]
mod tests {
    use corum_controller::control::cluster_control::{
        DescribeControllersResponse, RegisterControllerRequest,
    };
    use corum_controller::control::config_control::{
        AlterConfigOp, AlterConfigsResource, AlterableConfig, DescribeConfigsRequest,
        IncrementalAlterConfigsRequest,
    };
    use corum_controller::control::replication_control::DescribeTopicsRequest;
    use corum_controller::image::configs::ConfigResource;
    use corum_controller::records::{
        ConfigResourceType, ControllerEndpointV1, FeatureLevelRecordV1, PartitionRecordV1,
        RegisterControllerRecordV1, TopicRecordV1,
    };
    use corum_controller::{ControllerConfig, LeaderEpoch, PartitionEpoch, PartitionId, TopicId};
    use corum_raft::Role;
    use corum_types::{NodeId, Uuid};

    use super::*;
    use crate::protocol::{LocalRead, RequestFrame};

    const ME: NodeId = NodeId(1);

    fn core() -> ServiceCore {
        let node = crate::config::NodeConfig::for_tests();
        let voters = crate::config::components::static_voter_set(&node).unwrap();
        let mut config = crate::config::components::controller_service(&node, &voters);
        config.node_id = ME;
        config.leader_endpoints = vec![LeaderHint {
            id: NodeId(2),
            host: "n2".into(),
            port: 9093,
        }];
        config.idle_noop_interval_ms = 500;
        config.snapshot_bytes_between = 0;
        ServiceCore::new(
            config,
            Controller::new(ControllerConfig::default(), ME).unwrap(),
        )
    }

    fn status(leader: Option<u32>, epoch: u64, log_end: u64) -> DriverStatus {
        let mut s = DriverStatus::starting();
        s.raft.leader = leader.map(NodeId);
        s.raft.role = if leader == Some(ME.get()) {
            Role::Leader
        } else {
            Role::Unattached
        };
        s.raft.epoch = Epoch(epoch);
        s.raft.log_end_offset = LogOffset(log_end);
        s
    }

    /// The LeaderChange control batch a leader of `epoch` appends at `base`.
    fn leader_change(epoch: u64, base: u64) -> CommittedBatch {
        CommittedBatch {
            base_offset: LogOffset(base),
            epoch: Epoch(epoch),
            record_count: 1,
            control: true,
            payload: Payload::from(&b"leader change"[..]),
            snapshot: false,
        }
    }

    fn alter(broker: u32, value: u64) -> RequestBody {
        RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
            resources: vec![AlterConfigsResource {
                resource: ConfigResource {
                    resource_type: ConfigResourceType::Broker,
                    name: broker.to_string(),
                },
                configs: vec![AlterableConfig {
                    key: "log.retention.ms".into(),
                    op: AlterConfigOp::Set,
                    value: value.to_string(),
                }],
            }],
            validate_only: false,
        })
    }

    fn describe(broker: u32) -> RequestBody {
        RequestBody::DescribeConfigs(DescribeConfigsRequest::all(vec![ConfigResource {
            resource_type: ConfigResourceType::Broker,
            name: broker.to_string(),
        }]))
    }

    use crate::protocol::RequestBody;

    fn call(id: u64, body: RequestBody) -> Call {
        Call {
            id: CallId(id),
            frame: RequestFrame {
                correlation_id: id,
                timeout_ms: 0,
                body,
            },
        }
    }

    /// `metadata.version` finalized, as a formatted cluster's first active controller writes
    /// it.
    fn bootstrapped() -> CommittedBatch {
        data(
            2,
            3,
            &[MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                name: "metadata.version".into(),
                min_level: 27,
                max_level: 27,
            })],
        )
    }

    /// An active core of epoch 3 whose log ends at 5 (`metadata.version` finalized at 3).
    fn active() -> ServiceCore {
        let mut c = core();
        c.on_committed(&bootstrapped(), 0).unwrap();
        c.on_status(&status(Some(1), 3, 5), 0);
        assert!(!c.is_active(), "nothing of epoch 3 is committed yet");
        c.on_committed(&leader_change(3, 4), 0).unwrap();
        assert!(c.is_active());
        c.check_invariants();
        c
    }

    fn proposals(out: &[ToDriver]) -> Vec<(ProposalId, u64, Vec<u64>)> {
        out.iter()
            .filter_map(|m| match m {
                ToDriver::Propose(p) => Some((
                    p.batch,
                    p.activation,
                    p.answers.iter().map(|(id, _)| id.0).collect(),
                )),
                _ => None,
            })
            .collect()
    }

    fn verdicts(out: &[ToDriver]) -> Vec<(u64, bool)> {
        out.iter()
            .filter_map(|m| match m {
                ToDriver::Answers(a) => Some(a.iter().map(|(id, b)| (id.0, b.is_ok()))),
                _ => None,
            })
            .flatten()
            .collect()
    }

    fn pid(epoch: u64, base: u64, end: u64) -> ProposalId {
        ProposalId {
            epoch: Epoch(epoch),
            base_offset: LogOffset(base),
            end_offset: LogOffset(end),
        }
    }

    /// Proves an inactive core answers every call NotController naming the leader it knows,
    /// and proposes nothing.
    #[test]
    fn inactive_refuses_with_the_leaders_hint() {
        let mut c = core();
        c.on_status(&status(Some(2), 1, 0), 0);
        c.on_calls(vec![call(1, alter(1, 5)), call(2, describe(1))], 0)
            .unwrap();
        let out = c.take_outbox();
        assert!(proposals(&out).is_empty());
        let ToDriver::Answers(a) = &out[0] else {
            panic!("expected answers: {out:?}");
        };
        for (_, body) in a {
            let Err(RpcError::NotController { leader: Some(h) }) = body else {
                panic!("expected NotController with a hint: {body:?}");
            };
            assert_eq!((h.id, h.host.as_str()), (NodeId(2), "n2"));
        }
    }

    /// Proves a voter added after start (in the driver's voter set) is hinted at its endpoint,
    /// and a voter whose endpoint changed at the new one.
    #[test]
    fn hints_follow_the_voter_set_of_the_drivers_status() {
        let mut c = core();
        let listener = c.config.controller_listener_name.clone();
        let voter = |id: u32, host: &str| corum_raft::Voter {
            key: corum_raft::ReplicaKey {
                id: NodeId(id),
                directory_id: Uuid([id as u8; 16]),
            },
            endpoints: vec![corum_raft::Endpoint {
                listener: listener.clone(),
                host: host.into(),
                port: 9093,
            }],
        };
        let with = |leader: u32, voters: Vec<corum_raft::Voter>| {
            let mut s = status(Some(leader), 1, 0);
            s.voter_set = std::sync::Arc::new(corum_raft::VoterSet::new(voters).unwrap());
            s
        };
        c.on_status(&with(4, vec![voter(1, "n1"), voter(4, "n4")]), 0);
        let hint = |c: &mut ServiceCore| {
            c.on_calls(vec![call(1, alter(1, 5))], 0).unwrap();
            let out = c.take_outbox();
            let ToDriver::Answers(a) = &out[0] else {
                panic!("expected answers: {out:?}");
            };
            let Err(RpcError::NotController { leader: Some(h) }) = &a[0].1 else {
                panic!("expected NotController with a hint: {a:?}");
            };
            (h.id, h.host.clone())
        };
        assert_eq!(hint(&mut c), (NodeId(4), "n4".to_owned()));
        // Node 2 is not in that set: it keeps its entry; an empty set teaches nothing.
        c.on_status(&status(Some(2), 2, 0), 0);
        assert_eq!(hint(&mut c), (NodeId(2), "n2".to_owned()));
        c.on_status(&with(2, vec![voter(2, "moved"), voter(4, "n4")]), 0);
        assert_eq!(hint(&mut c), (NodeId(2), "moved".to_owned()));
    }

    /// Proves calls handled together share one proposal at the predicted offsets (the log
    /// end at activation), a read of their in-flight records travels with that batch, and the
    /// next round is proposed at once after it (pipelined), without waiting for anything.
    #[test]
    fn calls_together_share_a_batch_and_rounds_pipeline() {
        let mut c = active();
        c.on_calls(
            vec![
                call(1, alter(1, 5)),
                call(2, alter(2, 6)),
                call(3, describe(1)),
            ],
            10,
        )
        .unwrap();
        c.on_calls(vec![call(4, alter(3, 7))], 11).unwrap();
        let out = c.take_outbox();
        assert_eq!(
            proposals(&out),
            vec![(pid(3, 5, 7), 1, vec![1, 2, 3]), (pid(3, 7, 8), 1, vec![4])]
        );
        assert!(verdicts(&out).is_empty());
        c.check_invariants();
        // A read with nothing of its own round in flight waits for the replay.
        c.on_calls(vec![call(5, describe(3))], 12).unwrap();
        assert!(c.take_outbox().is_empty());
        c.check_invariants();
    }

    /// Proves a refused proposal resigns the core (kept reads answered NotController), a
    /// refusal of an older activation is ignored, and activation comes back only once the
    /// committed end reaches the log end the driver reported.
    #[test]
    fn a_refusal_resigns_until_the_log_end_is_replayed() {
        let mut c = active();
        c.on_calls(vec![call(1, alter(1, 5))], 10).unwrap();
        c.on_calls(vec![call(2, describe(1))], 10).unwrap();
        let _ = c.take_outbox();
        c.on_refused(pid(3, 5, 6), 1, Refusal::Elsewhere, LogOffset(9), 11);
        assert!(!c.is_active());
        assert_eq!(verdicts(&c.take_outbox()), vec![(2, false)]);
        c.check_invariants();
        // Batches 5..9 of epoch 3 commit (somebody else's: an image without call 1).
        c.on_status(&status(Some(1), 3, 9), 12);
        c.on_committed(&leader_change(3, 5), 12).unwrap();
        c.on_committed(&leader_change(3, 6), 12).unwrap();
        assert!(
            !c.is_active(),
            "the barrier is the log end at the refusal: 9"
        );
        c.on_committed(&leader_change(3, 8), 12).unwrap();
        assert!(c.is_active());
        // A late refusal of the first activation changes nothing.
        c.on_refused(pid(3, 6, 7), 1, Refusal::Elsewhere, LogOffset(9), 13);
        assert!(c.is_active());
        c.on_calls(vec![call(3, alter(1, 5))], 14).unwrap();
        assert_eq!(
            proposals(&c.take_outbox()),
            vec![(pid(3, 9, 10), 2, vec![3])]
        );
        c.check_invariants();
    }

    /// Proves the barrier of a refusal holds in its own epoch only: a status whose log end is
    /// below it does not lift it, but an activation in a later epoch waits for that epoch's
    /// LeaderChange alone — the tail the refusal saw (an uncommitted suffix, here) may have
    /// been truncated meanwhile, and nothing would ever replay it (found by the whole-node
    /// simulator: a leader stayed inactive for good, so nobody proposed).
    #[test]
    fn a_refusal_bars_activation_in_its_own_epoch_only() {
        let mut c = active();
        c.on_calls(vec![call(1, alter(1, 5))], 10).unwrap();
        let _ = c.take_outbox();
        // Refused: the log held an uncommitted tail up to 9 then.
        c.on_refused(pid(3, 5, 6), 1, Refusal::Elsewhere, LogOffset(9), 11);
        assert!(!c.is_active());
        c.on_status(&status(Some(1), 3, 6), 12);
        assert!(!c.is_active(), "epoch 3 waits for 9");
        // The tail went with a truncation to 5; this node leads epoch 4 from there.
        c.on_status(&status(Some(1), 4, 6), 12);
        c.on_committed(&leader_change(4, 5), 12).unwrap();
        assert!(c.is_active(), "epoch 4 waits for its LeaderChange only");
        c.on_calls(vec![call(2, alter(1, 6))], 13).unwrap();
        assert_eq!(
            proposals(&c.take_outbox()),
            vec![(pid(4, 6, 7), 2, vec![2])]
        );
        c.check_invariants();
    }

    /// Proves a committed batch of another epoch resigns the active core before it is
    /// replayed, and a status naming another leader does too.
    #[test]
    fn another_epoch_or_leader_resigns() {
        let mut c = active();
        c.on_committed(&leader_change(4, 5), 1).unwrap();
        assert!(!c.is_active());
        let mut c = active();
        c.on_status(&status(Some(2), 4, 6), 1);
        assert!(!c.is_active());
        c.check_invariants();
    }

    /// Proves the idle NoOp: nothing before `idle_noop_interval_ms` without a proposal, a
    /// NoOp batch after, and a proposal resets the clock.
    #[test]
    fn an_idle_controller_proposes_a_noop() {
        let mut c = active();
        c.tick(0).unwrap();
        c.tick(499).unwrap();
        assert!(proposals(&c.take_outbox()).is_empty());
        c.tick(500).unwrap();
        assert_eq!(proposals(&c.take_outbox()), vec![(pid(3, 5, 6), 1, vec![])]);
        c.tick(900).unwrap();
        assert!(proposals(&c.take_outbox()).is_empty());
        c.check_invariants();
    }

    /// Proves a log without `metadata.version` gets the formatted features as the first
    /// proposal of the activation, before any call is handled, once: here release 3.6
    /// (`metadata.version` 14, below directory assignment), so a broker registering at once
    /// is recorded without log directories.
    #[test]
    fn activation_proposes_the_bootstrap_features_first() {
        let config = ControllerConfig {
            bootstrap_features: corum_controller::control::feature_control::bootstrap_features(
                "3.6",
                &[],
            )
            .unwrap(),
            ..Default::default()
        };
        let mut c = core();
        c.controller = Controller::new(config, ME).unwrap();
        c.on_status(&status(Some(1), 3, 5), 0);
        c.on_committed(&leader_change(3, 4), 0).unwrap();
        assert!(c.is_active());
        let out = c.take_outbox();
        assert_eq!(proposals(&out), vec![(pid(3, 5, 6), 1, vec![])]);
        let ToDriver::Propose(p) = &out[0] else {
            panic!("{out:?}")
        };
        let batch = corum_controller::records::decode_batch(&p.payload).unwrap();
        let records = rkyv::deserialize::<Vec<MetadataRecord>, rkyv::rancor::Error>(batch).unwrap();
        assert_eq!(
            records,
            vec![MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                name: "metadata.version".into(),
                min_level: 14,
                max_level: 14,
            })]
        );
        assert!(c.controller.bootstrap_records().is_empty(), "in flight now");
        assert_eq!(
            corum_controller::control::feature_control::metadata_version(c.controller.image()),
            14
        );
        c.tick(1).unwrap();
        assert!(proposals(&c.take_outbox()).is_empty(), "proposed once");
        c.check_invariants();
    }

    /// A committed data batch of `epoch` at `base` holding `records`.
    fn data(epoch: u64, base: u64, records: &[MetadataRecord]) -> CommittedBatch {
        CommittedBatch {
            base_offset: LogOffset(base),
            epoch: Epoch(epoch),
            record_count: records.len() as u32,
            control: false,
            payload: Payload::from(&encode_batch(records)[..]),
            snapshot: false,
        }
    }

    fn register_controller(id: u32, port: u16) -> RegisterControllerRequest {
        RegisterControllerRequest {
            controller_id: NodeId(id),
            incarnation_id: Uuid([id as u8; 16]),
            end_points: vec![ControllerEndpointV1 {
                name: "CONTROLLER".into(),
                host: format!("c{id}"),
                port,
                security_protocol: 0,
            }],
            features: corum_controller::control::feature_control::supported_features(),
        }
    }

    /// The records of a topic `name` (one partition on broker 1) and of a registration of
    /// controller `controller`.
    fn topic_and_controller(name: &str, controller: u32) -> Vec<MetadataRecord> {
        let topic_id = TopicId(Uuid([name.len() as u8; 16]));
        let RegisterControllerRequest {
            controller_id,
            incarnation_id,
            end_points,
            features,
        } = register_controller(controller, 9093);
        vec![
            MetadataRecord::Topic(TopicRecordV1 {
                name: name.into(),
                topic_id,
                deleting: false,
            }),
            MetadataRecord::Partition(PartitionRecordV1 {
                topic_id,
                partition_id: PartitionId(0),
                replicas: vec![NodeId(1)],
                isr: vec![NodeId(1)],
                leader: None,
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(0),
            }),
            MetadataRecord::RegisterController(RegisterControllerRecordV1 {
                controller_id,
                incarnation_id,
                end_points,
                features,
            }),
        ]
    }

    fn local(read: LocalRead) -> RequestBody {
        RequestBody::LocalRead(Box::new(read))
    }

    fn all_topics() -> LocalRead {
        LocalRead::DescribeTopics(DescribeTopicsRequest { topics: None })
    }

    /// The answers of the Answers messages in `out`, by call id.
    fn answers(out: Vec<ToDriver>) -> Vec<(u64, std::result::Result<ResponseBody, RpcError>)> {
        out.into_iter()
            .filter_map(|m| match m {
                ToDriver::Answers(a) => Some(a.into_iter().map(|(id, b)| (id.0, b))),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Proves an inactive core answers each local read at once from what it replayed (a
    /// standby replays every committed batch: here of an epoch it does not lead, before it
    /// ever was active), DescribeCluster naming the leader it knows, while writes and plain
    /// reads are still refused NotController with the leader's hint; with no leader known,
    /// only DescribeCluster is refused (no hint).
    #[test]
    fn an_inactive_core_answers_local_reads_from_its_committed_image() {
        let mut c = core();
        c.on_calls(
            vec![
                call(1, local(LocalRead::DescribeCluster)),
                call(2, local(all_topics())),
            ],
            0,
        )
        .unwrap();
        let a = answers(c.take_outbox());
        assert_eq!(a[0], (1, Err(RpcError::NotController { leader: None })));
        let (_, Ok(ResponseBody::DescribeTopics(t))) = &a[1] else {
            panic!("expected DescribeTopics: {a:?}");
        };
        assert!(t.topics.is_empty());

        c.on_status(&status(Some(2), 4, 10), 0);
        let records = topic_and_controller("orders", 2);
        c.on_committed(&data(4, 0, &records), 1).unwrap();
        assert!(!c.is_active());
        let mut standby = Controller::new(ControllerConfig::default(), NodeId(3)).unwrap();
        standby
            .replay_batch(LogOffset(0), decode_batch(&encode_batch(&records)).unwrap())
            .unwrap();
        let theirs = standby.committed_reads();
        let describe_configs = DescribeConfigsRequest::all([ConfigResource {
            resource_type: ConfigResourceType::Broker,
            name: "1".into(),
        }]);
        c.on_calls(
            vec![
                call(3, local(LocalRead::DescribeCluster)),
                call(
                    4,
                    local(LocalRead::DescribeConfigs(describe_configs.clone())),
                ),
                call(5, local(all_topics())),
                call(6, local(LocalRead::DescribeControllers)),
                call(7, local(LocalRead::DescribeFeatures)),
                call(8, alter(1, 5)),
                call(9, RequestBody::DescribeCluster),
                call(10, RequestBody::DescribeControllers),
            ],
            2,
        )
        .unwrap();
        let out = c.take_outbox();
        assert!(proposals(&out).is_empty(), "a standby proposes nothing");
        let a = answers(out);
        assert_eq!(
            a[..5],
            [
                (
                    3,
                    Ok(ResponseBody::DescribeCluster(
                        theirs.describe_cluster(NodeId(2))
                    ))
                ),
                (
                    4,
                    Ok(ResponseBody::DescribeConfigs(
                        theirs.describe_configs(&describe_configs)
                    ))
                ),
                (
                    5,
                    Ok(ResponseBody::DescribeTopics(
                        theirs.describe_topics(&DescribeTopicsRequest { topics: None })
                    ))
                ),
                (
                    6,
                    Ok(ResponseBody::DescribeControllers(
                        theirs.describe_controllers()
                    ))
                ),
                (
                    7,
                    Ok(ResponseBody::DescribeFeatures(theirs.describe_features()))
                ),
            ]
        );
        let Ok(ResponseBody::DescribeTopics(t)) = &a[2].1 else {
            unreachable!()
        };
        assert_eq!(t.topics.len(), 1, "the replayed topic is described");
        let Ok(ResponseBody::DescribeControllers(d)) = &a[3].1 else {
            unreachable!()
        };
        assert_eq!(d.controllers[0].controller_id, NodeId(2));
        for (id, answer) in &a[5..] {
            let Err(RpcError::NotController { leader: Some(h) }) = answer else {
                panic!("call {id}: expected NotController with a hint: {answer:?}");
            };
            assert_eq!(h.id, NodeId(2));
        }
        c.check_invariants();
    }

    /// Proves the active core serves a local read like the same read sent alone: one that
    /// reads records of its own round travels with their batch, and, once the core resigned,
    /// the same local read answers at once from the committed image, without the records
    /// that were in flight.
    #[test]
    fn local_reads_see_in_flight_records_only_at_the_active_core() {
        let mut c = active();
        c.on_calls(
            vec![
                call(
                    1,
                    RequestBody::RegisterController(register_controller(3, 9093)),
                ),
                call(2, local(LocalRead::DescribeControllers)),
            ],
            10,
        )
        .unwrap();
        let out = c.take_outbox();
        assert_eq!(proposals(&out), vec![(pid(3, 5, 6), 1, vec![1, 2])]);
        let ToDriver::Propose(p) = &out[0] else {
            unreachable!()
        };
        let ResponseBody::DescribeControllers(d) = &p.answers[1].1 else {
            panic!("expected DescribeControllers: {:?}", p.answers);
        };
        assert_eq!(
            d.controllers.len(),
            1,
            "the read saw the registration in flight"
        );
        // Another node leads now: the registration is reverted, and the same read sees the
        // committed image only.
        c.on_status(&status(Some(2), 4, 6), 11);
        assert!(!c.is_active());
        c.on_calls(vec![call(3, local(LocalRead::DescribeControllers))], 12)
            .unwrap();
        let a = answers(c.take_outbox());
        assert_eq!(
            a,
            vec![(
                3,
                Ok(ResponseBody::DescribeControllers(
                    DescribeControllersResponse {
                        controllers: vec![]
                    }
                ))
            )]
        );
        c.check_invariants();
    }

    /// IncrementalAlterConfigs setting `log.retention.ms` of each (broker, value) given.
    fn alter_many(sets: &[(u32, String)]) -> RequestBody {
        RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
            resources: sets
                .iter()
                .map(|(broker, value)| AlterConfigsResource {
                    resource: ConfigResource {
                        resource_type: ConfigResourceType::Broker,
                        name: broker.to_string(),
                    },
                    configs: vec![AlterableConfig {
                        key: "log.retention.ms".into(),
                        op: AlterConfigOp::Set,
                        value: value.clone(),
                    }],
                })
                .collect(),
            validate_only: false,
        })
    }

    proptest::proptest! {
        /// Calls handled together under random batch limits: every proposal, once encoded,
        /// is within `batch_bytes_max` (and `batch_records_max` unless one call's records
        /// alone exceed it), holds exactly the records its calls were applied with (a follower
        /// replaying the proposals gets the leader's image), the proposals follow each other
        /// in the log, and a call is refused `RecordsTooLarge` exactly when its records
        /// encoded alone are over the limit, with that exact length.
        #[test]
        fn groups_stay_within_the_batch_limits(
            requests in proptest::collection::vec(
                proptest::collection::vec((0..1_000_000u32, "[1-9][0-9]{0,17}"), 1..30),
                1..40,
            ),
            bytes_max in 64usize..3_000,
            records_max in 1usize..12,
        ) {
            let mut c = active();
            c.config.batch_bytes_max = bytes_max;
            c.config.batch_records_max = records_max;
            let mut follower = Controller::new(ControllerConfig::default(), NodeId(2)).unwrap();
            let start = bootstrapped();
            follower.replay_batch(start.base_offset, decode_batch(&aligned(&start.payload)).unwrap()).unwrap();
            let mut expected_sizes = Vec::new();
            let mut calls = Vec::new();
            for (i, sets) in requests.iter().enumerate() {
                let body = alter_many(sets);
                // This request's records, from a copy of the controller (configs being set
                // do not depend on the image).
                let ctx = RequestContext { now_ms: 10, next_offset: LogOffset(5), high_watermark: LogOffset(5) };
                let Ok(Dispatch::Propose { records, .. }) =
                    dispatch(&mut c.controller().clone(), &body, &ctx) else {
                    panic!("an alter of a broker config is proposed");
                };
                expected_sizes.push(encode_batch(&records).len());
                calls.push(call(i as u64, body));
            }
            c.on_calls(calls, 10).unwrap();
            c.check_invariants();
            let out = c.take_outbox();
            let mut next = LogOffset(5);
            let mut proposed = Vec::new();
            for m in &out {
                let ToDriver::Propose(p) = m else { continue };
                proptest::prop_assert!(p.payload.len() <= bytes_max);
                proptest::prop_assert_eq!(p.batch.base_offset, next);
                let bytes = aligned(&p.payload);
                let batch = decode_batch(&bytes).unwrap();
                proptest::prop_assert_eq!(batch.len(), p.record_count as usize);
                proptest::prop_assert!(
                    batch.len() <= records_max || p.answers.len() == 1,
                    "{} records from {} calls", batch.len(), p.answers.len()
                );
                follower.replay_batch(next, batch).unwrap();
                next = p.batch.end_offset;
                proposed.extend(p.answers.iter().map(|(id, _)| id.0));
            }
            proptest::prop_assert_eq!(follower.image(), c.controller().image());
            let mut refused = Vec::new();
            for m in &out {
                let ToDriver::Answers(a) = m else { continue };
                for (id, answer) in a {
                    let Err(RpcError::RecordsTooLarge { bytes, max }) = answer else {
                        panic!("unexpected answer {answer:?}");
                    };
                    proptest::prop_assert_eq!(*bytes as usize, expected_sizes[id.0 as usize]);
                    proptest::prop_assert_eq!(*max as usize, bytes_max);
                    refused.push(id.0);
                }
            }
            for (i, size) in expected_sizes.iter().enumerate() {
                let i = i as u64;
                proptest::prop_assert_eq!(
                    (proposed.contains(&i), refused.contains(&i)),
                    (*size <= bytes_max, *size > bytes_max),
                    "call {} of {} bytes", i, size
                );
            }
        }
    }
}
