"""The Java peer: Apache Kafka's ``KafkaProducer`` run by ``benchmarks/java/ProducerBench.java``.

The program is compiled once per source version (``javac -cp '<kafka libs>/*'``)
into ``~/.cache/aioproducer/bench-java/<hash>/``, against the ``kafka-clients``
jar that :func:`aioproducer.testing.kafka.kafka_libs` fetched for the brokers,
so the producer is the same release as the real brokers. Each run is one JVM,
as each Python client runs in a fresh process.

The key and value pools are generated here, by the same functions the Python
workers call (:func:`benchmarks.scenarios.make_keys`, ``make_values``), and
handed to the JVM in a file, so every client sends the same bytes.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.process import run_json_process
from benchmarks.scenarios import make_keys, make_values

__all__ = ["JVM_OPTIONS", "compile_java", "run_java"]

SOURCE = Path(__file__).resolve().parent / "java" / "ProducerBench.java"

#: The JVM's settings, reported with its peak RSS. A fixed maximum heap makes
#: the memory figure mean something: 256 MB holds 200,000 kept futures plus
#: the 32 MB record buffer with room to spare; the JDK's default would be a
#: quarter of the machine's RAM (6 GB here), which G1 grows into lazily.
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseG1GC")


def _libs() -> Path:
    from aioproducer.testing.kafka import kafka_libs

    return kafka_libs()


def compile_java() -> tuple[Path, Path]:
    """``(classes dir, kafka libs dir)``, compiling ``ProducerBench.java`` if this source is new."""
    from aioproducer.testing.kafka import compile_java as compile_against

    libs = _libs()
    return compile_against(SOURCE, libs), libs


def _write_pools(path: Path, keys: list[bytes], values: list[bytes]) -> None:
    """Both pools as ``[count][len][bytes]...`` big-endian, which ``DataInputStream`` reads."""
    with open(path, "wb") as f:
        for pool in (keys, values):
            f.write(struct.pack(">i", len(pool)))
            for item in pool:
                f.write(struct.pack(">i", len(item)) + item)


def run_java(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One run of the Java producer; the worker result dict, or ``{"crashed": why}``."""
    try:
        classes, libs = compile_java()
    except (RuntimeError, OSError) as exc:
        return {"crashed": f"java client unavailable: {exc}"}
    java = shutil.which("java")
    if java is None:
        return {"crashed": "`java` is not on PATH"}
    with tempfile.TemporaryDirectory(prefix="bench-java-run-") as tmp:
        spec_file, pools_file = Path(tmp) / "spec.properties", Path(tmp) / "pools.bin"
        spec_file.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n"
                                     for k, v in spec.items()))
        _write_pools(pools_file, make_keys(), make_values(spec["value_size"]))
        command = [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={classes / 'log4j2.properties'}",
                   "-cp", f"{classes}:{libs / '*'}", "ProducerBench", str(spec_file), str(pools_file)]
        result = run_json_process(command, timeout)
    if "crashed" not in result:
        result["jvm_options"] = " ".join(JVM_OPTIONS)
    return result
