//! The plain socket under a [`NetStream`](super::NetStream), written several buffers at a time,
//! and a stream's read and write halves for two tasks of one shard.
//!
//! glommio writes a socket one buffer at a time (a `send` first, then a wait for room). An
//! answer made of several buffers — a broker's Fetch answer: its head, the cached renderings of
//! the log's batches where they lie, its tail — would have to be copied into one buffer first.
//! [`PlainStream`] sends such an answer with one `sendmsg` of all its buffers (no copy but the
//! kernel's), and waits for room through glommio as a one-buffer write does, so the stream's
//! write timeout works the same for both.

use std::cell::RefCell;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use futures_lite::{AsyncRead, AsyncWrite};
use glommio::net::{Preallocated, TcpStream};

use super::NetStream;

/// Buffers one `sendmsg` takes at most (Linux's `IOV_MAX`); a write of more sends the first
/// this many, as a short write.
pub const IOV_MAX: usize = 1024;

/// A plain TCP socket (glommio's, reads buffered) whose writes of several buffers are one
/// `sendmsg`.
pub struct PlainStream {
    stream: TcpStream<Preallocated>,
    /// The last write through glommio waited for room: glommio armed the stream's write
    /// timeout, which only its own successful write disarms. A `sendmsg` that succeeds
    /// afterwards disarms it (with an empty write through glommio), or a later wait would
    /// time out counting from this one.
    waited: bool,
}

impl AsRawFd for PlainStream {
    fn as_raw_fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }
}

impl AsyncRead for PlainStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for PlainStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.waited = polled.is_pending();
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let Some(first) = bufs.iter().find(|b| !b.is_empty()) else {
            return Poll::Ready(Ok(0));
        };
        if bufs.len() == 1 {
            return Pin::new(this).poll_write(cx, first);
        }
        match send_vectored(this.stream.as_raw_fd(), bufs) {
            Ok(n) => {
                if this.waited {
                    // An empty send succeeds at once, and glommio disarms the timeout.
                    let _ = Pin::new(&mut this.stream).poll_write(cx, &[]);
                    this.waited = false;
                }
                Poll::Ready(Ok(n))
            }
            // No room: wait for it as a one-buffer write does (which tries once more first).
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Pin::new(this).poll_write(cx, first),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_close(cx)
    }
}

/// One non-blocking `sendmsg` of `bufs` (at most [`IOV_MAX`] of them) on socket `fd`.
fn send_vectored(fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    let count = bufs.len().min(IOV_MAX);
    // SAFETY: an all-zero msghdr is valid (no address, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is ABI-compatible with `iovec` on Unix (std documents it); the kernel only
    // reads the buffers, which `bufs` borrows for the call.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = count as _;
    loop {
        // SAFETY: `msg` points at `count` live iovecs for the duration of the call.
        let sent = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if sent >= 0 {
            return Ok(sent as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The read half of a [`NetStream`] split by [`NetStream::split`].
pub struct NetReadHalf(Rc<RefCell<NetStream>>);

/// The write half of a [`NetStream`] split by [`NetStream::split`]: writes of several buffers
/// stay one write ([`AsyncWrite::poll_write_vectored`]).
pub struct NetWriteHalf(Rc<RefCell<NetStream>>);

impl NetStream {
    /// A plain TCP socket, its reads buffered.
    pub fn plain(stream: TcpStream) -> NetStream {
        NetStream::Plain(PlainStream {
            stream: stream.buffered(),
            waited: false,
        })
    }

    /// The stream's two halves, for a reader task and a writer task of the same shard (each
    /// borrows the stream only while it is polled; the socket has a waiter slot for each
    /// direction). The socket closes when both are dropped.
    pub fn split(self) -> (NetReadHalf, NetWriteHalf) {
        let shared = Rc::new(RefCell::new(self));
        (NetReadHalf(shared.clone()), NetWriteHalf(shared))
    }
}

impl AsyncRead for NetReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_read(cx, buf)
    }
}

impl AsyncWrite for NetWriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_close(cx)
    }
}

/// Writes all of `parts`, in order, with as few writes as the socket takes: each write offers
/// every buffer left (up to [`IOV_MAX`]). Written buffers are dropped from `parts`; on error,
/// what is left in it was not (wholly) written.
pub async fn write_all_parts(
    writer: &mut (impl AsyncWrite + Unpin),
    parts: &mut Vec<bytes::Bytes>,
) -> io::Result<()> {
    use bytes::Buf;
    use futures_lite::AsyncWriteExt;
    let mut done = 0;
    let result = async {
        loop {
            // Empty buffers count as written.
            while parts.get(done).is_some_and(|p| p.is_empty()) {
                done += 1;
            }
            if done == parts.len() {
                return Ok(());
            }
            let slices: Vec<IoSlice<'_>> = parts[done..]
                .iter()
                .take(IOV_MAX)
                .map(|p| IoSlice::new(p))
                .collect();
            let mut n = writer.write_vectored(&slices).await?;
            drop(slices);
            if n == 0 {
                return Err(io::Error::from(io::ErrorKind::WriteZero));
            }
            while n > 0 {
                let first = &mut parts[done];
                let step = n.min(first.len());
                first.advance(step);
                n -= step;
                if first.is_empty() {
                    done += 1;
                }
            }
        }
    }
    .await;
    parts.drain(..done);
    result
}
