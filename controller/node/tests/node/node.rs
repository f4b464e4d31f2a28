//! A whole node as `corum run` starts it ([`corum_node::node::run_node`]): a formatted
//! single-voter static quorum on two unpinned shards (worker + controller linked by a
//! cross-shard port), driven by an `RpcConnection` from another thread, stopped by the runtime's
//! shutdown.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsResource, AlterableConfig, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
};
use corum_controller::image::configs::ConfigResource;
use corum_controller::records::ConfigResourceType;
use corum_node::config::NodeConfig;
use corum_node::format::{format_dir, plan_format, BootstrapChoice};
use corum_node::node::{run_node, NodePlan, NodeReady};
use corum_node::{RequestBody, ResponseBody};
use corum_protocol::{RpcConnection, RpcConnectionConfig};
use corum_runtime::{Placement, Runtime, RuntimeConfig};
use corum_types::Uuid;

use crate::common::{heartbeat, on_executor};

const CLUSTER: Uuid = Uuid([0x5e; 16]);
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

fn node_config(dir: &Path, extra: &[(&str, &str)]) -> NodeConfig {
    let mut sets: Vec<(String, String)> = [
        ("node.id", "1"),
        ("process.roles", "controller"),
        ("listeners", "CONTROLLER://127.0.0.1:0,CLIENT://127.0.0.1:0"),
        ("controller.listener.names", "CONTROLLER"),
        ("controller.quorum.voters", "1@127.0.0.1:1"),
        ("metadata.log.dir", dir.to_str().unwrap()),
        ("metadata.log.segment.bytes", "8388608"),
        ("controller.quorum.election.timeout.ms", "300"),
        ("corum.raft.heartbeat.interval.ms", "50"),
        ("controller.quorum.fetch.timeout.ms", "600"),
        ("corum.metrics.listener", "127.0.0.1:0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    sets.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    NodeConfig::load(None, &sets).unwrap()
}

/// One HTTP GET of `path`, the whole response as text.
fn scrape(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The value of the sample line starting with `name ` in a scrape.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no sample {name} in {text}"))
        .parse()
        .unwrap()
}

fn format(config: &NodeConfig) {
    let plan = plan_format(
        config,
        CLUSTER,
        &BootstrapChoice::StaticFromConfig,
        Uuid([0x11; 16]),
    )
    .unwrap();
    futures_lite::future::block_on(format_dir(
        &corum_engine::disk::StdDisk::new(),
        &plan,
        false,
    ))
    .unwrap();
}

/// The broker config resource of broker `id` (it need not be registered).
fn broker(id: u32) -> ConfigResource {
    ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: id.to_string(),
    }
}

/// Sets `log.retention.ms` of broker `id` to `value`.
fn alter(id: u32, value: u64) -> RequestBody {
    RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource: broker(id),
            configs: vec![AlterableConfig {
                key: "log.retention.ms".into(),
                op: AlterConfigOp::Set,
                value: value.to_string(),
            }],
        }],
        validate_only: false,
    })
}

