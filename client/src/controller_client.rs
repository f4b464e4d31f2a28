//! [`ControllerClient`]: a leader-following, pipelining client of a corum quorum.
//!
//! One client holds one connection (a [`corum_protocol::RpcConnection`], which reports what
//! its server says and follows nothing) to the server it believes is the active controller;
//! any number of concurrent calls pipeline on it. This is the one place leaders are followed:
//! the tools, the broker library and the metadata follower all call through it. A call that meets a retriable failure moves the client and tries again, with
//! a small capped backoff, until [`ClientConfig::retry_deadline`]:
//!
//! | answer / failure | retried? | where next |
//! |---|---|---|
//! | success, or any other `RpcError` (`Api`, `Malformed`, `NotImplemented`, ...), an invalid answer | no | — |
//! | `Timeout` (the server's: a slow commit) | no | stays |
//! | no answer within `request_timeout` (reported as `Timeout`) | no | later calls: the next bootstrap server |
//! | `NotController { leader: Some(hint) }` | yes, at once (after a backoff from the third hint in a row) | the hint's address if it is a bootstrap server, else the address learned for the hint's id, else the next bootstrap server |
//! | `NotController { leader: None }` (election running) | yes, after a backoff | the next bootstrap server that accepts a connection; if none does, the same server again |
//! | connection lost, connect refused | yes, after a backoff | the next bootstrap server, this one (reconnected) last |
//!
//! `DescribeQuorum` is answered by any node, so its answers move nothing and do not count in
//! [`ControllerClient::leader_changes`]; every other request is answered only by the active
//! controller.
//!
//! Why hints are not trusted blindly: a node names the leader by its *Raft* endpoint unless
//! its RPC server was told the others' client endpoints, and a Raft endpoint does not speak
//! the client protocol. So the client only ever connects to bootstrap servers. When a call
//! that followed a hint naming node `N` is then answered by server `A`, the client remembers
//! `N -> A` and goes straight there the next time a hint names `N`.
//!
//! A `Timeout` is not retried: the request may still commit, and only the caller knows whether
//! sending it again is harmless. It does move the client to the next bootstrap server for
//! later calls, though: a leader that lets requests time out may be hung or cut off from
//! the client, and if it still leads, the next call's hint leads straight back. A lost connection *is* retried (the request may have taken
//! effect already), so non-idempotent requests may apply twice across a failover: a retried
//! `CreateTopics` can answer `TopicAlreadyExists`.
//!
//! Moving is single-flight: when many calls fail on the same connection at once, the first
//! moves the client and the others retry on the new connection.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_controller::control::cluster_control::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse, DescribeClusterResponse,
};
use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsResource, AlterableConfig, DescribeConfigsRequest,
    DescribeConfigsResponse, DescribedConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use corum_controller::control::replication_control::{
    AlterPartitionRequest, AlterPartitionResponse, AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse, CreatableTopic, CreateTopicsRequest, CreateTopicsResponse,
    CreatedTopic,
};
use corum_controller::image::ConfigResource;
use corum_protocol::{
    DescribeQuorumResponse, LeaderHint, RequestBody, ResponseBody, RpcConnection,
    RpcConnectionConfig, RpcConnectionError, RpcError,
};
use corum_raft::message::{
    FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse,
};
use corum_runtime::tls::{TlsClient, TlsSettings};
use corum_types::NodeId;
use glommio::sync::Semaphore;

use crate::error::{ClientError, Result};

/// First pause after a retriable failure; doubled per failure of the same call.
const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// Largest pause between two attempts of one call. It bounds how late a client notices a
/// new leader after a fail-over (the pause it is in when the election ends), so it is kept
/// well below the 200 ms fail-over budget; a few dozen retries a second per waiting call are
/// cheap for the followers that answer them.
const BACKOFF_CAP: Duration = Duration::from_millis(40);
/// Hints one call follows in a row without pausing.
const HINTS_WITHOUT_PAUSE_MAX: u32 = 2;

