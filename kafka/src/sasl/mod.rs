//! SASL on a Kafka listener mapped to `SASL_PLAINTEXT` or `SASL_SSL`: SaslHandshake (v1) and
//! SaslAuthenticate with PLAIN (users from the listener's JAAS configuration) and
//! SCRAM-SHA-256/512 (credentials from the metadata log), as Kafka's
//! `SaslServerAuthenticator` runs them, and re-authentication (KIP-368). Sans IO: the
//! listener feeds each parsed request of a connection to its [`SaslConnection`] before
//! serving it, and the connection says what to do ([`Gate`]).
//!
//! | state | request | effect |
//! |---|---|---|
//! | handshake | ApiVersions | served |
//! | handshake | SaslHandshake naming an enabled mechanism | answered (the enabled mechanisms); → authenticate |
//! | handshake | SaslHandshake naming another | UNSUPPORTED_SASL_MECHANISM with the enabled ones, closed |
//! | handshake | SaslAuthenticate | ILLEGAL_SASL_STATE, closed |
//! | handshake, authenticate | anything else | closed (logged: a request before authentication) |
//! | authenticate (PLAIN) | SaslAuthenticate `authzid\0user\0password` | a known user and its password: authenticated as `User:<user>`; else SASL_AUTHENTICATION_FAILED with Kafka's message, closed |
//! | authenticate (SCRAM) | SaslAuthenticate client-first | the server-first message; → SCRAM final (an unknown user fails as a wrong password does) |
//! | SCRAM final | SaslAuthenticate client-final | a valid proof: the server-final message, authenticated; else SASL_AUTHENTICATION_FAILED, closed |
//! | authenticated | any request but these two | served as the principal; closed when the session expired (`connections.max.reauth.ms`) |
//! | authenticated | SaslHandshake (the same mechanism) | re-authentication (KIP-368): → authenticate; a re-authentication must end as the same principal |
//! | authenticated | SaslAuthenticate | ILLEGAL_SASL_STATE (kept open, as Kafka's broker answers it) |
//!
//! SaslHandshake v0 (the raw tokens of Kafka 0.10) is not served. A failed authentication
//! changes nothing in the node; the listener logs it with the peer, the mechanism and the user
//! it named. Every SaslAuthenticate answer carries `session_lifetime_ms` (v1+): the
//! `connections.max.reauth.ms` of the listener (0: sessions do not expire).

pub mod jaas;
pub mod scram;

use std::collections::BTreeMap;

use bytes::Bytes;
use corum_controller::scram::{constant_time_eq, ScramCredential, ScramMechanism};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::request::{Parsed, RequestHead};
use crate::service::Answer;

/// A SASL mechanism a listener may enable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    /// The mechanism of SASL name `name` (exact, as Kafka matches it), if served.
    pub fn from_name(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            other => ScramMechanism::from_name(other).map(Mechanism::Scram),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
        }
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A listener's SASL settings.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslConfig {
    /// `sasl.enabled.mechanisms` (or the listener's), in order.
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users and passwords (`user_<name>` of the listener's PLAIN JAAS entry).
    pub plain_users: BTreeMap<String, String>,
    /// `connections.max.reauth.ms`: how long an authentication holds (0: for good).
    pub reauth_ms: u64,
}

impl std::fmt::Debug for SaslConfig {
    // Passwords stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanisms", &self.mechanisms)
            .field("plain_users", &self.plain_users.keys().collect::<Vec<_>>())
            .field("reauth_ms", &self.reauth_ms)
            .finish()
    }
}

/// What the listener does with one request of a SASL connection.
#[derive(Debug)]
pub enum Gate {
    /// Serve it as usual, as [`SaslConnection::principal`] (or unauthenticated ApiVersions).
    Serve,
    /// Send this answer; then close the connection when `close` names why.
    Answer {
        answer: Box<Answer>,
        close: Option<String>,
    },
    /// Close the connection without an answer; log the reason.
    Close(String),
}

/// An authentication that succeeded or failed: what the listener logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Authenticated {
        mechanism: Mechanism,
        principal: String,
        reauthentication: bool,
    },
    Failed {
        mechanism: Mechanism,
        user: Option<String>,
        reason: String,
    },
}

