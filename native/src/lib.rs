//! aioproducer's native data plane: the per-record work of the producer, behind the Python
//! accumulator's one append door. Sans-I/O: bytes and records in, batches out; the sender,
//! the connections and every decision about when to send stay in Python and asyncio.
//!
//! One module is not data plane but the network adapter's native half: `socket_writer` (Unix),
//! the thread a plaintext connection writes its large requests on, which must not need the GIL.
//! It decides nothing: `network/connection.py` chooses what goes to it, and it only writes.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

pub mod arrow;
pub mod batch;
pub mod batch_builder;
pub mod budget;
#[cfg(target_os = "linux")]
pub mod clock;
pub mod complete;
pub mod counters;
pub mod latency;
pub mod murmur;
pub mod produce;
pub mod queues;
#[cfg(unix)]
pub mod socket_writer;
pub mod spare;
pub mod stats;

// ------------------------------------------------------------------ entry points

/// Runs the body of an entry point (every `#[pyfunction]` and `#[pymethods]` method here is one,
/// named `name` as Python sees it: `"RecordBatchBuilder.build"`), so that a panic in it reaches
/// the caller as a `RuntimeError` naming it and saying it is a bug in aioproducer: an exception
/// `except Exception` catches. Left to PyO3, a panic would be `pyo3_runtime.PanicException`, a
/// `BaseException` that a caller's `except Exception`, asyncio's callbacks and the sender's error
/// handling all let through.
///
/// Two exceptions, which no caller can see: `__traverse__` (PyO3 catches a panic there itself and
/// tells the collector the traversal failed; nothing may touch Python during it) and the
/// `#[classattr]` constants (evaluated once, when the type is made).
///
/// Cost: `catch_unwind` adds no instruction where nothing panics (an unwind table entry), and the
/// test switch is a relaxed load of a static and a branch never taken. Measured on the shared
/// 2-core machine, the module without the guards against with them, Python loops calling one
/// entry point (process time, best of 15 runs, 5 interleaved rounds): `murmur2(b"k")` 48.5 ->
/// 48.7 ns a call, `FutureRecordMetadata.done()` 32.3 -> 33.3 ns, `append_record` (a 100 B
/// record) 405 -> 402 ns: under 1 ns a call, within the noise; `benchmarks/record_future.py`
/// showed no difference beyond its run-to-run spread either.
///
/// `AssertUnwindSafe`: what a panicking body leaves behind is what PyO3 would leave behind too;
/// the call raises, and the bodies keep their objects consistent between Python-visible steps
/// (a record is appended whole or not at all; `ArrowRecords::append_rows` counts what went in).
#[inline(always)]
pub(crate) fn guarded<T>(name: &'static str, body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(|| {
        if TEST_PANIC_ARMED.load(Ordering::Relaxed) {
            test_panic(name);
        }
        body()
    }))
    .unwrap_or_else(|payload| Err(bug(name, payload.as_ref())))
}

/// The exception a panic in entry point `name` becomes.
pub(crate) fn bug(name: &str, payload: &(dyn Any + Send)) -> PyErr {
    let message = payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str)).unwrap_or("a panic");
    PyRuntimeError::new_err(format!("aioproducer._native.{name} panicked ({message}): this is a bug in aioproducer, please report it"))
}

// ------------------------------------------------------------------ the test switch

/// Set while `_panic_for_test` has armed a panic (one relaxed load per entry point call otherwise).
static TEST_PANIC_ARMED: AtomicBool = AtomicBool::new(false);
/// The armed entry point and, for `ArrowRecords.append_rows`, how many rows it appends first.
static TEST_PANIC_AT: Mutex<Option<(String, usize)>> = Mutex::new(None);

/// Disarms and returns the rows to append first if `name` is the armed entry point.
#[cold]
fn take_test_panic(name: &str, rows: bool) -> Option<usize> {
    let mut armed = TEST_PANIC_AT.lock().unwrap_or_else(PoisonError::into_inner);
    match armed.as_ref() {
        Some((at, after)) if at == name && (rows || *after == 0) => {
            TEST_PANIC_ARMED.store(false, Ordering::Relaxed);
            armed.take().map(|(_, after)| after)
        }
        _ => None,
    }
}

