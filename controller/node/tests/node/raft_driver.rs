//! Three `RaftDriver`s on loopback, each with a real metadata log (`UringDisk`, O_DIRECT,
//! io_uring) in its own temporary directory, sharing one unpinned glommio executor thread.
//! Conditions are polled with a timeout (never a fixed sleep to wait for something) and the
//! whole test runs under a deadline guard.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_engine::disk::{Disk, SimDisk, SimFault, UringDisk};
use corum_engine::log::{Log, LogConfig};
use corum_node::driver::{metadata_log_dir, CommittedBatch, Recovered};
use corum_node::peer::PeerNetwork;
use corum_node::port::{self, PortSender, Proposal, ToDriver, ToService};
use corum_node::{
    DriverError, DriverStatus, QuorumState, RaftDriver, RaftDriverConfig, RaftHandle,
};
use corum_raft::{ProposalId, VoterSet};
use corum_runtime::ShutdownSignal;
use corum_types::{LogOffset, NodeId, Uuid};
use glommio::task::JoinHandle;

use crate::common::{
    bind, bind_all, driver_config, on_executor, rebind, voter_set, wait_for, WAIT_MAX,
};

const TEST_DEADLINE: Duration = Duration::from_secs(150);
const CLUSTER: Uuid = Uuid([0x5a; 16]);
/// The payload of latency probes, left out of the payloads compared.
const PROBE: &[u8] = b"latency-probe";

/// The payload of the `i`th proposal: self-describing and of varying length.
fn payload(i: u32) -> Vec<u8> {
    let mut p = format!("proposal-{i:06}-").into_bytes();
    p.extend((0..(i % 200)).map(|j| (i.wrapping_mul(31) + j) as u8));
    p
}

/// One running node of the test cluster.
struct Node {
    id: u32,
    dir: PathBuf,
    addr: SocketAddr,
    stop: ShutdownSignal,
    handle: RaftHandle,
    run: JoinHandle<Result<(), DriverError>>,
    /// Every batch the driver published, in order (control batches included).
    committed: Rc<RefCell<Vec<CommittedBatch>>>,
    /// The test's end of the port: it plays the state machine.
    port: Rc<PortSender<ToDriver>>,
    /// Proposals the driver refused.
    refused: Rc<RefCell<Vec<ProposalId>>>,
    /// The activation number of the next window of proposals (the driver refuses every
    /// proposal of an activation after refusing one).
    activation: Cell<u64>,
    recovered: Recovered,
    /// The status right after recovery, before the loop ran.
    initial: DriverStatus,
}

impl Node {
    async fn start<D: Disk>(
        disk: D,
        id: u32,
        dir: &Path,
        net: (PeerNetwork, corum_node::PeerInbox),
        voters: &VoterSet,
    ) -> Node {
        Node::start_with(disk, id, dir, net, voters, |_| {}).await
    }

    /// [`Node::start`] with `tweak` applied to the driver's config.
    async fn start_with<D: Disk>(
        disk: D,
        id: u32,
        dir: &Path,
        net: (PeerNetwork, corum_node::PeerInbox),
        voters: &VoterSet,
        tweak: impl FnOnce(&mut RaftDriverConfig),
    ) -> Node {
        let addr = net.0.local_addr();
        let mut config = driver_config(id, dir, addr, voters);
        tweak(&mut config);
        let stop = ShutdownSignal::detached();
        let (service_end, driver_end) = port::local(port::CAPACITY);
        let (driver, handle, recovered) =
            RaftDriver::start(disk, config, net.0, net.1, driver_end, stop.clone())
                .await
                .unwrap();
        let committed = Rc::new(RefCell::new(Vec::new()));
        let refused = Rc::new(RefCell::new(Vec::new()));
        {
            let (committed, refused) = (committed.clone(), refused.clone());
            let rx = service_end.rx;
            glommio::spawn_local(async move {
                while let Some(m) = rx.recv().await {
                    match m {
                        ToService::Committed(bs) => committed.borrow_mut().extend(bs),
                        ToService::Refused { batch, .. } => refused.borrow_mut().push(batch),
                        ToService::Status(_) | ToService::Calls(_) => {}
                    }
                }
            })
            .detach();
        }
        let initial = handle.status();
        let run = glommio::spawn_local(driver.run()).detach();
        Node {
            initial,
            id,
            dir: dir.to_path_buf(),
            addr,
            stop,
            handle,
            run,
            committed,
            port: Rc::new(service_end.tx),
            refused,
            activation: Cell::new(1),
            recovered,
        }
    }

