//! The SASL keys of a Kafka listener mapped to `SASL_PLAINTEXT` or `SASL_SSL`, with Kafka's
//! names: `sasl.enabled.mechanisms` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; Kafka's default
//! GSSAPI is refused with the list), `connections.max.reauth.ms` (KIP-368), each also as
//! `listener.name.<listener>.<key>`, and `listener.name.<listener>.<mechanism>.sasl.jaas.config`
//! (PLAIN's users as `user_<name>="<password>"`; SCRAM's entry, optional, names Kafka's SCRAM
//! module and nothing else: SCRAM credentials are in the metadata log). JAAS text is parsed
//! strictly by [`corum_kafka::sasl::jaas`]; an error names the key and the position, never the
//! value (it holds passwords). [`NodeConfig::listener_sasl`] resolves a listener's settings.

use corum_kafka::sasl::{jaas, Mechanism, SaslConfig};

use super::node_config::NodeConfig;
use super::ssl::listener_key;
use super::values::SecurityProtocol;
use crate::error::{ConfigError, ValueError};

/// The per-listener JAAS keys (after `listener.name.<listener>.`), one per mechanism.
pub const JAAS_KEYS: [&str; 3] = [
    "plain.sasl.jaas.config",
    "scram-sha-256.sasl.jaas.config",
    "scram-sha-512.sasl.jaas.config",
];

/// Checks the JAAS text of `key` (one of [`JAAS_KEYS`]).
pub(super) fn check_jaas(key: &str, text: &str) -> Result<(), String> {
    let checked = if key.starts_with("plain.") {
        jaas::plain_users(text).map(|_| ())
    } else {
        jaas::check_scram(text)
    };
    checked.map_err(|e| e.to_string())
}

/// `sasl.enabled.mechanisms`: names separated by commas, none empty or twice (which names
/// are served is checked per SASL listener).
pub(super) fn check_mechanisms(v: &str) -> Result<String, ValueError> {
    let mut names: Vec<&str> = Vec::new();
    for name in v.split(',').map(str::trim) {
        if name.is_empty() && v.trim().is_empty() {
            break;
        }
        if name.is_empty() {
            return Err(ValueError::Malformed {
                text: v.trim().to_owned(),
                expected: "mechanism names separated by commas (PLAIN,SCRAM-SHA-256)",
            });
        }
        if names.contains(&name) {
            return Err(ValueError::Twice {
                what: "mechanism",
                item: name.to_owned(),
            });
        }
        names.push(name);
    }
    Ok(names.join(","))
}

/// `connections.max.reauth.ms`: a non-negative number of milliseconds.
pub(super) fn check_reauth_ms(v: &str) -> Result<String, ValueError> {
    let range = ValueError::NotAnInteger {
        min: 0,
        max: i64::MAX,
    };
    match v.trim().parse::<i64>() {
        Ok(n) if n >= 0 => Ok(n.to_string()),
        _ => Err(range),
    }
}

