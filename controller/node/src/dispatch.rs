//! From a decoded request to the controller handler that serves it: the one place that maps
//! [`RequestBody`] variants to [`Controller`] methods and their results to [`ResponseBody`]
//! variants. Pure: the controller core's driver calls it with the request's
//! [`RequestContext`] and acts on the [`Dispatch`] it returns.
//!
//! | handler result                        | dispatch                                  | driver obligation                                                  |
//! |---------------------------------------|-------------------------------------------|--------------------------------------------------------------------|
//! | records empty                         | `Dispatch::Answer(body)`                  | answer at once                                                     |
//! | records non-empty                     | `Dispatch::Propose { records, response }` | propose one batch, `on_proposed`, answer once committed            |
//! | `ApiError::NotController`             | `Err(RpcError::NotController)`            | fill in the leader hint it knows, answer at once                   |
//! | any other whole-request `ApiError`    | `Err(RpcError::Api(e))`                   | answer at once                                                     |
//!
//! Per-item errors (one topic of a CreateTopics, ...) are inside the response body, as the
//! handlers return them.
//!
//! A [`RequestBody::LocalRead`] is dispatched here like the read it carries (the active
//! controller's answer). A node that is not the active controller answers it with
//! [`local_read`] instead: from its committed image, at once.

use corum_controller::control::cluster_control::TickResponse;
use corum_controller::records::MetadataRecord;
use corum_controller::{ApiError, Controller, ControllerResult, RequestContext};
use corum_types::NodeId;

use crate::protocol::{LocalRead, RequestBody, ResponseBody, RpcError};

/// What the driver does with a request the controller accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// Nothing to commit: send this response now.
    Answer(ResponseBody),
    /// Propose `records` as one batch; send `response` only once the batch is committed.
    Propose {
        records: Vec<MetadataRecord>,
        response: ResponseBody,
    },
}

impl Dispatch {
    fn from_result<R>(
        result: Result<ControllerResult<R>, ApiError>,
        wrap: impl FnOnce(R) -> ResponseBody,
    ) -> Result<Dispatch, RpcError> {
        let ControllerResult { records, response } = result.map_err(rpc_error)?;
        let response = wrap(response);
        Ok(if records.is_empty() {
            Dispatch::Answer(response)
        } else {
            Dispatch::Propose { records, response }
        })
    }
}

/// A whole-request rejection as the wire reports it. The leader hint of `NotController` is the
/// driver's to fill in (the controller does not know where the leader is).
pub fn rpc_error(e: ApiError) -> RpcError {
    match e {
        ApiError::NotController => RpcError::NotController { leader: None },
        other => RpcError::Api(other),
    }
}

