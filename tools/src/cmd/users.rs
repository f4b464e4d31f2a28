//! `corum users add|describe|delete`: SCRAM credentials (SCRAM-SHA-256, SCRAM-SHA-512) of the
//! users a SASL listener authenticates, as Kafka's
//! `kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[password=…]'` and
//! `--describe` manage them.
//!
//! | action | request | prints |
//! |---|---|---|
//! | `add --name U --mechanism M (--password P \| --password-file F) [--iterations N]` | AlterUserScramCredentials: an upsertion with a fresh 16-byte salt and the salted password (the password never leaves this process) | `Set M credential of user U.` |
//! | `delete --name U --mechanism M` | AlterUserScramCredentials: a deletion | `Deleted M credential of user U.` |
//! | `describe [--name U]...` | DescribeUserScramCredentials | `SCRAM credential configs for user-principal 'U' are M=iterations=N`, as `kafka-configs` |
//!
//! Like `corum acls` it speaks the private protocol (`--bootstrap`, the controllers' client
//! listeners). Kafka's own tools go through the Kafka listener, where the caller needs ALTER
//! (or DESCRIBE) on the cluster.

use std::fmt::Write as _;

use corum_client::{RequestBody, ResponseBody};
use corum_controller::control::scram_control::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest, ScramCredentialDeletion,
    ScramCredentialUpsertion,
};
use corum_controller::scram::{salted_password, ScramMechanism, ITERATIONS_MAX, ITERATIONS_MIN};
use serde::Serialize;

use crate::cmd::admin::{
    call, finish, kafka_error_name, to_json, with_client, ConnectArgs, ItemError, Outcome,
};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub conn: ConnectArgs,
    #[command(subcommand)]
    pub action: Action,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum Action {
    /// Set (add or replace) a user's credential for one mechanism.
    Add {
        #[arg(long)]
        name: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long)]
        mechanism: String,
        /// The password (visible in the process list: prefer --password-file).
        #[arg(
            long,
            conflicts_with = "password_file",
            required_unless_present = "password_file"
        )]
        password: Option<String>,
        /// A file whose first line is the password.
        #[arg(long, value_name = "FILE")]
        password_file: Option<std::path::PathBuf>,
        /// PBKDF2 iterations, 4096 to 16384 (Kafka's range; its tools' default is 4096).
        #[arg(long, default_value_t = ITERATIONS_MIN)]
        iterations: i32,
    },
    /// Remove a user's credential for one mechanism.
    Delete {
        #[arg(long)]
        name: String,
        #[arg(long)]
        mechanism: String,
    },
    /// The mechanisms and iterations of the users named (every user with none named).
    Describe {
        #[arg(long = "name")]
        names: Vec<String>,
    },
}

fn mechanism(name: &str) -> anyhow::Result<ScramMechanism> {
    ScramMechanism::from_name(&name.trim().to_ascii_uppercase()).ok_or_else(|| {
        anyhow::anyhow!("--mechanism {name:?}: expected SCRAM-SHA-256 or SCRAM-SHA-512")
    })
}

fn password(
    password: &Option<String>,
    file: &Option<std::path::PathBuf>,
) -> anyhow::Result<String> {
    if let Some(p) = password {
        return Ok(p.clone());
    }
    let path = file.as_ref().expect("clap requires one of the two");
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("reading the password file {}: {e}", path.display()))?;
    let first = text.lines().next().unwrap_or("");
    anyhow::ensure!(
        !first.is_empty(),
        "the password file {} is empty",
        path.display()
    );
    Ok(first.to_owned())
}

/// The AlterUserScramCredentials request of `add` or `delete` (`salt` for `add`).
pub fn alter_request(
    action: &Action,
    salt: &[u8],
) -> anyhow::Result<AlterUserScramCredentialsRequest> {
    match action {
        Action::Add {
            name,
            mechanism: m,
            password: p,
            password_file,
            iterations,
        } => {
            let m = mechanism(m)?;
            anyhow::ensure!(
                (ITERATIONS_MIN..=ITERATIONS_MAX).contains(iterations),
                "--iterations {iterations}: expected {ITERATIONS_MIN} to {ITERATIONS_MAX}"
            );
            let p = password(p, password_file)?;
            Ok(AlterUserScramCredentialsRequest {
                deletions: vec![],
                upsertions: vec![ScramCredentialUpsertion {
                    name: name.clone(),
                    mechanism: m.code(),
                    iterations: *iterations,
                    salt: salt.to_vec(),
                    salted_password: salted_password(m, p.as_bytes(), salt, *iterations as u32),
                }],
            })
        }
        Action::Delete { name, mechanism: m } => Ok(AlterUserScramCredentialsRequest {
            deletions: vec![ScramCredentialDeletion {
                name: name.clone(),
                mechanism: mechanism(m)?.code(),
            }],
            upsertions: vec![],
        }),
        Action::Describe { .. } => unreachable!("describe sends no alteration"),
    }
}

#[derive(Serialize)]
struct CredentialJson {
    mechanism: String,
    iterations: i32,
}

#[derive(Serialize)]
struct UserJson {
    user: String,
    credentials: Vec<CredentialJson>,
}

