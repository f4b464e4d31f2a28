//! `StdDisk`: the [`Disk`] seam over plain blocking `std::fs` — page cache, no O_DIRECT, no
//! io_uring. Every future completes when first polled, so it runs under any executor,
//! `futures_lite::future::block_on` included: for the offline tools (`corum format`, `info`,
//! `dump-log`, `shell --dir`), which run outside glommio.
//!
//! It keeps the seam's contract as [`super::UringDisk`] does (`write_at` positions and lengths
//! are whole blocks; `sync` is fdatasync; `sync_dir` fsyncs the directory), so code tested over
//! it behaves the same over the real disk.
//!
//! [`StdDisk::read_only`] opens every file read-only and refuses every change (create, write,
//! sync, allocate, truncate, remove, rename, creating or syncing a directory) with an
//! [`std::io::ErrorKind::ReadOnlyFilesystem`] error naming the operation: a tool given one
//! cannot write into the directory it inspects, even by mistake, and works on a read-only
//! mount.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{io_err, Disk, DiskFile, OpenMode};
use crate::buf::{AlignedBuf, BLOCK_BYTES};
use crate::error::Result;

/// The disk through `std::fs`. `Copy`: it holds only whether it may write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StdDisk {
    read_only: bool,
}

/// A file opened by [`StdDisk`].
#[derive(Debug)]
pub struct StdFile {
    file: File,
    path: PathBuf,
    read_only: bool,
}

/// The error a read-only disk answers a change with.
fn refused(op: &'static str, path: &Path) -> crate::Error {
    io_err(
        op,
        path,
        std::io::Error::new(
            std::io::ErrorKind::ReadOnlyFilesystem,
            "refused: the disk was opened read-only",
        ),
    )
}

/// `""` (the parent of a bare file name) is the current directory.
fn dir_or_cwd(dir: &Path) -> &Path {
    if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    }
}

impl StdDisk {
    /// A disk that reads and writes.
    pub fn new() -> Self {
        Self { read_only: false }
    }

    /// A disk that only reads: see the module doc.
    pub fn read_only() -> Self {
        Self { read_only: true }
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn check_writable(&self, op: &'static str, path: &Path) -> Result<()> {
        if self.read_only {
            return Err(refused(op, path));
        }
        Ok(())
    }
}

impl Disk for StdDisk {
    type File = StdFile;

    async fn open(&self, path: &Path, mode: OpenMode) -> Result<StdFile> {
        if mode == OpenMode::Create {
            self.check_writable("create", path)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .create(mode == OpenMode::Create)
            .truncate(false)
            .open(path)
            .map_err(|e| io_err("open", path, e))?;
        Ok(StdFile {
            file,
            path: path.to_path_buf(),
            read_only: self.read_only,
        })
    }

    async fn remove(&self, path: &Path) -> Result<()> {
        self.check_writable("remove", path)?;
        std::fs::remove_file(path).map_err(|e| io_err("remove", path, e))
    }

    async fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.check_writable("rename", from)?;
        std::fs::rename(from, to).map_err(|e| io_err("rename", from, e))
    }

    async fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let dir = dir_or_cwd(dir);
        for entry in std::fs::read_dir(dir).map_err(|e| io_err("list", dir, e))? {
            let entry = entry.map_err(|e| io_err("list", dir, e))?;
            let file_type = entry
                .file_type()
                .map_err(|e| io_err("stat", &entry.path(), e))?;
            if file_type.is_file() {
                if let Some(name) = entry.file_name().to_str() {
                    names.push(name.to_string());
                }
            }
        }
        names.sort();
        Ok(names)
    }

    async fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.check_writable("create_dir_all", dir)?;
        std::fs::create_dir_all(dir).map_err(|e| io_err("create_dir_all", dir, e))
    }

    async fn sync_dir(&self, dir: &Path) -> Result<()> {
        let dir = dir_or_cwd(dir);
        self.check_writable("sync dir", dir)?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err("sync dir", dir, e))
    }
}

impl StdFile {
    fn check_writable(&self, op: &'static str) -> Result<()> {
        if self.read_only {
            return Err(refused(op, &self.path));
        }
        Ok(())
    }
}

impl DiskFile for StdFile {
    fn path(&self) -> &Path {
        &self.path
    }

