//! Kafka's RecordBatch (magic 2), written: what a broker's metadata fetcher, a snapshot file
//! and `kafka-dump-log` read.
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | base offset |
//! | 8..12 | batch length: the bytes after this field |
//! | 12..16 | partition leader epoch |
//! | 16 | magic (2) |
//! | 17..21 | CRC-32C of bytes 21.. |
//! | 21..23 | attributes (bit 5: control batch; no compression, create time, not transactional) |
//! | 23..27 | last offset delta |
//! | 27..35 | base timestamp |
//! | 35..43 | max timestamp |
//! | 43..51 | producer id (-1) |
//! | 51..53 | producer epoch (-1) |
//! | 53..57 | base sequence (-1) |
//! | 57..61 | record count |
//! | 61.. | records |
//!
//! A record: its length (zig-zag varint), attributes (0), timestamp delta (varlong), offset
//! delta (varint), key length and key (-1: none), value length and value, header count (0).
//! Every record of a corum batch keeps the batch's first timestamp (corum stamps batches, not
//! records), so each timestamp delta is 0.

use bytes::{BufMut, BytesMut};

/// Bytes before the first record.
pub const BATCH_HEADER_BYTES: usize = 61;
/// The attribute bit of a control batch.
pub const CONTROL_ATTRIBUTE: i16 = 0x20;
const MAGIC: i8 = 2;
const CRC_START: usize = 21;
const LENGTH_START: usize = 8;

/// One batch being written into a buffer: [`BatchWriter::begin`], a record at a time, then
/// [`BatchWriter::finish`], which fills in the lengths, count and checksum.
pub struct BatchWriter<'a> {
    buf: &'a mut BytesMut,
    start: usize,
    records: i32,
}

/// What a batch's header says besides its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub base_offset: i64,
    pub leader_epoch: i32,
    pub control: bool,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
}

