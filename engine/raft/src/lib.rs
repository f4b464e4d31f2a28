//! The sans-IO Raft core of corum (KIP-595 semantics with KIP-996 pre-vote and KIP-853 dynamic
//! voters) and the deterministic cluster simulator that tests it.
//!
//! # Model
//!
//! [`RaftCore`] is a deterministic state machine. Its driver (the node wiring) feeds it inputs —
//! [`RaftCore::tick`] with the time, [`RaftCore::step`] with a message, [`RaftCore::propose`],
//! [`RaftCore::persisted`] after an fsync, [`RaftCore::read_completed`], snapshot events — and
//! after each input drains [`RaftCore::ready`], whose [`Ready`] lists what to persist, send and
//! apply, with the ordering rules in its documentation. The core never does IO, reads a clock
//! or draws unseeded randomness, so [`sim`] can run whole clusters from one seed.
//!
//! The log holds batches with opaque payloads (the engine stores each as one frame); the core
//! keeps their offsets and epochs in memory and payloads of recent batches for pipelined sends.
//! Raft's own records (LeaderChange, VotersRecord, KRaftVersion) are control batches encoded
//! by [`control`]. A follower's side of pull replication (the snapshot download and the pause
//! after a fruitless fetch) lives in [`follower`], shared with the broker-side metadata follower
//! of `corum-client`.

//!
//! # Driver contract (what the node wiring does)
//!
//! 1. Recover: read the quorum-state file, the latest snapshot and the log after it, and build
//!    the core with [`RaftCore::new`] ([`Restore`]; control batches need their payloads, others
//!    may come without and are read back on demand).
//! 2. Feed inputs: [`RaftCore::tick`] every few milliseconds with a monotonic clock,
//!    [`RaftCore::step`] for every decoded [`Message`] ([`Message::decode`] validates the
//!    frame), [`RaftCore::propose`] for each batch the state machine wants appended,
//!    [`RaftCore::persisted`] after each fsync of the log (end offset and epoch of the last
//!    durable batch), [`RaftCore::read_completed`] for each [`LogRead`],
//!    [`RaftCore::snapshot_created`] after writing a snapshot, [`RaftCore::add_voter`] /
//!    [`RaftCore::remove_voter`] / [`RaftCore::resign`] for admin actions.
//! 3. After each input (or a burst of them), drain [`RaftCore::ready`] and carry out each
//!    [`Ready`] in the order its documentation gives: quorum state and snapshot durable before
//!    any message leaves; truncation before the new entries; entries written and fsynced in the
//!    background (messages, including appends to followers, need not wait); apply entries
//!    below the HWM; delete the log below the log start; serve reads.
//!
//! The simulator's driver ([`sim::Cluster`]) follows this contract and is the reference for it.

pub mod config;
pub mod control;
mod core;
pub mod error;
pub mod follower;
mod log;
pub mod message;
pub mod quorum;
pub mod ready;
pub mod sim;
pub mod types;

pub use crate::config::{Config, ConfigField};
pub use crate::core::{RaftCore, ReplicaProgress, Restore, RestoredBatch, Role, Stats, Status};
pub use crate::error::{
    ConfigError, Error, FetchAnswerError, Result, SnapshotChunkError, VoterChangeError,
};
pub use crate::message::Message;
pub use crate::ready::{LogRead, Ready};
pub use crate::types::{
    Batch, Endpoint, Payload, ProposalId, QuorumStateRecord, ReplicaKey, Snapshot, SnapshotId,
    Voter, VoterSet, BATCH_OVERHEAD_BYTES, NO_TIMESTAMP,
};
