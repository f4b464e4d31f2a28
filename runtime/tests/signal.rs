//! SIGTERM triggers a clean shutdown of every shard. Own test binary: it installs process-wide
//! signal handlers and raises SIGTERM at itself.

mod common;
use common::RunBounded;

use corum_runtime::{Placement, Runtime, RuntimeConfig, ShardId, Shutdown};

#[test]
fn sigterm_shuts_every_shard_down_cleanly() {
    // With the handlers installed, a raised SIGTERM does not kill the process: it triggers
    // shutdown, every shard observes it and returns normally.
    let shutdown = Shutdown::new();
    shutdown.install_signal_handlers().unwrap();
    let outcomes = Runtime::new(Placement::unpinned(2).unwrap(), RuntimeConfig::default())
        .unwrap()
        .with_shutdown(shutdown.clone())
        .run_bounded(move |_| {
            |ctx: corum_runtime::ShardContext| async move {
                if ctx.id() == ShardId(0) {
                    // SAFETY: raise() is async-signal-safe and the handler is installed.
                    assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
                }
                ctx.shutdown().wait().await;
                true
            }
        })
        .unwrap();
    assert!(shutdown.is_triggered());
    assert!(outcomes.iter().all(|o| *o.result.as_ref().unwrap()));
}
