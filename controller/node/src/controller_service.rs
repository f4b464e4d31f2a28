//! The controller service: the [`Controller`] state machine driven by a Raft replica's
//! committed stream, serving requests while this node is the active controller.
//!
//! # Model
//!
//! [`ControllerService::run`] is one task that owns the controller alone. Its inputs are
//! values (a [`RequestFrame`] in, a [`ResponseFrame`] out, [`CommittedBatch`]es, the driver's
//! [`DriverStatus`](crate::raft_driver::DriverStatus)), so the task can later move to its own shard behind channels.
//!
//! | input                                        | effect                                                                   |
//! |----------------------------------------------|--------------------------------------------------------------------------|
//! | committed data batch                         | validated (`decode_batch`), `replay_batch`; proposals it covers resolved  |
//! | committed control batch                      | not replayed; its epoch and end are noted                                 |
//! | a snapshot ([`CommittedBatch::snapshot`])    | `resign` (what waits has an unknown outcome), then `load_snapshot`: the controller's state is the snapshot's |
//! | `snapshot_bytes_between` bytes of data batches replayed since the last snapshot | the committed image (a free clone) is encoded on a blocking thread and offered to the driver ([`RaftHandle::offer_snapshot`]) at the committed end |
//! | committed batch of another epoch than active | `on_resign` first (the controller's rule), then as above                  |
//! | status: leader of epoch E, and a committed batch of epoch E seen, and the committed end past the activation barrier | `on_become_active(now_ms)` |
//! | status: not the leader of the active epoch   | `on_resign`, every waiting request answered `NotController`              |
//! | request while inactive                       | `NotController` with the leader's id and endpoint when known             |
//! | request: `Dispatch::Answer`                  | answered at once, or once every proposal before it commits (see below)    |
//! | request: `Dispatch::Propose`                 | one batch proposed, `on_proposed`, answered once committed (see below)    |
//! | controller tick timer, while active          | `tick`; its records proposed like a request's, nobody waits for them; with none and nothing proposed for `idle_noop_interval_ms`, a NoOp record (observers see the high watermark move) |
//! | request deadline passed                      | `Timeout` (the records may still commit)                                  |
//! | shutdown signal, or the commit stream ends   | `on_resign`, waiting requests answered `NotController`, the controller returned |
//!
//! # Activation
//!
//! A new leader's first batch is its LeaderChange control batch; once a batch of the leader's
//! own epoch is committed, everything before it is committed too, and this task has replayed it
//! all (the stream is in log order). Only then does the controller become active, so its image
//! holds every record an earlier leader committed. The activation *barrier* (an offset the
//! committed end must reach first) is raised after a proposal landed elsewhere than predicted,
//! so the controller resumes only once that batch is replayed as a committed record.
//!
//! # Offsets of proposals
//!
//! Handlers need the offset their records will get (`RequestContext::next_offset`: broker
//! epochs are derived from it). This task is the only proposer, and proposes one batch at a
//! time (it awaits the driver's [`ProposalId`] before handling the next requests), so the
//! offset is predicted exactly: the leader's log end at activation, then the `end_offset` of
//! each proposal.
//!
//! # Batching
//!
//! Requests that are queued together (everything waiting when the task takes one, up to
//! `batch_requests_max`) are handled in arrival order, each against the image holding the
//! records of the ones before it (the first request's records through `on_proposed`, the
//! others' through `on_proposed_more`, each at its own predicted offset, so the batch has one
//! revert point), and
//! their records go out as one proposal, split only where `batch_records_max` or
//! `batch_bytes_max` would be passed. Each request waits for its own part of the batch; the
//! batch commits or is lost as a whole. While a proposal is on its way to the driver, new
//! requests queue up and form the next batch: under load, batches grow with the arrival rate
//! and the cost of a proposal (a cross-shard round trip, an append) is shared, with no linger
//! when idle. A [`ProposalId`] that disagrees with the prediction (or names another epoch)
//! is never applied: the controller resigns (reverting its in-flight proposals), the request
//! gets `NotController`, and the barrier waits for that batch to commit and be replayed.
//!
//! # Answers
//!
//! A proposal `(epoch, base..end)` is answered with its response only when the committed
//! stream publishes a batch at `base` with the same epoch and end. A committed batch of
//! another epoch that reaches past `base` means the proposal was truncated away: the request
//! gets a retriable `NotController`. Losing leadership answers `NotController` at once, and a
//! passed deadline answers `Timeout`: both may concern records that commit later, which is
//! Kafka's semantics too (a timed-out or redirected request may have taken effect; clients
//! retry, and the handlers are written so that a retry is answered from the image). Success
//! is never answered for a batch that is not committed. The success answers of a batch also go
//! to the Raft driver with the proposal, and the driver sends each the moment its high
//! watermark passes the batch and its log holds the batch as predicted (this epoch at `base`),
//! before this task replays it ([`crate::answer_gate`]); across the shard bridge they travel
//! by the call's id on the worker shard ([`crate::shard_bridge`]). Whichever answer reaches a
//! call first is sent.
//!
//! Handlers read the image including in-flight proposals (a read, or a per-item error such as
//! TopicAlreadyExists, may rest on them). An answer computed while proposals are in flight
//! therefore waits, in arrival order, until the committed end reaches the offset predicted at
//! its arrival; a resignation answers it `NotController`, a deadline `Timeout`.
//!
//! # Not yet
//!
//! - The wait for a [`ProposalId`] is not bounded: a driver that holds proposals back
//!   (`uncommitted_records_max` reached on a leader that can no longer commit) holds this task
//!   too, and deadlines are served once it answers. Abandoning the wait is not safe (the batch
//!   may still be appended at an offset this task never learns).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_controller::records::{MetadataRecord, NoOpRecordV1};
use corum_controller::{
    aligned, decode_batch, encode_batch, Controller, MetadataImage, RequestContext,
};
use corum_raft::{Payload, ProposalId, VoterSet};
use corum_runtime::ShutdownSignal;
use corum_types::{Epoch, LogOffset, NodeId};
use futures_lite::future::or;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};

