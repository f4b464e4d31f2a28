//! AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter (KIP-853): the metadata quorum's voter
//! changes, as `kafka-metadata-quorum add-controller / remove-controller` send them, turned
//! into corum's `AddVoter` / `RemoveVoter` / `UpdateVoter` and the leader's verdict back.
//!
//! What each request must carry before it reaches the leader, checked here as Kafka's Raft
//! client checks it:
//!
//! | check | refusal |
//! |---|---|
//! | a cluster id, when named, is this cluster's | INCONSISTENT_CLUSTER_ID |
//! | a voter id of 0 or more and a directory id that is not zero | INVALID_REQUEST |
//! | listeners (Add, Update): the controller listener among them, none twice, a host, at most [`LISTENERS_MAX`] | INVALID_REQUEST |
//! | UpdateRaftVoter: a `kraft.version` range that is one (`0 <= min <= max`) | INVALID_REQUEST |
//! | UpdateRaftVoter: the leader epoch it names is the leader's | FENCED_LEADER_EPOCH (older) / UNKNOWN_LEADER_EPOCH (newer) |
//!
//! The leader's refusals ([`VoterChangeError`]) map to the codes Kafka's `AddVoterHandler`,
//! `RemoveVoterHandler` and `UpdateVoterHandler` answer ([`voter_change_error`]); a node that
//! does not lead and cannot reach the leader answers NOT_LEADER_OR_FOLLOWER, and no verdict
//! within the wait is REQUEST_TIMED_OUT (the change may still commit).

use corum_protocol::{RequestBody, ResponseBody, RpcError};
use corum_raft::message::{
    AddVoterRequest, RemoveVoterRequest, UpdateVoterRequest, VoterChangeResponse,
};
use corum_raft::{Endpoint, ReplicaKey, Voter, VoterChangeError};
use corum_types::NodeId;
use kafka_protocol::error::ResponseError as K;
use kafka_protocol::messages::update_raft_voter_response::CurrentLeader;
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, BrokerId, RemoveRaftVoterRequest,
    RemoveRaftVoterResponse, UpdateRaftVoterRequest, UpdateRaftVoterResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{corum_uuid, nodes, text};
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::service::call;

/// The most listeners a voter may name: a controller has a handful, and every one of them is
/// written into each VotersRecord and snapshot from then on.
pub const LISTENERS_MAX: usize = 16;

/// The Kafka error for a voter change the leader refused, with what it means.
pub fn voter_change_error(e: VoterChangeError) -> KafkaError {
    let (code, message) = match e {
        VoterChangeError::NotLeader => (
            K::NotLeaderOrFollower,
            "this node does not lead the metadata quorum",
        ),
        VoterChangeError::ChangePending => (
            K::RequestTimedOut,
            "an earlier voter change has not committed yet; retry once it has",
        ),
        VoterChangeError::EpochNotCommitted => (
            K::RequestTimedOut,
            "the leader has not yet committed an entry of its epoch; retry shortly",
        ),
        VoterChangeError::AlreadyVoter => (K::DuplicateVoter, "that voter id already votes"),
        VoterChangeError::NotVoter => (K::VoterNotFound, "no voter has that id and directory id"),
        VoterChangeError::NotCaughtUp => (
            K::RequestTimedOut,
            "the new voter is lagging: it must be running, fetching from the leader and caught \
             up to the high watermark",
        ),
        VoterChangeError::WouldBeEmpty => (
            K::InvalidRequest,
            "removing the last voter would leave the quorum without voters",
        ),
        VoterChangeError::LeadershipLost => (
            K::NotLeaderOrFollower,
            "the leader lost its leadership before the change committed; it may or may not \
             have committed (describe the quorum)",
        ),
        VoterChangeError::StaticQuorum => (
            K::UnsupportedVersion,
            "the quorum is static (controller.quorum.voters, kraft.version 0): its voters \
             cannot change until it is upgraded (kafka-features upgrade --feature \
             kraft.version=1)",
        ),
        VoterChangeError::UnsupportedKraftVersion => (
            K::InvalidUpdateVersion,
            "kraft.version can only go up, to a version every controller supports (at most 1)",
        ),
        VoterChangeError::DirectoryIdsUnknown => (
            K::RequestTimedOut,
            "not every voter has answered the leader with its directory id yet: every voter \
             must be running; retry shortly",
        ),
    };
    KafkaError::new(code, message)
}

