//! Brokers: registration and heartbeats, leases, fencing, unfencing, controlled shutdown; and
//! controllers' registrations (KIP-919), at the end of the file.
//!
//! # Registration (Kafka's BrokerRegistration; also a heartbeat without an epoch)
//!
//! | request                                        | image (incl. in flight) and lease  | outcome                                  |
//! |------------------------------------------------|------------------------------------|------------------------------------------|
//! | another incarnation                            | registered, lease live             | DuplicateBrokerRegistration              |
//! | no listener, an unknown security protocol      | any                                | InvalidRequest / InvalidRegistration     |
//! | log directories: none (from `metadata.version` 3.7-IV2), a reserved id, one twice, one another broker registered | any | InvalidRegistration |
//! | a finalized feature level outside the broker's range (a feature it does not list counts as 0..=0, and one it lists but the cluster did not finalize as level 0) | any | UnsupportedFeatures (UNSUPPORTED_VERSION) |
//! | no `metadata.version` among the broker's features | any | InvalidRegistration |
//! | the same incarnation, nothing changed          | registered                         | the same epoch, no records               |
//! | the same incarnation, something changed        | registered                         | RegisterBrokerV2 amending it: same epoch, same fencing and controlled shutdown |
//! | a new incarnation (or none registered)         | not live                           | RegisterBrokerV2, epoch = its offset, fenced (an old unfenced registration is fenced first, in the same batch, so no partition keeps a leader on it) |
//!
//! Every accepted registration starts a lease. With eligible leader replicas enabled (KIP-966)
//! a new incarnation also says whether the broker shut down cleanly: its
//! `previous_broker_epoch` is the epoch of the registration it replaces (Kafka's
//! `PreviousBrokerEpoch`: a broker that stopped cleanly sends its last epoch; one that was
//! killed, or starts for the first time, sends none). Otherwise its log may have lost what it
//! acknowledged, so it leaves every ISR and every set of eligible leader replicas in the same
//! batch ([`Removal::UncleanShutdown`], Kafka's `handleBrokerUncleanShutdown`). A request
//! that cannot say ([`PreviousBrokerEpoch::NotSent`]: Kafka's BrokerRegistration before v3,
//! corum's registration by heartbeat) counts as clean, as in Kafka.
//!
//! UnregisterBroker (a fenced broker only) takes the broker out of the ISRs and decides the
//! partitions whose eligible leader replicas name it again, before the UnregisterBroker record
//! (Kafka's `handleBrokerUnregistered`).
//!
//! # Heartbeats (Kafka's `BrokerHeartbeatManager.calculateNextBrokerState`)
//!
//! After the checks (not registered → BrokerIdNotRegistered; another epoch → StaleBrokerEpoch;
//! an offset below one already seen → StaleHeartbeat, ignored), the broker's state — FENCED,
//! ACTIVE or CONTROLLED_SHUTDOWN, from its registration — and the request decide:
//!
//! | state               | request                     | outcome                                                          |
//! |---------------------|-----------------------------|------------------------------------------------------------------|
//! | FENCED              | want shutdown               | SHUTDOWN, no records                                             |
//! | FENCED              | past its registration, no want fence | BrokerRegistrationChangeV2{Unfence} + leaderless partitions elected; ACTIVE |
//! | FENCED              | otherwise                   | FENCED                                                           |
//! | ACTIVE              | want fence                  | ISRs and leaderships moved + BrokerRegistrationChangeV2{Fence}; FENCED (SHUTDOWN with want shutdown) |
//! | ACTIVE              | want shutdown, leads some partition | BrokerRegistrationChangeV2{shutdown} + ISRs and leaderships moved; CONTROLLED_SHUTDOWN |
//! | ACTIVE              | want shutdown, leads nothing | ISRs moved + fenced; SHUTDOWN                                  |
//! | ACTIVE              | otherwise                   | ACTIVE                                                           |
//! | CONTROLLED_SHUTDOWN | still leads some partition  | what is left moved (a full batch leaves some); CONTROLLED_SHUTDOWN |
//! | CONTROLLED_SHUTDOWN | leads nothing, every active broker has replayed the records that started the shutdown | fenced; SHUTDOWN |
//! | CONTROLLED_SHUTDOWN | otherwise                   | CONTROLLED_SHUTDOWN                                              |
//!
//! Past its registration: `NextMetadataOffset` (exclusive) is past the broker's own
//! registration record (whose offset is its epoch), as in Kafka; the response's `is_caught_up`
//! says exactly that (Kafka's `IsCaughtUp`). The shutdown offset (the end of the records that
//! started a controlled shutdown, soft state of the lease) and the offsets the other brokers
//! reported decide when a broker in controlled shutdown may go, as Kafka's `lowestActiveOffset`
//! does: then every broker that may lead has seen its leaderships move. A new active controller
//! knows no shutdown offset: a broker in controlled shutdown that leads nothing then goes at
//! once (Kafka's new controller sees it ACTIVE and wanting to shut down). Leases are soft state
//! on the active controller only (never in the log), measured from request arrival on the
//! injected monotonic clock; a lease is live while `now_ms <= last_contact_ms +
//! session_timeout_ms`. [`crate::Controller::tick`] fences brokers whose lease expired; a
//! heartbeat of the registration's epoch renews the lease whether it expired or not (the broker
//! is then unfenced again once past its registration), as Kafka's brokers expect.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use corum_types::{BrokerEpoch, LogOffset, NodeId, Uuid};

