//! The producer's clock on Linux in one native call: `CLOCK_MONOTONIC` in milliseconds, the clock
//! asyncio's default event loop reads (`loop.time()` is `time.monotonic()`, which on Linux is
//! `clock_gettime(CLOCK_MONOTONIC)`).
//!
//! Why native: the clock is read about seven times per 10 KB record on the event loop's thread
//! (a batch opened, a request sent, an answer read, a frame written), and its Python form is two
//! Python calls each (`now_ms` and `BaseEventLoop.time`, 0.12 µs a read). `aioproducer/clock.py`
//! uses this one only for a loop whose `time` is `BaseEventLoop.time`; any other loop's clock
//! (uvloop, a virtual clock) is read through the loop, as before.

use pyo3::prelude::*;

use crate::guarded;

/// `time.monotonic() * 1000.0`, to the bit: the same nanoseconds, converted to seconds as CPython
/// does (`_PyTime_AsSecondsDouble`: an exact division when the count is whole seconds, else the
/// count as a double divided by 10^9), then multiplied by 1000.
#[pyfunction]
pub fn monotonic_ms() -> PyResult<f64> {
    guarded("monotonic_ms", read_monotonic_ms)
}

fn read_monotonic_ms() -> PyResult<f64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration; `clock_gettime` writes
    // nothing else and keeps no reference to it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    #[allow(clippy::useless_conversion)] // both fields are i32 on 32-bit Linux, i64 on 64-bit
    let ns = i64::from(ts.tv_sec) * 1_000_000_000 + i64::from(ts.tv_nsec);
    Ok(seconds(ns) * 1000.0)
}

/// CPython's `_PyTime_AsSecondsDouble` for a count of nanoseconds.
fn seconds(ns: i64) -> f64 {
    if ns % 1_000_000_000 == 0 {
        (ns / 1_000_000_000) as f64
    } else {
        ns as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::seconds;

    #[test]
    fn whole_and_fractional_seconds_convert_as_cpython_does() {
        assert_eq!(seconds(3_000_000_000), 3.0);
        assert_eq!(seconds(1_500_000_000), 1.5);
        assert_eq!(seconds(123_456_789_012), 123_456_789_012_f64 / 1e9);
    }
}
