//! The node's one call path as seen from its edges (the Kafka listener, the controller
//! registration): a request goes to the driver's call table, a voter change (AddVoter,
//! RemoveVoter, UpdateVoter) to the Raft core as the RPC server steps it
//! ([`crate::rpc_server::voter_change`]); one that reaches a standby controller (a write, a
//! read, DescribeQuorum, a voter change) is forwarded to the active controller over
//! the private protocol, at the leader's client listener as its registration names it
//! (`DescribeControllers`), so a client reads its own acknowledged writes at any node. When
//! the leader or its endpoint is unknown a write gets `NotController` (Kafka's clients retry
//! it) and a read is answered from this node's replayed image (`LocalRead`).

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use corum_kafka::Backend;
use corum_protocol::{RpcConnection, RpcConnectionConfig};
use corum_runtime::tls::TlsClient;
use corum_types::{NodeId, Uuid};

use crate::dispatch::raft_request_timeout_ms;
use crate::driver::RaftHandle;
use crate::protocol::{LocalRead, RequestBody, RequestFrame, ResponseBody, RpcError};
use crate::raft_features;
use crate::rpc_server::{describe_quorum, is_voter_change, observer, voter_change};

/// What a [`NodeBackend`] needs to know about its node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardConfig {
    pub cluster_id: Uuid,
    pub node_id: NodeId,
    /// The wait of a lookup (`DescribeControllers`) and of a request naming none.
    pub request_timeout_ms: u32,
    /// `socket.request.max.bytes`: the largest request forwarded.
    pub request_bytes_max: u32,
    /// The client listener's name on every controller.
    pub client_listener_name: String,
}

impl NodeBackend {
    /// Uses `acls` (the controller service's) as the node's authorizer.
    pub fn with_acls(mut self, acls: crate::acl_slot::AclSlot) -> NodeBackend {
        self.acls = acls;
        self
    }
}

/// The driver's call path, and a connection to the active controller for what a standby
/// forwards.
pub struct NodeBackend {
    raft: RaftHandle,
    config: ForwardConfig,
    leader_connection: RefCell<Option<(NodeId, Rc<RpcConnection>)>>,
    forwarded: Cell<u64>,
    acls: crate::acl_slot::AclSlot,
    /// The client listener's TLS, as a client (the client listener mapped to SSL).
    tls: Option<Rc<TlsClient>>,
}

impl NodeBackend {
    pub fn new(raft: RaftHandle, config: ForwardConfig) -> NodeBackend {
        NodeBackend {
            raft,
            config,
            leader_connection: RefCell::default(),
            forwarded: Cell::new(0),
            acls: crate::acl_slot::AclSlot::default(),
            tls: None,
        }
    }

    /// Forwards over TLS (the leader's client listener is mapped to SSL), presenting this
    /// node's keystore.
    pub fn with_tls(mut self, tls: Option<Rc<TlsClient>>) -> NodeBackend {
        self.tls = tls;
        self
    }

    /// Requests forwarded to the active controller so far.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.get()
    }

    /// The Raft leader this node knows, read in place (no status copy).
    fn known_leader(&self) -> Option<NodeId> {
        self.raft.leadership().2
    }

    fn leads(&self) -> bool {
        self.known_leader() == Some(self.config.node_id)
    }

    /// The active controller's client endpoint, from its registration.
    async fn leader_client_addr(&self, leader: NodeId) -> Option<SocketAddr> {
        let frame = RequestFrame {
            correlation_id: 0,
            timeout_ms: self.config.request_timeout_ms,
            body: RequestBody::LocalRead(Box::new(LocalRead::DescribeControllers)),
        };
        let Ok(ResponseBody::DescribeControllers(r)) = self.raft.call(frame).await.body else {
            return None;
        };
        let c = r.controllers.iter().find(|c| c.controller_id == leader)?;
        let e = c.end_points.iter().find(|e| {
            e.name
                .eq_ignore_ascii_case(&self.config.client_listener_name)
        })?;
        crate::peer::resolve(&e.host, e.port).ok()
    }

    /// Sends `body` to the active controller over the private protocol.
    async fn forward(&self, body: RequestBody, timeout_ms: u32) -> Result<ResponseBody, RpcError> {
        let not_controller = || RpcError::NotController { leader: None };
        let leader = self
            .known_leader()
            .filter(|&l| l != self.config.node_id)
            .ok_or_else(not_controller)?;
        let cached = self
            .leader_connection
            .borrow()
            .as_ref()
            .filter(|(id, c)| *id == leader && !c.is_broken())
            .map(|(_, c)| c.clone());
        let connection = match cached {
            Some(c) => c,
            None => {
                let addr = self
                    .leader_client_addr(leader)
                    .await
                    .ok_or_else(not_controller)?;
                let config = RpcConnectionConfig {
                    request_bytes_max: self.config.request_bytes_max,
                    ..RpcConnectionConfig::default()
                };
                let c = Rc::new(
                    RpcConnection::connect_tls(addr, config, self.tls.as_deref())
                        .await
                        .map_err(|_| not_controller())?,
                );
                *self.leader_connection.borrow_mut() = Some((leader, c.clone()));
                c
            }
        };
        self.forwarded.set(self.forwarded.get() + 1);
        connection
            .call(body, Duration::from_millis(u64::from(timeout_ms.max(1))))
            .await
            .map_err(|e| match e {
                corum_protocol::error::RpcConnectionError::Rpc(e) => e,
                _ => not_controller(),
            })
    }
}