    /// Sends `payloads` as consecutive one-record proposals of `activation` predicted at the
    /// log end and epoch of `status`; false when the driver is gone.
    async fn send_proposals(
        &self,
        status: &DriverStatus,
        activation: u64,
        payloads: &[Vec<u8>],
    ) -> bool {
        let mut base = status.raft.log_end_offset;
        for p in payloads {
            let batch = ProposalId {
                epoch: status.raft.epoch,
                base_offset: base,
                end_offset: base.next(),
            };
            base = base.next();
            let proposal = Proposal {
                batch,
                activation,
                payload: p.clone().into(),
                record_count: 1,
                answers: Vec::new(),
            };
            if self.port.send(ToDriver::Propose(proposal)).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Proposes `payloads` as consecutive one-record batches at the log end of this node
    /// (which must lead), pipelined, and waits until the driver appended or refused each.
    /// Returns how many it appended (a refusal refuses the rest of the window too).
    async fn propose_window(&self, payloads: &[Vec<u8>]) -> usize {
        let status = self.handle.status();
        let activation = self.activation.get();
        self.activation.set(activation + 1);
        let before = status.proposals_appended + status.proposals_refused;
        let refused_before = self.refused.borrow().len();
        if !self.send_proposals(&status, activation, payloads).await {
            return 0;
        }
        let start = Instant::now();
        loop {
            let s = self.handle.status();
            if s.proposals_appended + s.proposals_refused >= before + payloads.len() as u64 {
                break;
            }
            if !s.running {
                return 0;
            }
            assert!(start.elapsed() < WAIT_MAX, "proposals never decided");
            glommio::timer::sleep(Duration::from_micros(50)).await;
        }
        let refused = self.refused.borrow();
        let first_refused = refused[refused_before..]
            .iter()
            .map(|b| b.base_offset)
            .min();
        match first_refused {
            Some(b) => (b.get() - status.raft.log_end_offset.get()) as usize,
            None => payloads.len(),
        }
    }

    /// Offers the driver a snapshot of the state machine through `end`.
    async fn offer_snapshot(&self, end: LogOffset, data: Vec<u8>) {
        let offer = ToDriver::Snapshot {
            end_offset: end,
            data: data.into(),
        };
        assert!(self.port.send(offer).await.is_ok());
    }

    /// Shuts the driver down cleanly and returns its final status.
    async fn stop(self) -> (u32, PathBuf, SocketAddr, DriverStatus) {
        self.stop.fire();
        self.run.await.expect("driver task ran").unwrap();
        let status = self.handle.status();
        assert!(!status.running);
        (self.id, self.dir, self.addr, status)
    }

    /// How many state-machine batches (probes excluded) were published, without copying.
    fn user_count(&self) -> usize {
        self.committed
            .borrow()
            .iter()
            .filter(|b| !b.control && b.payload[..] != *PROBE)
            .count()
    }

    fn user_payloads(&self) -> Vec<Vec<u8>> {
        self.committed
            .borrow()
            .iter()
            .filter(|b| !b.control && b.payload[..] != *PROBE)
            .map(|b| b.payload.to_vec())
            .collect()
    }
}

fn leader_of(nodes: &[Node]) -> Option<usize> {
    let leaders: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].handle.status().is_leader(NodeId(nodes[i].id)))
        .collect();
    // Two leaders may coexist briefly in different epochs; take the newest.
    leaders
        .into_iter()
        .max_by_key(|&i| nodes[i].handle.status().raft.epoch)
}

