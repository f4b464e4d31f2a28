//! The link between the worker shard (Raft driver, log, peer network, RPC server) and the
//! controller shard (the [`ControllerService`](crate::ControllerService) alone on its core).
//!
//! Each side gets the handle it would have if the other side ran on its own shard: the
//! controller shard a [`RaftHandle`] and a receiver of [`CommittedBatch`]es, the worker shard a
//! [`ControllerServiceHandle`]. Bridge tasks on both sides carry the traffic over three bounded
//! cross-shard channels, moving *batches* per wake-up (a cross-shard wake-up costs tens of
//! microseconds here; one per request would cap the node's throughput):
//!
//! | channel        | direction            | carries                                          | batched |
//! |----------------|----------------------|--------------------------------------------------|---------|
//! | commits        | worker → controller  | committed batches, in log order                  | every batch ready at once |
//! | control        | worker → controller  | driver status, proposal results, client requests | requests ready at once |
//! | down           | controller → worker  | proposals, client answers, snapshot offers       | answers ready at once |
//!
//! Committed batches have a channel of their own because they are the only traffic with
//! back-pressure that may wait on the service: the service, in turn, waits for proposal
//! results, which therefore never queue behind commits (no cycle, no deadlock).
//!
//! # Answers released at commit
//!
//! A proposing request's success answer goes down with its proposal ([`GatedAnswer`], by the
//! call's id on the worker side); the worker side hands it to its driver with the call's
//! [`AnswerSlot`], and the driver sends it the moment the batch commits
//! ([`crate::answer_gate`]) — before the batch is read back and crosses to the controller
//! shard, saving the two cross-shard hops (commit up, answer down) that would otherwise follow
//! the commit: measured here about 60-70 µs each. The service still decides everything else
//! (a batch lost to a leader change, a deadline, a resignation) and its answers still come
//! down; the controller side drops only its own success answers of gated calls. Whichever
//! answer reaches the call first is sent.
//!
//! Ends: the worker side stops when the driver's commit stream ends (the driver stopped) or
//! the controller side goes away; dropping its senders closes the controller's commit stream,
//! and the service then stops as it does when a local driver stops. Requests still waiting on
//! a side that is gone are answered `NotController` by the handles themselves (their reply
//! channels close).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

use corum_raft::{Payload, ProposalId};
use corum_runtime::channel::{LinkReceiver, LinkSender, Receiver, Sender};
use corum_types::LogOffset;
use futures_lite::future::{or, poll_once};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};

use crate::answer_gate::{AnswerSlot, Gated, HeldAnswer, Registry};
use crate::controller_service::{Call, ControllerServiceHandle, ServiceStatus};
use crate::error::DriverError;
use crate::protocol::{RequestFrame, ResponseFrame};
use crate::raft_driver::{
    Answers, CommittedBatch, DriverStatus, Proposal, RaftHandle, SnapshotOffer,
};

/// Most items moved per cross-shard message.
const BATCH_MAX: usize = 512;
/// Messages queued on each cross-shard channel.
const CHANNEL_CAPACITY: usize = 256;
/// The driver's status goes to the controller side at once when its role, epoch, leader,
/// high watermark or running flag changes ([`RaftHandle::watch_status`]), and every
/// `STATUS_REFRESH_MS` otherwise.
const STATUS_REFRESH_MS: u64 = 50;

/// Where a proposal's result goes on the controller side.
type ProposalReply = LocalSender<Result<ProposalId, DriverError>>;

/// Worker → controller control traffic.
pub enum ToController {
    Status(Box<DriverStatus>),
    Proposed {
        id: u64,
        result: Result<ProposalId, DriverError>,
    },
    Calls(Vec<(u64, RequestFrame)>),
}

/// Controller → worker traffic.
pub enum ToWorker {
    Propose {
        id: u64,
        payload: Payload,
        record_count: u32,
        gated: Vec<GatedAnswer>,
    },
    Answers(Vec<(u64, ResponseFrame)>),
    /// A snapshot of the state machine for the driver ([`RaftHandle::offer_snapshot`]).
    Snapshot {
        end_offset: LogOffset,
        data: Payload,
    },
    /// The service's status (for metrics and tools on the worker), every
    /// `SERVICE_STATUS_REFRESH_MS` (500 ms).
    ServiceStatus(Box<ServiceStatus>),
}

/// A success answer that travels with its proposal over the bridge, to the call with this id
/// on the worker side; there the driver sends it once the batch commits (see the module doc).
pub type GatedAnswer = Gated<u64>;

