//! The Kafka listener's fuzz harness, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/kafka_listener.rs`, which includes this file by `#[path]`) and the
//! stable replay test (`tests/fuzz_corpus.rs`), so both run exactly the same code.
//!
//! [`connection`] takes the bytes a client sends on one connection and does what the node's
//! listener (`corum_node::kafka_server`) does with them: split them into size-prefixed
//! requests ([`corum_kafka::frame::request_len`] with the default `socket.request.max.bytes`),
//! parse each ([`corum_kafka::parse`]), serve it ([`corum_kafka::service::serve`]) against
//! [`ScriptedBackend`], and encode the answer ([`corum_kafka::response::encode_answer`]). It stops
//! where the listener would close the connection.
//!
//! Beyond "no panic, no abort, no unbounded allocation", it checks what a client relies on,
//! and panics (a finding) when any fails:
//!
//! - a request that parsed is answered: its answer encodes (an encoding failure would close a
//!   healthy connection);
//! - the answer's size prefix is its length, its header carries the request's correlation id
//!   at the response header version Kafka defines (v0 for ApiVersions), and the body decodes
//!   back, with Kafka's own schema, at the version answered, to the last byte;
//! - a KIP-511 answer is ApiVersions v0 with UNSUPPORTED_VERSION.
//! - every request also goes through a SASL listener's per-connection state
//!   ([`corum_kafka::sasl::SaslConnection`], PLAIN with one user and SCRAM-SHA-256/512 with a
//!   credential for `bob`), so SaslHandshake and SaslAuthenticate bytes reach PLAIN's and
//!   SCRAM's parsers; each answer it gives must encode;
//! - an Envelope's answer carries, unless it is an error, the wrapped request's whole
//!   response: its correlation id, at the version asked, decoding with Kafka's schema.
//!
//! # The scripted backend
//!
//! [`ScriptedBackend`] answers every corum request the translations send with a response of
//! the right variant built from the request and a fixed image (three controllers, four
//! brokers, two topics, a few configs), so the translations of successful answers run, not
//! only their error paths. Brokers following the metadata log find a snapshot ending at 90
//! (the image's records as one encoded corum batch, handed out in chunks of 512 bytes) and
//! the log after it at the leader's epoch 3 (a control batch, then two batches of metadata
//! records, encoded as corum's controller and Raft core encode them); a fetch is answered as
//! a leader answers it: batches, the snapshot to fetch, a diverging epoch, or not the leader
//! for a newer epoch. The fault byte — the top byte of the request's correlation id — picks
//! what goes wrong: 0 (what real clients send: their ids are small) answers everything as a
//! healthy active controller would; any other value draws, per call, a whole-request error,
//! a response of another variant, per-item errors, a response with an item missing or one
//! too many, and which leader the node knows. For the log, a per-item error is another
//! fetch result or a batch whose header miscounts its records, or a snapshot chunk that is
//! gone, not the leader's, or other bytes; an item missing or repeated is a batch, or a
//! chunk's bytes (none, or one byte too many). Everything is a function of the input bytes,
//! so a finding replays.

// Each includer uses its own part of the harness.
#![allow(dead_code)]

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use corum_controller::control::cluster_control::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse, DescribeClusterResponse, DescribeControllersResponse,
    DescribedBroker, DescribedController, TargetState, UnregisterBrokerRequest,
};
use corum_controller::control::config_control::{
    AlterConfigOp, ConfigSource, DescribeConfigsResponse, DescribedConfig,
    IncrementalAlterConfigsResponse,
};
use corum_controller::control::feature_control::{
    supported_features, DescribeFeaturesResponse, FinalizedFeatureLevel, UpdateFeaturesResponse,
};
use corum_controller::control::producer_id_control::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse,
};
use corum_controller::control::replication_control::{
    AlterPartitionRequest, AlterPartitionResponse, AlterPartitionTopicResult, AlteredPartition,
    AssignReplicasToDirsRequest, AssignReplicasToDirsResponse, CreatePartitionsResponse,
    CreateTopicsResponse, CreateTopicsWithConfigsResponse, CreatedTopic, CreatedTopicWithConfigs,
    DeleteTopicsResponse, DeleteTopicsV2Response, DeletedTopic, DescribeTopicsResponse,
    DescribeTopicsV2Response, DescribedPartition, DescribedPartitionV2, DescribedTopic,
    DescribedTopicV2, DirectoryAssignmentResult, ElectLeadersResponse, ElectionType,
    TopicPartitionResults, TopicRef,
};
use corum_controller::image::configs::ConfigResource;
use corum_controller::records::{
    encode_batch, ConfigRecordV1, ConfigResourceType, ControllerEndpointV1, FeatureLevelRecordV1,
    ListenerV1, MetadataRecord, NoOpRecordV1, PartitionRecordV1, RegisterBrokerRecordV1,
    RegisterControllerRecordV1, TopicRecordV1, UnfenceBrokerRecordV1,
};
use corum_controller::{ApiError, LeaderEpoch, PartitionEpoch, PartitionId, TopicId};
use corum_kafka::request::Parsed;
use corum_kafka::{Backend, ListenerContext, ServedApis};
use corum_protocol::{
    DescribeQuorumResponse, LeaderHint, LocalRead, ReplicaState, RequestBody, ResponseBody,
    RpcError,
};
use corum_raft::control::{ControlRecord, KRaftVersionRecord, LeaderChangeRecord, VotersRecord};
use corum_raft::message::{
    FetchRequest, FetchResponse, FetchResult, FetchSnapshotRequest, FetchSnapshotResponse,
    FetchSnapshotResult, VoterChangeResponse,
};
use corum_raft::{
    Batch, Endpoint, Payload, ReplicaKey, SnapshotId, Voter, VoterChangeError, VoterSet,
};
use corum_types::{BrokerEpoch, Epoch, LogOffset, NodeId, Uuid};
use kafka_protocol::messages::{
    ApiKey, EnvelopeResponse, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::Decodable;

/// `socket.request.max.bytes` at its default (the node's, which is Kafka's): 100 MiB. A fuzz
/// input is far smaller, so this only decides which size prefixes are refused at once and
/// which make the listener wait for more bytes.
pub const REQUEST_MAX_BYTES: u32 = 104_857_600;

/// This node's id: controller 1 of the fixed image.
pub const NODE_ID: u32 = 1;

/// The listener the fuzzed connection came in on.
pub const LISTENER: &str = "KAFKA";

/// How one connection ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Session {
    /// Requests answered, in order: (API key, version answered).
    pub answered: Vec<(i16, i16)>,
    /// Why the listener closed the connection, if it did (else the client stopped sending:
    /// at the end of the input, or inside a request).
    pub closed: Option<String>,
}

/// The listener's context of the fuzzed connection.
pub fn context() -> ListenerContext {
    ListenerContext {
        listener_name: LISTENER.to_owned(),
        controller_listener_name: "CONTROLLER".to_owned(),
        cluster_id: Uuid([7; 16]),
        node_id: NodeId(NODE_ID),
        advertised_host: "localhost".to_owned(),
        advertised_port: 9092,
        default_timeout_ms: 2_000,
        served: ServedApis::controller(),
        log: Default::default(),
    }
}

/// Serves the bytes a client sends on one connection, as the listener does; panics on a
/// finding (see the module doc).
pub fn connection(input: &[u8]) -> Session {
    serve_connection(input, |_| {})
}

/// [`connection`], also returning the answers' bodies in order: what tests look at to see a
/// seed reach the path it is for.
pub fn answers(input: &[u8]) -> (Session, Vec<ResponseKind>) {
    let mut bodies = Vec::new();
    let session = serve_connection(input, |body| bodies.push(body));
    (session, bodies)
}

fn serve_connection(input: &[u8], mut keep: impl FnMut(ResponseKind)) -> Session {
    let ctx = context();
    let mut session = Session::default();
    let mut sasl = corum_kafka::sasl::SaslConnection::new();
    let mut rest = input;
    while rest.len() >= corum_kafka::frame::SIZE_PREFIX_BYTES {
        let (prefix, after) = rest.split_at(corum_kafka::frame::SIZE_PREFIX_BYTES);
        let prefix: [u8; 4] = prefix.try_into().expect("split at the prefix's size");
        let len = match corum_kafka::frame::request_len(prefix, REQUEST_MAX_BYTES) {
            Ok(len) => len,
            Err(e) => {
                session.closed = Some(e.to_string());
                return session;
            }
        };
        if after.len() < len {
            // The client stopped inside a request: the listener waits, then times out.
            return session;
        }
        let (request, after) = after.split_at(len);
        rest = after;
        let parsed =
            match in_decoder(|| corum_kafka::parse(Bytes::copy_from_slice(request), &ctx.served)) {
                Ok(parsed) => parsed,
                Err(e) => {
                    session.closed = Some(e.to_string());
                    return session;
                }
            };
        sasl_gate(&mut sasl, &parsed);
        let (answered, body) = serve_one(&ctx, parsed);
        session.answered.push(answered);
        keep(body);
    }
    session
}

