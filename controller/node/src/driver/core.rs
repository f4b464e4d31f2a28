//! The driver's policy, over any [`Disk`] and without an executor: what the driver does with
//! each input, as one deterministic object. The async shell ([`super::RaftDriver`]) owns the
//! sockets, timers, channels and helper tasks and feeds this core; the whole-node simulator
//! ([`crate::sim`]) feeds it on [`corum_engine::disk::SimDisk`] from one seed. Every decision
//! of the driver lives here, so the simulator runs the same code the node runs.
//!
//! | input                                  | method                        | decides                                                         |
//! |----------------------------------------|-------------------------------|-----------------------------------------------------------------|
//! | a data directory                       | [`DriverCore::recover`]       | the quorum state, the newest snapshot, the log fitted to continue it, the core |
//! | a tick, a peer's message               | [`DriverCore::tick`], [`DriverCore::step`] | the Raft core's                               |
//! | a proposal of the service              | [`DriverCore::on_proposal`]   | appended (calls held for the commit) or refused (calls answered, the activation fenced) |
//! | admission                              | [`DriverCore::admits_proposals`] | no new proposal while `uncommitted_records_max` records wait for the commit |
//! | a group-commit round finished          | [`DriverCore::synced`]        | `persisted`, calls stamped durable, maybe compaction            |
//! | the core's output                      | [`DriverCore::next_ready`]    | carried out on the log in the contract's order; what to send and the new high watermark come back |
//! | a new high watermark                   | [`DriverCore::committed`]     | the held answers it releases                                    |
//! | after each round                       | [`DriverCore::settle`]        | held calls of an epoch no longer led (`NotController`), calls past their deadline (`Timeout`) |
//! | a snapshot offered by the state machine| [`DriverCore::snapshot_offer`], [`DriverCore::snapshot_written`] | whether to store it; when the log start moves up to it |
//! | committed batches for the consumer     | [`Publisher::next_chunk`]     | what the consumer gets next (a snapshot to load first)          |
//!
//! The call table ([`crate::calls`]) is passed in, never held across an `await`: in the node
//! the connection tasks register calls in it between the loop's rounds.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use corum_engine::disk::Disk;
use corum_engine::log::{Log, NewBatch};
use corum_engine::record::Attributes;
use corum_raft::{Batch, LogRead, Message, Payload, RaftCore, Restore, Role, SnapshotId, VoterSet};
use corum_types::{Epoch, LogOffset, NodeId};

use super::{RaftDriverConfig, Recovered, Result, READ_CHUNK_BYTES, SNAPSHOTS_KEPT};
use crate::calls::{Outgoing, PendingCalls};
use crate::data_dir::{restore_log, DataDir, Mode};
use crate::error::{DriverError, StorageError};
use crate::histogram::LatencyHistogram;
use crate::port::{
    CommittedBatch, DriverStatus, Proposal, Refusal, ToService, ITEMS_PER_MESSAGE_MAX,
};
use crate::protocol::{LeaderHint, RpcError};
use crate::raft_config::{from_raft_quorum_state, leader_hint, to_raft_quorum_state, voter_hint};
use crate::snapshot_store;

/// What one carried-out [`corum_raft::Ready`] leaves for the shell: messages to send (after
/// the answers the new high watermark releases, see [`DriverCore::committed`]), whether the
/// log has batches for the next group-commit round, and the new high watermark for the
/// publisher.
#[derive(Debug, Default)]
pub struct Carried {
    pub messages: Vec<(NodeId, Message)>,
    pub appended: bool,
    pub high_watermark: Option<LogOffset>,
    /// The log was cut back to this offset (a follower's divergent suffix).
    pub truncated_to: Option<LogOffset>,
    /// A snapshot from the leader was installed: the log restarted at its end.
    pub installed: Option<SnapshotId>,
}

/// What [`DriverCore::on_proposal`] decided.
#[derive(Debug)]
pub struct ProposalOutcome<R> {
    /// Answers to send now (a refused proposal's calls).
    pub answers: Vec<Outgoing<R>>,
    /// The refusal to tell the service, if refused.
    pub refused: Option<ToService>,
}

/// The driver's state besides the sockets and tasks. See the module doc.
pub struct DriverCore<D: Disk> {
    config: RaftDriverConfig,
    disk: D,
    core: RaftCore,
    log: Log<D>,
    /// The newest durable snapshot's end (0: none), and whether an offered one is being
    /// written.
    snapshot_end: LogOffset,
    snapshot_writing: bool,
    snapshots_written: u64,
    /// The newest durable snapshot the core does not have yet: it gets it once the log below
    /// it outgrows the retention (`RaftDriverConfig::log_retention_bytes`).
    compactable: Option<(SnapshotId, Payload)>,
    /// A snapshot the consumer must load before anything else ([`Publisher`]).
    publisher_reset: Rc<RefCell<Option<CommittedBatch>>>,
    /// After refusing a proposal, every later one of the same activation of the service is
    /// refused too (their records were built on it).
    fenced_activation: Option<u64>,
    /// The epoch this node led when the table last heard of it.
    leading: Option<Epoch>,
    proposals_appended: u64,
    proposals_refused: u64,
    /// The voter set the status shows, with the core's `voter_set_changes` it was copied at.
    status_voters: RefCell<(u64, Arc<VoterSet>)>,
}

