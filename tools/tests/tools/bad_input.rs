//! Bad input at the process level (#18): real `corum run` processes meet clients that send
//! garbage, announce huge frames, open far more connections than `max.connections`, stop
//! reading their answers or send nothing, and a peer that replays old Raft messages. Each
//! test runs a normal client (`corum loadgen`, configs workload) through the abuse and asserts
//! it is served without errors, the abused node's RSS stays under a bound, and the node's log
//! says why it closed connections (in a few lines: the lines are rate-limited).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use corum_node::peer::PeerEnvelope;
use corum_node::protocol::{RequestBody, RequestFrame};
use corum_raft::message::{AppendRequest, BeginQuorumEpoch, VoteRequest};
use corum_raft::{Message, ReplicaKey};
use corum_types::{Epoch, LogOffset, NodeId, Uuid};

use crate::common::*;

/// RSS the abused node must stay under (MiB): a node under this test's load sits near 60.
const RSS_BOUND_MIB: u64 = 400;

/// The node's resident set (VmRSS) in MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("a live node");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib / 1024
}

fn node_log(c: &LocalCluster, id: u32) -> String {
    std::fs::read_to_string(&c.node(id).log).unwrap_or_default()
}

fn leader_id(c: &LocalCluster) -> (u32, u64) {
    let d = wait_until("a leader", Duration::from_secs(20), || {
        describe(&c.bootstrap(), 2_000)
    });
    leader_of(&d)
}

/// Whether the node closed `s` within `within` (end of file or a reset; what it sent first
/// is read and dropped).
fn closed_by_node(s: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// Whether the node closes `s` within `within`, without reading from it.
fn hung_up(s: &TcpStream, within: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let mut fd = libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut fd, 1, 100) };
        if fd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            return true;
        }
    }
    false
}

/// Whether the node has closed `s` already (a read without waiting).
fn closed_now(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    let closed = match s.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    };
    s.set_nonblocking(false).unwrap();
    closed
}

/// A runtime frame header (corum's private protocol and the Raft port) announcing `len`
/// payload bytes.
fn frame_header(len: u32) -> Vec<u8> {
    let mut h = b"CRMF".to_vec();
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&0u16.to_le_bytes());
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h
}

/// Bytes that are no frame of either protocol (a fixed pseudo-random pattern).
fn garbage(len: usize) -> Vec<u8> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A normal client through the abuse: `corum loadgen` (configs, 4 clients) for `secs`.
fn normal_client(c: &LocalCluster, secs: &str) -> Running {
    spawn_loadgen(
        &c.bootstrap(),
        &[
            "--workload",
            "configs",
            "--clients",
            "4",
            "--duration",
            secs,
            "--rtt-probes",
            "0",
        ],
    )
}

fn assert_served(out: &std::process::Output, c: &LocalCluster) {
    let r = loadgen_json(out);
    assert!(
        out.status.success() && r["ops"].as_u64().unwrap_or(0) > 0 && r["errors"] == 0,
        "the normal client was not served through the abuse: {r}\n{}",
        logs(c)
    );
}

