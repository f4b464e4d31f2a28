//! [`RpcConnection`]: one pipelined client connection to one server, over the runtime's framed
//! TCP ([`corum_runtime::transport`]: its frame reader checks every frame and validates every
//! answer once, as the server's and the peers' connections do).
//!
//! Any number of concurrent [`RpcConnection::call`]s share the connection: a writer task sends
//! every request queued at that moment in one write, a reader task hands each answer to the
//! call waiting for its `correlation_id` (answers come in any order). Correlation ids start at
//! 1 (0 is the server's "unknown").
//!
//! A connection talks to one server and reports what that server says: it does not follow
//! `NotController` and does not reconnect. Leader following, retries and moving between
//! servers are the job of `corum_client::ControllerClient`, built on this type.
//!
//! | event | the waiting calls get | later calls get |
//! |---|---|---|
//! | an answer | its body, or [`RpcConnectionError::Rpc`] with the server's [`crate::RpcError`] | — |
//! | an answer whose Raft body breaks the Raft rules | [`RpcConnectionError::InvalidResponse`] | served |
//! | no answer within the call's wait | [`RpcConnectionError::NoAnswer`] (the request may still take effect) | served |
//! | the connection breaks (closed, IO error, a bad frame) | [`RpcConnectionError::ConnectionLost`] | `ConnectionLost` at once |

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use corum_runtime::tls::TlsClient;
use corum_runtime::transport::{connect_tls, ConnectionConfig, FrameReader, FrameWriter};
use futures_lite::AsyncRead;
use glommio::channels::local_channel::{self, LocalSender};

use crate::envelope::{
    encode_request, EncodedFrame, RequestBody, RequestFrame, ResponseBody, ResponseFrame,
};
use crate::error::{ProtocolError, RpcConnectionError};

/// Requests written together at most (one write for the burst).
const BURST_MAX: u64 = 256;

/// Settings of an [`RpcConnection`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcConnectionConfig {
    /// Largest request sent (a larger one fails before sending).
    pub request_bytes_max: u32,
    /// Largest response accepted.
    pub response_bytes_max: u32,
    /// Requests queued for the writer task before a call waits for room (its wait counts
    /// toward its timeout): a server that stops reading pushes back on the callers instead
    /// of letting the queue grow.
    pub outgoing_queue_capacity: usize,
}

impl Default for RpcConnectionConfig {
    /// 1 MiB requests (the server's default `socket.request.max.bytes`), 16 MiB responses,
    /// 1024 queued requests.
    fn default() -> Self {
        RpcConnectionConfig {
            request_bytes_max: 1 << 20,
            response_bytes_max: 16 << 20,
            outgoing_queue_capacity: 1024,
        }
    }
}

impl RpcConnectionConfig {
    /// Refuses zero size limits.
    pub fn validate(&self) -> Result<(), RpcConnectionError> {
        for (field, v) in [
            ("request_bytes_max", self.request_bytes_max as usize),
            ("response_bytes_max", self.response_bytes_max as usize),
            ("outgoing_queue_capacity", self.outgoing_queue_capacity),
        ] {
            if v == 0 {
                return Err(RpcConnectionError::Config {
                    field,
                    reason: "must be at least 1".into(),
                });
            }
        }
        Ok(())
    }
}

/// What a waiting call receives: the answer frame, or why it is not a valid answer.
type Answer = Result<ResponseFrame, ProtocolError>;

type Pending = Rc<RefCell<HashMap<u64, LocalSender<Answer>>>>;

/// One pipelined connection to one server. See the module doc. Glommio-local: use it on the
/// executor that opened it.
pub struct RpcConnection {
    addr: SocketAddr,
    config: RpcConnectionConfig,
    /// Archived requests (frame payloads). Dropping it ends the writer task, which closes
    /// the socket.
    outgoing: LocalSender<EncodedFrame>,
    pending: Pending,
    broken: Rc<RefCell<Option<String>>>,
    next_id: Cell<u64>,
}

impl RpcConnection {
    /// Validates `config` and connects to `addr`.
    pub async fn connect(
        addr: SocketAddr,
        config: RpcConnectionConfig,
    ) -> Result<RpcConnection, RpcConnectionError> {
        RpcConnection::connect_tls(addr, config, None).await
    }

