//! The node's authorizer as its Kafka listeners see it: the ACLs of the committed image,
//! published by the controller service (on its shard) after each committed batch that changed
//! them, read by the listeners (on the worker shard) for every request. One slot per node,
//! shared by the clones of its plan.

use std::sync::{Arc, RwLock};

use corum_controller::acl::{AclsImage, Authorizer, AuthorizerConfig};

/// See the module doc. Without an authorizer configured it holds nothing, and publishing
/// does nothing.
#[derive(Clone, Default)]
pub struct AclSlot(Option<Arc<RwLock<Arc<Authorizer>>>>);

impl std::fmt::Debug for AclSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.authorizer() {
            None => f.write_str("AclSlot(no authorizer)"),
            Some(a) => write!(f, "AclSlot({} ACLs)", a.acls.len()),
        }
    }
}

impl AclSlot {
    /// A slot for the authorizer `config` configures (`None`: no authorizer), with no ACLs yet.
    pub fn new(config: Option<AuthorizerConfig>) -> AclSlot {
        AclSlot(config.map(|c| {
            Arc::new(RwLock::new(Arc::new(Authorizer::new(
                c,
                AclsImage::default(),
            ))))
        }))
    }

    /// The authorizer with the ACLs last published, if one is configured.
    pub fn authorizer(&self) -> Option<Arc<Authorizer>> {
        let slot = self.0.as_ref()?;
        Some(slot.read().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// Publishes `acls` (the committed image's) unless they are the ones published already.
    pub fn publish(&self, acls: &AclsImage) {
        let Some(slot) = &self.0 else {
            return;
        };
        let current = slot.read().unwrap_or_else(|e| e.into_inner()).clone();
        if current.acls.same(acls) {
            return;
        }
        let next = Arc::new(Authorizer::new(current.config.clone(), acls.clone()));
        *slot.write().unwrap_or_else(|e| e.into_inner()) = next;
    }
}
