//! `AlignedBuf`: a growable byte buffer whose start is aligned to [`BLOCK_BYTES`] (4 KiB).
//!
//! Every buffer that travels to or from a `Disk` is one of these, because O_DIRECT needs the
//! memory, the file position and the length aligned to the device block. The same alignment makes
//! every 8-byte aligned frame inside the buffer a valid root for rkyv's zero-copy access.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The block size every O_DIRECT position and length is aligned to.
pub const BLOCK_BYTES: usize = 4096;

/// Round `v` up to a multiple of [`BLOCK_BYTES`].
#[inline]
pub const fn align_up_block(v: u64) -> u64 {
    (v + BLOCK_BYTES as u64 - 1) & !(BLOCK_BYTES as u64 - 1)
}

/// Round `v` down to a multiple of [`BLOCK_BYTES`].
#[inline]
pub const fn align_down_block(v: u64) -> u64 {
    v & !(BLOCK_BYTES as u64 - 1)
}

/// A heap buffer aligned to 4 KiB with `Vec`-like length and capacity.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
}

// SAFETY: `AlignedBuf` owns its allocation exclusively, like `Vec<u8>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only give out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// An empty buffer that can hold `capacity` bytes before growing.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut buf = Self {
            ptr: NonNull::dangling(),
            len: 0,
            capacity: 0,
        };
        buf.reserve(capacity);
        buf
    }

    /// A buffer of `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        let mut buf = Self::with_capacity(len);
        buf.resize(len, 0);
        buf
    }

    /// A copy of `bytes` in an aligned buffer.
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut buf = Self::with_capacity(bytes.len());
        buf.extend_from_slice(bytes);
        buf
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Make room for at least `additional` more bytes.
    pub fn reserve(&mut self, additional: usize) {
        let needed = self
            .len
            .checked_add(additional)
            .expect("buffer length overflows usize");
        if needed <= self.capacity {
            return;
        }
        let new_capacity =
            align_up_block(needed.max(self.capacity * 2).max(BLOCK_BYTES) as u64) as usize;
        let layout =
            Layout::from_size_align(new_capacity, BLOCK_BYTES).expect("capacity fits a layout");
        let new_ptr = if self.capacity == 0 {
            // SAFETY: the layout has a non-zero size.
            unsafe { alloc::alloc(layout) }
        } else {
            let old = Layout::from_size_align(self.capacity, BLOCK_BYTES)
                .expect("old capacity was a valid layout");
            // SAFETY: `ptr` was allocated with `old`, and the new size is non-zero.
            unsafe { alloc::realloc(self.ptr.as_ptr(), old, new_capacity) }
        };
        self.ptr = NonNull::new(new_ptr).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        self.capacity = new_capacity;
    }

    /// Append `bytes`.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len());
        // SAFETY: capacity covers `len + bytes.len()`; the regions cannot overlap because
        // `bytes` is borrowed immutably while `self` is borrowed mutably.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ptr.as_ptr().add(self.len),
                bytes.len(),
            )
        };
        self.len += bytes.len();
    }

    /// Grow or shrink to `new_len`, filling new bytes with `value`.
    pub fn resize(&mut self, new_len: usize, value: u8) {
        if new_len > self.len {
            self.reserve(new_len - self.len);
            // SAFETY: capacity covers `new_len`.
            unsafe {
                std::ptr::write_bytes(self.ptr.as_ptr().add(self.len), value, new_len - self.len)
            };
        }
        self.len = new_len;
    }

    /// Shorten to `new_len` (no effect if already shorter).
    pub fn truncate(&mut self, new_len: usize) {
        self.len = self.len.min(new_len);
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.capacity > 0 {
            let layout = Layout::from_size_align(self.capacity, BLOCK_BYTES)
                .expect("capacity was a valid layout");
            // SAFETY: `ptr` was allocated with this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` bytes from `ptr` are initialised (dangling-but-aligned when empty).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        Self::from_slice(self)
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

impl PartialEq for AlignedBuf {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_keeps_alignment_and_contents() {
        // Proves that growing the buffer keeps the bytes and the 4 KiB alignment.
        let mut b = AlignedBuf::with_capacity(10);
        for i in 0..20_000u32 {
            b.extend_from_slice(&i.to_le_bytes());
            assert_eq!(b.as_ptr() as usize % BLOCK_BYTES, 0);
        }
        assert_eq!(b.len(), 80_000);
        assert_eq!(&b[79_996..], &19_999u32.to_le_bytes());
        b.resize(80_004, 7);
        assert_eq!(&b[80_000..], &[7; 4]);
        b.truncate(4);
        assert_eq!(&b[..], &0u32.to_le_bytes());
        assert_eq!(align_up_block(1), 4096);
        assert_eq!(align_down_block(4097), 4096);
        assert!(AlignedBuf::with_capacity(0).is_empty());
    }
}