#[derive(Debug)]
enum State {
    Handshake,
    Authenticate(Mechanism),
    ScramFinal(Box<scram::ScramServer>),
    Authenticated,
}

/// One connection's SASL state. See the module doc.
#[derive(Debug)]
pub struct SaslConnection {
    state: State,
    /// Set by the first authentication; a re-authentication must end as the same one.
    principal: Option<String>,
    mechanism: Option<Mechanism>,
    /// When the session expires (`now_ms` units), if `connections.max.reauth.ms` is set.
    expires_at_ms: Option<u64>,
    /// The last authentication outcome, for the listener's log line.
    event: Option<Event>,
}

impl Default for SaslConnection {
    fn default() -> Self {
        SaslConnection::new()
    }
}

/// Kafka's PLAIN messages (`PlainSaslServer`).
const PLAIN_INVALID: &str = "Authentication failed: Invalid username or password";

fn failed_message(mechanism: Mechanism) -> String {
    // Kafka's `SaslServerAuthenticator` for a SaslException of the mechanism.
    format!("Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")
}

fn handshake_answer(head: &RequestHead, config: &SaslConfig, code: i16) -> Answer {
    Answer {
        api: ApiKey::SaslHandshake,
        version: head.api_version,
        correlation_id: head.correlation_id,
        body: ResponseKind::SaslHandshake(
            SaslHandshakeResponse::default()
                .with_error_code(code)
                .with_mechanisms(
                    config
                        .mechanisms
                        .iter()
                        .map(|m| StrBytes::from_static_str(m.name()))
                        .collect(),
                ),
        ),
        records: None,
    }
}

fn authenticate_answer(
    head: &RequestHead,
    code: i16,
    message: Option<String>,
    auth_bytes: Vec<u8>,
    session_lifetime_ms: i64,
) -> Answer {
    Answer {
        api: ApiKey::SaslAuthenticate,
        version: head.api_version,
        correlation_id: head.correlation_id,
        body: ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
                .with_auth_bytes(Bytes::from(auth_bytes))
                .with_session_lifetime_ms(session_lifetime_ms),
        ),
        records: None,
    }
}

/// The answer of a listener that is not SASL to SaslHandshake or SaslAuthenticate (or of a
/// SASL one after authentication): ILLEGAL_SASL_STATE, as Kafka's `KafkaApis` answers.
pub fn illegal_state(body: &RequestKind) -> Option<ResponseKind> {
    let code = ResponseError::IllegalSaslState.code();
    match body {
        RequestKind::SaslHandshake(_) => Some(ResponseKind::SaslHandshake(
            SaslHandshakeResponse::default().with_error_code(code),
        )),
        RequestKind::SaslAuthenticate(_) => Some(ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_static_str(
                    "SaslAuthenticate request received after successful authentication",
                ))),
        )),
        _ => None,
    }
}

impl SaslConnection {
    pub fn new() -> SaslConnection {
        SaslConnection {
            state: State::Handshake,
            principal: None,
            mechanism: None,
            expires_at_ms: None,
            event: None,
        }
    }

    /// The authenticated principal (`User:<name>`), once authenticated.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// Whether the connection is authenticated and not re-authenticating.
    pub fn is_authenticated(&self) -> bool {
        matches!(self.state, State::Authenticated)
    }

    /// The outcome of the last authentication step that ended one, once: for the log.
    pub fn take_event(&mut self) -> Option<Event> {
        self.event.take()
    }

