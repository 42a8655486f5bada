//! The windowed statistic (Java's `SampledStat`, with `Avg`, `Max`, `Rate` as its kinds), native
//! because the sender records about twenty of them per Produce request (the request's batches'
//! sizes and queue times, its latency, its bytes per node): in Python each was 0.35-0.45 µs.
//! `aioproducer/stats.py` keeps the theory of operation and names the kinds (`Avg`, `Max`,
//! `Rate` are its subclasses of this type); the arithmetic, one implementation, is here.
//!
//! No clock and no I/O: every call takes `now_ms`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::guarded;

/// What a statistic reports of its live samples; Python names each by its number (`stats.py`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The values summed (a windowed sum): 0.
    Sum,
    /// Their mean (NaN with no value): 1.
    Avg,
    /// Their largest (NaN with no value): 2.
    Max,
    /// Their sum per unit of elapsed window (a second, or a nanosecond with `per_ns`): 3.
    Rate,
}

impl Kind {
    fn from_number(kind: u8) -> Option<Kind> {
        match kind {
            0 => Some(Kind::Sum),
            1 => Some(Kind::Avg),
            2 => Some(Kind::Max),
            3 => Some(Kind::Rate),
            _ => None,
        }
    }
}

#[derive(Clone, Copy)]
struct Sample {
    start_ms: f64,
    count: i64,
    value: f64,
}

/// A statistic kept in `num_samples` samples of `window_ms` each; see `aioproducer/stats.py`.
#[pyclass(module = "aioproducer._native", subclass)]
pub struct SampledStat {
    #[pyo3(get)]
    window_ms: i64,
    #[pyo3(get)]
    num_samples: usize,
    kind: Kind,
    /// How many ms one unit of a rate's time is (1000, or 1e-6 with `per_ns`).
    unit_ms: f64,
    samples: Vec<Sample>,
    current: usize,
}

/// Python's `float // float` for a positive divisor (floor division as CPython computes it).
fn floor_div(a: f64, b: f64) -> f64 {
    let m = a % b;
    let mut div = (a - m) / b;
    if m < 0.0 {
        div -= 1.0;
    }
    let floor = div.floor();
    if div - floor > 0.5 {
        floor + 1.0
    } else {
        floor
    }
}

impl SampledStat {
    fn initial(&self) -> f64 {
        if self.kind == Kind::Max {
            f64::NEG_INFINITY
        } else {
            0.0
        }
    }

    /// The sample a value recorded at `now_ms` goes into: the first, the current, or the next
    /// once the current is `window_ms` old (reused in turn, reset).
    fn advance(&mut self, now_ms: f64) -> usize {
        let window = self.window_ms as f64;
        let initial = self.initial();
        if self.samples.is_empty() {
            self.samples.push(Sample { start_ms: now_ms, count: 0, value: initial });
            return self.current;
        }
        if now_ms - self.samples[self.current].start_ms >= window {
            self.current = (self.current + 1) % self.num_samples;
            if self.current >= self.samples.len() {
                self.samples.push(Sample { start_ms: now_ms, count: 0, value: initial });
            } else {
                self.samples[self.current] = Sample { start_ms: now_ms, count: 0, value: initial };
            }
        }
        self.current
    }

    fn add(&mut self, value: f64, count: i64, now_ms: f64) {
        let at = self.advance(now_ms);
        let is_max = self.kind == Kind::Max;
        let sample = &mut self.samples[at];
        if is_max {
            if value > sample.value {
                sample.value = value;
            }
        } else {
            sample.value += value;
        }
        sample.count += count;
    }

    fn purge_at(&mut self, now_ms: f64) {
        let expire = self.num_samples as f64 * self.window_ms as f64;
        let initial = self.initial();
        for sample in &mut self.samples {
            if now_ms - sample.start_ms >= expire {
                *sample = Sample { start_ms: now_ms, count: 0, value: initial };
            }
        }
    }

