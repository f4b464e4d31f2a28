//! The server's side of a SCRAM exchange (RFC 5802, SHA-256/512 per RFC 7677), as Kafka's
//! `ScramSaslServer` runs it: two client messages, two answers.
//!
//! | state | client sends | server checks | server answers |
//! |---|---|---|---|
//! | first | `n,[a=authzid],n=user,r=cnonce[,ext]` | GS2 header without channel binding; `authzid` empty or the user; the user has a credential of the mechanism | `r=cnonce+snonce,s=salt,i=iterations` |
//! | final | `c=base64(gs2 header),r=cnonce+snonce[,ext],p=proof` | the channel binding is the first message's header, the nonce is the combined one, `H(proof XOR HMAC(StoredKey, AuthMessage)) == StoredKey` | `v=base64(HMAC(ServerKey, AuthMessage))`, authenticated as the user |
//!
//! Anything else fails the exchange ([`ScramFailure`]), which the listener answers with
//! SASL_AUTHENTICATION_FAILED and closes. The server nonce comes from the caller (the node
//! draws it from the OS), so the exchange is a pure function of its inputs: RFC 7677's test
//! vector runs through it unchanged.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use corum_controller::scram::{constant_time_eq, xor, ScramCredential, ScramMechanism};

/// Why an exchange failed (logged; the client is told only that authentication failed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScramFailure {
    #[error("malformed client message: {0}")]
    Malformed(&'static str),
    #[error("channel binding is not supported")]
    ChannelBinding,
    #[error("the authorization id differs from the user name")]
    AuthzidNotUser,
    #[error("user {user:?} has no {mechanism} credential")]
    UnknownUser {
        user: String,
        mechanism: ScramMechanism,
    },
    #[error("the final message's channel binding or nonce differs from the first's")]
    Mismatch,
    #[error("invalid client proof (wrong password)")]
    InvalidProof,
}

/// The first message, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientFirst {
    /// `n,,` or `n,a=…,`, as sent: the final message's `c=` must carry it.
    pub gs2_header: String,
    /// The user (SASLname decoded: `=2C` is `,`, `=3D` is `=`).
    pub user: String,
    pub nonce: String,
    /// The message after the GS2 header (part of AuthMessage).
    pub bare: String,
}

/// A SASLname decoded (RFC 5802 §5.1).
fn decode_saslname(name: &str) -> Result<String, ScramFailure> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => {
                return Err(ScramFailure::Malformed(
                    "a user name's = must be =2C or =3D",
                ))
            }
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A nonce: printable ASCII except `,` (RFC 5802's `printable`), at least one character.
fn check_nonce(nonce: &str) -> Result<(), ScramFailure> {
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(ScramFailure::Malformed(
            "the nonce is empty or not printable",
        ));
    }
    Ok(())
}

/// Parses a client-first-message.
pub fn parse_client_first(message: &[u8]) -> Result<ClientFirst, ScramFailure> {
    let text = std::str::from_utf8(message)
        .map_err(|_| ScramFailure::Malformed("the message is not UTF-8"))?;
    let (flag, rest) = text
        .split_once(',')
        .ok_or(ScramFailure::Malformed("no GS2 header"))?;
    match flag {
        "n" | "y" => {}
        f if f.starts_with("p=") => return Err(ScramFailure::ChannelBinding),
        _ => return Err(ScramFailure::Malformed("the GS2 flag is not n, y or p=")),
    }
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or(ScramFailure::Malformed("no authorization id field"))?;
    let authzid = match authzid {
        "" => None,
        a => Some(decode_saslname(a.strip_prefix("a=").ok_or(
            ScramFailure::Malformed("the authorization id is not a=…"),
        )?)?),
    };
    let gs2_header = text[..flag.len() + 1 + rest.len() - bare.len()].to_owned();
    let mut fields = bare.split(',');
    let user = fields
        .next()
        .and_then(|f| f.strip_prefix("n="))
        .ok_or(ScramFailure::Malformed("no n=user"))?;
    let nonce = fields
        .next()
        .and_then(|f| f.strip_prefix("r="))
        .ok_or(ScramFailure::Malformed("no r=nonce"))?;
    // Extensions (Kafka's `tokenauth=true`, ...): named by letters and `=`; `m=` is a
    // mandatory extension this server does not know.
    for ext in fields {
        if ext.starts_with("m=") {
            return Err(ScramFailure::Malformed(
                "a mandatory extension (m=) is not supported",
            ));
        }
        let (name, _) = ext
            .split_once('=')
            .ok_or(ScramFailure::Malformed("an extension without ="))?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(ScramFailure::Malformed(
                "an extension name is not alphanumeric",
            ));
        }
    }
    let user = decode_saslname(user)?;
    if user.is_empty() {
        return Err(ScramFailure::Malformed("an empty user name"));
    }
    check_nonce(nonce)?;
    if authzid.as_ref().is_some_and(|a| *a != user) {
        return Err(ScramFailure::AuthzidNotUser);
    }
    Ok(ClientFirst {
        gs2_header,
        user,
        nonce: nonce.to_owned(),
        bare: bare.to_owned(),
    })
}

