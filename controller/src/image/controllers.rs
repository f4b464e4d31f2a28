//! Registered controllers (KIP-919): where each controller listens and the feature levels it
//! supports, as its latest RegisterController record said.
//!
//! | from           | record                          | to                                     |
//! |----------------|---------------------------------|----------------------------------------|
//! | unregistered   | RegisterController              | registered                             |
//! | registered     | RegisterController (any fields) | registered, the new record's fields    |
//!
//! Nothing removes a registration: a controller that leaves the quorum keeps its last one (as
//! in Kafka, where controller registrations are not fenced or removed either). Replay checks
//! nothing about the fields (a log another controller wrote is taken as it is); the handler
//! ([`crate::control::cluster_control`]) validates what the active controller writes.

use std::sync::Arc;

use corum_types::{NodeId, Uuid};
use imbl::OrdMap;

use crate::records::{
    ArchivedRegisterControllerRecordV1, ControllerEndpointV1, RegisterControllerRecordV1,
    SecurityProtocol, SupportedFeatureV1,
};

/// A controller's registration as the image holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerRegistration {
    pub controller_id: NodeId,
    pub incarnation_id: Uuid,
    /// Sorted by name.
    pub end_points: Vec<ControllerEndpointV1>,
    /// Sorted by name.
    pub features: Vec<SupportedFeatureV1>,
}

impl ControllerRegistration {
    /// The registration a RegisterController record makes (lists not yet sorted).
    pub(crate) fn from_archived(r: &ArchivedRegisterControllerRecordV1) -> ControllerRegistration {
        ControllerRegistration {
            controller_id: NodeId::from(&r.controller_id),
            incarnation_id: Uuid::from(&r.incarnation_id),
            end_points: r
                .end_points
                .iter()
                .map(|e| ControllerEndpointV1 {
                    name: e.name.as_str().to_owned(),
                    host: e.host.as_str().to_owned(),
                    port: e.port.to_native(),
                    security_protocol: e.security_protocol.to_native(),
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
        }
    }

    /// [`ControllerRegistration::from_archived`] of an owned record.
    pub(crate) fn from_record(r: &RegisterControllerRecordV1) -> ControllerRegistration {
        ControllerRegistration {
            controller_id: r.controller_id,
            incarnation_id: r.incarnation_id,
            end_points: r.end_points.clone(),
            features: r.features.clone(),
        }
    }

    /// The record that registers exactly this (for snapshots).
    pub(crate) fn to_record(&self) -> RegisterControllerRecordV1 {
        RegisterControllerRecordV1 {
            controller_id: self.controller_id,
            incarnation_id: self.incarnation_id,
            end_points: self.end_points.clone(),
            features: self.features.clone(),
        }
    }

    /// The level range this controller supports for `feature`, if any.
    pub fn supported(&self, feature: &str) -> Option<(u16, u16)> {
        self.features
            .binary_search_by(|f| f.name.as_str().cmp(feature))
            .ok()
            .map(|i| (self.features[i].min_level, self.features[i].max_level))
    }

    /// The endpoint of listener `name`, if the controller registered one.
    pub fn end_point(&self, name: &str) -> Option<&ControllerEndpointV1> {
        self.end_points
            .binary_search_by(|e| e.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.end_points[i])
    }

    /// Why the active controller would not write this registration, if it would not: a
    /// registration names at least one endpoint; every endpoint has a name, a host, a port
    /// other than 0, a security protocol Kafka knows, and a name no other endpoint has; every
    /// feature has a name no other feature has and `min_level <= max_level`.
    pub fn invalid_reason(&self) -> Option<String> {
        if self.end_points.is_empty() {
            return Some("a controller registration must list at least one endpoint".into());
        }
        for (i, e) in self.end_points.iter().enumerate() {
            if e.name.is_empty() {
                return Some(format!("endpoint {i} has no listener name"));
            }
            if e.host.is_empty() {
                return Some(format!("endpoint {:?} has no host", e.name));
            }
            if e.port == 0 {
                return Some(format!("endpoint {:?} has port 0", e.name));
            }
            if SecurityProtocol::from_code(e.security_protocol).is_none() {
                return Some(format!(
                    "endpoint {:?} has security protocol {}, not one of Kafka's (0 PLAINTEXT, \
                     1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL)",
                    e.name, e.security_protocol
                ));
            }
            if self.end_points[..i].iter().any(|o| o.name == e.name) {
                return Some(format!("endpoint {:?} is listed twice", e.name));
            }
        }
        for (i, f) in self.features.iter().enumerate() {
            if f.name.is_empty() {
                return Some(format!("supported feature {i} has no name"));
            }
            if f.min_level > f.max_level {
                return Some(format!(
                    "supported feature {:?}: min level {} above max level {}",
                    f.name, f.min_level, f.max_level
                ));
            }
            if self.features[..i].iter().any(|o| o.name == f.name) {
                return Some(format!("supported feature {:?} is listed twice", f.name));
            }
        }
        None
    }

    /// Both lists in name order (stable: equal names keep their record order), the form the
    /// image holds and the handler compares against.
    pub(crate) fn sorted(mut self) -> ControllerRegistration {
        self.end_points.sort_by(|a, b| a.name.cmp(&b.name));
        self.features.sort_by(|a, b| a.name.cmp(&b.name));
        self
    }
}

/// Every registered controller, by id. Cloning is O(1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllersImage {
    by_id: OrdMap<NodeId, Arc<ControllerRegistration>>,
}

impl ControllersImage {
    pub fn get(&self, controller_id: NodeId) -> Option<&ControllerRegistration> {
        self.by_id.get(&controller_id).map(|c| &**c)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Registrations in controller id order.
    pub fn iter(&self) -> impl Iterator<Item = &ControllerRegistration> + '_ {
        self.by_id.values().map(|c| &**c)
    }

