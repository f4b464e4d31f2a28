//! The controller-to-controller transport: Raft [`Message`]s between voters (and observers)
//! over the runtime's framed TCP ([`corum_runtime::transport`]).
//!
//! # Wire format
//!
//! One runtime frame (16-byte header with crc32c, 8-byte aligned rkyv payload) carries one
//! [`PeerEnvelope`]: `cluster_id`, `from`, `to` and the Raft [`Message`] embedded as it is
//! (`corum-raft`'s messages derive rkyv, so there is no second encoding). The receiver checks
//! the frame and validates the archive once ([`corum_runtime::Validated`]), then
//! [`Message::validate`] applies the Raft crate's own rules on top of rkyv's (batches
//! contiguous and non-empty, voter sets sorted and unique): the same rules
//! `Message::decode` applies, written once in `corum-raft`.
//!
//! Connections are one-way: a node sends on the connections it opened and receives on the ones
//! it accepted (a response travels on the responder's own outbound connection). There is **no
//! handshake** of corum's own (under TLS, only TLS's: see "Mutual TLS"): every envelope names
//! its cluster and addressee, so one frame is enough to
//! refuse a misdirected connection, and a reconnect needs no extra round trip. The peer
//! listener is a port of its own; sharing one port with clients would add a first frame naming
//! the connection's kind, in the node's listener, without changing this format.
//!
//! # Sending never blocks the Raft loop
//!
//! [`PeerNetwork::send`] is a synchronous call: it puts the message in the destination's
//! bounded outbound queue and returns. One task per peer drains its queue onto a
//! [`ReconnectingPeer`] (which reconnects with capped, jittered backoff). When a queue is full
//! — the peer is slow, unreachable or backing off — the message is **dropped** and counted
//! ([`PeerStats::dropped_queue_full`]), and `send` returns [`PeerError::QueueFull`]. Raft
//! tolerates loss (appends are retried after `request_timeout_ms`, votes on the next election
//! timeout, fetches re-sent), so dropping is correct; blocking would stall elections and
//! heartbeats to every other peer. A message that fails to go out on a broken connection is
//! dropped too ([`PeerStats::send_failed`]). A write that does not finish within
//! [`PeerNetworkConfig::send_timeout`] (a peer that stopped reading, a partition with full
//! socket buffers) drops the connection with a reset and reconnects
//! ([`PeerStats::send_timeouts`]), rather than waiting out TCP's retransmission timeouts while
//! the queue drops everything; the reset frees the abandoned socket's buffer at once, where a
//! FIN would wait behind it for a peer that does not read.
//!
//! Over PLAINTEXT, `from` is not authenticated: the transport trusts the network between
//! controllers (as Kafka's PLAINTEXT controller listener does).
//!
//! # Mutual TLS
//!
//! With the controller listener mapped to SSL ([`PeerTls`]), every connection is mutually
//! authenticated: the dialer checks the listener's certificate against the truststore (and
//! the dialed address against its names, per `ssl.endpoint.identification.algorithm`), and
//! the listener accepts a peer only with a certificate that chains to the truststore and
//! names a controller: a common name or DNS name `controller-<node id>`
//! ([`controller_ids`]). Anything else is refused at the handshake, logged with the peer's
//! address and the reason, before any Raft message is read. On an accepted connection every
//! envelope's `from` must be a node its certificate names
//! ([`PeerError::NotTheCertifiedController`]): a certificate for controller 4 cannot vote or
//! fetch as controller 1.
//!
//! # Receiving
//!
//! The listener runs one task per accepted connection. Each validated envelope is checked —
//! the cluster id must be this node's, `to` must be this node, the message must pass
//! [`Message::validate`] — and pushed into one bounded inbound channel ([`PeerInbox`]) the Raft
//! driver reads. A full inbox pushes back on that connection (TCP then pushes back on the
//! sender, whose queue drops). A bad frame or a refused envelope closes **that connection only**,
//! with a logged reason; other connections are untouched.
//!
//! | event on an accepted connection        | effect                                        |
//! |----------------------------------------|-----------------------------------------------|
//! | valid envelope for this node           | `Inbound` pushed to the inbox; `received` + 1 |
//! | wrong cluster id / wrong `to` / bad message | logged, connection closed; `rejected_envelopes` + 1 |
//! | bad frame (magic, checksum, size, archive) | logged, connection closed; `bad_frames` + 1 |
//! | peer closes (or resets)                | connection task ends; the peer is probed (below) |
//! | network closed or shutdown             | connection task ends, socket closed           |
//!
//! # A peer whose process is gone
//!
//! When a connection from a known peer ends (closed or reset, not by this node's shutdown),
//! the receiver tries to connect to that peer's listener, twice, 50 ms apart. A refused
//! connect means nothing listens there any more: the process died (or is restarting), since a
//! live one accepts. That peer is then reported on [`PeerInbox::unreachable`], and the driver
//! tells the Raft core ([`corum_raft::RaftCore::peer_unreachable`]), which replaces a dead
//! leader at once instead of after the fetch timeout. A connect that succeeds or times out
//! reports nothing: a crashed host or a partition still waits out the fetch timeout. The
//! report only speeds up an election; a wrong one costs a pre-vote round.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::{Rc, Weak};
use std::time::Duration;

