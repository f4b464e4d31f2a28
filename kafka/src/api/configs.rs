//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.
//!
//! | Kafka resource type | corum resource |
//! |---|---|
//! | 2 TOPIC | a topic by name |
//! | 4 BROKER | a broker by id, or `""` for the cluster-wide default |
//! | 8 BROKER_LOGGER | refused with INVALID_REQUEST: corum has no per-broker loggers to set |
//!
//! AlterConfigs (the legacy whole-resource replace) becomes one incremental change: SET for
//! every key it names and DELETE for every key the resource has set dynamically that it does
//! not name.

use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsResource as CorumResource, AlterableConfig as CorumAlterable,
    ConfigSource, DescribeConfigsRequest as CorumDescribe, DescribedConfig,
    IncrementalAlterConfigsRequest as CorumIncremental,
};
use corum_controller::image::configs::ConfigResource;
use corum_controller::records::ConfigResourceType;
use corum_controller::ApiError;
use corum_protocol::{LocalRead, RequestBody, ResponseBody, RpcError};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use super::text;
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::service::{call, local};

/// Kafka's resource type codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

/// Kafka's config source codes (DescribeConfigs v1+).
pub const SOURCE_DYNAMIC_TOPIC: i8 = 1;
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
pub const SOURCE_DEFAULT: i8 = 5;

/// corum's resource for a Kafka one, or why there is none.
fn resource(resource_type: i8, name: &str) -> Result<ConfigResource, KafkaError> {
    match resource_type {
        RESOURCE_TOPIC => Ok(ConfigResource {
            resource_type: ConfigResourceType::Topic,
            name: name.to_owned(),
        }),
        RESOURCE_BROKER => Ok(ConfigResource {
            resource_type: ConfigResourceType::Broker,
            name: name.to_owned(),
        }),
        RESOURCE_BROKER_LOGGER => Err(KafkaError::new(
            ResponseError::InvalidRequest,
            "corum has no broker loggers: a controller's log levels are set with RUST_LOG",
        )),
        other => Err(KafkaError::new(
            ResponseError::InvalidRequest,
            format!("unknown resource type {other}"),
        )),
    }
}

fn source_code(source: &ConfigSource) -> i8 {
    match source {
        ConfigSource::DynamicTopic => SOURCE_DYNAMIC_TOPIC,
        ConfigSource::DynamicBroker => SOURCE_DYNAMIC_BROKER,
        ConfigSource::DynamicDefaultBroker => SOURCE_DYNAMIC_DEFAULT_BROKER,
        ConfigSource::Default => SOURCE_DEFAULT,
    }
}

fn is_dynamic(source: &ConfigSource) -> bool {
    !matches!(source, ConfigSource::Default)
}

/// Describes `resources` in one corum request; per resource its configs or error.
async fn describe<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    resources: Vec<ConfigResource>,
) -> Result<Vec<Result<Vec<DescribedConfig>, ApiError>>, RpcError> {
    let r = call(
        backend,
        local(LocalRead::DescribeConfigs(CorumDescribe { resources })),
        ctx.default_timeout_ms,
        |r| match r {
            ResponseBody::DescribeConfigs(r) => Some(r.resources),
            _ => None,
        },
    )
    .await?;
    Ok(r.into_iter().map(|(_, r)| r).collect())
}

