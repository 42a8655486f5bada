"""The README's and the docs site's facts are the code's: every key and keyword their code shows is accepted.

The generated tables (configuration, metrics, errors) moved with their pages to ``docs/reference/``
and are checked in ``tests/unit/test_docs.py``; the checks here read the README and every page
under ``docs/`` alike.
"""

from __future__ import annotations

import pytest

import ast
import importlib.util
import inspect
import re
import textwrap
from pathlib import Path

from aioproducer import Producer
from aioproducer.config import CONFIG_DEFS, ProducerConfig
from aioproducer.errors import ConfigError
from aioproducer.schema_registry.client import CONFIG_KEYS as SCHEMA_REGISTRY_KEYS

pytestmark = pytest.mark.source_tree  # reads the source tree, see tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The README and every page of the docs site.
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
CONFIG_KEYS = {d.key for d in CONFIG_DEFS}


def test_readme_quick_start_has_the_two_commands_ci_runs() -> None:
    text = README.read_text()
    ci = (README.parent / ".ci" / "run").read_text()
    test_command = "pip install -e '.[test]' && python -m pytest -n 2 --dist loadfile"
    assert test_command in text and test_command in ci
    assert "aioproducer demo" in text


# ------------------------------------------------------------------ keywords and keys the README shows

#: Dotted names the README and docs write in code that are not producer keys: the broker's and Spark's.
#: The schema registry client's keys (``SchemaRegistryClient(conf)`` in the README's code).
REGISTRY_CONFIG_KEYS = SCHEMA_REGISTRY_KEYS
NOT_PRODUCER_KEYS = {"auto.create.topics.enable", "min.insync.replicas",
                     "telemetry.max.bytes"}  # other programs' keys the README names (broker, Spark)


def _python_blocks() -> list[tuple[str, str]]:
    """Every ```python block of the README and the docs pages, dedented (some sit in list items), with its page."""
    return [
        (page.relative_to(ROOT).as_posix(), textwrap.dedent(body))
        for page in PAGES
        for lang, body in re.findall(r"```(\w*)\n(.*?)```", page.read_text(), re.S)
        if lang == "python"
    ]


def _keyword_accepted(name: str) -> bool:
    """Whether ``ProducerConfig`` or ``Producer`` itself (``tracing=``) knows the keyword (only "unknown" counts)."""
    if name in inspect.signature(Producer.__init__).parameters:
        return True
    try:
        ProducerConfig(**{name: None})  # type: ignore[arg-type]  # any name, to ask whether it is known
    except ConfigError as exc:
        return not str(exc).startswith("unknown keyword argument")
    return True


def _method_arguments() -> dict[str, set[str]]:
    """Producer's public methods -> their parameter names."""
    return {
        name: set(inspect.signature(member).parameters) - {"self"}
        for name, member in inspect.getmembers(Producer, inspect.isfunction)
        if not name.startswith("_")
    }


def _integration_arguments() -> list[set[str]]:
    """The parameter names of the public functions of ``aioproducer.integrations.*`` (``producer_ready(p, require_brokers=)``)
    and of ``ProducerCollector(...)`` (``windowed=``)."""
    import aioproducer.integrations.aiohttp
    import aioproducer.integrations.fastapi
    from aioproducer.metrics.prometheus import ProducerCollector

    return [
        set(inspect.signature(member).parameters)
        for module in (aioproducer.integrations.fastapi, aioproducer.integrations.aiohttp)
        for name, member in inspect.getmembers(module, inspect.isfunction)
        if not name.startswith("_") and member.__module__ == module.__name__
    ] + [set(inspect.signature(ProducerCollector.__init__).parameters)]