    /// Decides what to do with `parsed` at `now_ms`. `server_nonce` draws a SCRAM server
    /// nonce (printable, no `,`); `credential` looks up a user's SCRAM credential.
    pub fn gate(
        &mut self,
        config: &SaslConfig,
        parsed: &Parsed,
        now_ms: u64,
        server_nonce: &mut dyn FnMut() -> String,
        credential: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
    ) -> Gate {
        let (head, body) = match parsed {
            Parsed::ApiVersionsTooNew { .. } => {
                return match self.state {
                    State::Handshake | State::Authenticated => Gate::Serve,
                    _ => Gate::Close("ApiVersions during a SASL exchange".into()),
                }
            }
            Parsed::Request { head, body } => (head, &**body),
        };
        let api = head.api_key;
        match (&self.state, body) {
            (State::Authenticated, RequestKind::SaslHandshake(_)) => {
                // KIP-368: a handshake on an authenticated connection starts over.
                self.handshake(config, head, body)
            }
            (State::Authenticated, RequestKind::SaslAuthenticate(_)) => Gate::Answer {
                answer: Box::new(Answer {
                    api,
                    version: head.api_version,
                    correlation_id: head.correlation_id,
                    body: illegal_state(body).expect("a SASL request"),
                    records: None,
                }),
                close: None,
            },
            (State::Authenticated, _) => {
                if self.expires_at_ms.is_some_and(|at| now_ms >= at) {
                    return Gate::Close(format!(
                        "the SASL session of {} expired (connections.max.reauth.ms) and was not re-authenticated",
                        self.principal.as_deref().unwrap_or("?")
                    ));
                }
                Gate::Serve
            }
            (State::Handshake, RequestKind::ApiVersions(_)) => Gate::Serve,
            (State::Handshake, RequestKind::SaslHandshake(_)) => self.handshake(config, head, body),
            (State::Handshake, RequestKind::SaslAuthenticate(_)) => Gate::Answer {
                answer: Box::new(authenticate_answer(
                    head,
                    ResponseError::IllegalSaslState.code(),
                    Some("SaslAuthenticate before SaslHandshake".into()),
                    vec![],
                    0,
                )),
                close: Some("SaslAuthenticate before SaslHandshake".into()),
            },
            (State::Authenticate(m), RequestKind::SaslAuthenticate(r)) => {
                let m = *m;
                self.authenticate(
                    config,
                    head,
                    m,
                    &r.auth_bytes,
                    now_ms,
                    server_nonce,
                    credential,
                )
            }
            (State::ScramFinal(_), RequestKind::SaslAuthenticate(r)) => {
                let State::ScramFinal(server) =
                    std::mem::replace(&mut self.state, State::Handshake)
                else {
                    unreachable!("matched above")
                };
                let mechanism = self.mechanism.expect("set by the handshake");
                let user = server.user().to_owned();
                match server.finish(&r.auth_bytes) {
                    Ok(last) => self.succeed(config, head, mechanism, &user, last, now_ms),
                    Err(e) => self.fail(
                        head,
                        mechanism,
                        Some(user),
                        e.to_string(),
                        failed_message(mechanism),
                    ),
                }
            }
            (state, _) => Gate::Close(format!(
                "unexpected Kafka request of type {api:?} during SASL {}",
                match state {
                    State::Handshake => "handshake",
                    _ => "authentication",
                }
            )),
        }
    }

