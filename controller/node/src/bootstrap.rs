//! `bootstrap.checkpoint`: what `corum format` decides for the cluster's start — the initial
//! voter set, kept until the Raft layer turns it into the log's first control records
//! (KIP-853's bootstrap checkpoint `@metadata-0/00000000000000000000-0000000000.checkpoint`
//! holding a KRaftVersion record and, for a dynamic quorum, a Voters record), and the feature
//! levels (`--release-version`, `--feature`) the first active controller finalizes (Kafka's
//! bootstrap metadata).
//!
//! - `kraft_version = 0`: a static quorum; the voters are `controller.quorum.voters` from the
//!   configuration and `voters` is empty.
//! - `kraft_version = 1`: a dynamic quorum (KIP-853); `voters` is the initial set: one voter with
//!   `--standalone`, the `--initial-controllers` otherwise. Later changes are Voters records.
//!
//! # Turning it into the log's first records (the node wiring's job)
//!
//! At start-up, when `@metadata-0` holds no log and no snapshot yet, the node reads this file
//! ([`crate::format::check_formatted`] returns it) and writes the bootstrap checkpoint
//! `@metadata-0/00000000000000000000-0000000000.checkpoint` as one control batch
//! (`corum_raft::control::encode`) holding `KRaftVersion { version: kraft_version }` and, when
//! `kraft_version == 1`, `Voters { voters }` with one `corum_raft` voter per [`BootstrapVoter`]:
//! key `(id, directory_id)`, endpoints `(name -> listener, host, port)`. With `kraft_version ==
//! 0` the voter set is `controller.quorum.voters`. This file stays as the record of what format
//! decided; `corum info` shows it.
//!
//! The features go to the controller ([`corum_controller::ControllerConfig::bootstrap_features`]):
//! the first active controller of a log without `metadata.version` writes one FeatureLevel
//! record per feature above level 0 as it activates. A node formatted before features were
//! recorded (format version 1) bootstraps `metadata.version` 4.1-IV1 alone, as it did then.
//!
//! # Byte layout (format version 2, little-endian)
//!
//! | offset   | size | field                                                             |
//! |----------|------|-------------------------------------------------------------------|
//! | 0        | 4    | magic `b"CBVT"`                                                   |
//! | 4        | 2    | format version = 1                                                |
//! | 6        | 2    | kraft.version (0 or 1)                                            |
//! | 8        | 4    | body length N in bytes                                            |
//! | 12       | N    | body (below)                                                      |
//! | 12 + N   | 4    | crc32c of bytes 0 .. 12 + N                                       |
//!
//! Body: `u32` voter count, then per voter: `u32` node id, 16 bytes directory id, `u16` endpoint
//! count, then per endpoint: `u8` name length, name (UTF-8), `u8` host length, host (UTF-8),
//! `u16` port; then (format version 2) `u16` feature count, then per feature: `u8` name length,
//! name (UTF-8), `u16` level. The decoder reads versions 1 and 2 and checks the magic, the
//! checksum, the version, that the body is consumed exactly, and every rule of
//! [`BootstrapCheckpoint::validate`].

use std::path::Path;

use corum_controller::control::feature_control::{
    check_bootstrap_features, BootstrapFeature, METADATA_VERSION,
};
use corum_engine::disk::Disk;
use corum_types::{NodeId, Uuid};

use crate::error::StorageError;
use crate::fsio;

/// File name inside `metadata.log.dir`.
pub const BOOTSTRAP_FILE: &str = "bootstrap.checkpoint";
pub const BOOTSTRAP_MAGIC: [u8; 4] = *b"CBVT";
pub const BOOTSTRAP_FORMAT_VERSION: u16 = 2;
/// The first format version, without features.
const FORMAT_VERSION_VOTERS_ONLY: u16 = 1;
/// What a format version 1 file bootstraps: `metadata.version` 4.1-IV1 alone, what the
/// controller finalized before features were recorded.
const VOTERS_ONLY_METADATA_VERSION: u16 = 27;
/// Most features a checkpoint may list.
pub const BOOTSTRAP_FEATURES_MAX: usize = 64;
/// Most voters a bootstrap set may hold.
pub const BOOTSTRAP_VOTERS_MAX: usize = 255;
/// Most endpoints per voter.
pub const BOOTSTRAP_ENDPOINTS_MAX: usize = 16;
const BOOTSTRAP_BYTES_MAX: u64 = 1 << 20;