/// Runs the handler for `body`. Handlers never mutate the image; `BrokerHeartbeat`,
/// `RegisterBroker` and `UnregisterBroker` update the soft lease state, as [`Controller`]
/// documents.
pub fn dispatch(
    controller: &mut Controller,
    body: &RequestBody,
    ctx: &RequestContext,
) -> Result<Dispatch, RpcError> {
    match body {
        RequestBody::BrokerHeartbeat(r) => Dispatch::from_result(
            controller.broker_heartbeat(r, ctx),
            ResponseBody::BrokerHeartbeat,
        ),
        RequestBody::UnregisterBroker(r) => {
            Dispatch::from_result(controller.unregister_broker(r), |()| {
                ResponseBody::UnregisterBroker
            })
        }
        RequestBody::CreateTopics(r) => {
            Dispatch::from_result(controller.create_topics(r, ctx), ResponseBody::CreateTopics)
        }
        RequestBody::DeleteTopics(r) => {
            Dispatch::from_result(controller.delete_topics(r), ResponseBody::DeleteTopics)
        }
        RequestBody::CreatePartitions(r) => Dispatch::from_result(
            controller.create_partitions(r, ctx),
            ResponseBody::CreatePartitions,
        ),
        RequestBody::AlterIsr(r) => {
            Dispatch::from_result(controller.alter_isr(r), ResponseBody::AlterIsr)
        }
        RequestBody::ElectLeaders(r) => {
            Dispatch::from_result(controller.elect_leaders(r), ResponseBody::ElectLeaders)
        }
        RequestBody::IncrementalAlterConfigs(r) => Dispatch::from_result(
            controller.incremental_alter_configs(r),
            ResponseBody::IncrementalAlterConfigs,
        ),
        RequestBody::DescribeConfigs(r) => controller
            .describe_configs(r)
            .map(|resp| Dispatch::Answer(ResponseBody::DescribeConfigs(resp)))
            .map_err(rpc_error),
        RequestBody::UpdateFeatures(r) => {
            Dispatch::from_result(controller.update_features(r), ResponseBody::UpdateFeatures)
        }
        RequestBody::AllocateProducerIds(r) => Dispatch::from_result(
            controller.allocate_producer_ids(r),
            ResponseBody::AllocateProducerIds,
        ),
        RequestBody::DescribeCluster => read(controller, &LocalRead::DescribeCluster),
        RequestBody::RegisterController(r) => {
            Dispatch::from_result(controller.register_controller(r), |()| {
                ResponseBody::RegisterController
            })
        }
        RequestBody::DescribeControllers => read(controller, &LocalRead::DescribeControllers),
        RequestBody::DescribeTopics(r) => controller
            .describe_topics(r)
            .map(|resp| Dispatch::Answer(ResponseBody::DescribeTopics(resp)))
            .map_err(rpc_error),
        RequestBody::DescribeFeatures => read(controller, &LocalRead::DescribeFeatures),
        RequestBody::DeleteTopicsV2(r) => {
            Dispatch::from_result(controller.delete_topics_v2(r), ResponseBody::DeleteTopicsV2)
        }
        RequestBody::LocalRead(r) => read(controller, r),
        RequestBody::AlterConfigs(r) => {
            Dispatch::from_result(controller.alter_configs(r), ResponseBody::AlterConfigs)
        }
        RequestBody::CreateTopicsWithConfigs(r) => Dispatch::from_result(
            controller.create_topics_with_configs(r, ctx),
            ResponseBody::CreateTopicsWithConfigs,
        ),
        RequestBody::RegisterBroker(r) => Dispatch::from_result(
            controller.register_broker(r, ctx),
            ResponseBody::RegisterBroker,
        ),
        RequestBody::AlterPartition(r) => {
            Dispatch::from_result(controller.alter_partition(r), ResponseBody::AlterPartition)
        }
        RequestBody::AssignReplicasToDirs(r) => Dispatch::from_result(
            controller.assign_replicas_to_dirs(r),
            ResponseBody::AssignReplicasToDirs,
        ),
        RequestBody::DescribeTopicsV2(r) => controller
            .describe_topics_v2(r)
            .map(|resp| Dispatch::Answer(ResponseBody::DescribeTopicsV2(resp)))
            .map_err(rpc_error),
        RequestBody::CreateAcls(r) => {
            Dispatch::from_result(controller.create_acls(r, ctx), ResponseBody::CreateAcls)
        }
        RequestBody::DeleteAcls(r) => {
            Dispatch::from_result(controller.delete_acls(r), ResponseBody::DeleteAcls)
        }
        RequestBody::DescribeAcls(r) => read(controller, &LocalRead::DescribeAcls(r.clone())),
        RequestBody::AlterUserScramCredentials(r) => Dispatch::from_result(
            controller.alter_user_scram_credentials(r),
            ResponseBody::AlterUserScramCredentials,
        ),
        RequestBody::DescribeUserScramCredentials(r) => read(
            controller,
            &LocalRead::DescribeUserScramCredentials(r.clone()),
        ),
        // Served by the Raft shard, never by the controller (`RequestBody::is_raft` routes
        // them); answered as not implemented here rather than panicking on a routing mistake.
        RequestBody::DescribeQuorum
        | RequestBody::Fetch(_)
        | RequestBody::FetchSnapshot(_)
        | RequestBody::AddVoter(_)
        | RequestBody::RemoveVoter(_)
        | RequestBody::UpdateVoter(_) => Err(RpcError::NotImplemented {
            api: body.kind().into(),
        }),
    }
}

