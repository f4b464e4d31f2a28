//! The runtime's network frame (`corum_runtime::frame`): the header, checksum and padding
//! every peer and client-protocol message travels in.
//!
//! The input is read as a stream of frames, as a connection's receiver reads it: each is
//! decoded with `frame::decode` until one fails (with an error, never a panic). A frame that
//! decodes re-encodes to exactly the bytes it came from (the layout has one spelling). Then the
//! input itself is sent as a payload: encoded, it decodes back to the same bytes, and with any
//! one byte of its header changed (picked by the input) it no longer does.

use corum_runtime::frame::{self, FrameHeader, HEADER_BYTES};

/// The limit the harness decodes under (a connection's `payload_bytes_max`).
const PAYLOAD_BYTES_MAX: u32 = 1 << 16;

pub fn run(data: &[u8]) {
    let mut rest = data;
    while !rest.is_empty() {
        if let Ok(h) = <&[u8; HEADER_BYTES]>::try_from(rest.get(..HEADER_BYTES).unwrap_or(&[])) {
            // The receiver's first step on a socket: the header alone.
            let _ = FrameHeader::decode(h, PAYLOAD_BYTES_MAX).map_err(|e| e.to_string());
        }
        match frame::decode(rest, PAYLOAD_BYTES_MAX) {
            Ok(f) => {
                assert!(f.payload.len() <= PAYLOAD_BYTES_MAX as usize);
                assert!(f.frame_bytes <= rest.len() && f.frame_bytes >= HEADER_BYTES);
                let mut again = Vec::new();
                frame::encode(f.payload, &mut again);
                assert_eq!(
                    again,
                    &rest[..f.frame_bytes],
                    "an accepted frame re-encodes to its own bytes"
                );
                rest = &rest[f.frame_bytes..];
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                break;
            }
        }
    }

    // The input as a payload.
    let mut out = Vec::new();
    frame::encode(data, &mut out);
    let f = frame::decode(&out, u32::MAX).expect("an encoded frame decodes");
    assert_eq!(f.payload, data);
    assert_eq!(f.frame_bytes, out.len());
    assert_eq!(out.len() % frame::PAYLOAD_ALIGN_BYTES, 0);
    if let Some(&pick) = data.first() {
        let at = usize::from(pick) % HEADER_BYTES;
        out[at] ^= 0x5a;
        assert!(
            frame::decode(&out, u32::MAX).is_err(),
            "a frame with header byte {at} changed is refused"
        );
    }
}

/// Seeds: frames of a few payloads (empty, one byte, a peer message's size, one at the limit
/// the harness decodes under), two frames in a row, and damaged ones.
#[allow(dead_code)]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let frame_of = |payload: &[u8]| {
        let mut out = Vec::new();
        frame::encode(payload, &mut out);
        out
    };
    let mut seeds = vec![
        ("empty-payload".to_owned(), frame_of(b"")),
        ("one-byte".to_owned(), frame_of(b"x")),
        ("hello".to_owned(), frame_of(b"hello")),
        (
            "at-limit".to_owned(),
            frame_of(&vec![7u8; PAYLOAD_BYTES_MAX as usize]),
        ),
    ];
    let mut two = frame_of(b"first");
    two.extend_from_slice(&frame_of(&[1, 2, 3, 4, 5, 6, 7, 8, 9]));
    seeds.push(("two-frames".to_owned(), two));
    let mut bad_crc = frame_of(b"checksum");
    bad_crc[12] ^= 1;
    seeds.push(("bad-checksum".to_owned(), bad_crc));
    let mut bad_pad = frame_of(b"pad");
    let last = bad_pad.len() - 1;
    bad_pad[last] = 1;
    seeds.push(("non-zero-padding".to_owned(), bad_pad));
    let mut too_large = frame_of(b"");
    too_large[8..12].copy_from_slice(&(PAYLOAD_BYTES_MAX + 1).to_le_bytes());
    seeds.push(("too-large".to_owned(), too_large));
    let whole = frame_of(b"truncated payload");
    seeds.push(("truncated".to_owned(), whole[..whole.len() - 9].to_vec()));
    seeds
}
