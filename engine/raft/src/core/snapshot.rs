//! Snapshots at core level (KIP-630): the log start offset moves up to a snapshot the driver
//! wrote; a replica behind the leader's log start downloads the leader's snapshot in chunks.

use corum_types::{LogOffset, NodeId};

use super::{Download, RaftCore, State};
use crate::error::{Error, Result};
use crate::message::{FetchSnapshotRequest, FetchSnapshotResponse, FetchSnapshotResult, Message};
use crate::types::{Payload, Snapshot, SnapshotId, VoterSet};

impl RaftCore {
    /// The id and voter set a snapshot through `end_offset` gets (committed, at a batch
    /// boundary, not below the log start), without changing anything: the driver writes the
    /// snapshot durably with these before it calls [`RaftCore::snapshot_created`].
    pub fn snapshot_at(&self, end_offset: LogOffset) -> Result<(SnapshotId, VoterSet)> {
        let bad = || Error::SnapshotOffset {
            end: end_offset,
            log_start: self.log.start(),
            hwm: self.hwm,
        };
        if end_offset < self.log.start()
            || end_offset > self.hwm
            || !self.log.is_boundary(end_offset)
        {
            return Err(bad());
        }
        let epoch = self.log.epoch_before(end_offset).ok_or_else(bad)?;
        // The voter set in force at the snapshot's end: the last record below it.
        let split = self.voters_split(end_offset);
        Ok((
            SnapshotId { end_offset, epoch },
            self.voters[split].1.clone(),
        ))
    }

    /// Index of the voter set in force at `end_offset` in `self.voters`.
    fn voters_split(&self, end_offset: LogOffset) -> usize {
        self.voters
            .iter()
            .skip(1)
            .take_while(|(at, _)| *at < end_offset)
            .count()
    }

    /// The driver wrote a snapshot of the state machine through `end_offset` (committed, at a
    /// batch boundary; see [`RaftCore::snapshot_at`]). The core keeps it to serve FetchSnapshot
    /// and moves the log start up to it: [`crate::Ready::log_start_offset`] then lets the
    /// driver delete the prefix.
    pub fn snapshot_created(&mut self, end_offset: LogOffset, data: Payload) -> Result<SnapshotId> {
        let (id, base) = self.snapshot_at(end_offset)?;
        let split = self.voters_split(end_offset);
        let mut rest: Vec<_> = self.voters.split_off(split + 1);
        self.voters = vec![(end_offset, base.clone())];
        self.voters.append(&mut rest);
        self.log.compact(id);
        self.durable_end = self.durable_end.max(end_offset);
        self.snapshot = Some(Snapshot {
            id,
            voters: base,
            data,
        });
        Ok(id)
    }

    pub(crate) fn start_download(&mut self, id: SnapshotId) {
        let now = self.now_ms;
        let epoch = self.epoch;
        let me = self.me;
        if id.end_offset <= self.hwm {
            return;
        }
        let State::Follower(f) = &mut self.state else {
            return;
        };
        if f.download.as_ref().is_some_and(|d| d.id == id) {
            return;
        }
        f.download = Some(Download {
            id,
            buf: Vec::new(),
            sent_ms: now,
        });
        f.fetch = None;
        let leader = f.leader;
        self.send(
            leader,
            Message::FetchSnapshot(FetchSnapshotRequest {
                epoch,
                replica: me,
                snapshot: id,
                position: 0,
            }),
        );
    }

    pub(crate) fn on_fetch_snapshot(&mut self, from: NodeId, req: FetchSnapshotRequest) {
        if req.replica.id != from {
            return;
        }
        let result = if !matches!(self.state, State::Leader(_)) || req.epoch != self.epoch {
            FetchSnapshotResult::NotLeader
        } else {
            match &self.snapshot {
                Some(s) if s.id == req.snapshot && req.position <= s.data.len() as u64 => {
                    let pos = req.position as usize;
                    let end = (pos + self.config.snapshot_chunk_bytes_max).min(s.data.len());
                    FetchSnapshotResult::Chunk {
                        snapshot: s.id,
                        voters: s.voters.clone(),
                        size_total: s.data.len() as u64,
                        position: req.position,
                        bytes: Payload::from(&s.data[pos..end]),
                    }
                }
                _ => FetchSnapshotResult::SnapshotNotFound,
            }
        };
        let resp = FetchSnapshotResponse {
            epoch: self.epoch,
            leader: self.leader_hint(),
            result,
        };
        self.send(from, Message::FetchSnapshotResponse(resp));
    }

    pub(crate) fn on_fetch_snapshot_response(&mut self, from: NodeId, resp: FetchSnapshotResponse) {
        if resp.epoch != self.epoch {
            return;
        }
        let now = self.now_ms;
        let epoch = self.epoch;
        let me = self.me;
        let deadline = self.follower_deadline();
        let live_until = self.now_ms + self.config.fetch_timeout_ms;
        let State::Follower(f) = &mut self.state else {
            return;
        };
        if f.leader != from {
            return;
        }
        let Some(d) = &mut f.download else { return };
        match resp.result {
            FetchSnapshotResult::Chunk {
                snapshot,
                voters,
                size_total,
                position,
                bytes,
            } => {
                if snapshot != d.id || position != d.buf.len() as u64 || voters.validate().is_err()
                {
                    return;
                }
                f.deadline_ms = deadline;
                f.live_until_ms = live_until;
                f.heard = true;
                d.buf.extend_from_slice(&bytes);
                d.sent_ms = now;
                if d.buf.len() as u64 >= size_total {
                    let d = f.download.take().expect("checked");
                    self.install_snapshot(Snapshot {
                        id: d.id,
                        voters,
                        data: Payload::from(d.buf),
                    });
                } else {
                    let req = FetchSnapshotRequest {
                        epoch,
                        replica: me,
                        snapshot: d.id,
                        position: d.buf.len() as u64,
                    };
                    self.send(from, Message::FetchSnapshot(req));
                }
            }
            FetchSnapshotResult::SnapshotNotFound | FetchSnapshotResult::NotLeader => {
                f.download = None
            }
        }
    }

    /// Replaces the whole log with a snapshot received from the leader.
    fn install_snapshot(&mut self, s: Snapshot) {
        if s.id.end_offset <= self.hwm {
            return;
        }
        self.stats.snapshots_installed += 1;
        self.log.reset(s.id);
        self.voters = vec![(s.id.end_offset, s.voters.clone())];
        self.on_voter_set_changed();
        self.durable_end = s.id.end_offset;
        self.hwm = s.id.end_offset;
        self.out.entries.clear();
        self.out.truncate_to = None;
        self.out.snapshot = Some(s.clone());
        if let State::Follower(f) = &mut self.state {
            f.matched_end = s.id.end_offset;
            f.acked_durable = f.acked_durable.min(s.id.end_offset);
        }
        self.snapshot = Some(s);
        // Tell the leader where we are now.
        self.follower_ack_after_install();
    }

    fn follower_ack_after_install(&mut self) {
        let State::Follower(f) = &mut self.state else {
            return;
        };
        if f.pushed {
            f.acked_durable = LogOffset::ZERO;
            self.follower_ack();
        } else {
            self.send_fetch();
        }
    }
}
