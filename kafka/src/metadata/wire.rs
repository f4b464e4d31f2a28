//! Kafka's message serialization primitives, as the generated record codecs use them
//! (hand-written; `generated.rs` only calls these).
//!
//! | type | non-flexible version | flexible version |
//! |---|---|---|
//! | int8/16/32/64, uint16, float64 | big-endian, fixed size | same |
//! | bool | one byte, 0 false, anything else true | same |
//! | uuid | 16 bytes, most significant first | same |
//! | string | int16 length (-1 null), UTF-8 | unsigned varint length + 1 (0 null) |
//! | bytes | int32 length (-1 null) | unsigned varint length + 1 (0 null) |
//! | array | int32 count (-1 null), elements | unsigned varint count + 1 (0 null) |
//! | tagged fields | — | varint count, then per field: varint tag, varint size, value |
//!
//! An unsigned varint holds 7 bits per byte, least significant group first, the top bit set on
//! every byte but the last; at most five bytes, at most `u32::MAX`.
//!
//! Decoders take untrusted bytes. They never panic and never allocate beyond the bytes left:
//! a length is checked against the remaining bytes (an array's against its count times its
//! smallest element) before anything is allocated. Strings are at most 32,767 bytes, as in
//! Kafka, and must be UTF-8. Negative lengths other than -1 are refused (Kafka reads any
//! negative length as null; its writers only write -1).

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::error::{DecodeError, EncodeError, Malformed};

/// Kafka's limit on a string's UTF-8 bytes, in every version.
pub const STRING_BYTES_MAX: usize = 0x7fff;

/// Kafka's limit on an array's elements or a byte string's bytes (a Java `int`).
pub const ELEMENTS_MAX: usize = i32::MAX as usize;

/// Where a decode error happened: (record or struct name, field name), as in the spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At(pub &'static str, pub &'static str);

impl At {
    pub fn err(self, reason: Malformed) -> DecodeError {
        DecodeError::Field {
            record: self.0,
            field: self.1,
            reason,
        }
    }
}

/// A tagged field this version of the record does not define, kept as read so that it is
/// written back unchanged (as Kafka does).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RawTaggedField {
    pub tag: u32,
    pub data: Bytes,
}

/// How a length (or an array's count) is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Len {
    /// Flexible versions: unsigned varint of length + 1, 0 for null.
    Compact,
    /// A string in a non-flexible version: int16, -1 for null.
    Int16,
    /// Bytes or an array in a non-flexible version: int32, -1 for null.
    Int32,
}

impl Len {
    /// A string's length at a version that is flexible or not.
    pub fn string(flexible: bool) -> Len {
        if flexible {
            Len::Compact
        } else {
            Len::Int16
        }
    }

    /// A byte string's length or an array's count at a version that is flexible or not.
    pub fn bytes(flexible: bool) -> Len {
        if flexible {
            Len::Compact
        } else {
            Len::Int32
        }
    }

    /// The encoded size of `len` (None: null).
    pub fn size(self, len: Option<usize>) -> usize {
        match self {
            Len::Compact => len.map_or(1, |n| uvarint_size(fit_u32(n + 1))),
            Len::Int16 => 2,
            Len::Int32 => 4,
        }
    }

    /// Writes `len` (None: null). The caller checked it fits (string or element limits).
    pub fn put(self, buf: &mut BytesMut, len: Option<usize>) {
        match (self, len) {
            (Len::Compact, None) => put_uvarint(buf, 0),
            (Len::Compact, Some(n)) => put_uvarint(buf, fit_u32(n + 1)),
            (Len::Int16, None) => buf.put_i16(-1),
            (Len::Int16, Some(n)) => buf
                .put_i16(i16::try_from(n).expect("strings were checked against STRING_BYTES_MAX")),
            (Len::Int32, None) => buf.put_i32(-1),
            (Len::Int32, Some(n)) => {
                buf.put_i32(i32::try_from(n).expect("lengths were checked against ELEMENTS_MAX"))
            }
        }
    }