/// Settings of a [`ControllerClient`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Client endpoints of the controllers; the only addresses the client connects to.
    pub bootstrap: Vec<SocketAddr>,
    /// How long one attempt of a call waits for its answer (the server is given the same
    /// timeout and answers `Timeout` rather than commit later).
    pub request_timeout: Duration,
    /// Total time a call keeps retrying `NotController`, lost connections and unreachable
    /// servers before it fails with [`ClientError::LeaderNotFound`]; also bounds
    /// [`ControllerClient::connect`].
    pub retry_deadline: Duration,
    /// Size limits of the connection.
    pub rpc: RpcConnectionConfig,
    /// Whether a call is retried after it may have reached the server: its connection was
    /// lost after sending, or the server answered `NotController` (which a deposed leader
    /// answers for a write that may still commit). On by default, as Kafka's clients do: a
    /// retried write may then take effect twice (a config set again, a topic creation
    /// answered `TopicAlreadyExists` for the call's own topic). Off, such a call fails with
    /// [`ClientError::OutcomeUnknown`] once the client has moved on to another server, so
    /// that each call is sent once and its effect, if any, is that one sending's (what a
    /// history recorder needs). Failures before sending (no server accepts a connection)
    /// are retried either way.
    pub retry_after_sending: bool,
    /// TLS to the client listeners (mapped to SSL): the truststore, and the keystore to
    /// present where the listener asks for a client certificate. `None`: plaintext.
    pub tls: Option<TlsSettings>,
}

/// Parses a bootstrap list `HOST:PORT,HOST:PORT,...` (what `--bootstrap` takes); host names
/// are resolved (each to its first address).
pub fn parse_bootstrap(list: &str) -> Result<Vec<SocketAddr>> {
    let bad = |reason: String| ClientError::Config {
        field: "bootstrap",
        reason,
    };
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(bad(format!("empty entry in {list:?}")));
        }
        if let Ok(addr) = item.parse::<SocketAddr>() {
            out.push(addr);
            continue;
        }
        let (host, port) = item
            .rsplit_once(':')
            .ok_or_else(|| bad(format!("{item:?} is not HOST:PORT")))?;
        let port: u16 = port.parse().map_err(|_| {
            bad(format!(
                "{item:?}: port {port:?} is not a number in 0..=65535"
            ))
        })?;
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|e| bad(format!("{item:?}: cannot resolve {host:?}: {e}")))?
            .next()
            .ok_or_else(|| bad(format!("{item:?}: {host:?} has no address")))?;
        out.push(addr);
    }
    Ok(out)
}

impl ClientConfig {
    /// `bootstrap` with a 5 s request timeout and a 10 s retry deadline.
    pub fn new(bootstrap: Vec<SocketAddr>) -> ClientConfig {
        ClientConfig {
            bootstrap,
            request_timeout: Duration::from_secs(5),
            retry_deadline: Duration::from_secs(10),
            rpc: RpcConnectionConfig::default(),
            retry_after_sending: true,
            tls: None,
        }
    }

    /// Refuses an empty bootstrap list, zero durations and unusable size limits.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, reason: &str| {
            Err(ClientError::Config {
                field,
                reason: reason.into(),
            })
        };
        if self.bootstrap.is_empty() {
            return bad("bootstrap", "name at least one server");
        }
        if self.request_timeout.is_zero() {
            return bad("request_timeout", "must be above zero");
        }
        if self.retry_deadline.is_zero() {
            return bad("retry_deadline", "must be above zero");
        }
        if let Err(e) = self.rpc.validate() {
            return Err(ClientError::Config {
                field: "rpc",
                reason: e.to_string(),
            });
        }
        Ok(())
    }
}

/// Counters of a [`ControllerClient`] (all calls of all clones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Calls answered (successfully or with a non-retriable error).
    pub calls: u64,
    /// Attempts that met a retriable failure.
    pub retries: u64,
    /// Connections opened (the first one included).
    pub connects: u64,
    /// Connection attempts that failed.
    pub connect_failures: u64,
    /// Calls that timed out (each moved the client to the next server).
    pub timeouts: u64,
}

/// The connection to one server.
struct Connection {
    addr: SocketAddr,
    rpc: RpcConnection,
    /// Which move of the client opened it: a call that failed on an older connection does not
    /// move the client again.
    generation: u64,
}

struct Inner {
    config: ClientConfig,
    /// Built once from `config.tls`.
    tls: Option<Rc<TlsClient>>,
    current: RefCell<Rc<Connection>>,
    generation: Cell<u64>,
    /// Held while the client moves to another server (single flight).
    moving: Semaphore,
    /// The server that answered the last controller request (initially the one `connect`
    /// chose).
    serving: Cell<SocketAddr>,
    leader_changes: Cell<u64>,
    /// Client address of a node id, learned when a call that followed a hint naming that id
    /// was answered.
    learned: RefCell<HashMap<NodeId, SocketAddr>>,
    stats: Cell<ClientStats>,
    /// Jitter state (xorshift); spreads the retries of many clients.
    jitter: Cell<u64>,
}

/// A leader-following client of a corum quorum; cheap to clone (clones share the connection).
/// Glommio-local: use it on the executor that created it. See the module doc.
#[derive(Clone)]
pub struct ControllerClient {
    inner: Rc<Inner>,
}

