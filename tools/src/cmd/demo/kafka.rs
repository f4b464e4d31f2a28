//! `corum demo --kafka`: unmodified Apache Kafka brokers on a local corum quorum — brokers
//! registered and unfenced, a produce/consume round trip with Kafka's own tools, a broker
//! SIGKILLed and fenced, its leaders moved, the data read back without it, the broker back —
//! with one summary, and everything cleaned up.
//!
//! | step | what |
//! |------|------|
//! | 0 | Java 17+ and Kafka's jars found ([`install::KafkaInstall`]); when either is missing the demo stops before anything starts, saying how to get it |
//! | 1 | three `corum run` nodes (a static quorum, each with a `KAFKA` listener: the brokers' controller listener), `broker.session.timeout.ms` from `--broker-session-timeout-ms`; a leader |
//! | 2 | `--brokers` Kafka brokers (ids 4, 5, ...): `server.properties` pointing `controller.quorum.voters` at corum's Kafka listeners, log directories formatted with Kafka's `StorageTool` and corum's cluster id, one JVM each (heap capped at [`brokers::BROKER_HEAP`]); corum is asked every 50 ms ([`watch::Watch`]) until every broker is registered and unfenced, and each broker logs that it started |
//! | 3 | topic `corum-demo` created at the active controller (`--partitions`, replication factor min(3, brokers), `min.insync.replicas` 2 of 3, else 1); every partition led |
//! | 4 | Kafka's `ProducerPerformance` sends `--messages` numbers (acks=all, idempotent) through the brokers; Kafka's `ConsoleConsumer` (a consumer group) reads them back: every number exactly once ([`traffic`]) |
//! | 5 | the broker leading most of the topic's partitions is SIGKILLed; corum is watched until it fences the broker, moves every partition it led (the topic's and `__consumer_offsets`') and drops it from every ISR |
//! | 6 | a second consumer group reads every message again from the surviving brokers |
//! | 7 | unless `--no-restart`: the broker starts again and is watched until corum unfences it under a new broker epoch and it is back in every ISR |
//! | 8 | the summary on stdout (the figures of each step, corum's leader and epoch); SIGTERM to the brokers (controlled shutdown), then to the corum nodes; the directory removed unless `--keep` |
//!
//! Every wait has a deadline. On a failure the directory is kept (whatever `--keep` says) and
//! the error names it, with the end of the failing broker's log. Children die on every exit
//! path as in `corum demo` (the brokers and tools are started with
//! [`super::cluster::spawn_guarded`]).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use corum_client::{ClientConfig, ControllerClient, DescribeQuorumResponse};
use corum_controller::control::replication_control::{CreatableTopic, CreateTopicsRequest};
use corum_engine::disk::executor_builder;

pub mod brokers;
pub mod install;
pub mod traffic;
pub mod watch;

use super::cluster::{free_loopback_ports, LocalCluster};
use super::{describe, stop_cleanly, Args};
use brokers::{last_lines, BrokerSpec, KafkaBrokers};
use install::KafkaInstall;
use traffic::{check_consumed, parse_producer_figures, Consumed, ProducerFigures};
use watch::{View, Watch};

/// How the demo's lines on stderr start.
const WHO: &str = "corum demo --kafka";
/// Brokers when `--brokers` is not given.
pub const BROKERS_DEFAULT: usize = 3;
/// At least two: the kill step needs a broker to survive.
pub const BROKERS_MIN: usize = 2;
/// Each broker is a JVM of up to 384 MiB of heap.
pub const BROKERS_MAX: usize = 9;
/// The first broker's id (corum's nodes are 1 to 3).
const BROKER_ID_FIRST: u32 = 4;
/// The topic of the round trip.
pub const TOPIC: &str = "corum-demo";
/// The brokers' `broker.heartbeat.interval.ms` (and the corum nodes' own).
pub const HEARTBEAT_INTERVAL_MS: u64 = 1_000;
/// The largest `--messages`: the consumer's output is checked in memory.
pub const MESSAGES_MAX: u64 = 10_000_000;

