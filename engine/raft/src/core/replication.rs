//! Replication: the leader's pipelined pushes to voters, the followers' side of them, the
//! observers' long-poll Fetch, and the high watermark.
//!
//! Per follower the leader keeps a [`Progress`](super::Progress): `next` (next offset to send),
//! `acked` (matching prefix received), `matched` (matching prefix durable: counts toward the
//! HWM) and a window of appends in flight bounded by count and bytes. A follower whose position
//! is unknown (new leader, mismatch, timeout) is *probed*: one append at a time. A mismatch
//! answer carries the follower's (end offset, last epoch, start of that epoch's run); the leader
//! looks up its own end for that epoch (OffsetForLeaderEpoch) and resumes from the divergence
//! point, usually in one round trip.

use corum_types::{Epoch, LogOffset, NodeId};

use super::{HeldFetch, RaftCore, ReadPurpose, State};
use crate::follower::{fetch_request, fetch_step, FetchStep, FollowerLog};
use crate::log::{Gap, LogIndex};
use crate::message::{
    AppendRequest, AppendResponse, AppendResult, FetchRequest, FetchResponse, FetchResult, Message,
    UpdateVoterRequest,
};
use crate::quorum::majority_offset;
use crate::types::{Batch, Voter};

impl RaftCore {
    // ----- leader -----

    pub(crate) fn leader_tick(&mut self) {
        let now = self.now_ms;
        let timeout = self.config.request_timeout_ms;
        let fetch_timeout = self.config.fetch_timeout_ms;
        let resign = {
            let State::Leader(ls) = &self.state else {
                return;
            };
            let voters = self.voter_set();
            let mut heard = usize::from(voters.contains_key(&self.me));
            for id in voters.ids() {
                if let Some(p) = ls.progress.get(&id) {
                    if now.saturating_sub(p.last_heard_ms) < fetch_timeout {
                        heard += 1;
                    }
                }
            }
            now.saturating_sub(ls.since_ms) >= fetch_timeout && heard < voters.majority()
        };
        if resign {
            self.become_resigned();
            return;
        }
        if let State::Leader(ls) = &mut self.state {
            for p in ls.progress.values_mut() {
                if p.inflight
                    .front()
                    .is_some_and(|f| now.saturating_sub(f.2) >= timeout)
                {
                    // Lost appends: back to probing from where we are (the probe's mismatch
                    // answer tells where the follower really is).
                    p.inflight.clear();
                    p.inflight_bytes = 0;
                    p.probing = true;
                    p.probe_seq = p.seq + 1;
                }
            }
        }
        self.leader_flush();
    }

    pub(crate) fn leader_flush(&mut self) {
        let peers: Vec<NodeId> = match &self.state {
            State::Leader(ls) => ls.progress.keys().copied().collect(),
            _ => return,
        };
        for p in peers {
            self.flush_peer(p);
        }
        self.answer_held_fetches();
        self.evict_payloads();
    }

    /// Sends what the window allows to `peer`, or a heartbeat / HWM update when due.
    fn flush_peer(&mut self, peer: NodeId) {
        let now = self.now_ms;
        let log_end = self.log.end();
        loop {
            let hwm = self.hwm;
            let State::Leader(ls) = &mut self.state else {
                return;
            };
            let Some(p) = ls.progress.get_mut(&peer) else {
                return;
            };
            if p.reading {
                return;
            }
            let heartbeat_due =
                now.saturating_sub(p.last_sent_ms) >= self.config.heartbeat_interval_ms;
            if p.next < self.log.start() {
                // Compacted away since: the follower needs the snapshot.
                p.snapshot_needed = true;
                p.next = self.log.start();
                p.inflight.clear();
                p.inflight_bytes = 0;
                p.probing = true;
                p.probe_seq = p.seq + 1;
            }
            if p.snapshot_needed {
                if heartbeat_due {
                    self.send_append(peer, self.log.start(), Vec::new());
                }
                return;
            }
            let window_open = if p.probing {
                p.inflight.is_empty()
            } else {
                p.inflight.len() < self.config.append_inflight_count_max
                    && p.inflight_bytes < self.config.append_inflight_bytes_max
            };
            if p.next < log_end && window_open {
                let from = p.next;
                match self.log.read(from, self.config.batch_bytes_max) {
                    Ok(batches) => {
                        self.send_append(peer, from, batches);
                        continue;
                    }
                    Err(Gap::BeforeStart) => {
                        p.snapshot_needed = true;
                        continue;
                    }
                    Err(Gap::NotCached) => {
                        p.reading = true;
                        let epoch = self.epoch;
                        self.request_read(from, ReadPurpose::Append { peer, epoch });
                        return;
                    }
                }
            }
            let idle_probe_ok = !p.probing || p.inflight.is_empty();
            // A newer high watermark alone waits `hwm_linger_ms` for the next entries to carry
            // it (one message instead of two round trips per commit at low load).
            let hwm_due = hwm > p.last_sent_hwm
                && now >= *p.hwm_due_ms.get_or_insert(now + self.config.hwm_linger_ms);
            if idle_probe_ok && (heartbeat_due || hwm_due) {
                let from = p.next;
                self.send_append(peer, from, Vec::new());
            }
            return;
        }
    }

