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
//! | AlterUserScramCredentials, DescribeUserScramCredentials | the same | see [`crate::api::scram`] |
//! | SaslHandshake, SaslAuthenticate | — | served by [`crate::sasl`] on a SASL listener; ILLEGAL_SASL_STATE here |
//! | DescribeAcls, CreateAcls, DeleteAcls | `DescribeAcls`, `CreateAcls`, `DeleteAcls` | SECURITY_DISABLED without an authorizer, as Kafka; see [`crate::api::acls`] |
//! | BrokerRegistration, BrokerHeartbeat, UnregisterBroker, AlterPartition, AssignReplicasToDirs | `RegisterBroker`, `BrokerHeartbeat`, `UnregisterBroker`, `AlterPartition`, `AssignReplicasToDirs` | see [`crate::api::brokers`] |
//! | AllocateProducerIds | `AllocateProducerIds` | blocks of 1000 |
//! | ListPartitionReassignments | — | none in progress: corum does not move replicas |
//! | Envelope (KIP-590, from brokers) | the wrapped request's | see [`crate::api::envelope`] |
//! | Fetch, FetchSnapshot (of `__cluster_metadata`, by brokers) | `Fetch`, `FetchSnapshot` (the Raft core's observer fetches) | see [`crate::api::raft_fetch`]; records rendered by [`crate::log`] |
//! | AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter | `AddVoter`, `RemoveVoter`, `UpdateVoter` (UpdateRaftVoter: `DescribeQuorum` first, for the epoch) | see [`crate::api::voters`] |
//!
//! Every request is authorized first ([`crate::auth`]) when the node has an authorizer.
//!
//! A whole request that fails (not the controller, timed out) is answered with that error on
//! every item, as Kafka does, so each client's own retry rules apply.

use corum_protocol::{LocalRead, RequestBody, ResponseBody, RpcError};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::api;
use crate::auth::{topic_denied, Gate, Session};
use crate::backend::{Backend, ListenerContext};
use crate::log::RecordParts;
use crate::request::{Parsed, RequestHead};

/// What to send back for one request.
#[derive(Debug)]
pub struct Answer {
    pub api: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub body: ResponseKind,
    /// A Fetch answer's records, apart from `body` (whose one partition's records field
    /// [`crate::response::encode_answer`] fills with them): the rendered batches where they
    /// lie. `None` for every other answer, and for a Fetch answer without a records field.
    pub records: Option<RecordParts>,
}

impl Answer {
    /// Whether this answers a Fetch (a broker following the metadata log).
    pub fn is_fetch(&self) -> bool {
        self.api == ApiKey::Fetch
    }
}

/// Serves one parsed request from an unauthenticated client of unknown address (tests, the
/// fuzzer): [`serve_as`] with an anonymous [`Session`].
pub async fn serve<B: Backend>(ctx: &ListenerContext, backend: &B, parsed: Parsed) -> Answer {
    serve_as(ctx, &Session::anonymous("0.0.0.0"), backend, parsed).await
}

/// Serves one parsed request sent by `session` (authorized as [`crate::auth`] says).
pub async fn serve_as<B: Backend>(
    ctx: &ListenerContext,
    session: &Session,
    backend: &B,
    parsed: Parsed,
) -> Answer {
    match parsed {
        Parsed::ApiVersionsTooNew { head } => Answer {
            api: ApiKey::ApiVersions,
            version: 0,
            correlation_id: head.correlation_id,
            body: ResponseKind::ApiVersions(api::api_versions::too_new(&ctx.served)),
            records: None,
        },
        Parsed::Request { head, body } => {
            let version = head.api_version;
            let gate = Gate::new(backend.authorizer(), session);
            let mut records = None;
            let response = dispatch(ctx, &gate, backend, &head, body, &mut records).await;
            Answer {
                api: head.api_key,
                version,
                correlation_id: head.correlation_id,
                body: response,
                records,
            }
        }
    }
}

