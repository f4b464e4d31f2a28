//! The Raft driver: one [`RaftCore`] wired to a real metadata log ([`Log`] over [`UringDisk`]),
//! the `quorum-state` file and the [`PeerNetwork`], on one glommio shard — the shard that owns
//! the client connections, so it also keeps the table of calls waiting for an answer
//! ([`crate::calls`]) and the driver's end of the port to the controller service ([`crate::port`],
//! `service_link`).
//!
//! # Model
//!
//! [`RaftDriver::start`] recovers what is on disk and builds the core; [`RaftDriver::run`] is
//! the event loop. It owns the core alone (no other task touches it) and feeds it:
//!
//! | input                                    | core call                    |
//! |------------------------------------------|------------------------------|
//! | the tick timer (`tick_interval_ms`)      | `tick(now_ms)` (monotonic clock read here) |
//! | a checked message from the peer inbox    | `step(from, message)`        |
//! | a peer the inbox reports gone (its listener refuses: [`crate::peer`]) | `peer_unreachable(peer)` |
//! | a proposal of the service ([`crate::port::ToDriver::Propose`]) | `propose(payload, count)` if this node leads its epoch, the log ends at its predicted base and no earlier proposal of its activation was refused; its calls' success answers then wait in the table; else refused ([`crate::port::ToService::Refused`]) |
//! | a group-commit round of the log finished | `persisted(end, epoch)`      |
//! | a snapshot offered by the state machine ([`crate::port::ToDriver::Snapshot`]) | `snapshot_at(end)` (its id and voters); once it is durable and the whole segments below it outgrow `log_retention_bytes`, `snapshot_created(end, data)` |
//! | the shutdown signal                      | `resign()` if leader, then stop |
//!
//! After every input it drains [`RaftCore::ready`] and carries out each [`corum_raft::Ready`] in
//! the order the contract gives: (1) quorum state written and fsynced before any message, (2)
//! a snapshot from the leader installed (durable in the [`snapshot_store`] first; then the log
//! restarts at its end and the publisher hands it to the consumer before anything else), (3)
//! `truncate_suffix` before the new entries (durable when it returns), (4) entries appended to
//! the log's memory and the syncer kicked, (5) messages sent at once — appends to followers
//! leave before this node's own fsync (pipelining), (6) the high watermark handed to the
//! publisher (kicked before the sends of (5): they do not depend on each other, and the commit
//! should not wait for the sends), after the table released the answers it decides ([`crate::calls`];
//! then the status is published and the loop yields once, so the callers' connection writers
//! run before the sends), (7) the log prefix below the log start deleted, (8) reads served
//! from the log. After each round the table answers held calls of an epoch this node no longer
//! leads (`NotController`) and calls past their deadline (`Timeout`).
//!
//! # Helper tasks
//!
//! - **syncer**: waits for a kick, runs [`Log::flush_now`] (one group-commit round covering every
//!   batch appended so far; batches appended while it runs ride the next round: no fsync per
//!   batch and no linger), reports the round back; the loop calls `persisted` with the log's
//!   durable end and the epoch of the last durable batch.
//! - **publisher**: reads committed batches back from the log (in order, from offset 0 on a
//!   fresh start: the state machine replays everything) up to the high watermark and sends
//!   them as [`CommittedBatch`]es on the port, a read's batches per message. A slow consumer
//!   slows only the publisher, never Raft.
//!
//! Reads the core asks for ([`corum_raft::LogRead`]: payloads of old batches for a follower
//! that lags) are served inline by the loop from the log (memory or disk).
//!
//! A log error (write, fsync, read) is fatal: [`RaftDriver::run`] returns it without flushing or
//! sending anything more. A clean shutdown resigns leadership (EndQuorumEpoch, so the next
//! leader need not wait for a timeout; the driver waits up to `resign_send_wait_ms_max` for it
//! to leave the sockets), flushes and closes the log, and closes the network.
//!
//! # Snapshots (KIP-630)
//!
//! The state machine offers a snapshot of its committed state at a batch boundary it has
//! replayed ([`crate::port::ToDriver::Snapshot`]; the controller service does so every
//! `metadata.log.max.record.bytes.between.snapshots` bytes of records). The driver asks the
//! core for the snapshot's id and voter set, writes it to the [`snapshot_store`] through the
//! log's disk in a task of its own (the loop goes on). Once it is durable and the log's whole segments below it hold
//! more than `log_retention_bytes` (`metadata.max.retention.bytes`), the driver calls
//! `snapshot_created`: the core serves it to replicas behind its log start from then on, and
//! its `log_start_offset` lets the driver delete those segments. The store keeps the two
//! newest snapshots.
//!
//! At start-up ([`crate::data_dir`]) the newest snapshot in the store is the core's starting point: the log is made
//! to continue it (batches from its end on are kept if they fit; a log that ends before it
//! restarts empty at its end) and the publisher hands it to the consumer first
//! ([`CommittedBatch::snapshot`]), then the batches after it. A follower that falls behind the
//! leader's log start downloads the leader's snapshot (the core does) and the driver installs
//! it the same way, cutting its log at the snapshot's end.
//!
//! # Not yet
//!
//! - Voter changes at run time: links are opened at start for the voter set recovered from
//!   the log; a voter added later has no link until the driver restarts.
//!
//! # Frames
//!
//! Every batch is one engine frame whose attributes carry the control bit. Both timestamps are
//! 0: the Raft batch has no timestamp, and writing the same value on every replica keeps the
//! replicas' frames byte-identical.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_engine::disk::{Disk, UringDisk};
use corum_engine::log::{Log, LogConfig};
use corum_raft::{Endpoint, Payload, ReplicaKey, Role, SnapshotId, VoterSet};
use corum_runtime::ShutdownSignal;
use corum_types::{Epoch, LogOffset, NodeId};
use futures_lite::future::or;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};

