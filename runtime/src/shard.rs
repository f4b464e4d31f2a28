//! Shards: one glommio executor per shard, each on its own thread, and the [`Runtime`] that
//! starts them, waits for them and returns what each one returned.
//!
//! Start-up is all-or-nothing: every shard thread builds its executor and reports back before
//! any shard's code runs. If one executor can't be built (io_uring setup, the locked-memory
//! limit, pinning), the others are told to stop and [`Runtime::run`] returns
//! [`Error::ExecutorSetup`] naming the shard.
//!
//! **Locked memory.** glommio registers an io buffer arena with each of its three rings per
//! executor. Its default arena is 10 MiB, which exceeds the common 8 MiB `memlock` limit on its
//! own; [`RuntimeConfig`] defaults to 256 KiB per shard and a ring depth of 128, so several shards
//! start under the default limit. The log's DMA buffers fall back to the normal allocator when
//! the arena is full, so a small arena costs a little speed, never correctness. (If buffer
//! registration fails anyway, glommio logs a warning and runs without registered buffers. The
//! kernel skips the accounting for processes with `CAP_IPC_LOCK`, e.g. root; glommio's own
//! check that the limit is at least 512 KiB applies to everyone.)
//!
//! **Tasks.** A shard's code runs on glommio's default task queue: its entry future, and every
//! task it spawns with `glommio::spawn_local`. (There are no separate latency and background
//! queues: nothing ran on a second one. With glommio 0.9, arming short preemption timers,
//! `Latency::Matters(1ms)` or `preempt_timer(1ms)`, made cross-shard channel connects hang in
//! about one run in ten, so a queue that matters for latency would need that understood
//! first.)
//!
//! **Shutdown.** Every shard gets a [`ShutdownSignal`]. Shard code is expected to observe it,
//! drain and return; when a shard panics, the runtime triggers shutdown so the others stop too.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc;

use glommio::LocalExecutorBuilder;

use crate::error::{Error, Result};
use crate::placement::{CoreId, Placement, ShardId, ShardRole, ShardSpec};
use crate::shutdown::{Shutdown, ShutdownSignal};

/// Executor settings shared by all shards. Checked by [`RuntimeConfig::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Registered io buffer arena per shard (glommio's `io_memory`). glommio rounds it up to at
    /// least 64 KiB.
    pub io_memory_bytes: usize,
    /// io_uring submission queue depth per ring.
    pub ring_depth: usize,
    /// Busy-poll this long before an idle shard parks in the kernel (glommio's
    /// `spin_before_park`). 0 parks at once: cheapest on shared machines; a dedicated host can
    /// trade a core's idle time for lower cross-shard wake-up latency.
    pub spin_before_park_us: u64,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            io_memory_bytes: 256 << 10,
            ring_depth: 128,
            spin_before_park_us: 0,
        }
    }
}

impl RuntimeConfig {
    /// Largest accepted io arena; well beyond what a shard needs, small enough to catch a unit
    /// mistake (bytes vs KiB).
    pub const IO_MEMORY_BYTES_MAX: usize = 1 << 30;
    /// Largest accepted ring depth (the kernel's own limit is 32768).
    pub const RING_DEPTH_MAX: usize = 4096;
    /// Largest accepted spin before parking (10 ms).
    pub const SPIN_BEFORE_PARK_US_MAX: u64 = 10_000;

    /// Checks every limit.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &'static str, reason: String| Err(Error::Config { field, reason });
        if self.io_memory_bytes > Self::IO_MEMORY_BYTES_MAX {
            return bad(
                "io_memory_bytes",
                format!("must be at most {}", Self::IO_MEMORY_BYTES_MAX),
            );
        }
        if self.ring_depth == 0 || self.ring_depth > Self::RING_DEPTH_MAX {
            return bad(
                "ring_depth",
                format!("must be in 1..={}", Self::RING_DEPTH_MAX),
            );
        }
        if self.spin_before_park_us > Self::SPIN_BEFORE_PARK_US_MAX {
            return bad(
                "spin_before_park_us",
                format!("must be at most {}", Self::SPIN_BEFORE_PARK_US_MAX),
            );
        }
        Ok(())
    }
}

