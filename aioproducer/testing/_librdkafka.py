"""ctypes bindings for the slice of librdkafka that runs a mock cluster.

Why ctypes and not a C extension: librdkafka already ships, compiled, inside
the ``confluent-kafka`` wheel (``confluent_kafka.libs/librdkafka-<hash>.so.1``
on Linux, ``confluent_kafka/.dylibs/librdkafka.1.dylib`` on macOS). Loading that
file gives aioproducer's tests a real, independently written Kafka broker
implementation without a JVM and without building anything.

The mock API (``rdkafka_mock.h``) is marked experimental by librdkafka and is
not covered by its ABI guarantees, so every prototype is declared here, in one
place, checked against the header of the librdkafka version confluent-kafka
bundles; ``MockCluster`` never touches ctypes directly.

Nothing here is imported by the producer itself: the module is only loaded by
``aioproducer.testing``.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
from pathlib import Path

__all__ = [
    "ConfluentKafkaMissingError",
    "LibrdkafkaError",
    "RD_KAFKA_PRODUCER",
    "err2name",
    "err2str",
    "find_library_path",
    "library",
    "version",
]

RD_KAFKA_PRODUCER = 0
RD_KAFKA_CONF_OK = 0

#: Opaque handles. ``c_void_p`` keeps them as plain ints in Python; ``None`` is NULL.
_Handle = ctypes.c_void_p

_INSTALL_HINT = "pip install 'aioproducer[testing]'"


class ConfluentKafkaMissingError(ImportError):
    """``confluent-kafka`` (which carries librdkafka) is not installed or has no librdkafka.

    An ``ImportError`` subclass so that ``import aioproducer.testing`` fails the
    way a missing optional dependency is expected to fail, while the message
    names the extra that installs it.
    """


class LibrdkafkaError(RuntimeError):
    """A librdkafka call returned an error code (``rd_kafka_resp_err_t`` != 0).

    ``call`` is the C function, ``code`` the raw error code (Kafka protocol
    codes are positive, librdkafka-internal ones negative), ``name`` its
    ``rd_kafka_err2name`` spelling, so a failing test says which knob was
    turned wrongly rather than just "-190".
    """

    def __init__(self, call: str, code: int, detail: str = "") -> None:
        self.call = call
        self.code = code
        self.name: str = err2name(code)
        message = f"{call} failed: {self.name} ({code}): {err2str(code)}"
        if detail:
            message += f" [{detail}]"
        super().__init__(message)


def find_library_path() -> Path:
    """Locate the librdkafka shared library bundled in the confluent-kafka wheel.

    Searched, in order: the ``confluent_kafka.libs`` directory next to the
    package (auditwheel, Linux), the package's ``.dylibs`` directory (delocate,
    macOS), then the package directory itself (some Windows/conda layouts).
    Raises :class:`ConfluentKafkaMissingError` naming the extra to install.
    """
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        raise ConfluentKafkaMissingError(
            "aioproducer.testing needs confluent-kafka, which bundles librdkafka and its "
            f"mock cluster: {_INSTALL_HINT}"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    candidates = [
        package_dir.parent / "confluent_kafka.libs",
        package_dir / ".dylibs",
        package_dir,
    ]
    patterns = ["librdkafka*.so*", "librdkafka*.dylib", "librdkafka*.dll", "rdkafka*.dll"]
    for directory in candidates:
        if not directory.is_dir():
            continue
        for pattern in patterns:
            found = sorted(directory.glob(pattern))
            if found:
                return found[0]
    raise ConfluentKafkaMissingError(
        f"confluent-kafka is installed at {package_dir} but no bundled librdkafka was found "
        f"(looked in {', '.join(str(c) for c in candidates)}); a wheel build of "
        f"confluent-kafka is required: {_INSTALL_HINT}"
    )


def _declare(library: ctypes.CDLL) -> None:
    """Give every function we call its exact C prototype.

    Without ``restype`` ctypes assumes ``int`` and truncates 64-bit pointers;
    without ``argtypes`` Python ints are passed as C ints, which is wrong for
    ``size_t`` and ``int16_t``. Types follow ``rdkafka.h`` / ``rdkafka_mock.h``.
    """
    c_int, c_int16, c_int32, c_int64 = ctypes.c_int, ctypes.c_int16, ctypes.c_int32, ctypes.c_int64
    c_char_p, c_size_t = ctypes.c_char_p, ctypes.c_size_t
    prototypes: dict[str, tuple[object, list[object]]] = {
        # rdkafka.h
        "rd_kafka_version_str": (c_char_p, []),
        "rd_kafka_err2name": (c_char_p, [c_int]),
        "rd_kafka_err2str": (c_char_p, [c_int]),
        "rd_kafka_conf_new": (_Handle, []),
        "rd_kafka_conf_destroy": (None, [_Handle]),
        "rd_kafka_conf_set": (c_int, [_Handle, c_char_p, c_char_p, c_char_p, c_size_t]),
        "rd_kafka_new": (_Handle, [c_int, _Handle, c_char_p, c_size_t]),
        "rd_kafka_destroy": (None, [_Handle]),
        # rdkafka_mock.h
        "rd_kafka_mock_cluster_new": (_Handle, [_Handle, c_int]),
        "rd_kafka_mock_cluster_destroy": (None, [_Handle]),
        "rd_kafka_mock_cluster_bootstraps": (c_char_p, [_Handle]),
        "rd_kafka_mock_topic_create": (c_int, [_Handle, c_char_p, c_int, c_int]),
        "rd_kafka_mock_topic_set_error": (None, [_Handle, c_char_p, c_int]),
        "rd_kafka_mock_partition_set_leader": (c_int, [_Handle, c_char_p, c_int32, c_int32]),
        "rd_kafka_mock_broker_set_down": (c_int, [_Handle, c_int32]),
        "rd_kafka_mock_broker_set_up": (c_int, [_Handle, c_int32]),
        "rd_kafka_mock_broker_set_rtt": (c_int, [_Handle, c_int32, c_int]),
        "rd_kafka_mock_clear_request_errors": (None, [_Handle, c_int16]),
        "rd_kafka_mock_push_request_errors_array": (
            None,
            [_Handle, c_int16, c_size_t, ctypes.POINTER(c_int)],
        ),
        # Variadic: only the fixed parameters are declared. CPython's ctypes
        # then treats extra arguments as variadic (ffi_prep_cif_var where the
        # platform needs it, e.g. Apple arm64), so callers must pass them as
        # explicit ctypes.c_int instances.
        "rd_kafka_mock_broker_push_request_error_rtts": (
            c_int,
            [_Handle, c_int32, c_int16, c_size_t],
        ),
        "rd_kafka_mock_start_request_tracking": (None, [_Handle]),
        "rd_kafka_mock_stop_request_tracking": (None, [_Handle]),
        "rd_kafka_mock_get_requests": (ctypes.POINTER(_Handle), [_Handle, ctypes.POINTER(c_size_t)]),
        "rd_kafka_mock_request_id": (c_int32, [_Handle]),
        "rd_kafka_mock_request_api_key": (c_int16, [_Handle]),
        "rd_kafka_mock_request_timestamp": (c_int64, [_Handle]),
        "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_Handle), c_size_t]),
        "rd_kafka_mock_clear_requests": (None, [_Handle]),
    }
    for name, (restype, argtypes) in prototypes.items():
        try:
            function = getattr(library, name)
        except AttributeError as exc:
            raise ConfluentKafkaMissingError(
                f"the librdkafka bundled with confluent-kafka lacks {name}; "
                f"a newer confluent-kafka is needed: {_INSTALL_HINT}"
            ) from exc
        function.restype = restype
        function.argtypes = argtypes


@functools.cache
def library() -> ctypes.CDLL:
    """librdkafka, loaded and declared once per process, when first needed (a ``MockCluster`` made).

    Not at import: ``import aioproducer.testing`` (for ``FakeProducer``, ``KafkaCluster``, the
    assertions) needs no librdkafka, so no confluent-kafka either.
    """
    path = find_library_path()
    try:
        library = ctypes.CDLL(str(path))
    except OSError as exc:
        raise ConfluentKafkaMissingError(
            f"could not load librdkafka from {path}: {exc}; reinstall with {_INSTALL_HINT}"
        ) from exc
    _declare(library)
    return library


def err2name(code: int) -> str:
    """``rd_kafka_err2name``: the symbolic name, e.g. ``NOT_LEADER_OR_FOLLOWER``."""
    raw = library().rd_kafka_err2name(code)
    return raw.decode("utf-8", "replace") if raw else f"ERR_{code}"


def err2str(code: int) -> str:
    """``rd_kafka_err2str``: the human description of an error code."""
    raw = library().rd_kafka_err2str(code)
    return raw.decode("utf-8", "replace") if raw else ""


def version() -> str:
    """The bundled librdkafka's version string (the mock's behaviour varies with it)."""
    raw = library().rd_kafka_version_str()
    return raw.decode("ascii", "replace") if raw else "unknown"