use super::feature_control;
use super::replication_control::{
    elect_leaderless, leadership_count, move_off_brokers, remove_brokers, Removal,
};
use super::{ControllerResult, RequestContext, View};
use crate::error::ApiError;
use crate::ids::is_reserved_dir;
use crate::image::{BrokerRegistration, ControllerRegistration, MetadataImage};
use crate::records::{
    BrokerEndpointV1, BrokerRegistrationChangeRecordV2, ControllerEndpointV1, FencingChange,
    ListenerV1, MetadataRecord, RegisterBrokerRecordV2, RegisterControllerRecordV1,
    SecurityProtocol, SupportedFeatureV1, UnregisterBrokerRecordV1,
};

/// One broker's lease: soft state of the active controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub last_contact_ms: u64,
    /// Highest NextMetadataOffset seen from this registration; lower ones are stale.
    pub offset_seen: LogOffset,
    /// In controlled shutdown: the end (exclusive) of the records that started it, which every
    /// active broker must have replayed before this one may shut down.
    pub controlled_shutdown_end: Option<LogOffset>,
}

impl Lease {
    fn new(last_contact_ms: u64, offset_seen: LogOffset) -> Lease {
        Lease {
            last_contact_ms,
            offset_seen,
            controlled_shutdown_end: None,
        }
    }
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
        self.by_broker
            .entry(broker_id)
            .or_insert(Lease::new(now_ms, LogOffset(0)));
    }

    /// Forgets `broker_id`'s controlled shutdown (it was fenced).
    pub(crate) fn end_controlled_shutdown(&mut self, broker_id: NodeId) {
        if let Some(l) = self.by_broker.get_mut(&broker_id) {
            l.controlled_shutdown_end = None;
        }
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
            let lease = self
                .by_broker
                .entry(b.broker_id)
                .or_insert(Lease::new(now_ms, LogOffset(0)));
            lease.last_contact_ms = lease.last_contact_ms.max(now_ms);
        }
    }

    /// The lowest offset an active broker (unfenced, not in controlled shutdown) reported, or
    /// `None` when there is none (Kafka's `lowestActiveOffset`). A broker that has not
    /// heartbeated to this controller counts as offset 0.
    pub(crate) fn lowest_active_offset(&self, image: &MetadataImage) -> Option<LogOffset> {
        image
            .brokers
            .iter()
            .filter(|b| b.is_eligible())
            .map(|b| {
                self.get(b.broker_id)
                    .map_or(LogOffset(0), |l| l.offset_seen)
            })
            .min()
    }

    pub fn len(&self) -> usize {
        self.by_broker.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_broker.is_empty()
    }
}

/// A broker's heartbeat. `broker_epoch: None` is the INITIAL state (a registration), which must
/// carry listeners, supported features and rack; it registers as [`BrokerRegistrationRequest`]
/// does with PLAINTEXT listeners and no log directory (corum's first protocol, kept for its
/// clients: Kafka's brokers register with BrokerRegistration).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct BrokerHeartbeatRequest {
    pub broker_id: NodeId,
    pub broker_epoch: Option<BrokerEpoch>,
    pub incarnation_id: Uuid,
    pub listeners: Vec<ListenerV1>,
    pub features: Vec<SupportedFeatureV1>,
    pub rack: Option<String>,
    /// The offset the broker has applied the log up to (exclusive): Kafka's
    /// `CurrentMetadataOffset` + 1.
    pub next_metadata_offset: LogOffset,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

/// What the controller wants the broker to be. Kafka's BrokerHeartbeat answer says it with two
/// flags: see [`BrokerHeartbeatResponse::is_fenced`] and
/// [`BrokerHeartbeatResponse::should_shut_down`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum TargetState {
    /// Registered but fenced: catch up with the log and keep heartbeating.
    Fenced,
    /// Registered and active.
    Active,
    /// Controlled shutdown in progress: leaderships are still being moved; keep heartbeating.
    ControlledShutdown,
    /// Shut down now: the broker leads nothing and is fenced.
    Shutdown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct BrokerHeartbeatResponse {
    pub broker_epoch: BrokerEpoch,
    pub target_state: TargetState,
    /// How long the lease lasts from the heartbeat's arrival (the controller's session timeout).
    pub lease_duration_ms: u64,
    /// The broker has replayed past its own registration record (Kafka's `IsCaughtUp`).
    pub is_caught_up: bool,
}

