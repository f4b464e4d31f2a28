//! A global allocator that maps allocations of 1 GiB or more with `MAP_NORESERVE`.
//!
//! The codec crate's array decoders size a vector from a length read off the wire before
//! reading any element (`Vec::with_capacity(n)`, `n` up to `i32::MAX`). A few bytes claiming
//! two billion elements then ask for hundreds of gigabytes; the system allocator refuses, and
//! Rust aborts the process on a refused allocation — a crash anyone who can reach the port
//! could cause. With this allocator such a request only reserves address space (Linux does not
//! count a `MAP_NORESERVE` mapping against memory), the decoder then fails on the missing
//! bytes, and the mapping is returned. Nothing is touched, so nothing is used.
//!
//! Smaller allocations go to the system allocator unchanged. The split is by size alone, so
//! `dealloc` and `realloc` (which receive the allocation's layout) always know which side owns
//! a block. Binaries that decode Kafka bytes install it:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: corum_kafka::alloc::NoReserveLarge = corum_kafka::alloc::NoReserveLarge;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at least this large are mapped without reserving memory.
pub const LARGE_BYTES: usize = 1 << 30;

/// Page alignment of a mapping.
const PAGE_BYTES: usize = 4096;

/// See the module doc.
pub struct NoReserveLarge;

fn is_large(size: usize) -> bool {
    size >= LARGE_BYTES
}

/// Maps `size` bytes of zeroed, unreserved memory; null on failure or an alignment above a
/// page.
unsafe fn map(layout: Layout) -> *mut u8 {
    if layout.align() > PAGE_BYTES {
        return std::ptr::null_mut();
    }
    // SAFETY: an anonymous private mapping at an address the kernel picks.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            layout.size(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

unsafe fn unmap(ptr: *mut u8, size: usize) {
    // SAFETY: `ptr` came from `map` with this size (the layout `dealloc` is given).
    unsafe {
        libc::munmap(ptr.cast(), size);
    }
}

// SAFETY: every block is returned by the side that made it (decided by size), mappings are
// page-aligned and zeroed, and `realloc` copies the smaller of the two sizes.
unsafe impl GlobalAlloc for NoReserveLarge {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size()) {
            unsafe { map(layout) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size()) {
            // Fresh anonymous mappings are zeroed.
            unsafe { map(layout) }
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(layout.size()) {
            unsafe { unmap(ptr, layout.size()) }
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !is_large(layout.size()) && !is_large(new_size) {
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are valid for the smaller size and do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_allocation_only_reserves_address_space() {
        let a = NoReserveLarge;
        // 256 GiB: far above this machine's memory; refused by the system allocator.
        let layout = Layout::from_size_align(256 << 30, 8).unwrap();
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null(), "an unreserved mapping of 256 GiB is refused");
            *p = 7;
            assert_eq!(*p, 7);
            a.dealloc(p, layout);
        }
    }

    #[test]
    fn blocks_move_between_the_two_sides_on_realloc() {
        let a = NoReserveLarge;
        let small = Layout::from_size_align(64, 8).unwrap();
        unsafe {
            let p = a.alloc(small);
            std::ptr::write_bytes(p, 0xab, 64);
            let big = a.realloc(p, small, LARGE_BYTES);
            assert!(!big.is_null());
            assert_eq!(*big.add(63), 0xab);
            let big_layout = Layout::from_size_align(LARGE_BYTES, 8).unwrap();
            let back = a.realloc(big, big_layout, 32);
            assert!(!back.is_null());
            assert_eq!(*back.add(31), 0xab);
            a.dealloc(back, Layout::from_size_align(32, 8).unwrap());
        }
    }
}
