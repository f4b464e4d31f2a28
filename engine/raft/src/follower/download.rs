//! [`SnapshotDownload`]: the chunks of one leader snapshot (KIP-630 FetchSnapshot) put back
//! together, pure (no IO, no clock). Its caller sends the requests it makes and feeds it the
//! answers: the Raft core's follower and observer ([`crate::RaftCore`], which installs the
//! finished snapshot itself) and the client's metadata follower (`corum-client`, which hands
//! the bytes to its observer log). The caller owns the policy around it: when to re-ask after a
//! lost request, and the pause before fetching again after a download ended without a snapshot
//! ([`super::Backoff`]).
//!
//! # Model
//!
//! ```text
//!   0                 received            size_total
//!   |--- received ------|------ to ask -------|
//! ```
//!
//! The leader serves a snapshot `id` in chunks at the position asked for; every chunk repeats
//! the snapshot's id and total size. One download asks for one id from one leader epoch: a
//! leader that wrote a newer snapshot meanwhile answers `SnapshotNotFound`, and a node that
//! does not lead the request's epoch answers `NotLeader`; either way the download is over and
//! the caller starts again with a `Fetch`, whose answer names the snapshot to ask for.
//!
//! | answer | checked | effect |
//! |---|---|---|
//! | `Chunk { snapshot, voters, kraft_version, size_total, position, bytes }` | `snapshot` is the id asked for; `size_total` at most the limit and the same in every chunk; `voters` and `kraft_version` the same in every chunk; `position == received`; `position + len <= size_total`; non-empty unless the snapshot is (first chunk of a 0-byte snapshot) | bytes appended: [`DownloadStep::Next`] at the new position, or [`DownloadStep::Complete`] once `received == size_total` |
//! | `SnapshotNotFound`                                    | — | [`DownloadStep::NotFound`] |
//! | `NotLeader`                                           | — | [`DownloadStep::NotLeader`] |
//! | a chunk failing a check                               | — | [`SnapshotChunkError`]; nothing changed |
//!
//! A refused chunk is a [`SnapshotChunkError`] naming the check it failed; a leader never
//! sends one, so the caller drops the download and fetches again after a pause. An empty chunk
//! before the end is refused too ([`SnapshotChunkError::NoProgress`]): re-asking the same
//! position at once would loop as fast as the leader answers.
//!
//! Invariants: `received <= size_total <= size_max` once a chunk arrived, and nothing was
//! received before.

use corum_types::Epoch;
use rkyv::util::AlignedVec;

use crate::error::SnapshotChunkError;
use crate::message::{FetchSnapshotRequest, FetchSnapshotResult};
use crate::types::{Payload, ReplicaKey, Snapshot, SnapshotId, VoterSet};

/// The default largest snapshot a follower downloads (1 GiB, [`crate::Config::snapshot_bytes_max`]):
/// the whole snapshot is held in memory before it is installed.
pub const SNAPSHOT_BYTES_MAX: u64 = 1 << 30;

/// What the caller does after an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DownloadStep {
    /// Ask for the next chunk, at `position` ([`SnapshotDownload::request`] does).
    Next { position: u64 },
    /// Every byte arrived: [`SnapshotDownload::data`] is the snapshot.
    Complete,
    /// The leader no longer has the snapshot (it wrote a newer one): fetch again.
    NotFound,
    /// The node answering does not lead the request's epoch: learn the epoch and leader
    /// from the response and fetch again.
    NotLeader,
}

/// One snapshot being downloaded. See the module doc.
#[derive(Debug)]
pub struct SnapshotDownload {
    snapshot: SnapshotId,
    size_max: u64,
    /// The total size every chunk states (`None` before the first chunk).
    size_total: Option<u64>,
    /// The voter set and `kraft.version` every chunk states (`None` before the first chunk).
    voters: Option<(VoterSet, u16)>,
    /// Aligned for rkyv, so the finished snapshot decodes without a copy.
    data: AlignedVec<16>,
}

