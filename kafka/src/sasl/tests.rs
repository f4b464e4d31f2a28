use super::*;
use kafka_protocol::messages::{
    ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
};

fn config(reauth_ms: u64) -> SaslConfig {
    SaslConfig {
        mechanisms: vec![
            Mechanism::Plain,
            Mechanism::Scram(ScramMechanism::ScramSha256),
            Mechanism::Scram(ScramMechanism::ScramSha512),
        ],
        plain_users: [("alice".to_owned(), "alice-secret".to_owned())]
            .into_iter()
            .collect(),
        reauth_ms,
    }
}

fn req(api: ApiKey, version: i16, body: RequestKind) -> Parsed {
    Parsed::Request {
        head: RequestHead {
            api_key: api,
            api_version: version,
            correlation_id: 7,
            client_id: None,
        },
        body: Box::new(body),
    }
}

fn handshake(mechanism: &str) -> Parsed {
    req(
        ApiKey::SaslHandshake,
        1,
        RequestKind::SaslHandshake(
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into())),
        ),
    )
}

fn authenticate(bytes: &[u8]) -> Parsed {
    req(
        ApiKey::SaslAuthenticate,
        2,
        RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(bytes)),
        ),
    )
}

fn metadata() -> Parsed {
    req(
        ApiKey::Metadata,
        12,
        RequestKind::Metadata(MetadataRequest::default()),
    )
}

fn bob_credential(m: ScramMechanism) -> ScramCredential {
    ScramCredential::from_password(m, "bob-secret", b"bob-salt".to_vec(), 4096)
}

/// Runs `parsed` through `conn` at `now_ms`, with bob's SCRAM credentials.
fn step(conn: &mut SaslConnection, c: &SaslConfig, parsed: &Parsed, now_ms: u64) -> Gate {
    conn.gate(c, parsed, now_ms, &mut || "srvnonce".to_owned(), &|u, m| {
        (u == "bob").then(|| bob_credential(m))
    })
}

/// (error code, error message, auth bytes, session lifetime, closes) of a SaslAuthenticate
/// answer.
fn auth_answer(g: Gate) -> (i16, Option<String>, Vec<u8>, i64, bool) {
    match g {
        Gate::Answer { answer, close } => {
            let ResponseKind::SaslAuthenticate(r) = answer.body else {
                panic!("expected a SaslAuthenticate answer, got {:?}", answer.body)
            };
            (
                r.error_code,
                r.error_message.map(|m| m.to_string()),
                r.auth_bytes.to_vec(),
                r.session_lifetime_ms,
                close.is_some(),
            )
        }
        other => panic!("expected a SaslAuthenticate answer, got {other:?}"),
    }
}

fn handshake_answer(g: Gate) -> (i16, Vec<String>, bool) {
    match g {
        Gate::Answer { answer, close } => {
            let ResponseKind::SaslHandshake(r) = answer.body else {
                panic!("expected a SaslHandshake answer, got {:?}", answer.body)
            };
            (
                r.error_code,
                r.mechanisms.iter().map(|m| m.to_string()).collect(),
                close.is_some(),
            )
        }
        other => panic!("expected a SaslHandshake answer, got {other:?}"),
    }
}

