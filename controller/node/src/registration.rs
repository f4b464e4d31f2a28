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

use corum_controller::control::cluster_control::RegisterControllerRequest;
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
            Ok(ResponseBody::DescribeControllers(r)) if r.controllers.iter().any(|c| {
                c.controller_id == request.controller_id
                    && c.incarnation_id == request.incarnation_id
                    && c.end_points == request.end_points
                    && c.features == request.features
            })
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
