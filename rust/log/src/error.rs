//! The one error type of the log engine.
//!
//! Each variant corresponds to a Kafka error code the broker answers with
//! (see `kafka_error_code`); the pyo3 binding maps variants to Python
//! exceptions in one place.

use std::io;

/// Everything that can go wrong in the log engine.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A batch failed the length / magic / CRC checks (CORRUPT_MESSAGE, 2).
    #[error("corrupt record batch: {0}")]
    Corrupt(String),
    /// A batch is well formed but breaks a rule (INVALID_RECORD, 87).
    #[error("invalid record batch: {0}")]
    InvalidRecord(String),
    /// A record timestamp outside the topic's allowed range, or a
    /// LogAppendTime batch from a client (INVALID_TIMESTAMP, 32).
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(String),
    /// Records of one batch broke per-record rules (Kafka's
    /// `RecordValidationException`, KIP-467): the whole append is refused and
    /// `errors` names each bad record by its index in its batch, in order.
    /// INVALID_TIMESTAMP (32) when any of them is a timestamp error, else
    /// INVALID_RECORD (87).
    #[error("{}", records_summary(*timestamp, errors))]
    Records {
        timestamp: bool,
        errors: Vec<RecordError>,
    },
    /// A batch names a compression codec that does not exist
    /// (UNSUPPORTED_COMPRESSION_TYPE, 76).
    #[error("unsupported compression: {0}")]
    UnsupportedCompression(String),
    /// A batch is larger than max.message.bytes (MESSAGE_TOO_LARGE, 10).
    #[error("record batch of {size} bytes exceeds the limit of {max_bytes} bytes")]
    RecordTooLarge { size: u64, max_bytes: u64 },
    /// The offset is outside [log_start_offset, log_end_offset] (OFFSET_OUT_OF_RANGE, 1).
    #[error("offset {offset} is out of range [{start}, {end}]")]
    OffsetOutOfRange { offset: i64, start: i64, end: i64 },
    /// A non-blocking socket would block before any byte was written (EAGAIN).
    #[error("the socket would block")]
    WouldBlock,
    /// The log was closed.
    #[error("the log is closed")]
    Closed,
    /// An idempotent producer's sequence does not follow its last one
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER, 45).
    #[error("out of order sequence: {0}")]
    OutOfOrderSequence(String),
    /// An idempotent producer's epoch is older than the one seen last
    /// (INVALID_PRODUCER_EPOCH, 47).
    #[error("invalid producer epoch: {0}")]
    InvalidProducerEpoch(String),
    /// A producer with an open transaction wrote a non-transactional batch
    /// (INVALID_TXN_STATE, 48).
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    /// A transaction marker's coordinator epoch is older than the one the
    /// partition has seen for its producer (TRANSACTION_COORDINATOR_FENCED, 52).
    #[error("transaction coordinator fenced: {0}")]
    TransactionCoordinatorFenced(String),
    /// A follower append's batch does not start after the log end / the
    /// previous batch (Kafka's UnexpectedAppendOffsetException and
    /// OffsetsOutOfOrderException: internal, no protocol error of their own;
    /// UNKNOWN_SERVER_ERROR, -1, if ever answered).
    #[error("batch at offset {offset} does not start at or after the next offset {next_offset}")]
    UnexpectedAppendOffset { offset: i64, next_offset: i64 },
    /// An I/O error on the log files (KAFKA_STORAGE_ERROR, 56).
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// One refused record of a batch: what a Produce response's `record_errors`
/// carries (`batch_index`, `batch_index_error_message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The record's position in its batch, from 0.
    pub index: i32,
    pub message: String,
}

/// The partition-level error message of [`LogError::Records`]: Kafka's
/// wording, which names at most the first three record errors.
fn records_summary(timestamp: bool, errors: &[RecordError]) -> String {
    if timestamp {
        return "One or more records have been rejected due to invalid timestamp".into();
    }
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|e| {
            format!(
                "RecordError(batchIndex={}, message='{}')",
                e.index, e.message
            )
        })
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, \
         and only showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
}

impl LogError {
    /// The Kafka protocol error code for this error.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            LogError::Corrupt(_) => 2,
            LogError::InvalidRecord(_) => 87,
            LogError::InvalidTimestamp(_) => 32,
            LogError::Records {
                timestamp: true, ..
            } => 32,
            LogError::Records { .. } => 87,
            LogError::UnsupportedCompression(_) => 76,
            LogError::RecordTooLarge { .. } => 10,
            LogError::OffsetOutOfRange { .. } => 1,
            LogError::OutOfOrderSequence(_) => 45,
            LogError::InvalidProducerEpoch(_) => 47,
            LogError::InvalidTxnState(_) => 48,
            LogError::TransactionCoordinatorFenced(_) => 52,
            LogError::UnexpectedAppendOffset { .. } => -1,
            LogError::WouldBlock | LogError::Closed | LogError::Io(_) => 56,
        }
    }
}

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, LogError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_match_kafka() {
        assert_eq!(LogError::Corrupt("x".into()).kafka_error_code(), 2);
        let bad = |index| RecordError {
            index,
            message: "no key".into(),
        };
        let e = LogError::Records {
            timestamp: false,
            errors: (0..5).map(bad).collect(),
        };
        assert_eq!(e.kafka_error_code(), 87);
        assert_eq!(
            e.to_string(),
            "One or more records have been rejected due to 5 record errors in total, and only \
             showing the first three errors at most: [RecordError(batchIndex=0, message='no key'), \
             RecordError(batchIndex=1, message='no key'), RecordError(batchIndex=2, message='no key')]"
        );
        let e = LogError::Records {
            timestamp: true,
            errors: vec![bad(1)],
        };
        assert_eq!(e.kafka_error_code(), 32);
        assert_eq!(LogError::InvalidRecord("x".into()).kafka_error_code(), 87);
        assert_eq!(
            LogError::InvalidTimestamp("x".into()).kafka_error_code(),
            32
        );
        assert_eq!(
            LogError::UnsupportedCompression("x".into()).kafka_error_code(),
            76
        );
        let e = LogError::RecordTooLarge {
            size: 2,
            max_bytes: 1,
        };
        assert_eq!(e.kafka_error_code(), 10);
        let e = LogError::OffsetOutOfRange {
            offset: 5,
            start: 0,
            end: 1,
        };
        assert_eq!(e.kafka_error_code(), 1);
        assert_eq!(
            LogError::OutOfOrderSequence("x".into()).kafka_error_code(),
            45
        );
        assert_eq!(
            LogError::InvalidProducerEpoch("x".into()).kafka_error_code(),
            47
        );
        assert_eq!(LogError::InvalidTxnState("x".into()).kafka_error_code(), 48);
        assert_eq!(
            LogError::TransactionCoordinatorFenced("x".into()).kafka_error_code(),
            52
        );
        let e = LogError::UnexpectedAppendOffset {
            offset: 3,
            next_offset: 5,
        };
        assert_eq!(e.kafka_error_code(), -1);
        assert_eq!(LogError::Io(io::Error::other("x")).kafka_error_code(), 56);
    }
}
