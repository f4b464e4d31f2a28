//! `corum configs describe|alter`: dynamic configs of topics and brokers, in the shape of
//! Kafka's `kafka-configs`.
//!
//! | command | request | prints |
//! |---|---|---|
//! | `describe --entity-type topics\|brokers [--entity-name X \| --entity-default] [--all]` | DescribeConfigs (of every topic or registered broker when none is named) | per entity: `key=value source=...` lines |
//! | `alter --entity-type topics\|brokers (--entity-name X \| --entity-default) [--add-config K=V[,K=V]] [--delete-config K[,K]]` | IncrementalAlterConfigs: SET each added key, DELETE each deleted one | that the entity was updated |
//!
//! The entity: a topic by name, a broker by id, or with `--entity-default` the cluster-wide
//! default of every broker (brokers only). Without `--all`, describe shows only the values set
//! on the entity itself, as `kafka-configs --describe` does (source `DYNAMIC_TOPIC_CONFIG` for
//! a topic, `DYNAMIC_BROKER_CONFIG` for a broker, `DYNAMIC_DEFAULT_BROKER_CONFIG` for the
//! default); with `--all`, every key with its effective value and where it comes from.
//!
//! `--add-config` takes `kafka-configs`' syntax: `k1=v1,k2=[a,b],k3=v3`, square brackets
//! grouping a value that holds commas (a list). One alter is one request: the controller
//! validates every key and value (unknown keys and bad values are Kafka's INVALID_CONFIG) and
//! applies all of them or none.
//!
//! The request and answer types of this file are the only ones that follow the controller's
//! config types: [`describe_request`] and [`entry`] are where a change of them lands.

use std::fmt::Write as _;

use corum_client::{ControllerClient, RequestBody, ResponseBody};
use corum_controller::control::config_control::{
    AlterConfigOp, AlterConfigsResource, AlterableConfig, ConfigSource, DescribeConfigsRequest,
    DescribeConfigsResponse, DescribedConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use corum_controller::image::ConfigResource;
use corum_controller::records::ConfigResourceType;
use serde::Serialize;

use crate::cmd::admin::{call, finish, to_json, with_client, ConnectArgs, ItemError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Show the configs of topics or brokers (DescribeConfigs).
    Describe(DescribeArgs),
    /// Set and delete configs of one topic, broker or the brokers' default
    /// (IncrementalAlterConfigs).
    Alter(AlterArgs),
}

/// `--entity-type`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntityType {
    /// A topic, by name.
    Topics,
    /// A broker, by id (or the cluster-wide default with --entity-default).
    Brokers,
}

#[derive(clap::Args, Debug, Clone)]
pub struct EntityArgs {
    /// What kind of entity.
    #[arg(long, value_enum)]
    pub entity_type: EntityType,
    /// The topic's name or the broker's id.
    #[arg(long, conflicts_with = "entity_default")]
    pub entity_name: Option<String>,
    /// The cluster-wide default of every broker (brokers only).
    #[arg(long)]
    pub entity_default: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct DescribeArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
    #[command(flatten)]
    pub entity: EntityArgs,
    /// Every key with its effective value and source, not only the entity's own values.
    #[arg(long)]
    pub all: bool,
}

#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("changes").required(true).multiple(true).args(["add_config", "delete_config"])))]
pub struct AlterArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
    #[command(flatten)]
    pub entity: EntityArgs,
    /// Keys to set: `K=V[,K=V]`, a value holding commas in square brackets (`k=[a,b]`).
    #[arg(long, value_name = "K=V,...", value_parser = parse_add_config)]
    pub add_config: Vec<Vec<(String, String)>>,
    /// Keys to delete (back to the inherited value): `K[,K]`.
    #[arg(long, value_name = "K,...", value_parser = parse_delete_config)]
    pub delete_config: Vec<Vec<String>>,
}

