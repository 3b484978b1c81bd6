//! Record batch v2 (magic 2): header parsing, validation and in-place edits.
//!
//! Byte layout (all big-endian, 61-byte header, then the records):
//!
//! ```text
//! off  size field
//!   0     8 baseOffset            set by the broker
//!   8     4 batchLength           bytes after this field (total size - 12)
//!  12     4 partitionLeaderEpoch  set by the broker, not covered by the CRC
//!  16     1 magic                 must be 2
//!  17     4 crc                   CRC-32C (Castagnoli) of bytes 21..end
//!  21     2 attributes            bits 0-2 codec, 3 timestamp type, 4 txn, 5 control
//!  23     4 lastOffsetDelta
//!  27     8 baseTimestamp
//!  35     8 maxTimestamp
//!  43     8 producerId
//!  51     2 producerEpoch
//!  53     4 baseSequence
//!  57     4 recordCount
//!  61     . records (possibly compressed)
//! ```
//!
//! Invariants checked by [`check_batch`] (in this order): the 12-byte log
//! overhead and the 61-byte header are present; `batchLength >= 49` and the
//! whole batch fits in the buffer (a trailing partial batch is corrupt);
//! `magic == 2`; the batch size is at most `max_message_bytes`; the CRC
//! matches; `recordCount > 0` and `lastOffsetDelta == recordCount - 1`.
//!
//! Magic 0 and 1 (the pre-0.11 message sets) are not supported: they are
//! reported as [`LogError::Corrupt`] (CORRUPT_MESSAGE), on append and on
//! recovery alike, so a log never holds them.
//!
//! Records are never decoded here. Crash behaviour: this module does no I/O.

use crate::error::{LogError, Result};

/// Size of the baseOffset + batchLength prefix that batchLength excludes.
pub const LOG_OVERHEAD: usize = 12;
/// Size of the v2 batch header.
pub const HEADER_SIZE: usize = 61;
/// Smallest legal batchLength (a header with no records).
pub const MIN_BATCH_LENGTH: i32 = (HEADER_SIZE - LOG_OVERHEAD) as i32;

pub const BASE_OFFSET_AT: usize = 0;
pub const LENGTH_AT: usize = 8;
pub const LEADER_EPOCH_AT: usize = 12;
pub const MAGIC_AT: usize = 16;
pub const CRC_AT: usize = 17;
pub const ATTRIBUTES_AT: usize = 21;
pub const LAST_OFFSET_DELTA_AT: usize = 23;
pub const BASE_TIMESTAMP_AT: usize = 27;
pub const MAX_TIMESTAMP_AT: usize = 35;
pub const PRODUCER_ID_AT: usize = 43;
pub const PRODUCER_EPOCH_AT: usize = 51;
pub const BASE_SEQUENCE_AT: usize = 53;
pub const RECORD_COUNT_AT: usize = 57;

/// Attributes bit 3: timestamps are LogAppendTime.
pub const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
/// Attributes bit 4: transactional batch.
pub const TRANSACTIONAL_BIT: i16 = 1 << 4;
/// Attributes bit 5: control batch.
pub const CONTROL_BIT: i16 = 1 << 5;
/// Attributes bits 0-2: compression codec.
pub const CODEC_MASK: i16 = 0x07;

