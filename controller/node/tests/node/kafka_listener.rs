//! A node with a Kafka listener, driven by a Kafka client written here over the codec crate
//! (the real clients — kcat, librdkafka, kafka-python, kafkajs, Kafka's tools — run in the
//! compatibility suite, `compat/`): ApiVersions with the KIP-511 fallback, Metadata naming
//! this node as the controller once it registered, CreateTopics / DeleteTopics (by id) /
//! CreatePartitions, configs, DescribeCluster of controllers, DescribeQuorum, and a request
//! the listener does not serve closing only its own connection.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use corum_node::config::NodeConfig;
use corum_node::format::{format_dir, plan_format, BootstrapChoice};
use corum_node::node::{run_node, NodePlan, NodeReady};
use corum_runtime::{Placement, Runtime, RuntimeConfig};
use corum_types::Uuid;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

const CLUSTER: Uuid = Uuid([0x4b; 16]);

fn node_config(dir: &Path) -> NodeConfig {
    let sets: Vec<(String, String)> = [
        ("node.id", "1"),
        ("process.roles", "controller"),
        (
            "listeners",
            "CONTROLLER://127.0.0.1:0,CLIENT://127.0.0.1:0,KAFKA://127.0.0.1:0",
        ),
        ("controller.listener.names", "CONTROLLER"),
        ("controller.quorum.voters", "1@127.0.0.1:1"),
        ("metadata.log.dir", dir.to_str().unwrap()),
        ("metadata.log.segment.bytes", "8388608"),
        ("controller.quorum.election.timeout.ms", "300"),
        ("corum.raft.heartbeat.interval.ms", "50"),
        ("controller.quorum.fetch.timeout.ms", "600"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    NodeConfig::load(None, &sets).unwrap()
}

/// A blocking Kafka client on one connection.
struct Client {
    stream: TcpStream,
    next_id: i32,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client { stream, next_id: 1 }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let mut framed = BytesMut::new();
        framed.put_i32(bytes.len() as i32);
        framed.put_slice(bytes);
        self.stream.write_all(&framed).unwrap();
    }

    /// The next answer's bytes (after the size), or `None` when the server closed.
    fn receive_raw(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        if self.stream.read_exact(&mut size).is_err() {
            return None;
        }
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }

    fn request_bytes<T: Encodable>(&mut self, api: ApiKey, version: i16, body: &T) -> BytesMut {
        let mut buf = BytesMut::new();
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.next_id)
            .with_client_id(Some(StrBytes::from_static_str("corum-test")));
        self.next_id += 1;
        header
            .encode(&mut buf, api.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).unwrap();
        buf
    }

    fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        body: &Req,
    ) -> Resp {
        let bytes = self.request_bytes(api, version, body);
        let id = self.next_id - 1;
        self.send_raw(&bytes);
        let mut answer = self.receive_raw().expect("the server answers");
        let header =
            ResponseHeader::decode(&mut answer, api.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, id);
        Resp::decode(&mut answer, version).unwrap()
    }
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Registers broker 100 over the private protocol and heartbeats it caught up (the high
/// watermark DescribeQuorum shows) until it is unfenced.
fn register_broker(client_addr: SocketAddr) {
    use corum_controller::control::cluster_control::TargetState;
    use corum_node::{RequestBody, ResponseBody};
    use corum_protocol::{RpcConnection, RpcConnectionConfig};
    crate::common::on_executor(
        "kafka-test-broker",
        Duration::from_secs(60),
        move || async move {
            let c = RpcConnection::connect(client_addr, RpcConnectionConfig::default())
                .await
                .unwrap();
            let timeout = Duration::from_secs(10);
            let heartbeat = |epoch, offset| crate::common::heartbeat(100, epoch, offset);
            let Ok(ResponseBody::BrokerHeartbeat(reg)) = c
                .call(heartbeat(None, corum_types::LogOffset::ZERO), timeout)
                .await
            else {
                panic!("broker registration failed");
            };
            for _ in 0..100 {
                let Ok(ResponseBody::DescribeQuorum(q)) =
                    c.call(RequestBody::DescribeQuorum, timeout).await
                else {
                    panic!("DescribeQuorum failed");
                };
                let hb = c
                    .call(heartbeat(Some(reg.broker_epoch), q.high_watermark), timeout)
                    .await;
                if matches!(hb, Ok(ResponseBody::BrokerHeartbeat(ref r)) if r.target_state == TargetState::Active)
                {
                    return;
                }
                glommio::timer::sleep(Duration::from_millis(50)).await;
            }
            panic!("broker 100 never unfenced");
        },
    );
}

#[test]
fn kafka_clients_administer_a_node_through_its_kafka_listener() {
    let tmp = tempfile::tempdir().unwrap();
    let config = node_config(tmp.path());
    let plan = plan_format(
        &config,
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
    let plan = NodePlan::prepare(config, Some(CLUSTER)).unwrap();
    let runtime = Runtime::new(Placement::unpinned(2).unwrap(), RuntimeConfig::default()).unwrap();
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
    let (listener, addr) = ready.kafka_addrs[0].clone();
    assert_eq!(listener, "KAFKA");
    let mut c = Client::connect(addr);

    // ApiVersions: the served table, and KIP-511 for a version the server does not know.
    let v: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(v.error_code, 0);
    let metadata = v
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Metadata as i16)
        .unwrap();
    assert_eq!((metadata.min_version, metadata.max_version), (0, 13));
    assert!(!v
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16));
    let mut too_new = c.request_bytes(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    too_new[2..4].copy_from_slice(&9i16.to_be_bytes());
    c.send_raw(&too_new);
    let mut answer = c.receive_raw().unwrap();
    let _ = ResponseHeader::decode(&mut answer, 0).unwrap();
    let fallback = ApiVersionsResponse::decode(&mut answer, 0).unwrap();
    assert_eq!(fallback.error_code, 35);
    assert_eq!(fallback.api_keys.len(), 1);
    assert_eq!(fallback.api_keys[0].max_version, 4);

    // The single voter elects itself.
    until("the node leads", || {
        let q: DescribeQuorumResponse =
            c.call(ApiKey::DescribeQuorum, 2, &DescribeQuorumRequest::default());
        let p = &q.topics.first()?.partitions[0];
        (p.error_code == 0 && p.leader_id.0 == 1 && p.high_watermark > 0).then_some(())
    });
    // Metadata names this node as a reachable controller.
    let md: MetadataResponse = until("the node lists itself as the controller", || {
        let md: MetadataResponse = c.call(ApiKey::Metadata, 12, &MetadataRequest::default());
        (md.controller_id.0 == 1
            && md
                .brokers
                .iter()
                .any(|b| b.node_id.0 == 1 && b.port == i32::from(addr.port())))
        .then_some(md)
    });
    assert_eq!(md.cluster_id.as_deref(), Some(CLUSTER.to_string().as_str()));

    // CreateTopics: two topics, one named twice (refused), configs validated by the controller.
    let create = CreateTopicsRequest::default()
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(name("orders"))
                .with_num_partitions(3)
                .with_replication_factor(-1)
                .with_configs(vec![CreatableTopicConfig::default()
                    .with_name(text("retention.ms"))
                    .with_value(Some(text("3600000")))]),
            CreatableTopic::default()
                .with_name(name("twice"))
                .with_num_partitions(1)
                .with_replication_factor(-1),
            CreatableTopic::default()
                .with_name(name("twice"))
                .with_num_partitions(1)
                .with_replication_factor(-1),
        ])
        .with_timeout_ms(10_000);
    // No broker yet: nowhere to place replicas, with Kafka's code for it.
    let refused: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &create);
    assert_eq!(refused.topics[0].error_code, 38, "{refused:?}");
    register_broker(ready.client_addr);
    let created: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &create);
    let orders = &created.topics[0];
    assert_eq!(orders.name.0.as_str(), "orders");
    assert_eq!(created.topics[1].error_code, 42, "{created:?}");
    assert_eq!(created.topics[2].error_code, 42, "{created:?}");
    {
        assert_eq!(orders.error_code, 0, "{created:?}");
        assert_eq!(orders.num_partitions, 3);
        assert_eq!(orders.replication_factor, 1);
        // v5+ answers carry every topic key, its own setting and the inherited defaults.
        let configs = orders.configs.as_ref().expect("v7 carries configs");
        assert_eq!(
            configs.len(),
            corum_controller::config_schema::TOPIC_KEYS.len()
        );
        let key = |k: &str| configs.iter().find(|c| c.name.as_str() == k).unwrap();
        let retention = key("retention.ms");
        assert_eq!(retention.value.as_deref(), Some("3600000"));
        assert_eq!(retention.config_source, 1, "DYNAMIC_TOPIC_CONFIG");
        let policy = key("cleanup.policy");
        assert_eq!(policy.value.as_deref(), Some("delete"));
        assert_eq!(policy.config_source, 5, "DEFAULT_CONFIG");
        // validate_only answers the same way, with no topic id and nothing created; v4 (whose
        // answers have no configs field) is answered too.
        let dry = CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(name("dry"))
                .with_num_partitions(1)
                .with_replication_factor(-1)])
            .with_validate_only(true)
            .with_timeout_ms(10_000);
        let checked: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &dry);
        let topic = &checked.topics[0];
        assert_eq!(topic.error_code, 0, "{checked:?}");
        assert!(topic.topic_id.is_nil());
        assert_eq!(topic.configs.as_ref().map(Vec::len), Some(configs.len()));
        let checked: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 4, &dry);
        assert_eq!(checked.topics[0].error_code, 0, "{checked:?}");
        // Metadata lists it with its partitions; DeleteTopics by id removes it.
        let md: MetadataResponse = c.call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(name("orders"))),
            ])),
        );
        assert_eq!(md.topics[0].partitions.len(), 3);
        let deleted: DeleteTopicsResponse = c.call(
            ApiKey::DeleteTopics,
            6,
            &DeleteTopicsRequest::default()
                .with_topics(vec![DeleteTopicState::default()
                    .with_name(None)
                    .with_topic_id(orders.topic_id)])
                .with_timeout_ms(10_000),
        );
        assert_eq!(deleted.responses[0].error_code, 0, "{deleted:?}");
        assert_eq!(
            deleted.responses[0].name.as_ref().unwrap().0.as_str(),
            "orders"
        );
    }

    // An unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
    let md: MetadataResponse = c.call(
        ApiKey::Metadata,
        4,
        &MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(name("nope"))),
        ])),
    );
    assert_eq!(md.topics[0].error_code, 3);

    // Configs: set a cluster-wide broker default incrementally, read it back.
    let altered: IncrementalAlterConfigsResponse = c.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        &IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(text(""))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(text("log.retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(text("7200000")))]),
        ]),
    );
    assert_eq!(altered.responses[0].error_code, 0, "{altered:?}");
    let described: DescribeConfigsResponse = c.call(
        ApiKey::DescribeConfigs,
        4,
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(text(""))
            .with_configuration_keys(Some(vec![text("log.retention.ms")]))]),
    );
    let entry = &described.results[0].configs[0];
    assert_eq!(entry.name.as_str(), "log.retention.ms");
    assert_eq!(entry.value.as_deref(), Some("7200000"));
    // An unknown key is INVALID_CONFIG.
    let bad: IncrementalAlterConfigsResponse = c.call(
        ApiKey::IncrementalAlterConfigs,
        0,
        &IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(text(""))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(text("no.such.key"))
                    .with_config_operation(0)
                    .with_value(Some(text("1")))]),
        ]),
    );
    assert_eq!(bad.responses[0].error_code, 40, "{bad:?}");

    // DescribeCluster of controllers (KIP-919) and DescribeQuorum of the metadata log.
    let cluster: DescribeClusterResponse = c.call(
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default().with_endpoint_type(2),
    );
    assert_eq!(cluster.error_code, 0);
    assert_eq!(cluster.controller_id.0, 1);
    assert_eq!(cluster.brokers.len(), 1);
    let quorum: DescribeQuorumResponse =
        c.call(ApiKey::DescribeQuorum, 2, &DescribeQuorumRequest::default());
    let p = &quorum.topics[0].partitions[0];
    assert_eq!(quorum.topics[0].topic_name.0.as_str(), "__cluster_metadata");
    assert_eq!((p.error_code, p.leader_id.0), (0, 1));
    assert!(p.high_watermark > 0);
    assert_eq!(p.current_voters.len(), 1);

    // A request this listener does not serve closes that connection only.
    let mut other = Client::connect(addr);
    let mut produce = other.request_bytes(ApiKey::Metadata, 1, &MetadataRequest::default());
    produce[0..2].copy_from_slice(&(ApiKey::Produce as i16).to_be_bytes());
    other.send_raw(&produce);
    assert!(other.receive_raw().is_none(), "the connection is closed");
    let v: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    assert_eq!(v.error_code, 0);
    // A size above socket.request.max.bytes closes without reading the body.
    let mut huge = Client::connect(addr);
    huge.stream.write_all(&(i32::MAX).to_be_bytes()).unwrap();
    assert!(huge.receive_raw().is_none());

    shutdown.trigger();
    node.join().unwrap().unwrap();
}
