//! `quorum-state`: the Raft election state that must survive a restart (KIP-595): the current
//! epoch, the leader known for it, and the vote cast in it. Raft persists it **before** sending a
//! vote or acting on a new epoch; it is rewritten whole with [`crate::fsio::write_atomic`].
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
//! The decoder checks the length, the magic, the checksum, the version, the flags and that the
//! fields a flag marks absent are zero; any failure is [`StorageError::Corrupt`] (or
//! `UnsupportedVersion`), never a default state: a node that lost its vote could vote twice.

use std::path::Path;

use corum_types::{Epoch, NodeId, Uuid};

use crate::error::StorageError;
use crate::fsio;

/// File name inside `metadata.log.dir`.
pub const QUORUM_STATE_FILE: &str = "quorum-state";
pub const QUORUM_STATE_MAGIC: [u8; 4] = *b"CQST";
pub const QUORUM_STATE_VERSION: u16 = 1;
/// Encoded size of version 1.
pub const QUORUM_STATE_BYTES: usize = 44;

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

    /// Decodes and checks the file's bytes; `path` only names the file in errors.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<QuorumState, StorageError> {
        let corrupt = |reason: String| StorageError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        if bytes.len() < 8 {
            return Err(corrupt(format!(
                "{} bytes, shorter than the header",
                bytes.len()
            )));
        }
        if bytes[0..4] != QUORUM_STATE_MAGIC {
            return Err(corrupt(format!("bad magic {:02x?}", &bytes[0..4])));
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != QUORUM_STATE_VERSION {
            return Err(StorageError::UnsupportedVersion {
                path: path.to_path_buf(),
                version: version.into(),
                supported: QUORUM_STATE_VERSION.into(),
            });
        }
        if bytes.len() != QUORUM_STATE_BYTES {
            return Err(corrupt(format!(
                "{} bytes, expected {QUORUM_STATE_BYTES} (torn or truncated)",
                bytes.len()
            )));
        }
        let stored = u32::from_le_bytes(bytes[40..44].try_into().expect("4 bytes"));
        let computed = crc32c::crc32c(&bytes[..40]);
        if stored != computed {
            return Err(corrupt(format!(
                "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            )));
        }
        let flags = u16::from_le_bytes([bytes[6], bytes[7]]);
        if flags & !(FLAG_LEADER | FLAG_VOTE) != 0 {
            return Err(corrupt(format!("unknown flags {flags:#06x}")));
        }
        let epoch = Epoch(u64::from_le_bytes(
            bytes[8..16].try_into().expect("8 bytes"),
        ));
        let leader_id = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
        let voted_id = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
        let voted_dir = Uuid(bytes[24..40].try_into().expect("16 bytes"));
        let leader = if flags & FLAG_LEADER != 0 {
            Some(NodeId(leader_id))
        } else if leader_id != 0 {
            return Err(corrupt("leader id set without its flag".into()));
        } else {
            None
        };
        let voted_for = if flags & FLAG_VOTE != 0 {
            Some(ReplicaKey {
                id: NodeId(voted_id),
                directory_id: (!voted_dir.is_zero()).then_some(voted_dir),
            })
        } else if voted_id != 0 || !voted_dir.is_zero() {
            return Err(corrupt("vote fields set without their flag".into()));
        } else {
            None
        };
        if epoch == Epoch::ZERO && (leader.is_some() || voted_for.is_some()) {
            return Err(corrupt("a leader or vote in epoch 0".into()));
        }
        Ok(QuorumState {
            epoch,
            leader,
            voted_for,
        })
    }

    /// Reads `dir/quorum-state`, or `None` if it was never written (a fresh node).
    pub fn read(dir: &Path) -> Result<Option<QuorumState>, StorageError> {
        let path = dir.join(QUORUM_STATE_FILE);
        match fsio::read_optional(&path, 4096)? {
            None => Ok(None),
            Some(bytes) => QuorumState::decode(&bytes, &path).map(Some),
        }
    }

    /// Replaces `dir/quorum-state` durably and atomically.
    pub fn write(&self, dir: &Path) -> Result<(), StorageError> {
        fsio::write_atomic(&dir.join(QUORUM_STATE_FILE), &self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    /// The bytes of one state are pinned, so a layout change shows up as a failing test.
    #[test]
    fn golden_bytes() {
        let s = QuorumState {
            epoch: Epoch(7),
            leader: Some(NodeId(2)),
            voted_for: Some(ReplicaKey {
                id: NodeId(2),
                directory_id: Some(Uuid([0xab; 16])),
            }),
        };
        let b = s.encode();
        let mut want = Vec::new();
        want.extend_from_slice(b"CQST");
        want.extend_from_slice(&[1, 0, 3, 0]);
        want.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 0]);
        want.extend_from_slice(&[2, 0, 0, 0, 2, 0, 0, 0]);
        want.extend_from_slice(&[0xab; 16]);
        want.extend_from_slice(&crc32c::crc32c(&want).to_le_bytes());
        assert_eq!(b.to_vec(), want);
        assert_eq!(
            crc32c::crc32c(&want[..40]),
            0xc080_b3bf,
            "checksum of the golden state"
        );
    }

    /// Written states read back; a missing file is `None`.
    #[test]
    fn write_read() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(QuorumState::read(dir.path()).unwrap(), None);
        for s in [
            state(1, None, None),
            state(2, Some(1), None),
            state(3, None, Some((2, None))),
            state(4, Some(2), Some((2, Some(5)))),
        ] {
            s.write(dir.path()).unwrap();
            assert_eq!(QuorumState::read(dir.path()).unwrap(), Some(s));
        }
        assert_eq!(QuorumState::default().encode().len(), QUORUM_STATE_BYTES);
    }

    /// Each structural error is reported, not defaulted.
    #[test]
    fn rejects_bad_states() {
        let p = Path::new("quorum-state");
        let good = state(4, Some(2), Some((2, Some(5)))).encode();
        let reseal = |mut b: [u8; QUORUM_STATE_BYTES]| {
            let crc = crc32c::crc32c(&b[..40]);
            b[40..44].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let err = |b: &[u8]| QuorumState::decode(b, p).unwrap_err().to_string();
        assert!(err(&good[..3]).contains("shorter than the header"));
        assert!(err(&good[..43]).contains("torn or truncated"));
        let mut b = good;
        b[0] = b'X';
        assert!(err(&b).contains("bad magic"));
        let mut b = good;
        b[4] = 2;
        assert!(err(&reseal(b)).contains("unsupported format version 2"));
        let mut b = good;
        b[6] = 4;
        assert!(err(&reseal(b)).contains("unknown flags"));
        let mut b = state(4, None, None).encode();
        b[16] = 1;
        assert!(err(&reseal(b)).contains("leader id set without its flag"));
        let mut b = state(4, None, None).encode();
        b[30] = 1;
        assert!(err(&reseal(b)).contains("vote fields"));
        let b = state(0, Some(1), None).encode();
        assert!(err(&b).contains("epoch 0"));
        let mut b = good;
        b[9] ^= 1;
        assert!(err(&b).contains("checksum mismatch"));
    }

    /// A crash while writing never replaces a good state: a partial or torn tmp file is ignored
    /// by readers and never renamed, and a truncated state file is reported, not read as empty.
    #[test]
    fn crash_safety() {
        let dir = tempfile::tempdir().unwrap();
        let good = state(5, Some(1), Some((1, Some(9))));
        good.write(dir.path()).unwrap();
        let path = dir.path().join(QUORUM_STATE_FILE);
        let tmp = fsio::tmp_path(&path);
        let newer = state(6, None, Some((3, None))).encode();
        // A crash after writing part of the tmp file: every prefix, the old state stays.
        for len in 0..=newer.len() {
            std::fs::write(&tmp, &newer[..len]).unwrap();
            assert_eq!(QuorumState::read(dir.path()).unwrap(), Some(good));
        }
        // A tmp file torn after its sync is caught before the rename.
        for len in [0, 1, 20, 43] {
            let err = fsio::write_atomic_with(&path, &newer, &|t| {
                let f = std::fs::OpenOptions::new().write(true).open(t).unwrap();
                f.set_len(len).unwrap();
            })
            .unwrap_err();
            assert!(matches!(err, StorageError::Corrupt { .. }));
            assert_eq!(QuorumState::read(dir.path()).unwrap(), Some(good));
        }
        // The next successful write replaces the stale tmp and the state.
        let next = state(7, Some(3), None);
        next.write(dir.path()).unwrap();
        assert_eq!(QuorumState::read(dir.path()).unwrap(), Some(next));
        assert!(!tmp.exists());
        // A state file truncated behind our back (a broken disk) is an error, never "no state".
        for len in 0..QUORUM_STATE_BYTES as u64 {
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(len).unwrap();
            assert!(matches!(
                QuorumState::read(dir.path()),
                Err(StorageError::Corrupt { .. })
            ));
            next.write(dir.path()).unwrap();
        }
    }

    proptest! {
        /// Every state round-trips.
        #[test]
        fn round_trip(s in arb_state()) {
            prop_assert_eq!(QuorumState::decode(&s.encode(), Path::new("q")).unwrap(), s);
        }

        /// Random bytes never panic the decoder, and are accepted only with a valid checksum.
        #[test]
        fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if QuorumState::decode(&bytes, Path::new("q")).is_ok() {
                prop_assert_eq!(bytes.len(), QUORUM_STATE_BYTES);
                let stored = u32::from_le_bytes(bytes[40..44].try_into().unwrap());
                prop_assert_eq!(stored, crc32c::crc32c(&bytes[..40]));
            }
        }

        /// Changing any one byte of a valid state is always detected.
        #[test]
        fn mutation_detected(s in arb_state(), at in 0..QUORUM_STATE_BYTES, x in 1u8..) {
            let mut b = s.encode();
            b[at] ^= x;
            prop_assert!(QuorumState::decode(&b, Path::new("q")).is_err());
        }
    }
}