use corum_raft::Message;
use corum_runtime::tls::{IdentityCheck, TlsClient, TlsIdentity, TlsServer};
use corum_runtime::transport::{self, ConnectionConfig, Listener, PeerConfig, ReconnectingPeer};
use corum_runtime::{BackoffConfig, ShutdownSignal, TcpConnection};
use corum_types::{NodeId, Uuid};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::{GlommioError, ResourceType, Task};

use crate::error::PeerError;

/// One Raft message on the wire between two controllers.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PeerEnvelope {
    /// The sender's cluster; the receiver refuses any other.
    pub cluster_id: Uuid,
    pub from: NodeId,
    /// The addressee; the receiver refuses an envelope for another node. An id in
    /// [`BOOTSTRAP_IDS`] stands for whichever node listens at a bootstrap server's address
    /// (the sender does not know its id yet) and is accepted by every node.
    pub to: NodeId,
    pub message: Message,
    /// Where nodes the addressee may have no link to listen: the sender itself when it is not
    /// a voter (an observer's Fetch or AddVoter needs an answer), and the leader it knows of
    /// (a controller that found the leader through a bootstrap server learns where to fetch
    /// from). Empty between voters. See [`PeerRoute`].
    pub routes: Vec<PeerRoute>,
}

/// A node's Raft listener, as an envelope passes it on. At most [`ROUTES_MAX`] per envelope.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct PeerRoute {
    pub id: NodeId,
    pub host: String,
    pub port: u16,
}

/// Routes per envelope.
pub const ROUTES_MAX: usize = 2;

/// Links a node opens from routes (controllers joining or observing): more are ignored.
pub const LEARNED_LINKS_MAX: usize = 64;

/// Node ids an admin's voter changes are stepped into the Raft core from, one per call (from
/// the top down; see `RaftHandle::voter_change`): no controller or broker takes ids this high.
pub const ADMIN_IDS: std::ops::RangeInclusive<u32> = (u32::MAX - (1 << 20))..=u32::MAX;

/// Ids a node gives the addresses of `controller.quorum.bootstrap.servers` (below
/// [`ADMIN_IDS`]): no controller or broker takes ids this high.
pub const BOOTSTRAP_IDS: std::ops::Range<u32> = (u32::MAX - (1 << 21))..(u32::MAX - (1 << 20) - 1);

impl PeerRoute {
    /// Checks what a route must be before a node dials it.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.host.is_empty() || self.host.len() > 255 {
            return Err("a route's host must have 1 to 255 bytes");
        }
        if self.port == 0 {
            return Err("a route's port must not be 0");
        }
        if BOOTSTRAP_IDS.contains(&self.id.0) || ADMIN_IDS.contains(&self.id.0) {
            return Err("a route names a reserved node id");
        }
        Ok(())
    }
}

impl PeerEnvelope {
    /// What a node's peer listener checks of an envelope it received (after the transport
    /// validated the archive and it was deserialized), before stepping its message into the
    /// Raft core: the cluster is `cluster_id`, the addressee is `me` (or a bootstrap id), at
    /// most [`ROUTES_MAX`] routes, each valid ([`PeerRoute::validate`]), and the message meets
    /// [`Message::validate`]. The listener closes the connection on an error. Public so the
    /// fuzz target `peer_envelope` checks exactly what the listener does.
    pub fn check(&self, cluster_id: Uuid, me: NodeId) -> Result<(), PeerError> {
        if self.cluster_id != cluster_id {
            return Err(PeerError::WrongCluster {
                from: self.from,
                expected: cluster_id,
                found: self.cluster_id,
            });
        }
        if self.to != me && !BOOTSTRAP_IDS.contains(&self.to.0) {
            return Err(PeerError::WrongAddressee {
                from: self.from,
                to: self.to,
                me,
            });
        }
        if self.routes.len() > ROUTES_MAX {
            return Err(PeerError::InvalidRoute {
                from: self.from,
                reason: "more routes than an envelope carries",
            });
        }
        for r in &self.routes {
            r.validate().map_err(|reason| PeerError::InvalidRoute {
                from: self.from,
                reason,
            })?;
        }
        self.message
            .validate()
            .map_err(|source| PeerError::InvalidMessage {
                from: self.from,
                source,
            })
    }
}

/// A message received from a peer, checked, for [`corum_raft::RaftCore::step`], with the
/// routes its envelope carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inbound {
    pub from: NodeId,
    pub message: Message,
    pub routes: Vec<PeerRoute>,
}

/// A message on its way to one peer, with the routes its envelope carries.
#[derive(Debug)]
struct Outgoing {
    message: Message,
    routes: Vec<PeerRoute>,
}

