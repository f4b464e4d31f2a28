//! Safety checks over a simulated cluster, run after every step.
//!
//! - **One leader per epoch**, over the whole run.
//! - **HWM monotonic** on every node (per incarnation: the HWM is not persisted).
//! - **Committed prefixes identical**: every batch below any node's HWM equals the batch the
//!   first node to commit that offset saw (offset, epoch, count, payload hash); a snapshot
//!   equals the digest of the committed prefix it covers.
//! - **Nothing committed is lost or changed**: a node that becomes leader holds the entire
//!   committed prefix (in its log or snapshot), and no data batch is committed that was never
//!   proposed.
//! - **Voter changes**: in every node's log, consecutive voter sets have intersecting
//!   majorities.
//!
//! Core invariants ([`crate::RaftCore::check_invariants`]) run for every live node too.

use std::collections::{BTreeMap, BTreeSet};

use corum_types::{Epoch, LogOffset, NodeId};

use super::Node;
use crate::core::Role;
use crate::types::{Batch, Payload, Snapshot};

#[derive(Clone, Debug, PartialEq, Eq)]
struct Committed {
    base: LogOffset,
    end: LogOffset,
    epoch: Epoch,
    hash: u64,
}

#[derive(Debug)]
pub struct Checker {
    committed: Vec<Committed>,
    /// Chain digest of the committed prefix ending at each committed batch end (and at 0).
    digests: BTreeMap<LogOffset, u64>,
    proposed: BTreeSet<(Epoch, LogOffset, u64)>,
    leaders: BTreeMap<Epoch, NodeId>,
    hwm: BTreeMap<NodeId, (u64, LogOffset)>,
    incarnation: BTreeMap<NodeId, u64>,
    checked: BTreeMap<NodeId, LogOffset>,
    leader_checked: BTreeSet<(NodeId, Epoch)>,
    voter_history_seen: BTreeMap<NodeId, (usize, LogOffset)>,
    pub violations: Vec<String>,
}

