"""Compression off the event loop: how much of it a sender pass may do on the loop, and a thread for the rest.

Why. A Produce request's batches are compressed when it is written
(``ProducerBatch.records()``), on the event loop. gzip compresses about 20 MB/s:
one pass writing up to brokers x in-flight requests of 1 MB would hold the loop
for seconds, and every other coroutine of the application with it
(``benchmarks/loop_stall.py`` measures it). So each pass may compress a share on
the loop (``INLINE_COMPRESSION_BYTES``: a few milliseconds of the codec's work;
below it, compressing there is cheaper than a trip to a thread), and a request
that would take the pass past its share is compressed in a thread of its own
(the codecs release the GIL), from read-only views of its sections (no copy). Its node takes no
other request meanwhile, so nothing overtakes it.

The thread sees bytes only, never a batch: the results are installed into the
batches' builders back on the loop, by :meth:`CompressionOffload.compress`.
Written by the sender's pass alone (``new_pass``, ``take``, ``compress``); read
by it (``spent``, ``compressing``).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from aioproducer.internals.batch import ProducerBatch
from aioproducer.protocol import compression

__all__ = ["INLINE_COMPRESSION_BYTES", "CompressionOffload", "CompressionJobs"]

#: Uncompressed bytes one pass compresses on the event loop; requests past it are compressed in a
#: thread. About 3 ms of work at what each codec did on a busy 2-core machine (gzip ~20 MB/s,
#: zstd ~150 MB/s, lz4 and snappy ~400 MB/s; see ``benchmarks/loop_stall.py``).
INLINE_COMPRESSION_BYTES: dict[int, int] = {
    compression.GZIP: 64 * 1024,
    compression.ZSTD: 384 * 1024,
    compression.LZ4: 1024 * 1024,
    compression.SNAPPY: 1024 * 1024,
}

#: A request's sections to compress in the thread: (batch, a read-only view of its uncompressed section;
#: the builder refuses appends while the view lives, and keeps the bytes until it is released).
CompressionJobs = list[tuple[ProducerBatch, memoryview]]


class CompressionOffload:
    """A pass's share of compression on the loop, and the thread that compresses the requests past it."""

    def __init__(self, compression_type: int, inline_bytes: float | None = None) -> None:
        #: What a pass may compress on the loop (inf: the producer does not compress). ``inline_bytes``
        #: overrides the codec's share (tests: a share that fits exactly one request).
        self.budget: float = float(
            INLINE_COMPRESSION_BYTES.get(compression_type, float("inf")) if inline_bytes is None else inline_bytes
        )
        #: What this pass may still compress on the loop. Written by ``new_pass`` and ``take``.
        self.left: float = self.budget
        #: Nodes whose next request is being compressed in the thread: nothing else goes to them meanwhile.
        #: Written by ``take`` (added) and ``compress`` (removed); read by the sender.
        self.compressing: set[int] = set()
        self._executor: ThreadPoolExecutor | None = None

    @property
    def active(self) -> bool:
        """Whether the producer compresses at all (else no request is ever weighed)."""
        return self.budget != float("inf")

    @property
    def spent(self) -> bool:
        """Whether this pass used its share: it writes no more requests, and runs again after a loop turn."""
        return self.left <= 0

    def new_pass(self) -> None:
        self.left = self.budget

    def take(self, node: int, batches: list[ProducerBatch]) -> CompressionJobs | None:
        """None: compress the request on the loop, charged to the pass's share; else its jobs for the thread.

        Past the share, the pass is over (``spent``) and ``node`` is busy until
        :meth:`compress` of these jobs ends.
        """
        pending = 0
        for batch in batches:
            pending += batch.builder.bytes_to_compress
        if pending <= self.left:
            self.left -= pending
            return None
        self.left = 0.0  # the pass is over its share: it writes no more requests (see Sender.run_once)
        self.compressing.add(node)
        return [(batch, section) for batch in batches if (section := batch.builder.section_to_compress()) is not None]

    async def compress(self, node: int, jobs: CompressionJobs) -> None:
        """Compress the sections in the thread, then install the results into live batches here.

        Raises what the codec raised (the request then fails as one that could not be
        encoded); ``node`` takes requests again either way.
        """
        work = [(b.builder.compression_type, b.builder.compression_level, section) for b, section in jobs]
        try:
            compressed = await asyncio.get_running_loop().run_in_executor(self._thread(), _compress_all, work)
        finally:
            self.compressing.discard(node)
        for (batch, section), data in zip(jobs, compressed):
            if not batch.is_done:
                batch.builder.install_compressed(section, data)
            section.release()  # the builder may drop its section bytes now

    def _thread(self) -> ThreadPoolExecutor:
        """One thread, made on first use: compression releases the GIL, so it runs beside the loop."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aioproducer-compress")
        return self._executor

    def shutdown(self) -> None:
        """The sender ended: drop what is queued for the thread (its requests were cancelled)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


def _compress_all(work: list[tuple[int, int | None, memoryview]]) -> list[bytes]:
    """In the compression thread: (codec, level, section) -> compressed section. Touches nothing shared."""
    return [compression.compress(codec, section, level) for codec, level, section in work]
