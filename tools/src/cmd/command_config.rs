//! `--command-config FILE`: a Kafka client properties file, as Kafka's tools take it, for the
//! commands that reach the controllers' client listeners (the admin commands, `corum quorum`,
//! `corum loadgen`). Only the connection's security is read from it:
//!
//! | key | meaning |
//! |---|---|
//! | `security.protocol` | `PLAINTEXT` (default) or `SSL`; SASL is refused |
//! | `ssl.truststore.location` / `ssl.truststore.certificates` | the CAs the server's certificate must chain to (PEM file, or inline) |
//! | `ssl.keystore.location` / `ssl.keystore.certificate.chain` + `ssl.keystore.key` | the client certificate, for a listener with `ssl.client.auth` |
//! | `ssl.endpoint.identification.algorithm` | `https` (default): the certificate must name the host dialed; empty: the chain only |
//! | `ssl.truststore.type`, `ssl.keystore.type` | `PEM` only |
//!
//! Other keys (a Kafka client's `request.timeout.ms`, ...) are ignored, as Kafka's tools
//! ignore keys they do not use.

use std::path::Path;

use anyhow::Context;
use corum_runtime::tls::{Keystore, TlsSettings, Truststore};

/// The TLS settings of a properties file's text; `None` for PLAINTEXT.
pub fn parse(text: &str) -> anyhow::Result<Option<TlsSettings>> {
    let entries = corum_node::config::parse_properties(text)?;
    let get = |key: &str| {
        entries
            .iter()
            .rev()
            .find(|e| e.key == key)
            .map(|e| e.value.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    match get("security.protocol")
        .unwrap_or_else(|| "PLAINTEXT".into())
        .to_ascii_uppercase()
        .as_str()
    {
        "PLAINTEXT" => return Ok(None),
        "SSL" => {}
        other => anyhow::bail!(
            "security.protocol={other}: expected PLAINTEXT or SSL (SASL is not supported)"
        ),
    }
    for key in ["ssl.truststore.type", "ssl.keystore.type"] {
        if let Some(t) = get(key) {
            anyhow::ensure!(
                t.eq_ignore_ascii_case("PEM"),
                "{key}={t}: only PEM is supported"
            );
        }
    }
    let truststore = match (
        get("ssl.truststore.location"),
        get("ssl.truststore.certificates"),
    ) {
        (Some(p), None) => Truststore::File(p.into()),
        (None, Some(c)) => Truststore::Inline(c),
        (None, None) => anyhow::bail!(
            "security.protocol=SSL needs ssl.truststore.location (the CAs the server's certificate chains to)"
        ),
        (Some(_), Some(_)) => {
            anyhow::bail!("ssl.truststore.location: give the truststore as a file or inline, not both")
        }
    };
    let keystore = match (
        get("ssl.keystore.location"),
        get("ssl.keystore.certificate.chain"),
        get("ssl.keystore.key"),
    ) {
        (None, None, None) => None,
        (Some(p), None, None) => Some(Keystore::File(p.into())),
        (None, Some(chain), Some(key)) => Some(Keystore::Inline { chain, key }),
        _ => anyhow::bail!(
            "ssl.keystore.location: give the keystore as a file, or as ssl.keystore.certificate.chain with ssl.keystore.key"
        ),
    };
    let verify_hostname = match get("ssl.endpoint.identification.algorithm") {
        None => !entries
            .iter()
            .any(|e| e.key == "ssl.endpoint.identification.algorithm"),
        Some(a) if a.eq_ignore_ascii_case("https") => true,
        Some(a) => {
            anyhow::bail!("ssl.endpoint.identification.algorithm={a}: expected https, or empty")
        }
    };
    Ok(Some(TlsSettings {
        keystore,
        truststore: Some(truststore),
        client_auth: Default::default(),
        verify_hostname,
        ..Default::default()
    }))
}

/// [`parse`] of the file at `path`.
pub fn load(path: &Path) -> anyhow::Result<Option<TlsSettings>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --command-config {}", path.display()))?;
    parse(&text).with_context(|| format!("--command-config {}", path.display()))
}

/// [`load`] when a path is given.
pub fn load_opt(path: Option<&Path>) -> anyhow::Result<Option<TlsSettings>> {
    path.map(load).transpose().map(Option::flatten)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_unless_ssl() {
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(
            parse("security.protocol=PLAINTEXT\nacks=all\n").unwrap(),
            None
        );
        let e = parse("security.protocol=SASL_SSL").unwrap_err().to_string();
        assert!(e.contains("SASL"), "{e}");
    }

    #[test]
    fn ssl_settings() {
        let t = parse(
            "security.protocol=SSL\nssl.truststore.location=/ca.pem\nssl.keystore.location=/me.pem\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(t.truststore, Some(Truststore::File("/ca.pem".into())));
        assert_eq!(t.keystore, Some(Keystore::File("/me.pem".into())));
        assert!(t.verify_hostname);
        let t = parse(
            "security.protocol=ssl\nssl.truststore.certificates=CAS\nssl.endpoint.identification.algorithm=\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(t.truststore, Some(Truststore::Inline("CAS".into())));
        assert_eq!(t.keystore, None);
        assert!(!t.verify_hostname);
    }

    #[test]
    fn errors_name_the_key() {
        for (text, key) in [
            ("security.protocol=SSL", "ssl.truststore.location"),
            (
                "security.protocol=SSL\nssl.truststore.location=/a\nssl.truststore.type=JKS",
                "ssl.truststore.type",
            ),
            (
                "security.protocol=SSL\nssl.truststore.location=/a\nssl.keystore.key=K",
                "ssl.keystore.location",
            ),
            (
                "security.protocol=SSL\nssl.truststore.location=/a\nssl.endpoint.identification.algorithm=x",
                "ssl.endpoint.identification.algorithm",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text:?}: {e}");
        }
    }
}
