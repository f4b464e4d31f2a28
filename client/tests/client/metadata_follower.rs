//! `MetadataFollower`'s fetch loop over the network against a scripted leader: a small RPC
//! server in the test answering `Fetch` and `FetchSnapshot` from a log the test edits
//! (appends, commits, a new leader truncating uncommitted batches, a snapshot replacing the
//! log prefix). It shows what the pure `ObserverLog` and `SnapshotDownload` tests cannot:
//! answers reach the log through a real connection, a node answering `NotImplemented` (no
//! Fetch support) is retried, a snapshot is downloaded in chunks and installed, waiters wake, and a
//! fatal answer stops the follower and releases its waiters.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use corum_client::{
    ClientConfig, ClientError, ControllerClient, MetadataFollower, ObserverError, RpcError,
};
use corum_controller::image::ConfigResource;
use corum_controller::records::ConfigResourceType;
use corum_controller::{decode_batch, encode_batch, MetadataImage};
use corum_protocol::{RequestBody, RequestFrame, ResponseBody, ResponseFrame};
use corum_raft::message::{
    FetchRequest, FetchResponse, FetchResult, FetchSnapshotRequest, FetchSnapshotResponse,
    FetchSnapshotResult,
};
use corum_raft::{Batch, Payload, ReplicaKey, SnapshotId, Voter, VoterSet};
use corum_runtime::transport::{ConnectionConfig, Listener};
use corum_types::{Epoch, LogOffset, NodeId, Uuid};

use crate::common::config_batches::batch;
use crate::common::{on_executor, wait_for};

const TEST_DEADLINE: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(10);

/// The scripted leader.
#[derive(Default)]
struct FakeLeader {
    log: Vec<Batch>,
    epoch: u64,
    /// Batches `..committed` are committed.
    committed: usize,
    /// Fetches still to answer `NotImplemented` (a node that does not serve Fetch).
    not_implemented_left: u32,
    /// Batches `..start` are deleted: the snapshot replaces them.
    start: usize,
    /// The snapshot the log starts at, and its bytes.
    snapshot: Option<(SnapshotId, Vec<u8>)>,
    /// Bytes per snapshot chunk.
    chunk_bytes: usize,
    /// FetchSnapshot requests answered.
    snapshot_requests: u32,
    /// After this many FetchSnapshot requests, the leader snapshots everything committed
    /// (replacing the snapshot being downloaded).
    resnapshot_after: Option<u32>,
}

impl FakeLeader {
    fn end(&self) -> u64 {
        self.log.last().map_or(0, |b| b.end_offset().0)
    }

    /// The log start: the snapshot's id (end 0, epoch 0 without one).
    fn start_id(&self) -> SnapshotId {
        self.log[..self.start].last().map_or(
            SnapshotId {
                end_offset: LogOffset(0),
                epoch: Epoch(0),
            },
            |b| SnapshotId {
                end_offset: b.end_offset(),
                epoch: b.epoch,
            },
        )
    }

    /// Snapshots the first `batches` (committed) batches and deletes them from the log.
    fn take_snapshot(&mut self, batches: usize) {
        assert!(batches <= self.committed);
        self.start = batches;
        let id = self.start_id();
        self.snapshot = Some((id, snapshot_data(&self.log[..batches])));
    }

    /// What the Raft core's leader answers a FetchSnapshot (`on_fetch_snapshot`).
    fn serve_snapshot(&mut self, req: &FetchSnapshotRequest) -> FetchSnapshotResponse {
        self.snapshot_requests += 1;
        if self.resnapshot_after == Some(self.snapshot_requests - 1) {
            self.take_snapshot(self.committed);
        }
        let result = if req.epoch.0 != self.epoch {
            FetchSnapshotResult::NotLeader
        } else {
            match &self.snapshot {
                Some((id, data)) if *id == req.snapshot && req.position <= data.len() as u64 => {
                    let at = req.position as usize;
                    let end = (at + self.chunk_bytes).min(data.len());
                    FetchSnapshotResult::Chunk {
                        kraft_version: 1,
                        snapshot: *id,
                        voters: voters(),
                        size_total: data.len() as u64,
                        position: req.position,
                        bytes: Payload::from(&data[at..end]),
                    }
                }
                _ => FetchSnapshotResult::SnapshotNotFound,
            }
        };
        FetchSnapshotResponse {
            epoch: Epoch(self.epoch),
            leader: Some(NodeId(1)),
            result,
        }
    }

