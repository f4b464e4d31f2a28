//! Snapshots at core level (KIP-630): the log start offset moves up to a snapshot the driver
//! wrote; a replica behind the leader's log start downloads the leader's snapshot in chunks
//! with the follower's [`SnapshotDownload`] (the one the client's metadata follower uses too:
//! bounded by [`crate::Config::snapshot_bytes_max`], every chunk checked), then installs it.
//!
//! | download event | effect |
//! |---|---|
//! | Fetch answer `SnapshotNeeded(id)` or Append hint `id`, `id` beyond the HWM, no pause pending | download starts: FetchSnapshot at 0 |
//! | chunk accepted, more to come | FetchSnapshot at the new position at once; the failure run resets |
//! | last chunk, valid voter set | snapshot installed (replaces the log), fetch from its end |
//! | refused chunk (wrong id, position, size or voters; too large; empty before the end), invalid voter set, `SnapshotNotFound`, `NotLeader` | download dropped; no fetch and no new download for the pause ([`crate::follower::Backoff`]: `retry_backoff_ms`, doubled per failure in a row, at most `request_timeout_ms`) |
//! | no answer within `request_timeout_ms` | the same position asked again |

use corum_types::{LogOffset, NodeId};

use super::{Download, RaftCore, State};
use crate::error::{Error, Result, SnapshotChunkError};
use crate::follower::{DownloadStep, SnapshotDownload};
use crate::message::{FetchSnapshotRequest, FetchSnapshotResponse, FetchSnapshotResult, Message};
use crate::types::{Payload, Snapshot, SnapshotId, VoterSet};