impl BrokerHeartbeatResponse {
    /// Kafka's `IsFenced`: fenced, or shutting down now (Kafka fences a broker it lets go).
    pub fn is_fenced(&self) -> bool {
        matches!(
            self.target_state,
            TargetState::Fenced | TargetState::Shutdown
        )
    }

    /// Kafka's `ShouldShutDown`.
    pub fn should_shut_down(&self) -> bool {
        self.target_state == TargetState::Shutdown
    }
}

/// Kafka's BrokerRegistration (KIP-631; KIP-858's log directories).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct BrokerRegistrationRequest {
    pub broker_id: NodeId,
    /// Random per process start: tells a re-sent registration from a restarted process.
    pub incarnation_id: Uuid,
    pub endpoints: Vec<BrokerEndpointV1>,
    pub features: Vec<SupportedFeatureV1>,
    pub rack: Option<String>,
    /// The ids of the broker's online log directories.
    pub log_dirs: Vec<Uuid>,
    /// What the broker says of its previous registration (see the module doc).
    pub previous_broker_epoch: PreviousBrokerEpoch,
}

/// What a registering broker says of the registration before it (Kafka's
/// `PreviousBrokerEpoch`, BrokerRegistration v3+, KIP-966): whether it shut down cleanly.
///
/// Its first two variants archive exactly as the `Option<BrokerEpoch>` this field was (tag 0,
/// tag 1 with the epoch), so a registration sent by an older client reads the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub enum PreviousBrokerEpoch {
    /// It names none (Kafka's -1): a first start, or a start after the broker was killed.
    Unnamed,
    /// The epoch of the last registration of a broker that shut down cleanly.
    Epoch(BrokerEpoch),
    /// The request cannot say (Kafka's BrokerRegistration before v3): a clean shutdown.
    NotSent,
}

impl PreviousBrokerEpoch {
    /// Whether the broker shut down cleanly, `existing` being the registration it replaces
    /// (Kafka: `previousBrokerEpoch` equals its epoch, or the request is older than v3).
    pub fn is_clean(self, existing: Option<&BrokerRegistration>) -> bool {
        match self {
            PreviousBrokerEpoch::NotSent => true,
            PreviousBrokerEpoch::Unnamed => false,
            PreviousBrokerEpoch::Epoch(e) => existing.is_some_and(|r| r.broker_epoch == e),
        }
    }
}

/// The registration's broker epoch (Kafka's BrokerRegistration answer). The broker is fenced
/// (or, for an amendment, as it was) until its heartbeats say otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct BrokerRegistrationResponse {
    pub broker_epoch: BrokerEpoch,
}

/// A handler's result plus the lease to record (soft state, applied by the facade even though
/// the records are not committed yet: the lease starts at request arrival).
pub(crate) struct LeaseOutcome<R> {
    pub result: Result<ControllerResult<R>, ApiError>,
    pub lease: Option<Lease>,
}

impl<R> LeaseOutcome<R> {
    fn fail(e: ApiError) -> LeaseOutcome<R> {
        LeaseOutcome {
            result: Err(e),
            lease: None,
        }
    }
}

/// Kafka's registration check of features, in Kafka 4.1's order: every feature the broker lists
/// must hold its finalized level (the record's `max_level`; a feature the cluster did not
/// finalize is at level 0) in its range (UnsupportedFeatures); the broker must list
/// `metadata.version` (InvalidRegistration); a finalized feature it does not list counts as
/// supported at level 0 only (UnsupportedFeatures).
fn check_features(
    image: &MetadataImage,
    broker_id: NodeId,
    features: &[SupportedFeatureV1],
) -> Result<(), ApiError> {
    let unsupported = |feature: &str| ApiError::UnsupportedFeatures {
        broker_id,
        feature: feature.to_owned(),
    };
    let mv = crate::controller::METADATA_VERSION;
    for f in features {
        // `metadata.version` is always finalized in Kafka; before the first active controller
        // finalized it here, the level it will finalize counts.
        let level = match image.features.get(&f.name) {
            Some(x) => x.max_level,
            None if f.name == mv => feature_control::metadata_version(image),
            None => 0,
        };
        if !(f.min_level..=f.max_level).contains(&level) {
            return Err(unsupported(&f.name));
        }
    }
    if !features.iter().any(|f| f.name == mv) {
        return Err(ApiError::InvalidRegistration {
            broker_id,
            reason: "the features do not list metadata.version".into(),
        });
    }
    for (name, f) in image.features.iter() {
        let listed = features.iter().any(|s| s.name == name);
        if !listed && f.max_level != 0 {
            return Err(unsupported(name));
        }
    }
    Ok(())
}

