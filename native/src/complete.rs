//! The Produce response's completion (issue #42, slice 4): one native call per response
//! (`RecordQueues.complete`), which matches each partition's answer to its batch, completes every
//! batch the broker wrote (its outcome, which its record futures read; its `on_delivery` rows; its
//! done-callbacks and awaiters; its partition unmuted; its memory and bytes released) and hands
//! back to Python only what needs a decision (an error of any kind, a partition not answered),
//! with what the producer's counters and metrics need of the rest, summed per request.
//!
//! It takes the response as the connection decoded it (`PartitionResponse` tuples), not its bytes:
//! the decoding is native already (`produce/decode.rs`, about 1.6 µs for a response of six
//! partitions, 0.3 µs a batch), the connection reads the correlation id and the throttle time from
//! it, and the tracing test and the fault proxy watch `Sender._handle_response` with it; reading
//! the five fields of a tuple here costs about 0.05 µs a partition. Decoding here instead would
//! save part of the 0.3 µs a batch and move the framing's knowledge out of the connection.
//!
//! Python keeps what is rare or decides something: tracing's spans (`_end_spans`), `send_arrow()`
//! runs (`_report_arrow`), a split batch's parent (`_piece_complete`), an `on_delivery` whose
//! metadata is not the plain case (log-append time, no offset: `_report_delivery`), a raising
//! callback (`_delivery_raised`), and the idempotent producer's bookkeeping of what was
//! acknowledged (`TransactionManager.on_acknowledged_all`, one call per response, before any
//! batch completes, as the sender did per batch).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PySet, PyString, PyTuple};

use crate::batch::{record_metadata, ProducerBatch};
use crate::counters::RequestCounters;

/// batch.py's `_invoke_all` (runs a batch's done-callbacks in one loop callback), looked up once.
static INVOKE_ALL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// What a response's completion hands back: `(decisions, freed bytes, records acknowledged,
/// fold_due)`. `decisions` are `(batch, PartitionResponse)` for the partitions answered with an
/// error and `(batch, None)` for those not answered, in the response's order, those not answered
/// last. The acknowledged records, per topic, and their delivery latencies went into the
/// metrics' `RequestCounters` when given; `fold_due` says that the metrics should fold them now.
pub type Completed<'py> = (Bound<'py, PyList>, i64, i64, bool);

/// One partition's answer, the fields the completion reads.
struct Answer<'py> {
    part: Bound<'py, PyAny>,
    topic: Bound<'py, PyAny>,
    partition: i64,
    code: i64,
    base_offset: i64,
    log_append_time: i64,
}

fn answer<'py>(part: Bound<'py, PyAny>) -> PyResult<Answer<'py>> {
    let tuple = part.cast::<PyTuple>()?;
    Ok(Answer {
        topic: tuple.get_item(0)?,
        partition: tuple.get_item(1)?.extract()?,
        code: tuple.get_item(2)?.extract()?,
        base_offset: tuple.get_item(3)?.extract()?,
        log_append_time: tuple.get_item(4)?.extract()?,
        part,
    })
}

/// Whether `batch` is the batch for topic-partition (`topic`, `partition`).
fn is_for(batch: &Bound<'_, ProducerBatch>, topic: &Bound<'_, PyAny>, partition: i64) -> PyResult<bool> {
    let this = batch.borrow();
    if this.partition != partition {
        return Ok(false);
    }
    let own = this.topic.bind(batch.py());
    Ok(own.is(topic) || own.eq(topic)?)
}

