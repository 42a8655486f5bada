//! The Produce response's completion (issue #42, slice 4): one native call per response
//! (`RecordQueues.complete`), which matches each partition's answer to its batch, completes every
//! batch the broker wrote (its outcome, which its record futures read; its `on_delivery` rows; its
//! done-callbacks and awaiters; its partition unmuted; its memory and bytes released) and hands
//! back to Python only what needs a decision (an error of any kind, a partition not answered),
//! with what the producer's counters and metrics need of the rest, summed per request.
//!
//! It takes the response as the connection read it: a `ProduceAnswer` (`produce/answer.rs`), the
//! payload decoded once natively, of which it reads each partition's topic, index, error code,
//! base offset and append time without a Python object; a `PartitionResponse` named tuple is made
//! only for a decision (and for every partition with `per_batch`). A test's or a fake
//! connection's `ProduceResponse` of named tuples is read through its `partitions`, field by field,
//! with the same matching. The connection keeps the framing, the correlation and the throttle
//! time (it reads `throttle_time_ms` from the answer). Measured with `benchmarks/request_cost.py`
//! (2 batches of 10 KB a request, the answer read from its bytes inside the timing, three rounds
//! in turn with the tree before, 2026-12-03): 10.09, 9.16, 7.87 µs a batch before (the named
//! tuples), 8.67, 8.02, 7.05 after.
//!
//! Python keeps what is rare or decides something: tracing's spans (`_end_spans`), `send_arrow()`
//! runs (`_report_arrow`), a split batch's parent (`_piece_complete`), an `on_delivery` whose
//! metadata is not the plain case (log-append time, no offset: `_report_delivery`), a raising
//! callback (`_delivery_raised`), and the idempotent producer's bookkeeping of what was
//! acknowledged (`TransactionManager.on_acknowledged_all`, one call per response, before any
//! batch completes, as the sender did per batch).

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PySet, PyString, PyTuple};

use crate::batch::{record_metadata, DeliveryRow, ProducerBatch};
use crate::counters::RequestCounters;
use crate::produce::answer::ProduceAnswer;

/// batch.py's `_invoke_all` (runs a batch's done-callbacks in one loop callback), looked up once.
static INVOKE_ALL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// What a response's completion hands back: `(decisions, freed bytes, records acknowledged,
/// fold_due)`. `decisions` are `(batch, PartitionResponse)` for the partitions answered with an
/// error and `(batch, None)` for those not answered, in the response's order, those not answered
/// last. The acknowledged records, per topic, and their delivery latencies went into the
/// metrics' `RequestCounters` when given; `fold_due` says that the metrics should fold them now.
pub type Completed<'py> = (Bound<'py, PyList>, i64, i64, bool);

