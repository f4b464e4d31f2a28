//! A corum metadata log and snapshot written out as Kafka's own files (`corum dump-log
//! --kafka-export`), for Kafka's tools to read: `kafka-dump-log --cluster-metadata-decoder`
//! (`kafka.tools.DumpLogSegments`) and the metadata shell (`kafka-metadata-shell --snapshot`).
//!
//! ```text
//! OUT/__cluster_metadata-0/00000000000000000000.log                     a segment
//! OUT/__cluster_metadata-0/00000000000000001234-0000000003.checkpoint   the snapshot through offset 1234, epoch 3
//! ```
//!
//! A segment file is Kafka RecordBatches back to back, named by the 20-digit base offset of
//! its first batch; each batch is a corum batch rendered as a broker fetching it receives it
//! ([`super::render_batch`]: same base offset, leader epoch and record count). Batches must
//! come in offset order without a gap. The next batch starts a new segment when it would take
//! the current one past `segment_bytes_max` (Kafka addresses positions in a segment with 32
//! bits; its own default for the metadata log is [`SEGMENT_BYTES_MAX`]). No index files are
//! written: Kafka's tools read a `.log` alone, and a broker rebuilds missing indexes.
//!
//! The snapshot file is named as KIP-630 names it (Kafka's `Snapshots`: the 20-digit end
//! offset, a dash, the 10-digit epoch, `.checkpoint`) and holds the snapshot rendered as a
//! broker downloading it receives it ([`super::render_snapshot`]).
//!
//! Nothing is ever overwritten: the partition directory must be new or empty, and every file
//! is created exclusively. [`KafkaExport::discard`] removes what an export that failed half
//! way wrote, so a second attempt starts clean.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use corum_controller::image::ControllersImage;
use corum_controller::records::{aligned, decode_batch};
use corum_raft::{Batch, Endpoint, Snapshot, SnapshotId};
use corum_types::{Epoch, LogOffset, NodeId};

use super::{render_batch, render_snapshot, RenderContext, RenderError};

/// The metadata log's partition directory, as Kafka names it under `metadata.log.dir`.
pub const PARTITION_DIR: &str = "__cluster_metadata-0";

/// The size a segment grows to before the next batch starts a new one: 1 GiB, Kafka's default
/// `metadata.log.segment.bytes`.
pub const SEGMENT_BYTES_MAX: u64 = 1 << 30;

/// The largest `segment_bytes_max` accepted: Kafka reads positions in a segment as int32.
const SEGMENT_BYTES_LIMIT: u64 = i32::MAX as u64;

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The partition directory already holds files: export into a new or empty directory.
    #[error("{} is not empty: export into a new or empty directory", path.display())]
    NotEmpty { path: PathBuf },
    /// A file or directory could not be created, written or synced.
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A batch or the snapshot does not render (bytes that are not corum records).
    #[error(transparent)]
    Render(#[from] RenderError),
    /// A batch does not start where the one before ended.
    #[error("the batch at offset {found} does not continue the log, which ends at {expected}")]
    NotContiguous {
        expected: LogOffset,
        found: LogOffset,
    },
    /// An epoch beyond Kafka's int32 epochs.
    #[error("epoch {epoch} at offset {offset} is beyond Kafka's epochs (int32)")]
    EpochOutOfRange { offset: LogOffset, epoch: Epoch },
}

pub type Result<T> = std::result::Result<T, ExportError>;

/// A segment's file name: its first batch's base offset, 20 digits, then `.log`.
pub fn segment_file_name(base_offset: LogOffset) -> String {
    format!("{:020}.log", base_offset.0)
}

/// A snapshot's file name as Kafka's `Snapshots` parses it: the 20-digit end offset, a dash,
/// the 10-digit epoch, then `.checkpoint`.
pub fn snapshot_file_name(id: SnapshotId) -> String {
    format!("{:020}-{:010}.checkpoint", id.end_offset.0, id.epoch.0)
}

