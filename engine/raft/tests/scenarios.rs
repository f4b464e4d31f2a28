//! Data-driven scenario tests: each `testdata/*.txt` is a script of commands run against a
//! simulated cluster with a reliable 1 ms network, each followed by `----` and the expected
//! output. `CORUM_REWRITE=1 cargo test -p corum-raft --test scenarios` rewrites the expected
//! output; review the diff like code.
//!
//! Commands:
//! - `cluster voters=N [observers=N] [seed=N] [static]`: a new cluster (prints status); `static`:
//!   `kraft.version` 0, the voters fixed by configuration
//! - `run ms=N [trace]`: advance the clock N ms (optionally print every delivered message)
//! - `status`: one line per node
//! - `campaign N`, `resign N`, `crash N`, `restart N [gen=G]`, `isolate N`, `heal`, `snapshot N`
//! - `unreachable N M`: node N's transport reports M's process gone (its port refuses)
//! - `propose N TEXT`: propose at node N
//! - `fsync N LO HI`: node N's fsync latency range in ms
//! - `add-voter AT N`, `remove-voter AT N`: voter change requested at node AT
//! - `log N`: node N's log (batches, and the snapshot it starts from)
//! - `let NAME N`: bind a name to a node (N may be `leader` or `follower`)

use std::fmt::Write as _;
use std::path::Path;

use corum_raft::sim::{chaos::status_line, endpoints, Cluster, ClusterSpec};
use corum_raft::{Role, Voter};
use corum_types::NodeId;

struct Harness {
    cluster: Option<Cluster>,
    aliases: std::collections::BTreeMap<String, NodeId>,
}

