//! Authorization on the node's client-facing listeners: who sent a request ([`Session`]),
//! what each API needs ([`needs`], Kafka's `ControllerApis`), and the decisions against the
//! node's authorizer ([`Gate`]; [`crate::Backend::authorizer`]: the ACLs of its committed
//! image, or none when `authorizer.class.name` is empty, and then everything is allowed).
//!
//! Both listeners take their decisions from here: the Kafka listener for Kafka's requests
//! ([`crate::service`]), and the private client listener (`corum_node::rpc_auth`) for
//! corum's own requests, each of which is mapped to the Kafka API of the same meaning
//! ([`kafka_api`]: CreateTopicsWithConfigs is CreateTopics, DescribeTopics is Metadata,
//! RegisterBroker is BrokerRegistration, AddVoter is AddRaftVoter, ...).
//!
//! | API | needs ([`Needs`]) | refused with |
//! |---|---|---|
//! | CreateTopics | CREATE on the cluster, else CREATE on each topic | TOPIC_AUTHORIZATION_FAILED for that topic |
//! | DeleteTopics | DELETE on the cluster, else DELETE on each topic named (a topic named only by id needs the cluster's) | TOPIC_AUTHORIZATION_FAILED for that topic |
//! | CreatePartitions | ALTER on each topic | TOPIC_AUTHORIZATION_FAILED for that topic |
//! | DescribeConfigs / AlterConfigs, IncrementalAlterConfigs | DESCRIBE_CONFIGS / ALTER_CONFIGS on each topic, on the cluster for a broker or broker logger | TOPIC_ / CLUSTER_AUTHORIZATION_FAILED for that resource |
//! | Metadata, DescribeTopicPartitions | DESCRIBE on each topic | a topic asked for by name: TOPIC_AUTHORIZATION_FAILED; all topics: the others are left out |
//! | ElectLeaders, UpdateFeatures, CreateAcls, DeleteAcls, AddRaftVoter, RemoveRaftVoter, AlterUserScramCredentials | ALTER on the cluster | CLUSTER_AUTHORIZATION_FAILED |
//! | DescribeCluster, DescribeQuorum, DescribeAcls, ListPartitionReassignments, DescribeUserScramCredentials | DESCRIBE on the cluster | CLUSTER_AUTHORIZATION_FAILED |
//! | BrokerRegistration, BrokerHeartbeat, UnregisterBroker, AlterPartition, AssignReplicasToDirs, AllocateProducerIds, Fetch and FetchSnapshot (of `__cluster_metadata`), UpdateRaftVoter, ControllerRegistration, Envelope | CLUSTER_ACTION on the cluster | CLUSTER_AUTHORIZATION_FAILED |
//! | ApiVersions (and corum's DescribeFeatures), SaslHandshake, SaslAuthenticate | nothing | |
//!
//! A request inside an Envelope is then authorized as the principal and client address the
//! broker forwarded.
//!
//! A session whose client certificate names a controller (`controller-<node id>`, the
//! identity the controller listener requires of its peers) is a super user on every listener
//! ([`Session::super_user`]): what Kafka asks of an operator (its controllers' and brokers'
//! principals in `super.users`), derived from the certificate the quorum already trusts, so
//! that a standby's forwards and every node's registration pass whatever the ACLs say.
//!
//! A refusal is logged (rate-limited, [`DENIED_LOG`]) at `info`, as Kafka's authorizer logger
//! logs a denied operation, except the checks Kafka does not log either: the cluster-wide
//! check that CreateTopics and DeleteTopics fall back from, and the topics left out of an
//! answer about all topics.

use std::sync::Arc;

use corum_controller::acl::{
    AclOperation, AuthorizationFailure, Authorizer, Requester, ResourceType, ANONYMOUS,
    CLUSTER_NAME,
};
use corum_protocol::{LocalRead, RequestBody};
use corum_runtime::LogLimiter;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;

