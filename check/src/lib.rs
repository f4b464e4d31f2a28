//! Checks of what corum's clients saw.
//!
//! # Model
//!
//! A recorder (the load generator, `corum chaos`) writes a *history*: every client operation
//! with its invocation and completion times and what the client was told, or that it does not
//! know ([`history`]: JSON lines). The checks are pure functions of that file:
//!
//! | check | module | what fails it |
//! |---|---|---|
//! | linearizability, per key | [`search`] (the search), [`reduce`] (unknown outcomes first), [`model`] (the specifications), [`keys`] (the split) | no order of the key's operations fits both real time and the key's sequential specification |
//! | no acknowledged write lost | [`lost_writes`] | the final read of a key does not show a write acknowledged before it, and nothing after that write can explain what it saw |
//! | no broker epoch reused | [`epochs`] | two broker incarnations given one epoch; an epoch going back |
//! | observed offsets never go back | [`offsets`] | an observer shows a lower metadata offset than before |
//!
//! A key that is not linearizable is reported with the smallest failing sub-history the
//! [`shrink`]er finds. Every search is bounded ([`search::Limits`], [`CheckLimits`]): a key the
//! budget does not decide is reported *undecided*, never guessed. [`check`] runs everything
//! and returns a [`Report`] whose `Display` is what a person reads; [`synth`] makes
//! linearizable histories for tests and benches.
//!
//! Nothing here depends on corum's own crates: the specifications are written from what
//! Kafka's admin API promises, not from corum's code.
//!
//! # Why not a crate
//!
//! The Rust crates that test linearizability (stateright's `LinearizabilityTester`, the
//! loom-based ones) record histories of threads inside one process as they run, without
//! times and without operations of unknown outcome; Porcupine, the checker this follows, is
//! Go. A history of real clients across processes needs intervals, unknown outcomes and a
//! file format, so the search is written here (with its rewrites, about 500 lines besides
//! tests) and tested against a brute-force one.

pub mod epochs;
pub mod error;
pub mod history;
pub mod keys;
pub mod lost_writes;
pub mod model;
pub mod offsets;
pub mod reduce;
pub mod report;
pub mod search;
pub mod shrink;
pub mod synth;

pub use error::{Error, Result};
pub use history::{
    History, Located, OffsetObservation, Op, OpRecord, Outcome, Record, Registration, Resource,
    ResourceType, RunInfo,
};
pub use report::{check, CheckLimits, Conclusion, KeyViolation, LostWrite, Report, UndecidedKey};
pub use search::{Exhausted, Limits, Verdict};
