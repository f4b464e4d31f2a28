//! What goes wrong encoding or decoding a metadata record.
//!
//! Names in messages are Kafka's: a record or struct by its name in the spec (a nested struct
//! as `Record.Field`), a field by its spec name, so an error points at the line of the JSON
//! spec that describes the bytes.

/// Why bytes are not a valid value of the field they should hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// The value needs more bytes than are left.
    #[error("needs {needed} bytes, {remaining} left")]
    Truncated { needed: usize, remaining: usize },
    /// An unsigned varint of more than five bytes, or one above `u32::MAX`.
    #[error("unsigned varint longer than 5 bytes or above 2^32 - 1")]
    VarintTooLong,
    /// A null where this version of the field is not nullable.
    #[error("null, but the field is not nullable at this version")]
    NullNotAllowed,
    /// A negative length other than -1 (null) in a non-flexible version.
    #[error("negative length {0} (only -1, null, may be negative)")]
    NegativeLength(i32),
    /// A string longer than Kafka's limit of 32,767 bytes.
    #[error("string of {len} bytes (at most 32767)")]
    StringTooLong { len: usize },
    /// A length (of bytes, or of an array times its smallest element) beyond the bytes left.
    #[error("length {len} needs at least {needed} bytes, {remaining} left")]
    LengthBeyondRemaining {
        len: usize,
        needed: usize,
        remaining: usize,
    },
    /// A string that is not UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
}

/// Bytes that are not a metadata record (or not the one they claim to be).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A version outside the record's valid versions.
    #[error("{record}: version {version} is not supported (versions {lowest} to {highest})")]
    UnsupportedVersion {
        record: &'static str,
        version: i64,
        lowest: i16,
        highest: i16,
    },
    /// A field's bytes are malformed.
    #[error("{record}.{field}: {reason}")]
    Field {
        record: &'static str,
        field: &'static str,
        reason: Malformed,
    },
    /// Tagged fields must come in increasing tag order, each at most once.
    #[error("{record}: tagged field {tag} follows tagged field {previous}")]
    TagOutOfOrder {
        record: &'static str,
        tag: u32,
        previous: u32,
    },
    /// A tag the record defines for other versions only.
    #[error("{record}: tag {tag} is not valid at version {version}")]
    TagNotInVersion {
        record: &'static str,
        tag: u32,
        version: i16,
    },
    /// A known tagged field whose value is shorter than the size it declared.
    #[error("{record}.{field}: tagged field declares {declared} bytes, its value has {used}")]
    TaggedFieldSize {
        record: &'static str,
        field: &'static str,
        declared: usize,
        used: usize,
    },
    /// A metadata record frame version other than 1.
    #[error("metadata record frame version {frame_version} is not supported (only 1 is)")]
    UnknownFrameVersion { frame_version: i64 },
    /// An api key that names no metadata record.
    #[error("api key {api_key} is not a metadata record")]
    UnknownApiKey { api_key: i64 },
    /// Bytes left over after a whole record.
    #[error("{record}: {remaining} bytes left after the record")]
    TrailingBytes {
        record: &'static str,
        remaining: usize,
    },
}

/// A value that cannot be written at the version asked for. Nothing was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A version outside the record's valid versions.
    #[error("{record}: version {version} is not supported (versions {lowest} to {highest})")]
    UnsupportedVersion {
        record: &'static str,
        version: i16,
        lowest: i16,
        highest: i16,
    },
    /// A field the version does not have holds a value other than its default, and the field is
    /// not ignorable: writing the record would lose it.
    #[error("{record}.{field}: a non-default value cannot be written at version {version}, which lacks the field")]
    NonDefaultAbsent {
        record: &'static str,
        field: &'static str,
        version: i16,
    },
    /// None in a field that is not nullable at this version.
    #[error("{record}.{field}: null, but the field is not nullable at version {version}")]
    NullNotAllowed {
        record: &'static str,
        field: &'static str,
        version: i16,
    },
    /// A string longer than Kafka's limit of 32,767 bytes.
    #[error("{record}.{field}: string of {len} bytes (at most 32767)")]
    StringTooLong {
        record: &'static str,
        field: &'static str,
        len: usize,
    },
    /// An array or byte string with more than `i32::MAX` elements.
    #[error("{record}.{field}: {len} elements (at most 2^31 - 1)")]
    TooLong {
        record: &'static str,
        field: &'static str,
        len: usize,
    },
    /// A record of more than `i32::MAX` bytes.
    #[error("{record}: {len} bytes (at most 2^31 - 1)")]
    RecordTooLarge { record: &'static str, len: usize },
    /// An unknown tagged field that reuses a tag the record defines.
    #[error("{record}: unknown tagged field {tag} reuses a tag the record defines")]
    UnknownTagDefined { record: &'static str, tag: u32 },
    /// Unknown tagged fields out of increasing tag order, or a tag twice.
    #[error("{record}: unknown tagged field {tag} follows {previous} (tags must increase)")]
    UnknownTagsUnordered {
        record: &'static str,
        tag: u32,
        previous: u32,
    },
    /// Unknown tagged fields in a version without tagged fields.
    #[error("{record}: version {version} has no tagged fields, but unknown ones are set")]
    TaggedFieldsNotFlexible { record: &'static str, version: i16 },
}
