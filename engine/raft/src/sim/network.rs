//! The simulated network: per-message delay, drop, duplication (reordering follows from random
//! delays) and directional partitions, all drawn from the simulation's seeded generator.

use std::collections::{BTreeMap, BTreeSet};

use corum_types::NodeId;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::message::Message;

/// Fault rates of the network, in percent of messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetFaults {
    pub drop_pct: u32,
    pub duplicate_pct: u32,
    pub delay_min_ms: u64,
    pub delay_max_ms: u64,
}

impl NetFaults {
    /// Every message arrives after exactly `delay_ms`.
    pub const fn reliable(delay_ms: u64) -> Self {
        Self {
            drop_pct: 0,
            duplicate_pct: 0,
            delay_min_ms: delay_ms,
            delay_max_ms: delay_ms,
        }
    }
}

#[derive(Debug)]
pub struct Envelope {
    pub from: NodeId,
    pub to: NodeId,
    pub msg: Message,
}

#[derive(Debug)]
pub struct Network {
    pub faults: NetFaults,
    /// In flight, by (delivery time, sequence): delivery order is deterministic.
    queue: BTreeMap<(u64, u64), Envelope>,
    seq: u64,
    blocked: BTreeSet<(NodeId, NodeId)>,
    pub sent: u64,
    /// Messages sent to each node (dropped ones included).
    pub sent_to: BTreeMap<NodeId, u64>,
    pub dropped: u64,
}

impl Network {
    pub fn new(faults: NetFaults) -> Self {
        Self {
            faults,
            queue: BTreeMap::new(),
            seq: 0,
            blocked: BTreeSet::new(),
            sent: 0,
            sent_to: BTreeMap::new(),
            dropped: 0,
        }
    }

    pub fn send(
        &mut self,
        rng: &mut ChaCha8Rng,
        now_ms: u64,
        from: NodeId,
        to: NodeId,
        msg: Message,
    ) {
        self.sent += 1;
        *self.sent_to.entry(to).or_default() += 1;
        if self.faults.drop_pct > 0 && rng.gen_range(0..100) < self.faults.drop_pct {
            self.dropped += 1;
            return;
        }
        let copies =
            if self.faults.duplicate_pct > 0 && rng.gen_range(0..100) < self.faults.duplicate_pct {
                2
            } else {
                1
            };
        for i in 0..copies {
            let delay = rng
                .gen_range(self.faults.delay_min_ms..=self.faults.delay_max_ms)
                .max(1);
            self.seq += 1;
            let _ = i;
            self.queue.insert(
                (now_ms + delay, self.seq),
                Envelope {
                    from,
                    to,
                    msg: msg.clone(),
                },
            );
        }
    }

    /// Time of the next delivery.
    pub fn next_at(&self) -> Option<u64> {
        self.queue.keys().next().map(|k| k.0)
    }

    /// The next message due at or before `now_ms` whose link is up; messages on cut links are
    /// lost.
    pub fn pop_due(&mut self, now_ms: u64) -> Option<Envelope> {
        loop {
            let key = *self.queue.keys().next()?;
            if key.0 > now_ms {
                return None;
            }
            let env = self.queue.remove(&key).expect("key just read");
            if self.blocked.contains(&(env.from, env.to)) {
                self.dropped += 1;
                continue;
            }
            return Some(env);
        }
    }

    pub fn cut(&mut self, a: NodeId, b: NodeId) {
        self.blocked.insert((a, b));
        self.blocked.insert((b, a));
    }

    /// Cuts every link between the two groups.
    pub fn partition(&mut self, left: &[NodeId], right: &[NodeId]) {
        for &a in left {
            for &b in right {
                if a != b {
                    self.cut(a, b);
                }
            }
        }
    }

    pub fn heal(&mut self) {
        self.blocked.clear();
    }

    pub fn is_partitioned(&self) -> bool {
        !self.blocked.is_empty()
    }

    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }
}
