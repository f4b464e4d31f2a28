//! Slow consumers beside the workload (`--slow-consumers`): what the nodes' send timeout and
//! in-flight cap are measured against (`tools/scripts/bad-input-load.sh`, which adds a
//! connection flood of its own, `tools/scripts/lib/flood.py`: one process cannot hold 20,000
//! connections under this machine's open-file limit).
//!
//! `--slow-consumers M` connections per address of `--slow-at` and `--slow-kafka-at`
//! pipeline requests as fast as the node takes them and never read an answer: DescribeQuorum
//! frames on a client listener, ApiVersions v0 on a Kafka listener. Once the node stops
//! reading (its in-flight cap) their writes block; when the node closes one (its send
//! timeout) it connects again. Plain sockets on threads of their own (not the workload's
//! executor), stopped at the end of the run; their counts go in the report (`abuse`).

use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use corum_node::protocol::{RequestBody, RequestFrame};

/// The slow consumers to run beside the workload.
#[derive(Clone, Debug, Default)]
pub struct AbuseConfig {
    pub slow_consumers: usize,
    /// Client listeners (corum's protocol).
    pub slow_at: Vec<SocketAddr>,
    /// Kafka listeners.
    pub slow_kafka_at: Vec<SocketAddr>,
}

impl AbuseConfig {
    pub fn is_empty(&self) -> bool {
        self.slow_consumers == 0 || (self.slow_at.is_empty() && self.slow_kafka_at.is_empty())
    }
}

/// Counts of the slow consumers, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AbuseReport {
    /// Bytes of requests the slow consumers got the node to take.
    pub slow_request_bytes: u64,
    /// Slow consumer connections the node closed.
    pub slow_closed_by_node: u64,
}

#[derive(Default)]
struct Counters {
    slow_bytes: AtomicU64,
    slow_closed: AtomicU64,
}

/// The running slow consumers; [`Abuse::stop`] ends them.
pub struct Abuse {
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    threads: Vec<JoinHandle<()>>,
}

impl Abuse {
    /// Starts the slow consumers.
    pub fn start(config: &AbuseConfig) -> Abuse {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let mut threads = Vec::new();
        for _ in 0..config.slow_consumers {
            for &addr in &config.slow_at {
                let (stop, counters) = (stop.clone(), counters.clone());
                threads.push(std::thread::spawn(move || {
                    slow_consumer(addr, Kind::Private, &stop, &counters)
                }));
            }
            for &addr in &config.slow_kafka_at {
                let (stop, counters) = (stop.clone(), counters.clone());
                threads.push(std::thread::spawn(move || {
                    slow_consumer(addr, Kind::Kafka, &stop, &counters)
                }));
            }
        }
        Abuse {
            stop,
            counters,
            threads,
        }
    }

    /// Stops the slow consumers (their connections close) and returns the counts.
    pub fn stop(self) -> AbuseReport {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let c = &self.counters;
        AbuseReport {
            slow_request_bytes: c.slow_bytes.load(Ordering::Relaxed),
            slow_closed_by_node: c.slow_closed.load(Ordering::Relaxed),
        }
    }
}

fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    TcpStream::connect_timeout(&addr, Duration::from_secs(2))
}

#[derive(Clone, Copy)]
enum Kind {
    Private,
    Kafka,
}

/// One request of `kind`, framed.
fn request(kind: Kind, correlation_id: u64) -> Vec<u8> {
    match kind {
        Kind::Private => {
            let frame = RequestFrame {
                correlation_id,
                timeout_ms: 0,
                body: RequestBody::DescribeQuorum,
            };
            let mut buf = rkyv::util::AlignedVec::new();
            corum_runtime::message::encode_frame(&frame, &mut buf, 1 << 20)
                .expect("a DescribeQuorum request encodes");
            buf.to_vec()
        }
        Kind::Kafka => {
            // ApiVersions v0: request header v1 (api key 18, version 0, correlation id,
            // client id), no body.
            let client_id = b"slow-consumer";
            let mut body = Vec::new();
            body.extend_from_slice(&18i16.to_be_bytes());
            body.extend_from_slice(&0i16.to_be_bytes());
            body.extend_from_slice(&(correlation_id as i32).to_be_bytes());
            body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
            body.extend_from_slice(client_id);
            let mut out = (body.len() as i32).to_be_bytes().to_vec();
            out.extend_from_slice(&body);
            out
        }
    }
}

fn slow_consumer(addr: SocketAddr, kind: Kind, stop: &AtomicBool, c: &Counters) {
    let mut correlation_id = 1u64;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = connect(addr) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let _ = s.set_nonblocking(true);
        // Pipeline requests until the node stops taking them; never read.
        let mut pending = request(kind, correlation_id);
        let mut at = 0;
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match s.write(&pending[at..]) {
                Ok(0) => break,
                Ok(n) => {
                    c.slow_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    at += n;
                    if at == pending.len() {
                        correlation_id += 1;
                        pending = request(kind, correlation_id);
                        at = 0;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    // Blocked: the node stopped reading. Did it close us?
                    let mut probe = libc::pollfd {
                        fd: s.as_raw_fd(),
                        events: libc::POLLRDHUP,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd.
                    unsafe { libc::poll(&mut probe, 1, 100) };
                    if probe.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        c.slow_closed.fetch_add(1, Ordering::Relaxed);
    }
}
