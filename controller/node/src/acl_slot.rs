//! The node's security state as its Kafka listeners see it: the ACLs (the authorizer) and the
//! SCRAM credentials of the committed image, published by the controller service (on its
//! shard) after each committed batch that changed them, read by the listeners (on the worker
//! shard) for every request and every SCRAM authentication. One slot per node, shared by the
//! clones of its plan.

use std::sync::{Arc, RwLock};

use corum_controller::acl::{AclsImage, Authorizer, AuthorizerConfig};
use corum_controller::scram::{ScramCredential, ScramImage, ScramMechanism};

/// See the module doc. Without an authorizer configured it holds no ACLs, and publishing
/// them does nothing; credentials are always published (a SASL listener may use them).
#[derive(Clone, Default)]
pub struct AclSlot {
    authorizer: Option<Arc<RwLock<Arc<Authorizer>>>>,
    credentials: Arc<RwLock<ScramImage>>,
}

impl std::fmt::Debug for AclSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let credentials = self.read_credentials().len();
        match self.authorizer() {
            None => write!(f, "AclSlot(no authorizer, {credentials} SCRAM credentials)"),
            Some(a) => write!(
                f,
                "AclSlot({} ACLs, {credentials} SCRAM credentials)",
                a.acls.len()
            ),
        }
    }
}

impl AclSlot {
    /// A slot for the authorizer `config` configures (`None`: no authorizer), with no ACLs
    /// and no credentials yet.
    pub fn new(config: Option<AuthorizerConfig>) -> AclSlot {
        AclSlot {
            authorizer: config.map(|c| {
                Arc::new(RwLock::new(Arc::new(Authorizer::new(
                    c,
                    AclsImage::default(),
                ))))
            }),
            credentials: Arc::default(),
        }
    }

    /// The authorizer with the ACLs last published, if one is configured.
    pub fn authorizer(&self) -> Option<Arc<Authorizer>> {
        let slot = self.authorizer.as_ref()?;
        Some(slot.read().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// Publishes `acls` (the committed image's) unless they are the ones published already.
    pub fn publish(&self, acls: &AclsImage) {
        let Some(slot) = &self.authorizer else {
            return;
        };
        let current = slot.read().unwrap_or_else(|e| e.into_inner()).clone();
        if current.acls.same(acls) {
            return;
        }
        let next = Arc::new(Authorizer::new(current.config.clone(), acls.clone()));
        *slot.write().unwrap_or_else(|e| e.into_inner()) = next;
    }

    fn read_credentials(&self) -> std::sync::RwLockReadGuard<'_, ScramImage> {
        self.credentials.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes `credentials` (the committed image's) unless they are the ones published
    /// already (a pointer comparison: the image is a persistent map).
    pub fn publish_credentials(&self, credentials: &ScramImage) {
        if self.read_credentials().same(credentials) {
            return;
        }
        *self.credentials.write().unwrap_or_else(|e| e.into_inner()) = credentials.clone();
    }

    /// `user`'s published credential for `mechanism`.
    pub fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.read_credentials().get(user, mechanism).cloned()
    }
}