/// How often the controller side sends the service's status to the worker.
const SERVICE_STATUS_REFRESH_MS: u64 = 500;

/// The unconnected ends of the worker side. `Send`: created before the shards start.
pub struct WorkerEnds {
    commits: LinkSender<Vec<CommittedBatch>>,
    control: LinkSender<ToController>,
    down: LinkReceiver<ToWorker>,
}

/// The unconnected ends of the controller side. `Send`.
pub struct ControllerEnds {
    commits: LinkReceiver<Vec<CommittedBatch>>,
    control: LinkReceiver<ToController>,
    down: LinkSender<ToWorker>,
}

/// Creates the three channels.
pub fn channels() -> (WorkerEnds, ControllerEnds) {
    let new = "bridge channel capacity is within the runtime's limit";
    let (commits_tx, commits_rx) = corum_runtime::channel::bounded(CHANNEL_CAPACITY).expect(new);
    let (control_tx, control_rx) = corum_runtime::channel::bounded(CHANNEL_CAPACITY).expect(new);
    let (down_tx, down_rx) = corum_runtime::channel::bounded(CHANNEL_CAPACITY).expect(new);
    (
        WorkerEnds {
            commits: commits_tx,
            control: control_tx,
            down: down_rx,
        },
        ControllerEnds {
            commits: commits_rx,
            control: control_rx,
            down: down_tx,
        },
    )
}

/// Takes everything ready on `rx` after `first`, up to [`BATCH_MAX`] items, without waiting.
async fn batch_from<T>(rx: &LocalReceiver<T>, first: T) -> Vec<T> {
    let mut items = vec![first];
    while items.len() < BATCH_MAX {
        match poll_once(rx.recv()).await {
            Some(Some(item)) => items.push(item),
            _ => break,
        }
    }
    items
}

impl WorkerEnds {
    /// Connects the worker side and starts its tasks: returns the service handle the RPC
    /// server uses. `raft` and `commits` come from [`crate::RaftDriver::start`]. The tasks end
    /// once the commit stream ends and the controller side is gone.
    pub async fn connect(
        self,
        raft: RaftHandle,
        commits: LocalReceiver<CommittedBatch>,
        request_queue_capacity: usize,
    ) -> ControllerServiceHandle {
        let commits_tx = self.commits.connect().await;
        let control = Rc::new(self.control.connect().await);
        let down = self.down.connect().await;
        let (handle, calls, service_status) = ControllerServiceHandle::detached(
            ServiceStatus::remote(),
            request_queue_capacity.max(1),
        );
        let replies: Registry = Rc::default();
        glommio::spawn_local(forward_commits(commits, commits_tx)).detach();
        glommio::spawn_local(forward_status(raft.clone(), control.clone())).detach();
        glommio::spawn_local(forward_calls(calls, control.clone(), replies.clone())).detach();
        glommio::spawn_local(serve_down(down, raft, control, replies, service_status)).detach();
        handle
    }
}

async fn forward_commits(commits: LocalReceiver<CommittedBatch>, tx: Sender<Vec<CommittedBatch>>) {
    while let Some(first) = commits.recv().await {
        let batch = batch_from(&commits, first).await;
        if tx.send(batch).await.is_err() {
            return;
        }
    }
    // Dropping `tx` ends the controller's commit stream: the service stops.
}

async fn forward_status(raft: RaftHandle, control: Rc<Sender<ToController>>) {
    let changed = raft.watch_status();
    loop {
        let now = raft.status();
        let running = now.running;
        if control
            .send(ToController::Status(Box::new(now)))
            .await
            .is_err()
            || !running
        {
            return;
        }
        // At once on a change that matters; otherwise a refresh now and then (replication
        // progress, log ends).
        let refresh = glommio::timer::sleep(Duration::from_millis(STATUS_REFRESH_MS));
        or(
            async {
                if changed.recv().await.is_none() {
                    // The driver is gone; its last status (not running) was kicked before.
                    std::future::pending::<()>().await;
                }
            },
            refresh,
        )
        .await;
    }
}

