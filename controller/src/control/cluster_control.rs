//! Brokers: registration and heartbeats, leases, fencing, unfencing, controlled shutdown; and
//! controllers' registrations (KIP-919), at the end of the file.
//!
//! Heartbeat handling (KIP-631 as the thread settled it), for a heartbeat arriving at `now_ms`:
//!
//! | request                          | state in the image (incl. in flight)          | outcome                                       |
//! |----------------------------------|-----------------------------------------------|-----------------------------------------------|
//! | INITIAL (no epoch)               | unregistered, or lease expired                | RegisterBroker, epoch = its own offset; FENCED (an old unfenced registration is fenced first, in the same batch) |
//! | INITIAL, same incarnation        | registered, lease live                        | same epoch again (a retried registration)     |
//! | INITIAL, other incarnation       | registered, lease live                        | DuplicateBrokerRegistration (live one wins)   |
//! | epoch                            | not registered / other epoch                  | BrokerIdNotRegistered / StaleBrokerEpoch      |
//! | epoch, offset < highest seen     | any                                           | StaleHeartbeat (ignored, lease not renewed)   |
//! | epoch                            | lease expired                                 | BrokerLeaseExpired (register again)           |
//! | epoch, want shutdown             | fenced                                        | SHUTDOWN                                      |
//! | epoch, want shutdown             | active                                        | BrokerRegistrationChange + leaderships moved; SHUTDOWN once it leads nothing |
//! | epoch, want fence                | active (or in controlled shutdown)            | FenceBroker + leaderships/ISR moved; FENCED   |
//! | epoch                            | in controlled shutdown                        | CONTROLLED_SHUTDOWN                           |
//! | epoch, past its registration     | fenced                                        | UnfenceBroker + leaderless partitions elected; ACTIVE |
//! | epoch                            | fenced, not past its registration / active    | FENCED / ACTIVE                               |
//!
//! Past its registration: `NextMetadataOffset` (exclusive) is past the broker's own
//! registration record (whose offset is its epoch), as in Kafka. The response's `is_caught_up`
//! says more: the offset also reaches the high watermark the controller knows. Requiring that
//! to unfence would be a moving target under steady writes (the high watermark moves while a
//! heartbeat travels), so a broker could stay fenced for as long as the writes go on. Leases are soft state on the active controller only (never in the
//! log), measured from request arrival on the injected monotonic clock; a lease is live while
//! `now_ms <= last_contact_ms + session_timeout_ms`. [`crate::Controller::tick`] fences
//! brokers whose lease expired.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use corum_types::{BrokerEpoch, LogOffset, NodeId, Uuid};

use super::replication_control::{elect_for_unfenced, leadership_count, move_off_brokers};
use super::{ControllerResult, RequestContext, View};
use crate::error::ApiError;
use crate::image::{BrokerRegistration, ControllerRegistration, MetadataImage};
use crate::records::{
    BrokerEndpointV1, BrokerRegistrationChangeRecordV1, ControllerEndpointV1, FenceBrokerRecordV1,
    ListenerV1, MetadataRecord, RegisterBrokerRecordV1, RegisterControllerRecordV1,
    SupportedFeatureV1, UnfenceBrokerRecordV1, UnregisterBrokerRecordV1,
};

/// One broker's lease: soft state of the active controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub last_contact_ms: u64,
    /// Highest NextMetadataOffset seen from this registration; lower ones are stale.
    pub offset_seen: LogOffset,
}

/// Leases by broker id (a deterministic hasher: iteration order never leaks randomness).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Leases {
    by_broker:
        HashMap<NodeId, Lease, BuildHasherDefault<std::collections::hash_map::DefaultHasher>>,
}

impl Leases {
    pub fn get(&self, broker_id: NodeId) -> Option<&Lease> {
        self.by_broker.get(&broker_id)
    }

    /// True if `broker_id` has a lease that is live at `now_ms`.
    pub fn is_live(&self, broker_id: NodeId, now_ms: u64, session_timeout_ms: u64) -> bool {
        self.get(broker_id)
            .is_some_and(|l| now_ms <= l.last_contact_ms.saturating_add(session_timeout_ms))
    }

