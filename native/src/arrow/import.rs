//! Python data to checked batches: the PyCapsule interface (`__arrow_c_stream__`, else
//! `__arrow_c_array__`), the schema checked, then each record batch's buffers.

use std::ffi::{c_int, CStr};
use std::ptr;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::batch::Batch;
use super::ffi::{take_from_capsule, FfiArray, FfiSchema, FfiStream, OwnedArray, OwnedSchema, OwnedStream};
use super::schema::{check_schema, Column};

/// Imports `data` (`__arrow_c_stream__`, else `__arrow_c_array__`): its checked columns and batches.
pub(super) fn import(data: &Bound<'_, PyAny>) -> PyResult<(Vec<Column>, Vec<Batch>)> {
    let py = data.py();
    if data.hasattr("__arrow_c_stream__")? {
        let capsule = data.call_method0("__arrow_c_stream__")?;
        let stream = OwnedStream(take_from_capsule(
            &capsule,
            c"arrow_array_stream",
            FfiStream { get_schema: None, get_next: None, get_last_error: None, release: None, private_data: ptr::null_mut() },
        )?);
        return read_stream(py, stream);
    }
    if data.hasattr("__arrow_c_array__")? {
        let pair = data.call_method0("__arrow_c_array__")?;
        let pair = pair.cast::<PyTuple>().map_err(|_| PyTypeError::new_err("send_arrow: __arrow_c_array__ did not return a pair"))?;
        let schema = OwnedSchema(take_from_capsule(&pair.get_item(0)?, c"arrow_schema", FfiSchema::empty())?);
        let array = OwnedArray(take_from_capsule(&pair.get_item(1)?, c"arrow_array", FfiArray::empty())?);
        let columns = check_schema(&schema.0).map_err(|e| e.to_py(py))?;
        // SAFETY: the array was exported with this schema.
        let batch = unsafe { Batch::new(array, &columns) }.map_err(|e| e.to_py(py))?;
        return Ok((columns, vec![batch]));
    }
    Err(PyTypeError::new_err(format!(
        "send_arrow: data must be Arrow data (a pyarrow Table or RecordBatch, a polars DataFrame, any object with \
         __arrow_c_stream__ or __arrow_c_array__), not {}",
        data.get_type().name()?
    )))
}

fn stream_error(stream: &mut FfiStream, code: c_int) -> PyErr {
    let message = match stream.get_last_error {
        // SAFETY: the stream is valid and unreleased; the message lives until its next call.
        Some(f) => unsafe {
            let p = f(stream);
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        },
        None => String::new(),
    };
    PyValueError::new_err(format!("send_arrow: reading the Arrow stream failed (error {code}): {message}"))
}

fn read_stream(py: Python<'_>, mut stream: OwnedStream) -> PyResult<(Vec<Column>, Vec<Batch>)> {
    let s = &mut *stream.0;
    let (Some(get_schema), Some(get_next)) = (s.get_schema, s.get_next) else {
        return Err(PyValueError::new_err("send_arrow: the Arrow stream is released or incomplete"));
    };
    let mut schema = OwnedSchema(Box::new(FfiSchema::empty()));
    // SAFETY: a valid stream, and an empty schema struct for it to fill.
    let code = unsafe { get_schema(s, &mut *schema.0) };
    if code != 0 {
        return Err(stream_error(s, code));
    }
    let columns = check_schema(&schema.0).map_err(|e| e.to_py(py))?;
    let mut batches = Vec::new();
    loop {
        let mut array = OwnedArray(Box::new(FfiArray::empty()));
        // SAFETY: as above; a released (NULL release) result marks the end of the stream.
        let code = unsafe { get_next(s, &mut *array.0) };
        if code != 0 {
            return Err(stream_error(s, code));
        }
        if array.0.release.is_none() {
            break;
        }
        // SAFETY: the stream's arrays follow its schema.
        batches.push(unsafe { Batch::new(array, &columns) }.map_err(|e| e.to_py(py))?);
    }
    Ok((columns, batches))
}
