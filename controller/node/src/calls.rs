//! The calls waiting for an answer, in one table on the shard that owns their connections.
//!
//! Every controller request a client sends is registered here when the RPC server reads it,
//! and leaves exactly once, with exactly one answer. Nobody else holds a call's reply
//! channel, so nobody else can answer it. What decides the answer:
//!
//! | event (in the order it can happen)                            | answer                          |
//! |---------------------------------------------------------------|---------------------------------|
//! | the service is gone (or never started)                        | `NotController`, no hint        |
//! | the service's verdict ([`PendingCalls::answer`]): an error, a read, a refusal | that verdict      |
//! | the service proposed the call's records: its success answer is held with the batch ([`PendingCalls::hold`]) | — |
//! | the high watermark passes a held batch, and the log holds it as predicted (this epoch at this base) | the held success |
//! | the high watermark passes a held batch the log holds otherwise (truncated, another leader's) | `NotController` |
//! | this node stops leading the held batch's epoch before it commits | `NotController` (it may still commit: Kafka's semantics too) |
//! | the call's deadline passes ([`PendingCalls::expire`])         | `Timeout` (it may still commit) |
//!
//! Whichever comes first removes the call; later events for it find nothing. The table is
//! pure bookkeeping: operations return the answers to send, with their reply handles, and the
//! caller (the driver's loop, on the connections' shard) sends them.
//!
//! It also times each call's stages (read → forwarded to the service → proposed → locally
//! durable → answered), the figures behind `corum_request_stage_seconds`.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use corum_raft::ProposalId;
use corum_types::{Epoch, LogOffset};

use crate::histogram::LatencyHistogram;
use crate::protocol::{LeaderHint, ResponseBody, ResponseFrame, RpcError};

/// A call's id in its table (not the client's correlation id: two clients may use the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub u64);

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "call {}", self.0)
    }
}

/// Where a call is.
#[derive(Debug)]
enum Stage {
    /// Registered; at the service (or on its way there) since `forwarded`.
    AtService { forwarded: Option<Instant> },
    /// Proposed in `batch`; its success answer waits for the batch to commit.
    Held {
        batch: ProposalId,
        body: ResponseBody,
        proposed: Instant,
        durable: Option<Instant>,
    },
}

#[derive(Debug)]
struct Entry<R> {
    reply: R,
    correlation_id: u64,
    received: Instant,
    deadline: Instant,
    timeout_ms: u32,
    stage: Stage,
}

/// The per-stage latencies and outcome counters of the calls a table answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallStats {
    /// Read by the server → handed to the service (queued on the connections' shard and the
    /// port).
    pub queued: LatencyHistogram,
    /// Handed to the service → proposed (its records appended by this leader), for calls that
    /// propose.
    pub to_proposed: LatencyHistogram,
    /// Proposed → durable in this node's log.
    pub to_durable: LatencyHistogram,
    /// Proposed → committed (a majority durable) and answered.
    pub to_committed: LatencyHistogram,
    /// Read by the server → answered with success at commit: the commit latency a client
    /// sees, less the network.
    pub commit_latency: LatencyHistogram,
    /// Read → answered, every call and outcome.
    pub answered: LatencyHistogram,
    pub released_at_commit: u64,
    pub timeouts: u64,
    pub not_controller: u64,
}

/// The table. `R` is a call's reply handle (a channel to its connection in a node; anything in
/// tests).
#[derive(Debug)]
pub struct PendingCalls<R> {
    next_id: u64,
    calls: HashMap<CallId, Entry<R>>,
    /// Held calls by the end of their batch (release order).
    held: BTreeSet<(LogOffset, CallId)>,
    deadlines: BTreeSet<(Instant, CallId)>,
    service_gone: bool,
    /// The durable end last reported: held calls below it have their `durable` stamp.
    durable_end: LogOffset,
    stats: CallStats,
}

impl<R> Default for PendingCalls<R> {
    fn default() -> Self {
        Self {
            next_id: 0,
            calls: HashMap::new(),
            held: BTreeSet::new(),
            deadlines: BTreeSet::new(),
            service_gone: false,
            durable_end: LogOffset::ZERO,
            stats: CallStats::default(),
        }
    }
}

