//! Metadata batches whose effect shows in the image, for the observer-log tests (the unit tests
//! in `src/observer_log.rs` and the `metadata_follower` integration test include this file).

use corum_controller::encode_batch;
use corum_controller::records::{ConfigRecordV1, ConfigResourceType, MetadataRecord};
use corum_raft::Batch;
use corum_types::{Epoch, LogOffset};

/// A batch at `base` of `count` records written in `epoch`: a data batch sets config key
/// `k<offset>` of the cluster-default broker resource to `e<epoch>` per record, so the image
/// shows which epoch's data it holds; a control batch holds opaque bytes.
pub fn batch(base: u64, count: u32, epoch: u64, control: bool) -> Batch {
    let payload: Vec<u8> = if control {
        vec![0xc0; 8]
    } else {
        let records: Vec<MetadataRecord> = (0..u64::from(count))
            .map(|i| {
                MetadataRecord::Config(ConfigRecordV1 {
                    resource_type: ConfigResourceType::Broker,
                    resource_name: String::new(),
                    key: format!("k{}", base + i),
                    value: Some(format!("e{epoch}")),
                })
            })
            .collect();
        encode_batch(&records).to_vec()
    };
    Batch {
        base_offset: LogOffset(base),
        epoch: Epoch(epoch),
        record_count: count,
        control,
        timestamp_ms: -1,
        payload: payload.into(),
    }
}
