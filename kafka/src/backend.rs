//! What the Kafka handlers need from the node they run in.

use std::future::Future;

use corum_protocol::{RequestBody, ResponseBody, RpcError};
use corum_types::{NodeId, Uuid};

use crate::apis::ServedApis;

/// One corum request through the node's one call path (the call table, the controller
/// service, an answer at commit). A node that cannot serve it (a standby controller for a
/// write) forwards it to the active controller or answers `NotController`.
pub trait Backend {
    fn call(
        &self,
        body: RequestBody,
        timeout_ms: u32,
    ) -> impl Future<Output = Result<ResponseBody, RpcError>>;

    /// The active controller as this node knows it (the Raft leader), if any.
    fn leader(&self) -> Option<NodeId>;

    /// Wall-clock milliseconds since the Unix epoch (DescribeQuorum reports times as such).
    fn wall_clock_ms(&self) -> i64;

    /// The Raft epoch this node is in and the leader it knows: what a broker that fetched
    /// from a node that does not lead is told.
    fn leadership(&self) -> (u64, Option<NodeId>) {
        (0, self.leader())
    }

    /// The node's authorizer over the ACLs it replayed (its committed image), or `None` when
    /// `authorizer.class.name` is empty: then every request is allowed and the ACL APIs answer
    /// SECURITY_DISABLED.
    fn authorizer(&self) -> Option<std::sync::Arc<corum_controller::acl::Authorizer>> {
        None
    }

    /// `user`'s SCRAM credential for `mechanism` in the node's replayed (committed) image:
    /// what a SASL listener authenticates SCRAM clients against.
    fn scram_credential(
        &self,
        _user: &str,
        _mechanism: corum_controller::scram::ScramMechanism,
    ) -> Option<corum_controller::scram::ScramCredential> {
        None
    }
}

/// The listener a request came in on, and the node behind it.
#[derive(Clone, Debug)]
pub struct ListenerContext {
    /// The listener's name (`KAFKA` in `listeners=KAFKA://…`): Metadata lists each node's
    /// endpoint of the same name, as Kafka does.
    pub listener_name: String,
    /// The listener the voters reach each other on (the first of
    /// `controller.listener.names`): a voter added or updated must name it.
    pub controller_listener_name: String,
    pub cluster_id: Uuid,
    pub node_id: NodeId,
    /// Where clients reach this node on this listener (`advertised.listeners`): listed in
    /// Metadata and DescribeCluster when the controllers' registrations do not name it yet.
    pub advertised_host: String,
    pub advertised_port: u16,
    /// The wait of a request that names none (or 0): `controller.quorum.request.timeout.ms`.
    pub default_timeout_ms: u32,
    pub served: ServedApis,
    /// What the listener remembers of the brokers following the metadata log.
    pub log: crate::log::ObserverMemory,
}

impl ListenerContext {
    /// A controller's listener `KAFKA` of node 1 in cluster `cluster_id`, advertised as
    /// localhost:9092, for unit tests.
    #[cfg(test)]
    pub(crate) fn for_tests(cluster_id: Uuid) -> ListenerContext {
        ListenerContext {
            listener_name: "KAFKA".into(),
            controller_listener_name: "CONTROLLER".into(),
            cluster_id,
            node_id: NodeId(1),
            advertised_host: "localhost".into(),
            advertised_port: 9092,
            default_timeout_ms: 2_000,
            served: ServedApis::controller(),
            log: Default::default(),
        }
    }

    /// The wait for a request carrying `timeout_ms` (Kafka's field; 0 or less means the
    /// default). The node's call table caps it at its own maximum.
    pub fn timeout_ms(&self, timeout_ms: i32) -> u32 {
        if timeout_ms > 0 {
            timeout_ms as u32
        } else {
            self.default_timeout_ms
        }
    }

    /// The cluster id as Kafka prints it (base64url, no padding).
    pub fn cluster_id_text(&self) -> String {
        self.cluster_id.to_string()
    }
}