    /// Sends one append starting at `from` and records it in the window.
    fn send_append(&mut self, peer: NodeId, from: LogOffset, batches: Vec<Batch>) {
        let now = self.now_ms;
        let prev_epoch = self
            .log
            .epoch_before(from)
            .expect("appends start inside the log");
        let snapshot = (from == self.log.start() && batches.is_empty())
            .then(|| self.snapshot.as_ref().map(|s| s.id))
            .flatten();
        let hwm = self.hwm;
        let State::Leader(ls) = &mut self.state else {
            return;
        };
        let p = ls.progress.get_mut(&peer).expect("caller checked");
        p.seq += 1;
        p.last_sent_ms = now;
        p.last_sent_hwm = hwm;
        p.hwm_due_ms = None;
        if let Some(last) = batches.last() {
            let bytes: usize = batches.iter().map(|b| b.payload.len()).sum();
            p.inflight.push_back((last.end_offset(), bytes, now));
            p.inflight_bytes += bytes;
            p.next = last.end_offset();
        }
        let snapshot = if p.snapshot_needed { snapshot } else { None };
        let req = AppendRequest {
            epoch: self.epoch,
            leader: self.me.id,
            seq: p.seq,
            prev_end: from,
            prev_epoch,
            batches,
            high_watermark: hwm,
            snapshot,
        };
        self.send(peer, Message::Append(req));
    }

    pub(crate) fn append_read_completed(
        &mut self,
        peer: NodeId,
        epoch: Epoch,
        batches: Option<Vec<Batch>>,
    ) {
        if epoch != self.epoch {
            return;
        }
        let State::Leader(ls) = &mut self.state else {
            return;
        };
        let Some(p) = ls.progress.get_mut(&peer) else {
            return;
        };
        p.reading = false;
        if let Some(batches) = batches {
            let window_open = p.inflight.len() < self.config.append_inflight_count_max;
            if batches[0].base_offset == p.next && window_open && !p.snapshot_needed {
                let from = p.next;
                self.send_append(peer, from, batches);
            }
        }
        self.flush_peer(peer);
    }

    pub(crate) fn on_append_response(&mut self, from: NodeId, resp: AppendResponse) {
        if resp.epoch > self.epoch {
            self.become_unattached(resp.epoch);
            return;
        }
        if resp.epoch < self.epoch || resp.replica.id != from {
            return;
        }
        let now = self.now_ms;
        let log_start = self.log.start();
        let log_end = self.log.end();
        let State::Leader(ls) = &mut self.state else {
            return;
        };
        let Some(p) = ls.progress.get_mut(&from) else {
            return;
        };
        if !resp.replica.is(&p.key) {
            return;
        }
        p.answered_as = resp.replica;
        p.last_heard_ms = now;
        match resp.result {
            AppendResult::Ok {
                received_end,
                durable_end,
            } => {
                if received_end > log_end || durable_end > received_end {
                    return;
                }
                p.acked = p.acked.max(received_end);
                let matched_before = p.matched;
                p.matched = p.matched.max(durable_end);
                p.last_response_ms = Some(now);
                if p.matched >= log_end {
                    p.last_caught_up_ms = Some(now);
                }
                while p.inflight.front().is_some_and(|f| f.0 <= received_end) {
                    let f = p.inflight.pop_front().expect("checked");
                    p.inflight_bytes -= f.1;
                }
                if p.probing && resp.seq >= p.probe_seq {
                    p.probing = false;
                    p.next = received_end;
                } else {
                    p.next = p.next.max(received_end);
                }
                if received_end >= log_start {
                    p.snapshot_needed = false;
                }
                let advanced = p.matched > matched_before;
                if advanced {
                    self.leader_update_hwm();
                }
                self.flush_peer(from);
            }
            AppendResult::Mismatch {
                end_offset,
                last_epoch,
                last_epoch_start,
            } => {
                if resp.seq < p.probe_seq {
                    return;
                }
                let target = match self.log.end_for_epoch(last_epoch) {
                    None => None,
                    Some((epoch, end)) => {
                        let mut m = end_offset.min(end);
                        if epoch != last_epoch {
                            m = m.min(last_epoch_start);
                        }
                        if m >= end_offset && end_offset > LogOffset::ZERO {
                            // No progress from the hint (should not happen): step back a batch.
                            m = end_offset.prev().expect("checked > 0");
                        }
                        Some(self.log.boundary_at_or_below(m))
                    }
                };
                p.inflight.clear();
                p.inflight_bytes = 0;
                p.probing = true;
                p.probe_seq = p.seq + 1;
                match target {
                    Some(m) if m >= log_start => p.next = m,
                    _ => {
                        p.snapshot_needed = true;
                        p.next = log_start;
                    }
                }
                self.flush_peer(from);
            }
            AppendResult::StaleEpoch => {}
        }
    }

