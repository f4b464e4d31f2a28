//! The driver's end of the port to the controller service ([`crate::port`]): the tasks that
//! move messages between the port, the call table and the driver's loop. They hold no
//! policy: the table ([`crate::calls`]) decides every answer, the loop decides proposals.
//!
//! | task            | from                                   | to                                             |
//! |-----------------|----------------------------------------|------------------------------------------------|
//! | `forward_calls` | [`super::RaftHandle::call`] (bounded queue) | registered in the table, then [`ToService::Calls`] (a batch per message) |
//! | `serve_port`    | [`ToDriver`] from the service          | proposals to the loop (bounded: the loop admits them), verdicts to the table, snapshot offers to the loop, the service's status to its cell |
//! | `forward_status`| the driver's status                    | [`ToService::Status`] when leadership or the running flag changes, and now and then |
//!
//! Committed batches go to the port from the publisher, refusals from the loop.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_lite::future::{or, poll_once};
use glommio::channels::local_channel::{LocalReceiver, LocalSender};

use super::{RaftHandle, SnapshotOffer};
use crate::calls::{CallId, Outgoing, PendingCalls};
use crate::dispatch::effective_timeout_ms;
use crate::port::ServiceStatus;
use crate::port::{
    Call, PortReceiver, PortSender, Proposal, ToDriver, ToService, ITEMS_PER_MESSAGE_MAX,
};
use crate::protocol::{RequestFrame, ResponseFrame};

/// The call table of the driver's shard, shared by the loop and the tasks here (one shard:
/// never borrowed across an await).
pub(crate) type CallTable = Rc<RefCell<PendingCalls<Reply>>>;

/// A request on its way from a connection to the table.
pub(crate) struct IncomingCall {
    pub(crate) frame: RequestFrame,
    pub(crate) reply: Reply,
    pub(crate) received: Instant,
}

/// Sends answers the table gave out (a caller that gave up just drops its answer).
pub(crate) fn send_answers(out: impl IntoIterator<Item = Outgoing<Reply>>) {
    for (reply, frame) in out {
        reply.send(frame);
    }
}

/// Where the one answer of a call goes: [`Reply::send`] puts it there, [`CallAnswer`] takes
/// it. One shard, one writer, one reader: one allocation per call, against two for a
/// capacity-1 channel, and a reader that is a plain `Unpin` future.
struct AnswerCell {
    answer: Option<ResponseFrame>,
    waker: Option<Waker>,
}

/// The writing end of a call's answer ([`reply_pair`]). Dropped unsent, its caller gets
/// `NotController` (the driver or the service is gone).
pub(crate) struct Reply(Rc<RefCell<AnswerCell>>);

impl Reply {
    /// Puts the call's answer where its caller finds it, and wakes the caller.
    pub(crate) fn send(self, frame: ResponseFrame) {
        self.0.borrow_mut().answer = Some(frame);
        // Dropping `self` closes the cell and wakes the caller.
    }
}

