//! aioproducer's native data plane: the per-record work of the producer, behind the Python
//! accumulator's one append door. Sans-I/O: bytes and records in, batches out; the sender,
//! the connections and every decision about when to send stay in Python and asyncio.

use pyo3::prelude::*;

pub mod arrow;
pub mod batch_builder;
pub mod future;
pub mod murmur;

/// Panics on purpose, for the test that a Rust panic reaches Python as an exception
/// (`pyo3_runtime.PanicException`) and never aborts the process: the release profile keeps
/// `panic = "unwind"` for that (native/Cargo.toml).
#[pyfunction]
fn _panic_for_test() {
    panic!("a deliberate panic in aioproducer._native");
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SOURCE_HASH", env!("AIOPRODUCER_SOURCE_HASH"))?;
    m.add("RECORD_BATCH_OVERHEAD", batch_builder::RECORD_BATCH_OVERHEAD)?;
    m.add_class::<batch_builder::PyRecordBatchBuilder>()?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    m.add_class::<arrow::ArrowRecords>()?;
    m.add_class::<future::FutureRecordMetadata>()?;
    m.add_class::<future::BatchOutcome>()?;
    m.add_function(wrap_pyfunction!(future::append_record, m)?)?;
    m.add_function(wrap_pyfunction!(future::append_values, m)?)?;
    m.add_function(wrap_pyfunction!(murmur::murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(murmur::py_partition_for_key, m)?)?;
    Ok(())
}
