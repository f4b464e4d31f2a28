//! Fetch and FetchSnapshot of `__cluster_metadata`: how Kafka brokers follow the metadata log,
//! served as a KRaft leader serves its observers.
//!
//! A broker's fetch becomes the Raft core's own observer fetch (`corum_raft` `Fetch`, stepped
//! into the leader's core as if it came from that replica), and the answer comes back in
//! Kafka's shape: the batches rendered as Kafka RecordBatches at the same offsets and epochs
//! ([`crate::log`]), a diverging epoch, the snapshot to fetch instead, or — from a node that
//! does not lead — `NOT_LEADER_OR_FOLLOWER` / `FENCED_LEADER_EPOCH` / `UNKNOWN_LEADER_EPOCH`
//! with the current leader and its endpoint on this listener, where the broker goes next.
//!
//! The fetch is a long poll: the leader holds it until it has something newer than what the
//! broker holds (records, or a high watermark past the one the broker knows) or `max_wait_ms`
//! passes. The broker states the high watermark it knows from Fetch v18 on; for older versions
//! the listener remembers the last one it sent each replica ([`crate::log::ObserverMemory`]).
//!
//! Snapshots are rendered once per snapshot id in Kafka's snapshot format (a header batch, the
//! records, a footer batch) and served in chunks by position.

use bytes::Bytes;
use corum_controller::control::feature_control::METADATA_VERSION;
use corum_protocol::{RequestBody, ResponseBody, RpcError};
use corum_raft::message::{
    FetchRequest as RaftFetch, FetchResult, FetchSnapshotRequest as RaftFetchSnapshot,
    FetchSnapshotResult,
};
use corum_raft::{Endpoint, ReplicaKey, SnapshotId};
use corum_types::{Epoch, LogOffset, NodeId};
use kafka_protocol::error::ResponseError as K;
use kafka_protocol::messages::{
    fetch_request, fetch_response, fetch_snapshot_response, FetchRequest, FetchResponse,
    FetchSnapshotRequest, FetchSnapshotResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::api::{corum_uuid, nodes};
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::log::{self, RecordParts, RenderContext};

/// The metadata log's topic name, as KRaft names its one partition.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// The metadata log's topic id (Kafka's `Uuid.METADATA_TOPIC_ID`: most significant bits 0,
/// least significant bits 1).
pub const METADATA_TOPIC_ID: uuid::Uuid = uuid::Uuid::from_u64_pair(0, 1);

/// Most bytes of rendered batches one answer carries (Kafka's own default for a partition's
/// fetch is 1 MiB; corum's core already bounds what one fetch reads).
const FETCH_BYTES_MAX: usize = 8 << 20;

/// The first Fetch version of Kafka's Raft (KIP-595): the answer's diverging epoch, snapshot id
/// and current leader are tagged fields from here.
const KRAFT_FETCH_VERSION: i16 = 12;

/// What was wrong with a request before anything was asked of the core.
fn refuse(code: K, message: impl Into<String>) -> KafkaError {
    KafkaError::new(code, message)
}

fn fetch_partition_of(
    req: &FetchRequest,
    version: i16,
) -> Result<&fetch_request::FetchPartition, KafkaError> {
    let [topic] = req.topics.as_slice() else {
        return Err(refuse(
            K::InvalidRequest,
            "a fetch of the metadata log names exactly one topic",
        ));
    };
    let named = if version >= 13 {
        topic.topic_id == METADATA_TOPIC_ID
    } else {
        topic.topic.0.as_str() == METADATA_TOPIC
    };
    if !named {
        return Err(refuse(
            K::InvalidRequest,
            format!("a controller serves only {METADATA_TOPIC}-0"),
        ));
    }
    match topic.partitions.as_slice() {
        [p] if p.partition == 0 => Ok(p),
        _ => Err(refuse(
            K::InvalidRequest,
            format!("a controller serves only {METADATA_TOPIC}-0"),
        )),
    }
}

fn check_cluster(ctx: &ListenerContext, cluster_id: Option<&StrBytes>) -> Result<(), KafkaError> {
    match cluster_id {
        Some(id) if id.as_str() != ctx.cluster_id_text() => Err(refuse(
            K::InconsistentClusterId,
            format!(
                "the request names cluster {}, this is cluster {}",
                id.as_str(),
                ctx.cluster_id_text()
            ),
        )),
        _ => Ok(()),
    }
}

/// The fetching replica: a broker's node id (Kafka's observers send theirs).
fn replica_of(id: i32, directory: uuid::Uuid) -> Result<ReplicaKey, KafkaError> {
    let id = u32::try_from(id).map_err(|_| {
        refuse(
            K::InvalidRequest,
            "a fetch of the metadata log must name the fetching replica's node id",
        )
    })?;
    Ok(ReplicaKey {
        id: NodeId(id),
        directory_id: corum_uuid(directory),
    })
}

/// Where the leader answers on this listener, for a replica that must go there.
async fn leader_endpoint<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    leader: Option<NodeId>,
) -> Option<nodes::NodeEndpoint> {
    let leader = leader?;
    if leader == ctx.node_id {
        // A broker following this node: its own endpoint, as `nodes::controllers` names it,
        // without reading every controller's registration at each fetch.
        return Some(nodes::own_endpoint(ctx));
    }
    nodes::controllers(ctx, backend)
        .await
        .into_iter()
        .find(|n| n.id == leader.0 as i32)
}

/// What rendering a control batch or a snapshot needs: each controller's endpoint on this
/// listener, which brokers dial as a voter's (from the controllers' registrations).
async fn render_context<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    epoch: i32,
) -> RenderContext {
    let voter_endpoints = nodes::controllers(ctx, backend)
        .await
        .into_iter()
        .filter_map(|n| {
            Some((
                NodeId(u32::try_from(n.id).ok()?),
                Endpoint {
                    listener: ctx.listener_name.clone(),
                    host: n.host,
                    port: u16::try_from(n.port).ok()?,
                },
            ))
        })
        .collect();
    RenderContext {
        voter_endpoints,
        ..records_context(ctx, backend, epoch).await
    }
}

/// What rendering data batches needs: the finalized `metadata.version`, remembered for the
/// leader epoch, or asked of the core the first time in an epoch (its committed image; before
/// the first active controller finalized it, the highest level supported).
async fn records_context<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    epoch: i32,
) -> RenderContext {
    let metadata_version = match ctx.log.metadata_version(epoch) {
        Some(mv) => mv,
        None => {
            let features = super::features::describe_features(ctx, backend).await;
            match features {
                Ok(f) => {
                    let finalized = f.finalized.iter().find(|x| x.name == METADATA_VERSION);
                    let supported = f.supported.iter().find(|x| x.name == METADATA_VERSION);
                    let level = finalized
                        .map(|x| x.max_level)
                        .or(supported.map(|x| x.max_level))
                        .map_or(log::MetadataVersion::LATEST.0, |l| l as i16);
                    let mv = log::MetadataVersion(level);
                    // The image's last record is `finalized_epoch`.
                    let through = f
                        .finalized_epoch
                        .map_or(LogOffset(0), |o| LogOffset(o.0 + 1));
                    ctx.log.note_metadata_version(epoch, mv, through);
                    mv
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read metadata.version; rendering at the latest");
                    log::MetadataVersion::LATEST
                }
            }
        }
    };
    RenderContext {
        metadata_version: std::cell::Cell::new(metadata_version),
        ..RenderContext::default()
    }
}

/// The leader and epoch to tell a replica sent elsewhere: the core's answer when it gave one,
/// else this node's view.
fn leadership<B: Backend>(backend: &B) -> (i32, Option<NodeId>) {
    let (epoch, leader) = backend.leadership();
    (epoch_i32(epoch), leader)
}

fn epoch_i32(e: u64) -> i32 {
    i32::try_from(e).unwrap_or(i32::MAX)
}

fn offset_i64(o: LogOffset) -> i64 {
    i64::try_from(o.0).unwrap_or(i64::MAX)
}

/// The code for a replica that reached a node that cannot serve its epoch.
fn not_leader_code(requested: i32, epoch: i32) -> K {
    if requested >= 0 && requested < epoch {
        K::FencedLeaderEpoch
    } else if requested > epoch {
        K::UnknownLeaderEpoch
    } else {
        K::NotLeaderOrFollower
    }
}

