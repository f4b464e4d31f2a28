//! Shrinking a non-linearizable history to a small one that still fails.
//!
//! Delta debugging (Zeller's ddmin, one-sided): drop chunks of operations, halving the chunk
//! size down to one, keeping each removal after which the history is still (decidedly) not
//! linearizable; then drop single operations until none can go. The result is *1-minimal*:
//! removing any one of its operations makes it linearizable or leaves a result without its
//! cause (below), unless the budget ran out first ([`Shrunk::minimal`]).
//!
//! **Causes are kept.** A read of `"5"` after the write of `"5"` and then the write of `"6"`
//! fails; so does the read alone (it saw a value nobody wrote), which says much less. So a
//! removal is refused if an operation left behind saw something only an earlier effect can
//! explain (the model refuses its result in the initial state) and the history had such a
//! cause ([`crate::model::Model::causes`]), but the smaller one has none. A read of a value no
//! operation wrote keeps shrinking down to that read alone, which is the whole story.
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
    /// Whether no single operation can be dropped (false: the budget ran out first).
    pub minimal: bool,
    pub steps: u64,
    pub checks: u64,
}

/// Shrinks `ops`, which must be decidedly non-linearizable under `M`. Returns the input whole
/// (`minimal: false`) if it is not, as a search under `limits.check` judges.
pub fn shrink<M: Model>(ops: &[Timed<M::Op>], limits: &ShrinkLimits) -> Shrunk {
    let causes = Causes::of::<M>(ops);
    let mut run = Run {
        ops,
        causes: &causes,
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

/// For each operation whose result needs an earlier effect and that has one in the history:
/// the operations that may be its cause.
struct Causes {
    needed: Vec<Option<Vec<usize>>>,
}

impl Causes {
    fn of<M: Model>(ops: &[Timed<M::Op>]) -> Causes {
        let model = M::for_ops(ops);
        let init = model.init();
        let writers: Vec<usize> = (0..ops.len())
            .filter(|&i| !model.is_read(&ops[i].op))
            .collect();
        let needed = ops
            .iter()
            .enumerate()
            .map(|(i, o)| {
                if model.step(&init, &o.op).is_some() {
                    return None;
                }
                let found: Vec<usize> = writers
                    .iter()
                    .copied()
                    .filter(|&w| w != i && model.causes(&ops[w].op, &o.op))
                    .collect();
                (!found.is_empty()).then_some(found)
            })
            .collect();
        Causes { needed }
    }

    /// Whether every operation of `kept` that had a cause in the history keeps one.
    fn hold(&self, kept: &[usize], is_kept: &[bool]) -> bool {
        kept.iter().all(|&i| match &self.needed[i] {
            None => true,
            Some(causes) => causes.iter().any(|&c| is_kept[c]),
        })
    }
}

struct Run<'a, O> {
    ops: &'a [Timed<O>],
    causes: &'a Causes,
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
            let candidate: Vec<usize> = kept[..start].iter().chain(&kept[end..]).copied().collect();
            if !candidate.is_empty() && self.fails::<M>(&candidate) {
                *kept = candidate;
                removed = true;
            }
            end = start;
        }
        removed
    }

    /// Whether the operations `kept` keep their causes and are decidedly not linearizable.
    fn fails<M: Model<Op = O>>(&mut self, kept: &[usize]) -> bool {
        let mut is_kept = vec![false; self.ops.len()];
        for &i in kept {
            is_kept[i] = true;
        }
        if !self.causes.hold(kept, &is_kept) {
            return false;
        }
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