/// Formatting every broker's log directory (one JVM each, all at once).
const FORMAT_TIMEOUT: Duration = Duration::from_secs(120);
/// From the brokers' JVMs starting to every broker unfenced and started (a JVM's start-up on
/// a busy 2-core host takes a good part of it).
const BROKERS_START_TIMEOUT: Duration = Duration::from_secs(180);
/// Creating the topic and seeing every partition led.
const TOPIC_TIMEOUT: Duration = Duration::from_secs(30);
/// After the session timeout, how late the fencing may still be seen.
const FENCE_SLACK: Duration = Duration::from_secs(15);
/// After the fencing, how long moving the leaders and shrinking the ISRs may take.
const AFTER_FENCE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long Kafka's producer or consumer may take: this plus 1 ms per message.
const TOOL_TIMEOUT_BASE: Duration = Duration::from_secs(90);
/// How long the consumer waits for a next message before it gives up (what it lacks then is
/// missing).
const CONSUMER_IDLE_TIMEOUT_MS: u64 = 30_000;
/// How long the brokers' controlled shutdown may take before they are SIGKILLed.
const BROKERS_STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a wait checks that the brokers it needs are still alive.
const LIVENESS_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// The kill step's figures, each from the SIGKILL.
#[derive(Clone, Debug, PartialEq)]
pub struct KillFigures {
    pub broker: u32,
    /// Partitions of every topic it led, and of the demo's topic.
    pub led: usize,
    pub led_in_topic: usize,
    pub fenced_after: Duration,
    pub leaders_moved_after: Duration,
    pub isr_shrunk_after: Duration,
    /// The surviving brokers, and what the second consumer group read from them.
    pub survivors: Vec<u32>,
    pub reread: Consumed,
    pub reread_took: Duration,
}

/// The restart step's figures, each from the JVM's start.
#[derive(Clone, Debug, PartialEq)]
pub struct RestartFigures {
    pub old_epoch: u64,
    pub new_epoch: u64,
    pub unfenced_after: Duration,
    /// Partitions it is a replica of, and when it was in every one of their ISRs.
    pub partitions: usize,
    pub in_sync_after: Duration,
}

/// Everything the summary shows.
#[derive(Clone, Debug, PartialEq)]
pub struct KafkaReport {
    pub cluster_id: String,
    pub kafka_version: String,
    pub java_version: String,
    pub brokers: Vec<u32>,
    /// From the brokers' JVMs starting to every broker unfenced (corum's view), and to every
    /// broker having logged that it started.
    pub unfenced_after: Duration,
    pub started_after: Duration,
    pub partitions: u32,
    pub replication_factor: u16,
    pub min_insync_replicas: u16,
    /// (broker, partitions of the topic it leads), after creation.
    pub leaders: Vec<(u32, usize)>,
    pub messages: u64,
    pub produce: ProducerFigures,
    pub produce_took: Duration,
    pub consumed: Consumed,
    pub consume_took: Duration,
    pub session_timeout_ms: u64,
    pub kill: KillFigures,
    pub restart: Option<RestartFigures>,
    pub first: DescribeQuorumResponse,
    pub last: DescribeQuorumResponse,
}

/// Checks the `--kafka` arguments; returns the number of brokers.
pub fn validate(args: &Args) -> anyhow::Result<usize> {
    let brokers = args.brokers.unwrap_or(BROKERS_DEFAULT);
    anyhow::ensure!(
        (BROKERS_MIN..=BROKERS_MAX).contains(&brokers),
        "--brokers with --kafka must be {BROKERS_MIN} to {BROKERS_MAX} (one is killed and the \
         rest must serve; each is a JVM of up to {} of heap)",
        brokers::BROKER_HEAP
    );
    anyhow::ensure!(
        (1..=MESSAGES_MAX).contains(&args.messages),
        "--messages must be 1 to {MESSAGES_MAX}"
    );
    anyhow::ensure!(
        (1..=1_000).contains(&args.partitions),
        "--partitions must be 1 to 1000"
    );
    anyhow::ensure!(
        args.broker_session_timeout_ms >= 2 * HEARTBEAT_INTERVAL_MS
            && args.broker_session_timeout_ms <= 600_000,
        "--broker-session-timeout-ms must be {} to 600000 (the brokers heartbeat every {HEARTBEAT_INTERVAL_MS} ms)",
        2 * HEARTBEAT_INTERVAL_MS
    );
    Ok(brokers)
}

