//! The wire frame: a fixed 16-byte header followed by the payload, padded to 8 bytes. Pure: no
//! IO, so it is shared by the TCP transport, tests and fuzzing.
//!
//! # Layout (all integers little-endian)
//!
//! | offset | size | field          | meaning                                                 |
//! |--------|------|----------------|---------------------------------------------------------|
//! | 0      | 4    | magic          | `b"CRMF"` (0x43 0x52 0x4D 0x46)                         |
//! | 4      | 2    | version        | [`FrameVersion`]; only `1` exists                       |
//! | 6      | 2    | flags          | reserved, must be 0                                     |
//! | 8      | 4    | payload length | `L`, bytes of payload, excluding padding                |
//! | 12     | 4    | crc32c         | CRC-32C of bytes 0..12, then of the `L` payload bytes   |
//! | 16     | L    | payload        | rkyv archive of the message                             |
//! | 16+L   | P    | padding        | `P = (8 - L % 8) % 8` zero bytes                        |
//!
//! A frame is `16 + L + P` bytes, always a multiple of 8, so when frames are read back to back
//! into an aligned buffer every payload starts 8-byte aligned, as rkyv archives require. The
//! checksum covers the header fields too, so a flipped length or version bit is caught even when
//! the resulting value is plausible. Padding is checked to be zero so that every byte of a frame
//! is verified.
//!
//! Decoding checks, in order: magic ([`FrameError::BadMagic`]), version
//! ([`FrameError::UnsupportedVersion`]), flags ([`FrameError::UnsupportedFlags`]), length against
//! the receiver's limit ([`FrameError::TooLarge`], before any payload is buffered), presence of
//! the whole frame ([`FrameError::Truncated`]), checksum ([`FrameError::BadChecksum`]) and padding
//! ([`FrameError::NonZeroPadding`]).

/// The frame magic.
pub const MAGIC: [u8; 4] = *b"CRMF";
/// Size of the header in bytes.
pub const HEADER_BYTES: usize = 16;
/// Alignment of payloads within a stream of frames.
pub const PAYLOAD_ALIGN_BYTES: usize = 8;
/// The default per-connection frame payload limit (16 MiB).
pub const DEFAULT_PAYLOAD_BYTES_MAX: u32 = 16 << 20;

/// Frame format versions. A new layout gets a new variant; decoders reject the unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum FrameVersion {
    /// The layout documented in this module.
    V1 = 1,
}

impl FrameVersion {
    /// The version encoders write.
    pub const CURRENT: FrameVersion = FrameVersion::V1;

    fn from_u16(v: u16) -> Option<FrameVersion> {
        match v {
            1 => Some(FrameVersion::V1),
            _ => None,
        }
    }
}

/// Why bytes are not a valid frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("bad magic {found:02x?}")]
    BadMagic { found: [u8; 4] },
    #[error("unsupported frame version {found}")]
    UnsupportedVersion { found: u16 },
    #[error("unsupported frame flags {found:#06x}")]
    UnsupportedFlags { found: u16 },
    #[error("payload of {payload_bytes} bytes exceeds the limit of {payload_bytes_max} bytes")]
    TooLarge {
        payload_bytes: u32,
        payload_bytes_max: u32,
    },
    #[error("truncated frame: {needed} bytes needed, {available} available")]
    Truncated { needed: usize, available: usize },
    #[error("bad checksum: header says {expected:#010x}, bytes give {actual:#010x}")]
    BadChecksum { expected: u32, actual: u32 },
    #[error("non-zero padding after the payload")]
    NonZeroPadding,
}

/// Padding after a payload of `payload_bytes` bytes.
pub const fn padding_bytes(payload_bytes: usize) -> usize {
    (PAYLOAD_ALIGN_BYTES - payload_bytes % PAYLOAD_ALIGN_BYTES) % PAYLOAD_ALIGN_BYTES
}

/// Payload plus padding: the bytes that follow the header.
pub const fn body_bytes(payload_bytes: usize) -> usize {
    payload_bytes + padding_bytes(payload_bytes)
}

/// A decoded header whose magic, version, flags and length limit have been checked; the
/// checksum is checked by [`FrameHeader::verify_body`] once the body is present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub version: FrameVersion,
    pub payload_bytes: u32,
    pub crc32c: u32,
}

impl FrameHeader {
    /// Parses and checks a header (everything except the checksum).
    pub fn decode(
        bytes: &[u8; HEADER_BYTES],
        payload_bytes_max: u32,
    ) -> Result<FrameHeader, FrameError> {
        let magic: [u8; 4] = bytes[0..4].try_into().expect("4-byte slice");
        if magic != MAGIC {
            return Err(FrameError::BadMagic { found: magic });
        }
        let version_raw = u16::from_le_bytes(bytes[4..6].try_into().expect("2-byte slice"));
        let version = FrameVersion::from_u16(version_raw)
            .ok_or(FrameError::UnsupportedVersion { found: version_raw })?;
        let flags = u16::from_le_bytes(bytes[6..8].try_into().expect("2-byte slice"));
        if flags != 0 {
            return Err(FrameError::UnsupportedFlags { found: flags });
        }
        let payload_bytes = u32::from_le_bytes(bytes[8..12].try_into().expect("4-byte slice"));
        if payload_bytes > payload_bytes_max {
            return Err(FrameError::TooLarge {
                payload_bytes,
                payload_bytes_max,
            });
        }
        let crc32c = u32::from_le_bytes(bytes[12..16].try_into().expect("4-byte slice"));
        Ok(FrameHeader {
            version,
            payload_bytes,
            crc32c,
        })
    }

