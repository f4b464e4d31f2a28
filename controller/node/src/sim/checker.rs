//! What the whole-node simulator checks, besides every component's own `check_invariants`
//! after every step:
//!
//! - **an answer only after its commit**: when a success answer leaves a node, the batch
//!   holding its records is durable on a majority of the voters' disks;
//! - **one answer per call**: no operation is answered twice;
//! - **no acknowledged write lost**: at the end, each key's value was written by a write that
//!   was not known to fail, and no acknowledged write of that key began after that write had
//!   completed (it would have overwritten it); a key with an acknowledged write has a value;
//! - **identical images**: after the heal every node's committed image is the same, also
//!   after every node restarted and replayed its disk (snapshot and log).

use std::collections::{BTreeMap, HashMap};

use corum_controller::MetadataImage;
use corum_raft::ProposalId;
use corum_types::NodeId;

use super::node::SimNode;
use super::{config_resource, CONFIG_KEY};
use crate::calls::CallId;

/// How a write ended, as its client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Still waiting.
    Pending,
    /// Succeeded: it must survive.
    Acked,
    /// Known not to have been applied (the driver refused its proposal).
    Failed,
    /// No answer, a timeout or `NotController`: applied or not.
    Unknown,
}

/// One write of the workload: `key`'s config set to `value`.
#[derive(Clone, Debug)]
pub struct Write {
    pub key: u64,
    pub value: u64,
    pub invoked_ms: u64,
    /// When its success or refusal came.
    pub completed_ms: Option<u64>,
    pub outcome: Outcome,
    /// Whether a node answered it (once at most).
    pub answered: bool,
}

/// The history and the facts the checks need.
#[derive(Default)]
pub struct Checker {
    /// By operation id.
    pub writes: BTreeMap<u64, Write>,
    /// The call each operation became on the node it reached.
    calls: HashMap<u64, (NodeId, CallId)>,
    /// The batch each call's records were appended in.
    batches: HashMap<(NodeId, CallId), ProposalId>,
    pub acked: u64,
    pub answers_checked: u64,
}

impl Checker {
    pub fn invoked(&mut self, op: u64, key: u64, value: u64, now_ms: u64) {
        self.writes.insert(
            op,
            Write {
                key,
                value,
                invoked_ms: now_ms,
                completed_ms: None,
                outcome: Outcome::Pending,
                answered: false,
            },
        );
    }

    pub fn registered(&mut self, op: u64, node: NodeId, call: CallId) {
        self.calls.insert(op, (node, call));
    }

    pub fn appended(&mut self, node: NodeId, batch: ProposalId, calls: &[CallId]) {
        for &c in calls {
            self.batches.insert((node, c), batch);
        }
    }

    /// A node answered `op` with a timeout or `NotController`: applied or not, it stays open.
    pub fn answered_unknown(&mut self, op: u64) -> Result<(), String> {
        let w = self
            .writes
            .get_mut(&op)
            .ok_or_else(|| format!("op {op}: an answer to an operation never invoked"))?;
        if std::mem::replace(&mut w.answered, true) {
            return Err(format!("op {op}: answered twice"));
        }
        Ok(())
    }