    pub(crate) fn set(&mut self, broker_id: NodeId, lease: Lease) {
        self.by_broker.insert(broker_id, lease);
    }

    /// Starts a lease at `now_ms` for a broker that has none.
    pub(crate) fn start_if_absent(&mut self, broker_id: NodeId, now_ms: u64) {
        self.by_broker.entry(broker_id).or_insert(Lease {
            last_contact_ms: now_ms,
            offset_seen: LogOffset(0),
        });
    }

    pub(crate) fn remove(&mut self, broker_id: NodeId) {
        self.by_broker.remove(&broker_id);
    }

    pub(crate) fn clear(&mut self) {
        self.by_broker.clear();
    }

    /// On becoming active: every registered broker gets a fresh lease from `now_ms` (so each has
    /// one full session timeout to reach the new controller).
    pub(crate) fn extend_all(&mut self, image: &MetadataImage, now_ms: u64) {
        for b in image.brokers.iter() {
            let lease = self.by_broker.entry(b.broker_id).or_insert(Lease {
                last_contact_ms: now_ms,
                offset_seen: LogOffset(0),
            });
            lease.last_contact_ms = lease.last_contact_ms.max(now_ms);
        }
    }

    pub fn len(&self) -> usize {
        self.by_broker.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_broker.is_empty()
    }
}

/// A broker's heartbeat. `broker_epoch: None` is the INITIAL state (a registration), which must
/// carry listeners, supported features and rack.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct BrokerHeartbeatRequest {
    pub broker_id: NodeId,
    pub broker_epoch: Option<BrokerEpoch>,
    pub incarnation_id: Uuid,
    pub listeners: Vec<ListenerV1>,
    pub features: Vec<SupportedFeatureV1>,
    pub rack: Option<String>,
    /// The offset the broker has applied the log up to (exclusive).
    pub next_metadata_offset: LogOffset,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

/// What the controller wants the broker to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum TargetState {
    /// Registered but fenced: catch up with the log and keep heartbeating.
    Fenced,
    /// Registered and active.
    Active,
    /// Controlled shutdown in progress: leaderships are still being moved; keep heartbeating.
    ControlledShutdown,
    /// Shut down now: the broker leads nothing.
    Shutdown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct BrokerHeartbeatResponse {
    pub broker_epoch: BrokerEpoch,
    pub target_state: TargetState,
    /// How long the lease lasts from the heartbeat's arrival (the controller's session timeout).
    pub lease_duration_ms: u64,
    pub is_caught_up: bool,
}

/// A heartbeat's result plus the lease to record (soft state, applied by the facade even though
/// the records are not committed yet: the lease starts at request arrival).
pub(crate) struct HeartbeatOutcome {
    pub result: Result<ControllerResult<BrokerHeartbeatResponse>, ApiError>,
    pub lease: Option<Lease>,
}

fn check_features(
    image: &MetadataImage,
    broker_id: NodeId,
    features: &[SupportedFeatureV1],
) -> Result<(), ApiError> {
    for (name, f) in image.features.iter() {
        let ok = features
            .iter()
            .any(|s| s.name == name && s.min_level <= f.min_level && f.max_level <= s.max_level);
        if !ok {
            return Err(ApiError::UnsupportedFeatures {
                broker_id,
                feature: name.to_owned(),
            });
        }
    }
    Ok(())
}

