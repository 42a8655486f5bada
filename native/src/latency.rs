//! The delivery-latency histogram's per-batch arithmetic (`DeliveryLatency` in
//! `aioproducer/internals/metrics.py`, which keeps the buckets, the bounds and the windowed
//! statistics): a response's acknowledged batches go in with one call (`record_latencies`), not a
//! Python call per batch. The only implementation: `DeliveryLatency.record_batch` calls it too.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::guarded;

/// The first bucket whose bound is at least `latency` (Python's `bisect_left`).
fn bucket_of(bounds: &[f64], latency: f64) -> usize {
    bounds.partition_point(|&bound| bound < latency)
}

/// Adds `records` acknowledged records, whose latencies run evenly from `first` (the oldest's)
/// down to `last`, to `buckets` (per bucket, the last above every bound; a bound counts in its
/// own bucket). The whole batch goes in one bucket when both ends fall in it (nearly always).
fn add_batch(bounds: &[f64], buckets: &mut [i64], records: i64, first: f64, last: f64) {
    let hi = bucket_of(bounds, first);
    if hi == 0 || bounds[hi - 1] < last || records == 1 {
        buckets[hi] += records;
        return;
    }
    let lo = bucket_of(bounds, last);
    // Record i (0 = the first) waited first - i * step: those at or under a bound are the i >= (first - bound) / step.
    let step = (first - last) / (records - 1) as f64;
    let mut below = 0;
    for (i, &bound) in bounds.iter().enumerate().take(hi).skip(lo) {
        let under = records - (((first - bound) / step - 1e-9).ceil() as i64).max(0);
        buckets[i] += under - below;
        below = under;
    }
    buckets[hi] += records - below;
}

/// Adds each row of `rows` (flat `[records, first_ms, last_ms, ...]`: floats, or `bytes` of
/// packed native-order doubles as `RequestCounters.take` gives them) to the histogram's
/// `buckets` (a list of ints, changed in place) under `bounds`, and to the running sums as Python
/// added them one batch after the other (`sum_ms`, the histogram's; `unfolded_sum` and
/// `unfolded_max`, the producer's windowed average and maximum not yet folded). Returns
/// `(records added, sum_ms, unfolded_sum, unfolded_max)`.
#[pyfunction]
pub fn record_latencies(
    bounds: Vec<f64>,
    buckets: &Bound<'_, PyList>,
    rows: &Bound<'_, PyAny>,
    sum_ms: f64,
    unfolded_sum: f64,
    unfolded_max: f64,
) -> PyResult<(i64, f64, f64, f64)> {
    guarded("record_latencies", || {
        // Packed: a fold's rows (three a batch) without a float object each (2026-12-04: the
        // list was 0.6 % of the loop's samples with 10 KB records, a batch each).
        let rows: Vec<f64> = match rows.cast::<PyBytes>() {
            Ok(packed) => packed.as_bytes().chunks_exact(8).map(|b| f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])).collect(),
            Err(_) => rows.extract()?,
        };
        let mut counts: Vec<i64> = buckets.extract()?;
        if counts.len() != bounds.len() + 1 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "{} buckets for {} bounds: one more bucket than bounds is needed",
                counts.len(),
                bounds.len()
            )));
        }
        let (mut added, mut sum_ms, mut unfolded_sum, mut unfolded_max) = (0i64, sum_ms, unfolded_sum, unfolded_max);
        for row in rows.chunks_exact(3) {
            let (records, first, last) = (row[0] as i64, row[1], row[2]);
            add_batch(&bounds, &mut counts, records, first, last);
            let batch_sum = records as f64 * (first + last) / 2.0;
            sum_ms += batch_sum;
            unfolded_sum += batch_sum;
            added += records;
            if first > unfolded_max {
                unfolded_max = first;
            }
        }
        for (i, count) in counts.into_iter().enumerate() {
            buckets.set_item(i, count)?;
        }
        Ok((added, sum_ms, unfolded_sum, unfolded_max))
    })
}

#[cfg(test)]
mod tests {
    use super::add_batch;

    #[test]
    fn a_batch_spreads_between_its_first_and_last_record() {
        let bounds = [1.0, 5.0, 10.0];
        let mut buckets = [0i64; 4];
        add_batch(&bounds, &mut buckets, 1, 3.0, 3.0);
        assert_eq!(buckets, [0, 1, 0, 0]);
        add_batch(&bounds, &mut buckets, 5, 12.0, 0.0); // 12, 9, 6, 3, 0 ms
        assert_eq!(buckets, [1, 2, 2, 1]);
        add_batch(&bounds, &mut buckets, 3, 10.0, 5.0); // 10, 7.5, 5 ms: a bound counts in its bucket
        assert_eq!(buckets, [1, 3, 4, 1]);
    }
}
