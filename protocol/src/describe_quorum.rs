//! [`DescribeQuorumResponse`]: the answer to `DescribeQuorum`, what
//! `corum quorum describe --status / --replication` prints (Kafka's
//! `kafka-metadata-quorum describe`). The server builds it from its Raft driver's status (the
//! rows it knows of itself), fills each voter's directory id and endpoints from its voter set
//! with [`DescribeQuorumResponse::with_voter_set`] and the replication columns from the
//! leader's per-replica progress with [`DescribeQuorumResponse::with_replica_progress`].

use corum_raft::{Endpoint, VoterSet};
use corum_types::{Epoch, LogOffset, NodeId, Uuid};

/// The state of the quorum as one node sees it: what `kafka-metadata-quorum describe` shows
/// with `--status` (cluster, leader, epoch, high watermark, voters, observers) and
/// `--replication` (each replica's log end offset, lag and last fetch / catch-up time).
///
/// Times are ages on the answering node's monotonic clock (milliseconds before the answer),
/// not wall-clock timestamps: a tool turns them into timestamps with its own clock, and no
/// clock skew between nodes enters. A value the answering node does not know is `None` (a
/// follower knows only its own log; the leader knows every replica it hears from).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeQuorumResponse {
    pub cluster_id: Uuid,
    /// The node answering.
    pub node_id: NodeId,
    pub leader_id: Option<NodeId>,
    pub leader_epoch: Epoch,
    pub high_watermark: LogOffset,
    /// Sorted by id.
    pub voters: Vec<ReplicaState>,
    /// Replicas fetching without voting (brokers, controllers not yet added), sorted by id.
    pub observers: Vec<ReplicaState>,
}

/// One replica's row of `--replication`.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct ReplicaState {
    pub replica_id: NodeId,
    /// `None` for a static voter named without one.
    pub directory_id: Option<Uuid>,
    /// The replica's log end offset as last reported (exclusive).
    pub log_end_offset: Option<LogOffset>,
    /// Records between the leader's log end offset and this replica's.
    pub lag: Option<u64>,
    /// How long ago the replica last fetched (or acknowledged an append).
    pub last_fetch_age_ms: Option<u64>,
    /// How long ago the replica was last caught up with the leader's log end offset.
    pub last_caught_up_age_ms: Option<u64>,
    /// A voter's listeners as its voter set names them (`--status`'s endpoints, Kafka's
    /// DescribeQuorum v2 `Nodes`); empty for an observer.
    pub endpoints: Vec<Endpoint>,
}

impl DescribeQuorumResponse {
    /// Fills each voter row's directory id (when the row has none and the set's is not zero)
    /// and endpoints from `voters`, the answering node's voter set in force. Rows of ids the
    /// set does not hold are left as they are.
    pub fn with_voter_set(mut self, voters: &VoterSet) -> DescribeQuorumResponse {
        for row in &mut self.voters {
            if let Some(v) = voters.get(row.replica_id) {
                let directory_id = v.key.directory_id;
                row.directory_id = row
                    .directory_id
                    .or((!directory_id.is_zero()).then_some(directory_id));
                row.endpoints = v.endpoints.clone();
            }
        }
        self
    }

    /// Fills the `--replication` columns from the leader's per-replica progress
    /// ([`corum_raft::RaftCore::replica_progress`]; empty when this node does not lead: the
    /// rows are left as they are). `log_end_offset` is the
    /// leader's log end and `now_ms` the leader core's clock (the clock of the progress
    /// times). Per replica: `log_end_offset` is its acknowledged durable end (an observer's
    /// last fetch offset), `lag` the leader's log end minus it, and the ages are `now_ms`
    /// minus the last response / last caught-up time (`None` if never). The leader's own row
    /// keeps its log end and lag 0 (only a missing directory id is filled in). Observers the
    /// leader hears from are added, sorted by id.
    pub fn with_replica_progress(
        mut self,
        log_end_offset: LogOffset,
        now_ms: u64,
        progress: &[corum_raft::ReplicaProgress],
    ) -> DescribeQuorumResponse {
        for p in progress {
            let directory_id = (!p.key.directory_id.is_zero()).then_some(p.key.directory_id);
            if p.key.id == self.node_id {
                let own = self.voters.iter_mut().chain(self.observers.iter_mut());
                for r in own.filter(|r| r.replica_id == p.key.id) {
                    r.directory_id = r.directory_id.or(directory_id);
                }
                continue;
            }
            let row = ReplicaState {
                replica_id: p.key.id,
                directory_id,
                log_end_offset: Some(p.log_end_offset),
                lag: Some(log_end_offset.0.saturating_sub(p.log_end_offset.0)),
                last_fetch_age_ms: p.last_fetch_ms.map(|t| now_ms.saturating_sub(t)),
                last_caught_up_age_ms: p.last_caught_up_ms.map(|t| now_ms.saturating_sub(t)),
                endpoints: Vec::new(),
            };
            let rows = if p.voter {
                &mut self.voters
            } else {
                &mut self.observers
            };
            match rows.binary_search_by_key(&p.key.id, |r| r.replica_id) {
                Ok(i) => {
                    let directory_id = rows[i].directory_id.or(row.directory_id);
                    let endpoints = std::mem::take(&mut rows[i].endpoints);
                    rows[i] = ReplicaState {
                        directory_id,
                        endpoints,
                        ..row
                    };
                }
                Err(i) => rows.insert(i, row),
            }
        }
        self
    }

