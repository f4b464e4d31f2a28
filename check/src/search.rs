//! The linearizability search of one key's history: Wing & Gong's tree search over the
//! history's events, with Lowe's memoization of configurations, as Porcupine does it.
//!
//! # The search
//!
//! The operations' events — a call at `invoke_ns`, a return at `complete_ns` — form one doubly
//! linked list in time order (a call before a return at the same instant: two operations that
//! touch at one instant count as concurrent, so equal times never produce a false alarm). A
//! *configuration* is the set of operations linearized so far and the model state
//! they lead to. Linearized operations are lifted out of the list, so its head always starts
//! with the calls of operations that may take effect next: every call before the first return
//! still in the list. The search tries those calls in order. One whose recorded result the
//! model accepts in the current state is linearized (lifted, its state pushed on a stack) and
//! the scan starts again from the head; reaching a return means that operation's turn passed
//! without it: the search backtracks (pops the last linearized operation, puts it back, and
//! tries the call after it instead). So operations are linearized just in time: never before
//! their call, never past the return of one not yet linearized. Each configuration is explored
//! once: a cache of every configuration reached (Lowe) turns the exponential tree into at most
//! one visit per reachable (set, state) pair. The history is linearizable once every
//! operation with a known outcome is linearized; it is not once the stack is empty at a
//! return.
//!
//! # Unknown outcomes
//!
//! An operation whose outcome is unknown has no return event: its call stays a candidate
//! from its invocation to the end of the history, so it may take effect at any point after
//! its invocation, after the client gave up too. The search never needs it: it succeeds as
//! soon as the operations of known outcome are linearized, and so an unknown operation may
//! also never take effect. (Unknown reads, which constrain nothing, are dropped before the
//! search: [`crate::keys`].) Pending unknown operations multiply the configurations, so most
//! are rewritten away first, keeping the same linearizations ([`crate::reduce`]): those
//! nothing observed are dropped, those that one result proves applied become known.
//!
//! Two more shortcuts keep pending unknown operations from multiplying the configurations:
//! one that would not change the state is never linearized (leaving it out of a
//! linearization changes nothing, and it stays available), and of equal ones only the first
//! in the list is tried (both stay pending to the end, so the configurations either leads to
//! are the same up to swapping them): `k` pending deletes of unknown outcome then cost `k + 1`
//! configurations, not `2^k`.
//!
//! # Reads
//!
//! A read (or any observation without effect) that the model accepts in the current state
//! is linearized at once and without a backtracking alternative: if any linearization of the
//! rest exists, one exists with the read right here (every operation that must precede the
//! read is linearized already, since its return came before the read's call, and the read
//! changes nothing that later operations see). This cuts the branching that concurrent reads
//! would otherwise cause. [`crate::model::Model`] states what a model must guarantee for it.
//!
//! # Bounds
//!
//! [`Limits`]: a number of steps (one call tried, or one backtrack), the bytes of the
//! configuration cache, and a deadline. Steps and bytes are deterministic; the deadline is
//! not (a slower machine may give up where a faster one decided), so it is a guard, and the
//! step budget is the bound to rely on. Past any of them the key is [`Verdict::Undecided`].

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::Instant;

use crate::model::{Model, Timed};
use crate::reduce::reduce;

/// What one search may spend.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Steps: calls tried plus backtracks.
    pub steps_max: u64,
    /// Bytes of the configuration cache (estimated: set, state, table overhead).
    pub cache_bytes_max: u64,
    /// When to give up whatever the steps left.
    pub deadline: Option<Instant>,
}

impl Limits {
    /// Steps only; a cache of up to 256 MiB.
    pub fn steps(steps_max: u64) -> Limits {
        Limits {
            steps_max,
            cache_bytes_max: 256 << 20,
            deadline: None,
        }
    }
}

/// The decision on one history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    /// No order of the operations fits both real time and the model.
    Violation,
    /// A limit ran out first.
    Undecided(Exhausted),
}

/// Which limit ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exhausted {
    Steps,
    CacheBytes,
    Deadline,
}

/// The decision and what it cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Searched {
    pub verdict: Verdict,
    pub steps: u64,
    /// Configurations cached when the search ended.
    pub configurations: u64,
}

/// Checks the deadline once per this many steps (reading the clock costs more than a step).
const DEADLINE_CHECK_STEPS: u64 = 1024;

const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