    /// [`RpcConnection::connect`], then a TLS handshake when `tls` is given (a client listener
    /// mapped to SSL).
    pub async fn connect_tls(
        addr: SocketAddr,
        config: RpcConnectionConfig,
        tls: Option<&TlsClient>,
    ) -> Result<RpcConnection, RpcConnectionError> {
        config.validate()?;
        let conn = connect_tls(
            addr,
            ConnectionConfig {
                payload_bytes_max: config.request_bytes_max.max(config.response_bytes_max),
                nodelay: true,
            },
            tls,
        )
        .await
        .map_err(|e| RpcConnectionError::Connect {
            addr,
            reason: e.to_string(),
        })?;
        let (reader, writer) = conn.into_split();
        let pending: Pending = Rc::default();
        let broken: Rc<RefCell<Option<String>>> = Rc::default();
        let (outgoing, requests) =
            local_channel::new_bounded::<EncodedFrame>(config.outgoing_queue_capacity);
        {
            let broken = broken.clone();
            glommio::spawn_local(async move {
                let mut writer: FrameWriter<_> = writer;
                while let Some(first) = requests.recv().await {
                    // Every request ready now leaves in the same write.
                    let mut next = Some(first);
                    let mut failed = None;
                    while let Some(payload) = next.take() {
                        if let Err(e) = writer.queue_payload(&payload) {
                            failed = Some(e);
                            break;
                        }
                        if writer.queued_frames() < BURST_MAX {
                            if let Some(Some(f)) =
                                futures_lite::future::poll_once(requests.recv()).await
                            {
                                next = Some(f);
                            }
                        }
                    }
                    let result = match failed {
                        Some(e) => Err(e),
                        None => writer.flush_queued().await,
                    };
                    if let Err(e) = result {
                        broken.borrow_mut().get_or_insert(e.to_string());
                        break;
                    }
                }
                writer.close().await;
            })
            .detach();
        }
        {
            let (pending, broken) = (pending.clone(), broken.clone());
            glommio::spawn_local(async move {
                let mut reader: FrameReader<_> = reader;
                read_answers(&mut reader, &pending, &broken).await;
            })
            .detach();
        }
        Ok(RpcConnection {
            addr,
            config,
            outgoing,
            pending,
            broken,
            next_id: Cell::new(1),
        })
    }

    /// The server this connection talks to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests waiting for the writer task (at most `outgoing_queue_capacity`).
    pub fn queued_requests(&self) -> usize {
        self.outgoing.len()
    }

    /// Whether the connection broke (every call now fails with `ConnectionLost`).
    pub fn is_broken(&self) -> bool {
        self.broken.borrow().is_some()
    }

    /// Sends `body` and waits up to `timeout` for the answer (the server is given the same
    /// timeout, so it answers `Timeout` rather than commit later).
    pub async fn call(
        &self,
        body: RequestBody,
        timeout: Duration,
    ) -> Result<ResponseBody, RpcConnectionError> {
        let timeout_ms = u32::try_from(timeout.as_millis())
            .unwrap_or(u32::MAX)
            .max(1);
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let frame = RequestFrame {
            correlation_id: id,
            timeout_ms,
            body,
        };
        // Archived once: the size check and the bytes sent are the same archive.
        let payload = encode_request(&frame, self.config.request_bytes_max as usize)
            .map_err(RpcConnectionError::Encode)?;
        let answer = self.send(id, payload, timeout).await?;
        answer.body.map_err(RpcConnectionError::Rpc)
    }

    fn lost(&self) -> RpcConnectionError {
        RpcConnectionError::ConnectionLost {
            addr: self.addr,
            reason: self
                .broken
                .borrow()
                .clone()
                .unwrap_or_else(|| "closed".into()),
        }
    }

    /// Sends the archived request `payload` (correlation id `id`) and waits for its answer.
    async fn send(
        &self,
        id: u64,
        payload: EncodedFrame,
        timeout: Duration,
    ) -> Result<ResponseFrame, RpcConnectionError> {
        if self.is_broken() {
            return Err(self.lost());
        }
        let (reply, answer) = local_channel::new_bounded(1);
        self.pending.borrow_mut().insert(id, reply);
        // Waiting for room in the queue counts toward the timeout, like waiting for the answer.
        let sent_and_answered = async {
            if self.outgoing.send(payload).await.is_err() {
                return Some(None);
            }
            Some(answer.recv().await)
        };
        let waited = futures_lite::future::or(sent_and_answered, async {
            glommio::timer::sleep(timeout).await;
            None
        })
        .await;
        match waited {
            Some(Some(Ok(frame))) => Ok(frame),
            Some(Some(Err(source))) => Err(RpcConnectionError::InvalidResponse {
                addr: self.addr,
                source,
            }),
            Some(None) => {
                self.pending.borrow_mut().remove(&id);
                Err(self.lost())
            }
            None => {
                self.pending.borrow_mut().remove(&id);
                Err(RpcConnectionError::NoAnswer {
                    addr: self.addr,
                    waited_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                })
            }
        }
    }
}

/// The reader task: hands each answer to the call waiting for its correlation id; on a broken
/// stream, records why and drops every waiting call's sender (they get `ConnectionLost`).
async fn read_answers<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    pending: &Pending,
    broken: &Rc<RefCell<Option<String>>>,
) {
    loop {
        let frame = match reader.recv::<ResponseFrame>().await {
            Ok(v) => ResponseFrame::from_archived(v.get()),
            Err(e) => {
                broken.borrow_mut().get_or_insert(e.to_string());
                // Dropping the senders wakes every caller with "connection lost".
                pending.borrow_mut().clear();
                return;
            }
        };
        let correlation_id = frame.correlation_id;
        let answer = match frame.body.as_ref().map(ResponseBody::validate_raft) {
            Ok(Err(e)) => Err(e),
            _ => Ok(frame),
        };
        let waiter = pending.borrow_mut().remove(&correlation_id);
        match waiter {
            Some(w) => {
                let _ = w.try_send(answer);
            }
            None => {
                tracing::debug!(correlation_id, "answer to no waiting request");
            }
        }
    }
}
