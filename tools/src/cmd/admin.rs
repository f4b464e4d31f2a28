//! What the admin commands (`corum topics|configs|features|leaders|brokers`) share: how they
//! reach the quorum, how they name errors, and how they print and exit.
//!
//! # Reaching the quorum
//!
//! Every admin command takes `--bootstrap HOST:PORT,...` (the controllers' client listeners,
//! as `corum quorum describe` does) and sends corum's private requests through one
//! leader-following [`ControllerClient`]: it connects to any bootstrap server and follows
//! `NotController` to the active controller, for at most `--timeout-ms`. Reads are the plain
//! ones the active controller serves (not `LocalRead`), so a read right after an acknowledged
//! write sees it.
//!
//! # Output and exit code
//!
//! A command builds an [`Outcome`]: the text for a person, one JSON document (`--json`), and
//! the items that failed. [`finish`] prints the text or the JSON on stdout, then fails (exit
//! code 1, one `error:` line on stderr) if any item failed, naming each with Kafka's error
//! name and corum's message: `topic "orders": TOPIC_ALREADY_EXISTS: topic "orders" already
//! exists`. With `--json`, each item's error is in the document too, as
//! `{"code": 36, "name": "TOPIC_ALREADY_EXISTS", "message": "..."}` ([`ItemError`]). A request
//! that fails as a whole (no leader within the timeout, a refused request) prints nothing on
//! stdout and fails the same way.

use std::future::Future;
use std::time::Duration;

use anyhow::Context;
use corum_client::RpcError;
use corum_client::{ClientConfig, ClientError, ControllerClient, RequestBody, ResponseBody};
use corum_controller::ApiError;
use corum_engine::disk::executor_builder;
use serde::Serialize;

use crate::cmd::quorum::{parse_bootstrap, Bootstrap};

/// The longest one attempt of a request waits for its answer (the rest of `--timeout-ms` is
/// for following the leader).
const REQUEST_TIMEOUT_MAX: Duration = Duration::from_secs(5);

/// Where the quorum is and how to print: flattened into every admin command.
#[derive(clap::Args, Debug, Clone)]
pub struct ConnectArgs {
    /// Client endpoints of the controllers (HOST:PORT,...); any one of them suffices.
    #[arg(long, value_name = "HOST:PORT,...", value_parser = parse_bootstrap)]
    pub bootstrap: Bootstrap,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// How long a request may take, following leader changes included.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// A Kafka client properties file: `security.protocol=SSL` and the `ssl.*` keys for
    /// client listeners mapped to SSL (see `corum::cmd::command_config`).
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<std::path::PathBuf>,
}

impl ConnectArgs {
    /// The client's settings: `--timeout-ms` bounds the retries, each attempt waits at most
    /// [`REQUEST_TIMEOUT_MAX`].
    pub fn client_config(&self) -> anyhow::Result<ClientConfig> {
        anyhow::ensure!(self.timeout_ms >= 1, "--timeout-ms must be at least 1");
        let timeout = Duration::from_millis(self.timeout_ms);
        Ok(ClientConfig {
            request_timeout: REQUEST_TIMEOUT_MAX.min(timeout),
            retry_deadline: timeout,
            tls: crate::cmd::command_config::load_opt(self.command_config.as_deref())?,
            ..ClientConfig::new(self.bootstrap.0.clone())
        })
    }
}

/// Runs `f` with a client connected to the quorum, on a glommio executor of its own, and
/// returns what it returns.
pub fn with_client<T, F, Fut>(conn: &ConnectArgs, f: F) -> anyhow::Result<T>
where
    F: FnOnce(ControllerClient) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let config = conn.client_config()?;
    executor_builder("corum-admin")
        .make()
        .map_err(|e| anyhow::anyhow!("starting the glommio executor: {e}"))?
        .run(async move {
            let client = ControllerClient::connect(config)
                .await
                .context("connecting to the quorum")?;
            f(client).await
        })
}

/// Sends `body` and hands the answer to `pick`, which takes the response kind it expects
/// (anything else is a server bug, reported as such).
pub async fn call<T>(
    client: &ControllerClient,
    body: RequestBody,
    pick: impl FnOnce(ResponseBody) -> Result<T, ResponseBody>,
) -> anyhow::Result<T> {
    let kind = body.kind();
    let answer = client
        .call(body)
        .await
        .map_err(|e| anyhow::anyhow!("{kind}: {}", describe_client_error(&e)))?;
    pick(answer).map_err(|other| {
        anyhow::anyhow!(
            "{kind} was answered with a {} response (a server bug)",
            other.kind()
        )
    })
}

/// A client error for a person: whole-request refusals carry Kafka's error name, as item
/// errors do.
pub fn describe_client_error(e: &ClientError) -> String {
    match e {
        ClientError::Rpc(rpc) => ItemError::rpc(rpc).to_string(),
        ClientError::Api(api) => ItemError::api(api).to_string(),
        other => other.to_string(),
    }
}

/// Kafka's name of error `code` (`TOPIC_ALREADY_EXISTS` for 36), as its clients and tools
/// print it; `UNKNOWN_ERROR_CODE_<code>` for a code Kafka does not define.
pub fn kafka_error_name(code: i16) -> String {
    match kafka_protocol::error::ResponseError::try_from_code(code) {
        None => "NONE".to_owned(),
        Some(kafka_protocol::error::ResponseError::Unknown(code)) => {
            format!("UNKNOWN_ERROR_CODE_{code}")
        }
        // The codec names each error in CamelCase after Kafka's own constant
        // (`TopicAlreadyExists` for `TOPIC_ALREADY_EXISTS`): split at each capital.
        Some(known) => screaming_snake(&known.to_string()),
    }
}

fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// One item's failure: Kafka's code and name for it, and corum's message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ItemError {
    pub code: i16,
    pub name: String,
    pub message: String,
}

impl ItemError {
    /// The error of a per-item controller failure.
    pub fn api(e: &ApiError) -> ItemError {
        let code = corum_kafka::errors::api_error_code(e).code();
        let message = match e {
            ApiError::AuthorizationFailed(f) => refused(f),
            other => other.to_string(),
        };
        ItemError {
            code,
            name: kafka_error_name(code),
            message,
        }
    }

    /// The error of a request refused as a whole.
    pub fn rpc(e: &RpcError) -> ItemError {
        let k = corum_kafka::KafkaError::rpc(e);
        let message = match e {
            RpcError::AuthorizationFailed(f) => refused(f),
            RpcError::Api(api) => return ItemError::api(api),
            other => other.to_string(),
        };
        ItemError {
            code: k.code,
            name: kafka_error_name(k.code),
            message,
        }
    }
}

/// An authorization refusal for a person: Kafka's message naming the permission missing, and
/// the `corum acls` line a super user runs to grant it.
fn refused(f: &corum_controller::acl::AuthorizationFailure) -> String {
    format!(
        "{f} (a super user grants it with: {})",
        crate::cmd::acls::grant_hint(f)
    )
}

impl std::fmt::Display for ItemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name, self.message)
    }
}

/// What a command prints, and what failed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// For a person (each line ends in a newline).
    pub text: String,
    /// The `--json` document.
    pub json: serde_json::Value,
    /// `(item, error)` of each item that failed, in request order.
    pub failures: Vec<(String, ItemError)>,
}

impl Outcome {
    /// An outcome with nothing failed.
    pub fn ok(text: String, json: serde_json::Value) -> Outcome {
        Outcome {
            text,
            json,
            failures: Vec::new(),
        }
    }

    /// The `error:` line's message when items failed, `None` when none did.
    pub fn failure_message(&self) -> Option<String> {
        if self.failures.is_empty() {
            return None;
        }
        let items: Vec<String> = self
            .failures
            .iter()
            .map(|(item, e)| format!("{item}: {e}"))
            .collect();
        Some(items.join("; "))
    }
}

/// Prints `outcome` (text, or JSON with `json`) on stdout; fails naming every failed item.
pub fn finish(outcome: Outcome, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome.json)?);
    } else {
        print!("{}", outcome.text);
    }
    match outcome.failure_message() {
        Some(message) => anyhow::bail!("{message}"),
        None => Ok(()),
    }
}

/// Serializes a value that cannot fail to serialize (plain structs of strings and numbers).
pub fn to_json<T: Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("admin output types serialize to JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's names come out as its tools print them, including the irregular ones, and
    /// unknown codes are named by number.
    #[test]
    fn kafka_error_names() {
        assert_eq!(kafka_error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(kafka_error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(kafka_error_name(17), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(kafka_error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(kafka_error_name(40), "INVALID_CONFIG");
        assert_eq!(kafka_error_name(95), "INVALID_UPDATE_VERSION");
        assert_eq!(kafka_error_name(102), "BROKER_ID_NOT_REGISTERED");
        assert_eq!(kafka_error_name(0), "NONE");
        assert_eq!(kafka_error_name(9999), "UNKNOWN_ERROR_CODE_9999");
    }

    /// Item errors carry the code Kafka's clients act on, its name and corum's message;
    /// whole-request refusals are named the same way.
    #[test]
    fn item_errors() {
        let e = ItemError::api(&ApiError::TopicAlreadyExists { name: "t".into() });
        assert_eq!((e.code, e.name.as_str()), (36, "TOPIC_ALREADY_EXISTS"));
        assert_eq!(
            e.to_string(),
            "TOPIC_ALREADY_EXISTS: topic \"t\" already exists"
        );
        let e = ItemError::rpc(&RpcError::Timeout { timeout_ms: 5 });
        assert_eq!((e.code, e.name.as_str()), (7, "REQUEST_TIMED_OUT"));
        let e = ItemError::rpc(&RpcError::Api(ApiError::BrokerIdNotRegistered {
            broker_id: corum_types::NodeId(9),
        }));
        assert_eq!(e.name, "BROKER_ID_NOT_REGISTERED");
        let c = describe_client_error(&ClientError::Rpc(RpcError::NotController { leader: None }));
        assert!(c.starts_with("NOT_CONTROLLER: "), "{c}");
    }

    /// No failure, no error line; failures are listed in order, each with its item.
    #[test]
    fn failure_message_lists_items() {
        let mut o = Outcome::ok("x\n".into(), serde_json::json!({}));
        assert_eq!(o.failure_message(), None);
        o.failures.push((
            "topic \"a\"".into(),
            ItemError::api(&ApiError::UnknownTopic { name: "a".into() }),
        ));
        o.failures.push((
            "topic \"b\"".into(),
            ItemError::api(&ApiError::TopicAlreadyExists { name: "b".into() }),
        ));
        let m = o.failure_message().unwrap();
        assert_eq!(
            m,
            "topic \"a\": UNKNOWN_TOPIC_OR_PARTITION: unknown topic \"a\"; \
             topic \"b\": TOPIC_ALREADY_EXISTS: topic \"b\" already exists"
        );
    }
}
