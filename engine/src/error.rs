//! Errors of the engine. Every variant names something a caller can act on.

use std::path::PathBuf;

use corum_types::LogOffset;

/// Why bytes are not a valid frame. Returned by the pure decoder; the log wraps it with the
/// segment and position where it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("bad frame magic {found:02x?}")]
    BadMagic { found: [u8; 4] },
    #[error("unsupported frame format version {found}")]
    UnsupportedVersion { found: u16 },
    #[error("frame length {frame_len} outside 64..={frame_bytes_max}")]
    LengthOutOfRange {
        frame_len: u32,
        frame_bytes_max: u32,
    },
    #[error("frame of {frame_len} bytes exceeds the configured maximum of {frame_bytes_max}")]
    TooLarge {
        frame_len: u64,
        frame_bytes_max: u32,
    },
    #[error("unknown attribute bits {bits:#06x}")]
    UnknownAttributes { bits: u16 },
    #[error("reserved header bytes are not zero")]
    ReservedNotZero,
    #[error("frame padding is not zero")]
    PaddingNotZero,
    #[error("batch has zero records")]
    ZeroRecordCount,
    #[error("batch at base offset {base_offset} overflows the offset space")]
    OffsetOverflow { base_offset: u64 },
    #[error("max timestamp {max_ms} is before first timestamp {first_ms}")]
    TimestampsInverted { first_ms: i64, max_ms: i64 },
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch { stored: u32, computed: u32 },
    #[error("payload is not a valid archive: {reason}")]
    PayloadInvalid { reason: String },
}

/// Errors of the disk seam and the log.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("corruption in {segment} at byte {position}: {reason}")]
    Corruption {
        segment: PathBuf,
        position: u64,
        reason: String,
    },
    #[error("invalid frame: {0}")]
    Frame(#[from] FrameError),
    #[error("offset {requested} out of range: log holds [{start}, {end})")]
    OffsetOutOfRange {
        requested: LogOffset,
        start: LogOffset,
        end: LogOffset,
    },
    #[error("frame epoch {found} is below the log's last epoch {last}")]
    EpochRegression { last: u64, found: u64 },
    #[error("the log failed earlier and refuses further writes: {reason}")]
    Failed { reason: String },
    #[error("invalid configuration: {reason}")]
    InvalidConfig { reason: String },
    #[error("{buffered_bytes} bytes are waiting for the disk, limit {limit_bytes}: wait for durability first")]
    Backpressure {
        buffered_bytes: usize,
        limit_bytes: usize,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