impl<D: Disk> DriverCore<D> {
    /// Recovers the quorum state, the newest snapshot and the log (on `disk`) from
    /// `config.data_dir`, fits the log to continue the snapshot, and builds the core at
    /// `now_ms` on its clock.
    pub async fn recover(
        disk: D,
        config: RaftDriverConfig,
        now_ms: u64,
    ) -> Result<(DriverCore<D>, Recovered)> {
        let DataDir {
            quorum_state,
            snapshot,
            log,
            log_report: report,
            log_start: from,
            ..
        } = DataDir::open(
            disk.clone(),
            &config.data_dir,
            config.log.clone(),
            Mode::Recover,
        )
        .await?;
        // The core starts at the snapshot and never reads below it: whole segments there go
        // as they would have at run time, once they outgrow the retention.
        if config
            .log_retention_bytes
            .is_some_and(|r| log.prefix_bytes(from) > r)
        {
            log.delete_prefix(from).await?;
        }
        let restored = restore_log(&log, from, log.end_offset()).await?;
        let recovered = Recovered {
            quorum_state,
            snapshot: snapshot.as_ref().map(|s| s.id),
            log_start_offset: log.start_offset(),
            log_end_offset: log.end_offset(),
            batches: restored.len(),
            torn_tail_bytes: report.torn_tail.as_ref().map_or(0, |t| t.dropped_bytes),
        };
        let mut core = RaftCore::new(
            config.raft.clone(),
            config.me,
            config.endpoints.clone(),
            Restore {
                quorum_state: quorum_state
                    .as_ref()
                    .map(to_raft_quorum_state)
                    .unwrap_or_default(),
                snapshot: snapshot.clone(),
                log: restored,
                bootstrap_voters: config.bootstrap_voters.clone(),
                kraft_version: config.kraft_version,
            },
            config.seed,
            now_ms,
        )
        .map_err(DriverError::Restore)?;
        core.set_bootstrap_servers(bootstrap_server_ids(config.bootstrap_servers.len()));
        let snapshot_end = snapshot
            .as_ref()
            .map_or(LogOffset::ZERO, |s| s.id.end_offset);
        // The consumer starts from the snapshot (the publisher starts at its end).
        let publisher_reset = Rc::new(RefCell::new(
            snapshot.map(|s| CommittedBatch::load_snapshot(s.id, s.data)),
        ));
        let status_voters =
            RefCell::new((core.voter_set_changes(), Arc::new(core.voter_set().clone())));
        let driver = DriverCore {
            config,
            disk,
            core,
            log,
            snapshot_end,
            snapshot_writing: false,
            snapshots_written: 0,
            compactable: None,
            publisher_reset,
            fenced_activation: None,
            leading: None,
            proposals_appended: 0,
            proposals_refused: 0,
            status_voters,
        };
        Ok((driver, recovered))
    }

    pub fn config(&self) -> &RaftDriverConfig {
        &self.config
    }

    pub fn raft(&self) -> &RaftCore {
        &self.core
    }

    pub fn log(&self) -> &Log<D> {
        &self.log
    }

    pub fn disk(&self) -> &D {
        &self.disk
    }

    pub fn snapshot_end(&self) -> LogOffset {
        self.snapshot_end
    }

    pub fn snapshots_written(&self) -> u64 {
        self.snapshots_written
    }

    pub fn proposals(&self) -> (u64, u64) {
        (self.proposals_appended, self.proposals_refused)
    }

    /// The consumer's view of committed batches, from where this node starts.
    pub fn publisher(&self) -> Publisher {
        Publisher {
            next: self.core.log_start_offset(),
            reset: self.publisher_reset.clone(),
            consumer_gone: false,
        }
    }

    pub fn tick(&mut self, now_ms: u64) {
        self.core.tick(now_ms);
    }

    pub fn step(&mut self, from: NodeId, message: Message) {
        self.core.step(from, message);
    }

    /// The wall clock the core stamps its appended batches with ([`RaftCore::set_wall_clock_ms`]).
    pub fn set_wall_clock_ms(&mut self, ms: i64) {
        self.core.set_wall_clock_ms(ms);
    }

    /// The peer network found `peer`'s process gone ([`RaftCore::peer_unreachable`]).
    pub fn peer_unreachable(&mut self, peer: NodeId) {
        self.core.peer_unreachable(peer);
    }

