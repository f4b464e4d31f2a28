//! The controller-to-controller transport on loopback: nodes exchange Raft messages both
//! ways, a restarted peer is reached again, misbehaving connections are closed alone, and a
//! full outbound queue drops instead of blocking. Every test runs inside one unpinned glommio
//! shard under a deadline, with all nodes of the test on that shard.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use corum_node::peer::{
    Inbound, PeerEnvelope, PeerInbox, PeerNetwork, PeerNetworkConfig, PeerRoute, BOOTSTRAP_IDS,
};
use corum_node::PeerError;
use corum_raft::message::{AppendRequest, BeginQuorumEpoch, VoteRequest, VoteResponse};
use corum_raft::{Batch, Message, ReplicaKey};
use corum_runtime::transport::{connect, ConnectionConfig, Listener};
use corum_runtime::{BackoffConfig, Error as RuntimeError, ShutdownSignal};
use corum_types::{Epoch, LogOffset, NodeId, Uuid};

use crate::common::{bind, loopback, on_shard, peer_config};

const CLUSTER: Uuid = Uuid([0xC1; 16]);

/// Generous: each test finishes in well under a second.
const TEST_DEADLINE: Duration = Duration::from_secs(120);

fn node(id: u32) -> (PeerNetwork, PeerInbox) {
    bind(CLUSTER, id, loopback())
}

fn vote(epoch: u64, candidate: u32) -> Message {
    Message::Vote(VoteRequest {
        epoch: Epoch(epoch),
        candidate: ReplicaKey {
            id: NodeId(candidate),
            directory_id: Uuid([candidate as u8; 16]),
        },
        last_epoch: Epoch(epoch - 1),
        end_offset: LogOffset(10),
        pre_vote: false,
    })
}

fn append(payload_bytes: usize) -> Message {
    Message::Append(AppendRequest {
        epoch: Epoch(3),
        leader: NodeId(1),
        seq: 7,
        prev_end: LogOffset(100),
        prev_epoch: Epoch(2),
        batches: vec![Batch {
            base_offset: LogOffset(100),
            epoch: Epoch(3),
            record_count: 5,
            control: false,
            timestamp_ms: -1,
            payload: (0..payload_bytes)
                .map(|i| i as u8)
                .collect::<Vec<_>>()
                .into(),
        }],
        high_watermark: LogOffset(90),
        snapshot: None,
    })
}

async fn expect(inbox: &PeerInbox, from: u32, message: &Message) {
    let got = inbox.recv().await.expect("inbox open");
    assert_eq!(
        got,
        Inbound {
            from: NodeId(from),
            message: message.clone(),
            routes: Vec::new(),
        }
    );
}

