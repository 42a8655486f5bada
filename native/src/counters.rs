//! `RequestCounters`: what the request path adds to the producer's metrics, written where it
//! happens and held until `ProducerMetrics` folds it into its windowed statistics.
//!
//! Why native: a Produce request and its answer each updated a dozen Python counters
//! (`record_request`, `record_acknowledged`: the request's records and batches, each batch's
//! size, record size, compression ratio and queue time, per topic its bytes and records, the
//! delivery-latency rows). With 10 KB records a request carries about two records and the
//! producer sends one every 50-100 µs, so that Python ran per two records. Here the request's
//! build (`produce_topic_data`) and the response's completion (`RecordQueues.complete`) add to
//! this object in the loops they already run over the batches, and Python reads it once per
//! fold (at most once per `fold_ms`, and at every `snapshot()`).
//!
//! The fold rule is `ProducerMetrics`' own: what is added within `fold_ms` of the first value
//! of a generation is recorded together, at that first value's time. An add that comes later
//! closes the generation (it waits in `ready`) and opens the next, and tells its caller that a
//! fold is due; Python then calls `take()`, which hands back every closed generation and the
//! open one, oldest first, and starts again empty. So the windowed statistics see exactly the
//! values and times they saw when Python kept these sums itself.
//!
//! One writer: every field is written by this type's methods only; the callers are the request
//! build and the completion (native), and `ProducerMetrics` for the fake producer's requests and
//! for batches completed one at a time (through `add_request`, `add_acknowledged`, `add_errors`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::batch::ProducerBatch;
use crate::guarded;

/// One topic's share of a generation.
#[derive(Clone, Copy, Default)]
struct TopicCounts {
    bytes: f64,
    ratios: f64,
    batches: i64,
    send: i64,
    errors: i64,
}

impl TopicCounts {
    fn is_empty(&self) -> bool {
        self.batches == 0 && self.send == 0 && self.errors == 0
    }
}

/// The values added from `since_ms` on, until the generation is closed.
struct Generation {
    /// The first value's time; NaN while the generation is empty.
    since_ms: f64,
    requests: i64,
    request_records: i64,
    /// Batches sent: the count of the batch-size, compression-ratio and queue-time averages.
    batches: i64,
    size_sum: f64,
    size_max: f64,
    /// Batches sent with records: the count of the record-size average.
    with_records: i64,
    per_record_sum: f64,
    per_record_max: f64,
    ratio_sum: f64,
    queued_sum: f64,
    queued_max: f64,
    send: i64,
    errors: i64,
    /// Flat `[records, first_ms, last_ms, ...]`, one row per acknowledged batch with records.
    latencies: Vec<f64>,
    /// By the topic's slot in `RequestCounters::topics`.
    topics: Vec<TopicCounts>,
}

impl Generation {
    fn new(since_ms: f64) -> Self {
        Generation {
            since_ms,
            requests: 0,
            request_records: 0,
            batches: 0,
            size_sum: 0.0,
            size_max: f64::NEG_INFINITY,
            with_records: 0,
            per_record_sum: 0.0,
            per_record_max: f64::NEG_INFINITY,
            ratio_sum: 0.0,
            queued_sum: 0.0,
            queued_max: f64::NEG_INFINITY,
            send: 0,
            errors: 0,
            latencies: Vec::new(),
            topics: Vec::new(),
        }
    }

    fn topic(&mut self, slot: usize) -> &mut TopicCounts {
        if self.topics.len() <= slot {
            self.topics.resize(slot + 1, TopicCounts::default());
        }
        &mut self.topics[slot]
    }

