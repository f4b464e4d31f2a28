//! Dynamic configs: IncrementalAlterConfigs (SET / DELETE / APPEND / SUBTRACT, as Kafka) and
//! DescribeConfigs, validated against a small schema of known keys.
//!
//! Precedence when describing a broker: the broker's own dynamic value, then the cluster-wide
//! dynamic default (broker resource with an empty name), then the static default.

use corum_types::NodeId;

use super::{ControllerResult, View};
use crate::error::ApiError;
use crate::image::{ConfigResource, MetadataImage};
use crate::records::{ConfigRecordV1, ConfigResourceType, MetadataRecord};

/// The type of a config value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Bool,
    Int {
        min: i64,
    },
    Long {
        min: i64,
    },
    /// One of a fixed set.
    Enum(&'static [&'static str]),
    /// A comma-separated list; `allowed` restricts the elements if set.
    List {
        allowed: Option<&'static [&'static str]>,
    },
}

/// A known config key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigDef {
    pub name: &'static str,
    pub resource_type: ConfigResourceType,
    pub config_type: ConfigType,
    pub default: &'static str,
}

const COMPRESSION: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const CLEANUP: &[&str] = &["delete", "compact"];

/// Every key the controller accepts.
pub const CONFIG_DEFS: &[ConfigDef] = &[
    ConfigDef {
        name: "cleanup.policy",
        resource_type: ConfigResourceType::Topic,
        config_type: ConfigType::List {
            allowed: Some(CLEANUP),
        },
        default: "delete",
    },
    ConfigDef {
        name: "compression.type",
        resource_type: ConfigResourceType::Topic,
        config_type: ConfigType::Enum(COMPRESSION),
        default: "producer",
    },
    ConfigDef {
        name: "leader.replication.throttled.replicas",
        resource_type: ConfigResourceType::Topic,
        config_type: ConfigType::List { allowed: None },
        default: "",
    },
    ConfigDef {
        name: "max.message.bytes",
        resource_type: ConfigResourceType::Topic,
        config_type: ConfigType::Int { min: 0 },
        default: "1048588",
    },
    ConfigDef {
        name: "min.insync.replicas",
        resource_type: ConfigResourceType::Topic,
        config_type: ConfigType::Int { min: 1 },
        default: "1",
    },
    ConfigDef {
        name: "retention.bytes",
        resource_type: ConfigResourceType::Topic,
        config_type: ConfigType::Long { min: -1 },
        default: "-1",
    },
    ConfigDef {
        name: "retention.ms",
        resource_type: ConfigResourceType::Topic,
        config_type: ConfigType::Long { min: -1 },
        default: "604800000",
    },
    ConfigDef {
        name: "segment.bytes",
        resource_type: ConfigResourceType::Topic,
        config_type: ConfigType::Int { min: 14 },
        default: "1073741824",
    },
    ConfigDef {
        name: "unclean.leader.election.enable",
        resource_type: ConfigResourceType::Topic,
        config_type: ConfigType::Bool,
        default: "false",
    },
    ConfigDef {
        name: "background.threads",
        resource_type: ConfigResourceType::Broker,
        config_type: ConfigType::Int { min: 1 },
        default: "10",
    },
    ConfigDef {
        name: "compression.type",
        resource_type: ConfigResourceType::Broker,
        config_type: ConfigType::Enum(COMPRESSION),
        default: "producer",
    },
    ConfigDef {
        name: "log.cleanup.policy",
        resource_type: ConfigResourceType::Broker,
        config_type: ConfigType::List {
            allowed: Some(CLEANUP),
        },
        default: "delete",
    },
    ConfigDef {
        name: "log.retention.bytes",
        resource_type: ConfigResourceType::Broker,
        config_type: ConfigType::Long { min: -1 },
        default: "-1",
    },
    ConfigDef {
        name: "log.retention.ms",
        resource_type: ConfigResourceType::Broker,
        config_type: ConfigType::Long { min: -1 },
        default: "604800000",
    },
    ConfigDef {
        name: "min.insync.replicas",
        resource_type: ConfigResourceType::Broker,
        config_type: ConfigType::Int { min: 1 },
        default: "1",
    },
    ConfigDef {
        name: "num.io.threads",
        resource_type: ConfigResourceType::Broker,
        config_type: ConfigType::Int { min: 1 },
        default: "8",
    },
    ConfigDef {
        name: "unclean.leader.election.enable",
        resource_type: ConfigResourceType::Broker,
        config_type: ConfigType::Bool,
        default: "false",
    },
];

