//! Dynamic configs, as Kafka's `ConfigurationControlManager` and `ConfigHelper` treat them:
//! IncrementalAlterConfigs (SET / DELETE / APPEND / SUBTRACT), the legacy AlterConfigs (the
//! resource's dynamic configs replaced as a whole) and DescribeConfigs, all against Kafka's
//! schema ([`crate::config_schema`]).
//!
//! # Resources
//!
//! | resource | name | keys | may set |
//! |---|---|---|---|
//! | topic | an existing topic | the 33 topic keys | every key |
//! | broker | a broker id in decimal | the 316 broker keys | `per-broker` and `cluster-wide` keys |
//! | broker | `""`: the cluster default | the 316 broker keys | `cluster-wide` keys |
//!
//! Kafka's `broker-logger` resources are not served here: Kafka keeps logger levels in each
//! process, never in the metadata log, and corum's processes log through `tracing` with the level
//! fixed at start (`RUST_LOG`). [`broker_logger_refusal`] is the answer to give.
//!
//! # Effective values and sources (DescribeConfigs)
//!
//! Layers, highest first, with Kafka's `config_source` for each:
//!
//! | layer | source | for |
//! |---|---|---|
//! | the topic's own value | `DYNAMIC_TOPIC_CONFIG` | topic keys |
//! | the broker's own value | `DYNAMIC_BROKER_CONFIG` | broker keys of a broker id |
//! | the cluster default (broker `""`) | `DYNAMIC_DEFAULT_BROKER_CONFIG` | both |
//! | the controller's static config | `STATIC_BROKER_CONFIG` | `num.partitions`, `default.replication.factor`, `min.insync.replicas`, `broker.session.timeout.ms`, `broker.heartbeat.interval.ms` when they differ from Kafka's default; `node.id`, `broker.id`, `process.roles` of a broker |
//! | Kafka's static default | `DEFAULT_CONFIG` | both |
//!
//! A topic key inherits through its broker synonyms (`retention.ms` ← `log.retention.ms` ←
//! `log.retention.minutes` ← `log.retention.hours`, converted to milliseconds): its value is the
//! topic's own, else the first synonym, in chain order, that any broker layer sets, else the
//! topic default. The synonym list follows Kafka's rule: layer by layer, each layer's synonyms in
//! chain order, starting at the first entry for the key's own name (for a topic key, its primary
//! broker synonym); the source is the first entry's, else `DEFAULT_CONFIG`. The controller is
//! not a broker, so a topic's chain has no per-broker layer. The cluster default resource lists
//! only the keys set on it, as in Kafka.
//!
//! # Validation (both alter APIs, and CreateTopics' configs)
//!
//! | problem | error |
//! |---|---|
//! | unknown key | `InvalidConfig` (Kafka's INVALID_CONFIG) naming it |
//! | bad value | `InvalidConfig`: `Invalid value V for configuration K: reason` (a broker key that is a topic key's default must also pass the topic key's check: Kafka checks only its type, so `log.retention.ms=-2` would become every topic's invalid default) |
//! | `min.compaction.lag.ms` above `max.compaction.lag.ms` (also the `log.cleaner.` pair), tiered storage on a topic | `InvalidConfig` |
//! | setting a read-only broker key, or a per-broker key on the cluster default | `InvalidRequest` |
//! | APPEND / SUBTRACT on a key that is not a LIST | `InvalidConfig` |
//! | a key twice in one resource, a resource twice in one request | `InvalidRequest` |
//!
//! A resource with any bad entry changes nothing; `validate_only` returns no records. A key set
//! to the value it already has writes no record. APPEND and SUBTRACT start from the key's
//! effective value (as described), so appending to an inherited list keeps what was inherited.
//!
//! # `min.insync.replicas` with eligible leader replicas (KIP-966)
//!
//! While `eligible.leader.replicas.version` is 1, as in Kafka's `ConfigurationControlManager`:
//!
//! | change | outcome |
//! |---|---|
//! | a broker's own `min.insync.replicas` set, altered or deleted | `InvalidConfig`: "Broker-level min.insync.replicas cannot be altered while ELR is enabled." |
//! | the cluster default's deleted | `InvalidConfig`: "Cluster-level min.insync.replicas cannot be removed while ELR is enabled." |
//! | a topic's written | its Config record, then a ClearElr of that topic (the eligible leader replicas were chosen against the old min ISR) |
//! | the cluster default's written | its Config record, then a ClearElr of every topic |

use std::borrow::Cow;
use std::cell::OnceCell;
use std::sync::Arc;

use super::{feature_control, ControllerResult, View};
use crate::config::ControllerConfig;
use crate::config_schema::{self, ConfigKey, ConfigType, UpdateMode};
use crate::error::ApiError;
use crate::image::{ConfigMap, ConfigResource, MetadataImage};
use crate::records::{ClearElrRecordV1, ConfigRecordV1, ConfigResourceType, MetadataRecord};

// ---------------------------------------------------------------------------------------------
// Wire types.

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

/// Kafka's legacy AlterConfigs: each resource's dynamic configs become exactly `configs`; every
/// key it had and `configs` does not name is deleted. A `None` value deletes the key too (a
/// broker's; a topic refuses it, as Kafka does).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AlterConfigsRequest {
    pub resources: Vec<ReplacedConfigs>,
    pub validate_only: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ReplacedConfigs {
    pub resource: ConfigResource,
    pub configs: Vec<(String, Option<String>)>,
}

/// One result per resource, in request order (the same shape as IncrementalAlterConfigs').
pub type AlterConfigsResponse = IncrementalAlterConfigsResponse;

/// DescribeConfigs of some resources.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct DescribeConfigsRequest {
    pub resources: Vec<DescribeConfigsResource>,
    /// Fill [`DescribedConfig::synonyms`].
    pub include_synonyms: bool,
    /// Fill [`DescribedConfig::documentation`].
    pub include_documentation: bool,
}