pub fn demo(args: &Args, install: &KafkaInstall, exe: &Path, dir: &Path) -> anyhow::Result<()> {
    let broker_count = validate(args)?;
    eprintln!(
        "{WHO}: Kafka {} from {} on Java {} ({})",
        install.kafka_version,
        install.jars.display(),
        install.java_version,
        install.java.display()
    );
    if install.kafka_version != install::KAFKA_VERSION_TESTED {
        eprintln!(
            "{WHO}: corum is tested with Kafka {}; trying {} anyway",
            install::KAFKA_VERSION_TESTED,
            install.kafka_version
        );
    }

    // 1. The quorum.
    eprintln!("{WHO}: formatting 3 controllers in {}", dir.display());
    let session_ms = args.broker_session_timeout_ms;
    let mut spec = super::quorum_spec(exe, dir, WHO);
    spec.settings.extend([
        ("broker.session.timeout.ms".into(), session_ms.to_string()),
        (
            "broker.heartbeat.interval.ms".into(),
            HEARTBEAT_INTERVAL_MS.to_string(),
        ),
    ]);
    let mut cluster = LocalCluster::create(spec)?;
    cluster.start_all()?;
    let bootstrap: Vec<SocketAddr> = cluster.nodes.iter().map(|n| n.client).collect();
    let first = describe(&bootstrap, Duration::from_secs(20)).context("waiting for a leader")?;
    let kafka_listeners: Vec<String> = cluster.nodes.iter().map(|n| n.kafka.to_string()).collect();
    eprintln!(
        "{WHO}: corum node {} leads (epoch {}); Kafka listeners {}",
        first.node_id,
        first.leader_epoch.0,
        kafka_listeners.join(",")
    );
    let watch = Watch::start(bootstrap.clone())?;

    // 2. The brokers.
    let ids: Vec<u32> = (BROKER_ID_FIRST..).take(broker_count).collect();
    let ports = free_loopback_ports(broker_count)?;
    let rf = broker_count.min(3) as u16;
    let voters: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| format!("{}@{}", n.id, n.kafka))
        .collect();
    let mut brokers = KafkaBrokers::create(
        BrokerSpec {
            install: install.clone(),
            dir: dir.join("kafka"),
            cluster_id: cluster.cluster_id.clone(),
            quorum_voters: voters.join(","),
            controller_listener: "KAFKA".into(),
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
            session_timeout_ms: session_ms,
            replication_factor: rf,
        },
        &ids,
        &ports,
    )?;
    let min_isr = brokers.spec.min_insync_replicas();
    eprintln!("{WHO}: formatting brokers {ids:?} with Kafka's StorageTool");
    brokers.format_all(FORMAT_TIMEOUT)?;
    eprintln!(
        "{WHO}: starting brokers {ids:?} (heap {} each) on {}",
        brokers::BROKER_HEAP,
        brokers.bootstrap()
    );
    let launched = Instant::now();
    for &id in &ids {
        brokers.start(id)?;
    }
    let all_unfenced = |v: &View| ids.iter().all(|&id| v.unfenced(id));
    let v = await_view(
        &watch,
        &mut brokers,
        &ids,
        "every broker registered and unfenced",
        launched,
        BROKERS_START_TIMEOUT,
        all_unfenced,
    )?;
    let unfenced_after = v.at - launched;
    eprintln!(
        "{WHO}: brokers {ids:?} registered and unfenced after {:.1} s",
        unfenced_after.as_secs_f64()
    );
    await_started(&mut brokers, &ids, launched + BROKERS_START_TIMEOUT)?;
    let started_after = launched.elapsed();

    // 3. The topic.
    create_topic(&bootstrap, args.partitions, rf, min_isr)?;
    let partitions = args.partitions;
    let v = await_view(
        &watch,
        &mut brokers,
        &ids,
        "every partition of the topic led",
        Instant::now(),
        TOPIC_TIMEOUT,
        |v| {
            v.topic(TOPIC).count() == partitions as usize
                && v.topic(TOPIC).all(|p| p.leader.is_some())
        },
    )?;
    let leaders: Vec<(u32, usize)> = ids.iter().map(|&id| (id, v.led_by_in(id, TOPIC))).collect();
    eprintln!(
        "{WHO}: topic {TOPIC} created ({partitions} partitions, replication factor {rf}); leaders {}",
        leaders_text(&leaders)
    );

    // 4. The round trip.
    let messages = args.messages;
    let tool_timeout = TOOL_TIMEOUT_BASE + Duration::from_millis(messages);
    let (produce, produce_took) = produce_numbers(&brokers, messages, tool_timeout)?;
    let (consumed, consume_took) = consume(&brokers, "consumer", &ids, messages, tool_timeout)?;
    eprintln!(
        "{WHO}: all {messages} read back by a consumer group ({:.1} s)",
        consume_took.as_secs_f64()
    );

    // 5 and 6. A broker SIGKILLed, and the data without it.
    let (kill, old_epoch) = kill_one(
        &watch,
        &mut brokers,
        &ids,
        session_ms,
        messages,
        tool_timeout,
    )?;

    // 7. The broker back.
    let restart = if args.no_restart {
        None
    } else {
        Some(restart_broker(
            &watch,
            &mut brokers,
            &ids,
            kill.broker,
            old_epoch,
        )?)
    };

    // 8. The summary, then everything stopped.
    let last = describe(&bootstrap, Duration::from_secs(10)).context("describing the quorum")?;
    drop(watch);
    let report = KafkaReport {
        cluster_id: cluster.cluster_id.clone(),
        kafka_version: install.kafka_version.clone(),
        java_version: install.java_version.clone(),
        brokers: ids,
        unfenced_after,
        started_after,
        partitions,
        replication_factor: rf,
        min_insync_replicas: min_isr,
        leaders,
        messages,
        produce,
        produce_took,
        consumed,
        consume_took,
        session_timeout_ms: session_ms,
        kill,
        restart,
        first,
        last,
    };
    print!("{}", render_kafka_summary(&report));
    eprintln!("{WHO}: stopping the brokers (SIGTERM: controlled shutdown)");
    let mut failures = Vec::new();
    for (id, outcome) in brokers.terminate_all(BROKERS_STOP_TIMEOUT) {
        match outcome {
            // Kafka exits 143 (128 + SIGTERM) after its orderly shutdown.
            Ok(status) if status.success() || status.code() == Some(143) => {}
            Ok(status) => failures.push(format!("broker {id} exited with {status}")),
            Err(e) => failures.push(format!("{e:#}")),
        }
    }
    eprintln!("{WHO}: stopping the corum nodes (SIGTERM)");
    let nodes = stop_cleanly(&mut cluster, 0, WHO);
    anyhow::ensure!(failures.is_empty(), "{}", failures.join("; "));
    nodes
}

