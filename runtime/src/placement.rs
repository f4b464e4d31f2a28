//! Core placement: which shards exist, which core each one runs on, and which one is the
//! controller shard.
//!
//! Placement is decided once, from flags or a config file, and validated before any thread
//! starts. The inputs are:
//!
//! | flag                  | config key        | meaning                                           |
//! |-----------------------|-------------------|---------------------------------------------------|
//! | `--cores LIST`        | `cores`           | CPU set, e.g. `0-3`, `0,2`, `0-1,4`; one shard per core |
//! | `--controller-core N` | `controller.core` | the controller shard's core; must be in the set   |
//! | `--no-pin`            | `no.pin`          | run the same shards unpinned (`Placement::Unbound`) |
//!
//! Defaults: all online cores; the controller gets the highest core of the set. Shards are
//! numbered `0..n` in ascending core order.
//!
//! Rejected before anything starts: an empty set, a malformed list, a duplicate core, a core
//! that is not online (the online set comes from `sched_getaffinity`, so a container's cpuset
//! counts), and a controller core outside the set.
//!
//! **One core.** On a 1-core set there is one shard, with role [`ShardRole::Combined`]: the
//! controller state machine and the Raft/log/network work share that core (and that executor).
//! The design wants the controller alone on its core, so [`Placement::log_summary`] says so in
//! a warning; it is allowed because laptops, CI and `taskset -c 0` runs need it.
//!
//! The pure part is [`PlacementSpec::resolve`], which takes the online set as an argument so
//! tests don't depend on the machine; [`online_cores`] reads it from the OS.

use std::collections::BTreeSet;
use std::fmt;

use crate::error::{Error, Result};

/// A CPU number as the OS names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CoreId(pub usize);

impl fmt::Display for CoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cpu{}", self.0)
    }
}

/// A shard's index, dense from 0. Not a core number: with `--cores 2,5` the shards are 0 and 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub usize);

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard{}", self.0)
    }
}

/// Why a placement was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// The CPU list does not parse.
    #[error("cannot parse CPU list {input:?}: {reason}")]
    Parse { input: String, reason: String },
    /// The CPU set is empty.
    #[error("the CPU set is empty")]
    EmptySet,
    /// A core appears twice in the list.
    #[error("core {core} is listed twice")]
    DuplicateCore { core: usize },
    /// A core in the set is not online (or not in this process's affinity mask).
    #[error("core {core} is not online (online: {online})")]
    CoreNotOnline { core: usize, online: String },
    /// The controller core is not one of the shard cores.
    #[error("controller core {controller} is not in the CPU set {cores}")]
    ControllerOutsideSet { controller: usize, cores: String },
    /// A config key this module doesn't know.
    #[error("unknown placement key {key:?}")]
    UnknownKey { key: String },
    /// A config value that doesn't parse.
    #[error("bad value {value:?} for {key}: {reason}")]
    BadValue {
        key: String,
        value: String,
        reason: String,
    },
    /// The number of unpinned shards is zero.
    #[error("at least one shard is needed")]
    NoShards,
}

/// Formats cores as a compact list (`0-3,6`), the same syntax [`parse_core_list`] reads.
pub fn format_core_list(cores: &[CoreId]) -> String {
    let mut sorted: Vec<usize> = cores.iter().map(|c| c.0).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// Upper bound on a core number; keeps `0-999999999` from allocating a huge vector.
pub const CORE_ID_MAX: usize = 4095;

/// Parses a CPU list: comma-separated items, each `N` or `A-B` (inclusive, `A <= B`).
/// Whitespace around items is ignored. The result keeps the input order and any duplicates, so
/// validation can report them.
pub fn parse_core_list(input: &str) -> Result<Vec<CoreId>, PlacementError> {
    let err = |reason: String| PlacementError::Parse {
        input: input.to_string(),
        reason,
    };
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(PlacementError::EmptySet);
    }
    let number = |s: &str| -> Result<usize, PlacementError> {
        let s = s.trim();
        let n: usize = s
            .parse()
            .map_err(|_| err(format!("{s:?} is not a core number")))?;
        if n > CORE_ID_MAX {
            return Err(err(format!("core {n} is above the limit {CORE_ID_MAX}")));
        }
        Ok(n)
    };
    let mut cores = Vec::new();
    for item in trimmed.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(err("empty item".to_string()));
        }
        match item.split_once('-') {
            None => cores.push(CoreId(number(item)?)),
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(err(format!("range {a}-{b} is descending")));
                }
                cores.extend((a..=b).map(CoreId));
            }
        }
    }
    Ok(cores)
}

