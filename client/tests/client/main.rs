//! The client's integration tests, one test binary (every test binary links the whole
//! dependency graph; one binary with a module per subject links once): `ControllerClient`
//! and `BrokerSession`s against in-process nodes (`controller_client`, `broker_session`), and
//! `MetadataFollower` against a scripted leader (`metadata_follower`).
//!
//! The harness stays in `tests/common/`, beside this directory: the unit tests of
//! `src/observer_log.rs` include `common/config_batches.rs` by path.

mod broker_session;
#[path = "../common/mod.rs"]
mod common;
mod controller_client;
mod metadata_follower;
