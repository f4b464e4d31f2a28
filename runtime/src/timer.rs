//! Timers for shard code: glommio's one-shot timers, re-exported so that shard code names one
//! crate for its runtime.
//!
//! Time is read in the drivers and handed to the pure cores as an explicit `Instant` (see
//! `RaftCore::tick(now)`); nothing below the drivers reads a clock.

pub use glommio::timer::{sleep, timeout, Timer};