/// PLAIN: ApiVersions before the handshake is served, the handshake lists the enabled
/// mechanisms, the right password authenticates `User:alice`, after which requests are served.
#[test]
fn plain_authenticates() {
    let c = config(0);
    let mut conn = SaslConnection::new();
    let versions = req(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    );
    assert!(matches!(step(&mut conn, &c, &versions, 0), Gate::Serve));
    let (code, mechanisms, close) = handshake_answer(step(&mut conn, &c, &handshake("PLAIN"), 0));
    assert_eq!((code, close), (0, false));
    assert_eq!(mechanisms, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    let (code, _, _, lifetime, close) = auth_answer(step(
        &mut conn,
        &c,
        &authenticate(b"\0alice\0alice-secret"),
        0,
    ));
    assert_eq!((code, lifetime, close), (0, 0, false));
    assert_eq!(conn.principal(), Some("User:alice"));
    assert!(matches!(
        conn.take_event(),
        Some(Event::Authenticated {
            reauthentication: false,
            ..
        })
    ));
    assert!(matches!(step(&mut conn, &c, &metadata(), 1), Gate::Serve));
    // A SaslAuthenticate after authentication: ILLEGAL_SASL_STATE, kept open.
    let (code, _, _, _, close) = auth_answer(step(&mut conn, &c, &authenticate(b"x"), 1));
    assert_eq!((code, close), (34, false));
}

/// A wrong password, an unknown user, a foreign authorization id and malformed tokens are
/// refused with SASL_AUTHENTICATION_FAILED and Kafka's message, and the connection closes
/// unauthenticated.
#[test]
fn plain_refusals() {
    let c = config(0);
    for (token, message) in [
        (&b"\0alice\0wrong"[..], PLAIN_INVALID.to_owned()),
        (b"\0mallory\0alice-secret", PLAIN_INVALID.to_owned()),
        (
            b"bob\0alice\0alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username".to_owned(),
        ),
        (b"\0\0x", "Authentication failed: username not specified".to_owned()),
        (b"\0alice\0", "Authentication failed: password not specified".to_owned()),
        (b"alice-secret", failed_message(Mechanism::Plain)),
        (b"\xff\0a\0b", failed_message(Mechanism::Plain)),
    ] {
        let mut conn = SaslConnection::new();
        handshake_answer(step(&mut conn, &c, &handshake("PLAIN"), 0));
        let (code, got, _, _, close) = auth_answer(step(&mut conn, &c, &authenticate(token), 0));
        assert_eq!((code, close), (58, true), "{token:?}");
        assert_eq!(got, Some(message), "{token:?}");
        assert_eq!(conn.principal(), None);
        assert!(matches!(conn.take_event(), Some(Event::Failed { .. })));
    }
}

/// Before authentication only ApiVersions and the SASL requests pass; SaslAuthenticate first
/// is ILLEGAL_SASL_STATE; an unknown or disabled mechanism is UNSUPPORTED_SASL_MECHANISM.
#[test]
fn requests_before_authentication() {
    let c = config(0);
    let mut conn = SaslConnection::new();
    assert!(matches!(
        step(&mut conn, &c, &metadata(), 0),
        Gate::Close(_)
    ));
    let (code, _, _, _, close) = auth_answer(step(&mut conn, &c, &authenticate(b"x"), 0));
    assert_eq!((code, close), (34, true));
    for name in ["GSSAPI", "plain", "SCRAM-SHA-1"] {
        let mut conn = SaslConnection::new();
        let (code, listed, close) = handshake_answer(step(&mut conn, &c, &handshake(name), 0));
        assert_eq!((code, close), (33, true), "{name}");
        assert_eq!(listed.len(), 3);
    }
    let only_plain = SaslConfig {
        mechanisms: vec![Mechanism::Plain],
        ..config(0)
    };
    let mut conn = SaslConnection::new();
    let (code, _, _) =
        handshake_answer(step(&mut conn, &only_plain, &handshake("SCRAM-SHA-256"), 0));
    assert_eq!(code, 33);
    // Between the handshake and SaslAuthenticate, another request closes.
    let mut conn = SaslConnection::new();
    handshake_answer(step(&mut conn, &c, &handshake("PLAIN"), 0));
    assert!(matches!(
        step(&mut conn, &c, &metadata(), 0),
        Gate::Close(_)
    ));
}

/// SCRAM-SHA-256 and -512: the two-message exchange authenticates `User:bob` and proves the
/// server knows the credential; a wrong password or an unknown user fails with Kafka's
/// message.
#[test]
fn scram_exchange() {
    let c = config(0);
    for m in ScramMechanism::ALL {
        let run = |user: &str, password: &str| {
            let mut conn = SaslConnection::new();
            handshake_answer(step(&mut conn, &c, &handshake(m.name()), 0));
            let first = scram::client::first(user, "clientnonce");
            let (code, _, server_first, _, close) =
                auth_answer(step(&mut conn, &c, &authenticate(first.as_bytes()), 0));
            if code != 0 {
                return (conn, code, close, Vec::new());
            }
            assert!(!close);
            let server_first = String::from_utf8(server_first).unwrap();
            assert!(
                server_first.starts_with("r=clientnoncesrvnonce,s="),
                "{server_first}"
            );
            let last = scram::client::last(m, password, &first, &server_first);
            let (code, message, server_last, _, close) =
                auth_answer(step(&mut conn, &c, &authenticate(last.as_bytes()), 0));
            if code != 0 {
                assert_eq!(message, Some(failed_message(Mechanism::Scram(m))));
            }
            (conn, code, close, server_last)
        };
        let (conn, code, close, server_last) = run("bob", "bob-secret");
        assert_eq!((code, close), (0, false));
        assert_eq!(conn.principal(), Some("User:bob"));
        let cred = bob_credential(m);
        assert!(server_last.starts_with(b"v="));
        assert!(!cred.server_key.is_empty());
        let (conn, code, close, _) = run("bob", "wrong");
        assert_eq!((code, close, conn.principal()), (58, true, None));
        let (conn, code, close, _) = run("nobody", "bob-secret");
        assert_eq!((code, close, conn.principal()), (58, true, None));
    }
}

/// KIP-368: the answer carries the session lifetime; a request after it closes the
/// connection; a re-authentication as the same principal renews it; as another principal it
/// fails and closes.
#[test]
fn reauthentication() {
    let c = config(1000);
    let mut conn = SaslConnection::new();
    handshake_answer(step(&mut conn, &c, &handshake("PLAIN"), 0));
    let (_, _, _, lifetime, _) = auth_answer(step(
        &mut conn,
        &c,
        &authenticate(b"\0alice\0alice-secret"),
        0,
    ));
    assert_eq!(lifetime, 1000);
    assert!(matches!(step(&mut conn, &c, &metadata(), 999), Gate::Serve));
    assert!(matches!(
        step(&mut conn, &c, &metadata(), 1000),
        Gate::Close(_)
    ));
    // Renewed at 900: good until 1900.
    let (code, _, _) = handshake_answer(step(&mut conn, &c, &handshake("PLAIN"), 900));
    assert_eq!(code, 0);
    let (code, ..) = auth_answer(step(
        &mut conn,
        &c,
        &authenticate(b"\0alice\0alice-secret"),
        900,
    ));
    assert_eq!(code, 0);
    assert!(matches!(
        conn.take_event(),
        Some(Event::Authenticated {
            reauthentication: true,
            ..
        })
    ));
    assert!(matches!(
        step(&mut conn, &c, &metadata(), 1500),
        Gate::Serve
    ));
    // Another mechanism on re-authentication is refused.
    let (code, _, close) = handshake_answer(step(&mut conn, &c, &handshake("SCRAM-SHA-256"), 1500));
    assert_eq!((code, close), (34, true));
    // Another principal on re-authentication fails.
    let mut two = SaslConfig { ..config(1000) };
    two.plain_users.insert("eve".into(), "eve-secret".into());
    let mut conn = SaslConnection::new();
    handshake_answer(step(&mut conn, &two, &handshake("PLAIN"), 0));
    auth_answer(step(
        &mut conn,
        &two,
        &authenticate(b"\0alice\0alice-secret"),
        0,
    ));
    handshake_answer(step(&mut conn, &two, &handshake("PLAIN"), 10));
    let (code, message, _, _, close) = auth_answer(step(
        &mut conn,
        &two,
        &authenticate(b"\0eve\0eve-secret"),
        10,
    ));
    assert_eq!((code, close), (58, true));
    assert!(message.unwrap().contains("Cannot change principals"));
}

/// A listener without SASL answers both SASL requests ILLEGAL_SASL_STATE.
#[test]
fn illegal_state_without_sasl() {
    match illegal_state(&RequestKind::SaslHandshake(Default::default())) {
        Some(ResponseKind::SaslHandshake(r)) => assert_eq!(r.error_code, 34),
        other => panic!("{other:?}"),
    }
    assert!(illegal_state(&RequestKind::Metadata(Default::default())).is_none());
}