/// Proposes payloads `range` through whichever node leads, in pipelined windows, proposing
/// again what a leader change refused.
async fn propose_all(nodes: &[Node], range: std::ops::Range<u32>) {
    const WINDOW: u32 = 64;
    let start = Instant::now();
    let mut i = range.start;
    while i < range.end {
        assert!(start.elapsed() < WAIT_MAX, "proposals stalled at {i}");
        let Some(l) = leader_of(nodes) else {
            glommio::timer::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let window: Vec<Vec<u8>> = (i..range.end.min(i + WINDOW)).map(payload).collect();
        let appended = nodes[l].propose_window(&window).await;
        if appended == 0 {
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
        i += appended as u32;
    }
}

/// Every batch on disk in `dir`'s metadata log below `below`.
async fn read_log(dir: &Path, below: LogOffset) -> Vec<(LogOffset, u64, bool, Vec<u8>)> {
    let (log, _) = Log::open(UringDisk, &metadata_log_dir(dir), LogConfig::default())
        .await
        .unwrap();
    let mut out = Vec::new();
    let mut at = log.start_offset();
    while at < log.end_offset().min(below) {
        let chunk = log.read(at, 1 << 20).await.unwrap();
        for f in chunk.frames() {
            let h = f.header();
            if h.base_offset < below {
                out.push((
                    h.base_offset,
                    h.epoch.get(),
                    h.attributes.is_control(),
                    f.payload().to_vec(),
                ));
            }
        }
        at = chunk.end_offset().unwrap();
    }
    log.close().await.unwrap();
    out
}

#[test]
fn three_drivers_replicate_survive_restarts_and_leader_loss_on_real_disks() {
    // Over real disks and real sockets: one leader is elected; 5000 proposals commit and every
    // node publishes them in the same order with the same bytes; a stopped follower restarts
    // from its directory, recovers its log and catches up; stopping the leader elects another
    // that commits; every log reopened afterwards holds the same committed prefix, and every
    // quorum-state file holds the node's last epoch.
    on_executor("raft-driver-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let ids = [1u32, 2, 3];
        let dirs: Vec<PathBuf> = ids
            .iter()
            .map(|id| tmp.path().join(format!("node-{id}")))
            .collect();
        let nets: Vec<_> = bind_all(CLUSTER, &ids);
        let voters = voter_set(&ids, &nets);
        let mut nodes = Vec::new();
        for ((&id, net), dir) in ids.iter().zip(nets).zip(&dirs) {
            let node = Node::start(UringDisk, id, dir, net, &voters).await;
            assert_eq!(node.recovered.log_end_offset, LogOffset::ZERO);
            assert_eq!(node.recovered.quorum_state, None);
            nodes.push(node);
        }

        // One leader, whose LeaderChange commits everywhere.
        wait_for("a leader", || leader_of(&nodes).is_some()).await;
        wait_for("the LeaderChange to commit everywhere", || {
            nodes.iter().all(|n| !n.committed.borrow().is_empty())
        })
        .await;

        // 5000 proposals (more than the driver admits uncommitted at once: back-pressure) commit
        // on every node, identically.
        const FIRST: u32 = 5000;
        let t = Instant::now();
        propose_all(&nodes, 0..FIRST).await;
        wait_for("the first proposals to commit on every node", || {
            nodes.iter().all(|n| n.user_count() == FIRST as usize)
        })
        .await;
        let elapsed = t.elapsed();
        eprintln!(
            "{FIRST} single-record proposals committed on 3 nodes in {elapsed:?} ({:.0}/s)",
            f64::from(FIRST) / elapsed.as_secs_f64()
        );
        let expected: Vec<Vec<u8>> = (0..FIRST).map(payload).collect();
        for n in &nodes {
            assert_eq!(n.user_payloads(), expected, "node {}", n.id);
            // Offsets are contiguous and the published order is the log order.
            let c = n.committed.borrow();
            assert_eq!(c[0].base_offset, LogOffset::ZERO);
            assert!(c.windows(2).all(|w| w[1].base_offset == w[0].end_offset()));
        }
        assert_eq!(*nodes[0].committed.borrow(), *nodes[1].committed.borrow());
        assert_eq!(*nodes[0].committed.borrow(), *nodes[2].committed.borrow());
        // Commit latency of one proposal at a time (propose on the leader until the leader
        // publishes it), for the report; polled every 50 us, so the figure is at most that
        // much high. (Yielding in a busy loop instead would starve glommio's reactor.)
        let l = leader_of(&nodes).unwrap();
        let mut latencies_us = Vec::new();
        let mut sent = 0u32;
        while sent < 50 {
            let before = nodes[l].committed.borrow().len();
            let t = Instant::now();
            assert_eq!(nodes[l].propose_window(&[PROBE.to_vec()]).await, 1);
            while nodes[l].committed.borrow().len() == before {
                assert!(
                    t.elapsed() < WAIT_MAX,
                    "latency probe {sent} never committed"
                );
                glommio::timer::sleep(Duration::from_micros(50)).await;
            }
            latencies_us.push(t.elapsed().as_micros());
            sent += 1;
        }
        latencies_us.sort_unstable();
        eprintln!(
            "sequential commit latency on the leader: p50 {} us, max {} us",
            latencies_us[latencies_us.len() / 2],
            latencies_us[latencies_us.len() - 1]
        );
        wait_for("the probes to commit everywhere", || {
            let len = nodes[l].committed.borrow().len();
            nodes.iter().all(|n| n.committed.borrow().len() == len)
        })
        .await;

        // Group commit: fewer fsync rounds than batches on the leader.
        let l = leader_of(&nodes).unwrap();
        let s = nodes[l].handle.status();
        assert!(s.sync_rounds > 0);
        eprintln!(
            "leader: {} group-commit rounds for {} offsets",
            s.sync_rounds, s.log_durable_end
        );

        // Stop a follower, commit more without it, restart it from its directory.
        let l = leader_of(&nodes).unwrap();
        let f = (l + 1) % 3;
        let follower = nodes.remove(f);
        let (fid, fdir, faddr, before) = follower.stop().await;
        const SECOND: u32 = 5200;
        propose_all(&nodes, FIRST..SECOND).await;
        wait_for("more commits on the two live nodes", || {
            nodes.iter().all(|n| n.user_count() == SECOND as usize)
        })
        .await;
        let restarted =
            Node::start(UringDisk, fid, &fdir, bind(CLUSTER, fid, faddr), &voters).await;
        // The quorum state came back: same epoch, same vote, so it cannot vote twice in it.
        assert_eq!(restarted.initial.raft.epoch, before.raft.epoch);
        assert_eq!(restarted.initial.raft.voted_for, before.raft.voted_for);
        assert_eq!(restarted.initial.raft.leader, before.raft.leader);
        assert!(
            restarted.recovered.log_end_offset >= LogOffset(u64::from(FIRST)),
            "the follower recovered its log: {:?}",
            restarted.recovered
        );
        assert!(restarted.recovered.quorum_state.is_some());
        nodes.push(restarted);
        let expected: Vec<Vec<u8>> = (0..SECOND).map(payload).collect();
        wait_for("the restarted follower to catch up", || {
            nodes.iter().all(|n| n.user_count() == SECOND as usize)
        })
        .await;
        for n in &nodes {
            assert_eq!(n.user_payloads(), expected, "node {}", n.id);
        }

        // Stop the leader: another is elected and commits.
        let l = leader_of(&nodes).unwrap();
        let old_epoch = nodes[l].handle.status().raft.epoch;
        let old_leader = nodes.remove(l);
        let t = Instant::now();
        let stopped_leader = old_leader.stop().await;
        wait_for("a new leader", || {
            leader_of(&nodes).is_some_and(|i| nodes[i].handle.status().raft.epoch > old_epoch)
        })
        .await;
        eprintln!(
            "leader stop (resign) to a new leader: {:?} (election timeout 150 ms)",
            t.elapsed()
        );
        const THIRD: u32 = 5300;
        propose_all(&nodes, SECOND..THIRD).await;
        wait_for("the new leader's commits on the two live nodes", || {
            nodes.iter().all(|n| n.user_count() == THIRD as usize)
        })
        .await;
        let expected: Vec<Vec<u8>> = (0..THIRD).map(payload).collect();
        for n in &nodes {
            assert_eq!(n.user_payloads(), expected, "node {}", n.id);
        }
        assert_eq!(*nodes[0].committed.borrow(), *nodes[1].committed.borrow());

        // Stop everyone; every log on disk holds the same committed prefix, and the
        // quorum-state file the last epoch the node saw.
        let mut finals = vec![stopped_leader];
        let mut epochs = Vec::new();
        for n in nodes {
            epochs.push((n.id, n.handle.status().raft.epoch));
            finals.push(n.stop().await);
        }
        let mut logs = Vec::new();
        for (id, dir, _, status) in &finals {
            let log = read_log(dir, status.raft.high_watermark).await;
            assert!(!log.is_empty());
            logs.push((*id, log));
        }
        let longest = logs.iter().map(|(_, l)| l.len()).max().unwrap();
        let reference = logs
            .iter()
            .find(|(_, l)| l.len() == longest)
            .unwrap()
            .1
            .clone();
        for (id, log) in &logs {
            assert_eq!(log[..], reference[..log.len()], "node {id}'s committed log");
        }
        let user: Vec<Vec<u8>> = reference
            .iter()
            .filter(|b| !b.2 && b.3[..] != *PROBE)
            .map(|b| b.3.clone())
            .collect();
        assert_eq!(user, expected);
        for (id, epoch) in epochs {
            let dir = &finals.iter().find(|f| f.0 == id).unwrap().1;
            let qs = QuorumState::read(&UringDisk, dir).await.unwrap().unwrap();
            assert_eq!(qs.epoch, epoch, "node {id}'s quorum-state epoch");
        }

        // A full restart: every node recovers, republishes the committed log from offset 0,
        // and the cluster goes on committing in a later epoch.
        let last_epoch = finals.iter().map(|f| f.3.raft.epoch).max().unwrap();
        let mut nodes = Vec::new();
        for (id, dir, addr, _) in &finals {
            let net = rebind(CLUSTER, *id, *addr).await;
            nodes.push(Node::start(UringDisk, *id, dir, net, &voters).await);
        }
        propose_all(&nodes, THIRD..THIRD + 50).await;
        let expected: Vec<Vec<u8>> = (0..THIRD + 50).map(payload).collect();
        wait_for(
            "every node to republish and commit after a full restart",
            || nodes.iter().all(|n| n.user_count() == expected.len()),
        )
        .await;
        for n in &nodes {
            assert_eq!(n.user_payloads(), expected, "node {}", n.id);
            assert!(n.handle.status().raft.epoch > last_epoch);
        }
        for n in nodes {
            n.stop().await;
        }
    });
}

/// Three voters whose logs live on simulated disks (real sockets, real quorum-state files), so
/// a test can fail an fsync or cut the power of one of them.
async fn sim_cluster(tmp: &Path) -> (Vec<Node>, Vec<SimDisk>, VoterSet) {
    let ids = [1u32, 2, 3];
    let disks: Vec<SimDisk> = ids.iter().map(|&id| SimDisk::new(u64::from(id))).collect();
    let nets: Vec<_> = bind_all(CLUSTER, &ids);
    let voters = voter_set(&ids, &nets);
    let mut nodes = Vec::new();
    for ((&id, net), disk) in ids.iter().zip(nets).zip(&disks) {
        let dir = tmp.join(format!("node-{id}"));
        nodes.push(Node::start(disk.clone(), id, &dir, net, &voters).await);
    }
    wait_for("a leader", || leader_of(&nodes).is_some()).await;
    (nodes, disks, voters)
}

#[test]
fn an_fsync_failure_stops_the_driver_with_the_log_error() {
    // When the leader's disk fails an fsync, its driver stops with the log's error instead of
    // going on with a log in an unknown state; its handle then refuses proposals, the two
    // other voters elect a new leader that commits, and the failed node, restarted, catches up.
    on_executor("raft-driver-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (mut nodes, disks, voters) = sim_cluster(tmp.path()).await;
        propose_all(&nodes, 0..50).await;
        wait_for("50 commits everywhere", || {
            nodes.iter().all(|n| n.user_count() == 50)
        })
        .await;
        let l = leader_of(&nodes).unwrap();
        let old_epoch = nodes[l].handle.status().raft.epoch;
        disks[nodes[l].id as usize - 1].inject(SimFault::FailNextSync);
        assert_eq!(nodes[l].propose_window(&[payload(50)]).await, 1);
        let leader = nodes.remove(l);
        let outcome = leader.run.await.expect("driver task ran");
        assert!(
            matches!(outcome, Err(DriverError::Log(_))),
            "the driver stops with the log error: {outcome:?}"
        );
        assert!(!leader.handle.status().running);
        let offer = ToDriver::Snapshot {
            end_offset: LogOffset(1),
            data: Vec::new().into(),
        };
        assert!(
            leader.port.send(offer).await.is_err(),
            "a stopped driver takes nothing from its port"
        );
        wait_for("a new leader", || {
            leader_of(&nodes).is_some_and(|i| nodes[i].handle.status().raft.epoch > old_epoch)
        })
        .await;
        propose_all(&nodes, 51..80).await;
        wait_for("the new leader's commits on both live nodes", || {
            nodes
                .iter()
                .all(|n| n.user_payloads().last().is_some_and(|p| *p == payload(79)))
        })
        .await;
        // Proposal 50 reached the followers before the leader's fsync failed (pipelining): it
        // may or may not have committed, but nothing else differs.
        for n in &nodes {
            let mut expected: Vec<Vec<u8>> = (0..80).map(payload).collect();
            if n.user_count() == 79 {
                expected.remove(50);
            }
            assert_eq!(n.user_payloads(), expected, "node {}", n.id);
        }
        assert_eq!(*nodes[0].committed.borrow(), *nodes[1].committed.borrow());

        // The failed node restarts (power cycle: its unsynced writes are gone), recovers and
        // catches up with exactly what the others committed.
        let disk = disks[leader.id as usize - 1].clone();
        disk.crash();
        let net = rebind(CLUSTER, leader.id, leader.addr).await;
        let restarted = Node::start(disk, leader.id, &leader.dir, net, &voters).await;
        assert!(restarted.recovered.log_end_offset > LogOffset::ZERO);
        nodes.push(restarted);
        let reference = nodes[0].user_payloads();
        wait_for("the failed node to catch up", || {
            nodes[2].user_count() == reference.len()
        })
        .await;
        assert_eq!(nodes[2].user_payloads(), reference);
        for n in nodes {
            n.stop().await;
        }
    });
}

