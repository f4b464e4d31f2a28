//! Registered brokers.
//!
//! Registration states (KIP-631) and the records that move between them:
//!
//! | from                  | record                                   | to                          |
//! |-----------------------|------------------------------------------|-----------------------------|
//! | unregistered          | RegisterBroker                           | registered, fenced          |
//! | registered (any)      | RegisterBroker (new epoch)               | registered, fenced          |
//! | registered, fenced    | UnfenceBroker                            | registered, active          |
//! | registered, active    | FenceBroker                              | registered, fenced          |
//! | registered, active    | BrokerRegistrationChange{shutdown: true} | active, in controlled shutdown |
//! | registered (any)      | UnregisterBroker                         | unregistered                |
//!
//! Fence, unfence, change and unregister name the broker epoch they apply to; a record for another
//! epoch is a replay error (the controller never writes one).

use std::sync::Arc;

use corum_types::{BrokerEpoch, LogOffset, NodeId, Uuid};
use imbl::OrdMap;

use crate::error::ReplayError;
use crate::records::{
    ArchivedRegisterBrokerRecordV1, ListenerV1, RegisterBrokerRecordV1, SupportedFeatureV1,
};

/// A broker's registration as the image holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub broker_id: NodeId,
    pub incarnation_id: Uuid,
    pub broker_epoch: BrokerEpoch,
    pub listeners: Vec<ListenerV1>,
    /// Sorted by name.
    pub features: Vec<SupportedFeatureV1>,
    pub rack: Option<Arc<str>>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

impl BrokerRegistration {
    /// The registration a RegisterBroker record makes (fenced; features not yet sorted).
    pub(crate) fn from_archived(r: &ArchivedRegisterBrokerRecordV1) -> BrokerRegistration {
        BrokerRegistration {
            broker_id: NodeId::from(&r.broker_id),
            incarnation_id: Uuid::from(&r.incarnation_id),
            broker_epoch: BrokerEpoch::from(&r.broker_epoch),
            listeners: r
                .listeners
                .iter()
                .map(|l| ListenerV1 {
                    name: l.name.as_str().to_owned(),
                    host: l.host.as_str().to_owned(),
                    port: l.port.to_native(),
                })
                .collect(),
            features: r
                .features
                .iter()
                .map(|f| SupportedFeatureV1 {
                    name: f.name.as_str().to_owned(),
                    min_level: f.min_level.to_native(),
                    max_level: f.max_level.to_native(),
                })
                .collect(),
            rack: r.rack.as_ref().map(|s| Arc::from(s.as_str())),
            fenced: true,
            in_controlled_shutdown: false,
        }
    }

    /// [`BrokerRegistration::from_archived`] of an owned record.
    pub(crate) fn from_record(r: &RegisterBrokerRecordV1) -> BrokerRegistration {
        BrokerRegistration {
            broker_id: r.broker_id,
            incarnation_id: r.incarnation_id,
            broker_epoch: r.broker_epoch,
            listeners: r.listeners.clone(),
            features: r.features.clone(),
            rack: r.rack.as_deref().map(Arc::from),
            fenced: true,
            in_controlled_shutdown: false,
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

    /// True if `broker_id` is registered and unfenced.
    #[inline]
    pub fn is_unfenced(&self, broker_id: NodeId) -> bool {
        self.get(broker_id).is_some_and(|b| !b.fenced)
    }

    /// Registers `reg` (made by [`BrokerRegistration::from_archived`] or `from_record`),
    /// replacing any earlier registration of its broker.
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
