//! Values the fuzz harnesses' seed generators share: a small cluster's metadata records, the
//! voter set of a three-node quorum, and the Raft batches that carry them, all built with the
//! project's own types so the seeds are what nodes really write and send.

#![allow(dead_code)]

use corum_controller::records::{
    BrokerEndpointV1, ConfigRecordV1, ConfigResourceType, ControllerEndpointV1,
    FeatureLevelRecordV1, LeaderChange, LeaderRecoveryState, PartitionChangeRecordV2,
    PartitionRecordV3, ProducerIdsRecordV1, RegisterBrokerRecordV2, RegisterControllerRecordV1,
    SupportedFeatureV1, TopicRecordV1,
};
use corum_controller::{
    encode_batch, LeaderEpoch, MetadataRecord, PartitionEpoch, PartitionId, TopicId,
};
use corum_raft::control::{ControlRecord, KRaftVersionRecord, LeaderChangeRecord, VotersRecord};
use corum_raft::types::{Endpoint, ReplicaKey, Voter, VoterSet};
use corum_raft::{Batch, Payload};
use corum_types::{BrokerEpoch, Epoch, LogOffset, NodeId, Uuid};

/// The voter set of nodes 1, 2 and 3, each with one `CONTROLLER` endpoint.
pub fn voter_set() -> VoterSet {
    VoterSet::new(
        (1..=3u32)
            .map(|id| Voter {
                key: ReplicaKey {
                    id: NodeId(id),
                    directory_id: Uuid([id as u8; 16]),
                },
                endpoints: vec![Endpoint {
                    listener: "CONTROLLER".into(),
                    host: format!("controller-{id}"),
                    port: 9093,
                }],
            })
            .collect(),
    )
    .expect("three distinct voters")
}

/// A small cluster's records, one of each kind a controller writes most: the metadata version,
/// a controller and two brokers registering, a topic with a partition and a change to it, a
/// topic config and a producer-id block.
pub fn metadata_records() -> Vec<MetadataRecord> {
    let topic = TopicId(Uuid([9; 16]));
    let features = vec![SupportedFeatureV1 {
        name: "metadata.version".into(),
        min_level: 7,
        max_level: 27,
    }];
    let mut records = vec![
        MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
            name: "metadata.version".into(),
            min_level: 0,
            max_level: 27,
        }),
        MetadataRecord::RegisterController(RegisterControllerRecordV1 {
            controller_id: NodeId(1),
            incarnation_id: Uuid([1; 16]),
            end_points: vec![ControllerEndpointV1 {
                name: "CONTROLLER".into(),
                host: "controller-1".into(),
                port: 9093,
                security_protocol: 0,
            }],
            features: features.clone(),
        }),
    ];
    for id in [4u32, 5] {
        records.push(MetadataRecord::RegisterBrokerV2(Box::new(
            RegisterBrokerRecordV2 {
                broker_id: NodeId(id),
                incarnation_id: Uuid([id as u8; 16]),
                broker_epoch: BrokerEpoch(u64::from(id) * 10),
                endpoints: vec![BrokerEndpointV1 {
                    name: "PLAINTEXT".into(),
                    host: format!("broker-{id}"),
                    port: 9092,
                    security_protocol: 0,
                }],
                features: features.clone(),
                rack: (id == 4).then(|| "rack-a".to_owned()),
                fenced: false,
                in_controlled_shutdown: false,
                log_dirs: vec![Uuid([0x40 + id as u8; 16])],
            },
        )));
    }
    records.extend([
        MetadataRecord::Topic(TopicRecordV1 {
            name: "logs".into(),
            topic_id: topic,
            deleting: false,
        }),
        MetadataRecord::PartitionV3(Box::new(PartitionRecordV3 {
            topic_id: topic,
            partition_id: PartitionId(0),
            replicas: vec![NodeId(4), NodeId(5)],
            isr: vec![NodeId(4), NodeId(5)],
            leader: Some(NodeId(4)),
            leader_recovery_state: LeaderRecoveryState::Recovered,
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
            directories: vec![Uuid([0x44; 16]), Uuid([0x45; 16])],
            eligible_leader_replicas: vec![],
            last_known_elr: vec![],
        })),
        MetadataRecord::PartitionChangeV2(Box::new(PartitionChangeRecordV2 {
            topic_id: topic,
            partition_id: PartitionId(0),
            isr: Some(vec![NodeId(4)]),
            leader: LeaderChange::Unchanged,
            replicas: None,
            leader_recovery_state: None,
            directories: None,
            eligible_leader_replicas: Some(vec![NodeId(5)]),
            last_known_elr: None,
        })),
        MetadataRecord::Config(ConfigRecordV1 {
            resource_type: ConfigResourceType::Topic,
            resource_name: "logs".into(),
            key: "cleanup.policy".into(),
            value: Some("compact".into()),
        }),
        MetadataRecord::ProducerIds(ProducerIdsRecordV1 {
            broker_id: NodeId(4),
            broker_epoch: BrokerEpoch(40),
            next_producer_id: 1000,
        }),
    ]);
    records
}

/// A control batch's records: a leader change, the voter set and `kraft.version` 1.
pub fn control_records() -> Vec<ControlRecord> {
    vec![
        ControlRecord::LeaderChange(LeaderChangeRecord {
            epoch: Epoch(3),
            leader: NodeId(1),
            granted_by: vec![NodeId(1), NodeId(2)],
        }),
        ControlRecord::Voters(VotersRecord {
            version: 0,
            voters: voter_set(),
        }),
        ControlRecord::KRaftVersion(KRaftVersionRecord { version: 1 }),
    ]
}

/// Two contiguous batches from offset `start`: a control batch, then the metadata records.
pub fn batches(start: u64) -> Vec<Batch> {
    let control = control_records();
    let records = metadata_records();
    let first = Batch {
        base_offset: LogOffset(start),
        epoch: Epoch(3),
        record_count: control.len() as u32,
        control: true,
        timestamp_ms: 1_700_000_000_000,
        payload: corum_raft::control::encode(control),
    };
    let second = Batch {
        base_offset: LogOffset(start + first.record_count as u64),
        epoch: Epoch(3),
        record_count: records.len() as u32,
        control: false,
        timestamp_ms: 1_700_000_000_001,
        payload: Payload::from(encode_batch(&records).as_slice()),
    };
    vec![first, second]
}