fn arg<'a>(args: &'a [&'a str], key: &str) -> Option<&'a str> {
    args.iter()
        .find_map(|a| a.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

fn status(c: &Cluster) -> String {
    let mut out = String::new();
    for id in c.ids() {
        match c.core(id) {
            None => writeln!(out, "n{id}: down").unwrap(),
            Some(core) => {
                let s = core.status();
                writeln!(
                    out,
                    "n{id}: {:<11} e{} leader={} hwm={} log=[{},{}) durable={} voters={:?}",
                    format!("{:?}", s.role),
                    s.epoch.0,
                    s.leader.map_or("-".to_string(), |l| l.to_string()),
                    s.high_watermark.0,
                    s.log_start_offset.0,
                    s.log_end_offset.0,
                    s.durable_end_offset.0,
                    s.voters.iter().map(|v| v.0).collect::<Vec<_>>()
                )
                .unwrap();
            }
        }
    }
    out
}

impl Harness {
    /// A node id, `leader` (the live leader with the highest epoch), `follower` (the lowest-id
    /// voter following it) or a name bound with `let`.
    fn node(&self, s: &str) -> NodeId {
        let c = self.cluster.as_ref().expect("cluster");
        match s {
            "leader" => c.leader().expect("no leader"),
            "follower" => c
                .ids()
                .into_iter()
                .find(|id| {
                    c.core(*id)
                        .is_some_and(|core| core.role() == Role::Follower && core.is_voter())
                })
                .expect("no follower"),
            _ => {
                self.aliases.get(s).copied().unwrap_or_else(|| {
                    NodeId(s.parse().unwrap_or_else(|_| panic!("bad node {s:?}")))
                })
            }
        }
    }

    fn c(&mut self) -> &mut Cluster {
        self.cluster.as_mut().expect("`cluster` must come first")
    }

    fn run(&mut self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (cmd, args) = (words[0], &words[1..]);
        let checked = |c: &Cluster| -> String {
            if c.checker.violations.is_empty() {
                String::new()
            } else {
                format!(
                    "VIOLATIONS: {:?}\n{}\n",
                    c.checker.violations,
                    status_line(c)
                )
            }
        };
        let out = match cmd {
            "cluster" => {
                let voters = arg(args, "voters").map_or(3, |v| v.parse().unwrap());
                let observers = arg(args, "observers").map_or(0, |v| v.parse().unwrap());
                let seed = arg(args, "seed").map_or(1, |v| v.parse().unwrap());
                let mut spec = ClusterSpec::new(seed, voters, observers);
                if args.contains(&"static") {
                    spec.kraft_version = 0;
                }
                let c = Cluster::new(spec).unwrap();
                let s = status(&c);
                self.cluster = Some(c);
                s
            }
            "run" => {
                let ms: u64 = arg(args, "ms").expect("run ms=N").parse().unwrap();
                let trace = args.contains(&"trace");
                let c = self.c();
                if trace {
                    c.trace = Some(Vec::new());
                }
                c.run_for(ms);
                let mut out = String::new();
                if let Some(t) = c.trace.take() {
                    for l in t {
                        writeln!(out, "{}", l.trim_start()).unwrap();
                    }
                }
                out + &status(c)
            }
            "status" => status(self.c()),
            "let" => {
                let id = self.node(args[1]);
                self.aliases.insert(args[0].to_string(), id);
                format!("{} = n{id}\n", args[0])
            }
            "campaign" => {
                let id = self.node(args[0]);
                self.c().with_core(id, |c| c.campaign());
                "ok\n".into()
            }
            "resign" => {
                let id = self.node(args[0]);
                self.c().with_core(id, |c| c.resign());
                "ok\n".into()
            }
            "crash" => {
                let id = self.node(args[0]);
                self.c().crash(id);
                "ok\n".into()
            }
            "restart" => {
                let id = self.node(args[0]);
                if let Some(g) = arg(args, "gen") {
                    // Restart with new endpoints (port 9000 + gen): a voter sends UpdateVoter.
                    self.c().nodes.get_mut(&id).unwrap().endpoints =
                        endpoints(id.0, g.parse().unwrap());
                }
                self.c().start(id).unwrap();
                "ok\n".into()
            }
            "unreachable" => {
                // `unreachable N M`: N's transport reports M's process gone.
                let (to, peer) = (self.node(args[0]), self.node(args[1]));
                self.c().with_core(to, |c| c.peer_unreachable(peer));
                "ok\n".into()
            }
            "isolate" => {
                let id = self.node(args[0]);
                let c = self.c();
                let others: Vec<NodeId> = c.ids().into_iter().filter(|o| *o != id).collect();
                c.net.partition(&[id], &others);
                "ok\n".into()
            }
            "heal" => {
                self.c().net.heal();
                "ok\n".into()
            }
            "fsync" => {
                let id = self.node(args[0]);
                let (lo, hi) = (args[1].parse().unwrap(), args[2].parse().unwrap());
                self.c().nodes.get_mut(&id).unwrap().fsync_delay_ms = (lo, hi);
                "ok\n".into()
            }
            "propose" => {
                let id = self.node(args[0]);
                match self.c().propose(id, args[1..].join(" ").as_bytes()) {
                    None => "node down\n".into(),
                    Some(Ok(p)) => format!(
                        "proposed [{}, {}) in e{}\n",
                        p.base_offset.0, p.end_offset.0, p.epoch.0
                    ),
                    Some(Err(e)) => format!("error: {e}\n"),
                }
            }
            "snapshot" => {
                let id = self.node(args[0]);
                match self.c().snapshot(id) {
                    None => "nothing to snapshot\n".into(),
                    Some(Ok(s)) => format!("snapshot e{}@{}\n", s.epoch.0, s.end_offset.0),
                    Some(Err(e)) => format!("error: {e}\n"),
                }
            }
            "add-voter" | "remove-voter" => {
                let at = self.node(args[0]);
                let id = self.node(args[1]);
                let c = self.c();
                let key = c.nodes[&id].key;
                let endpoints = c.nodes[&id].endpoints.clone();
                let r = if cmd == "add-voter" {
                    c.with_core(at, |core| core.add_voter(Voter { key, endpoints }))
                } else {
                    c.with_core(at, |core| core.remove_voter(key))
                };
                match r {
                    None => "node down\n".into(),
                    Some(Ok(end)) => format!("voters record appended, commits at {}\n", end.0),
                    Some(Err(e)) => format!("error: {e}\n"),
                }
            }
            "log" => {
                let id = self.node(args[0]);
                let c = self.c();
                let disk = &c.nodes[&id].disk;
                let mut out = String::new();
                if let Some(s) = &disk.snapshot {
                    writeln!(out, "snapshot e{}@{}", s.id.epoch.0, s.id.end_offset.0).unwrap();
                }
                for b in &disk.log {
                    let what = if b.control {
                        let recs = corum_raft::control::decode(&b.payload).unwrap();
                        format!(
                            "{:?}",
                            recs.iter()
                                .map(|r| match r {
                                    corum_raft::control::ControlRecord::LeaderChange(l) =>
                                        format!("LeaderChange(leader={})", l.leader),
                                    corum_raft::control::ControlRecord::Voters(v) => format!(
                                        "Voters{:?}",
                                        v.voters
                                            .voters()
                                            .iter()
                                            .map(|v| format!(
                                                "{}:{}",
                                                v.key.id, v.endpoints[0].port
                                            ))
                                            .collect::<Vec<_>>()
                                    ),
                                    corum_raft::control::ControlRecord::KRaftVersion(k) =>
                                        format!("KRaftVersion({})", k.version),
                                })
                                .collect::<Vec<_>>()
                        )
                    } else {
                        format!("{:?}", String::from_utf8_lossy(&b.payload))
                    };
                    writeln!(
                        out,
                        "[{}, {}) e{} {}",
                        b.base_offset.0,
                        b.end_offset().0,
                        b.epoch.0,
                        what
                    )
                    .unwrap();
                }
                out
            }
            other => panic!("unknown command {other:?}"),
        };
        let c = self.cluster.as_ref().expect("cluster");
        out + &checked(c)
    }
}

/// Runs one script; returns the file rewritten with actual outputs.
fn run_script(text: &str) -> String {
    let mut h = Harness {
        cluster: None,
        aliases: Default::default(),
    };
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        out.push_str(line);
        out.push('\n');
        // Skip the old expected block.
        if lines.peek() == Some(&"----") {
            lines.next();
            while let Some(l) = lines.peek() {
                if l.is_empty() {
                    break;
                }
                lines.next();
            }
        }
        out.push_str("----\n");
        out.push_str(&h.run(line));
        if lines.peek().is_none() {
            break;
        }
    }
    out
}

fn check_file(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let actual = run_script(&text);
    if corum_types::golden::rewrite_requested() {
        std::fs::write(path, &actual).unwrap();
        return;
    }
    if actual != text {
        let mut diff = String::new();
        for (i, (a, b)) in text.lines().zip(actual.lines()).enumerate() {
            if a != b {
                writeln!(diff, "line {}:\n  expected: {a}\n  actual:   {b}", i + 1).unwrap();
                break;
            }
        }
        panic!(
            "{} differs (CORUM_REWRITE=1 to update):\n{diff}",
            path.display()
        );
    }
}

macro_rules! scenario {
    ($name:ident, $file:literal, $doc:literal) => {
        #[doc = $doc]
        #[test]
        fn $name() {
            check_file(
                &Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("testdata")
                    .join($file),
            );
        }
    };
}

scenario!(
    election,
    "election.txt",
    "Three voters elect one leader, which commits its LeaderChange and a proposal."
);
scenario!(prevote, "prevote.txt", "A partitioned voter's pre-votes fail, so on rejoining it never bumps the healthy quorum's epoch.");
scenario!(
    check_quorum,
    "check_quorum.txt",
    "A leader cut off from its majority resigns after the fetch timeout."
);
scenario!(
    divergence,
    "divergence.txt",
    "A deposed leader's uncommitted suffix is truncated and replaced by the new leader's entries."
);
scenario!(
    slow_leader_fsync,
    "slow_leader_fsync.txt",
    "Entries commit on followers' durable acks while the leader's own fsync lags."
);
scenario!(
    add_remove_voter,
    "add_remove_voter.txt",
    "An observer is added as a voter and another voter removed, one change at a time."
);
scenario!(remove_leader, "remove_leader.txt", "Removing the leader commits with the new set, then the leader resigns and a remaining voter leads.");
scenario!(
    snapshot_install,
    "snapshot_install.txt",
    "A node behind the leader's log start installs the leader's snapshot and catches up."
);
scenario!(
    update_voter,
    "update_voter.txt",
    "A voter restarted with a new endpoint sends UpdateVoter; the leader records it (same voters)."
);
scenario!(
    static_quorum,
    "static_quorum.txt",
    "A static quorum (kraft.version 0) never changes its voters: a voter restarted with another endpoint sends no UpdateVoter, and the leader refuses AddVoter and RemoveVoter."
);
scenario!(
    crash_reported,
    "crash_reported.txt",
    "A leader whose process is reported gone is replaced within a quarter election timeout, not the fetch timeout; a wrong report changes nothing."
);
scenario!(
    graceful_resign,
    "graceful_resign.txt",
    "EndQuorumEpoch elects the preferred successor without waiting for a timeout."
);

/// Roles are what the scenario status lines print.
#[test]
fn role_names_are_stable() {
    assert_eq!(format!("{:?}", Role::Prospective), "Prospective");
}

/// The leader reports every voter's durable end and response times: acks move a follower's
/// offset and keep it caught up; a partitioned follower's last response ages and it lags.
#[test]
fn leader_reports_replica_progress() {
    let mut c = Cluster::new(ClusterSpec::new(3, 3, 0)).unwrap();
    assert!(c.run_until(5_000, |c| c.leader().is_some()));
    let leader = c.leader().unwrap();
    for id in c.ids().into_iter().filter(|id| *id != leader) {
        assert!(c.core(id).unwrap().replica_progress().is_empty());
    }
    c.propose(leader, b"one").unwrap().unwrap();
    c.run_for(200);
    let core = c.core(leader).unwrap();
    let now = core.now_ms();
    let end = core.log_end_offset();
    let rows = core.replica_progress();
    assert_eq!(
        rows.iter().map(|r| r.key.id).collect::<Vec<_>>(),
        c.ids(),
        "every voter, by id"
    );
    for r in &rows {
        assert!(r.voter);
        assert_eq!(r.log_end_offset, end, "{r:?}");
        let heard = r.last_fetch_ms.unwrap();
        assert!(now - heard <= 100, "{r:?} at {now}");
        assert!(now - r.last_caught_up_ms.unwrap() <= 100, "{r:?} at {now}");
    }

    let lagging = *c.ids().iter().find(|id| **id != leader).unwrap();
    let others: Vec<NodeId> = c.ids().into_iter().filter(|o| *o != lagging).collect();
    c.net.partition(&[lagging], &others);
    c.run_for(20);
    let before = c.core(leader).unwrap().replica_progress();
    let cut_off_at = before
        .iter()
        .find(|r| r.key.id == lagging)
        .unwrap()
        .last_fetch_ms
        .unwrap();
    c.propose(leader, b"two").unwrap().unwrap();
    c.run_for(200);
    let core = c.core(leader).unwrap();
    assert_eq!(core.role(), Role::Leader, "the majority keeps its leader");
    let now = core.now_ms();
    let end = core.log_end_offset();
    let rows = core.replica_progress();
    let cut = rows.iter().find(|r| r.key.id == lagging).unwrap();
    assert!(cut.log_end_offset < end, "{cut:?} vs {end}");
    assert_eq!(
        cut.last_fetch_ms,
        Some(cut_off_at),
        "no response since the cut"
    );
    assert!(now - cut_off_at >= 200);
    assert!(cut.last_caught_up_ms.unwrap() <= cut_off_at);
    for r in rows.iter().filter(|r| r.key.id != lagging) {
        assert_eq!(r.log_end_offset, end, "{r:?}");
        assert!(now - r.last_caught_up_ms.unwrap() <= 100, "{r:?} at {now}");
    }

    c.net.heal();
    c.run_for(300);
    let core = c.core(leader).unwrap();
    let end = core.log_end_offset();
    let cut = core
        .replica_progress()
        .into_iter()
        .find(|r| r.key.id == lagging)
        .unwrap();
    assert_eq!(cut.log_end_offset, end, "caught up after the heal");
}
scenario!(
    failover,
    "failover.txt",
    "After a leader crash, the first follower past its fetch timeout wins its pre-vote at once (the other's liveness check uses the fetch timeout, not its own random deadline)."
);
