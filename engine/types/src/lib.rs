//! Protocol numbers as newtypes, so that an epoch can never be passed where an offset is expected.
//!
//! Every type here is `Copy`, totally ordered where the protocol orders it, and archivable with
//! rkyv so records and messages can carry it without conversion. Nothing here does IO or reads a
//! clock: these types are shared by the pure cores (Raft, controller) and the drivers alike.
//! The one exception is [`golden`], the rule every golden-file test shares (it reads an
//! environment variable), kept here because every crate with golden files depends on this one.

pub mod golden;

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;

macro_rules! newtype_u64 {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
            rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
        )]
        #[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash), compare(PartialEq))]
        #[repr(transparent)]
        pub struct $name(pub u64);

        impl $name {
            pub const ZERO: Self = Self(0);

            #[inline]
            pub const fn get(self) -> u64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl From<u64> for $name {
            fn from(v: u64) -> Self {
                Self(v)
            }
        }

        impl From<&rkyv::Archived<$name>> for $name {
            fn from(v: &rkyv::Archived<$name>) -> Self {
                Self(v.0.to_native())
            }
        }
    };
}

newtype_u64!(
    /// A Raft epoch (KIP-595's name for a term). Epoch 0 means "none yet".
    Epoch,
    "e"
);

newtype_u64!(
    /// A position in the replicated metadata log. Offsets name records, not bytes; an "end
    /// offset" is exclusive (the offset the next record will get).
    LogOffset,
    "@"
);

newtype_u64!(
    /// A broker's epoch: the log end offset just before its registration record was appended, so
    /// every registration has a unique, increasing epoch (KIP-631).
    BrokerEpoch,
    "be"
);

impl LogOffset {
    /// The offset `n` records after this one.
    #[inline]
    pub const fn add(self, n: u64) -> Self {
        Self(self.0 + n)
    }

    /// The next offset.
    #[inline]
    pub const fn next(self) -> Self {
        Self(self.0 + 1)
    }

    /// The previous offset, or `None` at zero.
    #[inline]
    pub const fn prev(self) -> Option<Self> {
        match self.0.checked_sub(1) {
            Some(v) => Some(Self(v)),
            None => None,
        }
    }
}

impl Epoch {
    #[inline]
    pub const fn next(self) -> Self {
        Self(self.0 + 1)
    }
}

/// A node id: controllers and brokers share one id space (KIP-631). Non-negative by construction.
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
#[rkyv(
    derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash),
    compare(PartialEq)
)]
#[repr(transparent)]
pub struct NodeId(pub u32);

impl NodeId {
    #[inline]
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<&rkyv::Archived<NodeId>> for NodeId {
    fn from(v: &rkyv::Archived<NodeId>) -> Self {
        Self(v.0.to_native())
    }
}

impl FromStr for NodeId {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        s.trim()
            .parse::<u32>()
            .map(NodeId)
            .map_err(|_| ParseError::NodeId(s.to_string()))
    }
}

/// A 128-bit identifier: cluster ids, directory ids (a voter's replica UUID, KIP-853), topic ids
/// and broker incarnation ids. Printed like Kafka prints them: 22 characters of URL-safe base64
/// without padding.
#[derive(
    Clone,
    Copy,
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
#[rkyv(
    derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash),
    compare(PartialEq)
)]
#[repr(transparent)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero id, which Kafka reserves to mean "none".
    pub const ZERO: Self = Self([0; 16]);

    /// Builds a UUID (version 4 layout) from 128 random bits supplied by the caller, so that pure
    /// code can draw them from a seeded generator and binaries from the OS.
    pub fn from_random_bits(bits: u128) -> Self {
        let mut b = bits.to_be_bytes();
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        Self(b)
    }

    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    pub fn as_u128(&self) -> u128 {
        u128::from_be_bytes(self.0)
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.0))
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uuid({self})")
    }
}

impl From<&rkyv::Archived<Uuid>> for Uuid {
    fn from(v: &rkyv::Archived<Uuid>) -> Self {
        Self(v.0)
    }
}

impl FromStr for Uuid {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| ParseError::Uuid(s.to_string()))?;
        let arr: [u8; 16] = bytes
            .try_into()
            .map_err(|_| ParseError::Uuid(s.to_string()))?;
        Ok(Uuid(arr))
    }
}

/// Errors from parsing the text forms above.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("invalid node id {0:?}: expected a non-negative integer")]
    NodeId(String),
    #[error("invalid uuid {0:?}: expected 22 characters of URL-safe base64 (16 bytes)")]
    Uuid(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every UUID prints as 22 characters and parses back to itself.
        #[test]
        fn uuid_text_round_trip(bits in any::<u128>()) {
            let u = Uuid(bits.to_be_bytes());
            let s = u.to_string();
            prop_assert_eq!(s.len(), 22);
            prop_assert_eq!(s.parse::<Uuid>().unwrap(), u);
        }
    }

    /// Malformed UUID text is rejected, not truncated or padded.
    #[test]
    fn uuid_rejects_bad_text() {
        assert!("".parse::<Uuid>().is_err());
        assert!("AAAAAAAAAAAAAAAAAAAAAA=".parse::<Uuid>().is_err());
        assert!("AAAAAAAAAAAAAAAAAAAAA".parse::<Uuid>().is_err());
        assert!("!!!!!!!!!!!!!!!!!!!!!!".parse::<Uuid>().is_err());
    }

    /// The version and variant bits of a random UUID are those of RFC 4122 version 4.
    #[test]
    fn random_uuid_has_v4_bits() {
        let u = Uuid::from_random_bits(u128::MAX);
        assert_eq!(u.0[6] >> 4, 4);
        assert_eq!(u.0[8] >> 6, 0b10);
    }

    /// Newtypes archive to their value and compare with the native type after access.
    #[test]
    fn newtypes_archive() {
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&LogOffset(42)).unwrap();
        let a = rkyv::access::<rkyv::Archived<LogOffset>, rkyv::rancor::Error>(&bytes).unwrap();
        assert_eq!(LogOffset::from(a), LogOffset(42));
        assert!("-1".parse::<NodeId>().is_err());
        assert_eq!("7".parse::<NodeId>().unwrap(), NodeId(7));
    }
}
