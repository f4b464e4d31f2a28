//! [`BrokerSession`]: one (simulated) broker's registration and heartbeats.
//!
//! Registration is a `RegisterBroker` request, as a Kafka broker's BrokerRegistration: its
//! listeners (PLAINTEXT), the features it supports and one log directory (an id made from its
//! incarnation, so each process has its own and new partitions place their replica in it). The
//! answer carries the broker epoch (the offset of the registration record); the broker is
//! FENCED until a heartbeat says otherwise. Every heartbeat reports the shared follower's
//! applied end as NextMetadataOffset; the controller unfences the broker once that passes the
//! registration record.
//!
//! | heartbeat answer | session |
//! |---|---|
//! | a target state | keeps it (and the lease duration) |
//! | `StaleBrokerEpoch`, `BrokerIdNotRegistered`, `BrokerLeaseExpired` | registers again (the same epoch if its registration is still there, else a new one; FENCED) and returns that state |
//! | any other error | returned; nothing changes |
//!
//! A lease that expired does not end the registration: the controller fences the broker, and
//! the next heartbeat of the same epoch unfences it again (as Kafka's controller does).

use std::rc::Rc;
use std::time::{Duration, Instant};

use corum_controller::control::cluster_control::{
    BrokerHeartbeatRequest, BrokerRegistrationRequest, PreviousBrokerEpoch,
};
use corum_controller::records::{BrokerEndpointV1, ListenerV1, SupportedFeatureV1};
use corum_controller::{ApiError, TargetState};
use corum_protocol::RpcError;
use corum_types::{BrokerEpoch, LogOffset, NodeId, Uuid};

use crate::controller_client::ControllerClient;
use crate::error::{ClientError, Result};
use crate::metadata_follower::MetadataFollower;

/// What a broker registers with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerIdentity {
    pub broker_id: NodeId,
    /// Distinguishes this process from an earlier one with the same id.
    pub incarnation_id: Uuid,
    pub endpoints: Vec<BrokerEndpointV1>,
    pub features: Vec<SupportedFeatureV1>,
    pub rack: Option<String>,
    /// The ids of its log directories.
    pub log_dirs: Vec<Uuid>,
}

impl BrokerIdentity {
    /// A broker supporting every feature level the controller supports (Kafka 4.1's
    /// `metadata.version` range), without a rack, listening on `listeners` (PLAINTEXT), with one
    /// log directory whose id is drawn from the incarnation (never one of Kafka's reserved ids).
    pub fn new(broker_id: NodeId, incarnation_id: Uuid, listeners: Vec<ListenerV1>) -> Self {
        BrokerIdentity {
            broker_id,
            incarnation_id,
            endpoints: listeners.iter().map(BrokerEndpointV1::plaintext).collect(),
            features: corum_controller::control::feature_control::supported_features(),
            rack: None,
            log_dirs: vec![Uuid::from_random_bits(
                incarnation_id.as_u128() ^ 0x6c6f_672d_6469_7273,
            )],
        }
    }

    fn registration(&self) -> BrokerRegistrationRequest {
        BrokerRegistrationRequest {
            broker_id: self.broker_id,
            incarnation_id: self.incarnation_id,
            endpoints: self.endpoints.clone(),
            features: self.features.clone(),
            rack: self.rack.clone(),
            log_dirs: self.log_dirs.clone(),
            previous_broker_epoch: PreviousBrokerEpoch::Unnamed,
        }
    }

    /// A heartbeat of registration `epoch` (the registration fields stay empty: a heartbeat
    /// with an epoch does not read them).
    fn heartbeat(
        &self,
        epoch: BrokerEpoch,
        next: LogOffset,
        want_shutdown: bool,
    ) -> BrokerHeartbeatRequest {
        BrokerHeartbeatRequest {
            broker_id: self.broker_id,
            broker_epoch: Some(epoch),
            incarnation_id: self.incarnation_id,
            listeners: Vec::new(),
            features: Vec::new(),
            rack: None,
            next_metadata_offset: next,
            want_fence: false,
            want_shutdown,
        }
    }
}

/// One registered broker. See the module doc.
pub struct BrokerSession {
    client: ControllerClient,
    follower: Rc<MetadataFollower>,
    identity: BrokerIdentity,
    epoch: BrokerEpoch,
    state: TargetState,
    lease_duration_ms: u64,
    /// When the registration that gave `epoch` was sent.
    registered_at: Instant,
    registrations: u64,
    /// The NextMetadataOffset of the last heartbeat sent.
    reported: LogOffset,
}

