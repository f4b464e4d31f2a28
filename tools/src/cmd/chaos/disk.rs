//! The disks of `corum chaos`: per node a small ext4 filesystem on a loop device, mounted as
//! the node's `metadata.log.dir`, which the `disk-full` fault fills (a filler file allocated
//! up to the last free block) and heals (the filler removed); and one blkio cgroup (cgroup v1)
//! per run, into which the `slow-disk` fault moves a node's process with a write IOPS and
//! bandwidth limit on its loop device (bio-level throttling: it applies to the node's
//! O_DIRECT writes and O_DSYNC commits, submitted from its own threads), healed by lifting the
//! limit and moving the process back to the root cgroup.
//!
//! Everything is made with `losetup`, `mkfs.ext4`, `mount` and the cgroup filesystem, and
//! removed by [`Disks::remove`] (also on drop) or, after SIGINT/SIGTERM, by the commands of
//! [`Disks::cleanup`] that the signal thread runs once the nodes are killed. The images are
//! named after their maker's pid and start time ([`image_name`], [`Owner`]), so that once the
//! maker is SIGKILLed the sweep of `corum chaos` (`chaos/sweep.rs`) can tell what its loop
//! devices hold from a live run's.
//!
//! What the kernel of this project's machine lacks: device-mapper (no `dm-delay` to delay or
//! `dm-flakey` to fail a disk's IO), so a slow fsync is the cgroup throttle's (which delays
//! every write bio of the process, not the flush alone).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;

/// The name of the filler file `disk-full` allocates in a node's filesystem.
pub const FILLER: &str = "chaos-filler";

/// Where cgroup v1's blkio controller is mounted.
pub const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";

/// The run's blkio cgroup is this followed by the maker's pid.
pub const CGROUP_PREFIX: &str = "corum-chaos-";

/// Node `i`'s image file (1-based) in the images' directory, named after its maker `owner`:
/// `node<i>.<pid>-<start_ticks>.ext4`. The kernel keeps a loop device's backing file name for
/// as long as the device is attached (`/sys/block/loopN/loop/backing_file`, with ` (deleted)`
/// once the file is unlinked), so the owner of a killed run's loop device stays known even
/// when its directory was removed (a test's temporary directory, `rm -rf`), which a file
/// beside the images would not survive.
pub fn image_name(i: u32, owner: &Owner) -> String {
    format!("node{i}.{}.ext4", owner.tag())
}

/// The process that made a set of disks: its pid and its start time in clock ticks after boot
/// (field 22 of `/proc/<pid>/stat`), which a later process given the same pid cannot share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Owner {
    pub pid: u32,
    pub start_ticks: u64,
}

impl Owner {
    /// This process.
    pub fn me() -> anyhow::Result<Owner> {
        let stat = std::fs::read_to_string("/proc/self/stat").context("reading /proc/self/stat")?;
        let (_, start_ticks) = parse_stat(&stat).context("parsing /proc/self/stat")?;
        Ok(Owner {
            pid: std::process::id(),
            start_ticks,
        })
    }

    /// `<pid>-<start_ticks>`, as in an image's name.
    pub fn tag(&self) -> String {
        format!("{}-{}", self.pid, self.start_ticks)
    }

    /// Parses what [`Owner::tag`] wrote: two decimal numbers as `format!` writes them, a
    /// non-zero pid first; `None` for anything else (a foreign name claims nothing).
    pub fn parse_tag(text: &str) -> Option<Owner> {
        let (pid, start) = text.split_once('-')?;
        let number = |s: &str| -> Option<u64> {
            let ok = !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_digit())
                && (s == "0" || !s.starts_with('0'));
            ok.then(|| s.parse().ok()).flatten()
        };
        let pid = u32::try_from(number(pid)?).ok().filter(|&p| p > 0)?;
        Some(Owner {
            pid,
            start_ticks: number(start)?,
        })
    }
}

/// The state (`R`, `S`, `Z`, ...) and the start time in clock ticks after boot of a process,
/// from its `/proc/<pid>/stat` (the command name, field 2, is in parentheses and may hold
/// spaces and parentheses itself: the fields after it start after the last `)`).
pub fn parse_stat(stat: &str) -> Option<(char, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Fields 4 to 21 come between the state (3) and the start time (22).
    let start = fields.nth(22 - 4)?.parse().ok()?;
    Some((state, start))
}

