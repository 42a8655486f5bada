//! `ArrowRecords`, the class `send_arrow` drives: what Python calls, each entry point guarded.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::batch_builder::{size_upper_bound as upper_bound, Header, PyRecordBatchBuilder};
use crate::{bug, guarded, test_panic_after_rows};

use super::import::import;
use super::rows::Rows;

/// `send_arrow`'s rows: imported and checked at construction, planned, then appended batch by
/// batch through the accumulator; released (`release_data`) once queued. See the module docs.
///
/// Used on the event loop's thread, as every batch builder is; freed on whatever thread Python
/// frees it (see `Rows`' `Send`), its Arrow data released there.
#[pyclass(name = "ArrowRecords", module = "aioproducer._native")]
pub struct ArrowRecords {
    rows: Rows,
    /// Per-row outcome when asked for: the record's offset, -1 failed or unknown, -2 pending
    /// (or never queued, if the call failed part-way: reported as -1).
    offsets: Option<Vec<i64>>,
    /// Planned rows appended to batches so far (`append_rows`).
    appended: usize,
    /// A panic in `append_rows` after rows of its run went in, raised by the next call.
    deferred: Option<PyErr>,
}

#[pymethods]
impl ArrowRecords {
    /// Import and check `data`'s schema and buffers (TypeError/ValueError naming the column); nothing is queued.
    #[new]
    #[pyo3(signature = (data, *, ignore_keys = false, now_ms = 0, row_outcomes = false))]
    fn new(data: &Bound<'_, PyAny>, ignore_keys: bool, now_ms: i64, row_outcomes: bool) -> PyResult<Self> {
        guarded("ArrowRecords.__new__", || {
            let (_, batches) = import(data)?;
            let mut starts = Vec::with_capacity(batches.len());
            let mut total = 0usize;
            for batch in &batches {
                starts.push(total);
                total += batch.rows;
            }
            if batches.len() > u32::MAX as usize || batches.iter().any(|b| b.rows > u32::MAX as usize) {
                return Err(PyValueError::new_err("send_arrow: more than 2**32 rows in one record batch"));
            }
            Ok(ArrowRecords {
                rows: Rows { batches, starts, total, ignore_keys, now_ms, order: Vec::new() },
                offsets: row_outcomes.then(|| vec![-2; total]),
                appended: 0,
                deferred: None,
            })
        })
    }

    /// Rows in all.
    fn __len__(&self) -> PyResult<usize> {
        guarded("ArrowRecords.__len__", || Ok(self.rows.total))
    }

    /// Check every row and group them by partition: `[(partition or -1, start, stop)]` over
    /// the planned order, chunk by chunk (`Rows::plan`): a partition's groups in row order.
    /// InvalidRecordError / RecordTooLargeError naming the row; nothing is queued then.
    fn plan(&mut self, py: Python<'_>, num_partitions: u32, max_record_size: usize, topic: &str) -> PyResult<Vec<(i64, usize, usize)>> {
        guarded("ArrowRecords.plan", || self.rows.plan(num_partitions, max_record_size, topic).map_err(|e| e.to_py(py)))
    }

    /// Append the planned rows `start..stop` to `builder` while it has room: how many went in
    /// (0: full, closed, or being compressed). Rows go in in planned order, so `appended` is the
    /// count of rows queued, and rows `order[..appended]` are they.
    ///
    /// A panic (a bug) after some rows of the run went in returns those rows, so that the batch
    /// reports them as it reports any run, and is raised by the next call (`append_rows` or
    /// `reservation`: the accumulator makes one, the run being short): every row in a batch is
    /// counted in `appended`, and a failed call hands back a delivery of exactly those rows.
    fn append_rows(&mut self, builder: &Bound<'_, PyRecordBatchBuilder>, start: usize, stop: usize) -> PyResult<usize> {
        guarded("ArrowRecords.append_rows", || {
            self.raise_deferred()?;
            let mut builder = builder.try_borrow_mut()?;
            let mut count = 0;
            let panic_after = test_panic_after_rows("ArrowRecords.append_rows");
            let run = catch_unwind(AssertUnwindSafe(|| self.append_run(&mut builder, start, stop, &mut count, panic_after)));
            self.appended += count;
            match run {
                Ok(_) => Ok(count),
                Err(payload) if count == 0 => Err(bug("ArrowRecords.append_rows", payload.as_ref())),
                Err(payload) => {
                    self.deferred = Some(bug("ArrowRecords.append_rows", payload.as_ref()));
                    Ok(count)
                }
            }
        })
    }

