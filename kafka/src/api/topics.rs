//! CreateTopics, DeleteTopics, CreatePartitions and ElectLeaders.
//!
//! What a Kafka request can say that corum's request cannot is checked here, per item, with
//! Kafka's errors: a topic named twice in one request (INVALID_REQUEST for each), explicit
//! assignments that do not number partitions `0..n` (INVALID_REPLICA_ASSIGNMENT), negative
//! broker ids, null config values (INVALID_REQUEST). The rest goes to the controller as one
//! request, so a batch of topics is one proposal.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use corum_controller::control::config_control::DescribedConfig;
use corum_controller::control::replication_control::{
    CreatableTopic, CreatePartitionsRequest as CorumCreatePartitions,
    CreateTopicsRequest as CorumCreateTopics, CreatedTopic, DeleteTopicsV2Request,
    ElectLeadersRequest as CorumElectLeaders, ElectionType, PartitionsIncrease, TopicRef,
};
use corum_controller::ApiError;
use corum_controller::{PartitionId, TopicId};
use corum_protocol::{RequestBody, ResponseBody, RpcError};
use corum_types::NodeId;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, ElectLeadersRequest,
    ElectLeadersResponse, ListPartitionReassignmentsResponse, TopicName,
};

use super::{corum_uuid, cow_text, kafka_uuid, text};
use crate::backend::{Backend, ListenerContext};
use crate::errors::KafkaError;
use crate::service::call;

fn topic_name(name: &str) -> TopicName {
    TopicName(text(name))
}

/// Broker ids as corum's node ids; `None` when one is negative.
fn node_ids(ids: &[BrokerId]) -> Option<Vec<NodeId>> {
    ids.iter()
        .map(|b| u32::try_from(b.0).ok().map(NodeId))
        .collect()
}

/// Names that occur more than once in `names`.
fn duplicates<'a>(names: impl Iterator<Item = &'a str>) -> HashMap<&'a str, usize> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for n in names {
        *counts.entry(n).or_default() += 1;
    }
    counts.retain(|_, c| *c > 1);
    counts
}

/// A topic's explicit assignments in partition order, or why they are not `0..n`.
fn ordered_assignments(
    assignments: &[kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment],
) -> Result<Vec<Vec<NodeId>>, KafkaError> {
    let mut by_index: Vec<Option<Vec<NodeId>>> = vec![None; assignments.len()];
    for a in assignments {
        let index = usize::try_from(a.partition_index)
            .ok()
            .filter(|&i| i < assignments.len())
            .ok_or_else(|| {
                KafkaError::new(
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "partitions must be numbered 0..{}; got {}",
                        assignments.len(),
                        a.partition_index
                    ),
                )
            })?;
        if by_index[index].is_some() {
            return Err(KafkaError::new(
                ResponseError::InvalidReplicaAssignment,
                format!("partition {index} is assigned twice"),
            ));
        }
        let replicas = node_ids(&a.broker_ids).ok_or_else(|| {
            KafkaError::new(
                ResponseError::InvalidReplicaAssignment,
                format!("partition {index} names a negative broker id"),
            )
        })?;
        by_index[index] = Some(replicas);
    }
    Ok(by_index.into_iter().flatten().collect())
}

/// The controller's per-topic answers, in request order.
type Answers<T> = Vec<(String, Result<T, ApiError>)>;

/// The outcome of each of the `count` items sent to the controller in one request: its
/// per-item answers in order (an item it left out is an internal error), or the whole
/// request's error on every item.
fn per_item<T>(count: usize, result: Result<Answers<T>, RpcError>) -> Vec<Result<T, KafkaError>> {
    match result {
        Ok(answers) => {
            let mut out: Vec<Result<T, KafkaError>> = answers
                .into_iter()
                .take(count)
                .map(|(_, r)| r.map_err(|e| KafkaError::api(&e)))
                .collect();
            out.resize_with(count, || Err(missing()));
            out
        }
        Err(e) => {
            let e = KafkaError::rpc(&e);
            (0..count).map(|_| Err(e.clone())).collect()
        }
    }
}

pub(crate) fn create_error(name: &str, e: KafkaError) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(topic_name(name))
        .with_error_code(e.code)
        .with_error_message(e.message.map(|m| text(&m)))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_configs(None)
}

/// A new topic's described configs, as the controller shares them.
type Described = Arc<Vec<DescribedConfig>>;