/// Runs `program args` (`ip`, `nft`, `losetup`, `mount`, ...), returning its stdout, failing
/// with its stderr.
pub(crate) fn run(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {program} {}", args.join(" ")))?;
    anyhow::ensure!(
        out.status.success(),
        "`{program} {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Checks what the disk faults need of the host: `losetup`, `mkfs.ext4` and `mount`, loop
/// devices, and cgroup v1's blkio throttle.
pub fn check_host() -> anyhow::Result<()> {
    for (tool, package) in [
        ("losetup", "util-linux"),
        ("mkfs.ext4", "e2fsprogs"),
        ("mount", "mount"),
    ] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        anyhow::ensure!(
            found,
            "corum chaos needs `{tool}` on the PATH (Debian: apt-get install {package})"
        );
    }
    let throttle = Path::new(BLKIO_ROOT).join("blkio.throttle.write_iops_device");
    anyhow::ensure!(
        throttle.exists(),
        "corum chaos needs cgroup v1's blkio controller at {BLKIO_ROOT} with the throttle \
         ({} is missing)",
        throttle.display()
    );
    Ok(())
}

/// One node's loop-mounted filesystem.
#[derive(Debug)]
pub struct LoopFs {
    /// The image file backing the loop device.
    pub image: PathBuf,
    /// `/dev/loopN`.
    pub device: PathBuf,
    /// The device's `major:minor`, as the blkio throttle files name it.
    pub dev_numbers: (u32, u32),
    /// Where it is mounted (the node's `metadata.log.dir`).
    pub mount: PathBuf,
    mounted: bool,
    attached: bool,
}

impl LoopFs {
    /// The filler file's path.
    pub fn filler(&self) -> PathBuf {
        self.mount.join(FILLER)
    }

    /// Allocates every free block of the filesystem to the filler file (fallocate, halving the
    /// length at each ENOSPC down to one block). Returns the bytes allocated.
    pub fn fill(&self) -> anyhow::Result<u64> {
        use std::os::fd::AsRawFd;
        let path = self.filler();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        let (free, block) = free_bytes(&self.mount)?;
        let mut len = free.max(block);
        let mut at = file.metadata().map(|m| m.len()).unwrap_or(0);
        let start = at;
        while len >= block {
            // SAFETY: fallocate on an fd this function owns, with a valid range.
            let rc = unsafe {
                libc::fallocate(file.as_raw_fd(), 0, at as libc::off_t, len as libc::off_t)
            };
            if rc == 0 {
                at += len;
                continue;
            }
            let e = std::io::Error::last_os_error();
            anyhow::ensure!(
                e.raw_os_error() == Some(libc::ENOSPC),
                "allocating {} bytes of {}: {e}",
                len,
                path.display()
            );
            len /= 2;
        }
        file.sync_all()
            .with_context(|| format!("syncing {}", path.display()))?;
        Ok(at - start)
    }

    /// Removes the filler file (space returns); not an error if there is none.
    pub fn unfill(&self) -> anyhow::Result<()> {
        match std::fs::remove_file(self.filler()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).with_context(|| format!("removing {}", self.filler().display())),
        }
    }

    /// Bytes free for the node (root: reserved blocks included) and the block size.
    pub fn free(&self) -> anyhow::Result<(u64, u64)> {
        free_bytes(&self.mount)
    }
}

/// Free bytes (`f_bfree`: root may use the reserved blocks too) and the block size.
fn free_bytes(path: &Path) -> anyhow::Result<(u64, u64)> {
    let stat = nix_statvfs(path)?;
    Ok((stat.0 * stat.1, stat.1))
}

/// (free blocks, fragment size) of the filesystem holding `path`.
fn nix_statvfs(path: &Path) -> anyhow::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).context("a path with a NUL")?;
    // SAFETY: statvfs writes into the zeroed struct; `c` is a valid NUL-terminated path.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    anyhow::ensure!(
        rc == 0,
        "statvfs {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
    Ok((s.f_bfree, s.f_frsize))
}

/// The loop filesystems of every node and the run's blkio cgroup (see the module doc).
#[derive(Debug, Default)]
pub struct Disks {
    pub nodes: Vec<LoopFs>,
    /// `/sys/fs/cgroup/blkio/corum-chaos-<tag>` once made.
    cgroup: Option<PathBuf>,
    /// The throttled device of the process in the cgroup, while `slow-disk` holds.
    throttled: Option<(u32, (u32, u32))>,
}

impl Disks {
    /// Makes, for each of `mounts`, an image of `mib` MiB in `images`, a loop device on it, an
    /// ext4 filesystem (no blocks reserved for root) and the mount; then the blkio cgroup
    /// named after `tag` (this process's pid). The images are named after this process
    /// ([`image_name`]). On error everything made so far is removed.
    pub fn create(images: &Path, mounts: &[PathBuf], mib: u64, tag: u32) -> anyhow::Result<Disks> {
        let mut disks = Disks::default();
        disks
            .build(images, mounts, mib, tag)
            .inspect_err(|_| disks.remove())?;
        Ok(disks)
    }