/// Kafka's registration checks of listeners and log directories.
fn check_registration(
    image: &MetadataImage,
    req: &BrokerRegistrationRequest,
    require_log_dirs: bool,
) -> Result<(), ApiError> {
    let invalid = |reason: String| ApiError::InvalidRegistration {
        broker_id: req.broker_id,
        reason: reason.into(),
    };
    if req.endpoints.is_empty() {
        return Err(ApiError::InvalidRequest {
            reason: "a registration must list at least one listener".into(),
        });
    }
    if let Some(e) = req
        .endpoints
        .iter()
        .find(|e| SecurityProtocol::from_code(e.security_protocol).is_none())
    {
        return Err(invalid(format!(
            "listener {} has unknown security protocol {}",
            e.name, e.security_protocol
        )));
    }
    if !feature_control::directory_assignment_supported(image) {
        return Ok(());
    }
    if require_log_dirs && req.log_dirs.is_empty() {
        return Err(invalid("no log directory".into()));
    }
    for (i, dir) in req.log_dirs.iter().enumerate() {
        if is_reserved_dir(dir) {
            return Err(invalid(format!("log directory {dir} is a reserved id")));
        }
        if req.log_dirs[..i].contains(dir) {
            return Err(invalid(format!("log directory {dir} listed twice")));
        }
        if let Some(other) = image.brokers.dir_owner_other_than(req.broker_id, dir) {
            return Err(invalid(format!(
                "broker {other} already registered log directory {dir}"
            )));
        }
    }
    Ok(())
}

/// Registers (or re-registers) a broker; see the module doc. `require_log_dirs` is false for
/// the registration by heartbeat, whose request has no log directories.
pub(crate) fn register_broker(
    view: View<'_>,
    req: &BrokerRegistrationRequest,
    ctx: &RequestContext,
    offset_seen: LogOffset,
    require_log_dirs: bool,
) -> LeaseOutcome<BrokerRegistrationResponse> {
    let image = view.image;
    let existing = image.brokers.get(req.broker_id);
    let live = view
        .leases
        .is_live(req.broker_id, ctx.now_ms, view.config.session_timeout_ms);
    if let Some(reg) = existing {
        if live && reg.incarnation_id != req.incarnation_id {
            return LeaseOutcome::fail(ApiError::DuplicateBrokerRegistration {
                broker_id: req.broker_id,
            });
        }
    }
    if let Err(e) = check_registration(image, req, require_log_dirs)
        .and_then(|()| check_features(image, req.broker_id, &req.features))
    {
        return LeaseOutcome::fail(e);
    }
    let log_dirs = if feature_control::directory_assignment_supported(image) {
        req.log_dirs.clone()
    } else {
        Vec::new()
    };
    let lease = Some(Lease::new(ctx.now_ms, offset_seen));
    let mut records = Vec::new();
    let mut record = RegisterBrokerRecordV2 {
        broker_id: req.broker_id,
        incarnation_id: req.incarnation_id,
        broker_epoch: BrokerEpoch(0),
        endpoints: req.endpoints.clone(),
        features: req.features.clone(),
        rack: req.rack.clone(),
        fenced: true,
        in_controlled_shutdown: false,
        log_dirs,
    };
    match existing {
        Some(reg) if reg.incarnation_id == req.incarnation_id => {
            // The same process again (its answer was lost, or it changed a listener): its
            // epoch, fencing and controlled shutdown stay; a record only if something changed.
            record.broker_epoch = reg.broker_epoch;
            record.fenced = reg.fenced;
            record.in_controlled_shutdown = reg.in_controlled_shutdown;
            let mut amended = BrokerRegistration::from_record_v2(&record);
            amended.features.sort_by(|a, b| a.name.cmp(&b.name));
            if amended != *reg {
                records.push(MetadataRecord::RegisterBrokerV2(Box::new(record)));
            }
        }
        _ => {
            // The old registration's lease expired: the new one replaces it. If the old one
            // was still unfenced (the tick has not fenced it yet), fence it first in the same
            // batch so no partition keeps a leader on the replaced registration. After an
            // unclean shutdown (eligible leader replicas enabled) the broker also leaves every
            // ISR and ELR, fenced or not.
            let unclean = feature_control::elr_enabled(image)
                && !req.previous_broker_epoch.is_clean(existing);
            let unfenced = existing.filter(|r| !r.fenced);
            if unclean || unfenced.is_some() {
                let max = view.config.records_per_batch_max - 2;
                let removal = if unclean {
                    Removal::UncleanShutdown
                } else {
                    Removal::Leave
                };
                if !remove_brokers(view, &[req.broker_id], removal, max, &mut records) {
                    return LeaseOutcome::fail(ApiError::TooManyRecords {
                        records: max + 2,
                        max: view.config.records_per_batch_max,
                    });
                }
            }
            if let Some(reg) = unfenced {
                records.push(fence_record(reg));
            }
            record.broker_epoch = BrokerEpoch(ctx.next_offset.0 + records.len() as u64);
            records.push(MetadataRecord::RegisterBrokerV2(Box::new(record)));
        }
    }
    let broker_epoch = match records.last() {
        Some(MetadataRecord::RegisterBrokerV2(r)) => r.broker_epoch,
        _ => {
            existing
                .expect("no record means an unchanged registration")
                .broker_epoch
        }
    };
    LeaseOutcome {
        result: Ok(ControllerResult::new(
            records,
            BrokerRegistrationResponse { broker_epoch },
        )),
        lease,
    }
}

