use std::path::PathBuf;

use futures_lite::future::block_on;
use proptest::prelude::*;

use super::*;
use crate::disk::{Disk, DiskFile, SimDisk, SimFault};
use crate::record::Attributes;

fn dir() -> PathBuf {
    PathBuf::from("/data/@metadata-0")
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10,
        frame_bytes_max: 4096,
        index_interval_bytes: 512,
        buffered_bytes_max: 64 << 10,
        prefill_ahead_bytes: 8192,
        prefill_chunk_bytes: 4096,
        free_segments_max: 2,
        recent_bytes_max: 1024,
        durable_write_bytes_max: 4096,
    }
}

fn batch(epoch: u64, count: u32) -> NewBatch {
    NewBatch {
        epoch: Epoch(epoch),
        attributes: Attributes::empty(),
        record_count: count,
        first_timestamp_ms: 10,
        max_timestamp_ms: 20,
    }
}

fn payload(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as usize * 31 + i * 7) as u8)
        .collect()
}

async fn open(disk: &SimDisk) -> (Log<SimDisk>, RecoveryReport) {
    Log::open(disk.clone(), &dir(), small_config())
        .await
        .unwrap()
}

/// Every batch from `from` on, as (base, epoch, count, payload).
async fn read_all(log: &Log<SimDisk>) -> Vec<(u64, u64, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = log.start_offset();
    while at < log.end_offset() {
        let rb = log.read(at, 1000).await.unwrap();
        assert!(!rb.is_empty());
        for f in rb.frames() {
            let h = f.header();
            out.push((
                h.base_offset.get(),
                h.epoch.get(),
                h.record_count,
                f.payload().to_vec(),
            ));
        }
        at = rb.end_offset().unwrap();
    }
    out
}

#[test]
fn append_read_and_group_commit() {
    // Proves appends are readable at once, and one wait covers every batch appended before it
    // with a single round (group commit).
    block_on(async {
        let disk = SimDisk::new(1);
        let (log, report) = open(&disk).await;
        assert_eq!(report.end_offset, LogOffset(0));
        let syncs = disk.sync_count();
        for i in 0..10u64 {
            let (b, l) = log.append(&batch(1, 3), &payload(i, 50)).unwrap();
            assert_eq!((b, l), (LogOffset(i * 3), LogOffset(i * 3 + 2)));
        }
        assert_eq!(log.durable_end(), LogOffset(0));
        assert_eq!(read_all(&log).await.len(), 10, "readable before durable");
        log.wait_durable(LogOffset(29)).await.unwrap();
        assert_eq!(
            disk.sync_count() - syncs,
            1,
            "one fdatasync for ten appends"
        );
        assert_eq!(log.durable_offset(), Some(LogOffset(29)));
        assert!(matches!(
            log.wait_durable(LogOffset(30)).await,
            Err(Error::OffsetOutOfRange { .. })
        ));
        let all = read_all(&log).await;
        assert_eq!(all[4], (12, 1, 3, payload(4, 50)));
        // Reading from the middle of a batch returns that whole batch first.
        let rb = log.read(LogOffset(13), 1).await.unwrap();
        assert_eq!(rb.len(), 1);
        assert_eq!(
            rb.frames().next().unwrap().header().base_offset,
            LogOffset(12)
        );
        log.check_invariants();
    });
}

#[test]
fn roll_index_files_and_reopen() {
    // Proves segments roll at segment_bytes, sealed segments get index files that reopen uses,
    // and a damaged index file is rebuilt by scanning.
    block_on(async {
        let disk = SimDisk::new(2);
        let (log, _) = open(&disk).await;
        for i in 0..60u64 {
            log.append(&batch(1 + i / 20, 1), &payload(i, 700)).unwrap();
            if i % 7 == 0 {
                log.flush().await.unwrap();
            }
        }
        log.flush().await.unwrap();
        log.check_invariants();
        assert!(log.segment_count() >= 3, "rolled: {}", log.segment_count());
        let before = read_all(&log).await;
        let epochs = log.epoch_start_offsets();
        assert_eq!(
            epochs,
            vec![
                (Epoch(1), LogOffset(0)),
                (Epoch(2), LogOffset(20)),
                (Epoch(3), LogOffset(40))
            ]
        );
        log.close().await.unwrap();
        let (log, report) = open(&disk).await;
        assert_eq!(report.rebuilt_indexes, 0);
        assert_eq!(report.end_offset, LogOffset(60));
        assert_eq!(read_all(&log).await, before);
        assert_eq!(log.epoch_start_offsets(), epochs);
        drop(log);
        // Damage the first index file: it is rebuilt, nothing is lost.
        let idx = dir().join("00000000000000000000.index");
        disk.flip_bit(&idx, 20, 3);
        let (log, report) = open(&disk).await;
        assert_eq!(report.rebuilt_indexes, 1);
        assert_eq!(read_all(&log).await, before);
        log.check_invariants();
    });
}

#[test]
fn epoch_helpers() {
    // Proves epoch lookups and KIP-595 end-offset-for-epoch answers from memory.
    block_on(async {
        let disk = SimDisk::new(3);
        let (log, _) = open(&disk).await;
        log.append(&batch(1, 5), b"a").unwrap(); // 0..5
        log.append(&batch(3, 5), b"b").unwrap(); // 5..10
        log.append(&batch(3, 5), b"c").unwrap(); // 10..15
        log.append(&batch(4, 1), b"d").unwrap(); // 15
        assert!(matches!(
            log.append(&batch(2, 1), b"x"),
            Err(Error::EpochRegression { .. })
        ));
        assert_eq!(log.epoch_at(LogOffset(4)), Some(Epoch(1)));
        assert_eq!(log.epoch_at(LogOffset(12)), Some(Epoch(3)));
        assert_eq!(log.epoch_at(LogOffset(16)), None);
        assert_eq!(log.end_offset_for_epoch(Epoch(0)), None);
        assert_eq!(
            log.end_offset_for_epoch(Epoch(1)),
            Some((Epoch(1), LogOffset(5)))
        );
        assert_eq!(
            log.end_offset_for_epoch(Epoch(2)),
            Some((Epoch(1), LogOffset(5)))
        );
        assert_eq!(
            log.end_offset_for_epoch(Epoch(3)),
            Some((Epoch(3), LogOffset(15)))
        );
        assert_eq!(
            log.end_offset_for_epoch(Epoch(9)),
            Some((Epoch(4), LogOffset(16)))
        );
        // Truncating inside the second epoch-3 batch removes that whole batch.
        assert_eq!(
            log.truncate_suffix(LogOffset(12)).await.unwrap(),
            LogOffset(10)
        );
        assert_eq!(log.last_epoch(), Epoch(3));
        assert_eq!(
            log.end_offset_for_epoch(Epoch(9)),
            Some((Epoch(3), LogOffset(10)))
        );
        log.check_invariants();
    });
}