/// Who sent a request: the principal its connection authenticated as (`User:ANONYMOUS` on a
/// PLAINTEXT listener, Kafka's rule) and the client's address. A connection's session is set
/// when it is accepted (from its client certificate) and again when SASL authenticates it; a
/// request inside an Envelope carries the forwarded one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// `Type:name`, as Kafka's `KafkaPrincipal.toString`.
    pub principal: String,
    /// The client's IP address as text.
    pub client_host: String,
    /// Allowed everything, as a principal in `super.users`: the connection's client
    /// certificate names a controller (see the module doc). Never set for a SASL or
    /// forwarded principal.
    pub super_user: bool,
}

impl Session {
    /// An unauthenticated connection from `client_host`.
    pub fn anonymous(client_host: impl Into<String>) -> Session {
        Session::authenticated(ANONYMOUS, client_host)
    }

    /// A connection from `client_host` authenticated as `principal` (not a super user by
    /// itself: `super.users` decides).
    pub fn authenticated(principal: impl Into<String>, client_host: impl Into<String>) -> Session {
        Session {
            principal: principal.into(),
            client_host: client_host.into(),
            super_user: false,
        }
    }
}

/// What one API needs from the requester (Kafka's `ControllerApis`; the table in the module
/// doc). Both listeners read it: the Kafka listener for the API of each request, the private
/// listener for the Kafka API of each of its requests ([`kafka_api`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: served to anyone.
    Nothing,
    /// The operation on the cluster; the request is refused whole otherwise.
    Cluster(AclOperation),
    /// The operation on each topic named; with `cluster_covers`, the operation on the cluster
    /// allows every topic. A refused topic is answered on its own, the others served.
    Topics {
        op: AclOperation,
        cluster_covers: bool,
    },
    /// The operation on each config resource: a topic on that topic, a broker (or broker
    /// logger, or the cluster default) on the cluster. Refused resources are answered on
    /// their own.
    Configs(AclOperation),
    /// DESCRIBE on each topic the answer describes (Metadata): refused by name when the
    /// request named it, left out of an answer about all topics.
    DescribeTopics,
}

/// What the Kafka API `api` needs (see [`Needs`]).
pub fn needs(api: ApiKey) -> Needs {
    use AclOperation as O;
    match api {
        ApiKey::CreateTopics => Needs::Topics {
            op: O::Create,
            cluster_covers: true,
        },
        ApiKey::DeleteTopics => Needs::Topics {
            op: O::Delete,
            cluster_covers: true,
        },
        ApiKey::CreatePartitions => Needs::Topics {
            op: O::Alter,
            cluster_covers: false,
        },
        ApiKey::DescribeConfigs => Needs::Configs(O::DescribeConfigs),
        ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs => Needs::Configs(O::AlterConfigs),
        ApiKey::Metadata | ApiKey::DescribeTopicPartitions => Needs::DescribeTopics,
        ApiKey::ElectLeaders
        | ApiKey::UpdateFeatures
        | ApiKey::CreateAcls
        | ApiKey::DeleteAcls
        | ApiKey::AddRaftVoter
        | ApiKey::RemoveRaftVoter
        | ApiKey::AlterUserScramCredentials => Needs::Cluster(O::Alter),
        ApiKey::DescribeCluster
        | ApiKey::DescribeQuorum
        | ApiKey::DescribeAcls
        | ApiKey::ListPartitionReassignments
        | ApiKey::DescribeUserScramCredentials => Needs::Cluster(O::Describe),
        ApiKey::BrokerRegistration
        | ApiKey::BrokerHeartbeat
        | ApiKey::UnregisterBroker
        | ApiKey::AlterPartition
        | ApiKey::AssignReplicasToDirs
        | ApiKey::AllocateProducerIds
        | ApiKey::Fetch
        | ApiKey::FetchSnapshot
        | ApiKey::UpdateRaftVoter
        | ApiKey::ControllerRegistration
        | ApiKey::Envelope => Needs::Cluster(O::ClusterAction),
        _ => Needs::Nothing,
    }
}