def test_every_producer_call_in_the_readme_code_uses_keys_and_keywords_the_code_accepts() -> None:
    """``Producer(...)`` keywords and dict keys, and ``producer.method(kw=...)`` keywords, in every Python block."""
    methods = _method_arguments()
    checked: list[str] = []
    for page, block in _python_blocks():
        tree = compile(block, page, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "Producer":
                for keyword in node.keywords:
                    assert keyword.arg is None or _keyword_accepted(keyword.arg), f"{page}: Producer({keyword.arg}=...) is refused"
                    checked.append(f"{keyword.arg}=")
                if node.args and isinstance(node.args[0], ast.Dict):
                    for key in node.args[0].keys:
                        assert isinstance(key, ast.Constant) and isinstance(key.value, str)
                        assert key.value in CONFIG_KEYS, f"{page}: Producer({{{key.value!r}: ...}}) is not a config key"
                        checked.append(key.value)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "producer":
                assert func.attr in methods, f"{page}: producer.{func.attr}() is not a Producer method"
                for keyword in node.keywords:
                    assert keyword.arg in methods[func.attr], f"{page}: producer.{func.attr}({keyword.arg}=...) is not an argument"
                    checked.append(f"{func.attr}({keyword.arg}=)")
    assert {"bootstrap.servers", "sasl.jaas.config", "security_protocol=", "send(headers=)"} <= set(checked)


def test_every_dotted_key_string_in_the_readme_code_is_a_config_key() -> None:
    """Any ``"dotted.key"`` literal in a Python block (a dict built apart from its ``Producer(...)`` too)."""
    found: dict[str, str] = {}
    for page, block in _python_blocks():
        tree = compile(block, page, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        found |= {
            node.value: page
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"[a-z]+(\.[a-z]+)+", node.value)
        }
    assert "linger.ms" in found
    for key in sorted(found.keys() - NOT_PRODUCER_KEYS):
        setting = key.removeprefix("kafka.")  # a Spark sink's option "kafka.<key>" is the producer's <key> (docs/how-to/spark.md)
        assert setting in CONFIG_KEYS or setting in REGISTRY_CONFIG_KEYS, f"{found[key]}: {key!r} in a code example is not a config key"


def test_every_keyword_and_key_the_api_and_observability_pages_name_exists() -> None:
    """Inline ``name=`` keywords and ``dotted.key`` names in "The Producer API" (with its Delivery futures and Partitioning) and "Observability".

    A keyword must be a ``Producer(...)`` keyword or an argument of a public method; a dotted
    lower-case name (not a Python module's attribute) a config key. ``partitioner=`` was
    written here while the code refused it (#25 item 14).
    """
    text = (DOCS / "reference" / "producer.md").read_text() + (DOCS / "how-to" / "observability.md").read_text()
    methods = _method_arguments()
    arguments = set().union(*methods.values(), *_integration_arguments())
    spans = re.findall(r"`([^`\n]+)`", text)
    keywords = {name for span in spans for name in re.findall(r"(?<![\w.])([a-z_][a-z0-9_]*)=(?!=)", span)}
    assert {"partitioner", "key_serializer", "on_delivery", "timeout"} <= keywords  # the scan sees them
    for name in sorted(keywords):
        assert _keyword_accepted(name) or name in arguments, f"The Producer API / Observability: `{name}=` is neither a keyword nor an argument"
    dotted = {span for span in spans if re.fullmatch(r"[a-z]+(\.[a-z]+)+", span)}
    for name in sorted(dotted - NOT_PRODUCER_KEYS):
        if importlib.util.find_spec(name.split(".", 1)[0]) is not None:
            continue  # asyncio.gather and the like: Python names, not keys
        if name.startswith("producer.") and name not in CONFIG_KEYS:
            continue  # `producer.ready`: an attribute, checked below
        if name.startswith(("messaging.", "server.", "error.")):
            continue  # OpenTelemetry's attribute and metric names (### OpenTelemetry)
        if name.startswith("org.apache.kafka.producer."):
            continue  # KIP-714's metric names (client telemetry, ### Metrics)
        assert name in CONFIG_KEYS, f"The Producer API / Observability: `{name}` is not a config key"
    attributes = {span.split(".")[1] for span in spans if re.fullmatch(r"producer\.[a-z_]+", span)}
    assert {"ready", "brokers_reachable"} <= attributes  # the scan sees them
    for attribute in sorted(attributes):
        assert hasattr(Producer, attribute), f"The Producer API / Observability: `producer.{attribute}` is not an attribute of Producer"
    assert "max.block.ms" in dotted


def test_every_property_the_command_lines_pass_is_a_config_key() -> None:
    """``--command-property k=v ...`` (and the older ``--producer-property``/``--producer-props``) in the README's and docs' shell examples."""
    text = "\n".join(page.read_text() for page in PAGES)
    keys = re.findall(r"--producer-property\s+([\w.]+)[=:]", text)
    for props in re.findall(r"--(?:producer-props|command-property)((?:\s+[\w.]+=\S+)+)", text):
        keys += re.findall(r"([\w.]+)=", props)
    assert "linger.ms" in keys
    for key in set(keys) - {"k"}:  # `--producer-property k=v`: the placeholder
        assert key in CONFIG_KEYS, f"the command line property {key!r} (README or docs) is not a config key"