/// FNV-1a over bytes, seeded with the batch's position.
fn hash_batch(b: &Batch) -> u64 {
    let mut h: u64 =
        0xcbf2_9ce4_8422_2325 ^ b.base_offset.0 ^ (b.epoch.0 << 32) ^ u64::from(b.record_count);
    for &x in b.payload.iter() {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn hash_payload(p: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in p {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Default for Checker {
    fn default() -> Self {
        Self::new()
    }
}

impl Checker {
    pub fn new() -> Self {
        Self {
            committed: Vec::new(),
            digests: BTreeMap::from([(LogOffset::ZERO, 0)]),
            proposed: BTreeSet::new(),
            leaders: BTreeMap::new(),
            hwm: BTreeMap::new(),
            incarnation: BTreeMap::new(),
            checked: BTreeMap::new(),
            leader_checked: BTreeSet::new(),
            voter_history_seen: BTreeMap::new(),
            violations: Vec::new(),
        }
    }

    fn fail(&mut self, msg: String) {
        if self.violations.len() < 10 {
            self.violations.push(msg);
        }
    }

    pub fn committed_end(&self) -> LogOffset {
        self.committed.last().map_or(LogOffset::ZERO, |c| c.end)
    }

    pub fn committed_batches(&self) -> usize {
        self.committed.len()
    }

    /// Distinct epochs that had a leader.
    pub fn elections(&self) -> usize {
        self.leaders.len()
    }

    pub fn leader_of(&self, epoch: Epoch) -> Option<NodeId> {
        self.leaders.get(&epoch).copied()
    }

    /// The state machine's snapshot bytes at `offset`: offset and chain digest, padded with
    /// filler so that snapshots span several FetchSnapshot chunks.
    pub fn digest_at(&self, offset: LogOffset) -> Option<Payload> {
        let d = self.digests.get(&offset)?;
        let mut v = offset.0.to_be_bytes().to_vec();
        v.extend_from_slice(&d.to_be_bytes());
        v.extend((0..offset.0 % 150).map(|i| (i as u8) ^ (*d as u8)));
        Some(Payload::from(v))
    }

    pub fn on_proposed(&mut self, epoch: Epoch, base: LogOffset, payload: &[u8]) {
        self.proposed.insert((epoch, base, hash_payload(payload)));
    }

    pub fn on_start(&mut self, id: NodeId, incarnation: u64) {
        self.incarnation.insert(id, incarnation);
    }

    pub fn on_snapshot_installed(&mut self, id: NodeId, s: &Snapshot) {
        if self.digest_at(s.id.end_offset).as_deref() != Some(&s.data[..]) {
            self.fail(format!(
                "node {id} installed a snapshot at {} that differs from the committed prefix",
                s.id.end_offset
            ));
        }
    }

    fn committed_at(&self, base: LogOffset) -> Option<&Committed> {
        let i = self.committed.partition_point(|c| c.base < base);
        self.committed.get(i).filter(|c| c.base == base)
    }

    /// Checks one node after its Ready was applied.
    pub fn check_node(&mut self, id: NodeId, node: &Node) {
        let Some(core) = node.core.as_ref() else {
            return;
        };
        let inc = self.incarnation.get(&id).copied().unwrap_or(0);
        let hwm = core.high_watermark();
        // HWM monotonic within an incarnation.
        match self.hwm.get(&id) {
            Some(&(i, h)) if i == inc && hwm < h => {
                self.fail(format!("node {id}: HWM moved backward from {h} to {hwm}"));
            }
            _ => {}
        }
        self.hwm.insert(id, (inc, hwm));
        // One leader per epoch; a new leader holds every committed entry.
        if core.role() == Role::Leader {
            let epoch = core.epoch();
            match self.leaders.get(&epoch) {
                Some(&l) if l != id => {
                    self.fail(format!("two leaders in epoch {epoch}: {l} and {id}"))
                }
                _ => {
                    self.leaders.insert(epoch, id);
                }
            }
            if self.leader_checked.insert((id, epoch)) {
                self.check_leader_completeness(id, node);
            }
        }
        // The committed prefix grows identically everywhere.
        let start = node.disk.start();
        let mut from = self.checked.get(&id).copied().unwrap_or(LogOffset::ZERO);
        if start > from {
            if start > self.committed_end() {
                self.fail(format!(
                    "node {id}: log starts at {start}, beyond the committed end {}",
                    self.committed_end()
                ));
                return;
            }
            if let Some(s) = &node.disk.snapshot {
                if self.digest_at(s.id.end_offset).as_deref() != Some(&s.data[..]) {
                    self.fail(format!(
                        "node {id}: snapshot at {} differs from the committed prefix",
                        s.id.end_offset
                    ));
                }
            }
            from = start;
        }
        if hwm > from {
            let i = node.disk.log.partition_point(|b| b.end_offset() <= from);
            for b in &node.disk.log[i..] {
                if b.base_offset >= hwm {
                    break;
                }
                if b.end_offset() > hwm {
                    self.fail(format!(
                        "node {id}: HWM {hwm} inside batch [{}, {})",
                        b.base_offset,
                        b.end_offset()
                    ));
                    break;
                }
                self.commit(id, b);
            }
            self.checked.insert(id, hwm);
        }
        // Voter changes: consecutive sets in the log have intersecting majorities.
        let hist = core.voter_history();
        let sig = (hist.len(), hist.last().map_or(LogOffset::ZERO, |h| h.0));
        if self.voter_history_seen.get(&id) != Some(&sig) {
            self.voter_history_seen.insert(id, sig);
            for w in hist.windows(2) {
                if !w[0].1.majorities_intersect(&w[1].1) {
                    self.fail(format!(
                        "node {id}: voter sets {:?} and {:?} (at {}) have disjoint majorities",
                        w[0].1.ids().collect::<Vec<_>>(),
                        w[1].1.ids().collect::<Vec<_>>(),
                        w[1].0
                    ));
                }
            }
        }
    }

    fn commit(&mut self, id: NodeId, b: &Batch) {
        let c = Committed {
            base: b.base_offset,
            end: b.end_offset(),
            epoch: b.epoch,
            hash: hash_batch(b),
        };
        let end = self.committed_end();
        if b.base_offset < end {
            match self.committed_at(b.base_offset) {
                Some(prev) if *prev == c => {}
                Some(prev) => {
                    let prev = prev.clone();
                    self.fail(format!(
                        "node {id}: committed batch at {} is e{} [{}, {}) but was e{} [{}, {})",
                        b.base_offset,
                        b.epoch,
                        b.base_offset,
                        c.end,
                        prev.epoch,
                        prev.base,
                        prev.end
                    ));
                }
                None => self.fail(format!(
                    "node {id}: committed batch at {} is not on a committed boundary",
                    b.base_offset
                )),
            }
        } else if b.base_offset == end {
            if !b.control
                && !self
                    .proposed
                    .contains(&(b.epoch, b.base_offset, hash_payload(&b.payload)))
            {
                self.fail(format!(
                    "node {id}: committed batch at {} (e{}) was never proposed",
                    b.base_offset, b.epoch
                ));
            }
            let prev = *self
                .digests
                .get(&end)
                .expect("digest at every committed end");
            self.digests.insert(c.end, prev.rotate_left(7) ^ c.hash);
            self.committed.push(c);
        } else {
            self.fail(format!(
                "node {id}: committed batch at {} leaves a gap after {end}",
                b.base_offset
            ));
        }
    }

    fn check_leader_completeness(&mut self, id: NodeId, node: &Node) {
        let end = self.committed_end();
        if node.disk.end() < end {
            self.fail(format!(
                "node {id} became leader with log end {} < committed end {end}",
                node.disk.end()
            ));
            return;
        }
        let mut bad = None;
        for b in &node.disk.log {
            if b.base_offset >= end {
                break;
            }
            let c = Committed {
                base: b.base_offset,
                end: b.end_offset(),
                epoch: b.epoch,
                hash: hash_batch(b),
            };
            if self.committed_at(b.base_offset) != Some(&c) {
                bad = Some(b.base_offset);
                break;
            }
        }
        if let Some(at) = bad {
            self.fail(format!(
                "node {id} became leader without the committed batch at {at}"
            ));
        }
    }

    /// Core invariants of every live node.
    pub fn check_cluster(&mut self, nodes: &BTreeMap<NodeId, Node>, _now_ms: u64) {
        for n in nodes.values() {
            if let Some(c) = &n.core {
                c.check_invariants();
            }
        }
    }
}
