//! Controller registration (KIP-919): every node keeps a registration of itself in the
//! metadata log — its id, an incarnation id drawn at start, every listener it serves with its
//! advertised endpoint and security protocol, and the features it supports — so that every
//! node can tell clients where each controller is (Metadata, DescribeCluster with endpoint
//! type controller) and a standby can forward to the active controller's client listener.
//!
//! The task compares this node's registration in its own replayed image with what it would
//! write; when they differ it sends `RegisterController` through the node's call path (a
//! standby forwards it once the leader's own registration is known; the leader registers
//! itself first, which is what lets the others find it). It checks again every
//! [`CHECK_INTERVAL_MS`], and retries after [`RETRY_MS`] when a registration fails.

use std::rc::Rc;
use std::time::Duration;

use corum_controller::control::cluster_control::{DescribedController, RegisterControllerRequest};
use corum_kafka::Backend;
use corum_protocol::{LocalRead, RequestBody, ResponseBody};
use corum_runtime::ShutdownSignal;

use crate::forward::NodeBackend;

/// How often a registered node checks that its registration is still the committed one.
pub const CHECK_INTERVAL_MS: u64 = 5_000;

/// The pause after a failed registration (no leader yet, the leader not registered yet).
pub const RETRY_MS: u64 = 300;

/// Keeps `request` registered until `shutdown`.
pub async fn keep_registered(
    backend: Rc<NodeBackend>,
    request: RegisterControllerRequest,
    timeout_ms: u32,
    shutdown: ShutdownSignal,
) {
    loop {
        let registered = matches!(
            backend.call(RequestBody::LocalRead(Box::new(LocalRead::DescribeControllers)), timeout_ms).await,
            Ok(ResponseBody::DescribeControllers(r))
                if r.controllers.iter().any(|c| is_registered(c, &request))
        );
        let pause_ms = if registered {
            CHECK_INTERVAL_MS
        } else {
            match backend
                .call(RequestBody::RegisterController(request.clone()), timeout_ms)
                .await
            {
                Ok(_) => {
                    tracing::info!(node = %request.controller_id, "controller registered");
                    CHECK_INTERVAL_MS
                }
                Err(e) => {
                    tracing::debug!(error = %e, "controller registration not done yet");
                    RETRY_MS
                }
            }
        };
        let pause = glommio::timer::sleep(Duration::from_millis(pause_ms));
        if shutdown.run_until(pause).await.is_none() {
            return;
        }
    }
}

/// Whether `c`, a committed registration, is `request`'s. The image keeps endpoints and
/// features in its own order (by name), the request in the configuration's: they are compared
/// as sets, or a node would register again every [`CHECK_INTERVAL_MS`] forever.
fn is_registered(c: &DescribedController, request: &RegisterControllerRequest) -> bool {
    fn sorted<T: Clone, K: Ord>(v: &[T], key: impl Fn(&T) -> K) -> Vec<T> {
        let mut v = v.to_vec();
        v.sort_by_key(key);
        v
    }
    c.controller_id == request.controller_id
        && c.incarnation_id == request.incarnation_id
        && sorted(&c.end_points, |e| e.name.clone())
            == sorted(&request.end_points, |e| e.name.clone())
        && sorted(&c.features, |f| f.name.clone()) == sorted(&request.features, |f| f.name.clone())
}

/// A fresh incarnation id for this process (16 bytes from the OS).
pub fn incarnation_id() -> corum_types::Uuid {
    let mut bytes = [0u8; 16];
    // A registration only needs ids that differ between starts; the time and the process id
    // are the fallback when the OS source cannot be read.
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_err()
    {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes[..16].copy_from_slice(&(now ^ u128::from(std::process::id())).to_le_bytes());
    }
    corum_types::Uuid(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corum_controller::records::{ControllerEndpointV1, SupportedFeatureV1};
    use corum_types::{NodeId, Uuid};

    /// A registration written in another order than the image keeps it is still the same one.
    #[test]
    fn a_registration_in_another_order_is_registered() {
        let endpoint = |name: &str, port| ControllerEndpointV1 {
            name: name.into(),
            host: "h".into(),
            port,
            security_protocol: 0,
        };
        let feature = |name: &str| SupportedFeatureV1 {
            name: name.into(),
            min_level: 0,
            max_level: 1,
        };
        let request = RegisterControllerRequest {
            controller_id: NodeId(1),
            incarnation_id: Uuid([1; 16]),
            end_points: vec![
                endpoint("KAFKA", 3),
                endpoint("CLIENT", 2),
                endpoint("CONTROLLER", 1),
            ],
            features: vec![feature("z.version"), feature("metadata.version")],
        };
        let mut committed = DescribedController {
            controller_id: NodeId(1),
            incarnation_id: Uuid([1; 16]),
            end_points: vec![
                endpoint("CLIENT", 2),
                endpoint("CONTROLLER", 1),
                endpoint("KAFKA", 3),
            ],
            features: vec![feature("metadata.version"), feature("z.version")],
        };
        assert!(is_registered(&committed, &request));
        committed.end_points[2].port = 4;
        assert!(
            !is_registered(&committed, &request),
            "a moved listener registers again"
        );
        committed.end_points[2].port = 3;
        committed.incarnation_id = Uuid([2; 16]);
        assert!(
            !is_registered(&committed, &request),
            "a restarted process registers again"
        );
    }
}
