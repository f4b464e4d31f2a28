//! Batch frames: the unit the log stores, Raft replicates and readers receive.
//!
//! A batch of records is one **frame**: a fixed 64-byte header followed by the payload (the
//! rkyv-archived records; the engine treats it as opaque bytes), padded with zero bytes to a
//! multiple of 8. Frames are laid end to end in a segment, and every segment starts on a 4 KiB
//! boundary, so every frame — and therefore every payload — starts 8-byte aligned inside an
//! aligned buffer. That is what lets [`FrameView::access`] hand out `&Archived<T>` without a copy.
//!
//! # Layout (format version 1, all integers little-endian)
//!
//! | bytes   | field                | meaning                                                    |
//! |---------|----------------------|------------------------------------------------------------|
//! | 0..4    | `magic`              | `b"CRMB"` (corum batch)                                    |
//! | 4..8    | `crc32c`             | CRC-32C (Castagnoli) of bytes `8..64` and of the payload   |
//! | 8..12   | `frame_len`          | u32: header + payload bytes, **excluding** padding          |
//! | 12..14  | `version`            | u16: [`FormatVersion`] (1)                                 |
//! | 14..16  | `attributes`         | u16: bit 0 = control batch; other bits must be zero        |
//! | 16..24  | `base_offset`        | u64: offset of the first record in the batch               |
//! | 24..32  | `epoch`              | u64: the leader epoch that created the batch               |
//! | 32..36  | `record_count`       | u32: records in the batch, at least 1                      |
//! | 36..40  | reserved             | u32: zero                                                  |
//! | 40..48  | `first_timestamp_ms` | i64: timestamp of the first record (ms since Unix epoch)   |
//! | 48..56  | `max_timestamp_ms`   | i64: largest record timestamp, `>= first_timestamp_ms`     |
//! | 56..64  | reserved             | u64: zero                                                  |
//! | 64..    | payload              | `frame_len - 64` bytes, opaque to the engine (rkyv root at end) |
//! | ..      | padding              | zero bytes up to the next multiple of 8 (not checksummed)  |
//!
//! The checksum starts right after itself, so a frame is checked with one pass over
//! `bytes[8..frame_len]`. The padding is outside the checksum; the decoder still requires it to
//! be zero so nothing unchecked can hide in a frame. The batch covers offsets
//! `base_offset ..= base_offset + record_count - 1`.
//!
//! The engine does not know record types. Raft control records (LeaderChange, Voters) are
//! carried in batches with the control attribute set; their payload is as opaque as any other.
//!
//! # Validation happens once
//!
//! [`decode_frame`] checks structure and checksum; that is the gate every byte crosses when it
//! enters the process (recovery scan, network receive). [`FrameView::access`] additionally runs
//! rkyv's `bytecheck` over the payload for a given record type; there is no unchecked access.

mod access;

pub use access::ArchivedCheck;

use corum_types::{Epoch, LogOffset};

use crate::buf::AlignedBuf;
use crate::error::FrameError;

/// `b"CRMB"`: the first four bytes of every frame.
pub const FRAME_MAGIC: [u8; 4] = *b"CRMB";
/// Size of the fixed frame header.
pub const HEADER_BYTES: usize = 64;
/// Frames (and so payloads) start at multiples of this many bytes.
pub const FRAME_ALIGN_BYTES: usize = 8;
/// The default limit on one frame's `frame_len` (header + payload): 8 MiB.
pub const DEFAULT_FRAME_BYTES_MAX: u32 = 8 << 20;

/// Bytes `8..HEADER_BYTES` plus the payload are covered by the checksum.
const CRC_START: usize = 8;

/// On-disk format versions. Every version has a golden file in `engine/testdata/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum FormatVersion {
    V1 = 1,
}

impl FormatVersion {
    pub const CURRENT: Self = Self::V1;

    pub fn from_u16(v: u16) -> Result<Self, FrameError> {
        match v {
            1 => Ok(Self::V1),
            found => Err(FrameError::UnsupportedVersion { found }),
        }
    }
}