/// Reads the cores this process may run on: its `sched_getaffinity` mask, or
/// `/sys/devices/system/cpu/online` if that call fails.
pub fn online_cores() -> Result<Vec<CoreId>> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set, and sched_getaffinity writes
    // at most size_of::<cpu_set_t>() bytes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc == 0 {
        let cores: Vec<CoreId> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: i < CPU_SETSIZE, the bit range of cpu_set_t.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .map(CoreId)
            .collect();
        if !cores.is_empty() {
            return Ok(cores);
        }
    }
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map_err(|source| Error::OnlineCores { source })?;
    parse_core_list(&text).map_err(|e| Error::OnlineCores {
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
    })
}

/// What the operator asked for, before validation against the machine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementSpec {
    /// The CPU set, in the order given; `None` means all online cores.
    pub cores: Option<Vec<CoreId>>,
    /// The controller's core; `None` means the highest core of the set.
    pub controller_core: Option<CoreId>,
    /// Run unpinned.
    pub no_pin: bool,
}

impl PlacementSpec {
    /// Builds a spec from config-file key/values: `cores=0-3`, `controller.core=3`,
    /// `no.pin=true`. Unknown keys are an error, so a typo doesn't silently pin wrong.
    pub fn from_kv<K: AsRef<str>, V: AsRef<str>>(
        pairs: &[(K, V)],
    ) -> Result<PlacementSpec, PlacementError> {
        let mut spec = PlacementSpec::default();
        for (key, value) in pairs {
            let (key, value) = (key.as_ref().trim(), value.as_ref().trim());
            let bad = |reason: &str| PlacementError::BadValue {
                key: key.to_string(),
                value: value.to_string(),
                reason: reason.to_string(),
            };
            match key {
                "cores" => spec.cores = Some(parse_core_list(value)?),
                "controller.core" => {
                    spec.controller_core =
                        Some(CoreId(value.parse().map_err(|_| bad("not a core number"))?))
                }
                "no.pin" => {
                    spec.no_pin = match value {
                        "true" => true,
                        "false" => false,
                        _ => return Err(bad("expected true or false")),
                    }
                }
                _ => {
                    return Err(PlacementError::UnknownKey {
                        key: key.to_string(),
                    })
                }
            }
        }
        Ok(spec)
    }

    /// Overlays `flags` on `self` (the config file): every value the flags set wins.
    pub fn overridden_by(self, flags: &PlacementSpec) -> PlacementSpec {
        PlacementSpec {
            cores: flags.cores.clone().or(self.cores),
            controller_core: flags.controller_core.or(self.controller_core),
            no_pin: flags.no_pin || self.no_pin,
        }
    }

    /// Validates the spec against the online cores and lays out the shards. Pure.
    pub fn resolve(&self, online: &[CoreId]) -> Result<Placement, PlacementError> {
        let cores = match &self.cores {
            Some(cores) => cores.clone(),
            None => online.to_vec(),
        };
        if cores.is_empty() {
            return Err(PlacementError::EmptySet);
        }
        let mut seen = BTreeSet::new();
        for core in &cores {
            if !seen.insert(*core) {
                return Err(PlacementError::DuplicateCore { core: core.0 });
            }
        }
        // Unpinned shards never touch the named cores, but a wrong list is still a mistake
        // worth reporting: the same flags must work when pinning is turned back on.
        for core in &seen {
            if !online.contains(core) {
                return Err(PlacementError::CoreNotOnline {
                    core: core.0,
                    online: format_core_list(online),
                });
            }
        }
        let sorted: Vec<CoreId> = seen.into_iter().collect();
        let controller = self
            .controller_core
            .unwrap_or(*sorted.last().expect("set checked non-empty above"));
        let controller_index = sorted
            .iter()
            .position(|c| *c == controller)
            .ok_or_else(|| PlacementError::ControllerOutsideSet {
                controller: controller.0,
                cores: format_core_list(&sorted),
            })?;
        Ok(Placement::from_cores(
            &sorted,
            ShardId(controller_index),
            !self.no_pin,
        ))
    }
}

