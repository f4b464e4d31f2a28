//! `corum dump-log` through the binary: it lists the batches of a real log, `--verify` passes on
//! a healthy log, and a flipped byte in a sealed segment makes `--verify` fail naming the segment.

use std::path::Path;
use std::process::Command;

use corum_engine::disk::{executor_builder, UringDisk};
use corum_engine::log::{Log, LogConfig, NewBatch};
use corum_engine::record::Attributes;
use corum_types::Epoch;

const BATCHES: u32 = 40;

fn write_log(dir: &Path) {
    let dir = dir.to_path_buf();
    executor_builder("dump-log-test")
        .make()
        .expect("glommio executor")
        .run(async move {
            let config = LogConfig {
                segment_bytes: 64 << 10,
                ..LogConfig::default()
            };
            let (log, _) = Log::open(UringDisk, &dir, config).await.expect("open log");
            for i in 0..BATCHES {
                let meta = NewBatch {
                    epoch: Epoch(1 + u64::from(i / 20)),
                    attributes: Attributes::empty(),
                    record_count: 1 + i % 3,
                    first_timestamp_ms: 0,
                    max_timestamp_ms: 0,
                };
                log.append(&meta, &vec![i as u8; 3000]).expect("append");
            }
            log.flush().await.expect("flush");
            log.close().await.expect("close");
        });
}

fn dump(dir: &Path, verify: bool) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corum"));
    cmd.arg("dump-log")
        .arg("--dir")
        .arg(dir)
        .env("RUST_LOG", "warn");
    if verify {
        cmd.arg("--verify");
    }
    cmd.output().expect("run corum dump-log")
}

#[test]
fn dump_lists_batches_and_verify_catches_a_flipped_byte() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("@metadata-0");
    write_log(&dir);

    let ok = dump(&dir, true);
    let out = String::from_utf8_lossy(&ok.stdout).into_owned();
    assert!(
        ok.status.success(),
        "verify of a healthy log failed: {out}\n{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // One line per batch, every one with a good checksum.
    let ok_lines = out
        .lines()
        .filter(|l| l.trim_end().ends_with(" ok"))
        .count();
    assert_eq!(ok_lines, BATCHES as usize, "{out}");

    // Given a node's data directory (meta.properties beside @metadata-0), it reads the log in
    // @metadata-0.
    std::fs::write(tmp.path().join("meta.properties"), "version=1\n").expect("write meta");
    let via_data_dir = dump(tmp.path(), true);
    let out2 = String::from_utf8_lossy(&via_data_dir.stdout).into_owned();
    assert!(via_data_dir.status.success(), "{out2}");
    assert_eq!(out2, out);

    // Flip one payload byte in the middle of the first (sealed) segment.
    let mut segments: Vec<_> = std::fs::read_dir(&dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    assert!(
        segments.len() >= 2,
        "expected the log to roll: {segments:?}"
    );
    let first = &segments[0];
    let mut bytes = std::fs::read(first).expect("read segment");
    let at = 3 * 4096 + 100;
    assert!(bytes.len() > at);
    bytes[at] ^= 0x40;
    std::fs::write(first, &bytes).expect("write segment");

    let bad = dump(&dir, true);
    assert!(!bad.status.success(), "verify accepted a corrupt segment");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&bad.stdout),
        String::from_utf8_lossy(&bad.stderr)
    );
    let name = first
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(all.contains(&name), "{all}");
    assert!(all.contains("CORRUPTION"), "{all}");
}
