//! `SimDisk`: an in-memory disk that models what a crash can do, deterministically.
//!
//! Each file keeps two images: what reads see now, and what is durable. Writes and size
//! changes since the last `sync` are kept as an ordered list of operations. Directory entries
//! likewise have a current and a durable view, updated by `sync_dir`.
//!
//! Faults:
//!
//! | fault                         | how                                  | models                         |
//! |-------------------------------|--------------------------------------|--------------------------------|
//! | lose everything not synced    | [`SimDisk::crash`]                   | power loss after clean syncs   |
//! | keep a prefix of unsynced ops, the last write torn at a byte or a sector boundary | [`SimDisk::crash_torn`] | reordering-free power loss mid-write |
//! | flip a bit in synced data     | [`SimDisk::flip_bit`]                | media corruption               |
//! | fail the next write / sync    | [`SimDisk::inject`]                  | EIO                            |
//!
//! After a crash, handles opened before it fail every call (the process "died").
//! All futures complete immediately, so any executor works.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{io_err, Disk, DiskFile, OpenMode};
use crate::buf::{AlignedBuf, BLOCK_BYTES};
use crate::error::Result;

/// Granularity of the sector-aligned tears of [`SimDisk::crash_torn`].
const SECTOR_BYTES: usize = 512;

/// A fault to inject into the next matching operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimFault {
    /// The next `write_at` (any file) fails with EIO and writes nothing.
    FailNextWrite,
    /// The next `sync` (any file) fails with EIO; its unsynced operations stay unsynced.
    FailNextSync,
}

#[derive(Clone, Debug)]
enum Op {
    Write { pos: u64, bytes: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<Op>,
}

fn apply(image: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write { pos, bytes } => {
            let end = *pos as usize + bytes.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[*pos as usize..end].copy_from_slice(bytes);
        }
        Op::SetLen(len) => image.resize(*len as usize, 0),
    }
}

#[derive(Debug)]
struct State {
    files: BTreeMap<PathBuf, Rc<RefCell<Inode>>>,
    durable_files: BTreeMap<PathBuf, Rc<RefCell<Inode>>>,
    generation: u64,
    faults: Vec<SimFault>,
    rng: ChaCha8Rng,
    syncs: u64,
    writes: u64,
    reads: u64,
    durable_writes: u64,
    yield_on_io: bool,
}

/// The simulated disk. Cheap to clone; clones share the same files.
#[derive(Clone, Debug)]
pub struct SimDisk {
    state: Rc<RefCell<State>>,
}

/// A handle to a simulated file.
#[derive(Debug)]
pub struct SimFile {
    disk: SimDisk,
    inode: Rc<RefCell<Inode>>,
    path: PathBuf,
    generation: u64,
}

fn eio(what: &str) -> std::io::Error {
    std::io::Error::other(format!("simulated EIO: {what}"))
}

