//! Executors start under the default 8 MiB locked-memory limit, and a limit below glommio's
//! minimum is a clear start-up error. Own test binary: it lowers the process's RLIMIT_MEMLOCK.

mod common;
use common::RunBounded;

use corum_runtime::{Error, Placement, Runtime, RuntimeConfig};

fn set_memlock_soft(bytes: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a stack struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim), 0);
        lim.rlim_cur = bytes.min(lim.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim), 0);
    }
}

#[test]
fn shards_fit_the_default_memlock_limit_and_a_tiny_limit_is_reported() {
    // Four shards with the default config start with memlock at 8 MiB; with memlock below
    // glommio's 512 KiB minimum, run() fails with ExecutorSetup before any shard code runs.
    set_memlock_soft(8 << 20);
    let outcomes = Runtime::new(Placement::unpinned(4).unwrap(), RuntimeConfig::default())
        .unwrap()
        .run_bounded(|_| |ctx: corum_runtime::ShardContext| async move { ctx.id() })
        .unwrap();
    assert_eq!(outcomes.len(), 4);
    assert!(outcomes.iter().all(|o| o.result.is_ok()));

    set_memlock_soft(256 << 10);
    let err = Runtime::new(Placement::unpinned(2).unwrap(), RuntimeConfig::default())
        .unwrap()
        .run_bounded(|_| |_ctx: corum_runtime::ShardContext| async move {})
        .unwrap_err();
    match err {
        Error::ExecutorSetup { reason, .. } => {
            assert!(reason.to_lowercase().contains("memlock"), "{reason}")
        }
        other => panic!("expected ExecutorSetup, got {other:?}"),
    }
}
