//! Authorization on the private client listener ([`crate::rpc_server`]), with Kafka's ACL
//! model: each request of corum's protocol is checked as the Kafka API of the same meaning
//! ([`corum_kafka::auth::kafka_api`]), with what that API needs on the Kafka listener
//! ([`corum_kafka::auth::needs`], the one table both listeners use) and the same decisions
//! ([`Gate`]: the node's authorizer, `super.users`, `allow.everyone.if.no.acl.found`, a
//! controller's certificate passing). Without an authorizer nothing here runs.
//!
//! | the API needs | a refusal | the request |
//! |---|---|---|
//! | an operation on the cluster (voter changes, ACLs, features, broker and controller registrations, heartbeats, fetches, DescribeCluster, DescribeQuorum, ...) | the whole request: `RpcError::AuthorizationFailed`, Kafka's CLUSTER_AUTHORIZATION_FAILED | never reaches the controller |
//! | an operation on each topic (CreateTopics, CreateTopicsWithConfigs, DeleteTopics, DeleteTopicsV2, CreatePartitions) | that topic: `ApiError::AuthorizationFailed` (TOPIC_AUTHORIZATION_FAILED) in its place in the answer | sent without the refused topics |
//! | an operation on each config resource (IncrementalAlterConfigs, AlterConfigs, DescribeConfigs) | that resource (TOPIC_ / CLUSTER_AUTHORIZATION_FAILED) in its place | sent without the refused resources |
//! | DESCRIBE on each topic described (DescribeTopics, DescribeTopicsV2) | a topic named: in its place; all topics asked for: left out | sent whole; the answer is filtered |
//!
//! A request whose every item is refused is answered here (nothing is sent). When the part
//! that was sent fails as a whole (`NotController`, `Timeout`), that failure is the answer,
//! as on the Kafka listener. Refused items are put back at their place in the request's
//! order, so an answer lists its items as the request did.

use corum_controller::acl::AuthorizationFailure;
use corum_controller::control::replication_control::TopicRef;
use corum_controller::image::configs::ConfigResource;
use corum_controller::records::ConfigResourceType;
use corum_controller::ApiError;
use corum_kafka::auth::{kafka_api, Gate, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};
use corum_protocol::{LocalRead, RequestBody, ResponseBody, RpcError};

/// What to do with one request (see [`authorize`]).
#[derive(Debug)]
pub enum Authorized {
    /// Serve `body` (the request without its refused items), then put `refused` into the
    /// answer ([`Refused::apply`]).
    Serve { body: RequestBody, refused: Refused },
    /// Every item was refused: this is the answer.
    Answer(ResponseBody),
    /// The whole request is refused.
    Refused(AuthorizationFailure),
}

/// The items a request was refused, to be put into its answer, each with its place in the
/// request.
#[derive(Debug, Default)]
pub enum Refused {
    /// Nothing to change in the answer.
    #[default]
    Nothing,
    /// Topics by name (CreateTopics, CreateTopicsWithConfigs, DeleteTopics, CreatePartitions).
    Topics(Vec<(usize, String, ApiError)>),
    /// Topics by name or id (DeleteTopicsV2).
    TopicRefs(Vec<(usize, TopicRef, ApiError)>),
    /// Config resources (the configs requests).
    Configs(Vec<(usize, ConfigResource, ApiError)>),
    /// The answer describes topics: filter it by DESCRIBE on each (`named`: the request named
    /// them, and a refused one is answered in its place; else it is left out).
    Described { named: bool },
}

/// Kafka's config resource type code of a corum config resource (a broker's, or the cluster
/// default's, is authorized on the cluster).
fn config_type(resource: &ConfigResource) -> i8 {
    match resource.resource_type {
        ConfigResourceType::Topic => CONFIG_RESOURCE_TOPIC,
        ConfigResourceType::Broker => CONFIG_RESOURCE_BROKER,
    }
}

/// Takes out of `items` those `refuse` refuses: each with its index in `items` as it was, its
/// key in the answer, and its error.
fn split<I, K>(
    items: &mut Vec<I>,
    refuse: impl Fn(&I) -> Option<(K, AuthorizationFailure)>,
) -> Vec<(usize, K, ApiError)> {
    let mut refused = Vec::new();
    let mut at = 0;
    items.retain(|item| {
        let index = at;
        at += 1;
        match refuse(item) {
            None => true,
            Some((key, failure)) => {
                refused.push((index, key, ApiError::AuthorizationFailed(failure)));
                false
            }
        }
    });
    refused
}

