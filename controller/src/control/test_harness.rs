//! A small driver for the unit tests of the control managers: an active [`Controller`] whose
//! proposals are committed at once (encoded, decoded and replayed, as a follower would), with
//! helpers for the usual set-up (brokers registered and unfenced, topics placed by hand).

use corum_types::{BrokerEpoch, LogOffset, NodeId, Uuid};

use crate::control::cluster_control::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
};
use crate::control::replication_control::{CreatableTopic, CreateTopicsRequest};
use crate::control::{ControllerResult, RequestContext};
use crate::error::ApiError;
use crate::ids::{PartitionId, TopicId};
use crate::image::PartitionImage;
use crate::records::{
    BrokerEndpointV1, ConfigRecordV1, ConfigResourceType, FeatureLevelRecordV1, MetadataRecord,
    SecurityProtocol, SupportedFeatureV1,
};
use crate::{decode_batch, encode_batch, Controller, ControllerConfig};

#[derive(Clone)]
pub(crate) struct Harness {
    pub c: Controller,
    pub now_ms: u64,
}

/// The log directory `n` of the tests (never a reserved id).
pub(crate) fn dir(n: u8) -> Uuid {
    Uuid([0x40, n, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, n])
}

impl Harness {
    /// An active controller with `metadata.version` finalized at `level`.
    pub(crate) fn at_metadata_version(level: u16) -> Harness {
        let mut h = Harness {
            c: Controller::new(ControllerConfig::default(), NodeId(100)).expect("valid config"),
            now_ms: 0,
        };
        h.c.on_become_active(0);
        h.commit(&[MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
            name: crate::controller::METADATA_VERSION.into(),
            min_level: level,
            max_level: level,
        })]);
        h
    }

    /// An active controller at Kafka 4.1's latest `metadata.version`.
    pub(crate) fn new() -> Harness {
        Harness::at_metadata_version(27)
    }

    /// [`Harness::new`] with eligible leader replicas enabled (KIP-966), as a cluster formatted
    /// at 4.1 starts: the feature finalized and the cluster default `min.insync.replicas` set
    /// to `min_isr`.
    pub(crate) fn with_elr(min_isr: u16) -> Harness {
        let mut h = Harness::new();
        h.commit(&[MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
            name: crate::control::feature_control::ELIGIBLE_LEADER_REPLICAS_VERSION.into(),
            min_level: 1,
            max_level: 1,
        })]);
        h.config("", "min.insync.replicas", &min_isr.to_string());
        h
    }

    pub(crate) fn ctx(&self) -> RequestContext {
        RequestContext {
            now_ms: self.now_ms,
            next_offset: self.c.image().end_offset,
            high_watermark: self.c.committed_end(),
        }
    }

    /// Proposes and commits `records` as one batch.
    pub(crate) fn commit(&mut self, records: &[MetadataRecord]) {
        if records.is_empty() {
            return;
        }
        let base = self.c.image().end_offset;
        self.c
            .on_proposed(base, records)
            .expect("own proposal applies");
        let bytes = encode_batch(records);
        self.c
            .replay_batch(base, decode_batch(&bytes).expect("own batch decodes"))
            .expect("own batch replays");
        self.c.check_invariants();
    }

    /// Commits a handler's records and returns its response.
    pub(crate) fn run<R>(&mut self, result: Result<ControllerResult<R>, ApiError>) -> R {
        let r = result.expect("the request is accepted");
        self.commit(&r.records);
        r.response
    }

    pub(crate) fn registration(&self, id: u32, log_dirs: Vec<Uuid>) -> BrokerRegistrationRequest {
        BrokerRegistrationRequest {
            broker_id: NodeId(id),
            incarnation_id: Uuid([id as u8; 16]),
            endpoints: vec![BrokerEndpointV1 {
                name: "PLAINTEXT".into(),
                host: format!("b{id}"),
                port: 9092,
                security_protocol: SecurityProtocol::Plaintext as i16,
            }],
            features: vec![
                SupportedFeatureV1 {
                    name: "metadata.version".into(),
                    min_level: 7,
                    max_level: 27,
                },
                SupportedFeatureV1 {
                    name: crate::control::feature_control::ELIGIBLE_LEADER_REPLICAS_VERSION.into(),
                    min_level: 0,
                    max_level: 1,
                },
            ],
            rack: None,
            log_dirs,
            previous_broker_epoch: crate::control::cluster_control::PreviousBrokerEpoch::Unnamed,
        }
    }

    /// Registers broker `id` with `log_dirs` (committed); its epoch.
    pub(crate) fn register(&mut self, id: u32, log_dirs: Vec<Uuid>) -> BrokerEpoch {
        let req = self.registration(id, log_dirs);
        let ctx = self.ctx();
        let r = self.c.register_broker(&req, &ctx);
        self.run(r).broker_epoch
    }

    pub(crate) fn heartbeat_request(&self, id: u32, next: LogOffset) -> BrokerHeartbeatRequest {
        BrokerHeartbeatRequest {
            broker_id: NodeId(id),
            broker_epoch: self
                .c
                .image()
                .brokers
                .get(NodeId(id))
                .map(|b| b.broker_epoch),
            incarnation_id: Uuid([id as u8; 16]),
            listeners: vec![],
            features: vec![],
            rack: None,
            next_metadata_offset: next,
            want_fence: false,
            want_shutdown: false,
        }
    }

    /// A heartbeat of broker `id` caught up with the log (records committed).
    pub(crate) fn heartbeat(&mut self, id: u32) -> BrokerHeartbeatResponse {
        let req = self.heartbeat_request(id, self.c.committed_end());
        self.send_heartbeat(&req)
    }

    pub(crate) fn send_heartbeat(
        &mut self,
        req: &BrokerHeartbeatRequest,
    ) -> BrokerHeartbeatResponse {
        let ctx = self.ctx();
        let r = self.c.broker_heartbeat(req, &ctx);
        self.run(r)
    }

    /// Brokers `ids` registered (with one log directory each, `dir(id)`) and unfenced.
    pub(crate) fn brokers(&mut self, ids: &[u32]) {
        for &id in ids {
            self.register(id, vec![dir(id as u8)]);
        }
        for &id in ids {
            self.heartbeat(id);
        }
    }

    /// Topic `name` with one partition per replica list (committed); its id.
    pub(crate) fn topic(&mut self, name: &str, assignments: &[&[u32]]) -> TopicId {
        let mut t = CreatableTopic::new(name, -1, -1);
        t.assignments = assignments
            .iter()
            .map(|a| a.iter().map(|b| NodeId(*b)).collect())
            .collect();
        let req = CreateTopicsRequest {
            topics: vec![t],
            validate_only: false,
        };
        let ctx = self.ctx();
        let r = self.c.create_topics(&req, &ctx);
        let response = self.run(r);
        response.topics[0]
            .1
            .clone()
            .expect("topic created")
            .topic_id
    }

    /// Sets topic config `key` of `topic` (`""`: the cluster default of the broker key).
    pub(crate) fn config(&mut self, topic: &str, key: &str, value: &str) {
        self.commit(&[MetadataRecord::Config(ConfigRecordV1 {
            resource_type: if topic.is_empty() {
                ConfigResourceType::Broker
            } else {
                ConfigResourceType::Topic
            },
            resource_name: topic.to_owned(),
            key: key.to_owned(),
            value: Some(value.to_owned()),
        })]);
    }

    pub(crate) fn partition(&self, topic: TopicId, p: u32) -> PartitionImage {
        self.c
            .image()
            .topics
            .partition(topic, PartitionId(p))
            .expect("the partition exists")
            .clone()
    }
}
