//! TCP transport between nodes and to clients: framed connections, a listener that runs one
//! task per connection, and an outbound peer that reconnects with capped backoff.
//!
//! A [`FramedConnection`] sends rkyv messages as frames ([`crate::frame`]) and receives them as
//! [`Validated`] values: the header, checksum and rkyv archive are checked once, on receipt.
//! Any bad frame (bad magic, wrong version, flags, too large for this connection's
//! [`ConnectionConfig::payload_bytes_max`], truncated, bad checksum, non-zero padding, or an
//! archive that fails validation) *breaks* the connection: the reason is logged with the peer
//! address, the write side is shut down so the peer sees the close, and every later call returns
//! [`Error::ConnectionBroken`]. Other connections are untouched: each one has its own task and
//! its own buffers.
//!
//! A receiver that answers a payload it cannot decode instead of closing (the client RPC
//! server answers `Malformed` and reads on) uses [`FrameReader::recv_payload`]: the same
//! framing checks and limits, the archive left to it. This reader is the only one: servers,
//! clients and peers all read frames through it.
//!
//! Under TLS ([`crate::tls`]): a [`Listener`] given a [`TlsServer`] runs each accepted
//! connection's handshake in that connection's task (a slow or silent client holds no other
//! accept), and a refused one never reaches the handler; [`connect_tls`] and a
//! [`ReconnectingPeer`] given a [`TlsClient`] handshake after connecting. A connection knows
//! its peer's certificate identity ([`FramedConnection::peer_identity`]).
//!
//! Read and write halves can be separated with [`FramedConnection::into_split`] so one task
//! receives while another sends.

use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use futures_lite::io::{ReadHalf, WriteHalf};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use glommio::TaskQueueHandle;
use rkyv::util::AlignedVec;

use crate::backoff::{Backoff, BackoffConfig};
use crate::error::{Error, Result};
use crate::frame::{self, FrameError, FrameHeader, HEADER_BYTES};
use crate::log_limit::LogLimiter;
use crate::message::{encode_frame, Validated, WireMessage};
use crate::shutdown::ShutdownSignal;
use crate::timer::sleep;
use crate::tls::{NetStream, TlsClient, TlsIdentity, TlsServer};

/// The first allocation for a frame's body; it doubles as bytes arrive, up to the frame.
const BODY_CHUNK_BYTES: usize = 64 << 10;

/// Lines about connections closed on a bad frame (a flood of garbage must not flood the log).
static BAD_FRAME_LOG: LogLimiter = LogLimiter::new(10);
/// Lines about failed accepts (out of descriptors repeats every 10 ms).
static ACCEPT_FAILED_LOG: LogLimiter = LogLimiter::new(1);
/// Lines about connections that ended with an error.
static CONNECTION_ERROR_LOG: LogLimiter = LogLimiter::new(10);

/// Limits and options of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionConfig {
    /// Largest payload accepted or sent on this connection. A larger incoming frame is refused
    /// from its header alone, before any of it is buffered.
    pub payload_bytes_max: u32,
    /// Disable Nagle's algorithm (on by default: frames are small and latency matters).
    pub nodelay: bool,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            payload_bytes_max: frame::DEFAULT_PAYLOAD_BYTES_MAX,
            nodelay: true,
        }
    }
}

/// A glommio TCP stream with a read buffer, plain or under TLS: the usual transport under a
/// [`FramedConnection`].
pub type TcpTransport = NetStream;

/// Counters of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    pub frames_received: u64,
    pub bytes_received: u64,
    pub frames_sent: u64,
    pub bytes_sent: u64,
}

