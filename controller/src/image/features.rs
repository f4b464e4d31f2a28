//! Finalized feature levels (KIP-584): per feature a `[min_level, max_level]` range every broker
//! must support.

use imbl::OrdMap;

use crate::error::ReplayError;
use corum_types::LogOffset;

/// A finalized range of feature levels, `1 <= min_level <= max_level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FinalizedFeature {
    pub min_level: u16,
    pub max_level: u16,
}

/// Finalized features by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeaturesImage {
    by_name: OrdMap<String, FinalizedFeature>,
}

impl FeaturesImage {
    pub fn get(&self, name: &str) -> Option<FinalizedFeature> {
        self.by_name.get(name).copied()
    }

    /// Finalized features in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, FinalizedFeature)> + '_ {
        self.by_name.iter().map(|(k, v)| (k.as_str(), *v))
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub(crate) fn replay(
        &mut self,
        offset: LogOffset,
        name: &str,
        min_level: u16,
        max_level: u16,
    ) -> Result<(), ReplayError> {
        if max_level == 0 {
            self.by_name.remove(name);
            return Ok(());
        }
        if min_level == 0 || min_level > max_level {
            return Err(ReplayError::InvalidFeatureLevel {
                offset,
                name: name.to_owned(),
                min_level,
                max_level,
            });
        }
        self.by_name.insert(
            name.to_owned(),
            FinalizedFeature {
                min_level,
                max_level,
            },
        );
        Ok(())
    }
}
