//! Limits every client-facing connection of a node shares (the client listener and the Kafka
//! listeners), with Kafka's keys where Kafka has them:
//!
//! | limit | key | effect |
//! |---|---|---|
//! | connections open at once, node-wide | `max.connections` | one more is closed at accept, before anything is read or allocated for it |
//! | connections from one address | `max.connections.per.ip`, `max.connections.per.ip.overrides` | the same, per client address |
//! | a connection that sends nothing | `connections.max.idle.ms` | closed once no request arrived (nor finished arriving) for that long while nothing of it is being served |
//! | a client that stops reading its answers | `corum.connection.send.timeout.ms` | a write of answers that makes no progress for that long closes the connection |
//!
//! A request's size is checked against `socket.request.max.bytes` by each listener's reader
//! before its body is read (and its buffer grows only with the bytes that arrive), and a
//! connection has at most `corum.connection.inflight.requests.max` requests being served or
//! answered: at the cap its reader stops reading (TCP pushes back on the client), so a client
//! that stops reading is backpressured first, then closed by the send timeout.
//!
//! The [`ConnectionGate`] lives on the worker shard, shared by the listeners (`Rc`); an
//! [`Admission`] holds one connection's place until it is dropped. Refusals are logged at most
//! a few lines a second ([`LogLimiter`]), each naming the listener, the peer and the limit, and
//! the count of refusals not logged.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use corum_runtime::transport::reset_when_closed;
use corum_runtime::LogLimiter;

/// The limits of [`ConnectionGate`] and of each connection, derived from the node's
/// configuration by [`crate::config::components::connection_limits`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// `max.connections`: client-facing connections open at once on this node.
    pub max: u32,
    /// `max.connections.per.ip`: connections open at once from one address.
    pub per_ip_max: u32,
    /// `max.connections.per.ip.overrides`: the per-address limit of these addresses.
    pub per_ip_overrides: BTreeMap<IpAddr, u32>,
    /// `connections.max.idle.ms`: a connection with nothing arriving and nothing being
    /// served for this long is closed.
    pub idle: Duration,
    /// `corum.connection.send.timeout.ms`: a write that makes no progress for this long
    /// closes its connection.
    pub send_timeout: Duration,
}

impl ConnectionLimits {
    /// No limit worth the name: for tests and tools that serve a handful of connections.
    pub fn unlimited() -> ConnectionLimits {
        ConnectionLimits {
            max: u32::MAX,
            per_ip_max: u32::MAX,
            per_ip_overrides: BTreeMap::new(),
            idle: Duration::from_secs(600),
            send_timeout: Duration::from_secs(30),
        }
    }

    /// The per-address limit of `ip`.
    pub fn per_ip_max_of(&self, ip: IpAddr) -> u32 {
        self.per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.per_ip_max)
    }
}

/// Why a connection was refused at accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("max.connections ({max}) connections are open")]
    Node { max: u32 },
    #[error("{max} connections from {ip} are open (max.connections.per.ip)")]
    Ip { ip: IpAddr, max: u32 },
}

/// Counts the open client-facing connections of a node, in total and per address. See the
/// module doc.
#[derive(Debug)]
pub struct ConnectionGate {
    limits: ConnectionLimits,
    open: Cell<u32>,
    /// Open connections per address; an address leaves the map with its last connection.
    per_ip: RefCell<HashMap<IpAddr, u32>>,
    refused: Cell<u64>,
}

/// Refusals logged per second at most.
static REFUSED_LOG: LogLimiter = LogLimiter::new(5);

impl ConnectionGate {
    pub fn new(limits: ConnectionLimits) -> Rc<ConnectionGate> {
        Rc::new(ConnectionGate {
            limits,
            open: Cell::new(0),
            per_ip: RefCell::new(HashMap::new()),
            refused: Cell::new(0),
        })
    }

    pub fn limits(&self) -> &ConnectionLimits {
        &self.limits
    }

    /// Connections admitted and not yet closed.
    pub fn open(&self) -> u32 {
        self.open.get()
    }

    /// Connections refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.get()
    }

    /// Takes a place for a connection from `peer` accepted on `listener`, or refuses it
    /// (logged, rate-limited: see the module doc). The place is given back when the
    /// [`Admission`] drops.
    pub fn admit(self: &Rc<Self>, listener: &str, peer: SocketAddr) -> Option<Admission> {
        match self.try_admit(peer.ip()) {
            Ok(a) => Some(a),
            Err(refusal) => {
                self.refused.set(self.refused.get() + 1);
                if let Some(suppressed) = REFUSED_LOG.allow() {
                    tracing::warn!(%listener, %peer, reason = %refusal, suppressed,
                        "refusing a connection");
                }
                None
            }
        }
    }

    fn try_admit(self: &Rc<Self>, ip: IpAddr) -> Result<Admission, Refusal> {
        if self.open.get() >= self.limits.max {
            return Err(Refusal::Node {
                max: self.limits.max,
            });
        }
        let ip_max = self.limits.per_ip_max_of(ip);
        let mut per_ip = self.per_ip.borrow_mut();
        let from_ip = per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= ip_max {
            return Err(Refusal::Ip { ip, max: ip_max });
        }
        per_ip.insert(ip, from_ip + 1);
        self.open.set(self.open.get() + 1);
        Ok(Admission {
            gate: self.clone(),
            ip,
        })
    }

    fn release(&self, ip: IpAddr) {
        self.open.set(self.open.get() - 1);
        let mut per_ip = self.per_ip.borrow_mut();
        let n = per_ip.get_mut(&ip).expect("an admitted address is counted");
        *n -= 1;
        if *n == 0 {
            per_ip.remove(&ip);
        }
    }
}

