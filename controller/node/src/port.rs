//! The one boundary between the controller service and the Raft driver: two message types
//! over one port.
//!
//! | message                  | from → to         | carries                                                    |
//! |--------------------------|-------------------|------------------------------------------------------------|
//! | [`ToService::Calls`]     | driver → service  | client requests, in arrival order, by their [`CallId`]      |
//! | [`ToService::Committed`] | driver → service  | committed batches (and snapshots to load), in log order    |
//! | [`ToService::Status`]    | driver → service  | the driver's status, when leadership, the high watermark or the log end moved |
//! | [`ToService::Refused`]   | driver → service  | a proposal the driver did not append where predicted       |
//! | [`ToDriver::Propose`]    | service → driver  | one batch at its predicted offsets, with the success answers of its calls |
//! | [`ToDriver::Answers`]    | service → driver  | the service's verdicts (errors, reads): sent at once       |
//! | [`ToDriver::Snapshot`]   | service → driver  | a snapshot of the committed state to store                 |
//! | [`ToDriver::Status`]     | service → driver  | the service's status, for metrics and tools on the driver's shard |
//!
//! Every call lives in the driver's table ([`crate::calls`]) on the shard that owns its
//! connection, and gets exactly one answer there: the service never holds a reply channel.
//! The service proposes without waiting (it predicts each batch's offsets; the driver appends
//! a batch only where predicted, else refuses it and every batch after it until the service
//! has caught up), so nothing on the controller's shard waits for a round trip.
//!
//! When the service and the driver share a shard the port is a pair of local channels
//! ([`local`]); otherwise a pair of bounded cross-shard channels ([`cross_shard`]). That is
//! the only difference between the placements. Both are bounded: a full port makes its
//! sender wait (the publisher, the call forwarder, the service), which pushes back to the
//! connections' readers and, through TCP, to clients.

use corum_controller::MetadataImage;
use std::sync::Arc;

use corum_raft::{Payload, ProposalId, ReplicaProgress, Role, SnapshotId, Stats, Status, VoterSet};
use corum_runtime::channel::{LinkReceiver, LinkSender, Receiver, Sender};
use corum_types::{Epoch, LogOffset, NodeId};
use futures_lite::future::poll_once;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};

use crate::calls::CallId;
use crate::histogram::LatencyHistogram;
use crate::protocol::{RequestFrame, ResponseBody, RpcError};

/// Most items one message carries (calls, batches, answers).
pub const ITEMS_PER_MESSAGE_MAX: usize = 512;

/// Messages a node's port queues each way.
pub const CAPACITY: usize = 256;

/// One client request at the service.
#[derive(Debug)]
pub struct Call {
    pub id: CallId,
    pub frame: RequestFrame,
}

/// Why the driver did not append a proposal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// This node does not lead the proposal's epoch (any more).
    NotLeader,
    /// The log ends elsewhere than the proposal's predicted base.
    Elsewhere,
    /// The core refused the batch (too large, too many uncommitted records, ...).
    Core,
}

/// Driver → service.
#[derive(Debug)]
pub enum ToService {
    Calls(Vec<Call>),
    Committed(Vec<CommittedBatch>),
    Status(Box<DriverStatus>),
    /// `batch` was not appended; the log ended at `log_end` then (everything the service
    /// proposed before it that was appended ends there or before).
    Refused {
        batch: ProposalId,
        activation: u64,
        log_end: LogOffset,
        reason: Refusal,
    },
}

/// One batch the service proposes, at the offsets it predicted.
#[derive(Debug)]
pub struct Proposal {
    pub batch: ProposalId,
    /// The service's activation that proposed it: after refusing one proposal the driver
    /// refuses every later one of the same activation (their records were built on it).
    pub activation: u64,
    pub payload: Payload,
    pub record_count: u32,
    /// The success answers of the calls whose records are in the batch: released when it
    /// commits as predicted.
    pub answers: Vec<(CallId, ResponseBody)>,
}

/// Service → driver.
#[derive(Debug)]
pub enum ToDriver {
    Propose(Proposal),
    Answers(Vec<(CallId, Result<ResponseBody, RpcError>)>),
    Snapshot {
        end_offset: LogOffset,
        data: Payload,
    },
    Status(Box<ServiceStatus>),
}