    /// Registers `reg`, replacing any earlier registration of its controller.
    pub(crate) fn replay_register(&mut self, reg: ControllerRegistration) {
        let reg = reg.sorted();
        self.by_id.insert(reg.controller_id, Arc::new(reg));
    }

    /// The invariants replay keeps for any log: each registration is filed under its own id
    /// and its lists are in name order; with `written_by_controller` (a log the handlers
    /// wrote), each registration is also valid ([`ControllerRegistration::invalid_reason`]).
    pub(crate) fn check_structure(&self, written_by_controller: bool) {
        for (id, reg) in &self.by_id {
            if written_by_controller {
                if let Some(reason) = reg.invalid_reason() {
                    panic!("controller {id}: {reason}");
                }
            }
            assert_eq!(
                *id, reg.controller_id,
                "registration filed under another id"
            );
            assert!(
                reg.end_points.windows(2).all(|w| w[0].name <= w[1].name),
                "end points of controller {id} out of order"
            );
            assert!(
                reg.features.windows(2).all(|w| w[0].name <= w[1].name),
                "features of controller {id} out of order"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::SecurityProtocol;

    fn endpoint(name: &str, port: u16) -> ControllerEndpointV1 {
        ControllerEndpointV1 {
            name: name.into(),
            host: "h".into(),
            port,
            security_protocol: SecurityProtocol::Plaintext as i16,
        }
    }

    /// A later registration replaces the earlier one whole, lists are kept in name order, and
    /// lookups by listener and feature name find what the record listed.
    #[test]
    fn a_newer_registration_replaces_the_older() {
        let mut image = ControllersImage::default();
        image.replay_register(ControllerRegistration {
            controller_id: NodeId(2),
            incarnation_id: Uuid([1; 16]),
            end_points: vec![endpoint("KAFKA", 9092), endpoint("CONTROLLER", 9093)],
            features: vec![SupportedFeatureV1 {
                name: "metadata.version".into(),
                min_level: 7,
                max_level: 20,
            }],
        });
        let reg = image.get(NodeId(2)).unwrap();
        assert_eq!(reg.end_points[0].name, "CONTROLLER");
        assert_eq!(reg.end_point("KAFKA").map(|e| e.port), Some(9092));
        assert_eq!(reg.supported("metadata.version"), Some((7, 20)));
        assert_eq!(reg.supported("other"), None);
        image.replay_register(ControllerRegistration {
            controller_id: NodeId(2),
            incarnation_id: Uuid([2; 16]),
            end_points: vec![endpoint("CONTROLLER", 19093)],
            features: vec![],
        });
        let reg = image.get(NodeId(2)).unwrap();
        assert_eq!(reg.incarnation_id, Uuid([2; 16]));
        assert_eq!(reg.end_point("KAFKA"), None);
        assert_eq!(reg.supported("metadata.version"), None);
        assert_eq!(image.len(), 1);
        image.check_structure(true);
    }

    /// Each rule of a valid registration is enforced with a reason naming what is wrong.
    #[test]
    fn invalid_registrations_say_why() {
        let good = ControllerRegistration {
            controller_id: NodeId(1),
            incarnation_id: Uuid([1; 16]),
            end_points: vec![endpoint("CONTROLLER", 9093), endpoint("KAFKA", 9092)],
            features: vec![SupportedFeatureV1 {
                name: "metadata.version".into(),
                min_level: 7,
                max_level: 27,
            }],
        };
        assert_eq!(good.invalid_reason(), None);
        let with = |f: &dyn Fn(&mut ControllerRegistration)| {
            let mut r = good.clone();
            f(&mut r);
            r.invalid_reason().expect("invalid")
        };
        assert!(with(&|r| r.end_points.clear()).contains("at least one endpoint"));
        assert!(with(&|r| r.end_points[0].name.clear()).contains("no listener name"));
        assert!(with(&|r| r.end_points[0].host.clear()).contains("no host"));
        assert!(with(&|r| r.end_points[1].port = 0).contains("port 0"));
        assert!(with(&|r| r.end_points[1].security_protocol = 4).contains("security protocol 4"));
        assert!(with(&|r| r.end_points[1].name = "CONTROLLER".into()).contains("listed twice"));
        assert!(with(&|r| r.features[0].min_level = 28).contains("above max level"));
        assert!(with(&|r| r.features[0].name.clear()).contains("no name"));
        assert!(with(&|r| r.features.push(r.features[0].clone())).contains("listed twice"));
    }
}
