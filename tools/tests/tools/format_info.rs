//! `corum format` and `corum info` run as the built binary in a temporary directory.

use std::path::Path;
use std::process::{Command, Output};

const CLUSTER: &str = "MkU3OEVBNTcwNTJENDM2Qg";

fn corum(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corum"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("running corum")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write_config(dir: &Path, node_id: u32, port: u16) -> String {
    let path = dir.join(format!("node{node_id}.properties"));
    let data = dir.join(format!("data{node_id}"));
    std::fs::write(
        &path,
        format!(
            "# test node\nnode.id={node_id}\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{port}\n\
             controller.listener.names=CONTROLLER\ncontroller.quorum.bootstrap.servers=127.0.0.1:9093\n\
             metadata.log.dir={}\n",
            data.display()
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// The arguments of `corum format --config CONFIG --cluster-id CLUSTER --standalone`.
fn standalone_args<'a>(config: &'a str, cluster: &'a str) -> [&'a str; 6] {
    [
        "format",
        "--config",
        config,
        "--cluster-id",
        cluster,
        "--standalone",
    ]
}

fn format_standalone(config: &str, cluster: &str) -> Output {
    corum(&standalone_args(config, cluster))
}

fn random_uuid() -> String {
    let o = corum(&["random-uuid"]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).trim().to_owned()
}

/// A one-voter static quorum's config for node 1 in `dir` on free loopback ports (controller
/// and client listeners): the config's path, its data directory and the client port.
fn one_voter_config(dir: &Path, name: &str) -> (String, std::path::PathBuf, u16) {
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (raft, client) = (free(), free());
    let data = dir.join(format!("{name}-data"));
    let config = dir.join(format!("{name}.properties"));
    std::fs::write(
        &config,
        format!(
            "node.id=1\nprocess.roles=controller\n\
             listeners=CONTROLLER://127.0.0.1:{raft},CLIENT://127.0.0.1:{client}\n\
             controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:{raft}\n\
             metadata.log.dir={}\n",
            data.display()
        ),
    )
    .unwrap();
    (config.display().to_string(), data, client)
}

/// `corum run --config CONFIG`, killed when dropped.
struct RunningNode(std::process::Child);

impl RunningNode {
    fn start(config: &str) -> RunningNode {
        RunningNode(
            Command::new(env!("CARGO_BIN_EXE_corum"))
                .args(["run", "--config", config, "--no-pin"])
                .env("RUST_LOG", "warn")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("corum run"),
        )
    }
}

impl Drop for RunningNode {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A standalone format writes meta.properties and a one-voter bootstrap set that info shows.
#[test]
fn format_standalone_then_info() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), 1, 19093);
    let o = format_standalone(&config, CLUSTER);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("Formatted"), "{}", stdout(&o));
    let data = tmp.path().join("data1");
    let meta = std::fs::read_to_string(data.join("meta.properties")).unwrap();
    assert!(meta.contains(&format!("cluster.id={CLUSTER}")), "{meta}");
    assert!(meta.contains("node.id=1"), "{meta}");
    let o = corum(&["info", "--dir", data.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("formatted: yes"), "{out}");
    assert!(out.contains(&format!("cluster.id: {CLUSTER}")), "{out}");
    assert!(out.contains("node.id: 1"), "{out}");
    assert!(
        out.contains("bootstrap: kraft.version 1, 1 voter(s)"),
        "{out}"
    );
    assert!(out.contains("CONTROLLER://127.0.0.1:19093"), "{out}");
    assert!(out.contains("quorum-state: none"), "{out}");
    assert!(out.contains("meta.properties ("), "{out}");
    assert!(out.contains("bootstrap.checkpoint ("), "{out}");
}

/// Formatting twice is refused; --ignore-formatted leaves the directory as it was.
#[test]
fn format_refuses_formatted_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), 1, 19093);
    assert!(format_standalone(&config, CLUSTER).status.success());
    let meta = tmp.path().join("data1/meta.properties");
    let before = std::fs::read(&meta).unwrap();
    let other = random_uuid();
    let again = standalone_args(&config, &other);
    let o = corum(&again);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("already formatted"), "{}", stderr(&o));
    assert!(stderr(&o).contains("--ignore-formatted"), "{}", stderr(&o));
    let mut ignore = again.to_vec();
    ignore.push("--ignore-formatted");
    let o = corum(&ignore);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("left unchanged"), "{}", stdout(&o));
    assert_eq!(std::fs::read(&meta).unwrap(), before);
}

