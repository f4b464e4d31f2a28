//! A Kafka listener (`corum.kafka.listener.names`): Kafka's wire protocol for Kafka's clients
//! and tools, on the worker shard. `corum-kafka` parses and translates each request; this
//! module moves the bytes and gives it a [`Backend`] over the node's one call path.
//!
//! # Connections
//!
//! One task per connection, within the node's connection limits ([`crate::connections`]:
//! `max.connections` shared with the client listener, `max.connections.per.ip`; more are
//! closed on accept). The reader reads a size prefix (checked against
//! `socket.request.max.bytes` before anything is buffered), then the request, which must
//! arrive within the request timeout (its buffer grows with the bytes that arrive, not with
//! the size announced); parses it (header and body, once) and starts serving it in its own
//! task. Up to [`KafkaServerConfig::in_flight_per_connection_max`] requests of a connection
//! are served at once — Kafka's clients pipeline — and the writer sends their answers **in
//! request order**, as Kafka's clients require: the answers found finished together in one
//! write (at most 256 or 1 MiB), and never one held back for a later request. At the cap the reader stops reading and TCP
//! pushes back; a write of answers that makes no progress for
//! `corum.connection.send.timeout.ms` (a client that stopped reading) closes the connection,
//! and so does `connections.max.idle.ms` with no request arriving and none being served.
//!
//! | input | effect |
//! |---|---|
//! | a served request | answered in order |
//! | ApiVersions above the served versions | a v0 answer with UNSUPPORTED_VERSION (KIP-511), kept open |
//! | a size above `socket.request.max.bytes`, negative, or below a header | logged with the peer, closed |
//! | an unknown API key, an API or version not served, a body that does not decode | logged with the peer, closed after the answers before it |
//! | a request that does not arrive within the request timeout | logged, closed |
//! | no request for `connections.max.idle.ms`, none in flight | logged, closed |
//! | answers not written for `corum.connection.send.timeout.ms` | logged, closed |
//!
//! On a listener mapped to SASL_PLAINTEXT or SASL_SSL each request first goes through the
//! connection's [`SaslConnection`] (the SASL requests are answered there, in order with the
//! others; see [`corum_kafka::sasl`]); the connection's session takes the principal it
//! authenticated. Each authentication is logged with the peer, mechanism and principal or
//! the user it named and why it failed, and counted.
//!
//! # Any node answers
//!
//! Reads (Metadata, DescribeConfigs, DescribeCluster, ...) are served by any controller from
//! its replayed image. A write reaching a standby controller is forwarded to the active one
//! over the private protocol, to the leader's client listener as its registration names it
//! (`DescribeControllers`); when the leader or its endpoint is unknown the client gets
//! NOT_CONTROLLER and retries as Kafka's clients do. DescribeQuorum is answered by the
//! leader the same way.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corum_kafka::sasl::{Event, Gate, SaslConfig, SaslConnection};
use corum_kafka::{ListenerContext, Outcome, Parsed};
use corum_runtime::tls::{NetStream, TlsServer};
use corum_runtime::ShutdownSignal;
use corum_types::{NodeId, Uuid};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel;
use glommio::net::TcpListener;

use crate::connections::{self, ConnectionGate, ConnectionLimits};
use crate::error::NodeError;
use crate::forward::NodeBackend;
use crate::rpc_server::accept;

/// Settings of a [`KafkaServer`], derived from the node's configuration by
/// [`crate::config::components::kafka_server`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaServerConfig {
    /// The listener's name (`KAFKA`).
    pub listener_name: String,
    /// Where clients reach this listener (`advertised.listeners`).
    pub advertised_host: String,
    pub advertised_port: u16,
    /// `socket.request.max.bytes`.
    pub request_bytes_max: u32,
    /// The connection limits ([`crate::connections`]); the node shares one gate between its
    /// listeners ([`KafkaServer::set_gate`]).
    pub limits: ConnectionLimits,
    pub in_flight_per_connection_max: usize,
    /// The wait of a request naming none, and the longest a request may take to arrive.
    pub request_timeout_ms: u32,
    pub cluster_id: Uuid,
    pub node_id: NodeId,
    /// The name of the client listener on every controller: writes a standby receives are
    /// forwarded to the leader's endpoint of this name.
    pub client_listener_name: String,
    /// The listener the voters reach each other on (the first of
    /// `controller.listener.names`): AddRaftVoter and UpdateRaftVoter must name it.
    pub controller_listener_name: String,
}