impl DescribeConfigsRequest {
    /// Every key of each resource, without synonyms or documentation.
    pub fn all(resources: impl IntoIterator<Item = ConfigResource>) -> Self {
        DescribeConfigsRequest {
            resources: resources
                .into_iter()
                .map(|resource| DescribeConfigsResource {
                    resource,
                    names: None,
                })
                .collect(),
            include_synonyms: false,
            include_documentation: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeConfigsResource {
    pub resource: ConfigResource,
    /// The keys asked for (Kafka's `configuration_keys`); `None` or empty means every key.
    /// Names the resource does not have are left out of the answer.
    pub names: Option<Vec<String>>,
}

/// Where a described value comes from. [`ConfigSource::kafka_id`] is Kafka's `config_source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum ConfigSource {
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
}

impl ConfigSource {
    /// Kafka's DescribeConfigs `config_source` code.
    pub fn kafka_id(self) -> i8 {
        match self {
            ConfigSource::DynamicTopic => 1,
            ConfigSource::DynamicBroker => 2,
            ConfigSource::DynamicDefaultBroker => 3,
            ConfigSource::StaticBroker => 4,
            ConfigSource::Default => 5,
        }
    }
}

/// One key of a described resource (Kafka's `DescribeConfigsResourceResult`).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribedConfig {
    /// The key's name (static when the controller builds it, owned once decoded from the wire).
    #[rkyv(with = rkyv::with::AsOwned)]
    pub name: Cow<'static, str>,
    /// The effective value; `None` for a sensitive key or a key without a value.
    #[rkyv(with = rkyv::with::Map<rkyv::with::AsOwned>)]
    pub value: Option<Cow<'static, str>>,
    /// Whether nothing may change the key at run time (broker keys Kafka lists as read-only).
    pub read_only: bool,
    pub source: ConfigSource,
    /// Whether the value is hidden (PASSWORD keys).
    pub sensitive: bool,
    /// Where the value could come from, highest precedence first (empty unless asked for).
    pub synonyms: Vec<ConfigSynonym>,
    pub config_type: ConfigType,
    /// One line on what the key does (`None` unless asked for).
    #[rkyv(with = rkyv::with::Map<rkyv::with::AsOwned>)]
    pub documentation: Option<Cow<'static, str>>,
}

/// One entry of a described key's synonym list (Kafka's `DescribeConfigsSynonym`).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ConfigSynonym {
    #[rkyv(with = rkyv::with::AsOwned)]
    pub name: Cow<'static, str>,
    /// `None` for a sensitive key.
    #[rkyv(with = rkyv::with::Map<rkyv::with::AsOwned>)]
    pub value: Option<Cow<'static, str>>,
    pub source: ConfigSource,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeConfigsResponse {
    pub resources: Vec<(ConfigResource, Result<Vec<DescribedConfig>, ApiError>)>,
}

/// The answer for a Kafka `broker-logger` resource (see the module doc).
pub fn broker_logger_refusal() -> ApiError {
    ApiError::InvalidRequest {
        reason: "corum has no broker loggers to describe or alter: its processes log through \
                 tracing, with levels fixed at start by RUST_LOG"
            .into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Layers: where a value comes from.

/// The name of the cluster-default broker resource.
const CLUSTER_DEFAULT: &str = "";

/// The layers a value can come from, over one image and controller config.
struct Layers<'a> {
    image: &'a MetadataImage,
    config: &'a ControllerConfig,
    /// The cluster default's settings, looked up on first use: a plain SET never needs them,
    /// and the lookup is a large share of its cost.
    cluster_default: OnceCell<Option<&'a ConfigMap>>,
}

impl<'a> Layers<'a> {
    fn new(image: &'a MetadataImage, config: &'a ControllerConfig) -> Self {
        Layers {
            image,
            config,
            cluster_default: OnceCell::new(),
        }
    }

    fn dynamic_default(&self, name: &str) -> Option<&'a str> {
        self.cluster_default
            .get_or_init(|| {
                self.image.configs.get(&ConfigResource {
                    resource_type: ConfigResourceType::Broker,
                    name: CLUSTER_DEFAULT.to_owned(),
                })
            })
            .and_then(|m| m.get(name))
    }

    /// The controller's static config, where it holds a broker key and differs from Kafka's
    /// default (a value equal to the default is reported as the default).
    fn static_value(&self, key: &ConfigKey) -> Option<Cow<'static, str>> {
        let value = match key.name {
            "num.partitions" => self.config.default_partitions.to_string(),
            "default.replication.factor" => self.config.default_replication_factor.to_string(),
            "min.insync.replicas" => self.config.min_insync_replicas.to_string(),
            "broker.session.timeout.ms" => self.config.session_timeout_ms.to_string(),
            "broker.heartbeat.interval.ms" => self.config.heartbeat_interval_ms.to_string(),
            _ => return None,
        };
        (key.default.value() != Some(value.as_str())).then_some(Cow::Owned(value))
    }

    /// A broker key's value and source in one broker's (`None`: the cluster default's) view,
    /// below the per-broker layer.
    fn broker_layers_value(&self, key: &'static ConfigKey) -> Option<(Cow<'a, str>, ConfigSource)> {
        if let Some(v) = self.dynamic_default(key.name) {
            return Some((Cow::Borrowed(v), ConfigSource::DynamicDefaultBroker));
        }
        if let Some(v) = self.static_value(key) {
            return Some((v, ConfigSource::StaticBroker));
        }
        key.default
            .value()
            .map(|v| (Cow::Borrowed(v), ConfigSource::Default))
    }

    /// The value a topic key inherits from the broker layers: the first synonym, in chain order,
    /// that a layer sets, converted to the key's unit.
    fn inherited_topic_value(&self, key: &'static ConfigKey) -> Option<Cow<'a, str>> {
        key.synonyms.iter().find_map(|s| {
            let broker_key = config_schema::key(ConfigResourceType::Broker, s.name)
                .expect("a topic key's synonyms are broker keys (schema test)");
            let (v, _) = self.broker_layers_value(broker_key)?;
            match s.unit.convert(&v)? {
                Cow::Borrowed(_) => Some(v),
                Cow::Owned(c) => Some(Cow::Owned(c)),
            }
        })
    }

    /// The effective value of `key` for a resource whose own settings are `own`.
    fn effective<'o>(
        &'o self,
        resource_type: ConfigResourceType,
        broker_name: &str,
        own: Option<&'o ConfigMap>,
        key: &'static ConfigKey,
    ) -> Option<Cow<'o, str>> {
        if let Some(v) = own.and_then(|m| m.get(key.name)) {
            return Some(Cow::Borrowed(v));
        }
        match resource_type {
            ConfigResourceType::Topic => self
                .inherited_topic_value(key)
                .or(key.default.value().map(Cow::Borrowed)),
            ConfigResourceType::Broker => {
                if let Some(v) = broker_identity(key, broker_name) {
                    return Some(v);
                }
                self.broker_layers_value(key).map(|(v, _)| v)
            }
        }
    }
}

/// What the controller knows of a broker's own static config: its id and role.
fn broker_identity(key: &ConfigKey, broker_name: &str) -> Option<Cow<'static, str>> {
    if broker_name.is_empty() {
        return None;
    }
    match key.name {
        "node.id" | "broker.id" => Some(Cow::Owned(broker_name.to_owned())),
        "process.roles" => Some(Cow::Borrowed("broker")),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Resources.

fn check_resource(image: &MetadataImage, resource: &ConfigResource) -> Result<(), ApiError> {
    match resource.resource_type {
        ConfigResourceType::Topic if resource.name.is_empty() => Err(ApiError::InvalidRequest {
            reason: "a topic resource must name a topic (there is no topic default)".into(),
        }),
        ConfigResourceType::Topic => match image.topics.get_by_name(&resource.name) {
            Some(t) if !t.deleting => Ok(()),
            _ => Err(ApiError::UnknownTopic {
                name: resource.name.clone(),
            }),
        },
        ConfigResourceType::Broker => {
            if resource.name.is_empty() || is_broker_id(&resource.name) {
                Ok(())
            } else {
                Err(ApiError::InvalidConfigResource {
                    reason: format!("broker resource {:?} is not a broker id", resource.name),
                })
            }
        }
    }
}

/// Whether `name` is a broker id as Kafka prints one: a `u32` in decimal, no sign, no
/// leading zero, no spaces (checked without printing the id back).
fn is_broker_id(name: &str) -> bool {
    let digits = name.bytes().all(|b| b.is_ascii_digit());
    let canonical = !name.starts_with('0') || name == "0";
    digits && canonical && name.parse::<u32>().is_ok()
}

fn invalid(key: &str, reason: impl Into<String>) -> ApiError {
    ApiError::InvalidConfig {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

fn resource_kind(resource_type: ConfigResourceType) -> &'static str {
    match resource_type {
        ConfigResourceType::Topic => "topic",
        ConfigResourceType::Broker => "broker",
    }
}

/// The schema entry of `name` for `resource`, if `resource` may set it.
fn settable_key(resource: &ConfigResource, name: &str) -> Result<&'static ConfigKey, ApiError> {
    let key = config_schema::key(resource.resource_type, name).ok_or_else(|| {
        invalid(
            name,
            format!(
                "Unknown {} config name: {name}",
                resource_kind(resource.resource_type)
            ),
        )
    })?;
    match key.update_mode {
        UpdateMode::PerTopic | UpdateMode::ClusterWide => Ok(key),
        UpdateMode::PerBroker if !resource.name.is_empty() => Ok(key),
        UpdateMode::PerBroker => Err(ApiError::InvalidRequest {
            reason: format!(
                "{name} can be set for one broker only: name a broker id, not the cluster default"
            )
            .into(),
        }),
        UpdateMode::ReadOnly => Err(ApiError::InvalidRequest {
            reason: format!("{name} is read-only: only the broker's static configuration sets it")
                .into(),
        }),
    }
}

/// The known key `name` of `resource_type` (deleting needs no more).
fn known_key(
    resource_type: ConfigResourceType,
    name: &str,
) -> Result<&'static ConfigKey, ApiError> {
    config_schema::key(resource_type, name).ok_or_else(|| {
        invalid(
            name,
            format!(
                "Unknown {} config name: {name}",
                resource_kind(resource_type)
            ),
        )
    })
}