/// Why an attempt failed in a way that is retried.
enum Retriable {
    NotController(Option<LeaderHint>),
    /// The connection failed: `sent` if the request may have reached the server.
    Lost {
        reason: String,
        sent: bool,
    },
}

impl Retriable {
    fn describe(&self) -> String {
        match self {
            Retriable::NotController(hint) => RpcError::NotController {
                leader: hint.clone(),
            }
            .to_string(),
            Retriable::Lost { reason, .. } => reason.clone(),
        }
    }

    /// Whether the request may have reached the server and taken effect.
    fn maybe_applied(&self) -> bool {
        match self {
            Retriable::NotController(_) => true,
            Retriable::Lost { sent, .. } => *sent,
        }
    }
}

impl ControllerClient {
    /// Connects to the first bootstrap server that accepts a connection, going round the list
    /// with a backoff until `retry_deadline`.
    pub async fn connect(config: ClientConfig) -> Result<ControllerClient> {
        config.validate()?;
        let start = Instant::now();
        let mut stats = ClientStats::default();
        let mut failures = 0u32;
        let mut last = String::new();
        let seed = seed_from(&config.bootstrap);
        let tls = match &config.tls {
            None => None,
            Some(settings) => Some(Rc::new(TlsClient::new(settings.clone()).map_err(|e| {
                ClientError::Config {
                    field: "tls",
                    reason: e.to_string(),
                }
            })?)),
        };
        loop {
            for &addr in &config.bootstrap {
                match open(addr, config.rpc, config.request_timeout, tls.as_deref()).await {
                    Ok(rpc) => {
                        stats.connects += 1;
                        let conn = Rc::new(Connection {
                            addr,
                            rpc,
                            generation: 0,
                        });
                        return Ok(ControllerClient {
                            inner: Rc::new(Inner {
                                config,
                                tls,
                                current: RefCell::new(conn),
                                generation: Cell::new(0),
                                moving: Semaphore::new(1),
                                serving: Cell::new(addr),
                                leader_changes: Cell::new(0),
                                learned: RefCell::default(),
                                stats: Cell::new(stats),
                                jitter: Cell::new(seed),
                            }),
                        });
                    }
                    Err(e) => {
                        stats.connect_failures += 1;
                        last = e;
                    }
                }
            }
            let waited = start.elapsed();
            if waited >= config.retry_deadline {
                return Err(ClientError::NoServerReachable {
                    tried: config.bootstrap.clone(),
                    waited_ms: waited.as_millis() as u64,
                    last,
                });
            }
            let pause = backoff(failures, 0).min(config.retry_deadline - waited);
            failures += 1;
            glommio::timer::sleep(pause).await;
        }
    }

    /// The settings this client was made with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Sends `body` to the active controller, waiting up to `request_timeout` per attempt;
    /// see the module doc for what is retried.
    pub async fn call(&self, body: RequestBody) -> Result<ResponseBody> {
        self.call_with_timeout(body, self.inner.config.request_timeout)
            .await
    }