    /// Reads a length: None for null.
    pub fn get(self, buf: &mut Bytes, at: At) -> Result<Option<usize>, DecodeError> {
        let len = match self {
            Len::Compact => i64::from(get_uvarint(buf, at)?) - 1,
            Len::Int16 => i64::from(get_i16(buf, at)?),
            Len::Int32 => i64::from(get_i32(buf, at)?),
        };
        match len {
            -1 => Ok(None),
            n if n < -1 => Err(at.err(Malformed::NegativeLength(
                i32::try_from(n).expect("read from at most 32 bits"),
            ))),
            n => Ok(Some(
                usize::try_from(n).expect("non-negative, at most 2^32"),
            )),
        }
    }
}

/// A length the encoder already checked fits an int32 (record size, element counts).
fn fit_u32(n: usize) -> u32 {
    u32::try_from(n).expect("encode checked that the record fits in i32::MAX bytes")
}

/// The bytes a value of `n` bytes takes out of `buf`, or Truncated.
fn take<const N: usize>(buf: &mut Bytes, at: At) -> Result<[u8; N], DecodeError> {
    let Some(head) = buf.get(..N) else {
        return Err(at.err(Malformed::Truncated {
            needed: N,
            remaining: buf.len(),
        }));
    };
    let out: [u8; N] = head.try_into().expect("a slice of N bytes");
    let _ = buf.split_to(N);
    Ok(out)
}

pub fn get_i8(buf: &mut Bytes, at: At) -> Result<i8, DecodeError> {
    take::<1>(buf, at).map(i8::from_be_bytes)
}

pub fn get_i16(buf: &mut Bytes, at: At) -> Result<i16, DecodeError> {
    take::<2>(buf, at).map(i16::from_be_bytes)
}

pub fn get_u16(buf: &mut Bytes, at: At) -> Result<u16, DecodeError> {
    take::<2>(buf, at).map(u16::from_be_bytes)
}

pub fn get_i32(buf: &mut Bytes, at: At) -> Result<i32, DecodeError> {
    take::<4>(buf, at).map(i32::from_be_bytes)
}

pub fn get_u32(buf: &mut Bytes, at: At) -> Result<u32, DecodeError> {
    take::<4>(buf, at).map(u32::from_be_bytes)
}

pub fn get_i64(buf: &mut Bytes, at: At) -> Result<i64, DecodeError> {
    take::<8>(buf, at).map(i64::from_be_bytes)
}

pub fn get_f64(buf: &mut Bytes, at: At) -> Result<f64, DecodeError> {
    take::<8>(buf, at).map(f64::from_be_bytes)
}

/// Kafka reads any non-zero byte as true.
pub fn get_bool(buf: &mut Bytes, at: At) -> Result<bool, DecodeError> {
    take::<1>(buf, at).map(|[b]| b != 0)
}

pub fn get_uuid(buf: &mut Bytes, at: At) -> Result<Uuid, DecodeError> {
    take::<16>(buf, at).map(Uuid::from_bytes)
}

pub fn put_bool(buf: &mut BytesMut, value: bool) {
    buf.put_u8(u8::from(value));
}

pub fn put_uuid(buf: &mut BytesMut, value: &Uuid) {
    buf.put_slice(value.as_bytes());
}

/// Reads an unsigned varint of at most five bytes and at most `u32::MAX`.
pub fn get_uvarint(buf: &mut Bytes, at: At) -> Result<u32, DecodeError> {
    let mut value: u32 = 0;
    for i in 0..5 {
        let Some(&byte) = buf.get(i) else {
            return Err(at.err(Malformed::Truncated {
                needed: i + 1,
                remaining: buf.len(),
            }));
        };
        // The fifth byte holds bits 28-31: four bits, and no continuation.
        if i == 4 && byte > 0x0f {
            return Err(at.err(Malformed::VarintTooLong));
        }
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let _ = buf.split_to(i + 1);
            return Ok(value);
        }
    }
    Err(at.err(Malformed::VarintTooLong))
}