/// A topic the controller created, with its configs when the answer carries them.
type Created = (CreatedTopic, Option<Described>);

thread_local! {
    /// The described list last turned into Kafka's types, and what it became. The topics a
    /// burst creates on the same cluster defaults share the controller's one list, so it is
    /// converted once and copied per topic (a copy reads one warm list; converting read each
    /// topic's 33 entries afresh).
    static CONVERTED: RefCell<Option<(Described, Vec<CreatableTopicConfigs>)>> =
        const { RefCell::new(None) };
}

/// `described` as CreateTopics v5+ answers carry it. A list that only this answer holds (a
/// topic with settings of its own, or an answer forwarded from the active controller, whose
/// lists arrive one per topic) is converted without being kept: no other topic can share it,
/// and keeping it would cost a copy and push out a list that is shared.
fn kafka_configs(described: &Described) -> Vec<CreatableTopicConfigs> {
    let convert = || -> Vec<CreatableTopicConfigs> {
        described
            .iter()
            .map(|c| {
                CreatableTopicConfigs::default()
                    .with_name(cow_text(c.name.clone()))
                    .with_value(c.value.clone().map(cow_text))
                    .with_read_only(c.read_only)
                    .with_config_source(c.source.kafka_id())
                    .with_is_sensitive(c.sensitive)
            })
            .collect()
    };
    CONVERTED.with_borrow_mut(|last| {
        // The cache holds its list, so an equal pointer is the same list, not a reused address.
        if let Some((list, converted)) = last.as_ref() {
            if Arc::ptr_eq(list, described) {
                return converted.clone();
            }
        }
        if Arc::strong_count(described) == 1 {
            return convert();
        }
        let converted = convert();
        *last = Some((described.clone(), converted.clone()));
        converted
    })
}

/// Whether `described` is the list converted last (tests).
#[cfg(test)]
fn converted_last(described: &Described) -> bool {
    CONVERTED.with_borrow(|last| {
        last.as_ref()
            .is_some_and(|(l, _)| Arc::ptr_eq(l, described))
    })
}