    /// Planned rows appended so far (positions `0..appended`): what a call that failed part-way queued.
    #[getter]
    fn appended(&self) -> PyResult<usize> {
        guarded("ArrowRecords.appended", || Ok(self.appended))
    }

    /// Keys' and values' bytes of the planned rows `start..stop` (the sticky partitioner's count).
    fn payload_bytes(&self, start: usize, stop: usize) -> PyResult<usize> {
        guarded("ArrowRecords.payload_bytes", || Ok(self.rows.payload_bytes(start, stop)))
    }

    /// What a new batch for the planned row at `pos` reserves: `batch_size`, or its upper bound if larger.
    fn reservation(&mut self, pos: usize, batch_size: usize) -> PyResult<usize> {
        guarded("ArrowRecords.reservation", || {
            self.raise_deferred()?;
            let mut headers = Vec::new();
            let packed = self.rows.order[pos];
            Ok(match self.rows.row((packed >> 32) as usize, (packed & 0xffff_ffff) as usize, &mut headers) {
                Ok(row) => upper_bound(row.key, row.value, &headers).max(batch_size),
                Err(_) => batch_size,
            })
        })
    }

    /// The row index (in the data as given) of the planned position `pos`.
    fn row_index(&self, pos: usize) -> PyResult<usize> {
        guarded("ArrowRecords.row_index", || Ok(self.rows.global(self.rows.order[pos])))
    }

    /// Release the Arrow data (every batch's release callback, once): the rows are queued.
    fn release_data(&mut self) -> PyResult<()> {
        guarded("ArrowRecords.release_data", || {
            self.rows.batches.clear();
            Ok(())
        })
    }

    /// Record the outcome of the planned rows `start..start + count`: offsets from `base_offset`
    /// (-1: unknown or failed). A no-op unless per-row outcomes were asked for.
    fn set_offsets(&mut self, start: usize, count: usize, base_offset: i64) -> PyResult<()> {
        guarded("ArrowRecords.set_offsets", || {
            if let Some(offsets) = self.offsets.as_mut() {
                for k in 0..count {
                    let row = self.rows.global(self.rows.order[start + k]);
                    offsets[row] = if base_offset >= 0 { base_offset + k as i64 } else { -1 };
                }
            }
            Ok(())
        })
    }

    /// Per-row offsets (native-endian int64, one per row; -1 failed, unknown or never queued), or None.
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        guarded("ArrowRecords.offsets", || {
            Ok(self.offsets.as_ref().map(|o| {
                let bytes: Vec<u8> = o.iter().flat_map(|v| v.max(&-1).to_ne_bytes()).collect();
                PyBytes::new(py, &bytes)
            }))
        })
    }
}

impl ArrowRecords {
    /// `append_rows`' run, counting in `count` the rows that went in as they go in; with
    /// `panic_after` (tests only: `_panic_for_test`), a panic once that many went in.
    fn append_run(&self, builder: &mut PyRecordBatchBuilder, start: usize, stop: usize, count: &mut usize, panic_after: Option<usize>) -> usize {
        fn counted(builder: &mut PyRecordBatchBuilder, count: &mut usize, ts: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> i64 {
            let delta = builder.append_record(ts, key, value, headers);
            *count += usize::from(delta >= 0);
            delta
        }
        match panic_after {
            None => self.rows.append_rows(start, stop, |ts, key, value, headers| counted(builder, count, ts, key, value, headers)),
            Some(after) => self.rows.append_rows(start, stop, |ts, key, value, headers| {
                assert!(*count != after, "a deliberate panic in ArrowRecords.append_rows after {after} rows, armed by _panic_for_test");
                counted(builder, count, ts, key, value, headers)
            }),
        }
    }

    /// Raises the panic `append_rows` deferred, once.
    fn raise_deferred(&mut self) -> PyResult<()> {
        self.deferred.take().map_or(Ok(()), Err)
    }
}