    /// `(since_ms, requests, request_records, batches, size_sum, size_max, with_records,
    /// per_record_sum, per_record_max, ratio_sum, queued_sum, queued_max, send, errors,
    /// latencies (packed doubles), [(topic, bytes, ratios, batches, send, errors), ...])`: what
    /// `ProducerMetrics._fold_generation` unpacks.
    fn into_py<'py>(self, py: Python<'py>, names: &[Py<PyAny>]) -> PyResult<Bound<'py, PyTuple>> {
        let topics = PyList::empty(py);
        for (slot, counts) in self.topics.iter().enumerate() {
            if !counts.is_empty() {
                topics.append((names[slot].bind(py), counts.bytes, counts.ratios, counts.batches, counts.send, counts.errors))?;
            }
        }
        let head = (
            self.since_ms,
            self.requests,
            self.request_records,
            self.batches,
            self.size_sum,
            self.size_max,
            self.with_records,
            self.per_record_sum,
            self.per_record_max,
            self.ratio_sum,
            self.queued_sum,
            self.queued_max,
        );
        let items: Vec<Bound<'py, PyAny>> = vec![
            head.into_pyobject(py)?.into_any(),
            self.send.into_pyobject(py)?.into_any(),
            self.errors.into_pyobject(py)?.into_any(),
            // Packed doubles, not a list of floats: three a batch, read by `record_latencies`.
            PyBytes::new_with(py, self.latencies.len() * 8, |out| {
                for (to, value) in out.chunks_exact_mut(8).zip(&self.latencies) {
                    to.copy_from_slice(&value.to_ne_bytes());
                }
                Ok(())
            })?
            .into_any(),
            topics.into_any(),
        ];
        PyTuple::new(py, items)
    }
}

/// A request being added (`begin_request` .. `end_request`): its records and oldest batch.
pub(crate) struct RequestInProgress {
    records: i64,
    oldest_ms: f64,
    now_ms: f64,
}

/// The request path's counters not yet folded into the windowed statistics (see the module).
#[pyclass(module = "aioproducer._native")]
pub struct RequestCounters {
    fold_ms: f64,
    /// The topics seen, by slot (names as the batches carry them).
    names: Vec<Py<PyAny>>,
    open: Generation,
    /// Closed generations waiting for `take()`, oldest first.
    ready: Vec<Generation>,
}

impl RequestCounters {
    /// Opens the generation that values at `now_ms` go into; true when a closed one waits.
    pub(crate) fn at(&mut self, now_ms: f64) -> bool {
        let open = &mut self.open;
        if open.since_ms.is_nan() {
            open.since_ms = now_ms;
        } else if now_ms - open.since_ms >= self.fold_ms {
            let closed = std::mem::replace(open, Generation::new(now_ms));
            self.ready.push(closed);
        }
        !self.ready.is_empty()
    }

    /// The slot of `topic` (by identity, then by value: a topic name usually is one object).
    fn slot(&mut self, topic: &Bound<'_, PyAny>) -> PyResult<usize> {
        if let Some(at) = self.names.iter().position(|name| name.is(topic)) {
            return Ok(at);
        }
        for (at, name) in self.names.iter().enumerate() {
            if name.bind(topic.py()).eq(topic)? {
                return Ok(at);
            }
        }
        self.names.push(topic.clone().unbind());
        Ok(self.names.len() - 1)
    }

    pub(crate) fn begin_request(&mut self, now_ms: f64) -> (bool, RequestInProgress) {
        (self.at(now_ms), RequestInProgress { records: 0, oldest_ms: now_ms, now_ms })
    }

    /// One batch of the request (built or not: its builder knows its size on the wire either way).
    pub(crate) fn add_sent_batch(&mut self, py: Python<'_>, request: &mut RequestInProgress, batch: &ProducerBatch) -> PyResult<()> {
        let (count, size, ratio) = {
            let builder = batch.builder.bind(py).borrow();
            (i64::from(builder.count()), builder.wire_size(py) as f64, builder.compression_ratio_of(py))
        };
        let slot = self.slot(batch.topic.bind(py))?;
        let open = &mut self.open;
        request.records += count;
        open.batches += 1;
        open.size_sum += size;
        open.size_max = open.size_max.max(size);
        if count > 0 {
            let per_record = size / count as f64;
            open.with_records += 1;
            open.per_record_sum += per_record;
            open.per_record_max = open.per_record_max.max(per_record);
        }
        open.ratio_sum += ratio;
        open.queued_sum += request.now_ms - batch.created_ms;
        request.oldest_ms = request.oldest_ms.min(batch.created_ms);
        let topic = open.topic(slot);
        topic.bytes += size;
        topic.ratios += ratio;
        topic.batches += 1;
        Ok(())
    }