/// The active controller's answer to `read` (its image with in-flight records).
fn read(controller: &Controller, read: &LocalRead) -> Result<Dispatch, RpcError> {
    let body = match read {
        LocalRead::DescribeCluster => controller
            .describe_cluster()
            .map(ResponseBody::DescribeCluster),
        LocalRead::DescribeConfigs(r) => controller
            .describe_configs(r)
            .map(ResponseBody::DescribeConfigs),
        LocalRead::DescribeTopics(r) => controller
            .describe_topics(r)
            .map(ResponseBody::DescribeTopics),
        LocalRead::DescribeControllers => controller
            .describe_controllers()
            .map(ResponseBody::DescribeControllers),
        LocalRead::DescribeFeatures => controller
            .describe_features()
            .map(ResponseBody::DescribeFeatures),
        LocalRead::DescribeTopicsV2(r) => controller
            .describe_topics_v2(r)
            .map(ResponseBody::DescribeTopicsV2),
        LocalRead::DescribeAcls(r) => controller.describe_acls(r).map(ResponseBody::DescribeAcls),
        LocalRead::DescribeUserScramCredentials(r) => controller
            .describe_user_scram_credentials(r)
            .map(ResponseBody::DescribeUserScramCredentials),
    };
    body.map(Dispatch::Answer).map_err(rpc_error)
}

/// The answer of a node that is not the active controller to `read`: from its committed
/// image (everything it replayed), at once. DescribeCluster names `leader`, the Raft leader
/// the node knows, as the active controller; with none known it is `NotController` (no hint:
/// an election is running).
pub fn local_read(
    controller: &Controller,
    read: &LocalRead,
    leader: Option<NodeId>,
) -> Result<ResponseBody, RpcError> {
    let reads = controller.committed_reads();
    Ok(match read {
        LocalRead::DescribeCluster => {
            let leader = leader.ok_or(RpcError::NotController { leader: None })?;
            ResponseBody::DescribeCluster(reads.describe_cluster(leader))
        }
        LocalRead::DescribeConfigs(r) => ResponseBody::DescribeConfigs(reads.describe_configs(r)),
        LocalRead::DescribeTopics(r) => ResponseBody::DescribeTopics(reads.describe_topics(r)),
        LocalRead::DescribeControllers => {
            ResponseBody::DescribeControllers(reads.describe_controllers())
        }
        LocalRead::DescribeFeatures => ResponseBody::DescribeFeatures(reads.describe_features()),
        LocalRead::DescribeTopicsV2(r) => {
            ResponseBody::DescribeTopicsV2(reads.describe_topics_v2(r))
        }
        LocalRead::DescribeAcls(r) => {
            ResponseBody::DescribeAcls(reads.describe_acls(r).map_err(rpc_error)?)
        }
        LocalRead::DescribeUserScramCredentials(r) => {
            ResponseBody::DescribeUserScramCredentials(reads.describe_user_scram_credentials(r))
        }
    })
}

/// The periodic tick of the active controller (fencing, leader election, topic removal): the
/// records to propose, if any, with what the tick did. `None` when not active.
pub fn tick(
    controller: &mut Controller,
    ctx: &RequestContext,
) -> Option<ControllerResult<TickResponse>> {
    controller.tick(ctx).ok()
}

/// The time a request may take: its own `timeout_ms`, or `default_ms` when it gave 0, never
/// above `max_ms` (a client cannot hold server resources longer than the server allows).
pub fn effective_timeout_ms(timeout_ms: u32, default_ms: u64, max_ms: u64) -> u64 {
    let t = if timeout_ms == 0 {
        default_ms
    } else {
        u64::from(timeout_ms)
    };
    t.min(max_ms)
}

/// Timeout of a request the Raft core serves (an observer's fetch, a voter change, a
/// `kraft.version` upgrade): its own, or [`RAFT_REQUEST_TIMEOUT_DEFAULT_MS`] for 0.
pub(crate) fn raft_request_timeout_ms(timeout_ms: u32) -> u64 {
    effective_timeout_ms(timeout_ms, RAFT_REQUEST_TIMEOUT_DEFAULT_MS, u64::MAX)
}

/// Timeout of a request the Raft core serves that gives none.
const RAFT_REQUEST_TIMEOUT_DEFAULT_MS: u64 = 2_000;

#[cfg(test)]
mod tests {
    use super::*;
    use corum_controller::control::cluster_control::{
        BrokerHeartbeatRequest, RegisterControllerRequest, TargetState, UnregisterBrokerRequest,
    };
    use corum_controller::control::config_control::DescribeConfigsRequest;
    use corum_controller::control::replication_control::{
        CreatableTopic, CreateTopicsRequest, DeleteTopicsRequest, DeleteTopicsV2Request,
        DescribeTopicsRequest, TopicRef,
    };
    use corum_controller::image::ConfigResource;
    use corum_controller::records::{BrokerEndpointV1, ControllerEndpointV1, ListenerV1};
    use corum_controller::{ControllerConfig, TopicId};
    use corum_types::{LogOffset, NodeId, Uuid};

