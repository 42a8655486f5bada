//! The rows in Arrow memory: each read as a record, checked and grouped by partition (`plan`),
//! then appended to the open batches' builders (`append_rows`). Pure Rust: the tests link it.

use crate::batch_builder::size_upper_bound as upper_bound;
use crate::murmur::partition_for_key;

use super::batch::Batch;
use super::ArrowError;

/// Rows grouped by partition together (see `Rows::plan`): about 200 KB of 100 B rows, so that a
/// chunk's rows stay in cache while each partition's group is appended. Measured on 1M keyed
/// 100 B rows over 6 partitions (append only): 140 ns a row unchunked, 80 with 8192, 75 with 2048.
const PLAN_CHUNK: usize = 2048;

/// Rows in Arrow memory: what `plan` and `append_rows` read. Pure Rust (tests link it).
pub(super) struct Rows {
    pub(super) batches: Vec<Batch>,
    /// Global index of each batch's first row.
    pub(super) starts: Vec<usize>,
    pub(super) total: usize,
    pub(super) ignore_keys: bool,
    /// Create time of rows with a null (or no) timestamp: the call's time.
    pub(super) now_ms: i64,
    /// Row positions grouped by partition: (batch << 32) | row.
    pub(super) order: Vec<u64>,
}

// SAFETY: `Rows` holds raw pointers into Arrow buffers that its batches own (moved in from the
// producer, released only when the batch drops) and never writes through them: the data is
// immutable, as the C Data Interface asks of both sides. Every access goes through the
// `ArrowRecords` pyclass, whose borrow flag (under the interpreter lock) rules out two at once.
// Sending it to another thread can only mean that Python frees the object there, with the
// interpreter lock held, which is how every PyCapsule of the interface is released too: the
// producer's `release` callback must already work there. Without these, pyo3 refused to drop
// the rows on a thread other than the one that made them, and leaked the Arrow data.
unsafe impl Send for Rows {}
unsafe impl Sync for Rows {}

/// A row's record, borrowed from Arrow memory.
pub(super) struct Row<'a> {
    pub(super) key: Option<&'a [u8]>,
    pub(super) value: Option<&'a [u8]>,
    partition: Option<i64>,
    timestamp: Result<i64, String>,
}

impl Rows {
    pub(super) fn global(&self, packed: u64) -> usize {
        self.starts[(packed >> 32) as usize] + (packed & 0xffff_ffff) as usize
    }

