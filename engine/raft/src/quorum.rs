//! Quorum arithmetic: the highest offset durable on a majority.

use corum_types::LogOffset;

/// The largest offset `x` such that a majority of `acked` is `>= x`. Sorts `acked` in place.
pub fn majority_offset(acked: &mut [LogOffset]) -> LogOffset {
    assert!(!acked.is_empty(), "a voter set is never empty");
    acked.sort_unstable_by(|a, b| b.cmp(a));
    acked[acked.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The sort-based answer equals the naive definition (largest x a majority reached).
        #[test]
        fn matches_naive(v in proptest::collection::vec(0u64..50, 1..8)) {
            let mut acked: Vec<LogOffset> = v.iter().copied().map(LogOffset).collect();
            let majority = v.len() / 2 + 1;
            let naive = (0..=50u64).filter(|x| v.iter().filter(|a| *a >= x).count() >= majority).max().unwrap();
            prop_assert_eq!(majority_offset(&mut acked), LogOffset(naive));
        }
    }
}
