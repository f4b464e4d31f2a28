//! A node of a 3-node quorum whose `metadata.log.dir` is a small ext4 filesystem on a loop
//! device (as root, as the machine runs its tests; the filesystem is `corum chaos`'s, from
//! `tools/src/cmd/chaos/disk.rs`): filled under load, the node stops with an error naming the
//! file it could not write while the other two keep committing; the offline tools read its
//! directory on the full filesystem and on the same filesystem mounted read-only; a start on
//! the full disk fails saying so and leaves no file behind; once space returns the node
//! restarts, its log recovers clean, and it catches up. Nothing stays mounted
//! or attached.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{
    bootstrap_of, corum, describe, disk, file_tree, logs, spawn_loadgen, spec, wait_until,
    LocalCluster,
};

/// Segments and snapshots small enough that a roll or a snapshot (both need new blocks) comes
/// within a second of load.
const SETTINGS: [(&str, &str); 3] = [
    ("metadata.log.segment.bytes", "1048576"),
    ("metadata.log.max.record.bytes.between.snapshots", "262144"),
    ("metadata.max.retention.bytes", "4194304"),
];

/// Runs `corum ARGS DIR` and returns its stdout, failing with its output.
fn offline(args: &[&str], dir: &Path) -> String {
    let mut all: Vec<&str> = args.to_vec();
    let d = dir.display().to_string();
    all.push(&d);
    let out = corum(&all, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "corum {all:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `dump-log --verify`, `info` and `shell --dir` succeed on `data` and write nothing there.
fn offline_tools_read(data: &Path) {
    let before = file_tree(data);
    let dump = offline(&["dump-log", "--verify", "--summary", "--dir"], data);
    assert!(dump.contains("segment"), "{dump}");
    let info = offline(&["info", "--dir"], data);
    assert!(info.contains("metadata log: offsets"), "{info}");
    let shell = offline(&["shell", "--json", "--dir"], data);
    assert!(shell.contains("\"directory\""), "{shell}");
    assert_eq!(
        file_tree(data),
        before,
        "an offline tool changed {}",
        data.display()
    );
}

/// The leader's high watermark, asked of `bootstrap` (a loaded host can take a while to
/// elect and answer: the nodes' logs are printed if it never does).
fn hwm(c: &LocalCluster, bootstrap: &str) -> u64 {
    let start = Instant::now();
    loop {
        if let Some(h) = describe(bootstrap, 5_000).and_then(|d| d["high_watermark"].as_u64()) {
            return h;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no high watermark from {bootstrap} within 60 s\n{}",
            logs(c)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_node_on_a_full_disk_stops_naming_the_file_and_recovers_once_space_returns() {
    let _serial = crate::common::serial();
    let tmp = tempfile::Builder::new()
        .prefix("diskfault-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let cluster_dir = tmp.path().join("cluster");
    let data1 = cluster_dir.join("node1");
    let images = tmp.path().join("disks");
    let disks = disk::Disks::create(
        &images,
        std::slice::from_ref(&data1),
        48,
        std::process::id(),
    )
    .expect("a loop filesystem (as root)");
    let mut c = LocalCluster::create(spec(&cluster_dir, &SETTINGS)).expect("formatting");
    if let Err(e) = c.start_all() {
        panic!("starting the cluster: {e:#}\n{}", logs(&c));
    }
    let others = bootstrap_of(&c, &[2, 3]);
    let load = spawn_loadgen(
        &c.bootstrap(),
        &[
            "--workload",
            "configs",
            "--clients",
            "16",
            "--duration",
            "14",
            "--verify",
            "--request-timeout-ms",
            "8000",
            "--grace-ms",
            "15000",
        ],
    );
    let hwm0 = hwm(&c, &others);
    wait_until("writes under load", Duration::from_secs(15), || {
        describe(&c.bootstrap(), 2_000)
            .and_then(|d| d["high_watermark"].as_u64())
            .filter(|&h| h > hwm0 + 200)
    });

    // Fill node 1's filesystem: it stops at its next new block (a roll or a snapshot).
    let filled = disks.node(1).fill().expect("filling");
    assert!(filled > 0);
    let log_len = std::fs::metadata(&c.node(1).log).unwrap().len();
    let start = Instant::now();
    let status = loop {
        let slot = c.nodes.iter_mut().find(|n| n.id == 1).unwrap();
        if let Some(s) = slot
            .process
            .as_mut()
            .unwrap()
            .wait_timeout(Duration::ZERO)
            .unwrap()
        {
            slot.process = None;
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "node 1 still runs 20 s after its disk filled\n{}",
            logs(&c)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "{status}");
    let said = String::from_utf8_lossy(&std::fs::read(&c.node(1).log).unwrap()[log_len as usize..])
        .into_owned();
    let line = said
        .lines()
        .find(|l| l.contains("No space left on device"))
        .unwrap_or_else(|| panic!("node 1 did not say its disk is full:\n{said}"));
    assert!(
        line.contains(&data1.display().to_string()),
        "the error names no file of {}: {line}",
        data1.display()
    );

    // The other two keep committing.
    let at_stop = hwm(&c, &others);
    wait_until("the others to commit", Duration::from_secs(15), || {
        describe(&others, 2_000)
            .and_then(|d| d["high_watermark"].as_u64())
            .filter(|&h| h > at_stop + 500)
    });

    // The offline tools read the directory on the full filesystem, then read-only.
    // (ext4 keeps a few blocks for its own metadata: `statfs` counts them free, but no file
    // gets them.)
    let probe = data1.join("probe");
    let written = std::fs::write(&probe, [0u8; 65536]);
    let _ = std::fs::remove_file(&probe);
    assert_eq!(
        written.map_err(|e| e.raw_os_error()),
        Err(Some(libc::ENOSPC)),
        "the disk is not full"
    );
    offline_tools_read(&data1);
    // A start on the full disk fails, saying why, and leaves no file behind.
    let before = file_tree(&data1);
    let refused = c.start(1).expect_err("node 1 started on a full disk");
    assert!(
        format!("{refused:#}").contains("No space left on device"),
        "{refused:#}"
    );
    let after = file_tree(&data1);
    let names = |t: &[(std::path::PathBuf, u64, std::time::SystemTime)]| -> Vec<_> {
        t.iter().map(|(p, _, _)| p.clone()).collect()
    };
    assert_eq!(names(&after), names(&before), "a failed start left files");
    let mount = data1.display().to_string();
    let remount = |opts: &str| {
        let out = Command::new("mount")
            .args(["-o", opts, &mount])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    remount("remount,ro");
    offline_tools_read(&data1);
    remount("remount,rw");

    // Space returns: the node restarts, its recovery is clean, and it catches up.
    disks.node(1).unfill().unwrap();
    let out = load.wait(Duration::from_secs(60));
    let report = crate::common::loadgen_json(&out);
    assert!(out.status.success(), "{report}");
    assert_eq!(report["lost"].as_u64(), Some(0), "{report}");
    c.start(1)
        .unwrap_or_else(|e| panic!("restarting node 1: {e:#}\n{}", logs(&c)));
    let target = hwm(&c, &others);
    wait_until("node 1 to catch up", Duration::from_secs(30), || {
        let d = describe(&c.bootstrap(), 2_000)?;
        d["replicas"]
            .as_array()?
            .iter()
            .find(|r| r["node_id"].as_u64() == Some(1))
            .filter(|r| {
                r["lag"].as_u64() == Some(0)
                    && r["log_end_offset"].as_u64().is_some_and(|o| o >= target)
            })
            .cloned()
    });
    let _ = c.terminate_all(Duration::from_secs(10));
    offline(&["dump-log", "--verify", "--summary", "--dir"], &data1);
    drop(c);
    let device = disks.node(1).device.clone();
    let image = disks.node(1).image.clone();
    drop(disks);
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    assert!(!mounts.contains(&mount), "{mount} is still mounted");
    let attached = Command::new("losetup")
        .args(["-j", &image.display().to_string()])
        .output()
        .unwrap();
    assert!(
        attached.stdout.is_empty(),
        "{} still attached: {}",
        device.display(),
        String::from_utf8_lossy(&attached.stdout)
    );
}
