//! The client-facing RPC server (brokers and admins) over the runtime's frames. Its clients
//! use `corum-protocol`'s [`corum_protocol::RpcConnection`] (one connection) or
//! `corum-client`'s `ControllerClient` (leader following).
//!
//! # Connections
//!
//! [`RpcServer::run`] accepts until shutdown, one task per connection, within the node's
//! connection limits ([`crate::connections`]: `max.connections` across the client and Kafka
//! listeners, `max.connections.per.ip`; a connection over a limit is closed at once, logged
//! rate-limited and counted in [`RpcServerStats::refused`]). A connection is a reader loop
//! plus a writer task; each request runs in its own task, at most
//! [`RpcServerConfig::in_flight_per_connection_max`] per connection (the reader stops reading
//! while the cap is reached, so TCP pushes back), and answers in any order, matched by the
//! request's `correlation_id`. A connection on which nothing arrives for
//! `connections.max.idle.ms` while none of its requests is served is closed; so is one whose
//! answers cannot be written for `corum.connection.send.timeout.ms` (a client that stopped
//! reading: first backpressured by the in-flight cap, then closed).
//!
//! # What each frame gets
//!
//! The server reads frames with the runtime's reader ([`FrameReader::recv_payload`]: header,
//! limit, checksum, padding checked) and decodes each payload itself, so that a payload failing
//! rkyv validation does not break an intact stream.
//!
//! | frame                                                   | answer                                         | connection |
//! |---------------------------------------------------------|------------------------------------------------|------------|
//! | intact, payload a valid [`RequestFrame`]                 | the controller service's answer (after commit) | kept       |
//! | intact, payload not a valid request                     | `Malformed`, id from [`peek_correlation_id`] (0 if too short) | kept |
//! | header announces more than `request_bytes_max`          | `RequestTooLarge`, correlation id 0 (the body is never read) | closed |
//! | bad magic, version, flags, checksum, padding, truncated | none                                           | closed     |
//! | Raft request (`is_raft()`)                              | `DescribeQuorum` from the driver's status; `Fetch`/`FetchSnapshot` of an observer stepped into the leader's core ([`RaftHandle::observer_request`], `NotController` on a non-leader, `wait_max_ms` capped at half the request's timeout); voter changes ([`voter_change`], below) | kept |
//!
//! With an authorizer (`authorizer.class.name`), a decoded request is authorized before it is
//! served, as the connection's principal ([`crate::principal`]: its client certificate's, or
//! `User:ANONYMOUS`) with Kafka's ACL model ([`crate::rpc_auth`]): refused whole with
//! `AuthorizationFailed`, or served without its refused items, which its answer lists in their
//! place. Without one nothing is checked.
//!
//! Closing waits for the requests already in flight on that connection to be answered
//! (bounded by their timeouts), then shuts the write side. Other connections are untouched.
//!
//! # Leader hints
//!
//! The controller service names the leader by its Raft (controller listener) endpoint. The
//! server rewrites a `NotController` hint to the leader's *client* endpoint when
//! [`RpcServer::set_client_endpoints`] names one for that node id; otherwise the hint passes
//! unchanged (a deployment where clients and Raft share the listener needs no map).
//!
//! The voter changes (AddVoter, RemoveVoter, UpdateVoter) go to the leader's Raft core as an
//! admin's ([`RaftHandle::voter_change`]) and are answered once the new voter set commits; the
//! driver links to a voter the set gains.
//!
//! # Not yet
//!
//! - A node knows only its own client endpoint: a `NotController` hint names any other leader
//!   by its Raft endpoint, so clients find it among their bootstrap servers (see
//!   `corum_client::ControllerClient`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use corum_runtime::frame::FrameError;
use corum_runtime::tls::{NetStream, TlsServer};
use corum_runtime::transport::{FrameReader, FrameWriter};
use corum_runtime::{LogLimiter, ShutdownSignal};
use corum_types::{NodeId, Uuid};
use futures_lite::AsyncWrite;
use glommio::channels::local_channel;
use glommio::net::{TcpListener, TcpStream};
use glommio::sync::Semaphore;

use crate::acl_slot::AclSlot;
use crate::connections::{self, ConnectionGate, ConnectionLimits};
use crate::dispatch::raft_request_timeout_ms;
use crate::driver::{DriverStatus, RaftHandle};
use crate::error::DriverError;
use crate::error::{ProtocolError, RpcServerError};
use crate::principal;
use crate::protocol::{
    decode_request, peek_correlation_id, rpc_error_for, DescribeQuorumResponse, LeaderHint,
    ReplicaState, RequestBody, RequestFrame, ResponseBody, ResponseFrame, RpcError,
};
use crate::raft_features;
use crate::rpc_auth::{self, Authorized};
use corum_kafka::auth::{Gate, Session};
use corum_raft::Message;