/// The Kafka error of a voter change that got no verdict: a node that does not lead (and
/// could not hand the change to the leader) answers NOT_LEADER_OR_FOLLOWER, as Kafka's Raft
/// client does; the rest as any whole request.
fn whole_request_error(e: &RpcError) -> KafkaError {
    match e {
        RpcError::NotController { leader } => KafkaError::new(
            K::NotLeaderOrFollower,
            match leader {
                Some(l) => format!(
                    "this node does not lead the metadata quorum; node {} at {}:{} does",
                    l.id, l.host, l.port
                ),
                None => {
                    "this node does not lead the metadata quorum, and no leader is known".to_owned()
                }
            },
        ),
        other => KafkaError::rpc(other),
    }
}

/// The outcome of a voter change sent to the node.
async fn change<B: Backend>(
    backend: &B,
    body: RequestBody,
    timeout_ms: u32,
) -> Result<(), KafkaError> {
    let answer = call(backend, body, timeout_ms, |r| match r {
        ResponseBody::AddVoter(r) | ResponseBody::RemoveVoter(r) | ResponseBody::UpdateVoter(r) => {
            Some(r)
        }
        _ => None,
    })
    .await;
    match answer {
        Ok(VoterChangeResponse { result: Ok(()), .. }) => Ok(()),
        Ok(VoterChangeResponse { result: Err(e), .. }) => Err(voter_change_error(e)),
        Err(e) => Err(whole_request_error(&e)),
    }
}

/// A cluster id the request names that is not this cluster's (Kafka accepts a request that
/// names none).
fn check_cluster(ctx: &ListenerContext, cluster_id: &Option<StrBytes>) -> Result<(), KafkaError> {
    match cluster_id {
        Some(id) if id.as_str() != ctx.cluster_id_text() => Err(KafkaError::new(
            K::InconsistentClusterId,
            format!(
                "the request names cluster {:?}, but this is cluster {}",
                id.as_str(),
                ctx.cluster_id_text()
            ),
        )),
        _ => Ok(()),
    }
}

/// The replica a request names: a voter id of 0 or more and a directory id that is not zero.
fn replica_key(voter_id: i32, directory_id: uuid::Uuid) -> Result<ReplicaKey, KafkaError> {
    let invalid =
        |why: &str| KafkaError::new(K::InvalidRequest, format!("not a valid voter: {why}"));
    let id = u32::try_from(voter_id).map_err(|_| invalid("the voter id is negative"))?;
    if directory_id.is_nil() {
        return Err(invalid("the directory id is zero"));
    }
    Ok(ReplicaKey {
        id: NodeId(id),
        directory_id: corum_uuid(directory_id),
    })
}

/// A voter's listeners, checked (see the module doc).
fn endpoints<'a>(
    ctx: &ListenerContext,
    listeners: impl ExactSizeIterator<Item = (&'a StrBytes, &'a StrBytes, u16)>,
) -> Result<Vec<Endpoint>, KafkaError> {
    let invalid = |why: String| KafkaError::new(K::InvalidRequest, why);
    if listeners.len() > LISTENERS_MAX {
        return Err(invalid(format!(
            "{} listeners named; a voter has at most {LISTENERS_MAX}",
            listeners.len()
        )));
    }
    let mut out: Vec<Endpoint> = Vec::with_capacity(listeners.len());
    for (name, host, port) in listeners {
        if name.is_empty() || host.is_empty() {
            return Err(invalid(format!(
                "listener {:?} at host {:?}: a listener needs a name and a host",
                name.as_str(),
                host.as_str()
            )));
        }
        if out.iter().any(|e| e.listener.eq_ignore_ascii_case(name)) {
            return Err(invalid(format!("listener {:?} named twice", name.as_str())));
        }
        out.push(Endpoint {
            listener: name.as_str().to_owned(),
            host: host.as_str().to_owned(),
            port,
        });
    }
    if !out.iter().any(|e| {
        e.listener
            .eq_ignore_ascii_case(&ctx.controller_listener_name)
    }) {
        return Err(invalid(format!(
            "the listeners do not include the controller listener {} the voters reach each \
             other on",
            ctx.controller_listener_name
        )));
    }
    Ok(out)
}

