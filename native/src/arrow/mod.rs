//! `Producer.send_arrow`'s data plane: Arrow record batches in, records appended to the open
//! batches' builders, with no Python object per row.
//!
//! The Arrow C Data Interface (ArrowSchema, ArrowArray, ArrowArrayStream) is read here by hand,
//! from the spec's C structs, instead of through arrow-rs: the few layouts the sink takes
//! (binary and string, large and view; ints; timestamps; a list of key/value structs) are a
//! few hundred lines, and arrow-array would add minutes to a cold build (see the README).
//!
//! Ownership: data arrives in PyCapsules (`__arrow_c_stream__`, `__arrow_c_array__`). Each C
//! struct is moved out of its capsule (the capsule's copy is marked released, so its
//! destructor does nothing) into a Box owned here, whose `Drop` calls the producer's
//! `release` callback exactly once. Columns are raw views into the buffers of the batch that
//! owns them, read only while that batch is alive (they live in the same `Batch`).
//!
//! The work is split so that Python runs per batch, never per row: `ArrowRecords::new`
//! imports and checks the schema (nothing queued yet); `plan` checks every row (partition
//! range, record size, timestamps, header keys) and groups the row indices by partition,
//! stably; the accumulator then asks `append_rows` to fill an open batch's builder with the
//! next rows of one group until it is full.
//!
//! The parts, one job each: `ffi` (the C structs, owned and released once), `schema` (the
//! schema's check: which sink column each child is), `view` (a column's slots read through raw
//! pointers, every buffer checked first), `batch` (one record batch's views), `import` (Python
//! data to checked batches), `rows` (every row checked, planned and appended), `records` (the
//! `ArrowRecords` class Python calls).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

mod batch;
mod ffi;
mod import;
mod records;
mod rows;
mod schema;
mod view;

pub use records::ArrowRecords;

// ------------------------------------------------------------------ errors (no Python types: Rust tests link)

/// Why data is refused; each becomes its Python exception in `to_py`.
#[derive(Debug, PartialEq, Eq)]
enum ArrowError {
    /// A column of a type the sink cannot take: TypeError.
    Type(String),
    /// Missing, unknown or duplicate columns, malformed data: ValueError.
    Columns(String),
    /// A row the producer would refuse: InvalidRecordError.
    Row(String),
    /// A row larger than max.request.size or buffer.memory: RecordTooLargeError.
    TooLarge(String),
}

impl ArrowError {
    fn to_py(&self, py: Python<'_>) -> PyErr {
        let (class, message) = match self {
            ArrowError::Type(m) => return PyTypeError::new_err(m.clone()),
            ArrowError::Columns(m) => return PyValueError::new_err(m.clone()),
            ArrowError::Row(m) => ("InvalidRecordError", m),
            ArrowError::TooLarge(m) => ("RecordTooLargeError", m),
        };
        match py.import("aioproducer.errors").and_then(|m| m.getattr(class)).and_then(|c| c.call1((message.clone(),))) {
            Ok(exc) => PyErr::from_value(exc),
            Err(e) => e,
        }
    }
}
