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
use crate::control::{self, ControlRecord, KRaftVersionRecord, VotersRecord};
use crate::error::{Error, Result, VoterChangeError};
use crate::message::{
    AddVoterRequest, Message, RemoveVoterRequest, UpdateVoterRequest, UpgradeKraftVersionRequest,
    VoterChangeResponse,
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
        if self.kraft_version() == 0 {
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
        let records = vec![ControlRecord::Voters(VotersRecord {
            version: 0,
            voters: next,
        })];
        Ok(self.append_voter_change(records, reply_to, removes_leader))
    }

    /// KIP-853's upgrade of a static quorum to `kraft.version` `version` (leader only):
    /// appends one control batch with the KRaftVersion record and a Voters record of the same
    /// voters, each with the directory id it answers this leader with and its configured
    /// endpoints. Both are in force once appended (a truncation rolls them back), and the batch
    /// is a pending voter change: no other change until it commits. Refused unless the
    /// leader committed an entry in its epoch and every voter answered it within the fetch
    /// timeout with a directory id ([`VoterChangeError::DirectoryIdsUnknown`]); a version this
    /// build does not support or below the one in force is
    /// [`VoterChangeError::UnsupportedKraftVersion`]. `Ok(None)`: nothing to write (the
    /// version is in force already, or `validate_only` passed the checks).
    pub fn upgrade_kraft_version(
        &mut self,
        version: u16,
        validate_only: bool,
    ) -> Result<Option<LogOffset>> {
        self.upgrade_kraft(version, validate_only, None)
            .map_err(Error::VoterChange)
    }

    fn upgrade_kraft(
        &mut self,
        version: u16,
        validate_only: bool,
        reply_to: Option<(NodeId, u64)>,
    ) -> std::result::Result<Option<LogOffset>, VoterChangeError> {
        let now = self.now_ms;
        let current_version = self.kraft_version();
        let State::Leader(ls) = &self.state else {
            return Err(VoterChangeError::NotLeader);
        };
        if version > control::KRAFT_VERSION_MAX || version < current_version {
            return Err(VoterChangeError::UnsupportedKraftVersion);
        }
        if version == current_version {
            return Ok(None);
        }
        if ls.pending_change.is_some() {
            return Err(VoterChangeError::ChangePending);
        }
        if self.hwm <= ls.epoch_start {
            return Err(VoterChangeError::EpochNotCommitted);
        }
        // Each voter as it answers (a progress entry keeps the replica that last answered as
        // it, heard from within the fetch timeout); the leader is itself.
        let mut voters = Vec::with_capacity(self.voter_set().len());
        for v in self.voter_set().voters() {
            let key = if v.key.id == self.me.id {
                Some(self.me)
            } else {
                ls.progress
                    .get(&v.key.id)
                    .filter(|p| now.saturating_sub(p.last_heard_ms) < self.config.fetch_timeout_ms)
                    .map(|p| p.answered_as)
            };
            match key {
                Some(key) if !key.directory_id.is_zero() => voters.push(Voter {
                    key,
                    endpoints: v.endpoints.clone(),
                }),
                _ => return Err(VoterChangeError::DirectoryIdsUnknown),
            }
        }
        if validate_only {
            return Ok(None);
        }
        let next = VoterSet::new(voters).expect("the voter set's own ids, sorted and unique");
        let records = vec![
            ControlRecord::KRaftVersion(KRaftVersionRecord { version }),
            ControlRecord::Voters(VotersRecord {
                version: 0,
                voters: next,
            }),
        ];
        Ok(Some(self.append_voter_change(records, reply_to, false)))
    }

    /// Appends `records` (a voter change) as one control batch and makes it the pending
    /// change; returns the offset after it.
    fn append_voter_change(
        &mut self,
        records: Vec<ControlRecord>,
        reply_to: Option<(NodeId, u64)>,
        removes_leader: bool,
    ) -> LogOffset {
        let record_count = u32::try_from(records.len()).expect("a handful of records");
        let payload = control::encode(records);
        let base = self.log.end();
        self.leader_append(Batch {
            base_offset: base,
            epoch: self.epoch,
            record_count,
            control: true,
            timestamp_ms: self.wall_clock_ms,
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
        end
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

    pub(crate) fn on_upgrade_kraft_version(
        &mut self,
        from: NodeId,
        req: UpgradeKraftVersionRequest,
    ) {
        match self.upgrade_kraft(req.version, req.validate_only, Some((from, req.request_id))) {
            Ok(Some(_)) => {}
            Ok(None) => self.reply_voter_change(from, req.request_id, Ok(())),
            Err(e) => self.reply_voter_change(from, req.request_id, Err(e)),
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

    /// Auto-join (KIP-853), on an observer's tick: once this replica follows a leader of a
    /// dynamic quorum and holds the leader's log up to the high watermark of its last answer,
    /// and it is not a voter, it asks the leader to add it — after asking to remove a voter
    /// with its id and another directory id (the replica whose disk it replaced: the quorum
    /// must never count this empty replica as that one). One request at a time; a refusal
    /// (not caught up yet, another change pending, ...) or no answer within the request
    /// timeout waits `retry_backoff_ms`, doubled per refusal in a row, at most the request
    /// timeout.
    pub(crate) fn maybe_join(&mut self) {
        let now = self.now_ms;
        if !self.config.auto_join || self.kraft_version() == 0 || self.is_voter() {
            return;
        }
        let State::Follower(f) = &self.state else {
            return;
        };
        let caught_up = f.heard && f.leader_hwm.is_some_and(|h| self.log.end() >= h);
        let leader = f.leader;
        if let Some((_, sent)) = self.join.outstanding {
            if now.saturating_sub(sent) < self.config.request_timeout_ms {
                return;
            }
            self.join.outstanding = None;
            self.join.next_at_ms = now + self.join.backoff.failed();
        }
        if self
            .join
            .committed_at_change
            .is_some_and(|c| c != self.voter_set_changes)
        {
            // The change the leader committed has reached this replica's log.
            self.join.committed_at_change = None;
            self.join.next_at_ms = now;
        }
        if !caught_up || now < self.join.next_at_ms {
            return;
        }
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        let stale = self
            .voter_set()
            .get(self.me.id)
            .map(|v| v.key)
            .filter(|k| *k != self.me);
        let message = match stale {
            Some(voter) => Message::RemoveVoter(RemoveVoterRequest { request_id, voter }),
            None => Message::AddVoter(AddVoterRequest {
                request_id,
                voter: Voter {
                    key: self.me,
                    endpoints: self.endpoints.clone(),
                },
            }),
        };
        self.join.outstanding = Some((request_id, now));
        self.send(leader, message);
    }

    /// The leader's answer to auto-join's request: a refusal waits the backoff.
    pub(crate) fn on_join_response(&mut self, _from: NodeId, resp: VoterChangeResponse) {
        if self.join.outstanding.map(|(id, _)| id) != Some(resp.request_id) {
            return;
        }
        self.join.outstanding = None;
        match resp.result {
            Ok(()) => {
                // Committed: the next step (the add after a removal) waits for the new voter
                // set to reach this replica's log, or for a request timeout.
                self.join.backoff.succeeded();
                self.join.committed_at_change = Some(self.voter_set_changes);
                self.join.next_at_ms = self.now_ms + self.config.request_timeout_ms;
            }
            Err(_) => self.join.next_at_ms = self.now_ms + self.join.backoff.failed(),
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

#[cfg(test)]
mod tests {
    use corum_types::{LogOffset, NodeId};

    use crate::error::VoterChangeError;
    use crate::sim::{Cluster, ClusterSpec};
    use crate::types::ReplicaKey;
    use crate::Role;

    fn auto_join_spec(seed: u64, voters: usize, observers: usize) -> ClusterSpec {
        let mut spec = ClusterSpec::new(seed, voters, observers);
        spec.raft.auto_join = true;
        spec
    }

    /// The leader's voter ids.
    fn voter_ids(c: &Cluster) -> Vec<u32> {
        c.leader()
            .and_then(|l| c.core(l))
            .map(|core| core.voter_set().ids().map(|id| id.0).collect())
            .unwrap_or_default()
    }

    /// The checker saw no violation in the run of `seed`.
    fn assert_clean(c: &Cluster, seed: u64) {
        assert!(
            c.checker.violations.is_empty(),
            "seed {seed}: {:?}",
            c.checker.violations
        );
    }

    /// Writes `n` entries at the leader, then lets them commit.
    fn write(c: &mut Cluster, n: usize) {
        for i in 0..n {
            let l = c.leader().expect("a leader");
            let _ = c.propose(l, format!("w{i}").as_bytes());
            c.run_for(5);
        }
    }

    /// Two controllers formatted to join, knowing only the bootstrap servers: each finds the
    /// leader through them, catches up and is added — one change at a time — while writes go
    /// on; every replica ends with the same five voters.
    #[test]
    fn controllers_formatted_to_join_find_the_leader_and_are_added() {
        for seed in 0..20 {
            let mut spec = auto_join_spec(seed, 3, 2);
            spec.observers_bootstrap_only = true;
            let mut c = Cluster::new(spec).unwrap();
            assert!(c.run_until(5_000, |c| c.leader().is_some()), "seed {seed}");
            write(&mut c, 20);
            assert!(
                c.run_until(10_000, |c| voter_ids(c) == [1, 2, 3, 4, 5]),
                "seed {seed}: voters {:?}",
                voter_ids(&c)
            );
            write(&mut c, 5);
            c.run_for(500);
            let l = c.leader().unwrap();
            let history: Vec<usize> = c
                .core(l)
                .unwrap()
                .voter_history()
                .iter()
                .map(|(_, v)| v.len())
                .collect();
            // The bootstrap set, the first leader's copy of it, then one more voter a time.
            assert_eq!(history[..2], [3, 3], "seed {seed}");
            assert!(
                history[1..].windows(2).all(|w| w[1] == w[0] + 1),
                "seed {seed}: one voter added at a time: {history:?}"
            );
            for id in c.ids() {
                let core = c.core(id).unwrap();
                assert!(core.is_voter(), "seed {seed}: {id} is not a voter");
                assert_eq!(core.voter_set(), c.core(l).unwrap().voter_set());
            }
            assert_clean(&c, seed);
        }
    }

    /// Without auto-join an observer stays one.
    #[test]
    fn without_auto_join_an_observer_stays_one() {
        let mut c = Cluster::new(ClusterSpec::new(1, 3, 1)).unwrap();
        assert!(c.run_until(5_000, |c| c.leader().is_some()));
        write(&mut c, 10);
        c.run_for(3_000);
        assert_eq!(voter_ids(&c), [1, 2, 3]);
        assert_eq!(c.core(NodeId(4)).unwrap().role(), Role::Follower);
        assert_clean(&c, 0);
    }

    /// A voter's disk is replaced: it comes back with an empty log under a new directory id,
    /// is never counted as the old voter (it cannot vote or be counted for commits as the old
    /// one), asks to remove the old (id, directory id), then to add itself.
    #[test]
    fn a_replaced_disk_removes_the_old_replica_then_joins() {
        for seed in 0..20 {
            let mut c = Cluster::new(auto_join_spec(seed, 3, 0)).unwrap();
            assert!(c.run_until(5_000, |c| c.leader().is_some()), "seed {seed}");
            write(&mut c, 20);
            c.run_for(300);
            let l = c.leader().unwrap();
            let victim = c.ids().into_iter().find(|id| *id != l).unwrap();
            let old_key = c.core(victim).unwrap().voter_set().get(victim).unwrap().key;
            c.replace_disk(victim).unwrap();
            let new_key = c.nodes[&victim].key;
            assert_ne!(old_key, new_key);
            assert!(!c.core(victim).unwrap().is_voter());
            assert!(
                c.run_until(10_000, |c| c
                    .leader()
                    .and_then(|l| c.core(l))
                    .is_some_and(|core| core.voter_set().contains_key(&new_key))),
                "seed {seed}: voters {:?}",
                voter_ids(&c)
            );
            let l = c.leader().unwrap();
            let history = c.core(l).unwrap().voter_history().to_vec();
            assert!(
                history
                    .iter()
                    .all(|(_, v)| !(v.contains_key(&old_key) && v.contains_key(&new_key))),
                "seed {seed}: the old and the new replica never vote together"
            );
            assert!(
                history
                    .iter()
                    .any(|(_, v)| v.len() == 2 && !v.contains_id(victim)),
                "seed {seed}: the old replica was removed first: {history:?}"
            );
            write(&mut c, 5);
            c.run_for(500);
            assert_clean(&c, seed);
        }
    }

    /// Retries a voter change at the leader until it is appended, then lets it commit; returns
    /// the offset after it.
    fn change(
        c: &mut Cluster,
        f: impl Fn(&mut crate::RaftCore) -> crate::Result<LogOffset>,
    ) -> LogOffset {
        let mut refusals = Vec::new();
        for _ in 0..200 {
            if let Some(l) = c.leader() {
                match c.with_core(l, &f) {
                    Some(Ok(end)) => {
                        c.run_for(500);
                        return end;
                    }
                    Some(Err(e)) => refusals.push(e.to_string()),
                    None => {}
                }
            }
            c.run_for(20);
        }
        panic!("never appended: {refusals:?}");
    }

    /// A controller formatted to join finds the leader through the voters its log names, not
    /// only through its bootstrap servers: here, removed from the voters, it is cut off while
    /// its only bootstrap server, the leader it follows, leaves the quorum and goes down for
    /// good.
    #[test]
    fn a_joined_controller_finds_the_leader_when_its_bootstrap_servers_are_gone() {
        for seed in 0..10 {
            let mut spec = ClusterSpec::new(seed, 1, 2);
            spec.observers_bootstrap_only = true;
            let mut c = Cluster::new(spec).unwrap();
            assert!(c.run_until(5_000, |c| c.leader().is_some()), "seed {seed}");
            write(&mut c, 5);
            c.run_for(500);
            for id in [2, 3] {
                let key = c.nodes[&NodeId(id)].key;
                let endpoints = c.nodes[&NodeId(id)].endpoints.clone();
                change(&mut c, |core| {
                    core.add_voter(crate::Voter {
                        key,
                        endpoints: endpoints.clone(),
                    })
                });
            }
            assert_eq!(voter_ids(&c), [1, 2, 3], "seed {seed}");
            assert_eq!(c.leader(), Some(NodeId(1)), "seed {seed}");
            // 2 leaves the voters, knows it, and follows leader 1 as an observer.
            let two = c.nodes[&NodeId(2)].key;
            change(&mut c, |core| core.remove_voter(two));
            assert_eq!(voter_ids(&c), [1, 3], "seed {seed}");
            let core = c.core(NodeId(2)).unwrap();
            assert!(!core.can_campaign(), "seed {seed}");
            assert_eq!(core.status().leader, Some(NodeId(1)), "seed {seed}");
            // Cut off, it misses 1, its only bootstrap server, leaving the quorum and going
            // down for good: 3 leads alone.
            c.net.partition(&[NodeId(2)], &[NodeId(1), NodeId(3)]);
            let one = c.nodes[&NodeId(1)].key;
            change(&mut c, |core| core.remove_voter(one));
            assert!(
                c.run_until(5_000, |c| c.leader() == Some(NodeId(3))),
                "seed {seed}"
            );
            c.crash(NodeId(1));
            c.net.heal();
            write(&mut c, 5);
            assert!(
                c.run_until(5_000, |c| c.core(NodeId(2)).unwrap().status().leader
                    == Some(NodeId(3))),
                "seed {seed}: 2 never found the leader: {}",
                crate::sim::chaos::status_line(&c)
            );
            write(&mut c, 5);
            c.run_for(500);
            assert_eq!(
                c.core(NodeId(2)).unwrap().high_watermark(),
                c.core(NodeId(3)).unwrap().high_watermark(),
                "seed {seed}"
            );
            assert_clean(&c, seed);
        }
    }

    fn static_spec(seed: u64, voters: usize, observers: usize) -> ClusterSpec {
        let mut spec = auto_join_spec(seed, voters, observers);
        spec.kraft_version = 0;
        spec
    }

    /// Asks the leader to upgrade until it appends (it needs every voter's directory id).
    fn upgrade(c: &mut Cluster) -> LogOffset {
        change(c, |core| {
            core.upgrade_kraft_version(1, false)?
                .ok_or(crate::Error::VoterSet(
                    "kraft.version 1 is in force: nothing written",
                ))
        })
    }

    /// KIP-853's upgrade of a static quorum: refused before every voter answered with its
    /// directory id, it writes one control batch (KRaftVersion 1 and the same voters with their
    /// directory ids); from then on the quorum is dynamic — a controller that auto-joins is
    /// added, which a static quorum never does — and it stays so across restarts of every
    /// replica and across a snapshot.
    #[test]
    fn a_static_quorum_upgrades_then_grows() {
        for seed in 0..20 {
            let mut c = Cluster::new(static_spec(seed, 3, 1)).unwrap();
            assert!(c.run_until(5_000, |c| c.leader().is_some()), "seed {seed}");
            write(&mut c, 10);
            c.run_for(1_000);
            assert_eq!(
                voter_ids(&c),
                [1, 2, 3],
                "seed {seed}: static: no auto-join"
            );
            let l = c.leader().unwrap();
            let before = c.core(l).unwrap().log_end_offset();
            // Nothing written for a validation or an upgrade to the version in force.
            assert_eq!(
                c.with_core(l, |core| core.upgrade_kraft_version(0, false)),
                Some(Ok(None))
            );
            assert_eq!(
                c.with_core(l, |core| core.upgrade_kraft_version(2, false)),
                Some(Err(crate::Error::VoterChange(
                    VoterChangeError::UnsupportedKraftVersion
                )))
            );
            let follower = c.ids().into_iter().find(|id| *id != l).unwrap();
            assert_eq!(
                c.with_core(follower, |core| core.upgrade_kraft_version(1, false)),
                Some(Err(crate::Error::VoterChange(VoterChangeError::NotLeader)))
            );
            assert_eq!(
                c.with_core(l, |core| core.upgrade_kraft_version(1, true)),
                Some(Ok(None))
            );
            assert_eq!(c.core(l).unwrap().log_end_offset(), before);
            assert_eq!(c.core(l).unwrap().kraft_version(), 0);
            let end = upgrade(&mut c);
            assert!(
                c.run_until(2_000, |c| c.ids().iter().all(|id| c
                    .core(*id)
                    .unwrap()
                    .high_watermark()
                    >= end)),
                "seed {seed}: the upgrade commits"
            );
            // The upgrade's voter set (the last one below its end): the same voters, each
            // with its directory id.
            let expected: Vec<ReplicaKey> = (1..=3).map(crate::sim::replica_key).collect();
            for id in c.ids() {
                let core = c.core(id).unwrap();
                assert_eq!(core.kraft_version(), 1, "seed {seed}: node {id}");
                let (_, upgraded) = core
                    .voter_history()
                    .iter()
                    .rev()
                    .find(|(at, _)| *at < end)
                    .unwrap();
                let keys: Vec<ReplicaKey> = upgraded.voters().iter().map(|v| v.key).collect();
                assert_eq!(keys, expected, "seed {seed}: node {id}");
            }
            // Dynamic now: the observer auto-joins.
            assert!(
                c.run_until(10_000, |c| voter_ids(c) == [1, 2, 3, 4]),
                "seed {seed}: voters {:?}",
                voter_ids(&c)
            );
            write(&mut c, 5);
            c.run_for(500);
            let some = c.ids()[seed as usize % 4];
            c.snapshot(some).unwrap().unwrap();
            for id in c.ids() {
                c.crash(id);
            }
            for id in c.ids() {
                c.start(id).unwrap();
            }
            assert!(c.run_until(5_000, |c| c.leader().is_some()), "seed {seed}");
            write(&mut c, 5);
            c.run_for(500);
            for id in c.ids() {
                let core = c.core(id).unwrap();
                assert_eq!(
                    core.kraft_version(),
                    1,
                    "seed {seed}: node {id} after restart"
                );
                assert_eq!(core.voter_set().len(), 4, "seed {seed}: node {id}");
            }
            assert_clean(&c, seed);
        }
    }

    /// The upgrade needs every voter's directory id: with a voter down it is refused once the
    /// leader stops hearing from it, and accepted when it is back.
    #[test]
    fn the_upgrade_waits_for_every_voter() {
        let mut c = Cluster::new(static_spec(3, 3, 0)).unwrap();
        assert!(c.run_until(5_000, |c| c.leader().is_some()));
        write(&mut c, 5);
        let l = c.leader().unwrap();
        let down = c.ids().into_iter().find(|id| *id != l).unwrap();
        c.crash(down);
        c.run_for(1_000);
        let l = c.leader().unwrap();
        assert_eq!(
            c.with_core(l, |core| core.upgrade_kraft_version(1, false)),
            Some(Err(crate::Error::VoterChange(
                VoterChangeError::DirectoryIdsUnknown
            )))
        );
        c.start(down).unwrap();
        let end = upgrade(&mut c);
        assert!(c.run_until(2_000, |c| c.leader().is_some_and(|l| c
            .core(l)
            .unwrap()
            .high_watermark()
            >= end)));
        assert_clean(&c, 0);
    }

    /// An upgrade the leader appended but never replicated is rolled back with the truncation
    /// of its log: the quorum is static again on every replica, and may be upgraded later.
    #[test]
    fn an_uncommitted_upgrade_rolls_back() {
        for seed in 0..10 {
            let mut c = Cluster::new(static_spec(seed, 3, 0)).unwrap();
            assert!(c.run_until(5_000, |c| c.leader().is_some()), "seed {seed}");
            write(&mut c, 5);
            c.run_for(300);
            let old = c.leader().unwrap();
            let others: Vec<NodeId> = c.ids().into_iter().filter(|id| *id != old).collect();
            c.net.partition(&[old], &others);
            assert!(c
                .with_core(old, |core| core.upgrade_kraft_version(1, false))
                .unwrap()
                .unwrap()
                .is_some());
            assert_eq!(
                c.core(old).unwrap().kraft_version(),
                1,
                "in force once appended"
            );
            assert!(
                c.run_until(5_000, |c| c.leader().is_some_and(|l| l != old)),
                "seed {seed}"
            );
            write(&mut c, 5);
            c.net.heal();
            assert!(
                c.run_until(5_000, |c| c.core(old).unwrap().kraft_version() == 0
                    && c.core(old).unwrap().role() == Role::Follower),
                "seed {seed}: the old leader truncated its upgrade"
            );
            for id in c.ids() {
                assert_eq!(c.core(id).unwrap().kraft_version(), 0, "seed {seed}: {id}");
            }
            upgrade(&mut c);
            c.run_for(1_000);
            for id in c.ids() {
                assert_eq!(c.core(id).unwrap().kraft_version(), 1, "seed {seed}: {id}");
            }
            assert_clean(&c, seed);
        }
    }

    /// A controller formatted to join (no bootstrap voter) that observes a static quorum
    /// knows no voter until the upgrade's Voters record reaches it: it writes no snapshot
    /// before (a snapshot names who votes at its end), then joins by itself and snapshots.
    #[test]
    fn a_joining_controller_of_a_static_quorum_waits_for_the_upgrade() {
        for seed in 0..10 {
            let mut spec = static_spec(seed, 3, 1);
            spec.observers_bootstrap_only = true;
            let mut c = Cluster::new(spec).unwrap();
            assert!(c.run_until(5_000, |c| c.leader().is_some()), "seed {seed}");
            write(&mut c, 10);
            c.run_for(1_000);
            let joining = NodeId(4);
            assert!(c.core(joining).unwrap().voter_set().is_empty());
            assert!(c.core(joining).unwrap().high_watermark() > LogOffset(5));
            assert!(
                matches!(
                    c.snapshot(joining),
                    Some(Err(crate::Error::SnapshotWithoutVoters { .. }))
                ),
                "seed {seed}"
            );
            upgrade(&mut c);
            assert!(
                c.run_until(10_000, |c| voter_ids(c) == [1, 2, 3, 4]),
                "seed {seed}: voters {:?}",
                voter_ids(&c)
            );
            write(&mut c, 5);
            c.run_for(500);
            assert!(matches!(c.snapshot(joining), Some(Ok(_))), "seed {seed}");
            c.crash(joining);
            c.start(joining).unwrap();
            assert!(c.run_until(2_000, |c| c.core(joining).unwrap().is_voter()));
            assert_clean(&c, seed);
        }
    }
}
