//! Control managers, one per domain (Kafka's `*ControlManager`s). Each turns a request into
//! records and a response by reading a `View` of the image; none of them mutates anything.
//! Shared types: [`RequestContext`] (inputs every handler gets) and [`ControllerResult`].
//!
//! Reads are pure functions of one image, gathered in [`ImageReads`]: the active controller
//! answers them from its image with in-flight records ([`crate::Controller`]'s read methods),
//! and any node, active or not, may answer them from its committed image
//! ([`crate::Controller::committed_reads`]), as Kafka's brokers answer Metadata,
//! DescribeCluster, DescribeConfigs and ApiVersions from the image they replayed.
//!
//! Every public request and response type (and [`crate::ApiError`]) derives rkyv, so the node's RPC
//! protocol (`corum-protocol`) sends them as they are. Their field and variant order is
//! therefore a wire format: add fields only in a new request version, append enum variants only.

pub mod acl_control;
pub mod cluster_control;
pub mod config_control;
pub mod feature_control;
pub(crate) mod partition_change;
pub mod producer_id_control;
pub mod replication_control;
pub mod scram_control;
#[cfg(test)]
pub(crate) mod test_harness;

use corum_types::{LogOffset, NodeId};

use crate::config::ControllerConfig;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

use cluster_control::{DescribeClusterResponse, DescribeControllersResponse};
use config_control::{DescribeConfigsRequest, DescribeConfigsResponse};
use feature_control::DescribeFeaturesResponse;
use replication_control::{
    DescribeTopicsRequest, DescribeTopicsResponse, DescribeTopicsV2Response,
};

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

/// The reads of one image: each a pure function of it (no records, no state). See the module
/// doc for which image a node reads.
#[derive(Clone, Copy)]
pub struct ImageReads<'a> {
    image: &'a MetadataImage,
    /// The controller's settings (static broker defaults shown by DescribeConfigs).
    config: &'a ControllerConfig,
}

impl<'a> ImageReads<'a> {
    pub fn new(image: &'a MetadataImage, config: &'a ControllerConfig) -> ImageReads<'a> {
        ImageReads { image, config }
    }

    /// The image these reads answer from.
    pub fn image(&self) -> &'a MetadataImage {
        self.image
    }

    /// Topics and their partitions (Kafka's Metadata).
    pub fn describe_topics(&self, req: &DescribeTopicsRequest) -> DescribeTopicsResponse {
        replication_control::describe_topics(self.image, req)
    }

    /// Topics and their partitions with their eligible leader replicas (Kafka's
    /// DescribeTopicPartitions).
    pub fn describe_topics_v2(&self, req: &DescribeTopicsRequest) -> DescribeTopicsV2Response {
        replication_control::describe_topics_v2(self.image, req)
    }

    /// Every controller registration (KIP-919: DescribeCluster for endpoint type controller).
    pub fn describe_controllers(&self) -> DescribeControllersResponse {
        cluster_control::describe_controllers(self.image)
    }

    /// Finalized features with their epoch, and the supported ranges (ApiVersions).
    pub fn describe_features(&self) -> DescribeFeaturesResponse {
        feature_control::describe_features(self.image)
    }

    /// Configs of the requested resources.
    pub fn describe_configs(&self, req: &DescribeConfigsRequest) -> DescribeConfigsResponse {
        config_control::describe_configs(self.image, self.config, req)
    }

    /// The ACLs passing a filter (Kafka's DescribeAcls).
    pub fn describe_acls(
        &self,
        req: &acl_control::DescribeAclsRequest,
    ) -> Result<acl_control::DescribeAclsResponse, crate::ApiError> {
        acl_control::describe_acls(&self.image.acls, req)
    }

    /// SCRAM credentials of users (Kafka's DescribeUserScramCredentials).
    pub fn describe_user_scram_credentials(
        &self,
        req: &scram_control::DescribeUserScramCredentialsRequest,
    ) -> scram_control::DescribeUserScramCredentialsResponse {
        scram_control::describe_user_scram_credentials(&self.image.scram, req)
    }

    /// Brokers and counts, naming `controller_id` as the active controller.
    pub fn describe_cluster(&self, controller_id: NodeId) -> DescribeClusterResponse {
        cluster_control::describe_cluster(self.image, controller_id)
    }
}
