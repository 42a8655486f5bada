//! `ProducerBatch` (issue #42, slice 2): records for one topic-partition, sent and completed
//! together; one native object per batch.
//!
//! Its fields are here: the builder, the schedule (created, delivery deadline, last attempt,
//! attempts, backoff), the memory reservation, the idempotent producer state, the flags and the
//! outcome, which every record future of the batch reads (a record future points at its batch),
//! each written only by the transitions below, named after Java's `ProducerBatch`; and the state
//! that is Python by nature (its event loop, its logger, the futures, `on_delivery` rows,
//! done-callbacks, awaiters, spans, split pieces, Arrow runs), which `aioproducer/internals/batch.py`
//! reads and writes through the methods it sets on this type (`_install_batch_methods`): its
//! completion, split and reports, which call back into Python anyway.
//!
//! Why native: the per-batch path (the drain, the Produce request, the completion: slices 3 and
//! 4 of `docs/design/native-batches.md`) loops over batches, and with the batch native those
//! loops read it without Python attribute lookups; a batch is one object where it was three (the
//! batch, its outcome, its Python `__init__`'s frame), and a record's append is one native method
//! call with no Python frame (`try_append`).
//!
//! The record futures (`FutureRecordMetadata`, at the end) live here too: a future is a view of its
//! batch's outcome, and the batch makes its futures, so the two are one unit, as in Java.
//!
//! One writer: the native fields are read-only from Python; the Python state is written by
//! batch.py only (`tests/unit/test_batch_ownership.py` checks both).

use std::sync::atomic::{AtomicI64, Ordering};

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PyTuple, PyType};
use pyo3::{intern, PyTraverseError, PyVisit};

use crate::batch_builder::{Header, ProducerState, PyRecordBatchBuilder};
use crate::guarded;
use crate::produce::python::{RequestRecords, SPLICE_THRESHOLD};

/// No sequence assigned yet (Java's `RecordBatch.NO_SEQUENCE`).
pub const NO_SEQUENCE: i64 = -1;

/// Headers as Python passes them (`(str, bytes | None)` pairs), held for the call.
pub(crate) type PyHeaders = Vec<(PyBackedStr, Option<PyBackedBytes>)>;

/// batch.py's `_callback_bytes` (what holding an `on_delivery` charges) and the producer's default
/// logger, looked up once.
static CALLBACK_BYTES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static DEFAULT_LOG: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// What one queued record and one `send_arrow()` row hold in Python objects besides their encoded
/// bytes: measured by batch.py (`RECORD_OBJECT_BYTES`, `ARROW_ROW_BYTES`), which sets them once at
/// import (`set_object_costs`); read by `object_bytes`.
static RECORD_OBJECT_BYTES: AtomicI64 = AtomicI64::new(0);
static ARROW_ROW_BYTES: AtomicI64 = AtomicI64::new(0);

/// Sets what `ProducerBatch.object_bytes` counts per record and per `send_arrow()` row (batch.py, at import).
#[pyfunction]
pub fn set_object_costs(record_object_bytes: i64, arrow_row_bytes: i64) -> PyResult<()> {
    guarded("set_object_costs", || {
        RECORD_OBJECT_BYTES.store(record_object_bytes, Ordering::Relaxed);
        ARROW_ROW_BYTES.store(arrow_row_bytes, Ordering::Relaxed);
        Ok(())
    })
}

/// A producer batch; see the module's documentation.
#[pyclass(module = "aioproducer._native")]
pub struct ProducerBatch {
    /// Fixed at construction: the topic (a `str`), the partition and the builder (which changes itself).
    pub(crate) topic: Py<PyAny>,
    pub(crate) partition: i64,
    pub(crate) builder: Py<PyRecordBatchBuilder>,
    /// When its first record was appended (a split's pieces keep their parent's).
    pub(crate) created_ms: f64,
    /// When its records' `delivery.timeout.ms` runs out: stamped once at construction, or
    /// taken from the parent by a split's piece (`keep_deadline_of`); read by every expiry
    /// through `has_reached_delivery_timeout` (Java's `hasReachedDeliveryTimeout`).
    pub(crate) delivery_deadline_ms: f64,
    /// The retry schedule: written by `reenqueued` and `reenqueued_piece`, read by the
    /// accumulator's `ready` and `drain`. The backoff is jittered once per attempt by the
    /// accumulator, so that `ready` and `drain` read the same value.
    pub(crate) last_attempt_ms: f64,
    pub(crate) attempts: i64,
    pub(crate) retry_backoff_ms: f64,
    /// The bytes of `buffer.memory` it holds: set at construction (what the accumulator
    /// reserved), grown once by `settle` when it stops growing, set by `take_reservation` (a
    /// piece), handed back by `release_reservation`.
    pub(crate) reserved_bytes: i64,
    /// Charged for what it holds beyond its reservation (`settle`, `take_reservation`).
    pub(crate) settled: bool,
    /// In a request: set by `drained`, cleared by `reenqueued` and `request_ended`.
    pub(crate) in_flight: bool,
    /// The partition queue whose drain took it (`RecordQueues.drain`): the one its completion
    /// unmutes (`RecordQueues.complete`).
    pub(crate) queue_index: Option<usize>,
    /// A numbered batch whose retry is outstanding (`mark_in_retry`, `clear_in_retry`); the
    /// transaction manager's `should_stop_drain` reads it.
    in_retry: bool,
    /// Renumbered by an epoch bump after it was first sent (Java's `sequenceHasBeenReset`):
    /// set by `reset_producer_state`, never cleared.
    sequence_reset: bool,
    /// Idempotence: written by `set_producer_state` (its first drain, or a numbered batch's
    /// piece) and `reset_producer_state`, both called by the transaction manager only.
    producer_id: i64,
    producer_epoch: i64,
    pub(crate) base_sequence: i64,
    is_transactional: bool,
    /// The outcome, written once by `set_outcome` (`ProducerBatch.complete`), read by the
    /// record futures (below), the sender and the accumulator.
    pub(crate) done: bool,
    pub(crate) base_offset: i64,
    pub(crate) log_append_time: i64,
    pub(crate) error: Option<Py<PyAny>>,

