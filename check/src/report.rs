//! Checking a whole history, and the report a person reads.

use std::fmt::{self, Write as _};

use crate::epochs::{epoch_violations, EpochViolation};
use crate::history::{History, Located, OpRecord, Outcome, RunInfo};
use crate::keys::{partition, register_ops, topic_ops, Key, KeyHistory};
use crate::lost_writes::lost_writes;
use crate::model::{Model, RegisterModel, Timed, TopicModel};
use crate::offsets::{offset_regressions, OffsetRegression};
use crate::search::{search, Exhausted, Limits, Verdict};
use crate::shrink::{shrink, ShrinkLimits};

/// What a whole check may spend.
#[derive(Clone, Copy, Debug)]
pub struct CheckLimits {
    /// Each key's search (its step budget is per key: one hard key does not starve the
    /// others, and a violation on any key is found whatever the rest cost).
    pub per_key: Limits,
    /// Steps of shrinking one violation, all its candidate searches together.
    pub shrink_steps_max: u64,
}

impl CheckLimits {
    /// `steps_per_key_max` per key, ten times that for shrinking each violation, a cache of up
    /// to 256 MiB per search, no deadline.
    pub fn steps(steps_per_key_max: u64) -> CheckLimits {
        CheckLimits {
            per_key: Limits::steps(steps_per_key_max),
            shrink_steps_max: steps_per_key_max.saturating_mul(10),
        }
    }
}

impl Default for CheckLimits {
    /// 5 million steps per key (a few seconds at worst), 50 million per shrink.
    fn default() -> Self {
        CheckLimits::steps(5_000_000)
    }
}

/// The overall result, as `corum check-history` exits with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conclusion {
    /// Every check passed and every key was decided linearizable.
    Pass,
    /// Some check failed (whatever stayed undecided).
    Violation,
    /// Nothing failed, but some key's linearizability stayed undecided.
    Undecided,
}

/// A key whose history is not linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyViolation {
    pub key: Key,
    /// The key's operations the search looked at.
    pub ops_total: usize,
    /// The smallest failing sub-history found, in file order.
    pub shrunk: Vec<Located<OpRecord>>,
    /// Whether no operation of `shrunk` can be dropped (with what depends on it) and the rest
    /// still fail (false: the shrink budget ran out first).
    pub minimal: bool,
}

/// A key whose search ran out of a limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndecidedKey {
    pub key: Key,
    pub ops_total: usize,
    pub exhausted: Exhausted,
    pub steps: u64,
}

/// An acknowledged write the final read of its key does not show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostWrite {
    pub key: Key,
    pub write: Located<OpRecord>,
    pub read: Located<OpRecord>,
}

/// Everything a check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub run: Option<RunInfo>,
    pub ops: usize,
    /// Operations no check looks at: failed ones and reads of unknown outcome.
    pub ops_ignored: usize,
    pub keys: usize,
    pub registrations: usize,
    pub observations: usize,
    pub observers: usize,
    /// Search steps of the linearizability checks (shrinking not counted).
    pub steps: u64,
    pub violations: Vec<KeyViolation>,
    pub undecided: Vec<UndecidedKey>,
    pub lost_writes: Vec<LostWrite>,
    pub epoch_violations: Vec<EpochViolation>,
    pub offset_regressions: Vec<OffsetRegression>,
}

impl Report {
    pub fn conclusion(&self) -> Conclusion {
        if !self.violations.is_empty()
            || !self.lost_writes.is_empty()
            || !self.epoch_violations.is_empty()
            || !self.offset_regressions.is_empty()
        {
            Conclusion::Violation
        } else if !self.undecided.is_empty() {
            Conclusion::Undecided
        } else {
            Conclusion::Pass
        }
    }
}

