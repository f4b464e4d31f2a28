//! `corum`: one binary for every operation on a corum quorum.

use clap::{Parser, Subcommand};

mod cmd;

/// corum: a quorum-based metadata controller in the spirit of Kafka's KRaft.
#[derive(Parser, Debug)]
#[command(
    name = "corum",
    version,
    about = "corum: a quorum-based metadata controller in the spirit of Kafka's KRaft",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a new random UUID (for --cluster-id and directory ids).
    RandomUuid(cmd::uuid::Args),
    /// Create a CA and sign certificates for TLS listeners and clients (PEM).
    Certs(cmd::certs::Args),
    /// Run a controller node until SIGTERM/SIGINT (`--config FILE`, `--set KEY=VALUE`).
    Run(cmd::run::Args),
    /// Format a log directory: meta.properties and the bootstrap voter set.
    Format(cmd::format::Args),
    /// Show what a log directory holds (identity, quorum state, files).
    Info(cmd::info::Args),
    /// Measure the device and the log engine (`bench disk`, `bench log`).
    Bench(cmd::bench::Args),
    /// Print (and with --verify, check) the segments and batches of a log directory; with
    /// --kafka-export OUT, write the log and newest snapshot as Kafka's files instead.
    DumpLog(cmd::dump_log::Args),
    /// Resolve --cores/--controller-core/--no-pin into shards; --start tries them on this host.
    Placement(cmd::placement::Args),
    /// Run seeds of the whole-node simulator (`--seeds N --start S --nodes 3`), or of the Raft
    /// cluster simulator (`--raft --voters 3|5`).
    Sim(cmd::sim::Args),
    /// Describe the quorum as its leader sees it (`quorum describe --status|--replication`).
    Quorum(cmd::quorum::Args),
    /// Drive a running quorum (`--workload configs|brokers|topics`) and measure it.
    Loadgen(cmd::loadgen::Args),
    /// Print the metadata image of a running quorum (`[brokers|topics|configs|features|all]`).
    Shell(cmd::shell::Args),
    /// Start a local 3-node quorum, run every workload against it, print a summary
    /// (`--dynamic`: its voters changed at run time; `--kafka`: Apache Kafka's brokers on it).
    Demo(cmd::demo::Args),
    /// A quorum in network namespaces under recorded load and seeded faults (partitions,
    /// loss, pauses, kills), each round's history checked; needs root (`--cleanup`: only
    /// remove what killed runs left behind).
    Chaos(cmd::chaos::Args),
    /// Create, delete, describe and list topics (`topics create|delete|describe|list`).
    Topics(cmd::topics::Args),
    /// Describe and alter topic and broker configs (`configs describe|alter`).
    Configs(cmd::configs::Args),
    /// Describe and change finalized feature levels (`features describe|upgrade|downgrade`).
    Features(cmd::features::Args),
    /// Add, remove and list ACLs (`acls --add|--remove|--list`, as Kafka's `kafka-acls`).
    Acls(cmd::acls::Args),
    /// Set, delete and describe users' SCRAM credentials (`users add|delete|describe`, as
    /// Kafka's `kafka-configs --entity-type users`).
    Users(cmd::users::Args),
    /// Elect partition leaders (`leaders elect --election-type preferred|unclean`).
    Leaders(cmd::leaders::Args),
    /// List registered brokers and unregister fenced ones (`brokers list|unregister`).
    Brokers(cmd::brokers::Args),
    /// Check a recorded client history (JSON lines): linearizability per key, lost writes,
    /// broker epochs, observed offsets. Exit 0 pass, 1 violation, 2 undecided or bad input.
    CheckHistory(cmd::check_history::Args),
}

/// Allocations of 1 GiB or more only reserve address space: a Kafka request's lying array
/// length must not abort the node (see `corum_kafka::alloc`).
#[global_allocator]
static ALLOC: corum_kafka::alloc::NoReserveLarge = corum_kafka::alloc::NoReserveLarge;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // The simulator runs thousands of nodes' lives, with faults injected on purpose: their
    // log lines would bury its summary (violations are printed on their own).
    let level = if matches!(cli.command, Command::Sim(_)) {
        "off"
    } else {
        "info"
    };
    cmd::init_tracing(level);
    // Its exit status tells a violation (1) from an undecided or unreadable history (2).
    let command = match cli.command {
        Command::CheckHistory(args) => return cmd::check_history::run(args),
        command => command,
    };
    match run(command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The whole cause chain on one line, without the backtrace anyhow would print when
            // RUST_BACKTRACE is set: operators read these messages, not stack frames.
            eprintln!("error: {}", chain_line(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `e` and its causes on one line, `: ` between them, each said once: a cause whose text the
/// line already ends with (an error that prints its source and also returns it as its
/// source) adds nothing.
fn chain_line(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::RandomUuid(args) => cmd::uuid::run(args),
        Command::Certs(args) => cmd::certs::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Format(args) => cmd::format::run(args),
        Command::Info(args) => cmd::info::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::DumpLog(args) => cmd::dump_log::run(args),
        Command::Placement(args) => cmd::placement::run(args),
        Command::Sim(args) => cmd::sim::run(args),
        Command::Quorum(args) => cmd::quorum::run(args),
        Command::Loadgen(args) => cmd::loadgen::run(args),
        Command::Shell(args) => cmd::shell::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Chaos(args) => cmd::chaos::run(args),
        Command::Topics(args) => cmd::topics::run(args),
        Command::Configs(args) => cmd::configs::run(args),
        Command::Features(args) => cmd::features::run(args),
        Command::Acls(args) => cmd::acls::run(args),
        Command::Users(args) => cmd::users::run(args),
        Command::Leaders(args) => cmd::leaders::run(args),
        Command::Brokers(args) => cmd::brokers::run(args),
        Command::CheckHistory(_) => unreachable!("dispatched in main for its exit status"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that prints its source and returns it too (thiserror's `{source}` with
    /// `#[source]`) is said once; contexts and plain causes are all there, in order.
    #[test]
    fn the_error_line_says_each_cause_once() {
        #[derive(Debug)]
        struct Wraps(std::io::Error);
        impl std::fmt::Display for Wraps {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "write /d/x.part: {}", self.0)
            }
        }
        impl std::error::Error for Wraps {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let io = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let e = anyhow::Error::new(Wraps(io)).context("running the node");
        assert_eq!(
            chain_line(&e),
            "running the node: write /d/x.part: No space left on device (os error 28)"
        );
        let plain = anyhow::anyhow!("inner").context("middle").context("outer");
        assert_eq!(chain_line(&plain), "outer: middle: inner");
    }
}
