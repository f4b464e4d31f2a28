//! Sweeping what dead `corum chaos` runs left behind. A run removes everything it made at exit
//! and on SIGINT/SIGTERM, but a run that is SIGKILLed (or a test process that made disks and
//! was killed) leaves its network namespaces `cc<T>n<i>`, the host ends of its veth pairs
//! `cc<T>v<i>` and its bridge `cc<T>br` (`T`, the tag: its pid modulo
//! [`TAG_MODULUS`]), its blkio cgroup `corum-chaos-<pid>`, and its loop devices on
//! `<dir>/disks/node<i>.<pid>-<start_ticks>.ext4` ([`image_name`]) mounted on
//! `<dir>/cluster/node<i>`; its nodes die with it (`PR_SET_PDEATHSIG`), but a node someone
//! restarted by hand would hold a mount busy. Its directory may be gone meanwhile (a test's
//! temporary directory removed): the loop devices keep the images' names.
//!
//! | step | what happens |
//! |---|---|
//! | find | names in `/run/netns` and `/sys/class/net` parsed as a run's ([`parse_net_name`]); `corum-chaos-<pid>` cgroups; loop devices (`/sys/block/loop*`, not auto-clearing: `mount -o loop` of a kept image is someone's) whose backing file is a run's image, with the owner in its name ([`parse_image_path`]), and their mounts on the run's `cluster/node<i>` (`/proc/self/mountinfo`) |
//! | group | one [`Run`] per owner pid (disks named after it, a cgroup; a tag is the pid when `pid_max` is at most [`TAG_MODULUS`], else it joins the one run whose pid it matches); disks without an owner in their names (`node<i>.ext4`, made by an older build) are a run of their own |
//! | owner | the run is left alone if any part's owner may be alive ([`owner_alive`], below); the processes are read again just before a run is removed |
//! | remove | processes killed (SIGKILL: those in the run's namespaces, and those whose arguments or working directory name its `cluster` directory; never a `corum chaos` process, nor this one or its ancestors) and awaited; filesystems unmounted; loop devices detached; the cgroup emptied into the root cgroup and removed; veth pairs, namespaces and the bridge deleted. An error is reported and the sweep goes on; the run's directory (images, histories) stays |
//!
//! Whose is a part, and when its owner counts as alive (a process other than the sweeping one,
//! not a zombie; the sweeping process is never an owner: a run sweeps before it makes
//! anything, and `--cleanup` makes nothing):
//!
//! | part | alive when |
//! |---|---|
//! | disks named after their owner | a process with that pid and that start time runs: exact, a reused pid has another start time |
//! | disks of an older build | conservatively: a process's arguments or working directory name their directory, or an image changed less than [`LEGACY_QUIET`] ago (or cannot be read) |
//! | any disks | a `corum chaos` process's directory is theirs (a run reusing a dead run's `--dir`) |
//! | cgroup `corum-chaos-<pid>` | a process with that pid runs that started no later than the cgroup's time (+ [`START_SLACK`]): the cgroup filesystem's times are never earlier than the directory's creation, so a reused pid that started after it is not its maker |
//! | namespaces, veths, bridge of tag `T` | a `corum ... chaos` process (not `--cleanup`) runs whose pid modulo [`TAG_MODULUS`] is `T` ([`chaos_dir_of`]). A run that reuses a dead run's tag sweeps the dead run's names when it starts; any other sweep leaves them to it |

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::disk::{image_name, parse_stat, run, Owner, BLKIO_ROOT, CGROUP_PREFIX};
use super::net::{bridge_name, namespace_name, veth_name, TAG_MODULUS};

/// Where `ip netns` keeps the names of namespaces.
const NETNS_DIR: &str = "/run/netns";
/// How long the images of an older build's disks (no owner in their names) must have been
/// unchanged for them to count as a dead run's.
pub const LEGACY_QUIET: Duration = Duration::from_secs(600);
/// Slack when a process's start is compared with a cgroup's time (the boot time `/proc/stat`
/// gives is in whole seconds).
pub const START_SLACK: Duration = Duration::from_secs(2);
/// How long killed processes get to exit, and an unmount, a detach or a cgroup removal to
/// succeed once they have.
const WAIT_MAX: Duration = Duration::from_secs(5);
/// The most nodes a run has (`--nodes`), so the highest index in a name.
const NODES_MAX: u32 = 9;

/// A part of a run's network, by the name it has on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NetPart {
    /// `cc<T>n<i>`: node `i`'s namespace.
    Namespace(u32),
    /// `cc<T>v<i>`: the host end of node `i`'s veth pair.
    Veth(u32),
    /// `cc<T>br`.
    Bridge,
}

/// A decimal number as `format!` writes one: digits only, no leading zero (but `0`).
fn decimal(s: &str) -> Option<u32> {
    let ok =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    ok.then(|| s.parse().ok()).flatten()
}

/// The tag and the part a network name of `corum chaos` names (the inverse of
/// [`namespace_name`], [`veth_name`] and [`bridge_name`]); `None` for every other name.
pub fn parse_net_name(name: &str) -> Option<(u32, NetPart)> {
    let rest = name.strip_prefix("cc")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (tag, kind) = rest.split_at(digits);
    let tag = decimal(tag).filter(|&t| t < TAG_MODULUS)?;
    let part = if kind == "br" {
        NetPart::Bridge
    } else {
        let index = kind
            .get(1..)
            .and_then(decimal)
            .filter(|i| (1..=NODES_MAX).contains(i))?;
        match kind.as_bytes()[0] {
            b'n' => NetPart::Namespace(index),
            b'v' => NetPart::Veth(index),
            _ => return None,
        }
    };
    Some((tag, part))
}