    // -- the Python state: read and written by batch.py's methods only; each one's writers are
    // named in batch.py's `ProducerBatch` section.
    /// The event loop the batch completes on (its futures' `get_loop()`).
    #[pyo3(get, name = "loop")]
    pub(crate) event_loop: Py<PyAny>,
    /// Where a raising `on_delivery` is reported: the producer's logger, naming its client.id.
    #[pyo3(get)]
    pub(crate) log: Py<PyAny>,
    /// The futures of records without `on_delivery`, in send order (`try_append`; `split` moves them).
    #[pyo3(get, set)]
    pub(crate) futures: Py<PyList>,
    /// Records with `on_delivery`, in append order: written by `try_append` and by batch.py's
    /// `split` through the `callbacks` setter, taken by the completion (`complete.rs`), dropped
    /// by `release`. Native rows, not a flat list of five Python objects a record: the list
    /// made four ints a record at the door and read five items back at the completion (about
    /// 8 % of the event loop's samples at 1 KB records, 2026-12-04). Python reads and writes
    /// them as flat rows (the `callbacks` property), on its rare paths only.
    pub(crate) delivery_rows: Vec<DeliveryRow>,
    /// Done-callbacks of records not yet complete, flat (future, fn, context) triples.
    #[pyo3(get, set)]
    pub(crate) done_callbacks: Option<Py<PyList>>,
    /// Awaiters of pending records, None until the first.
    #[pyo3(get, set)]
    pub(crate) waiters: Option<Py<PyList>>,
    /// Each record's own error when the broker named the bad ones (KIP-467), before a failing completion.
    #[pyo3(get, set)]
    record_errors: Option<Py<PyAny>>,
    /// Why the last attempt failed while the batch waits to be retried: the cause its expiry names.
    #[pyo3(get, set)]
    retry_error: Option<Py<PyAny>>,
    /// Done-callbacks of records already complete, waiting for their one scheduled call.
    #[pyo3(get, set, name = "_deferred")]
    deferred: Option<Py<PyList>>,
    /// What its `on_delivery` callables weigh (`buffer.memory` counts it): grown by `try_append`
    /// (the last callable's charge cached in the two fields after it) and `split`.
    #[pyo3(get, set)]
    pub(crate) callback_bytes: i64,
    charged_callback: Option<Py<PyAny>>,
    charged_bytes: i64,
    /// A piece of a split batch: the batch it came from (cleared when the piece completes).
    #[pyo3(get, set)]
    pub(crate) parent: Option<Py<PyAny>>,
    /// A split batch: its pieces, each with the offset delta it starts at.
    #[pyo3(get, set)]
    pieces: Option<Py<PyList>>,
    /// The OpenTelemetry spans of its records (tracing on).
    #[pyo3(get, set)]
    pub(crate) spans: Option<Py<PyAny>>,
    /// `send_arrow()` runs, flat (delivery, first planned position, count, offset delta of the first).
    #[pyo3(get, set)]
    pub(crate) arrow_runs: Option<Py<PyList>>,
    /// How many of its records came from `send_arrow()`.
    #[pyo3(get, set)]
    pub(crate) arrow_records: i64,
}

impl ProducerBatch {
    /// See `set_outcome`: the one writer of the outcome (the native completion calls it too).
    pub(crate) fn write_outcome(&mut self, base_offset: i64, log_append_time: i64, error: Option<Py<PyAny>>) -> bool {
        if self.done {
            return false;
        }
        self.done = true;
        self.base_offset = base_offset;
        self.log_append_time = log_append_time;
        self.error = error;
        true
    }

    /// See `object_bytes`.
    pub(crate) fn held_object_bytes(&self, py: Python<'_>) -> i64 {
        let count = i64::from(self.builder.bind(py).borrow().count());
        let (record, row) = (RECORD_OBJECT_BYTES.load(Ordering::Relaxed), ARROW_ROW_BYTES.load(Ordering::Relaxed));
        (count - self.arrow_records) * record + self.arrow_records * row + self.callback_bytes
    }