/// Settings of a [`PeerNetwork`], derived from the node's configuration by
/// [`crate::config::components::peer_network`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerNetworkConfig {
    pub cluster_id: Uuid,
    /// This node.
    pub node_id: NodeId,
    /// Where the peer listener binds (port 0 picks a free one: see [`PeerNetwork::local_addr`]).
    pub listen: SocketAddr,
    /// Messages queued per peer before `send` drops.
    pub outbound_queue_capacity: usize,
    /// Inbound messages queued for the Raft driver before receiving pushes back.
    pub inbound_queue_capacity: usize,
    /// Frame limits of every peer connection, both ways. Must hold the largest append
    /// (`corum.raft.batch.bytes.max` plus envelope overhead).
    pub connection: ConnectionConfig,
    /// Reconnect backoff of the outbound links.
    pub backoff: BackoffConfig,
    /// A message not written within this (connecting excluded) drops its connection.
    pub send_timeout: Duration,
}

/// Bytes an envelope adds around the batch payloads of one message (ids, offsets, vectors of
/// batch headers), generously: a frame limit of `batch_bytes_max + ENVELOPE_OVERHEAD_BYTES`
/// holds any append the Raft core builds.
pub const ENVELOPE_OVERHEAD_BYTES: u32 = 64 << 10;

impl PeerNetworkConfig {
    /// Checks every limit is usable.
    pub fn validate(&self) -> Result<(), PeerError> {
        let bad = |field, reason: &str| {
            Err(PeerError::Config {
                field,
                reason: reason.to_owned(),
            })
        };
        if self.outbound_queue_capacity == 0 {
            return bad("outbound_queue_capacity", "must be > 0");
        }
        if self.inbound_queue_capacity == 0 {
            return bad("inbound_queue_capacity", "must be > 0");
        }
        if self.connection.payload_bytes_max < ENVELOPE_OVERHEAD_BYTES {
            return bad(
                "connection.payload_bytes_max",
                "must hold at least one envelope's overhead (64 KiB)",
            );
        }
        if self.send_timeout.is_zero() {
            return bad("send_timeout", "must be > 0");
        }
        self.backoff.validate()?;
        Ok(())
    }
}

/// The first address `host:port` resolves to (a blocking lookup: call it at start-up or on a
/// voter change, not on the Raft loop's hot path).
pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, PeerError> {
    use std::net::ToSocketAddrs;
    let err = |reason: String| PeerError::Resolve {
        host: host.to_owned(),
        port,
        reason,
    };
    (host, port)
        .to_socket_addrs()
        .map_err(|e| err(e.to_string()))?
        .next()
        .ok_or_else(|| err("no address".into()))
}

#[derive(Debug, Default)]
struct LinkCounters {
    sent: Cell<u64>,
    dropped_queue_full: Cell<u64>,
    send_failed: Cell<u64>,
    send_timeouts: Cell<u64>,
    connects: Cell<u64>,
}

fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// Counters of one outbound link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerStats {
    pub addr: Option<SocketAddr>,
    /// Messages written to a connection.
    pub sent: u64,
    /// Messages dropped because the queue was full.
    pub dropped_queue_full: u64,
    /// Messages dropped because the connection failed while sending them.
    pub send_failed: u64,
    /// Messages dropped because writing them took longer than the send timeout (the
    /// connection was dropped too).
    pub send_timeouts: u64,
    /// Successful connects (1 + reconnects).
    pub connects: u64,
    /// Messages waiting in the queue now.
    pub queued: usize,
}

/// Counters of the receiving side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InboundStats {
    pub connections_accepted: u64,
    /// Envelopes handed to the inbox.
    pub received: u64,
    /// Connections closed for a wrong cluster id, a wrong addressee or an invalid message.
    pub rejected_envelopes: u64,
    /// Connections closed for a bad frame (header, checksum, size, archive).
    pub bad_frames: u64,
    /// Peers reported gone: their connection closed and their listener refused a probe.
    pub peers_gone: u64,
}

#[derive(Debug, Default)]
struct InboundCounters {
    connections_accepted: Cell<u64>,
    received: Cell<u64>,
    rejected_envelopes: Cell<u64>,
    bad_frames: Cell<u64>,
    peers_gone: Cell<u64>,
}

struct Link {
    addr: SocketAddr,
    queue: LocalSender<Outgoing>,
    counters: Rc<LinkCounters>,
    stop: ShutdownSignal,
    task: Task<()>,
}

/// The receiving end the Raft driver reads: checked messages from every peer, in arrival order
/// per connection.
#[derive(Debug)]
pub struct PeerInbox {
    rx: LocalReceiver<Inbound>,
    down: LocalReceiver<NodeId>,
}

impl PeerInbox {
    /// The next message; `None` once the network is closed and the inbox drained.
    pub async fn recv(&self) -> Option<Inbound> {
        self.rx.recv().await
    }

    /// The next peer found gone (see the module doc); `None` once the network is closed.
    pub async fn unreachable(&self) -> Option<NodeId> {
        self.down.recv().await
    }
}

/// Reports of gone peers queued for the driver; more are dropped (each is a hint).
const UNREACHABLE_QUEUE: usize = 16;
/// Connect attempts of a probe, this far apart, each bounded by the same time.
const PROBE_ATTEMPTS: u32 = 2;
const PROBE_INTERVAL: Duration = Duration::from_millis(50);