/// The receiving half of a framed connection.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    peer: SocketAddr,
    payload_bytes_max: u32,
    broken: Option<String>,
    frames: u64,
    bytes: u64,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Wraps a byte stream from `peer`.
    pub fn new(inner: R, peer: SocketAddr, payload_bytes_max: u32) -> Self {
        FrameReader {
            inner,
            peer,
            payload_bytes_max,
            broken: None,
            frames: 0,
            bytes: 0,
        }
    }

    /// Reads until `buf` is full or end-of-file; returns the bytes read.
    async fn read_full(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]).await {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }

    /// Receives the next message, validated once: [`FrameReader::recv_payload`], then the
    /// payload's archive checked. A payload that is not a valid `T` breaks the reader too.
    pub async fn recv<T: WireMessage>(&mut self) -> Result<Validated<T>> {
        let payload = self.recv_payload().await?;
        Validated::new(payload).map_err(|e| {
            let e = Error::InvalidPayload {
                peer: self.peer,
                reason: match e {
                    Error::Validation { reason } => reason,
                    other => other.to_string(),
                },
            };
            if let Some(suppressed) = BAD_FRAME_LOG.allow() {
                tracing::warn!(peer = %self.peer, error = %e, suppressed, "closing connection");
            }
            self.broken = Some(e.to_string());
            e
        })
    }

    /// Receives the next frame's payload with its framing checked (magic, version, flags, the
    /// length against this reader's limit before any of the body is read, checksum, padding)
    /// but not its archive: for a receiver that answers a payload it cannot decode and reads
    /// on (the client RPC server answers `Malformed` and keeps the connection). Framing
    /// errors break the reader like [`FrameReader::recv`]'s: a frame too large is
    /// [`Error::BadFrame`] with [`FrameError::TooLarge`], end-of-file between frames
    /// [`Error::ConnectionClosed`]. The payload starts 16-byte aligned.
    pub async fn recv_payload(&mut self) -> Result<AlignedVec> {
        if let Some(reason) = &self.broken {
            return Err(Error::ConnectionBroken {
                peer: self.peer,
                reason: reason.clone(),
            });
        }
        let result = self.read_frame().await;
        match &result {
            Ok(_) => {}
            Err(Error::ConnectionClosed { .. }) => {
                self.broken = Some("closed by the peer".into());
            }
            Err(e) => {
                if let Some(suppressed) = BAD_FRAME_LOG.allow() {
                    tracing::warn!(peer = %self.peer, error = %e, suppressed, "closing connection");
                }
                self.broken = Some(e.to_string());
            }
        }
        result
    }

    async fn read_frame(&mut self) -> Result<AlignedVec> {
        let peer = self.peer;
        let io = |source| Error::Io {
            op: "read from",
            peer,
            source,
        };
        let bad = |source| Error::BadFrame { peer, source };
        let mut header = [0u8; HEADER_BYTES];
        let n = self.read_full(&mut header).await.map_err(io)?;
        if n == 0 {
            return Err(Error::ConnectionClosed { peer });
        }
        if n < HEADER_BYTES {
            return Err(bad(FrameError::Truncated {
                needed: HEADER_BYTES,
                available: n,
            }));
        }
        let h = FrameHeader::decode(&header, self.payload_bytes_max).map_err(bad)?;
        let body_len = h.body_bytes();
        // The buffer grows with the bytes that arrive (doubling from BODY_CHUNK_BYTES), not
        // with what the header announces: a header announcing a large frame that never comes
        // costs nothing until its bytes do.
        let mut body = AlignedVec::with_capacity(body_len.min(BODY_CHUNK_BYTES));
        let mut filled = 0;
        while filled < body_len {
            let step = (body_len - filled).min(filled.max(BODY_CHUNK_BYTES));
            body.resize(filled + step, 0);
            let n = self
                .read_full(&mut body.as_mut_slice()[filled..filled + step])
                .await
                .map_err(io)?;
            filled += n;
            if n < step {
                return Err(bad(FrameError::Truncated {
                    needed: HEADER_BYTES + body_len,
                    available: HEADER_BYTES + filled,
                }));
            }
        }
        h.verify_body(&body).map_err(bad)?;
        body.resize(h.payload_bytes as usize, 0);
        self.frames += 1;
        self.bytes += (HEADER_BYTES + body_len) as u64;
        Ok(body)
    }

    /// The reason the connection broke, if it did.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }
}

/// The sending half of a framed connection.
#[derive(Debug)]
pub struct FrameWriter<W> {
    inner: W,
    peer: SocketAddr,
    payload_bytes_max: u32,
    buf: AlignedVec,
    /// Frames queued by [`FrameWriter::queue`], written by the next flush.
    queued: Vec<u8>,
    queued_frames: u64,
    broken: Option<String>,
    frames: u64,
    bytes: u64,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    /// Wraps a byte sink to `peer`.
    pub fn new(inner: W, peer: SocketAddr, payload_bytes_max: u32) -> Self {
        FrameWriter {
            inner,
            peer,
            payload_bytes_max,
            buf: AlignedVec::new(),
            queued: Vec::new(),
            queued_frames: 0,
            broken: None,
            frames: 0,
            bytes: 0,
        }
    }