    fn hwm(&self) -> u64 {
        self.log[..self.committed]
            .last()
            .map_or(0, |b| b.end_offset().0)
    }

    fn append(&mut self, count: u32, control: bool) {
        let b = batch(self.end(), count, self.epoch, control);
        self.log.push(b);
    }

    /// What the Raft core's leader answers, without holding the fetch.
    fn serve(&mut self, req: &FetchRequest) -> Result<ResponseBody, RpcError> {
        if self.not_implemented_left > 0 {
            self.not_implemented_left -= 1;
            return Err(RpcError::NotImplemented {
                api: "Fetch".into(),
            });
        }
        let at = req.fetch_offset.0;
        let start = self.start_id();
        let epoch_before = if at == start.end_offset.0 {
            Some(start.epoch.0)
        } else {
            self.log[self.start..]
                .iter()
                .find(|b| b.base_offset.0 < at && at <= b.end_offset().0)
                .map(|b| b.epoch.0)
        };
        let result = if req.epoch.0 != self.epoch {
            FetchResult::NotLeader
        } else if at < start.end_offset.0 {
            FetchResult::SnapshotNeeded { snapshot: start }
        } else if at > self.end() || epoch_before != Some(req.last_fetched_epoch.0) {
            let (epoch, end) = self
                .log
                .iter()
                .rev()
                .find(|b| b.epoch <= req.last_fetched_epoch)
                .map_or((0, 0), |b| (b.epoch.0, b.end_offset().0));
            FetchResult::Diverging {
                fetch_offset: req.fetch_offset,
                last_fetched_epoch: req.last_fetched_epoch,
                epoch: Epoch(epoch),
                end_offset: LogOffset(end.min(at)),
            }
        } else {
            FetchResult::Batches {
                fetch_offset: req.fetch_offset,
                last_fetched_epoch: req.last_fetched_epoch,
                batches: self.log[self.start..]
                    .iter()
                    .filter(|b| b.base_offset.0 >= at)
                    .take(8)
                    .cloned()
                    .collect(),
                high_watermark: LogOffset(self.hwm()),
            }
        };
        Ok(ResponseBody::Fetch(Box::new(FetchResponse {
            epoch: Epoch(self.epoch),
            leader: Some(NodeId(1)),
            result,
        })))
    }
}

/// Serves `leader` on an ephemeral loopback port: one task per connection answering each
/// request in turn; a fetch with nothing new is answered after a short pause (a stand-in
/// for the leader's long-poll).
fn serve(leader: Rc<RefCell<FakeLeader>>) -> SocketAddr {
    let config = ConnectionConfig {
        payload_bytes_max: 1 << 20,
        nodelay: true,
    };
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let addr = listener.local_addr();
    glommio::spawn_local(async move {
        while let Ok(mut conn) = listener.accept().await {
            let leader = leader.clone();
            glommio::spawn_local(async move {
                while let Ok(v) = conn.recv::<RequestFrame>().await {
                    let frame = RequestFrame::from_archived(v.get());
                    let body = match &frame.body {
                        RequestBody::Fetch(req) => {
                            if req.fetch_offset.0 >= leader.borrow().end()
                                && req.high_watermark.0 >= leader.borrow().hwm()
                            {
                                glommio::timer::sleep(Duration::from_millis(2)).await;
                            }
                            leader.borrow_mut().serve(req)
                        }
                        RequestBody::FetchSnapshot(req) => Ok(ResponseBody::FetchSnapshot(
                            Box::new(leader.borrow_mut().serve_snapshot(req)),
                        )),
                        other => Err(RpcError::NotImplemented {
                            api: other.kind().into(),
                        }),
                    };
                    let answer = ResponseFrame {
                        correlation_id: frame.correlation_id,
                        body,
                    };
                    if conn.send(&answer).await.is_err() {
                        break;
                    }
                }
            })
            .detach();
        }
    })
    .detach();
    addr
}

