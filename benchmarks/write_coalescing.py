"""What one write of several Produce requests saves over a write each: the loop thread's CPU per request.

Why: the sender's pass writes a node up to ``max.in.flight`` requests one after another (five in
nearly every pass of the peers' worker, at 100 B, 1 KB and 10 KB records), and each write to a
socket pays the kernel's fixed cost of a send besides its copy. ``BrokerConnection`` holds the
frames of one loop callback and writes them together (``_write_frame``, ``_flush_held``). This
measures the system call alone, as the loop's thread pays it: requests of ``--size`` bytes in
``--chunks`` pieces written with ``os.writev`` to a TCP connection on the loopback that another
process drains, ``--together`` requests per call against one per call, the calling thread's CPU
time per request, best of ``--repeat`` rounds.

    python -m benchmarks.write_coalescing [--size 20600] [--requests 40000] [--together 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import time


def _drain(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while sock.recv(1 << 20):
            pass


def _cpu_per_request(fd: int, request: list[bytes], together: int, requests: int) -> float:
    """The calling thread's CPU µs per request, ``together`` requests per ``writev``."""
    chunks = request * together
    started = time.thread_time()
    for _ in range(requests // together):
        os.writev(fd, chunks)
    return (time.thread_time() - started) / (requests // together * together) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=20600, help="bytes per request (20,600: two 10 KB batches)")
    parser.add_argument("--chunks", type=int, default=4, help="pieces per request, as the encoder hands them")
    parser.add_argument("--requests", type=int, default=40000)
    parser.add_argument("--together", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    piece = max(1, args.size // args.chunks)
    request = [bytes(piece) for _ in range(args.chunks)]
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        reader = multiprocessing.Process(target=_drain, args=(listener.getsockname()[1],))
        reader.start()
        conn, _ = listener.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        best = {1: float("inf"), args.together: float("inf")}
        for _ in range(args.repeat):
            for together in best:
                best[together] = min(best[together], _cpu_per_request(conn.fileno(), request, together, args.requests))
    reader.join()
    alone, grouped = best[1], best[args.together]
    print(f"{args.size:,} B requests in {args.chunks} chunks, best of {args.repeat}: one per writev {alone:.2f} µs CPU "
          f"a request, {args.together} per writev {grouped:.2f} µs ({grouped / alone:.2f}x)")


if __name__ == "__main__":
    main()
