//! The Raft state machine: one replica's view of the quorum.
//!
//! # Roles and transitions
//!
//! "Epoch" is KIP-595's name for a term. Every transition that changes the epoch, the known
//! leader or the vote is persisted through [`crate::Ready::quorum_state`] before any message that
//! depends on it leaves. Observers (replicas not in the voter set of their own log) never enter
//! Prospective, Candidate or Leader.
//!
//! | from | event | to |
//! |---|---|---|
//! | any | message with a higher epoch from that epoch's leader (Append, BeginQuorumEpoch, Fetch/Vote response naming it) | Follower(epoch, leader) |
//! | any | other message with a higher epoch (Vote, responses without leader) | Unattached(epoch) |
//! | Unattached, Prospective, Candidate | message from the leader of the same epoch | Follower |
//! | Unattached (voter) | election timeout | Prospective |
//! | Unattached (observer) | timeout | ask a random voter for the leader (stays Unattached) |
//! | Follower (voter) | no message from the leader within `fetch_timeout` (plus a random part of a quarter election timeout), or EndQuorumEpoch (after a delay by rank) | Prospective |
//! | Follower (observer) | no fetch answered within `fetch_timeout` | Unattached (same epoch) |
//! | Prospective | majority of pre-votes granted | Candidate(epoch + 1), vote for self |
//! | Prospective | majority rejected | Prospective, next round after a random backoff |
//! | Prospective | round times out | Prospective, new round |
//! | Candidate | majority of votes granted | Leader; appends LeaderChange, sends BeginQuorumEpoch |
//! | Candidate | election timeout, or backoff after a rejected majority | Prospective |
//! | Leader | check-quorum fails, `resign()`, or its own removal commits | Resigned; sends EndQuorumEpoch |
//! | Leader | message with a higher epoch | Unattached or Follower (as above) |
//! | Resigned | election timeout | Prospective (voter) or Unattached (observer) |
//!
//! A restart begins as Follower of the persisted leader (or Resigned if that leader was this
//! replica: it can never lead the same epoch twice), otherwise Unattached.
//!
//! # Votes
//!
//! A pre-vote (KIP-996) asks for `epoch + 1` without bumping anything; it is granted when the
//! candidate's log is at least as up to date (last epoch, then end offset) and the voter has no
//! live leader. A vote is granted once per epoch to a candidate whose log is at least as up to
//! date. Candidates count only responses from voters of their own voter set (id and directory
//! id).
//!
//! # Commit
//!
//! The leader's HWM is the largest offset durable on a majority of the current voter set (the
//! latest VotersRecord in its log), counting its own log only up to [`RaftCore::persisted`],
//! and it advances only if the entry before it belongs to the current epoch. A follower's HWM is
//! the leader's, capped at the end of the prefix it knows to match the leader. No HWM moves
//! backward.

mod election;
mod membership;
mod replication;
mod snapshot;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use corum_types::{Epoch, LogOffset, NodeId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::Config;
use crate::control::{self, ControlRecord};
use crate::error::{Error, Result, SnapshotChunkError};
use crate::follower::{Backoff, SnapshotDownload};
use crate::log::{IndexedBatch, LogIndex};
use crate::message::{FetchRequest, Message};
use crate::ready::{LogRead, Ready};
use crate::types::{
    Batch, Endpoint, Payload, ProposalId, QuorumStateRecord, ReplicaKey, Snapshot, SnapshotId,
    VoterSet,
};

/// A batch of the durable log handed to [`RaftCore::new`] on restart. Control batches must carry
/// their payload (the voter set is rebuilt from them); others may omit it and are read back
/// through [`Ready::reads`] when needed.
#[derive(Clone, Debug)]
pub struct RestoredBatch {
    pub base_offset: LogOffset,
    pub epoch: Epoch,
    pub record_count: u32,
    pub control: bool,
    /// [`Batch::timestamp_ms`] (the log frame's first timestamp).
    pub timestamp_ms: i64,
    pub payload_bytes: usize,
    pub payload: Option<Payload>,
}

impl From<&Batch> for RestoredBatch {
    fn from(b: &Batch) -> Self {
        Self {
            base_offset: b.base_offset,
            epoch: b.epoch,
            record_count: b.record_count,
            control: b.control,
            timestamp_ms: b.timestamp_ms,
            payload_bytes: b.payload.len(),
            payload: Some(b.payload.clone()),
        }
    }
}

/// What the driver recovered from disk (all of it durable).
#[derive(Clone, Debug)]
pub struct Restore {
    pub quorum_state: QuorumStateRecord,
    pub snapshot: Option<Snapshot>,
    /// The log after the snapshot (or from offset 0), contiguous.
    pub log: Vec<RestoredBatch>,
    /// The voter set before any snapshot or VotersRecord: the static quorum configuration or the
    /// bootstrap checkpoint written by `format`.
    pub bootstrap_voters: VoterSet,
    /// KIP-853's `kraft.version` of the bootstrap: 0 for a static quorum
    /// (`controller.quorum.voters`; the voter set is `bootstrap_voters`: voter changes are
    /// refused, followers send no UpdateVoter, and a VotersRecord is ignored), 1 for a dynamic
    /// one (the bootstrap checkpoint's voters, then every VotersRecord). A static quorum
    /// becomes dynamic at a KRaftVersion record in its log ([`RaftCore::upgrade_kraft_version`])
    /// or a snapshot of version 1, whichever this replica holds.
    pub kraft_version: u16,
}

/// What the control records of the batch at `at` do, on restore and on append alike: a
/// KRaftVersion record above the version in force (`kraft_upgrade`'s, else `kraft_base`)
/// raises it from `at`; a Voters record sets the voter set from `at` once the version in
/// force is 1 or more (a static quorum's voters are its configuration's, see [`Restore`]).
/// Returns whether the voter set changed.
fn apply_control_records(
    records: Vec<ControlRecord>,
    at: LogOffset,
    kraft_base: u16,
    kraft_upgrade: &mut Option<(LogOffset, u16)>,
    voters: &mut Vec<(LogOffset, VoterSet)>,
) -> bool {
    let mut changed = false;
    for r in records {
        let kraft = kraft_upgrade.map_or(kraft_base, |(_, v)| v);
        match r {
            ControlRecord::KRaftVersion(k) if k.version > kraft => {
                *kraft_upgrade = Some((at, k.version));
            }
            ControlRecord::Voters(v) if kraft >= 1 => {
                voters.push((at, v.voters));
                changed = true;
            }
            _ => {}
        }
    }
    changed
}

/// The role of a replica, for status output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Unattached,
    Prospective,
    Candidate,
    Leader,
    Follower,
    Resigned,
}

/// A snapshot of the replica's state, for tools, tests and the simulator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub role: Role,
    pub epoch: Epoch,
    pub leader: Option<NodeId>,
    pub voted_for: Option<NodeId>,
    pub high_watermark: LogOffset,
    pub log_start_offset: LogOffset,
    pub log_end_offset: LogOffset,
    pub durable_end_offset: LogOffset,
    pub voters: Vec<NodeId>,
    pub is_voter: bool,
    /// KIP-853's `kraft.version` in force ([`RaftCore::kraft_version`]).
    pub kraft_version: u16,
}

