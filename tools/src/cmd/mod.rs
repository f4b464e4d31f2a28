//! One module per subcommand; each has an `Args` (clap) and a `run(args) -> anyhow::Result<()>`.

pub mod acls;
pub mod admin;
pub mod bench;
pub mod brokers;
pub mod certs;
pub mod chaos;
pub mod check_history;
pub mod command_config;
pub mod configs;
pub mod demo;
pub mod dump_log;
pub mod features;
pub mod format;
pub mod info;
pub mod leaders;
pub mod loadgen;
pub mod placement;
pub mod quorum;
pub mod run;
pub mod shell;
pub mod sim;
pub mod topics;
pub mod users;
pub mod uuid;

/// Logs go to stderr so that `--json` output on stdout stays machine-readable. `RUST_LOG`
/// overrides the default level (`info`; `off` for `corum sim`).
pub fn init_tracing(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, not in the log files of a node.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
