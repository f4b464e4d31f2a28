//! [`MetadataFollower`]: an observer following the metadata log with long-poll `Fetch`, in a
//! background glommio task, keeping its own [`MetadataImage`] (the pure part is
//! [`ObserverLog`]).
//!
//! | fetch outcome | the task |
//! |---|---|
//! | `Fetch` answer that applies or buffers | fetches again at once |
//! | `Fetch` answer ignored / `NotLeader` | fetches again at once if it taught a newer epoch, else after a backoff |
//! | `Fetch` answer `SnapshotNeeded` | downloads the snapshot (below), then goes on |
//! | [`ClientError`] (the client already retried leaders up to its deadline; or `NotImplemented`: a node that does not serve `Fetch`) | backoff, then again |
//! | [`ObserverError`] | stops; [`MetadataFollower::failure`] says why, waiters wake |
//!
//! A snapshot is downloaded with `FetchSnapshot`, one chunk at a time from the position
//! received so far ([`SnapshotDownload`], the Raft core's own followers' download, checks
//! each), in the leader epoch the observer knows;
//! each call waits up to the client's `request_timeout` (the leader answers at once). The
//! download holds the whole snapshot in memory, at most [`SNAPSHOT_BYTES_MAX`].
//!
//! | `FetchSnapshot` outcome | the task |
//! |---|---|
//! | a chunk, more to come | asks for the next one at once |
//! | the last chunk | installs the snapshot ([`ObserverLog::install_snapshot`]), wakes the waiters it satisfies, fetches from its end at once |
//! | the snapshot does not load ([`ObserverError::BadSnapshot`]) | stops, as for a batch that does not decode |
//! | `SnapshotNotFound` (the leader wrote a newer one) | drops the download, fetches again (the answer names the new snapshot) after a backoff: a node that keeps naming a snapshot it cannot serve is not asked in a tight loop |
//! | `NotLeader`, or an answer of another epoch | notes the epoch and leader; drops the download; fetches again at once if the epoch is newer, else after a backoff |
//! | a chunk [`SnapshotDownload`] refuses ([`crate::SnapshotChunkError`]) | drops the download, fetches again after a backoff |
//! | [`ClientError`] | the same chunk again after a backoff; after [`SNAPSHOT_CHUNK_ATTEMPTS_MAX`] failures in a row drops the download and fetches again after a backoff |
//!
//! The follower is glommio-local and meant to be shared (`Rc`) by every broker session of one
//! executor: they all report its [`MetadataFollower::next_offset`]. Dropping it (or
//! [`MetadataFollower::stop`]) cancels the task.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use corum_controller::MetadataImage;
use corum_raft::message::FetchSnapshotResult;
use corum_raft::{ReplicaKey, SnapshotId};
use corum_types::{Epoch, LogOffset};
use glommio::task::JoinHandle;

use crate::controller_client::ControllerClient;
use crate::error::{ClientError, ObserverError};
use crate::observer_log::{ObserverLog, ObserverStats, SnapshotInstall};
use corum_raft::follower::{Backoff, DownloadStep, SnapshotDownload, SNAPSHOT_BYTES_MAX};

/// First pause (ms) after a fetch that did not progress; doubled per such fetch in a row
/// ([`Backoff`]).
const PAUSE_BASE_MS: u64 = 5;
/// Largest pause (ms) between two fetches.
const PAUSE_CAP_MS: u64 = 200;
/// Calls of one snapshot chunk that may fail with a [`ClientError`] in a row before the
/// download is dropped (each after the client's own retries of leaders).
pub const SNAPSHOT_CHUNK_ATTEMPTS_MAX: u32 = 4;

/// Counters of a [`MetadataFollower`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FollowerStats {
    /// Fetch calls sent.
    pub fetches: u64,
    /// Fetch calls that failed (after the client's own retries).
    pub fetch_errors: u64,
    /// FetchSnapshot calls sent.
    pub snapshot_fetches: u64,
    /// FetchSnapshot calls that failed (after the client's own retries).
    pub snapshot_fetch_errors: u64,
    /// Bytes of snapshot chunks accepted.
    pub snapshot_bytes: u64,
    /// Snapshot downloads dropped before their install (`SnapshotNotFound`, `NotLeader`, a
    /// refused chunk, failed calls). Installs are counted in
    /// [`ObserverStats::snapshots_installed`].
    pub snapshot_downloads_dropped: u64,
    /// What the log itself counted.
    pub log: ObserverStats,
}