/// Sends `messages` numbers with Kafka's `ProducerPerformance` (acks=all, idempotent)
/// through every broker; its figures and how long it ran.
fn produce_numbers(
    brokers: &KafkaBrokers,
    messages: u64,
    timeout: Duration,
) -> anyhow::Result<(ProducerFigures, Duration)> {
    eprintln!("{WHO}: producing {messages} messages (Kafka's ProducerPerformance, acks=all)");
    let run = brokers.run_tool(
        "producer",
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic".into(),
            TOPIC.into(),
            "--num-records".into(),
            messages.to_string(),
            "--throughput".into(),
            "-1".into(),
            "--payload-monotonic".into(),
            "--producer-props".into(),
            format!("bootstrap.servers={}", brokers.bootstrap()),
            "acks=all".into(),
            "enable.idempotence=true".into(),
            "client.id=corum-demo-producer".into(),
        ],
        timeout,
    )?;
    let out = std::fs::read_to_string(&run.stdout).unwrap_or_default();
    let figures = match parse_producer_figures(&out) {
        Some(f) if run.status.success() && f.records == messages => f,
        _ => anyhow::bail!(
            "Kafka's ProducerPerformance failed ({}); its output ({}) ends:\n{}\nits stderr ends:\n{}",
            run.status,
            run.stdout.display(),
            last_lines(&out, 5),
            last_lines(&run.stderr, 10)
        ),
    };
    eprintln!(
        "{WHO}: {} messages acknowledged, {:.0} msg/s",
        figures.records, figures.records_per_sec
    );
    Ok((figures, run.took))
}

