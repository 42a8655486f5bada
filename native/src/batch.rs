//! The native half of a `ProducerBatch` (issue #42, slice 2): the fields the per-batch path reads
//! and writes on every batch, and the transitions that write them.
//!
//! `aioproducer/internals/batch.py`'s `ProducerBatch` subclasses this type and keeps only what
//! is Python by nature (its event loop, its logger, the lists of futures, callbacks, awaiters and
//! done-callbacks, spans, split pieces, Arrow runs). Here are its builder, its schedule (created,
//! delivery deadline, last attempt, attempts, backoff), its memory reservation, its idempotent
//! producer state, its flags, and its outcome, which every record future of the batch reads (a
//! record future points at this object: there is no outcome object per batch any more).
//!
//! Why: the drain, the Produce request and the completion (slices 3 and 4 of
//! `docs/design/native-batches.md`) loop over batches; with these fields native, those loops read
//! them without a Python attribute lookup, and a batch is one object for the collector where it
//! was three (the batch, its slotted fields' outcome, and the outcome's error).
//!
//! One writer: every field is written by the methods below, named after Java's `ProducerBatch`
//! where Java has one; Python can read each field and write none (`tests/unit/test_batch_ownership.py`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use pyo3::{PyTraverseError, PyVisit};

use crate::batch_builder::PyRecordBatchBuilder;
use crate::guarded;

/// No sequence assigned yet (Java's `RecordBatch.NO_SEQUENCE`).
pub const NO_SEQUENCE: i64 = -1;

/// The native fields of a producer batch; see the module's documentation.
#[pyclass(module = "aioproducer._native", subclass)]
pub struct NativeBatch {
    /// Fixed at construction: the topic (a `str`), the partition and the builder (which changes itself).
    pub(crate) topic: Py<PyAny>,
    pub(crate) partition: i64,
    pub(crate) builder: Py<PyRecordBatchBuilder>,
    /// When its first record was appended (a split's pieces keep their parent's).
    created_ms: f64,
    /// When its records' `delivery.timeout.ms` runs out: stamped once at construction, or
    /// taken from the parent by a split's piece (`keep_deadline_of`); read by every expiry
    /// through `has_reached_delivery_timeout` (Java's `hasReachedDeliveryTimeout`).
    delivery_deadline_ms: f64,
    /// The retry schedule: written by `reenqueued` and `reenqueued_piece`, read by the
    /// accumulator's `ready` and `drain`. The backoff is jittered once per attempt by the
    /// accumulator, so that `ready` and `drain` read the same value.
    last_attempt_ms: f64,
    attempts: i64,
    retry_backoff_ms: f64,
    /// The bytes of `buffer.memory` it holds: set at construction (what the accumulator
    /// reserved), grown once by `settle` when it stops growing, set by `take_reservation` (a
    /// piece), handed back by `release_reservation`.
    reserved_bytes: i64,
    /// Charged for what it holds beyond its reservation (`settle`, `take_reservation`).
    settled: bool,
    /// In a request: set by `drained`, cleared by `reenqueued` and `request_ended`.
    in_flight: bool,
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
    base_sequence: i64,
    is_transactional: bool,
    /// The outcome, written once by `set_outcome` (`ProducerBatch.complete`), read by the
    /// record futures (`native/src/future.rs`), the sender and the accumulator.
    pub(crate) done: bool,
    pub(crate) base_offset: i64,
    pub(crate) log_append_time: i64,
    pub(crate) error: Option<Py<PyAny>>,
}

impl NativeBatch {
    /// Its wire size: exact once built or uncompressed, else estimated.
    fn wire_size(&self, py: Python<'_>) -> usize {
        self.builder.bind(py).borrow().wire_size(py)
    }
}

#[pymethods]
impl NativeBatch {
    /// `ProducerBatch(topic, partition, builder, now_ms, reserved_bytes, loop, log, *, delivery_timeout_ms)`:
    /// the arguments after `reserved_bytes` but the deadline are the Python half's.
    #[new]
    #[pyo3(signature = (topic, partition, builder, now_ms, reserved_bytes, *_python_half, delivery_timeout_ms = f64::INFINITY))]
    fn new(
        topic: Py<PyAny>,
        partition: i64,
        builder: Py<PyRecordBatchBuilder>,
        now_ms: f64,
        reserved_bytes: i64,
        _python_half: &Bound<'_, pyo3::types::PyTuple>,
        delivery_timeout_ms: f64,
    ) -> PyResult<Self> {
        guarded("NativeBatch.__new__", || {
            Ok(NativeBatch {
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
            })
        })
    }

