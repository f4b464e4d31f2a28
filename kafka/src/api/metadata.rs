//! Metadata and DescribeTopicPartitions.
//!
//! Metadata lists the registered brokers *and* the controllers (each by its endpoint of the
//! listener the request came in on), and names as `controller_id` a controller the client can
//! reach: admin clients send CreateTopics and the like to it. Topics come from the node's
//! image (any controller answers, from what it has replayed, as a Kafka broker answers from
//! its metadata cache). A partition's offline replicas are the controller's: those on brokers
//! that are not registered or are fenced.
//!
//! Topics requested: v0 lists all topics for an empty list; v1+ lists all for a null list and
//! none for an empty one. A topic named by id (v10+) and unknown gets UNKNOWN_TOPIC_ID; by name,
//! UNKNOWN_TOPIC_OR_PARTITION. `allow_auto_topic_creation` is ignored: controllers do not
//! create topics on a read.

use corum_controller::control::cluster_control::DescribedBroker;
use corum_controller::control::replication_control::{
    DescribeTopicsRequest, DescribedTopic, DescribedTopicV2, TopicRef,
};
use corum_controller::{ApiError, TopicId};
use corum_protocol::{LocalRead, ResponseBody, RpcError};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, MetadataRequest,
    MetadataResponse, TopicName,
};

use super::cluster::OPERATIONS_NOT_REQUESTED;
use super::nodes::{self, NodeEndpoint};
use super::{corum_uuid, kafka_uuid, text};
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::service::{call, read};

/// One requested topic: described, or why not (with what the request named).
type Outcome<T> = Result<T, (TopicRef, KafkaError)>;
type TopicOutcome = Outcome<DescribedTopic>;

async fn describe_topics<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    topics: Option<Vec<TopicRef>>,
) -> Result<Vec<TopicOutcome>, RpcError> {
    let answer = call(
        backend,
        read(LocalRead::DescribeTopics(DescribeTopicsRequest { topics })),
        ctx.default_timeout_ms,
        |r| match r {
            ResponseBody::DescribeTopics(r) => Some(r.topics),
            _ => None,
        },
    )
    .await?;
    Ok(outcomes(answer))
}

/// [`describe_topics`] with each partition's eligible leader replicas (DescribeTopicsV2).
async fn describe_topics_v2<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    topics: Option<Vec<TopicRef>>,
) -> Result<Vec<Outcome<DescribedTopicV2>>, RpcError> {
    let answer = call(
        backend,
        read(LocalRead::DescribeTopicsV2(DescribeTopicsRequest {
            topics,
        })),
        ctx.default_timeout_ms,
        |r| match r {
            ResponseBody::DescribeTopicsV2(r) => Some(r.topics),
            _ => None,
        },
    )
    .await?;
    Ok(outcomes(answer))
}

fn outcomes<T>(answer: Vec<(TopicRef, Result<T, ApiError>)>) -> Vec<Outcome<T>> {
    answer
        .into_iter()
        .map(|(named, r)| r.map_err(|e| (named, KafkaError::api(&e))))
        .collect()
}

async fn brokers<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
) -> Result<Vec<DescribedBroker>, RpcError> {
    call(
        backend,
        read(LocalRead::DescribeCluster),
        ctx.default_timeout_ms,
        |r| match r {
            ResponseBody::DescribeCluster(r) => Some(r.brokers),
            _ => None,
        },
    )
    .await
}

fn ids(nodes: &[corum_types::NodeId]) -> Vec<BrokerId> {
    nodes.iter().map(|n| BrokerId(n.0 as i32)).collect()
}

