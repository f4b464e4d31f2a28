//! `quorum-state`: the Raft election state that must survive a restart (KIP-595): the current
//! epoch, the leader known for it, and the vote cast in it. Raft persists it **before** sending a
//! vote or acting on a new epoch; it is rewritten whole with [`crate::fsio::write_atomic`]
//! over the node's [`Disk`] (in a node the io_uring disk, so the write does not block the
//! shard; crash tests and the simulators use `SimDisk`).
//!
//! This byte layout is the file's one encoding (the Raft crate's
//! [`corum_raft::QuorumStateRecord`] is the same state in memory, converted by
//! [`crate::raft_config`]); `testdata/quorum_state_v1.golden` pins its bytes.
//!
//! # Byte layout (version 1, 44 bytes, little-endian)
//!
//! | offset | size | field                                                                 |
//! |--------|------|-----------------------------------------------------------------------|
//! | 0      | 4    | magic `b"CQST"`                                                       |
//! | 4      | 2    | format version = 1                                                    |
//! | 6      | 2    | flags: bit 0 leader present, bit 1 vote present; other bits zero      |
//! | 8      | 8    | epoch                                                                 |
//! | 16     | 4    | leader id (zero unless bit 0)                                         |
//! | 20     | 4    | voted-for id (zero unless bit 1)                                      |
//! | 24     | 16   | voted-for directory id (all-zero: none, or no vote)                   |
//! | 40     | 4    | crc32c of bytes 0..40                                                 |
//!
//! Every version ends with the crc32c of all the bytes before it, so the decoder checks the
//! checksum first: any damage (a flipped bit anywhere, the version field included) is reported
//! as such, and only an intact file of another version is [`StorageError::UnsupportedVersion`].
//! Then the magic, the version, the length (a torn or extended file is never read), the flags,
//! and that the fields a flag marks absent are zero. Each failure is a [`QuorumStateError`]
//! ([`StorageError::Corrupt`] when read from a file), never a default state: a node that lost
//! its vote could vote twice.

use std::path::Path;

use corum_engine::disk::Disk;
use corum_types::{Epoch, NodeId, Uuid};

use crate::error::StorageError;
use crate::fsio;

/// File name inside `metadata.log.dir`.
pub const QUORUM_STATE_FILE: &str = "quorum-state";
pub const QUORUM_STATE_MAGIC: [u8; 4] = *b"CQST";
pub const QUORUM_STATE_VERSION: u16 = 1;
/// Encoded size of version 1.
pub const QUORUM_STATE_BYTES: usize = 44;
/// The magic, the version and the flags, then (in every version) the checksum: no file is
/// shorter.
const HEADER_AND_CHECKSUM_BYTES: usize = 12;

const FLAG_LEADER: u16 = 1;
const FLAG_VOTE: u16 = 2;

/// A voter's identity (KIP-853): its id and, when known, its directory id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReplicaKey {
    pub id: NodeId,
    pub directory_id: Option<Uuid>,
}

/// The persisted election state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuorumState {
    pub epoch: Epoch,
    /// The leader of `epoch`, once known.
    pub leader: Option<NodeId>,
    /// The candidate this node voted for in `epoch`, if any.
    pub voted_for: Option<ReplicaKey>,
}

/// Why bytes are not a quorum state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuorumStateError {
    #[error("{len_bytes} bytes, shorter than a header and a checksum (torn or truncated)")]
    TooShort { len_bytes: usize },
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x} (damaged, torn or truncated)")]
    Checksum { stored: u32, computed: u32 },
    #[error("bad magic {found:02x?} (not a quorum-state file)")]
    Magic { found: [u8; 4] },
    #[error("unsupported format version {version} (this build reads {QUORUM_STATE_VERSION})")]
    Version { version: u16 },
    #[error("{len_bytes} bytes, expected {QUORUM_STATE_BYTES} (torn or truncated)")]
    Length { len_bytes: usize },
    #[error("unknown flags {flags:#06x}")]
    UnknownFlags { flags: u16 },
    #[error("leader id set without its flag")]
    LeaderWithoutFlag,
    #[error("vote fields set without their flag")]
    VoteWithoutFlag,
    #[error("a leader or vote in epoch 0")]
    EpochZero,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