impl BrokerSession {
    /// Registers broker `broker_id` (see [`BrokerIdentity::new`] for the features it
    /// announces) and returns the session, FENCED until caught up.
    pub async fn register(
        client: ControllerClient,
        broker_id: NodeId,
        incarnation: Uuid,
        listeners: Vec<ListenerV1>,
        follower: Rc<MetadataFollower>,
    ) -> Result<BrokerSession> {
        let identity = BrokerIdentity::new(broker_id, incarnation, listeners);
        BrokerSession::register_with(client, identity, follower).await
    }

    /// Registers with every field of `identity`.
    pub async fn register_with(
        client: ControllerClient,
        identity: BrokerIdentity,
        follower: Rc<MetadataFollower>,
    ) -> Result<BrokerSession> {
        let mut session = BrokerSession {
            client,
            follower,
            identity,
            epoch: BrokerEpoch(0),
            state: TargetState::Fenced,
            lease_duration_ms: 0,
            registered_at: Instant::now(),
            registrations: 0,
            reported: LogOffset(0),
        };
        session.register_again().await?;
        Ok(session)
    }

    async fn register_again(&mut self) -> Result<TargetState> {
        let sent = Instant::now();
        let r = self
            .client
            .register_broker(self.identity.registration())
            .await?;
        self.registered_at = sent;
        self.registrations += 1;
        self.epoch = r.broker_epoch;
        self.state = TargetState::Fenced;
        Ok(TargetState::Fenced)
    }

    /// One heartbeat reporting the follower's applied end; see the module doc.
    pub async fn heartbeat(&mut self) -> Result<TargetState> {
        self.beat(false).await
    }

    async fn beat(&mut self, want_shutdown: bool) -> Result<TargetState> {
        let next = self.follower.next_offset();
        let req = self.identity.heartbeat(self.epoch, next, want_shutdown);
        match self.client.broker_heartbeat(req).await {
            Ok(r) => {
                self.state = r.target_state;
                self.lease_duration_ms = r.lease_duration_ms;
                self.reported = self.reported.max(next);
                Ok(r.target_state)
            }
            Err(ClientError::Rpc(RpcError::Api(
                ApiError::StaleBrokerEpoch { .. }
                | ApiError::BrokerIdNotRegistered { .. }
                | ApiError::BrokerLeaseExpired { .. },
            ))) => {
                tracing::debug!(broker = %self.identity.broker_id, "registration lost; registering again");
                self.register_again().await
            }
            Err(e) => Err(e),
        }
    }

    /// The broker id.
    pub fn broker_id(&self) -> NodeId {
        self.identity.broker_id
    }

    /// The epoch of the current registration.
    pub fn broker_epoch(&self) -> BrokerEpoch {
        self.epoch
    }

    /// The target state of the last answer.
    pub fn state(&self) -> TargetState {
        self.state
    }

    /// The lease the controller granted with the last heartbeat's answer (zero before one).
    pub fn lease_duration(&self) -> Duration {
        Duration::from_millis(self.lease_duration_ms)
    }

    /// Registrations made (1 unless the controller asked for new ones).
    pub fn registrations(&self) -> u64 {
        self.registrations
    }

    /// The follower this session reports.
    pub fn follower(&self) -> &Rc<MetadataFollower> {
        &self.follower
    }

    /// Heartbeats until the controller answers ACTIVE; returns the time from sending the
    /// (last) registration to that answer. Between heartbeats it waits until the follower has
    /// applied past what was last reported (and past the registration record), at most
    /// `interval`, so the broker is unfenced one round trip after its follower catches up.
    pub async fn run_until_unfenced(
        &mut self,
        interval: Duration,
        timeout: Duration,
    ) -> Result<Duration> {
        let start = Instant::now();
        loop {
            if self.state == TargetState::Active {
                return Ok(self.registered_at.elapsed());
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(ClientError::Timeout {
                    what: "the broker to be unfenced",
                    waited_ms: waited.as_millis() as u64,
                });
            }
            let past_registration = LogOffset(self.epoch.0 + 1);
            let target = past_registration.max(self.reported.next());
            self.follower
                .wait_for(target, interval.min(timeout - waited))
                .await;
            self.heartbeat().await?;
        }
    }

    /// Controlled shutdown: heartbeats asking to shut down, every `interval`, until the
    /// controller answers SHUTDOWN (it first moves this broker's leaderships away).
    pub async fn controlled_shutdown(
        &mut self,
        interval: Duration,
        timeout: Duration,
    ) -> Result<()> {
        let start = Instant::now();
        loop {
            if self.beat(true).await? == TargetState::Shutdown {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(ClientError::Timeout {
                    what: "the controller to answer SHUTDOWN",
                    waited_ms: waited.as_millis() as u64,
                });
            }
            glommio::timer::sleep(interval.min(timeout - waited)).await;
        }
    }
}
