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