/// AddRaftVoter: adds a running, caught-up controller as a voter; answered once the new
/// voter set commits.
pub async fn add_raft_voter<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: AddRaftVoterRequest,
) -> AddRaftVoterResponse {
    let outcome = async {
        check_cluster(ctx, &request.cluster_id)?;
        let key = replica_key(request.voter_id, request.voter_directory_id)?;
        let endpoints = endpoints(
            ctx,
            request.listeners.iter().map(|l| (&l.name, &l.host, l.port)),
        )?;
        let body = RequestBody::AddVoter(AddVoterRequest {
            request_id: 0,
            voter: Voter { key, endpoints },
        });
        change(backend, body, ctx.timeout_ms(request.timeout_ms)).await
    }
    .await;
    let mut response = AddRaftVoterResponse::default();
    (response.error_code, response.error_message) = error_fields(outcome);
    response
}

/// RemoveRaftVoter: removes a voter, named by id and directory id; answered once the new
/// voter set commits.
pub async fn remove_raft_voter<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: RemoveRaftVoterRequest,
) -> RemoveRaftVoterResponse {
    let outcome = async {
        check_cluster(ctx, &request.cluster_id)?;
        let key = replica_key(request.voter_id, request.voter_directory_id)?;
        let body = RequestBody::RemoveVoter(RemoveVoterRequest {
            request_id: 0,
            voter: key,
        });
        change(backend, body, ctx.default_timeout_ms).await
    }
    .await;
    let mut response = RemoveRaftVoterResponse::default();
    (response.error_code, response.error_message) = error_fields(outcome);
    response
}

/// UpdateRaftVoter: a voter's new listeners. The answer names the leader and its epoch (and
/// its endpoint on this listener, when registered), so a voter that asked the wrong node
/// finds the leader.
pub async fn update_raft_voter<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: UpdateRaftVoterRequest,
) -> UpdateRaftVoterResponse {
    let quorum = call(
        backend,
        RequestBody::DescribeQuorum,
        ctx.default_timeout_ms,
        |r| match r {
            ResponseBody::DescribeQuorum(q) => Some((q.leader_id, q.leader_epoch)),
            _ => None,
        },
    )
    .await;
    let mut leader = CurrentLeader::default()
        .with_leader_id(BrokerId(-1))
        .with_leader_epoch(-1);
    if let Ok((leader_id, epoch)) = &quorum {
        leader.leader_epoch = i32::try_from(epoch.0).unwrap_or(i32::MAX);
        if let Some(id) = leader_id {
            leader.leader_id = BrokerId(id.0 as i32);
            let controllers = nodes::controllers(ctx, backend).await;
            if let Some(c) = controllers.iter().find(|c| c.id == id.0 as i32) {
                leader.host = text(&c.host);
                leader.port = c.port;
            }
        }
    }
    let outcome = async {
        check_cluster(ctx, &request.cluster_id)?;
        let epoch = match &quorum {
            Ok((_, epoch)) => i64::try_from(epoch.0).unwrap_or(i64::MAX),
            Err(e) => return Err(whole_request_error(e)),
        };
        match i64::from(request.current_leader_epoch).cmp(&epoch) {
            std::cmp::Ordering::Less => {
                return Err(KafkaError::new(
                    K::FencedLeaderEpoch,
                    format!(
                        "leader epoch {} is older than the quorum's {epoch}",
                        request.current_leader_epoch
                    ),
                ))
            }
            std::cmp::Ordering::Greater => {
                return Err(KafkaError::new(
                    K::UnknownLeaderEpoch,
                    format!(
                        "leader epoch {} is newer than the quorum's {epoch}",
                        request.current_leader_epoch
                    ),
                ))
            }
            std::cmp::Ordering::Equal => {}
        }
        let key = replica_key(request.voter_id, request.voter_directory_id)?;
        let versions = &request.k_raft_version_feature;
        if versions.min_supported_version < 0
            || versions.max_supported_version < versions.min_supported_version
        {
            return Err(KafkaError::new(
                K::InvalidRequest,
                format!(
                    "kraft.version range {}..={} is not a range of levels",
                    versions.min_supported_version, versions.max_supported_version
                ),
            ));
        }
        let endpoints = endpoints(
            ctx,
            request.listeners.iter().map(|l| (&l.name, &l.host, l.port)),
        )?;
        let body = RequestBody::UpdateVoter(UpdateVoterRequest {
            request_id: 0,
            voter: Voter { key, endpoints },
        });
        change(backend, body, ctx.default_timeout_ms).await
    }
    .await;
    // UpdateRaftVoter's answer has no error message: the code alone travels.
    let (error_code, _) = error_fields(outcome);
    UpdateRaftVoterResponse::default()
        .with_error_code(error_code)
        .with_current_leader(leader)
}