pub mod core;
mod service_link;

use self::core::store_snapshot;
pub use self::core::{Carried, DriverCore, ProposalOutcome, Publisher};
use crate::calls::CallStats;
use crate::error::{DriverError, StorageError};
use crate::histogram::LatencyHistogram;
use crate::peer::{Inbound, PeerInbox, PeerNetwork, PeerRoute, PeerStats};
pub use crate::port::{CommittedBatch, DriverStatus};
use crate::port::{DriverEnd, Proposal, ToService};
use crate::protocol::RequestFrame;
use crate::quorum_state::QuorumState;
use crate::snapshot_store;

pub use self::service_link::CallAnswer;
use self::service_link::{CallTable, IncomingCall};

pub use crate::data_dir::{metadata_log_dir, METADATA_LOG_DIR};

/// Bytes of frames read per `Log::read` call when restoring or publishing.
const READ_CHUNK_BYTES: usize = 1 << 20;

/// Snapshots kept in the store: the newest, and one before it.
const SNAPSHOTS_KEPT: usize = 2;

pub type Result<T, E = DriverError> = std::result::Result<T, E>;

/// Everything [`RaftDriver::start`] needs besides the bound network, derived from the node's
/// configuration by [`crate::config::components::raft_driver`].
#[derive(Clone, Debug)]
pub struct RaftDriverConfig {
    /// `metadata.log.dir`: holds `quorum-state` and the log in [`METADATA_LOG_DIR`].
    pub data_dir: PathBuf,
    pub raft: corum_raft::Config,
    /// This replica (node id and directory id) and its endpoints (`RaftCore::new`'s `me` and
    /// `endpoints`; see [`crate::config::components::local_replica`]).
    pub me: ReplicaKey,
    pub endpoints: Vec<Endpoint>,
    /// The voter set before any VotersRecord: [`crate::config::components::static_voter_set`] or
    /// [`crate::raft_config::bootstrap_voter_set`].
    pub bootstrap_voters: VoterSet,
    /// KIP-853's `kraft.version` ([`corum_raft::Restore::kraft_version`]).
    pub kraft_version: u16,
    /// The listener name under which voters publish the endpoint peers connect to.
    pub listener_name: String,
    /// `controller.quorum.bootstrap.servers` as (host, port): where an observer asks for the
    /// leader (linked under ids of [`crate::peer::BOOTSTRAP_IDS`]).
    pub bootstrap_servers: Vec<(String, u16)>,
    pub log: LogConfig,
    /// Period of `tick`. A few milliseconds: timeouts resolve to this.
    pub tick_interval_ms: u64,
    /// Seeds the core's randomness (election jitter).
    pub seed: u64,
    /// Proposals queued for the loop (from the service's port) before the port waits.
    pub proposal_queue_capacity: usize,
    /// The loop takes no new proposal while this many records or more are appended but not
    /// committed (the queue above then fills, the port behind it, and the service waits): a
    /// leader flooded faster than it replicates would otherwise starve its followers and lose
    /// leadership.
    pub uncommitted_records_max: u64,
    /// Client requests queued on their way to the service before [`RaftHandle::call`] waits
    /// (`corum.controller.queue.capacity`).
    pub call_queue_capacity: usize,
    /// Timeout of a request that gives 0 (`corum.controller.request.timeout.ms`), and the
    /// most any request may wait, whatever it asks. The call table answers `Timeout` then.
    pub request_timeout_default_ms: u64,
    pub request_timeout_max_ms: u64,
    /// On shutdown, a leader resigns and waits up to this long for its EndQuorumEpoch (and
    /// everything queued before it) to be written to the peers' sockets before closing them.
    pub resign_send_wait_ms_max: u64,
    /// `metadata.max.retention.bytes`: once the whole segments below the newest snapshot hold
    /// more than this many bytes, the log start moves up to the snapshot and they are deleted
    /// (replicas and observers behind it then load the snapshot). `None`: the log start never
    /// moves (snapshots still shorten restarts).
    pub log_retention_bytes: Option<u64>,
}

impl RaftDriverConfig {
    /// The metadata log's directory.
    pub fn log_dir(&self) -> PathBuf {
        metadata_log_dir(&self.data_dir)
    }

    /// The snapshot store's directory ([`crate::snapshot_store`]).
    pub fn snapshot_dir(&self) -> PathBuf {
        snapshot_store::snapshot_dir(&self.data_dir)
    }
}

pub use crate::peer::ADMIN_IDS;

/// A Raft request of a client that is not a peer (an observer's Fetch or FetchSnapshot, an
/// admin's voter change), stepped into the core from `from`; the core's answer addressed to
/// `from` comes back.
pub(crate) struct ObserverRequest {
    from: NodeId,
    message: corum_raft::Message,
    reply: LocalSender<Result<corum_raft::Message>>,
}

/// A snapshot of the state machine offered to the driver ([`crate::port::ToDriver::Snapshot`]).
pub(crate) struct SnapshotOffer {
    pub(crate) end_offset: LogOffset,
    pub(crate) data: Payload,
}

/// The driver's face to tasks on its shard (the RPC server, metrics): client calls in,
/// observer requests, status out. Cheap to clone.
#[derive(Clone)]
pub struct RaftHandle {
    calls: Rc<LocalSender<IncomingCall>>,
    call_table: CallTable,
    observers: Rc<LocalSender<ObserverRequest>>,
    /// The next id an admin's voter change is stepped from ([`RaftHandle::voter_change`]).
    next_admin_id: Rc<Cell<u32>>,
    status: Rc<RefCell<DriverStatus>>,
    service_status: Rc<RefCell<crate::port::ServiceStatus>>,
    watchers: StatusWatchers,
}