impl SnapshotDownload {
    /// A download of `snapshot`, refusing one larger than `size_max` bytes.
    pub fn new(snapshot: SnapshotId, size_max: u64) -> SnapshotDownload {
        SnapshotDownload {
            snapshot,
            size_max,
            size_total: None,
            voters: None,
            data: AlignedVec::new(),
        }
    }

    /// The snapshot asked for.
    pub fn snapshot(&self) -> SnapshotId {
        self.snapshot
    }

    /// Bytes received so far (the next chunk's position).
    pub fn received(&self) -> u64 {
        self.data.len() as u64
    }

    /// The snapshot's size, known after the first chunk.
    pub fn size_total(&self) -> Option<u64> {
        self.size_total
    }

    /// Whether every byte arrived.
    pub fn is_complete(&self) -> bool {
        self.size_total == Some(self.received())
    }

    /// The next request of `replica`, in leader epoch `epoch` (the observer's).
    pub fn request(&self, epoch: Epoch, replica: ReplicaKey) -> FetchSnapshotRequest {
        FetchSnapshotRequest {
            epoch,
            replica,
            snapshot: self.snapshot,
            position: self.received(),
        }
    }

    /// The bytes received, 16-byte aligned (the whole snapshot once complete).
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The voter set at the snapshot's end, as its chunks state it (after the first chunk).
    pub fn voters(&self) -> Option<&VoterSet> {
        self.voters.as_ref().map(|(v, _)| v)
    }

    /// The finished snapshot (`None` before every byte arrived); copies the bytes once.
    pub fn snapshot_complete(&self) -> Option<Snapshot> {
        let (voters, kraft_version) = self.voters.clone().filter(|_| self.is_complete())?;
        Some(Snapshot {
            id: self.snapshot,
            voters,
            kraft_version,
            data: Payload::from(&self.data[..]),
        })
    }

