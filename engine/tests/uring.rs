//! Tests of the log on the real disk (`UringDisk`: glommio, O_DIRECT, io_uring), including a
//! real-process crash test: a child process appends and reports durable offsets over a pipe,
//! the parent SIGKILLs it and checks every reported record after reopening.
//!
//! The child is this same test binary, re-executed with `--ignored --exact crash_child` and
//! `CORUM_CRASH_CHILD_DIR` set; without that variable the child test does nothing.

use std::cell::Cell;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::rc::Rc;

use corum_engine::disk::{executor_builder, UringDisk};
use corum_engine::log::{Log, LogConfig, NewBatch};
use corum_engine::record::Attributes;
use corum_types::Epoch;
use rand::{Rng, SeedableRng};

const CHILD_ENV: &str = "CORUM_CRASH_CHILD_DIR";

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 256 << 10,
        ..LogConfig::default()
    }
}

fn batch(count: u32) -> NewBatch {
    NewBatch {
        epoch: Epoch(1),
        attributes: Attributes::empty(),
        record_count: count,
        first_timestamp_ms: 0,
        max_timestamp_ms: 0,
    }
}

/// A self-describing payload: task, sequence number, then bytes derived from both.
fn payload(task: u32, seq: u32) -> Vec<u8> {
    let len = 16 + ((task as usize * 131 + seq as usize * 17) % 600);
    let mut p = Vec::with_capacity(len);
    p.extend_from_slice(&task.to_le_bytes());
    p.extend_from_slice(&seq.to_le_bytes());
    p.extend_from_slice(&(len as u64).to_le_bytes());
    while p.len() < len {
        p.push((p.len() as u32).wrapping_mul(task + 7).wrapping_add(seq) as u8);
    }
    p
}

fn parse_payload(p: &[u8]) -> Option<(u32, u32)> {
    if p.len() < 16 {
        return None;
    }
    let task = u32::from_le_bytes(p[0..4].try_into().unwrap());
    let seq = u32::from_le_bytes(p[4..8].try_into().unwrap());
    (payload(task, seq) == p).then_some((task, seq))
}

fn run<T>(f: impl std::future::Future<Output = T> + 'static) -> T {
    executor_builder("engine-test")
        .make()
        .expect("glommio executor")
        .run(f)
}

async fn read_all(log: &Log<UringDisk>) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = log.start_offset();
    while at < log.end_offset() {
        let rb = log.read(at, 1 << 20).await.unwrap();
        for f in rb.frames() {
            out.push((f.header().base_offset.get(), f.payload().to_vec()));
        }
        at = rb.end_offset().unwrap();
    }
    out
}

#[test]
fn uring_append_group_commit_and_reopen() {
    // Proves the log works on O_DIRECT files: 64 concurrent appenders are group-committed
    // (far fewer fdatasyncs than appends), segments roll, and everything is there after reopen.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("@metadata-0");
    let d2 = dir.clone();
    let (written, stats) = run(async move {
        let (log, _) = Log::open(UringDisk, &d2, config()).await.unwrap();
        let prefill = glommio::spawn_local({
            let log = log.clone();
            async move { log.run_prefill().await }
        })
        .detach();
        let done = Rc::new(Cell::new(0u32));
        let mut tasks = Vec::new();
        for task in 0..64u32 {
            let log = log.clone();
            let done = done.clone();
            tasks.push(glommio::spawn_local(async move {
                for seq in 0..20u32 {
                    let (_, last) = log.append(&batch(1), &payload(task, seq)).unwrap();
                    log.wait_durable(last).await.unwrap();
                    done.set(done.get() + 1);
                }
            }));
        }
        for t in tasks {
            t.await;
        }
        assert_eq!(done.get(), 64 * 20);
        let stats = log.stats();
        let written = read_all(&log).await;
        log.clone().close().await.unwrap();
        drop(prefill);
        (written, stats)
    });
    assert_eq!(written.len(), 64 * 20);
    assert!(
        stats.syncs < 64 * 20 / 4,
        "group commit should group: {stats:?}"
    );
    let d3 = dir.clone();
    let reread = run(async move {
        let (log, report) = Log::open(UringDisk, &d3, config()).await.unwrap();
        assert!(report.torn_tail.is_none());
        assert!(report.segments > 1, "rolled at 256 KiB: {report:?}");
        read_all(&log).await
    });
    assert_eq!(reread, written);
    for (_, p) in &reread {
        assert!(parse_payload(p).is_some());
    }
}

