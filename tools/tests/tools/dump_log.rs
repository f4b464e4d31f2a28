//! `corum dump-log` through the binary: it lists the batches of a real log, `--verify` passes on
//! a healthy log, and a flipped byte in a sealed segment makes `--verify` fail naming the segment.
//! The offline tools (`dump-log`, `info`, `shell --dir`) write nothing into the directory they
//! read, even one whose log recovery would cut.

use std::path::Path;
use std::process::Command;

use corum_engine::disk::{executor_builder, UringDisk};
use corum_engine::log::{Log, LogConfig, NewBatch};
use corum_engine::record::Attributes;
use corum_types::Epoch;

use crate::common::file_tree;

const BATCHES: u32 = 40;

fn write_log(dir: &Path) {
    write_log_with(dir, Attributes::empty());
}

fn write_log_with(dir: &Path, attributes: Attributes) {
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
                    attributes,
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

/// `dump-log`, `info` and `shell --dir` on a formatted node directory whose log has a torn
/// tail (which a node's start would zero): each succeeds, `info` reports what recovery would
/// cut, and afterwards no file changed (contents, length, modification time), appeared or
/// vanished. `dump-log --kafka-export` of it fails (its control batches hold no control
/// records), naming the batch, and leaves no partition directory behind in its output.
#[test]
fn offline_tools_write_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let config = tmp.path().join("node.properties");
    std::fs::write(
        &config,
        format!(
            "node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:19191\n\
             controller.listener.names=CONTROLLER\n\
             controller.quorum.voters=1@127.0.0.1:19191\nmetadata.log.dir={}\n",
            data.display()
        ),
    )
    .expect("write config");
    let format = Command::new(env!("CARGO_BIN_EXE_corum"))
        .args(["format", "--config"])
        .arg(&config)
        .args(["--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg"])
        .output()
        .expect("run corum format");
    assert!(
        format.status.success(),
        "{}",
        String::from_utf8_lossy(&format.stderr)
    );
    let log_dir = data.join("@metadata-0");
    // Control batches: the shell skips them (their payloads are not records).
    write_log_with(&log_dir, Attributes::CONTROL);
    // A torn tail: garbage right after the last frame of the last segment.
    let segments = futures_lite::future::block_on(corum_engine::log::inspect_dir(
        &corum_engine::disk::StdDisk::read_only(),
        &log_dir,
        corum_engine::record::DEFAULT_FRAME_BYTES_MAX,
    ))
    .expect("inspect");
    let last = segments.last().expect("a segment");
    let mut bytes = std::fs::read(&last.path).expect("read segment");
    let at = last.end_position as usize;
    bytes[at..at + 24].copy_from_slice(&[0xab; 24]);
    std::fs::write(&last.path, &bytes).expect("write segment");
    let before = file_tree(tmp.path());
    let contents: Vec<Vec<u8>> = before
        .iter()
        .filter(|(p, _, _)| p.is_file())
        .map(|(p, _, _)| std::fs::read(p).expect("read"))
        .collect();

    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_corum"))
            .args(args)
            .arg(&data)
            .env("RUST_LOG", "warn")
            .output()
            .expect("run corum");
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "{args:?}: {out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    };
    let dump = run(&["dump-log", "--verify", "--dir"]);
    assert!(dump.contains("torn tail"), "{dump}");
    let info = run(&["info", "--dir"]);
    assert!(
        info.contains(&format!(
            "metadata log: offsets 0 to {}",
            last_end(&segments)
        )),
        "{info}"
    );
    assert!(info.contains("recovery would cut a torn tail"), "{info}");
    let shell = run(&["shell", "--json", "--dir"]);
    assert!(shell.contains("directory"), "{shell}");
    let out = tempfile::tempdir().expect("tempdir");
    let export = Command::new(env!("CARGO_BIN_EXE_corum"))
        .args(["dump-log", "--kafka-export"])
        .arg(out.path())
        .arg("--dir")
        .arg(&data)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run corum");
    let err = String::from_utf8_lossy(&export.stderr);
    assert!(!export.status.success(), "{err}");
    assert!(err.contains("batch at offset 0"), "{err}");
    assert!(
        !out.path().join("__cluster_metadata-0").exists(),
        "a failed export leaves nothing"
    );

    assert_eq!(
        file_tree(tmp.path()),
        before,
        "a file changed, appeared or vanished"
    );
    let after: Vec<Vec<u8>> = before
        .iter()
        .filter(|(p, _, _)| p.is_file())
        .map(|(p, _, _)| std::fs::read(p).expect("read"))
        .collect();
    assert!(after == contents, "a file's contents changed");
}

fn last_end(segments: &[corum_engine::log::SegmentReport]) -> u64 {
    let (_, h) = segments
        .iter()
        .flat_map(|s| s.batches.iter())
        .last()
        .expect("a batch");
    h.end_offset().get()
}
