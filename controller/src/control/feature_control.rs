//! Features (KIP-584): UpdateFeatures finalizes a feature's level range, checked against what
//! this controller supports ([`SUPPORTED_FEATURES`]), what every registered controller supports
//! (its KIP-919 registration) and what every registered broker supports; brokers that do not
//! support a finalized range cannot register. DescribeFeatures reads the finalized ranges with
//! their epoch and the supported ranges, what Kafka's ApiVersions response carries.
//!
//! | update (`min_level`, `max_level`)      | refused when                                                       |
//! |----------------------------------------|--------------------------------------------------------------------|
//! | remove (`max_level == 0`)              | not finalized; no `allow_downgrade`                                |
//! | finalize `[min, max]`                  | `min == 0` or `min > max`; lowers the finalized max without `allow_downgrade`; outside this controller's range; outside a registered controller's or broker's range (or one of them does not list the feature) |
//!
//! # The features epoch
//!
//! Kafka's ApiVersions answer carries a `FinalizedFeaturesEpoch` that only grows, so a client
//! talking to several nodes keeps the newest view. Kafka's brokers send the offset of the last
//! record in their metadata image (`KRaftMetadataCache.features` uses
//! `image.highestOffsetAndEpoch().offset()`), which moves with every record, not only with
//! feature changes. corum does the same: [`DescribeFeaturesResponse::finalized_epoch`] is the
//! offset of the last record of the image that answered (`end_offset - 1`), `None` (Kafka's
//! -1) for an image that holds no record.

use corum_types::LogOffset;

use super::{ControllerResult, View};
use crate::error::ApiError;
use crate::image::MetadataImage;
use crate::records::{FeatureLevelRecordV1, MetadataRecord, SupportedFeatureV1};

/// One feature this controller build supports, with the level range it supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SupportedFeature {
    pub name: &'static str,
    pub min_level: u16,
    pub max_level: u16,
}

/// The features this controller supports, in name order: what it advertises (ApiVersions'
/// `SupportedFeatures`, a controller's own KIP-919 registration) and the only ranges
/// UpdateFeatures may finalize.
///
/// - `metadata.version` 7..=27: the range an Apache Kafka 4.1 controller supports (3.3-IV3,
///   Kafka 4's minimum, to 4.1-IV1, its latest production level), since the Kafka listener
///   speaks Kafka 4.1's protocol. corum's records do not depend on the level; what they say
///   does where Kafka's do: below 3.7-IV2 ([`DIRECTORY_ASSIGNMENT_LEVEL`]) registrations
///   record no log directories and new replicas get the MIGRATING directory.
///
/// Not here: `kraft.version`, which Raft keeps (the bootstrap checkpoint), not a FeatureLevel
/// record; Kafka's group, transaction, share and streams versions, whose features corum does
/// not have.
pub const SUPPORTED_FEATURES: &[SupportedFeature] = &[SupportedFeature {
    name: "metadata.version",
    min_level: 7,
    max_level: 27,
}];

/// The `metadata.version` level (3.7-IV2) from which Kafka tracks each replica's log directory
/// (KIP-858): registrations carry log directories and AssignReplicasToDirs is served.
pub const DIRECTORY_ASSIGNMENT_LEVEL: u16 = 17;

/// The finalized `metadata.version` level of `image`; before the first active controller
/// finalized it, the highest this controller supports (what it will finalize).
pub fn metadata_version(image: &MetadataImage) -> u16 {
    image
        .features
        .get(crate::controller::METADATA_VERSION)
        .map_or_else(
            || locally_supported(crate::controller::METADATA_VERSION).map_or(0, |(_, max)| max),
            |f| f.max_level,
        )
}

/// Whether replicas' log directories are tracked at `image`'s `metadata.version` (Kafka's
/// `isDirectoryAssignmentSupported`).
pub fn directory_assignment_supported(image: &MetadataImage) -> bool {
    metadata_version(image) >= DIRECTORY_ASSIGNMENT_LEVEL
}

/// [`SUPPORTED_FEATURES`] as the records and requests list them (a controller's registration,
/// a DescribeFeatures answer).
pub fn supported_features() -> Vec<SupportedFeatureV1> {
    SUPPORTED_FEATURES
        .iter()
        .map(|f| SupportedFeatureV1 {
            name: f.name.to_owned(),
            min_level: f.min_level,
            max_level: f.max_level,
        })
        .collect()
}

/// The range this controller supports for `name`, if it supports the feature.
fn locally_supported(name: &str) -> Option<(u16, u16)> {
    SUPPORTED_FEATURES
        .iter()
        .find(|f| f.name == name)
        .map(|f| (f.min_level, f.max_level))
}

/// Set feature `name` to `[min_level, max_level]`; `max_level == 0` removes it (a downgrade).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct FeatureUpdate {
    pub name: String,
    pub min_level: u16,
    pub max_level: u16,
    /// Lowering the max level (or removing the feature) needs this.
    pub allow_downgrade: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct UpdateFeaturesRequest {
    pub updates: Vec<FeatureUpdate>,
    pub validate_only: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct UpdateFeaturesResponse {
    pub results: Vec<(String, Result<(), ApiError>)>,
}

pub(crate) fn update_features(
    view: View<'_>,
    req: &UpdateFeaturesRequest,
) -> ControllerResult<UpdateFeaturesResponse> {
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(req.updates.len());
    for (i, u) in req.updates.iter().enumerate() {
        let result = if req.updates[..i].iter().any(|o| o.name == u.name) {
            Err(ApiError::InvalidRequest {
                reason: "feature named more than once in the request".into(),
            })
        } else {
            check_update(view, u).map(|()| {
                records.push(MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                    name: u.name.clone(),
                    min_level: if u.max_level == 0 { 0 } else { u.min_level },
                    max_level: u.max_level,
                }))
            })
        };
        results.push((u.name.clone(), result));
    }
    if req.validate_only {
        records.clear();
    }
    ControllerResult::new(records, UpdateFeaturesResponse { results })
}

