//! The per-record delivery future (`FutureRecordMetadata`).
//!
//! As in the Java client (one `ProduceRequestResult` per batch, a `FutureRecordMetadata` per
//! record holding a relative offset), a record's future is small: its batch, its offset delta,
//! its create time and sizes; the outcome is its batch's ([`ProducerBatch`]), shared by every
//! future of the batch and written once when the batch completes. Completing a batch therefore costs nothing
//! per future, and a future its caller dropped is already gone.
//!
//! asyncio accepts the future as one of its own: `asyncio.isfuture()` reads
//! `_asyncio_future_blocking` on the class, and `gather`, `wait`, `wait_for`, `shield` then use
//! the duck-typed Future API. The methods asyncio calls once per record (`done`, `result`,
//! `exception`, `cancelled`, `get_loop`) are here; the ones users call now and then
//! (`add_done_callback`, `cancel`, `__await__`, ...) are Python, in `aioproducer/internals/batch.py`,
//! set on this type when that module is imported: they keep the batch's done-callback lists,
//! which only batch.py writes.
//!
//! `ProducerBatch.try_append` (native/src/batch.rs) appends a record and makes its future in one
//! call from Python: the append door's per-record native call.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use pyo3::{intern, PyTraverseError, PyVisit};

use crate::batch::ProducerBatch;
use crate::guarded;

pyo3::import_exception!(asyncio, CancelledError);
pyo3::import_exception!(asyncio, InvalidStateError);

/// `RecordMetadata` (a named tuple of aioproducer/record_types.py, at the bottom of the
/// package: this module imports nothing from `internals/`) and `tuple.__new__`, which makes one without the
/// named tuple's Python-level `__new__` frame.
static RECORD_METADATA: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

fn record_metadata<'py>(py: Python<'py>, fields: Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
    let (cls, new) = RECORD_METADATA.get_or_try_init(py, || -> PyResult<_> {
        let cls = py.import("aioproducer.record_types")?.getattr("RecordMetadata")?;
        let new = py.get_type::<PyTuple>().getattr("__new__")?;
        Ok((cls.unbind(), new.unbind()))
    })?;
    new.bind(py).call1((cls.bind(py), fields))
}

/// A record's delivery future: `await` it for its `RecordMetadata`.
///
/// No `freelist`: pyo3 0.30.1's freelist hands out a reused object without tracking it for the
/// collector again, so a cycle through it would leak (tests/unit/test_native_future.py caught
/// it); without one a future costs the same (benchmarks/record_future.py, within noise).
#[pyclass(module = "aioproducer._native")]
pub struct FutureRecordMetadata {
    /// The `ProducerBatch` holding the record (the piece that holds it once its batch was
    /// split), whose native half holds the outcome. None only after the collector cleared it.
    batch: Option<Py<ProducerBatch>>,
    relative_offset: i64,
    timestamp: i64,
    key_size: i64,
    value_size: i64,
    cancelled: bool,
    cancel_message: Option<Py<PyAny>>,
}

fn cleared() -> PyErr {
    InvalidStateError::new_err("this record future was cleared by the garbage collector")
}

impl FutureRecordMetadata {
    fn cancelled_error(&self, py: Python<'_>) -> PyErr {
        match &self.cancel_message {
            None => CancelledError::new_err(()),
            Some(message) => CancelledError::new_err((message.clone_ref(py),)),
        }
    }

    fn batch<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, ProducerBatch>> {
        self.batch.as_ref().map(|b| b.bind(py)).ok_or_else(cleared)
    }

    /// `result()`: the record's metadata, or its error raised.
    fn result_of<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let this = slf.borrow();
        if this.cancelled {
            return Err(this.cancelled_error(py));
        }
        let outcome = this.batch(py)?.borrow();
        if !outcome.done {
            return Err(InvalidStateError::new_err("delivery of this record is not complete yet"));
        }
        if outcome.error.is_some() || outcome.base_offset < 0 {
            // A failed batch (the record's own error, KIP-467, or its piece's), or no offset known
            // (acks=0, a duplicate, a split batch): the rare path, in Python.
            drop(outcome);
            drop(this);
            return slf.call_method0(intern!(py, "_result_of_failed_or_split"));
        }
        let (timestamp, timestamp_type) = if outcome.log_append_time >= 0 { (outcome.log_append_time, 1) } else { (this.timestamp, 0) };
        let fields =
            (outcome.topic.bind(py), outcome.partition, outcome.base_offset + this.relative_offset, timestamp, this.key_size, this.value_size, timestamp_type)
                .into_pyobject(py)?;
        record_metadata(py, fields)
    }

    /// `exception()`: the record's error, None once delivered.
    fn exception_of<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = slf.py();
        let this = slf.borrow();
        if this.cancelled {
            return Err(this.cancelled_error(py));
        }
        let outcome = this.batch(py)?.borrow();
        if !outcome.done {
            return Err(InvalidStateError::new_err("delivery of this record is not complete yet"));
        }
        if outcome.error.is_none() {
            return Ok(None);
        }
        drop(outcome);
        let (batch, relative_offset) = (this.batch(py)?.clone(), this.relative_offset);
        drop(this);
        let error = batch.call_method1(intern!(py, "error_of"), (relative_offset,))?;
        Ok((!error.is_none()).then_some(error))
    }
}

