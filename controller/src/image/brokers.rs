//! Registered brokers.
//!
//! Registration states (KIP-631) and the records that move between them:
//!
//! | from                  | record                                                  | to                             |
//! |-----------------------|---------------------------------------------------------|--------------------------------|
//! | unregistered          | RegisterBroker(V2)                                      | registered, fenced             |
//! | registered (any)      | RegisterBroker(V2) (new epoch)                          | registered, fenced             |
//! | registered (any)      | RegisterBrokerV2 (same epoch: an amendment)             | its own `fenced`, `in_controlled_shutdown` |
//! | registered, fenced    | UnfenceBroker, BrokerRegistrationChangeV2{Unfence}      | registered, active             |
//! | registered, active    | FenceBroker                                             | registered, fenced, not in controlled shutdown |
//! | registered, active    | BrokerRegistrationChangeV2{Fence}                       | registered, fenced (controlled shutdown kept) |
//! | registered, active    | BrokerRegistrationChange{shutdown: true}, BrokerRegistrationChangeV2{shutdown: true} | active, in controlled shutdown |
//! | registered (any)      | UnregisterBroker                                        | unregistered                   |
//!
//! Fence, unfence, change and unregister name the broker epoch they apply to; a record for another
//! epoch is a replay error (the controller never writes one). The V2 records replay as Kafka's
//! brokers replay RegisterBrokerRecord and BrokerRegistrationChangeRecord; the V1 records keep
//! their own meaning, so an old log replays unchanged (a V1 registration's listeners become
//! PLAINTEXT endpoints, its log directories none).

use std::sync::Arc;

use corum_types::{BrokerEpoch, LogOffset, NodeId, Uuid};
use imbl::OrdMap;

use crate::error::ReplayError;
use crate::ids::{LOST_DIR, MIGRATING_DIR, UNASSIGNED_DIR};
use crate::records::{
    ArchivedRegisterBrokerRecordV1, ArchivedRegisterBrokerRecordV2, ArchivedSupportedFeatureV1,
    BrokerEndpointV1, ListenerV1, RegisterBrokerRecordV1, RegisterBrokerRecordV2,
    SupportedFeatureV1,
};

/// A broker's registration as the image holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub broker_id: NodeId,
    pub incarnation_id: Uuid,
    pub broker_epoch: BrokerEpoch,
    pub endpoints: Vec<BrokerEndpointV1>,
    /// Sorted by name.
    pub features: Vec<SupportedFeatureV1>,
    pub rack: Option<Arc<str>>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
    /// Online log directories, as registered (Kafka keeps them as a set).
    pub log_dirs: Vec<Uuid>,
}

fn features_from(
    a: &rkyv::vec::ArchivedVec<ArchivedSupportedFeatureV1>,
) -> Vec<SupportedFeatureV1> {
    a.iter()
        .map(|f| SupportedFeatureV1 {
            name: f.name.as_str().to_owned(),
            min_level: f.min_level.to_native(),
            max_level: f.max_level.to_native(),
        })
        .collect()
}

impl BrokerRegistration {
    /// The registration a RegisterBroker (V1) record makes (fenced; features not yet sorted).
    pub(crate) fn from_archived(r: &ArchivedRegisterBrokerRecordV1) -> BrokerRegistration {
        BrokerRegistration {
            broker_id: NodeId::from(&r.broker_id),
            incarnation_id: Uuid::from(&r.incarnation_id),
            broker_epoch: BrokerEpoch::from(&r.broker_epoch),
            endpoints: r
                .listeners
                .iter()
                .map(|l| {
                    BrokerEndpointV1::plaintext(&ListenerV1 {
                        name: l.name.as_str().to_owned(),
                        host: l.host.as_str().to_owned(),
                        port: l.port.to_native(),
                    })
                })
                .collect(),
            features: features_from(&r.features),
            rack: r.rack.as_ref().map(|s| Arc::from(s.as_str())),
            fenced: true,
            in_controlled_shutdown: false,
            log_dirs: Vec::new(),
        }
    }