    fn build(
        &mut self,
        images: &Path,
        mounts: &[PathBuf],
        mib: u64,
        tag: u32,
    ) -> anyhow::Result<()> {
        std::fs::create_dir_all(images)
            .with_context(|| format!("creating {}", images.display()))?;
        let owner = Owner::me()?;
        for (i, mount) in mounts.iter().enumerate() {
            let image = images.join(image_name(i as u32 + 1, &owner));
            let f = std::fs::File::create(&image)
                .with_context(|| format!("creating {}", image.display()))?;
            f.set_len(mib << 20)
                .with_context(|| format!("sizing {}", image.display()))?;
            drop(f);
            let device = PathBuf::from(
                run(
                    "losetup",
                    &["--find", "--show", &image.display().to_string()],
                )?
                .trim(),
            );
            let meta =
                std::fs::metadata(&device).with_context(|| format!("stat {}", device.display()))?;
            anyhow::ensure!(
                meta.file_type().is_block_device(),
                "{} is not a block device",
                device.display()
            );
            let rdev = meta.rdev();
            self.nodes.push(LoopFs {
                image,
                device: device.clone(),
                dev_numbers: (libc::major(rdev), libc::minor(rdev)),
                mount: mount.clone(),
                mounted: false,
                attached: true,
            });
            let dev = device.display().to_string();
            run(
                "mkfs.ext4",
                &["-q", "-F", "-m", "0", "-L", "corum-chaos", &dev],
            )?;
            std::fs::create_dir_all(mount)
                .with_context(|| format!("creating {}", mount.display()))?;
            run("mount", &[&dev, &mount.display().to_string()])?;
            self.nodes.last_mut().expect("just pushed").mounted = true;
        }
        let cgroup = PathBuf::from(format!("{BLKIO_ROOT}/{CGROUP_PREFIX}{tag}"));
        std::fs::create_dir(&cgroup).with_context(|| format!("creating {}", cgroup.display()))?;
        self.cgroup = Some(cgroup);
        Ok(())
    }

    /// Node `i`'s filesystem (1-based).
    pub fn node(&self, i: u32) -> &LoopFs {
        &self.nodes[i as usize - 1]
    }

    /// Moves process `pid` (node `i`'s) into the cgroup and limits its writes to node `i`'s
    /// device to `iops` requests and `bps` bytes per second.
    pub fn throttle(&mut self, i: u32, pid: u32, iops: u32, bps: u64) -> anyhow::Result<()> {
        let cgroup = self.cgroup.clone().context("no blkio cgroup")?;
        let (major, minor) = self.node(i).dev_numbers;
        write_cgroup(
            &cgroup.join("blkio.throttle.write_iops_device"),
            &format!("{major}:{minor} {iops}"),
        )?;
        write_cgroup(
            &cgroup.join("blkio.throttle.write_bps_device"),
            &format!("{major}:{minor} {bps}"),
        )?;
        write_cgroup(&cgroup.join("cgroup.procs"), &pid.to_string())?;
        self.throttled = Some((pid, (major, minor)));
        Ok(())
    }

    /// Lifts the limit and moves the throttled process (if it still runs) back to the root
    /// cgroup.
    pub fn unthrottle(&mut self) -> anyhow::Result<()> {
        let Some((pid, (major, minor))) = self.throttled.take() else {
            return Ok(());
        };
        let cgroup = self.cgroup.clone().context("no blkio cgroup")?;
        for file in [
            "blkio.throttle.write_iops_device",
            "blkio.throttle.write_bps_device",
        ] {
            write_cgroup(&cgroup.join(file), &format!("{major}:{minor} 0"))?;
        }
        if Path::new(&format!("/proc/{pid}")).exists() {
            // A process that exited meanwhile is gone from the cgroup already.
            let _ = write_cgroup(
                &Path::new(BLKIO_ROOT).join("cgroup.procs"),
                &pid.to_string(),
            );
        }
        Ok(())
    }

    /// The commands that undo what was made, in order (to run here or on the signal thread,
    /// once the nodes are killed): each unmount, each loop device detached, the cgroup removed
    /// (`rmdir`).
    pub fn cleanup(&self) -> Vec<(String, Vec<String>)> {
        let mut v = Vec::new();
        for n in &self.nodes {
            if n.mounted {
                v.push(("umount".to_owned(), vec![n.mount.display().to_string()]));
            }
            if n.attached {
                v.push((
                    "losetup".to_owned(),
                    vec!["-d".to_owned(), n.device.display().to_string()],
                ));
            }
        }
        if let Some(c) = &self.cgroup {
            v.push(("rmdir".to_owned(), vec![c.display().to_string()]));
        }
        v
    }

    /// Unmounts, detaches and removes the cgroup; errors are ignored (what was never made is
    /// not there). The nodes must be stopped first.
    pub fn remove(&mut self) {
        let _ = self.unthrottle();
        run_cleanup(&self.cleanup());
        // The images stay (with the run's directory, which goes unless kept: a kept image
        // holds a node's data directory, `mount -o loop IMAGE DIR` shows it).
        for n in &mut self.nodes {
            n.mounted = false;
            n.attached = false;
        }
        self.cgroup = None;
    }
}

/// Runs cleanup commands, ignoring failures; an unmount or cgroup removal that fails while the
/// killed nodes are still being reaped is tried again for up to two seconds.
pub fn run_cleanup(commands: &[(String, Vec<String>)]) {
    for (program, args) in commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let attempts = if program == "losetup" { 1 } else { 20 };
        for _ in 0..attempts {
            if run(program, &args).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

fn write_cgroup(file: &Path, value: &str) -> anyhow::Result<()> {
    std::fs::write(file, value).with_context(|| format!("writing {value:?} to {}", file.display()))
}

impl Drop for Disks {
    fn drop(&mut self) {
        self.remove();
    }
}