/// Parses `--add-config`: `k=v` pairs separated by commas outside square brackets; a value
/// in brackets loses them (`k=[a,b]` sets `a,b`).
pub fn parse_add_config(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0u32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("{s:?}: ']' without '['"))?
            }
            ',' if depth == 0 => {
                items.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("{s:?}: '[' without ']'"));
    }
    items.push(&s[start..]);
    items
        .into_iter()
        .map(|item| {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?} is not K=V (in {s:?})"))?;
            let k = k.trim();
            if k.is_empty() {
                return Err(format!("{item:?} names no key (in {s:?})"));
            }
            let v = v.trim();
            let v = v
                .strip_prefix('[')
                .and_then(|v| v.strip_suffix(']'))
                .unwrap_or(v);
            Ok((k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// Parses `--delete-config`: keys separated by commas.
pub fn parse_delete_config(s: &str) -> Result<Vec<String>, String> {
    s.split(',')
        .map(|k| match k.trim() {
            "" => Err(format!("{s:?} holds an empty key")),
            k => Ok(k.to_owned()),
        })
        .collect()
}

/// The resource `e` names: `None` for "every entity of the type" (describe only).
pub fn named_resource(e: &EntityArgs) -> anyhow::Result<Option<ConfigResource>> {
    match (e.entity_type, &e.entity_name, e.entity_default) {
        (EntityType::Topics, _, true) => {
            anyhow::bail!(
                "--entity-default applies to brokers only (topics have no default entity)"
            )
        }
        (EntityType::Topics, Some(name), false) => Ok(Some(ConfigResource::topic(name))),
        (EntityType::Brokers, Some(name), false) => Ok(Some(broker(name))),
        (EntityType::Brokers, None, true) => Ok(Some(broker(""))),
        (_, None, false) => Ok(None),
        (_, Some(_), true) => unreachable!("clap refuses --entity-name with --entity-default"),
    }
}

fn broker(name: &str) -> ConfigResource {
    ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: name.to_owned(),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::Describe(a) => {
            let named = named_resource(&a.entity)?;
            let entity_type = a.entity.entity_type;
            let r = with_client(&a.conn, |client| async move {
                let resources = match named {
                    Some(r) => vec![r],
                    None => every_entity(&client, entity_type).await?,
                };
                if resources.is_empty() {
                    return Ok(DescribeConfigsResponse { resources: vec![] });
                }
                call(
                    &client,
                    RequestBody::DescribeConfigs(describe_request(resources)),
                    |r| match r {
                        ResponseBody::DescribeConfigs(r) => Ok(r),
                        other => Err(other),
                    },
                )
                .await
            })?;
            finish(render_described(&r, a.all), a.conn.json)
        }
        What::Alter(a) => {
            let resource = named_resource(&a.entity)?.ok_or_else(|| {
                anyhow::anyhow!("name the entity: --entity-name (or --entity-default for brokers)")
            })?;
            let req = alter_request(resource, &a);
            let r = with_client(&a.conn, |client| async move {
                call(
                    &client,
                    RequestBody::IncrementalAlterConfigs(req),
                    |r| match r {
                        ResponseBody::IncrementalAlterConfigs(r) => Ok(r),
                        other => Err(other),
                    },
                )
                .await
            })?;
            finish(render_altered(&r), a.conn.json)
        }
    }
}

/// Every topic (DescribeTopics) or every registered broker (DescribeCluster), as resources.
async fn every_entity(
    client: &ControllerClient,
    entity_type: EntityType,
) -> anyhow::Result<Vec<ConfigResource>> {
    Ok(match entity_type {
        EntityType::Topics => crate::cmd::topics::describe(client, None)
            .await?
            .topics
            .into_iter()
            .filter_map(|(_, t)| t.ok())
            .map(|t| ConfigResource::topic(&t.name))
            .collect(),
        EntityType::Brokers => {
            let mut ids: Vec<_> = call(client, RequestBody::DescribeCluster, |r| match r {
                ResponseBody::DescribeCluster(r) => Ok(r),
                other => Err(other),
            })
            .await?
            .brokers
            .into_iter()
            .map(|b| b.broker_id)
            .collect();
            ids.sort();
            ids.into_iter().map(|id| broker(&id.to_string())).collect()
        }
    })
}

/// The DescribeConfigs request for `resources` (every key of each).
pub fn describe_request(resources: Vec<ConfigResource>) -> DescribeConfigsRequest {
    DescribeConfigsRequest::all(resources)
}

/// The IncrementalAlterConfigs request of `a` on `resource`: SET per added key, DELETE per
/// deleted key, in the order given.
pub fn alter_request(resource: ConfigResource, a: &AlterArgs) -> IncrementalAlterConfigsRequest {
    let set = a.add_config.iter().flatten().map(|(k, v)| AlterableConfig {
        key: k.clone(),
        op: AlterConfigOp::Set,
        value: v.clone(),
    });
    let delete = a.delete_config.iter().flatten().map(|k| AlterableConfig {
        key: k.clone(),
        op: AlterConfigOp::Delete,
        value: String::new(),
    });
    IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource,
            configs: set.chain(delete).collect(),
        }],
        validate_only: false,
    }
}

