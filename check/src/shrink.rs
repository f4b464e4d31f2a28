//! Shrinking a non-linearizable history to a small one that still fails.
//!
//! Delta debugging (Zeller's ddmin, one-sided): drop chunks of operations, halving the chunk
//! size down to one, keeping each removal after which the history is still (decidedly) not
//! linearizable; then drop single operations until none can go. The result is *1-minimal*:
//! dropping any one more operation (with what depends on it, below) makes it linearizable,
//! unless the budget ran out first ([`Shrunk::minimal`]).
//!
//! **Dropping a write drops what may have seen it.** An operation *depends* on a write if it
//! may come after it (it did not complete before the write was invoked) and its result fits
//! right after the write ([`crate::model::Model::causes`]): a read of the value written, a
//! read of "absent" after a delete, a create after a delete. Every removal takes the
//! operations that depend on a removed one along, transitively. Without this, a read of `"5"`
//! after the writes of `"5"` and `"6"` would shrink to the read alone (a value nobody wrote),
//! and worse, a read that rightly saw a key deleted would fail once the delete went while an
//! earlier write stayed: a failure the history never had.
//!
//! With it, **a shrunk history is a proof**: were the whole history linearizable, every
//! sub-history closed that way would be too. (Restrict a linearization to it: each remaining
//! operation still comes after the same last state-changing operation, which may have caused
//! its result and which it depends on, so that one remained as well.) So what the report
//! shows fails because the history does, not because of what shrinking took away.
//!
//! Every candidate is judged by [`crate::search::search`] under the per-check limit; an
//! undecided check counts as "not a violation" (the removal is refused), so what is returned
//! was decided to fail.

use crate::model::{Model, Timed};
use crate::search::{search, subset, Limits, Verdict};

/// What shrinking may spend.
#[derive(Clone, Copy, Debug)]
pub struct ShrinkLimits {
    /// Limits of each candidate's search.
    pub check: Limits,
    /// Steps of all candidates' searches together.
    pub steps_max: u64,
}

/// A shrunk violation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shrunk {
    /// Indices into the input, ascending.
    pub kept: Vec<usize>,
    /// Whether nothing more can be dropped (false: the budget ran out first).
    pub minimal: bool,
    pub steps: u64,
    pub checks: u64,
}

/// Shrinks `ops`, which must be decidedly non-linearizable under `M`. Returns the input whole
/// (`minimal: false`) if it is not, as a search under `limits.check` judges.
pub fn shrink<M: Model>(ops: &[Timed<M::Op>], limits: &ShrinkLimits) -> Shrunk {
    let dependents = Dependents::of::<M>(ops);
    let mut run = Run {
        ops,
        dependents: &dependents,
        limits,
        steps: 0,
        checks: 0,
        out_of_budget: false,
    };
    let mut kept: Vec<usize> = (0..ops.len()).collect();
    if !run.fails::<M>(&kept) {
        return Shrunk {
            kept,
            minimal: false,
            steps: run.steps,
            checks: run.checks,
        };
    }
    let mut chunk = kept.len().div_ceil(2).max(1);
    loop {
        let removed = run.pass::<M>(&mut kept, chunk);
        if run.out_of_budget {
            break;
        }
        if chunk == 1 {
            if !removed {
                break;
            }
        } else {
            chunk = chunk.div_ceil(2);
        }
    }
    Shrunk {
        kept,
        minimal: !run.out_of_budget,
        steps: run.steps,
        checks: run.checks,
    }
}

/// For each write, the operations that depend on it.
struct Dependents {
    of: Vec<Vec<usize>>,
}

impl Dependents {
    fn of<M: Model>(ops: &[Timed<M::Op>]) -> Dependents {
        let model = M::for_ops(ops);
        let of = (0..ops.len())
            .map(|w| {
                if model.is_read(&ops[w].op) {
                    return Vec::new();
                }
                (0..ops.len())
                    .filter(|&o| {
                        let before_write = ops[o].complete_ns.is_some_and(|c| c < ops[w].invoke_ns);
                        o != w && !before_write && model.causes(&ops[w].op, &ops[o].op)
                    })
                    .collect()
            })
            .collect();
        Dependents { of }
    }

    /// `kept` without `dropped` and everything that depends on those, transitively.
    fn without(&self, kept: &[usize], dropped: &[usize]) -> Vec<usize> {
        let mut gone = vec![false; self.of.len()];
        let mut todo = dropped.to_vec();
        while let Some(i) = todo.pop() {
            if !std::mem::replace(&mut gone[i], true) {
                todo.extend(&self.of[i]);
            }
        }
        kept.iter().copied().filter(|&i| !gone[i]).collect()
    }
}

struct Run<'a, O> {
    ops: &'a [Timed<O>],
    dependents: &'a Dependents,
    limits: &'a ShrinkLimits,
    steps: u64,
    checks: u64,
    out_of_budget: bool,
}

