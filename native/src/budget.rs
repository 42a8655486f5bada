//! `buffer.memory`'s figures, native: what is free, what is owed, and whether anyone waits.
//!
//! The `BufferPool` (`aioproducer/internals/buffer_pool.py`) keeps its waiters, their futures and
//! `max.block.ms` in Python, and is the one writer of these figures: every change goes through
//! the methods below, called by the pool, or by the keyed lane's batch opening
//! (`RecordQueues.open_keyed`), which takes the pool's steps (`charge`, then `try_allocate`) in
//! place of calling them through Python.
//!
//! Why native: at 10 KB records each record opens a batch, and the lane called the pool's two
//! Python methods for it (about 1 µs of a record's loop time, 2026-12-04). The rules are the
//! pool's, unchanged; its module documentation says why they are what they are.

use pyo3::exceptions::{PyAssertionError, PyValueError};
use pyo3::prelude::*;

use crate::guarded;

/// `buffer.memory`'s figures; the invariants: `0 <= available <= total`, and `overdraft > 0`
/// only while `available == 0`.
#[pyclass(module = "aioproducer._native")]
pub struct MemoryBudget {
    total: i64,
    available: i64,
    overdraft: i64,
    waiting: bool,
}

impl MemoryBudget {
    /// `size` bytes reserved now, unless someone waits or they are not free (then nothing changes).
    pub(crate) fn reserve(&mut self, size: i64) -> bool {
        if self.waiting || size > self.available {
            return false;
        }
        self.available -= size;
        true
    }

    /// `size` bytes reserved now even past the budget: what is charged past it is owed.
    pub(crate) fn overdraw(&mut self, size: i64) {
        if size <= self.available {
            self.available -= size;
        } else {
            self.overdraft += size - self.available;
            self.available = 0;
        }
    }

    /// `size` bytes back, the overdraft repaid first; false (nothing changed) if that would
    /// free more than the budget holds.
    fn give_back(&mut self, size: i64) -> bool {
        let repaid = self.overdraft.min(size);
        let available = self.available + size - repaid;
        if available > self.total {
            return false;
        }
        self.overdraft -= repaid;
        self.available = available;
        true
    }
}

#[pymethods]
impl MemoryBudget {
    /// `MemoryBudget(total)`: `total` bytes, all free, nothing owed, nobody waiting.
    #[new]
    fn new(total: i64) -> PyResult<Self> {
        guarded("MemoryBudget.__new__", || {
            if total <= 0 {
                return Err(PyValueError::new_err("buffer.memory must be positive"));
            }
            Ok(MemoryBudget { total, available: total, overdraft: 0, waiting: false })
        })
    }

    /// Reserve `size` bytes without waiting; false (nothing reserved) when someone waits already
    /// or they are not free.
    fn try_allocate(&mut self, size: i64) -> PyResult<bool> {
        guarded("MemoryBudget.try_allocate", || Ok(self.reserve(size)))
    }

    /// Reserve `size` bytes for the waiter at the head of the line, which the pool saw fit.
    fn take(&mut self, size: i64) -> PyResult<()> {
        guarded("MemoryBudget.take", || {
            if size > self.available {
                return Err(PyAssertionError::new_err("buffer pool handed a waiter more memory than is free"));
            }
            self.available -= size;
            Ok(())
        })
    }

    /// Reserve `size` bytes now, even past the budget (`BufferPool.charge`).
    fn charge(&mut self, size: i64) -> PyResult<()> {
        guarded("MemoryBudget.charge", || {
            self.overdraw(size);
            Ok(())
        })
    }

    /// Return `size` bytes, the overdraft repaid first. A return of more than was handed out is
    /// a bookkeeping bug: `AssertionError`, with the figures unchanged.
    fn deallocate(&mut self, size: i64) -> PyResult<()> {
        guarded("MemoryBudget.deallocate", || {
            if self.give_back(size) {
                Ok(())
            } else {
                Err(PyAssertionError::new_err("buffer pool returned more memory than it handed out"))
            }
        })
    }

    /// Bytes no batch holds.
    #[getter]
    fn available(&self) -> PyResult<i64> {
        guarded("MemoryBudget.available", || Ok(self.available))
    }

    /// Bytes charged past the budget and not repaid yet.
    #[getter]
    fn overdraft(&self) -> PyResult<i64> {
        guarded("MemoryBudget.overdraft", || Ok(self.overdraft))
    }

    /// Whether an allocation waits in the pool's line (then every `try_allocate` is refused).
    #[getter]
    fn waiting(&self) -> PyResult<bool> {
        guarded("MemoryBudget.waiting", || Ok(self.waiting))
    }

    #[setter]
    fn set_waiting(&mut self, waiting: bool) -> PyResult<()> {
        guarded("MemoryBudget.waiting", || {
            self.waiting = waiting;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::MemoryBudget;

    fn budget(total: i64) -> MemoryBudget {
        MemoryBudget { total, available: total, overdraft: 0, waiting: false }
    }

    #[test]
    fn a_charge_past_the_budget_is_owed_and_repaid_before_anything_is_free() {
        let mut b = budget(100);
        assert!(b.reserve(60));
        b.overdraw(70);
        assert_eq!((b.available, b.overdraft), (0, 30));
        assert!(!b.reserve(1));
        assert!(b.give_back(40));
        assert_eq!((b.available, b.overdraft), (10, 0));
        assert!(!b.give_back(91)); // more than was handed out: refused, unchanged
        assert_eq!((b.available, b.overdraft), (10, 0));
    }

    #[test]
    fn nothing_is_reserved_past_a_waiter() {
        let mut b = budget(100);
        b.waiting = true;
        assert!(!b.reserve(1));
        assert_eq!(b.available, 100);
    }
}
