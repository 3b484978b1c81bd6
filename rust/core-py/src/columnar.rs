//! Binding of `pybroker_log::columnar`: record batches to Arrow-layout
//! columns (read side of `pybroker.spark`), and batch building + key hashing
//! for its writer.

use pybroker_log::builder::{BatchBuilder, Record};
use pybroker_log::columnar::{self, AbortedTxn, BinaryColumn};
use pybroker_log::LogError;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::buf::BorrowedBuffer;
use crate::release;

/// Decoded rows in Arrow layout. Immutable once built: the buffers never
/// move or change while the object lives, so Python wraps them without a
/// copy (`pyarrow.foreign_buffer(address, size, base=self)`).
#[pyclass(frozen, module = "pybroker._core")]
struct RecordColumns {
    inner: columnar::RecordColumns,
}

fn addr<T>(v: &[T]) -> (usize, usize) {
    (v.as_ptr() as usize, std::mem::size_of_val(v))
}

fn add_binary(d: &Bound<'_, PyDict>, name: &str, c: &BinaryColumn) -> PyResult<()> {
    d.set_item(format!("{name}_offsets"), addr(&c.offsets))?;
    d.set_item(format!("{name}_data"), addr(&c.data))?;
    d.set_item(format!("{name}_validity"), addr(&c.validity))?;
    d.set_item(format!("{name}_null_count"), c.null_count)?;
    Ok(())
}

#[pymethods]
impl RecordColumns {
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    #[getter]
    fn next_offset(&self) -> i64 {
        self.inner.next_offset
    }

    /// name -> (address, size in bytes) of each buffer, plus `*_null_count`.
    fn buffers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = &self.inner;
        let d = PyDict::new(py);
        add_binary(&d, "key", &c.keys)?;
        add_binary(&d, "value", &c.values)?;
        d.set_item("offset", addr(&c.offsets))?;
        d.set_item("timestamp", addr(&c.timestamps_us))?;
        d.set_item("timestamp_type", addr(&c.timestamp_types))?;
        if let Some(h) = &c.headers {
            d.set_item("headers_offsets", addr(&h.list_offsets))?;
            d.set_item("headers_validity", addr(&h.validity))?;
            d.set_item("headers_null_count", h.null_count)?;
            add_binary(&d, "header_key", &h.keys)?;
            add_binary(&d, "header_value", &h.values)?;
            d.set_item("header_count", h.keys.offsets.len() - 1)?;
        }
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "RecordColumns(rows={}, next_offset={})",
            self.inner.len(),
            self.inner.next_offset
        )
    }
}

/// Decode the whole batches in `buf` (a Fetch response's records) into columns.
/// With `aborted` ((producer_id, first_offset) of a read_committed Fetch
/// response), the batches of aborted transactions are dropped too.
#[pyfunction]
#[pyo3(signature = (
    buf, start_offset, end_offset, *, include_headers=false, max_rows=1<<20, aborted=None
))]
fn decode_columns(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    start_offset: i64,
    end_offset: i64,
    include_headers: bool,
    max_rows: usize,
    aborted: Option<Vec<(i64, i64)>>,
) -> PyResult<RecordColumns> {
    let buf = BorrowedBuffer::get(buf)?;
    let bytes = buf.as_bytes();
    let aborted: Vec<AbortedTxn> = aborted
        .unwrap_or_default()
        .into_iter()
        .map(|(producer_id, first_offset)| AbortedTxn {
            producer_id,
            first_offset,
        })
        .collect();
    let inner = release(py, || {
        columnar::decode_columns_committed(
            bytes,
            start_offset,
            end_offset,
            include_headers,
            max_rows,
            &aborted,
        )
    })?;
    Ok(RecordColumns { inner })
}

/// A header as the writer passes it: (name, value or None).
type PyHeader = (String, Option<Vec<u8>>);

/// One uncompressed v2 batch (base offset 0) of the given records.
#[pyfunction]
#[pyo3(signature = (keys, values, timestamp_ms, headers=None))]
fn build_batch<'py>(
    py: Python<'py>,
    keys: Vec<Option<Vec<u8>>>,
    values: Vec<Option<Vec<u8>>>,
    timestamp_ms: i64,
    headers: Option<Vec<Option<Vec<PyHeader>>>>,
) -> PyResult<Bound<'py, PyBytes>> {
    if keys.len() != values.len() || keys.is_empty() {
        return Err(PyValueError::new_err(
            "keys and values must be non-empty and of equal length",
        ));
    }
    if headers.as_ref().is_some_and(|h| h.len() != keys.len()) {
        return Err(PyValueError::new_err(
            "headers must have one entry per record",
        ));
    }
    let out = py.allow_threads(|| {
        let mut b = BatchBuilder::new(0, timestamp_ms);
        let mut headers = headers.map(Vec::into_iter);
        for (key, value) in keys.into_iter().zip(values) {
            let hs = headers.as_mut().and_then(Iterator::next).flatten();
            b.push(Record {
                timestamp: timestamp_ms,
                key,
                value,
                headers: hs.unwrap_or_default(),
            });
        }
        b.build()
    });
    Ok(PyBytes::new(py, &out))
}