    // -- what Python reads -------------------------------------------------------------
    #[getter]
    fn topic(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        guarded("NativeBatch.topic", || Ok(self.topic.clone_ref(py)))
    }
    #[getter]
    fn partition(&self) -> PyResult<i64> {
        guarded("NativeBatch.partition", || Ok(self.partition))
    }
    #[getter]
    fn builder(&self, py: Python<'_>) -> PyResult<Py<PyRecordBatchBuilder>> {
        guarded("NativeBatch.builder", || Ok(self.builder.clone_ref(py)))
    }
    #[getter]
    fn created_ms(&self) -> PyResult<f64> {
        guarded("NativeBatch.created_ms", || Ok(self.created_ms))
    }
    #[getter]
    fn delivery_deadline_ms(&self) -> PyResult<f64> {
        guarded("NativeBatch.delivery_deadline_ms", || Ok(self.delivery_deadline_ms))
    }
    #[getter]
    fn last_attempt_ms(&self) -> PyResult<f64> {
        guarded("NativeBatch.last_attempt_ms", || Ok(self.last_attempt_ms))
    }
    #[getter]
    fn attempts(&self) -> PyResult<i64> {
        guarded("NativeBatch.attempts", || Ok(self.attempts))
    }
    #[getter]
    fn retry_backoff_ms(&self) -> PyResult<f64> {
        guarded("NativeBatch.retry_backoff_ms", || Ok(self.retry_backoff_ms))
    }
    #[getter]
    fn reserved_bytes(&self) -> PyResult<i64> {
        guarded("NativeBatch.reserved_bytes", || Ok(self.reserved_bytes))
    }
    #[getter]
    fn settled(&self) -> PyResult<bool> {
        guarded("NativeBatch.settled", || Ok(self.settled))
    }
    #[getter]
    fn in_flight(&self) -> PyResult<bool> {
        guarded("NativeBatch.in_flight", || Ok(self.in_flight))
    }
    #[getter]
    fn in_retry(&self) -> PyResult<bool> {
        guarded("NativeBatch.in_retry", || Ok(self.in_retry))
    }
    #[getter]
    fn sequence_reset(&self) -> PyResult<bool> {
        guarded("NativeBatch.sequence_reset", || Ok(self.sequence_reset))
    }
    #[getter]
    fn producer_id(&self) -> PyResult<i64> {
        guarded("NativeBatch.producer_id", || Ok(self.producer_id))
    }
    #[getter]
    fn producer_epoch(&self) -> PyResult<i64> {
        guarded("NativeBatch.producer_epoch", || Ok(self.producer_epoch))
    }
    #[getter]
    fn base_sequence(&self) -> PyResult<i64> {
        guarded("NativeBatch.base_sequence", || Ok(self.base_sequence))
    }
    #[getter]
    fn is_transactional(&self) -> PyResult<bool> {
        guarded("NativeBatch.is_transactional", || Ok(self.is_transactional))
    }
    #[getter]
    fn has_sequence(&self) -> PyResult<bool> {
        guarded("NativeBatch.has_sequence", || Ok(self.base_sequence != NO_SEQUENCE))
    }
    #[getter]
    fn is_done(&self) -> PyResult<bool> {
        guarded("NativeBatch.is_done", || Ok(self.done))
    }
    #[getter]
    fn base_offset(&self) -> PyResult<i64> {
        guarded("NativeBatch.base_offset", || Ok(self.base_offset))
    }
    #[getter]
    fn log_append_time(&self) -> PyResult<i64> {
        guarded("NativeBatch.log_append_time", || Ok(self.log_append_time))
    }
    #[getter]
    fn error(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        guarded("NativeBatch.error", || Ok(self.error.as_ref().map(|e| e.clone_ref(py))))
    }
    #[getter]
    fn record_count(&self, py: Python<'_>) -> PyResult<i32> {
        guarded("NativeBatch.record_count", || Ok(self.builder.bind(py).borrow().count()))
    }

    /// Its wire size: exact once built or when uncompressed, else estimated.
    fn estimated_size(&self, py: Python<'_>) -> PyResult<usize> {
        guarded("NativeBatch.estimated_size", || Ok(self.wire_size(py)))
    }

    fn is_full(&self, py: Python<'_>, batch_size: i64) -> PyResult<bool> {
        guarded("NativeBatch.is_full", || Ok(self.wire_size(py) as i64 >= batch_size))
    }