pub fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

pub fn uvarint_size(value: u32) -> usize {
    match value {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xfff_ffff => 4,
        _ => 5,
    }
}

/// Reads a length and checks that `len * elem_min_bytes` bytes are left.
fn get_len_within(
    buf: &mut Bytes,
    len: Len,
    elem_min_bytes: usize,
    at: At,
) -> Result<Option<usize>, DecodeError> {
    let Some(n) = len.get(buf, at)? else {
        return Ok(None);
    };
    let needed = n.saturating_mul(elem_min_bytes.max(1));
    if needed > buf.len() {
        return Err(at.err(Malformed::LengthBeyondRemaining {
            len: n,
            needed,
            remaining: buf.len(),
        }));
    }
    Ok(Some(n))
}

fn required<T>(value: Option<T>, at: At) -> Result<T, DecodeError> {
    value.ok_or(at.err(Malformed::NullNotAllowed))
}

/// Refuses a null where this version of a field that is nullable in others is not.
pub fn check_null<T>(value: Option<T>, nullable: bool, at: At) -> Result<Option<T>, DecodeError> {
    if value.is_none() && !nullable {
        return Err(at.err(Malformed::NullNotAllowed));
    }
    Ok(value)
}

pub fn get_nullable_string(
    buf: &mut Bytes,
    len: Len,
    at: At,
) -> Result<Option<String>, DecodeError> {
    let Some(n) = len.get(buf, at)? else {
        return Ok(None);
    };
    if n > STRING_BYTES_MAX {
        return Err(at.err(Malformed::StringTooLong { len: n }));
    }
    let Some(bytes) = buf.get(..n) else {
        return Err(at.err(Malformed::LengthBeyondRemaining {
            len: n,
            needed: n,
            remaining: buf.len(),
        }));
    };
    let s = std::str::from_utf8(bytes)
        .map_err(|_| at.err(Malformed::InvalidUtf8))?
        .to_owned();
    let _ = buf.split_to(n);
    Ok(Some(s))
}

pub fn get_string(buf: &mut Bytes, len: Len, at: At) -> Result<String, DecodeError> {
    required(get_nullable_string(buf, len, at)?, at)
}

/// The encoded size of a string (None: null).
pub fn string_size(value: Option<&str>, len: Len) -> usize {
    len.size(value.map(str::len)) + value.map_or(0, str::len)
}

pub fn put_string(buf: &mut BytesMut, value: Option<&str>, len: Len) {
    len.put(buf, value.map(str::len));
    if let Some(s) = value {
        buf.put_slice(s.as_bytes());
    }
}

/// Reads a byte string without copying it (a slice of `buf`).
pub fn get_nullable_bytes(buf: &mut Bytes, len: Len, at: At) -> Result<Option<Bytes>, DecodeError> {
    match get_len_within(buf, len, 1, at)? {
        None => Ok(None),
        Some(n) => Ok(Some(buf.split_to(n))),
    }
}

pub fn get_bytes(buf: &mut Bytes, len: Len, at: At) -> Result<Bytes, DecodeError> {
    required(get_nullable_bytes(buf, len, at)?, at)
}

pub fn bytes_size(value: Option<&[u8]>, len: Len) -> usize {
    len.size(value.map(<[u8]>::len)) + value.map_or(0, <[u8]>::len)
}

pub fn put_bytes(buf: &mut BytesMut, value: Option<&[u8]>, len: Len) {
    len.put(buf, value.map(<[u8]>::len));
    if let Some(b) = value {
        buf.put_slice(b);
    }
}

