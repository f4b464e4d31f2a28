//! `corum brokers list|unregister`: the registered brokers.
//!
//! | command | request | prints |
//! |---|---|---|
//! | `list` | DescribeCluster | the active controller's id, then one row per registered broker: id, epoch, state, rack, listeners |
//! | `unregister ID` | UnregisterBroker | that the broker is no longer registered |
//!
//! A broker's state is `active` (unfenced), `fenced`, or `shutting-down` (in controlled
//! shutdown, not yet fenced). Only a fenced broker can be unregistered (a decommission: stop the broker, wait
//! until it is fenced, then unregister it); the controller refuses an unfenced one
//! (INVALID_REQUEST) and an unknown id (BROKER_ID_NOT_REGISTERED), as Kafka's `kafka-cluster
//! unregister` reports them.

use std::fmt::Write as _;

use corum_client::{ClientError, RequestBody, ResponseBody, RpcError};
use corum_controller::control::cluster_control::{
    DescribeClusterResponse, DescribedBroker, UnregisterBrokerRequest,
};
use corum_types::NodeId;
use serde::Serialize;

use crate::cmd::admin::{
    call, describe_client_error, finish, to_json, with_client, ConnectArgs, ItemError, Outcome,
};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// List the registered brokers (DescribeCluster).
    List(ListArgs),
    /// Remove a fenced broker's registration (UnregisterBroker).
    Unregister(UnregisterArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct ListArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct UnregisterArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
    /// The broker's id.
    pub id: u32,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::List(a) => {
            let r = with_client(&a.conn, |client| async move {
                call(&client, RequestBody::DescribeCluster, |r| match r {
                    ResponseBody::DescribeCluster(r) => Ok(r),
                    other => Err(other),
                })
                .await
            })?;
            finish(render_list(&r), a.conn.json)
        }
        What::Unregister(a) => {
            let broker_id = NodeId(a.id);
            let answer = with_client(&a.conn, |client| async move {
                let req = UnregisterBrokerRequest { broker_id };
                match client.call(RequestBody::UnregisterBroker(req)).await {
                    Ok(ResponseBody::UnregisterBroker) => Ok(Ok(())),
                    Ok(other) => anyhow::bail!(
                        "UnregisterBroker was answered with a {} response (a server bug)",
                        other.kind()
                    ),
                    // The request names one broker: the controller's refusal is that item's.
                    Err(ClientError::Rpc(RpcError::Api(e))) => Ok(Err(ItemError::api(&e))),
                    Err(e) => anyhow::bail!("UnregisterBroker: {}", describe_client_error(&e)),
                }
            })?;
            finish(render_unregistered(broker_id, answer), a.conn.json)
        }
    }
}

/// A broker's state as the list shows it. A broker fenced at the end of its controlled
/// shutdown keeps the shutdown flag (as in Kafka): it shows fenced.
pub fn state(b: &DescribedBroker) -> &'static str {
    if b.fenced {
        "fenced"
    } else if b.in_controlled_shutdown {
        "shutting-down"
    } else {
        "active"
    }
}

#[derive(Serialize)]
struct ListenerJson {
    name: String,
    host: String,
    port: u16,
}

#[derive(Serialize)]
struct BrokerJson {
    id: u32,
    epoch: u64,
    state: &'static str,
    fenced: bool,
    in_controlled_shutdown: bool,
    rack: Option<String>,
    listeners: Vec<ListenerJson>,
}

/// The outcome of a DescribeCluster answer: the controller's id, then a table of brokers in
/// id order.
pub fn render_list(r: &DescribeClusterResponse) -> Outcome {
    let mut brokers: Vec<&DescribedBroker> = r.brokers.iter().collect();
    brokers.sort_by_key(|b| b.broker_id);
    let mut table = vec![[
        "Id".to_owned(),
        "Epoch".to_owned(),
        "State".to_owned(),
        "Rack".to_owned(),
        "Listeners".to_owned(),
    ]];
    let mut rows = Vec::new();
    for b in &brokers {
        let listeners: Vec<String> = b
            .listeners
            .iter()
            .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
            .collect();
        table.push([
            b.broker_id.to_string(),
            b.broker_epoch.0.to_string(),
            state(b).to_owned(),
            b.rack.clone().unwrap_or_else(|| "-".into()),
            listeners.join(","),
        ]);
        rows.push(BrokerJson {
            id: b.broker_id.0,
            epoch: b.broker_epoch.0,
            state: state(b),
            fenced: b.fenced,
            in_controlled_shutdown: b.in_controlled_shutdown,
            rack: b.rack.clone(),
            listeners: b
                .listeners
                .iter()
                .map(|l| ListenerJson {
                    name: l.name.clone(),
                    host: l.host.clone(),
                    port: l.port,
                })
                .collect(),
        });
    }
    let mut text = format!("ActiveController: {}\n", r.controller_id);
    let mut widths = [0usize; 5];
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(text, "{}", cells.join("  ").trim_end());
    }
    Outcome::ok(
        text,
        serde_json::json!({ "controller_id": r.controller_id.0, "brokers": to_json(&rows) }),
    )
}