    /// Whether `delivery.timeout.ms` ran out for its records: the one expiry rule (Java's
    /// `hasReachedDeliveryTimeout`), read for queued batches, sent ones and retries alike.
    fn has_reached_delivery_timeout(&self, now_ms: f64) -> PyResult<bool> {
        guarded("NativeBatch.has_reached_delivery_timeout", || Ok(now_ms >= self.delivery_deadline_ms))
    }

    /// The wire bytes with this batch's producer state (the builder compresses once and caches them).
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guarded("NativeBatch.records", || {
            let epoch = i16::try_from(self.producer_epoch).unwrap_or(-1);
            let sequence = i32::try_from(self.base_sequence).unwrap_or(-1);
            PyRecordBatchBuilder::build_for(self.builder.bind(py), self.producer_id, epoch, sequence, self.is_transactional)
        })
    }

    // -- memory ------------------------------------------------------------------------
    /// It stopped growing: counts what it holds beyond its reservation once (`object_bytes`,
    /// the Python objects of its records, from the Python half, plus its encoded bytes); the
    /// bytes the accumulator is to charge, 0 when settled already or nothing is past the reservation.
    fn settle_with(&mut self, py: Python<'_>, object_bytes: i64) -> PyResult<i64> {
        guarded("NativeBatch.settle_with", || {
            if self.settled {
                return Ok(0);
            }
            self.settled = true;
            let encoded = self.builder.bind(py).borrow().uncompressed_len() as i64;
            let extra = encoded + object_bytes - self.reserved_bytes;
            if extra <= 0 {
                return Ok(0);
            }
            self.reserved_bytes += extra;
            Ok(extra)
        })
    }

    /// A piece of a split batch holds `reserved_bytes` of its parent's reservation, already charged.
    fn take_reservation(&mut self, reserved_bytes: i64) -> PyResult<()> {
        guarded("NativeBatch.take_reservation", || {
            self.reserved_bytes = reserved_bytes;
            self.settled = true;
            Ok(())
        })
    }

    /// The bytes of `buffer.memory` it held, held no more (completed, or shared out to its pieces).
    fn release_reservation(&mut self) -> PyResult<i64> {
        guarded("NativeBatch.release_reservation", || Ok(std::mem::take(&mut self.reserved_bytes)))
    }

    // -- drain and retry ---------------------------------------------------------------
    /// Taken from its deque into a request (Java's `drained`).
    fn drained(&mut self) -> PyResult<()> {
        guarded("NativeBatch.drained", || {
            self.in_flight = true;
            Ok(())
        })
    }

    /// Its attempt failed and it is queued again, to wait `retry_backoff_ms` from `now` (Java's
    /// `reenqueued`); `retry_backoff_ms` is the jittered backoff of the attempt this makes.
    fn reenqueued(&mut self, now: f64, retry_backoff_ms: f64) -> PyResult<()> {
        guarded("NativeBatch.reenqueued", || {
            self.attempts += 1;
            self.last_attempt_ms = now;
            self.retry_backoff_ms = retry_backoff_ms;
            self.in_flight = false;
            Ok(())
        })
    }

    /// A piece of a split batch, queued at `now`: it carries on its parent's attempts and backoff.
    fn reenqueued_piece(&mut self, attempts: i64, now: f64, retry_backoff_ms: f64) -> PyResult<()> {
        guarded("NativeBatch.reenqueued_piece", || {
            self.attempts = attempts;
            self.last_attempt_ms = now;
            self.retry_backoff_ms = retry_backoff_ms;
            Ok(())
        })
    }

    /// A piece of `parent` (a split): its records' deadline is the parent's, not the piece's own.
    fn keep_deadline_of(&mut self, parent: PyRef<'_, NativeBatch>) -> PyResult<()> {
        guarded("NativeBatch.keep_deadline_of", || {
            self.delivery_deadline_ms = parent.delivery_deadline_ms;
            Ok(())
        })
    }

    /// The request it was in ended after the batch completed (it expired while in flight).
    fn request_ended(&mut self) -> PyResult<()> {
        guarded("NativeBatch.request_ended", || {
            self.in_flight = false;
            Ok(())
        })
    }

    /// A numbered batch to be sent again (a retry, a split's piece): its partition's new batches wait.
    fn mark_in_retry(&mut self) -> PyResult<()> {
        guarded("NativeBatch.mark_in_retry", || {
            self.in_retry = true;
            Ok(())
        })
    }

    /// Drained again: its retry is no longer outstanding.
    fn clear_in_retry(&mut self) -> PyResult<()> {
        guarded("NativeBatch.clear_in_retry", || {
            self.in_retry = false;
            Ok(())
        })
    }

    // -- idempotence -------------------------------------------------------------------
    /// Numbered (Java's `setProducerState`): at its first drain, or as a piece of a numbered split batch.
    #[pyo3(signature = (producer_id, producer_epoch, base_sequence, is_transactional = false))]
    fn set_producer_state(&mut self, producer_id: i64, producer_epoch: i64, base_sequence: i64, is_transactional: bool) -> PyResult<()> {
        guarded("NativeBatch.set_producer_state", || {
            self.producer_id = producer_id;
            self.producer_epoch = producer_epoch;
            self.base_sequence = base_sequence;
            self.is_transactional = is_transactional;
            Ok(())
        })
    }

    /// Renumbered under a new epoch after it was first sent (Java's `resetProducerState`).
    fn reset_producer_state(&mut self, producer_id: i64, producer_epoch: i64, base_sequence: i64) -> PyResult<()> {
        guarded("NativeBatch.reset_producer_state", || {
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
        guarded("NativeBatch.set_outcome", || {
            if self.done {
                return Ok(false);
            }
            self.done = true;
            self.base_offset = base_offset;
            self.log_append_time = log_append_time;
            self.error = error;
            Ok(true)
        })
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.topic)?;
        visit.call(&self.builder)?;
        visit.call(&self.error)
    }

    fn __clear__(&mut self) -> PyResult<()> {
        guarded("NativeBatch.__clear__", || {
            self.error = None;
            Ok(())
        })
    }
}

