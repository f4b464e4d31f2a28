//! Bounded cross-shard channels with back-pressure.
//!
//! The building block is [`bounded`]: a single-producer single-consumer glommio shared channel
//! between two shards. Its ends are created on the main thread ([`LinkSender`],
//! [`LinkReceiver`], both `Send`), moved into their shards, and connected there
//! ([`LinkSender::connect`], [`LinkReceiver::connect`]); `connect` waits for the other end to
//! connect too. A connected [`Sender`] has an async [`Sender::send`] that waits while the channel
//! is full and a [`Sender::try_send`] that reports [`TrySendError::Full`]; a message never waits
//! in an unbounded queue.
//!
//! [`ShardChannels`] wires the standard topology of a node: every worker shard has a link *up*
//! into the controller shard (client requests, committed batches) and a link *down* from it
//! (responses, proposals). The controller's [`ControllerPorts`] fan in from all workers fairly;
//! each worker's [`WorkerPorts`] has one sender and one receiver. Message types are the
//! caller's: any `Send + 'static` type (an owned request, a committed-batch handle).
//!
//! Connection order is fixed to avoid a cycle of shards waiting for each other in `connect`:
//! every party connects its up links first, then its down links.

use std::future::poll_fn;
use std::task::Poll;

use futures_lite::Stream;
use glommio::channels::shared_channel::{self, ConnectedReceiver, ConnectedSender};
use glommio::{GlommioError, ResourceType};

use crate::error::{Error, Result};
use crate::placement::{Placement, ShardId};

/// Largest accepted channel capacity; a bigger queue is a sign of a missing byte cap.
pub const CAPACITY_MAX: usize = 1 << 20;

/// A channel's sending end before its shard connected it. `Send`.
#[derive(Debug)]
pub struct LinkSender<T: Send + 'static>(shared_channel::SharedSender<T>);

/// A channel's receiving end before its shard connected it. `Send`.
#[derive(Debug)]
pub struct LinkReceiver<T: Send + 'static>(shared_channel::SharedReceiver<T>);

/// Creates a bounded channel holding at most `capacity` messages (1..=[`CAPACITY_MAX`]).
pub fn bounded<T: Send + 'static>(capacity: usize) -> Result<(LinkSender<T>, LinkReceiver<T>)> {
    check_capacity(capacity)?;
    let (tx, rx) = shared_channel::new_bounded(capacity);
    Ok((LinkSender(tx), LinkReceiver(rx)))
}

fn check_capacity(capacity: usize) -> Result<()> {
    if capacity == 0 || capacity > CAPACITY_MAX {
        return Err(Error::Config {
            field: "channel capacity",
            reason: format!("must be in 1..={CAPACITY_MAX}, got {capacity}"),
        });
    }
    Ok(())
}

impl<T: Send + 'static> LinkSender<T> {
    /// Connects this end inside its shard; waits until the receiver connects as well.
    pub async fn connect(self) -> Sender<T> {
        Sender(self.0.connect().await)
    }
}

impl<T: Send + 'static> LinkReceiver<T> {
    /// Connects this end inside its shard; waits until the sender connects as well.
    pub async fn connect(self) -> Receiver<T> {
        Receiver(self.0.connect().await)
    }
}

/// Why [`Sender::try_send`] did not send; the message comes back.
#[derive(Debug, PartialEq, Eq)]
pub enum TrySendError<T> {
    /// The channel is at capacity; try later or use [`Sender::send`].
    Full(T),
    /// The receiver is gone.
    Closed(T),
}

/// The connected sending end, usable only on its shard.
#[derive(Debug)]
pub struct Sender<T: Send>(ConnectedSender<T>);

impl<T: Send> Sender<T> {
    /// Sends, waiting while the channel is full. Errors with the message if the receiver is gone.
    pub async fn send(&self, msg: T) -> std::result::Result<(), T> {
        self.0.send(msg).await.map_err(into_item)
    }

    /// Sends if there is room now.
    pub fn try_send(&self, msg: T) -> std::result::Result<(), TrySendError<T>> {
        match self.0.try_send(msg) {
            Ok(()) => Ok(()),
            Err(GlommioError::WouldBlock(ResourceType::Channel(m))) => Err(TrySendError::Full(m)),
            Err(e) => Err(TrySendError::Closed(into_item(e))),
        }
    }

    /// Closes the channel; the receiver sees the end after draining what was sent.
    pub fn close(&self) {
        self.0.close()
    }
}