/// An answer to send: the call's reply handle and the frame.
pub type Outgoing<R> = (R, ResponseFrame);

impl<R> PendingCalls<R> {
    /// Registers a call read at `now` that may wait `timeout_ms`. `Err` carries the answer to
    /// send at once when the service is gone.
    pub fn register(
        &mut self,
        reply: R,
        correlation_id: u64,
        timeout_ms: u32,
        now: Instant,
    ) -> Result<CallId, Outgoing<R>> {
        if self.service_gone {
            self.stats.not_controller += 1;
            return Err((
                reply,
                ResponseFrame {
                    correlation_id,
                    body: Err(RpcError::NotController { leader: None }),
                },
            ));
        }
        self.next_id += 1;
        let id = CallId(self.next_id);
        let deadline = now + std::time::Duration::from_millis(u64::from(timeout_ms));
        self.calls.insert(
            id,
            Entry {
                reply,
                correlation_id,
                received: now,
                deadline,
                timeout_ms,
                stage: Stage::AtService { forwarded: None },
            },
        );
        self.deadlines.insert((deadline, id));
        Ok(id)
    }

    /// The calls `ids` were handed to the service at `now`.
    pub fn forwarded(&mut self, ids: impl IntoIterator<Item = CallId>, now: Instant) {
        for id in ids {
            if let Some(e) = self.calls.get_mut(&id) {
                if let Stage::AtService { forwarded } = &mut e.stage {
                    if forwarded.is_none() {
                        *forwarded = Some(now);
                        self.stats.queued.record(now - e.received);
                    }
                }
            }
        }
    }

    /// The service's verdict on call `id`: sent now, unless the call already has its answer.
    pub fn answer(
        &mut self,
        id: CallId,
        body: Result<ResponseBody, RpcError>,
        now: Instant,
    ) -> Option<Outgoing<R>> {
        let not_controller = matches!(body, Err(RpcError::NotController { .. }));
        let out = self.finish(id, body, now);
        if not_controller && out.is_some() {
            self.stats.not_controller += 1;
        }
        out
    }

    /// Call `id` proposed its records in `batch` (just appended by this leader, at `now`): its
    /// success answer `body` waits for the batch to commit.
    pub fn hold(&mut self, id: CallId, batch: ProposalId, body: ResponseBody, now: Instant) {
        let Some(e) = self.calls.get_mut(&id) else {
            return; // Answered already (a deadline).
        };
        let Stage::AtService { forwarded } = e.stage else {
            panic!("{id} is held twice: the service proposes a call's records once");
        };
        if let Some(f) = forwarded {
            self.stats
                .to_proposed
                .record(now.saturating_duration_since(f));
        }
        e.stage = Stage::Held {
            batch,
            body,
            proposed: now,
            durable: None,
        };
        self.held.insert((batch.end_offset, id));
    }

    /// This node's log is durable through `end` (exclusive) at `now`. Only the batches that
    /// became durable since the last report are looked at (all of them after a truncation).
    pub fn durable(&mut self, end: LogOffset, now: Instant) {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let from = if end < self.durable_end {
            Unbounded
        } else {
            Excluded((self.durable_end, CallId(u64::MAX)))
        };
        self.durable_end = end;
        for &(_, id) in self.held.range((from, Included((end, CallId(u64::MAX))))) {
            let e = self
                .calls
                .get_mut(&id)
                .expect("held calls are in the table");
            if let Stage::Held {
                proposed, durable, ..
            } = &mut e.stage
            {
                if durable.is_none() {
                    *durable = Some(now);
                    self.stats
                        .to_durable
                        .record(now.saturating_duration_since(*proposed));
                }
            }
        }
    }

