//! Messages on the wire: rkyv archives inside frames, validated once where they enter.
//!
//! [`WireMessage`] is the bound every message type meets (derive `rkyv::Archive` and
//! `rkyv::Serialize`; rkyv's `bytecheck` derives `CheckBytes` for the archived form).
//! [`encode_frame`] serialises a message straight after a reserved header in one aligned buffer,
//! so the frame goes out without a copy. [`Validated::new`] runs rkyv's validator over received
//! bytes exactly once; afterwards [`Validated::get`] hands out `&Archived<T>` without checking
//! again. The single `access_unchecked` of the crate lives in `Validated::get`, and is only
//! reachable through a value built by `Validated::new`.

use std::fmt;
use std::marker::PhantomData;

use rkyv::api::high::{HighSerializer, HighValidator};
use rkyv::bytecheck::CheckBytes;
use rkyv::rancor;
use rkyv::ser::allocator::ArenaHandle;
use rkyv::util::AlignedVec;

use crate::error::{Error, Result};
use crate::frame::{self, HEADER_BYTES};

/// A type that can travel in a frame: serialisable with rkyv, with a checkable archived form.
/// Implemented for every type that meets the bounds.
pub trait WireMessage:
    rkyv::Archive<Archived: for<'a> CheckBytes<HighValidator<'a, rancor::Error>>>
    + for<'a> rkyv::Serialize<HighSerializer<AlignedVec, ArenaHandle<'a>, rancor::Error>>
{
}

impl<T> WireMessage for T where
    T: rkyv::Archive<Archived: for<'a> CheckBytes<HighValidator<'a, rancor::Error>>>
        + for<'a> rkyv::Serialize<HighSerializer<AlignedVec, ArenaHandle<'a>, rancor::Error>>
{
}

/// Serialises `value` as one frame into `buf` (cleared first): header, archive, padding.
///
/// The archive is written directly after the 16-byte header space; since the buffer is 16-byte
/// aligned and the header is 16 bytes, the archive's alignment is the same as if it started the
/// buffer. Returns the payload length.
pub fn encode_frame<T: WireMessage>(
    value: &T,
    buf: &mut AlignedVec,
    payload_bytes_max: u32,
) -> Result<usize> {
    buf.clear();
    buf.resize(HEADER_BYTES, 0);
    let taken = std::mem::take(buf);
    *buf = rkyv::api::high::to_bytes_in::<_, rancor::Error>(value, taken).map_err(|e| {
        Error::Encode {
            reason: e.to_string(),
        }
    })?;
    let payload_bytes = buf.len() - HEADER_BYTES;
    if payload_bytes > payload_bytes_max as usize {
        return Err(Error::MessageTooLarge {
            payload_bytes,
            payload_bytes_max,
        });
    }
    let (header, payload) = buf.as_mut_slice().split_at_mut(HEADER_BYTES);
    frame::write_header(header, payload);
    buf.resize(buf.len() + frame::padding_bytes(payload_bytes), 0);
    Ok(payload_bytes)
}

/// Received bytes that passed rkyv validation as an archived `T`. Owns its aligned buffer.
pub struct Validated<T: WireMessage> {
    bytes: AlignedVec,
    _type: PhantomData<fn() -> T>,
}

impl<T: WireMessage> Validated<T> {
    /// Validates `bytes` (exactly the archive, no frame header or padding) as an archived `T`.
    pub fn new(bytes: AlignedVec) -> Result<Self> {
        rkyv::access::<T::Archived, rancor::Error>(&bytes).map_err(|e| Error::Validation {
            reason: e.to_string(),
        })?;
        Ok(Validated {
            bytes,
            _type: PhantomData,
        })
    }

    /// The archived value, without re-validating.
    pub fn get(&self) -> &T::Archived {
        // SAFETY: `self.bytes` passed `rkyv::access::<T::Archived, _>` in `Validated::new`, the
        // only constructor, and is never mutated afterwards; the buffer keeps its address and
        // alignment while `self` lives.
        unsafe { rkyv::access_unchecked::<T::Archived>(&self.bytes) }
    }

    /// The validated archive bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Gives the buffer back (e.g. to reuse its allocation).
    pub fn into_bytes(self) -> AlignedVec {
        self.bytes
    }
}

impl<T: WireMessage> std::ops::Deref for Validated<T> {
    type Target = T::Archived;

    fn deref(&self) -> &T::Archived {
        self.get()
    }
}

impl<T: WireMessage> fmt::Debug for Validated<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Validated")
            .field("type", &std::any::type_name::<T>())
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// Decodes one whole frame from `frame_bytes` (checksum included), copies its payload into an
/// aligned buffer and validates it: what a receiver does, without a socket. Bad frames come
/// back as [`Error::Validation`] carrying the frame error's text.
pub fn decode_frame<T: WireMessage>(
    frame_bytes: &[u8],
    payload_bytes_max: u32,
) -> Result<Validated<T>> {
    let f = frame::decode(frame_bytes, payload_bytes_max).map_err(|e| Error::Validation {
        reason: e.to_string(),
    })?;
    let mut bytes = AlignedVec::with_capacity(f.payload.len());
    bytes.extend_from_slice(f.payload);
    Validated::new(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, PartialEq, Clone)]
    #[rkyv(derive(Debug))]
    struct Ping {
        id: u64,
        name: String,
        items: Vec<u32>,
    }

    #[test]
    fn message_round_trips_through_a_frame() {
        // A message encoded as a frame decodes, validates and reads back field by field.
        let msg = Ping {
            id: 7,
            name: "seven".into(),
            items: vec![1, 2, 3],
        };
        let mut buf = AlignedVec::new();
        let n = encode_frame(&msg, &mut buf, 1 << 20).unwrap();
        assert_eq!(buf.len(), HEADER_BYTES + frame::body_bytes(n));
        let v = decode_frame::<Ping>(&buf, 1 << 20).unwrap();
        assert_eq!(v.id, 7);
        assert_eq!(v.name.as_str(), "seven");
        assert_eq!(
            v.items.iter().map(|x| x.to_native()).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        let back: Ping = rkyv::deserialize::<Ping, rancor::Error>(v.get()).unwrap();
        assert_eq!(back, msg);
    }

    #[test]
    fn oversized_message_is_refused_on_encode() {
        // A sender never emits a frame its own limit forbids.
        let msg = Ping {
            id: 1,
            name: "x".repeat(100),
            items: vec![],
        };
        let mut buf = AlignedVec::new();
        assert!(matches!(
            encode_frame(&msg, &mut buf, 16),
            Err(Error::MessageTooLarge { .. })
        ));
    }

    #[test]
    fn wrong_type_payload_fails_validation() {
        // Bytes with a valid checksum but not a valid archive of the type are rejected.
        let mut buf = AlignedVec::new();
        encode_frame(&0xffff_ffff_u32, &mut buf, 100).unwrap();
        // A 4-byte u32 archive is too short to be a Ping.
        assert!(matches!(
            decode_frame::<Ping>(&buf, 100),
            Err(Error::Validation { .. })
        ));
    }

    proptest! {
        #[test]
        fn random_payloads_never_panic_validation(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            // Validation of arbitrary bytes returns an error or a readable value, never panics.
            let mut v = AlignedVec::new();
            v.extend_from_slice(&bytes);
            if let Ok(p) = Validated::<Ping>::new(v) {
                let _ = p.name.len() + p.items.len();
            }
        }
    }
}
