//! Success answers released by the Raft driver the moment their batch commits.
//!
//! A proposing request's success answer is known when the controller service handles it; only
//! its sending waits for the commit. So the service hands the success answers of a batch to
//! the driver with the proposal ([`HeldAnswer`]), the driver holds them in its [`AnswerGate`],
//! and sends each as soon as the high watermark passes its batch and the log holds the batch
//! exactly as predicted (the predicted epoch at the predicted base offset; one leader appends
//! at most one batch at an offset in its epoch, so that identifies it). That is before the
//! publisher reads the batch back and before the service replays it, and — on the worker shard
//! of the split placement — before it crosses to the controller shard and the answer crosses
//! back. The service still decides everything else (a batch lost to a leader change, a
//! deadline, a resignation): a held answer whose offsets committed with another epoch is
//! dropped, and whichever answer reaches the call first is the one sent ([`AnswerSlot`]); both
//! are true (a timed-out request may have committed, as in Kafka).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::{Rc, Weak};

use corum_raft::ProposalId;
use corum_types::{Epoch, LogOffset};
use glommio::channels::local_channel::LocalSender;

use crate::protocol::ResponseFrame;

/// Calls waiting on the worker shard of the split placement, by their id there.
pub(crate) type Registry = Rc<RefCell<HashMap<u64, AnswerSlot>>>;
type WeakRegistry = Weak<RefCell<HashMap<u64, AnswerSlot>>>;

/// One call's answer channel, shared by everyone who may answer it: the first answer is sent,
/// later ones are dropped. Cheap to clone.
#[derive(Clone)]
pub struct AnswerSlot(Rc<RefCell<SlotInner>>);

struct SlotInner {
    reply: Option<LocalSender<ResponseFrame>>,
    /// Where the call is registered by id (the shard bridge's worker side): sending removes it.
    registry: Option<(WeakRegistry, u64)>,
}

impl AnswerSlot {
    pub fn new(reply: LocalSender<ResponseFrame>) -> Self {
        Self(Rc::new(RefCell::new(SlotInner {
            reply: Some(reply),
            registry: None,
        })))
    }

    /// A slot registered in `registry` as `id`, removed from it by its first answer.
    pub(crate) fn registered(
        reply: LocalSender<ResponseFrame>,
        registry: &Registry,
        id: u64,
    ) -> Self {
        let slot = Self(Rc::new(RefCell::new(SlotInner {
            reply: Some(reply),
            registry: Some((Rc::downgrade(registry), id)),
        })));
        registry.borrow_mut().insert(id, slot.clone());
        slot
    }

    /// Sends `frame` if nothing answered the call before; returns whether it was sent. The
    /// caller must not hold a borrow of the slot's registry.
    pub fn send(&self, frame: ResponseFrame) -> bool {
        let (reply, registry) = {
            let mut inner = self.0.borrow_mut();
            (inner.reply.take(), inner.registry.take())
        };
        if let Some((registry, id)) = registry {
            if let Some(registry) = registry.upgrade() {
                registry.borrow_mut().remove(&id);
            }
        }
        // Capacity 1, one answer per call: never full; a caller that gave up closed it.
        reply.is_some_and(|r| r.try_send(frame).is_ok())
    }

    /// Gives the call up unanswered (its caller sees the channel close) unless something
    /// answered it already.
    pub fn abandon(&self) {
        let reply = self.0.borrow_mut().reply.take();
        drop(reply);
    }

    /// Whether an answer was sent (or the slot was given up).
    #[cfg(test)]
    pub fn is_spent(&self) -> bool {
        self.0.borrow().reply.is_none()
    }
}

/// A success answer that travels with its proposal, sent to the call `to` when the batch
/// commits.
#[derive(Debug)]
pub struct Gated<To> {
    pub to: To,
    /// The batch as the service predicted it; one that commits otherwise (another epoch at
    /// that base) means the proposal was lost: the answer is dropped.
    pub batch: ProposalId,
    /// The first offset of this request's records in the batch.
    pub part_base: LogOffset,
    pub answer: ResponseFrame,
}

