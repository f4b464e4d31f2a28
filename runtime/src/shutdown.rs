//! Shutdown: one process-wide trigger, observed by every shard.
//!
//! [`Shutdown`] is a cheap, `Send + Sync` handle. Anything may call [`Shutdown::trigger`]: the
//! SIGINT/SIGTERM thread installed by [`Shutdown::install_signal_handlers`], a shard that failed,
//! or a test. Each shard subscribes once with [`Shutdown::subscribe`] (inside its executor) and
//! gets a [`ShutdownSignal`], a shard-local `Rc` handle that tasks can poll
//! ([`ShutdownSignal::is_triggered`]) or await ([`ShutdownSignal::wait`]).
//!
//! Waking a glommio task from a foreign thread is not allowed, so the wake-up travels through
//! the kernel: each subscription is a Unix socket pair whose read end a shard-local watcher task
//! reads through io_uring. Triggering closes every write end; the watcher sees end-of-file and
//! wakes the shard's waiters. Closing instead of writing means no `SIGPIPE` and no blocking.
//!
//! ```text
//! state        event                     next
//! Running      trigger()                 Triggered (write ends closed, flag set)
//! Running      subscribe()               Running   (new pair registered)
//! Triggered    subscribe()               Triggered (signal starts triggered)
//! Triggered    trigger()                 Triggered (no-op)
//! ```

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use futures_lite::AsyncReadExt;

use crate::error::{Error, Result};

#[derive(Default)]
struct Inner {
    triggered: AtomicBool,
    /// Write ends of the subscribers' socket pairs; dropped (closed) on trigger.
    subscribers: Mutex<Vec<StdUnixStream>>,
}

/// The process-wide shutdown trigger. Clones share the same state.
#[derive(Clone, Default)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Shutdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shutdown")
            .field("triggered", &self.is_triggered())
            .finish()
    }
}

impl Shutdown {
    /// A new, untriggered handle.
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Starts shutdown: every shard's [`ShutdownSignal`] fires. Idempotent.
    pub fn trigger(&self) {
        let mut subs = self
            .inner
            .subscribers
            .lock()
            .expect("the subscriber list is never left poisoned: no code panics under it");
        self.inner.triggered.store(true, Ordering::SeqCst);
        // Dropping the write ends closes them; each watcher reads end-of-file.
        subs.clear();
    }

    /// Whether shutdown has been triggered.
    pub fn is_triggered(&self) -> bool {
        self.inner.triggered.load(Ordering::SeqCst)
    }

    /// Creates this shard's local signal. Must be called inside a glommio executor: it spawns a
    /// small watcher task there.
    pub fn subscribe(&self) -> Result<ShutdownSignal> {
        let local = ShutdownSignal {
            state: Rc::new(LocalState {
                triggered: Cell::new(false),
                waiters: RefCell::new(Vec::new()),
            }),
        };
        let (reader, writer) = StdUnixStream::pair().map_err(|source| Error::ShardSetup {
            op: "socketpair for the shutdown watcher",
            source,
        })?;
        {
            let mut subs = self
                .inner
                .subscribers
                .lock()
                .expect("the subscriber list is never left poisoned: no code panics under it");
            if self.inner.triggered.load(Ordering::SeqCst) {
                local.fire();
                return Ok(local);
            }
            subs.push(writer);
        }
        // SAFETY: `into_raw_fd` hands over sole ownership of a valid, open socket descriptor.
        let mut reader = unsafe { glommio::net::UnixStream::from_raw_fd(reader.into_raw_fd()) };
        let watched = local.clone();
        glommio::spawn_local(async move {
            let mut byte = [0u8; 1];
            // Nothing is ever written; the read returns when the write end is closed. An error
            // is treated the same way: a shard that can't hear shutdown must not run forever.
            if let Err(e) = reader.read(&mut byte).await {
                tracing::warn!(error = %e, "shutdown watcher read failed; shutting this shard down");
            }
            watched.fire();
        })
        .detach();
        Ok(local)
    }

    /// Installs SIGINT and SIGTERM handlers that trigger this handle, on a dedicated thread,
    /// and a SIGHUP handler that has every TLS listener and dialer re-read its files at its
    /// next handshake ([`crate::tls::request_reload`]). The handlers stay for the life of the
    /// process.
    pub fn install_signal_handlers(&self) -> Result<()> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
            .map_err(|source| Error::Signals { source })?;
        let this = self.clone();
        std::thread::Builder::new()
            .name("corum-signals".into())
            .spawn(move || {
                for signal in signals.forever() {
                    if signal == SIGHUP {
                        tracing::info!("SIGHUP: TLS keystores and truststores are re-read at the next handshake");
                        crate::tls::request_reload();
                        continue;
                    }
                    tracing::info!(signal, "received signal, shutting down");
                    this.trigger();
                    break;
                }
            })
            .map_err(|source| Error::Signals { source })?;
        Ok(())
    }
}

struct LocalState {
    triggered: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
}

/// A shard's view of shutdown. Cheap to clone within the shard; not `Send`.
#[derive(Clone)]
pub struct ShutdownSignal {
    state: Rc<LocalState>,
}

impl std::fmt::Debug for ShutdownSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownSignal")
            .field("triggered", &self.is_triggered())
            .finish()
    }
}

impl ShutdownSignal {
    /// A signal not connected to any [`Shutdown`]; fires only through [`ShutdownSignal::fire`].
    pub fn detached() -> ShutdownSignal {
        ShutdownSignal {
            state: Rc::new(LocalState {
                triggered: Cell::new(false),
                waiters: RefCell::new(Vec::new()),
            }),
        }
    }

    /// Whether shutdown has reached this shard.
    pub fn is_triggered(&self) -> bool {
        self.state.triggered.get()
    }

    /// Fires the signal for this shard only (the watcher calls this; so may shard code that
    /// wants to stop its own tasks).
    pub fn fire(&self) {
        self.state.triggered.set(true);
        let waiters = std::mem::take(&mut *self.state.waiters.borrow_mut());
        for w in waiters {
            w.wake();
        }
    }

    /// Resolves once shutdown has reached this shard.
    pub async fn wait(&self) {
        poll_fn(|cx| {
            if self.state.triggered.get() {
                Poll::Ready(())
            } else {
                let mut waiters = self.state.waiters.borrow_mut();
                if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    waiters.push(cx.waker().clone());
                }
                Poll::Pending
            }
        })
        .await
    }

    /// Runs `fut` until it finishes or shutdown arrives, whichever is first; `None` on shutdown.
    pub async fn run_until<F: std::future::Future>(&self, fut: F) -> Option<F::Output> {
        futures_lite::future::or(async { Some(fut.await) }, async {
            self.wait().await;
            None
        })
        .await
    }
}