/// The peer transport of one node, living on one glommio shard (the Raft shard). See the
/// module doc for the model.
pub struct PeerNetwork {
    config: PeerNetworkConfig,
    local: SocketAddr,
    /// Shared with the receiver, which probes a peer at its link's address.
    links: Rc<RefCell<BTreeMap<NodeId, Link>>>,
    /// Links opened from routes ([`PeerNetwork::learn_route`]).
    learned: Cell<usize>,
    /// Where this node listens, as links introduce it ([`PeerNetwork::set_own_route`]).
    own_route: RefCell<Option<PeerRoute>>,
    inbound: Rc<InboundCounters>,
    /// Fired by [`PeerNetwork::close`], on drop, or when the caller's shutdown fires.
    stop: ShutdownSignal,
    listener: RefCell<Option<Task<u64>>>,
    /// What links present when the controller listener is TLS.
    tls_client: Option<Rc<TlsClient>>,
}

/// The TLS of the controller listener (see the module doc): the listener's side and the
/// dialer's, both from the controller listener's keystore and truststore.
#[derive(Clone, Debug)]
pub struct PeerTls {
    pub server: Rc<TlsServer>,
    pub client: Rc<TlsClient>,
}

/// The controller prefix of a certificate name: `controller-<node id>`.
pub const CONTROLLER_NAME_PREFIX: &str = "controller-";

