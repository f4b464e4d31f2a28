//! `corum chaos` through the binary (as root, as the machine runs its tests): a short run of
//! two rounds with faults passes its checks and leaves no namespace, bridge, mount, loop
//! device, cgroup or node behind, and so does one of full and slow disks; SIGINT in the
//! middle of a round stops it with 130 and cleans up the same way.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{corum_exe, serial};

/// What `corum chaos` run `pid` with directory `dir` made and left: its namespaces and links
/// (named `cc<pid % 100000>...`), mounts under `dir`, loop devices on images under `dir`,
/// and its blkio cgroup.
fn leftovers(pid: u32, dir: &std::path::Path) -> Vec<String> {
    let prefix = format!("cc{}", pid % 100_000);
    let list = |program: &str, args: &[&str]| {
        let out = Command::new(program).args(args).output().expect("it runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dir = dir.display().to_string();
    let mut found: Vec<String> = list("ip", &["netns", "list"])
        .lines()
        .chain(list("ip", &["-o", "link", "show"]).lines())
        .filter(|l| {
            l.contains(&format!("{prefix}n"))
                || l.contains(&format!("{prefix}br"))
                || l.contains(&format!("{prefix}v"))
        })
        .chain(
            std::fs::read_to_string("/proc/mounts")
                .unwrap()
                .lines()
                .filter(|l| l.contains(&dir)),
        )
        .chain(
            list("losetup", &["-a"])
                .lines()
                .filter(|l| l.contains(&dir)),
        )
        .map(str::to_owned)
        .collect();
    let cgroup = format!("/sys/fs/cgroup/blkio/corum-chaos-{pid}");
    if std::path::Path::new(&cgroup).exists() {
        found.push(cgroup);
    }
    found.sort();
    found
}

fn chaos(args: &[&str], dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(corum_exe());
    cmd.arg("chaos")
        .args(["--dir", &dir.display().to_string()])
        .args(args)
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `corum chaos` with `args` to the end, asserting success; returns its pid (which names
/// what it made) and its stderr.
fn chaos_ok(args: &[&str], dir: &std::path::Path) -> (u32, String) {
    let child = chaos(args, dir).spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    (pid, stderr)
}

#[test]
fn two_rounds_of_faults_pass_their_checks_and_leave_nothing_behind() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("chaos");
    let (pid, stderr) = chaos_ok(
        &[
            "--rounds",
            "2",
            "--round-seconds",
            "4",
            "--faults",
            "2",
            "--seed",
            "9",
        ],
        &dir,
    );
    assert_eq!(
        stderr.matches("linearizable, nothing lost").count(),
        2,
        "{stderr}"
    );
    assert!(stderr.contains("2 rounds, 4 faults"), "{stderr}");
    assert_eq!(leftovers(pid, &dir), Vec::<String>::new());
    assert!(!dir.exists(), "the directory is removed without --keep");
}

/// Two rounds of full and slow disks: the nodes that stopped at ENOSPC said so naming the
/// file and were restarted, the offline tools read their directories on the full disk, each
/// round's history passes and the nodes' images agree; a slow disk's log syncs are reported
/// against the others'; nothing is left mounted, attached or in the cgroup.
#[test]
fn full_and_slow_disks_pass_their_checks_and_leave_nothing_behind() {
    let _serial = serial();
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let dir = tmp.path().join("chaos");
    let (pid, stderr) = chaos_ok(
        &[
            "--rounds",
            "2",
            "--round-seconds",
            "8",
            "--faults",
            "2",
            "--seed",
            "4",
            "--fault-kinds",
            "disk-full,slow-disk",
        ],
        &dir,
    );
    assert_eq!(
        stderr
            .matches("linearizable, nothing lost; images identical at offset")
            .count(),
        2,
        "{stderr}"
    );
    assert!(stderr.contains("disk full at"), "{stderr}");
    assert!(stderr.contains("its log syncs took"), "{stderr}");
    assert!(stderr.contains("2 rounds, 4 faults"), "{stderr}");
    assert_eq!(leftovers(pid, &dir), Vec::<String>::new());
    assert!(!dir.exists(), "the directory is removed without --keep");
}

/// For each occurrence of `fault` in `text`: the number just before the first `label` after
/// it (e.g. the "N dropped" of each loss fault's note).
fn numbers_before(text: &str, fault: &str, label: &str) -> Vec<f64> {
    text.match_indices(fault)
        .map(|(i, _)| {
            let rest = &text[i..];
            let end = rest.find(label).expect("the label follows the fault");
            let digits: String = rest[..end]
                .trim_end()
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            digits.parse().expect("a number before the label")
        })
        .collect()
}

/// Three rounds of packet faults (delay, loss and reorder, each through a packet queue
/// worker in a node's namespace): every round's history passes and the images agree; each
/// fault is logged with its parameters and what its worker did (delayed packets held at
/// least the delay less the jitter on average, those let go at the heal aside; lost ones
/// dropped; reordered ones sent out of order); writes resume after each kind is healed; no
/// rule, namespace or worker is left.
#[test]
fn packet_delay_loss_and_reorder_pass_their_checks_and_leave_nothing_behind() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("chaos");
    // Two faults of at most 3 s each, from 1 s in, with gaps of at most 1 s: both are
    // healed while the 10 s of load still run, so writes resuming is measured for each.
    let (pid, stderr) = chaos_ok(
        &[
            "--rounds",
            "3",
            "--round-seconds",
            "10",
            "--faults",
            "2",
            "--seed",
            "1",
            "--fault-kinds",
            "delay,loss,reorder",
        ],
        &dir,
    );
    assert_eq!(
        stderr
            .matches("linearizable, nothing lost; images identical at offset")
            .count(),
        3,
        "{stderr}"
    );
    assert!(stderr.contains("3 rounds, 6 faults"), "{stderr}");
    assert!(!stderr.contains("not applied"), "{stderr}");
    // Delay: "delay D±J ms each way ... (... held H ms on average ...)", H >= D - J (H is 0
    // when no packet was let go when due).
    let delays = numbers_before(&stderr, "delay ", "±");
    let jitters = numbers_before(&stderr, "delay ", " ms each way");
    let held = numbers_before(&stderr, "ms each way", " ms on average");
    assert!(!delays.is_empty(), "no delay drawn: {stderr}");
    assert!(held.iter().any(|&h| h > 0.0), "no delayed packet: {stderr}");
    for ((d, j), h) in delays.iter().zip(&jitters).zip(&held) {
        assert!(
            *h == 0.0 || h >= &(d - j),
            "delay {d}±{j} ms held {h} ms: {stderr}"
        );
    }
    // Loss drops packets; reorder sends some out of order.
    let dropped = numbers_before(&stderr, "loss ", " dropped");
    assert!(
        dropped.iter().any(|&n| n > 0.0),
        "nothing dropped: {stderr}"
    );
    let reordered = numbers_before(&stderr, "reorder (", " out of order");
    assert!(
        reordered.iter().any(|&n| n > 0.0),
        "nothing reordered: {stderr}"
    );
    for kind in ["delay", "packet loss", "reorder"] {
        assert!(
            stderr.contains(&format!(
                "corum chaos: {kind}: healed to the next acknowledged write: median"
            )),
            "no resume time for {kind}: {stderr}"
        );
    }
    assert_eq!(leftovers(pid, &dir), Vec::<String>::new());
    assert!(!dir.exists(), "the directory is removed without --keep");
}

#[test]
fn an_interrupted_run_cleans_up() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("chaos");
    let child = chaos(&["--rounds", "50", "--round-seconds", "5", "--keep"], &dir)
        .spawn()
        .unwrap();
    let pid = child.id();
    // Interrupt once the first round's load runs (its history file exists).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("round-1.jsonl").exists() && !dir.join("cluster/node1.log").exists() {
        assert!(Instant::now() < deadline, "the chaos run never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        leftovers(pid, &dir).len() >= 3 * 4,
        "the run made its network and disks: {:?}",
        leftovers(pid, &dir)
    );
    // SAFETY: kill with a pid of our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(leftovers(pid, &dir), Vec::<String>::new());
    assert!(dir.exists(), "--keep keeps the directory");
    let nodes = Command::new("pgrep")
        .args(["-f", &dir.display().to_string()])
        .output()
        .unwrap();
    assert!(
        nodes.stdout.is_empty(),
        "nodes left running: {}",
        String::from_utf8_lossy(&nodes.stdout)
    );
}

/// Without root the command refuses at once, saying why, and makes nothing.
#[test]
fn without_root_it_says_it_needs_root() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("chaos");
    let out = Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(corum_exe())
        .args([
            "chaos",
            "--rounds",
            "1",
            "--dir",
            &dir.display().to_string(),
        ])
        .output()
        .expect("setpriv runs (util-linux)");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("corum chaos needs root"), "{stderr}");
    assert!(!dir.exists());
}
