//! The Kafka listener's fuzz corpus on the stable toolchain: every file of the cargo-fuzz
//! target's corpus (`fuzz/corpus/kafka_listener/`) and of its findings
//! (`fuzz/artifacts/kafka_listener/`, fixed and kept as regressions) replayed through the
//! same harness the fuzz target runs ([`fuzz_harness::connection`]), so `cargo test` covers
//! them without nightly.
//!
//! The corpus's seeds (`seed-*` files) are generated here: every served API at every served
//! version, encoded from the codec's default value and from filled-in values, once as a
//! healthy controller answers them and once with the scripted backend's faults, plus whole
//! client sessions (an admin client's, a broker's) and framing the listener must refuse;
//! `broker_seeds_reach_their_paths` checks that the broker-facing seeds reach the answers
//! they are written for. `seeds_are_current` fails when the
//! generated seeds and the checked-in ones differ (a new API or version, a changed seed);
//! `CORUM_REWRITE=1 cargo test -p corum-kafka --test fuzz_corpus` rewrites them. Files the
//! fuzzer found (named by their SHA-1) are kept as they are.

mod fuzz_harness;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::{BufMut, BytesMut};
use corum_kafka::apis::SERVED;
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::messages::ResponseKind;
use kafka_protocol::messages::{
    add_raft_voter_request, alter_configs_request, alter_partition_request,
    assign_replicas_to_dirs_request, broker_registration_request, create_partitions_request,
    create_topics_request, delete_topics_request, describe_configs_request,
    describe_quorum_request, describe_topic_partitions_request, elect_leaders_request,
    fetch_request, fetch_snapshot_request, incremental_alter_configs_request,
    list_partition_reassignments_request, metadata_request, update_features_request,
    update_raft_voter_request, AddRaftVoterRequest, AllocateProducerIdsRequest,
    AlterConfigsRequest, AlterPartitionRequest, ApiKey, ApiVersionsRequest,
    AssignReplicasToDirsRequest, BrokerHeartbeatRequest, BrokerId, BrokerRegistrationRequest,
    CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest, DefaultPrincipalData,
    DeleteAclsRequest, DeleteTopicsRequest, DescribeAclsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, DescribeQuorumRequest, DescribeTopicPartitionsRequest,
    ElectLeadersRequest, EnvelopeRequest, FetchRequest, FetchSnapshotRequest,
    IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest, MetadataRequest,
    ProduceRequest, RemoveRaftVoterRequest, RequestHeader, RequestKind, TopicName,
    UnregisterBrokerRequest, UpdateFeaturesRequest, UpdateRaftVoterRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;

use fuzz_harness::{answers, connection, topic_id};

/// The tests decode hostile bytes: the process allocator must be the one a node uses.
#[global_allocator]
static ALLOC: corum_kafka::alloc::NoReserveLarge = corum_kafka::alloc::NoReserveLarge;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn corpus_dir() -> PathBuf {
    fuzz_dir().join("corpus/kafka_listener")
}

fn artifacts_dir() -> PathBuf {
    fuzz_dir().join("artifacts/kafka_listener")
}

/// The files of `dir` by name (none when it does not exist).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p
                .file_name()
                .expect("a file has a name")
                .to_string_lossy()
                .into_owned();
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name, bytes)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Seeds.

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn name(s: &str) -> TopicName {
    TopicName(text(s))
}

fn uuid(id: corum_controller::TopicId) -> uuid::Uuid {
    uuid::Uuid::from_bytes(id.0 .0)
}

/// One size-prefixed request as a client sends it.
fn frame(api: ApiKey, version: i16, correlation_id: i32, body: &RequestKind) -> Vec<u8> {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(text("corum-fuzz")))
        .encode(&mut buf, api.request_header_version(version))
        .expect("a request header encodes");
    body.encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("{api:?} v{version}: a seed does not encode: {e:#}"));
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.to_vec()
}

/// The codec's default value of `api`'s request.
fn default_request(api: ApiKey) -> RequestKind {
    corum_kafka::apis::default_request(api)
        .unwrap_or_else(|| panic!("{api:?} is served but has no seed: add it here"))
}

