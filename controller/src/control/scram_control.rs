//! AlterUserScramCredentials and DescribeUserScramCredentials (Kafka's `ScramControlManager`):
//! credentials become UserScramCredential and RemoveUserScramCredential records; describing
//! reads the image. Results carry Kafka's error codes and messages, one per user.
//!
//! | request | checks, per user (Kafka's code and message) | records |
//! |---|---|---|
//! | AlterUserScramCredentials | a (user, mechanism) named twice: DUPLICATE_RESOURCE; an empty name, iterations outside 4096-16384, an empty salt or salted password: UNACCEPTABLE_CREDENTIAL; a mechanism code that is none of Kafka's: UNSUPPORTED_SASL_MECHANISM; a deletion of a credential not in the image: RESOURCE_NOT_FOUND | for a user whose every alteration passes: one RemoveUserScramCredential per deletion, then one UserScramCredential per upsertion (keys derived from the salted password); a user with one failing alteration gets that error and none of its alterations |
//! | DescribeUserScramCredentials | a user named twice: DUPLICATE_RESOURCE; a user without credentials: RESOURCE_NOT_FOUND | none: each user's mechanisms and iterations (no users named: every user) |
//!
//! A request that would write more than `records_per_batch_max` records is refused whole.

use std::collections::{BTreeMap, HashSet};

use super::{ControllerResult, View};
use crate::error::ApiError;
use crate::records::{
    MetadataRecord, RemoveUserScramCredentialRecordV1, UserScramCredentialRecordV1,
};
use crate::scram::{ScramCredential, ScramImage, ScramMechanism, ITERATIONS_MAX, ITERATIONS_MIN};

/// Kafka's UNSUPPORTED_SASL_MECHANISM.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// Kafka's RESOURCE_NOT_FOUND.
pub const RESOURCE_NOT_FOUND: i16 = 91;
/// Kafka's DUPLICATE_RESOURCE.
pub const DUPLICATE_RESOURCE: i16 = 92;
/// Kafka's UNACCEPTABLE_CREDENTIAL.
pub const UNACCEPTABLE_CREDENTIAL: i16 = 93;

/// A credential to remove (Kafka's `ScramCredentialDeletion`).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ScramCredentialDeletion {
    pub name: String,
    /// Kafka's code (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
    pub mechanism: i8,
}

/// A credential to set (Kafka's `ScramCredentialUpsertion`): the client salted the password.
#[derive(Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ScramCredentialUpsertion {
    pub name: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

impl std::fmt::Debug for ScramCredentialUpsertion {
    // The salted password stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredentialUpsertion")
            .field("name", &self.name)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Kafka's AlterUserScramCredentials.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct AlterUserScramCredentialsRequest {
    pub deletions: Vec<ScramCredentialDeletion>,
    pub upsertions: Vec<ScramCredentialUpsertion>,
}

/// One user's outcome: Kafka's error code (0: done) and message.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ScramUserResult {
    pub user: String,
    pub error_code: i16,
    pub error_message: Option<String>,
}

/// One result per user named, in the order each was first named (deletions first).
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct AlterUserScramCredentialsResponse {
    pub results: Vec<ScramUserResult>,
}

/// Kafka's DescribeUserScramCredentials: `None` (or no names) describes every user.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct DescribeUserScramCredentialsRequest {
    pub users: Option<Vec<String>>,
}

/// One user's credentials: (mechanism code, iterations) each, or an error.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribedScramUser {
    pub user: String,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub credentials: Vec<(i8, i32)>,
}

#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct DescribeUserScramCredentialsResponse {
    pub results: Vec<DescribedScramUser>,
}

fn failure(code: i16, message: &str) -> (i16, Option<String>) {
    (code, Some(message.to_owned()))
}