    /// Recomputes the leader's HWM from durable acks of the current voter set.
    pub(crate) fn leader_update_hwm(&mut self) {
        let State::Leader(ls) = &self.state else {
            return;
        };
        let voters = self.voter_set();
        let mut acks = Vec::with_capacity(voters.len());
        for v in voters.voters() {
            if self.me.is(&v.key) {
                acks.push(self.durable_end);
            } else {
                acks.push(
                    ls.progress
                        .get(&v.key.id)
                        .map_or(LogOffset::ZERO, |p| p.matched),
                );
            }
        }
        let c = majority_offset(&mut acks).min(self.log.end());
        if c > self.hwm && c > ls.epoch_start && self.log.epoch_before(c) == Some(self.epoch) {
            self.hwm = c;
            self.after_leader_commit();
        }
    }

    // ----- follower (push) -----

    pub(crate) fn on_append(&mut self, from: NodeId, req: AppendRequest) {
        if req.leader != from || from == self.me.id {
            return;
        }
        if req.epoch < self.epoch {
            let resp = AppendResponse {
                epoch: self.epoch,
                replica: self.me,
                seq: req.seq,
                result: AppendResult::StaleEpoch,
            };
            self.send(from, Message::AppendResponse(resp));
            return;
        }
        let following = matches!(&self.state, State::Follower(f) if f.leader == req.leader);
        if req.epoch > self.epoch || !following {
            self.become_follower(req.epoch, req.leader, true);
        }
        let deadline = self.follower_deadline();
        let live_until = self.now_ms + self.config.fetch_timeout_ms;
        if let State::Follower(f) = &mut self.state {
            f.deadline_ms = deadline;
            f.live_until_ms = live_until;
            f.pushed = true;
            f.heard = true;
            f.last_seq = f.last_seq.max(req.seq);
        }
        let result = self.accept_entries(req.prev_end, req.prev_epoch, &req.batches);
        if let (Some(snap), Err(_)) = (req.snapshot, &result) {
            self.start_download(snap);
        }
        let result = match result {
            Ok(matched) => {
                let State::Follower(f) = &mut self.state else {
                    unreachable!("became follower above")
                };
                f.matched_end = f.matched_end.max(matched);
                let matched_end = f.matched_end;
                let durable = self.durable_end.min(matched_end);
                f.acked_durable = f.acked_durable.max(durable);
                self.follower_set_hwm(req.high_watermark);
                AppendResult::Ok {
                    received_end: matched_end,
                    durable_end: durable,
                }
            }
            Err(m) => m,
        };
        let resp = AppendResponse {
            epoch: self.epoch,
            replica: self.me,
            seq: req.seq,
            result,
        };
        self.send(from, Message::AppendResponse(resp));
    }

    fn follower_set_hwm(&mut self, leader_hwm: LogOffset) {
        let State::Follower(f) = &self.state else {
            return;
        };
        let h = leader_hwm.min(f.matched_end);
        if h > self.hwm {
            self.hwm = h;
            self.evict_payloads();
        }
    }