impl SimDisk {
    /// An empty disk whose random choices (torn crashes) follow `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            state: Rc::new(RefCell::new(State {
                files: BTreeMap::new(),
                durable_files: BTreeMap::new(),
                generation: 0,
                faults: Vec::new(),
                rng: ChaCha8Rng::seed_from_u64(seed),
                syncs: 0,
                writes: 0,
                reads: 0,
                durable_writes: 0,
                yield_on_io: false,
            })),
        }
    }

    /// Make every `write_at` and `sync` return `Pending` once before completing, so tests can
    /// interleave other work with IO in flight, deterministically.
    pub fn set_yield_on_io(&self, on: bool) {
        self.state.borrow_mut().yield_on_io = on;
    }

    async fn maybe_yield(&self) {
        if self.state.borrow().yield_on_io {
            futures_lite::future::yield_now().await;
        }
    }

    /// Queue a fault for the next matching operation.
    pub fn inject(&self, fault: SimFault) {
        self.state.borrow_mut().faults.push(fault);
    }

    fn take_fault(&self, fault: SimFault) -> bool {
        let mut s = self.state.borrow_mut();
        match s.faults.iter().position(|f| *f == fault) {
            Some(i) => {
                s.faults.remove(i);
                true
            }
            None => false,
        }
    }

    /// Power loss: every file reverts to its durable image, every directory to its durable
    /// entries. Handles from before the crash stop working.
    pub fn crash(&self) {
        self.crash_with(|_, _| (0, None));
    }

    /// Power loss mid-flight: for each file, a random prefix of its unsynced operations
    /// survives, and the first lost write may survive torn at a random byte or (half the time)
    /// at a random 512-byte sector boundary.
    pub fn crash_torn(&self) {
        let rng = RefCell::new(ChaCha8Rng::seed_from_u64(self.state.borrow_mut().rng.gen()));
        self.crash_with(|_, ops| {
            let mut rng = rng.borrow_mut();
            let keep = rng.gen_range(0..=ops.len());
            let torn = match ops.get(keep) {
                // Half the time at a sector boundary (devices write sectors atomically), so a
                // tear can end exactly where a frame ends and old bytes begin.
                Some(Op::Write { bytes, .. }) if bytes.len() >= SECTOR_BYTES && rng.gen() => {
                    Some(rng.gen_range(0..bytes.len() / SECTOR_BYTES) * SECTOR_BYTES)
                }
                Some(Op::Write { bytes, .. }) if !bytes.is_empty() => {
                    Some(rng.gen_range(0..bytes.len()))
                }
                _ => None,
            };
            (keep, torn)
        });
    }

    /// Power loss mid-write at a chosen point: for each file, no unsynced operation survives
    /// whole, and the first one, if it is a write, survives as its first `kept_bytes` bytes.
    pub fn crash_torn_at(&self, kept_bytes: usize) {
        self.crash_with(|_, ops| match ops.first() {
            Some(Op::Write { bytes, .. }) => (0, Some(kept_bytes.min(bytes.len()))),
            _ => (0, None),
        });
    }

    /// `choose(path, unsynced_ops) -> (ops kept whole, bytes kept of the next write)`.
    fn crash_with(&self, choose: impl Fn(&Path, &[Op]) -> (usize, Option<usize>)) {
        let mut s = self.state.borrow_mut();
        s.generation += 1;
        s.faults.clear();
        let durable = s.durable_files.clone();
        // Every inode, reachable or not, loses its unsynced state.
        let mut all: Vec<(PathBuf, Rc<RefCell<Inode>>)> = s
            .files
            .iter()
            .map(|(p, i)| (p.clone(), i.clone()))
            .collect();
        all.extend(durable.iter().map(|(p, i)| (p.clone(), i.clone())));
        let mut seen: Vec<*const RefCell<Inode>> = Vec::new();
        for (path, inode) in all {
            if seen.contains(&Rc::as_ptr(&inode)) {
                continue;
            }
            seen.push(Rc::as_ptr(&inode));
            let mut ino = inode.borrow_mut();
            let (keep, torn) = choose(&path, &ino.unsynced);
            let mut image = ino.durable.clone();
            for op in &ino.unsynced[..keep] {
                apply(&mut image, op);
            }
            if let (Some(n), Some(Op::Write { pos, bytes })) = (torn, ino.unsynced.get(keep)) {
                apply(
                    &mut image,
                    &Op::Write {
                        pos: *pos,
                        bytes: bytes[..n].to_vec(),
                    },
                );
            }
            // What survived a crash is on the platter now.
            ino.durable = image.clone();
            ino.data = image;
            ino.unsynced.clear();
        }
        s.files = durable;
    }

    /// Flip one bit of durable (and current) data: media corruption of synced bytes.
    pub fn flip_bit(&self, path: &Path, pos: u64, bit: u8) {
        let s = self.state.borrow();
        let inode = s
            .files
            .get(path)
            .unwrap_or_else(|| panic!("flip_bit: no file {path:?}"));
        let mut ino = inode.borrow_mut();
        assert!(
            (pos as usize) < ino.durable.len(),
            "flip_bit beyond durable data"
        );
        ino.durable[pos as usize] ^= 1 << bit;
        if (pos as usize) < ino.data.len() {
            ino.data[pos as usize] ^= 1 << bit;
        }
    }

    /// Current contents of a file (for tests and tools).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        self.state
            .borrow()
            .files
            .get(path)
            .map(|i| i.borrow().data.clone())
    }

    /// Current file paths.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.state.borrow().files.keys().cloned().collect()
    }

    /// Successful syncs so far.
    pub fn sync_count(&self) -> u64 {
        self.state.borrow().syncs
    }

    /// Successful writes so far.
    pub fn write_count(&self) -> u64 {
        self.state.borrow().writes
    }

    /// Successful `write_durable_at` calls so far (each also counts as a write and a sync).
    pub fn durable_write_count(&self) -> u64 {
        self.state.borrow().durable_writes
    }

    /// Reads so far (any file).
    pub fn read_count(&self) -> u64 {
        self.state.borrow().reads
    }

    fn generation(&self) -> u64 {
        self.state.borrow().generation
    }
}