struct Shared {
    log: RefCell<ObserverLog>,
    /// Tasks waiting in `wait_for`, by the offset they wait for: woken once the applied end
    /// reaches it, or when the task stops. (Thousands of broker sessions may wait at once: an
    /// apply wakes only those it satisfies.)
    waiters: RefCell<BTreeMap<LogOffset, Vec<Waker>>>,
    failure: RefCell<Option<ObserverError>>,
    /// Set when the follower is dropped: waiters are released.
    stopped: Cell<bool>,
    fetches: Cell<u64>,
    fetch_errors: Cell<u64>,
    snapshot_fetches: Cell<u64>,
    snapshot_fetch_errors: Cell<u64>,
    snapshot_bytes: Cell<u64>,
    snapshot_downloads_dropped: Cell<u64>,
    last_error: RefCell<Option<ClientError>>,
}

fn bump(counter: &Cell<u64>, n: u64) {
    counter.set(counter.get() + n);
}

impl Shared {
    fn wake_all(&self) {
        let all = std::mem::take(&mut *self.waiters.borrow_mut());
        for w in all.into_values().flatten() {
            w.wake();
        }
    }

    /// Wakes the waiters of offsets up to `applied_end`.
    fn wake_reached(&self, applied_end: LogOffset) {
        let due = {
            let mut waiters = self.waiters.borrow_mut();
            let later = waiters.split_off(&applied_end.next());
            std::mem::replace(&mut *waiters, later)
        };
        for w in due.into_values().flatten() {
            w.wake();
        }
    }
}

/// An observer of the metadata log. See the module doc.
pub struct MetadataFollower {
    shared: Rc<Shared>,
    replica: ReplicaKey,
    task: JoinHandle<()>,
}

impl MetadataFollower {
    /// Starts following as `replica`, long-polling up to `wait_max` per fetch. Must run
    /// inside a glommio executor. The leader keys fetchers by id (one held fetch per id), so
    /// `replica.id` must be unique among everything fetching from the cluster and must not be
    /// a voter's id; a broker's follower uses the broker id.
    pub fn start(client: ControllerClient, replica: ReplicaKey, wait_max: Duration) -> Self {
        let shared = Rc::new(Shared {
            log: RefCell::new(ObserverLog::new()),
            waiters: RefCell::default(),
            failure: RefCell::default(),
            stopped: Cell::new(false),
            fetches: Cell::new(0),
            fetch_errors: Cell::new(0),
            snapshot_fetches: Cell::new(0),
            snapshot_fetch_errors: Cell::new(0),
            snapshot_bytes: Cell::new(0),
            snapshot_downloads_dropped: Cell::new(0),
            last_error: RefCell::default(),
        });
        let task = glommio::spawn_local(follow(client, replica, wait_max, shared.clone())).detach();
        MetadataFollower {
            shared,
            replica,
            task,
        }
    }

    /// The replica this follower fetches as.
    pub fn replica(&self) -> ReplicaKey {
        self.replica
    }

    /// The offset after the last applied record (exclusive): what a broker reports as
    /// NextMetadataOffset.
    pub fn next_offset(&self) -> LogOffset {
        self.shared.log.borrow().applied_end()
    }

    /// The end of what was fetched, applied or not (fetched data beyond the high watermark
    /// waits in a buffer).
    pub fn fetched_end(&self) -> LogOffset {
        self.shared.log.borrow().end()
    }

    /// The highest high watermark a leader reported.
    pub fn high_watermark(&self) -> LogOffset {
        self.shared.log.borrow().high_watermark()
    }

    /// The highest leader epoch seen.
    pub fn leader_epoch(&self) -> Epoch {
        self.shared.log.borrow().epoch()
    }

    /// The last snapshot installed, if any.
    pub fn snapshot(&self) -> Option<SnapshotId> {
        self.shared.log.borrow().snapshot()
    }