/// One listener of a voter (KIP-853 `Endpoints`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BootstrapEndpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// One initial voter: its identity and where it listens.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BootstrapVoter {
    pub id: NodeId,
    pub directory_id: Uuid,
    pub endpoints: Vec<BootstrapEndpoint>,
}

/// What the cluster starts with: the KRaft version and, for a dynamic quorum, the voter set;
/// the feature levels the first active controller finalizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapCheckpoint {
    pub kraft_version: u16,
    pub voters: Vec<BootstrapVoter>,
    /// In name order; `metadata.version` among them.
    pub features: Vec<BootstrapFeature>,
}

impl BootstrapCheckpoint {
    /// Checks the structural rules; the encoder refuses and the decoder reports any breach.
    /// A dynamic quorum's controller formatted to join it (`--no-initial-controllers`): it
    /// knows no voter until it fetches the leader's log.
    pub fn is_joining(&self) -> bool {
        self.kraft_version >= 1 && self.voters.is_empty()
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.features.len() > BOOTSTRAP_FEATURES_MAX {
            return Err(format!(
                "{} features, above the limit of {BOOTSTRAP_FEATURES_MAX}",
                self.features.len()
            ));
        }
        if let Some(f) = self.features.iter().find(|f| f.name.len() > 255) {
            return Err(format!("feature name of {} bytes", f.name.len()));
        }
        check_bootstrap_features(&self.features)?;
        match self.kraft_version {
            0 if !self.voters.is_empty() => {
                return Err("kraft.version 0 (static quorum) takes its voters from controller.quorum.voters, not from the checkpoint".into())
            }
            0 => return Ok(()),
            // A controller formatted to join (`--no-initial-controllers`).
            1 if self.voters.is_empty() => return Ok(()),
            1 => {}
            v => return Err(format!("unknown kraft.version {v} (expected 0 or 1)")),
        }
        if self.voters.len() > BOOTSTRAP_VOTERS_MAX {
            return Err(format!(
                "{} voters, above the limit of {BOOTSTRAP_VOTERS_MAX}",
                self.voters.len()
            ));
        }
        for (i, v) in self.voters.iter().enumerate() {
            if self.voters[..i].iter().any(|w| w.id == v.id) {
                return Err(format!("voter id {} is listed twice", v.id));
            }
            if v.directory_id.is_zero() {
                return Err(format!("voter {} has the all-zero directory id", v.id));
            }
            if self.voters[..i]
                .iter()
                .any(|w| w.directory_id == v.directory_id)
            {
                return Err(format!(
                    "voters share directory id {}: every voter's directory needs its own",
                    v.directory_id
                ));
            }
            if v.endpoints.is_empty() || v.endpoints.len() > BOOTSTRAP_ENDPOINTS_MAX {
                return Err(format!(
                    "voter {} has {} endpoints (expected 1..={BOOTSTRAP_ENDPOINTS_MAX})",
                    v.id,
                    v.endpoints.len()
                ));
            }
            for (j, e) in v.endpoints.iter().enumerate() {
                if e.name.is_empty()
                    || e.name.len() > 255
                    || e.host.is_empty()
                    || e.host.len() > 255
                {
                    return Err(format!(
                        "voter {} endpoint {}://{}:{}: name and host must be 1..=255 bytes",
                        v.id, e.name, e.host, e.port
                    ));
                }
                if e.port == 0 {
                    return Err(format!("voter {} endpoint {}: port 0", v.id, e.name));
                }
                if v.endpoints[..j].iter().any(|f| f.name == e.name) {
                    return Err(format!("voter {} lists endpoint {} twice", v.id, e.name));
                }
            }
        }
        Ok(())
    }

    /// The voter with id `id`, if any.
    pub fn voter(&self, id: NodeId) -> Option<&BootstrapVoter> {
        self.voters.iter().find(|v| v.id == id)
    }