    pub(crate) fn end_request(&mut self, request: RequestInProgress) {
        let open = &mut self.open;
        open.requests += 1;
        open.request_records += request.records;
        open.queued_max = open.queued_max.max(request.now_ms - request.oldest_ms);
    }

    /// A batch of `count` records acknowledged at `now_ms` (after `at(now_ms)`): created at
    /// `created_ms`, its record timestamps `spread_ms` apart (see `DeliveryLatency`).
    pub(crate) fn add_acknowledged_batch(&mut self, topic: &Bound<'_, PyAny>, count: i64, now_ms: f64, created_ms: f64, spread_ms: f64) -> PyResult<()> {
        let slot = self.slot(topic)?;
        let open = &mut self.open;
        open.send += count;
        open.topic(slot).send += count;
        let first = now_ms - created_ms;
        if first >= 0.0 && count > 0 {
            // NaN (no creation time) compares false: no latency row
            open.latencies.extend([count as f64, first, first - spread_ms.max(0.0).min(first)]);
        }
        Ok(())
    }
}

#[pymethods]
impl RequestCounters {
    /// `RequestCounters(fold_ms)`: values within `fold_ms` of a generation's first go together.
    #[new]
    fn py_new(fold_ms: f64) -> PyResult<Self> {
        guarded("RequestCounters.__new__", || Ok(RequestCounters { fold_ms, names: Vec::new(), open: Generation::new(f64::NAN), ready: Vec::new() }))
    }

    /// A Produce request of `batches` sent at `now_ms`, for whoever builds requests without
    /// `produce_topic_data` (the fake producer, the tests). Returns whether a fold is due.
    fn add_request(&mut self, py: Python<'_>, batches: &Bound<'_, PyAny>, now_ms: f64) -> PyResult<bool> {
        guarded("RequestCounters.add_request", || {
            let (due, mut request) = self.begin_request(now_ms);
            for item in batches.try_iter()? {
                let item = item?;
                self.add_sent_batch(py, &mut request, &item.cast::<ProducerBatch>()?.borrow())?;
            }
            self.end_request(request);
            Ok(due)
        })
    }

    /// `records` of `topic` acknowledged at `now_ms` in a batch created at `created_ms` whose
    /// timestamps are `spread_ms` apart (a batch completed on its own). Returns whether a fold is due.
    fn add_acknowledged(&mut self, topic: &Bound<'_, PyAny>, records: i64, now_ms: f64, created_ms: f64, spread_ms: f64) -> PyResult<bool> {
        guarded("RequestCounters.add_acknowledged", || {
            let due = self.at(now_ms);
            self.add_acknowledged_batch(topic, records, now_ms, created_ms, spread_ms)?;
            Ok(due)
        })
    }

    /// `records` of `topic` failed at `now_ms`. Returns whether a fold is due.
    fn add_errors(&mut self, topic: &Bound<'_, PyAny>, records: i64, now_ms: f64) -> PyResult<bool> {
        guarded("RequestCounters.add_errors", || {
            let due = self.at(now_ms);
            let slot = self.slot(topic)?;
            self.open.errors += records;
            self.open.topic(slot).errors += records;
            Ok(due)
        })
    }

    /// Every generation, closed ones first, then the open one if it holds anything; all emptied.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        guarded("RequestCounters.take", || {
            let out = PyList::empty(py);
            let mut generations = std::mem::take(&mut self.ready);
            if !self.open.since_ms.is_nan() {
                generations.push(std::mem::replace(&mut self.open, Generation::new(f64::NAN)));
            }
            for generation in generations {
                out.append(generation.into_py(py, &self.names)?)?;
            }
            Ok(out)
        })
    }

    /// Whether anything waits for `take()`.
    #[getter]
    fn pending(&self) -> PyResult<bool> {
        guarded("RequestCounters.pending", || Ok(!self.ready.is_empty() || !self.open.since_ms.is_nan()))
    }
}
