//! TLS on sockets: [`TlsServer`] (a listener's side: its keystore, its truststore, client
//! authentication, an optional identity check, reload when the files change) and [`TlsClient`]
//! (a dialer's side: the truststore, optionally a keystore to present, hostname checks), both
//! over rustls with the `ring` provider (pure Rust and a little C/asm that `cc` builds: no
//! cmake, no OpenSSL). [`NetStream`] is a socket with or without TLS; the framed transport and
//! the Kafka listener read and write through it without knowing which.
//!
//! Material is PEM, as Kafka's `ssl.keystore.type=PEM`: a keystore is a private key and its
//! certificate chain (one file holding both, or the two texts inline), a truststore is one or
//! more CA certificates. An authenticated peer's identity is [`TlsIdentity`]: Kafka's default
//! SSL principal, `User:` and the certificate's subject distinguished name in RFC 2253 form
//! (`User:CN=admin,O=corum`), with the names the certificate carries for identity checks.
//!
//! A handshake that fails (an unknown CA, an expired certificate, a name that does not match,
//! no certificate where one is required, an identity the listener's check refuses) is logged
//! with the peer's address and rustls's reason, and the connection is closed before any of its
//! bytes reach the protocol above: nothing is read from an unauthenticated peer.
//!
//! Reload: a [`TlsServer`] or [`TlsClient`] built from files notes their modification times;
//! at every accept (or connect) it rebuilds the rustls configuration when one changed, and
//! unconditionally after [`request_reload`] (`corum run` calls it on SIGHUP, for files
//! replaced with their old modification time). New handshakes use the new material; connections
//! already open keep theirs. Material that no longer loads is logged and the previous kept.

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use futures_lite::{AsyncRead, AsyncWrite};
use glommio::net::{Preallocated, TcpStream};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

pub mod certs;
mod stream;

pub use stream::{write_all_parts, NetReadHalf, NetWriteHalf, PlainStream, IOV_MAX};

/// Reloads asked for with [`request_reload`] (SIGHUP), process-wide.
static RELOAD_REQUESTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Asks every [`TlsServer`] and [`TlsClient`] of the process to re-read its files at its next
/// handshake, changed or not (SIGHUP).
pub fn request_reload() {
    RELOAD_REQUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

fn reload_requests() -> u64 {
    RELOAD_REQUESTS.load(std::sync::atomic::Ordering::Relaxed)
}

/// How long a handshake may take before the connection is dropped (a peer that connects and
/// says nothing must not hold a task forever).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The reason of a handshake the peer closed before finishing (logged at debug only: a client
/// that refuses this server's certificate closes this way too, and logs its own reason).
const CLOSED_EARLY: &str = "closed by the peer during the handshake";

/// A TLS setting that cannot be used: what it is (a file, an inline value) and why.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{what}: {reason}")]
pub struct TlsError {
    /// The file or the setting, e.g. `keystore /etc/corum/node.pem`.
    pub what: String,
    pub reason: String,
}

fn tls_err(what: impl Into<String>, reason: impl fmt::Display) -> TlsError {
    TlsError {
        what: what.into(),
        reason: reason.to_string(),
    }
}

/// Kafka's `ssl.client.auth`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// No certificate asked for.
    #[default]
    None,
    /// Asked for; a client without one is accepted (unauthenticated), one with a bad one is not.
    Requested,
    /// A client without a certificate from the truststore's CAs is refused.
    Required,
}

impl fmt::Display for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClientAuth::None => "none",
            ClientAuth::Requested => "requested",
            ClientAuth::Required => "required",
        })
    }
}

impl std::str::FromStr for ClientAuth {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            _ => Err("expected none, requested or required".into()),
        }
    }
}

/// A private key and its certificate chain, PEM (`ssl.keystore.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keystore {
    /// `ssl.keystore.location`: one PEM file with the key and the chain (leaf first).
    File(PathBuf),
    /// `ssl.keystore.certificate.chain` and `ssl.keystore.key`.
    Inline { chain: String, key: String },
}

/// CA certificates to trust, PEM (`ssl.truststore.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Truststore {
    /// `ssl.truststore.location`.
    File(PathBuf),
    /// `ssl.truststore.certificates`.
    Inline(String),
}