/// Puts `refused` (in increasing index order) back into `results`, the answer's items for the
/// request's other items in their order: each at its index in the request.
fn merge<K, T>(results: &mut Vec<(K, Result<T, ApiError>)>, refused: Vec<(usize, K, ApiError)>) {
    for (at, key, error) in refused {
        let at = at.min(results.len());
        results.insert(at, (key, Err(error)));
    }
}

/// The answer to `body` with none of its items (every one refused); `None` for a request
/// answered whole.
fn empty_answer(body: &RequestBody) -> Option<ResponseBody> {
    use corum_controller::control::config_control as c;
    use corum_controller::control::replication_control as r;
    Some(match body {
        RequestBody::CreateTopics(_) => {
            ResponseBody::CreateTopics(r::CreateTopicsResponse { topics: vec![] })
        }
        RequestBody::CreateTopicsWithConfigs(_) => {
            ResponseBody::CreateTopicsWithConfigs(r::CreateTopicsWithConfigsResponse {
                topics: vec![],
            })
        }
        RequestBody::DeleteTopics(_) => {
            ResponseBody::DeleteTopics(r::DeleteTopicsResponse { topics: vec![] })
        }
        RequestBody::DeleteTopicsV2(_) => {
            ResponseBody::DeleteTopicsV2(r::DeleteTopicsV2Response { topics: vec![] })
        }
        RequestBody::CreatePartitions(_) => {
            ResponseBody::CreatePartitions(r::CreatePartitionsResponse { topics: vec![] })
        }
        RequestBody::IncrementalAlterConfigs(_) => {
            ResponseBody::IncrementalAlterConfigs(c::IncrementalAlterConfigsResponse {
                resources: vec![],
            })
        }
        RequestBody::AlterConfigs(_) => {
            ResponseBody::AlterConfigs(c::AlterConfigsResponse { resources: vec![] })
        }
        RequestBody::DescribeConfigs(_) => {
            ResponseBody::DescribeConfigs(c::DescribeConfigsResponse { resources: vec![] })
        }
        RequestBody::LocalRead(read) => match &**read {
            LocalRead::DescribeConfigs(_) => {
                ResponseBody::DescribeConfigs(c::DescribeConfigsResponse { resources: vec![] })
            }
            _ => return None,
        },
        _ => return None,
    })
}

/// How many items `body` names (0 for a request answered whole).
fn items(body: &RequestBody) -> usize {
    match body {
        RequestBody::CreateTopics(r) | RequestBody::CreateTopicsWithConfigs(r) => r.topics.len(),
        RequestBody::DeleteTopics(r) => r.names.len(),
        RequestBody::DeleteTopicsV2(r) => r.topics.len(),
        RequestBody::CreatePartitions(r) => r.topics.len(),
        RequestBody::IncrementalAlterConfigs(r) => r.resources.len(),
        RequestBody::AlterConfigs(r) => r.resources.len(),
        RequestBody::DescribeConfigs(r) => r.resources.len(),
        RequestBody::LocalRead(read) => match &**read {
            LocalRead::DescribeConfigs(r) => r.resources.len(),
            _ => 0,
        },
        _ => 0,
    }
}