    /// An empty batch (see `__new__`), for Python's constructor and the native queues' `open_batch`.
    #[allow(clippy::too_many_arguments)] // the batch's fields as its constructor takes them
    pub(crate) fn empty(
        py: Python<'_>,
        topic: Py<PyAny>,
        partition: i64,
        builder: Py<PyRecordBatchBuilder>,
        now_ms: f64,
        reserved_bytes: i64,
        event_loop: Py<PyAny>,
        log: Option<Py<PyAny>>,
        delivery_timeout_ms: f64,
    ) -> PyResult<Self> {
        let log = match log {
            Some(log) => log,
            None => DEFAULT_LOG.get_or_try_init(py, || py.import("logging")?.call_method1("getLogger", ("aioproducer",)).map(Bound::unbind))?.clone_ref(py),
        };
        Ok(ProducerBatch {
            topic,
            partition,
            builder,
            created_ms: now_ms,
            delivery_deadline_ms: now_ms + delivery_timeout_ms,
            last_attempt_ms: now_ms,
            attempts: 0,
            retry_backoff_ms: 0.0,
            reserved_bytes,
            settled: false,
            in_flight: false,
            queue_index: None,
            in_retry: false,
            sequence_reset: false,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: NO_SEQUENCE,
            is_transactional: false,
            done: false,
            base_offset: -1,
            log_append_time: -1,
            error: None,
            event_loop,
            log,
            futures: PyList::empty(py).unbind(),
            delivery_rows: Vec::new(),
            done_callbacks: None,
            waiters: None,
            record_errors: None,
            retry_error: None,
            deferred: None,
            callback_bytes: 0,
            charged_callback: None,
            charged_bytes: 0,
            parent: None,
            pieces: None,
            spans: None,
            arrow_runs: None,
            arrow_records: 0,
        })
    }

    /// Its producer state as its header carries it (an epoch or sequence out of range: -1).
    fn producer_state(&self) -> ProducerState {
        ProducerState {
            producer_id: self.producer_id,
            producer_epoch: i16::try_from(self.producer_epoch).unwrap_or(-1),
            base_sequence: i32::try_from(self.base_sequence).unwrap_or(-1),
            is_transactional: self.is_transactional,
            base_offset: 0,
        }
    }

    /// See `records`: its wire bytes, stamped with its producer id, epoch and base sequence.
    pub(crate) fn built<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let state = self.producer_state();
        PyRecordBatchBuilder::build_for(self.builder.bind(py), state.producer_id, state.producer_epoch, state.base_sequence, state.is_transactional)
    }

    /// Its records as a Produce request carries them: the two pieces of `build_in_place` when
    /// the batch can go in place, else the built bytes.
    pub(crate) fn for_request(&self, py: Python<'_>) -> PyResult<RequestRecords> {
        match PyRecordBatchBuilder::build_in_place(self.builder.bind(py), self.producer_state(), SPLICE_THRESHOLD)? {
            Some((header, section, len)) => Ok(RequestRecords::InPlace(header.unbind(), section.into_any().unbind(), len)),
            None => Ok(RequestRecords::Built(self.built(py)?.unbind())),
        }
    }

    /// See `settle`: the bytes to charge.
    pub(crate) fn settle_now(&mut self, py: Python<'_>) -> i64 {
        if self.settled {
            return 0;
        }
        self.settled = true;
        let encoded = self.builder.bind(py).borrow().uncompressed_len() as i64;
        let extra = encoded + self.held_object_bytes(py) - self.reserved_bytes;
        if extra <= 0 {
            return 0;
        }
        self.reserved_bytes += extra;
        extra
    }

    /// Its wire size: exact once built or uncompressed, else estimated.
    fn wire_size(&self, py: Python<'_>) -> usize {
        self.builder.bind(py).borrow().wire_size(py)
    }

    /// Starts the batch's charge cache at another batch's (`RecordQueues::open_batch`, before the first record).
    pub(crate) fn seed_charge(&mut self, callback: Py<PyAny>, bytes: i64) {
        self.charged_callback = Some(callback);
        self.charged_bytes = bytes;
    }

    /// The batch's charge cache, for the next batch to start from.
    pub(crate) fn charge_seed(&self, py: Python<'_>) -> Option<(Py<PyAny>, i64)> {
        self.charged_callback.as_ref().map(|c| (c.clone_ref(py), self.charged_bytes))
    }

    /// What holding `on_delivery` charges, computed by batch.py's `_callback_bytes` once for a run
    /// of the same callable (a producer's records usually share one).
    fn callback_charge(&mut self, on_delivery: &Bound<'_, PyAny>) -> PyResult<i64> {
        let py = on_delivery.py();
        if self.charged_callback.as_ref().is_some_and(|c| c.bind(py).is(on_delivery)) {
            return Ok(self.charged_bytes);
        }
        let size = CALLBACK_BYTES
            .get_or_try_init(py, || py.import("aioproducer.internals.batch")?.getattr("_callback_bytes").map(Bound::unbind))?
            .bind(py)
            .call1((on_delivery,))?
            .extract::<i64>()?;
        self.charged_callback = Some(on_delivery.clone().unbind());
        self.charged_bytes = size;
        Ok(size)
    }
}