impl<To> Gated<To> {
    /// The same answer for the call `to`.
    pub fn to<U>(self, to: U) -> Gated<U> {
        Gated {
            to,
            batch: self.batch,
            part_base: self.part_base,
            answer: self.answer,
        }
    }
}

/// An answer the driver holds: its call's slot.
pub type HeldAnswer = Gated<AnswerSlot>;

/// The driver's held answers, by the first offset of their part. Pure bookkeeping.
#[derive(Default)]
pub struct AnswerGate {
    held: BTreeMap<LogOffset, HeldAnswer>,
    released: u64,
}

impl AnswerGate {
    /// Holds the answers of `batch`, just appended at the log end, until it is decided (an
    /// answer predicted for another batch is not held). Whatever the gate still holds past
    /// `batch`'s base was truncated away (the log ended there): it is dropped, so it can
    /// neither hold back later answers nor be taken for this batch.
    pub fn hold_batch(&mut self, batch: ProposalId, answers: Vec<HeldAnswer>) {
        let base = batch.base_offset;
        drop(self.held.split_off(&base));
        while let Some(last) = self.held.last_entry() {
            if last.get().batch.end_offset <= base {
                break;
            }
            last.remove();
        }
        for a in answers {
            if a.batch == batch {
                self.held.insert(a.part_base, a);
            }
        }
    }

    /// The high watermark is `hwm`: sends the answers of every batch below it that the log
    /// holds as predicted (`epoch_at(base)` is the batch's epoch) and forgets the others
    /// there. Returns how many it sent.
    pub fn release(
        &mut self,
        hwm: LogOffset,
        epoch_at: impl Fn(LogOffset) -> Option<Epoch>,
    ) -> usize {
        let mut sent = 0;
        while let Some(entry) = self.held.first_entry() {
            if entry.get().batch.end_offset > hwm {
                break;
            }
            let a = entry.remove();
            if epoch_at(a.batch.base_offset) == Some(a.batch.epoch) && a.to.send(a.answer) {
                sent += 1;
            }
        }
        self.released += sent as u64;
        sent
    }

