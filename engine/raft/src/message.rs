//! Messages between replicas (KIP-595 with KIP-996 pre-vote and KIP-853 voter changes), pushed
//! to voters and pulled by observers. All are rkyv-archivable: the network layer ships one
//! [`Message`] per frame and decodes it with [`Message::decode`], which validates the bytes.
//!
//! | message | from → to | purpose |
//! |---|---|---|
//! | `Vote` / `VoteResponse` | prospective or candidate → voters | pre-vote (`pre_vote`, epoch not bumped) and vote |
//! | `BeginQuorumEpoch` | new leader → voters | announce the epoch's leader |
//! | `EndQuorumEpoch` | resigning leader → voters | elect a successor now, preferred ones first |
//! | `Append` / `AppendResponse` | leader → voter | pipelined replication, HWM, snapshot hint |
//! | `Fetch` / `FetchResponse` | observer (or lost voter) → leader | pull replication with long-poll |
//! | `FetchSnapshot` / `FetchSnapshotResponse` | replica behind the log start → leader | snapshot chunks |
//! | `AddVoter` / `RemoveVoter` / `UpdateVoter` / `VoterChangeResponse` | admin or voter → leader | KIP-853 |
//! | `UpgradeKraftVersion` (answered by `VoterChangeResponse`) | admin → leader | KIP-853: a static quorum becomes dynamic |

use corum_types::{Epoch, LogOffset, NodeId};