/// Appends one record to `slf` and makes its future: None when the batch has no room (full,
/// closed, or its section is being read by the compression thread). Without `on_delivery` the
/// future is kept in `futures`; with it, `callbacks` gets its row and the future is not kept.
fn append_one(
    slf: &Bound<'_, ProducerBatch>,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header<'_>],
    on_delivery: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Py<FutureRecordMetadata>>> {
    let py = slf.py();
    let mut this = slf.borrow_mut();
    let relative_offset = this.builder.bind(py).try_borrow_mut()?.append_record(timestamp, key, value, headers);
    if relative_offset < 0 {
        return Ok(None);
    }
    let key_size = key.map_or(-1, |k| k.len() as i64);
    let value_size = value.map_or(-1, |v| v.len() as i64);
    let future = Py::new(py, FutureRecordMetadata::for_record(slf.clone().unbind(), relative_offset, timestamp, key_size, value_size))?;
    match on_delivery {
        None => this.futures.bind(py).append(&future)?,
        Some(callback) => {
            let charge = this.callback_charge(callback)?;
            this.callback_bytes += charge;
            if this.delivery_rows.capacity() == 0 {
                // Room for the batch's records at this one's size, at once: grown by doubling
                // (4, 8, 16 rows), the list's reallocations were 2.2 % of the loop's samples at
                // 1 KB records (py-spy, the peers' worker, 2026-12-04).
                let fit = this.builder.bind(py).try_borrow()?.records_that_fit(key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len));
                this.delivery_rows.reserve_exact(fit);
            }
            this.delivery_rows.push(DeliveryRow { on_delivery: callback.clone().unbind(), relative_offset, timestamp, key_size, value_size });
        }
    }
    Ok(Some(future))
}

