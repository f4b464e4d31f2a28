//! The envelope brokers and admins send over the runtime's framed TCP transport, carrying the
//! controller's own request and response types as-is (they derive rkyv in `corum-controller`;
//! there are no duplicate wire structs).
//!
//! # Frames
//!
//! One transport frame holds one rkyv-archived [`RequestFrame`] or [`ResponseFrame`]. A client
//! may pipeline requests on a connection; the server answers each with the request's
//! `correlation_id`, possibly out of order (a read is answered at once, a write when its records
//! are committed).
//!
//! | side     | root             | fields                                                     |
//! |----------|------------------|------------------------------------------------------------|
//! | request  | [`RequestFrame`]  | `correlation_id: u64`, `timeout_ms: u32`, `body: RequestBody` |
//! | response | [`ResponseFrame`] | `correlation_id: u64`, `body: Result<ResponseBody, RpcError>` |
//!
//! Byte layout (rkyv 0.8, little-endian, 8-byte aligned buffer, as for record batches): the
//! out-of-line data (strings, vectors) first, the root struct last. The root's first field is
//! `correlation_id` (archived structs are `repr(C)`), so [`peek_correlation_id`] can read it from
//! a frame that fails validation and the server can answer `Malformed` to the right request.
//!
//! # Validation and limits
//!
//! [`decode_request`] / [`decode_response`] check the size limit first (a frame above
//! `socket.request.max.bytes` is [`ProtocolError::TooLarge`]; the server answers
//! [`RpcError::RequestTooLarge`]), then alignment, then every byte with bytecheck (relative
//! pointers, lengths, UTF-8, enum tags, bools). Only then is a frame handed on, as a zero-copy
//! `&Archived…` view; [`RequestFrame::from_archived`] makes the owned request a handler takes.
//!
//! # Versioning and extension
//!
//! rkyv archives an enum as its variant index followed by the variant's fields, so **the variant
//! order of [`RequestBody`], [`ResponseBody`] and [`RpcError`] is the wire format**: variants are
//! only ever appended. A peer that sends a variant this build does not know fails validation and
//! gets `Malformed`. The golden test (`testdata/protocol_v1.golden`) pins the bytes of a few
//! frames so an accidental layout change fails: each extension appends its own lines (the
//! first frames, then the Raft RPCs, then the distinct [`RpcError`] variants after
//! `Malformed`/`Api`, ..., last the authorization refusals), and no older line ever changes — with one exception so far: the
//! fetch answer's line changed when [`corum_raft::Batch`] gained its append time
//! (`timestamp_ms`, for Kafka brokers' lag metrics), so clients of earlier builds cannot read
//! fetch answers of this one (nor it theirs).
//!
//! An archived enum is as large as its largest variant, and the root struct holds it inline, so
//! a new variant larger than every old one would change the bytes (padding) of every old frame.
//! New variants therefore carry large payloads in a `Box` (archived as a 4-byte relative
//! pointer); the golden file's old lines never change.
//!
//! Before a first release, the Raft bodies (the `corum-raft` types below) have changed their
//! layout twice with KIP-853 (#15), each time rewriting their golden line on purpose:
//! DescribeQuorum's voters gained their endpoints, and a FetchSnapshot chunk its snapshot's
//! `kraft_version`. After a release such a change needs a new variant instead.
//!
//! # Raft RPCs (appended after `DescribeCluster`)
//!
//! | request | response | for |
//! |---|---|---|
//! | `DescribeQuorum` | [`DescribeQuorumResponse`] | `corum quorum describe --status/--replication` |
//! | `Fetch(corum_raft FetchRequest)` | `Fetch(Box<FetchResponse>)` | observers following the log (long-poll) |
//! | `FetchSnapshot(FetchSnapshotRequest)` | `FetchSnapshot(Box<FetchSnapshotResponse>)` | observers behind the log start |
//! | `AddVoter` / `RemoveVoter` / `UpdateVoter` | `VoterChangeResponse` each | KIP-853 voter changes |
//!
//! Fetch and voter-change bodies are `corum-raft`'s own message types: the server steps
//! `Message::Fetch(req)` into the Raft core from `req.replica.id` and answers with the
//! `FetchResponse` the core addresses to that id. rkyv validation checks their bytes; a client
//! also calls [`ResponseBody::validate_raft`] on a decoded response to apply the Raft crate's
//! own rules ([`corum_raft::Message::validate`]: contiguous batches, sorted voter sets).
//!
//! # What the Kafka listener needs (appended after `UpdateVoter`)
//!
//! | request | response | Kafka API it serves |
//! |---|---|---|
//! | `RegisterController(RegisterControllerRequest)` | `RegisterController` | ControllerRegistration (KIP-919) |
//! | `DescribeControllers` | `DescribeControllers(DescribeControllersResponse)` | DescribeCluster with endpoint type controller |
//! | `DescribeTopics(DescribeTopicsRequest)` | `DescribeTopics(DescribeTopicsResponse)` | Metadata, DescribeTopicPartitions |
//! | `DescribeFeatures` | `DescribeFeatures(DescribeFeaturesResponse)` | ApiVersions' feature fields, DescribeFeatures |
//! | `DeleteTopicsV2(DeleteTopicsV2Request)` | `DeleteTopicsV2(DeleteTopicsV2Response)` | DeleteTopics v6 (topics by name or id) |
//! | `LocalRead(Box<LocalRead>)` | the read's own response | any of the reads above, at any node |
//! | `AlterConfigs(AlterConfigsRequest)` | `AlterConfigs(AlterConfigsResponse)` | AlterConfigs (the legacy whole-resource replace) |
//! | `CreateTopicsWithConfigs(CreateTopicsRequest)` | `CreateTopicsWithConfigs(CreateTopicsWithConfigsResponse)` | CreateTopics v5+ (answers carry each new topic's configs) |
//!
//! # What Kafka's brokers need (appended after `CreateTopicsWithConfigs`)
//!
//! | request | response | Kafka API it serves |
//! |---|---|---|
//! | `RegisterBroker(Box<BrokerRegistrationRequest>)` | `RegisterBroker(BrokerRegistrationResponse)` | BrokerRegistration (endpoints with security protocols, log directories) |
//! | `AlterPartition(AlterPartitionRequest)` | `AlterPartition(AlterPartitionResponse)` | AlterPartition v2-v3 (KIP-903 member epochs, leader recovery state) |
//! | `AssignReplicasToDirs(AssignReplicasToDirsRequest)` | `AssignReplicasToDirs(AssignReplicasToDirsResponse)` | AssignReplicasToDirs (KIP-858) |
//!
//! Kafka's BrokerHeartbeat is `BrokerHeartbeat` with an epoch (its answer's target state gives
//! Kafka's `IsFenced` and `ShouldShutDown`). The registration is boxed (it is larger than every
//! older request); `BrokerHeartbeat` without an epoch and `AlterIsr` stay for corum's older
//! clients and are served by the same handlers. New `ApiError` variants (InvalidRegistration,
//! NotReplica, UnsupportedVersion) are appended after `InvalidRequest`.
//!
//! # Eligible leader replicas (appended after `AssignReplicasToDirs`)
//!
//! | request | response | Kafka API it serves |
//! |---|---|---|
//! | `DescribeTopicsV2(DescribeTopicsRequest)`, also as `LocalRead::DescribeTopicsV2` | `DescribeTopicsV2(DescribeTopicsV2Response)`: DescribeTopics' answer with each partition's eligible leader replicas and last known ELR (KIP-966) | DescribeTopicPartitions |
//!
//! BrokerRegistration's `previous_broker_epoch` became an enum whose first two variants archive
//! as the `Option` it was (`None`, `Some(epoch)`), with a third appended: old frames read the
//! same.
//!
//! # ACLs (appended after `DescribeTopicsV2`)
//!
//! | request | response | Kafka API it serves |
//! |---|---|---|
//! | `CreateAcls(CreateAclsRequest)` | `CreateAcls(CreateAclsResponse)`: one result per ACL | CreateAcls |
//! | `DeleteAcls(DeleteAclsRequest)` | `DeleteAcls(DeleteAclsResponse)`: the ACLs each filter removed | DeleteAcls |
//! | `DescribeAcls(Box<DescribeAclsRequest>)`, also as `LocalRead::DescribeAcls` | `DescribeAcls(DescribeAclsResponse)` | DescribeAcls |
//!
//! The private listener does not authorize: it serves corum's own tools, and has no
//! principal until mutual TLS gives its connections one.
//!
//! # SCRAM credentials (appended after `DescribeAcls`)
//!
//! | request | response | Kafka API it serves |
//! |---|---|---|
//! | `AlterUserScramCredentials(AlterUserScramCredentialsRequest)` | `AlterUserScramCredentials(AlterUserScramCredentialsResponse)`: one result per user, Kafka's codes | AlterUserScramCredentials |
//! | `DescribeUserScramCredentials(DescribeUserScramCredentialsRequest)`, also as `LocalRead::DescribeUserScramCredentials` | `DescribeUserScramCredentials(DescribeUserScramCredentialsResponse)` | DescribeUserScramCredentials |
//!
//! # Where a request is answered
//!
//! Every request but the Raft ones ([`RequestBody::is_raft`]) is the active controller's: a
//! write is proposed there, a read sees its records in flight and is answered once they are
//! committed, and any other node answers `NotController` naming the leader. A
//! [`RequestBody::LocalRead`] ([`RequestBody::is_local_read`]) is the exception, for clients
//! that, like Kafka's, send reads to whichever node they reach: the active controller serves
//! it like the same read sent alone, and any other node answers it at once from the image it
//! replayed (every committed batch it has learned of: it may lag the leader's by the time the
//! commit takes to reach it). corum's own tools keep sending the plain reads, so that a read
//! after an acknowledged write sees it.

use corum_controller::control::acl_control::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use corum_controller::control::cluster_control::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse, DescribeClusterResponse, DescribeControllersResponse,
    RegisterControllerRequest, UnregisterBrokerRequest,
};
use corum_controller::control::config_control::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use corum_controller::control::feature_control::{
    DescribeFeaturesResponse, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use corum_controller::control::producer_id_control::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse,
};
use corum_controller::control::replication_control::{
    AlterIsrRequest, AlterIsrResponse, AlterPartitionRequest, AlterPartitionResponse,
    AssignReplicasToDirsRequest, AssignReplicasToDirsResponse, CreatePartitionsRequest,
    CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    CreateTopicsWithConfigsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DeleteTopicsV2Request, DeleteTopicsV2Response, DescribeTopicsRequest, DescribeTopicsResponse,
    DescribeTopicsV2Response, ElectLeadersRequest, ElectLeadersResponse,
};
use corum_controller::control::scram_control::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use corum_raft::message::{
    AddVoterRequest, FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse,
    RemoveVoterRequest, UpdateVoterRequest, VoterChangeResponse,
};
use rkyv::rancor;
use rkyv::util::AlignedVec;

use crate::describe_quorum::DescribeQuorumResponse;
use crate::error::ProtocolError;
use crate::rpc_error::RpcError;

/// A request to the controller.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct RequestFrame {
    /// Chosen by the client; echoed in the response.
    pub correlation_id: u64,
    /// How long the client will wait: the server answers [`RpcError::Timeout`] rather than
    /// commit later than this. 0 means the server's `controller.quorum.request.timeout.ms`.
    pub timeout_ms: u32,
    pub body: RequestBody,
}

/// Every request kind. Append new variants at the end only (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum RequestBody {
    BrokerHeartbeat(BrokerHeartbeatRequest),
    UnregisterBroker(UnregisterBrokerRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    CreatePartitions(CreatePartitionsRequest),
    AlterIsr(AlterIsrRequest),
    ElectLeaders(ElectLeadersRequest),
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    DescribeConfigs(DescribeConfigsRequest),
    UpdateFeatures(UpdateFeaturesRequest),
    AllocateProducerIds(AllocateProducerIdsRequest),
    DescribeCluster,
    DescribeQuorum,
    Fetch(FetchRequest),
    FetchSnapshot(FetchSnapshotRequest),
    AddVoter(AddVoterRequest),
    RemoveVoter(RemoveVoterRequest),
    UpdateVoter(UpdateVoterRequest),
    /// A controller registers itself (KIP-919); an unchanged registration writes nothing.
    RegisterController(RegisterControllerRequest),
    DescribeControllers,
    DescribeTopics(DescribeTopicsRequest),
    DescribeFeatures,
    /// DeleteTopics naming topics by name or by id.
    DeleteTopicsV2(DeleteTopicsV2Request),
    /// A read any node answers (see the module doc).
    LocalRead(Box<LocalRead>),
    /// Kafka's legacy AlterConfigs: each resource's dynamic configs replaced as a whole.
    AlterConfigs(AlterConfigsRequest),
    /// CreateTopics whose answers also describe each new topic's configs, as DescribeConfigs
    /// would once it exists (Kafka's CreateTopics v5+ returns them).
    CreateTopicsWithConfigs(CreateTopicsRequest),
    /// A broker registers (Kafka's BrokerRegistration).
    RegisterBroker(Box<BrokerRegistrationRequest>),
    /// A partition leader changes ISRs and leader recovery states (Kafka's AlterPartition).
    AlterPartition(AlterPartitionRequest),
    /// A broker names the log directory of its replicas (Kafka's AssignReplicasToDirs).
    AssignReplicasToDirs(AssignReplicasToDirsRequest),
    /// DescribeTopics with each partition's eligible leader replicas (Kafka's
    /// DescribeTopicPartitions).
    DescribeTopicsV2(DescribeTopicsRequest),
    /// ACLs created (Kafka's CreateAcls).
    CreateAcls(CreateAclsRequest),
    /// ACLs deleted by filters (Kafka's DeleteAcls).
    DeleteAcls(DeleteAclsRequest),
    /// The ACLs passing a filter (Kafka's DescribeAcls).
    DescribeAcls(Box<DescribeAclsRequest>),
    /// Users' SCRAM credentials set and removed (Kafka's AlterUserScramCredentials).
    AlterUserScramCredentials(AlterUserScramCredentialsRequest),
    /// Users' SCRAM mechanisms and iterations (Kafka's DescribeUserScramCredentials).
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest),
}

