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
    BrokerHeartbeatRequest as Heartbeat, BrokerRegistrationRequest as Registration, TargetState,
    UnregisterBrokerRequest as Unregister,
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

fn level(v: i16, what: &str) -> Result<u16, KafkaError> {
    u16::try_from(v).map_err(|_| {
        KafkaError::new(
            K::InvalidRequest,
            format!("feature {what}: a supported level is negative ({v})"),
        )
    })
}

fn registration(
    ctx: &ListenerContext,
    r: &BrokerRegistrationRequest,
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
        previous_broker_epoch: u64::try_from(r.previous_broker_epoch).ok().map(BrokerEpoch),
    })
}

/// Serves BrokerRegistration: the broker's epoch, or why it may not join.
pub async fn broker_registration<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: BrokerRegistrationRequest,
) -> BrokerRegistrationResponse {
    let mut response = BrokerRegistrationResponse::default().with_broker_epoch(-1);
    let registration = match registration(ctx, &r) {
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
    let id = match broker_id(r.broker_id.0) {
        Ok(id) => id,
        Err(e) => {
            response.error_code = e.code;
            return response;
        }
    };
    let (Ok(epoch), Ok(applied)) = (
        u64::try_from(r.broker_epoch),
        u64::try_from(r.current_metadata_offset.max(-1) + 1),
    ) else {
        response.error_code = K::InvalidRequest.code();
        return response;
    };
    let heartbeat = Heartbeat {
        broker_id: id,
        broker_epoch: Some(BrokerEpoch(epoch)),
        incarnation_id: corum_types::Uuid::default(),
        listeners: Vec::new(),
        features: Vec::new(),
        rack: None,
        next_metadata_offset: LogOffset(applied),
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
    let (id, epoch) = match (broker_id(r.broker_id.0), u64::try_from(r.broker_epoch)) {
        (Ok(id), Ok(epoch)) => (id, epoch),
        _ => {
            response.error_code = K::InvalidRequest.code();
            return response;
        }
    };
    let answer = call(
        backend,
        RequestBody::AllocateProducerIds(Allocate {
            broker_id: id,
            broker_epoch: BrokerEpoch(epoch),
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
    let (Ok(requester), Ok(epoch)) = (broker_id(r.broker_id.0), u64::try_from(r.broker_epoch))
    else {
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
        broker_id: requester,
        broker_epoch: BrokerEpoch(epoch),
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
    let (Ok(requester), Ok(epoch)) = (broker_id(r.broker_id.0), u64::try_from(r.broker_epoch))
    else {
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
        broker_id: requester,
        broker_epoch: BrokerEpoch(epoch),
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