/// Runs `parsed` through a SASL listener's connection state; an answer it gives must encode.
fn sasl_gate(conn: &mut corum_kafka::sasl::SaslConnection, parsed: &Parsed) {
    use corum_controller::scram::{ScramCredential, ScramMechanism};
    use corum_kafka::sasl::{Gate, Mechanism, SaslConfig};
    static SETUP: OnceLock<(SaslConfig, [ScramCredential; 2])> = OnceLock::new();
    let (config, credentials) = SETUP.get_or_init(|| {
        (
            SaslConfig {
                mechanisms: vec![
                    Mechanism::Plain,
                    Mechanism::Scram(ScramMechanism::ScramSha256),
                    Mechanism::Scram(ScramMechanism::ScramSha512),
                ],
                plain_users: [("alice".to_owned(), "alice-secret".to_owned())]
                    .into_iter()
                    .collect(),
                reauth_ms: 1000,
            },
            ScramMechanism::ALL
                .map(|m| ScramCredential::from_password(m, "bob-secret", b"salt".to_vec(), 4096)),
        )
    });
    let gate = conn.gate(
        config,
        parsed,
        0,
        &mut || "fuzznonce".to_owned(),
        &|user, m| {
            (user == "bob")
                .then(|| credentials[usize::from(m == ScramMechanism::ScramSha512)].clone())
        },
    );
    if let Gate::Answer { answer, .. } = gate {
        corum_kafka::response::encode(
            answer.api,
            answer.version,
            answer.correlation_id,
            &answer.body,
        )
        .expect("a SASL answer encodes");
    }
}

thread_local! {
    static IN_DECODER: Cell<bool> = const { Cell::new(false) };
    static IN_ENVELOPE: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread may be inside [`corum_kafka::parse`], which turns a panic of the
/// codec's decoders into an error: the fuzz target's panic hook lets such a panic unwind to
/// it rather than abort. That is while the listener parses a request, and while it serves an
/// Envelope, which parses the request it wraps. A panic there that nothing catches still
/// aborts the process (libFuzzer's entry point aborts on any panic that reaches it), so it
/// is still a finding.
pub fn in_request_decoder() -> bool {
    IN_DECODER.with(Cell::get) || IN_ENVELOPE.with(Cell::get)
}

fn in_decoder<T>(parse: impl FnOnce() -> T) -> T {
    IN_DECODER.with(|f| f.set(true));
    let out = parse();
    IN_DECODER.with(|f| f.set(false));
    out
}

/// Serves and encodes one parsed request and checks the bytes a client would read.
fn serve_one(ctx: &ListenerContext, parsed: Parsed) -> ((i16, i16), ResponseKind) {
    let (asked, correlation_id, too_new) = match &parsed {
        Parsed::Request { head, .. } => {
            ((head.api_key, head.api_version), head.correlation_id, false)
        }
        Parsed::ApiVersionsTooNew { head } => {
            ((head.api_key, head.api_version), head.correlation_id, true)
        }
    };
    let wrapped = match &parsed {
        Parsed::Request { body, .. } => match body.as_ref() {
            RequestKind::Envelope(e) => Some(e.request_data.clone()),
            _ => None,
        },
        Parsed::ApiVersionsTooNew { .. } => None,
    };
    let backend = ScriptedBackend::new(correlation_id);
    IN_ENVELOPE.with(|f| f.set(wrapped.is_some()));
    let answer = ready(corum_kafka::service::serve(ctx, &backend, parsed));
    IN_ENVELOPE.with(|f| f.set(false));
    assert_eq!(
        answer.correlation_id, correlation_id,
        "answer to another request"
    );
    if too_new {
        assert_eq!((answer.api, answer.version), (ApiKey::ApiVersions, 0));
        let ResponseKind::ApiVersions(r) = &answer.body else {
            panic!("KIP-511 answer is not ApiVersions: {:?}", answer.body);
        };
        assert_eq!(
            r.error_code, 35,
            "KIP-511 answer without UNSUPPORTED_VERSION"
        );
    } else {
        assert_eq!(
            (answer.api, answer.version),
            asked,
            "answered at another version"
        );
    }
    let (api, version) = (answer.api, answer.version);
    // The answer as served, a Fetch answer's records in it.
    let served = match &answer.body {
        ResponseKind::Fetch(f) => ResponseKind::Fetch(
            corum_kafka::api::raft_fetch::FetchAnswer {
                response: f.clone(),
                records: answer.records.clone(),
            }
            .into_response(),
        ),
        other => other.clone(),
    };
    let encoded = corum_kafka::response::encode_answer(answer).unwrap_or_else(|e| {
        panic!(
            "{:?} v{} parsed but its answer does not encode, so the listener would close a \
             healthy connection: {e}\nanswer: {served:?}",
            asked.0, asked.1
        )
    });
    // What a client reads: the answer's bytes (a Fetch answer's records sent apart, as the
    // listener sends them) decode with Kafka's schema.
    check_response_bytes(api, version, correlation_id, encoded.to_bytes());
    if let (Some(wrapped), ResponseKind::Envelope(r)) = (wrapped, &served) {
        check_enveloped(ctx, &wrapped, r);
    }
    ((api as i16, version), served)
}

/// What the forwarding broker does with an Envelope's answer: the wrapped request's whole
/// response, which must be the answer to that request (its correlation id, at the version
/// it asked or, for a KIP-511 ApiVersions, v0) and decode with Kafka's schema; none with an
/// error.
fn check_enveloped(ctx: &ListenerContext, wrapped: &Bytes, r: &EnvelopeResponse) {
    if r.error_code != 0 {
        assert!(
            r.response_data.is_none(),
            "an Envelope error {} with a response",
            r.error_code
        );
        return;
    }
    let data = r
        .response_data
        .as_ref()
        .expect("a served Envelope carries the wrapped request's response");
    // It was served, so its header parsed: key, version and correlation id lead it.
    assert!(wrapped.len() >= 8, "a served wrapped request has a header");
    let key = i16::from_be_bytes([wrapped[0], wrapped[1]]);
    let version = i16::from_be_bytes([wrapped[2], wrapped[3]]);
    let correlation_id = i32::from_be_bytes([wrapped[4], wrapped[5], wrapped[6], wrapped[7]]);
    let api = ApiKey::try_from(key).expect("a served wrapped request has a known API key");
    let too_new = ctx.served.range(api).is_some_and(|(_, max)| version > max);
    let version = if api == ApiKey::ApiVersions && too_new {
        0
    } else {
        version
    };
    let mut framed = (data.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(data);
    check_response_bytes(api, version, correlation_id, Bytes::from(framed));
}

/// What a Kafka client does with the answer's bytes, with Kafka's own schema.
fn check_response_bytes(api: ApiKey, version: i16, correlation_id: i32, bytes: Bytes) {
    let mut buf = bytes;
    assert!(buf.len() >= 4, "answer shorter than its size prefix");
    let size = buf.get_i32();
    assert_eq!(
        size as usize,
        buf.len(),
        "size prefix is not the answer's length"
    );
    let header = ResponseHeader::decode(&mut buf, api.response_header_version(version))
        .expect("the answer's header decodes");
    assert_eq!(header.correlation_id, correlation_id);
    ResponseKind::decode(api, &mut buf, version).unwrap_or_else(|e| {
        panic!("{api:?} v{version}: the answer's body does not decode with Kafka's schema: {e}")
    });
    assert!(
        !buf.has_remaining(),
        "{api:?} v{version}: {} bytes after the answer's body",
        buf.remaining()
    );
}

/// Runs a future that never waits: every future the scripted backend returns is ready, so
/// serving completes in one poll. A future that waits is a harness bug.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("serving waited on something the scripted backend never wakes"),
    }
}

// ---------------------------------------------------------------------------------------------
// The scripted backend.

/// A corum node that answers from a fixed image; see the module doc for its faults.
pub struct ScriptedBackend {
    /// The correlation id's top byte; 0: no faults.
    fault: u8,
    /// Seeds the per-call draws.
    seed: u64,
    calls: Cell<u64>,
}

/// What one call is answered with when the request carries faults.
enum Fault {
    None,
    Whole(RpcError),
    WrongVariant,
    ItemErrors,
    ItemMissing,
    ItemExtra,
}