    /// [`ControllerClient::call`] with another per-attempt timeout (a long-poll `Fetch` waits
    /// longer than an ordinary request).
    pub async fn call_with_timeout(
        &self,
        body: RequestBody,
        timeout: Duration,
    ) -> Result<ResponseBody> {
        let inner = &self.inner;
        let start = Instant::now();
        let deadline = inner.config.retry_deadline;
        // DescribeQuorum is answered by any node: its answer says nothing about the leader.
        let needs_leader = !matches!(body, RequestBody::DescribeQuorum);
        let mut attempts = 0u32;
        let mut pauses = 0u32;
        let mut followed: Option<NodeId> = None;
        let mut hinted_in_a_row = 0u32;
        loop {
            attempts += 1;
            let conn = inner.current.borrow().clone();
            let failure = match conn.rpc.call(body.clone(), timeout).await {
                Ok(answer) => {
                    self.answered(&conn, needs_leader, followed);
                    return Ok(answer);
                }
                Err(RpcConnectionError::Rpc(RpcError::NotController { leader })) => {
                    Retriable::NotController(leader)
                }
                Err(e @ RpcConnectionError::ConnectionLost { .. }) => Retriable::Lost {
                    reason: e.to_string(),
                    sent: true,
                },
                Err(e @ RpcConnectionError::Connect { .. }) => Retriable::Lost {
                    reason: e.to_string(),
                    sent: false,
                },
                Err(RpcConnectionError::Rpc(e @ RpcError::Timeout { .. })) => {
                    // The server is alive and says its commit was slow: not retried (it may
                    // still commit), and the server stays.
                    self.count(|s| s.calls += 1);
                    self.count(|s| s.timeouts += 1);
                    return Err(ClientError::Rpc(e));
                }
                Err(e @ RpcConnectionError::NoAnswer { .. }) => {
                    // Not retried (it may still commit), but a server that does not answer at
                    // all may be hung or cut off: later calls start at the next server, and a
                    // hint brings them back if this one still leads.
                    self.count(|s| s.calls += 1);
                    self.count(|s| s.timeouts += 1);
                    let lost = Retriable::Lost {
                        reason: e.to_string(),
                        sent: true,
                    };
                    self.relocate(&conn, &lost).await;
                    let timeout_ms = u32::try_from(self.config().request_timeout.as_millis())
                        .unwrap_or(u32::MAX);
                    return Err(ClientError::Rpc(RpcError::Timeout { timeout_ms }));
                }
                Err(RpcConnectionError::Rpc(e)) => {
                    self.count(|s| s.calls += 1);
                    return Err(ClientError::Rpc(e));
                }
                Err(RpcConnectionError::InvalidResponse { addr, source }) => {
                    self.count(|s| s.calls += 1);
                    return Err(ClientError::InvalidResponse {
                        server: addr,
                        source,
                    });
                }
                Err(RpcConnectionError::Encode(e)) => return Err(ClientError::Encode(e)),
                Err(e @ RpcConnectionError::Config { .. }) => {
                    // Cannot happen with a validated config; report rather than loop.
                    return Err(ClientError::Config {
                        field: "rpc",
                        reason: e.to_string(),
                    });
                }
            };
            if !inner.config.retry_after_sending && failure.maybe_applied() {
                self.count(|s| s.calls += 1);
                self.relocate(&conn, &failure).await;
                return Err(ClientError::OutcomeUnknown {
                    request: body.kind(),
                    reason: failure.describe(),
                });
            }
            self.count(|s| s.retries += 1);
            let waited = start.elapsed();
            if waited >= deadline {
                let mut last = failure.describe();
                if let Retriable::NotController(Some(hint)) = &failure {
                    if let Some(advice) = self.unreachable_leader_advice(hint) {
                        last.push_str(&advice);
                    }
                }
                return Err(ClientError::LeaderNotFound {
                    request: body.kind(),
                    waited_ms: waited.as_millis() as u64,
                    attempts,
                    last,
                });
            }
            // Only an answer right after following a hint tells where that hint's node is.
            followed = match &failure {
                Retriable::NotController(Some(hint)) => Some(hint.id),
                _ => None,
            };
            let hinted = self.relocate(&conn, &failure).await;
            // Hints are followed at once, but not forever: nodes with stale views could point
            // at each other during an election.
            hinted_in_a_row = if hinted { hinted_in_a_row + 1 } else { 0 };
            if !hinted || hinted_in_a_row > HINTS_WITHOUT_PAUSE_MAX {
                let pause = backoff(pauses, self.next_jitter())
                    .min(deadline.saturating_sub(start.elapsed()));
                pauses += 1;
                glommio::timer::sleep(pause).await;
            }
        }
    }

    /// Why a hinted leader could not be reached, when the reason is the bootstrap list: the
    /// client only connects to bootstrap servers, and a node names other nodes by their Raft
    /// endpoint (it knows only its own client endpoint).
    fn unreachable_leader_advice(&self, hint: &LeaderHint) -> Option<String> {
        let inner = &self.inner;
        let known = hint_addr(hint).is_some_and(|a| inner.config.bootstrap.contains(&a))
            || inner.learned.borrow().contains_key(&hint.id);
        (!known).then(|| {
            format!(
                " (node {}'s client endpoint is not among the bootstrap servers: name every \
                 controller's client listener in the bootstrap list)",
                hint.id
            )
        })
    }

    /// Times a controller request was answered by another server than the one before (the
    /// server [`ControllerClient::connect`] chose counts as the first): how often the client
    /// switched to a different leader address.
    pub fn leader_changes(&self) -> u64 {
        self.inner.leader_changes.get()
    }

    /// The server the client is connected to now.
    pub fn current_server(&self) -> Option<SocketAddr> {
        Some(self.inner.current.borrow().addr)
    }

    /// The counters.
    pub fn stats(&self) -> ClientStats {
        self.inner.stats.get()
    }

    fn count(&self, f: impl FnOnce(&mut ClientStats)) {
        let mut s = self.inner.stats.get();
        f(&mut s);
        self.inner.stats.set(s);
    }

    fn next_jitter(&self) -> u64 {
        let mut x = self.inner.jitter.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.inner.jitter.set(x);
        x
    }