/// SIGKILLs the broker leading most of the topic's partitions (the highest id of a tie),
/// waits for corum to fence it, move its leaders and drop it from every ISR, then reads every
/// message again from the others. Returns the figures and the killed broker's epoch.
fn kill_one(
    watch: &Watch,
    brokers: &mut KafkaBrokers,
    ids: &[u32],
    session_ms: u64,
    messages: u64,
    tool_timeout: Duration,
) -> anyhow::Result<(KillFigures, u64)> {
    let v = watch.latest().context("corum's view is gone")?;
    let victim = ids
        .iter()
        .copied()
        .max_by_key(|&id| (v.led_by_in(id, TOPIC), id))
        .expect("at least two brokers");
    let (led, led_in_topic) = (v.led_by(victim), v.led_by_in(victim, TOPIC));
    let old_epoch = v.epoch(victim).context("the killed broker's epoch")?;
    let survivors: Vec<u32> = ids.iter().copied().filter(|&id| id != victim).collect();
    eprintln!(
        "{WHO}: SIGKILL to broker {victim} (it leads {led_in_topic} of the topic's partitions, {led} in all)"
    );
    let killed = Instant::now();
    brokers.kill(victim);
    let v = await_view(
        watch,
        brokers,
        &survivors,
        &format!("corum to fence broker {victim}"),
        killed,
        Duration::from_millis(session_ms) + FENCE_SLACK,
        |v| v.fenced(victim),
    )?;
    let fenced_after = v.at - killed;
    eprintln!(
        "{WHO}: corum fenced broker {victim} {:.1} s after the kill (broker.session.timeout.ms {session_ms})",
        fenced_after.as_secs_f64()
    );
    let v = await_view(
        watch,
        brokers,
        &survivors,
        &format!("the partitions broker {victim} led to have other leaders"),
        killed,
        fenced_after + AFTER_FENCE_TIMEOUT,
        |v| v.led_by(victim) == 0,
    )?;
    let leaders_moved_after = v.at - killed;
    let v = await_view(
        watch,
        brokers,
        &survivors,
        &format!("broker {victim} out of every ISR"),
        killed,
        fenced_after + AFTER_FENCE_TIMEOUT,
        |v| v.in_isr(victim) == 0,
    )?;
    let isr_shrunk_after = v.at - killed;
    let (reread, reread_took) = consume(brokers, "reread", &survivors, messages, tool_timeout)?;
    eprintln!("{WHO}: all {messages} read again from brokers {survivors:?}");
    let figures = KillFigures {
        broker: victim,
        led,
        led_in_topic,
        fenced_after,
        leaders_moved_after,
        isr_shrunk_after,
        survivors,
        reread,
        reread_took,
    };
    Ok((figures, old_epoch))
}

/// Starts the killed broker again and waits until corum unfences it under a new broker epoch
/// and it is back in the ISR of every partition it is a replica of.
fn restart_broker(
    watch: &Watch,
    brokers: &mut KafkaBrokers,
    ids: &[u32],
    victim: u32,
    old_epoch: u64,
) -> anyhow::Result<RestartFigures> {
    eprintln!("{WHO}: restarting broker {victim}");
    let restarted = Instant::now();
    brokers.start(victim)?;
    let v = await_view(
        watch,
        brokers,
        ids,
        &format!("broker {victim} registered again and unfenced"),
        restarted,
        BROKERS_START_TIMEOUT,
        |v| v.unfenced(victim) && v.epoch(victim) != Some(old_epoch),
    )?;
    let unfenced_after = v.at - restarted;
    let new_epoch = v.epoch(victim).expect("an unfenced broker is registered");
    let v = await_view(
        watch,
        brokers,
        ids,
        &format!("broker {victim} back in every ISR"),
        restarted,
        BROKERS_START_TIMEOUT,
        |v| v.in_isr(victim) == v.replica_of(victim),
    )?;
    let in_sync_after = v.at - restarted;
    eprintln!(
        "{WHO}: broker {victim} unfenced after {:.1} s, in every ISR after {:.1} s",
        unfenced_after.as_secs_f64(),
        in_sync_after.as_secs_f64()
    );
    Ok(RestartFigures {
        old_epoch,
        new_epoch,
        unfenced_after,
        partitions: v.replica_of(victim),
        in_sync_after,
    })
}

