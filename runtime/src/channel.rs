//! Bounded cross-shard channels with back-pressure.
//!
//! [`bounded`] makes a single-producer single-consumer glommio shared channel between two
//! shards. Its ends are created on the main thread ([`LinkSender`], [`LinkReceiver`], both
//! `Send`), moved into their shards, and connected there ([`LinkSender::connect`],
//! [`LinkReceiver::connect`]); `connect` waits for the other end to connect too. A connected
//! [`Sender`] has an async [`Sender::send`] that waits while the channel is full and a
//! [`Sender::try_send`] that reports [`TrySendError::Full`]; a message never waits in an
//! unbounded queue. Message types are the caller's: any `Send + 'static` type.
//!
//! A link between two shards is several of these, at least one each way. Both shards must
//! connect their ends in the same order (every link up first, say): `connect` waits for its
//! peer, so two shards connecting in opposite orders wait for each other forever.
//! Since a cross-shard wake-up costs tens of microseconds, a busy link carries batches (a
//! `Vec` of items per message) rather than one item per message; `benches/benches/runtime.rs`
//! measures both.

use glommio::channels::shared_channel::{self, ConnectedReceiver, ConnectedSender};
use glommio::{GlommioError, ResourceType};

use crate::error::{Error, Result};

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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_limits_are_checked() {
        // A channel of no room or of more than CAPACITY_MAX messages is refused up front.
        for bad in [0, CAPACITY_MAX + 1] {
            match bounded::<u8>(bad) {
                Err(Error::Config { field, reason }) => {
                    assert_eq!(field, "channel capacity");
                    assert!(reason.contains(&bad.to_string()), "{reason}");
                }
                other => panic!("capacity {bad}: expected a config error, got {other:?}"),
            }
        }
        assert!(bounded::<u8>(1).is_ok());
        assert!(bounded::<u8>(CAPACITY_MAX).is_ok());
    }
}