/// Settings of an [`RpcServer`], derived from the node's configuration by
/// [`crate::config::components::rpc_server`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RpcServerConfig {
    /// Largest request payload accepted (`socket.request.max.bytes`).
    pub request_bytes_max: u32,
    /// Largest response payload sent (`corum.socket.response.max.bytes`); a larger answer is
    /// replaced by `ResponseTooLarge`.
    pub response_bytes_max: u32,
    /// The connection limits ([`crate::connections`]); the node shares one gate between this
    /// server and its Kafka listeners ([`RpcServer::set_gate`]).
    pub limits: ConnectionLimits,
    /// Requests of one connection being served at once.
    pub in_flight_per_connection_max: usize,
    /// The cluster, for `DescribeQuorum`.
    pub cluster_id: Uuid,
    /// This node, for `DescribeQuorum`.
    pub node_id: NodeId,
}

impl RpcServerConfig {
    /// Refuses zero limits.
    pub fn validate(&self) -> Result<(), RpcServerError> {
        let zero = |field: &'static str| RpcServerError::Config {
            field,
            reason: "must be at least 1".into(),
        };
        if self.request_bytes_max == 0 {
            return Err(zero("request_bytes_max"));
        }
        if self.response_bytes_max == 0 {
            return Err(zero("response_bytes_max"));
        }
        if self.limits.max == 0 {
            return Err(zero("limits.max"));
        }
        if self.in_flight_per_connection_max == 0 {
            return Err(zero("in_flight_per_connection_max"));
        }
        Ok(())
    }
}

/// Counters of an [`RpcServer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpcServerStats {
    /// Connections accepted and served.
    pub accepted: u64,
    /// Connections closed on accept by the connection limits (`max.connections`,
    /// `max.connections.per.ip`).
    pub refused: u64,
    /// Connections open now.
    pub open: u64,
    /// Requests that decoded and were served.
    pub requests: u64,
    /// Frames answered `Malformed` because their payload was not a request.
    pub malformed: u64,
    /// Frames answered `RequestTooLarge` (their connection closed).
    pub too_large: u64,
    /// Connections closed on a framing error.
    pub framing_errors: u64,
    /// Connections whose TLS handshake failed or was refused (logged; nothing read).
    pub handshakes_refused: u64,
    /// Connections closed after `connections.max.idle.ms` with nothing arriving.
    pub closed_idle: u64,
    /// Connections closed because a write of their answers made no progress for
    /// `corum.connection.send.timeout.ms` (the client stopped reading).
    pub closed_slow_consumer: u64,
    /// Requests refused by the authorizer, whole or some of their items
    /// ([`crate::rpc_auth`]).
    pub authorization_refused: u64,
}

struct Shared {
    config: RpcServerConfig,
    acls: AclSlot,
    client_endpoints: HashMap<NodeId, LeaderHint>,
    raft_endpoints: HashMap<NodeId, LeaderHint>,
    raft: RaftHandle,
    stats: Rc<RefCell<RpcServerStats>>,
}

/// The client-facing server of one node. See the module doc.
pub struct RpcServer {
    listener: TcpListener,
    local: SocketAddr,
    config: RpcServerConfig,
    client_endpoints: HashMap<NodeId, LeaderHint>,
    raft_endpoints: HashMap<NodeId, LeaderHint>,
    stats: Rc<RefCell<RpcServerStats>>,
    tls: Option<Rc<TlsServer>>,
    gate: Rc<ConnectionGate>,
    acls: AclSlot,
}

impl RpcServer {
    /// Validates `config` and binds `addr` (port 0 picks one). Must run inside a shard.
    pub fn bind(addr: SocketAddr, config: RpcServerConfig) -> Result<RpcServer, RpcServerError> {
        config.validate()?;
        let bind_err = |e: glommio::GlommioError<()>| RpcServerError::Bind {
            addr,
            reason: e.to_string(),
        };
        let listener = TcpListener::bind(addr).map_err(bind_err)?;
        let local = listener.local_addr().map_err(bind_err)?;
        Ok(RpcServer {
            listener,
            local,
            gate: ConnectionGate::new(config.limits.clone()),
            config,
            client_endpoints: HashMap::new(),
            raft_endpoints: HashMap::new(),
            stats: Rc::default(),
            tls: None,
            acls: AclSlot::default(),
        })
    }

    /// Authorizes every request with `acls`' authorizer, when the node has one
    /// (`authorizer.class.name`; see [`crate::rpc_auth`]); without one, or without this call,
    /// nothing is checked.
    pub fn set_acls(&mut self, acls: AclSlot) {
        self.acls = acls;
    }

    /// Runs a TLS handshake on every connection (the client listener mapped to SSL); a
    /// refused one is logged, counted and closed before any request is read.
    pub fn set_tls(&mut self, tls: Option<Rc<TlsServer>>) {
        self.tls = tls;
    }