/// SplitMix64: a deterministic draw from the fault seed and the call's index.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl ScriptedBackend {
    pub fn new(correlation_id: i32) -> ScriptedBackend {
        let fault = (correlation_id as u32 >> 24) as u8;
        ScriptedBackend {
            fault,
            seed: mix(correlation_id as u32 as u64),
            calls: Cell::new(0),
        }
    }

    fn draw(&self) -> u64 {
        let i = self.calls.get();
        self.calls.set(i + 1);
        mix(self.seed ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d))
    }

    fn fault(&self) -> Fault {
        if self.fault == 0 {
            return Fault::None;
        }
        let d = self.draw();
        match d % 8 {
            0 | 1 => Fault::None,
            2 => Fault::Whole(rpc_error(d >> 8)),
            3 => Fault::WrongVariant,
            4 | 5 => Fault::ItemErrors,
            6 => Fault::ItemMissing,
            _ => Fault::ItemExtra,
        }
    }

    fn answer(&self, body: RequestBody) -> Result<ResponseBody, RpcError> {
        let fault = self.fault();
        let mut response = match fault {
            Fault::Whole(e) => return Err(e),
            Fault::WrongVariant => {
                return Ok(ResponseBody::UnregisterBroker);
            }
            _ => answer(body)?,
        };
        match fault {
            Fault::ItemErrors => item_errors(&mut response, self.draw()),
            Fault::ItemMissing => resize_items(&mut response, false),
            Fault::ItemExtra => resize_items(&mut response, true),
            _ => {}
        }
        Ok(response)
    }
}

impl Backend for ScriptedBackend {
    fn call(
        &self,
        body: RequestBody,
        _timeout_ms: u32,
    ) -> impl Future<Output = Result<ResponseBody, RpcError>> {
        std::future::ready(self.answer(body))
    }

    fn leader(&self) -> Option<NodeId> {
        if self.fault == 0 {
            return Some(NodeId(NODE_ID));
        }
        match self.fault % 4 {
            0 => Some(NodeId(NODE_ID)),
            1 => None,
            2 => Some(NodeId(2)),
            // A leader no Kafka client can reach (it has no KAFKA listener).
            _ => Some(NodeId(3)),
        }
    }

    fn wall_clock_ms(&self) -> i64 {
        1_700_000_000_000
    }

    fn leadership(&self) -> (u64, Option<NodeId>) {
        (LEADER_EPOCH.0, self.leader())
    }
}

fn rpc_error(d: u64) -> RpcError {
    match d % 7 {
        0 => RpcError::NotController { leader: None },
        1 => RpcError::NotController {
            leader: Some(LeaderHint {
                id: NodeId(2),
                host: "host2".into(),
                port: 9093,
            }),
        },
        2 => RpcError::Timeout { timeout_ms: 2_000 },
        3 => RpcError::Api(ApiError::NotController),
        4 => RpcError::ProposalRefused {
            reason: "the leader resigned".into(),
        },
        5 => RpcError::RecordsTooLarge {
            bytes: 9 << 20,
            max: 8 << 20,
        },
        _ => RpcError::Internal {
            reason: "scripted".into(),
        },
    }
}

/// A per-item error of the kind the controller gives.
fn api_error(d: u64) -> ApiError {
    let topic_id = topic_id("x");
    match d % 8 {
        0 => ApiError::NotController,
        1 => ApiError::UnknownTopic { name: "x".into() },
        2 => ApiError::TopicAlreadyExists { name: "x".into() },
        3 => ApiError::TopicDeletionInProgress { name: "x".into() },
        4 => ApiError::InvalidConfig {
            key: "retention.ms".into(),
            reason: "not a number".into(),
        },
        5 => ApiError::ElectionNotNeeded {
            topic_id,
            partition: PartitionId(0),
        },
        6 => ApiError::InvalidRequest {
            reason: "scripted".into(),
        },
        _ => ApiError::UnknownTopicId { topic_id },
    }
}

/// Turns every successful item of `response` into an error (drawn per item).
fn item_errors(response: &mut ResponseBody, d: u64) {
    fn fail<T>(results: impl Iterator<Item = (usize, T)>, d: u64, set: impl Fn(T, ApiError)) {
        for (i, r) in results {
            set(r, api_error(d.wrapping_add(i as u64)));
        }
    }
    match response {
        ResponseBody::CreateTopics(r) => {
            fail(r.topics.iter_mut().enumerate(), d, |t, e| t.1 = Err(e))
        }
        ResponseBody::CreateTopicsWithConfigs(r) => {
            fail(r.topics.iter_mut().enumerate(), d, |t, e| t.1 = Err(e))
        }
        ResponseBody::DeleteTopicsV2(r) => {
            fail(r.topics.iter_mut().enumerate(), d, |t, e| t.1 = Err(e))
        }
        ResponseBody::CreatePartitions(r) => {
            fail(r.topics.iter_mut().enumerate(), d, |t, e| t.1 = Err(e))
        }
        ResponseBody::ElectLeaders(r) => {
            fail(r.partitions.iter_mut().enumerate(), d, |p, e| p.2 = Err(e))
        }
        ResponseBody::IncrementalAlterConfigs(r) => {
            fail(r.resources.iter_mut().enumerate(), d, |c, e| c.1 = Err(e))
        }
        ResponseBody::DescribeConfigs(r) => {
            fail(r.resources.iter_mut().enumerate(), d, |c, e| c.1 = Err(e))
        }
        ResponseBody::UpdateFeatures(r) => {
            fail(r.results.iter_mut().enumerate(), d, |f, e| f.1 = Err(e))
        }
        ResponseBody::DescribeTopics(r) => {
            fail(r.topics.iter_mut().enumerate(), d, |t, e| t.1 = Err(e))
        }
        ResponseBody::DescribeTopicsV2(r) => {
            fail(r.topics.iter_mut().enumerate(), d, |t, e| t.1 = Err(e))
        }
        ResponseBody::AddVoter(r) | ResponseBody::RemoveVoter(r) | ResponseBody::UpdateVoter(r) => {
            r.result = Err(voter_change_error(d))
        }
        // The log's answers: another result, or a batch the renderer must refuse.
        ResponseBody::Fetch(r) => match (d % 4, &mut r.result) {
            (0, FetchResult::Batches { batches, .. }) if !batches.is_empty() => {
                batches[0].record_count += 1;
            }
            (1, _) => {
                r.result = FetchResult::Diverging {
                    fetch_offset: LOG_END,
                    last_fetched_epoch: LEADER_EPOCH,
                    epoch: SNAPSHOT.epoch,
                    end_offset: SNAPSHOT.end_offset,
                }
            }
            (2, _) => r.result = FetchResult::SnapshotNeeded { snapshot: SNAPSHOT },
            _ => r.result = FetchResult::NotLeader,
        },
        // A snapshot chunk: gone, not the leader, or bytes that are not the snapshot.
        ResponseBody::FetchSnapshot(r) => match (d % 3, &mut r.result) {
            (0, FetchSnapshotResult::Chunk { bytes, .. }) => {
                *bytes = Payload::from(vec![0xff; bytes.len()]);
            }
            (1, _) => r.result = FetchSnapshotResult::NotLeader,
            _ => r.result = FetchSnapshotResult::SnapshotNotFound,
        },
        ResponseBody::AlterPartition(r) => fail(
            r.topics
                .iter_mut()
                .flat_map(|t| t.partitions.iter_mut())
                .enumerate(),
            d,
            |p, e| p.1 = Err(e),
        ),
        ResponseBody::AssignReplicasToDirs(r) => fail(
            r.directories
                .iter_mut()
                .flat_map(|d| d.topics.iter_mut())
                .flat_map(|t| t.partitions.iter_mut())
                .enumerate(),
            d,
            |p, e| p.1 = Err(e),
        ),
        // A block of ids Kafka's fields cannot hold: the listener must refuse it.
        ResponseBody::AllocateProducerIds(r) => {
            if d & 1 == 0 {
                r.first_producer_id = u64::MAX - 10;
            } else {
                r.count = u64::from(u32::MAX);
            }
        }
        ResponseBody::BrokerHeartbeat(r) => {
            r.target_state = [
                TargetState::Fenced,
                TargetState::Active,
                TargetState::ControlledShutdown,
                TargetState::Shutdown,
            ][(d % 4) as usize];
            r.is_caught_up = d & 4 != 0;
        }
        _ => {}
    }
}