/// What a shard's code gets: who it is and its shutdown signal.
#[derive(Clone, Debug)]
pub struct ShardContext {
    spec: ShardSpec,
    shutdown: ShutdownSignal,
    global_shutdown: Shutdown,
}

impl ShardContext {
    /// This shard's id.
    pub fn id(&self) -> ShardId {
        self.spec.id
    }

    /// The core this shard is pinned to, if pinned.
    pub fn core(&self) -> Option<CoreId> {
        self.spec.core
    }

    /// This shard's role.
    pub fn role(&self) -> ShardRole {
        self.spec.role
    }

    /// The shard-local shutdown signal.
    pub fn shutdown(&self) -> &ShutdownSignal {
        &self.shutdown
    }

    /// The process-wide handle, to stop every shard from here.
    pub fn global_shutdown(&self) -> &Shutdown {
        &self.global_shutdown
    }
}

/// What one shard returned.
#[derive(Debug)]
pub struct ShardOutcome<T> {
    pub shard: ShardId,
    /// The shard function's output, or [`Error::ShardPanicked`].
    pub result: Result<T>,
}

/// The set of shards of one node.
#[derive(Debug)]
pub struct Runtime {
    placement: Placement,
    config: RuntimeConfig,
    shutdown: Shutdown,
}

impl Runtime {
    /// A runtime for `placement`; validates `config`.
    pub fn new(placement: Placement, config: RuntimeConfig) -> Result<Runtime> {
        config.validate()?;
        Ok(Runtime {
            placement,
            config,
            shutdown: Shutdown::new(),
        })
    }

    /// Uses `shutdown` instead of a fresh handle (e.g. one with signal handlers installed).
    pub fn with_shutdown(mut self, shutdown: Shutdown) -> Runtime {
        self.shutdown = shutdown;
        self
    }

    /// The shutdown handle every shard observes.
    pub fn shutdown_handle(&self) -> Shutdown {
        self.shutdown.clone()
    }

    /// The placement.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Starts every shard and waits for all of them to return.
    ///
    /// `make` runs on the calling thread once per shard, in shard order, and returns that
    /// shard's entry function; that is where per-shard values (channel ends, listeners'
    /// addresses) are moved in. The entry function then runs on the shard's thread with its
    /// [`ShardContext`].
    pub fn run<M, G, F, T>(self, mut make: M) -> Result<Vec<ShardOutcome<T>>>
    where
        M: FnMut(&ShardSpec) -> G,
        G: FnOnce(ShardContext) -> F + Send + 'static,
        F: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        self.placement.log_summary();
        let shard_count = self.placement.shards().len();
        let (ready_tx, ready_rx) = mpsc::channel::<(ShardId, std::result::Result<(), String>)>();
        let mut threads = Vec::with_capacity(shard_count);
        for spec in self.placement.shards().iter().copied() {
            let entry = make(&spec);
            let config = self.config.clone();
            let shutdown = self.shutdown.clone();
            let ready_tx = ready_tx.clone();
            let (go_tx, go_rx) = mpsc::channel::<bool>();
            let handle = std::thread::Builder::new()
                .name(format!("corum-{}", spec.id))
                .spawn(move || shard_main(spec, config, shutdown, ready_tx, go_rx, entry))
                .map_err(|source| Error::ThreadSpawn {
                    shard: spec.id,
                    source,
                });
            match handle {
                Ok(h) => threads.push((spec.id, h, go_tx)),
                Err(e) => {
                    stop_started(threads);
                    return Err(e);
                }
            }
        }
        drop(ready_tx);
        // All-or-nothing start: wait for every executor before letting any shard code run.
        let mut setup_error = None;
        for _ in 0..shard_count {
            match ready_rx.recv() {
                Ok((_, Ok(()))) => {}
                Ok((shard, Err(reason))) => {
                    let core = self.placement.shards()[shard.0].core;
                    tracing::error!(%shard, ?core, %reason, "shard executor setup failed");
                    setup_error.get_or_insert(Error::ExecutorSetup {
                        shard,
                        core,
                        reason,
                    });
                }
                Err(_) => {
                    // A thread died before reporting; its join below reports the panic.
                    break;
                }
            }
        }
        if let Some(e) = setup_error {
            stop_started(threads);
            return Err(e);
        }
        for (_, _, go) in &threads {
            // A thread that already exited is reported by join below.
            let _ = go.send(true);
        }
        let mut outcomes = Vec::with_capacity(shard_count);
        for (shard, handle, _) in threads {
            let result = match handle.join() {
                Ok(r) => r,
                Err(panic) => Err(Error::ShardPanicked {
                    shard,
                    message: panic_message(&*panic),
                }),
            };
            outcomes.push(ShardOutcome { shard, result });
        }
        Ok(outcomes)
    }
}