    /// A node answered `op` with a success or a refusal: one answer per operation; a
    /// success is checked against the voters' disks.
    pub fn completed(
        &mut self,
        op: u64,
        outcome: Outcome,
        now_ms: u64,
        nodes: &BTreeMap<NodeId, SimNode>,
    ) -> Result<(), String> {
        let w = self
            .writes
            .get_mut(&op)
            .ok_or_else(|| format!("op {op}: an answer to an operation never invoked"))?;
        if std::mem::replace(&mut w.answered, true) {
            return Err(format!("op {op}: answered twice (then {outcome:?})"));
        }
        w.outcome = outcome;
        w.completed_ms = Some(now_ms);
        if outcome != Outcome::Acked {
            return Ok(());
        }
        self.acked += 1;
        let call = self
            .calls
            .get(&op)
            .ok_or_else(|| format!("op {op}: acknowledged but never registered"))?;
        let batch = self.batches.get(call).ok_or_else(|| {
            format!(
                "op {op}: acknowledged by {} without its records appended",
                call.0
            )
        })?;
        let holding: Vec<NodeId> = nodes
            .values()
            .filter(|n| n.holds(*batch))
            .map(|n| n.id)
            .collect();
        let majority = nodes.len() / 2 + 1;
        if holding.len() < majority {
            return Err(format!(
                "op {op}: acknowledged by {} before its batch {batch:?} was durable on a \
                 majority (durable on {holding:?} of {} voters)",
                call.0,
                nodes.len()
            ));
        }
        self.answers_checked += 1;
        Ok(())
    }

    /// Operations without a success or a refusal count as unknown: they may take effect at
    /// any time.
    pub fn close(&mut self) {
        for w in self.writes.values_mut() {
            if w.outcome == Outcome::Pending {
                w.outcome = Outcome::Unknown;
            }
        }
    }

    /// No acknowledged write lost, judged on the final image.
    pub fn check_final(&self, image: &MetadataImage) -> Result<(), String> {
        self.check_values(|key| {
            image
                .configs
                .value(&config_resource(key), CONFIG_KEY)
                .map(str::to_owned)
        })
    }

    /// No acknowledged write lost, given each written key's final value.
    pub fn check_values(&self, value_of: impl Fn(u64) -> Option<String>) -> Result<(), String> {
        let keys: std::collections::BTreeSet<u64> = self.writes.values().map(|w| w.key).collect();
        for key in keys {
            let value = value_of(key);
            let writes: Vec<(&u64, &Write)> =
                self.writes.iter().filter(|(_, w)| w.key == key).collect();
            let Some(value) = value else {
                if let Some((op, _)) = writes.iter().find(|(_, w)| w.outcome == Outcome::Acked) {
                    return Err(format!(
                        "key {key}: acknowledged write op {op} lost (no value)"
                    ));
                }
                continue;
            };
            let (op, last) = writes
                .iter()
                .find(|(_, w)| w.value.to_string() == value)
                .ok_or_else(|| format!("key {key}: value {value} was never written"))?;
            if last.outcome == Outcome::Failed {
                return Err(format!(
                    "key {key}: value {value} of op {op}, which was refused, took effect"
                ));
            }
            // An unknown write may have taken effect at any time.
            let done = match last.outcome {
                Outcome::Acked => last.completed_ms.unwrap_or(u64::MAX),
                _ => u64::MAX,
            };
            if let Some((lost, w)) = writes
                .iter()
                .find(|(_, w)| w.outcome == Outcome::Acked && w.invoked_ms > done)
            {
                return Err(format!(
                    "key {key}: acknowledged write op {lost} (invoked at {} ms) lost: the final \
                     value is op {op}'s, which completed at {done} ms",
                    w.invoked_ms
                ));
            }
        }
        Ok(())
    }
}

/// Every up node's committed image is the same; returns it.
pub fn same_images(nodes: &BTreeMap<NodeId, SimNode>) -> Result<MetadataImage, String> {
    let mut first: Option<(NodeId, &MetadataImage)> = None;
    for n in nodes.values() {
        let run = n
            .run
            .as_ref()
            .ok_or_else(|| format!("{} is down at the end", n.id))?;
        let image = run.service.controller().committed_image();
        match first {
            None => first = Some((n.id, image)),
            Some((id, f)) if f != image => {
                return Err(format!(
                    "the committed images of {id} and {} differ (committed ends {} and {})",
                    n.id, f.end_offset, image.end_offset
                ));
            }
            Some(_) => {}
        }
    }
    first
        .map(|(_, i)| i.clone())
        .ok_or_else(|| "no node".to_string())
}