use crate::answer_gate::{AnswerSlot, Gated};
use crate::dispatch::{dispatch, effective_timeout_ms, Dispatch};
use crate::error::{DriverError, ServiceError};
use crate::metrics::LatencyHistogram;
use crate::protocol::{LeaderHint, RequestFrame, ResponseBody, ResponseFrame, RpcError};
use crate::raft_driver::{Answers, CommittedBatch, RaftHandle};

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

/// Settings of a [`ControllerService`], derived from the node's configuration by
/// [`crate::config::components::controller_service`].
#[derive(Clone, Debug)]
pub struct ControllerServiceConfig {
    /// This node (to recognise its own leadership in the driver's status).
    pub node_id: NodeId,
    /// Where each voter serves requests, for the leader hint of `NotController`.
    pub leader_endpoints: Vec<LeaderHint>,
    /// Period of the controller's `tick` while active (lease expiry, fencing).
    pub controller_tick_interval_ms: u64,
    /// The driver's status is read after every event and whenever it reports a change of
    /// leadership or commit point ([`RaftHandle::watch_status`]); at least this often besides.
    pub status_poll_interval_ms: u64,
    /// Timeout of a request that gives 0 (`corum.controller.request.timeout.ms`).
    pub request_timeout_default_ms: u64,
    /// No request waits longer than this, whatever it asks.
    pub request_timeout_max_ms: u64,
    /// Requests queued for the task before [`ControllerServiceHandle::call`] waits.
    pub request_queue_capacity: usize,
    /// Most records and payload bytes of one proposal: requests that arrive together are
    /// proposed as one batch up to these limits.
    pub batch_records_max: usize,
    pub batch_bytes_max: usize,
    /// Most requests taken from the queue for one batch.
    pub batch_requests_max: usize,
    /// Payload bytes of committed data batches replayed since the last snapshot that make the
    /// service offer the driver a new one (`metadata.log.max.record.bytes.between.snapshots`;
    /// 0: never).
    pub snapshot_bytes_between: u64,
    /// The active controller appends a NoOp record when it has proposed nothing for this long
    /// (`metadata.max.idle.interval.ms`; 0: never), so observers see the high watermark move
    /// and can tell a live controller from a silent one. Resolves to the tick interval.
    pub idle_noop_interval_ms: u64,
}

/// Each voter's endpoint on `listener`, as leader hints.
pub fn leader_endpoints(voters: &VoterSet, listener: &str) -> Vec<LeaderHint> {
    voters
        .voters()
        .iter()
        .filter_map(|v| {
            v.endpoints
                .iter()
                .find(|e| e.listener == listener)
                .map(|e| LeaderHint {
                    id: v.key.id,
                    host: e.host.clone(),
                    port: e.port,
                })
        })
        .collect()
}

/// What the service shows, updated after every event it handles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceStatus {
    /// The epoch this node is the active controller of, if it is.
    pub active_epoch: Option<Epoch>,
    /// The offset after the last committed batch replayed (the high watermark handlers see).
    pub committed_end: LogOffset,
    /// The offset the next proposal will get (meaningful while active).
    pub next_offset: LogOffset,
    /// The committed image (O(1) to clone).
    pub committed_image: MetadataImage,
    /// Proposals (of requests, or of the tick with nobody waiting) waiting for their commit,
    /// plus answers waiting for the proposals before them.
    pub waiting_requests: usize,
    /// Times this node became the active controller.
    pub activations: u64,
    /// Requests answered `Timeout`.
    pub timeouts: u64,
    /// Batches proposed, and the requests whose records they carried (several requests that
    /// arrive together share one batch).
    pub proposals: u64,
    pub proposed_requests: u64,
    /// Request arrival to commit, for requests that proposed records.
    pub commit_latency: LatencyHistogram,
    /// False once [`ControllerService::run`] has returned.
    pub running: bool,
}

impl ServiceStatus {
    /// What a handle on another shard shows: nothing known yet, running.
    pub(crate) fn remote() -> ServiceStatus {
        ServiceStatus {
            active_epoch: None,
            committed_end: LogOffset::ZERO,
            next_offset: LogOffset::ZERO,
            committed_image: MetadataImage::default(),
            waiting_requests: 0,
            activations: 0,
            timeouts: 0,
            proposals: 0,
            proposed_requests: 0,
            commit_latency: LatencyHistogram::default(),
            running: true,
        }
    }
}

pub(crate) struct Call {
    pub(crate) frame: RequestFrame,
    pub(crate) reply: LocalSender<ResponseFrame>,
    /// Set by the shard bridge: the call's id on the worker shard, where the success answer
    /// of a proposing request is released as soon as its batch commits
    /// ([`crate::shard_bridge::GatedAnswer`]).
    pub(crate) route: Option<u64>,
}

/// The service's face to other tasks: requests in, status out. Cheap to clone.
#[derive(Clone)]
pub struct ControllerServiceHandle {
    calls: Rc<LocalSender<Call>>,
    status: Rc<RefCell<ServiceStatus>>,
}

impl ControllerServiceHandle {
    /// Sends `frame` to the service and waits for its answer (see the module doc for when it
    /// comes). A stopped service answers `NotController` with no hint.
    pub async fn call(&self, frame: RequestFrame) -> ResponseFrame {
        self.call_routed(frame, None).await
    }

    /// [`ControllerServiceHandle::call`] for a call that came over the shard bridge as `route`:
    /// a proposing request's success answer also goes to the worker with its proposal.
    pub(crate) async fn call_routed(
        &self,
        frame: RequestFrame,
        route: Option<u64>,
    ) -> ResponseFrame {
        let correlation_id = frame.correlation_id;
        let stopped = || ResponseFrame {
            correlation_id,
            body: Err(RpcError::NotController { leader: None }),
        };
        let (reply, answer) = local_channel::new_bounded(1);
        if self
            .calls
            .send(Call {
                frame,
                reply,
                route,
            })
            .await
            .is_err()
        {
            return stopped();
        }
        answer.recv().await.unwrap_or_else(stopped)
    }