async fn dispatch<B: Backend>(
    ctx: &ListenerContext,
    gate: &Gate<'_>,
    backend: &B,
    head: &RequestHead,
    // Boxed (as parsed): held by value, the largest request type would size every request's
    // future, and each API's future is boxed below for the same reason.
    body: Box<RequestKind>,
    // A Fetch answer's records, apart from the answer.
    records: &mut Option<RecordParts>,
) -> ResponseKind {
    let v = head.api_version;
    if let Some(denied) = denied_whole(gate, head.api_key, &body) {
        return denied;
    }
    match *body {
        RequestKind::ApiVersions(_) => {
            ResponseKind::ApiVersions(Box::pin(api::api_versions::serve(ctx, backend, v)).await)
        }
        RequestKind::Metadata(r) => {
            let named = r.topics.is_some();
            let mut response = Box::pin(api::metadata::metadata(ctx, backend, r, v)).await;
            filter_described(gate, named, &mut response.topics, |t| {
                (t.name.as_ref().map(|n| n.0.as_str()), &mut t.error_code)
            });
            for t in response
                .topics
                .iter_mut()
                .filter(|t| t.error_code == topic_denied())
            {
                t.partitions.clear();
                t.topic_id = Default::default();
            }
            ResponseKind::Metadata(response)
        }
        RequestKind::DescribeTopicPartitions(r) => {
            let named = !r.topics.is_empty();
            let mut response =
                Box::pin(api::metadata::describe_topic_partitions(ctx, backend, r)).await;
            filter_described(gate, named, &mut response.topics, |t| {
                (t.name.as_ref().map(|n| n.0.as_str()), &mut t.error_code)
            });
            for t in response
                .topics
                .iter_mut()
                .filter(|t| t.error_code == topic_denied())
            {
                t.partitions.clear();
                t.topic_id = Default::default();
            }
            ResponseKind::DescribeTopicPartitions(response)
        }
        RequestKind::CreateTopics(mut r) => {
            let mut denied = Vec::new();
            let topics = gate.topics(head.api_key);
            r.topics.retain(|t| {
                let ok = topics.check(t.name.0.as_str()).is_ok();
                if !ok {
                    denied.push(t.name.clone());
                }
                ok
            });
            let mut response = Box::pin(api::topics::create_topics(ctx, backend, r, v)).await;
            response.topics.extend(denied.into_iter().map(|name| {
                api::topics::create_error(
                    name.0.as_str(),
                    crate::errors::KafkaError {
                        code: topic_denied(),
                        message: None,
                    },
                )
            }));
            ResponseKind::CreateTopics(response)
        }
        RequestKind::DeleteTopics(mut r) => {
            let mut denied = Vec::new();
            let topics = gate.topics(head.api_key);
            r.topic_names.retain(|n| {
                let ok = topics.check(n.0.as_str()).is_ok();
                if !ok {
                    denied.push((Some(n.clone()), Default::default()));
                }
                ok
            });
            r.topics.retain(|t| {
                let ok = match t.name.as_ref().filter(|_| t.topic_id.is_nil()) {
                    Some(name) => topics.check(name.0.as_str()).is_ok(),
                    None => topics.check_id(&t.topic_id.to_string()).is_ok(),
                };
                if !ok {
                    denied.push((t.name.clone(), t.topic_id));
                }
                ok
            });
            let mut response = Box::pin(api::topics::delete_topics(ctx, backend, r, v)).await;
            response
                .responses
                .extend(denied.into_iter().map(|(name, id)| {
                    kafka_protocol::messages::delete_topics_response::DeletableTopicResult::default(
                    )
                    .with_name(name)
                    .with_topic_id(id)
                    .with_error_code(topic_denied())
                }));
            ResponseKind::DeleteTopics(response)
        }
        RequestKind::CreatePartitions(mut r) => {
            let mut denied = Vec::new();
            let topics = gate.topics(head.api_key);
            r.topics.retain(|t| {
                let ok = topics.check(t.name.0.as_str()).is_ok();
                if !ok {
                    denied.push(t.name.clone());
                }
                ok
            });
            let mut response = Box::pin(api::topics::create_partitions(ctx, backend, r)).await;
            response.results.extend(denied.into_iter().map(|name| {
                kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult::default()
                    .with_name(name)
                    .with_error_code(topic_denied())
            }));
            ResponseKind::CreatePartitions(response)
        }
        RequestKind::DescribeConfigs(mut r) => {
            let denied = configs_denied(gate, head.api_key, &mut r.resources, |res| {
                (res.resource_type, &res.resource_name)
            });
            let mut response = Box::pin(api::configs::describe_configs(ctx, backend, r, v)).await;
            response
                .results
                .extend(denied.into_iter().map(|(t, name, code)| {
                kafka_protocol::messages::describe_configs_response::DescribeConfigsResult::default(
                )
                .with_resource_type(t)
                .with_resource_name(name)
                .with_error_code(code)
            }));
            ResponseKind::DescribeConfigs(response)
        }
        RequestKind::AlterConfigs(mut r) => {
            let denied = configs_denied(gate, head.api_key, &mut r.resources, |res| {
                (res.resource_type, &res.resource_name)
            });
            let mut response = Box::pin(api::configs::alter_configs(ctx, backend, r)).await;
            response.responses.extend(denied.into_iter().map(|(t, name, code)| {
                kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_resource_type(t)
                    .with_resource_name(name)
                    .with_error_code(code)
            }));
            ResponseKind::AlterConfigs(response)
        }
        RequestKind::IncrementalAlterConfigs(mut r) => {
            let denied = configs_denied(gate, head.api_key, &mut r.resources, |res| {
                (res.resource_type, &res.resource_name)
            });
            let mut response =
                Box::pin(api::configs::incremental_alter_configs(ctx, backend, r)).await;
            response.responses.extend(denied.into_iter().map(|(t, name, code)| {
                kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_resource_type(t)
                    .with_resource_name(name)
                    .with_error_code(code)
            }));
            ResponseKind::IncrementalAlterConfigs(response)
        }
        RequestKind::DescribeCluster(r) => ResponseKind::DescribeCluster(
            Box::pin(api::cluster::describe_cluster(ctx, backend, r)).await,
        ),
        RequestKind::DescribeQuorum(_) => ResponseKind::DescribeQuorum(
            Box::pin(api::cluster::describe_quorum(ctx, backend, v)).await,
        ),
        RequestKind::UpdateFeatures(r) => ResponseKind::UpdateFeatures(
            Box::pin(api::features::update_features(ctx, backend, r, v)).await,
        ),
        RequestKind::ElectLeaders(r) => ResponseKind::ElectLeaders(
            Box::pin(api::topics::elect_leaders(ctx, backend, r, v)).await,
        ),
        RequestKind::DescribeAcls(r) => ResponseKind::DescribeAcls(
            Box::pin(api::acls::describe_acls(ctx, backend, r, gate.enabled())).await,
        ),
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(
            Box::pin(api::acls::create_acls(ctx, backend, r, gate.enabled())).await,
        ),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(
            Box::pin(api::acls::delete_acls(ctx, backend, r, gate.enabled())).await,
        ),
        RequestKind::AddRaftVoter(r) => {
            ResponseKind::AddRaftVoter(Box::pin(api::voters::add_raft_voter(ctx, backend, r)).await)
        }
        RequestKind::RemoveRaftVoter(r) => ResponseKind::RemoveRaftVoter(
            Box::pin(api::voters::remove_raft_voter(ctx, backend, r)).await,
        ),
        RequestKind::UpdateRaftVoter(r) => ResponseKind::UpdateRaftVoter(
            Box::pin(api::voters::update_raft_voter(ctx, backend, r)).await,
        ),
        RequestKind::BrokerRegistration(r) => ResponseKind::BrokerRegistration(
            Box::pin(api::brokers::broker_registration(ctx, backend, r, v)).await,
        ),
        RequestKind::BrokerHeartbeat(r) => ResponseKind::BrokerHeartbeat(
            Box::pin(api::brokers::broker_heartbeat(ctx, backend, r)).await,
        ),
        RequestKind::UnregisterBroker(r) => ResponseKind::UnregisterBroker(
            Box::pin(api::brokers::unregister_broker(ctx, backend, r)).await,
        ),
        RequestKind::AlterPartition(r) => ResponseKind::AlterPartition(
            Box::pin(api::brokers::alter_partition(ctx, backend, r, v)).await,
        ),
        RequestKind::AssignReplicasToDirs(r) => ResponseKind::AssignReplicasToDirs(
            Box::pin(api::brokers::assign_replicas_to_dirs(ctx, backend, r)).await,
        ),
        RequestKind::AllocateProducerIds(r) => ResponseKind::AllocateProducerIds(
            Box::pin(api::brokers::allocate_producer_ids(ctx, backend, r)).await,
        ),
        RequestKind::ListPartitionReassignments(_) => {
            ResponseKind::ListPartitionReassignments(api::topics::list_partition_reassignments())
        }
        RequestKind::Envelope(r) => ResponseKind::Envelope(
            Box::pin(api::envelope::envelope(ctx, gate.session(), backend, r)).await,
        ),
        RequestKind::Fetch(r) => {
            let answer = Box::pin(api::raft_fetch::fetch(ctx, backend, r, v)).await;
            *records = answer.records;
            ResponseKind::Fetch(answer.response)
        }
        RequestKind::FetchSnapshot(r) => ResponseKind::FetchSnapshot(
            Box::pin(api::raft_fetch::fetch_snapshot(ctx, backend, r, v)).await,
        ),
        RequestKind::AlterUserScramCredentials(r) => ResponseKind::AlterUserScramCredentials(
            Box::pin(api::scram::alter_user_scram_credentials(ctx, backend, r)).await,
        ),
        RequestKind::DescribeUserScramCredentials(r) => ResponseKind::DescribeUserScramCredentials(
            Box::pin(api::scram::describe_user_scram_credentials(ctx, backend, r)).await,
        ),
        // A SASL listener's connection handles these itself (`crate::sasl`); here they come
        // on a listener without SASL, or after authentication: ILLEGAL_SASL_STATE, as Kafka.
        RequestKind::SaslHandshake(_) | RequestKind::SaslAuthenticate(_) => {
            crate::sasl::illegal_state(&body).expect("a SASL request")
        }
        // `request::parse` admits only the APIs of `apis::SERVED`, each matched above.
        _ => unreachable!("request::parse admits only served APIs"),
    }
}