/// Runs every check on `history`. Deterministic unless `limits` has a deadline.
pub fn check(history: &History, limits: &CheckLimits) -> Report {
    let (keys, ops_ignored) = partition(history);
    let mut observers: Vec<&str> = history
        .observations
        .iter()
        .map(|o| o.record.observer.as_str())
        .collect();
    observers.sort_unstable();
    observers.dedup();
    let mut report = Report {
        run: history.run.clone(),
        ops: history.ops.len(),
        ops_ignored,
        keys: keys.len(),
        registrations: history.registrations.len(),
        observations: history.observations.len(),
        observers: observers.len(),
        steps: 0,
        violations: Vec::new(),
        undecided: Vec::new(),
        lost_writes: Vec::new(),
        epoch_violations: epoch_violations(&history.registrations),
        offset_regressions: offset_regressions(&history.observations),
    };
    for key in &keys {
        match key.key {
            Key::Config { .. } => {
                check_key::<RegisterModel>(key, &register_ops(&key.records), limits, &mut report)
            }
            Key::Topic(_) => {
                check_key::<TopicModel>(key, &topic_ops(&key.records), limits, &mut report)
            }
        }
    }
    report
}

fn check_key<M: Model>(
    key: &KeyHistory<'_>,
    ops: &[Timed<M::Op>],
    limits: &CheckLimits,
    report: &mut Report,
) {
    let searched = search::<M>(ops, &limits.per_key);
    report.steps += searched.steps;
    match searched.verdict {
        Verdict::Linearizable => {}
        Verdict::Violation => {
            let shrunk = shrink::<M>(
                ops,
                &ShrinkLimits {
                    check: limits.per_key,
                    steps_max: limits.shrink_steps_max,
                },
            );
            report.violations.push(KeyViolation {
                key: key.key.clone(),
                ops_total: ops.len(),
                shrunk: shrunk
                    .kept
                    .iter()
                    .map(|&i| key.records[i].clone())
                    .collect(),
                minimal: shrunk.minimal,
            });
        }
        Verdict::Undecided(exhausted) => report.undecided.push(UndecidedKey {
            key: key.key.clone(),
            ops_total: ops.len(),
            exhausted,
            steps: searched.steps,
        }),
    }
    for lost in lost_writes::<M>(ops) {
        report.lost_writes.push(LostWrite {
            key: key.key.clone(),
            write: key.records[lost.write].clone(),
            read: key.records[lost.read].clone(),
        });
    }
}

/// At most this many items of each kind are printed.
const SHOWN_MAX: usize = 20;

/// `ns` after `origin` as milliseconds with microseconds: `+12.345`.
fn ms(ns: u64, origin: u64) -> String {
    let d = ns.saturating_sub(origin);
    format!("+{}.{:03}", d / 1_000_000, d % 1_000_000 / 1_000)
}

/// Operations as a table, times relative to the first invocation among them.
fn op_table(out: &mut String, ops: &[&Located<OpRecord>]) {
    let origin = ops.iter().map(|o| o.record.invoke_ns).min().unwrap_or(0);
    let _ = writeln!(
        out,
        "    {:>6} {:>6} {:>11} {:>11}  {:<40} outcome",
        "line", "client", "invoke ms", "complete ms", "operation"
    );
    for o in ops {
        let r = &o.record;
        let complete = match (r.complete_ns, &r.outcome) {
            (Some(c), Outcome::Unknown) => format!("({})", ms(c, origin)),
            (Some(c), _) => ms(c, origin),
            (None, _) => "-".into(),
        };
        let _ = writeln!(
            out,
            "    {:>6} {:>6} {:>11} {:>11}  {:<40} {}",
            o.line,
            r.client,
            ms(r.invoke_ns, origin),
            complete,
            r.op.to_string(),
            r.outcome
        );
    }
}