/// CreateTopics at any served version.
pub async fn create_topics<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let repeated = duplicates(request.topics.iter().map(|t| t.name.0.as_str()));
    // Per topic: an early verdict, or its index in the request to the controller.
    let mut slots: Vec<Result<usize, KafkaError>> = Vec::with_capacity(request.topics.len());
    let mut topics = Vec::new();
    for t in &request.topics {
        let name = t.name.0.as_str();
        let checked = if repeated.contains_key(name) {
            Err(KafkaError::new(
                ResponseError::InvalidRequest,
                format!("topic {name:?} is named more than once in the request"),
            ))
        } else {
            ordered_assignments(&t.assignments).and_then(|assignments| {
                let configs = t
                    .configs
                    .iter()
                    .map(|c| match &c.value {
                        Some(v) => Ok((c.name.as_str().to_owned(), v.as_str().to_owned())),
                        None => Err(KafkaError::new(
                            ResponseError::InvalidRequest,
                            format!("config {:?} has a null value", c.name.as_str()),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(CreatableTopic {
                    name: name.to_owned(),
                    num_partitions: t.num_partitions,
                    replication_factor: t.replication_factor,
                    assignments,
                    configs,
                })
            })
        };
        slots.push(checked.map(|topic| {
            topics.push(topic);
            topics.len() - 1
        }));
    }
    // v5+ answers carry each new topic's configs: the controller describes them with the
    // creation, so the client's answer needs no second round trip.
    let with_configs = version >= 5;
    let mut answers: Vec<Option<Result<Created, KafkaError>>> = if topics.is_empty() {
        Vec::new()
    } else {
        let count = topics.len();
        let timeout = ctx.timeout_ms(request.timeout_ms);
        let corum = CorumCreateTopics {
            topics,
            validate_only: request.validate_only,
        };
        if with_configs {
            let result = call(
                backend,
                RequestBody::CreateTopicsWithConfigs(corum),
                timeout,
                |r| match r {
                    ResponseBody::CreateTopicsWithConfigs(r) => Some(r.topics),
                    _ => None,
                },
            )
            .await;
            per_item(count, result)
                .into_iter()
                .map(|r| Some(r.map(|c| (c.topic, Some(c.configs)))))
                .collect()
        } else {
            let result = call(
                backend,
                RequestBody::CreateTopics(corum),
                timeout,
                |r| match r {
                    ResponseBody::CreateTopics(r) => Some(r.topics),
                    _ => None,
                },
            )
            .await;
            per_item(count, result)
                .into_iter()
                .map(|r| Some(r.map(|c| (c, None))))
                .collect()
        }
    };
    let results = request
        .topics
        .iter()
        .zip(slots)
        .map(|(t, slot)| {
            let name = t.name.0.as_str();
            let answer = slot.and_then(|i| answers[i].take().unwrap_or_else(|| Err(missing())));
            match answer {
                Ok((created, configs)) => {
                    let mut r = CreatableTopicResult::default()
                        .with_name(topic_name(name))
                        .with_num_partitions(created.num_partitions as i32)
                        .with_replication_factor(created.replication_factor as i16)
                        .with_configs(configs.as_ref().map(kafka_configs));
                    if !request.validate_only {
                        r.topic_id = kafka_uuid(created.topic_id.0);
                    }
                    r
                }
                Err(e) => create_error(name, e),
            }
        })
        .collect();
    CreateTopicsResponse::default().with_topics(results)
}

/// DeleteTopics at any served version: by name (v0-5) or by name or id (v6), as one corum
/// request whose answers come back in the request's order.
pub async fn delete_topics<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let refs: Vec<TopicRef> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|t| match &t.name {
                Some(n) if t.topic_id.is_nil() => TopicRef::Name(n.0.as_str().to_owned()),
                _ => TopicRef::Id(TopicId(corum_uuid(t.topic_id))),
            })
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| TopicRef::Name(n.0.as_str().to_owned()))
            .collect()
    };
    let answers = if refs.is_empty() {
        Ok(Vec::new())
    } else {
        call(
            backend,
            RequestBody::DeleteTopicsV2(DeleteTopicsV2Request {
                topics: refs.clone(),
            }),
            ctx.timeout_ms(request.timeout_ms),
            |r| match r {
                ResponseBody::DeleteTopicsV2(r) => Some(r.topics),
                _ => None,
            },
        )
        .await
    };
    let mut answers = answers.map(Vec::into_iter);
    let responses = refs
        .iter()
        .map(|named| {
            let mut r = DeletableTopicResult::default();
            match named {
                TopicRef::Name(n) => r.name = Some(topic_name(n)),
                TopicRef::Id(id) => {
                    r.name = None;
                    r.topic_id = kafka_uuid(id.0);
                }
            }
            match &mut answers {
                Ok(it) => match it.next() {
                    Some((_, Ok(deleted))) => {
                        r.name = Some(topic_name(&deleted.name));
                        r.topic_id = kafka_uuid(deleted.topic_id.0);
                    }
                    Some((_, Err(e))) => set_delete_error(&mut r, &KafkaError::api(&e)),
                    None => set_delete_error(&mut r, &missing()),
                },
                Err(e) => set_delete_error(&mut r, &KafkaError::rpc(e)),
            }
            r
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}

fn missing() -> KafkaError {
    KafkaError::new(
        ResponseError::UnknownServerError,
        "the controller did not answer for this topic",
    )
}

fn set_delete_error(r: &mut DeletableTopicResult, e: &KafkaError) {
    // A topic being deleted is, to DeleteTopics, already gone.
    r.error_code = if e.code == ResponseError::TopicAlreadyExists.code() {
        ResponseError::UnknownTopicOrPartition.code()
    } else {
        e.code
    };
    r.error_message = e.message.as_deref().map(text);
}

/// CreatePartitions at any served version.
pub async fn create_partitions<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let repeated = duplicates(request.topics.iter().map(|t| t.name.0.as_str()));
    let mut slots: Vec<Result<usize, KafkaError>> = Vec::new();
    let mut increases = Vec::new();
    for t in &request.topics {
        let name = t.name.0.as_str();
        let checked = if repeated.contains_key(name) {
            Err(KafkaError::new(
                ResponseError::InvalidRequest,
                format!("topic {name:?} is named more than once in the request"),
            ))
        } else if t.count < 0 {
            Err(KafkaError::new(
                ResponseError::InvalidPartitions,
                format!("partition count {} is negative", t.count),
            ))
        } else {
            let assignments = match &t.assignments {
                None => Ok(Vec::new()),
                Some(list) => list
                    .iter()
                    .map(|a| {
                        node_ids(&a.broker_ids).ok_or_else(|| {
                            KafkaError::new(
                                ResponseError::InvalidReplicaAssignment,
                                "an assignment names a negative broker id",
                            )
                        })
                    })
                    .collect(),
            };
            assignments.map(|assignments| PartitionsIncrease {
                name: name.to_owned(),
                count: t.count as u32,
                assignments,
            })
        };
        slots.push(checked.map(|inc| {
            increases.push(inc);
            increases.len() - 1
        }));
    }
    let answers = if increases.is_empty() {
        Vec::new()
    } else {
        let count = increases.len();
        let body = RequestBody::CreatePartitions(CorumCreatePartitions {
            topics: increases,
            validate_only: request.validate_only,
        });
        let result = call(
            backend,
            body,
            ctx.timeout_ms(request.timeout_ms),
            |r| match r {
                ResponseBody::CreatePartitions(r) => Some(r.topics),
                _ => None,
            },
        )
        .await;
        per_item(count, result)
    };
    let results = request
        .topics
        .iter()
        .zip(slots)
        .map(|(t, slot)| {
            let outcome = slot.and_then(|i| answers[i].clone());
            let mut r = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            if let Err(e) = outcome {
                r.error_code = e.code;
                r.error_message = e.message.as_deref().map(text);
            }
            r
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

/// ElectLeaders at any served version (v0 is always a preferred election).
pub async fn elect_leaders<B: Backend>(
    ctx: &ListenerContext,
    backend: &B,
    request: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    let election_type = match (version, request.election_type) {
        (0, _) | (_, 0) => Ok(ElectionType::Preferred),
        (_, 1) => Ok(ElectionType::Unclean),
        (_, other) => Err(KafkaError::new(
            ResponseError::InvalidRequest,
            format!("unknown election type {other}"),
        )),
    };
    let partitions: Option<Vec<(String, PartitionId)>> =
        request.topic_partitions.as_ref().map(|topics| {
            topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .filter(|&&p| p >= 0)
                        .map(move |&p| (t.topic.0.as_str().to_owned(), PartitionId(p as u32)))
                })
                .collect()
        });
    let negative: Vec<(String, i32)> = request
        .topic_partitions
        .iter()
        .flatten()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|&&p| p < 0)
                .map(move |&p| (t.topic.0.as_str().to_owned(), p))
        })
        .collect();
    let outcome = match election_type {
        Err(e) => Err(e),
        Ok(election_type) => call(
            backend,
            RequestBody::ElectLeaders(CorumElectLeaders {
                election_type,
                partitions,
            }),
            ctx.timeout_ms(request.timeout_ms),
            |r| match r {
                ResponseBody::ElectLeaders(r) => Some(r),
                _ => None,
            },
        )
        .await
        .map_err(|e| KafkaError::rpc(&e)),
    };
    let mut response = ElectLeadersResponse::default();
    let mut by_topic: Vec<ReplicaElectionResult> = Vec::new();
    // Where each topic's results are in `by_topic`: a request may name millions of topics,
    // and a search of the list per partition would take the listener's shard for hours.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut push = |topic: &str, partition: i32, error: Option<KafkaError>| {
        let mut p = PartitionResult::default().with_partition_id(partition);
        if let Some(e) = error {
            p.error_code = e.code;
            p.error_message = e.message.as_deref().map(text);
        }
        match index.get(topic) {
            Some(&i) => by_topic[i].partition_result.push(p),
            None => {
                index.insert(topic.to_owned(), by_topic.len());
                by_topic.push(
                    ReplicaElectionResult::default()
                        .with_topic(topic_name(topic))
                        .with_partition_result(vec![p]),
                );
            }
        }
    };
    match outcome {
        Ok(r) => {
            for (topic, partition, result) in r.partitions {
                push(
                    &topic,
                    partition.0 as i32,
                    result.err().map(|e| KafkaError::api(&e)),
                );
            }
        }
        Err(e) => {
            if version >= 1 {
                response.error_code = e.code;
            }
            for t in request.topic_partitions.iter().flatten() {
                for &p in &t.partitions {
                    push(t.topic.0.as_str(), p, Some(e.clone()));
                }
            }
        }
    }
    for (topic, p) in negative {
        push(
            &topic,
            p,
            Some(KafkaError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("partition {p} does not exist"),
            )),
        );
    }
    response.replica_election_results = by_topic;
    response
}

