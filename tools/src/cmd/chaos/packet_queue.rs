//! Packet delay, loss and reordering without `netem`: the kernel hands a node's packets to a
//! worker thread through an NFQUEUE (netfilter queue) and the worker decides when each goes.
//!
//! | step | what happens |
//! |---|---|
//! | start | a thread takes a file descriptor table of its own holding only stdin, stdout and stderr ([`private_fd_table`]), enters the node's network namespace (`setns` for that thread only), opens a netfilter-queue netlink socket there ([`nfq`]), binds queue [`QUEUE_NUM`] (metadata only, at most [`HELD_MAX`] packets awaiting a verdict, fail-open past that) and reports ready |
//! | rules | `iptables` rules in the namespace send the node's `eth0` packets (all, or those to and from one peer) to the queue with `--queue-bypass` ([`super::net::ChaosNet::queue_packets`]): packets on loopback never go there, and without a bound worker they pass |
//! | each packet | [`Hold::admit`] draws, from the fault's seed, whether it is dropped (a DROP verdict at once) and when it goes; it waits in a heap ordered by that time |
//! | due | an ACCEPT verdict; verdicts may go out of the order the packets came in (`reorder`), or keep it (`delay`: a packet is never due before the one before it) |
//! | stop | at heal the rules go first, then [`PacketQueue::stop`] accepts every packet still held and closes the socket; a worker also stops by itself after its `lifetime_max`, and if it dies the kernel drops what it held and lets the rest pass (bypass) |
//!
//! The nfq crate opens its socket without close-on-exec, so a process the rest of `corum chaos`
//! spawned while a worker ran (an `iptables-restore`, a restarted node) would inherit it and
//! keep the queue bound after the worker is gone: the next worker in that namespace could not
//! bind (EPERM), and packets the kernel queued to the dead socket would never get a verdict.
//! The worker's own file descriptor table keeps its socket out of every other thread's
//! children.
//!
//! The nfq crate (0.2.5) does not give out its socket, so the worker cannot sleep in `poll`
//! until the next packet or the next due time: it receives without blocking and sleeps at
//! most [`POLL`] between rounds, which is also the worst a packet's time can be off by.

use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The netfilter queue the rules and the worker use (queues are per network namespace).
pub const QUEUE_NUM: u16 = 18;
/// Packets at most awaiting a verdict (the kernel's queue-maxlen); past that the kernel lets
/// packets through without queueing them (fail-open), so a slow worker never black-holes a
/// node.
pub const HELD_MAX: u32 = 2048;
/// The longest a packet is held, whatever the fault asks.
pub const HOLD_MAX: Duration = Duration::from_secs(2);
/// The longest the worker sleeps between looking for packets and due verdicts.
pub const POLL: Duration = Duration::from_millis(1);

/// What happens to the packets a worker is given: each is dropped with `loss_percent`, else
/// held `delay_ms` ± `jitter_ms` (uniform; at least 0, at most [`HOLD_MAX`]). With `reorder`
/// each packet goes when its own time comes, so a later packet drawn a shorter hold overtakes
/// it; without, a packet is never due before the one that came before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Netem {
    pub delay_ms: u32,
    pub jitter_ms: u32,
    pub loss_percent: u8,
    pub reorder: bool,
    /// The seed of the per-packet draws (from the fault schedule's seed).
    pub seed: u64,
}

/// The per-packet decisions of a worker, on a clock it is given (time since the worker
/// started): deterministic for a seed and a sequence of arrival times.
pub struct Hold {
    netem: Netem,
    rng: ChaCha8Rng,
    /// The latest due time given so far (without `reorder`, no packet is due before it).
    last_due: Duration,
}

impl Hold {
    pub fn new(netem: Netem) -> Hold {
        assert!(netem.loss_percent <= 100, "a percentage");
        Hold {
            netem,
            rng: ChaCha8Rng::seed_from_u64(netem.seed),
            last_due: Duration::ZERO,
        }
    }