/// The pid a blkio cgroup `corum-chaos-<pid>` is named after.
pub fn parse_cgroup_name(name: &str) -> Option<u32> {
    decimal(name.strip_prefix(CGROUP_PREFIX)?).filter(|&p| p > 0)
}

/// The run directory, the node index and the owner of a loop device's backing file
/// `<dir>/disks/node<i>.<pid>-<start_ticks>.ext4` ([`image_name`]; `node<i>.ext4`, no owner,
/// from an older build), as `/sys/block/loopN/loop/backing_file` gives it: absolute,
/// ` (deleted)` after it once the file is unlinked.
pub fn parse_image_path(backing: &str) -> Option<(PathBuf, u32, Option<Owner>)> {
    let path = Path::new(backing.strip_suffix(" (deleted)").unwrap_or(backing));
    if !path.is_absolute() {
        return None;
    }
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_prefix("node")?.strip_suffix(".ext4")?;
    let (index, owner) = match stem.split_once('.') {
        Some((index, owner)) => (index, Some(Owner::parse_tag(owner)?)),
        None => (stem, None),
    };
    let index = decimal(index).filter(|i| (1..=NODES_MAX).contains(i))?;
    debug_assert!(owner.is_none_or(|o| image_name(index, &o) == name));
    let disks = path.parent()?;
    if disks.file_name()? != "disks" {
        return None;
    }
    Some((disks.parent()?.to_path_buf(), index, owner))
}

/// Node `i`'s mount point in the run directory `dir` (as `corum chaos` makes it).
fn mount_point(dir: &Path, i: u32) -> PathBuf {
    super::cluster_dir(dir).join(format!("node{i}"))
}

/// The device (`major:minor`) and the mount point of a line of `/proc/self/mountinfo` (the
/// mount point with the kernel's octal escapes of space, tab, newline and backslash undone).
pub fn parse_mountinfo_line(line: &str) -> Option<((u32, u32), PathBuf)> {
    let mut fields = line.split(' ');
    let device = fields.nth(2)?;
    let (major, minor) = device.split_once(':')?;
    let device = (decimal(major)?, decimal(minor)?);
    let escaped = fields.nth(1)?;
    let mut bytes = Vec::with_capacity(escaped.len());
    let raw = escaped.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        let octal = raw
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (raw[i], octal) {
            (b'\\', Some(d)) => {
                bytes.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                bytes.push(b);
                i += 1;
            }
        }
    }
    use std::os::unix::ffi::OsStringExt;
    Some((device, PathBuf::from(std::ffi::OsString::from_vec(bytes))))
}

/// The directory of a `corum chaos` run from its arguments (`--dir DIR` or `--dir=DIR`, made
/// absolute against its working directory; by default [`super::default_dir`]), or `None` if
/// the arguments are not a `corum ... chaos` run, or are a `--cleanup` (which owns nothing).
/// Any program whose name starts with `corum` and any argument `chaos` count: a sweep errs on
/// the side of leaving things alone.
pub fn chaos_dir_of(argv: &[String], cwd: Option<&Path>, pid: u32) -> Option<PathBuf> {
    let program = Path::new(argv.first()?).file_name()?.to_str()?;
    if !program.starts_with("corum")
        || !argv[1..].iter().any(|a| a == "chaos")
        || argv.iter().any(|a| a == "--cleanup")
    {
        return None;
    }
    let mut dir = None;
    for (i, a) in argv.iter().enumerate() {
        if a == "--dir" {
            dir = argv.get(i + 1).map(PathBuf::from);
        } else if let Some(d) = a.strip_prefix("--dir=") {
            dir = Some(PathBuf::from(d));
        }
    }
    let dir = dir.unwrap_or_else(|| super::default_dir(pid));
    Some(match cwd {
        Some(cwd) if dir.is_relative() => cwd.join(dir),
        _ => dir,
    })
}

/// A process as the sweep sees it.
#[derive(Clone, Debug)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub start_ticks: u64,
    /// Its start on the wall clock (boot time + start ticks).
    pub started: SystemTime,
    pub zombie: bool,
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// Its network namespace's (device, inode).
    pub netns: Option<(u64, u64)>,
    /// Its run directory if it is a `corum chaos` run ([`chaos_dir_of`], canonical).
    pub chaos_dir: Option<PathBuf>,
}

impl Proc {
    /// Whether its arguments or its working directory name `dir` or a path under it.
    fn refers_to(&self, dir: &Path) -> bool {
        let text = dir.display().to_string();
        let under = format!("{text}/");
        self.argv.iter().any(|a| a == &text || a.contains(&under))
            || self.cwd.as_deref().is_some_and(|c| c.starts_with(dir))
    }
}

/// Every process of the host (those that exit while being read are left out).
fn processes() -> Vec<Proc> {
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime ").and_then(|b| b.trim().parse().ok()))
        })
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|&h| h > 0)
        .unwrap_or(100);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut procs = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(decimal) else {
            continue;
        };
        let dir = entry.path();
        let Some(stat) = std::fs::read_to_string(dir.join("stat")).ok() else {
            continue;
        };
        let Some((state, start_ticks)) = parse_stat(&stat) else {
            continue;
        };
        let ppid = stat[stat.rfind(')').unwrap_or(0) + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let argv: Vec<String> = std::fs::read(dir.join("cmdline"))
            .unwrap_or_default()
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let cwd = std::fs::read_link(dir.join("cwd")).ok();
        let netns = std::fs::metadata(dir.join("ns/net"))
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let chaos_dir = chaos_dir_of(&argv, cwd.as_deref(), pid)
            .map(|d| std::fs::canonicalize(&d).unwrap_or(d));
        procs.push(Proc {
            pid,
            ppid,
            start_ticks,
            started: SystemTime::UNIX_EPOCH
                + Duration::from_secs(boot)
                + Duration::from_millis(start_ticks * 1000 / hz),
            zombie: state == 'Z',
            argv,
            cwd,
            netns,
            chaos_dir,
        });
    }
    procs
}

