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
//!
//! The voter checks ([`Voters`]), with replicas counted by who they are (the node id and the
//! directory id of the disk they run on, [`SimNode::key`]), never by what their messages say.
//! A voter of a static quorum has no directory id: any disk of its id is that voter
//! ([`ReplicaKey::is`], as Raft counts it); a voter of a dynamic set is the one disk it
//! names. Static seeds wipe no voter's disk before the upgrade has committed, so a static set
//! is only ever counted on the disks its nodes had then (and on a wiped node's new disk only
//! as the set before the upgrade, while the latest is the dynamic one).
//!
//! - **commits on a majority of voters**: each time a leader's high watermark moves, and for
//!   each success answer, the batch before it is durable on a majority of the leader's voter
//!   set (its latest, or the one before it: one change at a time keeps their majorities
//!   intersecting), counting a node only if its disk is the voter's directory;
//! - **one history**: the committed voter-set history (offset → set), as each node's log and
//!   high watermark give it, is the same on every node wherever two of them know it (a node
//!   formatted to join knows no set before the first Voters record it holds);
//! - **one uncommitted change**: no leader's log holds more than one VotersRecord past the
//!   highest high watermark any node reached;
//! - **one leader per epoch**, and each leader **won its epoch** with granted votes (as sent)
//!   of a majority of its voter set (the latest, or the one before if it changed the set in
//!   the meantime), itself included only if it is a voter of it (checked
//!   once the leader committed an entry of its epoch: a leadership that never reached the
//!   disk is forgotten with the epoch by a restart);
//! - **removed voters step down**: no leader outside its own voter set once that set is
//!   committed in its log;
//! - **answered changes committed**: a voter change the leader answered Ok is in the
//!   committed history, after the end the history had when the admin asked; an upgrade
//!   answered Ok likewise, as a committed set that names the same voters as the static one
//!   before it, now each with a directory id;
//! - **one final set**: after the heal every node holds the same committed voter set, and the
//!   nodes that vote are exactly its voters (one node per voter);
//! - **one kraft.version**: after the heal every node runs the same kraft.version: 1 in a
//!   dynamic seed, and in a static one whose upgrade committed (which one with voter changes
//!   must, and one with an upgrade answered Ok has), else 0.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use corum_controller::MetadataImage;
use corum_raft::{ProposalId, ReplicaKey, Role, VoterSet};
use corum_types::{Epoch, LogOffset, NodeId};

use super::node::{Running, SimNode};
use super::{config_resource, VoterChange, CONFIG_KEY};
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
pub struct Checker {
    /// By operation id.
    pub writes: BTreeMap<u64, Write>,
    /// The call each operation became on the node it reached.
    calls: HashMap<u64, (NodeId, CallId)>,
    /// The batch each call's records were appended in.
    batches: HashMap<(NodeId, CallId), ProposalId>,
    pub acked: u64,
    pub answers_checked: u64,
    pub voters: Voters,
}

