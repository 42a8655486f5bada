"""What a test kit's server process needs, shared by the Kafka nodes (kafka.py) and the KDC (kdc.py).

The errors a start raises, a child process that dies with the thread that started it, and a free
port never handed out twice. Its own module so that kafka.py (which starts a KDC for a Kerberized
cluster) and kdc.py (a server process like a node) both import it and not each other.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import threading

__all__ = ["KafkaStartError", "KafkaUnavailableError", "die_with_parent", "free_port"]

_PR_SET_PDEATHSIG = 1


class KafkaUnavailableError(RuntimeError):
    """Something a real broker needs is not on this machine (Java, Maven, openssl, the jars)."""


class KafkaStartError(RuntimeError):
    """A node did not start, or the cluster did not form; the message ends with the node's log."""


def die_with_parent() -> None:
    """``preexec_fn``: the JVM gets SIGKILL when the thread that started it ends (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: close() and the atexit hook still stop the node


_HANDED_OUT: set[int] = set()  # every port free_port returned in this process; written only there
_HANDED_OUT_LOCK = threading.Lock()


def free_port() -> int:
    """A port free now that this process never handed out before.

    A node binds its ports seconds after they are picked, and a stopped node's kept ports
    are free again while it is down, so the kernel may offer one of them twice (two picks in
    a row, a pick during :meth:`KafkaCluster.restart_on_new_ports`): the second node to bind
    it would exit at start. Remembering every port handed out closes that within the process.
    """
    with _HANDED_OUT_LOCK:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port: int = s.getsockname()[1]
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port
