//! The `history` workload: a recorded mix of writes and reads on a few keys, for the history
//! checker (`corum check-history`, [`corum_check`]).
//!
//! Each client draws its operations from a generator seeded by `--seed` and its index: config
//! sets (a value unique to the operation), deletes and reads of `log.retention.ms` on one of
//! `--keys` broker resources, and — with `--topics N` above 0 — creates, deletes and describes
//! of one of N topic names (1 partition over the registered brokers). Every operation is
//! written to `--history FILE` as one JSON line with its invoke and complete times (one
//! monotonic clock: nanoseconds since the workload started, or since the caller's
//! `HistoryConfig::origin`) and its outcome. When the load
//! ends, every key is read and every topic described once more, so that the checks see where
//! each ended.
//!
//! # Outcomes
//!
//! The clients do not retry a call that may have reached a server
//! ([`corum_client::ClientConfig::retry_after_sending`] off): a retried write could take effect
//! twice, which no register or topic history explains. So:
//!
//! | answer | outcome |
//! |---|---|
//! | the call's result (set, deleted, value read, created with its id, ...) | that result |
//! | the request's own refusal (a validation error, TopicAlreadyExists, UnknownTopicOrPartition, ...) | the result it means, or `failed` when it means no effect |
//! | `Timeout`, a lost connection after sending, `NotController` (`OutcomeUnknown`) | `unknown` for a write, `failed` for a read |
//! | no server reachable, the request not sent | `failed` |

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::Context;
use corum_check::history::{
    Op, OpRecord, Outcome, Record, Resource as CheckResource, ResourceType, RunInfo,
};
use corum_client::{ClientConfig, ClientError, ControllerClient};
use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsResource, AlterableConfig, ConfigSource,
    IncrementalAlterConfigsRequest,
};
use corum_controller::control::replication_control::{
    CreatableTopic, CreateTopicsRequest, DeleteTopicsRequest, DescribeTopicsRequest, TopicRef,
};
use corum_controller::image::ConfigResource;
use corum_controller::records::ConfigResourceType;
use corum_controller::ApiError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::stats::{error_kind, Report};
use super::topics::prepare_brokers;
use super::{
    brokers::heartbeat_until, run_clients, start_measuring, stop_measuring, Ctx, HistoryConfig,
};

/// The key of every config operation (a broker config of type Long).
const KEY: &str = "log.retention.ms";
/// Key `k` is on broker resource `RESOURCE_BASE + base + k`, where `base` is the run's
/// (`HistoryConfig::key_base`, else drawn from the run's nonce: a multiple of
/// [`crate::cmd::loadgen::HISTORY_NAMES_MAX`] below 100,000 of them): the keys of one run
/// start unset, as the checker assumes, whatever earlier runs wrote. The highest resource
/// is still a broker id (an int32).
const RESOURCE_BASE: u64 = 2_010_000_000;
/// Pause after an operation whose outcome is not a result, so a client without a leader does
/// not spin.
const ERROR_PAUSE: Duration = Duration::from_millis(10);

fn check_resource(base: u64, k: usize) -> CheckResource {
    CheckResource {
        resource_type: ResourceType::Broker,
        name: (RESOURCE_BASE + base + k as u64).to_string(),
    }
}

/// The key base of a run of nonce `nonce` that names none.
fn key_base_of(nonce: u64) -> u64 {
    nonce % 100_000 * super::HISTORY_NAMES_MAX as u64
}

/// Topic `t` of run `nonce`.
fn topic(nonce: u64, t: usize) -> String {
    format!("history-{nonce}-{t}")
}

/// The operations of one client: `(invoke, complete, op, outcome)` as recorded.
type Recorded = Rc<RefCell<Vec<OpRecord>>>;

/// What one operation asks, with what the generator drew.
fn draw(
    rng: &mut ChaCha8Rng,
    (base, keys): (u64, usize),
    topics: usize,
    nonce: u64,
    value: u64,
) -> Op {
    let roll = rng.gen_range(0..100);
    let k = rng.gen_range(0..keys);
    let topic_op = topics > 0 && roll >= 70;
    if topic_op {
        let topic = topic(nonce, rng.gen_range(0..topics));
        return match roll {
            70..=79 => Op::TopicCreate { topic },
            80..=86 => Op::TopicDelete { topic },
            _ => Op::TopicDescribe { topic },
        };
    }
    let resource = check_resource(base, k);
    let key = KEY.to_owned();
    match roll % 70 {
        0..=34 => Op::ConfigSet {
            resource,
            key,
            value: value.to_string(),
        },
        35..=41 => Op::ConfigDelete { resource, key },
        _ => Op::ConfigRead { resource, key },
    }
}