/// A committed batch, in log order, as the state machine consumes it. The payload is copied
/// out of the log's read buffer once, into a shared allocation that may cross shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedBatch {
    pub base_offset: LogOffset,
    pub epoch: Epoch,
    pub record_count: u32,
    /// Raft control records (LeaderChange, VotersRecord, ...) rather than state-machine
    /// records.
    pub control: bool,
    pub payload: Payload,
    /// Not a batch of the log but a snapshot (KIP-630) of the state machine through
    /// `base_offset`, which replaces the consumer's state: `payload` is the snapshot's data,
    /// `epoch` its epoch, `record_count` 0 (so `end_offset` is the snapshot's end). It comes
    /// first when the node starts from a snapshot, and when a follower installs the leader's;
    /// the batches after it continue from its end.
    pub snapshot: bool,
}

impl CommittedBatch {
    /// The offset after the batch's last record.
    pub fn end_offset(&self) -> LogOffset {
        self.base_offset.add(u64::from(self.record_count))
    }

    /// The item that loads snapshot `id` with `data` (see [`CommittedBatch::snapshot`]).
    pub fn load_snapshot(id: SnapshotId, data: Payload) -> CommittedBatch {
        CommittedBatch {
            base_offset: id.end_offset,
            epoch: id.epoch,
            record_count: 0,
            control: false,
            payload: data,
            snapshot: true,
        }
    }
}

/// What the driver shows: the core's status plus the log's view and whether it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverStatus {
    pub raft: Status,
    /// The core's counters (elections, truncations, ...).
    pub stats: Stats,
    /// The log's end offset and durable end (as the driver last saw them).
    pub log_end_offset: LogOffset,
    pub log_durable_end: LogOffset,
    /// Group-commit rounds completed (fsync rounds of the log).
    pub sync_rounds: u64,
    /// How long the rounds took: the write of everything appended since the last round,
    /// then fdatasync, or one O_DSYNC write for a small round (the disk's part of every commit;
    /// etcd calls it the WAL fsync duration).
    pub sync_duration: LatencyHistogram,
    /// False once [`crate::driver::RaftDriver::run`] has returned.
    pub running: bool,
    /// On the leader, every voter's and fetching observer's progress
    /// ([`corum_raft::RaftCore::replica_progress`]); empty otherwise.
    pub replicas: Vec<ReplicaProgress>,
    /// The core's clock when the status was taken (the clock of `replicas`' times).
    pub now_ms: u64,
    /// The voter set in force ([`corum_raft::RaftCore::voter_set`]: ids, directory ids,
    /// endpoints), shared: a new one is made only when the set changes.
    pub voter_set: Arc<VoterSet>,
    /// Calls waiting for an answer, and those of them whose success waits for a commit.
    pub calls_waiting: usize,
    pub calls_held: usize,
    /// Proposals of the service this driver appended, and those it refused (not the leader
    /// of their epoch, not at the log end, an earlier one of their activation refused).
    pub proposals_appended: u64,
    pub proposals_refused: u64,
    /// The newest durable snapshot's end offset (0: none yet): the log may be deleted below.
    pub snapshot_end_offset: LogOffset,
    /// Snapshots of the state machine this driver wrote (installs from the leader are in
    /// `stats.snapshots_installed`).
    pub snapshots_written: u64,
}

impl DriverStatus {
    /// What is known of a driver before it reports: nothing, running.
    pub fn starting() -> DriverStatus {
        DriverStatus {
            raft: Status {
                role: Role::Unattached,
                epoch: Epoch::ZERO,
                leader: None,
                voted_for: None,
                high_watermark: LogOffset::ZERO,
                log_start_offset: LogOffset::ZERO,
                log_end_offset: LogOffset::ZERO,
                durable_end_offset: LogOffset::ZERO,
                voters: Vec::new(),
                is_voter: false,
                kraft_version: 0,
            },
            stats: Stats::default(),
            log_end_offset: LogOffset::ZERO,
            log_durable_end: LogOffset::ZERO,
            sync_rounds: 0,
            sync_duration: LatencyHistogram::default(),
            running: true,
            replicas: Vec::new(),
            now_ms: 0,
            voter_set: Arc::default(),
            calls_waiting: 0,
            calls_held: 0,
            proposals_appended: 0,
            proposals_refused: 0,
            snapshot_end_offset: LogOffset::ZERO,
            snapshots_written: 0,
        }
    }
}

