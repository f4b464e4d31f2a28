//! ApiVersions: the served table, and (v3+) the supported and finalized features in the
//! tagged fields. A too-new request gets the KIP-511 answer: v0, UNSUPPORTED_VERSION, and
//! ApiVersions' own range, so the client retries at a version both know.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

use super::text;
use crate::apis::ServedApis;
use crate::backend::{Backend, ListenerContext};

fn api_keys(served: &ServedApis) -> Vec<ApiVersion> {
    served
        .iter()
        .map(|(api, min, max)| {
            ApiVersion::default()
                .with_api_key(api as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}

/// The KIP-511 answer to an ApiVersions above the served versions.
pub fn too_new(served: &ServedApis) -> ApiVersionsResponse {
    let own: Vec<ApiVersion> = api_keys(served)
        .into_iter()
        .filter(|a| a.api_key == ApiKey::ApiVersions as i16)
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(own)
}

/// The answer at `version`: the table, and the features from v3 on (without them when the
/// node cannot say, so the connection still works).
pub async fn serve<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    version: i16,
) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default().with_api_keys(api_keys(&ctx.served));
    response.finalized_features_epoch = -1;
    if version < 3 {
        return response;
    }
    let features = super::features::describe_features(ctx, backend).await;
    match features {
        Ok(f) => {
            response.supported_features = f
                .supported
                .iter()
                .map(|s| {
                    SupportedFeatureKey::default()
                        .with_name(text(&s.name))
                        .with_min_version(s.min_level as i16)
                        .with_max_version(s.max_level as i16)
                })
                .collect();
            response.finalized_features = f
                .finalized
                .iter()
                .map(|s| {
                    FinalizedFeatureKey::default()
                        .with_name(text(&s.name))
                        .with_min_version_level(s.max_level as i16)
                        .with_max_version_level(s.max_level as i16)
                })
                .collect();
            response.finalized_features_epoch = f.finalized_epoch.map_or(-1, |o| o.0 as i64);
        }
        Err(e) => {
            tracing::debug!(error = %e, "ApiVersions without features: the node cannot list them");
        }
    }
    response
}