/// Batch attribute bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attributes(pub u16);

impl Attributes {
    /// The batch holds Raft control records (LeaderChange, Voters, ...), not data records.
    pub const CONTROL: Self = Self(1);
    /// Bits this version understands; anything else is rejected.
    pub const KNOWN_MASK: u16 = 1;

    pub const fn empty() -> Self {
        Self(0)
    }

    pub const fn is_control(self) -> bool {
        self.0 & Self::CONTROL.0 != 0
    }
}

/// The decoded header of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchHeader {
    pub version: FormatVersion,
    pub attributes: Attributes,
    pub base_offset: LogOffset,
    pub epoch: Epoch,
    pub record_count: u32,
    pub first_timestamp_ms: i64,
    pub max_timestamp_ms: i64,
    /// Header + payload bytes, without padding.
    pub frame_len: u32,
    pub crc32c: u32,
}

impl BatchHeader {
    /// Offset of the last record in the batch.
    pub fn last_offset(&self) -> LogOffset {
        self.base_offset.add(u64::from(self.record_count) - 1)
    }

    /// The offset after the batch (exclusive end).
    pub fn end_offset(&self) -> LogOffset {
        self.base_offset.add(u64::from(self.record_count))
    }

    /// Bytes the frame occupies in a segment, padding included.
    pub fn padded_len(&self) -> usize {
        padded_frame_len(self.frame_len as usize)
    }

    pub fn payload_len(&self) -> usize {
        self.frame_len as usize - HEADER_BYTES
    }
}

/// What a caller supplies to build a frame; the engine fills in length and checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub attributes: Attributes,
    pub base_offset: LogOffset,
    pub epoch: Epoch,
    pub record_count: u32,
    pub first_timestamp_ms: i64,
    pub max_timestamp_ms: i64,
}

/// Round a frame length up to the frame alignment.
#[inline]
pub const fn padded_frame_len(frame_len: usize) -> usize {
    (frame_len + FRAME_ALIGN_BYTES - 1) & !(FRAME_ALIGN_BYTES - 1)
}

/// Bytes a frame with a `payload_len`-byte payload occupies, padding included.
#[inline]
pub const fn frame_bytes_for_payload(payload_len: usize) -> usize {
    padded_frame_len(HEADER_BYTES + payload_len)
}

/// Check that `meta` and a payload length make a frame this format can hold.
pub fn check_meta(
    meta: &BatchMeta,
    payload_len: usize,
    frame_bytes_max: u32,
) -> Result<(), FrameError> {
    if meta.record_count == 0 {
        return Err(FrameError::ZeroRecordCount);
    }
    if meta.attributes.0 & !Attributes::KNOWN_MASK != 0 {
        return Err(FrameError::UnknownAttributes {
            bits: meta.attributes.0,
        });
    }
    if meta.max_timestamp_ms < meta.first_timestamp_ms {
        return Err(FrameError::TimestampsInverted {
            first_ms: meta.first_timestamp_ms,
            max_ms: meta.max_timestamp_ms,
        });
    }
    if meta
        .base_offset
        .get()
        .checked_add(u64::from(meta.record_count))
        .is_none()
    {
        return Err(FrameError::OffsetOverflow {
            base_offset: meta.base_offset.get(),
        });
    }
    let frame_len = HEADER_BYTES as u64 + payload_len as u64;
    if frame_len > u64::from(frame_bytes_max) {
        return Err(FrameError::TooLarge {
            frame_len,
            frame_bytes_max,
        });
    }
    Ok(())
}