/// The definition of `key` for `resource_type`.
pub fn config_def(resource_type: ConfigResourceType, key: &str) -> Option<&'static ConfigDef> {
    CONFIG_DEFS
        .iter()
        .find(|d| d.resource_type == resource_type && d.name == key)
}

fn invalid(key: &str, reason: impl Into<String>) -> ApiError {
    ApiError::InvalidConfig {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

/// Checks `value` against the schema of `key`.
pub fn validate_value(
    resource_type: ConfigResourceType,
    key: &str,
    value: &str,
) -> Result<(), ApiError> {
    let def = config_def(resource_type, key).ok_or_else(|| invalid(key, "unknown config"))?;
    match def.config_type {
        ConfigType::Bool => {
            if value != "true" && value != "false" {
                return Err(invalid(key, "must be true or false"));
            }
        }
        ConfigType::Int { min } | ConfigType::Long { min } => {
            let max = if matches!(def.config_type, ConfigType::Int { .. }) {
                i64::from(i32::MAX)
            } else {
                i64::MAX
            };
            let v: i64 = value
                .trim()
                .parse()
                .map_err(|_| invalid(key, "must be an integer"))?;
            if v < min || v > max {
                return Err(invalid(key, format!("must be in [{min}, {max}]")));
            }
        }
        ConfigType::Enum(allowed) => {
            if !allowed.contains(&value) {
                return Err(invalid(key, format!("must be one of {allowed:?}")));
            }
        }
        ConfigType::List { allowed } => {
            for item in list_items(value) {
                if allowed.is_some_and(|a| !a.contains(&item)) {
                    return Err(invalid(
                        key,
                        format!(
                            "element {item:?} must be one of {:?}",
                            allowed.unwrap_or(&[])
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn list_items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// How an entry of IncrementalAlterConfigs changes a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum AlterConfigOp {
    Set,
    Delete,
    /// Add elements to a list config (elements already present are not repeated).
    Append,
    /// Remove elements from a list config.
    Subtract,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AlterableConfig {
    pub key: String,
    pub op: AlterConfigOp,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AlterConfigsResource {
    pub resource: ConfigResource,
    pub configs: Vec<AlterableConfig>,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct IncrementalAlterConfigsRequest {
    pub resources: Vec<AlterConfigsResource>,
    pub validate_only: bool,
}

/// One result per resource, in request order; a resource with any bad entry changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct IncrementalAlterConfigsResponse {
    pub resources: Vec<(ConfigResource, Result<(), ApiError>)>,
}

fn check_resource(image: &MetadataImage, resource: &ConfigResource) -> Result<(), ApiError> {
    match resource.resource_type {
        ConfigResourceType::Topic => match image.topics.get_by_name(&resource.name) {
            Some(t) if !t.deleting => Ok(()),
            _ => Err(ApiError::UnknownTopic {
                name: resource.name.clone(),
            }),
        },
        ConfigResourceType::Broker => {
            if resource.name.is_empty()
                || resource
                    .name
                    .parse::<NodeId>()
                    .is_ok_and(|id| id.to_string() == resource.name)
            {
                Ok(())
            } else {
                Err(ApiError::InvalidConfigResource {
                    reason: format!("broker resource {:?} is not a broker id", resource.name),
                })
            }
        }
    }
}

pub(crate) fn incremental_alter_configs(
    view: View<'_>,
    req: &IncrementalAlterConfigsRequest,
) -> ControllerResult<IncrementalAlterConfigsResponse> {
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(req.resources.len());
    for (i, r) in req.resources.iter().enumerate() {
        let result = if req.resources[..i].iter().any(|o| o.resource == r.resource) {
            Err(ApiError::InvalidRequest {
                reason: "resource named more than once in the request".into(),
            })
        } else {
            let mut out = Vec::new();
            alter_resource(view.image, r, &mut out).and_then(|()| {
                if records.len() + out.len() > view.config.records_per_batch_max {
                    return Err(ApiError::TooManyRecords {
                        records: records.len() + out.len(),
                        max: view.config.records_per_batch_max,
                    });
                }
                records.append(&mut out);
                Ok(())
            })
        };
        results.push((r.resource.clone(), result));
    }
    if req.validate_only {
        records.clear();
    }
    ControllerResult::new(
        records,
        IncrementalAlterConfigsResponse { resources: results },
    )
}

fn alter_resource(
    image: &MetadataImage,
    r: &AlterConfigsResource,
    out: &mut Vec<MetadataRecord>,
) -> Result<(), ApiError> {
    check_resource(image, &r.resource)?;
    let rtype = r.resource.resource_type;
    for (i, c) in r.configs.iter().enumerate() {
        if r.configs[..i].iter().any(|o| o.key == c.key) {
            return Err(invalid(&c.key, "key altered more than once in the request"));
        }
        let def = config_def(rtype, &c.key).ok_or_else(|| invalid(&c.key, "unknown config"))?;
        let current = image.configs.value(&r.resource, &c.key);
        let value = match c.op {
            AlterConfigOp::Set => {
                validate_value(rtype, &c.key, &c.value)?;
                Some(c.value.clone())
            }
            AlterConfigOp::Delete => None,
            AlterConfigOp::Append | AlterConfigOp::Subtract => {
                if !matches!(def.config_type, ConfigType::List { .. }) {
                    return Err(invalid(
                        &c.key,
                        "APPEND and SUBTRACT apply to list configs only",
                    ));
                }
                let mut items: Vec<&str> = list_items(current.unwrap_or(def.default)).collect();
                for item in list_items(&c.value) {
                    if c.op == AlterConfigOp::Append {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    } else {
                        items.retain(|x| *x != item);
                    }
                }
                let joined = items.join(",");
                validate_value(rtype, &c.key, &joined)?;
                Some(joined)
            }
        };
        if value.as_deref() == current {
            continue;
        }
        out.push(MetadataRecord::Config(ConfigRecordV1 {
            resource_type: rtype,
            resource_name: r.resource.name.clone(),
            key: c.key.clone(),
            value,
        }));
    }
    Ok(())
}

/// DescribeConfigs: every known key of each resource, with its effective value and source.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeConfigsRequest {
    pub resources: Vec<ConfigResource>,
}

/// Where a described value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum ConfigSource {
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    Default,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribedConfig {
    /// The key's name (static when the controller builds it, owned once decoded from the wire).
    #[rkyv(with = rkyv::with::AsOwned)]
    pub key: std::borrow::Cow<'static, str>,
    pub value: String,
    pub source: ConfigSource,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeConfigsResponse {
    pub resources: Vec<(ConfigResource, Result<Vec<DescribedConfig>, ApiError>)>,
}

/// Every known key of each resource with its effective value and source.
pub(crate) fn describe_configs(
    image: &MetadataImage,
    resources: &[ConfigResource],
) -> DescribeConfigsResponse {
    let cluster_default = ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: String::new(),
    };
    let results = resources
        .iter()
        .map(|res| {
            let described = check_resource(image, res).map(|()| {
                CONFIG_DEFS
                    .iter()
                    .filter(|d| d.resource_type == res.resource_type)
                    .map(|d| {
                        let own = image.configs.value(res, d.name);
                        let (value, source) = match (res.resource_type, own) {
                            (ConfigResourceType::Topic, Some(v)) => (v, ConfigSource::DynamicTopic),
                            (ConfigResourceType::Broker, Some(v)) if res.name.is_empty() => {
                                (v, ConfigSource::DynamicDefaultBroker)
                            }
                            (ConfigResourceType::Broker, Some(v)) => {
                                (v, ConfigSource::DynamicBroker)
                            }
                            (ConfigResourceType::Broker, None) => {
                                match image.configs.value(&cluster_default, d.name) {
                                    Some(v) => (v, ConfigSource::DynamicDefaultBroker),
                                    None => (d.default, ConfigSource::Default),
                                }
                            }
                            (ConfigResourceType::Topic, None) => (d.default, ConfigSource::Default),
                        };
                        DescribedConfig {
                            key: d.name.into(),
                            value: value.to_owned(),
                            source,
                        }
                    })
                    .collect()
            });
            (res.clone(), described)
        })
        .collect();
    DescribeConfigsResponse { resources: results }
}
