//! Pre-vote, votes, becoming leader and resigning.

use std::collections::{BTreeMap, BTreeSet};

use corum_types::{Epoch, LogOffset, NodeId};

use super::{LeaderState, Progress, RaftCore, State};
use crate::control::{self, ControlRecord, LeaderChangeRecord, VotersRecord};
use crate::message::{
    BeginQuorumEpoch, EndQuorumEpoch, FetchRequest, Message, VoteRequest, VoteResponse,
};
use crate::types::Batch;

impl RaftCore {
    /// True if this replica heard from a live leader of its epoch (or is it).
    pub(crate) fn has_live_leader(&self) -> bool {
        match &self.state {
            State::Leader(_) => true,
            State::Follower(f) => f.heard && !f.leader_ended && self.now_ms < f.live_until_ms,
            _ => false,
        }
    }

    /// Asks a possible leader to identify itself with a fetch (its answer names it).
    pub(crate) fn probe_leader(&mut self, l: NodeId) {
        let req = FetchRequest {
            epoch: self.epoch,
            replica: self.me,
            fetch_offset: self.log.end(),
            last_fetched_epoch: self.log.last_epoch(),
            high_watermark: self.hwm,
            wait_max_ms: 0,
        };
        self.send(l, Message::Fetch(req));
    }

    pub(crate) fn mark_heard(&mut self, heard: bool) {
        if let State::Follower(f) = &mut self.state {
            f.heard |= heard;
        }
    }

    fn log_up_to_date(&self, last_epoch: Epoch, end: LogOffset) -> bool {
        (last_epoch, end) >= (self.log.last_epoch(), self.log.end())
    }

    pub(crate) fn become_prospective(&mut self) {
        assert!(self.can_campaign(), "only voters campaign");
        self.leave_role();
        // Keep the epoch, vote and known leader: a pre-vote changes nothing durable.
        self.state = State::Prospective {
            granted: BTreeSet::new(),
            rejected: BTreeSet::new(),
            deadline_ms: 0,
        };
        self.start_prevote_round();
    }

    pub(crate) fn start_prevote_round(&mut self) {
        self.stats.pre_vote_rounds += 1;
        let deadline = self.election_deadline();
        if let State::Prospective {
            granted,
            rejected,
            deadline_ms,
        } = &mut self.state
        {
            granted.clear();
            rejected.clear();
            granted.insert(self.me.id);
            *deadline_ms = deadline;
        }
        self.request_votes(self.epoch.next(), true);
    }

    fn become_candidate(&mut self) {
        self.stats.elections_started += 1;
        self.leave_role();
        let epoch = self.epoch.next();
        self.set_epoch(epoch);
        self.voted_for = Some(self.me);
        self.out.quorum_dirty = true;
        let deadline_ms = self.election_deadline();
        self.state = State::Candidate {
            granted: BTreeSet::from([self.me.id]),
            rejected: BTreeSet::new(),
            deadline_ms,
        };
        self.request_votes(epoch, false);
    }

    /// Asks every other voter of the latest set for its (pre-)vote in `epoch`, then checks
    /// whether the round is already decided (a single-voter set wins at once).
    fn request_votes(&mut self, epoch: Epoch, pre_vote: bool) {
        let req = VoteRequest {
            epoch,
            candidate: self.me,
            last_epoch: self.log.last_epoch(),
            end_offset: self.log.end(),
            pre_vote,
        };
        let peers: Vec<NodeId> = self
            .voter_set()
            .ids()
            .filter(|id| *id != self.me.id)
            .collect();
        for p in peers {
            self.send(p, Message::Vote(req.clone()));
        }
        self.check_election_outcome();
    }