    /// Counts this server's connections in `gate` (shared with the node's Kafka listeners)
    /// instead of a gate of its own.
    pub fn set_gate(&mut self, gate: Rc<ConnectionGate>) {
        self.gate = gate;
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Where each node serves clients: `NotController` hints naming one of these ids are
    /// rewritten to it (see the module doc).
    pub fn set_client_endpoints(&mut self, endpoints: impl IntoIterator<Item = LeaderHint>) {
        self.client_endpoints = endpoints.into_iter().map(|h| (h.id, h)).collect();
    }

    /// Where each voter serves Raft (the service's leader hints): the hint of a `NotController`
    /// this server writes itself (observer requests on a non-leader) when no client endpoint
    /// is known for the leader.
    pub fn set_raft_endpoints(&mut self, endpoints: impl IntoIterator<Item = LeaderHint>) {
        self.raft_endpoints = endpoints.into_iter().map(|h| (h.id, h)).collect();
    }

    /// The live counters.
    pub fn stats(&self) -> Rc<RefCell<RpcServerStats>> {
        self.stats.clone()
    }

    /// Serves until `shutdown`; returns the final counters. Controller requests go to the
    /// driver's call table ([`RaftHandle::call`]), Raft requests to the driver. Connection
    /// tasks observe the same signal and end after answering what they have in flight.
    pub async fn run(self, raft: RaftHandle, shutdown: ShutdownSignal) -> RpcServerStats {
        let shared = Rc::new(Shared {
            config: self.config,
            acls: self.acls,
            client_endpoints: self.client_endpoints,
            raft_endpoints: self.raft_endpoints,
            raft,
            stats: self.stats.clone(),
        });
        while let Some((stream, peer)) = accept(&self.listener, self.local, &shutdown).await {
            let Some(admission) = self.gate.admit(LISTENER, peer) else {
                connections::refuse(stream);
                self.stats.borrow_mut().refused += 1;
                continue;
            };
            {
                let mut stats = self.stats.borrow_mut();
                stats.accepted += 1;
                stats.open += 1;
            }
            if let Err(e) = stream.set_write_timeout(Some(shared.config.limits.send_timeout)) {
                tracing::debug!(%peer, error = %e, "cannot set a write timeout");
            }
            let shared = shared.clone();
            let shutdown = shutdown.clone();
            let tls = self.tls.clone();
            glommio::spawn_local(async move {
                match corum_runtime::tls::accepted(stream, peer, tls.as_deref()).await {
                    Ok(stream) => serve_connection(stream, peer, &shared, shutdown).await,
                    Err(_) => shared.stats.borrow_mut().handshakes_refused += 1,
                }
                shared.stats.borrow_mut().open -= 1;
                drop(admission);
            })
            .detach();
        }
        let stats = *self.stats.borrow();
        stats
    }
}

/// The listener's name in log lines (`corum.client.listener.name`'s usual value).
const LISTENER: &str = "CLIENT";

/// Lines about failed accepts, per second at most (out of descriptors repeats every pause).
static ACCEPT_FAILED_LOG: LogLimiter = LogLimiter::new(1);

/// The next connection on `listener` and its peer, or `None` once `shutdown` fires. A failed
/// accept (out of descriptors, a connection reset before it was taken) is logged
/// (rate-limited) and retried after a pause. The Kafka listener accepts the same way.
pub(crate) async fn accept(
    listener: &TcpListener,
    local: SocketAddr,
    shutdown: &ShutdownSignal,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        match shutdown.run_until(listener.accept()).await? {
            Ok(stream) => {
                let unknown: SocketAddr = ([0, 0, 0, 0], 0).into();
                let peer = stream.peer_addr().unwrap_or(unknown);
                return Some((stream, peer));
            }
            Err(e) => {
                if let Some(suppressed) = ACCEPT_FAILED_LOG.allow() {
                    tracing::warn!(addr = %local, error = %e, suppressed, "accept failed");
                }
                let pause = glommio::timer::sleep(Duration::from_millis(10));
                shutdown.run_until(pause).await?;
            }
        }
    }
}