    /// The largest lag among the followers that have one (`--status`'s MaxFollowerLag).
    pub fn max_follower_lag(&self) -> Option<u64> {
        self.voters
            .iter()
            .filter(|r| Some(r.replica_id) != self.leader_id)
            .filter_map(|r| r.lag)
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_raft::{ReplicaKey, ReplicaProgress};

    fn row(id: u32, end: Option<u64>, lag: Option<u64>) -> ReplicaState {
        ReplicaState {
            replica_id: NodeId(id),
            directory_id: None,
            log_end_offset: end.map(LogOffset),
            lag,
            last_fetch_age_ms: end.map(|_| 0),
            last_caught_up_age_ms: lag.map(|_| 0),
            endpoints: Vec::new(),
        }
    }

    /// Node 1 leads voters 1-3 at epoch 4; node 9 observes.
    fn quorum() -> DescribeQuorumResponse {
        DescribeQuorumResponse {
            cluster_id: Uuid([5; 16]),
            node_id: NodeId(1),
            leader_id: Some(NodeId(1)),
            leader_epoch: Epoch(4),
            high_watermark: LogOffset(10),
            voters: vec![
                row(1, Some(12), Some(0)),
                row(2, None, None),
                row(3, None, None),
            ],
            observers: vec![row(9, None, None)],
        }
    }

    fn progress(id: u32, voter: bool, end: u64, heard: Option<u64>) -> ReplicaProgress {
        ReplicaProgress {
            key: ReplicaKey {
                id: NodeId(id),
                directory_id: Uuid([id as u8; 16]),
            },
            voter,
            log_end_offset: LogOffset(end),
            last_fetch_ms: heard,
            last_caught_up_ms: heard.filter(|_| end == 12),
        }
    }

    /// The leader's progress fills each follower's row (lag against the leader's log end,
    /// ages against its clock), keeps the leader's own row but fills its directory id, adds
    /// an observer in id order, and the largest follower lag is the slowest voter's.
    #[test]
    fn replica_progress_fills_the_replication_columns() {
        let q = quorum().with_replica_progress(
            LogOffset(12),
            1_000,
            &[
                progress(1, true, 12, Some(1_000)),
                progress(2, true, 12, Some(990)),
                progress(3, true, 4, Some(700)),
                progress(7, false, 11, None),
            ],
        );
        let cols: Vec<_> = q
            .voters
            .iter()
            .chain(&q.observers)
            .map(|r| {
                (
                    r.replica_id.0,
                    r.directory_id.map(|d| d.0[0]),
                    r.log_end_offset.map(|o| o.0),
                    r.lag,
                    r.last_fetch_age_ms,
                    r.last_caught_up_age_ms,
                )
            })
            .collect();
        assert_eq!(
            cols,
            vec![
                (1, Some(1), Some(12), Some(0), Some(0), Some(0)),
                (2, Some(2), Some(12), Some(0), Some(10), Some(10)),
                (3, Some(3), Some(4), Some(8), Some(300), None),
                (7, Some(7), Some(11), Some(1), None, None),
                (9, None, None, None, None, None),
            ]
        );
        assert_eq!(q.max_follower_lag(), Some(8));
    }

    /// The voter set fills each voter row's endpoints and a missing directory id (a static
    /// voter's zero id stays unknown), and the leader's progress keeps them; rows the set does
    /// not hold and observers get none.
    #[test]
    fn the_voter_set_fills_directory_ids_and_endpoints() {
        use corum_raft::Voter;
        let endpoint = |port: u16| Endpoint {
            listener: "CONTROLLER".into(),
            host: "127.0.0.1".into(),
            port,
        };
        let voter = |id: u32, dir: u8| Voter {
            key: ReplicaKey {
                id: NodeId(id),
                directory_id: Uuid([dir; 16]),
            },
            endpoints: vec![endpoint(9000 + id as u16)],
        };
        let set = VoterSet::new(vec![voter(1, 1), voter(2, 0)]).unwrap();
        let q = quorum().with_voter_set(&set).with_replica_progress(
            LogOffset(12),
            1_000,
            &[progress(2, true, 12, Some(990))],
        );
        let cols: Vec<_> = q
            .voters
            .iter()
            .chain(&q.observers)
            .map(|r| {
                (
                    r.replica_id.0,
                    r.directory_id.map(|d| d.0[0]),
                    r.endpoints.iter().map(|e| e.port).collect::<Vec<_>>(),
                )
            })
            .collect();
        assert_eq!(
            cols,
            vec![
                (1, Some(1), vec![9001]),
                // The progress knows the directory id the static set does not.
                (2, Some(2), vec![9002]),
                (3, None, vec![]),
                (9, None, vec![]),
            ]
        );
        assert_eq!(q.voters[1].log_end_offset, Some(LogOffset(12)));
    }
}