/// This test binary re-executed to run only the ignored test `name`, with `env` set to `value`
/// (the child tests do nothing without it); its stdout piped.
fn spawn_child(name: &str, env: &str, value: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            name,
            "--nocapture",
            "--test-threads=1",
        ])
        .env(env, value)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The child side of the crash test: append from 4 tasks forever, print `D <offset> <task>
/// <seq>` for each batch once it is durable. Does nothing unless run by the parent.
#[test]
#[ignore = "child process of sigkill_crash_keeps_every_durable_record"]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    run(async move {
        let (log, _) = Log::open(UringDisk, &dir, config()).await.unwrap();
        // Sequence numbers continue across rounds so payloads stay unique per round.
        let base_seq = log.end_offset().get() as u32;
        let mut tasks = Vec::new();
        for task in 0..4u32 {
            let log = log.clone();
            tasks.push(glommio::spawn_local(async move {
                let mut seq = base_seq;
                loop {
                    let (b, last) = log
                        .append(&batch(1 + seq % 3), &payload(task, seq))
                        .unwrap();
                    log.wait_durable(last).await.unwrap();
                    println!("D {} {task} {seq}", b.get());
                    seq += 1;
                }
            }));
        }
        for t in tasks {
            t.await;
        }
    });
}

fn check_after_crash(dir: &Path, reported: &[(u64, u32, u32)]) -> u64 {
    let dir = dir.to_path_buf();
    let reported = reported.to_vec();
    run(async move {
        let (log, _) = Log::open(UringDisk, &dir, config()).await.unwrap();
        let all = read_all(&log).await;
        let by_offset: std::collections::HashMap<u64, &Vec<u8>> =
            all.iter().map(|(o, p)| (*o, p)).collect();
        // Nothing phantom: every batch is one some task appended, intact.
        for (o, p) in &all {
            assert!(
                parse_payload(p).is_some(),
                "damaged or phantom batch at {o}"
            );
        }
        // Every reported-durable batch is there with its payload.
        for (o, task, seq) in &reported {
            let p = by_offset
                .get(o)
                .unwrap_or_else(|| panic!("durable batch {o} lost"));
            assert_eq!(
                parse_payload(p),
                Some((*task, *seq)),
                "batch {o} has wrong content"
            );
        }
        log.check_invariants();
        log.end_offset().get()
    })
}

#[test]
fn sigkill_crash_keeps_every_durable_record() {
    // Proves that a process killed with SIGKILL at a random moment under load loses no batch it
    // reported durable and leaves no phantom or damaged batch, over 20 rounds on one log.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("@metadata-0");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0xC0FFEE);
    let mut all_reported = Vec::new();
    for round in 0..20 {
        let kill_after = rng.gen_range(1..400usize);
        let mut child = spawn_child("crash_child", CHILD_ENV, &dir);
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = 0;
        while seen < kill_after {
            let Some(line) = lines.next() else { break };
            let line = line.unwrap();
            let mut parts = line.split_whitespace();
            if parts.next() != Some("D") {
                continue;
            }
            let nums: Vec<u64> = parts.map(|x| x.parse().unwrap()).collect();
            all_reported.push((nums[0], nums[1] as u32, nums[2] as u32));
            seen += 1;
        }
        // SIGKILL: no chance to flush or close anything.
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        assert_eq!(rc, 0);
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "round {round}: child exited on its own: {status:?}"
        );
        assert_eq!(
            seen, kill_after,
            "round {round}: child stopped reporting early"
        );
        // Later rounds may legitimately overwrite offsets that were never durable, but every
        // reported offset was durable, so it must still hold the same batch.
        let end = check_after_crash(&dir, &all_reported);
        assert!(end > 0);
    }
}

const WRITER_ENV: &str = "CORUM_LATE_WRITER_FILE";
const LATE_FILE_BYTES: usize = 16 << 20;

