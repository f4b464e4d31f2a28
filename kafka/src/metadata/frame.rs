//! The metadata record frame: how Kafka puts a metadata record into the value of a Kafka
//! record (`MetadataRecordSerde`, on `AbstractApiMessageSerde`).
//!
//! | bytes | what |
//! |---|---|
//! | unsigned varint | frame version: 1 (Kafka refuses 0, KRaft's 2.8 preview, and anything else) |
//! | unsigned varint | the record's api key |
//! | unsigned varint | the record's version |
//! | the rest | the record at that version; nothing may follow it |

use bytes::{Bytes, BytesMut};

use super::error::{DecodeError, EncodeError};
use super::generated::AnyMetadataRecord;
use super::wire::{self, At};

/// The only frame version Kafka writes and reads.
pub const FRAME_VERSION: u32 = 1;

/// The name decode errors of the frame's own fields give.
const FRAME: &str = "metadata record frame";

fn varint(value: i16) -> u32 {
    u32::try_from(value).expect("api keys and checked versions are not negative")
}

impl AnyMetadataRecord {
    /// Writes the framed record at `version`, exactly [`Self::framed_len`] bytes; nothing when
    /// the record cannot be written at that version.
    pub fn encode_framed(&self, version: i16, buf: &mut BytesMut) -> Result<(), EncodeError> {
        let record_type = Self::record_type(self.api_key()).expect("every variant is a type");
        wire::check_encode_version(
            self.name(),
            version,
            record_type.lowest_version,
            record_type.highest_version,
        )?;
        let start = buf.len();
        wire::put_uvarint(buf, FRAME_VERSION);
        wire::put_uvarint(buf, varint(self.api_key()));
        wire::put_uvarint(buf, varint(version));
        if let Err(e) = self.encode(version, buf) {
            buf.truncate(start);
            return Err(e);
        }
        Ok(())
    }

    /// The bytes [`Self::encode_framed`] writes at `version` (meaningful where it succeeds).
    pub fn framed_len(&self, version: i16) -> usize {
        let version_len = u32::try_from(version).map_or(5, wire::uvarint_size);
        wire::uvarint_size(FRAME_VERSION)
            + wire::uvarint_size(varint(self.api_key()))
            + version_len
            + self.encoded_len(version)
    }

