//! Request builders shared by the node tests' harness and the process tests of corum-tools
//! (which include this file by path).

use corum_controller::control::cluster_control::BrokerHeartbeatRequest;
use corum_controller::records::ListenerV1;
use corum_node::RequestBody;
use corum_types::{BrokerEpoch, LogOffset, NodeId, Uuid};

/// A heartbeat of broker `id` at broker epoch `epoch` (`None` registers it), having
/// replayed up to `next`.
pub fn heartbeat(id: u32, epoch: Option<BrokerEpoch>, next: LogOffset) -> RequestBody {
    RequestBody::BrokerHeartbeat(BrokerHeartbeatRequest {
        broker_id: NodeId(id),
        broker_epoch: epoch,
        incarnation_id: Uuid([id as u8; 16]),
        listeners: vec![ListenerV1 {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9092,
        }],
        features: corum_controller::control::feature_control::supported_features(),
        rack: None,
        next_metadata_offset: next,
        want_fence: false,
        want_shutdown: false,
    })
}
