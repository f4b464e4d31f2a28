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

use corum_raft::{Payload, ProposalId};
use corum_runtime::channel::{LinkReceiver, LinkSender, Receiver, Sender};
use corum_types::LogOffset;
use futures_lite::future::poll_once;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};

use crate::driver::calls::CallId;
use crate::driver::{CommittedBatch, DriverStatus};
use crate::protocol::{RequestFrame, ResponseBody, RpcError};
use crate::service::ServiceStatus;

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
