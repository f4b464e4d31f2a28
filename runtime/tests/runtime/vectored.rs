//! Writes of several buffers at once on a plain socket (`PlainStream` under a split
//! [`NetStream`]): every byte arrives in order however the socket cuts the writes, and a write
//! that waited for room does not make a later wait time out early.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corum_runtime::tls::{write_all_parts, NetStream, IOV_MAX};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};

use crate::on_shard;

fn set_buffer(fd: i32, option: libc::c_int, bytes: libc::c_int) {
    // SAFETY: setsockopt reads `bytes` for the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// A connected pair on loopback, the accepted side's send buffer small (so that writes fill it
/// and wait once the reader stops): the accepted side as a plain [`NetStream`] (its write
/// timeout set), and the dialer. (The reader's receive buffer keeps its size: a small one
/// makes TCP hold back window updates, and the writer would wait on TCP's timers.)
async fn pair(write_timeout: Option<Duration>) -> (NetStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (dialed, accepted) =
        futures_lite::future::zip(TcpStream::connect(addr), listener.accept()).await;
    let (dialed, accepted) = (dialed.unwrap(), accepted.unwrap());
    set_buffer(accepted.as_raw_fd(), libc::SO_SNDBUF, 8 << 10);
    accepted.set_write_timeout(write_timeout).unwrap();
    (NetStream::plain(accepted), dialed)
}

/// Buffers of many sizes (empty ones among them), each filled with its own index.
fn parts(count: usize) -> Vec<Bytes> {
    (0..count)
        .map(|i| {
            let len = match i % 5 {
                0 => 0,
                1 => 1,
                2 => 300,
                3 => 9_000,
                _ => 30_000,
            };
            Bytes::from(vec![i as u8; len])
        })
        .collect()
}

/// Sets the flag when dropped (the writer ended, whichever way).
fn scopeguard(flag: std::rc::Rc<std::cell::Cell<bool>>) -> impl Drop {
    struct Guard(std::rc::Rc<std::cell::Cell<bool>>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }
    Guard(flag)
}

/// Parts written against a slow reader and small buffers arrive whole and in order: each
/// short write's remainder (a part cut in its middle, empty parts, more parts than one
/// `sendmsg` takes) is sent by the next write.
#[test]
fn every_part_arrives_in_order_however_the_writes_are_cut() {
    let got = on_shard(|_| async {
        let (stream, mut dialed) = pair(None).await;
        let (_reader, mut writer) = stream.split();
        let mut sent = parts(IOV_MAX + 100);
        let expected: Vec<u8> = sent.concat();
        let writing = glommio::spawn_local(async move {
            write_all_parts(&mut writer, &mut sent).await.unwrap();
            assert!(sent.is_empty(), "written parts are dropped");
        });
        let mut got = Vec::with_capacity(expected.len());
        let mut buf = vec![0u8; 16 << 10];
        let mut reads = 0u32;
        while got.len() < expected.len() {
            let n = dialed.read(&mut buf).await.unwrap();
            assert!(n > 0, "the stream ended after {} bytes", got.len());
            got.extend_from_slice(&buf[..n]);
            reads += 1;
            if reads % 64 == 0 {
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
        }
        writing.await;
        (got == expected, got.len())
    });
    assert!(got.0, "the bytes differ ({} read)", got.1);
}

/// The stream's write timeout counts from the start of each wait: a writer that waits for
/// room again and again, never longer than the timeout, is not timed out, though the waits
/// together last several timeouts (glommio arms the timeout at a wait, and only its own
/// successful write disarms it; a `sendmsg` that succeeds after a wait must disarm it too).
#[test]
fn waits_shorter_than_the_write_timeout_never_time_out() {
    let outcome = on_shard(|_| async {
        let timeout = Duration::from_millis(300);
        let (stream, mut dialed) = pair(Some(timeout)).await;
        let (_reader, mut writer) = stream.split();
        let start = Instant::now();
        let run = Duration::from_millis(1_500);
        let done = std::rc::Rc::new(std::cell::Cell::new(false));
        let writer_done = done.clone();
        let writing = glommio::spawn_local(async move {
            let _done = scopeguard(writer_done);
            // Two buffers at every write, so that every write is a `sendmsg` (a write of one
            // buffer goes through glommio, whose own success disarms the timeout).
            let (a, b) = (vec![1u8; 40_000], vec![2u8; 40_000]);
            let mut writes = 0u64;
            while start.elapsed() < run {
                let bufs = [std::io::IoSlice::new(&a), std::io::IoSlice::new(&b)];
                if let Err(e) = writer.write_vectored(&bufs).await {
                    return Err(format!("write {writes}, at {:?}: {e}", start.elapsed()));
                }
                writes += 1;
            }
            Ok(writes)
        });
        // Read in spells, stalling 120 ms (well within the timeout) between them while the
        // writer runs, then without stalls until its last round is written.
        let mut buf = vec![0u8; 64 << 10];
        let mut read = 0usize;
        while !done.get() {
            if start.elapsed() < run {
                glommio::timer::sleep(Duration::from_millis(120)).await;
            }
            let spell = Instant::now();
            while spell.elapsed() < Duration::from_millis(20) {
                let n = futures_lite::future::or(
                    async { dialed.read(&mut buf).await.unwrap() },
                    async {
                        glommio::timer::sleep(Duration::from_millis(5)).await;
                        0
                    },
                )
                .await;
                read += n;
            }
        }
        (writing.await, read)
    });
    let (rounds, read) = outcome;
    let writes = rounds.expect("no write timed out");
    assert!(writes >= 3, "the writer wrote ({writes} writes)");
    assert!(read > 0);
}