    /// The file's bytes. Panics if [`BootstrapCheckpoint::validate`] fails (a programmer error:
    /// `corum format` validates first).
    pub fn encode(&self) -> Vec<u8> {
        if let Err(reason) = self.validate() {
            panic!("encoding invalid bootstrap voters: {reason}");
        }
        let mut body = Vec::new();
        body.extend_from_slice(&(self.voters.len() as u32).to_le_bytes());
        for v in &self.voters {
            body.extend_from_slice(&v.id.0.to_le_bytes());
            body.extend_from_slice(&v.directory_id.0);
            body.extend_from_slice(&(v.endpoints.len() as u16).to_le_bytes());
            for e in &v.endpoints {
                body.push(e.name.len() as u8);
                body.extend_from_slice(e.name.as_bytes());
                body.push(e.host.len() as u8);
                body.extend_from_slice(e.host.as_bytes());
                body.extend_from_slice(&e.port.to_le_bytes());
            }
        }
        body.extend_from_slice(&(self.features.len() as u16).to_le_bytes());
        for f in &self.features {
            body.push(f.name.len() as u8);
            body.extend_from_slice(f.name.as_bytes());
            body.extend_from_slice(&f.level.to_le_bytes());
        }
        let mut b = Vec::with_capacity(16 + body.len());
        b.extend_from_slice(&BOOTSTRAP_MAGIC);
        b.extend_from_slice(&BOOTSTRAP_FORMAT_VERSION.to_le_bytes());
        b.extend_from_slice(&self.kraft_version.to_le_bytes());
        b.extend_from_slice(&(body.len() as u32).to_le_bytes());
        b.extend_from_slice(&body);
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks the file's bytes; `path` only names the file in errors.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<BootstrapCheckpoint, StorageError> {
        let corrupt = |reason: String| StorageError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        if bytes.len() < 16 {
            return Err(corrupt(format!(
                "{} bytes, shorter than header and checksum",
                bytes.len()
            )));
        }
        if bytes[0..4] != BOOTSTRAP_MAGIC {
            return Err(corrupt(format!("bad magic {:02x?}", &bytes[0..4])));
        }
        let body_len = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
        if bytes.len() != 16 + body_len {
            return Err(corrupt(format!(
                "{} bytes, but the header says {} (torn or truncated)",
                bytes.len(),
                16usize.saturating_add(body_len)
            )));
        }
        let (data, crc) = bytes.split_at(12 + body_len);
        let stored = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        let computed = crc32c::crc32c(data);
        if stored != computed {
            return Err(corrupt(format!(
                "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            )));
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != BOOTSTRAP_FORMAT_VERSION && version != FORMAT_VERSION_VOTERS_ONLY {
            return Err(StorageError::UnsupportedVersion {
                path: path.to_path_buf(),
                version: version.into(),
                supported: BOOTSTRAP_FORMAT_VERSION.into(),
            });
        }
        let kraft_version = u16::from_le_bytes([bytes[6], bytes[7]]);
        let mut r = Reader {
            bytes: &data[12..],
            at: 0,
        };
        let parsed = (|| -> Result<BootstrapCheckpoint, String> {
            let count = r.u32()? as usize;
            if count > BOOTSTRAP_VOTERS_MAX {
                return Err(format!(
                    "{count} voters, above the limit of {BOOTSTRAP_VOTERS_MAX}"
                ));
            }
            let mut voters = Vec::with_capacity(count);
            for _ in 0..count {
                let id = NodeId(r.u32()?);
                let directory_id = Uuid(r.take(16)?.try_into().expect("16 bytes"));
                let n = r.u16()? as usize;
                if n > BOOTSTRAP_ENDPOINTS_MAX {
                    return Err(format!(
                        "voter {id}: {n} endpoints, above {BOOTSTRAP_ENDPOINTS_MAX}"
                    ));
                }
                let mut endpoints = Vec::with_capacity(n);
                for _ in 0..n {
                    let name = r.string()?;
                    let host = r.string()?;
                    let port = r.u16()?;
                    endpoints.push(BootstrapEndpoint { name, host, port });
                }
                voters.push(BootstrapVoter {
                    id,
                    directory_id,
                    endpoints,
                });
            }
            let features = if version == FORMAT_VERSION_VOTERS_ONLY {
                vec![BootstrapFeature {
                    name: METADATA_VERSION.to_owned(),
                    level: VOTERS_ONLY_METADATA_VERSION,
                }]
            } else {
                let n = r.u16()? as usize;
                if n > BOOTSTRAP_FEATURES_MAX {
                    return Err(format!(
                        "{n} features, above the limit of {BOOTSTRAP_FEATURES_MAX}"
                    ));
                }
                let mut features = Vec::with_capacity(n);
                for _ in 0..n {
                    let name = r.string()?;
                    let level = r.u16()?;
                    features.push(BootstrapFeature { name, level });
                }
                features
            };
            if r.at != r.bytes.len() {
                return Err(format!(
                    "{} trailing bytes in the body",
                    r.bytes.len() - r.at
                ));
            }
            let v = BootstrapCheckpoint {
                kraft_version,
                voters,
                features,
            };
            v.validate()?;
            Ok(v)
        })();
        parsed.map_err(corrupt)
    }

    /// Reads `dir/bootstrap.checkpoint` on `disk`, or `None` if there is none.
    pub async fn read<D: Disk>(
        disk: &D,
        dir: &Path,
    ) -> Result<Option<BootstrapCheckpoint>, StorageError> {
        let path = dir.join(BOOTSTRAP_FILE);
        match fsio::read_optional(disk, &path, BOOTSTRAP_BYTES_MAX).await? {
            None => Ok(None),
            Some(bytes) => BootstrapCheckpoint::decode(&bytes, &path).map(Some),
        }
    }

    /// Writes `dir/bootstrap.checkpoint` on `disk` atomically.
    pub async fn write<D: Disk>(&self, disk: &D, dir: &Path) -> Result<(), StorageError> {
        self.validate()
            .map_err(|reason| StorageError::InvalidBootstrap { reason })?;
        fsio::write_atomic(disk, &dir.join(BOOTSTRAP_FILE), &self.encode()).await
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| format!("body ends inside a field at byte {}", self.at))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.take(1)?[0] as usize;
        let at = self.at;
        std::str::from_utf8(self.take(n)?)
            .map(str::to_owned)
            .map_err(|_| format!("invalid UTF-8 at byte {at}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_engine::disk::SimDisk;
    use futures_lite::future::block_on;
    use proptest::prelude::*;

    fn three() -> BootstrapCheckpoint {
        BootstrapCheckpoint {
            kraft_version: 1,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
            voters: (1..=3)
                .map(|i| BootstrapVoter {
                    id: NodeId(i),
                    directory_id: Uuid([i as u8; 16]),
                    endpoints: vec![BootstrapEndpoint {
                        name: "CONTROLLER".into(),
                        host: "127.0.0.1".into(),
                        port: 9092 + i as u16,
                    }],
                })
                .collect(),
        }
    }

    fn arb_voters() -> impl Strategy<Value = BootstrapCheckpoint> {
        let voters = proptest::collection::vec(
            (
                proptest::collection::vec(("[A-Z]{1,8}", "[a-z0-9.]{1,12}", 1u16..), 1..3),
                any::<u128>(),
            ),
            1..5,
        );
        // Any release this controller supports, each other feature at any level it allows.
        let features = (7u16..=27, 0u16..=1, 0u16..=2).prop_map(|(mv, gv, tv)| {
            let f = |name: &str, level| BootstrapFeature {
                name: name.into(),
                level,
            };
            vec![
                f("group.version", gv),
                f(METADATA_VERSION, mv),
                f("transaction.version", tv),
            ]
        });
        (voters, features).prop_map(|(vs, features)| BootstrapCheckpoint {
            kraft_version: 1,
            features,
            voters: vs
                .into_iter()
                .enumerate()
                .map(|(i, (eps, d))| {
                    let mut endpoints: Vec<BootstrapEndpoint> = Vec::new();
                    for (name, host, port) in eps {
                        if !endpoints.iter().any(|e| e.name == name) {
                            endpoints.push(BootstrapEndpoint { name, host, port });
                        }
                    }
                    BootstrapVoter {
                        id: NodeId(i as u32 * 7),
                        // The index in the top bits keeps directory ids distinct.
                        directory_id: Uuid::from_random_bits((d >> 8) | ((i as u128 + 1) << 120)),
                        endpoints,
                    }
                })
                .collect(),
        })
    }

    /// The bytes of a one-voter set are pinned, so a layout change shows; a format version 1
    /// file (no features) still reads, as `metadata.version` 4.1-IV1 alone.
    #[test]
    fn golden_bytes() {
        let features = vec![BootstrapFeature {
            name: METADATA_VERSION.into(),
            level: 21,
        }];
        let v = BootstrapCheckpoint {
            kraft_version: 1,
            voters: vec![BootstrapVoter {
                id: NodeId(1),
                directory_id: Uuid([0xaa; 16]),
                endpoints: vec![BootstrapEndpoint {
                    name: "C".into(),
                    host: "h".into(),
                    port: 9093,
                }],
            }],
            features,
        };
        let seal = |mut b: Vec<u8>| {
            let crc = crc32c::crc32c(&b);
            b.extend_from_slice(&crc.to_le_bytes());
            b
        };
        let voters_body = |b: &mut Vec<u8>| {
            b.extend_from_slice(&[1, 0, 0, 0, 1, 0, 0, 0]);
            b.extend_from_slice(&[0xaa; 16]);
            b.extend_from_slice(&[1, 0, 1, b'C', 1, b'h', 0x85, 0x23]);
        };
        let mut want = Vec::new();
        want.extend_from_slice(b"CBVT");
        want.extend_from_slice(&[2, 0, 1, 0]);
        want.extend_from_slice(&[53, 0, 0, 0]);
        voters_body(&mut want);
        want.extend_from_slice(&[1, 0, 16]);
        want.extend_from_slice(b"metadata.version");
        want.extend_from_slice(&[21, 0]);
        let want = seal(want);
        assert_eq!(v.encode(), want);
        assert_eq!(
            BootstrapCheckpoint::decode(&want, Path::new("b")).unwrap(),
            v
        );

        let mut v1 = Vec::new();
        v1.extend_from_slice(b"CBVT");
        v1.extend_from_slice(&[1, 0, 1, 0]);
        v1.extend_from_slice(&[32, 0, 0, 0]);
        voters_body(&mut v1);
        let read = BootstrapCheckpoint::decode(&seal(v1), Path::new("b")).unwrap();
        assert_eq!(read.voters, v.voters);
        assert_eq!(
            read.features,
            vec![BootstrapFeature {
                name: METADATA_VERSION.into(),
                level: 27
            }]
        );
    }

    /// A written set reads back; a static quorum's checkpoint holds no voters, nor does a
    /// joining controller's.
    #[test]
    fn write_read() {
        let disk = SimDisk::new(1);
        let dir = Path::new("/data");
        let read = || block_on(BootstrapCheckpoint::read(&disk, dir)).unwrap();
        assert_eq!(read(), None);
        block_on(three().write(&disk, dir)).unwrap();
        assert_eq!(read(), Some(three()));
        let stat = BootstrapCheckpoint {
            kraft_version: 0,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
            voters: vec![],
        };
        block_on(stat.write(&disk, dir)).unwrap();
        assert_eq!(read(), Some(stat.clone()));
        assert!(!stat.is_joining() && !three().is_joining());
        // A dynamic quorum's controller formatted to join: kraft.version 1, no voter.
        let joining = BootstrapCheckpoint {
            kraft_version: 1,
            features: corum_controller::control::feature_control::default_bootstrap_features(),
            voters: vec![],
        };
        block_on(joining.write(&disk, dir)).unwrap();
        assert_eq!(read(), Some(joining.clone()));
        assert!(joining.is_joining());
        assert_eq!(disk.paths(), vec![dir.join(BOOTSTRAP_FILE)]);
        assert_eq!(three().voter(NodeId(2)).unwrap().endpoints[0].port, 9094);
    }

    /// Each rule of validate() is enforced on write and on read.
    #[test]
    fn validation_rules() {
        let mut cases: Vec<(BootstrapCheckpoint, &str)> = Vec::new();
        let mut v = three();
        v.kraft_version = 0;
        cases.push((v, "static quorum"));
        let mut v = three();
        v.kraft_version = 2;
        cases.push((v, "unknown kraft.version"));
        let mut v = three();
        v.voters[1].id = NodeId(1);
        cases.push((v, "listed twice"));
        let mut v = three();
        v.voters[1].directory_id = v.voters[0].directory_id;
        cases.push((v, "share directory id"));
        let mut v = three();
        v.voters[0].directory_id = Uuid::ZERO;
        cases.push((v, "all-zero"));
        let mut v = three();
        v.voters[0].endpoints.clear();
        cases.push((v, "endpoints"));
        let mut v = three();
        v.voters[0].endpoints[0].host.clear();
        cases.push((v, "1..=255 bytes"));
        let mut v = three();
        v.voters[0].endpoints[0].port = 0;
        cases.push((v, "port 0"));
        let mut v = three();
        let e = v.voters[0].endpoints[0].clone();
        v.voters[0].endpoints.push(e);
        cases.push((v, "twice"));
        let mut v = three();
        v.features.retain(|f| f.name != METADATA_VERSION);
        cases.push((v, "must set metadata.version"));
        let mut v = three();
        v.features.reverse();
        cases.push((v, "name order"));
        let mut v = three();
        v.features[0].name = "a.version".into();
        cases.push((v, "not supported"));
        let mut v = three();
        v.features[1].level = 99;
        cases.push((v, "supports levels"));
        let disk = SimDisk::new(1);
        for (v, want) in cases {
            let err = v.validate().unwrap_err();
            assert!(err.contains(want), "{want}: {err}");
            assert!(matches!(
                block_on(v.write(&disk, Path::new("/data"))),
                Err(StorageError::InvalidBootstrap { .. })
            ));
        }
        assert!(disk.paths().is_empty(), "nothing written");
    }

    /// Structural damage is reported precisely.
    #[test]
    fn decode_errors() {
        let p = Path::new("bootstrap.checkpoint");
        let good = three().encode();
        let err = |b: &[u8]| BootstrapCheckpoint::decode(b, p).unwrap_err().to_string();
        assert!(err(&good[..10]).contains("shorter than header"));
        assert!(err(&good[..good.len() - 1]).contains("torn or truncated"));
        let mut b = good.clone();
        b[1] = 0;
        assert!(err(&b).contains("bad magic"));
        let mut b = good.clone();
        b[20] ^= 0x40;
        assert!(err(&b).contains("checksum mismatch"));
        // Well-sealed but wrong: version, trailing bytes, short body, bad UTF-8, bad rules.
        let reseal = |mut b: Vec<u8>| {
            let n = b.len() - 4;
            let crc = crc32c::crc32c(&b[..n]);
            b[n..].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let mut b = good.clone();
        b[4] = 9;
        assert!(err(&reseal(b)).contains("unsupported format version 9"));
        // The features close the body: voters' bytes go before them.
        let features_len = 2 + three()
            .features
            .iter()
            .map(|f| 3 + f.name.len())
            .sum::<usize>();
        let grow = |extra: &[u8], count: u32| {
            let voters_end = good.len() - 4 - features_len;
            let mut b = good[..voters_end].to_vec();
            b.extend_from_slice(extra);
            b.extend_from_slice(&good[voters_end..good.len() - 4]);
            let body_len = (b.len() - 12) as u32;
            b[8..12].copy_from_slice(&body_len.to_le_bytes());
            b[12..16].copy_from_slice(&count.to_le_bytes());
            b.extend_from_slice(&[0; 4]);
            reseal(b)
        };
        // The extra byte shifts the feature count (4, two bytes little-endian) by one byte.
        let count = three().features.len() << 8;
        assert!(err(&grow(&[0], 3)).contains(&format!("{count} features, above the limit")));
        let mut trailing = good[..good.len() - 4].to_vec();
        trailing.push(0);
        let body_len = (trailing.len() - 12) as u32;
        trailing[8..12].copy_from_slice(&body_len.to_le_bytes());
        trailing.extend_from_slice(&[0; 4]);
        assert!(err(&reseal(trailing)).contains("trailing bytes"));
        assert!(err(&grow(&[], 4)).contains("endpoints, above 16"));
        let mut short = good[..good.len() - 5].to_vec();
        let body_len = (short.len() - 12) as u32;
        short[8..12].copy_from_slice(&body_len.to_le_bytes());
        short.extend_from_slice(&[0; 4]);
        assert!(err(&reseal(short)).contains("ends inside a field"));
        assert!(err(&grow(&[], 1000)).contains("above the limit"));
        let mut voter = vec![9, 0, 0, 0];
        voter.extend_from_slice(&[9; 16]);
        voter.extend_from_slice(&[1, 0, 1, 0xff, 1, b'h', 1, 0]);
        assert!(err(&grow(&voter, 4)).contains("invalid UTF-8"));
        let mut b = good.clone();
        b[6] = 0;
        assert!(err(&reseal(b)).contains("static quorum"));
    }

    proptest! {
        /// Every valid set round-trips.
        #[test]
        fn round_trip(v in arb_voters()) {
            prop_assert_eq!(BootstrapCheckpoint::decode(&v.encode(), Path::new("b")).unwrap(), v);
        }

        /// Random bytes never panic the decoder, and are accepted only with a valid checksum.
        #[test]
        fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            if BootstrapCheckpoint::decode(&bytes, Path::new("b")).is_ok() {
                let n = bytes.len() - 4;
                prop_assert_eq!(u32::from_le_bytes(bytes[n..].try_into().unwrap()), crc32c::crc32c(&bytes[..n]));
            }
        }

        /// Changing any one byte of a valid file is always detected.
        #[test]
        fn mutation_detected(v in arb_voters(), at in any::<prop::sample::Index>(), x in 1u8..) {
            let mut b = v.encode();
            let i = at.index(b.len());
            b[i] ^= x;
            prop_assert!(BootstrapCheckpoint::decode(&b, Path::new("b")).is_err());
        }
    }
}