    /// The latest status.
    pub fn status(&self) -> ServiceStatus {
        self.status.borrow().clone()
    }

    /// A handle served by something other than a service on this shard (the worker side of
    /// [`crate::shard_bridge`]): its calls arrive on the returned receiver, and its status is
    /// whatever the returned cell holds.
    pub(crate) fn detached(
        status: ServiceStatus,
        capacity: usize,
    ) -> (
        ControllerServiceHandle,
        LocalReceiver<Call>,
        Rc<RefCell<ServiceStatus>>,
    ) {
        let (tx, rx) = local_channel::new_bounded(capacity);
        let status = Rc::new(RefCell::new(status));
        let handle = ControllerServiceHandle {
            calls: Rc::new(tx),
            status: status.clone(),
        };
        (handle, rx, status)
    }
}

/// Who waits for one part of a proposal.
#[derive(Debug)]
struct Waiter<T> {
    /// The batch the part is in.
    proposal: ProposalId,
    /// The part's first offset (its key).
    part_base: LogOffset,
    deadline: Instant,
    waiting: T,
}

/// The proposals waiting for their commit, by base offset, with their deadlines. Pure
/// bookkeeping: what a committed batch, a deadline or a resignation does to them.
#[derive(Debug)]
pub struct WaitingProposals<T> {
    by_base: BTreeMap<LogOffset, Waiter<T>>,
    deadlines: BTreeMap<(Instant, LogOffset), ()>,
}

impl<T> Default for WaitingProposals<T> {
    fn default() -> Self {
        WaitingProposals {
            by_base: BTreeMap::new(),
            deadlines: BTreeMap::new(),
        }
    }
}

impl<T> WaitingProposals<T> {
    /// Waits for `proposal` until `deadline`. Panics on a second proposal at one base offset
    /// (the log gives each offset once per leader).
    pub fn insert(&mut self, proposal: ProposalId, deadline: Instant, waiting: T) {
        self.insert_part(proposal.base_offset, proposal, deadline, waiting);
    }

    /// Waits for the part of `proposal` starting at `part_base` (one request's records in a
    /// batch carrying several) until `deadline`. Panics on a second part at one offset.
    pub fn insert_part(
        &mut self,
        part_base: LogOffset,
        proposal: ProposalId,
        deadline: Instant,
        waiting: T,
    ) {
        assert!(
            proposal.base_offset <= part_base
                && part_base < proposal.end_offset.max(part_base.next()),
            "part {part_base} outside its proposal {proposal:?}"
        );
        let previous = self.by_base.insert(
            part_base,
            Waiter {
                proposal,
                part_base,
                deadline,
                waiting,
            },
        );
        assert!(previous.is_none(), "two proposals at offset {part_base}");
        self.deadlines.insert((deadline, part_base), ());
    }

    pub fn len(&self) -> usize {
        self.by_base.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_base.is_empty()
    }

    /// A batch `(base, epoch, end)` was committed: every part starting below `end` is
    /// decided, `true` if its proposal is exactly this batch (committed), `false` if another
    /// batch took its place (truncated away).
    pub fn committed(&mut self, base: LogOffset, epoch: Epoch, end: LogOffset) -> Vec<(T, bool)> {
        let mut out = Vec::new();
        while let Some(entry) = self.by_base.first_entry() {
            if *entry.key() >= end {
                break;
            }
            let w = entry.remove();
            self.deadlines.remove(&(w.deadline, w.part_base));
            let p = w.proposal;
            out.push((
                w.waiting,
                p.base_offset == base && p.epoch == epoch && p.end_offset == end,
            ));
        }
        out
    }

    /// Removes and returns every proposal whose deadline is at or before `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<T> {
        let mut out = Vec::new();
        while let Some(entry) = self.deadlines.first_entry() {
            let (deadline, base) = *entry.key();
            if deadline > now {
                break;
            }
            entry.remove();
            let w = self
                .by_base
                .remove(&base)
                .expect("every deadline has its proposal");
            out.push(w.waiting);
        }
        out
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.keys().next().map(|(d, _)| *d)
    }

    /// Removes and returns every proposal.
    pub fn drain(&mut self) -> Vec<T> {
        self.deadlines.clear();
        std::mem::take(&mut self.by_base)
            .into_values()
            .map(|w| w.waiting)
            .collect()
    }
}

/// The request side of a waiting proposal.
struct Pending {
    /// When the request reached this task.
    received: Instant,
    correlation_id: u64,
    timeout_ms: u32,
    response: ResponseBody,
    /// Shared with the answer held for the commit, if any: the first answer wins.
    reply: AnswerSlot,
    route: Option<u64>,
}

/// One request's records in a [`Group`].
struct Part {
    base: LogOffset,
    deadline: Instant,
    pending: Option<Pending>,
}

/// Requests handled together, their records to be proposed as one batch from `base`.
struct Group {
    base: LogOffset,
    records: Vec<MetadataRecord>,
    bytes: usize,
    parts: Vec<Part>,
}

impl Group {
    fn new(base: LogOffset) -> Group {
        Group {
            base,
            records: Vec::new(),
            bytes: 0,
            parts: Vec::new(),
        }
    }

    /// The offset after the group's records: the next part's base.
    fn end(&self) -> LogOffset {
        self.base.add(self.records.len() as u64)
    }

    /// Whether a part of `records` records and `bytes` encoded bytes still fits (an empty
    /// group takes any part that fits a batch on its own).
    fn fits(&self, records: usize, bytes: usize, config: &ControllerServiceConfig) -> bool {
        self.records.is_empty()
            || (self.records.len() + records <= config.batch_records_max
                && self.bytes + bytes <= config.batch_bytes_max)
    }