/// Kicked when the role, epoch, leader, high watermark or running flag changes.
type StatusWatchers = Rc<RefCell<Vec<LocalSender<()>>>>;

impl RaftHandle {
    /// Sends a client request to the controller service and waits for its one answer from
    /// the call table ([`crate::calls`]): the service's verdict, its success once its records
    /// commit, `Timeout` at its deadline, or `NotController` when the service is gone.
    ///
    /// The call is queued at once, before the answer is first polled; the answer is a small
    /// named future ([`CallAnswer`]) holding the answer's receiver, so the task of every request
    /// stays small (`rpc_server::answer_request`). Only a full queue (back-pressure from the
    /// service) leaves a boxed send to wait on.
    pub fn call(&self, frame: RequestFrame) -> CallAnswer {
        let (reply, mut answer) = service_link::reply_pair(frame.correlation_id);
        let call = IncomingCall {
            frame,
            reply,
            received: Instant::now(),
        };
        match self.calls.try_send(call) {
            Ok(()) => {}
            Err(glommio::GlommioError::WouldBlock(glommio::ResourceType::Channel(call))) => {
                let calls = self.calls.clone();
                answer.set_waiting(Box::pin(async move { calls.send(call).await.is_ok() }));
            }
            // The driver is gone: the call and its reply are dropped with the error, so the
            // answer is `NotController` at once.
            Err(_) => {}
        }
        answer
    }

    /// Steps an observer's `Fetch` or `FetchSnapshot` into the core as if it came from the
    /// replica it names, and returns the core's answer to that replica (a `Fetch` is a long
    /// poll: the leader holds it up to its `wait_max_ms`). Refused for a replica id that votes
    /// or is this node: its fetches would count as that voter's progress. A newer request of
    /// the same replica replaces a waiting one (the older caller gets `Stopped`). The caller
    /// bounds the wait: a core that never answers (it lost leadership) leaves it waiting.
    pub async fn observer_request(
        &self,
        message: corum_raft::Message,
    ) -> Result<corum_raft::Message> {
        let from = match &message {
            corum_raft::Message::Fetch(f) => f.replica.id,
            corum_raft::Message::FetchSnapshot(f) => f.replica.id,
            _ => {
                return Err(DriverError::ObserverRefused {
                    id: NodeId(0),
                    reason: "sent a request observers do not send",
                })
            }
        };
        let (reply, answer) = local_channel::new_bounded(1);
        self.observers
            .send(ObserverRequest {
                from,
                message,
                reply,
            })
            .await
            .map_err(|_| DriverError::Stopped)?;
        answer.recv().await.ok_or(DriverError::Stopped)?
    }

    /// Steps an admin's `AddVoter`, `RemoveVoter`, `UpdateVoter` or `UpgradeKraftVersion` into
    /// the core and returns its answer: once the new voter set commits, or the refusal
    /// (KIP-853's checks; a static quorum refuses every change but the upgrade). Each call is stepped from an id of its own in
    /// [`ADMIN_IDS`], so its answer comes back to it alone. The caller bounds the wait: a
    /// leader that loses its epoch answers `LeadershipLost`, one that stops answers nothing.
    pub async fn voter_change(
        &self,
        message: corum_raft::Message,
    ) -> Result<corum_raft::message::VoterChangeResponse> {
        if !matches!(
            message,
            corum_raft::Message::AddVoter(_)
                | corum_raft::Message::RemoveVoter(_)
                | corum_raft::Message::UpdateVoter(_)
                | corum_raft::Message::UpgradeKraftVersion(_)
        ) {
            return Err(DriverError::ObserverRefused {
                id: NodeId(0),
                reason: "not a voter change",
            });
        }
        let id = self.next_admin_id.get();
        self.next_admin_id.set(if id == *ADMIN_IDS.start() {
            *ADMIN_IDS.end()
        } else {
            id - 1
        });
        let (reply, answer) = local_channel::new_bounded(1);
        self.observers
            .send(ObserverRequest {
                from: NodeId(id),
                message,
                reply,
            })
            .await
            .map_err(|_| DriverError::Stopped)?;
        match answer.recv().await.ok_or(DriverError::Stopped)?? {
            corum_raft::Message::VoterChangeResponse(r) => Ok(r),
            _ => Err(DriverError::Stopped),
        }
    }

    /// [`RaftHandle::voter_change`] waiting at most `timeout_ms`: `None` when no answer came
    /// in time (the change may still commit).
    pub async fn voter_change_within(
        &self,
        message: corum_raft::Message,
        timeout_ms: u64,
    ) -> Option<Result<corum_raft::message::VoterChangeResponse>> {
        futures_lite::future::or(async { Some(self.voter_change(message).await) }, async {
            glommio::timer::sleep(std::time::Duration::from_millis(timeout_ms)).await;
            None
        })
        .await
    }

    /// The latest status (updated after every round of the loop).
    pub fn status(&self) -> DriverStatus {
        self.status.borrow().clone()
    }

    /// KIP-853's `kraft.version` in force (read in place).
    pub fn kraft_version(&self) -> u16 {
        self.status.borrow().raft.kraft_version
    }

    /// What the service follows of the status: role, epoch, leader, running (read in place).
    pub fn leadership(&self) -> (Role, Epoch, Option<NodeId>, bool) {
        let s = self.status.borrow();
        (s.raft.role, s.raft.epoch, s.raft.leader, s.running)
    }

    /// The call table's figures now: per-stage latencies of the calls it answered, success
    /// answers released at commit, timeouts ([`CallStats`]).
    pub fn call_stats(&self) -> CallStats {
        self.call_table.borrow().stats().clone()
    }

