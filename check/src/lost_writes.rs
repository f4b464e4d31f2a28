//! No acknowledged write lost: the final read of a key shows every acknowledged write that
//! completed before it, unless a later write may have replaced it.
//!
//! Implied by linearizability, and checked on its own because it is the property operators
//! ask about first, it names the write, and it needs no search (so it holds even for a key
//! whose linearizability stayed undecided).
//!
//! The *final read* of a key is its observation of known result invoked last (for topics,
//! also an "already exists" or "unknown topic" answer). An acknowledged write `W` that
//! completed before it was invoked is *lost* if the read saw something `W` cannot cause
//! ([`crate::model::Model::causes`]) and no other write (acknowledged, or of unknown outcome)
//! can have come after `W` and caused it: one not completed before `W` was invoked, and
//! invoked before the read completed.

use crate::model::{Model, Timed};

/// A lost write: indices into the key's operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lost {
    pub write: usize,
    pub read: usize,
}

/// The acknowledged writes of `ops` (one key) that its final read does not show.
pub fn lost_writes<M: Model>(ops: &[Timed<M::Op>]) -> Vec<Lost> {
    let model = M::for_ops(ops);
    // The final read: the observation of known result invoked last (the later line on a tie).
    let Some(read) = (0..ops.len())
        .filter(|&i| ops[i].complete_ns.is_some() && model.is_read(&ops[i].op))
        .max_by_key(|&i| (ops[i].invoke_ns, i))
    else {
        return Vec::new();
    };
    let r = &ops[read];
    let read_complete = r.complete_ns.expect("a final read has a known result");
    // The latest completion (unknown outcome: never complete) among the writes that may have
    // caused what the read saw and were invoked before it completed. A write not caused by
    // the read's view is superseded iff one of them did not complete before it was invoked.
    let explainers_complete_max = (0..ops.len())
        .filter(|&w| {
            !model.is_read(&ops[w].op)
                && ops[w].invoke_ns <= read_complete
                && model.causes(&ops[w].op, &r.op)
        })
        .map(|w| ops[w].complete_ns.unwrap_or(u64::MAX))
        .max();
    (0..ops.len())
        .filter(|&w| {
            let op = &ops[w];
            let acknowledged_before_read = op.complete_ns.is_some_and(|c| c < r.invoke_ns);
            acknowledged_before_read
                && !model.is_read(&op.op)
                && !model.causes(&op.op, &r.op)
                && explainers_complete_max.is_none_or(|c| c < op.invoke_ns)
        })
        .map(|write| Lost { write, read })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        CreateResult, DeleteResult, RegisterModel, RegisterOp, TopicModel, TopicOp,
    };

    fn op<O>(invoke_ns: u64, complete_ns: Option<u64>, op: O) -> Timed<O> {
        Timed {
            invoke_ns,
            complete_ns,
            op,
        }
    }

    /// An acknowledged write that the final read does not show, with nothing after it that
    /// wrote what was read, is lost; one replaced by a later write is not.
    #[test]
    fn an_overwritten_value_is_not_lost_a_vanished_one_is() {
        let lost = [
            op(0, Some(10), RegisterOp::Write(Some(1))),
            op(20, Some(30), RegisterOp::Write(Some(2))),
            op(40, Some(50), RegisterOp::Read(Some(1))),
        ];
        assert_eq!(
            lost_writes::<RegisterModel>(&lost),
            vec![Lost { write: 1, read: 2 }]
        );
        let replaced = [
            op(0, Some(10), RegisterOp::Write(Some(1))),
            op(20, Some(30), RegisterOp::Write(Some(2))),
            op(40, Some(50), RegisterOp::Read(Some(2))),
        ];
        assert!(lost_writes::<RegisterModel>(&replaced).is_empty());
    }

    /// A write of unknown outcome invoked before the read completed may have replaced an
    /// acknowledged one; invoked after, it cannot.
    #[test]
    fn unknown_writes_may_replace_until_the_read_completes() {
        let may = [
            op(0, Some(10), RegisterOp::Write(Some(1))),
            op(5, None, RegisterOp::Write(Some(2))),
            op(40, Some(50), RegisterOp::Read(Some(2))),
        ];
        assert!(lost_writes::<RegisterModel>(&may).is_empty());
        let too_late = [
            op(0, Some(10), RegisterOp::Write(Some(1))),
            op(60, None, RegisterOp::Write(Some(2))),
            op(40, Some(50), RegisterOp::Read(Some(2))),
        ];
        assert_eq!(
            lost_writes::<RegisterModel>(&too_late),
            vec![Lost { write: 0, read: 2 }]
        );
        // A write that completed before the acknowledged one was invoked cannot replace it.
        let before = [
            op(0, Some(10), RegisterOp::Write(Some(2))),
            op(20, Some(30), RegisterOp::Write(Some(1))),
            op(40, Some(50), RegisterOp::Read(Some(2))),
        ];
        assert_eq!(
            lost_writes::<RegisterModel>(&before),
            vec![Lost { write: 1, read: 2 }]
        );
    }

    /// A created topic the final describe calls absent, with no delete after it, is lost.
    #[test]
    fn a_vanished_topic_is_lost() {
        let ops = [
            op(0, Some(10), TopicOp::Create(CreateResult::Created(Some(0)))),
            op(20, Some(30), TopicOp::Describe(None)),
        ];
        assert_eq!(
            lost_writes::<TopicModel>(&ops),
            vec![Lost { write: 0, read: 1 }]
        );
        let deleted = [
            op(0, Some(10), TopicOp::Create(CreateResult::Created(Some(0)))),
            op(5, None, TopicOp::Delete(DeleteResult::Unknown)),
            op(20, Some(30), TopicOp::Describe(None)),
        ];
        assert!(lost_writes::<TopicModel>(&deleted).is_empty());
    }
}
