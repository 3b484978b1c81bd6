//! The follower's side of a Fetch round trip on a plaintext connection, in
//! three calls a round: the request encoded (`encode_fetch`), the answer read
//! from the socket into a buffer the channel keeps (`receive`, without the
//! GIL, as many reads as the bytes already there allow), and the whole frame
//! walked and every partition's records appended (`apply`, as
//! `apply_fetch_response` does). Python keeps the socket, the event loop's
//! readiness wait between reads, the fetch session's rules and every state
//! change; what it no longer does per round is the generic request encoder
//! over dicts and the frame reading in coroutines (issue 26).
//!
//! Request layout (Fetch v12, the first flexible version; the message is
//! declared once, as data, in `pybroker/protocol/messages/fetch.py`, and a
//! Python test checks these bytes against the Python codec's):
//!
//! ```text
//! size int32
//! api_key int16, api_version int16, correlation_id int32,
//! client_id nullable string (int16 length), header tagged fields
//! replica_id int32, max_wait_ms int32, min_bytes int32, max_bytes int32,
//! isolation_level int8, session_id int32, session_epoch int32
//! topics: compact array of
//!   topic compact string
//!   partitions: compact array of
//!     partition int32, current_leader_epoch int32, fetch_offset int64,
//!     last_fetched_epoch int32, log_start_offset int64,
//!     partition_max_bytes int32, tagged fields
//!   tagged fields
//! forgotten_topics_data: compact array of
//!   topic compact string, partitions compact array of int32, tagged fields
//! rack_id compact string
//! tagged fields (cluster_id 0: not sent by a follower)
//! ```

