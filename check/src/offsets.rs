//! Observed metadata offsets never go backwards: what one observer (one incarnation of a
//! broker's metadata follower) had applied only grows with time.

use std::collections::BTreeMap;

use crate::history::{Located, OffsetObservation};

/// An observation below one made earlier by the same observer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetRegression {
    /// The highest offset the observer had shown before.
    pub before: Located<OffsetObservation>,
    pub after: Located<OffsetObservation>,
}

/// Every observation below the observer's highest earlier one (by time; at one instant, by
/// line).
pub fn offset_regressions(observations: &[Located<OffsetObservation>]) -> Vec<OffsetRegression> {
    let mut per_observer: BTreeMap<&str, Vec<&Located<OffsetObservation>>> = BTreeMap::new();
    for o in observations {
        per_observer
            .entry(o.record.observer.as_str())
            .or_default()
            .push(o);
    }
    let mut out = Vec::new();
    for mut seen in per_observer.into_values() {
        seen.sort_by_key(|o| (o.record.at_ns, o.line));
        let mut highest: Option<&Located<OffsetObservation>> = None;
        for o in seen {
            match highest {
                Some(h) if o.record.offset < h.record.offset => out.push(OffsetRegression {
                    before: h.clone(),
                    after: o.clone(),
                }),
                Some(h) if o.record.offset == h.record.offset => {}
                _ => highest = Some(o),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(line: usize, observer: &str, at_ns: u64, offset: u64) -> Located<OffsetObservation> {
        Located {
            line,
            record: OffsetObservation {
                observer: observer.into(),
                at_ns,
                offset,
            },
        }
    }

    /// Offsets that stay or grow pass, per observer, whatever the file order; one that drops
    /// is reported against the highest before it.
    #[test]
    fn a_drop_is_reported_per_observer() {
        let fine = [
            obs(1, "b1", 20, 7),
            obs(2, "b1", 10, 5),
            obs(3, "b2", 15, 1),
            obs(4, "b1", 30, 7),
        ];
        assert_eq!(offset_regressions(&fine), vec![]);
        let drop = [
            obs(1, "b1", 10, 9),
            obs(2, "b1", 20, 12),
            obs(3, "b1", 30, 10),
        ];
        assert_eq!(
            offset_regressions(&drop),
            vec![OffsetRegression {
                before: drop[1].clone(),
                after: drop[2].clone()
            }]
        );
    }
}