fn mechanism_name(code: i8) -> String {
    ScramMechanism::from_code(code)
        .map_or_else(|| format!("UNKNOWN({code})"), |m| m.name().to_owned())
}

fn item_error(code: i16, message: &Option<String>) -> ItemError {
    ItemError {
        code,
        name: kafka_error_name(code),
        message: message.clone().unwrap_or_default(),
    }
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if let Action::Describe { names } = &a.action {
        let req = DescribeUserScramCredentialsRequest {
            users: (!names.is_empty()).then(|| names.clone()),
        };
        let r = with_client(&a.conn, |client| async move {
            call(
                &client,
                RequestBody::DescribeUserScramCredentials(req),
                |r| match r {
                    ResponseBody::DescribeUserScramCredentials(r) => Ok(r),
                    other => Err(other),
                },
            )
            .await
        })?;
        let mut text = String::new();
        let mut users = Vec::new();
        let mut failures = Vec::new();
        for u in &r.results {
            if u.error_code != 0 {
                failures.push((u.user.clone(), item_error(u.error_code, &u.error_message)));
                continue;
            }
            let configs: Vec<String> = u
                .credentials
                .iter()
                .map(|(m, i)| format!("{}=iterations={i}", mechanism_name(*m)))
                .collect();
            let _ = writeln!(
                text,
                "SCRAM credential configs for user-principal '{}' are {}",
                u.user,
                configs.join(", ")
            );
            users.push(UserJson {
                user: u.user.clone(),
                credentials: u
                    .credentials
                    .iter()
                    .map(|(m, i)| CredentialJson {
                        mechanism: mechanism_name(*m),
                        iterations: *i,
                    })
                    .collect(),
            });
        }
        let mut outcome = Outcome::ok(text, to_json(&users));
        outcome.failures = failures;
        return finish(outcome, a.conn.json);
    }
    let mut salt = [0u8; 16];
    getrandom::getrandom(&mut salt).map_err(|e| anyhow::anyhow!("drawing a salt: {e}"))?;
    let req = alter_request(&a.action, &salt)?;
    let r = with_client(&a.conn, |client| async move {
        call(
            &client,
            RequestBody::AlterUserScramCredentials(req),
            |r| match r {
                ResponseBody::AlterUserScramCredentials(r) => Ok(r),
                other => Err(other),
            },
        )
        .await
    })?;
    let (verb, name, m) = match &a.action {
        Action::Add {
            name, mechanism: m, ..
        } => ("Set", name, m),
        Action::Delete { name, mechanism: m } => ("Deleted", name, m),
        Action::Describe { .. } => unreachable!("handled above"),
    };
    let m = mechanism(m)?;
    let mut outcome = Outcome::ok(String::new(), serde_json::Value::Null);
    for u in &r.results {
        if u.error_code != 0 {
            outcome
                .failures
                .push((u.user.clone(), item_error(u.error_code, &u.error_message)));
        }
    }
    if outcome.failures.is_empty() {
        outcome.text = format!("{verb} {m} credential of user {name}.\n");
        outcome.json = serde_json::json!({ "user": name, "mechanism": m.name(), "action": verb.to_lowercase() });
    }
    finish(outcome, a.conn.json)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(line: &str) -> Result<Args, clap::Error> {
        let words = std::iter::once("users").chain(line.split_whitespace());
        Cli::try_parse_from(words).map(|c| c.args)
    }

    /// `add` salts the password here: the request carries the salt, the iterations and the
    /// salted password (PBKDF2 of the password), never the password.
    #[test]
    fn add_sends_the_salted_password() {
        let a = parse("--bootstrap 127.0.0.1:9094 add --name alice --mechanism scram-sha-512 --password pw --iterations 8192").unwrap();
        let r = alter_request(&a.action, b"0123456789abcdef").unwrap();
        let u = &r.upsertions[0];
        assert_eq!(
            (u.name.as_str(), u.mechanism, u.iterations),
            ("alice", 2, 8192)
        );
        assert_eq!(
            u.salted_password,
            salted_password(
                ScramMechanism::ScramSha512,
                b"pw",
                b"0123456789abcdef",
                8192
            )
        );
        assert!(!u.salted_password.windows(2).any(|w| w == b"pw"));
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(
            parse("--bootstrap 127.0.0.1:9094 add --name a --mechanism SCRAM-SHA-256").is_err()
        );
        assert!(parse("--bootstrap 127.0.0.1:9094 add --name a --mechanism SCRAM-SHA-256 --password x --password-file f").is_err());
        let a =
            parse("--bootstrap 127.0.0.1:9094 add --name a --mechanism SCRAM-SHA-1 --password x")
                .unwrap();
        assert!(alter_request(&a.action, b"s").is_err());
        let a = parse("--bootstrap 127.0.0.1:9094 add --name a --mechanism SCRAM-SHA-256 --password x --iterations 100").unwrap();
        assert!(alter_request(&a.action, b"s").is_err());
        let a =
            parse("--bootstrap 127.0.0.1:9094 delete --name a --mechanism SCRAM-SHA-256").unwrap();
        let r = alter_request(&a.action, b"").unwrap();
        assert_eq!(r.deletions[0].mechanism, 1);
        assert!(parse("--bootstrap 127.0.0.1:9094 describe --name a --name b").is_ok());
    }
}
