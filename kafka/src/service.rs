//! One parsed Kafka request in, its response out: the dispatch over the served APIs and the
//! translation of each into corum's own requests ([`RequestBody`]) and back.
//!
//! | Kafka API | corum request(s) | notes |
//! |---|---|---|
//! | ApiVersions | `DescribeFeatures` (v3+) | the served table ([`crate::apis`]); KIP-511 fallback |
//! | Metadata | `DescribeTopics`, `DescribeCluster`, `DescribeControllers` | see [`crate::api::metadata`] |
//! | CreateTopics | `CreateTopics` | duplicates refused; assignments must number partitions `0..n` |
//! | DeleteTopics | `DeleteTopics` | by name (v0-5) or by name or id (v6) |
//! | CreatePartitions | `CreatePartitions` | |
//! | DescribeConfigs, AlterConfigs, IncrementalAlterConfigs | `DescribeConfigs`, `IncrementalAlterConfigs` | see [`crate::api::configs`] |
//! | DescribeCluster | `DescribeCluster`, `DescribeControllers` | endpoint type broker or controller (KIP-919) |
//! | DescribeQuorum | `DescribeQuorum` | the metadata log's one partition |
//! | UpdateFeatures | `UpdateFeatures` | upgrade / safe / unsafe downgrade, validate_only |
//! | ElectLeaders | `ElectLeaders` | preferred and unclean |
//! | DescribeTopicPartitions | `DescribeTopicsV2` (with the eligible leader replicas) | |
//! | DescribeAcls, CreateAcls, DeleteAcls | — | SECURITY_DISABLED, as Kafka without an authorizer |
//! | BrokerRegistration, BrokerHeartbeat, UnregisterBroker, AlterPartition, AssignReplicasToDirs | `RegisterBroker`, `BrokerHeartbeat`, `UnregisterBroker`, `AlterPartition`, `AssignReplicasToDirs` | see [`crate::api::brokers`] |
//! | AllocateProducerIds | `AllocateProducerIds` | blocks of 1000 |
//! | ListPartitionReassignments | — | none in progress: corum does not move replicas |
//! | Envelope (KIP-590, from brokers) | the wrapped request's | see [`crate::api::envelope`] |
//! | Fetch, FetchSnapshot (of `__cluster_metadata`, by brokers) | `Fetch`, `FetchSnapshot` (the Raft core's observer fetches) | see [`crate::api::raft_fetch`]; records rendered by [`crate::log`] |
//! | AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter | `AddVoter`, `RemoveVoter`, `UpdateVoter` (UpdateRaftVoter: `DescribeQuorum` first, for the epoch) | see [`crate::api::voters`] |
//!
//! A whole request that fails (not the controller, timed out) is answered with that error on
//! every item, as Kafka does, so each client's own retry rules apply.

use corum_protocol::{LocalRead, RequestBody, ResponseBody, RpcError};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::api;
use crate::backend::{Backend, ListenerContext};
use crate::request::{Parsed, RequestHead};

/// What to send back for one request.
#[derive(Debug)]
pub struct Answer {
    pub api: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub body: ResponseKind,
}

/// Serves one parsed request.
pub async fn serve<B: Backend>(ctx: &ListenerContext, backend: &B, parsed: Parsed) -> Answer {
    match parsed {
        Parsed::ApiVersionsTooNew { head } => Answer {
            api: ApiKey::ApiVersions,
            version: 0,
            correlation_id: head.correlation_id,
            body: ResponseKind::ApiVersions(api::api_versions::too_new(&ctx.served)),
        },
        Parsed::Request { head, body } => {
            let version = head.api_version;
            let response = dispatch(ctx, backend, &head, *body).await;
            Answer {
                api: head.api_key,
                version,
                correlation_id: head.correlation_id,
                body: response,
            }
        }
    }
}