pub(crate) fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
pub(crate) fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
pub(crate) fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
pub(crate) fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// The decoded 61-byte header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Decodes the header fields. `b` must hold at least [`HEADER_SIZE`] bytes.
    pub fn parse(b: &[u8]) -> BatchHeader {
        BatchHeader {
            base_offset: be_i64(b, BASE_OFFSET_AT),
            batch_length: be_i32(b, LENGTH_AT),
            partition_leader_epoch: be_i32(b, LEADER_EPOCH_AT),
            magic: b[MAGIC_AT] as i8,
            crc: be_u32(b, CRC_AT),
            attributes: be_i16(b, ATTRIBUTES_AT),
            last_offset_delta: be_i32(b, LAST_OFFSET_DELTA_AT),
            base_timestamp: be_i64(b, BASE_TIMESTAMP_AT),
            max_timestamp: be_i64(b, MAX_TIMESTAMP_AT),
            producer_id: be_i64(b, PRODUCER_ID_AT),
            producer_epoch: be_i16(b, PRODUCER_EPOCH_AT),
            base_sequence: be_i32(b, BASE_SEQUENCE_AT),
            record_count: be_i32(b, RECORD_COUNT_AT),
        }
    }

    /// Total bytes of the batch in the log (batchLength + 12).
    pub fn size(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }
    /// Offset of the last record (base offset + lastOffsetDelta).
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    /// Offset after this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    /// Compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn codec(&self) -> u8 {
        (self.attributes & CODEC_MASK) as u8
    }
    /// True when the timestamps are LogAppendTime.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }
}

/// Checks only what can be checked without the CRC: the length prefix, the
/// header and the magic byte. Returns the header. Used by the clean-shutdown
/// tail scan and by readers that trust the file.
pub fn check_framing(buf: &[u8]) -> Result<BatchHeader> {
    if buf.len() < HEADER_SIZE {
        return Err(LogError::Corrupt(format!(
            "{} bytes left, less than a batch header",
            buf.len()
        )));
    }
    let length = be_i32(buf, LENGTH_AT);
    if length < MIN_BATCH_LENGTH {
        return Err(LogError::Corrupt(format!(
            "batch length {length} < {MIN_BATCH_LENGTH}"
        )));
    }
    let size = length as usize + LOG_OVERHEAD;
    if size > buf.len() {
        return Err(LogError::Corrupt(format!(
            "batch of {size} bytes but only {} bytes left",
            buf.len()
        )));
    }
    let magic = buf[MAGIC_AT] as i8;
    if magic != 2 {
        return Err(LogError::Corrupt(format!("unsupported magic {magic}")));
    }
    Ok(BatchHeader::parse(buf))
}

/// CRC-32C of attributes..end of the batch starting at `buf[0]`.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES_AT..])
}

/// Validates the batch at the start of `buf` (which may hold more bytes
/// after it) and returns its header. See the module doc for the checks.
pub fn check_batch(buf: &[u8], max_message_bytes: usize) -> Result<BatchHeader> {
    check(buf, max_message_bytes, true)
}

/// [`check_batch`] for batches already in the log (recovery): a batch the
/// cleaner compacted keeps its lastOffsetDelta while records were removed,
/// so only `lastOffsetDelta >= recordCount - 1` is required.
pub fn check_stored_batch(buf: &[u8]) -> Result<BatchHeader> {
    check(buf, usize::MAX, false)
}

fn check(buf: &[u8], max_message_bytes: usize, strict: bool) -> Result<BatchHeader> {
    let h = check_framing(buf)?;
    let size = h.size();
    if size > max_message_bytes {
        return Err(LogError::RecordTooLarge {
            size: size as u64,
            max_bytes: max_message_bytes as u64,
        });
    }
    let crc = compute_crc(&buf[..size]);
    if crc != h.crc {
        return Err(LogError::Corrupt(format!(
            "crc mismatch: stored {:#010x}, computed {crc:#010x}",
            h.crc
        )));
    }
    if h.record_count <= 0 {
        return Err(LogError::InvalidRecord(format!(
            "record count {}",
            h.record_count
        )));
    }
    let bad_delta = if strict {
        h.last_offset_delta != h.record_count - 1
    } else {
        h.last_offset_delta < h.record_count - 1
    };
    if bad_delta {
        return Err(LogError::InvalidRecord(format!(
            "last offset delta {} with {} records",
            h.last_offset_delta, h.record_count
        )));
    }
    Ok(h)
}

/// A validated batch inside a produce buffer.
#[derive(Debug, Clone, Copy)]
pub struct BatchRef {
    /// Position of the batch in the buffer.
    pub position: usize,
    pub header: BatchHeader,
}

