//! What Kafka brokers ask their controllers: BrokerRegistration (corum's `RegisterBroker`),
//! BrokerHeartbeat (corum's heartbeat with an epoch), UnregisterBroker, AllocateProducerIds,
//! AlterPartition and AssignReplicasToDirs, each the corum request of the same meaning.
//!
//! A heartbeat's `current_metadata_offset` is the last offset the broker applied; corum's
//! heartbeat carries the offset after it. corum's target state becomes Kafka's two flags:
//!
//! | corum target state | `is_fenced` | `should_shut_down` |
//! |---|---|---|
//! | Fenced | true | false |
//! | Active | false | false |
//! | ControlledShutdown (leaders still moving away) | false | false |
//! | Shutdown | true | true |

use corum_controller::control::cluster_control::{
    BrokerHeartbeatRequest as Heartbeat, BrokerRegistrationRequest as Registration,
    PreviousBrokerEpoch, TargetState, UnregisterBrokerRequest as Unregister,
};
use corum_controller::control::producer_id_control::AllocateProducerIdsRequest as Allocate;
use corum_controller::control::replication_control::{
    AlterPartitionRequest as AlterPartition, AlterPartitionTopic,
    AssignReplicasToDirsRequest as AssignDirs, DirectoryAssignment, IsrMember, PartitionAlteration,
    TopicPartitions,
};
use corum_controller::ids::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId};
use corum_controller::records::{BrokerEndpointV1, LeaderRecoveryState, SupportedFeatureV1};
use corum_protocol::{RequestBody, ResponseBody};
use corum_types::{BrokerEpoch, LogOffset, NodeId};
use kafka_protocol::error::ResponseError as K;
use kafka_protocol::messages::{
    alter_partition_response, assign_replicas_to_dirs_response, AllocateProducerIdsRequest,
    AllocateProducerIdsResponse, AlterPartitionRequest, AlterPartitionResponse,
    AssignReplicasToDirsRequest, AssignReplicasToDirsResponse, BrokerHeartbeatRequest,
    BrokerHeartbeatResponse, BrokerRegistrationRequest, BrokerRegistrationResponse,
    UnregisterBrokerRequest, UnregisterBrokerResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::api::{corum_uuid, kafka_uuid};
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::service::call;

fn broker_id(id: i32) -> Result<NodeId, KafkaError> {
    u32::try_from(id)
        .map(NodeId)
        .map_err(|_| KafkaError::new(K::InvalidRequest, format!("broker id {id} is negative")))
}

/// The broker a request comes from and the epoch it states, `None` when either is negative.
fn requester(id: i32, epoch: i64) -> Option<(NodeId, BrokerEpoch)> {
    Some((
        NodeId(u32::try_from(id).ok()?),
        BrokerEpoch(u64::try_from(epoch).ok()?),
    ))
}

fn level(v: i16, what: &str) -> Result<u16, KafkaError> {
    u16::try_from(v).map_err(|_| {
        KafkaError::new(
            K::InvalidRequest,
            format!("feature {what}: a supported level is negative ({v})"),
        )
    })
}

/// The first BrokerRegistration version with `PreviousBrokerEpoch` (KIP-966): before it the
/// controller cannot tell an unclean shutdown, and takes every one as clean (as Kafka does).
const PREVIOUS_BROKER_EPOCH_VERSION: i16 = 3;

fn registration(
    ctx: &ListenerContext,
    r: &BrokerRegistrationRequest,
    version: i16,
) -> Result<Registration, KafkaError> {
    if r.cluster_id.as_str() != ctx.cluster_id_text() {
        return Err(KafkaError::new(
            K::InconsistentClusterId,
            format!(
                "broker {} belongs to cluster {}, this is cluster {}",
                r.broker_id.0,
                r.cluster_id.as_str(),
                ctx.cluster_id_text()
            ),
        ));
    }
    let features = r
        .features
        .iter()
        .map(|f| {
            Ok(SupportedFeatureV1 {
                name: f.name.to_string(),
                min_level: level(f.min_supported_version, &f.name)?,
                max_level: level(f.max_supported_version, &f.name)?,
            })
        })
        .collect::<Result<Vec<_>, KafkaError>>()?;
    Ok(Registration {
        broker_id: broker_id(r.broker_id.0)?,
        incarnation_id: corum_uuid(r.incarnation_id),
        endpoints: r
            .listeners
            .iter()
            .map(|l| BrokerEndpointV1 {
                name: l.name.to_string(),
                host: l.host.to_string(),
                port: l.port,
                security_protocol: l.security_protocol,
            })
            .collect(),
        features,
        rack: r.rack.as_ref().map(|s| s.to_string()),
        log_dirs: r.log_dirs.iter().map(|&d| corum_uuid(d)).collect(),
        previous_broker_epoch: if version < PREVIOUS_BROKER_EPOCH_VERSION {
            PreviousBrokerEpoch::NotSent
        } else {
            u64::try_from(r.previous_broker_epoch).map_or(PreviousBrokerEpoch::Unnamed, |e| {
                PreviousBrokerEpoch::Epoch(BrokerEpoch(e))
            })
        },
    })
}

/// Serves BrokerRegistration (at `version`): the broker's epoch, or why it may not join.
pub async fn broker_registration<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: BrokerRegistrationRequest,
    version: i16,
) -> BrokerRegistrationResponse {
    let mut response = BrokerRegistrationResponse::default().with_broker_epoch(-1);
    let registration = match registration(ctx, &r, version) {
        Ok(h) => h,
        Err(e) => {
            response.error_code = e.code;
            return response;
        }
    };
    match call(
        backend,
        RequestBody::RegisterBroker(Box::new(registration)),
        ctx.default_timeout_ms,
        |a| match a {
            ResponseBody::RegisterBroker(h) => Some(h),
            _ => None,
        },
    )
    .await
    {
        Ok(h) => response.broker_epoch = h.broker_epoch.0 as i64,
        Err(e) => {
            tracing::debug!(broker = r.broker_id.0, error = %e, "broker registration refused");
            response.error_code = KafkaError::rpc(&e).code;
        }
    }
    response
}