/// A refusal of a voter change, drawn.
fn voter_change_error(d: u64) -> VoterChangeError {
    const ALL: [VoterChangeError; 11] = [
        VoterChangeError::NotLeader,
        VoterChangeError::ChangePending,
        VoterChangeError::EpochNotCommitted,
        VoterChangeError::AlreadyVoter,
        VoterChangeError::NotVoter,
        VoterChangeError::NotCaughtUp,
        VoterChangeError::WouldBeEmpty,
        VoterChangeError::LeadershipLost,
        VoterChangeError::StaticQuorum,
        VoterChangeError::UnsupportedKraftVersion,
        VoterChangeError::DirectoryIdsUnknown,
    ];
    ALL[(d % ALL.len() as u64) as usize]
}

/// Drops the last item of `response`, or repeats it.
fn resize_items(response: &mut ResponseBody, extra: bool) {
    fn resize<T: Clone>(items: &mut Vec<T>, extra: bool) {
        match (extra, items.last().cloned()) {
            (true, Some(last)) => items.push(last),
            (false, Some(_)) => {
                items.pop();
            }
            (_, None) => {}
        }
    }
    match response {
        ResponseBody::CreateTopics(r) => resize(&mut r.topics, extra),
        ResponseBody::CreateTopicsWithConfigs(r) => resize(&mut r.topics, extra),
        ResponseBody::DeleteTopicsV2(r) => resize(&mut r.topics, extra),
        ResponseBody::CreatePartitions(r) => resize(&mut r.topics, extra),
        ResponseBody::ElectLeaders(r) => resize(&mut r.partitions, extra),
        ResponseBody::IncrementalAlterConfigs(r) => resize(&mut r.resources, extra),
        ResponseBody::DescribeConfigs(r) => resize(&mut r.resources, extra),
        ResponseBody::UpdateFeatures(r) => resize(&mut r.results, extra),
        ResponseBody::DescribeTopics(r) => resize(&mut r.topics, extra),
        ResponseBody::DescribeTopicsV2(r) => resize(&mut r.topics, extra),
        ResponseBody::DescribeCluster(r) => resize(&mut r.brokers, extra),
        ResponseBody::DescribeControllers(r) => resize(&mut r.controllers, extra),
        ResponseBody::AlterPartition(r) => resize(&mut r.topics, extra),
        ResponseBody::AssignReplicasToDirs(r) => resize(&mut r.directories, extra),
        ResponseBody::Fetch(r) => {
            if let FetchResult::Batches { batches, .. } = &mut r.result {
                resize(batches, extra)
            }
        }
        // A chunk without its bytes, or with one byte too many.
        ResponseBody::FetchSnapshot(r) => {
            if let FetchSnapshotResult::Chunk { bytes, .. } = &mut r.result {
                let mut b = if extra { bytes.to_vec() } else { Vec::new() };
                b.extend(extra.then_some(0));
                *bytes = Payload::from(b);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// The fixed image and the healthy answers.

/// A topic's id, derived from its name (FNV-1a), never zero.
pub fn topic_id(name: &str) -> TopicId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&h.to_be_bytes());
    id[8..].copy_from_slice(&(!h).to_be_bytes());
    TopicId(Uuid(id))
}

/// The image's topics: name and partition count.
const TOPICS: &[(&str, u32)] = &[("logs", 1), ("orders", 3)];

fn image_topic(r: &TopicRef) -> Result<(&'static str, u32), ApiError> {
    match r {
        TopicRef::Name(name) => TOPICS
            .iter()
            .find(|(n, _)| n == name)
            .copied()
            .ok_or_else(|| ApiError::UnknownTopic { name: name.clone() }),
        TopicRef::Id(id) => TOPICS
            .iter()
            .find(|(n, _)| topic_id(n) == *id)
            .copied()
            .ok_or(ApiError::UnknownTopicId { topic_id: *id }),
    }
}

fn described_topic(name: &str, partitions: u32) -> DescribedTopic {
    DescribedTopic {
        topic_id: topic_id(name),
        name: name.to_owned(),
        partitions: (0..partitions)
            .map(|p| DescribedPartition {
                partition_id: PartitionId(p),
                // Partition 1 has lost its leader; broker 5 is fenced.
                leader: (p != 1).then_some(NodeId(4)),
                leader_epoch: LeaderEpoch(p + 2),
                partition_epoch: PartitionEpoch(p + 5),
                replicas: vec![NodeId(4), NodeId(5)],
                isr: vec![NodeId(4)],
                offline_replicas: vec![NodeId(5)],
            })
            .collect(),
    }
}

/// [`described_topic`] with eligible leader replicas: partition 1, leaderless, has broker 5
/// eligible and broker 4 as its last known leader.
fn described_topic_v2(name: &str, partitions: u32) -> DescribedTopicV2 {
    let t = described_topic(name, partitions);
    DescribedTopicV2 {
        topic_id: t.topic_id,
        name: t.name,
        partitions: t
            .partitions
            .into_iter()
            .map(|p| {
                let leaderless = p.leader.is_none();
                DescribedPartitionV2 {
                    partition: p,
                    eligible_leader_replicas: if leaderless { vec![NodeId(5)] } else { vec![] },
                    last_known_elr: if leaderless { vec![NodeId(4)] } else { vec![] },
                }
            })
            .collect(),
    }
}

fn brokers() -> Vec<DescribedBroker> {
    let listener = |name: &str, host: &str| ListenerV1 {
        name: name.into(),
        host: host.into(),
        port: 9092,
    };
    let broker =
        |id: u32, listeners: Vec<ListenerV1>, rack: Option<&str>, fenced: bool| DescribedBroker {
            broker_id: NodeId(id),
            broker_epoch: BrokerEpoch(u64::from(id) * 10),
            listeners,
            rack: rack.map(str::to_owned),
            fenced,
            in_controlled_shutdown: false,
        };
    vec![
        // Shares its id with controller 1.
        broker(1, vec![listener("KAFKA", "b1")], None, false),
        broker(4, vec![listener("PLAINTEXT", "b4")], Some("r1"), false),
        broker(5, vec![listener("kafka", "b5")], None, true),
        broker(6, vec![], None, false),
    ]
}

fn controllers() -> Vec<DescribedController> {
    let endpoint = |name: &str, host: &str, port: u16| ControllerEndpointV1 {
        name: name.into(),
        host: host.into(),
        port,
        security_protocol: 0,
    };
    vec![
        DescribedController {
            controller_id: NodeId(1),
            incarnation_id: Uuid([1; 16]),
            end_points: vec![
                endpoint("CONTROLLER", "host1", 9093),
                endpoint("KAFKA", "old-host1", 9092),
            ],
            features: supported_features(),
        },
        DescribedController {
            controller_id: NodeId(2),
            incarnation_id: Uuid([2; 16]),
            end_points: vec![endpoint("KAFKA", "host2", 9092)],
            features: supported_features(),
        },
        // Registered without a Kafka listener: no Kafka client can reach it.
        DescribedController {
            controller_id: NodeId(3),
            incarnation_id: Uuid([3; 16]),
            end_points: vec![endpoint("CONTROLLER", "host3", 9093)],
            features: supported_features(),
        },
    ]
}

/// Whether the image knows `resource`, as the controller checks it.
fn config_resource(resource: &ConfigResource) -> Result<(), ApiError> {
    match resource.resource_type {
        ConfigResourceType::Topic => image_topic(&TopicRef::Name(resource.name.clone())).map(drop),
        ConfigResourceType::Broker if resource.name.is_empty() => Ok(()),
        ConfigResourceType::Broker => match resource.name.parse::<u32>() {
            Ok(id) if brokers().iter().any(|b| b.broker_id.0 == id) => Ok(()),
            _ => Err(ApiError::InvalidConfigResource {
                reason: format!("no broker {:?}", resource.name),
            }),
        },
    }
}

fn described_configs(resource: &ConfigResource) -> Vec<DescribedConfig> {
    let config = |key: &'static str, value: &str, source| DescribedConfig {
        name: key.into(),
        value: Some(value.to_owned().into()),
        read_only: false,
        source,
        sensitive: false,
        synonyms: Vec::new(),
        config_type: corum_controller::config_schema::ConfigType::String,
        documentation: None,
    };
    match resource.resource_type {
        ConfigResourceType::Topic => vec![
            config("cleanup.policy", "delete", ConfigSource::Default),
            config(
                "min.insync.replicas",
                "2",
                ConfigSource::DynamicDefaultBroker,
            ),
            config("retention.ms", "86400000", ConfigSource::DynamicTopic),
        ],
        ConfigResourceType::Broker => vec![
            config("log.retention.ms", "604800000", ConfigSource::DynamicBroker),
            config("num.partitions", "1", ConfigSource::Default),
        ],
    }
}

/// Keys the scripted controller accepts in an alter.
const ALTERABLE: &[&str] = &[
    "cleanup.policy",
    "log.retention.ms",
    "min.insync.replicas",
    "num.partitions",
    "retention.ms",
];

/// A healthy active controller's answer to `body` against the fixed image.
fn answer(body: RequestBody) -> Result<ResponseBody, RpcError> {
    Ok(match body {
        RequestBody::LocalRead(read) => match *read {
            LocalRead::DescribeCluster => return answer(RequestBody::DescribeCluster),
            LocalRead::DescribeConfigs(r) => return answer(RequestBody::DescribeConfigs(r)),
            LocalRead::DescribeTopics(r) => return answer(RequestBody::DescribeTopics(r)),
            LocalRead::DescribeControllers => return answer(RequestBody::DescribeControllers),
            LocalRead::DescribeFeatures => return answer(RequestBody::DescribeFeatures),
            LocalRead::DescribeTopicsV2(r) => return answer(RequestBody::DescribeTopicsV2(r)),
            LocalRead::DescribeAcls(r) => return answer(RequestBody::DescribeAcls(r)),
            LocalRead::DescribeUserScramCredentials(r) => {
                return answer(RequestBody::DescribeUserScramCredentials(r))
            }
        },
        RequestBody::DescribeCluster => ResponseBody::DescribeCluster(DescribeClusterResponse {
            controller_id: NodeId(NODE_ID),
            brokers: brokers(),
            topic_count: TOPICS.len(),
            partition_count: TOPICS.iter().map(|t| t.1 as usize).sum(),
        }),
        RequestBody::DescribeControllers => {
            ResponseBody::DescribeControllers(DescribeControllersResponse {
                controllers: controllers(),
            })
        }
        RequestBody::DescribeFeatures => ResponseBody::DescribeFeatures(DescribeFeaturesResponse {
            finalized: vec![FinalizedFeatureLevel {
                name: "metadata.version".into(),
                min_level: 1,
                max_level: 27,
            }],
            finalized_epoch: Some(LogOffset(42)),
            supported: supported_features(),
        }),
        RequestBody::DescribeTopics(r) => ResponseBody::DescribeTopics(DescribeTopicsResponse {
            topics: match r.topics {
                None => TOPICS
                    .iter()
                    .map(|&(n, p)| (TopicRef::Name(n.into()), Ok(described_topic(n, p))))
                    .collect(),
                Some(refs) => refs
                    .into_iter()
                    .map(|r| {
                        let described = image_topic(&r).map(|(n, p)| described_topic(n, p));
                        (r, described)
                    })
                    .collect(),
            },
        }),
        RequestBody::DescribeTopicsV2(r) => {
            ResponseBody::DescribeTopicsV2(DescribeTopicsV2Response {
                topics: match r.topics {
                    None => TOPICS
                        .iter()
                        .map(|&(n, p)| (TopicRef::Name(n.into()), Ok(described_topic_v2(n, p))))
                        .collect(),
                    Some(refs) => refs
                        .into_iter()
                        .map(|r| {
                            let described = image_topic(&r).map(|(n, p)| described_topic_v2(n, p));
                            (r, described)
                        })
                        .collect(),
                },
            })
        }
        RequestBody::DescribeConfigs(r) => ResponseBody::DescribeConfigs(DescribeConfigsResponse {
            resources: r
                .resources
                .into_iter()
                .map(|res| {
                    let res = res.resource;
                    let configs = config_resource(&res).map(|()| described_configs(&res));
                    (res, configs)
                })
                .collect(),
        }),
        RequestBody::IncrementalAlterConfigs(r) => {
            ResponseBody::IncrementalAlterConfigs(IncrementalAlterConfigsResponse {
                resources: r
                    .resources
                    .into_iter()
                    .map(|res| {
                        let checked = config_resource(&res.resource).and_then(|()| {
                            res.configs.iter().try_for_each(|c| {
                                let known = ALTERABLE.contains(&c.key.as_str());
                                match c.op {
                                    _ if !known => Err(ApiError::InvalidConfig {
                                        key: c.key.clone(),
                                        reason: "unknown key".into(),
                                    }),
                                    AlterConfigOp::Set
                                        if c.value.is_empty() || c.value.len() > 64 =>
                                    {
                                        Err(ApiError::InvalidConfig {
                                            key: c.key.clone(),
                                            reason: format!("bad value {:?}", c.value),
                                        })
                                    }
                                    AlterConfigOp::Append | AlterConfigOp::Subtract
                                        if c.key != "cleanup.policy" =>
                                    {
                                        Err(ApiError::InvalidConfig {
                                            key: c.key.clone(),
                                            reason: "not a list".into(),
                                        })
                                    }
                                    _ => Ok(()),
                                }
                            })
                        });
                        (res.resource, checked)
                    })
                    .collect(),
            })
        }
        RequestBody::AlterConfigs(r) => {
            ResponseBody::AlterConfigs(IncrementalAlterConfigsResponse {
                resources: r
                    .resources
                    .into_iter()
                    .map(|res| {
                        let checked = config_resource(&res.resource).and_then(|()| {
                            res.configs.iter().try_for_each(|(key, value)| match value {
                                _ if !ALTERABLE.contains(&key.as_str()) => {
                                    Err(ApiError::InvalidConfig {
                                        key: key.clone(),
                                        reason: "unknown key".into(),
                                    })
                                }
                                Some(v) if v.is_empty() || v.len() > 64 => {
                                    Err(ApiError::InvalidConfig {
                                        key: key.clone(),
                                        reason: format!("bad value {v:?}"),
                                    })
                                }
                                _ => Ok(()),
                            })
                        });
                        (res.resource, checked)
                    })
                    .collect(),
            })
        }
        RequestBody::CreateTopics(r) => ResponseBody::CreateTopics(CreateTopicsResponse {
            topics: r
                .topics
                .into_iter()
                .map(|t| {
                    let created = create_topic(
                        &t.name,
                        t.num_partitions,
                        t.replication_factor,
                        &t.assignments,
                    );
                    (t.name, created)
                })
                .collect(),
        }),
        RequestBody::CreateTopicsWithConfigs(r) => {
            let Ok(ResponseBody::CreateTopics(created)) = answer(RequestBody::CreateTopics(r))
            else {
                unreachable!("CreateTopics is answered with CreateTopics")
            };
            let topics = created
                .topics
                .into_iter()
                .map(|(name, created)| {
                    let described = created.map(|topic| CreatedTopicWithConfigs {
                        topic,
                        configs: std::sync::Arc::new(described_configs(&ConfigResource {
                            resource_type: ConfigResourceType::Topic,
                            name: name.clone(),
                        })),
                    });
                    (name, described)
                })
                .collect();
            ResponseBody::CreateTopicsWithConfigs(CreateTopicsWithConfigsResponse { topics })
        }
        RequestBody::DeleteTopicsV2(r) => ResponseBody::DeleteTopicsV2(DeleteTopicsV2Response {
            topics: r
                .topics
                .into_iter()
                .map(|r| {
                    let deleted = image_topic(&r).map(|(name, _)| DeletedTopic {
                        topic_id: topic_id(name),
                        name: name.to_owned(),
                    });
                    (r, deleted)
                })
                .collect(),
        }),
        RequestBody::DeleteTopics(r) => ResponseBody::DeleteTopics(DeleteTopicsResponse {
            topics: r
                .names
                .into_iter()
                .map(|n| {
                    let deleted = image_topic(&TopicRef::Name(n.clone())).map(|(n, _)| topic_id(n));
                    (n, deleted)
                })
                .collect(),
        }),
        RequestBody::CreatePartitions(r) => {
            ResponseBody::CreatePartitions(CreatePartitionsResponse {
                topics: r
                    .topics
                    .into_iter()
                    .map(|inc| {
                        let grown =
                            image_topic(&TopicRef::Name(inc.name.clone())).and_then(|(_, now)| {
                                if inc.count <= now {
                                    Err(ApiError::InvalidPartitions {
                                        requested: inc.count as i32,
                                        reason: "not above the current count".into(),
                                    })
                                } else if !inc.assignments.is_empty()
                                    && inc.assignments.len() as u64 != u64::from(inc.count - now)
                                {
                                    Err(ApiError::InvalidReplicaAssignment {
                                        reason: "one assignment per new partition".into(),
                                    })
                                } else {
                                    Ok(inc.count)
                                }
                            });
                        (inc.name, grown)
                    })
                    .collect(),
            })
        }
        RequestBody::ElectLeaders(r) => {
            let wanted: Vec<(String, PartitionId)> = match r.partitions {
                Some(list) => list,
                None => TOPICS
                    .iter()
                    .flat_map(|&(n, p)| (0..p).map(move |i| (n.to_owned(), PartitionId(i))))
                    .collect(),
            };
            ResponseBody::ElectLeaders(ElectLeadersResponse {
                partitions: wanted
                    .into_iter()
                    .map(|(topic, p)| {
                        let result = image_topic(&TopicRef::Name(topic.clone())).and_then(
                            |(name, count)| {
                                let topic_id = topic_id(name);
                                if p.0 >= count {
                                    Err(ApiError::UnknownPartition {
                                        topic_id,
                                        partition: p,
                                    })
                                } else if p.0 == 1 || r.election_type == ElectionType::Unclean {
                                    Ok(NodeId(4))
                                } else {
                                    Err(ApiError::ElectionNotNeeded {
                                        topic_id,
                                        partition: p,
                                    })
                                }
                            },
                        );
                        (topic, p, result)
                    })
                    .collect(),
            })
        }
        RequestBody::UpdateFeatures(r) => ResponseBody::UpdateFeatures(UpdateFeaturesResponse {
            results: r
                .updates
                .into_iter()
                .map(|u| {
                    let result = match supported_features().iter().find(|f| f.name == u.name) {
                        None => Err(ApiError::InvalidRequest {
                            reason: format!("unknown feature {:?}", u.name).into(),
                        }),
                        Some(f)
                            if u.max_level != 0
                                && !(f.min_level..=f.max_level).contains(&u.max_level) =>
                        {
                            Err(ApiError::FeatureLevelOutOfRange {
                                feature: u.name.clone(),
                                min_level: u.min_level,
                                max_level: u.max_level,
                                reason: "outside the supported range".into(),
                            })
                        }
                        Some(_) if u.max_level < 27 && !u.allow_downgrade => {
                            Err(ApiError::InvalidRequest {
                                reason: "a downgrade needs allow_downgrade".into(),
                            })
                        }
                        Some(_) => Ok(()),
                    };
                    (u.name, result)
                })
                .collect(),
        }),
        RequestBody::DescribeQuorum => {
            let replica = |id: u32, known: bool| ReplicaState {
                replica_id: NodeId(id),
                directory_id: known.then_some(Uuid([id as u8; 16])),
                log_end_offset: known.then_some(LogOffset(100)),
                lag: known.then_some(0),
                last_fetch_age_ms: known.then_some(5),
                last_caught_up_age_ms: known.then_some(u64::MAX),
                // Voter 2 has two listeners, voter 3 (static, unknown) none.
                endpoints: (1..=u16::from(known) * (id as u16).min(2))
                    .map(|i| Endpoint {
                        listener: if i == 1 { "CONTROLLER" } else { "REPLICATION" }.into(),
                        host: format!("host{id}"),
                        port: 9092 + i,
                    })
                    .collect(),
            };
            ResponseBody::DescribeQuorum(Box::new(DescribeQuorumResponse {
                cluster_id: Uuid([7; 16]),
                node_id: NodeId(NODE_ID),
                leader_id: Some(NodeId(NODE_ID)),
                leader_epoch: Epoch(3),
                high_watermark: LogOffset(100),
                voters: vec![replica(1, true), replica(2, true), replica(3, false)],
                observers: vec![replica(4, true)],
            }))
        }
        // The image's voters are 1, 2 and 3, each with the directory id of its id's byte.
        RequestBody::AddVoter(r) => {
            ResponseBody::AddVoter(voter_change(if (1..=3).contains(&r.voter.key.id.0) {
                Err(VoterChangeError::AlreadyVoter)
            } else {
                Ok(())
            }))
        }
        RequestBody::RemoveVoter(r) => {
            ResponseBody::RemoveVoter(voter_change(voter_known(r.voter.id, r.voter.directory_id)))
        }
        RequestBody::UpdateVoter(r) => ResponseBody::UpdateVoter(voter_change(voter_known(
            r.voter.key.id,
            r.voter.key.directory_id,
        ))),
        RequestBody::Fetch(r) => ResponseBody::Fetch(Box::new(fetch(&r))),
        RequestBody::FetchSnapshot(r) => ResponseBody::FetchSnapshot(Box::new(fetch_snapshot(&r))),
        RequestBody::BrokerHeartbeat(r) => ResponseBody::BrokerHeartbeat(broker_heartbeat(&r)?),
        RequestBody::RegisterBroker(r) => ResponseBody::RegisterBroker(registration(&r)?),
        RequestBody::AllocateProducerIds(r) => {
            ResponseBody::AllocateProducerIds(allocate_producer_ids(&r)?)
        }
        RequestBody::AlterPartition(r) => ResponseBody::AlterPartition(alter_partition(&r)?),
        RequestBody::AssignReplicasToDirs(r) => {
            ResponseBody::AssignReplicasToDirs(assign_replicas_to_dirs(&r)?)
        }
        RequestBody::UnregisterBroker(r) => {
            unregister_broker(&r)?;
            ResponseBody::UnregisterBroker
        }
        // Every user named is altered; `bob` has a SCRAM-SHA-256 credential.
        RequestBody::AlterUserScramCredentials(r) => {
            let mut users: Vec<String> = Vec::new();
            for name in r
                .deletions
                .iter()
                .map(|d| &d.name)
                .chain(r.upsertions.iter().map(|u| &u.name))
            {
                if !users.contains(name) {
                    users.push(name.clone());
                }
            }
            ResponseBody::AlterUserScramCredentials(
                corum_controller::control::scram_control::AlterUserScramCredentialsResponse {
                    results: users
                        .into_iter()
                        .map(
                            |user| corum_controller::control::scram_control::ScramUserResult {
                                user,
                                error_code: 0,
                                error_message: None,
                            },
                        )
                        .collect(),
                },
            )
        }
        RequestBody::DescribeUserScramCredentials(r) => {
            use corum_controller::control::scram_control::{
                DescribeUserScramCredentialsResponse, DescribedScramUser,
            };
            let users = r.users.unwrap_or_else(|| vec!["bob".into()]);
            ResponseBody::DescribeUserScramCredentials(DescribeUserScramCredentialsResponse {
                results: users
                    .into_iter()
                    .map(|user| {
                        let known = user == "bob";
                        DescribedScramUser {
                            user,
                            error_code: if known { 0 } else { 91 },
                            error_message: (!known).then(|| "no such user".into()),
                            credentials: if known { vec![(1, 4096)] } else { vec![] },
                        }
                    })
                    .collect(),
            })
        }
        other => {
            return Err(RpcError::NotImplemented {
                api: other.kind().to_owned(),
            })
        }
    })
}

fn voter_change(result: Result<(), VoterChangeError>) -> VoterChangeResponse {
    VoterChangeResponse {
        request_id: 0,
        result,
        leader: Some(NodeId(NODE_ID)),
    }
}

/// Whether (`id`, `directory_id`) votes in the fixed image.
fn voter_known(id: NodeId, directory_id: Uuid) -> Result<(), VoterChangeError> {
    if (1..=3).contains(&id.0) && directory_id == Uuid([id.0 as u8; 16]) {
        Ok(())
    } else {
        Err(VoterChangeError::NotVoter)
    }
}

/// The controller's verdict on one topic to create.
fn create_topic(
    name: &str,
    num_partitions: i32,
    replication_factor: i16,
    assignments: &[Vec<NodeId>],
) -> Result<CreatedTopic, ApiError> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 249 || !name.chars().all(valid_char) {
        return Err(ApiError::InvalidTopicName {
            name: name.to_owned(),
            reason: "Kafka's topic name rules".into(),
        });
    }
    if image_topic(&TopicRef::Name(name.to_owned())).is_ok() {
        return Err(ApiError::TopicAlreadyExists {
            name: name.to_owned(),
        });
    }
    if let Some(first) = assignments.first() {
        return Ok(CreatedTopic {
            topic_id: topic_id(name),
            num_partitions: assignments.len() as u32,
            replication_factor: first.len() as u16,
        });
    }
    let partitions = match num_partitions {
        -1 => 1,
        n if n > 0 => n as u32,
        n => {
            return Err(ApiError::InvalidPartitions {
                requested: n,
                reason: "must be positive".into(),
            })
        }
    };
    let replication_factor = match replication_factor {
        -1 => 2,
        n @ 1..=2 => n as u16,
        n => {
            return Err(ApiError::InvalidReplicationFactor {
                requested: i32::from(n),
                available: 2,
            })
        }
    };
    Ok(CreatedTopic {
        topic_id: topic_id(name),
        num_partitions: partitions,
        replication_factor,
    })
}