    /// Moves on once a majority granted or rejected the current round.
    fn check_election_outcome(&mut self) {
        let voters = self.voter_set();
        let majority = voters.majority();
        // Only members of the latest voter set count (the candidate itself may not be one).
        let count = |s: &BTreeSet<NodeId>| s.iter().filter(|id| voters.contains_id(**id)).count();
        let (won, lost, pre) = match &self.state {
            State::Prospective {
                granted, rejected, ..
            } => (
                count(granted) >= majority,
                count(rejected) >= majority,
                true,
            ),
            State::Candidate {
                granted, rejected, ..
            } => (
                count(granted) >= majority,
                count(rejected) >= majority,
                false,
            ),
            _ => return,
        };
        if won {
            if pre {
                self.become_candidate();
            } else {
                self.become_leader();
            }
        } else if lost {
            let backoff = self.backoff_deadline();
            match &mut self.state {
                // Further answers of this round cannot change the outcome (a rejecting majority
                // leaves no granting one); wait for the backoff.
                State::Prospective { deadline_ms, .. } | State::Candidate { deadline_ms, .. } => {
                    *deadline_ms = backoff
                }
                _ => unreachable!("matched above"),
            }
        }
    }

    fn become_leader(&mut self) {
        let granted: Vec<NodeId> = match &self.state {
            State::Candidate { granted, .. } => granted.iter().copied().collect(),
            _ => unreachable!("only a candidate wins"),
        };
        self.stats.elections_won += 1;
        self.leader = Some(self.me.id);
        self.out.quorum_dirty = true;
        let epoch_start = self.log.end();
        let now = self.now_ms;
        let mut progress = BTreeMap::new();
        for v in self.voter_set().voters() {
            if v.key.id != self.me.id {
                progress.insert(v.key.id, Progress::new(v.key, epoch_start, now));
            }
        }
        self.state = State::Leader(Box::new(LeaderState {
            epoch_start,
            since_ms: now,
            progress,
            held_fetches: BTreeMap::new(),
            fetchers: BTreeMap::new(),
            pending_change: None,
        }));
        let mut records = vec![ControlRecord::LeaderChange(LeaderChangeRecord {
            epoch: self.epoch,
            leader: self.me.id,
            granted_by: granted,
        })];
        // A dynamic quorum's first voter set is the bootstrap checkpoint's, which only the
        // replicas formatted with it hold: the first leader writes it into the log (with its
        // LeaderChange), so that a controller formatted to join (`--no-initial-controllers`),
        // or one whose disk was replaced, learns the voters — and whether its id already votes
        // under another directory id — from the log it fetches.
        if self.kraft_version() >= 1 && self.voters.len() == 1 && self.snapshot.is_none() {
            records.push(ControlRecord::Voters(VotersRecord {
                version: 0,
                voters: self.voter_set().clone(),
            }));
        }
        let record_count = records.len() as u32;
        self.leader_append(Batch {
            base_offset: epoch_start,
            epoch: self.epoch,
            record_count,
            control: true,
            timestamp_ms: self.wall_clock_ms,
            payload: control::encode(records),
        });
        let begin = BeginQuorumEpoch {
            epoch: self.epoch,
            leader: self.me.id,
        };
        let peers: Vec<NodeId> = self
            .voter_set()
            .ids()
            .filter(|id| *id != self.me.id)
            .collect();
        for p in peers {
            self.send(p, Message::BeginQuorumEpoch(begin.clone()));
        }
        self.leader_update_hwm();
    }

    /// Leader → Resigned: tell the voters, most caught-up first.
    pub(crate) fn become_resigned(&mut self) {
        let State::Leader(ls) = &self.state else {
            return;
        };
        let mut successors: Vec<(LogOffset, NodeId)> = ls
            .progress
            .iter()
            .filter(|(id, _)| self.voter_set().contains_id(**id))
            .map(|(id, p)| (p.matched, *id))
            .collect();
        successors.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let preferred: Vec<NodeId> = successors.into_iter().map(|(_, id)| id).collect();
        self.stats.resignations += 1;
        self.leave_role();
        let deadline_ms = self.election_deadline();
        self.state = State::Resigned { deadline_ms };
        let end = EndQuorumEpoch {
            epoch: self.epoch,
            leader: self.me.id,
            preferred_successors: preferred.clone(),
        };
        for p in preferred {
            self.send(p, Message::EndQuorumEpoch(end.clone()));
        }
    }