pub(crate) fn broker_heartbeat(
    view: View<'_>,
    req: &BrokerHeartbeatRequest,
    ctx: &RequestContext,
) -> HeartbeatOutcome {
    let image = view.image;
    let timeout_ms = view.config.session_timeout_ms;
    let existing = image.brokers.get(req.broker_id);
    let live = view.leases.is_live(req.broker_id, ctx.now_ms, timeout_ms);
    let Some(epoch) = req.broker_epoch else {
        return register(view, req, ctx, existing, live);
    };
    let fail = |e| HeartbeatOutcome {
        result: Err(e),
        lease: None,
    };
    let Some(reg) = existing else {
        return fail(ApiError::BrokerIdNotRegistered {
            broker_id: req.broker_id,
        });
    };
    if reg.broker_epoch != epoch {
        return fail(ApiError::StaleBrokerEpoch {
            broker_id: req.broker_id,
            current: reg.broker_epoch,
            request: epoch,
        });
    }
    let seen = view
        .leases
        .get(req.broker_id)
        .map_or(LogOffset(0), |l| l.offset_seen);
    if req.next_metadata_offset < seen {
        return fail(ApiError::StaleHeartbeat {
            broker_id: req.broker_id,
            seen,
            request: req.next_metadata_offset,
        });
    }
    if !live {
        return fail(ApiError::BrokerLeaseExpired {
            broker_id: req.broker_id,
        });
    }
    let lease = Some(Lease {
        last_contact_ms: ctx.now_ms,
        offset_seen: req.next_metadata_offset,
    });
    // Unfencing needs the broker past its own registration record (as Kafka does), not at the
    // high watermark: under steady writes the high watermark moves on while a heartbeat is on
    // its way, and a broker that must reach it may never be seen caught up.
    let past_registration = req.next_metadata_offset.0 > epoch.0;
    let is_caught_up = req.next_metadata_offset >= ctx.high_watermark && past_registration;
    let max = view.config.records_per_batch_max;
    let mut records = Vec::new();
    let target_state = if req.want_shutdown {
        if reg.fenced {
            TargetState::Shutdown
        } else {
            if !reg.in_controlled_shutdown {
                records.push(MetadataRecord::BrokerRegistrationChange(
                    BrokerRegistrationChangeRecordV1 {
                        broker_id: req.broker_id,
                        broker_epoch: epoch,
                        in_controlled_shutdown: true,
                    },
                ));
            }
            let all = move_off_brokers(image, &[req.broker_id], max, &mut records);
            // Each leadership the batch moves is one leader-change record; if everything fit, the
            // broker leads nothing once the batch commits (the response is sent only then).
            if all || leadership_count(image, req.broker_id) == 0 {
                TargetState::Shutdown
            } else {
                TargetState::ControlledShutdown
            }
        }
    } else if req.want_fence && !reg.fenced {
        if move_off_brokers(image, &[req.broker_id], max - 1, &mut records) {
            records.push(fence_record(reg));
            TargetState::Fenced
        } else if reg.in_controlled_shutdown {
            TargetState::ControlledShutdown
        } else {
            TargetState::Active
        }
    } else if reg.in_controlled_shutdown {
        TargetState::ControlledShutdown
    } else if reg.fenced && past_registration && !req.want_fence {
        records.push(MetadataRecord::UnfenceBroker(UnfenceBrokerRecordV1 {
            broker_id: req.broker_id,
            broker_epoch: epoch,
        }));
        // Partitions this broker can lead but that have no leader get one now; what does not fit
        // in the batch is elected by the next tick (`Controller::tick`).
        elect_for_unfenced(image, req.broker_id, max, &mut records);
        TargetState::Active
    } else if reg.fenced {
        TargetState::Fenced
    } else {
        TargetState::Active
    };
    let response = BrokerHeartbeatResponse {
        broker_epoch: epoch,
        target_state,
        lease_duration_ms: timeout_ms,
        is_caught_up,
    };
    HeartbeatOutcome {
        result: Ok(ControllerResult::new(records, response)),
        lease,
    }
}