/// Garbage, huge frame headers and headers of frames that never come on every listener,
/// 1,000 connections against `max.connections=200`, silent connections and slow consumers
/// on the client and Kafka listeners: the leader closes each bad connection with a log line
/// saying why (a few lines for a flood), keeps serving a normal client without an error, and
/// its RSS stays under the bound.
#[test]
fn bad_clients_on_every_listener_are_closed_and_the_node_keeps_serving() {
    let _serial = serial();
    raise_nofile(4_096);
    let tmp = tempfile::tempdir().unwrap();
    let c = start_cluster(
        tmp.path(),
        &[
            ("max.connections", "200"),
            ("connections.max.idle.ms", "3000"),
            ("corum.connection.send.timeout.ms", "2000"),
            ("corum.connection.inflight.requests.max", "16"),
            ("socket.request.max.bytes", "1048576"),
        ],
    );
    let (l, _) = leader_id(&c);
    let node = c.node(l);
    let pid = node.process.as_ref().expect("running").pid();
    let (client, kafka, raft) = (node.client, node.kafka, node.raft);
    let loadgen = normal_client(&c, "20");
    let mut rss_max = rss_mib(pid);

    // Garbage on each listener: closed.
    for addr in [client, kafka, raft] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&garbage(4096)).unwrap();
        assert!(
            closed_by_node(&mut s, Duration::from_secs(5)),
            "garbage on {addr} was not closed"
        );
    }
    // A huge frame header on each: closed at once, from the header alone.
    let huge: [(SocketAddr, Vec<u8>); 3] = [
        (client, frame_header(0x7fff_fff0)),
        (kafka, 0x7fff_fff0i32.to_be_bytes().to_vec()),
        (raft, frame_header(0x7fff_fff0)),
    ];
    for (addr, header) in &huge {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(header).unwrap();
        assert!(
            closed_by_node(&mut s, Duration::from_secs(5)),
            "a huge frame header on {addr} was not closed"
        );
    }
    // 100 headers each announcing a frame at the limit (1 MiB) whose body never comes:
    // nothing is allocated for them (RSS below), and they end at the idle timeout (client)
    // or the request's arrival timeout (Kafka).
    let mut announced: Vec<TcpStream> = (0..100)
        .map(|i| {
            let (addr, header) = if i % 2 == 0 {
                (client, frame_header(1_048_576 - 8))
            } else {
                (kafka, 1_048_576i32.to_be_bytes().to_vec())
            };
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&header).unwrap();
            s
        })
        .collect();
    rss_max = rss_max.max(rss_mib(pid));

    // Slow consumers: pipeline requests and never read.
    // Connected here, before the flood takes the places.
    let slow: Vec<(bool, std::thread::JoinHandle<Result<(), String>>)> =
        [(client, true), (kafka, false)]
            .into_iter()
            .map(|(addr, private)| {
                let s = TcpStream::connect(addr).unwrap();
                (
                    private,
                    std::thread::spawn(move || slow_consumer(s, private)),
                )
            })
            .collect();

    // A flood: 1,000 connections against max.connections=200 (the normal client, the
    // announced frames and the slow consumers hold some places).
    let flood: Vec<TcpStream> = (0..1_000)
        .filter_map(|i| TcpStream::connect(if i % 2 == 0 { client } else { kafka }).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    rss_max = rss_max.max(rss_mib(pid));
    let mut flood = flood;
    let refused = flood.iter_mut().map(closed_now).filter(|&c| c).count();
    assert!(
        refused >= 700,
        "only {refused} of 1,000 flood connections were refused at max.connections=200"
    );
    // The flood's survivors and the announced frames send nothing: idle, closed.
    for s in announced.iter_mut() {
        assert!(closed_by_node(s, Duration::from_secs(10)));
    }
    drop(flood);
    for (private, t) in slow {
        let listener = if private { "client" } else { "Kafka" };
        if let Err(e) = t.join().unwrap() {
            let log = node_log(&c, l);
            let said: Vec<&str> = log
                .lines()
                .filter(|line| line.contains("WARN") || line.contains("stopped reading"))
                .collect();
            panic!(
                "a slow consumer on the {listener} listener was not closed within the send \
                 timeout: {e}\nthe leader's warnings:\n{}",
                said[said.len().saturating_sub(40)..].join("\n")
            );
        }
    }
    rss_max = rss_max.max(rss_mib(pid));

    let out = loadgen.wait(Duration::from_secs(60));
    assert_served(&out, &c);
    assert!(
        rss_max < RSS_BOUND_MIB,
        "the leader's RSS reached {rss_max} MiB (bound {RSS_BOUND_MIB} MiB)"
    );
    let log = node_log(&c, l);
    for (why, needle) in [
        ("a refused connection", "refusing a connection"),
        ("the limit", "max.connections (200)"),
        ("an idle connection", "connections.max.idle.ms (3000 ms)"),
        ("a slow consumer", "the client stopped reading its answers"),
        ("a huge client frame", "exceeds the limit of 1048576 bytes"),
        (
            "a huge Kafka frame",
            "is above socket.request.max.bytes (1048576)",
        ),
        ("garbage", "bad magic"),
    ] {
        assert!(
            log.contains(needle),
            "no log line for {why} ({needle:?}):\n{log}"
        );
    }
    // Rate-limited: hundreds of refusals, a few lines.
    let refusal_lines = log.matches("refusing a connection").count();
    assert!(
        refusal_lines < 100,
        "{refusal_lines} lines for about 800 refusals: not rate-limited"
    );
}

/// A slow consumer whose requests the node read in full (a high
/// `corum.connection.inflight.requests.max`), then stops reading its answers: the node resets
/// the connection after the send timeout on both listeners. A FIN would queue behind the
/// unsent answers and never reach a client whose window is zero, which would wait forever
/// on a connection the node had given up.
#[test]
fn a_slow_consumer_whose_requests_were_all_read_is_reset() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let c = start_cluster(
        tmp.path(),
        &[
            ("corum.connection.send.timeout.ms", "1000"),
            ("corum.connection.inflight.requests.max", "65536"),
        ],
    );
    let (l, _) = leader_id(&c);
    let node = c.node(l);
    let consumers: Vec<_> = [(node.client, true), (node.kafka, false)]
        .into_iter()
        .map(|(addr, private)| {
            let listener = if private { "client" } else { "Kafka" };
            (
                listener,
                std::thread::spawn(move || sends_everything_then_stops_reading(addr, private)),
            )
        })
        .collect();
    for (listener, t) in consumers {
        if let Err(e) = t.join().unwrap() {
            panic!(
                "the {listener} listener's slow consumer: {e}\n{}",
                node_log(&c, l)
            );
        }
    }
}

