//! AlterUserScramCredentials and DescribeUserScramCredentials: corum's requests of the same
//! names ([`corum_controller::control::scram_control`], which has Kafka's per-user codes and
//! messages), after the caller's own check (ALTER, DESCRIBE on the cluster, [`crate::auth`]).
//! The client salts the password (`kafka-configs --add-config 'SCRAM-SHA-256=[password=…]'`
//! sends the salted password, salt and iterations); the controller derives the stored and
//! server keys. Describing is a read any node answers ([`corum_protocol::LocalRead`]).

use corum_controller::control::scram_control::{
    AlterUserScramCredentialsRequest as CorumAlter,
    DescribeUserScramCredentialsRequest as CorumDescribe, ScramCredentialDeletion,
    ScramCredentialUpsertion,
};
use corum_protocol::{LocalRead, RequestBody, ResponseBody};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::text;
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::service::{call, read};

pub async fn alter_user_scram_credentials<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let req = CorumAlter {
        deletions: r
            .deletions
            .iter()
            .map(|d| ScramCredentialDeletion {
                name: d.name.as_str().to_owned(),
                mechanism: d.mechanism,
            })
            .collect(),
        upsertions: r
            .upsertions
            .iter()
            .map(|u| ScramCredentialUpsertion {
                name: u.name.as_str().to_owned(),
                mechanism: u.mechanism,
                iterations: u.iterations,
                salt: u.salt.to_vec(),
                salted_password: u.salted_password.to_vec(),
            })
            .collect(),
    };
    let result = call(
        backend,
        RequestBody::AlterUserScramCredentials(req),
        ctx.default_timeout_ms,
        |r| match r {
            ResponseBody::AlterUserScramCredentials(r) => Some(r),
            _ => None,
        },
    )
    .await;
    let results = match result {
        Ok(r) => r
            .results
            .into_iter()
            .map(|u| {
                AlterUserScramCredentialsResult::default()
                    .with_user(text(&u.user))
                    .with_error_code(u.error_code)
                    .with_error_message(u.error_message.as_deref().map(text))
            })
            .collect(),
        Err(e) => {
            // The whole request failed (not the controller, timed out): every user named
            // gets the error, once.
            let e = KafkaError::rpc(&e);
            let mut users: Vec<&str> = Vec::new();
            for name in r
                .deletions
                .iter()
                .map(|d| d.name.as_str())
                .chain(r.upsertions.iter().map(|u| u.name.as_str()))
            {
                if !users.contains(&name) {
                    users.push(name);
                }
            }
            users
                .into_iter()
                .map(|u| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(text(u))
                        .with_error_code(e.code)
                        .with_error_message(e.message.as_deref().map(text))
                })
                .collect()
        }
    };
    AlterUserScramCredentialsResponse::default().with_results(results)
}

pub async fn describe_user_scram_credentials<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    r: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let users = r
        .users
        .map(|users| users.iter().map(|u| u.name.as_str().to_owned()).collect());
    let body = read(LocalRead::DescribeUserScramCredentials(CorumDescribe {
        users,
    }));
    let result = call(backend, body, ctx.default_timeout_ms, |r| match r {
        ResponseBody::DescribeUserScramCredentials(r) => Some(r),
        _ => None,
    })
    .await;
    match result {
        Ok(r) => DescribeUserScramCredentialsResponse::default().with_results(
            r.results
                .into_iter()
                .map(|u| {
                    DescribeUserScramCredentialsResult::default()
                        .with_user(text(&u.user))
                        .with_error_code(u.error_code)
                        .with_error_message(u.error_message.as_deref().map(text))
                        .with_credential_infos(
                            u.credentials
                                .into_iter()
                                .map(|(mechanism, iterations)| {
                                    CredentialInfo::default()
                                        .with_mechanism(mechanism)
                                        .with_iterations(iterations)
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
        Err(e) => {
            let e = KafkaError::rpc(&e);
            DescribeUserScramCredentialsResponse::default()
                .with_error_code(e.code)
                .with_error_message(e.message.as_deref().map(text))
        }
    }
}
