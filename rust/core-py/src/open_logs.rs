//! A start opens thousands of partition logs. Opened one by one from Python
//! worker threads, each log took the GIL back after its Rust open and after
//! each of the file calls around it (its `partition.metadata` read, the size
//! of its segments before a recovery): while the event loop held the GIL
//! (applying the partition states read at the same time), every one of those
//! handovers could wait the interpreter's switch interval. At 10,000 logs
//! after a kill -9, on a loaded machine, the two opening threads spent as
//! long in those Python calls as in the Rust opens (issue 25, `restart3`).
//! These calls do a whole batch without the GIL, on a few threads: the
//! small files are read in one call, the logs opened in another. What each
//! log's open does (recovery included) is `PartitionLog(...)`'s, unchanged.

use std::path::PathBuf;

use pybroker_log::{LogConfig, OpenState};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::IntoPyObjectExt;

use crate::threads::run_on_threads;
use crate::{now_ms, to_py_err, PartitionLog};

/// Each file's first `max_bytes` bytes, or None when it does not exist, or the
/// OSError reading it raised (errno, message, path), `threads` files at a time.
#[pyfunction]
pub fn read_small_files(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    max_bytes: usize,
    threads: usize,
) -> PyResult<Vec<PyObject>> {
    let read: Vec<std::io::Result<Option<Vec<u8>>>> = py.allow_threads(|| {
        run_on_threads(paths.len(), threads, |i| {
            use std::io::Read;
            let file = match std::fs::File::open(&paths[i]) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                other => other?,
            };
            let mut data = Vec::new();
            file.take(max_bytes as u64).read_to_end(&mut data)?;
            Ok(Some(data))
        })
    });
    read.into_iter()
        .zip(&paths)
        .map(|(r, path)| match r {
            Ok(Some(data)) => PyBytes::new(py, &data).into_py_any(py),
            Ok(None) => Ok(py.None()),
            Err(e) => PyOSError::new_err((
                e.raw_os_error().unwrap_or(0),
                e.to_string(),
                path.to_string_lossy().into_owned(),
            ))
            .into_value(py)
            .into_py_any(py),
        })
        .collect()
}

/// Opens `paths[i]` as `PartitionLog(paths[i], recovery_point=recovery_points[i],
/// log_start_offset=log_starts[i], clean_shutdown=clean_shutdowns[i], **options)`
/// would, `threads` logs at a time. Returns each log, or the exception its
/// open raised: one failure does not stop the others.
#[pyfunction]
#[pyo3(signature = (
    paths, recovery_points, log_starts, clean_shutdowns, threads, *,
    segment_bytes=1073741824, segment_ms=604800000, index_interval_bytes=4096,
    segment_index_bytes=10485760, max_message_bytes=1048588, log_append_time=false,
    timestamp_before_max_ms=i64::MAX, timestamp_after_max_ms=i64::MAX, compact=false
))]
#[allow(clippy::too_many_arguments)]
pub fn open_logs(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    recovery_points: Vec<i64>,
    log_starts: Vec<i64>,
    clean_shutdowns: Vec<bool>,
    threads: usize,
    segment_bytes: u64,
    segment_ms: i64,
    index_interval_bytes: u64,
    segment_index_bytes: u64,
    max_message_bytes: u64,
    log_append_time: bool,
    timestamp_before_max_ms: i64,
    timestamp_after_max_ms: i64,
    compact: bool,
) -> PyResult<Vec<PyObject>> {
    let n = paths.len();
    if recovery_points.len() != n || log_starts.len() != n || clean_shutdowns.len() != n {
        return Err(PyValueError::new_err(format!(
            "{n} paths but {} recovery points, {} log starts, {} clean flags",
            recovery_points.len(),
            log_starts.len(),
            clean_shutdowns.len()
        )));
    }
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
    let opened = py.allow_threads(|| {
        let now = now_ms();
        run_on_threads(n, threads, |i| {
            let state = OpenState {
                recovery_point: recovery_points[i],
                clean_shutdown: clean_shutdowns[i],
                log_start_offset: log_starts[i],
                now_ms: now,
            };
            pybroker_log::Log::open(&paths[i], config.clone(), state)
        })
    });
    opened
        .into_iter()
        .map(|r| match r {
            Ok(log) => Py::new(py, PartitionLog::from_log(log))?.into_py_any(py),
            Err(e) => to_py_err(e).into_value(py).into_py_any(py),
        })
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_small_files, m)?)?;
    m.add_function(wrap_pyfunction!(open_logs, m)?)?;
    Ok(())
}