/// Filled-in requests of `api` at `version`: what clients send, and the corners the
/// translations check (duplicates, unknown topics, negative ids, null values, ids).
fn filled_requests(api: ApiKey, version: i16) -> Vec<RequestKind> {
    match api {
        ApiKey::Metadata => {
            let by_name = |n: &str| {
                let mut t = metadata_request::MetadataRequestTopic::default();
                t.name = Some(name(n));
                t
            };
            let mut named = MetadataRequest::default();
            named.topics = Some(vec![by_name("orders"), by_name("missing")]);
            if version >= 10 {
                let mut by_id = metadata_request::MetadataRequestTopic::default();
                by_id.name = None;
                by_id.topic_id = uuid(topic_id("logs"));
                let mut unknown = by_id.clone();
                unknown.topic_id = uuid(topic_id("missing"));
                named
                    .topics
                    .as_mut()
                    .expect("set above")
                    .extend([by_id, unknown]);
            }
            let mut all = MetadataRequest::default();
            if version >= 1 {
                all.topics = None;
            }
            if version >= 8 {
                all.include_topic_authorized_operations = true;
            }
            vec![RequestKind::Metadata(named), RequestKind::Metadata(all)]
        }
        ApiKey::ApiVersions => {
            let mut r = ApiVersionsRequest::default();
            if version >= 3 {
                r.client_software_name = text("librdkafka");
                r.client_software_version = text("2.16.0");
            }
            vec![RequestKind::ApiVersions(r)]
        }
        ApiKey::CreateTopics => {
            let topic = |n: &str, partitions: i32, rf: i16| {
                let mut t = create_topics_request::CreatableTopic::default();
                t.name = name(n);
                t.num_partitions = partitions;
                t.replication_factor = rf;
                t
            };
            let mut with_configs = topic("new-topic", -1, -1);
            let mut config = create_topics_request::CreatableTopicConfig::default();
            config.name = text("retention.ms");
            config.value = Some(text("1000"));
            let mut null_value = create_topics_request::CreatableTopicConfig::default();
            null_value.name = text("cleanup.policy");
            null_value.value = None;
            with_configs.configs = vec![config];
            let mut assigned = topic("assigned", -1, -1);
            assigned.assignments = [(1, vec![5, 4]), (0, vec![4, 5])]
                .into_iter()
                .map(|(p, brokers)| {
                    let mut a = create_topics_request::CreatableReplicaAssignment::default();
                    a.partition_index = p;
                    a.broker_ids = brokers.into_iter().map(BrokerId).collect();
                    a
                })
                .collect();
            let mut bad_assignment = topic("gap", -1, -1);
            bad_assignment.assignments = assigned.assignments[..1].to_vec();
            let mut null_config = topic("null-config", 3, 2);
            null_config.configs = vec![null_value];
            let mut good = CreateTopicsRequest::default();
            good.timeout_ms = 30_000;
            good.topics = vec![with_configs, assigned, topic("three", 3, 2)];
            let mut corners = CreateTopicsRequest::default();
            corners.topics = vec![
                topic("orders", 1, 1),
                topic("twice", 1, 1),
                topic("twice", 2, 1),
                topic("bad name!", 1, 1),
                topic("zero", 0, 1),
                topic("too-many-replicas", 1, 9),
                bad_assignment,
                null_config,
            ];
            if version >= 1 {
                corners.validate_only = true;
            }
            vec![
                RequestKind::CreateTopics(good),
                RequestKind::CreateTopics(corners),
            ]
        }
        ApiKey::DeleteTopics => {
            let mut r = DeleteTopicsRequest::default();
            r.timeout_ms = 30_000;
            if version >= 6 {
                let state = |n: Option<&str>, id: Option<&str>| {
                    let mut s = delete_topics_request::DeleteTopicState::default();
                    s.name = n.map(name);
                    s.topic_id = id.map_or(uuid::Uuid::nil(), |n| uuid(topic_id(n)));
                    s
                };
                r.topics = vec![
                    state(Some("orders"), None),
                    state(None, Some("logs")),
                    state(None, Some("missing")),
                    state(Some("missing"), None),
                ];
            } else {
                r.topic_names = vec![name("orders"), name("missing"), name("logs")];
            }
            vec![RequestKind::DeleteTopics(r)]
        }
        ApiKey::DescribeConfigs => {
            let resource = |t: i8, n: &str, keys: Option<Vec<&str>>| {
                let mut r = describe_configs_request::DescribeConfigsResource::default();
                r.resource_type = t;
                r.resource_name = text(n);
                r.configuration_keys = keys.map(|k| k.into_iter().map(text).collect());
                r
            };
            let mut r = DescribeConfigsRequest::default();
            r.resources = vec![
                resource(2, "orders", None),
                resource(2, "orders", Some(vec!["retention.ms"])),
                resource(2, "missing", None),
                resource(4, "", None),
                resource(4, "4", None),
                resource(4, "not-a-broker", None),
                resource(8, "4", None),
                resource(99, "x", None),
            ];
            r.include_synonyms = version >= 1;
            r.include_documentation = version >= 3;
            vec![RequestKind::DescribeConfigs(r)]
        }
        ApiKey::AlterConfigs => {
            let config = |n: &str, v: Option<&str>| {
                let mut c = alter_configs_request::AlterableConfig::default();
                c.name = text(n);
                c.value = v.map(text);
                c
            };
            let resource = |t: i8, n: &str, configs| {
                let mut r = alter_configs_request::AlterConfigsResource::default();
                r.resource_type = t;
                r.resource_name = text(n);
                r.configs = configs;
                r
            };
            let mut r = AlterConfigsRequest::default();
            r.resources = vec![
                resource(2, "orders", vec![config("cleanup.policy", Some("compact"))]),
                resource(2, "logs", vec![config("retention.ms", None)]),
                resource(4, "", vec![config("unknown.key", Some("1"))]),
                resource(8, "4", vec![]),
                resource(2, "missing", vec![]),
            ];
            vec![RequestKind::AlterConfigs(r)]
        }
        ApiKey::CreatePartitions => {
            let topic = |n: &str, count: i32, assignments: Option<Vec<Vec<i32>>>| {
                let mut t = create_partitions_request::CreatePartitionsTopic::default();
                t.name = name(n);
                t.count = count;
                t.assignments = assignments.map(|list| {
                    list.into_iter()
                        .map(|b| {
                            let mut a =
                                create_partitions_request::CreatePartitionsAssignment::default();
                            a.broker_ids = b.into_iter().map(BrokerId).collect();
                            a
                        })
                        .collect()
                });
                t
            };
            let mut r = CreatePartitionsRequest::default();
            r.timeout_ms = 30_000;
            r.topics = vec![
                topic("orders", 5, None),
                topic("logs", 3, Some(vec![vec![4, 5], vec![5, 4]])),
                topic("missing", 2, None),
                topic("dup", 2, None),
                topic("dup", 3, None),
                topic("negative", -4, None),
                topic("negative-broker", 9, Some(vec![vec![-1]])),
            ];
            vec![RequestKind::CreatePartitions(r)]
        }
        ApiKey::ElectLeaders => {
            let partitions = |t: &str, p: Vec<i32>| {
                let mut tp = elect_leaders_request::TopicPartitions::default();
                tp.topic = name(t);
                tp.partitions = p;
                tp
            };
            let mut some = ElectLeadersRequest::default();
            some.timeout_ms = 30_000;
            some.topic_partitions = Some(vec![
                partitions("orders", vec![0, 1, 7, -1]),
                partitions("missing", vec![0]),
            ]);
            let mut all = ElectLeadersRequest::default();
            all.topic_partitions = None;
            if version >= 1 {
                all.election_type = 1;
            }
            vec![
                RequestKind::ElectLeaders(some),
                RequestKind::ElectLeaders(all),
            ]
        }
        ApiKey::IncrementalAlterConfigs => {
            let config = |n: &str, op: i8, v: Option<&str>| {
                let mut c = incremental_alter_configs_request::AlterableConfig::default();
                c.name = text(n);
                c.config_operation = op;
                c.value = v.map(text);
                c
            };
            let resource = |t: i8, n: &str, configs| {
                let mut r = incremental_alter_configs_request::AlterConfigsResource::default();
                r.resource_type = t;
                r.resource_name = text(n);
                r.configs = configs;
                r
            };
            let mut r = IncrementalAlterConfigsRequest::default();
            r.resources = vec![
                resource(
                    2,
                    "orders",
                    vec![
                        config("retention.ms", 0, Some("1000")),
                        config("cleanup.policy", 2, Some("compact")),
                    ],
                ),
                resource(2, "logs", vec![config("retention.ms", 1, None)]),
                resource(4, "", vec![config("log.retention.ms", 3, Some("1"))]),
                resource(4, "4", vec![config("num.partitions", 7, Some("1"))]),
                resource(2, "missing", vec![config("retention.ms", 0, Some("1"))]),
            ];
            vec![RequestKind::IncrementalAlterConfigs(r)]
        }
        ApiKey::DescribeQuorum => {
            let mut topic = describe_quorum_request::TopicData::default();
            topic.topic_name = name("__cluster_metadata");
            topic.partitions = vec![describe_quorum_request::PartitionData::default()];
            let mut r = DescribeQuorumRequest::default();
            r.topics = vec![topic];
            vec![RequestKind::DescribeQuorum(r)]
        }
        ApiKey::UpdateFeatures => {
            let update = |level: i16, kind: i8| {
                let mut u = update_features_request::FeatureUpdateKey::default();
                u.feature = text("metadata.version");
                u.max_version_level = level;
                if version == 0 {
                    u.allow_downgrade = kind != 1;
                } else {
                    u.upgrade_type = kind;
                }
                u
            };
            let mut r = UpdateFeaturesRequest::default();
            r.timeout_ms = 30_000;
            r.feature_updates = vec![update(27, 1), update(20, 2), update(-1, 3)];
            if version >= 1 {
                r.feature_updates.push(update(20, 9));
            }
            let mut unknown = update_features_request::FeatureUpdateKey::default();
            unknown.feature = text("group.version");
            unknown.max_version_level = 1;
            if version >= 1 {
                unknown.upgrade_type = 1;
            }
            r.feature_updates.push(unknown);
            if version >= 1 {
                r.validate_only = true;
            }
            vec![RequestKind::UpdateFeatures(r)]
        }
        ApiKey::DescribeCluster => (1..=3)
            .filter(|&t| version >= 1 || t == 1)
            .map(|endpoint_type| {
                let mut r = DescribeClusterRequest::default();
                r.endpoint_type = endpoint_type;
                r.include_fenced_brokers = version >= 2;
                RequestKind::DescribeCluster(r)
            })
            .collect(),
        ApiKey::DescribeTopicPartitions => {
            let topic = |n: &str| {
                let mut t = describe_topic_partitions_request::TopicRequest::default();
                t.name = name(n);
                t
            };
            let mut named = DescribeTopicPartitionsRequest::default();
            named.topics = vec![topic("orders"), topic("missing"), topic("logs")];
            named.response_partition_limit = 2;
            let mut cursor = describe_topic_partitions_request::Cursor::default();
            cursor.topic_name = name("orders");
            cursor.partition_index = 1;
            let mut continued = DescribeTopicPartitionsRequest::default();
            continued.response_partition_limit = 1;
            continued.cursor = Some(cursor);
            vec![
                RequestKind::DescribeTopicPartitions(named),
                RequestKind::DescribeTopicPartitions(continued),
            ]
        }
        ApiKey::DescribeAcls => vec![RequestKind::DescribeAcls(DescribeAclsRequest::default())],
        ApiKey::SaslHandshake => ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"]
            .into_iter()
            .map(|m| {
                RequestKind::SaslHandshake(
                    kafka_protocol::messages::SaslHandshakeRequest::default()
                        .with_mechanism(text(m)),
                )
            })
            .collect(),
        // PLAIN's token, SCRAM's first and final messages (the harness's SASL state knows
        // alice's password and bob's SCRAM credential).
        ApiKey::SaslAuthenticate => [
            &b"\0alice\0alice-secret"[..],
            b"\0alice\0wrong",
            b"n,,n=bob,r=clientnonce",
            b"c=biws,r=clientnoncefuzznonce,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        ]
        .into_iter()
        .map(|token| {
            RequestKind::SaslAuthenticate(
                kafka_protocol::messages::SaslAuthenticateRequest::default()
                    .with_auth_bytes(bytes::Bytes::from_static(token)),
            )
        })
        .collect(),
        ApiKey::DescribeUserScramCredentials => vec![
            RequestKind::DescribeUserScramCredentials(Default::default()),
            RequestKind::DescribeUserScramCredentials(
                kafka_protocol::messages::DescribeUserScramCredentialsRequest::default()
                    .with_users(Some(vec![
                        kafka_protocol::messages::describe_user_scram_credentials_request::UserName::default()
                            .with_name(text("bob")),
                        kafka_protocol::messages::describe_user_scram_credentials_request::UserName::default()
                            .with_name(text("nobody")),
                    ])),
            ),
        ],
        ApiKey::AlterUserScramCredentials => {
            use kafka_protocol::messages::alter_user_scram_credentials_request::{
                ScramCredentialDeletion, ScramCredentialUpsertion,
            };
            vec![RequestKind::AlterUserScramCredentials(
                kafka_protocol::messages::AlterUserScramCredentialsRequest::default()
                    .with_deletions(vec![ScramCredentialDeletion::default()
                        .with_name(text("carol"))
                        .with_mechanism(2)])
                    .with_upsertions(vec![ScramCredentialUpsertion::default()
                        .with_name(text("bob"))
                        .with_mechanism(1)
                        .with_iterations(4096)
                        .with_salt(bytes::Bytes::from_static(b"salt"))
                        .with_salted_password(bytes::Bytes::from_static(&[7; 32]))]),
            )]
        }
        ApiKey::CreateAcls => vec![RequestKind::CreateAcls(CreateAclsRequest::default())],
        ApiKey::DeleteAcls => vec![RequestKind::DeleteAcls(DeleteAclsRequest::default())],
        // The harness's cluster id is [7; 16], its voters 1-3 with directory ids [id; 16].
        ApiKey::AddRaftVoter => {
            let listener = |name: &str, port: u16| {
                add_raft_voter_request::Listener::default()
                    .with_name(text(name))
                    .with_host(text("host4"))
                    .with_port(port)
            };
            let add = |id: i32, cluster: Option<&str>, listeners| {
                RequestKind::AddRaftVoter(
                    AddRaftVoterRequest::default()
                        .with_cluster_id(cluster.map(text))
                        .with_timeout_ms(30_000)
                        .with_voter_id(id)
                        .with_voter_directory_id(uuid::Uuid::from_bytes([id as u8; 16]))
                        .with_listeners(listeners),
                )
            };
            let own = corum_types::Uuid([7; 16]).to_string();
            vec![
                add(4, None, vec![listener("CONTROLLER", 9093)]),
                add(
                    2,
                    Some(&own),
                    vec![listener("CONTROLLER", 9093), listener("REPLICATION", 9094)],
                ),
                add(
                    4,
                    Some("another-cluster"),
                    vec![listener("CONTROLLER", 9093)],
                ),
                add(-1, None, vec![listener("KAFKA", 9092)]),
            ]
        }
        ApiKey::RemoveRaftVoter => [(2, 2), (9, 9), (3, 0)]
            .into_iter()
            .map(|(id, dir)| {
                RequestKind::RemoveRaftVoter(
                    RemoveRaftVoterRequest::default()
                        .with_cluster_id(None)
                        .with_voter_id(id)
                        .with_voter_directory_id(uuid::Uuid::from_bytes([dir; 16])),
                )
            })
            .collect(),
        ApiKey::UpdateRaftVoter => [(3, 0, 1), (2, 0, 1), (3, 1, 0)]
            .into_iter()
            .map(|(epoch, min, max)| {
                RequestKind::UpdateRaftVoter(
                    UpdateRaftVoterRequest::default()
                        .with_cluster_id(None)
                        .with_current_leader_epoch(epoch)
                        .with_voter_id(2)
                        .with_voter_directory_id(uuid::Uuid::from_bytes([2; 16]))
                        .with_listeners(vec![update_raft_voter_request::Listener::default()
                            .with_name(text("CONTROLLER"))
                            .with_host(text("host2"))
                            .with_port(9093)])
                        .with_k_raft_version_feature(
                            update_raft_voter_request::KRaftVersionFeature::default()
                                .with_min_supported_version(min)
                                .with_max_supported_version(max),
                        ),
                )
            })
            .collect(),
        // The metadata log of the harness: a snapshot ends at 90 (epoch 2), the leader's
        // epoch 3 holds 90..100, and broker 4 (epoch 40, directory [4; 16]) follows it.
        ApiKey::Fetch => {
            // What a broker sends, field by field as its version has them.
            let fetch = |offset: i64, last_fetched_epoch: i32, leader_epoch: i32| {
                let mut p = fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(leader_epoch)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20);
                if version >= 12 {
                    p.last_fetched_epoch = last_fetched_epoch;
                }
                if version >= 17 {
                    p.replica_directory_id = uuid::Uuid::from_bytes([4; 16]);
                }
                if version >= 18 {
                    // The high watermark the broker knows.
                    p.high_watermark = offset.min(93);
                }
                let mut t = fetch_request::FetchTopic::default().with_partitions(vec![p]);
                if version >= 13 {
                    t.topic_id = METADATA_TOPIC_ID;
                } else {
                    t.topic = name("__cluster_metadata");
                }
                let mut r = FetchRequest::default()
                    .with_max_wait_ms(500)
                    .with_min_bytes(0)
                    .with_max_bytes(8 << 20)
                    .with_topics(vec![t]);
                if version >= 12 {
                    r.cluster_id = Some(text(&own_cluster()));
                }
                if version >= 15 {
                    r.replica_state = fetch_request::ReplicaState::default()
                        .with_replica_id(BrokerId(4))
                        .with_replica_epoch(40);
                } else {
                    r.replica_id = BrokerId(4);
                }
                r
            };
            // A fetch before v12 has no last fetched epoch, so only offset 0 is valid.
            let mut requests = vec![fetch(0, 0, 3)];
            if version >= 12 {
                requests.extend([
                    // Right after the snapshot, inside the log, at its end, past it.
                    fetch(90, 2, 3),
                    fetch(93, 3, 3),
                    fetch(100, 3, 3),
                    fetch(120, 3, 3),
                ]);
            }
            if version >= 9 {
                // A leader epoch this node does not know yet.
                requests.push(fetch(if version >= 12 { 93 } else { 0 }, 3, 4));
            }
            let mut wrong_topic = fetch(0, 0, 3);
            if version >= 13 {
                wrong_topic.topics[0].topic_id = uuid::Uuid::from_u64_pair(0, 2);
            } else {
                wrong_topic.topics[0].topic = name("orders");
            }
            let mut two_partitions = fetch(0, 0, 3);
            let mut second = two_partitions.topics[0].partitions[0].clone();
            second.partition = 1;
            two_partitions.topics[0].partitions.push(second);
            let mut negative_replica = fetch(0, 0, 3);
            negative_replica.replica_id = BrokerId(-1);
            if version >= 15 {
                negative_replica.replica_state.replica_id = BrokerId(-1);
                negative_replica.replica_id = BrokerId(-1);
            }
            requests.extend([wrong_topic, two_partitions, negative_replica]);
            if version >= 12 {
                let mut other_cluster = fetch(0, 0, 3);
                other_cluster.cluster_id = Some(text("another-cluster"));
                requests.push(other_cluster);
            }
            requests.into_iter().map(RequestKind::Fetch).collect()
        }
        ApiKey::FetchSnapshot => {
            let snapshot = |end_offset: i64, position: i64, max_bytes: i32, leader_epoch: i32| {
                let mut p = fetch_snapshot_request::PartitionSnapshot::default()
                    .with_partition(0)
                    .with_current_leader_epoch(leader_epoch)
                    .with_snapshot_id(
                        fetch_snapshot_request::SnapshotId::default()
                            .with_end_offset(end_offset)
                            .with_epoch(2),
                    )
                    .with_position(position);
                if version >= 1 {
                    p.replica_directory_id = uuid::Uuid::from_bytes([4; 16]);
                }
                FetchSnapshotRequest::default()
                    .with_cluster_id(Some(text(&own_cluster())))
                    .with_replica_id(BrokerId(4))
                    .with_max_bytes(max_bytes)
                    .with_topics(vec![fetch_snapshot_request::TopicSnapshot::default()
                        .with_name(name("__cluster_metadata"))
                        .with_partitions(vec![p])])
            };
            let mut other_cluster = snapshot(90, 0, 1 << 20, 3);
            other_cluster.cluster_id = Some(text("another-cluster"));
            [
                // All of it, a chunk further on, past its end.
                snapshot(90, 0, 1 << 20, 3),
                snapshot(90, 300, 1000, 3),
                snapshot(90, 1 << 20, 1000, 3),
                // A snapshot the leader does not hold; a leader epoch not known yet.
                snapshot(80, 0, 1 << 20, 3),
                snapshot(90, 0, 1 << 20, 4),
                other_cluster,
            ]
            .into_iter()
            .map(RequestKind::FetchSnapshot)
            .collect()
        }
        ApiKey::BrokerRegistration => {
            let listener = |name: &str, port: u16| {
                broker_registration_request::Listener::default()
                    .with_name(text(name))
                    .with_host(text("b4"))
                    .with_port(port)
                    .with_security_protocol(0)
            };
            let feature = |name: &str, min: i16, max: i16| {
                broker_registration_request::Feature::default()
                    .with_name(text(name))
                    .with_min_supported_version(min)
                    .with_max_supported_version(max)
            };
            // What a Kafka 4.1 broker sends (the fields of its version).
            let register = |id: i32, cluster: &str, metadata_version_min: i16| {
                let mut r = BrokerRegistrationRequest::default()
                    .with_broker_id(BrokerId(id))
                    .with_cluster_id(text(cluster))
                    .with_incarnation_id(uuid::Uuid::from_bytes([id as u8; 16]))
                    .with_listeners(vec![listener("PLAINTEXT", 9092), listener("KAFKA", 9094)])
                    .with_features(vec![
                        feature("metadata.version", metadata_version_min, 27),
                        feature("kraft.version", 0, 1),
                        feature("group.version", 0, 1),
                    ])
                    .with_rack(Some(text("r1")));
                if version >= 2 {
                    r.log_dirs = vec![uuid::Uuid::from_bytes([40 + id as u8; 16])];
                }
                if version >= 3 {
                    r.previous_broker_epoch = 40;
                }
                r
            };
            let own = own_cluster();
            let mut new_broker = register(9, &own, 7);
            new_broker.rack = None;
            let mut another_incarnation = register(4, &own, 7);
            another_incarnation.incarnation_id = uuid::Uuid::from_bytes([9; 16]);
            [
                register(4, &own, 7),
                new_broker,
                another_incarnation,
                register(4, "another-cluster", 7),
                register(4, &own, -1),
            ]
            .into_iter()
            .map(RequestKind::BrokerRegistration)
            .collect()
        }
        ApiKey::BrokerHeartbeat => {
            let heartbeat = |id: i32, epoch: i64, applied: i64| {
                let mut r = BrokerHeartbeatRequest::default()
                    .with_broker_id(BrokerId(id))
                    .with_broker_epoch(epoch)
                    .with_current_metadata_offset(applied);
                if version >= 1 {
                    r.offline_log_dirs = vec![uuid::Uuid::from_bytes([41; 16])];
                }
                r
            };
            [
                // Caught up; behind; asking to be fenced; shutting down (4 leads partitions,
                // 6 none); a stale epoch; an unknown broker; the largest offset.
                heartbeat(4, 40, 99),
                heartbeat(4, 40, 50),
                heartbeat(4, 40, 99).with_want_fence(true),
                heartbeat(4, 40, 99).with_want_shut_down(true),
                heartbeat(6, 60, 99).with_want_shut_down(true),
                heartbeat(4, 39, 99),
                heartbeat(9, 90, 99),
                heartbeat(4, 40, i64::MAX),
            ]
            .into_iter()
            .map(RequestKind::BrokerHeartbeat)
            .collect()
        }
        // Broker 5 is fenced, 4 is not, 9 is unknown.
        ApiKey::UnregisterBroker => [5, 4, 9, -1]
            .into_iter()
            .map(|id| {
                RequestKind::UnregisterBroker(
                    UnregisterBrokerRequest::default().with_broker_id(BrokerId(id)),
                )
            })
            .collect(),
        // Broker 4 (epoch 40) leads every partition but 1 of the image's topics; 5 is fenced.
        ApiKey::AllocateProducerIds => [(4, 40), (4, 39), (9, 90), (-1, 40), (4, -1)]
            .into_iter()
            .map(|(id, epoch)| {
                RequestKind::AllocateProducerIds(
                    AllocateProducerIdsRequest::default()
                        .with_broker_id(BrokerId(id))
                        .with_broker_epoch(epoch),
                )
            })
            .collect(),
        ApiKey::AlterPartition => {
            // The partition's leader and partition epochs in the image are `p + 2`, `p + 5`.
            let partition = |p: i32, leader_epoch: i32, partition_epoch: i32, isr: &[i32]| {
                let mut d = alter_partition_request::PartitionData::default()
                    .with_partition_index(p)
                    .with_leader_epoch(leader_epoch)
                    .with_partition_epoch(partition_epoch);
                if version >= 3 {
                    d.new_isr_with_epochs = isr
                        .iter()
                        .map(|&b| {
                            alter_partition_request::BrokerState::default()
                                .with_broker_id(BrokerId(b))
                                .with_broker_epoch(i64::from(b) * 10)
                        })
                        .collect();
                } else {
                    d.new_isr = isr.iter().map(|&b| BrokerId(b)).collect();
                }
                d
            };
            let topic = |n: &str, partitions| {
                alter_partition_request::TopicData::default()
                    .with_topic_id(uuid(topic_id(n)))
                    .with_partitions(partitions)
            };
            let alter = |id: i32, epoch: i64, topics| {
                AlterPartitionRequest::default()
                    .with_broker_id(BrokerId(id))
                    .with_broker_epoch(epoch)
                    .with_topics(topics)
            };
            let mut stale_member = partition(0, 2, 5, &[4]);
            if version >= 3 {
                stale_member.new_isr_with_epochs[0].broker_epoch = 39;
            }
            let corners = alter(
                4,
                40,
                vec![
                    topic(
                        "orders",
                        vec![
                            // Shrunk to the leader; recovering; not led by 4; a fenced
                            // member; an old leader epoch; an old partition epoch; no such
                            // partition; a member at another epoch (v3 only: v2 names none).
                            partition(0, 2, 5, &[4]),
                            partition(2, 4, 7, &[4]).with_leader_recovery_state(1),
                            partition(1, 3, 6, &[4]),
                            partition(0, 2, 5, &[4, 5]),
                            partition(0, 1, 5, &[4]),
                            partition(0, 2, 4, &[4]),
                            partition(7, 2, 5, &[4]),
                            stale_member,
                        ],
                    ),
                    topic("missing", vec![partition(0, 2, 5, &[4])]),
                ],
            );
            let good = || vec![topic("logs", vec![partition(0, 2, 5, &[4])])];
            let mut negative_partition = good();
            negative_partition[0].partitions[0].partition_index = -1;
            let mut bad_state = good();
            bad_state[0].partitions[0].leader_recovery_state = 2;
            let negative_member = vec![topic("logs", vec![partition(0, 2, 5, &[-1])])];
            [
                corners,
                alter(4, 39, good()),
                alter(4, 40, negative_partition),
                alter(4, 40, bad_state),
                alter(4, 40, negative_member),
                alter(-1, 40, good()),
            ]
            .into_iter()
            .map(RequestKind::AlterPartition)
            .collect()
        }
        ApiKey::AssignReplicasToDirs => {
            let topic = |n: &str, partitions: &[i32]| {
                assign_replicas_to_dirs_request::TopicData::default()
                    .with_topic_id(uuid(topic_id(n)))
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|&p| {
                                assign_replicas_to_dirs_request::PartitionData::default()
                                    .with_partition_index(p)
                            })
                            .collect(),
                    )
            };
            let assign = |id: i32, epoch: i64, topics| {
                AssignReplicasToDirsRequest::default()
                    .with_broker_id(BrokerId(id))
                    .with_broker_epoch(epoch)
                    .with_directories(vec![
                        assign_replicas_to_dirs_request::DirectoryData::default()
                            .with_id(uuid::Uuid::from_bytes([44; 16]))
                            .with_topics(topics),
                    ])
            };
            [
                assign(
                    4,
                    40,
                    vec![
                        topic("orders", &[0, 1, 2, 7]),
                        topic("logs", &[0]),
                        topic("missing", &[0]),
                    ],
                ),
                // Broker 6 holds no replica; a stale epoch; a negative partition or broker.
                assign(6, 60, vec![topic("orders", &[0])]),
                assign(4, 39, vec![topic("orders", &[0])]),
                assign(4, 40, vec![topic("orders", &[-1])]),
                assign(-1, 40, vec![topic("orders", &[0])]),
            ]
            .into_iter()
            .map(RequestKind::AssignReplicasToDirs)
            .collect()
        }
        ApiKey::ListPartitionReassignments => {
            let some =
                list_partition_reassignments_request::ListPartitionReassignmentsTopics::default()
                    .with_name(name("orders"))
                    .with_partition_indexes(vec![0, 1]);
            [None, Some(vec![some])]
                .into_iter()
                .map(|topics| {
                    RequestKind::ListPartitionReassignments(
                        ListPartitionReassignmentsRequest::default()
                            .with_timeout_ms(30_000)
                            .with_topics(topics),
                    )
                })
                .collect()
        }
        ApiKey::Envelope => {
            let envelope = |data: Vec<u8>, principal: Option<Vec<u8>>| {
                RequestKind::Envelope(
                    EnvelopeRequest::default()
                        .with_request_data(data.into())
                        .with_request_principal(principal.map(Into::into))
                        .with_client_host_address(vec![10, 0, 0, 7].into()),
                )
            };
            let alice = principal("User", "alice");
            // What brokers forward: an admin client's CreateTopics, DescribeQuorum, Metadata.
            let create = wrapped(ApiKey::CreateTopics, 7, 21, 0);
            let quorum = wrapped(ApiKey::DescribeQuorum, 2, 22, 0);
            let metadata = wrapped(ApiKey::Metadata, 12, 23, 0);
            let nested = {
                let RequestKind::Envelope(inner) = envelope(metadata.clone(), Some(alice.clone()))
                else {
                    unreachable!("an envelope");
                };
                unprefixed(ApiKey::Envelope, 0, 24, &RequestKind::Envelope(inner))
            };
            let mut truncated = metadata.clone();
            truncated.truncate(truncated.len() - 6);
            let mut too_new = unprefixed(
                ApiKey::ApiVersions,
                3,
                25,
                &default_request(ApiKey::ApiVersions),
            );
            too_new[2..4].copy_from_slice(&99i16.to_be_bytes());
            let mut bad_version = alice.clone();
            bad_version[..2].copy_from_slice(&1i16.to_be_bytes());
            let not_served = unprefixed(
                ApiKey::Produce,
                9,
                26,
                &RequestKind::Produce(ProduceRequest::default()),
            );
            vec![
                envelope(create, Some(alice.clone())),
                envelope(quorum, Some(alice.clone())),
                envelope(metadata.clone(), None),
                envelope(nested, Some(alice.clone())),
                envelope(vec![0xff, 0x01, 0x02], Some(alice.clone())),
                envelope(truncated, Some(alice.clone())),
                envelope(metadata.clone(), Some(bad_version)),
                envelope(metadata.clone(), Some(alice[..5].to_vec())),
                envelope(not_served, Some(alice.clone())),
                envelope(too_new, Some(alice)),
            ]
        }
        other => panic!("{other:?} is served but has no seed: add it here"),
    }
}

