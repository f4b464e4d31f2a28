//! Shared test helpers: a deadline so a hung executor fails the test instead of hanging CI.

use std::future::Future;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::Duration;

use corum_runtime::placement::ShardSpec;
use corum_runtime::{Result, Runtime, ShardContext, ShardOutcome};

/// Generous: every test here finishes in well under a second.
pub const TEST_DEADLINE: Duration = Duration::from_secs(120);

/// Runs `f` on a helper thread and fails the test if it takes longer than [`TEST_DEADLINE`].
pub fn within_deadline<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = channel();
    let handle = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(TEST_DEADLINE) {
        Ok(v) => {
            handle.join().unwrap();
            v
        }
        Err(RecvTimeoutError::Timeout) => {
            panic!("test did not finish within {TEST_DEADLINE:?} (hung executor?)")
        }
        Err(RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(handle.join().unwrap_err())
        }
    }
}

/// [`Runtime::run`] under [`within_deadline`].
pub trait RunBounded {
    fn run_bounded<M, G, F, T>(self, make: M) -> Result<Vec<ShardOutcome<T>>>
    where
        M: FnMut(&ShardSpec) -> G + Send + 'static,
        G: FnOnce(ShardContext) -> F + Send + 'static,
        F: Future<Output = T> + 'static,
        T: Send + 'static;
}

impl RunBounded for Runtime {
    fn run_bounded<M, G, F, T>(self, make: M) -> Result<Vec<ShardOutcome<T>>>
    where
        M: FnMut(&ShardSpec) -> G + Send + 'static,
        G: FnOnce(ShardContext) -> F + Send + 'static,
        F: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        within_deadline(move || self.run(make))
    }
}