/// The reads any node answers from the image it replayed, each the same read as the
/// [`RequestBody`] variant of its name, answered with that variant's response. Append new
/// variants at the end only.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum LocalRead {
    /// Its `controller_id` is the Raft leader the answering node knows; a node that knows none
    /// answers `NotController` without a hint.
    DescribeCluster,
    DescribeConfigs(DescribeConfigsRequest),
    DescribeTopics(DescribeTopicsRequest),
    DescribeControllers,
    DescribeFeatures,
    DescribeTopicsV2(DescribeTopicsRequest),
    DescribeAcls(Box<DescribeAclsRequest>),
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest),
}

impl LocalRead {
    /// The read's name (that of the [`RequestBody`] variant it reads like).
    pub fn kind(&self) -> &'static str {
        match self {
            LocalRead::DescribeCluster => "DescribeCluster",
            LocalRead::DescribeConfigs(_) => "DescribeConfigs",
            LocalRead::DescribeTopics(_) => "DescribeTopics",
            LocalRead::DescribeControllers => "DescribeControllers",
            LocalRead::DescribeFeatures => "DescribeFeatures",
            LocalRead::DescribeTopicsV2(_) => "DescribeTopicsV2",
            LocalRead::DescribeAcls(_) => "DescribeAcls",
            LocalRead::DescribeUserScramCredentials(_) => "DescribeUserScramCredentials",
        }
    }
}

/// The response to one request.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ResponseFrame {
    pub correlation_id: u64,
    pub body: Result<ResponseBody, RpcError>,
}

/// Every response kind, one per [`RequestBody`] variant, in the same order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum ResponseBody {
    BrokerHeartbeat(BrokerHeartbeatResponse),
    UnregisterBroker,
    CreateTopics(CreateTopicsResponse),
    DeleteTopics(DeleteTopicsResponse),
    CreatePartitions(CreatePartitionsResponse),
    AlterIsr(AlterIsrResponse),
    ElectLeaders(ElectLeadersResponse),
    IncrementalAlterConfigs(IncrementalAlterConfigsResponse),
    DescribeConfigs(DescribeConfigsResponse),
    UpdateFeatures(UpdateFeaturesResponse),
    AllocateProducerIds(AllocateProducerIdsResponse),
    DescribeCluster(DescribeClusterResponse),
    DescribeQuorum(Box<DescribeQuorumResponse>),
    Fetch(Box<FetchResponse>),
    FetchSnapshot(Box<FetchSnapshotResponse>),
    AddVoter(VoterChangeResponse),
    RemoveVoter(VoterChangeResponse),
    UpdateVoter(VoterChangeResponse),
    RegisterController,
    DescribeControllers(DescribeControllersResponse),
    DescribeTopics(DescribeTopicsResponse),
    DescribeFeatures(DescribeFeaturesResponse),
    DeleteTopicsV2(DeleteTopicsV2Response),
    AlterConfigs(AlterConfigsResponse),
    CreateTopicsWithConfigs(CreateTopicsWithConfigsResponse),
    RegisterBroker(BrokerRegistrationResponse),
    AlterPartition(AlterPartitionResponse),
    AssignReplicasToDirs(AssignReplicasToDirsResponse),
    DescribeTopicsV2(DescribeTopicsV2Response),
    CreateAcls(CreateAclsResponse),
    DeleteAcls(DeleteAclsResponse),
    DescribeAcls(DescribeAclsResponse),
    AlterUserScramCredentials(AlterUserScramCredentialsResponse),
    DescribeUserScramCredentials(DescribeUserScramCredentialsResponse),
}

impl RequestBody {
    /// The request's name, for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            RequestBody::BrokerHeartbeat(_) => "BrokerHeartbeat",
            RequestBody::UnregisterBroker(_) => "UnregisterBroker",
            RequestBody::CreateTopics(_) => "CreateTopics",
            RequestBody::DeleteTopics(_) => "DeleteTopics",
            RequestBody::CreatePartitions(_) => "CreatePartitions",
            RequestBody::AlterIsr(_) => "AlterIsr",
            RequestBody::ElectLeaders(_) => "ElectLeaders",
            RequestBody::IncrementalAlterConfigs(_) => "IncrementalAlterConfigs",
            RequestBody::DescribeConfigs(_) => "DescribeConfigs",
            RequestBody::UpdateFeatures(_) => "UpdateFeatures",
            RequestBody::AllocateProducerIds(_) => "AllocateProducerIds",
            RequestBody::DescribeCluster => "DescribeCluster",
            RequestBody::DescribeQuorum => "DescribeQuorum",
            RequestBody::Fetch(_) => "Fetch",
            RequestBody::FetchSnapshot(_) => "FetchSnapshot",
            RequestBody::AddVoter(_) => "AddVoter",
            RequestBody::RemoveVoter(_) => "RemoveVoter",
            RequestBody::UpdateVoter(_) => "UpdateVoter",
            RequestBody::RegisterController(_) => "RegisterController",
            RequestBody::DescribeControllers => "DescribeControllers",
            RequestBody::DescribeTopics(_) => "DescribeTopics",
            RequestBody::DescribeFeatures => "DescribeFeatures",
            RequestBody::DeleteTopicsV2(_) => "DeleteTopicsV2",
            RequestBody::LocalRead(read) => read.kind(),
            RequestBody::AlterConfigs(_) => "AlterConfigs",
            RequestBody::CreateTopicsWithConfigs(_) => "CreateTopicsWithConfigs",
            RequestBody::RegisterBroker(_) => "RegisterBroker",
            RequestBody::AlterPartition(_) => "AlterPartition",
            RequestBody::AssignReplicasToDirs(_) => "AssignReplicasToDirs",
            RequestBody::DescribeTopicsV2(_) => "DescribeTopicsV2",
            RequestBody::CreateAcls(_) => "CreateAcls",
            RequestBody::DeleteAcls(_) => "DeleteAcls",
            RequestBody::DescribeAcls(_) => "DescribeAcls",
            RequestBody::AlterUserScramCredentials(_) => "AlterUserScramCredentials",
            RequestBody::DescribeUserScramCredentials(_) => "DescribeUserScramCredentials",
        }
    }

    /// Whether any node answers this request from the image it replayed, whether it is the
    /// active controller or not: [`RequestBody::LocalRead`] (see the module doc). The node's
    /// service answers these while inactive; a listener that forwards writes to the active
    /// controller serves these where they arrive.
    pub fn is_local_read(&self) -> bool {
        matches!(self, RequestBody::LocalRead(_))
    }

    /// Whether the Raft layer serves this request (DescribeQuorum, Fetch, FetchSnapshot and the
    /// voter changes) rather than the controller state machine (the node's `dispatch`).
    pub fn is_raft(&self) -> bool {
        matches!(
            self,
            RequestBody::DescribeQuorum
                | RequestBody::Fetch(_)
                | RequestBody::FetchSnapshot(_)
                | RequestBody::AddVoter(_)
                | RequestBody::RemoveVoter(_)
                | RequestBody::UpdateVoter(_)
        )
    }
}

impl ResponseBody {
    /// The name of the request this answers (equal to [`RequestBody::kind`] of that request).
    pub fn kind(&self) -> &'static str {
        match self {
            ResponseBody::BrokerHeartbeat(_) => "BrokerHeartbeat",
            ResponseBody::UnregisterBroker => "UnregisterBroker",
            ResponseBody::CreateTopics(_) => "CreateTopics",
            ResponseBody::DeleteTopics(_) => "DeleteTopics",
            ResponseBody::CreatePartitions(_) => "CreatePartitions",
            ResponseBody::AlterIsr(_) => "AlterIsr",
            ResponseBody::ElectLeaders(_) => "ElectLeaders",
            ResponseBody::IncrementalAlterConfigs(_) => "IncrementalAlterConfigs",
            ResponseBody::DescribeConfigs(_) => "DescribeConfigs",
            ResponseBody::UpdateFeatures(_) => "UpdateFeatures",
            ResponseBody::AllocateProducerIds(_) => "AllocateProducerIds",
            ResponseBody::DescribeCluster(_) => "DescribeCluster",
            ResponseBody::DescribeQuorum(_) => "DescribeQuorum",
            ResponseBody::Fetch(_) => "Fetch",
            ResponseBody::FetchSnapshot(_) => "FetchSnapshot",
            ResponseBody::AddVoter(_) => "AddVoter",
            ResponseBody::RemoveVoter(_) => "RemoveVoter",
            ResponseBody::UpdateVoter(_) => "UpdateVoter",
            ResponseBody::RegisterController => "RegisterController",
            ResponseBody::DescribeControllers(_) => "DescribeControllers",
            ResponseBody::DescribeTopics(_) => "DescribeTopics",
            ResponseBody::DescribeFeatures(_) => "DescribeFeatures",
            ResponseBody::DeleteTopicsV2(_) => "DeleteTopicsV2",
            ResponseBody::AlterConfigs(_) => "AlterConfigs",
            ResponseBody::CreateTopicsWithConfigs(_) => "CreateTopicsWithConfigs",
            ResponseBody::RegisterBroker(_) => "RegisterBroker",
            ResponseBody::AlterPartition(_) => "AlterPartition",
            ResponseBody::AssignReplicasToDirs(_) => "AssignReplicasToDirs",
            ResponseBody::DescribeTopicsV2(_) => "DescribeTopicsV2",
            ResponseBody::CreateAcls(_) => "CreateAcls",
            ResponseBody::DeleteAcls(_) => "DeleteAcls",
            ResponseBody::DescribeAcls(_) => "DescribeAcls",
            ResponseBody::AlterUserScramCredentials(_) => "AlterUserScramCredentials",
            ResponseBody::DescribeUserScramCredentials(_) => "DescribeUserScramCredentials",
        }
    }

    /// The Raft crate's rules beyond rkyv's validation ([`corum_raft::Message::validate`]),
    /// for the Raft bodies (a fetch response's batches continue the log from its fetch offset
    /// and are non-empty; a snapshot chunk's voter set is sorted and unique). Other bodies
    /// pass. A client calls this on every decoded response before handing a body to its Raft
    /// core.
    pub fn validate_raft(&self) -> Result<(), ProtocolError> {
        match self {
            ResponseBody::Fetch(r) => r.validate(),
            ResponseBody::FetchSnapshot(r) => r.validate(),
            _ => Ok(()),
        }
        .map_err(ProtocolError::Raft)
    }
}

impl RequestFrame {
    /// The owned request of a validated frame (handlers take owned requests).
    pub fn from_archived(archived: &ArchivedRequestFrame) -> RequestFrame {
        rkyv::deserialize::<RequestFrame, rancor::Error>(archived)
            .expect("deserializing a validated archive into owned values cannot fail")
    }
}

impl ResponseFrame {
    /// The owned response of a validated frame.
    pub fn from_archived(archived: &ArchivedResponseFrame) -> ResponseFrame {
        rkyv::deserialize::<ResponseFrame, rancor::Error>(archived)
            .expect("deserializing a validated archive into owned values cannot fail")
    }
}

/// An encoded frame: rkyv bytes in a 16-byte aligned buffer, ready for the transport.
pub type EncodedFrame = AlignedVec;

fn encode<T>(value: &T, max_bytes: usize) -> Result<EncodedFrame, ProtocolError>
where
    T: for<'a> rkyv::Serialize<
        rkyv::api::high::HighSerializer<
            AlignedVec,
            rkyv::ser::allocator::ArenaHandle<'a>,
            rancor::Error,
        >,
    >,
{
    let bytes = rkyv::to_bytes::<rancor::Error>(value).map_err(|e| ProtocolError::Encode {
        reason: e.to_string(),
    })?;
    if bytes.len() > max_bytes {
        return Err(ProtocolError::TooLarge {
            len_bytes: bytes.len(),
            max_bytes,
        });
    }
    Ok(bytes)
}