use pybroker_log::fetch_response::{self, FETCH_RESPONSE_VERSION};
use pybroker_log::frame_read::{fill, frame_end};
use pyo3::exceptions::{PyConnectionError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::follower::{apply_parsed, FetchApplied};
use crate::release;

const FETCH_KEY: i16 = 1;
/// The receive buffer's first size; a larger frame grows it (never shrunk).
const BUFFER_BYTES_INITIAL: usize = 1 << 20;

/// Where a Fetch round's bytes are kept between its calls.
#[pyclass(module = "pybroker._core")]
pub struct FetchChannel {
    client_id: Vec<u8>,
    /// The largest answer taken (a bigger size prefix means a broken peer).
    max_frame_bytes: usize,
    /// The receive buffer: `buf[..have]` is the answer read so far, size prefix included.
    buf: Vec<u8>,
    have: usize,
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_compact_len(out: &mut Vec<u8>, n: usize) -> PyResult<()> {
    let n = u32::try_from(n + 1).map_err(|_| PyValueError::new_err("array too long"))?;
    put_uvarint(out, n);
    Ok(())
}

fn put_compact_string(out: &mut Vec<u8>, s: &str) -> PyResult<()> {
    put_compact_len(out, s.len())?;
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// `d[key]` as T, or `default` when missing (None: the field is required).
fn field<'py, T: FromPyObject<'py>>(
    d: &Bound<'py, PyDict>,
    key: &str,
    default: Option<T>,
) -> PyResult<T> {
    match d.get_item(key)? {
        Some(v) => v
            .extract()
            .map_err(|e| PyValueError::new_err(format!("Fetch request field {key}: {e}"))),
        None => default
            .ok_or_else(|| PyValueError::new_err(format!("Fetch request field {key} is missing"))),
    }
}

/// Fetch v12 request (size prefix included) of `body`, keyed as the Python
/// codec's Fetch request dict; defaults as the schema's.
fn encode(client_id: &[u8], correlation_id: i32, body: &Bound<'_, PyDict>) -> PyResult<Vec<u8>> {
    if let Some(cluster_id) = body.get_item("cluster_id")? {
        if !cluster_id.is_none() {
            return Err(PyValueError::new_err(
                "Fetch request field cluster_id is not sent by a follower",
            ));
        }
    }
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&FETCH_KEY.to_be_bytes());
    out.extend_from_slice(&FETCH_RESPONSE_VERSION.to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    let id_len =
        i16::try_from(client_id.len()).map_err(|_| PyValueError::new_err("client id too long"))?;
    out.extend_from_slice(&id_len.to_be_bytes());
    out.extend_from_slice(client_id);
    out.push(0); // header tagged fields
    out.extend_from_slice(&field::<i32>(body, "replica_id", Some(-1))?.to_be_bytes());
    out.extend_from_slice(&field::<i32>(body, "max_wait_ms", None)?.to_be_bytes());
    out.extend_from_slice(&field::<i32>(body, "min_bytes", None)?.to_be_bytes());
    out.extend_from_slice(&field::<i32>(body, "max_bytes", Some(i32::MAX))?.to_be_bytes());
    out.extend_from_slice(&field::<i8>(body, "isolation_level", None)?.to_be_bytes());
    out.extend_from_slice(&field::<i32>(body, "session_id", None)?.to_be_bytes());
    out.extend_from_slice(&field::<i32>(body, "session_epoch", Some(-1))?.to_be_bytes());
    let topics: Bound<'_, PyList> = field(body, "topics", None)?;
    put_compact_len(&mut out, topics.len())?;
    for topic in topics.iter() {
        let topic = topic.downcast::<PyDict>()?;
        put_compact_string(&mut out, &field::<String>(topic, "topic", None)?)?;
        let partitions: Bound<'_, PyList> = field(topic, "partitions", None)?;
        put_compact_len(&mut out, partitions.len())?;
        for p in partitions.iter() {
            let p = p.downcast::<PyDict>()?;
            out.extend_from_slice(&field::<i32>(p, "partition", None)?.to_be_bytes());
            out.extend_from_slice(
                &field::<i32>(p, "current_leader_epoch", Some(-1))?.to_be_bytes(),
            );
            out.extend_from_slice(&field::<i64>(p, "fetch_offset", None)?.to_be_bytes());
            out.extend_from_slice(&field::<i32>(p, "last_fetched_epoch", Some(-1))?.to_be_bytes());
            out.extend_from_slice(&field::<i64>(p, "log_start_offset", Some(-1))?.to_be_bytes());
            out.extend_from_slice(&field::<i32>(p, "partition_max_bytes", None)?.to_be_bytes());
            out.push(0);
        }
        out.push(0);
    }
    let forgotten: Bound<'_, PyList> = field(body, "forgotten_topics_data", None)?;
    put_compact_len(&mut out, forgotten.len())?;
    for topic in forgotten.iter() {
        let topic = topic.downcast::<PyDict>()?;
        put_compact_string(&mut out, &field::<String>(topic, "topic", None)?)?;
        let partitions: Vec<i32> = field(topic, "partitions", None)?;
        put_compact_len(&mut out, partitions.len())?;
        for p in partitions {
            out.extend_from_slice(&p.to_be_bytes());
        }
        out.push(0);
    }
    put_compact_string(&mut out, &field::<String>(body, "rack_id", None)?)?;
    out.push(0); // body tagged fields
    let size = i32::try_from(out.len() - 4)
        .map_err(|_| PyValueError::new_err("Fetch request too large"))?;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Ok(out)
}

#[pymethods]
impl FetchChannel {
    #[new]
    fn new(client_id: &str, max_frame_bytes: usize) -> Self {
        FetchChannel {
            client_id: client_id.as_bytes().to_vec(),
            max_frame_bytes,
            buf: Vec::new(),
            have: 0,
        }
    }

    /// The Fetch v12 request of `body` (the Python codec's dict of it), size
    /// prefix included. Starts a round: an answer half read is dropped (its
    /// connection was closed).
    fn encode_fetch<'py>(
        &mut self,
        py: Python<'py>,
        correlation_id: i32,
        body: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.have = 0;
        let out = encode(&self.client_id, correlation_id, body)?;
        Ok(PyBytes::new(py, &out))
    }

    /// Reads what the socket `fd` (non-blocking) holds of the answer, without
    /// the GIL: 0 once it is whole, else how many bytes are still wanted (the
    /// caller waits for the socket to be readable, then calls again). OSError
    /// when the socket fails, the peer closed, or the answer's size is wrong.
    fn receive(&mut self, py: Python<'_>, fd: i32) -> PyResult<usize> {
        if self.buf.is_empty() {
            self.buf = vec![0; BUFFER_BYTES_INITIAL.min(self.max_frame_bytes + 4)];
        }
        let max = self.max_frame_bytes;
        let (buf, have) = (&mut self.buf, &mut self.have);
        py.allow_threads(|| fill(fd, buf, have, max))
            .map_err(PyErr::from)
    }

    /// Walks the whole answer `receive` read and appends each partition's
    /// records to `logs[(topic, partition)]`, as `apply_fetch_response` does.
    /// ConnectionError when it is not the answer to `correlation_id` (or not
    /// whole); CorruptRecordError when malformed.
    fn apply(
        &mut self,
        py: Python<'_>,
        correlation_id: i32,
        logs: &Bound<'_, PyDict>,
    ) -> PyResult<FetchApplied> {
        let have = std::mem::take(&mut self.have);
        let end = frame_end(&self.buf, have, self.max_frame_bytes)?;
        if end != Some(have) {
            return Err(PyConnectionError::new_err("no whole Fetch answer to apply"));
        }
        let bytes = &self.buf[4..have];
        let response = release(py, || fetch_response::parse(bytes))?;
        if response.correlation_id != correlation_id {
            return Err(PyConnectionError::new_err(format!(
                "correlation id {} != {correlation_id}",
                response.correlation_id
            )));
        }
        apply_parsed(py, bytes, &response, logs)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FetchChannel>()?;
    Ok(())
}