/// One event in the linked list. The list is indexed by `u32` (a key's history of more than
/// four billion events is refused by an assertion; the cache would not fit first).
#[derive(Clone, Copy, Debug)]
struct Node {
    prev: u32,
    next: u32,
    /// The operation (index into the history); unused for the head.
    op: u32,
    /// For a call, its return (`NIL` for an operation of unknown outcome); for a return or the
    /// head, `NIL`.
    ret: u32,
    is_call: bool,
}

struct Events {
    nodes: Vec<Node>,
}

impl Events {
    fn new<O>(ops: &[Timed<O>]) -> Events {
        assert!(
            ops.len() < (u32::MAX / 2) as usize,
            "a key's history fits u32 event indices"
        );
        // (time, 0 for a call / 1 for a return, op): calls before returns at one instant.
        let mut events: Vec<(u64, u8, u32)> = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            let i = u32::try_from(i).expect("asserted above");
            events.push((op.invoke_ns, 0, i));
            if let Some(complete) = op.complete_ns {
                assert!(complete >= op.invoke_ns, "validated when read");
                events.push((complete, 1, i));
            }
        }
        events.sort_unstable();
        let mut nodes = Vec::with_capacity(events.len() + 1);
        nodes.push(Node {
            prev: NIL,
            next: if events.is_empty() { NIL } else { 1 },
            op: NIL,
            ret: NIL,
            is_call: false,
        });
        let mut call_of = vec![NIL; ops.len()];
        let last = events.len() as u32;
        for (k, &(_, kind, op)) in events.iter().enumerate() {
            let index = k as u32 + 1;
            nodes.push(Node {
                prev: index - 1,
                next: if index == last { NIL } else { index + 1 },
                op,
                ret: NIL,
                is_call: kind == 0,
            });
            if kind == 0 {
                call_of[op as usize] = index;
            } else {
                let call = call_of[op as usize];
                nodes[call as usize].ret = index;
            }
        }
        Events { nodes }
    }

    fn unlink(&mut self, n: u32) {
        let Node { prev, next, .. } = self.nodes[n as usize];
        self.nodes[prev as usize].next = next;
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
    }

    /// Puts back a node unlinked last (dancing links: its own `prev`/`next` were kept).
    fn relink(&mut self, n: u32) {
        let Node { prev, next, .. } = self.nodes[n as usize];
        self.nodes[prev as usize].next = n;
        if next != NIL {
            self.nodes[next as usize].prev = n;
        }
    }

    /// Whether an operation of unknown outcome equal to the one of call `call` has its call
    /// earlier in the list: both are then pending for the rest of the history, so either can
    /// stand for the other, and only the earlier is tried.
    fn same_unknown_before<O: Eq>(&self, call: u32, ops: &[Timed<O>]) -> bool {
        let op = &ops[self.nodes[call as usize].op as usize].op;
        let mut n = self.nodes[call as usize].prev;
        while n != HEAD {
            let node = &self.nodes[n as usize];
            if node.is_call && node.ret == NIL && ops[node.op as usize].op == *op {
                return true;
            }
            n = node.prev;
        }
        false
    }

    /// Takes an operation's call and return out of the list.
    fn lift(&mut self, call: u32) {
        self.unlink(call);
        let ret = self.nodes[call as usize].ret;
        if ret != NIL {
            self.unlink(ret);
        }
    }

    /// Undoes `lift`, in the reverse order.
    fn unlift(&mut self, call: u32) {
        let ret = self.nodes[call as usize].ret;
        if ret != NIL {
            self.relink(ret);
        }
        self.relink(call);
    }
}

/// The set of linearized operations, in a form whose size follows the concurrency, not the
/// history's length.
///
/// Operations of known outcome are ranked by completion (ties by invocation, then index),
/// those of unknown outcome after them. Every operation whose return the search has passed is
/// linearized, and those are a prefix of that ranking; so a set is the length of its longest
/// linearized prefix and the few ranks linearized beyond it (operations linearized ahead of
/// their turn: at most the concurrent ones, and unknown ones). Two sets are equal iff both
/// parts are, which makes it an exact cache key of a few words where a bitset of the whole
/// history would take `n / 8` bytes (1.25 KiB for a key of 10,000 operations) per entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Linearized {
    prefix: u32,
    /// Ranks at or past `prefix + 1`, ascending.
    beyond: Vec<u32>,
}

