use proptest::prelude::*;

use super::*;

fn meta(base: u64, count: u32) -> BatchMeta {
    BatchMeta {
        attributes: Attributes::empty(),
        base_offset: LogOffset(base),
        epoch: Epoch(3),
        record_count: count,
        first_timestamp_ms: 1_700_000_000_000,
        max_timestamp_ms: 1_700_000_000_042,
    }
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, PartialEq)]
struct TestRecord {
    id: u64,
    name: String,
    flags: Vec<bool>,
}

fn golden_frame() -> Vec<u8> {
    let m = BatchMeta {
        attributes: Attributes::CONTROL,
        ..meta(1234, 2)
    };
    encode_frame(&m, b"hello, corum!", DEFAULT_FRAME_BYTES_MAX).unwrap()
}

#[test]
fn golden_file_matches_format_v1() {
    // Proves the v1 byte layout has not changed: a diff here means an on-disk format change.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/frame_v1.bin");
    let bytes = golden_frame();
    if corum_types::golden::rewrite_requested() {
        std::fs::write(&path, &bytes).unwrap();
    }
    let golden = std::fs::read(&path).expect("golden file present (CORUM_REWRITE=1 makes it)");
    assert_eq!(bytes, golden, "frame v1 encoding changed");
    // And the golden bytes decode to what was written.
    let v = decode_frame(&golden, DEFAULT_FRAME_BYTES_MAX).unwrap();
    assert_eq!(v.header().base_offset, LogOffset(1234));
    assert_eq!(v.header().last_offset(), LogOffset(1235));
    assert!(v.header().attributes.is_control());
    assert_eq!(v.payload(), b"hello, corum!");
    assert_eq!(v.bytes().len(), 80);
}

#[test]
fn roundtrip_and_padding() {
    // Proves encode/decode round-trips every header field for payload sizes around the padding.
    for len in 0..20usize {
        let payload: Vec<u8> = (0..len as u8).collect();
        let bytes = encode_frame(&meta(7, 3), &payload, DEFAULT_FRAME_BYTES_MAX).unwrap();
        assert_eq!(bytes.len() % FRAME_ALIGN_BYTES, 0);
        assert_eq!(bytes.len(), frame_bytes_for_payload(len));
        let v = decode_frame(&bytes, DEFAULT_FRAME_BYTES_MAX).unwrap();
        assert_eq!(v.payload(), &payload[..]);
        let h = v.header();
        assert_eq!(
            (h.base_offset, h.epoch, h.record_count),
            (LogOffset(7), Epoch(3), 3)
        );
        assert_eq!(h.end_offset(), LogOffset(10));
        assert_eq!(h.first_timestamp_ms, 1_700_000_000_000);
        assert_eq!(h.max_timestamp_ms, 1_700_000_000_042);
    }
}

#[test]
fn distinct_errors_for_distinct_damage() {
    // Proves each kind of bad frame is reported with its own error variant.
    let good = encode_frame(&meta(0, 1), b"abcdefgh", DEFAULT_FRAME_BYTES_MAX).unwrap();
    let max = DEFAULT_FRAME_BYTES_MAX;
    assert!(matches!(
        decode_frame(&good[..10], max),
        Err(FrameError::Truncated { .. })
    ));
    assert!(matches!(
        decode_frame(&good[..70], max),
        Err(FrameError::Truncated { .. })
    ));
    let mut b = good.clone();
    b[0] = b'X';
    assert!(matches!(
        decode_frame(&b, max),
        Err(FrameError::BadMagic { .. })
    ));
    let mut b = good.clone();
    b[12] = 9;
    assert_eq!(
        decode_frame(&b, max),
        Err(FrameError::UnsupportedVersion { found: 9 })
    );
    let mut b = good.clone();
    b[70] ^= 1;
    assert!(matches!(
        decode_frame(&b, max),
        Err(FrameError::ChecksumMismatch { .. })
    ));
    assert!(matches!(
        decode_frame(&good, 70),
        Err(FrameError::LengthOutOfRange { .. })
    ));
    let mut b = good.clone();
    b[14] = 2;
    assert!(matches!(
        decode_frame(&b, max),
        Err(FrameError::UnknownAttributes { bits: 2 })
    ));
    let mut b = good.clone();
    b[32..36].fill(0);
    assert_eq!(decode_frame(&b, max), Err(FrameError::ZeroRecordCount));
    let mut b = good.clone();
    b[37] = 1;
    assert_eq!(decode_frame(&b, max), Err(FrameError::ReservedNotZero));
    let odd = encode_frame(&meta(0, 1), b"abc", max).unwrap();
    let mut b = odd.clone();
    *b.last_mut().unwrap() = 1;
    assert_eq!(decode_frame(&b, max), Err(FrameError::PaddingNotZero));
    assert!(matches!(
        encode_frame(&meta(0, 1), &[0; 100], 100),
        Err(FrameError::TooLarge {
            frame_len: 164,
            frame_bytes_max: 100
        })
    ));
    assert_eq!(
        encode_frame(&meta(0, 0), b"", max),
        Err(FrameError::ZeroRecordCount)
    );
    assert!(matches!(
        encode_frame(&meta(u64::MAX, 1), b"", max),
        Err(FrameError::OffsetOverflow { .. })
    ));
    let inverted = BatchMeta {
        max_timestamp_ms: 0,
        ..meta(0, 1)
    };
    assert!(matches!(
        encode_frame(&inverted, b"", max),
        Err(FrameError::TimestampsInverted { .. })
    ));
}

