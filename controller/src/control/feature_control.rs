//! Features (KIP-584): UpdateFeatures finalizes a feature's level range, checked against what
//! this controller supports ([`SUPPORTED_FEATURES`]), what every registered controller supports
//! (its KIP-919 registration) and what every registered broker supports; brokers that do not
//! support a finalized range cannot register. DescribeFeatures reads the finalized ranges with
//! their epoch and the supported ranges, what Kafka's ApiVersions response carries.
//!
//! | update (`min_level`, `max_level`)      | refused when                                                       |
//! |----------------------------------------|--------------------------------------------------------------------|
//! | remove (`max_level == 0`)              | not finalized; no `allow_downgrade`                                |
//! | finalize `[min, max]`                  | `min == 0` or `min > max`; lowers the finalized max without `allow_downgrade`; outside this controller's range; outside a registered controller's or broker's range (or one of them does not list the feature); a level whose dependency ([`FEATURE_DEPENDENCIES`]) the levels after the whole request would not meet, or a `metadata.version` below what a feature at its level after the request depends on |
//!
//! # Eligible leader replicas (KIP-966)
//!
//! `eligible.leader.replicas.version` 1 needs `metadata.version` 4.0-IV1 (23); Kafka's format
//! sets it from 4.1-IV0 (26). Finalizing it at 1 (as Kafka's `updateFeatures` does) first
//! writes what keeps every topic's min ISR in the log: the cluster default
//! `min.insync.replicas` (the controller's static value) when none is set, and the removal of
//! every broker's own `min.insync.replicas` (which the controller no longer lets anyone set).
//! Taking it back to 0 writes nothing else: partitions keep their eligible leader replicas
//! until their next change, which empties them (as in Kafka, whose controller may still elect
//! from them meanwhile, since an ISR they left is empty).
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
use crate::image::{ConfigResource, MetadataImage};
use crate::records::{
    ConfigRecordV1, ConfigResourceType, FeatureLevelRecordV1, MetadataRecord, SupportedFeatureV1,
};

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
/// - `group.version` 0..=1 and `transaction.version` 0..=2: Kafka 4.1's ranges. They switch
///   brokers' group coordinator (KIP-848) and transaction coordinator (KIP-890) behaviour; the
///   controller only finalizes them and checks that every broker and controller supports the
///   level, as Kafka's does.
/// - `metadata.version` 7..=27: the range an Apache Kafka 4.1 controller supports (3.3-IV3,
///   Kafka 4's minimum, to 4.1-IV1, its latest production level), since the Kafka listener
///   speaks Kafka 4.1's protocol. corum's records do not depend on the level; what they say
///   does where Kafka's do: below 3.7-IV2 ([`DIRECTORY_ASSIGNMENT_LEVEL`]) registrations
///   record no log directories and new replicas get the MIGRATING directory. The Kafka
///   listener renders records at the versions the finalized level calls for.
///
/// - `eligible.leader.replicas.version` 0..=1 (KIP-966): at 1 the controller keeps each
///   partition's eligible leader replicas and elects from them (see
///   `replication_control` and `partition_change`).
///
/// Not here: `kraft.version`, which Raft keeps (the bootstrap checkpoint), not a FeatureLevel
/// record; `share.version` and `streams.version`, not production features in Kafka 4.1.
pub const SUPPORTED_FEATURES: &[SupportedFeature] = &[
    SupportedFeature {
        name: ELIGIBLE_LEADER_REPLICAS_VERSION,
        min_level: 0,
        max_level: 1,
    },
    SupportedFeature {
        name: GROUP_VERSION,
        min_level: 0,
        max_level: 1,
    },
    SupportedFeature {
        name: METADATA_VERSION,
        min_level: 7,
        max_level: 27,
    },
    SupportedFeature {
        name: TRANSACTION_VERSION,
        min_level: 0,
        max_level: 2,
    },
];

pub use crate::controller::METADATA_VERSION;
/// KIP-848's feature: the consumer rebalance protocol on brokers.
pub const GROUP_VERSION: &str = "group.version";
/// KIP-890's feature: the transaction coordinator's protocol on brokers.
pub const TRANSACTION_VERSION: &str = "transaction.version";
/// KIP-966's feature: eligible leader replicas, kept and elected by the controller.
pub const ELIGIBLE_LEADER_REPLICAS_VERSION: &str = "eligible.leader.replicas.version";

