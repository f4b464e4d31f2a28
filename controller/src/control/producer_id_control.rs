//! AllocateProducerIds: hands a broker the next block of producer ids (Kafka's blocks of 1000).
//! The block is taken from the image including in-flight proposals, so two requests in flight
//! never get overlapping blocks.

use corum_types::{BrokerEpoch, NodeId};

use super::{ControllerResult, View};
use crate::error::ApiError;
use crate::records::{MetadataRecord, ProducerIdsRecordV1};

#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AllocateProducerIdsRequest {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
}

/// The ids `first_producer_id .. first_producer_id + count` now belong to the broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AllocateProducerIdsResponse {
    pub first_producer_id: u64,
    pub count: u64,
}

pub(crate) fn allocate_producer_ids(
    view: View<'_>,
    req: &AllocateProducerIdsRequest,
) -> Result<ControllerResult<AllocateProducerIdsResponse>, ApiError> {
    let reg = view
        .image
        .brokers
        .get(req.broker_id)
        .ok_or(ApiError::BrokerIdNotRegistered {
            broker_id: req.broker_id,
        })?;
    if reg.broker_epoch != req.broker_epoch {
        return Err(ApiError::StaleBrokerEpoch {
            broker_id: req.broker_id,
            current: reg.broker_epoch,
            request: req.broker_epoch,
        });
    }
    let first = view.image.producer_ids.next_producer_id;
    let count = view.config.producer_id_block_size;
    // Producer ids are int64 on the wire: stop before the sign bit.
    let next = first
        .checked_add(count)
        .filter(|n| *n <= i64::MAX as u64)
        .ok_or(ApiError::InvalidRequest {
            reason: "producer ids exhausted".into(),
        })?;
    Ok(ControllerResult::new(
        vec![MetadataRecord::ProducerIds(ProducerIdsRecordV1 {
            broker_id: req.broker_id,
            broker_epoch: req.broker_epoch,
            next_producer_id: next,
        })],
        AllocateProducerIdsResponse {
            first_producer_id: first,
            count,
        },
    ))
}