fn more(out: &mut String, total: usize) {
    if total > SHOWN_MAX {
        let _ = writeln!(out, "  ... and {} more", total - SHOWN_MAX);
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let w = &mut out;
        let _ = writeln!(
            w,
            "history: {} operations on {} keys ({} ignored: failed, or reads of unknown outcome), \
             {} broker registrations, {} offset observations by {} observers",
            self.ops,
            self.keys,
            self.ops_ignored,
            self.registrations,
            self.observations,
            self.observers
        );
        if let Some(run) = &self.run {
            let seed = run.seed.map_or("-".to_string(), |s| s.to_string());
            let replay = run.replay.as_deref().unwrap_or("-");
            let _ = writeln!(w, "run: seed {seed}; replay: {replay}");
        }
        let linearizable = self.keys - self.violations.len() - self.undecided.len();
        let _ = writeln!(
            w,
            "linearizability: {linearizable} keys linearizable, {} not, {} undecided ({} search steps)",
            self.violations.len(),
            self.undecided.len(),
            self.steps
        );
        let _ = writeln!(w, "lost acknowledged writes: {}", self.lost_writes.len());
        let _ = writeln!(
            w,
            "broker epoch violations: {}",
            self.epoch_violations.len()
        );
        let _ = writeln!(
            w,
            "observed offsets gone back: {}",
            self.offset_regressions.len()
        );

        for v in self.violations.iter().take(SHOWN_MAX) {
            let _ = writeln!(w, "\nNOT LINEARIZABLE: {}", v.key);
            let minimal = if v.minimal {
                "nothing more can be dropped"
            } else {
                "the shrink budget ran out: maybe not the smallest"
            };
            let _ = writeln!(
                w,
                "  the smallest failing sub-history found: {} of its {} operations ({minimal}); \
                 times relative to its first invocation, an unknown outcome's give-up time in \
                 parentheses:",
                v.shrunk.len(),
                v.ops_total
            );
            op_table(w, &v.shrunk.iter().collect::<Vec<_>>());
        }
        more(w, self.violations.len());

        for u in self.undecided.iter().take(SHOWN_MAX) {
            let what = match u.exhausted {
                Exhausted::Steps => "the step budget",
                Exhausted::CacheBytes => "the cache's byte limit",
                Exhausted::Deadline => "the time limit",
            };
            let _ = writeln!(
                w,
                "\nUNDECIDED: {} ({} operations): {what} ran out after {} steps",
                u.key, u.ops_total, u.steps
            );
        }
        more(w, self.undecided.len());

        for l in self.lost_writes.iter().take(SHOWN_MAX) {
            let _ = writeln!(
                w,
                "\nLOST WRITE: {}: the acknowledged write on line {} is not what the final read \
                 on line {} saw, and no write that may have come after it wrote that:",
                l.key, l.write.line, l.read.line
            );
            op_table(w, &[&l.write, &l.read]);
        }
        more(w, self.lost_writes.len());

        for e in self.epoch_violations.iter().take(SHOWN_MAX) {
            match e {
                EpochViolation::Reused { first, second } => {
                    let _ = writeln!(
                        w,
                        "\nBROKER EPOCH REUSED: epoch {} given to broker {} incarnation {:?} \
                         (line {}) and to broker {} incarnation {:?} (line {})",
                        first.record.broker_epoch,
                        first.record.broker_id,
                        first.record.incarnation_id,
                        first.line,
                        second.record.broker_id,
                        second.record.incarnation_id,
                        second.line
                    );
                }
                EpochViolation::WentBack { earlier, later } => {
                    let _ = writeln!(
                        w,
                        "\nBROKER EPOCH WENT BACK: broker {} incarnation {:?} got epoch {} \
                         (line {}), invoked {} ms after incarnation {:?} had been given {} \
                         (line {})",
                        later.record.broker_id,
                        later.record.incarnation_id,
                        later.record.broker_epoch,
                        later.line,
                        ms(later.record.invoke_ns, earlier.record.complete_ns),
                        earlier.record.incarnation_id,
                        earlier.record.broker_epoch,
                        earlier.line
                    );
                }
            }
        }
        more(w, self.epoch_violations.len());

        for r in self.offset_regressions.iter().take(SHOWN_MAX) {
            let _ = writeln!(
                w,
                "\nOFFSET WENT BACK: observer {:?} showed offset {} (line {}) {} ms after \
                 showing {} (line {})",
                r.after.record.observer,
                r.after.record.offset,
                r.after.line,
                ms(r.after.record.at_ns, r.before.record.at_ns),
                r.before.record.offset,
                r.before.line
            );
        }
        more(w, self.offset_regressions.len());

        let conclusion = match self.conclusion() {
            Conclusion::Pass => "PASS",
            Conclusion::Violation => "VIOLATION",
            Conclusion::Undecided => "UNDECIDED",
        };
        let _ = writeln!(w, "\nverdict: {conclusion}");
        f.write_str(&out)
    }
}
