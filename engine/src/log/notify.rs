//! Two tiny single-threaded synchronisation primitives: a broadcast [`Notify`] and the
//! [`IoLock`] that serialises the log's IO rounds. No `Send`, no atomics: one shard owns the log.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Wakes every listener registered before `notify_all`. A listener created *before* checking a
/// condition can never miss the change that makes the condition true.
#[derive(Default)]
pub(crate) struct Notify {
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl Notify {
    pub fn listen(&self) -> Listen<'_> {
        Listen {
            notify: self,
            generation: self.generation.get(),
        }
    }

    pub fn notify_all(&self) {
        self.generation.set(self.generation.get() + 1);
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for w in wakers {
            w.wake();
        }
    }
}

pub(crate) struct Listen<'a> {
    notify: &'a Notify,
    generation: u64,
}

impl Future for Listen<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.notify.generation.get() != self.generation {
            return Poll::Ready(());
        }
        let mut wakers = self.notify.wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// An async mutual-exclusion flag; release notifies the shared [`Notify`].
#[derive(Default)]
pub(crate) struct IoLock {
    locked: Cell<bool>,
}

pub(crate) struct IoGuard<'a> {
    lock: &'a IoLock,
    notify: &'a Notify,
}

impl IoLock {
    pub fn try_lock<'a>(&'a self, notify: &'a Notify) -> Option<IoGuard<'a>> {
        if self.locked.replace(true) {
            None
        } else {
            Some(IoGuard { lock: self, notify })
        }
    }

    pub async fn lock<'a>(&'a self, notify: &'a Notify) -> IoGuard<'a> {
        loop {
            let listen = notify.listen();
            if let Some(g) = self.try_lock(notify) {
                return g;
            }
            listen.await;
        }
    }
}

impl Drop for IoGuard<'_> {
    fn drop(&mut self) {
        self.lock.locked.set(false);
        self.notify.notify_all();
    }
}