// ---------------------------------------------------------------------------------------------
// The metadata log Kafka brokers follow.
//
// A snapshot ends at offset 90 (epoch 2); the log then holds, at epoch 3 (the leader's), a
// control batch (LeaderChange, Voters, KRaftVersion) at 90, a batch of five records at 93 and
// one of two at 98: its end, 100, is the high watermark.

/// The leader's epoch: node 1 leads it.
pub const LEADER_EPOCH: Epoch = Epoch(3);
/// The snapshot below the log's start.
pub const SNAPSHOT: SnapshotId = SnapshotId {
    end_offset: LogOffset(90),
    epoch: Epoch(2),
};
/// The log's end and high watermark.
pub const LOG_END: LogOffset = LogOffset(100);
/// Bytes per snapshot chunk the core hands out: the snapshot takes several.
const SNAPSHOT_CHUNK_BYTES: usize = 512;

/// The voters 1, 2 and 3, each with the directory id of its id's byte.
fn voter_set() -> VoterSet {
    VoterSet::new(
        (1..=3u32)
            .map(|id| Voter {
                key: ReplicaKey {
                    id: NodeId(id),
                    directory_id: Uuid([id as u8; 16]),
                },
                endpoints: vec![Endpoint {
                    listener: "CONTROLLER".into(),
                    host: format!("host{id}"),
                    port: 9093,
                }],
            })
            .collect(),
    )
    .expect("three distinct voters")
}