    /// The controller service's latest status, as it last reported it over the port.
    pub fn service_status(&self) -> crate::port::ServiceStatus {
        self.service_status.borrow().clone()
    }

    /// A receiver that gets a message (coalesced: at most one waits) whenever the status's
    /// role, epoch, leader, high watermark or running flag changes, so a follower of the
    /// status need not poll it.
    pub fn watch_status(&self) -> LocalReceiver<()> {
        let (tx, rx) = local_channel::new_bounded(1);
        self.watchers.borrow_mut().push(tx);
        rx
    }
}

/// Why the loop woke up.
enum Event {
    Shutdown,
    /// A syncer round's outcome, and its duration when it made something durable.
    Synced(corum_engine::Result<LogOffset>, Option<Duration>),
    PublishFailed(corum_engine::Error),
    Message(Inbound),
    /// The peer network found this peer's process gone.
    Unreachable(NodeId),
    InboxClosed,
    Proposal(Proposal),
    Observer(ObserverRequest),
    SnapshotOffer(SnapshotOffer),
    /// A snapshot offered by the state machine is durable (or failed to be written).
    SnapshotWritten(SnapshotId, Payload, Result<(), StorageError>),
    Tick,
}

/// Reports from the helper tasks to the loop.
enum Report {
    Synced(corum_engine::Result<LogOffset>, Option<Duration>),
    PublishFailed(corum_engine::Error),
    SnapshotWritten(SnapshotId, Payload, Result<(), StorageError>),
}

/// A Raft replica on one glommio shard. See the module doc. `D` is the log's disk:
/// [`UringDisk`] in a node, `SimDisk` in tests that inject IO faults or power loss.
pub struct RaftDriver<D: Disk = UringDisk> {
    /// Every decision: [`DriverCore`].
    core: DriverCore<D>,
    network: PeerNetwork,
    inbox: PeerInbox,
    proposals: LocalReceiver<Proposal>,
    observers: LocalReceiver<ObserverRequest>,
    snapshot_offers: LocalReceiver<SnapshotOffer>,
    /// Observers waiting for the core's answer, by replica id.
    observer_waits: BTreeMap<NodeId, LocalSender<Result<corum_raft::Message>>>,
    /// The core's [`corum_raft::RaftCore::voter_set_changes`] the network's links were last
    /// made for (see [`RaftDriver::link_new_voters`]).
    linked_at_change: u64,
    /// The service's end of the port talks to these; taken by `run`.
    link: Option<Link>,
    /// Where committed batches, refusals and the status go.
    to_service: Rc<crate::port::PortSender<ToService>>,
    /// Every call waiting for its answer ([`crate::calls`]).
    calls: CallTable,
    status: Rc<RefCell<DriverStatus>>,
    watchers: StatusWatchers,
    shutdown: ShutdownSignal,
    clock_origin: Instant,
    /// Per peer: messages ever handed to its link (the link's own counters at start, plus
    /// every message this driver queued), to know when they have all left.
    queued_to: BTreeMap<NodeId, u64>,
}

/// What `run` starts the service link's tasks with.
struct Link {
    from_service: crate::port::PortReceiver<crate::port::ToDriver>,
    calls: LocalReceiver<IncomingCall>,
    proposals: LocalSender<Proposal>,
    offers: LocalSender<SnapshotOffer>,
    service_status: Rc<RefCell<crate::port::ServiceStatus>>,
    handle: RaftHandle,
}

/// What [`RaftDriver::start`] recovered, for logs and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    pub quorum_state: Option<QuorumState>,
    /// The newest snapshot in the snapshot store, which the log continues.
    pub snapshot: Option<SnapshotId>,
    pub log_start_offset: LogOffset,
    pub log_end_offset: LogOffset,
    pub batches: usize,
    /// Bytes of a torn tail the log cut off on open.
    pub torn_tail_bytes: u64,
}