/// The answer to a request the session may not make at all (an operation on the cluster, see
/// [`crate::auth`]), or `None` to serve it.
fn denied_whole(gate: &Gate<'_>, api: ApiKey, body: &RequestKind) -> Option<ResponseKind> {
    gate.whole(api)
        .err()
        .map(|_| crate::auth::cluster_denied_response(body))
}

/// Takes the resources the session may not touch out of a configs request of `api` (see
/// [`Gate::config`]): (type, name, error code) of each, for the answer to list beside the
/// others' results.
fn configs_denied<T>(
    gate: &Gate<'_>,
    api: ApiKey,
    resources: &mut Vec<T>,
    key: impl Fn(&T) -> (i8, &kafka_protocol::protocol::StrBytes),
) -> Vec<(i8, kafka_protocol::protocol::StrBytes, i16)> {
    let mut denied = Vec::new();
    resources.retain(|res| {
        let (resource_type, name) = key(res);
        match gate.config(api, resource_type, name.as_str()) {
            Ok(()) => true,
            Err(refusal) => {
                denied.push((resource_type, name.clone(), refusal.kafka_error_code()));
                false
            }
        }
    });
    denied
}

/// Topics the session may not DESCRIBE: marked TOPIC_AUTHORIZATION_FAILED when the request
/// named them, left out when it asked for all (Kafka's Metadata).
fn filter_described<T>(
    gate: &Gate<'_>,
    named: bool,
    topics: &mut Vec<T>,
    fields: impl Fn(&mut T) -> (Option<&str>, &mut i16),
) {
    if !gate.enabled() {
        return;
    }
    topics.retain_mut(|t| {
        let (name, code) = fields(t);
        let ok = name.is_none_or(|n| gate.describe_topic(n, named).is_ok());
        if ok {
            return true;
        }
        *code = topic_denied();
        named
    });
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
    // Boxed: every API's future holds this one, and the backend's would make each of them an
    // allocation of over 1 KiB (glibc's slow, consolidating path) instead of two small ones.
    let response = Box::pin(backend.call(body, timeout_ms)).await?;
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
        LocalRead::DescribeAcls(r) => RequestBody::DescribeAcls(r),
        LocalRead::DescribeUserScramCredentials(r) => RequestBody::DescribeUserScramCredentials(r),
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
        RequestBody::DescribeAcls(r) => LocalRead::DescribeAcls(r.clone()),
        RequestBody::DescribeUserScramCredentials(r) => {
            LocalRead::DescribeUserScramCredentials(r.clone())
        }
        _ => return None,
    })
}
