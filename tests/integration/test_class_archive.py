"""The test brokers' class-data archive: made by one JVM at a normal exit, never from a killed one, mapped by the next.

The first tests are of the files alone (who may make the archive, what a JVM's end leaves); the
last runs Kafka's storage tool twice, as a broker would be run: the first JVM writes the
archive, and the second loads Kafka's classes from it, which its class-loading log shows.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from aioproducer.testing.class_archive import STALE_S, ClassArchive
from aioproducer.testing.kafka import KafkaUnavailableError, classpath, kafka_libs, require_tool

pytestmark = pytest.mark.integration


def archive(tmp_path: Path, classes: str = "a.jar:b.jar") -> ClassArchive:
    java = tmp_path / "java"
    if not java.exists():
        java.write_text("")
    return ClassArchive(str(java), classes, tmp_path)


def test_one_maker_at_a_time_and_the_archive_for_everyone_once_made(tmp_path: Path) -> None:
    first, second = archive(tmp_path), archive(tmp_path)
    options, dump = first.use_or_make()
    assert dump is not None and options == [f"-XX:ArchiveClassesAtExit={dump}"]
    assert second.use_or_make() == ([], None)  # the first is making it
    assert second.use() == []
    dump.write_bytes(b"archive")
    first.made(dump, 143)  # SIGTERM handled: the JVM's exit wrote it
    assert first.path.read_bytes() == b"archive" and not dump.exists()
    assert second.use_or_make() == ([f"-XX:SharedArchiveFile={first.path}"], None)
    assert second.use() == [f"-XX:SharedArchiveFile={first.path}"]


@pytest.mark.parametrize("returncode", [-9, None])
def test_a_killed_or_running_jvms_file_is_dropped_and_another_may_make_it(tmp_path: Path, returncode: int | None) -> None:
    maker = archive(tmp_path)
    _, dump = maker.use_or_make()
    assert dump is not None
    dump.write_bytes(b"half an archive")
    maker.made(dump, returncode)
    assert not maker.path.exists() and not dump.exists()
    _, again = archive(tmp_path).use_or_make()
    assert again is not None and again != dump


def test_an_empty_file_is_not_an_archive(tmp_path: Path) -> None:
    maker = archive(tmp_path)
    _, dump = maker.use_or_make()
    assert dump is not None
    dump.write_bytes(b"")
    maker.made(dump, 0)
    assert not maker.path.exists()


def test_a_marker_left_by_a_dead_maker_is_taken_over_once_stale(tmp_path: Path) -> None:
    dead = archive(tmp_path)
    _, dump = dead.use_or_make()
    assert dump is not None  # its process dies here: made() is never called
    assert archive(tmp_path).use_or_make() == ([], None)
    (marker,) = tmp_path.glob("*.making")
    old = time.time() - STALE_S - 1
    os.utime(marker, (old, old))
    _, taken = archive(tmp_path).use_or_make()
    assert taken is not None


def test_another_java_or_classpath_has_an_archive_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "java").write_text("")
    paths = {
        archive(tmp_path).path,
        archive(tmp_path, "a.jar").path,
        ClassArchive(str(tmp_path / "other" / "java"), "a.jar:b.jar", tmp_path).path,
    }
    assert len(paths) == 3


def test_a_new_copy_of_the_jars_has_an_archive_of_its_own(tmp_path: Path) -> None:
    """A new venv's pyspark/jars are the same jars at the same path, written again: a JVM refuses the old archive."""
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "one.jar").write_bytes(b"jar")
    wildcard, plain = archive(tmp_path, f"{jars}/*").path, archive(tmp_path, str(jars / "one.jar")).path
    os.utime(jars / "one.jar", ns=(1, 1))
    assert archive(tmp_path, f"{jars}/*").path != wildcard
    assert archive(tmp_path, str(jars / "one.jar")).path != plain


def test_an_unwritable_directory_means_no_archive(tmp_path: Path) -> None:
    gone = ClassArchive(str(archive(tmp_path).path.parent / "java"), "a.jar", tmp_path / "missing")
    assert gone.use_or_make() == ([], None)


def test_kafkas_classes_load_from_the_archive_a_normal_exit_wrote(tmp_path: Path) -> None:
    try:
        java = require_tool("java", "to run Kafka's storage tool")
        classes = classpath(kafka_libs())
    except KafkaUnavailableError as exc:
        if os.environ.get("AIOPRODUCER_REQUIRE_KAFKA") == "1":
            pytest.fail(f"AIOPRODUCER_REQUIRE_KAFKA=1 but Kafka's jars cannot run here: {exc}")
        pytest.skip(f"no Kafka jars or java here: {exc}")
    maker = ClassArchive(java, classes, tmp_path)
    tool = ["-cp", classes, "kafka.tools.StorageTool", "random-uuid"]
    options, dump = maker.use_or_make()
    assert dump is not None
    first = subprocess.run([java, *options, *tool], capture_output=True, text=True, timeout=120)
    maker.made(dump, first.returncode)
    assert maker.path.is_file(), first.stdout + first.stderr
    second = subprocess.run(
        [java, *maker.use(), "-Xlog:class+load=info", *tool], capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stderr
    loaded = [line for line in second.stdout.splitlines() if "kafka.tools.StorageTool " in line]
    assert loaded and "shared objects file (top)" in loaded[0], loaded
