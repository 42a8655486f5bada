//! aioproducer's native data plane: the per-record work of the producer, behind the Python
//! accumulator's one append door. Sans-I/O: bytes and records in, batches out; the sender,
//! the connections and every decision about when to send stay in Python and asyncio.

use pyo3::prelude::*;

pub mod future;
pub mod murmur;
pub mod records;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SOURCE_HASH", env!("AIOPRODUCER_SOURCE_HASH"))?;
    m.add("RECORD_BATCH_OVERHEAD", records::RECORD_BATCH_OVERHEAD)?;
    m.add_class::<records::PyRecordBatchBuilder>()?;
    m.add_class::<future::FutureRecordMetadata>()?;
    m.add_class::<future::BatchOutcome>()?;
    m.add_function(wrap_pyfunction!(future::append_record, m)?)?;
    m.add_function(wrap_pyfunction!(future::append_values, m)?)?;
    m.add_function(wrap_pyfunction!(murmur::murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(murmur::py_partition_for_key, m)?)?;
    Ok(())
}