#[test]
fn a_follower_that_loses_power_recovers_what_it_synced_and_catches_up() {
    // A follower whose driver is cut off mid-flight and whose disk loses every unsynced write
    // comes back with at least everything it reported durable, and catches up with the
    // proposals committed while it was down.
    on_executor("raft-driver-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (mut nodes, disks, voters) = sim_cluster(tmp.path()).await;
        propose_all(&nodes, 0..100).await;
        let l = leader_of(&nodes).unwrap();
        let f = (l + 1) % 3;
        wait_for("100 commits on the follower", || {
            nodes[f].user_count() == 100
        })
        .await;
        let follower = nodes.remove(f);
        let durable_before = follower.handle.status().log_durable_end;
        follower.run.cancel();
        assert!(follower.run.await.is_none(), "the driver was cut off");
        disks[follower.id as usize - 1].crash();
        propose_all(&nodes, 100..200).await;
        let net = rebind(CLUSTER, follower.id, follower.addr).await;
        let restarted = Node::start(
            disks[follower.id as usize - 1].clone(),
            follower.id,
            &follower.dir,
            net,
            &voters,
        )
        .await;
        assert!(
            restarted.recovered.log_end_offset >= durable_before,
            "recovered {:?}, durable before the crash {durable_before}",
            restarted.recovered
        );
        nodes.push(restarted);
        let expected: Vec<Vec<u8>> = (0..200).map(payload).collect();
        wait_for("every node to commit 200", || {
            nodes.iter().all(|n| n.user_count() == 200)
        })
        .await;
        for n in &nodes {
            assert_eq!(n.user_payloads(), expected, "node {}", n.id);
        }
        for n in nodes {
            n.stop().await;
        }
    });
}

