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
use crate::log::{self, RenderContext};

/// The metadata log's topic name, as KRaft names its one partition.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// The metadata log's topic id (Kafka's `Uuid.METADATA_TOPIC_ID`: most significant bits 0,
/// least significant bits 1).
pub const METADATA_TOPIC_ID: uuid::Uuid = uuid::Uuid::from_u64_pair(0, 1);

/// Most bytes of rendered batches one answer carries (Kafka's own default for a partition's
/// fetch is 1 MiB; corum's core already bounds what one fetch reads).
const FETCH_BYTES_MAX: usize = 8 << 20;

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
    nodes::controllers(ctx, backend)
        .await
        .into_iter()
        .find(|n| n.id == leader.0 as i32)
}

/// What rendering a control batch or a snapshot needs: each controller's endpoint on this
/// listener, which brokers dial as a voter's (from the controllers' registrations).
async fn render_context<B: Backend>(ctx: &ListenerContext, backend: &B) -> RenderContext {
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

/// Serves a Fetch request.
pub async fn fetch<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    req: FetchRequest,
    version: i16,
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
                render_context(ctx, backend).await
            } else {
                RenderContext::default()
            };
            match log::render_batches(&batches, &render, FETCH_BYTES_MAX) {
                Ok(bytes) => answer.records = Some(bytes),
                Err(e) => {
                    tracing::error!(error = %e, "cannot render the metadata log for a broker");
                    answer.error_code = K::KafkaStorageError.code();
                }
            }
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
        bytes = answer.records.as_ref().map_or(0, |r| r.len()),
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

/// The Kafka rendering of snapshot `id`: from the listener's cache, else downloaded from the
/// leader's core chunk by chunk (as any observer would), rendered, and cached.
async fn kafka_snapshot<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    replica: ReplicaKey,
    current_leader_epoch: i32,
    id: SnapshotId,
) -> Result<Bytes, SnapshotError> {
    if let Some(b) = ctx.log.cached_snapshot(id) {
        return Ok(b);
    }
    let mut data = Vec::new();
    let (voters, kraft_version) = loop {
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
                    break (v, kraft_version);
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
    let render = render_context(ctx, backend).await;
    let rendered =
        log::render_snapshot(id, &voters, kraft_version, &data, &render).map_err(|e| {
            tracing::error!(error = %e, "cannot render a snapshot for a broker");
            SnapshotError::Kafka(KafkaError::new(K::KafkaStorageError, e.to_string()))
        })?;
    ctx.log.cache_snapshot(id, rendered.clone());
    Ok(rendered)
}
