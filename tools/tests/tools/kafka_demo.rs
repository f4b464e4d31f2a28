//! `corum demo --kafka` as a user runs it: the whole scenario with two real Kafka 4.1.2 brokers
//! (round trip, a broker SIGKILLed and fenced, the data read again, the broker back), the
//! same interrupted by SIGINT while the brokers run, and the message it fails with when Java
//! or Kafka's jars are missing.
//!
//! The first two need what `compat/install.sh` installs (Java and Kafka's jars in
//! `compat/jars`): without them they fail, saying so. The demo finds the jars itself, from the
//! executable's checkout (`target/debug/corum` → `compat/jars`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;

/// The variable that names the jars directory (unset for these tests unless one sets it).
const JARS_ENV: &str = "CORUM_KAFKA_JARS";
/// The demo's session timeout in these tests (its default).
const SESSION_TIMEOUT_MS: u64 = 6_000;
/// A killed broker must be fenced within its session timeout and this: corum's fencing tick
/// (100 ms), the demo's poll (50 ms) and a busy 2-core host's scheduling.
const FENCE_SLACK_MS: u64 = 2_000;
/// The whole demo with two brokers takes about 20 s on an idle 2-core host; every wait inside
/// it has its own deadline, and this catches a hung one.
const DEMO_DEADLINE: Duration = Duration::from_secs(480);

/// Fails (never skips) unless Java runs and Kafka's jars are in `compat/jars`.
fn require_kafka() {
    let fix = "run compat/install.sh first (it needs a JDK 17 or newer and puts Kafka 4.1.2's \
               jars in compat/jars)";
    require_java(fix);
    let jars = repo_root().join("compat/jars");
    let found = std::fs::read_dir(&jars)
        .map(|d| {
            d.filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().starts_with("kafka_2.13-"))
        })
        .unwrap_or(false);
    assert!(found, "no Kafka jars in {}: {fix}", jars.display());
}

/// `corum demo --kafka ARGS`, with the environment a user without settings has.
fn demo_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(corum_exe());
    cmd.arg("demo")
        .arg("--kafka")
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove(JARS_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The number of seconds before `unit` in `line` after `after` (`"fenced by corum after 5.5 s"`).
fn seconds_after(line: &str, after: &str) -> f64 {
    let rest = line
        .split_once(after)
        .unwrap_or_else(|| panic!("{after:?} not in {line:?}"))
        .1;
    rest.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {after:?} in {line:?}"))
}

/// Two Kafka brokers on a corum quorum: registered and unfenced, every produced message
/// consumed exactly once, the killed broker fenced within the session timeout (+ slack) with
/// its leaders moved, every message read again without it, the broker unfenced again under a
/// new epoch and back in every ISR; then nothing left running and the directory gone.
#[test]
fn kafka_demo_runs_brokers_on_corum_end_to_end() {
    let _serial = serial();
    require_kafka();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let d = dir.display().to_string();
    let child = demo_command(&["--brokers", "2", "--messages", "20000", "--dir", &d])
        .spawn()
        .expect("spawning corum demo --kafka");
    let out = Running::new(child).wait(DEMO_DEADLINE);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for needle in [
        "corum demo --kafka summary",
        "quorum: 3 corum controllers; leader node",
        "brokers: 2 Apache Kafka 4.1.2 brokers (4, 5)",
        "replication factor 2, min.insync.replicas 1",
        "produce: 20000 messages acknowledged (acks=all, idempotent)",
        "consume: 20000 of 20000 read back by a consumer group, each exactly once",
        "20000 of 20000 read again from brokers",
        "back in the ISR of all",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
    }
    let kill = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("kill: broker"))
        .unwrap_or_else(|| panic!("no kill line:\n{stdout}"));
    let fenced = seconds_after(kill, "fenced by corum after ");
    let bound = (SESSION_TIMEOUT_MS + FENCE_SLACK_MS) as f64 / 1000.0;
    assert!(
        fenced > 0.0 && fenced <= bound,
        "fenced after {fenced} s, the bound is {bound} s: {kill}"
    );
    assert!(
        seconds_after(kill, "its leaders moved after ") <= bound,
        "{kill}"
    );
    let restart = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("restart: broker"))
        .unwrap_or_else(|| panic!("no restart line:\n{stdout}"));
    let epochs = restart
        .split_once("(broker epoch ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(e, _)| e)
        .unwrap_or_else(|| panic!("no epochs in {restart:?}"));
    let (old, new) = epochs.split_once(" -> ").expect("OLD -> NEW");
    assert!(
        new.parse::<u64>().unwrap() > old.parse::<u64>().unwrap(),
        "{restart}"
    );
    assert!(stderr.contains("all nodes stopped cleanly"), "{stderr}");
    assert!(!dir.exists(), "the demo left {d}");
    assert!(processes_mentioning(&d).is_empty(), "processes left behind");
}