#[test]
fn a_leader_cut_off_with_uncommitted_entries_truncates_them_when_it_returns() {
    // A leader that appended proposals no follower received (admitting no more than its
    // uncommitted limit), then stopped, comes back after
    // the followers elected a new leader and committed other batches at those offsets: its
    // driver truncates the orphan entries on the real log and takes the committed ones, on
    // disk too.
    on_executor("raft-driver-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let ids = [1u32, 2, 3];
        let nets: Vec<_> = bind_all(CLUSTER, &ids);
        let voters = voter_set(&ids, &nets);
        // Every driver admits at most ORPHANS uncommitted records.
        const ORPHANS: u64 = 6;
        let mut nodes = Vec::new();
        for (&id, net) in ids.iter().zip(nets) {
            let dir = tmp.path().join(format!("node-{id}"));
            let limit = |c: &mut RaftDriverConfig| c.uncommitted_records_max = ORPHANS;
            nodes.push(Node::start_with(UringDisk, id, &dir, net, &voters, limit).await);
        }
        wait_for("a leader", || leader_of(&nodes).is_some()).await;
        propose_all(&nodes, 0..20).await;
        wait_for("20 commits everywhere", || {
            nodes.iter().all(|n| n.user_count() == 20)
        })
        .await;

        // Both followers stop; 10 proposals reach the leader, which nobody else will see. It
        // admits only ORPHANS of them (back-pressure: nothing commits any more); the others
        // wait in its queue and are never appended.
        let l = leader_of(&nodes).unwrap();
        let leader = nodes.remove(l);
        let mut stopped = Vec::new();
        for f in nodes {
            stopped.push(f.stop().await);
        }
        let status = leader.handle.status();
        let orphans: Vec<Vec<u8>> = (0..10).map(|i| payload(10_000 + i)).collect();
        assert!(leader.send_proposals(&status, 1, &orphans).await);
        wait_for("the admitted orphans to be durable on the leader", || {
            let s = leader.handle.status();
            s.proposals_appended >= status.proposals_appended + ORPHANS
                && s.log_durable_end == s.log_end_offset
                && s.stats.truncations == 0
        })
        .await;
        let s = leader.handle.status();
        assert_eq!(
            s.log_end_offset.get() - s.raft.high_watermark.get(),
            ORPHANS
        );
        assert_eq!(s.proposals_appended, status.proposals_appended + ORPHANS);
        assert_eq!(s.proposals_refused, status.proposals_refused);
        let orphan_end = s.log_end_offset;
        let (lid, ldir, laddr, lstatus) = leader.stop().await;
        assert!(
            lstatus.raft.high_watermark < orphan_end,
            "the orphans never committed"
        );
        assert_eq!(
            lstatus.proposals_appended,
            status.proposals_appended + ORPHANS,
            "the queued proposals were never appended"
        );

        // The followers come back, elect a leader among themselves and commit other batches.
        let mut nodes = Vec::new();
        for (id, dir, addr, _) in &stopped {
            let net = rebind(CLUSTER, *id, *addr).await;
            nodes.push(Node::start(UringDisk, *id, dir, net, &voters).await);
        }
        propose_all(&nodes, 20..40).await;
        wait_for("the new leader's commits", || {
            nodes.iter().all(|n| n.user_count() == 40)
        })
        .await;

        // The old leader returns: the orphans go, the committed batches come.
        let net = rebind(CLUSTER, lid, laddr).await;
        let returned = Node::start(UringDisk, lid, &ldir, net, &voters).await;
        assert_eq!(returned.recovered.log_end_offset, orphan_end);
        nodes.push(returned);
        let expected: Vec<Vec<u8>> = (0..40).map(payload).collect();
        wait_for("the old leader to converge", || nodes[2].user_count() == 40).await;
        assert!(nodes[2].handle.status().stats.truncations >= 1);
        for n in &nodes {
            assert_eq!(n.user_payloads(), expected, "node {}", n.id);
        }
        let mut finals = Vec::new();
        for n in nodes {
            finals.push(n.stop().await);
        }
        let below = finals
            .iter()
            .map(|f| f.3.raft.high_watermark)
            .min()
            .unwrap();
        let reference = read_log(&finals[0].1, below).await;
        for (id, dir, _, _) in &finals {
            assert_eq!(
                read_log(dir, below).await,
                reference,
                "node {id}'s log on disk"
            );
        }
        let user: Vec<Vec<u8>> = reference
            .iter()
            .filter(|b| !b.2)
            .map(|b| b.3.clone())
            .collect();
        assert_eq!(user, expected);
    });
}