fn stop_started(
    threads: Vec<(
        ShardId,
        std::thread::JoinHandle<Result<impl Send>>,
        mpsc::Sender<bool>,
    )>,
) {
    for (_, _, go) in &threads {
        let _ = go.send(false);
    }
    for (_, h, _) in threads {
        let _ = h.join();
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

fn shard_main<G, F, T>(
    spec: ShardSpec,
    config: RuntimeConfig,
    shutdown: Shutdown,
    ready: mpsc::Sender<(ShardId, std::result::Result<(), String>)>,
    go: mpsc::Receiver<bool>,
    entry: G,
) -> Result<T>
where
    G: FnOnce(ShardContext) -> F,
    F: Future<Output = T> + 'static,
    T: 'static,
{
    let placement = match spec.core {
        Some(core) => glommio::Placement::Fixed(core.0),
        None => glommio::Placement::Unbound,
    };
    let mut builder = LocalExecutorBuilder::new(placement)
        .name(&format!("corum-{}", spec.id))
        .io_memory(config.io_memory_bytes)
        .ring_depth(config.ring_depth);
    if config.spin_before_park_us > 0 {
        builder =
            builder.spin_before_park(std::time::Duration::from_micros(config.spin_before_park_us));
    }
    let executor = builder.make();
    let executor = match executor {
        Ok(ex) => {
            let _ = ready.send((spec.id, Ok(())));
            ex
        }
        Err(e) => {
            let mut reason = format!("{e}");
            if reason.to_lowercase().contains("memlock") {
                reason.push_str(
                    "; glommio needs RLIMIT_MEMLOCK >= 512 KiB: raise it (`ulimit -l`) or lower \
                     RuntimeConfig::io_memory_bytes",
                );
            }
            let _ = ready.send((spec.id, Err(reason.clone())));
            return Err(Error::ExecutorSetup {
                shard: spec.id,
                core: spec.core,
                reason,
            });
        }
    };
    drop(ready);
    if !go.recv().unwrap_or(false) {
        return Err(Error::ShuttingDown);
    }
    let global = shutdown.clone();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        executor.run(async move {
            let signal = shutdown.subscribe()?;
            let ctx = ShardContext {
                spec,
                shutdown: signal,
                global_shutdown: shutdown,
            };
            Ok(entry(ctx).await)
        })
    }));
    match outcome {
        Ok(result) => result,
        Err(panic) => {
            let message = panic_message(&*panic);
            tracing::error!(shard = %spec.id, %message, "shard panicked; shutting down the others");
            global.trigger();
            Err(Error::ShardPanicked {
                shard: spec.id,
                message,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_limits_are_checked() {
        // Every out-of-range executor setting is refused before anything starts.
        assert!(RuntimeConfig::default().validate().is_ok());
        for bad in [
            RuntimeConfig {
                ring_depth: 0,
                ..Default::default()
            },
            RuntimeConfig {
                io_memory_bytes: usize::MAX,
                ..Default::default()
            },
            RuntimeConfig {
                spin_before_park_us: 1_000_000,
                ..Default::default()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(Error::Config { .. })),
                "{bad:?}"
            );
        }
    }
}
