//! KIP-853 voter changes at the leader.
//!
//! The voter set is the latest VotersRecord in the log, committed or not; a truncation rolls it
//! back. The leader accepts a change only if (1) it has committed an entry in its epoch (its
//! LeaderChange), (2) no earlier VotersRecord is uncommitted, and (3) the new set differs from
//! the current one by one voter (every majority of one intersects every majority of the other).
//! The new set is in force as soon as the record is appended, so the change commits with a
//! majority of the *new* set. A leader that removed itself resigns once the removal commits.

use corum_types::{LogOffset, NodeId};

use super::{PendingChange, Progress, RaftCore, State};
use crate::control::{self, ControlRecord, VotersRecord};
use crate::error::{Error, Result, VoterChangeError};
use crate::message::{
    AddVoterRequest, Message, RemoveVoterRequest, UpdateVoterRequest, VoterChangeResponse,
};
use crate::types::{Batch, ReplicaKey, Voter, VoterSet};

enum Change {
    Add(Voter),
    Remove(ReplicaKey),
    Update(Voter),
}

impl RaftCore {
    /// Adds a voter (leader only). The replica must have fetched from this leader within the
    /// fetch timeout and be at or past the HWM. Returns the offset after the VotersRecord.
    pub fn add_voter(&mut self, voter: Voter) -> Result<LogOffset> {
        self.change_voters(Change::Add(voter), None)
            .map_err(Error::VoterChange)
    }

    /// Removes a voter, possibly the leader itself (it resigns once the change commits).
    pub fn remove_voter(&mut self, key: ReplicaKey) -> Result<LogOffset> {
        self.change_voters(Change::Remove(key), None)
            .map_err(Error::VoterChange)
    }

    /// Updates a voter's endpoints; `Ok(None)` if they are already current (idempotent).
    pub fn update_voter(&mut self, voter: Voter) -> Result<Option<LogOffset>> {
        let unchanged = self
            .voter_set()
            .get(voter.key.id)
            .is_some_and(|v| *v == voter);
        if unchanged && matches!(self.state, State::Leader(_)) {
            return Ok(None);
        }
        self.change_voters(Change::Update(voter), None)
            .map(Some)
            .map_err(Error::VoterChange)
    }

    fn change_voters(
        &mut self,
        change: Change,
        reply_to: Option<(NodeId, u64)>,
    ) -> std::result::Result<LogOffset, VoterChangeError> {
        let now = self.now_ms;
        let State::Leader(ls) = &self.state else {
            return Err(VoterChangeError::NotLeader);
        };
        if self.kraft_version == 0 {
            return Err(VoterChangeError::StaticQuorum);
        }
        if ls.pending_change.is_some() {
            return Err(VoterChangeError::ChangePending);
        }
        if self.hwm <= ls.epoch_start {
            return Err(VoterChangeError::EpochNotCommitted);
        }
        let last_record = self.voters.last().expect("base entry").0;
        if self.voters.len() > 1 && last_record >= self.hwm {
            return Err(VoterChangeError::ChangePending);
        }
        let current = self.voter_set().clone();
        let (next, removes_leader) = match change {
            Change::Add(voter) => {
                if current.contains_id(voter.key.id) {
                    return Err(VoterChangeError::AlreadyVoter);
                }
                let caught_up = ls.fetchers.get(&voter.key.id).is_some_and(|f| {
                    f.key == voter.key
                        && now.saturating_sub(f.last_fetch_ms) < self.config.fetch_timeout_ms
                        && f.fetch_offset >= self.hwm
                });
                if !caught_up {
                    return Err(VoterChangeError::NotCaughtUp);
                }
                (
                    current
                        .with_added(voter)
                        .map_err(|_| VoterChangeError::AlreadyVoter)?,
                    false,
                )
            }
            Change::Remove(key) => {
                if !current.contains_key(&key) {
                    return Err(VoterChangeError::NotVoter);
                }
                if current.len() == 1 {
                    return Err(VoterChangeError::WouldBeEmpty);
                }
                (
                    current
                        .with_removed(&key)
                        .map_err(|_| VoterChangeError::NotVoter)?,
                    key == self.me,
                )
            }
            Change::Update(voter) => {
                if !current.contains_key(&voter.key) {
                    return Err(VoterChangeError::NotVoter);
                }
                let replaced: Vec<Voter> = current
                    .voters()
                    .iter()
                    .map(|v| {
                        if v.key == voter.key {
                            voter.clone()
                        } else {
                            v.clone()
                        }
                    })
                    .collect();
                (
                    VoterSet::new(replaced).map_err(|_| VoterChangeError::NotVoter)?,
                    false,
                )
            }
        };
        assert!(
            current.majorities_intersect(&next),
            "one voter change at a time"
        );
        let payload = control::encode(vec![ControlRecord::Voters(VotersRecord {
            version: 0,
            voters: next,
        })]);
        let base = self.log.end();
        self.leader_append(Batch {
            base_offset: base,
            epoch: self.epoch,
            record_count: 1,
            control: true,
            payload,
        });
        let end = self.log.end();
        if let State::Leader(ls) = &mut self.state {
            ls.pending_change = Some(PendingChange {
                end,
                reply_to,
                removes_leader,
            });
        }
        // A single-voter set may commit at once.
        self.leader_update_hwm();
        Ok(end)
    }

