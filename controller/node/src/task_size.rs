//! Test support: the size of the futures every request allocates, named through the
//! functions that make them. glibc serves an allocation of at most
//! [`GLIBC_SMALL_MAX_BYTES`] from its per-thread cache and small bins; a larger one first
//! consolidates every freed small chunk (docs/PERFORMANCE.md, "Every request's task").

/// The largest request glibc serves as a small chunk (a chunk under 1 KiB).
const GLIBC_SMALL_MAX_BYTES: usize = 1_000;

/// What a glommio task adds to its future: its 40-byte header and its schedule closure.
const TASK_HEADER_MAX_BYTES: usize = 64;

/// `F` returns `Fut` when called with `Args` (a tuple): names an `async fn`'s future.
pub(crate) trait Returns<Args, Fut> {}
impl<F, A, B, C, Fut> Returns<(A, B, C), Fut> for F where F: FnOnce(A, B, C) -> Fut {}
impl<F, A, B, C, D, Fut> Returns<(A, B, C, D), Fut> for F where F: FnOnce(A, B, C, D) -> Fut {}
impl<F, A, B, C, D, E, Fut> Returns<(A, B, C, D, E), Fut> for F where F: FnOnce(A, B, C, D, E) -> Fut
{}

/// The size of the future `f` returns.
pub(crate) fn future_size<F, Args, Fut>(_: &F) -> usize
where
    F: Returns<Args, Fut>,
{
    std::mem::size_of::<Fut>()
}

/// Fails unless a future of `size` bytes, as a task or boxed, stays a small allocation.
#[track_caller]
pub(crate) fn assert_small(what: &str, size: usize) {
    assert!(
        size + TASK_HEADER_MAX_BYTES <= GLIBC_SMALL_MAX_BYTES,
        "{what}'s future is {size} bytes: box its large, rare ways"
    );
}