/// Serves BrokerHeartbeat.
pub async fn broker_heartbeat<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: BrokerHeartbeatRequest,
) -> BrokerHeartbeatResponse {
    let mut response = BrokerHeartbeatResponse::default().with_is_fenced(true);
    let Some((id, epoch)) = requester(r.broker_id.0, r.broker_epoch) else {
        response.error_code = K::InvalidRequest.code();
        return response;
    };
    // The offset after the last one applied (none applied: -1, or any negative, is 0),
    // computed in u64: `i64::MAX + 1` overflows an i64.
    let next_metadata_offset = u64::try_from(r.current_metadata_offset).map_or(0, |o| o + 1);
    let heartbeat = Heartbeat {
        broker_id: id,
        broker_epoch: Some(epoch),
        incarnation_id: corum_types::Uuid::default(),
        listeners: Vec::new(),
        features: Vec::new(),
        rack: None,
        next_metadata_offset: LogOffset(next_metadata_offset),
        want_fence: r.want_fence,
        want_shutdown: r.want_shut_down,
    };
    match call(
        backend,
        RequestBody::BrokerHeartbeat(heartbeat),
        ctx.default_timeout_ms,
        |a| match a {
            ResponseBody::BrokerHeartbeat(h) => Some(h),
            _ => None,
        },
    )
    .await
    {
        Ok(h) => {
            response.is_caught_up = h.is_caught_up;
            (response.is_fenced, response.should_shut_down) = match h.target_state {
                TargetState::Fenced => (true, false),
                TargetState::Active | TargetState::ControlledShutdown => (false, false),
                TargetState::Shutdown => (true, true),
            };
        }
        Err(e) => {
            tracing::debug!(broker = id.0, error = %e, "broker heartbeat refused");
            response.error_code = KafkaError::rpc(&e).code;
        }
    }
    response
}

/// Serves UnregisterBroker (a decommission: the broker must be fenced, i.e. stopped).
pub async fn unregister_broker<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: UnregisterBrokerRequest,
) -> UnregisterBrokerResponse {
    let mut response = UnregisterBrokerResponse::default();
    let id = match broker_id(r.broker_id.0) {
        Ok(id) => id,
        Err(e) => {
            response.error_code = e.code;
            response.error_message = e.message.map(StrBytes::from_string);
            return response;
        }
    };
    let answer = call(
        backend,
        RequestBody::UnregisterBroker(Unregister { broker_id: id }),
        ctx.default_timeout_ms,
        |a| matches!(a, ResponseBody::UnregisterBroker).then_some(()),
    )
    .await;
    if let Err(e) = answer {
        let e = KafkaError::rpc(&e);
        response.error_code = e.code;
        response.error_message = e.message.map(StrBytes::from_string);
    }
    response
}

/// Serves AllocateProducerIds: the next block of producer ids for the broker's idempotent and
/// transactional producers.
pub async fn allocate_producer_ids<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: AllocateProducerIdsRequest,
) -> AllocateProducerIdsResponse {
    let mut response = AllocateProducerIdsResponse::default()
        .with_producer_id_start((-1).into())
        .with_producer_id_len(0);
    let Some((id, epoch)) = requester(r.broker_id.0, r.broker_epoch) else {
        response.error_code = K::InvalidRequest.code();
        return response;
    };
    let answer = call(
        backend,
        RequestBody::AllocateProducerIds(Allocate {
            broker_id: id,
            broker_epoch: epoch,
        }),
        ctx.default_timeout_ms,
        |a| match a {
            ResponseBody::AllocateProducerIds(r) => Some(r),
            _ => None,
        },
    )
    .await;
    match answer {
        Ok(block) => {
            match (
                i64::try_from(block.first_producer_id),
                i32::try_from(block.count),
            ) {
                (Ok(start), Ok(len)) => {
                    response.producer_id_start = start.into();
                    response.producer_id_len = len;
                }
                _ => response.error_code = K::UnknownServerError.code(),
            }
        }
        Err(e) => response.error_code = KafkaError::rpc(&e).code,
    }
    response
}

fn topic_id(u: uuid::Uuid) -> TopicId {
    TopicId(corum_uuid(u))
}

fn partition_id(p: i32) -> Option<PartitionId> {
    u32::try_from(p).ok().map(PartitionId)
}

fn recovery_state(s: i8) -> Option<LeaderRecoveryState> {
    match s {
        0 => Some(LeaderRecoveryState::Recovered),
        1 => Some(LeaderRecoveryState::Recovering),
        _ => None,
    }
}

fn recovery_code(s: LeaderRecoveryState) -> i8 {
    match s {
        LeaderRecoveryState::Recovered => 0,
        LeaderRecoveryState::Recovering => 1,
    }
}

