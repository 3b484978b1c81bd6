//! A broker taking over many leaderships records each one's leader epoch at
//! its log end (the leader-epoch checkpoint: a write, an fsync, a rename and
//! an fsync of its dir, see `pybroker_log::leader_epoch`) before it leads
//! any of them. The fsyncs overlap on a few threads, as before; this call
//! runs them all without the GIL. With Python worker threads, each checkpoint
//! took the GIL back twice, and while the event loop held it (serving fetches
//! during the takeover) each handover waited up to the interpreter's switch
//! interval: 2,000 checkpoints on 16 threads took 1.5-6x as long beside a busy
//! Python thread as beside an idle one (issue 25). What is written, and when,
//! is unchanged: each entry is durable before the call returns.

use pybroker_log::LogError;
use pyo3::exceptions::{PyBaseException, PyValueError};
use pyo3::prelude::*;

use crate::threads::run_on_threads;
use crate::{to_py_err, PartitionLog};

/// For each `logs[i]`, records that `epochs[i]` starts at its log end offset
/// (read under the log's lock) and writes the checkpoint when that changed
/// the cache, as `PartitionLog.assign_leader_epoch(epoch, log_end_offset)`
/// does, `writers` logs at a time. Returns each log's error (the exception
/// that call would raise) or None: one failure does not stop the others.
#[pyfunction]
pub fn assign_leader_epochs(
    py: Python<'_>,
    logs: Vec<Py<PartitionLog>>,
    epochs: Vec<i32>,
    writers: usize,
) -> PyResult<Vec<Option<Py<PyBaseException>>>> {
    if logs.len() != epochs.len() {
        return Err(PyValueError::new_err(format!(
            "{} logs but {} epochs",
            logs.len(),
            epochs.len()
        )));
    }
    if epochs.iter().any(|e| *e < 0) {
        return Err(PyValueError::new_err("epochs must not be negative"));
    }
    let results: Vec<Result<(), LogError>> = py.allow_threads(|| {
        let assign = |i: usize| -> Result<(), LogError> {
            let mut log = logs[i].get().lock();
            let end = log.log_end_offset();
            log.assign_leader_epoch(epochs[i], end)
        };
        run_on_threads(logs.len(), writers, assign)
    });
    Ok(results
        .into_iter()
        .map(|r| r.err().map(|e| to_py_err(e).into_value(py)))
        .collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(assign_leader_epochs, m)?)?;
    Ok(())
}
