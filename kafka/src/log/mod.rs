//! The metadata log as Kafka brokers see it: corum's batches rendered as Kafka RecordBatches
//! at the same offsets and leader epochs, one Kafka record per corum record, and corum's
//! snapshots as Kafka snapshots.
//!
//! corum keeps its own format (rkyv records in its own frames); this is produced at the edge,
//! from the batches the Raft core hands out, once per listener for the brokers that fetch them
//! ([`ObserverMemory::render`]).
//!
//! | module | what |
//! |---|---|
//! | [`batch`] | Kafka's RecordBatch (magic 2), written |
//! | [`control`] | Raft control records: LeaderChange, Voters, KRaftVersion, snapshot header and footer |
//! | [`records`] | metadata records: each corum record as its Kafka counterpart, at the record version the `metadata.version` in force writes |
//! | [`export`] | a log and snapshot written out as Kafka's segment and `.checkpoint` files (`corum dump-log --kafka-export`) |
//!
//! A Kafka snapshot is a header batch (SnapshotHeader, then KRaftVersion and Voters when the
//! quorum is dynamic), the image's records in batches, and a footer batch, with offsets
//! counting from 0 and every batch at the snapshot's epoch, as Kafka's snapshot writer lays
//! them out.

pub mod batch;
pub mod control;
pub mod export;
pub mod records;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use corum_raft::control::ControlRecord;
use corum_raft::{Batch, SnapshotId, VoterSet};
use corum_types::{LogOffset, NodeId};

use batch::{BatchMeta, BatchWriter};

pub use records::{MetadataVersion, RenderContext};

/// What stops a batch from being rendered: bytes that are not a corum batch. The core hands
/// out only batches it validated, so this means a defect or a corrupted disk.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("batch at offset {offset}: {reason}")]
    Batch { offset: u64, reason: String },
    #[error("snapshot {end_offset}-{epoch}: {reason}")]
    Snapshot {
        end_offset: u64,
        epoch: u64,
        reason: String,
    },
}

/// Records per batch in a rendered snapshot (Kafka's snapshot writer cuts batches by size;
/// any cut is valid).
const SNAPSHOT_RECORDS_PER_BATCH: usize = 1000;

/// Renders `batches` one after the other, stopping before the one that would take the
/// result past `bytes_max` (the first is always rendered whole), as one buffer.
pub fn render_batches(
    batches: &[Batch],
    ctx: &RenderContext,
    bytes_max: usize,
) -> Result<Bytes, RenderError> {
    render_batches_from(batches, ctx, bytes_max, None).map(|r| r.to_bytes())
}

/// Rendered batches in log order, each where it was rendered (a cached rendering is not copied
/// again): what a broker's Fetch answer carries, sent as they lie. [`render_batches_from`]
/// gives a prefix of the batches it was given, cut by its `bytes_max`.
#[derive(Clone, Debug, Default)]
pub struct RecordParts {
    parts: Vec<Bytes>,
    len: usize,
}

impl RecordParts {
    /// Bytes in all.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many batches are rendered.
    pub fn batches(&self) -> usize {
        self.parts.len()
    }

    /// The batches' renderings, in log order.
    pub fn into_parts(self) -> Vec<Bytes> {
        self.parts
    }

    /// The renderings as one buffer.
    pub fn to_bytes(&self) -> Bytes {
        together(&self.parts)
    }

    fn push(&mut self, part: Bytes) {
        self.len += part.len();
        self.parts.push(part);
    }
}

impl FromIterator<Bytes> for RecordParts {
    fn from_iter<I: IntoIterator<Item = Bytes>>(parts: I) -> RecordParts {
        let mut records = RecordParts::default();
        for p in parts {
            records.push(p);
        }
        records
    }
}

/// `parts` as one buffer: a lone non-empty one itself, several copied together.
pub(crate) fn together<'a, I>(parts: I) -> Bytes
where
    I: IntoIterator<Item = &'a Bytes>,
    I::IntoIter: Clone,
{
    let parts = parts.into_iter().filter(|p| !p.is_empty());
    let mut lone = parts.clone();
    match (lone.next(), lone.next()) {
        (None, _) => Bytes::new(),
        (Some(one), None) => one.clone(),
        _ => {
            let mut out = BytesMut::with_capacity(parts.clone().map(Bytes::len).sum());
            for p in parts {
                out.extend_from_slice(p);
            }
            out.freeze()
        }
    }
}

/// [`render_batches`], taking each data batch from `cache` when it was rendered before at the
/// same `metadata.version`, and keeping there those it renders. A batch cut by `bytes_max`
/// leaves `ctx.metadata_version` as it was before that batch, so the next fetch, which starts
/// at it, renders it at the same level.
///
/// The cache's renderings of data batches past the newest it holds (the log's tail, which the
/// brokers following it fetch) are written one after the other into blocks of
/// [`RENDER_BLOCK_BYTES`] and kept there as they are. Being in offset order, they leave the
/// cache block by block, so the blocks hold at most a block more than the cache's bound; a
/// rendering of an older batch (a broker catching up, a batch rendered again at another level
/// or epoch) gets a buffer of its own, which would otherwise keep a block alive for the sake of
/// a few bytes. The answer is the renderings themselves ([`RecordParts`]): the listener sends
/// them from where they lie with the response's head and tail ([`crate::response`]), so a
/// broker's answer costs no copy of its bytes before the kernel's, however many batches it
/// holds; and the renderings the cache keeps for seconds sit in a few large blocks instead of
/// among the write path's small allocations (where some 2,000 long-lived chunks of about 8 KiB
/// made the heap's every allocation slower).
pub fn render_batches_from(
    batches: &[Batch],
    ctx: &RenderContext,
    bytes_max: usize,
    cache: Option<&RefCell<RenderCache>>,
) -> Result<RecordParts, RenderError> {
    let mut records = RecordParts::default();
    let mut scratch = BytesMut::new();
    for b in batches {
        let level = ctx.metadata_version.get();
        let key = (!b.control).then(|| CachedBatchKey::of(b, level));
        let hit = match (&key, cache) {
            (Some(key), Some(cache)) => cache.borrow_mut().get(key),
            _ => None,
        };
        let part = match hit {
            Some((bytes, after)) => {
                ctx.metadata_version.set(after);
                bytes
            }
            None => {
                let tail = key.is_some()
                    && cache.is_some_and(|c| c.borrow().is_past_newest(b.base_offset.0));
                let bytes = match cache.filter(|_| tail) {
                    Some(c) => c.borrow_mut().render_in_block(b, ctx, &mut scratch)?,
                    None => {
                        let mut out = BytesMut::with_capacity(room_for(b));
                        render_batch(b, ctx, &mut out, &mut scratch)?;
                        out.freeze()
                    }
                };
                if let (Some(key), Some(cache)) = (key, cache) {
                    cache
                        .borrow_mut()
                        .insert(key, bytes.clone(), ctx.metadata_version.get());
                }
                bytes
            }
        };
        if records.len() + part.len() > bytes_max && records.batches() > 0 {
            ctx.metadata_version.set(level);
            break;
        }
        records.push(part);
    }
    Ok(records)
}

/// Room to make for a batch's rendering: its payload, a few bytes of Kafka framing per record
/// and the batch header. It is more than the rendering (a batch of 140 ConfigRecords of the
/// configs workload: a payload of 16,248 bytes renders to 8,397), so a block leaves at most
/// that much unused; a short figure would only cost the buffer a growth.
fn room_for(b: &Batch) -> usize {
    batch::BATCH_HEADER_BYTES + b.payload.len() + 8 * b.record_count as usize
}