/// Each `metadata.version` level this controller supports with Kafka's name for it
/// (`MetadataVersion`: release and internal version), in level order.
pub const METADATA_VERSIONS: &[(u16, &str)] = &[
    (7, "3.3-IV3"),
    (8, "3.4-IV0"),
    (9, "3.5-IV0"),
    (10, "3.5-IV1"),
    (11, "3.5-IV2"),
    (12, "3.6-IV0"),
    (13, "3.6-IV1"),
    (14, "3.6-IV2"),
    (15, "3.7-IV0"),
    (16, "3.7-IV1"),
    (17, "3.7-IV2"),
    (18, "3.7-IV3"),
    (19, "3.7-IV4"),
    (20, "3.8-IV0"),
    (21, "3.9-IV0"),
    (22, "4.0-IV0"),
    (23, "4.0-IV1"),
    (24, "4.0-IV2"),
    (25, "4.0-IV3"),
    (26, "4.1-IV0"),
    (27, "4.1-IV1"),
];

/// The release `corum format` bootstraps when none is named (Kafka's latest production
/// `metadata.version` among those supported here).
pub const DEFAULT_RELEASE: &str = "4.1";

/// Kafka's name of `metadata.version` level `level` (`4.1-IV1`), if this controller knows it.
pub fn metadata_version_name(level: u16) -> Option<&'static str> {
    METADATA_VERSIONS
        .iter()
        .find(|(l, _)| *l == level)
        .map(|(_, n)| *n)
}

/// The `metadata.version` level of a release as Kafka's `--release-version` reads it: a
/// release (`4.0`: its latest level, 4.0-IV3) or a level's full name (`3.7-IV2`).
pub fn release_metadata_version(release: &str) -> Result<u16, String> {
    let release = release.trim();
    let found = if release.contains('-') {
        METADATA_VERSIONS.iter().find(|(_, n)| *n == release)
    } else {
        METADATA_VERSIONS
            .iter()
            .rev()
            .find(|(_, n)| n.split('-').next() == Some(release))
    };
    found.map(|(l, _)| *l).ok_or_else(|| {
        format!(
            "unknown release version {release:?}: this controller supports {} to {} (a release such as 4.0, or a level such as 3.7-IV2)",
            METADATA_VERSIONS[0].1,
            METADATA_VERSIONS[METADATA_VERSIONS.len() - 1].1,
        )
    })
}

/// The level Kafka's format gives `feature` at `metadata.version` level `mv` when the operator
/// names none (Kafka's `Feature.defaultLevel`: the highest level whose bootstrap
/// `metadata.version` is at or below `mv`).
fn default_level(feature: &str, mv: u16) -> u16 {
    match feature {
        METADATA_VERSION => mv,
        // ELRV_1 from 4.1-IV0.
        ELIGIBLE_LEADER_REPLICAS_VERSION if mv >= 26 => 1,
        // GV_1 from 4.0-IV0.
        GROUP_VERSION if mv >= 22 => 1,
        // TV_1 and TV_2 from 4.0-IV2.
        TRANSACTION_VERSION if mv >= 24 => 2,
        _ => 0,
    }
}

/// Feature levels that need another feature at a level (Kafka's `FeatureVersion.dependencies`
/// of Kafka 4.1): `(feature, from level, needs feature, at least level)`. ELRV_1 needs
/// 4.0-IV1; `group.version` and `transaction.version` need nothing beyond what
/// `metadata.version`'s range already gives.
pub const FEATURE_DEPENDENCIES: &[(&str, u16, &str, u16)] =
    &[(ELIGIBLE_LEADER_REPLICAS_VERSION, 1, METADATA_VERSION, 23)];

/// Checks every dependency of [`FEATURE_DEPENDENCIES`] among the levels `level_of` gives (0 for
/// a feature it does not set), in Kafka's words.
fn check_dependencies(level_of: impl Fn(&str) -> u16) -> Result<(), String> {
    for &(feature, from, needs, at_least) in FEATURE_DEPENDENCIES {
        let level = level_of(feature);
        if level >= from && level_of(needs) < at_least {
            return Err(format!(
                "{feature} could not be set to {level} because it depends on {needs} level {at_least}"
            ));
        }
    }
    Ok(())
}

/// One feature level set when the cluster is formatted (`bootstrap.checkpoint`), finalized by
/// the first active controller. Level 0 means the feature is left unfinalized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapFeature {
    pub name: String,
    pub level: u16,
}