/// Encode a frame into `out` (which must be exactly
/// [`frame_bytes_for_payload`]`(payload.len())` bytes). Returns the header written.
pub fn encode_frame_into(
    out: &mut [u8],
    meta: &BatchMeta,
    payload: &[u8],
    frame_bytes_max: u32,
) -> Result<BatchHeader, FrameError> {
    check_meta(meta, payload.len(), frame_bytes_max)?;
    let frame_len = HEADER_BYTES + payload.len();
    assert_eq!(
        out.len(),
        padded_frame_len(frame_len),
        "output sized for exactly one frame"
    );
    write_header_fields(&mut out[..HEADER_BYTES], meta, frame_len);
    out[HEADER_BYTES..frame_len].copy_from_slice(payload);
    out[frame_len..].fill(0);
    let crc = crc32c::crc32c(&out[CRC_START..frame_len]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(header_for(meta, frame_len, crc))
}

/// Payload bytes copied per step of [`encode_frame_append`]: small enough that the checksum
/// reads the piece back from cache, large enough to keep the loop cheap.
const COPY_PIECE_BYTES: usize = 64 << 10;

/// Encode a frame at the end of `out`, growing it by [`frame_bytes_for_payload`] bytes; the
/// same bytes as [`encode_frame_into`]. The payload is copied once, in cache-sized pieces, each
/// checksummed right after it is copied (one pass over memory instead of a fill, a copy and a
/// checksum read). On error `out` is unchanged.
pub fn encode_frame_append(
    out: &mut AlignedBuf,
    meta: &BatchMeta,
    payload: &[u8],
    frame_bytes_max: u32,
) -> Result<BatchHeader, FrameError> {
    check_meta(meta, payload.len(), frame_bytes_max)?;
    let frame_len = HEADER_BYTES + payload.len();
    let padded = padded_frame_len(frame_len);
    out.reserve(padded);
    let at = out.len();
    let mut header = [0u8; HEADER_BYTES];
    write_header_fields(&mut header, meta, frame_len);
    let mut crc = crc32c::crc32c(&header[CRC_START..]);
    out.extend_from_slice(&header);
    for piece in payload.chunks(COPY_PIECE_BYTES) {
        let from = out.len();
        out.extend_from_slice(piece);
        crc = crc32c::crc32c_append(crc, &out[from..]);
    }
    out.resize(at + padded, 0);
    out[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
    Ok(header_for(meta, frame_len, crc))
}

/// Every header field but the checksum (bytes 4..8 are left as they are).
fn write_header_fields(out: &mut [u8], meta: &BatchMeta, frame_len: usize) {
    out[0..4].copy_from_slice(&FRAME_MAGIC);
    out[8..12].copy_from_slice(&(frame_len as u32).to_le_bytes());
    out[12..14].copy_from_slice(&(FormatVersion::CURRENT as u16).to_le_bytes());
    out[14..16].copy_from_slice(&meta.attributes.0.to_le_bytes());
    out[16..24].copy_from_slice(&meta.base_offset.get().to_le_bytes());
    out[24..32].copy_from_slice(&meta.epoch.get().to_le_bytes());
    out[32..36].copy_from_slice(&meta.record_count.to_le_bytes());
    out[36..40].fill(0);
    out[40..48].copy_from_slice(&meta.first_timestamp_ms.to_le_bytes());
    out[48..56].copy_from_slice(&meta.max_timestamp_ms.to_le_bytes());
    out[56..64].fill(0);
}

fn header_for(meta: &BatchMeta, frame_len: usize, crc: u32) -> BatchHeader {
    BatchHeader {
        version: FormatVersion::CURRENT,
        attributes: meta.attributes,
        base_offset: meta.base_offset,
        epoch: meta.epoch,
        record_count: meta.record_count,
        first_timestamp_ms: meta.first_timestamp_ms,
        max_timestamp_ms: meta.max_timestamp_ms,
        frame_len: frame_len as u32,
        crc32c: crc,
    }
}

/// Encode a frame into a fresh `Vec` (tests, tools, network senders).
pub fn encode_frame(
    meta: &BatchMeta,
    payload: &[u8],
    frame_bytes_max: u32,
) -> Result<Vec<u8>, FrameError> {
    let mut out = vec![0; frame_bytes_for_payload(payload.len())];
    encode_frame_into(&mut out, meta, payload, frame_bytes_max)?;
    Ok(out)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2-byte slice"))
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4-byte slice"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8-byte slice"))
}