/// Waits until corum's view (received at or after `after`) satisfies `cond`, for at most
/// `timeout`; meanwhile checks that the brokers in `alive` still run (one that exited fails
/// the wait at once, with the end of its log). A wait that runs out quotes the log of every
/// broker in `alive` that corum does not show unfenced.
fn await_view(
    watch: &Watch,
    brokers: &mut KafkaBrokers,
    alive: &[u32],
    what: &str,
    after: Instant,
    timeout: Duration,
    cond: impl Fn(&View) -> bool,
) -> anyhow::Result<View> {
    let deadline = Instant::now() + timeout;
    loop {
        let slice = (Instant::now() + LIVENESS_CHECK_INTERVAL).min(deadline);
        if let Some(v) = watch.wait_for(after, slice, &cond) {
            return Ok(v);
        }
        for &id in alive {
            brokers
                .check_alive(id)
                .with_context(|| format!("waiting for {what}"))?;
        }
        if Instant::now() >= deadline {
            let last = watch.latest();
            let mut text = format!(
                "{what}: not within {:.0} s; corum's view: {}",
                timeout.as_secs_f64(),
                watch.state_line()
            );
            for &id in alive {
                if !last.as_ref().is_some_and(|v| v.unfenced(id)) {
                    let _ = write!(
                        text,
                        "\nbroker {id} is not unfenced; {}",
                        brokers.log_tail(id)
                    );
                }
            }
            anyhow::bail!(text);
        }
    }
}