/// A request as an Envelope wraps it: header and body, no size prefix.
fn unprefixed(api: ApiKey, version: i16, correlation_id: i32, body: &RequestKind) -> Vec<u8> {
    frame(api, version, correlation_id, body).split_off(4)
}

/// The `which`th filled-in request of `api` at `version`, as an Envelope wraps it.
fn wrapped(api: ApiKey, version: i16, correlation_id: i32, which: usize) -> Vec<u8> {
    let body = filled_requests(api, version).swap_remove(which);
    unprefixed(api, version, correlation_id, &body)
}

/// A forwarded principal as a broker serializes it: an int16 version (0), then Kafka's
/// DefaultPrincipalData at that version.
fn principal(principal_type: &str, name: &str) -> Vec<u8> {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    DefaultPrincipalData::default()
        .with_type(text(principal_type))
        .with_name(text(name))
        .encode(&mut buf, 0)
        .expect("a principal encodes");
    buf.to_vec()
}

/// The harness's cluster id as Kafka prints it.
fn own_cluster() -> String {
    corum_types::Uuid([7; 16]).to_string()
}

/// The metadata log's topic id (Kafka's `Uuid.METADATA_TOPIC_ID`).
const METADATA_TOPIC_ID: uuid::Uuid = uuid::Uuid::from_u64_pair(0, 1);