impl QuorumState {
    /// The file's bytes.
    pub fn encode(&self) -> [u8; QUORUM_STATE_BYTES] {
        let mut b = [0u8; QUORUM_STATE_BYTES];
        let mut flags = 0u16;
        if self.leader.is_some() {
            flags |= FLAG_LEADER;
        }
        if self.voted_for.is_some() {
            flags |= FLAG_VOTE;
        }
        b[0..4].copy_from_slice(&QUORUM_STATE_MAGIC);
        b[4..6].copy_from_slice(&QUORUM_STATE_VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&flags.to_le_bytes());
        b[8..16].copy_from_slice(&self.epoch.0.to_le_bytes());
        b[16..20].copy_from_slice(&self.leader.map_or(0, |l| l.0).to_le_bytes());
        if let Some(v) = self.voted_for {
            b[20..24].copy_from_slice(&v.id.0.to_le_bytes());
            b[24..40].copy_from_slice(&v.directory_id.unwrap_or(Uuid::ZERO).0);
        }
        let crc = crc32c::crc32c(&b[..40]);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks the file's bytes (see the module doc for the order of the checks).
    pub fn decode_bytes(bytes: &[u8]) -> Result<QuorumState, QuorumStateError> {
        if bytes.len() < HEADER_AND_CHECKSUM_BYTES {
            return Err(QuorumStateError::TooShort {
                len_bytes: bytes.len(),
            });
        }
        let (body, trailer) = bytes.split_at(bytes.len() - 4);
        let stored = u32_at(trailer, 0);
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(QuorumStateError::Checksum { stored, computed });
        }
        let magic: [u8; 4] = bytes[0..4].try_into().expect("4 bytes");
        if magic != QUORUM_STATE_MAGIC {
            return Err(QuorumStateError::Magic { found: magic });
        }
        let version = u16_at(bytes, 4);
        if version != QUORUM_STATE_VERSION {
            return Err(QuorumStateError::Version { version });
        }
        if bytes.len() != QUORUM_STATE_BYTES {
            return Err(QuorumStateError::Length {
                len_bytes: bytes.len(),
            });
        }
        let flags = u16_at(bytes, 6);
        if flags & !(FLAG_LEADER | FLAG_VOTE) != 0 {
            return Err(QuorumStateError::UnknownFlags { flags });
        }
        let epoch = Epoch(u64::from_le_bytes(
            bytes[8..16].try_into().expect("8 bytes"),
        ));
        let leader_id = u32_at(bytes, 16);
        let voted_id = u32_at(bytes, 20);
        let voted_dir = Uuid(bytes[24..40].try_into().expect("16 bytes"));
        let leader = if flags & FLAG_LEADER != 0 {
            Some(NodeId(leader_id))
        } else if leader_id != 0 {
            return Err(QuorumStateError::LeaderWithoutFlag);
        } else {
            None
        };
        let voted_for = if flags & FLAG_VOTE != 0 {
            Some(ReplicaKey {
                id: NodeId(voted_id),
                directory_id: (!voted_dir.is_zero()).then_some(voted_dir),
            })
        } else if voted_id != 0 || !voted_dir.is_zero() {
            return Err(QuorumStateError::VoteWithoutFlag);
        } else {
            None
        };
        if epoch == Epoch::ZERO && (leader.is_some() || voted_for.is_some()) {
            return Err(QuorumStateError::EpochZero);
        }
        Ok(QuorumState {
            epoch,
            leader,
            voted_for,
        })
    }

    /// [`QuorumState::decode_bytes`] for the file at `path` (which only names it in errors).
    pub fn decode(bytes: &[u8], path: &Path) -> Result<QuorumState, StorageError> {
        QuorumState::decode_bytes(bytes).map_err(|e| match e {
            QuorumStateError::Version { version } => StorageError::UnsupportedVersion {
                path: path.to_path_buf(),
                version: version.into(),
                supported: QUORUM_STATE_VERSION.into(),
            },
            e => StorageError::Corrupt {
                path: path.to_path_buf(),
                reason: e.to_string(),
            },
        })
    }

    /// Reads `dir/quorum-state` on `disk`, or `None` if it was never written (a fresh node).
    pub async fn read<D: Disk>(disk: &D, dir: &Path) -> Result<Option<QuorumState>, StorageError> {
        let path = dir.join(QUORUM_STATE_FILE);
        match fsio::read_optional(disk, &path, 4096).await? {
            None => Ok(None),
            Some(bytes) => QuorumState::decode(&bytes, &path).map(Some),
        }
    }