/// Serves ListPartitionReassignments: corum moves no replicas between brokers, so no
/// reassignment is ever in progress (`kafka-topics --describe` asks).
pub fn list_partition_reassignments() -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{ApiKey, ResponseKind};

    use super::*;

    /// A described list converts to the same entries whether it was converted last or not,
    /// and a different list (equal or not) is converted afresh, never answered from the last.
    #[test]
    fn described_configs_convert_alike_from_the_cache_and_afresh() {
        use corum_controller::config_schema::ConfigType;
        use corum_controller::control::config_control::ConfigSource;
        let entry = |name: &'static str, value: &str, source| DescribedConfig {
            name: name.into(),
            value: Some(value.to_owned().into()),
            read_only: false,
            source,
            sensitive: false,
            synonyms: Vec::new(),
            config_type: ConfigType::Long,
            documentation: None,
        };
        let defaults: Described = Arc::new(vec![
            entry("retention.ms", "604800000", ConfigSource::Default),
            entry("segment.bytes", "1073741824", ConfigSource::Default),
        ]);
        let own: Described = Arc::new(vec![
            entry("retention.ms", "1000", ConfigSource::DynamicTopic),
            entry("segment.bytes", "1073741824", ConfigSource::Default),
        ]);
        // Both held elsewhere too, as the controller holds its defaults: kept when converted.
        let held = (defaults.clone(), own.clone());
        let first = kafka_configs(&defaults);
        assert!(converted_last(&defaults));
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].name.as_str(), "retention.ms");
        assert_eq!(first[0].value.as_deref(), Some("604800000"));
        assert_eq!(first[0].config_source, ConfigSource::Default.kafka_id());
        assert_eq!(kafka_configs(&defaults), first, "from the cache");
        let other = kafka_configs(&own);
        assert_eq!(other[0].value.as_deref(), Some("1000"));
        assert_eq!(
            other[0].config_source,
            ConfigSource::DynamicTopic.kafka_id()
        );
        // An equal list at another address: converted afresh, to the same entries.
        let copy: Described = Arc::new(defaults.as_ref().clone());
        assert_eq!(kafka_configs(&copy), first);
        assert_eq!(kafka_configs(&own), other);
        drop(held);
    }

    /// A list that only its answer holds (forwarded answers bring one per topic) is converted
    /// but not kept, so the shared list converted last stays; a list held elsewhere too (the
    /// controller's cached defaults) is kept.
    #[test]
    fn only_shared_lists_are_kept_converted() {
        use corum_controller::config_schema::ConfigType;
        use corum_controller::control::config_control::ConfigSource;
        let list = |value: &str| -> Described {
            Arc::new(vec![DescribedConfig {
                name: "retention.ms".into(),
                value: Some(value.to_owned().into()),
                read_only: false,
                source: ConfigSource::Default,
                sensitive: false,
                synonyms: Vec::new(),
                config_type: ConfigType::Long,
                documentation: None,
            }])
        };
        let shared = list("604800000");
        let held_by_the_controller = shared.clone();
        let converted = kafka_configs(&shared);
        assert!(converted_last(&shared), "a shared list is kept");
        let lonely = list("1000");
        let once = kafka_configs(&lonely);
        assert_eq!(once[0].value.as_deref(), Some("1000"));
        assert!(
            !converted_last(&lonely),
            "a list only its answer holds is not kept"
        );
        assert!(converted_last(&shared), "the shared list stays");
        assert_eq!(kafka_configs(&shared), converted);
        drop(held_by_the_controller);
    }

    /// corum moves no replicas, so no reassignment is ever in progress: the answer lists none
    /// and no error, and it encodes at every version served.
    #[test]
    fn no_partition_reassignment_is_in_progress() {
        let r = list_partition_reassignments();
        assert_eq!(r.error_code, 0);
        assert!(r.error_message.as_deref().is_none_or(str::is_empty));
        assert!(r.topics.is_empty());
        let api = ApiKey::ListPartitionReassignments;
        let versions = api.valid_versions();
        for version in versions.min..=versions.max {
            let body = ResponseKind::ListPartitionReassignments(r.clone());
            crate::response::encode(api, version, 3, &body).expect("it encodes");
        }
    }
}