#[cold]
#[inline(never)]
fn test_panic(name: &str) {
    if take_test_panic(name, false).is_some() {
        panic!("a deliberate panic in {name}, armed by _panic_for_test");
    }
}

/// For `ArrowRecords.append_rows`: the rows it appends before the armed panic, if armed for it.
pub(crate) fn test_panic_after_rows(name: &str) -> Option<usize> {
    if TEST_PANIC_ARMED.load(Ordering::Relaxed) {
        take_test_panic(name, true)
    } else {
        None
    }
}

/// Tests only. Without arguments: panics here. With `entry_point` (`"RecordBatchBuilder.build"`,
/// `"ProducerBatch.try_append"`): the next call of that entry point panics, at its start, or for
/// `ArrowRecords.append_rows` after appending `after_rows` rows; `""` disarms. Each panic must
/// reach Python as the `RuntimeError` of `guarded` (tests/unit/test_native_panics.py); the
/// release profile keeps `panic = "unwind"` for that (native/Cargo.toml).
#[pyfunction]
#[pyo3(signature = (entry_point = None, after_rows = 0))]
fn _panic_for_test(entry_point: Option<String>, after_rows: usize) -> PyResult<()> {
    guarded("_panic_for_test", || {
        let Some(name) = entry_point else { panic!("a deliberate panic in aioproducer._native") };
        let armed = !name.is_empty();
        *TEST_PANIC_AT.lock().unwrap_or_else(PoisonError::into_inner) = armed.then_some((name, after_rows));
        TEST_PANIC_ARMED.store(armed, Ordering::Relaxed);
        Ok(())
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SOURCE_HASH", env!("AIOPRODUCER_SOURCE_HASH"))?;
    m.add("RECORD_BATCH_OVERHEAD", batch_builder::RECORD_BATCH_OVERHEAD)?;
    m.add("PRODUCE_SPLICE_THRESHOLD", produce::python::SPLICE_THRESHOLD)?;
    m.add_class::<batch_builder::PyRecordBatchBuilder>()?;
    m.add_function(wrap_pyfunction!(batch_builder::py_size_upper_bound, m)?)?;
    m.add_function(wrap_pyfunction!(batch_builder::py_record_size, m)?)?;
    m.add_function(wrap_pyfunction!(batch_builder::py_write_varlong, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    m.add_class::<arrow::ArrowRecords>()?;
    m.add_class::<batch::FutureRecordMetadata>()?;
    m.add_class::<batch::ProducerBatch>()?;
    m.add_function(wrap_pyfunction!(batch::set_object_costs, m)?)?;
    m.add_function(wrap_pyfunction!(latency::record_latencies, m)?)?;
    m.add_class::<queues::RecordQueues>()?;
    m.add_class::<budget::MemoryBudget>()?;
    m.add_class::<counters::RequestCounters>()?;
    m.add_function(wrap_pyfunction!(queues::produce_topic_data, m)?)?;
    m.add_class::<stats::SampledStat>()?;
    #[cfg(unix)]
    m.add_class::<socket_writer::SocketWriter>()?;
    #[cfg(target_os = "linux")]
    m.add_function(wrap_pyfunction!(clock::monotonic_ms, m)?)?;
    m.add_function(wrap_pyfunction!(murmur::murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(murmur::py_partition_for_key, m)?)?;
    m.add_function(wrap_pyfunction!(produce::python::py_encode_produce_request, m)?)?;
    m.add_function(wrap_pyfunction!(produce::python::py_decode_produce_response, m)?)?;
    m.add_class::<produce::answer::ProduceAnswer>()?;
    m.add_class::<produce::python::ProduceTopicData>()?;
    m.add_function(wrap_pyfunction!(produce::answer::read_produce_response, m)?)?;
    m.add_function(wrap_pyfunction!(produce::answer::read_produce_answers, m)?)?;
    Ok(())
}