    /// Replaces `dir/quorum-state` on `disk` durably and atomically.
    pub async fn write<D: Disk>(&self, disk: &D, dir: &Path) -> Result<(), StorageError> {
        fsio::write_atomic(disk, &dir.join(QUORUM_STATE_FILE), &self.encode()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_engine::disk::{SimDisk, SimFault, StdDisk};
    use futures_lite::future::block_on;
    use proptest::prelude::*;

    fn state(epoch: u64, leader: Option<u32>, vote: Option<(u32, Option<u128>)>) -> QuorumState {
        QuorumState {
            epoch: Epoch(epoch),
            leader: leader.map(NodeId),
            voted_for: vote.map(|(id, d)| ReplicaKey {
                id: NodeId(id),
                directory_id: d.map(Uuid::from_random_bits),
            }),
        }
    }

    fn arb_state() -> impl Strategy<Value = QuorumState> {
        (
            1u64..,
            proptest::option::of(any::<u32>()),
            proptest::option::of((any::<u32>(), proptest::option::of(any::<u128>()))),
        )
            .prop_map(|(e, l, v)| state(e, l, v))
    }

    /// `bytes` with a valid checksum over all but its last four bytes.
    fn reseal(mut b: Vec<u8>) -> Vec<u8> {
        let n = b.len() - 4;
        let crc = crc32c::crc32c(&b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The states whose bytes `testdata/quorum_state_v1.golden` pins.
    fn golden_states() -> Vec<(&'static str, QuorumState)> {
        vec![
            ("fresh epoch, nothing known", state(1, None, None)),
            (
                "voted, no directory id (static quorum)",
                state(5, None, Some((3, None))),
            ),
            (
                "leader known, voted with a directory id",
                QuorumState {
                    epoch: Epoch(7),
                    leader: Some(NodeId(2)),
                    voted_for: Some(ReplicaKey {
                        id: NodeId(2),
                        directory_id: Some(Uuid([0xab; 16])),
                    }),
                },
            ),
            (
                "largest values",
                QuorumState {
                    epoch: Epoch(u64::MAX),
                    leader: Some(NodeId(u32::MAX)),
                    voted_for: Some(ReplicaKey {
                        id: NodeId(u32::MAX),
                        directory_id: Some(Uuid([0xff; 16])),
                    }),
                },
            ),
        ]
    }

    /// Fields of the layout: offset, size, name (as the module doc's table).
    const FIELDS: [(usize, usize, &str); 8] = [
        (0, 4, "magic"),
        (4, 2, "version"),
        (6, 2, "flags"),
        (8, 8, "epoch"),
        (16, 4, "leader id"),
        (20, 4, "voted-for id"),
        (24, 16, "voted-for directory id"),
        (40, 4, "crc32c of bytes 0..40"),
    ];

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The golden file's text: each state's bytes, one line per field.
    fn golden_text() -> String {
        let mut text = String::from(
            "# quorum-state v1 (44 bytes, little-endian): one block per state, one line per\n\
             # field: offset, bytes in hex, field. The bytes of a written file never change;\n\
             # CORUM_REWRITE=1 rewrites this file after an intended change to the format.\n",
        );
        for (name, s) in golden_states() {
            text.push_str(&format!("\nstate {name}: {s:?}\n"));
            let b = s.encode();
            for (at, len, field) in FIELDS {
                text.push_str(&format!("{at:>2} {:<32} {field}\n", hex(&b[at..at + len])));
            }
        }
        text
    }

    /// The bytes of each state in the golden file's text, in order.
    fn golden_bytes_of(text: &str) -> Vec<Vec<u8>> {
        let mut states: Vec<Vec<u8>> = Vec::new();
        for line in text.lines() {
            if line.starts_with("state ") {
                states.push(Vec::new());
            } else if let Some(hex) = line.split_whitespace().nth(1) {
                if line.starts_with('#') {
                    continue;
                }
                let current = states
                    .last_mut()
                    .expect("a field line follows a state line");
                for i in (0..hex.len()).step_by(2) {
                    current.push(u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"));
                }
            }
        }
        states
    }

    /// The bytes of a few states are pinned by `testdata/quorum_state_v1.golden` (so a layout
    /// change shows as a diff), and the bytes in that file decode to those states (so files
    /// written by earlier builds stay readable).
    #[test]
    fn golden_file() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/testdata/quorum_state_v1.golden"
        );
        let text = golden_text();
        if corum_types::golden::rewrite_requested() {
            std::fs::write(path, &text).unwrap();
        }
        let golden =
            std::fs::read_to_string(path).expect("golden file present (CORUM_REWRITE=1 writes it)");
        assert_eq!(
            text, golden,
            "quorum-state bytes changed: a written file would no longer read back"
        );
        let bytes = golden_bytes_of(&golden);
        let states = golden_states();
        assert_eq!(bytes.len(), states.len());
        for (b, (name, s)) in bytes.iter().zip(states) {
            assert_eq!(b.len(), QUORUM_STATE_BYTES, "{name}");
            assert_eq!(QuorumState::decode_bytes(b), Ok(s), "{name}");
        }
        assert_eq!(
            crc32c::crc32c(&bytes[2][..40]),
            0xc080_b3bf,
            "checksum of the leader-and-vote state"
        );
    }

    /// Written states read back; a missing file is `None`.
    #[test]
    fn write_read() {
        block_on(async {
            let disk = SimDisk::new(1);
            let dir = Path::new("/data");
            assert_eq!(QuorumState::read(&disk, dir).await.unwrap(), None);
            for s in [
                state(1, None, None),
                state(2, Some(1), None),
                state(3, None, Some((2, None))),
                state(4, Some(2), Some((2, Some(5)))),
            ] {
                s.write(&disk, dir).await.unwrap();
                assert_eq!(QuorumState::read(&disk, dir).await.unwrap(), Some(s));
                assert_eq!(
                    disk.contents(&dir.join(QUORUM_STATE_FILE)).unwrap(),
                    s.encode(),
                    "the file holds exactly the encoding (no block padding)"
                );
            }
            assert_eq!(QuorumState::default().encode().len(), QUORUM_STATE_BYTES);
        });
    }

    /// Each structural error is reported with its own reason, not defaulted; a sealed file of
    /// another version is unsupported, not corrupt.
    #[test]
    fn rejects_bad_states() {
        use QuorumStateError as E;
        let good = state(4, Some(2), Some((2, Some(5)))).encode().to_vec();
        let with = |at: usize, byte: u8, from: &[u8]| {
            let mut b = from.to_vec();
            b[at] = byte;
            reseal(b)
        };
        let err = |b: &[u8]| QuorumState::decode_bytes(b).unwrap_err();
        assert_eq!(err(&good[..3]), E::TooShort { len_bytes: 3 });
        assert!(matches!(err(&good[..43]), E::Checksum { .. }));
        assert_eq!(err(&with(0, b'X', &good)), E::Magic { found: *b"XQST" });
        assert_eq!(err(&with(4, 2, &good)), E::Version { version: 2 });
        assert_eq!(
            err(&reseal(good[..40].to_vec())),
            E::Length { len_bytes: 40 }
        );
        let mut longer = good.clone();
        longer.extend_from_slice(&[0; 4]);
        assert_eq!(err(&reseal(longer)), E::Length { len_bytes: 48 });
        assert_eq!(err(&with(6, 4, &good)), E::UnknownFlags { flags: 4 });
        let empty = state(4, None, None).encode();
        assert_eq!(err(&with(16, 1, &empty)), E::LeaderWithoutFlag);
        assert_eq!(err(&with(20, 1, &empty)), E::VoteWithoutFlag);
        assert_eq!(err(&with(30, 1, &empty)), E::VoteWithoutFlag);
        assert_eq!(err(&state(0, Some(1), None).encode()), E::EpochZero);
        let p = Path::new("quorum-state");
        assert!(matches!(
            QuorumState::decode(&with(4, 2, &good), p),
            Err(StorageError::UnsupportedVersion { version: 2, .. })
        ));
        let e = QuorumState::decode(&good[..20], p).unwrap_err().to_string();
        assert!(
            e.contains("quorum-state") && e.contains("checksum mismatch"),
            "{e}"
        );
    }

    /// A crash at any step of a write (all unsynced state lost, or a torn prefix of it kept)
    /// leaves the old state or the new one, never a mix and never "no state"; an EIO on the
    /// write or the sync is reported and the old state stays; a leftover tmp file is ignored by
    /// readers and overwritten by the next write.
    #[test]
    fn crash_safety() {
        use corum_engine::disk::files::{tmp_path, write_atomic_via, WriteStep};
        let dir = Path::new("/data");
        let path = dir.join(QUORUM_STATE_FILE);
        let good = state(5, Some(1), Some((1, Some(9))));
        let newer = state(6, None, Some((3, None)));
        for seed in 0..30 {
            for stop in WriteStep::ALL.map(Some).into_iter().chain([None]) {
                for torn in [false, true] {
                    block_on(async {
                        let disk = SimDisk::new(seed);
                        good.write(&disk, dir).await.unwrap();
                        let done = write_atomic_via(
                            &disk,
                            &path,
                            &tmp_path(&path),
                            &[&newer.encode()],
                            stop,
                        )
                        .await
                        .unwrap();
                        assert_eq!(done, stop.is_none());
                        if torn {
                            disk.crash_torn();
                        } else {
                            disk.crash();
                        }
                        let found = QuorumState::read(&disk, dir).await.unwrap();
                        let what = format!("seed {seed} stop {stop:?} torn {torn}");
                        match stop {
                            None => assert_eq!(found, Some(newer), "{what}"),
                            Some(WriteStep::SyncDir) => {
                                assert!(found == Some(good) || found == Some(newer), "{what}")
                            }
                            Some(_) => assert_eq!(found, Some(good), "{what}"),
                        }
                        let next = state(7, Some(3), None);
                        next.write(&disk, dir).await.unwrap();
                        assert_eq!(QuorumState::read(&disk, dir).await.unwrap(), Some(next));
                    });
                }
            }
        }
        for fault in [SimFault::FailNextWrite, SimFault::FailNextSync] {
            block_on(async {
                let disk = SimDisk::new(3);
                good.write(&disk, dir).await.unwrap();
                disk.inject(fault);
                let e = newer.write(&disk, dir).await.unwrap_err();
                assert!(matches!(e, StorageError::Io { .. }), "{fault:?}: {e}");
                assert_eq!(QuorumState::read(&disk, dir).await.unwrap(), Some(good));
                disk.crash_torn();
                assert_eq!(QuorumState::read(&disk, dir).await.unwrap(), Some(good));
            });
        }
    }

    /// A state file truncated behind our back (a broken disk) is an error, never "no state".
    #[test]
    fn truncated_file_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let disk = StdDisk::new();
        let path = tmp.path().join(QUORUM_STATE_FILE);
        let s = state(7, Some(3), None);
        block_on(async {
            for len in 0..QUORUM_STATE_BYTES as u64 {
                s.write(&disk, tmp.path()).await.unwrap();
                let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                f.set_len(len).unwrap();
                assert!(matches!(
                    QuorumState::read(&disk, tmp.path()).await,
                    Err(StorageError::Corrupt { .. })
                ));
            }
        });
    }

    proptest! {
        /// Every state round-trips.
        #[test]
        fn round_trip(s in arb_state()) {
            prop_assert_eq!(QuorumState::decode_bytes(&s.encode()), Ok(s));
        }

        /// Random bytes never panic the decoder, and are accepted only with a valid checksum
        /// and the exact length.
        #[test]
        fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if QuorumState::decode_bytes(&bytes).is_ok() {
                prop_assert_eq!(bytes.len(), QUORUM_STATE_BYTES);
                let stored = u32::from_le_bytes(bytes[40..44].try_into().unwrap());
                prop_assert_eq!(stored, crc32c::crc32c(&bytes[..40]));
            }
        }

        /// Every single bit flip of a valid state, anywhere (the version and the checksum
        /// included), is reported as a checksum mismatch.
        #[test]
        fn every_bit_flip_is_rejected(s in arb_state()) {
            let good = s.encode();
            for bit in 0..QUORUM_STATE_BYTES * 8 {
                let mut b = good;
                b[bit / 8] ^= 1 << (bit % 8);
                prop_assert!(
                    matches!(QuorumState::decode_bytes(&b), Err(QuorumStateError::Checksum { .. })),
                    "bit {} of {:?}", bit, s
                );
            }
        }

        /// Any change within one byte (up to eight flipped bits) is rejected too.
        #[test]
        fn byte_damage_is_rejected(s in arb_state(), at in 0..QUORUM_STATE_BYTES, x in 1u8..) {
            let mut b = s.encode();
            b[at] ^= x;
            prop_assert!(QuorumState::decode_bytes(&b).is_err());
        }

        /// Every truncation of a valid state, and every extension of it, is rejected as a torn
        /// file (too short, checksum or length), never read and never taken for another
        /// version.
        #[test]
        fn every_truncation_and_extension_is_rejected(
            s in arb_state(),
            tail in proptest::collection::vec(any::<u8>(), 1..16),
        ) {
            let good = s.encode();
            let torn = |e: &QuorumStateError| matches!(
                e,
                QuorumStateError::TooShort { .. }
                    | QuorumStateError::Checksum { .. }
                    | QuorumStateError::Length { .. }
            );
            for len in 0..QUORUM_STATE_BYTES {
                let e = QuorumState::decode_bytes(&good[..len]).unwrap_err();
                prop_assert!(torn(&e), "{} bytes: {:?}", len, e);
            }
            let mut longer = good.to_vec();
            longer.extend_from_slice(&tail);
            let e = QuorumState::decode_bytes(&longer).unwrap_err();
            prop_assert!(torn(&e), "{} bytes: {:?}", longer.len(), e);
        }
    }
}