/// DescribeConfigs at any served version.
pub async fn describe_configs<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let checked: Vec<Result<ConfigResource, KafkaError>> = request
        .resources
        .iter()
        .map(|r| resource(r.resource_type, r.resource_name.as_str()))
        .collect();
    let wanted: Vec<ConfigResource> = checked.iter().filter_map(|r| r.clone().ok()).collect();
    let answers = if wanted.is_empty() {
        Ok(Vec::new())
    } else {
        describe(ctx, backend, wanted).await
    };
    let mut answers = answers.map(Vec::into_iter).map_err(|e| KafkaError::rpc(&e));
    let results = request
        .resources
        .iter()
        .zip(checked)
        .map(|(asked, checked)| {
            let mut result = DescribeConfigsResult::default()
                .with_resource_type(asked.resource_type)
                .with_resource_name(asked.resource_name.clone());
            let outcome = checked.and_then(|_| match &mut answers {
                Ok(it) => it
                    .next()
                    .unwrap_or_else(|| {
                        Err(ApiError::InvalidRequest {
                            reason: "the controller did not answer for this resource".into(),
                        })
                    })
                    .map_err(|e| KafkaError::api(&e)),
                Err(e) => Err(e.clone()),
            });
            match outcome {
                Ok(configs) => {
                    result.configs = configs
                        .iter()
                        .filter(|c| {
                            asked
                                .configuration_keys
                                .as_ref()
                                .is_none_or(|keys| keys.iter().any(|k| k.as_str() == c.key))
                        })
                        .map(|c| {
                            let mut d = DescribeConfigsResourceResult::default()
                                .with_name(text(&c.key))
                                .with_value(Some(text(&c.value)))
                                .with_config_source(source_code(&c.source))
                                .with_read_only(false)
                                .with_is_sensitive(false);
                            if version == 0 {
                                d.config_source = -1;
                            }
                            if request.include_synonyms {
                                d.synonyms = vec![DescribeConfigsSynonym::default()
                                    .with_name(text(&c.key))
                                    .with_value(Some(text(&c.value)))
                                    .with_source(source_code(&c.source))];
                            }
                            if request.include_documentation {
                                d.documentation = None;
                            }
                            d
                        })
                        .collect();
                }
                Err(e) => {
                    result.error_code = e.code;
                    result.error_message = e.message.as_deref().map(text);
                }
            }
            result
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Kafka's incremental operation codes.
fn op(code: i8) -> Result<AlterConfigOp, KafkaError> {
    match code {
        0 => Ok(AlterConfigOp::Set),
        1 => Ok(AlterConfigOp::Delete),
        2 => Ok(AlterConfigOp::Append),
        3 => Ok(AlterConfigOp::Subtract),
        other => Err(KafkaError::new(
            ResponseError::InvalidRequest,
            format!("unknown config operation {other}"),
        )),
    }
}

/// The response row of one altered resource.
fn altered(
    resource_type: i8,
    name: &kafka_protocol::protocol::StrBytes,
    error: Option<KafkaError>,
) -> (i16, Option<String>, i8, kafka_protocol::protocol::StrBytes) {
    match error {
        Some(e) => (e.code, e.message, resource_type, name.clone()),
        None => (0, None, resource_type, name.clone()),
    }
}

/// Sends the checked resources as one incremental change; per input resource its error.
async fn alter<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    checked: Vec<Result<CorumResource, KafkaError>>,
    validate_only: bool,
) -> Vec<Option<KafkaError>> {
    let resources: Vec<CorumResource> = checked.iter().filter_map(|r| r.clone().ok()).collect();
    let answers = if resources.is_empty() {
        Ok(Vec::new())
    } else {
        call(
            backend,
            RequestBody::IncrementalAlterConfigs(CorumIncremental {
                resources,
                validate_only,
            }),
            ctx.default_timeout_ms,
            |r| match r {
                ResponseBody::IncrementalAlterConfigs(r) => Some(r.resources),
                _ => None,
            },
        )
        .await
    };
    let mut answers = answers.map(Vec::into_iter).map_err(|e| KafkaError::rpc(&e));
    checked
        .into_iter()
        .map(|c| match c {
            Err(e) => Some(e),
            Ok(_) => match &mut answers {
                Ok(it) => match it.next() {
                    Some((_, Ok(()))) => None,
                    Some((_, Err(e))) => Some(KafkaError::api(&e)),
                    None => Some(KafkaError::new(
                        ResponseError::UnknownServerError,
                        "the controller did not answer for this resource",
                    )),
                },
                Err(e) => Some(e.clone()),
            },
        })
        .collect()
}

/// IncrementalAlterConfigs at any served version.
pub async fn incremental_alter_configs<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let checked: Vec<Result<CorumResource, KafkaError>> = request
        .resources
        .iter()
        .map(|r| {
            let resource = resource(r.resource_type, r.resource_name.as_str())?;
            let configs = r
                .configs
                .iter()
                .map(|c| {
                    Ok(CorumAlterable {
                        key: c.name.as_str().to_owned(),
                        op: op(c.config_operation)?,
                        value: c.value.as_ref().map_or("", |v| v.as_str()).to_owned(),
                    })
                })
                .collect::<Result<Vec<_>, KafkaError>>()?;
            Ok(CorumResource { resource, configs })
        })
        .collect();
    let errors = alter(ctx, backend, checked, request.validate_only).await;
    let responses = request
        .resources
        .iter()
        .zip(errors)
        .map(|(r, e)| {
            let (code, message, resource_type, name) =
                altered(r.resource_type, &r.resource_name, e);
            kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message.as_deref().map(text))
                .with_resource_type(resource_type)
                .with_resource_name(name)
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// AlterConfigs (whole-resource replace) at any served version.
pub async fn alter_configs<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let resources: Vec<Result<ConfigResource, KafkaError>> = request
        .resources
        .iter()
        .map(|r| resource(r.resource_type, r.resource_name.as_str()))
        .collect();
    let wanted: Vec<ConfigResource> = resources.iter().filter_map(|r| r.clone().ok()).collect();
    let current = if wanted.is_empty() {
        Ok(Vec::new())
    } else {
        describe(ctx, backend, wanted)
            .await
            .map_err(|e| KafkaError::rpc(&e))
    };
    let mut current = current.map(Vec::into_iter);
    let checked: Vec<Result<CorumResource, KafkaError>> = request
        .resources
        .iter()
        .zip(resources)
        .map(|(r, resource)| {
            let resource = resource?;
            let now = match &mut current {
                Ok(it) => it
                    .next()
                    .unwrap_or(Ok(Vec::new()))
                    .map_err(|e| KafkaError::api(&e))?,
                Err(e) => return Err(e.clone()),
            };
            let mut configs = Vec::new();
            for c in &r.configs {
                let value = c.value.as_ref().ok_or_else(|| {
                    KafkaError::new(
                        ResponseError::InvalidRequest,
                        format!("config {:?} has a null value", c.name.as_str()),
                    )
                })?;
                configs.push(CorumAlterable {
                    key: c.name.as_str().to_owned(),
                    op: AlterConfigOp::Set,
                    value: value.as_str().to_owned(),
                });
            }
            for c in now.iter().filter(|c| is_dynamic(&c.source)) {
                if !r.configs.iter().any(|k| k.name.as_str() == c.key) {
                    configs.push(CorumAlterable {
                        key: c.key.to_string(),
                        op: AlterConfigOp::Delete,
                        value: String::new(),
                    });
                }
            }
            Ok(CorumResource { resource, configs })
        })
        .collect();
    let errors = alter(ctx, backend, checked, request.validate_only).await;
    let responses = request
        .resources
        .iter()
        .zip(errors)
        .map(|(r, e)| {
            let (code, message, resource_type, name) =
                altered(r.resource_type, &r.resource_name, e);
            kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse::default(
            )
            .with_error_code(code)
            .with_error_message(message.as_deref().map(text))
            .with_resource_type(resource_type)
            .with_resource_name(name)
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}
