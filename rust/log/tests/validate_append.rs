//! `Log::append` with record-level validation (`validate.rs`): a produce
//! partition's batches are all refused when one record breaks a rule, nothing
//! is written, and the log takes the next valid append as if nothing happened.

mod common;

use pybroker_log::batch::{self, CRC_AT, HEADER_SIZE};
use pybroker_log::builder::{BatchBuilder, Record};
use pybroker_log::{Log, LogConfig, LogError, OpenState};

const NOW: i64 = 1_700_000_000_000;

fn open(dir: &std::path::Path, config: LogConfig) -> Log {
    Log::open(dir, config, OpenState::default()).unwrap()
}

/// A batch of `n` keyed records at NOW whose first record's length varint is
/// one too large (the CRC is recomputed, so only the record walk can tell).
fn bad_length(n: usize) -> Vec<u8> {
    let mut b = common::batch(n, 20, NOW);
    // the records are short: the first one's length is a one-byte zigzag
    // varint, where +2 is +1 in value
    assert!(b[HEADER_SIZE] < 0x7e);
    b[HEADER_SIZE] += 2;
    let crc = batch::compute_crc(&b);
    b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

fn at(ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(0, ts);
    b.push(Record::new(ts, Some(b"k"), Some(b"v")));
    b.build()
}

#[test]
fn a_bad_record_refuses_every_batch_of_the_append() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default());
    log.append(&common::batch(3, 20, NOW), 0, NOW).unwrap();
    let size = log.size_bytes();
    // a valid batch followed by a bad one: neither is written
    let mut two = common::batch(2, 20, NOW);
    two.extend_from_slice(&bad_length(2));
    let err = log.append(&two, 0, NOW).unwrap_err();
    assert!(matches!(err, LogError::InvalidRecord(_)), "{err:?}");
    assert_eq!(err.kafka_error_code(), 87);
    assert_eq!((log.log_end_offset(), log.size_bytes()), (3, size));
    // the log goes on at the same offset
    let info = log.append(&common::batch(2, 20, NOW), 0, NOW).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (3, 4));
    let data = log
        .read(0, u64::MAX, true, None)
        .unwrap()
        .unwrap()
        .read()
        .unwrap();
    assert_eq!(common::offsets(&data), vec![(0, 2), (3, 4)]);
}

#[test]
fn timestamp_bounds_and_compaction_come_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        timestamp_before_max_ms: 1_000,
        timestamp_after_max_ms: 1_000,
        compact: true,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config.clone());
    log.append(&at(NOW), 0, NOW).unwrap();
    for ts in [NOW - 1_001, NOW + 1_001] {
        let err = log.append(&at(ts), 0, NOW).unwrap_err();
        assert!(
            matches!(
                err,
                LogError::Records {
                    timestamp: true,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(err.kafka_error_code(), 32);
    }
    let mut keyless = BatchBuilder::new(0, NOW);
    keyless.push(Record::new(NOW, None, Some(b"v")));
    let err = log.append(&keyless.build(), 0, NOW).unwrap_err();
    assert!(
        matches!(&err, LogError::Records { timestamp: false, errors } if errors.len() == 1),
        "{err:?}"
    );
    assert_eq!(err.kafka_error_code(), 87);
    assert_eq!(log.log_end_offset(), 1);
    // a config change applies to the next append
    log.set_config(LogConfig {
        timestamp_after_max_ms: i64::MAX,
        compact: false,
        ..config
    });
    log.append(&at(NOW + 10 * 3_600_000), 0, NOW).unwrap();
    log.append(&keyless.build(), 0, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 3);
}

#[test]
fn unknown_codec_is_unsupported_compression() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default());
    let mut b = at(NOW);
    b[batch::ATTRIBUTES_AT + 1] |= 6;
    let crc = batch::compute_crc(&b);
    b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    let err = log.append(&b, 0, NOW).unwrap_err();
    assert!(
        matches!(err, LogError::UnsupportedCompression(_)),
        "{err:?}"
    );
    assert_eq!(err.kafka_error_code(), 76);
    assert_eq!(log.log_end_offset(), 0);
}