    /// Encodes one message as one frame behind those already queued, without writing: a
    /// burst of messages then leaves in one write ([`FrameWriter::flush_queued`]). A message
    /// over the limit is refused and nothing is queued for it.
    pub fn queue<T: WireMessage>(&mut self, msg: &T) -> Result<()> {
        encode_frame(msg, &mut self.buf, self.payload_bytes_max)?;
        self.queued.extend_from_slice(&self.buf);
        self.queued_frames += 1;
        Ok(())
    }

    /// Queues one frame around an already archived `payload` (checked against the limit
    /// like [`FrameWriter::queue`]); for senders that validated or sized the archive first.
    pub fn queue_payload(&mut self, payload: &[u8]) -> Result<()> {
        if payload.len() > self.payload_bytes_max as usize {
            return Err(Error::MessageTooLarge {
                payload_bytes: payload.len(),
                payload_bytes_max: self.payload_bytes_max,
            });
        }
        crate::frame::encode(payload, &mut self.queued);
        self.queued_frames += 1;
        Ok(())
    }

    /// Frames queued and not yet written.
    pub fn queued_frames(&self) -> u64 {
        self.queued_frames
    }

    /// Writes every queued frame (one write for all of them). An IO error breaks the
    /// connection.
    pub async fn flush_queued(&mut self) -> Result<()> {
        if let Some(reason) = &self.broken {
            return Err(Error::ConnectionBroken {
                peer: self.peer,
                reason: reason.clone(),
            });
        }
        if self.queued.is_empty() {
            return Ok(());
        }
        let peer = self.peer;
        let result = async {
            self.inner.write_all(&self.queued).await?;
            self.inner.flush().await
        }
        .await;
        match result {
            Ok(()) => {
                self.frames += self.queued_frames;
                self.bytes += self.queued.len() as u64;
                self.queued.clear();
                self.queued_frames = 0;
                Ok(())
            }
            Err(source) => {
                self.broken = Some(source.to_string());
                Err(Error::Io {
                    op: "write to",
                    peer,
                    source,
                })
            }
        }
    }

    /// Sends one message as one frame (after any frames already queued). A message over the
    /// limit is refused without breaking the connection; an IO error breaks it.
    pub async fn send<T: WireMessage>(&mut self, msg: &T) -> Result<()> {
        self.queue(msg)?;
        self.flush_queued().await
    }

    /// Sends raw bytes as they are, bypassing framing. For tests that play a misbehaving peer.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.queued.extend_from_slice(bytes);
        self.queued_frames += 1;
        self.flush_queued().await
    }

    /// Shuts down the write side (the peer reads end-of-file).
    pub async fn close(&mut self) {
        if let Err(e) = self.inner.close().await {
            tracing::debug!(peer = %self.peer, error = %e, "close failed");
        }
    }
}

