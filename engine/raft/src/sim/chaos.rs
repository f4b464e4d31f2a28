//! Seeded fault scenarios: a chaos phase (drops, duplicates, delays, partitions, crashes with
//! loss of unsynced writes, restarts, proposals, voter changes, snapshots), then a heal phase
//! that must elect a leader and commit a proposal on every node within a bounded time. One
//! seed in three starts as a static quorum (kraft.version 0) whose leaders are asked, now and
//! then, to upgrade it to a dynamic one (the voter changes then follow).

use std::panic::{catch_unwind, AssertUnwindSafe};

use corum_types::NodeId;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::network::NetFaults;
use super::{endpoints, Cluster, ClusterSpec};
use crate::core::Role;
use crate::message::{AddVoterRequest, Message, RemoveVoterRequest, UpgradeKraftVersionRequest};
use crate::types::Voter;

/// Length of a chaos run.
#[derive(Clone, Copy, Debug)]
pub struct ChaosSpec {
    pub voters: usize,
    /// Simulated time with faults.
    pub chaos_ms: u64,
    /// After healing, a leader must commit a proposal on every node within this.
    pub liveness_ms_max: u64,
}

impl ChaosSpec {
    pub fn new(voters: usize) -> Self {
        Self {
            voters,
            chaos_ms: 6_000,
            liveness_ms_max: 15_000,
        }
    }
}

/// What one seed did.
#[derive(Clone, Debug, Default)]
pub struct SeedReport {
    pub seed: u64,
    pub voters: usize,
    pub elections: usize,
    pub committed_batches: usize,
    pub messages: u64,
    pub crashes: u64,
    pub voter_changes: u64,
    /// kraft.version upgrades a leader appended (static seeds).
    pub kraft_upgrades: u64,
    pub snapshots: u64,
    /// Snapshots downloaded from a leader in chunks and installed.
    pub snapshots_installed: u64,
    pub reads: u64,
    pub violation: Option<String>,
}

/// The command that replays one seed.
pub fn replay_command(seed: u64, voters: usize) -> String {
    format!("corum sim --raft --seeds 1 --start {seed} --voters {voters}")
}

/// Runs one seed; a panic inside the core (a violated assertion) is reported as a violation.
pub fn run_seed(seed: u64, spec: ChaosSpec) -> SeedReport {
    let mut report = SeedReport {
        seed,
        voters: spec.voters,
        ..SeedReport::default()
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| run_inner(seed, spec, &mut report)));
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(v)) => report.violation = Some(v),
        Err(panic) => report.violation = Some(format!("panic: {}", panic_message(&*panic))),
    }
    if let Some(v) = &mut report.violation {
        *v = format!(
            "seed {seed}: {v}\n  replay: {}",
            replay_command(seed, spec.voters)
        );
    }
    report
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

fn run_inner(seed: u64, spec: ChaosSpec, report: &mut SeedReport) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let observers = rng.gen_range(1..=2);
    let mut cs = ClusterSpec::new(seed, spec.voters, observers);
    if seed % 3 == 0 {
        cs.kraft_version = 0;
    }
    let delay_max = rng.gen_range(1..=30);
    cs.net = NetFaults {
        drop_pct: rng.gen_range(0..=10),
        duplicate_pct: rng.gen_range(0..=5),
        delay_min_ms: 1,
        delay_max_ms: delay_max,
    };
    let small_cache = rng.gen_range(0..4) == 0;
    // Half of the seeds let a newer high watermark wait for entries to carry it.
    if rng.gen_bool(0.5) {
        cs.raft.hwm_linger_ms = rng.gen_range(1..=cs.raft.heartbeat_interval_ms);
    }
    if small_cache {
        cs.raft.payload_cache_bytes_max = 256;
    }
    // Half of the seeds pace the observers' fetches.
    if rng.gen_bool(0.5) {
        cs.raft.observer_fetch_interval_ms = rng.gen_range(1..=20);
    }
    let mut c = Cluster::new(cs).map_err(|e| e.to_string())?;
    // CORUM_SIM_TRACE=N appends the last N delivered messages to a violation report.
    let trace_lines: usize = std::env::var("CORUM_SIM_TRACE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if trace_lines > 0 {
        c.trace = Some(Vec::new());
    }
    for (i, node) in c.nodes.values_mut().enumerate() {
        let slow = rng.gen_range(0..4) == 0;
        node.fsync_delay_ms = if slow {
            (5, 60)
        } else {
            (0, rng.gen_range(1..=10))
        };
        node.restore_without_payloads = small_cache && i % 2 == 0;
    }
    let result = match catch_unwind(AssertUnwindSafe(|| {
        chaos_and_heal(&mut c, &mut rng, spec, report)
    })) {
        Ok(r) => r,
        Err(panic) => Err(format!("panic: {}", panic_message(&*panic))),
    };
    if let (Err(e), Some(t)) = (&result, &c.trace) {
        let tail = t[t.len().saturating_sub(trace_lines)..].join("\n");
        return Err(format!("{e}\n--- last {trace_lines} messages ---\n{tail}"));
    }
    result
}