impl Linearized {
    /// Adds a rank not in the set.
    fn insert(&mut self, rank: u32) {
        debug_assert!(rank >= self.prefix);
        if rank == self.prefix {
            self.prefix += 1;
            let run = self
                .beyond
                .iter()
                .zip(self.prefix..)
                .take_while(|(r, want)| **r == *want)
                .count();
            self.beyond.drain(..run);
            self.prefix += run as u32;
        } else {
            let at = self.beyond.partition_point(|&r| r < rank);
            debug_assert!(self.beyond.get(at) != Some(&rank), "inserted twice");
            self.beyond.insert(at, rank);
        }
    }

    fn bytes(&self) -> u64 {
        (self.beyond.len() * 4) as u64
    }
}

/// Each operation's rank for [`Linearized`], and how many are of known outcome.
fn ranks<O>(ops: &[Timed<O>]) -> (Vec<u32>, u32) {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| {
        (
            ops[i].complete_ns.is_none(),
            ops[i].complete_ns,
            ops[i].invoke_ns,
            i,
        )
    });
    let mut rank = vec![0u32; ops.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r as u32;
    }
    let definite = ops.iter().filter(|o| o.complete_ns.is_some()).count() as u32;
    (rank, definite)
}

/// Firefox's hash (as in rustc): the cache's keys are our own sets and states, not input
/// an attacker picks, so a fast hash without DoS resistance is the right one. Deterministic.
#[derive(Default)]
struct FxHasher {
    hash: u64,
}

impl FxHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("chunks of 8")));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A linearized operation, with what to restore when it is taken back.
struct Frame<S> {
    call: u32,
    state_before: S,
    linearized_before: Linearized,
    /// A read linearized without alternative: backtracking past it goes on to the frame below.
    forced: bool,
}

/// Decides whether `ops` (one key's operations) are linearizable under `M`.
pub fn search<M: Model>(ops: &[Timed<M::Op>], limits: &Limits) -> Searched {
    let model = M::for_ops(ops);
    let reduced = reduce(&model, ops);
    let ops = &reduced[..];
    let mut events = Events::new(ops);
    let (rank, definite) = ranks(ops);
    let mut linearized = Linearized {
        prefix: 0,
        beyond: Vec::new(),
    };
    let entry_overhead_bytes = (std::mem::size_of::<(Linearized, M::State)>() + 16) as u64;
    let mut cache: HashSet<(Linearized, M::State), BuildHasherDefault<FxHasher>> =
        HashSet::default();
    let mut cache_bytes = 0u64;
    let mut stack: Vec<Frame<M::State>> = Vec::new();
    let mut state = model.init();
    let mut cur = events.nodes[HEAD as usize].next;
    let mut steps = 0u64;

    let done = |verdict, steps, cache: &HashSet<_, _>| Searched {
        verdict,
        steps,
        configurations: cache.len() as u64,
    };

    loop {
        // The operations of known outcome hold the ranks below `definite`.
        if linearized.prefix >= definite {
            return done(Verdict::Linearizable, steps, &cache);
        }
        if steps >= limits.steps_max {
            return done(Verdict::Undecided(Exhausted::Steps), steps, &cache);
        }
        if cache_bytes > limits.cache_bytes_max {
            return done(Verdict::Undecided(Exhausted::CacheBytes), steps, &cache);
        }
        if steps % DEADLINE_CHECK_STEPS == 0 {
            if let Some(deadline) = limits.deadline {
                if Instant::now() >= deadline {
                    return done(Verdict::Undecided(Exhausted::Deadline), steps, &cache);
                }
            }
        }
        steps += 1;

        let mut backtrack = cur == NIL || !events.nodes[cur as usize].is_call;
        if !backtrack {
            let node = events.nodes[cur as usize];
            let op = &ops[node.op as usize].op;
            match model.step(&state, op) {
                None => {
                    cur = node.next;
                    continue;
                }
                Some(next_state) => {
                    if ops[node.op as usize].complete_ns.is_none()
                        && (next_state == state || events.same_unknown_before(cur, ops))
                    {
                        cur = node.next;
                        continue;
                    }
                    let forced = model.is_read(op) && next_state == state;
                    let mut next = linearized.clone();
                    next.insert(rank[node.op as usize]);
                    let bytes = next.bytes() + entry_overhead_bytes;
                    if cache.insert((next.clone(), next_state.clone())) {
                        cache_bytes += bytes;
                        stack.push(Frame {
                            call: cur,
                            state_before: std::mem::replace(&mut state, next_state),
                            linearized_before: std::mem::replace(&mut linearized, next),
                            forced,
                        });
                        events.lift(cur);
                        cur = events.nodes[HEAD as usize].next;
                        continue;
                    }
                    // A read that fits but leads to a configuration already explored (so
                    // failed): then this configuration fails too, as the module doc argues.
                    if forced {
                        backtrack = true;
                    } else {
                        cur = node.next;
                    }
                }
            }
        }
        if backtrack {
            loop {
                let Some(frame) = stack.pop() else {
                    return done(Verdict::Violation, steps, &cache);
                };
                events.unlift(frame.call);
                linearized = frame.linearized_before;
                state = frame.state_before;
                if !frame.forced {
                    cur = events.nodes[frame.call as usize].next;
                    break;
                }
            }
        }
    }
}

