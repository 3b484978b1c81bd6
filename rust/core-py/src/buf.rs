//! Borrowing the bytes of any Python buffer (bytes, bytearray, memoryview)
//! without copying.
//!
//! pyo3's `PyBuffer` is compiled out for `abi3-py310`, because the buffer
//! protocol entered the limited API only in 3.11. The two functions and the
//! `Py_buffer` struct below are declared here with exactly the layout the
//! stable ABI froze in 3.11 (unchanged since CPython 3.3), so the wheel
//! keeps working on 3.10 too.

use std::ffi::{c_char, c_int, c_void};

use pyo3::ffi::{PyObject, Py_ssize_t};
use pyo3::prelude::*;

#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut PyObject,
    len: Py_ssize_t,
    itemsize: Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut Py_ssize_t,
    strides: *mut Py_ssize_t,
    suboffsets: *mut Py_ssize_t,
    internal: *mut c_void,
}

extern "C" {
    fn PyObject_GetBuffer(obj: *mut PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// PyBUF_SIMPLE: a C-contiguous run of unsigned bytes.
const PYBUF_SIMPLE: c_int = 0;

/// An exported buffer, released on drop. Lives on a GIL-holding frame only
/// (it is not `Send`); hand its `as_bytes()` slice to GIL-free code.
pub struct BorrowedBuffer {
    view: Box<RawBuffer>,
}

impl BorrowedBuffer {
    /// Exports `obj`'s buffer (raises TypeError/BufferError like `memoryview(obj)`).
    pub fn get(obj: &Bound<'_, PyAny>) -> PyResult<BorrowedBuffer> {
        // SAFETY: an all-zero RawBuffer is a valid "empty" struct of plain
        // pointers and integers; PyObject_GetBuffer fills it in.
        let mut view: Box<RawBuffer> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: the GIL is held (we have a Bound), `obj` is a live object,
        // `view` points to writable memory of the exact Py_buffer layout.
        let rc = unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *view, PYBUF_SIMPLE) };
        if rc != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(BorrowedBuffer { view })
    }

    /// The exported bytes. With PyBUF_SIMPLE they are one contiguous run.
    pub fn as_bytes(&self) -> &[u8] {
        if self.view.buf.is_null() || self.view.len <= 0 {
            return &[];
        }
        // SAFETY: a successful PyBUF_SIMPLE export guarantees `len`
        // contiguous bytes at `buf`, valid until PyBuffer_Release (our Drop),
        // and the slice cannot outlive `self`. While exported, a bytearray
        // cannot be resized or freed. A writable exporter may still be
        // mutated by another thread while the GIL is released: that can only
        // change which bytes get written (the broker passes immutable bytes).
        unsafe { std::slice::from_raw_parts(self.view.buf as *const u8, self.view.len as usize) }
    }
}

impl Drop for BorrowedBuffer {
    fn drop(&mut self) {
        // SAFETY: the view was filled by a successful PyObject_GetBuffer and
        // is released exactly once; BorrowedBuffer is !Send and only dropped
        // on the thread that holds the GIL (the pymethod's frame).
        unsafe { PyBuffer_Release(&mut *self.view) }
    }
}