/// Metadata at any served version.
pub async fn metadata<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let refs: Option<Vec<TopicRef>> = match request.topics {
        None => None,
        Some(list) if list.is_empty() && version == 0 => None,
        Some(list) => Some(
            list.into_iter()
                .map(|t| match t.name {
                    Some(name) if !name.0.is_empty() || t.topic_id.is_nil() => {
                        TopicRef::Name(name.0.as_str().to_owned())
                    }
                    _ => TopicRef::Id(TopicId(corum_uuid(t.topic_id))),
                })
                .collect(),
        ),
    };
    let none_asked = refs.as_ref().is_some_and(Vec::is_empty);
    let controllers = nodes::controllers(ctx, backend).await;
    let mut response = MetadataResponse::default()
        .with_cluster_id(Some(text(&ctx.cluster_id_text())))
        .with_controller_id(BrokerId(nodes::controller_id(ctx, backend, &controllers)))
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED);
    let (registered, error) = match brokers(ctx, backend).await {
        Ok(b) => (b, None),
        Err(e) => (Vec::new(), Some(KafkaError::rpc(&e))),
    };
    let listed: Vec<NodeEndpoint> = registered
        .iter()
        .filter(|b| !b.fenced)
        .filter_map(|b| nodes::broker(ctx, b))
        .collect();
    response.brokers = nodes::merged(listed, &controllers)
        .into_iter()
        .map(|n| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(n.id))
                .with_host(text(&n.host))
                .with_port(n.port)
                .with_rack(n.rack.as_deref().map(text))
        })
        .collect();
    if none_asked {
        return response;
    }
    let topics = match error {
        Some(e) => Err(e),
        None => describe_topics(ctx, backend, refs.clone())
            .await
            .map_err(|e| KafkaError::rpc(&e)),
    };
    response.topics = match topics {
        Ok(list) => list
            .into_iter()
            .map(|outcome| match outcome {
                Ok(t) => MetadataResponseTopic::default()
                    .with_name(Some(TopicName(text(&t.name))))
                    .with_topic_id(kafka_uuid(t.topic_id.0))
                    .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                let mut m = MetadataResponsePartition::default()
                                    .with_partition_index(p.partition_id.0 as i32)
                                    .with_leader_id(BrokerId(p.leader.map_or(-1, |l| l.0 as i32)))
                                    .with_leader_epoch(p.leader_epoch.0 as i32)
                                    .with_replica_nodes(ids(&p.replicas))
                                    .with_isr_nodes(ids(&p.isr))
                                    .with_offline_replicas(ids(&p.offline_replicas));
                                if p.leader.is_none() {
                                    m.error_code = ResponseError::LeaderNotAvailable.code();
                                }
                                m
                            })
                            .collect(),
                    ),
                Err((named, e)) => {
                    let mut t = MetadataResponseTopic::default()
                        .with_error_code(e.code)
                        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED);
                    match named {
                        TopicRef::Name(n) => t.name = Some(TopicName(text(&n))),
                        TopicRef::Id(id) => {
                            t.name = None;
                            t.topic_id = kafka_uuid(id.0);
                        }
                    }
                    t
                }
            })
            .collect(),
        Err(e) => refs
            .unwrap_or_default()
            .into_iter()
            .map(|named| {
                let mut t = MetadataResponseTopic::default()
                    .with_error_code(e.code)
                    .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED);
                match named {
                    TopicRef::Name(n) => t.name = Some(TopicName(text(&n))),
                    TopicRef::Id(id) => t.topic_id = kafka_uuid(id.0),
                }
                t
            })
            .collect(),
    };
    response
}

/// DescribeTopicPartitions (KIP-966): the named topics (all, when none is named) with their
/// partitions and each one's eligible leader replicas and last known ELR (as a Kafka broker
/// answers from its image), at most `response_partition_limit` partitions per answer,
/// continued from the cursor.
pub async fn describe_topic_partitions<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let refs = if request.topics.is_empty() {
        None
    } else {
        Some(
            request
                .topics
                .iter()
                .map(|t| TopicRef::Name(t.name.0.as_str().to_owned()))
                .collect::<Vec<_>>(),
        )
    };
    let mut response = DescribeTopicPartitionsResponse::default();
    let outcomes = match describe_topics_v2(ctx, backend, refs.clone()).await {
        Ok(o) => o,
        Err(e) => {
            let e = KafkaError::rpc(&e);
            response.topics = request
                .topics
                .iter()
                .map(|t| {
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(e.code)
                        .with_name(Some(t.name.clone()))
                        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED)
                })
                .collect();
            return response;
        }
    };
    let mut outcomes = outcomes;
    // Sorted by name, as the cursor walks them.
    outcomes.sort_by(|a, b| outcome_name(a).cmp(outcome_name(b)));
    let limit = usize::try_from(request.response_partition_limit)
        .ok()
        .filter(|&l| l > 0)
        .unwrap_or(2000);
    let mut budget = limit;
    let (cursor_topic, cursor_partition) = match &request.cursor {
        Some(c) => (Some(c.topic_name.0.as_str().to_owned()), c.partition_index),
        None => (None, 0),
    };
    for outcome in outcomes {
        let name = outcome_name(&outcome).to_owned();
        if cursor_topic
            .as_ref()
            .is_some_and(|c| name.as_str() < c.as_str())
        {
            continue;
        }
        let first = if cursor_topic.as_deref() == Some(name.as_str()) {
            cursor_partition.max(0) as u32
        } else {
            0
        };
        match outcome {
            Err((_, e)) => response.topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(e.code)
                    .with_name(Some(TopicName(text(&name))))
                    .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED),
            ),
            Ok(t) => {
                let mut partitions = Vec::new();
                for elr in t
                    .partitions
                    .iter()
                    .filter(|p| p.partition.partition_id.0 >= first)
                {
                    let p = &elr.partition;
                    if budget == 0 {
                        response.next_cursor = Some(
                            Cursor::default()
                                .with_topic_name(TopicName(text(&name)))
                                .with_partition_index(p.partition_id.0 as i32),
                        );
                        break;
                    }
                    budget -= 1;
                    partitions.push(
                        DescribeTopicPartitionsResponsePartition::default()
                            .with_partition_index(p.partition_id.0 as i32)
                            .with_leader_id(BrokerId(p.leader.map_or(-1, |l| l.0 as i32)))
                            .with_leader_epoch(p.leader_epoch.0 as i32)
                            .with_replica_nodes(ids(&p.replicas))
                            .with_isr_nodes(ids(&p.isr))
                            .with_eligible_leader_replicas(Some(ids(&elr.eligible_leader_replicas)))
                            .with_last_known_elr(Some(ids(&elr.last_known_elr)))
                            .with_offline_replicas(ids(&p.offline_replicas)),
                    );
                }
                response.topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(TopicName(text(&name))))
                        .with_topic_id(kafka_uuid(t.topic_id.0))
                        .with_partitions(partitions)
                        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED),
                );
                if response.next_cursor.is_some() {
                    break;
                }
            }
        }
    }
    response
}