/// The corum resource of a check resource this workload made.
fn corum_resource(r: &CheckResource) -> ConfigResource {
    ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: r.name.clone(),
    }
}

/// The outcome of a call that did not give a result: unknown for a write that may have
/// reached a server (it may take effect), failed for a read (it has none) or a call never
/// sent (`LeaderNotFound` without retries after sending: no attempt reached a server).
fn no_result(op: &Op, e: &ClientError) -> Outcome {
    let may_apply = matches!(
        e,
        ClientError::OutcomeUnknown { .. }
            | ClientError::Rpc(corum_client::RpcError::Timeout { .. })
            | ClientError::Rpc(corum_client::RpcError::NotController { .. })
    );
    if may_apply && !op.is_read() {
        Outcome::Unknown
    } else {
        Outcome::Failed(error_kind(&e.to_string()))
    }
}

/// Runs `op` through `client`; its outcome.
async fn perform(client: &ControllerClient, op: &Op, replication: i16) -> Outcome {
    match op {
        Op::ConfigSet {
            resource, value, ..
        } => alter(client, op, resource, AlterConfigOp::Set, value).await,
        Op::ConfigDelete { resource, .. } => {
            alter(client, op, resource, AlterConfigOp::Delete, "").await
        }
        Op::ConfigRead { resource, .. } => {
            match client.describe_config(corum_resource(resource)).await {
                Ok(configs) => configs
                    .iter()
                    .find(|c| c.name == KEY && c.source == ConfigSource::DynamicBroker)
                    .and_then(|c| c.value.as_deref())
                    .map_or(Outcome::Absent, |v| Outcome::Value(v.to_owned())),
                Err(e) => no_result(op, &e),
            }
        }
        Op::TopicCreate { topic } => {
            let req = CreateTopicsRequest {
                topics: vec![CreatableTopic::new(topic, 1, replication)],
                validate_only: false,
            };
            match client.create_topics(req).await {
                Ok(r) => match r.topics.into_iter().next() {
                    Some((_, Ok(created))) => Outcome::Created(Some(created.topic_id.to_string())),
                    Some((_, Err(ApiError::TopicAlreadyExists { .. }))) => Outcome::AlreadyExists,
                    Some((_, Err(e))) => Outcome::Failed(error_kind(&e.to_string())),
                    None => Outcome::Unknown,
                },
                Err(e) => no_result(op, &e),
            }
        }
        Op::TopicDelete { topic } => {
            let req = DeleteTopicsRequest {
                names: vec![topic.clone()],
            };
            match client
                .call(corum_node::RequestBody::DeleteTopics(req))
                .await
            {
                Ok(corum_node::ResponseBody::DeleteTopics(r)) => {
                    match r.topics.into_iter().next() {
                        Some((_, Ok(_))) => Outcome::Ok,
                        Some((_, Err(ApiError::UnknownTopic { .. }))) => Outcome::UnknownTopic,
                        Some((_, Err(e))) => Outcome::Failed(error_kind(&e.to_string())),
                        None => Outcome::Unknown,
                    }
                }
                Ok(_) => Outcome::Unknown,
                Err(e) => no_result(op, &e),
            }
        }
        Op::TopicDescribe { topic } => {
            let req = DescribeTopicsRequest {
                topics: Some(vec![TopicRef::Name(topic.clone())]),
            };
            match client
                .call(corum_node::RequestBody::DescribeTopics(req))
                .await
            {
                Ok(corum_node::ResponseBody::DescribeTopics(r)) => {
                    match r.topics.into_iter().next() {
                        Some((_, Ok(t))) => Outcome::Exists(t.topic_id.to_string()),
                        Some((_, Err(ApiError::UnknownTopic { .. }))) => Outcome::Absent,
                        Some((_, Err(e))) => Outcome::Failed(error_kind(&e.to_string())),
                        None => Outcome::Failed("an answer without the topic".into()),
                    }
                }
                Ok(_) => Outcome::Failed("an answer of another kind".into()),
                Err(e) => no_result(op, &e),
            }
        }
    }
}