    /// Checks that the log matches the leader's at `prev_end` and appends `batches` after it,
    /// truncating a diverging suffix. Returns the end of the prefix now known to match.
    pub(crate) fn accept_entries(
        &mut self,
        prev_end: LogOffset,
        prev_epoch: Epoch,
        batches: &[Batch],
    ) -> Result<LogOffset, AppendResult> {
        let end = self.log.end();
        let start = self.log.start();
        if prev_end > end {
            return Err(AppendResult::Mismatch {
                end_offset: end,
                last_epoch: self.log.last_epoch(),
                last_epoch_start: self.log.epoch_run_start(end),
            });
        }
        if prev_end >= start {
            let mine = self
                .log
                .epoch_before(prev_end)
                .expect("prev_end is within [start, end]");
            if mine != prev_epoch {
                // The entry before prev_end differs: report our epoch there and where its run starts.
                return Err(AppendResult::Mismatch {
                    end_offset: prev_end,
                    last_epoch: mine,
                    last_epoch_start: self.log.epoch_run_start(prev_end),
                });
            }
        }
        // Below our log start everything is committed and therefore matches.
        let mut pos = prev_end.max(start);
        for b in batches {
            if b.end_offset() <= start {
                continue;
            }
            if b.base_offset < pos {
                // Straddles our log start: impossible for snapshots at batch boundaries.
                continue;
            }
            assert_eq!(
                b.base_offset, pos,
                "batches in a message are contiguous (checked at decode)"
            );
            if b.base_offset < self.log.end() {
                if self.log.has_batch(b.base_offset, b.epoch, b.record_count) {
                    pos = b.end_offset();
                    continue;
                }
                self.truncate(b.base_offset);
                if self.log.end() < b.base_offset {
                    // The truncation removed a batch straddling this one: everything before the
                    // new end matched; the leader will probe for the rest.
                    return Ok(self.log.end());
                }
            }
            if b.epoch < self.log.last_epoch() || b.epoch > self.epoch {
                // A batch that would break epoch order cannot come from a correct leader.
                break;
            }
            self.log.append(b);
            if b.control {
                self.note_control_batch(b);
            }
            self.out.entries.push(b.clone());
            pos = b.end_offset();
        }
        Ok(pos)
    }

    /// After an fsync: tell the leader what is durable now.
    pub(crate) fn follower_ack(&mut self) {
        let durable = self.durable_end;
        let epoch = self.epoch;
        let me = self.me;
        let State::Follower(f) = &mut self.state else {
            return;
        };
        if !f.pushed {
            return;
        }
        let d = durable.min(f.matched_end);
        if d > f.acked_durable {
            f.acked_durable = d;
            let resp = AppendResponse {
                epoch,
                replica: me,
                seq: f.last_seq,
                result: AppendResult::Ok {
                    received_end: f.matched_end,
                    durable_end: d,
                },
            };
            let leader = f.leader;
            self.send(leader, Message::AppendResponse(resp));
        }
    }

    pub(crate) fn follower_tick(&mut self) {
        let now = self.now_ms;
        let is_voter = self.is_voter();
        let dynamic = self.kraft_version() >= 1;
        let my_endpoints = self
            .voter_set()
            .get(self.me.id)
            .map(|v| v.endpoints.clone());
        let State::Follower(f) = &mut self.state else {
            return;
        };
        if let Some(d) = &f.download {
            if now.saturating_sub(d.sent_ms) >= self.config.request_timeout_ms {
                self.resend_download_request();
            }
            return;
        }
        let pull = !f.pushed || !is_voter;
        let fetch_due = match f.fetch {
            None => true,
            Some((_, _, sent)) => {
                now.saturating_sub(sent)
                    >= self.config.fetch_wait_max_ms + self.config.request_timeout_ms
            }
        };
        // A static quorum's voters are configured, never updated (see `Restore`).
        let update_due = is_voter
            && dynamic
            && now >= f.update_voter_at_ms
            && my_endpoints.as_ref() != Some(&self.endpoints);
        if update_due {
            f.update_voter_at_ms = now + self.config.fetch_timeout_ms;
        }
        let leader = f.leader;
        if pull && fetch_due {
            self.send_fetch();
        }
        self.maybe_join();
        if update_due {
            let request_id = self.next_request_id;
            self.next_request_id += 1;
            let voter = Voter {
                key: self.me,
                endpoints: self.endpoints.clone(),
            };
            self.send(
                leader,
                Message::UpdateVoter(UpdateVoterRequest { request_id, voter }),
            );
        }
    }

    // ----- fetch (pull) -----