pub(crate) fn broker_heartbeat(
    view: View<'_>,
    req: &BrokerHeartbeatRequest,
    ctx: &RequestContext,
) -> LeaseOutcome<BrokerHeartbeatResponse> {
    let image = view.image;
    let timeout_ms = view.config.session_timeout_ms;
    let Some(epoch) = req.broker_epoch else {
        return register_by_heartbeat(view, req, ctx);
    };
    let Some(reg) = image.brokers.get(req.broker_id) else {
        return LeaseOutcome::fail(ApiError::BrokerIdNotRegistered {
            broker_id: req.broker_id,
        });
    };
    if reg.broker_epoch != epoch {
        return LeaseOutcome::fail(ApiError::StaleBrokerEpoch {
            broker_id: req.broker_id,
            current: reg.broker_epoch,
            request: epoch,
        });
    }
    let previous = view.leases.get(req.broker_id).copied();
    let seen = previous.map_or(LogOffset(0), |l| l.offset_seen);
    if req.next_metadata_offset < seen {
        return LeaseOutcome::fail(ApiError::StaleHeartbeat {
            broker_id: req.broker_id,
            seen,
            request: req.next_metadata_offset,
        });
    }
    let mut lease = Lease {
        last_contact_ms: ctx.now_ms,
        offset_seen: req.next_metadata_offset,
        controlled_shutdown_end: previous.and_then(|l| l.controlled_shutdown_end),
    };
    // Unfencing needs the broker past its own registration record (as Kafka does), not at the
    // high watermark: under steady writes the high watermark moves on while a heartbeat is on
    // its way, and a broker that must reach it may never be seen caught up.
    let past_registration = req.next_metadata_offset.0 > epoch.0;
    let max = view.config.records_per_batch_max;
    let mut records = Vec::new();
    // Fences the broker now (moving its ISR memberships and leaderships in the same batch);
    // false when they do not all fit.
    let fence = |records: &mut Vec<MetadataRecord>| {
        if move_off_brokers(view, &[req.broker_id], max - 1, records) {
            records.push(fence_record(reg));
            true
        } else {
            false
        }
    };
    let target_state = if reg.fenced {
        if req.want_shutdown {
            TargetState::Shutdown
        } else if past_registration && !req.want_fence {
            records.push(registration_change(reg, FencingChange::Unfence, false));
            // Leaderless partitions get a leader now, this broker counting as unfenced; what
            // does not fit in the batch is elected by the next tick (`Controller::tick`).
            elect_leaderless(view, Some(req.broker_id), max, &mut records);
            TargetState::Active
        } else {
            TargetState::Fenced
        }
    } else if reg.in_controlled_shutdown {
        let leads = leadership_count(image, req.broker_id) > 0;
        match lease.controlled_shutdown_end {
            _ if leads => {
                move_off_brokers(view, &[req.broker_id], max, &mut records);
                TargetState::ControlledShutdown
            }
            Some(end)
                if view
                    .leases
                    .lowest_active_offset(image)
                    .is_some_and(|lowest| lowest < end) =>
            {
                TargetState::ControlledShutdown
            }
            None if !req.want_shutdown => TargetState::ControlledShutdown,
            // It leads nothing and every active broker has seen that (or this controller
            // never saw the shutdown start and the broker still wants it).
            _ if fence(&mut records) => TargetState::Shutdown,
            _ => TargetState::ControlledShutdown,
        }
    } else if req.want_fence {
        match (fence(&mut records), req.want_shutdown) {
            (true, true) => TargetState::Shutdown,
            (true, false) => TargetState::Fenced,
            (false, _) => TargetState::Active,
        }
    } else if req.want_shutdown {
        if leadership_count(image, req.broker_id) > 0 {
            records.push(registration_change(reg, FencingChange::Unchanged, true));
            move_off_brokers(view, &[req.broker_id], max, &mut records);
            TargetState::ControlledShutdown
        } else if fence(&mut records) {
            TargetState::Shutdown
        } else {
            TargetState::Active
        }
    } else {
        TargetState::Active
    };
    match target_state {
        // Every active broker must replay this batch's changes (or, with none, what came
        // before) before this one goes.
        TargetState::ControlledShutdown
            if lease.controlled_shutdown_end.is_none() || !records.is_empty() =>
        {
            let end = ctx.next_offset.add(records.len() as u64);
            lease.controlled_shutdown_end = lease.controlled_shutdown_end.max(Some(end));
        }
        TargetState::Fenced | TargetState::Shutdown => lease.controlled_shutdown_end = None,
        _ => {}
    }
    let response = BrokerHeartbeatResponse {
        broker_epoch: epoch,
        target_state,
        lease_duration_ms: timeout_ms,
        is_caught_up: past_registration,
    };
    LeaseOutcome {
        result: Ok(ControllerResult::new(records, response)),
        lease: Some(lease),
    }
}