/// Sends `message` to `to` every millisecond until `done` is set: the way Raft itself retries,
/// used where a connection is being re-established and the first sends may be lost.
fn keep_sending(
    net: Rc<PeerNetwork>,
    to: u32,
    message: Message,
    done: Rc<Cell<bool>>,
) -> glommio::Task<()> {
    glommio::spawn_local(async move {
        while !done.get() {
            let _ = net.send(NodeId(to), message.clone());
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
    })
}

#[test]
fn two_nodes_exchange_messages_both_ways() {
    // A request goes one way and its response the other, over each node's own outbound link,
    // and a 300 KiB append arrives intact.
    on_shard(TEST_DEADLINE, || async {
        let (a, a_in) = node(1);
        let (b, b_in) = node(2);
        a.add_peer(NodeId(2), b.local_addr()).unwrap();
        b.add_peer(NodeId(1), a.local_addr()).unwrap();
        a.send(NodeId(2), vote(5, 1)).unwrap();
        expect(&b_in, 1, &vote(5, 1)).await;
        let response = Message::VoteResponse(VoteResponse {
            epoch: Epoch(5),
            request_epoch: Epoch(5),
            voter: ReplicaKey {
                id: NodeId(2),
                directory_id: Uuid([2; 16]),
            },
            granted: true,
            pre_vote: false,
            leader: None,
        });
        b.send(NodeId(1), response.clone()).unwrap();
        expect(&a_in, 2, &response).await;
        let big = append(300 << 10);
        a.send(NodeId(2), big.clone()).unwrap();
        expect(&b_in, 1, &big).await;
        assert_eq!(a.peer_stats(NodeId(2)).unwrap().sent, 2);
        assert_eq!(a.peer_stats(NodeId(2)).unwrap().connects, 1);
        assert_eq!(b.inbound_stats().received, 2);
        assert_eq!(a.inbound_stats().received, 1);
        assert!(matches!(
            a.send(NodeId(9), vote(5, 1)),
            Err(PeerError::UnknownPeer { to: NodeId(9) })
        ));
        a.close().await;
        b.close().await;
    });
}

#[test]
fn three_nodes_exchange_messages_in_every_direction() {
    // Every node sends to both others, in order, and every node receives from both, each
    // message tagged with its sender.
    on_shard(TEST_DEADLINE, || async {
        let nodes: Vec<(PeerNetwork, PeerInbox)> = (1..=3).map(node).collect();
        for (i, (net, _)) in nodes.iter().enumerate() {
            for (j, (other, _)) in nodes.iter().enumerate() {
                if i != j {
                    net.add_peer(NodeId(j as u32 + 1), other.local_addr())
                        .unwrap();
                }
            }
        }
        const ROUNDS: u64 = 20;
        for round in 0..ROUNDS {
            for (i, (net, _)) in nodes.iter().enumerate() {
                for to in net.peers() {
                    net.send(
                        to,
                        Message::BeginQuorumEpoch(BeginQuorumEpoch {
                            epoch: Epoch(round + 1),
                            leader: NodeId(i as u32 + 1),
                        }),
                    )
                    .unwrap();
                }
            }
        }
        for (i, (_, inbox)) in nodes.iter().enumerate() {
            // Per sender, epochs arrive in the order they were sent.
            let mut next = [1u64; 4];
            for _ in 0..ROUNDS * 2 {
                let m = inbox.recv().await.unwrap();
                assert_ne!(m.from, NodeId(i as u32 + 1));
                let Message::BeginQuorumEpoch(b) = m.message else {
                    panic!("unexpected {m:?}")
                };
                assert_eq!(b.leader, m.from);
                assert_eq!(b.epoch, Epoch(next[m.from.0 as usize]));
                next[m.from.0 as usize] += 1;
            }
        }
        for (net, _) in nodes {
            net.close().await;
        }
    });
}

#[test]
fn a_restarted_peer_is_reached_again() {
    // After node 2 stops (its listener and connections close) and a new node 2 binds the same
    // port, node 1's link reconnects and messages flow again, both ways.
    on_shard(TEST_DEADLINE, || async {
        let (a, a_in) = node(1);
        let a = Rc::new(a);
        let (b, b_in) = node(2);
        let b_addr = b.local_addr();
        a.add_peer(NodeId(2), b_addr).unwrap();
        b.add_peer(NodeId(1), a.local_addr()).unwrap();
        a.send(NodeId(2), vote(2, 1)).unwrap();
        expect(&b_in, 1, &vote(2, 1)).await;
        b.close().await;
        drop(b_in);

        let (b2, b2_in) = bind(CLUSTER, 2, b_addr);
        assert_eq!(b2.local_addr(), b_addr);
        b2.add_peer(NodeId(1), a.local_addr()).unwrap();
        let done = Rc::new(Cell::new(false));
        let sender = keep_sending(a.clone(), 2, vote(3, 1), done.clone());
        expect(&b2_in, 1, &vote(3, 1)).await;
        done.set(true);
        sender.await;
        assert!(a.peer_stats(NodeId(2)).unwrap().connects >= 2);
        b2.send(NodeId(1), vote(4, 2)).unwrap();
        // The old node 2's connection to node 1 was closed by its close(); the new one
        // delivers.
        expect(&a_in, 2, &vote(4, 2)).await;
        b2.close().await;
        Rc::try_unwrap(a).unwrap().close().await;
    });
}

#[test]
fn a_peer_whose_process_is_gone_is_reported_and_a_live_one_is_not() {
    // Node 3's link to node 1 closes while node 3 still listens: node 1's probe connects, so
    // nothing is reported. Then node 2 stops (its listener closes with its connections): node
    // 1's probe is refused and node 2 is reported gone, once.
    on_shard(TEST_DEADLINE, || async {
        let (a, a_in) = node(1);
        let (b, _b_in) = node(2);
        let (c, _c_in) = node(3);
        for (net, id) in [(&b, 2), (&c, 3)] {
            net.add_peer(NodeId(1), a.local_addr()).unwrap();
            a.add_peer(NodeId(id), net.local_addr()).unwrap();
            net.send(NodeId(1), vote(2, id)).unwrap();
            expect(&a_in, id, &vote(2, id)).await;
        }
        assert!(c.remove_peer(NodeId(1)).await);
        let quiet = futures_lite::future::or(async { Some(a_in.unreachable().await) }, async {
            glommio::timer::sleep(Duration::from_millis(300)).await;
            None
        })
        .await;
        assert_eq!(quiet, None, "a live peer was reported gone");
        assert_eq!(a.inbound_stats().peers_gone, 0);

        b.close().await;
        assert_eq!(a_in.unreachable().await, Some(NodeId(2)));
        assert_eq!(a.inbound_stats().peers_gone, 1);
        c.close().await;
        a.close().await;
    });
}

/// An envelope as a misbehaving or misconfigured node would send it.
fn envelope(cluster_id: Uuid, from: u32, to: u32) -> PeerEnvelope {
    PeerEnvelope {
        cluster_id,
        from: NodeId(from),
        to: NodeId(to),
        message: vote(9, from),
        routes: Vec::new(),
    }
}

/// A route to node `id` at `addr`.
fn route(id: u32, addr: std::net::SocketAddr) -> PeerRoute {
    PeerRoute {
        id: NodeId(id),
        host: addr.ip().to_string(),
        port: addr.port(),
    }
}

#[test]
fn a_wrong_cluster_or_addressee_closes_only_that_connection() {
    // A connection sending an envelope of another cluster, one addressed to another node, and
    // one with gapped batches are each closed and counted, while node 1's link to node 2 keeps
    // delivering before and after.
    on_shard(TEST_DEADLINE, || async {
        let (a, _a_in) = node(1);
        let (b, b_in) = node(2);
        a.add_peer(NodeId(2), b.local_addr()).unwrap();
        a.send(NodeId(2), vote(2, 1)).unwrap();
        expect(&b_in, 1, &vote(2, 1)).await;

        let mut gapped = envelope(CLUSTER, 3, 2);
        let Message::Append(mut ap) = append(10) else {
            unreachable!()
        };
        ap.batches[0].base_offset = LogOffset(101);
        gapped.message = Message::Append(ap);
        let with_routes = |routes: Vec<PeerRoute>| PeerEnvelope {
            routes,
            ..envelope(CLUSTER, 3, 2)
        };
        let here = b.local_addr();
        let bad = [
            envelope(Uuid([0xEE; 16]), 3, 2),
            envelope(CLUSTER, 3, 7),
            gapped,
            // Routes no node may dial, or more than an envelope carries.
            with_routes(vec![PeerRoute {
                port: 0,
                ..route(3, here)
            }]),
            with_routes(vec![PeerRoute {
                host: String::new(),
                ..route(3, here)
            }]),
            with_routes(vec![route(BOOTSTRAP_IDS.start, here)]),
            with_routes(vec![route(3, here), route(4, here), route(5, here)]),
        ];
        for (k, e) in bad.iter().enumerate() {
            let mut raw = connect(b.local_addr(), ConnectionConfig::default())
                .await
                .unwrap();
            // A good envelope first: the connection is accepted and delivers.
            raw.send(&envelope(CLUSTER, 3, 2)).await.unwrap();
            expect(&b_in, 3, &vote(9, 3)).await;
            raw.send(e).await.unwrap();
            assert!(
                matches!(
                    raw.recv::<PeerEnvelope>().await,
                    Err(RuntimeError::ConnectionClosed { .. })
                ),
                "bad envelope {k}: the receiver must close the connection"
            );
            assert_eq!(b.inbound_stats().rejected_envelopes, k as u64 + 1);
            a.send(NodeId(2), vote(10 + k as u64, 1)).unwrap();
            expect(&b_in, 1, &vote(10 + k as u64, 1)).await;
        }
        assert_eq!(a.peer_stats(NodeId(2)).unwrap().connects, 1);
        assert_eq!(b.inbound_stats().bad_frames, 0);
        a.close().await;
        b.close().await;
    });
}

#[test]
fn garbage_mid_stream_closes_only_that_connection() {
    // Garbage after a good envelope closes that connection (counted as a bad frame) and
    // nothing else: node 1's link keeps delivering.
    on_shard(TEST_DEADLINE, || async {
        let (a, _a_in) = node(1);
        let (b, b_in) = node(2);
        a.add_peer(NodeId(2), b.local_addr()).unwrap();
        let mut raw = connect(b.local_addr(), ConnectionConfig::default())
            .await
            .unwrap();
        raw.send(&envelope(CLUSTER, 3, 2)).await.unwrap();
        expect(&b_in, 3, &vote(9, 3)).await;
        raw.send_raw(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        assert!(matches!(
            raw.recv::<PeerEnvelope>().await,
            Err(RuntimeError::ConnectionClosed { .. })
        ));
        assert_eq!(b.inbound_stats().bad_frames, 1);
        assert_eq!(b.inbound_stats().rejected_envelopes, 0);
        // A frame that is well-formed but holds something that is not an envelope is a bad
        // frame too.
        let mut raw = connect(b.local_addr(), ConnectionConfig::default())
            .await
            .unwrap();
        raw.send(&0xdead_beef_u32).await.unwrap();
        assert!(matches!(
            raw.recv::<PeerEnvelope>().await,
            Err(RuntimeError::ConnectionClosed { .. })
        ));
        assert_eq!(b.inbound_stats().bad_frames, 2);
        a.send(NodeId(2), vote(2, 1)).unwrap();
        expect(&b_in, 1, &vote(2, 1)).await;
        assert_eq!(b.inbound_stats().connections_accepted, 3);
        a.close().await;
        b.close().await;
    });
}

#[test]
fn a_full_outbound_queue_drops_instead_of_blocking() {
    // With the peer unreachable (nobody listens; the link is backing off), sends beyond the
    // queue's capacity return at once with QueueFull and are counted as dropped; the other
    // links are unaffected, and close() does not wait for the backoff.
    on_shard(TEST_DEADLINE, || async {
        let closed_port = {
            let l = Listener::bind(loopback(), ConnectionConfig::default()).unwrap();
            l.local_addr()
        };
        let cfg = PeerNetworkConfig {
            outbound_queue_capacity: 4,
            backoff: BackoffConfig {
                base: Duration::from_secs(30),
                cap: Duration::from_secs(60),
                seed: 1,
            },
            ..peer_config(CLUSTER, 1, loopback())
        };
        let (a, _a_in) = PeerNetwork::bind(cfg, &ShutdownSignal::detached()).unwrap();
        let (b, b_in) = node(2);
        a.add_peer(NodeId(3), closed_port).unwrap();
        a.add_peer(NodeId(2), b.local_addr()).unwrap();
        // Let the link take its first message and start backing off.
        a.send(NodeId(3), vote(2, 1)).unwrap();
        while a.peer_stats(NodeId(3)).unwrap().queued > 0 {
            glommio::executor().yield_task_queue_now().await;
        }
        let mut full = 0;
        for k in 0..10 {
            match a.send(NodeId(3), vote(3 + k, 1)) {
                Ok(()) => {}
                Err(PeerError::QueueFull { to, capacity }) => {
                    assert_eq!((to, capacity), (NodeId(3), 4));
                    full += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(full, 6);
        let s = a.peer_stats(NodeId(3)).unwrap();
        assert_eq!(
            (s.queued, s.dropped_queue_full, s.sent, s.connects),
            (4, 6, 0, 0)
        );
        // Node 2 is still reached, and send_all counts the drops of a batch of messages.
        let dropped = a.send_all(vec![(NodeId(2), vote(7, 1)), (NodeId(3), vote(7, 1))]);
        assert_eq!(dropped, 1);
        expect(&b_in, 1, &vote(7, 1)).await;
        a.close().await;
        b.close().await;
    });
}

#[test]
fn a_stuck_write_times_out_and_reconnects() {
    // A peer that accepts but never reads fills the socket buffers; the write that cannot
    // finish is abandoned after the send timeout, its connection dropped and a new one opened.
    on_shard(TEST_DEADLINE, || async {
        let listener = Listener::bind(loopback(), ConnectionConfig::default()).unwrap();
        let addr = listener.local_addr();
        let held = Rc::new(std::cell::RefCell::new(Vec::new()));
        let accepts = Rc::new(Cell::new(0u32));
        let acceptor = {
            let (held, accepts) = (held.clone(), accepts.clone());
            glommio::spawn_local(async move {
                while let Ok(conn) = listener.accept().await {
                    accepts.set(accepts.get() + 1);
                    held.borrow_mut().push(conn);
                }
            })
        };
        let cfg = PeerNetworkConfig {
            send_timeout: Duration::from_millis(50),
            outbound_queue_capacity: 64,
            ..peer_config(CLUSTER, 1, loopback())
        };
        let (a, _a_in) = PeerNetwork::bind(cfg, &ShutdownSignal::detached()).unwrap();
        a.add_peer(NodeId(2), addr).unwrap();
        let big = append(512 << 10);
        for _ in 0..64 {
            a.send(NodeId(2), big.clone()).unwrap();
        }
        // The check: a link that never times out, or never reconnects, hangs here until the
        // test deadline fails it.
        while a.peer_stats(NodeId(2)).unwrap().send_timeouts == 0 || accepts.get() < 2 {
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
        // The abandoned connection was reset, not closed behind its unsent bytes: reading it
        // gives what arrived, then the reset (a FIN would wait behind bytes never sent).
        let mut first = held.borrow_mut().remove(0);
        let end = loop {
            match first.recv::<PeerEnvelope>().await {
                Ok(_) => continue,
                Err(e) => break e.to_string(),
            }
        };
        assert!(
            end.contains("reset"),
            "the first connection ended with: {end}"
        );
        let s = a.peer_stats(NodeId(2)).unwrap();
        assert!(s.sent > 0, "some messages fit in the socket buffers first");
        assert_eq!(s.dropped_queue_full, 0);
        assert_eq!(
            s.send_failed, 0,
            "a timeout is not counted as a failed write"
        );
        a.close().await;
        drop(acceptor);
        held.borrow_mut().clear();
    });
}

#[test]
fn links_are_added_and_removed() {
    // A link to this node or a second link to a node is refused; a removed link no longer
    // accepts messages.
    on_shard(TEST_DEADLINE, || async {
        let (a, _a_in) = node(1);
        let (b, _b_in) = node(2);
        assert!(matches!(
            a.add_peer(NodeId(1), b.local_addr()),
            Err(PeerError::InvalidPeer { .. })
        ));
        a.add_peer(NodeId(2), b.local_addr()).unwrap();
        assert!(matches!(
            a.add_peer(NodeId(2), b.local_addr()),
            Err(PeerError::InvalidPeer { .. })
        ));
        assert_eq!(a.peers(), vec![NodeId(2)]);
        assert!(a.remove_peer(NodeId(2)).await);
        assert!(!a.remove_peer(NodeId(2)).await);
        assert!(matches!(
            a.send(NodeId(2), vote(2, 1)),
            Err(PeerError::UnknownPeer { .. })
        ));
        a.close().await;
        b.close().await;
    });
}

#[test]
fn shutdown_closes_the_network() {
    // When the shard's shutdown fires, the listener stops and the inbox ends.
    on_shard(TEST_DEADLINE, || async {
        let stop = ShutdownSignal::detached();
        let (a, a_in) = PeerNetwork::bind(peer_config(CLUSTER, 1, loopback()), &stop).unwrap();
        stop.fire();
        assert_eq!(a_in.recv().await, None);
        drop(a);
    });
}

#[test]
fn a_new_connection_introduces_its_node_and_bootstrap_ids_reach_anyone() {
    // Node 1 knows node 2 only by a bootstrap server's address (an id of BOOTSTRAP_IDS); node
    // 2 knows nothing of node 1. Node 2 accepts the envelope addressed to the bootstrap id;
    // its first envelope on the connection carries node 1's route, the next ones none; node
    // 2 links to node 1 from it (once) and answers.
    on_shard(TEST_DEADLINE, || async {
        let (a, a_in) = node(1);
        let (b, b_in) = node(2);
        a.set_own_route(route(1, a.local_addr()));
        let bootstrap = NodeId(BOOTSTRAP_IDS.start);
        a.add_peer(bootstrap, b.local_addr()).unwrap();
        a.send(bootstrap, vote(3, 1)).unwrap();
        let first = b_in.recv().await.unwrap();
        assert_eq!(first.from, NodeId(1));
        assert_eq!(first.routes, vec![route(1, a.local_addr())]);
        a.send(bootstrap, vote(4, 1)).unwrap();
        expect(&b_in, 1, &vote(4, 1)).await;
        assert!(b.learn_route(&first.routes[0], true).unwrap());
        assert!(
            !b.learn_route(&first.routes[0], true).unwrap(),
            "linked once"
        );
        b.send(NodeId(1), vote(5, 2)).unwrap();
        expect(&a_in, 2, &vote(5, 2)).await;
        // Routes given with a message travel with it.
        let leader = route(7, a.local_addr());
        b.send_routed(NodeId(1), vote(6, 2), vec![leader.clone()])
            .unwrap();
        let got = a_in.recv().await.unwrap();
        assert_eq!(got.routes, vec![leader]);
        a.close().await;
        b.close().await;
    });
}

#[test]
fn a_nodes_own_route_moves_a_stale_link_and_others_do_not() {
    // Node 2 links node 1 at a dead address (node 1 moved). Node 1's first envelope carries
    // its own route: from node 1 itself it moves the link; the same route relayed by another
    // node does not.
    on_shard(TEST_DEADLINE, || async {
        let (a, a_in) = node(1);
        let (b, b_in) = node(2);
        a.set_own_route(route(1, a.local_addr()));
        b.add_peer(NodeId(1), "127.0.0.1:1".parse().unwrap())
            .unwrap();
        a.add_peer(NodeId(2), b.local_addr()).unwrap();
        a.send(NodeId(2), vote(3, 1)).unwrap();
        let first = b_in.recv().await.unwrap();
        let own = first.routes[0].clone();
        assert!(
            !b.learn_route(&own, false).unwrap(),
            "relayed: the link stays"
        );
        assert_eq!(
            b.peer_stats(NodeId(1)).unwrap().addr,
            Some("127.0.0.1:1".parse().unwrap())
        );
        assert!(
            b.learn_route(&own, true).unwrap(),
            "its own: the link moves"
        );
        assert_eq!(b.peer_stats(NodeId(1)).unwrap().addr, Some(a.local_addr()));
        assert!(!b.learn_route(&own, true).unwrap(), "already there");
        b.send(NodeId(1), vote(4, 2)).unwrap();
        expect(&a_in, 2, &vote(4, 2)).await;
        // A wildcard host is never announced.
        let (c, _c_in) = node(3);
        c.set_own_route(PeerRoute {
            host: "0.0.0.0".into(),
            ..route(3, c.local_addr())
        });
        c.add_peer(NodeId(2), b.local_addr()).unwrap();
        c.send(NodeId(2), vote(5, 3)).unwrap();
        expect(&b_in, 3, &vote(5, 3)).await;
        a.close().await;
        b.close().await;
        c.close().await;
    });
}

#[test]
fn a_voter_set_with_a_changed_endpoint_moves_the_link() {
    // The voter set is the authority on voters' endpoints: when a VotersRecord (UpdateVoter)
    // gives node 1 another address, add_voters moves the link there; an unchanged set moves
    // nothing.
    on_shard(TEST_DEADLINE, || async {
        let (a, a_in) = node(1);
        let (b, _b_in) = node(2);
        let set_at = |addr: std::net::SocketAddr| {
            corum_raft::VoterSet::new(vec![corum_raft::Voter {
                key: ReplicaKey {
                    id: NodeId(1),
                    directory_id: Uuid([1; 16]),
                },
                endpoints: vec![corum_raft::Endpoint {
                    listener: "CONTROLLER".into(),
                    host: addr.ip().to_string(),
                    port: addr.port(),
                }],
            }])
            .unwrap()
        };
        let stale = "127.0.0.1:1".parse().unwrap();
        assert_eq!(
            b.add_voters(&set_at(stale), "CONTROLLER").unwrap(),
            [NodeId(1)]
        );
        assert!(b
            .add_voters(&set_at(stale), "CONTROLLER")
            .unwrap()
            .is_empty());
        assert_eq!(
            b.add_voters(&set_at(a.local_addr()), "CONTROLLER").unwrap(),
            [NodeId(1)]
        );
        assert_eq!(b.peer_stats(NodeId(1)).unwrap().addr, Some(a.local_addr()));
        b.send(NodeId(1), vote(4, 2)).unwrap();
        expect(&a_in, 2, &vote(4, 2)).await;
        a.close().await;
        b.close().await;
    });
}

#[test]
fn under_mutual_tls_a_peer_speaks_only_as_the_controller_its_certificate_names() {
    // Node 2's listener under mutual TLS: a peer with a controller-3 certificate delivers as
    // node 3, and is closed (counted) when an envelope says it comes from node 1; a
    // certificate from the same CA naming no controller is refused at the handshake, so
    // nothing it sends is read.
    use corum_node::peer::{controller_identity_check, PeerTls};
    use corum_runtime::tls::certs::{CertificateAuthority, Issued, Subject, Validity};
    use corum_runtime::tls::{ClientAuth, Keystore, TlsClient, TlsServer, TlsSettings, Truststore};
    use corum_runtime::transport::connect_tls;

    on_shard(TEST_DEADLINE, || async {
        let dir = tempfile::tempdir().unwrap();
        let ca = CertificateAuthority::new("test CA", Validity::days(1)).unwrap();
        let trust = dir.path().join("ca.pem");
        std::fs::write(&trust, &ca.issued().cert_pem).unwrap();
        let keystore = |cn: &str| {
            let issued: Issued = ca
                .issue(
                    &Subject {
                        common_name: cn.into(),
                        organization: None,
                        alt_names: vec!["127.0.0.1".into()],
                    },
                    Validity::days(1),
                )
                .unwrap();
            let p = dir.path().join(format!("{cn}.pem"));
            std::fs::write(&p, issued.keystore_pem()).unwrap();
            TlsSettings {
                keystore: Some(Keystore::File(p)),
                truststore: Some(Truststore::File(trust.clone())),
                client_auth: ClientAuth::Required,
                verify_hostname: true,
                ..Default::default()
            }
        };
        let b_settings = keystore("controller-2");
        let tls = PeerTls {
            server: Rc::new(
                TlsServer::new("CONTROLLER", b_settings.clone())
                    .unwrap()
                    .with_identity_check(controller_identity_check()),
            ),
            client: Rc::new(TlsClient::new(b_settings).unwrap()),
        };
        let (b, b_in) = PeerNetwork::bind_tls(
            peer_config(CLUSTER, 2, loopback()),
            &ShutdownSignal::detached(),
            Some(tls),
        )
        .unwrap();

        let three = TlsClient::new(keystore("controller-3")).unwrap();
        let mut raw = connect_tls(b.local_addr(), ConnectionConfig::default(), Some(&three))
            .await
            .unwrap();
        raw.send(&envelope(CLUSTER, 3, 2)).await.unwrap();
        expect(&b_in, 3, &vote(9, 3)).await;
        raw.send(&envelope(CLUSTER, 1, 2)).await.unwrap();
        assert!(
            matches!(
                raw.recv::<PeerEnvelope>().await,
                Err(RuntimeError::ConnectionClosed { .. })
            ),
            "speaking as node 1 with node 3's certificate closes the connection"
        );
        assert_eq!(b.inbound_stats().rejected_envelopes, 1);

        let admin = TlsClient::new(keystore("admin")).unwrap();
        // TLS 1.3: the client's side completes before the server checks its certificate.
        if let Ok(mut raw) =
            connect_tls(b.local_addr(), ConnectionConfig::default(), Some(&admin)).await
        {
            let _ = raw.send(&envelope(CLUSTER, 3, 2)).await;
            assert!(raw.recv::<PeerEnvelope>().await.is_err());
        }
        let stats = b.inbound_stats();
        assert_eq!(stats.received, 1, "nothing of the refused peer was read");
        assert_eq!(stats.rejected_envelopes, 1);
        b.close().await;
    });
}