    /// The image of the applied prefix (O(1): a structurally shared copy).
    pub fn image(&self) -> MetadataImage {
        self.shared.log.borrow().image().clone()
    }

    /// Why the follower stopped, if it did (it does only on an [`ObserverError`]).
    pub fn failure(&self) -> Option<ObserverError> {
        self.shared.failure.borrow().clone()
    }

    /// The last Fetch or FetchSnapshot call error (the follower keeps retrying after one).
    pub fn last_error(&self) -> Option<ClientError> {
        self.shared.last_error.borrow().clone()
    }

    pub fn stats(&self) -> FollowerStats {
        FollowerStats {
            fetches: self.shared.fetches.get(),
            fetch_errors: self.shared.fetch_errors.get(),
            snapshot_fetches: self.shared.snapshot_fetches.get(),
            snapshot_fetch_errors: self.shared.snapshot_fetch_errors.get(),
            snapshot_bytes: self.shared.snapshot_bytes.get(),
            snapshot_downloads_dropped: self.shared.snapshot_downloads_dropped.get(),
            log: self.shared.log.borrow().stats(),
        }
    }

    /// Waits until the applied end reaches `offset`; false if `timeout` passed first or the
    /// follower stopped.
    pub async fn wait_for(&self, offset: LogOffset, timeout: Duration) -> bool {
        let reached = Reached {
            shared: &self.shared,
            offset,
            registered: None,
        };
        let waited = futures_lite::future::or(async { Some(reached.await) }, async {
            glommio::timer::sleep(timeout).await;
            None
        })
        .await;
        waited.unwrap_or(false)
    }

    /// Ends the task (dropping the follower does the same).
    pub fn stop(self) {}
}

impl Drop for MetadataFollower {
    fn drop(&mut self) {
        self.task.cancel();
        self.shared.stopped.set(true);
        self.shared.wake_all();
    }
}

/// Resolves to true once the applied end reaches `offset`, to false if the follower stops.
struct Reached<'a> {
    shared: &'a Shared,
    offset: LogOffset,
    /// The waker registered for `offset` (polls with the same waker do not register again).
    registered: Option<Waker>,
}

impl Future for Reached<'_> {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        if self.shared.log.borrow().applied_end() >= self.offset {
            return Poll::Ready(true);
        }
        if self.shared.failure.borrow().is_some() || self.shared.stopped.get() {
            return Poll::Ready(false);
        }
        let this = self.get_mut();
        if !this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            this.shared
                .waiters
                .borrow_mut()
                .entry(this.offset)
                .or_default()
                .push(cx.waker().clone());
            this.registered = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

fn backoff() -> Backoff {
    Backoff::new(PAUSE_BASE_MS, PAUSE_CAP_MS)
}

async fn pause(backoff: &mut Backoff) {
    glommio::timer::sleep(Duration::from_millis(backoff.failed())).await;
}

/// The follower's task: fetch, apply (or download and install a snapshot), repeat.
async fn follow(
    client: ControllerClient,
    replica: ReplicaKey,
    wait_max: Duration,
    shared: Rc<Shared>,
) {
    let wait_max_ms = wait_max.as_millis() as u64;
    // The leader holds a caught-up fetch up to `wait_max`; the answer may then take a request
    // timeout more.
    let timeout = wait_max + client.config().request_timeout;
    let mut idle = backoff();
    loop {
        let req = shared.log.borrow().fetch_request(replica, wait_max_ms);
        let epoch_before = req.epoch;
        bump(&shared.fetches, 1);
        let progressed = match client.fetch(req, timeout).await {
            Ok(resp) => {
                let outcome = shared.log.borrow_mut().on_response(resp);
                match outcome {
                    Ok(p) => {
                        if let Some(last) = p.applied.last() {
                            shared.wake_reached(last.end_offset);
                        }
                        let newer_epoch = shared.log.borrow().epoch() > epoch_before;
                        match p.snapshot_needed {
                            Some(id) => {
                                match download_snapshot(&client, replica, id, &shared).await {
                                    Ok(progressed) => progressed,
                                    Err(e) => return stop(&shared, replica, e),
                                }
                            }
                            None => !p.ignored || newer_epoch,
                        }
                    }
                    Err(e) => return stop(&shared, replica, e),
                }
            }
            Err(e) => {
                bump(&shared.fetch_errors, 1);
                tracing::debug!(?replica, error = %e, "metadata fetch failed");
                *shared.last_error.borrow_mut() = Some(e);
                false
            }
        };
        if progressed {
            idle.succeeded();
        } else {
            pause(&mut idle).await;
        }
    }
}

