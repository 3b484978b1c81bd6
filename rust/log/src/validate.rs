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
//! Rules 8 and 9 are per record, as in Kafka's `validateRecord`: every record
//! of the batch is checked (the key first, then the timestamp; one error per
//! record) and, if any failed, the batch is refused with
//! [`LogError::Records`], which lists the bad records' indexes and messages
//! (the Produce response's `record_errors`, KIP-467; a client such as
//! librdkafka fails those records with the error and the rest of the batch
//! with INVALID_DIFFERENT_RECORD). The batch's maxTimestamp is checked after
//! its records, so a record out of range is reported by its index.
//!
//! Cost: an uncompressed batch is walked in place (no copy); a compressed
//! one is decompressed into one buffer, as Kafka decompresses to validate.
//! This module does no I/O.

use crate::batch::{BatchHeader, BatchRef, HEADER_SIZE};
use crate::codec::{self, RecordIter};
use crate::error::{LogError, RecordError, Result};

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
    /// Rule 9 for one timestamp of a batch: the reason it is refused, if it is.
    fn timestamp_error(&self, h: &BatchHeader, ts: i64, what: &str) -> Option<String> {
        if !self.log_append_time && ts != NO_TIMESTAMP {
            // i128: `now - ts` must not wrap for timestamps near i64::MIN/MAX;
            // a bound of i64::MAX (the default of before.max.ms) is no bound
            let behind = i128::from(self.now_ms) - i128::from(ts);
            let bounded = |max: i64| max != i64::MAX;
            if (bounded(self.timestamp_before_max_ms)
                && behind > i128::from(self.timestamp_before_max_ms))
                || (bounded(self.timestamp_after_max_ms)
                    && -behind > i128::from(self.timestamp_after_max_ms))
            {
                let lo = i128::from(self.now_ms) - i128::from(self.timestamp_before_max_ms);
                let hi = i128::from(self.now_ms) + i128::from(self.timestamp_after_max_ms);
                return Some(format!(
                    "{what} timestamp {ts} is out of range. The timestamp should be within \
                     [{lo}, {hi}]"
                ));
            }
        } else if h.is_log_append_time() {
            return Some("Producer should not set timestamp type to LogAppendTime.".into());
        }
        None
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
    let body = &batch[HEADER_SIZE..h.size()];
    let owned;
    let data: &[u8] = if h.codec() == 0 {
        body
    } else {
        owned = codec::decompress(h.codec(), body, rules.decompressed_bytes_max)?;
        &owned
    };
    let mut count = 0i32;
    // rules 8-9, per record; allocates only for a refused record
    let mut errors: Vec<RecordError> = Vec::new();
    let mut timestamp = false;
    for r in RecordIter::new(*h, data) {
        let r = r?;
        if r.offset_delta != count {
            return Err(invalid(format!(
                "record {count} has offset delta {}, expected {count}",
                r.offset_delta
            )));
        }
        if rules.compact && r.key.is_none() {
            errors.push(RecordError {
                index: count,
                message: "Compacted topic cannot accept message without key".into(),
            });
        } else if let Some(message) = rules.timestamp_error(h, r.timestamp, "Record") {
            timestamp = true;
            errors.push(RecordError {
                index: count,
                message,
            });
        }
        count += 1;
    }
    debug_assert_eq!(
        count, h.record_count,
        "RecordIter yields exactly recordCount"
    );
    if !errors.is_empty() {
        return Err(LogError::Records { timestamp, errors });
    }
    if !h.is_log_append_time() {
        if let Some(message) = rules.timestamp_error(h, h.max_timestamp, "Batch max") {
            return Err(LogError::InvalidTimestamp(message));
        }
    }
    Ok(())
}