    /// A packet that arrived at `now`: `None` to drop it, else when it is due.
    pub fn admit(&mut self, now: Duration) -> Option<Duration> {
        let n = self.netem;
        if n.loss_percent > 0 && self.rng.gen_range(0..100u8) < n.loss_percent {
            return None;
        }
        let jitter = i64::from(n.jitter_ms) * 1_000;
        let offset = if jitter > 0 {
            self.rng.gen_range(-jitter..=jitter)
        } else {
            0
        };
        let hold_us = (i64::from(n.delay_ms) * 1_000 + offset).max(0) as u64;
        let hold = Duration::from_micros(hold_us).min(HOLD_MAX);
        let mut due = now + hold;
        if !n.reorder {
            due = due.max(self.last_due);
        }
        self.last_due = self.last_due.max(due);
        Some(due)
    }
}

/// What a worker did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets it was given.
    pub packets: u64,
    /// Packets it dropped.
    pub dropped: u64,
    /// Packets it accepted after one that came in later.
    pub out_of_order: u64,
    /// Packets it let go before their time because it was stopping (at the heal).
    pub early: u64,
    /// The most packets it held at once.
    pub held_max: usize,
    /// The time held of the packets let go when due, in total (µs).
    pub held_us_total: u64,
}

impl QueueStats {
    /// The mean time a packet let go when due was held, in ms (each at least its drawn hold).
    pub fn held_ms_mean(&self) -> f64 {
        let on_time = self.packets - self.dropped - self.early;
        if on_time == 0 {
            return 0.0;
        }
        self.held_us_total as f64 / 1e3 / on_time as f64
    }
}

impl std::fmt::Display for QueueStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} packets: {} dropped, {} out of order, held {:.1} ms on average ({} let go early \
             at the heal), at most {} at once",
            self.packets,
            self.dropped,
            self.out_of_order,
            self.held_ms_mean(),
            self.early,
            self.held_max
        )
    }
}

/// A held packet, ordered so that the heap's top is the earliest due (then the earliest come).
struct Held<M> {
    due: Duration,
    seq: u64,
    arrived: Duration,
    msg: M,
}

impl<M> PartialEq for Held<M> {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl<M> Eq for Held<M> {}
impl<M> PartialOrd for Held<M> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<M> Ord for Held<M> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

/// Enters the network namespace at `path` (`/run/netns/NAME`) on the calling thread only.
pub fn enter_netns(path: &Path) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path)
        .with_context(|| format!("opening the network namespace {}", path.display()))?;
    // SAFETY: setns on an open namespace fd; CLONE_NEWNET changes only this thread's network
    // namespace.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("entering the network namespace {}", path.display()));
    }
    Ok(())
}

/// A worker holding a namespace's queued packets (see the module doc). Dropping it stops it.
pub struct PacketQueue {
    netns: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<QueueStats>>>,
}

impl PacketQueue {
    /// Starts a worker in the namespace at `netns`, bound to [`QUEUE_NUM`] there, applying
    /// `netem` for at most `lifetime_max` (then it lets everything go and stops by itself).
    /// Returns once the queue is bound: rules sending packets to it may then be added.
    pub fn start(netns: &Path, netem: Netem, lifetime_max: Duration) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let path = netns.to_owned();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("corum-chaos-nfq".into())
            .spawn(move || {
                let queue = match open_queue(&path) {
                    Ok(q) => {
                        let _ = ready_tx.send(Ok(()));
                        q
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("{e:#}")));
                        return Err(e);
                    }
                };
                work(queue, netem, &flag, lifetime_max)
            })
            .context("starting a packet queue worker")?;
        let mut worker = PacketQueue {
            netns: netns.to_owned(),
            stop,
            thread: Some(thread),
        };
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(worker),
            Ok(Err(e)) => {
                let _ = worker.join();
                anyhow::bail!("{e}")
            }
            Err(_) => {
                worker.stop.store(true, Ordering::Relaxed);
                anyhow::bail!(
                    "the packet queue worker in {} did not start within 10 s",
                    netns.display()
                )
            }
        }
    }

    /// Accepts every packet still held, closes the queue and says what the worker did.
    pub fn stop(mut self) -> anyhow::Result<QueueStats> {
        self.join()
    }

    fn join(&mut self) -> anyhow::Result<QueueStats> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self
            .thread
            .take()
            .context("the worker was stopped already")?;
        thread
            .join()
            .map_err(|_| anyhow::anyhow!("the packet queue worker panicked"))?
            .with_context(|| format!("the packet queue in {}", self.netns.display()))
    }
}

