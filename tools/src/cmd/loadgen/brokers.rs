//! The `brokers` workload: `--brokers N` simulated brokers sharing one observer
//! [`MetadataFollower`] register (starts spread over the first heartbeat interval, as brokers
//! of a real cluster do not all start at once), wait to be unfenced, then heartbeat every
//! `--heartbeat-interval-ms` until the duration ends. Heartbeat round trips are the recorded
//! latency; registration to unfenced is a histogram of its own. Before the measured phase the
//! follower replays the log up to the current high watermark (as a broker does at startup).
//!
//! Also the helpers the `topics` workload uses to have a few unfenced brokers.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_client::{BrokerSession, ControllerClient, ListenerV1, MetadataFollower, ReplicaKey};
use corum_types::{NodeId, Uuid};
use hdrhistogram::Histogram;

use super::stats::{error_kind, latency_histogram, BrokerFigures, Percentiles, Recorder, Report};
use super::{run_clients, start_measuring, stop_measuring, Ctx};

/// How long one fetch of the shared follower may wait at the leader.
const FOLLOWER_WAIT_MAX: Duration = Duration::from_millis(500);
/// How often a fenced broker re-checks (it also wakes when its follower catches up).
const UNFENCE_POLL: Duration = Duration::from_millis(50);

/// The observer all simulated brokers of this process share: id `broker_id_base - 1`.
pub(crate) fn start_follower(ctx: &Ctx) -> Rc<MetadataFollower> {
    let id = ctx.config.broker_id_base - 1;
    let replica = ReplicaKey {
        id: NodeId(id),
        directory_id: Uuid::from_random_bits(u128::from(ctx.nonce) << 32 | u128::from(id)),
    };
    Rc::new(MetadataFollower::start(
        ctx.client(0).clone(),
        replica,
        FOLLOWER_WAIT_MAX,
    ))
}

/// Waits (not measured) until `follower` has applied the log up to the high watermark it
/// first learns: a broker replays the metadata log before it registers, and a follower
/// starting from offset 0 of a long log would otherwise make every registration wait for that
/// replay. Fails if the follower stops or `timeout` passes.
pub(crate) async fn catch_up(
    client: &ControllerClient,
    follower: &MetadataFollower,
    timeout: Duration,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let target = client
        .describe_quorum_at_leader()
        .await
        .map_err(|e| anyhow::anyhow!("asking the leader for its high watermark: {e}"))?
        .high_watermark;
    let left = timeout.saturating_sub(start.elapsed());
    if follower.wait_for(target, left).await {
        return Ok(());
    }
    match follower.failure() {
        Some(why) => anyhow::bail!("the shared metadata follower stopped: {why}"),
        None => anyhow::bail!(
            "the shared metadata follower applied up to {} of {target} within {timeout:?}",
            follower.next_offset()
        ),
    }
}

/// How long a workload may prepare (the follower's replay, the topics workload's brokers).
pub(crate) fn preparation_timeout(ctx: &Ctx) -> Duration {
    ctx.config.grace.max(Duration::from_secs(30))
}

/// Broker `id` of this run: a fresh incarnation and a listener — `KAFKA` at
/// `endpoints[j % len]` when endpoints are given (`--broker-listeners`: a simulated broker
/// then "lives" behind a corum node's Kafka listener, which Kafka's clients can reach), else a
/// made-up `PLAINTEXT` one.
pub(crate) async fn register(
    client: ControllerClient,
    id: u32,
    j: usize,
    endpoints: &[SocketAddr],
    nonce: u64,
    follower: Rc<MetadataFollower>,
) -> corum_client::Result<BrokerSession> {
    let incarnation = Uuid::from_random_bits(u128::from(nonce) << 64 | u128::from(id));
    let listeners = vec![match endpoints.get(j % endpoints.len().max(1)) {
        Some(addr) => ListenerV1 {
            name: "KAFKA".into(),
            host: addr.ip().to_string(),
            port: addr.port(),
        },
        None => ListenerV1 {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: u16::try_from(10_000 + id % 50_000).expect("below 60000"),
        },
    }];
    BrokerSession::register(client, NodeId(id), incarnation, listeners, follower).await
}