/// `try_append` with headers as Python passed them (also `RecordQueues.try_append`'s).
pub(crate) fn try_append_record(
    slf: &Bound<'_, ProducerBatch>,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: Option<&[(PyBackedStr, Option<PyBackedBytes>)]>,
    on_delivery: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Py<FutureRecordMetadata>>> {
    match headers {
        None => append_one(slf, timestamp, key, value, &[], on_delivery),
        Some(hs) => {
            let slices: Vec<Header<'_>> = hs.iter().map(|(k, v)| (k.as_bytes(), v.as_deref())).collect();
            append_one(slf, timestamp, key, value, &slices, on_delivery)
        }
    }
}

/// One record's `on_delivery` and what its metadata needs besides the batch's outcome.
pub(crate) struct DeliveryRow {
    pub(crate) on_delivery: Py<PyAny>,
    pub(crate) relative_offset: i64,
    pub(crate) timestamp: i64,
    pub(crate) key_size: i64,
    pub(crate) value_size: i64,
}

/// The items of each row of `rows` in Python's flat form: on_delivery, offset delta, create
/// time, key size, value size.
const ROW_ITEMS: usize = 5;

/// `rows` read from Python's flat form (the `callbacks` setter); a `TypeError` naming it when
/// they are not rows of a callable and four ints.
fn delivery_rows_from(value: &Bound<'_, PyAny>) -> PyResult<Vec<DeliveryRow>> {
    let items: Vec<Bound<'_, PyAny>> = value.try_iter()?.collect::<PyResult<_>>()?;
    if !items.len().is_multiple_of(ROW_ITEMS) {
        return Err(PyTypeError::new_err(format!(
            "callbacks: flat rows of {ROW_ITEMS} items (on_delivery, offset delta, create time, key size, value size), got {} items",
            items.len()
        )));
    }
    items
        .chunks_exact(ROW_ITEMS)
        .map(|row| {
            if !row[0].is_callable() {
                return Err(PyTypeError::new_err(format!("callbacks: on_delivery must be callable, got {}", row[0].get_type().name()?)));
            }
            Ok(DeliveryRow {
                on_delivery: row[0].clone().unbind(),
                relative_offset: row[1].extract()?,
                timestamp: row[2].extract()?,
                key_size: row[3].extract()?,
                value_size: row[4].extract()?,
            })
        })
        .collect()
}

#[pymethods]
impl ProducerBatch {
    /// `ProducerBatch(topic, partition, builder, now_ms, reserved_bytes, loop, log=None, *, delivery_timeout_ms=inf)`:
    /// an empty batch holding `reserved_bytes` of `buffer.memory`, its records' deadline
    /// `delivery_timeout_ms` after `now_ms`; `log` None is the producer's default logger.
    #[new]
    #[pyo3(signature = (topic, partition, builder, now_ms, reserved_bytes, event_loop, log = None, *, delivery_timeout_ms = f64::INFINITY))]
    #[allow(clippy::too_many_arguments)] // the batch's constructor, as Python calls it
    fn new(
        py: Python<'_>,
        topic: Py<PyAny>,
        partition: i64,
        builder: Py<PyRecordBatchBuilder>,
        now_ms: f64,
        reserved_bytes: i64,
        event_loop: Py<PyAny>,
        log: Option<Py<PyAny>>,
        delivery_timeout_ms: f64,
    ) -> PyResult<Self> {
        guarded("ProducerBatch.__new__", || Self::empty(py, topic, partition, builder, now_ms, reserved_bytes, event_loop, log, delivery_timeout_ms))
    }

    // -- appending ---------------------------------------------------------------------
    /// Appends a record if the batch has room and makes its future; None tells the accumulator
    /// to open a new batch. `on_delivery` was checked by the accumulator (`check_on_delivery`).
    /// The per-record door's one native call: about 0.4 µs for a 100 B record, with its future.
    #[pyo3(signature = (timestamp, key, value, headers, on_delivery))]
    fn try_append(
        slf: &Bound<'_, Self>,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: Option<PyHeaders>,
        on_delivery: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<FutureRecordMetadata>>> {
        guarded("ProducerBatch.try_append", || try_append_record(slf, timestamp, key, value, headers.as_deref(), on_delivery))
    }

    /// `send_many()`'s bulk path: appends keyless `values[start..]` (one create time) while each
    /// is exactly `bytes` and fits, each as `try_append` would, its future appended to `out`;
    /// the index of the first value not appended. No Python call per record.
    fn try_append_many(
        slf: &Bound<'_, Self>,
        timestamp: i64,
        values: &Bound<'_, PyAny>,
        start: usize,
        on_delivery: Option<&Bound<'_, PyAny>>,
        out: &Bound<'_, PyList>,
    ) -> PyResult<usize> {
        guarded("ProducerBatch.try_append_many", || {
            let stop = values.len()?;
            let mut i = start;
            while i < stop {
                let item = values.get_item(i)?;
                let Ok(value) = item.cast_exact::<PyBytes>() else { break };
                let Some(future) = append_one(slf, timestamp, None, Some(value.as_bytes()), &[], on_delivery)? else { break };
                out.append(future)?;
                i += 1;
            }
            Ok(i)
        })
    }

    // -- what Python reads -------------------------------------------------------------
    #[getter]
    fn topic(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        guarded("ProducerBatch.topic", || Ok(self.topic.clone_ref(py)))
    }
    #[getter]
    fn partition(&self) -> PyResult<i64> {
        guarded("ProducerBatch.partition", || Ok(self.partition))
    }
    #[getter]
    fn builder(&self, py: Python<'_>) -> PyResult<Py<PyRecordBatchBuilder>> {
        guarded("ProducerBatch.builder", || Ok(self.builder.clone_ref(py)))
    }
    #[getter]
    fn created_ms(&self) -> PyResult<f64> {
        guarded("ProducerBatch.created_ms", || Ok(self.created_ms))
    }
    #[getter]
    fn delivery_deadline_ms(&self) -> PyResult<f64> {
        guarded("ProducerBatch.delivery_deadline_ms", || Ok(self.delivery_deadline_ms))
    }
    #[getter]
    fn last_attempt_ms(&self) -> PyResult<f64> {
        guarded("ProducerBatch.last_attempt_ms", || Ok(self.last_attempt_ms))
    }
    #[getter]
    fn attempts(&self) -> PyResult<i64> {
        guarded("ProducerBatch.attempts", || Ok(self.attempts))
    }
    #[getter]
    fn retry_backoff_ms(&self) -> PyResult<f64> {
        guarded("ProducerBatch.retry_backoff_ms", || Ok(self.retry_backoff_ms))
    }
    #[getter]
    fn reserved_bytes(&self) -> PyResult<i64> {
        guarded("ProducerBatch.reserved_bytes", || Ok(self.reserved_bytes))
    }
    #[getter]
    fn settled(&self) -> PyResult<bool> {
        guarded("ProducerBatch.settled", || Ok(self.settled))
    }
    #[getter]
    fn in_flight(&self) -> PyResult<bool> {
        guarded("ProducerBatch.in_flight", || Ok(self.in_flight))
    }
    #[getter]
    fn in_retry(&self) -> PyResult<bool> {
        guarded("ProducerBatch.in_retry", || Ok(self.in_retry))
    }
    #[getter]
    fn sequence_reset(&self) -> PyResult<bool> {
        guarded("ProducerBatch.sequence_reset", || Ok(self.sequence_reset))
    }
    #[getter]
    fn producer_id(&self) -> PyResult<i64> {
        guarded("ProducerBatch.producer_id", || Ok(self.producer_id))
    }
    #[getter]
    fn producer_epoch(&self) -> PyResult<i64> {
        guarded("ProducerBatch.producer_epoch", || Ok(self.producer_epoch))
    }
    #[getter]
    fn base_sequence(&self) -> PyResult<i64> {
        guarded("ProducerBatch.base_sequence", || Ok(self.base_sequence))
    }
    #[getter]
    fn is_transactional(&self) -> PyResult<bool> {
        guarded("ProducerBatch.is_transactional", || Ok(self.is_transactional))
    }
    #[getter]
    fn has_sequence(&self) -> PyResult<bool> {
        guarded("ProducerBatch.has_sequence", || Ok(self.base_sequence != NO_SEQUENCE))
    }
    #[getter]
    fn is_done(&self) -> PyResult<bool> {
        guarded("ProducerBatch.is_done", || Ok(self.done))
    }
    #[getter]
    fn base_offset(&self) -> PyResult<i64> {
        guarded("ProducerBatch.base_offset", || Ok(self.base_offset))
    }
    #[getter]
    fn log_append_time(&self) -> PyResult<i64> {
        guarded("ProducerBatch.log_append_time", || Ok(self.log_append_time))
    }
    #[getter]
    fn error(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        guarded("ProducerBatch.error", || Ok(self.error.as_ref().map(|e| e.clone_ref(py))))
    }
    #[getter]
    fn record_count(&self, py: Python<'_>) -> PyResult<i32> {
        guarded("ProducerBatch.record_count", || Ok(self.builder.bind(py).borrow().count()))
    }

    /// Its wire size: exact once built or when uncompressed, else estimated.
    fn estimated_size(&self, py: Python<'_>) -> PyResult<usize> {
        guarded("ProducerBatch.estimated_size", || Ok(self.wire_size(py)))
    }

    fn is_full(&self, py: Python<'_>, batch_size: i64) -> PyResult<bool> {
        guarded("ProducerBatch.is_full", || Ok(self.wire_size(py) as i64 >= batch_size))
    }

    /// Whether `delivery.timeout.ms` ran out for its records: the one expiry rule (Java's
    /// `hasReachedDeliveryTimeout`), read for queued batches, sent ones and retries alike.
    fn has_reached_delivery_timeout(&self, now_ms: f64) -> PyResult<bool> {
        guarded("ProducerBatch.has_reached_delivery_timeout", || Ok(now_ms >= self.delivery_deadline_ms))
    }

    /// The wire bytes with this batch's producer state (the builder compresses once and caches them).
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guarded("ProducerBatch.records", || self.built(py))
    }

    // -- on_delivery rows: Python's flat form ----------------------------------------------
    /// The records' `on_delivery` rows, flat (on_delivery, offset delta, create time, key size,
    /// value size, then the next record's), None when there are none: a copy, for batch.py's
    /// rare paths (a split, a failed batch's reports, the interceptors' outcomes).
    #[getter]
    fn callbacks<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        guarded("ProducerBatch.callbacks", || {
            if self.delivery_rows.is_empty() {
                return Ok(None);
            }
            let flat = PyList::empty(py);
            for row in &self.delivery_rows {
                flat.append(row.on_delivery.bind(py))?;
                flat.append(row.relative_offset)?;
                flat.append(row.timestamp)?;
                flat.append(row.key_size)?;
                flat.append(row.value_size)?;
            }
            Ok(Some(flat))
        })
    }

    /// Replaces the rows with flat ones (batch.py's `split` and `release`); None drops them.
    #[setter]
    fn set_callbacks(&mut self, value: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        guarded("ProducerBatch.callbacks", || {
            self.delivery_rows = match value {
                Some(rows) if !rows.is_none() => delivery_rows_from(&rows)?,
                _ => Vec::new(),
            };
            Ok(())
        })
    }

    // -- memory ------------------------------------------------------------------------
    /// Memory the batch holds besides its encoded records: an object per record, its callbacks.
    ///
    /// `buffer.memory` counts these too (charged once the batch stops growing, `settle`), so that
    /// it bounds what the producer holds, not only the wire bytes: for 100-byte records the
    /// Python objects weigh as much as the bytes themselves. A shared callback is counted once per
    /// record that holds it: the estimate errs towards earlier backpressure. The per-record costs
    /// are measured in Python (batch.py's `RECORD_OBJECT_BYTES`, `ARROW_ROW_BYTES`) and set once
    /// (`set_object_costs`).
    fn object_bytes(&self, py: Python<'_>) -> PyResult<i64> {
        guarded("ProducerBatch.object_bytes", || Ok(self.held_object_bytes(py)))
    }

    /// It stopped growing: counts what it holds beyond its reservation once (`object_bytes` plus
    /// its encoded bytes); the bytes the accumulator is to charge the pool, 0 when settled already
    /// or nothing is past the reservation.
    fn settle(&mut self, py: Python<'_>) -> PyResult<i64> {
        guarded("ProducerBatch.settle", || Ok(self.settle_now(py)))
    }

    /// A piece of a split batch holds `reserved_bytes` of its parent's reservation, already charged.
    fn take_reservation(&mut self, reserved_bytes: i64) -> PyResult<()> {
        guarded("ProducerBatch.take_reservation", || {
            self.reserved_bytes = reserved_bytes;
            self.settled = true;
            Ok(())
        })
    }

    /// The bytes of `buffer.memory` it held, held no more (completed, or shared out to its pieces).
    fn release_reservation(&mut self) -> PyResult<i64> {
        guarded("ProducerBatch.release_reservation", || Ok(std::mem::take(&mut self.reserved_bytes)))
    }

    // -- drain and retry ---------------------------------------------------------------
    /// Taken from its deque into a request (Java's `drained`).
    fn drained(&mut self) -> PyResult<()> {
        guarded("ProducerBatch.drained", || {
            self.in_flight = true;
            Ok(())
        })
    }

    /// Its attempt failed and it is queued again, to wait `retry_backoff_ms` from `now` (Java's
    /// `reenqueued`); `retry_backoff_ms` is the jittered backoff of the attempt this makes.
    fn reenqueued(&mut self, now: f64, retry_backoff_ms: f64) -> PyResult<()> {
        guarded("ProducerBatch.reenqueued", || {
            self.attempts += 1;
            self.last_attempt_ms = now;
            self.retry_backoff_ms = retry_backoff_ms;
            self.in_flight = false;
            Ok(())
        })
    }

    /// A piece of a split batch, queued at `now`: it carries on its parent's attempts and backoff.
    fn reenqueued_piece(&mut self, attempts: i64, now: f64, retry_backoff_ms: f64) -> PyResult<()> {
        guarded("ProducerBatch.reenqueued_piece", || {
            self.attempts = attempts;
            self.last_attempt_ms = now;
            self.retry_backoff_ms = retry_backoff_ms;
            Ok(())
        })
    }

    /// A piece of `parent` (a split): its records' deadline is the parent's, not the piece's own.
    fn keep_deadline_of(&mut self, parent: PyRef<'_, ProducerBatch>) -> PyResult<()> {
        guarded("ProducerBatch.keep_deadline_of", || {
            self.delivery_deadline_ms = parent.delivery_deadline_ms;
            Ok(())
        })
    }

    /// The request it was in ended after the batch completed (it expired while in flight).
    fn request_ended(&mut self) -> PyResult<()> {
        guarded("ProducerBatch.request_ended", || {
            self.in_flight = false;
            Ok(())
        })
    }

    /// A numbered batch to be sent again (a retry, a split's piece): its partition's new batches wait.
    fn mark_in_retry(&mut self) -> PyResult<()> {
        guarded("ProducerBatch.mark_in_retry", || {
            self.in_retry = true;
            Ok(())
        })
    }

    /// Drained again: its retry is no longer outstanding.
    fn clear_in_retry(&mut self) -> PyResult<()> {
        guarded("ProducerBatch.clear_in_retry", || {
            self.in_retry = false;
            Ok(())
        })
    }

    // -- idempotence -------------------------------------------------------------------
    /// Numbered (Java's `setProducerState`): at its first drain, or as a piece of a numbered split batch.
    #[pyo3(signature = (producer_id, producer_epoch, base_sequence, is_transactional = false))]
    fn set_producer_state(&mut self, producer_id: i64, producer_epoch: i64, base_sequence: i64, is_transactional: bool) -> PyResult<()> {
        guarded("ProducerBatch.set_producer_state", || {
            self.producer_id = producer_id;
            self.producer_epoch = producer_epoch;
            self.base_sequence = base_sequence;
            self.is_transactional = is_transactional;
            Ok(())
        })
    }

    /// Renumbered under a new epoch after it was first sent (Java's `resetProducerState`).
    fn reset_producer_state(&mut self, producer_id: i64, producer_epoch: i64, base_sequence: i64) -> PyResult<()> {
        guarded("ProducerBatch.reset_producer_state", || {
            self.producer_id = producer_id;
            self.producer_epoch = producer_epoch;
            self.base_sequence = base_sequence;
            self.sequence_reset = true;
            Ok(())
        })
    }

    // -- the outcome -------------------------------------------------------------------
    /// Writes the outcome once (the first half of `ProducerBatch.complete`): False if it was
    /// written already (a late response), and then nothing changes.
    fn set_outcome(&mut self, base_offset: i64, log_append_time: i64, error: Option<Py<PyAny>>) -> PyResult<bool> {
        guarded("ProducerBatch.set_outcome", || Ok(self.write_outcome(base_offset, log_append_time, error)))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.topic)?;
        visit.call(&self.builder)?;
        visit.call(&self.error)?;
        visit.call(&self.event_loop)?;
        visit.call(&self.log)?;
        visit.call(&self.futures)?;
        for row in &self.delivery_rows {
            visit.call(&row.on_delivery)?;
        }
        visit.call(&self.done_callbacks)?;
        visit.call(&self.waiters)?;
        visit.call(&self.record_errors)?;
        visit.call(&self.retry_error)?;
        visit.call(&self.deferred)?;
        visit.call(&self.charged_callback)?;
        visit.call(&self.parent)?;
        visit.call(&self.pieces)?;
        visit.call(&self.spans)?;
        visit.call(&self.arrow_runs)
    }

    /// Breaks a cycle through the batch (its futures, callbacks, pieces, spans all refer back to
    /// it): everything but its fixed fields (topic, builder, loop, log, futures: emptied).
    fn __clear__(&mut self, py: Python<'_>) -> PyResult<()> {
        guarded("ProducerBatch.__clear__", || {
            self.error = None;
            self.futures.bind(py).call_method0("clear")?;
            self.delivery_rows = Vec::new();
            self.done_callbacks = None;
            self.waiters = None;
            self.record_errors = None;
            self.retry_error = None;
            self.deferred = None;
            self.charged_callback = None;
            self.parent = None;
            self.pieces = None;
            self.spans = None;
            self.arrow_runs = None;
            Ok(())
        })
    }
}