impl Drop for PacketQueue {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.join();
        }
    }
}

/// Gives the calling thread a file descriptor table of its own (`unshare(CLONE_FILES)`) and
/// closes in it every descriptor but stdin, stdout and stderr: what the thread opens after
/// is in no other thread's table, so no process another thread spawns inherits it, and the
/// thread holds no copy of the process's files (a pipe or a socket another thread closes
/// really closes).
pub fn private_fd_table() -> anyhow::Result<()> {
    // SAFETY: unshare(CLONE_FILES) copies the process's descriptor table for this thread
    // alone; nothing in this thread holds a descriptor it would then lose.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return Err(std::io::Error::last_os_error()).context("unshare(CLONE_FILES)");
    }
    // SAFETY: closes descriptors 3 and up in this thread's private table only (the copy
    // made above); every other thread's table is untouched.
    if unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) } != 0 {
        return Err(std::io::Error::last_os_error()).context("close_range in the private table");
    }
    Ok(())
}

/// Opens and binds the queue inside the namespace at `netns` (this thread enters it, with a
/// descriptor table of its own).
fn open_queue(netns: &Path) -> anyhow::Result<nfq::Queue> {
    private_fd_table()?;
    enter_netns(netns)?;
    let mut queue = nfq::Queue::open().context("opening a netfilter queue socket")?;
    queue
        .bind(QUEUE_NUM)
        .with_context(|| format!("binding netfilter queue {QUEUE_NUM}"))?;
    // Metadata only: the worker decides from arrival time and the seed, never the payload,
    // and a held packet then pins a few hundred bytes of receive buffer, not 64 KiB.
    queue
        .set_copy_range(QUEUE_NUM, 0)
        .context("setting the copy range")?;
    queue
        .set_queue_max_len(QUEUE_NUM, HELD_MAX)
        .context("setting the queue's length")?;
    queue
        .set_fail_open(QUEUE_NUM, true)
        .context("setting the queue fail-open")?;
    queue.set_nonblocking(true);
    Ok(queue)
}