fn register_broker(b: &DescribedBroker) -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBrokerRecordV1 {
        broker_id: b.broker_id,
        incarnation_id: Uuid([b.broker_id.0 as u8; 16]),
        broker_epoch: b.broker_epoch,
        listeners: b.listeners.clone(),
        features: supported_features(),
        rack: b.rack.clone(),
    })
}

fn data_batch(base_offset: u64, records: &[MetadataRecord]) -> Batch {
    Batch {
        base_offset: LogOffset(base_offset),
        epoch: LEADER_EPOCH,
        record_count: records.len() as u32,
        control: false,
        timestamp_ms: -1,
        payload: Payload::from(encode_batch(records).as_slice()),
    }
}

/// The log's batches after the snapshot, encoded once (as corum's controller and Raft core
/// encode them).
fn log_batches() -> &'static [Batch] {
    static LOG: OnceLock<Vec<Batch>> = OnceLock::new();
    LOG.get_or_init(|| {
        let control = Batch {
            base_offset: SNAPSHOT.end_offset,
            epoch: LEADER_EPOCH,
            record_count: 3,
            control: true,
            timestamp_ms: -1,
            payload: corum_raft::control::encode(vec![
                ControlRecord::LeaderChange(LeaderChangeRecord {
                    epoch: LEADER_EPOCH,
                    leader: NodeId(NODE_ID),
                    granted_by: vec![NodeId(1), NodeId(2)],
                }),
                ControlRecord::Voters(VotersRecord {
                    version: 0,
                    voters: voter_set(),
                }),
                ControlRecord::KRaftVersion(KRaftVersionRecord { version: 1 }),
            ]),
        };
        let brokers = brokers();
        let logs = topic_id("logs");
        let five = [
            register_broker(&brokers[1]),
            MetadataRecord::Topic(TopicRecordV1 {
                name: "logs".into(),
                topic_id: logs,
                deleting: false,
            }),
            MetadataRecord::Partition(PartitionRecordV1 {
                topic_id: logs,
                partition_id: PartitionId(0),
                replicas: vec![NodeId(4), NodeId(5)],
                isr: vec![NodeId(4)],
                leader: Some(NodeId(4)),
                leader_epoch: LeaderEpoch(2),
                partition_epoch: PartitionEpoch(5),
            }),
            MetadataRecord::Config(ConfigRecordV1 {
                resource_type: ConfigResourceType::Topic,
                resource_name: "logs".into(),
                key: "retention.ms".into(),
                value: Some("86400000".into()),
            }),
            MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
                name: "metadata.version".into(),
                min_level: 1,
                max_level: 27,
            }),
        ];
        let two = [
            MetadataRecord::UnfenceBroker(UnfenceBrokerRecordV1 {
                broker_id: NodeId(4),
                broker_epoch: BrokerEpoch(40),
            }),
            MetadataRecord::NoOp(NoOpRecordV1 {}),
        ];
        let log = vec![control, data_batch(93, &five), data_batch(98, &two)];
        assert_eq!(log.last().map(Batch::end_offset), Some(LOG_END));
        log
    })
}

