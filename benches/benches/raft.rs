//! Raft core throughput: a 3-voter cluster in memory (no IO; messages delivered directly,
//! every append "fsynced" at once) committing proposals.
//!
//! The throughput unit (criterion's `elem/s`) is **proposals committed**: one `propose` call,
//! one Raft batch, whatever its record count. The core treats a batch's payload as opaque
//! bytes and its record count only advances offsets, so a proposal of 256 records is the same
//! Raft work as a proposal of one (plus its bytes); counting it as 256 would report the
//! caller's batching, not the core's speed.
//!
//! | bench | one iteration | proposals | records |
//! |---|---|---|---|
//! | `1_proposer` | one one-record proposal, committed before the next (a round trip each) | 1 | 1 |
//! | `256_proposers` | 256 one-record proposals, then committed together (pipelined in one append) | 256 | 256 |
//! | `1_proposal_of_256_records` | one proposal of 256 records (a driver-side accumulator's batch), committed | 1 | 256 |
//!
//! Records per second of the last one are 256 × its figure.

use std::collections::VecDeque;
use std::sync::Arc;

use corum_raft::{
    Config, Message, Payload, RaftCore, Ready, ReplicaKey, Restore, Role, Voter, VoterSet,
};
use corum_types::{LogOffset, NodeId, Uuid};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

struct MemCluster {
    cores: Vec<RaftCore>,
    queue: VecDeque<(NodeId, NodeId, Message)>,
    leader: usize,
    committed_since_compaction: u64,
}

fn key(i: u32) -> ReplicaKey {
    ReplicaKey {
        id: NodeId(i),
        directory_id: Uuid([i as u8; 16]),
    }
}

impl MemCluster {
    fn new() -> Self {
        let voters = VoterSet::new(
            (1..=3)
                .map(|i| Voter {
                    key: key(i),
                    endpoints: vec![],
                })
                .collect(),
        )
        .unwrap();
        let config = Config {
            batch_bytes_max: 1 << 20,
            append_inflight_count_max: 64,
            append_inflight_bytes_max: 64 << 20,
            payload_cache_bytes_max: 8 << 20,
            ..Config::default()
        };
        let cores = (1..=3)
            .map(|i| {
                let restore = Restore {
                    quorum_state: Default::default(),
                    snapshot: None,
                    log: vec![],
                    bootstrap_voters: voters.clone(),
                    kraft_version: 1,
                };
                RaftCore::new(config.clone(), key(i), vec![], restore, u64::from(i), 0).unwrap()
            })
            .collect();
        let mut c = Self {
            cores,
            queue: VecDeque::new(),
            leader: 0,
            committed_since_compaction: 0,
        };
        c.cores[0].campaign();
        c.pump();
        assert_eq!(c.cores[0].role(), Role::Leader);
        c
    }

    fn apply(&mut self, i: usize, r: Ready) {
        let from = self.cores[i].id();
        let last = r.entries.last().map(|b| (b.end_offset(), b.epoch));
        for (to, m) in r.messages {
            self.queue.push_back((from, to, m));
        }
        // The in-memory "disk" is durable at once.
        if let Some((end, epoch)) = last {
            self.cores[i].persisted(end, epoch);
        }
    }

    /// Runs until no node has anything to do.
    fn pump(&mut self) {
        loop {
            let mut idle = true;
            for i in 0..self.cores.len() {
                while let Some(r) = self.cores[i].ready() {
                    idle = false;
                    self.apply(i, r);
                }
            }
            while let Some((from, to, m)) = self.queue.pop_front() {
                idle = false;
                let i = (to.0 - 1) as usize;
                self.cores[i].step(from, m);
                while let Some(r) = self.cores[i].ready() {
                    self.apply(i, r);
                }
            }
            if idle {
                return;
            }
        }
    }

    /// Proposes `batches` batches of `records` records each and pumps until all committed;
    /// returns the records committed.
    fn round(&mut self, batches: usize, records: u32, payload: &Payload) -> u64 {
        let mut end = LogOffset::ZERO;
        for _ in 0..batches {
            end = self.cores[self.leader]
                .propose(payload.clone(), records)
                .unwrap()
                .end_offset;
        }
        self.pump();
        assert!(
            self.cores[self.leader].high_watermark() >= end,
            "committed in one round"
        );
        let n = batches as u64 * u64::from(records);
        self.committed_since_compaction += n;
        if self.committed_since_compaction > 100_000 {
            // Keep the in-memory index bounded, as the controller's snapshots would.
            self.committed_since_compaction = 0;
            for c in &mut self.cores {
                let hwm = c.high_watermark();
                let _ = c.snapshot_created(hwm, Payload::from(&b"bench"[..]));
            }
            self.pump();
        }
        n
    }
}

fn bench(c: &mut Criterion) {
    let record = Arc::<[u8]>::from(vec![7u8; 64]);
    let packed = Arc::<[u8]>::from(vec![7u8; 64 * 256]);
    let mut g = c.benchmark_group("raft_commit_3_voters");
    // Every iteration's throughput is the number of proposals it commits (see the module doc).
    let mut cluster = MemCluster::new();
    g.throughput(Throughput::Elements(1));
    g.bench_function("1_proposer", |b| b.iter(|| cluster.round(1, 1, &record)));
    let mut cluster = MemCluster::new();
    g.throughput(Throughput::Elements(256));
    g.bench_function("256_proposers", |b| {
        b.iter(|| cluster.round(256, 1, &record))
    });
    let mut cluster = MemCluster::new();
    g.throughput(Throughput::Elements(1));
    g.bench_function("1_proposal_of_256_records", |b| {
        b.iter(|| cluster.round(1, 256, &packed))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