async fn serve_connection(
    stream: NetStream,
    peer: SocketAddr,
    shared: &Rc<Shared>,
    shutdown: ShutdownSignal,
) {
    // Kafka's principal of the connection: its client certificate's, else ANONYMOUS.
    let session = Rc::new(principal::session(stream.identity().as_deref(), peer));
    if stream.identity().is_some() {
        tracing::debug!(%peer, principal = %session.principal, super_user = session.super_user,
            "client authenticated");
    }
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let (reader, writer) = futures_lite::io::split(stream);
    let in_flight_max = shared.config.in_flight_per_connection_max;
    let (tx, rx) = local_channel::new_bounded::<ResponseFrame>(in_flight_max + 1);
    let tx = Rc::new(tx);
    // Fired by the writer when the client stops reading: the reader stops too.
    let hang_up = ShutdownSignal::detached();
    let writer = FrameWriter::new(writer, peer, shared.config.response_bytes_max);
    let writer_task = glommio::spawn_local(write_responses(
        writer,
        rx,
        peer,
        shared.clone(),
        hang_up.clone(),
    ))
    .detach();
    let permits = Rc::new(Semaphore::new(in_flight_max as u64));
    let max = shared.config.request_bytes_max;
    let idle = shared.config.limits.idle;
    // The runtime's reader checks the framing (it logs a bad frame with the peer); the
    // payload is decoded here, so one that is not a request is answered and the stream read on.
    let mut reader = FrameReader::new(reader, peer, max);
    loop {
        // Idle: nothing arrives while none of this connection's requests is being served.
        let busy = || permits.available() < in_flight_max as u64;
        let next = connections::unless_idle(reader.recv_payload(), idle, busy);
        let Some(Some(incoming)) = shutdown.run_until(hang_up.run_until(next)).await else {
            break;
        };
        let Some(incoming) = incoming else {
            shared.stats.borrow_mut().closed_idle += 1;
            connections::log_closed(
                connections::Closed::Idle,
                LISTENER,
                peer,
                format_args!(
                    "idle: no request arrived for connections.max.idle.ms ({} ms)",
                    idle.as_millis()
                ),
            );
            break;
        };
        match incoming {
            Ok(bytes) => {
                let permit = match permits.acquire_static_permit(1).await {
                    Ok(p) => p,
                    Err(_) => break,
                };
                match decode_request(&bytes, max as usize) {
                    Ok(archived) => {
                        shared.stats.borrow_mut().requests += 1;
                        let frame = RequestFrame::from_archived(archived);
                        glommio::spawn_local(answer_request(
                            shared.clone(),
                            session.clone(),
                            tx.clone(),
                            permit,
                            frame,
                        ))
                        .detach();
                    }
                    Err(e) => {
                        shared.stats.borrow_mut().malformed += 1;
                        let answer = ResponseFrame {
                            correlation_id: peek_correlation_id(&bytes).unwrap_or(0),
                            body: Err(rpc_error_for(&e)),
                        };
                        drop(permit);
                        if tx.send(answer).await.is_err() {
                            break;
                        }
                    }
                }
            }
            Err(corum_runtime::Error::BadFrame {
                source:
                    FrameError::TooLarge {
                        payload_bytes: len_bytes,
                        ..
                    },
                ..
            }) => {
                // The reader logged it (peer, size, limit); nothing of the body was read.
                shared.stats.borrow_mut().too_large += 1;
                let err = ProtocolError::TooLarge {
                    len_bytes: len_bytes as usize,
                    max_bytes: max as usize,
                };
                let _ = tx
                    .send(ResponseFrame {
                        correlation_id: 0,
                        body: Err(rpc_error_for(&err)),
                    })
                    .await;
                break;
            }
            Err(corum_runtime::Error::ConnectionClosed { .. }) => break,
            Err(_) => {
                shared.stats.borrow_mut().framing_errors += 1;
                break;
            }
        }
    }
    // The writer ends once every in-flight request has sent its answer.
    drop(tx);
    let _ = writer_task.await;
    // `reader` still holds the socket open.
    connections::close_without_waiting(fd);
    drop(reader);
}

async fn write_responses<W: AsyncWrite + Unpin>(
    mut writer: FrameWriter<W>,
    rx: local_channel::LocalReceiver<ResponseFrame>,
    peer: SocketAddr,
    shared: Rc<Shared>,
    hang_up: ShutdownSignal,
) {
    /// Answers written together at most (one write for the burst).
    const BURST_MAX: usize = 256;
    while let Some(first) = rx.recv().await {
        // Every answer ready now leaves in the same write.
        let mut next = Some(first);
        let mut queued = 0;
        while let Some(answer) = next.take() {
            queue_response(&mut writer, &answer);
            queued += 1;
            if queued < BURST_MAX {
                if let Some(Some(a)) = futures_lite::future::poll_once(rx.recv()).await {
                    next = Some(a);
                }
            }
        }
        if let Err(e) = writer.flush_queued().await {
            match &e {
                corum_runtime::Error::Io { source, .. } if connections::is_timeout(source) => {
                    shared.stats.borrow_mut().closed_slow_consumer += 1;
                    connections::log_closed(
                    connections::Closed::SlowConsumer,
                        LISTENER,
                        peer,
                        format_args!(
                            "the client stopped reading its answers: a write made no progress for corum.connection.send.timeout.ms ({} ms)",
                            shared.config.limits.send_timeout.as_millis()
                        ),
                    );
                }
                _ => {
                    tracing::debug!(%peer, error = %e, "cannot write a response; dropping the rest")
                }
            }
            hang_up.fire();
            // Keep draining so request tasks never block on a full channel.
            while rx.recv().await.is_some() {}
            return;
        }
    }
    writer.close().await;
}