impl Disk for SimDisk {
    type File = SimFile;

    async fn open(&self, path: &Path, mode: OpenMode) -> Result<SimFile> {
        let mut s = self.state.borrow_mut();
        let inode = match (s.files.get(path), mode) {
            (Some(i), _) => i.clone(),
            (None, OpenMode::Create) => {
                let i = Rc::new(RefCell::new(Inode::default()));
                s.files.insert(path.to_path_buf(), i.clone());
                i
            }
            (None, OpenMode::Existing) => {
                return Err(io_err("open", path, std::io::ErrorKind::NotFound.into()))
            }
        };
        Ok(SimFile {
            disk: self.clone(),
            inode,
            path: path.to_path_buf(),
            generation: s.generation,
        })
    }

    async fn remove(&self, path: &Path) -> Result<()> {
        match self.state.borrow_mut().files.remove(path) {
            Some(_) => Ok(()),
            None => Err(io_err("remove", path, std::io::ErrorKind::NotFound.into())),
        }
    }

    async fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut s = self.state.borrow_mut();
        match s.files.remove(from) {
            Some(i) => {
                s.files.insert(to.to_path_buf(), i);
                Ok(())
            }
            None => Err(io_err("rename", from, std::io::ErrorKind::NotFound.into())),
        }
    }

    async fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let s = self.state.borrow();
        Ok(s.files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_string))
            .collect())
    }

    async fn create_dir_all(&self, _dir: &Path) -> Result<()> {
        // Directories are implicit in paths; their entries are what `sync_dir` makes durable.
        Ok(())
    }

    async fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut s = self.state.borrow_mut();
        s.durable_files.retain(|p, _| p.parent() != Some(dir));
        let current: Vec<_> = s
            .files
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, i)| (p.clone(), i.clone()))
            .collect();
        s.durable_files.extend(current);
        Ok(())
    }
}

impl SimFile {
    fn check_alive(&self, op: &'static str) -> Result<()> {
        if self.generation != self.disk.generation() {
            return Err(io_err(op, &self.path, eio("handle from before a crash")));
        }
        Ok(())
    }
}

