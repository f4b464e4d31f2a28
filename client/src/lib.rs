//! Clients of a corum quorum: what brokers and admins (and `corum loadgen`) use to talk to the
//! active controller and to follow the metadata log.
//!
//! # Model
//!
//! A client knows a list of bootstrap servers (the controllers' client endpoints). Only the
//! active controller (the Raft leader) serves requests; every other node answers
//! `NotController` with its best guess of the leader. [`ControllerClient`] keeps one pipelined
//! connection to the server it believes leads and moves when told otherwise or when the
//! connection breaks, retrying within a deadline.
//!
//! A broker is registered by a heartbeat without an epoch ([`BrokerSession`]), starts FENCED
//! and is unfenced once the NextMetadataOffset it reports has caught up with the log. What it
//! reports comes from a [`MetadataFollower`]: an observer replica that long-polls the leader
//! with Raft `Fetch`, applies committed batches (and only those) to its own
//! [`corum_controller::MetadataImage`], and drops uncommitted data a new leader truncates. The
//! buffering and applying rules live in the pure [`ObserverLog`], tested with synthetic fetch
//! responses. A leader deletes its log below its latest snapshot (KIP-630); an observer behind
//! that point downloads the snapshot with `FetchSnapshot` ([`SnapshotDownload`], pure too, and
//! the same type the Raft core's own followers use: it lives in [`corum_raft::follower`]),
//! rebuilds its image from it and fetches on from its end.
//!
//! | module | what |
//! |---|---|
//! | [`controller_client`] | [`ClientConfig`], [`ControllerClient`]: leader following, retries, typed request helpers |
//! | [`observer_log`] | [`ObserverLog`]: applied prefix + buffered suffix, HWM, divergence, snapshot install (pure) |
//! | [`metadata_follower`] | [`MetadataFollower`]: the fetch loop in a background glommio task |
//! | [`broker_session`] | [`BrokerSession`]: register, heartbeat, wait until unfenced, controlled shutdown |
//! | [`error`] | [`ClientError`], [`ObserverError`] (a refused snapshot chunk is corum-raft's [`SnapshotChunkError`]) |
//!
//! Everything here is glommio-local (`Rc`, `Cell`): create and use it on one executor.
pub mod broker_session;
pub mod controller_client;
pub mod error;
pub mod metadata_follower;
pub mod observer_log;

pub use broker_session::{BrokerIdentity, BrokerSession};
pub use controller_client::{parse_bootstrap, ClientConfig, ClientStats, ControllerClient};
pub use error::{ClientError, ObserverError, Result};
pub use metadata_follower::{FollowerStats, MetadataFollower};
pub use observer_log::{AppliedBatch, ObserverLog, ObserverStats, Progress, SnapshotInstall};

// The follower's snapshot download is the Raft crate's, shared with the Raft core's followers.
pub use corum_raft::follower::{DownloadStep, SnapshotDownload, SNAPSHOT_BYTES_MAX};
pub use corum_raft::SnapshotChunkError;

// Types callers need to use the API, re-exported so they need not depend on every crate.
pub use corum_controller::records::{ListenerV1, SupportedFeatureV1};
pub use corum_controller::{MetadataImage, TargetState};
pub use corum_protocol::{
    DescribeQuorumResponse, ReplicaState, RequestBody, ResponseBody, RpcConnectionConfig, RpcError,
};
pub use corum_raft::ReplicaKey;

#[cfg(test)]
mod tests {
    /// The `[dependencies]` table of the manifest at `path`, one dependency name per entry.
    fn dependencies(path: &str) -> Vec<String> {
        let manifest = std::fs::read_to_string(path).expect("the manifest is readable");
        let mut in_table = false;
        let mut names = Vec::new();
        for line in manifest.lines().map(str::trim) {
            if line.starts_with('[') {
                in_table = line == "[dependencies]";
            } else if in_table && !line.is_empty() && !line.starts_with('#') {
                let name = line
                    .split(['=', '.'])
                    .next()
                    .expect("split yields one item");
                names.push(name.trim().to_owned());
            }
        }
        names
    }

    /// The client library talks to controllers through `corum-protocol` only: neither this
    /// crate nor the protocol crate depends on the server (`corum-node`), so a broker linking
    /// the client does not link the controller node. (Its integration tests still run real
    /// nodes, as a dev-dependency.)
    #[test]
    fn the_client_does_not_link_the_node() {
        let client = dependencies(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
        assert!(client.iter().any(|d| d == "corum-protocol"), "{client:?}");
        assert!(!client.iter().any(|d| d == "corum-node"), "{client:?}");
        let protocol = dependencies(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../protocol/Cargo.toml"
        ));
        assert!(protocol.iter().any(|d| d == "corum-raft"), "{protocol:?}");
        assert!(!protocol.iter().any(|d| d == "corum-node"), "{protocol:?}");
    }
}