fn outcome_name(o: &Outcome<DescribedTopicV2>) -> &str {
    match o {
        Ok(t) => &t.name,
        Err((TopicRef::Name(n), _)) => n,
        Err((TopicRef::Id(_), _)) => "",
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use corum_controller::control::replication_control::{
        DescribeTopicsV2Response, DescribedPartition, DescribedPartitionV2,
    };
    use corum_controller::{LeaderEpoch, PartitionEpoch, PartitionId};
    use corum_protocol::RequestBody;
    use corum_types::{NodeId, Uuid};
    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;

    use super::*;

    /// A node that answers DescribeTopicsV2 with `answer`, and records what it is asked.
    struct Node {
        answer: DescribeTopicsV2Response,
        sent: RefCell<Vec<RequestBody>>,
    }

    impl Backend for Node {
        async fn call(
            &self,
            body: RequestBody,
            _timeout_ms: u32,
        ) -> Result<ResponseBody, RpcError> {
            self.sent.borrow_mut().push(body);
            Ok(ResponseBody::DescribeTopicsV2(self.answer.clone()))
        }

        fn leader(&self) -> Option<NodeId> {
            Some(NodeId(1))
        }

        fn wall_clock_ms(&self) -> i64 {
            0
        }
    }

    fn partition(
        id: u32,
        leader: Option<u32>,
        isr: &[u32],
        elr: &[u32],
        lke: &[u32],
    ) -> DescribedPartitionV2 {
        let ids = |v: &[u32]| v.iter().map(|b| NodeId(*b)).collect::<Vec<_>>();
        DescribedPartitionV2 {
            partition: DescribedPartition {
                partition_id: PartitionId(id),
                leader: leader.map(NodeId),
                leader_epoch: LeaderEpoch(3),
                partition_epoch: PartitionEpoch(7),
                replicas: ids(&[1, 2, 3]),
                isr: ids(isr),
                offline_replicas: ids(&[2, 3]),
            },
            eligible_leader_replicas: ids(elr),
            last_known_elr: ids(lke),
        }
    }

    /// DescribeTopicPartitions asks for the eligible leader replicas (DescribeTopicsV2) and
    /// answers each partition's ELR and last known ELR as Kafka's brokers do: a list, empty
    /// when there is none.
    #[test]
    fn describe_topic_partitions_carries_the_eligible_leader_replicas() {
        let node = Node {
            answer: DescribeTopicsV2Response {
                topics: vec![(
                    TopicRef::Name("orders".into()),
                    Ok(DescribedTopicV2 {
                        topic_id: TopicId(Uuid([7; 16])),
                        name: "orders".into(),
                        partitions: vec![
                            partition(0, Some(1), &[1], &[2], &[]),
                            partition(1, None, &[], &[2, 3], &[1]),
                        ],
                    }),
                )],
            },
            sent: RefCell::default(),
        };
        let request = DescribeTopicPartitionsRequest::default()
            .with_topics(vec![
                TopicRequest::default().with_name(TopicName(text("orders")))
            ])
            .with_response_partition_limit(10);
        let ctx = ListenerContext::for_tests(Uuid([9; 16]));
        let r = futures_lite::future::block_on(describe_topic_partitions(&ctx, &node, request));
        assert!(matches!(
            node.sent.borrow().as_slice(),
            [RequestBody::DescribeTopicsV2(_)]
        ));
        type Lists = (i32, Vec<i32>, Vec<i32>, Vec<i32>);
        let lists: Vec<Lists> = r.topics[0]
            .partitions
            .iter()
            .map(|p| {
                let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
                (
                    p.leader_id.0,
                    ids(&p.isr_nodes),
                    ids(p.eligible_leader_replicas.as_deref().expect("a list")),
                    ids(p.last_known_elr.as_deref().expect("a list")),
                )
            })
            .collect();
        assert_eq!(
            lists,
            vec![
                (1, vec![1], vec![2], vec![]),
                (-1, vec![], vec![2, 3], vec![1])
            ]
        );
    }
}