impl<'a> BatchWriter<'a> {
    /// Starts a batch at the end of `buf`.
    pub fn begin(buf: &'a mut BytesMut, meta: BatchMeta) -> BatchWriter<'a> {
        let start = buf.len();
        buf.reserve(BATCH_HEADER_BYTES);
        buf.put_i64(meta.base_offset);
        buf.put_i32(0); // length, set by finish
        buf.put_i32(meta.leader_epoch);
        buf.put_i8(MAGIC);
        buf.put_u32(0); // CRC, set by finish
        buf.put_i16(if meta.control { CONTROL_ATTRIBUTE } else { 0 });
        buf.put_i32(0); // last offset delta, set by finish
        buf.put_i64(meta.base_timestamp);
        buf.put_i64(meta.max_timestamp.max(meta.base_timestamp));
        buf.put_i64(-1); // producer id
        buf.put_i16(-1); // producer epoch
        buf.put_i32(-1); // base sequence
        buf.put_i32(0); // record count, set by finish
        BatchWriter {
            buf,
            start,
            records: 0,
        }
    }

    /// Appends the next record (its offset is the base offset plus the records before it).
    pub fn record(&mut self, key: Option<&[u8]>, value: &[u8]) {
        let offset_delta = self.records;
        let key_len = key.map_or(-1, |k| k.len() as i64);
        let body = 1 // attributes
            + varint_len(0) // timestamp delta
            + varint_len(i64::from(offset_delta))
            + varint_len(key_len)
            + key.map_or(0, <[u8]>::len)
            + varint_len(value.len() as i64)
            + value.len()
            + varint_len(0); // headers
        self.buf.reserve(body + 5);
        put_varint(self.buf, body as i64);
        self.buf.put_i8(0);
        put_varint(self.buf, 0);
        put_varint(self.buf, i64::from(offset_delta));
        put_varint(self.buf, key_len);
        if let Some(k) = key {
            self.buf.put_slice(k);
        }
        put_varint(self.buf, value.len() as i64);
        self.buf.put_slice(value);
        put_varint(self.buf, 0);
        self.records += 1;
    }

    /// Records written so far.
    pub fn len(&self) -> i32 {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Completes the header. A batch needs at least one record (Kafka refuses empty ones).
    pub fn finish(self) {
        assert!(self.records > 0, "a Kafka batch holds at least one record");
        let s = self.start;
        let total = self.buf.len() - s;
        let b = &mut self.buf[s..];
        b[LENGTH_START..LENGTH_START + 4]
            .copy_from_slice(&((total - LENGTH_START - 4) as i32).to_be_bytes()); // after itself
        b[23..27].copy_from_slice(&(self.records - 1).to_be_bytes());
        b[57..61].copy_from_slice(&self.records.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
    }
}

/// Bytes of `v` as a zig-zag varint (Kafka's varint and varlong).
pub fn varint_len(v: i64) -> usize {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while z >= 0x80 {
        z >>= 7;
        n += 1;
    }
    n
}

/// Writes `v` as a zig-zag varint.
pub fn put_varint(buf: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.put_u8((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;
    use proptest::prelude::*;

    fn write(meta: BatchMeta, records: &[(Option<Vec<u8>>, Vec<u8>)]) -> BytesMut {
        let mut buf = BytesMut::new();
        let mut w = BatchWriter::begin(&mut buf, meta);
        for (k, v) in records {
            w.record(k.as_deref(), v);
        }
        w.finish();
        buf
    }

    proptest! {
        /// The kafka-protocol crate's own decoder (written by others, checking the CRC) reads
        /// back every batch as written.
        #[test]
        fn an_independent_decoder_reads_what_was_written(
            base in 0i64..1 << 40,
            epoch in 0i32..1 << 20,
            control: bool,
            ts in 0i64..1 << 42,
            later in 0i64..1000,
            records in proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
                 proptest::collection::vec(any::<u8>(), 0..300)),
                1..20),
        ) {
            let meta = BatchMeta {
                base_offset: base,
                leader_epoch: epoch,
                control,
                base_timestamp: ts,
                max_timestamp: ts + later,
            };
            let mut bytes = write(meta, &records).freeze();
            let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
            prop_assert_eq!(set.records.len(), records.len());
            for (i, (r, (k, v))) in set.records.iter().zip(&records).enumerate() {
                prop_assert_eq!(r.offset, base + i as i64);
                prop_assert_eq!(r.partition_leader_epoch, epoch);
                prop_assert_eq!(r.control, control);
                prop_assert_eq!(r.timestamp, ts);
                prop_assert_eq!(r.producer_id, -1);
                prop_assert_eq!(r.key.as_deref(), k.as_deref());
                prop_assert_eq!(r.value.as_deref(), Some(v.as_slice()));
                prop_assert!(r.headers.is_empty());
            }
        }
    }

    #[test]
    fn the_header_is_laid_out_as_kafka_lays_it() {
        let meta = BatchMeta {
            base_offset: 7,
            leader_epoch: 3,
            control: true,
            base_timestamp: 1000,
            max_timestamp: 1005,
        };
        let b = write(meta, &[(Some(vec![0, 0, 0, 2]), vec![1, 2, 3])]);
        assert_eq!(&b[0..8], &7i64.to_be_bytes());
        assert_eq!(
            i32::from_be_bytes(b[8..12].try_into().unwrap()) as usize,
            b.len() - 12
        );
        assert_eq!(&b[12..16], &3i32.to_be_bytes());
        assert_eq!(b[16], 2);
        assert_eq!(&b[21..23], &0x20i16.to_be_bytes());
        assert_eq!(&b[23..27], &0i32.to_be_bytes());
        assert_eq!(&b[35..43], &1005i64.to_be_bytes());
        assert_eq!(&b[57..61], &1i32.to_be_bytes());
        let crc = u32::from_be_bytes(b[17..21].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&b[21..]));
    }

    #[test]
    fn varints_are_zig_zag() {
        for (v, bytes) in [
            (0i64, vec![0u8]),
            (-1, vec![1]),
            (1, vec![2]),
            (63, vec![0x7e]),
            (64, vec![0x80, 0x01]),
            (-65, vec![0x81, 0x01]),
        ] {
            let mut b = BytesMut::new();
            put_varint(&mut b, v);
            assert_eq!(&b[..], &bytes[..], "{v}");
            assert_eq!(varint_len(v), bytes.len());
        }
    }
}