    /// Row `r` of batch `b`, its headers into `headers` (cleared first).
    /// Err: a null header entry or header key (the message names the row).
    pub(super) fn row<'a>(&'a self, b: usize, r: usize, headers: &mut Vec<(&'a [u8], Option<&'a [u8]>)>) -> Result<Row<'a>, String> {
        let batch = &self.batches[b];
        let i = batch.offset + r;
        headers.clear();
        // SAFETY: r < batch.rows and every column was checked to cover offset + length rows;
        // the batch (and its buffers) lives as long as `self`.
        unsafe {
            if let Some(h) = batch.headers {
                for j in h.range(i) {
                    let entry = h.entry(j).map_err(|_| format!("row {} has a null header or header key", self.starts[b] + r))?;
                    headers.push(entry);
                }
            }
            let timestamp = match batch.timestamp.and_then(|(v, mul, div)| v.get(i).map(|t| (t, mul, div))) {
                None => Ok(self.now_ms),
                Some((t, mul, div)) => match t.checked_mul(mul).map(|t| t.div_euclid(div)) {
                    Some(ms) if ms >= 0 => Ok(ms),
                    // send()'s words for the same refusal (Kafka has no timestamps before 1970).
                    Some(ms) => Err(format!("row {}: invalid timestamp_ms {ms}: it must be an integer in 0..2**63-1 (ms since the epoch)", self.starts[b] + r)),
                    None => Err(format!("row {}: timestamp {t} does not fit int64 milliseconds", self.starts[b] + r)),
                },
            };
            Ok(Row { key: batch.key.and_then(|k| k.get(i)), value: batch.value.get(i), partition: batch.partition.and_then(|p| p.get(i)), timestamp })
        }
    }

    /// Checks every row, then groups them by partition, chunk by chunk of `PLAN_CHUNK` rows:
    /// `(partition or -1 for the sticky partition, start, stop)` over `order`, in row order of
    /// the chunks, keyed groups in partition order then the keyless one within a chunk. So each
    /// partition's rows keep their order, and appending a group reads rows from one chunk's
    /// memory: grouping the whole data at once made each partition's pass touch every cache
    /// line of it (see `PLAN_CHUNK`; one partition: 40 ns a row). Nothing is appended, so an
    /// error queues nothing.
    pub(super) fn plan(&mut self, num_partitions: u32, max_record_size: usize, topic: &str) -> Result<Vec<(i64, usize, usize)>, ArrowError> {
        let n = num_partitions as usize;
        let mut buckets: Vec<Vec<u64>> = vec![Vec::new(); n + 1]; // n: keyless
        let mut order = Vec::with_capacity(self.total);
        let mut groups = Vec::new();
        let mut headers = Vec::new();
        for b in 0..self.batches.len() {
            let rows = self.batches[b].rows;
            for chunk in (0..rows).step_by(PLAN_CHUNK) {
                for r in chunk..rows.min(chunk + PLAN_CHUNK) {
                    let bucket = self.check_row(b, r, num_partitions, max_record_size, topic, &mut headers)?;
                    buckets[bucket as usize].push(((b as u64) << 32) | r as u64);
                }
                for (bucket, rows) in buckets.iter_mut().enumerate() {
                    if !rows.is_empty() {
                        groups.push((if bucket == n { -1 } else { bucket as i64 }, order.len(), order.len() + rows.len()));
                        order.append(rows);
                    }
                }
            }
        }
        self.order = order;
        Ok(groups)
    }

    /// Checks row `r` of batch `b` as `plan` does: its partition bucket (`num_partitions` for keyless).
    fn check_row<'a>(
        &'a self,
        b: usize,
        r: usize,
        num_partitions: u32,
        max_record_size: usize,
        topic: &str,
        headers: &mut Vec<(&'a [u8], Option<&'a [u8]>)>,
    ) -> Result<u32, ArrowError> {
        let row = self.row(b, r, headers).map_err(ArrowError::Row)?;
        let global = self.starts[b] + r;
        row.timestamp.clone().map_err(ArrowError::Row)?;
        let size = upper_bound(row.key, row.value, headers);
        if size > max_record_size {
            return Err(ArrowError::TooLarge(format!(
                "row {global} is {size} bytes when serialized, larger than the largest record allowed ({max_record_size}: max.request.size or buffer.memory)"
            )));
        }
        Ok(match (row.partition, row.key) {
            (Some(p), _) if p < 0 || p >= num_partitions as i64 => {
                return Err(ArrowError::Row(format!("row {global} has partition {p}; topic {topic:?} has partitions 0..{}", num_partitions as i64 - 1)))
            }
            (Some(p), _) => p as u32,
            (None, Some(key)) if !self.ignore_keys => partition_for_key(key, num_partitions),
            _ => num_partitions,
        })
    }

    /// Appends the rows at `order[start..stop]` while `append` takes them (returns >= 0):
    /// how many it took. Rows were checked by `plan`.
    pub(super) fn append_rows(
        &self,
        start: usize,
        stop: usize,
        mut append: impl FnMut(i64, Option<&[u8]>, Option<&[u8]>, &[(&[u8], Option<&[u8]>)]) -> i64,
    ) -> usize {
        let mut headers = Vec::new();
        for pos in start..stop {
            let packed = self.order[pos];
            let Ok(row) = self.row((packed >> 32) as usize, (packed & 0xffff_ffff) as usize, &mut headers) else {
                return pos - start; // unreachable: plan checked every row
            };
            if append(row.timestamp.unwrap_or(self.now_ms), row.key, row.value, &headers) < 0 {
                return pos - start;
            }
        }
        stop - start
    }

    /// Keys and values bytes of `order[start..stop]` (the sticky partitioner's count).
    pub(super) fn payload_bytes(&self, start: usize, stop: usize) -> usize {
        let mut headers = Vec::new();
        self.order[start..stop]
            .iter()
            .filter_map(|&p| self.row((p >> 32) as usize, (p & 0xffff_ffff) as usize, &mut headers).ok())
            .map(|row| row.key.map_or(0, <[u8]>::len) + row.value.map_or(0, <[u8]>::len))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_bound_matches_the_python_formula() {
        // A literal here; tests/unit/test_native_twins.py checks it against the Python twin itself.
        // 61 + 21 + key (1 + 3) + value (null: 1) + 1 header count + header (1 + 1, 1 + 2).
        assert_eq!(upper_bound(Some(b"abc"), None, &[(b"h", Some(b"vv"))]), 61 + 21 + 4 + 1 + 1 + 2 + 3);
    }
}