/// Offers every node in `which` a snapshot through the end of the last batch it published,
/// with data naming that end, and waits until each wrote it. Returns the ends.
async fn snapshot_on(nodes: &[Node], which: &[usize]) -> Vec<LogOffset> {
    let mut ends = Vec::new();
    for &i in which {
        let end = nodes[i].committed.borrow().last().unwrap().end_offset();
        let data = format!("state-machine-through-{end}").into_bytes();
        nodes[i].offer_snapshot(end, data).await;
        wait_for("the snapshot to be written", || {
            nodes[i].handle.status().snapshot_end_offset == end
        })
        .await;
        ends.push(end);
    }
    ends
}

/// The snapshot items a node published, as (end, data).
fn snapshots_published(n: &Node) -> Vec<(LogOffset, Vec<u8>)> {
    n.committed
        .borrow()
        .iter()
        .filter(|b| b.snapshot)
        .map(|b| (b.end_offset(), b.payload.to_vec()))
        .collect()
}

/// The user payloads a node published after its last snapshot item.
fn payloads_after_snapshot(n: &Node) -> Vec<Vec<u8>> {
    let committed = n.committed.borrow();
    let from = committed
        .iter()
        .rposition(|b| b.snapshot)
        .map_or(0, |i| i + 1);
    committed[from..]
        .iter()
        .filter(|b| !b.control && b.payload[..] != *PROBE)
        .map(|b| b.payload.to_vec())
        .collect()
}