/// Where an answer's topic name is: a `str` of the caller's answers, or text in a
/// `ProduceAnswer`'s payload.
enum Topic<'a, 'py> {
    Object(Bound<'py, PyAny>),
    Text(&'a str),
}

/// One partition's answer, the fields the completion reads. `part`: the `PartitionResponse` a
/// decision hands back, or the answer's index in a `ProduceAnswer` (made into one only then).
struct Answer<'a, 'py> {
    part: Part<'py>,
    topic: Topic<'a, 'py>,
    partition: i64,
    code: i64,
    base_offset: i64,
    log_append_time: i64,
}

enum Part<'py> {
    Object(Bound<'py, PyAny>),
    Index(usize),
}

fn answer<'a, 'py>(part: Bound<'py, PyAny>) -> PyResult<Answer<'a, 'py>> {
    let tuple = part.cast::<PyTuple>()?;
    Ok(Answer {
        topic: Topic::Object(tuple.get_item(0)?),
        partition: tuple.get_item(1)?.extract()?,
        code: tuple.get_item(2)?.extract()?,
        base_offset: tuple.get_item(3)?.extract()?,
        log_append_time: tuple.get_item(4)?.extract()?,
        part: Part::Object(part),
    })
}

/// The answers of a `ProduceAnswer`, read without Python objects (`payload`: its bytes).
fn native_answers<'a, 'py>(native: &ProduceAnswer, payload: &'a [u8]) -> Vec<Answer<'a, 'py>> {
    native
        .parts()
        .iter()
        .enumerate()
        .map(|(index, p)| Answer {
            topic: Topic::Text(ProduceAnswer::topic(payload, p)),
            partition: i64::from(p.partition),
            code: i64::from(p.error_code),
            base_offset: p.base_offset,
            log_append_time: p.log_append_time_ms,
            part: Part::Index(index),
        })
        .collect()
}

/// The answers of the `PartitionResponse` tuples of `response.partitions` (a test's or a fake's
/// `ProduceResponse`).
fn object_answers<'a, 'py>(response: &Bound<'py, PyAny>) -> PyResult<Vec<Answer<'a, 'py>>> {
    response.getattr(intern!(response.py(), "partitions"))?.try_iter()?.map(|part| answer(part?)).collect()
}

/// Whether `batch` is the batch for topic-partition (`topic`, `partition`).
fn is_for(batch: &Bound<'_, ProducerBatch>, topic: &Topic<'_, '_>, partition: i64) -> PyResult<bool> {
    let this = batch.borrow();
    if this.partition != partition {
        return Ok(false);
    }
    let own = this.topic.bind(batch.py());
    match topic {
        Topic::Object(topic) => Ok(own.is(topic) || own.eq(topic)?),
        Topic::Text(text) => Ok(own.cast::<PyString>().is_ok_and(|s| s.to_str().is_ok_and(|s| s == *text))),
    }
}

/// Matches the answers to `batches` as the sender did: by position while the broker answers in
/// request order, then by topic-partition (an answer for a partition not asked for, or a second
/// one, is ignored). Returns the (batch, answer) pairs in the response's order and the batches
/// not answered.
#[allow(clippy::type_complexity)] // the pairs and the rest, as `complete` walks them
fn matched<'a, 'py>(
    batches: &[Bound<'py, ProducerBatch>],
    answers: Vec<Answer<'a, 'py>>,
) -> PyResult<(Vec<(Bound<'py, ProducerBatch>, Answer<'a, 'py>)>, Vec<Bound<'py, ProducerBatch>>)> {
    let mut pairs = Vec::with_capacity(batches.len());
    let mut position = 0usize;
    let mut unanswered: Option<Vec<Option<&Bound<'py, ProducerBatch>>>> = None;
    for answer in answers {
        if unanswered.is_none() {
            if let Some(batch) = batches.get(position) {
                if is_for(batch, &answer.topic, answer.partition)? {
                    position += 1;
                    pairs.push((batch.clone(), answer));
                    continue;
                }
            }
            unanswered = Some(batches[position..].iter().map(Some).collect());
        }
        let Some(rest) = unanswered.as_mut() else { continue };
        let mut found = None;
        for slot in rest.iter_mut() {
            if let Some(batch) = slot {
                if is_for(batch, &answer.topic, answer.partition)? {
                    found = slot.take();
                    break;
                }
            }
        }
        if let Some(batch) = found {
            pairs.push((batch.clone(), answer));
        }
    }
    let missing = match unanswered {
        None => batches[position..].to_vec(),
        Some(rest) => rest.into_iter().flatten().cloned().collect(),
    };
    Ok((pairs, missing))
}

/// The `PartitionResponse` a decision hands back: the caller's own, or made from the
/// `ProduceAnswer`'s bytes (all of its partitions at the first decision, then reused).
fn part_object<'py>(response: &Bound<'py, PyAny>, part: Part<'py>, made: &mut Option<Bound<'py, PyList>>) -> PyResult<Bound<'py, PyAny>> {
    match part {
        Part::Object(object) => Ok(object),
        Part::Index(index) => {
            if made.is_none() {
                *made = Some(response.getattr(intern!(response.py(), "partitions"))?.cast_into::<PyList>()?);
            }
            made.as_ref().map_or_else(|| Ok(response.py().None().into_bound(response.py())), |list| list.get_item(index))
        }
    }
}

/// The completion; see the module's documentation. `unmute(index)` unmutes a partition queue
/// (the queues' own, borrowed only for that: a callback may `send()` meanwhile). With
/// `per_batch`, nothing is completed here: every answered batch comes back with its answer (a
/// producer with interceptors, whose sender completes each batch itself), matched the same way.
#[allow(clippy::too_many_arguments)] // the response, the request's batches and the producer's parts it touches
pub(crate) fn complete<'py>(
    py: Python<'py>,
    batches: Vec<Bound<'py, ProducerBatch>>,
    response: &Bound<'py, PyAny>,
    now: f64,
    duplicate_code: i64,
    tm: Option<&Bound<'py, PyAny>>,
    incomplete: &Bound<'py, PySet>,
    per_batch: bool,
    counters: Option<&Bound<'py, RequestCounters>>,
    mut unmute: impl FnMut(usize) -> PyResult<()>,
) -> PyResult<Completed<'py>> {
    // The answer's form is told once: the connection's `ProduceAnswer`, or a fake's named tuples.
    let native = response.cast::<ProduceAnswer>().ok().map(|a| (a.get(), a.get().payload(py).clone()));
    let answers = match &native {
        Some((answer, payload)) => native_answers(answer, payload.as_bytes()),
        None => object_answers(response)?,
    };
    let (pairs, missing) = matched(&batches, answers)?;
    let decisions = PyList::empty(py);
    let mut made = None;
    let mut acked: Vec<(Bound<'py, ProducerBatch>, i64, i64)> = Vec::with_capacity(pairs.len());
    for (batch, answer) in pairs {
        if per_batch {
            decisions.append((batch, part_object(response, answer.part, &mut made)?))?;
        } else if answer.code == 0 {
            acked.push((batch, answer.base_offset, answer.log_append_time));
        } else if answer.code == duplicate_code {
            // Written before (an earlier attempt's answer was lost): success, its offset unknown.
            acked.push((batch, -1, answer.log_append_time));
        } else {
            decisions.append((batch, part_object(response, answer.part, &mut made)?))?;
        }
    }
    for batch in missing {
        decisions.append((batch, py.None()))?;
    }
    if let Some(tm) = tm {
        if !acked.is_empty() {
            let flat = PyList::empty(py);
            for (batch, base_offset, _) in &acked {
                flat.append(batch)?;
                flat.append(base_offset)?;
            }
            tm.call_method1(intern!(py, "on_acknowledged_all"), (flat,))?;
        }
    }
    let (mut freed, mut records) = (0i64, 0i64);
    let mut due = false;
    for (batch, base_offset, log_append_time) in acked {
        let Some(count) = complete_ok(&batch, base_offset, log_append_time, &mut unmute)? else { continue };
        incomplete.discard(&batch)?;
        let (reserved, topic, created_ms, spread) = {
            let mut this = batch.borrow_mut();
            let spread = this.builder.bind(py).borrow().timestamp_spread() as f64;
            (std::mem::take(&mut this.reserved_bytes), this.topic.clone_ref(py), this.created_ms, spread)
        };
        freed += reserved;
        records += count;
        if let Some(c) = counters {
            // Borrowed for this add only, after the batch's callbacks: an `on_delivery` may have
            // read the metrics (`take()`), and `at` then opens the generation again.
            let mut c = c.borrow_mut();
            due |= c.at(now);
            c.add_acknowledged_batch(topic.bind(py), count, now, created_ms, spread)?;
        }
        release(&batch)?;
    }
    Ok((decisions, freed, records, due))
}

/// A batch the broker wrote: its partition unmuted if its request muted it, and, unless it was
/// done already (it expired while in flight), its outcome written and everything waiting on it
/// told. Returns its record count, or None when it was done already.
fn complete_ok(
    batch: &Bound<'_, ProducerBatch>,
    base_offset: i64,
    log_append_time: i64,
    unmute: &mut impl FnMut(usize) -> PyResult<()>,
) -> PyResult<Option<i64>> {
    let py = batch.py();
    let mut this = batch.borrow_mut();
    if this.in_flight {
        // Only the batch whose request muted the partition unmutes it (max.in.flight=1).
        if let Some(index) = this.queue_index {
            unmute(index)?;
        }
    }
    if !this.write_outcome(base_offset, log_append_time, None) {
        return Ok(None);
    }
    let count = i64::from(this.builder.bind(py).borrow().count());
    let spans = this.spans.take();
    // Taken: nothing reads them after this report (`release` would drop them).
    let rows = std::mem::take(&mut this.delivery_rows);
    let arrow = this.arrow_runs.is_some();
    let waiting = this.done_callbacks.take();
    let waiters = this.waiters.take();
    let parent = this.parent.take();
    let event_loop = this.event_loop.clone_ref(py);
    drop(this);
    if let Some(spans) = spans {
        // Tracing on: each record's span ends at its acknowledgement, before any callback.
        batch.call_method1(intern!(py, "_end_spans"), (spans,))?;
    }
    if !rows.is_empty() {
        report_delivery(batch, &rows, base_offset, log_append_time)?;
    }
    if arrow {
        batch.call_method1(intern!(py, "_report_arrow"), (base_offset, py.None()))?;
    }
    if let Some(waiting) = waiting {
        if !waiting.bind(py).is_empty() {
            // One loop callback for the batch's done-callbacks, in the order they were added.
            let invoke_all = INVOKE_ALL.get_or_try_init(py, || py.import("aioproducer.internals.batch")?.getattr("_invoke_all").map(Bound::unbind))?;
            event_loop.bind(py).call_method1(intern!(py, "call_soon"), (invoke_all.bind(py), waiting))?;
        }
    }
    if let Some(waiters) = waiters {
        for waiter in waiters.bind(py).iter() {
            if !waiter.call_method0(intern!(py, "done"))?.is_truthy()? {
                waiter.call_method1(intern!(py, "set_result"), (py.None(),))?;
            }
        }
    }
    if let Some(parent) = parent {
        parent.bind(py).call_method0(intern!(py, "_piece_complete"))?;
    }
    Ok(Some(count))
}

/// Each `on_delivery` row's call with its record's metadata: its offset (-1 when the broker gave
/// none: a duplicate), and the broker's append time when the topic keeps that (a
/// `log_append_time` of 0 or more; librdkafka's mock cluster always answers with one), else its
/// create time. One that raises is handed to batch.py's `_delivery_raised` (logged,
/// or out of the loop for `SystemExit` and `KeyboardInterrupt`) and the others still run.
///
/// Per row, only what differs from the row before is made anew: the offset always, the
/// timestamp, key and value sizes when they changed (rows of a batch mostly share them: records
/// sent in the same millisecond, values of one size), and the call passes its two arguments
/// without a tuple. At 1 KB with one shared `on_delivery` that was about 2,460 instructions a
/// record before, 4 ints, a tuple and `tp_call` each (callgrind, stop 66).
fn report_delivery(batch: &Bound<'_, ProducerBatch>, rows: &[DeliveryRow], base_offset: i64, log_append_time: i64) -> PyResult<()> {
    let py = batch.py();
    let (topic, partition) = {
        let this = batch.borrow();
        (this.topic.clone_ref(py), this.partition)
    };
    let topic = topic.bind(py).cast::<PyString>()?;
    let none = py.None();
    let int = |n: i64| n.into_pyobject(py).map(Bound::into_any);
    // The same for every row of the batch: made once.
    let (partition, timestamp_type) = (int(partition)?, int(i64::from(log_append_time >= 0))?);
    let mut timestamp = Reused::new();
    let mut key_size = Reused::new();
    let mut value_size = Reused::new();
    for row in rows {
        let offset = if base_offset >= 0 { base_offset + row.relative_offset } else { -1 };
        let metadata = record_metadata(
            py,
            [
                topic.clone().into_any(),
                partition.clone(),
                int(offset)?,
                timestamp.get(py, if log_append_time >= 0 { log_append_time } else { row.timestamp })?,
                key_size.get(py, row.key_size)?,
                value_size.get(py, row.value_size)?,
                timestamp_type.clone(),
            ],
        )?;
        let on_delivery = row.on_delivery.bind(py);
        if let Err(error) = call2(on_delivery, &metadata, none.bind(py)) {
            batch.call_method1(intern!(py, "_delivery_raised"), (on_delivery, error.into_value(py)))?;
        }
    }
    Ok(())
}

/// The Python int of the last number asked for, made again only when the number changes.
struct Reused<'py> {
    last: Option<(i64, Bound<'py, PyAny>)>,
}

impl<'py> Reused<'py> {
    fn new() -> Self {
        Reused { last: None }
    }

