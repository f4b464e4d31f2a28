//! The sparse offset index of a sealed segment, and its file format.
//!
//! In memory every segment keeps a sorted list of [`IndexEntry`]s: one for its first batch, one
//! every `index_interval_bytes`, and one for every batch whose epoch differs from the previous
//! batch's. Because every epoch change has an entry, the entries also answer "which epoch holds
//! offset N" and "where does epoch E end" without touching the disk.
//!
//! When a segment is sealed (the log rolled past it) the syncer writes its index to
//! `<base>.index` (through `<base>.index.tmp` and a rename), so opening the log does not scan
//! sealed segments. The active segment has no index file: recovery rebuilds its index by scanning
//! it, which is bounded by `segment_bytes`. A missing or damaged index file is rebuilt by a scan.
//!
//! # Index file layout (version 1, little-endian)
//!
//! | bytes   | field          | meaning                                            |
//! |---------|----------------|----------------------------------------------------|
//! | 0..4    | magic          | `b"CRMI"`                                          |
//! | 4..8    | crc32c         | CRC-32C of bytes `8..32 + 24 * entry_count`        |
//! | 8..10   | version        | u16 = 1                                            |
//! | 10..12  | reserved       | zero                                               |
//! | 12..16  | entry_count    | u32, at least 1                                    |
//! | 16..24  | base_offset    | u64: the segment's first offset                    |
//! | 24..32  | end_offset     | u64: the offset after the segment's last batch     |
//! | 32..40  | size_bytes     | u64: bytes of frames in the segment                |
//! | 40..    | entries        | `entry_count` × (offset u64, position u64, epoch u64) |
//! | ..      | padding        | zeros to a multiple of 4096                        |

use corum_types::{Epoch, LogOffset};

/// One sparse index point: the batch starting at `offset` is at byte `position`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub offset: LogOffset,
    pub position: u64,
    pub epoch: Epoch,
}

pub const INDEX_MAGIC: [u8; 4] = *b"CRMI";
const INDEX_HEADER_BYTES: usize = 40;
const ENTRY_BYTES: usize = 24;

/// What an index file records about its sealed segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedIndex {
    pub base_offset: LogOffset,
    pub end_offset: LogOffset,
    pub size_bytes: u64,
    pub entries: Vec<IndexEntry>,
}

impl SealedIndex {
    /// Encode into bytes padded to a block multiple.
    pub fn encode(&self) -> Vec<u8> {
        let body = INDEX_HEADER_BYTES + ENTRY_BYTES * self.entries.len();
        let mut out = vec![0u8; crate::buf::align_up_block(body as u64) as usize];
        out[0..4].copy_from_slice(&INDEX_MAGIC);
        out[8..10].copy_from_slice(&1u16.to_le_bytes());
        out[12..16].copy_from_slice(&(self.entries.len() as u32).to_le_bytes());
        out[16..24].copy_from_slice(&self.base_offset.get().to_le_bytes());
        out[24..32].copy_from_slice(&self.end_offset.get().to_le_bytes());
        out[32..40].copy_from_slice(&self.size_bytes.to_le_bytes());
        for (i, e) in self.entries.iter().enumerate() {
            let at = INDEX_HEADER_BYTES + i * ENTRY_BYTES;
            out[at..at + 8].copy_from_slice(&e.offset.get().to_le_bytes());
            out[at + 8..at + 16].copy_from_slice(&e.position.to_le_bytes());
            out[at + 16..at + 24].copy_from_slice(&e.epoch.get().to_le_bytes());
        }
        let crc = crc32c::crc32c(&out[8..body]);
        out[4..8].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decode and check an index file for the segment based at `base_offset`. `Err` holds the
    /// reason, for a log line before the segment is rebuilt by scanning.
    pub fn decode(bytes: &[u8], base_offset: LogOffset) -> Result<Self, String> {
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        if bytes.len() < INDEX_HEADER_BYTES {
            return Err(format!("index file of {} bytes is too short", bytes.len()));
        }
        if bytes[0..4] != INDEX_MAGIC {
            return Err("bad index magic".into());
        }
        if u16::from_le_bytes([bytes[8], bytes[9]]) != 1 {
            return Err("unsupported index version".into());
        }
        let count = u32::from_le_bytes(bytes[12..16].try_into().expect("4")) as usize;
        let body = INDEX_HEADER_BYTES
            .checked_add(
                count
                    .checked_mul(ENTRY_BYTES)
                    .ok_or("entry count overflows")?,
            )
            .ok_or("entry count overflows")?;
        if count == 0 || body > bytes.len() {
            return Err(format!(
                "index claims {count} entries in {} bytes",
                bytes.len()
            ));
        }
        let stored = u32::from_le_bytes(bytes[4..8].try_into().expect("4"));
        if crc32c::crc32c(&bytes[8..body]) != stored {
            return Err("index checksum mismatch".into());
        }
        let idx = SealedIndex {
            base_offset: LogOffset(u64_at(16)),
            end_offset: LogOffset(u64_at(24)),
            size_bytes: u64_at(32),
            entries: (0..count)
                .map(|i| {
                    let at = INDEX_HEADER_BYTES + i * ENTRY_BYTES;
                    IndexEntry {
                        offset: LogOffset(u64_at(at)),
                        position: u64_at(at + 8),
                        epoch: Epoch(u64_at(at + 16)),
                    }
                })
                .collect(),
        };
        if idx.base_offset != base_offset || idx.entries[0].offset != base_offset {
            return Err(format!("index is for base offset {}", idx.base_offset));
        }
        if idx.end_offset <= idx.base_offset {
            return Err("index end offset is not after its base".into());
        }
        let sorted = idx.entries.windows(2).all(|w| {
            w[0].offset < w[1].offset && w[0].position < w[1].position && w[0].epoch <= w[1].epoch
        });
        let last = idx.entries.last().expect("count >= 1");
        if !sorted || last.offset >= idx.end_offset || last.position >= idx.size_bytes {
            return Err("index entries out of order or beyond the segment".into());
        }
        Ok(idx)
    }
}

/// The entry at or before `offset` (entries sorted by offset, first one <= offset).
pub fn floor_entry(entries: &[IndexEntry], offset: LogOffset) -> Option<&IndexEntry> {
    let i = entries.partition_point(|e| e.offset <= offset);
    i.checked_sub(1).map(|i| &entries[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_roundtrip_and_rejects_damage() {
        // Proves an index file round-trips and any flipped byte in its body is rejected.
        let idx = SealedIndex {
            base_offset: LogOffset(100),
            end_offset: LogOffset(250),
            size_bytes: 9000,
            entries: vec![
                IndexEntry {
                    offset: LogOffset(100),
                    position: 0,
                    epoch: Epoch(1),
                },
                IndexEntry {
                    offset: LogOffset(180),
                    position: 4096,
                    epoch: Epoch(2),
                },
            ],
        };
        let bytes = idx.encode();
        assert_eq!(bytes.len(), 4096);
        assert_eq!(SealedIndex::decode(&bytes, LogOffset(100)).unwrap(), idx);
        assert!(SealedIndex::decode(&bytes, LogOffset(101)).is_err());
        for i in 0..88 {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(SealedIndex::decode(&b, LogOffset(100)).is_err(), "byte {i}");
        }
        assert_eq!(
            floor_entry(&idx.entries, LogOffset(179)).unwrap().position,
            0
        );
        assert_eq!(
            floor_entry(&idx.entries, LogOffset(180)).unwrap().position,
            4096
        );
        assert!(floor_entry(&idx.entries, LogOffset(99)).is_none());
    }
}