impl RaftCore {
    /// The id, voter set and `kraft.version` a snapshot through `end_offset` gets (committed,
    /// at a batch boundary, not below the log start), without changing anything: the driver
    /// writes the snapshot durably with these before it calls [`RaftCore::snapshot_created`].
    pub fn snapshot_at(&self, end_offset: LogOffset) -> Result<(SnapshotId, VoterSet, u16)> {
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
        if self.voters[split].1.is_empty() {
            return Err(Error::SnapshotWithoutVoters { end: end_offset });
        }
        Ok((
            SnapshotId { end_offset, epoch },
            self.voters[split].1.clone(),
            self.kraft_version_at(end_offset),
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
        let (id, base, kraft_version) = self.snapshot_at(end_offset)?;
        let split = self.voters_split(end_offset);
        let mut rest: Vec<_> = self.voters.split_off(split + 1);
        self.voters = vec![(end_offset, base.clone())];
        self.voters.append(&mut rest);
        self.kraft_base = kraft_version;
        if self.kraft_upgrade.is_some_and(|(at, _)| at < end_offset) {
            self.kraft_upgrade = None;
        }
        self.log.compact(id);
        self.durable_end = self.durable_end.max(end_offset);
        self.snapshot = Some(Snapshot {
            id,
            voters: base,
            kraft_version,
            data,
        });
        Ok(id)
    }

    /// Starts downloading snapshot `id` from the leader (a Fetch answer or an Append hint named
    /// it), unless it is committed here already, is being downloaded, or the pause after a
    /// failed download has not passed (the next hint after it starts it).
    pub(crate) fn start_download(&mut self, id: SnapshotId) {
        let now = self.now_ms;
        let epoch = self.epoch;
        let me = self.me;
        let size_max = self.config.snapshot_bytes_max;
        if id.end_offset <= self.hwm {
            return;
        }
        let State::Follower(f) = &mut self.state else {
            return;
        };
        if f.download
            .as_ref()
            .is_some_and(|d| d.chunks.snapshot() == id)
            || now < f.retry_at_ms
        {
            return;
        }
        let chunks = SnapshotDownload::new(id, size_max);
        let req = chunks.request(epoch, me);
        f.download = Some(Download {
            chunks,
            sent_ms: now,
        });
        f.fetch = None;
        let leader = f.leader;
        self.send(leader, Message::FetchSnapshot(req));
    }

    /// The download request of a follower asked again: the same position after a request
    /// timeout (the bytes received so far are kept).
    pub(crate) fn resend_download_request(&mut self) {
        let now = self.now_ms;
        let epoch = self.epoch;
        let me = self.me;
        let State::Follower(f) = &mut self.state else {
            return;
        };
        let Some(d) = &mut f.download else { return };
        d.sent_ms = now;
        let req = d.chunks.request(epoch, me);
        let leader = f.leader;
        self.send(leader, Message::FetchSnapshot(req));
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
                        kraft_version: s.kraft_version,
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

    /// A FetchSnapshot answer from the leader: checked and appended by the download (see
    /// [`SnapshotDownload`]); the next chunk is asked at once, a finished snapshot installed.
    /// A download that ends without a snapshot (refused chunk, `SnapshotNotFound`,
    /// `NotLeader`, an invalid voter set) is dropped, nothing of it kept, and the follower
    /// fetches again only after a pause that doubles per such download in a row
    /// ([`crate::Config::retry_backoff_ms`], at most the request timeout).
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
        let refused = match d.chunks.on_result(resp.result) {
            Ok(DownloadStep::Next { .. }) => {
                f.deadline_ms = deadline;
                f.live_until_ms = live_until;
                f.heard = true;
                f.retry.succeeded();
                d.sent_ms = now;
                let req = d.chunks.request(epoch, me);
                self.send(from, Message::FetchSnapshot(req));
                return;
            }
            Ok(DownloadStep::Complete) => {
                f.deadline_ms = deadline;
                f.live_until_ms = live_until;
                f.heard = true;
                let d = f.download.take().expect("matched above");
                let snapshot = d
                    .chunks
                    .snapshot_complete()
                    .expect("the download completed");
                match snapshot.voters.validate() {
                    Ok(()) => {
                        f.retry.succeeded();
                        self.install_snapshot(snapshot);
                        return;
                    }
                    Err(Error::VoterSet(reason)) => {
                        Some(SnapshotChunkError::InvalidVoters { reason })
                    }
                    Err(_) => Some(SnapshotChunkError::InvalidVoters {
                        reason: "the voter set does not validate",
                    }),
                }
            }
            Ok(DownloadStep::NotFound | DownloadStep::NotLeader) => None,
            Err(e) => Some(e),
        };
        f.download = None;
        f.retry_at_ms = now + f.retry.failed();
        self.stats.snapshot_downloads_abandoned += 1;
        if refused.is_some() {
            self.stats.last_snapshot_chunk_error = refused;
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
        self.kraft_base = self.kraft_base.max(s.kraft_version);
        self.kraft_upgrade = None;
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

#[cfg(test)]
mod tests {
    use corum_types::{Epoch, Uuid};

    use super::*;
    use crate::config::Config;
    use crate::core::Restore;
    use crate::error::SnapshotChunkError;
    use crate::message::{FetchResponse, FetchResult};
    use crate::types::{QuorumStateRecord, ReplicaKey, Voter};

    const LEADER: NodeId = NodeId(1);
    const ME: u32 = 4;

    fn key(i: u32) -> ReplicaKey {
        ReplicaKey {
            id: NodeId(i),
            directory_id: Uuid([i as u8; 16]),
        }
    }

    fn id() -> SnapshotId {
        SnapshotId {
            end_offset: LogOffset(10),
            epoch: Epoch(1),
        }
    }

    fn voters() -> VoterSet {
        VoterSet::new(
            (1..=3)
                .map(|i| Voter {
                    key: key(i),
                    endpoints: vec![],
                })
                .collect(),
        )
        .unwrap()
    }

    /// The FetchSnapshot and Fetch requests in the next Ready (to the leader), and whether it
    /// installs a snapshot.
    fn requests(c: &mut RaftCore) -> (Vec<FetchSnapshotRequest>, usize, bool) {
        let Some(r) = c.ready() else {
            return (Vec::new(), 0, false);
        };
        let mut chunks = Vec::new();
        let mut fetches = 0;
        for (to, m) in r.messages {
            match m {
                Message::FetchSnapshot(f) => {
                    assert_eq!(to, LEADER);
                    chunks.push(f);
                }
                Message::Fetch(_) => fetches += 1,
                _ => {}
            }
        }
        (chunks, fetches, r.snapshot.is_some())
    }

    /// An observer of voters 1..3 following leader 1 in epoch 1, which answered its fetch
    /// with `SnapshotNeeded(e1@10)`: it asked for the snapshot's first chunk.
    fn downloading() -> RaftCore {
        let restore = Restore {
            quorum_state: QuorumStateRecord::default(),
            snapshot: None,
            log: vec![],
            bootstrap_voters: voters(),
            kraft_version: 1,
        };
        let mut c = RaftCore::new(Config::default(), key(ME), vec![], restore, 7, 0).unwrap();
        let answer = |result| {
            Message::FetchResponse(FetchResponse {
                epoch: Epoch(1),
                leader: Some(LEADER),
                result,
            })
        };
        c.step(LEADER, answer(FetchResult::NotLeader));
        c.tick(1);
        let (_, fetches, _) = requests(&mut c);
        assert_eq!(fetches, 1, "the observer fetches from the leader it learnt");
        c.step(
            LEADER,
            answer(FetchResult::SnapshotNeeded { snapshot: id() }),
        );
        let (chunks, _, _) = requests(&mut c);
        assert_eq!(chunks.len(), 1);
        assert_eq!((chunks[0].snapshot, chunks[0].position), (id(), 0));
        c
    }

    fn chunk(size_total: u64, position: u64, bytes: &[u8]) -> Message {
        Message::FetchSnapshotResponse(FetchSnapshotResponse {
            epoch: Epoch(1),
            leader: Some(LEADER),
            result: FetchSnapshotResult::Chunk {
                kraft_version: 1,
                snapshot: id(),
                voters: voters(),
                size_total,
                position,
                bytes: Payload::from(bytes),
            },
        })
    }

    /// Chunks in order are asked one after the other and the finished snapshot is installed
    /// with the chunks' voter set; the observer then fetches from its end.
    #[test]
    fn chunks_in_order_install_the_snapshot() {
        let mut c = downloading();
        c.step(LEADER, chunk(6, 0, b"abcd"));
        let (chunks, _, installed) = requests(&mut c);
        assert_eq!(chunks.iter().map(|f| f.position).collect::<Vec<_>>(), [4]);
        assert!(!installed);
        c.step(LEADER, chunk(6, 4, b"ef"));
        let r = c.ready().expect("the install");
        let s = r.snapshot.expect("a snapshot to install");
        assert_eq!(
            (s.id, &s.data[..], s.voters),
            (id(), &b"abcdef"[..], voters())
        );
        assert!(r.messages.iter().any(|(to, m)| *to == LEADER
            && matches!(m, Message::Fetch(f) if f.fetch_offset == LogOffset(10))));
        assert_eq!(c.log_start_offset(), LogOffset(10));
        assert_eq!(c.stats().snapshots_installed, 1);
        c.check_invariants();
    }

    /// After a download ends without a snapshot the observer neither fetches nor downloads
    /// until the pause (`retry_backoff_ms`, doubled per failure in a row) has passed; then it
    /// fetches again, and the leader's next `SnapshotNeeded` starts the download over.
    fn pauses_then_fetches(c: &mut RaftCore, pause_ms: u64) {
        let now = c.now_ms();
        c.tick(now + pause_ms - 1);
        let (chunks, fetches, _) = requests(c);
        assert_eq!((chunks.len(), fetches), (0, 0), "asked during the pause");
        c.tick(now + pause_ms);
        let (chunks, fetches, _) = requests(c);
        assert_eq!((chunks.len(), fetches), (0, 1), "no fetch after the pause");
        c.step(
            LEADER,
            Message::FetchResponse(FetchResponse {
                epoch: Epoch(1),
                leader: Some(LEADER),
                result: FetchResult::SnapshotNeeded { snapshot: id() },
            }),
        );
        let (chunks, _, _) = requests(c);
        assert_eq!(chunks.iter().map(|f| f.position).collect::<Vec<_>>(), [0]);
    }

    /// A snapshot larger than `snapshot_bytes_max` is refused at its first chunk: the core
    /// asks for no more of it (the old core kept assembling whatever size a leader stated),
    /// records why, and fetches again only after the pause.
    #[test]
    fn a_snapshot_above_the_size_limit_is_refused() {
        let mut c = downloading();
        let huge = (1u64 << 30) + 1;
        c.step(LEADER, chunk(huge, 0, b"abcd"));
        let (chunks, fetches, installed) = requests(&mut c);
        assert!(
            chunks.is_empty(),
            "asked for more of a refused snapshot: {chunks:?}"
        );
        assert_eq!(fetches, 0);
        assert!(!installed);
        assert_eq!(c.stats().snapshot_downloads_abandoned, 1);
        assert_eq!(
            c.stats().last_snapshot_chunk_error,
            Some(SnapshotChunkError::TooLarge {
                size_total: huge,
                size_max: 1 << 30
            })
        );
        c.check_invariants();
        pauses_then_fetches(&mut c, Config::default().retry_backoff_ms);
    }

    /// A chunk stating another total size than the first one is refused: the old core
    /// installed the bytes it had as soon as they reached the smaller size (a snapshot cut
    /// short).
    #[test]
    fn a_chunk_changing_the_total_size_is_refused() {
        let mut c = downloading();
        c.step(LEADER, chunk(8, 0, b"abcd"));
        let (chunks, _, _) = requests(&mut c);
        assert_eq!(chunks.iter().map(|f| f.position).collect::<Vec<_>>(), [4]);
        c.step(LEADER, chunk(6, 4, b"ef"));
        let (chunks, _, installed) = requests(&mut c);
        assert!(!installed, "installed a snapshot whose size changed");
        assert!(chunks.is_empty(), "{chunks:?}");
        assert_eq!(c.stats().snapshots_installed, 0);
        assert_eq!(
            c.stats().last_snapshot_chunk_error,
            Some(SnapshotChunkError::SizeChanged { was: 8, now: 6 })
        );
        assert_eq!(c.log_end_offset(), LogOffset(0));
        c.check_invariants();
        pauses_then_fetches(&mut c, Config::default().retry_backoff_ms);
    }

    /// Empty chunks before the end are not re-asked at once: the old core answered each with
    /// the same request (a tight loop with a leader that keeps answering empty chunks). Each
    /// failed download in a row doubles the pause before the next fetch.
    #[test]
    fn empty_chunks_are_not_re_asked_in_a_tight_loop() {
        let mut c = downloading();
        let mut asked = 0;
        for _ in 0..10 {
            c.step(LEADER, chunk(8, 0, b""));
            asked += requests(&mut c).0.len();
        }
        assert_eq!(asked, 0, "re-asked {asked} times without any time passing");
        assert_eq!(
            c.stats().last_snapshot_chunk_error,
            Some(SnapshotChunkError::NoProgress {
                position: 0,
                size_total: 8
            })
        );
        c.check_invariants();
        let base = Config::default().retry_backoff_ms;
        pauses_then_fetches(&mut c, base);
        c.step(LEADER, chunk(8, 0, b""));
        assert!(requests(&mut c).0.is_empty());
        pauses_then_fetches(&mut c, 2 * base);
        // Progress resets the run of failures.
        c.step(LEADER, chunk(8, 0, b"ab"));
        assert_eq!(requests(&mut c).0.len(), 1);
        c.step(LEADER, chunk(8, 2, b""));
        assert!(requests(&mut c).0.is_empty());
        pauses_then_fetches(&mut c, base);
    }

    /// `SnapshotNotFound` (the leader wrote a newer snapshot) drops the download and the
    /// observer fetches again after the pause, not in a loop with the leader.
    #[test]
    fn snapshot_not_found_pauses_before_fetching_again() {
        let mut c = downloading();
        c.step(
            LEADER,
            Message::FetchSnapshotResponse(FetchSnapshotResponse {
                epoch: Epoch(1),
                leader: Some(LEADER),
                result: FetchSnapshotResult::SnapshotNotFound,
            }),
        );
        assert_eq!(requests(&mut c), (vec![], 0, false));
        assert_eq!(c.stats().snapshot_downloads_abandoned, 1);
        assert_eq!(c.stats().last_snapshot_chunk_error, None);
        pauses_then_fetches(&mut c, Config::default().retry_backoff_ms);
    }

    /// An unanswered chunk request is asked again after the request timeout at the same
    /// position: the bytes received are kept.
    #[test]
    fn a_lost_chunk_request_is_asked_again_at_the_same_position() {
        let mut c = downloading();
        c.step(LEADER, chunk(8, 0, b"abcd"));
        assert_eq!(requests(&mut c).0.len(), 1);
        let timeout = Config::default().request_timeout_ms;
        let now = c.now_ms();
        c.tick(now + timeout - 1);
        assert!(requests(&mut c).0.is_empty());
        c.tick(now + timeout);
        let (chunks, _, _) = requests(&mut c);
        assert_eq!(chunks.iter().map(|f| f.position).collect::<Vec<_>>(), [4]);
        c.step(LEADER, chunk(8, 4, b"efgh"));
        assert!(requests(&mut c).2, "installed");
    }

    /// A finished snapshot whose chunks state an invalid voter set is not installed.
    #[test]
    fn a_snapshot_with_an_invalid_voter_set_is_not_installed() {
        let mut c = downloading();
        c.step(
            LEADER,
            Message::FetchSnapshotResponse(FetchSnapshotResponse {
                epoch: Epoch(1),
                leader: Some(LEADER),
                result: FetchSnapshotResult::Chunk {
                    kraft_version: 1,
                    snapshot: id(),
                    voters: VoterSet::default(),
                    size_total: 2,
                    position: 0,
                    bytes: Payload::from(&b"ab"[..]),
                },
            }),
        );
        let (_, _, installed) = requests(&mut c);
        assert!(!installed);
        assert!(matches!(
            c.stats().last_snapshot_chunk_error,
            Some(SnapshotChunkError::InvalidVoters { .. })
        ));
        c.check_invariants();
    }
}