/// An Arrow binary array as Python hands it over:
/// (validity buffer or None, offsets buffer (i32), data buffer, array offset, length).
type ArrowBinary<'py> = (
    Option<Bound<'py, PyAny>>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    usize,
    usize,
);

/// Borrowed buffers of one Arrow binary array.
struct BinaryView {
    validity: Option<BorrowedBuffer>,
    offsets: BorrowedBuffer,
    data: BorrowedBuffer,
    offset: usize,
    len: usize,
}

impl BinaryView {
    fn get(a: &ArrowBinary<'_>) -> PyResult<BinaryView> {
        let v = BinaryView {
            validity: a.0.as_ref().map(BorrowedBuffer::get).transpose()?,
            offsets: BorrowedBuffer::get(&a.1)?,
            data: BorrowedBuffer::get(&a.2)?,
            offset: a.3,
            len: a.4,
        };
        let end = v.offset.checked_add(v.len).and_then(|e| e.checked_add(1));
        if end.is_none_or(|e| v.offsets.as_bytes().len() < e * 4) {
            return Err(PyValueError::new_err("offsets buffer too short"));
        }
        if let Some(b) = &v.validity {
            if b.as_bytes().len() * 8 < v.offset + v.len {
                return Err(PyValueError::new_err("validity buffer too short"));
            }
        }
        Ok(v)
    }

    /// The bytes, for GIL-free code.
    fn slices(&self) -> BinarySlices<'_> {
        BinarySlices {
            validity: self.validity.as_ref().map(BorrowedBuffer::as_bytes),
            offsets: self.offsets.as_bytes(),
            data: self.data.as_bytes(),
            offset: self.offset,
        }
    }
}

struct BinarySlices<'a> {
    validity: Option<&'a [u8]>,
    offsets: &'a [u8],
    data: &'a [u8],
    offset: usize,
}

impl BinarySlices<'_> {
    /// Row `i` (checked against the buffers by [`BinaryView::get`] and here).
    fn row(&self, i: usize) -> pybroker_log::Result<Option<&[u8]>> {
        let j = self.offset + i;
        if let Some(b) = self.validity {
            if b[j / 8] & (1 << (j % 8)) == 0 {
                return Ok(None);
            }
        }
        let o = self.offsets;
        let at =
            |k: usize| i32::from_le_bytes([o[4 * k], o[4 * k + 1], o[4 * k + 2], o[4 * k + 3]]);
        let (a, b) = (at(j), at(j + 1));
        if a < 0 || b < a {
            return Err(LogError::InvalidRecord(format!(
                "bad Arrow offsets {a}..{b}"
            )));
        }
        self.data
            .get(a as usize..b as usize)
            .map(Some)
            .ok_or_else(|| LogError::InvalidRecord("Arrow offsets past the data".into()))
    }
}

/// One uncompressed v2 batch (base offset 0) straight from Arrow binary
/// arrays (values, and keys or None): no Python object per record.
#[pyfunction]
#[pyo3(signature = (values, timestamp_ms, keys=None))]
fn build_batch_arrow<'py>(
    py: Python<'py>,
    values: ArrowBinary<'py>,
    timestamp_ms: i64,
    keys: Option<ArrowBinary<'py>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let values = BinaryView::get(&values)?;
    let keys = keys.as_ref().map(BinaryView::get).transpose()?;
    if values.len == 0 || keys.as_ref().is_some_and(|k| k.len != values.len) {
        return Err(PyValueError::new_err(
            "values must be non-empty and keys of the same length",
        ));
    }
    let n = values.len;
    let (values, keys) = (values.slices(), keys.as_ref().map(BinaryView::slices));
    let out = release(py, || {
        let mut b = BatchBuilder::new(0, timestamp_ms);
        for i in 0..n {
            let key = match &keys {
                Some(k) => k.row(i)?,
                None => None,
            };
            b.push(Record::new(timestamp_ms, key, values.row(i)?));
        }
        Ok(b.build())
    })?;
    Ok(PyBytes::new(py, &out))
}

/// Kafka's default partition of each key: (murmur2(key) & 0x7fffffff) % n,
/// or -1 for a null key.
#[pyfunction]
fn key_partitions(keys: Vec<Option<Vec<u8>>>, num_partitions: i32) -> PyResult<Vec<i32>> {
    if num_partitions <= 0 {
        return Err(PyValueError::new_err("num_partitions must be positive"));
    }
    Ok(keys
        .iter()
        .map(|k| match k {
            Some(k) => (columnar::murmur2(k) & 0x7fff_ffff) % num_partitions,
            None => -1,
        })
        .collect())
}

/// Adds this module's classes and functions to `pybroker._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RecordColumns>()?;
    m.add_function(wrap_pyfunction!(decode_columns, m)?)?;
    m.add_function(wrap_pyfunction!(build_batch, m)?)?;
    m.add_function(wrap_pyfunction!(build_batch_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(key_partitions, m)?)?;
    Ok(())
}