/// The Kafka API of the same meaning as corum's request `body`: what the private client
/// listener authorizes it as ([`needs`]). A [`LocalRead`] is the read it names.
pub fn kafka_api(body: &RequestBody) -> ApiKey {
    use RequestBody as R;
    match body {
        R::BrokerHeartbeat(_) => ApiKey::BrokerHeartbeat,
        R::UnregisterBroker(_) => ApiKey::UnregisterBroker,
        R::CreateTopics(_) | R::CreateTopicsWithConfigs(_) => ApiKey::CreateTopics,
        R::DeleteTopics(_) | R::DeleteTopicsV2(_) => ApiKey::DeleteTopics,
        R::CreatePartitions(_) => ApiKey::CreatePartitions,
        R::AlterIsr(_) | R::AlterPartition(_) => ApiKey::AlterPartition,
        R::ElectLeaders(_) => ApiKey::ElectLeaders,
        R::IncrementalAlterConfigs(_) => ApiKey::IncrementalAlterConfigs,
        R::AlterConfigs(_) => ApiKey::AlterConfigs,
        R::DescribeConfigs(_) => ApiKey::DescribeConfigs,
        R::UpdateFeatures(_) => ApiKey::UpdateFeatures,
        R::AllocateProducerIds(_) => ApiKey::AllocateProducerIds,
        R::DescribeCluster | R::DescribeControllers => ApiKey::DescribeCluster,
        R::DescribeQuorum => ApiKey::DescribeQuorum,
        R::Fetch(_) => ApiKey::Fetch,
        R::FetchSnapshot(_) => ApiKey::FetchSnapshot,
        R::AddVoter(_) => ApiKey::AddRaftVoter,
        R::RemoveVoter(_) => ApiKey::RemoveRaftVoter,
        R::UpdateVoter(_) => ApiKey::UpdateRaftVoter,
        R::RegisterController(_) => ApiKey::ControllerRegistration,
        R::DescribeTopics(_) => ApiKey::Metadata,
        R::DescribeTopicsV2(_) => ApiKey::DescribeTopicPartitions,
        // Kafka serves the finalized features in ApiVersions answers.
        R::DescribeFeatures => ApiKey::ApiVersions,
        R::RegisterBroker(_) => ApiKey::BrokerRegistration,
        R::AssignReplicasToDirs(_) => ApiKey::AssignReplicasToDirs,
        R::CreateAcls(_) => ApiKey::CreateAcls,
        R::DeleteAcls(_) => ApiKey::DeleteAcls,
        R::DescribeAcls(_) => ApiKey::DescribeAcls,
        R::AlterUserScramCredentials(_) => ApiKey::AlterUserScramCredentials,
        R::DescribeUserScramCredentials(_) => ApiKey::DescribeUserScramCredentials,
        R::LocalRead(read) => match &**read {
            LocalRead::DescribeCluster | LocalRead::DescribeControllers => ApiKey::DescribeCluster,
            LocalRead::DescribeConfigs(_) => ApiKey::DescribeConfigs,
            LocalRead::DescribeTopics(_) => ApiKey::Metadata,
            LocalRead::DescribeFeatures => ApiKey::ApiVersions,
            LocalRead::DescribeTopicsV2(_) => ApiKey::DescribeTopicPartitions,
            LocalRead::DescribeAcls(_) => ApiKey::DescribeAcls,
            LocalRead::DescribeUserScramCredentials(_) => ApiKey::DescribeUserScramCredentials,
        },
    }
}

/// Kafka's config resource type codes.
pub const CONFIG_RESOURCE_TOPIC: i8 = 2;
pub const CONFIG_RESOURCE_BROKER: i8 = 4;
pub const CONFIG_RESOURCE_BROKER_LOGGER: i8 = 8;

/// Refusals logged per second at most, across the node's listeners (the rest are counted and
/// reported with the next line, `suppressed=N`): a client retrying a refused request in a
/// loop must not flood the log.
pub static DENIED_LOG: LogLimiter = LogLimiter::new(10);