async fn forward_calls(
    calls: LocalReceiver<Call>,
    control: Rc<Sender<ToController>>,
    replies: Registry,
) {
    let mut next_id = 0u64;
    while let Some(first) = calls.recv().await {
        let batch = batch_from(&calls, first).await;
        let mut frames = Vec::with_capacity(batch.len());
        for call in batch {
            next_id += 1;
            AnswerSlot::registered(call.reply, &replies, next_id);
            frames.push((next_id, call.frame));
        }
        if let Err(ToController::Calls(lost)) = control.send(ToController::Calls(frames)).await {
            // The controller side is gone: closing the reply channels answers NotController.
            for (id, _) in lost {
                let slot = replies.borrow_mut().remove(&id);
                if let Some(slot) = slot {
                    slot.abandon();
                }
            }
        }
    }
}

async fn serve_down(
    down: Receiver<ToWorker>,
    raft: RaftHandle,
    control: Rc<Sender<ToController>>,
    replies: Registry,
    service_status: Rc<RefCell<ServiceStatus>>,
) {
    // Proposals go to the driver in arrival order, one at a time (the service proposes one
    // batch at a time anyway), so a queue-full wait never reorders them.
    let (propose_tx, proposals) =
        local_channel::new_unbounded::<(u64, Payload, u32, Vec<HeldAnswer>)>();
    let offers = raft.clone();
    let proposer = {
        let control = control.clone();
        glommio::spawn_local(async move {
            while let Some((id, payload, record_count, held)) = proposals.recv().await {
                let answers = Answers {
                    routed: Vec::new(),
                    held,
                };
                let result = raft.propose_with(payload, record_count, answers).await;
                if control
                    .send(ToController::Proposed { id, result })
                    .await
                    .is_err()
                {
                    return;
                }
            }
        })
    };
    while let Some(message) = down.recv().await {
        match message {
            ToWorker::Propose {
                id,
                payload,
                record_count,
                gated,
            } => {
                // Each answer goes to its call's slot (a call already answered, say by a
                // deadline, has left the registry: nothing to hold).
                let held = {
                    let replies = replies.borrow();
                    gated
                        .into_iter()
                        .filter_map(|g| {
                            let slot = replies.get(&g.to)?.clone();
                            Some(g.to(slot))
                        })
                        .collect()
                };
                let _ = propose_tx.try_send((id, payload, record_count, held));
            }
            ToWorker::ServiceStatus(status) => *service_status.borrow_mut() = *status,
            ToWorker::Snapshot { end_offset, data } => {
                // A full queue drops it: the service offers a newer one later.
                let _ = offers.offer_snapshot(end_offset, data);
            }
            ToWorker::Answers(answers) => {
                for (id, answer) in answers {
                    let slot = replies.borrow_mut().remove(&id);
                    if let Some(slot) = slot {
                        slot.send(answer);
                    }
                }
            }
        }
    }
    drop(propose_tx);
    proposer.await;
    // The controller side is gone: callers still waiting get NotController (the driver may
    // still hold their slots).
    let slots: Vec<AnswerSlot> = replies.borrow_mut().drain().map(|(_, s)| s).collect();
    for slot in slots {
        slot.abandon();
    }
}

/// The controller side, connected: the handle and commit stream for the service, and the
/// tasks to start once the service exists ([`ControllerSide::run`]).
pub struct ControllerSide {
    commits: Receiver<Vec<CommittedBatch>>,
    control: Receiver<ToController>,
    down: Rc<Sender<ToWorker>>,
    proposals: LocalReceiver<Proposal>,
    snapshot_offers: LocalReceiver<SnapshotOffer>,
    /// The handle the service got (its status is set from the worker's reports).
    raft: RaftHandle,
    commit_tx: LocalSender<CommittedBatch>,
}

impl ControllerEnds {
    /// Connects the controller side: returns the [`RaftHandle`] and commit stream to build the
    /// service with, and the side to [`run`](ControllerSide::run) with the service's handle.
    /// `initial` is the driver's status before the first update arrives.
    pub async fn connect(
        self,
        initial: DriverStatus,
        commit_queue_capacity: usize,
    ) -> (ControllerSide, RaftHandle, LocalReceiver<CommittedBatch>) {
        let commits = self.commits.connect().await;
        let control = self.control.connect().await;
        let down = Rc::new(self.down.connect().await);
        let (raft, proposals, snapshot_offers) = RaftHandle::detached(initial, 64);
        let (commit_tx, commit_rx) = local_channel::new_bounded(commit_queue_capacity.max(1));
        (
            ControllerSide {
                commits,
                control,
                down,
                proposals,
                snapshot_offers,
                raft: raft.clone(),
                commit_tx,
            },
            raft,
            commit_rx,
        )
    }
}