impl<O: Clone> Run<'_, O> {
    /// Tries to drop each chunk of `chunk` operations, from the last one back; returns
    /// whether any went.
    fn pass<M: Model<Op = O>>(&mut self, kept: &mut Vec<usize>, chunk: usize) -> bool {
        let mut removed = false;
        let mut end = kept.len();
        while end > 0 && !self.out_of_budget {
            let start = end.saturating_sub(chunk);
            let candidate = self.dependents.without(kept, &kept[start..end]);
            if !candidate.is_empty() && self.fails::<M>(&candidate) {
                // What depended on the chunk may sit before it: go on from where the chunk
                // began in the shorter list.
                end = candidate.partition_point(|&i| i < kept[start]);
                *kept = candidate;
                removed = true;
            } else {
                end = start;
            }
        }
        removed
    }

    /// Whether the operations `kept` are decidedly not linearizable.
    fn fails<M: Model<Op = O>>(&mut self, kept: &[usize]) -> bool {
        let left = self.limits.steps_max.saturating_sub(self.steps);
        if left == 0 {
            self.out_of_budget = true;
            return false;
        }
        let limits = Limits {
            steps_max: self.limits.check.steps_max.min(left),
            ..self.limits.check
        };
        let searched = search::<M>(&subset(self.ops, kept), &limits);
        self.steps += searched.steps;
        self.checks += 1;
        if let Verdict::Undecided(_) = searched.verdict {
            if searched.steps >= left {
                self.out_of_budget = true;
            }
        }
        searched.verdict == Verdict::Violation
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RegisterModel, RegisterOp};

    fn op(invoke_ns: u64, complete_ns: u64, op: RegisterOp) -> Timed<RegisterOp> {
        Timed {
            invoke_ns,
            complete_ns: Some(complete_ns),
            op,
        }
    }

    fn limits() -> ShrinkLimits {
        ShrinkLimits {
            check: Limits::steps(100_000),
            steps_max: 10_000_000,
        }
    }

    /// A stale read among unrelated operations shrinks to the two writes and the read, and
    /// keeps the write of the value read (its cause) rather than leaving the read alone.
    #[test]
    fn a_stale_read_keeps_its_story() {
        let mut ops = vec![
            op(0, 10, RegisterOp::Write(Some(1))),
            op(20, 30, RegisterOp::Write(Some(2))),
            op(40, 50, RegisterOp::Read(Some(1))),
        ];
        // Noise: reads of the right value and writes after the stale read.
        for k in 0..20u64 {
            ops.push(op(31 + k % 5, 39, RegisterOp::Read(Some(2))));
            ops.push(op(
                60 + 10 * k,
                65 + 10 * k,
                RegisterOp::Write(Some(3 + k as u32)),
            ));
        }
        let shrunk = shrink::<RegisterModel>(&ops, &limits());
        assert_eq!(shrunk.kept, vec![0, 1, 2]);
        assert!(shrunk.minimal);
    }

    /// A read of a value nobody wrote shrinks to that read alone.
    #[test]
    fn a_read_of_nothing_written_shrinks_to_itself() {
        let ops = vec![
            op(0, 10, RegisterOp::Write(Some(1))),
            op(20, 30, RegisterOp::Read(Some(9))),
            op(40, 50, RegisterOp::Read(Some(1))),
        ];
        let shrunk = shrink::<RegisterModel>(&ops, &limits());
        assert_eq!(shrunk.kept, vec![1]);
    }

    /// A linearizable input comes back whole, marked not minimal.
    #[test]
    fn a_linearizable_input_is_returned_whole() {
        let ops = vec![
            op(0, 10, RegisterOp::Write(Some(1))),
            op(20, 30, RegisterOp::Read(Some(1))),
        ];
        let shrunk = shrink::<RegisterModel>(&ops, &limits());
        assert_eq!(shrunk.kept, vec![0, 1]);
        assert!(!shrunk.minimal);
    }

    /// With no budget left the shrinker stops, with a violation no larger than the input.
    #[test]
    fn the_budget_stops_shrinking() {
        let mut ops = vec![
            op(0, 10, RegisterOp::Write(Some(1))),
            op(20, 30, RegisterOp::Write(Some(2))),
            op(40, 50, RegisterOp::Read(Some(1))),
        ];
        for k in 0..50u64 {
            ops.push(op(
                60 + 10 * k,
                65 + 10 * k,
                RegisterOp::Write(Some(3 + k as u32)),
            ));
        }
        let free = shrink::<RegisterModel>(&ops, &limits());
        assert!(free.minimal);
        let budget = free.steps / 2;
        let tight = ShrinkLimits {
            check: Limits::steps(100_000),
            steps_max: budget,
        };
        let shrunk = shrink::<RegisterModel>(&ops, &tight);
        assert!(!shrunk.minimal);
        assert!(shrunk.kept.len() <= ops.len());
        assert!(shrunk.steps <= budget);
        assert_eq!(
            search::<RegisterModel>(&subset(&ops, &shrunk.kept), &Limits::steps(100_000)).verdict,
            Verdict::Violation
        );
    }
}
