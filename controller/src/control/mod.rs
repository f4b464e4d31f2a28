//! Control managers, one per domain (Kafka's `*ControlManager`s). Each turns a request into
//! records and a response by reading a `View` of the image; none of them mutates anything.
//! Shared types: [`RequestContext`] (inputs every handler gets) and [`ControllerResult`].
//!
//! Every public request and response type (and [`crate::ApiError`]) derives rkyv, so the node's RPC
//! protocol (`corum-protocol`) sends them as they are. Their field and variant order is
//! therefore a wire format: add fields only in a new request version, append enum variants only.

pub mod cluster_control;
pub mod config_control;
pub mod feature_control;
pub mod producer_id_control;
pub mod replication_control;

use corum_types::LogOffset;

use crate::config::ControllerConfig;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

pub use cluster_control::Leases;

/// What the driver tells every handler about the moment the request is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestContext {
    /// Monotonic time of the request's arrival, in milliseconds (never wall-clock time).
    pub now_ms: u64,
    /// The offset the first returned record will get: the log end offset including every batch
    /// already proposed and not yet committed. Broker epochs are derived from it.
    pub next_offset: LogOffset,
    /// The high watermark (commit offset, exclusive) the driver last learned; a broker whose
    /// NextMetadataOffset reaches it is caught up.
    pub high_watermark: LogOffset,
}

/// Records to propose (as one batch, in order) and the response to send once they are committed.
/// An empty `records` means nothing to commit: the response may be sent at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerResult<R> {
    pub records: Vec<MetadataRecord>,
    pub response: R,
}

impl<R> ControllerResult<R> {
    pub fn new(records: Vec<MetadataRecord>, response: R) -> Self {
        ControllerResult { records, response }
    }
}

/// The read-only state a handler sees.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub config: &'a ControllerConfig,
    /// Committed records plus this controller's in-flight proposals.
    pub image: &'a MetadataImage,
    /// Committed records only.
    pub committed: &'a MetadataImage,
    pub leases: &'a Leases,
}