/// Each registered controller's endpoint on `listener` (KIP-919 registrations, as the image
/// holds them), for [`RenderContext::voter_endpoints`]: what a node's Kafka listener named
/// `listener` adds to the VotersRecords it serves. A controller registered without such a
/// listener gets none (its entry lists its Raft endpoints only).
pub fn voter_endpoints(controllers: &ControllersImage, listener: &str) -> Vec<(NodeId, Endpoint)> {
    controllers
        .iter()
        .filter_map(|c| {
            let e = c
                .end_points
                .iter()
                .find(|e| e.name.eq_ignore_ascii_case(listener))?;
            Some((
                c.controller_id,
                Endpoint {
                    listener: listener.to_owned(),
                    host: e.host.clone(),
                    port: e.port,
                },
            ))
        })
        .collect()
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportSummary {
    /// The partition directory.
    pub dir: PathBuf,
    /// The segment files, in offset order.
    pub segments: Vec<PathBuf>,
    pub batches: u64,
    /// Of [`ExportSummary::batches`], the control batches.
    pub control_batches: u64,
    /// Records in all batches (control records included).
    pub records: u64,
    /// The first exported offset and the offset after the last batch (none without batches).
    pub offsets: Option<(LogOffset, LogOffset)>,
    /// Bytes of all segments.
    pub log_bytes: u64,
    pub snapshot: Option<ExportedSnapshot>,
}

/// The snapshot file an export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportedSnapshot {
    pub id: SnapshotId,
    pub path: PathBuf,
    /// The image's metadata records (besides the header and footer batches).
    pub records: u64,
    pub bytes: u64,
}

/// The segment being written.
struct OpenSegment {
    file: BufWriter<File>,
    path: PathBuf,
    bytes: u64,
}

