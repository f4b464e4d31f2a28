//! The controller facade: handlers, replay, in-flight tracking, leases.
//!
//! # In-flight proposals
//!
//! Validation must see uncommitted proposals (two CreateTopics for one name in flight must not
//! both pass). Like Kafka's snapshot registry, the controller keeps **one** image that holds the
//! committed records plus its own proposals, and before applying each proposal it keeps an O(1)
//! snapshot (a clone of the persistent image) of the state before it:
//!
//! | event (driver call)              | image                              | in-flight snapshots             |
//! |----------------------------------|------------------------------------|---------------------------------|
//! | `on_proposed(base, records)`     | applies the records at `base..`    | pushes (base, image before)     |
//! | `replay(offset, rec)`, own batch | unchanged (already applied)        | drops those with base <= offset |
//! | `replay(offset, rec)`, other     | replays the record                 | must be none (else an error)    |
//! | `on_resign()`                    | reverts to the oldest snapshot     | cleared; leases dropped         |
//! | `on_become_active(now_ms)`       | unchanged                          | (empty); all leases extended    |
//!
//! The committed image is the oldest snapshot if any, else the image. Handlers read the image
//! (committed + in flight) and never mutate it; the only mutation of the image is replay of
//! records: committed ones from their archived (validated) bytes, the controller's own proposals
//! from the records its handlers built ([`MetadataImage::apply`], the same changes as
//! [`MetadataImage::replay`]).
//!
//! # Driver obligations
//!
//! - Call a handler with a [`RequestContext`]: `next_offset` = the log end offset including every
//!   proposed batch, `high_watermark` = the commit offset last learned, `now_ms` monotonic.
//! - If the result has records: encode them ([`crate::encode_batch`], or part by part with a
//!   [`crate::BatchBuilder`]) as one batch, propose it, and call `on_proposed(base_offset,
//!   records)` (the records themselves: nothing to decode) before handling the next request;
//!   answer the response once the batch is committed. With no records answer at once.
//! - Feed every committed record, in order, to `replay` (the leader too).
//! - On losing leadership call `on_resign` before replaying anything else; on winning it call
//!   `on_become_active` (after replaying everything committed).
//! - Call `tick(now_ms)` periodically (e.g. every heartbeat interval) on the active controller.

use std::collections::VecDeque;

use corum_types::{LogOffset, NodeId};