    /// The high watermark is `hwm` at `now`: every held batch below it is decided. It
    /// committed as predicted when the log holds a batch of its epoch at its base
    /// (`epoch_at(base)`; a leader appends at most one batch at an offset in its epoch):
    /// success. Otherwise it was lost: `NotController` with the leader `hint` gives (asked
    /// only then, once).
    pub fn committed(
        &mut self,
        hwm: LogOffset,
        epoch_at: impl Fn(LogOffset) -> Option<Epoch>,
        hint: impl FnOnce() -> Option<LeaderHint>,
        now: Instant,
    ) -> Vec<Outgoing<R>> {
        // Sized once for every held call (at most those a commit releases, up to hundreds at
        // a time), not grown call by call.
        let mut out = Vec::with_capacity(self.held.len());
        let mut hint = Some(hint);
        let mut leader: Option<Option<LeaderHint>> = None;
        while let Some(&(end, id)) = self.held.first() {
            if end > hwm {
                break;
            }
            let e = self.remove(id).expect("held calls are in the table");
            let Stage::Held {
                batch,
                body,
                proposed,
                ..
            } = e.stage
            else {
                unreachable!("only held calls are indexed as held");
            };
            let body = if epoch_at(batch.base_offset) == Some(batch.epoch) {
                self.stats
                    .to_committed
                    .record(now.saturating_duration_since(proposed));
                self.stats
                    .commit_latency
                    .record(now.saturating_duration_since(e.received));
                self.stats.released_at_commit += 1;
                Ok(body)
            } else {
                self.stats.not_controller += 1;
                let hint = hint.take();
                let leader = leader.get_or_insert_with(|| hint.and_then(|h| h()));
                Err(RpcError::NotController {
                    leader: leader.clone(),
                })
            };
            self.stats
                .answered
                .record(now.saturating_duration_since(e.received));
            out.push((
                e.reply,
                ResponseFrame {
                    correlation_id: e.correlation_id,
                    body,
                },
            ));
        }
        out
    }

    /// This node leads `leading` now (`None`: it leads nothing): held calls of another epoch
    /// that have not committed get `NotController` with `hint` (they may still commit).
    pub fn leadership(
        &mut self,
        leading: Option<Epoch>,
        hint: Option<&LeaderHint>,
        now: Instant,
    ) -> Vec<Outgoing<R>> {
        let lost: Vec<CallId> = self
            .held
            .iter()
            .filter(|(_, id)| match &self.calls[id].stage {
                Stage::Held { batch, .. } => Some(batch.epoch) != leading,
                Stage::AtService { .. } => false,
            })
            .map(|&(_, id)| id)
            .collect();
        let mut out = Vec::new();
        for id in lost {
            self.stats.not_controller += 1;
            let body = Err(RpcError::NotController {
                leader: hint.cloned(),
            });
            out.extend(self.finish(id, body, now));
        }
        out
    }

    /// Every call whose deadline is at or before `now` gets `Timeout`.
    pub fn expire(&mut self, now: Instant) -> Vec<Outgoing<R>> {
        let mut out = Vec::new();
        while let Some(&(deadline, id)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            let timeout_ms = self.calls[&id].timeout_ms;
            self.stats.timeouts += 1;
            out.extend(self.finish(id, Err(RpcError::Timeout { timeout_ms }), now));
        }
        out
    }

    /// The service stopped: calls it had get `NotController` (no hint: this node serves no
    /// controller any more), and so does every later call. Held calls keep waiting for their
    /// commit.
    pub fn service_gone(&mut self, now: Instant) -> Vec<Outgoing<R>> {
        self.service_gone = true;
        let at_service: Vec<CallId> = self
            .calls
            .iter()
            .filter(|(_, e)| matches!(e.stage, Stage::AtService { .. }))
            .map(|(&id, _)| id)
            .collect();
        let mut out = Vec::new();
        for id in at_service {
            self.stats.not_controller += 1;
            out.extend(self.finish(id, Err(RpcError::NotController { leader: None }), now));
        }
        out
    }

    /// Everything still waiting gets `NotController` with no hint (the node stops).
    pub fn drain(&mut self, now: Instant) -> Vec<Outgoing<R>> {
        self.service_gone = true;
        let ids: Vec<CallId> = self.calls.keys().copied().collect();
        let mut out = Vec::new();
        for id in ids {
            self.stats.not_controller += 1;
            out.extend(self.finish(id, Err(RpcError::NotController { leader: None }), now));
        }
        out
    }