    /// Notes who answered: a leader change, and the address of a hinted node id.
    fn answered(&self, conn: &Connection, needs_leader: bool, followed: Option<NodeId>) {
        self.count(|s| s.calls += 1);
        if !needs_leader {
            return;
        }
        let inner = &self.inner;
        if inner.serving.get() != conn.addr {
            inner.serving.set(conn.addr);
            inner.leader_changes.set(inner.leader_changes.get() + 1);
        }
        if let Some(id) = followed {
            inner.learned.borrow_mut().insert(id, conn.addr);
        }
    }

    /// Moves the client after `failure` on `conn`, unless another call already moved it.
    /// Returns true if it went where a hint pointed (retry at once) rather than round the
    /// bootstrap list (pause first).
    async fn relocate(&self, conn: &Rc<Connection>, failure: &Retriable) -> bool {
        let inner = &self.inner;
        let Ok(_permit) = inner.moving.acquire_permit(1).await else {
            // The semaphore is never closed; treat a closed one as "someone else moved".
            return false;
        };
        if inner.generation.get() != conn.generation {
            // Another call moved the client while this one waited: retry there.
            return matches!(failure, Retriable::NotController(Some(_)));
        }
        let hint = match failure {
            Retriable::NotController(Some(hint)) => Some(hint),
            _ => None,
        };
        let learned = hint.and_then(|h| inner.learned.borrow().get(&h.id).copied());
        let answered = matches!(failure, Retriable::NotController(_));
        let candidates = candidates(&inner.config.bootstrap, conn.addr, answered, hint, learned);
        for (addr, hinted) in candidates {
            match open(
                addr,
                inner.config.rpc,
                inner.config.request_timeout,
                inner.tls.as_deref(),
            )
            .await
            {
                Ok(rpc) => {
                    self.count(|s| s.connects += 1);
                    let generation = inner.generation.get() + 1;
                    inner.generation.set(generation);
                    *inner.current.borrow_mut() = Rc::new(Connection {
                        addr,
                        rpc,
                        generation,
                    });
                    tracing::debug!(from = %conn.addr, to = %addr, hinted, "controller client moved");
                    return hinted;
                }
                Err(reason) => {
                    self.count(|s| s.connect_failures += 1);
                    tracing::debug!(%addr, %reason, "controller client cannot connect");
                }
            }
        }
        false
    }

    // -----------------------------------------------------------------------------------------
    // Typed helpers.

    /// Sends a heartbeat (or a registration: `broker_epoch: None`).
    pub async fn broker_heartbeat(
        &self,
        req: BrokerHeartbeatRequest,
    ) -> Result<BrokerHeartbeatResponse> {
        match self.call(RequestBody::BrokerHeartbeat(req)).await? {
            ResponseBody::BrokerHeartbeat(r) => Ok(r),
            other => Err(unexpected("BrokerHeartbeat", &other)),
        }
    }

    /// Registers a broker (Kafka's BrokerRegistration): its epoch.
    pub async fn register_broker(
        &self,
        req: BrokerRegistrationRequest,
    ) -> Result<BrokerRegistrationResponse> {
        match self
            .call(RequestBody::RegisterBroker(Box::new(req)))
            .await?
        {
            ResponseBody::RegisterBroker(r) => Ok(r),
            other => Err(unexpected("RegisterBroker", &other)),
        }
    }

    /// AlterPartition as given; per-partition results in the response.
    pub async fn alter_partition(
        &self,
        req: AlterPartitionRequest,
    ) -> Result<AlterPartitionResponse> {
        match self.call(RequestBody::AlterPartition(req)).await? {
            ResponseBody::AlterPartition(r) => Ok(r),
            other => Err(unexpected("AlterPartition", &other)),
        }
    }

    /// AssignReplicasToDirs as given; per-partition results in the response.
    pub async fn assign_replicas_to_dirs(
        &self,
        req: AssignReplicasToDirsRequest,
    ) -> Result<AssignReplicasToDirsResponse> {
        match self.call(RequestBody::AssignReplicasToDirs(req)).await? {
            ResponseBody::AssignReplicasToDirs(r) => Ok(r),
            other => Err(unexpected("AssignReplicasToDirs", &other)),
        }
    }

    /// IncrementalAlterConfigs as given; per-resource results in the response.
    pub async fn alter_configs(
        &self,
        req: IncrementalAlterConfigsRequest,
    ) -> Result<IncrementalAlterConfigsResponse> {
        match self.call(RequestBody::IncrementalAlterConfigs(req)).await? {
            ResponseBody::IncrementalAlterConfigs(r) => Ok(r),
            other => Err(unexpected("IncrementalAlterConfigs", &other)),
        }
    }

