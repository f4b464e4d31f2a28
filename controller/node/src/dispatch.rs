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

use corum_controller::control::cluster_control::TickResponse;
use corum_controller::records::MetadataRecord;
use corum_controller::{ApiError, Controller, ControllerResult, RequestContext};

use crate::protocol::{RequestBody, ResponseBody, RpcError};

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

/// Runs the handler for `body`. Handlers never mutate the image; `BrokerHeartbeat` and
/// `UnregisterBroker` update the soft lease state, as [`Controller`] documents.
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
        RequestBody::DescribeCluster => controller
            .describe_cluster()
            .map(|resp| Dispatch::Answer(ResponseBody::DescribeCluster(resp)))
            .map_err(rpc_error),
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

#[cfg(test)]
mod tests {
    use super::*;
    use corum_controller::control::cluster_control::{
        BrokerHeartbeatRequest, TargetState, UnregisterBrokerRequest,
    };
    use corum_controller::control::config_control::DescribeConfigsRequest;
    use corum_controller::control::replication_control::{
        CreatableTopic, CreateTopicsRequest, DeleteTopicsRequest,
    };
    use corum_controller::image::ConfigResource;
    use corum_controller::records::{ListenerV1, SupportedFeatureV1};
    use corum_controller::ControllerConfig;
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
            features: vec![SupportedFeatureV1 {
                name: "metadata.version".into(),
                min_level: 1,
                max_level: 1,
            }],
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

    /// 0 means the server default; nothing exceeds the server maximum.
    #[test]
    fn timeouts() {
        assert_eq!(effective_timeout_ms(0, 2_000, 30_000), 2_000);
        assert_eq!(effective_timeout_ms(500, 2_000, 30_000), 500);
        assert_eq!(effective_timeout_ms(u32::MAX, 2_000, 30_000), 30_000);
    }
}