/// A registration sent as a heartbeat without an epoch (see [`BrokerHeartbeatRequest`]),
/// answered as a heartbeat: the epoch, FENCED (or the amended registration's state).
fn register_by_heartbeat(
    view: View<'_>,
    req: &BrokerHeartbeatRequest,
    ctx: &RequestContext,
) -> LeaseOutcome<BrokerHeartbeatResponse> {
    let as_registration = BrokerRegistrationRequest {
        broker_id: req.broker_id,
        incarnation_id: req.incarnation_id,
        endpoints: req
            .listeners
            .iter()
            .map(BrokerEndpointV1::plaintext)
            .collect(),
        features: req.features.clone(),
        rack: req.rack.clone(),
        log_dirs: Vec::new(),
        previous_broker_epoch: PreviousBrokerEpoch::NotSent,
    };
    let LeaseOutcome { result, lease } =
        register_broker(view, &as_registration, ctx, req.next_metadata_offset, false);
    let result = result.map(|ControllerResult { records, response }| {
        let fenced = view
            .image
            .brokers
            .get(req.broker_id)
            .filter(|b| b.broker_epoch == response.broker_epoch)
            .is_none_or(|b| b.fenced);
        let response = BrokerHeartbeatResponse {
            broker_epoch: response.broker_epoch,
            target_state: if fenced {
                TargetState::Fenced
            } else {
                TargetState::Active
            },
            lease_duration_ms: view.config.session_timeout_ms,
            is_caught_up: false,
        };
        ControllerResult::new(records, response)
    });
    LeaseOutcome { result, lease }
}

fn registration_change(
    reg: &BrokerRegistration,
    fenced: FencingChange,
    in_controlled_shutdown: bool,
) -> MetadataRecord {
    MetadataRecord::BrokerRegistrationChangeV2(BrokerRegistrationChangeRecordV2 {
        broker_id: reg.broker_id,
        broker_epoch: reg.broker_epoch,
        fenced,
        in_controlled_shutdown,
    })
}