/// The mechanism of a change naming user `name`, or the error of a nameless user or an
/// unknown mechanism (checked first, in this order, for upsertions and deletions alike).
fn named_mechanism(name: &str, code: i8) -> Result<ScramMechanism, (i16, Option<String>)> {
    if name.is_empty() {
        return Err(failure(
            UNACCEPTABLE_CREDENTIAL,
            "Username must not be empty",
        ));
    }
    ScramMechanism::from_code(code)
        .ok_or_else(|| failure(UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
}

/// The error of one upsertion, as Kafka's `ScramControlManager.validateUpsertion` and the
/// broker's checks say it.
fn upsertion_error(u: &ScramCredentialUpsertion) -> Option<(i16, Option<String>)> {
    let mechanism = match named_mechanism(&u.name, u.mechanism) {
        Ok(m) => m,
        Err(e) => return Some(e),
    };
    if u.iterations < ITERATIONS_MIN {
        return Some(failure(UNACCEPTABLE_CREDENTIAL, "Too few iterations"));
    }
    if u.iterations > ITERATIONS_MAX {
        return Some(failure(UNACCEPTABLE_CREDENTIAL, "Too many iterations"));
    }
    if u.salt.is_empty() {
        return Some(failure(UNACCEPTABLE_CREDENTIAL, "Salt must not be empty"));
    }
    if u.salted_password.len() != mechanism.hash_bytes() {
        return Some(failure(
            UNACCEPTABLE_CREDENTIAL,
            "The salted password is not of the mechanism's hash length",
        ));
    }
    None
}

fn deletion_error(
    scram: &ScramImage,
    d: &ScramCredentialDeletion,
) -> Option<(i16, Option<String>)> {
    let mechanism = match named_mechanism(&d.name, d.mechanism) {
        Ok(m) => m,
        Err(e) => return Some(e),
    };
    if scram.get(&d.name, mechanism).is_none() {
        return Some(failure(
            RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        ));
    }
    None
}

pub(crate) fn alter_user_scram_credentials(
    view: View<'_>,
    req: &AlterUserScramCredentialsRequest,
) -> Result<ControllerResult<AlterUserScramCredentialsResponse>, ApiError> {
    let scram = &view.image.scram;
    // Each user's first error, in the order users are first named.
    let mut order: Vec<&str> = Vec::new();
    let mut errors: BTreeMap<&str, (i16, Option<String>)> = BTreeMap::new();
    let mut seen: HashSet<(&str, i8)> = HashSet::new();
    let names = req
        .deletions
        .iter()
        .map(|d| (d.name.as_str(), d.mechanism, deletion_error(scram, d)))
        .chain(
            req.upsertions
                .iter()
                .map(|u| (u.name.as_str(), u.mechanism, upsertion_error(u))),
        );
    for (name, mechanism, error) in names {
        if !order.contains(&name) {
            order.push(name);
        }
        let error = if seen.insert((name, mechanism)) {
            error
        } else {
            Some(failure(
                DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            ))
        };
        if let Some(e) = error {
            errors.entry(name).or_insert(e);
        }
    }
    let mut records = Vec::new();
    for d in &req.deletions {
        if !errors.contains_key(d.name.as_str()) {
            records.push(MetadataRecord::RemoveUserScramCredential(
                RemoveUserScramCredentialRecordV1 {
                    name: d.name.clone(),
                    mechanism: d.mechanism,
                },
            ));
        }
    }
    for u in &req.upsertions {
        if errors.contains_key(u.name.as_str()) {
            continue;
        }
        let mechanism = ScramMechanism::from_code(u.mechanism).expect("validated above");
        let c = ScramCredential::from_salted_password(
            mechanism,
            &u.salted_password,
            u.salt.clone(),
            u.iterations,
        );
        records.push(MetadataRecord::UserScramCredential(
            UserScramCredentialRecordV1 {
                name: u.name.clone(),
                mechanism: u.mechanism,
                salt: c.salt,
                stored_key: c.stored_key,
                server_key: c.server_key,
                iterations: c.iterations,
            },
        ));
    }
    if records.len() > view.config.records_per_batch_max {
        return Err(ApiError::TooManyRecords {
            records: records.len(),
            max: view.config.records_per_batch_max,
        });
    }
    let results = order
        .into_iter()
        .map(|user| {
            let (error_code, error_message) = errors.remove(user).unwrap_or((0, None));
            ScramUserResult {
                user: user.to_owned(),
                error_code,
                error_message,
            }
        })
        .collect();
    Ok(ControllerResult::new(
        records,
        AlterUserScramCredentialsResponse { results },
    ))
}

/// The credentials of the users named (every user when none is named), from `scram`.
pub(crate) fn describe_user_scram_credentials(
    scram: &ScramImage,
    req: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let describe = |user: &str| {
        let credentials: Vec<(i8, i32)> = scram
            .mechanisms(user)
            .into_iter()
            .map(|(m, i)| (m.code(), i))
            .collect();
        let (error_code, error_message) = if credentials.is_empty() {
            failure(RESOURCE_NOT_FOUND, "Attempt to describe nonexistent user")
        } else {
            (0, None)
        };
        DescribedScramUser {
            user: user.to_owned(),
            error_code,
            error_message,
            credentials,
        }
    };
    let results = match req.users.as_deref() {
        None | Some([]) => scram.users().map(describe).collect(),
        Some(users) => {
            let mut out: Vec<DescribedScramUser> = Vec::new();
            let mut seen = HashSet::new();
            let mut duplicated = HashSet::new();
            for u in users {
                if !seen.insert(u.as_str()) {
                    duplicated.insert(u.as_str());
                }
            }
            let mut done = HashSet::new();
            for u in users {
                if !done.insert(u.as_str()) {
                    continue;
                }
                if duplicated.contains(u.as_str()) {
                    let (error_code, error_message) = failure(
                        DUPLICATE_RESOURCE,
                        "Cannot describe SCRAM credentials for the same user twice in a single request",
                    );
                    out.push(DescribedScramUser {
                        user: u.clone(),
                        error_code,
                        error_message,
                        credentials: vec![],
                    });
                } else {
                    out.push(describe(u));
                }
            }
            out
        }
    };
    DescribeUserScramCredentialsResponse { results }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::test_harness::Harness;
    use crate::scram::salted_password;
    use crate::{decode_batch, encode_batch, MetadataImage};

    fn upsert(name: &str, mechanism: ScramMechanism, password: &str) -> ScramCredentialUpsertion {
        let salt = b"0123456789abcdef".to_vec();
        ScramCredentialUpsertion {
            name: name.into(),
            mechanism: mechanism.code(),
            iterations: 4096,
            salted_password: salted_password(mechanism, password.as_bytes(), &salt, 4096),
            salt,
        }
    }

    /// Upserts write records whose keys derive from the salted password; a credential then
    /// describes with its mechanism and iterations, a deletion removes it, and the records
    /// rebuild the same image from a snapshot.
    #[test]
    fn alter_then_describe_then_delete() {
        let mut h = Harness::new();
        let req = AlterUserScramCredentialsRequest {
            deletions: vec![],
            upsertions: vec![
                upsert("alice", ScramMechanism::ScramSha256, "alice-secret"),
                upsert("alice", ScramMechanism::ScramSha512, "alice-secret"),
                upsert("bob", ScramMechanism::ScramSha256, "bob-secret"),
            ],
        };
        let r = h.c.alter_user_scram_credentials(&req).unwrap();
        assert_eq!(r.records.len(), 3);
        assert!(r.response.results.iter().all(|u| u.error_code == 0));
        assert_eq!(
            r.response
                .results
                .iter()
                .map(|u| u.user.as_str())
                .collect::<Vec<_>>(),
            ["alice", "bob"]
        );
        h.commit(&r.records);
        let image = h.c.committed_image().clone();
        let stored = image
            .scram
            .get("alice", ScramMechanism::ScramSha256)
            .unwrap();
        assert_eq!(
            stored,
            &ScramCredential::from_password(
                ScramMechanism::ScramSha256,
                "alice-secret",
                b"0123456789abcdef".to_vec(),
                4096
            )
        );
        let d = describe_user_scram_credentials(
            &image.scram,
            &DescribeUserScramCredentialsRequest { users: None },
        );
        assert_eq!(d.results.len(), 2);
        assert_eq!(d.results[0].credentials, vec![(1, 4096), (2, 4096)]);
        let snap = encode_batch(&image.snapshot_records());
        let back =
            MetadataImage::from_snapshot(image.end_offset, decode_batch(&snap).unwrap()).unwrap();
        assert_eq!(back.scram, image.scram);

        let del = AlterUserScramCredentialsRequest {
            deletions: vec![ScramCredentialDeletion {
                name: "alice".into(),
                mechanism: 1,
            }],
            upsertions: vec![],
        };
        let r = h.c.alter_user_scram_credentials(&del).unwrap();
        h.commit(&r.records);
        assert_eq!(
            h.c.committed_image().scram.mechanisms("alice"),
            vec![(ScramMechanism::ScramSha512, 4096)]
        );
    }

    /// Each refusal has Kafka's code, applies to the whole user, and writes nothing for it.
    #[test]
    fn refusals_have_kafkas_codes() {
        let h = Harness::new();
        let mut few = upsert("few", ScramMechanism::ScramSha256, "x");
        few.iterations = 4095;
        let mut many = upsert("many", ScramMechanism::ScramSha256, "x");
        many.iterations = 16385;
        let mut unknown = upsert("unknown", ScramMechanism::ScramSha256, "x");
        unknown.mechanism = 0;
        let req = AlterUserScramCredentialsRequest {
            deletions: vec![ScramCredentialDeletion {
                name: "ghost".into(),
                mechanism: 1,
            }],
            upsertions: vec![
                few,
                many,
                unknown,
                upsert("", ScramMechanism::ScramSha256, "x"),
                upsert("twice", ScramMechanism::ScramSha256, "x"),
                upsert("twice", ScramMechanism::ScramSha256, "y"),
                upsert("ok", ScramMechanism::ScramSha256, "x"),
            ],
        };
        let r = h.c.alter_user_scram_credentials(&req).unwrap();
        let codes: Vec<(&str, i16)> = r
            .response
            .results
            .iter()
            .map(|u| (u.user.as_str(), u.error_code))
            .collect();
        assert_eq!(
            codes,
            [
                ("ghost", RESOURCE_NOT_FOUND),
                ("few", UNACCEPTABLE_CREDENTIAL),
                ("many", UNACCEPTABLE_CREDENTIAL),
                ("unknown", UNSUPPORTED_SASL_MECHANISM),
                ("", UNACCEPTABLE_CREDENTIAL),
                ("twice", DUPLICATE_RESOURCE),
                ("ok", 0),
            ]
        );
        assert_eq!(r.records.len(), 1);
        let d = describe_user_scram_credentials(
            &ScramImage::default(),
            &DescribeUserScramCredentialsRequest {
                users: Some(vec!["a".into(), "b".into(), "a".into()]),
            },
        );
        let codes: Vec<(&str, i16)> = d
            .results
            .iter()
            .map(|u| (u.user.as_str(), u.error_code))
            .collect();
        assert_eq!(
            codes,
            [("a", DUPLICATE_RESOURCE), ("b", RESOURCE_NOT_FOUND)]
        );
    }
}