    /// Sets one config key of one resource; the resource's own error as [`ClientError::Api`].
    pub async fn alter_config(
        &self,
        resource: ConfigResource,
        key: &str,
        value: &str,
    ) -> Result<()> {
        let req = IncrementalAlterConfigsRequest {
            resources: vec![AlterConfigsResource {
                resource,
                configs: vec![AlterableConfig {
                    key: key.to_owned(),
                    op: AlterConfigOp::Set,
                    value: value.to_owned(),
                }],
            }],
            validate_only: false,
        };
        let r = self.alter_configs(req).await?;
        match r.resources.into_iter().next() {
            Some((_, Ok(()))) => Ok(()),
            Some((_, Err(e))) => Err(ClientError::Api(e)),
            None => Err(ClientError::UnexpectedResponse {
                request: "IncrementalAlterConfigs",
                response: "IncrementalAlterConfigs without results",
            }),
        }
    }

    /// DescribeConfigs of `resources`; per-resource results in the response.
    pub async fn describe_configs(
        &self,
        resources: Vec<ConfigResource>,
    ) -> Result<DescribeConfigsResponse> {
        let req = DescribeConfigsRequest::all(resources);
        match self.call(RequestBody::DescribeConfigs(req)).await? {
            ResponseBody::DescribeConfigs(r) => Ok(r),
            other => Err(unexpected("DescribeConfigs", &other)),
        }
    }

    /// Every known key of one resource with its effective value (the active controller's
    /// image); the resource's own error as [`ClientError::Api`].
    pub async fn describe_config(&self, resource: ConfigResource) -> Result<Vec<DescribedConfig>> {
        let r = self.describe_configs(vec![resource]).await?;
        match r.resources.into_iter().next() {
            Some((_, Ok(configs))) => Ok(configs),
            Some((_, Err(e))) => Err(ClientError::Api(e)),
            None => Err(ClientError::UnexpectedResponse {
                request: "DescribeConfigs",
                response: "DescribeConfigs without results",
            }),
        }
    }

    /// CreateTopics as given; per-topic results in the response.
    pub async fn create_topics(&self, req: CreateTopicsRequest) -> Result<CreateTopicsResponse> {
        match self.call(RequestBody::CreateTopics(req)).await? {
            ResponseBody::CreateTopics(r) => Ok(r),
            other => Err(unexpected("CreateTopics", &other)),
        }
    }

    /// Creates one topic; its own error as [`ClientError::Api`].
    pub async fn create_topic(
        &self,
        name: &str,
        num_partitions: i32,
        replication_factor: i16,
    ) -> Result<CreatedTopic> {
        let req = CreateTopicsRequest {
            topics: vec![CreatableTopic::new(
                name,
                num_partitions,
                replication_factor,
            )],
            validate_only: false,
        };
        let r = self.create_topics(req).await?;
        match r.topics.into_iter().next() {
            Some((_, Ok(t))) => Ok(t),
            Some((_, Err(e))) => Err(ClientError::Api(e)),
            None => Err(ClientError::UnexpectedResponse {
                request: "CreateTopics",
                response: "CreateTopics without results",
            }),
        }
    }

    /// DescribeQuorum from whichever server the client is connected to (any node answers;
    /// only the leader fills every replica's replication columns).
    pub async fn describe_quorum(&self) -> Result<DescribeQuorumResponse> {
        match self.call(RequestBody::DescribeQuorum).await? {
            ResponseBody::DescribeQuorum(r) => Ok(*r),
            other => Err(unexpected("DescribeQuorum", &other)),
        }
    }

    /// DescribeQuorum from the active controller, whose answer fills every replica's
    /// replication columns (`--replication`): a DescribeCluster first moves the client to the
    /// leader (only the active controller answers it), then DescribeQuorum asks there.
    pub async fn describe_quorum_at_leader(&self) -> Result<DescribeQuorumResponse> {
        self.describe_cluster().await?;
        self.describe_quorum().await
    }

    /// DescribeCluster from the active controller.
    pub async fn describe_cluster(&self) -> Result<DescribeClusterResponse> {
        match self.call(RequestBody::DescribeCluster).await? {
            ResponseBody::DescribeCluster(r) => Ok(r),
            other => Err(unexpected("DescribeCluster", &other)),
        }
    }

    /// One observer fetch, waiting up to `timeout` for the (long-polled) answer.
    pub async fn fetch(&self, req: FetchRequest, timeout: Duration) -> Result<FetchResponse> {
        match self
            .call_with_timeout(RequestBody::Fetch(req), timeout)
            .await?
        {
            ResponseBody::Fetch(r) => Ok(*r),
            other => Err(unexpected("Fetch", &other)),
        }
    }