/// Validates every batch of a buffer holding one or more whole batches.
/// Any error rejects the whole buffer; an empty buffer is corrupt.
pub fn validate_batches(buf: &[u8], max_message_bytes: usize) -> Result<Vec<BatchRef>> {
    if buf.is_empty() {
        return Err(LogError::Corrupt("no record batch".into()));
    }
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let header = check_batch(&buf[pos..], max_message_bytes)?;
        out.push(BatchRef {
            position: pos,
            header,
        });
        pos += header.size();
    }
    Ok(out)
}

/// Writes baseOffset in place (not covered by the CRC).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Writes partitionLeaderEpoch in place (not covered by the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Sets maxTimestamp and the LogAppendTime attribute bit in a 61-byte
/// header, and returns the CRC to store for the batch whose records are
/// `records` (the bytes after the header). Writes the new CRC into `header`.
pub fn set_log_append_time(header: &mut [u8], records: &[u8], timestamp_ms: i64) -> u32 {
    let attributes = be_i16(header, ATTRIBUTES_AT) | TIMESTAMP_TYPE_BIT;
    header[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    header[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&timestamp_ms.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[ATTRIBUTES_AT..HEADER_SIZE]), records);
    header[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Record};

    fn batch(n: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(0, 1000);
        for i in 0..n {
            b.push(Record::new(
                1000 + i as i64,
                None,
                Some(format!("v{i}").as_bytes()),
            ));
        }
        b.build()
    }

    #[test]
    fn header_fields_round_trip() {
        let b = batch(3);
        let h = check_batch(&b, usize::MAX).unwrap();
        assert_eq!(h.size(), b.len());
        assert_eq!(h.record_count, 3);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.max_timestamp, 1002);
        assert_eq!(h.magic, 2);
    }

    #[test]
    fn rejects_bad_crc_magic_length_and_counts() {
        let b = batch(2);
        let mut bad = b.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(
            check_batch(&bad, usize::MAX),
            Err(LogError::Corrupt(_))
        ));
        let mut bad = b.clone();
        bad[MAGIC_AT] = 1;
        assert!(matches!(
            check_batch(&bad, usize::MAX),
            Err(LogError::Corrupt(_))
        ));
        let mut bad = b.clone();
        bad[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&10i32.to_be_bytes());
        assert!(matches!(
            check_batch(&bad, usize::MAX),
            Err(LogError::Corrupt(_))
        ));
        assert!(matches!(
            check_batch(&b[..b.len() - 1], usize::MAX),
            Err(LogError::Corrupt(_))
        ));
        let mut bad = b.clone();
        bad[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&5i32.to_be_bytes());
        let crc = compute_crc(&bad);
        bad[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            check_batch(&bad, usize::MAX),
            Err(LogError::InvalidRecord(_))
        ));
        assert!(matches!(
            check_batch(&b, b.len() - 1),
            Err(LogError::RecordTooLarge { .. })
        ));
    }

    #[test]
    fn validate_rejects_trailing_partial_batch() {
        let mut buf = batch(1);
        let n = buf.len();
        buf.extend_from_slice(&batch(2));
        assert_eq!(validate_batches(&buf, usize::MAX).unwrap().len(), 2);
        buf.extend_from_slice(&[0, 0, 0]);
        assert!(validate_batches(&buf, usize::MAX).is_err());
        assert_eq!(validate_batches(&buf[..n], usize::MAX).unwrap().len(), 1);
        assert!(validate_batches(&[], usize::MAX).is_err());
    }

    #[test]
    fn in_place_edits_keep_crc_valid() {
        let mut b = batch(2);
        set_base_offset(&mut b, 77);
        set_partition_leader_epoch(&mut b, 9);
        let h = check_batch(&b, usize::MAX).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (77, 9));
        let (head, records) = b.split_at_mut(HEADER_SIZE);
        set_log_append_time(head, records, 5555);
        let h = check_batch(&b, usize::MAX).unwrap();
        assert!(h.is_log_append_time());
        assert_eq!(h.max_timestamp, 5555);
    }
}
