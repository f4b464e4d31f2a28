//! Taming operations of unknown outcome before the search.
//!
//! An operation of unknown outcome stays a candidate from its invocation to the end, and the
//! search's configurations include which of them were used: `k` of them pending can make
//! `2^k` configurations, and a violation — where every configuration must be tried — would
//! run out of any budget during a partition that timed out a hundred writes. Two rewrites,
//! each keeping exactly the same linearizations (sound and complete), remove most of them:
//!
//! 1. **Unobserved: never applied.** An unknown write on which no operation can depend
//!    (nothing that may come after it has a result it can cause: no read of its value, no
//!    delete of the topic it creates) is dropped. In a linearization that uses it, the
//!    operation right after it would depend on it, so it is last, and leaving it out changes
//!    nothing. Repeated until nothing more goes (dropping one may leave another unobserved).
//! 2. **Observed by a result only it explains: applied, and before that operation
//!    completed.** If an operation of known outcome has a result the initial state does not
//!    explain, something before it in any linearization caused it (the last state-changing
//!    operation before it, by [`Model`]'s obligations). If the one operation that can is an
//!    unknown write, every linearization holds that write, before the operation, so before
//!    the operation's completion: the write becomes one of known outcome that completed
//!    then. With unique values (one write per value, as corum's recorders write them), every
//!    unknown write that a read saw is of this kind.
//!
//! What remains unknown is a write that several operations may have caused the result of
//! (a delete, when other deletes could explain a read of "absent"), which is rare.

use crate::model::{Model, Timed};

/// `ops` rewritten as above: the unobserved unknown writes left out, the singly observed
/// ones made known. Keeps the order of the rest.
pub fn reduce<M: Model>(model: &M, ops: &[Timed<M::Op>]) -> Vec<Timed<M::Op>> {
    let n = ops.len();
    // Whether `o` may come after `w`: it did not complete before `w` was invoked.
    let may_follow = |w: usize, o: usize| ops[o].complete_ns.is_none_or(|c| c >= ops[w].invoke_ns);
    let unknown_writers: Vec<usize> = (0..n)
        .filter(|&i| ops[i].complete_ns.is_none() && !model.is_read(&ops[i].op))
        .collect();
    if unknown_writers.is_empty() {
        return ops.to_vec();
    }
    let dependents: Vec<Vec<usize>> = unknown_writers
        .iter()
        .map(|&w| {
            (0..n)
                .filter(|&o| o != w && may_follow(w, o) && model.causes(&ops[w].op, &ops[o].op))
                .collect()
        })
        .collect();

    let mut dropped = vec![false; n];
    loop {
        let mut changed = false;
        for (k, &w) in unknown_writers.iter().enumerate() {
            if !dropped[w] && dependents[k].iter().all(|&o| dropped[o]) {
                dropped[w] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    let init = model.init();
    let mut complete: Vec<Option<u64>> = ops.iter().map(|o| o.complete_ns).collect();
    for (k, &w) in unknown_writers.iter().enumerate() {
        if dropped[w] {
            continue;
        }
        for &o in &dependents[k] {
            let Some(o_complete) = ops[o].complete_ns else {
                continue;
            };
            if dropped[o] || model.step(&init, &ops[o].op).is_some() {
                continue;
            }
            let sole_cause = (0..n).all(|x| {
                x == w
                    || dropped[x]
                    || model.is_read(&ops[x].op)
                    || !may_follow(x, o)
                    || !model.causes(&ops[x].op, &ops[o].op)
            });
            if sole_cause {
                complete[w] = Some(complete[w].map_or(o_complete, |c| c.min(o_complete)));
            }
        }
    }

    (0..n)
        .filter(|&i| !dropped[i])
        .map(|i| Timed {
            invoke_ns: ops[i].invoke_ns,
            complete_ns: complete[i],
            op: ops[i].op.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RegisterModel, RegisterOp};

    fn op(invoke_ns: u64, complete_ns: Option<u64>, op: RegisterOp) -> Timed<RegisterOp> {
        Timed {
            invoke_ns,
            complete_ns,
            op,
        }
    }

    /// An unknown write nobody read goes; one whose value a read saw becomes known, completed
    /// when the earliest such read completed; an unknown delete that one of several deletes
    /// may explain stays unknown.
    #[test]
    fn unknown_writes_are_dropped_or_made_known() {
        let ops = [
            op(0, None, RegisterOp::Write(Some(1))),
            op(0, None, RegisterOp::Write(Some(2))),
            op(10, Some(20), RegisterOp::Read(Some(2))),
            op(12, Some(15), RegisterOp::Read(Some(2))),
            op(30, None, RegisterOp::Write(None)),
            op(30, Some(40), RegisterOp::Write(None)),
            op(50, Some(60), RegisterOp::Read(None)),
        ];
        let reduced = reduce(&RegisterModel, &ops);
        let expected = vec![
            op(0, Some(15), RegisterOp::Write(Some(2))),
            ops[2].clone(),
            ops[3].clone(),
            ops[4].clone(),
            ops[5].clone(),
            ops[6].clone(),
        ];
        assert_eq!(reduced, expected);
    }

    /// A read that completed before an unknown write was invoked does not depend on it.
    #[test]
    fn real_time_limits_what_may_depend() {
        let ops = [
            op(0, Some(10), RegisterOp::Read(Some(1))),
            op(20, None, RegisterOp::Write(Some(1))),
        ];
        assert_eq!(reduce(&RegisterModel, &ops), vec![ops[0].clone()]);
    }
}