/// A framed, bidirectional connection.
#[derive(Debug)]
pub struct FramedConnection<S> {
    reader: FrameReader<ReadHalf<S>>,
    writer: FrameWriter<WriteHalf<S>>,
    peer: SocketAddr,
    identity: Option<Rc<TlsIdentity>>,
    /// The socket, for [`FramedConnection::abort`] (a TCP connection's only).
    fd: Option<std::os::fd::RawFd>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> FramedConnection<S> {
    /// Frames the byte stream `stream` connected to `peer`.
    pub fn new(stream: S, peer: SocketAddr, config: ConnectionConfig) -> Self {
        let (r, w) = futures_lite::io::split(stream);
        FramedConnection {
            reader: FrameReader::new(r, peer, config.payload_bytes_max),
            writer: FrameWriter::new(w, peer, config.payload_bytes_max),
            peer,
            identity: None,
            fd: None,
        }
    }

    /// The peer's TLS certificate identity, when the connection is under TLS and the peer
    /// presented a certificate.
    pub fn peer_identity(&self) -> Option<&TlsIdentity> {
        self.identity.as_deref()
    }

    /// The remote address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Sends one message.
    pub async fn send<T: WireMessage>(&mut self, msg: &T) -> Result<()> {
        if let Some(reason) = self.reader.broken() {
            return Err(Error::ConnectionBroken {
                peer: self.peer,
                reason: reason.to_string(),
            });
        }
        self.writer.send(msg).await
    }

    /// Receives one message. On a bad frame the connection is closed and the error returned.
    pub async fn recv<T: WireMessage>(&mut self) -> Result<Validated<T>> {
        let result = self.reader.recv::<T>().await;
        if let Err(e) = &result {
            if !matches!(e, Error::ConnectionBroken { .. }) {
                self.writer.broken.get_or_insert_with(|| e.to_string());
                self.writer.close().await;
            }
        }
        result
    }

    /// Sends raw bytes; for tests that play a misbehaving peer.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.send_raw(bytes).await
    }

    /// Whether a previous error broke the connection.
    pub fn is_broken(&self) -> bool {
        self.reader.broken.is_some() || self.writer.broken.is_some()
    }

    /// Counters so far.
    pub fn stats(&self) -> ConnectionStats {
        ConnectionStats {
            frames_received: self.reader.frames,
            bytes_received: self.reader.bytes,
            frames_sent: self.writer.frames,
            bytes_sent: self.writer.bytes,
        }
    }

    /// Separates the halves, for a reader task and a writer task.
    pub fn into_split(self) -> (FrameReader<ReadHalf<S>>, FrameWriter<WriteHalf<S>>) {
        (self.reader, self.writer)
    }

    /// Shuts down the write side; the peer reads end-of-file.
    pub async fn close(&mut self) {
        self.writer.close().await
    }

    /// Drops the connection with a reset ([`reset_when_closed`]): what was written and not
    /// yet sent is discarded at once rather than kept by the kernel behind a FIN that a peer
    /// which stopped reading would never take.
    pub fn abort(self) {
        if let Some(fd) = self.fd {
            reset_when_closed(fd);
        }
        drop(self);
    }
}

/// Makes the close of the open socket `fd` a reset (`SO_LINGER` 0) instead of a FIN.
///
/// A connection given up because its peer stopped reading needs it: its unsent bytes fill
/// the send buffer and the peer's window is zero, so a FIN would queue behind them and never
/// arrive, while the kernel keeps the orphaned socket and its buffer (megabytes on loopback)
/// for minutes. A reset reaches the peer at once and frees both sides. The caller holds the
/// socket open across the call.
pub fn reset_when_closed(fd: std::os::fd::RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on an open descriptor the caller owns, with a valid `linger` and
    // its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "cannot set SO_LINGER 0 on a socket");
    }
}

/// A framed TCP connection.
pub type TcpConnection = FramedConnection<TcpTransport>;

fn peer_of(stream: &TcpStream) -> SocketAddr {
    let unknown: SocketAddr = ([0, 0, 0, 0], 0).into();
    stream.peer_addr().unwrap_or(unknown)
}

fn set_nodelay(stream: &TcpStream, peer: SocketAddr, config: ConnectionConfig) -> Result<()> {
    if config.nodelay {
        stream.set_nodelay(true).map_err(|e| Error::Io {
            op: "set TCP_NODELAY on",
            peer,
            source: e.into(),
        })?;
    }
    Ok(())
}

fn framed(stream: NetStream, peer: SocketAddr, config: ConnectionConfig) -> TcpConnection {
    let identity = stream.identity();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let mut conn = FramedConnection::new(stream, peer, config);
    conn.identity = identity;
    conn.fd = Some(fd);
    conn
}

/// Connects to `addr` once.
pub async fn connect(addr: SocketAddr, config: ConnectionConfig) -> Result<TcpConnection> {
    connect_tls(addr, config, None).await
}