    /// This replica's log as the follower's fetch rules see it: committed up to the HWM.
    fn follower_log(&self) -> CoreLog<'_> {
        CoreLog {
            log: &self.log,
            hwm: self.hwm,
        }
    }

    pub(crate) fn send_fetch(&mut self) {
        let now = self.now_ms;
        let req = fetch_request(
            &self.follower_log(),
            self.epoch,
            self.me,
            self.hwm,
            self.config.fetch_wait_max_ms,
        );
        let State::Follower(f) = &mut self.state else {
            return;
        };
        if f.download.is_some() || now < f.retry_at_ms {
            // Downloading, or pausing after a failed download: the tick fetches once the
            // pause is over (no fetch is outstanding).
            return;
        }
        f.fetch = Some((req.fetch_offset, req.last_fetched_epoch, now));
        let leader = f.leader;
        self.send(leader, Message::Fetch(req));
    }

    pub(crate) fn on_fetch(&mut self, from: NodeId, req: FetchRequest) {
        if req.replica.id != from || from == self.me.id {
            return;
        }
        if req.epoch > self.epoch {
            self.become_unattached(req.epoch);
        }
        if !matches!(self.state, State::Leader(_)) || req.epoch < self.epoch {
            let resp = FetchResponse {
                epoch: self.epoch,
                leader: self.leader_hint(),
                result: FetchResult::NotLeader,
            };
            self.send(from, Message::FetchResponse(resp));
            return;
        }
        let now = self.now_ms;
        let log_end = self.log.end();
        if let State::Leader(ls) = &mut self.state {
            let before = ls.fetchers.get(&from).filter(|f| f.key == req.replica);
            let caught_up_before = before.and_then(|f| f.last_caught_up_ms);
            let answered = before.and_then(|f| f.answered);
            ls.fetchers.insert(
                from,
                super::Fetcher {
                    key: req.replica,
                    last_fetch_ms: now,
                    fetch_offset: req.fetch_offset,
                    last_caught_up_ms: if req.fetch_offset >= log_end {
                        Some(now)
                    } else {
                        caught_up_before
                    },
                    answered,
                },
            );
            if let Some(p) = ls.progress.get_mut(&from) {
                if req.replica.is(&p.key) {
                    p.answered_as = req.replica;
                    p.last_heard_ms = now;
                }
            }
            ls.held_fetches.remove(&from);
        }
        self.serve_fetch(from, req, true);
    }

    /// When an observer's fetch may be answered: `Config::observer_fetch_interval_ms` after
    /// its last answer if that answer took it to the log's end then, else at once (it is
    /// catching up: the last answer was cut by the byte limit). `None` for a voter's fetch, and
    /// for every fetch when the interval is 0 (served as a voter's: at once, on either).
    fn observer_not_before(&self, from: NodeId, req: &FetchRequest) -> Option<u64> {
        let State::Leader(ls) = &self.state else {
            return None;
        };
        if ls.progress.contains_key(&from) || self.config.observer_fetch_interval_ms == 0 {
            return None;
        }
        Some(match ls.fetchers.get(&from).and_then(|f| f.answered) {
            Some((at_ms, end)) if req.fetch_offset >= end => {
                at_ms + self.config.observer_fetch_interval_ms
            }
            _ => 0,
        })
    }

    /// Answers a fetch now, or holds it (long-poll) if `may_hold` and the fetcher is caught up:
    /// a voter with the whole log and the high watermark, an observer with every committed
    /// entry and the high watermark (uncommitted ones do not wake it), or an observer answered
    /// less than `Config::observer_fetch_interval_ms` ago.
    fn serve_fetch(&mut self, from: NodeId, req: FetchRequest, may_hold: bool) {
        let log_start = self.log.start();
        let observer_not_before = self.observer_not_before(from, &req);
        let result = if req.fetch_offset < log_start {
            FetchResult::SnapshotNeeded {
                snapshot: self.log.start_id(),
            }
        } else if req.fetch_offset > self.log.end()
            || self.log.epoch_before(req.fetch_offset) != Some(req.last_fetched_epoch)
        {
            match self.log.end_for_epoch(req.last_fetched_epoch) {
                Some((epoch, end)) => FetchResult::Diverging {
                    fetch_offset: req.fetch_offset,
                    last_fetched_epoch: req.last_fetched_epoch,
                    epoch,
                    end_offset: end.min(req.fetch_offset),
                },
                None => FetchResult::SnapshotNeeded {
                    snapshot: self.log.start_id(),
                },
            }
        } else if let Some(not_before) = observer_not_before.filter(|t| {
            may_hold
                && req.wait_max_ms > 0
                && (self.now_ms < *t
                    || (req.fetch_offset >= self.hwm && req.high_watermark >= self.hwm))
        }) {
            let wait = req.wait_max_ms.min(self.config.fetch_wait_max_ms);
            let deadline_ms = self.now_ms + wait;
            if let State::Leader(ls) = &mut self.state {
                ls.held_fetches.insert(
                    from,
                    HeldFetch {
                        req,
                        deadline_ms,
                        observer: true,
                        not_before_ms: not_before,
                    },
                );
            }
            return;
        } else if req.fetch_offset < self.log.end() {
            match self.log.read(req.fetch_offset, self.config.batch_bytes_max) {
                Ok(batches) => FetchResult::Batches {
                    fetch_offset: req.fetch_offset,
                    last_fetched_epoch: req.last_fetched_epoch,
                    batches,
                    high_watermark: self.hwm,
                },
                Err(_) => {
                    let epoch = self.epoch;
                    let from_offset = req.fetch_offset;
                    self.request_read(
                        from_offset,
                        ReadPurpose::Fetch {
                            peer: from,
                            req,
                            epoch,
                        },
                    );
                    return;
                }
            }
        } else if may_hold && req.high_watermark >= self.hwm && req.wait_max_ms > 0 {
            let wait = req.wait_max_ms.min(self.config.fetch_wait_max_ms);
            let deadline_ms = self.now_ms + wait;
            if let State::Leader(ls) = &mut self.state {
                ls.held_fetches.insert(
                    from,
                    HeldFetch {
                        req,
                        deadline_ms,
                        observer: false,
                        not_before_ms: 0,
                    },
                );
            }
            return;
        } else {
            FetchResult::Batches {
                fetch_offset: req.fetch_offset,
                last_fetched_epoch: req.last_fetched_epoch,
                batches: Vec::new(),
                high_watermark: self.hwm,
            }
        };
        if observer_not_before.is_some() {
            let (now, end) = (self.now_ms, self.log.end());
            if let State::Leader(ls) = &mut self.state {
                if let Some(f) = ls.fetchers.get_mut(&from) {
                    f.answered = Some((now, end));
                }
            }
        }
        let resp = FetchResponse {
            epoch: self.epoch,
            leader: Some(self.me.id),
            result,
        };
        self.send(from, Message::FetchResponse(resp));
    }

    /// Answers held fetches whose wait expired or that can now see new entries or a newer HWM
    /// (an observer's: a newer HWM or committed entries it lacks, once its interval passed).
    fn answer_held_fetches(&mut self) {
        let now = self.now_ms;
        let end = self.log.end();
        let hwm = self.hwm;
        let State::Leader(ls) = &mut self.state else {
            return;
        };
        if ls.held_fetches.is_empty() {
            return;
        }
        let due: Vec<NodeId> = ls
            .held_fetches
            .iter()
            .filter(|(_, h)| {
                now >= h.deadline_ms
                    || if h.observer {
                        now >= h.not_before_ms
                            && (hwm > h.req.high_watermark || hwm > h.req.fetch_offset)
                    } else {
                        end > h.req.fetch_offset || hwm > h.req.high_watermark
                    }
            })
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            let State::Leader(ls) = &mut self.state else {
                return;
            };
            let h = ls.held_fetches.remove(&id).expect("listed above");
            self.serve_fetch(id, h.req, false);
        }
    }

    pub(crate) fn on_fetch_response(&mut self, from: NodeId, resp: FetchResponse) {
        // Only the leader's own answer proves it is alive; another replica's hint is followed
        // by observers (who never vote) and probed by voters (see on_vote_response).
        let hint = resp.leader.filter(|l| *l != self.me.id);
        let voter = self.can_campaign();
        let unled = matches!(
            self.state,
            State::Unattached { .. } | State::Prospective { .. } | State::Candidate { .. }
        );
        if resp.epoch > self.epoch || (resp.epoch == self.epoch && unled) {
            match hint {
                Some(l) if l == from || !voter => {
                    self.become_follower(resp.epoch, l, false);
                    self.mark_heard(l == from);
                }
                Some(l) => {
                    if resp.epoch > self.epoch {
                        self.become_unattached(resp.epoch);
                    }
                    self.probe_leader(l);
                }
                None if resp.epoch > self.epoch => self.become_unattached(resp.epoch),
                None => {}
            }
        }
        if resp.epoch < self.epoch {
            return;
        }
        let deadline = self.follower_deadline();
        let live_until = self.now_ms + self.config.fetch_timeout_ms;
        let State::Follower(f) = &mut self.state else {
            return;
        };
        if f.leader != from || resp.leader != Some(from) {
            // Our leader disowns the epoch (it resigned or restarted). The fetch stays
            // outstanding, so it is retried only after the request timeout; an observer goes
            // back to discovering the leader, a voter waits for its election timeout.
            if f.leader == from && !self.can_campaign() {
                let epoch = self.epoch;
                self.become_unattached(epoch);
            }
            return;
        }
        f.deadline_ms = deadline;
        f.live_until_ms = live_until;
        f.heard = true;
        // Only the answer to the outstanding fetch moves the fetch loop on: a late or
        // duplicated answer is dropped, so duplicates never start a second fetch loop. The
        // rules for the answer itself are the follower's, shared with the client's observer.
        let Some(outstanding) = f.fetch else { return };
        let log = self.follower_log();
        let current = (log.end(), log.last_epoch());
        let step = match fetch_step(&log, resp.epoch, resp.result) {
            Ok(step) => step,
            // A leader never sends this: the fetch stays outstanding and is sent again after
            // the request timeout (never in a loop with the leader).
            Err(_) => return,
        };
        // Data and divergence answers echo the fetch; they apply only if it is the
        // outstanding one and the log is still as it was when fetched (same end and last
        // epoch, then the same prefix by log matching).
        let data = matches!(step, FetchStep::Append { .. } | FetchStep::Truncate { .. });
        if data && (outstanding.0, outstanding.1) != current {
            return;
        }
        let State::Follower(f) = &mut self.state else {
            unreachable!("checked above");
        };
        match step {
            FetchStep::Append {
                batches,
                high_watermark,
            } => {
                f.fetch = None;
                f.leader_hwm = Some(high_watermark);
                let (fetch_offset, prev_epoch) = (self.log.end(), self.log.last_epoch());
                if let Ok(matched) = self.accept_entries(fetch_offset, prev_epoch, &batches) {
                    if let State::Follower(f) = &mut self.state {
                        f.matched_end = f.matched_end.max(matched);
                    }
                    self.follower_set_hwm(high_watermark);
                }
            }
            FetchStep::Truncate { to } => {
                f.fetch = None;
                if to < self.log.end() {
                    self.truncate(to);
                }
            }
            FetchStep::Snapshot(snapshot) => {
                f.fetch = None;
                self.start_download(snapshot);
            }
            FetchStep::Stale | FetchStep::NotLeader => return,
        }
        let pull = match &self.state {
            State::Follower(f) => !f.pushed || !self.is_voter(),
            _ => false,
        };
        if pull {
            self.send_fetch();
        }
    }
}