impl Checker {
    pub fn new(bootstrap: VoterSet) -> Checker {
        Checker {
            writes: BTreeMap::new(),
            calls: HashMap::new(),
            batches: HashMap::new(),
            acked: 0,
            answers_checked: 0,
            voters: Voters::new(bootstrap),
        }
    }

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
        let history = nodes
            .get(&call.0)
            .and_then(|n| n.run.as_ref())
            .map(|r| r.driver.raft().voter_history())
            .ok_or_else(|| format!("op {op}: acknowledged by {}, which is down", call.0))?;
        if let Err(holding) = durable_on_majority(nodes, history, batch.base_offset, batch.epoch) {
            return Err(format!(
                "op {op}: acknowledged by {} before its batch {batch:?} was durable on a \
                 majority (durable on {holding:?} of voters {})",
                call.0,
                keys(&history[history.len() - 1].1)
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

/// Whether the batch at `base` of `epoch` is durable on a majority of the latest voter set of
/// `history` or of the one before it, counting a node only if its disk is the voter's
/// directory (or was, until a wipe took what it held); `Err` names the voters holding it.
pub fn durable_on_majority(
    nodes: &BTreeMap<NodeId, SimNode>,
    history: &[(LogOffset, VoterSet)],
    base: LogOffset,
    epoch: Epoch,
) -> Result<(), Vec<NodeId>> {
    let mut holding = Vec::new();
    for (_, set) in history.iter().rev().take(2) {
        holding = set
            .voters()
            .iter()
            .filter(|v| {
                nodes
                    .get(&v.key.id)
                    .is_some_and(|n| n.held_as(&v.key, base, epoch))
            })
            .map(|v| v.key.id)
            .collect();
        if holding.len() >= set.majority() {
            return Ok(());
        }
    }
    Err(holding)
}

/// A voter set as `id/directory-byte` pairs (`id/-` for a static voter, which names no
/// directory), for messages.
pub fn keys(set: &VoterSet) -> String {
    let parts: Vec<String> = set
        .voters()
        .iter()
        .map(|v| {
            if v.key.directory_id.is_zero() {
                format!("{}/-", v.key.id)
            } else {
                format!("{}/{}", v.key.id, v.key.directory_id.0[1])
            }
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The voter set in force at `offset` in a history (the last entry at or before it).
fn set_at(history: &[(LogOffset, VoterSet)], offset: LogOffset) -> Option<&VoterSet> {
    history
        .iter()
        .rev()
        .find(|(o, _)| *o <= offset)
        .map(|(_, s)| s)
}

/// The voter checks' state (see the module doc).
pub struct Voters {
    /// The committed voter-set history: the bootstrap set at 0, then each committed
    /// VotersRecord's offset and set. Known below `end`, the highest high watermark seen.
    pub history: BTreeMap<LogOffset, VoterSet>,
    pub end: LogOffset,
    /// The replica that led each epoch.
    leaders: BTreeMap<Epoch, ReplicaKey>,
    /// Votes granted (not pre-votes): (epoch, candidate) → the replicas that sent them.
    votes: HashMap<(Epoch, NodeId), BTreeSet<ReplicaKey>>,
    /// Per node, what its last look saw (high watermark, voter-set changes, history length
    /// and start): nothing to check again while it stays.
    seen: HashMap<NodeId, (LogOffset, u64, usize, LogOffset)>,
    /// Per node, the epoch it led and the high watermark it had when last seen leading.
    leader_hwm: HashMap<NodeId, (Epoch, LogOffset)>,
    pub elections_checked: u64,
    pub changes_acked: u64,
    pub upgrades_acked: u64,
}

impl Voters {
    pub fn new(bootstrap: VoterSet) -> Voters {
        Voters {
            history: BTreeMap::from([(LogOffset::ZERO, bootstrap)]),
            end: LogOffset::ZERO,
            leaders: BTreeMap::new(),
            votes: HashMap::new(),
            seen: HashMap::new(),
            leader_hwm: HashMap::new(),
            elections_checked: 0,
            changes_acked: 0,
            upgrades_acked: 0,
        }
    }

    /// `voter` granted its vote in `epoch` to `candidate` (a message it sent).
    pub fn vote_granted(&mut self, epoch: Epoch, candidate: NodeId, voter: ReplicaKey) {
        self.votes
            .entry((epoch, candidate))
            .or_default()
            .insert(voter);
    }

    /// The checks on node `id` after it ran (see the module doc).
    pub fn observe(&mut self, id: NodeId, nodes: &BTreeMap<NodeId, SimNode>) -> Result<(), String> {
        let node = &nodes[&id];
        let Some(run) = node.run.as_ref() else {
            return Ok(());
        };
        let raft = run.driver.raft();
        let history = raft.voter_history();
        let hwm = raft.high_watermark();
        let look = (hwm, raft.voter_set_changes(), history.len(), history[0].0);
        if self.seen.insert(id, look) != Some(look) {
            self.merge(id, history, hwm)?;
        }
        if raft.role() != Role::Leader {
            return Ok(());
        }
        let committed_in_epoch = raft.epoch_before(hwm) == Some(raft.epoch());
        self.leader(node.key, raft.epoch(), history, hwm, committed_in_epoch)?;
        let epoch = raft.epoch();
        let before = self.leader_hwm.insert(id, (epoch, hwm));
        // Only a move as leader of this epoch (a new leader's watermark is its follower's).
        if before.is_some_and(|(e, h)| e == epoch && h < hwm) {
            if let Some((base, epoch)) = node.durable_before(hwm) {
                durable_on_majority(nodes, history, base, epoch).map_err(|holding| {
                    let sets: Vec<String> = history
                        .iter()
                        .map(|(o, s)| format!("{o}: {}", keys(s)))
                        .collect();
                    let ends: Vec<String> = nodes
                        .values()
                        .map(|n| {
                            format!(
                                "{}/{} durable to {:?}",
                                n.id,
                                n.key.directory_id.0[1],
                                n.durable_before(LogOffset(u64::MAX))
                            )
                        })
                        .collect();
                    format!(
                        "leader {id} (epoch {}) moved its high watermark to {hwm} with the batch \
                         at {base} (epoch {epoch}) durable on {holding:?} only, of voter sets \
                         {sets:?} ({ends:?})",
                        raft.epoch(),
                    )
                })?;
            }
        }
        Ok(())
    }

    /// Node `id`'s committed voter history (`history` below `hwm`) agrees with the shared one
    /// wherever both are known, and extends it.
    pub fn merge(
        &mut self,
        id: NodeId,
        history: &[(LogOffset, VoterSet)],
        hwm: LogOffset,
    ) -> Result<(), String> {
        let start = history[0].0;
        // A node formatted to join (`--no-initial-controllers`) knows no voters until the
        // first Voters record it holds (a snapshot never has an empty set).
        let known_from = if history[0].1.is_empty() {
            history.get(1).map_or(hwm, |(o, _)| *o)
        } else {
            start
        };
        let overlap_end = hwm.min(self.end);
        if known_from < overlap_end {
            let shared: Vec<(LogOffset, VoterSet)> =
                self.history.iter().map(|(o, s)| (*o, s.clone())).collect();
            let points = std::iter::once(known_from)
                .chain(history.iter().map(|(o, _)| *o))
                .chain(shared.iter().map(|(o, _)| *o))
                .filter(|o| (known_from..overlap_end).contains(o));
            for at in points {
                let (mine, theirs) = (set_at(history, at), set_at(&shared, at));
                if mine != theirs {
                    return Err(format!(
                        "committed voter histories differ at offset {at}: {id} has {}, another \
                         node had {}",
                        mine.map_or("none".into(), keys),
                        theirs.map_or("none".into(), keys)
                    ));
                }
            }
        }
        if hwm > self.end && start <= self.end {
            for (o, set) in &history[1..] {
                if (self.end..hwm).contains(o) {
                    self.history.insert(*o, set.clone());
                }
            }
            self.end = hwm;
        }
        Ok(())
    }

    /// The checks on a leader of `epoch` that is replica `key` (see the module doc). Its
    /// election is checked once it has `committed` an entry of its epoch: until then its
    /// leadership may have been in memory only (a node that stops before its vote and its
    /// LeaderChange are durable forgets the epoch, and may rightly vote in it again).
    pub fn leader(
        &mut self,
        key: ReplicaKey,
        epoch: Epoch,
        history: &[(LogOffset, VoterSet)],
        hwm: LogOffset,
        committed: bool,
    ) -> Result<(), String> {
        let id = key.id;
        let set = &history[history.len() - 1].1;
        let uncommitted = history[1..].iter().filter(|(o, _)| *o >= self.end).count();
        if uncommitted > 1 {
            let offsets: Vec<LogOffset> = history.iter().map(|(o, _)| *o).collect();
            return Err(format!(
                "leader {id} (epoch {epoch}) holds {uncommitted} voter changes past the \
                 committed end {} (voter records at {offsets:?})",
                self.end
            ));
        }
        let set_committed = history.len() == 1 || history[history.len() - 1].0 < hwm;
        if set_committed && !set.contains_key(&key) {
            return Err(format!(
                "{id} leads epoch {epoch} outside its committed voter set {}",
                keys(set)
            ));
        }
        match self.leaders.get(&epoch) {
            Some(other) if *other != key => {
                return Err(format!(
                    "two leaders in epoch {epoch}: {}/{} and {id}/{}",
                    other.id, other.directory_id.0[1], key.directory_id.0[1]
                ))
            }
            Some(_) => return Ok(()),
            None if !committed => return Ok(()),
            None => {}
        }
        self.leaders.insert(epoch, key);
        let granted = self.votes.remove(&(epoch, id)).unwrap_or_default();
        // The set it campaigned with is its latest, or the one before if it has changed the
        // set since (once its LeaderChange committed, possibly in the same step).
        let won_with = |set: &VoterSet| {
            let won = set
                .voters()
                .iter()
                .filter(|v| key.is(&v.key) || granted.iter().any(|g| g.is(&v.key)))
                .count();
            (won >= set.majority(), won)
        };
        let (won, count) = won_with(set);
        let won_before = history.len() > 1 && won_with(&history[history.len() - 2].1).0;
        if !won && !won_before {
            let won = count;
            let from: Vec<String> = granted
                .iter()
                .map(|k| format!("{}/{}", k.id, k.directory_id.0[1]))
                .collect();
            return Err(format!(
                "{id} leads epoch {epoch} with the votes of {from:?} (and its own), {won} of \
                 voters {}",
                keys(set)
            ));
        }
        self.elections_checked += 1;
        Ok(())
    }

    /// The admin got Ok for `change`, asked when the committed history ended at `since`.
    pub fn change_acked(&mut self, change: VoterChange, since: LogOffset) -> Result<(), String> {
        let entries: Vec<(&LogOffset, &VoterSet)> = self.history.iter().collect();
        let found = entries.windows(2).any(|w| {
            let ((_, before), (at, after)) = (w[0], w[1]);
            *at >= since && change.made_by(before, after)
        });
        if !found {
            return Err(format!(
                "the admin's {change:?} was answered Ok, but no committed voter record at or \
                 after {since} makes it (committed up to {}: {:?})",
                self.end,
                self.history
                    .iter()
                    .map(|(o, s)| format!("{o}: {}", keys(s)))
                    .collect::<Vec<_>>()
            ));
        }
        match change {
            VoterChange::Upgrade => self.upgrades_acked += 1,
            _ => self.changes_acked += 1,
        }
        Ok(())
    }

    /// The offset of the upgrade's batch in the committed history: the first set that names
    /// every voter of the static set before it with a directory id.
    pub fn upgrade_committed(&self) -> Option<LogOffset> {
        let entries: Vec<(&LogOffset, &VoterSet)> = self.history.iter().collect();
        entries
            .windows(2)
            .find(|w| VoterChange::Upgrade.made_by(w[0].1, w[1].1))
            .map(|w| *w[1].0)
    }

    /// After the heal: every node holds the same committed voter set, the last of the
    /// committed history, and the nodes that vote are its voters; returns it.
    pub fn check_final(&self, nodes: &BTreeMap<NodeId, SimNode>) -> Result<VoterSet, String> {
        let last = self
            .history
            .values()
            .next_back()
            .expect("the bootstrap set")
            .clone();
        let mut voting = BTreeSet::new();
        for n in nodes.values() {
            let run = n
                .run
                .as_ref()
                .ok_or_else(|| format!("{} is down at the end", n.id))?;
            let raft = run.driver.raft();
            let history = raft.voter_history();
            let uncommitted =
                history.len() > 1 && history[history.len() - 1].0 >= raft.high_watermark();
            if *raft.voter_set() != last || uncommitted {
                return Err(format!(
                    "{} ends with voter set {} (committed: {}), the committed history with {}",
                    n.id,
                    keys(raft.voter_set()),
                    !uncommitted,
                    keys(&last)
                ));
            }
            if raft.is_voter() {
                voting.insert(n.key);
            }
        }
        // One voting node per voter, and no other (a static voter is any disk of its id).
        let matched = last
            .voters()
            .iter()
            .all(|v| voting.iter().filter(|k| k.is(&v.key)).count() == 1)
            && voting.iter().all(|k| last.contains_key(k));
        if !matched {
            let v: Vec<String> = voting
                .iter()
                .map(|k| format!("{}/{}", k.id, k.directory_id.0[1]))
                .collect();
            return Err(format!(
                "the nodes that vote, {v:?}, are not the voter set {}",
                keys(&last)
            ));
        }
        Ok(last)
    }
}

/// Every node runs the same kraft.version; returns it.
pub fn same_kraft_version(nodes: &BTreeMap<NodeId, SimNode>) -> Result<u16, String> {
    same_on_every_node(
        nodes,
        |run| run.driver.raft().kraft_version(),
        |(a, va), (b, vb)| format!("{a} runs kraft.version {va}, {b} runs {vb}"),
    )
}

/// Every up node's committed image is the same; returns it.
pub fn same_images(nodes: &BTreeMap<NodeId, SimNode>) -> Result<MetadataImage, String> {
    same_on_every_node(
        nodes,
        |run| run.service.controller().committed_image(),
        |(a, ia), (b, ib)| {
            format!(
                "the committed images of {a} and {b} differ (committed ends {} and {})",
                ia.end_offset, ib.end_offset
            )
        },
    )
    .cloned()
}

/// What `get` reads of every node, each up and all equal (`differ` says how two are not).
fn same_on_every_node<'a, T: PartialEq>(
    nodes: &'a BTreeMap<NodeId, SimNode>,
    get: impl Fn(&'a Running) -> T,
    differ: impl Fn((NodeId, &T), (NodeId, &T)) -> String,
) -> Result<T, String> {
    let mut first: Option<(NodeId, T)> = None;
    for n in nodes.values() {
        let run = n
            .run
            .as_ref()
            .ok_or_else(|| format!("{} is down at the end", n.id))?;
        let value = get(run);
        match &first {
            None => first = Some((n.id, value)),
            Some((id, f)) if *f != value => return Err(differ((*id, f), (n.id, &value))),
            Some(_) => {}
        }
    }
    first.map(|(_, v)| v).ok_or_else(|| "no node".to_string())
}