fn into_item<T>(e: GlommioError<T>) -> T {
    match e {
        GlommioError::Closed(ResourceType::Channel(m))
        | GlommioError::WouldBlock(ResourceType::Channel(m)) => m,
        other => panic!("glommio shared channel returned an error without the item: {other:?}"),
    }
}

/// The connected receiving end, usable only on its shard.
#[derive(Debug)]
pub struct Receiver<T: Send>(ConnectedReceiver<T>);

impl<T: Send> Receiver<T> {
    /// The next message, or `None` once the sender is gone and the channel is drained.
    pub async fn recv(&self) -> Option<T> {
        self.0.recv().await
    }

    fn poll_next(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Option<T>> {
        std::pin::Pin::new(&mut self.0).poll_next(cx)
    }
}

/// Several receivers read as one, fairly: each call starts polling after the receiver that
/// delivered last, so a busy shard can't starve the others.
#[derive(Debug)]
pub struct FanIn<T: Send> {
    receivers: Vec<(ShardId, Option<Receiver<T>>)>,
    next: usize,
}

impl<T: Send> FanIn<T> {
    /// Fans in the given receivers.
    pub fn new(receivers: Vec<(ShardId, Receiver<T>)>) -> FanIn<T> {
        FanIn {
            receivers: receivers.into_iter().map(|(s, r)| (s, Some(r))).collect(),
            next: 0,
        }
    }

