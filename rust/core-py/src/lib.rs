//! `pybroker._core`: the thin pyo3 binding of `pybroker-log`.
//!
//! Every call that touches files (append, read lookup, flush, open/recovery,
//! sendfile, crc) goes through [`release`], which drops the GIL and maps
//! [`LogError`] to the Python exceptions declared in `_core.pyi`.

mod buf;
mod columnar;
mod epochs;
mod fetch_channel;
mod fetch_request;
mod follower;
mod open_logs;
mod threads;

use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use buf::BorrowedBuffer;
use pybroker_log::cleaner::{self, CleanConfig};
use pybroker_log::producer_state::EndTxnMarker;
use pybroker_log::{codec, LogConfig, LogError, OpenState};
use pyo3::create_exception;
use pyo3::exceptions::{PyBlockingIOError, PyException, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

create_exception!(
    pybroker._core,
    CorruptRecordError,
    PyException,
    "A batch failed length/magic/CRC checks (Kafka CORRUPT_MESSAGE, 2)."
);
create_exception!(
    pybroker._core,
    InvalidRecordError,
    PyException,
    "A batch is well formed but breaks a rule (Kafka INVALID_RECORD, 87)."
);
create_exception!(
    pybroker._core,
    InvalidTimestampError,
    PyException,
    "A record timestamp is outside the topic's allowed range (Kafka INVALID_TIMESTAMP, 32)."
);
create_exception!(
    pybroker._core,
    UnsupportedCompressionTypeError,
    PyException,
    "A batch names an unknown compression codec (Kafka UNSUPPORTED_COMPRESSION_TYPE, 76)."
);
create_exception!(
    pybroker._core,
    RecordTooLargeError,
    PyException,
    "A batch exceeds max_message_bytes (Kafka MESSAGE_TOO_LARGE, 10)."
);
create_exception!(
    pybroker._core,
    OffsetOutOfRangeError,
    PyException,
    "The offset is below the log start or above the log end (Kafka 1)."
);
create_exception!(
    pybroker._core,
    OutOfOrderSequenceError,
    PyException,
    "An idempotent producer's sequence does not follow its last one (Kafka 45)."
);
create_exception!(
    pybroker._core,
    InvalidProducerEpochError,
    PyException,
    "An idempotent producer's epoch is older than its last one (Kafka 47)."
);
create_exception!(
    pybroker._core,
    InvalidTxnStateError,
    PyException,
    "A producer with an open transaction wrote a non-transactional batch (Kafka 48)."
);
create_exception!(
    pybroker._core,
    TransactionCoordinatorFencedError,
    PyException,
    "A marker's coordinator epoch is older than the partition has seen (Kafka 52)."
);
create_exception!(
    pybroker._core,
    UnexpectedAppendOffsetError,
    PyException,
    "A follower append's batch does not start at/after the log end or the previous batch."
);
create_exception!(
    pybroker._core,
    StorageError,
    PyException,
    "An I/O error on the log (Kafka KAFKA_STORAGE_ERROR, 56)."
);

/// The one mapping from engine errors to Python exceptions.
fn to_py_err(e: LogError) -> PyErr {
    let msg = e.to_string();
    match e {
        LogError::Corrupt(_) => CorruptRecordError::new_err(msg),
        LogError::InvalidRecord(_) => InvalidRecordError::new_err(msg),
        LogError::InvalidTimestamp(_) => InvalidTimestampError::new_err(msg),
        LogError::Records { timestamp, errors } => {
            let err = if timestamp {
                InvalidTimestampError::new_err(msg)
            } else {
                InvalidRecordError::new_err(msg)
            };
            // the bad records' (index, message): the Produce response's record_errors
            let listed: Vec<(i32, String)> =
                errors.into_iter().map(|e| (e.index, e.message)).collect();
            Python::with_gil(|py| {
                if let Err(e) = err.value(py).setattr("record_errors", listed) {
                    return e;
                }
                err
            })
        }
        LogError::UnsupportedCompression(_) => UnsupportedCompressionTypeError::new_err(msg),
        LogError::RecordTooLarge { .. } => RecordTooLargeError::new_err(msg),
        LogError::OffsetOutOfRange { .. } => OffsetOutOfRangeError::new_err(msg),
        LogError::OutOfOrderSequence(_) => OutOfOrderSequenceError::new_err(msg),
        LogError::InvalidProducerEpoch(_) => InvalidProducerEpochError::new_err(msg),
        LogError::InvalidTxnState(_) => InvalidTxnStateError::new_err(msg),
        LogError::TransactionCoordinatorFenced(_) => {
            TransactionCoordinatorFencedError::new_err(msg)
        }
        LogError::UnexpectedAppendOffset { .. } => UnexpectedAppendOffsetError::new_err(msg),
        LogError::WouldBlock => PyBlockingIOError::new_err((libc_eagain(), msg)),
        LogError::Closed | LogError::Io(_) => StorageError::new_err(msg),
    }
}

fn libc_eagain() -> i32 {
    std::io::Error::from(std::io::ErrorKind::WouldBlock)
        .raw_os_error()
        .unwrap_or(11)
}

/// sendfile's errors: those of the socket side (the peer reset or closed the
/// connection) are `OSError(errno, ...)`, which Python turns into
/// ConnectionResetError, BrokenPipeError, ...: the connection's end, not a
/// storage error. The rest map as every engine error does.
fn sendfile_err(e: LogError) -> PyErr {
    match e {
        LogError::Io(io) if pybroker_log::sendfile::is_socket_error(&io) => {
            let errno = io.raw_os_error().unwrap_or(0);
            PyOSError::new_err((errno, io.to_string()))
        }
        other => to_py_err(other),
    }
}

/// Runs `f` without the GIL and maps its error. The one place that does so.
fn release<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> pybroker_log::Result<T> + Send,
    T: Send,
{
    release_with(py, f, to_py_err)
}

/// [`release`] with the error mapping given.
fn release_with<T, F>(py: Python<'_>, f: F, map: fn(LogError) -> PyErr) -> PyResult<T>
where
    F: FnOnce() -> pybroker_log::Result<T> + Send,
    T: Send,
{
    py.allow_threads(f).map_err(map)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[pyclass(frozen, get_all, module = "pybroker._core")]
struct AppendResult {
    base_offset: i64,
    last_offset: i64,
    log_append_time_ms: i64,
    record_count: i64,
    batch_count: i64,
    duplicate_count: i64,
}

impl From<pybroker_log::AppendInfo> for AppendResult {
    fn from(info: pybroker_log::AppendInfo) -> Self {
        AppendResult {
            base_offset: info.base_offset,
            last_offset: info.last_offset,
            log_append_time_ms: info.log_append_time_ms,
            record_count: info.record_count,
            batch_count: info.batch_count,
            duplicate_count: info.duplicate_count,
        }
    }
}

#[pymethods]
impl AppendResult {
    fn __repr__(&self) -> String {
        format!(
            "AppendResult(base_offset={}, last_offset={}, log_append_time_ms={}, record_count={}, batch_count={}, duplicate_count={})",
            self.base_offset, self.last_offset, self.log_append_time_ms, self.record_count, self.batch_count, self.duplicate_count
        )
    }
}

/// What one compaction did (see PartitionLog.clean).
#[pyclass(frozen, get_all, module = "pybroker._core")]
struct CleanStats {
    bytes_read: u64,
    bytes_written: u64,
    records_removed: u64,
    segments_cleaned: u64,
    first_dirty_offset: i64,
}

#[pymethods]
impl CleanStats {
    fn __repr__(&self) -> String {
        format!(
            "CleanStats(bytes_read={}, bytes_written={}, records_removed={}, segments_cleaned={}, first_dirty_offset={})",
            self.bytes_read, self.bytes_written, self.records_removed, self.segments_cleaned, self.first_dirty_offset
        )
    }
}

/// Whole batches of one segment file: [position, position+length).
#[pyclass(frozen, module = "pybroker._core")]
struct FileSlice {
    inner: pybroker_log::FileSlice,
}

#[pymethods]
impl FileSlice {
    #[getter]
    fn length(&self) -> u64 {
        self.inner.length
    }

    #[getter]
    fn position(&self) -> u64 {
        self.inner.position
    }

    /// sendfile(2) bytes [sent, length) of the slice to a non-blocking socket.
    fn sendfile(&self, py: Python<'_>, sock_fd: i32, sent: u64) -> PyResult<u64> {
        let s = &self.inner;
        if sent > s.length {
            return Err(PyValueError::new_err("sent is past the end of the slice"));
        }
        release_with(py, || s.send(sock_fd, sent), sendfile_err)
    }

    /// The slice's bytes, copied.
    fn read<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = release(py, || self.inner.read())?;
        Ok(PyBytes::new(py, &bytes))
    }

    fn __len__(&self) -> usize {
        self.inner.length as usize
    }

    fn __repr__(&self) -> String {
        format!(
            "FileSlice(position={}, length={})",
            self.inner.position, self.inner.length
        )
    }
}

/// One partition directory `<topic>-<n>/` of Kafka segment files.
#[pyclass(frozen, module = "pybroker._core")]
struct PartitionLog {
    log: Mutex<pybroker_log::Log>,
}

impl PartitionLog {
    fn from_log(log: pybroker_log::Log) -> PartitionLog {
        PartitionLog {
            log: Mutex::new(log),
        }
    }

    fn lock(&self) -> MutexGuard<'_, pybroker_log::Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl PartitionLog {
    #[new]
    #[pyo3(signature = (
        path, *, segment_bytes=1073741824, segment_ms=604800000, index_interval_bytes=4096,
        segment_index_bytes=10485760, max_message_bytes=1048588, log_append_time=false,
        recovery_point=0, clean_shutdown=false, log_start_offset=0,
        timestamp_before_max_ms=i64::MAX, timestamp_after_max_ms=i64::MAX, compact=false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        segment_bytes: u64,
        segment_ms: i64,
        index_interval_bytes: u64,
        segment_index_bytes: u64,
        max_message_bytes: u64,
        log_append_time: bool,
        recovery_point: i64,
        clean_shutdown: bool,
        log_start_offset: i64,
        timestamp_before_max_ms: i64,
        timestamp_after_max_ms: i64,
        compact: bool,
    ) -> PyResult<PartitionLog> {
        let config = LogConfig {
            segment_bytes,
            segment_ms,
            index_interval_bytes,
            segment_index_bytes,
            max_message_bytes,
            log_append_time,
            timestamp_before_max_ms,
            timestamp_after_max_ms,
            compact,
        };
        let state = OpenState {
            recovery_point,
            clean_shutdown,
            log_start_offset,
            now_ms: now_ms(),
        };
        let log = release(py, || pybroker_log::Log::open(&path, config, state))?;
        Ok(PartitionLog::from_log(log))
    }

    /// Bytes the open's recovery cut off (a torn or corrupt tail, and the
    /// segments after it, after an unclean shutdown); 0 when nothing was cut.
    #[getter]
    fn truncated_at_open(&self) -> u64 {
        self.lock().truncated_at_open()
    }

    #[getter]
    fn log_start_offset(&self) -> i64 {
        self.lock().log_start_offset()
    }
    #[getter]
    fn log_end_offset(&self) -> i64 {
        self.lock().log_end_offset()
    }
    #[getter]
    fn recovery_point(&self) -> i64 {
        self.lock().recovery_point()
    }
    #[getter]
    fn size_bytes(&self) -> u64 {
        self.lock().size_bytes()
    }
    #[getter]
    fn segment_count(&self) -> usize {
        self.lock().segment_count()
    }

    /// Validates every batch, then appends all of them or none.
    fn append(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        leader_epoch: i32,
        now_ms: i64,
    ) -> PyResult<AppendResult> {
        let records = BorrowedBuffer::get(records)?;
        let bytes = records.as_bytes();
        let info = release(py, || self.lock().append(bytes, leader_epoch, now_ms))?;
        Ok(AppendResult::from(info))
    }

    /// Append batches fetched from the leader, keeping their offsets and bytes.
    fn append_as_follower(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
    ) -> PyResult<AppendResult> {
        let records = BorrowedBuffer::get(records)?;
        let bytes = records.as_bytes();
        let info = release(py, || self.lock().append_as_follower(bytes, now_ms()))?;
        Ok(AppendResult::from(info))
    }

    /// Record that leader epoch `epoch` starts at `start_offset` (becoming leader).
    fn assign_leader_epoch(&self, py: Python<'_>, epoch: i32, start_offset: i64) -> PyResult<()> {
        if epoch < 0 || start_offset < 0 {
            return Err(PyValueError::new_err(
                "epoch and start_offset must not be negative",
            ));
        }
        release(py, || self.lock().assign_leader_epoch(epoch, start_offset))
    }

    /// (epoch, end offset) for OffsetForLeaderEpoch; (-1, -1) when undefined.
    fn end_offset_for_epoch(&self, py: Python<'_>, epoch: i32) -> PyResult<(i32, i64)> {
        release(py, || self.lock().end_offset_for_epoch(epoch))
    }

    /// The newest leader epoch in the cache, None when it is empty.
    #[getter]
    fn latest_epoch(&self) -> Option<i32> {
        self.lock().latest_epoch()
    }

    /// Whole batches from the one holding `offset`.
    #[pyo3(signature = (offset, max_bytes, *, min_one, max_offset=None))]
    fn read(
        &self,
        py: Python<'_>,
        offset: i64,
        max_bytes: i64,
        min_one: bool,
        max_offset: Option<i64>,
    ) -> PyResult<Option<FileSlice>> {
        let max_bytes = max_bytes.max(0) as u64;
        let slice = release(py, || {
            self.lock().read(offset, max_bytes, min_one, max_offset)
        })?;
        Ok(slice.map(|inner| FileSlice { inner }))
    }

    /// (offset, timestamp) of the first record with timestamp >= timestamp_ms.
    fn offset_for_timestamp(
        &self,
        py: Python<'_>,
        timestamp_ms: i64,
    ) -> PyResult<Option<(i64, i64)>> {
        release(py, || self.lock().offset_for_timestamp(timestamp_ms))
    }

    /// Append a COMMIT/ABORT marker ending the producer's transaction (leader).
    #[allow(clippy::too_many_arguments)]
    fn append_end_txn_marker(
        &self,
        py: Python<'_>,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
        leader_epoch: i32,
        now_ms: i64,
    ) -> PyResult<AppendResult> {
        let marker = EndTxnMarker {
            commit,
            coordinator_epoch,
        };
        let info = release(py, || {
            self.lock().append_end_txn_marker(
                producer_id,
                producer_epoch,
                marker,
                leader_epoch,
                now_ms,
            )
        })?;
        Ok(AppendResult::from(info))
    }

    /// min(high_watermark, first offsets of open / not yet replicated transactions).
    fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        self.lock().last_stable_offset(high_watermark)
    }

    /// First offset of the oldest open transaction, None when none is open.
    fn first_unstable_offset(&self) -> Option<i64> {
        self.lock().first_unstable_offset()
    }

    /// (producer_id, first_offset) of aborted transactions with data in [start, end).
    fn aborted_transactions(
        &self,
        py: Python<'_>,
        start_offset: i64,
        end_offset: i64,
    ) -> PyResult<Vec<(i64, i64)>> {
        release(py, || {
            self.lock().aborted_transactions(start_offset, end_offset)
        })
    }

    /// fsync log and index files up to log_end_offset; advances recovery_point.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        release(py, || self.lock().flush())
    }

    /// A roll (by an append or `roll`) left fsyncs to do: call flush_rolled.
    #[getter]
    fn roll_flush_pending(&self) -> bool {
        self.lock().roll_flush_pending()
    }

    /// fsync what the rolls so far left (their producer snapshots, the
    /// directory) without holding the log. False when there was nothing to do.
    fn flush_rolled(&self, py: Python<'_>) -> PyResult<bool> {
        release(py, || {
            let Some(job) = self.lock().take_roll_flush()? else {
                return Ok(false);
            };
            job.sync()?;
            Ok(true)
        })
    }

    /// Starts a new segment at log_end_offset (no-op when the active one is empty).
    fn roll(&self, py: Python<'_>) -> PyResult<()> {
        release(py, || self.lock().roll(now_ms()))
    }

    /// Remove every record at/after `offset` (cut at the start of its batch).
    fn truncate_to(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
        release(py, || self.lock().truncate_to(offset, now_ms()))
    }

    /// Delete every segment; the empty log restarts at `offset`.
    fn truncate_fully_and_start_at(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
        if offset < 0 {
            return Err(PyValueError::new_err("offset must not be negative"));
        }
        release(py, || {
            self.lock().truncate_fully_and_start_at(offset, now_ms())
        })
    }

    /// Raise log_start_offset; delete segments wholly below it. Returns the count.
    fn advance_log_start_offset(&self, py: Python<'_>, offset: i64) -> PyResult<usize> {
        release(py, || self.lock().advance_log_start_offset(offset))
    }

    /// Compact the log (keep the newest record per key); the log lock is
    /// released while segments are read and rewritten.
    #[pyo3(signature = (
        first_dirty_offset, *, now_ms=None, delete_retention_ms=86400000,
        min_compaction_lag_ms=0, max_bytes_per_second=0.0, offset_map_bytes=134217728
    ))]
    #[allow(clippy::too_many_arguments)]
    fn clean(
        &self,
        py: Python<'_>,
        first_dirty_offset: i64,
        now_ms: Option<i64>,
        delete_retention_ms: i64,
        min_compaction_lag_ms: i64,
        max_bytes_per_second: f64,
        offset_map_bytes: u64,
    ) -> PyResult<CleanStats> {
        let config = CleanConfig {
            now_ms: now_ms.unwrap_or_else(crate::now_ms),
            delete_retention_ms,
            min_compaction_lag_ms,
            max_bytes_per_second,
            offset_map_bytes,
        };
        let s = release(py, || {
            let plan = {
                let log = self.lock();
                match log.plan_clean(first_dirty_offset, config)? {
                    Some(p) => p,
                    None => {
                        return Ok(pybroker_log::cleaner::CleanStats {
                            first_dirty_offset: first_dirty_offset.max(log.log_start_offset()),
                            ..Default::default()
                        })
                    }
                }
            };
            let out = cleaner::run(plan)?;
            self.lock().commit_clean(out)
        })?;
        Ok(CleanStats {
            bytes_read: s.bytes_read,
            bytes_written: s.bytes_written,
            records_removed: s.records_removed,
            segments_cleaned: s.segments_cleaned,
            first_dirty_offset: s.first_dirty_offset,
        })
    }

    /// Forget producers idle for max_age_ms (producer.id.expiration.ms).
    fn remove_expired_producers(&self, now_ms: i64, max_age_ms: i64) -> usize {
        self.lock().remove_expired_producers(now_ms, max_age_ms)
    }

    /// Number of producer ids with state (idempotence) in this partition.
    #[getter]
    fn producer_count(&self) -> usize {
        self.lock().producer_state().producer_count()
    }

    /// Every producer with state here, for DescribeProducers: (producer id,
    /// epoch, last sequence, last timestamp, coordinator epoch, first offset of
    /// its open transaction or -1), by producer id.
    fn producers(&self) -> Vec<(i64, i16, i32, i64, i32, i64)> {
        let log = self.lock();
        let mut out: Vec<_> = log
            .producer_state()
            .entries()
            .map(|e| {
                (
                    e.producer_id,
                    e.epoch,
                    e.last_seq(),
                    e.last_timestamp,
                    e.coordinator_epoch,
                    e.current_txn_first_offset,
                )
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Replace the settings of the open log (a topic config change).
    #[pyo3(signature = (
        *, segment_bytes, segment_ms, index_interval_bytes, segment_index_bytes,
        max_message_bytes, log_append_time, timestamp_before_max_ms=i64::MAX,
        timestamp_after_max_ms=i64::MAX, compact=false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn set_config(
        &self,
        segment_bytes: u64,
        segment_ms: i64,
        index_interval_bytes: u64,
        segment_index_bytes: u64,
        max_message_bytes: u64,
        log_append_time: bool,
        timestamp_before_max_ms: i64,
        timestamp_after_max_ms: i64,
        compact: bool,
    ) {
        self.lock().set_config(LogConfig {
            segment_bytes,
            segment_ms,
            index_interval_bytes,
            segment_index_bytes,
            max_message_bytes,
            log_append_time,
            timestamp_before_max_ms,
            timestamp_after_max_ms,
            compact,
        });
    }

    /// (base_offset, size_bytes, max_timestamp) per segment, oldest first.
    fn segment_infos(&self) -> Vec<(i64, u64, i64)> {
        self.lock().segment_infos()
    }

    /// Flush, trim the active segment's indexes to their entries, release files.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        release(py, || self.lock().close())
    }

    /// Stop using a deleted topic's log without writing anything; see the .pyi.
    fn abandon(&self, py: Python<'_>) {
        // the lock waits for an append in progress on another thread
        py.allow_threads(|| self.lock().abandon())
    }

    fn __repr__(&self) -> String {
        let l = self.lock();
        format!(
            "PartitionLog({:?}, log_start_offset={}, log_end_offset={})",
            l.dir(),
            l.log_start_offset(),
            l.log_end_offset()
        )
    }
}

/// CRC-32C (Castagnoli) of a buffer.
#[pyfunction]
fn crc32c(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u32> {
    let data = BorrowedBuffer::get(data)?;
    let bytes = data.as_bytes();
    release(py, || Ok(::crc32c::crc32c(bytes)))
}

/// One decoded record: (offset, timestamp, sequence, key, value, headers).
type DecodedRecord = (
    i64,
    i64,
    i32,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

/// Reads a varint length then that many bytes (None for length -1).
fn take_bytes(b: &[u8], pos: &mut usize) -> pybroker_log::Result<Option<Vec<u8>>> {
    let n = codec::get_varlong(b, pos)?;
    if n < 0 {
        return Ok(None);
    }
    let end = pos
        .checked_add(n as usize)
        .filter(|e| *e <= b.len())
        .ok_or_else(|| LogError::Corrupt("truncated record field".into()))?;
    let out = b[*pos..end].to_vec();
    *pos = end;
    Ok(Some(out))
}

/// The records of one whole v2 batch (decompressed), for tools: never on
/// the request path.
fn decode_records(batch: &[u8]) -> pybroker_log::Result<Vec<DecodedRecord>> {
    let (h, data) = codec::batch_records(batch, codec::DECOMPRESSED_BYTES_MAX)?;
    let mut out = Vec::with_capacity(h.record_count.max(0) as usize);
    let mut pos = 0usize;
    for _ in 0..h.record_count {
        let len = codec::get_varlong(&data, &mut pos)?;
        let end = pos
            .checked_add(len.max(0) as usize)
            .filter(|e| len >= 0 && *e <= data.len())
            .ok_or_else(|| LogError::Corrupt(format!("record length {len}")))?;
        let r = &data[..end];
        let mut p = pos + 1; // attributes
        let ts_delta = codec::get_varlong(r, &mut p)?;
        let off_delta = codec::get_varlong(r, &mut p)?;
        let key = take_bytes(r, &mut p)?;
        let value = take_bytes(r, &mut p)?;
        let count = codec::get_varlong(r, &mut p)?;
        let mut headers = Vec::new();
        for _ in 0..count.max(0) {
            let name = take_bytes(r, &mut p)?.unwrap_or_default();
            let hv = take_bytes(r, &mut p)?;
            headers.push((String::from_utf8_lossy(&name).into_owned(), hv));
        }
        pos = end;
        let timestamp = if h.is_log_append_time() {
            h.max_timestamp
        } else {
            h.base_timestamp + ts_delta
        };
        let sequence = if h.base_sequence < 0 {
            -1
        } else {
            ((h.base_sequence as i64 + off_delta) % (i32::MAX as i64 + 1)) as i32
        };
        out.push((
            h.base_offset + off_delta,
            timestamp,
            sequence,
            key,
            value,
            headers,
        ));
    }
    Ok(out)
}

/// A decoded record as Python sees it (bytes, not lists of ints).
type PyRecord<'py> = (
    i64,
    i64,
    i32,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
    Vec<(String, Option<Bound<'py, PyBytes>>)>,
);

/// Decode the records of one whole batch (any codec).
#[pyfunction]
fn decode_batch<'py>(py: Python<'py>, batch: &Bound<'py, PyAny>) -> PyResult<Vec<PyRecord<'py>>> {
    let batch = BorrowedBuffer::get(batch)?;
    let bytes = batch.as_bytes();
    let records = release(py, || decode_records(bytes))?;
    let b = |v: Option<Vec<u8>>| v.map(|v| PyBytes::new(py, &v));
    Ok(records
        .into_iter()
        .map(|(o, t, s, k, v, hs)| {
            let hs = hs.into_iter().map(|(n, hv)| (n, b(hv))).collect();
            (o, t, s, b(k), b(v), hs)
        })
        .collect())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CorruptRecordError", py.get_type::<CorruptRecordError>())?;
    m.add("InvalidRecordError", py.get_type::<InvalidRecordError>())?;
    m.add(
        "InvalidTimestampError",
        py.get_type::<InvalidTimestampError>(),
    )?;
    m.add(
        "UnsupportedCompressionTypeError",
        py.get_type::<UnsupportedCompressionTypeError>(),
    )?;
    m.add("RecordTooLargeError", py.get_type::<RecordTooLargeError>())?;
    m.add(
        "OffsetOutOfRangeError",
        py.get_type::<OffsetOutOfRangeError>(),
    )?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add(
        "OutOfOrderSequenceError",
        py.get_type::<OutOfOrderSequenceError>(),
    )?;
    m.add(
        "InvalidProducerEpochError",
        py.get_type::<InvalidProducerEpochError>(),
    )?;
    m.add(
        "InvalidTxnStateError",
        py.get_type::<InvalidTxnStateError>(),
    )?;
    m.add(
        "TransactionCoordinatorFencedError",
        py.get_type::<TransactionCoordinatorFencedError>(),
    )?;
    m.add(
        "UnexpectedAppendOffsetError",
        py.get_type::<UnexpectedAppendOffsetError>(),
    )?;
    m.add_class::<AppendResult>()?;
    m.add_class::<CleanStats>()?;
    m.add_class::<FileSlice>()?;
    m.add_class::<PartitionLog>()?;
    m.add_function(wrap_pyfunction!(self::crc32c, m)?)?;
    m.add_function(wrap_pyfunction!(self::decode_batch, m)?)?;
    columnar::register(m)?;
    follower::register(m)?;
    fetch_channel::register(m)?;
    fetch_request::register(m)?;
    epochs::register(m)?;
    open_logs::register(m)?;
    Ok(())
}
