//! The `topics` workload: each client creates one new topic of `--partitions P` per request.
//! Placing replicas needs unfenced brokers, so `min(--brokers, 3)` simulated brokers register
//! first (not measured) and keep heartbeating through the run; the replication factor is their
//! count.

use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_controller::control::replication_control::{CreatableTopic, CreateTopicsRequest};

use corum_client::BrokerSession;

use super::brokers::{catch_up, heartbeat_until, preparation_timeout, register, start_follower};
use super::stats::{error_kind, Report};
use super::{kafka, run_clients, start_measuring, stop_measuring, Ctx, Protocol};

/// Brokers registered for the topics workload, at most.
pub const TOPIC_BROKERS_MAX: usize = 3;
const UNFENCE_POLL: Duration = Duration::from_millis(20);
const ERROR_PAUSE: Duration = Duration::from_millis(10);

/// The name of client `i`'s `seq`-th topic of run `nonce`.
pub fn topic_name(nonce: u64, i: usize, seq: u64) -> String {
    format!("loadgen-{nonce}-{i}-{seq}")
}

pub(crate) async fn run(ctx: &mut Ctx, report: &mut Report) -> anyhow::Result<Duration> {
    let partitions = ctx.config.partitions;
    report.partitions = Some(partitions);
    let (replication, sessions) = prepare_brokers(ctx).await?;
    let start = start_measuring(ctx).await?;
    let (end, nonce) = (ctx.end, ctx.nonce);
    // The brokers must stay unfenced while topics are created: heartbeat them well within
    // any session timeout.
    let beat = ctx
        .config
        .heartbeat_interval
        .min(Duration::from_millis(500));
    let heartbeats: Vec<glommio::Task<()>> = sessions
        .into_iter()
        .map(|s| glommio::spawn_local(heartbeat_until(s, beat, ctx.hard_end, None)))
        .collect();
    // Over Kafka's protocol, the clients share `--connections` connections to the active
    // controller's Kafka listener, as they share corum's client connections otherwise.
    let mut kafka_connections = Vec::new();
    if ctx.config.protocol == Protocol::Kafka {
        let deadline = Instant::now() + preparation_timeout(ctx);
        let controller = kafka::controller(ctx.config.kafka_bootstrap[0], deadline).await?;
        for _ in 0..ctx.config.connections {
            kafka_connections.push(Rc::new(kafka::KafkaConnection::connect(controller).await?));
        }
    }
    report.unfinished = run_clients(ctx.config.clients, ctx.hard_end, |i| {
        let client = ctx.client(i).clone();
        let rec = ctx.recorder.clone();
        let kafka = (!kafka_connections.is_empty())
            .then(|| kafka_connections[i % kafka_connections.len()].clone());
        async move {
            let mut seq = 0u64;
            while Instant::now() < end {
                seq += 1;
                let name = topic_name(nonce, i, seq);
                let partitions = i32::try_from(partitions).expect("validated");
                let sent = Instant::now();
                let outcome = match &kafka {
                    Some(c) => create_over_kafka(c, &name, partitions, replication).await,
                    None => create(&client, &name, partitions, replication).await,
                };
                match outcome {
                    Ok(()) => rec.ok(sent.elapsed()),
                    Err(kind) => {
                        rec.error(&kind);
                        glommio::timer::sleep(ERROR_PAUSE).await;
                    }
                }
            }
        }
    })
    .await;
    let elapsed = stop_measuring(ctx, start).await;
    drop(heartbeats);
    Ok(elapsed)
}

/// Registers `min(--brokers, 3)` simulated brokers and waits until each is unfenced (bounded
/// by the preparation timeout); returns their count, the replication factor topics can have,
/// and their sessions, to keep heartbeating.
pub(crate) async fn prepare_brokers(ctx: &Ctx) -> anyhow::Result<(i16, Vec<BrokerSession>)> {
    let n = ctx.config.brokers.min(TOPIC_BROKERS_MAX);
    let replication = i16::try_from(n).expect("at most 3 brokers");
    let follower = start_follower(ctx);
    let prepare_end = Instant::now() + preparation_timeout(ctx);
    catch_up(ctx.client(0), &follower, preparation_timeout(ctx)).await?;
    let mut sessions = Vec::new();
    for j in 0..n {
        let id = ctx.config.broker_id_base + j as u32;
        let mut s = register(
            ctx.client(j).clone(),
            id,
            j,
            &ctx.config.broker_listeners,
            ctx.nonce,
            follower.clone(),
        )
        .await
        .map_err(|e| anyhow::anyhow!("registering broker {id}: {e}"))?;
        let left = prepare_end.saturating_duration_since(Instant::now());
        s.run_until_unfenced(UNFENCE_POLL, left)
            .await
            .map_err(|e| anyhow::anyhow!("waiting for broker {id} to be unfenced: {e}"))?;
        sessions.push(s);
    }
    Ok((replication, sessions))
}

/// One topic over corum's protocol; the error's kind when it failed.
async fn create(
    client: &corum_client::ControllerClient,
    name: &str,
    partitions: i32,
    replication: i16,
) -> Result<(), String> {
    let req = CreateTopicsRequest {
        topics: vec![CreatableTopic::new(name, partitions, replication)],
        validate_only: false,
    };
    match client.create_topics(req).await {
        Ok(resp) => match resp.topics.first() {
            Some((_, Ok(_))) if resp.topics.len() == 1 => Ok(()),
            Some((_, Err(e))) => Err(error_kind(&e.to_string())),
            _ => Err("malformed CreateTopics answer".into()),
        },
        Err(e) => Err(error_kind(&e.to_string())),
    }
}

/// One topic over Kafka's protocol (CreateTopics v7, what Kafka's Java client sends); the
/// error's kind when it failed.
async fn create_over_kafka(
    c: &kafka::KafkaConnection,
    name: &str,
    partitions: i32,
    replication: i16,
) -> Result<(), String> {
    use kafka_protocol::messages::create_topics_request::CreatableTopic as KafkaTopic;
    use kafka_protocol::messages::{
        ApiKey, CreateTopicsRequest as KafkaCreate, CreateTopicsResponse, TopicName,
    };
    let req = KafkaCreate::default()
        .with_topics(vec![KafkaTopic::default()
            .with_name(TopicName(name.to_owned().into()))
            .with_num_partitions(partitions)
            .with_replication_factor(replication)])
        .with_timeout_ms(30_000);
    match c
        .call::<_, CreateTopicsResponse>(ApiKey::CreateTopics, 7, &req)
        .await
    {
        Ok(r) => match r.topics.first() {
            Some(t) if t.error_code == 0 => Ok(()),
            Some(t) => Err(format!("Kafka error {}", t.error_code)),
            None => Err("malformed CreateTopics answer".into()),
        },
        Err(e) => Err(error_kind(&e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Topic names are unique per run, client and sequence, and valid Kafka topic names.
    #[test]
    fn names_are_unique_and_valid() {
        let a = topic_name(5, 1, 12);
        assert_ne!(a, topic_name(5, 11, 2));
        assert_ne!(a, topic_name(6, 1, 12));
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_'));
        assert!(topic_name(8_999_999, 999_999, u64::MAX).len() <= 249);
    }
}
