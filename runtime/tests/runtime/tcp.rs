//! Framed TCP over loopback: round trips, misbehaving peers, per-connection limits and
//! reconnection. Every test runs inside one unpinned shard.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use corum_runtime::frame::{self, FrameError};
use corum_runtime::transport::{connect, ConnectionConfig, Listener, PeerConfig, ReconnectingPeer};
use corum_runtime::{BackoffConfig, Error, ShutdownSignal};
use glommio::channels::local_channel;

use crate::on_shard;

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Clone, PartialEq)]
#[rkyv(derive(Debug))]
struct Msg {
    seq: u64,
    server: u32,
    body: Vec<u8>,
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Starts an echo server that tags replies with `server`; each connection's final error (if
/// any) is sent to `errors`. Returns the address and the serve task (resolves to the accept
/// count once `stop` fires).
fn echo_server(
    addr: SocketAddr,
    config: ConnectionConfig,
    server: u32,
    stop: ShutdownSignal,
    errors: Option<local_channel::LocalSender<Error>>,
) -> (SocketAddr, glommio::Task<u64>) {
    let listener = Listener::bind(addr, config).unwrap();
    let local = listener.local_addr();
    let errors = errors.map(Rc::new);
    let conn_stop = stop.clone();
    let task = glommio::spawn_local(listener.serve(stop, None, move |mut conn| {
        let errors = errors.clone();
        let stop = conn_stop.clone();
        async move {
            loop {
                let Some(received) = stop.run_until(conn.recv::<Msg>()).await else {
                    return Ok(());
                };
                match received {
                    Ok(m) => {
                        let reply = Msg {
                            seq: m.seq.to_native(),
                            server,
                            body: m.body.to_vec(),
                        };
                        conn.send(&reply).await?;
                    }
                    Err(e) => {
                        if let Some(tx) = &errors {
                            let _ = tx.try_send(clone_error(&e));
                        }
                        return Err(e);
                    }
                }
            }
        }
    }));
    (local, task)
}

/// Errors aren't Clone (they carry io::Error); rebuild the frame variants the tests inspect.
fn clone_error(e: &Error) -> Error {
    match e {
        Error::BadFrame { peer, source } => Error::BadFrame {
            peer: *peer,
            source: source.clone(),
        },
        Error::InvalidPayload { peer, reason } => Error::InvalidPayload {
            peer: *peer,
            reason: reason.clone(),
        },
        Error::ConnectionClosed { peer } => Error::ConnectionClosed { peer: *peer },
        other => Error::Validation {
            reason: other.to_string(),
        },
    }
}

fn msg(seq: u64, len: usize) -> Msg {
    Msg {
        seq,
        server: 0,
        body: (0..len).map(|i| (i as u8).wrapping_mul(31)).collect(),
    }
}

#[test]
fn frames_round_trip_over_loopback() {
    // Messages of many sizes go out and come back intact, and the listener counts the
    // connection and stops on its signal.
    let accepted = on_shard(|_ctx| async move {
        let stop = ShutdownSignal::detached();
        let (addr, server) = echo_server(
            loopback(),
            ConnectionConfig::default(),
            1,
            stop.clone(),
            None,
        );
        let mut conn = connect(addr, ConnectionConfig::default()).await.unwrap();
        for (seq, len) in [0usize, 1, 7, 8, 100, 4096, 70_000].into_iter().enumerate() {
            let m = msg(seq as u64, len);
            conn.send(&m).await.unwrap();
            let r = conn.recv::<Msg>().await.unwrap();
            assert_eq!(r.seq, seq as u64);
            assert_eq!(r.server, 1);
            assert_eq!(r.body.as_slice(), &m.body[..]);
        }
        assert_eq!(conn.stats().frames_sent, 7);
        assert_eq!(conn.stats().frames_received, 7);
        stop.fire();
        server.await
    });
    assert_eq!(accepted, 1);
}

/// Bytes a misbehaving peer sends, and the error the server must report for them.
/// A named bad input and a check of the error it must produce.
type BadInput = (&'static str, Vec<u8>, fn(&Error) -> bool);

fn bad_inputs() -> Vec<BadInput> {
    let mut good = Vec::new();
    frame::encode(b"01234567", &mut good);
    let mut bad_crc = good.clone();
    bad_crc[HEADER + 3] ^= 0x40;
    let mut bad_version = good.clone();
    bad_version[4] = 9;
    let mut too_large = Vec::new();
    frame::encode(&[0u8; 2048], &mut too_large);
    let mut not_rkyv = Vec::new();
    frame::encode(b"xy", &mut not_rkyv);
    const HEADER: usize = frame::HEADER_BYTES;
    vec![
        ("garbage", b"GET / HTTP/1.1\r\n\r\n".to_vec(), |e| {
            matches!(
                e,
                Error::BadFrame {
                    source: FrameError::BadMagic { .. },
                    ..
                }
            )
        }),
        ("bad checksum", bad_crc, |e| {
            matches!(
                e,
                Error::BadFrame {
                    source: FrameError::BadChecksum { .. },
                    ..
                }
            )
        }),
        ("wrong version", bad_version, |e| {
            matches!(
                e,
                Error::BadFrame {
                    source: FrameError::UnsupportedVersion { found: 9 },
                    ..
                }
            )
        }),
        ("too large for this connection", too_large, |e| {
            matches!(
                e,
                Error::BadFrame {
                    source: FrameError::TooLarge {
                        payload_bytes: 2048,
                        payload_bytes_max: 1024
                    },
                    ..
                }
            )
        }),
        ("truncated", good[..good.len() - 4].to_vec(), |e| {
            matches!(
                e,
                Error::BadFrame {
                    source: FrameError::Truncated { .. },
                    ..
                }
            )
        }),
        ("checksum fine, archive invalid", not_rkyv, |e| {
            matches!(e, Error::InvalidPayload { .. })
        }),
    ]
}

#[test]
fn a_bad_frame_mid_stream_closes_only_that_connection() {
    // For each kind of bad input sent after a good exchange, the server closes that connection
    // with the matching error, the sender sees the close, and a second connection opened
    // before it keeps working throughout.
    on_shard(|_ctx| async move {
        let limits = ConnectionConfig {
            payload_bytes_max: 1024,
            ..Default::default()
        };
        let stop = ShutdownSignal::detached();
        let (err_tx, err_rx) = local_channel::new_unbounded();
        let (addr, server) = echo_server(loopback(), limits, 1, stop.clone(), Some(err_tx));
        let mut steady = connect(addr, ConnectionConfig::default()).await.unwrap();
        let mut seq = 0;
        let mut check_steady = async |steady: &mut corum_runtime::TcpConnection| {
            seq += 1;
            steady.send(&msg(seq, 16)).await.unwrap();
            assert_eq!(steady.recv::<Msg>().await.unwrap().seq, seq);
        };
        check_steady(&mut steady).await;
        for (name, bytes, expected) in bad_inputs() {
            let mut bad = connect(addr, ConnectionConfig::default()).await.unwrap();
            bad.send(&msg(1, 8)).await.unwrap();
            assert_eq!(bad.recv::<Msg>().await.unwrap().seq, 1, "{name}");
            bad.send_raw(&bytes).await.unwrap();
            if name == "truncated" {
                // The frame is incomplete until the sender closes its side.
                bad.close().await;
            }
            let reported = err_rx.recv().await.unwrap();
            assert!(expected(&reported), "{name}: got {reported:?}");
            assert!(
                matches!(bad.recv::<Msg>().await, Err(Error::ConnectionClosed { .. })),
                "{name}: the server must close the connection"
            );
            check_steady(&mut steady).await;
        }
        stop.fire();
        assert_eq!(server.await, 1 + bad_inputs().len() as u64);
    });
}

#[test]
fn the_receiver_checks_its_own_limit_not_the_senders() {
    // A frame that the sender's limit allows but the receiver's limit doesn't is refused by
    // the receiver from the header alone; a sender never emits beyond its own limit.
    on_shard(|_ctx| async move {
        let stop = ShutdownSignal::detached();
        let (err_tx, err_rx) = local_channel::new_unbounded();
        let small = ConnectionConfig {
            payload_bytes_max: 256,
            ..Default::default()
        };
        let (addr, _server) = echo_server(loopback(), small, 1, stop.clone(), Some(err_tx));
        let mut conn = connect(addr, ConnectionConfig::default()).await.unwrap();
        conn.send(&msg(1, 10_000)).await.unwrap();
        let e = err_rx.recv().await.unwrap();
        assert!(
            matches!(
                e,
                Error::BadFrame {
                    source: FrameError::TooLarge { .. },
                    ..
                }
            ),
            "{e:?}"
        );
        let mut tiny = connect(addr, small).await.unwrap();
        assert!(matches!(
            tiny.send(&msg(1, 10_000)).await,
            Err(Error::MessageTooLarge { .. })
        ));
        // Refusing to send does not break the connection.
        tiny.send(&msg(2, 10)).await.unwrap();
        assert_eq!(tiny.recv::<Msg>().await.unwrap().seq, 2);
        stop.fire();
    });
}

#[test]
fn split_halves_send_and_receive_concurrently() {
    // A writer task and a reader task share one connection through its split halves.
    on_shard(|_ctx| async move {
        let stop = ShutdownSignal::detached();
        let (addr, _server) = echo_server(
            loopback(),
            ConnectionConfig::default(),
            1,
            stop.clone(),
            None,
        );
        let conn = connect(addr, ConnectionConfig::default()).await.unwrap();
        let (mut reader, mut writer) = conn.into_split();
        const N: u64 = 100;
        let writer_task = glommio::spawn_local(async move {
            for seq in 0..N {
                writer.send(&msg(seq, 64)).await.unwrap();
            }
        });
        for seq in 0..N {
            assert_eq!(reader.recv::<Msg>().await.unwrap().seq, seq);
        }
        writer_task.await;
        stop.fire();
    });
}

#[test]
fn reconnects_after_the_server_restarts() {
    // An outbound peer whose server goes away and comes back on the same port reconnects and
    // reaches the new server, within a bounded number of attempts.
    on_shard(|ctx| async move {
        let stop1 = ShutdownSignal::detached();
        let (addr, server1) = echo_server(
            loopback(),
            ConnectionConfig::default(),
            1,
            stop1.clone(),
            None,
        );
        let config = PeerConfig {
            backoff: BackoffConfig {
                base: Duration::from_millis(1),
                cap: Duration::from_millis(20),
                seed: 42,
            },
            ..Default::default()
        };
        let mut peer = ReconnectingPeer::new(addr, config).unwrap();
        let r = peer
            .request::<Msg, Msg>(&msg(1, 8), ctx.shutdown())
            .await
            .unwrap();
        assert_eq!(r.server, 1);
        assert_eq!(peer.connects(), 1);

        // Restart: stop server 1 (its connections close), then bind server 2 on the same port.
        stop1.fire();
        server1.await;
        let stop2 = ShutdownSignal::detached();
        let (addr2, _server2) =
            echo_server(addr, ConnectionConfig::default(), 2, stop2.clone(), None);
        assert_eq!(addr2, addr);

        let mut reached = None;
        for attempt in 0..10 {
            if let Ok(r) = peer.request::<Msg, Msg>(&msg(2, 8), ctx.shutdown()).await {
                if r.server == 2 {
                    reached = Some(attempt);
                    break;
                }
            }
        }
        assert!(reached.is_some(), "never reached the restarted server");
        assert_eq!(peer.connects(), 2);
        stop2.fire();
    });
}

#[test]
fn connecting_gives_up_after_the_attempt_limit() {
    // With nobody listening, a peer with an attempt limit returns the connect error after that
    // many tries instead of retrying forever.
    on_shard(|ctx| async move {
        let closed_port = {
            let l = Listener::bind(loopback(), ConnectionConfig::default()).unwrap();
            l.local_addr()
        };
        let config = PeerConfig {
            backoff: BackoffConfig {
                base: Duration::from_millis(1),
                cap: Duration::from_millis(2),
                seed: 1,
            },
            connect_attempts_max: Some(3),
            ..Default::default()
        };
        let mut peer = ReconnectingPeer::new(closed_port, config).unwrap();
        let e = peer.send(&msg(1, 1), ctx.shutdown()).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::Io {
                    op: "connect to",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(peer.connects(), 0);
    });
}

#[test]
fn connecting_stops_on_shutdown() {
    // A peer backing off while nobody listens returns ShuttingDown once shutdown fires.
    on_shard(|ctx| async move {
        let closed_port = {
            let l = Listener::bind(loopback(), ConnectionConfig::default()).unwrap();
            l.local_addr()
        };
        let mut peer = ReconnectingPeer::new(closed_port, PeerConfig::default()).unwrap();
        let fired = Rc::new(Cell::new(false));
        let signal = ctx.shutdown().clone();
        let f = fired.clone();
        glommio::spawn_local(async move {
            corum_runtime::timer::sleep(Duration::from_millis(5)).await;
            f.set(true);
            signal.fire();
        })
        .detach();
        let e = peer.send(&msg(1, 1), ctx.shutdown()).await.unwrap_err();
        assert!(matches!(e, Error::ShuttingDown), "{e:?}");
        assert!(fired.get());
    });
}