    fn ctx(next: u64) -> RequestContext {
        RequestContext {
            now_ms: 1_000,
            next_offset: LogOffset(next),
            high_watermark: LogOffset(next),
        }
    }

    fn register(id: u32) -> RequestBody {
        RequestBody::BrokerHeartbeat(BrokerHeartbeatRequest {
            broker_id: NodeId(id),
            broker_epoch: None,
            incarnation_id: Uuid([id as u8; 16]),
            listeners: vec![ListenerV1 {
                name: "PLAINTEXT".into(),
                host: "h".into(),
                port: 9092,
            }],
            features: corum_controller::control::feature_control::supported_features(),
            rack: None,
            next_metadata_offset: LogOffset(0),
            want_fence: false,
            want_shutdown: false,
        })
    }

    /// An inactive controller answers NotController (with no hint: the driver adds it) to every
    /// request kind.
    #[test]
    fn inactive_answers_not_controller() {
        let mut c = Controller::new(ControllerConfig::default(), NodeId(1)).unwrap();
        let bodies = [
            register(1),
            RequestBody::UnregisterBroker(UnregisterBrokerRequest {
                broker_id: NodeId(1),
            }),
            RequestBody::DeleteTopics(DeleteTopicsRequest { names: vec![] }),
            RequestBody::DescribeConfigs(DescribeConfigsRequest::all(vec![])),
            RequestBody::DescribeCluster,
            RequestBody::RegisterController(register_controller(1)),
            RequestBody::DescribeControllers,
            RequestBody::DescribeTopics(DescribeTopicsRequest { topics: None }),
            RequestBody::DescribeFeatures,
            RequestBody::DeleteTopicsV2(DeleteTopicsV2Request { topics: vec![] }),
            // Dispatch is the active controller's path, local reads included: the service
            // answers them with `local_read` when it is not active.
            RequestBody::LocalRead(Box::new(LocalRead::DescribeFeatures)),
        ];
        for b in &bodies {
            assert_eq!(
                dispatch(&mut c, b, &ctx(0)),
                Err(RpcError::NotController { leader: None }),
                "{}",
                b.kind()
            );
        }
        assert!(tick(&mut c, &ctx(0)).is_none());
    }

    /// A registration is a proposal whose response waits for the commit; reads and requests
    /// whose items all fail are answered at once; whole-request errors map to RpcError::Api.
    #[test]
    fn active_dispatch() {
        let mut c = Controller::new(ControllerConfig::default(), NodeId(1)).unwrap();
        c.on_become_active(0);
        let d = dispatch(&mut c, &register(7), &ctx(0)).unwrap();
        let Dispatch::Propose { records, response } = d else {
            panic!("a registration must be proposed: {d:?}");
        };
        assert_eq!(records.len(), 1);
        let ResponseBody::BrokerHeartbeat(hb) = response else {
            panic!("wrong response kind");
        };
        assert_eq!(hb.target_state, TargetState::Fenced);
        c.on_proposed(LogOffset(0), &records).unwrap();
        // No unfenced broker: the topic fails per item and nothing is proposed.
        let create = RequestBody::CreateTopics(CreateTopicsRequest {
            topics: vec![CreatableTopic::new("t", 1, 1)],
            validate_only: false,
        });
        let Dispatch::Answer(ResponseBody::CreateTopics(r)) =
            dispatch(&mut c, &create, &ctx(1)).unwrap()
        else {
            panic!("expected an immediate CreateTopics answer");
        };
        assert!(r.topics[0].1.is_err());
        let d = dispatch(&mut c, &RequestBody::DescribeCluster, &ctx(1)).unwrap();
        let Dispatch::Answer(ResponseBody::DescribeCluster(dc)) = d else {
            panic!("expected DescribeCluster");
        };
        assert_eq!(dc.brokers.len(), 1);
        let d = dispatch(
            &mut c,
            &RequestBody::DescribeConfigs(DescribeConfigsRequest::all(vec![
                ConfigResource::topic("missing"),
            ])),
            &ctx(1),
        )
        .unwrap();
        assert!(matches!(
            d,
            Dispatch::Answer(ResponseBody::DescribeConfigs(_))
        ));
        // Unregistering a broker that is not fenced is a whole-request error.
        let unregister_unknown = RequestBody::UnregisterBroker(UnregisterBrokerRequest {
            broker_id: NodeId(99),
        });
        assert_eq!(
            dispatch(&mut c, &unregister_unknown, &ctx(1)),
            Err(RpcError::Api(ApiError::BrokerIdNotRegistered {
                broker_id: NodeId(99)
            }))
        );
    }