/// What a TLS endpoint is configured with, before anything is read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSettings {
    pub keystore: Option<Keystore>,
    pub truststore: Option<Truststore>,
    /// A server's `ssl.client.auth`.
    pub client_auth: ClientAuth,
    /// A client's `ssl.endpoint.identification.algorithm=https`: the server's certificate
    /// must name the host dialed (DNS or IP SAN). Off, only its chain is checked.
    pub verify_hostname: bool,
    /// A server's `ssl.principal.mapping.rules`: the name of a client certificate's
    /// principal; a certificate no rule applies to is refused at the handshake.
    pub principal_mapping: crate::principal_mapping::PrincipalMapping,
}

impl TlsSettings {
    fn files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(Keystore::File(p)) = &self.keystore {
            out.push(p.clone());
        }
        if let Some(Truststore::File(p)) = &self.truststore {
            out.push(p.clone());
        }
        out
    }
}

fn read_file(what: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| tls_err(format!("{what} {}", path.display()), e))
}

/// The chain and key of a keystore.
fn load_keystore(
    ks: &Keystore,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let (what, chain_pem, key_pem) = match ks {
        Keystore::File(p) => {
            let bytes = read_file("keystore", p)?;
            (format!("keystore {}", p.display()), bytes.clone(), bytes)
        }
        Keystore::Inline { chain, key } => (
            "inline keystore".to_owned(),
            chain.clone().into_bytes(),
            key.clone().into_bytes(),
        ),
    };
    let chain = CertificateDer::pem_slice_iter(&chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_err(&what, format!("bad PEM certificate: {e}")))?;
    if chain.is_empty() {
        return Err(tls_err(&what, "no certificate (BEGIN CERTIFICATE) in it"));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| tls_err(&what, format!("no usable private key: {e}")))?;
    Ok((chain, key))
}

fn load_truststore(ts: &Truststore) -> Result<Arc<RootCertStore>, TlsError> {
    let (what, pem) = match ts {
        Truststore::File(p) => (
            format!("truststore {}", p.display()),
            read_file("truststore", p)?,
        ),
        Truststore::Inline(text) => ("inline truststore".to_owned(), text.clone().into_bytes()),
    };
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_err(&what, format!("bad PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(tls_err(&what, "no certificate (BEGIN CERTIFICATE) in it"));
    }
    let mut roots = RootCertStore::empty();
    for c in certs {
        roots
            .add(c)
            .map_err(|e| tls_err(&what, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(Arc::new(roots))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn server_config(s: &TlsSettings) -> Result<Arc<ServerConfig>, TlsError> {
    let ks = s
        .keystore
        .as_ref()
        .ok_or_else(|| tls_err("keystore", "a TLS listener needs one (its certificate)"))?;
    let (chain, key) = load_keystore(ks)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("protocol versions", e))?;
    let builder = match (s.client_auth, &s.truststore) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            return Err(tls_err(
                "truststore",
                format!(
                    "ssl.client.auth={} needs the CAs client certificates must chain to",
                    s.client_auth
                ),
            ))
        }
        (auth, Some(ts)) => {
            let roots = load_truststore(ts)?;
            let v = WebPkiClientVerifier::builder_with_provider(roots, provider());
            let v = if auth == ClientAuth::Requested {
                v.allow_unauthenticated()
            } else {
                v
            };
            builder.with_client_cert_verifier(v.build().map_err(|e| tls_err("truststore", e))?)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| tls_err("keystore", format!("key and certificate unusable: {e}")))?;
    Ok(Arc::new(config))
}

/// A server certificate verifier that checks the chain and not the name
/// (`ssl.endpoint.identification.algorithm=` empty).
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn client_config(s: &TlsSettings) -> Result<Arc<ClientConfig>, TlsError> {
    let ts = s.truststore.as_ref().ok_or_else(|| {
        tls_err(
            "truststore",
            "a TLS client needs the CAs the server's certificate chains to",
        )
    })?;
    let roots = load_truststore(ts)?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("protocol versions", e))?;
    let builder = if s.verify_hostname {
        builder.with_root_certificates(roots)
    } else {
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider())
            .build()
            .map_err(|e| tls_err("truststore", e))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(inner)))
    };
    let config = match &s.keystore {
        None => builder.with_no_client_auth(),
        Some(ks) => {
            let (chain, key) = load_keystore(ks)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| tls_err("keystore", format!("key and certificate unusable: {e}")))?
        }
    };
    Ok(Arc::new(config))
}