/// Reads an array whose elements take at least `elem_min_bytes` each; the vector is sized from
/// the count only after the count is checked against the bytes left.
pub fn get_nullable_array<T>(
    buf: &mut Bytes,
    len: Len,
    elem_min_bytes: usize,
    at: At,
    mut elem: impl FnMut(&mut Bytes) -> Result<T, DecodeError>,
) -> Result<Option<Vec<T>>, DecodeError> {
    let Some(n) = get_len_within(buf, len, elem_min_bytes, at)? else {
        return Ok(None);
    };
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(elem(buf)?);
    }
    Ok(Some(items))
}

pub fn get_array<T>(
    buf: &mut Bytes,
    len: Len,
    elem_min_bytes: usize,
    at: At,
    elem: impl FnMut(&mut Bytes) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    required(get_nullable_array(buf, len, elem_min_bytes, at, elem)?, at)
}

pub fn array_size<T>(items: Option<&[T]>, len: Len, elem_size: impl Fn(&T) -> usize) -> usize {
    len.size(items.map(<[T]>::len)) + items.map_or(0, |items| items.iter().map(elem_size).sum())
}

pub fn put_array<T>(
    buf: &mut BytesMut,
    items: Option<&[T]>,
    len: Len,
    mut elem: impl FnMut(&mut BytesMut, &T),
) {
    len.put(buf, items.map(<[T]>::len));
    for item in items.unwrap_or_default() {
        elem(buf, item);
    }
}

/// Reads a struct's tagged fields. `known(tag, value)` reads the value of a tag the struct
/// defines at this version and answers its field name, answers None for a tag it does not
/// define (kept as a [`RawTaggedField`]), or refuses a tag defined for other versions only. A
/// known field must use exactly the size it declares.
pub fn get_tagged_fields(
    buf: &mut Bytes,
    record: &'static str,
    mut known: impl FnMut(u32, &mut Bytes) -> Result<Option<&'static str>, DecodeError>,
) -> Result<Vec<RawTaggedField>, DecodeError> {
    let at = At(record, "(tagged fields)");
    let count = get_uvarint(buf, at)?;
    let mut unknown = Vec::new();
    let mut previous: Option<u32> = None;
    // Each field takes at least two bytes, so a lying count fails on the bytes, not the loop.
    for _ in 0..count {
        let tag = get_uvarint(buf, at)?;
        if let Some(previous) = previous.filter(|&p| tag <= p) {
            return Err(DecodeError::TagOutOfOrder {
                record,
                tag,
                previous,
            });
        }
        previous = Some(tag);
        let size = usize::try_from(get_uvarint(buf, at)?).expect("u32 fits usize");
        if size > buf.len() {
            return Err(at.err(Malformed::LengthBeyondRemaining {
                len: size,
                needed: size,
                remaining: buf.len(),
            }));
        }
        let mut value = buf.split_to(size);
        match known(tag, &mut value)? {
            Some(field) if !value.is_empty() => {
                return Err(DecodeError::TaggedFieldSize {
                    record,
                    field,
                    declared: size,
                    used: size - value.len(),
                })
            }
            Some(_) => {}
            None => unknown.push(RawTaggedField { tag, data: value }),
        }
    }
    Ok(unknown)
}

/// The size of one tagged field whose value takes `value_size` bytes.
pub fn tagged_size(tag: u32, value_size: usize) -> usize {
    uvarint_size(tag) + uvarint_size(fit_u32(value_size)) + value_size
}

/// Writes one tagged field: tag, size, then the value `put_value` writes (of `value_size`
/// bytes).
pub fn put_tagged(
    buf: &mut BytesMut,
    tag: u32,
    value_size: usize,
    put_value: impl FnOnce(&mut BytesMut),
) {
    put_uvarint(buf, tag);
    put_uvarint(buf, fit_u32(value_size));
    let start = buf.len();
    put_value(buf);
    assert_eq!(
        buf.len() - start,
        value_size,
        "tagged field {tag}: size and value disagree"
    );
}