/// What identifies a data batch's rendering: the batch (in a Raft log, the batch at an offset
/// written in an epoch is the same on every node and at every read; its length and append
/// time are checked too) and the `metadata.version` its first record is rendered at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CachedBatchKey {
    base_offset: u64,
    epoch: u64,
    record_count: u32,
    payload_len: usize,
    timestamp_ms: i64,
    level: MetadataVersion,
}

impl CachedBatchKey {
    fn of(b: &Batch, level: MetadataVersion) -> CachedBatchKey {
        CachedBatchKey {
            base_offset: b.base_offset.0,
            epoch: b.epoch.0,
            record_count: b.record_count,
            payload_len: b.payload.len(),
            timestamp_ms: b.timestamp_ms,
            level,
        }
    }
}

/// The Kafka renderings of the data batches a listener served last, by base offset, bounded
/// in bytes: brokers following the log fetch the same batches, a few milliseconds apart, and
/// each is rendered once for all of them. Control batches (rare, and rendered with the
/// controllers' endpoints of the moment) are not kept.
#[derive(Debug)]
pub struct RenderCache {
    batches: std::collections::BTreeMap<u64, (CachedBatchKey, Bytes, MetadataVersion)>,
    /// The block the next rendering of the log's tail is written into (a block is freed when
    /// the last rendering in it leaves the cache and the answers).
    block: BytesMut,
    bytes: usize,
    bytes_max: usize,
    hits: u64,
    misses: u64,
}

/// Bytes of rendered batches a listener keeps (the newest; the brokers that follow the log
/// fetch the same batches one after the other).
pub const RENDER_CACHE_BYTES_MAX: usize = 16 << 20;

/// Bytes of a block the cache's renderings are written into (a rendering larger than that gets
/// a block of its own size).
pub const RENDER_BLOCK_BYTES: usize = 1 << 20;

impl Default for RenderCache {
    fn default() -> Self {
        RenderCache::new(RENDER_CACHE_BYTES_MAX)
    }
}

impl RenderCache {
    pub fn new(bytes_max: usize) -> RenderCache {
        RenderCache {
            batches: Default::default(),
            block: BytesMut::new(),
            bytes: 0,
            bytes_max,
            hits: 0,
            misses: 0,
        }
    }

    /// Batches served from the cache, and rendered afresh, so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Renders data batch `b` of the log's tail at the end of the current block (a new block
    /// when it has no room left).
    fn render_in_block(
        &mut self,
        b: &Batch,
        ctx: &RenderContext,
        scratch: &mut BytesMut,
    ) -> Result<Bytes, RenderError> {
        // The block's own memory when it has the room, or when nothing split from it is held
        // any more (it starts over at the front); else a new block, the old one going once its
        // last rendering leaves the cache and the answers.
        let need = room_for(b);
        if !self.block.try_reclaim(need) {
            self.block = BytesMut::with_capacity(RENDER_BLOCK_BYTES.max(need));
        }
        render_batch(b, ctx, &mut self.block, scratch)?;
        Ok(self.block.split().freeze())
    }

    /// Whether a batch at `base_offset` lies past every batch held (or none is held).
    fn is_past_newest(&self, base_offset: u64) -> bool {
        self.batches
            .last_key_value()
            .is_none_or(|(&newest, _)| base_offset > newest)
    }

    fn get(&mut self, key: &CachedBatchKey) -> Option<(Bytes, MetadataVersion)> {
        match self.batches.get(&key.base_offset) {
            Some((k, bytes, after)) if k == key => {
                self.hits += 1;
                Some((bytes.clone(), *after))
            }
            _ => {
                self.misses += 1;
                None
            }
        }
    }

    /// Keeps `bytes`, the rendering of the batch `key` names (ending at `after`), in place of
    /// any other at its offset (another epoch's, after a leader change, or another level's);
    /// then drops the lowest offsets while over the bound. A rendering larger than the bound
    /// is not kept.
    fn insert(&mut self, key: CachedBatchKey, bytes: Bytes, after: MetadataVersion) {
        if bytes.len() > self.bytes_max {
            return;
        }
        self.bytes += bytes.len();
        if let Some((_, old, _)) = self.batches.insert(key.base_offset, (key, bytes, after)) {
            self.bytes -= old.len();
        }
        while self.bytes > self.bytes_max {
            let Some((_, (_, old, _))) = self.batches.pop_first() else {
                break;
            };
            self.bytes -= old.len();
        }
    }
}

/// Renders one corum batch into `out` as one Kafka batch. `scratch` is reused for record
/// values.
pub fn render_batch(
    b: &Batch,
    ctx: &RenderContext,
    out: &mut BytesMut,
    scratch: &mut BytesMut,
) -> Result<(), RenderError> {
    let meta = BatchMeta {
        base_offset: b.base_offset.0 as i64,
        leader_epoch: i32::try_from(b.epoch.0).unwrap_or(i32::MAX),
        control: b.control,
        // The leader's append time, as Kafka stamps its batches (brokers' lag metrics read it).
        base_timestamp: b.timestamp_ms,
        max_timestamp: b.timestamp_ms,
    };
    let bad = |reason: String| RenderError::Batch {
        offset: b.base_offset.0,
        reason,
    };
    let start = out.len();
    let mut w = BatchWriter::begin(out, meta);
    let written = if b.control {
        corum_raft::control::decode(&b.payload)
            .map_err(|e| bad(e.to_string()))
            .map(|records| {
                for r in &records {
                    scratch.clear();
                    let t = control::record(r, &ctx.voter_endpoints, scratch);
                    w.record(Some(&t.key()), scratch);
                }
            })
    } else {
        records::render_payload(&b.payload, ctx, |value| w.record(None, value), scratch)
            .map_err(bad)
    };
    let n = w.len();
    let checked = written.and_then(|()| {
        if n as u64 == u64::from(b.record_count) {
            Ok(())
        } else {
            Err(bad(format!(
                "the header counts {} records, the payload holds {n}",
                b.record_count
            )))
        }
    });
    match checked {
        Ok(()) => {
            w.finish();
            Ok(())
        }
        Err(e) => {
            // Leave `out` as it was: a half-written batch must not reach a broker.
            out.truncate(start);
            Err(e)
        }
    }
}

/// Renders a corum snapshot (`data`: one encoded corum batch of the image's records) in
/// Kafka's snapshot format.
pub fn render_snapshot(
    id: SnapshotId,
    voters: &VoterSet,
    kraft_version: u16,
    data: &[u8],
    ctx: &RenderContext,
) -> Result<Bytes, RenderError> {
    let bad = |reason: String| RenderError::Snapshot {
        end_offset: id.end_offset.0,
        epoch: id.epoch.0,
        reason,
    };
    let epoch = i32::try_from(id.epoch.0).unwrap_or(i32::MAX);
    let mut out = BytesMut::new();
    let mut scratch = BytesMut::new();
    let mut next_offset: i64 = 0;
    let meta = |base_offset: i64, control: bool| BatchMeta {
        base_offset,
        leader_epoch: epoch,
        control,
        base_timestamp: ctx.timestamp_ms,
        max_timestamp: ctx.timestamp_ms,
    };
    // The header batch: SnapshotHeader, then (a dynamic quorum) KRaftVersion and Voters.
    {
        let mut w = BatchWriter::begin(&mut out, meta(0, true));
        scratch.clear();
        control::snapshot_header(ctx.timestamp_ms, &mut scratch);
        w.record(Some(&control::ControlType::SnapshotHeader.key()), &scratch);
        if kraft_version > 0 {
            for r in [
                ControlRecord::KRaftVersion(corum_raft::control::KRaftVersionRecord {
                    version: kraft_version,
                }),
                ControlRecord::Voters(corum_raft::control::VotersRecord {
                    version: 0,
                    voters: voters.clone(),
                }),
            ] {
                scratch.clear();
                let t = control::record(&r, &ctx.voter_endpoints, &mut scratch);
                w.record(Some(&t.key()), &scratch);
            }
        }
        next_offset += i64::from(w.len());
        w.finish();
    }
    // The records, in batches.
    let mut values: Vec<Bytes> = Vec::new();
    records::render_payload(
        data,
        ctx,
        |v| values.push(Bytes::copy_from_slice(v)),
        &mut scratch,
    )
    .map_err(bad)?;
    for chunk in values.chunks(SNAPSHOT_RECORDS_PER_BATCH) {
        let mut w = BatchWriter::begin(&mut out, meta(next_offset, false));
        for v in chunk {
            w.record(None, v);
        }
        next_offset += i64::from(w.len());
        w.finish();
    }
    // The footer batch.
    let mut w = BatchWriter::begin(&mut out, meta(next_offset, true));
    scratch.clear();
    control::snapshot_footer(&mut scratch);
    w.record(Some(&control::ControlType::SnapshotFooter.key()), &scratch);
    w.finish();
    Ok(out.freeze())
}

