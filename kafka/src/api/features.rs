//! UpdateFeatures: `kafka-features upgrade|downgrade|disable`.
//!
//! | Kafka | corum |
//! |---|---|
//! | `max_version_level` | `max_level` (0 removes the feature) |
//! | v0 `allow_downgrade` | `allow_downgrade` |
//! | v1+ `upgrade_type` 1 (upgrade) | `allow_downgrade = false` |
//! | v1+ `upgrade_type` 2 (safe downgrade) or 3 (unsafe downgrade) | `allow_downgrade = true` |
//!
//! A finalized feature has one level in Kafka (KIP-584's minimum level is gone since Kafka
//! 3.x); corum's records keep a range, finalized here as `[level, level]`.

use corum_controller::control::feature_control::{
    DescribeFeaturesResponse, FeatureUpdate, UpdateFeaturesRequest as CorumUpdateFeatures,
};
use corum_protocol::{LocalRead, RequestBody, ResponseBody, RpcError};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::text;
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::service::{call, read};

/// The finalized and supported features, as the node answers a local read (ApiVersions'
/// feature fields; the `metadata.version` the metadata log is rendered at).
pub async fn describe_features<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
) -> Result<DescribeFeaturesResponse, RpcError> {
    call(
        backend,
        read(LocalRead::DescribeFeatures),
        ctx.default_timeout_ms,
        |r| match r {
            ResponseBody::DescribeFeatures(f) => Some(f),
            _ => None,
        },
    )
    .await
}

const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

/// UpdateFeatures at any served version.
pub async fn update_features<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: UpdateFeaturesRequest,
    version: i16,
) -> UpdateFeaturesResponse {
    let mut early: Vec<Option<KafkaError>> = Vec::new();
    let mut updates = Vec::new();
    for u in &request.feature_updates {
        let allow_downgrade = if version == 0 {
            Ok(u.allow_downgrade)
        } else {
            match u.upgrade_type {
                UPGRADE => Ok(false),
                SAFE_DOWNGRADE | UNSAFE_DOWNGRADE => Ok(true),
                other => Err(KafkaError::new(
                    ResponseError::InvalidRequest,
                    format!("unknown upgrade type {other}"),
                )),
            }
        };
        let level = u16::try_from(u.max_version_level).map_err(|_| {
            KafkaError::new(
                ResponseError::InvalidUpdateVersion,
                format!("level {} is negative", u.max_version_level),
            )
        });
        match allow_downgrade.and_then(|a| level.map(|l| (a, l))) {
            Ok((allow_downgrade, level)) => {
                early.push(None);
                updates.push(FeatureUpdate {
                    name: u.feature.as_str().to_owned(),
                    min_level: level,
                    max_level: level,
                    allow_downgrade,
                });
            }
            Err(e) => early.push(Some(e)),
        }
    }
    let answers = if updates.is_empty() {
        Ok(Vec::new())
    } else {
        call(
            backend,
            RequestBody::UpdateFeatures(CorumUpdateFeatures {
                updates,
                validate_only: request.validate_only,
            }),
            ctx.timeout_ms(request.timeout_ms),
            |r| match r {
                ResponseBody::UpdateFeatures(r) => Some(r.results),
                _ => None,
            },
        )
        .await
    };
    let mut response = UpdateFeaturesResponse::default();
    let mut answers = match answers {
        Ok(a) => a.into_iter(),
        Err(e) => {
            let e = KafkaError::rpc(&e);
            response.error_code = e.code;
            response.error_message = e.message.as_deref().map(text);
            Vec::new().into_iter()
        }
    };
    let whole_failed = response.error_code != 0;
    let mut first_error: Option<KafkaError> = None;
    for (u, early) in request.feature_updates.iter().zip(early) {
        let error = match early {
            Some(e) => Some(e),
            None if whole_failed => None,
            None => match answers.next() {
                Some((_, Ok(()))) => None,
                Some((_, Err(e))) => Some(KafkaError::api(&e)),
                None => Some(KafkaError::new(
                    ResponseError::UnknownServerError,
                    "the controller did not answer for this feature",
                )),
            },
        };
        let mut r = UpdatableFeatureResult::default().with_feature(u.feature.clone());
        match &error {
            Some(e) => {
                r.error_code = e.code;
                r.error_message = e.message.as_deref().map(text);
            }
            None if whole_failed => {
                r.error_code = response.error_code;
                r.error_message = response.error_message.clone();
            }
            None => {}
        }
        if first_error.is_none() {
            first_error = error;
        }
        response.results.push(r);
    }
    // Version 2 answers with the top-level error only (KIP-1022): carry the first failure up.
    if version >= 2 && !whole_failed {
        if let Some(e) = first_error {
            response.error_code = e.code;
            response.error_message = e.message.as_deref().map(text);
        }
    }
    response
}