impl NodeBackend {
    /// `body` served by this node ([`raft_features::call`]: its controller service, or its
    /// Raft core for `kraft.version`). A standby names no leader here: the caller forwards.
    fn local(&self, body: RequestBody, timeout_ms: u32) -> raft_features::FeaturesCall<'_> {
        raft_features::call(&self.raft, body, 0, timeout_ms, |_| None)
    }
}

impl Backend for NodeBackend {
    fn authorizer(&self) -> Option<std::sync::Arc<corum_controller::acl::Authorizer>> {
        self.acls.authorizer()
    }

    fn scram_credential(
        &self,
        user: &str,
        mechanism: corum_controller::scram::ScramMechanism,
    ) -> Option<corum_controller::scram::ScramCredential> {
        self.acls.credential(user, mechanism)
    }

    async fn call(&self, body: RequestBody, timeout_ms: u32) -> Result<ResponseBody, RpcError> {
        // The ways other than the local call are boxed: each Kafka request's task holds this
        // future, and the common one (a write to this node's controller) needs a small one.
        if matches!(body, RequestBody::DescribeQuorum) {
            if self.leads() || self.known_leader().is_none() {
                return Ok(ResponseBody::DescribeQuorum(Box::new(describe_quorum(
                    self.config.cluster_id,
                    self.config.node_id,
                    &self.raft.status(),
                ))));
            }
            return Box::pin(self.forward(body, timeout_ms)).await;
        }
        if matches!(body, RequestBody::Fetch(_) | RequestBody::FetchSnapshot(_)) {
            // A broker following the log: served by the leader's core, never forwarded (a
            // standby's answer names the leader, and the broker fetches from it).
            return Box::pin(observer(&self.raft, body, timeout_ms, |_| None)).await;
        }
        if is_voter_change(&body) {
            let wait_ms = raft_request_timeout_ms(timeout_ms);
            // A standby names no leader here: it forwards the change to it instead.
            return match Box::pin(voter_change(&self.raft, body.clone(), wait_ms, |_| None)).await {
                Err(RpcError::NotController { .. }) if !self.leads() => {
                    Box::pin(self.forward(body, timeout_ms)).await
                }
                other => other,
            };
        }
        let local = self.local(body.clone(), timeout_ms).await;
        let answer = match local {
            Err(RpcError::NotController { .. }) if !self.leads() => {
                Box::pin(self.forward(body.clone(), timeout_ms)).await
            }
            other => other,
        };
        // No active controller within reach: a read is answered from this node's image.
        let read = match &answer {
            Err(RpcError::NotController { .. }) => corum_kafka::service::as_local_read(&body),
            _ => None,
        };
        match read {
            Some(read) => {
                self.local(RequestBody::LocalRead(Box::new(read)), timeout_ms)
                    .await
            }
            None => answer,
        }
    }

    fn leader(&self) -> Option<NodeId> {
        self.known_leader()
    }

    fn leadership(&self) -> (u64, Option<NodeId>) {
        let (_, epoch, leader, _) = self.raft.leadership();
        (epoch.0, leader)
    }

    fn wall_clock_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}
