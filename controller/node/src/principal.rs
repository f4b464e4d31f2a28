//! Who a connection to one of the node's client-facing listeners is: its [`Session`], built
//! once when the connection is accepted, the same way for the private client listener
//! ([`crate::rpc_server`]) and the Kafka listeners ([`crate::kafka_server`]), as Kafka's
//! `DefaultKafkaPrincipalBuilder` builds a principal.
//!
//! | connection | principal | super user |
//! |---|---|---|
//! | PLAINTEXT, or SSL without a client certificate (`ssl.client.auth=none`, or `requested` and none sent) | `User:ANONYMOUS` | no |
//! | SSL with a client certificate | `User:` and the certificate's subject DN in RFC 2253 form (`User:CN=admin,O=corum`, `ssl.principal.mapping.rules=DEFAULT`), or the name the listener's mapping rules give it (applied at the handshake: [`corum_runtime::principal_mapping`]) | when the certificate names a controller |
//! | SASL (a Kafka listener) | `User:<name>` once authenticated ([`crate::kafka_server`] replaces the session) | no |
//!
//! A certificate names a controller when a common name or DNS name is `controller-<node id>`
//! ([`crate::peer::controller_ids`], the identity the controller listener requires of its
//! peers). Its session is a super user ([`Session::super_user`]): allowed everything by the
//! authorizer, as a principal in `super.users`. Kafka leaves it to the operator to list the
//! controllers' principals there; corum derives it from the names the quorum already trusts,
//! so nothing is to be kept in step with the voter set, and a standby's forwards and each
//! node's registration (which reach the active controller's client listener with the node's
//! certificate) pass whatever the ACLs say. A deployment whose client listener takes no
//! client certificates (PLAINTEXT, `ssl.client.auth=none`) authorizes those requests as
//! `User:ANONYMOUS`, as Kafka does on a PLAINTEXT listener: with an authorizer, it needs
//! `super.users=User:ANONYMOUS` or ACLs for it (CLUSTER_ACTION for the registrations).

use std::net::SocketAddr;

use corum_kafka::auth::Session;
use corum_runtime::tls::TlsIdentity;

/// The session of a connection from `peer` that authenticated as `identity` (its client
/// certificate), or none. See the module doc.
pub fn session(identity: Option<&TlsIdentity>, peer: SocketAddr) -> Session {
    let host = peer.ip().to_string();
    match identity {
        None => Session::anonymous(host),
        Some(id) => {
            let mut session = Session::authenticated(id.principal.clone(), host);
            session.super_user = !crate::peer::controller_ids(id).is_empty();
            session
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_runtime::tls::certs::{CertificateAuthority, Subject, Validity};

    fn identity(common_name: &str, organization: Option<&str>, alt_names: &[&str]) -> TlsIdentity {
        let ca = CertificateAuthority::new("test CA", Validity::days(1)).unwrap();
        let issued = ca
            .issue(
                &Subject {
                    common_name: common_name.into(),
                    organization: organization.map(Into::into),
                    alt_names: alt_names.iter().map(|n| (*n).into()).collect(),
                },
                Validity::days(1),
            )
            .unwrap();
        TlsIdentity::from_pem(issued.keystore_pem().as_bytes()).expect("an identity")
    }

    fn peer() -> SocketAddr {
        "10.1.2.3:5000".parse().unwrap()
    }

    /// Without a client certificate a connection is Kafka's `User:ANONYMOUS`, not a super
    /// user; the host is the peer's address.
    #[test]
    fn no_certificate_is_anonymous() {
        let s = session(None, peer());
        assert_eq!(s.principal, "User:ANONYMOUS");
        assert_eq!(s.client_host, "10.1.2.3");
        assert!(!s.super_user);
    }

    /// A client certificate gives `User:` and its subject DN (RFC 2253, last RDN first,
    /// special characters escaped), as Kafka's default SSL principal builder.
    #[test]
    fn a_certificate_gives_its_subject_dn() {
        let s = session(Some(&identity("tenant", Some("corum, inc"), &[])), peer());
        assert_eq!(s.principal, "User:CN=tenant,O=corum\\, inc");
        assert!(!s.super_user);
    }

    /// A certificate naming a controller (common name or DNS name `controller-<id>`) is a
    /// super user; a name that only looks like one (no id, another prefix, the organization)
    /// is not.
    #[test]
    fn controller_certificates_are_super_users() {
        for (cn, o, sans, controller) in [
            ("controller-2", None, &[][..], true),
            ("ops", None, &["controller-7", "127.0.0.1"][..], true),
            ("controller-", None, &[][..], false),
            ("controller-two", None, &[][..], false),
            ("my-controller-2", None, &[][..], false),
            ("tenant", Some("controller-2"), &[][..], false),
        ] {
            let s = session(Some(&identity(cn, o, sans)), peer());
            assert_eq!(s.super_user, controller, "{cn} {o:?} {sans:?}");
            assert!(s.principal.starts_with("User:"), "{}", s.principal);
        }
    }
}