    /// One observer FetchSnapshot (a chunk of the leader's snapshot at `req.position`),
    /// waiting up to `timeout` for the answer. Like [`ControllerClient::fetch`], only the
    /// active controller answers it: the call follows `NotController` to the leader.
    pub async fn fetch_snapshot(
        &self,
        req: FetchSnapshotRequest,
        timeout: Duration,
    ) -> Result<FetchSnapshotResponse> {
        match self
            .call_with_timeout(RequestBody::FetchSnapshot(req), timeout)
            .await?
        {
            ResponseBody::FetchSnapshot(r) => Ok(*r),
            other => Err(unexpected("FetchSnapshot", &other)),
        }
    }
}

fn unexpected(request: &'static str, response: &ResponseBody) -> ClientError {
    ClientError::UnexpectedResponse {
        request,
        response: response.kind(),
    }
}

/// Opens a connection to `addr`, giving up after `timeout`.
async fn open(
    addr: SocketAddr,
    config: RpcConnectionConfig,
    timeout: Duration,
    tls: Option<&TlsClient>,
) -> Result<RpcConnection, String> {
    let attempt = async { Some(RpcConnection::connect_tls(addr, config, tls).await) };
    let expire = async {
        glommio::timer::sleep(timeout).await;
        None
    };
    match futures_lite::future::or(attempt, expire).await {
        Some(Ok(rpc)) => Ok(rpc),
        Some(Err(e)) => Err(e.to_string()),
        None => Err(format!(
            "connecting to {addr} took over {} ms",
            timeout.as_millis()
        )),
    }
}

/// Where a client connected to `current` tries next, in order, each with whether a hint led
/// there. `answered`: `current` answered NotController (its connection is healthy, so it is
/// not reconnected); otherwise its connection broke and it is reconnected last. Only
/// bootstrap servers are named: first the hint's address if it is one, then the address
/// learned for the hint's node, then the bootstrap list round from the server after
/// `current`. No address twice; never `current` after a hint.
fn candidates(
    bootstrap: &[SocketAddr],
    current: SocketAddr,
    answered: bool,
    hint: Option<&LeaderHint>,
    learned: Option<SocketAddr>,
) -> Vec<(SocketAddr, bool)> {
    let mut out: Vec<(SocketAddr, bool)> = Vec::with_capacity(bootstrap.len() + 2);
    let mut push = |addr: SocketAddr, hinted: bool| {
        if !(addr == current && (hinted || answered)) && out.iter().all(|(a, _)| *a != addr) {
            out.push((addr, hinted));
        }
    };
    if let Some(addr) = hint.and_then(hint_addr).filter(|a| bootstrap.contains(a)) {
        push(addr, true);
    }
    if let Some(addr) = learned.filter(|a| bootstrap.contains(a)) {
        push(addr, true);
    }
    let n = bootstrap.len();
    let start = bootstrap
        .iter()
        .position(|a| *a == current)
        .map_or(0, |i| i + 1);
    for k in 0..n {
        push(bootstrap[(start + k) % n], false);
    }
    out
}

/// The socket address a hint names, if its host is an address or resolves.
fn hint_addr(hint: &LeaderHint) -> Option<SocketAddr> {
    if let Ok(ip) = hint.host.parse::<std::net::IpAddr>() {
        return Some(SocketAddr::new(ip, hint.port));
    }
    (hint.host.as_str(), hint.port)
        .to_socket_addrs()
        .ok()?
        .next()
}

/// The pause before attempt `n + 1` of a call: `BACKOFF_BASE * 2^n`, capped, minus up to half
/// of it chosen by `jitter`.
fn backoff(n: u32, jitter: u64) -> Duration {
    let full = BACKOFF_BASE
        .saturating_mul(1u32 << n.min(16))
        .min(BACKOFF_CAP);
    let half_us = (full.as_micros() / 2) as u64;
    let cut = if half_us == 0 { 0 } else { jitter % half_us };
    full - Duration::from_micros(cut)
}