    /// The earliest deadline of a waiting call.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(d, _)| d)
    }

    pub fn len(&self) -> usize {
        self.calls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Calls whose success waits for a commit.
    pub fn held_len(&self) -> usize {
        self.held.len()
    }

    pub fn stats(&self) -> &CallStats {
        &self.stats
    }

    /// The indexes agree with the calls (O(n): tests and the simulator).
    pub fn check_invariants(&self) {
        assert_eq!(
            self.deadlines.len(),
            self.calls.len(),
            "a deadline per call"
        );
        for &(d, id) in &self.deadlines {
            assert_eq!(self.calls[&id].deadline, d, "{id}'s deadline is indexed");
        }
        let held = self
            .calls
            .values()
            .filter(|e| matches!(e.stage, Stage::Held { .. }))
            .count();
        assert_eq!(held, self.held.len(), "every held call is indexed once");
        for &(end, id) in &self.held {
            match &self.calls[&id].stage {
                Stage::Held { batch, .. } => assert_eq!(batch.end_offset, end),
                Stage::AtService { .. } => panic!("{id} is indexed as held but is not"),
            }
        }
    }

    /// Removes `id` from the table and its indexes.
    fn remove(&mut self, id: CallId) -> Option<Entry<R>> {
        let e = self.calls.remove(&id)?;
        self.deadlines.remove(&(e.deadline, id));
        if let Stage::Held { batch, .. } = &e.stage {
            self.held.remove(&(batch.end_offset, id));
        }
        Some(e)
    }

    /// Removes `id` and returns its answer `body`; nothing if it is gone already.
    fn finish(
        &mut self,
        id: CallId,
        body: Result<ResponseBody, RpcError>,
        now: Instant,
    ) -> Option<Outgoing<R>> {
        let e = self.remove(id)?;
        self.stats
            .answered
            .record(now.saturating_duration_since(e.received));
        Some((
            e.reply,
            ResponseFrame {
                correlation_id: e.correlation_id,
                body,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn pid(epoch: u64, base: u64, end: u64) -> ProposalId {
        ProposalId {
            epoch: Epoch(epoch),
            base_offset: LogOffset(base),
            end_offset: LogOffset(end),
        }
    }

    fn ok() -> ResponseBody {
        ResponseBody::UnregisterBroker
    }

    fn hint() -> LeaderHint {
        LeaderHint {
            id: corum_types::NodeId(2),
            host: "h".into(),
            port: 1,
        }
    }

    /// (reply, correlation id, is success)
    fn outcomes(out: Vec<Outgoing<u32>>) -> Vec<(u32, u64, Result<(), RpcError>)> {
        out.into_iter()
            .map(|(r, f)| (r, f.correlation_id, f.body.map(|_| ())))
            .collect()
    }

    /// Proves a held call is answered with its success only when the high watermark passes
    /// its batch and the log holds the batch as predicted, with NotController otherwise, and
    /// never twice: a verdict or deadline after that finds nothing.
    #[test]
    fn held_calls_are_released_at_commit_as_predicted() {
        let t = Instant::now();
        let mut c = PendingCalls::default();
        let a = c.register(1u32, 10, 1000, t).unwrap();
        let b = c.register(2u32, 20, 1000, t).unwrap();
        let d = c.register(3u32, 30, 1000, t).unwrap();
        c.forwarded([a, b, d], t);
        c.hold(a, pid(3, 10, 12), ok(), t);
        c.hold(b, pid(3, 12, 13), ok(), t);
        c.hold(d, pid(3, 13, 14), ok(), t);
        c.check_invariants();
        let epoch_at = |o: LogOffset| Some(if o.get() < 13 { Epoch(3) } else { Epoch(4) });
        assert!(c.committed(LogOffset(11), epoch_at, || None, t).is_empty());
        assert_eq!(
            outcomes(c.committed(LogOffset(13), epoch_at, || Some(hint()), t)),
            vec![(1, 10, Ok(())), (2, 20, Ok(()))]
        );
        // Offset 13 holds another epoch's batch: the proposal was lost.
        assert_eq!(
            outcomes(c.committed(LogOffset(14), epoch_at, || Some(hint()), t)),
            vec![(
                3,
                30,
                Err(RpcError::NotController {
                    leader: Some(hint())
                })
            )]
        );
        assert!(c.is_empty());
        assert!(c.answer(a, Ok(ok()), t).is_none());
        assert!(c.expire(t + Duration::from_secs(5)).is_empty());
        assert_eq!(c.stats().released_at_commit, 2);
        assert_eq!(c.stats().commit_latency.count, 2);
        assert_eq!(c.stats().answered.count, 3);
        c.check_invariants();
    }

    /// Proves the first outcome wins: a deadline answers Timeout and a later hold and commit
    /// of the same call send nothing; a verdict answers once.
    #[test]
    fn the_first_outcome_wins() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut c = PendingCalls::default();
        let a = c.register(1u32, 1, 10, t).unwrap();
        let b = c.register(2u32, 2, 50, t).unwrap();
        assert_eq!(c.next_deadline(), Some(t + ms(10)));
        assert!(c.expire(t + ms(9)).is_empty());
        assert_eq!(
            outcomes(c.expire(t + ms(10))),
            vec![(1, 1, Err(RpcError::Timeout { timeout_ms: 10 }))]
        );
        c.hold(a, pid(1, 0, 1), ok(), t + ms(11));
        assert!(c
            .committed(LogOffset(1), |_| Some(Epoch(1)), || None, t)
            .is_empty());
        let e = Err(RpcError::Api(corum_controller::ApiError::NotController));
        assert_eq!(
            outcomes(c.answer(b, e.clone(), t).into_iter().collect()).len(),
            1
        );
        assert!(c.answer(b, e, t).is_none());
        assert_eq!(c.stats().timeouts, 1);
        c.check_invariants();
    }

    /// Proves losing leadership answers held calls of the lost epoch NotController and keeps
    /// those of the epoch still led; a gone service answers the calls it had, keeps the held
    /// ones, and refuses every later call at once.
    #[test]
    fn leadership_loss_and_a_gone_service() {
        let t = Instant::now();
        let mut c = PendingCalls::default();
        let old = c.register(1u32, 1, 1000, t).unwrap();
        let new = c.register(2u32, 2, 1000, t).unwrap();
        let waiting = c.register(3u32, 3, 1000, t).unwrap();
        c.hold(old, pid(1, 0, 1), ok(), t);
        c.hold(new, pid(2, 1, 2), ok(), t);
        assert_eq!(
            outcomes(c.leadership(Some(Epoch(2)), Some(&hint()), t)),
            vec![(
                1,
                1,
                Err(RpcError::NotController {
                    leader: Some(hint())
                })
            )]
        );
        assert_eq!(
            outcomes(c.service_gone(t)),
            vec![(3, 3, Err(RpcError::NotController { leader: None }))]
        );
        let _ = waiting;
        assert_eq!(c.held_len(), 1);
        let refused = c.register(4u32, 4, 1000, t).unwrap_err();
        assert_eq!(refused.0, 4);
        assert_eq!(
            outcomes(c.committed(LogOffset(2), |_| Some(Epoch(2)), || None, t)),
            vec![(2, 2, Ok(()))]
        );
        assert!(c.is_empty());
        c.check_invariants();
    }

    /// Proves every stage is timed once: queued at forwarding, to_proposed at hold,
    /// to_durable when the log is durable past the batch, to_committed at release.
    #[test]
    fn stages_are_timed_once() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut c = PendingCalls::default();
        let a = c.register(1u32, 1, 1000, t).unwrap();
        c.forwarded([a], t + ms(1));
        c.forwarded([a], t + ms(2));
        c.hold(a, pid(1, 5, 7), ok(), t + ms(3));
        c.durable(LogOffset(6), t + ms(4));
        assert_eq!(c.stats().to_durable.count, 0, "the batch ends at 7");
        c.durable(LogOffset(7), t + ms(5));
        c.durable(LogOffset(9), t + ms(6));
        c.committed(LogOffset(7), |_| Some(Epoch(1)), || None, t + ms(8));
        let s = c.stats();
        assert_eq!(
            (
                s.queued.count,
                s.to_proposed.count,
                s.to_durable.count,
                s.to_committed.count
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(s.queued.sum_us, 1_000);
        assert_eq!(s.to_proposed.sum_us, 2_000);
        assert_eq!(s.to_durable.sum_us, 2_000);
        assert_eq!(s.to_committed.sum_us, 5_000);
        assert_eq!(s.commit_latency.sum_us, 8_000);
    }

    mod model {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Register(u32),
            Answer(u8),
            Hold(u8, u8),
            Durable(u8),
            Commit(u8, bool),
            Leadership(Option<u8>),
            Expire(u32),
            ServiceGone,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                (1u32..100).prop_map(Op::Register),
                any::<u8>().prop_map(Op::Answer),
                (any::<u8>(), 0u8..4).prop_map(|(c, e)| Op::Hold(c, e)),
                any::<u8>().prop_map(Op::Durable),
                (any::<u8>(), any::<bool>()).prop_map(|(h, m)| Op::Commit(h, m)),
                proptest::option::of(0u8..4).prop_map(Op::Leadership),
                (0u32..200).prop_map(Op::Expire),
                Just(Op::ServiceGone),
            ]
        }

        proptest! {
            /// Proves against any sequence of events that every registered call is answered
            /// at most once, that a drain answers the rest exactly once, and that the indexes
            /// stay consistent after every step.
            #[test]
            fn every_call_gets_exactly_one_answer(ops in proptest::collection::vec(op(), 1..80)) {
                let t = Instant::now();
                let mut c = PendingCalls::default();
                let mut ids = Vec::new();
                let mut answered = std::collections::HashMap::<u32, u32>::new();
                let mut next_reply = 0u32;
                let mut next_base = 0u64;
                let count = |out: Vec<Outgoing<u32>>, answered: &mut std::collections::HashMap<u32, u32>| {
                    for (r, _) in out {
                        *answered.entry(r).or_default() += 1;
                    }
                };
                for op in ops {
                    match op {
                        Op::Register(timeout) => {
                            next_reply += 1;
                            match c.register(next_reply, u64::from(next_reply), timeout, t) {
                                Ok(id) => ids.push(id),
                                Err(out) => count(vec![out], &mut answered),
                            }
                        }
                        Op::Answer(i) if !ids.is_empty() => {
                            let id = ids[i as usize % ids.len()];
                            count(c.answer(id, Ok(ok()), t).into_iter().collect(), &mut answered);
                        }
                        Op::Hold(i, e) if !ids.is_empty() => {
                            let id = ids[i as usize % ids.len()];
                            let at_service = c.calls.get(&id).is_some_and(|e| matches!(e.stage, Stage::AtService { .. }));
                            if at_service {
                                c.hold(id, pid(u64::from(e), next_base, next_base + 1), ok(), t);
                                next_base += 1;
                            }
                        }
                        Op::Durable(o) => c.durable(LogOffset(u64::from(o)), t),
                        Op::Commit(h, matches) => {
                            let out = c.committed(LogOffset(u64::from(h)), |_| matches.then_some(Epoch(1)), || None, t);
                            count(out, &mut answered);
                        }
                        Op::Leadership(e) => {
                            let out = c.leadership(e.map(|e| Epoch(u64::from(e))), None, t);
                            count(out, &mut answered);
                        }
                        Op::Expire(ms) => {
                            let out = c.expire(t + Duration::from_millis(u64::from(ms)));
                            count(out, &mut answered);
                        }
                        Op::ServiceGone => count(c.service_gone(t), &mut answered),
                        _ => {}
                    }
                    c.check_invariants();
                    prop_assert!(answered.values().all(|&n| n == 1), "a call answered twice: {answered:?}");
                }
                count(c.drain(t), &mut answered);
                prop_assert!(c.is_empty());
                prop_assert_eq!(answered.len() as u32, next_reply, "every call answered");
                prop_assert!(answered.values().all(|&n| n == 1));
            }
        }
    }
}