/// The node ids a certificate names as `controller-<id>` (common names and DNS names).
pub fn controller_ids(identity: &TlsIdentity) -> Vec<NodeId> {
    let mut ids: Vec<NodeId> = identity
        .common_names
        .iter()
        .chain(&identity.dns_names)
        .filter_map(|n| n.strip_prefix(CONTROLLER_NAME_PREFIX))
        .filter_map(|id| id.parse::<u32>().ok())
        .map(NodeId)
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The controller listener's identity check: a certificate that names a controller.
pub fn controller_identity_check() -> IdentityCheck {
    std::sync::Arc::new(|identity: &TlsIdentity| {
        if controller_ids(identity).is_empty() {
            Err(format!(
                "the certificate names no controller (a common name or DNS name {CONTROLLER_NAME_PREFIX}<node id>)"
            ))
        } else {
            Ok(())
        }
    })
}

impl std::fmt::Debug for PeerNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerNetwork")
            .field("node_id", &self.config.node_id)
            .field("local", &self.local)
            .field("peers", &self.links.borrow().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl PeerNetwork {
    /// Binds the peer listener and starts accepting. Must run inside a glommio executor. The
    /// network stops when `shutdown` fires, on [`PeerNetwork::close`], or when dropped.
    pub fn bind(
        config: PeerNetworkConfig,
        shutdown: &ShutdownSignal,
    ) -> Result<(PeerNetwork, PeerInbox), PeerError> {
        PeerNetwork::bind_tls(config, shutdown, None)
    }

    /// [`PeerNetwork::bind`] with mutual TLS on the listener and on every link when `tls` is
    /// set (see the module doc).
    pub fn bind_tls(
        config: PeerNetworkConfig,
        shutdown: &ShutdownSignal,
        tls: Option<PeerTls>,
    ) -> Result<(PeerNetwork, PeerInbox), PeerError> {
        config.validate()?;
        let listener = Listener::bind(config.listen, config.connection)?
            .with_tls(tls.as_ref().map(|t| t.server.clone()));
        let local = listener.local_addr();
        let stop = ShutdownSignal::detached();
        {
            let (outer, stop) = (shutdown.clone(), stop.clone());
            glommio::spawn_local(async move {
                futures_lite::future::or(outer.wait(), stop.wait()).await;
                stop.fire();
            })
            .detach();
        }
        let (tx, rx) = local_channel::new_bounded(config.inbound_queue_capacity);
        let (down_tx, down_rx) = local_channel::new_bounded(UNREACHABLE_QUEUE);
        let inbound = Rc::new(InboundCounters::default());
        let links = Rc::new(RefCell::new(BTreeMap::new()));
        let receiver = Rc::new(Receiver {
            cluster_id: config.cluster_id,
            me: config.node_id,
            inbox: tx,
            down: down_tx,
            links: Rc::downgrade(&links),
            connection: config.connection,
            counters: inbound.clone(),
            stop: stop.clone(),
        });
        let task = glommio::spawn_local(listener.serve(stop.clone(), None, move |conn| {
            receiver.clone().handle(conn)
        }));
        let network = PeerNetwork {
            config,
            local,
            links,
            learned: Cell::new(0),
            own_route: RefCell::new(None),
            inbound,
            stop,
            listener: RefCell::new(Some(task)),
            tls_client: tls.map(|t| t.client),
        };
        Ok((network, PeerInbox { rx, down: down_rx }))
    }

    /// The listener's address (the chosen port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn config(&self) -> &PeerNetworkConfig {
        &self.config
    }

    /// Opens an outbound link to `id` at `addr` (connecting lazily, on the first message).
    pub fn add_peer(&self, id: NodeId, addr: SocketAddr) -> Result<(), PeerError> {
        if id == self.config.node_id {
            return Err(PeerError::InvalidPeer {
                id,
                reason: "that is this node",
            });
        }
        if self.links.borrow().contains_key(&id) {
            return Err(PeerError::InvalidPeer {
                id,
                reason: "a link to it exists",
            });
        }
        if self.stop.is_triggered() {
            return Err(PeerError::Closed);
        }
        let peer = ReconnectingPeer::new(
            addr,
            PeerConfig {
                connection: self.config.connection,
                backoff: self.config.backoff,
                connect_attempts_max: None,
            },
        )?
        .with_tls(self.tls_client.clone());
        let (tx, rx) = local_channel::new_bounded(self.config.outbound_queue_capacity);
        let counters = Rc::new(LinkCounters::default());
        let link_stop = ShutdownSignal::detached();
        {
            let (net, link) = (self.stop.clone(), link_stop.clone());
            glommio::spawn_local(async move {
                futures_lite::future::or(net.wait(), link.wait()).await;
                link.fire();
            })
            .detach();
        }
        let task = glommio::spawn_local(run_link(
            Sender {
                cluster_id: self.config.cluster_id,
                from: self.config.node_id,
                to: id,
                own_route: self.own_route.borrow().clone(),
            },
            peer,
            rx,
            counters.clone(),
            link_stop.clone(),
            self.config.send_timeout,
        ));
        self.links.borrow_mut().insert(
            id,
            Link {
                addr,
                queue: tx,
                counters,
                stop: link_stop,
                task,
            },
        );
        Ok(())
    }

    /// Opens a link to every voter of `voters` but this node, at its endpoint named
    /// `listener_name` (see [`crate::raft_config::peer_endpoints`]); a link to a voter whose
    /// endpoint changed (UpdateVoter) moves there, one already there stays. Returns the nodes
    /// linked or moved.
    pub fn add_voters(
        &self,
        voters: &corum_raft::VoterSet,
        listener_name: &str,
    ) -> Result<Vec<NodeId>, PeerError> {
        let mut added = Vec::new();
        for (id, ep) in
            crate::raft_config::peer_endpoints(voters, self.config.node_id, listener_name)
        {
            let addr = resolve(&ep.host, ep.port)?;
            if self.relink(id, addr)? {
                added.push(id);
            }
        }
        Ok(added)
    }

    /// Sets the route by which links opened from now on introduce this node: the first
    /// envelope on each new connection carries it, so that a peer with no link back (a new
    /// process, a replaced disk, a controller that joins) can answer.
    ///
    /// A wildcard or empty host (`0.0.0.0`, `::`) is no address to dial: it is not announced.
    pub fn set_own_route(&self, route: PeerRoute) {
        if matches!(route.host.as_str(), "" | "0.0.0.0" | "::" | "[::]") {
            return;
        }
        *self.own_route.borrow_mut() = Some(route);
    }

    /// Opens a link to a node an envelope named a route to, unless one exists or this node
    /// already holds [`LEARNED_LINKS_MAX`] such links (a bound on what peers can make it
    /// dial). Returns whether it linked.
    ///
    /// A node's route to itself (`own`: it came from that node, [`PeerNetwork::set_own_route`])
    /// also moves an existing link to it when the address changed: the node restarted on
    /// another port or host.
    pub fn learn_route(&self, route: &PeerRoute, own: bool) -> Result<bool, PeerError> {
        if route.id == self.config.node_id {
            return Ok(false);
        }
        let linked = self.links.borrow().get(&route.id).map(|l| l.addr);
        match linked {
            Some(at) if own => {
                let addr = resolve(&route.host, route.port)?;
                Ok(at != addr && self.relink(route.id, addr)?)
            }
            Some(_) => Ok(false),
            None if self.learned.get() >= LEARNED_LINKS_MAX => Ok(false),
            None => {
                self.add_peer(route.id, resolve(&route.host, route.port)?)?;
                self.learned.set(self.learned.get() + 1);
                Ok(true)
            }
        }
    }

    /// Moves the link to `id` to `addr` if it goes elsewhere (its queued messages are dropped;
    /// Raft resends). Returns whether it moved.
    pub fn relink(&self, id: NodeId, addr: SocketAddr) -> Result<bool, PeerError> {
        let old = {
            let mut links = self.links.borrow_mut();
            match links.get(&id) {
                Some(l) if l.addr == addr => return Ok(false),
                Some(_) => links.remove(&id),
                None => None,
            }
        };
        if let Some(old) = old {
            // Stopped, then dropped: the task ends at its next await.
            old.stop.fire();
            drop(old.task);
        }
        self.add_peer(id, addr)?;
        Ok(true)
    }

    /// Closes the link to `id` (a removed voter, a departed observer); queued messages are
    /// dropped. Returns whether there was one.
    pub async fn remove_peer(&self, id: NodeId) -> bool {
        let link = self.links.borrow_mut().remove(&id);
        match link {
            Some(link) => {
                link.stop.fire();
                link.task.await;
                true
            }
            None => false,
        }
    }

    /// The nodes with an outbound link.
    pub fn peers(&self) -> Vec<NodeId> {
        self.links.borrow().keys().copied().collect()
    }

    /// Queues `message` for `to` without waiting. A full queue drops the message, counts it
    /// and returns [`PeerError::QueueFull`] (see the module doc: Raft tolerates the loss).
    pub fn send(&self, to: NodeId, message: Message) -> Result<(), PeerError> {
        self.send_routed(to, message, Vec::new())
    }

    /// [`PeerNetwork::send`] with routes for the addressee ([`PeerEnvelope::routes`]).
    pub fn send_routed(
        &self,
        to: NodeId,
        message: Message,
        routes: Vec<PeerRoute>,
    ) -> Result<(), PeerError> {
        debug_assert!(routes.len() <= ROUTES_MAX);
        let links = self.links.borrow();
        let link = links.get(&to).ok_or(PeerError::UnknownPeer { to })?;
        match link.queue.try_send(Outgoing { message, routes }) {
            Ok(()) => Ok(()),
            Err(GlommioError::WouldBlock(ResourceType::Channel(_))) => {
                bump(&link.counters.dropped_queue_full);
                Err(PeerError::QueueFull {
                    to,
                    capacity: self.config.outbound_queue_capacity,
                })
            }
            Err(_) => Err(PeerError::Closed),
        }
    }

    /// Sends every message of a [`corum_raft::Ready`] (`ready.messages`); returns how many
    /// were dropped (full queue or unknown node), each logged at debug level.
    pub fn send_all(&self, messages: Vec<(NodeId, Message)>) -> usize {
        let mut dropped = 0;
        for (to, m) in messages {
            if let Err(e) = self.send(to, m) {
                tracing::debug!(%to, error = %e, "raft message dropped");
                dropped += 1;
            }
        }
        dropped
    }

    /// Counters of the link to `id`.
    pub fn peer_stats(&self, id: NodeId) -> Option<PeerStats> {
        self.links.borrow().get(&id).map(|l| PeerStats {
            addr: Some(l.addr),
            sent: l.counters.sent.get(),
            dropped_queue_full: l.counters.dropped_queue_full.get(),
            send_failed: l.counters.send_failed.get(),
            send_timeouts: l.counters.send_timeouts.get(),
            connects: l.counters.connects.get(),
            queued: l.queue.len(),
        })
    }

    /// Counters of the receiving side.
    pub fn inbound_stats(&self) -> InboundStats {
        InboundStats {
            connections_accepted: self.inbound.connections_accepted.get(),
            received: self.inbound.received.get(),
            rejected_envelopes: self.inbound.rejected_envelopes.get(),
            bad_frames: self.inbound.bad_frames.get(),
            peers_gone: self.inbound.peers_gone.get(),
        }
    }

    /// Stops everything and waits until the listener socket and every link are closed (so
    /// the port can be bound again).
    pub async fn close(self) {
        self.stop.fire();
        let listener = self.listener.borrow_mut().take();
        if let Some(task) = listener {
            task.await;
        }
        let links = std::mem::take(&mut *self.links.borrow_mut());
        for (_, link) in links {
            link.stop.fire();
            link.task.await;
        }
    }
}

impl Drop for PeerNetwork {
    fn drop(&mut self) {
        self.stop.fire();
    }
}

/// Header fields every envelope of one link carries, and the route the first envelope on
/// each new connection adds.
#[derive(Clone)]
struct Sender {
    cluster_id: Uuid,
    from: NodeId,
    to: NodeId,
    own_route: Option<PeerRoute>,
}

async fn run_link(
    header: Sender,
    mut peer: ReconnectingPeer,
    queue: LocalReceiver<Outgoing>,
    counters: Rc<LinkCounters>,
    stop: ShutdownSignal,
    send_timeout: Duration,
) {
    while let Some(Some(out)) = stop.run_until(queue.recv()).await {
        let mut envelope = PeerEnvelope {
            cluster_id: header.cluster_id,
            from: header.from,
            to: header.to,
            message: out.message,
            routes: out.routes,
        };
        // The first envelope on each new connection introduces this node: the peer may be a
        // new process (restarted, or a new replica under a known id) with no link back to it.
        if !peer.is_connected() {
            if let Some(me) = &header.own_route {
                if !envelope.routes.iter().any(|r| r.id == me.id)
                    && envelope.routes.len() < ROUTES_MAX
                {
                    envelope.routes.push(me.clone());
                }
            }
        }
        // Connect first (with backoff, no timeout), then write under the send timeout.
        let result = match peer.connection(&stop).await {
            Ok(conn) => {
                let write = async { Some(conn.send(&envelope).await) };
                let expire = async {
                    // Shutdown also interrupts a stuck write.
                    futures_lite::future::or(glommio::timer::sleep(send_timeout), stop.wait())
                        .await;
                    None
                };
                futures_lite::future::or(write, expire).await
            }
            Err(e) => Some(Err(e)),
        };
        counters.connects.set(peer.connects());
        match result {
            Some(Ok(())) => bump(&counters.sent),
            None => {
                // The frame may be half written: the connection cannot be reused. A reset,
                // not a FIN that would wait behind the unsent bytes of a peer that stopped
                // reading (a paused process): the kernel frees the socket and its buffer at
                // once instead of keeping one orphan per timeout.
                peer.abort();
                if stop.is_triggered() {
                    break;
                }
                bump(&counters.send_timeouts);
                tracing::debug!(to = %header.to, addr = %peer.addr(), ?send_timeout,
                    "raft message dropped: send timed out, reconnecting");
            }
            Some(Err(corum_runtime::Error::ShuttingDown)) => break,
            Some(Err(e)) => {
                // A write error broke the connection; the next `connection()` replaces it.
                bump(&counters.send_failed);
                tracing::debug!(to = %header.to, addr = %peer.addr(), error = %e,
                    "raft message dropped: send failed");
            }
        }
    }
}

/// The state every accepted connection's task shares.
struct Receiver {
    cluster_id: Uuid,
    me: NodeId,
    inbox: LocalSender<Inbound>,
    down: LocalSender<NodeId>,
    links: Weak<RefCell<BTreeMap<NodeId, Link>>>,
    connection: ConnectionConfig,
    counters: Rc<InboundCounters>,
    stop: ShutdownSignal,
}

/// Lines about refused envelopes, per second at most (a replaying or misdirected peer
/// reconnects as fast as it likes).
static REJECTED_LOG: corum_runtime::LogLimiter = corum_runtime::LogLimiter::new(10);

impl Receiver {
    fn check(&self, envelope: &PeerEnvelope) -> Result<(), PeerError> {
        envelope.check(self.cluster_id, self.me)
    }

    async fn handle(self: Rc<Self>, mut conn: TcpConnection) -> corum_runtime::Result<()> {
        bump(&self.counters.connections_accepted);
        let peer = conn.peer();
        let mut from = None;
        loop {
            let Some(received) = self.stop.run_until(conn.recv::<PeerEnvelope>()).await else {
                return Ok(());
            };
            let validated = match received {
                Ok(v) => v,
                Err(
                    e @ (corum_runtime::Error::BadFrame { .. }
                    | corum_runtime::Error::InvalidPayload { .. }),
                ) => {
                    // The transport already logged the reason and closed the connection.
                    bump(&self.counters.bad_frames);
                    return Err(e);
                }
                // Closed by the peer, reset, or another IO error: nothing to count, but a
                // peer that closed may be gone.
                Err(e) => {
                    if let Some(from) = from {
                        self.probe(from).await;
                    }
                    return Err(e);
                }
            };
            let envelope: PeerEnvelope =
                rkyv::deserialize::<PeerEnvelope, rkyv::rancor::Error>(validated.get())
                    .expect("deserializing a validated archive into owned values cannot fail");
            if let Err(e) = self.check(&envelope) {
                bump(&self.counters.rejected_envelopes);
                if let Some(suppressed) = REJECTED_LOG.allow() {
                    tracing::warn!(%peer, error = %e, suppressed, "closing peer connection");
                }
                conn.close().await;
                return Ok(());
            }
            if let Some(identity) = conn.peer_identity() {
                if !controller_ids(identity).contains(&envelope.from) {
                    let e = PeerError::NotTheCertifiedController {
                        from: envelope.from,
                        principal: identity.principal.clone(),
                    };
                    bump(&self.counters.rejected_envelopes);
                    tracing::warn!(%peer, error = %e, "closing peer connection");
                    conn.close().await;
                    return Ok(());
                }
            }
            from = Some(envelope.from);
            let inbound = Inbound {
                from: envelope.from,
                message: envelope.message,
                routes: envelope.routes,
            };
            match self.stop.run_until(self.inbox.send(inbound)).await {
                Some(Ok(())) => bump(&self.counters.received),
                // Shutdown, or the driver dropped its inbox: nobody reads any more.
                None | Some(Err(_)) => return Ok(()),
            }
        }
    }
}

impl Receiver {
    /// Reports `peer` unreachable if its listener refuses connections (see the module doc).
    async fn probe(&self, peer: NodeId) {
        for attempt in 0..PROBE_ATTEMPTS {
            if attempt > 0
                && self
                    .stop
                    .run_until(glommio::timer::sleep(PROBE_INTERVAL))
                    .await
                    .is_none()
            {
                return;
            }
            let Some(addr) = self
                .links
                .upgrade()
                .and_then(|links| links.borrow().get(&peer).map(|l| l.addr))
            else {
                return;
            };
            let connect = async { Some(transport::connect(addr, self.connection).await) };
            let expire = async {
                glommio::timer::sleep(PROBE_INTERVAL).await;
                None
            };
            match self
                .stop
                .run_until(futures_lite::future::or(connect, expire))
                .await
            {
                // Shutdown.
                None => return,
                Some(Some(Err(corum_runtime::Error::Io { source, .. })))
                    if source.kind() == std::io::ErrorKind::ConnectionRefused =>
                {
                    tracing::info!(%peer, %addr,
                        "peer connection closed and its listener refuses connections: reporting its process gone");
                    bump(&self.counters.peers_gone);
                    let _ = self.down.try_send(peer);
                    return;
                }
                // It accepted (alive), or another error / no answer in time: no report.
                Some(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_raft::message::{
        AppendRequest, FetchRequest, FetchResponse, FetchResult, VoteRequest,
    };
    use corum_raft::{Batch, ReplicaKey};
    use corum_types::{Epoch, LogOffset};
    use proptest::prelude::*;

    fn arb_batches() -> impl Strategy<Value = (u64, Vec<Batch>)> {
        (
            0u64..1000,
            proptest::collection::vec(
                (
                    0u32..4,
                    0u64..3,
                    proptest::collection::vec(any::<u8>(), 0..16),
                ),
                0..4,
            ),
        )
            .prop_map(|(start, bs)| {
                let mut at = LogOffset(start);
                let batches = bs
                    .into_iter()
                    .map(|(n, gap, p)| {
                        let b = Batch {
                            base_offset: at.add(gap / 2),
                            epoch: Epoch(1),
                            record_count: n,
                            control: false,
                            timestamp_ms: -1,
                            payload: p.into(),
                        };
                        at = b.end_offset();
                        b
                    })
                    .collect();
                (start, batches)
            })
    }

    fn arb_message() -> impl Strategy<Value = Message> {
        prop_oneof![
            arb_batches().prop_map(|(start, batches)| Message::Append(AppendRequest {
                epoch: Epoch(2),
                leader: NodeId(1),
                seq: 3,
                prev_end: LogOffset(start),
                prev_epoch: Epoch(1),
                batches,
                high_watermark: LogOffset(start),
                snapshot: None,
            })),
            (arb_batches(), any::<u64>()).prop_map(|((start, batches), hwm)| {
                Message::FetchResponse(FetchResponse {
                    epoch: Epoch(2),
                    leader: Some(NodeId(1)),
                    result: FetchResult::Batches {
                        fetch_offset: LogOffset(start),
                        last_fetched_epoch: Epoch(1),
                        batches,
                        high_watermark: LogOffset(hwm),
                    },
                })
            }),
            any::<u64>().prop_map(|e| Message::Vote(VoteRequest {
                epoch: Epoch(e),
                candidate: ReplicaKey {
                    id: NodeId(2),
                    directory_id: Uuid([2; 16]),
                },
                last_epoch: Epoch(e / 2),
                end_offset: LogOffset(e / 3),
                pre_vote: e % 2 == 0,
            })),
            any::<u64>().prop_map(|o| Message::Fetch(FetchRequest {
                epoch: Epoch(1),
                replica: ReplicaKey {
                    id: NodeId(9),
                    directory_id: Uuid::ZERO,
                },
                fetch_offset: LogOffset(o),
                last_fetched_epoch: Epoch(1),
                high_watermark: LogOffset(o),
                wait_max_ms: 500,
            })),
        ]
    }

    fn arb_routes() -> impl Strategy<Value = Vec<PeerRoute>> {
        proptest::collection::vec(
            (any::<u32>(), "[a-z0-9.]{0,20}", any::<u16>()).prop_map(|(id, host, port)| {
                PeerRoute {
                    id: NodeId(id),
                    host,
                    port,
                }
            }),
            0..=ROUTES_MAX,
        )
    }

    proptest! {
        /// An envelope survives a frame round trip through the runtime's encoder and
        /// validator, and flipped bytes give an error or a valid envelope, never a panic.
        #[test]
        fn envelope_round_trip(m in arb_message(), routes in arb_routes(), at in any::<prop::sample::Index>(), x in 1u8..) {
            let e = PeerEnvelope { cluster_id: Uuid([5; 16]), from: NodeId(1), to: NodeId(2), message: m, routes };
            let mut buf = rkyv::util::AlignedVec::new();
            corum_runtime::message::encode_frame(&e, &mut buf, 1 << 20).unwrap();
            let v = corum_runtime::message::decode_frame::<PeerEnvelope>(&buf, 1 << 20).unwrap();
            let back: PeerEnvelope = rkyv::deserialize::<_, rkyv::rancor::Error>(v.get()).unwrap();
            prop_assert_eq!(&back, &e);
            let i = at.index(buf.len());
            buf[i] ^= x;
            if let Ok(v) = corum_runtime::message::decode_frame::<PeerEnvelope>(&buf, 1 << 20) {
                let m: PeerEnvelope = rkyv::deserialize::<_, rkyv::rancor::Error>(v.get()).unwrap();
                let _ = m.message.validate();
                for r in &m.routes {
                    let _ = r.validate();
                }
            }
        }
    }

    /// A numeric host resolves without a lookup (no test depends on DNS).
    #[test]
    fn numeric_hosts_resolve() {
        assert_eq!(
            resolve("127.0.0.1", 9).unwrap(),
            "127.0.0.1:9".parse::<SocketAddr>().unwrap()
        );
    }

    /// Each config rule rejects a broken value; the defaults for a node are valid.
    #[test]
    fn config_rules() {
        let ok = crate::config::components::peer_network(
            &crate::config::NodeConfig::for_tests(),
            Uuid([1; 16]),
            "127.0.0.1:0".parse().unwrap(),
        );
        ok.validate().unwrap();
        for bad in [
            PeerNetworkConfig {
                outbound_queue_capacity: 0,
                ..ok
            },
            PeerNetworkConfig {
                inbound_queue_capacity: 0,
                ..ok
            },
            PeerNetworkConfig {
                connection: ConnectionConfig {
                    payload_bytes_max: 100,
                    nodelay: true,
                },
                ..ok
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(PeerError::Config { .. })),
                "{bad:?}"
            );
        }
    }
}