    /// [`BrokerRegistration::from_archived`] of an owned record.
    pub(crate) fn from_record(r: &RegisterBrokerRecordV1) -> BrokerRegistration {
        BrokerRegistration {
            broker_id: r.broker_id,
            incarnation_id: r.incarnation_id,
            broker_epoch: r.broker_epoch,
            endpoints: r
                .listeners
                .iter()
                .map(BrokerEndpointV1::plaintext)
                .collect(),
            features: r.features.clone(),
            rack: r.rack.as_deref().map(Arc::from),
            fenced: true,
            in_controlled_shutdown: false,
            log_dirs: Vec::new(),
        }
    }

    /// The registration a RegisterBrokerV2 record makes (features not yet sorted).
    pub(crate) fn from_archived_v2(r: &ArchivedRegisterBrokerRecordV2) -> BrokerRegistration {
        BrokerRegistration {
            broker_id: NodeId::from(&r.broker_id),
            incarnation_id: Uuid::from(&r.incarnation_id),
            broker_epoch: BrokerEpoch::from(&r.broker_epoch),
            endpoints: r
                .endpoints
                .iter()
                .map(|e| BrokerEndpointV1 {
                    name: e.name.as_str().to_owned(),
                    host: e.host.as_str().to_owned(),
                    port: e.port.to_native(),
                    security_protocol: e.security_protocol.to_native(),
                })
                .collect(),
            features: features_from(&r.features),
            rack: r.rack.as_ref().map(|s| Arc::from(s.as_str())),
            fenced: r.fenced,
            in_controlled_shutdown: r.in_controlled_shutdown,
            log_dirs: r.log_dirs.iter().map(Uuid::from).collect(),
        }
    }

    /// [`BrokerRegistration::from_archived_v2`] of an owned record.
    pub(crate) fn from_record_v2(r: &RegisterBrokerRecordV2) -> BrokerRegistration {
        BrokerRegistration {
            broker_id: r.broker_id,
            incarnation_id: r.incarnation_id,
            broker_epoch: r.broker_epoch,
            endpoints: r.endpoints.clone(),
            features: r.features.clone(),
            rack: r.rack.as_deref().map(Arc::from),
            fenced: r.fenced,
            in_controlled_shutdown: r.in_controlled_shutdown,
            log_dirs: r.log_dirs.clone(),
        }
    }

    /// The record that registers exactly this (a snapshot's).
    pub fn to_record(&self) -> RegisterBrokerRecordV2 {
        RegisterBrokerRecordV2 {
            broker_id: self.broker_id,
            incarnation_id: self.incarnation_id,
            broker_epoch: self.broker_epoch,
            endpoints: self.endpoints.clone(),
            features: self.features.clone(),
            rack: self.rack.as_deref().map(str::to_owned),
            fenced: self.fenced,
            in_controlled_shutdown: self.in_controlled_shutdown,
            log_dirs: self.log_dirs.clone(),
        }
    }

    /// Unfenced and not shutting down: may lead partitions and join ISRs.
    #[inline]
    pub fn is_eligible(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }

    /// The level range this broker supports for `feature`, if any.
    pub fn supported(&self, feature: &str) -> Option<(u16, u16)> {
        self.features
            .binary_search_by(|f| f.name.as_str().cmp(feature))
            .ok()
            .map(|i| (self.features[i].min_level, self.features[i].max_level))
    }

    /// Whether a replica of this broker on directory `dir` is online (Kafka's
    /// `DirectoryId.isOnline`): an unassigned or migrating replica is; a lost one is not; with
    /// no directory registered (a broker below `metadata.version` 3.7-IV2, or one that named
    /// none) every directory is; else `dir` must be registered.
    pub fn has_online_dir(&self, dir: &Uuid) -> bool {
        if *dir == UNASSIGNED_DIR || *dir == MIGRATING_DIR {
            return true;
        }
        if *dir == LOST_DIR {
            return false;
        }
        self.log_dirs.is_empty() || self.log_dirs.contains(dir)
    }

