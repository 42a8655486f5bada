"""Plant known bugs in the idempotence code, the sticky partitioner and the native per-batch path, and check that the tests catch each one.

A test suite that passes with the sequence bookkeeping broken proves nothing
about it. Each mutation below is a small source edit that reintroduces a bug
that loses or duplicates records (the first five are the ones a review planted
and the suite once missed). For each, the package and tests are copied to a
temporary directory, the edit applied there, and the idempotence tests run
against the copy: the mutation is *caught* when at least one test fails.

A mutation of the native crate (``native/src/``) is built into the copy's extension module with
``cargo build`` (the dev profile, in the crate's own target directory, so only the crate itself
is compiled again, incrementally, at one fixed path: ``MUTANT_CRATE``).

Run: ``python tests/mutation_check.py`` (exit status 1 if a mutation survives).
``tests/unit/test_mutations.py`` runs it in the suite.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TM = "aioproducer/internals/transaction_manager.py"
ACC = "aioproducer/internals/accumulator.py"
SENDER = "aioproducer/internals/sender.py"
TXN = "aioproducer/internals/transactions.py"
BATCH = "aioproducer/internals/batch.py"
PARTITIONER = "aioproducer/partitioner.py"
BATCH_RS = "native/src/batch.rs"
QUEUES_RS = "native/src/queues.rs"
BUDGET_RS = "native/src/budget.rs"
BUILDER_RS = "native/src/batch_builder.rs"
COMPLETE_RS = "native/src/complete.rs"
SPARE_RS = "native/src/spare.rs"
COUNTERS_RS = "native/src/counters.rs"
ANSWER_RS = "native/src/produce/answer.rs"
CONNECTION_STATE = "aioproducer/protocol/connection_state.py"
#: The native completion's bugs show there first; each of its mutants costs about 18-20 s on the
#: shared machine under a load of 7-10 (the crate's build most of it), 5 s for a Python one.
COMPLETION_TESTS = "tests/unit/test_completion.py"
TESTS = ["tests/unit/test_idempotence.py", "tests/unit/test_transaction_manager.py", "tests/unit/test_accumulator.py"]
#: What a native mutant runs after the test that caught it last: the Python side's files and the
#: two that play the broker batch by batch.
NATIVE_TESTS = [*TESTS, "tests/unit/test_sender.py", COMPLETION_TESTS]


#: A mutant's run loads only the plugins its tests use: hypothesis's plugin (which imports
#: hypothesis whole), anyio's (which imports trio), xdist and platformdirs cost a run 2 s of its
#: 3.5 (3.1-4.0 s against 1.3-1.7 s for one test, three pairs at a load of 3), 31 times a suite.
QUIET_PLUGINS = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio", "-p", "no:xdist",
                 "-p", "no:xdist.looponfail", "-p", "no:platformdirs"]


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str


MUTATIONS = [
    Mutation(
        "no epoch bump on OUT_OF_ORDER_SEQUENCE_NUMBER",
        TM,
        "            if unresolved is None or unresolved == batch.base_sequence:\n"
        "                self.request_epoch_bump(batch.topic, batch.partition)\n",
        "",
    ),
    Mutation("on_split dropped", ACC, "            self.transaction_manager.on_split(batch, pieces)\n", "            pass\n"),
    Mutation(
        "no bump when a failed batch leaves a sequence gap",
        TM,
        "        if error_code == OUT_OF_ORDER_SEQUENCE_NUMBER or not (outcome_unknown or batch.attempts > 0):\n"
        "            self.request_epoch_bump(batch.topic, batch.partition)\n",
        "        if error_code == OUT_OF_ORDER_SEQUENCE_NUMBER or not (outcome_unknown or batch.attempts > 0):\n",
    ),
    Mutation(
        "UNKNOWN_PRODUCER_ID not retriable",
        TM,
        "                self.request_epoch_bump(batch.topic, batch.partition)\n            return True\n"
        "        if error_code == OUT_OF_ORDER_SEQUENCE_NUMBER:",
        "                self.request_epoch_bump(batch.topic, batch.partition)\n            return False\n"
        "        if error_code == OUT_OF_ORDER_SEQUENCE_NUMBER:",
    ),
    Mutation(
        "off-by-one in sequence wrap-around",
        TM,
        "        return by - (MAX_SEQUENCE - sequence) - 1\n",
        "        return by - (MAX_SEQUENCE - sequence)\n",
    ),
    Mutation(
        "sequence rolled back after a failed batch",
        TM,
        "        after = increment_sequence(batch.base_sequence, batch.record_count)\n",
        "        entry.next_sequence = batch.base_sequence\n        return\n"
        "        after = increment_sequence(batch.base_sequence, batch.record_count)\n",
    ),
    Mutation(
        "an epoch bump renumbers every partition",
        TM,
        "        for key in self._to_rewrite:\n            entry = self._partitions.get(key)\n"
        "            if entry is not None:\n                entry.start_at_beginning(producer_id, producer_epoch)\n",
        "        for entry in self._partitions.values():\n                entry.start_at_beginning(producer_id, producer_epoch)\n",
    ),
    Mutation(
        "unresolved partitions never bumped",
        TM,
        "                self.request_epoch_bump(*key)  # the broker's log may end anywhere in the failed range\n",
        "                pass\n",
    ),
    Mutation("bump waits for every request", SENDER, "tm.ready_to_bump()", "not self._has_requests()"),
    Mutation(
        "split pieces stay open for appends",
        ACC,
        "        for piece in pieces:\n            # Closed for appends",
        "        for piece in []:\n            # Closed for appends",
    ),
    Mutation(
        "a failing InitProducerId asks the same broker forever",
        TXN,
        "        node = ready[attempt % len(ready)] if attempt == 0 else nodes[attempt % len(nodes)]\n",
        "        node = ready[0]\n",
    ),
    Mutation(
        "an expired queued batch unmutes its partition",
        SENDER,
        "        if batch.in_flight:\n            # Only the batch whose request muted",
        "        if True:\n            # Only the batch whose request muted",
    ),
    Mutation(
        "a renumbered batch is not marked reset",
        BATCH_RS,
        "            self.base_sequence = base_sequence;\n            self.sequence_reset = true;\n",
        "            self.base_sequence = base_sequence;\n",
    ),
    Mutation(
        "a reenqueued batch stays in flight",
        BATCH_RS,
        "            self.retry_backoff_ms = retry_backoff_ms;\n            self.in_flight = false;\n",
        "            self.retry_backoff_ms = retry_backoff_ms;\n",
    ),
    Mutation(
        "a batch completed twice",
        BATCH_RS,
        "        if self.done {\n            return false;\n        }\n        self.done = true;",
        "        self.done = true;",
    ),
    Mutation(
        "a delivery deadline off by one unit",
        BATCH_RS,
        "Ok(now_ms >= self.delivery_deadline_ms)",
        "Ok(now_ms > self.delivery_deadline_ms)",
    ),
    Mutation(
        "a split piece gets a deadline of its own",
        BATCH_RS,
        "            self.delivery_deadline_ms = parent.delivery_deadline_ms;\n",
        "",
    ),
    Mutation(
        "a retry's backoff is not kept",
        BATCH_RS,
        "            self.attempts += 1;\n            self.last_attempt_ms = now;\n            self.retry_backoff_ms = retry_backoff_ms;\n",
        "            self.attempts += 1;\n            self.last_attempt_ms = now;\n",
    ),
    Mutation(
        "a retried batch reordered in its deque (after a higher sequence)",
        QUEUES_RS,
        "b.base_sequence != crate::batch::NO_SEQUENCE && b.base_sequence < sequence",
        "b.base_sequence != crate::batch::NO_SEQUENCE && b.base_sequence > sequence",
    ),
    Mutation(
        "a batch sent in place whose kept CRC covers only its last stride",
        BUILDER_RS,
        "self.crc = crc32c::crc32c_append(self.crc, &buf[self.crc_len..]);",
        "self.crc = crc32c::crc32c(&buf[self.crc_len..]);",
    ),
    Mutation(
        "a batch sent in place loses its records when its request's view is released",
        BUILDER_RS,
        "if matches!(slf.closed, Some(Closed::Compressed(_) | Closed::InBuilt | Closed::Released)) {",
        "if slf.closed.is_some() {",
    ),
    Mutation(
        "a spare section handed to a new batch with the records of the batch before",
        SPARE_RS,
        "            section.clear();\n",
        "",
    ),
    Mutation(
        "a split that loses the first record of each piece",
        BUILDER_RS,
        "                    piece.core.append(ts, key, value, &headers);\n",
        "",
    ),
    Mutation(
        "a drain that takes a partition's batches for a node that does not lead it",
        QUEUES_RS,
        ".filter(|&i| self.parts[i].leader == node)",
        ".filter(|&i| self.parts[i].leader >= 0)",
    ),
    Mutation(
        "a ready() that ignores the retry backoff",
        QUEUES_RS,
        "    let backoff = backing_off(batch, now);\n",
        "    let backoff = false;\n",
    ),
    Mutation(
        "the keyed lane opens a batch without taking its memory",
        QUEUES_RS,
        "            if !budget.reserve(reserved) {\n",
        "            if reserved < 0 {\n",
    ),
    Mutation(
        "the keyed lane takes a record whose partition was given (it lands in its key's partition)",
        QUEUES_RS,
        "            if !(headers.is_none() && partition.is_none() && timestamp_ms.is_none()) {\n",
        "            if !(headers.is_none() && timestamp_ms.is_none()) {\n",
    ),
    Mutation(
        "buffer memory handed out past a waiter in line",
        BUDGET_RS,
        "        if self.waiting || size > self.available {\n",
        "        if size > self.available {\n",
    ),
    Mutation(
        "the keyed lane opens batches for a producer that no longer accepts records",
        QUEUES_RS,
        '        if !lane.lifecycle.bind(py).getattr(intern!(py, "accepting"))?.is_truthy()? {\n',
        "        if lane.lifecycle.bind(py).is_none() {\n",
    ),
    Mutation(
        "the keyed lane's new batch not tracked as incomplete (flush() would not wait for it)",
        QUEUES_RS,
        "        incomplete.bind(py).add(batch)?;\n",
        "",
    ),
    Mutation(
        "a pass's further request taken from a node none of whose first batches may go",
        QUEUES_RS,
        "                if sendable {\n                    return Ok(match",
        "                if sendable || !part.batches.is_empty() {\n                    return Ok(match",
    ),
    Mutation(
        "a pass's further requests forget the linger of the batches they leave",
        QUEUES_RS,
        "                delay = delay.min(left.max(0.0));\n",
        "",
    ),
    Mutation(
        "an answer matched to a batch of another topic (an error returned for the wrong partition)",
        COMPLETE_RS,
        "        Topic::Text(text) => Ok(own.cast::<PyString>().is_ok_and(|s| s.to_str().is_ok_and(|s| s == *text))),",
        "        Topic::Text(_) => Ok(true),",
    ),
    Mutation(
        "an on_delivery row's value size reported as its key size",
        COMPLETE_RS,
        "value_size.get(py, row.value_size)?",
        "value_size.get(py, row.key_size)?",
    ),
    Mutation(
        "an on_delivery row's timestamp kept from the row before (a number's int reused though it changed)",
        COMPLETE_RS,
        "            Some((last, made)) if *last == n => Ok(made.clone()),\n",
        "            Some((_, made)) => Ok(made.clone()),\n",
    ),
    Mutation(
        "an on_delivery row's offset reported one past its record's",
        COMPLETE_RS,
        "base_offset + row.relative_offset",
        "base_offset + row.relative_offset + 1",
    ),
    Mutation(
        "a Produce request taken on the hot path with every in-flight slot held (max.in.flight passed: order lost)",
        CONNECTION_STATE,
        "if self._state is not ConnectionState.READY or held >= self.max_in_flight or not acks:",
        "if self._state is not ConnectionState.READY or not acks:",
    ),
    Mutation(
        "a read's answer taken for the request in flight without its correlation id checked (the stream out of step)",
        ANSWER_RS,
        "if frame[..4] != correlation_id.to_be_bytes() || supported(version).is_none() {",
        "if supported(version).is_none() {",
    ),
    Mutation(
        "the answers of a read stop completing at the first whose completion fails (the rest never complete)",
        QUEUES_RS,
        "Err(error) => errors.append(error.into_value(py))?,",
        "Err(error) => return Err(error),",
    ),
    Mutation(
        "an error answer read from the response's bytes as a success (the batch completed, its records lost)",
        COMPLETE_RS,
        "            code: i64::from(p.error_code),\n",
        "            code: 0,\n",
    ),
    Mutation(
        "a written batch's records not counted",
        COMPLETE_RS,
        "        records += count;\n",
        "",
    ),
    Mutation(
        "a written batch's memory not freed",
        COMPLETE_RS,
        "        freed += reserved;\n",
        "",
    ),
    Mutation(
        "an on_delivery that reads the metrics mid-response loses the rest of the response's counts",
        COMPLETE_RS,
        "            due |= c.at(now);\n",
        "",
    ),
    Mutation(
        "a value fold_ms late folded at its generation's first time",
        COUNTERS_RS,
        "        } else if now_ms - open.since_ms >= self.fold_ms {",
        "        } else if now_ms < open.since_ms {",
    ),
    Mutation(
        "a KIP-467 record error given to the next record",
        SENDER,
        "        by_index[batch_index] = error_class(",
        "        by_index[batch_index + 1] = error_class(",
    ),
    Mutation(
        "sticky byte count without the per-record overhead",
        PARTITIONER,
        "        appended = payload_bytes + records * RECORD_OVERHEAD_ESTIMATE\n",
        "        appended = payload_bytes\n",
    ),
    Mutation(
        "sticky byte count leaves the key out",
        ACC,
        "            sticky, (len(key) if key is not None else 0) + (len(value) if value is not None else 0), 1,",
        "            sticky, (len(value) if value is not None else 0), 1,",
    ),
    Mutation(
        "a send_many run counts the overhead once",
        ACC,
        "sum(map(len, values[start:stop])), stop - start,",
        "sum(map(len, values[start:stop])), 1,",
    ),
    Mutation(
        "the sticky partition peeked before a wait for memory, kept after it",
        ACC,
        "        size = self._reservation_size(key, value, headers)\n        await self._wait_for_memory(size, max_block_ms)\n",
        "        if partition < 0:\n"
        "            partition = self.topic_info(topic).partitioner.peek_current_partition(partitions).partition\n"
        "        size = self._reservation_size(key, value, headers)\n        await self._wait_for_memory(size, max_block_ms)\n",
    ),
    Mutation(
        "no sticky count or switch after a wait for memory",
        ACC,
        "        partitioner.count_appended(\n            sticky,",
        "        if reserved:\n            return future\n        partitioner.count_appended(\n            sticky,",
    ),
]


#: The test that caught each mutation when it was last run (``python tests/mutation_check.py``), run
#: before the rest: the run stops at the first failure (``-x``), so a mutant costs its build and one
#: test, not the files before the catching test (a native mutant took 26-90 s at a load of 10-20,
#: most of it tests that pass). If it no longer fails, the rest of the files still run.
CAUGHT_BY = {
    'no epoch bump on OUT_OF_ORDER_SEQUENCE_NUMBER': 'tests/unit/test_transaction_manager.py::test_the_bump_waits_until_the_partitions_batches_are_out_of_requests',
    'on_split dropped': 'tests/unit/test_idempotence.py::test_pieces_of_a_split_batch_take_no_new_records_and_keep_memory_counted',
    'no bump when a failed batch leaves a sequence gap': 'tests/unit/test_transaction_manager.py::test_a_definitive_failure_asks_for_a_bump_and_never_rolls_the_sequence_back',
    'UNKNOWN_PRODUCER_ID not retriable': 'tests/unit/test_transaction_manager.py::test_unknown_producer_id_bumps_unless_the_log_start_is_unknown_or_already_reset',
    'off-by-one in sequence wrap-around': 'tests/unit/test_idempotence.py::test_sequences_wrap_to_zero_after_int32_max',
    'sequence rolled back after a failed batch': 'tests/unit/test_transaction_manager.py::test_an_unknown_outcome_blocks_new_batches_until_a_later_ack_resolves_it',
    'an epoch bump renumbers every partition': 'tests/unit/test_transaction_manager.py::test_an_unknown_outcome_with_nothing_after_it_bumps_only_that_partition',
    'unresolved partitions never bumped': 'tests/unit/test_transaction_manager.py::test_an_unknown_outcome_with_nothing_after_it_bumps_only_that_partition',
    'bump waits for every request': 'tests/unit/test_idempotence.py::test_an_epoch_bump_does_not_wait_for_other_partitions_requests',
    'split pieces stay open for appends': 'tests/unit/test_idempotence.py::test_pieces_of_a_split_batch_take_no_new_records_and_keep_memory_counted',
    'a failing InitProducerId asks the same broker forever': 'tests/unit/test_idempotence.py::test_records_expire_on_time_while_init_producer_id_keeps_failing_and_each_broker_is_asked',
    'an expired queued batch unmutes its partition': 'tests/unit/test_idempotence.py::test_an_expiring_queued_batch_does_not_let_a_later_one_overtake_the_one_in_flight',
    'a renumbered batch is not marked reset': 'tests/unit/test_transaction_manager.py::test_the_bump_waits_until_the_partitions_batches_are_out_of_requests',
    'a reenqueued batch stays in flight': 'tests/unit/test_idempotence.py::test_an_epoch_bump_for_one_partition_never_renumbers_another_partitions_retry',
    'a batch completed twice': 'tests/unit/test_sender.py::test_a_batch_that_expires_in_flight_is_completed_once_whatever_the_late_answer_says',
    'a delivery deadline off by one unit': 'tests/unit/test_sender.py::test_a_batch_that_expires_in_flight_is_completed_once_whatever_the_late_answer_says',
    'a split piece gets a deadline of its own': 'tests/unit/test_accumulator.py::test_a_batch_carries_its_delivery_deadline_and_a_split_piece_keeps_its_parents',
    "a retry's backoff is not kept": 'tests/unit/test_idempotence.py::test_a_batch_written_but_unanswered_that_expires_never_lends_its_sequence_to_the_next',
    'a retried batch reordered in its deque (after a higher sequence)': 'tests/unit/test_accumulator.py::test_idempotent_drain_assigns_sequences_and_retries_in_order',
    'a batch sent in place whose kept CRC covers only its last stride': 'tests/unit/test_accumulator.py::test_a_batch_sent_in_place_is_the_built_batch_byte_for_byte_and_its_crc_holds_for_every_state',
    "a batch sent in place loses its records when its request's view is released": 'tests/unit/test_accumulator.py::test_a_batch_sent_in_place_is_the_built_batch_byte_for_byte_and_its_crc_holds_for_every_state',
    'a spare section handed to a new batch with the records of the batch before': 'tests/unit/test_accumulator.py::test_a_split_batch_answers_for_futures_it_does_not_hold[None]',
    'a split that loses the first record of each piece': 'tests/unit/test_accumulator.py::test_split_moves_futures_to_the_new_batches',
    "a drain that takes a partition's batches for a node that does not lead it": 'tests/unit/test_accumulator.py::test_an_awaited_batch_goes_before_its_linger_only_to_an_idle_leader',
    'a ready() that ignores the retry backoff': 'tests/unit/test_accumulator.py::test_an_awaited_batch_goes_before_its_linger_only_to_an_idle_leader',
    "the keyed lane opens a batch without taking its memory": 'tests/unit/test_accumulator.py::test_the_keyed_lane_opens_the_next_batch_as_the_door_does_and_leaves_the_rest_to_the_door',
    "the keyed lane takes a record whose partition was given (it lands in its key's partition)": 'tests/unit/test_accumulator.py::test_the_keyed_lane_refuses_any_argument_the_door_must_see[partition:int]',
    "buffer memory handed out past a waiter in line": 'tests/unit/test_buffer_pool.py::test_a_head_that_gives_up_lets_the_smaller_waiters_behind_it_in',
    "the keyed lane opens batches for a producer that no longer accepts records": 'tests/unit/test_accumulator.py::test_the_keyed_lane_opens_the_next_batch_as_the_door_does_and_leaves_the_rest_to_the_door',
    "the keyed lane's new batch not tracked as incomplete (flush() would not wait for it)": 'tests/unit/test_accumulator.py::test_the_keyed_lane_opens_the_next_batch_as_the_door_does_and_leaves_the_rest_to_the_door',
    "a pass's further request taken from a node none of whose first batches may go": 'tests/unit/test_sender.py::test_a_pass_sends_a_node_more_while_one_of_its_first_batches_may_go_then_waits_their_linger',
    "a pass's further requests forget the linger of the batches they leave": 'tests/unit/test_sender.py::test_a_pass_sends_a_node_more_while_one_of_its_first_batches_may_go_then_waits_their_linger',
    'an answer matched to a batch of another topic (an error returned for the wrong partition)': 'tests/unit/test_completion.py::test_an_answer_for_the_wrong_topic_or_partition_completes_nothing',
    "an on_delivery row's value size reported as its key size": 'tests/unit/test_sender.py::test_on_delivery_gets_each_record_s_own_metadata_from_the_native_completion',
    "an on_delivery row's timestamp kept from the row before (a number's int reused though it changed)": 'tests/unit/test_completion.py::test_written_batches_complete_natively_the_others_come_back_and_the_counters_add_up',
    "an on_delivery row's offset reported one past its record's": 'tests/unit/test_sender.py::test_on_delivery_gets_each_record_s_own_metadata_from_the_native_completion',
    "a Produce request taken on the hot path with every in-flight slot held (max.in.flight passed: order lost)": 'tests/unit/test_connection_state.py::test_try_send_produce_takes_nothing_when_the_connection_cannot_take_the_request_now',
    "a read's answer taken for the request in flight without its correlation id checked (the stream out of step)": 'tests/unit/test_connection_state.py::test_an_answer_out_of_order_fails_the_head_and_breaks_the_connection',
    "the answers of a read stop completing at the first whose completion fails (the rest never complete)": 'tests/unit/test_completion.py::test_the_answers_of_a_read_complete_in_one_call_and_a_bug_in_one_leaves_the_next_completed',
    "an error answer read from the response's bytes as a success (the batch completed, its records lost)": 'tests/unit/test_completion.py::test_written_batches_complete_natively_the_others_come_back_and_the_counters_add_up',
    "a written batch's records not counted": 'tests/unit/test_completion.py::test_written_batches_complete_natively_the_others_come_back_and_the_counters_add_up',
    "a written batch's memory not freed": 'tests/unit/test_completion.py::test_written_batches_complete_natively_the_others_come_back_and_the_counters_add_up',
    "an on_delivery that reads the metrics mid-response loses the rest of the response's counts": 'tests/unit/test_completion.py::test_an_on_delivery_that_reads_the_metrics_in_the_middle_of_a_response_sees_them_and_loses_nothing',
    "a value fold_ms late folded at its generation's first time": 'tests/unit/test_metrics_stats.py::test_counters_close_a_generation_at_the_first_value_fold_ms_after_its_first',
    'a KIP-467 record error given to the next record': 'tests/unit/test_sender.py::test_record_errors_fail_the_named_records_with_their_own_error_and_the_rest_generically',
    'sticky byte count without the per-record overhead': 'tests/unit/test_accumulator.py::test_keyless_records_stick_to_a_partition_for_a_batch_worth_of_bytes',
    'sticky byte count leaves the key out': 'tests/unit/test_accumulator.py::test_keyed_records_on_the_sticky_partition_count_their_key_bytes_too',
    'a send_many run counts the overhead once': 'tests/unit/test_accumulator.py::test_send_many_runs_count_their_records_by_the_same_rule',
    'the sticky partition peeked before a wait for memory, kept after it': 'tests/unit/test_accumulator.py::test_a_keyless_record_that_waited_for_memory_is_counted_and_switches_as_any_other',
    'no sticky count or switch after a wait for memory': 'tests/unit/test_accumulator.py::test_a_keyless_record_that_waited_for_memory_is_counted_and_switches_as_any_other',
}


def run(mutation: Mutation) -> tuple[bool, str]:
    """Apply ``mutation`` to a copy of the project and run the tests there: (caught, summary)."""
    with tempfile.TemporaryDirectory(prefix="aioproducer-mutant-") as tmp:
        work = Path(tmp)
        shutil.copytree(ROOT / "aioproducer", work / "aioproducer")
        shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__", "data", "java"))
        shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
        native = mutation.path.startswith("native/")
        if native:
            shutil.copytree(ROOT / "native", work / "native", ignore=shutil.ignore_patterns("target"))
        target = work / mutation.path
        source = target.read_text()
        if source.count(mutation.old) != 1:
            raise SystemExit(f"mutation {mutation.name!r}: its target text is not in {mutation.path} exactly once")
        target.write_text(source.replace(mutation.old, mutation.new))
        if native:
            _build_native(work)
        env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", *QUIET_PLUGINS, "--timeout=60", *_ordered(mutation)],
            cwd=work, env=env, capture_output=True, text=True, timeout=300,
        )
        return verdict(result.stdout, result.stderr)


def verdict(stdout: str, stderr: str) -> tuple[bool, str]:
    """(caught, summary) of a mutant's pytest run, from its output.

    Caught means a test failed: an error before any test ran (a module that does not import, a
    stale extension) or in collection is not the planted bug being caught, so it reads as
    survived, with the error as its summary for the reader to look at.
    """
    failed = [line for line in stdout.splitlines() if line.startswith("FAILED")]
    last = (stdout.strip().splitlines() or stderr.strip().splitlines() or ["no output"])[-1]
    return bool(failed), failed[0] if failed else last


#: Where every native mutant is built, one after another: a fixed path, so that cargo's incremental
#: compilation keeps what an edit did not touch. A new path per mutant compiled the crate whole each
#: time: 52 s against 16 s a mutant at a load of 10 (and 6.7 s with the dev profile's ``debug = 0``,
#: native/Cargo.toml).
MUTANT_CRATE = ROOT / "native" / "target" / "mutant-crate"


def _build_native(work: Path) -> None:
    """Build the mutated crate in ``work/native`` into ``work/aioproducer``'s extension module.

    The crate's files are written into ``MUTANT_CRATE`` (only those that differ) and built there,
    under a lock: a second run of this module at the same time waits its turn.
    """
    target_dir = ROOT / "native" / "target"
    MUTANT_CRATE.mkdir(parents=True, exist_ok=True)
    with open(MUTANT_CRATE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _sync_tree(work / "native", MUTANT_CRATE / "native")
        # The environment cargo test ran in (no PYO3_PYTHON of our own: a changed one rebuilds PyO3's
        # crates, about 20 s), so only the mutated crate is compiled again.
        env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir)}
        result = subprocess.run(
            ["cargo", "build", "--quiet", "--manifest-path", str(MUTANT_CRATE / "native" / "Cargo.toml")],
            env=env, capture_output=True, text=True, timeout=600,
        )
        if result.returncode != 0:
            raise SystemExit(f"the mutated crate does not build:\n{result.stderr}")
        (module,) = (work / "aioproducer").glob("_native*.so")
        shutil.copy(target_dir / "debug" / "lib_native.so", module)


def _sync_tree(source: Path, destination: Path) -> None:
    """Make ``destination`` hold ``source``'s files, writing only those whose bytes differ."""
    wanted = {path.relative_to(source) for path in source.rglob("*") if path.is_file()}
    for relative in wanted:
        data = (source / relative).read_bytes()
        target = destination / relative
        if not target.is_file() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    for path in destination.rglob("*"):
        if path.is_file() and path.relative_to(destination) not in wanted:
            path.unlink()


def _ordered(mutation: Mutation) -> list[str]:
    """The test that caught ``mutation`` last time, then the files that catch its module's bugs.

    The run stops at the first failure (``-x``), so a mutant still caught where it was costs one
    test; one no longer caught there is looked for in the files before it is called a survivor.
    """
    files = TESTS if mutation.path.startswith("aioproducer/") else NATIVE_TESTS
    return [CAUGHT_BY[mutation.name], *files]


def main() -> int:
    survivors = 0
    for mutation in MUTATIONS:
        caught, summary = run(mutation)
        survivors += not caught
        print(f"{'caught  ' if caught else 'SURVIVED'} {mutation.name}: {summary}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
