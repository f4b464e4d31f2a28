//! SCRAM credentials (RFC 5802, with SHA-256 and SHA-512 as RFC 7677 and Kafka name them):
//! the mechanisms with Kafka's codes, the derivations from a salted password, and the image of
//! the credentials the log holds (Kafka's `UserScramCredentialRecord`s).
//!
//! A credential is what Kafka stores: the salt, the iteration count, `StoredKey = H(HMAC(
//! SaltedPassword, "Client Key"))` and `ServerKey = HMAC(SaltedPassword, "Server Key")`. The
//! password and the salted password are never stored: a client (Kafka's `kafka-configs`,
//! `corum users`) salts the password ([`salted_password`], SCRAM's `Hi`: PBKDF2 with the
//! mechanism's HMAC) and sends the salted password with the salt and iterations; the
//! controller derives the two keys ([`ScramCredential::from_salted_password`]) into the record.
//! The hashes, HMAC and PBKDF2 are RustCrypto's.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// The fewest iterations Kafka accepts for a SCRAM credential (`ScramMechanism.minIterations`).
pub const ITERATIONS_MIN: i32 = 4096;
/// The most iterations Kafka accepts (`ScramMechanism.maxIterations`).
pub const ITERATIONS_MAX: i32 = 16384;

/// A SCRAM mechanism, with Kafka's int8 code (`ScramMechanism.type`) as its discriminant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    ScramSha256 = 1,
    ScramSha512 = 2,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::ScramSha256, ScramMechanism::ScramSha512];

    /// Kafka's code of the mechanism (1 or 2).
    pub fn code(self) -> i8 {
        self as i8
    }

    /// The mechanism of Kafka code `code`, if any (0 is Kafka's UNKNOWN).
    pub fn from_code(code: i8) -> Option<ScramMechanism> {
        match code {
            1 => Some(ScramMechanism::ScramSha256),
            2 => Some(ScramMechanism::ScramSha512),
            _ => None,
        }
    }

    /// The SASL name (`SCRAM-SHA-256`).
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::ScramSha256 => "SCRAM-SHA-256",
            ScramMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism named `name` (exact SASL name, as Kafka matches it).
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The length of the mechanism's hash, in bytes (32 or 64).
    pub fn hash_bytes(self) -> usize {
        match self {
            ScramMechanism::ScramSha256 => 32,
            ScramMechanism::ScramSha512 => 64,
        }
    }

    /// `H(data)`.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::ScramSha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::ScramSha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `HMAC(key, data)`.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::ScramSha256 => {
                let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
                    .expect("HMAC takes a key of any length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            ScramMechanism::ScramSha512 => {
                let mut mac = <Hmac<Sha512> as Mac>::new_from_slice(key)
                    .expect("HMAC takes a key of any length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }
}

impl std::fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// SCRAM's `Hi(password, salt, iterations)`: PBKDF2 with the mechanism's HMAC, one block.
/// `iterations` must be positive (callers check Kafka's range first).
pub fn salted_password(
    mechanism: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    assert!(iterations > 0, "SCRAM needs at least one iteration");
    let mut out = vec![0u8; mechanism.hash_bytes()];
    match mechanism {
        ScramMechanism::ScramSha256 => {
            pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
        }
        ScramMechanism::ScramSha512 => {
            pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
        }
    }
    out
}

/// `ClientKey = HMAC(SaltedPassword, "Client Key")`.
pub fn client_key(mechanism: ScramMechanism, salted_password: &[u8]) -> Vec<u8> {
    mechanism.hmac(salted_password, b"Client Key")
}

/// `ServerKey = HMAC(SaltedPassword, "Server Key")`.
pub fn server_key(mechanism: ScramMechanism, salted_password: &[u8]) -> Vec<u8> {
    mechanism.hmac(salted_password, b"Server Key")
}

/// `StoredKey = H(ClientKey)`.
pub fn stored_key(mechanism: ScramMechanism, client_key: &[u8]) -> Vec<u8> {
    mechanism.hash(client_key)
}

/// `a XOR b` (equal lengths; a shorter one is padded with zeros, which never verifies).
pub fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0))
        .collect()
}

/// Whether `a` and `b` are equal, in time that depends on their lengths only.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// One user's credential for one mechanism, as the log stores it.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredential {
    // The keys stay out of logs: a stored key lets its holder check guessed passwords.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The credential of `salted_password` (what AlterUserScramCredentials carries).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: Vec<u8>,
        iterations: i32,
    ) -> ScramCredential {
        ScramCredential {
            salt,
            stored_key: stored_key(mechanism, &client_key(mechanism, salted_password)),
            server_key: server_key(mechanism, salted_password),
            iterations,
        }
    }

    /// The credential of `password` with `salt` and `iterations` (tests, and clients that
    /// salt themselves).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: Vec<u8>,
        iterations: i32,
    ) -> ScramCredential {
        let salted = salted_password(mechanism, password.as_bytes(), &salt, iterations as u32);
        ScramCredential::from_salted_password(mechanism, &salted, salt, iterations)
    }

    /// Whether the record's fields make a credential replay accepts: keys of the mechanism's
    /// hash length, a salt, iterations in Kafka's range.
    pub fn is_valid(&self, mechanism: ScramMechanism) -> bool {
        self.stored_key.len() == mechanism.hash_bytes()
            && self.server_key.len() == mechanism.hash_bytes()
            && !self.salt.is_empty()
            && (ITERATIONS_MIN..=ITERATIONS_MAX).contains(&self.iterations)
    }
}

/// The credentials of the committed (or in-flight) log: by user name, then mechanism. A
/// persistent map, so a clone is O(1) (what the node publishes to its Kafka listeners).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScramImage {
    by_user: imbl::OrdMap<String, imbl::OrdMap<ScramMechanism, ScramCredential>>,
}