/// Checks `body` against `gate`: see the module doc. `gate` must have an authorizer (the
/// server skips this without one).
pub fn authorize(gate: &Gate<'_>, mut body: RequestBody) -> Authorized {
    debug_assert!(gate.enabled(), "authorize runs only with an authorizer");
    let api = kafka_api(&body);
    if let Err(failure) = gate.whole(api) {
        return Authorized::Refused(failure);
    }
    let topics = gate.topics(api);
    let by_name = |name: &String| topics.check(name).err().map(|f| (name.clone(), f));
    let config = |resource: &ConfigResource| {
        gate.config(api, config_type(resource), &resource.name)
            .err()
            .map(|f| (resource.clone(), f))
    };
    let refused = match &mut body {
        RequestBody::CreateTopics(r) | RequestBody::CreateTopicsWithConfigs(r) => {
            Refused::Topics(split(&mut r.topics, |t| by_name(&t.name)))
        }
        RequestBody::DeleteTopics(r) => Refused::Topics(split(&mut r.names, by_name)),
        RequestBody::CreatePartitions(r) => {
            Refused::Topics(split(&mut r.topics, |t| by_name(&t.name)))
        }
        RequestBody::DeleteTopicsV2(r) => Refused::TopicRefs(split(&mut r.topics, |t| {
            let refusal = match t {
                TopicRef::Name(name) => topics.check(name),
                TopicRef::Id(id) => topics.check_id(&id.to_string()),
            };
            refusal.err().map(|f| (t.clone(), f))
        })),
        RequestBody::IncrementalAlterConfigs(r) => {
            Refused::Configs(split(&mut r.resources, |c| config(&c.resource)))
        }
        RequestBody::AlterConfigs(r) => {
            Refused::Configs(split(&mut r.resources, |c| config(&c.resource)))
        }
        RequestBody::DescribeConfigs(r) => {
            Refused::Configs(split(&mut r.resources, |c| config(&c.resource)))
        }
        RequestBody::DescribeTopics(r) | RequestBody::DescribeTopicsV2(r) => Refused::Described {
            named: r.topics.is_some(),
        },
        RequestBody::LocalRead(read) => match &mut **read {
            LocalRead::DescribeConfigs(r) => {
                Refused::Configs(split(&mut r.resources, |c| config(&c.resource)))
            }
            LocalRead::DescribeTopics(r) | LocalRead::DescribeTopicsV2(r) => Refused::Described {
                named: r.topics.is_some(),
            },
            _ => Refused::Nothing,
        },
        _ => Refused::Nothing,
    };
    if items(&body) == 0 && refused.count() > 0 {
        let empty = empty_answer(&body).expect("a request with items has an empty answer");
        return match refused.apply(gate, Ok(empty)) {
            Ok(answer) => Authorized::Answer(answer),
            Err(e) => unreachable!("putting refusals into an empty answer cannot fail: {e}"),
        };
    }
    Authorized::Serve { body, refused }
}

impl Refused {
    /// Items refused before the request was sent (0 for a filter applied to the answer).
    pub fn count(&self) -> usize {
        match self {
            Refused::Nothing | Refused::Described { .. } => 0,
            Refused::Topics(v) => v.len(),
            Refused::TopicRefs(v) => v.len(),
            Refused::Configs(v) => v.len(),
        }
    }

    /// The answer to the request, given `answer` to what was sent of it: the refused items
    /// put back in their places (or, for described topics, the answer filtered by `gate`).
    /// A failure of the whole request stays the answer. An answer of another kind than the
    /// request's is an `Internal` error (the node answered another request).
    pub fn apply(
        self,
        gate: &Gate<'_>,
        answer: Result<ResponseBody, RpcError>,
    ) -> Result<ResponseBody, RpcError> {
        let mut body = answer?;
        let mismatch = |kind: &str| RpcError::Internal {
            reason: format!(
                "the node answered with {kind}, which does not list the request's items"
            ),
        };
        match self {
            Refused::Nothing => {}
            Refused::Topics(refused) => match &mut body {
                ResponseBody::CreateTopics(r) => merge(&mut r.topics, refused),
                ResponseBody::CreateTopicsWithConfigs(r) => merge(&mut r.topics, refused),
                ResponseBody::DeleteTopics(r) => merge(&mut r.topics, refused),
                ResponseBody::CreatePartitions(r) => merge(&mut r.topics, refused),
                other if refused.is_empty() => {
                    let _ = other;
                }
                other => return Err(mismatch(other.kind())),
            },
            Refused::TopicRefs(refused) => match &mut body {
                ResponseBody::DeleteTopicsV2(r) => merge(&mut r.topics, refused),
                _ if refused.is_empty() => {}
                other => return Err(mismatch(other.kind())),
            },
            Refused::Configs(refused) => match &mut body {
                ResponseBody::IncrementalAlterConfigs(r) => merge(&mut r.resources, refused),
                ResponseBody::AlterConfigs(r) => merge(&mut r.resources, refused),
                ResponseBody::DescribeConfigs(r) => merge(&mut r.resources, refused),
                _ if refused.is_empty() => {}
                other => return Err(mismatch(other.kind())),
            },
            Refused::Described { named } => match &mut body {
                ResponseBody::DescribeTopics(r) => {
                    filter_described(gate, named, &mut r.topics, |t| &t.name)
                }
                ResponseBody::DescribeTopicsV2(r) => {
                    filter_described(gate, named, &mut r.topics, |t| &t.name)
                }
                other => return Err(mismatch(other.kind())),
            },
        }
        Ok(body)
    }
}

