//! The runtime's integration tests, one binary: every test binary links the whole dependency
//! graph, so one binary with a module per subject links once. `memlock.rs` and `signal.rs`
//! stay binaries of their own, because they change process-wide state (the locked-memory
//! limit, signal handlers) that would reach tests running beside them.

#[path = "../common/mod.rs"]
mod common;
mod shards;
mod tcp;
mod tls;
mod vectored;
