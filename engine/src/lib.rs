//! The replicated log engine: record frames, the `Disk` seam, the segmented log.
//!
//! # Model
//!
//! - [`record`]: a batch of records is one **frame** — a 64-byte header (magic, version, length,
//!   CRC-32C, base offset, epoch, record count, timestamps, attributes) and an opaque rkyv
//!   payload, padded to 8 bytes. Frames are checked once where bytes enter the process
//!   ([`record::decode_frame`]); readers then get zero-copy `&Archived<T>` views
//!   ([`record::FrameView::access`]). The byte layout is documented in [`record`] and pinned by
//!   a golden file (`testdata/frame_v1.bin`).
//! - [`disk`]: the small async [`disk::Disk`] trait (open, read_at, write_at, fdatasync,
//!   allocate, truncate, remove, rename, list, sync_dir) with [`disk::UringDisk`] (glommio DMA
//!   files: O_DIRECT, io_uring) and [`disk::SimDisk`] (in memory, seeded, with crash, torn-write,
//!   bit-flip and EIO faults), and [`disk::StdDisk`] (blocking `std::fs`, for offline tools;
//!   read-only on request); [`disk::files`] replaces small files atomically over any of them.
//!   Futures are `!Send`: one shard owns a log.
//! - [`log`]: the segmented log over a `Disk`. Appends return offsets at once; durability is a
//!   separate watermark (`durable_end`, `wait_durable`) advanced by group-commit rounds; segments
//!   roll at `segment_bytes` with sparse indexes; suffix truncation and prefix deletion are
//!   durable; opening recovers, cutting a torn tail and refusing corruption.
//! - [`devbench`]: raw device measurements (fsync latency, bandwidth) the benches compare to.
//!
//! # Durability contract
//!
//! A batch is durable once [`log::Log::durable_end`] is above its last offset. Every durable
//! batch survives a crash intact; batches appended but not yet durable may survive or vanish
//! (never partially, never altered); nothing that was not appended ever appears. Damage to
//! durable data is reported as [`Error::Corruption`], never skipped. After any write or fdatasync
//! error the log refuses further writes ([`Error::Failed`]). See [`log`] for the details.
//!
//! # Running on glommio
//!
//! [`disk::UringDisk`] needs a glommio executor; [`disk::executor_builder`] makes one whose
//! registered IO memory fits the default 8 MiB locked-memory limit. [`disk::SimDisk`] runs under
//! any executor, including `futures_lite::future::block_on`.

pub mod buf;
pub mod devbench;
pub mod disk;
pub mod error;
pub mod log;
pub mod record;

pub use buf::AlignedBuf;
pub use error::{Error, FrameError, Result};
