//! DescribeCluster (KIP-919 endpoint types) and DescribeQuorum (the metadata log's one
//! partition, as `kafka-metadata-quorum describe --status/--replication` shows it).

use corum_protocol::{DescribeQuorumResponse as CorumQuorum, LocalRead, RequestBody, ResponseBody};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, DescribeQuorumResponse, TopicName,
};

use super::nodes::{self, NodeEndpoint};
use super::{kafka_uuid, text};
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::service::{call, read};

/// The metadata log's name, as Kafka names it.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// Kafka's endpoint types (KIP-919).
const ENDPOINT_BROKER: i8 = 1;
const ENDPOINT_CONTROLLER: i8 = 2;

/// "Authorized operations were not asked for" (Kafka's sentinel).
pub const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

fn described(n: &NodeEndpoint) -> DescribeClusterBroker {
    DescribeClusterBroker::default()
        .with_broker_id(BrokerId(n.id))
        .with_host(text(&n.host))
        .with_port(n.port)
        .with_rack(n.rack.as_deref().map(text))
        .with_is_fenced(n.fenced)
}

/// DescribeCluster: brokers (with the controllers, which clients must reach) or, for endpoint
/// type 2, the controllers alone.
pub async fn describe_cluster<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default()
        .with_cluster_id(text(&ctx.cluster_id_text()))
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED);
    let controllers = nodes::controllers(ctx, backend).await;
    response.controller_id = BrokerId(nodes::controller_id(ctx, backend, &controllers));
    match request.endpoint_type {
        ENDPOINT_CONTROLLER => {
            response.brokers = controllers.iter().map(described).collect();
        }
        ENDPOINT_BROKER => {
            let brokers = call(
                backend,
                read(LocalRead::DescribeCluster),
                ctx.default_timeout_ms,
                |r| match r {
                    ResponseBody::DescribeCluster(r) => Some(r.brokers),
                    _ => None,
                },
            )
            .await;
            match brokers {
                Ok(brokers) => {
                    let listed = brokers
                        .iter()
                        .filter(|b| request.include_fenced_brokers || !b.fenced)
                        .filter_map(|b| nodes::broker(ctx, b))
                        .collect();
                    response.brokers = nodes::merged(listed, &controllers)
                        .iter()
                        .map(described)
                        .collect();
                }
                Err(e) => {
                    let e = KafkaError::rpc(&e);
                    response.error_code = e.code;
                    response.error_message = e.message.as_deref().map(text);
                }
            }
        }
        other => {
            response.error_code = ResponseError::UnsupportedEndpointType.code();
            response.error_message = Some(text(&format!("unknown endpoint type {other}")));
        }
    }
    response
}

/// The first DescribeQuorum version with directory ids and the nodes' listeners (KIP-853);
/// the codec refuses to encode them in an older answer.
const DESCRIBE_QUORUM_NODES_VERSION: i16 = 2;

fn replica(r: &corum_protocol::ReplicaState, now_ms: i64, version: i16) -> ReplicaState {
    let at = |age: Option<u64>| age.map_or(-1, |a| now_ms.saturating_sub(a as i64));
    let directory_id = r
        .directory_id
        .filter(|_| version >= DESCRIBE_QUORUM_NODES_VERSION)
        .map(kafka_uuid)
        .unwrap_or_default();
    ReplicaState::default()
        .with_replica_id(BrokerId(r.replica_id.0 as i32))
        .with_replica_directory_id(directory_id)
        .with_log_end_offset(r.log_end_offset.map_or(-1, |o| o.0 as i64))
        .with_last_fetch_timestamp(at(r.last_fetch_age_ms))
        .with_last_caught_up_timestamp(at(r.last_caught_up_age_ms))
}

/// DescribeQuorum of the metadata log. Answered by the leader (a node that does not lead
/// forwards it, or answers NOT_LEADER_OR_FOLLOWER on the partition, as Kafka does). From v2
/// it carries each replica's directory id and each voter's listeners (`Nodes`, from the voter
/// set); below v2 neither, which those versions cannot hold.
pub async fn describe_quorum<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    version: i16,
) -> DescribeQuorumResponse {
    let quorum = call(
        backend,
        RequestBody::DescribeQuorum,
        ctx.default_timeout_ms,
        |r| match r {
            ResponseBody::DescribeQuorum(q) => Some(q),
            _ => None,
        },
    )
    .await;
    let q: Box<CorumQuorum> = match quorum {
        Ok(q) => q,
        Err(e) => {
            let e = KafkaError::rpc(&e);
            return DescribeQuorumResponse::default()
                .with_error_code(e.code)
                .with_error_message(e.message.as_deref().map(text));
        }
    };
    let now_ms = backend.wall_clock_ms();
    let mut partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(q.leader_id.map_or(-1, |l| l.0 as i32)))
        .with_leader_epoch(q.leader_epoch.0 as i32)
        .with_high_watermark(q.high_watermark.0 as i64)
        .with_current_voters(
            q.voters
                .iter()
                .map(|r| replica(r, now_ms, version))
                .collect(),
        )
        .with_observers(
            q.observers
                .iter()
                .map(|r| replica(r, now_ms, version))
                .collect(),
        );
    if q.leader_id != Some(q.node_id) {
        partition.error_code = ResponseError::NotLeaderOrFollower.code();
        partition.error_message = Some(text(&format!(
            "node {} does not lead the metadata log",
            q.node_id
        )));
    }
    let topics = vec![TopicData::default()
        .with_topic_name(TopicName(text(METADATA_TOPIC)))
        .with_partitions(vec![partition])];
    if version < DESCRIBE_QUORUM_NODES_VERSION {
        return DescribeQuorumResponse::default().with_topics(topics);
    }
    // Each voter's listeners as its voter set names them (Kafka's `Nodes`: what
    // `kafka-metadata-quorum describe --status` prints as a voter's endpoints).
    let nodes = q
        .voters
        .iter()
        .filter(|r| !r.endpoints.is_empty())
        .map(|r| {
            Node::default()
                .with_node_id(BrokerId(r.replica_id.0 as i32))
                .with_listeners(
                    r.endpoints
                        .iter()
                        .map(|e| {
                            Listener::default()
                                .with_name(text(&e.listener))
                                .with_host(text(&e.host))
                                .with_port(e.port)
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeQuorumResponse::default()
        .with_topics(topics)
        .with_nodes(nodes)
}