fn chaos_and_heal(
    c: &mut Cluster,
    rng: &mut ChaCha8Rng,
    spec: ChaosSpec,
    report: &mut SeedReport,
) -> Result<(), String> {
    let ids = c.ids();
    let mut counter = 0u64;
    let mut next_action = 0u64;
    let mut endpoint_gen = 0u16;
    // Chaos phase.
    while c.now_ms < spec.chaos_ms {
        c.step();
        check(c)?;
        if c.now_ms < next_action {
            continue;
        }
        next_action = c.now_ms + 10;
        let roll = rng.gen_range(0..1000);
        let leader = c.leader();
        match roll {
            0..=299 => {
                if let Some(l) = leader {
                    counter += 1;
                    let len = rng.gen_range(1..=48);
                    let mut payload = vec![0u8; len];
                    payload[..8.min(len)].copy_from_slice(&counter.to_be_bytes()[..8.min(len)]);
                    rng.fill(&mut payload[8.min(len)..]);
                    let _ = c.propose(l, &payload);
                }
            }
            300..=305 => {
                let id = ids[rng.gen_range(0..ids.len())];
                if c.is_up(id) {
                    c.crash(id);
                    report.crashes += 1;
                    // A crashed process's sockets close and its port refuses: most of the
                    // time the others' transports report it (not when the host died).
                    if rng.gen_range(0..4) != 0 {
                        for other in ids.iter().copied().filter(|o| *o != id) {
                            c.with_core(other, |core| core.peer_unreachable(id));
                        }
                    }
                }
            }
            306..=335 => {
                let down: Vec<NodeId> = ids.iter().copied().filter(|id| !c.is_up(*id)).collect();
                if !down.is_empty() {
                    let id = down[rng.gen_range(0..down.len())];
                    if rng.gen_range(0..4) == 0 {
                        // Restart with new endpoints: the voter sends UpdateVoter to the leader.
                        endpoint_gen += 1;
                        c.nodes.get_mut(&id).expect("known").endpoints =
                            endpoints(id.0, endpoint_gen);
                    }
                    c.start(id).map_err(|e| e.to_string())?;
                }
            }
            336..=340 => {
                let mut shuffled = ids.clone();
                for i in (1..shuffled.len()).rev() {
                    shuffled.swap(i, rng.gen_range(0..=i));
                }
                let cut = rng.gen_range(1..shuffled.len());
                let (l, r) = shuffled.split_at(cut);
                c.net.partition(l, r);
            }
            341..=360 => c.net.heal(),
            361..=375 => {
                if let Some(l) = leader {
                    let voters = c.core(l).expect("leader is up").voter_set().clone();
                    let add = rng.gen_bool(0.5) || voters.len() <= 1;
                    if add {
                        let cands: Vec<NodeId> = ids
                            .iter()
                            .copied()
                            .filter(|id| !voters.contains_id(*id) && c.is_up(*id))
                            .collect();
                        if !cands.is_empty() {
                            let id = cands[rng.gen_range(0..cands.len())];
                            let voter = Voter {
                                key: c.nodes[&id].key,
                                endpoints: c.nodes[&id].endpoints.clone(),
                            };
                            if rng.gen_bool(0.5) && id != l {
                                // As an admin request over the network (answered once committed).
                                let msg = Message::AddVoter(AddVoterRequest {
                                    request_id: counter,
                                    voter,
                                });
                                let now = c.now_ms;
                                c.net.send(&mut c.rng, now, id, l, msg);
                            } else if c
                                .with_core(l, |core| core.add_voter(voter))
                                .is_some_and(|r| r.is_ok())
                            {
                                report.voter_changes += 1;
                            }
                        }
                    } else {
                        let vs = voters.voters();
                        let key = vs[rng.gen_range(0..vs.len())].key;
                        if rng.gen_bool(0.5) && key.id != l {
                            let msg = Message::RemoveVoter(RemoveVoterRequest {
                                request_id: counter,
                                voter: key,
                            });
                            let now = c.now_ms;
                            c.net.send(&mut c.rng, now, key.id, l, msg);
                        } else if c
                            .with_core(l, |core| core.remove_voter(key))
                            .is_some_and(|r| r.is_ok())
                        {
                            report.voter_changes += 1;
                        }
                    }
                }
            }
            376..=390 => {
                let id = ids[rng.gen_range(0..ids.len())];
                if c.snapshot(id).is_some_and(|r| r.is_ok()) {
                    report.snapshots += 1;
                }
            }
            391..=393 => {
                if let Some(l) = leader {
                    c.with_core(l, |core| core.resign());
                }
            }
            394..=399 => {
                if let Some(l) = leader {
                    if c.core(l).is_some_and(|core| core.kraft_version() == 0) {
                        let from = ids[rng.gen_range(0..ids.len())];
                        if rng.gen_bool(0.5) && from != l {
                            // As an admin request over the network (answered once committed).
                            let msg = Message::UpgradeKraftVersion(UpgradeKraftVersionRequest {
                                request_id: counter,
                                version: 1,
                                validate_only: false,
                            });
                            let now = c.now_ms;
                            c.net.send(&mut c.rng, now, from, l, msg);
                        } else if c
                            .with_core(l, |core| core.upgrade_kraft_version(1, false))
                            .is_some_and(|r| r.is_ok_and(|at| at.is_some()))
                        {
                            report.kraft_upgrades += 1;
                        }
                    }
                }
            }
            400..=404 => {
                // A wrong report (the peer is alive): costs at most a failed pre-vote.
                let to = ids[rng.gen_range(0..ids.len())];
                let peer = ids[rng.gen_range(0..ids.len())];
                c.with_core(to, |core| core.peer_unreachable(peer));
            }
            _ => {}
        }
    }
    // Heal phase: every node up, reliable network; a proposal must commit everywhere.
    c.net.heal();
    c.net.faults = NetFaults {
        drop_pct: 0,
        duplicate_pct: 0,
        delay_min_ms: 1,
        delay_max_ms: 5,
    };
    for id in &ids {
        if !c.is_up(*id) {
            c.start(*id).map_err(|e| e.to_string())?;
        }
    }
    let healed_at = c.now_ms;
    let deadline = healed_at + spec.liveness_ms_max;
    let mut marker: Option<(NodeId, crate::ProposalId)> = None;
    let mut next_try = 0;
    loop {
        if c.now_ms > deadline {
            return Err(format!(
                "liveness: no proposal committed on every node {} ms after healing; {}",
                spec.liveness_ms_max,
                status_line(c)
            ));
        }
        c.step();
        check(c)?;
        if let Some((_, p)) = marker {
            let done = ids.iter().all(|id| {
                c.core(*id).is_some_and(|core| {
                    core.high_watermark() >= p.end_offset
                        && core.epoch_before(p.end_offset) == Some(p.epoch)
                })
            });
            let lost = ids.iter().any(|id| {
                c.core(*id)
                    .is_some_and(|core| core.role() == Role::Leader && core.epoch() > p.epoch)
            });
            if done {
                // Every replica holds the same log up to the marker: the same kraft.version
                // and voter set in force there.
                let at: Vec<(u16, Option<crate::VoterSet>)> = ids
                    .iter()
                    .filter_map(|id| c.core(*id))
                    .map(|core| {
                        let set = core
                            .voter_history()
                            .iter()
                            .take_while(|(o, _)| *o < p.end_offset)
                            .last()
                            .map(|(_, v)| v.clone());
                        (core.kraft_version_at(p.end_offset), set)
                    })
                    .collect();
                if at.windows(2).any(|w| w[0] != w[1]) {
                    return Err(format!(
                        "replicas disagree on kraft.version or voters at {}: {at:?}",
                        p.end_offset
                    ));
                }
                break;
            }
            if lost {
                marker = None;
            }
        }
        if marker.is_none() && c.now_ms >= next_try {
            next_try = c.now_ms + 100;
            if let Some(l) = c.leader() {
                counter += 1;
                let payload = counter.to_be_bytes();
                if let Some(Ok(p)) = c.propose(l, &payload) {
                    marker = Some((l, p));
                }
            }
        }
    }
    report.elections = c.checker.elections();
    report.committed_batches = c.checker.committed_batches();
    report.messages = c.delivered;
    report.reads = c.reads_served;
    report.snapshots_installed = c.snapshots_installed;
    Ok(())
}

