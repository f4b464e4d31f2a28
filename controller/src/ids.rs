//! Controller-local protocol numbers as newtypes, so a partition index can never be passed where a
//! leader epoch is expected.
//!
//! `corum-types` holds the numbers every crate shares (node ids, broker epochs, log offsets,
//! UUIDs); these four only matter to the controller and its records, so they live here (Kafka
//! sends all of them as int32; we keep them unsigned and use `Option` for "none").

use std::fmt;

use corum_types::Uuid;

/// A topic's internal id (KIP-516): users name topics, the log and the image key them by id.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash))]
#[repr(transparent)]
pub struct TopicId(pub Uuid);

impl TopicId {
    /// The id carried by an archived record.
    #[inline]
    pub fn from_archived(a: &ArchivedTopicId) -> Self {
        TopicId(Uuid::from(&a.0))
    }
}

impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

macro_rules! newtype_u32 {
    ($(#[$meta:meta])* $name:ident, $archived:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
            rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
        )]
        #[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash))]
        #[repr(transparent)]
        pub struct $name(pub u32);

        impl $name {
            #[inline]
            pub const fn get(self) -> u32 {
                self.0
            }

            /// The value after this one (epochs only grow).
            #[inline]
            pub const fn next(self) -> Self {
                Self(self.0 + 1)
            }

            /// The value after this one, or `None` at the maximum: for values read from a
            /// log or snapshot, which may carry the maximum.
            #[inline]
            pub const fn checked_next(self) -> Option<Self> {
                match self.0.checked_add(1) {
                    Some(v) => Some(Self(v)),
                    None => None,
                }
            }

            /// The value carried by an archived record.
            #[inline]
            pub fn from_archived(a: &$archived) -> Self {
                Self(a.0.to_native())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

newtype_u32!(
    /// A partition's index within its topic: partitions of a topic are numbered `0..count`.
    PartitionId,
    ArchivedPartitionId,
    "p"
);

newtype_u32!(
    /// Bumped each time a partition's leader changes; brokers fence stale leaders with it.
    LeaderEpoch,
    ArchivedLeaderEpoch,
    "le"
);

newtype_u32!(
    /// Bumped on every change to a partition (leader or ISR); AlterIsr must name the current one.
    PartitionEpoch,
    ArchivedPartitionEpoch,
    "pe"
);

/// Kafka's reserved log directory ids (its `DirectoryId`, KIP-858): the first 100 ids
/// (`msb == 0 && lsb < 100`) are reserved, and three of them have a meaning.
///
/// A replica's directory is [`MIGRATING_DIR`] when its partition's record named none (written
/// before directories were tracked), [`UNASSIGNED_DIR`] until its broker tells the controller
/// which of its several directories holds it (AssignReplicasToDirs), [`LOST_DIR`] when it is on
/// a directory that went offline.
pub const MIGRATING_DIR: Uuid = Uuid([0; 16]);
/// See [`MIGRATING_DIR`].
pub const UNASSIGNED_DIR: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
/// See [`MIGRATING_DIR`].
pub const LOST_DIR: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);

/// Whether `dir` is one of Kafka's 100 reserved directory ids, which no broker may register.
pub fn is_reserved_dir(dir: &Uuid) -> bool {
    dir.as_u128() < 100
}