/// The voter set of a snapshot chunk (the observer ignores it; the client checks it is valid).
fn voters() -> VoterSet {
    VoterSet::new(vec![Voter {
        key: ReplicaKey {
            id: NodeId(1),
            directory_id: Uuid([1; 16]),
        },
        endpoints: Vec::new(),
    }])
    .expect("one voter")
}

/// The image the data batches of `batches` replay into.
fn image_of(batches: &[Batch]) -> MetadataImage {
    let mut image = MetadataImage::default();
    for b in batches.iter().filter(|b| !b.control) {
        let mut bytes = rkyv::util::AlignedVec::<16>::new();
        bytes.extend_from_slice(&b.payload);
        for (i, r) in decode_batch(&bytes).unwrap().iter().enumerate() {
            image.replay(b.base_offset.add(i as u64), r).unwrap();
        }
    }
    image.end_offset = batches.last().map_or(LogOffset(0), Batch::end_offset);
    image
}

/// The snapshot a leader writes of `batches`: one record batch rebuilding their image.
fn snapshot_data(batches: &[Batch]) -> Vec<u8> {
    encode_batch(&image_of(batches).snapshot_records()).to_vec()
}

fn value(follower: &MetadataFollower, key: &str) -> Option<String> {
    let resource = ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: String::new(),
    };
    follower
        .image()
        .configs
        .value(&resource, key)
        .map(str::to_owned)
}

fn replica() -> ReplicaKey {
    ReplicaKey {
        id: NodeId(100),
        directory_id: Uuid([100; 16]),
    }
}

/// An observer following the fake leader at `addr` (50 ms long polls).
async fn follower_of(addr: std::net::SocketAddr) -> MetadataFollower {
    let client = ControllerClient::connect(ClientConfig::new(vec![addr]))
        .await
        .unwrap();
    MetadataFollower::start(client, replica(), Duration::from_millis(50))
}

/// Through a node that first answers `NotImplemented`, the follower applies committed batches
/// only (waking a waiter), keeps the uncommitted tail in its buffer, drops that tail when a
/// new leader's log diverges, and ends with the new leader's data in its image.
#[test]
fn the_follower_applies_committed_data_and_survives_divergence() {
    on_executor("follower-fake", TEST_DEADLINE, || async {
        let leader = Rc::new(RefCell::new(FakeLeader {
            epoch: 1,
            not_implemented_left: 3,
            ..FakeLeader::default()
        }));
        {
            let mut l = leader.borrow_mut();
            l.append(1, true); // [0,1) control (the epoch's LeaderChange)
            l.append(2, false); // [1,3)
            l.append(2, false); // [3,5), not committed yet
            l.committed = 2;
        }
        let addr = serve(leader.clone());
        let follower = Rc::new(follower_of(addr).await);
        // A waiter for data the first leader never commits is woken by the second leader's.
        let later = {
            let follower = follower.clone();
            glommio::spawn_local(async move { follower.wait_for(LogOffset(5), WAIT).await })
        };
        assert!(follower.wait_for(LogOffset(3), WAIT).await);
        wait_for("the uncommitted tail to be fetched", || {
            follower.fetched_end() == LogOffset(5)
        })
        .await;
        assert_eq!(follower.next_offset(), LogOffset(3));
        assert_eq!(follower.high_watermark(), LogOffset(3));
        assert_eq!(value(&follower, "k1").as_deref(), Some("e1"));
        assert_eq!(value(&follower, "k3"), None);
        let stats = follower.stats();
        assert_eq!(stats.fetch_errors, 3, "{stats:?}");
        assert!(matches!(
            follower.last_error(),
            Some(ClientError::Rpc(RpcError::NotImplemented { ref api })) if api == "Fetch"
        ));
        assert!(
            !follower
                .wait_for(LogOffset(4), Duration::from_millis(50))
                .await
        );

        // A new leader (epoch 2) without the uncommitted tail writes and commits its own.
        {
            let mut l = leader.borrow_mut();
            l.log.truncate(2);
            l.epoch = 2;
            l.append(1, true); // [3,4) its LeaderChange
            l.append(1, false); // [4,5)
            l.committed = l.log.len();
        }
        assert!(later.await);
        assert!(follower.next_offset() >= LogOffset(5));
        assert_eq!(value(&follower, "k3"), None, "truncated data was applied");
        assert_eq!(value(&follower, "k4").as_deref(), Some("e2"));
        assert_eq!(follower.leader_epoch(), Epoch(2));
        let stats = follower.stats();
        assert!(stats.log.diverging >= 1, "{stats:?}");
        assert_eq!(stats.log.records_truncated, 2, "{stats:?}");
        assert!(follower.failure().is_none());
    });
}