/// Clap flags for placement; the `corum` binary flattens this into its subcommands.
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementArgs {
    /// CPU set to run on, one shard per core (e.g. `0-3`, `0,2`, `0-1,4`). Default: all online
    /// cores.
    #[arg(long, value_name = "LIST", value_parser = parse_core_list_arg)]
    pub cores: Option<CoreList>,
    /// Core of the controller shard; must be in `--cores`. Default: the highest core of the set.
    #[arg(long, value_name = "N")]
    pub controller_core: Option<usize>,
    /// Do not pin shards to cores (tests, laptops, CI); the shard count still follows `--cores`.
    #[arg(long)]
    pub no_pin: bool,
}

/// A parsed `--cores` value (kept in input order, duplicates included, for validation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreList(pub Vec<CoreId>);

fn parse_core_list_arg(s: &str) -> Result<CoreList, String> {
    parse_core_list(s).map(CoreList).map_err(|e| e.to_string())
}

impl PlacementArgs {
    /// The flags as a spec (to overlay on a config file's spec).
    pub fn spec(&self) -> PlacementSpec {
        PlacementSpec {
            cores: self.cores.as_ref().map(|c| c.0.clone()),
            controller_core: self.controller_core.map(CoreId),
            no_pin: self.no_pin,
        }
    }

    /// Validates the flags against this machine's online cores.
    pub fn resolve(&self) -> Result<Placement> {
        Ok(self.spec().resolve(&online_cores()?)?)
    }
}

/// What a shard is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardRole {
    /// Runs the controller state machine and nothing else.
    Controller,
    /// Runs Raft, the log and the network.
    Worker,
    /// The only shard: controller and worker share it (1-core sets).
    Combined,
}

impl ShardRole {
    /// Whether the controller state machine runs on this shard.
    pub fn runs_controller(self) -> bool {
        matches!(self, ShardRole::Controller | ShardRole::Combined)
    }

    /// Whether Raft/log/network work runs on this shard.
    pub fn runs_workers(self) -> bool {
        matches!(self, ShardRole::Worker | ShardRole::Combined)
    }
}

/// One shard of a resolved placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSpec {
    pub id: ShardId,
    /// The core it is pinned to; `None` when unpinned.
    pub core: Option<CoreId>,
    pub role: ShardRole,
}

/// A validated layout of shards over cores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    shards: Vec<ShardSpec>,
    controller: ShardId,
}

impl Placement {
    fn from_cores(cores: &[CoreId], controller: ShardId, pin: bool) -> Placement {
        assert!(!cores.is_empty() && controller.0 < cores.len());
        let single = cores.len() == 1;
        let shards = cores
            .iter()
            .enumerate()
            .map(|(i, core)| ShardSpec {
                id: ShardId(i),
                core: pin.then_some(*core),
                role: if single {
                    ShardRole::Combined
                } else if i == controller.0 {
                    ShardRole::Controller
                } else {
                    ShardRole::Worker
                },
            })
            .collect();
        Placement { shards, controller }
    }

    /// `shard_count` unpinned shards, the last one the controller; for tests and benches.
    pub fn unpinned(shard_count: usize) -> Result<Placement, PlacementError> {
        if shard_count == 0 {
            return Err(PlacementError::NoShards);
        }
        let fake: Vec<CoreId> = (0..shard_count).map(CoreId).collect();
        Ok(Placement::from_cores(
            &fake,
            ShardId(shard_count - 1),
            false,
        ))
    }

    /// All shards, in id order.
    pub fn shards(&self) -> &[ShardSpec] {
        &self.shards
    }

    /// The shard the controller state machine runs on.
    pub fn controller(&self) -> ShardId {
        self.controller
    }