/// A run's network parts left on the host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetLeft {
    pub tag: u32,
    pub namespaces: BTreeSet<u32>,
    pub veths: BTreeSet<u32>,
    pub bridge: bool,
}

/// A run's blkio cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupLeft {
    pub pid: u32,
    pub path: PathBuf,
    /// Its directory's modification time: never earlier than its creation.
    pub made: SystemTime,
}

/// A run's loop devices and mounts, in its directory `dir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskSet {
    pub dir: PathBuf,
    /// From the images' names; `None` for an older build's (`node<i>.ext4`).
    pub owner: Option<Owner>,
    /// Node index → `/dev/loopN`, and its `major:minor`.
    pub devices: BTreeMap<u32, (PathBuf, (u32, u32))>,
    /// Node index → mounts of its device on its mount point (one mount is the usual).
    pub mounts: BTreeMap<u32, usize>,
    /// Mounts of these devices elsewhere (someone's): the device is then left attached.
    pub foreign: Vec<(PathBuf, PathBuf)>,
    /// For an older build's disks: the newest modification time of the images (`None`: none
    /// could be read).
    pub changed: Option<SystemTime>,
}

/// What one run left, grouped by owner (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Run {
    /// The pid of the process that made it, when known.
    pub pid: Option<u32>,
    pub net: Option<NetLeft>,
    pub cgroup: Option<CgroupLeft>,
    pub disks: Vec<DiskSet>,
}

impl Run {
    /// How the report names it.
    pub fn label(&self) -> String {
        match (self.pid, &self.net, self.disks.first()) {
            (Some(pid), _, _) => format!("run {pid}"),
            (None, Some(net), _) => format!("run cc{}", net.tag),
            (None, None, Some(set)) => format!("the run in {}", set.dir.display()),
            (None, None, None) => "a run".to_owned(),
        }
    }
}

/// Everything of `corum chaos` runs on the host, live or dead.
#[derive(Clone, Debug, Default)]
pub struct Found {
    pub nets: BTreeMap<u32, NetLeft>,
    pub cgroups: Vec<CgroupLeft>,
    pub disks: Vec<DiskSet>,
}

fn names_in(dir: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Lists what runs made (the first step of the module doc).
fn find() -> Found {
    let mut found = Found::default();
    for name in names_in(NETNS_DIR)
        .iter()
        .chain(&names_in("/sys/class/net"))
    {
        let Some((tag, part)) = parse_net_name(name) else {
            continue;
        };
        let net = found.nets.entry(tag).or_insert_with(|| NetLeft {
            tag,
            ..NetLeft::default()
        });
        match part {
            NetPart::Namespace(i) => net.namespaces.insert(i),
            NetPart::Veth(i) => net.veths.insert(i),
            NetPart::Bridge => {
                net.bridge = true;
                true
            }
        };
    }
    for name in names_in(BLKIO_ROOT) {
        if let Some(pid) = parse_cgroup_name(&name) {
            let path = Path::new(BLKIO_ROOT).join(&name);
            let made = mtime(&path).unwrap_or(SystemTime::UNIX_EPOCH);
            found.cgroups.push(CgroupLeft { pid, path, made });
        }
    }
    let mounts: Vec<((u32, u32), PathBuf)> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(parse_mountinfo_line)
        .collect();
    let mut sets: BTreeMap<(PathBuf, Option<Owner>), DiskSet> = BTreeMap::new();
    for name in names_in("/sys/block") {
        if !name.starts_with("loop") {
            continue;
        }
        let sys = Path::new("/sys/block").join(&name);
        let read = |file: &str| std::fs::read_to_string(sys.join(file)).ok();
        let (Some(backing), Some(dev)) = (read("loop/backing_file"), read("dev")) else {
            continue; // not attached
        };
        if read("loop/autoclear").is_some_and(|a| a.trim() == "1") {
            continue; // `mount -o loop`'s, not a run's
        }
        let backing = backing.trim_end_matches('\n');
        let Some((dir, index, owner)) = parse_image_path(backing) else {
            continue;
        };
        let Some(numbers) = dev
            .trim()
            .split_once(':')
            .and_then(|(a, b)| Some((decimal(a)?, decimal(b)?)))
        else {
            continue;
        };
        let set = sets.entry((dir.clone(), owner)).or_insert_with(|| DiskSet {
            dir: dir.clone(),
            owner,
            devices: BTreeMap::new(),
            mounts: BTreeMap::new(),
            foreign: Vec::new(),
            changed: None,
        });
        if owner.is_none() {
            set.changed = set.changed.max(mtime(Path::new(backing)));
        }
        set.devices
            .insert(index, (Path::new("/dev").join(&name), numbers));
        for (device, point) in &mounts {
            if *device != numbers {
                continue;
            }
            if *point == mount_point(&dir, index) {
                *set.mounts.entry(index).or_default() += 1;
            } else {
                set.foreign
                    .push((Path::new("/dev").join(&name), point.clone()));
            }
        }
    }
    found.disks = sets.into_values().collect();
    found
}

/// Groups what was found into runs, one per owner (see the module doc); `tag_is_pid` when
/// `pid_max` is at most [`TAG_MODULUS`].
pub fn group(found: Found, tag_is_pid: bool) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    fn by_pid(runs: &mut Vec<Run>, pid: u32) -> &mut Run {
        match runs.iter().position(|r| r.pid == Some(pid)) {
            Some(i) => &mut runs[i],
            None => {
                runs.push(Run {
                    pid: Some(pid),
                    ..Run::default()
                });
                runs.last_mut().expect("just pushed")
            }
        }
    }
    let mut ownerless = Vec::new();
    for set in found.disks {
        match set.owner {
            Some(owner) => by_pid(&mut runs, owner.pid).disks.push(set),
            None => ownerless.push(set),
        }
    }
    for cgroup in found.cgroups {
        let pid = cgroup.pid;
        by_pid(&mut runs, pid).cgroup = Some(cgroup);
    }
    for (tag, net) in found.nets {
        let matching: Vec<usize> = (0..runs.len())
            .filter(|&i| runs[i].pid.is_some_and(|p| p % TAG_MODULUS == tag))
            .collect();
        let run = if tag_is_pid {
            by_pid(&mut runs, tag)
        } else if let [i] = matching[..] {
            &mut runs[i]
        } else {
            runs.push(Run::default());
            runs.last_mut().expect("just pushed")
        };
        run.net = Some(net);
    }
    runs.extend(ownerless.into_iter().map(|set| Run {
        disks: vec![set],
        ..Run::default()
    }));
    runs
}