    /// Bytes after the header: payload plus padding.
    pub fn body_bytes(&self) -> usize {
        body_bytes(self.payload_bytes as usize)
    }

    /// Checks the checksum and padding of `body` (exactly [`Self::body_bytes`] long).
    pub fn verify_body(&self, body: &[u8]) -> Result<(), FrameError> {
        let needed = self.body_bytes();
        if body.len() < needed {
            return Err(FrameError::Truncated {
                needed: HEADER_BYTES + needed,
                available: HEADER_BYTES + body.len(),
            });
        }
        let payload_len = self.payload_bytes as usize;
        let actual = checksum(self.version, self.payload_bytes, &body[..payload_len]);
        if actual != self.crc32c {
            return Err(FrameError::BadChecksum {
                expected: self.crc32c,
                actual,
            });
        }
        if body[payload_len..needed].iter().any(|b| *b != 0) {
            return Err(FrameError::NonZeroPadding);
        }
        Ok(())
    }
}

/// The header bytes 0..12 for a payload length, as written.
fn header_prefix(version: FrameVersion, payload_bytes: u32) -> [u8; 12] {
    let mut h = [0u8; 12];
    h[0..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&(version as u16).to_le_bytes());
    // Bytes 6..8 (flags) stay zero.
    h[8..12].copy_from_slice(&payload_bytes.to_le_bytes());
    h
}

fn checksum(version: FrameVersion, payload_bytes: u32, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&header_prefix(version, payload_bytes));
    crc32c::crc32c_append(crc, payload)
}

/// Writes the header for `payload` into `out[..16]`.
pub fn write_header(out: &mut [u8], payload: &[u8]) {
    let payload_bytes = u32::try_from(payload.len()).expect("payload length checked by caller");
    let prefix = header_prefix(FrameVersion::CURRENT, payload_bytes);
    out[0..12].copy_from_slice(&prefix);
    let crc = checksum(FrameVersion::CURRENT, payload_bytes, payload);
    out[12..16].copy_from_slice(&crc.to_le_bytes());
}

/// Appends a whole frame (header, payload, padding) carrying `payload` to `out`.
///
/// Panics if the payload is longer than `u32::MAX`; callers check their own limit first.
pub fn encode(payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + HEADER_BYTES, 0);
    write_header(&mut out[start..], payload);
    out.extend_from_slice(payload);
    out.resize(out.len() + padding_bytes(payload.len()), 0);
}

/// A frame decoded from a byte slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodedFrame<'a> {
    pub header: FrameHeader,
    /// The payload, without padding.
    pub payload: &'a [u8],
    /// Bytes of `input` the frame occupied.
    pub frame_bytes: usize,
}