impl Drop for Reply {
    /// Wakes the caller: its answer is there, or will never be.
    fn drop(&mut self) {
        let waker = self.0.borrow_mut().waker.take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// A call's reply and the future that waits for it.
pub(crate) fn reply_pair(correlation_id: u64) -> (Reply, CallAnswer) {
    let cell = Rc::new(RefCell::new(AnswerCell {
        answer: None,
        waker: None,
    }));
    (
        Reply(cell.clone()),
        CallAnswer {
            correlation_id,
            waiting: None,
            cell,
        },
    )
}

/// The answer to one [`RaftHandle::call`]: the call table's one outcome for it, or
/// `NotController` when the driver or the service is gone before answering. A plain future
/// (`Unpin`, a few words) that callers hold across their own awaits without growing them.
pub struct CallAnswer {
    correlation_id: u64,
    /// The call's send, when the call queue was full (back-pressure from the service).
    waiting: Option<Pin<Box<dyn Future<Output = bool>>>>,
    cell: Rc<RefCell<AnswerCell>>,
}

impl CallAnswer {
    /// Queues the call's send (the call queue was full) before the answer can come.
    pub(crate) fn set_waiting(&mut self, send: Pin<Box<dyn Future<Output = bool>>>) {
        self.waiting = Some(send);
    }

    fn gone(&self) -> ResponseFrame {
        ResponseFrame {
            correlation_id: self.correlation_id,
            body: Err(crate::protocol::RpcError::NotController { leader: None }),
        }
    }
}

impl Future for CallAnswer {
    type Output = ResponseFrame;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ResponseFrame> {
        let this = &mut *self;
        if let Some(send) = this.waiting.as_mut() {
            let sent = std::task::ready!(send.as_mut().poll(cx));
            this.waiting = None;
            if !sent {
                return Poll::Ready(this.gone());
            }
        }
        let mut cell = this.cell.borrow_mut();
        if let Some(frame) = cell.answer.take() {
            return Poll::Ready(frame);
        }
        // The cell's only holder: the reply is gone unsent.
        if Rc::strong_count(&this.cell) == 1 {
            drop(cell);
            return Poll::Ready(this.gone());
        }
        match &cell.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => cell.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// Registers each call in the table and hands a batch of them to the service.
pub(crate) async fn forward_calls(
    calls: LocalReceiver<IncomingCall>,
    table: CallTable,
    port: Rc<PortSender<ToService>>,
    timeout_default_ms: u64,
    timeout_max_ms: u64,
) {
    // Reused from one batch to the next, so it grows to the usual burst once, not per batch.
    let mut ready = Vec::new();
    while let Some(first) = calls.recv().await {
        ready.push(first);
        while ready.len() < ITEMS_PER_MESSAGE_MAX {
            match poll_once(calls.recv()).await {
                Some(Some(c)) => ready.push(c),
                _ => break,
            }
        }
        let mut batch = Vec::with_capacity(ready.len());
        let mut refused = Vec::new();
        {
            let mut t = table.borrow_mut();
            for c in ready.drain(..) {
                let timeout_ms =
                    effective_timeout_ms(c.frame.timeout_ms, timeout_default_ms, timeout_max_ms);
                let timeout_ms = u32::try_from(timeout_ms).unwrap_or(u32::MAX);
                match t.register(c.reply, c.frame.correlation_id, timeout_ms, c.received) {
                    Ok(id) => batch.push(Call { id, frame: c.frame }),
                    Err(answer) => refused.push(answer),
                }
            }
        }
        send_answers(refused);
        if batch.is_empty() {
            continue;
        }
        let ids: Vec<CallId> = batch.iter().map(|c| c.id).collect();
        let sent = port.send(ToService::Calls(batch)).await.is_ok();
        let now = Instant::now();
        let out = {
            let mut t = table.borrow_mut();
            if sent {
                t.forwarded(ids, now);
                Vec::new()
            } else {
                t.service_gone(now)
            }
        };
        send_answers(out);
    }
}

/// Serves the service's messages until its end of the port goes away; then every call it had
/// gets `NotController`, and so does every later call.
pub(crate) async fn serve_port(
    rx: PortReceiver<ToDriver>,
    table: CallTable,
    proposals: LocalSender<Proposal>,
    offers: LocalSender<SnapshotOffer>,
    service_status: Rc<RefCell<ServiceStatus>>,
) {
    while let Some(message) = rx.recv().await {
        match message {
            ToDriver::Propose(p) => {
                // Waits while the loop admits no proposal (too much uncommitted): the port
                // fills behind it and the service waits. The loop only stops on shutdown.
                if proposals.send(p).await.is_err() {
                    break;
                }
            }
            ToDriver::Answers(answers) => {
                let now = Instant::now();
                let out: Vec<_> = {
                    let mut t = table.borrow_mut();
                    answers
                        .into_iter()
                        .filter_map(|(id, body)| t.answer(id, body, now))
                        .collect()
                };
                send_answers(out);
            }
            ToDriver::Snapshot { end_offset, data } => {
                // A full queue drops it: the service offers a newer one later.
                let _ = offers.try_send(SnapshotOffer { end_offset, data });
            }
            ToDriver::Status(status) => *service_status.borrow_mut() = *status,
        }
    }
    let out = table.borrow_mut().service_gone(Instant::now());
    send_answers(out);
    service_status.borrow_mut().running = false;
}

/// How often the driver's status goes to the service besides on a change of leadership.
const STATUS_REFRESH_MS: u64 = 500;

/// Sends the driver's status to the service at once when the role, epoch, leader or running
/// flag changes, and every [`STATUS_REFRESH_MS`] otherwise; ends after the last status (not
/// running) or when the service is gone.
pub(crate) async fn forward_status(raft: RaftHandle, port: Rc<PortSender<ToService>>) {
    let changed = raft.watch_status();
    let mut last = None;
    let mut next_refresh = Instant::now();
    loop {
        // Woken by every high watermark change too: compare without copying the status.
        let key = raft.leadership();
        if last != Some(key) || Instant::now() >= next_refresh {
            last = Some(key);
            next_refresh = Instant::now() + Duration::from_millis(STATUS_REFRESH_MS);
            let now = raft.status();
            let running = now.running;
            if port.send(ToService::Status(Box::new(now))).await.is_err() || !running {
                return;
            }
        }
        let refresh = glommio::timer::sleep(next_refresh.saturating_duration_since(Instant::now()));
        or(
            async {
                if changed.recv().await.is_none() {
                    std::future::pending::<()>().await;
                }
            },
            refresh,
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ResponseBody, RpcError};
    use futures_lite::future::block_on;

    fn frame(correlation_id: u64) -> ResponseFrame {
        ResponseFrame {
            correlation_id,
            body: Ok(ResponseBody::UnregisterBroker),
        }
    }

    /// The answer sent is the one the caller gets, sent before or after the caller waits.
    #[test]
    fn a_call_gets_the_answer_sent() {
        let (reply, answer) = reply_pair(7);
        reply.send(frame(7));
        assert_eq!(block_on(answer), frame(7));

        let (reply, mut answer) = reply_pair(8);
        assert!(
            block_on(poll_once(&mut answer)).is_none(),
            "nothing sent yet"
        );
        reply.send(frame(8));
        assert_eq!(block_on(answer), frame(8));
    }

    /// A reply dropped unsent (the driver or the service gone) answers `NotController`, with
    /// the call's correlation id, also to a caller already waiting.
    #[test]
    fn a_reply_dropped_unsent_answers_not_controller() {
        for wait_first in [false, true] {
            let (reply, mut answer) = reply_pair(9);
            if wait_first {
                assert!(block_on(poll_once(&mut answer)).is_none());
            }
            drop(reply);
            let got = block_on(answer);
            assert_eq!(got.correlation_id, 9);
            assert!(matches!(
                got.body,
                Err(RpcError::NotController { leader: None })
            ));
        }
    }

    /// A call whose send failed (the call queue closed while it waited) answers
    /// `NotController`; one whose send went through then waits for its answer.
    #[test]
    fn a_waiting_send_comes_first() {
        let (_reply, mut answer) = reply_pair(3);
        answer.set_waiting(Box::pin(async { false }));
        assert!(matches!(
            block_on(answer).body,
            Err(RpcError::NotController { leader: None })
        ));

        let (reply, mut answer) = reply_pair(4);
        answer.set_waiting(Box::pin(async { true }));
        assert!(
            block_on(poll_once(&mut answer)).is_none(),
            "sent, not yet answered"
        );
        reply.send(frame(4));
        assert_eq!(block_on(answer), frame(4));
    }
}