/// The leader's view of one replica's replication progress (`describe --replication`).
///
/// Times are `now_ms` values of the leader's core (the clock it was ticked and stepped with).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaProgress {
    /// The replica's id and directory id (zero when unknown, e.g. a static voter).
    pub key: ReplicaKey,
    /// In the leader's current voter set.
    pub voter: bool,
    /// The replica's log end offset as the leader knows it: for a voter, the largest end it
    /// acknowledged as durable and matching (what counts toward the HWM; the leader's own
    /// durable end for the leader); for an observer, the offset of its last fetch.
    pub log_end_offset: LogOffset,
    /// When the leader last heard from it (append response or fetch); `None` if never in this
    /// epoch. The leader's own entry reports the core's current time.
    pub last_fetch_ms: Option<u64>,
    /// The last time it was caught up: an append response acknowledging as durable, or a fetch
    /// at, the leader's log end offset at that moment. `None` if never in this epoch.
    pub last_caught_up_ms: Option<u64>,
}

/// Counters for summaries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub pre_vote_rounds: u64,
    pub elections_started: u64,
    pub elections_won: u64,
    pub resignations: u64,
    pub truncations: u64,
    pub snapshots_installed: u64,
    /// Snapshot downloads dropped before their install: a refused chunk, `SnapshotNotFound`,
    /// `NotLeader`, a finished snapshot with an invalid voter set.
    pub snapshot_downloads_abandoned: u64,
    /// Why the last refused chunk was refused.
    pub last_snapshot_chunk_error: Option<SnapshotChunkError>,
    pub reads_requested: u64,
}

#[derive(Debug)]
pub(crate) struct Progress {
    /// The voter, as the voter set names it.
    pub key: ReplicaKey,
    /// The replica that last answered as this voter, with its directory id: the same as `key`
    /// unless `key` names none (a static voter), when it is how the leader learns the
    /// directory id ([`RaftCore::upgrade_kraft_version`]).
    pub answered_as: ReplicaKey,
    /// Next offset to send.
    pub next: LogOffset,
    /// Largest end the follower reported as matching (received).
    pub acked: LogOffset,
    /// Largest end the follower reported durable and matching: counts toward the HWM.
    pub matched: LogOffset,
    /// Ends, payload bytes and send times of appends in flight.
    pub inflight: VecDeque<(LogOffset, usize, u64)>,
    pub inflight_bytes: usize,
    /// One append at a time until the follower's position is known.
    pub probing: bool,
    /// Responses to appends older than this are ignored after a mismatch.
    pub probe_seq: u64,
    pub seq: u64,
    pub reading: bool,
    pub snapshot_needed: bool,
    pub last_sent_ms: u64,
    pub last_sent_hwm: LogOffset,
    /// When an append carrying only a newer high watermark is due (`hwm_linger_ms` after the
    /// high watermark first passed `last_sent_hwm`), unless an append with entries carries it
    /// first.
    pub hwm_due_ms: Option<u64>,
    pub last_heard_ms: u64,
    /// When a response from the follower last arrived (for status; `last_heard_ms` starts at
    /// the epoch start for check-quorum).
    pub last_response_ms: Option<u64>,
    /// When the follower last acknowledged the leader's whole log as durable.
    pub last_caught_up_ms: Option<u64>,
}

impl Progress {
    fn new(key: ReplicaKey, next: LogOffset, now_ms: u64) -> Self {
        Self {
            key,
            answered_as: key,
            next,
            acked: LogOffset::ZERO,
            matched: LogOffset::ZERO,
            inflight: VecDeque::new(),
            inflight_bytes: 0,
            probing: true,
            probe_seq: 0,
            seq: 0,
            reading: false,
            snapshot_needed: false,
            last_sent_ms: 0,
            last_sent_hwm: LogOffset::ZERO,
            hwm_due_ms: None,
            last_heard_ms: now_ms,
            last_response_ms: None,
            last_caught_up_ms: None,
        }
    }
}

#[derive(Debug)]
pub(crate) struct HeldFetch {
    pub req: FetchRequest,
    pub deadline_ms: u64,
    /// An observer's: woken by a newer high watermark only, and not before
    /// `not_before_ms` (see `Config::observer_fetch_interval_ms`).
    pub observer: bool,
    pub not_before_ms: u64,
}

#[derive(Debug)]
pub(crate) struct Fetcher {
    pub key: ReplicaKey,
    pub last_fetch_ms: u64,
    pub fetch_offset: LogOffset,
    /// When a fetch last arrived at the leader's log end.
    pub last_caught_up_ms: Option<u64>,
    /// When the last answer left for it, and the log's end then.
    pub answered: Option<(u64, LogOffset)>,
}

#[derive(Debug)]
pub(crate) struct PendingChange {
    /// Committed once the HWM reaches this.
    pub end: LogOffset,
    pub reply_to: Option<(NodeId, u64)>,
    /// The change removed the leader: resign once it commits.
    pub removes_leader: bool,
}

#[derive(Debug)]
pub(crate) struct LeaderState {
    pub epoch_start: LogOffset,
    pub since_ms: u64,
    pub progress: BTreeMap<NodeId, Progress>,
    pub held_fetches: BTreeMap<NodeId, HeldFetch>,
    pub fetchers: BTreeMap<NodeId, Fetcher>,
    pub pending_change: Option<PendingChange>,
}

/// A snapshot being downloaded from the leader, and when its last request left.
#[derive(Debug)]
pub(crate) struct Download {
    pub chunks: SnapshotDownload,
    pub sent_ms: u64,
}

#[derive(Debug)]
pub(crate) struct FollowerState {
    pub leader: NodeId,
    /// No message from the leader by then: pre-vote (voter) or rediscover (observer).
    pub deadline_ms: u64,
    /// The leader counts as live for pre-votes until then: the fetch timeout after its last
    /// message, without the random part of `deadline_ms` (KIP-996: a voter rejects a pre-vote
    /// only if it heard from the leader within the fetch timeout). Using `deadline_ms` here
    /// would make the first follower to time out wait for the last one.
    pub live_until_ms: u64,
    /// End of the log prefix known to match the leader's.
    pub matched_end: LogOffset,
    /// The leader pushes appends to us; otherwise we pull with Fetch.
    pub pushed: bool,
    pub last_seq: u64,
    pub acked_durable: LogOffset,
    /// An outstanding fetch: its offset, last fetched epoch and send time.
    pub fetch: Option<(LogOffset, Epoch, u64)>,
    pub download: Option<Download>,
    /// Snapshot downloads that ended without a snapshot, in a row, and the pause they call for.
    pub retry: Backoff,
    /// No fetch and no new download before this (the pause after a failed download).
    pub retry_at_ms: u64,
    pub update_voter_at_ms: u64,
    /// The leader resigned (EndQuorumEpoch): it no longer counts as live for pre-votes.
    pub leader_ended: bool,
    /// The high watermark of the leader's last data answer to our fetch (not capped by what
    /// we hold): an observer at or past it is caught up (auto-join).
    pub leader_hwm: Option<LogOffset>,
    /// A message from the leader itself arrived (not just a hint from another replica or the
    /// persisted quorum state): only then does it count as live for pre-votes.
    pub heard: bool,
}