/// A Fetch answer, its records apart: the rendered batches where they lie, to be sent after the
/// bytes of the answer's one partition up to its records field ([`crate::response`] splices
/// them in), not copied into it. `records` is `None` when the answer carries no records field
/// (an error, a diverging epoch, a snapshot to fetch).
#[derive(Debug)]
pub struct FetchAnswer {
    /// The answer, its one partition's records left unset.
    pub response: FetchResponse,
    pub records: Option<RecordParts>,
}

impl FetchAnswer {
    /// The answer with its records in it, as one buffer.
    pub fn into_response(self) -> FetchResponse {
        let mut response = self.response;
        if let Some(records) = self.records {
            if let Some(p) = only_partition(&mut response) {
                p.records = Some(records.to_bytes());
            }
        }
        response
    }
}

/// The one partition of a Fetch answer of the metadata log.
pub(crate) fn only_partition(
    response: &mut FetchResponse,
) -> Option<&mut fetch_response::PartitionData> {
    match response.responses.as_mut_slice() {
        [topic] => match topic.partitions.as_mut_slice() {
            [partition] => Some(partition),
            _ => None,
        },
        _ => None,
    }
}

/// Serves a Fetch request.
pub async fn fetch<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    req: FetchRequest,
    version: i16,
) -> FetchAnswer {
    let mut records = None;
    let response = answer_fetch(ctx, backend, req, version, &mut records).await;
    FetchAnswer { response, records }
}

/// [`fetch`]'s answer, its records set in `records`.
async fn answer_fetch<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    req: FetchRequest,
    version: i16,
    records: &mut Option<RecordParts>,
) -> FetchResponse {
    let mut response = FetchResponse::default();
    let topic_answer = |p: fetch_response::PartitionData| {
        let mut t = fetch_response::FetchableTopicResponse::default().with_partitions(vec![p]);
        if version >= 13 {
            t.topic_id = METADATA_TOPIC_ID;
        } else {
            t.topic = TopicName(StrBytes::from_static_str(METADATA_TOPIC));
        }
        t
    };
    if let Err(e) = check_cluster(ctx, req.cluster_id.as_ref()) {
        response.error_code = e.code;
        return response;
    }
    let partition = match fetch_partition_of(&req, version) {
        Ok(p) => p,
        Err(e) => {
            response.error_code = e.code;
            return response;
        }
    };
    let replica_id = if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    let mut answer = fetch_response::PartitionData::default()
        .with_partition_index(0)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1);
    let replica = match replica_of(replica_id, partition.replica_directory_id) {
        Ok(r) => r,
        Err(e) => {
            answer.error_code = e.code;
            response.responses = vec![topic_answer(answer)];
            return response;
        }
    };
    if partition.fetch_offset < 0
        || (partition.last_fetched_epoch < 0 && partition.fetch_offset > 0)
        || partition.last_fetched_epoch > partition.current_leader_epoch
    {
        answer.error_code = K::InvalidRequest.code();
        response.responses = vec![topic_answer(answer)];
        return response;
    }
    let known_hwm = if version >= 18 && partition.high_watermark != i64::MAX {
        // -1: the broker knows none yet.
        Some(LogOffset(partition.high_watermark.max(0) as u64))
    } else {
        ctx.log.high_watermark_sent(replica.id)
    };
    let wait_max_ms = u64::try_from(req.max_wait_ms.max(0)).unwrap_or(0);
    let raft = RaftFetch {
        epoch: Epoch(u64::try_from(partition.current_leader_epoch.max(0)).unwrap_or(0)),
        replica,
        fetch_offset: LogOffset(partition.fetch_offset as u64),
        last_fetched_epoch: Epoch(partition.last_fetched_epoch.max(0) as u64),
        high_watermark: known_hwm.unwrap_or(LogOffset(0)),
        wait_max_ms,
    };
    let (epoch, leader, result) = match backend
        .call(RequestBody::Fetch(raft), ctx.default_timeout_ms)
        .await
    {
        Ok(ResponseBody::Fetch(r)) => (epoch_i32(r.epoch.0), r.leader, Ok(r.result)),
        Ok(other) => (
            0,
            None,
            Err(KafkaError::new(
                K::UnknownServerError,
                format!("the node answered a fetch with {}", other.kind()),
            )),
        ),
        Err(RpcError::NotController { leader }) => {
            let (epoch, known) = leadership(backend);
            (
                epoch,
                leader.map(|l| l.id).or(known),
                Ok(FetchResult::NotLeader),
            )
        }
        Err(e) => (0, None, Err(KafkaError::rpc(&e))),
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            answer.error_code = e.code;
            response.responses = vec![topic_answer(answer)];
            return response;
        }
    };
    answer.current_leader = fetch_response::LeaderIdAndEpoch::default()
        .with_leader_id(leader.map_or(-1, |l| l.0 as i32).into())
        .with_leader_epoch(epoch);
    match result {
        FetchResult::Batches {
            batches,
            high_watermark,
            ..
        } => {
            answer.high_watermark = offset_i64(high_watermark);
            ctx.log.sent_high_watermark(replica.id, high_watermark);
            let render = if batches.iter().any(|b| b.control) {
                render_context(ctx, backend, epoch).await
            } else {
                records_context(ctx, backend, epoch).await
            };
            let rendered = ctx.log.render(&batches, &render, FETCH_BYTES_MAX);
            match rendered {
                Ok(rendered) => {
                    if let Some(last) = batches[..rendered.batches()].last() {
                        ctx.log.note_metadata_version(
                            epoch,
                            render.metadata_version.get(),
                            last.end_offset(),
                        );
                    }
                    *records = Some(rendered);
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot render the metadata log for a broker");
                    answer.error_code = K::KafkaStorageError.code();
                }
            }
        }
        FetchResult::Diverging { .. } | FetchResult::SnapshotNeeded { .. }
            if version < KRAFT_FETCH_VERSION =>
        {
            // The answer's diverging epoch and snapshot id are tagged fields from v12
            // (KIP-595): an older version cannot carry them, and an answer without them would
            // look like an empty one to a broker that then asks again forever.
            answer.error_code = K::UnsupportedVersion.code();
        }
        FetchResult::Diverging {
            epoch: diverging,
            end_offset,
            ..
        } => {
            answer.diverging_epoch = fetch_response::EpochEndOffset::default()
                .with_epoch(epoch_i32(diverging.0))
                .with_end_offset(offset_i64(end_offset));
        }
        FetchResult::SnapshotNeeded { snapshot } => {
            answer.snapshot_id = fetch_response::SnapshotId::default()
                .with_end_offset(offset_i64(snapshot.end_offset))
                .with_epoch(epoch_i32(snapshot.epoch.0));
        }
        FetchResult::NotLeader => {
            answer.error_code = not_leader_code(partition.current_leader_epoch, epoch).code();
        }
    }
    if answer.error_code != 0 || version >= 16 {
        if let Some(e) = leader_endpoint(ctx, backend, leader).await {
            if version >= 16 {
                response.node_endpoints = vec![fetch_response::NodeEndpoint::default()
                    .with_node_id(e.id.into())
                    .with_host(StrBytes::from_string(e.host))
                    .with_port(e.port)
                    .with_rack(e.rack.map(StrBytes::from_string))];
            }
        }
    }
    tracing::debug!(
        replica = replica.id.0,
        fetch_offset = partition.fetch_offset,
        error = answer.error_code,
        leader = answer.current_leader.leader_id.0,
        epoch = answer.current_leader.leader_epoch,
        high_watermark = answer.high_watermark,
        bytes = records.as_ref().map_or(0, RecordParts::len),
        endpoints = response.node_endpoints.len(),
        "answered a broker's fetch"
    );
    response.responses = vec![topic_answer(answer)];
    response
}