fn register(
    view: View<'_>,
    req: &BrokerHeartbeatRequest,
    ctx: &RequestContext,
    existing: Option<&BrokerRegistration>,
    live: bool,
) -> HeartbeatOutcome {
    let image = view.image;
    let timeout_ms = view.config.session_timeout_ms;
    let fail = |e| HeartbeatOutcome {
        result: Err(e),
        lease: None,
    };
    if req.listeners.is_empty() {
        return fail(ApiError::InvalidRequest {
            reason: "a registration must list at least one listener".into(),
        });
    }
    if let Err(e) = check_features(image, req.broker_id, &req.features) {
        return fail(e);
    }
    let lease = Some(Lease {
        last_contact_ms: ctx.now_ms,
        offset_seen: req.next_metadata_offset,
    });
    let mut records = Vec::new();
    if let Some(reg) = existing {
        if live {
            if reg.incarnation_id != req.incarnation_id {
                return fail(ApiError::DuplicateBrokerRegistration {
                    broker_id: req.broker_id,
                });
            }
            // The same process asking again (its response was lost): same epoch, no records.
            let target_state = if reg.fenced {
                TargetState::Fenced
            } else {
                TargetState::Active
            };
            let response = BrokerHeartbeatResponse {
                broker_epoch: reg.broker_epoch,
                target_state,
                lease_duration_ms: timeout_ms,
                is_caught_up: false,
            };
            return HeartbeatOutcome {
                result: Ok(ControllerResult::new(records, response)),
                lease,
            };
        }
        // The old registration's lease expired: the new one replaces it. If the old one was still
        // unfenced (the tick has not fenced it yet), fence it first in the same batch so no
        // partition keeps a leader on the replaced registration.
        if !reg.fenced {
            let max = view.config.records_per_batch_max - 2;
            if !move_off_brokers(image, &[req.broker_id], max, &mut records) {
                return fail(ApiError::TooManyRecords {
                    records: max + 2,
                    max: view.config.records_per_batch_max,
                });
            }
            records.push(fence_record(reg));
        }
    }
    let broker_epoch = BrokerEpoch(ctx.next_offset.0 + records.len() as u64);
    records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecordV1 {
        broker_id: req.broker_id,
        incarnation_id: req.incarnation_id,
        broker_epoch,
        listeners: req.listeners.clone(),
        features: req.features.clone(),
        rack: req.rack.clone(),
    }));
    let response = BrokerHeartbeatResponse {
        broker_epoch,
        target_state: TargetState::Fenced,
        lease_duration_ms: timeout_ms,
        is_caught_up: false,
    };
    HeartbeatOutcome {
        result: Ok(ControllerResult::new(records, response)),
        lease,
    }
}

fn fence_record(reg: &BrokerRegistration) -> MetadataRecord {
    MetadataRecord::FenceBroker(FenceBrokerRecordV1 {
        broker_id: reg.broker_id,
        broker_epoch: reg.broker_epoch,
    })
}

/// What a tick did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickResponse {
    /// Brokers fenced because their lease expired.
    pub fenced: Vec<NodeId>,
    /// Brokers whose lease expired but whose partitions did not all fit in this batch; the next
    /// tick continues.
    pub fencing_incomplete: Vec<NodeId>,
    /// Leaderless partitions given a leader from their ISR (only in ticks that fence nobody).
    pub leaders_elected: usize,
}

