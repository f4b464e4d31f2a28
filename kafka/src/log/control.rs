//! corum's Raft control records as Kafka's: a control record's key is the control type (int16
//! key version 0, int16 type) and its value the message at version 0 (each of these messages
//! starts with its own `Version` field).
//!
//! | corum (`corum_raft::control`) | Kafka | type |
//! |---|---|---|
//! | `LeaderChange` | `LeaderChangeMessage` v0 | 2 |
//! | (snapshot start) | `SnapshotHeaderRecord` v0 | 3 |
//! | (snapshot end) | `SnapshotFooterRecord` v0 | 4 |
//! | `KRaftVersion` | `KRaftVersionRecord` v0 | 5 |
//! | `Voters` | `VotersRecord` v0 | 6 |

use bytes::BytesMut;
use corum_raft::control::ControlRecord;
use corum_raft::{Endpoint, Voter, VoterSet};
use corum_types::NodeId;
use kafka_protocol::messages::{
    leader_change_message, voters_record, LeaderChangeMessage, SnapshotFooterRecord,
    SnapshotHeaderRecord, VotersRecord,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use crate::api::kafka_uuid;
use crate::metadata::KRaftVersionRecord;

/// Kafka's control record types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i16)]
pub enum ControlType {
    LeaderChange = 2,
    SnapshotHeader = 3,
    SnapshotFooter = 4,
    KRaftVersion = 5,
    Voters = 6,
}

impl ControlType {
    /// The record key: key version 0, then the type.
    pub fn key(self) -> [u8; 4] {
        let t = (self as i16).to_be_bytes();
        [0, 0, t[0], t[1]]
    }
}

/// The `kraft.version` range a voter supports, as VotersRecord states it: corum does not keep
/// each voter's own range, and every corum build that writes a VotersRecord supports 0 to
/// [`corum_raft::control::KRAFT_VERSION_MAX`].
fn kraft_range() -> voters_record::KRaftVersionFeature {
    voters_record::KRaftVersionFeature::default()
        .with_min_supported_version(0)
        .with_max_supported_version(corum_raft::control::KRAFT_VERSION_MAX as i16)
}

fn endpoint(e: &Endpoint) -> voters_record::Endpoint {
    voters_record::Endpoint::default()
        .with_name(StrBytes::from_string(e.listener.clone()))
        .with_host(StrBytes::from_string(e.host.clone()))
        .with_port(e.port)
}

/// A voter with its Raft endpoints and, after them, the `extra` endpoints of its id whose
/// listener it does not already name.
fn voter(v: &Voter, extra: &[(NodeId, Endpoint)]) -> voters_record::Voter {
    let mut endpoints: Vec<voters_record::Endpoint> = v.endpoints.iter().map(endpoint).collect();
    for (_, e) in extra.iter().filter(|(id, _)| *id == v.key.id) {
        if !v
            .endpoints
            .iter()
            .any(|o| o.listener.eq_ignore_ascii_case(&e.listener))
        {
            endpoints.push(endpoint(e));
        }
    }
    voters_record::Voter::default()
        .with_voter_id((v.key.id.0 as i32).into())
        .with_voter_directory_id(kafka_uuid(v.key.directory_id))
        .with_endpoints(endpoints)
        .with_k_raft_version_feature(kraft_range())
}

/// Kafka's VotersRecord of a voter set, each voter also listing its `extra` endpoints.
pub fn voters_record(voters: &VoterSet, extra: &[(NodeId, Endpoint)]) -> VotersRecord {
    VotersRecord::default()
        .with_version(0)
        .with_voters(voters.voters().iter().map(|v| voter(v, extra)).collect())
}

/// Writes `message` at version 0 as a control record value.
fn value<M: Encodable>(message: &M, out: &mut BytesMut) {
    // Encoding an in-memory message at its one valid version fails only on a field Kafka
    // cannot represent (a string over 32,767 bytes): corum's voter sets are validated far
    // below that.
    message
        .encode(out, 0)
        .expect("a control record fits Kafka's schema");
}

/// One corum control record as a Kafka control record: its type and value (written to `out`).
/// `extra` are endpoints to add to a VotersRecord's voters ([`voters_record`]).
pub fn record(r: &ControlRecord, extra: &[(NodeId, Endpoint)], out: &mut BytesMut) -> ControlType {
    match r {
        ControlRecord::LeaderChange(lc) => {
            let granted: Vec<leader_change_message::Voter> = lc
                .granted_by
                .iter()
                .map(|id| leader_change_message::Voter::default().with_voter_id(id.0 as i32))
                .collect();
            // corum's record names the voters that granted the epoch; Kafka's also lists the
            // voter set, which brokers do not read: the granting voters stand for it.
            let m = LeaderChangeMessage::default()
                .with_version(0)
                .with_leader_id((lc.leader.0 as i32).into())
                .with_voters(granted.clone())
                .with_granting_voters(granted);
            value(&m, out);
            ControlType::LeaderChange
        }
        ControlRecord::Voters(v) => {
            value(&voters_record(&v.voters, extra), out);
            ControlType::Voters
        }
        ControlRecord::KRaftVersion(k) => {
            let m = KRaftVersionRecord {
                version: 0,
                kraft_version: k.version as i16,
                ..KRaftVersionRecord::default()
            };
            m.encode(0, out).expect("KRaftVersionRecord v0 encodes");
            ControlType::KRaftVersion
        }
    }
}

/// A snapshot's header record value: `last_contained_log_timestamp` in milliseconds.
pub fn snapshot_header(last_contained_log_timestamp: i64, out: &mut BytesMut) {
    let m = SnapshotHeaderRecord::default()
        .with_version(0)
        .with_last_contained_log_timestamp(last_contained_log_timestamp);
    value(&m, out);
}

/// A snapshot's footer record value.
pub fn snapshot_footer(out: &mut BytesMut) {
    value(&SnapshotFooterRecord::default().with_version(0), out);
}