/// Closes a socket refused at accept at once, with a reset (`SO_LINGER` 0): no FIN exchange
/// and no TIME_WAIT left on the node for a connection it never served, which is most of what
/// a refusal costs under a flood that reconnects. The client reads a reset (as Kafka's
/// clients do from a broker that drops them, they connect again later).
pub fn refuse(stream: glommio::net::TcpStream) {
    use std::os::fd::AsRawFd;
    reset_when_closed(stream.as_raw_fd());
    drop(stream);
}

/// Before a connection's socket is dropped: a reset ([`reset_when_closed`]) when the kernel
/// still holds bytes of it not yet acknowledged by the client (`SIOCOUTQ`), a FIN otherwise.
///
/// Whatever ended the connection (an idle or arrival timeout, a bad request, the client's
/// end of stream), answers may still wait in the send buffer for a client that does not
/// read them; a FIN would queue behind them and never reach it, leaving the client waiting
/// on a connection the node has given up and the node's kernel holding the orphaned socket.
/// A connection whose answers were all delivered ends with a FIN, as a clean close.
pub fn close_without_waiting(fd: std::os::fd::RawFd) {
    let mut unsent: libc::c_int = 0;
    // SAFETY: ioctl(SIOCOUTQ) on an open socket the caller owns, with a valid int.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut unsent) };
    if rc != 0 || unsent > 0 {
        reset_when_closed(fd);
    }
}

/// One admitted connection's place; dropping it gives the place back.
#[derive(Debug)]
pub struct Admission {
    gate: Rc<ConnectionGate>,
    ip: IpAddr,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.gate.release(self.ip);
    }
}

/// Why a connection was closed, for [`log_closed`]: each kind has a rate limit of its own,
/// so a flood of one kind does not hide another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// `connections.max.idle.ms` passed with nothing arriving.
    Idle,
    /// A write of answers made no progress for `corum.connection.send.timeout.ms`.
    SlowConsumer,
    /// A request that cannot be served: too large, malformed, or not arriving in time.
    BadRequest,
}

/// Lines per kind of close, per second at most.
static CLOSED_IDLE_LOG: LogLimiter = LogLimiter::new(10);
static CLOSED_SLOW_LOG: LogLimiter = LogLimiter::new(10);
static CLOSED_BAD_LOG: LogLimiter = LogLimiter::new(10);

/// Logs (rate-limited per kind) that the connection from `peer` on `listener` is closed, and
/// why.
pub fn log_closed(kind: Closed, listener: &str, peer: SocketAddr, reason: std::fmt::Arguments<'_>) {
    let limiter = match kind {
        Closed::Idle => &CLOSED_IDLE_LOG,
        Closed::SlowConsumer => &CLOSED_SLOW_LOG,
        Closed::BadRequest => &CLOSED_BAD_LOG,
    };
    if let Some(suppressed) = limiter.allow() {
        tracing::warn!(%listener, %peer, %reason, suppressed, "closing a connection");
    }
}

/// Awaits `fut` unless nothing arrives for `idle` while `busy()` is false: `None` then (the
/// connection is idle: see the module doc). While `busy()` (requests of the connection are
/// being served or answered) the wait goes on, and the same `fut` keeps what it read.
pub async fn unless_idle<F: Future>(
    fut: F,
    idle: Duration,
    busy: impl Fn() -> bool,
) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    loop {
        let expired = async {
            glommio::timer::sleep(idle).await;
            None
        };
        match futures_lite::future::or(async { Some(fut.as_mut().await) }, expired).await {
            Some(out) => return Some(out),
            None if busy() => continue,
            None => return None,
        }
    }
}

/// Whether an IO error is a write that timed out (`corum.connection.send.timeout.ms`).
pub fn is_timeout(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::TimedOut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: u32, per_ip: u32, overrides: &[(IpAddr, u32)]) -> ConnectionLimits {
        ConnectionLimits {
            max,
            per_ip_max: per_ip,
            per_ip_overrides: overrides.iter().copied().collect(),
            ..ConnectionLimits::unlimited()
        }
    }

    #[test]
    fn admits_up_to_the_limits_and_gives_places_back() {
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let c: IpAddr = [10, 0, 0, 3].into();
        let gate = ConnectionGate::new(limits(5, 2, &[(c, 3)]));
        let peer = |ip| SocketAddr::new(ip, 1);
        let a1 = gate.admit("CLIENT", peer(a)).unwrap();
        let _a2 = gate.admit("KAFKA", peer(a)).unwrap();
        assert_eq!(
            gate.try_admit(a).unwrap_err(),
            Refusal::Ip { ip: a, max: 2 }
        );
        let _b1 = gate.admit("CLIENT", peer(b)).unwrap();
        let c_all: Vec<_> = (0..2)
            .map(|_| gate.admit("CLIENT", peer(c)).unwrap())
            .collect();
        assert_eq!(gate.open(), 5);
        // The node-wide limit before c's override of 3.
        assert_eq!(gate.try_admit(c).unwrap_err(), Refusal::Node { max: 5 });
        assert!(gate.admit("CLIENT", peer(b)).is_none());
        assert_eq!(gate.refused(), 1);
        drop(a1);
        assert_eq!(gate.open(), 4);
        let _c3 = gate.admit("CLIENT", peer(c)).unwrap();
        drop(c_all);
        assert_eq!(gate.open(), 3);
        assert_eq!(gate.per_ip.borrow().len(), 3);
        drop(_c3);
        assert_eq!(
            gate.per_ip.borrow().len(),
            2,
            "an address leaves with its last connection"
        );
    }
}
