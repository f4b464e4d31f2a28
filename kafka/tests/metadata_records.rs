//! The generated metadata record codecs against themselves: every record at every version
//! round-trips through its frame, `encoded_len` is exact, a value holding a field its version
//! lacks is refused rather than written lossily, and decoders neither panic nor accept
//! truncated bytes whatever they are fed. (Kafka's own decoder checks the bytes in
//! `metadata_kafka.rs`.)

mod metadata_support;

use bytes::{Bytes, BytesMut};
use corum_kafka::metadata::{
    AnyMetadataRecord, DecodeError, EncodeError, KRaftVersionRecord, Malformed,
    PartitionChangeRecord, PartitionRecord, RawTaggedField, RegisterBrokerRecord,
};
use proptest::collection::vec;
use proptest::prelude::*;

use metadata_support::{any_framed, arbitrary, record_versions};

fn framed(record: &AnyMetadataRecord, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    record
        .encode_framed(version, &mut buf)
        .unwrap_or_else(|e| panic!("{} v{version} encodes: {e}", record.name()));
    buf.freeze()
}

/// A byte-level change to a valid encoding.
#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
}

fn mutate(bytes: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for m in mutations {
        match *m {
            Mutation::Set(i, b) if !out.is_empty() => {
                let n = out.len();
                out[i % n] = b;
            }
            Mutation::Insert(i, b) => out.insert(i % (out.len() + 1), b),
            Mutation::Remove(i) if !out.is_empty() => {
                let n = out.len();
                out.remove(i % n);
            }
            _ => {}
        }
    }
    out
}

fn any_mutation() -> impl Strategy<Value = Mutation> {
    // Bytes that mean something on the wire: null and small lengths, varint continuations,
    // large counts.
    let byte = prop_oneof![
        any::<u8>(),
        Just(0u8),
        Just(1),
        Just(0x7f),
        Just(0x80),
        Just(0xff)
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), byte).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Remove),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    /// Any value of any record that is valid at a version encodes to exactly `framed_len`
    /// bytes (the body to `encoded_len`), and decodes back to itself at that version.
    #[test]
    fn framed_round_trip((record, version) in any_framed()) {
        let bytes = framed(&record, version);
        prop_assert_eq!(bytes.len(), record.framed_len(version));
        let mut body = BytesMut::new();
        record.encode(version, &mut body).expect("the framed record encoded");
        prop_assert_eq!(body.len(), record.encoded_len(version));
        prop_assert!(bytes.ends_with(&body));
        let decoded = AnyMetadataRecord::decode_framed(bytes);
        prop_assert_eq!(decoded, Ok((record.clone(), version)));
        let mut body = body.freeze();
        let decoded = AnyMetadataRecord::decode(record.api_key(), &mut body, version);
        prop_assert_eq!(decoded, Ok(record));
        prop_assert!(body.is_empty());
    }

    /// At any other version a value is either written whole (it decodes to itself: every
    /// field that version lacks held its default) or refused with NonDefaultAbsent; out of
    /// range it is refused with UnsupportedVersion. A refusal writes nothing.
    #[test]
    fn other_versions_write_whole_or_refuse((record, version) in any_framed(), other in -1i16..6) {
        let record_type = AnyMetadataRecord::record_type(record.api_key()).expect("a type");
        let mut buf = BytesMut::from(&b"prefix"[..]);
        match record.encode_framed(other, &mut buf) {
            Ok(()) => {
                let bytes = buf.split_off(6).freeze();
                prop_assert_eq!(AnyMetadataRecord::decode_framed(bytes), Ok((record, other)));
            }
            Err(EncodeError::NonDefaultAbsent { version, .. }) => {
                prop_assert_eq!(version, other);
                prop_assert_eq!(&buf[..], b"prefix");
            }
            Err(EncodeError::UnsupportedVersion { .. }) => {
                prop_assert!(other < record_type.lowest_version || other > record_type.highest_version);
                prop_assert_eq!(&buf[..], b"prefix");
            }
            Err(e) => prop_assert!(false, "{} v{} (made for v{}): {}", record.name(), other, version, e),
        }
    }

    /// KRaftVersionRecord (not a metadata record, so outside the frame) round-trips too.
    #[test]
    fn kraft_version_round_trip(record in arbitrary::kraft_version_record(0)) {
        let mut buf = BytesMut::new();
        record.encode(0, &mut buf).expect("v0 encodes");
        prop_assert_eq!(buf.len(), record.encoded_len(0));
        let mut bytes = buf.freeze();
        prop_assert_eq!(KRaftVersionRecord::decode(&mut bytes, 0), Ok(record));
        prop_assert!(bytes.is_empty());
    }

    /// Arbitrary bytes never panic the frame decoder.
    #[test]
    fn arbitrary_bytes_do_not_panic(bytes in vec(any::<u8>(), 0..96)) {
        let _ = AnyMetadataRecord::decode_framed(Bytes::from(bytes));
    }

    /// Arbitrary bytes behind a valid frame header (so they reach a record's decoder, at
    /// one of its versions) never panic, and whatever decodes writes back.
    #[test]
    fn arbitrary_bodies_do_not_panic(
        which in any::<prop::sample::Index>(),
        body in vec(any::<u8>(), 0..96),
    ) {
        let versions = record_versions();
        let (api_key, version) = versions[which.index(versions.len())];
        let mut bytes = vec![1, u8::try_from(api_key).expect("small"), u8::try_from(version).expect("small")];
        bytes.extend_from_slice(&body);
        if let Ok((record, v)) = AnyMetadataRecord::decode_framed(Bytes::from(bytes)) {
            prop_assert_eq!(reencoded(&framed(&record, v)), framed(&record, v));
        }
    }

    /// Every strict prefix of a valid framed record is refused (a decoder reads the same
    /// fields in the same order, so it runs out of bytes), without panicking.
    #[test]
    fn truncated_records_are_refused((record, version) in any_framed()) {
        let bytes = framed(&record, version);
        for len in 0..bytes.len() {
            let decoded = AnyMetadataRecord::decode_framed(bytes.slice(..len));
            prop_assert!(decoded.is_err(), "{} v{} cut to {} of {} bytes decoded", record.name(), version, len, bytes.len());
        }
    }

    /// A valid record with bytes changed, inserted or removed never panics a decoder; what
    /// still decodes can be written back and reads the same.
    #[test]
    fn mutated_records_do_not_panic(
        (record, version) in any_framed(),
        mutations in vec(any_mutation(), 1..4),
    ) {
        let bytes = mutate(&framed(&record, version), &mutations);
        if let Ok((decoded, v)) = AnyMetadataRecord::decode_framed(Bytes::from(bytes)) {
            prop_assert_eq!(reencoded(&framed(&decoded, v)), framed(&decoded, v));
        }
    }
}