impl DriverStatus {
    /// True if this replica (`me`) leads its epoch and accepts proposals.
    pub fn is_leader(&self, me: NodeId) -> bool {
        self.raft.role == Role::Leader && self.raft.leader == Some(me)
    }
}

/// Registered brokers by state (`corum_brokers{state}`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BrokerCounts {
    pub active: u64,
    pub fenced: u64,
    pub shutting_down: u64,
}

impl BrokerCounts {
    /// The brokers of `image` by state.
    pub fn of(image: &MetadataImage) -> BrokerCounts {
        let mut counts = BrokerCounts::default();
        for b in image.brokers.iter() {
            if b.fenced {
                counts.fenced += 1;
            } else if b.in_controlled_shutdown {
                counts.shutting_down += 1;
            } else {
                counts.active += 1;
            }
        }
        counts
    }
}

/// What the service shows (on its own shard, and sent to the driver's shard for metrics).
#[derive(Clone, Debug)]
pub struct ServiceStatus {
    /// The epoch this node is the active controller of, if it is.
    pub active_epoch: Option<Epoch>,
    /// The offset after the last committed batch replayed (the high watermark handlers see).
    pub committed_end: LogOffset,
    /// The offset the next proposal will get (meaningful while active).
    pub next_offset: LogOffset,
    /// Topics and partitions in the committed image.
    pub topics: usize,
    pub partitions: usize,
    /// Registered brokers by state in the committed image, as of the last status the service
    /// sent the driver (counting walks every broker: not done after every event).
    pub brokers: BrokerCounts,
    /// The committed image through `committed_end`, only where the service was asked to
    /// publish it ([`crate::ControllerServiceConfig::publish_committed_image`]: tests and
    /// embedders that read it). Taken after every event, the copy would share the image's
    /// paths with the controller, so that its next replay copies every path it touches and the
    /// copy's drop frees the old ones: a node does not keep one.
    pub committed_image: Option<MetadataImage>,
    /// Reads waiting for records in flight to be replayed.
    pub waiting_requests: usize,
    /// Times this node became the active controller.
    pub activations: u64,
    /// Batches proposed, and the requests whose records they carried (several requests that
    /// arrive together share one batch).
    pub proposals: u64,
    pub proposed_requests: u64,
    /// A proposal's sending to the driver → its replay here (the state machine's lag behind
    /// the commit, plus the commit).
    pub replay_latency: LatencyHistogram,
    /// False once [`crate::service::ControllerService::run`] has returned.
    pub running: bool,
}

impl ServiceStatus {
    /// What is known of a service before it reports: nothing, running.
    pub fn starting() -> ServiceStatus {
        ServiceStatus {
            active_epoch: None,
            committed_end: LogOffset::ZERO,
            next_offset: LogOffset::ZERO,
            topics: 0,
            partitions: 0,
            brokers: BrokerCounts::default(),
            committed_image: None,
            waiting_requests: 0,
            activations: 0,
            proposals: 0,
            proposed_requests: 0,
            replay_latency: LatencyHistogram::default(),
            running: true,
        }
    }
}

/// The sending half of one direction of a port.
pub enum PortSender<T: Send + 'static> {
    Local(LocalSender<T>),
    Remote(Sender<T>),
}

/// The receiving half of one direction of a port.
pub enum PortReceiver<T: Send + 'static> {
    Local(LocalReceiver<T>),
    Remote(Receiver<T>),
}