/// The child side of `writes_of_a_killed_process_land_before_open_returns`: keep 8 MiB of
/// writes in flight to the file forever, each pass with new bytes. Does nothing unless run by
/// the parent.
#[test]
#[ignore = "child process of writes_of_a_killed_process_land_before_open_returns"]
fn late_writer_child() {
    use corum_engine::buf::AlignedBuf;
    use corum_engine::disk::{Disk, DiskFile, OpenMode};
    let Some(path) = std::env::var_os(WRITER_ENV) else {
        return;
    };
    run(async move {
        let f = Rc::new(
            UringDisk
                .open(Path::new(&path), OpenMode::Existing)
                .await
                .unwrap(),
        );
        println!("ready");
        let mut pass = 0u8;
        loop {
            pass = pass.wrapping_add(1);
            let mut writes = Vec::new();
            for chunk in 0..4 {
                let f = f.clone();
                writes.push(glommio::spawn_local(async move {
                    let bytes = AlignedBuf::from_slice(&vec![pass ^ chunk; 2 << 20]);
                    let pos = ((pass as u64 + chunk as u64) % 8) * (2 << 20);
                    f.write_at(pos, &bytes).await.unwrap();
                }));
            }
            for w in writes {
                w.await;
            }
        }
    });
}

#[test]
fn writes_of_a_killed_process_land_before_open_returns() {
    // Proves that io_uring writes a SIGKILLed process left in flight (the kernel finishes them
    // after the process is reaped) have all landed when the next process's `open` returns: the
    // file reads the same right after opening and 30 ms later, in every one of 30 kills.
    use corum_engine::disk::{Disk, DiskFile, OpenMode};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("file");
    std::fs::write(&path, vec![0u8; LATE_FILE_BYTES]).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x1A7E);
    for round in 0..30 {
        let mut child = spawn_child("late_writer_child", WRITER_ENV, &path);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The harness prints "test late_writer_child ... " before the child's own line.
        assert!(
            lines.any(|l| l.unwrap().ends_with("ready")),
            "round {round}: the child did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(rng.gen_range(20..80)));
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
        child.wait().unwrap();
        let p = path.clone();
        let (first, second) = run(async move {
            let f = UringDisk.open(&p, OpenMode::Existing).await.unwrap();
            let first = f.read_at(0, LATE_FILE_BYTES).await.unwrap().to_vec();
            glommio::timer::sleep(std::time::Duration::from_millis(30)).await;
            let second = f.read_at(0, LATE_FILE_BYTES).await.unwrap().to_vec();
            f.close().await.unwrap();
            (first, second)
        });
        let changed = first
            .chunks(4096)
            .zip(second.chunks(4096))
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(
            changed, 0,
            "round {round}: {changed} blocks changed after open returned"
        );
    }
}

/// The device measurement takes both kinds of durable 4 KiB write (write + fdatasync, and one
/// O_DSYNC write) and the bandwidth figures, and leaves no file behind; and an O_DSYNC write
/// through the second handle reads back through the first.
#[test]
fn device_measurement_and_durable_writes() {
    use corum_engine::buf::AlignedBuf;
    use corum_engine::devbench::{measure_device, DeviceBenchConfig};
    use corum_engine::disk::{Disk, DiskFile, OpenMode};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    run(async move {
        let cfg = DeviceBenchConfig {
            fsync_duration: std::time::Duration::from_millis(100),
            bandwidth_bytes: 4 << 20,
            quorum_writers: 3,
            quorum_duration: std::time::Duration::from_millis(100),
            ..DeviceBenchConfig::default()
        };
        let d = measure_device(&dir, &cfg).await.unwrap();
        assert!(d.fsync_samples >= 10, "{d:?}");
        assert!(d.fsync_p50_us > 0 && d.dsync_write_p50_us > 0, "{d:?}");
        assert_eq!(d.quorum_writers, 3, "{d:?}");
        assert!(
            d.quorum_write_p50_us > 0 && d.quorum_write_p50_us <= d.quorum_write_p99_us,
            "{d:?}"
        );
        assert!(d.write_mb_per_sec > 0.0 && d.read_mb_per_sec > 0.0, "{d:?}");
        assert!(
            std::fs::read_dir(&dir).unwrap().next().is_none(),
            "files left behind"
        );
        let path = dir.join("durable.bin");
        let f = UringDisk.open(&path, OpenMode::Create).await.unwrap();
        f.allocate(1 << 20).await.unwrap();
        f.sync().await.unwrap();
        let block = AlignedBuf::from_slice(&[0x42; 4096]);
        f.write_durable_at(8192, &block).await.unwrap();
        assert_eq!(&f.read_at(8192, 4096).await.unwrap()[..], &block[..]);
        f.close().await.unwrap();
    });
}