    /// The directory a new replica on this broker gets (Kafka's `defaultDir`): the broker's
    /// only directory when it registered exactly one, MIGRATING when it registered none, else
    /// UNASSIGNED (the broker then assigns it with AssignReplicasToDirs).
    pub fn default_dir(&self) -> Uuid {
        match self.log_dirs.as_slice() {
            [] => MIGRATING_DIR,
            [only] => *only,
            _ => UNASSIGNED_DIR,
        }
    }
}

/// Every registered broker, by id. Cloning is O(1) (a persistent map of shared registrations).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokersImage {
    by_id: OrdMap<NodeId, Arc<BrokerRegistration>>,
}

impl BrokersImage {
    pub fn get(&self, broker_id: NodeId) -> Option<&BrokerRegistration> {
        self.by_id.get(&broker_id).map(|b| &**b)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Registrations in broker id order.
    pub fn iter(&self) -> impl Iterator<Item = &BrokerRegistration> + '_ {
        self.by_id.values().map(|b| &**b)
    }

    /// True if `broker_id` is registered, unfenced and not in controlled shutdown.
    #[inline]
    pub fn is_eligible(&self, broker_id: NodeId) -> bool {
        self.get(broker_id)
            .is_some_and(BrokerRegistration::is_eligible)
    }

    /// The directory a new replica on `broker_id` gets ([`BrokerRegistration::default_dir`]);
    /// UNASSIGNED for a broker that is not registered (as Kafka's controller answers).
    pub fn default_dir(&self, broker_id: NodeId) -> Uuid {
        self.get(broker_id)
            .map_or(UNASSIGNED_DIR, BrokerRegistration::default_dir)
    }

    /// The id of a broker other than `broker_id` that registered log directory `dir`.
    pub fn dir_owner_other_than(&self, broker_id: NodeId, dir: &Uuid) -> Option<NodeId> {
        self.iter()
            .find(|b| b.broker_id != broker_id && b.log_dirs.contains(dir))
            .map(|b| b.broker_id)
    }

    /// True if `broker_id` is registered and unfenced.
    #[inline]
    pub fn is_unfenced(&self, broker_id: NodeId) -> bool {
        self.get(broker_id).is_some_and(|b| !b.fenced)
    }

    /// Registers `reg` (made by one of [`BrokerRegistration`]'s `from_*`), replacing any
    /// earlier registration of its broker.
    pub(crate) fn replay_register(&mut self, _offset: LogOffset, mut reg: BrokerRegistration) {
        reg.features.sort_by(|a, b| a.name.cmp(&b.name));
        self.by_id.insert(reg.broker_id, Arc::new(reg));
    }

    /// Applies `change` to the registration of `broker_id` at `broker_epoch`.
    pub(crate) fn replay_change(
        &mut self,
        offset: LogOffset,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
        change: impl FnOnce(&mut BrokerRegistration),
    ) -> Result<(), ReplayError> {
        let reg = self
            .by_id
            .get_mut(&broker_id)
            .ok_or(ReplayError::UnknownBroker { offset, broker_id })?;
        if reg.broker_epoch != broker_epoch {
            return Err(ReplayError::BrokerEpochMismatch {
                offset,
                broker_id,
                current: reg.broker_epoch,
                record: broker_epoch,
            });
        }
        change(Arc::make_mut(reg));
        Ok(())
    }

    pub(crate) fn replay_unregister(
        &mut self,
        offset: LogOffset,
        broker_id: NodeId,
        broker_epoch: BrokerEpoch,
    ) -> Result<(), ReplayError> {
        self.replay_change(offset, broker_id, broker_epoch, |_| {})?;
        self.by_id.remove(&broker_id);
        Ok(())
    }
}
