//! Rate-limited log lines: a flood of bad connections must not flood the log.
//!
//! A [`LogLimiter`] lets through at most `per_second` lines per one-second window; the lines it
//! holds back are counted, and the next line let through carries that count
//! (`suppressed=N`), so an operator still sees how many events there were. One limiter per
//! kind of event (a refused connection, a bad frame, ...): a flood of one kind does not hide
//! another. Lock-free (atomics), so a limiter can be a `static` shared by every shard.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Process-wide origin of the limiters' clock.
fn now_ms() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// At most `per_second` lines per second of one kind of event. See the module doc.
#[derive(Debug)]
pub struct LogLimiter {
    per_second: u32,
    /// Start of the current window (ms on the limiters' clock), plus one (0: no window yet).
    window_ms: AtomicU64,
    lines: AtomicU32,
    suppressed: AtomicU64,
}

impl LogLimiter {
    /// A limiter letting through `per_second` lines per second (at least one).
    pub const fn new(per_second: u32) -> LogLimiter {
        LogLimiter {
            per_second: if per_second == 0 { 1 } else { per_second },
            window_ms: AtomicU64::new(0),
            lines: AtomicU32::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether a line may be written now: `Some(n)` with the `n` lines held back since the
    /// last one let through (to be logged with it), or `None` (the event is counted).
    pub fn allow(&self) -> Option<u64> {
        self.allow_at(now_ms())
    }

    fn allow_at(&self, now_ms: u64) -> Option<u64> {
        let window = self.window_ms.load(Ordering::Relaxed);
        if window == 0 || now_ms + 1 >= window + 1000 {
            // A new window; whoever swaps it in resets the count (a race lets a line or two
            // more through, never fewer).
            if self
                .window_ms
                .compare_exchange(window, now_ms + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                self.lines.store(0, Ordering::Relaxed);
            }
        }
        if self.lines.fetch_add(1, Ordering::Relaxed) < self.per_second {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lets_through_per_second_lines_and_counts_the_rest() {
        // Three lines a second: the fourth to tenth events of a second are held back and
        // counted; the first line of the next second carries the count, once.
        let l = LogLimiter::new(3);
        let t0 = 5_000;
        let let_through: Vec<_> = (0..10).map(|i| l.allow_at(t0 + i)).collect();
        assert_eq!(
            let_through,
            [
                Some(0),
                Some(0),
                Some(0),
                None,
                None,
                None,
                None,
                None,
                None,
                None
            ]
        );
        assert_eq!(l.allow_at(t0 + 999), None);
        assert_eq!(l.allow_at(t0 + 1_000), Some(8));
        assert_eq!(l.allow_at(t0 + 1_001), Some(0));
        // A quiet minute, then events again: a fresh window.
        assert_eq!(l.allow_at(t0 + 60_000), Some(0));
    }
}