/// Matches the answers to `batches` as the sender did: by position while the broker answers in
/// request order, then by topic-partition (an answer for a partition not asked for, or a second
/// one, is ignored). Returns the (batch, answer) pairs in the response's order and the batches
/// not answered.
#[allow(clippy::type_complexity)] // the pairs and the rest, as `complete` walks them
fn matched<'py>(
    batches: &[Bound<'py, ProducerBatch>],
    partitions: &Bound<'py, PyAny>,
) -> PyResult<(Vec<(Bound<'py, ProducerBatch>, Answer<'py>)>, Vec<Bound<'py, ProducerBatch>>)> {
    let mut pairs = Vec::with_capacity(batches.len());
    let mut position = 0usize;
    let mut unanswered: Option<Vec<Option<&Bound<'py, ProducerBatch>>>> = None;
    for part in partitions.try_iter()? {
        let answer = answer(part?)?;
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

/// The completion; see the module's documentation. `unmute(index)` unmutes a partition queue
/// (the queues' own, borrowed only for that: a callback may `send()` meanwhile). With
/// `per_batch`, nothing is completed here: every answered batch comes back with its answer (a
/// producer with interceptors, whose sender completes each batch itself), matched the same way.
#[allow(clippy::too_many_arguments)] // the response, the request's batches and the producer's parts it touches
pub(crate) fn complete<'py>(
    py: Python<'py>,
    batches: Vec<Bound<'py, ProducerBatch>>,
    partitions: &Bound<'py, PyAny>,
    now: f64,
    duplicate_code: i64,
    tm: Option<&Bound<'py, PyAny>>,
    incomplete: &Bound<'py, PySet>,
    per_batch: bool,
    counters: Option<&Bound<'py, RequestCounters>>,
    mut unmute: impl FnMut(usize) -> PyResult<()>,
) -> PyResult<Completed<'py>> {
    let (pairs, missing) = matched(&batches, partitions)?;
    let decisions = PyList::empty(py);
    let mut acked: Vec<(Bound<'py, ProducerBatch>, i64, i64)> = Vec::with_capacity(pairs.len());
    for (batch, answer) in pairs {
        if per_batch {
            decisions.append((batch, answer.part))?;
        } else if answer.code == 0 {
            acked.push((batch, answer.base_offset, answer.log_append_time));
        } else if answer.code == duplicate_code {
            // Written before (an earlier attempt's answer was lost): success, its offset unknown.
            acked.push((batch, -1, answer.log_append_time));
        } else {
            decisions.append((batch, answer.part))?;
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
    let callbacks = this.callbacks.as_ref().map(|c| c.clone_ref(py));
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
    if let Some(rows) = callbacks {
        let rows = rows.bind(py);
        if !rows.is_empty() {
            report_delivery(batch, rows, base_offset, log_append_time)?;
        }
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
fn report_delivery(batch: &Bound<'_, ProducerBatch>, rows: &Bound<'_, PyList>, base_offset: i64, log_append_time: i64) -> PyResult<()> {
    let py = batch.py();
    let (topic, partition) = {
        let this = batch.borrow();
        (this.topic.clone_ref(py), this.partition)
    };
    let topic = topic.bind(py).cast::<PyString>()?;
    let none = py.None();
    let length = rows.len();
    let mut at = 0;
    while at + 5 <= length {
        let on_delivery = rows.get_item(at)?;
        let relative_offset: i64 = rows.get_item(at + 1)?.extract()?;
        let timestamp: i64 = if log_append_time >= 0 { log_append_time } else { rows.get_item(at + 2)?.extract()? };
        let key_size = rows.get_item(at + 3)?;
        let value_size = rows.get_item(at + 4)?;
        at += 5;
        let offset = if base_offset >= 0 { base_offset + relative_offset } else { -1 };
        let timestamp_type = i64::from(log_append_time >= 0);
        let fields = (topic, partition, offset, timestamp, key_size, value_size, timestamp_type).into_pyobject(py)?;
        let metadata = record_metadata(py, fields)?;
        if let Err(error) = on_delivery.call1((metadata, &none)) {
            batch.call_method1(intern!(py, "_delivery_raised"), (&on_delivery, error.into_value(py)))?;
        }
    }
    Ok(())
}

/// batch.py's `release` after a completion: only what the record futures read is kept.
fn release(batch: &Bound<'_, ProducerBatch>) -> PyResult<()> {
    let py = batch.py();
    let mut this = batch.borrow_mut();
    this.futures.bind(py).call_method0(intern!(py, "clear"))?;
    this.callbacks = None;
    this.builder.bind(py).borrow_mut().release_records();
    Ok(())
}