    /// Whether an observer may step `from`'s requests into the core: not this node, and not
    /// a voter (its fetches would count as that voter's progress).
    pub fn observer_allowed(&self, from: NodeId) -> std::result::Result<(), &'static str> {
        if from == self.config.me.id {
            return Err("is this node");
        }
        if self.core.voter_set().contains_id(from) {
            return Err("is a voter (observers need ids of their own)");
        }
        Ok(())
    }

    /// Back-pressure: no new proposal while `uncommitted_records_max` records or more are
    /// appended but not committed.
    pub fn admits_proposals(&self) -> bool {
        let end = self.core.log_end_offset().get();
        let uncommitted = end - self.core.high_watermark().get().min(end);
        uncommitted < self.config.uncommitted_records_max
    }

    /// A proposal of the service: appended if this node leads its epoch, the log ends at its
    /// predicted base and no earlier proposal of its activation was refused; then its calls'
    /// success answers wait in `calls` for the commit. Otherwise refused: its calls get
    /// `NotController` (the core's own refusal: `ProposalRefused` with the reason) and the
    /// service is to hear of it.
    pub fn on_proposal<R>(
        &mut self,
        p: Proposal,
        calls: &mut PendingCalls<R>,
        now: Instant,
    ) -> ProposalOutcome<R> {
        let refusal = if self.core.role() != Role::Leader || self.core.epoch() != p.batch.epoch {
            Some((Refusal::NotLeader, None))
        } else if self.fenced_activation.is_some_and(|f| p.activation <= f)
            || self.core.log_end_offset() != p.batch.base_offset
        {
            Some((Refusal::Elsewhere, None))
        } else {
            match self.core.propose(p.payload, p.record_count) {
                Ok(id) => {
                    assert_eq!(
                        id, p.batch,
                        "the core appends at the log end in its epoch, as checked"
                    );
                    None
                }
                Err(e) => Some((Refusal::Core, Some(e.to_string()))),
            }
        };
        let Some((reason, core_error)) = refusal else {
            self.proposals_appended += 1;
            for (id, body) in p.answers {
                calls.hold(id, p.batch, body, now);
            }
            return ProposalOutcome {
                answers: Vec::new(),
                refused: None,
            };
        };
        self.proposals_refused += 1;
        self.fenced_activation = Some(self.fenced_activation.unwrap_or(0).max(p.activation));
        let body = match core_error {
            Some(reason) => RpcError::ProposalRefused { reason },
            None => RpcError::NotController {
                leader: self.leader_hint(),
            },
        };
        let answers = p
            .answers
            .into_iter()
            .filter_map(|(id, _)| calls.answer(id, Err(body.clone()), now))
            .collect();
        ProposalOutcome {
            answers,
            refused: Some(ToService::Refused {
                batch: p.batch,
                activation: p.activation,
                log_end: self.core.log_end_offset(),
                reason,
            }),
        }
    }

    /// A group-commit round finished: the core hears what is durable, the held calls get
    /// their durable stamp, and a kept snapshot may now be due for compaction.
    pub fn synced<R>(&mut self, calls: &mut PendingCalls<R>, now: Instant) {
        if let Some(last) = self.log.durable_offset() {
            let epoch = self
                .log
                .epoch_at(last)
                .expect("a durable offset is in the log");
            self.core.persisted(last.next(), epoch);
            calls.durable(last.next(), now);
        }
        self.maybe_compact();
    }

    /// The answers a new high watermark releases ([`PendingCalls::committed`]).
    pub fn committed<R>(
        &self,
        hwm: LogOffset,
        calls: &mut PendingCalls<R>,
        now: Instant,
    ) -> Vec<Outgoing<R>> {
        if calls.held_len() == 0 {
            return Vec::new();
        }
        calls.committed(hwm, |o| self.log.epoch_at(o), || self.leader_hint(), now)
    }

    /// The table's part of a loop round: held calls of an epoch this node no longer leads get
    /// `NotController`, and calls past their deadline `Timeout`.
    pub fn settle<R>(&mut self, calls: &mut PendingCalls<R>, now: Instant) -> Vec<Outgoing<R>> {
        let leading = (self.core.role() == Role::Leader).then_some(self.core.epoch());
        let mut out = Vec::new();
        if leading != self.leading {
            self.leading = leading;
            let hint = self.leader_hint();
            out.extend(calls.leadership(leading, hint.as_ref(), now));
        }
        if calls.next_deadline().is_some_and(|d| d <= now) {
            out.extend(calls.expire(now));
        }
        out
    }

    /// The leader as a `NotController` hint: its endpoint on the controller listener.
    pub fn leader_hint(&self) -> Option<LeaderHint> {
        let leader = self.core.status().leader?;
        Some(
            voter_hint(self.core.voter_set(), leader, &self.config.listener_name)
                .unwrap_or_else(|| leader_hint(&[], leader)),
        )
    }

    /// Carries out the core's next [`corum_raft::Ready`], if any, in the contract's order:
    /// (1) quorum state durable, (2) a leader's snapshot installed, (3) truncation, (4) new
    /// entries into the log's memory (durable after the next group-commit round), (7) the
    /// log prefix below the log start deleted, (8) reads served from the log. The messages
    /// (5) and the high watermark (6) come back for the shell, which sends the answers the
    /// high watermark releases first.
    pub async fn next_ready(&mut self) -> Result<Option<Carried>> {
        let Some(ready) = self.core.ready() else {
            return Ok(None);
        };
        let mut carried = Carried {
            messages: ready.messages,
            high_watermark: ready.high_watermark,
            ..Carried::default()
        };
        // 1. Quorum state durable before any message leaves (rare: votes, new epochs).
        if let Some(qs) = ready.quorum_state {
            from_raft_quorum_state(&qs)
                .write(&self.disk, &self.config.data_dir)
                .await?;
        }
        // 2. A snapshot from the leader replaces the log: durable in the store before
        //    anything else (the messages acknowledge its end), then the log restarts at its
        //    end and the consumer loads it before any later batch.
        if let Some(s) = ready.snapshot {
            carried.installed = Some(s.id);
            self.install_snapshot(s).await?;
            if let Some(hwm) = carried.high_watermark.as_mut() {
                *hwm = (*hwm).max(self.snapshot_end);
            } else {
                carried.high_watermark = Some(self.snapshot_end);
            }
        }
        // 3. Truncation, durable when truncate_suffix returns (before the new entries).
        if let Some(to) = ready.truncate_to {
            let end = self.log.truncate_suffix(to).await?;
            if end != to {
                return Err(DriverError::Diverged {
                    reason: format!("truncation to {to} left the log ending at {end}"),
                });
            }
            carried.truncated_to = Some(to);
        }
        // 4. Entries: into the log's memory now, durable after the next group-commit round.
        for batch in &ready.entries {
            self.append(batch).await?;
            carried.appended = true;
        }
        // 7. Log start: everything below it is in a snapshot.
        if let Some(start) = ready.log_start_offset {
            self.log.delete_prefix(start).await?;
        }
        // 8. Reads the core needs for followers whose batches left its memory.
        for read in ready.reads {
            let batches = self.serve_read(&read).await?;
            self.core.read_completed(read.id, batches);
        }
        Ok(Some(carried))
    }

    /// A snapshot the state machine offers at `end_offset`: the snapshot to store (with the
    /// core's id and voter set), or `None` when one is being stored already, it is not newer
    /// than the newest, or the core would refuse it (not committed, not at a batch boundary,
    /// below the log start). Report the write with [`DriverCore::snapshot_written`].
    pub fn snapshot_offer(
        &mut self,
        end_offset: LogOffset,
        data: Payload,
    ) -> Option<corum_raft::Snapshot> {
        if self.snapshot_writing || end_offset <= self.snapshot_end {
            return None;
        }
        let (id, voters, kraft_version) = match self.core.snapshot_at(end_offset) {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(end = %end_offset, error = %e, "snapshot offer refused");
                return None;
            }
        };
        self.snapshot_writing = true;
        Some(corum_raft::Snapshot {
            id,
            voters,
            kraft_version,
            data,
        })
    }

    /// A snapshot from [`DriverCore::snapshot_offer`] is durable (or failed to be written: fatal,
    /// like a log write's): it is the one to compact to.
    pub fn snapshot_written(
        &mut self,
        id: SnapshotId,
        data: Payload,
        outcome: Result<(), StorageError>,
    ) -> Result<()> {
        self.snapshot_writing = false;
        outcome.map_err(|source| DriverError::Snapshot {
            end_offset: id.end_offset,
            source,
        })?;
        self.snapshots_written += 1;
        self.snapshot_end = self.snapshot_end.max(id.end_offset);
        tracing::info!(end = %id.end_offset, epoch = %id.epoch, "snapshot written");
        self.compactable = Some((id, data));
        self.maybe_compact();
        Ok(())
    }

    /// Hands the newest durable snapshot to the core once the log's whole segments below it
    /// outgrow the retention: the core serves it from then on and moves its log start up to
    /// it, and step 7 of the next `Ready` deletes those segments.
    fn maybe_compact(&mut self) {
        let (Some(retention), Some((id, _))) = (self.config.log_retention_bytes, &self.compactable)
        else {
            return;
        };
        if self.log.prefix_bytes(id.end_offset) <= retention {
            return;
        }
        let (id, data) = self.compactable.take().expect("checked");
        // Refused if the core moved past it meanwhile (a leader's snapshot installed): the
        // file stays valid (committed state never changes) and the newer one wins.
        match self.core.snapshot_created(id.end_offset, data) {
            Ok(_) => tracing::info!(end = %id.end_offset, "log start moves up to the snapshot"),
            Err(e) => tracing::debug!(end = %id.end_offset, error = %e, "snapshot not taken"),
        }
    }

    /// Installs a snapshot the leader sent (the core already replaced its log with it).
    async fn install_snapshot(&mut self, s: corum_raft::Snapshot) -> Result<()> {
        let id = s.id;
        store_snapshot(&self.disk, &self.config.snapshot_dir(), &s)
            .await
            .map_err(|source| DriverError::Snapshot {
                end_offset: id.end_offset,
                source,
            })?;
        self.snapshot_end = self.snapshot_end.max(id.end_offset);
        // The core holds the installed snapshot; an older one kept for compaction is moot.
        self.compactable = None;
        // The consumer loads the snapshot before anything else; set before the log changes
        // under a read the publisher may have in flight (it then sees the reset, not a
        // failure).
        *self.publisher_reset.borrow_mut() = Some(CommittedBatch::load_snapshot(id, s.data));
        let end = id.end_offset;
        if self.log.end_offset() > end {
            self.log.truncate_suffix(end).await?;
        }
        // Batches below the end of a newer epoch than the snapshot's are a deposed leader's,
        // which the snapshot replaced: keeping them (in a segment that also holds the end)
        // would put the leader's older-epoch batches after them. The whole log goes; it
        // restarts empty at the end.
        if self.log.last_epoch() > id.epoch {
            self.log.truncate_suffix(self.log.start_offset()).await?;
        }
        // Restarts the log empty at `end` if it ends before; else drops whole segments below.
        self.log.delete_prefix(end).await?;
        if self.log.end_offset() != end {
            return Err(DriverError::Diverged {
                reason: format!(
                    "installing snapshot {end}: the log ends at {}",
                    self.log.end_offset()
                ),
            });
        }
        tracing::info!(end = %end, epoch = %id.epoch, "snapshot installed from the leader");
        Ok(())
    }

    /// Appends one batch, waiting for buffer space if the disk lags.
    async fn append(&self, batch: &Batch) -> Result<()> {
        let meta = NewBatch {
            epoch: batch.epoch,
            attributes: if batch.control {
                Attributes::CONTROL
            } else {
                Attributes::empty()
            },
            record_count: batch.record_count,
            first_timestamp_ms: batch.timestamp_ms,
            max_timestamp_ms: batch.timestamp_ms,
        };
        let (base, _) = loop {
            match self.log.append(&meta, &batch.payload) {
                Err(corum_engine::Error::Backpressure { .. }) => {
                    let frame_bytes =
                        corum_engine::record::frame_bytes_for_payload(batch.payload.len());
                    self.log.wait_for_space(frame_bytes).await?;
                }
                other => break other?,
            }
        };
        if base != batch.base_offset {
            return Err(DriverError::Diverged {
                reason: format!(
                    "the core appended a batch at {} but the log put it at {base}",
                    batch.base_offset
                ),
            });
        }
        Ok(())
    }

    /// Whole batches from `read.from`, at most `bytes_max` payload bytes beyond the first;
    /// empty if the log no longer holds `from`.
    async fn serve_read(&self, read: &LogRead) -> Result<Vec<Batch>> {
        if read.from < self.log.start_offset() || read.from >= self.log.end_offset() {
            return Ok(Vec::new());
        }
        let chunk = self.log.read(read.from, read.bytes_max.max(1)).await?;
        let mut out = Vec::with_capacity(chunk.len());
        // Counted as the core counts its own reads: payload plus a per-batch overhead, so
        // an append of many small batches stays under the peer frame limit.
        let mut message_bytes = 0usize;
        for frame in chunk.frames() {
            let h = frame.header();
            let cost = frame.payload().len() + corum_raft::BATCH_OVERHEAD_BYTES;
            if !out.is_empty() && message_bytes + cost > read.bytes_max {
                break;
            }
            message_bytes += cost;
            out.push(Batch {
                base_offset: h.base_offset,
                epoch: h.epoch,
                record_count: h.record_count,
                control: h.attributes.is_control(),
                timestamp_ms: crate::data_dir::batch_timestamp(h),
                payload: Payload::from(frame.payload()),
            });
        }
        Ok(out)
    }

    /// The driver's status: the core's, the log's, `calls`' and the loop's figures.
    pub fn status<R>(
        &self,
        calls: &PendingCalls<R>,
        sync_rounds: u64,
        sync_duration: &LatencyHistogram,
        running: bool,
    ) -> DriverStatus {
        let raft = &self.core;
        DriverStatus {
            raft: raft.status(),
            stats: raft.stats(),
            log_end_offset: self.log.end_offset(),
            log_durable_end: self.log.durable_end(),
            sync_rounds,
            sync_duration: sync_duration.clone(),
            running,
            replicas: raft.replica_progress(),
            now_ms: raft.now_ms(),
            voter_set: self.status_voter_set(),
            calls_waiting: calls.len(),
            calls_held: calls.held_len(),
            proposals_appended: self.proposals_appended,
            proposals_refused: self.proposals_refused,
            snapshot_end_offset: self.snapshot_end,
            snapshots_written: self.snapshots_written,
        }
    }

    /// The voter set in force, copied only when the core's set changed since the last status.
    fn status_voter_set(&self) -> Arc<VoterSet> {
        let mut cached = self.status_voters.borrow_mut();
        let changes = self.core.voter_set_changes();
        if cached.0 != changes {
            *cached = (changes, Arc::new(self.core.voter_set().clone()));
        }
        cached.1.clone()
    }

    /// Resigns leadership, if this node leads (a clean stop: the next leader need not wait
    /// for a timeout).
    pub fn resign_if_leader(&mut self) -> bool {
        let leader = self.core.role() == Role::Leader;
        if leader {
            self.core.resign();
        }
        leader
    }

    /// Gives up the log (to flush and close it).
    pub fn into_log(self) -> Log<D> {
        self.log
    }

    /// The core agrees with the log it drives (cheap: every step of a simulation).
    pub fn check_invariants(&self) {
        let raft = &self.core;
        assert_eq!(
            raft.log_end_offset(),
            self.log.end_offset(),
            "the core's log and the engine's log end together"
        );
        assert!(
            self.log.start_offset() <= raft.log_start_offset(),
            "the engine keeps everything from the core's log start: {} > {}",
            self.log.start_offset(),
            raft.log_start_offset()
        );
        assert!(self.log.durable_end() <= self.log.end_offset());
        if raft.log_start_offset() > LogOffset::ZERO {
            assert!(
                self.snapshot_end >= raft.log_start_offset(),
                "a log start above 0 is covered by a stored snapshot ({} < {})",
                self.snapshot_end,
                raft.log_start_offset()
            );
        }
        if let Some((id, _)) = &self.compactable {
            assert!(id.end_offset <= self.snapshot_end);
        }
    }
}

