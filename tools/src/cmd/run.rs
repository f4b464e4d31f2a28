//! `corum run`: runs one controller node until SIGTERM/SIGINT.
//!
//! The configuration comes from `--config FILE` and/or repeated `--set key=value` (the keys of
//! `corum format`; `corum run --help-config` lists them with their types, ranges, defaults and
//! readers). Placement: `corum.cores`, `corum.controller.core`, `corum.no.pin` in the
//! configuration, overridden by `--cores`, `--controller-core`, `--no-pin`; a node runs at most
//! two shards (a worker and the controller), so a set of more cores is refused, and with none
//! named it takes two of the cores it may use
//! ([`corum_node::config::components::placement`]). The node refuses to start on a directory
//! `corum format` did not prepare for it, or one formatted for another cluster than
//! `--cluster-id` (when given).
//!
//! Once its sockets are bound and its log recovered, it prints one line on stdout:
//! `corum: node N ready: raft HOST:PORT, clients HOST:PORT[, kafka HOST:PORT]` (the first Kafka
//! listener, when the node has one). Logs go to stderr.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use corum_node::config::components;
use corum_node::node::{run_node, NodePlan, NodeReady};
use corum_runtime::{placement::online_cores, PlacementArgs, Runtime};
use corum_types::Uuid;

use super::format::{load_config, parse_key_value};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Node configuration (Kafka properties format).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Set or override one configuration key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub set: Vec<(String, String)>,
    /// Refuse to start unless the directory was formatted for this cluster id.
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    pub cluster_id: Option<String>,
    /// Print every configuration key with its default and meaning, then exit.
    #[arg(long)]
    pub help_config: bool,
    #[command(flatten)]
    pub placement: PlacementArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.help_config {
        print!("{}", corum_node::config::help_text());
        return Ok(());
    }
    let config = load_config(args.config.as_ref(), &args.set)?;
    let cluster_id = args
        .cluster_id
        .as_deref()
        .map(|s| {
            s.parse::<Uuid>()
                .map_err(|e| anyhow::anyhow!("--cluster-id {s:?}: {e}"))
        })
        .transpose()?;
    let online = online_cores().context("listing the online cores")?;
    let spec = components::placement(&config, &args.placement.spec(), &online)?;
    let placement = spec.resolve(&online).context("resolving the placement")?;
    let runtime_config = components::runtime(&config)?;
    let plan = NodePlan::prepare(config, cluster_id).context("checking the node")?;
    let runtime = Runtime::new(placement.clone(), runtime_config)?;
    runtime
        .shutdown_handle()
        .install_signal_handlers()
        .context("installing signal handlers")?;
    let on_ready = Box::new(|ready: NodeReady| {
        let mut out = std::io::stdout().lock();
        // The parent of a node (demo, tests) waits for this line; a closed stdout is its
        // business, not a reason to stop the node.
        let kafka = ready
            .kafka_addrs
            .first()
            .map(|(_, a)| format!(", kafka {a}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "corum: node {} ready: raft {}, clients {}{kafka}",
            ready.node_id, ready.raft_addr, ready.client_addr
        );
        let _ = out.flush();
    });
    run_node(plan, placement, runtime, on_ready).context("running the node")?;
    tracing::info!("node stopped cleanly");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: Args,
    }

    /// `--help-config` lists every key of the table, each with its type, default and readers
    /// and its doc, in the table's order.
    #[test]
    fn help_config_lists_every_key() {
        let help = corum_node::config::help_text();
        let mut at = 0;
        for key in corum_node::config::CONFIG_KEYS {
            let line = format!("{}  ({}; ", key.name, key.value_type);
            let found = help[at..]
                .find(&line)
                .unwrap_or_else(|| panic!("{} missing or out of order", key.name));
            at += found + line.len();
            assert!(help[at..].contains(key.doc), "{}", key.name);
        }
        let args = Cli::try_parse_from(["run", "--help-config"]).unwrap().run;
        assert!(args.help_config);
    }

    /// `--cores` beyond the two shards a node runs is refused naming the key and the flag,
    /// and so is `corum.cores` in the configuration, before anything starts.
    #[test]
    fn too_many_cores_are_refused() {
        let sets = |extra: &[(&str, &str)]| -> Vec<(String, String)> {
            [
                ("node.id", "1"),
                ("process.roles", "controller"),
                (
                    "listeners",
                    "CONTROLLER://127.0.0.1:9093,CLIENT://127.0.0.1:9092",
                ),
                ("controller.listener.names", "CONTROLLER"),
                ("controller.quorum.voters", "1@127.0.0.1:9093"),
                ("metadata.log.dir", "/nonexistent/corum"),
            ]
            .iter()
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        };
        let run_with = |argv: &[&str], extra: &[(&str, &str)]| {
            let mut args = Cli::try_parse_from(std::iter::once("run").chain(argv.iter().copied()))
                .unwrap()
                .run;
            args.set = sets(extra);
            run(args).unwrap_err()
        };
        let err = format!("{:#}", run_with(&["--cores", "0-2", "--no-pin"], &[]));
        assert!(err.contains("--cores"), "{err}");
        assert!(err.contains("corum.cores"), "{err}");
        assert!(err.contains("at most 2 shards"), "{err}");
        let err = format!("{:#}", run_with(&[], &[("corum.cores", "0,1,2")]));
        assert!(err.contains("corum.cores"), "{err}");
        assert!(err.contains("at most 2 shards"), "{err}");
    }

    /// Proves `corum.spin.before.park.us` reaches the shards' executors, within the runtime's
    /// limit, and that a value above it is refused naming the key.
    #[test]
    fn spin_before_park_reaches_the_runtime() {
        let sets = |spin: &str| -> Vec<(String, String)> {
            [
                ("node.id", "1"),
                ("process.roles", "controller"),
                (
                    "listeners",
                    "CONTROLLER://127.0.0.1:9093,CLIENT://127.0.0.1:9092",
                ),
                ("controller.listener.names", "CONTROLLER"),
                ("controller.quorum.voters", "1@127.0.0.1:9093"),
                ("metadata.log.dir", "/var/lib/corum"),
                ("corum.spin.before.park.us", spin),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        };
        let config = corum_node::config::NodeConfig::load(None, &sets("40")).unwrap();
        let rc = components::runtime(&config).unwrap();
        assert_eq!(rc.spin_before_park_us, 40);
        let err = corum_node::config::NodeConfig::load(None, &sets("20000"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("corum.spin.before.park.us"), "{err}");
    }
}