// ------------------------------------------------------------------ the record future
//
// The per-record delivery future (`FutureRecordMetadata`).
//
// As in the Java client (one `ProduceRequestResult` per batch, a `FutureRecordMetadata` per
// record holding a relative offset), a record's future is small: its batch, its offset delta,
// its create time and sizes; the outcome is its batch's ([`ProducerBatch`]), shared by every
// future of the batch and written once when the batch completes. Completing a batch therefore costs nothing
// per future, and a future its caller dropped is already gone.
//
// asyncio accepts the future as one of its own: `asyncio.isfuture()` reads
// `_asyncio_future_blocking` on the class, and `gather`, `wait`, `wait_for`, `shield` then use
// the duck-typed Future API. The methods asyncio calls once per record (`done`, `result`,
// `exception`, `cancelled`, `get_loop`) are here; the ones users call now and then
// (`add_done_callback`, `cancel`, `__await__`, ...) are Python, in `aioproducer/internals/batch.py`,
// set on this type when that module is imported: they keep the batch's done-callback lists,
// which only batch.py writes.
//
// `ProducerBatch.try_append` (native/src/batch.rs) appends a record and makes its future in one
// call from Python: the append door's per-record native call.

pyo3::import_exception!(asyncio, CancelledError);
pyo3::import_exception!(asyncio, InvalidStateError);