    fn push(
        &mut self,
        records: Vec<MetadataRecord>,
        bytes: usize,
        deadline: Instant,
        pending: Option<Pending>,
    ) {
        self.parts.push(Part {
            base: self.end(),
            deadline,
            pending,
        });
        self.records.extend(records);
        self.bytes += bytes;
    }
}

/// An answer that waits for the proposals before it to commit.
struct DeferredAnswer {
    wait_for: LogOffset,
    deadline: Instant,
    pending: Pending,
}

/// Why the loop woke up.
enum Event {
    Shutdown,
    Committed(CommittedBatch),
    CommitsClosed,
    Call(Call),
    Timer,
}

/// The controller service of one node. See the module doc.
pub struct ControllerService {
    config: ControllerServiceConfig,
    controller: Controller,
    raft: RaftHandle,
    commits: LocalReceiver<CommittedBatch>,
    calls: LocalReceiver<Call>,
    shutdown: ShutdownSignal,
    status: Rc<RefCell<ServiceStatus>>,
    clock_origin: Instant,
    active_epoch: Option<Epoch>,
    /// Epoch and end of the last committed batch seen (data or control).
    committed_epoch: Option<Epoch>,
    committed_end: LogOffset,
    /// The committed end must reach this before the controller becomes active again.
    activation_barrier: LogOffset,
    next_offset: LogOffset,
    waiting: WaitingProposals<Option<Pending>>,
    /// Answers computed from in-flight state, in arrival order (so `wait_for` never decreases
    /// within an epoch; all are dropped at resignation).
    deferred: VecDeque<DeferredAnswer>,
    activations: u64,
    timeouts: u64,
    proposals: u64,
    proposed_requests: u64,
    commit_latency: LatencyHistogram,
    /// Payload bytes of data batches replayed since the last snapshot (loaded or offered).
    bytes_since_snapshot: u64,
    /// When this controller last proposed (or became active): the idle NoOp's clock.
    last_proposal_at: Instant,
    /// Set while a snapshot is being built off the shard (one at a time).
    snapshot_building: Rc<Cell<bool>>,
    /// Set once the loop ended: answers carry no leader hint (not even this node).
    stopping: bool,
}

impl ControllerService {
    /// A service for `controller` (fresh: the committed stream replays the log from offset 0)
    /// fed by the driver behind `raft` and its `commits` stream. Run it with
    /// [`ControllerService::run`]; the handle sends requests.
    pub fn new(
        config: ControllerServiceConfig,
        controller: Controller,
        raft: RaftHandle,
        commits: LocalReceiver<CommittedBatch>,
        shutdown: ShutdownSignal,
    ) -> (ControllerService, ControllerServiceHandle) {
        assert!(config.controller_tick_interval_ms > 0 && config.status_poll_interval_ms > 0);
        assert!(config.request_queue_capacity > 0);
        assert!(
            !controller.is_active() && controller.inflight_batches() == 0,
            "the service starts with an inactive controller"
        );
        let (call_tx, calls) = local_channel::new_bounded(config.request_queue_capacity);
        let status = Rc::new(RefCell::new(ServiceStatus {
            active_epoch: None,
            committed_end: controller.committed_end(),
            next_offset: controller.committed_end(),
            committed_image: controller.committed_image().clone(),
            waiting_requests: 0,
            activations: 0,
            timeouts: 0,
            proposals: 0,
            proposed_requests: 0,
            commit_latency: LatencyHistogram::default(),
            running: true,
        }));
        let handle = ControllerServiceHandle {
            calls: Rc::new(call_tx),
            status: status.clone(),
        };
        let committed_end = controller.committed_end();
        let service = ControllerService {
            config,
            controller,
            raft,
            commits,
            calls,
            shutdown,
            status,
            clock_origin: Instant::now(),
            active_epoch: None,
            committed_epoch: None,
            committed_end,
            activation_barrier: LogOffset::ZERO,
            next_offset: committed_end,
            waiting: WaitingProposals::default(),
            deferred: VecDeque::new(),
            activations: 0,
            timeouts: 0,
            proposals: 0,
            proposed_requests: 0,
            commit_latency: LatencyHistogram::default(),
            bytes_since_snapshot: 0,
            last_proposal_at: Instant::now(),
            snapshot_building: Rc::default(),
            stopping: false,
        };
        (service, handle)
    }