/// An export in progress (see the module doc): [`KafkaExport::create`], the batches in offset
/// order with [`KafkaExport::append`], at most one [`KafkaExport::write_snapshot`], then
/// [`KafkaExport::finish`] (or [`KafkaExport::discard`] after an error).
pub struct KafkaExport {
    dir: PathBuf,
    /// Whether [`KafkaExport::create`] made the partition directory (so discarding removes it).
    created_dir: bool,
    ctx: RenderContext,
    segment_bytes_max: u64,
    segment: Option<OpenSegment>,
    /// Every file created, for [`KafkaExport::discard`].
    files: Vec<PathBuf>,
    rendered: BytesMut,
    scratch: BytesMut,
    summary: ExportSummary,
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ExportError + 'a {
    move |source| ExportError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

fn kafka_epoch(offset: LogOffset, epoch: Epoch) -> Result<()> {
    if i32::try_from(epoch.0).is_err() {
        return Err(ExportError::EpochOutOfRange { offset, epoch });
    }
    Ok(())
}

impl KafkaExport {
    /// Starts an export into `out`/[`PARTITION_DIR`], creating the directories as needed;
    /// refuses a partition directory that holds anything. `segment_bytes_max` must be
    /// positive and at most `i32::MAX` (a batch larger than it still gets a segment of its
    /// own).
    pub fn create(out: &Path, ctx: RenderContext, segment_bytes_max: u64) -> Result<KafkaExport> {
        assert!(
            (1..=SEGMENT_BYTES_LIMIT).contains(&segment_bytes_max),
            "segment_bytes_max {segment_bytes_max} outside 1..={SEGMENT_BYTES_LIMIT}"
        );
        let dir = out.join(PARTITION_DIR);
        let created_dir = match std::fs::read_dir(&dir) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(ExportError::NotEmpty { path: dir });
                }
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&dir).map_err(io("creating", &dir))?;
                true
            }
            Err(e) => return Err(io("reading", &dir)(e)),
        };
        Ok(KafkaExport {
            summary: ExportSummary {
                dir: dir.clone(),
                segments: Vec::new(),
                batches: 0,
                control_batches: 0,
                records: 0,
                offsets: None,
                log_bytes: 0,
                snapshot: None,
            },
            dir,
            created_dir,
            ctx,
            segment_bytes_max,
            segment: None,
            files: Vec::new(),
            rendered: BytesMut::new(),
            scratch: BytesMut::new(),
        })
    }

    /// Renders `batch` and appends it to the current segment (or a new one, see the module
    /// doc). It must start where the batch before ended.
    pub fn append(&mut self, batch: &Batch) -> Result<()> {
        if let Some((_, end)) = self.summary.offsets {
            if batch.base_offset != end {
                return Err(ExportError::NotContiguous {
                    expected: end,
                    found: batch.base_offset,
                });
            }
        }
        kafka_epoch(batch.base_offset, batch.epoch)?;
        self.rendered.clear();
        render_batch(batch, &self.ctx, &mut self.rendered, &mut self.scratch)?;
        let len = self.rendered.len() as u64;
        let full = self
            .segment
            .as_ref()
            .is_some_and(|s| s.bytes > 0 && s.bytes + len > self.segment_bytes_max);
        if full {
            self.close_segment()?;
        }
        if self.segment.is_none() {
            let path = self.dir.join(segment_file_name(batch.base_offset));
            let file = self.create_file(&path)?;
            self.summary.segments.push(path.clone());
            self.segment = Some(OpenSegment {
                file: BufWriter::new(file),
                path,
                bytes: 0,
            });
        }
        let segment = self.segment.as_mut().expect("opened above");
        segment
            .file
            .write_all(&self.rendered)
            .map_err(io("writing", &segment.path))?;
        segment.bytes += len;
        let s = &mut self.summary;
        s.batches += 1;
        s.control_batches += u64::from(batch.control);
        s.records += u64::from(batch.record_count);
        s.log_bytes += len;
        let first = s.offsets.map_or(batch.base_offset, |(first, _)| first);
        s.offsets = Some((first, batch.end_offset()));
        Ok(())
    }

    /// Renders `snapshot` into its `.checkpoint` file. An export holds one snapshot.
    pub fn write_snapshot(&mut self, snapshot: &Snapshot) -> Result<()> {
        assert!(
            self.summary.snapshot.is_none(),
            "an export holds one snapshot, the newest"
        );
        let id = snapshot.id;
        kafka_epoch(id.end_offset, id.epoch)?;
        let rendered = render_snapshot(
            id,
            &snapshot.voters,
            snapshot.kraft_version,
            &snapshot.data,
            &self.ctx,
        )?;
        // It rendered, so its records decode.
        let records = decode_batch(&aligned(&snapshot.data))
            .map(|b| b.len() as u64)
            .expect("a snapshot that rendered decodes");
        let path = self.dir.join(snapshot_file_name(id));
        let mut file = self.create_file(&path)?;
        file.write_all(&rendered).map_err(io("writing", &path))?;
        file.sync_all().map_err(io("syncing", &path))?;
        self.summary.snapshot = Some(ExportedSnapshot {
            id,
            path,
            records,
            bytes: rendered.len() as u64,
        });
        Ok(())
    }

    /// Makes every file durable and says what was written; after a failure to, removes what
    /// it wrote as [`KafkaExport::discard`] does.
    pub fn finish(mut self) -> Result<ExportSummary> {
        let synced = self.close_segment().and_then(|()| {
            let dir = File::open(&self.dir).map_err(io("opening", &self.dir))?;
            dir.sync_all().map_err(io("syncing", &self.dir))
        });
        match synced {
            Ok(()) => Ok(self.summary),
            Err(e) => {
                self.discard();
                Err(e)
            }
        }
    }

    /// Removes every file this export created, and the partition directory if it created it
    /// (best effort: this runs after another error, which is the one to report).
    pub fn discard(mut self) {
        // Dropping the writer may try to flush into a file about to go: nothing to keep.
        self.segment = None;
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        if self.created_dir {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }

    /// Creates `path`, which must not exist, and remembers it for [`KafkaExport::discard`].
    fn create_file(&mut self, path: &Path) -> Result<File> {
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io("creating", path))?;
        self.files.push(path.to_path_buf());
        Ok(file)
    }

    fn close_segment(&mut self) -> Result<()> {
        if let Some(s) = self.segment.take() {
            let file = s
                .file
                .into_inner()
                .map_err(|e| io("writing", &s.path)(e.into_error()))?;
            file.sync_all().map_err(io("syncing", &s.path))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use corum_controller::records::{
        encode_batch, ConfigRecordV1, ConfigResourceType, ControllerEndpointV1, MetadataRecord,
        RegisterControllerRecordV1, TopicRecordV1,
    };
    use corum_controller::{MetadataImage, TopicId};
    use corum_raft::control::{ControlRecord, LeaderChangeRecord, VotersRecord as RaftVoters};
    use corum_raft::Payload;
    use corum_types::Uuid;
    use kafka_protocol::messages::VotersRecord;
    use kafka_protocol::protocol::Decodable;
    use kafka_protocol::records::{RecordBatchDecoder, RecordSet};

    use super::*;
    use crate::log::tests::{control_batch, data_batch, voters};
    use crate::metadata::AnyMetadataRecord as A;

    /// A LeaderChange and a Voters record: what a new leader of a dynamic quorum writes.
    fn leader_batch(base_offset: u64, epoch: u64) -> Batch {
        control_batch(
            base_offset,
            epoch,
            vec![
                ControlRecord::LeaderChange(LeaderChangeRecord {
                    epoch: Epoch(epoch),
                    leader: NodeId(1),
                    granted_by: vec![NodeId(1), NodeId(2)],
                }),
                ControlRecord::Voters(RaftVoters {
                    version: 0,
                    voters: voters(),
                }),
            ],
        )
    }

    fn topic(i: u64) -> MetadataRecord {
        MetadataRecord::Topic(TopicRecordV1 {
            name: format!("t{i:03}"),
            topic_id: TopicId(Uuid([i as u8; 16])),
            deleting: false,
        })
    }

    /// A log of a control batch and `n` data batches of two topics each, from offset `base`.
    fn log(base: u64, n: u64) -> Vec<Batch> {
        let mut out = vec![leader_batch(base, 4)];
        let mut at = base + 2;
        for i in 0..n {
            out.push(data_batch(at, 4, &[topic(2 * i), topic(2 * i + 1)]));
            at += 2;
        }
        out
    }

    fn decode_file(path: &Path) -> Vec<RecordSet> {
        let bytes = std::fs::read(path).expect("the file exists");
        RecordBatchDecoder::decode_all(&mut bytes::Bytes::from(bytes))
            .expect("Kafka's batch decoder reads the file")
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("the directory exists")
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        v.sort();
        v
    }

    /// File names are Kafka's: a segment by its first base offset in 20 digits, a snapshot by
    /// its end offset (20 digits) and epoch (10 digits), as Kafka's `Snapshots` parses them.
    #[test]
    fn file_names_follow_kafka() {
        assert_eq!(segment_file_name(LogOffset(0)), "00000000000000000000.log");
        assert_eq!(
            segment_file_name(LogOffset(1234)),
            "00000000000000001234.log"
        );
        let id = SnapshotId {
            end_offset: LogOffset(1234),
            epoch: Epoch(3),
        };
        assert_eq!(
            snapshot_file_name(id),
            "00000000000000001234-0000000003.checkpoint"
        );
        let widest = SnapshotId {
            end_offset: LogOffset(i64::MAX as u64),
            epoch: Epoch(i32::MAX as u64),
        };
        let name = snapshot_file_name(widest);
        assert_eq!(name.len(), 20 + 1 + 10 + ".checkpoint".len());
        assert_eq!(name, "09223372036854775807-2147483647.checkpoint");
    }

    /// Batches written out decode with Kafka's RecordBatch decoder at their offsets, epochs
    /// and record counts, byte for byte what a broker fetching them receives; segments roll
    /// at the size bound, each named by its first batch; the snapshot decodes as a Kafka
    /// snapshot; the summary counts what was written.
    #[test]
    fn a_log_and_snapshot_round_trip_through_kafkas_decoder() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let batches = log(100, 12);
        let ctx = RenderContext::default();
        let one = crate::log::render_batches(&batches[1..2], &ctx, usize::MAX)
            .expect("renders")
            .len() as u64;
        let control = crate::log::render_batches(&batches[..1], &ctx, usize::MAX)
            .expect("renders")
            .len() as u64;
        // Room for three data batches (all of one size), or the control batch and one.
        assert!(one < control && control <= 2 * one, "{control} vs {one}");
        let mut export =
            KafkaExport::create(tmp.path(), ctx.clone(), 3 * one).expect("a new directory");
        for b in &batches {
            export.append(b).expect("appends");
        }
        let image = vec![topic(1), topic(2), topic(3)];
        let snapshot = Snapshot {
            id: SnapshotId {
                end_offset: LogOffset(110),
                epoch: Epoch(4),
            },
            voters: voters(),
            kraft_version: 1,
            data: Payload::from(&encode_batch(&image)[..]),
        };
        export.write_snapshot(&snapshot).expect("writes");
        let summary = export.finish().expect("finishes");

        let dir = tmp.path().join(PARTITION_DIR);
        assert_eq!(
            names(&dir),
            vec![
                "00000000000000000100.log",
                "00000000000000000104.log",
                "00000000000000000110-0000000004.checkpoint",
                "00000000000000000110.log",
                "00000000000000000116.log",
                "00000000000000000122.log",
            ]
        );
        let whole = crate::log::render_batches(&batches, &ctx, usize::MAX).expect("renders");
        let mut concatenated = Vec::new();
        let mut sets = Vec::new();
        for s in &summary.segments {
            concatenated.extend(std::fs::read(s).expect("a segment"));
            let first = decode_file(s);
            let name = s
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            assert_eq!(
                name,
                segment_file_name(LogOffset(first[0].records[0].offset as u64))
            );
            sets.extend(first);
        }
        assert_eq!(concatenated, &whole[..], "what a broker fetching receives");
        assert_eq!(sets.len(), batches.len());
        for (set, b) in sets.iter().zip(&batches) {
            assert_eq!(set.records.len(), b.record_count as usize);
            assert_eq!(set.records[0].offset, b.base_offset.0 as i64);
            assert!(set.records.iter().all(|r| r.control == b.control));
            assert!(set
                .records
                .iter()
                .all(|r| r.partition_leader_epoch == b.epoch.0 as i32));
        }
        let A::Topic(t) = A::decode_framed(sets[12].records[1].value.clone().expect("a value"))
            .expect("a metadata record")
            .0
        else {
            panic!("the last record is a topic");
        };
        assert_eq!(t.name.as_str(), "t023");

        let snap = summary.snapshot.as_ref().expect("a snapshot");
        let sets = decode_file(&snap.path);
        assert_eq!(
            sets.iter().map(|s| s.records.len()).collect::<Vec<_>>(),
            vec![3, 3, 1],
            "header (SnapshotHeader, KRaftVersion, Voters), the image, footer"
        );
        assert!(sets
            .iter()
            .flat_map(|s| &s.records)
            .all(|r| r.partition_leader_epoch == 4));
        assert_eq!(
            (snap.records, snap.bytes),
            (3, std::fs::metadata(&snap.path).expect("the file").len())
        );

        assert_eq!(summary.batches, 13);
        assert_eq!(summary.control_batches, 1);
        assert_eq!(summary.records, 2 + 24);
        assert_eq!(summary.offsets, Some((LogOffset(100), LogOffset(126))));
        assert_eq!(summary.log_bytes, whole.len() as u64);
    }

    /// A partition directory that holds anything is refused before anything is written (the
    /// files there stay as they were); an empty one is used; an export that failed half way
    /// leaves nothing behind when discarded.
    #[test]
    fn existing_output_is_refused_and_a_failed_export_is_discarded() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let dir = tmp.path().join(PARTITION_DIR);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("00000000000000000000.log"), b"theirs").expect("write");
        let err = KafkaExport::create(tmp.path(), RenderContext::default(), SEGMENT_BYTES_MAX)
            .err()
            .expect("refused");
        assert!(
            matches!(&err, ExportError::NotEmpty { path } if *path == dir),
            "{err}"
        );
        assert!(err.to_string().contains("not empty"), "{err}");
        assert_eq!(
            std::fs::read(dir.join("00000000000000000000.log")).expect("still there"),
            b"theirs"
        );

        // An empty partition directory is fine, and stays after a discard.
        let empty = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir(empty.path().join(PARTITION_DIR)).expect("mkdir");
        let mut export =
            KafkaExport::create(empty.path(), RenderContext::default(), SEGMENT_BYTES_MAX)
                .expect("an empty directory");
        let batches = log(0, 2);
        export.append(&batches[0]).expect("appends");
        // A batch that skips offsets is refused, naming both.
        let err = export.append(&batches[2]).expect_err("a gap");
        assert!(
            matches!(
                err,
                ExportError::NotContiguous {
                    expected: LogOffset(2),
                    found: LogOffset(4)
                }
            ),
            "{err}"
        );
        let mut bad = batches[1].clone();
        bad.payload = Payload::from(&[0xffu8; 24][..]);
        assert!(matches!(
            export.append(&bad).expect_err("not records"),
            ExportError::Render(_)
        ));
        export.discard();
        assert_eq!(
            names(&empty.path().join(PARTITION_DIR)),
            Vec::<String>::new()
        );

        // A directory the export created goes with a discard.
        let fresh = tempfile::tempdir().expect("a temporary directory");
        let out = fresh.path().join("nested/out");
        let mut export = KafkaExport::create(&out, RenderContext::default(), SEGMENT_BYTES_MAX)
            .expect("created");
        export.append(&batches[0]).expect("appends");
        export.discard();
        assert!(!out.join(PARTITION_DIR).exists());

        // An epoch Kafka cannot represent is refused.
        let mut export = KafkaExport::create(&out, RenderContext::default(), SEGMENT_BYTES_MAX)
            .expect("created again");
        let mut far = batches[0].clone();
        far.epoch = Epoch(1 << 31);
        assert!(matches!(
            export.append(&far).expect_err("too far"),
            ExportError::EpochOutOfRange { .. }
        ));
        export.discard();
    }

    /// The voter endpoints come from the controllers' registrations on the named listener
    /// (any case), and a VotersRecord rendered with them lists each voter's Raft endpoint, then
    /// that one; a controller without the listener adds nothing.
    #[test]
    fn voter_endpoints_come_from_registrations() {
        let mut image = MetadataImage::default();
        for (id, listeners) in [
            (1u32, vec![("CONTROLLER", 9093), ("KAFKA", 9092)]),
            (2, vec![("CONTROLLER", 9193), ("kafka", 9192)]),
            (3, vec![("CONTROLLER", 9293)]),
        ] {
            let record = MetadataRecord::RegisterController(RegisterControllerRecordV1 {
                controller_id: NodeId(id),
                incarnation_id: Uuid([id as u8; 16]),
                end_points: listeners
                    .into_iter()
                    .map(|(name, port)| ControllerEndpointV1 {
                        name: name.into(),
                        host: format!("c{id}"),
                        port,
                        security_protocol: 0,
                    })
                    .collect(),
                features: Vec::new(),
            });
            image
                .apply(LogOffset(u64::from(id)), &record)
                .expect("replays");
        }
        // A config record, so the image is not only registrations.
        image
            .apply(
                LogOffset(9),
                &MetadataRecord::Config(ConfigRecordV1 {
                    resource_type: ConfigResourceType::Broker,
                    resource_name: String::new(),
                    key: "k".into(),
                    value: Some("v".into()),
                }),
            )
            .expect("replays");
        let endpoints = voter_endpoints(&image.controllers, "KAFKA");
        assert_eq!(
            endpoints
                .iter()
                .map(|(id, e)| (id.0, e.listener.as_str(), e.host.as_str(), e.port))
                .collect::<Vec<_>>(),
            vec![(1, "KAFKA", "c1", 9092), (2, "KAFKA", "c2", 9192)]
        );
        let ctx = RenderContext {
            voter_endpoints: endpoints,
            ..RenderContext::default()
        };
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let mut export = KafkaExport::create(tmp.path(), ctx, SEGMENT_BYTES_MAX).expect("new");
        export.append(&leader_batch(0, 1)).expect("appends");
        let summary = export.finish().expect("finishes");
        let sets = decode_file(&summary.segments[0]);
        let mut value = sets[0].records[1].value.clone().expect("a value");
        let v = VotersRecord::decode(&mut value, 0).expect("a VotersRecord");
        let listed: Vec<Vec<(String, u16)>> = v
            .voters
            .iter()
            .map(|v| {
                v.endpoints
                    .iter()
                    .map(|e| (e.name.to_string(), e.port))
                    .collect()
            })
            .collect();
        assert_eq!(
            listed,
            vec![
                vec![("CONTROLLER".into(), 9093), ("KAFKA".into(), 9092)],
                vec![("CONTROLLER".into(), 9093), ("KAFKA".into(), 9192)],
                vec![("CONTROLLER".into(), 9093)],
            ]
        );
    }
}