/// The described topics `gate` may not DESCRIBE: answered `AuthorizationFailed` in their place
/// when `named` (a topic named but unknown too, so a refusal does not tell whether it exists),
/// left out otherwise (Kafka's Metadata).
fn filter_described<T>(
    gate: &Gate<'_>,
    named: bool,
    results: &mut Vec<(TopicRef, Result<T, ApiError>)>,
    name_of: impl Fn(&T) -> &String,
) {
    results.retain_mut(|(reference, result)| {
        let name = match (&*result, &*reference) {
            (Ok(topic), _) => name_of(topic).clone(),
            (Err(_), TopicRef::Name(name)) => name.clone(),
            // An unknown id tells nothing about a name.
            (Err(_), TopicRef::Id(_)) => return true,
        };
        match gate.describe_topic(&name, named) {
            Ok(()) => true,
            Err(failure) => {
                *result = Err(ApiError::AuthorizationFailed(failure));
                named
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use corum_controller::acl::{
        AclBinding, AclOperation, AclPermissionType, AclsImage, Authorizer, AuthorizerConfig,
        PatternType, ResourceType, CLUSTER_NAME,
    };
    use corum_controller::control::config_control::{
        AlterConfigsResource, DescribeConfigsRequest, DescribeConfigsResource,
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };
    use corum_controller::control::replication_control::{
        CreatableTopic, CreateTopicsRequest, CreateTopicsResponse, CreatedTopic,
        DeleteTopicsV2Request, DescribeTopicsRequest, DescribeTopicsResponse, DescribedTopic,
    };
    use corum_controller::TopicId;
    use corum_kafka::auth::Session;
    use corum_raft::message::RemoveVoterRequest;
    use corum_raft::ReplicaKey;
    use corum_types::{NodeId, Uuid};

    use super::*;

    const TENANT: &str = "User:CN=tenant,O=corum";

    fn acl(
        t: ResourceType,
        name: &str,
        p: PatternType,
        op: AclOperation,
        allow: bool,
    ) -> AclBinding {
        AclBinding {
            resource_type: t,
            resource_name: name.into(),
            pattern_type: p,
            principal: TENANT.into(),
            host: "*".into(),
            operation: op,
            permission_type: if allow {
                AclPermissionType::Allow
            } else {
                AclPermissionType::Deny
            },
        }
    }

    /// A closed cluster (no ACL: no access) where the tenant may create and describe topics
    /// prefixed `t-` but not `t-secret`, and alter the configs of topic `t-a`.
    fn authorizer() -> Option<Arc<Authorizer>> {
        use AclOperation as O;
        use PatternType::{Literal, Prefixed};
        use ResourceType::Topic;
        let mut acls = AclsImage::default();
        let all = [
            acl(Topic, "t-", Prefixed, O::Create, true),
            acl(Topic, "t-", Prefixed, O::Describe, true),
            acl(Topic, "t-secret", Literal, O::Create, false),
            acl(Topic, "t-secret", Literal, O::Describe, false),
            acl(Topic, "t-a", Literal, O::AlterConfigs, true),
        ];
        for (i, a) in all.into_iter().enumerate() {
            acls.replay_create_for_tests(Uuid([i as u8 + 1; 16]), a);
        }
        Some(Arc::new(Authorizer::new(
            AuthorizerConfig {
                super_users: vec!["User:CN=admin".into()],
                allow_everyone_if_no_acl_found: false,
            },
            acls,
        )))
    }

    fn tenant() -> Session {
        Session::authenticated(TENANT, "127.0.0.1")
    }

    fn creatable(name: &str) -> CreatableTopic {
        CreatableTopic {
            name: name.into(),
            num_partitions: 1,
            replication_factor: 1,
            assignments: vec![],
            configs: vec![],
        }
    }

    fn created(i: u8) -> CreatedTopic {
        CreatedTopic {
            topic_id: TopicId(Uuid([i; 16])),
            num_partitions: 1,
            replication_factor: 1,
        }
    }

    /// A cluster operation is refused whole, naming the permission; a super user and a
    /// controller's certificate pass it.
    #[test]
    fn cluster_operations_are_refused_whole() {
        let remove = RequestBody::RemoveVoter(RemoveVoterRequest {
            request_id: 1,
            voter: ReplicaKey {
                id: NodeId(3),
                directory_id: Uuid([3; 16]),
            },
        });
        let session = tenant();
        let gate = Gate::new(authorizer(), &session);
        let Authorized::Refused(failure) = authorize(&gate, remove.clone()) else {
            panic!("a voter change without ALTER on the cluster")
        };
        assert_eq!(
            (
                failure.operation,
                failure.resource_type,
                failure.resource_name.as_str()
            ),
            (AclOperation::Alter, ResourceType::Cluster, CLUSTER_NAME)
        );
        assert_eq!(failure.principal, TENANT);
        let Authorized::Refused(failure) = authorize(&gate, RequestBody::DescribeQuorum) else {
            panic!("DescribeQuorum without DESCRIBE on the cluster")
        };
        assert_eq!(failure.operation, AclOperation::Describe);
        // DescribeFeatures is Kafka's ApiVersions: served to anyone.
        assert!(matches!(
            authorize(&gate, RequestBody::DescribeFeatures),
            Authorized::Serve { .. }
        ));
        let admin = Session::authenticated("User:CN=admin", "127.0.0.1");
        let mut controller = Session::authenticated("User:CN=controller-1", "127.0.0.1");
        controller.super_user = true;
        for who in [admin, controller] {
            let gate = Gate::new(authorizer(), &who);
            assert!(matches!(
                authorize(&gate, remove.clone()),
                Authorized::Serve {
                    refused: Refused::Nothing,
                    ..
                }
            ));
        }
    }

    /// CreateTopics sends only the allowed topics and answers the refused ones in their
    /// places; a DENY wins over a prefixed ALLOW.
    #[test]
    fn topics_are_refused_one_by_one() {
        let session = tenant();
        let gate = Gate::new(authorizer(), &session);
        let request = RequestBody::CreateTopicsWithConfigs(CreateTopicsRequest {
            topics: ["other", "t-1", "t-secret", "t-2"].map(creatable).to_vec(),
            validate_only: false,
        });
        let Authorized::Serve { body, refused } = authorize(&gate, request) else {
            panic!("some topics are allowed")
        };
        let RequestBody::CreateTopicsWithConfigs(sent) = &body else {
            panic!()
        };
        let names: Vec<&str> = sent.topics.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["t-1", "t-2"]);
        assert_eq!(refused.count(), 2);
        // The controller's answer for what was sent, then the refusals put back.
        let answer = ResponseBody::CreateTopics(CreateTopicsResponse {
            topics: vec![
                ("t-1".into(), Ok(created(1))),
                ("t-2".into(), Ok(created(2))),
            ],
        });
        let Ok(ResponseBody::CreateTopics(r)) = refused.apply(&gate, Ok(answer)) else {
            panic!()
        };
        let summary: Vec<(&str, Option<i16>)> = r
            .topics
            .iter()
            .map(|(n, res)| {
                (
                    n.as_str(),
                    res.as_ref().err().map(|e| match e {
                        ApiError::AuthorizationFailed(f) => f.kafka_error_code(),
                        other => panic!("{other}"),
                    }),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("other", Some(29)),
                ("t-1", None),
                ("t-secret", Some(29)),
                ("t-2", None)
            ]
        );
        let ApiError::AuthorizationFailed(f) = r.topics[2].1.as_ref().unwrap_err() else {
            panic!()
        };
        assert_eq!(
            f.to_string(),
            "Topic authorization failed: User:CN=tenant,O=corum is not authorized to CREATE on TOPIC t-secret"
        );
    }

    /// Every item refused: answered here, nothing sent; a whole failure of what was sent
    /// stays the answer.
    #[test]
    fn everything_refused_is_answered_without_the_controller() {
        let session = tenant();
        let gate = Gate::new(authorizer(), &session);
        let request = RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
            resources: vec![
                AlterConfigsResource {
                    resource: ConfigResource::topic("t-b"),
                    configs: vec![],
                },
                AlterConfigsResource {
                    resource: ConfigResource {
                        resource_type: ConfigResourceType::Broker,
                        name: String::new(),
                    },
                    configs: vec![],
                },
            ],
            validate_only: false,
        });
        let Authorized::Answer(ResponseBody::IncrementalAlterConfigs(r)) =
            authorize(&gate, request)
        else {
            panic!("every resource is refused")
        };
        let codes: Vec<i16> = r
            .resources
            .iter()
            .map(|(_, res)| match res {
                Err(ApiError::AuthorizationFailed(f)) => f.kafka_error_code(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(codes, [29, 31]);
        // t-a is allowed: sent; the node is not the controller, which is the answer.
        let request = RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
            resources: vec![
                AlterConfigsResource {
                    resource: ConfigResource::topic("t-b"),
                    configs: vec![],
                },
                AlterConfigsResource {
                    resource: ConfigResource::topic("t-a"),
                    configs: vec![],
                },
            ],
            validate_only: false,
        });
        let Authorized::Serve { body, refused } = authorize(&gate, request.clone()) else {
            panic!()
        };
        assert_eq!(items(&body), 1);
        let failed = refused.apply(&gate, Err(RpcError::NotController { leader: None }));
        assert_eq!(failed, Err(RpcError::NotController { leader: None }));
        let Authorized::Serve { refused, .. } = authorize(&gate, request) else {
            panic!()
        };
        let answer = ResponseBody::IncrementalAlterConfigs(IncrementalAlterConfigsResponse {
            resources: vec![(ConfigResource::topic("t-a"), Ok(()))],
        });
        let Ok(ResponseBody::IncrementalAlterConfigs(r)) = refused.apply(&gate, Ok(answer)) else {
            panic!()
        };
        assert_eq!(r.resources[0].0, ConfigResource::topic("t-b"));
        assert!(r.resources[0].1.is_err() && r.resources[1].1.is_ok());
    }

    /// DescribeConfigs needs DESCRIBE_CONFIGS, which ALTER_CONFIGS implies (t-a); a
    /// LocalRead is checked as the read it names.
    #[test]
    fn reads_are_checked_as_their_kafka_apis() {
        let session = tenant();
        let gate = Gate::new(authorizer(), &session);
        let read = |name: &str| {
            RequestBody::LocalRead(Box::new(LocalRead::DescribeConfigs(
                DescribeConfigsRequest {
                    resources: vec![DescribeConfigsResource {
                        resource: ConfigResource::topic(name),
                        names: None,
                    }],
                    ..Default::default()
                },
            )))
        };
        assert!(matches!(
            authorize(&gate, read("t-a")),
            Authorized::Serve {
                refused: Refused::Configs(v),
                ..
            } if v.is_empty()
        ));
        assert!(matches!(
            authorize(&gate, read("t-b")),
            Authorized::Answer(ResponseBody::DescribeConfigs(_))
        ));
    }

    /// Described topics the tenant may not DESCRIBE: left out of all topics, refused in
    /// their place when named (an unknown one too); DeleteTopicsV2 by id needs the cluster.
    #[test]
    fn described_topics_are_filtered_and_ids_need_the_cluster() {
        let session = tenant();
        let gate = Gate::new(authorizer(), &session);
        let described = |name: &str, i: u8| DescribedTopic {
            topic_id: TopicId(Uuid([i; 16])),
            name: name.into(),
            partitions: vec![],
        };
        let answer = || {
            ResponseBody::DescribeTopics(DescribeTopicsResponse {
                topics: vec![
                    (TopicRef::Name("t-1".into()), Ok(described("t-1", 1))),
                    (
                        TopicRef::Id(TopicId(Uuid([2; 16]))),
                        Ok(described("t-secret", 2)),
                    ),
                    (
                        TopicRef::Name("nope".into()),
                        Err(ApiError::UnknownTopic {
                            name: "nope".into(),
                        }),
                    ),
                ],
            })
        };
        let all = RequestBody::DescribeTopics(DescribeTopicsRequest { topics: None });
        let Authorized::Serve { refused, .. } = authorize(&gate, all) else {
            panic!()
        };
        let Ok(ResponseBody::DescribeTopics(r)) = refused.apply(&gate, Ok(answer())) else {
            panic!()
        };
        let kept: Vec<&TopicRef> = r.topics.iter().map(|(t, _)| t).collect();
        assert_eq!(kept, [&TopicRef::Name("t-1".into())]);
        let named = RequestBody::DescribeTopics(DescribeTopicsRequest {
            topics: Some(vec![]),
        });
        let Authorized::Serve { refused, .. } = authorize(&gate, named) else {
            panic!()
        };
        let Ok(ResponseBody::DescribeTopics(r)) = refused.apply(&gate, Ok(answer())) else {
            panic!()
        };
        let refused: Vec<bool> = r
            .topics
            .iter()
            .map(|(_, res)| matches!(res, Err(ApiError::AuthorizationFailed(_))))
            .collect();
        assert_eq!(refused, [false, true, true]);

        let delete = RequestBody::DeleteTopicsV2(DeleteTopicsV2Request {
            topics: vec![TopicRef::Id(TopicId(Uuid([1; 16])))],
        });
        let Authorized::Answer(ResponseBody::DeleteTopicsV2(r)) = authorize(&gate, delete) else {
            panic!("an id needs DELETE on the cluster")
        };
        assert!(matches!(
            &r.topics[0].1,
            Err(ApiError::AuthorizationFailed(f)) if f.kafka_error_code() == 29
        ));
    }
}
