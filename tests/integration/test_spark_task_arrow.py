"""A Spark task's write through ``send_arrow``, driven without Spark (``write_task`` on Arrow batches).

The Spark tests (``test_spark*.py``) run whole jobs; these drive the task code itself with the
rows the JVM would hand it, for what a job cannot easily make: rows the producer refuses counted
one by one under ``on_error="count"``, and null topics.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from aioproducer.spark import worker
from aioproducer.spark.columns import SinkColumns
from aioproducer.spark.task import TaskPlan, write_task
from aioproducer.testing import MockCluster

from readback import read_all_values

pytestmark = pytest.mark.integration


def _plan(mock: MockCluster, on_error: str) -> TaskPlan:
    columns = SinkColumns("Value", topic="Topic", partition="Partition")  # the DataFrame's own spelling
    return TaskPlan({"bootstrap.servers": mock.bootstrap_servers, "linger.ms": 5}, f"arrow-{on_error}", columns, None, on_error)


def _close_shared(plan: TaskPlan) -> None:
    """Close the worker's shared producer the task used (it outlives the task, as in a Spark worker)."""
    producer = worker.run(worker.shared_producer(plan.config_key, plan.config))
    worker.run(producer.close())


def _batch() -> pa.RecordBatch:
    return pa.record_batch({
        "Value": [b"a", b"b", b"c", b"d", b"e"],
        "Topic": ["orders", "orders", None, "orders", "orders"],
        "Partition": pa.array([0, 1, 0, 9, 0], pa.int32()),  # 9: orders has 6 partitions
    })


def test_count_counts_the_refused_rows_and_writes_the_others() -> None:
    with MockCluster(brokers=1, topics={"orders": 6}) as mock:
        plan = _plan(mock, "count")
        stats = worker.run(write_task(plan, iter([_batch()]), 0, 0))
        got = worker.run(read_all_values(mock.bootstrap_servers, "orders", range(6)))
        _close_shared(plan)
    assert (stats.records, stats.failed) == (3, 2)  # the null topic and partition 9
    assert got[0] == [b"a", b"e"] and got[1] == [b"b"]


def test_fail_fails_the_task_for_a_null_topic_after_delivering_what_it_queued() -> None:
    with MockCluster(brokers=1, topics={"orders": 6}) as mock:
        plan = _plan(mock, "fail")
        batch = _batch().slice(0, 3)  # a, b and the null topic: no bad partition
        with pytest.raises(ValueError, match="null 'topic'"):
            worker.run(write_task(plan, iter([batch]), 0, 0))
        got = worker.run(read_all_values(mock.bootstrap_servers, "orders", range(6)))
        _close_shared(plan)
    assert got[0] == [b"a"] and got[1] == [b"b"]  # the rows of known topics went before the null ones


def test_count_after_max_block_ms_counts_what_was_queued_once() -> None:
    """send_arrow failed while queuing: the rows it queued are counted by their delivery, the rest as failed,
    none sent again one by one (that would queue the queued ones twice)."""
    with MockCluster(brokers=1, topics={"orders": 6}) as mock:
        config = {"bootstrap.servers": mock.bootstrap_servers, "buffer.memory": 32768, "batch.size": 8192,
                  "max.block.ms": 300, "request.timeout.ms": 500, "delivery.timeout.ms": 600, "linger.ms": 0,
                  "retry.backoff.ms": 20, "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 50}
        plan = TaskPlan(config, "arrow-blocked", SinkColumns("value", partition="partition"), "orders", "count")
        producer = worker.run(worker.shared_producer(plan.config_key, plan.config))
        worker.run(producer.partitions_for("orders"))
        mock.broker_down(1)
        batch = pa.record_batch({"value": [b"x" * 1000] * 200, "partition": pa.array([0] * 200, pa.int32())})
        stats = worker.run(write_task(plan, iter([batch]), 0, 0))
        queued = producer.metrics()["records_failed"]  # every row the producer ever took failed
        _close_shared(plan)
    assert (stats.records, stats.failed) == (0, 200)
    # Only what buffer.memory held when max.block.ms ran out: 4 batches of at most 8 rows each.
    assert 0 < queued <= 32