    pub(crate) fn on_vote(&mut self, from: NodeId, req: VoteRequest) {
        if req.candidate.id != from || from == self.me.id {
            return;
        }
        let granted = if req.pre_vote {
            // KIP-996: nothing changes here; grant if the candidate could win and we have no leader.
            req.epoch > self.epoch
                && self.log_up_to_date(req.last_epoch, req.end_offset)
                && !self.has_live_leader()
        } else {
            if req.epoch > self.epoch {
                self.become_unattached(req.epoch);
            }
            let can_vote = req.epoch == self.epoch
                && matches!(
                    self.state,
                    State::Unattached { .. } | State::Prospective { .. }
                )
                && self.voted_for.is_none_or(|v| req.candidate.is(&v))
                && self.log_up_to_date(req.last_epoch, req.end_offset);
            if can_vote && self.voted_for.is_none() {
                self.voted_for = Some(req.candidate);
                self.out.quorum_dirty = true;
                // Having voted, give the candidate time to win before campaigning ourselves.
                let deadline = self.election_deadline();
                self.state = State::Unattached {
                    deadline_ms: deadline,
                };
            }
            can_vote
        };
        let resp = VoteResponse {
            epoch: self.epoch,
            request_epoch: req.epoch,
            voter: self.me,
            granted,
            pre_vote: req.pre_vote,
            leader: self.leader_hint(),
        };
        self.send(from, Message::VoteResponse(resp));
    }

    pub(crate) fn on_vote_response(&mut self, from: NodeId, resp: VoteResponse) {
        if resp.voter.id != from {
            return;
        }
        // Only the leader itself proves it is alive. A hint from another replica may name a
        // dead leader (following it would let stale followers keep each other from ever
        // electing anyone), so it only earns the hinted leader a probe: if that one answers,
        // we follow it.
        let hint = resp.leader.filter(|l| *l != self.me.id);
        if resp.epoch > self.epoch {
            match hint {
                Some(l) if l == from => self.become_follower(resp.epoch, l, false),
                Some(l) => {
                    self.become_unattached(resp.epoch);
                    self.probe_leader(l);
                }
                None => self.become_unattached(resp.epoch),
            }
            return;
        }
        if resp.epoch < self.epoch && hint == Some(from) {
            // A leader of an older epoch refused: it does not know this replica's epoch, and
            // may never learn it if this replica is not in its voter set (a voter whose
            // addition it appended and lost), so nothing it sends would tell either of them.
            // A fetch at this epoch makes it step down to it (as any message of a newer epoch
            // does); the next election's winner then answers this replica's pre-votes.
            self.probe_leader(from);
        }
        if resp.epoch == self.epoch
            && matches!(
                self.state,
                State::Unattached { .. } | State::Prospective { .. } | State::Candidate { .. }
            )
        {
            match hint {
                Some(l) if l == from => {
                    self.become_follower(resp.epoch, l, false);
                    self.mark_heard(true);
                    return;
                }
                Some(l) if !resp.granted => self.probe_leader(l),
                _ => {}
            }
        }
        let counts = self.voter_set().contains_key(&resp.voter);
        let epoch = self.epoch;
        match &mut self.state {
            State::Prospective {
                granted, rejected, ..
            } if resp.pre_vote && resp.request_epoch == epoch.next() => {
                if counts {
                    if resp.granted {
                        granted.insert(from);
                    } else {
                        rejected.insert(from);
                    }
                }
            }
            State::Candidate {
                granted, rejected, ..
            } if !resp.pre_vote && resp.request_epoch == epoch => {
                if counts {
                    if resp.granted {
                        granted.insert(from);
                    } else {
                        rejected.insert(from);
                    }
                }
            }
            _ => return,
        }
        self.check_election_outcome();
    }

