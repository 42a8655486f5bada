"""examples/spark_job.py as a process: a CSV file through Spark into Kafka, read back record by record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from aioproducer.testing import MockCluster
from readback import read_all_records

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_job.py"


async def test_the_spark_job_writes_every_csv_row_keyed_by_customer(mock_cluster: MockCluster, tmp_path: Path) -> None:
    rows = [(n, f"c{n % 4}", n * 1.5) for n in range(200)]
    csv = tmp_path / "orders.csv"
    csv.write_text("order_id,customer,amount\n" + "".join(f"{o},{c},{a}\n" for o, c, a in rows))
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--bootstrap-servers", mock_cluster.bootstrap_servers, "--csv", str(csv)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "200 records" in done.stdout and "failed 0" in done.stdout
    got = await read_all_records(mock_cluster.bootstrap_servers, "orders", range(6), timeout=30)
    records = [r for part in got.values() for r in part]
    assert sorted((r.key, json.loads(r.value or b"")["order_id"]) for r in records) == sorted(
        (c.encode(), o) for o, c, _ in rows
    )
    assert all(r.headers == [("source", b"orders.csv")] for r in records)
    for part in got.values():  # one customer, one partition, its orders in file order
        for customer in {r.key for r in part}:
            ids = [json.loads(r.value or b"")["order_id"] for r in part if r.key == customer]
            assert ids == sorted(ids)
    assert {json.loads(r.value or b"")["amount"] for r in records} == {a for _, _, a in rows}