/// [`check_records`] for every batch `batch::validate_batches` found in `buf`.
pub fn check_produced(buf: &[u8], batches: &[BatchRef], rules: &Rules) -> Result<()> {
    for b in batches {
        check_records(
            &buf[b.position..b.position + b.header.size()],
            &b.header,
            rules,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{check_batch, compute_crc, CRC_AT, MAX_TIMESTAMP_AT};
    use crate::builder::{put_varlong, BatchBuilder, Record};

    const NOW: i64 = 1_700_000_000_000;

    fn v(out: &mut Vec<u8>, x: i64) {
        put_varlong(out, x);
    }

    /// The body of one record (everything after its length varint).
    fn body(
        off_delta: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], Option<&[u8]>)],
    ) -> Vec<u8> {
        let mut b = vec![0u8];
        v(&mut b, 0); // timestamp delta
        v(&mut b, off_delta);
        for f in [key, value] {
            match f {
                None => v(&mut b, -1),
                Some(x) => {
                    v(&mut b, x.len() as i64);
                    b.extend_from_slice(x);
                }
            }
        }
        v(&mut b, headers.len() as i64);
        for (k, hv) in headers {
            v(&mut b, k.len() as i64);
            b.extend_from_slice(k);
            match hv {
                None => v(&mut b, -1),
                Some(x) => {
                    v(&mut b, x.len() as i64);
                    b.extend_from_slice(x);
                }
            }
        }
        b
    }

    /// A record: its length varint (`len`, or the body's length) then `body`.
    fn rec(len: Option<i64>, body: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        v(&mut r, len.unwrap_or(body.len() as i64));
        r.extend_from_slice(body);
        r
    }

    fn good(i: i64) -> Vec<u8> {
        rec(None, &body(i, Some(b"k"), Some(b"value"), &[]))
    }

    /// A batch around `records` (already encoded, maybe compressed), with a
    /// valid CRC; timestamps NOW.
    fn wrap(records: &[u8], count: i32, attributes: i16) -> Vec<u8> {
        BatchBuilder::new(0, NOW).build_with_records(records, attributes, count)
    }

    fn fix_crc(b: &mut [u8]) {
        let crc = compute_crc(b);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }

    fn rules() -> Rules {
        Rules {
            now_ms: NOW,
            timestamp_before_max_ms: 60_000,
            timestamp_after_max_ms: 60_000,
            ..Rules::default()
        }
    }

    fn check_with(b: &[u8], rules: &Rules) -> Result<()> {
        let h = check_batch(b, usize::MAX).expect("header and CRC are valid");
        check_records(b, &h, rules)
    }

    fn check(b: &[u8]) -> Result<()> {
        check_with(b, &rules())
    }

    fn is_invalid(r: Result<()>) -> bool {
        matches!(r, Err(LogError::InvalidRecord(_)))
    }

    fn three(mid: Vec<u8>) -> Vec<u8> {
        let mut r = good(0);
        r.extend(mid);
        r.extend(good(2));
        wrap(&r, 3, 0)
    }

    #[test]
    fn accepts_well_formed_batches_of_every_codec() {
        let mut b = BatchBuilder::new(0, NOW);
        for i in 0..5 {
            let mut r = Record::new(NOW + i, Some(b"key"), Some(b"value"));
            r.headers = vec![("h".into(), Some(b"x".to_vec())), ("n".into(), None)];
            b.push(r);
        }
        let raw = b.encode_records();
        check(&b.build()).unwrap();
        for codec in 1..=4u8 {
            let c = codec::compress(codec, &raw).unwrap();
            check(&b.build_with_records(&c, codec as i16, 5)).unwrap();
        }
        // Rules::default() has no timestamp bounds
        check_with(&wrap(&good(0), 1, 0), &Rules::default()).unwrap();
    }

    #[test]
    fn record_length_must_match_the_fields() {
        let b = body(1, Some(b"k"), Some(b"value"), &[]);
        let n = b.len() as i64;
        // one more: the record swallows the next record's first byte
        assert!(is_invalid(check(&three(rec(Some(n + 1), &b)))));
        assert!(is_invalid(check(&three(rec(Some(n - 1), &b)))));
        assert!(is_invalid(check(&three(rec(Some(-1), &b)))));
        assert!(is_invalid(check(&three(rec(Some(i32::MAX as i64), &b)))));
        assert!(is_invalid(check(&three(rec(Some(0), &[])))));
        check(&three(rec(Some(n), &b))).unwrap();
    }

    #[test]
    fn record_count_must_match_the_records() {
        let mut two = good(0);
        two.extend(good(1));
        assert!(is_invalid(check(&wrap(&two, 3, 0))), "truncated");
        let mut r = two.clone();
        r.push(0);
        assert!(
            is_invalid(check(&wrap(&r, 2, 0))),
            "one byte after the last record"
        );
        assert!(is_invalid(check(&wrap(&two, 1, 0))), "a whole extra record");
        check(&wrap(&two, 2, 0)).unwrap();
    }

    #[test]
    fn fields_may_not_run_past_the_record() {
        // value length 9 but 5 bytes of value, the 4 extra bytes taken from the next record
        let mut b = vec![0u8, 0, 2];
        v(&mut b, 1);
        b.push(b'k');
        v(&mut b, 9);
        b.extend_from_slice(b"value");
        v(&mut b, 0);
        assert!(is_invalid(check(&three(rec(None, &b)))));
        // key length past the end of the whole batch
        let mut b = vec![0u8, 0, 2];
        v(&mut b, 1000);
        assert!(is_invalid(check(&three(rec(None, &b)))));
    }

    #[test]
    fn header_counts_and_key_lengths() {
        let base = body(1, Some(b"k"), Some(b"v"), &[]);
        let strip = &base[..base.len() - 1]; // without the header count
        let with = |tail: &[u8]| {
            let mut b = strip.to_vec();
            b.extend_from_slice(tail);
            three(rec(None, &b))
        };
        let mut t = Vec::new();
        v(&mut t, -1);
        assert!(is_invalid(check(&with(&t))), "negative header count");
        let mut t = Vec::new();
        v(&mut t, 50);
        assert!(is_invalid(check(&with(&t))), "more headers than bytes");
        let mut t = Vec::new();
        v(&mut t, 1);
        v(&mut t, -1);
        v(&mut t, -1);
        assert!(is_invalid(check(&with(&t))), "negative header key length");
        let mut t = Vec::new();
        v(&mut t, 1);
        v(&mut t, 1);
        t.push(b'h');
        v(&mut t, -1);
        check(&with(&t)).unwrap(); // a null header value is legal
        let h = body(1, None, None, &[(b"h", None), (b"g", Some(b"1"))]);
        check(&three(rec(None, &h))).unwrap();
    }

    #[test]
    fn varints_longer_than_their_type_are_refused() {
        let mut b = vec![0u8, 0];
        b.extend_from_slice(&[0x82, 0x80, 0x80, 0x80, 0x00]); // offset delta 1 in 5 bytes: legal
        b.extend_from_slice(&body(1, Some(b"k"), None, &[])[3..]);
        check(&three(rec(None, &b))).unwrap();
        let mut b = vec![0u8, 0];
        b.extend_from_slice(&[0x82, 0x80, 0x80, 0x80, 0x80, 0x00]); // 6 bytes
        b.extend_from_slice(&body(1, Some(b"k"), None, &[])[3..]);
        assert!(is_invalid(check(&three(rec(None, &b)))));
        // timestamp delta 0 in 10 bytes (legal), then in 11
        let mut b = vec![0u8];
        b.extend_from_slice(&[0x80; 9]);
        b.push(0);
        b.extend_from_slice(&body(1, Some(b"k"), None, &[])[2..]);
        check(&three(rec(None, &b))).unwrap();
        let mut b = vec![0u8];
        b.extend_from_slice(&[0x80; 10]);
        b.push(0);
        b.extend_from_slice(&body(1, Some(b"k"), None, &[])[2..]);
        assert!(is_invalid(check(&three(rec(None, &b)))));
        // the record length varint itself
        let mut r = vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
        r.extend_from_slice(&body(1, Some(b"k"), None, &[]));
        assert!(is_invalid(check(&three(r))));
    }

    #[test]
    fn compression_codecs() {
        let mut raw = good(0);
        raw.extend(good(1));
        for codec in 5..=7i16 {
            assert!(matches!(
                check(&wrap(&raw, 2, codec)),
                Err(LogError::UnsupportedCompression(_))
            ));
        }
        for codec in 1..=4u8 {
            let mut c = codec::compress(codec, &raw).unwrap();
            c.truncate(c.len() / 2);
            let r = check(&wrap(&c, 2, codec as i16));
            assert!(
                matches!(r, Err(LogError::Corrupt(_) | LogError::InvalidRecord(_))),
                "codec {codec}: {r:?}"
            );
            assert!(
                matches!(
                    check(&wrap(b"not compressed", 2, codec as i16)),
                    Err(LogError::Corrupt(_))
                ),
                "codec {codec}"
            );
            // decompresses, but the records inside are bad: one byte after the last
            let mut bad = raw.clone();
            bad.push(7);
            let c = codec::compress(codec, &bad).unwrap();
            assert!(
                is_invalid(check(&wrap(&c, 2, codec as i16))),
                "codec {codec}"
            );
        }
        let big = codec::compress(4, &vec![0u8; 1 << 20]).unwrap();
        let small = Rules {
            decompressed_bytes_max: 1000,
            ..rules()
        };
        assert!(matches!(
            check_with(&wrap(&big, 1, 4), &small),
            Err(LogError::Corrupt(_))
        ));
    }

    #[test]
    fn control_transactional_and_sequence_rules() {
        let r = good(0);
        assert!(is_invalid(check(&wrap(&r, 1, crate::batch::CONTROL_BIT))));
        assert!(is_invalid(check(&wrap(
            &r,
            1,
            crate::batch::TRANSACTIONAL_BIT
        ))));
        let b = BatchBuilder::new(0, NOW).producer(7, 0, -1);
        assert!(is_invalid(check(&b.build_with_records(&r, 0, 1))));
        let b = BatchBuilder::new(0, NOW).producer(7, 0, 0);
        check(&b.build_with_records(&r, crate::batch::TRANSACTIONAL_BIT, 1)).unwrap();
        check(&b.build_with_records(&r, 0, 1)).unwrap();
    }

    #[test]
    fn offset_deltas_must_count_from_zero() {
        let mut r = good(0);
        r.extend(good(2));
        assert!(is_invalid(check(&wrap(&r, 2, 0))));
        let mut r = good(1);
        r.extend(good(0));
        assert!(is_invalid(check(&wrap(&r, 2, 0))));
        let c = codec::compress(3, &r).unwrap();
        assert!(is_invalid(check(&wrap(&c, 2, 3))));
    }

    #[test]
    fn compacted_topics_need_keys() {
        let compact = Rules {
            compact: true,
            ..rules()
        };
        let keyless = rec(None, &body(0, None, Some(b"v"), &[]));
        assert_eq!(
            record_errors(check_with(&wrap(&keyless, 1, 0), &compact)),
            (false, vec![0])
        );
        check(&wrap(&keyless, 1, 0)).unwrap();
        let tombstone = rec(None, &body(0, Some(b"k"), None, &[]));
        check_with(&wrap(&tombstone, 1, 0), &compact).unwrap();
    }

    /// `Records`' (timestamp, record indexes); panics on any other result.
    fn record_errors(r: Result<()>) -> (bool, Vec<i32>) {
        match r {
            Err(LogError::Records { timestamp, errors }) => {
                (timestamp, errors.iter().map(|e| e.index).collect())
            }
            other => panic!("expected record errors, got {other:?}"),
        }
    }

    #[test]
    fn every_bad_record_of_a_batch_is_named_by_its_index() {
        let compact = Rules {
            compact: true,
            ..rules()
        };
        // a keyless record in every third place, among keyed ones
        let mut b = BatchBuilder::new(0, NOW);
        for i in 0..10 {
            let key: Option<&[u8]> = if i % 3 == 0 { None } else { Some(b"k") };
            b.push(Record::new(NOW, key, Some(b"v")));
        }
        let batch = b.build();
        assert_eq!(
            record_errors(check_with(&batch, &compact)),
            (false, vec![0, 3, 6, 9])
        );
        let c = codec::compress(4, &batch[HEADER_SIZE..]).unwrap();
        let zstd = wrap(&c, 10, 4);
        assert_eq!(
            record_errors(check_with(&zstd, &compact)),
            (false, vec![0, 3, 6, 9])
        );
        // one error per record, the key first; any timestamp error makes the
        // batch's code INVALID_TIMESTAMP
        let mut b = BatchBuilder::new(0, NOW);
        b.push(Record::new(NOW + 3_600_000, None, Some(b"v")));
        b.push(Record::new(NOW + 3_600_000, Some(b"k"), Some(b"v")));
        b.push(Record::new(NOW, Some(b"k"), Some(b"v")));
        let err = check_with(&b.build(), &compact).unwrap_err();
        assert_eq!(err.kafka_error_code(), 32);
        let LogError::Records { errors, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!(errors.iter().map(|e| e.index).collect::<Vec<_>>(), [0, 1]);
        assert!(errors[0].message.contains("without key"), "{errors:?}");
        assert!(errors[1].message.contains("out of range"), "{errors:?}");
    }

    fn at(ts: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new(0, ts);
        b.push(Record::new(ts, Some(b"k"), Some(b"v")));
        b.build()
    }

    fn is_bad_ts(r: Result<()>) -> bool {
        matches!(r, Err(e) if e.kafka_error_code() == 32)
    }

    #[test]
    fn create_time_timestamps_must_be_in_range() {
        check(&at(NOW - 60_000)).unwrap();
        check(&at(NOW + 60_000)).unwrap();
        assert!(is_bad_ts(check(&at(NOW - 60_001))));
        assert!(is_bad_ts(check(&at(NOW + 60_001))));
        check(&at(NO_TIMESTAMP)).unwrap();
        check_with(&at(i64::MIN), &Rules::default()).unwrap();
        check_with(&at(i64::MAX), &Rules::default()).unwrap();
        let lat = Rules {
            log_append_time: true,
            ..rules()
        };
        check_with(&at(0), &lat).unwrap(); // the broker stamps its own time
                                           // one record out of range among good ones
        let mut b = BatchBuilder::new(0, NOW);
        b.push(Record::new(NOW, Some(b"k"), None));
        b.push(Record::new(NOW + 3_600_000, Some(b"k"), None));
        b.push(Record::new(NOW, Some(b"k"), None));
        let mut bytes = b.build();
        assert!(is_bad_ts(check(&bytes)));
        // records in range, the header's maxTimestamp is not
        let mut one = at(NOW);
        one[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&(NOW * 1000).to_be_bytes());
        fix_crc(&mut one);
        assert!(is_bad_ts(check(&one)));
        bytes.clear();
    }

    #[test]
    fn producers_may_not_set_log_append_time() {
        let mut b = at(NOW);
        let (head, rest) = b.split_at_mut(HEADER_SIZE);
        crate::batch::set_log_append_time(head, rest, NOW);
        check(&b).unwrap(); // CreateTime topic, timestamp in range: Kafka accepts
        let lat = Rules {
            log_append_time: true,
            ..rules()
        };
        assert!(is_bad_ts(check_with(&b, &lat)));
        let (head, rest) = b.split_at_mut(HEADER_SIZE);
        crate::batch::set_log_append_time(head, rest, NO_TIMESTAMP);
        assert!(is_bad_ts(check(&b)));
    }
}
