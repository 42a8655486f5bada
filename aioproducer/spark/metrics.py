"""A streaming query's sink statistics, one JSON file per micro-batch (``option("metrics.path", dir)``).

PySpark gives a Python data source no way into ``StreamingQuery.lastProgress``: the sink's
metrics there stay empty. So the driver's ``commit`` of each micro-batch writes what the tasks
reported (records, bytes, failed records, per task) to ``<dir>/<batchId>.json``, and
:func:`sink_metrics` reads them back. The driver's commit is the file's only writer; it writes a
temporary file and renames it, so a reader never sees half a file. A micro-batch run again after a
restart writes its file again (a transactional re-run reports its tasks as skipped).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from aioproducer.spark.stats import TaskStats, WriteStats

__all__ = ["write_metrics", "sink_metrics"]

_SUFFIX = ".json"


def write_metrics(directory: str, stats: WriteStats) -> None:
    """Write one micro-batch's statistics to ``directory/<batch_id>.json`` (made if missing), atomically."""
    if stats.batch_id is None:
        raise ValueError("write_metrics: the statistics of a micro-batch need its batch_id")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    document = {"batch_id": stats.batch_id, "seconds": stats.seconds, "tasks": [asdict(t) for t in stats.tasks]}
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".batch-", suffix=".tmp")
    with os.fdopen(fd, "w") as out:
        json.dump(document, out)
    os.replace(temporary, folder / f"{stats.batch_id}{_SUFFIX}")


def sink_metrics(directory: str | os.PathLike[str]) -> list[WriteStats]:
    """The statistics of every micro-batch written under ``directory``, by batch id.

    Each :class:`~aioproducer.spark.WriteStats` has the micro-batch's ``batch_id``, its tasks
    and their totals (``records``, ``bytes``, ``failed``, ``skipped_tasks``); ``seconds`` is its
    longest task's time. A directory that does not exist yet (no micro-batch committed) gives ``[]``.
    """
    folder = Path(directory)
    if not folder.exists():
        return []
    if not folder.is_dir():
        raise NotADirectoryError(f"sink_metrics: {str(folder)!r} is not a directory (the query's metrics.path)")
    batches = []
    for path in folder.iterdir():
        if path.suffix != _SUFFIX or not path.stem.isdigit():
            continue
        document = json.loads(path.read_text())
        tasks = [TaskStats(**task) for task in document["tasks"]]
        batches.append(WriteStats.of(tasks, float(document["seconds"]), int(document["batch_id"])))
    return sorted(batches, key=lambda b: b.batch_id or 0)