/// The features a cluster starts with, Kafka's format semantics: `metadata.version` from
/// `release` ([`release_metadata_version`]), every other supported feature at its default for
/// that level unless `overrides` (`--feature NAME=LEVEL`) names it. `metadata.version` cannot
/// be overridden (Kafka's rule: use the release version). Every feature this controller
/// supports is listed, in name order, unfinalized ones at level 0.
pub fn bootstrap_features(
    release: &str,
    overrides: &[(String, u16)],
) -> Result<Vec<BootstrapFeature>, String> {
    let mv = release_metadata_version(release)?;
    for (i, (name, _)) in overrides.iter().enumerate() {
        if name == METADATA_VERSION {
            return Err(
                "metadata.version is set with --release-version, not as a feature".to_owned(),
            );
        }
        if overrides[..i].iter().any(|(n, _)| n == name) {
            return Err(format!("feature {name} is named twice"));
        }
        // The list is built from the supported features: a name outside them would be lost.
        // Levels are checked with the whole list below.
        if locally_supported(name).is_none() {
            return Err(format!(
                "feature {name} is not supported by this controller (it supports {})",
                SUPPORTED_FEATURES
                    .iter()
                    .map(|f| f.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let features: Vec<BootstrapFeature> = SUPPORTED_FEATURES
        .iter()
        .map(|f| BootstrapFeature {
            name: f.name.to_owned(),
            level: overrides
                .iter()
                .find(|(n, _)| n == f.name)
                .map_or_else(|| default_level(f.name, mv), |(_, l)| *l),
        })
        .collect();
    check_bootstrap_features(&features)?;
    Ok(features)
}

/// Checks a bootstrap feature list: names in order and distinct, `metadata.version` listed,
/// every level 0 or within this controller's range, every dependency met (Kafka's format
/// refuses the same).
pub fn check_bootstrap_features(features: &[BootstrapFeature]) -> Result<(), String> {
    if !features.windows(2).all(|w| w[0].name < w[1].name) {
        return Err("bootstrap features must be in name order, each named once".to_owned());
    }
    if !features
        .iter()
        .any(|f| f.name == METADATA_VERSION && f.level > 0)
    {
        return Err("the bootstrap features must set metadata.version".to_owned());
    }
    for f in features {
        match locally_supported(&f.name) {
            Some((lo, hi)) if f.level == 0 || (lo..=hi).contains(&f.level) => {}
            Some((lo, hi)) => {
                return Err(format!(
                    "bootstrap feature {}={}: this controller supports levels {lo} to {hi}",
                    f.name, f.level
                ))
            }
            None => {
                return Err(format!(
                    "bootstrap feature {} is not supported by this controller",
                    f.name
                ))
            }
        }
    }
    check_dependencies(|name| {
        features
            .iter()
            .find(|f| f.name == name)
            .map_or(0, |f| f.level)
    })
}

/// The bootstrap features of a cluster formatted without naming a release.
pub fn default_bootstrap_features() -> Vec<BootstrapFeature> {
    bootstrap_features(DEFAULT_RELEASE, &[]).expect("the default release is supported")
}

/// The `metadata.version` level (3.7-IV2) from which Kafka tracks each replica's log directory
/// (KIP-858): registrations carry log directories and AssignReplicasToDirs is served.
pub const DIRECTORY_ASSIGNMENT_LEVEL: u16 = 17;

/// The finalized `metadata.version` level of `image`; before the first active controller
/// finalized it (it does so as it activates, before serving anything), the highest this
/// controller supports.
pub fn metadata_version(image: &MetadataImage) -> u16 {
    image.features.get(METADATA_VERSION).map_or_else(
        || locally_supported(METADATA_VERSION).map_or(0, |(_, max)| max),
        |f| f.max_level,
    )
}

/// Whether replicas' log directories are tracked at `image`'s `metadata.version` (Kafka's
/// `isDirectoryAssignmentSupported`).
pub fn directory_assignment_supported(image: &MetadataImage) -> bool {
    metadata_version(image) >= DIRECTORY_ASSIGNMENT_LEVEL
}

/// Whether the controller keeps eligible leader replicas (KIP-966): the feature is finalized at
/// level 1 (Kafka's `isElrFeatureEnabled`).
pub fn elr_enabled(image: &MetadataImage) -> bool {
    image
        .features
        .get(ELIGIBLE_LEADER_REPLICAS_VERSION)
        .is_some_and(|f| f.max_level >= 1)
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
    // The levels the request would leave, for the dependencies (Kafka's
    // `proposedUpdatedVersions`: the finalized ones with every update over them).
    let proposed = |name: &str| -> u16 {
        match req.updates.iter().rev().find(|u| u.name == name) {
            Some(u) => u.max_level,
            None if name == METADATA_VERSION => metadata_version(view.image),
            None => view.image.features.get(name).map_or(0, |f| f.max_level),
        }
    };
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(req.updates.len());
    let mut elr_enabling = false;
    for (i, u) in req.updates.iter().enumerate() {
        let result = if req.updates[..i].iter().any(|o| o.name == u.name) {
            Err(ApiError::InvalidRequest {
                reason: "feature named more than once in the request".into(),
            })
        } else {
            check_update(view, u, &proposed).map(|()| {
                elr_enabling |= u.name == ELIGIBLE_LEADER_REPLICAS_VERSION && u.max_level > 0;
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
    } else if elr_enabling {
        let mut safety = elr_safety_records(view);
        safety.append(&mut records);
        records = safety;
    }
    ControllerResult::new(records, UpdateFeaturesResponse { results })
}

/// What Kafka's controller writes before it enables eligible leader replicas
/// (`maybeGenerateElrSafetyRecords`): the cluster default `min.insync.replicas` from the static
/// config when none is set, and the removal of every broker's own `min.insync.replicas`, so
/// that every topic's min ISR is in the log, the same on every controller.
fn elr_safety_records(view: View<'_>) -> Vec<MetadataRecord> {
    let key = "min.insync.replicas";
    let mut out = Vec::new();
    let cluster_default = ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: String::new(),
    };
    if view
        .image
        .configs
        .get(&cluster_default)
        .is_none_or(|c| !c.contains_key(key))
    {
        out.push(MetadataRecord::Config(ConfigRecordV1 {
            resource_type: ConfigResourceType::Broker,
            resource_name: String::new(),
            key: key.to_owned(),
            value: Some(view.config.min_insync_replicas.to_string()),
        }));
    }
    for (resource_type, name, entries) in view.image.configs.iter() {
        if resource_type == ConfigResourceType::Broker
            && !name.is_empty()
            && entries.contains_key(key)
        {
            out.push(MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Broker,
                resource_name: name.to_owned(),
                key: key.to_owned(),
                value: None,
            }));
        }
    }
    out
}

fn check_update(
    view: View<'_>,
    u: &FeatureUpdate,
    proposed: &dyn Fn(&str) -> u16,
) -> Result<(), ApiError> {
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
    // Kafka's `Feature.validateVersion`: the levels the request leaves meet this feature's
    // dependencies, and those of the features that depend on it.
    for &(feature, from, needs, at_least) in FEATURE_DEPENDENCIES {
        if (feature == u.name || needs == u.name)
            && proposed(feature) >= from
            && proposed(needs) < at_least
        {
            return Err(out_of_range(format!(
                "{feature} level {} depends on {needs} level {at_least}",
                proposed(feature)
            )));
        }
    }
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

    /// Releases map to their latest level, full names to themselves; anything else is refused
    /// with the supported range named.
    #[test]
    fn release_versions_are_kafkas() {
        assert_eq!(release_metadata_version("4.1"), Ok(27));
        assert_eq!(release_metadata_version("4.0"), Ok(25));
        assert_eq!(release_metadata_version("3.9"), Ok(21));
        assert_eq!(release_metadata_version("3.7"), Ok(19));
        assert_eq!(release_metadata_version("3.7-IV2"), Ok(17));
        assert_eq!(release_metadata_version("3.3"), Ok(7));
        for bad in ["4.2", "3.2", "3.3-IV2", "", "4", "4.1-IV9"] {
            let e = release_metadata_version(bad).unwrap_err();
            assert!(e.contains("3.3-IV3 to 4.1-IV1"), "{bad}: {e}");
        }
        assert_eq!(metadata_version_name(27), Some("4.1-IV1"));
        assert_eq!(metadata_version_name(6), None);
        assert!(METADATA_VERSIONS.windows(2).all(|w| w[0].0 + 1 == w[1].0));
        let (lo, hi) = locally_supported(METADATA_VERSION).unwrap();
        assert_eq!(
            (METADATA_VERSIONS[0].0, METADATA_VERSIONS.last().unwrap().0),
            (lo, hi)
        );
    }

    fn levels(f: &[BootstrapFeature]) -> Vec<(&str, u16)> {
        f.iter().map(|f| (f.name.as_str(), f.level)).collect()
    }

    /// The other features follow the release as Kafka's format sets them (4.1: eligible
    /// leader replicas 1, group 1, transaction 2; 4.0: group 1, transaction 2; 3.9: none),
    /// `--feature` overrides them, and what this controller cannot finalize, or a level whose
    /// dependency the release does not meet, is refused.
    #[test]
    fn bootstrap_features_follow_the_release() {
        let expect = |mv, elr, gv, tv| {
            vec![
                (ELIGIBLE_LEADER_REPLICAS_VERSION, elr),
                (GROUP_VERSION, gv),
                (METADATA_VERSION, mv),
                (TRANSACTION_VERSION, tv),
            ]
        };
        assert_eq!(
            levels(&bootstrap_features("4.1", &[]).unwrap()),
            expect(27, 1, 1, 2)
        );
        assert_eq!(levels(&default_bootstrap_features()), expect(27, 1, 1, 2));
        // ELRV_1's bootstrap metadata.version is 4.1-IV0.
        assert_eq!(
            levels(&bootstrap_features("4.1-IV0", &[]).unwrap()),
            expect(26, 1, 1, 2)
        );
        assert_eq!(
            levels(&bootstrap_features("4.0", &[]).unwrap()),
            expect(25, 0, 1, 2)
        );
        assert_eq!(
            levels(&bootstrap_features("4.0-IV1", &[]).unwrap()),
            expect(23, 0, 1, 0)
        );
        assert_eq!(
            levels(&bootstrap_features("3.9", &[]).unwrap()),
            expect(21, 0, 0, 0)
        );
        let o = |n: &str, l| vec![(n.to_owned(), l)];
        assert_eq!(
            levels(&bootstrap_features("4.1", &o(GROUP_VERSION, 0)).unwrap()),
            expect(27, 1, 0, 2)
        );
        assert_eq!(
            levels(&bootstrap_features("3.9", &o(TRANSACTION_VERSION, 1)).unwrap()),
            expect(21, 0, 0, 1)
        );
        // Eligible leader replicas: off at 4.1, on at 4.0 (its dependency, 4.0-IV1, is met).
        assert_eq!(
            levels(&bootstrap_features("4.1", &o(ELIGIBLE_LEADER_REPLICAS_VERSION, 0)).unwrap()),
            expect(27, 0, 1, 2)
        );
        assert_eq!(
            levels(
                &bootstrap_features("4.0-IV1", &o(ELIGIBLE_LEADER_REPLICAS_VERSION, 1)).unwrap()
            ),
            expect(23, 1, 1, 0)
        );
        for (release, overrides, needle) in [
            ("4.1", o(METADATA_VERSION, 20), "--release-version"),
            ("4.1", o(TRANSACTION_VERSION, 3), "levels 0 to 2"),
            ("4.1", o(ELIGIBLE_LEADER_REPLICAS_VERSION, 2), "levels 0 to 1"),
            ("4.1", o("share.version", 1), "not supported"),
            (
                "4.0-IV0",
                o(ELIGIBLE_LEADER_REPLICAS_VERSION, 1),
                "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23",
            ),
            (
                "4.1",
                [o(GROUP_VERSION, 1), o(GROUP_VERSION, 0)].concat(),
                "named twice",
            ),
        ] {
            let e = bootstrap_features(release, &overrides).unwrap_err();
            assert!(e.contains(needle), "{release} {overrides:?}: {e}");
        }
        let mut bad = default_bootstrap_features();
        bad.retain(|f| f.name != METADATA_VERSION);
        assert!(check_bootstrap_features(&bad).is_err());
        let mut bad = default_bootstrap_features();
        bad.swap(0, 1);
        assert!(check_bootstrap_features(&bad).is_err());
        // A checkpoint written by hand is held to the same dependency.
        let mut bad = bootstrap_features("4.0-IV0", &[]).unwrap();
        bad[0].level = 1;
        assert!(check_bootstrap_features(&bad)
            .unwrap_err()
            .contains("depends on metadata.version level 23"));
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