#[derive(Debug)]
pub(crate) enum State {
    Unattached {
        deadline_ms: u64,
    },
    Prospective {
        granted: BTreeSet<NodeId>,
        rejected: BTreeSet<NodeId>,
        deadline_ms: u64,
    },
    Candidate {
        granted: BTreeSet<NodeId>,
        rejected: BTreeSet<NodeId>,
        deadline_ms: u64,
    },
    Leader(Box<LeaderState>),
    Follower(FollowerState),
    Resigned {
        deadline_ms: u64,
    },
}

#[derive(Debug)]
pub(crate) enum ReadPurpose {
    Append {
        peer: NodeId,
        epoch: Epoch,
    },
    Fetch {
        peer: NodeId,
        req: FetchRequest,
        epoch: Epoch,
    },
}

#[derive(Debug, Default)]
pub(crate) struct Outbox {
    pub quorum_dirty: bool,
    pub snapshot: Option<Snapshot>,
    pub truncate_to: Option<LogOffset>,
    pub entries: Vec<Batch>,
    pub messages: Vec<(NodeId, Message)>,
    pub reads: Vec<LogRead>,
}

/// One replica's Raft core. Pure: time comes from [`RaftCore::tick`], randomness from a seeded
/// ChaCha8 generator, and all effects leave through [`RaftCore::ready`].
#[derive(Debug)]
pub struct RaftCore {
    pub(crate) config: Config,
    pub(crate) me: ReplicaKey,
    pub(crate) endpoints: Vec<Endpoint>,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) now_ms: u64,
    /// The driver's wall clock (ms since the Unix epoch) as last given, stamped on the batches
    /// this leader appends; [`crate::NO_TIMESTAMP`] until given.
    pub(crate) wall_clock_ms: i64,
    pub(crate) epoch: Epoch,
    pub(crate) leader: Option<NodeId>,
    pub(crate) voted_for: Option<ReplicaKey>,
    pub(crate) state: State,
    pub(crate) log: LogIndex,
    /// Voter sets by the offset of the record that set them; the first is the base (bootstrap
    /// or snapshot). Truncation pops, compaction folds into the base.
    pub(crate) voters: Vec<(LogOffset, VoterSet)>,
    /// KIP-853's `kraft.version` below the log (the bootstrap's or the snapshot's,
    /// [`Restore::kraft_version`]).
    pub(crate) kraft_base: u16,
    /// A KRaftVersion record in the log raising it: its offset and version. In force once
    /// appended, rolled back by a truncation, folded into `kraft_base` by compaction.
    pub(crate) kraft_upgrade: Option<(LogOffset, u16)>,
    /// How many times the voter set changed since start ([`RaftCore::voter_set_changes`]).
    pub(crate) voter_set_changes: u64,
    pub(crate) durable_end: LogOffset,
    pub(crate) hwm: LogOffset,
    pub(crate) snapshot: Option<Snapshot>,
    pub(crate) out: Outbox,
    pub(crate) reported_hwm: LogOffset,
    pub(crate) reported_log_start: LogOffset,
    pub(crate) reads: BTreeMap<u64, ReadPurpose>,
    pub(crate) next_read_id: u64,
    pub(crate) next_request_id: u64,
    pub(crate) stats: Stats,
    /// Ids the driver routes to `controller.quorum.bootstrap.servers`: an observer without a
    /// leader asks them ([`RaftCore::set_bootstrap_servers`]).
    pub(crate) bootstrap_servers: Vec<NodeId>,
    /// Auto-join's request in flight and when the next may leave ([`Config::auto_join`]).
    pub(crate) join: JoinState,
}

/// An observer's auto-join (KIP-853): one request at a time, spaced by a doubling backoff.
#[derive(Debug)]
pub(crate) struct JoinState {
    /// The request id of the AddVoter or RemoveVoter in flight, and when it left.
    pub outstanding: Option<(u64, u64)>,
    /// No request before this.
    pub next_at_ms: u64,
    /// Refusals in a row: `controller.quorum.retry.backoff.ms`, doubled per refusal, at most
    /// the request timeout.
    pub backoff: Backoff,
    /// The voter-set change count when the leader said the last request committed.
    pub committed_at_change: Option<u64>,
}

impl RaftCore {
    /// Builds the core from what the driver recovered. `seed` drives every random choice.
    pub fn new(
        config: Config,
        me: ReplicaKey,
        endpoints: Vec<Endpoint>,
        restore: Restore,
        seed: u64,
        now_ms: u64,
    ) -> Result<Self> {
        config.validate()?;
        // A controller formatted to join a dynamic quorum (`--no-initial-controllers`), or one
        // of an upgraded static quorum configured without `controller.quorum.voters`, knows
        // its voters from its log or snapshot only (checked below).
        if !restore.bootstrap_voters.is_empty() {
            restore.bootstrap_voters.validate()?;
        }
        let start = restore.snapshot.as_ref().map_or(
            SnapshotId {
                end_offset: LogOffset::ZERO,
                epoch: Epoch::ZERO,
            },
            |s| s.id,
        );
        let kraft_base = restore
            .kraft_version
            .max(restore.snapshot.as_ref().map_or(0, |s| s.kraft_version));
        let base_voters = match &restore.snapshot {
            Some(s) if kraft_base >= 1 => s.voters.clone(),
            _ => restore.bootstrap_voters.clone(),
        };
        let mut log = LogIndex::new(start);
        let mut voters = vec![(start.end_offset, base_voters)];
        let mut kraft_upgrade: Option<(LogOffset, u16)> = None;
        for b in restore.log {
            if b.base_offset != log.end() {
                return Err(Error::RestoreGap {
                    offset: b.base_offset,
                    expected: log.end(),
                });
            }
            if b.record_count == 0 || b.epoch < log.last_epoch() {
                return Err(Error::RestoreGap {
                    offset: b.base_offset,
                    expected: log.end(),
                });
            }
            if b.control {
                let p = b.payload.as_ref().ok_or(Error::MissingControlPayload {
                    offset: b.base_offset,
                })?;
                apply_control_records(
                    control::decode(p)?,
                    b.base_offset,
                    kraft_base,
                    &mut kraft_upgrade,
                    &mut voters,
                );
            }
            log.append_restored(IndexedBatch {
                base: b.base_offset,
                count: b.record_count,
                epoch: b.epoch,
                control: b.control,
                timestamp_ms: b.timestamp_ms,
                bytes: b.payload.as_ref().map_or(b.payload_bytes, |p| p.len()),
                payload: b.payload,
            });
        }
        if kraft_upgrade.is_none() && kraft_base == 0 && voters[0].1.is_empty() {
            return Err(Error::VoterSet(
                "a static quorum (kraft.version 0) needs its voters: none configured, and no \
                 upgrade to kraft.version 1 in the log or snapshot",
            ));
        }
        let qs = restore.quorum_state;
        let end = log.end();
        let join_backoff = Backoff::new(config.retry_backoff_ms, config.request_timeout_ms);
        let mut core = Self {
            config,
            me,
            endpoints,
            rng: ChaCha8Rng::seed_from_u64(seed),
            now_ms,
            wall_clock_ms: crate::NO_TIMESTAMP,
            epoch: qs.epoch.max(log.last_epoch()),
            leader: qs.leader,
            voted_for: qs.voted_for,
            state: State::Unattached {
                deadline_ms: now_ms,
            },
            log,
            voters,
            kraft_base,
            kraft_upgrade,
            voter_set_changes: 0,
            durable_end: end,
            hwm: start.end_offset,
            snapshot: restore.snapshot,
            out: Outbox::default(),
            reported_hwm: start.end_offset,
            reported_log_start: start.end_offset,
            reads: BTreeMap::new(),
            next_read_id: 1,
            next_request_id: 1,
            stats: Stats::default(),
            bootstrap_servers: Vec::new(),
            join: JoinState {
                outstanding: None,
                next_at_ms: 0,
                backoff: join_backoff,
                committed_at_change: None,
            },
        };
        if core.epoch != qs.epoch {
            // The log holds a newer epoch than the quorum state (cannot happen with a driver that
            // follows the contract, but never go backward).
            core.leader = None;
            core.voted_for = None;
            core.out.quorum_dirty = true;
        }
        core.state = match core.leader {
            Some(l) if l == me.id => State::Resigned {
                deadline_ms: core.election_deadline(),
            },
            Some(l) => State::Follower(core.new_follower(l, false)),
            None => State::Unattached {
                deadline_ms: core.election_deadline(),
            },
        };
        Ok(core)
    }