#[pymethods]
impl FutureRecordMetadata {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        guarded("FutureRecordMetadata.__new__", || Err(PyTypeError::new_err("record futures are made by Producer.send(), not directly")))
    }

    /// What `asyncio.isfuture()` looks for: `gather`, `wait_for` and `shield` use the future as it is.
    #[classattr]
    fn _asyncio_future_blocking() -> bool {
        false
    }

    fn get_loop(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        guarded("FutureRecordMetadata.get_loop", || Ok(self.batch(py)?.borrow().event_loop.clone_ref(py)))
    }

    fn done(&self, py: Python<'_>) -> PyResult<bool> {
        guarded("FutureRecordMetadata.done", || Ok(self.cancelled || self.batch.as_ref().is_some_and(|b| b.borrow(py).done)))
    }

    fn cancelled(&self) -> PyResult<bool> {
        guarded("FutureRecordMetadata.cancelled", || Ok(self.cancelled))
    }

    fn result<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        guarded("FutureRecordMetadata.result", || Self::result_of(slf))
    }

    fn exception<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyAny>>> {
        guarded("FutureRecordMetadata.exception", || Self::exception_of(slf))
    }

    #[getter]
    fn _batch(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        guarded("FutureRecordMetadata._batch", || Ok(self.batch(py)?.clone().into_any().unbind()))
    }

    #[getter]
    fn _relative_offset(&self) -> PyResult<i64> {
        guarded("FutureRecordMetadata._relative_offset", || Ok(self.relative_offset))
    }

    #[getter]
    fn _timestamp(&self) -> PyResult<i64> {
        guarded("FutureRecordMetadata._timestamp", || Ok(self.timestamp))
    }

    #[getter]
    fn _key_size(&self) -> PyResult<i64> {
        guarded("FutureRecordMetadata._key_size", || Ok(self.key_size))
    }

    #[getter]
    fn _value_size(&self) -> PyResult<i64> {
        guarded("FutureRecordMetadata._value_size", || Ok(self.value_size))
    }

    /// What asyncio's own code (gather's and wait_for's callbacks) asks a cancelled future for.
    #[getter]
    fn _cancel_message(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        guarded("FutureRecordMetadata._cancel_message", || Ok(self.cancel_message.as_ref().map(|m| m.clone_ref(py))))
    }

    /// Marks it cancelled (`cancel()` in batch.py runs its done-callbacks).
    fn _mark_cancelled(&mut self, message: Option<Py<PyAny>>) -> PyResult<()> {
        guarded("FutureRecordMetadata._mark_cancelled", || {
            self.cancelled = true;
            self.cancel_message = message;
            Ok(())
        })
    }

    /// Its record moved to `piece` (a split batch's), where it starts at offset delta `start`.
    fn _move_to(&mut self, piece: Py<ProducerBatch>, start: i64) -> PyResult<()> {
        guarded("FutureRecordMetadata._move_to", || {
            self.batch = Some(piece);
            self.relative_offset -= start;
            Ok(())
        })
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.batch)?;
        visit.call(&self.cancel_message)
    }

    fn __clear__(&mut self) -> PyResult<()> {
        guarded("FutureRecordMetadata.__clear__", || {
            self.batch = None;
            self.cancel_message = None;
            Ok(())
        })
    }
}

impl FutureRecordMetadata {
    /// The future of the record appended at `relative_offset` of `batch` (`ProducerBatch.try_append`).
    pub(crate) fn for_record(batch: Py<ProducerBatch>, relative_offset: i64, timestamp: i64, key_size: i64, value_size: i64) -> Self {
        FutureRecordMetadata { batch: Some(batch), relative_offset, timestamp, key_size, value_size, cancelled: false, cancel_message: None }
    }
}