/// Connects to `addr` once, then runs a TLS handshake when `tls` is given (the server's
/// certificate checked against `addr`'s IP when the client checks hostnames).
pub async fn connect_tls(
    addr: SocketAddr,
    config: ConnectionConfig,
    tls: Option<&TlsClient>,
) -> Result<TcpConnection> {
    let stream = TcpStream::connect(addr).await.map_err(|e| Error::Io {
        op: "connect to",
        peer: addr,
        source: e.into(),
    })?;
    set_nodelay(&stream, addr, config)?;
    let stream = match tls {
        None => NetStream::plain(stream),
        Some(t) => t
            .connect(stream, &addr.ip().to_string())
            .await
            .map_err(|source| {
                tracing::warn!(peer = %addr, error = %source, "TLS handshake failed");
                Error::Tls { peer: addr, source }
            })?,
    };
    Ok(framed(stream, addr, config))
}

/// A listening socket whose connections come out framed.
#[derive(Debug)]
pub struct Listener {
    inner: TcpListener,
    local: SocketAddr,
    config: ConnectionConfig,
    tls: Option<Rc<TlsServer>>,
}

impl Listener {
    /// Binds `addr` (port 0 picks a free port; see [`Listener::local_addr`]). Must run inside
    /// a shard.
    pub fn bind(addr: SocketAddr, config: ConnectionConfig) -> Result<Listener> {
        let io = |e: glommio::GlommioError<()>| Error::Io {
            op: "bind",
            peer: addr,
            source: e.into(),
        };
        let inner = TcpListener::bind(addr).map_err(io)?;
        let local = inner.local_addr().map_err(io)?;
        Ok(Listener {
            inner,
            local,
            config,
            tls: None,
        })
    }

    /// Runs a TLS handshake on every accepted connection (refused ones are logged and
    /// closed).
    pub fn with_tls(mut self, tls: Option<Rc<TlsServer>>) -> Listener {
        self.tls = tls;
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Accepts one connection, its TLS handshake included (an `Error::Tls` is one refused).
    pub async fn accept(&self) -> Result<TcpConnection> {
        let stream = self.accept_tcp().await?;
        secure(stream, self.config, self.tls.clone()).await
    }

    async fn accept_tcp(&self) -> Result<TcpStream> {
        self.inner.accept().await.map_err(|e| Error::Io {
            op: "accept on",
            peer: self.local,
            source: e.into(),
        })
    }

    /// Accepts until `shutdown`, running `handler` in its own task per connection (on `queue`,
    /// or the current queue). A handler's error is logged with the peer and ends only that
    /// connection. Returns the number of connections accepted. Connection tasks still running
    /// at shutdown are expected to observe the same signal and finish.
    pub async fn serve<H, Fut>(
        self,
        shutdown: ShutdownSignal,
        queue: Option<TaskQueueHandle>,
        handler: H,
    ) -> u64
    where
        H: Fn(TcpConnection) -> Fut + 'static,
        Fut: Future<Output = Result<()>> + 'static,
    {
        let handler = Rc::new(handler);
        let mut accepted = 0u64;
        loop {
            let stream = match shutdown.run_until(self.accept_tcp()).await {
                None => break,
                Some(Ok(stream)) => stream,
                Some(Err(e)) => {
                    // Typically out of file descriptors; pause so the loop doesn't spin.
                    if let Some(suppressed) = ACCEPT_FAILED_LOG.allow() {
                        tracing::warn!(addr = %self.local, error = %e, suppressed, "accept failed");
                    }
                    if shutdown
                        .run_until(sleep(Duration::from_millis(10)))
                        .await
                        .is_none()
                    {
                        break;
                    }
                    continue;
                }
            };
            accepted += 1;
            let peer = peer_of(&stream);
            let handler = handler.clone();
            let (config, tls) = (self.config, self.tls.clone());
            let task = async move {
                // The handshake runs here, not in the accept loop: a silent client holds
                // only its own task.
                let conn = match secure(stream, config, tls).await {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "connection refused");
                        return;
                    }
                };
                match handler(conn).await {
                    Ok(()) | Err(Error::ConnectionClosed { .. }) => {
                        tracing::debug!(%peer, "connection finished")
                    }
                    Err(e) => {
                        if let Some(suppressed) = CONNECTION_ERROR_LOG.allow() {
                            tracing::warn!(%peer, error = %e, suppressed, "connection ended with an error")
                        }
                    }
                }
            };
            match queue {
                Some(q) => glommio::spawn_local_into(task, q)
                    .expect("the caller's task queue exists")
                    .detach(),
                None => glommio::spawn_local(task).detach(),
            };
        }
        accepted
    }
}

