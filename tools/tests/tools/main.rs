//! The `corum` binary's tests, one test binary (every test binary links the whole dependency
//! graph; one binary with a module per subject links once). Each module runs the built
//! `corum` as child processes: `bench_floor` (`corum bench floor`), `chaos` (as root: network
//! namespaces), `check-history`, `disk_full` (as root: a loop filesystem), `dump-log`, `format`
//! and `info`, `placement`, `sim`, and whole local quorums (`quorum_process`, `admin_cli` for
//! the admin commands, `private_acls` for the client listener's ACLs, `kafka_compat` for
//! Kafka's clients, `kafka_brokers` for Kafka's brokers, `kafka_demo` for `corum demo --kafka`
//! and `kafka_export` for Kafka's tools reading `dump-log --kafka-export`; each holds
//! [`common::serial`] so that one cluster runs at a time).

mod acls;
mod admin_cli;
mod bad_input;
mod bench_floor;
mod chaos;
mod check_history;
mod common;
mod disk_full;
mod dump_log;
mod format_info;
mod kafka_brokers;
mod kafka_compat;
mod kafka_demo;
mod kafka_export;
mod placement;
mod private_acls;
mod quorum_process;
mod sasl_process;
mod sim;
mod tls_process;