fn check_update(view: View<'_>, u: &FeatureUpdate) -> Result<(), ApiError> {
    let out_of_range = |reason: String| ApiError::FeatureLevelOutOfRange {
        feature: u.name.clone(),
        min_level: u.min_level,
        max_level: u.max_level,
        reason,
    };
    if u.name.is_empty() {
        return Err(out_of_range("empty feature name".into()));
    }
    let current = view.image.features.get(&u.name);
    if u.max_level == 0 {
        if current.is_none() {
            return Err(out_of_range("the feature is not finalized".into()));
        }
        if !u.allow_downgrade {
            return Err(out_of_range(
                "removing a feature is a downgrade and needs allow_downgrade".into(),
            ));
        }
        return Ok(());
    }
    if u.min_level == 0 || u.min_level > u.max_level {
        return Err(out_of_range("need 1 <= min_level <= max_level".into()));
    }
    if current.is_some_and(|c| u.max_level < c.max_level) && !u.allow_downgrade {
        return Err(out_of_range(
            "lowering max_level is a downgrade and needs allow_downgrade".into(),
        ));
    }
    let within = |(lo, hi): (u16, u16)| lo <= u.min_level && u.max_level <= hi;
    match locally_supported(&u.name) {
        Some(range) if within(range) => {}
        Some((lo, hi)) => {
            return Err(out_of_range(format!(
                "the active controller supports only [{lo}, {hi}]"
            )))
        }
        None => {
            return Err(out_of_range(
                "the active controller does not support it".into(),
            ))
        }
    }
    for c in view.image.controllers.iter() {
        match c.supported(&u.name) {
            Some(range) if within(range) => {}
            Some((lo, hi)) => {
                return Err(out_of_range(format!(
                    "controller {} supports only [{lo}, {hi}]",
                    c.controller_id
                )))
            }
            None => {
                return Err(out_of_range(format!(
                    "controller {} does not support it",
                    c.controller_id
                )))
            }
        }
    }
    for b in view.image.brokers.iter() {
        match b.supported(&u.name) {
            Some((lo, hi)) if lo <= u.min_level && u.max_level <= hi => {}
            Some((lo, hi)) => {
                return Err(out_of_range(format!(
                    "broker {} supports only [{lo}, {hi}]",
                    b.broker_id
                )))
            }
            None => {
                return Err(out_of_range(format!(
                    "broker {} does not support it",
                    b.broker_id
                )))
            }
        }
    }
    Ok(())
}

/// One finalized feature as DescribeFeatures shows it. Kafka's single finalized level is
/// `max_level` (Kafka sends it as both its min and max version level).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct FinalizedFeatureLevel {
    pub name: String,
    pub min_level: u16,
    pub max_level: u16,
}

/// The finalized features of an image and the supported ranges of the node that answered.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeFeaturesResponse {
    /// In name order.
    pub finalized: Vec<FinalizedFeatureLevel>,
    /// The offset of the last record of the image that answered; `None` (Kafka's -1) when it
    /// holds none. See the module doc.
    pub finalized_epoch: Option<LogOffset>,
    /// This node's [`SUPPORTED_FEATURES`], in name order.
    pub supported: Vec<SupportedFeatureV1>,
}

pub(crate) fn describe_features(image: &MetadataImage) -> DescribeFeaturesResponse {
    DescribeFeaturesResponse {
        finalized: image
            .features
            .iter()
            .map(|(name, f)| FinalizedFeatureLevel {
                name: name.to_owned(),
                min_level: f.min_level,
                max_level: f.max_level,
            })
            .collect(),
        finalized_epoch: image.end_offset.0.checked_sub(1).map(LogOffset),
        supported: supported_features(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The supported table is in name order, each range valid, with no name twice (a
    /// registration built from it passes the registration checks).
    #[test]
    fn the_supported_table_is_well_formed() {
        assert!(SUPPORTED_FEATURES.windows(2).all(|w| w[0].name < w[1].name));
        assert!(SUPPORTED_FEATURES
            .iter()
            .all(|f| !f.name.is_empty() && f.min_level <= f.max_level));
        assert_eq!(supported_features().len(), SUPPORTED_FEATURES.len());
        assert_eq!(locally_supported("metadata.version"), Some((7, 27)));
        assert_eq!(locally_supported("kraft.version"), None);
    }

    /// An empty image has no epoch; otherwise the epoch is the offset of its last record.
    #[test]
    fn the_epoch_is_the_last_offset_of_the_image() {
        let mut image = MetadataImage::default();
        assert_eq!(describe_features(&image).finalized_epoch, None);
        image.end_offset = LogOffset(1);
        assert_eq!(
            describe_features(&image).finalized_epoch,
            Some(LogOffset(0))
        );
        image.end_offset = LogOffset(42);
        let d = describe_features(&image);
        assert_eq!(d.finalized_epoch, Some(LogOffset(41)));
        assert!(d.finalized.is_empty());
        assert_eq!(d.supported, supported_features());
    }
}