#[test]
fn snapshots_let_the_log_prefix_go_and_a_follower_behind_it_installs_the_leaders() {
    // Snapshots offered by the state machine are written to the store and let the log prefix
    // go; a follower that was down while that happened is behind the leader's log start, so
    // it downloads and installs the leader's snapshot (its consumer gets the snapshot, then
    // the batches after it) and catches up; a node restarted from its own snapshot hands it
    // to its consumer first and continues the log after it.
    on_executor("raft-driver-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let (mut nodes, disks, voters) = sim_cluster(tmp.path()).await;
        propose_all(&nodes, 0..100).await;
        wait_for("100 commits everywhere", || {
            nodes.iter().all(|n| n.user_count() == 100)
        })
        .await;
        let l = leader_of(&nodes).unwrap();
        let f = (l + 1) % 3;
        let (f_id, f_dir, f_addr, _) = nodes.remove(f).stop().await;
        // Enough records for several 256 KiB segments.
        propose_all(&nodes, 100..3100).await;
        wait_for("3100 commits on the two", || {
            nodes.iter().all(|n| n.user_count() == 3100)
        })
        .await;
        let both: Vec<usize> = (0..nodes.len()).collect();
        let ends = snapshot_on(&nodes, &both).await;
        let l = leader_of(&nodes).unwrap();
        wait_for("the leader's log prefix to go", || {
            nodes[l].handle.status().raft.log_start_offset == ends[l]
        })
        .await;
        // The nodes' files are on their simulated disks, snapshots included.
        let store = corum_node::snapshot_store::snapshot_dir(
            &tmp.path().join(format!("node-{}", nodes[l].id)),
        );
        let files = corum_node::snapshot_store::list(&disks[nodes[l].id as usize - 1], &store)
            .await
            .unwrap()
            .len();
        assert_eq!(files, 1, "one snapshot in the leader's store");
        propose_all(&nodes, 3100..3200).await;

        // The follower comes back behind the leader's log start.
        let net = rebind(CLUSTER, f_id, f_addr).await;
        let back = Node::start(disks[f_id as usize - 1].clone(), f_id, &f_dir, net, &voters).await;
        assert_eq!(back.recovered.snapshot, None);
        nodes.push(back);
        let back = nodes.len() - 1;
        wait_for("the follower to install a snapshot and catch up", || {
            nodes[back].handle.status().raft.high_watermark
                >= nodes[l].handle.status().raft.high_watermark
                && !snapshots_published(&nodes[back]).is_empty()
                && payloads_after_snapshot(&nodes[back]).len() >= 100
        })
        .await;
        let installed = snapshots_published(&nodes[back]);
        assert_eq!(installed.len(), 1, "{installed:?}");
        assert_eq!(installed[0].0, ends[l]);
        assert_eq!(
            installed[0].1,
            format!("state-machine-through-{}", ends[l]).into_bytes()
        );
        let status = nodes[back].handle.status();
        assert_eq!(status.stats.snapshots_installed, 1);
        assert_eq!(status.snapshot_end_offset, ends[l]);
        let tail: Vec<Vec<u8>> = (3100..3200).map(payload).collect();
        assert_eq!(payloads_after_snapshot(&nodes[back]), tail);

        // Everyone restarts: each starts from its newest snapshot and continues after it.
        let mut stopped = Vec::new();
        for n in nodes {
            stopped.push(n.stop().await);
        }
        let leader_id = stopped[l].0;
        let mut nodes = Vec::new();
        for (id, dir, addr, before) in stopped {
            let net = rebind(CLUSTER, id, addr).await;
            let n = Node::start(disks[id as usize - 1].clone(), id, &dir, net, &voters).await;
            let snap = n.recovered.snapshot.expect("a snapshot to start from");
            assert_eq!(snap.end_offset, before.snapshot_end_offset, "node {id}");
            assert!(n.recovered.log_start_offset <= snap.end_offset);
            if id == leader_id {
                assert!(
                    n.recovered.log_start_offset > LogOffset(0),
                    "whole segments below the snapshot were deleted: {:?}",
                    n.recovered
                );
            }
            nodes.push(n);
        }
        wait_for("a leader", || leader_of(&nodes).is_some()).await;
        propose_all(&nodes, 3200..3210).await;
        wait_for("3210 everywhere", || {
            nodes
                .iter()
                .all(|n| payloads_after_snapshot(n).last() == Some(&payload(3209)))
        })
        .await;
        for n in &nodes {
            let first = n.committed.borrow()[0].clone();
            assert!(first.snapshot, "node {}: the snapshot comes first", n.id);
            assert_eq!(first.end_offset(), n.recovered.snapshot.unwrap().end_offset);
            let after = payloads_after_snapshot(n);
            let expected: Vec<Vec<u8>> = (3210 - after.len() as u32..3210).map(payload).collect();
            assert_eq!(after, expected, "node {}", n.id);
        }
        for n in nodes {
            n.stop().await;
        }
    });
}

