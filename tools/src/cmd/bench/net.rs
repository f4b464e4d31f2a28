//! `corum bench net`: the host's own floor for one hop of a commit. Two threads of this
//! process play request and answer over a loopback TCP connection (blocking sockets,
//! `TCP_NODELAY`, one message in flight), so the figure holds only what the kernel and the
//! machine charge for a round trip: the two sends, the two receives and the two wake-ups of a
//! sleeping thread. A write to a quorum makes two such round trips (client to leader, leader
//! to followers) on top of its disk writes, so with `raw_quorum_write_p50_us` this says how
//! fast a commit could be on this host before any software of ours runs. On a virtual machine
//! the wake-up of an idle vCPU dominates it (an order of magnitude above two threads sharing
//! one CPU).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest `--message-bytes`.
pub const MESSAGE_BYTES_MAX: usize = 1 << 20;

#[derive(clap::Args, Debug)]
pub struct NetArgs {
    /// Seconds of round trips.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Bytes sent each way per round trip.
    #[arg(long, default_value_t = 64)]
    pub message_bytes: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct NetReport {
    pub message_bytes: usize,
    pub round_trips: u64,
    pub round_trips_per_sec: f64,
    /// Loopback TCP round trip between two threads, p50 (µs, rounded up).
    pub loopback_rtt_p50_us: u64,
    pub loopback_rtt_p99_us: u64,
    pub loopback_rtt_max_us: u64,
}

/// Round trips of `message_bytes` each way for `duration` (at most ten million of them).
pub fn measure_loopback(duration: Duration, message_bytes: usize) -> anyhow::Result<NetReport> {
    anyhow::ensure!(
        (1..=MESSAGE_BYTES_MAX).contains(&message_bytes),
        "--message-bytes must be between 1 and {MESSAGE_BYTES_MAX}, not {message_bytes}"
    );
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("listening on 127.0.0.1")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::Builder::new()
        .name("corum-bench-echo".into())
        .spawn(move || -> std::io::Result<()> {
            let (mut s, _) = listener.accept()?;
            s.set_nodelay(true)?;
            let mut buf = vec![0u8; message_bytes];
            // The client closing its end ends the loop.
            while s.read_exact(&mut buf).is_ok() {
                s.write_all(&buf)?;
            }
            Ok(())
        })
        .context("starting the echo thread")?;
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("static histogram bounds");
    let started = Instant::now();
    let result = (|| -> anyhow::Result<()> {
        let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        s.set_nodelay(true)?;
        let mut buf = vec![0x5au8; message_bytes];
        while started.elapsed() < duration && hist.len() < 10_000_000 {
            let t = Instant::now();
            s.write_all(&buf).context("sending")?;
            s.read_exact(&mut buf).context("receiving the echo")?;
            hist.saturating_record(t.elapsed().as_nanos().max(1) as u64);
        }
        Ok(())
    })();
    let elapsed = started.elapsed();
    let echoed = echo
        .join()
        .map_err(|_| anyhow::anyhow!("the echo thread panicked"))?;
    result?;
    echoed.context("the echo thread")?;
    let us = |ns: u64| ns.div_ceil(1_000);
    Ok(NetReport {
        message_bytes,
        round_trips: hist.len(),
        round_trips_per_sec: hist.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        loopback_rtt_p50_us: us(hist.value_at_quantile(0.5)),
        loopback_rtt_p99_us: us(hist.value_at_quantile(0.99)),
        loopback_rtt_max_us: us(hist.max()),
    })
}

pub fn run(args: NetArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.seconds > 0.0 && args.seconds <= 600.0,
        "--seconds must be above 0 and at most 600, not {}",
        args.seconds
    );
    let r = measure_loopback(Duration::from_secs_f64(args.seconds), args.message_bytes)?;
    if args.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "loopback TCP round trip between two threads ({} B each way, one in flight)",
            r.message_bytes
        );
        println!(
            "  p50 / p99 / max        {:>10} / {} / {} us",
            r.loopback_rtt_p50_us, r.loopback_rtt_p99_us, r.loopback_rtt_max_us
        );
        println!("  round trips per sec    {:>10.0}", r.round_trips_per_sec);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short run makes round trips and orders its percentiles.
    #[test]
    fn loopback_round_trips() {
        let r = measure_loopback(Duration::from_millis(200), 100).unwrap();
        assert!(r.round_trips > 10, "{r:?}");
        assert!(r.loopback_rtt_p50_us >= 1, "{r:?}");
        assert!(r.loopback_rtt_p50_us <= r.loopback_rtt_p99_us, "{r:?}");
        assert!(r.loopback_rtt_p99_us <= r.loopback_rtt_max_us, "{r:?}");
        assert!(r.round_trips_per_sec > 0.0, "{r:?}");
    }

    /// Message sizes outside the bounds are refused with the flag's name.
    #[test]
    fn message_size_bounds() {
        for bad in [0, MESSAGE_BYTES_MAX + 1] {
            let e = measure_loopback(Duration::from_millis(10), bad).unwrap_err();
            assert!(e.to_string().contains("--message-bytes"), "{e}");
        }
    }
}
