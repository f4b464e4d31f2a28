//! Typed, zero-copy views of a frame's payload.
//!
//! [`FrameView::access`] runs rkyv's `bytecheck` validation over the payload for the record
//! type `T` and returns `&T::Archived` borrowed from the frame's buffer. It is the only way in:
//! the engine has no unchecked access.

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
}