/// Decodes the first frame of `input`, checking everything, including the checksum.
pub fn decode(input: &[u8], payload_bytes_max: u32) -> Result<DecodedFrame<'_>, FrameError> {
    let header_bytes: &[u8; HEADER_BYTES] = input
        .get(..HEADER_BYTES)
        .ok_or(FrameError::Truncated {
            needed: HEADER_BYTES,
            available: input.len(),
        })?
        .try_into()
        .expect("16-byte slice");
    let header = FrameHeader::decode(header_bytes, payload_bytes_max)?;
    let body = &input[HEADER_BYTES..];
    let body_len = header.body_bytes();
    if body.len() < body_len {
        return Err(FrameError::Truncated {
            needed: HEADER_BYTES + body_len,
            available: input.len(),
        });
    }
    header.verify_body(&body[..body_len])?;
    Ok(DecodedFrame {
        header,
        payload: &body[..header.payload_bytes as usize],
        frame_bytes: HEADER_BYTES + body_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_bytes() {
        // The exact bytes of a known frame; any change of layout, field order or checksum
        // coverage fails here and must come with a new FrameVersion.
        let mut out = Vec::new();
        encode(b"hello", &mut out);
        #[rustfmt::skip]
        let expected: [u8; 24] = [
            b'C', b'R', b'M', b'F', // magic
            0x01, 0x00,             // version 1
            0x00, 0x00,             // flags
            0x05, 0x00, 0x00, 0x00, // payload length 5
            0x20, 0x01, 0x82, 0x07, // crc32c 0x07820120 over bytes 0..12 + payload
            b'h', b'e', b'l', b'l', b'o',
            0x00, 0x00, 0x00,       // padding to a multiple of 8
        ];
        assert_eq!(out, expected);
        let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..12]), b"hello");
        assert_eq!(crc, 0x0782_0120);
        assert_eq!(out.len() % PAYLOAD_ALIGN_BYTES, 0);
    }

    #[test]
    fn round_trips_all_small_lengths() {
        // Every payload length from 0 to 64 survives encode/decode and fills a multiple of 8.
        for len in 0..=64usize {
            let payload: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
            let mut out = Vec::new();
            encode(&payload, &mut out);
            assert_eq!(out.len(), HEADER_BYTES + body_bytes(len));
            assert_eq!(out.len() % 8, 0);
            let f = decode(&out, 1024).unwrap();
            assert_eq!(f.payload, &payload[..]);
            assert_eq!(f.frame_bytes, out.len());
        }
    }

    #[test]
    fn back_to_back_frames_decode_in_sequence() {
        // Two frames in one buffer decode one after the other using frame_bytes.
        let mut out = Vec::new();
        encode(b"first", &mut out);
        encode(b"second frame", &mut out);
        let a = decode(&out, 100).unwrap();
        let b = decode(&out[a.frame_bytes..], 100).unwrap();
        assert_eq!(
            (a.payload, b.payload),
            (&b"first"[..], &b"second frame"[..])
        );
        assert_eq!(a.frame_bytes + b.frame_bytes, out.len());
    }

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(payload, &mut out);
        out
    }

    #[test]
    fn each_error_is_distinct() {
        // Each kind of damage maps to its own error variant.
        let good = frame(b"payload!");
        let mut f = good.clone();
        f[0] = b'X';
        assert!(matches!(decode(&f, 100), Err(FrameError::BadMagic { .. })));
        let mut f = good.clone();
        f[4] = 2;
        assert_eq!(
            decode(&f, 100),
            Err(FrameError::UnsupportedVersion { found: 2 })
        );
        let mut f = good.clone();
        f[6] = 1;
        assert_eq!(
            decode(&f, 100),
            Err(FrameError::UnsupportedFlags { found: 1 })
        );
        assert_eq!(
            decode(&good, 7),
            Err(FrameError::TooLarge {
                payload_bytes: 8,
                payload_bytes_max: 7
            })
        );
        assert_eq!(
            decode(&good[..20], 100),
            Err(FrameError::Truncated {
                needed: 24,
                available: 20
            })
        );
        assert!(matches!(
            decode(&good[..3], 100),
            Err(FrameError::Truncated { .. })
        ));
        let mut f = good.clone();
        f[17] ^= 1;
        assert!(matches!(
            decode(&f, 100),
            Err(FrameError::BadChecksum { .. })
        ));
        let mut f = frame(b"abc");
        f[HEADER_BYTES + 4] = 9;
        assert_eq!(decode(&f, 100), Err(FrameError::NonZeroPadding));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic_or_pass_a_bad_checksum(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            // Arbitrary input never panics, and anything accepted carries a correct checksum.
            if let Ok(f) = decode(&bytes, 1 << 20) {
                prop_assert_eq!(checksum(f.header.version, f.header.payload_bytes, f.payload), f.header.crc32c);
            }
        }

        #[test]
        fn magic_prefixed_random_bytes_never_pass_a_bad_checksum(
            len in 0u32..64, rest in proptest::collection::vec(any::<u8>(), 0..96)
        ) {
            // With a plausible header, random bodies are still never accepted without a
            // matching checksum (this drives the decoder past the header checks).
            let mut bytes = header_prefix(FrameVersion::V1, len).to_vec();
            bytes.extend_from_slice(&rest);
            if let Ok(f) = decode(&bytes, 1 << 20) {
                prop_assert_eq!(checksum(f.header.version, f.header.payload_bytes, f.payload), f.header.crc32c);
            }
        }

        #[test]
        fn any_single_byte_mutation_is_rejected(
            payload in proptest::collection::vec(any::<u8>(), 0..200),
            index in any::<prop::sample::Index>(),
            xor in 1u8..=255,
        ) {
            // Changing any one byte of a frame makes it fail to decode.
            let mut f = frame(&payload);
            let i = index.index(f.len());
            f[i] ^= xor;
            prop_assert!(decode(&f, 1 << 20).is_err());
        }

        #[test]
        fn every_strict_prefix_is_truncated(payload in proptest::collection::vec(any::<u8>(), 0..100), cut in any::<prop::sample::Index>()) {
            // A frame cut short anywhere is reported as truncated, never accepted.
            let f = frame(&payload);
            let cut = cut.index(f.len());
            let is_truncated = matches!(decode(&f[..cut], 1 << 20), Err(FrameError::Truncated { .. }));
            prop_assert!(is_truncated);
        }

        #[test]
        fn round_trip(payload in proptest::collection::vec(any::<u8>(), 0..2048)) {
            // Any payload survives a round trip.
            let f = frame(&payload);
            let d = decode(&f, 1 << 20).unwrap();
            prop_assert_eq!(d.payload, &payload[..]);
        }
    }
}