/// --initial-controllers takes the node's directory id from its entry and refuses a node that
/// is not listed.
#[test]
fn format_initial_controllers() {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2, d3) = (random_uuid(), random_uuid(), random_uuid());
    let list = format!("1@127.0.0.1:19093:{d1},2@127.0.0.1:19094:{d2},3@127.0.0.1:19095:{d3}");
    let config = write_config(tmp.path(), 2, 19094);
    let o = corum(&[
        "format",
        "--config",
        &config,
        "--cluster-id",
        CLUSTER,
        "--initial-controllers",
        &list,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = corum(&["info", "--dir", tmp.path().join("data2").to_str().unwrap()]);
    let out = stdout(&o);
    assert!(out.contains(&format!("directory.id: {d2}")), "{out}");
    assert!(out.contains("3 voter(s)"), "{out}");
    let config4 = write_config(tmp.path(), 4, 19096);
    let o = corum(&[
        "format",
        "--config",
        &config4,
        "--cluster-id",
        CLUSTER,
        "--initial-controllers",
        &list,
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("node.id 4 is not in --initial-controllers"),
        "{}",
        stderr(&o)
    );
    assert!(!tmp.path().join("data4/meta.properties").exists());
}

/// `--set` alone can configure format, and bad input gets clear errors naming what is wrong.
#[test]
fn format_errors_and_set_only() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let dir_set = format!("metadata.log.dir={}", data.display());
    let base = [
        "format",
        "--set",
        "node.id=5",
        "--set",
        "process.roles=controller",
        "--set",
        "listeners=CONTROLLER://127.0.0.1:19097",
        "--set",
        "controller.listener.names=CONTROLLER",
        "--set",
        "controller.quorum.bootstrap.servers=127.0.0.1:19097",
        "--set",
        &dir_set,
        "--cluster-id",
    ];
    let run = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        corum(&a)
    };
    let o = run(&["not-a-uuid", "--standalone"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--cluster-id"), "{}", stderr(&o));
    let o = run(&[CLUSTER]);
    assert!(stderr(&o).contains("pass --standalone"), "{}", stderr(&o));
    let o = run(&[CLUSTER, "--standalone", "--set", "bogus.key=1"]);
    assert!(
        stderr(&o).contains("unknown key \"bogus.key\""),
        "{}",
        stderr(&o)
    );
    let o = run(&[CLUSTER, "--standalone", "--set", "process.roles=broker"]);
    assert!(stderr(&o).contains("process.roles"), "{}", stderr(&o));
    let o = run(&[CLUSTER, "--initial-controllers", "5@h:1"]);
    assert!(stderr(&o).contains("no directory id"), "{}", stderr(&o));
    let o = corum(&[
        "format",
        "--cluster-id",
        CLUSTER,
        "--standalone",
        "--set",
        "node.id=1",
    ]);
    assert!(
        stderr(&o).contains("missing required key(s)"),
        "{}",
        stderr(&o)
    );
    assert!(!data.join("meta.properties").exists());
    let o = run(&[CLUSTER, "--standalone"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(data.join("meta.properties").exists());
}

/// info on an empty directory says it is not formatted; on a missing one it fails.
#[test]
fn info_unformatted() {
    let tmp = tempfile::tempdir().unwrap();
    let o = corum(&["info", "--dir", tmp.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("formatted: no"), "{}", stdout(&o));
    assert!(stdout(&o).contains("(empty)"), "{}", stdout(&o));
    let o = corum(&["info", "--dir", tmp.path().join("nope").to_str().unwrap()]);
    assert!(!o.status.success());
}

/// info shows the persisted quorum state, and a damaged node file with its error.
#[test]
fn info_quorum_state_and_damage() {
    use corum_node::quorum_state::{QuorumState, ReplicaKey};
    use corum_types::{Epoch, NodeId, Uuid};
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), 1, 19093);
    let o = format_standalone(&config, CLUSTER);
    assert!(o.status.success(), "{}", stderr(&o));
    let data = tmp.path().join("data1");
    let dir_id = Uuid([0x42; 16]);
    let state = QuorumState {
        epoch: Epoch(7),
        leader: Some(NodeId(2)),
        voted_for: Some(ReplicaKey {
            id: NodeId(2),
            directory_id: Some(dir_id),
        }),
    };
    futures_lite::future::block_on(state.write(&corum_engine::disk::StdDisk::new(), &data))
        .unwrap();
    std::fs::create_dir(data.join("@metadata-0")).unwrap();
    std::fs::write(
        data.join("@metadata-0/00000000000000000000.log"),
        [0u8; 100],
    )
    .unwrap();
    let o = corum(&["info", "--dir", data.to_str().unwrap()]);
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "quorum-state: epoch 7 leader 2 voted-for 2 (directory {dir_id})"
        )),
        "{out}"
    );
    assert!(out.contains("@metadata-0/\n"), "{out}");
    assert!(
        out.contains("@metadata-0/00000000000000000000.log (100 bytes)"),
        "{out}"
    );
    let mut bytes = std::fs::read(data.join("quorum-state")).unwrap();
    bytes[10] ^= 1;
    std::fs::write(data.join("quorum-state"), bytes).unwrap();
    std::fs::write(data.join("meta.properties"), "version=1\n").unwrap();
    let o = corum(&["info", "--dir", data.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("quorum-state: unreadable"), "{out}");
    assert!(out.contains("checksum mismatch"), "{out}");
    assert!(
        out.contains("formatted: unreadable meta.properties"),
        "{out}"
    );
    assert!(out.contains("missing cluster.id"), "{out}");
}

/// An id whose text starts with `-` (another tool's, or typed by hand) is taken as the value
/// of `--cluster-id`, not as a flag.
#[test]
fn a_cluster_id_may_start_with_a_dash() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path(), 1, 9093);
    let o = format_standalone(&config, "-AAAAAAAAAAAAAAAAAAAAA");
    assert!(o.status.success(), "{}", stderr(&o));
    let info = corum(&[
        "info",
        "--dir",
        &tmp.path().join("data1").display().to_string(),
    ]);
    assert!(
        stdout(&info).contains("cluster.id: -AAAAAAAAAAAAAAAAAAAAA"),
        "{}",
        stdout(&info)
    );
}

