//! The KIP-631 controller state machine: pure, deterministic, single-threaded.
//!
//! # Model
//!
//! The metadata of a cluster (brokers, controllers' registrations, topics, partitions, configs,
//! features, producer ids) is the result of replaying the `@metadata` log: an ordered list of [`records`]. Every node replays
//! the same committed records into a [`MetadataImage`] and so holds the same image.
//!
//! The active controller (the Raft leader) turns requests into records. Handlers ([`Controller`]'s
//! methods, implemented per domain in [`control`]) read the image **including this controller's
//! in-flight (uncommitted) proposals** and return a [`ControllerResult`]: the records to propose
//! as one batch and the response to send once that batch is committed. They never change the
//! image; [`Controller::replay`] (committed records) and [`Controller::on_proposed`] (own
//! proposals, revertible with [`Controller::on_resign`]) are the only mutators. A rejected
//! request returns an [`ApiError`] and no records; batch requests report one result per item.
//! Reads are pure functions of an image ([`control::ImageReads`]): the active controller's see
//! its in-flight proposals, [`Controller::committed_reads`] (what any node may answer) do not.
//!
//! Nothing here reads a clock or the OS: time comes in as a monotonic `now_ms`, the log position
//! as `next_offset`, randomness (topic ids, placement start) from a ChaCha generator seeded from
//! the configured seed and the request's offset. Broker leases are soft state of the active
//! controller ([`control::Leases`]), never written to the log.
//!
//! Layout: [`records`] (the log format), [`image`] (state + replay), [`control`] (handlers per
//! domain), [`controller`] (the facade with in-flight tracking), [`config`], [`error`].
pub mod acl;
pub mod config;
pub mod config_schema;
pub mod control;
pub mod controller;
pub mod error;
pub mod ids;
pub mod image;
pub mod records;
pub mod scram;

pub use config::ControllerConfig;
pub use control::cluster_control::{BrokerHeartbeatRequest, BrokerHeartbeatResponse, TargetState};
pub use control::{ControllerResult, RequestContext};
pub use controller::Controller;
pub use error::{ApiError, ConfigError, DecodeError, Error, Reason, ReplayError, Result};
pub use ids::{LeaderEpoch, PartitionEpoch, PartitionId, TopicId};
pub use image::MetadataImage;
pub use records::{
    aligned, decode_batch, encode_batch, ArchivedBatch, ArchivedMetadataRecord, BatchBuilder,
    MetadataRecord,
};