    /// The requests of Kafka's brokers: a registration is proposed and answered with its
    /// epoch; AlterPartition and AssignReplicasToDirs answer per item at once when nothing is
    /// to change, and refuse a stale broker epoch whole.
    #[test]
    fn active_dispatch_of_broker_requests() {
        use corum_controller::control::cluster_control::BrokerRegistrationRequest;
        use corum_controller::control::replication_control::{
            AlterPartitionRequest, AlterPartitionTopic, AssignReplicasToDirsRequest,
        };
        use corum_types::BrokerEpoch;
        let mut c = Controller::new(ControllerConfig::default(), NodeId(1)).unwrap();
        c.on_become_active(0);
        let registration = RequestBody::RegisterBroker(Box::new(BrokerRegistrationRequest {
            broker_id: NodeId(7),
            incarnation_id: Uuid([7; 16]),
            endpoints: vec![BrokerEndpointV1 {
                name: "PLAINTEXT".into(),
                host: "h".into(),
                port: 9092,
                security_protocol: 0,
            }],
            features: corum_controller::control::feature_control::supported_features(),
            rack: None,
            log_dirs: vec![Uuid([0x70; 16])],
            previous_broker_epoch:
                corum_controller::control::cluster_control::PreviousBrokerEpoch::Unnamed,
        }));
        let Dispatch::Propose { records, response } =
            dispatch(&mut c, &registration, &ctx(0)).unwrap()
        else {
            panic!("a registration is proposed");
        };
        assert_eq!(
            response,
            ResponseBody::RegisterBroker(
                corum_controller::control::cluster_control::BrokerRegistrationResponse {
                    broker_epoch: BrokerEpoch(0)
                }
            )
        );
        c.on_proposed(LogOffset(0), &records).unwrap();
        let alter = |epoch| {
            RequestBody::AlterPartition(AlterPartitionRequest {
                broker_id: NodeId(7),
                broker_epoch: BrokerEpoch(epoch),
                topics: vec![AlterPartitionTopic {
                    topic_id: TopicId::default(),
                    partitions: vec![],
                }],
            })
        };
        assert!(matches!(
            dispatch(&mut c, &alter(0), &ctx(1)).unwrap(),
            Dispatch::Answer(ResponseBody::AlterPartition(_))
        ));
        assert!(matches!(
            dispatch(&mut c, &alter(5), &ctx(1)),
            Err(RpcError::Api(ApiError::StaleBrokerEpoch { .. }))
        ));
        let assign = RequestBody::AssignReplicasToDirs(AssignReplicasToDirsRequest {
            broker_id: NodeId(7),
            broker_epoch: BrokerEpoch(0),
            directories: vec![],
        });
        assert!(matches!(
            dispatch(&mut c, &assign, &ctx(1)).unwrap(),
            Dispatch::Answer(ResponseBody::AssignReplicasToDirs(_))
        ));
    }

    fn register_controller(id: u32) -> RegisterControllerRequest {
        RegisterControllerRequest {
            controller_id: NodeId(id),
            incarnation_id: Uuid([id as u8; 16]),
            end_points: vec![ControllerEndpointV1 {
                name: "CONTROLLER".into(),
                host: "c".into(),
                port: 9093,
                security_protocol: 0,
            }],
            features: vec![],
        }
    }

