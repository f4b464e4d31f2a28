//! The private client protocol (`corum_protocol`): the rkyv request and response frames
//! brokers, admin tools and observers exchange with a controller's RPC listener.
//!
//! The first byte picks the side (even: a request, as the server decodes it with
//! `decode_request`; odd: a response, as a client decodes it with `decode_response`); the rest,
//! copied into an aligned buffer as the transport delivers it, is the frame. It either fails
//! with an error (a refused request also gets the server's answer: `peek_correlation_id`,
//! `rpc_error_for`) or is a frame that deserializes into owned values, whose Raft bodies pass
//! or fail `validate_raft` with an error, and whose encoding decodes to an equal frame.

use corum_controller::acl::{AclOperation, AuthorizationFailure, ResourceType};
use corum_controller::control::producer_id_control::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse,
};
use corum_controller::control::replication_control::{
    CreatableTopic, CreateTopicsRequest, CreateTopicsResponse, CreatedTopic,
};
use corum_controller::{ApiError, TopicId};
use corum_node::protocol::{
    decode_request, decode_response, encode_request, encode_response, peek_correlation_id,
    rpc_error_for, LeaderHint, LocalRead, RequestBody, RequestFrame, ResponseBody, ResponseFrame,
    RpcError,
};
use corum_raft::message::{FetchRequest, FetchResponse, FetchResult};
use corum_raft::types::ReplicaKey;
use corum_types::{BrokerEpoch, Epoch, LogOffset, NodeId, Uuid};
use rkyv::util::AlignedVec;

#[path = "common.rs"]
mod common;

/// The frame limit (`corum.rpc.frame.bytes.max`-like) the harness decodes under.
const MAX_BYTES: usize = 1 << 20;

pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = AlignedVec::<16>::with_capacity(rest.len());
    bytes.extend_from_slice(rest);
    if selector % 2 == 0 {
        match decode_request(&bytes, MAX_BYTES) {
            Ok(archived) => {
                let frame = RequestFrame::from_archived(archived);
                let again = encode_request(&frame, usize::MAX).expect("a decoded request encodes");
                let back = RequestFrame::from_archived(
                    decode_request(&again, usize::MAX).expect("a re-encoded request decodes"),
                );
                assert_eq!(back, frame, "a request survives a round trip");
            }
            Err(e) => {
                let _ = peek_correlation_id(&bytes);
                assert!(!rpc_error_for(&e).to_string().is_empty());
            }
        }
    } else {
        match decode_response(&bytes, MAX_BYTES) {
            Ok(archived) => {
                let frame = ResponseFrame::from_archived(archived);
                if let Ok(body) = &frame.body {
                    let _ = body.validate_raft().map_err(|e| e.to_string());
                }
                let again =
                    encode_response(&frame, usize::MAX).expect("a decoded response encodes");
                let back = ResponseFrame::from_archived(
                    decode_response(&again, usize::MAX).expect("a re-encoded response decodes"),
                );
                assert_eq!(back, frame, "a response survives a round trip");
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}

/// The authorizer's refusal of `op` on `name` to `User:CN=tenant`.
fn tenant_may_not(op: AclOperation, t: ResourceType, name: &str) -> AuthorizationFailure {
    AuthorizationFailure {
        principal: "User:CN=tenant".into(),
        operation: op,
        resource_type: t,
        resource_name: name.into(),
    }
}

/// Seeds: requests and responses of several kinds (bodiless, with items, Raft fetches with
/// real batches, errors, authorization refusals whole and per item).
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let replica = ReplicaKey {
        id: NodeId(7),
        directory_id: Uuid([7; 16]),
    };
    let requests: Vec<(&str, RequestBody)> = vec![
        ("describe-cluster", RequestBody::DescribeCluster),
        ("describe-quorum", RequestBody::DescribeQuorum),
        (
            "local-read",
            RequestBody::LocalRead(Box::new(LocalRead::DescribeFeatures)),
        ),
        (
            "create-topics",
            RequestBody::CreateTopics(CreateTopicsRequest {
                topics: vec![CreatableTopic {
                    name: "logs".into(),
                    num_partitions: 3,
                    replication_factor: 2,
                    assignments: vec![],
                    configs: vec![("cleanup.policy".into(), "compact".into())],
                }],
                validate_only: false,
            }),
        ),
        (
            "allocate-producer-ids",
            RequestBody::AllocateProducerIds(AllocateProducerIdsRequest {
                broker_id: NodeId(4),
                broker_epoch: BrokerEpoch(40),
            }),
        ),
        (
            "fetch",
            RequestBody::Fetch(FetchRequest {
                epoch: Epoch(3),
                replica,
                fetch_offset: LogOffset(120),
                last_fetched_epoch: Epoch(3),
                high_watermark: LogOffset(118),
                wait_max_ms: 500,
            }),
        ),
    ];
    let responses: Vec<(&str, Result<ResponseBody, RpcError>)> = vec![
        ("register-controller", Ok(ResponseBody::RegisterController)),
        (
            "allocate-producer-ids",
            Ok(ResponseBody::AllocateProducerIds(
                AllocateProducerIdsResponse {
                    first_producer_id: 1000,
                    count: 1000,
                },
            )),
        ),
        (
            "fetch",
            Ok(ResponseBody::Fetch(Box::new(FetchResponse {
                epoch: Epoch(3),
                leader: Some(NodeId(1)),
                result: FetchResult::Batches {
                    fetch_offset: LogOffset(120),
                    last_fetched_epoch: Epoch(3),
                    batches: common::batches(120),
                    high_watermark: LogOffset(130),
                },
            }))),
        ),
        (
            "not-controller",
            Err(RpcError::NotController {
                leader: Some(LeaderHint {
                    id: NodeId(1),
                    host: "controller-1".into(),
                    port: 9093,
                }),
            }),
        ),
        (
            "malformed",
            Err(RpcError::Malformed {
                reason: "bad".into(),
            }),
        ),
        (
            "authorization-failed",
            Err(RpcError::AuthorizationFailed(Box::new(tenant_may_not(
                AclOperation::Alter,
                ResourceType::Cluster,
                "kafka-cluster",
            )))),
        ),
        (
            "create-topics-refused",
            Ok(ResponseBody::CreateTopics(CreateTopicsResponse {
                topics: vec![
                    (
                        "secret".into(),
                        Err(ApiError::AuthorizationFailed(tenant_may_not(
                            AclOperation::Create,
                            ResourceType::Topic,
                            "secret",
                        ))),
                    ),
                    (
                        "open".into(),
                        Ok(CreatedTopic {
                            topic_id: TopicId(Uuid([5; 16])),
                            num_partitions: 1,
                            replication_factor: 3,
                        }),
                    ),
                ],
            })),
        ),
    ];
    let mut seeds = Vec::new();
    for (i, (name, body)) in requests.into_iter().enumerate() {
        let frame = RequestFrame {
            correlation_id: i as u64 + 1,
            timeout_ms: 30_000,
            body,
        };
        let mut bytes = vec![0u8];
        bytes.extend_from_slice(&encode_request(&frame, MAX_BYTES).expect("fits"));
        seeds.push((format!("request-{name}"), bytes));
    }
    for (i, (name, body)) in responses.into_iter().enumerate() {
        let frame = ResponseFrame {
            correlation_id: i as u64 + 1,
            body,
        };
        let mut bytes = vec![1u8];
        bytes.extend_from_slice(&encode_response(&frame, MAX_BYTES).expect("fits"));
        seeds.push((format!("response-{name}"), bytes));
    }
    seeds
}
