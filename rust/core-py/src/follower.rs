//! The replica fetcher's per-response work in one call: walk a Fetch
//! response frame (`pybroker_log::fetch_response`) and append each
//! partition's records to its log as a follower, without the GIL and without
//! copying the records out of the frame. Python gets back one small summary
//! per partition and keeps every decision that changes state (the high
//! watermark, truncation, epochs, errors).

use pybroker_log::fetch_response::{self, FETCH_RESPONSE_VERSION};
use pybroker_log::LogError;
use pyo3::exceptions::{PyBaseException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::buf::BorrowedBuffer;
use crate::{now_ms, release, to_py_err, PartitionLog};

/// An append's (records appended, log end offset after it), or its error.
type Appended = Result<(i64, i64), LogError>;

/// One partition of a Fetch response, after its records (if any) were appended.
#[pyclass(frozen, module = "pybroker._core")]
pub struct FetchedPartition {
    #[pyo3(get)]
    topic: String,
    #[pyo3(get)]
    partition: i32,
    #[pyo3(get)]
    error_code: i16,
    #[pyo3(get)]
    high_watermark: i64,
    #[pyo3(get)]
    log_start_offset: i64,
    /// Bytes of records the leader sent (what a replication quota counts).
    #[pyo3(get)]
    records_bytes: usize,
    /// Whether the records went to a log given in `logs`.
    #[pyo3(get)]
    appended: bool,
    /// Records appended (0 when none or on an error).
    #[pyo3(get)]
    record_count: i64,
    /// The log's end after the append; -1 when nothing was appended.
    #[pyo3(get)]
    log_end_offset: i64,
    /// The exception the append would have raised, if it failed.
    append_error: Option<Py<PyBaseException>>,
}

/// A Fetch response as the follower applied it.
#[pyclass(frozen, module = "pybroker._core")]
pub struct FetchApplied {
    #[pyo3(get)]
    correlation_id: i32,
    #[pyo3(get)]
    throttle_time_ms: i32,
    #[pyo3(get)]
    error_code: i16,
    #[pyo3(get)]
    session_id: i32,
    partitions: Py<PyList>,
}

#[pymethods]
impl FetchApplied {
    #[getter]
    fn partitions(&self, py: Python<'_>) -> Py<PyList> {
        self.partitions.clone_ref(py)
    }
}

#[pymethods]
impl FetchedPartition {
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyBaseException>> {
        self.append_error.as_ref().map(|e| e.clone_ref(py))
    }

    fn __repr__(&self) -> String {
        format!(
            "FetchedPartition(topic={:?}, partition={}, error_code={}, high_watermark={}, log_start_offset={}, records_bytes={}, appended={}, log_end_offset={})",
            self.topic, self.partition, self.error_code, self.high_watermark,
            self.log_start_offset, self.records_bytes, self.appended, self.log_end_offset
        )
    }
}

/// Walks `frame` (a Fetch response of `api_version`, without its size prefix)
/// and appends the records of each partition without an error to
/// `logs[(topic, partition)]` as a follower. A partition missing from `logs`
/// is reported and not appended. A malformed frame raises CorruptRecordError
/// and appends nothing; an append that fails is reported in its partition's
/// `error` (the exception it would raise), the others go on.
#[pyfunction]
pub fn apply_fetch_response(
    py: Python<'_>,
    frame: &Bound<'_, PyAny>,
    api_version: i16,
    logs: &Bound<'_, PyDict>,
) -> PyResult<FetchApplied> {
    if api_version != FETCH_RESPONSE_VERSION {
        return Err(PyValueError::new_err(format!(
            "Fetch response version {api_version} is not read here (only {FETCH_RESPONSE_VERSION})"
        )));
    }
    let frame = BorrowedBuffer::get(frame)?;
    let bytes = frame.as_bytes();
    let response = release(py, || fetch_response::parse(bytes))?;
    apply_parsed(py, bytes, &response, logs)
}

/// Appends the records of `response` (parsed from `bytes`) to `logs` as
/// [`apply_fetch_response`] says, and sums up every partition for Python.
/// Shared with the fetch channel (`fetch_channel.rs`), which holds the frame
/// in its own receive buffer.
pub(crate) fn apply_parsed(
    py: Python<'_>,
    bytes: &[u8],
    response: &fetch_response::FetchResponse,
    logs: &Bound<'_, PyDict>,
) -> PyResult<FetchApplied> {
    // which partitions go to which log: looked up with the GIL, appended without it
    let mut targets: Vec<(usize, Py<PartitionLog>)> = Vec::new();
    for (i, p) in response.partitions.iter().enumerate() {
        if p.error_code != 0 || p.records.is_empty() {
            continue;
        }
        let key = (response.topics[p.topic].as_str(), p.partition);
        if let Some(log) = logs.get_item(key)? {
            targets.push((i, log.downcast::<PartitionLog>()?.clone().unbind()));
        }
    }
    let now = now_ms();
    let outcomes: Vec<(usize, Appended)> = if targets.is_empty() {
        Vec::new() // nothing to append: the GIL is not given up and taken back for it
    } else {
        py.allow_threads(|| {
            targets
                .iter()
                .map(|(i, log)| {
                    let mut log = log.get().lock();
                    let range = response.partitions[*i].records.clone();
                    let result = log
                        .append_as_follower(&bytes[range], now)
                        .map(|info| (info.record_count, log.log_end_offset()));
                    (*i, result)
                })
                .collect()
        })
    };
    let mut outcome_of = outcomes.into_iter().peekable();
    let list = PyList::empty(py);
    for (i, p) in response.partitions.iter().enumerate() {
        let mut item = FetchedPartition {
            topic: response.topics[p.topic].clone(),
            partition: p.partition,
            error_code: p.error_code,
            high_watermark: p.high_watermark,
            log_start_offset: p.log_start_offset,
            records_bytes: p.records.len(),
            appended: false,
            record_count: 0,
            log_end_offset: -1,
            append_error: None,
        };
        if outcome_of.peek().is_some_and(|(j, _)| *j == i) {
            let (_, result) = outcome_of.next().expect("peeked");
            item.appended = true;
            match result {
                Ok((count, end)) => {
                    item.record_count = count;
                    item.log_end_offset = end;
                }
                Err(e) => item.append_error = Some(to_py_err(e).into_value(py)),
            }
        }
        list.append(Py::new(py, item)?)?;
    }
    Ok(FetchApplied {
        correlation_id: response.correlation_id,
        throttle_time_ms: response.throttle_time_ms,
        error_code: response.error_code,
        session_id: response.session_id,
        partitions: list.unbind(),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FetchedPartition>()?;
    m.add_class::<FetchApplied>()?;
    m.add_function(wrap_pyfunction!(apply_fetch_response, m)?)?;
    Ok(())
}