    /// The requests appended for the Kafka listener: a registration is proposed (and an
    /// invalid one refused whole), reads are answered at once, a deletion by an unknown id
    /// fails per item; a local read at the active controller answers what the same read sent
    /// alone does.
    #[test]
    fn active_dispatch_of_listener_requests() {
        let mut c = Controller::new(ControllerConfig::default(), NodeId(1)).unwrap();
        c.on_become_active(0);
        let d = dispatch(
            &mut c,
            &RequestBody::RegisterController(register_controller(2)),
            &ctx(0),
        )
        .unwrap();
        let Dispatch::Propose { records, response } = d else {
            panic!("a registration is proposed: {d:?}");
        };
        assert_eq!(response, ResponseBody::RegisterController);
        c.on_proposed(LogOffset(0), &records).unwrap();
        let mut bad = register_controller(3);
        bad.end_points[0].port = 0;
        assert!(matches!(
            dispatch(&mut c, &RequestBody::RegisterController(bad), &ctx(1)),
            Err(RpcError::Api(ApiError::InvalidRequest { .. }))
        ));
        for (plain, read) in [
            (
                RequestBody::DescribeControllers,
                LocalRead::DescribeControllers,
            ),
            (RequestBody::DescribeFeatures, LocalRead::DescribeFeatures),
            (RequestBody::DescribeCluster, LocalRead::DescribeCluster),
            (
                RequestBody::DescribeTopics(DescribeTopicsRequest { topics: None }),
                LocalRead::DescribeTopics(DescribeTopicsRequest { topics: None }),
            ),
        ] {
            let alone = dispatch(&mut c, &plain, &ctx(1)).unwrap();
            assert!(matches!(alone, Dispatch::Answer(_)), "{}", plain.kind());
            let local = RequestBody::LocalRead(Box::new(read));
            assert_eq!(dispatch(&mut c, &local, &ctx(1)).unwrap(), alone);
        }
        let Dispatch::Answer(ResponseBody::DescribeControllers(dc)) =
            dispatch(&mut c, &RequestBody::DescribeControllers, &ctx(1)).unwrap()
        else {
            unreachable!()
        };
        assert_eq!(
            dc.controllers.len(),
            1,
            "in flight, seen by the active reads"
        );
        let unknown = TopicRef::Id(TopicId(Uuid([9; 16])));
        let d = dispatch(
            &mut c,
            &RequestBody::DeleteTopicsV2(DeleteTopicsV2Request {
                topics: vec![unknown.clone()],
            }),
            &ctx(1),
        )
        .unwrap();
        let Dispatch::Answer(ResponseBody::DeleteTopicsV2(r)) = d else {
            panic!("nothing to delete: answered at once: {d:?}");
        };
        assert_eq!(
            r.topics,
            vec![(
                unknown,
                Err(ApiError::UnknownTopicId {
                    topic_id: TopicId(Uuid([9; 16]))
                })
            )]
        );
    }

    /// A node that is not active answers local reads from its committed image: nothing in
    /// flight shows, and DescribeCluster names the leader given, or is NotController without
    /// one.
    #[test]
    fn local_reads_answer_from_the_committed_image() {
        let mut c = Controller::new(ControllerConfig::default(), NodeId(1)).unwrap();
        c.on_become_active(0);
        let Dispatch::Propose { records, .. } = dispatch(
            &mut c,
            &RequestBody::RegisterController(register_controller(2)),
            &ctx(0),
        )
        .unwrap() else {
            panic!("a registration is proposed");
        };
        c.on_proposed(LogOffset(0), &records).unwrap();
        let Ok(ResponseBody::DescribeControllers(dc)) =
            local_read(&c, &LocalRead::DescribeControllers, Some(NodeId(1)))
        else {
            panic!("DescribeControllers answers");
        };
        assert!(
            dc.controllers.is_empty(),
            "the registration is not committed"
        );
        assert_eq!(
            local_read(&c, &LocalRead::DescribeCluster, None),
            Err(RpcError::NotController { leader: None })
        );
        let Ok(ResponseBody::DescribeCluster(cluster)) =
            local_read(&c, &LocalRead::DescribeCluster, Some(NodeId(7)))
        else {
            panic!("DescribeCluster answers with a leader known");
        };
        assert_eq!(cluster.controller_id, NodeId(7));
        let Ok(ResponseBody::DescribeFeatures(f)) =
            local_read(&c, &LocalRead::DescribeFeatures, None)
        else {
            panic!("DescribeFeatures answers");
        };
        assert_eq!(f.finalized_epoch, None, "nothing committed");
    }

    /// 0 means the server default; nothing exceeds the server maximum.
    #[test]
    fn timeouts() {
        assert_eq!(effective_timeout_ms(0, 2_000, 30_000), 2_000);
        assert_eq!(effective_timeout_ms(500, 2_000, 30_000), 500);
        assert_eq!(effective_timeout_ms(u32::MAX, 2_000, 30_000), 30_000);
    }
}
