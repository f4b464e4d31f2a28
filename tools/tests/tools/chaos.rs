//! `corum chaos` through the binary (as root, as the machine runs its tests): a short run of
//! two rounds with faults passes its checks and leaves no namespace, bridge, mount, loop
//! device, cgroup or node behind, and so does one of full and slow disks; SIGINT in the
//! middle of a round stops it with 130 and cleans up the same way. What a SIGKILLed run left
//! (and processes still in its namespaces and on its filesystems) is removed by `corum chaos
//! --cleanup` and by the next run when it starts; a live run's is left alone.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
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

/// What a 3-node run makes and leaves when killed: 3 namespaces, 3 veth ends and a bridge
/// (4 links), 3 mounts, 3 loop devices and a cgroup.
const RUN_PARTS: usize = 3 + 4 + 3 + 3 + 1;

/// Starts a long run of partitions in `dir` and waits (at most 90 s) until its network,
/// disks and nodes exist and its first round's load runs. Returns the child.
fn a_running_run(dir: &Path) -> Child {
    let mut child = chaos(
        &[
            "--rounds",
            "50",
            "--round-seconds",
            "5",
            "--fault-kinds",
            "partition",
        ],
        dir,
    )
    .spawn()
    .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(90);
    while !(dir.join("round-1.jsonl").exists() && leftovers(pid, dir).len() >= RUN_PARTS) {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "the run ended ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            Instant::now() < deadline,
            "the run never started: {:?}",
            leftovers(pid, dir)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

/// Starts a run in `dir` and SIGKILLs it once it runs (its nodes die with it, by
/// PR_SET_PDEATHSIG); returns its pid, after checking that all it made is left.
fn a_killed_run(dir: &Path) -> u32 {
    let mut child = a_running_run(dir);
    let pid = child.id();
    // SAFETY: kill with a pid of our own unreaped child.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert_eq!(
        leftovers(pid, dir).len(),
        RUN_PARTS,
        "a killed run leaves what it made: {:?}",
        leftovers(pid, dir)
    );
    pid
}

/// `corum chaos --cleanup`: its exit status and stderr.
fn cleanup() -> (std::process::ExitStatus, String) {
    let out = Command::new(corum_exe())
        .args(["chaos", "--cleanup"])
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Node processes (arguments naming `dir`) still running.
fn processes_of(dir: &Path) -> String {
    let out = Command::new("pgrep")
        .args(["-a", "-f", &format!("{}/", dir.display())])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Children a test started; SIGKILLed and reaped if the test ends without doing so, and
/// then, if it failed, whatever dead runs left is swept.
struct Started(Vec<Child>);

impl Drop for Started {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            let _ = cleanup();
        }
    }
}

/// A run killed with SIGKILL leaves its network, disks and cgroup; a node of it restarted by
/// hand in its namespace, a process in another of its namespaces and one whose working
/// directory is on its filesystem hold them. `corum chaos --cleanup` kills those three, removes
/// every leftover, says so in one line per run, and leaves the run's files.
#[test]
fn cleanup_removes_what_a_killed_run_left() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("chaos");
    let pid = a_killed_run(&dir);
    let tag = pid % 100_000;
    let mut started = Started(Vec::new());

    // Node 1 restarted in its namespace, on its filesystem, until it is ready.
    let mut node = Command::new("ip")
        .args(["netns", "exec", &format!("cc{tag}n1")])
        .arg(corum_exe())
        .args(["run", "--no-pin", "--config"])
        .arg(dir.join("cluster/node1.properties"))
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = node.stdout.take().unwrap();
    started.0.push(node);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(60));
    assert!(
        ready.as_deref().is_ok_and(|l| l.contains("ready")),
        "node 1 did not start again: {ready:?}"
    );
    // A process in node 2's namespace, and one working in node 3's filesystem.
    started.0.push(
        Command::new("ip")
            .args(["netns", "exec", &format!("cc{tag}n2"), "sleep", "600"])
            .spawn()
            .unwrap(),
    );
    started.0.push(
        Command::new("sleep")
            .arg("600")
            .current_dir(dir.join("cluster/node3"))
            .spawn()
            .unwrap(),
    );
    // `ip netns exec` enters the namespace, then becomes `sleep`.
    let in_ns = started.0[1].id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read(format!("/proc/{in_ns}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep")) {
        assert!(Instant::now() < deadline, "ip netns exec never ran sleep");
        std::thread::sleep(Duration::from_millis(20));
    }

    let (status, stderr) = cleanup();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "corum chaos: removed the leftovers of run {pid} (dead): 3 namespaces, 3 veth \
             pairs, 1 bridge, 3 mounts, 3 loop devices, 1 blkio cgroup, 3 processes killed; \
             its files stay in {}",
            std::fs::canonicalize(&dir).unwrap().display()
        )),
        "{stderr}"
    );
    assert_eq!(leftovers(pid, &dir), Vec::<String>::new());
    for child in &mut started.0 {
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    }
    assert_eq!(processes_of(&dir), "");
    // The run's files stay: its images, named after it.
    let images: Vec<String> = std::fs::read_dir(dir.join("disks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(&format!(".{pid}-")) && n.ends_with(".ext4"))
        .collect();
    assert_eq!(images.len(), 3, "{images:?}");
    let (status, stderr) = cleanup();
    assert!(status.success(), "{stderr}");
    assert!(!stderr.contains(&format!("run {pid} ")), "{stderr}");
}

/// A run that is killed, and whose directory is then removed (as a test's temporary directory
/// is: everything but the mount points goes, images included), leaves its names and mounts to
/// the next run, which removes them when it starts (saying so), runs, and leaves nothing
/// itself.
#[test]
fn the_next_run_removes_what_a_killed_run_left() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let killed = a_killed_run(&dir_a);
    assert!(
        std::fs::remove_dir_all(&dir_a).is_err(),
        "the mount points stay"
    );
    assert!(!dir_a.join("disks").exists());
    let (pid, stderr) = chaos_ok(
        &[
            "--rounds",
            "1",
            "--round-seconds",
            "2",
            "--faults",
            "1",
            "--fault-kinds",
            "partition",
        ],
        &dir_b,
    );
    assert!(
        stderr.contains(&format!(
            "corum chaos: removed the leftovers of run {killed} (dead): 3 namespaces, 3 veth \
             pairs, 1 bridge, 3 mounts, 3 loop devices, 1 blkio cgroup;"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("1 rounds, 1 faults"), "{stderr}");
    assert_eq!(leftovers(killed, &dir_a), Vec::<String>::new());
    assert_eq!(leftovers(pid, &dir_b), Vec::<String>::new());
    assert_eq!(processes_of(&dir_a), "");
}

/// `corum chaos --cleanup` while a run runs leaves all of it (network, mounts, loop devices,
/// cgroup, nodes) and says why; the run then stops on SIGINT and cleans up itself.
#[test]
fn cleanup_leaves_a_live_run_alone() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("chaos");
    let mut started = Started(vec![a_running_run(&dir)]);
    let pid = started.0[0].id();
    let before = (leftovers(pid, &dir).len(), processes_of(&dir));
    assert_eq!(before.1.lines().count(), 3, "{}", before.1);
    let (status, stderr) = cleanup();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "corum chaos: left run {pid} alone: its owner, pid {pid}, runs"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains(&format!("run {pid} (dead)")), "{stderr}");
    assert_eq!((leftovers(pid, &dir).len(), processes_of(&dir)), before);
    assert_eq!(before.0, RUN_PARTS);
    // SAFETY: kill with a pid of our own unreaped child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = started.0.remove(0).wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(leftovers(pid, &dir), Vec::<String>::new());
}