/// One described key as this command prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigEntry {
    pub name: String,
    /// `None` when the controller hides the value (sensitive) or there is none.
    pub value: Option<String>,
    /// Kafka's name of the source (`DYNAMIC_TOPIC_CONFIG`, ..., `DEFAULT_CONFIG`).
    pub source: &'static str,
    /// Kafka's type name (`LONG`, `STRING`, `LIST`, ...).
    pub config_type: &'static str,
    pub read_only: bool,
    pub sensitive: bool,
}

/// A described config as printed.
pub fn entry(c: &DescribedConfig) -> ConfigEntry {
    ConfigEntry {
        name: c.name.to_string(),
        value: c.value.as_deref().map(str::to_owned),
        source: source_name(c.source),
        config_type: c.config_type.name(),
        read_only: c.read_only,
        sensitive: c.sensitive,
    }
}

/// Kafka's name of a config source (its `ConfigEntry.ConfigSource`).
pub fn source_name(s: ConfigSource) -> &'static str {
    match s {
        ConfigSource::DynamicTopic => "DYNAMIC_TOPIC_CONFIG",
        ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
        ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
        ConfigSource::Default => "DEFAULT_CONFIG",
    }
}

/// The source of the values set on `r` itself: what describe shows without `--all`.
fn own_source(r: &ConfigResource) -> &'static str {
    match r.resource_type {
        ConfigResourceType::Topic => "DYNAMIC_TOPIC_CONFIG",
        ConfigResourceType::Broker if r.name.is_empty() => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        ConfigResourceType::Broker => "DYNAMIC_BROKER_CONFIG",
    }
}

/// How an entity is named in text.
fn entity(r: &ConfigResource) -> String {
    match r.resource_type {
        ConfigResourceType::Topic => format!("topic {}", r.name),
        ConfigResourceType::Broker if r.name.is_empty() => {
            "the cluster-wide default of brokers".to_owned()
        }
        ConfigResourceType::Broker => format!("broker {}", r.name),
    }
}

#[derive(Serialize)]
struct ResourceJson {
    entity_type: &'static str,
    /// `None` for the brokers' default.
    entity_name: Option<String>,
    configs: Vec<ConfigEntry>,
    error: Option<ItemError>,
}

fn resource_json(
    r: &ConfigResource,
    configs: Vec<ConfigEntry>,
    error: Option<ItemError>,
) -> ResourceJson {
    ResourceJson {
        entity_type: match r.resource_type {
            ConfigResourceType::Topic => "topics",
            ConfigResourceType::Broker => "brokers",
        },
        entity_name: (!r.name.is_empty()).then(|| r.name.clone()),
        configs,
        error,
    }
}

/// The outcome of a DescribeConfigs answer: per entity a header, then `key=value source=...`
/// lines (only the entity's own values unless `all`).
pub fn render_described(r: &DescribeConfigsResponse, all: bool) -> Outcome {
    let mut out = Outcome::default();
    let mut rows = Vec::new();
    for (resource, result) in &r.resources {
        match result {
            Ok(configs) => {
                let own = own_source(resource);
                let shown: Vec<ConfigEntry> = configs
                    .iter()
                    .map(entry)
                    .filter(|e| all || e.source == own)
                    .collect();
                let which = if all { "All" } else { "Dynamic" };
                let _ = writeln!(out.text, "{which} configs for {} are:", entity(resource));
                for e in &shown {
                    let _ = writeln!(
                        out.text,
                        "  {}={} source={}",
                        e.name,
                        e.value.as_deref().unwrap_or("(hidden)"),
                        e.source
                    );
                }
                rows.push(resource_json(resource, shown, None));
            }
            Err(e) => {
                let e = ItemError::api(e);
                out.failures.push((entity(resource), e.clone()));
                rows.push(resource_json(resource, Vec::new(), Some(e)));
            }
        }
    }
    out.json = serde_json::json!({ "all": all, "resources": to_json(&rows) });
    out
}