/// The core's log index seen as a follower's log ([`FollowerLog`]).
struct CoreLog<'a> {
    log: &'a LogIndex,
    hwm: LogOffset,
}

impl FollowerLog for CoreLog<'_> {
    fn end(&self) -> LogOffset {
        self.log.end()
    }

    fn last_epoch(&self) -> Epoch {
        self.log.last_epoch()
    }

    fn end_for_epoch(&self, epoch: Epoch) -> LogOffset {
        self.log
            .end_for_epoch(epoch)
            .map_or(self.log.start(), |(_, end)| end)
    }

    fn committed_end(&self) -> LogOffset {
        self.hwm
    }
}

#[cfg(test)]
mod tests {
    use crate::sim::{Cluster, ClusterSpec};
    use corum_types::NodeId;

    /// Messages sent for 30 proposals made one at a time, each as soon as the previous one
    /// committed (one client), and whether every follower learns the last commit afterwards.
    fn one_client(linger_ms: u64) -> (u64, bool) {
        let mut spec = ClusterSpec::new(11, 3, 0);
        spec.raft.hwm_linger_ms = linger_ms;
        let mut c = Cluster::new(spec).unwrap();
        assert!(c.run_until(5_000, |c| c.leader().is_some()));
        let leader = c.leader().unwrap();
        c.run_for(500);
        let before = c.net.sent;
        for i in 0..30u32 {
            c.propose(leader, &i.to_be_bytes()).unwrap().unwrap();
            let end = c.core(leader).unwrap().log_end_offset();
            assert!(c.run_until(2_000, |c| c.core(leader).unwrap().high_watermark() >= end));
        }
        let sent = c.net.sent - before;
        let hwm = c.core(leader).unwrap().high_watermark();
        let followers: Vec<NodeId> = c.ids().into_iter().filter(|&id| id != leader).collect();
        let learned = c.run_until(linger_ms + 100, |c| {
            followers
                .iter()
                .all(|&f| c.core(f).unwrap().high_watermark() >= hwm)
        });
        (sent, learned)
    }