/// Serves AlterPartition (v2+: topics by id; v3 names each new ISR member's broker epoch,
/// KIP-903): a partition leader's ISR changes and leader recovery, per partition.
pub async fn alter_partition<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: AlterPartitionRequest,
    version: i16,
) -> AlterPartitionResponse {
    let mut response = AlterPartitionResponse::default();
    let Some((broker, epoch)) = requester(r.broker_id.0, r.broker_epoch) else {
        response.error_code = K::InvalidRequest.code();
        return response;
    };
    let mut topics = Vec::with_capacity(r.topics.len());
    for t in &r.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let members: Option<Vec<IsrMember>> = if version >= 3 {
                p.new_isr_with_epochs
                    .iter()
                    .map(|m| {
                        Some(IsrMember {
                            broker_id: NodeId(u32::try_from(m.broker_id.0).ok()?),
                            broker_epoch: u64::try_from(m.broker_epoch).ok().map(BrokerEpoch),
                        })
                    })
                    .collect()
            } else {
                p.new_isr
                    .iter()
                    .map(|&b| {
                        Some(IsrMember {
                            broker_id: NodeId(u32::try_from(b.0).ok()?),
                            broker_epoch: None,
                        })
                    })
                    .collect()
            };
            let (Some(members), Some(id), Ok(leader_epoch), Ok(partition_epoch), Some(state)) = (
                members,
                partition_id(p.partition_index),
                u32::try_from(p.leader_epoch),
                u32::try_from(p.partition_epoch),
                recovery_state(p.leader_recovery_state),
            ) else {
                response.error_code = K::InvalidRequest.code();
                return response;
            };
            partitions.push(PartitionAlteration {
                partition_id: id,
                leader_epoch: LeaderEpoch(leader_epoch),
                new_isr_with_epochs: members,
                leader_recovery_state: state,
                partition_epoch: PartitionEpoch(partition_epoch),
            });
        }
        topics.push(AlterPartitionTopic {
            topic_id: topic_id(t.topic_id),
            partitions,
        });
    }
    let request = AlterPartition {
        broker_id: broker,
        broker_epoch: epoch,
        topics,
    };
    let answer = call(
        backend,
        RequestBody::AlterPartition(request),
        ctx.default_timeout_ms,
        |a| match a {
            ResponseBody::AlterPartition(r) => Some(r),
            _ => None,
        },
    )
    .await;
    let result = match answer {
        Ok(r) => r,
        Err(e) => {
            response.error_code = KafkaError::rpc(&e).code;
            return response;
        }
    };
    response.topics = result
        .topics
        .into_iter()
        .map(|t| {
            alter_partition_response::TopicData::default()
                .with_topic_id(kafka_uuid(t.topic_id.0))
                .with_partitions(
                    t.partitions
                        .into_iter()
                        .map(|(id, r)| {
                            let p = alter_partition_response::PartitionData::default()
                                .with_partition_index(id.0 as i32);
                            match r {
                                Ok(a) => p
                                    .with_leader_id(a.leader.map_or(-1, |l| l.0 as i32).into())
                                    .with_leader_epoch(a.leader_epoch.0 as i32)
                                    .with_isr(a.isr.iter().map(|b| (b.0 as i32).into()).collect())
                                    .with_leader_recovery_state(recovery_code(
                                        a.leader_recovery_state,
                                    ))
                                    .with_partition_epoch(a.partition_epoch.0 as i32),
                                Err(e) => p
                                    .with_error_code(KafkaError::api(&e).code)
                                    .with_leader_id((-1).into()),
                            }
                        })
                        .collect(),
                )
        })
        .collect();
    response
}