    fn handshake(&mut self, config: &SaslConfig, head: &RequestHead, body: &RequestKind) -> Gate {
        let RequestKind::SaslHandshake(r) = body else {
            unreachable!("called for SaslHandshake")
        };
        let name = r.mechanism.as_str();
        let chosen = Mechanism::from_name(name).filter(|m| config.mechanisms.contains(m));
        let Some(mechanism) = chosen else {
            return Gate::Answer {
                answer: Box::new(handshake_answer(
                    head,
                    config,
                    ResponseError::UnsupportedSaslMechanism.code(),
                )),
                close: Some(format!(
                    "SASL mechanism {name:?} is not enabled (enabled: {})",
                    config
                        .mechanisms
                        .iter()
                        .map(|m| m.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            };
        };
        if self.principal.is_some() && self.mechanism != Some(mechanism) {
            return Gate::Answer {
                answer: Box::new(handshake_answer(
                    head,
                    config,
                    ResponseError::IllegalSaslState.code(),
                )),
                close: Some(format!(
                    "re-authentication with {mechanism} after {}: the mechanism may not change",
                    self.mechanism.map_or("?", |m| m.name())
                )),
            };
        }
        self.mechanism = Some(mechanism);
        self.state = State::Authenticate(mechanism);
        Gate::Answer {
            answer: Box::new(handshake_answer(head, config, 0)),
            close: None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn authenticate(
        &mut self,
        config: &SaslConfig,
        head: &RequestHead,
        mechanism: Mechanism,
        token: &[u8],
        now_ms: u64,
        server_nonce: &mut dyn FnMut() -> String,
        credential: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
    ) -> Gate {
        match mechanism {
            Mechanism::Plain => match plain(config, token) {
                Ok(user) => self.succeed(config, head, mechanism, &user, vec![], now_ms),
                Err((user, reason, message)) => self.fail(head, mechanism, user, reason, message),
            },
            Mechanism::Scram(m) => {
                let nonce = server_nonce();
                match scram::ScramServer::start(m, token, &nonce, |u| credential(u, m)) {
                    Ok((server, first)) => {
                        self.state = State::ScramFinal(Box::new(server));
                        Gate::Answer {
                            answer: Box::new(authenticate_answer(head, 0, None, first, 0)),
                            close: None,
                        }
                    }
                    Err(e) => {
                        let user = scram::parse_client_first(token).ok().map(|f| f.user);
                        self.fail(
                            head,
                            mechanism,
                            user,
                            e.to_string(),
                            failed_message(mechanism),
                        )
                    }
                }
            }
        }
    }

    fn succeed(
        &mut self,
        config: &SaslConfig,
        head: &RequestHead,
        mechanism: Mechanism,
        user: &str,
        auth_bytes: Vec<u8>,
        now_ms: u64,
    ) -> Gate {
        let principal = format!("User:{user}");
        let reauthentication = self.principal.is_some();
        if let Some(before) = &self.principal {
            if *before != principal {
                let reason = format!(
                    "Cannot change principals during re-authentication from {before} to {principal}"
                );
                return self.fail(
                    head,
                    mechanism,
                    Some(user.to_owned()),
                    reason.clone(),
                    reason,
                );
            }
        }
        self.principal = Some(principal.clone());
        self.state = State::Authenticated;
        self.expires_at_ms = (config.reauth_ms > 0).then(|| now_ms + config.reauth_ms);
        self.event = Some(Event::Authenticated {
            mechanism,
            principal,
            reauthentication,
        });
        Gate::Answer {
            answer: Box::new(authenticate_answer(
                head,
                0,
                None,
                auth_bytes,
                i64::try_from(config.reauth_ms).unwrap_or(i64::MAX),
            )),
            close: None,
        }
    }

    fn fail(
        &mut self,
        head: &RequestHead,
        mechanism: Mechanism,
        user: Option<String>,
        reason: String,
        message: String,
    ) -> Gate {
        self.state = State::Handshake;
        self.event = Some(Event::Failed {
            mechanism,
            user,
            reason: reason.clone(),
        });
        Gate::Answer {
            answer: Box::new(authenticate_answer(
                head,
                ResponseError::SaslAuthenticationFailed.code(),
                Some(message),
                vec![],
                0,
            )),
            close: Some(format!("SASL {mechanism} authentication failed: {reason}")),
        }
    }
}

/// A PLAIN token checked against the listener's users: the user, or (the user named, the
/// reason to log, Kafka's message to the client).
#[allow(clippy::type_complexity)]
fn plain(config: &SaslConfig, token: &[u8]) -> Result<String, (Option<String>, String, String)> {
    let text = std::str::from_utf8(token).map_err(|_| {
        (
            None,
            "the PLAIN token is not UTF-8".to_owned(),
            failed_message(Mechanism::Plain),
        )
    })?;
    let parts: Vec<&str> = text.split('\0').collect();
    let [authzid, user, password] = parts[..] else {
        let reason = format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            parts.len()
        );
        return Err((None, reason, failed_message(Mechanism::Plain)));
    };
    let named = Some(user.to_owned());
    if user.is_empty() {
        let m = "Authentication failed: username not specified".to_owned();
        return Err((None, m.clone(), m));
    }
    if password.is_empty() {
        let m = "Authentication failed: password not specified".to_owned();
        return Err((named, m.clone(), m));
    }
    if !authzid.is_empty() && authzid != user {
        let m = "Authentication failed: Client requested an authorization id that is different from username".to_owned();
        return Err((named, m.clone(), m));
    }
    let known = config.plain_users.get(user);
    // Compare against something even for an unknown user, so both take the same time.
    let expected = known.map_or("", String::as_str);
    let matches = constant_time_eq(expected.as_bytes(), password.as_bytes());
    if known.is_none() || !matches {
        let reason = if known.is_none() {
            "unknown user"
        } else {
            "wrong password"
        };
        return Err((named, reason.to_owned(), PLAIN_INVALID.to_owned()));
    }
    Ok(user.to_owned())
}

#[cfg(test)]
mod tests;
