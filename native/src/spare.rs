//! Spare record sections: the buffers of batches that are done, kept for the next batches to open.
//!
//! Java's `BufferPool` keeps a free list of `batch.size` buffers so that opening a batch is a pop,
//! not an allocation. Here each batch's section is a `Vec<u8>` reserved whole at its first record
//! (`Builder::first_reserve`), and glibc's `malloc` of a 16 KB block is not a pop: it is past the
//! thread cache and the fast bins, and walks the unsorted and large bins, which every other size
//! the process frees goes through. py-spy (the peers' worker, shared `on_delivery`, 2026-12-05)
//! put the section's allocation at 3 % of the event loop's samples at 10 KB records (a batch a
//! record) and 1.7 % at 1 KB. With the spares, 60 paired rounds of `per_batch_cpu.py`'s measure:
//! −0.82 µs a batch and its request on the loop's thread (standard error 0.35; 89 % of the
//! openings of a 40,000-record run served by a spare, the rest while the buffer first fills).
//!
//! Per thread, without locks: sections are opened and released on the event loop's thread, which
//! holds the GIL (a builder released on another thread keeps its spares there, bounded the same
//! way). At most [`SPARE_BYTES`] a thread: sixteen sections of `batch.size` 16 KB, one of 256 KB,
//! none larger (such a batch holds a hundred records or more: its allocation is a small part of
//! it). They are outside `buffer.memory`, whose reservations stay with the batches
//! (`MemoryBudget`): a producer holds at most that much more.

use std::cell::RefCell;

/// The most bytes of spare sections a thread keeps.
pub const SPARE_BYTES: usize = 256 * 1024;

#[derive(Default)]
struct Spares {
    sections: Vec<Vec<u8>>,
    bytes: usize,
}

thread_local! {
    static SPARES: RefCell<Spares> = RefCell::new(Spares::default());
}

/// An empty section with room for at least `capacity` bytes: the last spare if it has that room,
/// else a new one of exactly `capacity`.
pub fn take(capacity: usize) -> Vec<u8> {
    let reused = SPARES.try_with(|spares| {
        let mut spares = spares.borrow_mut();
        if spares.sections.last().is_some_and(|last| last.capacity() >= capacity) {
            let section = spares.sections.pop();
            if let Some(section) = &section {
                spares.bytes -= section.capacity();
            }
            section
        } else {
            None
        }
    });
    reused.ok().flatten().unwrap_or_else(|| Vec::with_capacity(capacity))
}

/// `section`'s buffer kept for a later [`take`] (emptied), or freed when the thread keeps enough.
pub fn give_back(mut section: Vec<u8>) {
    let capacity = section.capacity();
    if capacity == 0 {
        return;
    }
    // `try_with`: a builder released while its thread exits frees its section as before.
    let _ = SPARES.try_with(|spares| {
        let mut spares = spares.borrow_mut();
        if spares.bytes + capacity <= SPARE_BYTES {
            section.clear();
            spares.bytes += capacity;
            spares.sections.push(section);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept() -> (usize, usize) {
        SPARES.with(|spares| {
            let spares = spares.borrow();
            (spares.sections.len(), spares.bytes)
        })
    }

    #[test]
    fn a_section_given_back_is_taken_again_empty_and_the_bound_holds() {
        // Each test runs on a thread of its own: the spares start empty.
        let mut first = take(16_000);
        first.extend_from_slice(b"records");
        let at = first.as_ptr();
        give_back(first);
        assert_eq!(kept(), (1, 16_000));
        let again = take(16_000);
        assert_eq!((again.as_ptr(), again.len()), (at, 0), "the same buffer, emptied");
        assert_eq!(kept(), (0, 0));
        // A larger section than the spare's is not served by it: the spare stays.
        give_back(again);
        let larger = take(40_000);
        assert!(larger.capacity() >= 40_000);
        assert_eq!(kept(), (1, 16_000));
        // Never more than SPARE_BYTES kept: the sixteenth 16 KB section is the last.
        for _ in 0..40 {
            give_back(Vec::with_capacity(16_384));
        }
        let (count, bytes) = kept();
        assert!(bytes <= SPARE_BYTES && count == 1 + (SPARE_BYTES - 16_000) / 16_384, "{count} kept, {bytes} bytes");
        // An unallocated buffer is not kept.
        give_back(Vec::new());
        assert_eq!(kept(), (count, bytes));
    }
}