impl<D: Disk> RaftDriver<D> {
    /// Recovers the quorum state and the log (on `disk`) from `config.data_dir`, builds the
    /// core, and links `network` (already bound: the caller picks the port) to every voter.
    /// `port` is the driver's end of the port to the controller service ([`crate::port`]).
    /// Returns the driver (run it with [`RaftDriver::run`]) and a handle for calls, observers
    /// and status. Must run inside a glommio executor.
    pub async fn start(
        disk: D,
        config: RaftDriverConfig,
        network: PeerNetwork,
        inbox: PeerInbox,
        port: DriverEnd,
        shutdown: ShutdownSignal,
    ) -> Result<(RaftDriver<D>, RaftHandle, Recovered)> {
        assert!(
            config.tick_interval_ms > 0,
            "tick interval must be positive"
        );
        assert!(config.proposal_queue_capacity > 0 && config.call_queue_capacity > 0);
        assert!(config.uncommitted_records_max > 0);
        let (proposal_cap, call_cap) = (config.proposal_queue_capacity, config.call_queue_capacity);
        let listener = config.listener_name.clone();
        let bootstrap_servers = config.bootstrap_servers.clone();
        if let Some(e) = config.endpoints.iter().find(|e| e.listener == listener) {
            network.set_own_route(PeerRoute {
                id: config.me.id,
                host: e.host.clone(),
                port: e.port,
            });
        }
        let (core, recovered) = DriverCore::recover(disk, config, 0).await?;
        network.add_voters(core.raft().voter_set(), &listener)?;
        for (id, server) in core::bootstrap_server_ids(bootstrap_servers.len())
            .into_iter()
            .zip(&bootstrap_servers)
        {
            // Connected on first use: only an observer looking for its leader sends there.
            network.add_peer(id, crate::peer::resolve(&server.0, server.1)?)?;
        }
        let linked_at_change = core.raft().voter_set_changes();
        let queued_to = network
            .peers()
            .into_iter()
            .map(|id| {
                let s = network.peer_stats(id).expect("a listed peer has a link");
                (id, resolved(&s) + s.queued as u64)
            })
            .collect();
        let (proposal_tx, proposals) = local_channel::new_bounded(proposal_cap);
        let (observer_tx, observers) = local_channel::new_bounded(proposal_cap);
        let (call_tx, call_rx) = local_channel::new_bounded(call_cap);
        let (snapshot_tx, snapshot_offers) = local_channel::new_bounded(1);
        let call_table: CallTable = Rc::default();
        let status = Rc::new(RefCell::new(core.status(
            &call_table.borrow(),
            0,
            &LatencyHistogram::default(),
            true,
        )));
        let service_status = Rc::new(RefCell::new(crate::port::ServiceStatus::starting()));
        let handle = RaftHandle {
            calls: Rc::new(call_tx),
            call_table: call_table.clone(),
            observers: Rc::new(observer_tx),
            next_admin_id: Rc::new(Cell::new(*ADMIN_IDS.end())),
            status: status.clone(),
            service_status: service_status.clone(),
            watchers: Rc::default(),
        };
        let watchers = handle.watchers.clone();
        let DriverEnd {
            tx: to_service,
            rx: from_service,
        } = port;
        let link = Link {
            from_service,
            calls: call_rx,
            proposals: proposal_tx,
            offers: snapshot_tx,
            service_status,
            handle: handle.clone(),
        };
        let driver = RaftDriver {
            core,
            network,
            inbox,
            proposals,
            observers,
            snapshot_offers,
            observer_waits: BTreeMap::new(),
            linked_at_change,
            link: Some(link),
            to_service: Rc::new(to_service),
            calls: call_table,
            status,
            watchers,
            shutdown,
            clock_origin: Instant::now(),
            queued_to,
        };
        Ok((driver, handle, recovered))
    }

    /// Runs the event loop until the shutdown signal (then resigns, flushes and closes the log
    /// and the network, and returns `Ok`) or a fatal error (returned at once; the log is not
    /// flushed).
    pub async fn run(mut self) -> Result<()> {
        let (report_tx, reports) = local_channel::new_bounded::<Report>(4);
        let report_tx = Rc::new(report_tx);
        let (sync_kick, sync_kicks) = local_channel::new_bounded::<()>(1);
        let (publish_kick, publish_kicks) = local_channel::new_bounded::<()>(1);
        let hwm = Rc::new(Cell::new(self.core.raft().high_watermark()));
        let syncer = glommio::spawn_local(run_syncer(
            self.core.log().clone(),
            sync_kicks,
            report_tx.clone(),
        ));
        let publisher = self.core.publisher();
        let starts_from_snapshot = publisher.has_reset();
        let publisher = glommio::spawn_local(run_publisher(
            self.core.log().clone(),
            publisher,
            hwm.clone(),
            publish_kicks,
            self.to_service.clone(),
            report_tx.clone(),
        ));
        let link = self.link.take().expect("run is called once");
        // Not detached: dropping them when the loop ends cancels them, closing the port.
        let config = self.core.config();
        let link_tasks = [
            glommio::spawn_local(service_link::forward_calls(
                link.calls,
                self.calls.clone(),
                self.to_service.clone(),
                config.request_timeout_default_ms,
                config.request_timeout_max_ms,
            )),
            glommio::spawn_local(service_link::serve_port(
                link.from_service,
                self.calls.clone(),
                link.proposals,
                link.offers,
                link.service_status,
            )),
            glommio::spawn_local(service_link::forward_status(
                link.handle,
                self.to_service.clone(),
            )),
        ];
        if starts_from_snapshot {
            // The snapshot the node starts from goes to the consumer at once.
            let _ = publish_kick.try_send(());
        }
        let mut loop_state = LoopState {
            sync_kick,
            publish_kick,
            reports: report_tx,
            hwm,
            figures: LoopFigures::default(),
        };
        let tick = Duration::from_millis(config.tick_interval_ms);
        let mut next_tick = Instant::now();
        let outcome = loop {
            let event = self.next_event(&reports, next_tick).await;
            // The append time the batches this event makes are stamped with (Kafka's).
            self.core.set_wall_clock_ms(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(corum_raft::NO_TIMESTAMP, |d| d.as_millis() as i64),
            );
            let now = Instant::now();
            if now >= next_tick {
                let now_ms = self.now_ms();
                self.core.tick(now_ms);
                next_tick = now + tick;
            }
            let step = match event {
                Event::Shutdown => break Ok(()),
                Event::Tick => Ok(()),
                Event::Message(m) => {
                    self.learn_routes(m.from, &m.routes);
                    self.note_ignored(m.from, &m.message);
                    self.core.step(m.from, m.message);
                    Ok(())
                }
                Event::Unreachable(peer) => {
                    self.core.peer_unreachable(peer);
                    Ok(())
                }
                Event::InboxClosed => {
                    // The network closed under us (only shutdown does that): stop too.
                    break Ok(());
                }
                Event::Proposal(p) => {
                    self.on_proposal(p);
                    Ok(())
                }
                Event::Observer(r) => {
                    self.step_observer(r);
                    Ok(())
                }
                Event::SnapshotOffer(offer) => {
                    self.write_snapshot(offer, &loop_state);
                    Ok(())
                }
                Event::SnapshotWritten(id, data, outcome) => {
                    self.core.snapshot_written(id, data, outcome)
                }
                Event::Synced(Ok(_), took) => {
                    loop_state.figures.sync_rounds += 1;
                    if let Some(took) = took {
                        loop_state.figures.sync_duration.record(took);
                    }
                    self.core
                        .synced(&mut self.calls.borrow_mut(), Instant::now());
                    Ok(())
                }
                Event::Synced(Err(e), _) | Event::PublishFailed(e) => Err(DriverError::Log(e)),
            };
            let step = match step {
                Ok(()) => self.drain(&mut loop_state).await,
                Err(e) => Err(e),
            };
            if let Err(e) = step {
                break Err(e);
            }
            let out = self
                .core
                .settle(&mut self.calls.borrow_mut(), Instant::now());
            service_link::send_answers(out);
            self.update_status(&loop_state, true);
        };
        // The publisher may wait on a consumer that no longer reads: cancel it (it only reads
        // the log). The syncer is never cancelled in the middle of a round: it ends once its
        // kick sender is gone, while its last reports are drained here. A snapshot writer
        // still running finishes on its own (its file is complete or a `.part` left over).
        drop(publisher);
        drop(link_tasks);
        let outcome = match outcome {
            Ok(()) => self.stop_cleanly(&mut loop_state).await,
            Err(e) => Err(e),
        };
        self.update_status(&loop_state, false);
        drop(loop_state);
        or(syncer, async {
            while reports.recv().await.is_some() {}
            std::future::pending::<()>().await
        })
        .await;
        // Whatever still waits gets NotController (no hint: this node is going away).
        let out = self.calls.borrow_mut().drain(Instant::now());
        service_link::send_answers(out);
        let RaftDriver { core, network, .. } = self;
        let closed = match outcome {
            Ok(()) => core.into_log().close().await.map_err(DriverError::Log),
            Err(e) => Err(e),
        };
        network.close().await;
        closed
    }