/// The outcome of an IncrementalAlterConfigs answer.
pub fn render_altered(r: &IncrementalAlterConfigsResponse) -> Outcome {
    let mut out = Outcome::default();
    let mut rows = Vec::new();
    for (resource, result) in &r.resources {
        let error = match result {
            Ok(()) => {
                let _ = writeln!(
                    out.text,
                    "Completed updating config for {}.",
                    entity(resource)
                );
                None
            }
            Err(e) => {
                let e = ItemError::api(e);
                out.failures.push((entity(resource), e.clone()));
                Some(e)
            }
        };
        rows.push(resource_json(resource, Vec::new(), error));
    }
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "entity_type": r.entity_type,
                "entity_name": r.entity_name,
                "error": r.error,
            })
        })
        .collect();
    out.json = serde_json::json!({ "resources": rows });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use corum_controller::ApiError;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        what: What,
    }

    fn parse(args: &[&str]) -> Result<What, clap::Error> {
        let mut v = vec!["configs", args[0], "--bootstrap", "127.0.0.1:9"];
        v.extend_from_slice(&args[1..]);
        Cli::try_parse_from(v).map(|c| c.what)
    }

    /// `--add-config` splits at commas outside brackets and strips a bracketed value's
    /// brackets; unbalanced brackets, a missing `=` and an empty key are refused.
    #[test]
    fn add_config_syntax() {
        assert_eq!(
            parse_add_config("a=1,b=[x,y],c=z=w").unwrap(),
            [
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "x,y".to_owned()),
                ("c".to_owned(), "z=w".to_owned())
            ]
        );
        assert_eq!(
            parse_add_config("a=").unwrap(),
            [("a".to_owned(), String::new())]
        );
        assert!(parse_add_config("a=[x,y").is_err());
        assert!(parse_add_config("a=x]").is_err());
        assert!(parse_add_config("a=1,b").is_err());
        assert!(parse_add_config("=1").is_err());
        assert!(parse_add_config("a=1,").is_err());
        assert_eq!(parse_delete_config("a, b").unwrap(), ["a", "b"]);
        assert!(parse_delete_config("a,,b").is_err());
    }

    /// The entity: a topic or broker by name, the brokers' default, or every entity of the
    /// type (describe); topics have no default; alter needs a change.
    #[test]
    fn entities() {
        let What::Describe(a) = parse(&["describe", "--entity-type", "topics"]).unwrap() else {
            panic!("not describe")
        };
        assert_eq!(named_resource(&a.entity).unwrap(), None);
        let What::Describe(a) = parse(&[
            "describe",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--all",
        ])
        .unwrap() else {
            panic!("not describe")
        };
        assert!(a.all);
        assert_eq!(named_resource(&a.entity).unwrap(), Some(broker("")));
        let What::Describe(a) =
            parse(&["describe", "--entity-type", "topics", "--entity-default"]).unwrap()
        else {
            panic!("not describe")
        };
        assert!(named_resource(&a.entity).is_err());
        assert!(parse(&[
            "describe",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--entity-name",
            "1"
        ])
        .is_err());
        assert!(parse(&["alter", "--entity-type", "topics", "--entity-name", "t"]).is_err());
        assert!(parse(&["describe", "--entity-type", "users"]).is_err());
    }

    /// Alter sends SET for each added key and DELETE for each deleted one, in order.
    #[test]
    fn alter_request_from_arguments() {
        let What::Alter(a) = parse(&[
            "alter",
            "--entity-type",
            "topics",
            "--entity-name",
            "t",
            "--add-config",
            "retention.ms=5,cleanup.policy=[compact,delete]",
            "--delete-config",
            "segment.bytes",
        ])
        .unwrap() else {
            panic!("not alter")
        };
        let resource = named_resource(&a.entity).unwrap().unwrap();
        assert_eq!(resource, ConfigResource::topic("t"));
        let r = alter_request(resource, &a);
        assert!(!r.validate_only);
        let c: Vec<(&str, AlterConfigOp, &str)> = r.resources[0]
            .configs
            .iter()
            .map(|c| (c.key.as_str(), c.op, c.value.as_str()))
            .collect();
        assert_eq!(
            c,
            [
                ("retention.ms", AlterConfigOp::Set, "5"),
                ("cleanup.policy", AlterConfigOp::Set, "compact,delete"),
                ("segment.bytes", AlterConfigOp::Delete, "")
            ]
        );
    }

    fn described(key: &'static str, value: &str, source: ConfigSource) -> DescribedConfig {
        DescribedConfig {
            name: key.into(),
            value: Some(value.to_owned().into()),
            read_only: false,
            source,
            sensitive: false,
            synonyms: Vec::new(),
            config_type: corum_controller::config_schema::ConfigType::String,
            documentation: None,
        }
    }

    /// Without --all only the entity's own values are shown; with it every key; a failed
    /// resource is a failure with Kafka's name.
    #[test]
    fn described_configs() {
        let r = DescribeConfigsResponse {
            resources: vec![
                (
                    ConfigResource::topic("t"),
                    Ok(vec![
                        described("retention.ms", "5", ConfigSource::DynamicTopic),
                        described("cleanup.policy", "delete", ConfigSource::Default),
                    ]),
                ),
                (
                    broker("3"),
                    Ok(vec![
                        described("log.retention.ms", "7", ConfigSource::DynamicDefaultBroker),
                        described("num.io.threads", "9", ConfigSource::DynamicBroker),
                    ]),
                ),
                (
                    ConfigResource::topic("nope"),
                    Err(ApiError::UnknownTopic {
                        name: "nope".into(),
                    }),
                ),
            ],
        };
        let o = render_described(&r, false);
        assert_eq!(
            o.text,
            "Dynamic configs for topic t are:\n  retention.ms=5 source=DYNAMIC_TOPIC_CONFIG\n\
             Dynamic configs for broker 3 are:\n  num.io.threads=9 source=DYNAMIC_BROKER_CONFIG\n"
        );
        assert_eq!(o.failures[0].0, "topic nope");
        assert_eq!(o.failures[0].1.name, "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(o.json["resources"][0]["entity_type"], "topics");
        assert_eq!(o.json["resources"][0]["configs"][0]["name"], "retention.ms");
        assert_eq!(o.json["resources"][2]["error"]["code"], 3);

        let o = render_described(&r, true);
        assert!(
            o.text.starts_with("All configs for topic t are:\n"),
            "{}",
            o.text
        );
        assert!(o
            .text
            .contains("  cleanup.policy=delete source=DEFAULT_CONFIG\n"));
        assert!(o
            .text
            .contains("  log.retention.ms=7 source=DYNAMIC_DEFAULT_BROKER_CONFIG\n"));
        assert_eq!(
            o.json["resources"][1]["configs"][0]["source"],
            "DYNAMIC_DEFAULT_BROKER_CONFIG"
        );

        let d = DescribeConfigsResponse {
            resources: vec![(
                broker(""),
                Ok(vec![described(
                    "log.retention.ms",
                    "7",
                    ConfigSource::DynamicDefaultBroker,
                )]),
            )],
        };
        let o = render_described(&d, false);
        assert_eq!(
            o.text,
            "Dynamic configs for the cluster-wide default of brokers are:\n  \
             log.retention.ms=7 source=DYNAMIC_DEFAULT_BROKER_CONFIG\n"
        );
        assert_eq!(
            o.json["resources"][0]["entity_name"],
            serde_json::Value::Null
        );
    }

    /// An altered entity is reported; a refused one is a failure named INVALID_CONFIG.
    #[test]
    fn altered_configs() {
        let r = IncrementalAlterConfigsResponse {
            resources: vec![
                (broker(""), Ok(())),
                (
                    ConfigResource::topic("t"),
                    Err(ApiError::InvalidConfig {
                        key: "x".into(),
                        reason: "unknown config".into(),
                    }),
                ),
            ],
        };
        let o = render_altered(&r);
        assert_eq!(
            o.text,
            "Completed updating config for the cluster-wide default of brokers.\n"
        );
        assert_eq!(o.failures[0].1.name, "INVALID_CONFIG");
        assert_eq!(o.json["resources"][1]["entity_name"], "t");
        assert_eq!(o.json["resources"][1]["error"]["code"], 40);
    }
}