/// SIGINT to `corum demo --kafka` while its brokers run kills every broker JVM and corum node
/// it started and removes its directory; the demo exits with 128 + SIGINT.
#[test]
fn interrupted_kafka_demo_leaves_no_process_behind() {
    let _serial = serial();
    require_kafka();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let d = dir.display().to_string();
    let child = demo_command(&["--brokers", "2", "--dir", &d])
        .spawn()
        .expect("spawning corum demo --kafka");
    let pid = child.id();
    let demo = Running::new(child);
    // Both broker JVMs up (their command lines name their directory under the demo's).
    let brokers = wait_until("two broker JVMs", Duration::from_secs(120), || {
        let p = processes_mentioning(&format!("{d}/kafka/broker-"));
        (p.len() == 2).then_some(p)
    });
    let nodes = processes_mentioning(&format!("{d}/node"));
    assert_eq!(nodes.len(), 3, "three corum nodes");
    // SAFETY: kill(2) has no memory-safety preconditions; the demo is our unreaped child.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
    let out = demo.wait(Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(128 + libc::SIGINT), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");
    wait_until(
        "the brokers and nodes to be gone",
        Duration::from_secs(10),
        || {
            brokers
                .iter()
                .chain(&nodes)
                .all(|p| !Path::new(&format!("/proc/{p}")).exists())
                .then_some(())
        },
    );
    assert!(!dir.exists(), "the interrupted demo left {d}");
}

/// Without Kafka's jars (a `--kafka-jars` or `CORUM_KAFKA_JARS` directory that holds none) or
/// without Java, the demo starts nothing and says exactly how to get what is missing.
#[test]
fn kafka_demo_without_jars_or_java_says_how_to_get_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let d = dir.display().to_string();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let missing = tmp.path().join("no-such-dir");
    let run = |cmd: &mut Command| {
        let out = Running::new(cmd.spawn().expect("spawning corum demo --kafka"))
            .wait(Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(!dir.exists(), "a demo that cannot run created {d}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let how_to = [
        "compat/install.sh",
        "dependency:copy-dependencies",
        "https://archive.apache.org/dist/kafka/4.1.2/kafka_2.13-4.1.2.tgz",
        "corum demo --kafka --kafka-jars kafka_2.13-4.1.2/libs",
    ];

    let flag = missing.display().to_string();
    let stderr = run(&mut demo_command(&["--kafka-jars", &flag, "--dir", &d]));
    assert!(
        stderr.contains(&format!("{flag}: cannot read it")),
        "{stderr}"
    );
    for needle in how_to {
        assert!(stderr.contains(needle), "{needle:?} missing:\n{stderr}");
    }

    let stderr = run(demo_command(&["--dir", &d]).env(JARS_ENV, &empty));
    assert!(
        stderr.contains(&format!(
            "{}: no kafka_2.13-VERSION.jar in it (CORUM_KAFKA_JARS)",
            empty.display()
        )),
        "{stderr}"
    );
    for needle in how_to {
        assert!(stderr.contains(needle), "{needle:?} missing:\n{stderr}");
    }

    // No Java: an empty PATH and no JAVA_HOME.
    let stderr = run(demo_command(&["--dir", &d])
        .env("PATH", &empty)
        .env_remove("JAVA_HOME"));
    assert!(stderr.contains("no `java` on the PATH"), "{stderr}");
    assert!(stderr.contains("openjdk-17-jre-headless"), "{stderr}");
}