/// The decisions for one request: the node's authorizer (none: everything allowed) and the
/// session.
pub struct Gate<'a> {
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
    pub fn new(authorizer: Option<Arc<Authorizer>>, session: &'a Session) -> Gate<'a> {
        Gate {
            authorizer,
            session,
        }
    }

    pub fn session(&self) -> &'a Session {
        self.session
    }

    /// Whether an authorizer is configured (the ACL APIs are served, requests are checked).
    pub fn enabled(&self) -> bool {
        self.authorizer.is_some()
    }

    /// The decision on `op` on the resource `name` of type `t`; a refusal is logged when
    /// `log` (see the module doc).
    fn decide(
        &self,
        op: AclOperation,
        t: ResourceType,
        name: &str,
        log: bool,
    ) -> Result<(), AuthorizationFailure> {
        let Some(a) = &self.authorizer else {
            return Ok(());
        };
        if self.session.super_user {
            return Ok(());
        }
        let who = Requester {
            principal: &self.session.principal,
            host: &self.session.client_host,
        };
        if a.authorize(who, op, t, name) {
            return Ok(());
        }
        if log {
            if let Some(suppressed) = DENIED_LOG.allow() {
                tracing::info!(principal = %self.session.principal, host = %self.session.client_host,
                    operation = %op, resource_type = %t, resource = name, suppressed,
                    "authorization denied");
            }
        }
        Err(AuthorizationFailure {
            principal: self.session.principal.clone(),
            operation: op,
            resource_type: t,
            resource_name: name.to_owned(),
        })
    }

    /// `op` on the cluster.
    pub fn cluster(&self, op: AclOperation) -> Result<(), AuthorizationFailure> {
        self.decide(op, ResourceType::Cluster, CLUSTER_NAME, true)
    }

    /// The whole-request check of `api`: its operation on the cluster when it needs one
    /// ([`Needs::Cluster`]), else nothing (its items are checked on their own).
    pub fn whole(&self, api: ApiKey) -> Result<(), AuthorizationFailure> {
        match needs(api) {
            Needs::Cluster(op) => self.cluster(op),
            _ => Ok(()),
        }
    }

    /// The per-topic checks of `api` ([`Needs::Topics`]; for another API, every topic
    /// passes). The cluster-wide operation is decided once, here.
    pub fn topics(&self, api: ApiKey) -> TopicChecks<'_, 'a> {
        let (op, covered) = match needs(api) {
            Needs::Topics { op, cluster_covers } => (
                Some(op),
                cluster_covers
                    && self
                        .decide(op, ResourceType::Cluster, CLUSTER_NAME, false)
                        .is_ok(),
            ),
            _ => (None, true),
        };
        TopicChecks {
            gate: self,
            op,
            covered,
        }
    }

    /// The check of one config resource of `api` ([`Needs::Configs`]), of Kafka's resource
    /// type code `resource_type` ([`CONFIG_RESOURCE_TOPIC`], ...) named `name`: a topic on
    /// that topic, a broker or broker logger on the cluster. Other types, and other APIs,
    /// pass (the request's own checks answer them).
    pub fn config(
        &self,
        api: ApiKey,
        resource_type: i8,
        name: &str,
    ) -> Result<(), AuthorizationFailure> {
        let Needs::Configs(op) = needs(api) else {
            return Ok(());
        };
        match resource_type {
            CONFIG_RESOURCE_TOPIC => self.decide(op, ResourceType::Topic, name, true),
            CONFIG_RESOURCE_BROKER | CONFIG_RESOURCE_BROKER_LOGGER => self.cluster(op),
            _ => Ok(()),
        }
    }

    /// DESCRIBE on topic `name` ([`Needs::DescribeTopics`]), logged when refused if `named`
    /// (the request asked for it; a topic left out of an answer about all topics is not
    /// logged).
    pub fn describe_topic(&self, name: &str, named: bool) -> Result<(), AuthorizationFailure> {
        self.decide(AclOperation::Describe, ResourceType::Topic, name, named)
    }
}

/// The per-topic checks of one request (see [`Gate::topics`]).
pub struct TopicChecks<'g, 'a> {
    gate: &'g Gate<'a>,
    op: Option<AclOperation>,
    /// The cluster-wide operation is allowed (or no check applies): every topic passes.
    covered: bool,
}

impl TopicChecks<'_, '_> {
    /// The check of topic `name`.
    pub fn check(&self, name: &str) -> Result<(), AuthorizationFailure> {
        match self.op {
            Some(op) if !self.covered => self.gate.decide(op, ResourceType::Topic, name, true),
            _ => Ok(()),
        }
    }

