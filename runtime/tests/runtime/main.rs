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

use corum_runtime::{Placement, Runtime, RuntimeConfig, ShardContext};

use crate::common::RunBounded;

/// Runs `f` on one unpinned shard (under the tests' deadline) and returns what it returns.
fn on_shard<F, Fut, T>(f: F) -> T
where
    F: FnOnce(ShardContext) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    let mut f = Some(f);
    let mut outcomes = Runtime::new(Placement::unpinned(1).unwrap(), RuntimeConfig::default())
        .unwrap()
        .run_bounded(move |_| f.take().expect("one shard"))
        .unwrap();
    outcomes.pop().unwrap().result.unwrap()
}