/// `bytes` decoded and written again. Compared as bytes rather than as values: a float64
/// field may decode to NaN, which equals nothing, not even itself.
fn reencoded(bytes: &Bytes) -> Bytes {
    let (record, v) =
        AnyMetadataRecord::decode_framed(bytes.clone()).expect("written bytes decode");
    framed(&record, v)
}

/// Kafka's defaults: what `new XRecord()` holds in Kafka's generated classes.
#[test]
fn defaults_are_kafkas() {
    let p = PartitionChangeRecord::default();
    assert_eq!(
        (p.partition_id, p.leader, p.leader_recovery_state),
        (-1, -2, -1)
    );
    assert_eq!((p.isr, p.replicas, p.directories), (None, None, None));
    let p = PartitionRecord::default();
    assert_eq!(
        (p.partition_id, p.leader, p.leader_epoch, p.partition_epoch),
        (-1, -1, -1, -1)
    );
    assert_eq!(p.eligible_leader_replicas, None);
    let b = RegisterBrokerRecord::default();
    assert!(b.fenced);
    assert!(!b.in_controlled_shutdown);
    // A nullable string without a default is empty, not null.
    assert_eq!(b.rack.as_deref(), Some(""));
}

/// A field the version lacks, holding a non-default value, is refused by name.
#[test]
fn non_default_absent_field_is_refused() {
    let record = RegisterBrokerRecord {
        log_dirs: vec![uuid::Uuid::from_u128(7)],
        ..RegisterBrokerRecord::default()
    };
    let mut buf = BytesMut::new();
    assert_eq!(
        record.encode(2, &mut buf),
        Err(EncodeError::NonDefaultAbsent {
            record: "RegisterBrokerRecord",
            field: "LogDirs",
            version: 2,
        })
    );
    assert!(buf.is_empty());
    record.encode(3, &mut buf).expect("v3 has LogDirs");
}

/// Strings beyond 32,767 bytes and unordered or clashing unknown tags are refused.
#[test]
fn invalid_values_are_refused() {
    let mut buf = BytesMut::new();
    let long = RegisterBrokerRecord {
        rack: Some("r".repeat(0x8000)),
        ..RegisterBrokerRecord::default()
    };
    assert_eq!(
        long.encode(0, &mut buf),
        Err(EncodeError::StringTooLong {
            record: "RegisterBrokerRecord",
            field: "Rack",
            len: 0x8000,
        })
    );
    let raw = |tag| RawTaggedField {
        tag,
        data: Bytes::new(),
    };
    let clash = RegisterBrokerRecord {
        unknown_tagged_fields: vec![raw(0)],
        ..RegisterBrokerRecord::default()
    };
    // Tag 0 is LogDirs (from v3): reusing it is refused even at v0, which lacks it.
    assert_eq!(
        clash.encode(0, &mut buf),
        Err(EncodeError::UnknownTagDefined {
            record: "RegisterBrokerRecord",
            tag: 0,
        })
    );
    let unordered = RegisterBrokerRecord {
        unknown_tagged_fields: vec![raw(5), raw(3)],
        ..RegisterBrokerRecord::default()
    };
    assert_eq!(
        unordered.encode(0, &mut buf),
        Err(EncodeError::UnknownTagsUnordered {
            record: "RegisterBrokerRecord",
            tag: 3,
            previous: 5,
        })
    );
    assert!(buf.is_empty());
}