/// `RecordMetadata` (a named tuple of aioproducer/record_types.py, at the bottom of the package:
/// this module imports nothing from `internals/`) and its type's allocator (`tp_alloc`), looked
/// up once.
struct MetadataType {
    cls: Py<PyType>,
    alloc: ffi::allocfunc,
}

static RECORD_METADATA: PyOnceLock<MetadataType> = PyOnceLock::new();

fn metadata_type(py: Python<'_>) -> PyResult<&MetadataType> {
    RECORD_METADATA.get_or_try_init(py, || {
        let cls = py.import("aioproducer.record_types")?.getattr("RecordMetadata")?.cast_into::<PyType>()?;
        let tuple = py.get_type::<PyTuple>();
        // What makes `record_metadata`'s allocation sound: an instance is laid out as a tuple's
        // own (a tuple subclass with `__slots__ = ()`: no `__dict__`, no weak references,
        // nothing past the items).
        let same = |name: &str| -> PyResult<bool> { cls.getattr(name)?.eq(tuple.getattr(name)?) };
        let zero = |name: &str| -> PyResult<bool> { cls.getattr(name)?.eq(0) };
        if !(cls.is_subclass(&tuple)? && same("__basicsize__")? && same("__itemsize__")? && zero("__dictoffset__")? && zero("__weakrefoffset__")?) {
            return Err(PyTypeError::new_err("aioproducer.record_types.RecordMetadata must be a tuple subclass with __slots__ = ()"));
        }
        // SAFETY: `cls` is a live type object (held here); every type has a `tp_alloc` slot
        // (inherited, `PyType_GenericAlloc`, for a class defined in Python).
        let slot = unsafe { ffi::PyType_GetSlot(cls.as_type_ptr(), ffi::Py_tp_alloc) };
        if slot.is_null() {
            return Err(PyTypeError::new_err("RecordMetadata has no tp_alloc"));
        }
        // SAFETY: the `Py_tp_alloc` slot holds an `allocfunc`, its documented type.
        let alloc = unsafe { std::mem::transmute::<*mut std::ffi::c_void, ffi::allocfunc>(slot) };
        Ok(MetadataType { cls: cls.unbind(), alloc })
    })
}