fn check(c: &Cluster) -> Result<(), String> {
    // Everything is bounded: a storm of messages is a bug (a feedback loop between replicas).
    if c.net.in_flight() > 20_000 {
        return Err(format!(
            "message storm: {} messages in flight; {}",
            c.net.in_flight(),
            status_line(c)
        ));
    }
    match c.checker.violations.first() {
        Some(v) => Err(format!("at {} ms: {v}; {}", c.now_ms, status_line(c))),
        None => Ok(()),
    }
}

/// One line per node: role, epoch, HWM, log range, voters.
pub fn status_line(c: &Cluster) -> String {
    let mut s = String::new();
    for (id, n) in &c.nodes {
        match &n.core {
            None => s.push_str(&format!("[{id}: down] ")),
            Some(core) => {
                let st = core.status();
                s.push_str(&format!(
                    "[{id}: {:?} e{} leader={:?} hwm={} log=[{},{}) durable={} voters={:?}] ",
                    st.role,
                    st.epoch.0,
                    st.leader.map(|l| l.0),
                    st.high_watermark.0,
                    st.log_start_offset.0,
                    st.log_end_offset.0,
                    st.durable_end_offset.0,
                    st.voters.iter().map(|v| v.0).collect::<Vec<_>>()
                ));
            }
        }
    }
    s
}

