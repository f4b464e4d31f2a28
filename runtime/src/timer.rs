//! Timers for shard code: glommio's one-shot timers re-exported, and a periodic [`Ticker`].
//!
//! Time is read here, in the driver, and handed to the pure cores as an explicit `Instant`
//! (see `RaftCore::tick(now)`): a ticker's `tick()` returns the instant it fired at.

use std::future::Future;
use std::time::{Duration, Instant};

pub use glommio::timer::{sleep, timeout, Timer};

use crate::shutdown::ShutdownSignal;

/// Fires every `period`, measured from a fixed schedule so that slow ticks don't drift.
/// When a tick is late by more than a period, the missed ones are skipped (not replayed in a
/// burst) and counted.
#[derive(Debug)]
pub struct Ticker {
    period: Duration,
    next: Instant,
    missed: u64,
}

impl Ticker {
    /// A ticker whose first tick is one `period` from now. Panics on a zero period (a busy loop
    /// is a programming error).
    pub fn new(period: Duration) -> Ticker {
        assert!(!period.is_zero(), "a ticker period must be positive");
        Ticker {
            period,
            next: Instant::now() + period,
            missed: 0,
        }
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Ticks skipped so far because the shard was too busy to take them.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// Waits for the next tick and returns the time it fired at.
    pub async fn tick(&mut self) -> Instant {
        let now = Instant::now();
        if self.next > now {
            sleep(self.next - now).await;
        }
        let fired = Instant::now();
        let (next, skipped) = next_deadline(self.next, self.period, fired);
        self.next = next;
        self.missed += skipped;
        fired
    }
}

/// The next deadline after `fired` on the schedule `deadline + k * period`, and how many
/// deadlines were skipped. Pure, for testing the schedule without a clock.
pub fn next_deadline(deadline: Instant, period: Duration, fired: Instant) -> (Instant, u64) {
    let late = fired.saturating_duration_since(deadline);
    let skipped = (late.as_nanos() / period.as_nanos()) as u64;
    let next = deadline + period * u32::try_from(skipped + 1).unwrap_or(u32::MAX);
    (next, skipped)
}

/// Runs `f` every `period` until `shutdown` fires; returns the number of ticks run. `f` gets the
/// tick's time. Spawn it on the queue it belongs to (ticks on the latency queue).
pub async fn run_periodic<F, Fut>(period: Duration, shutdown: ShutdownSignal, mut f: F) -> u64
where
    F: FnMut(Instant) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut ticker = Ticker::new(period);
    let mut ticks = 0;
    while let Some(now) = shutdown.run_until(ticker.tick()).await {
        f(now).await;
        ticks += 1;
    }
    ticks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_skips_missed_ticks() {
        // A tick taken on time schedules the next period; a late one skips whole periods.
        let t0 = Instant::now();
        let p = Duration::from_millis(10);
        assert_eq!(next_deadline(t0, p, t0), (t0 + p, 0));
        assert_eq!(
            next_deadline(t0, p, t0 + Duration::from_millis(3)),
            (t0 + p, 0)
        );
        assert_eq!(
            next_deadline(t0, p, t0 + Duration::from_millis(25)),
            (t0 + 3 * p, 2)
        );
        // Firing early (clock jitter) never moves the schedule backwards.
        assert_eq!(next_deadline(t0 + p, p, t0), (t0 + 2 * p, 0));
    }
}