/// Parse and check only the fixed header fields (no checksum): what a scanner needs to know how
/// many bytes the frame claims before reading them.
pub fn peek_header(bytes: &[u8], frame_bytes_max: u32) -> Result<BatchHeader, FrameError> {
    if bytes.len() < HEADER_BYTES {
        return Err(FrameError::Truncated {
            needed: HEADER_BYTES,
            available: bytes.len(),
        });
    }
    if bytes[0..4] != FRAME_MAGIC {
        return Err(FrameError::BadMagic {
            found: bytes[0..4].try_into().expect("4 bytes"),
        });
    }
    let frame_len = u32_at(bytes, 8);
    if (frame_len as usize) < HEADER_BYTES || frame_len > frame_bytes_max {
        return Err(FrameError::LengthOutOfRange {
            frame_len,
            frame_bytes_max,
        });
    }
    let version = FormatVersion::from_u16(u16_at(bytes, 12))?;
    let attributes = Attributes(u16_at(bytes, 14));
    if attributes.0 & !Attributes::KNOWN_MASK != 0 {
        return Err(FrameError::UnknownAttributes { bits: attributes.0 });
    }
    if u32_at(bytes, 36) != 0 || u64_at(bytes, 56) != 0 {
        return Err(FrameError::ReservedNotZero);
    }
    let record_count = u32_at(bytes, 32);
    if record_count == 0 {
        return Err(FrameError::ZeroRecordCount);
    }
    let base_offset = u64_at(bytes, 16);
    if base_offset.checked_add(u64::from(record_count)).is_none() {
        return Err(FrameError::OffsetOverflow { base_offset });
    }
    let first_timestamp_ms = u64_at(bytes, 40) as i64;
    let max_timestamp_ms = u64_at(bytes, 48) as i64;
    if max_timestamp_ms < first_timestamp_ms {
        return Err(FrameError::TimestampsInverted {
            first_ms: first_timestamp_ms,
            max_ms: max_timestamp_ms,
        });
    }
    Ok(BatchHeader {
        version,
        attributes,
        base_offset: LogOffset(base_offset),
        epoch: Epoch(u64_at(bytes, 24)),
        record_count,
        first_timestamp_ms,
        max_timestamp_ms,
        frame_len,
        crc32c: u32_at(bytes, 4),
    })
}

/// Decode and fully check the frame at the start of `bytes`: header fields, length, checksum
/// and zero padding. `bytes` may extend past the frame; the view covers exactly one padded frame.
pub fn decode_frame(bytes: &[u8], frame_bytes_max: u32) -> Result<FrameView<'_>, FrameError> {
    let header = peek_header(bytes, frame_bytes_max)?;
    let padded = header.padded_len();
    if bytes.len() < padded {
        return Err(FrameError::Truncated {
            needed: padded,
            available: bytes.len(),
        });
    }
    let frame_len = header.frame_len as usize;
    let computed = crc32c::crc32c(&bytes[CRC_START..frame_len]);
    if computed != header.crc32c {
        return Err(FrameError::ChecksumMismatch {
            stored: header.crc32c,
            computed,
        });
    }
    if bytes[frame_len..padded].iter().any(|&b| b != 0) {
        return Err(FrameError::PaddingNotZero);
    }
    Ok(FrameView {
        header,
        bytes: &bytes[..padded],
    })
}

/// A frame whose header, checksum and padding have been checked. Borrowed from the buffer it
/// was decoded from: no copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameView<'a> {
    header: BatchHeader,
    bytes: &'a [u8],
}

impl<'a> FrameView<'a> {
    /// A view over bytes the caller decoded with [`decode_frame`] earlier (same buffer, not
    /// modified since). Used by the log's reader to avoid checksumming twice.
    pub(crate) fn from_checked(header: BatchHeader, bytes: &'a [u8]) -> Self {
        debug_assert_eq!(bytes.len(), header.padded_len());
        Self { header, bytes }
    }

    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The whole frame, padding included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The payload (rkyv bytes), without padding.
    pub fn payload(&self) -> &'a [u8] {
        &self.bytes[HEADER_BYTES..self.header.frame_len as usize]
    }
}

#[cfg(test)]
mod tests;
