//! The body of a Fetch request (api key 1, v4-17) decoded into the dict the
//! Python codec's generated decoder gives, in one call.
//!
//! Every follower fetch round trip and every consumer long poll is one Fetch
//! request on the leader, and the generic decoder (a Python function per
//! struct, a dict per struct, a varint call per compact length) was the
//! largest single line of the leader's loop per follower round trip after the
//! handler itself (issue 26). The message is declared once, as data, in
//! `pybroker/protocol/messages/fetch.py`; this mirrors the decoder generated
//! from it, field for field and default for default (`tests/protocol/
//! test_fetch_request_native.py` checks it against that decoder at every
//! version, on well-formed, truncated and mutated bodies: the same dict and
//! end position, or both refusing).
//!
//! A malformed body is a ValueError (the frame layer's MalformedRequestError);
//! nothing is read past the frame.

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use pyo3::IntoPyObjectExt;

use crate::buf::BorrowedBuffer;

const MIN_VERSION: i16 = 4;
const MAX_VERSION: i16 = 17;
/// The first flexible version (compact lengths, tagged fields).
const FIRST_FLEXIBLE: i16 = 12;
/// The first version naming topics by id (KIP-516).
const FIRST_TOPIC_ID: i16 = 13;
/// The first version with the replica id in the tagged `replica_state` (KIP-903).
const FIRST_REPLICA_STATE: i16 = 15;
/// The first version with the tagged `replica_directory_id` (KIP-853).
const FIRST_DIRECTORY_ID: i16 = 17;

fn malformed(what: &str) -> PyErr {
    PyValueError::new_err(format!("Fetch request: {what}"))
}

/// A cursor over the frame; every read checks it stays inside.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> PyResult<&[u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or_else(|| malformed("field past end of frame"))?;
        let bytes = &self.buf[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn fixed<const N: usize>(&mut self) -> PyResult<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i8(&mut self) -> PyResult<i8> {
        Ok(i8::from_be_bytes(self.fixed()?))
    }

    fn i16(&mut self) -> PyResult<i16> {
        Ok(i16::from_be_bytes(self.fixed()?))
    }

    fn i32(&mut self) -> PyResult<i32> {
        Ok(i32::from_be_bytes(self.fixed()?))
    }

    fn i64(&mut self) -> PyResult<i64> {
        Ok(i64::from_be_bytes(self.fixed()?))
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Unsigned LEB128, at most 10 bytes, as the codec's read_uvarint (its
    /// tenth byte may carry bits past 64: u128 keeps them, as Python's int).
    fn uvarint(&mut self) -> PyResult<u128> {
        let mut value: u128 = 0;
        let mut shift = 0;
        loop {
            let byte = self.fixed::<1>()?[0];
            value |= u128::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
            if shift > 63 {
                return Err(malformed("varint too long"));
            }
        }
    }

    /// A length: compact (flexible: varint of n + 1, 0 for null) or int16 /
    /// int32 (-1 for null) as `wide` says. None for null.
    fn length(&mut self, flexible: bool, wide: bool) -> PyResult<Option<u128>> {
        if flexible {
            let n = self.uvarint()?;
            return Ok(n.checked_sub(1));
        }
        let n = if wide {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        Ok(u128::try_from(n).ok())
    }

    /// A non-nullable string.
    fn string<'py>(&mut self, py: Python<'py>, flexible: bool) -> PyResult<Bound<'py, PyString>> {
        let n = self
            .length(flexible, false)?
            .ok_or_else(|| malformed("null in a non-nullable field"))?;
        self.string_of(py, n)
    }

    fn string_of<'py>(&mut self, py: Python<'py>, n: u128) -> PyResult<Bound<'py, PyString>> {
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.remaining())
            .ok_or_else(|| malformed("string past end of frame"))?;
        let text = std::str::from_utf8(self.take(n)?)
            .map_err(|_| malformed("a string that is not UTF-8"))?;
        Ok(PyString::new(py, text))
    }

    /// The element count of a non-nullable array whose elements take at
    /// least `least` bytes each (a count the rest of the frame cannot hold is
    /// refused before anything is allocated for it).
    fn count(&mut self, flexible: bool, least: usize) -> PyResult<usize> {
        let n = self
            .length(flexible, true)?
            .ok_or_else(|| malformed("null in a non-nullable field"))?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n.saturating_mul(least) <= self.remaining())
            .ok_or_else(|| malformed("array too long"))
    }

    fn uuid<'py>(&mut self, py: Python<'py>, uuid_of: &Bound<'py, PyAny>) -> PyResult<PyObject> {
        let raw = self
            .take(16)
            .map_err(|_| malformed("uuid past end of frame"))?;
        Ok(uuid_of.call1((PyBytes::new(py, raw),))?.unbind())
    }

    /// The end of a tagged field of `size` bytes starting here.
    fn tag_end(&self, size: u128) -> PyResult<usize> {
        usize::try_from(size)
            .ok()
            .filter(|&size| size <= self.remaining())
            .map(|size| self.pos + size)
            .ok_or_else(|| malformed("tagged field past end"))
    }

    /// Skips the tagged fields of a struct with none known at this version.
    fn skip_tagged(&mut self) -> PyResult<()> {
        let count = self.uvarint()?;
        let mut seen: u128 = 0;
        while seen < count {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.pos = self.tag_end(size)?;
            seen += 1;
        }
        Ok(())
    }
}