/// What a Kafka listener remembers between a broker's fetches: the high watermark it last
/// sent each replica (a fetch before v18 does not state the one the broker knows, and the
/// long poll needs it), the newest snapshot rendered, and the data batches rendered last.
#[derive(Debug, Default)]
pub struct ObserverMemory {
    sent: RefCell<HashMap<NodeId, LogOffset>>,
    snapshot: RefCell<Option<(SnapshotId, Bytes)>>,
    /// The data batches rendered last, for the brokers fetching them after the first.
    rendered: RefCell<RenderCache>,
    /// The finalized `metadata.version` in the current leader epoch, as of a log offset: asked
    /// of the core before the first rendering of an epoch, then moved by the FeatureLevel
    /// records rendered past that offset.
    metadata_version: Cell<Option<LevelSeen>>,
}

/// `metadata.version` level `level` was in force at `through` (the end offset of what was
/// read) in leader epoch `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LevelSeen {
    epoch: i32,
    level: MetadataVersion,
    through: LogOffset,
}

/// Replicas remembered at most: a listener facing more (a misbehaving client cycling ids)
/// forgets them all and starts over; a forgotten replica's next fetch is answered at once.
const REMEMBERED_REPLICAS_MAX: usize = 4096;

impl ObserverMemory {
    pub fn high_watermark_sent(&self, replica: NodeId) -> Option<LogOffset> {
        self.sent.borrow().get(&replica).copied()
    }

    pub fn sent_high_watermark(&self, replica: NodeId, hwm: LogOffset) {
        let mut sent = self.sent.borrow_mut();
        if sent.len() >= REMEMBERED_REPLICAS_MAX && !sent.contains_key(&replica) {
            sent.clear();
        }
        sent.insert(replica, hwm);
    }

    /// [`render_batches_from`] through this listener's cache of rendered batches.
    pub fn render(
        &self,
        batches: &[Batch],
        ctx: &RenderContext,
        bytes_max: usize,
    ) -> Result<RecordParts, RenderError> {
        render_batches_from(batches, ctx, bytes_max, Some(&self.rendered))
    }

    /// Batches rendered for brokers served from the cache, and rendered afresh, so far.
    pub fn render_counts(&self) -> (u64, u64) {
        self.rendered.borrow().counts()
    }

    pub fn cached_snapshot(&self, id: SnapshotId) -> Option<Bytes> {
        self.snapshot
            .borrow()
            .as_ref()
            .filter(|(i, _)| *i == id)
            .map(|(_, b)| b.clone())
    }

    pub fn cache_snapshot(&self, id: SnapshotId, bytes: Bytes) {
        *self.snapshot.borrow_mut() = Some((id, bytes));
    }

    /// The `metadata.version` remembered for leader epoch `epoch` (none after a leader change:
    /// another leader may have moved it).
    pub fn metadata_version(&self, epoch: i32) -> Option<MetadataVersion> {
        self.metadata_version
            .get()
            .filter(|s| s.epoch == epoch)
            .map(|s| s.level)
    }

    /// Remembers that `level` was in force at `through` in `epoch`, unless what is remembered
    /// for that epoch is as new (a broker catching up renders old records, whose level must
    /// not replace a newer one).
    pub fn note_metadata_version(&self, epoch: i32, level: MetadataVersion, through: LogOffset) {
        let newer = match self.metadata_version.get() {
            Some(s) => s.epoch != epoch || through > s.through,
            None => true,
        };
        if newer {
            self.metadata_version.set(Some(LevelSeen {
                epoch,
                level,
                through,
            }));
        }
    }
}

impl Clone for ObserverMemory {
    /// A listener's copy starts with nothing remembered.
    fn clone(&self) -> Self {
        ObserverMemory::default()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use bytes::Buf;
    use corum_controller::records::{
        encode_batch, BrokerRegistrationChangeRecordV1, ClearElrRecordV1, ConfigRecordV1,
        ConfigResourceType, ControllerEndpointV1, FeatureLevelRecordV1, FenceBrokerRecordV1,
        LeaderChange, LeaderRecoveryState, ListenerV1, MetadataRecord, NoOpRecordV1,
        PartitionChangeRecordV2, PartitionIsrChangeRecordV1, PartitionLeaderChangeRecordV1,
        PartitionRecordV1, PartitionRecordV3, ProducerIdsRecordV1, RegisterBrokerRecordV1,
        RegisterControllerRecordV1, RemoveTopicRecordV1, SupportedFeatureV1, TopicRecordV1,
        UnfenceBrokerRecordV1, UnregisterBrokerRecordV1,
    };
    use corum_controller::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId};
    use corum_raft::control::{
        KRaftVersionRecord as RaftKRaftVersion, LeaderChangeRecord, VotersRecord as RaftVoters,
    };
    use corum_raft::{Endpoint, Payload, ReplicaKey, Voter};
    use corum_types::{BrokerEpoch, Epoch, Uuid};
    use kafka_protocol::messages::{
        LeaderChangeMessage, SnapshotFooterRecord, SnapshotHeaderRecord, VotersRecord,
    };
    use kafka_protocol::protocol::Decodable;
    use kafka_protocol::records::{RecordBatchDecoder, RecordSet};

    use super::*;
    use crate::metadata::{self as k, AnyMetadataRecord as A};

    const TOPIC: TopicId = TopicId(Uuid([7; 16]));

    fn kuuid(b: u8) -> uuid::Uuid {
        uuid::Uuid::from_bytes([b; 16])
    }

