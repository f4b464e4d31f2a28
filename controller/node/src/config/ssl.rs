//! The TLS keys: Kafka's `ssl.*` names (PEM stores only), each also settable for one
//! listener as `listener.name.<listener>.ssl.*` (the listener's name in any case), which wins
//! over the unprefixed key for that listener, as in Kafka. [`NodeConfig::listener_tls`]
//! resolves a listener's values into the runtime's [`TlsSettings`].
//!
//! The rows of the key table are in [`super::keys`] (defaults there); this module checks
//! values, stores the per-listener ones, and resolves them.

use corum_runtime::principal_mapping::PrincipalMapping;
use corum_runtime::tls::{ClientAuth, Keystore, TlsSettings, Truststore};

use super::load::set;
use super::node_config::NodeConfig;
use super::values::SecurityProtocol;
use super::{config_key, ConfigKey};
use crate::error::{ConfigError, ConfigSource, ValueError};

/// The prefix of a per-listener key.
pub const LISTENER_PREFIX: &str = "listener.name.";

/// `listener.name.<listener lower case>.<key>`.
pub fn listener_key(listener: &str, key: &str) -> String {
    format!("{LISTENER_PREFIX}{}.{key}", listener.to_ascii_lowercase())
}

pub(super) fn check_text(v: &str) -> Result<String, ValueError> {
    Ok(v.trim().to_owned())
}

pub(super) fn check_store_type(v: &str) -> Result<String, ValueError> {
    match v.trim().to_ascii_uppercase().as_str() {
        "PEM" => Ok("PEM".to_owned()),
        _ => Err(ValueError::Malformed {
            text: v.trim().to_owned(),
            expected: "PEM (JKS and PKCS12 stores are not supported: convert them to PEM)",
        }),
    }
}

pub(super) fn check_client_auth(v: &str) -> Result<String, ValueError> {
    v.parse::<ClientAuth>()
        .map(|a| a.to_string())
        .map_err(|_| ValueError::Malformed {
            text: v.trim().to_owned(),
            expected: "none, requested or required",
        })
}

pub(super) fn check_endpoint_identification(v: &str) -> Result<String, ValueError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "" => Ok(String::new()),
        "https" => Ok("https".to_owned()),
        _ => Err(ValueError::Malformed {
            text: v.trim().to_owned(),
            expected: "https, or empty to check the certificate chain only",
        }),
    }
}

pub(super) fn check_principal_mapping_rules(v: &str) -> Result<String, ValueError> {
    PrincipalMapping::parse(v)
        .map(|m| m.to_string())
        .map_err(|e| ValueError::PrincipalMappingRule {
            rule: e.rule,
            reason: e.reason,
        })
}

/// Sets `name` if it is a per-listener TLS key (`listener.name.<listener>.ssl.*`): checks the
/// value with the unprefixed key's rule and stores it for that listener. `Ok(false)` for any
/// other key (the caller looks it up in the table).
pub(super) fn set_listener_value(
    c: &mut NodeConfig,
    name: &str,
    value: &str,
    at: ConfigSource,
) -> Result<bool, ConfigError> {
    let Some(rest) = name.strip_prefix(LISTENER_PREFIX) else {
        return Ok(false);
    };
    let unknown = || ConfigError::UnknownKey {
        key: name.to_owned(),
        at,
        suggestion: None,
    };
    let (listener, key) = rest.split_once('.').ok_or_else(unknown)?;
    if listener.is_empty() {
        return Err(unknown());
    }
    if let Some(jaas_key) = super::sasl::JAAS_KEYS.iter().find(|k| **k == key) {
        // JAAS text: checked here so a syntax error names its line's key at once; the
        // error never quotes the value (passwords).
        super::sasl::check_jaas(jaas_key, value).map_err(|reason| ConfigError::Sasl {
            key: name.to_owned(),
            reason,
        })?;
        c.listener_ssl
            .entry(listener.to_ascii_uppercase())
            .or_default()
            .insert(jaas_key, value.to_owned());
        return Ok(true);
    }
    let key: &'static ConfigKey = config_key(key)
        .filter(|k| {
            k.name.starts_with("ssl.")
                || k.name == "sasl.enabled.mechanisms"
                || k.name == "connections.max.reauth.ms"
        })
        .ok_or_else(unknown)?;
    // The unprefixed key's rule, on a scratch copy: only the checked text is kept.
    let mut scratch = c.clone();
    set(&mut scratch, key, value, at).map_err(|e| match e {
        ConfigError::InvalidValue { value, reason, .. } => ConfigError::InvalidListenerValue {
            key: name.into(),
            value: value.into(),
            at,
            reason,
        },
        other => other,
    })?;
    let checked = scratch.ssl.remove(key.name).unwrap_or_default();
    c.listener_ssl
        .entry(listener.to_ascii_uppercase())
        .or_default()
        .insert(key.name, checked);
    Ok(true)
}