/// An accepted socket framed, after its TLS handshake when `tls` is set (a refused one is
/// logged by [`TlsServer::accept`]).
async fn secure(
    stream: TcpStream,
    config: ConnectionConfig,
    tls: Option<Rc<TlsServer>>,
) -> Result<TcpConnection> {
    let peer = peer_of(&stream);
    set_nodelay(&stream, peer, config)?;
    let stream = match tls {
        None => NetStream::plain(stream),
        Some(t) => t
            .accept(stream, peer)
            .await
            .map_err(|source| Error::Tls { peer, source })?,
    };
    Ok(framed(stream, peer, config))
}

/// Settings of an outbound peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerConfig {
    pub connection: ConnectionConfig,
    pub backoff: BackoffConfig,
    /// Give up after this many consecutive failed connects (`None`: keep trying until shutdown).
    pub connect_attempts_max: Option<u32>,
}

/// An outbound connection that reconnects with capped exponential backoff.
///
/// Any error on the current connection drops it; the next call connects again, waiting the
/// backoff delay between failed attempts. A successful connect resets the backoff.
#[derive(Debug)]
pub struct ReconnectingPeer {
    addr: SocketAddr,
    config: PeerConfig,
    backoff: Backoff,
    conn: Option<TcpConnection>,
    connects: u64,
    tls: Option<Rc<TlsClient>>,
}

impl ReconnectingPeer {
    /// A peer at `addr`; nothing connects until first use.
    pub fn new(addr: SocketAddr, config: PeerConfig) -> Result<ReconnectingPeer> {
        config.backoff.validate()?;
        Ok(ReconnectingPeer {
            addr,
            config,
            backoff: Backoff::new(config.backoff),
            conn: None,
            connects: 0,
            tls: None,
        })
    }

    /// Runs a TLS handshake on every connection (presenting the client's keystore, if any).
    pub fn with_tls(mut self, tls: Option<Rc<TlsClient>>) -> ReconnectingPeer {
        self.tls = tls;
        self
    }

    /// The peer's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Successful connects so far (1 + reconnects).
    pub fn connects(&self) -> u64 {
        self.connects
    }