    /// Answers sent so far.
    pub fn released(&self) -> u64 {
        self.released
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ResponseBody;
    use glommio::channels::local_channel::{self, LocalReceiver};

    fn held(
        corr: u64,
        epoch: u64,
        base: u64,
        end: u64,
        part_base: u64,
    ) -> (HeldAnswer, LocalReceiver<ResponseFrame>) {
        let (tx, rx) = local_channel::new_bounded(1);
        let a = HeldAnswer {
            to: AnswerSlot::new(tx),
            batch: ProposalId {
                epoch: Epoch(epoch),
                base_offset: LogOffset(base),
                end_offset: LogOffset(end),
            },
            part_base: LogOffset(part_base),
            answer: ResponseFrame {
                correlation_id: corr,
                body: Ok(ResponseBody::UnregisterBroker),
            },
        };
        (a, rx)
    }

    fn got(rx: &LocalReceiver<ResponseFrame>) -> Option<u64> {
        futures_lite::future::block_on(futures_lite::future::poll_once(rx.recv()))
            .flatten()
            .map(|f| f.correlation_id)
    }

    /// Proves the gate sends every part of a batch once the high watermark passes it and the
    /// log holds it with the predicted epoch, nothing before, and nothing of a batch another
    /// epoch's took the place of.
    #[test]
    fn releases_committed_batches_as_predicted() {
        let mut g = AnswerGate::default();
        let (a1, r1) = held(1, 3, 10, 13, 10);
        let (a2, r2) = held(2, 3, 10, 13, 12);
        let (a3, r3) = held(3, 3, 13, 15, 13);
        let (a4, r4) = held(4, 3, 15, 16, 15);
        g.hold_batch(a1.batch, vec![a1, a2]);
        g.hold_batch(a3.batch, vec![a3]);
        g.hold_batch(a4.batch, vec![a4]);
        // Offsets 13.. hold a new leader's batch (epoch 4).
        let epoch_at = |o: LogOffset| Some(if o.get() < 13 { Epoch(3) } else { Epoch(4) });
        assert_eq!(g.release(LogOffset(12), epoch_at), 0);
        assert_eq!((got(&r1), got(&r2)), (None, None));
        assert_eq!(g.release(LogOffset(13), epoch_at), 2);
        assert_eq!((got(&r1), got(&r2)), (Some(1), Some(2)));
        assert_eq!(g.release(LogOffset(16), epoch_at), 0);
        assert_eq!((got(&r3), got(&r4)), (None, None));
        assert!(g.is_empty());
        assert_eq!(g.released(), 2);
        // A batch the log no longer holds at all (None) is dropped too.
        let (a5, r5) = held(5, 3, 16, 17, 16);
        g.hold_batch(a5.batch, vec![a5]);
        assert_eq!(g.release(LogOffset(17), |_| None), 0);
        assert_eq!(got(&r5), None);
    }

    /// Proves a batch appended where held ones were (their offsets were truncated away: a new
    /// leader term of this node) drops them, so they hold back nothing, and that an answer
    /// predicted for another batch than the one appended is not held.
    #[test]
    fn a_new_batch_drops_what_was_truncated_under_it() {
        let mut g = AnswerGate::default();
        let (old, r_old) = held(1, 1, 100, 200, 100);
        let (old2, r_old2) = held(2, 1, 200, 210, 200);
        g.hold_batch(old.batch, vec![old]);
        g.hold_batch(old2.batch, vec![old2]);
        // Epoch 2 truncated the log to 150 and appended 150..151 here.
        let (new, r_new) = held(3, 2, 150, 151, 150);
        let (wrong, r_wrong) = held(4, 2, 151, 152, 151);
        let b = new.batch;
        g.hold_batch(b, vec![new, wrong]);
        let epoch_at = |o: LogOffset| Some(if o.get() < 150 { Epoch(1) } else { Epoch(2) });
        assert_eq!(g.release(LogOffset(151), epoch_at), 1);
        assert_eq!(got(&r_new), Some(3));
        assert!(g.is_empty());
        assert_eq!(
            (got(&r_old), got(&r_old2), got(&r_wrong)),
            (None, None, None)
        );
    }

    /// Proves the first answer of a call wins: a slot the service answered first sends
    /// nothing more, and a registered slot leaves its registry when it answers.
    #[test]
    fn first_answer_wins_and_leaves_the_registry() {
        let registry: Registry = Rc::default();
        let (tx, rx) = local_channel::new_bounded(1);
        let slot = AnswerSlot::registered(tx, &registry, 7);
        assert!(registry.borrow().contains_key(&7));
        let mut g = AnswerGate::default();
        let batch = ProposalId {
            epoch: Epoch(1),
            base_offset: LogOffset(0),
            end_offset: LogOffset(1),
        };
        g.hold_batch(
            batch,
            vec![HeldAnswer {
                to: slot.clone(),
                batch,
                part_base: LogOffset(0),
                answer: ResponseFrame {
                    correlation_id: 70,
                    body: Ok(ResponseBody::UnregisterBroker),
                },
            }],
        );
        let timeout = ResponseFrame {
            correlation_id: 71,
            body: Err(crate::protocol::RpcError::Timeout { timeout_ms: 1 }),
        };
        assert!(slot.send(timeout));
        assert!(slot.is_spent());
        assert!(registry.borrow().is_empty());
        assert_eq!(g.release(LogOffset(1), |_| Some(Epoch(1))), 0);
        assert_eq!(got(&rx), Some(71));
        assert_eq!(got(&rx), None);
    }
}
