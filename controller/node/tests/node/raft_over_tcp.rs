//! Three real Raft cores talking over the peer network on loopback: they elect one leader,
//! commit its LeaderChange, and replicate a proposal to everyone. A minimal in-memory driver
//! follows `corum_raft::Ready`'s contract (no disk: an append is durable as soon as it is
//! written). Runs on one unpinned glommio shard under a deadline.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_node::peer::{PeerInbox, PeerNetwork};
use corum_raft::{Batch, RaftCore, Restore, Role};
use corum_types::{LogOffset, NodeId, Uuid};
use glommio::channels::local_channel::{self, LocalSender};

use crate::common::{bind_all, endpoint, key, on_shard, raft_config, voter_set, LISTENER};

const TEST_DEADLINE: Duration = Duration::from_secs(120);
const CLUSTER: Uuid = Uuid([0x42; 16]);
const TICK: Duration = Duration::from_millis(5);

/// What a driver reports after each round: node, role, epoch, high watermark.
type Report = (NodeId, Role, corum_types::Epoch, LogOffset);

enum Event {
    Message(corum_node::Inbound),
    Tick,
    Closed,
}

/// Carries out every Ready of `core` (in-memory log; writes are durable at once), then reports.
fn drain(
    core: &mut RaftCore,
    log: &mut Vec<Batch>,
    net: &PeerNetwork,
    reports: &Rc<LocalSender<Report>>,
) {
    loop {
        let mut durable = None;
        while let Some(r) = core.ready() {
            if let Some(t) = r.truncate_to {
                log.retain(|b| b.end_offset() <= t);
            }
            for b in r.entries {
                durable = Some((b.end_offset(), b.epoch));
                log.push(b);
            }
            net.send_all(r.messages);
            for read in r.reads {
                let from = log.iter().position(|b| b.base_offset == read.from);
                let batches = from.map_or_else(Vec::new, |i| log[i..].to_vec());
                core.read_completed(read.id, batches);
            }
        }
        match durable {
            Some((end, epoch)) => core.persisted(end, epoch),
            None => break,
        }
    }
    let s = core.status();
    let _ = reports.try_send((core.id(), s.role, s.epoch, s.high_watermark));
}

async fn drive(
    core: Rc<RefCell<RaftCore>>,
    net: Rc<PeerNetwork>,
    inbox: PeerInbox,
    reports: Rc<LocalSender<Report>>,
    stop: Rc<Cell<bool>>,
    start: Instant,
) {
    let mut log = Vec::new();
    while !stop.get() {
        let event = futures_lite::future::or(
            async {
                match inbox.recv().await {
                    Some(m) => Event::Message(m),
                    None => Event::Closed,
                }
            },
            async {
                glommio::timer::sleep(TICK).await;
                Event::Tick
            },
        )
        .await;
        let mut core = core.borrow_mut();
        match event {
            Event::Message(m) => core.step(m.from, m.message),
            Event::Tick => core.tick(start.elapsed().as_millis() as u64),
            Event::Closed => return,
        }
        drain(&mut core, &mut log, &net, &reports);
    }
}

#[test]
fn three_cores_elect_a_leader_and_replicate_over_tcp() {
    // Raft traffic of every kind a fresh quorum needs (pre-votes, votes, BeginQuorumEpoch,
    // pipelined appends and their acknowledgements) crosses the peer network, so one leader
    // is elected and a proposal reaches every node's high watermark.
    on_shard(TEST_DEADLINE, || async {
        let ids = [1u32, 2, 3];
        let nets: Vec<(PeerNetwork, PeerInbox)> = bind_all(CLUSTER, &ids);
        let voters = voter_set(&ids, &nets);
        let config = raft_config();
        let start = Instant::now();
        let stop = Rc::new(Cell::new(false));
        let (report_tx, report_rx) = local_channel::new_unbounded();
        let report_tx = Rc::new(report_tx);
        let mut cores = Vec::new();
        let mut drivers = Vec::new();
        let mut networks = Vec::new();
        for (&id, (net, inbox)) in ids.iter().zip(nets) {
            let linked = net.add_voters(&voters, LISTENER).unwrap();
            assert_eq!(linked.len(), 2);
            let core = RaftCore::new(
                config.clone(),
                key(id),
                vec![endpoint(net.local_addr())],
                Restore {
                    quorum_state: Default::default(),
                    snapshot: None,
                    log: vec![],
                    bootstrap_voters: voters.clone(),
                    kraft_version: 1,
                },
                u64::from(id),
                0,
            )
            .unwrap();
            let core = Rc::new(RefCell::new(core));
            let net = Rc::new(net);
            drivers.push(glommio::spawn_local(drive(
                core.clone(),
                net.clone(),
                inbox,
                report_tx.clone(),
                stop.clone(),
                start,
            )));
            cores.push(core);
            networks.push(net);
        }

        // Wait for a leader whose epoch's LeaderChange has committed on every node.
        let mut hwm = [LogOffset::ZERO; 4];
        let mut leader = None;
        while leader.is_none() || hwm[1..].contains(&LogOffset::ZERO) {
            let (id, role, epoch, h) = report_rx.recv().await.unwrap();
            hwm[id.0 as usize] = h;
            if role == Role::Leader {
                leader = Some((id, epoch));
            }
        }
        let (leader, epoch) = leader.unwrap();
        for core in &cores {
            let s = core.borrow().status();
            assert_eq!(s.epoch, epoch);
            assert_eq!(s.leader, Some(leader));
        }

        // A proposal on the leader commits everywhere.
        // (The leader's driver carries out the resulting Ready on its next event.)
        let proposal = cores[leader.0 as usize - 1]
            .borrow_mut()
            .propose(vec![7u8; 1000].into(), 3)
            .unwrap();
        while hwm[1..].iter().any(|h| *h < proposal.end_offset) {
            let (id, _, _, h) = report_rx.recv().await.unwrap();
            hwm[id.0 as usize] = h;
        }
        for net in &networks {
            let s = net.inbound_stats();
            assert!(s.received > 0);
            assert_eq!((s.rejected_envelopes, s.bad_frames), (0, 0));
        }

        stop.set(true);
        for d in drivers {
            d.await;
        }
        for net in networks {
            Rc::try_unwrap(net).unwrap().close().await;
        }
    });
}