/// The outcome of an UnregisterBroker of `broker_id`.
pub fn render_unregistered(broker_id: NodeId, answer: Result<(), ItemError>) -> Outcome {
    let mut out = Outcome::default();
    match &answer {
        Ok(()) => {
            let _ = writeln!(out.text, "Broker {broker_id} is no longer registered.");
        }
        Err(e) => out
            .failures
            .push((format!("broker {broker_id}"), e.clone())),
    }
    out.json = serde_json::json!({ "broker_id": broker_id.0, "error": answer.err() });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_client::ListenerV1;
    use corum_controller::ApiError;
    use corum_types::BrokerEpoch;

    fn broker(id: u32, fenced: bool, shutdown: bool) -> DescribedBroker {
        DescribedBroker {
            broker_id: NodeId(id),
            broker_epoch: BrokerEpoch(u64::from(id) * 10),
            listeners: vec![ListenerV1 {
                name: "KAFKA".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }],
            rack: (id == 2).then(|| "r1".to_owned()),
            fenced,
            in_controlled_shutdown: shutdown,
        }
    }

    /// Brokers are listed in id order with their state, rack and listeners, under the
    /// active controller's id; the JSON carries the same.
    #[test]
    fn list() {
        let r = DescribeClusterResponse {
            controller_id: NodeId(1),
            brokers: vec![
                broker(3, true, false),
                broker(2, false, false),
                broker(4, false, true),
            ],
            topic_count: 0,
            partition_count: 0,
        };
        let o = render_list(&r);
        let lines: Vec<&str> = o.text.lines().collect();
        assert_eq!(lines[0], "ActiveController: 1");
        assert!(lines[1].starts_with("Id") && lines[1].ends_with("Listeners"));
        let row = |i: usize| lines[i].split_whitespace().collect::<Vec<_>>();
        assert_eq!(
            row(2),
            ["2", "20", "active", "r1", "KAFKA://127.0.0.1:9092"]
        );
        assert_eq!(row(3), ["3", "30", "fenced", "-", "KAFKA://127.0.0.1:9092"]);
        assert_eq!(row(4)[2], "shutting-down");
        // Columns line up.
        let col = lines[1].find("State").unwrap();
        assert_eq!(lines[3].find("fenced"), Some(col));
        assert!(o.failures.is_empty());
        assert_eq!(o.json["controller_id"], 1);
        let b = &o.json["brokers"][1];
        assert_eq!(
            (b["id"].as_u64(), b["state"].as_str()),
            (Some(3), Some("fenced"))
        );
        assert_eq!(b["listeners"][0]["port"], 9092);
        assert_eq!(o.json["brokers"][0]["rack"], "r1");
    }

    /// An unregistered broker is printed; a refusal is a failure with Kafka's name.
    #[test]
    fn unregistered() {
        let o = render_unregistered(NodeId(7), Ok(()));
        assert_eq!(o.text, "Broker 7 is no longer registered.\n");
        assert_eq!(o.json["error"], serde_json::Value::Null);
        let e = ItemError::api(&ApiError::BrokerIdNotRegistered {
            broker_id: NodeId(7),
        });
        let o = render_unregistered(NodeId(7), Err(e));
        assert_eq!(o.text, "");
        assert_eq!(o.failures[0].0, "broker 7");
        assert_eq!(o.json["error"]["name"], "BROKER_ID_NOT_REGISTERED");
        assert_eq!(o.json["broker_id"], 7);
    }
}