    /// The check of a topic named only by its id `id` (DeleteTopics v6): it passes only with
    /// the cluster-wide operation, since the name its ACLs would name is not resolved here (a
    /// refusal names the id, answered TOPIC_AUTHORIZATION_FAILED as Kafka answers an id it
    /// may not see).
    pub fn check_id(&self, id: &str) -> Result<(), AuthorizationFailure> {
        match self.op {
            Some(op) if !self.covered && self.gate.enabled() && !self.gate.session.super_user => {
                if let Some(suppressed) = DENIED_LOG.allow() {
                    tracing::info!(principal = %self.gate.session.principal,
                        host = %self.gate.session.client_host, operation = %op,
                        resource_type = %ResourceType::Cluster, resource = CLUSTER_NAME,
                        topic_id = id, suppressed, "authorization denied");
                }
                Err(AuthorizationFailure {
                    principal: self.gate.session.principal.clone(),
                    operation: op,
                    resource_type: ResourceType::Topic,
                    resource_name: id.to_owned(),
                })
            }
            _ => Ok(()),
        }
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
        let broker = Session::authenticated("User:broker", "10.0.0.2");
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
        let admin = Session::authenticated("User:admin", "10.0.0.2");
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

    /// The table of the module doc, as `needs` answers it (a change here is a change of
    /// what both listeners ask of a client).
    #[test]
    fn needs_is_kafkas_table() {
        use AclOperation as O;
        let topics = |op, cluster_covers| Needs::Topics { op, cluster_covers };
        let table = [
            (ApiKey::CreateTopics, topics(O::Create, true)),
            (ApiKey::DeleteTopics, topics(O::Delete, true)),
            (ApiKey::CreatePartitions, topics(O::Alter, false)),
            (ApiKey::DescribeConfigs, Needs::Configs(O::DescribeConfigs)),
            (ApiKey::AlterConfigs, Needs::Configs(O::AlterConfigs)),
            (
                ApiKey::IncrementalAlterConfigs,
                Needs::Configs(O::AlterConfigs),
            ),
            (ApiKey::Metadata, Needs::DescribeTopics),
            (ApiKey::DescribeTopicPartitions, Needs::DescribeTopics),
            (ApiKey::ElectLeaders, Needs::Cluster(O::Alter)),
            (ApiKey::UpdateFeatures, Needs::Cluster(O::Alter)),
            (ApiKey::CreateAcls, Needs::Cluster(O::Alter)),
            (ApiKey::DeleteAcls, Needs::Cluster(O::Alter)),
            (ApiKey::AddRaftVoter, Needs::Cluster(O::Alter)),
            (ApiKey::RemoveRaftVoter, Needs::Cluster(O::Alter)),
            (ApiKey::AlterUserScramCredentials, Needs::Cluster(O::Alter)),
            (ApiKey::DescribeCluster, Needs::Cluster(O::Describe)),
            (ApiKey::DescribeQuorum, Needs::Cluster(O::Describe)),
            (ApiKey::DescribeAcls, Needs::Cluster(O::Describe)),
            (
                ApiKey::ListPartitionReassignments,
                Needs::Cluster(O::Describe),
            ),
            (
                ApiKey::DescribeUserScramCredentials,
                Needs::Cluster(O::Describe),
            ),
            (ApiKey::BrokerRegistration, Needs::Cluster(O::ClusterAction)),
            (ApiKey::BrokerHeartbeat, Needs::Cluster(O::ClusterAction)),
            (ApiKey::UnregisterBroker, Needs::Cluster(O::ClusterAction)),
            (ApiKey::AlterPartition, Needs::Cluster(O::ClusterAction)),
            (
                ApiKey::AssignReplicasToDirs,
                Needs::Cluster(O::ClusterAction),
            ),
            (
                ApiKey::AllocateProducerIds,
                Needs::Cluster(O::ClusterAction),
            ),
            (ApiKey::Fetch, Needs::Cluster(O::ClusterAction)),
            (ApiKey::FetchSnapshot, Needs::Cluster(O::ClusterAction)),
            (ApiKey::UpdateRaftVoter, Needs::Cluster(O::ClusterAction)),
            (
                ApiKey::ControllerRegistration,
                Needs::Cluster(O::ClusterAction),
            ),
            (ApiKey::Envelope, Needs::Cluster(O::ClusterAction)),
            (ApiKey::ApiVersions, Needs::Nothing),
            (ApiKey::SaslHandshake, Needs::Nothing),
            (ApiKey::SaslAuthenticate, Needs::Nothing),
        ];
        for (api, expected) in table {
            assert_eq!(needs(api), expected, "{api:?}");
        }
        // Every API the listener serves is in the table.
        for api in crate::apis::SERVED {
            assert!(
                table.iter().any(|(a, _)| a == api),
                "{api:?} not in the table"
            );
        }
    }

    /// corum's requests need what the Kafka API of the same meaning needs: the same
    /// operations on the same resources as on the Kafka listener.
    #[test]
    fn private_requests_need_what_their_kafka_apis_need() {
        use corum_controller::control::config_control::{
            DescribeConfigsRequest, IncrementalAlterConfigsRequest,
        };
        use corum_controller::control::replication_control::{
            CreateTopicsRequest as Create, DescribeTopicsRequest,
        };
        use corum_raft::message::{RemoveVoterRequest, UpdateVoterRequest};
        use corum_raft::{ReplicaKey, Voter};
        use AclOperation as O;
        let key = ReplicaKey {
            id: NodeId(4),
            directory_id: Uuid([4; 16]),
        };
        let create = Create {
            topics: vec![],
            validate_only: false,
        };
        let cases = [
            (
                RequestBody::CreateTopicsWithConfigs(create.clone()),
                Needs::Topics {
                    op: O::Create,
                    cluster_covers: true,
                },
            ),
            (
                RequestBody::CreateTopics(create),
                Needs::Topics {
                    op: O::Create,
                    cluster_covers: true,
                },
            ),
            (
                RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
                    resources: vec![],
                    validate_only: false,
                }),
                Needs::Configs(O::AlterConfigs),
            ),
            (
                RequestBody::LocalRead(Box::new(LocalRead::DescribeConfigs(
                    DescribeConfigsRequest::default(),
                ))),
                Needs::Configs(O::DescribeConfigs),
            ),
            (
                RequestBody::DescribeTopics(DescribeTopicsRequest { topics: None }),
                Needs::DescribeTopics,
            ),
            (
                RequestBody::RemoveVoter(RemoveVoterRequest {
                    request_id: 1,
                    voter: key,
                }),
                Needs::Cluster(O::Alter),
            ),
            (
                RequestBody::UpdateVoter(UpdateVoterRequest {
                    request_id: 1,
                    voter: Voter {
                        key,
                        endpoints: vec![],
                    },
                }),
                Needs::Cluster(O::ClusterAction),
            ),
            (RequestBody::DescribeQuorum, Needs::Cluster(O::Describe)),
            (
                RequestBody::DescribeControllers,
                Needs::Cluster(O::Describe),
            ),
            (
                RequestBody::LocalRead(Box::new(LocalRead::DescribeCluster)),
                Needs::Cluster(O::Describe),
            ),
            (RequestBody::DescribeFeatures, Needs::Nothing),
        ];
        for (body, expected) in cases {
            assert_eq!(needs(kafka_api(&body)), expected, "{}", body.kind());
        }
    }

    /// A controller's certificate (`super_user`) passes a closed authorizer; a principal in
    /// `super.users` too; anybody else is refused with the permission named.
    #[test]
    fn controllers_and_super_users_pass_a_closed_cluster() {
        let closed = Some(Arc::new(Authorizer::new(
            AuthorizerConfig {
                super_users: vec!["User:CN=admin".into()],
                allow_everyone_if_no_acl_found: false,
            },
            AclsImage::default(),
        )));
        let mut controller = Session::authenticated("User:CN=controller-2", "10.0.0.2");
        controller.super_user = true;
        let admin = Session::authenticated("User:CN=admin", "10.0.0.3");
        let tenant = Session::authenticated("User:CN=tenant", "10.0.0.4");
        for who in [&controller, &admin] {
            let gate = Gate::new(closed.clone(), who);
            assert!(gate.whole(ApiKey::AddRaftVoter).is_ok());
            assert!(gate.topics(ApiKey::CreateTopics).check("t").is_ok());
            assert!(gate.topics(ApiKey::DeleteTopics).check_id("AAAA").is_ok());
            assert!(gate
                .config(ApiKey::IncrementalAlterConfigs, CONFIG_RESOURCE_BROKER, "1")
                .is_ok());
        }
        let gate = Gate::new(closed.clone(), &tenant);
        let refusal = gate.whole(ApiKey::AddRaftVoter).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "Cluster authorization failed: User:CN=tenant is not authorized to ALTER on CLUSTER kafka-cluster"
        );
        assert_eq!(refusal.kafka_error_code(), 31);
        let refusal = gate.topics(ApiKey::CreateTopics).check("t").unwrap_err();
        assert_eq!(
            (
                refusal.operation,
                refusal.resource_type,
                refusal.kafka_error_code()
            ),
            (AclOperation::Create, ResourceType::Topic, 29)
        );
        assert!(gate.topics(ApiKey::DeleteTopics).check_id("AAAA").is_err());
        let refusal = gate
            .config(ApiKey::DescribeConfigs, CONFIG_RESOURCE_TOPIC, "t")
            .unwrap_err();
        assert_eq!(refusal.operation, AclOperation::DescribeConfigs);
        let refusal = gate
            .config(ApiKey::AlterConfigs, CONFIG_RESOURCE_BROKER, "")
            .unwrap_err();
        assert_eq!(
            (refusal.resource_type, refusal.operation),
            (ResourceType::Cluster, AclOperation::AlterConfigs)
        );
        // Nothing is needed for ApiVersions; no authorizer: nothing is checked at all.
        assert!(gate.whole(ApiKey::ApiVersions).is_ok());
        let open = Gate::new(None, &tenant);
        assert!(open.whole(ApiKey::AddRaftVoter).is_ok());
        assert!(open.topics(ApiKey::DeleteTopics).check_id("AAAA").is_ok());
        assert!(open.topics(ApiKey::CreatePartitions).check("t").is_ok());
    }

    /// CREATE on the cluster covers every topic of a CreateTopics; ALTER on the cluster does
    /// not cover CreatePartitions' topics (Kafka checks those by topic only).
    #[test]
    fn the_cluster_covers_only_where_kafka_says() {
        let mut acls = AclsImage::default();
        for (i, op) in [AclOperation::Create, AclOperation::Alter]
            .into_iter()
            .enumerate()
        {
            acls.replay_create_for_tests(
                Uuid([i as u8 + 1; 16]),
                acl(
                    ResourceType::Cluster,
                    CLUSTER_NAME,
                    PatternType::Literal,
                    "User:CN=ops",
                    op,
                    AclPermissionType::Allow,
                ),
            );
        }
        let authorizer = Some(Arc::new(Authorizer::new(AuthorizerConfig::default(), acls)));
        let ops = Session::authenticated("User:CN=ops", "10.0.0.5");
        let gate = Gate::new(authorizer, &ops);
        assert!(gate.topics(ApiKey::CreateTopics).check("any").is_ok());
        assert!(gate.topics(ApiKey::CreatePartitions).check("any").is_err());
        assert!(gate.whole(ApiKey::ElectLeaders).is_ok());
        assert!(gate.topics(ApiKey::DeleteTopics).check("any").is_err());
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
        let broker = Session::authenticated("User:broker", "10.0.0.2");
        let ResponseKind::Envelope(r) = serve(&node, &broker, ApiKey::Envelope, 0, envelope) else {
            panic!()
        };
        assert_eq!(r.error_code, 0);
        let (_, body) =
            crate::response::decode(r.response_data.unwrap(), ApiKey::CreateTopics, version);
        assert_eq!(create_codes(&body), [("secret-x".into(), 29)]);
        assert!(node.sent.borrow().is_empty());
    }
}