fn fence_record(reg: &BrokerRegistration) -> MetadataRecord {
    registration_change(reg, FencingChange::Fence, false)
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
    if move_off_brokers(view, &ids, max, out) {
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

/// Removes a fenced broker's registration (a decommission; see the module doc).
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
    let mut records = Vec::new();
    let max = view.config.records_per_batch_max - 1;
    if !remove_brokers(
        view,
        &[req.broker_id],
        Removal::Unregister,
        max,
        &mut records,
    ) {
        return Err(ApiError::TooManyRecords {
            records: max + 1,
            max: view.config.records_per_batch_max,
        });
    }
    records.push(MetadataRecord::UnregisterBroker(UnregisterBrokerRecordV1 {
        broker_id: reg.broker_id,
        broker_epoch: reg.broker_epoch,
    }));
    Ok(ControllerResult::new(records, ()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::test_harness::{dir, Harness};
    use crate::ids::{LOST_DIR, MIGRATING_DIR, UNASSIGNED_DIR};
    use crate::records::FeatureLevelRecordV1;

    fn register_err(h: &Harness, req: &BrokerRegistrationRequest) -> ApiError {
        let mut c = h.c.clone();
        c.register_broker(req, &h.ctx()).unwrap_err()
    }

    /// A registration must name log directories (from metadata.version 3.7-IV2), none of
    /// Kafka's 100 reserved ids, none twice, none another broker registered; each refusal is
    /// InvalidRegistration and writes nothing.
    #[test]
    fn log_directories_are_checked_as_kafka_checks_them() {
        let mut h = Harness::new();
        h.register(1, vec![dir(1)]);
        let invalid = |e: ApiError| matches!(e, ApiError::InvalidRegistration { .. });
        for dirs in [
            vec![],
            vec![MIGRATING_DIR],
            vec![UNASSIGNED_DIR],
            vec![LOST_DIR],
            vec![Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 99])],
            vec![dir(2), dir(2)],
            vec![dir(2), dir(1)],
        ] {
            let req = h.registration(2, dirs.clone());
            assert!(invalid(register_err(&h, &req)), "{dirs:?}");
        }
        // The 100th id is the first one a broker may use.
        let req = h.registration(
            2,
            vec![Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 100])],
        );
        let r = h.c.clone().register_broker(&req, &h.ctx()).unwrap();
        assert_eq!(r.records.len(), 1);
        // A broker re-registering its own directories is fine.
        let mut again = h.registration(1, vec![dir(1)]);
        again.incarnation_id = Uuid([1; 16]);
        assert!(h.c.clone().register_broker(&again, &h.ctx()).is_ok());
        // An unknown security protocol is refused too.
        let mut req = h.registration(3, vec![dir(3)]);
        req.endpoints[0].security_protocol = 7;
        assert!(invalid(register_err(&h, &req)));
    }

    /// Below metadata.version 3.7-IV2 Kafka neither requires nor records log directories; new
    /// replicas then get the MIGRATING directory.
    #[test]
    fn below_directory_assignment_no_directories_are_recorded() {
        let mut h = Harness::at_metadata_version(16);
        h.register(1, vec![]);
        h.register(2, vec![dir(2)]);
        assert!(h
            .c
            .image()
            .brokers
            .get(NodeId(2))
            .unwrap()
            .log_dirs
            .is_empty());
        h.heartbeat(1);
        h.heartbeat(2);
        let t = h.topic("t", &[&[1, 2]]);
        assert_eq!(&h.partition(t, 0).directories[..], &[MIGRATING_DIR; 2]);
    }

    /// Kafka's feature check: every finalized level within the broker's range; a finalized
    /// feature the broker does not list counts as level 0 only; a listed feature the cluster
    /// did not finalize is at level 0; a broker must list metadata.version (Kafka 4.1).
    #[test]
    fn features_are_checked_against_the_finalized_levels() {
        let mut h = Harness::new();
        let unsupported = |e: ApiError| matches!(e, ApiError::UnsupportedFeatures { .. });
        let mut req = h.registration(1, vec![dir(1)]);
        req.features[0].max_level = 26;
        assert!(unsupported(register_err(&h, &req)));
        req.features.clear();
        assert!(matches!(
            register_err(&h, &req),
            ApiError::InvalidRegistration { .. }
        ));
        let listed = |name: &str, min_level, max_level| SupportedFeatureV1 {
            name: name.into(),
            min_level,
            max_level,
        };
        let mut req = h.registration(1, vec![dir(1)]);
        req.features.push(listed("group.version", 1, 1));
        assert!(unsupported(register_err(&h, &req)));
        let mut req = h.registration(1, vec![dir(1)]);
        req.features.push(listed("group.version", 0, 1));
        assert!(h.c.clone().register_broker(&req, &h.ctx()).is_ok());
        // A finalized feature the broker does not list.
        h.commit(&[MetadataRecord::FeatureLevel(FeatureLevelRecordV1 {
            name: "group.version".into(),
            min_level: 1,
            max_level: 1,
        })]);
        let req = h.registration(1, vec![dir(1)]);
        assert!(unsupported(register_err(&h, &req)));
    }

    /// The same incarnation registering again keeps its epoch: with nothing changed no record
    /// (whatever the lease), with a change one RegisterBrokerV2 of the same epoch that keeps
    /// its fencing; another incarnation is refused while the lease is live and replaces the
    /// registration (fencing the old one first) once it expired.
    #[test]
    fn reregistrations_follow_the_incarnation() {
        let mut h = Harness::new();
        h.brokers(&[1, 2]);
        let epoch = h.c.image().brokers.get(NodeId(1)).unwrap().broker_epoch;
        let t = h.topic("t", &[&[1, 2]]);
        let same = h.registration(1, vec![dir(1)]);
        let r = h.c.clone().register_broker(&same, &h.ctx()).unwrap();
        assert!(r.records.is_empty());
        assert_eq!(r.response.broker_epoch, epoch);
        let mut moved = same.clone();
        moved.endpoints[0].port = 9999;
        let r = h.c.clone().register_broker(&moved, &h.ctx()).unwrap();
        match &r.records[..] {
            [MetadataRecord::RegisterBrokerV2(rec)] => {
                assert_eq!(rec.broker_epoch, epoch);
                assert!(!rec.fenced && !rec.in_controlled_shutdown);
                assert_eq!(rec.endpoints[0].port, 9999);
            }
            other => panic!("{other:?}"),
        }
        let mut other = same.clone();
        other.incarnation_id = Uuid([0x77; 16]);
        assert_eq!(
            register_err(&h, &other),
            ApiError::DuplicateBrokerRegistration {
                broker_id: NodeId(1)
            }
        );
        // Broker 2 keeps heartbeating; broker 1's lease expires.
        h.now_ms = 9_500;
        h.heartbeat(2);
        let r = h.c.clone().register_broker(&other, &h.ctx()).unwrap();
        let kinds: Vec<&str> = r.records.iter().map(MetadataRecord::kind).collect();
        assert_eq!(
            kinds,
            [
                "PartitionChange",
                "BrokerRegistrationChangeV2",
                "RegisterBrokerV2"
            ]
        );
        let next = h.ctx().next_offset;
        let new_epoch = h.run(Ok(r)).broker_epoch;
        assert_eq!(new_epoch, BrokerEpoch(next.0 + 2));
        let b = h.c.image().brokers.get(NodeId(1)).unwrap();
        assert!(b.fenced && b.broker_epoch == new_epoch);
        assert_eq!(h.partition(t, 0).leader, Some(NodeId(2)));
    }

    /// A heartbeat of the registration's epoch is accepted after the lease expired and the
    /// broker was fenced: it renews the lease and unfences the broker (Kafka's brokers keep
    /// their epoch).
    #[test]
    fn an_expired_lease_is_renewed_by_the_next_heartbeat() {
        let mut h = Harness::new();
        h.brokers(&[1]);
        h.now_ms = 10_000;
        let ctx = h.ctx();
        let tick = h.c.tick(&ctx);
        assert_eq!(h.run(tick).fenced, vec![NodeId(1)]);
        assert!(h.c.image().brokers.get(NodeId(1)).unwrap().fenced);
        let r = h.heartbeat(1);
        assert_eq!(r.target_state, TargetState::Active);
        assert!(!r.is_fenced() && !r.should_shut_down() && r.is_caught_up);
        assert!(!h.c.image().brokers.get(NodeId(1)).unwrap().fenced);
    }

    /// Controlled shutdown as Kafka's heartbeat manager runs it: a broker that leads
    /// partitions enters it (its leaderships and ISR memberships move); it may go only once it
    /// leads nothing and every active broker has replayed those records; it is then fenced, its
    /// controlled-shutdown flag kept. A broker that leads nothing is fenced at once.
    #[test]
    fn controlled_shutdown_ends_fenced_once_active_brokers_caught_up() {
        let mut h = Harness::new();
        h.brokers(&[1, 2, 3]);
        let t = h.topic("t", &[&[1, 2], &[2, 3]]);
        let mut req = h.heartbeat_request(1, h.c.committed_end());
        req.want_shutdown = true;
        let r = h.send_heartbeat(&req);
        assert_eq!(r.target_state, TargetState::ControlledShutdown);
        assert!(!r.is_fenced() && !r.should_shut_down());
        let p = h.partition(t, 0);
        assert_eq!((p.leader, &p.isr[..]), (Some(NodeId(2)), &[NodeId(2)][..]));
        let b = h.c.image().brokers.get(NodeId(1)).unwrap();
        assert!(b.in_controlled_shutdown && !b.fenced);
        let end = h.c.committed_end();
        // Brokers 2 and 3 have not reported the moves yet.
        req.next_metadata_offset = end;
        assert_eq!(
            h.send_heartbeat(&req).target_state,
            TargetState::ControlledShutdown
        );
        h.heartbeat(2);
        assert_eq!(
            h.send_heartbeat(&req).target_state,
            TargetState::ControlledShutdown
        );
        h.heartbeat(3);
        let r = h.send_heartbeat(&req);
        assert_eq!(r.target_state, TargetState::Shutdown);
        assert!(r.is_fenced() && r.should_shut_down());
        let b = h.c.image().brokers.get(NodeId(1)).unwrap();
        assert!(b.fenced && b.in_controlled_shutdown, "{b:?}");
        // Fenced, it is told to shut down at once, with nothing written.
        let ctx = h.ctx();
        req.next_metadata_offset = h.c.committed_end();
        let r = h.c.broker_heartbeat(&req, &ctx).unwrap();
        assert!(r.records.is_empty());
        assert_eq!(r.response.target_state, TargetState::Shutdown);
        // Broker 3 leads nothing (t/1's leader is broker 2): asking to shut down fences it at
        // once, out of t/1's ISR.
        let mut req3 = h.heartbeat_request(3, h.c.committed_end());
        req3.want_shutdown = true;
        let r = h.send_heartbeat(&req3);
        assert_eq!(r.target_state, TargetState::Shutdown);
        assert_eq!(&h.partition(t, 1).isr[..], &[NodeId(2)]);
        let b = h.c.image().brokers.get(NodeId(3)).unwrap();
        assert!(b.fenced && !b.in_controlled_shutdown);
    }

    /// A new active controller does not know when a controlled shutdown started: a broker in
    /// controlled shutdown that leads nothing and still asks to go is let go (fenced) at once,
    /// as Kafka's new controller sees it active and wanting to shut down.
    #[test]
    fn after_a_failover_a_shutting_down_broker_that_leads_nothing_goes() {
        let mut h = Harness::new();
        h.brokers(&[1, 2]);
        h.topic("t", &[&[1, 2]]);
        let mut req = h.heartbeat_request(1, h.c.committed_end());
        req.want_shutdown = true;
        assert_eq!(
            h.send_heartbeat(&req).target_state,
            TargetState::ControlledShutdown
        );
        h.c.on_resign();
        h.c.on_become_active(h.now_ms);
        req.next_metadata_offset = h.c.committed_end();
        assert_eq!(h.send_heartbeat(&req).target_state, TargetState::Shutdown);
        assert!(h.c.image().brokers.get(NodeId(1)).unwrap().fenced);
    }

    /// Asking to be fenced while active fences the broker (and, with want_shutdown too, lets
    /// it go); in controlled shutdown the wish changes nothing, as in Kafka.
    #[test]
    fn want_fence_fences_an_active_broker() {
        let mut h = Harness::new();
        h.brokers(&[1, 2]);
        let mut req = h.heartbeat_request(1, h.c.committed_end());
        req.want_fence = true;
        let r = h.send_heartbeat(&req);
        assert_eq!(r.target_state, TargetState::Fenced);
        assert!(h.c.image().brokers.get(NodeId(1)).unwrap().fenced);
        let mut req = h.heartbeat_request(2, h.c.committed_end());
        req.want_fence = true;
        req.want_shutdown = true;
        assert_eq!(h.send_heartbeat(&req).target_state, TargetState::Shutdown);
    }
}