/// The snapshot's data: the image's records as one encoded corum batch.
fn snapshot_data() -> &'static [u8] {
    static DATA: OnceLock<Vec<u8>> = OnceLock::new();
    DATA.get_or_init(|| {
        let mut records: Vec<MetadataRecord> = brokers().iter().map(register_broker).collect();
        for &(name, partitions) in TOPICS {
            let described = described_topic(name, partitions);
            records.push(MetadataRecord::Topic(TopicRecordV1 {
                name: name.into(),
                topic_id: described.topic_id,
                deleting: false,
            }));
            records.extend(described.partitions.into_iter().map(|p| {
                MetadataRecord::Partition(PartitionRecordV1 {
                    topic_id: described.topic_id,
                    partition_id: p.partition_id,
                    replicas: p.replicas,
                    isr: p.isr,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                })
            }));
            let resource = ConfigResource {
                resource_type: ConfigResourceType::Topic,
                name: name.into(),
            };
            records.extend(described_configs(&resource).into_iter().map(|c| {
                MetadataRecord::Config(ConfigRecordV1 {
                    resource_type: ConfigResourceType::Topic,
                    resource_name: name.into(),
                    key: c.name.into(),
                    value: c.value.map(|v| v.into()),
                })
            }));
        }
        records.push(MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
            name: "metadata.version".into(),
            min_level: 1,
            max_level: 27,
        }));
        records.extend(controllers().into_iter().map(|c| {
            MetadataRecord::RegisterController(RegisterControllerRecordV1 {
                controller_id: c.controller_id,
                incarnation_id: c.incarnation_id,
                end_points: c.end_points,
                features: c.features,
            })
        }));
        let data = encode_batch(&records).to_vec();
        assert!(
            data.len() > 2 * SNAPSHOT_CHUNK_BYTES,
            "the snapshot takes several chunks"
        );
        data
    })
}

/// The leader's answer to an observer's fetch.
fn fetch(r: &FetchRequest) -> FetchResponse {
    let result = if r.epoch > LEADER_EPOCH {
        FetchResult::NotLeader
    } else if r.fetch_offset < SNAPSHOT.end_offset {
        FetchResult::SnapshotNeeded { snapshot: SNAPSHOT }
    } else if r.fetch_offset > LOG_END
        || (r.fetch_offset == SNAPSHOT.end_offset && r.last_fetched_epoch != SNAPSHOT.epoch)
        || (r.fetch_offset > SNAPSHOT.end_offset && r.last_fetched_epoch != LEADER_EPOCH)
    {
        // The fetcher's log ends in an epoch the leader's does not hold there.
        let (epoch, end_offset) = if r.last_fetched_epoch < LEADER_EPOCH {
            (SNAPSHOT.epoch, SNAPSHOT.end_offset)
        } else {
            (LEADER_EPOCH, LOG_END)
        };
        FetchResult::Diverging {
            fetch_offset: r.fetch_offset,
            last_fetched_epoch: r.last_fetched_epoch,
            epoch,
            end_offset,
        }
    } else {
        FetchResult::Batches {
            fetch_offset: r.fetch_offset,
            last_fetched_epoch: r.last_fetched_epoch,
            batches: log_batches()
                .iter()
                .filter(|b| b.end_offset() > r.fetch_offset)
                .cloned()
                .collect(),
            high_watermark: LOG_END,
        }
    };
    FetchResponse {
        epoch: LEADER_EPOCH,
        leader: Some(NodeId(NODE_ID)),
        result,
    }
}

/// The leader's answer to a snapshot fetch: a chunk of [`snapshot_data`] from the position
/// asked.
fn fetch_snapshot(r: &FetchSnapshotRequest) -> FetchSnapshotResponse {
    let data = snapshot_data();
    let result = if r.epoch > LEADER_EPOCH {
        FetchSnapshotResult::NotLeader
    } else if r.snapshot != SNAPSHOT {
        FetchSnapshotResult::SnapshotNotFound
    } else {
        let start = usize::try_from(r.position).map_or(data.len(), |p| p.min(data.len()));
        let end = data.len().min(start + SNAPSHOT_CHUNK_BYTES);
        FetchSnapshotResult::Chunk {
            snapshot: SNAPSHOT,
            voters: voter_set(),
            kraft_version: 1,
            size_total: data.len() as u64,
            position: r.position,
            bytes: Payload::from(&data[start..end]),
        }
    };
    FetchSnapshotResponse {
        epoch: LEADER_EPOCH,
        leader: Some(NodeId(NODE_ID)),
        result,
    }
}