/// Why `run`'s owner may be alive (see the module doc), or `None`: it is dead. `me` is the
/// sweeping process; `now` the wall clock.
pub fn owner_alive(run: &Run, procs: &[Proc], me: u32, now: SystemTime) -> Option<String> {
    let others = || procs.iter().filter(|p| p.pid != me && !p.zombie);
    for set in &run.disks {
        let dir = set.dir.display();
        if let Some(o) = set.owner {
            if others().any(|p| p.pid == o.pid && p.start_ticks == o.start_ticks) {
                return Some(format!("its owner, pid {}, runs", o.pid));
            }
        }
        if let Some(p) = others().find(|p| p.chaos_dir.as_deref() == Some(&set.dir)) {
            return Some(format!("corum chaos (pid {}) runs in {dir}", p.pid));
        }
        if set.owner.is_some() {
            continue;
        }
        // An older build's disks: alive while anything points at them.
        if let Some(p) = others().find(|p| p.refers_to(&set.dir)) {
            return Some(format!("pid {} uses {dir}", p.pid));
        }
        let quiet = set
            .changed
            .and_then(|c| now.duration_since(c).ok())
            .is_some_and(|age| age >= LEGACY_QUIET);
        if !quiet {
            return Some(format!(
                "{dir} holds images of an older build (no owner in their names) that changed \
                 less than {} s ago or cannot be read",
                LEGACY_QUIET.as_secs()
            ));
        }
    }
    if let Some(c) = &run.cgroup {
        if let Some(p) = others().find(|p| p.pid == c.pid && p.started <= c.made + START_SLACK) {
            return Some(format!(
                "pid {}, which made {}, runs",
                p.pid,
                c.path.display()
            ));
        }
    }
    if let Some(net) = &run.net {
        if let Some(p) = others().find(|p| p.chaos_dir.is_some() && p.pid % TAG_MODULUS == net.tag)
        {
            return Some(format!(
                "corum chaos (pid {}) runs with tag {}",
                p.pid, net.tag
            ));
        }
    }
    None
}

/// The processes to kill before `run`'s mounts and namespaces can go: those in its
/// namespaces (`netns`: their (device, inode)) and those whose arguments or working directory
/// name its `cluster` directory; never `me`, its ancestors, pid 1 or a `corum chaos` process.
pub fn victims(run: &Run, procs: &[Proc], me: u32, netns: &[(u64, u64)]) -> Vec<u32> {
    let mut spared = BTreeSet::from([1, me]);
    let mut at = me;
    while let Some(p) = procs.iter().find(|p| p.pid == at) {
        if !spared.insert(p.ppid) {
            break;
        }
        at = p.ppid;
    }
    procs
        .iter()
        .filter(|p| !spared.contains(&p.pid) && !p.zombie && p.chaos_dir.is_none())
        .filter(|p| {
            p.netns.is_some_and(|n| netns.contains(&n))
                || run
                    .disks
                    .iter()
                    .any(|s| p.refers_to(&super::cluster_dir(&s.dir)))
        })
        .map(|p| p.pid)
        .collect()
}

/// What was removed of one dead run, and what could not be.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub namespaces: usize,
    pub veths: usize,
    pub bridges: usize,
    pub mounts: usize,
    pub loop_devices: usize,
    pub cgroups: usize,
    pub killed: usize,
    pub errors: Vec<String>,
    /// The run directories left in place.
    pub dirs: Vec<PathBuf>,
}