impl ControllerSide {
    /// Carries the traffic until the worker side goes away (its commit stream ends).
    pub async fn run(self, service: ControllerServiceHandle) {
        let ControllerSide {
            commits,
            control,
            down,
            proposals,
            snapshot_offers,
            raft,
            commit_tx,
        } = self;
        let waiting: Rc<RefCell<HashMap<u64, ProposalReply>>> = Rc::default();
        // Calls whose success answer went down with their proposal: the worker sends it.
        let gated_routes: Rc<RefCell<HashSet<u64>>> = Rc::default();
        let (answer_tx, answers) = local_channel::new_unbounded::<(u64, ResponseFrame)>();
        let answer_tx = Rc::new(answer_tx);
        let commit_pump = glommio::spawn_local(async move {
            while let Some(batches) = commits.recv().await {
                for b in batches {
                    if commit_tx.send(b).await.is_err() {
                        return;
                    }
                }
            }
            // Dropping commit_tx ends the service's commit stream.
        });
        let propose_pump = {
            let (down, waiting, gated_routes) =
                (down.clone(), waiting.clone(), gated_routes.clone());
            glommio::spawn_local(async move {
                let mut next_id = 0u64;
                while let Some(p) = proposals.recv().await {
                    next_id += 1;
                    waiting.borrow_mut().insert(next_id, p.reply);
                    debug_assert!(
                        p.answers.held.is_empty(),
                        "calls on the controller shard come over the bridge"
                    );
                    gated_routes
                        .borrow_mut()
                        .extend(p.answers.routed.iter().map(|g| g.to));
                    let sent = down
                        .send(ToWorker::Propose {
                            id: next_id,
                            payload: p.payload,
                            record_count: p.record_count,
                            gated: p.answers.routed,
                        })
                        .await;
                    if sent.is_err() {
                        // The worker is gone: the proposer's reply channel closes (Stopped).
                        waiting.borrow_mut().remove(&next_id);
                    }
                }
            })
            .detach()
        };
        let snapshot_pump = {
            let down = down.clone();
            glommio::spawn_local(async move {
                while let Some(o) = snapshot_offers.recv().await {
                    let offer = ToWorker::Snapshot {
                        end_offset: o.end_offset,
                        data: o.data,
                    };
                    if down.send(offer).await.is_err() {
                        return;
                    }
                }
            })
            .detach()
        };
        let status_pump = {
            let (down, service) = (down.clone(), service.clone());
            glommio::spawn_local(async move {
                loop {
                    let status = Box::new(service.status());
                    if down.send(ToWorker::ServiceStatus(status)).await.is_err() {
                        return;
                    }
                    glommio::timer::sleep(Duration::from_millis(SERVICE_STATUS_REFRESH_MS)).await;
                }
            })
            .detach()
        };
        let answer_pump = {
            let down = down.clone();
            glommio::spawn_local(async move {
                while let Some(first) = answers.recv().await {
                    let batch = batch_from(&answers, first).await;
                    if down.send(ToWorker::Answers(batch)).await.is_err() {
                        return;
                    }
                }
            })
            .detach()
        };
        // The worker's commit stream ends when its driver stops: then so does this side
        // (the control channel may stay open while the worker still answers in-flight calls).
        let control_loop = async {
            while let Some(message) = control.recv().await {
                match message {
                    ToController::Status(s) => raft.publish_status(*s),
                    ToController::Proposed { id, result } => {
                        if let Some(reply) = waiting.borrow_mut().remove(&id) {
                            let _ = reply.try_send(result);
                        }
                    }
                    ToController::Calls(calls) => {
                        for (id, frame) in calls {
                            let (service, answer_tx, gated_routes) =
                                (service.clone(), answer_tx.clone(), gated_routes.clone());
                            glommio::spawn_local(async move {
                                let answer = service.call_routed(frame, Some(id)).await;
                                let gated = gated_routes.borrow_mut().remove(&id);
                                if gated && answer.body.is_ok() {
                                    // The worker released it when the batch committed.
                                    return;
                                }
                                let _ = answer_tx.try_send((id, answer));
                            })
                            .detach();
                        }
                    }
                }
            }
        };
        or(commit_pump, control_loop).await;
        let mut last = raft.status();
        last.running = false;
        raft.publish_status(last);
        waiting.borrow_mut().clear();
        drop(propose_pump);
        drop(answer_pump);
        drop(status_pump);
        drop(snapshot_pump);
    }
}