#[test]
fn typed_access_checked_and_trusted() {
    // Proves a payload archived with rkyv is readable zero-copy and a damaged one is rejected.
    let rec = TestRecord {
        id: 42,
        name: "broker-1".into(),
        flags: vec![true, false],
    };
    let payload = rkyv::to_bytes::<rkyv::rancor::Error>(&rec).unwrap();
    let frame = encode_frame(&meta(0, 1), &payload, DEFAULT_FRAME_BYTES_MAX).unwrap();
    let buf = crate::AlignedBuf::from_slice(&frame);
    let v = decode_frame(&buf, DEFAULT_FRAME_BYTES_MAX).unwrap();
    let a = v.access::<TestRecord>().unwrap();
    assert_eq!(a.id, 42);
    assert_eq!(a.name.as_str(), "broker-1");
    assert!(
        std::ptr::eq(v.payload().as_ptr(), buf[HEADER_BYTES..].as_ptr()),
        "no copy"
    );
    assert_eq!(a.flags.len(), 2);
    // A bool byte of 7 passes the (recomputed) checksum but not bytecheck.
    let mut bad = payload.to_vec();
    let pos = bad.iter().position(|&b| b == 1).unwrap();
    bad[pos] = 7;
    let frame = encode_frame(&meta(0, 1), &bad, DEFAULT_FRAME_BYTES_MAX).unwrap();
    let buf = crate::AlignedBuf::from_slice(&frame);
    let v = decode_frame(&buf, DEFAULT_FRAME_BYTES_MAX).unwrap();
    assert!(matches!(
        v.access::<TestRecord>(),
        Err(FrameError::PayloadInvalid { .. })
    ));
}

proptest! {
    #[test]
    fn decoder_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        // Proves arbitrary bytes never panic the decoder.
        let _ = decode_frame(&bytes, 256);
    }

    #[test]
    fn decoder_rejects_every_mutation(
        payload in proptest::collection::vec(any::<u8>(), 0..200),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        // Proves a frame with any changed byte in header or payload is never accepted as is.
        let good = encode_frame(&meta(5, 2), &payload, DEFAULT_FRAME_BYTES_MAX).unwrap();
        let mut bad = good.clone();
        for (idx, x) in &flips {
            let i = idx.index(bad.len());
            bad[i] ^= x;
        }
        prop_assume!(bad != good);
        // Every byte is either checksummed, required to be zero, or the checksum itself.
        if let Ok(v) = decode_frame(&bad, DEFAULT_FRAME_BYTES_MAX) {
            prop_assert!(false, "accepted a mutated frame: {:?}", v.header());
        }
    }
}

proptest! {
    #[test]
    fn append_encoder_matches_in_place_encoder(
        prefix in proptest::collection::vec(any::<u8>(), 0..100),
        payload_len in prop_oneof![0usize..300, 65_000usize..200_000],
        seed in any::<u8>(),
    ) {
        // Proves `encode_frame_append` writes the same bytes and header as
        // `encode_frame_into`, after whatever the buffer held, including payloads spanning
        // several copy pieces.
        let payload: Vec<u8> = (0..payload_len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
        let m = meta(77, 3);
        let mut expected = vec![0u8; frame_bytes_for_payload(payload.len())];
        let h1 = encode_frame_into(&mut expected, &m, &payload, DEFAULT_FRAME_BYTES_MAX).unwrap();
        let mut buf = AlignedBuf::from_slice(&prefix);
        let h2 = encode_frame_append(&mut buf, &m, &payload, DEFAULT_FRAME_BYTES_MAX).unwrap();
        prop_assert_eq!(h1, h2);
        prop_assert_eq!(&buf[..prefix.len()], &prefix[..]);
        prop_assert_eq!(&buf[prefix.len()..], &expected[..]);
    }
}

#[test]
fn append_encoder_leaves_buffer_unchanged_on_error() {
    // Proves a rejected frame (too large) does not grow or alter the buffer.
    let mut buf = AlignedBuf::from_slice(b"keep");
    let err = encode_frame_append(&mut buf, &meta(0, 1), &[0; 200], 128).unwrap_err();
    assert!(matches!(err, FrameError::TooLarge { .. }));
    assert_eq!(&buf[..], b"keep");
}