    fn reply_voter_change(
        &mut self,
        to: NodeId,
        request_id: u64,
        result: std::result::Result<(), VoterChangeError>,
    ) {
        let leader = self.leader_hint();
        self.send(
            to,
            Message::VoterChangeResponse(VoterChangeResponse {
                request_id,
                result,
                leader,
            }),
        );
    }

    pub(crate) fn on_add_voter(&mut self, from: NodeId, req: AddVoterRequest) {
        if let Err(e) = self.change_voters(Change::Add(req.voter), Some((from, req.request_id))) {
            self.reply_voter_change(from, req.request_id, Err(e));
        }
    }

    pub(crate) fn on_remove_voter(&mut self, from: NodeId, req: RemoveVoterRequest) {
        if let Err(e) = self.change_voters(Change::Remove(req.voter), Some((from, req.request_id)))
        {
            self.reply_voter_change(from, req.request_id, Err(e));
        }
    }

    pub(crate) fn on_update_voter(&mut self, from: NodeId, req: UpdateVoterRequest) {
        let unchanged = self
            .voter_set()
            .get(req.voter.key.id)
            .is_some_and(|v| *v == req.voter);
        if unchanged && matches!(self.state, State::Leader(_)) {
            self.reply_voter_change(from, req.request_id, Ok(()));
            return;
        }
        if let Err(e) = self.change_voters(Change::Update(req.voter), Some((from, req.request_id)))
        {
            self.reply_voter_change(from, req.request_id, Err(e));
        }
    }

    /// Called after the leader's HWM advanced: completes a committed voter change.
    pub(crate) fn after_leader_commit(&mut self) {
        let hwm = self.hwm;
        let is_voter = self.is_voter();
        let State::Leader(ls) = &mut self.state else {
            return;
        };
        if !is_voter && ls.pending_change.is_none() {
            // Elected to finish a removal of itself that its predecessor (itself, before a
            // crash) left uncommitted: now committed with the epoch, so step aside.
            self.become_resigned();
            return;
        }
        if ls.pending_change.as_ref().is_some_and(|pc| pc.end <= hwm) {
            let pc = ls.pending_change.take().expect("checked");
            if let Some((to, request_id)) = pc.reply_to {
                self.reply_voter_change(to, request_id, Ok(()));
            }
            if pc.removes_leader {
                self.become_resigned();
            }
        }
    }

    /// The voter set changed (record appended, truncated away, or snapshot installed): a
    /// leader starts or stops replicating to the affected voters.
    pub(crate) fn on_voter_set_changed(&mut self) {
        self.voter_set_changes += 1;
        let now = self.now_ms;
        let end = self.log.end();
        let set = self.voter_set().clone();
        let me = self.me.id;
        let State::Leader(ls) = &mut self.state else {
            return;
        };
        ls.progress
            .retain(|id, p| set.get(*id).is_some_and(|v| v.key == p.key));
        for v in set.voters() {
            if v.key.id != me && !ls.progress.contains_key(&v.key.id) {
                ls.progress.insert(v.key.id, Progress::new(v.key, end, now));
            }
        }
    }
}