/// What the state machine gets next: committed batches from `next` up to the high watermark,
/// in order; a snapshot put in `reset` goes first, and publishing continues from its end.
pub struct Publisher {
    next: LogOffset,
    reset: Rc<RefCell<Option<CommittedBatch>>>,
    consumer_gone: bool,
}

impl Publisher {
    /// The next offset to publish.
    pub fn next(&self) -> LogOffset {
        self.next
    }

    /// The consumer went away: batches are read and skipped from now on.
    pub fn consumer_gone(&mut self) {
        self.consumer_gone = true;
    }

    /// Whether a snapshot waits to be handed on.
    pub fn has_reset(&self) -> bool {
        self.reset.borrow().is_some()
    }

    /// The next committed batches below `hwm` (at most [`ITEMS_PER_MESSAGE_MAX`]; a snapshot
    /// alone), or `None` when caught up. Batches read before a snapshot was installed are not
    /// handed on after it.
    pub async fn next_chunk<D: Disk>(
        &mut self,
        log: &Log<D>,
        hwm: LogOffset,
    ) -> corum_engine::Result<Option<Vec<CommittedBatch>>> {
        loop {
            let snapshot = self.reset.borrow_mut().take();
            if let Some(snapshot) = snapshot {
                self.next = snapshot.end_offset();
                if self.consumer_gone {
                    continue;
                }
                return Ok(Some(vec![snapshot]));
            }
            if self.next >= hwm {
                return Ok(None);
            }
            let chunk = match log.read(self.next, READ_CHUNK_BYTES).await {
                Ok(c) if !c.is_empty() => c,
                // The log was reset under the read (a snapshot installed): start from it.
                _ if self.reset.borrow().is_some() => continue,
                Ok(_) => {
                    return Err(corum_engine::Error::OffsetOutOfRange {
                        requested: self.next,
                        start: log.start_offset(),
                        end: log.end_offset(),
                    })
                }
                Err(e) => return Err(e),
            };
            let mut batches = Vec::new();
            for frame in chunk.frames() {
                let h = frame.header();
                if h.base_offset >= hwm
                    || self.reset.borrow().is_some()
                    || batches.len() == ITEMS_PER_MESSAGE_MAX
                {
                    break;
                }
                self.next = h.end_offset();
                if self.consumer_gone {
                    continue;
                }
                batches.push(CommittedBatch {
                    base_offset: h.base_offset,
                    epoch: h.epoch,
                    record_count: h.record_count,
                    control: h.attributes.is_control(),
                    payload: Payload::from(frame.payload()),
                    snapshot: false,
                });
            }
            if !batches.is_empty() {
                return Ok(Some(batches));
            }
        }
    }
}

