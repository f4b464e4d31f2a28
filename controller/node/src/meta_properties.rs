//! `meta.properties`: the identity of a formatted log directory, as Kafka writes it.
//!
//! A text properties file (read with [`crate::config::parse_properties`]) holding exactly:
//!
//! ```text
//! # Written by corum format. Do not edit.
//! version=1
//! cluster.id=<22-char base64 UUID>
//! node.id=<u32>
//! directory.id=<22-char base64 UUID>
//! ```
//!
//! Its presence is what "formatted" means. It is written once, by `corum format`, atomically
//! ([`crate::fsio::write_atomic`], over any `Disk`); `corum run` refuses a directory without it or with another
//! cluster id or node id. Every key is required, none may repeat, unknown keys are rejected, and
//! the ids must be valid non-zero UUIDs: anything else is [`StorageError::Corrupt`].

use std::path::Path;

use corum_engine::disk::Disk;
use corum_types::{NodeId, Uuid};

use crate::config::parse_properties;
use crate::error::StorageError;
use crate::fsio;

/// File name of the identity file inside `metadata.log.dir`.
pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// The only version written and read (Kafka's KRaft meta.properties version 1).
pub const META_PROPERTIES_VERSION: u64 = 1;

/// Files above this are not ours.
const META_PROPERTIES_BYTES_MAX: u64 = 64 * 1024;

/// The identity of a log directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: Uuid,
    pub node_id: NodeId,
    /// The directory's id: the replica UUID of this voter (KIP-853).
    pub directory_id: Uuid,
}

impl MetaProperties {
    /// The file's text.
    pub fn to_text(&self) -> String {
        format!(
            "# Written by corum format. Do not edit.\nversion={META_PROPERTIES_VERSION}\ncluster.id={}\nnode.id={}\ndirectory.id={}\n",
            self.cluster_id, self.node_id, self.directory_id
        )
    }