    fn get(&mut self, py: Python<'py>, n: i64) -> PyResult<Bound<'py, PyAny>> {
        match &self.last {
            Some((last, made)) if *last == n => Ok(made.clone()),
            _ => {
                let made = n.into_pyobject(py)?.into_any();
                self.last = Some((n, made.clone()));
                Ok(made)
            }
        }
    }
}

/// `callable(first, second)` without an argument tuple (PyO3's `call1` makes one under the
/// stable ABI of 3.11, which has no `PyObject_Vectorcall`; `PyObject_CallFunctionObjArgs` has
/// CPython put the arguments on its stack and vectorcall the callable).
fn call2<'py>(callable: &Bound<'py, PyAny>, first: &Bound<'py, PyAny>, second: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = callable.py();
    // SAFETY: the three pointers are live objects, borrowed for the call (the `Bound`s hold
    // them); the argument list ends with the null pointer the variadic function expects; the
    // result is a new reference or null with the error set, which `from_owned_ptr_or_err` takes.
    unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyObject_CallFunctionObjArgs(callable.as_ptr(), first.as_ptr(), second.as_ptr(), std::ptr::null_mut::<ffi::PyObject>()),
        )
    }
}

/// batch.py's `release` after a completion: only what the record futures read is kept.
fn release(batch: &Bound<'_, ProducerBatch>) -> PyResult<()> {
    let py = batch.py();
    let mut this = batch.borrow_mut();
    this.futures.bind(py).call_method0(intern!(py, "clear"))?;
    this.delivery_rows = Vec::new();
    this.builder.bind(py).borrow_mut().release_records();
    Ok(())
}