    /// The shards that are not the controller shard (empty on a 1-core set).
    pub fn workers(&self) -> impl Iterator<Item = ShardId> + '_ {
        self.shards
            .iter()
            .filter(|s| s.role == ShardRole::Worker)
            .map(|s| s.id)
    }

    /// Whether shards are pinned.
    pub fn is_pinned(&self) -> bool {
        self.shards[0].core.is_some()
    }

    /// Logs the layout once at start-up, with a warning for the shared 1-core case.
    pub fn log_summary(&self) {
        for s in &self.shards {
            tracing::info!(shard = %s.id, core = ?s.core, role = ?s.role, "shard placement");
        }
        if self.shards.len() == 1 {
            tracing::warn!(
                core = ?self.shards[0].core,
                "single-core placement: the controller shares its core with raft, log and network work"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cores(v: &[usize]) -> Vec<CoreId> {
        v.iter().copied().map(CoreId).collect()
    }

    #[test]
    fn parses_ranges_lists_and_mixes() {
        // Every list form in the flag's help parses to the cores it names, in order.
        assert_eq!(parse_core_list("0-3").unwrap(), cores(&[0, 1, 2, 3]));
        assert_eq!(parse_core_list("0,2").unwrap(), cores(&[0, 2]));
        assert_eq!(parse_core_list("0-1,4").unwrap(), cores(&[0, 1, 4]));
        assert_eq!(parse_core_list(" 5 , 1-1\n").unwrap(), cores(&[5, 1]));
        assert_eq!(parse_core_list("1,1").unwrap(), cores(&[1, 1]));
    }

    #[test]
    fn rejects_malformed_lists() {
        // Malformed lists are parse errors (or EmptySet), never a silently smaller set.
        for bad in [
            "a", "1-", "-1", "3-1", "1,,2", "1,", "1-2-3", "99999", "0-5000",
        ] {
            assert!(
                matches!(parse_core_list(bad), Err(PlacementError::Parse { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(parse_core_list(" "), Err(PlacementError::EmptySet));
    }

    #[test]
    fn format_round_trips() {
        // format_core_list prints the compact form that parse_core_list reads back.
        assert_eq!(format_core_list(&cores(&[0, 1, 2, 4, 6, 7])), "0-2,4,6-7");
        let list = cores(&[3, 9, 10, 11, 0]);
        let mut sorted = list.clone();
        sorted.sort();
        assert_eq!(parse_core_list(&format_core_list(&list)).unwrap(), sorted);
    }

    #[test]
    fn default_uses_all_online_cores_with_controller_last() {
        // With no flags, every online core gets a shard and the highest core runs the controller.
        let p = PlacementSpec::default()
            .resolve(&cores(&[0, 1, 2, 3]))
            .unwrap();
        assert_eq!(p.shards().len(), 4);
        assert_eq!(p.controller(), ShardId(3));
        assert_eq!(p.shards()[3].core, Some(CoreId(3)));
        assert_eq!(p.shards()[3].role, ShardRole::Controller);
        assert_eq!(
            p.workers().collect::<Vec<_>>(),
            vec![ShardId(0), ShardId(1), ShardId(2)]
        );
        assert!(p.is_pinned());
    }

    #[test]
    fn explicit_controller_core_and_sorted_shards() {
        // Shards are numbered in ascending core order and the named controller core is honoured.
        let spec = PlacementSpec {
            cores: Some(cores(&[6, 2, 4])),
            controller_core: Some(CoreId(2)),
            no_pin: false,
        };
        let p = spec.resolve(&cores(&[0, 1, 2, 3, 4, 5, 6, 7])).unwrap();
        let got: Vec<_> = p
            .shards()
            .iter()
            .map(|s| (s.id.0, s.core.unwrap().0))
            .collect();
        assert_eq!(got, vec![(0, 2), (1, 4), (2, 6)]);
        assert_eq!(p.controller(), ShardId(0));
    }

    #[test]
    fn validation_errors_are_distinct() {
        // Each kind of bad placement is rejected with its own error before anything starts.
        let online = cores(&[0, 1, 2, 3]);
        let spec = |c: &[usize], ctl: Option<usize>| PlacementSpec {
            cores: Some(cores(c)),
            controller_core: ctl.map(CoreId),
            no_pin: false,
        };
        assert_eq!(
            spec(&[], None).resolve(&online),
            Err(PlacementError::EmptySet)
        );
        assert_eq!(
            spec(&[0, 1, 0], None).resolve(&online),
            Err(PlacementError::DuplicateCore { core: 0 })
        );
        assert_eq!(
            spec(&[0, 7], None).resolve(&online),
            Err(PlacementError::CoreNotOnline {
                core: 7,
                online: "0-3".into()
            })
        );
        assert_eq!(
            spec(&[0, 1], Some(2)).resolve(&online),
            Err(PlacementError::ControllerOutsideSet {
                controller: 2,
                cores: "0-1".into()
            })
        );
        assert_eq!(
            PlacementSpec::default().resolve(&[]),
            Err(PlacementError::EmptySet)
        );
    }

    #[test]
    fn single_core_is_combined() {
        // A one-core set yields one shard that runs both the controller and the other work.
        let p = PlacementSpec {
            cores: Some(cores(&[1])),
            ..Default::default()
        }
        .resolve(&cores(&[0, 1]))
        .unwrap();
        assert_eq!(p.shards().len(), 1);
        assert_eq!(p.shards()[0].role, ShardRole::Combined);
        assert!(p.shards()[0].role.runs_controller() && p.shards()[0].role.runs_workers());
        assert_eq!(p.workers().count(), 0);
    }

    #[test]
    fn no_pin_keeps_shard_count_but_drops_cores() {
        // --no-pin keeps one shard per listed core but leaves every shard unbound.
        let p = PlacementSpec {
            cores: Some(cores(&[0, 1])),
            controller_core: None,
            no_pin: true,
        }
        .resolve(&cores(&[0, 1]))
        .unwrap();
        assert_eq!(p.shards().len(), 2);
        assert!(p.shards().iter().all(|s| s.core.is_none()));
        assert!(!p.is_pinned());
        assert_eq!(Placement::unpinned(0), Err(PlacementError::NoShards));
        assert_eq!(Placement::unpinned(3).unwrap().controller(), ShardId(2));
    }

    #[test]
    fn key_values_and_flag_overlay() {
        // Config-file keys build the same spec as flags, unknown keys fail, and flags win.
        let file = PlacementSpec::from_kv(&[
            ("cores", "0-2"),
            ("controller.core", "1"),
            ("no.pin", "false"),
        ])
        .unwrap();
        assert_eq!(file.cores, Some(cores(&[0, 1, 2])));
        assert_eq!(file.controller_core, Some(CoreId(1)));
        assert!(!file.no_pin);
        assert!(matches!(
            PlacementSpec::from_kv(&[("core", "1")]),
            Err(PlacementError::UnknownKey { .. })
        ));
        assert!(matches!(
            PlacementSpec::from_kv(&[("no.pin", "yes")]),
            Err(PlacementError::BadValue { .. })
        ));
        assert!(matches!(
            PlacementSpec::from_kv(&[("controller.core", "x")]),
            Err(PlacementError::BadValue { .. })
        ));
        let flags = PlacementSpec {
            cores: None,
            controller_core: Some(CoreId(2)),
            no_pin: true,
        };
        let merged = file.overridden_by(&flags);
        assert_eq!(merged.cores, Some(cores(&[0, 1, 2])));
        assert_eq!(merged.controller_core, Some(CoreId(2)));
        assert!(merged.no_pin);
    }

    #[test]
    fn clap_flags_parse() {
        // The clap struct accepts the documented flags and rejects a bad list at parse time.
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            placement: PlacementArgs,
        }
        let cli = Cli::try_parse_from([
            "x",
            "--cores",
            "0-1,4",
            "--controller-core",
            "4",
            "--no-pin",
        ])
        .unwrap();
        let spec = cli.placement.spec();
        assert_eq!(spec.cores, Some(cores(&[0, 1, 4])));
        assert_eq!(spec.controller_core, Some(CoreId(4)));
        assert!(spec.no_pin);
        assert!(Cli::try_parse_from(["x", "--cores", "2-1"]).is_err());
    }

    #[test]
    fn online_cores_reads_something() {
        // The OS reports at least one core this process may run on, and the default flags
        // resolve to one shard per online core.
        let online = online_cores().unwrap();
        assert!(!online.is_empty());
        let p = PlacementArgs {
            no_pin: true,
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(p.shards().len(), online.len());
    }
}