/// A server between the first and the final client message.
#[derive(Clone, Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    first: ClientFirst,
    credential: ScramCredential,
    server_first: String,
    nonce: String,
}

impl ScramServer {
    /// Takes the client's first message; `server_nonce` is fresh randomness (printable, no
    /// `,`), `credential` looks up the user's. Returns the server and its first message.
    pub fn start(
        mechanism: ScramMechanism,
        message: &[u8],
        server_nonce: &str,
        credential: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<(ScramServer, Vec<u8>), ScramFailure> {
        let first = parse_client_first(message)?;
        let credential = credential(&first.user).ok_or_else(|| ScramFailure::UnknownUser {
            user: first.user.clone(),
            mechanism,
        })?;
        check_nonce(server_nonce).expect("the server draws a printable nonce");
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let reply = server_first.clone().into_bytes();
        Ok((
            ScramServer {
                mechanism,
                first,
                credential,
                server_first,
                nonce,
            },
            reply,
        ))
    }

    /// The user the first message named.
    pub fn user(&self) -> &str {
        &self.first.user
    }

    /// Takes the client's final message: on success the server's final message
    /// (`v=signature`); the exchange is over either way.
    pub fn finish(self, message: &[u8]) -> Result<Vec<u8>, ScramFailure> {
        let text = std::str::from_utf8(message)
            .map_err(|_| ScramFailure::Malformed("the message is not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramFailure::Malformed("no p=proof"))?;
        let mut fields = without_proof.split(',');
        let binding = fields
            .next()
            .and_then(|f| f.strip_prefix("c="))
            .ok_or(ScramFailure::Malformed("no c=channel binding"))?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(ScramFailure::Malformed("no r=nonce"))?;
        let binding = B64
            .decode(binding)
            .map_err(|_| ScramFailure::Malformed("c= is not base64"))?;
        let proof = B64
            .decode(proof)
            .map_err(|_| ScramFailure::Malformed("p= is not base64"))?;
        if binding != self.first.gs2_header.as_bytes() || nonce != self.nonce {
            return Err(ScramFailure::Mismatch);
        }
        let m = self.mechanism;
        let auth_message = format!("{},{},{without_proof}", self.first.bare, self.server_first);
        let client_signature = m.hmac(&self.credential.stored_key, auth_message.as_bytes());
        if proof.len() != m.hash_bytes() {
            return Err(ScramFailure::InvalidProof);
        }
        let client_key = xor(&proof, &client_signature);
        if !constant_time_eq(&m.hash(&client_key), &self.credential.stored_key) {
            return Err(ScramFailure::InvalidProof);
        }
        let server_signature = m.hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

/// The client's side, for tests: the messages a client with `password` sends.
pub mod client {
    use super::*;

    /// `n,,n=user,r=nonce`.
    pub fn first(user: &str, nonce: &str) -> String {
        format!(
            "n,,n={},r={nonce}",
            user.replace('=', "=3D").replace(',', "=2C")
        )
    }

    /// The final message answering `server_first`, for the client's `first` message.
    pub fn last(
        mechanism: ScramMechanism,
        password: &str,
        first: &str,
        server_first: &str,
    ) -> String {
        let mut salt = None;
        let mut iterations = None;
        let mut nonce = None;
        for f in server_first.split(',') {
            if let Some(v) = f.strip_prefix("r=") {
                nonce = Some(v);
            } else if let Some(v) = f.strip_prefix("s=") {
                salt = Some(B64.decode(v).expect("base64 salt"));
            } else if let Some(v) = f.strip_prefix("i=") {
                iterations = Some(v.parse::<u32>().expect("iterations"));
            }
        }
        let salted = corum_controller::scram::salted_password(
            mechanism,
            password.as_bytes(),
            &salt.expect("s="),
            iterations.expect("i="),
        );
        let without_proof = format!("c=biws,r={}", nonce.expect("r="));
        let bare = first.strip_prefix("n,,").expect("no authzid");
        let auth_message = format!("{bare},{server_first},{without_proof}");
        let ck = corum_controller::scram::client_key(mechanism, &salted);
        let sk = corum_controller::scram::stored_key(mechanism, &ck);
        let proof = xor(&ck, &mechanism.hmac(&sk, auth_message.as_bytes()));
        format!("{without_proof},p={}", B64.encode(proof))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rfc_credential() -> ScramCredential {
        ScramCredential::from_password(
            ScramMechanism::ScramSha256,
            "pencil",
            B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap(),
            4096,
        )
    }

    /// RFC 7677's exchange, byte for byte: the server's first message and its signature.
    #[test]
    fn rfc_7677_exchange() {
        let (server, first) = ScramServer::start(
            ScramMechanism::ScramSha256,
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            |u| (u == "user").then(rfc_credential),
        )
        .unwrap();
        assert_eq!(
            first,
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        assert_eq!(server.user(), "user");
        let last = server
            .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert_eq!(last, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }

    /// The test client agrees with the server for both mechanisms; a wrong password, another
    /// nonce or another channel binding fails.
    #[test]
    fn client_and_server_agree() {
        for m in ScramMechanism::ALL {
            let cred = ScramCredential::from_password(m, "s3cret", b"salty".to_vec(), 4096);
            let first = client::first("al,ice=", "abc");
            let run = |password: &str, tamper: &dyn Fn(String) -> String| {
                let (server, sf) = ScramServer::start(m, first.as_bytes(), "XYZ", |u| {
                    (u == "al,ice=").then(|| cred.clone())
                })
                .unwrap();
                let last = client::last(m, password, &first, std::str::from_utf8(&sf).unwrap());
                server.finish(tamper(last).as_bytes())
            };
            assert!(run("s3cret", &|s| s).unwrap().starts_with(b"v="));
            assert_eq!(run("wrong", &|s| s), Err(ScramFailure::InvalidProof));
            assert_eq!(
                run("s3cret", &|s| s.replace("r=abcXYZ", "r=abcXYQ")),
                Err(ScramFailure::Mismatch)
            );
            assert_eq!(
                run("s3cret", &|s| s.replace("c=biws", "c=eSws")),
                Err(ScramFailure::Mismatch)
            );
        }
    }

    #[test]
    fn first_message_refusals() {
        let start = |m: &[u8]| {
            ScramServer::start(ScramMechanism::ScramSha256, m, "n", |_| {
                Some(rfc_credential())
            })
            .map(|_| ())
        };
        assert_eq!(
            start(b"p=tls-unique,,n=u,r=a"),
            Err(ScramFailure::ChannelBinding)
        );
        assert_eq!(
            start(b"n,a=other,n=u,r=a"),
            Err(ScramFailure::AuthzidNotUser)
        );
        assert!(start(b"n,a=u,n=u,r=a").is_ok());
        assert!(start(b"n,,n=u,r=a,tokenauth=true").is_ok());
        for bad in [
            &b""[..],
            b"n",
            b"x,,n=u,r=a",
            b"n,,n=,r=a",
            b"n,,n=u=,r=a",
            b"n,,u,r=a",
            b"n,,n=u,r=",
            b"n,,n=u,r=a,m=x",
            b"n,,n=u,r=a\x01",
            b"\xff",
        ] {
            assert!(
                matches!(start(bad), Err(ScramFailure::Malformed(_))),
                "{bad:?}"
            );
        }
        let unknown = ScramServer::start(ScramMechanism::ScramSha256, b"n,,n=u,r=a", "n", |_| None);
        assert!(matches!(unknown, Err(ScramFailure::UnknownUser { .. })));
    }

    proptest! {
        /// Any bytes as either message: an error or a success, never a panic.
        #[test]
        fn any_bytes(first in proptest::collection::vec(any::<u8>(), 0..64),
                     last in proptest::collection::vec(any::<u8>(), 0..96)) {
            let started = ScramServer::start(ScramMechanism::ScramSha512, &first, "srv", |_| {
                Some(ScramCredential::from_password(ScramMechanism::ScramSha512, "p", vec![1], 4096))
            });
            if let Ok((server, _)) = started {
                let _ = server.finish(&last);
            }
        }
    }
}