/// The size of a tagged-field section: the count, `known_count` fields of `known_bytes` and the
/// unknown ones.
pub fn tagged_section_size(
    raw: &[RawTaggedField],
    known_count: usize,
    known_bytes: usize,
) -> usize {
    let raw_bytes: usize = raw.iter().map(|f| tagged_size(f.tag, f.data.len())).sum();
    uvarint_size(fit_u32(raw.len() + known_count)) + known_bytes + raw_bytes
}

/// Writes a tagged-field section's count.
pub fn put_tagged_count(buf: &mut BytesMut, raw: &[RawTaggedField], known_count: usize) {
    put_uvarint(buf, fit_u32(raw.len() + known_count));
}

/// Writes unknown tagged fields between the known ones, so that tags increase (the fields were
/// checked with [`check_raw_tags`]).
pub struct RawTags<'a>(&'a [RawTaggedField]);

impl<'a> RawTags<'a> {
    pub fn new(raw: &'a [RawTaggedField]) -> Self {
        RawTags(raw)
    }

    /// Writes the unknown fields whose tags are below `tag`.
    pub fn put_below(&mut self, buf: &mut BytesMut, tag: u32) {
        while let Some((first, rest)) = self.0.split_first() {
            if first.tag >= tag {
                return;
            }
            put_tagged(buf, first.tag, first.data.len(), |buf| {
                buf.put_slice(&first.data)
            });
            self.0 = rest;
        }
    }

    /// Writes the remaining unknown fields.
    pub fn put_rest(self, buf: &mut BytesMut) {
        for field in self.0 {
            put_tagged(buf, field.tag, field.data.len(), |buf| {
                buf.put_slice(&field.data)
            });
        }
    }
}

/// Unknown tagged fields must increase in tag, and none may reuse a tag the record defines (in
/// any version: Kafka reads such a tag as its field, or refuses it).
pub fn check_raw_tags(
    record: &'static str,
    raw: &[RawTaggedField],
    defined: &[u32],
) -> Result<(), EncodeError> {
    let mut previous: Option<u32> = None;
    for field in raw {
        if defined.contains(&field.tag) {
            return Err(EncodeError::UnknownTagDefined {
                record,
                tag: field.tag,
            });
        }
        if let Some(previous) = previous.filter(|&p| field.tag <= p) {
            return Err(EncodeError::UnknownTagsUnordered {
                record,
                tag: field.tag,
                previous,
            });
        }
        previous = Some(field.tag);
    }
    Ok(())
}

/// A string must fit Kafka's limit.
pub fn check_string(
    record: &'static str,
    field: &'static str,
    value: &str,
) -> Result<(), EncodeError> {
    if value.len() > STRING_BYTES_MAX {
        return Err(EncodeError::StringTooLong {
            record,
            field,
            len: value.len(),
        });
    }
    Ok(())
}

/// An array's count or a byte string's length must fit an int32.
pub fn check_len(record: &'static str, field: &'static str, len: usize) -> Result<(), EncodeError> {
    if len > ELEMENTS_MAX {
        return Err(EncodeError::TooLong { record, field, len });
    }
    Ok(())
}

/// A record is written only at its valid versions.
pub fn check_encode_version(
    record: &'static str,
    version: i16,
    lowest: i16,
    highest: i16,
) -> Result<(), EncodeError> {
    if !(lowest..=highest).contains(&version) {
        return Err(EncodeError::UnsupportedVersion {
            record,
            version,
            lowest,
            highest,
        });
    }
    Ok(())
}

/// A record is read only at its valid versions.
pub fn check_decode_version(
    record: &'static str,
    version: i16,
    lowest: i16,
    highest: i16,
) -> Result<(), DecodeError> {
    if !(lowest..=highest).contains(&version) {
        return Err(DecodeError::UnsupportedVersion {
            record,
            version: i64::from(version),
            lowest,
            highest,
        });
    }
    Ok(())
}