    /// Parses the file's text; `path` only names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<MetaProperties, StorageError> {
        let corrupt = |reason: String| StorageError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        let entries = parse_properties(text).map_err(|e| corrupt(e.to_string()))?;
        let mut version = None;
        let mut cluster_id = None;
        let mut node_id = None;
        let mut directory_id = None;
        for e in &entries {
            let slot = match e.key.as_str() {
                "version" => &mut version,
                "cluster.id" => &mut cluster_id,
                "node.id" => &mut node_id,
                "directory.id" => &mut directory_id,
                other => return Err(corrupt(format!("line {}: unknown key {other:?}", e.line))),
            };
            if slot.is_some() {
                return Err(corrupt(format!("line {}: {} given twice", e.line, e.key)));
            }
            *slot = Some(e.value.as_str());
        }
        let version = version.ok_or_else(|| corrupt("missing version".into()))?;
        let version: u64 = version
            .parse()
            .map_err(|_| corrupt(format!("invalid version {version:?}")))?;
        if version != META_PROPERTIES_VERSION {
            return Err(StorageError::UnsupportedVersion {
                path: path.to_path_buf(),
                version,
                supported: META_PROPERTIES_VERSION,
            });
        }
        let uuid = |name: &str, v: Option<&str>| -> Result<Uuid, StorageError> {
            let v = v.ok_or_else(|| corrupt(format!("missing {name}")))?;
            let u: Uuid = v
                .parse()
                .map_err(|_| corrupt(format!("invalid {name} {v:?}")))?;
            if u.is_zero() {
                return Err(corrupt(format!("{name} is the all-zero UUID")));
            }
            Ok(u)
        };
        let cluster_id = uuid("cluster.id", cluster_id)?;
        let directory_id = uuid("directory.id", directory_id)?;
        let node_id = node_id.ok_or_else(|| corrupt("missing node.id".into()))?;
        let node_id: NodeId = node_id
            .parse()
            .map_err(|_| corrupt(format!("invalid node.id {node_id:?}")))?;
        Ok(MetaProperties {
            cluster_id,
            node_id,
            directory_id,
        })
    }

    /// Reads `dir/meta.properties` on `disk`, or `None` if the directory is not formatted.
    pub async fn read<D: Disk>(
        disk: &D,
        dir: &Path,
    ) -> Result<Option<MetaProperties>, StorageError> {
        let path = dir.join(META_PROPERTIES_FILE);
        let Some(bytes) = fsio::read_optional(disk, &path, META_PROPERTIES_BYTES_MAX).await? else {
            return Ok(None);
        };
        let text = std::str::from_utf8(&bytes).map_err(|e| StorageError::Corrupt {
            path: path.clone(),
            reason: format!("not UTF-8: {e}"),
        })?;
        MetaProperties::parse(text, &path).map(Some)
    }

    /// Reads `dir/meta.properties`, failing if the directory is not formatted.
    pub async fn read_required<D: Disk>(
        disk: &D,
        dir: &Path,
    ) -> Result<MetaProperties, StorageError> {
        MetaProperties::read(disk, dir)
            .await?
            .ok_or_else(|| StorageError::NotFormatted {
                dir: dir.to_path_buf(),
            })
    }

    /// Writes `dir/meta.properties` on `disk` atomically.
    pub async fn write<D: Disk>(&self, disk: &D, dir: &Path) -> Result<(), StorageError> {
        fsio::write_atomic(
            disk,
            &dir.join(META_PROPERTIES_FILE),
            self.to_text().as_bytes(),
        )
        .await
    }

    /// Checks that a formatted directory belongs to this node of this cluster (start-up check).
    pub fn check(
        &self,
        dir: &Path,
        cluster_id: Option<Uuid>,
        node_id: NodeId,
    ) -> Result<(), StorageError> {
        let path = dir.join(META_PROPERTIES_FILE);
        if self.node_id != node_id {
            return Err(StorageError::Mismatch {
                path,
                field: "node.id",
                expected: node_id.to_string(),
                found: self.node_id.to_string(),
            });
        }
        if let Some(c) = cluster_id {
            if c != self.cluster_id {
                return Err(StorageError::Mismatch {
                    path,
                    field: "cluster.id",
                    expected: c.to_string(),
                    found: self.cluster_id.to_string(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_engine::disk::{SimDisk, StdDisk};
    use futures_lite::future::block_on;
    use proptest::prelude::*;

    fn sample() -> MetaProperties {
        MetaProperties {
            cluster_id: Uuid::from_random_bits(1),
            node_id: NodeId(3),
            directory_id: Uuid::from_random_bits(2),
        }
    }

    /// What is written reads back the same; a missing file reads as "not formatted".
    #[test]
    fn write_read() {
        let disk = SimDisk::new(1);
        let dir = Path::new("/data");
        assert_eq!(block_on(MetaProperties::read(&disk, dir)).unwrap(), None);
        assert!(matches!(
            block_on(MetaProperties::read_required(&disk, dir)),
            Err(StorageError::NotFormatted { .. })
        ));
        block_on(sample().write(&disk, dir)).unwrap();
        assert_eq!(
            block_on(MetaProperties::read(&disk, dir)).unwrap(),
            Some(sample())
        );
        assert_eq!(
            disk.contents(&dir.join(META_PROPERTIES_FILE)).unwrap(),
            sample().to_text().as_bytes()
        );
        let m = block_on(MetaProperties::read_required(&disk, dir)).unwrap();
        m.check(dir, Some(sample().cluster_id), NodeId(3)).unwrap();
        m.check(dir, None, NodeId(3)).unwrap();
        assert!(matches!(
            m.check(dir, None, NodeId(4)),
            Err(StorageError::Mismatch {
                field: "node.id",
                ..
            })
        ));
        assert!(matches!(
            m.check(dir, Some(Uuid::from_random_bits(9)), NodeId(3)),
            Err(StorageError::Mismatch {
                field: "cluster.id",
                ..
            })
        ));
    }

    /// Each kind of damage is a clear error naming what is wrong.
    #[test]
    fn rejects_bad_files() {
        let good = sample().to_text();
        let p = Path::new("d/meta.properties");
        let cases: Vec<(String, &str)> = vec![
            (
                good.replace("version=1", "version=2"),
                "unsupported format version 2",
            ),
            (good.replace("version=1", "version=x"), "invalid version"),
            (good.replace("version=1\n", ""), "missing version"),
            (good.replace("node.id=3", "node.id=-3"), "invalid node.id"),
            (good.replace("node.id=3\n", ""), "missing node.id"),
            (
                good.replace("cluster.id=", "cluster.id=x"),
                "invalid cluster.id",
            ),
            (
                good.replace("directory.id=", "directory.id=x"),
                "invalid directory.id",
            ),
            (
                good.replace(&sample().cluster_id.to_string(), &Uuid::ZERO.to_string()),
                "all-zero",
            ),
            (format!("{good}node.id=4\n"), "given twice"),
            (format!("{good}broker.id=4\n"), "unknown key"),
            (format!("{good}x=\\u00zz\n"), "invalid escape"),
        ];
        for (text, want) in cases {
            let err = MetaProperties::parse(&text, p).unwrap_err();
            assert!(err.to_string().contains(want), "{want}: {err}");
            assert!(err.to_string().contains("meta.properties"), "{err}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(META_PROPERTIES_FILE), [0xff, 0xfe]).unwrap();
        assert!(
            block_on(MetaProperties::read(&StdDisk::read_only(), dir.path()))
                .unwrap_err()
                .to_string()
                .contains("UTF-8")
        );
    }

    proptest! {
        /// Arbitrary bytes never panic the reader.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let disk = SimDisk::new(1);
            let dir = Path::new("/data");
            block_on(corum_engine::disk::files::write_atomic(&disk, &dir.join(META_PROPERTIES_FILE), &bytes)).unwrap();
            let _ = block_on(MetaProperties::read(&disk, dir));
        }

        /// Every identity round-trips through the text form.
        #[test]
        fn round_trip(c in any::<u128>(), n in any::<u32>(), d in any::<u128>()) {
            let m = MetaProperties {
                cluster_id: Uuid::from_random_bits(c),
                node_id: NodeId(n),
                directory_id: Uuid::from_random_bits(d),
            };
            prop_assert_eq!(MetaProperties::parse(&m.to_text(), Path::new("m")).unwrap(), m);
        }
    }
}