/// The modification times of `files` (`None` for one that cannot be read now).
fn mtimes(files: &[PathBuf]) -> Vec<Option<SystemTime>> {
    files
        .iter()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

/// An authenticated peer: the principal Kafka's default SSL principal builder gives it
/// (`User:` and the subject DN, RFC 2253), and the names its certificate carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsIdentity {
    /// `User:CN=controller-1,O=corum`.
    pub principal: String,
    /// The subject DN in RFC 2253 form (most specific first, as Java's `X500Principal`).
    pub subject: String,
    /// The subject's common names.
    pub common_names: Vec<String>,
    /// DNS names of the subject alternative names.
    pub dns_names: Vec<String>,
    /// IP addresses of the subject alternative names.
    pub ip_addresses: Vec<IpAddr>,
}

impl TlsIdentity {
    /// The identity in a DER certificate; `None` if it does not parse (rustls accepted it, so
    /// that does not happen for a verified peer).
    pub fn from_der(der: &[u8]) -> Option<TlsIdentity> {
        use x509_parser::extensions::GeneralName;
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = rfc2253(cert.subject());
        let common_names = cert
            .subject()
            .iter_common_name()
            .filter_map(|a| a.as_str().ok().map(str::to_owned))
            .collect();
        let mut dns_names = Vec::new();
        let mut ip_addresses = Vec::new();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(d) => dns_names.push((*d).to_owned()),
                    GeneralName::IPAddress(b) => match b.len() {
                        4 => ip_addresses.push(IpAddr::from(<[u8; 4]>::try_from(*b).ok()?)),
                        16 => ip_addresses.push(IpAddr::from(<[u8; 16]>::try_from(*b).ok()?)),
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
        Some(TlsIdentity {
            principal: format!("User:{subject}"),
            subject,
            common_names,
            dns_names,
            ip_addresses,
        })
    }

    /// The identity in the first certificate of PEM text (a keystore file: its certificate
    /// comes first); `None` if there is none or it does not parse.
    pub fn from_pem(pem: &[u8]) -> Option<TlsIdentity> {
        let der = CertificateDer::pem_slice_iter(pem).next()?.ok()?;
        TlsIdentity::from_der(&der)
    }

    /// Whether a common name or a DNS SAN is `name`.
    pub fn names(&self, name: &str) -> bool {
        self.common_names.iter().any(|n| n == name) || self.dns_names.iter().any(|n| n == name)
    }
}

/// A distinguished name in RFC 2253 form: relative names last to first, `+` between the
/// attributes of one, short names for the usual attribute types (others as dotted OIDs),
/// special characters escaped.
fn rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|atv| {
                    let oid = atv.attr_type().to_id_string();
                    let ty = match oid.as_str() {
                        "2.5.4.3" => "CN".to_owned(),
                        "2.5.4.7" => "L".to_owned(),
                        "2.5.4.8" => "ST".to_owned(),
                        "2.5.4.10" => "O".to_owned(),
                        "2.5.4.11" => "OU".to_owned(),
                        "2.5.4.6" => "C".to_owned(),
                        "2.5.4.9" => "STREET".to_owned(),
                        "0.9.2342.19200300.100.1.25" => "DC".to_owned(),
                        "0.9.2342.19200300.100.1.1" => "UID".to_owned(),
                        _ => oid,
                    };
                    let value = atv.as_str().map(escape_dn_value).unwrap_or_else(|_| {
                        let hex: String = atv
                            .attr_value()
                            .data
                            .iter()
                            .map(|b| format!("{b:02x}"))
                            .collect();
                        format!("#{hex}")
                    });
                    format!("{ty}={value}")
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

fn escape_dn_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The identity a listener accepts, beyond the certificate's chain: `Err(reason)` refuses
/// the handshake with that reason logged.
pub type IdentityCheck = Arc<dyn Fn(&TlsIdentity) -> Result<(), String> + Send + Sync>;

struct ServerState {
    config: Arc<ServerConfig>,
    mtimes: Vec<Option<SystemTime>>,
}

/// A listener's TLS: see the module doc.
pub struct TlsServer {
    listener: String,
    settings: TlsSettings,
    files: Vec<PathBuf>,
    state: RefCell<ServerState>,
    check: Option<IdentityCheck>,
    reloads: std::cell::Cell<u64>,
    /// The [`request_reload`] count this server has acted on.
    requests_seen: std::cell::Cell<u64>,
}

impl fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsServer")
            .field("listener", &self.listener)
            .field("settings", &self.settings)
            .finish()
    }
}

