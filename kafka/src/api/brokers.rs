//! What Kafka brokers ask their controllers about themselves: BrokerRegistration,
//! BrokerHeartbeat and UnregisterBroker, as corum's broker heartbeat (a registration is a
//! heartbeat without an epoch) and UnregisterBroker; and AllocateProducerIds.
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
    BrokerHeartbeatRequest as Heartbeat, TargetState, UnregisterBrokerRequest as Unregister,
};
use corum_controller::control::producer_id_control::AllocateProducerIdsRequest as Allocate;
use corum_controller::records::{ListenerV1, SupportedFeatureV1};
use corum_protocol::{RequestBody, ResponseBody};
use corum_types::{BrokerEpoch, LogOffset, NodeId};
use kafka_protocol::error::ResponseError as K;
use kafka_protocol::messages::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, BrokerHeartbeatRequest,
    BrokerHeartbeatResponse, BrokerRegistrationRequest, BrokerRegistrationResponse,
    UnregisterBrokerRequest, UnregisterBrokerResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::api::corum_uuid;
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
) -> Result<Heartbeat, KafkaError> {
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
    Ok(Heartbeat {
        broker_id: broker_id(r.broker_id.0)?,
        broker_epoch: None,
        incarnation_id: corum_uuid(r.incarnation_id),
        listeners: r
            .listeners
            .iter()
            .map(|l| ListenerV1 {
                name: l.name.to_string(),
                host: l.host.to_string(),
                port: l.port,
            })
            .collect(),
        features,
        rack: r.rack.as_ref().map(|s| s.to_string()),
        next_metadata_offset: LogOffset(0),
        want_fence: true,
        want_shutdown: false,
    })
}

/// Serves BrokerRegistration: the broker's epoch, or why it may not join.
pub async fn broker_registration<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: BrokerRegistrationRequest,
) -> BrokerRegistrationResponse {
    let mut response = BrokerRegistrationResponse::default().with_broker_epoch(-1);
    let heartbeat = match registration(ctx, &r) {
        Ok(h) => h,
        Err(e) => {
            response.error_code = e.code;
            return response;
        }
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