#[test]
fn the_log_start_waits_for_the_retention_before_moving_up_to_a_snapshot() {
    // With a retention of 600 KiB (256 KiB segments), a snapshot is written at once but the
    // log start stays until the whole segments below the newest snapshot hold more than that;
    // with no retention at all it never moves, and a restart still starts from the snapshot.
    on_executor("raft-driver-test", TEST_DEADLINE, || async {
        let tmp = tempfile::tempdir().unwrap();
        let nets = bind_all(CLUSTER, &[1]);
        let voters = voter_set(&[1], &nets);
        let disk = SimDisk::new(1);
        let dir = tmp.path().join("node-1");
        let net = nets.into_iter().next().unwrap();
        let node = Node::start_with(disk.clone(), 1, &dir, net, &voters, |c| {
            c.log_retention_bytes = Some(600 << 10);
        })
        .await;
        let nodes = vec![node];
        wait_for("a leader", || leader_of(&nodes).is_some()).await;
        // About one segment below the first snapshot: under the retention.
        propose_all(&nodes, 0..3000).await;
        wait_for("3000 commits", || nodes[0].user_count() == 3000).await;
        let first = snapshot_on(&nodes, &[0]).await[0];
        propose_all(&nodes, 3000..9000).await;
        wait_for("9000 commits", || nodes[0].user_count() == 9000).await;
        assert_eq!(
            nodes[0].handle.status().raft.log_start_offset,
            LogOffset(0),
            "the segments below the first snapshot ({first}) are within the retention"
        );
        let second = snapshot_on(&nodes, &[0]).await[0];
        wait_for("the log start to move up to the second snapshot", || {
            nodes[0].handle.status().raft.log_start_offset == second
        })
        .await;
        let (id, dir, addr, _) = nodes.into_iter().next().unwrap().stop().await;

        // No retention: the log is kept whole, the snapshot still shortens the restart.
        let net = rebind(CLUSTER, id, addr).await;
        let node = Node::start_with(disk.clone(), id, &dir, net, &voters, |c| {
            c.log_retention_bytes = None;
        })
        .await;
        assert_eq!(node.recovered.snapshot.map(|s| s.end_offset), Some(second));
        let nodes = vec![node];
        wait_for("a leader", || leader_of(&nodes).is_some()).await;
        propose_all(&nodes, 9000..12000).await;
        wait_for("12000 published after the snapshot", || {
            payloads_after_snapshot(&nodes[0]).len() == 3000
        })
        .await;
        let third = snapshot_on(&nodes, &[0]).await[0];
        propose_all(&nodes, 12000..12010).await;
        wait_for("12010", || payloads_after_snapshot(&nodes[0]).len() == 3010).await;
        assert_eq!(
            nodes[0].handle.status().raft.log_start_offset,
            second,
            "the log start stays below the newest snapshot ({third})"
        );
        let first_published = nodes[0].committed.borrow()[0].clone();
        assert!(first_published.snapshot && first_published.end_offset() == second);
        let start_before = nodes[0].handle.status().raft.log_start_offset;
        let (id, dir, addr, _) = nodes.into_iter().next().unwrap().stop().await;

        // Restarted with a retention again: the core starts at the third snapshot, and the
        // whole segments below it that outgrow the retention go at start-up.
        let net = rebind(CLUSTER, id, addr).await;
        let node = Node::start_with(disk.clone(), id, &dir, net, &voters, |c| {
            c.log_retention_bytes = Some(0);
        })
        .await;
        assert_eq!(node.recovered.snapshot.map(|s| s.end_offset), Some(third));
        assert!(
            node.recovered.log_start_offset > start_before
                && node.recovered.log_start_offset <= third,
            "{:?}",
            node.recovered
        );
        node.stop().await;
    });
}