/// Counters of a [`KafkaServer`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KafkaServerStats {
    pub accepted: u64,
    pub refused: u64,
    pub open: u64,
    pub requests: u64,
    /// Requests served, by API key (Kafka's `RequestsPerSec{request}`).
    pub by_api: std::collections::BTreeMap<i16, u64>,
    /// Connections closed on a request that could not be served (logged with the reason).
    pub closed_on_bad_request: u64,
    /// Connections whose TLS handshake failed or was refused (logged; nothing read).
    pub handshakes_refused: u64,
    /// SASL authentications that succeeded (re-authentications included).
    pub sasl_authenticated: u64,
    /// SASL authentications refused (wrong password, unknown user, ...; logged, closed).
    pub sasl_failed: u64,
    /// Connections closed after `connections.max.idle.ms` with nothing arriving.
    pub closed_idle: u64,
    /// Connections closed because a write of their answers made no progress for
    /// `corum.connection.send.timeout.ms` (the client stopped reading).
    pub closed_slow_consumer: u64,
    /// Data batches of the metadata log rendered for brokers' fetches: taken from the
    /// listener's cache of renderings, and rendered afresh (as of the last Fetch answered).
    pub rendered_from_cache: u64,
    pub rendered_afresh: u64,
}

/// A bound Kafka listener. See the module doc.
pub struct KafkaServer {
    listener: TcpListener,
    local: SocketAddr,
    config: KafkaServerConfig,
    stats: Rc<RefCell<KafkaServerStats>>,
    tls: Option<Rc<TlsServer>>,
    sasl: Option<Rc<SaslConfig>>,
    gate: Rc<ConnectionGate>,
}

impl KafkaServer {
    /// Binds `addr` (port 0 picks one). Must run inside a shard. An advertised port of 0 is
    /// replaced by the bound one.
    pub fn bind(addr: SocketAddr, mut config: KafkaServerConfig) -> Result<KafkaServer, NodeError> {
        let bind_err = |e: glommio::GlommioError<()>| NodeError::KafkaBind {
            listener: config.listener_name.clone(),
            addr,
            reason: e.to_string(),
        };
        let listener = TcpListener::bind(addr).map_err(bind_err)?;
        let local = listener.local_addr().map_err(bind_err)?;
        if config.advertised_port == 0 {
            config.advertised_port = local.port();
        }
        Ok(KafkaServer {
            listener,
            local,
            gate: ConnectionGate::new(config.limits.clone()),
            config,
            stats: Rc::default(),
            tls: None,
            sasl: None,
        })
    }

    /// Runs a TLS handshake on every connection (the listener mapped to SSL, Kafka's `SSL`
    /// security protocol); a refused one is logged, counted and closed before any request.
    pub fn set_tls(&mut self, tls: Option<Rc<TlsServer>>) {
        self.tls = tls;
    }

    /// Authenticates every connection with SASL before serving it (the listener mapped to
    /// SASL_PLAINTEXT or SASL_SSL): see [`corum_kafka::sasl`].
    pub fn set_sasl(&mut self, sasl: Option<Rc<SaslConfig>>) {
        self.sasl = sasl;
    }

