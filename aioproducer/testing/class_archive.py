"""A class-data archive (AppCDS) for the test brokers' JVMs: made once by one broker, mapped by the rest.

Why: a test broker's JVM spends most of its start loading and verifying some 8,000 classes, and
the suite starts dozens of brokers and storage tools. Measured on the 2-core machine (Kafka 4,
OpenJDK 17, one node formatted, started with a 6-partition topic, closed; two runs each), the CPU
of the JVMs: 10.0 and 10.8 s plain, 7.5 and 7.8 s with C1 only (``-XX:TieredStopAtLevel=1``),
6.4 and 6.4 s with C1 and this archive; ready in 4.0-4.1 s against 5.3-5.8 s. The storage tool:
1.9 s of CPU plain, 1.2 s with C1, 0.8 s with both.

Java 17 has no ``-XX:+AutoCreateSharedArchive`` (JDK 19), so the archive is made the older way:
the first broker launched while no archive exists, and no other process is making one, runs with
``-XX:ArchiveClassesAtExit`` into a file of its own, and when it exits normally (SIGTERM runs the
JVM's exit, which writes the archive: about 4 s, once) the file is renamed into place. A broker
SIGKILLed meanwhile leaves nothing behind. Every later JVM on that classpath maps the archive
with ``-XX:SharedArchiveFile``; a JVM that finds it unusable (another Java build) says so in its
log and runs without it. The archive's name carries a digest of the ``java`` binary and of the
classpath's files (their sizes and times), so another JDK or another copy of the jars makes its own. One process at a time makes it: a marker
file, created exclusively, older than ``STALE_S`` taken as left by a process that died.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import time
from pathlib import Path

__all__ = ["ClassArchive", "STALE_S"]

#: A marker this old was left by a process that died while its JVM was to write the archive.
STALE_S = 600.0

_dumps = itertools.count()


class ClassArchive:
    """The archive of one ``java`` and one classpath, in ``directory``; one per :class:`KafkaCluster`."""

    def __init__(self, java: str, classpath: str, directory: Path) -> None:
        identity = hashlib.sha256(_stamp(Path(java).resolve()).encode())
        for entry in classpath.split(os.pathsep):
            # A JVM refuses an archive whose jars changed since (a new venv's copy of the same jars):
            # the name changes with them.
            files = sorted(Path(entry[:-1]).glob("*.jar")) if entry.endswith("*") else [Path(entry)]
            identity.update(f"\0{entry}".encode())
            for file in files:
                identity.update(f"\0{_stamp(file)}".encode())
        digest = identity.hexdigest()[:16]
        self.path = directory / f"classes-{digest}.jsa"
        self._marker = directory / f"classes-{digest}.making"

    def use(self) -> list[str]:
        """The options of a JVM that maps the archive if it is there (a storage tool's, or a broker's with a plugin)."""
        return [f"-XX:SharedArchiveFile={self.path}"] if self.path.is_file() else []

    def use_or_make(self) -> tuple[list[str], Path | None]:
        """The options of a broker launched now, and the file its JVM writes the archive to (None: it writes none)."""
        if self.path.is_file():
            return self.use(), None
        if not self._claim():
            return [], None
        dump = self.path.with_name(f"{self.path.stem}.{os.getpid()}.{next(_dumps)}.tmp")
        return [f"-XX:ArchiveClassesAtExit={dump}"], dump

    def made(self, dump: Path, returncode: int | None) -> None:
        """The JVM that was to write ``dump`` has ended with ``returncode``: a normal exit's archive goes into place.

        A JVM ended by a signal (a negative return code: SIGKILL) may have left a partial file, which is dropped.
        """
        try:
            if returncode is not None and returncode >= 0 and dump.is_file() and dump.stat().st_size > 0:
                os.replace(dump, self.path)
        finally:
            dump.unlink(missing_ok=True)
            self._marker.unlink(missing_ok=True)

    def _claim(self) -> bool:
        """Whether this process may make the archive now (no other is making it)."""
        for _ in range(2):
            try:
                os.close(os.open(self._marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                return True
            except FileExistsError:
                try:
                    if time.time() - self._marker.stat().st_mtime < STALE_S:
                        return False
                except FileNotFoundError:
                    continue  # its maker just finished: try again
                self._marker.unlink(missing_ok=True)
            except OSError:
                return False  # a read-only cache: run without an archive
        return False


def _stamp(path: Path) -> str:
    """``path`` with its size and modification time, or as missing."""
    try:
        stat = path.stat()
    except OSError:
        return f"{path} missing"
    return f"{path} {stat.st_size} {stat.st_mtime_ns}"
