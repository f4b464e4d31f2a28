//! Authorization on the Kafka listener: who sent a request ([`Session`]) and what each API
//! needs (Kafka's `ControllerApis`), checked against the node's authorizer
//! ([`crate::Backend::authorizer`]: the ACLs of its committed image, or none when
//! `authorizer.class.name` is empty, and then everything is allowed).
//!
//! | API | needs | refused with |
//! |---|---|---|
//! | CreateTopics | CREATE on the cluster, else CREATE on each topic | TOPIC_AUTHORIZATION_FAILED for that topic |
//! | DeleteTopics | DELETE on the cluster, else DELETE on each topic named (a topic named only by id needs the cluster's) | TOPIC_AUTHORIZATION_FAILED for that topic |
//! | CreatePartitions | ALTER on each topic | TOPIC_AUTHORIZATION_FAILED for that topic |
//! | DescribeConfigs / AlterConfigs, IncrementalAlterConfigs | DESCRIBE_CONFIGS / ALTER_CONFIGS on each topic, on the cluster for a broker or broker logger | TOPIC_ / CLUSTER_AUTHORIZATION_FAILED for that resource |
//! | Metadata, DescribeTopicPartitions | DESCRIBE on each topic | a topic asked for by name: TOPIC_AUTHORIZATION_FAILED; all topics: the others are left out |
//! | ElectLeaders, UpdateFeatures, CreateAcls, DeleteAcls, AddRaftVoter, RemoveRaftVoter | ALTER on the cluster | CLUSTER_AUTHORIZATION_FAILED |
//! | DescribeCluster, DescribeQuorum, DescribeAcls, ListPartitionReassignments | DESCRIBE on the cluster | CLUSTER_AUTHORIZATION_FAILED |
//! | BrokerRegistration, BrokerHeartbeat, UnregisterBroker, AlterPartition, AssignReplicasToDirs, AllocateProducerIds, Fetch and FetchSnapshot (of `__cluster_metadata`), UpdateRaftVoter, Envelope | CLUSTER_ACTION on the cluster | CLUSTER_AUTHORIZATION_FAILED |
//! | ApiVersions | nothing | |
//!
//! A request inside an Envelope is then authorized as the principal and client address the
//! broker forwarded.

use std::sync::Arc;

use corum_controller::acl::{
    AclOperation, Authorizer, Requester, ResourceType, ANONYMOUS, CLUSTER_NAME,
};
use kafka_protocol::error::ResponseError;

/// Who sent a request: the principal its connection authenticated as (`User:ANONYMOUS` on a
/// PLAINTEXT listener, Kafka's rule) and the client's address. A connection's session is set
/// once when it is accepted (TLS and SASL will set the principal there); a request inside an
/// Envelope carries the forwarded one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// `Type:name`, as Kafka's `KafkaPrincipal.toString`.
    pub principal: String,
    /// The client's IP address as text.
    pub client_host: String,
}

impl Session {
    /// An unauthenticated connection from `client_host`.
    pub fn anonymous(client_host: impl Into<String>) -> Session {
        Session {
            principal: ANONYMOUS.to_owned(),
            client_host: client_host.into(),
        }
    }
}

/// The decisions for one request: the node's authorizer (none: everything allowed) and the
/// session.
pub(crate) struct Gate<'a> {
    authorizer: Option<Arc<Authorizer>>,
    session: &'a Session,
}

/// Kafka's TOPIC_AUTHORIZATION_FAILED (29).
pub(crate) fn topic_denied() -> i16 {
    ResponseError::TopicAuthorizationFailed.code()
}

/// Kafka's CLUSTER_AUTHORIZATION_FAILED (31).
pub(crate) fn cluster_denied() -> i16 {
    ResponseError::ClusterAuthorizationFailed.code()
}

impl<'a> Gate<'a> {
    pub(crate) fn new(authorizer: Option<Arc<Authorizer>>, session: &'a Session) -> Gate<'a> {
        Gate {
            authorizer,
            session,
        }
    }

    pub(crate) fn session(&self) -> &'a Session {
        self.session
    }