/// A response's error code and message for an outcome.
fn error_fields(outcome: Result<(), KafkaError>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err(e) => (e.code, e.message.as_deref().map(text)),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use corum_protocol::{DescribeQuorumResponse, LeaderHint};
    use corum_types::{Epoch, LogOffset, Uuid};
    use kafka_protocol::messages::{add_raft_voter_request, update_raft_voter_request};

    use super::*;

    const CLUSTER: Uuid = Uuid([9; 16]);

    fn ctx() -> ListenerContext {
        ListenerContext::for_tests(CLUSTER)
    }

    /// A node that records the voter change it is sent and answers it with `verdict`.
    struct Node {
        verdict: Result<Result<(), VoterChangeError>, RpcError>,
        sent: RefCell<Vec<(RequestBody, u32)>>,
    }

    impl Node {
        fn answering(verdict: Result<Result<(), VoterChangeError>, RpcError>) -> Node {
            Node {
                verdict,
                sent: RefCell::default(),
            }
        }
    }

    impl Backend for Node {
        async fn call(&self, body: RequestBody, timeout_ms: u32) -> Result<ResponseBody, RpcError> {
            let response = |result| VoterChangeResponse {
                request_id: 0,
                result,
                leader: Some(NodeId(1)),
            };
            let answer = match &body {
                RequestBody::DescribeQuorum => {
                    return Ok(ResponseBody::DescribeQuorum(Box::new(
                        DescribeQuorumResponse {
                            cluster_id: CLUSTER,
                            node_id: NodeId(1),
                            leader_id: Some(NodeId(1)),
                            leader_epoch: Epoch(5),
                            high_watermark: LogOffset(10),
                            voters: Vec::new(),
                            observers: Vec::new(),
                        },
                    )))
                }
                // No registrations: the controllers are this node alone.
                RequestBody::DescribeControllers | RequestBody::LocalRead(_) => {
                    return Err(RpcError::Timeout { timeout_ms })
                }
                RequestBody::AddVoter(_) => self
                    .verdict
                    .clone()
                    .map(response)
                    .map(ResponseBody::AddVoter),
                RequestBody::RemoveVoter(_) => self
                    .verdict
                    .clone()
                    .map(response)
                    .map(ResponseBody::RemoveVoter),
                RequestBody::UpdateVoter(_) => self
                    .verdict
                    .clone()
                    .map(response)
                    .map(ResponseBody::UpdateVoter),
                other => panic!("unexpected {}", other.kind()),
            };
            self.sent.borrow_mut().push((body, timeout_ms));
            answer
        }

        fn leader(&self) -> Option<NodeId> {
            Some(NodeId(1))
        }

        fn wall_clock_ms(&self) -> i64 {
            0
        }
    }

    fn listener(name: &str, host: &str, port: u16) -> add_raft_voter_request::Listener {
        add_raft_voter_request::Listener::default()
            .with_name(text(name))
            .with_host(text(host))
            .with_port(port)
    }

    fn add(listeners: Vec<add_raft_voter_request::Listener>) -> AddRaftVoterRequest {
        AddRaftVoterRequest::default()
            .with_cluster_id(None)
            .with_timeout_ms(30_000)
            .with_voter_id(4)
            .with_voter_directory_id(uuid::Uuid::from_bytes([4; 16]))
            .with_listeners(listeners)
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        futures_lite::future::block_on(f)
    }

    /// A valid AddRaftVoter reaches the node as corum's AddVoter with the voter's key,
    /// listeners and the request's own timeout, and a committed change answers NONE.
    #[test]
    fn an_add_becomes_corums_add_voter() {
        let node = Node::answering(Ok(Ok(())));
        let r = run(add_raft_voter(
            &ctx(),
            &node,
            add(vec![listener("CONTROLLER", "10.0.0.4", 9093)]),
        ));
        assert_eq!((r.error_code, r.error_message), (0, None));
        let sent = node.sent.borrow();
        let [(RequestBody::AddVoter(a), timeout_ms)] = sent.as_slice() else {
            panic!("sent {sent:?}");
        };
        assert_eq!(*timeout_ms, 30_000);
        assert_eq!(a.voter.key.id, NodeId(4));
        assert_eq!(a.voter.key.directory_id, Uuid([4; 16]));
        assert_eq!(
            a.voter.endpoints,
            vec![Endpoint {
                listener: "CONTROLLER".into(),
                host: "10.0.0.4".into(),
                port: 9093
            }]
        );
    }

    /// Every refusal of the leader has Kafka's code for it, and a message saying why.
    #[test]
    fn each_refusal_has_kafkas_code() {
        let cases = [
            (VoterChangeError::NotLeader, K::NotLeaderOrFollower),
            (VoterChangeError::ChangePending, K::RequestTimedOut),
            (VoterChangeError::EpochNotCommitted, K::RequestTimedOut),
            (VoterChangeError::AlreadyVoter, K::DuplicateVoter),
            (VoterChangeError::NotVoter, K::VoterNotFound),
            (VoterChangeError::NotCaughtUp, K::RequestTimedOut),
            (VoterChangeError::WouldBeEmpty, K::InvalidRequest),
            (VoterChangeError::LeadershipLost, K::NotLeaderOrFollower),
            (VoterChangeError::StaticQuorum, K::UnsupportedVersion),
        ];
        for (refusal, code) in cases {
            let node = Node::answering(Ok(Err(refusal)));
            let request = RemoveRaftVoterRequest::default()
                .with_cluster_id(None)
                .with_voter_id(2)
                .with_voter_directory_id(uuid::Uuid::from_bytes([2; 16]));
            let r = run(remove_raft_voter(&ctx(), &node, request));
            assert_eq!(r.error_code, code.code(), "{refusal:?}");
            assert!(
                r.error_message.as_ref().is_some_and(|m| m.len() > 10),
                "{refusal:?}: {r:?}"
            );
        }
        let static_quorum = voter_change_error(VoterChangeError::StaticQuorum);
        assert!(static_quorum.message.unwrap().contains("static"));
    }

    /// A node that cannot reach the leader answers NOT_LEADER_OR_FOLLOWER naming the leader
    /// it knows; no verdict in time is REQUEST_TIMED_OUT.
    #[test]
    fn no_verdict_is_not_leader_or_timed_out() {
        let hint = LeaderHint {
            id: NodeId(3),
            host: "h3".into(),
            port: 9093,
        };
        let node = Node::answering(Err(RpcError::NotController { leader: Some(hint) }));
        let r = run(add_raft_voter(
            &ctx(),
            &node,
            add(vec![listener("CONTROLLER", "h", 1)]),
        ));
        assert_eq!(r.error_code, K::NotLeaderOrFollower.code());
        assert!(r.error_message.unwrap().contains("node 3 at h3:9093"));
        let node = Node::answering(Err(RpcError::Timeout { timeout_ms: 5 }));
        let r = run(add_raft_voter(
            &ctx(),
            &node,
            add(vec![listener("CONTROLLER", "h", 1)]),
        ));
        assert_eq!(r.error_code, K::RequestTimedOut.code());
    }

    /// What Kafka refuses before asking the leader is refused here too, and nothing is sent.
    #[test]
    fn malformed_requests_never_reach_the_leader() {
        let node = Node::answering(Ok(Ok(())));
        let good = || add(vec![listener("CONTROLLER", "h", 1)]);
        let cases: Vec<(AddRaftVoterRequest, K, &str)> = vec![
            (
                good().with_cluster_id(Some(text("someone-else"))),
                K::InconsistentClusterId,
                "someone-else",
            ),
            (good().with_voter_id(-1), K::InvalidRequest, "negative"),
            (
                good().with_voter_directory_id(uuid::Uuid::nil()),
                K::InvalidRequest,
                "directory id",
            ),
            (add(vec![]), K::InvalidRequest, "CONTROLLER"),
            (
                add(vec![listener("KAFKA", "h", 1)]),
                K::InvalidRequest,
                "controller listener",
            ),
            (
                add(vec![listener("CONTROLLER", "", 1)]),
                K::InvalidRequest,
                "host",
            ),
            (
                add(vec![
                    listener("CONTROLLER", "h", 1),
                    listener("controller", "h", 2),
                ]),
                K::InvalidRequest,
                "twice",
            ),
            (
                add((0..=LISTENERS_MAX)
                    .map(|i| listener(&format!("L{i}"), "h", 1))
                    .collect()),
                K::InvalidRequest,
                "at most",
            ),
        ];
        for (request, code, says) in cases {
            let r = run(add_raft_voter(&ctx(), &node, request));
            assert_eq!(r.error_code, code.code(), "{says}");
            let message = r.error_message.expect("a refusal says why");
            assert!(message.contains(says), "{message}");
        }
        assert!(node.sent.borrow().is_empty());
        // This cluster's own id, as Kafka prints it, is accepted.
        let own = good().with_cluster_id(Some(text(&ctx().cluster_id_text())));
        assert_eq!(run(add_raft_voter(&ctx(), &node, own)).error_code, 0);
    }

    /// UpdateRaftVoter checks the leader epoch and the kraft.version range, sends corum's
    /// UpdateVoter, and names the leader and its epoch in every answer.
    #[test]
    fn an_update_checks_the_epoch_and_names_the_leader() {
        let update = |epoch: i32, min: i16, max: i16| {
            UpdateRaftVoterRequest::default()
                .with_cluster_id(None)
                .with_current_leader_epoch(epoch)
                .with_voter_id(2)
                .with_voter_directory_id(uuid::Uuid::from_bytes([2; 16]))
                .with_listeners(vec![update_raft_voter_request::Listener::default()
                    .with_name(text("CONTROLLER"))
                    .with_host(text("h2"))
                    .with_port(9093)])
                .with_k_raft_version_feature(
                    update_raft_voter_request::KRaftVersionFeature::default()
                        .with_min_supported_version(min)
                        .with_max_supported_version(max),
                )
        };
        let node = Node::answering(Ok(Ok(())));
        for (request, code) in [
            (update(4, 0, 1), K::FencedLeaderEpoch),
            (update(6, 0, 1), K::UnknownLeaderEpoch),
            (update(5, 1, 0), K::InvalidRequest),
            (update(5, -1, 1), K::InvalidRequest),
        ] {
            let r = run(update_raft_voter(&ctx(), &node, request));
            assert_eq!(r.error_code, code.code());
            assert_eq!(
                (r.current_leader.leader_id.0, r.current_leader.leader_epoch),
                (1, 5)
            );
        }
        assert!(node.sent.borrow().is_empty());
        let r = run(update_raft_voter(&ctx(), &node, update(5, 0, 1)));
        assert_eq!(r.error_code, 0);
        // This node leads; its own endpoint on this listener is named.
        assert_eq!(
            (r.current_leader.host.as_str(), r.current_leader.port),
            ("localhost", 9092)
        );
        assert!(matches!(
            node.sent.borrow().as_slice(),
            [(RequestBody::UpdateVoter(u), _)] if u.voter.key.id == NodeId(2)
        ));
    }
}