#[test]
fn a_node_on_two_shards_serves_clients_and_stops_cleanly() {
    // The controller service on its own shard answers through the bridge: 64 pipelined config
    // writes are all acknowledged and read back, a broker registers, an observer fetches the
    // log; shutdown stops both shards with no error; a restart recovers the log and serves
    // the same configs.
    let tmp = tempfile::tempdir().unwrap();
    let config = node_config(tmp.path(), &[]);
    format(&config);
    for round in 0..2 {
        let plan = NodePlan::prepare(config.clone(), Some(CLUSTER)).unwrap();
        let runtime =
            Runtime::new(Placement::unpinned(2).unwrap(), RuntimeConfig::default()).unwrap();
        let shutdown = runtime.shutdown_handle();
        let (ready_tx, ready_rx) = mpsc::channel::<NodeReady>();
        let node = std::thread::spawn(move || {
            run_node(
                plan,
                Placement::unpinned(2).unwrap(),
                runtime,
                Box::new(move |r| ready_tx.send(r).unwrap()),
            )
        });
        let ready = ready_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        let addr = ready.client_addr;
        on_executor(
            "node-test-client",
            Duration::from_secs(90),
            move || async move {
                let client = std::rc::Rc::new(
                    RpcConnection::connect(addr, RpcConnectionConfig::default())
                        .await
                        .unwrap(),
                );
                // Until the single voter elected itself and activated, answers are NotController.
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                loop {
                    let r = client
                        .call(RequestBody::DescribeCluster, CALL_TIMEOUT)
                        .await;
                    if matches!(r, Ok(ResponseBody::DescribeCluster(_))) {
                        break;
                    }
                    if std::time::Instant::now() >= deadline {
                        let q = client.call(RequestBody::DescribeQuorum, CALL_TIMEOUT).await;
                        panic!("never active: {r:?}; quorum: {q:?}");
                    }
                    glommio::timer::sleep(Duration::from_millis(20)).await;
                }
                if round == 0 {
                    let writes: Vec<_> = (0..64)
                        .map(|i| {
                            let c = client.clone();
                            glommio::spawn_local(async move {
                                c.call(alter(1000 + i, 60_000 + u64::from(i)), CALL_TIMEOUT)
                                    .await
                            })
                        })
                        .collect();
                    for w in writes {
                        let r = w.await;
                        assert!(
                            matches!(&r, Ok(ResponseBody::IncrementalAlterConfigs(a)) if a.resources.iter().all(|x| x.1.is_ok())),
                            "{r:?}"
                        );
                    }
                    let r = client
                        .call(
                            heartbeat(9, None, corum_types::LogOffset::ZERO),
                            CALL_TIMEOUT,
                        )
                        .await;
                    assert!(matches!(r, Ok(ResponseBody::BrokerHeartbeat(_))), "{r:?}");
                }
                let r = client
                    .call(
                        RequestBody::DescribeConfigs(DescribeConfigsRequest::all(
                            (0..64).map(|i| broker(1000 + i)),
                        )),
                        CALL_TIMEOUT,
                    )
                    .await
                    .unwrap();
                let text = format!("{r:?}");
                for i in 0..64 {
                    assert!(
                        text.contains(&format!("\"{}\"", 60_000 + i)),
                        "round {round}: {text}"
                    );
                }
            },
        );
        // The metrics endpoint shows the node leading, active, and its proposals (the service's
        // status reaches the worker shard every 500 ms: poll).
        let metrics_addr = ready.metrics_addr.expect("metrics listener configured");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let text = scrape(metrics_addr, "/metrics");
            assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
            // The call table's figures are the driver's (current); the service's come over the
            // port now and then: wait for both to count every answered write.
            let committed = sample(&text, "corum_controller_commit_latency_seconds_count");
            let proposed = sample(&text, "corum_controller_proposed_requests_total");
            if sample(&text, "corum_raft_is_leader") == 1.0
                && sample(&text, "corum_controller_active") == 1.0
                && (round == 1 || (committed >= 65.0 && proposed >= 65.0))
            {
                assert!(sample(&text, "corum_raft_high_watermark") > 0.0);
                // Every commit of a single voter waited for a group-commit round of its log.
                assert!(sample(&text, "corum_log_sync_duration_seconds_count") >= 1.0);
                if round == 0 {
                    // Every acknowledged write was answered by the driver as its batch
                    // committed, without waiting for the controller's replay.
                    assert!(
                        sample(&text, "corum_raft_answers_released_at_commit_total") >= 65.0,
                        "{text}"
                    );
                    assert_eq!(sample(&text, "corum_brokers{state=\"fenced\"}"), 1.0);
                }
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{text}");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(scrape(metrics_addr, "/other").starts_with("HTTP/1.1 404"));
        shutdown.trigger();
        node.join().unwrap().unwrap();
    }
}