use crate::config::ControllerConfig;
use crate::control::acl_control::{
    self, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use crate::control::cluster_control::{
    self, BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse, DescribeClusterResponse, DescribeControllersResponse, Leases,
    RegisterControllerRequest, TickResponse, UnregisterBrokerRequest,
};
use crate::control::config_control::{
    self, AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    NewTopicConfigs,
};
use crate::control::feature_control::{
    self, DescribeFeaturesResponse, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use crate::control::producer_id_control::{
    self, AllocateProducerIdsRequest, AllocateProducerIdsResponse,
};
use crate::control::replication_control::{
    self, AlterIsrRequest, AlterIsrResponse, AlterPartitionRequest, AlterPartitionResponse,
    AssignReplicasToDirsRequest, AssignReplicasToDirsResponse, CreatePartitionsRequest,
    CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    CreateTopicsWithConfigsResponse, CreatedTopicWithConfigs, DeleteTopicsRequest,
    DeleteTopicsResponse, DeleteTopicsV2Request, DeleteTopicsV2Response, DescribeTopicsRequest,
    DescribeTopicsResponse, DescribeTopicsV2Response, ElectLeadersRequest, ElectLeadersResponse,
};
use crate::control::{ControllerResult, ImageReads, RequestContext, View};
use crate::error::{ApiError, ConfigError, ReplayError};
use crate::image::MetadataImage;
use crate::records::{
    ArchivedBatch, ArchivedMetadataRecord, ConfigRecordV1, ConfigResourceType,
    FeatureLevelRecordV1, MetadataRecord,
};

/// The feature every Kafka cluster finalizes at format time.
pub const METADATA_VERSION: &str = "metadata.version";

type HandlerResult<R> = Result<ControllerResult<R>, ApiError>;

/// The image as it was before one in-flight batch.
#[derive(Clone, Debug)]
struct InflightSnapshot {
    base_offset: LogOffset,
    before: MetadataImage,
}

/// The controller state machine of one node.
#[derive(Clone, Debug)]
pub struct Controller {
    config: ControllerConfig,
    node_id: NodeId,
    image: MetadataImage,
    inflight: VecDeque<InflightSnapshot>,
    committed_end: LogOffset,
    active: bool,
    leases: Leases,
    /// The latest `now_ms` any handler or activation saw (monotonic input, never a clock read).
    now_ms_seen: u64,
    /// New topics' described configs over the current cluster default (a cache: answers are
    /// what describing them afresh would give).
    new_topic_configs: NewTopicConfigs,
}

impl Controller {
    pub fn new(config: ControllerConfig, node_id: NodeId) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Controller {
            config,
            node_id,
            image: MetadataImage::default(),
            inflight: VecDeque::new(),
            committed_end: LogOffset(0),
            active: false,
            leases: Leases::default(),
            now_ms_seen: 0,
            new_topic_configs: NewTopicConfigs::default(),
        })
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    pub fn is_active(&self) -> bool {
        self.active
    }

    /// The image handlers see: committed records plus in-flight proposals.
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// The committed image (O(1) to clone and keep).
    pub fn committed_image(&self) -> &MetadataImage {
        self.inflight.front().map_or(&self.image, |s| &s.before)
    }

    /// Reads of the committed image, which any node answers whether it is active or not (a
    /// standby's committed image is everything it replayed). They see no in-flight record.
    pub fn committed_reads(&self) -> ImageReads<'_> {
        ImageReads::new(self.committed_image(), &self.config)
    }

    /// The offset after the last committed record replayed.
    pub fn committed_end(&self) -> LogOffset {
        self.committed_end
    }

    /// Number of proposed batches not yet committed.
    pub fn inflight_batches(&self) -> usize {
        self.inflight.len()
    }

    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    fn view(&self) -> View<'_> {
        View {
            config: &self.config,
            image: &self.image,
            committed: self.committed_image(),
            leases: &self.leases,
        }
    }

    fn require_active(&self) -> Result<(), ApiError> {
        if self.active {
            Ok(())
        } else {
            Err(ApiError::NotController)
        }
    }

    // -----------------------------------------------------------------------------------------
    // Replay and leadership.

    /// Applies one committed record. On the active controller a record of its own in-flight
    /// batch is already in the image: it only advances the commit point.
    pub fn replay(
        &mut self,
        offset: LogOffset,
        record: &ArchivedMetadataRecord,
    ) -> Result<(), ReplayError> {
        if offset < self.committed_end {
            return Err(ReplayError::OffsetNotIncreasing {
                offset,
                applied: self.committed_end,
            });
        }
        if offset < self.image.end_offset {
            // At or above the commit point and below the image's end: a record of one of our
            // own proposals (only `on_proposed` moves the image's end past the commit point).
            while self
                .inflight
                .front()
                .is_some_and(|s| s.base_offset <= offset)
            {
                self.inflight.pop_front();
            }
        } else {
            // A committed record past our in-flight proposals means they were skipped (truncated
            // by a new leader) without `on_resign`: the image holds changes that never committed.
            if let Some(first) = self.inflight.front() {
                return Err(ReplayError::InflightProposalsSkipped {
                    offset,
                    inflight_base: first.base_offset,
                });
            }
            self.image.replay(offset, record)?;
            // A registration proposed by a previous active controller and committed after this
            // one took over: its lease starts now, like every lease at activation.
            if let (true, ArchivedMetadataRecord::RegisterBroker(r)) = (self.active, record) {
                self.leases
                    .start_if_absent(NodeId::from(&r.broker_id), self.now_ms_seen);
            }
        }
        self.committed_end = offset.next();
        Ok(())
    }

    /// Replays a whole committed batch whose first record is at `base_offset`.
    pub fn replay_batch(
        &mut self,
        base_offset: LogOffset,
        batch: &ArchivedBatch,
    ) -> Result<(), ReplayError> {
        for (i, record) in batch.iter().enumerate() {
            self.replay(base_offset.add(i as u64), record)?;
        }
        Ok(())
    }

    /// Replaces the whole state with a snapshot (KIP-630) of the committed image through
    /// `end_offset`: `batch` holds [`MetadataImage::snapshot_records`] of that image. Loaded at
    /// start-up and when a follower installs the leader's snapshot; the controller is inactive
    /// afterwards (nothing in flight, no leases). On an error the state is unchanged.
    pub fn load_snapshot(
        &mut self,
        end_offset: LogOffset,
        batch: &ArchivedBatch,
    ) -> Result<(), ReplayError> {
        self.image = MetadataImage::from_snapshot(end_offset, batch)?;
        self.inflight.clear();
        self.committed_end = end_offset;
        self.active = false;
        self.leases.clear();
        Ok(())
    }

    /// Applies this controller's own proposal (not yet committed) so later requests see it.
    ///
    /// It takes the records the handlers built, not their encoding: the batch proposed is
    /// encoded from these very records, so decoding (and bytechecking) bytes this node just
    /// wrote would prove nothing; [`MetadataImage::apply`] makes exactly the changes
    /// [`MetadataImage::replay`] makes of the encoded records, which the followers (and this
    /// node, after a restart) replay.
    pub fn on_proposed(
        &mut self,
        base_offset: LogOffset,
        records: &[MetadataRecord],
    ) -> Result<(), ReplayError> {
        assert!(self.active, "only the active controller proposes");
        let before = self.image.clone();
        for (i, record) in records.iter().enumerate() {
            if let Err(e) = self.image.apply(base_offset.add(i as u64), record) {
                self.image = before;
                return Err(e);
            }
        }
        self.inflight.push_back(InflightSnapshot {
            base_offset,
            before,
        });
        Ok(())
    }

    /// Applies more records of the batch begun by the last [`Controller::on_proposed`] (a later
    /// request's records in the same proposal) without a new revert point: a batch commits or
    /// is lost whole, so the point before it is the only one needed, and the image's shared
    /// nodes are copied once per batch rather than once per request. A record that does not
    /// apply leaves the image partly changed: the caller must stop, as for any replay error.
    pub fn on_proposed_more(
        &mut self,
        base_offset: LogOffset,
        records: &[MetadataRecord],
    ) -> Result<(), ReplayError> {
        assert!(self.active, "only the active controller proposes");
        assert!(
            !self.inflight.is_empty(),
            "on_proposed_more continues a batch begun by on_proposed"
        );
        for (i, record) in records.iter().enumerate() {
            self.image.apply(base_offset.add(i as u64), record)?;
        }
        Ok(())
    }

    /// This node became the active controller at `now_ms`: every registered broker's lease is
    /// extended by one session timeout from now.
    pub fn on_become_active(&mut self, now_ms: u64) {
        assert!(
            self.inflight.is_empty(),
            "a new active controller has nothing in flight"
        );
        self.active = true;
        self.leases.extend_all(&self.image, now_ms);
    }

    /// This node stopped being the active controller: uncommitted proposals are reverted (the new
    /// leader's log decides what they become) and leases, which are soft state, are dropped.
    pub fn on_resign(&mut self) {
        if let Some(oldest) = self.inflight.pop_front() {
            self.image = oldest.before;
        }
        self.inflight.clear();
        self.active = false;
        self.leases.clear();
    }

    // -----------------------------------------------------------------------------------------
    // Handlers. None mutates the image; `broker_heartbeat` records the broker's lease (soft
    // state, taken at request arrival) and, like `tick`, notes the latest `now_ms`.

    pub fn broker_heartbeat(
        &mut self,
        req: &BrokerHeartbeatRequest,
        ctx: &RequestContext,
    ) -> HandlerResult<BrokerHeartbeatResponse> {
        self.require_active()?;
        self.now_ms_seen = self.now_ms_seen.max(ctx.now_ms);
        let outcome = cluster_control::broker_heartbeat(self.view(), req, ctx);
        if let Some(lease) = outcome.lease {
            self.leases.set(req.broker_id, lease);
        }
        outcome.result
    }

    /// Registers a broker (Kafka's BrokerRegistration); like a heartbeat it records the
    /// broker's lease.
    pub fn register_broker(
        &mut self,
        req: &BrokerRegistrationRequest,
        ctx: &RequestContext,
    ) -> HandlerResult<BrokerRegistrationResponse> {
        self.require_active()?;
        self.now_ms_seen = self.now_ms_seen.max(ctx.now_ms);
        let outcome = cluster_control::register_broker(self.view(), req, ctx, LogOffset(0), true);
        if let Some(lease) = outcome.lease {
            self.leases.set(req.broker_id, lease);
        }
        outcome.result
    }

    /// Periodic work of the active controller: fence brokers whose lease expired (moving their
    /// leaderships and ISR memberships); if none expired, elect leaders for leaderless
    /// partitions that have an eligible ISR member (a separate tick, so no partition is changed
    /// twice in one batch); then remove topics whose deletion intent is committed.
    pub fn tick(&mut self, ctx: &RequestContext) -> HandlerResult<TickResponse> {
        self.require_active()?;
        self.now_ms_seen = self.now_ms_seen.max(ctx.now_ms);
        let mut records = Vec::new();
        let mut response = cluster_control::fence_expired(self.view(), ctx.now_ms, &mut records);
        for b in &response.fenced {
            self.leases.end_controlled_shutdown(*b);
        }
        if records.is_empty() {
            response.leaders_elected = replication_control::elect_leaderless(
                self.view(),
                None,
                self.config.records_per_batch_max,
                &mut records,
            );
        }
        replication_control::remove_deleted_topics(
            self.view(),
            self.config.records_per_batch_max,
            &mut records,
        );
        Ok(ControllerResult::new(records, response))
    }

    /// What a cluster must hold from its start, as Kafka's format writes it into the bootstrap
    /// checkpoint: the features the cluster was formatted with
    /// ([`ControllerConfig::bootstrap_features`], each set above level 0), and, with eligible
    /// leader replicas among them, the cluster default `min.insync.replicas` from the static
    /// config (as Kafka's `ActivationRecordsGenerator` adds it), proposed by the first active
    /// controller that finds `metadata.version` missing (also in flight). Empty once it is
    /// there.
    pub fn bootstrap_records(&self) -> Vec<MetadataRecord> {
        if !self.is_active() || self.image.features.get(METADATA_VERSION).is_some() {
            return Vec::new();
        }
        let features = self
            .config
            .bootstrap_features
            .iter()
            .filter(|f| f.level > 0);
        let mut records: Vec<MetadataRecord> = features
            .clone()
            .map(|f| {
                MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                    name: f.name.clone(),
                    min_level: f.level,
                    max_level: f.level,
                })
            })
            .collect();
        if features
            .clone()
            .any(|f| f.name == feature_control::ELIGIBLE_LEADER_REPLICAS_VERSION)
        {
            records.push(MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Broker,
                resource_name: String::new(),
                key: "min.insync.replicas".into(),
                value: Some(self.config.min_insync_replicas.to_string()),
            }));
        }
        records
    }

    pub fn unregister_broker(&mut self, req: &UnregisterBrokerRequest) -> HandlerResult<()> {
        self.require_active()?;
        let result = cluster_control::unregister_broker(self.view(), req)?;
        self.leases.remove(req.broker_id);
        Ok(result)
    }

    pub fn create_topics(
        &self,
        req: &CreateTopicsRequest,
        ctx: &RequestContext,
    ) -> HandlerResult<CreateTopicsResponse> {
        self.require_active()?;
        Ok(replication_control::create_topics(self.view(), req, ctx))
    }

    /// CreateTopics whose answers also describe each new topic's configs (Kafka's CreateTopics
    /// v5+).
    pub fn create_topics_with_configs(
        &mut self,
        req: &CreateTopicsRequest,
        ctx: &RequestContext,
    ) -> HandlerResult<CreateTopicsWithConfigsResponse> {
        let ControllerResult { records, response } = self.create_topics(req, ctx)?;
        let topics = response
            .topics
            .into_iter()
            .zip(&req.topics)
            .map(|((name, result), asked)| {
                let result = result.map(|topic| CreatedTopicWithConfigs {
                    topic,
                    configs: self.new_topic_configs.describe(
                        &self.image,
                        &self.config,
                        &asked.configs,
                    ),
                });
                (name, result)
            })
            .collect();
        Ok(ControllerResult {
            records,
            response: CreateTopicsWithConfigsResponse { topics },
        })
    }

    pub fn delete_topics(&self, req: &DeleteTopicsRequest) -> HandlerResult<DeleteTopicsResponse> {
        self.require_active()?;
        Ok(replication_control::delete_topics(self.view(), req))
    }

    /// DeleteTopics naming topics by name or by id (Kafka's DeleteTopics v6).
    pub fn delete_topics_v2(
        &self,
        req: &DeleteTopicsV2Request,
    ) -> HandlerResult<DeleteTopicsV2Response> {
        self.require_active()?;
        Ok(replication_control::delete_topics_v2(self.view(), req))
    }

    /// Reads the image (including in-flight changes); needs no records.
    pub fn describe_topics(
        &self,
        req: &DescribeTopicsRequest,
    ) -> Result<DescribeTopicsResponse, ApiError> {
        self.require_active()?;
        Ok(ImageReads::new(&self.image, &self.config).describe_topics(req))
    }

    /// [`Controller::describe_topics`] with each partition's eligible leader replicas.
    pub fn describe_topics_v2(
        &self,
        req: &DescribeTopicsRequest,
    ) -> Result<DescribeTopicsV2Response, ApiError> {
        self.require_active()?;
        Ok(ImageReads::new(&self.image, &self.config).describe_topics_v2(req))
    }

    pub fn create_partitions(
        &self,
        req: &CreatePartitionsRequest,
        ctx: &RequestContext,
    ) -> HandlerResult<CreatePartitionsResponse> {
        self.require_active()?;
        Ok(replication_control::create_partitions(
            self.view(),
            req,
            ctx,
        ))
    }

    /// corum's first AlterPartition, served as [`Controller::alter_partition`].
    pub fn alter_isr(&self, req: &AlterIsrRequest) -> HandlerResult<AlterIsrResponse> {
        self.require_active()?;
        replication_control::alter_isr(self.view(), req)
    }

    /// Kafka's AlterPartition: a leader changes the ISR and leader recovery state of its
    /// partitions.
    pub fn alter_partition(
        &self,
        req: &AlterPartitionRequest,
    ) -> HandlerResult<AlterPartitionResponse> {
        self.require_active()?;
        replication_control::alter_partition(self.view(), req)
    }

    /// Kafka's AssignReplicasToDirs: a broker says which log directory holds each replica.
    pub fn assign_replicas_to_dirs(
        &self,
        req: &AssignReplicasToDirsRequest,
    ) -> HandlerResult<AssignReplicasToDirsResponse> {
        self.require_active()?;
        replication_control::assign_replicas_to_dirs(self.view(), req)
    }

    pub fn elect_leaders(&self, req: &ElectLeadersRequest) -> HandlerResult<ElectLeadersResponse> {
        self.require_active()?;
        Ok(replication_control::elect_leaders(self.view(), req))
    }

    pub fn incremental_alter_configs(
        &self,
        req: &IncrementalAlterConfigsRequest,
    ) -> HandlerResult<IncrementalAlterConfigsResponse> {
        self.require_active()?;
        Ok(config_control::incremental_alter_configs(self.view(), req))
    }

    /// Kafka's legacy AlterConfigs: each resource's dynamic configs replaced as a whole.
    pub fn alter_configs(&self, req: &AlterConfigsRequest) -> HandlerResult<AlterConfigsResponse> {
        self.require_active()?;
        Ok(config_control::alter_configs(self.view(), req))
    }

    /// Reads the image (including in-flight changes); needs no records.
    pub fn describe_configs(
        &self,
        req: &DescribeConfigsRequest,
    ) -> Result<DescribeConfigsResponse, ApiError> {
        self.require_active()?;
        Ok(config_control::describe_configs(
            &self.image,
            &self.config,
            req,
        ))
    }

    pub fn update_features(
        &self,
        req: &UpdateFeaturesRequest,
    ) -> HandlerResult<UpdateFeaturesResponse> {
        self.require_active()?;
        Ok(feature_control::update_features(self.view(), req))
    }

    pub fn allocate_producer_ids(
        &self,
        req: &AllocateProducerIdsRequest,
    ) -> HandlerResult<AllocateProducerIdsResponse> {
        self.require_active()?;
        producer_id_control::allocate_producer_ids(self.view(), req)
    }

    /// Creates ACLs (Kafka's CreateAcls): one AccessControlEntry record per new ACL.
    pub fn create_acls(
        &self,
        req: &CreateAclsRequest,
        ctx: &RequestContext,
    ) -> HandlerResult<CreateAclsResponse> {
        self.require_active()?;
        acl_control::create_acls(self.view(), req, ctx)
    }

    /// Sets and removes users' SCRAM credentials (Kafka's AlterUserScramCredentials).
    pub fn alter_user_scram_credentials(
        &self,
        req: &crate::control::scram_control::AlterUserScramCredentialsRequest,
    ) -> HandlerResult<crate::control::scram_control::AlterUserScramCredentialsResponse> {
        self.require_active()?;
        crate::control::scram_control::alter_user_scram_credentials(self.view(), req)
    }

    /// Reads the image (including in-flight changes).
    pub fn describe_user_scram_credentials(
        &self,
        req: &crate::control::scram_control::DescribeUserScramCredentialsRequest,
    ) -> Result<crate::control::scram_control::DescribeUserScramCredentialsResponse, ApiError> {
        self.require_active()?;
        Ok(ImageReads::new(&self.image, &self.config).describe_user_scram_credentials(req))
    }

    /// Deletes the ACLs each filter matches (Kafka's DeleteAcls).
    pub fn delete_acls(&self, req: &DeleteAclsRequest) -> HandlerResult<DeleteAclsResponse> {
        self.require_active()?;
        acl_control::delete_acls(self.view(), req)
    }

    /// Reads the image (including in-flight changes); needs no records.
    pub fn describe_acls(
        &self,
        req: &DescribeAclsRequest,
    ) -> Result<DescribeAclsResponse, ApiError> {
        self.require_active()?;
        ImageReads::new(&self.image, &self.config).describe_acls(req)
    }

    pub fn describe_cluster(&self) -> Result<DescribeClusterResponse, ApiError> {
        self.require_active()?;
        Ok(cluster_control::describe_cluster(&self.image, self.node_id))
    }

    /// Registers a controller (KIP-919); an unchanged registration writes nothing.
    pub fn register_controller(&self, req: &RegisterControllerRequest) -> HandlerResult<()> {
        self.require_active()?;
        cluster_control::register_controller(self.view(), req)
    }

    /// Reads the image (including in-flight changes); needs no records.
    pub fn describe_controllers(&self) -> Result<DescribeControllersResponse, ApiError> {
        self.require_active()?;
        Ok(ImageReads::new(&self.image, &self.config).describe_controllers())
    }

    /// Reads the image (including in-flight changes); needs no records.
    pub fn describe_features(&self) -> Result<DescribeFeaturesResponse, ApiError> {
        self.require_active()?;
        Ok(ImageReads::new(&self.image, &self.config).describe_features())
    }

    /// O(image) invariant checks of both the committed and the in-flight image.
    pub fn check_invariants(&self) {
        self.image.check_invariants();
        self.committed_image().check_invariants();
        assert!(self.committed_end <= self.image.end_offset || self.inflight.is_empty());
        assert!(
            self.active || self.inflight.is_empty(),
            "a standby has nothing in flight"
        );
        let mut prev = None;
        for s in &self.inflight {
            assert!(
                s.base_offset >= self.committed_end,
                "in-flight batch below the commit point"
            );
            assert!(prev.is_none_or(|p| p < s.base_offset));
            prev = Some(s.base_offset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::replication_control::CreatableTopic;
    use crate::records::{decode_batch, encode_batch, ListenerV1, MetadataRecord};
    use crate::BrokerHeartbeatRequest;
    use corum_types::Uuid;

    fn ctx(c: &Controller, now_ms: u64) -> RequestContext {
        RequestContext {
            now_ms,
            next_offset: c.image().end_offset,
            high_watermark: c.committed_end(),
        }
    }

    fn propose(c: &mut Controller, records: &[MetadataRecord]) -> LogOffset {
        let base = c.image().end_offset;
        c.on_proposed(base, records).unwrap();
        base
    }

    fn commit_all(c: &mut Controller, log: &[(LogOffset, Vec<MetadataRecord>)]) {
        for (base, records) in log {
            let bytes = encode_batch(records);
            c.replay_batch(*base, decode_batch(&bytes).unwrap())
                .unwrap();
        }
    }

    fn register(id: u32, incarnation: u8) -> BrokerHeartbeatRequest {
        BrokerHeartbeatRequest {
            broker_id: NodeId(id),
            broker_epoch: None,
            incarnation_id: Uuid([incarnation; 16]),
            listeners: vec![ListenerV1 {
                name: "P".into(),
                host: "h".into(),
                port: 1,
            }],
            features: feature_control::supported_features(),
            rack: None,
            next_metadata_offset: LogOffset(0),
            want_fence: false,
            want_shutdown: false,
        }
    }

    /// A cluster formatted with eligible leader replicas (4.1's default) starts with the
    /// cluster default `min.insync.replicas` set to the static value after its features, as
    /// Kafka's first controller writes it; one formatted without them (4.0) does not.
    #[test]
    fn bootstrap_records_set_the_min_isr_with_eligible_leader_replicas() {
        let bootstrap = |release: &str, min_insync_replicas| {
            let config = ControllerConfig {
                bootstrap_features: feature_control::bootstrap_features(release, &[]).unwrap(),
                min_insync_replicas,
                ..Default::default()
            };
            let mut c = Controller::new(config, NodeId(9)).unwrap();
            assert!(
                c.bootstrap_records().is_empty(),
                "a standby proposes nothing"
            );
            c.on_become_active(0);
            c.bootstrap_records()
        };
        let records = bootstrap("4.1", 2);
        let names: Vec<&str> = records
            .iter()
            .map(|r| match r {
                MetadataRecord::FeatureLevel(f) => f.name.as_str(),
                MetadataRecord::Config(c) => c.key.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            names,
            [
                "eligible.leader.replicas.version",
                "group.version",
                "metadata.version",
                "transaction.version",
                "min.insync.replicas"
            ]
        );
        assert_eq!(
            records[4],
            MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Broker,
                resource_name: String::new(),
                key: "min.insync.replicas".into(),
                value: Some("2".into()),
            })
        );
        assert!(bootstrap("4.0", 2)
            .iter()
            .all(|r| matches!(r, MetadataRecord::FeatureLevel(_))));
    }

    /// A registration conflict is detected against a registration still in flight, and a
    /// topic name taken by an in-flight CreateTopics cannot be created again; after a resign
    /// the uncommitted proposals are gone and the name is free.
    #[test]
    fn validation_sees_in_flight_proposals() {
        let mut c = Controller::new(ControllerConfig::default(), NodeId(9)).unwrap();
        c.on_become_active(0);
        let r = c.broker_heartbeat(&register(1, 1), &ctx(&c, 0)).unwrap();
        let b1 = propose(&mut c, &r.records);
        let err = c
            .broker_heartbeat(&register(1, 2), &ctx(&c, 1))
            .unwrap_err();
        assert_eq!(
            err,
            ApiError::DuplicateBrokerRegistration {
                broker_id: NodeId(1)
            }
        );
        // Commit the registration, unfence the broker, then create a topic twice in flight.
        commit_all(&mut c, &[(b1, r.records.clone())]);
        let mut hb = register(1, 1);
        hb.broker_epoch = Some(r.response.broker_epoch);
        hb.next_metadata_offset = c.committed_end();
        let u = c.broker_heartbeat(&hb, &ctx(&c, 2)).unwrap();
        assert_eq!(u.response.target_state, crate::TargetState::Active);
        let b2 = propose(&mut c, &u.records);
        commit_all(&mut c, &[(b2, u.records.clone())]);
        let req = CreateTopicsRequest {
            topics: vec![CreatableTopic::new("a", 2, 1)],
            validate_only: false,
        };
        let first = c.create_topics(&req, &ctx(&c, 3)).unwrap();
        assert!(first.response.topics[0].1.is_ok());
        let before = c.image().clone();
        propose(&mut c, &first.records);
        assert_ne!(&before, c.image());
        let second = c.create_topics(&req, &ctx(&c, 4)).unwrap();
        assert_eq!(
            second.response.topics[0].1,
            Err(ApiError::TopicAlreadyExists { name: "a".into() })
        );
        assert!(second.records.is_empty());
        assert_eq!(c.inflight_batches(), 1);
        assert!(c.committed_image().topics.get_by_name("a").is_none());
        c.check_invariants();
        // Losing leadership reverts the uncommitted creation.
        c.on_resign();
        assert_eq!(c.image(), &before);
        assert_eq!(
            c.create_topics(&req, &ctx(&c, 5)).unwrap_err(),
            ApiError::NotController
        );
        c.on_become_active(5);
        assert!(
            c.create_topics(&req, &ctx(&c, 5)).unwrap().response.topics[0]
                .1
                .is_ok()
        );
    }

    /// A controller that is active with broker 1 registered, unfenced and committed.
    fn active_with_one_broker() -> Controller {
        let mut c = Controller::new(ControllerConfig::default(), NodeId(9)).unwrap();
        c.on_become_active(0);
        let r = c.broker_heartbeat(&register(1, 1), &ctx(&c, 0)).unwrap();
        let b1 = propose(&mut c, &r.records);
        commit_all(&mut c, &[(b1, r.records.clone())]);
        let mut hb = register(1, 1);
        hb.broker_epoch = Some(r.response.broker_epoch);
        hb.next_metadata_offset = c.committed_end();
        let u = c.broker_heartbeat(&hb, &ctx(&c, 1)).unwrap();
        let b2 = propose(&mut c, &u.records);
        commit_all(&mut c, &[(b2, u.records.clone())]);
        c
    }

    /// CreateTopics with configs decides and proposes exactly what CreateTopics does, and
    /// describes each new topic's keys: its own settings (dynamic topic) over the defaults;
    /// a refused topic has no configs to describe.
    #[test]
    fn create_topics_with_configs_answers_the_new_topics_configs() {
        use crate::control::config_control::ConfigSource;
        let mut c = active_with_one_broker();
        let mut a = CreatableTopic::new("a", 2, 1);
        a.configs = vec![("retention.ms".into(), "1000".into())];
        let req = CreateTopicsRequest {
            // The second asks for more replicas than there are brokers.
            topics: vec![
                a,
                CreatableTopic::new("big", 1, 3),
                CreatableTopic::new("b", 1, 1),
            ],
            validate_only: false,
        };
        let at = ctx(&c, 2);
        let plain = c.create_topics(&req, &at).unwrap();
        let described = c.create_topics_with_configs(&req, &at).unwrap();
        assert_eq!(described.records, plain.records);
        assert!(!plain.records.is_empty());
        let answers = &described.response.topics;
        assert_eq!(answers.len(), 3);
        for ((name, with), (plain_name, without)) in answers.iter().zip(&plain.response.topics) {
            assert_eq!(name, plain_name);
            assert_eq!(with.as_ref().map(|t| &t.topic), without.as_ref());
        }
        let value = |i: usize, key: &str| {
            let configs = &answers[i].1.as_ref().unwrap().configs;
            assert_eq!(configs.len(), crate::config_schema::TOPIC_KEYS.len());
            let c = configs.iter().find(|c| c.name == key).unwrap();
            (c.value.as_deref().map(str::to_owned), c.source)
        };
        assert_eq!(
            value(0, "retention.ms"),
            (Some("1000".into()), ConfigSource::DynamicTopic)
        );
        assert_eq!(
            value(2, "retention.ms"),
            (Some("604800000".into()), ConfigSource::Default)
        );
        assert!(answers[1].1.is_err());
    }

    /// A snapshot of the committed image (in-flight proposals excluded) loads into a fresh
    /// controller as that image at the snapshot's end; bad records leave the state unchanged.
    #[test]
    fn snapshot_of_the_committed_image_loads() {
        let mut c = active_with_one_broker();
        let req = CreateTopicsRequest {
            topics: vec![CreatableTopic::new("t", 3, 1)],
            validate_only: false,
        };
        let created = c.create_topics(&req, &ctx(&c, 1)).unwrap();
        let b3 = propose(&mut c, &created.records);
        commit_all(&mut c, &[(b3, created.records.clone())]);
        // In flight, not in the snapshot.
        let more = CreateTopicsRequest {
            topics: vec![CreatableTopic::new("u", 1, 1)],
            validate_only: false,
        };
        let inflight = c.create_topics(&more, &ctx(&c, 2)).unwrap().records;
        propose(&mut c, &inflight);
        let end = LogOffset(c.committed_end().0 + 5);
        let snap = encode_batch(&c.committed_image().snapshot_records());

        let mut d = Controller::new(ControllerConfig::default(), NodeId(2)).unwrap();
        d.load_snapshot(end, decode_batch(&snap).unwrap()).unwrap();
        let mut expected = c.committed_image().clone();
        expected.end_offset = end;
        assert_eq!(d.image(), &expected);
        assert_eq!(d.committed_end(), end);
        assert!(d.image().topics.get_by_name("t").is_some());
        assert!(d.image().topics.get_by_name("u").is_none());
        assert!(!d.is_active());
        d.check_invariants();

        // Over an active controller with proposals in flight: all of that is replaced.
        c.load_snapshot(end, decode_batch(&snap).unwrap()).unwrap();
        assert_eq!(c.image(), &expected);
        assert_eq!((c.inflight_batches(), c.is_active()), (0, false));

        // A record that does not replay (an unfence of an unknown broker) changes nothing.
        let bad = encode_batch(&[MetadataRecord::UnfenceBroker(
            crate::records::UnfenceBrokerRecordV1 {
                broker_id: NodeId(77),
                broker_epoch: corum_types::BrokerEpoch(1),
            },
        )]);
        let before = d.image().clone();
        assert!(d
            .load_snapshot(LogOffset(100), decode_batch(&bad).unwrap())
            .is_err());
        assert_eq!(d.image(), &before);
        assert_eq!(d.committed_end(), end);
    }

    /// Committing an own proposal does not re-apply it: the image equals a fresh replay.
    #[test]
    fn committing_own_proposals_matches_fresh_replay() {
        let mut c = Controller::new(ControllerConfig::default(), NodeId(9)).unwrap();
        c.on_become_active(0);
        let mut log = vec![];
        for id in 1..4 {
            let r = c.broker_heartbeat(&register(id, 1), &ctx(&c, 0)).unwrap();
            let base = propose(&mut c, &r.records);
            log.push((base, r.records));
        }
        assert_eq!(c.inflight_batches(), 3);
        commit_all(&mut c, &log[..2]);
        assert_eq!(c.inflight_batches(), 1);
        commit_all(&mut c, &log[2..]);
        assert_eq!(c.inflight_batches(), 0);
        let mut fresh = Controller::new(ControllerConfig::default(), NodeId(8)).unwrap();
        commit_all(&mut fresh, &log);
        assert_eq!(fresh.image(), c.image());
        assert_eq!(c.image().brokers.len(), 3);
        // Replaying a committed offset again is refused.
        let bytes = encode_batch(&log[0].1);
        assert!(matches!(
            c.replay(log[0].0, &decode_batch(&bytes).unwrap()[0]),
            Err(ReplayError::OffsetNotIncreasing { .. })
        ));
    }

    /// A fenced broker is unfenced (and caught up, as Kafka's `IsCaughtUp` says) once it has
    /// replayed past its own registration record, even while the log has moved on beyond it
    /// (other brokers registering): the high watermark is a moving target under steady writes.
    /// Short of its registration it stays fenced.
    #[test]
    fn unfencing_needs_the_registration_replayed_not_the_high_watermark() {
        let mut c = Controller::new(ControllerConfig::default(), NodeId(9)).unwrap();
        c.on_become_active(0);
        let r = c.broker_heartbeat(&register(1, 1), &ctx(&c, 0)).unwrap();
        let b1 = propose(&mut c, &r.records);
        commit_all(&mut c, &[(b1, r.records.clone())]);
        let registered_end = c.committed_end();
        for id in 2..6 {
            let other = c.broker_heartbeat(&register(id, 1), &ctx(&c, 1)).unwrap();
            let b = propose(&mut c, &other.records);
            commit_all(&mut c, &[(b, other.records)]);
        }
        assert!(c.committed_end() > registered_end);
        let mut hb = register(1, 1);
        hb.broker_epoch = Some(r.response.broker_epoch);
        hb.next_metadata_offset = LogOffset(r.response.broker_epoch.0);
        let short = c.broker_heartbeat(&hb, &ctx(&c, 2)).unwrap();
        assert_eq!(short.response.target_state, crate::TargetState::Fenced);
        assert!(short.records.is_empty());
        hb.next_metadata_offset = registered_end;
        let past = c.broker_heartbeat(&hb, &ctx(&c, 3)).unwrap();
        assert_eq!(past.response.target_state, crate::TargetState::Active);
        assert!(
            past.response.is_caught_up,
            "past its registration, as Kafka's IsCaughtUp, however far behind the high watermark"
        );
        assert!(!short.response.is_caught_up);
        assert!(!past.records.is_empty(), "an unfencing record");
    }

    /// Requests sharing one batch (`on_proposed` then `on_proposed_more`) each see the ones
    /// before; the whole batch committed as one leaves nothing in flight and the image of a
    /// fresh replay; a resignation before the commit reverts all of them.
    #[test]
    fn parts_of_one_batch_share_one_revert_point() {
        let mut c = Controller::new(ControllerConfig::default(), NodeId(9)).unwrap();
        c.on_become_active(0);
        let before = c.image().clone();
        let base = c.image().end_offset;
        let mut all = Vec::new();
        for id in 1..4 {
            let r = c.broker_heartbeat(&register(id, 1), &ctx(&c, 0)).unwrap();
            let at = c.image().end_offset;
            if all.is_empty() {
                c.on_proposed(at, &r.records).unwrap();
            } else {
                c.on_proposed_more(at, &r.records).unwrap();
            }
            all.extend(r.records);
        }
        assert_eq!(c.inflight_batches(), 1);
        assert_eq!(c.image().brokers.len(), 3);
        assert!(c.committed_image().brokers.is_empty());
        let mut resigned = c.clone();
        resigned.on_resign();
        assert_eq!(resigned.image(), &before);
        commit_all(&mut c, &[(base, all.clone())]);
        assert_eq!(c.inflight_batches(), 0);
        let mut fresh = Controller::new(ControllerConfig::default(), NodeId(8)).unwrap();
        commit_all(&mut fresh, &[(base, all)]);
        assert_eq!(fresh.image(), c.image());
        c.check_invariants();
    }

    /// A committed record beyond the in-flight proposals (they were truncated away) is refused
    /// until the driver resigns, which reverts them.
    #[test]
    fn skipped_proposals_need_a_resign() {
        let mut c = Controller::new(ControllerConfig::default(), NodeId(9)).unwrap();
        c.on_become_active(0);
        let r = c.broker_heartbeat(&register(1, 1), &ctx(&c, 0)).unwrap();
        propose(&mut c, &r.records);
        let other = c.clone();
        let foreign = encode_batch(&[MetadataRecord::NoOp(crate::records::NoOpRecordV1 {})]);
        let rec = &decode_batch(&foreign).unwrap()[0];
        assert!(matches!(
            c.replay(LogOffset(5), rec),
            Err(ReplayError::InflightProposalsSkipped { .. })
        ));
        assert_eq!(c.image(), other.image());
        c.on_resign();
        c.replay(LogOffset(5), rec).unwrap();
        assert!(c.image().brokers.is_empty());
        assert_eq!(c.committed_end(), LogOffset(6));
    }

    /// A log an older controller wrote replays unchanged: V1 partitions put every replica on
    /// the MIGRATING directory, a V1 leader change sets the epochs it carries, a V1 fence clears
    /// the controlled-shutdown flag; its deletion intent (`Topic{deleting: true}`) hides the
    /// topic (a deletion answers TopicDeletionInProgress) until the tick removes it.
    #[test]
    fn an_older_controllers_log_replays_unchanged() {
        use crate::ids::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId, MIGRATING_DIR};
        use crate::records::*;
        use corum_types::BrokerEpoch;
        let t = TopicId(Uuid([5; 16]));
        let b1 = (NodeId(1), BrokerEpoch(0));
        let log = vec![
            MetadataRecord::RegisterBroker(RegisterBrokerRecordV1 {
                broker_id: b1.0,
                incarnation_id: Uuid([1; 16]),
                broker_epoch: b1.1,
                listeners: vec![ListenerV1 {
                    name: "P".into(),
                    host: "h".into(),
                    port: 1,
                }],
                features: vec![],
                rack: None,
            }),
            MetadataRecord::UnfenceBroker(UnfenceBrokerRecordV1 {
                broker_id: b1.0,
                broker_epoch: b1.1,
            }),
            MetadataRecord::Topic(TopicRecordV1 {
                name: "t".into(),
                topic_id: t,
                deleting: false,
            }),
            MetadataRecord::Partition(PartitionRecordV1 {
                topic_id: t,
                partition_id: PartitionId(0),
                replicas: vec![b1.0],
                isr: vec![b1.0],
                leader: Some(b1.0),
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(0),
            }),
            MetadataRecord::PartitionLeaderChange(PartitionLeaderChangeRecordV1 {
                topic_id: t,
                partition_id: PartitionId(0),
                leader: None,
                leader_epoch: LeaderEpoch(4),
                partition_epoch: PartitionEpoch(6),
            }),
            MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecordV1 {
                broker_id: b1.0,
                broker_epoch: b1.1,
                in_controlled_shutdown: true,
            }),
            MetadataRecord::FenceBroker(FenceBrokerRecordV1 {
                broker_id: b1.0,
                broker_epoch: b1.1,
            }),
            MetadataRecord::Topic(TopicRecordV1 {
                name: "t".into(),
                topic_id: t,
                deleting: true,
            }),
        ];
        let mut c = Controller::new(ControllerConfig::default(), NodeId(9)).unwrap();
        commit_all(&mut c, &[(LogOffset(0), log)]);
        let b = c.image().brokers.get(b1.0).unwrap();
        assert!(b.fenced && !b.in_controlled_shutdown);
        assert_eq!(
            b.endpoints[0].security_protocol, 0,
            "V1 listeners are PLAINTEXT"
        );
        let p = c.image().topics.partition(t, PartitionId(0)).unwrap();
        assert_eq!(&p.directories[..], &[MIGRATING_DIR]);
        assert_eq!(
            (p.leader_epoch, p.partition_epoch),
            (LeaderEpoch(4), PartitionEpoch(6))
        );
        c.on_become_active(0);
        let deletion = c
            .delete_topics(&DeleteTopicsRequest {
                names: vec!["t".into()],
            })
            .unwrap();
        assert!(deletion.records.is_empty());
        assert_eq!(
            deletion.response.topics[0].1,
            Err(ApiError::TopicDeletionInProgress { name: "t".into() })
        );
        let tick = c.tick(&ctx(&c, 1)).unwrap();
        assert_eq!(
            tick.records,
            vec![MetadataRecord::RemoveTopic(RemoveTopicRecordV1 {
                topic_id: t
            })]
        );
        let base = propose(&mut c, &tick.records);
        commit_all(&mut c, &[(base, tick.records)]);
        assert!(c.image().topics.is_empty());
        c.check_invariants();
    }
}