impl TlsServer {
    /// Loads the material of `listener` (its name, for logs). Fails naming the file or setting
    /// that cannot be used.
    pub fn new(listener: &str, settings: TlsSettings) -> Result<TlsServer, TlsError> {
        let files = settings.files();
        let config = server_config(&settings)?;
        Ok(TlsServer {
            listener: listener.to_owned(),
            state: RefCell::new(ServerState {
                config,
                mtimes: mtimes(&files),
            }),
            files,
            settings,
            check: None,
            reloads: Default::default(),
            requests_seen: std::cell::Cell::new(reload_requests()),
        })
    }

    /// Adds an identity check run after the chain is verified (the Raft listener's).
    pub fn with_identity_check(mut self, check: IdentityCheck) -> TlsServer {
        self.check = Some(check);
        self
    }

    /// The client authentication this listener asks for.
    pub fn client_auth(&self) -> ClientAuth {
        self.settings.client_auth
    }

    /// Times the material was reloaded.
    pub fn reloads(&self) -> u64 {
        self.reloads.get()
    }

    /// Reloads the material if one of its files changed since it was loaded (or `force`).
    /// Returns whether it was replaced. Material that does not load is logged and the current
    /// one kept.
    pub fn reload(&self, force: bool) -> bool {
        let now = mtimes(&self.files);
        if !force && now == self.state.borrow().mtimes {
            return false;
        }
        match server_config(&self.settings) {
            Ok(config) => {
                *self.state.borrow_mut() = ServerState {
                    config,
                    mtimes: now,
                };
                self.reloads.set(self.reloads.get() + 1);
                tracing::info!(listener = %self.listener, "TLS material reloaded: new handshakes use it");
                true
            }
            Err(e) => {
                // Note the times so a broken file is not re-read at every accept.
                self.state.borrow_mut().mtimes = now;
                tracing::warn!(listener = %self.listener, error = %e,
                    "TLS material changed but does not load: keeping the previous one");
                false
            }
        }
    }

    fn acceptor(&self) -> futures_rustls::TlsAcceptor {
        let requested = reload_requests();
        let force = requested != self.requests_seen.replace(requested);
        self.reload(force);
        futures_rustls::TlsAcceptor::from(self.state.borrow().config.clone())
    }

    /// Runs the server side of a handshake on an accepted socket from `peer`, within
    /// [`HANDSHAKE_TIMEOUT`]. A failure is logged (listener, peer, reason) and returned.
    pub async fn accept(&self, stream: TcpStream, peer: SocketAddr) -> Result<NetStream, TlsError> {
        let result = self.handshake(stream).await;
        match &result {
            // A connect that sent nothing (a liveness probe, a port scan): not worth a warning.
            Err(e) if e.reason == CLOSED_EARLY => {
                tracing::debug!(listener = %self.listener, %peer, "closed before a TLS handshake")
            }
            Err(e) => tracing::warn!(listener = %self.listener, %peer, reason = %e.reason,
                "TLS handshake refused"),
            Ok(_) => {}
        }
        result
    }

