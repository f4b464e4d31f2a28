//! The node configuration: Kafka's properties format, Kafka's key names where one exists, and
//! `corum.`-prefixed keys for what only corum has (core placement, pipelining limits, metrics).
//!
//! | module             | concept                                                                   |
//! |--------------------|---------------------------------------------------------------------------|
//! | [`properties`]     | the properties text format (parser and escaping); knows no keys            |
//! | [`values`]         | the typed values of keys: [`HostPort`], [`Listener`], [`QuorumVoter`], [`CoreSet`], [`ProcessRole`] |
//! | [`keys`]           | the key table [`CONFIG_KEYS`]: name, type and range, default, doc, readers |
//! | [`node_config`]    | [`NodeConfig`], every value typed, and the rules between values            |
//! | [`load`]           | a [`NodeConfig`] from the table's defaults, a file and `--set` overrides, and back |
//! | [`ssl`]            | the TLS keys (`ssl.*`, `listener.name.<listener>.ssl.*`) and a listener's [`corum_runtime::TlsSettings`] |
//! | [`sasl`]           | the SASL keys of a Kafka listener (`sasl.enabled.mechanisms`, JAAS, `connections.max.reauth.ms`) and its [`corum_kafka::sasl::SaslConfig`] |
//! | [`components`]     | every component's configuration derived from a [`NodeConfig`]              |
//!
//! # Sources and precedence
//!
//! A [`NodeConfig`] is built by [`NodeConfig::load`] from an optional properties file and a list
//! of `--set key=value` overrides: built-in default < file < override. A key given twice in the
//! file is an error (one of the two lines is a mistake); an override may repeat a file key (that
//! is what it is for), and a later override wins over an earlier one.
//!
//! # One source of defaults
//!
//! [`CONFIG_KEYS`] is the one table of every key: its type and range, default (or "required"),
//! doc string, which components read it, and how to parse and print it. Everything else
//! (defaults, required-key checks, unknown-key errors with a suggestion, `--help-config`,
//! rendering back to properties) is driven from it. Component configurations have no defaults
//! of their own: [`components`] derives each from a [`NodeConfig`], and tests start from
//! [`NodeConfig::for_tests`] (the table's defaults). Relations between keys are checked by
//! [`NodeConfig::validate`]; errors are [`crate::error::ConfigError`], naming the key with a
//! typed reason.
//!
//! # Layering
//!
//! Everything here but [`components`] imports nothing of this crate but its errors;
//! [`components`] sits above the components it configures, none of which imports this module.

pub mod components;
pub mod keys;
pub mod load;
pub mod node_config;
pub mod properties;
pub mod sasl;
pub mod ssl;
pub mod values;

pub use keys::{config_key, help_text, ConfigKey, Reader, ValueType, CONFIG_KEYS};
pub use node_config::{NodeConfig, NODE_SHARDS_MAX};
pub use properties::{escape_value, parse_properties, PropertyEntry};
pub use values::{
    parse_voters, CoreSet, HostPort, Listener, ProcessRole, QuorumVoter, SecurityProtocol,
};