impl ScramImage {
    /// The credential of `user` for `mechanism`.
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.by_user.get(user)?.get(&mechanism)
    }

    /// Every mechanism `user` has a credential for, with its iterations.
    pub fn mechanisms(&self, user: &str) -> Vec<(ScramMechanism, i32)> {
        self.by_user
            .get(user)
            .map(|m| m.iter().map(|(k, c)| (*k, c.iterations)).collect())
            .unwrap_or_default()
    }

    /// The users with a credential, in name order.
    pub fn users(&self) -> impl Iterator<Item = &str> + '_ {
        self.by_user.keys().map(String::as_str)
    }

    /// Every credential, by user then mechanism.
    pub fn iter(&self) -> impl Iterator<Item = (&str, ScramMechanism, &ScramCredential)> + '_ {
        self.by_user
            .iter()
            .flat_map(|(u, m)| m.iter().map(move |(k, c)| (u.as_str(), *k, c)))
    }

    pub fn len(&self) -> usize {
        self.by_user.values().map(|m| m.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_user.is_empty()
    }

    /// Whether `other` is this very image (no replay in between): cheap, for publishing.
    pub fn same(&self, other: &ScramImage) -> bool {
        self.by_user.ptr_eq(&other.by_user)
    }

    /// Sets (adds or replaces) `user`'s credential for `mechanism`. The caller validated it.
    pub fn replay_upsert(
        &mut self,
        user: &str,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    ) {
        let mut m = self.by_user.get(user).cloned().unwrap_or_default();
        m.insert(mechanism, credential);
        self.by_user.insert(user.to_owned(), m);
    }

    /// Removes `user`'s credential for `mechanism`; false when there is none.
    pub fn replay_remove(&mut self, user: &str, mechanism: ScramMechanism) -> bool {
        let Some(mut m) = self.by_user.get(user).cloned() else {
            return false;
        };
        if m.remove(&mechanism).is_none() {
            return false;
        }
        if m.is_empty() {
            self.by_user.remove(user);
        } else {
            self.by_user.insert(user.to_owned(), m);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(text: &str) -> Vec<u8> {
        // A tiny decoder for the test vectors (the crate does not link base64).
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut bits = 0u32;
        let mut n = 0;
        let mut out = Vec::new();
        for c in text.bytes().filter(|&c| c != b'=') {
            let v = ALPHABET.iter().position(|&a| a == c).expect("base64") as u32;
            bits = (bits << 6) | v;
            n += 6;
            if n >= 8 {
                n -= 8;
                out.push((bits >> n) as u8);
            }
        }
        out
    }

    /// RFC 7677's example (user "user", password "pencil", 4096 iterations): the client proof
    /// and server signature of its messages follow from the keys derived here.
    #[test]
    fn rfc_7677_keys() {
        let m = ScramMechanism::ScramSha256;
        let salt = b64("W22ZaJ0SNY7soEsUEjb6gQ==");
        let salted = salted_password(m, b"pencil", &salt, 4096);
        let auth_message = "n=user,r=rOprNGfwEbeRWgbNEkqO,\
            r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,\
            c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let ck = client_key(m, &salted);
        let sk = stored_key(m, &ck);
        let signature = m.hmac(&sk, auth_message.as_bytes());
        assert_eq!(
            xor(&ck, &signature),
            b64("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        );
        let server_signature = m.hmac(&server_key(m, &salted), auth_message.as_bytes());
        assert_eq!(
            server_signature,
            b64("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
        );
        let c = ScramCredential::from_password(m, "pencil", salt, 4096);
        assert_eq!(c.stored_key, sk);
        assert!(c.is_valid(m));
        assert!(!c.is_valid(ScramMechanism::ScramSha512));
    }

    /// RFC 5802's SCRAM-SHA-1 example is not served; SHA-512's keys are 64 bytes and differ.
    #[test]
    fn sha512_differs() {
        let a = ScramCredential::from_password(ScramMechanism::ScramSha256, "p", vec![1], 4096);
        let b = ScramCredential::from_password(ScramMechanism::ScramSha512, "p", vec![1], 4096);
        assert_eq!(b.stored_key.len(), 64);
        assert_ne!(a.stored_key[..], b.stored_key[..32]);
    }

    #[test]
    fn codes_and_names() {
        for m in ScramMechanism::ALL {
            assert_eq!(ScramMechanism::from_code(m.code()), Some(m));
            assert_eq!(ScramMechanism::from_name(m.name()), Some(m));
        }
        assert_eq!(ScramMechanism::from_code(0), None);
        assert_eq!(ScramMechanism::from_name("scram-sha-256"), None);
    }

    /// Upserts replace, removals of the last mechanism drop the user, a removal of nothing
    /// reports it.
    #[test]
    fn image_upsert_and_remove() {
        let m = ScramMechanism::ScramSha256;
        let c = ScramCredential::from_password(m, "x", vec![1, 2], 4096);
        let mut img = ScramImage::default();
        assert!(!img.replay_remove("alice", m));
        img.replay_upsert("alice", m, c.clone());
        img.replay_upsert("alice", ScramMechanism::ScramSha512, c.clone());
        assert_eq!(img.len(), 2);
        let before = img.clone();
        assert!(img.same(&before));
        assert!(img.replay_remove("alice", m));
        assert!(!img.same(&before));
        assert_eq!(
            img.mechanisms("alice"),
            vec![(ScramMechanism::ScramSha512, 4096)]
        );
        assert!(img.replay_remove("alice", ScramMechanism::ScramSha512));
        assert!(img.is_empty());
        assert_eq!(before.get("alice", m), Some(&c));
    }
}