/// Heartbeats `session` every `interval` until `end` (errors counted in `rec` when given).
pub(crate) async fn heartbeat_until(
    mut session: BrokerSession,
    interval: Duration,
    end: Instant,
    rec: Option<Rc<Recorder>>,
) {
    let mut next = Instant::now() + interval;
    while next < end {
        glommio::timer::sleep(next.saturating_duration_since(Instant::now())).await;
        next += interval;
        let sent = Instant::now();
        match session.heartbeat().await {
            Ok(_) => {
                if let Some(r) = &rec {
                    r.ok(sent.elapsed());
                }
            }
            Err(e) => {
                if let Some(r) = &rec {
                    r.error(&error_kind(&e.to_string()));
                }
            }
        }
        // A heartbeat slower than the interval does not cause a burst of catch-up beats.
        let now = Instant::now();
        if next < now {
            next = now;
        }
    }
}

/// When broker `j` of `n` registers: spread evenly over `window`.
pub fn start_offset(j: usize, n: usize, window: Duration) -> Duration {
    if n <= 1 {
        return Duration::ZERO;
    }
    window.mul_f64(j as f64 / n as f64)
}

pub(crate) async fn run(ctx: &mut Ctx, report: &mut Report) -> anyhow::Result<Duration> {
    let n = ctx.config.brokers;
    let interval = ctx.config.heartbeat_interval;
    let follower = start_follower(ctx);
    catch_up(ctx.client(0), &follower, preparation_timeout(ctx)).await?;
    let unfenced = Rc::new(RefCell::new(latency_histogram()));
    let start = start_measuring(ctx).await?;
    let (end, nonce, base) = (ctx.end, ctx.nonce, ctx.config.broker_id_base);
    let window = interval.min(ctx.config.duration);
    let timeout = ctx.config.duration + ctx.config.grace;
    report.unfinished = run_clients(n, ctx.hard_end, |j| {
        let client = ctx.client(j).clone();
        let rec = ctx.recorder.clone();
        let follower = follower.clone();
        let unfenced = unfenced.clone();
        let id = base + j as u32;
        let endpoints = ctx.config.broker_listeners.clone();
        async move {
            glommio::timer::sleep(start_offset(j, n, window)).await;
            if Instant::now() >= end {
                return;
            }
            let mut session = match register(client, id, j, &endpoints, nonce, follower).await {
                Ok(s) => s,
                Err(e) => {
                    rec.error(&format!("register: {}", error_kind(&e.to_string())));
                    return;
                }
            };
            match session.run_until_unfenced(UNFENCE_POLL, timeout).await {
                Ok(took) => unfenced
                    .borrow_mut()
                    .saturating_record(took.as_micros() as u64),
                Err(e) => {
                    rec.error(&format!("unfence: {}", error_kind(&e.to_string())));
                    return;
                }
            }
            heartbeat_until(session, interval, end, Some(rec)).await;
        }
    })
    .await;
    let elapsed = stop_measuring(ctx, start).await;
    if let Some(why) = follower.failure() {
        anyhow::bail!("the shared metadata follower stopped: {why}");
    }
    report.broker = Some(broker_figures(n, interval, &unfenced.borrow()));
    Ok(elapsed)
}

fn broker_figures(n: usize, interval: Duration, unfenced: &Histogram<u64>) -> BrokerFigures {
    let p = Percentiles::of(unfenced);
    BrokerFigures {
        brokers: n,
        heartbeat_interval_ms: interval.as_millis() as u64,
        unfenced: unfenced.len(),
        registration_to_unfenced_p50_us: p.p50_us,
        registration_to_unfenced_p99_us: p.p99_us,
        registration_to_unfenced_max_us: p.max_us,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registrations spread evenly over the window, the first at once.
    #[test]
    fn starts_are_spread() {
        let w = Duration::from_secs(2);
        assert_eq!(start_offset(0, 4, w), Duration::ZERO);
        assert_eq!(start_offset(2, 4, w), Duration::from_secs(1));
        assert!(start_offset(3, 4, w) < w);
        assert_eq!(start_offset(0, 1, w), Duration::ZERO);
    }

    /// The broker figures count unfenced brokers and take percentiles of their times.
    #[test]
    fn figures_from_histogram() {
        let mut h = latency_histogram();
        for us in [1_000u64, 2_000, 3_000, 40_000] {
            h.record(us).unwrap();
        }
        let f = broker_figures(5, Duration::from_millis(250), &h);
        assert_eq!(
            (f.brokers, f.unfenced, f.heartbeat_interval_ms),
            (5, 4, 250)
        );
        assert!((1_999..=2_001).contains(&f.registration_to_unfenced_p50_us));
        assert!((39_900..=40_100).contains(&f.registration_to_unfenced_max_us));
    }
}