    /// Whether a connection is currently open.
    pub fn is_connected(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| !c.is_broken())
    }

    /// Drops the current connection, if any.
    pub fn disconnect(&mut self) {
        self.conn = None;
    }

    /// Drops the current connection, if any, with a reset ([`FramedConnection::abort`]): for
    /// a peer that stopped reading.
    pub fn abort(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.abort();
        }
    }

    /// The open connection, connecting (with backoff) if there is none.
    pub async fn connection(&mut self, shutdown: &ShutdownSignal) -> Result<&mut TcpConnection> {
        if self.conn.as_ref().is_some_and(|c| c.is_broken()) {
            self.conn = None;
        }
        while self.conn.is_none() {
            if shutdown.is_triggered() {
                return Err(Error::ShuttingDown);
            }
            match connect_tls(self.addr, self.config.connection, self.tls.as_deref()).await {
                Ok(c) => {
                    self.backoff.reset();
                    self.connects += 1;
                    self.conn = Some(c);
                }
                Err(e) => {
                    let failures = self.backoff.attempts() + 1;
                    if self
                        .config
                        .connect_attempts_max
                        .is_some_and(|max| failures >= max)
                    {
                        self.backoff.reset();
                        return Err(e);
                    }
                    let delay = self.backoff.next_delay();
                    tracing::debug!(peer = %self.addr, error = %e, ?delay, "connect failed, backing off");
                    if shutdown.run_until(sleep(delay)).await.is_none() {
                        return Err(Error::ShuttingDown);
                    }
                }
            }
        }
        Ok(self.conn.as_mut().expect("set by the loop above"))
    }

    /// Sends one message, connecting first if needed. On error the connection is dropped.
    pub async fn send<T: WireMessage>(&mut self, msg: &T, shutdown: &ShutdownSignal) -> Result<()> {
        let result = self.connection(shutdown).await?.send(msg).await;
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    /// Sends one message and waits for one reply. On error the connection is dropped.
    pub async fn request<T: WireMessage, R: WireMessage>(
        &mut self,
        msg: &T,
        shutdown: &ShutdownSignal,
    ) -> Result<Validated<R>> {
        let conn = self.connection(shutdown).await?;
        let result = match conn.send(msg).await {
            Ok(()) => conn.recv::<R>().await,
            Err(e) => Err(e),
        };
        if result.is_err() {
            self.conn = None;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::block_on;
    use futures_lite::io::Cursor;
    use proptest::prelude::*;

    fn peer() -> SocketAddr {
        ([127, 0, 0, 1], 9).into()
    }

    fn stream_of(payloads: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
        let mut stream = Vec::new();
        let mut ends = Vec::new();
        for p in payloads {
            let mut buf = AlignedVec::new();
            encode_frame(p, &mut buf, 1 << 20).unwrap();
            stream.extend_from_slice(&buf);
            ends.push(stream.len());
        }
        (stream, ends)
    }

    #[test]
    fn queued_frames_leave_in_one_write_and_read_back_in_order() {
        // queue and queue_payload only buffer (nothing reaches the sink before the flush), an
        // oversized message is refused without disturbing the queue, and the flushed bytes
        // are the frames in order, byte-identical to one send per message.
        block_on(async {
            let mut w = FrameWriter::new(Cursor::new(Vec::new()), peer(), 64);
            w.queue(&b"one".to_vec()).unwrap();
            assert!(matches!(
                w.queue(&vec![0u8; 200]),
                Err(Error::MessageTooLarge { .. })
            ));
            let archived = rkyv::to_bytes::<rkyv::rancor::Error>(&b"two".to_vec()).unwrap();
            w.queue_payload(&archived).unwrap();
            assert!(matches!(
                w.queue_payload(&[0u8; 65]),
                Err(Error::MessageTooLarge { .. })
            ));
            w.queue(&b"three".to_vec()).unwrap();
            assert_eq!(w.queued_frames(), 3);
            assert!(w.inner.get_ref().is_empty(), "queue must not write");
            w.flush_queued().await.unwrap();
            assert_eq!(w.queued_frames(), 0);
            let (expected, _) = stream_of(&[b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]);
            assert_eq!(w.inner.get_ref(), &expected);
            let mut r = FrameReader::new(Cursor::new(expected), peer(), 64);
            for want in [&b"one"[..], b"two", b"three"] {
                assert_eq!(r.recv::<Vec<u8>>().await.unwrap().as_slice(), want);
            }
        });
    }

    #[test]
    fn reader_reports_a_clean_close_between_frames() {
        // End-of-file exactly between frames is ConnectionClosed, and the reader stays closed.
        let (stream, _) = stream_of(&[b"abc".to_vec()]);
        block_on(async {
            let mut r = FrameReader::new(Cursor::new(stream), peer(), 1 << 20);
            assert_eq!(r.recv::<Vec<u8>>().await.unwrap().as_slice(), b"abc");
            assert!(matches!(
                r.recv::<Vec<u8>>().await,
                Err(Error::ConnectionClosed { .. })
            ));
            assert!(matches!(
                r.recv::<Vec<u8>>().await,
                Err(Error::ConnectionBroken { .. })
            ));
        });
    }

    #[test]
    fn payloads_are_handed_out_with_only_their_framing_checked() {
        // recv_payload hands out an intact frame's payload even when it is no archive (the
        // receiver decides what to answer) and the reader stays usable; a header announcing
        // more than the limit is TooLarge with the announced size, before its body is read;
        // end-of-file between frames is ConnectionClosed; a damaged frame breaks the reader.
        block_on(async {
            // An intact frame whose payload is no Vec<u8> archive (its length field points
            // far outside it), then a good one.
            let mut mixed = Vec::new();
            frame::encode(&[0xff; 8], &mut mixed);
            let (good, _) = stream_of(&[b"again".to_vec()]);
            mixed.extend_from_slice(&good);
            let mut r = FrameReader::new(Cursor::new(mixed.clone()), peer(), 1 << 20);
            let first = r.recv_payload().await.unwrap();
            assert_eq!(first.as_slice(), &[0xff; 8]);
            assert!(Validated::<Vec<u8>>::new(first).is_err());
            let second = r.recv_payload().await.unwrap();
            let v = Validated::<Vec<u8>>::new(second).unwrap();
            assert_eq!(v.as_slice(), b"again");
            assert!(matches!(
                r.recv_payload().await,
                Err(Error::ConnectionClosed { .. })
            ));
            // recv refuses the same payload and breaks the reader.
            let mut r = FrameReader::new(Cursor::new(mixed), peer(), 1 << 20);
            assert!(matches!(
                r.recv::<Vec<u8>>().await,
                Err(Error::InvalidPayload { .. })
            ));
            assert!(r.broken().is_some());

            let (stream, _) = stream_of(&[b"hello".to_vec(), b"again".to_vec()]);

            let mut r = FrameReader::new(Cursor::new(stream.clone()), peer(), 4);
            match r.recv_payload().await {
                Err(Error::BadFrame {
                    source:
                        FrameError::TooLarge {
                            payload_bytes,
                            payload_bytes_max: 4,
                        },
                    ..
                }) => assert!(payload_bytes > 4),
                other => panic!("{other:?}"),
            }
            assert!(r.broken().is_some());
            assert_eq!(r.inner.position(), HEADER_BYTES as u64, "the body was read");

            let mut damaged = stream;
            let last = damaged.len() - 9;
            damaged[last] ^= 0xff;
            let mut r = FrameReader::new(Cursor::new(damaged), peer(), 1 << 20);
            assert!(r.recv_payload().await.is_ok());
            assert!(matches!(
                r.recv_payload().await,
                Err(Error::BadFrame { .. })
            ));
            assert!(matches!(
                r.recv_payload().await,
                Err(Error::ConnectionBroken { .. })
            ));
        });
    }

    proptest! {
        #[test]
        fn reader_accepts_only_intact_frames(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..5),
            at in any::<prop::sample::Index>(),
            xor in 1u8..=255,
        ) {
            // With one byte of a stream of frames changed, the frames before it are delivered
            // intact and the damaged one is refused: nothing corrupted is ever handed out.
            let (mut stream, ends) = stream_of(&payloads);
            let i = at.index(stream.len());
            stream[i] ^= xor;
            let damaged = ends.iter().position(|&end| i < end).unwrap();
            block_on(async {
                let mut r = FrameReader::new(Cursor::new(stream.clone()), peer(), 1 << 20);
                for (k, p) in payloads.iter().enumerate() {
                    let got = r.recv::<Vec<u8>>().await;
                    if k < damaged {
                        let got = got.unwrap();
                        prop_assert_eq!(got.as_slice(), &p[..]);
                    } else {
                        prop_assert!(got.is_err());
                        prop_assert!(r.broken().is_some());
                        break;
                    }
                }
                // The payload reader hands out the same intact frames and never the damaged
                // one: its checksum (or header check) fails before any archive is looked at.
                let mut r = FrameReader::new(Cursor::new(stream), peer(), 1 << 20);
                for (k, p) in payloads.iter().enumerate() {
                    let got = r.recv_payload().await;
                    if k < damaged {
                        let v = Validated::<Vec<u8>>::new(got.unwrap()).unwrap();
                        prop_assert_eq!(v.as_slice(), &p[..]);
                    } else {
                        prop_assert!(got.is_err());
                        prop_assert!(r.broken().is_some());
                        break;
                    }
                }
                Ok(())
            })?;
        }

        #[test]
        fn reader_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            // Arbitrary bytes end in an error, never a panic, and the reader then stays broken.
            block_on(async {
                let mut r = FrameReader::new(Cursor::new(bytes.clone()), peer(), 4096);
                // Each accepted frame consumes at least 16 bytes, so this terminates.
                while r.recv::<Vec<u8>>().await.is_ok() {}
                prop_assert!(r.broken().is_some());
                let mut r = FrameReader::new(Cursor::new(bytes), peer(), 4096);
                while let Ok(p) = r.recv_payload().await {
                    prop_assert!(p.len() <= 4096);
                }
                prop_assert!(r.broken().is_some());
                Ok(())
            })?;
        }
    }
}