async fn alter(
    client: &ControllerClient,
    op: &Op,
    resource: &CheckResource,
    how: AlterConfigOp,
    value: &str,
) -> Outcome {
    let req = IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource: corum_resource(resource),
            configs: vec![AlterableConfig {
                key: KEY.into(),
                op: how,
                value: value.to_owned(),
            }],
        }],
        validate_only: false,
    };
    match client.alter_configs(req).await {
        Ok(r) => match r.resources.into_iter().next() {
            Some((_, Ok(()))) => Outcome::Ok,
            // Refused as a whole before any record: no effect.
            Some((_, Err(e))) => Outcome::Failed(error_kind(&e.to_string())),
            None => Outcome::Unknown,
        },
        Err(e) => no_result(op, &e),
    }
}

/// Runs `op` and records it with its times (nanoseconds since `origin`).
async fn record(
    client: &ControllerClient,
    origin: Instant,
    i: usize,
    op: Op,
    replication: i16,
    out: &Recorded,
) -> Outcome {
    let invoke_ns = origin.elapsed().as_nanos() as u64;
    let outcome = perform(client, &op, replication).await;
    let complete_ns = origin.elapsed().as_nanos() as u64;
    out.borrow_mut().push(OpRecord {
        client: i as u64,
        invoke_ns,
        complete_ns: Some(complete_ns),
        op,
        outcome: outcome.clone(),
    });
    outcome
}

fn is_result(o: &Outcome) -> bool {
    !matches!(o, Outcome::Unknown | Outcome::Failed(_))
}

pub(crate) async fn run(ctx: &mut Ctx, report: &mut Report) -> anyhow::Result<Duration> {
    let settings = ctx
        .config
        .history
        .clone()
        .context("the history workload needs --history FILE")?;
    let (keys, topics, seed) = (settings.keys, settings.topics, settings.seed);
    let base = settings.key_base.unwrap_or_else(|| key_base_of(ctx.nonce));
    let (replication, sessions) = if topics > 0 {
        prepare_brokers(ctx).await?
    } else {
        (0, Vec::new())
    };
    let origin = settings.origin.unwrap_or_else(Instant::now);
    let recorded: Recorded = Rc::default();
    let start = start_measuring(ctx).await?;
    let (end, nonce) = (ctx.end, ctx.nonce);
    let beat = ctx
        .config
        .heartbeat_interval
        .min(Duration::from_millis(500));
    let heartbeats: Vec<glommio::Task<()>> = sessions
        .into_iter()
        .map(|s| glommio::spawn_local(heartbeat_until(s, beat, ctx.hard_end, None)))
        .collect();
    // The recording clients send each call once (the others — the brokers' registrations and
    // heartbeats — retry as usual).
    let mut recording = Vec::with_capacity(ctx.config.connections);
    for _ in 0..ctx.config.connections {
        let config = ClientConfig {
            retry_after_sending: false,
            ..ctx.client(0).config().clone()
        };
        recording.push(
            ControllerClient::connect(config)
                .await
                .context("connecting the recording clients")?,
        );
    }
    report.unfinished = run_clients(ctx.config.clients, ctx.hard_end, |i| {
        let client = recording[i % recording.len()].clone();
        let rec = ctx.recorder.clone();
        let out = recorded.clone();
        async move {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9));
            let mut seq = 0u64;
            while Instant::now() < end {
                seq += 1;
                // Unique per operation: the client in the high digits.
                let value = (i as u64 + 1) * 1_000_000_000 + seq;
                let op = draw(&mut rng, (base, keys), topics, nonce, value);
                let sent = Instant::now();
                let outcome = record(&client, origin, i, op, replication, &out).await;
                if is_result(&outcome) {
                    rec.ok(sent.elapsed());
                } else {
                    let why = match &outcome {
                        Outcome::Failed(why) => why.clone(),
                        _ => "unknown outcome".into(),
                    };
                    rec.error(&why);
                    glommio::timer::sleep(ERROR_PAUSE).await;
                }
            }
        }
    })
    .await;
    let elapsed = stop_measuring(ctx, start).await;
    // Where every key and topic ended: read once more, until a result or the grace period.
    let final_end = Instant::now() + ctx.config.grace;
    let finals: Vec<Op> = (0..keys)
        .map(|k| Op::ConfigRead {
            resource: check_resource(base, k),
            key: KEY.to_owned(),
        })
        .chain((0..topics).map(|t| Op::TopicDescribe {
            topic: topic(nonce, t),
        }))
        .collect();
    let reader = recording[0].clone();
    for op in finals {
        loop {
            let o = record(
                &reader,
                origin,
                usize::MAX,
                op.clone(),
                replication,
                &recorded,
            )
            .await;
            if is_result(&o) || Instant::now() >= final_end {
                break;
            }
            glommio::timer::sleep(ERROR_PAUSE).await;
        }
    }
    drop(heartbeats);
    let ops = std::mem::take(&mut *recorded.borrow_mut());
    report.history_ops = Some(ops.len() as u64);
    write_history(&settings, ctx.config.clients, ops)?;
    Ok(elapsed)
}

