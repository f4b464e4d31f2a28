//! UpdateFeatures: finalize a feature's level range, checked against what every registered broker
//! supports (KIP-584). Brokers that do not support a finalized range cannot register.

use super::{ControllerResult, View};
use crate::error::ApiError;
use crate::records::{FeatureLevelRecordV1, MetadataRecord};

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