/// Queues `answer`, or `ResponseTooLarge` in its place when it is over the response limit.
fn queue_response<W: AsyncWrite + Unpin>(writer: &mut FrameWriter<W>, answer: &ResponseFrame) {
    match writer.queue(answer) {
        Ok(()) => {}
        Err(corum_runtime::Error::MessageTooLarge {
            payload_bytes,
            payload_bytes_max,
        }) => {
            let replacement = ResponseFrame {
                correlation_id: answer.correlation_id,
                body: Err(RpcError::ResponseTooLarge {
                    bytes: payload_bytes as u64,
                    max: u64::from(payload_bytes_max),
                }),
            };
            writer
                .queue(&replacement)
                .expect("a ResponseTooLarge answer is far below any response limit");
        }
        Err(e) => {
            // Encoding a value of our own types does not fail otherwise; say so loudly.
            tracing::error!(error = %e, "cannot encode a response");
        }
    }
}

/// The task of one request: [`handle`]s it and queues its answer for the connection's writer;
/// the request's in-flight permit is given back after. Its future is the allocation every
/// request pays: it stays small (the rare, large ways are boxed), so glibc serves it from its
/// per-thread cache instead of its large-chunk path, which first consolidates every freed
/// small chunk (docs/PERFORMANCE.md, "Every request's task"). `a_request_task_stays_small`
/// keeps it so (and `kafka_server`'s `kafka_request_futures_stay_small` the Kafka listener's).
async fn answer_request(
    shared: Rc<Shared>,
    session: Rc<Session>,
    tx: Rc<local_channel::LocalSender<ResponseFrame>>,
    permit: glommio::sync::StaticPermit,
    frame: RequestFrame,
) {
    let answer = handle(&shared, &session, frame).await;
    let _ = tx.send(answer).await;
    drop(permit);
}

/// Serves one decoded request of `session`: authorized first when the node has an
/// authorizer ([`crate::rpc_auth`]), then [`serve`]d.
async fn handle(shared: &Shared, session: &Session, frame: RequestFrame) -> ResponseFrame {
    match shared.acls.authorizer() {
        None => serve(shared, frame).await,
        // Boxed: its gate and refusals would make every request's task larger (see `serve`).
        Some(authorizer) => Box::pin(handle_authorized(shared, session, authorizer, frame)).await,
    }
}

/// [`handle`] with an authorizer: the request is authorized, its allowed part served and the
/// refused items put back into the answer.
async fn handle_authorized(
    shared: &Shared,
    session: &Session,
    authorizer: std::sync::Arc<corum_controller::acl::Authorizer>,
    frame: RequestFrame,
) -> ResponseFrame {
    let correlation_id = frame.correlation_id;
    let gate = Gate::new(Some(authorizer), session);
    let (body, refused) = match rpc_auth::authorize(&gate, frame.body) {
        Authorized::Refused(failure) => {
            shared.stats.borrow_mut().authorization_refused += 1;
            return ResponseFrame {
                correlation_id,
                body: Err(RpcError::AuthorizationFailed(Box::new(failure))),
            };
        }
        Authorized::Answer(body) => {
            shared.stats.borrow_mut().authorization_refused += 1;
            return ResponseFrame {
                correlation_id,
                body: Ok(body),
            };
        }
        Authorized::Serve { body, refused } => (body, refused),
    };
    if refused.count() > 0 {
        shared.stats.borrow_mut().authorization_refused += 1;
    }
    let answer = serve(
        shared,
        RequestFrame {
            correlation_id,
            timeout_ms: frame.timeout_ms,
            body,
        },
    )
    .await;
    ResponseFrame {
        correlation_id,
        body: refused.apply(&gate, answer.body),
    }
}

/// Serves one decoded (and authorized) request.
async fn serve(shared: &Shared, frame: RequestFrame) -> ResponseFrame {
    let correlation_id = frame.correlation_id;
    if frame.body.is_raft() {
        let raft = &shared.raft;
        let body = match frame.body {
            RequestBody::DescribeQuorum => {
                Ok(ResponseBody::DescribeQuorum(Box::new(describe_quorum(
                    shared.config.cluster_id,
                    shared.config.node_id,
                    &raft.status(),
                ))))
            }
            // Boxed, here and below: the future of every request's task is as large as its
            // largest branch, and a controller write (the common request) needs a small one.
            body @ (RequestBody::Fetch(_) | RequestBody::FetchSnapshot(_)) => {
                Box::pin(observer(raft, body, frame.timeout_ms, |id| shared.hint(id))).await
            }
            body @ (RequestBody::AddVoter(_)
            | RequestBody::RemoveVoter(_)
            | RequestBody::UpdateVoter(_)) => {
                let timeout_ms = raft_request_timeout_ms(frame.timeout_ms);
                Box::pin(voter_change(raft, body, timeout_ms, |id| shared.hint(id))).await
            }
            body => Err(RpcError::NotImplemented {
                api: body.kind().into(),
            }),
        };
        return ResponseFrame {
            correlation_id,
            body,
        };
    }
    let body = raft_features::call(
        &shared.raft,
        frame.body,
        correlation_id,
        frame.timeout_ms,
        |id| shared.hint(id),
    )
    .await;
    let mut answer = ResponseFrame {
        correlation_id,
        body,
    };
    if let Err(RpcError::NotController { leader: Some(hint) }) = &mut answer.body {
        if let Some(client) = shared.client_endpoints.get(&hint.id) {
            *hint = client.clone();
        }
    }
    answer
}