/// Fences every unfenced broker whose lease expired at `now_ms`, moving its leaderships and ISR
/// memberships in the same batch (all expired brokers at once, so no partition is handed from one
/// expiring broker to another).
pub(crate) fn fence_expired(
    view: View<'_>,
    now_ms: u64,
    out: &mut Vec<MetadataRecord>,
) -> TickResponse {
    let timeout_ms = view.config.session_timeout_ms;
    let expired: Vec<&BrokerRegistration> = view
        .image
        .brokers
        .iter()
        .filter(|b| !b.fenced && !view.leases.is_live(b.broker_id, now_ms, timeout_ms))
        .collect();
    if expired.is_empty() {
        return TickResponse::default();
    }
    let ids: Vec<NodeId> = expired.iter().map(|b| b.broker_id).collect();
    let max = view.config.records_per_batch_max.saturating_sub(ids.len());
    if move_off_brokers(view.image, &ids, max, out) {
        out.extend(expired.iter().map(|b| fence_record(b)));
        TickResponse {
            fenced: ids,
            ..TickResponse::default()
        }
    } else {
        TickResponse {
            fencing_incomplete: ids,
            ..TickResponse::default()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct UnregisterBrokerRequest {
    pub broker_id: NodeId,
}

/// Removes a fenced broker's registration (a decommission).
pub(crate) fn unregister_broker(
    view: View<'_>,
    req: &UnregisterBrokerRequest,
) -> Result<ControllerResult<()>, ApiError> {
    let reg = view
        .image
        .brokers
        .get(req.broker_id)
        .ok_or(ApiError::BrokerIdNotRegistered {
            broker_id: req.broker_id,
        })?;
    if !reg.fenced {
        return Err(ApiError::BrokerNotFenced {
            broker_id: req.broker_id,
        });
    }
    Ok(ControllerResult::new(
        vec![MetadataRecord::UnregisterBroker(UnregisterBrokerRecordV1 {
            broker_id: reg.broker_id,
            broker_epoch: reg.broker_epoch,
        })],
        (),
    ))
}

/// One broker as DescribeCluster shows it.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribedBroker {
    pub broker_id: NodeId,
    pub broker_epoch: BrokerEpoch,
    pub listeners: Vec<ListenerV1>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeClusterResponse {
    /// The active controller's id: the answering controller's own when it is active; in a
    /// read any node answers from its committed image, the Raft leader that node knows.
    pub controller_id: NodeId,
    pub brokers: Vec<DescribedBroker>,
    pub topic_count: usize,
    pub partition_count: usize,
}

pub(crate) fn describe_cluster(
    image: &MetadataImage,
    controller_id: NodeId,
) -> DescribeClusterResponse {
    DescribeClusterResponse {
        controller_id,
        brokers: image
            .brokers
            .iter()
            .map(|b| DescribedBroker {
                broker_id: b.broker_id,
                broker_epoch: b.broker_epoch,
                listeners: b.endpoints.iter().map(BrokerEndpointV1::listener).collect(),
                rack: b.rack.as_deref().map(str::to_owned),
                fenced: b.fenced,
                in_controlled_shutdown: b.in_controlled_shutdown,
            })
            .collect(),
        topic_count: image.topics.len(),
        partition_count: image.topics.partition_count(),
    }
}

// ---------------------------------------------------------------------------------------------
// Controller registration (KIP-919).
//
// | request                                           | image (incl. in flight)           | outcome                         |
// |---------------------------------------------------|-----------------------------------|---------------------------------|
// | invalid (`ControllerRegistration::invalid_reason`) | any                               | InvalidRequest naming the rule  |
// | valid                                             | holds exactly this registration   | no records (a re-sent request)  |
// | valid                                             | none, or a different one          | RegisterController              |
//
// Any id is accepted: the controller does not know the voter set (Raft keeps it). Comparing
// lists ignores their order (both are kept in name order).

/// A controller's registration (Kafka's ControllerRegistration request): its id, the
/// incarnation of its process, its listeners and the feature ranges it supports. Nodes send it
/// again after every start and may re-send it at will: an unchanged registration writes
/// nothing.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct RegisterControllerRequest {
    pub controller_id: NodeId,
    pub incarnation_id: Uuid,
    pub end_points: Vec<ControllerEndpointV1>,
    pub features: Vec<SupportedFeatureV1>,
}

pub(crate) fn register_controller(
    view: View<'_>,
    req: &RegisterControllerRequest,
) -> Result<ControllerResult<()>, ApiError> {
    let reg = ControllerRegistration {
        controller_id: req.controller_id,
        incarnation_id: req.incarnation_id,
        end_points: req.end_points.clone(),
        features: req.features.clone(),
    }
    .sorted();
    if let Some(reason) = reg.invalid_reason() {
        return Err(ApiError::InvalidRequest {
            reason: format!("controller {}: {reason}", req.controller_id).into(),
        });
    }
    if view.image.controllers.get(req.controller_id) == Some(&reg) {
        return Ok(ControllerResult::new(Vec::new(), ()));
    }
    let record = MetadataRecord::RegisterController(RegisterControllerRecordV1 {
        controller_id: reg.controller_id,
        incarnation_id: reg.incarnation_id,
        end_points: reg.end_points,
        features: reg.features,
    });
    Ok(ControllerResult::new(vec![record], ()))
}

/// One registered controller as DescribeControllers shows it.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribedController {
    pub controller_id: NodeId,
    pub incarnation_id: Uuid,
    /// In name order.
    pub end_points: Vec<ControllerEndpointV1>,
    /// In name order.
    pub features: Vec<SupportedFeatureV1>,
}

/// Every registered controller, in id order.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct DescribeControllersResponse {
    pub controllers: Vec<DescribedController>,
}

pub(crate) fn describe_controllers(image: &MetadataImage) -> DescribeControllersResponse {
    DescribeControllersResponse {
        controllers: image
            .controllers
            .iter()
            .map(|c| DescribedController {
                controller_id: c.controller_id,
                incarnation_id: c.incarnation_id,
                end_points: c.end_points.clone(),
                features: c.features.clone(),
            })
            .collect(),
    }
}