/// Serves a FetchSnapshot request: a chunk of the Kafka rendering of the snapshot it names.
pub async fn fetch_snapshot<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    req: FetchSnapshotRequest,
    version: i16,
) -> FetchSnapshotResponse {
    let mut response = FetchSnapshotResponse::default();
    if let Err(e) = check_cluster(ctx, req.cluster_id.as_ref()) {
        response.error_code = e.code;
        return response;
    }
    let partition = match req.topics.as_slice() {
        [t] if t.name.0.as_str() == METADATA_TOPIC => match t.partitions.as_slice() {
            [p] if p.partition == 0 => p,
            _ => {
                response.error_code = K::InvalidRequest.code();
                return response;
            }
        },
        _ => {
            response.error_code = K::InvalidRequest.code();
            return response;
        }
    };
    let mut answer = fetch_snapshot_response::PartitionSnapshot::default()
        .with_index(0)
        .with_snapshot_id(
            fetch_snapshot_response::SnapshotId::default()
                .with_end_offset(partition.snapshot_id.end_offset)
                .with_epoch(partition.snapshot_id.epoch),
        );
    let topic_answer = |p| {
        fetch_snapshot_response::TopicSnapshot::default()
            .with_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![p])
    };
    let replica = match replica_of(req.replica_id.0, partition.replica_directory_id) {
        Ok(r) => r,
        Err(e) => {
            answer.error_code = e.code;
            response.topics = vec![topic_answer(answer)];
            return response;
        }
    };
    if partition.snapshot_id.end_offset < 0
        || partition.snapshot_id.epoch < 0
        || partition.position < 0
    {
        answer.error_code = K::InvalidRequest.code();
        response.topics = vec![topic_answer(answer)];
        return response;
    }
    let id = SnapshotId {
        end_offset: LogOffset(partition.snapshot_id.end_offset as u64),
        epoch: Epoch(partition.snapshot_id.epoch as u64),
    };
    let requested_epoch = partition.current_leader_epoch;
    match kafka_snapshot(ctx, backend, replica, requested_epoch, id).await {
        Ok(bytes) => {
            let position = partition.position as u64;
            let total = bytes.len() as u64;
            if position > total {
                answer.error_code = K::PositionOutOfRange.code();
            } else {
                let max = u64::try_from(req.max_bytes.max(1)).unwrap_or(1);
                let end = total.min(position + max);
                answer.size = total as i64;
                answer.position = position as i64;
                answer.unaligned_records = bytes.slice(position as usize..end as usize);
            }
        }
        Err(SnapshotError::Kafka(e)) => answer.error_code = e.code,
        Err(SnapshotError::NotLeader { epoch, leader }) => {
            answer.error_code = not_leader_code(requested_epoch, epoch).code();
            answer.current_leader = fetch_snapshot_response::LeaderIdAndEpoch::default()
                .with_leader_id(leader.map_or(-1, |l| l.0 as i32).into())
                .with_leader_epoch(epoch);
            if version >= 1 {
                if let Some(e) = leader_endpoint(ctx, backend, leader).await {
                    response.node_endpoints =
                        vec![fetch_snapshot_response::NodeEndpoint::default()
                            .with_node_id(e.id.into())
                            .with_host(StrBytes::from_string(e.host))
                            .with_port(e.port as u16)];
                }
            }
        }
    }
    response.topics = vec![topic_answer(answer)];
    response
}

enum SnapshotError {
    Kafka(KafkaError),
    NotLeader { epoch: i32, leader: Option<NodeId> },
}