    async fn handshake(&self, stream: TcpStream) -> Result<NetStream, TlsError> {
        let acceptor = self.acceptor();
        let accept = async { Some(acceptor.accept(stream.buffered()).await) };
        let expire = async {
            glommio::timer::sleep(HANDSHAKE_TIMEOUT).await;
            None
        };
        let tls = futures_lite::future::or(accept, expire)
            .await
            .ok_or_else(|| tls_err("handshake", "not finished in time"))?
            .map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    tls_err("handshake", CLOSED_EARLY)
                } else if e.to_string().contains("InvalidContentType") {
                    tls_err(
                        "handshake",
                        "the client does not speak TLS (a PLAINTEXT client on an SSL listener?)",
                    )
                } else {
                    tls_err("handshake", e)
                }
            })?;
        let identity = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|c| TlsIdentity::from_der(c));
        let identity = match identity {
            Some(mut id) if !self.settings.principal_mapping.is_default() => {
                match self.settings.principal_mapping.name(&id.subject) {
                    Some(name) => id.principal = format!("User:{name}"),
                    None => {
                        return Err(tls_err(
                            "peer identity",
                            format!(
                                "no rule of ssl.principal.mapping.rules ({}) applies to the certificate's subject {}",
                                self.settings.principal_mapping, id.subject
                            ),
                        ))
                    }
                }
                Some(id)
            }
            other => other,
        };
        if let Some(check) = &self.check {
            match &identity {
                None => return Err(tls_err("peer identity", "no client certificate")),
                Some(id) => check(id)
                    .map_err(|reason| tls_err(format!("peer identity {}", id.principal), reason))?,
            }
        }
        Ok(NetStream::Tls {
            stream: Box::new(futures_rustls::TlsStream::Server(tls)),
            identity: identity.map(Rc::new),
        })
    }
}

struct ClientState {
    config: Arc<ClientConfig>,
    mtimes: Vec<Option<SystemTime>>,
}

/// A dialer's TLS: see the module doc.
pub struct TlsClient {
    settings: TlsSettings,
    files: Vec<PathBuf>,
    state: RefCell<ClientState>,
    requests_seen: std::cell::Cell<u64>,
}

impl fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsClient")
            .field("settings", &self.settings)
            .finish()
    }
}

impl TlsClient {
    /// Loads the truststore (and the keystore to present, if any).
    pub fn new(settings: TlsSettings) -> Result<TlsClient, TlsError> {
        let files = settings.files();
        let config = client_config(&settings)?;
        Ok(TlsClient {
            state: RefCell::new(ClientState {
                config,
                mtimes: mtimes(&files),
            }),
            files,
            settings,
            requests_seen: std::cell::Cell::new(reload_requests()),
        })
    }

    fn connector(&self) -> futures_rustls::TlsConnector {
        let now = mtimes(&self.files);
        let requested = reload_requests();
        let force = requested != self.requests_seen.replace(requested);
        if force || now != self.state.borrow().mtimes {
            match client_config(&self.settings) {
                Ok(config) => {
                    *self.state.borrow_mut() = ClientState {
                        config,
                        mtimes: now,
                    };
                    tracing::info!("TLS client material reloaded");
                }
                Err(e) => {
                    self.state.borrow_mut().mtimes = now;
                    tracing::warn!(error = %e, "TLS client material changed but does not load: keeping the previous one");
                }
            }
        }
        futures_rustls::TlsConnector::from(self.state.borrow().config.clone())
    }

    /// Runs the client side of a handshake on a connected socket to `host` (a name or an
    /// address, checked against the server's certificate when hostname checks are on).
    pub async fn connect(&self, stream: TcpStream, host: &str) -> Result<NetStream, TlsError> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| tls_err(format!("server name {host}"), e))?;
        let connector = self.connector();
        let connect = async { Some(connector.connect(name, stream.buffered()).await) };
        let expire = async {
            glommio::timer::sleep(HANDSHAKE_TIMEOUT).await;
            None
        };
        let tls = futures_lite::future::or(connect, expire)
            .await
            .ok_or_else(|| tls_err("handshake", "not finished in time"))?
            .map_err(|e| tls_err("handshake", e))?;
        let identity = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|c| TlsIdentity::from_der(c));
        Ok(NetStream::Tls {
            stream: Box::new(futures_rustls::TlsStream::Client(tls)),
            identity: identity.map(Rc::new),
        })
    }
}

/// A connected socket, plain or under TLS, read and written the same way.
pub enum NetStream {
    Plain(PlainStream),
    Tls {
        stream: Box<futures_rustls::TlsStream<TcpStream<Preallocated>>>,
        /// The peer's certificate identity, when it presented one.
        identity: Option<Rc<TlsIdentity>>,
    },
}

