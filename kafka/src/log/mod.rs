//! The metadata log as Kafka brokers see it: corum's batches rendered as Kafka RecordBatches
//! at the same offsets and leader epochs, one Kafka record per corum record, and corum's
//! snapshots as Kafka snapshots.
//!
//! corum keeps its own format (rkyv records in its own frames); this is produced at the edge,
//! per fetch, from the batches the Raft core hands out.
//!
//! | module | what |
//! |---|---|
//! | [`batch`] | Kafka's RecordBatch (magic 2), written |
//! | [`control`] | Raft control records: LeaderChange, Voters, KRaftVersion, snapshot header and footer |
//! | [`records`] | metadata records: each corum record as its Kafka counterpart, at the record version the `metadata.version` in force writes |
//!
//! A Kafka snapshot is a header batch (SnapshotHeader, then KRaftVersion and Voters when the
//! quorum is dynamic), the image's records in batches, and a footer batch, with offsets
//! counting from 0 and every batch at the snapshot's epoch, as Kafka's snapshot writer lays
//! them out.

pub mod batch;
pub mod control;
pub mod records;

use std::cell::RefCell;
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
/// result past `bytes_max` (the first is always rendered whole).
pub fn render_batches(
    batches: &[Batch],
    ctx: &RenderContext,
    bytes_max: usize,
) -> Result<Bytes, RenderError> {
    let mut out = BytesMut::new();
    let mut scratch = BytesMut::new();
    for b in batches {
        let before = out.len();
        render_batch(b, ctx, &mut out, &mut scratch)?;
        if out.len() > bytes_max && before > 0 {
            out.truncate(before);
            break;
        }
    }
    Ok(out.freeze())
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
        base_timestamp: ctx.timestamp_ms,
        max_timestamp: ctx.timestamp_ms,
    };
    let bad = |reason: String| RenderError::Batch {
        offset: b.base_offset.0,
        reason,
    };
    let mut w = BatchWriter::begin(out, meta);
    if b.control {
        let records = corum_raft::control::decode(&b.payload).map_err(|e| bad(e.to_string()))?;
        for r in &records {
            scratch.clear();
            let t = control::record(r, &ctx.voter_endpoints, scratch);
            w.record(Some(&t.key()), scratch);
        }
    } else {
        records::render_payload(&b.payload, ctx, |value| w.record(None, value), scratch)
            .map_err(bad)?;
    }
    if w.len() as u64 != u64::from(b.record_count) {
        let n = w.len();
        // Leave `out` as it was: a half-written batch must not reach a broker.
        return Err(bad(format!(
            "the header counts {} records, the payload holds {n}",
            b.record_count
        )));
    }
    w.finish();
    Ok(())
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
/// long poll needs it), and the newest snapshot rendered.
#[derive(Debug, Default)]
pub struct ObserverMemory {
    sent: RefCell<HashMap<NodeId, LogOffset>>,
    snapshot: RefCell<Option<(SnapshotId, Bytes)>>,
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
}

impl Clone for ObserverMemory {
    /// A listener's copy starts with nothing remembered.
    fn clone(&self) -> Self {
        ObserverMemory::default()
    }
}