    /// Whether an authorizer is configured (the ACL APIs are served).
    pub(crate) fn enabled(&self) -> bool {
        self.authorizer.is_some()
    }

    pub(crate) fn allows(&self, op: AclOperation, t: ResourceType, name: &str) -> bool {
        let Some(a) = &self.authorizer else {
            return true;
        };
        let who = Requester {
            principal: &self.session.principal,
            host: &self.session.client_host,
        };
        let allowed = a.authorize(who, op, t, name);
        if !allowed {
            tracing::debug!(principal = %self.session.principal, host = %self.session.client_host,
                operation = %op, resource_type = %t, resource = name, "authorization denied");
        }
        allowed
    }

    pub(crate) fn cluster(&self, op: AclOperation) -> bool {
        self.allows(op, ResourceType::Cluster, CLUSTER_NAME)
    }

    pub(crate) fn topic(&self, op: AclOperation, name: &str) -> bool {
        self.allows(op, ResourceType::Topic, name)
    }
}

/// The answer to `body` refused as a whole with CLUSTER_AUTHORIZATION_FAILED: the response's
/// error code, and the same code on each item a response lists per item.
pub(crate) fn cluster_denied_response(
    body: &kafka_protocol::messages::RequestKind,
) -> kafka_protocol::messages::ResponseKind {
    use kafka_protocol::messages::{self as m, RequestKind as Q, ResponseKind as A};
    let code = cluster_denied();
    match body {
        Q::ElectLeaders(r) => A::ElectLeaders(
            m::ElectLeadersResponse::default()
                .with_error_code(code)
                .with_replica_election_results(
                    r.topic_partitions
                        .iter()
                        .flatten()
                        .map(|t| {
                            m::elect_leaders_response::ReplicaElectionResult::default()
                                .with_topic(t.topic.clone())
                                .with_partition_result(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            m::elect_leaders_response::PartitionResult::default()
                                                .with_partition_id(*p)
                                                .with_error_code(code)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
        ),
        Q::UpdateFeatures(r) => A::UpdateFeatures(
            m::UpdateFeaturesResponse::default()
                .with_error_code(code)
                .with_results(
                    r.feature_updates
                        .iter()
                        .map(|f| {
                            m::update_features_response::UpdatableFeatureResult::default()
                                .with_feature(f.feature.clone())
                                .with_error_code(code)
                        })
                        .collect(),
                ),
        ),
        Q::CreateAcls(r) => A::CreateAcls(
            m::CreateAclsResponse::default().with_results(
                r.creations
                    .iter()
                    .map(|_| {
                        m::create_acls_response::AclCreationResult::default().with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        Q::DeleteAcls(r) => A::DeleteAcls(
            m::DeleteAclsResponse::default().with_filter_results(
                r.filters
                    .iter()
                    .map(|_| {
                        m::delete_acls_response::DeleteAclsFilterResult::default()
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        Q::DescribeAcls(_) => {
            A::DescribeAcls(m::DescribeAclsResponse::default().with_error_code(code))
        }
        Q::DescribeUserScramCredentials(_) => A::DescribeUserScramCredentials(
            m::DescribeUserScramCredentialsResponse::default().with_error_code(code),
        ),
        Q::AlterUserScramCredentials(r) => {
            let mut users: Vec<&kafka_protocol::protocol::StrBytes> = Vec::new();
            for name in r
                .deletions
                .iter()
                .map(|d| &d.name)
                .chain(r.upsertions.iter().map(|u| &u.name))
            {
                if !users.contains(&name) {
                    users.push(name);
                }
            }
            A::AlterUserScramCredentials(
                m::AlterUserScramCredentialsResponse::default().with_results(
                    users
                        .into_iter()
                        .map(|u| {
                            m::alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                                .with_user(u.clone())
                                .with_error_code(code)
                        })
                        .collect(),
                ),
            )
        }
        Q::AddRaftVoter(_) => {
            A::AddRaftVoter(m::AddRaftVoterResponse::default().with_error_code(code))
        }
        Q::RemoveRaftVoter(_) => {
            A::RemoveRaftVoter(m::RemoveRaftVoterResponse::default().with_error_code(code))
        }
        Q::UpdateRaftVoter(_) => {
            A::UpdateRaftVoter(m::UpdateRaftVoterResponse::default().with_error_code(code))
        }
        Q::DescribeCluster(_) => {
            A::DescribeCluster(m::DescribeClusterResponse::default().with_error_code(code))
        }
        Q::DescribeQuorum(_) => {
            A::DescribeQuorum(m::DescribeQuorumResponse::default().with_error_code(code))
        }
        Q::ListPartitionReassignments(_) => A::ListPartitionReassignments(
            m::ListPartitionReassignmentsResponse::default().with_error_code(code),
        ),
        Q::BrokerRegistration(_) => {
            A::BrokerRegistration(m::BrokerRegistrationResponse::default().with_error_code(code))
        }
        Q::BrokerHeartbeat(_) => A::BrokerHeartbeat(
            m::BrokerHeartbeatResponse::default()
                .with_error_code(code)
                .with_is_fenced(true),
        ),
        Q::UnregisterBroker(_) => {
            A::UnregisterBroker(m::UnregisterBrokerResponse::default().with_error_code(code))
        }
        Q::AlterPartition(_) => {
            A::AlterPartition(m::AlterPartitionResponse::default().with_error_code(code))
        }
        Q::AssignReplicasToDirs(_) => A::AssignReplicasToDirs(
            m::AssignReplicasToDirsResponse::default().with_error_code(code),
        ),
        Q::AllocateProducerIds(_) => {
            A::AllocateProducerIds(m::AllocateProducerIdsResponse::default().with_error_code(code))
        }
        Q::Fetch(_) => A::Fetch(m::FetchResponse::default().with_error_code(code)),
        Q::FetchSnapshot(_) => {
            A::FetchSnapshot(m::FetchSnapshotResponse::default().with_error_code(code))
        }
        Q::Envelope(_) => A::Envelope(m::EnvelopeResponse::default().with_error_code(code)),
        other => unreachable!("no whole-request check for {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use bytes::{BufMut, Bytes, BytesMut};
    use corum_controller::acl::{
        AclBinding, AclPermissionType, AclsImage, AuthorizerConfig, PatternType,
    };
    use corum_controller::control::replication_control::{
        DescribeTopicsV2Response, DescribedPartition, DescribedPartitionV2, DescribedTopicV2,
        TopicRef,
    };
    use corum_controller::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId};
    use corum_protocol::{RequestBody, ResponseBody, RpcError};
    use corum_types::{NodeId, Uuid};
    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
    use kafka_protocol::messages::{
        create_topics_request::CreatableTopic, ApiKey, BrokerHeartbeatRequest, CreateAclsRequest,
        CreateTopicsRequest, DescribeClusterRequest, DescribeTopicPartitionsRequest,
        EnvelopeRequest, RequestHeader, RequestKind, ResponseKind, TopicName,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;
    use crate::backend::{Backend, ListenerContext};
    use crate::request::{Parsed, RequestHead};
    use crate::service::serve_as;

    /// A controller that answers DescribeTopicsV2 with the topics `secret-a` and `open-a`,
    /// anything else with a timeout, records what it is sent, and authorizes with `authorizer`.
    struct Node {
        authorizer: Option<Arc<Authorizer>>,
        sent: RefCell<Vec<RequestBody>>,
    }

    impl Backend for Node {
        async fn call(&self, body: RequestBody, _: u32) -> Result<ResponseBody, RpcError> {
            let answer = match &body {
                RequestBody::DescribeTopicsV2(_) => {
                    Ok(ResponseBody::DescribeTopicsV2(DescribeTopicsV2Response {
                        topics: ["secret-a", "open-a"]
                            .iter()
                            .enumerate()
                            .map(|(i, name)| {
                                (
                                    TopicRef::Name((*name).into()),
                                    Ok(DescribedTopicV2 {
                                        topic_id: TopicId(Uuid([i as u8 + 1; 16])),
                                        name: (*name).into(),
                                        partitions: vec![DescribedPartitionV2 {
                                            partition: DescribedPartition {
                                                partition_id: PartitionId(0),
                                                leader: Some(NodeId(1)),
                                                leader_epoch: LeaderEpoch(0),
                                                partition_epoch: PartitionEpoch(0),
                                                replicas: vec![NodeId(1)],
                                                isr: vec![NodeId(1)],
                                                offline_replicas: vec![],
                                            },
                                            eligible_leader_replicas: vec![],
                                            last_known_elr: vec![],
                                        }],
                                    }),
                                )
                            })
                            .collect(),
                    }))
                }
                _ => Err(RpcError::Timeout { timeout_ms: 1 }),
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

        fn authorizer(&self) -> Option<Arc<Authorizer>> {
            self.authorizer.clone()
        }
    }

    fn acl(
        t: ResourceType,
        name: &str,
        p: PatternType,
        who: &str,
        op: AclOperation,
        perm: AclPermissionType,
    ) -> AclBinding {
        AclBinding {
            resource_type: t,
            resource_name: name.into(),
            pattern_type: p,
            principal: who.into(),
            host: "*".into(),
            operation: op,
            permission_type: perm,
        }
    }

    /// Everyone may do everything where no ACL says otherwise, but ANONYMOUS may neither
    /// create nor describe topics named `secret-…`, and only `User:broker` has CLUSTER_ACTION.
    fn node(enabled: bool) -> Node {
        let mut acls = AclsImage::default();
        let all = [
            acl(
                ResourceType::Topic,
                "secret-",
                PatternType::Prefixed,
                ANONYMOUS,
                AclOperation::Create,
                AclPermissionType::Deny,
            ),
            acl(
                ResourceType::Topic,
                "secret-",
                PatternType::Prefixed,
                ANONYMOUS,
                AclOperation::Describe,
                AclPermissionType::Deny,
            ),
            acl(
                ResourceType::Cluster,
                CLUSTER_NAME,
                PatternType::Literal,
                "User:broker",
                AclOperation::ClusterAction,
                AclPermissionType::Allow,
            ),
        ];
        for (i, a) in all.into_iter().enumerate() {
            acls.replay_create_for_tests(Uuid([i as u8 + 1; 16]), a);
        }
        Node {
            authorizer: enabled.then(|| {
                Arc::new(Authorizer::new(
                    AuthorizerConfig {
                        super_users: vec![],
                        allow_everyone_if_no_acl_found: true,
                    },
                    acls,
                ))
            }),
            sent: RefCell::default(),
        }
    }

    fn serve(
        node: &Node,
        session: &Session,
        api: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> ResponseKind {
        let ctx = ListenerContext::for_tests(Uuid([9; 16]));
        let head = RequestHead {
            api_key: api,
            api_version: version,
            correlation_id: 7,
            client_id: None,
        };
        let parsed = Parsed::Request {
            head,
            body: Box::new(body),
        };
        futures_lite::future::block_on(serve_as(&ctx, session, node, parsed)).body
    }

    fn anonymous() -> Session {
        Session::anonymous("10.0.0.1")
    }

    fn create_topics(names: &[&str]) -> RequestKind {
        RequestKind::CreateTopics(
            CreateTopicsRequest::default().with_topics(
                names
                    .iter()
                    .map(|n| {
                        CreatableTopic::default()
                            .with_name(TopicName(StrBytes::from_string((*n).into())))
                            .with_num_partitions(1)
                            .with_replication_factor(1)
                    })
                    .collect(),
            ),
        )
    }

    fn create_codes(r: &ResponseKind) -> Vec<(String, i16)> {
        let ResponseKind::CreateTopics(r) = r else {
            panic!("not a CreateTopics answer: {r:?}")
        };
        r.topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.error_code))
            .collect()
    }

    /// A denied topic is answered TOPIC_AUTHORIZATION_FAILED and never reaches the
    /// controller; the allowed one does (it times out here).
    #[test]
    fn create_topics_is_checked_per_topic() {
        let node = node(true);
        let r = serve(
            &node,
            &anonymous(),
            ApiKey::CreateTopics,
            7,
            create_topics(&["secret-x", "open-x"]),
        );
        let codes = create_codes(&r);
        assert!(codes.contains(&("secret-x".into(), 29)), "{codes:?}");
        assert!(
            codes.contains(&("open-x".into(), ResponseError::RequestTimedOut.code())),
            "{codes:?}"
        );
        let sent = node.sent.borrow();
        let [RequestBody::CreateTopicsWithConfigs(req)] = sent.as_slice() else {
            panic!("one creation sent: {sent:?}")
        };
        let names: Vec<&str> = req.topics.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["open-x"]);
    }

    /// Without an authorizer nothing is checked and the ACL APIs say SECURITY_DISABLED.
    #[test]
    fn without_an_authorizer_everything_passes() {
        let node = node(false);
        let r = serve(
            &node,
            &anonymous(),
            ApiKey::CreateTopics,
            7,
            create_topics(&["secret-x"]),
        );
        assert_eq!(
            create_codes(&r),
            [("secret-x".into(), ResponseError::RequestTimedOut.code())]
        );
        let r = serve(
            &node,
            &anonymous(),
            ApiKey::CreateAcls,
            3,
            RequestKind::CreateAcls(
                CreateAclsRequest::default().with_creations(vec![Default::default()]),
            ),
        );
        let ResponseKind::CreateAcls(r) = r else {
            panic!()
        };
        assert_eq!(
            r.results[0].error_code,
            ResponseError::SecurityDisabled.code()
        );
        let r = serve(
            &node,
            &anonymous(),
            ApiKey::BrokerHeartbeat,
            1,
            RequestKind::BrokerHeartbeat(BrokerHeartbeatRequest::default()),
        );
        let ResponseKind::BrokerHeartbeat(r) = r else {
            panic!()
        };
        assert_ne!(
            r.error_code,
            ResponseError::ClusterAuthorizationFailed.code()
        );
    }

    /// Topics the session may not describe: left out of an answer about all topics, refused
    /// by name when named.
    #[test]
    fn described_topics_are_filtered() {
        let node = node(true);
        let all = serve(
            &node,
            &anonymous(),
            ApiKey::DescribeTopicPartitions,
            0,
            RequestKind::DescribeTopicPartitions(
                DescribeTopicPartitionsRequest::default().with_response_partition_limit(10),
            ),
        );
        let ResponseKind::DescribeTopicPartitions(all) = all else {
            panic!()
        };
        let names: Vec<String> = all
            .topics
            .iter()
            .map(|t| t.name.as_ref().unwrap().0.to_string())
            .collect();
        assert_eq!(names, ["open-a"]);
        let named = serve(
            &node,
            &anonymous(),
            ApiKey::DescribeTopicPartitions,
            0,
            RequestKind::DescribeTopicPartitions(
                DescribeTopicPartitionsRequest::default()
                    .with_topics(vec![TopicRequest::default()
                        .with_name(TopicName(StrBytes::from_static_str("secret-a")))])
                    .with_response_partition_limit(10),
            ),
        );
        let ResponseKind::DescribeTopicPartitions(named) = named else {
            panic!()
        };
        let secret = named
            .topics
            .iter()
            .find(|t| t.name.as_ref().unwrap().0.as_str() == "secret-a")
            .unwrap();
        assert_eq!(secret.error_code, 29);
        assert!(secret.partitions.is_empty());
    }

    /// Broker-facing APIs need CLUSTER_ACTION: ANONYMOUS is refused without reaching the
    /// controller, `User:broker` passes.
    #[test]
    fn broker_apis_need_cluster_action() {
        let node = node(true);
        let hb = || {
            RequestKind::BrokerHeartbeat(
                BrokerHeartbeatRequest::default()
                    .with_broker_id(kafka_protocol::messages::BrokerId(4)),
            )
        };
        let ResponseKind::BrokerHeartbeat(r) =
            serve(&node, &anonymous(), ApiKey::BrokerHeartbeat, 1, hb())
        else {
            panic!()
        };
        assert_eq!(r.error_code, 31);
        assert!(node.sent.borrow().is_empty());
        let broker = Session {
            principal: "User:broker".into(),
            client_host: "10.0.0.2".into(),
        };
        let ResponseKind::BrokerHeartbeat(r) =
            serve(&node, &broker, ApiKey::BrokerHeartbeat, 1, hb())
        else {
            panic!()
        };
        // Past the check (the heartbeat's own checks answer it here).
        assert_ne!(r.error_code, 31);
    }

    /// A closed cluster (no allow-everyone): DescribeCluster is CLUSTER_AUTHORIZATION_FAILED
    /// for anybody but a super user.
    #[test]
    fn cluster_apis_need_their_operation() {
        let mut n = node(true);
        n.authorizer = Some(Arc::new(Authorizer::new(
            AuthorizerConfig {
                super_users: vec!["User:admin".into()],
                allow_everyone_if_no_acl_found: false,
            },
            AclsImage::default(),
        )));
        let ResponseKind::DescribeCluster(r) = serve(
            &n,
            &anonymous(),
            ApiKey::DescribeCluster,
            0,
            RequestKind::DescribeCluster(DescribeClusterRequest::default()),
        ) else {
            panic!()
        };
        assert_eq!(r.error_code, 31);
        let admin = Session {
            principal: "User:admin".into(),
            client_host: "10.0.0.2".into(),
        };
        let ResponseKind::DescribeCluster(r) = serve(
            &n,
            &admin,
            ApiKey::DescribeCluster,
            0,
            RequestKind::DescribeCluster(DescribeClusterRequest::default()),
        ) else {
            panic!()
        };
        assert_ne!(r.error_code, 31);
    }

    /// A forwarded request is authorized as the principal the broker forwarded: the broker
    /// passes CLUSTER_ACTION, then ANONYMOUS's creation of `secret-x` is refused inside.
    #[test]
    fn an_envelope_is_authorized_as_its_forwarded_principal() {
        let node = node(true);
        let mut data = BytesMut::new();
        let version = 7;
        RequestHeader::default()
            .with_request_api_key(ApiKey::CreateTopics as i16)
            .with_request_api_version(version)
            .with_correlation_id(3)
            .encode(
                &mut data,
                ApiKey::CreateTopics.request_header_version(version),
            )
            .unwrap();
        create_topics(&["secret-x"])
            .encode(&mut data, version)
            .unwrap();
        let mut principal = BytesMut::new();
        principal.put_i16(0);
        kafka_protocol::messages::DefaultPrincipalData::default()
            .with_type(StrBytes::from_static_str("User"))
            .with_name(StrBytes::from_static_str("ANONYMOUS"))
            .encode(&mut principal, 0)
            .unwrap();
        let envelope = RequestKind::Envelope(
            EnvelopeRequest::default()
                .with_request_data(data.freeze())
                .with_request_principal(Some(principal.freeze()))
                .with_client_host_address(Bytes::from_static(&[10, 0, 0, 7])),
        );
        let ResponseKind::Envelope(r) =
            serve(&node, &anonymous(), ApiKey::Envelope, 0, envelope.clone())
        else {
            panic!()
        };
        assert_eq!(r.error_code, 31, "the broker itself needs CLUSTER_ACTION");
        let broker = Session {
            principal: "User:broker".into(),
            client_host: "10.0.0.2".into(),
        };
        let ResponseKind::Envelope(r) = serve(&node, &broker, ApiKey::Envelope, 0, envelope) else {
            panic!()
        };
        assert_eq!(r.error_code, 0);
        let mut bytes = r.response_data.unwrap();
        let _ = <kafka_protocol::messages::ResponseHeader as kafka_protocol::protocol::Decodable>::decode(&mut bytes, ApiKey::CreateTopics.response_header_version(version)).unwrap();
        let body = ResponseKind::decode(ApiKey::CreateTopics, &mut bytes, version).unwrap();
        assert_eq!(create_codes(&body), [("secret-x".into(), 29)]);
        assert!(node.sent.borrow().is_empty());
    }
}
