//! The shard-per-core runtime every corum node runs on.
//!
//! # Model
//!
//! A node is a fixed set of **shards**, one per core of its CPU set ([`placement`]). Each shard
//! is a single-threaded glommio executor on its own thread, pinned to its core unless
//! `--no-pin` ([`shard`]). One shard runs the controller state machine and nothing else; the
//! others run Raft, the log and the network. Shards share nothing: inside a shard, code uses
//! `Rc`/`Cell`; between shards, messages travel over **bounded** channels that push back when
//! full ([`channel`]).
//!
//! Between nodes and to clients, bytes travel as **frames** ([`frame`], pure): a 16-byte
//! header (magic, version, flags, length, crc32c) and an 8-byte-aligned rkyv payload. A
//! receiver checks the frame and validates the archive exactly once ([`message::Validated`]),
//! then hands out `&Archived<T>` without copying. [`transport`] runs framed TCP connections:
//! a bad frame closes only its own connection, with a logged reason; outbound peers reconnect
//! with capped, jittered backoff ([`backoff`]).
//!
//! **Time** comes from [`timer`] (glommio's timers); the pure cores receive it as an
//! argument. **Shutdown** ([`shutdown`]) is one trigger (SIGINT, SIGTERM, a
//! failed shard, or a test) observed by every shard, which drains and returns;
//! [`Runtime::run`] joins every shard thread and returns what each returned.
//!
//! # Locked memory
//!
//! glommio needs a `memlock` limit of at least 512 KiB, and registers an io buffer arena per
//! executor. [`RuntimeConfig`] keeps that arena small (256 KiB) so several shards start under a
//! default 8 MiB limit; if executor setup fails anyway, [`Runtime::run`] returns
//! [`Error::ExecutorSetup`] before any shard code runs.

pub mod backoff;
pub mod channel;
pub mod error;
pub mod frame;
pub mod log_limit;
pub mod message;
pub mod placement;
pub mod principal_mapping;
pub mod shard;
pub mod shutdown;
pub mod timer;
pub mod tls;
pub mod transport;

pub use backoff::{Backoff, BackoffConfig};
pub use channel::{bounded, LinkReceiver, LinkSender, Receiver, Sender, TrySendError};
pub use error::{Error, Result};
pub use frame::FrameError;
pub use log_limit::LogLimiter;
pub use message::{Validated, WireMessage};
pub use placement::{CoreId, Placement, PlacementArgs, PlacementSpec, ShardId, ShardRole};
pub use shard::{Runtime, RuntimeConfig, ShardContext, ShardOutcome};
pub use shutdown::{Shutdown, ShutdownSignal};
pub use tls::{NetStream, TlsClient, TlsIdentity, TlsServer, TlsSettings};
pub use transport::{
    ConnectionConfig, FramedConnection, Listener, PeerConfig, ReconnectingPeer, TcpConnection,
};