impl Removed {
    /// `3 namespaces, 3 veth pairs, 1 bridge, ...` (kinds with none left out).
    pub fn summary(&self) -> String {
        let counts = [
            (self.namespaces, "namespace", "namespaces"),
            (self.veths, "veth pair", "veth pairs"),
            (self.bridges, "bridge", "bridges"),
            (self.mounts, "mount", "mounts"),
            (self.loop_devices, "loop device", "loop devices"),
            (self.cgroups, "blkio cgroup", "blkio cgroups"),
            (self.killed, "process killed", "processes killed"),
        ];
        let parts: Vec<String> = counts
            .iter()
            .filter(|(n, ..)| *n > 0)
            .map(|&(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
            .collect();
        if parts.is_empty() {
            "nothing".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// What the sweep did with one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Left alone, and why its owner may be alive.
    Live(String),
    Removed(Removed),
}

/// One run the sweep met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Swept {
    pub label: String,
    pub outcome: Outcome,
}

impl Swept {
    /// The report's lines: one for the run, one per error.
    pub fn lines(&self) -> Vec<String> {
        match &self.outcome {
            Outcome::Live(why) => vec![format!("corum chaos: left {} alone: {why}", self.label)],
            Outcome::Removed(r) => {
                let mut line = format!(
                    "corum chaos: removed the leftovers of {} (dead): {}",
                    self.label,
                    r.summary()
                );
                for dir in &r.dirs {
                    line.push_str(&format!("; its files stay in {}", dir.display()));
                }
                let mut lines = vec![line];
                lines.extend(
                    r.errors
                        .iter()
                        .map(|e| format!("corum chaos: {}: {e}", self.label)),
                );
                lines
            }
        }
    }
}

/// Calls `f` until it succeeds or [`WAIT_MAX`] passes; its last error otherwise.
fn retry(mut f: impl FnMut() -> anyhow::Result<String>) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT_MAX;
    loop {
        match f() {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Whether `pid` is gone or a zombie (what it held is released).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat(&s))
        .is_none_or(|(state, _)| state == 'Z')
}

/// Removes a dead run's parts in the order of the module doc.
fn remove(left: &Run, procs: &[Proc], me: u32) -> Removed {
    let mut r = Removed::default();
    let namespaces: Vec<String> = left.net.as_ref().map_or(Vec::new(), |n| {
        n.namespaces
            .iter()
            .map(|&i| namespace_name(n.tag, i))
            .collect()
    });
    let ids: Vec<(u64, u64)> = namespaces
        .iter()
        .filter_map(|ns| std::fs::metadata(Path::new(NETNS_DIR).join(ns)).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect();
    let killed = victims(left, procs, me, &ids);
    for &pid in &killed {
        let Ok(id) = libc::pid_t::try_from(pid) else {
            continue;
        };
        // SAFETY: kill(2) has no memory-safety preconditions. The pid was read from /proc
        // just now, is in the dead run's namespace or names its directory, and is not a zombie.
        if unsafe { libc::kill(id, libc::SIGKILL) } == 0 {
            r.killed += 1;
        } else {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                r.errors.push(format!("killing pid {pid}: {e}"));
            }
        }
    }
    let deadline = Instant::now() + WAIT_MAX;
    while !killed.iter().all(|&p| exited(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for set in &left.disks {
        let mut busy = BTreeSet::new();
        for (&i, &count) in &set.mounts {
            let point = mount_point(&set.dir, i).display().to_string();
            for _ in 0..count {
                match retry(|| run("umount", &[&point])) {
                    Ok(()) => r.mounts += 1,
                    Err(e) => {
                        busy.insert(i);
                        r.errors.push(format!("{e:#}"));
                    }
                }
            }
        }
        for (&i, (device, _)) in &set.devices {
            if let Some((_, point)) = set.foreign.iter().find(|(d, _)| d == device) {
                r.errors.push(format!(
                    "left {} attached: it is also mounted on {}",
                    device.display(),
                    point.display()
                ));
                continue;
            }
            if busy.contains(&i) {
                continue;
            }
            match retry(|| run("losetup", &["-d", &device.display().to_string()])) {
                Ok(()) => r.loop_devices += 1,
                Err(e) => r.errors.push(format!("{e:#}")),
            }
        }
        if set.dir.exists() {
            r.dirs.push(set.dir.clone());
        }
    }
    if let Some(c) = &left.cgroup {
        let root = Path::new(BLKIO_ROOT).join("cgroup.procs");
        let members = std::fs::read_to_string(c.path.join("cgroup.procs")).unwrap_or_default();
        for pid in members.split_whitespace() {
            // A member that exited meanwhile is gone from the cgroup already.
            if let Err(e) = std::fs::write(&root, pid) {
                if e.raw_os_error() != Some(libc::ESRCH) {
                    r.errors
                        .push(format!("moving pid {pid} to the root blkio cgroup: {e}"));
                }
            }
        }
        let path = c.path.display().to_string();
        match retry(|| run("rmdir", &[&path])) {
            Ok(()) => r.cgroups += 1,
            Err(e) => r.errors.push(format!("{e:#}")),
        }
    }
    if let Some(net) = &left.net {
        for &i in &net.veths {
            match run("ip", &["link", "del", &veth_name(net.tag, i)]) {
                Ok(_) => r.veths += 1,
                Err(e) => r.errors.push(format!("{e:#}")),
            }
        }
        for ns in &namespaces {
            match run("ip", &["netns", "del", ns]) {
                Ok(_) => r.namespaces += 1,
                Err(e) => r.errors.push(format!("{e:#}")),
            }
        }
        if net.bridge {
            match run("ip", &["link", "del", &bridge_name(net.tag)]) {
                Ok(_) => r.bridges += 1,
                Err(e) => r.errors.push(format!("{e:#}")),
            }
        }
    }
    r
}

/// Finds every run's leftovers on the host and removes those of dead runs (this process,
/// `me`, is never an owner). Needs root.
pub fn sweep(me: u32) -> Vec<Swept> {
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(u32::MAX);
    let runs = group(find(), pid_max <= TAG_MODULUS);
    let mut swept = Vec::new();
    for run in runs {
        // Read again for each run: a run's owner may have started or exited meanwhile.
        let procs = processes();
        let outcome = match owner_alive(&run, &procs, me, SystemTime::now()) {
            Some(why) => Outcome::Live(why),
            None => Outcome::Removed(remove(&run, &procs, me)),
        };
        swept.push(Swept {
            label: run.label(),
            outcome,
        });
    }
    swept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name the network makes parses back to its tag and part, and nothing else does:
    /// another tool's names, a tag of 100000 or more, leading zeros, node 0 or 10, the
    /// namespace-side veth end.
    #[test]
    fn network_names_parse_back_exactly() {
        for tag in [0, 7, 5409, 99_999] {
            assert_eq!(
                parse_net_name(&bridge_name(tag)),
                Some((tag, NetPart::Bridge))
            );
            for i in 1..=9 {
                assert_eq!(
                    parse_net_name(&namespace_name(tag, i)),
                    Some((tag, NetPart::Namespace(i)))
                );
                assert_eq!(
                    parse_net_name(&veth_name(tag, i)),
                    Some((tag, NetPart::Veth(i)))
                );
            }
        }
        for name in [
            "cq5409x0a",
            "cc5409",
            "ccn1",
            "cc5409n",
            "cc5409n0",
            "cc5409n10",
            "cc5409x1",
            "cc05409n1",
            "cc100000n1",
            "cc5409p1",
            "cc5409brx",
            "cc5409v01",
            "eth0",
            "lo",
            "cc5409né",
            "cc99999999999n1",
        ] {
            assert_eq!(parse_net_name(name), None, "{name}");
        }
    }

    /// Cgroup names give their pid; an owner tag gives pid and start time; anything else gives
    /// nothing.
    #[test]
    fn cgroup_names_and_owner_tags_parse_exactly() {
        assert_eq!(parse_cgroup_name("corum-chaos-25054"), Some(25054));
        for name in [
            "corum-chaos-",
            "corum-chaos-0",
            "corum-chaos-x1",
            "corum-chaos-012",
            "x",
        ] {
            assert_eq!(parse_cgroup_name(name), None, "{name}");
        }
        let owner = Owner {
            pid: 25054,
            start_ticks: 3_141_592,
        };
        assert_eq!(owner.tag(), "25054-3141592");
        assert_eq!(Owner::parse_tag(&owner.tag()), Some(owner));
        for text in [
            "",
            "25054",
            "25054-",
            "-314",
            "0-1",
            "25054--1",
            "a-b",
            "25054-314-1",
            "025054-1",
            "25054 314",
            "4294967296-1",
        ] {
            assert_eq!(Owner::parse_tag(text), None, "{text:?}");
        }
        let me = Owner::me().unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.start_ticks > 0);
    }

    /// The start time is field 22 of a stat line, also when the command name holds spaces and
    /// parentheses.
    #[test]
    fn stat_lines_give_state_and_start() {
        let line = "4242 (corum (x) y) S 1 4242 4242 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 9 0 \
                    777123 1000 50 18446744073709551615";
        assert_eq!(parse_stat(line), Some(('S', 777_123)));
        assert_eq!(parse_stat("1 (init) Z 0"), None);
    }

    /// Image paths give the run directory, the node and the owner; a deleted image still
    /// does; an older build's name gives no owner; other loop images give nothing.
    #[test]
    fn image_paths_give_the_run_directory_and_owner() {
        let dir = PathBuf::from("/tmp/.tmpb0pIgj/chaos");
        let owner = Owner {
            pid: 13325,
            start_ticks: 3_262_001,
        };
        assert_eq!(
            parse_image_path("/tmp/.tmpb0pIgj/chaos/disks/node2.13325-3262001.ext4"),
            Some((dir.clone(), 2, Some(owner)))
        );
        assert_eq!(
            parse_image_path("/tmp/.tmpb0pIgj/chaos/disks/node3.13325-3262001.ext4 (deleted)"),
            Some((dir.clone(), 3, Some(owner)))
        );
        assert_eq!(
            parse_image_path("/tmp/.tmpb0pIgj/chaos/disks/node2.ext4"),
            Some((dir, 2, None))
        );
        for p in [
            "tmp/chaos/disks/node1.ext4",
            "/tmp/chaos/images/node1.ext4",
            "/tmp/chaos/disks/node0.ext4",
            "/tmp/chaos/disks/node1.img",
            "/tmp/chaos/disks/node1.13325.ext4",
            "/tmp/chaos/disks/node1.x-1.ext4",
            "/tmp/chaos/disks/node1.0-1.ext4",
            "/var/lib/snapd/snaps/core.snap",
        ] {
            assert_eq!(parse_image_path(p), None, "{p}");
        }
    }

    /// Mountinfo lines give the device and the unescaped mount point.
    #[test]
    fn mountinfo_lines_give_device_and_point() {
        assert_eq!(
            parse_mountinfo_line(
                "49 27 7:0 / /tmp/.tmpb0pIgj/chaos/cluster/node1 rw,relatime - ext4 /dev/loop0 rw"
            ),
            Some(((7, 0), PathBuf::from("/tmp/.tmpb0pIgj/chaos/cluster/node1")))
        );
        assert_eq!(
            parse_mountinfo_line("50 27 7:12 / /var/tmp/a\\040b\\134c rw - ext4 /dev/loop12 rw"),
            Some(((7, 12), PathBuf::from("/var/tmp/a b\\c")))
        );
        assert_eq!(parse_mountinfo_line("garbage"), None);
    }

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    /// A `corum chaos` run is known by its arguments, with its directory (given, relative,
    /// or the default); `--cleanup` and other programs are not runs.
    #[test]
    fn chaos_runs_are_known_by_their_arguments() {
        let cwd = Path::new("/work");
        assert_eq!(
            chaos_dir_of(
                &argv("/x/target/debug/corum chaos --dir /tmp/t/chaos"),
                None,
                5
            ),
            Some(PathBuf::from("/tmp/t/chaos"))
        );
        assert_eq!(
            chaos_dir_of(&argv("corum chaos --rounds 3 --dir=runs/a"), Some(cwd), 5),
            Some(PathBuf::from("/work/runs/a"))
        );
        assert_eq!(
            chaos_dir_of(&argv("corum chaos --rounds 3"), Some(cwd), 5409),
            Some(PathBuf::from("/var/tmp/corum-chaos-5409"))
        );
        for a in [
            "corum chaos --cleanup",
            "corum run --config /tmp/t/chaos/cluster/node1.properties",
            "/x/deps/tools-1234 chaos:: --test-threads 1",
            "sudo corum chaos",
            "",
        ] {
            assert_eq!(chaos_dir_of(&argv(a), Some(cwd), 5), None, "{a}");
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);

    fn proc(pid: u32, start_ticks: u64, args: &str) -> Proc {
        let argv = argv(args);
        Proc {
            pid,
            ppid: 1,
            start_ticks,
            started: SystemTime::UNIX_EPOCH + HOUR + Duration::from_secs(start_ticks),
            zombie: false,
            chaos_dir: chaos_dir_of(&argv, None, pid),
            argv,
            cwd: None,
            netns: None,
        }
    }

    fn disks(dir: &str, owner: Option<Owner>, changed: SystemTime) -> DiskSet {
        DiskSet {
            dir: PathBuf::from(dir),
            owner,
            devices: BTreeMap::from([(1, (PathBuf::from("/dev/loop0"), (7, 0)))]),
            mounts: BTreeMap::from([(1, 1)]),
            foreign: Vec::new(),
            changed: Some(changed),
        }
    }

    /// Parts group by owner pid: the cgroup and the disks named after one pid, and the
    /// tag's network (the pid itself when pid_max is small; else the one run it matches);
    /// an older build's disks (no owner in their names) stand alone.
    #[test]
    fn parts_group_by_owner() {
        let t0 = SystemTime::UNIX_EPOCH;
        let owner = Owner {
            pid: 105_409,
            start_ticks: 9,
        };
        let found = Found {
            nets: BTreeMap::from([(
                5409,
                NetLeft {
                    tag: 5409,
                    namespaces: BTreeSet::from([1, 2, 3]),
                    veths: BTreeSet::from([1, 2, 3]),
                    bridge: true,
                },
            )]),
            cgroups: vec![CgroupLeft {
                pid: 105_409,
                path: PathBuf::from("/sys/fs/cgroup/blkio/corum-chaos-105409"),
                made: t0,
            }],
            disks: vec![
                disks("/tmp/a/chaos", Some(owner), t0),
                disks("/tmp/b/chaos", None, t0),
            ],
        };
        let runs = group(found.clone(), false);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].pid, Some(105_409));
        assert!(runs[0].net.is_some() && runs[0].cgroup.is_some());
        assert_eq!(runs[0].disks.len(), 1);
        assert_eq!(runs[0].label(), "run 105409");
        assert_eq!(runs[1].label(), "the run in /tmp/b/chaos");
        // With pid_max at most 100000, tag 5409 is pid 5409: a run of its own.
        let runs = group(found, true);
        assert_eq!(runs.len(), 3);
        assert_eq!(runs[1].pid, Some(5409));
        assert!(runs[1].net.is_some() && runs[0].net.is_none());
    }

    /// The owner rules of the module doc, one by one, including a reused pid.
    #[test]
    fn an_owner_is_alive_only_when_it_is_the_same_process() {
        let made = SystemTime::UNIX_EPOCH + HOUR + Duration::from_secs(100);
        let now = made + HOUR;
        let me = 1;
        let owner = Owner {
            pid: 500,
            start_ticks: 90,
        };
        let with_owner = Run {
            pid: Some(500),
            disks: vec![disks("/tmp/a/chaos", Some(owner), made)],
            ..Run::default()
        };
        // The owner runs: alive, whatever its arguments (a test process that made disks).
        assert!(owner_alive(&with_owner, &[proc(500, 90, "tools-1234")], me, now).is_some());
        // Its pid reused by a later process, even a chaos run: dead.
        let reuse = [proc(500, 91, "corum chaos --dir /tmp/z")];
        assert_eq!(owner_alive(&with_owner, &reuse, me, now), None);
        // A zombie owner, or the sweeping process itself, is not alive.
        let mut zombie = proc(500, 90, "corum chaos");
        zombie.zombie = true;
        assert_eq!(owner_alive(&with_owner, &[zombie], me, now), None);
        assert_eq!(
            owner_alive(&with_owner, &[proc(500, 90, "corum chaos")], 500, now),
            None
        );
        // A live run reusing the directory keeps it.
        let reusing = [proc(700, 200, "corum chaos --dir /tmp/a/chaos")];
        assert!(owner_alive(&with_owner, &reusing, me, now).is_some());

        // An older build's disks: alive while a chaos run's directory, a process's argument or an
        // image changed recently say so.
        let legacy = Run {
            disks: vec![disks("/tmp/b/chaos", None, made)],
            ..Run::default()
        };
        assert_eq!(owner_alive(&legacy, &[], me, now), None);
        assert!(owner_alive(&legacy, &[], me, made + Duration::from_secs(60)).is_some());
        let mut unreadable = legacy.clone();
        unreadable.disks[0].changed = None;
        assert!(owner_alive(&unreadable, &[], me, now).is_some());
        let node = proc(
            800,
            300,
            "corum run --config /tmp/b/chaos/cluster/node1.properties",
        );
        assert!(owner_alive(&legacy, &[node], me, now).is_some());
        let chaos = proc(801, 300, "corum chaos --dir /tmp/b/chaos");
        assert!(owner_alive(&legacy, &[chaos], me, now).is_some());
        let elsewhere = proc(
            802,
            300,
            "corum run --config /tmp/b/chaos2/cluster/node1.properties",
        );
        assert_eq!(owner_alive(&legacy, &[elsewhere], me, now), None);

        // The cgroup: its pid alive and started before it was made; a pid reused after is not.
        let cgroup = Run {
            pid: Some(25054),
            cgroup: Some(CgroupLeft {
                pid: 25054,
                path: PathBuf::from("/sys/fs/cgroup/blkio/corum-chaos-25054"),
                made,
            }),
            ..Run::default()
        };
        assert!(owner_alive(&cgroup, &[proc(25054, 99, "tools-1234")], me, now).is_some());
        assert_eq!(
            owner_alive(&cgroup, &[proc(25054, 200, "tools-1234")], me, now),
            None
        );

        // The network: a chaos run (not --cleanup, not another program) with the tag.
        let net = Run {
            net: Some(NetLeft {
                tag: 5409,
                bridge: true,
                ..NetLeft::default()
            }),
            ..Run::default()
        };
        assert!(owner_alive(&net, &[proc(105_409, 1, "corum chaos")], me, now).is_some());
        assert!(owner_alive(&net, &[proc(5409, 1, "corum chaos --rounds 2")], me, now).is_some());
        assert_eq!(
            owner_alive(&net, &[proc(5409, 1, "corum chaos --cleanup")], me, now),
            None
        );
        assert_eq!(
            owner_alive(&net, &[proc(5409, 1, "sleep 30")], me, now),
            None
        );
        assert_eq!(
            owner_alive(&net, &[proc(5410, 1, "corum chaos")], me, now),
            None
        );
    }

    /// The processes killed are those in the run's namespaces or naming its cluster
    /// directory; never a chaos run, the sweeper or its ancestors.
    #[test]
    fn victims_are_the_dead_runs_processes_only() {
        let run = Run {
            disks: vec![disks("/tmp/a/chaos", None, SystemTime::UNIX_EPOCH)],
            ..Run::default()
        };
        let mut in_ns = proc(10, 1, "sleep 600");
        in_ns.netns = Some((4, 4026532999));
        let node = proc(
            11,
            1,
            "corum run --config /tmp/a/chaos/cluster/node1.properties",
        );
        let mut cwd = proc(12, 1, "sleep 600");
        cwd.cwd = Some(PathBuf::from("/tmp/a/chaos/cluster/node3"));
        let other = proc(
            13,
            1,
            "corum run --config /tmp/a/chaos2/cluster/node1.properties",
        );
        let chaos = proc(14, 1, "corum chaos --dir /tmp/a/chaos/cluster/x");
        let mut shell = proc(15, 1, "bash");
        shell.cwd = Some(PathBuf::from("/tmp/a/chaos/cluster/node1"));
        let mut me = proc(16, 1, "corum chaos --cleanup");
        me.ppid = 15;
        let procs = [in_ns, node, cwd, other, chaos, shell, me];
        assert_eq!(
            victims(&run, &procs, 16, &[(4, 4026532999)]),
            vec![10, 11, 12]
        );
    }

    /// The report line counts each kind, singular or plural, and leaves out what there was
    /// none of.
    #[test]
    fn the_report_counts_what_was_removed() {
        let removed = Removed {
            namespaces: 3,
            veths: 3,
            bridges: 1,
            mounts: 3,
            loop_devices: 3,
            cgroups: 1,
            killed: 1,
            errors: vec!["`umount /x` failed".into()],
            dirs: vec![PathBuf::from("/tmp/a/chaos")],
        };
        let swept = Swept {
            label: "run 5409".into(),
            outcome: Outcome::Removed(removed),
        };
        assert_eq!(
            swept.lines(),
            vec![
                "corum chaos: removed the leftovers of run 5409 (dead): 3 namespaces, 3 veth \
                 pairs, 1 bridge, 3 mounts, 3 loop devices, 1 blkio cgroup, 1 process killed; \
                 its files stay in /tmp/a/chaos"
                    .to_owned(),
                "corum chaos: run 5409: `umount /x` failed".to_owned(),
            ]
        );
        assert_eq!(Removed::default().summary(), "nothing");
    }

    proptest::proptest! {
        /// The names a run makes parse back to what made them.
        #[test]
        fn made_names_parse_back(
            tag in 0..TAG_MODULUS,
            i in 1..=NODES_MAX,
            pid in 1..=u32::MAX,
            start_ticks: u64,
            dir in "(/[a-z0-9._]{1,12}){1,4}",
        ) {
            proptest::prop_assert_eq!(parse_net_name(&namespace_name(tag, i)), Some((tag, NetPart::Namespace(i))));
            proptest::prop_assert_eq!(parse_net_name(&veth_name(tag, i)), Some((tag, NetPart::Veth(i))));
            proptest::prop_assert_eq!(parse_net_name(&bridge_name(tag)), Some((tag, NetPart::Bridge)));
            proptest::prop_assert_eq!(parse_cgroup_name(&format!("{CGROUP_PREFIX}{pid}")), Some(pid));
            let owner = Owner { pid, start_ticks };
            let image = format!("{dir}/disks/{}", image_name(i, &owner));
            proptest::prop_assert_eq!(parse_image_path(&image), Some((PathBuf::from(&dir), i, Some(owner))));
        }

        /// No input makes a parser panic (names and lines come from the kernel and from other
        /// programs).
        #[test]
        fn parsers_take_any_input(text in "\\PC{0,64}", bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let lossy = String::from_utf8_lossy(&bytes).into_owned();
            for t in [&text, &lossy] {
                let _ = parse_net_name(t);
                let _ = parse_cgroup_name(t);
                let _ = parse_image_path(t);
                let _ = parse_mountinfo_line(t);
                let _ = parse_stat(t);
                let _ = Owner::parse_tag(t);
                let _ = chaos_dir_of(&argv(t), Some(Path::new("/")), 1);
            }
        }
    }
}