    // ----- inputs -----

    /// Advances the clock (milliseconds, monotonic; a smaller value is ignored) and fires any
    /// timeout that expired.
    pub fn tick(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
        let now = self.now_ms;
        let is_voter = self.can_campaign();
        let expired = match &self.state {
            State::Unattached { deadline_ms }
            | State::Prospective { deadline_ms, .. }
            | State::Candidate { deadline_ms, .. }
            | State::Resigned { deadline_ms } => now >= *deadline_ms,
            State::Follower(f) => now >= f.deadline_ms,
            State::Leader(_) => false,
        };
        match (&mut self.state, expired) {
            (State::Leader(_), _) => self.leader_tick(),
            (State::Follower(_), false) => self.follower_tick(),
            (_, false) => {}
            (State::Prospective { .. }, true) => self.start_prevote_round(),
            (State::Unattached { deadline_ms }, true) if !is_voter => {
                *deadline_ms = now + self.config.request_timeout_ms;
                self.discover_leader();
            }
            (
                State::Unattached { .. }
                | State::Candidate { .. }
                | State::Follower(_)
                | State::Resigned { .. },
                true,
            ) => {
                if is_voter {
                    self.become_prospective();
                } else {
                    let epoch = self.epoch;
                    self.become_unattached(epoch);
                }
            }
        }
    }

    /// The wall clock (ms since the Unix epoch) for the batches this replica appends as leader
    /// from now on ([`Batch::timestamp_ms`]). Only stamped, never compared: elections and
    /// timeouts run on `tick`'s monotonic clock.
    pub fn set_wall_clock_ms(&mut self, ms: i64) {
        self.wall_clock_ms = ms;
    }

    /// Handles a message from `from`. Malformed or stale messages are ignored or answered;
    /// nothing a peer sends can make this panic short of a protocol violation by a leader.
    pub fn step(&mut self, from: NodeId, msg: Message) {
        if from == self.me.id {
            // Replicas never message themselves; a looped-back frame is ignored.
            return;
        }
        match msg {
            Message::Vote(m) => self.on_vote(from, m),
            Message::VoteResponse(m) => self.on_vote_response(from, m),
            Message::BeginQuorumEpoch(m) => self.on_begin_epoch(m),
            Message::EndQuorumEpoch(m) => self.on_end_epoch(m),
            Message::Append(m) => self.on_append(from, m),
            Message::AppendResponse(m) => self.on_append_response(from, m),
            Message::Fetch(m) => self.on_fetch(from, m),
            Message::FetchResponse(m) => self.on_fetch_response(from, m),
            Message::FetchSnapshot(m) => self.on_fetch_snapshot(from, m),
            Message::FetchSnapshotResponse(m) => self.on_fetch_snapshot_response(from, m),
            Message::AddVoter(m) => self.on_add_voter(from, m),
            Message::RemoveVoter(m) => self.on_remove_voter(from, m),
            Message::UpdateVoter(m) => self.on_update_voter(from, m),
            Message::VoterChangeResponse(m) => self.on_join_response(from, m),
            Message::UpgradeKraftVersion(m) => self.on_upgrade_kraft_version(from, m),
        }
    }

    /// Appends a batch of `record_count` records with an opaque payload (leader only). The batch
    /// is in the next [`Ready::entries`].
    pub fn propose(&mut self, payload: Payload, record_count: u32) -> Result<ProposalId> {
        if !matches!(self.state, State::Leader(_)) {
            return Err(Error::NotLeader {
                epoch: self.epoch,
                leader: self.leader_hint(),
            });
        }
        if record_count == 0 {
            return Err(Error::EmptyBatch);
        }
        if payload.len() > self.config.batch_bytes_max {
            return Err(Error::BatchTooLarge {
                bytes: payload.len(),
                max: self.config.batch_bytes_max,
            });
        }
        let base = self.log.end();
        self.leader_append(Batch {
            base_offset: base,
            epoch: self.epoch,
            record_count,
            control: false,
            timestamp_ms: self.wall_clock_ms,
            payload,
        });
        Ok(ProposalId {
            epoch: self.epoch,
            base_offset: base,
            end_offset: self.log.end(),
        })
    }

    /// The driver's log is durable through `end` (exclusive), whose last batch has `epoch`. A
    /// report that no longer matches the log (it was truncated meanwhile) is ignored.
    pub fn persisted(&mut self, end: LogOffset, epoch: Epoch) {
        if end <= self.durable_end || end > self.log.end() {
            return;
        }
        if self.log.epoch_before(end) != Some(epoch) || !self.log.is_boundary(end) {
            return;
        }
        self.durable_end = end;
        match &self.state {
            State::Leader(_) => self.leader_update_hwm(),
            State::Follower(_) => self.follower_ack(),
            _ => {}
        }
    }

    /// Starts a pre-vote now, as if the election timeout expired (voters only; a leader ignores
    /// it). For operators and tests.
    pub fn campaign(&mut self) {
        if self.can_campaign() && !matches!(self.state, State::Leader(_)) {
            self.become_prospective();
        }
    }

    /// Graceful resignation (planned shutdown): the leader stops accepting proposals and sends
    /// EndQuorumEpoch so that its most caught-up voter starts an election at once.
    pub fn resign(&mut self) {
        if matches!(self.state, State::Leader(_)) {
            self.become_resigned();
        }
    }