    /// Reads one framed record (all of `bytes`: nothing may follow it), and its version.
    pub fn decode_framed(bytes: Bytes) -> Result<(AnyMetadataRecord, i16), DecodeError> {
        let mut buf = bytes;
        let frame_version = wire::get_uvarint(&mut buf, At(FRAME, "frame version"))?;
        if frame_version != FRAME_VERSION {
            return Err(DecodeError::UnknownFrameVersion {
                frame_version: i64::from(frame_version),
            });
        }
        let api_key = wire::get_uvarint(&mut buf, At(FRAME, "api key"))?;
        let record_type = i16::try_from(api_key)
            .ok()
            .and_then(Self::record_type)
            .ok_or(DecodeError::UnknownApiKey {
                api_key: i64::from(api_key),
            })?;
        let version = wire::get_uvarint(&mut buf, At(FRAME, "version"))?;
        let Ok(version) = i16::try_from(version) else {
            return Err(DecodeError::UnsupportedVersion {
                record: record_type.name,
                version: i64::from(version),
                lowest: record_type.lowest_version,
                highest: record_type.highest_version,
            });
        };
        let record = Self::decode(record_type.api_key, &mut buf, version)?;
        if !buf.is_empty() {
            return Err(DecodeError::TrailingBytes {
                record: record_type.name,
                remaining: buf.len(),
            });
        }
        Ok((record, version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{
        DecodeError, FeatureLevelRecord, Malformed, NoOpRecord, RegisterBrokerRecord,
    };

    /// A NoOpRecord is the frame and an empty tagged-field section: 01 14 00 00.
    #[test]
    fn no_op_record_bytes() {
        let mut buf = BytesMut::new();
        let record = AnyMetadataRecord::from(NoOpRecord::default());
        record.encode_framed(0, &mut buf).expect("v0 encodes");
        assert_eq!(&buf[..], [0x01, 0x14, 0x00, 0x00]);
        assert_eq!(record.framed_len(0), 4);
        let (decoded, version) = AnyMetadataRecord::decode_framed(buf.freeze()).expect("decodes");
        assert_eq!((decoded, version), (record, 0));
    }

    /// A FeatureLevelRecord, byte by byte as Kafka writes it.
    #[test]
    fn feature_level_record_bytes() {
        let record = AnyMetadataRecord::from(FeatureLevelRecord {
            name: "metadata.version".to_owned(),
            feature_level: 27,
            ..FeatureLevelRecord::default()
        });
        let mut buf = BytesMut::new();
        record.encode_framed(0, &mut buf).expect("v0 encodes");
        let mut expected = vec![0x01, 0x0c, 0x00, 17];
        expected.extend_from_slice(b"metadata.version");
        expected.extend_from_slice(&[0x00, 27, 0x00]);
        assert_eq!(&buf[..], &expected[..]);
    }

    /// Frame versions other than 1, unknown api keys, versions out of range and trailing
    /// bytes are refused, each with its own error.
    #[test]
    fn refuses_bad_frames() {
        let decode = |bytes: &[u8]| AnyMetadataRecord::decode_framed(Bytes::copy_from_slice(bytes));
        assert_eq!(
            decode(&[0x00, 0x14, 0x00, 0x00]),
            Err(DecodeError::UnknownFrameVersion { frame_version: 0 })
        );
        assert_eq!(
            decode(&[0x02, 0x14, 0x00, 0x00]),
            Err(DecodeError::UnknownFrameVersion { frame_version: 2 })
        );
        assert_eq!(
            decode(&[0x01, 0x63, 0x00, 0x00]),
            Err(DecodeError::UnknownApiKey { api_key: 99 })
        );
        assert_eq!(
            decode(&[0x01, 0xff, 0xff, 0x03, 0x00, 0x00]),
            Err(DecodeError::UnknownApiKey { api_key: 65535 })
        );
        assert_eq!(
            decode(&[0x01, 0x14, 0x01, 0x00]),
            Err(DecodeError::UnsupportedVersion {
                record: "NoOpRecord",
                version: 1,
                lowest: 0,
                highest: 0,
            })
        );
        assert_eq!(
            decode(&[0x01, 0x14, 0x80, 0x80, 0x02, 0x00]),
            Err(DecodeError::UnsupportedVersion {
                record: "NoOpRecord",
                version: 32768,
                lowest: 0,
                highest: 0,
            })
        );
        assert_eq!(
            decode(&[0x01, 0x14, 0x00, 0x00, 0x00]),
            Err(DecodeError::TrailingBytes {
                record: "NoOpRecord",
                remaining: 1,
            })
        );
        assert_eq!(
            decode(&[0x01, 0x14]),
            Err(DecodeError::Field {
                record: FRAME,
                field: "version",
                reason: Malformed::Truncated {
                    needed: 1,
                    remaining: 0
                },
            })
        );
    }

    /// A record that cannot be written at a version leaves the buffer as it was.
    #[test]
    fn failed_encode_writes_nothing() {
        let record = AnyMetadataRecord::from(RegisterBrokerRecord {
            in_controlled_shutdown: true,
            ..RegisterBrokerRecord::default()
        });
        let mut buf = BytesMut::from(&b"before"[..]);
        assert!(record.encode_framed(0, &mut buf).is_err());
        assert!(record.encode_framed(4, &mut buf).is_err());
        assert!(record.encode_framed(-1, &mut buf).is_err());
        assert_eq!(&buf[..], b"before");
        record.encode_framed(1, &mut buf).expect("v1 has the field");
        assert_eq!(buf.len(), 6 + record.framed_len(1));
    }
}