/// Writes the run line and the operations, in completion order, to the history file.
fn write_history(
    settings: &HistoryConfig,
    clients: usize,
    mut ops: Vec<OpRecord>,
) -> anyhow::Result<()> {
    let (path, seed) = (settings.file.as_path(), settings.seed);
    ops.sort_by_key(|o| (o.complete_ns, o.invoke_ns));
    let file = std::fs::File::create(path)
        .with_context(|| format!("creating the history file {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let run = Record::Run(RunInfo {
        seed: Some(seed),
        replay: Some(format!(
            "corum loadgen --workload history --seed {seed} --clients {} --keys {} --topics {} \
             (a run against a live quorum is not replayed exactly: the seed fixes each \
             client's operations, not the timing)",
            clients, settings.keys, settings.topics
        )),
    });
    let lines = std::iter::once(run).chain(ops.into_iter().map(Record::Op));
    for r in lines {
        writeln!(w, "{}", r.to_json_line())
            .with_context(|| format!("writing the history file {}", path.display()))?;
    }
    w.flush()
        .with_context(|| format!("writing the history file {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generator is a function of the seed, draws every kind of operation, and only
    /// names the workload's own keys and topics.
    #[test]
    fn the_generator_is_seeded_and_draws_every_kind() {
        let ops = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..2_000)
                .map(|v| draw(&mut rng, (3_000, 4), 2, 7, v))
                .collect::<Vec<_>>()
        };
        assert_eq!(ops(1), ops(1));
        assert_ne!(ops(1), ops(2));
        let mut kinds: Vec<&str> = ops(1).iter().map(Op::kind_name).collect();
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), 6, "{kinds:?}");
        for op in ops(3) {
            match op {
                Op::ConfigSet { resource, .. }
                | Op::ConfigDelete { resource, .. }
                | Op::ConfigRead { resource, .. } => {
                    let n: u64 = resource.name.parse().unwrap();
                    assert!((RESOURCE_BASE + 3_000..RESOURCE_BASE + 3_004).contains(&n))
                }
                Op::TopicCreate { topic }
                | Op::TopicDelete { topic }
                | Op::TopicDescribe { topic } => {
                    assert!(topic == "history-7-0" || topic == "history-7-1", "{topic}")
                }
            }
        }
        // Without topics, only config operations.
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        assert!((0..500).all(|v| matches!(
            draw(&mut rng, (0, 1), 0, 7, v),
            Op::ConfigSet { .. } | Op::ConfigDelete { .. } | Op::ConfigRead { .. }
        )));
    }

    /// Every key of every run is a broker id (an int32), runs without a base of their own
    /// get different ones for different nonces.
    #[test]
    fn keys_are_broker_ids() {
        let top = RESOURCE_BASE + key_base_of(99_999) + super::super::HISTORY_NAMES_MAX as u64;
        assert!(top <= i32::MAX as u64, "{top}");
        assert_ne!(key_base_of(1), key_base_of(2));
    }

    /// A write that may have reached a server is unknown; a read that failed, or a call never
    /// sent, has no effect.
    #[test]
    fn outcomes_without_a_result() {
        let write = Op::ConfigSet {
            resource: check_resource(0, 0),
            key: KEY.into(),
            value: "1".into(),
        };
        let read = Op::ConfigRead {
            resource: check_resource(0, 0),
            key: KEY.into(),
        };
        let unknown = ClientError::OutcomeUnknown {
            request: "IncrementalAlterConfigs",
            reason: "connection lost".into(),
        };
        assert_eq!(no_result(&write, &unknown), Outcome::Unknown);
        assert!(matches!(no_result(&read, &unknown), Outcome::Failed(_)));
        let unsent = ClientError::NoServerReachable {
            tried: Vec::new(),
            waited_ms: 0,
            last: String::new(),
        };
        assert!(matches!(no_result(&write, &unsent), Outcome::Failed(_)));
    }
}