    /// The next message and the shard it came from; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<(ShardId, T)> {
        poll_fn(|cx| {
            let n = self.receivers.len();
            let mut open = 0;
            for k in 0..n {
                let i = (self.next + k) % n;
                let (shard, slot) = &mut self.receivers[i];
                let Some(rx) = slot else { continue };
                match rx.poll_next(cx) {
                    Poll::Ready(Some(msg)) => {
                        self.next = (i + 1) % n;
                        return Poll::Ready(Some((*shard, msg)));
                    }
                    Poll::Ready(None) => *slot = None,
                    Poll::Pending => open += 1,
                }
            }
            if open == 0 {
                Poll::Ready(None)
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

/// Capacities of the standard node channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Messages in flight from one worker into the controller.
    pub up_capacity: usize,
    /// Messages in flight from the controller to one worker.
    pub down_capacity: usize,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig {
            up_capacity: 1024,
            down_capacity: 1024,
        }
    }
}

/// Unconnected ends of the controller shard.
#[derive(Debug)]
pub struct ControllerLinks<Up: Send + 'static, Down: Send + 'static> {
    up: Vec<(ShardId, LinkReceiver<Up>)>,
    down: Vec<(ShardId, LinkSender<Down>)>,
}

/// Unconnected ends of one worker shard.
#[derive(Debug)]
pub struct WorkerLinks<Up: Send + 'static, Down: Send + 'static> {
    up: LinkSender<Up>,
    down: LinkReceiver<Down>,
}

/// The standard node topology: each worker linked up into and down from the controller shard.
#[derive(Debug)]
pub struct ShardChannels<Up: Send + 'static, Down: Send + 'static> {
    /// The controller shard's ends.
    pub controller: (ShardId, ControllerLinks<Up, Down>),
    /// Each worker shard's ends, in shard order.
    pub workers: Vec<(ShardId, WorkerLinks<Up, Down>)>,
}

impl<Up: Send + 'static, Down: Send + 'static> ShardChannels<Up, Down> {
    /// Creates the links for `placement`. On a 1-shard placement there are no workers and no
    /// links; the combined shard calls its controller code directly.
    pub fn new(placement: &Placement, config: ChannelConfig) -> Result<Self> {
        check_capacity(config.up_capacity)?;
        check_capacity(config.down_capacity)?;
        let mut controller = ControllerLinks {
            up: Vec::new(),
            down: Vec::new(),
        };
        let mut workers = Vec::new();
        for shard in placement.workers() {
            let (up_tx, up_rx) = bounded(config.up_capacity)?;
            let (down_tx, down_rx) = bounded(config.down_capacity)?;
            controller.up.push((shard, up_rx));
            controller.down.push((shard, down_tx));
            workers.push((
                shard,
                WorkerLinks {
                    up: up_tx,
                    down: down_rx,
                },
            ));
        }
        Ok(ShardChannels {
            controller: (placement.controller(), controller),
            workers,
        })
    }

    /// Splits into one slot per shard id (`shard_count` slots): the controller's slot holds
    /// [`ShardLinks::Controller`], each worker's [`ShardLinks::Worker`]; a 1-shard placement
    /// gets an empty controller entry. Handy in [`crate::Runtime::run`]'s per-shard closure,
    /// which `take()`s its slot.
    pub fn into_per_shard(self, shard_count: usize) -> Vec<Option<ShardLinks<Up, Down>>> {
        let mut out: Vec<Option<ShardLinks<Up, Down>>> = (0..shard_count).map(|_| None).collect();
        let (cid, c) = self.controller;
        out[cid.0] = Some(ShardLinks::Controller(c));
        for (id, w) in self.workers {
            out[id.0] = Some(ShardLinks::Worker(w));
        }
        out
    }
}

/// One shard's unconnected ends.
#[derive(Debug)]
pub enum ShardLinks<Up: Send + 'static, Down: Send + 'static> {
    Controller(ControllerLinks<Up, Down>),
    Worker(WorkerLinks<Up, Down>),
}

impl<Up: Send + 'static, Down: Send + 'static> ControllerLinks<Up, Down> {
    /// Connects all ends inside the controller shard.
    pub async fn connect(self) -> ControllerPorts<Up, Down> {
        let mut up = Vec::with_capacity(self.up.len());
        for (shard, rx) in self.up {
            up.push((shard, rx.connect().await));
        }
        let mut down = Vec::with_capacity(self.down.len());
        for (shard, tx) in self.down {
            down.push((shard, tx.connect().await));
        }
        ControllerPorts {
            inbound: FanIn::new(up),
            outbound: down,
        }
    }
}

impl<Up: Send + 'static, Down: Send + 'static> WorkerLinks<Up, Down> {
    /// Connects both ends inside the worker shard.
    pub async fn connect(self) -> WorkerPorts<Up, Down> {
        let up = self.up.connect().await;
        let down = self.down.connect().await;
        WorkerPorts { up, down }
    }
}

/// The controller shard's connected ends.
#[derive(Debug)]
pub struct ControllerPorts<Up: Send, Down: Send> {
    inbound: FanIn<Up>,
    outbound: Vec<(ShardId, Sender<Down>)>,
}

impl<Up: Send, Down: Send> ControllerPorts<Up, Down> {
    /// The next message from any worker; `None` once all workers closed their up links.
    pub async fn recv(&mut self) -> Option<(ShardId, Up)> {
        self.inbound.recv().await
    }

    fn sender(&self, shard: ShardId) -> Result<&Sender<Down>> {
        self.outbound
            .iter()
            .find(|(s, _)| *s == shard)
            .map(|(_, tx)| tx)
            .ok_or(Error::NoSuchShard { shard })
    }

    /// Sends to one worker, waiting while its channel is full.
    pub async fn send_to(&self, shard: ShardId, msg: Down) -> Result<()> {
        self.sender(shard)?
            .send(msg)
            .await
            .map_err(|_| Error::ChannelClosed)
    }

    /// Sends to one worker if there is room now.
    pub fn try_send_to(
        &self,
        shard: ShardId,
        msg: Down,
    ) -> Result<std::result::Result<(), TrySendError<Down>>> {
        Ok(self.sender(shard)?.try_send(msg))
    }

    /// The worker shards this controller talks to.
    pub fn workers(&self) -> impl Iterator<Item = ShardId> + '_ {
        self.outbound.iter().map(|(s, _)| *s)
    }

    /// Closes every down link; workers see the end after draining.
    pub fn close(&self) {
        for (_, tx) in &self.outbound {
            tx.close();
        }
    }
}

/// A worker shard's connected ends.
#[derive(Debug)]
pub struct WorkerPorts<Up: Send, Down: Send> {
    up: Sender<Up>,
    down: Receiver<Down>,
}

impl<Up: Send, Down: Send> WorkerPorts<Up, Down> {
    /// Sends to the controller, waiting while the channel is full.
    pub async fn send(&self, msg: Up) -> Result<()> {
        self.up.send(msg).await.map_err(|_| Error::ChannelClosed)
    }

    /// Sends to the controller if there is room now.
    pub fn try_send(&self, msg: Up) -> std::result::Result<(), TrySendError<Up>> {
        self.up.try_send(msg)
    }

    /// The next message from the controller; `None` once it closed the link.
    pub async fn recv(&self) -> Option<Down> {
        self.down.recv().await
    }

    /// Closes the up link; the controller sees it after draining.
    pub fn close(&self) {
        self.up.close()
    }
}