    /// Takes one answer (see the module doc). On error nothing changed.
    pub fn on_result(
        &mut self,
        result: FetchSnapshotResult,
    ) -> Result<DownloadStep, SnapshotChunkError> {
        let (snapshot, size_total, position, bytes, voters, kraft_version) = match result {
            FetchSnapshotResult::SnapshotNotFound => return Ok(DownloadStep::NotFound),
            FetchSnapshotResult::NotLeader => return Ok(DownloadStep::NotLeader),
            FetchSnapshotResult::Chunk {
                snapshot,
                size_total,
                position,
                bytes,
                voters,
                kraft_version,
            } => (snapshot, size_total, position, bytes, voters, kraft_version),
        };
        let received = self.received();
        if snapshot != self.snapshot {
            return Err(SnapshotChunkError::OtherSnapshot {
                asked: self.snapshot,
                got: snapshot,
            });
        }
        if size_total > self.size_max {
            return Err(SnapshotChunkError::TooLarge {
                size_total,
                size_max: self.size_max,
            });
        }
        if let Some(was) = self.size_total.filter(|&was| was != size_total) {
            return Err(SnapshotChunkError::SizeChanged {
                was,
                now: size_total,
            });
        }
        let stated = (voters, kraft_version);
        if self.voters.as_ref().is_some_and(|was| *was != stated) {
            return Err(SnapshotChunkError::VotersChanged { position });
        }
        if position != received {
            return Err(SnapshotChunkError::Position { position, received });
        }
        // `received <= size_total <= size_max`, and a chunk's length fits in memory: no
        // overflow, but say so without relying on it.
        let end = received.saturating_add(bytes.len() as u64);
        if end > size_total {
            return Err(SnapshotChunkError::BeyondSize { end, size_total });
        }
        // Only the first answer about a 0-byte snapshot may be empty: any other empty chunk
        // would have the caller ask for the same position forever.
        let empty_snapshot_first = self.size_total.is_none() && size_total == 0;
        if bytes.is_empty() && !empty_snapshot_first {
            return Err(SnapshotChunkError::NoProgress {
                position,
                size_total,
            });
        }
        self.size_total = Some(size_total);
        if self.voters.is_none() {
            self.voters = Some(stated);
        }
        self.data.extend_from_slice(&bytes);
        let received = self.received();
        assert!(received <= size_total && size_total <= self.size_max);
        if received == size_total {
            Ok(DownloadStep::Complete)
        } else {
            Ok(DownloadStep::Next { position: received })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Voter;
    use corum_types::{LogOffset, NodeId, Uuid};
    use proptest::prelude::*;

    fn id(end: u64, epoch: u64) -> SnapshotId {
        SnapshotId {
            end_offset: LogOffset(end),
            epoch: Epoch(epoch),
        }
    }

    fn chunk(
        snapshot: SnapshotId,
        size_total: u64,
        position: u64,
        bytes: &[u8],
    ) -> FetchSnapshotResult {
        FetchSnapshotResult::Chunk {
            snapshot,
            voters: VoterSet::default(),
            kraft_version: 1,
            size_total,
            position,
            bytes: Payload::from(bytes),
        }
    }

    /// The chunks of `data` a leader serving `chunk_bytes` at a time sends, in order.
    fn chunks(snapshot: SnapshotId, data: &[u8], chunk_bytes: usize) -> Vec<FetchSnapshotResult> {
        data.chunks(chunk_bytes)
            .enumerate()
            .map(|(i, c)| chunk(snapshot, data.len() as u64, (i * chunk_bytes) as u64, c))
            .collect()
    }

    /// Chunks in order rebuild the bytes; each answer names the next position, the last says
    /// complete, and the requests ask at the position received so far.
    #[test]
    fn chunks_in_order_rebuild_the_snapshot() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let mut d = SnapshotDownload::new(id(10, 2), SNAPSHOT_BYTES_MAX);
        let replica = ReplicaKey {
            id: NodeId(100),
            directory_id: Uuid([1; 16]),
        };
        let req = d.request(Epoch(3), replica);
        assert_eq!(
            (req.position, req.snapshot, req.epoch),
            (0, id(10, 2), Epoch(3))
        );
        let all = chunks(id(10, 2), &data, 300);
        assert_eq!(all.len(), 4);
        for (i, c) in all.into_iter().enumerate() {
            let step = d.on_result(c).unwrap();
            if i < 3 {
                assert_eq!(
                    step,
                    DownloadStep::Next {
                        position: 300 * (i as u64 + 1)
                    }
                );
                assert!(!d.is_complete());
                assert_eq!(d.request(Epoch(3), replica).position, 300 * (i as u64 + 1));
            } else {
                assert_eq!(step, DownloadStep::Complete);
            }
        }
        assert!(d.is_complete());
        assert_eq!(d.size_total(), Some(1000));
        assert_eq!(d.data(), &data[..]);
        assert_eq!(d.data().as_ptr() as usize % 16, 0);
    }

    /// A chunk at another position than the bytes received so far (a gap or a repeat) is
    /// refused and changes nothing; the right one is then accepted.
    #[test]
    fn chunks_out_of_position_are_refused() {
        let mut d = SnapshotDownload::new(id(10, 2), SNAPSHOT_BYTES_MAX);
        assert_eq!(
            d.on_result(chunk(id(10, 2), 6, 2, b"cd")),
            Err(SnapshotChunkError::Position {
                position: 2,
                received: 0
            })
        );
        assert_eq!(d.size_total(), None, "a refused chunk sets nothing");
        d.on_result(chunk(id(10, 2), 6, 0, b"ab")).unwrap();
        // The same chunk again.
        assert_eq!(
            d.on_result(chunk(id(10, 2), 6, 0, b"ab")),
            Err(SnapshotChunkError::Position {
                position: 0,
                received: 2
            })
        );
        assert_eq!(
            d.on_result(chunk(id(10, 2), 6, 2, b"cdef")),
            Ok(DownloadStep::Complete)
        );
        assert_eq!(d.data(), b"abcdef");
    }

    /// A chunk of another snapshot, or stating another total size than the first chunk, is
    /// refused.
    #[test]
    fn chunks_of_another_snapshot_or_size_are_refused() {
        let mut d = SnapshotDownload::new(id(10, 2), SNAPSHOT_BYTES_MAX);
        assert_eq!(
            d.on_result(chunk(id(12, 2), 4, 0, b"ab")),
            Err(SnapshotChunkError::OtherSnapshot {
                asked: id(10, 2),
                got: id(12, 2)
            })
        );
        assert_eq!(
            d.on_result(chunk(id(10, 3), 4, 0, b"ab")),
            Err(SnapshotChunkError::OtherSnapshot {
                asked: id(10, 2),
                got: id(10, 3)
            })
        );
        d.on_result(chunk(id(10, 2), 4, 0, b"ab")).unwrap();
        assert_eq!(
            d.on_result(chunk(id(10, 2), 5, 2, b"cde")),
            Err(SnapshotChunkError::SizeChanged { was: 4, now: 5 })
        );
        assert_eq!(d.received(), 2);
        assert_eq!(d.size_total(), Some(4));
    }

    /// A snapshot above the limit is refused at its first chunk; bytes beyond the stated size
    /// and empty chunks of an unfinished snapshot are refused too.
    #[test]
    fn oversized_overlong_and_empty_chunks_are_refused() {
        let mut d = SnapshotDownload::new(id(10, 2), 8);
        assert_eq!(
            d.on_result(chunk(id(10, 2), 9, 0, b"ab")),
            Err(SnapshotChunkError::TooLarge {
                size_total: 9,
                size_max: 8
            })
        );
        assert_eq!(
            d.on_result(chunk(id(10, 2), u64::MAX, 0, b"ab")),
            Err(SnapshotChunkError::TooLarge {
                size_total: u64::MAX,
                size_max: 8
            })
        );
        assert_eq!(
            d.on_result(chunk(id(10, 2), 3, 0, b"abcd")),
            Err(SnapshotChunkError::BeyondSize {
                end: 4,
                size_total: 3
            })
        );
        assert_eq!(
            d.on_result(chunk(id(10, 2), 3, 0, b"")),
            Err(SnapshotChunkError::NoProgress {
                position: 0,
                size_total: 3
            })
        );
        assert_eq!(
            d.on_result(chunk(id(10, 2), 3, 0, b"abc")),
            Ok(DownloadStep::Complete)
        );
        // After completion nothing more is accepted.
        assert_eq!(
            d.on_result(chunk(id(10, 2), 3, 3, b"")),
            Err(SnapshotChunkError::NoProgress {
                position: 3,
                size_total: 3
            })
        );
        assert_eq!(
            d.on_result(chunk(id(10, 2), 3, 3, b"d")),
            Err(SnapshotChunkError::BeyondSize {
                end: 4,
                size_total: 3
            })
        );
        assert_eq!(d.data(), b"abc");
    }

    /// A 0-byte snapshot is complete after its first (empty) chunk.
    #[test]
    fn an_empty_snapshot_completes_at_once() {
        let mut d = SnapshotDownload::new(id(0, 0), SNAPSHOT_BYTES_MAX);
        assert!(!d.is_complete());
        assert_eq!(
            d.on_result(chunk(id(0, 0), 0, 0, b"")),
            Ok(DownloadStep::Complete)
        );
        assert!(d.is_complete());
        assert!(d.data().is_empty());
    }

    /// `SnapshotNotFound` and `NotLeader` end the download without touching what it holds.
    #[test]
    fn not_found_and_not_leader_end_the_download() {
        let mut d = SnapshotDownload::new(id(10, 2), SNAPSHOT_BYTES_MAX);
        d.on_result(chunk(id(10, 2), 4, 0, b"ab")).unwrap();
        assert_eq!(
            d.on_result(FetchSnapshotResult::SnapshotNotFound),
            Ok(DownloadStep::NotFound)
        );
        assert_eq!(
            d.on_result(FetchSnapshotResult::NotLeader),
            Ok(DownloadStep::NotLeader)
        );
        assert_eq!(d.received(), 2);
    }

    fn one_voter(id: u32) -> VoterSet {
        VoterSet::new(vec![Voter {
            key: ReplicaKey {
                id: NodeId(id),
                directory_id: Uuid([id as u8; 16]),
            },
            endpoints: vec![],
        }])
        .expect("one voter is a valid set")
    }

    fn with_voters(result: FetchSnapshotResult, set: VoterSet) -> FetchSnapshotResult {
        match result {
            FetchSnapshotResult::Chunk {
                snapshot,
                size_total,
                position,
                bytes,
                voters: _,
                kraft_version,
            } => FetchSnapshotResult::Chunk {
                kraft_version,
                snapshot,
                voters: set,
                size_total,
                position,
                bytes,
            },
            other => other,
        }
    }

    /// A chunk stating another voter set than the first chunk is refused; the finished
    /// snapshot carries the chunks' voter set and bytes, and nothing before it is finished.
    #[test]
    fn chunks_agree_on_the_voter_set() {
        let mut d = SnapshotDownload::new(id(10, 2), SNAPSHOT_BYTES_MAX);
        assert_eq!(d.snapshot_complete(), None);
        d.on_result(with_voters(chunk(id(10, 2), 4, 0, b"ab"), one_voter(1)))
            .unwrap();
        assert_eq!(d.voters(), Some(&one_voter(1)));
        assert_eq!(d.snapshot_complete(), None, "two bytes are missing");
        assert_eq!(
            d.on_result(with_voters(chunk(id(10, 2), 4, 2, b"cd"), one_voter(2))),
            Err(SnapshotChunkError::VotersChanged { position: 2 })
        );
        assert_eq!(d.received(), 2);
        assert_eq!(
            d.on_result(with_voters(chunk(id(10, 2), 4, 2, b"cd"), one_voter(1))),
            Ok(DownloadStep::Complete)
        );
        let s = d.snapshot_complete().expect("complete");
        assert_eq!(
            (s.id, s.voters, &s.data[..]),
            (id(10, 2), one_voter(1), &b"abcd"[..])
        );
    }

    fn arb_result() -> impl Strategy<Value = FetchSnapshotResult> {
        let ids = prop_oneof![Just(id(10, 2)), Just(id(11, 2)), Just(id(10, 1))];
        prop_oneof![
            1 => Just(FetchSnapshotResult::SnapshotNotFound),
            1 => Just(FetchSnapshotResult::NotLeader),
            8 => (
                ids,
                prop_oneof![0u64..40, Just(u64::MAX)],
                prop_oneof![0u64..40, Just(u64::MAX)],
                proptest::collection::vec(any::<u8>(), 0..16),
                prop_oneof![Just(1u32), Just(2u32)],
            )
                .prop_map(|(s, size, pos, bytes, voter)| {
                    with_voters(chunk(s, size, pos, &bytes), one_voter(voter))
                }),
        ]
    }

    proptest! {
        /// Arbitrary answers never panic; what is accepted keeps `received <= size_total <=
        /// size_max` with a constant size and voter set, and an accepted chunk's bytes are
        /// exactly what was appended.
        #[test]
        fn arbitrary_answers_never_break_the_download(
            results in proptest::collection::vec(arb_result(), 0..40),
        ) {
            let mut d = SnapshotDownload::new(id(10, 2), 32);
            let mut expect: Vec<u8> = Vec::new();
            let mut size: Option<u64> = None;
            let mut voters: Option<VoterSet> = None;
            for r in results {
                let (bytes, set) = match &r {
                    FetchSnapshotResult::Chunk { bytes, voters, .. } => {
                        (bytes.to_vec(), Some(voters.clone()))
                    }
                    _ => (Vec::new(), None),
                };
                if let Ok(DownloadStep::Next { .. } | DownloadStep::Complete) = d.on_result(r) {
                    expect.extend_from_slice(&bytes);
                    prop_assert!(size.is_none() || size == d.size_total());
                    size = d.size_total();
                    prop_assert!(voters.is_none() || voters == set);
                    voters = set;
                }
                prop_assert_eq!(d.voters(), voters.as_ref());
                prop_assert_eq!(d.data(), &expect[..]);
                if let Some(total) = d.size_total() {
                    prop_assert!(d.received() <= total && total <= 32);
                } else {
                    prop_assert_eq!(d.received(), 0);
                }
            }
        }
    }
}