    /// Resigns leadership (so the next leader is elected without a timeout) and carries out
    /// what that produces, then flushes the log.
    async fn stop_cleanly(&mut self, state: &mut LoopState) -> Result<()> {
        let leader = self.core.resign_if_leader();
        self.drain(state).await?;
        if leader {
            // Closing the network drops what its links still hold: give the EndQuorumEpoch a
            // bounded moment to leave, so a successor starts at once instead of timing out.
            let wait = Duration::from_millis(self.core.config().resign_send_wait_ms_max);
            let deadline = Instant::now() + wait;
            while !self.all_sent() && Instant::now() < deadline {
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
        }
        self.core.log().flush().await?;
        Ok(())
    }

    /// True once every message this driver queued was written (or failed) on its link.
    fn all_sent(&self) -> bool {
        self.queued_to.iter().all(|(&id, &queued)| {
            self.network
                .peer_stats(id)
                .is_none_or(|s| resolved(&s) >= queued)
        })
    }

    /// A proposal of the service ([`DriverCore::on_proposal`]): a refusal's answers leave at
    /// once and the service hears of it.
    fn on_proposal(&mut self, p: Proposal) {
        let outcome = self
            .core
            .on_proposal(p, &mut self.calls.borrow_mut(), Instant::now());
        service_link::send_answers(outcome.answers);
        if let Some(refused) = outcome.refused {
            let port = self.to_service.clone();
            glommio::spawn_local(async move {
                let _ = port.send(refused).await;
            })
            .detach();
        }
    }

    /// Steps an observer's request into the core (see [`RaftHandle::observer_request`]).
    fn step_observer(&mut self, r: ObserverRequest) {
        let fetch = matches!(
            r.message,
            corum_raft::Message::Fetch(_) | corum_raft::Message::FetchSnapshot(_)
        );
        if let Err(reason) = self.core.observer_allowed(r.from).and_then(|()| {
            if fetch == ADMIN_IDS.contains(&r.from.0) {
                Err("uses an id reserved for admin requests")
            } else {
                Ok(())
            }
        }) {
            let _ = r
                .reply
                .try_send(Err(DriverError::ObserverRefused { id: r.from, reason }));
            return;
        }
        // A newer request replaces a waiting one: dropping the old reply answers `Stopped`.
        self.observer_waits.insert(r.from, r.reply);
        self.core.step(r.from, r.message);
    }

    /// Queues each message on its peer's link (a full queue drops it: Raft resends); an
    /// answer to a waiting observer goes to it instead.
    fn send_messages(&mut self, messages: Vec<(NodeId, corum_raft::Message)>) {
        self.link_new_voters();
        for (to, message) in messages {
            if matches!(
                message,
                corum_raft::Message::FetchResponse(_)
                    | corum_raft::Message::FetchSnapshotResponse(_)
                    | corum_raft::Message::VoterChangeResponse(_)
            ) {
                if let Some(reply) = self.observer_waits.remove(&to) {
                    let _ = reply.try_send(Ok(message));
                    continue;
                }
            }
            let routes = self.routes_for(to);
            match self.network.send_routed(to, message, routes) {
                Ok(()) => *self.queued_to.entry(to).or_default() += 1,
                Err(e) => tracing::debug!(%to, error = %e, "raft message dropped"),
            }
        }
    }

    /// The routes an envelope to `to` carries ([`crate::peer::PeerEnvelope::routes`]): none
    /// between two voters (a voter that restarted, or a new replica under a voter's id, learns
    /// its peers from the first envelope on each new connection); otherwise this node's own
    /// listener (so that an addressee with no link to it can answer) and the leader's, if
    /// known (so that a controller that asked a bootstrap server learns where the leader
    /// listens).
    fn routes_for(&self, to: NodeId) -> Vec<PeerRoute> {
        let raft = self.core.raft();
        let voters = raft.voter_set();
        if raft.is_voter() && voters.contains_id(to) {
            return Vec::new();
        }
        let listener = &self.core.config().listener_name;
        let route = |id: NodeId, endpoints: &[Endpoint]| {
            endpoints
                .iter()
                .find(|e| &e.listener == listener)
                .map(|e| PeerRoute {
                    id,
                    host: e.host.clone(),
                    port: e.port,
                })
        };
        let me = raft.id();
        let mut routes: Vec<PeerRoute> = route(me, &self.core.config().endpoints)
            .into_iter()
            .collect();
        if let Some(leader) = raft.leader_hint().filter(|l| *l != me && *l != to) {
            routes.extend(voters.get(leader).and_then(|v| route(leader, &v.endpoints)));
        }
        routes
    }

    /// Logs (rate-limited) a vote, append or epoch announcement of an epoch older than this
    /// replica's (a replayed or long-delayed message), which the core ignores or answers
    /// with its epoch without a change of state. The core decides; this only says so in the
    /// log, naming the sender, whether it is a voter, and the epochs. (Fetches are left out:
    /// they carry the fetcher's epoch, which lags by design right after an election.)
    fn note_ignored(&self, from: NodeId, message: &corum_raft::Message) {
        let core = self.core.raft();
        let current = core.epoch();
        let (kind, epoch) = match message {
            corum_raft::Message::Vote(m) => ("Vote", m.epoch),
            corum_raft::Message::BeginQuorumEpoch(m) => ("BeginQuorumEpoch", m.epoch),
            corum_raft::Message::EndQuorumEpoch(m) => ("EndQuorumEpoch", m.epoch),
            corum_raft::Message::Append(m) => ("Append", m.epoch),
            _ => return,
        };
        if epoch >= current {
            return;
        }
        static STALE_LOG: corum_runtime::LogLimiter = corum_runtime::LogLimiter::new(5);
        if let Some(suppressed) = STALE_LOG.allow() {
            let sender_is_voter = core.voter_set().contains_id(from);
            tracing::info!(%from, sender_is_voter, kind, epoch = epoch.0, current_epoch = current.0,
                suppressed, "ignoring a Raft message of an older epoch: no change of state");
        }
    }

    /// Links the nodes an inbound envelope from `from` named routes to, unless linked already
    /// (a link to `from` itself moves if its own route names another address).
    fn learn_routes(&mut self, from: NodeId, routes: &[PeerRoute]) {
        for r in routes {
            match self.network.learn_route(r, r.id == from) {
                Ok(true) => {
                    let s = self.network.peer_stats(r.id).expect("a new link has stats");
                    self.queued_to.insert(r.id, resolved(&s) + s.queued as u64);
                    tracing::info!(id = %r.id, host = %r.host, port = r.port, "linked to a node that sent its route");
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(id = %r.id, error = %e, "cannot link to a route"),
            }
        }
    }

    /// Opens a link to every voter the voter set gained since the last call (a VotersRecord
    /// appended or replicated, a snapshot installed), before the messages to it go out. Links
    /// to removed voters stay: a removed voter may still fetch, and be added again.
    fn link_new_voters(&mut self) {
        let changes = self.core.raft().voter_set_changes();
        if changes == self.linked_at_change {
            return;
        }
        self.linked_at_change = changes;
        let (raft, config) = (self.core.raft(), self.core.config());
        match self
            .network
            .add_voters(raft.voter_set(), &config.listener_name)
        {
            Ok(added) if !added.is_empty() => {
                for id in &added {
                    let s = self.network.peer_stats(*id).expect("a new link has stats");
                    self.queued_to.insert(*id, resolved(&s) + s.queued as u64);
                }
                tracing::info!(?added, "linked to new voters");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot link to a new voter"),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.clock_origin.elapsed().as_millis()).expect("uptime fits in u64 ms")
    }

    /// The next input, with shutdown and helper reports first and the tick timer last.
    async fn next_event(&self, reports: &LocalReceiver<Report>, next_tick: Instant) -> Event {
        let shutdown = async {
            self.shutdown.wait().await;
            Event::Shutdown
        };
        let report = async {
            match reports.recv().await {
                Some(Report::Synced(r, took)) => Event::Synced(r, took),
                Some(Report::PublishFailed(e)) => Event::PublishFailed(e),
                Some(Report::SnapshotWritten(id, data, r)) => Event::SnapshotWritten(id, data, r),
                // Both helpers hold a sender until the loop drops them: never happens while the
                // loop runs, but wait for the other inputs rather than spin if it did.
                None => std::future::pending().await,
            }
        };
        let message = async {
            match self.inbox.recv().await {
                Some(m) => Event::Message(m),
                None => Event::InboxClosed,
            }
        };
        let unreachable = async {
            match self.inbox.unreachable().await {
                Some(peer) => Event::Unreachable(peer),
                None => std::future::pending().await,
            }
        };
        let admit = self.core.admits_proposals();
        let proposal = async {
            if !admit {
                // Back-pressure: wait for commits (a Synced or Message event) first.
                std::future::pending::<()>().await;
            }
            match self.proposals.recv().await {
                Some(p) => Event::Proposal(p),
                // Every handle was dropped: no more proposals, but keep serving Raft.
                None => std::future::pending().await,
            }
        };
        let observer = async {
            match self.observers.recv().await {
                Some(r) => Event::Observer(r),
                None => std::future::pending().await,
            }
        };
        let offer = async {
            match self.snapshot_offers.recv().await {
                Some(o) => Event::SnapshotOffer(o),
                None => std::future::pending().await,
            }
        };
        let tick = async {
            glommio::timer::sleep(next_tick.saturating_duration_since(Instant::now())).await;
            Event::Tick
        };
        or(
            shutdown,
            or(
                report,
                or(
                    message,
                    or(unreachable, or(proposal, or(observer, or(offer, tick)))),
                ),
            ),
        )
        .await
    }

    /// Carries out every pending `Ready` ([`DriverCore::next_ready`]): the log's part in the
    /// core, then here the answers a new high watermark releases, the publisher's kick, the
    /// syncer's kick and the messages (appends to followers leave before this node's own
    /// fsync: pipelining).
    async fn drain(&mut self, state: &mut LoopState) -> Result<()> {
        while let Some(carried) = self.core.next_ready().await? {
            if carried.appended {
                // Full means a kick is already pending: that round will carry these batches.
                let _ = state.sync_kick.try_send(());
            }
            if let Some(hwm) = carried.high_watermark {
                let out = self
                    .core
                    .committed(hwm, &mut self.calls.borrow_mut(), Instant::now());
                if !out.is_empty() {
                    service_link::send_answers(out);
                    // The status first, so that whoever an answer wakes sees the high
                    // watermark covering it. Then a pass of the scheduler: the callers' tasks
                    // take their answers and queue them on their connections before this
                    // round wakes the publisher and the links, so the connection writers run
                    // first (glommio runs woken tasks in order; a loopback send to a follower
                    // costs tens of microseconds here).
                    self.update_status(state, true);
                    futures_lite::future::yield_now().await;
                }
                state.hwm.set(state.hwm.get().max(hwm));
                let _ = state.publish_kick.try_send(());
            }
            self.send_messages(carried.messages);
        }
        Ok(())
    }

    /// Stores an offered snapshot ([`DriverCore::snapshot_offer`]) in a task (the loop goes
    /// on); the outcome comes back as [`Event::SnapshotWritten`].
    fn write_snapshot(&mut self, offer: SnapshotOffer, state: &LoopState) {
        let Some(snapshot) = self.core.snapshot_offer(offer.end_offset, offer.data) else {
            return;
        };
        let disk = self.core.disk().clone();
        let dir = self.core.config().snapshot_dir();
        let reports = state.reports.clone();
        glommio::spawn_local(async move {
            let outcome = store_snapshot(&disk, &dir, &snapshot).await;
            let _ = reports
                .send(Report::SnapshotWritten(snapshot.id, snapshot.data, outcome))
                .await;
        })
        .detach();
    }

    fn update_status(&self, state: &LoopState, running: bool) {
        let status = self.core.status(
            &self.calls.borrow(),
            state.figures.sync_rounds,
            &state.figures.sync_duration,
            running,
        );
        publish_status(&self.status, &self.watchers, status);
    }
}

/// Sets `status` and kicks the watchers if a field they watch changed.
fn publish_status(cell: &RefCell<DriverStatus>, watchers: &StatusWatchers, status: DriverStatus) {
    let key = |s: &DriverStatus| {
        (
            s.raft.role,
            s.raft.epoch,
            s.raft.leader,
            s.raft.high_watermark,
            s.running,
        )
    };
    let changed = key(&cell.borrow()) != key(&status);
    *cell.borrow_mut() = status;
    if changed {
        // Full: a kick already waits. Closed: the watcher is gone.
        watchers
            .borrow_mut()
            .retain(|w| !matches!(w.try_send(()), Err(glommio::GlommioError::Closed(_))));
    }
}

/// The loop's own figures.
#[derive(Default)]
struct LoopFigures {
    sync_rounds: u64,
    sync_duration: LatencyHistogram,
}

/// The loop's links to its helper tasks.
struct LoopState {
    sync_kick: LocalSender<()>,
    publish_kick: LocalSender<()>,
    /// For the snapshot writer tasks' reports.
    reports: Rc<LocalSender<Report>>,
    hwm: Rc<Cell<LogOffset>>,
    figures: LoopFigures,
}

/// Messages a link is done with: written, or dropped by a failed or timed-out write.
fn resolved(stats: &PeerStats) -> u64 {
    stats.sent + stats.send_failed + stats.send_timeouts
}

/// The syncer: one group-commit round per kick; batches appended meanwhile wait for the next.
async fn run_syncer<D: Disk>(
    log: Log<D>,
    kicks: LocalReceiver<()>,
    reports: Rc<LocalSender<Report>>,
) {
    while kicks.recv().await.is_some() {
        let (before, started) = (log.durable_end(), Instant::now());
        let outcome = log.flush_now().await;
        let took = matches!(&outcome, Ok(end) if *end > before).then(|| started.elapsed());
        let failed = outcome.is_err();
        if reports.send(Report::Synced(outcome, took)).await.is_err() || failed {
            return;
        }
    }
}

/// The publisher task: on each kick, hands the consumer what [`Publisher::next_chunk`] gives
/// up to the high watermark. A consumer that went away no longer gets batches; Raft goes on.
async fn run_publisher<D: Disk>(
    log: Log<D>,
    mut publisher: Publisher,
    hwm: Rc<Cell<LogOffset>>,
    kicks: LocalReceiver<()>,
    out: Rc<crate::port::PortSender<ToService>>,
    reports: Rc<LocalSender<Report>>,
) {
    while kicks.recv().await.is_some() {
        loop {
            match publisher.next_chunk(&log, hwm.get()).await {
                Ok(Some(batches)) => {
                    if out.send(ToService::Committed(batches)).await.is_err() {
                        publisher.consumer_gone();
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = reports.send(Report::PublishFailed(e)).await;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A committed batch's end offset follows its record count.
    #[test]
    fn committed_batch_end_offset() {
        let b = CommittedBatch {
            base_offset: LogOffset(10),
            epoch: Epoch(1),
            record_count: 3,
            control: false,
            payload: Payload::from(&b"x"[..]),
            snapshot: false,
        };
        assert_eq!(b.end_offset(), LogOffset(13));
    }
}