impl fmt::Debug for NetStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetStream::Plain(_) => f.write_str("NetStream::Plain"),
            NetStream::Tls { identity, .. } => f
                .debug_struct("NetStream::Tls")
                .field("identity", identity)
                .finish(),
        }
    }
}

impl NetStream {
    /// The peer's certificate identity (TLS with a peer certificate only).
    pub fn identity(&self) -> Option<Rc<TlsIdentity>> {
        match self {
            NetStream::Plain(_) => None,
            NetStream::Tls { identity, .. } => identity.clone(),
        }
    }

    /// Whether the stream is under TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self, NetStream::Tls { .. })
    }
}

impl std::os::fd::AsRawFd for NetStream {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            NetStream::Plain(s) => s.as_raw_fd(),
            NetStream::Tls { stream, .. } => stream.as_raw_fd(),
        }
    }
}

impl AsyncRead for NetStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            NetStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            NetStream::Tls { stream, .. } => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for NetStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            NetStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            NetStream::Tls { stream, .. } => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            NetStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            NetStream::Tls { stream, .. } => {
                Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs)
            }
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NetStream::Plain(s) => Pin::new(s).poll_flush(cx),
            NetStream::Tls { stream, .. } => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NetStream::Plain(s) => Pin::new(s).poll_close(cx),
            NetStream::Tls { stream, .. } => Pin::new(stream.as_mut()).poll_close(cx),
        }
    }
}

/// An accepted socket made ready: TCP_NODELAY, then the handshake when `tls` is set. `Err` is
/// a refused handshake (already logged).
pub async fn accepted(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<&TlsServer>,
) -> Result<NetStream, TlsError> {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
    }
    match tls {
        None => Ok(NetStream::plain(stream)),
        Some(t) => t.accept(stream, peer).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dn_values_are_escaped_as_rfc_2253_says() {
        assert_eq!(escape_dn_value("plain"), "plain");
        assert_eq!(escape_dn_value("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape_dn_value("#x y "), "\\#x y\\ ");
        assert_eq!(escape_dn_value("q\"<>;\\"), "q\\\"\\<\\>\\;\\\\");
    }

    #[test]
    fn client_auth_parses_kafkas_values() {
        assert_eq!("REQUIRED".parse::<ClientAuth>(), Ok(ClientAuth::Required));
        assert_eq!(
            " requested".parse::<ClientAuth>(),
            Ok(ClientAuth::Requested)
        );
        assert_eq!("none".parse::<ClientAuth>(), Ok(ClientAuth::None));
        assert!("yes".parse::<ClientAuth>().is_err());
    }

    #[test]
    fn identity_of_a_certificate() {
        let ca = certs::CertificateAuthority::new("ca", certs::Validity::days(1)).unwrap();
        let issued = ca
            .issue(
                &certs::Subject {
                    common_name: "controller-3".into(),
                    organization: Some("corum, inc".into()),
                    alt_names: vec!["controller-3".into(), "127.0.0.1".into()],
                },
                certs::Validity::days(1),
            )
            .unwrap();
        let der = CertificateDer::from_pem_slice(issued.cert_pem.as_bytes()).unwrap();
        let id = TlsIdentity::from_der(&der).unwrap();
        assert_eq!(id.principal, "User:CN=controller-3,O=corum\\, inc");
        assert_eq!(id.common_names, ["controller-3"]);
        assert_eq!(id.dns_names, ["controller-3"]);
        assert_eq!(id.ip_addresses, [IpAddr::from([127, 0, 0, 1])]);
        assert!(id.names("controller-3") && !id.names("controller-4"));
        // A keystore file (the key, then the certificate) names the same identity.
        assert_eq!(
            TlsIdentity::from_pem(issued.keystore_pem().as_bytes()),
            Some(id)
        );
        assert_eq!(TlsIdentity::from_pem(issued.key_pem.as_bytes()), None);
    }

    proptest! {
        #[test]
        fn identity_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = TlsIdentity::from_der(&bytes);
        }
    }
}