/// The operations `kept` (indices into `ops`, in any order) as a history of their own.
pub fn subset<O: Clone>(ops: &[Timed<O>], kept: &[usize]) -> Vec<Timed<O>> {
    kept.iter().map(|&i| ops[i].clone()).collect()
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

    fn call_of(events: &Events, op: u32) -> u32 {
        let index = events
            .nodes
            .iter()
            .position(|n| n.is_call && n.op == op)
            .expect("every operation has a call");
        index as u32
    }

    /// The list puts calls before returns at one instant and links each call to its return;
    /// lifting and unlifting restore it exactly.
    #[test]
    fn events_are_ordered_and_lift_restores() {
        let ops = [
            op(5, Some(10), RegisterOp::Write(Some(1))),
            op(10, Some(12), RegisterOp::Read(Some(1))),
            op(0, None, RegisterOp::Write(Some(2))),
        ];
        let mut events = Events::new(&ops);
        let order: Vec<(u32, bool)> = {
            let mut v = Vec::new();
            let mut n = events.nodes[0].next;
            while n != NIL {
                v.push((
                    events.nodes[n as usize].op,
                    events.nodes[n as usize].is_call,
                ));
                n = events.nodes[n as usize].next;
            }
            v
        };
        assert_eq!(
            order,
            vec![(2, true), (0, true), (1, true), (0, false), (1, false)]
        );
        assert_eq!(events.nodes[call_of(&events, 2) as usize].ret, NIL);
        let before: Vec<(u32, u32)> = events.nodes.iter().map(|n| (n.prev, n.next)).collect();
        for first in 0..3 {
            for second in 0..3 {
                if first == second {
                    continue;
                }
                let (a, b) = (call_of(&events, first), call_of(&events, second));
                events.lift(a);
                events.lift(b);
                events.unlift(b);
                events.unlift(a);
                let after: Vec<(u32, u32)> =
                    events.nodes.iter().map(|n| (n.prev, n.next)).collect();
                assert_eq!(before, after);
            }
        }
    }

    /// The step budget stops a search and says so; a larger one lets it decide.
    #[test]
    fn the_step_budget_is_honoured() {
        // Eight concurrent writes and a read of the last value written after all of them:
        // some order must end with the write of 7, which needs a little search.
        let mut ops: Vec<Timed<RegisterOp>> = (0..8)
            .map(|v| op(0, Some(100), RegisterOp::Write(Some(v))))
            .collect();
        ops.push(op(200, Some(300), RegisterOp::Read(Some(7))));
        let small = search::<RegisterModel>(&ops, &Limits::steps(3));
        assert_eq!(small.verdict, Verdict::Undecided(Exhausted::Steps));
        assert_eq!(small.steps, 3);
        let enough = search::<RegisterModel>(&ops, &Limits::steps(10_000));
        assert_eq!(enough.verdict, Verdict::Linearizable);
        let cache_limited = search::<RegisterModel>(
            &ops,
            &Limits {
                steps_max: 10_000,
                cache_bytes_max: 1,
                deadline: None,
            },
        );
        assert_eq!(
            cache_limited.verdict,
            Verdict::Undecided(Exhausted::CacheBytes)
        );
        let late = search::<RegisterModel>(
            &ops,
            &Limits {
                steps_max: 10_000,
                cache_bytes_max: u64::MAX,
                deadline: Some(Instant::now()),
            },
        );
        assert_eq!(late.verdict, Verdict::Undecided(Exhausted::Deadline));
    }

    /// An empty history and one of unknown operations only are linearizable at once.
    #[test]
    fn nothing_known_is_linearizable() {
        let none: [Timed<RegisterOp>; 0] = [];
        assert_eq!(
            search::<RegisterModel>(&none, &Limits::steps(0)).verdict,
            Verdict::Linearizable
        );
        let unknown = [op(0, None, RegisterOp::Write(Some(1)))];
        assert_eq!(
            search::<RegisterModel>(&unknown, &Limits::steps(0)).verdict,
            Verdict::Linearizable
        );
    }
}
