//! Producer-id blocks: the next unassigned producer id. Blocks are handed out in increasing order,
//! so the image only needs the high-water mark.

use corum_types::{BrokerEpoch, LogOffset, NodeId};

use crate::error::ReplayError;

/// The next producer id to hand out, and who got the last block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProducerIdsImage {
    pub next_producer_id: u64,
    pub last_block_owner: Option<(NodeId, BrokerEpoch)>,
}

impl ProducerIdsImage {
    pub(crate) fn replay(
        &mut self,
        offset: LogOffset,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
        next: u64,
    ) -> Result<(), ReplayError> {
        if next <= self.next_producer_id {
            return Err(ReplayError::ProducerIdsBackwards {
                offset,
                current: self.next_producer_id,
                record: next,
            });
        }
        self.next_producer_id = next;
        self.last_block_owner = Some((broker_id, broker_epoch));
        Ok(())
    }
}