use crate::error::{Error, Result, VoterChangeError};
use crate::types::{Batch, Payload, ReplicaKey, SnapshotId, Voter, VoterSet};

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct VoteRequest {
    /// The epoch the candidate asks for (its epoch + 1 for a pre-vote).
    pub epoch: Epoch,
    pub candidate: ReplicaKey,
    /// Epoch of the candidate's last entry, and its log end offset.
    pub last_epoch: Epoch,
    pub end_offset: LogOffset,
    pub pre_vote: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct VoteResponse {
    /// The responder's current epoch.
    pub epoch: Epoch,
    /// The epoch of the request this answers.
    pub request_epoch: Epoch,
    pub voter: ReplicaKey,
    pub granted: bool,
    pub pre_vote: bool,
    /// The leader of `epoch`, if the responder knows one.
    pub leader: Option<NodeId>,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct BeginQuorumEpoch {
    pub epoch: Epoch,
    pub leader: NodeId,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct EndQuorumEpoch {
    pub epoch: Epoch,
    pub leader: NodeId,
    /// Most caught-up first: the first starts its pre-vote at once, later ones wait longer.
    pub preferred_successors: Vec<NodeId>,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AppendRequest {
    pub epoch: Epoch,
    pub leader: NodeId,
    /// Per-follower sequence number, echoed in the response.
    pub seq: u64,
    /// The batches follow the entry ending at `prev_end`, whose epoch is `prev_epoch`.
    pub prev_end: LogOffset,
    pub prev_epoch: Epoch,
    pub batches: Vec<Batch>,
    pub high_watermark: LogOffset,
    /// Set when the follower is behind the leader's log start: fetch this snapshot.
    pub snapshot: Option<SnapshotId>,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum AppendResult {
    /// The follower's log matches the leader's up to `received_end`; it is durable up to
    /// `durable_end` (<= `received_end`). Only `durable_end` counts toward the HWM.
    Ok {
        received_end: LogOffset,
        durable_end: LogOffset,
    },
    /// The entry before `prev_end` did not match. The follower's log at `end_offset` ends with
    /// epoch `last_epoch`, whose run starts at `last_epoch_start`: the leader finds the
    /// divergence point from this in one round trip.
    Mismatch {
        end_offset: LogOffset,
        last_epoch: Epoch,
        last_epoch_start: LogOffset,
    },
    /// The request's epoch is older than the follower's (`epoch` of the response).
    StaleEpoch,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AppendResponse {
    pub epoch: Epoch,
    pub replica: ReplicaKey,
    pub seq: u64,
    pub result: AppendResult,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct FetchRequest {
    pub epoch: Epoch,
    pub replica: ReplicaKey,
    /// The fetcher's log end offset and the epoch of its last entry.
    pub fetch_offset: LogOffset,
    pub last_fetched_epoch: Epoch,
    /// The HWM the fetcher knows; the leader holds the fetch until it can tell something newer.
    pub high_watermark: LogOffset,
    pub wait_max_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum FetchResult {
    /// Batches starting at `fetch_offset` (possibly none: the HWM moved or the wait expired).
    /// `fetch_offset` and `last_fetched_epoch` echo the request, so a late or duplicated answer
    /// is never applied to a log that changed since.
    Batches {
        fetch_offset: LogOffset,
        last_fetched_epoch: Epoch,
        batches: Vec<Batch>,
        high_watermark: LogOffset,
    },
    /// The fetcher's log diverges: truncate to at most `end_offset`, where the leader's log
    /// ends epoch `epoch`.
    Diverging {
        fetch_offset: LogOffset,
        last_fetched_epoch: Epoch,
        epoch: Epoch,
        end_offset: LogOffset,
    },
    /// The fetch offset is below the leader's log start: fetch this snapshot.
    SnapshotNeeded { snapshot: SnapshotId },
    /// The responder does not lead `epoch`; `leader` in the response is its best guess.
    NotLeader,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct FetchResponse {
    pub epoch: Epoch,
    pub leader: Option<NodeId>,
    pub result: FetchResult,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct FetchSnapshotRequest {
    pub epoch: Epoch,
    pub replica: ReplicaKey,
    pub snapshot: SnapshotId,
    pub position: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum FetchSnapshotResult {
    Chunk {
        snapshot: SnapshotId,
        voters: VoterSet,
        /// The snapshot's `kraft.version` ([`crate::Snapshot::kraft_version`]).
        kraft_version: u16,
        size_total: u64,
        position: u64,
        bytes: Payload,
    },
    /// The leader no longer has that snapshot (a newer one replaced it).
    SnapshotNotFound,
    NotLeader,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct FetchSnapshotResponse {
    pub epoch: Epoch,
    pub leader: Option<NodeId>,
    pub result: FetchSnapshotResult,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AddVoterRequest {
    pub request_id: u64,
    pub voter: Voter,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct RemoveVoterRequest {
    pub request_id: u64,
    pub voter: ReplicaKey,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct UpdateVoterRequest {
    pub request_id: u64,
    pub voter: Voter,
}

/// KIP-853's `kraft.version` upgrade (an admin's UpdateFeatures for `kraft.version`): the
/// leader of a static quorum writes the KRaftVersion record and the voter set with every
/// voter's directory id ([`crate::RaftCore::upgrade_kraft_version`]). Answered by a
/// [`VoterChangeResponse`] once committed (at once for `validate_only` or a version already in
/// force).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct UpgradeKraftVersionRequest {
    pub request_id: u64,
    pub version: u16,
    pub validate_only: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct VoterChangeResponse {
    pub request_id: u64,
    /// Ok once the new voter set committed.
    pub result: std::result::Result<(), VoterChangeError>,
    pub leader: Option<NodeId>,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum Message {
    Vote(VoteRequest),
    VoteResponse(VoteResponse),
    BeginQuorumEpoch(BeginQuorumEpoch),
    EndQuorumEpoch(EndQuorumEpoch),
    Append(AppendRequest),
    AppendResponse(AppendResponse),
    Fetch(FetchRequest),
    FetchResponse(FetchResponse),
    FetchSnapshot(FetchSnapshotRequest),
    FetchSnapshotResponse(FetchSnapshotResponse),
    AddVoter(AddVoterRequest),
    RemoveVoter(RemoveVoterRequest),
    UpdateVoter(UpdateVoterRequest),
    VoterChangeResponse(VoterChangeResponse),
    /// Appended last: the variant order is the wire format.
    UpgradeKraftVersion(UpgradeKraftVersionRequest),
}

impl Message {
    /// rkyv bytes of the message (one network frame's body).
    pub fn encode(&self) -> rkyv::util::AlignedVec {
        rkyv::to_bytes::<rkyv::rancor::Error>(self)
            .expect("serialising an owned message cannot fail")
    }

    /// Validates (bytecheck) and decodes a frame body; copies into an aligned buffer first if
    /// `bytes` is not 16-byte aligned. Then applies [`Message::validate`].
    pub fn decode(bytes: &[u8]) -> Result<Message> {
        let decoded = if (bytes.as_ptr() as usize) % 16 == 0 {
            rkyv::from_bytes::<Message, rkyv::rancor::Error>(bytes)
        } else {
            let mut aligned = rkyv::util::AlignedVec::<16>::new();
            aligned.extend_from_slice(bytes);
            rkyv::from_bytes::<Message, rkyv::rancor::Error>(&aligned)
        };
        let msg = decoded.map_err(|e| Error::Decode {
            what: "message",
            reason: e.to_string(),
        })?;
        msg.validate()?;
        Ok(msg)
    }

    /// The rules a message from the network must meet beyond what rkyv's validation checks
    /// (which only proves the bytes are a well-formed archive): the batches of an append or a
    /// fetch response continue the log from the message's start offset and are non-empty
    /// ([`Error::BatchesNotContiguous`]); a snapshot chunk's voter set is sorted and unique
    /// ([`Error::VoterSet`]). [`Message::decode`] applies them; a transport that validates a
    /// message embedded in its own archive (the node's peer envelope, the client protocol's
    /// Fetch answers) calls this (or the per-message `validate`) before stepping it into a core.
    pub fn validate(&self) -> Result<()> {
        match self {
            Message::Append(a) => a.validate(),
            Message::FetchResponse(r) => r.validate(),
            Message::FetchSnapshotResponse(r) => r.validate(),
            _ => Ok(()),
        }
    }
}

impl AppendRequest {
    /// [`Message::validate`]'s rule for an append: its batches continue the log from
    /// `prev_end` and are non-empty.
    pub fn validate(&self) -> Result<()> {
        check_batches(self.prev_end, &self.batches)
    }
}

impl FetchResponse {
    /// [`Message::validate`]'s rule for a fetch response: its batches continue the log from
    /// the fetch offset and are non-empty.
    pub fn validate(&self) -> Result<()> {
        match &self.result {
            FetchResult::Batches {
                fetch_offset,
                batches,
                ..
            } => check_batches(*fetch_offset, batches),
            _ => Ok(()),
        }
    }
}

impl FetchSnapshotResponse {
    /// [`Message::validate`]'s rule for a snapshot chunk: its voter set is sorted and unique.
    pub fn validate(&self) -> Result<()> {
        match &self.result {
            FetchSnapshotResult::Chunk { voters, .. } => voters.validate(),
            _ => Ok(()),
        }
    }
}

/// Batches in a message must be contiguous from `start` and non-empty.
fn check_batches(start: LogOffset, batches: &[Batch]) -> Result<()> {
    let mut at = start;
    for b in batches {
        if b.base_offset != at || b.record_count == 0 {
            return Err(Error::BatchesNotContiguous {
                base_offset: b.base_offset,
                record_count: b.record_count,
                expected: at,
            });
        }
        at = b.end_offset();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_types::Uuid;
    use proptest::prelude::*;

    fn key(i: u32) -> ReplicaKey {
        ReplicaKey {
            id: NodeId(i),
            directory_id: Uuid([i as u8; 16]),
        }
    }

    fn arb_message() -> impl Strategy<Value = Message> {
        let batches = (
            0u64..1000,
            proptest::collection::vec(
                (
                    1u32..5,
                    any::<u64>(),
                    any::<bool>(),
                    proptest::collection::vec(any::<u8>(), 0..32),
                ),
                0..4,
            ),
        );
        prop_oneof![
            (any::<u64>(), any::<u32>(), any::<bool>()).prop_map(|(e, c, p)| Message::Vote(
                VoteRequest {
                    epoch: Epoch(e),
                    candidate: key(c),
                    last_epoch: Epoch(e / 2),
                    end_offset: LogOffset(e / 3),
                    pre_vote: p,
                }
            )),
            (any::<u64>(), any::<bool>(), any::<Option<u32>>()).prop_map(|(e, g, l)| {
                Message::VoteResponse(VoteResponse {
                    epoch: Epoch(e),
                    request_epoch: Epoch(e),
                    voter: key(1),
                    granted: g,
                    pre_vote: !g,
                    leader: l.map(NodeId),
                })
            }),
            (batches, any::<u64>()).prop_map(|((start, bs), hwm)| {
                let mut at = LogOffset(start);
                let batches = bs
                    .into_iter()
                    .map(|(n, e, c, p)| {
                        let b = Batch {
                            base_offset: at,
                            epoch: Epoch(e),
                            record_count: n,
                            control: c,
                            timestamp_ms: -1,
                            payload: p.into(),
                        };
                        at = b.end_offset();
                        b
                    })
                    .collect();
                Message::Append(AppendRequest {
                    epoch: Epoch(3),
                    leader: NodeId(1),
                    seq: hwm,
                    prev_end: LogOffset(start),
                    prev_epoch: Epoch(2),
                    batches,
                    high_watermark: LogOffset(hwm),
                    snapshot: None,
                })
            }),
            any::<(u64, u64)>().prop_map(|(a, b)| Message::AppendResponse(AppendResponse {
                epoch: Epoch(a),
                replica: key(2),
                seq: b,
                result: AppendResult::Mismatch {
                    end_offset: LogOffset(b),
                    last_epoch: Epoch(a),
                    last_epoch_start: LogOffset(b / 2)
                }
            })),
            any::<u64>().prop_map(|a| Message::FetchResponse(FetchResponse {
                epoch: Epoch(a),
                leader: None,
                result: FetchResult::SnapshotNeeded {
                    snapshot: SnapshotId {
                        end_offset: LogOffset(a),
                        epoch: Epoch(1)
                    }
                }
            })),
            any::<u64>().prop_map(|a| Message::RemoveVoter(RemoveVoterRequest {
                request_id: a,
                voter: key(3)
            })),
            any::<u64>().prop_map(|a| Message::VoterChangeResponse(VoterChangeResponse {
                request_id: a,
                result: Err(VoterChangeError::ChangePending),
                leader: Some(NodeId(1))
            })),
            (any::<u64>(), any::<u16>(), any::<bool>()).prop_map(|(a, v, validate_only)| {
                Message::UpgradeKraftVersion(UpgradeKraftVersionRequest {
                    request_id: a,
                    version: v,
                    validate_only,
                })
            }),
        ]
    }

    proptest! {
        /// Every message decodes back to itself, from aligned and from unaligned buffers.
        #[test]
        fn round_trip(m in arb_message()) {
            let bytes = m.encode();
            prop_assert_eq!(&Message::decode(&bytes).unwrap(), &m);
            let mut shifted = vec![0u8; bytes.len() + 1];
            shifted[1..].copy_from_slice(&bytes);
            prop_assert_eq!(&Message::decode(&shifted[1..]).unwrap(), &m);
        }

        /// Flipped bits and random bytes give an error or a valid message, never a panic.
        #[test]
        fn bad_bytes_do_not_panic(m in arb_message(), flip in any::<(usize, u8)>(),
                                  junk in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut bytes = m.encode().to_vec();
            let i = flip.0 % bytes.len();
            bytes[i] ^= flip.1 | 1;
            let _ = Message::decode(&bytes);
            let _ = Message::decode(&junk);
        }
    }

    /// Batches from `start`, each possibly empty (`n == 0`) or one offset past where the
    /// previous one ended (`gap == 2`), with whether they continue the log (checked naively).
    fn arb_maybe_gapped_batches() -> impl Strategy<Value = (u64, Vec<Batch>, bool)> {
        (
            0u64..1000,
            proptest::collection::vec(
                (
                    0u32..4,
                    0u64..3,
                    proptest::collection::vec(any::<u8>(), 0..16),
                ),
                0..4,
            ),
        )
            .prop_map(|(start, bs)| {
                let contiguous = bs.iter().all(|(n, gap, _)| *n > 0 && *gap < 2);
                let mut at = LogOffset(start);
                let batches = bs
                    .into_iter()
                    .map(|(n, gap, p)| {
                        let b = Batch {
                            base_offset: at.add(gap / 2),
                            epoch: Epoch(1),
                            record_count: n,
                            control: false,
                            timestamp_ms: -1,
                            payload: p.into(),
                        };
                        at = b.end_offset();
                        b
                    })
                    .collect();
                (start, batches, contiguous)
            })
    }

    proptest! {
        /// `validate` refuses exactly the appends and fetch responses whose batches leave a
        /// gap or are empty, naming the batch, and `decode` refuses the same messages: one
        /// rule for a message decoded on its own and one embedded in another archive.
        #[test]
        fn validate_refuses_exactly_the_gapped_batches(
            (start, batches, contiguous) in arb_maybe_gapped_batches(),
            fetch in any::<bool>(),
        ) {
            let m = if fetch {
                Message::FetchResponse(FetchResponse {
                    epoch: Epoch(2),
                    leader: Some(NodeId(1)),
                    result: FetchResult::Batches {
                        fetch_offset: LogOffset(start),
                        last_fetched_epoch: Epoch(1),
                        batches,
                        high_watermark: LogOffset(start),
                    },
                })
            } else {
                Message::Append(AppendRequest {
                    epoch: Epoch(2),
                    leader: NodeId(1),
                    seq: 3,
                    prev_end: LogOffset(start),
                    prev_epoch: Epoch(1),
                    batches,
                    high_watermark: LogOffset(start),
                    snapshot: None,
                })
            };
            let checked = m.validate();
            prop_assert_eq!(checked.is_ok(), contiguous, "{:?}", checked);
            if let Err(e) = &checked {
                prop_assert!(matches!(e, Error::BatchesNotContiguous { .. }), "{e}");
            }
            prop_assert_eq!(Message::decode(&m.encode()).err(), checked.err());
        }
    }

    /// A snapshot chunk whose voter set is empty is refused by `validate` and by `decode`; a
    /// chunk with a valid set and messages without batches or voter sets pass.
    #[test]
    fn validate_checks_snapshot_chunk_voter_sets() {
        let chunk = |voters: VoterSet| {
            Message::FetchSnapshotResponse(FetchSnapshotResponse {
                epoch: Epoch(1),
                leader: Some(NodeId(1)),
                result: FetchSnapshotResult::Chunk {
                    kraft_version: 1,
                    snapshot: SnapshotId {
                        end_offset: LogOffset(10),
                        epoch: Epoch(1),
                    },
                    voters,
                    size_total: 1,
                    position: 0,
                    bytes: Payload::from(&b"x"[..]),
                },
            })
        };
        let bad = chunk(VoterSet::default());
        assert!(matches!(bad.validate(), Err(Error::VoterSet(_))));
        assert!(matches!(
            Message::decode(&bad.encode()),
            Err(Error::VoterSet(_))
        ));
        let one = VoterSet::new(vec![Voter {
            key: key(1),
            endpoints: vec![],
        }])
        .unwrap();
        chunk(one).validate().unwrap();
        Message::Vote(VoteRequest {
            epoch: Epoch(1),
            candidate: key(1),
            last_epoch: Epoch(0),
            end_offset: LogOffset(0),
            pre_vote: true,
        })
        .validate()
        .unwrap();
    }

    /// An append whose batches skip offsets is rejected at decode time.
    #[test]
    fn rejects_gapped_batches() {
        let b = |base: u64| Batch {
            base_offset: LogOffset(base),
            epoch: Epoch(1),
            record_count: 2,
            control: false,
            timestamp_ms: -1,
            payload: Payload::from(&b"x"[..]),
        };
        let m = Message::Append(AppendRequest {
            epoch: Epoch(1),
            leader: NodeId(1),
            seq: 1,
            prev_end: LogOffset(0),
            prev_epoch: Epoch(0),
            batches: vec![b(0), b(3)],
            high_watermark: LogOffset(0),
            snapshot: None,
        });
        let err = Message::decode(&m.encode()).unwrap_err();
        assert!(err.to_string().contains("does not continue"), "{err}");
    }
}