fn check_frame<T>(bytes: &[u8], max_bytes: usize) -> Result<(), ProtocolError> {
    if bytes.len() > max_bytes {
        return Err(ProtocolError::TooLarge {
            len_bytes: bytes.len(),
            max_bytes,
        });
    }
    if bytes.len() < std::mem::size_of::<T>() {
        return Err(ProtocolError::Truncated {
            len_bytes: bytes.len(),
        });
    }
    let align = std::mem::align_of::<T>();
    if (bytes.as_ptr() as usize) % align != 0 {
        return Err(ProtocolError::Misaligned {
            address: bytes.as_ptr() as usize,
            align,
        });
    }
    Ok(())
}

/// Encodes a request; fails if it is above `max_bytes`.
pub fn encode_request(
    frame: &RequestFrame,
    max_bytes: usize,
) -> Result<EncodedFrame, ProtocolError> {
    encode(frame, max_bytes)
}

/// Encodes a response; fails if it is above `max_bytes`.
pub fn encode_response(
    frame: &ResponseFrame,
    max_bytes: usize,
) -> Result<EncodedFrame, ProtocolError> {
    encode(frame, max_bytes)
}

/// Validates untrusted bytes as a request and returns a zero-copy view. Never panics.
pub fn decode_request(
    bytes: &[u8],
    max_bytes: usize,
) -> Result<&ArchivedRequestFrame, ProtocolError> {
    check_frame::<ArchivedRequestFrame>(bytes, max_bytes)?;
    rkyv::access::<ArchivedRequestFrame, rancor::Error>(bytes).map_err(|e| ProtocolError::Invalid {
        reason: e.to_string(),
    })
}

/// Validates untrusted bytes as a response and returns a zero-copy view. Never panics.
pub fn decode_response(
    bytes: &[u8],
    max_bytes: usize,
) -> Result<&ArchivedResponseFrame, ProtocolError> {
    check_frame::<ArchivedResponseFrame>(bytes, max_bytes)?;
    rkyv::access::<ArchivedResponseFrame, rancor::Error>(bytes).map_err(|e| {
        ProtocolError::Invalid {
            reason: e.to_string(),
        }
    })
}