    /// Runs until the shutdown signal or the end of the committed stream (the driver
    /// stopped), then resigns, answers every waiting request `NotController` and returns the
    /// controller. A committed batch that does not fit the image stops it with the error.
    pub async fn run(mut self) -> Result<Controller> {
        let tick = Duration::from_millis(self.config.controller_tick_interval_ms);
        let poll = Duration::from_millis(self.config.status_poll_interval_ms);
        let mut next_tick = Instant::now() + tick;
        let mut next_poll = Instant::now();
        let status_changes = self.raft.watch_status();
        // Leadership can only change with the driver's status (a change wakes the timer) or a
        // commit (activation waits for one of the leader's own epoch): look after those, and
        // at least every poll interval, but not after each batch of requests (the hot path).
        let mut look = true;
        let outcome = loop {
            let now = Instant::now();
            if look || now >= next_poll {
                self.follow_leadership();
                next_poll = now + poll;
            }
            if now >= next_tick {
                if self.active_epoch.is_some() {
                    if let Err(e) = self.tick().await {
                        break Err(e);
                    }
                }
                next_tick = now + tick;
            }
            let mut expired: Vec<Pending> =
                self.waiting.expire(now).into_iter().flatten().collect();
            if !self.deferred.is_empty() {
                let (gone, kept) = std::mem::take(&mut self.deferred)
                    .into_iter()
                    .partition(|d| d.deadline <= now);
                self.deferred = kept;
                expired.extend(gone.into_iter().map(|d: DeferredAnswer| d.pending));
            }
            for p in expired {
                self.timeouts += 1;
                let timeout_ms = p.timeout_ms;
                answer(
                    &p.reply,
                    p.correlation_id,
                    Err(RpcError::Timeout { timeout_ms }),
                );
            }
            let mut wake = next_poll.min(next_tick);
            if let Some(d) = self.waiting.next_deadline() {
                wake = wake.min(d);
            }
            if let Some(d) = self.deferred.iter().map(|d| d.deadline).min() {
                wake = wake.min(d);
            }
            // Everything done since the last wait shows before the next one.
            self.publish_status(true);
            let step = match self.next_event(wake, &status_changes).await {
                Event::Shutdown | Event::CommitsClosed => break Ok(()),
                Event::Timer => {
                    look = true;
                    Ok(())
                }
                Event::Committed(b) => {
                    look = true;
                    self.on_committed(b)
                }
                Event::Call(c) => {
                    look = false;
                    // Everything queued behind it joins its batch.
                    let mut calls = vec![c];
                    while calls.len() < self.config.batch_requests_max {
                        match futures_lite::future::poll_once(self.calls.recv()).await {
                            Some(Some(c)) => calls.push(c),
                            _ => break,
                        }
                    }
                    self.on_calls(calls).await
                }
            };
            if let Err(e) = step {
                break Err(e);
            }
        };
        self.stopping = true;
        self.resign();
        // Refuse what is still queued, then close the queue, with no await in between.
        while let Some(Some(c)) = futures_lite::future::poll_once(self.calls.recv()).await {
            answer(
                &c.reply,
                c.frame.correlation_id,
                Err(RpcError::NotController { leader: None }),
            );
        }
        self.publish_status(false);
        outcome.map(|()| self.controller)
    }