/// A `RecordMetadata` of `fields` (its seven, in order), made as tuple's own `tp_new` makes an
/// instance of a subclass: its type's `tp_alloc`, then the items set. Why not `tuple.__new__(cls,
/// fields)`, as before: the call goes through `tp_new_wrapper`'s checks and a second tuple, about
/// 330 ns a record against about 60 (timeit, 2026-12-03; see `benchmarks/README.md`), paid for
/// every `on_delivery` report and every `await`ed future's result.
pub(crate) fn record_metadata<'py>(py: Python<'py>, fields: [Bound<'py, PyAny>; 7]) -> PyResult<Bound<'py, PyAny>> {
    let t = metadata_type(py)?;
    let count = fields.len();
    // SAFETY: `alloc` is `RecordMetadata`'s own `tp_alloc`, called with its type (alive: held by
    // `t.cls`) and a size, as tuple's `tp_new` calls it; it returns a new reference to a tuple of
    // `count` empty slots, or null with the error set, which `from_owned_ptr_or_err` takes.
    let made = unsafe { Bound::from_owned_ptr_or_err(py, (t.alloc)(t.cls.bind(py).as_type_ptr(), count as ffi::Py_ssize_t))? };
    for (index, item) in fields.into_iter().enumerate() {
        // SAFETY: `made` is a tuple of `count` slots that only this function refers to (the
        // reference count of 1 `PyTuple_SetItem` asks for); the slot steals the item's new
        // reference, also when it fails.
        if unsafe { ffi::PyTuple_SetItem(made.as_ptr(), index as ffi::Py_ssize_t, item.into_ptr()) } != 0 {
            return Err(PyErr::fetch(py));
        }
    }
    // Its items are a str and ints, so it can be in no reference cycle: the collector need not
    // follow it. A caller that keeps one per record (`gather()`'s results) otherwise has the
    // collector walk every one of them at each full collection: at 100 B records with
    // `gather()` the collector was about a fifth of the loop's time (2026-12-04).
    // SAFETY: `made` is a live object of a GC type (tuple's), tracked by its `tp_alloc`;
    // untracking a tracked object is what `PyObject_GC_UnTrack` is for.
    unsafe { ffi::PyObject_GC_UnTrack(made.as_ptr().cast()) };
    Ok(made)
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
        let offset = outcome.base_offset + this.relative_offset;
        let int = |n: i64| n.into_pyobject(py).map(Bound::into_any);
        let topic = outcome.topic.bind(py).clone();
        record_metadata(py, [topic, int(outcome.partition)?, int(offset)?, int(timestamp)?, int(this.key_size)?, int(this.value_size)?, int(timestamp_type)?])
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