/// The correlation id of a request frame that may fail validation, read from the root's fixed
/// position (the last `size_of::<ArchivedRequestFrame>()` bytes), so a `Malformed` answer can
/// name the request it answers. `None` if the frame is too short to hold a root.
pub fn peek_correlation_id(bytes: &[u8]) -> Option<u64> {
    let root = bytes
        .len()
        .checked_sub(std::mem::size_of::<ArchivedRequestFrame>())?;
    let at = root + std::mem::offset_of!(ArchivedRequestFrame, correlation_id);
    let b: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// The error a server answers for a request frame that failed [`decode_request`].
pub fn rpc_error_for(err: &ProtocolError) -> RpcError {
    match err {
        ProtocolError::TooLarge {
            len_bytes,
            max_bytes,
        } => RpcError::RequestTooLarge {
            len_bytes: *len_bytes as u64,
            max_bytes: *max_bytes as u64,
        },
        other => RpcError::Malformed {
            reason: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_controller::acl::{AclBindingV1, AclFilterV1};
    use corum_controller::config_schema::ConfigType;
    use corum_controller::control::cluster_control::{
        DescribedBroker, DescribedController, PreviousBrokerEpoch, TargetState,
    };
    use corum_controller::control::config_control::{
        AlterConfigOp, AlterConfigsResource, AlterableConfig, ConfigSource, ConfigSynonym,
        DescribedConfig, ReplacedConfigs,
    };
    use corum_controller::control::feature_control::{FeatureUpdate, FinalizedFeatureLevel};
    use corum_controller::control::replication_control::{
        AlterPartitionTopic, AlterPartitionTopicResult, AlteredPartition, CreatableTopic,
        CreatedTopic, CreatedTopicWithConfigs, DeletedTopic, DescribedPartition,
        DescribedPartitionV2, DescribedTopic, DescribedTopicV2, DirectoryAssignment,
        DirectoryAssignmentResult, ElectionType, IsrMember, IsrUpdate, IsrUpdated,
        PartitionAlteration, PartitionsIncrease, TopicPartitionResults, TopicPartitions, TopicRef,
    };
    use corum_controller::image::ConfigResource;
    use corum_controller::records::{
        BrokerEndpointV1, ConfigResourceType, ControllerEndpointV1, LeaderRecoveryState,
        ListenerV1, SupportedFeatureV1,
    };
    use corum_controller::{ApiError, LeaderEpoch, PartitionEpoch, PartitionId, TopicId};
    use corum_raft::message::{FetchResult, FetchSnapshotResult};
    use corum_raft::{Batch, Endpoint, ReplicaKey, SnapshotId, Voter, VoterChangeError, VoterSet};
    use corum_types::{BrokerEpoch, Epoch, LogOffset, NodeId, Uuid};
    use proptest::prelude::*;

    use crate::describe_quorum::ReplicaState;
    use crate::rpc_error::LeaderHint;

    const MAX: usize = 1 << 20;

    fn arb_name() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._\u{e9}-]{0,12}"
    }

    fn arb_nodes() -> impl Strategy<Value = Vec<NodeId>> {
        proptest::collection::vec(any::<u32>().prop_map(NodeId), 0..4)
    }

    fn arb_resource() -> impl Strategy<Value = ConfigResource> {
        (any::<bool>(), arb_name()).prop_map(|(topic, name)| ConfigResource {
            resource_type: if topic {
                ConfigResourceType::Topic
            } else {
                ConfigResourceType::Broker
            },
            name,
        })
    }

    fn arb_body() -> impl Strategy<Value = RequestBody> {
        let heartbeat = (
            any::<u32>(),
            proptest::option::of(any::<u64>()),
            any::<u128>(),
            proptest::collection::vec((arb_name(), arb_name(), any::<u16>()), 0..3),
            proptest::collection::vec((arb_name(), any::<u16>(), any::<u16>()), 0..3),
            proptest::option::of(arb_name()),
            any::<u64>(),
            any::<(bool, bool)>(),
        )
            .prop_map(|(id, epoch, inc, ls, fs, rack, off, (f, s))| {
                RequestBody::BrokerHeartbeat(BrokerHeartbeatRequest {
                    broker_id: NodeId(id),
                    broker_epoch: epoch.map(BrokerEpoch),
                    incarnation_id: Uuid(inc.to_be_bytes()),
                    listeners: ls
                        .into_iter()
                        .map(|(name, host, port)| ListenerV1 { name, host, port })
                        .collect(),
                    features: fs
                        .into_iter()
                        .map(|(name, min_level, max_level)| SupportedFeatureV1 {
                            name,
                            min_level,
                            max_level,
                        })
                        .collect(),
                    rack,
                    next_metadata_offset: LogOffset(off),
                    want_fence: f,
                    want_shutdown: s,
                })
            });
        let create = (
            proptest::collection::vec(
                (
                    arb_name(),
                    any::<i32>(),
                    any::<i16>(),
                    proptest::collection::vec(arb_nodes(), 0..3),
                    proptest::collection::vec((arb_name(), arb_name()), 0..3),
                ),
                0..4,
            ),
            any::<bool>(),
        )
            .prop_map(|(ts, validate_only)| {
                RequestBody::CreateTopics(CreateTopicsRequest {
                    topics: ts
                        .into_iter()
                        .map(|(name, n, rf, assignments, configs)| CreatableTopic {
                            name,
                            num_partitions: n,
                            replication_factor: rf,
                            assignments,
                            configs,
                        })
                        .collect(),
                    validate_only,
                })
            });
        let partitions = (
            proptest::collection::vec(
                (
                    arb_name(),
                    any::<u32>(),
                    proptest::collection::vec(arb_nodes(), 0..3),
                ),
                0..3,
            ),
            any::<bool>(),
        )
            .prop_map(|(ts, validate_only)| {
                RequestBody::CreatePartitions(CreatePartitionsRequest {
                    topics: ts
                        .into_iter()
                        .map(|(name, count, assignments)| PartitionsIncrease {
                            name,
                            count,
                            assignments,
                        })
                        .collect(),
                    validate_only,
                })
            });
        let alter_isr = (
            any::<u32>(),
            any::<u64>(),
            proptest::collection::vec(
                (
                    any::<u128>(),
                    any::<u32>(),
                    any::<u32>(),
                    any::<u32>(),
                    arb_nodes(),
                ),
                0..3,
            ),
        )
            .prop_map(|(b, e, ps)| {
                RequestBody::AlterIsr(AlterIsrRequest {
                    broker_id: NodeId(b),
                    broker_epoch: BrokerEpoch(e),
                    partitions: ps
                        .into_iter()
                        .map(|(t, p, le, pe, isr)| IsrUpdate {
                            topic_id: TopicId(Uuid(t.to_be_bytes())),
                            partition_id: PartitionId(p),
                            leader_epoch: LeaderEpoch(le),
                            partition_epoch: PartitionEpoch(pe),
                            new_isr: isr,
                        })
                        .collect(),
                })
            });
        let elect = (
            any::<bool>(),
            proptest::option::of(proptest::collection::vec(
                (arb_name(), any::<u32>().prop_map(PartitionId)),
                0..3,
            )),
        )
            .prop_map(|(preferred, partitions)| {
                RequestBody::ElectLeaders(ElectLeadersRequest {
                    election_type: if preferred {
                        ElectionType::Preferred
                    } else {
                        ElectionType::Unclean
                    },
                    partitions,
                })
            });
        let alter_configs = (
            proptest::collection::vec(
                (
                    arb_resource(),
                    proptest::collection::vec((arb_name(), 0u8..4, arb_name()), 0..3),
                ),
                0..3,
            ),
            any::<bool>(),
        )
            .prop_map(|(rs, validate_only)| {
                RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
                    resources: rs
                        .into_iter()
                        .map(|(resource, cs)| AlterConfigsResource {
                            resource,
                            configs: cs
                                .into_iter()
                                .map(|(key, op, value)| AlterableConfig {
                                    key,
                                    op: [
                                        AlterConfigOp::Set,
                                        AlterConfigOp::Delete,
                                        AlterConfigOp::Append,
                                        AlterConfigOp::Subtract,
                                    ][op as usize],
                                    value,
                                })
                                .collect(),
                        })
                        .collect(),
                    validate_only,
                })
            });
        let features = (
            proptest::collection::vec(
                (arb_name(), any::<u16>(), any::<u16>(), any::<bool>()),
                0..3,
            ),
            any::<bool>(),
        )
            .prop_map(|(us, validate_only)| {
                RequestBody::UpdateFeatures(UpdateFeaturesRequest {
                    updates: us
                        .into_iter()
                        .map(
                            |(name, min_level, max_level, allow_downgrade)| FeatureUpdate {
                                name,
                                min_level,
                                max_level,
                                allow_downgrade,
                            },
                        )
                        .collect(),
                    validate_only,
                })
            });
        prop_oneof![
            heartbeat,
            any::<u32>().prop_map(|b| RequestBody::UnregisterBroker(UnregisterBrokerRequest {
                broker_id: NodeId(b)
            })),
            create,
            proptest::collection::vec(arb_name(), 0..4)
                .prop_map(|names| RequestBody::DeleteTopics(DeleteTopicsRequest { names })),
            partitions,
            alter_isr,
            elect,
            alter_configs,
            proptest::collection::vec(arb_resource(), 0..3).prop_map(|resources| {
                RequestBody::DescribeConfigs(DescribeConfigsRequest::all(resources))
            }),
            features,
            (any::<u32>(), any::<u64>()).prop_map(|(b, e)| RequestBody::AllocateProducerIds(
                AllocateProducerIdsRequest {
                    broker_id: NodeId(b),
                    broker_epoch: BrokerEpoch(e)
                }
            )),
            Just(RequestBody::DescribeCluster),
            arb_raft_request(),
            arb_listener_request(),
            arb_broker_request(),
        ]
    }

    /// The requests appended for Kafka's brokers.
    fn arb_broker_request() -> impl Strategy<Value = RequestBody> {
        let uuid = || any::<u128>().prop_map(|u| Uuid(u.to_be_bytes()));
        let register = (
            any::<u32>(),
            uuid(),
            proptest::collection::vec((arb_name(), arb_name(), any::<u16>(), any::<i16>()), 0..3),
            proptest::option::of(arb_name()),
            proptest::collection::vec(uuid(), 0..3),
            (0..3u8, any::<u64>()),
        )
            .prop_map(
                |(id, incarnation_id, es, rack, log_dirs, (previous, epoch))| {
                    RequestBody::RegisterBroker(Box::new(BrokerRegistrationRequest {
                        broker_id: NodeId(id),
                        incarnation_id,
                        endpoints: es
                            .into_iter()
                            .map(|(name, host, port, security_protocol)| BrokerEndpointV1 {
                                name,
                                host,
                                port,
                                security_protocol,
                            })
                            .collect(),
                        features: vec![],
                        rack,
                        log_dirs,
                        previous_broker_epoch: match previous {
                            0 => PreviousBrokerEpoch::Unnamed,
                            1 => PreviousBrokerEpoch::Epoch(BrokerEpoch(epoch)),
                            _ => PreviousBrokerEpoch::NotSent,
                        },
                    }))
                },
            );
        let alter = (
            any::<u32>(),
            any::<u64>(),
            proptest::collection::vec(
                (
                    uuid(),
                    proptest::collection::vec(
                        (
                            any::<u32>(),
                            any::<u32>(),
                            proptest::collection::vec(
                                (any::<u32>(), proptest::option::of(any::<u64>())),
                                0..3,
                            ),
                            any::<bool>(),
                            any::<u32>(),
                        ),
                        0..3,
                    ),
                ),
                0..3,
            ),
        )
            .prop_map(|(b, e, topics)| {
                RequestBody::AlterPartition(AlterPartitionRequest {
                    broker_id: NodeId(b),
                    broker_epoch: BrokerEpoch(e),
                    topics: topics
                        .into_iter()
                        .map(|(t, ps)| AlterPartitionTopic {
                            topic_id: TopicId(t),
                            partitions: ps
                                .into_iter()
                                .map(|(p, le, isr, recovering, pe)| PartitionAlteration {
                                    partition_id: PartitionId(p),
                                    leader_epoch: LeaderEpoch(le),
                                    new_isr_with_epochs: isr
                                        .into_iter()
                                        .map(|(b, e)| IsrMember {
                                            broker_id: NodeId(b),
                                            broker_epoch: e.map(BrokerEpoch),
                                        })
                                        .collect(),
                                    leader_recovery_state: if recovering {
                                        LeaderRecoveryState::Recovering
                                    } else {
                                        LeaderRecoveryState::Recovered
                                    },
                                    partition_epoch: PartitionEpoch(pe),
                                })
                                .collect(),
                        })
                        .collect(),
                })
            });
        let assign = (
            any::<u32>(),
            any::<u64>(),
            proptest::collection::vec(
                (
                    uuid(),
                    proptest::collection::vec(
                        (uuid(), proptest::collection::vec(any::<u32>(), 0..3)),
                        0..3,
                    ),
                ),
                0..3,
            ),
        )
            .prop_map(|(b, e, dirs)| {
                RequestBody::AssignReplicasToDirs(AssignReplicasToDirsRequest {
                    broker_id: NodeId(b),
                    broker_epoch: BrokerEpoch(e),
                    directories: dirs
                        .into_iter()
                        .map(|(directory_id, topics)| DirectoryAssignment {
                            directory_id,
                            topics: topics
                                .into_iter()
                                .map(|(t, ps)| TopicPartitions {
                                    topic_id: TopicId(t),
                                    partitions: ps.into_iter().map(PartitionId).collect(),
                                })
                                .collect(),
                        })
                        .collect(),
                })
            });
        prop_oneof![register, alter, assign]
    }

    fn arb_topic_ref() -> impl Strategy<Value = TopicRef> {
        prop_oneof![
            arb_name().prop_map(TopicRef::Name),
            any::<u128>().prop_map(|t| TopicRef::Id(TopicId(Uuid(t.to_be_bytes())))),
        ]
    }

    fn arb_topic_refs() -> impl Strategy<Value = Option<Vec<TopicRef>>> {
        proptest::option::of(proptest::collection::vec(arb_topic_ref(), 0..4))
    }

    /// The requests appended for the Kafka listener.
    fn arb_listener_request() -> impl Strategy<Value = RequestBody> {
        let register = (
            any::<u32>(),
            any::<u128>(),
            proptest::collection::vec((arb_name(), arb_name(), any::<u16>(), any::<i16>()), 0..3),
            proptest::collection::vec((arb_name(), any::<u16>(), any::<u16>()), 0..3),
        )
            .prop_map(|(id, inc, es, fs)| {
                RequestBody::RegisterController(RegisterControllerRequest {
                    controller_id: NodeId(id),
                    incarnation_id: Uuid(inc.to_be_bytes()),
                    end_points: es
                        .into_iter()
                        .map(
                            |(name, host, port, security_protocol)| ControllerEndpointV1 {
                                name,
                                host,
                                port,
                                security_protocol,
                            },
                        )
                        .collect(),
                    features: fs
                        .into_iter()
                        .map(|(name, min_level, max_level)| SupportedFeatureV1 {
                            name,
                            min_level,
                            max_level,
                        })
                        .collect(),
                })
            });
        let local = prop_oneof![
            Just(LocalRead::DescribeCluster),
            proptest::collection::vec(arb_resource(), 0..3).prop_map(|resources| {
                LocalRead::DescribeConfigs(DescribeConfigsRequest::all(resources))
            }),
            arb_topic_refs()
                .prop_map(|topics| LocalRead::DescribeTopics(DescribeTopicsRequest { topics })),
            Just(LocalRead::DescribeControllers),
            Just(LocalRead::DescribeFeatures),
            arb_topic_refs()
                .prop_map(|topics| LocalRead::DescribeTopicsV2(DescribeTopicsRequest { topics })),
        ]
        .prop_map(|read| RequestBody::LocalRead(Box::new(read)));
        prop_oneof![
            register,
            Just(RequestBody::DescribeControllers),
            arb_topic_refs()
                .prop_map(|topics| RequestBody::DescribeTopics(DescribeTopicsRequest { topics })),
            arb_topic_refs()
                .prop_map(|topics| RequestBody::DescribeTopicsV2(DescribeTopicsRequest { topics })),
            Just(RequestBody::DescribeFeatures),
            proptest::collection::vec(arb_topic_ref(), 0..4)
                .prop_map(|topics| RequestBody::DeleteTopicsV2(DeleteTopicsV2Request { topics })),
            local,
            proptest::collection::vec(arb_acl(), 0..4)
                .prop_map(|creations| RequestBody::CreateAcls(CreateAclsRequest { creations })),
            proptest::collection::vec(arb_acl_filter(), 0..4)
                .prop_map(|filters| RequestBody::DeleteAcls(DeleteAclsRequest { filters })),
            arb_acl_filter().prop_map(|filter| RequestBody::DescribeAcls(Box::new(
                DescribeAclsRequest { filter }
            ))),
        ]
    }

    /// Any ACL as the wire carries it (codes unchecked: the controller validates them).
    fn arb_acl() -> impl Strategy<Value = AclBindingV1> {
        (any::<[i8; 4]>(), arb_name(), arb_name(), arb_name()).prop_map(
            |(c, resource_name, principal, host)| AclBindingV1 {
                resource_type: c[0],
                resource_name,
                pattern_type: c[1],
                principal,
                host,
                operation: c[2],
                permission_type: c[3],
            },
        )
    }

    fn arb_acl_filter() -> impl Strategy<Value = AclFilterV1> {
        (
            any::<[i8; 4]>(),
            proptest::option::of(arb_name()),
            proptest::option::of(arb_name()),
            proptest::option::of(arb_name()),
        )
            .prop_map(|(c, resource_name, principal, host)| AclFilterV1 {
                resource_type: c[0],
                resource_name,
                pattern_type: c[1],
                principal,
                host,
                operation: c[2],
                permission_type: c[3],
            })
    }

    fn key(id: u32, dir: u8) -> ReplicaKey {
        ReplicaKey {
            id: NodeId(id),
            directory_id: Uuid([dir; 16]),
        }
    }

    fn voter(id: u32, dir: u8, host: &str, port: u16) -> Voter {
        Voter {
            key: key(id, dir),
            endpoints: vec![Endpoint {
                listener: "CONTROLLER".into(),
                host: host.into(),
                port,
            }],
        }
    }

    fn arb_raft_request() -> impl Strategy<Value = RequestBody> {
        prop_oneof![
            Just(RequestBody::DescribeQuorum),
            (
                any::<u64>(),
                any::<u32>(),
                any::<u8>(),
                any::<u64>(),
                any::<u64>()
            )
                .prop_map(|(e, id, dir, off, wait)| RequestBody::Fetch(FetchRequest {
                    epoch: Epoch(e),
                    replica: key(id, dir),
                    fetch_offset: LogOffset(off),
                    last_fetched_epoch: Epoch(e / 2),
                    high_watermark: LogOffset(off / 2),
                    wait_max_ms: wait,
                })),
            (any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(e, id, pos)| {
                RequestBody::FetchSnapshot(FetchSnapshotRequest {
                    epoch: Epoch(e),
                    replica: key(id, 0),
                    snapshot: SnapshotId {
                        end_offset: LogOffset(pos),
                        epoch: Epoch(e),
                    },
                    position: pos,
                })
            }),
            (any::<u64>(), any::<u32>(), arb_name(), any::<u16>()).prop_map(
                |(r, id, host, port)| RequestBody::AddVoter(AddVoterRequest {
                    request_id: r,
                    voter: voter(id, 1, &host, port),
                })
            ),
            (any::<u64>(), any::<u32>()).prop_map(|(r, id)| RequestBody::RemoveVoter(
                RemoveVoterRequest {
                    request_id: r,
                    voter: key(id, 2),
                }
            )),
            (any::<u64>(), any::<u32>(), arb_name()).prop_map(|(r, id, host)| {
                RequestBody::UpdateVoter(UpdateVoterRequest {
                    request_id: r,
                    voter: voter(id, 3, &host, 9093),
                })
            }),
        ]
    }

    /// Fetch responses with batches that continue the log from `start` when `gap` is false,
    /// and skip an offset when it is true.
    fn fetch_response(start: u64, sizes: &[usize], gap: bool, hwm: u64) -> ResponseBody {
        let mut at = LogOffset(start);
        let batches = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let b = Batch {
                    base_offset: if gap && i == 1 { at.add(1) } else { at },
                    epoch: Epoch(2),
                    record_count: 1 + (n % 4) as u32,
                    control: i == 0,
                    timestamp_ms: -1,
                    payload: vec![i as u8; n].into(),
                };
                at = b.end_offset();
                b
            })
            .collect();
        ResponseBody::Fetch(Box::new(FetchResponse {
            epoch: Epoch(2),
            leader: Some(NodeId(1)),
            result: FetchResult::Batches {
                fetch_offset: LogOffset(start),
                last_fetched_epoch: Epoch(1),
                batches,
                high_watermark: LogOffset(hwm),
            },
        }))
    }

    fn describe_quorum() -> DescribeQuorumResponse {
        DescribeQuorumResponse {
            cluster_id: Uuid([0x5a; 16]),
            node_id: NodeId(1),
            leader_id: Some(NodeId(1)),
            leader_epoch: Epoch(4),
            high_watermark: LogOffset(120),
            voters: vec![
                ReplicaState {
                    replica_id: NodeId(1),
                    directory_id: Some(Uuid([1; 16])),
                    log_end_offset: Some(LogOffset(121)),
                    lag: Some(0),
                    last_fetch_age_ms: Some(0),
                    last_caught_up_age_ms: Some(0),
                    endpoints: vec![corum_raft::Endpoint {
                        listener: "CONTROLLER".into(),
                        host: "10.0.0.1".into(),
                        port: 9093,
                    }],
                },
                ReplicaState {
                    replica_id: NodeId(2),
                    directory_id: None,
                    log_end_offset: Some(LogOffset(100)),
                    lag: Some(21),
                    last_fetch_age_ms: Some(12),
                    last_caught_up_age_ms: Some(250),
                    endpoints: Vec::new(),
                },
                ReplicaState {
                    replica_id: NodeId(3),
                    directory_id: None,
                    log_end_offset: None,
                    lag: None,
                    last_fetch_age_ms: None,
                    last_caught_up_age_ms: None,
                    endpoints: Vec::new(),
                },
            ],
            observers: vec![ReplicaState {
                replica_id: NodeId(100),
                directory_id: Some(Uuid([100; 16])),
                log_end_offset: Some(LogOffset(120)),
                lag: Some(1),
                last_fetch_age_ms: Some(3),
                last_caught_up_age_ms: Some(3),
                endpoints: Vec::new(),
            }],
        }
    }

    /// One response of each Raft body kind.
    fn one_of_each_raft_response_body() -> Vec<ResponseBody> {
        vec![
            ResponseBody::DescribeQuorum(Box::new(describe_quorum())),
            fetch_response(40, &[3, 0, 17], false, 44),
            ResponseBody::FetchSnapshot(Box::new(FetchSnapshotResponse {
                epoch: Epoch(2),
                leader: Some(NodeId(1)),
                result: FetchSnapshotResult::Chunk {
                    kraft_version: 1,
                    snapshot: SnapshotId {
                        end_offset: LogOffset(500),
                        epoch: Epoch(2),
                    },
                    voters: VoterSet::new(vec![
                        voter(1, 1, "10.0.0.1", 9093),
                        voter(2, 2, "10.0.0.2", 9093),
                    ])
                    .unwrap(),
                    size_total: 4096,
                    position: 1024,
                    bytes: vec![7u8; 33].into(),
                },
            })),
            ResponseBody::AddVoter(VoterChangeResponse {
                request_id: 1,
                result: Ok(()),
                leader: Some(NodeId(1)),
            }),
            ResponseBody::RemoveVoter(VoterChangeResponse {
                request_id: 2,
                result: Err(VoterChangeError::ChangePending),
                leader: Some(NodeId(1)),
            }),
            ResponseBody::UpdateVoter(VoterChangeResponse {
                request_id: 3,
                result: Err(VoterChangeError::NotLeader),
                leader: None,
            }),
        ]
    }

    fn arb_request() -> impl Strategy<Value = RequestFrame> {
        (any::<u64>(), any::<u32>(), arb_body()).prop_map(|(correlation_id, timeout_ms, body)| {
            RequestFrame {
                correlation_id,
                timeout_ms,
                body,
            }
        })
    }

    /// Frames whose bytes are pinned by the golden file, covering each RpcError variant and a
    /// few bodies.
    fn golden_frames() -> (Vec<RequestFrame>, Vec<ResponseFrame>) {
        let topic = TopicId(Uuid([0x11; 16]));
        let requests = vec![
            RequestFrame {
                correlation_id: 1,
                timeout_ms: 5_000,
                body: RequestBody::BrokerHeartbeat(BrokerHeartbeatRequest {
                    broker_id: NodeId(7),
                    broker_epoch: None,
                    incarnation_id: Uuid([0x22; 16]),
                    listeners: vec![ListenerV1 {
                        name: "PLAINTEXT".into(),
                        host: "10.0.0.7".into(),
                        port: 9092,
                    }],
                    features: vec![SupportedFeatureV1 {
                        name: "metadata.version".into(),
                        min_level: 1,
                        max_level: 3,
                    }],
                    rack: Some("r1".into()),
                    next_metadata_offset: LogOffset(42),
                    want_fence: false,
                    want_shutdown: false,
                }),
            },
            RequestFrame {
                correlation_id: 2,
                timeout_ms: 0,
                body: RequestBody::CreateTopics(CreateTopicsRequest {
                    topics: vec![CreatableTopic::new("orders", 3, 2)],
                    validate_only: false,
                }),
            },
            RequestFrame {
                correlation_id: 3,
                timeout_ms: 100,
                body: RequestBody::DescribeCluster,
            },
        ];
        let responses = vec![
            ResponseFrame {
                correlation_id: 1,
                body: Ok(ResponseBody::BrokerHeartbeat(BrokerHeartbeatResponse {
                    broker_epoch: BrokerEpoch(42),
                    target_state: TargetState::Fenced,
                    lease_duration_ms: 9_000,
                    is_caught_up: false,
                })),
            },
            ResponseFrame {
                correlation_id: 2,
                body: Ok(ResponseBody::CreateTopics(CreateTopicsResponse {
                    topics: vec![
                        (
                            "orders".into(),
                            Ok(CreatedTopic {
                                topic_id: topic,
                                num_partitions: 3,
                                replication_factor: 2,
                            }),
                        ),
                        (
                            "bad/name".into(),
                            Err(ApiError::InvalidTopicName {
                                name: "bad/name".into(),
                                reason: "illegal character".into(),
                            }),
                        ),
                    ],
                })),
            },
            ResponseFrame {
                correlation_id: 3,
                body: Ok(ResponseBody::DescribeCluster(DescribeClusterResponse {
                    controller_id: NodeId(1),
                    brokers: vec![DescribedBroker {
                        broker_id: NodeId(7),
                        broker_epoch: BrokerEpoch(42),
                        listeners: vec![],
                        rack: None,
                        fenced: true,
                        in_controlled_shutdown: false,
                    }],
                    topic_count: 1,
                    partition_count: 3,
                })),
            },
            ResponseFrame {
                correlation_id: 4,
                body: Err(RpcError::NotController {
                    leader: Some(LeaderHint {
                        id: NodeId(2),
                        host: "127.0.0.1".into(),
                        port: 9094,
                    }),
                }),
            },
            ResponseFrame {
                correlation_id: 5,
                body: Err(RpcError::NotController { leader: None }),
            },
            ResponseFrame {
                correlation_id: 6,
                body: Err(RpcError::RequestTooLarge {
                    len_bytes: 2_000_000,
                    max_bytes: 1_048_576,
                }),
            },
            ResponseFrame {
                correlation_id: 7,
                body: Err(RpcError::Timeout { timeout_ms: 2_000 }),
            },
            ResponseFrame {
                correlation_id: 8,
                body: Err(RpcError::Malformed {
                    reason: "bad tag".into(),
                }),
            },
            ResponseFrame {
                correlation_id: 9,
                body: Err(RpcError::Api(ApiError::StaleBrokerEpoch {
                    broker_id: NodeId(7),
                    current: BrokerEpoch(50),
                    request: BrokerEpoch(42),
                })),
            },
        ];
        (requests, responses)
    }

    /// Frames of the Raft RPCs pinned by the golden file (after the first ones).
    fn golden_raft_frames() -> (Vec<RequestFrame>, Vec<ResponseFrame>) {
        let requests = vec![
            RequestFrame {
                correlation_id: 101,
                timeout_ms: 1_000,
                body: RequestBody::DescribeQuorum,
            },
            RequestFrame {
                correlation_id: 102,
                timeout_ms: 0,
                body: RequestBody::Fetch(FetchRequest {
                    epoch: Epoch(4),
                    replica: key(100, 0x64),
                    fetch_offset: LogOffset(120),
                    last_fetched_epoch: Epoch(4),
                    high_watermark: LogOffset(120),
                    wait_max_ms: 500,
                }),
            },
            RequestFrame {
                correlation_id: 103,
                timeout_ms: 0,
                body: RequestBody::FetchSnapshot(FetchSnapshotRequest {
                    epoch: Epoch(4),
                    replica: key(100, 0x64),
                    snapshot: SnapshotId {
                        end_offset: LogOffset(500),
                        epoch: Epoch(2),
                    },
                    position: 1024,
                }),
            },
            RequestFrame {
                correlation_id: 104,
                timeout_ms: 30_000,
                body: RequestBody::AddVoter(AddVoterRequest {
                    request_id: 1,
                    voter: voter(4, 4, "10.0.0.4", 9093),
                }),
            },
            RequestFrame {
                correlation_id: 105,
                timeout_ms: 30_000,
                body: RequestBody::RemoveVoter(RemoveVoterRequest {
                    request_id: 2,
                    voter: key(3, 3),
                }),
            },
            RequestFrame {
                correlation_id: 106,
                timeout_ms: 30_000,
                body: RequestBody::UpdateVoter(UpdateVoterRequest {
                    request_id: 3,
                    voter: voter(2, 2, "10.0.0.22", 9094),
                }),
            },
        ];
        let responses = one_of_each_raft_response_body()
            .into_iter()
            .zip(101..)
            .map(|(body, correlation_id)| ResponseFrame {
                correlation_id,
                body: Ok(body),
            })
            .collect();
        (requests, responses)
    }

    /// Frames of the distinct whole-request errors pinned by the golden file (after the Raft
    /// RPCs): one response per [`RpcError`] variant appended after `Api`.
    fn golden_error_frames() -> Vec<ResponseFrame> {
        crate::rpc_error::tests::one_of_each()
            .into_iter()
            .skip_while(|e| !matches!(e, RpcError::Api(_)))
            .skip(1)
            // Appended later, with the authorization frames (`golden_authorization_frames`).
            .take_while(|e| !matches!(e, RpcError::AuthorizationFailed(_)))
            .zip(201..)
            .map(|(e, correlation_id)| ResponseFrame {
                correlation_id,
                body: Err(e),
            })
            .collect()
    }

    /// The authorization refusals pinned by the golden file (last): a whole request refused
    /// (`RpcError::AuthorizationFailed`), and a CreateTopics answer with one topic refused
    /// (`ApiError::AuthorizationFailed`) beside one created.
    fn golden_authorization_frames() -> Vec<ResponseFrame> {
        let whole = crate::rpc_error::tests::one_of_each()
            .into_iter()
            .find(|e| matches!(e, RpcError::AuthorizationFailed(_)))
            .expect("one_of_each lists AuthorizationFailed");
        vec![
            ResponseFrame {
                correlation_id: 301,
                body: Err(whole),
            },
            ResponseFrame {
                correlation_id: 302,
                body: Ok(ResponseBody::CreateTopics(CreateTopicsResponse {
                    topics: vec![
                        (
                            "secret".into(),
                            Err(ApiError::AuthorizationFailed(tenant_may_not_create(
                                "secret",
                            ))),
                        ),
                        (
                            "open".into(),
                            Ok(CreatedTopic {
                                topic_id: TopicId(Uuid([0x31; 16])),
                                num_partitions: 1,
                                replication_factor: 3,
                            }),
                        ),
                    ],
                })),
            },
        ]
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The bytes of a few frames are pinned by `testdata/protocol_v1.golden`; set
    /// `CORUM_REWRITE=1` to regenerate it after an intended change and review the diff.
    #[test]
    fn golden_bytes() {
        let (requests, responses) = golden_frames();
        let mut text = String::from(
            "# corum controller protocol v1: one frame per line, `kind correlation_id hex`.\n",
        );
        for r in &requests {
            let b = encode_request(r, MAX).unwrap();
            text.push_str(&format!("request {} {}\n", r.correlation_id, hex(&b)));
        }
        for r in &responses {
            let b = encode_response(r, MAX).unwrap();
            text.push_str(&format!("response {} {}\n", r.correlation_id, hex(&b)));
        }
        // The Raft RPCs, appended after the first frames so their lines never moved.
        let (requests, responses) = golden_raft_frames();
        for r in &requests {
            let b = encode_request(r, MAX).unwrap();
            text.push_str(&format!("request {} {}\n", r.correlation_id, hex(&b)));
        }
        for r in &responses {
            let b = encode_response(r, MAX).unwrap();
            text.push_str(&format!("response {} {}\n", r.correlation_id, hex(&b)));
        }
        // The distinct errors after `Api`, appended after the Raft RPCs.
        for r in &golden_error_frames() {
            let b = encode_response(r, MAX).unwrap();
            text.push_str(&format!("response {} {}\n", r.correlation_id, hex(&b)));
        }
        // The Kafka listener's requests and responses, appended after the errors.
        let (requests, responses) = golden_listener_frames();
        for r in &requests {
            let b = encode_request(r, MAX).unwrap();
            text.push_str(&format!("request {} {}\n", r.correlation_id, hex(&b)));
        }
        for r in &responses {
            let b = encode_response(r, MAX).unwrap();
            text.push_str(&format!("response {} {}\n", r.correlation_id, hex(&b)));
        }
        // Requests appended after the listener's first ones, with their answers.
        for (q, r) in golden_appended_frames() {
            let b = encode_request(&q, MAX).unwrap();
            text.push_str(&format!("request {} {}\n", q.correlation_id, hex(&b)));
            let b = encode_response(&r, MAX).unwrap();
            text.push_str(&format!("response {} {}\n", r.correlation_id, hex(&b)));
        }
        // Authorization refusals (the private listener's ACLs), appended last.
        for r in &golden_authorization_frames() {
            let b = encode_response(r, MAX).unwrap();
            text.push_str(&format!("response {} {}\n", r.correlation_id, hex(&b)));
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/protocol_v1.golden");
        if corum_types::golden::rewrite_requested() {
            std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata")).unwrap();
            std::fs::write(path, &text).unwrap();
        }
        let golden = std::fs::read_to_string(path)
            .expect("golden file missing: run with CORUM_REWRITE=1 once");
        assert_eq!(
            text, golden,
            "protocol bytes changed; see the module doc on versioning"
        );
    }

    /// Every golden frame round-trips, and responses name the request kind they answer.
    #[test]
    fn golden_frames_round_trip() {
        let (requests, responses) = golden_frames();
        for r in &requests {
            let b = encode_request(r, MAX).unwrap();
            let a = decode_request(&b, MAX).unwrap();
            assert_eq!(&RequestFrame::from_archived(a), r);
            assert_eq!(peek_correlation_id(&b), Some(r.correlation_id));
        }
        for r in &responses {
            let b = encode_response(r, MAX).unwrap();
            let a = decode_response(&b, MAX).unwrap();
            assert_eq!(&ResponseFrame::from_archived(a), r);
        }
        assert_eq!(requests[0].body.kind(), "BrokerHeartbeat");
        if let Ok(body) = &responses[0].body {
            assert_eq!(body.kind(), requests[0].body.kind());
        }
        let e = responses[3].body.clone().unwrap_err();
        assert_eq!(
            e.to_string(),
            "not the active controller; leader is 2 at 127.0.0.1:9094"
        );
    }

    /// Size limits are enforced on both sides and map to RequestTooLarge; short, misaligned and
    /// garbage frames are errors that map to Malformed.
    #[test]
    fn limits_and_malformed() {
        let (requests, _) = golden_frames();
        let b = encode_request(&requests[0], MAX).unwrap();
        let err = encode_request(&requests[0], b.len() - 1).unwrap_err();
        assert_eq!(
            err,
            ProtocolError::TooLarge {
                len_bytes: b.len(),
                max_bytes: b.len() - 1
            }
        );
        let err = decode_request(&b, b.len() - 1).unwrap_err();
        assert!(matches!(
            rpc_error_for(&err),
            RpcError::RequestTooLarge { .. }
        ));
        assert!(decode_request(&b, b.len()).is_ok());
        let err = decode_request(&b[..4], MAX).unwrap_err();
        assert!(matches!(err, ProtocolError::Truncated { len_bytes: 4 }));
        assert!(matches!(rpc_error_for(&err), RpcError::Malformed { .. }));
        assert_eq!(peek_correlation_id(&b[..4]), None);
        let mut shifted = AlignedVec::<16>::new();
        shifted.push(0);
        shifted.extend_from_slice(&b);
        assert!(matches!(
            decode_request(&shifted[1..], MAX),
            Err(ProtocolError::Misaligned { .. })
        ));
        // An unknown request kind (a tag past the last variant) is rejected, and its
        // correlation id can still be read to answer it.
        let mut unknown = AlignedVec::<16>::new();
        unknown.extend_from_slice(&b);
        let tag_at = b.len() - std::mem::size_of::<ArchivedRequestFrame>()
            + std::mem::offset_of!(ArchivedRequestFrame, body);
        unknown[tag_at] = 200;
        assert!(matches!(
            decode_request(&unknown, MAX),
            Err(ProtocolError::Invalid { .. })
        ));
        assert_eq!(peek_correlation_id(&unknown), Some(1));
        assert!(decode_response(&b[..2], MAX).is_err());
    }

    /// One of every `ApiError` variant; `api_error_index` fails to compile when a variant is
    /// added, so this list cannot silently fall behind.
    fn one_of_each_api_error() -> Vec<ApiError> {
        let t = TopicId(Uuid([3; 16]));
        let p = PartitionId(4);
        let b = NodeId(5);
        vec![
            ApiError::NotController,
            ApiError::UnknownTopic { name: "a".into() },
            ApiError::UnknownTopicId { topic_id: t },
            ApiError::UnknownPartition {
                topic_id: t,
                partition: p,
            },
            ApiError::InvalidTopicName {
                name: "..".into(),
                reason: "dots".into(),
            },
            ApiError::TopicAlreadyExists { name: "a".into() },
            ApiError::TopicDeletionInProgress { name: "a".into() },
            ApiError::InvalidReplicationFactor {
                requested: 9,
                available: 3,
            },
            ApiError::InvalidPartitions {
                requested: -5,
                reason: "negative".into(),
            },
            ApiError::InvalidReplicaAssignment {
                reason: "dup".into(),
            },
            ApiError::StaleBrokerEpoch {
                broker_id: b,
                current: BrokerEpoch(2),
                request: BrokerEpoch(1),
            },
            ApiError::StaleHeartbeat {
                broker_id: b,
                seen: LogOffset(9),
                request: LogOffset(8),
            },
            ApiError::BrokerLeaseExpired { broker_id: b },
            ApiError::StalePartitionEpoch {
                topic_id: t,
                partition: p,
                current: PartitionEpoch(3),
                request: PartitionEpoch(2),
            },
            ApiError::FencedLeaderEpoch {
                topic_id: t,
                partition: p,
                current: LeaderEpoch(3),
                request: LeaderEpoch(1),
            },
            ApiError::NotLeader {
                broker_id: b,
                topic_id: t,
                partition: p,
            },
            ApiError::IneligibleReplica {
                broker_id: b,
                reason: "fenced".into(),
            },
            ApiError::InvalidIsr {
                reason: "empty".into(),
            },
            ApiError::InvalidConfig {
                key: "k".into(),
                reason: "r".into(),
            },
            ApiError::InvalidConfigResource { reason: "r".into() },
            ApiError::FeatureLevelOutOfRange {
                feature: "f".into(),
                min_level: 1,
                max_level: 9,
                reason: "r".into(),
            },
            ApiError::UnsupportedFeatures {
                broker_id: b,
                feature: "f".into(),
            },
            ApiError::BrokerIdNotRegistered { broker_id: b },
            ApiError::DuplicateBrokerRegistration { broker_id: b },
            ApiError::BrokerNotFenced { broker_id: b },
            ApiError::ElectionNotNeeded {
                topic_id: t,
                partition: p,
            },
            ApiError::PreferredLeaderNotAvailable {
                topic_id: t,
                partition: p,
            },
            ApiError::EligibleLeadersNotAvailable {
                topic_id: t,
                partition: p,
            },
            ApiError::TooManyRecords {
                records: 20_000,
                max: 10_000,
            },
            ApiError::InvalidRequest { reason: "r".into() },
            ApiError::InvalidRegistration {
                broker_id: b,
                reason: "no log directory".into(),
            },
            ApiError::NotReplica {
                broker_id: b,
                topic_id: t,
                partition: p,
            },
            ApiError::UnsupportedVersion {
                reason: "metadata.version".into(),
            },
            ApiError::AuthorizationFailed(tenant_may_not_create("orders")),
        ]
    }

    /// `User:CN=tenant,O=corum` may not create topic `name`.
    fn tenant_may_not_create(name: &str) -> corum_controller::acl::AuthorizationFailure {
        corum_controller::acl::AuthorizationFailure {
            principal: "User:CN=tenant,O=corum".into(),
            operation: corum_controller::acl::AclOperation::Create,
            resource_type: corum_controller::acl::ResourceType::Topic,
            resource_name: name.into(),
        }
    }

    fn api_error_index(e: &ApiError) -> usize {
        match e {
            ApiError::NotController => 0,
            ApiError::UnknownTopic { .. } => 1,
            ApiError::UnknownTopicId { .. } => 2,
            ApiError::UnknownPartition { .. } => 3,
            ApiError::InvalidTopicName { .. } => 4,
            ApiError::TopicAlreadyExists { .. } => 5,
            ApiError::TopicDeletionInProgress { .. } => 6,
            ApiError::InvalidReplicationFactor { .. } => 7,
            ApiError::InvalidPartitions { .. } => 8,
            ApiError::InvalidReplicaAssignment { .. } => 9,
            ApiError::StaleBrokerEpoch { .. } => 10,
            ApiError::StaleHeartbeat { .. } => 11,
            ApiError::BrokerLeaseExpired { .. } => 12,
            ApiError::StalePartitionEpoch { .. } => 13,
            ApiError::FencedLeaderEpoch { .. } => 14,
            ApiError::NotLeader { .. } => 15,
            ApiError::IneligibleReplica { .. } => 16,
            ApiError::InvalidIsr { .. } => 17,
            ApiError::InvalidConfig { .. } => 18,
            ApiError::InvalidConfigResource { .. } => 19,
            ApiError::FeatureLevelOutOfRange { .. } => 20,
            ApiError::UnsupportedFeatures { .. } => 21,
            ApiError::BrokerIdNotRegistered { .. } => 22,
            ApiError::DuplicateBrokerRegistration { .. } => 23,
            ApiError::BrokerNotFenced { .. } => 24,
            ApiError::ElectionNotNeeded { .. } => 25,
            ApiError::PreferredLeaderNotAvailable { .. } => 26,
            ApiError::EligibleLeadersNotAvailable { .. } => 27,
            ApiError::TooManyRecords { .. } => 28,
            ApiError::InvalidRequest { .. } => 29,
            ApiError::InvalidRegistration { .. } => 30,
            ApiError::NotReplica { .. } => 31,
            ApiError::UnsupportedVersion { .. } => 32,
            ApiError::AuthorizationFailed(_) => 33,
        }
    }

    /// One response of every body kind, with per-item errors drawn from `errors` (cycled).
    fn one_of_each_response_body(errors: &[ApiError]) -> Vec<ResponseBody> {
        let mut e = errors.iter().cycle().cloned();
        let mut err = move || e.next().expect("cycle of a non-empty list");
        let t = TopicId(Uuid([8; 16]));
        vec![
            ResponseBody::BrokerHeartbeat(BrokerHeartbeatResponse {
                broker_epoch: BrokerEpoch(1),
                target_state: TargetState::Active,
                lease_duration_ms: 9_000,
                is_caught_up: true,
            }),
            ResponseBody::UnregisterBroker,
            ResponseBody::CreateTopics(CreateTopicsResponse {
                topics: vec![("a".into(), Err(err()))],
            }),
            ResponseBody::DeleteTopics(DeleteTopicsResponse {
                topics: vec![("a".into(), Ok(t)), ("b".into(), Err(err()))],
            }),
            ResponseBody::CreatePartitions(CreatePartitionsResponse {
                topics: vec![("a".into(), Ok(7)), ("b".into(), Err(err()))],
            }),
            ResponseBody::AlterIsr(AlterIsrResponse {
                partitions: vec![
                    (
                        t,
                        PartitionId(0),
                        Ok(IsrUpdated {
                            isr: vec![NodeId(1), NodeId(2)],
                            leader_epoch: LeaderEpoch(3),
                            partition_epoch: PartitionEpoch(4),
                        }),
                    ),
                    (t, PartitionId(1), Err(err())),
                ],
            }),
            ResponseBody::ElectLeaders(ElectLeadersResponse {
                partitions: vec![
                    ("a".into(), PartitionId(0), Ok(NodeId(2))),
                    ("a".into(), PartitionId(1), Err(err())),
                ],
            }),
            ResponseBody::IncrementalAlterConfigs(IncrementalAlterConfigsResponse {
                resources: vec![
                    (ConfigResource::topic("a"), Ok(())),
                    (ConfigResource::topic("b"), Err(err())),
                ],
            }),
            ResponseBody::DescribeConfigs(DescribeConfigsResponse {
                resources: vec![
                    (
                        ConfigResource::topic("a"),
                        Ok(vec![DescribedConfig {
                            name: "cleanup.policy".into(),
                            value: Some("delete".into()),
                            read_only: false,
                            source: ConfigSource::Default,
                            sensitive: false,
                            synonyms: vec![ConfigSynonym {
                                name: "log.cleanup.policy".into(),
                                value: None,
                                source: ConfigSource::Default,
                            }],
                            config_type: ConfigType::List,
                            documentation: Some("how old data goes".into()),
                        }]),
                    ),
                    (ConfigResource::topic("b"), Err(err())),
                ],
            }),
            ResponseBody::UpdateFeatures(UpdateFeaturesResponse {
                results: vec![("f".into(), Ok(())), ("g".into(), Err(err()))],
            }),
            ResponseBody::AllocateProducerIds(AllocateProducerIdsResponse {
                first_producer_id: 1_000,
                count: 1_000,
            }),
            ResponseBody::DescribeCluster(DescribeClusterResponse {
                controller_id: NodeId(1),
                brokers: vec![],
                topic_count: 0,
                partition_count: 0,
            }),
        ]
        .into_iter()
        .chain(one_of_each_raft_response_body())
        .chain(one_of_each_listener_response_body(errors))
        .collect()
    }

    /// One response of each kind appended for the Kafka listener, with per-item errors drawn
    /// from `errors` (cycled).
    fn one_of_each_listener_response_body(errors: &[ApiError]) -> Vec<ResponseBody> {
        let mut e = errors.iter().cycle().cloned();
        let mut err = move || e.next().expect("cycle of a non-empty list");
        let t = TopicId(Uuid([9; 16]));
        vec![
            ResponseBody::RegisterController,
            ResponseBody::DescribeControllers(DescribeControllersResponse {
                controllers: vec![DescribedController {
                    controller_id: NodeId(1),
                    incarnation_id: Uuid([1; 16]),
                    end_points: vec![
                        ControllerEndpointV1 {
                            name: "CONTROLLER".into(),
                            host: "10.0.0.1".into(),
                            port: 9093,
                            security_protocol: 0,
                        },
                        ControllerEndpointV1 {
                            name: "KAFKA".into(),
                            host: "10.0.0.1".into(),
                            port: 9092,
                            security_protocol: 0,
                        },
                    ],
                    features: vec![SupportedFeatureV1 {
                        name: "metadata.version".into(),
                        min_level: 7,
                        max_level: 27,
                    }],
                }],
            }),
            ResponseBody::DescribeTopics(DescribeTopicsResponse {
                topics: vec![
                    (
                        TopicRef::Name("orders".into()),
                        Ok(DescribedTopic {
                            topic_id: t,
                            name: "orders".into(),
                            partitions: vec![
                                DescribedPartition {
                                    partition_id: PartitionId(0),
                                    leader: Some(NodeId(2)),
                                    leader_epoch: LeaderEpoch(3),
                                    partition_epoch: PartitionEpoch(5),
                                    replicas: vec![NodeId(2), NodeId(1)],
                                    isr: vec![NodeId(2)],
                                    offline_replicas: vec![NodeId(1)],
                                },
                                DescribedPartition {
                                    partition_id: PartitionId(1),
                                    leader: None,
                                    leader_epoch: LeaderEpoch(1),
                                    partition_epoch: PartitionEpoch(1),
                                    replicas: vec![NodeId(1)],
                                    isr: vec![NodeId(1)],
                                    offline_replicas: vec![NodeId(1)],
                                },
                            ],
                        }),
                    ),
                    (TopicRef::Id(TopicId(Uuid([0xee; 16]))), Err(err())),
                ],
            }),
            ResponseBody::DescribeFeatures(DescribeFeaturesResponse {
                finalized: vec![FinalizedFeatureLevel {
                    name: "metadata.version".into(),
                    min_level: 7,
                    max_level: 27,
                }],
                finalized_epoch: Some(LogOffset(41)),
                supported: vec![SupportedFeatureV1 {
                    name: "metadata.version".into(),
                    min_level: 7,
                    max_level: 27,
                }],
            }),
            ResponseBody::DeleteTopicsV2(DeleteTopicsV2Response {
                topics: vec![
                    (
                        TopicRef::Id(t),
                        Ok(DeletedTopic {
                            topic_id: t,
                            name: "orders".into(),
                        }),
                    ),
                    (TopicRef::Name("gone".into()), Err(err())),
                ],
            }),
        ]
    }

    /// Requests appended for the Kafka listener, pinned by the golden file (after the
    /// distinct errors), with the answers to the first five.
    fn golden_listener_frames() -> (Vec<RequestFrame>, Vec<ResponseFrame>) {
        let t = TopicId(Uuid([9; 16]));
        let bodies = vec![
            RequestBody::RegisterController(RegisterControllerRequest {
                controller_id: NodeId(1),
                incarnation_id: Uuid([0x44; 16]),
                end_points: vec![ControllerEndpointV1 {
                    name: "CONTROLLER".into(),
                    host: "10.0.0.1".into(),
                    port: 9093,
                    security_protocol: 0,
                }],
                features: vec![SupportedFeatureV1 {
                    name: "metadata.version".into(),
                    min_level: 7,
                    max_level: 27,
                }],
            }),
            RequestBody::DescribeControllers,
            RequestBody::DescribeTopics(DescribeTopicsRequest {
                topics: Some(vec![TopicRef::Name("orders".into()), TopicRef::Id(t)]),
            }),
            RequestBody::DescribeFeatures,
            RequestBody::DeleteTopicsV2(DeleteTopicsV2Request {
                topics: vec![TopicRef::Id(t), TopicRef::Name("gone".into())],
            }),
            RequestBody::LocalRead(Box::new(LocalRead::DescribeCluster)),
            RequestBody::LocalRead(Box::new(LocalRead::DescribeTopics(DescribeTopicsRequest {
                topics: None,
            }))),
            RequestBody::LocalRead(Box::new(LocalRead::DescribeControllers)),
            RequestBody::LocalRead(Box::new(LocalRead::DescribeFeatures)),
        ];
        let requests = bodies
            .into_iter()
            .zip(301..)
            .map(|(body, correlation_id)| RequestFrame {
                correlation_id,
                timeout_ms: 1_000,
                body,
            })
            .collect();
        let responses = one_of_each_listener_response_body(&[ApiError::UnknownTopicId {
            topic_id: TopicId(Uuid([0xee; 16])),
        }])
        .into_iter()
        .zip(301..)
        .map(|(body, correlation_id)| ResponseFrame {
            correlation_id,
            body: Ok(body),
        })
        .collect();
        (requests, responses)
    }

    /// Requests appended after the listener's first ones (AlterConfigs,
    /// CreateTopicsWithConfigs, then Kafka's broker RPCs: RegisterBroker, AlterPartition,
    /// AssignReplicasToDirs), each paired with its answer; pinned by the golden file after the
    /// listener's frames.
    fn golden_appended_frames() -> Vec<(RequestFrame, ResponseFrame)> {
        let topic = |name: &str| ConfigResource {
            resource_type: ConfigResourceType::Topic,
            name: name.into(),
        };
        let described = DescribedConfig {
            name: "retention.ms".into(),
            value: Some("1000".into()),
            read_only: false,
            source: ConfigSource::DynamicTopic,
            sensitive: false,
            synonyms: vec![],
            config_type: ConfigType::Long,
            documentation: None,
        };
        let pairs = vec![
            (
                RequestBody::AlterConfigs(AlterConfigsRequest {
                    resources: vec![ReplacedConfigs {
                        resource: topic("orders"),
                        configs: vec![("retention.ms".into(), Some("1000".into()))],
                    }],
                    validate_only: false,
                }),
                ResponseBody::AlterConfigs(AlterConfigsResponse {
                    resources: vec![(topic("orders"), Ok(()))],
                }),
            ),
            (
                RequestBody::CreateTopicsWithConfigs(CreateTopicsRequest {
                    topics: vec![CreatableTopic {
                        name: "orders".into(),
                        num_partitions: 1,
                        replication_factor: 3,
                        assignments: vec![],
                        configs: vec![("retention.ms".into(), "1000".into())],
                    }],
                    validate_only: false,
                }),
                ResponseBody::CreateTopicsWithConfigs(CreateTopicsWithConfigsResponse {
                    topics: vec![
                        (
                            "orders".into(),
                            Ok(CreatedTopicWithConfigs {
                                topic: CreatedTopic {
                                    topic_id: TopicId(Uuid([7; 16])),
                                    num_partitions: 1,
                                    replication_factor: 3,
                                },
                                configs: std::sync::Arc::new(vec![described]),
                            }),
                        ),
                        (
                            "orders".into(),
                            Err(ApiError::TopicAlreadyExists {
                                name: "orders".into(),
                            }),
                        ),
                    ],
                }),
            ),
            (
                RequestBody::RegisterBroker(Box::new(BrokerRegistrationRequest {
                    broker_id: NodeId(7),
                    incarnation_id: Uuid([0x22; 16]),
                    endpoints: vec![BrokerEndpointV1 {
                        name: "SSL".into(),
                        host: "10.0.0.7".into(),
                        port: 9093,
                        security_protocol: 1,
                    }],
                    features: vec![SupportedFeatureV1 {
                        name: "metadata.version".into(),
                        min_level: 7,
                        max_level: 27,
                    }],
                    rack: Some("r1".into()),
                    log_dirs: vec![Uuid([0x71; 16]), Uuid([0x72; 16])],
                    previous_broker_epoch: PreviousBrokerEpoch::Epoch(BrokerEpoch(41)),
                })),
                ResponseBody::RegisterBroker(BrokerRegistrationResponse {
                    broker_epoch: BrokerEpoch(42),
                }),
            ),
            (
                RequestBody::AlterPartition(AlterPartitionRequest {
                    broker_id: NodeId(7),
                    broker_epoch: BrokerEpoch(42),
                    topics: vec![AlterPartitionTopic {
                        topic_id: TopicId(Uuid([7; 16])),
                        partitions: vec![PartitionAlteration {
                            partition_id: PartitionId(1),
                            leader_epoch: LeaderEpoch(3),
                            new_isr_with_epochs: vec![
                                IsrMember {
                                    broker_id: NodeId(7),
                                    broker_epoch: Some(BrokerEpoch(42)),
                                },
                                IsrMember {
                                    broker_id: NodeId(8),
                                    broker_epoch: None,
                                },
                            ],
                            leader_recovery_state: LeaderRecoveryState::Recovered,
                            partition_epoch: PartitionEpoch(5),
                        }],
                    }],
                }),
                ResponseBody::AlterPartition(AlterPartitionResponse {
                    topics: vec![AlterPartitionTopicResult {
                        topic_id: TopicId(Uuid([7; 16])),
                        partitions: vec![
                            (
                                PartitionId(1),
                                Ok(AlteredPartition {
                                    leader: Some(NodeId(7)),
                                    leader_epoch: LeaderEpoch(3),
                                    isr: vec![NodeId(7), NodeId(8)],
                                    leader_recovery_state: LeaderRecoveryState::Recovered,
                                    partition_epoch: PartitionEpoch(6),
                                }),
                            ),
                            (
                                PartitionId(2),
                                Err(ApiError::IneligibleReplica {
                                    broker_id: NodeId(8),
                                    reason: "fenced".into(),
                                }),
                            ),
                        ],
                    }],
                }),
            ),
            (
                RequestBody::AssignReplicasToDirs(AssignReplicasToDirsRequest {
                    broker_id: NodeId(7),
                    broker_epoch: BrokerEpoch(42),
                    directories: vec![DirectoryAssignment {
                        directory_id: Uuid([0x71; 16]),
                        topics: vec![TopicPartitions {
                            topic_id: TopicId(Uuid([7; 16])),
                            partitions: vec![PartitionId(0), PartitionId(1)],
                        }],
                    }],
                }),
                ResponseBody::AssignReplicasToDirs(AssignReplicasToDirsResponse {
                    directories: vec![DirectoryAssignmentResult {
                        directory_id: Uuid([0x71; 16]),
                        topics: vec![TopicPartitionResults {
                            topic_id: TopicId(Uuid([7; 16])),
                            partitions: vec![
                                (PartitionId(0), Ok(())),
                                (
                                    PartitionId(1),
                                    Err(ApiError::NotReplica {
                                        broker_id: NodeId(7),
                                        topic_id: TopicId(Uuid([7; 16])),
                                        partition: PartitionId(1),
                                    }),
                                ),
                            ],
                        }],
                    }],
                }),
            ),
            (
                RequestBody::DescribeTopicsV2(DescribeTopicsRequest {
                    topics: Some(vec![
                        TopicRef::Name("orders".into()),
                        TopicRef::Id(TopicId(Uuid([0xee; 16]))),
                    ]),
                }),
                described_topics_v2(),
            ),
            (
                RequestBody::LocalRead(Box::new(LocalRead::DescribeTopicsV2(
                    DescribeTopicsRequest { topics: None },
                ))),
                described_topics_v2(),
            ),
            (
                RequestBody::CreateAcls(CreateAclsRequest {
                    creations: vec![acl_binding(), acl_binding()],
                }),
                ResponseBody::CreateAcls(CreateAclsResponse {
                    results: vec![
                        Ok(()),
                        Err(ApiError::InvalidRequest {
                            reason: "resource name should not be empty".into(),
                        }),
                    ],
                }),
            ),
            (
                RequestBody::DeleteAcls(DeleteAclsRequest {
                    filters: vec![acl_filter()],
                }),
                ResponseBody::DeleteAcls(DeleteAclsResponse {
                    results: vec![Ok(vec![acl_binding()])],
                }),
            ),
            (
                RequestBody::DescribeAcls(Box::new(DescribeAclsRequest {
                    filter: acl_filter(),
                })),
                ResponseBody::DescribeAcls(DescribeAclsResponse {
                    acls: vec![acl_binding()],
                }),
            ),
            (
                RequestBody::LocalRead(Box::new(LocalRead::DescribeAcls(Box::new(
                    DescribeAclsRequest {
                        filter: acl_filter(),
                    },
                )))),
                ResponseBody::DescribeAcls(DescribeAclsResponse { acls: vec![] }),
            ),
        ];
        pairs
            .into_iter()
            .zip(401..)
            .map(|((q, r), correlation_id)| {
                (
                    RequestFrame {
                        correlation_id,
                        timeout_ms: 1_000,
                        body: q,
                    },
                    ResponseFrame {
                        correlation_id,
                        body: Ok(r),
                    },
                )
            })
            .collect()
    }

    /// An ACL: User:alice may write topics named `payments-…` from any host.
    fn acl_binding() -> AclBindingV1 {
        AclBindingV1 {
            resource_type: 2,
            resource_name: "payments-".into(),
            pattern_type: 4,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 4,
            permission_type: 3,
        }
    }

    /// A filter: the topic ACLs that apply to `payments-eu`, for any principal.
    fn acl_filter() -> AclFilterV1 {
        AclFilterV1 {
            resource_type: 2,
            resource_name: Some("payments-eu".into()),
            pattern_type: 2,
            principal: None,
            host: Some("*".into()),
            operation: 1,
            permission_type: 1,
        }
    }

    /// A DescribeTopicsV2 answer: a topic whose partition has eligible leader replicas and a
    /// last known ELR, and an unknown one.
    fn described_topics_v2() -> ResponseBody {
        ResponseBody::DescribeTopicsV2(DescribeTopicsV2Response {
            topics: vec![
                (
                    TopicRef::Name("orders".into()),
                    Ok(DescribedTopicV2 {
                        topic_id: TopicId(Uuid([7; 16])),
                        name: "orders".into(),
                        partitions: vec![DescribedPartitionV2 {
                            partition: DescribedPartition {
                                partition_id: PartitionId(0),
                                leader: None,
                                leader_epoch: LeaderEpoch(4),
                                partition_epoch: PartitionEpoch(9),
                                replicas: vec![NodeId(1), NodeId(2), NodeId(3)],
                                isr: vec![],
                                offline_replicas: vec![NodeId(1), NodeId(2), NodeId(3)],
                            },
                            eligible_leader_replicas: vec![NodeId(2), NodeId(3)],
                            last_known_elr: vec![NodeId(1)],
                        }],
                    }),
                ),
                (
                    TopicRef::Id(TopicId(Uuid([0xee; 16]))),
                    Err(ApiError::UnknownTopicId {
                        topic_id: TopicId(Uuid([0xee; 16])),
                    }),
                ),
            ],
        })
    }

    /// The appended frames round-trip, each answer names its request's kind, none is a Raft
    /// request, and only `LocalRead` is a local read.
    #[test]
    fn appended_frames_round_trip_and_pair_up() {
        for (q, r) in golden_appended_frames() {
            let b = encode_request(&q, MAX).unwrap();
            assert_eq!(
                RequestFrame::from_archived(decode_request(&b, MAX).unwrap()),
                q
            );
            let b = encode_response(&r, MAX).unwrap();
            let back = ResponseFrame::from_archived(decode_response(&b, MAX).unwrap());
            assert_eq!(back, r);
            assert_eq!(back.body.unwrap().kind(), q.body.kind());
            assert!(!q.body.is_raft());
            assert_eq!(
                q.body.is_local_read(),
                matches!(q.body, RequestBody::LocalRead(_))
            );
        }
    }

    /// Every ApiError variant, every RpcError variant and every response body kind survives
    /// the wire, whole-request (RpcError::Api) and per item.
    #[test]
    fn every_error_and_response_round_trips() {
        let errors = one_of_each_api_error();
        let mut seen: Vec<usize> = errors.iter().map(api_error_index).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..errors.len()).collect::<Vec<_>>());
        let mut frames: Vec<ResponseFrame> = errors
            .iter()
            .cloned()
            .map(|e| ResponseFrame {
                correlation_id: 1,
                body: Err(RpcError::Api(e)),
            })
            .collect();
        frames.extend(
            crate::rpc_error::tests::one_of_each()
                .into_iter()
                .map(|e| ResponseFrame {
                    correlation_id: 3,
                    body: Err(e),
                }),
        );
        let bodies = one_of_each_response_body(&errors);
        let kinds: Vec<&str> = bodies.iter().map(ResponseBody::kind).collect();
        assert_eq!(kinds.len(), 23);
        frames.extend(bodies.into_iter().map(|b| ResponseFrame {
            correlation_id: 2,
            body: Ok(b),
        }));
        for f in frames {
            let b = encode_response(&f, MAX).unwrap();
            let back = ResponseFrame::from_archived(decode_response(&b, MAX).unwrap());
            assert_eq!(back, f);
            if let (Err(x), Err(y)) = (&back.body, &f.body) {
                assert_eq!(x.to_string(), y.to_string());
            }
        }
    }

    /// Every Raft frame round-trips; each response answers the request kind it is paired
    /// with; exactly the Raft requests are routed away from the controller.
    #[test]
    fn raft_frames_round_trip_and_pair_up() {
        let (requests, responses) = golden_raft_frames();
        for (q, r) in requests.iter().zip(&responses) {
            let b = encode_request(q, MAX).unwrap();
            assert_eq!(
                &RequestFrame::from_archived(decode_request(&b, MAX).unwrap()),
                q
            );
            let b = encode_response(r, MAX).unwrap();
            let back = ResponseFrame::from_archived(decode_response(&b, MAX).unwrap());
            assert_eq!(&back, r);
            let body = back.body.unwrap();
            assert_eq!(body.kind(), q.body.kind());
            body.validate_raft().unwrap();
            assert!(q.body.is_raft());
        }
        let (old, _) = golden_frames();
        assert!(old.iter().all(|q| !q.body.is_raft()));
    }

    /// The listener's frames round-trip; each of the first five responses answers the request
    /// of the same kind; only `LocalRead` is a local read, answered by its read's kind; none is
    /// a Raft request.
    #[test]
    fn listener_frames_round_trip_and_pair_up() {
        let (requests, responses) = golden_listener_frames();
        for q in &requests {
            let b = encode_request(q, MAX).unwrap();
            assert_eq!(
                &RequestFrame::from_archived(decode_request(&b, MAX).unwrap()),
                q
            );
            assert!(!q.body.is_raft());
            assert_eq!(
                q.body.is_local_read(),
                matches!(q.body, RequestBody::LocalRead(_)),
                "{}",
                q.body.kind()
            );
        }
        for (q, r) in requests.iter().zip(&responses) {
            let b = encode_response(r, MAX).unwrap();
            let back = ResponseFrame::from_archived(decode_response(&b, MAX).unwrap());
            assert_eq!(&back, r);
            assert_eq!(back.body.unwrap().kind(), q.body.kind());
        }
        // A local read names the read it carries, which names its response.
        let local: Vec<&str> = requests[5..].iter().map(|q| q.body.kind()).collect();
        assert_eq!(
            local,
            [
                "DescribeCluster",
                "DescribeTopics",
                "DescribeControllers",
                "DescribeFeatures"
            ]
        );
        let (old, _) = golden_frames();
        let (raft, _) = golden_raft_frames();
        assert!(old.iter().chain(&raft).all(|q| !q.body.is_local_read()));
    }

    /// A fetch response whose batches skip an offset passes rkyv validation but fails
    /// `validate_raft`, as `corum_raft::Message::decode` would refuse it.
    #[test]
    fn gapped_fetch_batches_are_refused() {
        let body = fetch_response(10, &[1, 2, 3], true, 10);
        let f = ResponseFrame {
            correlation_id: 1,
            body: Ok(body),
        };
        let b = encode_response(&f, MAX).unwrap();
        let back = ResponseFrame::from_archived(decode_response(&b, MAX).unwrap());
        let err = back.body.unwrap().validate_raft().unwrap_err();
        assert!(err.to_string().contains("does not continue"), "{err}");
    }

    proptest! {
        /// Fetch responses with any batches, and DescribeQuorum answers with any replicas,
        /// round-trip; contiguous batches pass `validate_raft` and gapped ones fail it.
        #[test]
        fn raft_response_round_trip(
            correlation_id in any::<u64>(),
            start in 0u64..1 << 40,
            sizes in proptest::collection::vec(0usize..300, 0..5),
            gap in any::<bool>(),
            replicas in proptest::collection::vec(
                (any::<u32>(), proptest::option::of(any::<u64>()), proptest::option::of(any::<u64>())), 0..6),
        ) {
            let body = fetch_response(start, &sizes, gap, start);
            let f = ResponseFrame { correlation_id, body: Ok(body) };
            let b = encode_response(&f, MAX).unwrap();
            let back = ResponseFrame::from_archived(decode_response(&b, MAX).unwrap());
            prop_assert_eq!(&back, &f);
            let valid = back.body.unwrap().validate_raft().is_ok();
            prop_assert_eq!(valid, !(gap && sizes.len() > 1));

            let mut d = describe_quorum();
            d.voters = replicas.iter().map(|&(id, leo, age)| ReplicaState {
                replica_id: NodeId(id),
                directory_id: leo.map(|x| Uuid::from_random_bits(x.into())),
                log_end_offset: leo.map(LogOffset),
                lag: age,
                last_fetch_age_ms: age,
                last_caught_up_age_ms: leo,
                endpoints: Vec::new(),
            }).collect();
            let f = ResponseFrame { correlation_id, body: Ok(ResponseBody::DescribeQuorum(Box::new(d))) };
            let b = encode_response(&f, MAX).unwrap();
            prop_assert_eq!(ResponseFrame::from_archived(decode_response(&b, MAX).unwrap()), f);
        }

        /// Raft responses with one byte changed fail validation or decode to something, never
        /// panic, and `validate_raft` never panics on what decodes.
        #[test]
        fn mutated_raft_responses_never_panic(pick in any::<prop::sample::Index>(),
                                              at in any::<prop::sample::Index>(), x in 1u8..) {
            let bodies = one_of_each_raft_response_body();
            let f = ResponseFrame { correlation_id: 5, body: Ok(bodies[pick.index(bodies.len())].clone()) };
            let b = encode_response(&f, MAX).unwrap();
            let mut m = AlignedVec::<16>::new();
            m.extend_from_slice(&b);
            let i = at.index(m.len());
            m[i] ^= x;
            if let Ok(a) = decode_response(&m, MAX) {
                if let Ok(body) = ResponseFrame::from_archived(a).body {
                    let _ = body.validate_raft();
                }
            }
        }
    }

    proptest! {
        /// Arbitrary requests survive encode, validation and decode unchanged.
        #[test]
        fn request_round_trip(r in arb_request()) {
            let b = encode_request(&r, MAX).unwrap();
            let a = decode_request(&b, MAX).unwrap();
            prop_assert_eq!(peek_correlation_id(&b), Some(r.correlation_id));
            prop_assert_eq!(RequestFrame::from_archived(a), r);
        }

        /// Responses with any correlation id, body kind and error round-trip.
        #[test]
        fn response_round_trip(
            correlation_id in any::<u64>(),
            pick in any::<prop::sample::Index>(),
            reason in "\\PC{0,20}",
            host in "[a-z0-9.]{1,20}",
            port in any::<u16>(),
        ) {
            let mut errors = one_of_each_api_error();
            errors.push(ApiError::InvalidConfig { key: reason.clone(), reason: reason.clone() });
            let mut bodies: Vec<Result<ResponseBody, RpcError>> =
                one_of_each_response_body(&errors[pick.index(errors.len())..]).into_iter().map(Ok).collect();
            bodies.push(Err(RpcError::Malformed { reason: reason.clone() }));
            bodies.push(Err(RpcError::NotController { leader: Some(LeaderHint { id: NodeId(port.into()), host, port }) }));
            bodies.push(Err(RpcError::Timeout { timeout_ms: port.into() }));
            bodies.push(Err(RpcError::Api(errors[pick.index(errors.len())].clone())));
            bodies.push(Err(RpcError::NotImplemented { api: reason.clone() }));
            bodies.push(Err(RpcError::ProposalRefused { reason: reason.clone() }));
            bodies.push(Err(RpcError::ResponseTooLarge { bytes: correlation_id, max: port.into() }));
            bodies.push(Err(RpcError::RecordsTooLarge { bytes: port.into(), max: correlation_id }));
            bodies.push(Err(RpcError::ObserverRefused { replica_id: NodeId(port.into()), reason: reason.clone() }));
            bodies.push(Err(RpcError::Internal { reason: reason.clone() }));
            bodies.push(Err(RpcError::AuthorizationFailed(Box::new(corum_controller::acl::AuthorizationFailure {
                principal: format!("User:CN={reason}"),
                operation: corum_controller::acl::AclOperation::ALL_VALUES[pick.index(corum_controller::acl::AclOperation::ALL_VALUES.len())],
                resource_type: corum_controller::acl::ResourceType::ALL_VALUES[pick.index(corum_controller::acl::ResourceType::ALL_VALUES.len())],
                resource_name: reason.clone(),
            }))));
            let body = bodies[pick.index(bodies.len())].clone();
            let f = ResponseFrame { correlation_id, body };
            let b = encode_response(&f, MAX).unwrap();
            prop_assert_eq!(ResponseFrame::from_archived(decode_response(&b, MAX).unwrap()), f);
        }

        /// Random bytes never panic either decoder.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut buf = AlignedVec::<16>::new();
            buf.extend_from_slice(&bytes);
            if let Ok(a) = decode_request(&buf, MAX) {
                let _ = RequestFrame::from_archived(a);
            }
            if let Ok(a) = decode_response(&buf, MAX) {
                let _ = ResponseFrame::from_archived(a);
            }
            let _ = peek_correlation_id(&buf);
        }

        /// Valid requests with one byte changed either fail validation or decode to some request
        /// without panicking.
        #[test]
        fn mutated_requests_never_panic(r in arb_request(), at in any::<prop::sample::Index>(), x in 1u8..) {
            let b = encode_request(&r, MAX).unwrap();
            let mut m = AlignedVec::<16>::new();
            m.extend_from_slice(&b);
            let i = at.index(m.len());
            m[i] ^= x;
            if let Ok(a) = decode_request(&m, MAX) {
                let _ = RequestFrame::from_archived(a);
            }
        }
    }
}