/// Decoders refuse what Kafka's writers never produce: tags out of order, a tag the version
/// does not define, a tagged value shorter than its declared size, a lying array count, bad
/// UTF-8, an unsupported version.
#[test]
fn malformed_bytes_are_refused() {
    // BrokerRegistrationChangeRecord v1: BrokerId, BrokerEpoch, then tagged fields.
    let head = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2];
    let decode = |tagged: &[u8], version: i16| {
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(tagged);
        let mut bytes = Bytes::from(bytes);
        AnyMetadataRecord::decode(17, &mut bytes, version)
    };
    // Fenced (tag 0) = 1, InControlledShutdown (tag 1) = 1.
    assert!(decode(&[2, 0, 1, 1, 1, 1, 1], 1).is_ok());
    assert_eq!(
        decode(&[2, 1, 1, 1, 0, 1, 1], 1),
        Err(DecodeError::TagOutOfOrder {
            record: "BrokerRegistrationChangeRecord",
            tag: 0,
            previous: 1,
        })
    );
    assert_eq!(
        decode(&[1, 1, 1, 1], 0),
        Err(DecodeError::TagNotInVersion {
            record: "BrokerRegistrationChangeRecord",
            tag: 1,
            version: 0,
        })
    );
    assert_eq!(
        decode(&[1, 0, 2, 1, 0], 1),
        Err(DecodeError::TaggedFieldSize {
            record: "BrokerRegistrationChangeRecord",
            field: "Fenced",
            declared: 2,
            used: 1,
        })
    );
    assert_eq!(
        decode(&[1, 0, 0], 1),
        Err(DecodeError::Field {
            record: "BrokerRegistrationChangeRecord",
            field: "Fenced",
            reason: Malformed::Truncated {
                needed: 1,
                remaining: 0,
            },
        })
    );
    // LogDirs (tag 2, v2) claiming 2^31 uuids in 5 bytes.
    assert_eq!(
        decode(&[1, 2, 5, 0x80, 0x80, 0x80, 0x80, 0x08], 2),
        Err(DecodeError::Field {
            record: "BrokerRegistrationChangeRecord",
            field: "LogDirs",
            reason: Malformed::LengthBeyondRemaining {
                len: 0x7fff_ffff,
                needed: 0x7fff_ffff * 16,
                remaining: 0,
            },
        })
    );
    assert!(matches!(
        decode(&[0], 3),
        Err(DecodeError::UnsupportedVersion { version: 3, .. })
    ));
    // A FeatureLevelRecord whose name (two bytes) is not UTF-8.
    let mut bytes = Bytes::from_static(&[3, 0xc3, 0x28, 0, 0, 0]);
    assert_eq!(
        AnyMetadataRecord::decode(12, &mut bytes, 0),
        Err(DecodeError::Field {
            record: "FeatureLevelRecord",
            field: "Name",
            reason: Malformed::InvalidUtf8,
        })
    );
}

/// Unknown tagged fields are kept in order and written back between the known ones.
#[test]
fn unknown_tags_are_kept_and_interleaved() {
    // PartitionChangeRecord v0: tags 0-5 and 8 defined (6, 7 from v2, 8 from v1).
    let record = PartitionChangeRecord {
        leader: 3,
        leader_recovery_state: 1,
        unknown_tagged_fields: vec![
            RawTaggedField {
                tag: 9,
                data: Bytes::from_static(b"x"),
            },
            RawTaggedField {
                tag: 200,
                data: Bytes::new(),
            },
        ],
        ..PartitionChangeRecord::default()
    };
    let mut buf = BytesMut::new();
    record.encode(0, &mut buf).expect("encodes");
    let tail = &buf[4 + 16..];
    // 4 fields: Leader (1), LeaderRecoveryState (5), 9, 200 (two-byte varint).
    assert_eq!(
        tail,
        [4, 1, 4, 0, 0, 0, 3, 5, 1, 1, 9, 1, b'x', 0xc8, 0x01, 0]
    );
    let mut bytes = buf.freeze();
    assert_eq!(PartitionChangeRecord::decode(&mut bytes, 0), Ok(record));
}