/// The controller's verdict on a broker's registration: the image's brokers each have the
/// incarnation id of their id's byte and epoch `10 × id` (another incarnation of a live one
/// is refused); a new broker's epoch is the log end. A broker must support the finalized
/// metadata.version (27).
fn registration(r: &BrokerRegistrationRequest) -> Result<BrokerRegistrationResponse, RpcError> {
    let api = |e| Err(RpcError::Api(e));
    let supported = r
        .features
        .iter()
        .any(|f| f.name == "metadata.version" && f.min_level <= 27 && 27 <= f.max_level);
    if !supported {
        return api(ApiError::UnsupportedFeatures {
            broker_id: r.broker_id,
            feature: "metadata.version".into(),
        });
    }
    let broker_epoch = match brokers().iter().find(|b| b.broker_id == r.broker_id) {
        Some(b) if r.incarnation_id != Uuid([b.broker_id.0 as u8; 16]) => {
            return api(ApiError::DuplicateBrokerRegistration {
                broker_id: r.broker_id,
            })
        }
        Some(b) => b.broker_epoch,
        None => BrokerEpoch(LOG_END.0),
    };
    Ok(BrokerRegistrationResponse { broker_epoch })
}

/// The image's broker `id` at `epoch`, as the controller checks a broker's request:
/// BROKER_ID_NOT_REGISTERED, or STALE_BROKER_EPOCH.
fn registered(id: NodeId, epoch: BrokerEpoch) -> Result<DescribedBroker, RpcError> {
    let Some(b) = brokers().into_iter().find(|b| b.broker_id == id) else {
        return Err(RpcError::Api(ApiError::BrokerIdNotRegistered {
            broker_id: id,
        }));
    };
    if b.broker_epoch != epoch {
        return Err(RpcError::Api(ApiError::StaleBrokerEpoch {
            broker_id: id,
            current: b.broker_epoch,
            request: epoch,
        }));
    }
    Ok(b)
}

/// The controller's verdict on a heartbeat (see [`registration`] for the image's brokers).
fn broker_heartbeat(r: &BrokerHeartbeatRequest) -> Result<BrokerHeartbeatResponse, RpcError> {
    let Some(epoch) = r.broker_epoch else {
        return Err(RpcError::Api(ApiError::InvalidRequest {
            reason: "a heartbeat without a broker epoch".into(),
        }));
    };
    let b = registered(r.broker_id, epoch)?;
    // Broker 4 leads partitions: its shutdown waits for them to move.
    let target_state = if r.want_shutdown && b.broker_id == NodeId(4) {
        TargetState::ControlledShutdown
    } else if r.want_shutdown {
        TargetState::Shutdown
    } else if r.want_fence || r.next_metadata_offset < LOG_END {
        TargetState::Fenced
    } else {
        TargetState::Active
    };
    Ok(BrokerHeartbeatResponse {
        broker_epoch: epoch,
        target_state,
        lease_duration_ms: 9_000,
        is_caught_up: r.next_metadata_offset >= LOG_END,
    })
}

/// The next block of producer ids, for a registered broker at its epoch.
fn allocate_producer_ids(
    r: &AllocateProducerIdsRequest,
) -> Result<AllocateProducerIdsResponse, RpcError> {
    registered(r.broker_id, r.broker_epoch)?;
    Ok(AllocateProducerIdsResponse {
        first_producer_id: 5_000,
        count: 1_000,
    })
}

/// The image's partition `partition` of the topic `topic_id`, or the error the controller
/// gives for it.
fn image_partition(
    topic_id: TopicId,
    partition: PartitionId,
) -> Result<DescribedPartition, ApiError> {
    let (name, count) = image_topic(&TopicRef::Id(topic_id))?;
    if partition.0 >= count {
        return Err(ApiError::UnknownPartition {
            topic_id,
            partition,
        });
    }
    Ok(described_topic(name, count)
        .partitions
        .swap_remove(partition.0 as usize))
}

/// The controller's verdict on a leader's AlterPartition, partition by partition: the
/// requester must lead it (broker 4 leads every partition but 1) at its leader and
/// partition epochs, and the new ISR holds replicas (4, 5) only, never the fenced 5 and,
/// with member epochs, only at their brokers' epochs.
fn alter_partition(r: &AlterPartitionRequest) -> Result<AlterPartitionResponse, RpcError> {
    registered(r.broker_id, r.broker_epoch)?;
    let topics = r
        .topics
        .iter()
        .map(|t| AlterPartitionTopicResult {
            topic_id: t.topic_id,
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let altered = image_partition(t.topic_id, p.partition_id).and_then(|d| {
                        if d.leader != Some(r.broker_id) {
                            return Err(ApiError::NotLeader {
                                broker_id: r.broker_id,
                                topic_id: t.topic_id,
                                partition: p.partition_id,
                            });
                        }
                        if p.leader_epoch != d.leader_epoch {
                            return Err(ApiError::FencedLeaderEpoch {
                                topic_id: t.topic_id,
                                partition: p.partition_id,
                                current: d.leader_epoch,
                                request: p.leader_epoch,
                            });
                        }
                        if p.partition_epoch != d.partition_epoch {
                            return Err(ApiError::StalePartitionEpoch {
                                topic_id: t.topic_id,
                                partition: p.partition_id,
                                current: d.partition_epoch,
                                request: p.partition_epoch,
                            });
                        }
                        for m in &p.new_isr_with_epochs {
                            if !d.replicas.contains(&m.broker_id) {
                                return Err(ApiError::InvalidIsr {
                                    reason: "a member is not a replica".into(),
                                });
                            }
                            let b = brokers().into_iter().find(|b| b.broker_id == m.broker_id);
                            let stale = m
                                .broker_epoch
                                .is_some_and(|e| b.as_ref().map(|b| b.broker_epoch) != Some(e));
                            if b.is_none_or(|b| b.fenced) || stale {
                                return Err(ApiError::IneligibleReplica {
                                    broker_id: m.broker_id,
                                    reason: "fenced, or at another epoch".into(),
                                });
                            }
                        }
                        Ok(AlteredPartition {
                            leader: d.leader,
                            leader_epoch: d.leader_epoch,
                            isr: p.new_isr_with_epochs.iter().map(|m| m.broker_id).collect(),
                            leader_recovery_state: p.leader_recovery_state,
                            partition_epoch: PartitionEpoch(d.partition_epoch.0 + 1),
                        })
                    });
                    (p.partition_id, altered)
                })
                .collect(),
        })
        .collect();
    Ok(AlterPartitionResponse { topics })
}

/// The controller's verdict on where a broker keeps its replicas: each named partition must
/// exist and hold a replica on the requester.
fn assign_replicas_to_dirs(
    r: &AssignReplicasToDirsRequest,
) -> Result<AssignReplicasToDirsResponse, RpcError> {
    registered(r.broker_id, r.broker_epoch)?;
    let directories = r
        .directories
        .iter()
        .map(|d| DirectoryAssignmentResult {
            directory_id: d.directory_id,
            topics: d
                .topics
                .iter()
                .map(|t| TopicPartitionResults {
                    topic_id: t.topic_id,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|&p| {
                            let placed = image_partition(t.topic_id, p).and_then(|d| {
                                if d.replicas.contains(&r.broker_id) {
                                    Ok(())
                                } else {
                                    Err(ApiError::NotReplica {
                                        broker_id: r.broker_id,
                                        topic_id: t.topic_id,
                                        partition: p,
                                    })
                                }
                            });
                            (p, placed)
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    Ok(AssignReplicasToDirsResponse { directories })
}

/// Only a fenced broker of the image (5) can be unregistered.
fn unregister_broker(r: &UnregisterBrokerRequest) -> Result<(), RpcError> {
    match brokers().iter().find(|b| b.broker_id == r.broker_id) {
        None => Err(RpcError::Api(ApiError::BrokerIdNotRegistered {
            broker_id: r.broker_id,
        })),
        Some(b) if !b.fenced => Err(RpcError::Api(ApiError::BrokerNotFenced {
            broker_id: r.broker_id,
        })),
        Some(_) => Ok(()),
    }
}