/// A seed's bytes and how the listener must treat it: the requests it answers and whether it
/// closes the connection.
struct Seed {
    bytes: Vec<u8>,
    answered: usize,
    closes: bool,
}

/// The fault byte of a correlation id (see the harness's module doc).
fn with_faults(n: i32, fault: u8) -> i32 {
    (i32::from(fault) << 24) | (n & 0x00ff_ffff)
}

/// Every seed, by file name.
fn seeds() -> BTreeMap<String, Seed> {
    let mut out = BTreeMap::new();
    let mut add = |file: String, bytes: Vec<u8>, answered: usize, closes: bool| {
        let seed = Seed {
            bytes,
            answered,
            closes,
        };
        assert!(out.insert(file, seed).is_none(), "two seeds share a name");
    };
    let served = corum_kafka::ServedApis::controller();
    for &api in SERVED {
        let (min, max) = served.range(api).expect("SERVED is served");
        for version in min..=max {
            let label = format!("{api:?}-v{version}");
            add(
                format!("seed-{label}-default"),
                frame(api, version, 1, &default_request(api)),
                1,
                false,
            );
            for (i, body) in filled_requests(api, version).into_iter().enumerate() {
                add(
                    format!("seed-{label}-filled{i}"),
                    frame(api, version, 2 + i as i32, &body),
                    1,
                    false,
                );
                // Three fault draws in one connection.
                let faults: Vec<u8> = (1u8..=3)
                    .flat_map(|k| {
                        let fault = k.wrapping_mul(0x55).wrapping_add(version as u8 + i as u8);
                        frame(api, version, with_faults(k.into(), fault.max(1)), &body)
                    })
                    .collect();
                add(format!("seed-{label}-filled{i}-faults"), faults, 3, false);
            }
        }
    }
    // A client session: ApiVersions, then what an admin client sends, pipelined.
    let session: Vec<(ApiKey, i16, usize)> = vec![
        (ApiKey::ApiVersions, 3, 0),
        (ApiKey::Metadata, 12, 0),
        (ApiKey::CreateTopics, 7, 0),
        (ApiKey::DescribeConfigs, 4, 0),
        (ApiKey::IncrementalAlterConfigs, 1, 0),
        (ApiKey::DeleteTopics, 6, 0),
        (ApiKey::DescribeCluster, 2, 1),
    ];
    let bytes: Vec<u8> = session
        .iter()
        .enumerate()
        .flat_map(|(i, &(api, version, which))| {
            let body = filled_requests(api, version).swap_remove(which);
            frame(api, version, i as i32, &body)
        })
        .collect();
    add("seed-session-admin".into(), bytes, session.len(), false);
    // SASL sessions: PLAIN, then SCRAM's two messages, each after its handshake and followed
    // by Metadata (the harness also runs them through a SASL listener's connection state).
    for (name, session) in [
        (
            "seed-session-sasl-plain",
            vec![
                (ApiKey::SaslHandshake, 1, 0),
                (ApiKey::SaslAuthenticate, 2, 0),
            ],
        ),
        (
            "seed-session-sasl-scram",
            vec![
                (ApiKey::ApiVersions, 3, 0),
                (ApiKey::SaslHandshake, 1, 1),
                (ApiKey::SaslAuthenticate, 2, 2),
                (ApiKey::SaslAuthenticate, 2, 3),
            ],
        ),
    ] {
        let mut session: Vec<(ApiKey, i16, usize)> = session;
        session.push((ApiKey::Metadata, 12, 0));
        let bytes: Vec<u8> = session
            .iter()
            .enumerate()
            .flat_map(|(i, &(api, version, which))| {
                let body = filled_requests(api, version).swap_remove(which);
                frame(api, version, i as i32, &body)
            })
            .collect();
        add(name.into(), bytes, session.len(), false);
    }
    // A broker's session: it registers, is sent to the snapshot, fetches it, follows the
    // log from the snapshot's end (the listener remembers the high watermark it sent, and
    // the rendered snapshot), heartbeats, places its replicas and takes producer ids.
    let session: Vec<(ApiKey, i16, usize)> = vec![
        (ApiKey::ApiVersions, 4, 0),
        (ApiKey::BrokerRegistration, 4, 0),
        (ApiKey::Fetch, 17, 0),
        (ApiKey::FetchSnapshot, 1, 0),
        (ApiKey::FetchSnapshot, 1, 1),
        (ApiKey::Fetch, 17, 1),
        (ApiKey::BrokerHeartbeat, 1, 0),
        (ApiKey::Fetch, 17, 3),
        (ApiKey::AssignReplicasToDirs, 0, 0),
        (ApiKey::AllocateProducerIds, 0, 0),
    ];
    let bytes: Vec<u8> = session
        .iter()
        .enumerate()
        .flat_map(|(i, &(api, version, which))| {
            let body = filled_requests(api, version).swap_remove(which);
            frame(api, version, i as i32, &body)
        })
        .collect();
    add("seed-session-broker".into(), bytes, session.len(), false);
    // A snapshot download the faults leave unrenderable (a chunk of other bytes, or one
    // byte too many): several calls must all go that way, so the correlation id is searched
    // for rather than drawn like the other faults seeds'.
    let download = filled_requests(ApiKey::FetchSnapshot, 1).swap_remove(0);
    let unrenderable = (1..100_000)
        .map(|n| frame(ApiKey::FetchSnapshot, 1, with_faults(n, 0x11), &download))
        .find(|bytes| outcome(&answers(bytes).1[0]) == "partition error 56")
        .expect("some correlation id makes the snapshot unrenderable");
    add(
        "seed-FetchSnapshot-v1-faults-unrenderable".into(),
        unrenderable,
        1,
        false,
    );
    // KIP-511: an ApiVersions above the served versions (its header is v2, like v3's).
    let mut too_new = frame(
        ApiKey::ApiVersions,
        3,
        9,
        &default_request(ApiKey::ApiVersions),
    );
    too_new[6..8].copy_from_slice(&99i16.to_be_bytes());
    add("seed-ApiVersions-too-new".into(), too_new, 1, false);
    // librdkafka 2.16's all-topics Metadata v13 carries three bytes after its body.
    let mut all = MetadataRequest::default();
    all.topics = None;
    let mut trailing = frame(ApiKey::Metadata, 13, 5, &RequestKind::Metadata(all));
    trailing.extend_from_slice(&[0, 0, 0]);
    let size = (trailing.len() - 4) as i32;
    trailing[..4].copy_from_slice(&size.to_be_bytes());
    add(
        "seed-Metadata-v13-trailing-bytes".into(),
        trailing,
        1,
        false,
    );
    // Error messages quote what the client sent: a topic named twice with a name of 8,000
    // control characters makes a message longer than a non-flexible version's string holds.
    let long: String = "\u{1}".repeat(8_000);
    let mut twice = CreateTopicsRequest::default();
    twice.topics = (0..2)
        .map(|_| {
            let mut t = create_topics_request::CreatableTopic::default();
            t.name = name(&long);
            t
        })
        .collect();
    add(
        "seed-CreateTopics-v4-long-message".into(),
        frame(
            ApiKey::CreateTopics,
            4,
            6,
            &RequestKind::CreateTopics(twice),
        ),
        1,
        false,
    );
    // What the listener refuses, each after one good request.
    let good = frame(
        ApiKey::ApiVersions,
        0,
        1,
        &default_request(ApiKey::ApiVersions),
    );
    let refused: Vec<(&str, Vec<u8>)> = vec![
        ("negative-size", (-1i32).to_be_bytes().to_vec()),
        ("too-short", [0, 0, 0, 7, 0, 18, 0, 0, 0, 0, 0].to_vec()),
        ("too-large", i32::MAX.to_be_bytes().to_vec()),
        ("unknown-api-key", {
            let mut b = good.clone();
            b[4..6].copy_from_slice(&999i16.to_be_bytes());
            b
        }),
        ("not-served", {
            let mut b = good.clone();
            b[4..6].copy_from_slice(&(ApiKey::Produce as i16).to_be_bytes());
            b
        }),
        ("truncated-body", {
            let mut b = frame(
                ApiKey::Metadata,
                12,
                3,
                &filled_requests(ApiKey::Metadata, 12)[0],
            );
            let cut = (b.len() - 4 - 6) as i32;
            b.truncate(b.len() - 6);
            b[..4].copy_from_slice(&cut.to_be_bytes());
            b
        }),
    ];
    for (what, tail) in refused {
        let mut bytes = good.clone();
        bytes.extend_from_slice(&tail);
        // A too-large size is refused from its prefix alone, before any body arrives.
        add(format!("seed-refused-{what}"), bytes, 1, true);
    }
    out
}