    /// The next input: shutdown first, then commits, then requests, then the timer (or a
    /// status change, handled like it).
    async fn next_event(&self, wake: Instant, status_changes: &LocalReceiver<()>) -> Event {
        let shutdown = async {
            self.shutdown.wait().await;
            Event::Shutdown
        };
        let commit = async {
            match self.commits.recv().await {
                Some(b) => Event::Committed(b),
                None => Event::CommitsClosed,
            }
        };
        let call = async {
            match self.calls.recv().await {
                Some(c) => Event::Call(c),
                // Every handle dropped: keep following the log.
                None => std::future::pending().await,
            }
        };
        let timer = async {
            let sleep = glommio::timer::sleep(wake.saturating_duration_since(Instant::now()));
            or(sleep, async {
                if status_changes.recv().await.is_none() {
                    // The driver is gone; the commit stream's end stops the loop.
                    std::future::pending::<()>().await;
                }
            })
            .await;
            Event::Timer
        };
        or(shutdown, or(commit, or(call, timer))).await
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.clock_origin.elapsed().as_millis()).expect("uptime fits in u64 ms")
    }

    /// The leader hint of a `NotController` answer, from the driver's view of the leader.
    fn leader_hint(&self) -> Option<LeaderHint> {
        let status = self.raft.status();
        if self.stopping || !status.running {
            // This node is going away: whatever its driver last knew, it leads nothing.
            return None;
        }
        let leader = status.raft.leader?;
        Some(
            self.config
                .leader_endpoints
                .iter()
                .find(|h| h.id == leader)
                .cloned()
                // A leader whose endpoint is unknown: its id still helps the client.
                .unwrap_or(LeaderHint {
                    id: leader,
                    host: String::new(),
                    port: 0,
                }),
        )
    }

    /// Resigns or activates as the driver's status and the committed stream allow.
    fn follow_leadership(&mut self) {
        let status = self.raft.status();
        let me = self.config.node_id;
        let leads = status.running && status.is_leader(me);
        match self.active_epoch {
            Some(epoch) if !leads || status.raft.epoch != epoch => self.resign(),
            Some(_) => {}
            None => {
                let epoch = status.raft.epoch;
                if leads
                    && self.committed_epoch == Some(epoch)
                    && self.committed_end >= self.activation_barrier
                {
                    self.controller.on_become_active(self.now_ms());
                    self.active_epoch = Some(epoch);
                    self.last_proposal_at = Instant::now();
                    self.activations += 1;
                    self.next_offset = self.committed_end.max(status.raft.log_end_offset);
                    tracing::info!(%epoch, next_offset = %self.next_offset, "active controller");
                }
            }
        }
    }

    /// Stops being the active controller (if it was): in-flight proposals reverted, every
    /// waiting request answered `NotController` (its records may still commit).
    fn resign(&mut self) {
        if self.active_epoch.take().is_some() {
            self.controller.on_resign();
        }
        let hint = self.leader_hint();
        let deferred = std::mem::take(&mut self.deferred)
            .into_iter()
            .map(|d| d.pending);
        for p in self.waiting.drain().into_iter().flatten().chain(deferred) {
            answer(
                &p.reply,
                p.correlation_id,
                Err(RpcError::NotController {
                    leader: hint.clone(),
                }),
            );
        }
    }

    /// Replays one committed batch and answers the proposals it decides; loads a snapshot.
    fn on_committed(&mut self, b: CommittedBatch) -> Result<()> {
        if b.snapshot {
            // Everything so far is replaced; what waits has an unknown outcome (a follower
            // has nothing waiting: only a replica behind its leader loads one at run time).
            self.resign();
            load_committed_snapshot(&mut self.controller, &b)?;
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
            replay_committed(&mut self.controller, &b)?;
            self.bytes_since_snapshot += b.payload.len() as u64;
        }
        self.committed_epoch = Some(b.epoch);
        self.committed_end = b.end_offset();
        if self.config.snapshot_bytes_between > 0
            && self.bytes_since_snapshot >= self.config.snapshot_bytes_between
        {
            self.offer_snapshot();
        }
        while self
            .deferred
            .front()
            .is_some_and(|d| d.wait_for <= self.committed_end)
        {
            let d = self.deferred.pop_front().expect("front exists");
            answer(
                &d.pending.reply,
                d.pending.correlation_id,
                Ok(d.pending.response),
            );
        }
        let hint = self.leader_hint();
        for (p, committed) in self
            .waiting
            .committed(b.base_offset, b.epoch, b.end_offset())
        {
            let Some(p) = p else { continue };
            let body = if committed {
                self.commit_latency.record(p.received.elapsed());
                Ok(p.response)
            } else {
                Err(RpcError::NotController {
                    leader: hint.clone(),
                })
            };
            answer(&p.reply, p.correlation_id, body);
        }
        Ok(())
    }

    /// Offers the driver a snapshot of the committed image at the committed end. The image
    /// is a persistent structure: its clone costs nothing, and its records are built and
    /// encoded on a blocking thread, so the shard goes on serving meanwhile (the driver then
    /// writes them off its loop too). One at a time.
    fn offer_snapshot(&mut self) {
        if self.snapshot_building.get() {
            return;
        }
        self.bytes_since_snapshot = 0;
        self.snapshot_building.set(true);
        let image = self.controller.committed_image().clone();
        let end = self.committed_end;
        let (raft, building) = (self.raft.clone(), self.snapshot_building.clone());
        glommio::spawn_local(async move {
            let data = glommio::executor()
                .spawn_blocking(move || {
                    let encoded = encode_batch(&image.snapshot_records());
                    Payload::from(&encoded[..])
                })
                .await;
            if !raft.offer_snapshot(end, data) {
                tracing::debug!(%end, "snapshot offer dropped: the driver has one queued");
            }
            building.set(false);
        })
        .detach();
    }

    /// Serves requests that arrived together (see the module doc's table): each is handled in
    /// order against the image holding the ones before it, and the records of all of them
    /// go out as one proposal (several when the batch limits are reached).
    async fn on_calls(&mut self, calls: Vec<Call>) -> Result<()> {
        let Some(epoch) = self.active_epoch else {
            let leader = self.leader_hint();
            for c in calls {
                answer(
                    &c.reply,
                    c.frame.correlation_id,
                    Err(RpcError::NotController {
                        leader: leader.clone(),
                    }),
                );
            }
            return Ok(());
        };
        let now_ms = self.now_ms();
        let arrived = Instant::now();
        let mut group = Group::new(self.next_offset);
        for Call {
            frame,
            reply,
            route,
        } in calls
        {
            let id = frame.correlation_id;
            if self.active_epoch != Some(epoch) {
                // A proposal of this group failed and the controller resigned.
                let leader = self.leader_hint();
                answer(&reply, id, Err(RpcError::NotController { leader }));
                continue;
            }
            let ctx = RequestContext {
                now_ms,
                next_offset: group.end(),
                high_watermark: self.committed_end,
            };
            let timeout_ms = self.timeout_ms(frame.timeout_ms);
            let deadline = Instant::now() + Duration::from_millis(timeout_ms);
            let pending = |response, reply| Pending {
                received: arrived,
                correlation_id: id,
                timeout_ms: u32::try_from(timeout_ms).unwrap_or(u32::MAX),
                response,
                reply: AnswerSlot::new(reply),
                route,
            };
            match dispatch(&mut self.controller, &frame.body, &ctx) {
                Err(RpcError::NotController { .. }) => {
                    let leader = self.leader_hint();
                    answer(&reply, id, Err(RpcError::NotController { leader }));
                }
                Err(e) => answer(&reply, id, Err(e)),
                Ok(Dispatch::Answer(body)) if group.end() <= self.committed_end => {
                    answer(&reply, id, Ok(body));
                }
                Ok(Dispatch::Answer(body)) => {
                    // Computed from an image holding proposals not yet committed: answered
                    // once they are, so no answer shows what may never commit.
                    self.deferred.push_back(DeferredAnswer {
                        wait_for: group.end(),
                        deadline,
                        pending: pending(body, reply),
                    });
                }
                Ok(Dispatch::Propose { records, response }) => {
                    let encoded = encode_batch(&records);
                    if encoded.len() > self.config.batch_bytes_max {
                        answer(
                            &reply,
                            id,
                            Err(RpcError::Malformed {
                                reason: format!(
                                    "the request's {} records take {} bytes, more than a batch may hold ({})",
                                    records.len(),
                                    encoded.len(),
                                    self.config.batch_bytes_max
                                ),
                            }),
                        );
                        continue;
                    }
                    if !group.fits(records.len(), encoded.len(), &self.config) {
                        let full = std::mem::replace(&mut group, Group::new(self.next_offset));
                        self.propose_group(epoch, full).await?;
                        group = Group::new(self.next_offset);
                        if self.active_epoch != Some(epoch) {
                            let leader = self.leader_hint();
                            answer(&reply, id, Err(RpcError::NotController { leader }));
                            continue;
                        }
                    }
                    let base = group.end();
                    let batch = decode_batch(&encoded).expect("a batch just encoded decodes");
                    // One revert point per batch: the first request's; the others continue it.
                    let applied = if group.records.is_empty() {
                        self.controller.on_proposed(base, batch)
                    } else {
                        self.controller.on_proposed_more(base, batch)
                    };
                    applied.map_err(|source| ServiceError::Replay {
                        offset: base,
                        source,
                    })?;
                    group.push(
                        records,
                        encoded.len(),
                        deadline,
                        Some(pending(response, reply)),
                    );
                }
            }
        }
        self.propose_group(epoch, group).await
    }

    /// The time a request may wait, in ms.
    fn timeout_ms(&self, asked_ms: u32) -> u64 {
        effective_timeout_ms(
            asked_ms,
            self.config.request_timeout_default_ms,
            self.config.request_timeout_max_ms,
        )
    }

    fn context(&self, now_ms: u64) -> RequestContext {
        RequestContext {
            now_ms,
            next_offset: self.next_offset,
            high_watermark: self.committed_end,
        }
    }

    /// The controller's periodic tick; its records are proposed with nobody waiting.
    async fn tick(&mut self) -> Result<()> {
        let Some(epoch) = self.active_epoch else {
            return Ok(());
        };
        let ctx = self.context(self.now_ms());
        let mut records = crate::dispatch::tick(&mut self.controller, &ctx)
            .map(|r| r.records)
            .unwrap_or_default();
        let idle = Duration::from_millis(self.config.idle_noop_interval_ms);
        if records.is_empty() && !idle.is_zero() && self.last_proposal_at.elapsed() >= idle {
            records.push(MetadataRecord::NoOp(NoOpRecordV1 {}));
        }
        if records.is_empty() {
            return Ok(());
        }
        let encoded = encode_batch(&records);
        let base = self.next_offset;
        let batch = decode_batch(&encoded).expect("a batch just encoded decodes");
        self.controller
            .on_proposed(base, batch)
            .map_err(|source| ServiceError::Replay {
                offset: base,
                source,
            })?;
        let mut group = Group::new(base);
        let deadline = Instant::now() + Duration::from_millis(self.config.request_timeout_max_ms);
        group.push(records, encoded.len(), deadline, None);
        self.propose_group(epoch, group).await
    }

    /// Proposes a group's records as one batch at the predicted offset (its parts are already
    /// applied as in flight); each part's request is answered once the batch commits. A
    /// batch that cannot be proposed where predicted resigns the controller (reverting what
    /// is in flight), and the group's requests get `NotController` (or `Malformed` for a batch
    /// the core refused).
    async fn propose_group(&mut self, epoch: Epoch, group: Group) -> Result<()> {
        if group.records.is_empty() {
            return Ok(());
        }
        let encoded = encode_batch(&group.records);
        let record_count =
            u32::try_from(group.records.len()).expect("records per batch fit in u32");
        let end = group.end();
        // Every success answer travels with the proposal: the driver sends it the moment the
        // batch commits (`crate::answer_gate`); calls that came over the shard bridge name
        // their route, which the bridge's worker side turns into the call's slot there.
        let batch = ProposalId {
            epoch,
            base_offset: group.base,
            end_offset: end,
        };
        let mut answers = Answers::default();
        for part in &group.parts {
            let Some(p) = part.pending.as_ref() else {
                continue;
            };
            let gated = Gated {
                to: (),
                batch,
                part_base: part.base,
                answer: ResponseFrame {
                    correlation_id: p.correlation_id,
                    body: Ok(p.response.clone()),
                },
            };
            match p.route {
                Some(route) => answers.routed.push(gated.to(route)),
                None => answers.held.push(gated.to(p.reply.clone())),
            }
        }
        let result = self
            .raft
            .propose_with(Payload::from(&encoded[..]), record_count, answers)
            .await;
        let refuse_all = |parts: Vec<Part>, body: RpcError| {
            for part in parts {
                if let Some(p) = part.pending {
                    answer(&p.reply, p.correlation_id, Err(body.clone()));
                }
            }
        };
        match result {
            Ok(proposal)
                if proposal.base_offset == group.base
                    && proposal.end_offset == end
                    && proposal.epoch == epoch
                    && self.active_epoch == Some(epoch) =>
            {
                self.next_offset = end;
                self.last_proposal_at = Instant::now();
                self.proposals += 1;
                self.proposed_requests +=
                    group.parts.iter().filter(|p| p.pending.is_some()).count() as u64;
                for part in group.parts {
                    self.waiting
                        .insert_part(part.base, proposal, part.deadline, part.pending);
                }
                Ok(())
            }
            Ok(proposal) => {
                // Not where the handlers were told (or leadership changed while proposing):
                // never apply it; wait for it to commit and be replayed before serving again.
                tracing::warn!(
                    predicted = %group.base,
                    base = %proposal.base_offset,
                    epoch = %proposal.epoch,
                    "proposal landed elsewhere than predicted; resigning until it is replayed"
                );
                self.resign();
                self.activation_barrier = self.activation_barrier.max(proposal.end_offset);
                let leader = self.leader_hint();
                refuse_all(group.parts, RpcError::NotController { leader });
                Ok(())
            }
            Err(DriverError::Proposal(e)) => {
                // Nothing was appended, but the parts are in the image: revert by resigning
                // (activation follows at once: nothing new needs replaying).
                self.resign();
                refuse_all(
                    group.parts,
                    RpcError::Malformed {
                        reason: format!("proposal refused: {e}"),
                    },
                );
                Ok(())
            }
            Err(e) => {
                tracing::info!(error = %e, "proposal failed; resigning");
                self.resign();
                let leader = self.leader_hint();
                refuse_all(group.parts, RpcError::NotController { leader });
                Ok(())
            }
        }
    }

    fn publish_status(&self, running: bool) {
        *self.status.borrow_mut() = ServiceStatus {
            active_epoch: self.active_epoch,
            committed_end: self.committed_end,
            next_offset: self.next_offset,
            committed_image: self.controller.committed_image().clone(),
            waiting_requests: self.waiting.len() + self.deferred.len(),
            activations: self.activations,
            timeouts: self.timeouts,
            proposals: self.proposals,
            proposed_requests: self.proposed_requests,
            commit_latency: self.commit_latency.clone(),
            running,
        };
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
fn replay_committed(controller: &mut Controller, b: &CommittedBatch) -> Result<()> {
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

/// Sends an answer; a caller that gave up no longer listens.
fn answer(
    reply: &impl Reply,
    correlation_id: u64,
    body: std::result::Result<ResponseBody, RpcError>,
) {
    reply.reply(ResponseFrame {
        correlation_id,
        body,
    });
}

/// Where a call's answer goes: its channel, or a slot it shares with a held answer.
trait Reply {
    fn reply(&self, frame: ResponseFrame);
}

impl Reply for LocalSender<ResponseFrame> {
    fn reply(&self, frame: ResponseFrame) {
        // Capacity 1, one answer per call: never full; a caller that gave up closed it.
        let _ = self.try_send(frame);
    }
}

impl Reply for AnswerSlot {
    fn reply(&self, frame: ResponseFrame) {
        self.send(frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(epoch: u64, base: u64, end: u64) -> ProposalId {
        ProposalId {
            epoch: Epoch(epoch),
            base_offset: LogOffset(base),
            end_offset: LogOffset(end),
        }
    }

    /// A committed batch answers exactly the proposal it is, and decides as lost every other
    /// proposal it overtakes; later proposals keep waiting.
    #[test]
    fn committed_batches_decide_the_proposals_they_reach() {
        let t = Instant::now();
        let mut w = WaitingProposals::default();
        w.insert(pid(2, 5, 7), t, "a");
        w.insert(pid(2, 7, 8), t, "b");
        w.insert(pid(2, 8, 10), t, "c");
        assert_eq!(
            w.committed(LogOffset(5), Epoch(2), LogOffset(7)),
            vec![("a", true)]
        );
        // A new leader's batch at 7 (epoch 3) took b's place and reaches past c's base.
        assert_eq!(
            w.committed(LogOffset(7), Epoch(3), LogOffset(9)),
            vec![("b", false), ("c", false)]
        );
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    /// Same base but another epoch or another length is not this proposal.
    #[test]
    fn a_batch_at_the_same_offset_of_another_epoch_is_not_the_proposal() {
        let t = Instant::now();
        let mut w = WaitingProposals::default();
        w.insert(pid(4, 10, 12), t, 1);
        assert_eq!(
            w.committed(LogOffset(10), Epoch(5), LogOffset(12)),
            vec![(1, false)]
        );
        w.insert(pid(4, 10, 12), t, 2);
        assert_eq!(
            w.committed(LogOffset(10), Epoch(4), LogOffset(11)),
            vec![(2, false)]
        );
        w.insert(pid(4, 20, 21), t, 3);
        // A batch below the proposal decides nothing.
        assert!(w
            .committed(LogOffset(15), Epoch(4), LogOffset(20))
            .is_empty());
        assert_eq!(w.len(), 1);
    }

    /// Deadlines expire in order and only once; draining empties both indexes.
    #[test]
    fn deadlines_expire_in_order() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut w = WaitingProposals::default();
        w.insert(pid(1, 0, 1), t + ms(30), "late");
        w.insert(pid(1, 1, 2), t + ms(10), "early");
        w.insert(pid(1, 2, 3), t + ms(20), "middle");
        assert_eq!(w.next_deadline(), Some(t + ms(10)));
        assert!(w.expire(t).is_empty());
        assert_eq!(w.expire(t + ms(20)), vec!["early", "middle"]);
        assert_eq!(w.next_deadline(), Some(t + ms(30)));
        // The expired ones are gone: their batches committing decide only the rest.
        assert_eq!(
            w.committed(LogOffset(0), Epoch(1), LogOffset(1)),
            vec![("late", true)]
        );
        assert!(w.committed(LogOffset(1), Epoch(1), LogOffset(3)).is_empty());
        w.insert(pid(1, 3, 4), t, "x");
        assert_eq!(w.drain(), vec!["x"]);
        assert!(w.is_empty() && w.next_deadline().is_none());
    }

    /// Leader hints come from each voter's endpoint on the named listener.
    #[test]
    fn leader_endpoints_use_the_listener() {
        use corum_raft::{Endpoint, ReplicaKey, Voter};
        use corum_types::Uuid;
        let voter = |id: u32, listener: &str| Voter {
            key: ReplicaKey {
                id: NodeId(id),
                directory_id: Uuid([id as u8; 16]),
            },
            endpoints: vec![Endpoint {
                listener: listener.into(),
                host: format!("10.0.0.{id}"),
                port: 9093,
            }],
        };
        let voters = VoterSet::new(vec![voter(1, "CONTROLLER"), voter(2, "OTHER")]).unwrap();
        assert_eq!(
            leader_endpoints(&voters, "CONTROLLER"),
            vec![LeaderHint {
                id: NodeId(1),
                host: "10.0.0.1".into(),
                port: 9093
            }]
        );
    }

    /// A committed batch that is not a record batch, or whose header miscounts its records,
    /// stops replay with an error naming the offset; a good one replays.
    #[test]
    fn committed_batches_are_validated() {
        use corum_controller::records::{FeatureLevelRecordV1, MetadataRecord};
        use corum_controller::ControllerConfig;
        let mut c = Controller::new(ControllerConfig::default(), NodeId(1)).unwrap();
        let batch = |payload: &[u8], count: u32| CommittedBatch {
            base_offset: LogOffset(3),
            epoch: Epoch(1),
            record_count: count,
            control: false,
            payload: Payload::from(payload),
            snapshot: false,
        };
        assert!(matches!(
            replay_committed(&mut c, &batch(b"not a batch", 1)),
            Err(ServiceError::Decode {
                offset: LogOffset(3),
                ..
            })
        ));
        let records = vec![MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
            name: "metadata.version".into(),
            min_level: 1,
            max_level: 1,
        })];
        let encoded = encode_batch(&records);
        assert!(matches!(
            replay_committed(&mut c, &batch(&encoded, 2)),
            Err(ServiceError::RecordCount {
                header: 2,
                decoded: 1,
                ..
            })
        ));
        assert_eq!(c.committed_end(), LogOffset(0));
        replay_committed(&mut c, &batch(&encoded, 1)).unwrap();
        assert_eq!(c.committed_end(), LogOffset(4));
    }
}
