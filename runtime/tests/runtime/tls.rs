//! TLS over loopback: a good handshake carries frames both ways and gives the server the
//! client's principal; each failure (an unknown CA, an expired certificate on either side, a
//! server certificate for another host, no client certificate where one is required, an
//! identity the listener's check refuses) ends the handshake with rustls's reason, and the
//! server side never hands the connection to its handler. Reload: new handshakes use files
//! replaced on disk.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use corum_runtime::principal_mapping::PrincipalMapping;
use corum_runtime::tls::certs::{CertificateAuthority, Issued, Subject, Validity};
use corum_runtime::tls::{ClientAuth, Keystore, TlsClient, TlsServer, TlsSettings, Truststore};
use corum_runtime::transport::{connect_tls, ConnectionConfig, Listener};
use corum_runtime::Error;

use crate::on_shard;

fn subject(cn: &str, alt: &[&str]) -> Subject {
    Subject {
        common_name: cn.to_owned(),
        organization: Some("corum".to_owned()),
        alt_names: alt.iter().map(|s| s.to_string()).collect(),
    }
}

fn expired() -> Validity {
    let now = SystemTime::now();
    Validity {
        not_before: now - Duration::from_secs(30 * 86_400),
        not_after: now - Duration::from_secs(86_400),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn keystore(dir: &Path, name: &str, issued: &Issued) -> Option<Keystore> {
    Some(Keystore::File(write(dir, name, &issued.keystore_pem())))
}

fn truststore(dir: &Path, name: &str, ca: &CertificateAuthority) -> Option<Truststore> {
    Some(Truststore::File(write(dir, name, &ca.issued().cert_pem)))
}

/// What the server saw of one connection: its principal, or the refusal.
type Seen = Result<Option<String>, String>;

/// One connection from `client` to a listener with `server`; a frame goes through when both
/// sides accept. Returns (the client's outcome, the server's).
fn handshake(server: TlsServer, client: TlsClient) -> (Result<(), String>, Seen) {
    on_shard(move |_| async move {
        let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let listener = Listener::bind(loopback, ConnectionConfig::default())
            .unwrap()
            .with_tls(Some(Rc::new(server)));
        let addr = listener.local_addr();
        let server_side = glommio::spawn_local(async move {
            match listener.accept().await {
                Ok(mut conn) => {
                    let principal = conn.peer_identity().map(|i| i.principal.clone());
                    let got = conn.recv::<Vec<u8>>().await.map_err(|e| e.to_string())?;
                    conn.send(&got.to_vec()).await.map_err(|e| e.to_string())?;
                    Ok(principal)
                }
                Err(Error::Tls { source, .. }) => Err(source.to_string()),
                Err(e) => panic!("not a TLS refusal: {e}"),
            }
        });
        let client_side = async {
            let mut conn = connect_tls(addr, ConnectionConfig::default(), Some(&client))
                .await
                .map_err(|e| e.to_string())?;
            conn.send(&b"ping".to_vec())
                .await
                .map_err(|e| e.to_string())?;
            let back = conn.recv::<Vec<u8>>().await.map_err(|e| e.to_string())?;
            assert_eq!(back.as_slice(), b"ping");
            Ok(())
        };
        let client_result = client_side.await;
        let server_result = server_side.await;
        (client_result, server_result)
    })
}

struct Pki {
    dir: tempfile::TempDir,
    ca: CertificateAuthority,
    server: Issued,
    client: Issued,
}

fn pki() -> Pki {
    let ca = CertificateAuthority::new("corum test CA", Validity::days(1)).unwrap();
    let server = ca
        .issue(
            &subject("controller-1", &["127.0.0.1", "localhost"]),
            Validity::days(1),
        )
        .unwrap();
    let client = ca
        .issue(&subject("client-1", &[]), Validity::days(1))
        .unwrap();
    Pki {
        dir: tempfile::tempdir().unwrap(),
        ca,
        server,
        client,
    }
}

impl Pki {
    fn server(&self, auth: ClientAuth) -> TlsServer {
        let d = self.dir.path();
        TlsServer::new(
            "TEST",
            TlsSettings {
                keystore: keystore(d, "server.pem", &self.server),
                truststore: truststore(d, "ca.pem", &self.ca),
                client_auth: auth,
                verify_hostname: false,
                ..Default::default()
            },
        )
        .unwrap()
    }

    fn client(&self, with_cert: Option<&Issued>, trust: &CertificateAuthority) -> TlsClient {
        let d = self.dir.path();
        TlsClient::new(TlsSettings {
            keystore: with_cert.and_then(|c| keystore(d, "client.pem", c)),
            truststore: truststore(d, "client-trust.pem", trust),
            client_auth: ClientAuth::None,
            verify_hostname: true,
            ..Default::default()
        })
        .unwrap()
    }
}

#[test]
fn mutual_tls_carries_frames_and_names_the_client() {
    let p = pki();
    let (client, server) = handshake(
        p.server(ClientAuth::Required),
        p.client(Some(&p.client), &p.ca),
    );
    assert_eq!(client, Ok(()));
    assert_eq!(server, Ok(Some("User:CN=client-1,O=corum".to_owned())));
    // Server-only TLS: no client certificate, no principal.
    let (client, server) = handshake(p.server(ClientAuth::None), p.client(None, &p.ca));
    assert_eq!(client, Ok(()));
    assert_eq!(server, Ok(None));
}

/// `ssl.principal.mapping.rules` name the client's principal; a certificate no rule applies
/// to is refused at the handshake, naming the rules and the subject.
#[test]
fn principal_mapping_rules_name_the_client_or_refuse_it() {
    let p = pki();
    let d = p.dir.path();
    let server = |rules: &str| {
        TlsServer::new(
            "TEST",
            TlsSettings {
                keystore: keystore(d, "server.pem", &p.server),
                truststore: truststore(d, "ca.pem", &p.ca),
                client_auth: ClientAuth::Required,
                principal_mapping: PrincipalMapping::parse(rules).unwrap(),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let (client, server_saw) = handshake(
        server("RULE:^CN=([^,]+),O=corum$/$1/U"),
        p.client(Some(&p.client), &p.ca),
    );
    assert_eq!(client, Ok(()));
    assert_eq!(server_saw, Ok(Some("User:CLIENT-1".to_owned())));
    let (_, server_saw) = handshake(
        server("RULE:^CN=([^,]+),O=example$/$1/"),
        p.client(Some(&p.client), &p.ca),
    );
    let refused = server_saw.unwrap_err();
    assert!(
        refused.contains("no rule of ssl.principal.mapping.rules")
            && refused.contains("CN=client-1,O=corum"),
        "{refused}"
    );
    // A rule that does not match, then DEFAULT: the subject as it is.
    let (_, server_saw) = handshake(
        server("RULE:^CN=([^,]+),O=example$/$1/,DEFAULT"),
        p.client(Some(&p.client), &p.ca),
    );
    assert_eq!(server_saw, Ok(Some("User:CN=client-1,O=corum".to_owned())));
}

#[test]
fn a_server_from_another_ca_is_refused_by_the_client() {
    let p = pki();
    let other = CertificateAuthority::new("other CA", Validity::days(1)).unwrap();
    let (client, server) = handshake(p.server(ClientAuth::None), p.client(None, &other));
    let client = client.unwrap_err();
    assert!(client.contains("UnknownIssuer"), "{client}");
    assert!(server.is_err(), "the server hands nothing on: {server:?}");
}

#[test]
fn a_client_certificate_from_another_ca_is_refused_by_the_server() {
    let p = pki();
    let other = CertificateAuthority::new("other CA", Validity::days(1)).unwrap();
    let stranger = other
        .issue(&subject("controller-9", &["127.0.0.1"]), Validity::days(1))
        .unwrap();
    let (client, server) = handshake(
        p.server(ClientAuth::Required),
        p.client(Some(&stranger), &p.ca),
    );
    assert!(client.is_err());
    let server = server.unwrap_err();
    assert!(server.contains("UnknownIssuer"), "{server}");
}

#[test]
fn expired_certificates_are_refused_on_either_side() {
    let p = pki();
    let old_client = p.ca.issue(&subject("client-1", &[]), expired()).unwrap();
    let (_, server) = handshake(
        p.server(ClientAuth::Required),
        p.client(Some(&old_client), &p.ca),
    );
    let server = server.unwrap_err();
    assert!(server.contains("certificate expired"), "{server}");

    let old_server =
        p.ca.issue(&subject("controller-1", &["127.0.0.1"]), expired())
            .unwrap();
    let d = p.dir.path();
    let server = TlsServer::new(
        "TEST",
        TlsSettings {
            keystore: keystore(d, "old-server.pem", &old_server),
            ..Default::default()
        },
    )
    .unwrap();
    let (client, _) = handshake(server, p.client(None, &p.ca));
    let client = client.unwrap_err();
    assert!(client.contains("certificate expired"), "{client}");
}

#[test]
fn a_client_without_a_certificate_is_refused_where_one_is_required() {
    let p = pki();
    let (_, server) = handshake(p.server(ClientAuth::Required), p.client(None, &p.ca));
    let server = server.unwrap_err();
    assert!(server.contains("peer sent no certificates"), "{server}");
    // Requested: accepted, unauthenticated.
    let (client, server) = handshake(p.server(ClientAuth::Requested), p.client(None, &p.ca));
    assert_eq!(client, Ok(()));
    assert_eq!(server, Ok(None));
}

#[test]
fn a_server_certificate_for_another_host_is_refused_when_hostnames_are_checked() {
    let p = pki();
    let elsewhere =
        p.ca.issue(&subject("controller-1", &["10.1.2.3"]), Validity::days(1))
            .unwrap();
    let d = p.dir.path();
    let server = || {
        TlsServer::new(
            "TEST",
            TlsSettings {
                keystore: keystore(d, "elsewhere.pem", &elsewhere),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let (client, _) = handshake(server(), p.client(None, &p.ca));
    let client = client.unwrap_err();
    assert!(
        client.contains("not valid for name \"127.0.0.1\""),
        "{client}"
    );
    // ssl.endpoint.identification.algorithm= (empty): the chain alone.
    let unchecked = TlsClient::new(TlsSettings {
        truststore: truststore(d, "trust2.pem", &p.ca),
        verify_hostname: false,
        ..Default::default()
    })
    .unwrap();
    let (client, _) = handshake(server(), unchecked);
    assert_eq!(client, Ok(()));
}

#[test]
fn an_identity_check_refuses_a_chained_certificate_naming_someone_else() {
    let p = pki();
    let check = |who: &'static str| -> corum_runtime::tls::IdentityCheck {
        std::sync::Arc::new(move |id| {
            if id.names(who) {
                Ok(())
            } else {
                Err(format!("not {who}"))
            }
        })
    };
    let (client, server) = handshake(
        p.server(ClientAuth::Required)
            .with_identity_check(check("client-1")),
        p.client(Some(&p.client), &p.ca),
    );
    assert_eq!(client.map(|_| ()).ok(), Some(()));
    assert!(server.is_ok());
    let (_, server) = handshake(
        p.server(ClientAuth::Required)
            .with_identity_check(check("controller-2")),
        p.client(Some(&p.client), &p.ca),
    );
    let server = server.unwrap_err();
    assert!(
        server.contains("User:CN=client-1,O=corum") && server.contains("not controller-2"),
        "{server}"
    );
}

#[test]
fn replaced_files_are_used_by_new_handshakes() {
    let p = pki();
    let server = p.server(ClientAuth::None);
    assert!(!server.reload(false), "nothing changed");
    // A new CA and a server certificate from it, written over the old keystore.
    let ca2 = CertificateAuthority::new("second CA", Validity::days(1)).unwrap();
    let issued = ca2
        .issue(&subject("controller-1", &["127.0.0.1"]), Validity::days(1))
        .unwrap();
    let path = p.dir.path().join("server.pem");
    std::fs::write(&path, issued.keystore_pem()).unwrap();
    let later = SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    // The accept notices the change; a client trusting only the new CA gets through.
    let (client, _) = handshake(server, p.client(None, &ca2));
    assert_eq!(client, Ok(()));

    // A keystore that no longer loads keeps the previous material.
    let server = p.server(ClientAuth::None);
    std::fs::write(p.dir.path().join("server.pem"), "garbage").unwrap();
    assert!(!server.reload(true));
    assert_eq!(server.reloads(), 0);
}

#[test]
fn a_reload_request_rereads_files_whose_modification_time_did_not_change() {
    // SIGHUP's path: the keystore replaced with its old modification time (cp -p) is not
    // noticed by the time check, and is re-read after request_reload.
    let p = pki();
    let server = p.server(ClientAuth::None);
    let path = p.dir.path().join("server.pem");
    let old = std::fs::metadata(&path).unwrap().modified().unwrap();
    let ca2 = CertificateAuthority::new("second CA", Validity::days(1)).unwrap();
    let issued = ca2
        .issue(&subject("controller-1", &["127.0.0.1"]), Validity::days(1))
        .unwrap();
    std::fs::write(&path, issued.keystore_pem()).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert!(!server.reload(false), "same modification time: not noticed");
    corum_runtime::tls::request_reload();
    let (client, _) = handshake(server, p.client(None, &ca2));
    assert_eq!(client, Ok(()));
}
