//! Raft control records and the payload of control batches.
//!
//! A control batch (control bit set in the batch attributes) carries one rkyv-encoded
//! [`ControlBatch`]: a format number and the batch's records, one per record of the batch. The
//! engine stores it like any other payload; only this module reads it. Decoding validates the
//! bytes with bytecheck, so bytes from disk or network that are not a control batch are an
//! error, never undefined behaviour.
//!
//! | record | written by | meaning |
//! |---|---|---|
//! | `LeaderChange` | a new leader, first entry of its epoch | the epoch has a leader; committing it commits the epoch |
//! | `Voters` (KIP-853 VotersRecord) | the leader on AddVoter / RemoveVoter / UpdateVoter | the whole voter set from this offset on, in force as soon as it is in the log, committed or not |
//! | `KRaftVersion` | the leader of a static quorum on an upgrade, with the Voters record naming every directory id | `kraft.version` from this offset on (1: a dynamic quorum), in force as soon as it is in the log, like Voters |

use corum_types::{Epoch, NodeId};

use crate::error::{Error, Result};
use crate::types::{Payload, VoterSet};

/// The only format so far. A reader rejects any other.
pub const CONTROL_FORMAT_V1: u16 = 1;

/// The highest `kraft.version` this build supports (KIP-853's dynamic quorum); it supports
/// every version from 0.
pub const KRAFT_VERSION_MAX: u16 = 1;

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct LeaderChangeRecord {
    pub epoch: Epoch,
    pub leader: NodeId,
    /// The voters that granted the leader its epoch.
    pub granted_by: Vec<NodeId>,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct VotersRecord {
    pub version: u16,
    pub voters: VoterSet,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct KRaftVersionRecord {
    pub version: u16,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum ControlRecord {
    LeaderChange(LeaderChangeRecord),
    Voters(VotersRecord),
    KRaftVersion(KRaftVersionRecord),
}

/// The payload of a control batch.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ControlBatch {
    pub format: u16,
    pub records: Vec<ControlRecord>,
}

/// Encodes `records` as a control batch payload.
pub fn encode(records: Vec<ControlRecord>) -> Payload {
    let batch = ControlBatch {
        format: CONTROL_FORMAT_V1,
        records,
    };
    let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&batch)
        .expect("serialising owned control records into a Vec cannot fail");
    Payload::from(bytes.as_slice())
}

/// Validates and decodes a control batch payload; checks the format and that every voter set
/// is well formed.
pub fn decode(bytes: &[u8]) -> Result<Vec<ControlRecord>> {
    // Payloads come from arbitrary buffers: copy into an aligned one (control batches are rare).
    let mut aligned = rkyv::util::AlignedVec::<16>::new();
    aligned.extend_from_slice(bytes);
    let batch = rkyv::from_bytes::<ControlBatch, rkyv::rancor::Error>(&aligned).map_err(|e| {
        Error::Decode {
            what: "control batch",
            reason: e.to_string(),
        }
    })?;
    if batch.format != CONTROL_FORMAT_V1 {
        return Err(Error::Decode {
            what: "control batch",
            reason: format!("unknown format {}", batch.format),
        });
    }
    if batch.records.is_empty() {
        return Err(Error::Decode {
            what: "control batch",
            reason: "no records".into(),
        });
    }
    for r in &batch.records {
        if let ControlRecord::Voters(v) = r {
            v.voters.validate()?;
        }
    }
    Ok(batch.records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Endpoint, ReplicaKey, Voter};
    use corum_types::Uuid;
    use proptest::prelude::*;

    fn arb_record() -> impl Strategy<Value = ControlRecord> {
        prop_oneof![
            (
                any::<u64>(),
                any::<u32>(),
                proptest::collection::vec(any::<u32>(), 0..5)
            )
                .prop_map(|(e, l, g)| ControlRecord::LeaderChange(
                    LeaderChangeRecord {
                        epoch: Epoch(e),
                        leader: NodeId(l),
                        granted_by: g.into_iter().map(NodeId).collect(),
                    }
                )),
            proptest::collection::btree_map(
                any::<u32>(),
                (any::<[u8; 16]>(), "[a-z]{0,8}", any::<u16>()),
                1..6
            )
            .prop_map(|m| ControlRecord::Voters(VotersRecord {
                version: 0,
                voters: VoterSet::new(
                    m.into_iter()
                        .map(|(id, (d, host, port))| Voter {
                            key: ReplicaKey {
                                id: NodeId(id),
                                directory_id: Uuid(d)
                            },
                            endpoints: vec![Endpoint {
                                listener: "CONTROLLER".into(),
                                host,
                                port
                            }],
                        })
                        .collect()
                )
                .unwrap(),
            })),
            any::<u16>()
                .prop_map(|v| ControlRecord::KRaftVersion(KRaftVersionRecord { version: v })),
        ]
    }

    proptest! {
        /// Every control batch decodes back to the records that were encoded.
        #[test]
        fn round_trip(records in proptest::collection::vec(arb_record(), 1..4)) {
            let bytes = encode(records.clone());
            prop_assert_eq!(decode(&bytes).unwrap(), records);
        }

        /// Corrupted or arbitrary bytes are rejected with an error or decode to a valid batch;
        /// they never panic.
        #[test]
        fn bad_bytes_do_not_panic(records in proptest::collection::vec(arb_record(), 1..3),
                                  flip in any::<(usize, u8)>(),
                                  junk in proptest::collection::vec(any::<u8>(), 0..128)) {
            let mut bytes = encode(records).to_vec();
            let i = flip.0 % bytes.len();
            bytes[i] ^= flip.1 | 1;
            let _ = decode(&bytes);
            let _ = decode(&junk);
        }
    }

    /// A truncated payload and a wrong format number are clear errors.
    #[test]
    fn rejects_truncated_and_unknown_format() {
        let bytes = encode(vec![ControlRecord::KRaftVersion(KRaftVersionRecord {
            version: 1,
        })]);
        assert!(decode(&bytes[..bytes.len() - 3]).is_err());
        assert!(decode(&[]).is_err());
        let other = rkyv::to_bytes::<rkyv::rancor::Error>(&ControlBatch {
            format: 9,
            records: vec![ControlRecord::KRaftVersion(KRaftVersionRecord {
                version: 1,
            })],
        })
        .unwrap();
        let err = decode(&other).unwrap_err();
        assert!(err.to_string().contains("unknown format 9"), "{err}");
    }
}