fn seed_from(bootstrap: &[SocketAddr]) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    let ports = bootstrap
        .iter()
        .fold(0u64, |acc, a| acc.rotate_left(16) ^ u64::from(a.port()));
    (nanos ^ ports.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The backoff doubles from the base, stops at the cap, and jitter only ever shortens it
    /// by at most half.
    #[test]
    fn backoff_doubles_to_the_cap_and_jitters_down() {
        assert_eq!(backoff(0, 0), BACKOFF_BASE);
        assert_eq!(backoff(1, 0), BACKOFF_BASE * 2);
        assert_eq!(backoff(30, 0), BACKOFF_CAP);
        for j in [1u64, 7, 1234, u64::MAX] {
            for n in 0..10 {
                let b = backoff(n, j);
                let full = backoff(n, 0);
                assert!(b <= full && b >= full / 2, "{b:?} vs {full:?}");
            }
        }
    }

    /// Configs with no servers or zero durations are refused, naming the field.
    #[test]
    fn configs_validate() {
        let ok = ClientConfig::new(vec!["127.0.0.1:1".parse().unwrap()]);
        ok.validate().unwrap();
        let field = |c: ClientConfig| match c.validate() {
            Err(ClientError::Config { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(ClientConfig {
                bootstrap: vec![],
                ..ok.clone()
            }),
            "bootstrap"
        );
        assert_eq!(
            field(ClientConfig {
                request_timeout: Duration::ZERO,
                ..ok.clone()
            }),
            "request_timeout"
        );
        assert_eq!(
            field(ClientConfig {
                retry_deadline: Duration::ZERO,
                ..ok.clone()
            }),
            "retry_deadline"
        );
        assert_eq!(
            field(ClientConfig {
                rpc: RpcConnectionConfig {
                    response_bytes_max: 0,
                    ..RpcConnectionConfig::default()
                },
                ..ok
            }),
            "rpc"
        );
    }

    /// Bootstrap lists parse addresses and resolvable host names, and name a bad entry.
    #[test]
    fn bootstrap_lists_parse() {
        assert_eq!(
            parse_bootstrap("127.0.0.1:9093, [::1]:9094,localhost:9095").unwrap()[..2],
            [
                "127.0.0.1:9093".parse::<SocketAddr>().unwrap(),
                "[::1]:9094".parse().unwrap()
            ]
        );
        assert_eq!(parse_bootstrap("localhost:9095").unwrap()[0].port(), 9095);
        for bad in [
            "",
            "127.0.0.1:9093,",
            "127.0.0.1",
            "h:port",
            "127.0.0.1:70000",
        ] {
            match parse_bootstrap(bad) {
                Err(ClientError::Config { field, reason }) => {
                    assert_eq!(field, "bootstrap");
                    assert!(!reason.is_empty());
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    /// Candidates: a hint naming a bootstrap server goes first; a hint naming anything else
    /// (a Raft endpoint) is never used, the address learned for its node is; the list then
    /// goes round from the server after the current one; the current server is skipped when
    /// it answered and comes last (reconnected) when its connection broke.
    #[test]
    fn candidates_follow_hints_to_bootstrap_servers_only() {
        let a: SocketAddr = "127.0.0.1:1001".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:1002".parse().unwrap();
        let c: SocketAddr = "127.0.0.1:1003".parse().unwrap();
        let raft: SocketAddr = "127.0.0.1:2003".parse().unwrap();
        let boot = [a, b, c];
        let hint = |addr: SocketAddr| LeaderHint {
            id: NodeId(3),
            host: addr.ip().to_string(),
            port: addr.port(),
        };
        // A client hint naming c.
        assert_eq!(
            candidates(&boot, a, true, Some(&hint(c)), None),
            vec![(c, true), (b, false)]
        );
        // A Raft-endpoint hint: round the list, unless node 3's address was learned.
        assert_eq!(
            candidates(&boot, a, true, Some(&hint(raft)), None),
            vec![(b, false), (c, false)]
        );
        assert_eq!(
            candidates(&boot, a, true, Some(&hint(raft)), Some(c)),
            vec![(c, true), (b, false)]
        );
        // A learned address outside the bootstrap list is not used either.
        assert_eq!(
            candidates(&boot, b, true, Some(&hint(raft)), Some(raft)),
            vec![(c, false), (a, false)]
        );
        // A stale hint naming the server that just answered NotController.
        assert_eq!(
            candidates(&boot, c, true, Some(&hint(c)), None),
            vec![(a, false), (b, false)]
        );
        // A broken connection: the others first, then the same server again.
        assert_eq!(
            candidates(&boot, b, false, None, None),
            vec![(c, false), (a, false), (b, false)]
        );
        // A server not (or no longer) in the list: from the start.
        let d: SocketAddr = "127.0.0.1:1004".parse().unwrap();
        assert_eq!(
            candidates(&boot, d, false, None, None),
            vec![(a, false), (b, false), (c, false)]
        );
    }

    /// A hint's host is used as an address when it is one, resolved otherwise.
    #[test]
    fn hints_resolve_to_addresses() {
        let hint = |host: &str| LeaderHint {
            id: NodeId(1),
            host: host.into(),
            port: 9093,
        };
        assert_eq!(
            hint_addr(&hint("127.0.0.1")),
            Some("127.0.0.1:9093".parse().unwrap())
        );
        assert_eq!(hint_addr(&hint("::1")), Some("[::1]:9093".parse().unwrap()));
        assert_eq!(hint_addr(&hint("not a host name!")), None);
    }
}
