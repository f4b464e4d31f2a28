//! Capped exponential backoff with seeded jitter, for reconnecting outbound connections. Pure.
//!
//! Attempt `n` (from 0) waits `min(cap, base * 2^n)`, jittered to a uniform value in
//! `[d/2, d]` ("equal jitter") so that peers restarting together don't reconnect in lockstep.
//! The jitter comes from a seeded ChaCha generator so tests and the simulator reproduce it.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};

/// Backoff settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackoffConfig {
    /// The first delay.
    pub base: Duration,
    /// The largest delay.
    pub cap: Duration,
    /// Jitter seed.
    pub seed: u64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            base: Duration::from_millis(10),
            cap: Duration::from_secs(2),
            seed: 0,
        }
    }
}

impl BackoffConfig {
    /// Checks `0 < base <= cap`.
    pub fn validate(&self) -> Result<()> {
        if self.base.is_zero() || self.base > self.cap {
            return Err(Error::Config {
                field: "backoff",
                reason: format!(
                    "need 0 < base <= cap, got {:?} and {:?}",
                    self.base, self.cap
                ),
            });
        }
        Ok(())
    }
}

/// The backoff state of one outbound peer.
#[derive(Clone, Debug)]
pub struct Backoff {
    config: BackoffConfig,
    attempt: u32,
    rng: ChaCha8Rng,
}

impl Backoff {
    /// A fresh backoff; panics if the config is invalid (validate it first).
    pub fn new(config: BackoffConfig) -> Backoff {
        config
            .validate()
            .expect("backoff config validated by the caller");
        Backoff {
            config,
            attempt: 0,
            rng: ChaCha8Rng::seed_from_u64(config.seed),
        }
    }

    /// The un-jittered delay of the current attempt: `min(cap, base * 2^attempt)`.
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(31)).unwrap_or(u32::MAX);
        self.config
            .base
            .checked_mul(factor)
            .map_or(self.config.cap, |d| d.min(self.config.cap))
    }

    /// The delay before the next attempt; advances the attempt counter.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        let half = ceiling / 2;
        let jitter_ns = self.rng.gen_range(0..=(ceiling - half).as_nanos() as u64);
        half + Duration::from_nanos(jitter_ns)
    }

    /// Failed attempts since the last success.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Call after a successful connection: the next failure starts from `base` again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(base_ms: u64, cap_ms: u64, seed: u64) -> BackoffConfig {
        BackoffConfig {
            base: Duration::from_millis(base_ms),
            cap: Duration::from_millis(cap_ms),
            seed,
        }
    }

    #[test]
    fn grows_doubling_up_to_the_cap_within_jitter_bounds() {
        // Delays double from base, stop at the cap, and always lie in [ceiling/2, ceiling].
        let mut b = Backoff::new(cfg(10, 100, 7));
        let ceilings: Vec<u64> = (0..8)
            .map(|_| {
                let c = b.ceiling();
                let d = b.next_delay();
                assert!(d >= c / 2 && d <= c, "{d:?} vs {c:?}");
                c.as_millis() as u64
            })
            .collect();
        assert_eq!(ceilings, vec![10, 20, 40, 80, 100, 100, 100, 100]);
        assert_eq!(b.attempts(), 8);
        b.reset();
        assert_eq!(b.ceiling(), Duration::from_millis(10));
    }

    #[test]
    fn same_seed_same_delays() {
        // The jitter is reproducible from the seed and differs across seeds.
        let run = |seed| {
            let mut b = Backoff::new(cfg(10, 1000, seed));
            (0..6).map(|_| b.next_delay()).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn huge_attempt_counts_saturate_at_the_cap() {
        // Many failures never overflow; the delay stays at most the cap.
        let mut b = Backoff::new(cfg(1, 50, 0));
        for _ in 0..200 {
            assert!(b.next_delay() <= Duration::from_millis(50));
        }
        assert_eq!(b.ceiling(), Duration::from_millis(50));
    }

    #[test]
    fn invalid_configs_are_refused() {
        // A zero base or a base above the cap is a config error.
        assert!(cfg(0, 10, 0).validate().is_err());
        assert!(cfg(20, 10, 0).validate().is_err());
        assert!(cfg(10, 10, 0).validate().is_ok());
    }
}