/// Cut back to its start, the log holds no batch and takes any epoch next: a follower that
/// restarted at a snapshot, appended a deposed leader's epoch-2 batch and truncated it takes
/// the new leader's epoch-1 batch at the same offset. (Found by the whole-node simulator.)
#[test]
fn a_log_cut_back_to_its_start_takes_any_epoch() {
    block_on(async {
        let disk = SimDisk::new(41);
        let (log, _) = open(&disk).await;
        log.delete_prefix(LogOffset(10)).await.unwrap();
        log.append(&batch(2, 1), b"deposed").unwrap();
        assert_eq!(log.last_epoch(), Epoch(2));
        assert_eq!(
            log.truncate_suffix(LogOffset(10)).await.unwrap(),
            LogOffset(10)
        );
        assert_eq!(log.append(&batch(1, 1), b"kept").unwrap().0, LogOffset(10));
        log.flush().await.unwrap();
        assert_eq!(log.last_epoch(), Epoch(1));
        log.check_invariants();
    });
}

#[test]
fn fsync_failure_is_fatal() {
    // Proves a failed fdatasync fails the waiters and every later write, without retrying.
    block_on(async {
        let disk = SimDisk::new(5);
        let (log, _) = open(&disk).await;
        log.append(&batch(1, 1), b"x").unwrap();
        disk.inject(SimFault::FailNextSync);
        assert!(matches!(
            log.wait_durable(LogOffset(0)).await,
            Err(Error::Io { .. })
        ));
        assert!(matches!(
            log.wait_durable(LogOffset(0)).await,
            Err(Error::Failed { .. })
        ));
        assert!(matches!(
            log.append(&batch(1, 1), b"y"),
            Err(Error::Failed { .. })
        ));
        assert!(matches!(
            log.truncate_suffix(LogOffset(0)).await,
            Err(Error::Failed { .. })
        ));
        assert!(log.failure().is_some());
        // A write failure is just as fatal.
        let disk = SimDisk::new(6);
        let (log, _) = open(&disk).await;
        log.append(&batch(1, 1), b"x").unwrap();
        disk.inject(SimFault::FailNextWrite);
        assert!(log.flush().await.is_err());
        assert!(matches!(
            log.append(&batch(1, 1), b"y"),
            Err(Error::Failed { .. })
        ));
    });
}