/// Totals over many seeds.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub seeds: u64,
    pub elections: u64,
    pub committed_batches: u64,
    pub messages: u64,
    pub crashes: u64,
    pub voter_changes: u64,
    pub kraft_upgrades: u64,
    pub snapshots: u64,
    /// Snapshots downloaded from a leader in chunks and installed.
    pub snapshots_installed: u64,
    pub reads: u64,
    pub violations: Vec<String>,
}

impl Summary {
    pub fn add(&mut self, r: &SeedReport) {
        self.seeds += 1;
        self.elections += r.elections as u64;
        self.committed_batches += r.committed_batches as u64;
        self.messages += r.messages;
        self.crashes += r.crashes;
        self.voter_changes += r.voter_changes;
        self.kraft_upgrades += r.kraft_upgrades;
        self.snapshots += r.snapshots;
        self.snapshots_installed += r.snapshots_installed;
        self.reads += r.reads;
        if let Some(v) = &r.violation {
            self.violations.push(v.clone());
        }
    }
}

/// Runs seeds `start..start + count`.
pub fn run_seeds(start: u64, count: u64, voters: usize) -> Summary {
    let mut s = Summary::default();
    for seed in start..start + count {
        s.add(&run_seed(seed, ChaosSpec::new(voters)));
    }
    s
}