impl NodeConfig {
    /// `listener`'s SASL settings: `None` unless it is mapped to SASL_PLAINTEXT or SASL_SSL.
    /// Refuses, naming the key to change: SASL on a listener that does not speak Kafka's
    /// protocol, no mechanism or one corum does not serve, PLAIN without the listener's PLAIN
    /// JAAS entry, and JAAS text that does not parse.
    pub fn listener_sasl(&self, listener: &str) -> Result<Option<SaslConfig>, ConfigError> {
        if !matches!(
            self.security_protocol(listener),
            Some(SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
        ) {
            return Ok(None);
        }
        let bad = |key: String, reason: String| ConfigError::Sasl {
            key,
            reason: format!("listener {listener}: {reason}"),
        };
        if !self.kafka_listener_names.iter().any(|n| n == listener) {
            return Err(bad(
                "listener.security.protocol.map".into(),
                "SASL is served on Kafka listeners only (corum.kafka.listener.names); the controller and client listeners authenticate with TLS client certificates".into(),
            ));
        }
        let (mech_key, names) = self.ssl_value(listener, "sasl.enabled.mechanisms");
        let mut mechanisms = Vec::new();
        for name in names.split(',').filter(|n| !n.is_empty()) {
            let m = Mechanism::from_name(name).ok_or_else(|| {
                bad(
                    mech_key.clone(),
                    format!("SASL mechanism {name} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
                )
            })?;
            mechanisms.push(m);
        }
        if mechanisms.is_empty() {
            return Err(bad(
                mech_key,
                "a SASL listener needs at least one mechanism".into(),
            ));
        }
        let jaas_of = |key: &'static str| {
            self.listener_ssl
                .get(listener)
                .and_then(|m| m.get(key))
                .map(String::as_str)
        };
        let mut plain_users = Default::default();
        for (key, mechanism) in JAAS_KEYS
            .iter()
            .zip(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        {
            let Some(text) = jaas_of(key) else { continue };
            let full = listener_key(listener, key);
            if !mechanisms.iter().any(|m| m.name() == mechanism) {
                return Err(bad(full, format!("{mechanism} is not in {mech_key}")));
            }
            check_jaas(key, text).map_err(|e| bad(full.clone(), e))?;
            if *key == JAAS_KEYS[0] {
                plain_users = jaas::plain_users(text).map_err(|e| bad(full, e.to_string()))?;
            }
        }
        if mechanisms.contains(&Mechanism::Plain) && jaas_of(JAAS_KEYS[0]).is_none() {
            return Err(bad(
                listener_key(listener, JAAS_KEYS[0]),
                "PLAIN needs its users: org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>=\"<password>\";".into(),
            ));
        }
        let (_, reauth) = self.ssl_value(listener, "connections.max.reauth.ms");
        Ok(Some(SaslConfig {
            mechanisms,
            plain_users,
            reauth_ms: reauth.parse().unwrap_or(0),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "CONTROLLER://127.0.0.1:9093,CLIENT://127.0.0.1:9094,KAFKA://127.0.0.1:9092";
    const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";";

    fn with(sets: &[(&str, &str)]) -> Result<NodeConfig, ConfigError> {
        let mut all = vec![("listeners", BASE)];
        all.extend_from_slice(sets);
        let sets: Vec<(String, String)> = all
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        NodeConfig::for_tests().with_overrides(&sets)
    }

    fn map(protocol: &str) -> String {
        format!("CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT,KAFKA:{protocol}")
    }

    /// A SASL_PLAINTEXT Kafka listener with PLAIN and SCRAM resolves to its mechanisms,
    /// users and session lifetime; the prefixed keys win and survive a properties round trip.
    #[test]
    fn resolves_a_listener() {
        let m = map("SASL_PLAINTEXT");
        let c = with(&[
            ("listener.security.protocol.map", &m),
            ("sasl.enabled.mechanisms", "GSSAPI"),
            (
                "listener.name.kafka.sasl.enabled.mechanisms",
                "SCRAM-SHA-256,PLAIN",
            ),
            ("listener.name.kafka.plain.sasl.jaas.config", PLAIN),
            ("listener.name.kafka.connections.max.reauth.ms", "60000"),
        ])
        .unwrap();
        let s = c.listener_sasl("KAFKA").unwrap().unwrap();
        assert_eq!(
            s.mechanisms,
            [
                Mechanism::Scram(corum_controller::scram::ScramMechanism::ScramSha256),
                Mechanism::Plain
            ]
        );
        assert_eq!(s.plain_users["alice"], "alice-secret");
        assert_eq!(s.reauth_ms, 60000);
        assert_eq!(c.listener_sasl("CLIENT").unwrap(), None);
        let back = NodeConfig::from_properties(&c.to_properties()).unwrap();
        assert_eq!(back.listener_sasl("KAFKA").unwrap(), Some(s));
    }

    /// Each mistake names the key to change, and a JAAS error never quotes the password.
    #[test]
    fn refusals_name_the_key() {
        let key_of = |sets: &[(&str, &str)]| match with(sets) {
            Err(e) => (e.key().map(str::to_owned), e.to_string()),
            Ok(_) => panic!("{sets:?}: accepted"),
        };
        let m = map("SASL_SSL");
        // Kafka's default GSSAPI is not served.
        let (key, _) = key_of(&[("listener.security.protocol.map", &map("SASL_PLAINTEXT"))]);
        assert_eq!(key.as_deref(), Some("sasl.enabled.mechanisms"));
        let (key, _) = key_of(&[
            ("listener.security.protocol.map", &map("SASL_PLAINTEXT")),
            ("sasl.enabled.mechanisms", "PLAIN"),
        ]);
        assert_eq!(
            key.as_deref(),
            Some("listener.name.kafka.plain.sasl.jaas.config")
        );
        let (key, text) = key_of(&[
            ("listener.security.protocol.map", &map("SASL_PLAINTEXT")),
            ("sasl.enabled.mechanisms", "PLAIN"),
            (
                "listener.name.kafka.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"hunter2\"",
            ),
        ]);
        assert_eq!(
            key.as_deref(),
            Some("listener.name.kafka.plain.sasl.jaas.config")
        );
        assert!(!text.contains("hunter2"), "{text}");
        // SASL_SSL needs the TLS keys too.
        let (key, _) = key_of(&[
            ("listener.security.protocol.map", &m),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
        ]);
        assert_eq!(key.as_deref(), Some("ssl.keystore.location"));
        // SASL on the client listener.
        let (key, _) = key_of(&[
            (
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,CLIENT:SASL_PLAINTEXT,KAFKA:PLAINTEXT",
            ),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
        ]);
        assert_eq!(key.as_deref(), Some("listener.security.protocol.map"));
        let (key, _) = key_of(&[("connections.max.reauth.ms", "-1")]);
        assert_eq!(key.as_deref(), Some("connections.max.reauth.ms"));
        let (key, _) = key_of(&[("sasl.enabled.mechanisms", "PLAIN,,PLAIN")]);
        assert_eq!(key.as_deref(), Some("sasl.enabled.mechanisms"));
        // A JAAS entry for a mechanism the listener does not enable.
        let (key, _) = key_of(&[
            ("listener.security.protocol.map", &map("SASL_PLAINTEXT")),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-256"),
            ("listener.name.kafka.plain.sasl.jaas.config", PLAIN),
        ]);
        assert_eq!(
            key.as_deref(),
            Some("listener.name.kafka.plain.sasl.jaas.config")
        );
    }
}