#[test]
fn backpressure_and_frame_limit() {
    // Proves appends stop at the buffered-bytes limit and oversized frames are rejected.
    block_on(async {
        let disk = SimDisk::new(7);
        let (log, _) = open(&disk).await;
        assert!(matches!(
            log.append(&batch(1, 1), &[0; 5000]),
            Err(Error::Frame(crate::FrameError::TooLarge { .. }))
        ));
        let mut n = 0;
        loop {
            match log.append(&batch(1, 1), &[1; 3000]) {
                Ok(_) => n += 1,
                Err(Error::Backpressure { .. }) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(n >= 20);
        log.flush().await.unwrap();
        log.append(&batch(1, 1), &[1; 3000]).unwrap();
        log.check_invariants();
    });
}

#[test]
fn delete_prefix_and_reset() {
    // Proves prefix deletion removes whole segments durably and a reset past the end restarts
    // the log at the snapshot offset.
    block_on(async {
        let disk = SimDisk::new(8);
        let (log, _) = open(&disk).await;
        for i in 0..40u64 {
            log.append(&batch(1, 1), &payload(i, 900)).unwrap();
        }
        log.flush().await.unwrap();
        assert_eq!(log.prefix_bytes(LogOffset(0)), 0);
        let doomed = log.prefix_bytes(LogOffset(25));
        assert!(doomed > 0);
        assert!(log.prefix_bytes(LogOffset(1000)) >= doomed);
        let start = log.delete_prefix(LogOffset(25)).await.unwrap();
        assert!(start > LogOffset(0) && start <= LogOffset(25));
        assert_eq!(
            log.prefix_bytes(LogOffset(25)),
            0,
            "what it counted is gone"
        );
        assert!(doomed >= 900 * start.get(), "{doomed} bytes below {start}");
        assert!(matches!(
            log.read(LogOffset(0), 10).await,
            Err(Error::OffsetOutOfRange { .. })
        ));
        assert_eq!(
            log.read(start, 10)
                .await
                .unwrap()
                .frames()
                .next()
                .unwrap()
                .header()
                .base_offset,
            start
        );
        log.check_invariants();
        disk.crash();
        let (log, _) = open(&disk).await;
        assert_eq!(log.start_offset(), start);
        assert_eq!(log.end_offset(), LogOffset(40));
        assert_eq!(
            log.delete_prefix(LogOffset(100)).await.unwrap(),
            LogOffset(100)
        );
        assert_eq!(log.end_offset(), LogOffset(100));
        log.append(&batch(2, 1), b"after snapshot").unwrap();
        log.flush().await.unwrap();
        disk.crash();
        let (log, _) = open(&disk).await;
        assert_eq!(
            (log.start_offset(), log.end_offset()),
            (LogOffset(100), LogOffset(101))
        );
        log.check_invariants();
    });
}

fn segment_paths(disk: &SimDisk) -> Vec<PathBuf> {
    disk.paths()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect()
}

#[test]
fn crash_keeps_durable_and_nothing_phantom() {
    // Proves that after a crash (clean or torn) every durable batch is intact, and whatever else
    // is recovered is a prefix of what was appended.
    for seed in 0..40u64 {
        block_on(async {
            let disk = SimDisk::new(seed);
            let (log, _) = open(&disk).await;
            let mut appended = Vec::new();
            for i in 0..(20 + seed % 30) {
                let p = payload(seed * 1000 + i, 100 + (i as usize * 37) % 900);
                let (b, _) = log.append(&batch(1, 1 + (i % 3) as u32), &p).unwrap();
                appended.push((b.get(), p));
                if i % 6 == 5 {
                    log.flush().await.unwrap();
                }
            }
            let durable = log.durable_end();
            drop(log);
            if seed % 2 == 0 {
                disk.crash_torn();
            } else {
                disk.crash();
            }
            let (log, _) = open(&disk).await;
            assert!(
                log.end_offset() >= durable,
                "seed {seed}: lost durable data"
            );
            let got = read_all(&log).await;
            assert!(got.len() <= appended.len());
            for (g, a) in got.iter().zip(&appended) {
                assert_eq!(
                    (g.0, &g.3),
                    (a.0, &a.1),
                    "seed {seed}: phantom or damaged batch"
                );
            }
            log.check_invariants();
            // The log is usable after recovery.
            log.append(&batch(1, 1), b"again").unwrap();
            log.flush().await.unwrap();
        });
    }
}

#[test]
fn torn_tail_is_cut_and_reported() {
    // Proves a half-written last batch is cut off on open, reported, and zeroed.
    block_on(async {
        let disk = SimDisk::new(9);
        let (log, _) = open(&disk).await;
        log.append(&batch(1, 1), &payload(1, 300)).unwrap();
        log.flush().await.unwrap();
        let end = log.inner.state.borrow().segments[0].size_bytes;
        drop(log);
        // Simulate a torn write: garbage where the next frame would start, then crash.
        let seg = segment_paths(&disk)[0].clone();
        {
            let f =
                futures_lite::future::block_on(disk.open(&seg, crate::disk::OpenMode::Existing))
                    .unwrap();
            let mut block = disk.contents(&seg).unwrap()[..4096].to_vec();
            block[end as usize..end as usize + 40].copy_from_slice(
                &crate::record::encode_frame(
                    &crate::record::BatchMeta {
                        attributes: Attributes::empty(),
                        base_offset: LogOffset(1),
                        epoch: Epoch(1),
                        record_count: 1,
                        first_timestamp_ms: 0,
                        max_timestamp_ms: 0,
                    },
                    &[9; 100],
                    4096,
                )
                .unwrap()[..40],
            );
            block_on(f.write_at(0, &block)).unwrap();
            block_on(f.sync()).unwrap();
        }
        let (log, report) = open(&disk).await;
        let torn = report.torn_tail.expect("torn tail reported");
        assert_eq!(torn.position, end);
        // The 40 garbage bytes end in 7 zero bytes (record count high bytes, reserved field):
        // what is dropped is measured to the last non-zero byte.
        assert_eq!(torn.dropped_bytes, 33);
        assert_eq!(log.end_offset(), LogOffset(1));
        assert!(disk.contents(&seg).unwrap()[end as usize..4096]
            .iter()
            .all(|&b| b == 0));
        log.append(&batch(1, 1), b"next").unwrap();
        log.flush().await.unwrap();
        assert_eq!(read_all(&log).await.len(), 2);
    });
}

#[test]
fn read_only_open_reports_what_open_would_cut_and_writes_nothing() {
    // Proves a read-only open sees the log `open` would recover (batches over several
    // segments, a torn tail cut) and reports the cut, without a single write, sync, create or
    // remove; the log refuses appends; a missing directory is an empty log.
    block_on(async {
        let disk = SimDisk::new(11);
        let (log, _) = open(&disk).await;
        for i in 0..40 {
            log.append(&batch(1 + i / 20, 1), &payload(i, 700)).unwrap();
        }
        log.flush().await.unwrap();
        assert!(log.segment_count() > 1, "the test needs sealed segments");
        let last = log
            .inner
            .state
            .borrow()
            .segments
            .last()
            .unwrap()
            .path
            .clone();
        let end = log.inner.state.borrow().segments.last().unwrap().size_bytes as usize;
        let expected = read_all(&log).await;
        drop(log);
        // Garbage where the next frame would start: a torn tail.
        let mut image = disk.contents(&last).unwrap();
        image[end..end + 24].copy_from_slice(&[0xab; 24]);
        let f = disk
            .open(&last, crate::disk::OpenMode::Existing)
            .await
            .unwrap();
        f.write_at(
            0,
            &image[..crate::buf::align_up_block(end as u64 + 24) as usize],
        )
        .await
        .unwrap();
        f.sync().await.unwrap();
        disk.sync_dir(&dir()).await.unwrap();
        let before: Vec<_> = disk
            .paths()
            .iter()
            .map(|p| (p.clone(), disk.contents(p)))
            .collect();
        let (writes, syncs) = (disk.write_count(), disk.sync_count());

        let (ro, report) = Log::open_read_only(disk.clone(), &dir(), small_config())
            .await
            .unwrap();
        let torn = report.torn_tail.clone().expect("the torn tail is reported");
        assert_eq!(
            (torn.segment.clone(), torn.position),
            (last.clone(), end as u64)
        );
        assert_eq!(read_all(&ro).await, expected);
        assert!(ro.is_read_only());
        assert!(ro.failure().unwrap().contains("read-only"));
        assert!(matches!(
            ro.append(&batch(2, 1), b"x"),
            Err(Error::Failed { .. })
        ));
        assert!(ro.truncate_suffix(LogOffset(1)).await.is_err());
        ro.close().await.unwrap();
        let after: Vec<_> = disk
            .paths()
            .iter()
            .map(|p| (p.clone(), disk.contents(p)))
            .collect();
        assert_eq!(after, before, "no file changed, appeared or vanished");
        assert_eq!((disk.write_count(), disk.sync_count()), (writes, syncs));

        // The real open cuts what the read-only one reported.
        let (log, cut) = open(&disk).await;
        assert_eq!(cut.torn_tail, report.torn_tail);
        assert_eq!(read_all(&log).await, expected);

        let empty = SimDisk::new(12);
        let (ro, report) = Log::open_read_only(empty.clone(), &dir(), small_config())
            .await
            .unwrap();
        assert_eq!(
            (ro.start_offset(), ro.end_offset()),
            (LogOffset(0), LogOffset(0))
        );
        assert!(ro.read(LogOffset(0), 100).await.unwrap().is_empty());
        assert_eq!(report.torn_tail, None);
        assert!(empty.paths().is_empty());
    });
}

#[test]
fn flipped_bit_in_synced_data_is_corruption() {
    // Proves damage to a synced batch that has valid batches after it fails the open with
    // Corruption naming the segment and position, in the active and in a sealed segment.
    for (target_byte, sealed) in [(100u64, false), (70, false), (10, false), (100, true)] {
        block_on(async {
            let disk = SimDisk::new(10);
            let (log, _) = open(&disk).await;
            let n = if sealed { 40 } else { 5 };
            for i in 0..n {
                log.append(&batch(1, 1), &payload(i, 900)).unwrap();
            }
            log.flush().await.unwrap();
            drop(log);
            let seg = segment_paths(&disk)[0].clone();
            if sealed {
                // Without its index the sealed segment is rescanned and the damage found.
                disk.remove(&dir().join("00000000000000000000.index"))
                    .await
                    .unwrap();
            }
            disk.flip_bit(&seg, target_byte, 2);
            match Log::open(disk.clone(), &dir(), small_config()).await {
                Err(Error::Corruption {
                    segment, position, ..
                }) => {
                    assert_eq!(segment, seg);
                    assert_eq!(position, 0);
                }
                Err(e) => panic!("expected corruption, got {e}"),
                Ok(_) => panic!("expected corruption for byte {target_byte}"),
            }
        });
    }
}

#[test]
fn reads_right_behind_the_writer_need_no_disk_read() {
    // Proves a batch that was just flushed (what the publisher of commits and the followers
    // read) is served from memory, starting at its own position rather than the index entry
    // before it, while older batches still come from the disk, and that a truncation leaves
    // the kept window consistent with the file.
    block_on(async {
        let disk = SimDisk::new(12);
        let (log, _) = open(&disk).await;
        for i in 0..40u64 {
            log.append(&batch(1, 1), &payload(i, 100)).unwrap();
            log.flush().await.unwrap();
            let reads = disk.read_count();
            let rb = log.read(LogOffset(i), 100).await.unwrap();
            assert_eq!(disk.read_count(), reads, "batch {i} was read from the disk");
            assert_eq!(rb.frames().next().unwrap().payload(), &payload(i, 100)[..]);
        }
        let reads = disk.read_count();
        let rb = log.read(LogOffset(2), 100).await.unwrap();
        assert!(
            disk.read_count() > reads,
            "an old batch comes from the disk"
        );
        assert_eq!(rb.frames().next().unwrap().payload(), &payload(2, 100)[..]);
        log.truncate_suffix(LogOffset(38)).await.unwrap();
        log.append(&batch(2, 1), &payload(77, 100)).unwrap();
        log.flush().await.unwrap();
        let rb = log.read(LogOffset(36), 1000).await.unwrap();
        let payloads: Vec<Vec<u8>> = rb.frames().map(|f| f.payload().to_vec()).collect();
        assert_eq!(
            payloads,
            vec![payload(36, 100), payload(37, 100), payload(77, 100)]
        );
        log.check_invariants();
    });
}

#[test]
fn small_rounds_are_one_durable_write() {
    // Proves a round of at most `durable_write_bytes_max` bytes to the active segment is one
    // O_DSYNC write (no separate fdatasync), a larger round is parallel writes and one
    // fdatasync, and both survive a crash.
    block_on(async {
        let disk = SimDisk::new(13);
        let (log, _) = open(&disk).await;
        let (durable, syncs) = (disk.durable_write_count(), disk.sync_count());
        log.append(&batch(1, 1), &payload(1, 100)).unwrap();
        log.flush().await.unwrap();
        assert_eq!(disk.durable_write_count() - durable, 1);
        assert_eq!(
            disk.sync_count() - syncs,
            1,
            "the durable write is the round's only sync"
        );
        let (durable, writes) = (disk.durable_write_count(), disk.write_count());
        for i in 0..3 {
            log.append(&batch(1, 1), &payload(2 + i, 3000)).unwrap();
        }
        log.flush().await.unwrap();
        assert_eq!(
            disk.durable_write_count(),
            durable,
            "9 KiB is above the 4 KiB limit"
        );
        assert!(disk.write_count() > writes);
        disk.crash();
        let (log, _) = open(&disk).await;
        assert_eq!(log.end_offset(), LogOffset(4));
        let all = read_all(&log).await;
        assert_eq!(all[0].3, payload(1, 100));
        assert_eq!(all[3].3, payload(4, 3000));
    });
}

#[test]
fn truncate_suffix_is_durable() {
    // Proves a suffix truncation survives a crash and the stale frames never come back, even
    // when new batches of the same offsets and sizes are appended after it.
    block_on(async {
        let disk = SimDisk::new(11);
        let (log, _) = open(&disk).await;
        for i in 0..30u64 {
            log.append(&batch(1, 1), &payload(i, 500)).unwrap();
        }
        log.flush().await.unwrap();
        assert_eq!(
            log.truncate_suffix(LogOffset(12)).await.unwrap(),
            LogOffset(12)
        );
        log.append(&batch(2, 1), &payload(99, 500)).unwrap();
        log.flush().await.unwrap();
        disk.crash();
        let (log, _) = open(&disk).await;
        assert_eq!(log.end_offset(), LogOffset(13));
        assert_eq!(log.epoch_at(LogOffset(12)), Some(Epoch(2)));
        let all = read_all(&log).await;
        assert_eq!(all[12].3, payload(99, 500));
        log.check_invariants();
    });
}

#[test]
fn prefill_writes_zeros_ahead_only_when_idle() {
    // Proves the prefill zeroes ahead of the data, never over it, and only with nothing pending.
    block_on(async {
        let disk = SimDisk::new(12);
        let (log, _) = open(&disk).await;
        log.append(&batch(1, 1), &payload(1, 100)).unwrap();
        assert!(
            !log.prefill_step().await.unwrap(),
            "pending data: no prefill"
        );
        log.flush().await.unwrap();
        let writes = disk.write_count();
        while log.prefill_step().await.unwrap() {}
        assert!(disk.write_count() > writes);
        let seg = &segment_paths(&disk)[0];
        let p = log.inner.state.borrow().segments[0].prefilled_bytes;
        assert!(p >= 8192);
        assert_eq!(read_all(&log).await[0].3, payload(1, 100));
        let _ = disk.contents(seg);
        log.check_invariants();
    });
}

#[derive(Clone, Debug)]
enum Op {
    Append {
        bump_epoch: bool,
        count: u32,
        len: usize,
    },
    Flush,
    Truncate(u8),
    DeletePrefix(u8),
    Prefill,
    Reopen,
    Crash {
        torn: bool,
        /// Tear the round's write after this many sectors instead of at a random point.
        torn_sectors: Option<u8>,
        /// Whole-sector batches appended just before a torn crash, so the torn round spans
        /// several blocks (and, in a recycled file, reaches old frames).
        extra_batches: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Most frames are whole sectors (512 bytes) long, so data often ends where a torn
        // write can end, right before the old frames of a recycled file.
        8 => (any::<bool>(), 1u32..4, 0usize..2000).prop_map(|(b, c, l)| Op::Append {
            bump_epoch: b && l % 16 == 0,
            count: c,
            len: if l < 200 { l } else { sector_frame_payload_bytes(l % 4 + 1) },
        }),
        2 => Just(Op::Flush),
        1 => any::<u8>().prop_map(Op::Truncate),
        2 => any::<u8>().prop_map(Op::DeletePrefix),
        1 => Just(Op::Prefill),
        1 => Just(Op::Reopen),
        2 => (any::<bool>(), proptest::option::of(1u8..24), 0u8..8).prop_map(
            |(torn, torn_sectors, extra_batches)| Op::Crash { torn, torn_sectors, extra_batches }
        ),
    ]
}

/// Whether the directory holds a number of segments other than `segments`.
fn log_segments_changed(disk: &SimDisk, segments: usize) -> bool {
    segment_paths(disk).len() != segments
}

async fn run_model(seed: u64, ops: Vec<Op>) {
    let disk = SimDisk::new(seed);
    let (mut log, _) = open(&disk).await;
    // The model: batches (base, epoch, count, payload) that must be in the log.
    let mut model: Vec<(u64, u64, u32, Vec<u8>)> = Vec::new();
    let mut epoch = 1u64;
    for (i, op) in ops.into_iter().enumerate() {
        match op {
            Op::Append {
                bump_epoch,
                count,
                len,
            } => {
                if bump_epoch {
                    epoch += 1;
                }
                epoch = epoch.max(log.last_epoch().get());
                let p = payload(i as u64, len);
                let (b, l) = log.append(&batch(epoch, count), &p).unwrap();
                assert_eq!(l.get() - b.get() + 1, count as u64);
                model.push((b.get(), epoch, count, p));
            }
            Op::Flush => {
                log.flush().await.unwrap();
            }
            Op::Truncate(x) => {
                let (s, e) = (log.start_offset().get(), log.end_offset().get());
                let to = s + (e - s) * x as u64 / 255;
                let new_end = log.truncate_suffix(LogOffset(to)).await.unwrap().get();
                model.retain(|b| b.0 + b.2 as u64 <= new_end);
                assert_eq!(
                    model
                        .last()
                        .map_or(log.start_offset().get(), |b| b.0 + b.2 as u64),
                    new_end
                );
            }
            Op::DeletePrefix(x) => {
                let (s, e) = (log.start_offset().get(), log.end_offset().get());
                let before = s + (e - s) * x as u64 / 255;
                let start = log.delete_prefix(LogOffset(before)).await.unwrap().get();
                assert!(start <= before.max(s));
                model.retain(|b| b.0 >= start);
            }
            Op::Prefill => {
                let _ = log.prefill_step().await.unwrap();
            }
            Op::Reopen => {
                log.clone().close().await.unwrap();
                drop(log);
                log = open(&disk).await.0;
            }
            Op::Crash {
                torn,
                torn_sectors,
                extra_batches,
            } => {
                let durable = log.durable_end().get();
                // Where the torn round's write starts, and where each extra batch ends in it.
                let (segments, write_from) = {
                    let st = log.inner.state.borrow();
                    (
                        st.segments.len(),
                        st.segments.last().expect("never empty").tail_pos,
                    )
                };
                let mut frame_ends = Vec::new();
                if torn {
                    for j in 0..u64::from(extra_batches) {
                        let epoch = epoch.max(log.last_epoch().get());
                        let p = payload(
                            i as u64 * 100 + j,
                            sector_frame_payload_bytes(1 + (i + j as usize) % 4),
                        );
                        let (b, _) = log.append(&batch(epoch, 1), &p).unwrap();
                        model.push((b.get(), epoch, 1, p));
                        let st = log.inner.state.borrow();
                        frame_ends.push(st.segments.last().expect("never empty").size_bytes);
                    }
                    // Power fails in the middle of a round: its writes are issued, its
                    // fdatasync never returns.
                    disk.inject(SimFault::FailNextSync);
                    let _ = log.flush().await;
                }
                drop(log);
                let rolled = log_segments_changed(&disk, segments);
                match (torn, torn_sectors) {
                    // Tear right after one of the extra batches (where old frames of a
                    // recycled file may begin), or at a sector count if none fits.
                    (true, Some(n)) if !frame_ends.is_empty() && !rolled => {
                        let end = frame_ends[usize::from(n) % frame_ends.len()];
                        disk.crash_torn_at((end - write_from) as usize);
                    }
                    (true, Some(n)) => disk.crash_torn_at(usize::from(n) * 512),
                    (true, None) => disk.crash_torn(),
                    (false, _) => disk.crash(),
                }
                log = open(&disk).await.0;
                let end = log.end_offset().get();
                assert!(
                    end >= durable,
                    "lost durable data: end {end} < durable {durable}"
                );
                model.retain(|b| b.0 + b.2 as u64 <= end);
            }
        }
        log.check_invariants();
        let got = read_all(&log).await;
        assert_eq!(got, model, "after op {i}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]
    #[test]
    fn log_matches_model(seed in any::<u64>(), ops in proptest::collection::vec(op(), 1..100)) {
        // Proves random appends, syncs, truncations, deletions, reopens and crashes keep the log
        // equal to a plain list of batches (minus what a crash may drop after the durable end).
        block_on(run_model(seed, ops));
    }
}

#[test]
fn reads_and_appends_during_an_io_round() {
    // Proves batches stay readable while their bytes are being written (the in-flight chunk)
    // and that appends made during a round are carried by the next one.
    block_on(async {
        let disk = SimDisk::new(13);
        let (log, _) = open(&disk).await;
        for i in 0..3u64 {
            log.append(&batch(1, 1), &payload(i, 700)).unwrap();
        }
        log.flush().await.unwrap();
        disk.set_yield_on_io(true);
        for i in 3..6u64 {
            log.append(&batch(1, 1), &payload(i, 700)).unwrap();
        }
        let syncer = log.wait_durable(LogOffset(5));
        let other = async {
            // The round has taken offsets 3..6 and is writing them now.
            futures_lite::future::yield_now().await;
            assert!(
                log.inner.state.borrow().segments[0].inflight.is_some(),
                "round in flight"
            );
            log.append(&batch(1, 1), &payload(6, 700)).unwrap();
            let got = read_all(&log).await;
            assert_eq!(got.len(), 7);
            for (i, g) in got.iter().enumerate() {
                assert_eq!(g.3, payload(i as u64, 700));
            }
            log.check_invariants();
        };
        let (r, ()) = futures_lite::future::zip(syncer, other).await;
        r.unwrap();
        assert_eq!(
            log.durable_end(),
            LogOffset(6),
            "offset 6 waits for the next round"
        );
        log.flush().await.unwrap();
        assert_eq!(log.durable_end(), LogOffset(7));
        assert_eq!(read_all(&log).await.len(), 7);
    });
}

#[test]
fn flush_gathers_ready_appends_and_flush_now_does_not() {
    // Proves `flush` lets a task that is ready append before its round starts (the round
    // carries that append), and `flush_now` starts its round at once (the append waits for
    // the next round).
    block_on(async {
        let disk = SimDisk::new(21);
        let (log, _) = open(&disk).await;
        log.append(&batch(1, 1), &payload(0, 100)).unwrap();
        let other = async {
            log.append(&batch(1, 1), &payload(1, 100)).unwrap();
        };
        let (r, ()) = futures_lite::future::zip(log.flush(), other).await;
        assert_eq!(
            r.unwrap(),
            LogOffset(2),
            "the round carried the ready append"
        );
        log.append(&batch(1, 1), &payload(2, 100)).unwrap();
        let other = async {
            log.append(&batch(1, 1), &payload(3, 100)).unwrap();
        };
        let (r, ()) = futures_lite::future::zip(log.flush_now(), other).await;
        assert_eq!(
            r.unwrap(),
            LogOffset(3),
            "the round started before the append"
        );
        assert_eq!(log.end_offset(), LogOffset(4));
        assert_eq!(log.flush_now().await.unwrap(), LogOffset(4));
        log.check_invariants();
    });
}

#[test]
fn crash_during_a_roll_recovers_the_previous_segment() {
    // Proves that a crash in the round that rolls to a new segment, with the new directory entry
    // committed but nothing synced, recovers every durable batch instead of failing on the
    // (never sealed) previous segment's torn tail.
    for seed in 0..20u64 {
        block_on(async {
            let disk = SimDisk::new(seed);
            let (log, _) = open(&disk).await;
            let mut n = 0u64;
            while log.segment_count() == 1 || n < 3 {
                log.append(&batch(1, 1), &payload(n, 1500)).unwrap();
                n += 1;
                // Leave some batches of the old segment unsynced when the roll happens.
                if log.segment_count() == 1 && n % 4 == (seed % 4) {
                    log.flush().await.unwrap();
                }
            }
            let durable = log.durable_end();
            // The roll round writes both segments, then its first fdatasync fails.
            disk.inject(SimFault::FailNextSync);
            assert!(log.flush().await.is_err());
            drop(log);
            // The file system committed the new directory entry on its own; then power fails.
            disk.sync_dir(&dir()).await.unwrap();
            disk.crash_torn();
            let (log, report) = open(&disk).await;
            assert!(log.end_offset() >= durable, "seed {seed}");
            let got = read_all(&log).await;
            for (i, g) in got.iter().enumerate() {
                assert_eq!(g.3, payload(i as u64, 1500), "seed {seed}");
            }
            assert!(report.removed_unfinished_segments <= 1);
            log.check_invariants();
        });
    }
}

fn free_paths(disk: &SimDisk) -> Vec<PathBuf> {
    disk.paths()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "free"))
        .collect()
}

/// Payload length of a frame that fills exactly one block, so the data ends on a block
/// boundary (the case where a recycled file needs its zero guard block).
const BLOCK_FRAME_PAYLOAD_BYTES: usize = crate::buf::BLOCK_BYTES - crate::record::HEADER_BYTES;

/// Payload length of a frame of `sectors` 512-byte sectors.
fn sector_frame_payload_bytes(sectors: usize) -> usize {
    sectors * 512 - crate::record::HEADER_BYTES
}

#[test]
fn delete_prefix_recycles_segment_files() {
    // Proves deleted segments go to a bounded free pool, rolls overwrite those files, and the
    // old frames in them are never read back: not after a reopen, not after a crash, and not
    // when the data ends on a block boundary right before stale bytes.
    block_on(async {
        let disk = SimDisk::new(21);
        let (log, _) = open(&disk).await;
        let mut appended = Vec::new();
        let mut append = |log: &Log<SimDisk>, len: usize| {
            let p = payload(appended.len() as u64, len);
            let (b, _) = log.append(&batch(1, 1), &p).unwrap();
            appended.push((b.get(), p));
        };
        for n in 0.. {
            if log.segment_count() == 5 {
                break;
            }
            append(&log, 1000 + (n * 131) % 2000);
        }
        log.flush().await.unwrap();
        let second_last = log.inner.state.borrow().segments[3].base;
        log.delete_prefix(second_last).await.unwrap();
        // Three segments deleted: the two newest are kept (the pool holds 2), one is removed.
        assert_eq!(free_paths(&disk).len(), 2);
        assert_eq!(log.free_segment_count(), 2);
        assert_eq!(log.stats().segments_freed, 2);
        log.check_invariants();
        // Fill the next segments with block-sized frames: every round ends on a boundary.
        let created = log.stats().segments_created;
        while log.stats().segments_recycled < 2 {
            append(&log, BLOCK_FRAME_PAYLOAD_BYTES);
            log.flush().await.unwrap();
        }
        assert_eq!(
            log.stats().segments_created,
            created,
            "no fresh file needed"
        );
        assert!(free_paths(&disk).is_empty());
        append(&log, 300);
        log.flush().await.unwrap();
        let start = log.start_offset().get();
        let expected: Vec<_> = appended.iter().filter(|a| a.0 >= start).cloned().collect();
        let check = |got: Vec<(u64, u64, u32, Vec<u8>)>| {
            let got: Vec<_> = got.into_iter().map(|g| (g.0, g.3)).collect();
            assert_eq!(got, expected);
        };
        check(read_all(&log).await);
        log.check_invariants();
        log.clone().close().await.unwrap();
        drop(log);
        let (log, report) = open(&disk).await;
        assert_eq!(report.torn_tail, None, "stale bytes are not a torn tail");
        check(read_all(&log).await);
        drop(log);
        disk.crash();
        let (log, report) = open(&disk).await;
        assert_eq!(report.torn_tail, None);
        check(read_all(&log).await);
        // Rebuilding a lost index of a sealed recycled segment stops at the stale frames too.
        let sealed = log.inner.state.borrow().segments[2].base;
        drop(log);
        disk.remove(&dir().join(segment::index_file_name(sealed)))
            .await
            .unwrap();
        let (log, report) = open(&disk).await;
        assert_eq!(report.rebuilt_indexes, 1);
        check(read_all(&log).await);
        log.check_invariants();
    });
}

#[test]
fn free_files_above_the_log_start_are_discarded() {
    // Proves that on open a free file whose frames are not all below the log start (left by a
    // reset that crashed before its new segment was durable, so the log restarts lower) is
    // deleted, never reused, and that files beyond the pool limit are deleted too.
    block_on(async {
        let disk = SimDisk::new(22);
        let (log, _) = open(&disk).await;
        for i in 0..60u64 {
            log.append(&batch(1, 1), &payload(i, 900)).unwrap();
        }
        log.flush().await.unwrap();
        let start = log.delete_prefix(LogOffset(52)).await.unwrap();
        assert_eq!(log.free_segment_count(), 2);
        drop(log);
        let above = dir().join(segment::free_file_name(LogOffset(start.get() + 5)));
        let extra = dir().join(segment::free_file_name(LogOffset(1)));
        for p in [&above, &extra] {
            let f = disk.open(p, crate::disk::OpenMode::Create).await.unwrap();
            f.allocate(16 << 10).await.unwrap();
            f.sync().await.unwrap();
        }
        disk.sync_dir(&dir()).await.unwrap();
        let (log, _) = open(&disk).await;
        assert_eq!(log.free_segment_count(), 2);
        let on_disk = free_paths(&disk);
        assert_eq!(on_disk.len(), 2);
        assert!(!on_disk.contains(&above));
        log.check_invariants();
    });
}

#[test]
fn crash_with_recycled_segments_keeps_durable_and_nothing_stale() {
    // Proves that with segment files recycled through the free pool, a crash at any point
    // (clean, torn, or in the round that renames a free file into place) keeps every durable
    // batch, and that what is recovered is exactly what was appended at those offsets: no
    // stale frame of a recycled file and no truncated batch comes back.
    let mut recycled = 0;
    // CORUM_RECYCLE_SEEDS runs more seeds than the default 40.
    let seeds = std::env::var("CORUM_RECYCLE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40u64);
    for seed in 0..seeds {
        block_on(async {
            let disk = SimDisk::new(seed);
            let (log, _) = open(&disk).await;
            let mut rng = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut next = move || {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                rng >> 33
            };
            // The batch appended last at each base offset.
            let mut appended = std::collections::BTreeMap::new();
            let steps = 80 + seed % 60;
            for step in 0..steps {
                match next() % 12 {
                    0..=6 => {
                        let len = if next() % 2 == 0 {
                            BLOCK_FRAME_PAYLOAD_BYTES
                        } else {
                            100 + next() as usize % 1400
                        };
                        let p = payload(seed * 10_000 + step, len);
                        // Some seeds append long runs without a flush: keep under the limit.
                        if log.buffered_bytes() + 2 * crate::buf::BLOCK_BYTES
                            > small_config().buffered_bytes_max
                        {
                            log.flush().await.unwrap();
                        }
                        let (b, _) = log.append(&batch(1, 1), &p).unwrap();
                        appended.insert(b.get(), p);
                    }
                    7 | 8 => {
                        log.flush().await.unwrap();
                    }
                    9 | 10 => {
                        let (s, e) = (log.start_offset().get(), log.end_offset().get());
                        log.delete_prefix(LogOffset(s + (e - s) * (next() % 256) / 255))
                            .await
                            .unwrap();
                    }
                    _ => {
                        let (s, e) = (log.start_offset().get(), log.end_offset().get());
                        let to = e - (e - s).min(next() % 3);
                        let end = log.truncate_suffix(LogOffset(to)).await.unwrap();
                        appended.retain(|b, _| *b < end.get());
                    }
                }
            }
            // Sometimes crash in a round that rolls into a free file: its fdatasync fails, the
            // directory (with the rename) is committed anyway.
            let roll_crash = seed % 3 == 0 && log.free_segment_count() > 0;
            if roll_crash {
                if log.buffered_bytes() > small_config().buffered_bytes_max / 2 {
                    log.flush().await.unwrap();
                }
                let segments = log.segment_count();
                while log.segment_count() == segments {
                    let p = payload(seed * 10_000 + 9_999, 1200);
                    let (b, _) = log.append(&batch(1, 1), &p).unwrap();
                    appended.insert(b.get(), p);
                }
            }
            let durable = log.durable_end();
            recycled += log.stats().segments_recycled;
            log.check_invariants();
            if roll_crash {
                disk.inject(SimFault::FailNextSync);
                assert!(log.flush().await.is_err());
                disk.sync_dir(&dir()).await.unwrap();
            }
            drop(log);
            if seed % 2 == 0 {
                disk.crash_torn();
            } else {
                disk.crash();
            }
            let (log, _) = open(&disk).await;
            assert!(
                log.end_offset() >= durable,
                "seed {seed}: lost durable data"
            );
            let got = read_all(&log).await;
            let mut at = log.start_offset().get();
            for g in &got {
                assert_eq!(g.0, at, "seed {seed}: contiguous");
                assert_eq!(
                    appended.get(&g.0),
                    Some(&g.3),
                    "seed {seed}: stale or phantom batch at {}",
                    g.0
                );
                at += u64::from(g.2);
            }
            log.check_invariants();
            log.append(&batch(1, 1), b"again").unwrap();
            log.flush().await.unwrap();
        });
    }
    assert!(recycled >= 20, "the test recycles files ({recycled})");
}

#[test]
fn crash_in_a_round_rolling_through_a_recycled_file_drops_the_unfinished_segments() {
    // Proves that when one round seals a durable segment, fills a recycled file and rolls on into
    // a fresh one, and power fails with the directory (fsynced for the rename) durable but the
    // recycled segment torn anywhere, recovery cuts the log at the torn segment (not only at the
    // first segment lacking an index file) and keeps every durable batch: no `Corruption`.
    let frame_bytes = crate::record::frame_bytes_for_payload(900);
    let mut tears: Vec<usize> = (0..=32).map(|sectors| sectors * 512).collect();
    tears.extend((1..=16).map(|frames| frames * frame_bytes));
    tears.extend([frame_bytes + 8, 4096 - 8, 16 << 10]);
    for tear in tears {
        block_on(async {
            let disk = SimDisk::new(tear as u64);
            let (log, _) = open(&disk).await;
            let mut appended = Vec::new();
            let append = |log: &Log<SimDisk>, appended: &mut Vec<Vec<u8>>| {
                let p = payload(appended.len() as u64, 900);
                log.append(&batch(1, 1), &p).unwrap();
                appended.push(p);
            };
            while log.segment_count() < 3 {
                append(&log, &mut appended);
                log.flush().await.unwrap();
            }
            let second = log.inner.state.borrow().segments[1].base;
            log.delete_prefix(second).await.unwrap();
            assert_eq!(log.free_segment_count(), 1);
            let start = log.start_offset().get() as usize;
            // Fill the active segment and make it durable; the next round then seals it and
            // rolls twice: into the free file, then into a fresh one.
            let room = |log: &Log<SimDisk>| {
                let st = log.inner.state.borrow();
                st.segments.last().unwrap().size_bytes + frame_bytes as u64 <= 16 << 10
            };
            while room(&log) {
                append(&log, &mut appended);
            }
            log.flush().await.unwrap();
            while log.segment_count() < 4 {
                append(&log, &mut appended);
            }
            assert_eq!(log.free_segment_count(), 0);
            let recycled_bytes = log.inner.state.borrow().segments[2].size_bytes as usize;
            let durable = log.durable_end();
            disk.inject(SimFault::FailNextSync);
            assert!(log.flush().await.is_err());
            drop(log);
            disk.crash_torn_at(tear);
            let (log, report) = open(&disk).await;
            assert!(
                log.end_offset() >= durable,
                "tear {tear}: lost durable data"
            );
            let got: Vec<_> = read_all(&log).await.into_iter().map(|g| g.3).collect();
            assert_eq!(got, appended[start..start + got.len()], "tear {tear}");
            // The recycled segment is complete if the tear spared its frames; otherwise it is
            // cut and the fresh segment after it removed.
            let torn = tear < recycled_bytes;
            assert_eq!(
                report.segments,
                if torn { 3 } else { 4 },
                "tear {tear}: {report:?}"
            );
            assert_eq!(
                report.removed_unfinished_segments,
                usize::from(torn),
                "tear {tear}: {report:?}"
            );
            // The old file held frames of the same size from byte 0: a tear on a frame boundary
            // leaves an intact old frame right after the data, a clean (stale) end; any other
            // tear leaves a broken frame, a torn tail.
            if torn {
                assert_eq!(
                    report.torn_tail.is_none(),
                    tear % frame_bytes == 0,
                    "tear {tear}: {report:?}"
                );
            }
            log.check_invariants();
            log.append(&batch(1, 1), b"again").unwrap();
            log.flush().await.unwrap();
        });
    }
}

#[test]
fn scan_ends_at_stale_and_non_continuing_frames() {
    // Proves the scan of a segment based at 100 takes only frames that continue its offsets: a
    // valid frame below the base is a stale (clean) end, one at or above it that skips offsets is
    // a bad frame, and zeros are a clean end.
    block_on(async {
        let disk = SimDisk::new(30);
        let frame = |base: u64| {
            crate::record::encode_frame(
                &crate::record::BatchMeta {
                    attributes: Attributes::empty(),
                    base_offset: LogOffset(base),
                    epoch: Epoch(1),
                    record_count: 1,
                    first_timestamp_ms: 0,
                    max_timestamp_ms: 0,
                },
                &payload(base, 200),
                4096,
            )
            .unwrap()
        };
        for (third, expected) in [
            (Some(50), segment::ScanEnd::Stale),
            (Some(99), segment::ScanEnd::Stale),
            (
                Some(103),
                segment::ScanEnd::Bad(
                    "batch base offset @103 does not continue the log at @102".into(),
                ),
            ),
            (None, segment::ScanEnd::Clean),
        ] {
            let mut bytes = [frame(100), frame(101)].concat();
            if let Some(base) = third {
                bytes.extend_from_slice(&frame(base));
            }
            bytes.resize(4096, 0);
            let path = dir().join("scan.log");
            let f = disk
                .open(&path, crate::disk::OpenMode::Create)
                .await
                .unwrap();
            f.write_at(0, &crate::buf::AlignedBuf::from_slice(&bytes))
                .await
                .unwrap();
            let s = segment::scan(
                &f,
                LogOffset(100),
                0,
                LogOffset(100),
                Epoch(1),
                4096,
                4096,
                |_, _| {},
            )
            .await
            .unwrap();
            assert_eq!(s.stop, expected, "third frame {third:?}");
            assert_eq!(s.batches.len(), 2);
            assert_eq!(s.end_offset, LogOffset(102));
        }
    });
}

#[test]
fn data_ending_less_than_a_header_before_a_block_boundary_gets_a_zero_guard() {
    // Proves that in a recycled file, data ending 8 bytes before a block boundary (over a block
    // of old payload bytes) is followed by a whole zero header: the reopen finds a clean end,
    // reports no torn tail and zeroes nothing.
    block_on(async {
        let disk = SimDisk::new(31);
        let (log, _) = open(&disk).await;
        let mut appended = Vec::new();
        let append = |log: &Log<SimDisk>, appended: &mut Vec<Vec<u8>>, len: usize| {
            let p = payload(appended.len() as u64, len);
            log.append(&batch(1, 1), &p).unwrap();
            appended.push(p);
        };
        while log.segment_count() < 3 {
            append(&log, &mut appended, 1000);
            log.flush().await.unwrap();
        }
        let second = log.inner.state.borrow().segments[1].base;
        log.delete_prefix(second).await.unwrap();
        assert_eq!(log.free_segment_count(), 1);
        let start = log.start_offset().get() as usize;
        // A frame of 4088 bytes that does not fit the active segment: it starts the recycled one.
        let short_payload = crate::buf::BLOCK_BYTES - 8 - crate::record::HEADER_BYTES;
        let room = |log: &Log<SimDisk>| {
            let st = log.inner.state.borrow();
            st.segments.last().unwrap().size_bytes + 4088 <= 16 << 10
        };
        while room(&log) {
            append(&log, &mut appended, 1000);
        }
        append(&log, &mut appended, short_payload);
        log.flush().await.unwrap();
        assert_eq!(log.stats().segments_recycled, 1);
        let recycled = log.inner.state.borrow().segments[2].path.clone();
        assert_eq!(log.inner.state.borrow().segments[2].size_bytes, 4088);
        let bytes = disk.contents(&recycled).unwrap();
        assert!(bytes[4088..8192].iter().all(|&b| b == 0), "guard block");
        log.clone().close().await.unwrap();
        drop(log);
        disk.crash();
        let (log, report) = open(&disk).await;
        assert_eq!(report.torn_tail, None);
        let got: Vec<_> = read_all(&log).await.into_iter().map(|g| g.3).collect();
        assert_eq!(got, appended[start..]);
        log.check_invariants();
    });
}