/// Waits until every broker of `ids` has logged that it started (its listeners accept), or
/// `deadline`.
fn await_started(brokers: &mut KafkaBrokers, ids: &[u32], deadline: Instant) -> anyhow::Result<()> {
    loop {
        let mut waiting = Vec::new();
        for &id in ids {
            brokers.check_alive(id)?;
            if !brokers.started(id) {
                waiting.push(id);
            }
        }
        let Some(&id) = waiting.first() else {
            return Ok(());
        };
        anyhow::ensure!(
            Instant::now() < deadline,
            "broker {id} is unfenced but did not log {:?} in time; {}",
            brokers::STARTED_LINE,
            brokers.log_tail(id)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Creates the demo's topic at the active controller (corum's own CreateTopics, what `corum
/// topics create` sends).
fn create_topic(
    bootstrap: &[SocketAddr],
    partitions: u32,
    replication_factor: u16,
    min_insync_replicas: u16,
) -> anyhow::Result<()> {
    let config = ClientConfig {
        request_timeout: Duration::from_secs(5),
        retry_deadline: TOPIC_TIMEOUT,
        ..ClientConfig::new(bootstrap.to_vec())
    };
    let topic = CreatableTopic {
        configs: vec![(
            "min.insync.replicas".into(),
            min_insync_replicas.to_string(),
        )],
        ..CreatableTopic::new(
            TOPIC,
            i32::try_from(partitions).expect("validated: at most 1000"),
            i16::try_from(replication_factor).expect("at most 3"),
        )
    };
    let answer = executor_builder("corum-demo")
        .spawn(move || async move {
            let client = ControllerClient::connect(config).await?;
            client
                .create_topics(CreateTopicsRequest {
                    topics: vec![topic],
                    validate_only: false,
                })
                .await
        })
        .map_err(|e| anyhow::anyhow!("starting the glommio executor: {e}"))?
        .join()
        .map_err(|e| anyhow::anyhow!("the CreateTopics executor failed: {e}"))?
        .with_context(|| format!("creating topic {TOPIC}"))?;
    match answer.topics.into_iter().next() {
        Some((_, Ok(_))) => Ok(()),
        Some((_, Err(e))) => anyhow::bail!("creating topic {TOPIC}: {e}"),
        None => anyhow::bail!("creating topic {TOPIC}: an answer without the topic"),
    }
}

/// Reads the topic from the beginning with Kafka's `ConsoleConsumer` in a new consumer group
/// (`corum-demo-NAME`) through the brokers `from`, until it has `messages` of them; checks
/// that every number was read exactly once.
fn consume(
    brokers: &KafkaBrokers,
    name: &str,
    from: &[u32],
    messages: u64,
    timeout: Duration,
) -> anyhow::Result<(Consumed, Duration)> {
    let run = brokers.run_tool(
        name,
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--bootstrap-server".into(),
            brokers.bootstrap_of(from),
            "--topic".into(),
            TOPIC.into(),
            "--group".into(),
            format!("corum-demo-{name}"),
            "--from-beginning".into(),
            "--max-messages".into(),
            messages.to_string(),
            "--timeout-ms".into(),
            CONSUMER_IDLE_TIMEOUT_MS.to_string(),
        ],
        timeout,
    )?;
    let text = std::fs::read_to_string(&run.stdout)
        .with_context(|| format!("reading {}", run.stdout.display()))?;
    let c = check_consumed(&text, messages);
    anyhow::ensure!(
        c.exact(messages),
        "the consumer ({name}, through brokers {from:?}) read {} messages: {} of the {messages} \
         numbers produced, {} missing (first: {}), {} read twice, {} not produced ({}; its output: \
         {}); its stderr ends:\n{}",
        c.messages,
        c.unique,
        c.missing(messages),
        c.first_missing.map_or("-".into(), |n| n.to_string()),
        c.duplicates,
        c.foreign,
        run.status,
        run.stdout.display(),
        last_lines(&run.stderr, 10)
    );
    Ok((c, run.took))
}

fn leaders_text(leaders: &[(u32, usize)]) -> String {
    leaders
        .iter()
        .map(|(id, n)| format!("broker {id}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The summary: the cluster, then one line per step with its figures.
pub fn render_kafka_summary(r: &KafkaReport) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "\ncorum demo --kafka summary (cluster {})", r.cluster_id);
    let _ = writeln!(
        w,
        "  quorum: 3 corum controllers; leader node {} at epoch {} (first leader: node {} at epoch {}); high watermark {}",
        r.last.node_id,
        r.last.leader_epoch.0,
        r.first.node_id,
        r.first.leader_epoch.0,
        r.last.high_watermark.0
    );
    let ids: Vec<String> = r.brokers.iter().map(u32::to_string).collect();
    let _ = writeln!(
        w,
        "  brokers: {} Apache Kafka {} brokers ({}) on Java {}: registered and unfenced by corum {} after their JVMs started, serving after {}",
        r.brokers.len(),
        r.kafka_version,
        ids.join(", "),
        r.java_version,
        secs(r.unfenced_after),
        secs(r.started_after)
    );
    let _ = writeln!(
        w,
        "  topic {TOPIC}: {} partitions, replication factor {}, min.insync.replicas {}; leaders {}",
        r.partitions,
        r.replication_factor,
        r.min_insync_replicas,
        leaders_text(&r.leaders)
    );
    let p = &r.produce;
    let _ = writeln!(
        w,
        "  produce: {} messages acknowledged (acks=all, idempotent): {:.0} msg/s, latency avg {:.0} ms, p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms ({} with the JVM's start)",
        p.records,
        p.records_per_sec,
        p.avg_latency_ms,
        p.p50_ms,
        p.p99_ms,
        p.max_latency_ms,
        secs(r.produce_took)
    );
    let _ = writeln!(
        w,
        "  consume: {} of {} read back by a consumer group, each exactly once, in {}: {:.0} msg/s (the JVM's start and the group's join included)",
        r.consumed.unique,
        r.messages,
        secs(r.consume_took),
        r.consumed.unique as f64 / r.consume_took.as_secs_f64().max(1e-3)
    );
    let k = &r.kill;
    let _ = writeln!(
        w,
        "  kill: broker {} SIGKILLed (it led {} of the topic's partitions, {} in all): fenced by corum after {} (broker.session.timeout.ms {}, heartbeats every {} ms); its leaders moved after {}; out of every ISR after {}",
        k.broker,
        k.led_in_topic,
        k.led,
        secs(k.fenced_after),
        r.session_timeout_ms,
        HEARTBEAT_INTERVAL_MS,
        secs(k.leaders_moved_after),
        secs(k.isr_shrunk_after)
    );
    let survivors: Vec<String> = k.survivors.iter().map(u32::to_string).collect();
    let _ = writeln!(
        w,
        "  without broker {}: {} of {} read again from brokers {}, each exactly once, in {}",
        k.broker,
        k.reread.unique,
        r.messages,
        survivors.join(", "),
        secs(k.reread_took)
    );
    match &r.restart {
        Some(s) => {
            let _ = writeln!(
                w,
                "  restart: broker {} unfenced by corum after {} (broker epoch {} -> {}); back in the ISR of all {} of its partitions after {}",
                k.broker,
                secs(s.unfenced_after),
                s.old_epoch,
                s.new_epoch,
                s.partitions,
                secs(s.in_sync_after)
            );
        }
        None => {
            let _ = writeln!(w, "  restart: skipped (--no-restart)");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_types::{Epoch, LogOffset, NodeId, Uuid};

    fn quorum(leader: u32, epoch: u64) -> DescribeQuorumResponse {
        DescribeQuorumResponse {
            cluster_id: Uuid([1; 16]),
            node_id: NodeId(leader),
            leader_id: Some(NodeId(leader)),
            leader_epoch: Epoch(epoch),
            high_watermark: LogOffset(1234),
            voters: vec![],
            observers: vec![],
        }
    }

    fn report(restart: bool) -> KafkaReport {
        let consumed = Consumed {
            messages: 1000,
            unique: 1000,
            ..Consumed::default()
        };
        KafkaReport {
            cluster_id: "abc".into(),
            kafka_version: "4.1.2".into(),
            java_version: "17.0.15".into(),
            brokers: vec![4, 5, 6],
            unfenced_after: Duration::from_millis(12_340),
            started_after: Duration::from_millis(13_000),
            partitions: 3,
            replication_factor: 3,
            min_insync_replicas: 2,
            leaders: vec![(4, 1), (5, 1), (6, 1)],
            messages: 1000,
            produce: ProducerFigures {
                records: 1000,
                records_per_sec: 4321.5,
                avg_latency_ms: 20.0,
                max_latency_ms: 90.0,
                p50_ms: 15.0,
                p99_ms: 80.0,
            },
            produce_took: Duration::from_secs(3),
            consumed: consumed.clone(),
            consume_took: Duration::from_secs(5),
            session_timeout_ms: 6000,
            kill: KillFigures {
                broker: 6,
                led: 5,
                led_in_topic: 1,
                fenced_after: Duration::from_millis(5_450),
                leaders_moved_after: Duration::from_millis(5_460),
                isr_shrunk_after: Duration::from_millis(5_470),
                survivors: vec![4, 5],
                reread: consumed,
                reread_took: Duration::from_secs(4),
            },
            restart: restart.then_some(RestartFigures {
                old_epoch: 10,
                new_epoch: 42,
                unfenced_after: Duration::from_millis(9_000),
                partitions: 5,
                in_sync_after: Duration::from_millis(11_000),
            }),
            first: quorum(1, 2),
            last: quorum(2, 3),
        }
    }

    /// The summary names the quorum's leader, the brokers and how fast they were unfenced,
    /// the round trip's figures, the kill's timings against the session timeout, the re-read
    /// and the restart.
    #[test]
    fn summary_has_every_step() {
        let s = render_kafka_summary(&report(true));
        for needle in [
            "corum demo --kafka summary (cluster abc)",
            "leader node 2 at epoch 3 (first leader: node 1 at epoch 2)",
            "3 Apache Kafka 4.1.2 brokers (4, 5, 6) on Java 17.0.15: registered and unfenced by corum 12.3 s",
            "replication factor 3, min.insync.replicas 2; leaders broker 4: 1, broker 5: 1, broker 6: 1",
            "1000 messages acknowledged (acks=all, idempotent): 4322 msg/s",
            "p50 15 ms, p99 80 ms, max 90 ms",
            "consume: 1000 of 1000 read back by a consumer group, each exactly once, in 5.0 s: 200 msg/s",
            "broker 6 SIGKILLed (it led 1 of the topic's partitions, 5 in all): fenced by corum after 5.5 s (broker.session.timeout.ms 6000",
            "its leaders moved after 5.5 s; out of every ISR after 5.5 s",
            "without broker 6: 1000 of 1000 read again from brokers 4, 5",
            "broker 6 unfenced by corum after 9.0 s (broker epoch 10 -> 42); back in the ISR of all 5 of its partitions after 11.0 s",
        ] {
            assert!(s.contains(needle), "{needle:?} missing:\n{s}");
        }
        let skipped = render_kafka_summary(&report(false));
        assert!(
            skipped.contains("restart: skipped (--no-restart)"),
            "{skipped}"
        );
    }
}