fn check_value(key: &ConfigKey, value: &str) -> Result<(), ApiError> {
    config_schema::validate(key, value).map_err(|e| invalid(key.name, e.message(key.name)))?;
    // A broker key that is the default of a topic key in the same unit must also be a value
    // that topic key accepts (Kafka checks only the broker key's own validator, often none:
    // `log.retention.ms=-2` would become every topic's invalid default).
    if key.update_mode != UpdateMode::PerTopic {
        let topic_key = config_schema::TOPIC_KEYS.iter().find(|t| {
            t.synonyms
                .first()
                .is_some_and(|s| s.name == key.name && s.unit == config_schema::Unit::Same)
        });
        if let Some(t) = topic_key {
            config_schema::validate(t, value)
                .map_err(|e| invalid(key.name, e.message(key.name)))?;
        }
    }
    Ok(())
}

/// Pairs of keys whose effective values must not cross (Kafka's `LogConfig.validateValues`).
const ORDERED_PAIRS: [(ConfigResourceType, &str, &str); 2] = [
    (
        ConfigResourceType::Topic,
        "min.compaction.lag.ms",
        "max.compaction.lag.ms",
    ),
    (
        ConfigResourceType::Broker,
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
    ),
];

/// The rules between keys, on a resource's configs as they would be after a change (`own`).
fn check_combination(
    layers: &Layers<'_>,
    resource: &ConfigResource,
    own: &ConfigMap,
) -> Result<(), ApiError> {
    let rt = resource.resource_type;
    let value_of = |name: &str| -> Option<i64> {
        let key = config_schema::key(rt, name).expect("a schema key");
        let v = layers.effective(rt, &resource.name, Some(own), key)?;
        config_schema::java_trim(&v).parse().ok()
    };
    for (pair_type, low, high) in ORDERED_PAIRS {
        if pair_type != rt || !(own.contains_key(low) || own.contains_key(high)) {
            continue;
        }
        if let (Some(l), Some(h)) = (value_of(low), value_of(high)) {
            if l > h {
                return Err(invalid(
                    low,
                    format!("{low} ({l}) must not be above {high} ({h})"),
                ));
            }
        }
    }
    if rt == ConfigResourceType::Topic
        && own
            .get("remote.storage.enable")
            .is_some_and(|v| config_schema::java_trim(v).eq_ignore_ascii_case("true"))
    {
        return Err(invalid(
            "remote.storage.enable",
            "tiered storage is not enabled in this cluster (remote.log.storage.system.enable \
             is false), so no topic can use it",
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// IncrementalAlterConfigs and AlterConfigs.

pub(crate) fn incremental_alter_configs(
    view: View<'_>,
    req: &IncrementalAlterConfigsRequest,
) -> ControllerResult<IncrementalAlterConfigsResponse> {
    alter_each(
        view,
        req.resources.iter().map(|r| (&r.resource, r)),
        req.validate_only,
        alter_resource,
    )
}

/// Kafka's legacy AlterConfigs (see [`AlterConfigsRequest`]).
pub(crate) fn alter_configs(
    view: View<'_>,
    req: &AlterConfigsRequest,
) -> ControllerResult<AlterConfigsResponse> {
    alter_each(
        view,
        req.resources.iter().map(|r| (&r.resource, r)),
        req.validate_only,
        replace_resource,
    )
}

/// Runs `alter` per resource (refusing one named twice), keeps the records of those that pass
/// within the batch limit, and drops every record for `validate_only`.
fn alter_each<'r, T: 'r>(
    view: View<'_>,
    resources: impl ExactSizeIterator<Item = (&'r ConfigResource, &'r T)>,
    validate_only: bool,
    alter: fn(&Layers<'_>, &T, &mut Vec<MetadataRecord>) -> Result<(), ApiError>,
) -> ControllerResult<IncrementalAlterConfigsResponse> {
    let layers = Layers::new(view.image, view.config);
    // One record per resource is the common case (one key set): sized for it, and each
    // resource's records written in place, taken back when the resource fails.
    let mut records = Vec::with_capacity(resources.len());
    let mut results: Vec<(ConfigResource, Result<(), ApiError>)> =
        Vec::with_capacity(resources.len());
    for (resource, r) in resources {
        let result = if results.iter().any(|(seen, _)| seen == resource) {
            Err(ApiError::InvalidRequest {
                reason: "resource named more than once in the request".into(),
            })
        } else {
            let start = records.len();
            let result = alter(&layers, r, &mut records).and_then(|()| {
                if records.len() > view.config.records_per_batch_max {
                    return Err(ApiError::TooManyRecords {
                        records: records.len(),
                        max: view.config.records_per_batch_max,
                    });
                }
                Ok(())
            });
            if result.is_err() {
                records.truncate(start);
            }
            result
        };
        results.push((resource.clone(), result));
    }
    if validate_only {
        records.clear();
    }
    ControllerResult::new(
        records,
        IncrementalAlterConfigsResponse { resources: results },
    )
}

fn alter_resource(
    layers: &Layers<'_>,
    r: &AlterConfigsResource,
    out: &mut Vec<MetadataRecord>,
) -> Result<(), ApiError> {
    check_resource(layers.image, &r.resource)?;
    let rtype = r.resource.resource_type;
    let current = layers.image.configs.get(&r.resource);
    // The resource's own settings as they will be, for the rules between keys; built only when
    // a key that takes part in one changes (never on the hot path of plain broker settings).
    let mut after: Option<ConfigMap> = None;
    let start = out.len();
    for (i, c) in r.configs.iter().enumerate() {
        if r.configs[..i].iter().any(|o| o.key == c.key) {
            return Err(ApiError::InvalidRequest {
                reason: format!("config {} altered more than once in the request", c.key).into(),
            });
        }
        let own = current.and_then(|m| m.get(&c.key));
        let value = match c.op {
            AlterConfigOp::Set => {
                let key = settable_key(&r.resource, &c.key)?;
                check_value(key, &c.value)?;
                Some(c.value.clone())
            }
            AlterConfigOp::Delete => {
                known_key(rtype, &c.key)?;
                None
            }
            AlterConfigOp::Append | AlterConfigOp::Subtract => {
                let key = settable_key(&r.resource, &c.key)?;
                if !key.is_list() {
                    return Err(invalid(
                        &c.key,
                        format!(
                            "{} applies to LIST configs only, and {} is a {}",
                            if c.op == AlterConfigOp::Append {
                                "APPEND"
                            } else {
                                "SUBTRACT"
                            },
                            c.key,
                            key.config_type.name()
                        ),
                    ));
                }
                let base = layers
                    .effective(rtype, &r.resource.name, current, key)
                    .unwrap_or_default();
                let mut items: Vec<&str> = config_schema::list_elements(&base)
                    .filter(|s| !s.is_empty())
                    .collect();
                for item in c.value.split(',').map(config_schema::java_trim) {
                    if item.is_empty() {
                        continue;
                    }
                    if c.op == AlterConfigOp::Append {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    } else {
                        items.retain(|x| *x != item);
                    }
                }
                let joined = items.join(",");
                check_value(key, &joined)?;
                Some(joined)
            }
        };
        if ORDERED_PAIRS.iter().any(|p| p.1 == c.key || p.2 == c.key)
            || c.key == "remote.storage.enable"
        {
            after.get_or_insert_with(|| current.cloned().unwrap_or_default());
        }
        if value.as_deref() == own {
            continue;
        }
        out.push(MetadataRecord::Config(ConfigRecordV1 {
            resource_type: rtype,
            resource_name: r.resource.name.clone(),
            key: c.key.clone(),
            value,
        }));
    }
    if let Some(mut after) = after {
        apply(&mut after, &out[start..]);
        check_combination(layers, &r.resource, &after)?;
    }
    let named = r.configs.iter().any(|c| c.key == MIN_INSYNC_REPLICAS);
    min_insync_replicas_rules(layers, &r.resource, named, out, start)
}

const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

/// The rules for `min.insync.replicas` while eligible leader replicas are enabled (see the
/// module doc), over the records `out[start..]` a change of `resource` wrote (`named`: the
/// request names the key): refuses what Kafka refuses, else appends the ClearElr records.
fn min_insync_replicas_rules(
    layers: &Layers<'_>,
    resource: &ConfigResource,
    named: bool,
    out: &mut Vec<MetadataRecord>,
    start: usize,
) -> Result<(), ApiError> {
    if !feature_control::elr_enabled(layers.image) {
        return Ok(());
    }
    let written: Vec<Option<String>> = out[start..]
        .iter()
        .filter_map(|r| match r {
            MetadataRecord::Config(c) if c.key == MIN_INSYNC_REPLICAS => Some(c.value.clone()),
            _ => None,
        })
        .collect();
    let broker_level =
        resource.resource_type == ConfigResourceType::Broker && !resource.name.is_empty();
    if broker_level && (named || !written.is_empty()) {
        return Err(invalid(
            MIN_INSYNC_REPLICAS,
            "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
        ));
    }
    if resource.resource_type == ConfigResourceType::Broker && written.iter().any(Option::is_none) {
        return Err(invalid(
            MIN_INSYNC_REPLICAS,
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
        ));
    }
    for _ in written {
        out.push(MetadataRecord::ClearElr(ClearElrRecordV1 {
            topic_name: match resource.resource_type {
                ConfigResourceType::Topic => resource.name.clone(),
                ConfigResourceType::Broker => String::new(),
            },
        }));
    }
    Ok(())
}

fn replace_resource(
    layers: &Layers<'_>,
    r: &ReplacedConfigs,
    out: &mut Vec<MetadataRecord>,
) -> Result<(), ApiError> {
    check_resource(layers.image, &r.resource)?;
    let rtype = r.resource.resource_type;
    let current = layers.image.configs.get(&r.resource);
    let mut sets = Vec::with_capacity(r.configs.len());
    for (i, (name, value)) in r.configs.iter().enumerate() {
        if r.configs[..i].iter().any(|(o, _)| o == name) {
            return Err(ApiError::InvalidRequest {
                reason: format!("config {name} named more than once in the request").into(),
            });
        }
        match value {
            Some(v) => {
                let key = settable_key(&r.resource, name)?;
                check_value(key, v)?;
                sets.push((name, v));
            }
            None if rtype == ConfigResourceType::Topic => {
                return Err(invalid(name, "a topic config cannot be set to null"));
            }
            None => {
                known_key(rtype, name)?;
            }
        }
    }
    let after: ConfigMap = sets.into_iter().collect();
    check_combination(layers, &r.resource, &after)?;
    let start = out.len();
    for (name, value) in &after {
        if current.and_then(|m| m.get(name)) != Some(value) {
            out.push(config_record(&r.resource, name, Some(value.to_owned())));
        }
    }
    for name in current.into_iter().flat_map(ConfigMap::keys) {
        if !after.contains_key(name) {
            out.push(config_record(&r.resource, name, None));
        }
    }
    let named = r.configs.iter().any(|(k, _)| k == MIN_INSYNC_REPLICAS);
    min_insync_replicas_rules(layers, &r.resource, named, out, start)
}

fn config_record(resource: &ConfigResource, key: &str, value: Option<String>) -> MetadataRecord {
    MetadataRecord::Config(ConfigRecordV1 {
        resource_type: resource.resource_type,
        resource_name: resource.name.clone(),
        key: key.to_owned(),
        value,
    })
}

/// Applies config records of one resource to a copy of its settings.
fn apply(settings: &mut ConfigMap, records: &[MetadataRecord]) {
    for r in records {
        if let MetadataRecord::Config(c) = r {
            match &c.value {
                Some(v) => settings.insert(&c.key, v),
                None => settings.remove(&c.key),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CreateTopics' share.

/// Checks the configs of a topic about to be created (as CreateTopics gives them; a key given
/// twice takes its last value, as the records replay).
pub(crate) fn validate_new_topic_configs(
    image: &MetadataImage,
    config: &ControllerConfig,
    name: &str,
    configs: &[(String, String)],
) -> Result<(), ApiError> {
    let resource = ConfigResource::topic(name);
    for (key, value) in configs {
        check_value(settable_key(&resource, key)?, value)?;
    }
    let own: ConfigMap = configs.iter().map(|(k, v)| (k, v)).collect();
    check_combination(&Layers::new(image, config), &resource, &own)
}

/// Partitions of a topic created with -1: the cluster's dynamic `num.partitions` if one is set
/// and valid, else the controller's static config.
pub(crate) fn default_num_partitions(image: &MetadataImage, config: &ControllerConfig) -> u32 {
    Layers::new(image, config)
        .dynamic_default("num.partitions")
        .and_then(|v| config_schema::java_trim(v).parse::<u32>().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(config.default_partitions)
}

/// Replicas per partition of a topic created with -1: the cluster's dynamic
/// `default.replication.factor` if one is set and valid, else the controller's static config.
pub(crate) fn default_replication_factor(image: &MetadataImage, config: &ControllerConfig) -> u16 {
    Layers::new(image, config)
        .dynamic_default("default.replication.factor")
        .and_then(|v| config_schema::java_trim(v).parse::<u16>().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(config.default_replication_factor)
}

/// Whether topic `name` may elect a leader outside its ISR: its effective
/// `unclean.leader.election.enable` (its own setting, else the cluster default's, else the
/// static config's, else Kafka's default, false), read as Java reads a boolean.
pub(crate) fn unclean_leader_election_enabled(
    image: &MetadataImage,
    config: &ControllerConfig,
    name: &str,
) -> bool {
    let key = config_schema::key(ConfigResourceType::Topic, "unclean.leader.election.enable")
        .expect("a topic key of Kafka's schema");
    let own = image.configs.get(&ConfigResource::topic(name));
    Layers::new(image, config)
        .effective(ConfigResourceType::Topic, "", own, key)
        .is_some_and(|v| config_schema::java_trim(&v).eq_ignore_ascii_case("true"))
}

/// Topic `name`'s effective `min.insync.replicas` (its own setting, else the cluster
/// default's, else the static config's, else Kafka's default, 1); a value that is not a
/// positive integer (config validation lets none in) counts as 1.
pub(crate) fn min_insync_replicas(
    image: &MetadataImage,
    config: &ControllerConfig,
    name: &str,
) -> usize {
    let key = config_schema::key(ConfigResourceType::Topic, "min.insync.replicas")
        .expect("a topic key of Kafka's schema");
    let own = image.configs.get(&ConfigResource::topic(name));
    Layers::new(image, config)
        .effective(ConfigResourceType::Topic, "", own, key)
        .and_then(|v| config_schema::java_trim(&v).parse::<usize>().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(1)
}

// ---------------------------------------------------------------------------------------------
// DescribeConfigs.

/// Each resource's keys (all, or those asked for) with effective value, source and the rest
/// (see the module doc).
pub(crate) fn describe_configs(
    image: &MetadataImage,
    config: &ControllerConfig,
    req: &DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let layers = Layers::new(image, config);
    let results = req
        .resources
        .iter()
        .map(|r| {
            let described =
                check_resource(image, &r.resource).map(|()| describe_resource(&layers, req, r));
            (r.resource.clone(), described)
        })
        .collect();
    DescribeConfigsResponse { resources: results }
}

/// The keys of a topic about to be created with `configs`, described as DescribeConfigs would
/// describe them once it exists (CreateTopics v5+ returns them).
pub fn describe_new_topic(
    image: &MetadataImage,
    config: &ControllerConfig,
    configs: &[(String, String)],
    include_documentation: bool,
) -> Vec<DescribedConfig> {
    let own: ConfigMap = configs.iter().map(|(k, v)| (k, v)).collect();
    let layers = Layers::new(image, config);
    let opts = DescribeOptions {
        synonyms: false,
        documentation: include_documentation,
    };
    config_schema::TOPIC_KEYS
        .iter()
        .map(|k| describe_topic_key(&layers, Some(&own), k, opts))
        .collect()
}

/// The described keys of new topics (CreateTopics v5+ answers), built once per cluster
/// default: a topic with no settings of its own is described the same way until the
/// cluster-default broker configs change, and a topic's own settings only replace their keys'
/// entries. The controller keeps one, so a burst of creations describes the defaults once.
#[derive(Clone, Debug, Default)]
pub(crate) struct NewTopicConfigs {
    /// The cluster default the entries were described over, and the entries (in
    /// [`config_schema::TOPIC_KEYS`] order), shared with every answer for a topic without
    /// settings of its own; `None` until first used.
    built: Option<(Option<ConfigMap>, Arc<Vec<DescribedConfig>>)>,
}

impl NewTopicConfigs {
    /// What [`describe_new_topic`] answers (without documentation) for a topic created with
    /// `configs` on `image`: the shared defaults themselves when no setting of its own
    /// changes an entry.
    pub(crate) fn describe(
        &mut self,
        image: &MetadataImage,
        config: &ControllerConfig,
        configs: &[(String, String)],
    ) -> Arc<Vec<DescribedConfig>> {
        let current = image.configs.get(&ConfigResource {
            resource_type: ConfigResourceType::Broker,
            name: CLUSTER_DEFAULT.to_owned(),
        });
        let stale = match &self.built {
            Some((over, _)) => over.as_ref() != current,
            None => true,
        };
        if stale {
            self.built = Some((
                current.cloned(),
                Arc::new(describe_new_topic(image, config, &[], false)),
            ));
        }
        let (_, defaults) = self.built.as_ref().expect("built above");
        let mut described = defaults.clone();
        // A topic's own setting is its key's value, from the dynamic topic layer.
        for (name, value) in configs {
            if let Ok(i) = described.binary_search_by(|c| c.name.as_ref().cmp(name.as_str())) {
                let entry = &mut Arc::make_mut(&mut described)[i];
                entry.source = ConfigSource::DynamicTopic;
                entry.value = (!entry.sensitive).then(|| owned(value));
            }
        }
        described
    }
}

#[derive(Clone, Copy)]
struct DescribeOptions {
    synonyms: bool,
    documentation: bool,
}

fn describe_resource(
    layers: &Layers<'_>,
    req: &DescribeConfigsRequest,
    r: &DescribeConfigsResource,
) -> Vec<DescribedConfig> {
    let opts = DescribeOptions {
        synonyms: req.include_synonyms,
        documentation: req.include_documentation,
    };
    let wanted = |k: &&ConfigKey| match &r.names {
        Some(names) if !names.is_empty() => names.iter().any(|n| n == k.name),
        _ => true,
    };
    let resource = &r.resource;
    let own = layers.image.configs.get(resource);
    let keys = config_schema::keys(resource.resource_type).iter();
    match resource.resource_type {
        ConfigResourceType::Topic => keys
            .filter(wanted)
            .map(|k| describe_topic_key(layers, own, k, opts))
            .collect(),
        // The cluster default lists only what is set on it, as Kafka does.
        ConfigResourceType::Broker if resource.name.is_empty() => keys
            .filter(wanted)
            .filter(|k| own.is_some_and(|m| m.contains_key(k.name)))
            .map(|k| describe_broker_key(layers, None, k, opts))
            .collect(),
        ConfigResourceType::Broker => keys
            .filter(wanted)
            .map(|k| describe_broker_key(layers, Some((&resource.name, own)), k, opts))
            .collect(),
    }
}

fn owned(v: &str) -> Cow<'static, str> {
    Cow::Owned(v.to_owned())
}

/// `v` as a static value: the key's default itself when equal to it (no copy), else owned.
fn to_static(v: Cow<'_, str>, key: &'static ConfigKey) -> Cow<'static, str> {
    match key.default.value() {
        Some(d) if d == v => Cow::Borrowed(d),
        _ => Cow::Owned(v.into_owned()),
    }
}

/// Pushes every broker-layer synonym of `chain` below the per-broker layer, layer by layer.
fn broker_layer_synonyms(
    layers: &Layers<'_>,
    chain: &[config_schema::Synonym],
    out: &mut Vec<ConfigSynonym>,
) {
    for s in chain {
        if let Some(v) = layers.dynamic_default(s.name) {
            out.push(ConfigSynonym {
                name: s.name.into(),
                value: Some(owned(v)),
                source: ConfigSource::DynamicDefaultBroker,
            });
        }
    }
    let keys = || {
        chain.iter().map(|s| {
            config_schema::key(ConfigResourceType::Broker, s.name)
                .expect("synonyms are broker keys (schema test)")
        })
    };
    for k in keys() {
        if let Some(v) = layers.static_value(k) {
            out.push(ConfigSynonym {
                name: k.name.into(),
                value: Some(v),
                source: ConfigSource::StaticBroker,
            });
        }
    }
    for k in keys() {
        if let Some(v) = k.default.value() {
            out.push(ConfigSynonym {
                name: k.name.into(),
                value: Some(v.into()),
                source: ConfigSource::Default,
            });
        }
    }
}

/// Drops the entries before the first one named `name` (Kafka lists a key's synonyms from its
/// own name on).
fn from_own_name(synonyms: &mut Vec<ConfigSynonym>, start: usize, name: &str) {
    let first = synonyms[start..]
        .iter()
        .position(|s| s.name == name)
        .map_or(synonyms.len(), |i| start + i);
    synonyms.drain(start..first);
}

fn finish(
    key: &'static ConfigKey,
    value: Option<Cow<'static, str>>,
    read_only: bool,
    mut synonyms: Vec<ConfigSynonym>,
    opts: DescribeOptions,
) -> DescribedConfig {
    let source = synonyms.first().map_or(ConfigSource::Default, |s| s.source);
    let sensitive = key.sensitive();
    if !opts.synonyms {
        synonyms.clear();
    } else if sensitive {
        synonyms.iter_mut().for_each(|s| s.value = None);
    }
    DescribedConfig {
        name: key.name.into(),
        value: if sensitive { None } else { value },
        read_only,
        source,
        sensitive,
        synonyms,
        config_type: key.config_type,
        documentation: opts.documentation.then_some(key.documentation.into()),
    }
}

fn describe_topic_key(
    layers: &Layers<'_>,
    own: Option<&ConfigMap>,
    key: &'static ConfigKey,
    opts: DescribeOptions,
) -> DescribedConfig {
    let mut synonyms = Vec::new();
    if let Some(v) = own.and_then(|m| m.get(key.name)) {
        synonyms.push(ConfigSynonym {
            name: key.name.into(),
            value: Some(owned(v)),
            source: ConfigSource::DynamicTopic,
        });
    }
    if let Some(primary) = key.synonyms.first() {
        let start = synonyms.len();
        broker_layer_synonyms(layers, key.synonyms, &mut synonyms);
        from_own_name(&mut synonyms, start, primary.name);
    }
    let value = layers
        .effective(ConfigResourceType::Topic, "", own, key)
        .map(|v| to_static(v, key));
    finish(key, value, false, synonyms, opts)
}

/// `broker`: the broker's id and own settings, or `None` for the cluster default.
fn describe_broker_key(
    layers: &Layers<'_>,
    broker: Option<(&str, Option<&ConfigMap>)>,
    key: &'static ConfigKey,
    opts: DescribeOptions,
) -> DescribedConfig {
    let mut synonyms = Vec::new();
    match broker {
        Some((name, own)) => {
            if let Some(v) = broker_identity(key, name) {
                synonyms.push(ConfigSynonym {
                    name: key.name.into(),
                    value: Some(v),
                    source: ConfigSource::StaticBroker,
                });
            }
            for s in key.synonyms {
                if let Some(v) = own.and_then(|m| m.get(s.name)) {
                    synonyms.push(ConfigSynonym {
                        name: s.name.into(),
                        value: Some(owned(v)),
                        source: ConfigSource::DynamicBroker,
                    });
                }
            }
            broker_layer_synonyms(layers, key.synonyms, &mut synonyms);
        }
        None => {
            for s in key.synonyms {
                if let Some(v) = layers.dynamic_default(s.name) {
                    synonyms.push(ConfigSynonym {
                        name: s.name.into(),
                        value: Some(owned(v)),
                        source: ConfigSource::DynamicDefaultBroker,
                    });
                }
            }
        }
    }
    from_own_name(&mut synonyms, 0, key.name);
    // The key's own value is the first entry under its own name, which leads the list now.
    let value = synonyms.first().and_then(|s| s.value.clone());
    finish(key, value, key.read_only(), synonyms, opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::Leases;

    proptest::proptest! {
        /// A broker resource names an id exactly as the id prints: what parsing the name and
        /// printing it back decides, decided without printing.
        #[test]
        fn broker_ids_are_names_that_print_back(name in "[-+ 0-9]{0,3}[0-9]{0,9}|[0-9]{10,11}") {
            let printed_back = name
                .parse::<corum_types::NodeId>()
                .is_ok_and(|id| id.to_string() == name);
            proptest::prop_assert_eq!(is_broker_id(&name), printed_back, "{:?}", name);
        }
    }

    fn broker(name: &str) -> ConfigResource {
        ConfigResource {
            resource_type: ConfigResourceType::Broker,
            name: name.to_owned(),
        }
    }

    fn add_topic(image: &mut MetadataImage, name: &str) {
        image
            .topics
            .replay_topic(
                corum_types::LogOffset(0),
                crate::TopicId(corum_types::Uuid([7; 16])),
                name,
                false,
            )
            .expect("a new topic");
    }

    fn image_with(sets: &[(ConfigResource, &str, &str)]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for (r, k, v) in sets {
            image.configs.replay(r.resource_type, &r.name, k, Some(v));
        }
        image
    }

    fn describe(
        image: &MetadataImage,
        resource: ConfigResource,
        names: &[&str],
    ) -> Vec<DescribedConfig> {
        let req = DescribeConfigsRequest {
            resources: vec![DescribeConfigsResource {
                resource,
                names: (!names.is_empty()).then(|| names.iter().map(|n| n.to_string()).collect()),
            }],
            include_synonyms: true,
            include_documentation: true,
        };
        let mut resp = describe_configs(image, &ControllerConfig::default(), &req);
        resp.resources
            .pop()
            .expect("one result")
            .1
            .expect("described")
    }

    fn synonym(name: &'static str, value: &'static str, source: ConfigSource) -> ConfigSynonym {
        ConfigSynonym {
            name: name.into(),
            value: Some(value.into()),
            source,
        }
    }

    /// The cluster default of a synonym shows through a broker's describe with its source, and
    /// a broker's own value wins over it; unset keys come from Kafka's defaults.
    #[test]
    fn broker_keys_layer_per_broker_over_cluster_default_over_static() {
        let image = image_with(&[
            (broker(""), "log.retention.ms", "100"),
            (broker("1"), "num.io.threads", "16"),
            (broker(""), "num.io.threads", "12"),
        ]);
        let d = describe(
            &image,
            broker("1"),
            &[
                "log.retention.ms",
                "log.retention.hours",
                "num.io.threads",
                "node.id",
            ],
        );
        let by_name = |n: &str| d.iter().find(|c| c.name == n).expect("described").clone();
        let ms = by_name("log.retention.ms");
        assert_eq!(ms.value.as_deref(), Some("100"));
        assert_eq!(ms.source, ConfigSource::DynamicDefaultBroker);
        assert_eq!(
            ms.synonyms,
            vec![
                synonym(
                    "log.retention.ms",
                    "100",
                    ConfigSource::DynamicDefaultBroker
                ),
                synonym("log.retention.hours", "168", ConfigSource::Default),
            ]
        );
        let hours = by_name("log.retention.hours");
        assert_eq!(hours.value.as_deref(), Some("168"));
        assert!(hours.read_only);
        assert_eq!(
            hours.synonyms,
            vec![synonym("log.retention.hours", "168", ConfigSource::Default)]
        );
        let io = by_name("num.io.threads");
        assert_eq!(io.value.as_deref(), Some("16"));
        assert_eq!(io.source, ConfigSource::DynamicBroker);
        assert_eq!(io.synonyms.len(), 3);
        assert_eq!(by_name("node.id").value.as_deref(), Some("1"));
        assert_eq!(by_name("node.id").source, ConfigSource::StaticBroker);
        assert_eq!(d.len(), 4);
        assert!(d.iter().all(|c| c.documentation.is_some()));
    }

    /// A broker default set dynamically shows through a topic's synonym chain (converted from
    /// the broker key's unit where it has one), and the topic's own value wins over it.
    #[test]
    fn topic_keys_inherit_through_their_synonym_chain() {
        let image = image_with(&[(broker(""), "log.retention.ms", "3600000")]);
        let mut image = image;
        add_topic(&mut image, "t");
        let d = describe(
            &image,
            ConfigResource::topic("t"),
            &["retention.ms", "segment.ms"],
        );
        assert_eq!(d[0].name, "retention.ms");
        assert_eq!(d[0].value.as_deref(), Some("3600000"));
        assert_eq!(d[0].source, ConfigSource::DynamicDefaultBroker);
        assert_eq!(
            d[0].synonyms,
            vec![
                synonym(
                    "log.retention.ms",
                    "3600000",
                    ConfigSource::DynamicDefaultBroker
                ),
                synonym("log.retention.hours", "168", ConfigSource::Default),
            ]
        );
        // segment.ms: nothing set; log.roll.hours' default (168 hours) in milliseconds, and
        // Kafka's listing starts at log.roll.ms, which has no value, so no synonyms.
        assert_eq!(d[1].value.as_deref(), Some("604800000"));
        assert_eq!(d[1].source, ConfigSource::Default);
        assert!(d[1].synonyms.is_empty());

        image
            .configs
            .replay(ConfigResourceType::Topic, "t", "retention.ms", Some("5"));
        let d = describe(&image, ConfigResource::topic("t"), &["retention.ms"]);
        assert_eq!(d[0].value.as_deref(), Some("5"));
        assert_eq!(d[0].source, ConfigSource::DynamicTopic);
        assert_eq!(
            d[0].synonyms[0],
            synonym("retention.ms", "5", ConfigSource::DynamicTopic)
        );
        assert_eq!(d[0].synonyms.len(), 3);
    }

    /// A static broker setting the controller knows (num.partitions) is reported as such when
    /// it differs from Kafka's default; the cluster default lists only what is set on it.
    #[test]
    fn static_and_cluster_default_describes() {
        let config = ControllerConfig {
            default_partitions: 3,
            ..Default::default()
        };
        let image = image_with(&[(broker(""), "min.insync.replicas", "2")]);
        let req = DescribeConfigsRequest::all([broker("4"), broker("")]);
        let resp = describe_configs(&image, &config, &req);
        let b4 = resp.resources[0].1.as_ref().expect("broker 4");
        assert_eq!(b4.len(), config_schema::BROKER_KEYS.len());
        let np = b4.iter().find(|c| c.name == "num.partitions").expect("key");
        assert_eq!(
            (np.value.as_deref(), np.source),
            (Some("3"), ConfigSource::StaticBroker)
        );
        assert!(np.synonyms.is_empty() && np.documentation.is_none());
        let rf = b4
            .iter()
            .find(|c| c.name == "default.replication.factor")
            .expect("key");
        assert_eq!(rf.source, ConfigSource::Default);
        let cluster = resp.resources[1].1.as_ref().expect("cluster default");
        assert_eq!(cluster.len(), 1);
        assert_eq!(cluster[0].name, "min.insync.replicas");
        assert_eq!(cluster[0].source, ConfigSource::DynamicDefaultBroker);
    }

    /// A sensitive key's value is hidden everywhere, synonyms included.
    #[test]
    fn sensitive_values_are_hidden() {
        let image = image_with(&[(broker("2"), "ssl.key.password", "hunter2")]);
        let d = describe(&image, broker("2"), &["ssl.key.password"]);
        assert_eq!(d.len(), 1);
        assert!(d[0].sensitive);
        assert_eq!(d[0].value, None);
        assert_eq!(d[0].source, ConfigSource::DynamicBroker);
        assert_eq!(d[0].synonyms[0].value, None);
        assert_eq!(d[0].config_type, ConfigType::Password);
    }

    proptest::proptest! {
        /// New topics' described configs, kept by [`NewTopicConfigs`], are what describing
        /// them afresh gives, through any sequence of cluster-default changes (set and
        /// deleted) and topics with settings of their own.
        #[test]
        fn new_topic_configs_match_a_fresh_describe(
            steps in proptest::collection::vec(
                (
                    proptest::option::of((0..6usize, proptest::option::of(0..6usize))),
                    proptest::collection::vec((0..33usize, 0..6usize), 0..4),
                ),
                1..12,
            )
        ) {
            const DEFAULTS: [&str; 6] = [
                "log.retention.ms",
                "log.retention.hours",
                "log.cleanup.policy",
                "min.insync.replicas",
                "compression.type",
                "log.segment.bytes",
            ];
            const VALUES: [&str; 6] = ["1", "24", "3600000", "delete", "compact", "zstd"];
            let config = ControllerConfig::default();
            let mut image = MetadataImage::default();
            let mut cache = NewTopicConfigs::default();
            for (change, own) in steps {
                if let Some((key, value)) = change {
                    image.configs.replay(
                        ConfigResourceType::Broker,
                        CLUSTER_DEFAULT,
                        DEFAULTS[key],
                        value.map(|v| VALUES[v]),
                    );
                }
                let own: Vec<(String, String)> = own
                    .iter()
                    .map(|&(k, v)| {
                        let key = &config_schema::TOPIC_KEYS[k % config_schema::TOPIC_KEYS.len()];
                        (key.name.to_owned(), VALUES[v].to_owned())
                    })
                    .collect();
                let described = cache.describe(&image, &config, &own);
                let fresh = describe_new_topic(&image, &config, &own, false);
                proptest::prop_assert_eq!(described.as_slice(), fresh.as_slice());
                // A topic without settings of its own gets the shared list itself.
                if own.is_empty() {
                    let again = cache.describe(&image, &config, &[]);
                    proptest::prop_assert!(Arc::ptr_eq(&described, &again));
                }
            }
        }
    }

    /// Every topic key is described, each with a value (its default here) and DEFAULT_CONFIG.
    #[test]
    fn every_topic_key_is_described_with_its_default() {
        let mut image = MetadataImage::default();
        add_topic(&mut image, "t");
        let d = describe(&image, ConfigResource::topic("t"), &[]);
        assert_eq!(d.len(), config_schema::TOPIC_KEYS.len());
        for (c, k) in d.iter().zip(config_schema::TOPIC_KEYS) {
            assert_eq!(c.name, k.name);
            assert_eq!(c.value.as_deref(), k.default.value(), "{}", k.name);
            assert_eq!(c.source, ConfigSource::Default, "{}", k.name);
            assert!(!c.read_only);
        }
    }

    fn view<'a>(
        image: &'a MetadataImage,
        config: &'a ControllerConfig,
        leases: &'a Leases,
    ) -> View<'a> {
        View {
            config,
            image,
            committed: image,
            leases,
        }
    }

    fn set(
        resource: ConfigResource,
        key: &str,
        op: AlterConfigOp,
        value: &str,
    ) -> AlterConfigsResource {
        AlterConfigsResource {
            resource,
            configs: vec![AlterableConfig {
                key: key.into(),
                op,
                value: value.into(),
            }],
        }
    }

    fn alter(
        image: &MetadataImage,
        r: AlterConfigsResource,
    ) -> (Vec<MetadataRecord>, Result<(), ApiError>) {
        let (config, leases) = (ControllerConfig::default(), Leases::default());
        let mut res = incremental_alter_configs(
            view(image, &config, &leases),
            &IncrementalAlterConfigsRequest {
                resources: vec![r],
                validate_only: false,
            },
        );
        (res.records, res.response.resources.pop().expect("one").1)
    }

    /// Read-only keys and per-broker keys on the cluster default are refused as bad requests;
    /// unknown keys and bad values as bad configs naming the key.
    #[test]
    fn alter_refusals_use_kafkas_errors() {
        let image = MetadataImage::default();
        let (r, e) = alter(
            &image,
            set(broker("1"), "log.dirs", AlterConfigOp::Set, "/x"),
        );
        assert!(r.is_empty());
        assert!(
            matches!(e, Err(ApiError::InvalidRequest { reason }) if reason.contains("read-only"))
        );
        let (_, e) = alter(
            &image,
            set(
                broker(""),
                "listeners",
                AlterConfigOp::Set,
                "PLAINTEXT://:1",
            ),
        );
        assert!(
            matches!(e, Err(ApiError::InvalidRequest { reason }) if reason.contains("one broker only"))
        );
        let (r, e) = alter(
            &image,
            set(
                broker("1"),
                "listeners",
                AlterConfigOp::Set,
                "PLAINTEXT://:1",
            ),
        );
        assert_eq!((r.len(), e), (1, Ok(())));
        let (_, e) = alter(&image, set(broker(""), "no.such", AlterConfigOp::Set, "1"));
        assert_eq!(
            e,
            Err(ApiError::InvalidConfig {
                key: "no.such".into(),
                reason: "Unknown broker config name: no.such".into()
            })
        );
        let (_, e) = alter(
            &image,
            set(broker(""), "log.retention.ms", AlterConfigOp::Set, "-2"),
        );
        assert_eq!(
            e,
            Err(ApiError::InvalidConfig {
                key: "log.retention.ms".into(),
                reason: "Invalid value -2 for configuration log.retention.ms: the value must be at least -1".into()
            })
        );
        // Deleting a read-only key that somehow got set is allowed (Kafka allows it too).
        let image = image_with(&[(broker("1"), "log.dirs", "/x")]);
        let (r, e) = alter(
            &image,
            set(broker("1"), "log.dirs", AlterConfigOp::Delete, ""),
        );
        assert_eq!((r.len(), e), (1, Ok(())));
    }

    /// APPEND and SUBTRACT apply to LIST keys only and start from the effective value, inherited
    /// from the cluster default when the topic has none.
    #[test]
    fn append_and_subtract_on_lists() {
        let mut image = image_with(&[(broker(""), "log.cleanup.policy", "compact")]);
        add_topic(&mut image, "t");
        let (r, e) = alter(
            &image,
            set(
                ConfigResource::topic("t"),
                "cleanup.policy",
                AlterConfigOp::Append,
                "delete",
            ),
        );
        assert_eq!(e, Ok(()));
        assert_eq!(
            r,
            vec![config_record(
                &ConfigResource::topic("t"),
                "cleanup.policy",
                Some("compact,delete".into())
            )]
        );
        let (r, e) = alter(
            &image,
            set(
                ConfigResource::topic("t"),
                "cleanup.policy",
                AlterConfigOp::Subtract,
                "compact",
            ),
        );
        assert_eq!(e, Ok(()));
        assert_eq!(
            r,
            vec![config_record(
                &ConfigResource::topic("t"),
                "cleanup.policy",
                Some(String::new())
            )]
        );
        let (_, e) = alter(
            &image,
            set(
                ConfigResource::topic("t"),
                "cleanup.policy",
                AlterConfigOp::Append,
                "bogus",
            ),
        );
        assert!(matches!(e, Err(ApiError::InvalidConfig { key, .. }) if key == "cleanup.policy"));
        let (_, e) = alter(
            &image,
            set(
                ConfigResource::topic("t"),
                "retention.ms",
                AlterConfigOp::Append,
                "5",
            ),
        );
        assert!(
            matches!(e, Err(ApiError::InvalidConfig { reason, .. }) if reason.contains("LIST"))
        );
    }

    /// The rule between the compaction lags holds on the merged result, inheritance included;
    /// tiered storage cannot be enabled.
    #[test]
    fn rules_between_keys() {
        let mut image = image_with(&[(broker(""), "log.cleaner.max.compaction.lag.ms", "1000")]);
        add_topic(&mut image, "t");
        let t = ConfigResource::topic("t");
        let (_, e) = alter(
            &image,
            set(
                t.clone(),
                "min.compaction.lag.ms",
                AlterConfigOp::Set,
                "2000",
            ),
        );
        assert!(
            matches!(e, Err(ApiError::InvalidConfig { key, .. }) if key == "min.compaction.lag.ms")
        );
        let (_, e) = alter(
            &image,
            set(
                t.clone(),
                "min.compaction.lag.ms",
                AlterConfigOp::Set,
                "500",
            ),
        );
        assert_eq!(e, Ok(()));
        let (_, e) = alter(
            &image,
            set(
                t.clone(),
                "remote.storage.enable",
                AlterConfigOp::Set,
                "true",
            ),
        );
        assert!(
            matches!(e, Err(ApiError::InvalidConfig { key, .. }) if key == "remote.storage.enable")
        );
        let (_, e) = alter(
            &image,
            set(
                broker(""),
                "log.cleaner.min.compaction.lag.ms",
                AlterConfigOp::Set,
                "5000",
            ),
        );
        assert!(matches!(e, Err(ApiError::InvalidConfig { .. })));
    }

    /// The legacy AlterConfigs replaces a resource's settings: named keys set, others deleted,
    /// with the same validation; validate_only writes nothing.
    #[test]
    fn legacy_alter_replaces_the_whole_resource() {
        let image = image_with(&[
            (broker("1"), "num.io.threads", "16"),
            (broker("1"), "background.threads", "4"),
        ]);
        let (config, leases) = (ControllerConfig::default(), Leases::default());
        let req = |validate_only, configs: Vec<(&str, Option<&str>)>| AlterConfigsRequest {
            resources: vec![ReplacedConfigs {
                resource: broker("1"),
                configs: configs
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.map(str::to_owned)))
                    .collect(),
            }],
            validate_only,
        };
        let res = alter_configs(
            view(&image, &config, &leases),
            &req(
                false,
                vec![
                    ("num.io.threads", Some("16")),
                    ("num.network.threads", Some("5")),
                ],
            ),
        );
        assert_eq!(res.response.resources[0].1, Ok(()));
        assert_eq!(
            res.records,
            vec![
                config_record(&broker("1"), "num.network.threads", Some("5".into())),
                config_record(&broker("1"), "background.threads", None),
            ]
        );
        let res = alter_configs(
            view(&image, &config, &leases),
            &req(true, vec![("num.network.threads", Some("5"))]),
        );
        assert_eq!(res.response.resources[0].1, Ok(()));
        assert!(res.records.is_empty());
        let res = alter_configs(
            view(&image, &config, &leases),
            &req(false, vec![("num.network.threads", Some("0"))]),
        );
        assert!(matches!(
            res.response.resources[0].1,
            Err(ApiError::InvalidConfig { .. })
        ));
        assert!(res.records.is_empty());
    }

    /// A dynamic cluster default of num.partitions / default.replication.factor (only a log
    /// written elsewhere can hold one: Kafka makes both read-only) wins over the static config.
    #[test]
    fn creation_defaults_prefer_a_dynamic_cluster_default() {
        let config = ControllerConfig::default();
        let image = MetadataImage::default();
        assert_eq!(default_num_partitions(&image, &config), 1);
        assert_eq!(default_replication_factor(&image, &config), 1);
        let image = image_with(&[
            (broker(""), "num.partitions", "6"),
            (broker(""), "default.replication.factor", "0"),
        ]);
        assert_eq!(default_num_partitions(&image, &config), 6);
        assert_eq!(default_replication_factor(&image, &config), 1);
    }

    /// The broker-logger answer is a bad request that says why.
    #[test]
    fn broker_loggers_are_refused_with_a_reason() {
        assert!(
            matches!(broker_logger_refusal(), ApiError::InvalidRequest { reason } if reason.contains("RUST_LOG"))
        );
    }
}