    /// One record of each corum variant (a topic twice: created, and its deletion decided),
    /// each with the Kafka record it must arrive as at `metadata.version` 27 (3.7-IV2 and up:
    /// registrations with log directories, partitions with their replicas' directories).
    fn one_of_each() -> Vec<(MetadataRecord, A, i16)> {
        let feature = |name: &str, min_level, max_level| SupportedFeatureV1 {
            name: name.into(),
            min_level,
            max_level,
        };
        vec![
            (
                MetadataRecord::RegisterBroker(RegisterBrokerRecordV1 {
                    broker_id: NodeId(4),
                    incarnation_id: Uuid([4; 16]),
                    broker_epoch: BrokerEpoch(40),
                    listeners: vec![ListenerV1 {
                        name: "PLAINTEXT".into(),
                        host: "b4".into(),
                        port: 9092,
                    }],
                    features: vec![feature("metadata.version", 7, 27)],
                    rack: Some("r1".into()),
                }),
                A::RegisterBroker(k::RegisterBrokerRecord {
                    broker_id: 4,
                    incarnation_id: kuuid(4),
                    broker_epoch: 40,
                    end_points: vec![k::RegisterBrokerRecordBrokerEndpoint {
                        name: "PLAINTEXT".into(),
                        host: "b4".into(),
                        port: 9092,
                        security_protocol: 0,
                        ..Default::default()
                    }],
                    features: vec![k::RegisterBrokerRecordBrokerFeature {
                        name: "metadata.version".into(),
                        min_supported_version: 7,
                        max_supported_version: 27,
                        ..Default::default()
                    }],
                    rack: Some("r1".into()),
                    fenced: true,
                    ..Default::default()
                }),
                3,
            ),
            (
                MetadataRecord::UnregisterBroker(UnregisterBrokerRecordV1 {
                    broker_id: NodeId(5),
                    broker_epoch: BrokerEpoch(50),
                }),
                A::UnregisterBroker(k::UnregisterBrokerRecord {
                    broker_id: 5,
                    broker_epoch: 50,
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::FenceBroker(FenceBrokerRecordV1 {
                    broker_id: NodeId(4),
                    broker_epoch: BrokerEpoch(40),
                }),
                A::FenceBroker(k::FenceBrokerRecord {
                    id: 4,
                    epoch: 40,
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::UnfenceBroker(UnfenceBrokerRecordV1 {
                    broker_id: NodeId(4),
                    broker_epoch: BrokerEpoch(40),
                }),
                A::UnfenceBroker(k::UnfenceBrokerRecord {
                    id: 4,
                    epoch: 40,
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecordV1 {
                    broker_id: NodeId(4),
                    broker_epoch: BrokerEpoch(40),
                    in_controlled_shutdown: true,
                }),
                A::BrokerRegistrationChange(k::BrokerRegistrationChangeRecord {
                    broker_id: 4,
                    broker_epoch: 40,
                    in_controlled_shutdown: 1,
                    ..Default::default()
                }),
                2,
            ),
            (
                MetadataRecord::Topic(TopicRecordV1 {
                    name: "orders".into(),
                    topic_id: TOPIC,
                    deleting: false,
                }),
                A::Topic(k::TopicRecord {
                    name: "orders".into(),
                    topic_id: kuuid(7),
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::Topic(TopicRecordV1 {
                    name: "orders".into(),
                    topic_id: TOPIC,
                    deleting: true,
                }),
                A::NoOp(k::NoOpRecord::default()),
                0,
            ),
            (
                MetadataRecord::RemoveTopic(RemoveTopicRecordV1 { topic_id: TOPIC }),
                A::RemoveTopic(k::RemoveTopicRecord {
                    topic_id: kuuid(7),
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::Partition(PartitionRecordV1 {
                    topic_id: TOPIC,
                    partition_id: PartitionId(2),
                    replicas: vec![NodeId(4), NodeId(5)],
                    isr: vec![NodeId(4)],
                    leader: Some(NodeId(4)),
                    leader_epoch: LeaderEpoch(3),
                    partition_epoch: PartitionEpoch(6),
                }),
                A::Partition(k::PartitionRecord {
                    partition_id: 2,
                    topic_id: kuuid(7),
                    replicas: vec![4, 5],
                    isr: vec![4],
                    leader: 4,
                    leader_epoch: 3,
                    partition_epoch: 6,
                    directories: vec![uuid::Uuid::nil(); 2],
                    ..Default::default()
                }),
                2,
            ),
            (
                MetadataRecord::PartitionLeaderChange(PartitionLeaderChangeRecordV1 {
                    topic_id: TOPIC,
                    partition_id: PartitionId(2),
                    leader: None,
                    leader_epoch: LeaderEpoch(4),
                    partition_epoch: PartitionEpoch(7),
                }),
                A::PartitionChange(k::PartitionChangeRecord {
                    partition_id: 2,
                    topic_id: kuuid(7),
                    leader: -1,
                    ..Default::default()
                }),
                2,
            ),
            (
                MetadataRecord::PartitionIsrChange(PartitionIsrChangeRecordV1 {
                    topic_id: TOPIC,
                    partition_id: PartitionId(2),
                    isr: vec![NodeId(4), NodeId(5)],
                    partition_epoch: PartitionEpoch(8),
                }),
                A::PartitionChange(k::PartitionChangeRecord {
                    partition_id: 2,
                    topic_id: kuuid(7),
                    isr: Some(vec![4, 5]),
                    // No leader change: Kafka's -2.
                    leader: -2,
                    ..Default::default()
                }),
                2,
            ),
            (
                MetadataRecord::PartitionV3(Box::new(PartitionRecordV3 {
                    topic_id: TOPIC,
                    partition_id: PartitionId(3),
                    replicas: vec![NodeId(4), NodeId(5), NodeId(6)],
                    isr: vec![],
                    leader: None,
                    leader_recovery_state: LeaderRecoveryState::Recovered,
                    leader_epoch: LeaderEpoch(5),
                    partition_epoch: PartitionEpoch(9),
                    directories: vec![Uuid([0x41; 16]), Uuid([0x51; 16]), Uuid([0x61; 16])],
                    eligible_leader_replicas: vec![NodeId(5), NodeId(6)],
                    last_known_elr: vec![NodeId(4)],
                })),
                A::Partition(k::PartitionRecord {
                    partition_id: 3,
                    topic_id: kuuid(7),
                    replicas: vec![4, 5, 6],
                    isr: vec![],
                    leader: -1,
                    leader_epoch: 5,
                    partition_epoch: 9,
                    directories: vec![kuuid(0x41), kuuid(0x51), kuuid(0x61)],
                    eligible_leader_replicas: Some(vec![5, 6]),
                    last_known_elr: Some(vec![4]),
                    ..Default::default()
                }),
                2,
            ),
            (
                MetadataRecord::PartitionChangeV2(Box::new(PartitionChangeRecordV2 {
                    topic_id: TOPIC,
                    partition_id: PartitionId(3),
                    isr: Some(vec![NodeId(5)]),
                    leader: LeaderChange::Broker(NodeId(5)),
                    replicas: None,
                    leader_recovery_state: None,
                    directories: None,
                    eligible_leader_replicas: Some(vec![NodeId(6)]),
                    last_known_elr: Some(vec![]),
                })),
                A::PartitionChange(k::PartitionChangeRecord {
                    partition_id: 3,
                    topic_id: kuuid(7),
                    isr: Some(vec![5]),
                    leader: 5,
                    eligible_leader_replicas: Some(vec![6]),
                    last_known_elr: Some(vec![]),
                    ..Default::default()
                }),
                2,
            ),
            (
                MetadataRecord::ClearElr(ClearElrRecordV1 {
                    topic_name: "orders".into(),
                }),
                A::ClearElr(k::ClearElrRecord {
                    topic_name: "orders".into(),
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::AccessControlEntry(
                    corum_controller::records::AccessControlEntryRecordV1 {
                        id: Uuid([7; 16]),
                        resource_type: 2,
                        resource_name: "pay-".into(),
                        pattern_type: 4,
                        principal: "User:alice".into(),
                        host: "*".into(),
                        operation: 3,
                        permission_type: 2,
                    },
                ),
                A::AccessControlEntry(k::AccessControlEntryRecord {
                    id: kuuid(7),
                    resource_type: 2,
                    resource_name: "pay-".into(),
                    pattern_type: 4,
                    principal: "User:alice".into(),
                    host: "*".into(),
                    operation: 3,
                    permission_type: 2,
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::RemoveAccessControlEntry(
                    corum_controller::records::RemoveAccessControlEntryRecordV1 {
                        id: Uuid([7; 16]),
                    },
                ),
                A::RemoveAccessControlEntry(k::RemoveAccessControlEntryRecord {
                    id: kuuid(7),
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::UserScramCredential(
                    corum_controller::records::UserScramCredentialRecordV1 {
                        name: "alice".into(),
                        mechanism: 2,
                        salt: vec![1; 8],
                        stored_key: vec![2; 64],
                        server_key: vec![3; 64],
                        iterations: 8192,
                    },
                ),
                A::UserScramCredential(k::UserScramCredentialRecord {
                    name: "alice".into(),
                    mechanism: 2,
                    salt: vec![1u8; 8].into(),
                    stored_key: vec![2u8; 64].into(),
                    server_key: vec![3u8; 64].into(),
                    iterations: 8192,
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::RemoveUserScramCredential(
                    corum_controller::records::RemoveUserScramCredentialRecordV1 {
                        name: "alice".into(),
                        mechanism: 2,
                    },
                ),
                A::RemoveUserScramCredential(k::RemoveUserScramCredentialRecord {
                    name: "alice".into(),
                    mechanism: 2,
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::Config(ConfigRecordV1 {
                    resource_type: ConfigResourceType::Broker,
                    resource_name: "4".into(),
                    key: "log.retention.ms".into(),
                    value: None,
                }),
                A::Config(k::ConfigRecord {
                    resource_type: 4,
                    resource_name: "4".into(),
                    name: "log.retention.ms".into(),
                    value: None,
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                    name: "metadata.version".into(),
                    min_level: 1,
                    max_level: 27,
                }),
                A::FeatureLevel(k::FeatureLevelRecord {
                    name: "metadata.version".into(),
                    feature_level: 27,
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::ProducerIds(ProducerIdsRecordV1 {
                    broker_id: NodeId(4),
                    broker_epoch: BrokerEpoch(40),
                    next_producer_id: 2000,
                }),
                A::ProducerIds(k::ProducerIdsRecord {
                    broker_id: 4,
                    broker_epoch: 40,
                    next_producer_id: 2000,
                    ..Default::default()
                }),
                0,
            ),
            (
                MetadataRecord::NoOp(NoOpRecordV1 {}),
                A::NoOp(k::NoOpRecord::default()),
                0,
            ),
            (
                MetadataRecord::RegisterController(RegisterControllerRecordV1 {
                    controller_id: NodeId(1),
                    incarnation_id: Uuid([1; 16]),
                    end_points: vec![ControllerEndpointV1 {
                        name: "CONTROLLER".into(),
                        host: "c1".into(),
                        port: 9093,
                        security_protocol: 1,
                    }],
                    features: vec![feature("kraft.version", 0, 1)],
                }),
                A::RegisterController(k::RegisterControllerRecord {
                    controller_id: 1,
                    incarnation_id: kuuid(1),
                    end_points: vec![k::RegisterControllerRecordControllerEndpoint {
                        name: "CONTROLLER".into(),
                        host: "c1".into(),
                        port: 9093,
                        security_protocol: 1,
                        ..Default::default()
                    }],
                    features: vec![k::RegisterControllerRecordControllerFeature {
                        name: "kraft.version".into(),
                        min_supported_version: 0,
                        max_supported_version: 1,
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                0,
            ),
        ]
    }

    pub(crate) fn data_batch(base_offset: u64, epoch: u64, records: &[MetadataRecord]) -> Batch {
        Batch {
            base_offset: LogOffset(base_offset),
            epoch: Epoch(epoch),
            record_count: records.len() as u32,
            control: false,
            timestamp_ms: -1,
            payload: Payload::from(encode_batch(records).as_slice()),
        }
    }

    pub(crate) fn voters() -> VoterSet {
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

    pub(crate) fn control_batch(
        base_offset: u64,
        epoch: u64,
        records: Vec<ControlRecord>,
    ) -> Batch {
        Batch {
            base_offset: LogOffset(base_offset),
            epoch: Epoch(epoch),
            record_count: records.len() as u32,
            control: true,
            timestamp_ms: -1,
            payload: corum_raft::control::encode(records),
        }
    }

    /// A control batch of each control record corum writes.
    fn leader_change_batch(base_offset: u64, epoch: u64) -> Batch {
        control_batch(
            base_offset,
            epoch,
            vec![
                ControlRecord::LeaderChange(LeaderChangeRecord {
                    epoch: Epoch(epoch),
                    leader: NodeId(2),
                    granted_by: vec![NodeId(2), NodeId(3)],
                }),
                ControlRecord::Voters(RaftVoters {
                    version: 0,
                    voters: voters(),
                }),
                ControlRecord::KRaftVersion(RaftKRaftVersion { version: 1 }),
            ],
        )
    }

    pub(crate) fn decode_all(bytes: &Bytes) -> Vec<RecordSet> {
        RecordBatchDecoder::decode_all(&mut bytes.clone())
            .expect("Kafka's batch decoder reads the rendering")
    }

    fn key_type(key: &Option<Bytes>) -> i16 {
        let key = key.as_ref().expect("a control record has a key");
        assert_eq!(key.len(), 4, "key version and type");
        assert_eq!(&key[..2], &[0, 0], "key version 0");
        i16::from_be_bytes([key[2], key[3]])
    }

    /// Decodes `value` as a control message at version 0 and checks nothing follows it.
    fn message<M: Decodable>(value: &Option<Bytes>) -> M {
        let mut buf = value.clone().expect("a control record has a value");
        let m = M::decode(&mut buf, 0).expect("the value decodes at version 0");
        assert!(
            !buf.has_remaining(),
            "{} bytes after the message",
            buf.len()
        );
        m
    }

    fn expected_voters() -> Vec<(i32, uuid::Uuid, String)> {
        (1..=3)
            .map(|id| (id, kuuid(id as u8), format!("c{id}")))
            .collect()
    }

    fn check_voters_record(v: &VotersRecord) {
        assert_eq!(v.version, 0);
        let got: Vec<(i32, uuid::Uuid, String)> = v
            .voters
            .iter()
            .map(|v| {
                assert_eq!(v.endpoints.len(), 1);
                assert_eq!(v.endpoints[0].name.as_str(), "CONTROLLER");
                assert_eq!(v.endpoints[0].port, 9093);
                assert_eq!(v.k_raft_version_feature.min_supported_version, 0);
                assert_eq!(v.k_raft_version_feature.max_supported_version, 1);
                (
                    v.voter_id.0,
                    v.voter_directory_id,
                    v.endpoints[0].host.to_string(),
                )
            })
            .collect();
        assert_eq!(got, expected_voters());
    }

    /// A control batch and a data batch holding one of each corum record become Kafka
    /// batches at corum's offsets and epochs, which Kafka's decoders read back field by
    /// field: the control records keyed by their type with the message at version 0 as the
    /// value, the metadata records framed at the `metadata.version`'s record versions; each
    /// record carries its batch's append time (a batch written before corum kept it: -1).
    #[test]
    fn batches_render_at_corums_offsets_and_epochs_and_decode_back() {
        let records = one_of_each();
        let corum: Vec<MetadataRecord> = records.iter().map(|r| r.0.clone()).collect();
        let mut batches = [
            leader_change_batch(37, 6),
            data_batch(40, 6, &corum),
            data_batch(40 + corum.len() as u64, 6, &corum[..1]),
        ];
        batches[0].timestamp_ms = 1_700_000_000_123;
        batches[1].timestamp_ms = 1_700_000_000_456;
        let ctx = RenderContext {
            voter_endpoints: Vec::new(),
            metadata_version: Cell::new(MetadataVersion(27)),
            timestamp_ms: 1_234,
        };
        let bytes = render_batches(&batches, &ctx, usize::MAX).expect("valid batches render");
        let sets = decode_all(&bytes);
        assert_eq!(sets.len(), 3, "one Kafka batch per corum batch");
        for (set, b) in sets.iter().zip(&batches) {
            assert_eq!(set.records.len(), b.record_count as usize);
            for (i, r) in set.records.iter().enumerate() {
                assert_eq!(r.offset, b.base_offset.0 as i64 + i as i64);
                assert_eq!(r.partition_leader_epoch, b.epoch.0 as i32);
                assert_eq!(r.control, b.control);
                assert_eq!(r.timestamp, b.timestamp_ms);
                assert!(!r.transactional);
                assert_eq!(r.producer_id, -1);
            }
        }

        let control = &sets[0].records;
        assert_eq!(
            control.iter().map(|r| key_type(&r.key)).collect::<Vec<_>>(),
            vec![2, 6, 5],
            "LeaderChange, Voters, KRaftVersion"
        );
        let lc: LeaderChangeMessage = message(&control[0].value);
        assert_eq!(lc.version, 0);
        assert_eq!(lc.leader_id.0, 2);
        let granting: Vec<i32> = lc.granting_voters.iter().map(|v| v.voter_id).collect();
        assert_eq!(granting, vec![2, 3]);
        check_voters_record(&message::<VotersRecord>(&control[1].value));
        let mut kv = control[2].value.clone().expect("a value");
        let kv = k::KRaftVersionRecord::decode(&mut kv, 0).expect("KRaftVersionRecord v0");
        assert_eq!((kv.version, kv.kraft_version), (0, 1));

        let data = &sets[1].records;
        for (r, (corum, kafka, version)) in data.iter().zip(&records) {
            assert!(r.key.is_none(), "a metadata record has no key");
            let value = r.value.clone().expect("a metadata record has a value");
            let (decoded, v) = A::decode_framed(value).expect("a framed metadata record");
            assert_eq!(
                (&decoded, v),
                (kafka, *version),
                "{} as Kafka's record",
                corum.kind()
            );
        }
    }

    /// Below 3.7-IV2 the records are written at the versions without log directories, as
    /// Kafka's controller writes them for such a `metadata.version`.
    #[test]
    fn record_versions_follow_the_metadata_version() {
        let records = one_of_each();
        let corum: Vec<MetadataRecord> = records.iter().map(|r| r.0.clone()).collect();
        let ctx = RenderContext {
            voter_endpoints: Vec::new(),
            metadata_version: Cell::new(MetadataVersion::MINIMUM),
            timestamp_ms: -1,
        };
        let bytes = render_batches(&[data_batch(0, 1, &corum)], &ctx, usize::MAX)
            .expect("valid batches render");
        let sets = decode_all(&bytes);
        let versions: Vec<(&str, i16)> = sets[0]
            .records
            .iter()
            .map(|r| {
                let (rec, v) = A::decode_framed(r.value.clone().expect("a value"))
                    .expect("a framed metadata record");
                match &rec {
                    A::Partition(p) => {
                        assert!(p.directories.is_empty(), "v0 has no directories");
                        assert_eq!(p.eligible_leader_replicas, None, "v0 has no ELR");
                        assert_eq!(p.last_known_elr, None);
                    }
                    A::PartitionChange(c) => {
                        assert_eq!(c.eligible_leader_replicas, None, "v0 has no ELR");
                        assert_eq!(c.last_known_elr, None);
                    }
                    _ => {}
                }
                (rec.name(), v)
            })
            .filter(|(_, v)| *v != 0)
            .collect();
        assert_eq!(
            versions,
            vec![
                ("RegisterBrokerRecord", 1),
                ("BrokerRegistrationChangeRecord", 1)
            ]
        );
    }

    /// Partition records are v1 at 4.0-IV0 (22), without eligible leader replicas, and v2 from
    /// 4.0-IV1 (23, Kafka's `isElrSupported`) on, with them where the record has any: an
    /// empty list is not written in a PartitionRecord (Kafka's `toRecord`), but a change to
    /// an empty list is a change and is.
    #[test]
    fn eligible_leader_replicas_render_from_4_0_iv1() {
        let records: Vec<MetadataRecord> = one_of_each()
            .into_iter()
            .map(|r| r.0)
            .filter(|r| {
                matches!(
                    r,
                    MetadataRecord::PartitionV3(_) | MetadataRecord::PartitionChangeV2(_)
                )
            })
            .collect();
        let render = |level: i16| {
            let ctx = RenderContext {
                voter_endpoints: Vec::new(),
                metadata_version: Cell::new(MetadataVersion(level)),
                timestamp_ms: -1,
            };
            let bytes = render_batches(&[data_batch(0, 1, &records)], &ctx, usize::MAX)
                .expect("valid batches render");
            decode_all(&bytes)[0]
                .records
                .iter()
                .map(|r| A::decode_framed(r.value.clone().expect("a value")).expect("framed"))
                .collect::<Vec<_>>()
        };
        let lists = |rec: &A| match rec {
            A::Partition(p) => (p.eligible_leader_replicas.clone(), p.last_known_elr.clone()),
            A::PartitionChange(c) => (c.eligible_leader_replicas.clone(), c.last_known_elr.clone()),
            other => panic!("{other:?}"),
        };
        let below = render(22);
        assert!(below
            .iter()
            .all(|(rec, v)| *v == 1 && lists(rec) == (None, None)));
        let at = render(23);
        assert_eq!(
            at.iter()
                .map(|(rec, v)| (lists(rec), *v))
                .collect::<Vec<_>>(),
            vec![
                ((Some(vec![5, 6]), Some(vec![4])), 2),
                ((Some(vec![6]), Some(vec![])), 2)
            ]
        );
        // A partition state without them writes neither field (not two empty lists).
        let mut plain = match &records[0] {
            MetadataRecord::PartitionV3(p) => (**p).clone(),
            other => panic!("{other:?}"),
        };
        plain.eligible_leader_replicas.clear();
        let (rec, v) = crate::log::records::kafka_record(
            MetadataRecord::PartitionV3(Box::new(plain)),
            MetadataVersion(27),
        );
        assert_eq!((lists(&rec), v), ((None, Some(vec![4])), 2));
    }

    /// A batch whose header counts other records than its payload holds, or whose payload
    /// does not decode, is an error naming its offset, and leaves the output exactly as it
    /// was: no half-written batch reaches a broker.
    #[test]
    fn a_bad_batch_is_an_error_and_writes_nothing() {
        let ctx = RenderContext::default();
        let good = leader_change_batch(10, 2);
        let noop = [MetadataRecord::NoOp(NoOpRecordV1 {})];
        let mut miscounted = data_batch(13, 2, &[noop[0].clone(), noop[0].clone()]);
        miscounted.record_count = 3;
        let mut undercounted = data_batch(13, 2, &noop);
        undercounted.record_count = 0;
        let mut control_miscounted = leader_change_batch(13, 2);
        control_miscounted.record_count = 2;
        let mut not_control = leader_change_batch(13, 2);
        not_control.payload = Payload::from(&b"not a control batch"[..]);
        let mut not_data = data_batch(13, 2, &noop);
        not_data.payload = Payload::from(&[0xffu8; 24][..]);
        for bad in [
            miscounted,
            undercounted,
            control_miscounted,
            not_control,
            not_data,
        ] {
            let mut out = BytesMut::new();
            let mut scratch = BytesMut::new();
            render_batch(&good, &ctx, &mut out, &mut scratch).expect("a good batch renders");
            let before = out.clone();
            let err = render_batch(&bad, &ctx, &mut out, &mut scratch)
                .expect_err("a bad batch is refused");
            assert!(
                matches!(err, RenderError::Batch { offset: 13, .. }),
                "{err}"
            );
            assert_eq!(out, before, "{err}: the output changed");
            assert!(render_batches(&[good.clone(), bad], &ctx, usize::MAX).is_err());
        }
    }

    /// The batches of a log with a `metadata.version` upgrade in its second data batch: a
    /// control batch, then three data batches of partitions (whose record version follows
    /// the level) around the upgrade.
    fn upgrade_log() -> Vec<Batch> {
        let partition = one_of_each()
            .into_iter()
            .map(|r| r.0)
            .find(|r| matches!(r, MetadataRecord::PartitionV3(_)))
            .expect("a partition record");
        let upgrade = MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
            name: "metadata.version".into(),
            min_level: 27,
            max_level: 27,
        });
        vec![
            leader_change_batch(0, 3),
            data_batch(3, 3, &[partition.clone(), partition.clone()]),
            data_batch(5, 3, &[partition.clone(), upgrade, partition.clone()]),
            data_batch(8, 3, &[partition]),
        ]
    }

    fn context_at(level: i16) -> RenderContext {
        RenderContext {
            voter_endpoints: Vec::new(),
            metadata_version: Cell::new(MetadataVersion(level)),
            timestamp_ms: -1,
        }
    }

    /// Through the cache, a fetch renders what rendering afresh gives, byte for byte, and
    /// moves `metadata.version` the same: the first fetch renders each data batch, a second
    /// (another broker's) takes every one from the cache; control batches are not kept.
    #[test]
    fn cached_renderings_are_the_fresh_ones() {
        let log = upgrade_log();
        let fresh_ctx = context_at(14);
        let fresh = render_batches(&log, &fresh_ctx, usize::MAX).expect("renders");
        assert_eq!(fresh_ctx.metadata_version.get(), MetadataVersion(27));
        let cache = RefCell::new(RenderCache::default());
        for (fetch, counts) in [(1, (0, 3)), (2, (3, 3))] {
            let ctx = context_at(14);
            let r = render_batches_from(&log, &ctx, usize::MAX, Some(&cache)).expect("renders");
            assert_eq!(r.to_bytes(), fresh, "fetch {fetch}");
            assert_eq!(r.batches(), 4);
            assert_eq!(
                ctx.metadata_version.get(),
                MetadataVersion(27),
                "fetch {fetch}"
            );
            assert_eq!(cache.borrow().counts(), counts, "fetch {fetch}");
        }
        // A broker starting past the upgrade renders at the level it brings.
        let ctx = context_at(27);
        let tail = render_batches_from(&log[3..], &ctx, usize::MAX, Some(&cache)).expect("renders");
        let alone = render_batches(&log[3..], &context_at(27), usize::MAX).expect("renders");
        assert_eq!(tail.to_bytes(), alone);
        assert_eq!(cache.borrow().counts(), (4, 3));
    }

    /// A batch rendered for one broker is what the cache keeps, not a copy, and an answer is
    /// those renderings themselves: the fetches of a second and a third broker answer from
    /// the same memory, and an answer of several batches is their cached renderings one after
    /// the other, never copied together. The cache's renderings share blocks.
    #[test]
    fn answers_are_the_cached_renderings_themselves() {
        let log = upgrade_log();
        let cache = RefCell::new(RenderCache::default());
        let fetch = |batches: &[Batch], level: i16| {
            render_batches_from(batches, &context_at(level), usize::MAX, Some(&cache))
                .expect("renders")
                .into_parts()
        };
        let answers: Vec<Vec<Bytes>> = (0..3).map(|_| fetch(&log[1..2], 14)).collect();
        assert_eq!(cache.borrow().counts(), (2, 1));
        assert_eq!(
            answers[0],
            [render_batches(&log[1..2], &context_at(14), usize::MAX).expect("renders")]
        );
        for a in &answers[1..] {
            assert_eq!(a[0].as_ptr(), answers[0][0].as_ptr(), "the same buffer");
        }
        // Several batches: each part is the cached rendering of its batch.
        let two = fetch(&log[1..3], 14);
        let third_alone = fetch(&log[2..3], 14);
        assert_eq!(two.len(), 2);
        assert_eq!(two[0].as_ptr(), answers[0][0].as_ptr());
        assert_eq!(two[1].as_ptr(), third_alone[0].as_ptr());
        assert_eq!(
            two.concat(),
            render_batches(&log[1..3], &context_at(14), usize::MAX).expect("renders")
        );
        // The renderings the cache keeps lie one after the other in one block.
        let cache = RefCell::new(RenderCache::default());
        let fetch = |batches: &[Batch], level: i16| {
            let [one] = render_batches_from(batches, &context_at(level), usize::MAX, Some(&cache))
                .expect("renders")
                .into_parts()
                .try_into()
                .expect("one batch");
            one
        };
        let parts: Vec<Bytes> = (1..3).map(|i| fetch(&log[i..i + 1], 14)).collect();
        assert_eq!(
            parts[1].as_ptr(),
            parts[0].as_ptr().wrapping_add(parts[0].len())
        );
        // An older batch (a broker catching up, here a batch rendered again at another level)
        // is not written into the block, where it would keep the block alive; the tail's next
        // batch follows the last one there.
        let older = fetch(&log[1..2], 27);
        let block = parts[0].as_ptr() as usize..parts[0].as_ptr() as usize + RENDER_BLOCK_BYTES;
        assert!(!block.contains(&(older.as_ptr() as usize)));
        let next = fetch(&log[3..4], 27);
        assert_eq!(
            next.as_ptr(),
            parts[1].as_ptr().wrapping_add(parts[1].len())
        );
    }

    /// A batch is taken from the cache only as rendered at the same level and written in the
    /// same epoch: at another `metadata.version` (its record versions differ), or at the same
    /// offset in a later epoch (a new leader's log), it is rendered afresh and replaces the
    /// old rendering.
    #[test]
    fn another_level_or_epoch_is_rendered_afresh() {
        let log = upgrade_log();
        let cache = RefCell::new(RenderCache::default());
        let at_14 = render_batches_from(&log[1..2], &context_at(14), usize::MAX, Some(&cache))
            .expect("renders");
        let at_27 = render_batches_from(&log[1..2], &context_at(27), usize::MAX, Some(&cache))
            .expect("renders");
        assert_ne!(
            at_14.to_bytes(),
            at_27.to_bytes(),
            "the record versions differ"
        );
        assert_eq!(
            at_27.to_bytes(),
            render_batches(&log[1..2], &context_at(27), usize::MAX).expect("renders")
        );
        let noop = MetadataRecord::NoOp(NoOpRecordV1 {});
        let later = [data_batch(3, 4, &[noop.clone(), noop])];
        let r = render_batches_from(&later, &context_at(27), usize::MAX, Some(&cache))
            .expect("renders");
        assert_eq!(
            r.to_bytes(),
            render_batches(&later, &context_at(27), usize::MAX).expect("renders")
        );
        assert_eq!(cache.borrow().counts(), (0, 3));
        let again = render_batches_from(&later, &context_at(27), usize::MAX, Some(&cache))
            .expect("renders");
        assert_eq!(again.to_bytes(), r.to_bytes());
        assert_eq!(
            cache.borrow().counts(),
            (1, 3),
            "the new epoch's rendering is kept"
        );
    }

    /// The cache holds at most its bound in bytes, dropping the lowest offsets first, and a
    /// rendering larger than the bound is not kept.
    #[test]
    fn the_cache_is_bounded_dropping_the_oldest() {
        let noop = MetadataRecord::NoOp(NoOpRecordV1 {});
        let batches: Vec<Batch> = (0..40)
            .map(|i| data_batch(i * 2, 1, &[noop.clone(), noop.clone()]))
            .collect();
        let one = render_batches(&batches[..1], &context_at(27), usize::MAX)
            .expect("renders")
            .len();
        let cache = RefCell::new(RenderCache::new(one * 10));
        render_batches_from(&batches, &context_at(27), usize::MAX, Some(&cache)).expect("renders");
        assert_eq!(cache.borrow().bytes(), one * 10);
        assert_eq!(cache.borrow().counts(), (0, 40));
        // The newest ten are kept, the older ones are not.
        render_batches_from(&batches[30..], &context_at(27), usize::MAX, Some(&cache))
            .expect("renders");
        assert_eq!(cache.borrow().counts(), (10, 40));
        render_batches_from(&batches[29..30], &context_at(27), usize::MAX, Some(&cache))
            .expect("renders");
        assert_eq!(cache.borrow().counts(), (10, 41));
        assert!(cache.borrow().bytes() <= one * 10);
        let small = RefCell::new(RenderCache::new(one - 1));
        render_batches_from(&batches[..1], &context_at(27), usize::MAX, Some(&small))
            .expect("renders");
        assert_eq!(small.borrow().bytes(), 0);
    }

    /// A batch cut by `bytes_max` leaves `metadata.version` where it was before that batch:
    /// the next fetch starts at it and renders its records before an upgrade at the old
    /// level, as the first fetch would have.
    #[test]
    fn a_cut_batch_does_not_move_the_metadata_version() {
        let log = upgrade_log();
        let first = render_batches(&log[..2], &context_at(14), usize::MAX)
            .expect("renders")
            .len();
        for cache in [None, Some(RefCell::new(RenderCache::default()))] {
            let ctx = context_at(14);
            let r = render_batches_from(&log, &ctx, first, cache.as_ref()).expect("renders");
            assert_eq!(r.batches(), 2);
            assert_eq!(r.to_bytes().len(), first);
            assert_eq!(ctx.metadata_version.get(), MetadataVersion(14));
            let rest =
                render_batches_from(&log[2..], &ctx, usize::MAX, cache.as_ref()).expect("renders");
            let whole = render_batches(&log, &context_at(14), usize::MAX).expect("renders");
            assert_eq!(
                [&r.to_bytes()[..], &rest.to_bytes()[..]].concat(),
                &whole[..]
            );
        }
    }

    /// `bytes_max` cuts between batches: the batches that fit are rendered whole, the first
    /// always, and nothing of the one that does not fit.
    #[test]
    fn bytes_max_cuts_between_batches() {
        let ctx = RenderContext::default();
        let noop = MetadataRecord::NoOp(NoOpRecordV1 {});
        let batches = [
            leader_change_batch(0, 1),
            data_batch(3, 1, &[noop.clone(), noop.clone()]),
            data_batch(5, 1, &[noop]),
        ];
        let alone: Vec<Bytes> = batches
            .iter()
            .map(|b| render_batches(std::slice::from_ref(b), &ctx, usize::MAX).expect("renders"))
            .collect();
        let whole = render_batches(&batches, &ctx, usize::MAX).expect("renders");
        assert_eq!(whole, [&alone[0][..], &alone[1], &alone[2]].concat());
        let (a, b) = (alone[0].len(), alone[1].len());
        for (bytes_max, batches_kept) in [
            (0, 1),
            (a - 1, 1),
            (a, 1),
            (a + b - 1, 1),
            (a + b, 2),
            (whole.len() - 1, 2),
            (whole.len(), 3),
        ] {
            let cut = render_batches(&batches, &ctx, bytes_max).expect("renders");
            let kept: usize = alone[..batches_kept].iter().map(Bytes::len).sum();
            assert_eq!(&cut[..], &whole[..kept], "bytes_max {bytes_max}");
            assert_eq!(
                decode_all(&cut).len(),
                batches_kept,
                "bytes_max {bytes_max}"
            );
        }
    }

    /// A corum snapshot renders in Kafka's layout: a header batch (SnapshotHeader, and with
    /// `kraft.version` 1 the KRaftVersion and Voters records), the image's records in batches
    /// of at most a thousand, and a footer batch; offsets count from 0 without a gap and every
    /// batch is at the snapshot's epoch.
    #[test]
    fn snapshots_render_in_kafkas_layout() {
        let id = SnapshotId {
            end_offset: LogOffset(5_000),
            epoch: Epoch(9),
        };
        let mut image: Vec<MetadataRecord> = one_of_each().into_iter().map(|r| r.0).collect();
        let named = image.len();
        image.extend((0..2_000u32).map(|i| {
            MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Topic,
                resource_name: format!("t{i}"),
                key: "retention.ms".into(),
                value: Some(i.to_string()),
            })
        }));
        let data = encode_batch(&image);
        let ctx = RenderContext {
            voter_endpoints: Vec::new(),
            metadata_version: Cell::new(MetadataVersion(27)),
            timestamp_ms: 77,
        };
        for kraft_version in [0u16, 1] {
            let bytes = render_snapshot(id, &voters(), kraft_version, &data, &ctx)
                .expect("a valid snapshot renders");
            let sets = decode_all(&bytes);
            let header_len = if kraft_version > 0 { 3 } else { 1 };
            // Header, 1,000 + 1,000 + the rest, footer.
            assert_eq!(
                sets.iter().map(|s| s.records.len()).collect::<Vec<_>>(),
                vec![header_len, 1_000, 1_000, image.len() - 2_000, 1],
                "kraft.version {kraft_version}"
            );
            let mut next = 0i64;
            for (i, set) in sets.iter().enumerate() {
                let control = i == 0 || i == sets.len() - 1;
                for r in &set.records {
                    assert_eq!(r.offset, next, "offsets are contiguous from 0");
                    assert_eq!(r.partition_leader_epoch, 9, "at the snapshot's epoch");
                    assert_eq!(r.control, control);
                    next += 1;
                }
            }
            let header = &sets[0].records;
            assert_eq!(key_type(&header[0].key), 3);
            let h: SnapshotHeaderRecord = message(&header[0].value);
            assert_eq!((h.version, h.last_contained_log_timestamp), (0, 77));
            if kraft_version > 0 {
                assert_eq!(key_type(&header[1].key), 5);
                let mut kv = header[1].value.clone().expect("a value");
                let kv = k::KRaftVersionRecord::decode(&mut kv, 0).expect("v0");
                assert_eq!(kv.kraft_version, 1);
                assert_eq!(key_type(&header[2].key), 6);
                check_voters_record(&message::<VotersRecord>(&header[2].value));
            }
            let footer = &sets[sets.len() - 1].records[0];
            assert_eq!(key_type(&footer.key), 4);
            let f: SnapshotFooterRecord = message(&footer.value);
            assert_eq!(f.version, 0);
            let values: Vec<A> = sets[1..sets.len() - 1]
                .iter()
                .flat_map(|s| &s.records)
                .map(|r| {
                    A::decode_framed(r.value.clone().expect("a value"))
                        .expect("a framed metadata record")
                        .0
                })
                .collect();
            let expected: Vec<A> = one_of_each().into_iter().map(|r| r.1).collect();
            assert_eq!(&values[..named], &expected[..]);
            let A::Config(last) = &values[values.len() - 1] else {
                panic!("the last record is a config: {:?}", values.last());
            };
            assert_eq!(
                (last.resource_name.as_str(), last.value.as_deref()),
                ("t1999", Some("1999"))
            );
        }
    }

    /// An empty image is a header and a footer; bytes that are not a corum batch are an
    /// error naming the snapshot.
    #[test]
    fn snapshot_edges() {
        let id = SnapshotId {
            end_offset: LogOffset(3),
            epoch: Epoch(1),
        };
        let ctx = RenderContext::default();
        let empty = render_snapshot(id, &voters(), 0, &encode_batch(&[]), &ctx).expect("renders");
        let sets = decode_all(&empty);
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[1].records[0].offset, 1);
        let err = render_snapshot(id, &voters(), 1, &[1, 2, 3], &ctx).expect_err("not a batch");
        assert!(
            matches!(
                err,
                RenderError::Snapshot {
                    end_offset: 3,
                    epoch: 1,
                    ..
                }
            ),
            "{err}"
        );
    }
}