/// A leader that deleted its log below a snapshot: a new observer downloads the snapshot in
/// chunks, starts over when the leader replaces it mid-download (`SnapshotNotFound`), installs
/// the newer one (waking a waiter at its end), and then applies what the leader commits after
/// it; its image equals one replayed from the whole log.
#[test]
fn the_follower_installs_a_snapshot_and_fetches_on_from_its_end() {
    on_executor("follower-snapshot", TEST_DEADLINE, || async {
        let leader = Rc::new(RefCell::new(FakeLeader {
            epoch: 1,
            chunk_bytes: 64,
            // The second chunk request finds a newer snapshot in place of the first.
            resnapshot_after: Some(1),
            ..FakeLeader::default()
        }));
        {
            let mut l = leader.borrow_mut();
            l.append(1, true); // [0,1)
            l.append(3, false); // [1,4)
            l.epoch = 2;
            l.append(1, true); // [4,5)
            l.append(4, false); // [5,9)
            l.append(2, false); // [9,11)
            l.committed = 5;
            l.take_snapshot(3); // deletes [0,9)
        }
        let first_len = leader.borrow().snapshot.as_ref().unwrap().1.len();
        assert!(first_len > 64, "the snapshot takes several chunks");
        let addr = serve(leader.clone());
        let follower = Rc::new(follower_of(addr).await);
        assert!(follower.wait_for(LogOffset(11), WAIT).await);
        let newer = SnapshotId {
            end_offset: LogOffset(11),
            epoch: Epoch(2),
        };
        assert_eq!(follower.snapshot(), Some(newer));
        assert_eq!(follower.next_offset(), LogOffset(11));
        assert_eq!(follower.image(), image_of(&leader.borrow().log));
        let stats = follower.stats();
        assert_eq!(stats.log.snapshots_installed, 1, "{stats:?}");
        assert_eq!(stats.snapshot_downloads_dropped, 1, "{stats:?}");
        assert!(stats.snapshot_fetches >= 3, "{stats:?}");
        assert_eq!(stats.log.batches_applied, 0, "{stats:?}");

        // Fetching goes on from the snapshot's end.
        {
            let mut l = leader.borrow_mut();
            l.append(2, false); // [11,13)
            l.committed = l.log.len();
        }
        assert!(follower.wait_for(LogOffset(13), WAIT).await);
        assert_eq!(value(&follower, "k12").as_deref(), Some("e2"));
        assert_eq!(follower.image(), image_of(&leader.borrow().log));
        assert_eq!(follower.stats().log.batches_applied, 1);
        assert!(follower.failure().is_none());
    });
}

/// A snapshot whose bytes do not load stops the follower: it reports why, and a waiter is
/// released at once rather than at its timeout.
#[test]
fn a_fatal_answer_stops_the_follower_and_releases_waiters() {
    on_executor("follower-fatal", TEST_DEADLINE, || async {
        let leader = Rc::new(RefCell::new(FakeLeader {
            epoch: 1,
            chunk_bytes: 64,
            ..FakeLeader::default()
        }));
        {
            let mut l = leader.borrow_mut();
            l.append(3, false);
            l.committed = 1;
            l.take_snapshot(1);
            l.snapshot.as_mut().unwrap().1 = vec![0xff; 100];
        }
        let addr = serve(leader);
        let follower = follower_of(addr).await;
        let started = std::time::Instant::now();
        assert!(!follower.wait_for(LogOffset(1), WAIT).await);
        assert!(started.elapsed() < WAIT);
        assert!(
            matches!(
                follower.failure(),
                Some(ObserverError::BadSnapshot { snapshot, .. })
                    if snapshot.end_offset == LogOffset(3)
            ),
            "{:?}",
            follower.failure()
        );
        assert_eq!(follower.next_offset(), LogOffset(0));
        assert_eq!(follower.stats().snapshot_bytes, 100);
    });
}
