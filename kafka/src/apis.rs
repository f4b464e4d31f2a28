//! Which Kafka APIs a corum listener serves, at which versions: every version the codec crate
//! knows for each API listed in [`SERVED`]. ApiVersions advertises exactly this table, and
//! [`crate::request::parse`] refuses anything outside it.

use kafka_protocol::messages::{ApiKey, RequestKind};

/// The APIs a corum Kafka listener serves, each at every version the codec supports.
pub const SERVED: &[ApiKey] = &[
    ApiKey::Metadata,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::CreatePartitions,
    ApiKey::ElectLeaders,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeQuorum,
    ApiKey::UpdateFeatures,
    ApiKey::DescribeCluster,
    ApiKey::DescribeTopicPartitions,
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
    ApiKey::UpdateRaftVoter,
    ApiKey::Fetch,
    ApiKey::FetchSnapshot,
    ApiKey::BrokerRegistration,
    ApiKey::BrokerHeartbeat,
    ApiKey::UnregisterBroker,
    ApiKey::AllocateProducerIds,
    ApiKey::ListPartitionReassignments,
    ApiKey::Envelope,
    ApiKey::AlterPartition,
    ApiKey::AssignReplicasToDirs,
    ApiKey::SaslHandshake,
    ApiKey::SaslAuthenticate,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
];

/// The oldest version of `api` served: SaslHandshake v0 (Kafka 0.10's raw SASL tokens after
/// the handshake) is not, only v1, which SaslAuthenticate follows.
fn min_served(api: ApiKey) -> i16 {
    match api {
        ApiKey::SaslHandshake => 1,
        _ => 0,
    }
}

/// A table of served APIs and their version ranges, sorted by API key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedApis {
    entries: Vec<(ApiKey, i16, i16)>,
}

impl ServedApis {
    /// The APIs of [`SERVED`], each at the codec's whole range.
    pub fn controller() -> ServedApis {
        ServedApis::of(SERVED)
    }

    /// The given APIs at the codec's whole range.
    pub fn of(apis: &[ApiKey]) -> ServedApis {
        let mut entries: Vec<(ApiKey, i16, i16)> = apis
            .iter()
            .map(|&api| {
                let range = api.valid_versions();
                (api, range.min.max(min_served(api)), range.max)
            })
            .collect();
        entries.sort_by_key(|&(api, _, _)| api as i16);
        entries.dedup_by_key(|e| e.0);
        ServedApis { entries }
    }

    /// The served versions of `api`, `None` when it is not served.
    pub fn range(&self, api: ApiKey) -> Option<(i16, i16)> {
        self.entries
            .iter()
            .find(|e| e.0 == api)
            .map(|&(_, min, max)| (min, max))
    }

    /// Every served API with its range, by API key.
    pub fn iter(&self) -> impl Iterator<Item = (ApiKey, i16, i16)> + '_ {
        self.entries.iter().copied()
    }
}

/// A request of `api` with every field at the codec's default, for each API of [`SERVED`]
/// (`None` for any other): what the tests and the fuzz corpus start from.
pub fn default_request(api: ApiKey) -> Option<RequestKind> {
    use kafka_protocol::messages::*;
    Some(match api {
        ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::CreateTopics => RequestKind::CreateTopics(CreateTopicsRequest::default()),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(DeleteTopicsRequest::default()),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(DescribeConfigsRequest::default()),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(AlterConfigsRequest::default()),
        ApiKey::CreatePartitions => {
            RequestKind::CreatePartitions(CreatePartitionsRequest::default())
        }
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(ElectLeadersRequest::default()),
        ApiKey::IncrementalAlterConfigs => {
            RequestKind::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default())
        }
        ApiKey::DescribeQuorum => RequestKind::DescribeQuorum(DescribeQuorumRequest::default()),
        ApiKey::UpdateFeatures => RequestKind::UpdateFeatures(UpdateFeaturesRequest::default()),
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(DescribeClusterRequest::default()),
        ApiKey::DescribeTopicPartitions => {
            RequestKind::DescribeTopicPartitions(DescribeTopicPartitionsRequest::default())
        }
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(DescribeAclsRequest::default()),
        ApiKey::CreateAcls => RequestKind::CreateAcls(CreateAclsRequest::default()),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(DeleteAclsRequest::default()),
        ApiKey::AddRaftVoter => RequestKind::AddRaftVoter(AddRaftVoterRequest::default()),
        ApiKey::RemoveRaftVoter => RequestKind::RemoveRaftVoter(RemoveRaftVoterRequest::default()),
        ApiKey::UpdateRaftVoter => RequestKind::UpdateRaftVoter(UpdateRaftVoterRequest::default()),
        ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default()),
        ApiKey::FetchSnapshot => RequestKind::FetchSnapshot(FetchSnapshotRequest::default()),
        ApiKey::BrokerRegistration => {
            RequestKind::BrokerRegistration(BrokerRegistrationRequest::default())
        }
        ApiKey::BrokerHeartbeat => RequestKind::BrokerHeartbeat(BrokerHeartbeatRequest::default()),
        ApiKey::UnregisterBroker => {
            RequestKind::UnregisterBroker(UnregisterBrokerRequest::default())
        }
        ApiKey::AllocateProducerIds => {
            RequestKind::AllocateProducerIds(AllocateProducerIdsRequest::default())
        }
        ApiKey::ListPartitionReassignments => {
            RequestKind::ListPartitionReassignments(ListPartitionReassignmentsRequest::default())
        }
        ApiKey::Envelope => RequestKind::Envelope(EnvelopeRequest::default()),
        ApiKey::AlterPartition => RequestKind::AlterPartition(AlterPartitionRequest::default()),
        ApiKey::AssignReplicasToDirs => {
            RequestKind::AssignReplicasToDirs(AssignReplicasToDirsRequest::default())
        }
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(SaslHandshakeRequest::default()),
        ApiKey::SaslAuthenticate => {
            RequestKind::SaslAuthenticate(SaslAuthenticateRequest::default())
        }
        ApiKey::DescribeUserScramCredentials => {
            RequestKind::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest::default())
        }
        ApiKey::AlterUserScramCredentials => {
            RequestKind::AlterUserScramCredentials(AlterUserScramCredentialsRequest::default())
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_each_served_api_at_the_codecs_range() {
        let served = ServedApis::controller();
        assert_eq!(served.iter().count(), SERVED.len());
        assert_eq!(served.range(ApiKey::ApiVersions), Some((0, 4)));
        assert_eq!(served.range(ApiKey::Metadata), Some((0, 13)));
        assert_eq!(served.range(ApiKey::Produce), None);
        for api in [
            ApiKey::AddRaftVoter,
            ApiKey::RemoveRaftVoter,
            ApiKey::UpdateRaftVoter,
        ] {
            let v = api.valid_versions();
            assert_eq!(served.range(api), Some((v.min, v.max)), "{api:?}");
        }
        let keys: Vec<i16> = served.iter().map(|(k, _, _)| k as i16).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted, "ApiVersions lists keys in order");
        for &api in SERVED {
            assert!(
                default_request(api).is_some(),
                "{api:?} has no default request"
            );
        }
        assert!(default_request(ApiKey::Produce).is_none());
    }
}