/// The whole record must fit an int32, so every length inside it does.
pub fn check_record_len(record: &'static str, len: usize) -> Result<(), EncodeError> {
    if len > ELEMENTS_MAX {
        return Err(EncodeError::RecordTooLarge { record, len });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: At = At("Test", "Field");

    fn bytes(b: &[u8]) -> Bytes {
        Bytes::copy_from_slice(b)
    }

    /// Varints at each size boundary encode to their size and decode back.
    #[test]
    fn uvarint_round_trip() {
        for value in [
            0,
            1,
            0x7f,
            0x80,
            0x3fff,
            0x4000,
            0x1f_ffff,
            0x20_0000,
            0xfff_ffff,
            0x1000_0000,
            u32::MAX,
        ] {
            let mut buf = BytesMut::new();
            put_uvarint(&mut buf, value);
            assert_eq!(buf.len(), uvarint_size(value), "{value:#x}");
            let mut b = buf.freeze();
            assert_eq!(get_uvarint(&mut b, AT), Ok(value));
            assert!(b.is_empty());
        }
    }

    /// A sixth byte, bits above 32, and a missing last byte are refused.
    #[test]
    fn uvarint_refusals() {
        let too_long = Err(AT.err(Malformed::VarintTooLong));
        assert_eq!(
            get_uvarint(&mut bytes(&[0xff, 0xff, 0xff, 0xff, 0x0f]), AT),
            Ok(u32::MAX)
        );
        assert_eq!(
            get_uvarint(&mut bytes(&[0xff, 0xff, 0xff, 0xff, 0x10]), AT),
            too_long
        );
        assert_eq!(
            get_uvarint(&mut bytes(&[0x80, 0x80, 0x80, 0x80, 0x80, 0]), AT),
            too_long
        );
        assert_eq!(
            get_uvarint(&mut bytes(&[0x80, 0x80]), AT),
            Err(AT.err(Malformed::Truncated {
                needed: 3,
                remaining: 2
            }))
        );
    }

    /// Null is 0 (compact) or -1; other negative lengths are refused.
    #[test]
    fn lengths() {
        assert_eq!(Len::Compact.get(&mut bytes(&[0]), AT), Ok(None));
        assert_eq!(Len::Compact.get(&mut bytes(&[1]), AT), Ok(Some(0)));
        assert_eq!(Len::Int16.get(&mut bytes(&[0xff, 0xff]), AT), Ok(None));
        assert_eq!(
            Len::Int16.get(&mut bytes(&[0xff, 0xfe]), AT),
            Err(AT.err(Malformed::NegativeLength(-2)))
        );
        assert_eq!(
            Len::Int32.get(&mut bytes(&[0x80, 0, 0, 0]), AT),
            Err(AT.err(Malformed::NegativeLength(i32::MIN)))
        );
        for len in [Len::Compact, Len::Int16, Len::Int32] {
            for value in [None, Some(0), Some(300)] {
                let mut buf = BytesMut::new();
                len.put(&mut buf, value);
                assert_eq!(buf.len(), len.size(value));
                assert_eq!(len.get(&mut buf.freeze(), AT), Ok(value));
            }
        }
    }

    /// Strings: null where allowed, at most 32,767 bytes, UTF-8, within the bytes left.
    #[test]
    fn strings() {
        assert_eq!(
            get_nullable_string(&mut bytes(&[0]), Len::Compact, AT),
            Ok(None)
        );
        assert_eq!(
            get_string(&mut bytes(&[0]), Len::Compact, AT),
            Err(AT.err(Malformed::NullNotAllowed))
        );
        assert_eq!(
            get_string(&mut bytes(&[3, b'h', b'i']), Len::Compact, AT),
            Ok("hi".to_owned())
        );
        assert_eq!(
            get_string(&mut bytes(&[0x80, 0x80, 0x02]), Len::Compact, AT),
            Err(AT.err(Malformed::LengthBeyondRemaining {
                len: 0x7fff,
                needed: 0x7fff,
                remaining: 0
            }))
        );
        assert_eq!(
            get_string(&mut bytes(&[0x81, 0x80, 0x02]), Len::Compact, AT),
            Err(AT.err(Malformed::StringTooLong { len: 0x8000 }))
        );
        assert_eq!(
            get_string(&mut bytes(&[3, 0xc3, 0x28]), Len::Compact, AT),
            Err(AT.err(Malformed::InvalidUtf8))
        );
        assert_eq!(
            get_string(&mut bytes(&[0, 2, b'o', b'k']), Len::Int16, AT),
            Ok("ok".to_owned())
        );
    }

    /// An array's count is checked against the bytes left times its smallest element
    /// before anything is allocated.
    #[test]
    fn array_counts_are_bounded_by_the_bytes_left() {
        let mut b = bytes(&[3, 0, 0, 0, 1, 0, 0, 0, 2]);
        let got = get_array(&mut b, Len::Compact, 4, AT, |b| get_i32(b, AT));
        assert_eq!(got, Ok(vec![1, 2]));
        let mut b = bytes(&[4, 0, 0, 0, 1, 0, 0, 0, 2]);
        let got = get_array(&mut b, Len::Compact, 4, AT, |b| get_i32(b, AT));
        assert_eq!(
            got,
            Err(AT.err(Malformed::LengthBeyondRemaining {
                len: 3,
                needed: 12,
                remaining: 8
            }))
        );
        let mut b = bytes(&[0x7f, 0xff, 0xff, 0xff]);
        let got = get_array(&mut b, Len::Int32, 1, AT, |b| get_i8(b, AT));
        assert_eq!(
            got,
            Err(AT.err(Malformed::LengthBeyondRemaining {
                len: 0x7fff_ffff,
                needed: 0x7fff_ffff,
                remaining: 0
            }))
        );
    }

    /// Unknown tagged fields are written between known ones in tag order.
    #[test]
    fn raw_tags_interleave() {
        let raw = [1, 4, 9].map(|tag| RawTaggedField {
            tag,
            data: Bytes::from_static(b"z"),
        });
        let mut buf = BytesMut::new();
        let mut tags = RawTags::new(&raw);
        tags.put_below(&mut buf, 3);
        put_tagged(&mut buf, 3, 1, |buf| buf.put_u8(b'k'));
        tags.put_below(&mut buf, 5);
        tags.put_rest(&mut buf);
        assert_eq!(&buf[..], b"\x01\x01z\x03\x01k\x04\x01z\x09\x01z");
        assert_eq!(check_raw_tags("R", &raw, &[3]), Ok(()));
        assert_eq!(
            check_raw_tags("R", &raw, &[4]),
            Err(EncodeError::UnknownTagDefined {
                record: "R",
                tag: 4
            })
        );
    }

    /// A lying tagged-field count or size fails on the missing bytes.
    #[test]
    fn tagged_section_refusals() {
        let none = |_: u32, _: &mut Bytes| Ok(None);
        let at = At("R", "(tagged fields)");
        assert_eq!(
            get_tagged_fields(&mut bytes(&[0xff, 0xff, 0xff, 0xff, 0x0f]), "R", none),
            Err(at.err(Malformed::Truncated {
                needed: 1,
                remaining: 0
            }))
        );
        assert_eq!(
            get_tagged_fields(&mut bytes(&[1, 7, 9, 0]), "R", none),
            Err(at.err(Malformed::LengthBeyondRemaining {
                len: 9,
                needed: 9,
                remaining: 1
            }))
        );
        let got = get_tagged_fields(&mut bytes(&[2, 7, 1, 0, 44, 0]), "R", none);
        assert!(got.is_ok(), "{got:?}");
    }
}