    async fn size(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| io_err("stat", &self.path, e))?
            .len())
    }

    async fn read_at(&self, pos: u64, len: usize) -> Result<AlignedBuf> {
        let mut buf = AlignedBuf::zeroed(len);
        let mut done = 0;
        while done < len {
            match self.file.read_at(&mut buf[done..], pos + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("read", &self.path, e)),
            }
        }
        buf.truncate(done);
        Ok(buf)
    }

    async fn write_at(&self, pos: u64, data: &[u8]) -> Result<()> {
        self.check_writable("write")?;
        assert_eq!(
            pos % BLOCK_BYTES as u64,
            0,
            "write position is block-aligned"
        );
        assert_eq!(data.len() % BLOCK_BYTES, 0, "write length is block-aligned");
        self.file
            .write_all_at(data, pos)
            .map_err(|e| io_err("write", &self.path, e))
    }

    async fn write_durable_at(&self, pos: u64, data: &[u8]) -> Result<()> {
        self.write_at(pos, data).await?;
        self.sync().await
    }

    async fn sync(&self) -> Result<()> {
        self.check_writable("fdatasync")?;
        self.file
            .sync_data()
            .map_err(|e| io_err("fdatasync", &self.path, e))
    }

    async fn allocate(&self, len: u64) -> Result<()> {
        self.check_writable("fallocate")?;
        if self.size().await? >= len {
            return Ok(());
        }
        use std::os::fd::AsRawFd;
        let len_signed = i64::try_from(len).map_err(|_| {
            io_err(
                "fallocate",
                &self.path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "length above i64::MAX"),
            )
        })?;
        // SAFETY: the descriptor is open for the lifetime of `self.file`.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, len_signed) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
            // A file system without fallocate: a sparse extension reads as zeros too.
            return self
                .file
                .set_len(len)
                .map_err(|e| io_err("fallocate", &self.path, e));
        }
        Err(io_err("fallocate", &self.path, e))
    }

    async fn truncate(&self, len: u64) -> Result<()> {
        self.check_writable("truncate")?;
        self.file
            .set_len(len)
            .map_err(|e| io_err("truncate", &self.path, e))
    }

    async fn close(self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use futures_lite::future::block_on;

    use super::*;

    /// The seam's operations over real files: create, whole-block writes, exact reads (short at
    /// the end of the file), allocate, truncate, list (regular files only, sorted), rename and
    /// remove.
    #[test]
    fn file_operations() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        block_on(async {
            let d = StdDisk::new();
            let p = dir.join("b");
            assert!(d.open(&p, OpenMode::Existing).await.is_err());
            let f = d.open(&p, OpenMode::Create).await.unwrap();
            f.write_at(0, &[1; BLOCK_BYTES]).await.unwrap();
            f.write_durable_at(BLOCK_BYTES as u64, &[2; BLOCK_BYTES])
                .await
                .unwrap();
            f.sync().await.unwrap();
            assert_eq!(f.size().await.unwrap(), 2 * BLOCK_BYTES as u64);
            let r = f.read_at(BLOCK_BYTES as u64 - 2, 10).await.unwrap();
            assert_eq!(&r[..], &[1, 1, 2, 2, 2, 2, 2, 2, 2, 2]);
            let r = f.read_at(2 * BLOCK_BYTES as u64 - 3, 100).await.unwrap();
            assert_eq!(&r[..], &[2, 2, 2], "short at the end of the file");
            f.allocate(5 * BLOCK_BYTES as u64).await.unwrap();
            assert_eq!(f.size().await.unwrap(), 5 * BLOCK_BYTES as u64);
            f.truncate(7).await.unwrap();
            assert_eq!(f.size().await.unwrap(), 7);
            f.close().await.unwrap();
            std::fs::create_dir(dir.join("sub")).unwrap();
            std::fs::write(dir.join("a"), b"x").unwrap();
            assert_eq!(d.list(dir).await.unwrap(), vec!["a", "b"]);
            d.rename(&p, &dir.join("c")).await.unwrap();
            d.remove(&dir.join("a")).await.unwrap();
            d.sync_dir(dir).await.unwrap();
            assert_eq!(d.list(dir).await.unwrap(), vec!["c"]);
            d.create_dir_all(&dir.join("x/y")).await.unwrap();
            assert!(dir.join("x/y").is_dir());
        });
    }

    /// A read-only disk reads, and refuses every change with an error naming it; the files stay
    /// as they were.
    #[test]
    fn read_only_refuses_every_change() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("f"), vec![3u8; BLOCK_BYTES]).unwrap();
        block_on(async {
            let d = StdDisk::read_only();
            assert!(d.is_read_only());
            let f = d.open(&dir.join("f"), OpenMode::Existing).await.unwrap();
            assert_eq!(f.read_at(0, 4).await.unwrap()[..], [3, 3, 3, 3]);
            let refused = |r: Result<()>, op: &str| {
                let e = r.unwrap_err();
                assert!(
                    matches!(&e, crate::Error::Io { op: o, source, .. }
                        if *o == op && source.kind() == std::io::ErrorKind::ReadOnlyFilesystem),
                    "{op}: {e}"
                );
            };
            refused(f.write_at(0, &[0; BLOCK_BYTES]).await, "write");
            refused(f.write_durable_at(0, &[0; BLOCK_BYTES]).await, "write");
            refused(f.sync().await, "fdatasync");
            refused(f.allocate(1 << 20).await, "fallocate");
            refused(f.truncate(0).await, "truncate");
            refused(
                d.open(&dir.join("new"), OpenMode::Create).await.map(|_| ()),
                "create",
            );
            refused(d.remove(&dir.join("f")).await, "remove");
            refused(d.rename(&dir.join("f"), &dir.join("g")).await, "rename");
            refused(d.create_dir_all(&dir.join("sub")).await, "create_dir_all");
            refused(d.sync_dir(dir).await, "sync dir");
        });
        assert_eq!(
            std::fs::read(dir.join("f")).unwrap(),
            vec![3u8; BLOCK_BYTES]
        );
        let names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["f"]);
    }
}