    pub(crate) fn on_begin_epoch(&mut self, m: BeginQuorumEpoch) {
        if m.epoch < self.epoch || m.leader == self.me.id {
            return;
        }
        let already = matches!(&self.state, State::Follower(f) if f.leader == m.leader)
            && m.epoch == self.epoch;
        if !already {
            self.become_follower(m.epoch, m.leader, true);
        } else {
            let deadline = self.follower_deadline();
            let live_until = self.now_ms + self.config.fetch_timeout_ms;
            if let State::Follower(f) = &mut self.state {
                f.deadline_ms = deadline;
                f.live_until_ms = live_until;
                f.heard = true;
            }
        }
    }

    pub(crate) fn on_end_epoch(&mut self, m: EndQuorumEpoch) {
        if m.epoch < self.epoch || m.leader == self.me.id {
            return;
        }
        if m.epoch > self.epoch {
            self.become_unattached(m.epoch);
        }
        if !self.can_campaign() {
            return;
        }
        // The first preferred successor campaigns at once; the others wait by rank, so the
        // most caught-up voter usually wins without a split vote.
        let rank = m
            .preferred_successors
            .iter()
            .position(|id| *id == self.me.id)
            .unwrap_or(m.preferred_successors.len());
        let delay = (rank as u64) * self.config.election_backoff_max_ms / 2;
        let at = self.now_ms + delay;
        match &mut self.state {
            State::Follower(f) if f.leader == m.leader => {
                f.deadline_ms = at;
                f.leader_ended = true;
            }
            State::Unattached { deadline_ms } => *deadline_ms = at,
            _ => {}
        }
        if delay == 0 {
            self.tick(self.now_ms);
        }
    }

    /// The transport found `peer`'s process gone: a connection from it closed and a new one
    /// to its address was refused, so nothing listens there. If it is this replica's leader,
    /// the leader stops counting as live at once (this replica grants pre-votes, as after
    /// EndQuorumEpoch) and a voter starts its pre-vote after a random delay of at most a
    /// quarter of the election timeout, instead of waiting out the fetch timeout; an observer
    /// looks for the new leader at once. A message from the leader makes it live again.
    ///
    /// Only liveness depends on this report. A wrong one costs a pre-vote round, which the
    /// voters still hearing from the leader reject (KIP-996); a crashed host's connections
    /// never report (nothing refuses), and the fetch timeout still finds it.
    pub fn peer_unreachable(&mut self, peer: NodeId) {
        if !matches!(&self.state, State::Follower(f) if f.leader == peer) {
            return;
        }
        let now = self.now_ms;
        if !self.can_campaign() {
            let epoch = self.epoch;
            self.become_unattached(epoch);
            if let State::Unattached { deadline_ms } = &mut self.state {
                *deadline_ms = now;
            }
            self.tick(now);
            return;
        }
        let delay = rand::Rng::gen_range(&mut self.rng, 0..=self.config.election_timeout_ms / 4);
        if let State::Follower(f) = &mut self.state {
            f.live_until_ms = now;
            f.deadline_ms = f.deadline_ms.min(now + delay);
        }
        if delay == 0 {
            self.tick(now);
        }
    }

    /// An observer without a leader asks every bootstrap server at once (some may be down;
    /// the first answer naming the leader wins) and a random voter of the set in force (the
    /// answer names the leader): the bootstrap servers are where a controller formatted to
    /// join first finds the quorum, but they may all have left it since, while its log names
    /// the voters that replaced them.
    pub(crate) fn discover_leader(&mut self) {
        let mut to = self.bootstrap_servers.clone();
        let ids: Vec<NodeId> = self
            .voter_set()
            .ids()
            .filter(|id| *id != self.me.id)
            .collect();
        if !ids.is_empty() {
            to.push(ids[rand::Rng::gen_range(&mut self.rng, 0..ids.len())]);
        }
        let req = FetchRequest {
            epoch: self.epoch,
            replica: self.me,
            fetch_offset: self.log.end(),
            last_fetched_epoch: self.log.last_epoch(),
            high_watermark: self.hwm,
            wait_max_ms: 0,
        };
        for id in to {
            self.send(id, Message::Fetch(req.clone()));
        }
    }
}