    /// Messages the leader sent to an observer while a proposal went in every 2 ms for 400 ms,
    /// and whether the observer then learned the last commit within the interval (+ 50 ms).
    /// `cut`: answers of the simulator's 512 bytes, which leave the observer behind.
    fn steady_load_to_observer(interval_ms: u64, cut: bool) -> (u64, bool) {
        let mut spec = ClusterSpec::new(12, 3, 1);
        spec.raft.observer_fetch_interval_ms = interval_ms;
        if !cut {
            // One answer holds everything a caught-up observer lacks.
            spec.raft.batch_bytes_max = spec.raft.append_inflight_bytes_max;
        }
        let mut c = Cluster::new(spec).unwrap();
        assert!(c.run_until(5_000, |c| c.leader().is_some()));
        let leader = c.leader().unwrap();
        let observer = NodeId(4);
        assert!(!c.core(observer).unwrap().voter_set().contains_id(observer));
        c.run_for(500);
        let before = c.net.sent_to.get(&observer).copied().unwrap_or(0);
        for i in 0..200u32 {
            c.propose(leader, &i.to_be_bytes()).unwrap().unwrap();
            c.run_for(2);
        }
        let sent = c.net.sent_to[&observer] - before;
        let end = c.core(leader).unwrap().log_end_offset();
        assert!(c.run_until(1_000, |c| c.core(leader).unwrap().high_watermark() >= end));
        let learned = c.run_until(interval_ms + 50, |c| {
            c.core(observer).unwrap().high_watermark() >= end
        });

        (sent, learned)
    }