/// Ends the task on an error its log cannot go past, releasing every waiter.
fn stop(shared: &Shared, replica: ReplicaKey, e: ObserverError) {
    tracing::error!(?replica, error = %e, "metadata follower stops");
    *shared.failure.borrow_mut() = Some(e);
    shared.wake_all();
}

/// Downloads snapshot `id` from the leader chunk by chunk and installs it (see the module
/// doc's second table). `Ok(true)`: fetch again at once; `Ok(false)`: after a backoff (the
/// download was dropped, or the install gained nothing); `Err`: the snapshot does not load.
async fn download_snapshot(
    client: &ControllerClient,
    replica: ReplicaKey,
    id: SnapshotId,
    shared: &Shared,
) -> Result<bool, ObserverError> {
    // The leader answers a FetchSnapshot at once: no long-poll time to add.
    let timeout = client.config().request_timeout;
    let mut download = SnapshotDownload::new(id, SNAPSHOT_BYTES_MAX);
    let mut failures = backoff();
    let dropped = |why: &str| {
        bump(&shared.snapshot_downloads_dropped, 1);
        tracing::debug!(?replica, snapshot = ?id, why, "snapshot download dropped");
    };
    loop {
        let epoch = shared.log.borrow().epoch();
        let req = download.request(epoch, replica);
        bump(&shared.snapshot_fetches, 1);
        let resp = match client.fetch_snapshot(req, timeout).await {
            Ok(resp) => resp,
            Err(e) => {
                bump(&shared.snapshot_fetch_errors, 1);
                tracing::debug!(?replica, error = %e, "snapshot fetch failed");
                *shared.last_error.borrow_mut() = Some(e);
                if failures.failures() + 1 >= SNAPSHOT_CHUNK_ATTEMPTS_MAX {
                    dropped("calls kept failing");
                    return Ok(false);
                }
                pause(&mut failures).await;
                continue;
            }
        };
        failures.succeeded();
        let stale = shared
            .log
            .borrow_mut()
            .observe_epoch(resp.epoch, resp.leader);
        if resp.epoch != epoch {
            // The node leads another epoch (it answered NotLeader): a Fetch in the epoch just
            // learnt names that leader's snapshot.
            dropped("another leader epoch");
            return Ok(!stale && resp.epoch > epoch);
        }
        let chunk_bytes = match &resp.result {
            FetchSnapshotResult::Chunk { bytes, .. } => bytes.len() as u64,
            _ => 0,
        };
        match download.on_result(resp.result) {
            Ok(DownloadStep::Next { .. }) => bump(&shared.snapshot_bytes, chunk_bytes),
            Ok(DownloadStep::Complete) => {
                bump(&shared.snapshot_bytes, chunk_bytes);
                let applied_before = shared.log.borrow().applied_end();
                let installed = shared
                    .log
                    .borrow_mut()
                    .install_snapshot(id, download.data())?;
                return Ok(match installed {
                    SnapshotInstall::Installed { records, .. } => {
                        tracing::info!(?replica, snapshot = ?id, records, "snapshot installed");
                        shared.wake_reached(id.end_offset);
                        id.end_offset > applied_before
                    }
                    // Nothing else moves the log while the task downloads; should a snapshot
                    // still be behind, fetching goes on from the applied end.
                    SnapshotInstall::Behind { .. } => false,
                });
            }
            Ok(DownloadStep::NotFound) => {
                dropped("the leader replaced the snapshot");
                return Ok(false);
            }
            Ok(DownloadStep::NotLeader) => {
                dropped("not the leader");
                return Ok(false);
            }
            Err(e) => {
                tracing::warn!(?replica, snapshot = ?id, error = %e, "snapshot chunk refused");
                dropped("a chunk was refused");
                return Ok(false);
            }
        }
    }
}
