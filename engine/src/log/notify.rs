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
///
/// Two ways in: [`IoLock::lock`] waits its turn (truncation, prefix deletion, close), while
/// [`IoLock::try_lock`] is opportunistic (the group-commit syncer, the prefill) and yields to
/// anyone waiting in `lock`: otherwise a syncer that starts the next round as soon as the last
/// one ends would re-take the lock before a waiter runs, forever.
#[derive(Default)]
pub(crate) struct IoLock {
    locked: Cell<bool>,
    /// Tasks inside `lock` that found it taken.
    waiting: Cell<usize>,
}

pub(crate) struct IoGuard<'a> {
    lock: &'a IoLock,
    notify: &'a Notify,
}

/// Counts a task as waiting in [`IoLock::lock`] while it lives (also if the wait is dropped).
struct Waiting<'a>(&'a Cell<usize>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl IoLock {
    /// Take the lock if it is free and nobody waits for it in [`IoLock::lock`].
    pub fn try_lock<'a>(&'a self, notify: &'a Notify) -> Option<IoGuard<'a>> {
        if self.waiting.get() > 0 {
            return None;
        }
        self.take(notify)
    }

    fn take<'a>(&'a self, notify: &'a Notify) -> Option<IoGuard<'a>> {
        if self.locked.replace(true) {
            None
        } else {
            Some(IoGuard { lock: self, notify })
        }
    }

    /// Wait for the lock; opportunistic `try_lock` callers go after the waiters.
    pub async fn lock<'a>(&'a self, notify: &'a Notify) -> IoGuard<'a> {
        if let Some(g) = self.take(notify) {
            return g;
        }
        self.waiting.set(self.waiting.get() + 1);
        let _waiting = Waiting(&self.waiting);
        loop {
            let listen = notify.listen();
            if let Some(g) = self.take(notify) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_go_before_opportunistic_takers() {
        // Proves that once a task waits in `lock`, `try_lock` fails even while the lock is free,
        // until the waiter has had it: a busy syncer cannot starve a truncation or deletion.
        let (lock, notify) = (IoLock::default(), Notify::default());
        let held = lock.try_lock(&notify).expect("free");
        let mut waiter = Box::pin(lock.lock(&notify));
        let waker = futures_lite::future::block_on(futures_lite::future::poll_fn(|cx| {
            Poll::Ready(cx.waker().clone())
        }));
        let mut cx = Context::from_waker(&waker);
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        drop(held);
        assert!(lock.try_lock(&notify).is_none(), "the waiter goes first");
        let Poll::Ready(guard) = waiter.as_mut().poll(&mut cx) else {
            panic!("the waiter gets the released lock");
        };
        drop(guard);
        drop(waiter);
        assert!(lock.try_lock(&notify).is_some());
    }
}