async fn dispatch<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    head: &RequestHead,
    body: RequestKind,
) -> ResponseKind {
    let v = head.api_version;
    match body {
        RequestKind::ApiVersions(_) => {
            ResponseKind::ApiVersions(api::api_versions::serve(ctx, backend, v).await)
        }
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(api::metadata::metadata(ctx, backend, r, v).await)
        }
        RequestKind::DescribeTopicPartitions(r) => ResponseKind::DescribeTopicPartitions(
            api::metadata::describe_topic_partitions(ctx, backend, r).await,
        ),
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(api::topics::create_topics(ctx, backend, r, v).await)
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(api::topics::delete_topics(ctx, backend, r, v).await)
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(api::topics::create_partitions(ctx, backend, r).await)
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(api::configs::describe_configs(ctx, backend, r, v).await)
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(api::configs::alter_configs(ctx, backend, r).await)
        }
        RequestKind::IncrementalAlterConfigs(r) => ResponseKind::IncrementalAlterConfigs(
            api::configs::incremental_alter_configs(ctx, backend, r).await,
        ),
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(api::cluster::describe_cluster(ctx, backend, r).await)
        }
        RequestKind::DescribeQuorum(_) => {
            ResponseKind::DescribeQuorum(api::cluster::describe_quorum(ctx, backend, v).await)
        }
        RequestKind::UpdateFeatures(r) => {
            ResponseKind::UpdateFeatures(api::features::update_features(ctx, backend, r, v).await)
        }
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(api::topics::elect_leaders(ctx, backend, r, v).await)
        }
        RequestKind::DescribeAcls(_) => ResponseKind::DescribeAcls(api::acls::describe_acls()),
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(api::acls::create_acls(&r)),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(api::acls::delete_acls(&r)),
        RequestKind::AddRaftVoter(r) => {
            ResponseKind::AddRaftVoter(api::voters::add_raft_voter(ctx, backend, r).await)
        }
        RequestKind::RemoveRaftVoter(r) => {
            ResponseKind::RemoveRaftVoter(api::voters::remove_raft_voter(ctx, backend, r).await)
        }
        RequestKind::UpdateRaftVoter(r) => {
            ResponseKind::UpdateRaftVoter(api::voters::update_raft_voter(ctx, backend, r).await)
        }
        RequestKind::BrokerRegistration(r) => ResponseKind::BrokerRegistration(
            api::brokers::broker_registration(ctx, backend, r, v).await,
        ),
        RequestKind::BrokerHeartbeat(r) => {
            ResponseKind::BrokerHeartbeat(api::brokers::broker_heartbeat(ctx, backend, r).await)
        }
        RequestKind::UnregisterBroker(r) => {
            ResponseKind::UnregisterBroker(api::brokers::unregister_broker(ctx, backend, r).await)
        }
        RequestKind::AlterPartition(r) => {
            ResponseKind::AlterPartition(api::brokers::alter_partition(ctx, backend, r, v).await)
        }
        RequestKind::AssignReplicasToDirs(r) => ResponseKind::AssignReplicasToDirs(
            api::brokers::assign_replicas_to_dirs(ctx, backend, r).await,
        ),
        RequestKind::AllocateProducerIds(r) => ResponseKind::AllocateProducerIds(
            api::brokers::allocate_producer_ids(ctx, backend, r).await,
        ),
        RequestKind::ListPartitionReassignments(_) => {
            ResponseKind::ListPartitionReassignments(api::topics::list_partition_reassignments())
        }
        RequestKind::Envelope(r) => {
            ResponseKind::Envelope(api::envelope::envelope(ctx, backend, r).await)
        }
        RequestKind::Fetch(r) => {
            ResponseKind::Fetch(api::raft_fetch::fetch(ctx, backend, r, v).await)
        }
        RequestKind::FetchSnapshot(r) => {
            ResponseKind::FetchSnapshot(api::raft_fetch::fetch_snapshot(ctx, backend, r, v).await)
        }
        // `request::parse` admits only the APIs of `apis::SERVED`, each matched above.
        _ => unreachable!("request::parse admits only served APIs"),
    }
}

/// Calls `backend` and unwraps the expected response variant; an unexpected variant is an
/// internal error (the node answered another request).
pub(crate) async fn call<B: Backend, T>(
    backend: &B,
    body: RequestBody,
    timeout_ms: u32,
    pick: impl FnOnce(ResponseBody) -> Option<T>,
) -> Result<T, RpcError> {
    let kind = body.kind();
    let response = backend.call(body, timeout_ms).await?;
    pick(response).ok_or_else(|| RpcError::Internal {
        reason: format!("the node answered {kind} with another response"),
    })
}

/// A read, as sent: the plain request, which the active controller answers (a standby
/// forwards it), so that a client reads its own acknowledged writes at whatever node it
/// reached. A [`Backend`] that cannot reach the active controller answers it as the
/// [`LocalRead`] of the same name, from its own replayed image ([`as_local_read`]).
pub(crate) fn read(read: LocalRead) -> RequestBody {
    match read {
        LocalRead::DescribeCluster => RequestBody::DescribeCluster,
        LocalRead::DescribeConfigs(r) => RequestBody::DescribeConfigs(r),
        LocalRead::DescribeTopics(r) => RequestBody::DescribeTopics(r),
        LocalRead::DescribeControllers => RequestBody::DescribeControllers,
        LocalRead::DescribeFeatures => RequestBody::DescribeFeatures,
        LocalRead::DescribeTopicsV2(r) => RequestBody::DescribeTopicsV2(r),
    }
}

/// The [`LocalRead`] a node may answer `body` with when the active controller cannot be
/// reached; `None` for a write.
pub fn as_local_read(body: &RequestBody) -> Option<LocalRead> {
    Some(match body {
        RequestBody::DescribeCluster => LocalRead::DescribeCluster,
        RequestBody::DescribeConfigs(r) => LocalRead::DescribeConfigs(r.clone()),
        RequestBody::DescribeTopics(r) => LocalRead::DescribeTopics(r.clone()),
        RequestBody::DescribeControllers => LocalRead::DescribeControllers,
        RequestBody::DescribeFeatures => LocalRead::DescribeFeatures,
        RequestBody::DescribeTopicsV2(r) => LocalRead::DescribeTopicsV2(r.clone()),
        _ => return None,
    })
}