/// Serves AssignReplicasToDirs (KIP-858): in which of its log directories a broker keeps each
/// of its replicas.
pub async fn assign_replicas_to_dirs<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: AssignReplicasToDirsRequest,
) -> AssignReplicasToDirsResponse {
    let mut response = AssignReplicasToDirsResponse::default();
    let Some((broker, epoch)) = requester(r.broker_id.0, r.broker_epoch) else {
        response.error_code = K::InvalidRequest.code();
        return response;
    };
    let mut directories = Vec::with_capacity(r.directories.len());
    for d in &r.directories {
        let mut topics = Vec::with_capacity(d.topics.len());
        for t in &d.topics {
            let Some(partitions) = t
                .partitions
                .iter()
                .map(|p| partition_id(p.partition_index))
                .collect::<Option<Vec<_>>>()
            else {
                response.error_code = K::InvalidRequest.code();
                return response;
            };
            topics.push(TopicPartitions {
                topic_id: topic_id(t.topic_id),
                partitions,
            });
        }
        directories.push(DirectoryAssignment {
            directory_id: corum_uuid(d.id),
            topics,
        });
    }
    let request = AssignDirs {
        broker_id: broker,
        broker_epoch: epoch,
        directories,
    };
    let answer = call(
        backend,
        RequestBody::AssignReplicasToDirs(request),
        ctx.default_timeout_ms,
        |a| match a {
            ResponseBody::AssignReplicasToDirs(r) => Some(r),
            _ => None,
        },
    )
    .await;
    let result = match answer {
        Ok(r) => r,
        Err(e) => {
            response.error_code = KafkaError::rpc(&e).code;
            return response;
        }
    };
    response.directories = result
        .directories
        .into_iter()
        .map(|d| {
            assign_replicas_to_dirs_response::DirectoryData::default()
                .with_id(kafka_uuid(d.directory_id))
                .with_topics(
                    d.topics
                        .into_iter()
                        .map(|t| {
                            assign_replicas_to_dirs_response::TopicData::default()
                                .with_topic_id(kafka_uuid(t.topic_id.0))
                                .with_partitions(
                                    t.partitions
                                        .into_iter()
                                        .map(|(id, r)| {
                                            assign_replicas_to_dirs_response::PartitionData::default()
                                                .with_partition_index(id.0 as i32)
                                                .with_error_code(
                                                    r.err().map_or(0, |e| KafkaError::api(&e).code),
                                                )
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                )
        })
        .collect();
    response
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use corum_controller::control::cluster_control::BrokerHeartbeatResponse as Answer;
    use corum_controller::ApiError;
    use corum_protocol::RpcError;
    use corum_types::Uuid;
    use kafka_protocol::messages::{
        alter_partition_request, assign_replicas_to_dirs_request, broker_registration_request,
        BrokerId,
    };

    use super::*;

    const CLUSTER: Uuid = Uuid([9; 16]);

    fn ctx() -> ListenerContext {
        ListenerContext::for_tests(CLUSTER)
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        futures_lite::future::block_on(f)
    }

    /// A controller that answers every heartbeat with `heartbeat` and every unregistration
    /// with `unregister`, and records what it is sent.
    struct Node {
        heartbeat: Result<Answer, RpcError>,
        unregister: Result<(), RpcError>,
        /// The answer to any other request.
        other: Option<Result<ResponseBody, RpcError>>,
        sent: RefCell<Vec<RequestBody>>,
    }

    impl Node {
        fn answering(heartbeat: Result<Answer, RpcError>) -> Node {
            Node {
                heartbeat,
                unregister: Ok(()),
                other: None,
                sent: RefCell::default(),
            }
        }

        /// A controller that answers the one request of a test with `answer`.
        fn replying(answer: Result<ResponseBody, RpcError>) -> Node {
            Node {
                other: Some(answer),
                ..Node::answering(Err(RpcError::Timeout { timeout_ms: 1 }))
            }
        }

        fn heartbeats(&self) -> Vec<Heartbeat> {
            self.sent
                .borrow()
                .iter()
                .map(|b| match b {
                    RequestBody::BrokerHeartbeat(h) => h.clone(),
                    other => panic!("not a heartbeat: {}", other.kind()),
                })
                .collect()
        }
    }

    impl Backend for Node {
        async fn call(
            &self,
            body: RequestBody,
            _timeout_ms: u32,
        ) -> Result<ResponseBody, RpcError> {
            let answer = match &body {
                RequestBody::BrokerHeartbeat(_) => {
                    self.heartbeat.clone().map(ResponseBody::BrokerHeartbeat)
                }
                RequestBody::RegisterBroker(_) => self.heartbeat.clone().map(|h| {
                    ResponseBody::RegisterBroker(
                        corum_controller::control::cluster_control::BrokerRegistrationResponse {
                            broker_epoch: h.broker_epoch,
                        },
                    )
                }),
                RequestBody::UnregisterBroker(_) => self
                    .unregister
                    .clone()
                    .map(|()| ResponseBody::UnregisterBroker),
                other => self
                    .other
                    .clone()
                    .unwrap_or_else(|| panic!("unexpected {}", other.kind())),
            };
            self.sent.borrow_mut().push(body);
            answer
        }

        fn leader(&self) -> Option<NodeId> {
            Some(NodeId(1))
        }

        fn wall_clock_ms(&self) -> i64 {
            0
        }
    }

    fn answer(epoch: u64, target_state: TargetState, is_caught_up: bool) -> Answer {
        Answer {
            broker_epoch: BrokerEpoch(epoch),
            target_state,
            lease_duration_ms: 9_000,
            is_caught_up,
        }
    }

    fn text(s: &str) -> StrBytes {
        StrBytes::from_string(s.to_owned())
    }

    /// Broker 4's registration as a Kafka 4.1 broker sends it.
    fn registration_request(cluster_id: &str) -> BrokerRegistrationRequest {
        let listener = |name: &str, port: u16| {
            broker_registration_request::Listener::default()
                .with_name(text(name))
                .with_host(text("b4"))
                .with_port(port)
                .with_security_protocol(0)
        };
        let feature = |name: &str, min: i16, max: i16| {
            broker_registration_request::Feature::default()
                .with_name(text(name))
                .with_min_supported_version(min)
                .with_max_supported_version(max)
        };
        BrokerRegistrationRequest::default()
            .with_broker_id(BrokerId(4))
            .with_cluster_id(text(cluster_id))
            .with_incarnation_id(uuid::Uuid::from_bytes([4; 16]))
            .with_listeners(vec![
                listener("PLAINTEXT", 9092),
                listener("REPLICATION", 9094),
            ])
            .with_features(vec![
                feature("metadata.version", 7, 27),
                feature("kraft.version", 0, 1),
            ])
            .with_rack(Some(text("r1")))
            .with_log_dirs(vec![uuid::Uuid::from_bytes([44; 16])])
    }

    /// A registration reaches the controller as corum's RegisterBroker, carrying the broker's
    /// id, incarnation, endpoints with their security protocols, features, rack and log
    /// directories; the answer carries the broker epoch the controller gave.
    #[test]
    fn a_registration_is_corums_register_broker() {
        let node = Node::answering(Ok(answer(77, TargetState::Fenced, false)));
        let own = ctx().cluster_id_text();
        let r = run(broker_registration(
            &ctx(),
            &node,
            registration_request(&own),
            4,
        ));
        assert_eq!((r.error_code, r.broker_epoch), (0, 77));
        let sent = node.sent.borrow();
        let [RequestBody::RegisterBroker(h)] = sent.as_slice() else {
            panic!("one registration expected, sent {sent:?}");
        };
        assert_eq!(h.broker_id, NodeId(4));
        assert_eq!(h.incarnation_id, Uuid([4; 16]));
        let endpoint = |name: &str, port| BrokerEndpointV1 {
            name: name.into(),
            host: "b4".into(),
            port,
            security_protocol: 0,
        };
        assert_eq!(
            h.endpoints,
            vec![endpoint("PLAINTEXT", 9092), endpoint("REPLICATION", 9094)]
        );
        let feature = |name: &str, min_level, max_level| SupportedFeatureV1 {
            name: name.into(),
            min_level,
            max_level,
        };
        assert_eq!(
            h.features,
            vec![
                feature("metadata.version", 7, 27),
                feature("kraft.version", 0, 1)
            ]
        );
        assert_eq!(h.rack.as_deref(), Some("r1"));
        assert_eq!(h.log_dirs, vec![Uuid([44; 16])]);
        assert_eq!(h.previous_broker_epoch, PreviousBrokerEpoch::Unnamed);
    }

    /// KIP-966: a broker that shut down cleanly names its last epoch (v3+), one that did not
    /// sends -1; before v3 the request cannot say, which the controller takes as clean.
    #[test]
    fn the_previous_broker_epoch_says_how_the_broker_stopped() {
        let own = ctx().cluster_id_text();
        for (version, previous, sent) in [
            (4, 41, PreviousBrokerEpoch::Epoch(BrokerEpoch(41))),
            (3, -1, PreviousBrokerEpoch::Unnamed),
            (2, -1, PreviousBrokerEpoch::NotSent),
            (0, -1, PreviousBrokerEpoch::NotSent),
        ] {
            let node = Node::answering(Ok(answer(77, TargetState::Fenced, false)));
            let request = registration_request(&own).with_previous_broker_epoch(previous);
            let r = run(broker_registration(&ctx(), &node, request, version));
            assert_eq!(r.error_code, 0);
            let sent_requests = node.sent.borrow();
            let [RequestBody::RegisterBroker(h)] = sent_requests.as_slice() else {
                panic!("one registration expected, sent {sent_requests:?}");
            };
            assert_eq!(h.previous_broker_epoch, sent, "v{version} with {previous}");
        }
    }

    /// A registration the controller must not see is refused here: another cluster
    /// (INCONSISTENT_CLUSTER_ID), a negative supported level or broker id (INVALID_REQUEST).
    #[test]
    fn invalid_registrations_never_reach_the_controller() {
        let own = ctx().cluster_id_text();
        let mut negative_min = registration_request(&own);
        negative_min.features[0].min_supported_version = -1;
        let mut negative_max = registration_request(&own);
        negative_max.features[1].max_supported_version = -3;
        let mut negative_id = registration_request(&own);
        negative_id.broker_id = BrokerId(-1);
        for (i, (request, code)) in [
            (
                registration_request("another-cluster"),
                K::InconsistentClusterId,
            ),
            (registration_request(""), K::InconsistentClusterId),
            (negative_min, K::InvalidRequest),
            (negative_max, K::InvalidRequest),
            (negative_id, K::InvalidRequest),
        ]
        .into_iter()
        .enumerate()
        {
            let node = Node::answering(Ok(answer(77, TargetState::Fenced, false)));
            let r = run(broker_registration(&ctx(), &node, request, 4));
            assert_eq!(
                (r.error_code, r.broker_epoch),
                (code.code(), -1),
                "case {i}"
            );
            assert!(
                node.sent.borrow().is_empty(),
                "case {i}: the controller was asked"
            );
        }
    }

    /// The controller's refusals of a registration carry Kafka's codes.
    #[test]
    fn registration_refusals_carry_kafka_codes() {
        let own = ctx().cluster_id_text();
        for (error, code) in [
            (
                RpcError::Api(ApiError::DuplicateBrokerRegistration {
                    broker_id: NodeId(4),
                }),
                K::DuplicateBrokerRegistration,
            ),
            (
                RpcError::Api(ApiError::UnsupportedFeatures {
                    broker_id: NodeId(4),
                    feature: "metadata.version".into(),
                }),
                K::UnsupportedVersion,
            ),
            (RpcError::NotController { leader: None }, K::NotController),
            (RpcError::Timeout { timeout_ms: 1 }, K::RequestTimedOut),
        ] {
            let node = Node::answering(Err(error.clone()));
            let r = run(broker_registration(
                &ctx(),
                &node,
                registration_request(&own),
                4,
            ));
            assert_eq!((r.error_code, r.broker_epoch), (code.code(), -1), "{error}");
        }
    }

    fn heartbeat_request(applied: i64) -> BrokerHeartbeatRequest {
        BrokerHeartbeatRequest::default()
            .with_broker_id(BrokerId(4))
            .with_broker_epoch(77)
            .with_current_metadata_offset(applied)
    }

    /// Kafka's `current_metadata_offset` is the last offset the broker applied, corum's
    /// `next_metadata_offset` the one after it; none applied (-1) is 0. The largest offset
    /// Kafka can state is no overflow (it panicked in debug builds before).
    #[test]
    fn a_heartbeat_states_the_offset_after_the_last_applied() {
        for (applied, next) in [
            (-1i64, 0u64),
            (-5, 0),
            (0, 1),
            (41, 42),
            (i64::MAX, 1 << 63),
        ] {
            let node = Node::answering(Ok(answer(77, TargetState::Active, true)));
            let r = run(broker_heartbeat(&ctx(), &node, heartbeat_request(applied)));
            assert_eq!(r.error_code, 0, "applied {applied}");
            let [h] = node.heartbeats().try_into().expect("one heartbeat");
            assert_eq!(h.next_metadata_offset, LogOffset(next), "applied {applied}");
            assert_eq!(
                (h.broker_id, h.broker_epoch),
                (NodeId(4), Some(BrokerEpoch(77)))
            );
        }
        let node = Node::answering(Ok(answer(77, TargetState::Active, true)));
        run(broker_heartbeat(
            &ctx(),
            &node,
            heartbeat_request(5)
                .with_want_fence(true)
                .with_want_shut_down(true),
        ));
        let [h] = node.heartbeats().try_into().expect("one heartbeat");
        assert!(h.want_fence && h.want_shutdown);
    }

    /// Each target state becomes (is_fenced, should_shut_down) as the module doc's table
    /// says, and `is_caught_up` is the controller's.
    #[test]
    fn target_states_map_to_kafkas_flags() {
        for (state, fenced, shut_down) in [
            (TargetState::Fenced, true, false),
            (TargetState::Active, false, false),
            (TargetState::ControlledShutdown, false, false),
            (TargetState::Shutdown, true, true),
        ] {
            for caught_up in [false, true] {
                let node = Node::answering(Ok(answer(77, state, caught_up)));
                let r = run(broker_heartbeat(&ctx(), &node, heartbeat_request(10)));
                assert_eq!(r.error_code, 0);
                assert_eq!(
                    (r.is_fenced, r.should_shut_down, r.is_caught_up),
                    (fenced, shut_down, caught_up),
                    "{state:?}"
                );
            }
        }
    }

    /// A heartbeat's errors carry Kafka's codes and leave the broker fenced; a negative
    /// broker id or epoch never reaches the controller.
    #[test]
    fn heartbeat_errors_carry_kafka_codes() {
        for (error, code) in [
            (
                RpcError::Api(ApiError::StaleBrokerEpoch {
                    broker_id: NodeId(4),
                    current: BrokerEpoch(80),
                    request: BrokerEpoch(77),
                }),
                K::StaleBrokerEpoch,
            ),
            (
                RpcError::Api(ApiError::BrokerIdNotRegistered {
                    broker_id: NodeId(4),
                }),
                K::BrokerIdNotRegistered,
            ),
            (RpcError::NotController { leader: None }, K::NotController),
            (RpcError::Timeout { timeout_ms: 1 }, K::RequestTimedOut),
        ] {
            let node = Node::answering(Err(error.clone()));
            let r = run(broker_heartbeat(&ctx(), &node, heartbeat_request(10)));
            assert_eq!(r.error_code, code.code(), "{error}");
            assert!(r.is_fenced && !r.should_shut_down, "{error}");
        }
        for request in [
            heartbeat_request(10).with_broker_id(BrokerId(-4)),
            heartbeat_request(10).with_broker_epoch(-1),
        ] {
            let node = Node::answering(Ok(answer(77, TargetState::Active, true)));
            let r = run(broker_heartbeat(&ctx(), &node, request));
            assert_eq!(r.error_code, K::InvalidRequest.code());
            assert!(r.is_fenced);
            assert!(node.sent.borrow().is_empty());
        }
    }

    /// UnregisterBroker becomes corum's UnregisterBroker; its refusals carry Kafka's codes
    /// and a message saying why.
    #[test]
    fn unregistration_and_its_refusals() {
        let node = Node::answering(Ok(answer(77, TargetState::Fenced, false)));
        let r = run(unregister_broker(
            &ctx(),
            &node,
            UnregisterBrokerRequest::default().with_broker_id(BrokerId(5)),
        ));
        assert_eq!(r.error_code, 0);
        assert!(r.error_message.is_none_or(|m| m.is_empty()));
        let sent = node.sent.borrow();
        let [RequestBody::UnregisterBroker(u)] = sent.as_slice() else {
            panic!("sent {sent:?}");
        };
        assert_eq!(u.broker_id, NodeId(5));
        drop(sent);

        for (error, code) in [
            (
                RpcError::Api(ApiError::BrokerNotFenced {
                    broker_id: NodeId(5),
                }),
                K::InvalidRequest,
            ),
            (
                RpcError::Api(ApiError::BrokerIdNotRegistered {
                    broker_id: NodeId(5),
                }),
                K::BrokerIdNotRegistered,
            ),
            (RpcError::NotController { leader: None }, K::NotController),
        ] {
            let mut node = Node::answering(Ok(answer(77, TargetState::Fenced, false)));
            node.unregister = Err(error.clone());
            let r = run(unregister_broker(
                &ctx(),
                &node,
                UnregisterBrokerRequest::default().with_broker_id(BrokerId(5)),
            ));
            assert_eq!(r.error_code, code.code(), "{error}");
            assert_eq!(
                r.error_message.as_deref(),
                Some(error.to_string().as_str()),
                "{error}"
            );
        }
        let node = Node::answering(Ok(answer(77, TargetState::Fenced, false)));
        let r = run(unregister_broker(
            &ctx(),
            &node,
            UnregisterBrokerRequest::default().with_broker_id(BrokerId(-1)),
        ));
        assert_eq!(r.error_code, K::InvalidRequest.code());
        assert!(r.error_message.is_some());
        assert!(node.sent.borrow().is_empty());
    }

    fn sent_one(node: &Node) -> RequestBody {
        let sent = node.sent.borrow();
        let [body] = sent.as_slice() else {
            panic!("one request expected, sent {sent:?}");
        };
        body.clone()
    }

    fn kafka_topic(n: u8) -> uuid::Uuid {
        uuid::Uuid::from_bytes([n; 16])
    }

    /// AllocateProducerIds carries the broker's id and epoch, and the block the controller
    /// gives comes back as Kafka's start and length.
    #[test]
    fn allocate_producer_ids_maps_the_block() {
        let node = Node::replying(Ok(ResponseBody::AllocateProducerIds(
            corum_controller::control::producer_id_control::AllocateProducerIdsResponse {
                first_producer_id: 7_000,
                count: 1_000,
            },
        )));
        let r = run(allocate_producer_ids(
            &ctx(),
            &node,
            AllocateProducerIdsRequest::default()
                .with_broker_id(BrokerId(4))
                .with_broker_epoch(40),
        ));
        assert_eq!(
            (r.error_code, r.producer_id_start.0, r.producer_id_len),
            (0, 7_000, 1_000)
        );
        let RequestBody::AllocateProducerIds(a) = sent_one(&node) else {
            panic!("not an allocation");
        };
        assert_eq!((a.broker_id, a.broker_epoch), (NodeId(4), BrokerEpoch(40)));
    }

    /// A block Kafka's fields cannot hold is an internal error, not a wrapped id; a negative
    /// id or epoch never reaches the controller; the controller's refusals carry Kafka's codes.
    #[test]
    fn allocate_producer_ids_errors() {
        let block = |first_producer_id, count| {
            Ok(ResponseBody::AllocateProducerIds(
                corum_controller::control::producer_id_control::AllocateProducerIdsResponse {
                    first_producer_id,
                    count,
                },
            ))
        };
        let request = |id: i32, epoch: i64| {
            AllocateProducerIdsRequest::default()
                .with_broker_id(BrokerId(id))
                .with_broker_epoch(epoch)
        };
        for (answer, code) in [
            (block(1 << 63, 1_000), K::UnknownServerError),
            (block(0, 1 << 31), K::UnknownServerError),
            (
                Err(RpcError::Api(ApiError::StaleBrokerEpoch {
                    broker_id: NodeId(4),
                    current: BrokerEpoch(41),
                    request: BrokerEpoch(40),
                })),
                K::StaleBrokerEpoch,
            ),
            (
                Err(RpcError::NotController { leader: None }),
                K::NotController,
            ),
            (Ok(ResponseBody::UnregisterBroker), K::UnknownServerError),
        ] {
            let node = Node::replying(answer.clone());
            let r = run(allocate_producer_ids(&ctx(), &node, request(4, 40)));
            assert_eq!(
                (r.error_code, r.producer_id_start.0, r.producer_id_len),
                (code.code(), -1, 0),
                "{answer:?}"
            );
        }
        for request in [request(-1, 40), request(4, -1)] {
            let node = Node::replying(block(0, 1_000));
            let r = run(allocate_producer_ids(&ctx(), &node, request));
            assert_eq!(r.error_code, K::InvalidRequest.code());
            assert!(node.sent.borrow().is_empty());
        }
    }

    /// An AlterPartition partition as a leader sends it: v2 lists the new ISR's ids, v3 each
    /// member with its broker epoch (-1: unknown).
    fn alter_request(version: i16) -> AlterPartitionRequest {
        let partition = alter_partition_request::PartitionData::default()
            .with_partition_index(2)
            .with_leader_epoch(6)
            .with_partition_epoch(9)
            .with_leader_recovery_state(1)
            // Each version's other field is ignored.
            .with_new_isr(if version >= 3 {
                vec![BrokerId(9)]
            } else {
                vec![BrokerId(4), BrokerId(5)]
            })
            .with_new_isr_with_epochs(if version >= 3 {
                vec![
                    alter_partition_request::BrokerState::default()
                        .with_broker_id(BrokerId(4))
                        .with_broker_epoch(40),
                    alter_partition_request::BrokerState::default()
                        .with_broker_id(BrokerId(5))
                        .with_broker_epoch(-1),
                ]
            } else {
                vec![alter_partition_request::BrokerState::default()
                    .with_broker_id(BrokerId(9))
                    .with_broker_epoch(90)]
            });
        AlterPartitionRequest::default()
            .with_broker_id(BrokerId(4))
            .with_broker_epoch(40)
            .with_topics(vec![alter_partition_request::TopicData::default()
                .with_topic_id(kafka_topic(3))
                .with_partitions(vec![partition])])
    }

    /// AlterPartition's fields reach corum's request (v2's `new_isr` without epochs, v3's
    /// `new_isr_with_epochs` with them, a negative member epoch as unknown), and each
    /// partition's result comes back: the new state, or its error with no leader.
    #[test]
    fn alter_partition_maps_fields_both_ways() {
        use corum_controller::control::replication_control::{
            AlterPartitionResponse as Altered, AlterPartitionTopicResult, AlteredPartition,
        };
        let topic = TopicId(Uuid([3; 16]));
        let answer = Altered {
            topics: vec![AlterPartitionTopicResult {
                topic_id: topic,
                partitions: vec![
                    (
                        PartitionId(2),
                        Ok(AlteredPartition {
                            leader: Some(NodeId(4)),
                            leader_epoch: LeaderEpoch(6),
                            isr: vec![NodeId(4), NodeId(5)],
                            leader_recovery_state: LeaderRecoveryState::Recovering,
                            partition_epoch: PartitionEpoch(10),
                        }),
                    ),
                    (
                        PartitionId(0),
                        Err(ApiError::FencedLeaderEpoch {
                            topic_id: topic,
                            partition: PartitionId(0),
                            current: LeaderEpoch(7),
                            request: LeaderEpoch(6),
                        }),
                    ),
                    (
                        PartitionId(1),
                        Ok(AlteredPartition {
                            leader: None,
                            leader_epoch: LeaderEpoch(3),
                            isr: vec![],
                            leader_recovery_state: LeaderRecoveryState::Recovered,
                            partition_epoch: PartitionEpoch(4),
                        }),
                    ),
                ],
            }],
        };
        for (version, members) in [
            (
                2,
                vec![
                    IsrMember {
                        broker_id: NodeId(4),
                        broker_epoch: None,
                    },
                    IsrMember {
                        broker_id: NodeId(5),
                        broker_epoch: None,
                    },
                ],
            ),
            (
                3,
                vec![
                    IsrMember {
                        broker_id: NodeId(4),
                        broker_epoch: Some(BrokerEpoch(40)),
                    },
                    IsrMember {
                        broker_id: NodeId(5),
                        broker_epoch: None,
                    },
                ],
            ),
        ] {
            let node = Node::replying(Ok(ResponseBody::AlterPartition(answer.clone())));
            let r = run(alter_partition(
                &ctx(),
                &node,
                alter_request(version),
                version,
            ));
            let RequestBody::AlterPartition(sent) = sent_one(&node) else {
                panic!("not an AlterPartition");
            };
            assert_eq!(
                sent,
                AlterPartition {
                    broker_id: NodeId(4),
                    broker_epoch: BrokerEpoch(40),
                    topics: vec![AlterPartitionTopic {
                        topic_id: topic,
                        partitions: vec![PartitionAlteration {
                            partition_id: PartitionId(2),
                            leader_epoch: LeaderEpoch(6),
                            new_isr_with_epochs: members,
                            leader_recovery_state: LeaderRecoveryState::Recovering,
                            partition_epoch: PartitionEpoch(9),
                        }],
                    }],
                },
                "v{version}"
            );
            assert_eq!(r.error_code, 0);
            let [t] = r.topics.as_slice() else {
                panic!("one topic: {r:?}");
            };
            assert_eq!(t.topic_id, kafka_topic(3));
            let parts: Vec<_> = t
                .partitions
                .iter()
                .map(|p| {
                    let isr: Vec<i32> = p.isr.iter().map(|b| b.0).collect();
                    (
                        p.partition_index,
                        p.error_code,
                        p.leader_id.0,
                        p.leader_epoch,
                        isr,
                        p.leader_recovery_state,
                        p.partition_epoch,
                    )
                })
                .collect();
            assert_eq!(
                parts,
                vec![
                    (2, 0, 4, 6, vec![4, 5], 1, 10),
                    (0, K::FencedLeaderEpoch.code(), -1, 0, vec![], 0, 0),
                    (1, 0, -1, 3, vec![], 0, 4),
                ]
            );
        }
    }

    /// What corum's request cannot state is INVALID_REQUEST for the whole AlterPartition and
    /// never reaches the controller: a negative broker id, broker epoch, partition index,
    /// leader or partition epoch or ISR member id, or an unknown leader recovery state.
    #[test]
    fn invalid_alter_partitions_never_reach_the_controller() {
        type Edit = fn(&mut AlterPartitionRequest);
        let cases: [(&str, Edit); 8] = [
            ("broker id", |r| r.broker_id = BrokerId(-1)),
            ("broker epoch", |r| r.broker_epoch = -1),
            ("partition", |r| {
                r.topics[0].partitions[0].partition_index = -2
            }),
            ("leader epoch", |r| {
                r.topics[0].partitions[0].leader_epoch = -1
            }),
            ("partition epoch", |r| {
                r.topics[0].partitions[0].partition_epoch = -1
            }),
            ("recovery state", |r| {
                r.topics[0].partitions[0].leader_recovery_state = 2
            }),
            ("v2 member", |r| {
                r.topics[0].partitions[0].new_isr[1] = BrokerId(-5)
            }),
            ("v3 member", |r| {
                r.topics[0].partitions[0].new_isr_with_epochs[1].broker_id = BrokerId(-5)
            }),
        ];
        for (what, edit) in cases {
            let version = if what == "v3 member" { 3 } else { 2 };
            let mut request = alter_request(version);
            if version == 2 {
                // Both fields filled, so each version's edit has something to change.
                request.topics[0].partitions[0].new_isr_with_epochs = alter_request(3).topics[0]
                    .partitions[0]
                    .new_isr_with_epochs
                    .clone();
            }
            edit(&mut request);
            let node = Node::replying(Err(RpcError::Timeout { timeout_ms: 1 }));
            let r = run(alter_partition(&ctx(), &node, request, version));
            assert_eq!(r.error_code, K::InvalidRequest.code(), "{what}");
            assert!(r.topics.is_empty(), "{what}");
            assert!(
                node.sent.borrow().is_empty(),
                "{what}: the controller was asked"
            );
        }
        // A negative member id in the field the version does not read is no error.
        let mut request = alter_request(3);
        request.topics[0].partitions[0].new_isr = vec![BrokerId(-1)];
        let node = Node::replying(Err(RpcError::Timeout { timeout_ms: 1 }));
        let r = run(alter_partition(&ctx(), &node, request, 3));
        assert_eq!(r.error_code, K::RequestTimedOut.code());
        assert_eq!(node.sent.borrow().len(), 1);
    }

    /// A whole-request refusal of AlterPartition is its top-level error code, with no topics.
    #[test]
    fn alter_partition_refusals_carry_kafka_codes() {
        for (error, code) in [
            (
                RpcError::Api(ApiError::StaleBrokerEpoch {
                    broker_id: NodeId(4),
                    current: BrokerEpoch(41),
                    request: BrokerEpoch(40),
                }),
                K::StaleBrokerEpoch,
            ),
            (RpcError::NotController { leader: None }, K::NotController),
            (RpcError::Timeout { timeout_ms: 1 }, K::RequestTimedOut),
        ] {
            let node = Node::replying(Err(error.clone()));
            let r = run(alter_partition(&ctx(), &node, alter_request(3), 3));
            assert_eq!(r.error_code, code.code(), "{error}");
            assert!(r.topics.is_empty());
        }
    }

    fn assign_request(partitions: &[i32]) -> AssignReplicasToDirsRequest {
        AssignReplicasToDirsRequest::default()
            .with_broker_id(BrokerId(4))
            .with_broker_epoch(40)
            .with_directories(vec![
                assign_replicas_to_dirs_request::DirectoryData::default()
                    .with_id(uuid::Uuid::from_bytes([44; 16]))
                    .with_topics(vec![assign_replicas_to_dirs_request::TopicData::default()
                        .with_topic_id(kafka_topic(3))
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|&p| {
                                    assign_replicas_to_dirs_request::PartitionData::default()
                                        .with_partition_index(p)
                                })
                                .collect(),
                        )]),
            ])
    }

    /// AssignReplicasToDirs reaches corum's request directory by directory, and each
    /// partition's result comes back as its error code.
    #[test]
    fn assign_replicas_to_dirs_maps_fields_both_ways() {
        use corum_controller::control::replication_control::{
            AssignReplicasToDirsResponse as Assigned, DirectoryAssignmentResult,
            TopicPartitionResults,
        };
        let topic = TopicId(Uuid([3; 16]));
        let answer = Assigned {
            directories: vec![DirectoryAssignmentResult {
                directory_id: Uuid([44; 16]),
                topics: vec![TopicPartitionResults {
                    topic_id: topic,
                    partitions: vec![
                        (PartitionId(0), Ok(())),
                        (
                            PartitionId(7),
                            Err(ApiError::UnknownPartition {
                                topic_id: topic,
                                partition: PartitionId(7),
                            }),
                        ),
                        (
                            PartitionId(1),
                            Err(ApiError::NotReplica {
                                broker_id: NodeId(4),
                                topic_id: topic,
                                partition: PartitionId(1),
                            }),
                        ),
                    ],
                }],
            }],
        };
        let node = Node::replying(Ok(ResponseBody::AssignReplicasToDirs(answer)));
        let r = run(assign_replicas_to_dirs(
            &ctx(),
            &node,
            assign_request(&[0, 7, 1]),
        ));
        let RequestBody::AssignReplicasToDirs(sent) = sent_one(&node) else {
            panic!("not an AssignReplicasToDirs");
        };
        assert_eq!(
            sent,
            AssignDirs {
                broker_id: NodeId(4),
                broker_epoch: BrokerEpoch(40),
                directories: vec![DirectoryAssignment {
                    directory_id: Uuid([44; 16]),
                    topics: vec![TopicPartitions {
                        topic_id: topic,
                        partitions: vec![PartitionId(0), PartitionId(7), PartitionId(1)],
                    }],
                }],
            }
        );
        assert_eq!(r.error_code, 0);
        let [d] = r.directories.as_slice() else {
            panic!("one directory: {r:?}");
        };
        assert_eq!(d.id, uuid::Uuid::from_bytes([44; 16]));
        assert_eq!(d.topics.len(), 1);
        assert_eq!(d.topics[0].topic_id, kafka_topic(3));
        let codes: Vec<(i32, i16)> = d.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        assert_eq!(
            codes,
            [
                (0, 0),
                (7, K::UnknownTopicOrPartition.code()),
                (1, K::NotLeaderOrFollower.code())
            ]
        );
    }

    /// A negative broker id, epoch or partition is INVALID_REQUEST without asking the
    /// controller; the controller's whole-request refusals carry Kafka's codes.
    #[test]
    fn assign_replicas_to_dirs_errors() {
        for request in [
            assign_request(&[0]).with_broker_id(BrokerId(-1)),
            assign_request(&[0]).with_broker_epoch(-1),
            assign_request(&[0, -1]),
        ] {
            let node = Node::replying(Err(RpcError::Timeout { timeout_ms: 1 }));
            let r = run(assign_replicas_to_dirs(&ctx(), &node, request));
            assert_eq!(r.error_code, K::InvalidRequest.code());
            assert!(r.directories.is_empty());
            assert!(node.sent.borrow().is_empty());
        }
        for (error, code) in [
            (
                RpcError::Api(ApiError::BrokerIdNotRegistered {
                    broker_id: NodeId(4),
                }),
                K::BrokerIdNotRegistered,
            ),
            (
                RpcError::Api(ApiError::UnsupportedVersion {
                    reason: "metadata.version".into(),
                }),
                K::UnsupportedVersion,
            ),
            (RpcError::NotController { leader: None }, K::NotController),
        ] {
            let node = Node::replying(Err(error.clone()));
            let r = run(assign_replicas_to_dirs(&ctx(), &node, assign_request(&[0])));
            assert_eq!(r.error_code, code.code(), "{error}");
            assert!(r.directories.is_empty());
        }
    }
}