impl<T: Send + 'static> PortSender<T> {
    /// Sends `msg`, waiting while the port is full; `Err` gives it back when the other end is
    /// gone.
    pub async fn send(&self, msg: T) -> Result<(), T> {
        match self {
            PortSender::Local(tx) => tx.send(msg).await.map_err(|e| match e {
                glommio::GlommioError::Closed(glommio::ResourceType::Channel(m)) => m,
                glommio::GlommioError::WouldBlock(glommio::ResourceType::Channel(m)) => m,
                other => panic!("a local channel send fails only when closed: {other}"),
            }),
            PortSender::Remote(tx) => tx.send(msg).await,
        }
    }

    /// Sends `msg` if there is room now; drops it otherwise (for a last word on the way
    /// out, when waiting could block a stop).
    pub fn try_send(&self, msg: T) {
        match self {
            PortSender::Local(tx) => drop(tx.try_send(msg)),
            PortSender::Remote(tx) => drop(tx.try_send(msg)),
        }
    }
}

impl<T: Send + 'static> PortReceiver<T> {
    /// The next message; `None` once the other end is gone and the port is empty.
    pub async fn recv(&self) -> Option<T> {
        match self {
            PortReceiver::Local(rx) => rx.recv().await,
            PortReceiver::Remote(rx) => rx.recv().await,
        }
    }

    /// A message if one is ready now.
    pub async fn ready(&self) -> Option<T> {
        poll_once(self.recv()).await.flatten()
    }
}

/// The service's end: it sends [`ToDriver`] and receives [`ToService`].
pub struct ServiceEnd {
    pub tx: PortSender<ToDriver>,
    pub rx: PortReceiver<ToService>,
}

/// The driver's end: it sends [`ToService`] and receives [`ToDriver`].
pub struct DriverEnd {
    pub tx: PortSender<ToService>,
    pub rx: PortReceiver<ToDriver>,
}

/// A port whose two ends live on one shard, `capacity` messages each way.
pub fn local(capacity: usize) -> (ServiceEnd, DriverEnd) {
    let (to_driver, from_service) = local_channel::new_bounded(capacity.max(1));
    let (to_service, from_driver) = local_channel::new_bounded(capacity.max(1));
    (
        ServiceEnd {
            tx: PortSender::Local(to_driver),
            rx: PortReceiver::Local(from_driver),
        },
        DriverEnd {
            tx: PortSender::Local(to_service),
            rx: PortReceiver::Local(from_service),
        },
    )
}

/// The service's end of a cross-shard port, before its shard connects it. `Send`.
pub struct ServiceLink {
    to_driver: LinkSender<ToDriver>,
    from_driver: LinkReceiver<ToService>,
}

/// The driver's end of a cross-shard port, before its shard connects it. `Send`.
pub struct DriverLink {
    from_service: LinkReceiver<ToDriver>,
    to_service: LinkSender<ToService>,
}

/// A port between two shards, `capacity` messages each way (each message carries up to
/// [`ITEMS_PER_MESSAGE_MAX`] items, so a cross-shard wake-up moves a batch).
pub fn cross_shard(capacity: usize) -> (ServiceLink, DriverLink) {
    let new = "port capacity is within the runtime's limit";
    let (to_driver, from_service) = corum_runtime::channel::bounded(capacity.max(1)).expect(new);
    let (to_service, from_driver) = corum_runtime::channel::bounded(capacity.max(1)).expect(new);
    (
        ServiceLink {
            to_driver,
            from_driver,
        },
        DriverLink {
            from_service,
            to_service,
        },
    )
}

// Both ends connect the service→driver channel first, then the other: `connect` waits for
// the far end, so the same order on both sides cannot deadlock.
impl ServiceLink {
    /// Connects on the service's shard (waits for the driver's shard to connect too).
    pub async fn connect(self) -> ServiceEnd {
        let tx = self.to_driver.connect().await;
        let rx = self.from_driver.connect().await;
        ServiceEnd {
            tx: PortSender::Remote(tx),
            rx: PortReceiver::Remote(rx),
        }
    }
}

impl DriverLink {
    /// Connects on the driver's shard (waits for the service's shard to connect too).
    pub async fn connect(self) -> DriverEnd {
        let rx = self.from_service.connect().await;
        let tx = self.to_service.connect().await;
        DriverEnd {
            tx: PortSender::Remote(tx),
            rx: PortReceiver::Remote(rx),
        }
    }
}