/// What `ProducerMetrics.record_request` takes of a request's batches (Java's
/// `updateProduceRequestMetrics`), in one pass: records, the batches' size sum and maximum,
/// their records' mean size summed and its maximum (over the batches with records), how many
/// had records, compression ratios summed, queue time summed, the oldest creation time, and per
/// topic `[bytes, ratios summed, batches]`.
pub type RequestStats = (i64, i64, i64, f64, f64, i64, f64, f64, f64, Py<PyDict>);

/// The statistics of a Produce request's `batches` at `now_ms` (see [`RequestStats`]): the
/// per-batch loop of `record_request`, about 1 µs of Python per batch, here about 0.05.
#[pyfunction]
pub fn request_stats(py: Python<'_>, batches: &Bound<'_, PyAny>, now_ms: f64) -> PyResult<RequestStats> {
    guarded("request_stats", || {
        let (mut records, mut size_sum, mut size_max, mut with_records) = (0i64, 0i64, 0i64, 0i64);
        let (mut per_record_sum, mut per_record_max, mut ratio_sum, mut queued_sum, mut oldest) = (0.0, 0.0, 0.0, 0.0, now_ms);
        let by_topic = PyDict::new(py);
        for item in batches.try_iter()? {
            let item = item?;
            let batch = item.cast::<NativeBatch>()?.borrow();
            let builder = batch.builder.bind(py).borrow();
            let count = i64::from(builder.count());
            let size = builder.wire_size(py) as i64;
            let ratio = builder.compression_ratio_of(py);
            records += count;
            size_sum += size;
            size_max = size_max.max(size);
            if count > 0 {
                let per_record = size as f64 / count as f64;
                per_record_sum += per_record;
                with_records += 1;
                if per_record > per_record_max {
                    per_record_max = per_record;
                }
            }
            ratio_sum += ratio;
            queued_sum += now_ms - batch.created_ms;
            if batch.created_ms < oldest {
                oldest = batch.created_ms;
            }
            let topic = batch.topic.bind(py);
            match by_topic.get_item(topic)? {
                None => by_topic.set_item(topic, PyList::new(py, [size as f64, ratio, 1.0])?)?,
                Some(totals) => {
                    let totals = totals.cast_into::<PyList>()?;
                    totals.set_item(0, totals.get_item(0)?.extract::<f64>()? + size as f64)?;
                    totals.set_item(1, totals.get_item(1)?.extract::<f64>()? + ratio)?;
                    totals.set_item(2, totals.get_item(2)?.extract::<f64>()? + 1.0)?;
                }
            }
        }
        Ok((records, size_sum, size_max, per_record_sum, per_record_max, with_records, ratio_sum, queued_sum, oldest, by_topic.unbind()))
    })
}