/// An observer's Fetch or FetchSnapshot, served by the leader's Raft core for both of the
/// node's edges (this server, and brokers on the Kafka listener through
/// [`crate::forward::NodeBackend`]); a non-leader answers `NotController` (naming the leader
/// by `hint`) like the controller requests do. A fetch waits at most half the request's
/// timeout (`timeout_ms`, 0 for the default), leaving the other half for the answer to
/// travel back. Any other body is an `Internal` error.
pub(crate) async fn observer(
    raft: &RaftHandle,
    body: RequestBody,
    timeout_ms: u32,
    hint: impl Fn(NodeId) -> Option<LeaderHint>,
) -> Result<ResponseBody, RpcError> {
    let timeout_ms = raft_request_timeout_ms(timeout_ms);
    let message = match body {
        RequestBody::Fetch(mut fetch) => {
            fetch.wait_max_ms = fetch.wait_max_ms.min(timeout_ms / 2);
            Message::Fetch(fetch)
        }
        RequestBody::FetchSnapshot(fetch) => Message::FetchSnapshot(fetch),
        other => {
            return Err(RpcError::Internal {
                reason: format!("{} is not an observer's request", other.kind()),
            })
        }
    };
    if let Some(e) = not_leader(raft, hint) {
        return Err(e);
    }
    let wait = glommio::timer::sleep(Duration::from_millis(timeout_ms));
    let answer = futures_lite::future::or(
        async { Some(raft.observer_request(message).await) },
        async {
            wait.await;
            None
        },
    )
    .await;
    match answer {
        None => Err(RpcError::Timeout {
            timeout_ms: u32::try_from(timeout_ms).unwrap_or(u32::MAX),
        }),
        Some(Ok(Message::FetchResponse(r))) => Ok(ResponseBody::Fetch(Box::new(r))),
        Some(Ok(Message::FetchSnapshotResponse(r))) => Ok(ResponseBody::FetchSnapshot(Box::new(r))),
        Some(Ok(_)) => Err(RpcError::Internal {
            reason: "the Raft core answered an observer with another message than its response"
                .into(),
        }),
        Some(Err(DriverError::ObserverRefused { id, reason })) => Err(RpcError::ObserverRefused {
            replica_id: id,
            reason: reason.into(),
        }),
        Some(Err(_)) => Err(RpcError::NotController { leader: None }),
    }
}

impl Shared {
    /// Where a client reaches node `id`: its client endpoint when known, else its Raft one.
    fn hint(&self, id: NodeId) -> Option<LeaderHint> {
        self.client_endpoints
            .get(&id)
            .or_else(|| self.raft_endpoints.get(&id))
            .cloned()
    }
}

/// `NotController` (naming the leader by `hint` when this node knows one) unless this node
/// leads.
fn not_leader(raft: &RaftHandle, hint: impl Fn(NodeId) -> Option<LeaderHint>) -> Option<RpcError> {
    let status = raft.status();
    (status.raft.role != corum_raft::Role::Leader).then(|| RpcError::NotController {
        leader: status.raft.leader.and_then(hint),
    })
}

/// Whether `body` is a voter change ([`voter_change`] serves it).
pub(crate) fn is_voter_change(body: &RequestBody) -> bool {
    matches!(
        body,
        RequestBody::AddVoter(_) | RequestBody::RemoveVoter(_) | RequestBody::UpdateVoter(_)
    )
}

/// An admin's AddVoter, RemoveVoter or UpdateVoter, served by this node's Raft core
/// ([`RaftHandle::voter_change`]) for both of the node's edges (this server, and the Kafka
/// listener through [`crate::forward::NodeBackend`]): answered once the new voter set
/// commits, or with the core's refusal in the response. A non-leader answers
/// `NotController`, naming the leader by `hint`; no answer within `timeout_ms` is `Timeout`
/// (the change may still commit: describe the quorum to see). Any other body is an
/// `Internal` error (see [`is_voter_change`]).
pub(crate) async fn voter_change(
    raft: &RaftHandle,
    body: RequestBody,
    timeout_ms: u64,
    hint: impl Fn(NodeId) -> Option<LeaderHint>,
) -> Result<ResponseBody, RpcError> {
    type Wrap = fn(corum_raft::message::VoterChangeResponse) -> ResponseBody;
    let (message, wrap): (Message, Wrap) = match body {
        RequestBody::AddVoter(r) => (Message::AddVoter(r), ResponseBody::AddVoter),
        RequestBody::RemoveVoter(r) => (Message::RemoveVoter(r), ResponseBody::RemoveVoter),
        RequestBody::UpdateVoter(r) => (Message::UpdateVoter(r), ResponseBody::UpdateVoter),
        other => {
            return Err(RpcError::Internal {
                reason: format!("{} is not a voter change", other.kind()),
            })
        }
    };
    if let Some(e) = not_leader(raft, hint) {
        return Err(e);
    }
    match raft.voter_change_within(message, timeout_ms).await {
        None => Err(RpcError::Timeout {
            timeout_ms: u32::try_from(timeout_ms).unwrap_or(u32::MAX),
        }),
        Some(Ok(r)) => Ok(wrap(r)),
        Some(Err(_)) => Err(RpcError::NotController { leader: None }),
    }
}