    /// Under a steady load, a caught-up observer is answered at each new high watermark and
    /// each append without pacing; with it, at most once per interval (and never for
    /// uncommitted entries alone), and it still learns every commit. An observer left behind
    /// by an answer cut at the byte limit is not paced while it catches up.
    #[test]
    fn observer_fetches_are_paced_under_load() {
        let (at_once, learned_at_once) = steady_load_to_observer(0, false);
        let (paced, learned_paced) = steady_load_to_observer(20, false);
        assert!(learned_at_once && learned_paced);
        let (_, learned_cut) = steady_load_to_observer(20, true);
        assert!(learned_cut, "an observer behind a cut answer was paced");
        // 400 ms at most one answer per 20 ms, plus the first at once.
        assert!(paced <= 400 / 20 + 2, "{paced} answers paced");
        assert!(
            at_once >= 4 * paced,
            "{at_once} answers at once, {paced} paced"
        );
    }

    /// The leader stamps each batch with its wall clock at append, and every replica keeps
    /// that stamp: voters through appends, an observer through fetches.
    #[test]
    fn batches_carry_the_leaders_append_time_to_every_replica() {
        let mut c = Cluster::new(ClusterSpec::new(13, 3, 1)).unwrap();
        assert!(c.run_until(5_000, |c| c.leader().is_some()));
        let leader = c.leader().unwrap();
        c.run_for(100);
        let at = crate::sim::SIM_WALL_CLOCK_BASE_MS + c.now_ms as i64;
        let p = c.propose(leader, b"stamped").unwrap().unwrap();
        assert!(c.run_until(2_000, |c| c.ids().iter().all(|id| c
            .core(*id)
            .unwrap()
            .high_watermark()
            >= p.end_offset)));
        for id in c.ids() {
            let b = c.nodes[&id]
                .disk
                .log
                .iter()
                .find(|b| b.base_offset == p.base_offset)
                .unwrap_or_else(|| panic!("node {id} holds the batch"));
            assert_eq!(b.timestamp_ms, at, "node {id}");
        }
        // The leader's first batch of its epoch (LeaderChange) is stamped too.
        assert!(c.nodes[&leader].disk.log[0].timestamp_ms > crate::sim::SIM_WALL_CLOCK_BASE_MS);
    }

    /// With a high-watermark linger, a commit at low load costs fewer messages (the next
    /// proposal's append carries the newer high watermark), and followers still learn every
    /// commit within the linger.
    #[test]
    fn a_lingering_high_watermark_rides_the_next_append() {
        let (at_once, learned_at_once) = one_client(0);
        let (lingering, learned_lingering) = one_client(40);
        assert!(learned_at_once && learned_lingering);
        assert!(
            lingering * 4 <= at_once * 3,
            "{lingering} messages with the linger, {at_once} without"
        );
    }
}