    /// Collects everything to do since the last call; `None` if nothing.
    pub fn ready(&mut self) -> Option<Ready> {
        if matches!(self.state, State::Leader(_)) {
            self.leader_flush();
        }
        let quorum_state = std::mem::take(&mut self.out.quorum_dirty).then(|| self.quorum_state());
        let high_watermark = (self.hwm > self.reported_hwm).then_some(self.hwm);
        self.reported_hwm = self.hwm;
        let log_start_offset =
            (self.log.start() > self.reported_log_start).then_some(self.log.start());
        self.reported_log_start = self.log.start();
        let ready = Ready {
            quorum_state,
            snapshot: self.out.snapshot.take(),
            truncate_to: self.out.truncate_to.take(),
            entries: std::mem::take(&mut self.out.entries),
            messages: std::mem::take(&mut self.out.messages),
            high_watermark,
            log_start_offset,
            reads: std::mem::take(&mut self.out.reads),
        };
        (!ready.is_empty()).then_some(ready)
    }

    // ----- queries -----

    pub fn id(&self) -> NodeId {
        self.me.id
    }

    pub fn key(&self) -> ReplicaKey {
        self.me
    }

    pub fn role(&self) -> Role {
        match self.state {
            State::Unattached { .. } => Role::Unattached,
            State::Prospective { .. } => Role::Prospective,
            State::Candidate { .. } => Role::Candidate,
            State::Leader(_) => Role::Leader,
            State::Follower(_) => Role::Follower,
            State::Resigned { .. } => Role::Resigned,
        }
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The core's clock: the largest `now_ms` it was ticked with.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    pub fn high_watermark(&self) -> LogOffset {
        self.hwm
    }

    pub fn log_end_offset(&self) -> LogOffset {
        self.log.end()
    }

    pub fn log_start_offset(&self) -> LogOffset {
        self.log.start()
    }