/// Sends 40,000 pipelined requests (their answers are many times the socket buffers), reads
/// nothing, and expects a reset within 30 s.
fn sends_everything_then_stops_reading(addr: SocketAddr, private: bool) -> Result<(), String> {
    let s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    set_rcvbuf(&s, 4096);
    let bytes: Vec<u8> = (1..=40_000u64)
        .flat_map(|id| slow_request(id, private))
        .collect();
    s.set_write_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    (&s).write_all(&bytes).map_err(|e| {
        format!(
            "the node did not read the {} request bytes: {e}",
            bytes.len()
        )
    })?;
    if !hung_up(&s, Duration::from_secs(30)) {
        return Err("not closed within 30 s of the last request".into());
    }
    // What the client's buffer holds comes first, then the reset.
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match (&s).read(&mut buf) {
            Ok(0) => return Err("closed with a FIN, not a reset".into()),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(format!("read {e}, not a reset")),
        }
    }
}

/// Sets `s`'s receive buffer: a client's answers stop flowing after a few KiB instead of the
/// megabytes loopback grows its buffers to.
fn set_rcvbuf(s: &TcpStream, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt on the socket's own descriptor with a valid int and its size.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Raises this process's open-file limit to at least `n` (up to the hard limit).
fn raise_nofile(n: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid rlimit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if lim.rlim_cur < n {
            lim.rlim_cur = n.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Pipelines requests on `s` (DescribeQuorum on a client listener, ApiVersions on a Kafka
/// one; `private` says which) without reading until the node stops taking them and then
/// closes the connection; true when it did within 30 s.
fn slow_consumer(mut s: TcpStream, private: bool) -> Result<(), String> {
    set_rcvbuf(&s, 4096);
    s.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // Each phase has its own bound: on a loaded host filling the buffers alone can take long.
    let start = Instant::now();
    let deadline = start + Duration::from_secs(60);
    let mut id = 0u64;
    while Instant::now() < deadline {
        // 256 requests per write.
        let mut bytes = Vec::new();
        for _ in 0..256 {
            id += 1;
            bytes.extend_from_slice(&slow_request(id, private));
        }
        match s.write_all(&bytes) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                // Blocked: the node stopped reading. Wait for its close, still reading
                // nothing.
                let blocked = start.elapsed();
                return if hung_up(&s, Duration::from_secs(30)) {
                    eprintln!(
                        "slow consumer (private: {private}): blocked after {blocked:?} and {id} \
                         requests, closed after {:?}",
                        start.elapsed()
                    );
                    Ok(())
                } else {
                    // Both ends of the connection as the kernel sees them: whether the node's
                    // end is still open (and what it holds) or gone.
                    let port = s.local_addr().map(|a| a.port()).unwrap_or(0);
                    let sockets = std::process::Command::new("ss")
                        .args(["-tnoi", &format!("( sport = :{port} or dport = :{port} )")])
                        .output()
                        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                        .unwrap_or_else(|e| format!("ss: {e}"));
                    Err(format!(
                        "blocked after {blocked:?} and {id} requests, then not closed within \
                         30 s; the connection's sockets (ss):\n{sockets}"
                    ))
                };
            }
            Err(_) => return Ok(()),
        }
    }
    Err(format!(
        "the node read all {id} requests in {:?} and never stopped reading",
        start.elapsed()
    ))
}

/// One pipelined request of a slow consumer: DescribeQuorum (corum's protocol) or
/// ApiVersions v0 (Kafka's).
fn slow_request(id: u64, private: bool) -> Vec<u8> {
    if private {
        let frame = RequestFrame {
            correlation_id: id,
            timeout_ms: 0,
            body: RequestBody::DescribeQuorum,
        };
        let mut buf = rkyv::util::AlignedVec::new();
        corum_runtime::message::encode_frame(&frame, &mut buf, 1 << 20).unwrap();
        buf.to_vec()
    } else {
        let mut b = Vec::new();
        b.extend_from_slice(&18i16.to_be_bytes());
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&(id as i32).to_be_bytes());
        b.extend_from_slice(&4i16.to_be_bytes());
        b.extend_from_slice(b"slow");
        let mut out = (b.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&b);
        out
    }
}

/// One envelope as a peer sends it: a runtime frame around the archived envelope.
fn envelope_bytes(cluster_id: Uuid, from: u32, to: u32, message: Message) -> Vec<u8> {
    let envelope = PeerEnvelope {
        cluster_id,
        from: NodeId(from),
        to: NodeId(to),
        message,
        routes: Vec::new(),
    };
    let mut buf = rkyv::util::AlignedVec::new();
    corum_runtime::message::encode_frame(&envelope, &mut buf, 1 << 20).unwrap();
    buf.to_vec()
}

/// A peer replays old Raft messages at a running 3-node quorum: votes, appends and epoch
/// announcements of the previous epoch (from a voter's id, and from node 99, not a voter),
/// and a vote for a far newer epoch under another cluster id. No node changes its epoch or
/// leader, the quorum keeps committing a normal client's writes without an error, and the
/// logs say what was ignored or refused.
#[test]
fn old_raft_messages_replayed_at_a_quorum_change_nothing() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = start_cluster(tmp.path(), &[]);
    let (first, _) = leader_id(&c);
    // A leader change, so that there is an older epoch with another leader to replay.
    c.terminate(first, Duration::from_secs(20)).unwrap();
    let others: Vec<u32> = c.ids().into_iter().filter(|&i| i != first).collect();
    let d = wait_until("a new leader", Duration::from_secs(20), || {
        describe(&bootstrap_of(&c, &others), 2_000).filter(|d| leader_of(d).0 != first)
    });
    c.start(first).unwrap();
    let (l, epoch) = leader_of(&d);
    assert!(epoch >= 2);
    let cluster_id: Uuid = c.cluster_id.parse().unwrap();
    let old = Epoch(epoch - 1);
    let stale = |from: u32| -> Vec<Message> {
        vec![
            Message::Vote(VoteRequest {
                epoch: old,
                candidate: ReplicaKey {
                    id: NodeId(from),
                    directory_id: Uuid::ZERO,
                },
                last_epoch: old,
                end_offset: LogOffset(1 << 40),
                pre_vote: false,
            }),
            Message::Append(AppendRequest {
                epoch: old,
                leader: NodeId(from),
                seq: 1,
                prev_end: LogOffset(0),
                prev_epoch: Epoch(0),
                batches: Vec::new(),
                high_watermark: LogOffset(0),
                snapshot: None,
            }),
            Message::BeginQuorumEpoch(BeginQuorumEpoch {
                epoch: old,
                leader: NodeId(from),
            }),
        ]
    };
    let loadgen = normal_client(&c, "8");
    let replay_end = Instant::now() + Duration::from_secs(6);
    let mut sent = 0;
    while Instant::now() < replay_end {
        for target in c.ids() {
            let addr = c.node(target).raft;
            let Ok(mut s) = TcpStream::connect(addr) else {
                continue;
            };
            // From the old leader's id (a voter), and from node 99 (not a voter).
            for from in [first, 99] {
                for m in stale(from) {
                    if s.write_all(&envelope_bytes(cluster_id, from, target, m))
                        .is_ok()
                    {
                        sent += 1;
                    }
                }
            }
            // A vote for a far newer epoch, under another cluster id: refused before Raft
            // sees it (it would unseat the leader otherwise).
            let mut other = TcpStream::connect(addr).unwrap();
            let vote = Message::Vote(VoteRequest {
                epoch: Epoch(epoch + 100),
                candidate: ReplicaKey {
                    id: NodeId(first),
                    directory_id: Uuid::ZERO,
                },
                last_epoch: Epoch(epoch + 100),
                end_offset: LogOffset(1 << 40),
                pre_vote: false,
            });
            let _ = other.write_all(&envelope_bytes(Uuid([7; 16]), first, target, vote));
            assert!(closed_by_node(&mut other, Duration::from_secs(5)));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(sent > 100, "only {sent} messages replayed");
    let out = loadgen.wait(Duration::from_secs(60));
    assert_served(&out, &c);
    let after = describe(&c.bootstrap(), 5_000).expect("a leader after the replay");
    assert_eq!(
        leader_of(&after),
        (l, epoch),
        "the replay changed the leader or the epoch\n{}",
        logs(&c)
    );
    let all_logs: String = c.ids().into_iter().map(|id| node_log(&c, id)).collect();
    for needle in [
        "ignoring a Raft message of an older epoch",
        "sender_is_voter=false",
        "sender_is_voter=true",
        "is for cluster",
    ] {
        assert!(
            all_logs.contains(needle),
            "no log line {needle:?}\n{}",
            logs(&c)
        );
    }
}
