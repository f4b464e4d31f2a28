//! No broker epoch reused: a broker epoch is the offset of the registration record that
//! created it, so it belongs to one registration of one broker incarnation. The same
//! incarnation registering again may be answered the same epoch (corum keeps it while the
//! registration lives); any other incarnation, of that broker or another, may not.
//!
//! Also, per broker, epochs do not go back in real time: a registration that completed before
//! another of the same broker was invoked has an epoch no larger (smaller, for another
//! incarnation), since the later one's record, if any, is further down the log.

use std::collections::{BTreeMap, HashMap};

use crate::history::{Located, Registration};

/// A broker epoch rule broken; the registrations are the ones the history holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EpochViolation {
    /// Two incarnations were given one epoch.
    Reused {
        first: Located<Registration>,
        second: Located<Registration>,
    },
    /// A registration got a lower epoch than one of the same broker that completed before it
    /// was invoked (or the same epoch under another incarnation).
    WentBack {
        earlier: Located<Registration>,
        later: Located<Registration>,
    },
}

/// Every epoch rule broken by `registrations` (acknowledged ones, in any order).
pub fn epoch_violations(registrations: &[Located<Registration>]) -> Vec<EpochViolation> {
    let mut out = Vec::new();
    // The first registration of each epoch, by line.
    let mut by_epoch: HashMap<i64, &Located<Registration>> = HashMap::new();
    let mut sorted: Vec<&Located<Registration>> = registrations.iter().collect();
    sorted.sort_by_key(|r| r.line);
    for r in &sorted {
        match by_epoch.get(&r.record.broker_epoch) {
            None => {
                by_epoch.insert(r.record.broker_epoch, r);
            }
            Some(first)
                if (first.record.broker_id, &first.record.incarnation_id)
                    != (r.record.broker_id, &r.record.incarnation_id) =>
            {
                out.push(EpochViolation::Reused {
                    first: (*first).clone(),
                    second: (*r).clone(),
                });
            }
            Some(_) => {}
        }
    }
    // Per broker, sweep the registrations by invocation while taking in, by completion, every
    // one that completed before: the largest epoch among those is the bound.
    let mut per_broker: BTreeMap<i32, Vec<&Located<Registration>>> = BTreeMap::new();
    for r in &sorted {
        per_broker.entry(r.record.broker_id).or_default().push(r);
    }
    for regs in per_broker.values() {
        let mut by_complete = regs.clone();
        by_complete.sort_by_key(|r| (r.record.complete_ns, r.line));
        let mut by_invoke = regs.clone();
        by_invoke.sort_by_key(|r| (r.record.invoke_ns, r.line));
        let mut taken = 0;
        let mut max: Option<&Located<Registration>> = None;
        for later in by_invoke {
            while taken < by_complete.len()
                && by_complete[taken].record.complete_ns < later.record.invoke_ns
            {
                let c = by_complete[taken];
                if max.is_none_or(|m| c.record.broker_epoch > m.record.broker_epoch) {
                    max = Some(c);
                }
                taken += 1;
            }
            let Some(earlier) = max else { continue };
            let (e, l) = (&earlier.record, &later.record);
            let back = l.broker_epoch < e.broker_epoch
                || (l.broker_epoch == e.broker_epoch && l.incarnation_id != e.incarnation_id);
            if back {
                out.push(EpochViolation::WentBack {
                    earlier: earlier.clone(),
                    later: later.clone(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(
        line: usize,
        broker_id: i32,
        inc: &str,
        invoke_ns: u64,
        epoch: i64,
    ) -> Located<Registration> {
        Located {
            line,
            record: Registration {
                broker_id,
                incarnation_id: inc.into(),
                invoke_ns,
                complete_ns: invoke_ns + 10,
                broker_epoch: epoch,
            },
        }
    }

    /// Distinct epochs rising per broker pass; the same incarnation may keep its epoch.
    #[test]
    fn rising_epochs_pass() {
        let regs = [
            reg(1, 1, "a", 0, 5),
            reg(2, 2, "b", 0, 6),
            reg(3, 1, "a", 100, 5),
            reg(4, 1, "c", 200, 9),
        ];
        assert_eq!(epoch_violations(&regs), vec![]);
    }

    /// One epoch given to two incarnations is reported, across brokers too.
    #[test]
    fn a_reused_epoch_is_reported() {
        let regs = [reg(1, 1, "a", 0, 5), reg(2, 2, "b", 100, 5)];
        assert_eq!(
            epoch_violations(&regs),
            vec![EpochViolation::Reused {
                first: regs[0].clone(),
                second: regs[1].clone()
            }]
        );
    }

    /// A later incarnation with a lower epoch is reported; concurrent registrations are not
    /// ordered.
    #[test]
    fn an_epoch_going_back_is_reported() {
        let regs = [reg(1, 1, "a", 0, 9), reg(2, 1, "b", 100, 5)];
        assert_eq!(
            epoch_violations(&regs),
            vec![EpochViolation::WentBack {
                earlier: regs[0].clone(),
                later: regs[1].clone()
            }]
        );
        let concurrent = [reg(1, 1, "a", 0, 9), reg(2, 1, "b", 5, 5)];
        assert_eq!(epoch_violations(&concurrent), vec![]);
    }
}
