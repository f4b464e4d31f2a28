//! Typed, zero-copy views of a frame's payload.
//!
//! Two ways in, and only these two:
//!
//! - [`FrameView::access`] — **checked**. Runs rkyv's `bytecheck` validation over the payload for
//!   the record type `T` and returns `&T::Archived` borrowed from the frame's buffer. Use it where
//!   bytes enter the process from somewhere the engine does not control: the network, a file
//!   written by another program, a snapshot load.
//! - [`FrameView::access_trusted`] — **unchecked**, `unsafe`. The single place in the code base
//!   where an archived payload is read without `bytecheck`.
//!
//! # Why `access_trusted` is sound when its contract is met
//!
//! rkyv's unchecked access is undefined behaviour unless the bytes are a valid archive of `T`
//! (every relative pointer in bounds, every enum tag known, every `char`/`bool` valid). The
//! contract is that the frame's payload was, at the time it was *written into this log by this
//! engine*, a valid archive of `T`: either produced by rkyv's serializer for `T` on the leader,
//! or validated with [`FrameView::access`] when it arrived from the network before
//! `append_frame`. Any `FrameView` only exists after [`super::decode_frame`] recomputed the
//! CRC-32C over the header and the payload and found it equal to the stored one, so the bytes
//! being read back are the bytes that were written, except for corruption that happens to keep
//! the CRC (a 2^-32 chance per damaged frame for random damage; CRC-32C detects every burst of up
//! to 32 bits outright). The payload is 8-byte aligned because frames start on 8-byte
//! boundaries inside 4 KiB-aligned buffers; that is asserted here on every call, because a
//! misaligned root would be undefined behaviour regardless of the bytes.
//!
//! Callers that cannot state that contract (a tool reading an unknown directory, tests of
//! damaged data) use the checked path.

use rkyv::bytecheck::CheckBytes;
use rkyv::{Archive, Portable};

use super::FrameView;
use crate::error::FrameError;

/// The bound rkyv's checked access needs on an archived type, named once.
pub trait ArchivedCheck:
    Portable + for<'a> CheckBytes<rkyv::api::high::HighValidator<'a, rkyv::rancor::Error>>
{
}

impl<T> ArchivedCheck for T where
    T: Portable + for<'a> CheckBytes<rkyv::api::high::HighValidator<'a, rkyv::rancor::Error>>
{
}

impl<'a> FrameView<'a> {
    /// Validate the payload as an archived `T` (rkyv `bytecheck`) and return a view into it.
    pub fn access<T>(&self) -> Result<&'a T::Archived, FrameError>
    where
        T: Archive,
        T::Archived: ArchivedCheck,
    {
        rkyv::access::<T::Archived, rkyv::rancor::Error>(self.payload()).map_err(|e| {
            FrameError::PayloadInvalid {
                reason: e.to_string(),
            }
        })
    }

    /// The payload as an archived `T`, without `bytecheck`.
    ///
    /// # Safety
    ///
    /// The payload must have been a valid archive of `T` when this engine wrote the frame:
    /// serialized from a `T` by rkyv on the leader, or checked with [`FrameView::access`] when
    /// it arrived from the network before `append_frame`. Every `FrameView` exists only after
    /// its CRC-32C over header and payload was recomputed and matched, which ties "the bytes
    /// that were written" to "the bytes read now" (undetected damage needs a CRC collision:
    /// 2^-32 for random damage, impossible for bursts up to 32 bits). Alignment and length of
    /// the root are asserted here, since a misaligned root is undefined behaviour regardless
    /// of the bytes. Anything without that provenance uses the checked [`FrameView::access`].
    pub unsafe fn access_trusted<T>(&self) -> &'a T::Archived
    where
        T: Archive,
        T::Archived: Portable,
    {
        let payload = self.payload();
        assert_eq!(
            payload.as_ptr() as usize % std::mem::align_of::<T::Archived>(),
            0,
            "frame payloads are 8-byte aligned; a misaligned root is never accessed"
        );
        assert!(
            payload.len() >= std::mem::size_of::<T::Archived>(),
            "payload shorter than its root object"
        );
        // SAFETY: the caller guarantees the bytes were a valid archive of `T` when written and
        // the checksum matched on read; alignment and length are asserted above.
        unsafe { rkyv::access_unchecked::<T::Archived>(payload) }
    }
}