/// Writes `s` durably to the snapshot store in `dir` and keeps the newest
/// [`SNAPSHOTS_KEPT`].
pub async fn store_snapshot<D: Disk>(
    disk: &D,
    dir: &std::path::Path,
    s: &corum_raft::Snapshot,
) -> Result<(), StorageError> {
    snapshot_store::write(disk, dir, s).await?;
    snapshot_store::remove_older(disk, dir, SNAPSHOTS_KEPT).await?;
    Ok(())
}

/// The ids the driver links the `n` bootstrap servers under, in their configured order.
pub fn bootstrap_server_ids(n: usize) -> Vec<NodeId> {
    (crate::peer::BOOTSTRAP_IDS.start..crate::peer::BOOTSTRAP_IDS.end)
        .take(n)
        .map(NodeId)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use corum_controller::control::config_control::IncrementalAlterConfigsResponse;
    use corum_engine::disk::SimDisk;
    use corum_raft::{ProposalId, Voter, VoterSet};
    use futures_lite::future::block_on;

    use super::*;
    use crate::calls::CallId;
    use crate::protocol::{ResponseBody, ResponseFrame};

    type Calls = PendingCalls<u64>;

    /// A one-voter node on a simulated disk, driven until it leads and its LeaderChange
    /// commits; returns it with its call table and the simulated clock.
    fn leader() -> (DriverCore<SimDisk>, Calls, Instant, u64) {
        let voters = VoterSet::new(vec![Voter {
            key: crate::sim::replica_key(1),
            endpoints: vec![crate::sim::endpoint(1)],
        }])
        .unwrap();
        let (config, _) = crate::sim::node_configs(1, &voters, 7).unwrap();
        let (mut d, _) = block_on(DriverCore::recover(SimDisk::new(7), config, 0)).unwrap();
        let mut calls = Calls::default();
        let base = Instant::now();
        let mut now_ms = 0;
        while d.raft().role() != Role::Leader || d.raft().high_watermark() == LogOffset::ZERO {
            now_ms += 5;
            assert!(now_ms < 10_000, "a one-voter node leads");
            d.tick(now_ms);
            round(&mut d, &mut calls, base + Duration::from_millis(now_ms));
        }
        (d, calls, base, now_ms)
    }

    /// Carries out every `Ready`, syncing the log after each (a group-commit round), and
    /// returns the answers released.
    fn round(d: &mut DriverCore<SimDisk>, calls: &mut Calls, now: Instant) -> Vec<Outgoing<u64>> {
        let mut out = Vec::new();
        while let Some(c) = block_on(d.next_ready()).unwrap() {
            if c.appended {
                block_on(d.log().flush_now()).unwrap();
                d.synced(calls, now);
            }
            if let Some(hwm) = c.high_watermark {
                out.extend(d.committed(hwm, calls, now));
            }
        }
        out.extend(d.settle(calls, now));
        d.check_invariants();
        calls.check_invariants();
        out
    }

    fn proposal(
        d: &DriverCore<SimDisk>,
        base: LogOffset,
        activation: u64,
        calls: &[CallId],
    ) -> Proposal {
        let body = ResponseBody::IncrementalAlterConfigs(IncrementalAlterConfigsResponse {
            resources: vec![],
        });
        Proposal {
            batch: ProposalId {
                epoch: d.raft().epoch(),
                base_offset: base,
                end_offset: base.add(1),
            },
            activation,
            payload: Payload::from(&b"record"[..]),
            record_count: 1,
            answers: calls.iter().map(|&id| (id, body.clone())).collect(),
        }
    }

    fn call(calls: &mut Calls, n: u64, now: Instant) -> CallId {
        calls.register(n, n, 10_000, now).unwrap()
    }

    /// A proposal is appended only at the log end in this node's epoch; a refusal answers its
    /// calls `NotController`, tells the service where the log ended, and fences the rest of
    /// its activation; a proposal of a later activation at the right offset is appended, and
    /// its answer leaves only once the batch is durable and committed.
    #[test]
    fn proposals_are_appended_only_where_predicted_and_answered_at_commit() {
        let (mut d, mut calls, base, now_ms) = leader();
        let now = base + Duration::from_millis(now_ms);
        let end = d.raft().log_end_offset();

        // Predicted one past the end: refused, its call answered, the service told.
        let c1 = call(&mut calls, 1, now);
        let out = d.on_proposal(proposal(&d, end.add(1), 1, &[c1]), &mut calls, now);
        assert!(matches!(
            out.answers.as_slice(),
            [(
                1,
                ResponseFrame {
                    body: Err(RpcError::NotController { .. }),
                    ..
                }
            )]
        ));
        let Some(ToService::Refused {
            reason,
            log_end,
            activation,
            ..
        }) = out.refused
        else {
            panic!("refused: {:?}", out.refused);
        };
        assert_eq!((reason, log_end, activation), (Refusal::Elsewhere, end, 1));

        // The same activation at the right offset: still refused (fenced).
        let c2 = call(&mut calls, 2, now);
        let out = d.on_proposal(proposal(&d, end, 1, &[c2]), &mut calls, now);
        assert!(out.refused.is_some() && out.answers.len() == 1);

        // Another epoch: refused as not led.
        let c3 = call(&mut calls, 3, now);
        let mut p = proposal(&d, end, 2, &[c3]);
        p.batch.epoch = Epoch(d.raft().epoch().get() + 1);
        let out = d.on_proposal(p, &mut calls, now);
        assert!(matches!(
            out.refused,
            Some(ToService::Refused {
                reason: Refusal::NotLeader,
                ..
            })
        ));

        // The next activation at the log end: appended, its answer held until the commit.
        let c4 = call(&mut calls, 4, now);
        let out = d.on_proposal(proposal(&d, end, 3, &[c4]), &mut calls, now);
        assert!(out.refused.is_none() && out.answers.is_empty());
        assert_eq!(calls.held_len(), 1);
        assert_eq!(d.proposals(), (1, 3));
        let answers = round(&mut d, &mut calls, now);
        assert!(
            matches!(answers.as_slice(), [(4, ResponseFrame { body: Ok(_), .. })]),
            "{answers:?}"
        );
        assert_eq!(d.raft().high_watermark(), end.add(1));
        assert!(calls.is_empty());
    }

    /// A proposal is stamped with the wall clock the driver gave the core, and the stamp is in
    /// the log frame: a read back from disk (what a restart's recovery and a fetch of an
    /// evicted batch see) carries it.
    #[test]
    fn the_append_time_is_written_with_the_batch_and_read_back_from_disk() {
        let (mut d, mut calls, base, now_ms) = leader();
        let now = base + Duration::from_millis(now_ms);
        let end = d.raft().log_end_offset();
        d.set_wall_clock_ms(1_700_000_000_777);
        let c = call(&mut calls, 1, now);
        let out = d.on_proposal(proposal(&d, end, 1, &[c]), &mut calls, now);
        assert!(out.refused.is_none());
        round(&mut d, &mut calls, now);
        let read = LogRead {
            id: 1,
            from: end,
            bytes_max: 1 << 20,
        };
        let batches = block_on(d.serve_read(&read)).unwrap();
        assert_eq!(batches[0].base_offset, end);
        assert_eq!(batches[0].timestamp_ms, 1_700_000_000_777);
        let restored = block_on(crate::data_dir::restore_log(d.log(), end, end.add(1))).unwrap();
        assert_eq!(restored[0].timestamp_ms, 1_700_000_000_777);
    }

    /// No new proposal is admitted while `uncommitted_records_max` records wait for the commit.
    #[test]
    fn admission_stops_at_the_uncommitted_limit() {
        let (mut d, mut calls, base, now_ms) = leader();
        let now = base + Duration::from_millis(now_ms);
        d.config.uncommitted_records_max = 2;
        for i in 0..2u64 {
            assert!(d.admits_proposals());
            let end = d.raft().log_end_offset();
            let out = d.on_proposal(proposal(&d, end, 1, &[]), &mut calls, now);
            assert!(out.refused.is_none(), "proposal {i}");
        }
        assert!(!d.admits_proposals());
        round(&mut d, &mut calls, now);
        assert!(d.admits_proposals(), "the commit frees the window");
    }

    /// A snapshot offer is taken only at a committed batch boundary above the newest one, one
    /// at a time; once written and the log below it outgrows the retention (0 here), the log
    /// start moves up to it.
    #[test]
    fn snapshot_offers_and_compaction() {
        let (mut d, mut calls, base, now_ms) = leader();
        let now = base + Duration::from_millis(now_ms);
        // Fill a few segments' worth of committed batches.
        for _ in 0..200 {
            let end = d.raft().log_end_offset();
            let mut p = proposal(&d, end, 1, &[]);
            p.payload = Payload::from(&[7u8; 300][..]);
            assert!(d.on_proposal(p, &mut calls, now).refused.is_none());
            round(&mut d, &mut calls, now);
        }
        let hwm = d.raft().high_watermark();
        assert!(
            d.snapshot_offer(hwm.add(1), Payload::from(&b"s"[..]))
                .is_none(),
            "uncommitted"
        );
        let s = d
            .snapshot_offer(hwm, Payload::from(&b"s"[..]))
            .expect("taken");
        assert!(
            d.snapshot_offer(hwm, Payload::from(&b"s"[..])).is_none(),
            "one at a time"
        );
        let dir = d.config().snapshot_dir();
        let written = block_on(store_snapshot(d.disk(), &dir, &s));
        d.snapshot_written(s.id, s.data, written).unwrap();
        assert_eq!(d.snapshot_end(), hwm);
        assert!(
            d.snapshot_offer(hwm, Payload::from(&b"s"[..])).is_none(),
            "not newer"
        );
        round(&mut d, &mut calls, now);
        assert_eq!(d.raft().log_start_offset(), hwm, "the log start moved up");
        assert!(
            d.log().start_offset() > LogOffset::ZERO,
            "whole segments went"
        );

        // A restart continues from the snapshot.
        let config = d.config().clone();
        let disk = d.disk().clone();
        drop(d);
        disk.crash();
        let (d, recovered) = block_on(DriverCore::recover(disk, config, 0)).unwrap();
        assert_eq!(recovered.snapshot, Some(s.id));
        assert_eq!(d.raft().log_start_offset(), hwm);
        assert!(
            d.publisher().has_reset(),
            "the consumer loads the snapshot first"
        );
    }
}
