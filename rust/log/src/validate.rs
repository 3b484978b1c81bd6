//! Record-level validation of produced batches: what Kafka's `LogValidator`
//! (magic 2, `AppendOrigin.CLIENT`) and `DefaultRecord` refuse, checked
//! before anything is written. [`crate::batch::check_batch`] has already
//! checked the framing, magic, size, CRC-32C, `recordCount > 0` and
//! `lastOffsetDelta == recordCount - 1` of every batch.
//!
//! Rules, per batch, in this order (any failure rejects the whole append):
//!
//! 1. codec (attributes bits 0-2) is 0-4, else UNSUPPORTED_COMPRESSION_TYPE
//!    (76). Kafka 4.0 fails `CompressionType.forId` with an
//!    IllegalArgumentException and so answers UNKNOWN_SERVER_ERROR; 76 is the
//!    code the protocol has for it and is not retriable.
//! 2. not a control batch (bit 5): INVALID_RECORD (87), "clients are not
//!    allowed to write control records".
//! 3. a producer id >= 0 needs a base sequence >= 0 (87), as Kafka.
//! 4. a transactional batch (bit 4) needs a producer id >= 0 (87). Kafka
//!    answers a transactional batch in a request without transactional id
//!    with TRANSACTIONAL_ID_AUTHORIZATION_FAILED and stores one that has
//!    both a transactional id and producer id -1; such a batch can never be
//!    ended by a marker (markers are per producer id), so it is refused here.
//! 5. the records section decompresses (gzip, xerial or raw snappy, lz4
//!    frame, zstd), to at most `decompressed_bytes_max`: else
//!    CORRUPT_MESSAGE (2). Kafka 4.0 wraps the decompressor's IOException in
//!    a plain KafkaException and answers UNKNOWN_SERVER_ERROR; 2 says what
//!    happened (Kafka's own pre-0.11 broker answered 2 for it).
//! 6. every record decodes with [`RecordIter`] (its doc lists the structure
//!    rules: lengths, varint widths, headers, exact record count, no bytes
//!    after the last record): else INVALID_RECORD (87), as Kafka's
//!    `InvalidRecordException`.
//! 7. offset deltas are 0, 1, .., n-1: else INVALID_RECORD. Kafka rewrites a
//!    compressed batch whose inner offsets are not so (and does not look at
//!    an uncompressed one); pybroker never re-encodes a producer's batch, and
//!    a batch stored with other deltas would give its records offsets outside
//!    the batch, so it is refused.
//! 8. on a compacted topic every record has a key: INVALID_RECORD.
//! 9. timestamps (Kafka's `validateTimestamp`): on a CreateTime topic a
//!    record timestamp other than -1 (NO_TIMESTAMP) must lie in
//!    `[now - timestamp_before_max_ms, now + timestamp_after_max_ms]`, and so
//!    must the batch's maxTimestamp (pybroker stores the header as sent and
//!    indexes by it; Kafka rewrites it from the records); a batch with the
//!    LogAppendTime bit (3) set is refused unless the topic is CreateTime and
//!    its timestamp is in range. Either failure: INVALID_TIMESTAMP (32).
//!
//! Cost: an uncompressed batch is walked in place (no copy); a compressed
//! one is decompressed into one buffer, as Kafka decompresses to validate.
//! This module does no I/O.

use crate::batch::{BatchHeader, BatchRef, HEADER_SIZE};
use crate::codec::{self, RecordIter};
use crate::error::{LogError, Result};

/// Kafka's NO_TIMESTAMP: a record without a timestamp.
pub const NO_TIMESTAMP: i64 = -1;
/// Highest codec id (zstd).
const CODEC_MAX: u8 = 4;

/// What a produced batch is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// The broker's clock, ms since the epoch.
    pub now_ms: i64,
    /// The topic's message.timestamp.type is LogAppendTime.
    pub log_append_time: bool,
    /// message.timestamp.before.max.ms: how far in the past a CreateTime
    /// timestamp may be.
    pub timestamp_before_max_ms: i64,
    /// message.timestamp.after.max.ms: how far in the future.
    pub timestamp_after_max_ms: i64,
    /// cleanup.policy includes compact: records need keys.
    pub compact: bool,
    /// Bound on one batch's decompressed records section.
    pub decompressed_bytes_max: usize,
}