/// The worker's loop: take what came, let go what is due, until stopped or `lifetime_max`.
fn work(
    mut queue: nfq::Queue,
    netem: Netem,
    stop: &AtomicBool,
    lifetime_max: Duration,
) -> anyhow::Result<QueueStats> {
    let start = Instant::now();
    let mut hold = Hold::new(netem);
    let mut heap: BinaryHeap<Held<nfq::Message>> = BinaryHeap::new();
    let mut stats = QueueStats::default();
    let mut seq = 0u64;
    let mut released_seq_max: Option<u64> = None;
    let verdict =
        |queue: &mut nfq::Queue, mut msg: nfq::Message, v: nfq::Verdict| -> anyhow::Result<()> {
            msg.set_verdict(v);
            queue.verdict(msg).context("sending a verdict")
        };
    loop {
        let done = stop.load(Ordering::Relaxed) || start.elapsed() >= lifetime_max;
        // Everything the kernel queued since the last round.
        loop {
            match queue.recv() {
                Ok(msg) => {
                    let now = start.elapsed();
                    stats.packets += 1;
                    match hold.admit(now) {
                        None => {
                            stats.dropped += 1;
                            verdict(&mut queue, msg, nfq::Verdict::Drop)?;
                        }
                        Some(due) => {
                            heap.push(Held {
                                due,
                                seq,
                                arrived: now,
                                msg,
                            });
                            stats.held_max = stats.held_max.max(heap.len());
                        }
                    }
                    seq += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // The kernel's answer to a verdict for a packet it no longer holds (its
                // device went away): nothing to do.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => return Err(e).context("receiving from the netfilter queue"),
            }
        }
        // What is due (everything, once stopping).
        let now = start.elapsed();
        while heap.peek().is_some_and(|h| done || h.due <= now) {
            let h = heap.pop().expect("peeked");
            if released_seq_max.is_some_and(|m| h.seq < m) {
                stats.out_of_order += 1;
            }
            released_seq_max = Some(released_seq_max.map_or(h.seq, |m| m.max(h.seq)));
            if h.due <= now {
                stats.held_us_total += (now - h.arrived).as_micros() as u64;
            } else {
                stats.early += 1;
            }
            verdict(&mut queue, h.msg, nfq::Verdict::Accept)?;
        }
        if done {
            return Ok(stats);
        }
        let sleep = heap
            .peek()
            .map_or(POLL, |h| h.due.saturating_sub(start.elapsed()).min(POLL));
        std::thread::sleep(sleep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::chaos::net::{iptables_restore, queue_rules};
    use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
    use std::process::Command;
    use std::sync::atomic::AtomicU32;

    fn netem(delay_ms: u32, jitter_ms: u32, loss_percent: u8, reorder: bool) -> Netem {
        Netem {
            delay_ms,
            jitter_ms,
            loss_percent,
            reorder,
            seed: 7,
        }
    }

    /// Arrivals every 200 µs: the decisions a worker would take, as (arrival, due).
    fn draw(n: Netem, packets: u64) -> Vec<(Duration, Option<Duration>)> {
        let mut hold = Hold::new(n);
        (0..packets)
            .map(|i| {
                let now = Duration::from_micros(200 * i);
                (now, hold.admit(now))
            })
            .collect()
    }

    /// The decisions are a function of the seed; loss drops about the share it names (none
    /// at 0%, all at 100%); a hold stays within delay ± jitter.
    #[test]
    fn holds_are_seeded_and_within_their_bounds() {
        let n = netem(50, 20, 20, true);
        assert_eq!(draw(n, 1_000), draw(n, 1_000));
        assert_ne!(draw(n, 1_000), draw(Netem { seed: 8, ..n }, 1_000));
        let drawn = draw(n, 10_000);
        let dropped = drawn.iter().filter(|(_, d)| d.is_none()).count();
        assert!((1_700..=2_300).contains(&dropped), "{dropped} of 10000");
        for (now, due) in drawn.iter().filter_map(|(n, d)| Some((n, (*d)?))) {
            let held = due - *now;
            assert!(
                (Duration::from_millis(30)..=Duration::from_millis(70)).contains(&held),
                "{held:?}"
            );
        }
        assert!(draw(netem(0, 0, 0, false), 1_000)
            .iter()
            .all(|(now, due)| *due == Some(*now)));
        assert!(draw(netem(10, 0, 100, false), 1_000)
            .iter()
            .all(|(_, due)| due.is_none()));
        // Never beyond HOLD_MAX.
        assert!(draw(netem(60_000, 0, 0, true), 10)
            .iter()
            .all(|(now, due)| *due == Some(*now + HOLD_MAX)));
    }

    /// Without `reorder` a packet is never due before the one before it, jitter or not; with
    /// it, a jitter wider than the gap between packets makes later packets overtake.
    #[test]
    fn delay_keeps_the_order_and_reorder_breaks_it() {
        let overtaken = |n: Netem| {
            let due: Vec<Duration> = draw(n, 1_000).into_iter().filter_map(|x| x.1).collect();
            due.windows(2).filter(|w| w[1] < w[0]).count()
        };
        assert_eq!(overtaken(netem(100, 30, 0, false)), 0);
        assert!(overtaken(netem(20, 20, 0, true)) > 300);
        // A jitter narrower than the gap (200 µs) cannot reorder.
        assert_eq!(overtaken(netem(20, 0, 0, true)), 0);
    }

    /// The heap lets the earliest due go first, and of two due at once the one that came first.
    #[test]
    fn held_packets_order_by_due_then_arrival() {
        let mut heap = BinaryHeap::new();
        for (i, (due_ms, seq)) in [(5, 0), (3, 2), (3, 1), (9, 3)].into_iter().enumerate() {
            heap.push(Held {
                due: Duration::from_millis(due_ms),
                seq,
                arrived: Duration::ZERO,
                msg: i,
            });
        }
        let order: Vec<usize> = std::iter::from_fn(|| heap.pop().map(|h| h.msg)).collect();
        assert_eq!(order, vec![2, 1, 0, 3]);
    }

    /// Two network namespaces joined by a veth pair (`eth0` in each, 10.199.0.1 and
    /// 10.199.0.2); removed on drop (sockets made inside must be dropped first).
    struct Link {
        ns: [String; 2],
    }

    const A: Ipv4Addr = Ipv4Addr::new(10, 199, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 199, 0, 2);

    fn ip(args: &[&str]) {
        let out = Command::new("ip").args(args).output().expect("ip runs");
        assert!(
            out.status.success(),
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    impl Link {
        fn create() -> Link {
            // SAFETY: geteuid has no preconditions.
            assert_eq!(
                unsafe { libc::geteuid() },
                0,
                "the packet queue tests need root (network namespaces)"
            );
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let tag = format!(
                "cq{}x{}",
                std::process::id() % 100_000,
                NEXT.fetch_add(1, Ordering::Relaxed)
            );
            let link = Link {
                ns: [format!("{tag}a"), format!("{tag}b")],
            };
            for ns in &link.ns {
                ip(&["netns", "add", ns]);
            }
            let [a, b] = &link.ns;
            ip(&[
                "link", "add", "eth0", "netns", a, "type", "veth", "peer", "name", "eth0", "netns",
                b,
            ]);
            for (ns, addr) in link.ns.iter().zip([A, B]) {
                ip(&[
                    "-n",
                    ns,
                    "addr",
                    "add",
                    &format!("{addr}/24"),
                    "dev",
                    "eth0",
                ]);
                ip(&["-n", ns, "link", "set", "eth0", "up"]);
                ip(&["-n", ns, "link", "set", "lo", "up"]);
            }
            link
        }

        fn path(&self, i: usize) -> PathBuf {
            PathBuf::from(format!("/run/netns/{}", self.ns[i]))
        }

        /// Runs `f` on a thread inside namespace `i` (a socket made there stays there).
        fn run<T: Send + 'static>(&self, i: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
            let path = self.path(i);
            std::thread::spawn(move || {
                enter_netns(&path).expect("entering the namespace");
                f()
            })
            .join()
            .expect("the thread in the namespace")
        }

        /// Namespace `i`'s packets on `eth0` (only to and from `peer`, when given) go to the
        /// queue; `None`: no rule.
        fn queue(&self, i: usize, rules: Option<Option<Ipv4Addr>>) {
            iptables_restore(&self.ns[i], &queue_rules(rules.map(|p| (QUEUE_NUM, p))))
                .expect("iptables-restore");
        }
    }

    impl Drop for Link {
        fn drop(&mut self) {
            for ns in &self.ns {
                let _ = Command::new("ip").args(["netns", "del", ns]).status();
            }
        }
    }

    /// A UDP echo server in namespace 1 for at most 60 s (until `stop`).
    fn echo(link: &Link, stop: Arc<AtomicBool>) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let socket = link.run(1, || UdpSocket::bind((B, 0)).expect("binding in b"));
        let addr = socket.local_addr().unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    let _ = socket.send_to(&buf[..n], from);
                }
            }
        });
        (addr, thread)
    }

    /// The shortest of 5 round trips from `client` to the echo at `to`.
    fn rtt(client: &UdpSocket, to: SocketAddr) -> Duration {
        let mut best = Duration::MAX;
        for seq in 0u32..5 {
            let start = Instant::now();
            client.send_to(&seq.to_be_bytes(), to).unwrap();
            let mut buf = [0u8; 64];
            loop {
                let (n, _) = client.recv_from(&mut buf).expect("an echo within 5 s");
                if buf[..n] == seq.to_be_bytes() {
                    break;
                }
            }
            best = best.min(start.elapsed());
        }
        best
    }

    /// A worker delaying a namespace's packets by 100 ms each way makes every round trip
    /// through it take at least 200 ms (a lower bound: the worker holds each packet at least
    /// its delay after the kernel queued it); without the worker the same trip is measured
    /// for the record.
    #[test]
    fn a_delay_holds_every_packet_at_least_its_delay() {
        let link = Link::create();
        let stop = Arc::new(AtomicBool::new(false));
        let (to, server) = echo(&link, stop.clone());
        let client = link.run(0, || UdpSocket::bind((A, 0)).expect("binding in a"));
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let undisturbed = rtt(&client, to);
        let worker = PacketQueue::start(
            &link.path(0),
            Netem {
                delay_ms: 100,
                jitter_ms: 0,
                loss_percent: 0,
                reorder: false,
                seed: 1,
            },
            Duration::from_secs(30),
        )
        .unwrap();
        link.queue(0, Some(None));
        let delayed = rtt(&client, to);
        link.queue(0, None);
        let stats = worker.stop().unwrap();
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap();
        eprintln!("round trip {undisturbed:?} undisturbed, {delayed:?} delayed; {stats}");
        assert!(
            delayed >= Duration::from_millis(200),
            "{delayed:?} with 100 ms each way"
        );
        assert!(stats.packets >= 10 && stats.dropped == 0, "{stats}");
        assert!(stats.held_ms_mean() >= 100.0, "{stats}");
        assert_eq!(stats.out_of_order, 0, "{stats}");
    }

    /// Loss of 100% keeps a TCP connection from being made (its SYNs dropped) while traffic
    /// on loopback goes on; 0% lets it be made through the worker; and once a worker is gone
    /// the packets its rules still queue pass (bypass): a dead worker never black-holes.
    #[test]
    fn full_loss_blocks_a_connection_and_none_does_not() {
        let link = Link::create();
        let listener = link.run(1, || TcpListener::bind((B, 0)).expect("binding in b"));
        let to = listener.local_addr().unwrap();
        let connect = |link: &Link| {
            link.run(0, move || {
                TcpStream::connect_timeout(&to, Duration::from_secs(1)).map(drop)
            })
        };
        let netem = |loss_percent| Netem {
            delay_ms: 0,
            jitter_ms: 0,
            loss_percent,
            reorder: false,
            seed: 3,
        };
        let worker =
            PacketQueue::start(&link.path(0), netem(100), Duration::from_secs(30)).unwrap();
        link.queue(0, Some(None));
        let refused = connect(&link);
        let local = link.run(0, || {
            let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            TcpStream::connect_timeout(&l.local_addr().unwrap(), Duration::from_secs(1)).map(drop)
        });
        let lossy = worker.stop().unwrap();
        assert!(refused.is_err(), "connected through 100% loss");
        assert!(local.is_ok(), "loopback is never queued: {local:?}");
        assert!(
            lossy.packets >= 1 && lossy.dropped == lossy.packets,
            "{lossy}"
        );

        let worker = PacketQueue::start(&link.path(0), netem(0), Duration::from_secs(30)).unwrap();
        let made = connect(&link);
        let clean = worker.stop().unwrap();
        assert!(made.is_ok(), "0% loss: {made:?}");
        assert!(clean.packets >= 2 && clean.dropped == 0, "{clean}");

        // The rules still send packets to the queue, but no worker is bound.
        let bypassed = connect(&link);
        link.queue(0, None);
        assert!(bypassed.is_ok(), "no worker: {bypassed:?}");
        drop(listener);
    }

    /// The netfilter netlink sockets process `pid` holds (inodes), as its namespace lists them.
    fn netfilter_sockets(pid: u32) -> Vec<String> {
        let fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter_map(|l| {
                let l = l.display().to_string();
                Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
            })
            .collect();
        std::fs::read_to_string(format!("/proc/{pid}/net/netlink"))
            .unwrap()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                // sk Eth(protocol) ... Inode: NETLINK_NETFILTER is 12.
                (f.get(1) == Some(&"12") && fds.iter().any(|i| Some(&i.as_str()) == f.last()))
                    .then(|| f.last().unwrap().to_string())
            })
            .collect()
    }

    /// A process spawned while a worker runs does not inherit the worker's socket, so once
    /// the worker stops the next one binds the same queue in the same namespace (an inherited
    /// socket would keep the queue bound: EPERM).
    #[test]
    fn a_child_spawned_meanwhile_does_not_keep_the_queue() {
        let link = Link::create();
        let netem = Netem {
            delay_ms: 0,
            jitter_ms: 0,
            loss_percent: 0,
            reorder: false,
            seed: 0,
        };
        let first = PacketQueue::start(&link.path(0), netem, Duration::from_secs(30)).unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &link.ns[0], "sleep", "30"])
            .spawn()
            .unwrap();
        // `ip netns exec` enters the namespace, then execs sleep (same pid) within 10 s.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_link(format!("/proc/{}/exe", child.id()))
            .map_or(true, |e| !e.display().to_string().contains("sleep"))
        {
            assert!(Instant::now() < deadline, "sleep never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        let held = netfilter_sockets(child.id());
        first.stop().unwrap();
        let second = PacketQueue::start(&link.path(0), netem, Duration::from_secs(30));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            held,
            Vec::<String>::new(),
            "the child holds the queue's socket"
        );
        second
            .expect("a second worker binds once the first stopped")
            .stop()
            .unwrap();
    }

    /// A worker that holds each packet between 0 and 40 ms, given datagrams 100 µs apart,
    /// delivers them out of the order they were sent (sequence numbers seen going back), and
    /// says so; only the packets to and from the peer are queued.
    #[test]
    fn reorder_delivers_datagrams_out_of_order() {
        const SENT: u32 = 300;
        let link = Link::create();
        let receiver = link.run(1, || UdpSocket::bind((B, 0)).expect("binding in b"));
        let to = receiver.local_addr().unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let reader = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut got = Vec::new();
            let mut buf = [0u8; 16];
            while got.len() < SENT as usize && Instant::now() < deadline {
                match receiver.recv(&mut buf) {
                    Ok(4) => got.push(u32::from_be_bytes(buf[..4].try_into().unwrap())),
                    Ok(_) => {}
                    // A second of silence once something came: the rest is not coming.
                    Err(_) if !got.is_empty() => break,
                    Err(_) => {}
                }
            }
            got
        });
        let worker = PacketQueue::start(
            &link.path(0),
            Netem {
                delay_ms: 20,
                jitter_ms: 20,
                loss_percent: 0,
                reorder: true,
                seed: 5,
            },
            Duration::from_secs(30),
        )
        .unwrap();
        link.queue(0, Some(Some(B)));
        link.run(0, move || {
            let s = UdpSocket::bind((A, 0)).unwrap();
            for seq in 0..SENT {
                s.send_to(&seq.to_be_bytes(), to).unwrap();
                std::thread::sleep(Duration::from_micros(100));
            }
        });
        let got = reader.join().unwrap();
        link.queue(0, None);
        let stats = worker.stop().unwrap();
        let mut highest = None;
        let mut back = 0;
        for &seq in &got {
            if highest.is_some_and(|h| seq < h) {
                back += 1;
            }
            highest = highest.max(Some(seq));
        }
        eprintln!(
            "{} of {SENT} datagrams, {back} after a later one; {stats}",
            got.len()
        );
        assert!(got.len() >= SENT as usize / 2, "{} arrived", got.len());
        assert!(back > 0, "in order: {got:?}");
        assert!(
            stats.out_of_order > 0 && stats.packets >= u64::from(SENT) / 2,
            "{stats}"
        );
    }
}