/// The Kafka rendering of snapshot `id`: from the listener's cache while this node leads (a
/// node that lost leadership answers as the core does, naming the new leader), else
/// downloaded from the leader's core chunk by chunk (as any observer would), rendered, and
/// cached.
async fn kafka_snapshot<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    replica: ReplicaKey,
    current_leader_epoch: i32,
    id: SnapshotId,
) -> Result<Bytes, SnapshotError> {
    if backend.leadership().1 == Some(ctx.node_id) {
        if let Some(b) = ctx.log.cached_snapshot(id) {
            return Ok(b);
        }
    }
    let mut data = Vec::new();
    let (voters, kraft_version, leader_epoch) = loop {
        let request = RaftFetchSnapshot {
            epoch: Epoch(u64::try_from(current_leader_epoch.max(0)).unwrap_or(0)),
            replica,
            snapshot: id,
            position: data.len() as u64,
        };
        let answer = backend
            .call(RequestBody::FetchSnapshot(request), ctx.default_timeout_ms)
            .await;
        let r = match answer {
            Ok(ResponseBody::FetchSnapshot(r)) => r,
            Ok(other) => {
                return Err(SnapshotError::Kafka(KafkaError::new(
                    K::UnknownServerError,
                    format!("the node answered a snapshot fetch with {}", other.kind()),
                )))
            }
            Err(RpcError::NotController { leader }) => {
                let (epoch, known) = leadership(backend);
                return Err(SnapshotError::NotLeader {
                    epoch,
                    leader: leader.map(|l| l.id).or(known),
                });
            }
            Err(e) => return Err(SnapshotError::Kafka(KafkaError::rpc(&e))),
        };
        match r.result {
            FetchSnapshotResult::Chunk {
                voters: v,
                kraft_version,
                size_total,
                position,
                bytes,
                ..
            } => {
                if position != data.len() as u64 || bytes.is_empty() && position < size_total {
                    return Err(SnapshotError::Kafka(KafkaError::new(
                        K::UnknownServerError,
                        "the snapshot chunks did not follow each other",
                    )));
                }
                data.extend_from_slice(&bytes);
                if data.len() as u64 >= size_total {
                    break (v, kraft_version, epoch_i32(r.epoch.0));
                }
            }
            FetchSnapshotResult::SnapshotNotFound => {
                return Err(SnapshotError::Kafka(KafkaError::new(
                    K::SnapshotNotFound,
                    "the leader holds no such snapshot",
                )))
            }
            FetchSnapshotResult::NotLeader => {
                return Err(SnapshotError::NotLeader {
                    epoch: epoch_i32(r.epoch.0),
                    leader: r.leader,
                })
            }
        }
    };
    let render = render_context(ctx, backend, leader_epoch).await;
    let rendered =
        log::render_snapshot(id, &voters, kraft_version, &data, &render).map_err(|e| {
            tracing::error!(error = %e, "cannot render a snapshot for a broker");
            SnapshotError::Kafka(KafkaError::new(K::KafkaStorageError, e.to_string()))
        })?;
    // The snapshot's own FeatureLevel record gave the level in force at its end.
    ctx.log
        .note_metadata_version(leader_epoch, render.metadata_version.get(), id.end_offset);
    ctx.log.cache_snapshot(id, rendered.clone());
    Ok(rendered)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use corum_controller::control::cluster_control::{
        DescribeControllersResponse, DescribedController,
    };
    use corum_controller::control::feature_control::{
        supported_features, DescribeFeaturesResponse, FinalizedFeatureLevel,
    };
    use corum_controller::records::{encode_batch, ControllerEndpointV1, MetadataRecord};
    use corum_controller::records::{
        ConfigRecordV1, ConfigResourceType, FeatureLevelRecordV1, NoOpRecordV1, PartitionRecordV1,
    };
    use corum_protocol::LeaderHint;
    use corum_raft::control::{ControlRecord, LeaderChangeRecord};
    use corum_raft::message::{
        FetchResponse as RaftFetchResponse, FetchSnapshotResponse as RaftSnapshotResponse,
    };
    use corum_raft::{Batch, Endpoint, Payload, Voter, VoterSet};
    use corum_types::Uuid;
    use kafka_protocol::messages::{fetch_snapshot_request, BrokerId};

    use super::*;

    const CLUSTER: Uuid = Uuid([9; 16]);
    const BROKER: i32 = 7;

    fn ctx() -> ListenerContext {
        ListenerContext::for_tests(CLUSTER)
    }

    /// [`super::fetch`]'s answer with its records in it.
    async fn fetch<B: Backend>(
        ctx: &ListenerContext,
        backend: &B,
        req: FetchRequest,
        version: i16,
    ) -> FetchResponse {
        super::fetch(ctx, backend, req, version)
            .await
            .into_response()
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        futures_lite::future::block_on(f)
    }

    fn voters() -> VoterSet {
        VoterSet::new(
            (1..=3)
                .map(|id| Voter {
                    key: ReplicaKey {
                        id: NodeId(id),
                        directory_id: Uuid([id as u8; 16]),
                    },
                    endpoints: vec![Endpoint {
                        listener: "CONTROLLER".into(),
                        host: format!("c{id}"),
                        port: 9093,
                    }],
                })
                .collect(),
        )
        .expect("three distinct voters")
    }

    /// The controllers' registrations: 1 and 2 have a KAFKA listener, 3 none.
    fn controllers() -> Vec<DescribedController> {
        let endpoint = |name: &str, host: &str, port: u16| ControllerEndpointV1 {
            name: name.into(),
            host: host.into(),
            port,
            security_protocol: 0,
        };
        [
            (1, vec![endpoint("KAFKA", "k1", 9092)]),
            (
                2,
                vec![
                    endpoint("CONTROLLER", "c2", 9093),
                    endpoint("KAFKA", "k2", 9192),
                ],
            ),
            (3, vec![endpoint("CONTROLLER", "c3", 9093)]),
        ]
        .into_iter()
        .map(|(id, end_points)| DescribedController {
            controller_id: NodeId(id),
            incarnation_id: Uuid([id as u8; 16]),
            end_points,
            features: Vec::new(),
        })
        .collect()
    }

    /// A node answering the Raft fetches it is sent: each Fetch with `fetch`, each
    /// FetchSnapshot with a chunk of `snapshot` (at most `chunk_bytes` from the position
    /// asked) or with `snapshot_result` when set; it records the fetches.
    struct Node {
        fetch: Result<RaftFetchResponse, RpcError>,
        snapshot: Vec<u8>,
        chunk_bytes: usize,
        snapshot_result: Option<Result<RaftSnapshotResponse, RpcError>>,
        leadership: (u64, Option<NodeId>),
        sent: RefCell<Vec<RequestBody>>,
        /// The finalized `metadata.version` DescribeFeatures answers, and how often it was
        /// asked.
        metadata_version: u16,
        features_asked: std::cell::Cell<u32>,
        /// How often the controllers' registrations were read.
        controllers_asked: std::cell::Cell<u32>,
    }

    impl Node {
        fn answering(fetch: Result<RaftFetchResponse, RpcError>) -> Node {
            Node {
                fetch,
                snapshot: snapshot_data(),
                chunk_bytes: 100,
                snapshot_result: None,
                leadership: (6, Some(NodeId(2))),
                sent: RefCell::default(),
                metadata_version: 27,
                features_asked: Default::default(),
                controllers_asked: Default::default(),
            }
        }

        /// [`Node::answering`] on the node that leads (this listener's own, 1).
        fn leading(fetch: Result<RaftFetchResponse, RpcError>) -> Node {
            Node {
                leadership: (6, Some(NodeId(1))),
                ..Node::answering(fetch)
            }
        }

        fn fetches(&self) -> Vec<RaftFetch> {
            self.sent
                .borrow()
                .iter()
                .filter_map(|b| match b {
                    RequestBody::Fetch(f) => Some(f.clone()),
                    _ => None,
                })
                .collect()
        }

        fn snapshot_fetches(&self) -> Vec<RaftFetchSnapshot> {
            self.sent
                .borrow()
                .iter()
                .filter_map(|b| match b {
                    RequestBody::FetchSnapshot(f) => Some(f.clone()),
                    _ => None,
                })
                .collect()
        }
    }

    impl Backend for Node {
        async fn call(
            &self,
            body: RequestBody,
            _timeout_ms: u32,
        ) -> Result<ResponseBody, RpcError> {
            let answer = match &body {
                RequestBody::DescribeControllers => {
                    self.controllers_asked.set(self.controllers_asked.get() + 1);
                    return Ok(ResponseBody::DescribeControllers(
                        DescribeControllersResponse {
                            controllers: controllers(),
                        },
                    ));
                }
                RequestBody::DescribeFeatures => {
                    self.features_asked.set(self.features_asked.get() + 1);
                    return Ok(ResponseBody::DescribeFeatures(DescribeFeaturesResponse {
                        finalized: vec![FinalizedFeatureLevel {
                            name: METADATA_VERSION.into(),
                            min_level: self.metadata_version,
                            max_level: self.metadata_version,
                        }],
                        finalized_epoch: Some(LogOffset(19)),
                        supported: supported_features(),
                    }));
                }
                RequestBody::Fetch(_) => self.fetch.clone().map(|r| ResponseBody::Fetch(r.into())),
                RequestBody::FetchSnapshot(r) => match &self.snapshot_result {
                    Some(answer) => answer.clone(),
                    None => {
                        let start = (r.position as usize).min(self.snapshot.len());
                        let end = (start + self.chunk_bytes).min(self.snapshot.len());
                        Ok(RaftSnapshotResponse {
                            epoch: Epoch(6),
                            leader: Some(NodeId(1)),
                            result: FetchSnapshotResult::Chunk {
                                snapshot: r.snapshot,
                                voters: voters(),
                                kraft_version: 1,
                                size_total: self.snapshot.len() as u64,
                                position: r.position,
                                bytes: Payload::from(&self.snapshot[start..end]),
                            },
                        })
                    }
                }
                .map(|r| ResponseBody::FetchSnapshot(r.into())),
                other => panic!("unexpected {}", other.kind()),
            };
            self.sent.borrow_mut().push(body);
            answer
        }

        fn leader(&self) -> Option<NodeId> {
            self.leadership.1
        }

        fn wall_clock_ms(&self) -> i64 {
            0
        }

        fn leadership(&self) -> (u64, Option<NodeId>) {
            self.leadership
        }
    }

    fn answer(epoch: u64, leader: u32, result: FetchResult) -> Result<RaftFetchResponse, RpcError> {
        Ok(RaftFetchResponse {
            epoch: Epoch(epoch),
            leader: Some(NodeId(leader)),
            result,
        })
    }

    /// A fetch of `__cluster_metadata-0` at `version` by broker 7 (directory [7; 16] from
    /// v17), as a Kafka broker sends it.
    fn request(
        version: i16,
        epoch: i32,
        fetch_offset: i64,
        last_fetched_epoch: i32,
    ) -> FetchRequest {
        let mut partition = fetch_request::FetchPartition::default()
            .with_partition(0)
            .with_current_leader_epoch(epoch)
            .with_fetch_offset(fetch_offset)
            .with_last_fetched_epoch(last_fetched_epoch);
        if version >= 17 {
            partition.replica_directory_id = uuid::Uuid::from_bytes([7; 16]);
        }
        let mut topic = fetch_request::FetchTopic::default().with_partitions(vec![partition]);
        if version >= 13 {
            topic.topic_id = METADATA_TOPIC_ID;
        } else {
            topic.topic = TopicName(StrBytes::from_static_str(METADATA_TOPIC));
        }
        let mut r = FetchRequest::default()
            .with_max_wait_ms(500)
            .with_topics(vec![topic]);
        if version >= 15 {
            r.replica_state =
                fetch_request::ReplicaState::default().with_replica_id(BrokerId(BROKER));
        } else {
            r.replica_id = BrokerId(BROKER);
        }
        r
    }

    fn partition(r: &FetchResponse) -> &fetch_response::PartitionData {
        let [topic] = r.responses.as_slice() else {
            panic!("one topic answered: {r:?}");
        };
        let [p] = topic.partitions.as_slice() else {
            panic!("one partition answered: {r:?}");
        };
        p
    }

    fn batches() -> Vec<Batch> {
        let noop = MetadataRecord::NoOp(NoOpRecordV1 {});
        vec![
            Batch {
                base_offset: LogOffset(20),
                epoch: Epoch(6),
                record_count: 1,
                control: true,
                timestamp_ms: -1,
                payload: corum_raft::control::encode(vec![ControlRecord::LeaderChange(
                    LeaderChangeRecord {
                        epoch: Epoch(6),
                        leader: NodeId(1),
                        granted_by: vec![NodeId(1), NodeId(2)],
                    },
                )]),
            },
            Batch {
                base_offset: LogOffset(21),
                epoch: Epoch(6),
                record_count: 2,
                control: false,
                timestamp_ms: -1,
                payload: Payload::from(encode_batch(&[noop.clone(), noop]).as_slice()),
            },
        ]
    }

    /// Batches come back rendered as Kafka batches with the leader's high watermark and the
    /// current leader, addressed to the topic by name below v13 and by id from v13; from v16
    /// NodeEndpoints carries the leader's endpoint on this listener.
    #[test]
    fn batches_map_to_records_high_watermark_and_leader() {
        let expected = log::render_batches(&batches(), &RenderContext::default(), usize::MAX)
            .expect("valid batches render");
        for version in 4..=18 {
            let node = Node::answering(answer(
                6,
                2,
                FetchResult::Batches {
                    fetch_offset: LogOffset(20),
                    last_fetched_epoch: Epoch(5),
                    batches: batches(),
                    high_watermark: LogOffset(23),
                },
            ));
            let (offset, last) = if version >= 12 { (20, 5) } else { (0, -1) };
            let r = run(fetch(
                &ctx(),
                &node,
                request(version, 6, offset, last),
                version,
            ));
            assert_eq!(r.error_code, 0, "v{version}");
            let topic = &r.responses[0];
            if version >= 13 {
                assert_eq!(topic.topic_id, METADATA_TOPIC_ID, "v{version}");
            } else {
                assert_eq!(topic.topic.0.as_str(), METADATA_TOPIC, "v{version}");
            }
            let p = partition(&r);
            assert_eq!(p.error_code, 0, "v{version}");
            assert_eq!(p.records.as_ref(), Some(&expected), "v{version}");
            assert_eq!(p.high_watermark, 23);
            assert_eq!(
                (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
                (2, 6)
            );
            assert_eq!(p.diverging_epoch, Default::default());
            assert_eq!(p.snapshot_id, Default::default());
            if version >= 16 {
                let [e] = r.node_endpoints.as_slice() else {
                    panic!("v{version}: the leader's endpoint: {:?}", r.node_endpoints);
                };
                assert_eq!(
                    (e.node_id.0, e.host.as_str(), e.port, e.rack.as_ref()),
                    (2, "k2", 9192, None)
                );
            } else {
                assert!(r.node_endpoints.is_empty(), "v{version}");
            }
        }
    }

    /// A broker fetching from this node (the leader) is told this node's advertised endpoint
    /// without the controllers' registrations being read; fetching from a standby, it is told
    /// the leader's registered endpoint, read from them.
    #[test]
    fn the_leaders_own_endpoint_is_named_without_reading_the_registrations() {
        let nothing_new = |leader| {
            answer(
                6,
                leader,
                FetchResult::Batches {
                    fetch_offset: LogOffset(23),
                    last_fetched_epoch: Epoch(6),
                    batches: Vec::new(),
                    high_watermark: LogOffset(23),
                },
            )
        };
        let endpoints = |r: &FetchResponse| -> Vec<(i32, String, i32)> {
            r.node_endpoints
                .iter()
                .map(|e| (e.node_id.0, e.host.to_string(), e.port))
                .collect()
        };
        let node = Node::leading(nothing_new(1));
        let r = run(fetch(&ctx(), &node, request(17, 6, 23, 6), 17));
        assert_eq!(endpoints(&r), vec![(1, "localhost".to_string(), 9092)]);
        assert_eq!(node.controllers_asked.get(), 0);
        let node = Node::answering(nothing_new(2));
        let r = run(fetch(&ctx(), &node, request(17, 6, 23, 6), 17));
        assert_eq!(endpoints(&r), vec![(2, "k2".to_string(), 9192)]);
        assert_eq!(node.controllers_asked.get(), 1);
    }

    /// The listener renders a data batch once for the brokers that fetch it: a second fetch
    /// of the same batches gets the same records, its data batch taken from the listener's
    /// cache (the control batch is rendered each time).
    #[test]
    fn brokers_fetching_the_same_batches_share_one_rendering() {
        let ctx = ctx();
        let node = Node::leading(answer(
            6,
            1,
            FetchResult::Batches {
                fetch_offset: LogOffset(20),
                last_fetched_epoch: Epoch(5),
                batches: batches(),
                high_watermark: LogOffset(23),
            },
        ));
        let expected = log::render_batches(&batches(), &RenderContext::default(), usize::MAX)
            .expect("valid batches render");
        for (fetch_no, counts) in [(1, (0, 1)), (2, (1, 1))] {
            let r = run(fetch(&ctx, &node, request(18, 6, 20, 5), 18));
            assert_eq!(
                partition(&r).records.as_ref(),
                Some(&expected),
                "fetch {fetch_no}"
            );
            assert_eq!(ctx.log.render_counts(), counts, "fetch {fetch_no}");
        }
    }

    /// Records are rendered at the finalized `metadata.version` the core names (asked once
    /// per leader epoch): at 3.6-IV2 (14) a partition carries no directories (PartitionRecord
    /// v0); a FeatureLevel record rendered later in the log moves the level for what follows
    /// it, and a leader change asks again.
    #[test]
    fn records_follow_the_finalized_metadata_version() {
        let partition_record = MetadataRecord::Partition(PartitionRecordV1 {
            partition_id: corum_controller::PartitionId(0),
            topic_id: corum_controller::TopicId(corum_types::Uuid([3; 16])),
            replicas: vec![NodeId(1)],
            isr: vec![NodeId(1)],
            leader: Some(NodeId(1)),
            leader_epoch: corum_controller::LeaderEpoch(0),
            partition_epoch: corum_controller::PartitionEpoch(0),
        });
        let upgrade = MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
            name: METADATA_VERSION.into(),
            min_level: 27,
            max_level: 27,
        });
        let data = |base: u64, records: &[MetadataRecord]| Batch {
            base_offset: LogOffset(base),
            epoch: Epoch(6),
            record_count: records.len() as u32,
            control: false,
            timestamp_ms: -1,
            payload: Payload::from(encode_batch(records).as_slice()),
        };
        let partition_versions = |r: &FetchResponse| -> Vec<i16> {
            let bytes = partition(r).records.clone().expect("records");
            crate::log::tests::decode_all(&bytes)
                .iter()
                .flat_map(|set| set.records.iter())
                .filter_map(|rec| {
                    let (m, v) = crate::metadata::AnyMetadataRecord::decode_framed(
                        rec.value.clone().expect("a value"),
                    )
                    .expect("framed");
                    matches!(m, crate::metadata::AnyMetadataRecord::Partition(_)).then_some(v)
                })
                .collect()
        };
        let ctx = ctx();
        let fetch_at =
            |node: &Node, offset: i64| run(fetch(&ctx, node, request(17, 6, offset, 6), 17));
        let mut node = Node::answering(answer(
            6,
            2,
            FetchResult::Batches {
                fetch_offset: LogOffset(20),
                last_fetched_epoch: Epoch(6),
                batches: vec![data(20, std::slice::from_ref(&partition_record))],
                high_watermark: LogOffset(21),
            },
        ));
        node.metadata_version = 14;
        assert_eq!(partition_versions(&fetch_at(&node, 20)), vec![0]);
        // The upgrade, then a partition: rendered at the new level.
        node.fetch = answer(
            6,
            2,
            FetchResult::Batches {
                fetch_offset: LogOffset(21),
                last_fetched_epoch: Epoch(6),
                batches: vec![data(21, &[upgrade, partition_record.clone()])],
                high_watermark: LogOffset(23),
            },
        );
        assert_eq!(partition_versions(&fetch_at(&node, 21)), vec![2]);
        // A broker catching up reads the old partition at the old level again (the
        // remembered level does not go back), then the newest at the new one.
        node.fetch = answer(
            6,
            2,
            FetchResult::Batches {
                fetch_offset: LogOffset(23),
                last_fetched_epoch: Epoch(6),
                batches: vec![data(23, std::slice::from_ref(&partition_record))],
                high_watermark: LogOffset(24),
            },
        );
        assert_eq!(partition_versions(&fetch_at(&node, 23)), vec![2]);
        assert_eq!(node.features_asked.get(), 1, "asked once in epoch 6");
        // Epoch 7: asked again (the core now says 14: a downgrade by another leader).
        node.fetch = answer(
            7,
            2,
            FetchResult::Batches {
                fetch_offset: LogOffset(24),
                last_fetched_epoch: Epoch(6),
                batches: vec![data(24, &[partition_record])],
                high_watermark: LogOffset(25),
            },
        );
        assert_eq!(partition_versions(&fetch_at(&node, 24)), vec![0]);
        assert_eq!(node.features_asked.get(), 2);
    }

    /// A diverging log and a fetch below the log start map to Kafka's DivergingEpoch and
    /// SnapshotId, with no records.
    #[test]
    fn diverging_and_snapshot_needed_map_to_kafkas_fields() {
        let node = Node::answering(answer(
            6,
            1,
            FetchResult::Diverging {
                fetch_offset: LogOffset(30),
                last_fetched_epoch: Epoch(5),
                epoch: Epoch(4),
                end_offset: LogOffset(25),
            },
        ));
        let r = run(fetch(&ctx(), &node, request(17, 6, 30, 5), 17));
        let p = partition(&r);
        assert_eq!(p.error_code, 0);
        assert_eq!(
            (p.diverging_epoch.epoch, p.diverging_epoch.end_offset),
            (4, 25)
        );
        assert_eq!(p.snapshot_id, Default::default());
        assert!(p.records.as_ref().is_none_or(Bytes::is_empty));
        assert_eq!(p.current_leader.leader_id.0, 1);

        let node = Node::answering(answer(
            6,
            1,
            FetchResult::SnapshotNeeded {
                snapshot: SnapshotId {
                    end_offset: LogOffset(20),
                    epoch: Epoch(5),
                },
            },
        ));
        let r = run(fetch(&ctx(), &node, request(17, 6, 0, 0), 17));
        let p = partition(&r);
        assert_eq!(p.error_code, 0);
        assert_eq!((p.snapshot_id.end_offset, p.snapshot_id.epoch), (20, 5));
        assert_eq!(p.diverging_epoch, Default::default());
        assert!(p.records.as_ref().is_none_or(Bytes::is_empty));
    }

    /// Below Fetch v12 an answer has no diverging epoch or snapshot id to carry: a fetch that
    /// needs one is refused with UNSUPPORTED_VERSION, never answered as if nothing were new.
    /// Its bytes, decoded as the broker would, say so.
    #[test]
    fn a_fetch_below_v12_that_needs_kraft_fields_is_refused() {
        let results = [
            FetchResult::Diverging {
                fetch_offset: LogOffset(0),
                last_fetched_epoch: Epoch(0),
                epoch: Epoch(4),
                end_offset: LogOffset(0),
            },
            FetchResult::SnapshotNeeded {
                snapshot: SnapshotId {
                    end_offset: LogOffset(20),
                    epoch: Epoch(5),
                },
            },
        ];
        for result in results {
            for version in [4, 11, 12, 17] {
                let node = Node::answering(answer(6, 1, result.clone()));
                let r = run(fetch(&ctx(), &node, request(version, 6, 0, -1), version));
                let api = kafka_protocol::messages::ApiKey::Fetch;
                let answer = crate::service::Answer {
                    api,
                    version,
                    correlation_id: 1,
                    body: kafka_protocol::messages::ResponseKind::Fetch(r),
                    records: None,
                };
                let encoded = crate::response::encode_answer(answer).expect("encodes");
                let prefix = crate::frame::SIZE_PREFIX_BYTES;
                let (_, sent) =
                    crate::response::decode(encoded.to_bytes().slice(prefix..), api, version);
                let kafka_protocol::messages::ResponseKind::Fetch(sent) = sent else {
                    panic!("a Fetch answer: {sent:?}");
                };
                let p = partition(&sent);
                let carried =
                    p.diverging_epoch != Default::default() || p.snapshot_id != Default::default();
                if version >= 12 {
                    assert_eq!(p.error_code, 0, "v{version} {result:?}");
                    assert!(carried, "v{version} {result:?}: {p:?}");
                } else {
                    assert_eq!(
                        p.error_code,
                        K::UnsupportedVersion.code(),
                        "v{version} {result:?}"
                    );
                    assert!(!carried, "v{version}");
                }
            }
        }
    }

    /// A node that does not lead answers by the epoch the broker asked for: an older one is
    /// FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, the same or none
    /// NOT_LEADER_OR_FOLLOWER; with the current leader and its endpoint. The core's answer
    /// names the leader, else the node's `NotController` hint, else the node's own view.
    #[test]
    fn not_leader_codes_follow_the_requested_epoch() {
        let hint = LeaderHint {
            id: NodeId(1),
            host: "c1".into(),
            port: 9093,
        };
        let answers = [
            // (the node's answer, the leader and epoch the broker must be told)
            (answer(7, 2, FetchResult::NotLeader), (2, 7)),
            (
                Err(RpcError::NotController {
                    leader: Some(hint.clone()),
                }),
                (1, 6),
            ),
            (Err(RpcError::NotController { leader: None }), (2, 6)),
        ];
        for (node_answer, (leader, epoch)) in answers {
            for (requested, code) in [
                (epoch - 1, K::FencedLeaderEpoch),
                (epoch + 1, K::UnknownLeaderEpoch),
                (epoch, K::NotLeaderOrFollower),
                (-1, K::NotLeaderOrFollower),
            ] {
                let node = Node::answering(node_answer.clone());
                let r = run(fetch(&ctx(), &node, request(17, requested, 0, -1), 17));
                let p = partition(&r);
                assert_eq!(p.error_code, code.code(), "epoch {requested} of {epoch}");
                assert_eq!(
                    (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
                    (leader, epoch)
                );
                assert!(p.records.as_ref().is_none_or(Bytes::is_empty));
                let endpoints: Vec<i32> = r.node_endpoints.iter().map(|e| e.node_id.0).collect();
                assert_eq!(endpoints, vec![leader]);
            }
        }
        // No leader known at all: -1, and no endpoint.
        let mut node = Node::answering(Err(RpcError::NotController { leader: None }));
        node.leadership = (6, None);
        let r = run(fetch(&ctx(), &node, request(17, 6, 0, -1), 17));
        assert_eq!(partition(&r).current_leader.leader_id.0, -1);
        assert!(r.node_endpoints.is_empty());
    }

    /// Other failures of the node carry their Kafka code; a rendering failure is
    /// KAFKA_STORAGE_ERROR rather than a broken batch.
    #[test]
    fn other_failures_carry_kafka_codes() {
        for (node_answer, code) in [
            (Err(RpcError::Timeout { timeout_ms: 1 }), K::RequestTimedOut),
            (
                Err(RpcError::ObserverRefused {
                    replica_id: NodeId(7),
                    reason: "a voter".into(),
                }),
                K::InvalidRequest,
            ),
        ] {
            let node = Node::answering(node_answer);
            let r = run(fetch(&ctx(), &node, request(17, 6, 0, -1), 17));
            assert_eq!(partition(&r).error_code, code.code());
        }
        let mut broken = batches();
        broken[1].record_count = 5;
        let node = Node::answering(answer(
            6,
            1,
            FetchResult::Batches {
                fetch_offset: LogOffset(20),
                last_fetched_epoch: Epoch(5),
                batches: broken,
                high_watermark: LogOffset(23),
            },
        ));
        let r = run(fetch(&ctx(), &node, request(17, 6, 20, 5), 17));
        let p = partition(&r);
        assert_eq!(p.error_code, K::KafkaStorageError.code());
        assert!(p.records.as_ref().is_none_or(Bytes::is_empty));
    }

    /// The fetch reaches the core as the broker's own observer fetch (its id and directory,
    /// offsets, epochs, wait), with the high watermark the broker knows: Fetch v18's field,
    /// -1 meaning none; before v18 (or with v18's "not supported" value) the one this
    /// listener last sent that replica.
    #[test]
    fn the_known_high_watermark_comes_from_v18_or_from_what_was_sent() {
        let ctx = ctx();
        let node = Node::answering(answer(
            6,
            1,
            FetchResult::Batches {
                fetch_offset: LogOffset(20),
                last_fetched_epoch: Epoch(5),
                batches: Vec::new(),
                high_watermark: LogOffset(42),
            },
        ));
        let with_hwm = |hwm: i64| {
            let mut r = request(18, 6, 20, 5);
            r.topics[0].partitions[0].high_watermark = hwm;
            r
        };
        // Nothing sent to broker 7 yet.
        run(fetch(&ctx, &node, request(17, 6, 20, 5), 17));
        // The answer above sent 42.
        run(fetch(&ctx, &node, request(17, 6, 20, 5), 17));
        run(fetch(&ctx, &node, request(14, 6, 20, 5), 14));
        run(fetch(&ctx, &node, with_hwm(33), 18));
        run(fetch(&ctx, &node, with_hwm(-1), 18));
        run(fetch(&ctx, &node, with_hwm(i64::MAX), 18));
        // Another replica: nothing sent to it.
        let mut other = request(17, 6, 20, 5);
        other.replica_state.replica_id = BrokerId(8);
        run(fetch(&ctx, &node, other, 17));
        let fetches = node.fetches();
        let known: Vec<u64> = fetches.iter().map(|f| f.high_watermark.0).collect();
        assert_eq!(known, vec![0, 42, 42, 33, 0, 42, 0]);
        let f = &fetches[0];
        assert_eq!(f.epoch, Epoch(6));
        assert_eq!(f.replica.id, NodeId(7));
        assert_eq!(f.replica.directory_id, Uuid([7; 16]));
        assert_eq!(
            (f.fetch_offset, f.last_fetched_epoch),
            (LogOffset(20), Epoch(5))
        );
        assert_eq!(f.wait_max_ms, 500);
        assert_eq!(
            fetches[2].replica.directory_id,
            Uuid::default(),
            "v14 has none"
        );
        assert_eq!(fetches[6].replica.id, NodeId(8));
    }

    /// What no Kafka leader would serve is refused before the core is asked: another topic
    /// or partition, more than one, another cluster (INCONSISTENT_CLUSTER_ID), a negative
    /// replica id or offset, a last fetched epoch above the leader epoch.
    #[test]
    fn invalid_fetches_are_refused_without_asking_the_core() {
        let cluster = ctx().cluster_id_text();
        let mut wrong_name = request(12, 6, 0, -1);
        wrong_name.topics[0].topic = TopicName(StrBytes::from_static_str("orders"));
        let mut wrong_id = request(13, 6, 0, -1);
        wrong_id.topics[0].topic_id = uuid::Uuid::from_u64_pair(0, 2);
        let mut name_at_v13 = request(13, 6, 0, -1);
        name_at_v13.topics[0].topic_id = uuid::Uuid::nil();
        name_at_v13.topics[0].topic = TopicName(StrBytes::from_static_str(METADATA_TOPIC));
        let mut two_partitions = request(17, 6, 0, -1);
        let mut second = two_partitions.topics[0].partitions[0].clone();
        second.partition = 1;
        two_partitions.topics[0].partitions.push(second);
        let mut partition_one = request(17, 6, 0, -1);
        partition_one.topics[0].partitions[0].partition = 1;
        let mut two_topics = request(17, 6, 0, -1);
        two_topics.topics.push(two_topics.topics[0].clone());
        let mut no_topic = request(17, 6, 0, -1);
        no_topic.topics.clear();
        let mut other_cluster = request(17, 6, 0, -1);
        other_cluster.cluster_id = Some(StrBytes::from_static_str("another-cluster"));
        let top_level = [
            (wrong_name, 12, K::InvalidRequest),
            (wrong_id, 13, K::InvalidRequest),
            (name_at_v13, 13, K::InvalidRequest),
            (two_partitions, 17, K::InvalidRequest),
            (partition_one, 17, K::InvalidRequest),
            (two_topics, 17, K::InvalidRequest),
            (no_topic, 17, K::InvalidRequest),
            (other_cluster, 17, K::InconsistentClusterId),
        ];
        for (i, (req, version, code)) in top_level.into_iter().enumerate() {
            let node = Node::answering(answer(6, 1, FetchResult::NotLeader));
            let r = run(fetch(&ctx(), &node, req, version));
            assert_eq!(r.error_code, code.code(), "case {i}");
            assert!(r.responses.is_empty(), "case {i}");
            assert!(
                node.sent.borrow().is_empty(),
                "case {i}: the node was asked"
            );
        }

        let mut negative_replica = request(17, 6, 0, -1);
        negative_replica.replica_state.replica_id = BrokerId(-1);
        let mut negative_replica_v14 = request(14, 6, 0, -1);
        negative_replica_v14.replica_id = BrokerId(-1);
        let negative_offset = request(17, 6, -1, -1);
        let offset_without_epoch = request(17, 6, 10, -1);
        let epoch_above_leader = request(17, 6, 10, 7);
        let per_partition = [
            (negative_replica, 17),
            (negative_replica_v14, 14),
            (negative_offset, 17),
            (offset_without_epoch, 17),
            (epoch_above_leader, 17),
        ];
        for (i, (req, version)) in per_partition.into_iter().enumerate() {
            let node = Node::answering(answer(6, 1, FetchResult::NotLeader));
            let r = run(fetch(&ctx(), &node, req, version));
            assert_eq!(r.error_code, 0, "case {i}");
            assert_eq!(
                partition(&r).error_code,
                K::InvalidRequest.code(),
                "case {i}"
            );
            assert!(
                node.sent.borrow().is_empty(),
                "case {i}: the node was asked"
            );
        }

        // This cluster's own id is accepted.
        let mut own_cluster = request(17, 6, 0, -1);
        own_cluster.cluster_id = Some(StrBytes::from_string(cluster));
        let node = Node::answering(answer(6, 1, FetchResult::NotLeader));
        let r = run(fetch(&ctx(), &node, own_cluster, 17));
        assert_eq!(r.error_code, 0);
        assert_eq!(node.fetches().len(), 1);
    }

    // -----------------------------------------------------------------------------------------
    // FetchSnapshot.

    const SNAPSHOT: SnapshotId = SnapshotId {
        end_offset: LogOffset(20),
        epoch: Epoch(5),
    };

    /// A corum snapshot's data: one encoded batch of the image's records, a few kilobytes.
    fn snapshot_data() -> Vec<u8> {
        let records: Vec<MetadataRecord> = (0..60u32)
            .map(|i| {
                MetadataRecord::Config(ConfigRecordV1 {
                    resource_type: ConfigResourceType::Topic,
                    resource_name: format!("topic-{i}"),
                    key: "retention.ms".into(),
                    value: Some(format!("{}", i * 1000)),
                })
            })
            .collect();
        encode_batch(&records).to_vec()
    }

    /// The snapshot as the listener renders it: each voter also listed at its endpoint on
    /// this listener, from [`controllers`] (this node at its own advertised endpoint; voter 3
    /// registered no KAFKA listener).
    fn rendered() -> Bytes {
        let kafka = |id, host: &str, port| {
            (
                NodeId(id),
                Endpoint {
                    listener: "KAFKA".into(),
                    host: host.into(),
                    port,
                },
            )
        };
        let render = RenderContext {
            voter_endpoints: vec![kafka(1, "localhost", 9092), kafka(2, "k2", 9192)],
            ..RenderContext::default()
        };
        log::render_snapshot(SNAPSHOT, &voters(), 1, &snapshot_data(), &render)
            .expect("the snapshot renders")
    }

    fn snapshot_request(
        id: SnapshotId,
        position: i64,
        max_bytes: i32,
        epoch: i32,
    ) -> FetchSnapshotRequest {
        let partition = fetch_snapshot_request::PartitionSnapshot::default()
            .with_partition(0)
            .with_current_leader_epoch(epoch)
            .with_snapshot_id(
                fetch_snapshot_request::SnapshotId::default()
                    .with_end_offset(id.end_offset.0 as i64)
                    .with_epoch(id.epoch.0 as i32),
            )
            .with_position(position);
        FetchSnapshotRequest::default()
            .with_replica_id(BrokerId(BROKER))
            .with_max_bytes(max_bytes)
            .with_topics(vec![fetch_snapshot_request::TopicSnapshot::default()
                .with_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
                .with_partitions(vec![partition])])
    }

    fn snapshot_partition(
        r: &FetchSnapshotResponse,
    ) -> &fetch_snapshot_response::PartitionSnapshot {
        assert_eq!(r.error_code, 0, "{r:?}");
        let [topic] = r.topics.as_slice() else {
            panic!("one topic answered: {r:?}");
        };
        assert_eq!(topic.name.0.as_str(), METADATA_TOPIC);
        let [p] = topic.partitions.as_slice() else {
            panic!("one partition answered: {r:?}");
        };
        p
    }

    /// Chunks asked for by position with any max_bytes reassemble into exactly the Kafka
    /// rendering of the corum snapshot, downloaded from the core chunk by chunk.
    #[test]
    fn chunks_reassemble_into_the_rendered_snapshot() {
        let expected = rendered();
        assert!(expected.len() > 1_000, "a snapshot of several chunks");
        for max_bytes in [1, 7, 100, 999, i32::MAX] {
            let ctx = ctx();
            let node = Node::leading(answer(6, 1, FetchResult::NotLeader));
            let mut got = Vec::new();
            loop {
                let r = run(fetch_snapshot(
                    &ctx,
                    &node,
                    snapshot_request(SNAPSHOT, got.len() as i64, max_bytes, 6),
                    1,
                ));
                let p = snapshot_partition(&r);
                assert_eq!(p.error_code, 0);
                assert_eq!((p.snapshot_id.end_offset, p.snapshot_id.epoch), (20, 5));
                assert_eq!(p.size, expected.len() as i64);
                assert_eq!(p.position, got.len() as i64);
                assert!(p.unaligned_records.len() <= max_bytes as usize);
                got.extend_from_slice(&p.unaligned_records);
                if got.len() as i64 >= p.size {
                    break;
                }
            }
            assert_eq!(got, expected, "max_bytes {max_bytes}");
            // The core's chunks were asked for in order, from 0, for broker 7 at epoch 6.
            let asked: Vec<u64> = node.snapshot_fetches().iter().map(|f| f.position).collect();
            let data_len = snapshot_data().len() as u64;
            let chunks: Vec<u64> = (0..data_len.div_ceil(100)).map(|i| i * 100).collect();
            assert_eq!(asked, chunks, "max_bytes {max_bytes}");
            let f = &node.snapshot_fetches()[0];
            assert_eq!(
                (f.replica.id, f.epoch, f.snapshot),
                (NodeId(7), Epoch(6), SNAPSHOT)
            );
        }
    }

    /// The rendering is cached per snapshot id: the core is asked once for a snapshot
    /// however many chunks are fetched, and again for another id.
    #[test]
    fn the_rendering_is_cached_per_snapshot_id() {
        let ctx = ctx();
        let mut node = Node::leading(answer(6, 1, FetchResult::NotLeader));
        let chunks_per_download = snapshot_data().len().div_ceil(100);
        let asked = |id, position| {
            let r = run(fetch_snapshot(
                &ctx,
                &node,
                snapshot_request(id, position, 64, 6),
                1,
            ));
            assert_eq!(snapshot_partition(&r).error_code, 0);
            node.snapshot_fetches().len()
        };
        assert_eq!(asked(SNAPSHOT, 0), chunks_per_download);
        assert_eq!(asked(SNAPSHOT, 64), chunks_per_download);
        assert_eq!(asked(SNAPSHOT, 0), chunks_per_download);
        let newer = SnapshotId {
            end_offset: LogOffset(40),
            epoch: Epoch(6),
        };
        assert_eq!(asked(newer, 0), 2 * chunks_per_download);
        assert_eq!(asked(newer, 128), 2 * chunks_per_download);
        // A node that no longer leads does not answer from its cache: its core is asked
        // again (a real one then names the new leader; this one still serves the chunks).
        node.leadership = (7, Some(NodeId(2)));
        run(fetch_snapshot(
            &ctx,
            &node,
            snapshot_request(newer, 0, 64, 7),
            1,
        ));
        assert!(node.snapshot_fetches().len() > 2 * chunks_per_download);
    }

    /// A position past the end is POSITION_OUT_OF_RANGE; the end itself is an empty chunk.
    #[test]
    fn positions_past_the_end_are_out_of_range() {
        let len = rendered().len() as i64;
        let ctx = ctx();
        let node = Node::answering(answer(6, 1, FetchResult::NotLeader));
        let r = run(fetch_snapshot(
            &ctx,
            &node,
            snapshot_request(SNAPSHOT, len + 1, 10, 6),
            1,
        ));
        let p = snapshot_partition(&r);
        assert_eq!(p.error_code, K::PositionOutOfRange.code());
        assert!(p.unaligned_records.is_empty());
        let r = run(fetch_snapshot(
            &ctx,
            &node,
            snapshot_request(SNAPSHOT, len, 10, 6),
            1,
        ));
        let p = snapshot_partition(&r);
        assert_eq!((p.error_code, p.size, p.position), (0, len, len));
        assert!(p.unaligned_records.is_empty());
    }

    /// The core's refusals carry Kafka's codes: no such snapshot, not the leader (by the
    /// requested epoch, with the leader and, from v1, its endpoint), a failed call.
    #[test]
    fn snapshot_refusals_carry_kafka_codes() {
        let refusal = |result| {
            Some(Ok(RaftSnapshotResponse {
                epoch: Epoch(7),
                leader: Some(NodeId(2)),
                result,
            }))
        };
        let cases = [
            (
                refusal(FetchSnapshotResult::SnapshotNotFound),
                7,
                K::SnapshotNotFound,
            ),
            (
                refusal(FetchSnapshotResult::NotLeader),
                7,
                K::NotLeaderOrFollower,
            ),
            (
                refusal(FetchSnapshotResult::NotLeader),
                6,
                K::FencedLeaderEpoch,
            ),
            (
                refusal(FetchSnapshotResult::NotLeader),
                8,
                K::UnknownLeaderEpoch,
            ),
            (
                Some(Err(RpcError::NotController { leader: None })),
                6,
                K::NotLeaderOrFollower,
            ),
            (
                Some(Err(RpcError::Timeout { timeout_ms: 1 })),
                7,
                K::RequestTimedOut,
            ),
        ];
        for (i, (result, epoch, code)) in cases.into_iter().enumerate() {
            for version in [0, 1] {
                let mut node = Node::answering(answer(6, 1, FetchResult::NotLeader));
                node.snapshot_result = result.clone();
                let r = run(fetch_snapshot(
                    &ctx(),
                    &node,
                    snapshot_request(SNAPSHOT, 0, 100, epoch),
                    version,
                ));
                let p = snapshot_partition(&r);
                assert_eq!(p.error_code, code.code(), "case {i} v{version}");
                assert!(p.unaligned_records.is_empty());
                let not_leader = code != K::SnapshotNotFound && code != K::RequestTimedOut;
                if not_leader {
                    let expected_epoch = if i == 4 { 6 } else { 7 };
                    assert_eq!(
                        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
                        (2, expected_epoch),
                        "case {i}"
                    );
                }
                let endpoints: Vec<(i32, &str, u16)> = r
                    .node_endpoints
                    .iter()
                    .map(|e| (e.node_id.0, e.host.as_str(), e.port))
                    .collect();
                if not_leader && version >= 1 {
                    assert_eq!(endpoints, vec![(2, "k2", 9192)], "case {i}");
                } else {
                    assert!(endpoints.is_empty(), "case {i} v{version}");
                }
            }
        }
    }

    /// Another cluster, topic or partition, and negative ids, positions or offsets are
    /// refused before the core is asked.
    #[test]
    fn invalid_snapshot_fetches_are_refused_without_asking_the_core() {
        let mut other_cluster = snapshot_request(SNAPSHOT, 0, 100, 6);
        other_cluster.cluster_id = Some(StrBytes::from_static_str("another-cluster"));
        let mut wrong_topic = snapshot_request(SNAPSHOT, 0, 100, 6);
        wrong_topic.topics[0].name = TopicName(StrBytes::from_static_str("orders"));
        let mut partition_one = snapshot_request(SNAPSHOT, 0, 100, 6);
        partition_one.topics[0].partitions[0].partition = 1;
        let mut two_topics = snapshot_request(SNAPSHOT, 0, 100, 6);
        two_topics.topics.push(two_topics.topics[0].clone());
        for (i, (req, code)) in [
            (other_cluster, K::InconsistentClusterId),
            (wrong_topic, K::InvalidRequest),
            (partition_one, K::InvalidRequest),
            (two_topics, K::InvalidRequest),
        ]
        .into_iter()
        .enumerate()
        {
            let node = Node::answering(answer(6, 1, FetchResult::NotLeader));
            let r = run(fetch_snapshot(&ctx(), &node, req, 1));
            assert_eq!(r.error_code, code.code(), "case {i}");
            assert!(node.sent.borrow().is_empty(), "case {i}");
        }
        let mut negative_replica = snapshot_request(SNAPSHOT, 0, 100, 6);
        negative_replica.replica_id = BrokerId(-1);
        let negative_position = snapshot_request(SNAPSHOT, -1, 100, 6);
        let mut negative_offset = snapshot_request(SNAPSHOT, 0, 100, 6);
        negative_offset.topics[0].partitions[0]
            .snapshot_id
            .end_offset = -1;
        let mut negative_epoch = snapshot_request(SNAPSHOT, 0, 100, 6);
        negative_epoch.topics[0].partitions[0].snapshot_id.epoch = -1;
        for (i, req) in [
            negative_replica,
            negative_position,
            negative_offset,
            negative_epoch,
        ]
        .into_iter()
        .enumerate()
        {
            let node = Node::answering(answer(6, 1, FetchResult::NotLeader));
            let r = run(fetch_snapshot(&ctx(), &node, req, 1));
            assert_eq!(
                snapshot_partition(&r).error_code,
                K::InvalidRequest.code(),
                "case {i}"
            );
            assert!(node.sent.borrow().is_empty(), "case {i}");
        }
    }
}