/// `--release-version` and `--feature` decide the features the first active controller
/// finalizes, as Kafka's format does: by default (4.1) metadata.version 4.1-IV1 = 27 with
/// eligible leader replicas 1, group.version 1, transaction.version 2, as `kafka-storage
/// format` sets them; the format line and `corum info` name them, a node started on the
/// directory finalizes exactly those (4.0: metadata.version 4.0-IV3 = 25, group.version 1,
/// transaction.version 2; here with transaction.version overridden to 0 and eligible leader
/// replicas to 1), and what this controller cannot finalize, or a level whose dependency the
/// release does not meet, is refused before anything is written.
#[test]
fn format_release_version_sets_the_finalized_features() {
    let tmp = tempfile::tempdir().unwrap();
    let (config, data, client) = one_voter_config(tmp.path(), "node1");
    let format = |extra: &[&str]| {
        let mut args = vec!["format", "--config", &config, "--cluster-id", CLUSTER];
        args.extend_from_slice(extra);
        corum(&args)
    };
    // The default release, in a directory of its own.
    let (default_config, _, _) = one_voter_config(tmp.path(), "default");
    let o = corum(&[
        "format",
        "--config",
        &default_config,
        "--cluster-id",
        CLUSTER,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(
            "metadata.version 4.1-IV1 (27), eligible.leader.replicas.version 1, group.version 1, transaction.version 2,"
        ),
        "{}",
        stdout(&o)
    );
    for (extra, needle) in [
        (
            &["--release-version", "4.2"][..],
            "unknown release version \"4.2\"",
        ),
        (&["-r", "3.2"][..], "supports 3.3-IV3 to 4.1-IV1"),
        (
            &["--feature", "metadata.version=20"][..],
            "set with --release-version",
        ),
        (
            &["--feature", "share.version=1"][..],
            "not supported by this controller",
        ),
        (
            &[
                "--release-version",
                "4.0-IV0",
                "--feature",
                "eligible.leader.replicas.version=1",
            ][..],
            "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23",
        ),
        (&["--feature", "transaction.version=3"][..], "levels 0 to 2"),
        (&["--feature", "group.version"][..], "expected KEY=VALUE"),
    ] {
        let o = format(extra);
        assert!(!o.status.success(), "{extra:?}: {}", stdout(&o));
        assert!(stderr(&o).contains(needle), "{extra:?}: {}", stderr(&o));
        assert!(
            !data.join("meta.properties").exists(),
            "{extra:?}: nothing written"
        );
    }
    let o = format(&[
        "--release-version",
        "4.0",
        "--feature",
        "transaction.version=0",
        "--feature",
        "eligible.leader.replicas.version=1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(
            "metadata.version 4.0-IV3 (25), eligible.leader.replicas.version 1, group.version 1,"
        ),
        "{}",
        stdout(&o)
    );
    let o = corum(&["info", "--dir", data.to_str().unwrap()]);
    assert!(
        stdout(&o).contains(
            "bootstrap features: metadata.version 4.0-IV3 (25), eligible.leader.replicas.version 1, group.version 1\n"
        ),
        "{}",
        stdout(&o)
    );

    let _node = RunningNode::start(&config);
    let bootstrap = format!("127.0.0.1:{client}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let finalized = loop {
        let o = corum(&["features", "describe", "--bootstrap", &bootstrap, "--json"]);
        if o.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let levels: Vec<(String, Option<u64>)> = v["features"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["name"].as_str().unwrap().to_owned(),
                        f["finalized_level"].as_u64(),
                    )
                })
                .collect();
            if levels
                .iter()
                .any(|(n, l)| n == "metadata.version" && l.is_some())
            {
                break levels;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no finalized metadata.version within 60 s: {}",
            stderr(&o)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(
        finalized,
        vec![
            ("eligible.leader.replicas.version".to_owned(), Some(1)),
            ("group.version".to_owned(), Some(1)),
            // A static quorum: kraft.version 0, which Raft keeps.
            ("kraft.version".to_owned(), None),
            ("metadata.version".to_owned(), Some(25)),
            ("transaction.version".to_owned(), None),
        ]
    );
}

#[test]
fn a_second_node_on_a_data_directory_is_refused_and_a_killed_one_leaves_no_lock() {
    // Proves the data directory's lock: while a node runs, a second `corum run` on the same
    // directory exits at once naming the first's pid, having changed nothing; SIGKILL of the
    // first frees the directory (no stale lock to clean), and a new node starts on it.
    let tmp = tempfile::tempdir().unwrap();
    let (config, data, client) = one_voter_config(tmp.path(), "node1");
    let o = corum(&["format", "--config", &config, "--cluster-id", CLUSTER]);
    assert!(o.status.success(), "{}", stderr(&o));
    let serving = |what: &str| {
        let bootstrap = format!("127.0.0.1:{client}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let o = corum(&["features", "describe", "--bootstrap", &bootstrap]);
            if o.status.success() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: not serving within 60 s: {}",
                stderr(&o)
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    let mut first = RunningNode::start(&config);
    serving("the first node");
    let log_files = |dir: &Path| -> Vec<(std::path::PathBuf, u64)> {
        let mut v: Vec<_> = std::fs::read_dir(dir.join("@metadata-0"))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.path(), e.metadata().unwrap().len())
            })
            .collect();
        v.sort();
        v
    };
    let quorum_state = std::fs::read(data.join("quorum-state")).unwrap();
    let out = corum(&["run", "--config", &config, "--no-pin"]);
    assert!(!out.status.success(), "the second node ran");
    let err = stderr(&out);
    assert!(
        err.contains(&format!("in use by another process (pid {})", first.0.id()))
            && err.contains(".lock"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(data.join("quorum-state")).unwrap(),
        quorum_state
    );
    let before = log_files(&data);
    // The first node still serves, its files untouched by the refused one.
    serving("the first node after the refusal");
    assert_eq!(log_files(&data).len(), before.len());
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let _restarted = RunningNode::start(&config);
    serving("a node started after the first was killed");
}