/// Each seed reaches the listener's translations: it is answered (as many requests as it
/// holds), or refused where the listener must refuse it.
#[test]
fn every_seed_is_served_as_a_listener_must() {
    let mut failed = Vec::new();
    for (file, seed) in seeds() {
        let replay = std::panic::catch_unwind(|| connection(&seed.bytes));
        match replay {
            Err(_) => failed.push(format!("{file}: a finding (its panic is printed above)")),
            Ok(session)
                if session.answered.len() != seed.answered
                    || session.closed.is_some() != seed.closes =>
            {
                failed.push(format!(
                    "{file}: answered {:?}, closed {:?}; expected {} answers, closed: {}",
                    session.answered, session.closed, seed.answered, seed.closes
                ))
            }
            Ok(_) => {}
        }
    }
    assert!(
        failed.is_empty(),
        "{} seeds fail:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The checked-in seeds are the generated ones (see the module doc for the rewrite switch).
#[test]
fn seeds_are_current() {
    let dir = corpus_dir();
    let seeds = seeds();
    if std::env::var_os("CORUM_REWRITE").is_some() {
        std::fs::create_dir_all(&dir).expect("the corpus directory can be created");
        for stale in files(&dir).keys().filter(|f| f.starts_with("seed-")) {
            if !seeds.contains_key(stale) {
                std::fs::remove_file(dir.join(stale)).expect("a stale seed can be removed");
            }
        }
        for (file, seed) in &seeds {
            std::fs::write(dir.join(file), &seed.bytes).expect("a seed can be written");
        }
        return;
    }
    let present: BTreeMap<String, Vec<u8>> = files(&dir)
        .into_iter()
        .filter(|(f, _)| f.starts_with("seed-"))
        .collect();
    for (file, seed) in &seeds {
        assert_eq!(
            present.get(file),
            Some(&seed.bytes),
            "seed {file} is missing or differs: rerun with CORUM_REWRITE=1"
        );
    }
    for file in present.keys() {
        assert!(
            seeds.contains_key(file),
            "seed {file} is no longer generated: rerun with CORUM_REWRITE=1"
        );
    }
}

/// Every corpus file and every kept finding replays through the fuzz target's harness
/// without a finding.
#[test]
fn corpus_and_findings_replay_cleanly() {
    let corpus = files(&corpus_dir());
    assert!(
        corpus.len() >= seeds().len(),
        "the corpus at {} holds {} files, fewer than the seeds",
        corpus_dir().display(),
        corpus.len()
    );
    let findings = files(&artifacts_dir());
    let failed: Vec<&String> = corpus
        .iter()
        .chain(&findings)
        .filter(|(_, bytes)| std::panic::catch_unwind(|| connection(bytes)).is_err())
        .map(|(file, _)| file)
        .collect();
    assert!(
        failed.is_empty(),
        "findings (their panics are printed above): {failed:?}"
    );
}

/// What an answer says, in short: the broker-facing seeds' outcomes below.
fn outcome(body: &ResponseKind) -> String {
    match body {
        ResponseKind::Fetch(r) if r.error_code != 0 => format!("error {}", r.error_code),
        ResponseKind::Fetch(r) => {
            let p = &r.responses[0].partitions[0];
            if p.error_code != 0 {
                format!("partition error {}", p.error_code)
            } else if p.snapshot_id.end_offset >= 0 {
                format!(
                    "snapshot {}-{}",
                    p.snapshot_id.end_offset, p.snapshot_id.epoch
                )
            } else if p.diverging_epoch.epoch >= 0 {
                let d = &p.diverging_epoch;
                format!("diverging at epoch {} end {}", d.epoch, d.end_offset)
            } else {
                let mut records = p.records.clone().unwrap_or_default();
                let offsets: Vec<i64> = RecordBatchDecoder::decode_all(&mut records)
                    .expect("the records are Kafka batches")
                    .iter()
                    .flat_map(|set| set.records.iter().map(|r| r.offset))
                    .collect();
                match (offsets.first(), offsets.last()) {
                    (Some(first), Some(last)) => {
                        format!("records {first}..{} hwm {}", last + 1, p.high_watermark)
                    }
                    _ => format!("no records hwm {}", p.high_watermark),
                }
            }
        }
        ResponseKind::FetchSnapshot(r) if r.error_code != 0 => format!("error {}", r.error_code),
        ResponseKind::FetchSnapshot(r) => {
            let p = &r.topics[0].partitions[0];
            if p.error_code != 0 {
                format!("partition error {}", p.error_code)
            } else {
                let end = p.position + p.unaligned_records.len() as i64;
                format!("bytes {}..{end} of {}", p.position, p.size)
            }
        }
        ResponseKind::BrokerRegistration(r) if r.error_code != 0 => {
            format!("error {}", r.error_code)
        }
        ResponseKind::BrokerRegistration(r) => format!("epoch {}", r.broker_epoch),
        ResponseKind::BrokerHeartbeat(r) if r.error_code != 0 => format!("error {}", r.error_code),
        ResponseKind::BrokerHeartbeat(r) => format!(
            "fenced {} shut down {} caught up {}",
            r.is_fenced, r.should_shut_down, r.is_caught_up
        ),
        ResponseKind::UnregisterBroker(r) => format!("error {}", r.error_code),
        ResponseKind::AllocateProducerIds(r) if r.error_code != 0 => {
            format!("error {}", r.error_code)
        }
        ResponseKind::AllocateProducerIds(r) => {
            format!("ids {}+{}", r.producer_id_start.0, r.producer_id_len)
        }
        ResponseKind::AlterPartition(r) if r.error_code != 0 => format!("error {}", r.error_code),
        ResponseKind::AlterPartition(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| {
                if p.error_code != 0 {
                    format!("{}: {}", p.partition_index, p.error_code)
                } else {
                    let isr: Vec<i32> = p.isr.iter().map(|b| b.0).collect();
                    format!(
                        "{}: leader {} epoch {} isr {isr:?} recovery {} partition epoch {}",
                        p.partition_index,
                        p.leader_id.0,
                        p.leader_epoch,
                        p.leader_recovery_state,
                        p.partition_epoch
                    )
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        ResponseKind::AssignReplicasToDirs(r) if r.error_code != 0 => {
            format!("error {}", r.error_code)
        }
        ResponseKind::AssignReplicasToDirs(r) => r
            .directories
            .iter()
            .flat_map(|d| &d.topics)
            .flat_map(|t| &t.partitions)
            .map(|p| format!("{}: {}", p.partition_index, p.error_code))
            .collect::<Vec<_>>()
            .join(", "),
        ResponseKind::ListPartitionReassignments(r) => {
            format!("error {}, {} topics", r.error_code, r.topics.len())
        }
        ResponseKind::Envelope(r) if r.error_code != 0 => format!("error {}", r.error_code),
        ResponseKind::Envelope(r) => {
            let data = r
                .response_data
                .as_ref()
                .expect("a served envelope's response");
            let correlation_id = i32::from_be_bytes(data[..4].try_into().expect("a header"));
            format!("response to {correlation_id}")
        }
        other => panic!("not a broker-facing answer: {other:?}"),
    }
}

/// The broker-facing seeds reach the paths they are for against the healthy scripted
/// controller (the faults seeds then turn them into errors): a broker following the log
/// from the start is sent to the snapshot, fetches it whole or by position, then the log's
/// batches; a diverging log, a newer epoch and what a leader refuses get their answers; a
/// registration, heartbeats and unregistrations get the controller's verdicts.
#[test]
fn broker_seeds_reach_their_paths() {
    let seeds = seeds();
    let outcomes = |api: &str, version: i16, count: usize| -> Vec<String> {
        (0..count)
            .map(|i| {
                let file = format!("seed-{api}-v{version}-filled{i}");
                let seed = seeds
                    .get(&file)
                    .unwrap_or_else(|| panic!("{file} is generated"));
                let (_, bodies) = answers(&seed.bytes);
                format!("{i}: {}", outcome(&bodies[0]))
            })
            .collect()
    };
    let expect = |lines: &[&str]| -> Vec<String> {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| format!("{i}: {l}"))
            .collect()
    };
    for version in [13, 18] {
        assert_eq!(
            outcomes("Fetch", version, 10),
            expect(&[
                "snapshot 90-2",
                "records 90..100 hwm 100",
                "records 93..100 hwm 100",
                "no records hwm 100",
                "diverging at epoch 3 end 100",
                "partition error 75",
                "error 42",
                "error 42",
                "partition error 42",
                "error 104",
            ]),
            "Fetch v{version}"
        );
    }
    // Below v12 an answer cannot carry the snapshot id (a tagged field from v12): the broker
    // sent to the snapshot is told UNSUPPORTED_VERSION.
    assert_eq!(
        outcomes("Fetch", 9, 5),
        expect(&[
            "partition error 35",
            "partition error 75",
            "error 42",
            "error 42",
            "partition error 42",
        ])
    );
    let whole = {
        let (_, bodies) = answers(&seeds["seed-FetchSnapshot-v1-filled0"].bytes);
        let ResponseKind::FetchSnapshot(r) = &bodies[0] else {
            panic!("a FetchSnapshot answer: {:?}", bodies[0]);
        };
        r.topics[0].partitions[0].size
    };
    for version in [0, 1] {
        assert_eq!(
            outcomes("FetchSnapshot", version, 6),
            expect(&[
                &format!("bytes 0..{whole} of {whole}"),
                &format!("bytes 300..1300 of {whole}"),
                "partition error 99",
                "partition error 98",
                "partition error 75",
                "error 104",
            ]),
            "FetchSnapshot v{version}"
        );
    }
    for version in 0..=4 {
        assert_eq!(
            outcomes("BrokerRegistration", version, 5),
            expect(&[
                "epoch 40",
                "epoch 100",
                "error 101",
                "error 104",
                "error 42"
            ]),
            "BrokerRegistration v{version}"
        );
    }
    for version in 0..=1 {
        assert_eq!(
            outcomes("BrokerHeartbeat", version, 8),
            expect(&[
                "fenced false shut down false caught up true",
                "fenced true shut down false caught up false",
                "fenced true shut down false caught up true",
                "fenced false shut down false caught up true",
                "fenced true shut down true caught up true",
                "error 77",
                "error 102",
                "fenced false shut down false caught up true",
            ]),
            "BrokerHeartbeat v{version}"
        );
    }
    assert_eq!(
        outcomes("UnregisterBroker", 0, 4),
        expect(&["error 0", "error 42", "error 102", "error 42"])
    );
    assert_eq!(
        outcomes("AllocateProducerIds", 0, 5),
        expect(&[
            "ids 5000+1000",
            "error 77",
            "error 102",
            "error 42",
            "error 42"
        ])
    );
    for version in [2, 3] {
        // v2 names no member epochs: the member at another epoch is in.
        let member_at_another_epoch = if version >= 3 {
            "0: 107"
        } else {
            "0: leader 4 epoch 2 isr [4] recovery 0 partition epoch 6"
        };
        assert_eq!(
            outcomes("AlterPartition", version, 6),
            expect(&[
                &[
                    "0: leader 4 epoch 2 isr [4] recovery 0 partition epoch 6",
                    "2: leader 4 epoch 4 isr [4] recovery 1 partition epoch 8",
                    "1: 6",
                    "0: 107",
                    "0: 74",
                    "0: 95",
                    "7: 3",
                    member_at_another_epoch,
                    "0: 100",
                ]
                .join(", "),
                "error 77",
                "error 42",
                "error 42",
                "error 42",
                "error 42",
            ]),
            "AlterPartition v{version}"
        );
    }
    assert_eq!(
        outcomes("AssignReplicasToDirs", 0, 5),
        expect(&[
            "0: 0, 1: 0, 2: 0, 7: 3, 0: 0, 0: 100",
            "0: 6",
            "error 77",
            "error 42",
            "error 42",
        ])
    );
    assert_eq!(
        outcomes("ListPartitionReassignments", 0, 2),
        expect(&["error 0, 0 topics", "error 0, 0 topics"])
    );
    assert_eq!(
        outcomes("Envelope", 0, 10),
        expect(&[
            "response to 21",
            "response to 22",
            "response to 23",
            "error 42",
            "error 42",
            "error 42",
            "error 42",
            "error 42",
            "error 35",
            "response to 25",
        ])
    );
    // The wrapped answers are the wrapped requests' (the harness checked they decode).
    let inner = |i: usize, api: ApiKey, version: i16| -> ResponseKind {
        let (_, bodies) = answers(&seeds[&format!("seed-Envelope-v0-filled{i}")].bytes);
        let ResponseKind::Envelope(r) = &bodies[0] else {
            panic!("an Envelope answer: {:?}", bodies[0]);
        };
        let mut data = r.response_data.clone().expect("a response");
        ResponseHeader::decode(&mut data, api.response_header_version(version)).expect("a header");
        ResponseKind::decode(api, &mut data, version).expect("a body")
    };
    let ResponseKind::CreateTopics(created) = inner(0, ApiKey::CreateTopics, 7) else {
        panic!("CreateTopics");
    };
    let codes: Vec<(String, i16)> = created
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            ("new-topic".to_owned(), 0),
            ("assigned".to_owned(), 0),
            ("three".to_owned(), 0)
        ]
    );
    let ResponseKind::DescribeQuorum(quorum) = inner(1, ApiKey::DescribeQuorum, 2) else {
        panic!("DescribeQuorum");
    };
    assert_eq!(quorum.topics[0].partitions[0].leader_id.0, 1);
    let ResponseKind::Metadata(metadata) = inner(2, ApiKey::Metadata, 12) else {
        panic!("Metadata");
    };
    let topics: Vec<(Option<String>, i16)> = metadata
        .topics
        .iter()
        .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.error_code))
        .collect();
    assert_eq!(
        topics,
        [
            (Some("orders".to_owned()), 0),
            (Some("missing".to_owned()), 3),
            (Some("logs".to_owned()), 0),
            (None, 100)
        ]
    );
    let ResponseKind::ApiVersions(versions) = inner(9, ApiKey::ApiVersions, 0) else {
        panic!("ApiVersions");
    };
    assert_eq!(versions.error_code, 35, "KIP-511 inside an envelope");
    let (_, bodies) = answers(&seeds["seed-session-broker"].bytes);
    let session: Vec<String> = bodies[1..].iter().map(outcome).collect();
    assert_eq!(
        session,
        [
            "epoch 40",
            "snapshot 90-2",
            &format!("bytes 0..{whole} of {whole}"),
            &format!("bytes 300..1300 of {whole}"),
            "records 90..100 hwm 100",
            "fenced false shut down false caught up true",
            "no records hwm 100",
            "0: 0, 1: 0, 2: 0, 7: 3, 0: 0, 0: 100",
            "ids 5000+1000",
        ]
    );
}