impl NodeConfig {
    /// The value of TLS key `key` for `listener` and the key it came from (the prefixed one
    /// when set, else the unprefixed one).
    pub fn ssl_value(&self, listener: &str, key: &'static str) -> (String, &str) {
        match self.listener_ssl.get(listener).and_then(|m| m.get(key)) {
            Some(v) => (listener_key(listener, key), v.as_str()),
            None => (
                key.to_owned(),
                self.ssl.get(key).map(String::as_str).unwrap_or(""),
            ),
        }
    }

    /// `listener`'s TLS settings: `None` unless it is mapped to SSL. Refuses, naming the key
    /// to change: a listener without a keystore, a keystore or truststore given both as a
    /// file and inline (or a chain without its key), client authentication without a
    /// truststore, and a controller listener without a truststore (controllers authenticate
    /// each other: its `ssl.client.auth` is always `required`). Files are not read here.
    pub fn listener_tls(&self, listener: &str) -> Result<Option<TlsSettings>, ConfigError> {
        if !matches!(
            self.security_protocol(listener),
            Some(SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
        ) {
            return Ok(None);
        }
        let bad = |key: String, reason: &str| ConfigError::Tls {
            key,
            reason: format!("listener {listener}: {reason}"),
        };
        let (loc_key, location) = self.ssl_value(listener, "ssl.keystore.location");
        let (chain_key, chain) = self.ssl_value(listener, "ssl.keystore.certificate.chain");
        let (key_key, key) = self.ssl_value(listener, "ssl.keystore.key");
        let keystore = match (location.is_empty(), chain.is_empty(), key.is_empty()) {
            (false, true, true) => Keystore::File(location.into()),
            (true, false, false) => Keystore::Inline {
                chain: chain.to_owned(),
                key: key.to_owned(),
            },
            (true, true, true) => {
                return Err(bad(
                    loc_key,
                    "an SSL listener needs a keystore (its certificate and key)",
                ))
            }
            (false, _, _) => {
                return Err(bad(
                    loc_key,
                    "give the keystore as a file or inline, not both",
                ))
            }
            (true, false, true) => {
                return Err(bad(key_key, "the inline certificate chain needs its key"))
            }
            (true, true, false) => {
                return Err(bad(chain_key, "the inline key needs its certificate chain"))
            }
        };
        let (tloc_key, tlocation) = self.ssl_value(listener, "ssl.truststore.location");
        let (_, tcerts) = self.ssl_value(listener, "ssl.truststore.certificates");
        let truststore = match (tlocation.is_empty(), tcerts.is_empty()) {
            (false, true) => Some(Truststore::File(tlocation.into())),
            (true, false) => Some(Truststore::Inline(tcerts.to_owned())),
            (true, true) => None,
            (false, false) => {
                return Err(bad(
                    tloc_key,
                    "give the truststore as a file or inline, not both",
                ))
            }
        };
        let (auth_key, auth) = self.ssl_value(listener, "ssl.client.auth");
        let mut client_auth: ClientAuth = auth.parse().unwrap_or_default();
        let controller = self.controller_listener_names.iter().any(|n| n == listener);
        if controller {
            client_auth = ClientAuth::Required;
        }
        if truststore.is_none() && client_auth != ClientAuth::None {
            let reason = if controller {
                "the controller listener authenticates the other controllers (mutual TLS): it needs a truststore"
            } else {
                "client authentication needs a truststore"
            };
            let key = if controller { tloc_key } else { auth_key };
            return Err(bad(key, reason));
        }
        let (_, algorithm) = self.ssl_value(listener, "ssl.endpoint.identification.algorithm");
        let (rules_key, rules) = self.ssl_value(listener, "ssl.principal.mapping.rules");
        // Checked when set; the default (DEFAULT) parses.
        let principal_mapping =
            PrincipalMapping::parse(rules).map_err(|e| bad(rules_key, &format!("{e}")))?;
        Ok(Some(TlsSettings {
            keystore: Some(keystore),
            truststore,
            client_auth,
            verify_hostname: algorithm == "https",
            principal_mapping,
        }))
    }

    /// Per-listener TLS keys naming no listener: refused (a typo would silently do nothing).
    pub(super) fn check_listener_ssl(&self) -> Result<(), ConfigError> {
        for (listener, values) in &self.listener_ssl {
            if !self.listeners.iter().any(|l| &l.name == listener) {
                let key = values.keys().next().copied().unwrap_or("ssl");
                return Err(ConfigError::Tls {
                    key: listener_key(listener, key),
                    reason: format!("{listener} is not one of `listeners`"),
                });
            }
        }
        Ok(())
    }
}

/// The key to change for a TLS file or value that does not load, from the runtime's error.
pub fn key_of_tls_error(
    config: &NodeConfig,
    listener: &str,
    e: &corum_runtime::tls::TlsError,
) -> String {
    let what = e.what.as_str();
    let key = if what.contains("truststore") {
        if config
            .ssl_value(listener, "ssl.truststore.location")
            .1
            .is_empty()
        {
            "ssl.truststore.certificates"
        } else {
            "ssl.truststore.location"
        }
    } else if config
        .ssl_value(listener, "ssl.keystore.location")
        .1
        .is_empty()
    {
        "ssl.keystore.certificate.chain"
    } else {
        "ssl.keystore.location"
    };
    config.ssl_value(listener, key).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NodeConfig;

    fn with(sets: &[(&str, &str)]) -> Result<NodeConfig, ConfigError> {
        let sets: Vec<(String, String)> = sets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        NodeConfig::for_tests().with_overrides(&sets)
    }

    const SSL_MAP: (&str, &str) = (
        "listener.security.protocol.map",
        "CONTROLLER:SSL,CLIENT:SSL,KAFKA:PLAINTEXT",
    );

    #[test]
    fn plaintext_listeners_have_no_tls() {
        let c = NodeConfig::for_tests();
        assert_eq!(c.listener_tls("CLIENT"), Ok(None));
        assert_eq!(c.ssl_value("CLIENT", "ssl.client.auth").1, "none");
        assert_eq!(
            c.ssl_value("CLIENT", "ssl.endpoint.identification.algorithm")
                .1,
            "https"
        );
    }

    #[test]
    fn a_listener_key_wins_over_the_unprefixed_one() {
        let c = with(&[
            SSL_MAP,
            ("ssl.keystore.location", "/etc/corum/node.pem"),
            ("ssl.truststore.location", "/etc/corum/ca.pem"),
            ("listener.name.client.ssl.client.auth", "REQUIRED"),
            (
                "listener.name.Client.ssl.keystore.location",
                "/etc/corum/client-side.pem",
            ),
            (
                "listener.name.controller.ssl.endpoint.identification.algorithm",
                "",
            ),
            (
                "listener.name.client.ssl.principal.mapping.rules",
                "RULE:^CN=([^,]+),O=corum$/$1/L, DEFAULT",
            ),
        ])
        .unwrap();
        let client = c.listener_tls("CLIENT").unwrap().unwrap();
        assert_eq!(
            client.keystore,
            Some(Keystore::File("/etc/corum/client-side.pem".into()))
        );
        assert_eq!(client.client_auth, ClientAuth::Required);
        assert!(client.verify_hostname);
        let controller = c.listener_tls("CONTROLLER").unwrap().unwrap();
        assert_eq!(
            controller.keystore,
            Some(Keystore::File("/etc/corum/node.pem".into()))
        );
        assert_eq!(
            controller.client_auth,
            ClientAuth::Required,
            "controllers always authenticate each other"
        );
        assert!(!controller.verify_hostname);
        // The client listener's mapping rules apply to it only.
        assert_eq!(
            client.principal_mapping.name("CN=Alice,O=corum").as_deref(),
            Some("alice")
        );
        assert!(controller.principal_mapping.is_default());
        assert_eq!(c.listener_tls("KAFKA"), Ok(None));
        // The prefixed keys survive a round trip through properties text.
        let back = NodeConfig::from_properties(&c.to_properties()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn errors_name_the_key_to_change() {
        let key_of = |sets: &[(&str, &str)]| with(sets).unwrap_err().key().map(str::to_owned);
        // No keystore on an SSL listener.
        assert_eq!(
            key_of(&[SSL_MAP, ("ssl.truststore.location", "/ca.pem")]),
            Some("ssl.keystore.location".into())
        );
        // The controller listener without a truststore (mutual TLS).
        assert_eq!(
            key_of(&[
                (
                    "listener.security.protocol.map",
                    "CONTROLLER:SSL,CLIENT:PLAINTEXT"
                ),
                ("listener.name.controller.ssl.keystore.location", "/n.pem"),
            ]),
            Some("ssl.truststore.location".into())
        );
        // Client authentication without a truststore.
        assert_eq!(
            key_of(&[
                (
                    "listener.security.protocol.map",
                    "CONTROLLER:PLAINTEXT,CLIENT:SSL"
                ),
                ("ssl.keystore.location", "/n.pem"),
                ("listener.name.client.ssl.client.auth", "required"),
            ]),
            Some("listener.name.client.ssl.client.auth".into())
        );
        // Both a file and inline.
        assert_eq!(
            key_of(&[
                (
                    "listener.security.protocol.map",
                    "CONTROLLER:PLAINTEXT,CLIENT:SSL"
                ),
                ("ssl.keystore.location", "/n.pem"),
                ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
            ]),
            Some("ssl.keystore.location".into())
        );
        // An inline chain without its key.
        assert_eq!(
            key_of(&[
                (
                    "listener.security.protocol.map",
                    "CONTROLLER:PLAINTEXT,CLIENT:SSL"
                ),
                (
                    "ssl.keystore.certificate.chain",
                    "-----BEGIN CERTIFICATE-----"
                ),
            ]),
            Some("ssl.keystore.key".into())
        );
        // Bad values, prefixed or not.
        assert_eq!(
            key_of(&[("listener.name.client.ssl.client.auth", "always")]),
            Some("listener.name.client.ssl.client.auth".into())
        );
        assert_eq!(
            key_of(&[("ssl.keystore.type", "JKS")]),
            Some("ssl.keystore.type".into())
        );
        assert_eq!(
            key_of(&[("ssl.principal.mapping.rules", "RULE:^CN=(.*)$/$1")]),
            Some("ssl.principal.mapping.rules".into())
        );
        assert_eq!(
            key_of(&[(
                "listener.name.client.ssl.principal.mapping.rules",
                "RULE:^CN=(?=x)$/$1/"
            )]),
            Some("listener.name.client.ssl.principal.mapping.rules".into())
        );
        assert_eq!(
            key_of(&[("ssl.endpoint.identification.algorithm", "dns")]),
            Some("ssl.endpoint.identification.algorithm".into())
        );
        // A prefix naming no listener, or no TLS key.
        assert_eq!(
            key_of(&[("listener.name.nosuch.ssl.client.auth", "required")]),
            Some("listener.name.nosuch.ssl.client.auth".into())
        );
        assert_eq!(
            key_of(&[("listener.name.client.num.partitions", "3")]),
            Some("listener.name.client.num.partitions".into())
        );
        // SASL stays refused on the client listener.
        assert_eq!(
            key_of(&[(
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,CLIENT:SASL_SSL"
            )]),
            Some("listener.security.protocol.map".into())
        );
        // Inline material is accepted as inline.
        let c = with(&[
            (
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,CLIENT:SSL",
            ),
            ("ssl.keystore.certificate.chain", "CHAIN"),
            ("ssl.keystore.key", "KEY"),
            ("ssl.truststore.certificates", "CAS"),
        ])
        .unwrap();
        let t = c.listener_tls("CLIENT").unwrap().unwrap();
        assert_eq!(
            t.keystore,
            Some(Keystore::Inline {
                chain: "CHAIN".into(),
                key: "KEY".into()
            })
        );
        assert_eq!(t.truststore, Some(Truststore::Inline("CAS".into())));
    }
}