impl DiskFile for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    async fn size(&self) -> Result<u64> {
        self.check_alive("stat")?;
        Ok(self.inode.borrow().data.len() as u64)
    }

    async fn read_at(&self, pos: u64, len: usize) -> Result<AlignedBuf> {
        self.check_alive("read")?;
        self.disk.state.borrow_mut().reads += 1;
        let ino = self.inode.borrow();
        let start = (pos as usize).min(ino.data.len());
        let end = (pos as usize).saturating_add(len).min(ino.data.len());
        Ok(AlignedBuf::from_slice(&ino.data[start..end]))
    }

    async fn write_at(&self, pos: u64, data: &[u8]) -> Result<()> {
        self.check_alive("write")?;
        assert_eq!(
            pos % BLOCK_BYTES as u64,
            0,
            "write position is block-aligned"
        );
        assert_eq!(data.len() % BLOCK_BYTES, 0, "write length is block-aligned");
        self.disk.maybe_yield().await;
        self.check_alive("write")?;
        if self.disk.take_fault(SimFault::FailNextWrite) {
            return Err(io_err("write", &self.path, eio("injected write failure")));
        }
        let op = Op::Write {
            pos,
            bytes: data.to_vec(),
        };
        let mut ino = self.inode.borrow_mut();
        apply(&mut ino.data, &op);
        ino.unsynced.push(op);
        self.disk.state.borrow_mut().writes += 1;
        Ok(())
    }

    async fn write_durable_at(&self, pos: u64, data: &[u8]) -> Result<()> {
        assert!(
            self.inode.borrow().unsynced.is_empty(),
            "{}: write_durable_at with unsynced operations before it (the contract: it makes \
             only its own write durable)",
            self.path.display()
        );
        // A write, then the sync of that one write; a crash in between keeps what a crash
        // during any write keeps, and either half can fail as its plain counterpart does.
        self.write_at(pos, data).await?;
        self.sync().await?;
        self.disk.state.borrow_mut().durable_writes += 1;
        Ok(())
    }

    async fn sync(&self) -> Result<()> {
        self.check_alive("fdatasync")?;
        self.disk.maybe_yield().await;
        self.check_alive("fdatasync")?;
        if self.disk.take_fault(SimFault::FailNextSync) {
            return Err(io_err(
                "fdatasync",
                &self.path,
                eio("injected fsync failure"),
            ));
        }
        let mut ino = self.inode.borrow_mut();
        let ops = std::mem::take(&mut ino.unsynced);
        for op in &ops {
            apply(&mut ino.durable, op);
        }
        debug_assert_eq!(ino.durable, ino.data);
        self.disk.state.borrow_mut().syncs += 1;
        Ok(())
    }

    async fn allocate(&self, len: u64) -> Result<()> {
        self.check_alive("fallocate")?;
        let mut ino = self.inode.borrow_mut();
        if (ino.data.len() as u64) < len {
            let op = Op::SetLen(len);
            apply(&mut ino.data, &op);
            ino.unsynced.push(op);
        }
        Ok(())
    }

    async fn truncate(&self, len: u64) -> Result<()> {
        self.check_alive("truncate")?;
        let op = Op::SetLen(len);
        let mut ino = self.inode.borrow_mut();
        apply(&mut ino.data, &op);
        ino.unsynced.push(op);
        Ok(())
    }

    async fn close(self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use futures_lite::future::block_on;

    use super::*;

    fn block(b: u8) -> Vec<u8> {
        vec![b; BLOCK_BYTES]
    }

    #[test]
    fn crash_loses_unsynced_and_uncommitted_names() {
        // Proves a crash keeps exactly synced data and directory entries made durable by sync_dir.
        block_on(async {
            let d = SimDisk::new(1);
            let dir = Path::new("/d");
            let a = d.open(&dir.join("a"), OpenMode::Create).await.unwrap();
            a.write_at(0, &block(1)).await.unwrap();
            a.sync().await.unwrap();
            d.sync_dir(dir).await.unwrap();
            a.write_at(4096, &block(2)).await.unwrap();
            let b = d.open(&dir.join("b"), OpenMode::Create).await.unwrap();
            b.write_at(0, &block(3)).await.unwrap();
            b.sync().await.unwrap();
            d.crash();
            assert_eq!(d.contents(&dir.join("a")).unwrap(), block(1));
            assert!(
                d.contents(&dir.join("b")).is_none(),
                "b's entry was never synced"
            );
            assert!(a.size().await.is_err(), "old handles die with the process");
        });
    }

    #[test]
    fn torn_crash_keeps_a_prefix() {
        // Proves a torn crash keeps durable data and at most a prefix of the unsynced writes.
        for seed in 0..50 {
            block_on(async {
                let d = SimDisk::new(seed);
                let p = Path::new("/d/f");
                let f = d.open(p, OpenMode::Create).await.unwrap();
                f.write_at(0, &block(1)).await.unwrap();
                f.sync().await.unwrap();
                d.sync_dir(Path::new("/d")).await.unwrap();
                f.write_at(4096, &block(2)).await.unwrap();
                f.write_at(8192, &block(3)).await.unwrap();
                d.crash_torn();
                let c = d.contents(p).unwrap();
                assert_eq!(&c[..4096], &block(1)[..]);
                let rest = &c[4096..];
                // A prefix of block(2) ++ block(3).
                let expect: Vec<u8> = [block(2), block(3)].concat();
                assert_eq!(rest, &expect[..rest.len()]);
            });
        }
    }

    #[test]
    fn injected_faults_fire_once() {
        // Proves injected write/sync failures fail exactly one operation and leave data unsynced.
        block_on(async {
            let d = SimDisk::new(1);
            let f = d.open(Path::new("/d/f"), OpenMode::Create).await.unwrap();
            d.inject(SimFault::FailNextWrite);
            assert!(f.write_at(0, &block(1)).await.is_err());
            f.write_at(0, &block(1)).await.unwrap();
            d.inject(SimFault::FailNextSync);
            assert!(f.sync().await.is_err());
            d.sync_dir(Path::new("/d")).await.unwrap();
            d.crash();
            assert_eq!(d.contents(Path::new("/d/f")).unwrap().len(), 0);
        });
    }
}