/// What this node's driver status says about the quorum: leader, epoch, high watermark, the
/// voters (with their directory ids and endpoints, from the voter set in force) and this
/// replica's own log end offset. On the leader, every voter's and fetching
/// observer's replication columns (and directory ids) come from
/// [`DriverStatus::replicas`] (see [`DescribeQuorumResponse::with_replica_progress`]); on a
/// non-leader only its own row's replication columns are filled.
pub fn describe_quorum(
    cluster_id: Uuid,
    me: NodeId,
    status: &DriverStatus,
) -> DescribeQuorumResponse {
    let raft = &status.raft;
    let leads = raft.leader == Some(me);
    let own = |id: NodeId| {
        let mine = id == me;
        ReplicaState {
            replica_id: id,
            directory_id: None,
            log_end_offset: mine.then_some(raft.log_end_offset),
            lag: (mine && leads).then_some(0),
            last_fetch_age_ms: mine.then_some(0),
            last_caught_up_age_ms: (mine && leads).then_some(0),
            endpoints: Vec::new(),
        }
    };
    let mut voters: Vec<NodeId> = raft.voters.clone();
    voters.sort_unstable();
    voters.dedup();
    DescribeQuorumResponse {
        cluster_id,
        node_id: me,
        leader_id: raft.leader,
        leader_epoch: raft.epoch,
        high_watermark: raft.high_watermark,
        voters: voters.into_iter().map(own).collect(),
        observers: if raft.is_voter {
            Vec::new()
        } else {
            vec![own(me)]
        },
    }
    .with_voter_set(&status.voter_set)
    .with_replica_progress(raft.log_end_offset, status.now_ms, &status.replicas)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request's task is one allocation of its future and glommio's header: it stays
    /// small (2.4 KiB before the rare ways were boxed).
    #[test]
    fn a_request_task_stays_small() {
        use crate::task_size::{assert_small, future_size};
        assert_small("a request's task", future_size(&answer_request));
    }

    /// Zero limits are refused, naming the field; the defaults pass.
    #[test]
    fn configs_validate() {
        let c = crate::config::components::rpc_server(
            &crate::config::NodeConfig::for_tests(),
            Uuid([1; 16]),
        );
        c.validate().unwrap();
        let bad = RpcServerConfig {
            in_flight_per_connection_max: 0,
            ..c.clone()
        };
        assert!(matches!(
            bad.validate(),
            Err(RpcServerError::Config {
                field: "in_flight_per_connection_max",
                ..
            })
        ));
        let bad = RpcServerConfig {
            limits: ConnectionLimits {
                max: 0,
                ..c.limits.clone()
            },
            ..c
        };
        assert!(bad.validate().is_err());
    }

    fn driver_status(leader: Option<u32>, voters: &[u32], is_voter: bool) -> DriverStatus {
        use corum_types::{Epoch, LogOffset};
        DriverStatus {
            raft: corum_raft::Status {
                role: corum_raft::Role::Follower,
                epoch: Epoch(4),
                leader: leader.map(NodeId),
                voted_for: None,
                high_watermark: LogOffset(10),
                log_start_offset: LogOffset(0),
                log_end_offset: LogOffset(12),
                durable_end_offset: LogOffset(12),
                voters: voters.iter().copied().map(NodeId).collect(),
                is_voter,
                kraft_version: 1,
            },
            stats: corum_raft::Stats::default(),
            log_end_offset: LogOffset(12),
            log_durable_end: LogOffset(12),
            sync_rounds: 0,
            sync_duration: Default::default(),
            running: true,
            replicas: Vec::new(),
            now_ms: 0,
            voter_set: Default::default(),
            calls_waiting: 0,
            calls_held: 0,
            proposals_appended: 0,
            proposals_refused: 0,
            snapshot_end_offset: LogOffset(0),
            snapshots_written: 0,
        }
    }

    /// DescribeQuorum from a status without replica progress (a follower's): voters sorted,
    /// only this replica's own row filled (lag 0 when it leads), a non-voter listed as the one
    /// observer.
    #[test]
    fn describe_quorum_shows_what_the_status_knows() {
        use corum_types::{Epoch, LogOffset};
        let q = describe_quorum(
            Uuid([5; 16]),
            NodeId(1),
            &driver_status(Some(1), &[3, 1, 2], true),
        );
        assert_eq!(q.cluster_id, Uuid([5; 16]));
        assert_eq!((q.leader_id, q.leader_epoch), (Some(NodeId(1)), Epoch(4)));
        assert_eq!(q.high_watermark, LogOffset(10));
        let ids: Vec<_> = q.voters.iter().map(|v| v.replica_id).collect();
        assert_eq!(ids, vec![NodeId(1), NodeId(2), NodeId(3)]);
        assert_eq!(q.voters[0].log_end_offset, Some(LogOffset(12)));
        assert_eq!(q.voters[0].lag, Some(0));
        assert!(q.voters[1..]
            .iter()
            .all(|v| v.log_end_offset.is_none() && v.lag.is_none()));
        assert!(q.observers.is_empty());
        // No voter set in the status: no endpoints, no directory ids.
        assert!(q
            .voters
            .iter()
            .all(|v| v.endpoints.is_empty() && v.directory_id.is_none()));

        // Any node's voter set names every voter's directory id and endpoints.
        let voter = |id: u32| corum_raft::Voter {
            key: corum_raft::ReplicaKey {
                id: NodeId(id),
                directory_id: Uuid([id as u8; 16]),
            },
            endpoints: vec![corum_raft::Endpoint {
                listener: "CONTROLLER".into(),
                host: format!("h{id}"),
                port: 9093,
            }],
        };
        let mut status = driver_status(Some(1), &[1, 2, 3], true);
        status.voter_set = std::sync::Arc::new(
            corum_raft::VoterSet::new(vec![voter(1), voter(2), voter(3)]).unwrap(),
        );
        let q = describe_quorum(Uuid([5; 16]), NodeId(2), &status);
        for (v, id) in q.voters.iter().zip(1u8..) {
            assert_eq!(v.directory_id, Some(Uuid([id; 16])));
            assert_eq!(v.endpoints[0].host, format!("h{id}"));
        }

        let q = describe_quorum(
            Uuid([5; 16]),
            NodeId(7),
            &driver_status(Some(1), &[1, 2, 3], false),
        );
        assert!(q.voters.iter().all(|v| v.log_end_offset.is_none()));
        assert_eq!(q.observers.len(), 1);
        assert_eq!(q.observers[0].replica_id, NodeId(7));
        assert_eq!(q.observers[0].log_end_offset, Some(LogOffset(12)));
        assert_eq!(q.observers[0].lag, None);
    }

    /// On the leader, the status' replica progress fills every voter's and observer's
    /// replication columns: lag against the leader's log end, ages against the core's clock.
    #[test]
    fn describe_quorum_on_the_leader_shows_every_replica() {
        use corum_raft::{ReplicaKey, ReplicaProgress};
        use corum_types::LogOffset;
        let row = |id: u32, dir: u8, voter: bool, end: u64, heard, caught| ReplicaProgress {
            key: ReplicaKey {
                id: NodeId(id),
                directory_id: Uuid([dir; 16]),
            },
            voter,
            log_end_offset: LogOffset(end),
            last_fetch_ms: heard,
            last_caught_up_ms: caught,
        };
        let mut status = driver_status(Some(1), &[1, 2, 3], true);
        status.raft.role = corum_raft::Role::Leader;
        status.now_ms = 1_000;
        status.replicas = vec![
            row(1, 1, true, 12, Some(1_000), Some(1_000)),
            row(2, 2, true, 12, Some(990), Some(990)),
            row(3, 3, true, 4, Some(700), Some(600)),
            row(9, 9, false, 11, Some(995), None),
        ];
        let q = describe_quorum(Uuid([5; 16]), NodeId(1), &status);
        let cols: Vec<_> = q
            .voters
            .iter()
            .chain(&q.observers)
            .map(|r| {
                (
                    r.replica_id.0,
                    r.log_end_offset.map(|o| o.0),
                    r.lag,
                    r.last_fetch_age_ms,
                    r.last_caught_up_age_ms,
                )
            })
            .collect();
        assert_eq!(
            cols,
            vec![
                (1, Some(12), Some(0), Some(0), Some(0)),
                (2, Some(12), Some(0), Some(10), Some(10)),
                (3, Some(4), Some(8), Some(300), Some(400)),
                (9, Some(11), Some(1), Some(5), None),
            ]
        );
        assert_eq!(q.voters[0].directory_id, Some(Uuid([1; 16])));
        assert_eq!(q.voters[1].directory_id, Some(Uuid([2; 16])));
        assert_eq!(q.observers[0].directory_id, Some(Uuid([9; 16])));
        assert_eq!(q.max_follower_lag(), Some(8));
    }
}