/// Decodes Fetch request bodies of one version: called as the codec's
/// decoders are, `(buf, pos) -> (body, end position)`.
#[pyclass(module = "pybroker._core", frozen)]
pub struct FetchRequestDecoder {
    version: i16,
    /// `pybroker.protocol.codec.uuid_of`: the codec's shared UUID instances.
    uuid_of: PyObject,
    /// The null topic id, the default of the uuid fields.
    zero_uuid: PyObject,
}

impl FetchRequestDecoder {
    fn flexible(&self) -> bool {
        self.version >= FIRST_FLEXIBLE
    }

    fn replica_state<'py>(
        py: Python<'py>,
        replica_id: i32,
        replica_epoch: i64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let state = PyDict::new(py);
        state.set_item(intern!(py, "replica_id"), replica_id)?;
        state.set_item(intern!(py, "replica_epoch"), replica_epoch)?;
        Ok(state)
    }

    fn partition<'py>(&self, py: Python<'py>, r: &mut Reader<'_>) -> PyResult<Bound<'py, PyDict>> {
        let v = self.version;
        let partition = r.i32()?;
        let current_leader_epoch = if v >= 9 { r.i32()? } else { -1 };
        let fetch_offset = r.i64()?;
        let last_fetched_epoch = if v >= 12 { r.i32()? } else { -1 };
        let log_start_offset = if v >= 5 { r.i64()? } else { -1 };
        let partition_max_bytes = r.i32()?;
        let mut directory_id = self.zero_uuid.clone_ref(py);
        if self.flexible() {
            let count = r.uvarint()?;
            let mut seen: u128 = 0;
            while seen < count {
                let tag = r.uvarint()?;
                let size = r.uvarint()?;
                let end = r.tag_end(size)?;
                if tag == 0 && v >= FIRST_DIRECTORY_ID {
                    directory_id = r.uuid(py, self.uuid_of.bind(py))?;
                }
                r.pos = end;
                seen += 1;
            }
        }
        let d = PyDict::new(py);
        d.set_item(intern!(py, "partition"), partition)?;
        d.set_item(intern!(py, "current_leader_epoch"), current_leader_epoch)?;
        d.set_item(intern!(py, "fetch_offset"), fetch_offset)?;
        d.set_item(intern!(py, "last_fetched_epoch"), last_fetched_epoch)?;
        d.set_item(intern!(py, "log_start_offset"), log_start_offset)?;
        d.set_item(intern!(py, "partition_max_bytes"), partition_max_bytes)?;
        d.set_item(intern!(py, "replica_directory_id"), directory_id)?;
        Ok(d)
    }

    /// The topic's name and id as the version carries them ('' / the null id
    /// for the one it does not).
    fn topic_key<'py>(
        &self,
        py: Python<'py>,
        r: &mut Reader<'_>,
    ) -> PyResult<(Bound<'py, PyAny>, PyObject)> {
        if self.version >= FIRST_TOPIC_ID {
            let id = r.uuid(py, self.uuid_of.bind(py))?;
            Ok((intern!(py, "").clone().into_any(), id))
        } else {
            let name = r.string(py, self.flexible())?;
            Ok((name.into_any(), self.zero_uuid.clone_ref(py)))
        }
    }

    /// A topic's entry: its name or id, then its partitions, each read by
    /// `item` (at least `least` bytes each), as `{"topic", "topic_id",
    /// "partitions"}`: the fetched topics' and the forgotten ones' shape.
    fn topic_entry<'py>(
        &self,
        py: Python<'py>,
        r: &mut Reader<'_>,
        least: usize,
        mut item: impl FnMut(&mut Reader<'_>) -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let flexible = self.flexible();
        let (name, id) = self.topic_key(py, r)?;
        let n = r.count(flexible, least)?;
        let partitions = PyList::empty(py);
        for _ in 0..n {
            partitions.append(item(r)?)?;
        }
        if flexible {
            r.skip_tagged()?;
        }
        let d = PyDict::new(py);
        d.set_item(intern!(py, "topic"), name)?;
        d.set_item(intern!(py, "topic_id"), id)?;
        d.set_item(intern!(py, "partitions"), partitions)?;
        Ok(d)
    }

    fn topic<'py>(&self, py: Python<'py>, r: &mut Reader<'_>) -> PyResult<Bound<'py, PyDict>> {
        // a partition takes at least 16 bytes (v4: partition, fetch offset, max bytes)
        self.topic_entry(py, r, 16, |r| Ok(self.partition(py, r)?.into_any()))
    }

    fn forgotten<'py>(&self, py: Python<'py>, r: &mut Reader<'_>) -> PyResult<Bound<'py, PyDict>> {
        self.topic_entry(py, r, 4, |r| r.i32()?.into_bound_py_any(py))
    }

    fn body<'py>(&self, py: Python<'py>, r: &mut Reader<'_>) -> PyResult<Bound<'py, PyDict>> {
        let v = self.version;
        let flexible = self.flexible();
        let replica_id = if v < FIRST_REPLICA_STATE {
            r.i32()?
        } else {
            -1
        };
        let max_wait_ms = r.i32()?;
        let min_bytes = r.i32()?;
        let max_bytes = r.i32()?;
        let isolation_level = r.i8()?;
        let (session_id, session_epoch) = if v >= 7 {
            (r.i32()?, r.i32()?)
        } else {
            (0, -1)
        };
        let topics = PyList::empty(py);
        // a topic takes at least 3 bytes (flexible: an empty name, no partitions, no tags)
        for _ in 0..r.count(flexible, 3)? {
            topics.append(self.topic(py, r)?)?;
        }
        let forgotten = PyList::empty(py);
        if v >= 7 {
            for _ in 0..r.count(flexible, 3)? {
                forgotten.append(self.forgotten(py, r)?)?;
            }
        }
        let rack_id = if v >= 11 {
            r.string(py, flexible)?
        } else {
            intern!(py, "").clone()
        };
        let mut cluster_id: Bound<'py, PyAny> = if flexible {
            py.None().into_bound(py)
        } else {
            intern!(py, "").clone().into_any()
        };
        let mut replica_state = Self::replica_state(py, -1, -1)?;
        if flexible {
            let count = r.uvarint()?;
            let mut seen: u128 = 0;
            while seen < count {
                let tag = r.uvarint()?;
                let size = r.uvarint()?;
                let end = r.tag_end(size)?;
                if tag == 0 {
                    cluster_id = match r.length(true, false)? {
                        None => py.None().into_bound(py),
                        Some(n) => r.string_of(py, n)?.into_any(),
                    };
                } else if tag == 1 && v >= FIRST_REPLICA_STATE {
                    let (id, epoch) = (r.i32()?, r.i64()?);
                    r.skip_tagged()?;
                    replica_state = Self::replica_state(py, id, epoch)?;
                }
                r.pos = end;
                seen += 1;
            }
        }
        let d = PyDict::new(py);
        d.set_item(intern!(py, "cluster_id"), cluster_id)?;
        d.set_item(intern!(py, "replica_id"), replica_id)?;
        d.set_item(intern!(py, "replica_state"), replica_state)?;
        d.set_item(intern!(py, "max_wait_ms"), max_wait_ms)?;
        d.set_item(intern!(py, "min_bytes"), min_bytes)?;
        d.set_item(intern!(py, "max_bytes"), max_bytes)?;
        d.set_item(intern!(py, "isolation_level"), isolation_level)?;
        d.set_item(intern!(py, "session_id"), session_id)?;
        d.set_item(intern!(py, "session_epoch"), session_epoch)?;
        d.set_item(intern!(py, "topics"), topics)?;
        d.set_item(intern!(py, "forgotten_topics_data"), forgotten)?;
        d.set_item(intern!(py, "rack_id"), rack_id)?;
        Ok(d)
    }
}

#[pymethods]
impl FetchRequestDecoder {
    #[new]
    fn new(version: i16, uuid_of: PyObject, zero_uuid: PyObject) -> PyResult<Self> {
        if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
            return Err(PyValueError::new_err(format!(
                "Fetch request v{version} is not decoded here (v{MIN_VERSION}-{MAX_VERSION})"
            )));
        }
        Ok(FetchRequestDecoder {
            version,
            uuid_of,
            zero_uuid,
        })
    }

    /// The body starting at `pos` of the frame `buf` (bytes, bytearray or
    /// memoryview): (the dict, the position past it).
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        buf: &Bound<'py, PyAny>,
        pos: usize,
    ) -> PyResult<(Bound<'py, PyDict>, usize)> {
        let exported = BorrowedBuffer::get(buf)?;
        let bytes = exported.as_bytes();
        if pos > bytes.len() {
            return Err(malformed("body past end of frame"));
        }
        let mut r = Reader { buf: bytes, pos };
        let body = self.body(py, &mut r)?;
        Ok((body, r.pos))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FetchRequestDecoder>()?;
    Ok(())
}