impl Default for Rules {
    /// No timestamp bounds, not compacted (a log opened without topic config).
    fn default() -> Self {
        Rules {
            now_ms: 0,
            log_append_time: false,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            compact: false,
            decompressed_bytes_max: codec::DECOMPRESSED_BYTES_MAX,
        }
    }
}

impl Rules {
    /// Rule 9 for one timestamp of a batch.
    fn check_timestamp(&self, h: &BatchHeader, ts: i64, what: &str) -> Result<()> {
        if !self.log_append_time && ts != NO_TIMESTAMP {
            // i128: `now - ts` must not wrap for timestamps near i64::MIN/MAX
            let ahead_of = i128::from(self.now_ms) - i128::from(ts);
            if ahead_of > i128::from(self.timestamp_before_max_ms)
                || -ahead_of > i128::from(self.timestamp_after_max_ms)
            {
                let lo = i128::from(self.now_ms) - i128::from(self.timestamp_before_max_ms);
                let hi = i128::from(self.now_ms) + i128::from(self.timestamp_after_max_ms);
                return Err(LogError::InvalidTimestamp(format!(
                    "{what} timestamp {ts} is out of range; it should be within [{lo}, {hi}]"
                )));
            }
        } else if h.is_log_append_time() {
            return Err(LogError::InvalidTimestamp(
                "a producer may not set the timestamp type to LogAppendTime".into(),
            ));
        }
        Ok(())
    }
}

fn invalid(msg: String) -> LogError {
    LogError::InvalidRecord(msg)
}

/// Rules 1-4: what the header alone decides.
fn check_attributes(h: &BatchHeader) -> Result<()> {
    if h.codec() > CODEC_MAX {
        return Err(LogError::UnsupportedCompression(format!(
            "unknown compression codec id {}",
            h.codec()
        )));
    }
    if h.is_control() {
        return Err(invalid(
            "clients are not allowed to write control records".into(),
        ));
    }
    if h.producer_id >= 0 && h.base_sequence < 0 {
        return Err(invalid(format!(
            "invalid sequence number {} in a batch of producer {}",
            h.base_sequence, h.producer_id
        )));
    }
    if h.is_transactional() && h.producer_id < 0 {
        return Err(invalid(format!(
            "transactional batch without a producer id ({})",
            h.producer_id
        )));
    }
    Ok(())
}

/// Checks the records of one whole batch (`batch` starts at its baseOffset
/// and is exactly its size) whose header passed `check_batch`.
pub fn check_records(batch: &[u8], h: &BatchHeader, rules: &Rules) -> Result<()> {
    check_attributes(h)?;
    if !h.is_log_append_time() {
        rules.check_timestamp(h, h.max_timestamp, "batch max")?;
    }
    let body = &batch[HEADER_SIZE..h.size()];
    let owned;
    let data: &[u8] = if h.codec() == 0 {
        body
    } else {
        owned = codec::decompress(h.codec(), body, rules.decompressed_bytes_max)?;
        &owned
    };
    let mut count = 0i32;
    for r in RecordIter::new(*h, data) {
        let r = r?;
        if r.offset_delta != count {
            return Err(invalid(format!(
                "record {count} has offset delta {}, expected {count}",
                r.offset_delta
            )));
        }
        if rules.compact && r.key.is_none() {
            return Err(invalid(
                "a compacted topic cannot accept a record without a key".into(),
            ));
        }
        rules.check_timestamp(h, r.timestamp, "record")?;
        count += 1;
    }
    debug_assert_eq!(count, h.record_count, "RecordIter yields exactly recordCount");
    Ok(())
}

/// [`check_records`] for every batch `batch::validate_batches` found in `buf`.
pub fn check_produced(buf: &[u8], batches: &[BatchRef], rules: &Rules) -> Result<()> {
    for b in batches {
        check_records(&buf[b.position..b.position + b.header.size()], &b.header, rules)?;
    }
    Ok(())
}