    /// Counts this listener's connections in `gate` (shared with the node's other
    /// client-facing listeners) instead of a gate of its own.
    pub fn set_gate(&mut self, gate: Rc<ConnectionGate>) {
        self.gate = gate;
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The listener's name (`listeners`).
    pub fn listener_name(&self) -> &str {
        &self.config.listener_name
    }

    pub fn stats(&self) -> Rc<RefCell<KafkaServerStats>> {
        self.stats.clone()
    }

    /// Serves until `shutdown` over `backend` (the node's call path, shared with its other
    /// edges); returns the final counters.
    pub async fn run(self, backend: Rc<NodeBackend>, shutdown: ShutdownSignal) -> KafkaServerStats {
        let ctx = Rc::new(ListenerContext {
            listener_name: self.config.listener_name.clone(),
            controller_listener_name: self.config.controller_listener_name.clone(),
            cluster_id: self.config.cluster_id,
            node_id: self.config.node_id,
            advertised_host: self.config.advertised_host.clone(),
            advertised_port: self.config.advertised_port,
            default_timeout_ms: self.config.request_timeout_ms,
            served: corum_kafka::ServedApis::controller(),
            log: Default::default(),
        });
        let config = Rc::new(self.config.clone());
        while let Some((stream, peer)) = accept(&self.listener, self.local, &shutdown).await {
            let Some(admission) = self.gate.admit(&self.config.listener_name, peer) else {
                connections::refuse(stream);
                self.stats.borrow_mut().refused += 1;
                continue;
            };
            {
                let mut stats = self.stats.borrow_mut();
                stats.accepted += 1;
                stats.open += 1;
            }
            if let Err(e) = stream.set_write_timeout(Some(config.limits.send_timeout)) {
                tracing::debug!(%peer, error = %e, "cannot set a write timeout");
            }
            let (ctx, backend, stats) = (ctx.clone(), backend.clone(), self.stats.clone());
            let config = config.clone();
            let shutdown = shutdown.clone();
            let tls = self.tls.clone();
            let sasl = self.sasl.clone();
            glommio::spawn_local(async move {
                let _admission = admission;
                match corum_runtime::tls::accepted(stream, peer, tls.as_deref()).await {
                    Ok(stream) => {
                        serve_connection(
                            stream, peer, &config, ctx, backend, &stats, shutdown, sasl,
                        )
                        .await
                    }
                    Err(_) => stats.borrow_mut().handshakes_refused += 1,
                }
                stats.borrow_mut().open -= 1;
            })
            .detach();
        }
        let stats = self.stats.borrow().clone();
        stats
    }
}

/// The first allocation for a request's body; it doubles as bytes arrive, up to the size
/// announced, so a size prefix whose request never comes costs nothing.
const BODY_CHUNK_BYTES: usize = 64 << 10;

/// Reads a request body of `len` bytes within `timeout` (`None` on timeout), its buffer
/// growing with the bytes that arrive.
async fn read_body(
    reader: &mut (impl futures_lite::AsyncRead + Unpin),
    len: usize,
    timeout: Duration,
) -> Option<std::io::Result<Vec<u8>>> {
    let read = async {
        let mut body = Vec::with_capacity(len.min(BODY_CHUNK_BYTES));
        while body.len() < len {
            let filled = body.len();
            let step = (len - filled).min(filled.max(BODY_CHUNK_BYTES));
            body.resize(filled + step, 0);
            if let Err(e) = reader.read_exact(&mut body[filled..]).await {
                return Some(Err(e));
            }
        }
        Some(Ok(body))
    };
    futures_lite::future::or(read, async {
        glommio::timer::sleep(timeout).await;
        None
    })
    .await
}

/// A SCRAM server nonce: 24 bytes from the OS, in hex (printable, no `,`).
fn server_nonce() -> String {
    let mut bytes = [0u8; 24];
    getrandom::getrandom(&mut bytes).expect("the OS provides randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[allow(clippy::too_many_arguments)]
async fn serve_connection(
    stream: NetStream,
    peer: SocketAddr,
    config: &KafkaServerConfig,
    ctx: Rc<ListenerContext>,
    backend: Rc<NodeBackend>,
    stats: &Rc<RefCell<KafkaServerStats>>,
    shutdown: ShutdownSignal,
    sasl: Option<Rc<SaslConfig>>,
) {
    // The connection's principal ([`crate::principal`]): Kafka's default SSL principal
    // builder (`User:` and the client certificate's subject DN), `User:ANONYMOUS` without a
    // certificate (PLAINTEXT, or SSL without client authentication). On a SASL listener the
    // SASL exchange sets it, and nothing but ApiVersions is served before.
    let mut session = Rc::new(crate::principal::session(
        stream.identity().as_deref(),
        peer,
    ));
    tracing::debug!(%peer, principal = %session.principal, tls = stream.is_tls(), sasl = sasl.is_some(), "Kafka connection");
    let mut sasl_state = sasl.as_ref().map(|_| SaslConnection::new());
    let opened = std::time::Instant::now();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let (mut reader, writer) = stream.split();
    let listener = config.listener_name.as_str();
    // Answers in request order: the writer awaits each request's task in turn.
    let (tx, rx) =
        local_channel::new_bounded::<glommio::Task<Outcome>>(config.in_flight_per_connection_max);
    // Requests read and not yet answered on the socket; the writer counts them down.
    let unanswered = Rc::new(Cell::new(0usize));
    // Fired by the writer when the client stops reading: the reader stops too.
    let hang_up = ShutdownSignal::detached();
    let writer_task = glommio::spawn_local(write_answers(
        writer,
        rx,
        peer,
        WriterContext {
            listener: config.listener_name.clone(),
            unanswered: unanswered.clone(),
            hang_up: hang_up.clone(),
            stats: stats.clone(),
            send_timeout: config.limits.send_timeout,
        },
    ));
    let arrival = Duration::from_millis(u64::from(config.request_timeout_ms));
    let idle = config.limits.idle;
    loop {
        let mut prefix = [0u8; corum_kafka::frame::SIZE_PREFIX_BYTES];
        // Between requests a connection may stay idle up to `connections.max.idle.ms`;
        // shutdown ends the wait.
        let next = connections::unless_idle(reader.read_exact(&mut prefix), idle, || {
            unanswered.get() > 0
        });
        match shutdown.run_until(hang_up.run_until(next)).await {
            None | Some(None) | Some(Some(Some(Err(_)))) => {
                tracing::debug!(%peer, unanswered = unanswered.get(), "Kafka connection: reading ended (end of stream, error, hang-up or shutdown)");
                break;
            }
            Some(Some(None)) => {
                stats.borrow_mut().closed_idle += 1;
                connections::log_closed(
                    connections::Closed::Idle,
                    listener,
                    peer,
                    format_args!(
                        "idle: no request arrived for connections.max.idle.ms ({} ms)",
                        idle.as_millis()
                    ),
                );
                break;
            }
            Some(Some(Some(Ok(())))) => {}
        }
        let len = match corum_kafka::frame::request_len(prefix, config.request_bytes_max) {
            Ok(n) => n,
            Err(e) => {
                connections::log_closed(
                    connections::Closed::BadRequest,
                    listener,
                    peer,
                    format_args!("{e}"),
                );
                stats.borrow_mut().closed_on_bad_request += 1;
                break;
            }
        };
        let body = match read_body(&mut reader, len, arrival).await {
            Some(Ok(body)) => body,
            Some(Err(e)) => {
                tracing::debug!(%peer, error = %e, "Kafka connection: a request body could not be read");
                break;
            }
            None => {
                connections::log_closed(
                    connections::Closed::BadRequest,
                    listener,
                    peer,
                    format_args!(
                        "a request of {len} bytes did not arrive within {} ms",
                        config.request_timeout_ms
                    ),
                );
                stats.borrow_mut().closed_on_bad_request += 1;
                break;
            }
        };
        let parsed = match corum_kafka::parse(Bytes::from(body), &ctx.served) {
            Ok(p) => p,
            Err(e) => {
                connections::log_closed(
                    connections::Closed::BadRequest,
                    listener,
                    peer,
                    format_args!("{e}"),
                );
                stats.borrow_mut().closed_on_bad_request += 1;
                break;
            }
        };
        {
            let mut stats = stats.borrow_mut();
            stats.requests += 1;
            let api = match &parsed {
                Parsed::Request { head, .. } | Parsed::ApiVersionsTooNew { head } => head.api_key,
            };
            *stats.by_api.entry(api as i16).or_default() += 1;
        }
        if let (Some(state), Some(sasl)) = (sasl_state.as_mut(), sasl.as_deref()) {
            let now_ms = u64::try_from(opened.elapsed().as_millis()).unwrap_or(u64::MAX);
            let gate = state.gate(sasl, &parsed, now_ms, &mut server_nonce, &|user, m| {
                corum_kafka::Backend::scram_credential(&*backend, user, m)
            });
            match state.take_event() {
                Some(Event::Authenticated {
                    mechanism,
                    principal,
                    reauthentication,
                }) => {
                    stats.borrow_mut().sasl_authenticated += 1;
                    tracing::info!(%peer, listener = %config.listener_name, %mechanism, %principal,
                        reauthentication, "SASL authentication succeeded");
                }
                Some(Event::Failed {
                    mechanism,
                    user,
                    reason,
                }) => {
                    stats.borrow_mut().sasl_failed += 1;
                    tracing::warn!(%peer, listener = %config.listener_name, %mechanism,
                        user = user.as_deref().unwrap_or("(none)"), %reason,
                        "SASL authentication failed");
                }
                None => {}
            }
            if let Some(p) = state.principal().filter(|p| *p != session.principal) {
                session = Rc::new(corum_kafka::auth::Session::authenticated(
                    p,
                    session.client_host.clone(),
                ));
            }
            match gate {
                Gate::Serve => {}
                Gate::Answer { answer, close } => {
                    let outcome = match corum_kafka::response::encode_answer(*answer) {
                        Ok(encoded) => Outcome::Reply(encoded),
                        Err(e) => Outcome::Close(e.to_string()),
                    };
                    unanswered.set(unanswered.get() + 1);
                    match hang_up
                        .run_until(tx.send(glommio::spawn_local(async move { outcome })))
                        .await
                    {
                        Some(Ok(())) => {}
                        None | Some(Err(_)) => break,
                    }
                    if let Some(reason) = close {
                        tracing::warn!(%peer, listener = %config.listener_name, %reason, "closing a Kafka connection");
                        break;
                    }
                    continue;
                }
                Gate::Close(reason) => {
                    tracing::warn!(%peer, listener = %config.listener_name, %reason, "closing a Kafka connection");
                    stats.borrow_mut().closed_on_bad_request += 1;
                    break;
                }
            }
        }
        let (ctx, backend, session) = (ctx.clone(), backend.clone(), session.clone());
        let stats = stats.clone();
        let task = glommio::spawn_local(async move {
            let answer = corum_kafka::service::serve_as(&ctx, &session, &*backend, parsed).await;
            if answer.is_fetch() {
                let (hits, misses) = ctx.log.render_counts();
                let mut stats = stats.borrow_mut();
                stats.rendered_from_cache = hits;
                stats.rendered_afresh = misses;
            }
            match corum_kafka::response::encode_answer(answer) {
                Ok(encoded) => Outcome::Reply(encoded),
                Err(e) => Outcome::Close(e.to_string()),
            }
        });
        unanswered.set(unanswered.get() + 1);
        // A full queue (the writer waits on an earlier answer, or on a client that does not
        // read) stops the reading here: TCP pushes back on the client.
        match hang_up.run_until(tx.send(task)).await {
            Some(Ok(())) => {}
            None | Some(Err(_)) => break,
        }
    }
    drop(tx);
    let _ = writer_task.await;
    // `reader` still holds the socket open.
    connections::close_without_waiting(fd);
    drop(reader);
    tracing::debug!(%peer, unanswered = unanswered.get(), "Kafka connection closed");
}

/// What a connection's writer shares with its reader and its listener.
struct WriterContext {
    listener: String,
    unanswered: Rc<Cell<usize>>,
    hang_up: ShutdownSignal,
    stats: Rc<RefCell<KafkaServerStats>>,
    send_timeout: Duration,
}

impl WriterContext {
    /// A write failed: log it when the client stopped reading, and stop the reader.
    fn write_failed(&self, peer: SocketAddr, e: &std::io::Error) {
        if connections::is_timeout(e) {
            self.stats.borrow_mut().closed_slow_consumer += 1;
            connections::log_closed(
                    connections::Closed::SlowConsumer,
                &self.listener,
                peer,
                format_args!(
                    "the client stopped reading its answers: a write made no progress for corum.connection.send.timeout.ms ({} ms)",
                    self.send_timeout.as_millis()
                ),
            );
        } else {
            tracing::debug!(%peer, error = %e, "Kafka connection: an answer could not be written");
        }
        self.hang_up.fire();
    }
}

/// Answers written together at most (one write for the burst), and the bytes after which a
/// burst is written even when more answers are ready.
const BURST_MAX: usize = 256;
const BURST_BYTES_MAX: usize = 1 << 20;

/// Buffers below this many bytes are copied together for a write; larger ones (a broker's
/// Fetch answer's rendered batches) are sent from where they lie.
const COPY_BELOW_BYTES: usize = 4096;

/// Answers gathered for one write: the small ones copied together, the large buffers referenced
/// where they are, in order.
#[derive(Default)]
struct Burst {
    parts: Vec<Bytes>,
    /// Small buffers copied together since the last large one.
    copied: BytesMut,
    len: usize,
}

impl Burst {
    fn push(&mut self, answer: corum_kafka::response::Encoded) {
        for part in answer.into_parts() {
            self.len += part.len();
            if part.len() < COPY_BELOW_BYTES {
                self.copied.extend_from_slice(&part);
            } else {
                self.seal();
                self.parts.push(part);
            }
        }
    }

    /// Ends the run of copied buffers: it goes into `parts` (its memory is reused once
    /// written and dropped).
    fn seal(&mut self) {
        if !self.copied.is_empty() {
            self.parts.push(self.copied.split().freeze());
        }
    }

    /// Writes the burst and empties it.
    async fn write(
        &mut self,
        writer: &mut (impl futures_lite::AsyncWrite + Unpin),
    ) -> std::io::Result<()> {
        self.seal();
        self.len = 0;
        let written = corum_runtime::tls::write_all_parts(writer, &mut self.parts).await;
        self.parts.clear();
        written?;
        writer.flush().await
    }
}

async fn write_answers(
    mut writer: impl futures_lite::AsyncWrite + Unpin,
    rx: local_channel::LocalReceiver<glommio::Task<Outcome>>,
    peer: SocketAddr,
    cx: WriterContext,
) {
    // The next request's task, when the burst before it was written without it.
    let mut next = None;
    // Answers found finished together, in request order, leave in one write: on loopback a
    // send costs the sender the receiver's delivery too, so a write per answer cost the
    // active controller more than building the answers.
    let mut burst = Burst::default();
    let mut closing = None;
    'connection: loop {
        let task = match next.take() {
            Some(t) => t,
            None => match rx.recv().await {
                Some(t) => t,
                None => break,
            },
        };
        let mut outcome = task.await;
        let mut answers = 0;
        loop {
            cx.unanswered.set(cx.unanswered.get().saturating_sub(1));
            match outcome {
                Outcome::Reply(encoded) => {
                    answers += 1;
                    burst.push(encoded);
                }
                Outcome::Close(reason) => {
                    closing = Some(reason);
                    break;
                }
            }
            if answers >= BURST_MAX || burst.len >= BURST_BYTES_MAX {
                break;
            }
            // Answers already finished go out in the same write; an answer is never held
            // back waiting for a later request.
            let Some(Some(mut t)) = futures_lite::future::poll_once(rx.recv()).await else {
                break;
            };
            match futures_lite::future::poll_once(&mut t).await {
                Some(o) => outcome = o,
                None => {
                    next = Some(t);
                    break;
                }
            }
        }
        if burst.len > 0 {
            if let Err(e) = burst.write(&mut writer).await {
                cx.write_failed(peer, &e);
                break 'connection;
            }
        }
        if let Some(reason) = closing.take() {
            tracing::warn!(%peer, %reason, "closing a Kafka connection");
            cx.hang_up.fire();
            break;
        }
    }
    let _ = writer.flush().await;
    let _ = writer.close().await;
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    /// Each Kafka request is served by a task holding `serve_as`'s future, which boxes the
    /// API's, which boxes the backend's: every one of them an allocation glibc serves from its
    /// caches (a request of at most 1,000 bytes; a task adds glommio's header, 64 bytes at
    /// most). Held inline they made one allocation of 4.9 KiB per request. Fetch, a broker's
    /// long poll served once per commit at most, is not held to it.
    #[test]
    fn kafka_request_futures_stay_small() {
        use crate::task_size::{assert_small, future_size};
        use corum_kafka::api;
        let backend_call = <NodeBackend as corum_kafka::Backend>::call;
        let sizes = [
            (
                "serve_as",
                future_size(&corum_kafka::service::serve_as::<NodeBackend>),
            ),
            ("backend call", future_size(&backend_call)),
            (
                "metadata",
                future_size(&api::metadata::metadata::<NodeBackend>),
            ),
            (
                "create_topics",
                future_size(&api::topics::create_topics::<NodeBackend>),
            ),
            (
                "incremental_alter_configs",
                future_size(&api::configs::incremental_alter_configs::<NodeBackend>),
            ),
            (
                "broker_heartbeat",
                future_size(&api::brokers::broker_heartbeat::<NodeBackend>),
            ),
            (
                "alter_partition",
                future_size(&api::brokers::alter_partition::<NodeBackend>),
            ),
        ];
        for (what, size) in sizes {
            assert_small(what, size);
        }
    }

    /// A writer that keeps what was written and, separately, what was flushed, and counts
    /// its writes (a socket's sends).
    #[derive(Clone, Default)]
    struct Sink {
        written: Rc<RefCell<Vec<u8>>>,
        flushed: Rc<RefCell<Vec<u8>>>,
        flushes: Rc<RefCell<usize>>,
        writes: Rc<RefCell<usize>>,
        /// Each vectored write's buffers.
        vectored: Rc<RefCell<Vec<Vec<Sent>>>>,
    }

    /// A buffer a write was given: where it lay, and its length.
    type Sent = (usize, usize);

    impl futures_lite::AsyncWrite for Sink {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.written.borrow_mut().extend_from_slice(buf);
            *self.writes.borrow_mut() += 1;
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            let mut written = self.written.borrow_mut();
            for b in bufs {
                written.extend_from_slice(b);
            }
            *self.writes.borrow_mut() += 1;
            self.vectored.borrow_mut().push(
                bufs.iter()
                    .map(|b| (b.as_ptr() as usize, b.len()))
                    .collect(),
            );
            Poll::Ready(Ok(bufs.iter().map(|b| b.len()).sum()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            *self.flushed.borrow_mut() = self.written.borrow().clone();
            *self.flushes.borrow_mut() += 1;
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn reply(text: &'static str) -> Outcome {
        Outcome::Reply(corum_kafka::response::Encoded::one(Bytes::from_static(
            text.as_bytes(),
        )))
    }

    /// A writer's context for `unanswered` requests, hung up through `hang_up`.
    fn writer_context(unanswered: usize, hang_up: ShutdownSignal) -> WriterContext {
        WriterContext {
            listener: "KAFKA".into(),
            unanswered: Rc::new(Cell::new(unanswered)),
            hang_up,
            stats: Rc::default(),
            send_timeout: Duration::from_secs(1),
        }
    }

    /// A finished answer is flushed even while the request after it is still being served
    /// (its write waiting for a commit), and answers finished together go out in one write,
    /// in request order.
    #[test]
    fn finished_answers_are_not_held_back_by_later_ones() {
        let ex = glommio::LocalExecutorBuilder::default().make().unwrap();
        ex.run(async {
            let sink = Sink::default();
            let peer: SocketAddr = ([127, 0, 0, 1], 1).into();
            let (tx, rx) = local_channel::new_bounded(8);
            let (go, wait) = local_channel::new_bounded::<()>(1);
            for text in ["a", "b"] {
                tx.send(glommio::spawn_local(async move { reply(text) }))
                    .await
                    .unwrap();
            }
            tx.send(glommio::spawn_local(async move {
                wait.recv().await;
                reply("c")
            }))
            .await
            .unwrap();
            let cx = writer_context(3, ShutdownSignal::detached());
            let writer = glommio::spawn_local(write_answers(sink.clone(), rx, peer, cx));
            glommio::timer::sleep(Duration::from_millis(20)).await;
            assert_eq!(sink.flushed.borrow().as_slice(), b"ab");
            assert_eq!(*sink.flushes.borrow(), 1);
            assert_eq!(
                *sink.writes.borrow(),
                1,
                "one write for the two finished answers"
            );
            go.send(()).await.unwrap();
            drop(tx);
            writer.await;
            assert_eq!(sink.flushed.borrow().as_slice(), b"abc");
            assert_eq!(*sink.writes.borrow(), 2);
        });
    }

    /// The answers finished before a request that closes the connection are written (in one
    /// write), then the connection is hung up; nothing after the close is written.
    #[test]
    fn answers_before_a_close_are_written_then_the_connection_hangs_up() {
        let ex = glommio::LocalExecutorBuilder::default().make().unwrap();
        ex.run(async {
            let sink = Sink::default();
            let peer: SocketAddr = ([127, 0, 0, 1], 1).into();
            let (tx, rx) = local_channel::new_bounded(8);
            for text in ["a", "b"] {
                tx.send(glommio::spawn_local(async move { reply(text) }))
                    .await
                    .unwrap();
            }
            tx.send(glommio::spawn_local(async move {
                Outcome::Close("a malformed request".into())
            }))
            .await
            .unwrap();
            tx.send(glommio::spawn_local(async move { reply("d") }))
                .await
                .unwrap();
            drop(tx);
            let hang_up = ShutdownSignal::detached();
            let cx = writer_context(4, hang_up.clone());
            write_answers(sink.clone(), rx, peer, cx).await;
            assert_eq!(sink.flushed.borrow().as_slice(), b"ab");
            assert_eq!(*sink.writes.borrow(), 1);
            assert!(hang_up.is_triggered());
        });
    }

    /// A broker's Fetch answer of several rendered batches, sent with small answers on
    /// either side: one write, the batches sent from where they lie (not copied), the small
    /// buffers around them (the answers, the Fetch answer's head and tail) copied together,
    /// every byte in request order.
    #[test]
    fn a_fetch_answers_batches_are_sent_where_they_lie() {
        use kafka_protocol::messages::{fetch_response, ApiKey, FetchResponse, ResponseKind};
        let batches = [Bytes::from(vec![7u8; 5_000]), Bytes::from(vec![8u8; 6_000])];
        let partition = fetch_response::PartitionData::default().with_high_watermark(9);
        let topic =
            fetch_response::FetchableTopicResponse::default().with_partitions(vec![partition]);
        let answer = corum_kafka::service::Answer {
            api: ApiKey::Fetch,
            version: 17,
            correlation_id: 4,
            body: ResponseKind::Fetch(FetchResponse::default().with_responses(vec![topic])),
            records: Some(batches.iter().cloned().collect()),
        };
        let fetch = corum_kafka::response::encode_answer(answer).expect("encodes");
        let expected = [b"a".as_slice(), &fetch.to_bytes(), b"z"].concat();
        let ex = glommio::LocalExecutorBuilder::default().make().unwrap();
        ex.run(async move {
            let sink = Sink::default();
            let peer: SocketAddr = ([127, 0, 0, 1], 1).into();
            let (tx, rx) = local_channel::new_bounded(8);
            for outcome in [reply("a"), Outcome::Reply(fetch), reply("z")] {
                tx.send(glommio::spawn_local(async move { outcome }))
                    .await
                    .unwrap();
            }
            drop(tx);
            let cx = writer_context(3, ShutdownSignal::detached());
            write_answers(sink.clone(), rx, peer, cx).await;
            assert_eq!(sink.flushed.borrow().as_slice(), expected.as_slice());
            assert_eq!(*sink.writes.borrow(), 1, "one write");
            let vectored = sink.vectored.borrow();
            let [bufs] = vectored.as_slice() else {
                panic!("one vectored write: {vectored:?}");
            };
            assert_eq!(bufs.len(), 4, "copied, batch, batch, copied: {bufs:?}");
            for (sent, batch) in bufs[1..3].iter().zip(&batches) {
                assert_eq!(*sent, (batch.as_ptr() as usize, batch.len()));
            }
        });
    }
}