    pub fn durable_end_offset(&self) -> LogOffset {
        self.durable_end
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The leader of the current epoch, if known.
    pub fn leader_hint(&self) -> Option<NodeId> {
        match &self.state {
            State::Leader(_) => Some(self.me.id),
            State::Follower(f) => Some(f.leader),
            _ => None,
        }
    }

    /// Ids the driver routes to the addresses of `controller.quorum.bootstrap.servers`. An
    /// observer without a leader asks every one of them for the leader (KIP-853), besides a
    /// random voter it knows of: a controller that will join a quorum knows no voter yet, and
    /// once it does, the bootstrap servers may have left the quorum.
    pub fn set_bootstrap_servers(&mut self, ids: Vec<NodeId>) {
        self.bootstrap_servers = ids;
    }

    /// How many times [`RaftCore::voter_set`] changed since the core started (a VotersRecord
    /// appended or truncated away, a snapshot installed): a driver compares it with the count
    /// it last acted on instead of comparing sets.
    pub fn voter_set_changes(&self) -> u64 {
        self.voter_set_changes
    }

    /// The voter set in force: the latest VotersRecord in the log (committed or not), else the
    /// snapshot's, else the bootstrap set.
    pub fn voter_set(&self) -> &VoterSet {
        &self
            .voters
            .last()
            .expect("the voter history always has a base entry")
            .1
    }

    /// Every voter set in the log with the offset of the record that set it (the first is the
    /// base from the snapshot or bootstrap).
    pub fn voter_history(&self) -> &[(LogOffset, VoterSet)] {
        &self.voters
    }

    pub fn is_voter(&self) -> bool {
        self.voter_set().contains_key(&self.me)
    }

    /// KIP-853's `kraft.version` in force: the latest KRaftVersion record in the log
    /// (committed or not, like a VotersRecord), else the snapshot's or bootstrap's. 0: a static
    /// quorum; 1: voters change through VotersRecords.
    pub fn kraft_version(&self) -> u16 {
        self.kraft_upgrade.map_or(self.kraft_base, |(_, v)| v)
    }

    /// The `kraft.version` in force at `end_offset` (within the log).
    pub(crate) fn kraft_version_at(&self, end_offset: LogOffset) -> u16 {
        match self.kraft_upgrade {
            Some((at, v)) if at < end_offset => v,
            _ => self.kraft_base,
        }
    }

    /// True if this replica may start an election: it votes in the latest voter set, or in the
    /// set before a VotersRecord not known to be committed. The second case keeps a removed
    /// leader that crashed before the removal committed able to finish the change when the
    /// remaining voters lack the record (it still needs a majority of the *latest* set, so
    /// safety rests on votes alone).
    pub fn can_campaign(&self) -> bool {
        if self.is_voter() {
            return true;
        }
        let n = self.voters.len();
        n > 1 && self.voters[n - 1].0 >= self.hwm && self.voters[n - 2].1.contains_key(&self.me)
    }

    /// The epoch of the entry before `end`, if it is in the log (or is the log start).
    pub fn epoch_before(&self, end: LogOffset) -> Option<Epoch> {
        self.log.epoch_before(end)
    }

    pub fn quorum_state(&self) -> QuorumStateRecord {
        QuorumStateRecord {
            epoch: self.epoch,
            leader: self.leader,
            voted_for: self.voted_for,
        }
    }

    pub fn latest_snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    pub fn status(&self) -> Status {
        Status {
            role: self.role(),
            epoch: self.epoch,
            leader: self.leader_hint(),
            voted_for: self.voted_for.map(|k| k.id),
            high_watermark: self.hwm,
            log_start_offset: self.log.start(),
            log_end_offset: self.log.end(),
            durable_end_offset: self.durable_end,
            voters: self.voter_set().ids().collect(),
            is_voter: self.is_voter(),
            kraft_version: self.kraft_version(),
        }
    }

    /// On the leader, the replication progress of every voter (itself included) and of every
    /// observer that has fetched this epoch, sorted by id; empty on any other role.
    pub fn replica_progress(&self) -> Vec<ReplicaProgress> {
        let State::Leader(ls) = &self.state else {
            return Vec::new();
        };
        let voters = self.voter_set();
        let mut out: BTreeMap<NodeId, ReplicaProgress> = BTreeMap::new();
        for v in voters.voters() {
            let entry = if self.me.is(&v.key) {
                ReplicaProgress {
                    key: self.me,
                    voter: true,
                    log_end_offset: self.durable_end,
                    last_fetch_ms: Some(self.now_ms),
                    last_caught_up_ms: (self.durable_end >= self.log.end()).then_some(self.now_ms),
                }
            } else {
                let p = ls.progress.get(&v.key.id).filter(|p| p.key == v.key);
                ReplicaProgress {
                    // A static voter shows the directory id it answers with.
                    key: p.map_or(v.key, |p| p.answered_as),
                    voter: true,
                    log_end_offset: p.map_or(LogOffset::ZERO, |p| p.matched),
                    last_fetch_ms: p.and_then(|p| p.last_response_ms),
                    last_caught_up_ms: p.and_then(|p| p.last_caught_up_ms),
                }
            };
            out.insert(v.key.id, entry);
        }
        for (id, f) in &ls.fetchers {
            match out.get_mut(id) {
                Some(r) => {
                    if f.key == r.key && r.key != self.me {
                        r.last_fetch_ms = r.last_fetch_ms.max(Some(f.last_fetch_ms));
                        r.last_caught_up_ms = r.last_caught_up_ms.max(f.last_caught_up_ms);
                    }
                }
                None => {
                    out.insert(
                        *id,
                        ReplicaProgress {
                            key: f.key,
                            voter: false,
                            log_end_offset: f.fetch_offset,
                            last_fetch_ms: Some(f.last_fetch_ms),
                            last_caught_up_ms: f.last_caught_up_ms,
                        },
                    );
                }
            }
        }
        out.into_values().collect()
    }

    /// O(n) checks of every internal invariant; the simulator calls it after every step.
    pub fn check_invariants(&self) {
        self.log.check();
        assert!(
            self.durable_end <= self.log.end(),
            "durable end within the log"
        );
        assert!(self.durable_end >= self.log.start() || self.log.end() == self.log.start());
        assert!(self.hwm >= self.log.start(), "the snapshot is committed");
        assert!(self.hwm <= self.log.end(), "HWM within the log");
        assert!(
            self.log.last_epoch() <= self.epoch,
            "no entry from a future epoch"
        );
        assert!(
            self.voters
                .iter()
                .skip(1)
                .collect::<Vec<_>>()
                .windows(2)
                .all(|w| w[0].0 < w[1].0),
            "voter history ordered"
        );
        assert!(self.voters.len() == 1 || self.voters[1].0 >= self.log.start());
        for (at, _) in self.voters.iter().skip(1) {
            assert!(*at < self.log.end(), "voter records are in the log");
        }
        match &self.state {
            State::Leader(ls) => {
                assert_eq!(self.leader, Some(self.me.id));
                assert_eq!(self.voted_for, Some(self.me), "a leader voted for itself");
                assert!(ls.epoch_start < self.log.end());
                if ls.epoch_start >= self.log.start() {
                    assert_eq!(
                        self.log.epoch_before(ls.epoch_start.next()),
                        Some(self.epoch),
                        "LeaderChange starts the epoch"
                    );
                    assert!(self
                        .log
                        .epoch_before(ls.epoch_start)
                        .is_some_and(|e| e < self.epoch));
                }
                for (id, p) in &ls.progress {
                    assert_ne!(*id, self.me.id);
                    assert!(
                        self.voter_set().contains_id(*id),
                        "progress only for voters"
                    );
                    assert!(p.matched <= p.acked.max(p.matched) && p.next <= self.log.end());
                    assert!(p.inflight.len() <= self.config.append_inflight_count_max);
                    assert_eq!(
                        p.inflight_bytes,
                        p.inflight.iter().map(|x| x.1).sum::<usize>()
                    );
                }
            }
            State::Follower(f) => {
                assert_eq!(self.leader, Some(f.leader));
                assert_ne!(f.leader, self.me.id);
                assert!(
                    f.matched_end <= self.log.end() && f.matched_end >= self.hwm.min(f.matched_end)
                );
            }
            State::Candidate { granted, .. } => {
                assert_eq!(self.voted_for, Some(self.me));
                assert!(granted.contains(&self.me.id));
                assert!(self.can_campaign() || self.voters.len() > 1);
            }
            _ => {}
        }
    }

    // ----- shared helpers -----

    pub(crate) fn send(&mut self, to: NodeId, msg: Message) {
        debug_assert_ne!(to, self.me.id, "never message self");
        self.out.messages.push((to, msg));
    }

    pub(crate) fn election_deadline(&mut self) -> u64 {
        let t = self.config.election_timeout_ms;
        self.now_ms + t + self.rng.gen_range(0..t)
    }

    pub(crate) fn backoff_deadline(&mut self) -> u64 {
        self.now_ms + self.rng.gen_range(1..=self.config.election_backoff_max_ms)
    }

    /// When a follower gives up on a silent leader: the fetch timeout plus a random part of a
    /// quarter election timeout, so that followers of a dead leader do not all campaign at
    /// once. A quarter keeps fail-over close to the fetch timeout (the first of two followers
    /// starts on average a twelfth of an election timeout after it) while two followers
    /// still rarely start within one pre-vote round trip of each other (a split vote then
    /// costs an election timeout).
    pub(crate) fn follower_deadline(&mut self) -> u64 {
        let spread = (self.config.election_timeout_ms / 4).max(1);
        self.now_ms + self.config.fetch_timeout_ms + self.rng.gen_range(0..spread)
    }

    pub(crate) fn new_follower(&mut self, leader: NodeId, pushed: bool) -> FollowerState {
        FollowerState {
            leader,
            deadline_ms: self.follower_deadline(),
            live_until_ms: self.now_ms + self.config.fetch_timeout_ms,
            matched_end: self.hwm,
            pushed,
            last_seq: 0,
            acked_durable: LogOffset::ZERO,
            fetch: None,
            download: None,
            retry: Backoff::new(self.config.retry_backoff_ms, self.config.request_timeout_ms),
            retry_at_ms: 0,
            update_voter_at_ms: self.now_ms,
            leader_ended: false,
            heard: pushed,
            leader_hwm: None,
        }
    }

    /// Sets the epoch; a new epoch forgets the vote and the leader. Marks the quorum state for
    /// persistence when anything changed.
    pub(crate) fn set_epoch(&mut self, epoch: Epoch) {
        assert!(epoch >= self.epoch, "epochs never go backward");
        if epoch > self.epoch {
            self.epoch = epoch;
            self.voted_for = None;
            self.leader = None;
            self.out.quorum_dirty = true;
        }
    }

    /// Leaves the current role: a leader forgets its bookkeeping and fails pending requests.
    pub(crate) fn leave_role(&mut self) {
        if let State::Leader(ls) = &mut self.state {
            if let Some(pc) = ls.pending_change.take() {
                if let Some((to, request_id)) = pc.reply_to {
                    self.out.messages.push((
                        to,
                        Message::VoterChangeResponse(crate::message::VoterChangeResponse {
                            request_id,
                            result: Err(crate::error::VoterChangeError::LeadershipLost),
                            leader: None,
                        }),
                    ));
                }
            }
        }
        // Reads in flight for a former role are dropped when they complete.
        self.reads.clear();
    }

    pub(crate) fn become_unattached(&mut self, epoch: Epoch) {
        self.leave_role();
        self.set_epoch(epoch);
        let deadline_ms = self.election_deadline();
        self.state = State::Unattached { deadline_ms };
    }

    pub(crate) fn become_follower(&mut self, epoch: Epoch, leader: NodeId, pushed: bool) {
        assert_ne!(leader, self.me.id);
        if epoch == self.epoch {
            assert!(
                !matches!(self.state, State::Leader(_) | State::Resigned { .. }),
                "two leaders in epoch {epoch}"
            );
        }
        self.leave_role();
        self.set_epoch(epoch);
        if self.leader != Some(leader) {
            self.leader = Some(leader);
            self.out.quorum_dirty = true;
        }
        let f = self.new_follower(leader, pushed);
        self.state = State::Follower(f);
    }

    /// Appends a batch as leader: index, voter history, outbox.
    pub(crate) fn leader_append(&mut self, b: Batch) {
        self.log.append(&b);
        if b.control {
            self.note_control_batch(&b);
        }
        self.out.entries.push(b);
    }

    /// Applies the records of a control batch that just entered the log (any role).
    pub(crate) fn note_control_batch(&mut self, b: &Batch) {
        // A control batch the leader wrote always decodes; an undecodable one from the network
        // passed the message's bytecheck, so only its inner format is wrong: it stays in the
        // log (offsets must stay aligned with the leader's) but is ignored.
        if let Ok(records) = control::decode(&b.payload) {
            let changed = apply_control_records(
                records,
                b.base_offset,
                self.kraft_base,
                &mut self.kraft_upgrade,
                &mut self.voters,
            );
            if changed {
                self.on_voter_set_changed();
            }
        }
    }

    /// Truncates the log from `to` (never below the HWM); rolls back the voter set.
    pub(crate) fn truncate(&mut self, to: LogOffset) {
        assert!(
            to >= self.hwm,
            "truncating committed entries: to {to} < hwm {}",
            self.hwm
        );
        let new_end = self.log.truncate(to);
        assert!(new_end >= self.hwm, "truncation below the HWM");
        self.stats.truncations += 1;
        self.durable_end = self.durable_end.min(new_end);
        let popped = self.voters.len();
        while self.voters.len() > 1 && self.voters.last().expect("non-empty").0 >= new_end {
            self.voters.pop();
        }
        if self.kraft_upgrade.is_some_and(|(at, _)| at >= new_end) {
            self.kraft_upgrade = None;
        }
        if self.voters.len() != popped {
            self.on_voter_set_changed();
        }
        // Entries not yet handed to the driver are dropped. If none remain, the driver's log may
        // extend beyond the new end and must be truncated; otherwise it ends at the first pending
        // entry, below the new end, and only an earlier truncation (kept) applies.
        self.out.entries.retain(|b| b.end_offset() <= new_end);
        if self.out.entries.is_empty() {
            self.out.truncate_to = Some(self.out.truncate_to.map_or(new_end, |t| t.min(new_end)));
        }
        if let State::Follower(f) = &self.state {
            assert!(
                new_end >= f.matched_end,
                "truncating entries known to match the leader"
            );
        }
    }

    pub(crate) fn evict_payloads(&mut self) {
        let committed = self.hwm.min(self.durable_end);
        self.log
            .evict(committed, self.config.payload_cache_bytes_max);
    }

    pub(crate) fn request_read(&mut self, from: LogOffset, purpose: ReadPurpose) {
        let id = self.next_read_id;
        self.next_read_id += 1;
        self.reads.insert(id, purpose);
        self.stats.reads_requested += 1;
        self.out.reads.push(LogRead {
            id,
            from,
            bytes_max: self.config.batch_bytes_max,
        });
    }

    /// The driver's answer to a [`LogRead`]. Batches that do not match the log's index (it
    /// changed meanwhile) are discarded.
    pub fn read_completed(&mut self, id: u64, batches: Vec<Batch>) {
        let Some(purpose) = self.reads.remove(&id) else {
            return;
        };
        let valid = !batches.is_empty()
            && batches
                .iter()
                .all(|b| self.log.has_batch(b.base_offset, b.epoch, b.record_count));
        match purpose {
            ReadPurpose::Append { peer, epoch } => {
                self.append_read_completed(peer, epoch, valid.then_some(batches))
            }
            ReadPurpose::Fetch { peer, req, epoch } => {
                if valid && epoch == self.epoch && matches!(self.state, State::Leader(_)) {
                    let hwm = self.hwm;
                    self.send(
                        peer,
                        Message::FetchResponse(crate::message::FetchResponse {
                            epoch: self.epoch,
                            leader: Some(self.me.id),
                            result: crate::message::FetchResult::Batches {
                                fetch_offset: req.fetch_offset,
                                last_fetched_epoch: req.last_fetched_epoch,
                                batches,
                                high_watermark: hwm,
                            },
                        }),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AppendResult, VoteRequest};
    use crate::types::Voter;
    use corum_types::Uuid;

    fn key(i: u32) -> ReplicaKey {
        ReplicaKey {
            id: NodeId(i),
            directory_id: Uuid([i as u8; 16]),
        }
    }

    fn voters(n: u32) -> VoterSet {
        VoterSet::new(
            (1..=n)
                .map(|i| Voter {
                    key: key(i),
                    endpoints: vec![],
                })
                .collect(),
        )
        .unwrap()
    }

    fn core(id: u32, n: u32, log: Vec<RestoredBatch>) -> RaftCore {
        core_of(id, n, log, 1)
    }

    /// Replica `id` of `n` voters at `kraft_version` (0: a static quorum).
    fn core_of(id: u32, n: u32, log: Vec<RestoredBatch>, kraft_version: u16) -> RaftCore {
        let restore = Restore {
            quorum_state: QuorumStateRecord::default(),
            snapshot: None,
            log,
            bootstrap_voters: voters(n),
            kraft_version,
        };
        RaftCore::new(
            Config::default(),
            key(id),
            vec![],
            restore,
            u64::from(id),
            0,
        )
        .unwrap()
    }

    fn msgs(r: &Ready) -> Vec<(u32, &Message)> {
        r.messages.iter().map(|(to, m)| (to.0, m)).collect()
    }

    /// A single voter elects itself, but commits its LeaderChange only once its own log is
    /// persisted: the leader counts itself toward the quorum only after `persisted`.
    #[test]
    fn single_voter_commits_after_persisted() {
        let mut c = core(1, 1, vec![]);
        c.campaign();
        assert_eq!(c.role(), Role::Leader);
        let r = c.ready().unwrap();
        assert_eq!(r.quorum_state.unwrap().voted_for, Some(key(1)));
        assert_eq!(r.entries.len(), 1);
        assert!(r.entries[0].control);
        assert_eq!(r.high_watermark, None, "nothing durable yet");
        // LeaderChange, and the bootstrap voter set of this dynamic quorum.
        let end = r.entries[0].end_offset();
        assert_eq!(end, LogOffset(2));
        c.persisted(end, Epoch(1));
        assert_eq!(c.ready().unwrap().high_watermark, Some(end));
        c.check_invariants();
    }

    /// The vote and the quorum state recording it leave in the same Ready (the driver persists
    /// the state first), and a second candidate in the same epoch is refused.
    #[test]
    fn one_vote_per_epoch_persisted_before_reply() {
        let mut c = core(1, 3, vec![]);
        let req = |cand: u32| VoteRequest {
            epoch: Epoch(1),
            candidate: key(cand),
            last_epoch: Epoch(0),
            end_offset: LogOffset(0),
            pre_vote: false,
        };
        c.step(NodeId(2), Message::Vote(req(2)));
        let r = c.ready().unwrap();
        assert_eq!(
            r.quorum_state.unwrap(),
            QuorumStateRecord {
                epoch: Epoch(1),
                leader: None,
                voted_for: Some(key(2))
            }
        );
        assert!(matches!(msgs(&r)[..], [(2, Message::VoteResponse(v))] if v.granted));
        c.step(NodeId(3), Message::Vote(req(3)));
        let r = c.ready().unwrap();
        assert!(r.quorum_state.is_none());
        assert!(matches!(msgs(&r)[..], [(3, Message::VoteResponse(v))] if !v.granted));
    }

    /// A follower acknowledges only durable offsets: the first answer to an append reports what
    /// was received, the ack after `persisted` reports it durable. A `persisted` for a log that
    /// was truncated meanwhile is ignored.
    #[test]
    fn follower_acks_only_durable_and_ignores_stale_persisted() {
        let mut c = core(2, 3, vec![]);
        let batch = |base: u64, epoch: u64| Batch {
            base_offset: LogOffset(base),
            epoch: Epoch(epoch),
            record_count: 1,
            control: false,
            timestamp_ms: -1,
            payload: Payload::from(&b"x"[..]),
        };
        let append = |epoch: u64, prev: u64, prev_epoch: u64, b: Vec<Batch>| {
            Message::Append(crate::message::AppendRequest {
                epoch: Epoch(epoch),
                leader: NodeId(1),
                seq: 1,
                prev_end: LogOffset(prev),
                prev_epoch: Epoch(prev_epoch),
                batches: b,
                high_watermark: LogOffset(0),
                snapshot: None,
            })
        };
        c.step(NodeId(1), append(1, 0, 0, vec![batch(0, 1), batch(1, 1)]));
        let r = c.ready().unwrap();
        assert_eq!(r.entries.len(), 2);
        match msgs(&r)[..] {
            [(1, Message::AppendResponse(a))] => assert_eq!(
                a.result,
                AppendResult::Ok {
                    received_end: LogOffset(2),
                    durable_end: LogOffset(0)
                }
            ),
            ref other => panic!("{other:?}"),
        }
        // Epoch 2's leader replaces offset 1: the follower truncates.
        c.step(
            NodeId(3),
            append(2, 1, 1, vec![batch(1, 2)]).clone_with_leader(3),
        );
        let r = c.ready().unwrap();
        assert_eq!(r.truncate_to, Some(LogOffset(1)));
        // The fsync of the old entries completes late: ignored (epoch at offset 2 changed).
        c.persisted(LogOffset(2), Epoch(1));
        assert_eq!(c.durable_end_offset(), LogOffset(0));
        c.persisted(LogOffset(2), Epoch(2));
        assert_eq!(c.durable_end_offset(), LogOffset(2));
        let r = c.ready().unwrap();
        match msgs(&r)[..] {
            [(3, Message::AppendResponse(a))] => {
                assert_eq!(
                    a.result,
                    AppendResult::Ok {
                        received_end: LogOffset(2),
                        durable_end: LogOffset(2)
                    }
                )
            }
            ref other => panic!("{other:?}"),
        }
        c.check_invariants();
    }

    /// A static quorum's voters are its configuration's: a VotersRecord in its log (an older
    /// build let a follower's UpdateVoter commit one) is ignored on restart, while a dynamic
    /// quorum's replica takes it.
    #[test]
    fn a_static_quorum_ignores_voters_records_in_its_log() {
        let record = control::ControlRecord::Voters(control::VotersRecord {
            version: 0,
            voters: voters(2),
        });
        let payload = control::encode(vec![record]);
        let restored = RestoredBatch {
            base_offset: LogOffset(0),
            epoch: Epoch(1),
            record_count: 1,
            control: true,
            timestamp_ms: -1,
            payload_bytes: payload.len(),
            payload: Some(payload),
        };
        let fixed = core_of(1, 3, vec![restored.clone()], 0);
        assert_eq!(fixed.voter_set(), &voters(3));
        let dynamic = core_of(1, 3, vec![restored], 1);
        assert_eq!(dynamic.voter_set(), &voters(2));
    }

    /// A replica of an upgraded static quorum configured without voters (its nodes moved to
    /// `controller.quorum.bootstrap.servers`) takes them from the upgrade in its log; without
    /// one it refuses to start, saying why.
    #[test]
    fn a_static_quorum_without_configured_voters_needs_the_upgrade() {
        let restore = |log: Vec<RestoredBatch>| Restore {
            quorum_state: QuorumStateRecord::default(),
            snapshot: None,
            log,
            bootstrap_voters: VoterSet::default(),
            kraft_version: 0,
        };
        let new = |r: Restore| RaftCore::new(Config::default(), key(1), vec![], r, 1, 0);
        assert!(
            matches!(new(restore(vec![])), Err(Error::VoterSet(why)) if why.contains("upgrade"))
        );
        let payload = control::encode(vec![
            control::ControlRecord::KRaftVersion(control::KRaftVersionRecord { version: 1 }),
            control::ControlRecord::Voters(control::VotersRecord {
                version: 0,
                voters: voters(3),
            }),
        ]);
        let upgraded = RestoredBatch {
            base_offset: LogOffset(0),
            epoch: Epoch(1),
            record_count: 2,
            control: true,
            timestamp_ms: -1,
            payload_bytes: payload.len(),
            payload: Some(payload),
        };
        let c = new(restore(vec![upgraded])).unwrap();
        assert_eq!(c.kraft_version(), 1);
        assert_eq!(c.voter_set(), &voters(3));
        assert!(c.is_voter());
    }

    /// A restored log without payloads makes the new leader ask the driver to read batches
    /// back; `read_completed` turns them into an append.
    #[test]
    fn evicted_payloads_are_read_back() {
        let restored = RestoredBatch {
            base_offset: LogOffset(0),
            epoch: Epoch(1),
            record_count: 3,
            control: false,
            timestamp_ms: -1,
            payload_bytes: 5,
            payload: None,
        };
        let mut c = core(1, 3, vec![restored]);
        assert_eq!(
            c.epoch(),
            Epoch(1),
            "the epoch is at least the log's last epoch"
        );
        c.campaign();
        let _ = c.ready();
        for v in [2, 3] {
            c.step(
                NodeId(v),
                Message::VoteResponse(crate::message::VoteResponse {
                    epoch: Epoch(1),
                    request_epoch: Epoch(2),
                    voter: key(v),
                    granted: true,
                    pre_vote: true,
                    leader: None,
                }),
            );
        }
        c.step(
            NodeId(2),
            Message::VoteResponse(crate::message::VoteResponse {
                epoch: Epoch(2),
                request_epoch: Epoch(2),
                voter: key(2),
                granted: true,
                pre_vote: false,
                leader: None,
            }),
        );
        assert_eq!(c.role(), Role::Leader);
        let _ = c.ready();
        // Follower 2 is behind: it reports an empty log.
        c.step(
            NodeId(2),
            Message::AppendResponse(crate::message::AppendResponse {
                epoch: Epoch(2),
                replica: key(2),
                seq: 1,
                result: AppendResult::Mismatch {
                    end_offset: LogOffset(0),
                    last_epoch: Epoch(0),
                    last_epoch_start: LogOffset(0),
                },
            }),
        );
        let r = c.ready().unwrap();
        assert_eq!(r.reads.len(), 1);
        assert_eq!(r.reads[0].from, LogOffset(0));
        let b = Batch {
            base_offset: LogOffset(0),
            epoch: Epoch(1),
            record_count: 3,
            control: false,
            timestamp_ms: -1,
            payload: Payload::from(&b"hello"[..]),
        };
        c.read_completed(r.reads[0].id, vec![b.clone()]);
        let r = c.ready().unwrap();
        assert!(
            msgs(&r).iter().any(|(to, m)| *to == 2
                && matches!(m, Message::Append(a) if a.batches.first() == Some(&b))),
            "{:?}",
            r.messages
        );
    }

    impl Message {
        fn clone_with_leader(self, leader: u32) -> Message {
            match self {
                Message::Append(mut a) => {
                    a.leader = NodeId(leader);
                    Message::Append(a)
                }
                m => m,
            }
        }
    }
}