    fn oldest(&self, now_ms: f64) -> f64 {
        self.samples.iter().map(|s| s.start_ms).reduce(f64::min).unwrap_or(now_ms)
    }

    fn window_size(&self, now_ms: f64) -> f64 {
        let window = self.window_ms as f64;
        let mut elapsed = now_ms - self.oldest(now_ms);
        let full = floor_div(elapsed, window);
        let minimum = (self.num_samples - 1) as f64;
        if full < minimum {
            elapsed += (minimum - full) * window;
        }
        elapsed.max(1.0)
    }
}

#[pymethods]
impl SampledStat {
    #[new]
    #[pyo3(signature = (window_ms, num_samples, kind = 0, per_ns = false))]
    fn new(window_ms: i64, num_samples: i64, kind: u8, per_ns: bool) -> PyResult<Self> {
        guarded("SampledStat.__new__", || {
            if window_ms <= 0 || num_samples < 1 {
                return Err(PyValueError::new_err("metrics.sample.window.ms must be positive and metrics.num.samples at least 1"));
            }
            let Some(kind) = Kind::from_number(kind) else {
                return Err(PyValueError::new_err(format!("kind must be 0 (sum), 1 (avg), 2 (max) or 3 (rate), not {kind}")));
            };
            let unit_ms = if per_ns { 1e-6 } else { 1000.0 };
            Ok(SampledStat { window_ms, num_samples: num_samples as usize, kind, unit_ms, samples: Vec::new(), current: 0 })
        })
    }

    /// Records `value` at `now_ms`.
    fn record(&mut self, value: f64, now_ms: f64) -> PyResult<()> {
        guarded("SampledStat.record", || {
            self.add(value, 1, now_ms);
            Ok(())
        })
    }

    /// Records `count` values at once: summing to `total` (sum, avg, rate), or `total` their
    /// largest (max); the same samples as `count` calls at `now_ms`.
    fn record_many(&mut self, total: f64, count: i64, now_ms: f64) -> PyResult<()> {
        guarded("SampledStat.record_many", || {
            self.add(total, count, now_ms);
            Ok(())
        })
    }

    /// Resets the samples that ended before the window of `num_samples` samples (obsolete).
    fn purge(&mut self, now_ms: f64) -> PyResult<()> {
        guarded("SampledStat.purge", || {
            self.purge_at(now_ms);
            Ok(())
        })
    }

    /// When the oldest sample started (`now_ms` if none has).
    fn oldest_start(&self, now_ms: f64) -> PyResult<f64> {
        guarded("SampledStat.oldest_start", || Ok(self.oldest(now_ms)))
    }

    /// The elapsed window: from the oldest sample, at least `num_samples - 1` full windows, never 0.
    fn window_size_ms(&self, now_ms: f64) -> PyResult<f64> {
        guarded("SampledStat.window_size_ms", || Ok(self.window_size(now_ms)))
    }

    /// The statistic at `now_ms`, the obsolete samples reset first.
    fn measure(&mut self, now_ms: f64) -> PyResult<f64> {
        guarded("SampledStat.measure", || {
            self.purge_at(now_ms);
            let count: i64 = self.samples.iter().map(|s| s.count).sum();
            let sum: f64 = self.samples.iter().map(|s| s.value).sum();
            Ok(match self.kind {
                Kind::Avg if count == 0 => f64::NAN,
                Kind::Avg => sum / count as f64,
                Kind::Max if count == 0 => f64::NAN,
                Kind::Max => self.samples.iter().map(|s| s.value).fold(f64::NEG_INFINITY, f64::max),
                Kind::Rate => sum / (self.window_size(now_ms) / self.unit_ms),
                Kind::Sum => sum,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::floor_div;

    #[test]
    fn floor_division_as_python() {
        assert_eq!(floor_div(2999.0, 1000.0), 2.0);
        assert_eq!(floor_div(3000.0, 1000.0), 3.0);
        assert_eq!(floor_div(0.5, 1000.0), 0.0);
        assert_eq!(floor_div(-1.0, 1000.0), -1.0);
    }
}
