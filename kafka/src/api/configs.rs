//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.
//!
//! | Kafka resource type | corum resource |
//! |---|---|
//! | 2 TOPIC | a topic by name |
//! | 4 BROKER | a broker by id, or `""` for the cluster-wide default |
//! | 8 BROKER_LOGGER | refused with INVALID_REQUEST: corum has no per-broker loggers |
//!
//! The controller holds Kafka's schema (every topic and broker key with its type, default,
//! validator, synonyms and documentation): DescribeConfigs passes the requested keys and the
//! synonym and documentation flags through, and the answer's fields map one to one. Any node
//! answers it from its replayed image. AlterConfigs (the legacy whole-resource replace) and
//! IncrementalAlterConfigs are writes, answered at commit.

use corum_controller::control::config_control::{
    broker_logger_refusal, AlterConfigOp, AlterConfigsRequest as CorumAlterConfigs,
    AlterConfigsResource as CorumResource, AlterableConfig as CorumAlterable,
    DescribeConfigsRequest as CorumDescribe, DescribeConfigsResource as CorumDescribeResource,
    DescribedConfig, IncrementalAlterConfigsRequest as CorumIncremental, ReplacedConfigs,
};
use corum_controller::image::configs::ConfigResource;
use corum_controller::records::ConfigResourceType;
use corum_controller::ApiError;
use corum_protocol::{LocalRead, RequestBody, ResponseBody};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{cow_text, text};
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::service::{call, read};

/// Kafka's resource type codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

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
        RESOURCE_BROKER_LOGGER => Err(KafkaError::api(&broker_logger_refusal())),
        other => Err(KafkaError::new(
            ResponseError::InvalidRequest,
            format!("unknown resource type {other}"),
        )),
    }
}

/// One described key in Kafka's shape at `version`.
fn described(c: DescribedConfig, version: i16) -> DescribeConfigsResourceResult {
    let mut d = DescribeConfigsResourceResult::default()
        .with_name(cow_text(c.name))
        .with_value(c.value.map(cow_text))
        .with_read_only(c.read_only)
        .with_is_sensitive(c.sensitive)
        .with_config_type(c.config_type.kafka_id())
        .with_documentation(c.documentation.map(cow_text))
        .with_synonyms(
            c.synonyms
                .into_iter()
                .map(|s| {
                    DescribeConfigsSynonym::default()
                        .with_name(cow_text(s.name))
                        .with_value(s.value.map(cow_text))
                        .with_source(s.source.kafka_id())
                })
                .collect(),
        );
    d.config_source = if version == 0 {
        -1
    } else {
        c.source.kafka_id()
    };
    d
}

/// DescribeConfigs at any served version.
pub async fn describe_configs<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let checked: Vec<Result<CorumDescribeResource, KafkaError>> = request
        .resources
        .iter()
        .map(|r| {
            Ok(CorumDescribeResource {
                resource: resource(r.resource_type, r.resource_name.as_str())?,
                names: r
                    .configuration_keys
                    .as_ref()
                    .map(|keys| keys.iter().map(|k| k.as_str().to_owned()).collect()),
            })
        })
        .collect();
    let resources: Vec<CorumDescribeResource> =
        checked.iter().filter_map(|r| r.clone().ok()).collect();
    let answers = if resources.is_empty() {
        Ok(Vec::new())
    } else {
        call(
            backend,
            read(LocalRead::DescribeConfigs(CorumDescribe {
                resources,
                include_synonyms: request.include_synonyms,
                include_documentation: request.include_documentation,
            })),
            ctx.default_timeout_ms,
            |r| match r {
                ResponseBody::DescribeConfigs(r) => Some(r.resources),
                _ => None,
            },
        )
        .await
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
                Ok(it) => it.next().map_or_else(
                    || Err(missing()),
                    |(_, r)| r.map_err(|e| KafkaError::api(&e)),
                ),
                Err(e) => Err(e.clone()),
            });
            match outcome {
                Ok(configs) => {
                    result.configs = configs.into_iter().map(|c| described(c, version)).collect();
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

fn missing() -> KafkaError {
    KafkaError::new(
        ResponseError::UnknownServerError,
        "the controller did not answer for this resource",
    )
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

/// The controller's per-resource outcomes of one alter request.
type Altered = Vec<(ConfigResource, Result<(), ApiError>)>;

/// Per input resource, its error (`None`: altered), from one corum request over the
/// resources that passed the checks here.
fn spread(
    checked: Vec<Result<(), KafkaError>>,
    answers: Result<Altered, KafkaError>,
) -> Vec<Option<KafkaError>> {
    let mut answers = answers.map(Vec::into_iter);
    checked
        .into_iter()
        .map(|c| match c {
            Err(e) => Some(e),
            Ok(()) => match &mut answers {
                Ok(it) => match it.next() {
                    Some((_, Ok(()))) => None,
                    Some((_, Err(e))) => Some(KafkaError::api(&e)),
                    None => Some(missing()),
                },
                Err(e) => Some(e.clone()),
            },
        })
        .collect()
}

/// Sends `body`, an alter of `count` resources (nothing when none), and returns the
/// controller's answer per resource.
async fn send_alter<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    body: RequestBody,
    count: usize,
) -> Result<Vec<(ConfigResource, Result<(), ApiError>)>, KafkaError> {
    if count == 0 {
        return Ok(Vec::new());
    }
    call(backend, body, ctx.default_timeout_ms, |r| match r {
        ResponseBody::IncrementalAlterConfigs(r) | ResponseBody::AlterConfigs(r) => {
            Some(r.resources)
        }
        _ => None,
    })
    .await
    .map_err(|e| KafkaError::rpc(&e))
}

/// The response row of one altered resource.
fn row(error: Option<KafkaError>) -> (i16, Option<StrBytes>) {
    match error {
        Some(e) => (e.code, e.message.as_deref().map(text)),
        None => (0, None),
    }
}

/// IncrementalAlterConfigs at any served version.
pub async fn incremental_alter_configs<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut resources = Vec::new();
    let checked: Vec<Result<(), KafkaError>> = request
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
            resources.push(CorumResource { resource, configs });
            Ok(())
        })
        .collect();
    let count = resources.len();
    let body = RequestBody::IncrementalAlterConfigs(CorumIncremental {
        resources,
        validate_only: request.validate_only,
    });
    let answers = send_alter(ctx, backend, body, count).await;
    let responses = request
        .resources
        .iter()
        .zip(spread(checked, answers))
        .map(|(r, e)| {
            let (code, message) = row(e);
            kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// AlterConfigs (the legacy whole-resource replace) at any served version.
pub async fn alter_configs<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut resources = Vec::new();
    let checked: Vec<Result<(), KafkaError>> = request
        .resources
        .iter()
        .map(|r| {
            let resource = resource(r.resource_type, r.resource_name.as_str())?;
            resources.push(ReplacedConfigs {
                resource,
                configs: r
                    .configs
                    .iter()
                    .map(|c| {
                        (
                            c.name.as_str().to_owned(),
                            c.value.as_ref().map(|v| v.as_str().to_owned()),
                        )
                    })
                    .collect(),
            });
            Ok(())
        })
        .collect();
    let count = resources.len();
    let body = RequestBody::AlterConfigs(CorumAlterConfigs {
        resources,
        validate_only: request.validate_only,
    });
    let answers = send_alter(ctx, backend, body, count).await;
    let responses = request
        .resources
        .iter()
        .zip(spread(checked, answers))
        .map(|(r, e)| {
            let (code, message) = row(e);
            kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse::default(
            )
            .with_error_code(code)
            .with_error_message(message)
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone())
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}
