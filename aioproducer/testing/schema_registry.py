"""SchemaRegistry: an in-memory, Confluent-compatible Schema Registry for tests, served by aiohttp.

Why: no Confluent registry (a JVM service) can run on the test machines, and
the independent check of aioproducer's registry support is the other side's
client (confluent-kafka's ``SchemaRegistryClient`` and its deserializers)
talking to the same server. So this server speaks the REST subset those
clients use, with the real registry's status codes and error bodies, and
adds what tests need: faults on command and a log of the requests served::

    with SchemaRegistry() as registry:
        client = confluent_kafka.schema_registry.SchemaRegistryClient({"url": registry.url})
        registry.fail_next(500, count=2)      # the next two requests answer 500
        registry.requests                     # [("POST", "/subjects/t-value/versions?normalize=False"), ...]

Threading. Like :class:`~aioproducer.testing.proxy.FaultProxy`, the server
runs its own event loop on a daemon thread: sync tests, asyncio tests on any
loop and other processes (Spark workers) reach it alike over HTTP. The
constructor starts serving (``url`` is valid at once); :meth:`stop` closes
the listener and connections but keeps the registry's contents,
:meth:`start` serves again on the same port; :meth:`close` stops, ends the
loop and joins the thread (idempotent). The fault knobs and the request log
are shared with the loop under a lock, so they may be called from any thread.

Implemented (paths relative to ``url``; ``application/vnd.schemaregistry.v1+json``):

* ``POST /subjects/{s}/versions`` (register; ``normalize``): body ``schema``,
  ``schemaType`` (AVRO by default, JSON, PROTOBUF), ``references``
  (``name``/``subject``/``version``, which must exist; Avro references are
  parsed into the schema's named types). Answers ``id``, ``guid``,
  ``subject``, ``version``. A schema already live under the subject is
  answered with its version, without a compatibility check.
* ``POST /subjects/{s}`` (lookup; ``normalize``, ``deleted``).
* ``GET /schemas/ids/{id}`` (``subject``, ``format``, ``reference_format``
  accepted and ignored), ``GET /schemas/guids/{guid}``,
  ``GET /schemas/ids/{id}/subjects``, ``GET /schemas/ids/{id}/versions``
  (``deleted``), ``GET /schemas/types``.
* ``GET /subjects`` (``deleted``, ``deleted_only``, ``subjectPrefix``),
  ``GET /subjects/{s}/versions`` (``deleted``, ``deleted_only``),
  ``GET /subjects/{s}/versions/{version|latest|-1}`` (``deleted``),
  ``DELETE /subjects/{s}`` and ``DELETE /subjects/{s}/versions/{v}``: soft
  delete first, ``?permanent=true`` afterwards (as the real registry
  insists: 40404/40405, 40406/40407).
* ``POST /compatibility/subjects/{s}/versions/{v|latest}`` and
  ``.../versions`` (against what the level says): ``{"is_compatible": ...}``,
  plus ``"messages"`` with ``verbose=true``.
* ``GET/PUT/DELETE /config`` and ``/config/{s}`` (PUT takes
  ``compatibility`` or ``compatibilityLevel``; GET answers
  ``compatibilityLevel``, PUT ``compatibility``; default BACKWARD; a subject
  without its own level is 40408 unless ``defaultToGlobal=true``).
* ``GET/PUT/DELETE /mode`` and ``/mode/{s}``: stored and answered; READONLY
  and READONLY_OVERRIDE refuse registration (42205). IMPORT mode's explicit
  ids are not implemented.
* ``GET /associations/resources/{namespace}/{topic}``: always an empty list.
  confluent-kafka 2.16's serializers ask it first (their default subject
  name strategy is ASSOCIATED, falling back to TOPIC), so expect one such
  request per topic and client in :attr:`SchemaRegistry.requests`.

Identity. Ids are global: the same schema (type, text, references) under two
subjects has one id, and each schema also gets a GUID (uuid4; the
header-based schema id format of confluent-kafka 2.10+ uses it). Versions
start at 1 per subject and are never reused (soft-deleted ones count; a
permanent delete of every version starts the subject again at 1). Without
``normalize``, JSON-based schemas (Avro, JSON Schema) are compared after JSON
re-serialisation (whitespace does not matter, attribute order does); with
``normalize=true`` an Avro schema is compared and stored in a normal form:
Avro's Parsing Canonical Form but keeping defaults and logical types, which
PCF strips and readers need (``_avro_compat.normal_form``). Protobuf text is
compared as sent. Protobuf is stored as sent and answered as stored whatever
``format`` asks: confluent-kafka's ``ProtobufSerializer`` registers a base64
``FileDescriptorProto`` and its deserializer asks ``format=serialized`` for
that same form, so they round-trip; a schema registered as ``.proto`` text is
answered as text (the real registry converts between the two; that needs a
``.proto`` compiler, which is not available here).

Validation and compatibility. Avro is parsed with ``fastavro.parse_schema``;
a schema that does not parse, a JSON Schema that is not JSON, an empty
Protobuf text, an unknown ``schemaType`` or a missing reference is 42201.
Avro compatibility follows Avro's schema resolution at every level (NONE,
BACKWARD, FORWARD, FULL and their ``_TRANSITIVE`` forms; see
``aioproducer/testing/_avro_compat.py``); an incompatible registration is 409
with a message naming the subject and each problem. JSON Schema and Protobuf
are accepted without a compatibility check, and their syntax beyond "is JSON"
/ "is not empty" is not checked. A change of ``schemaType`` under a subject
is incompatible unless the level is NONE.

Not implemented: contexts, metadata and rule sets (accepted in bodies and
dropped), ``/subjects/{s}/metadata``, ``referencedby``, exporters,
creating associations, authentication, pagination (``offset``/``limit`` are ignored),
``format`` other than the stored text, and forgetting an id: schemas stay
readable by id after their versions are deleted (the real registry answers
40403 after a permanent delete).

Faults and counting, for the tests of clients: :meth:`fail_next` (the next
requests answer an error status), :meth:`garbage_next` (200 with a body that
is not JSON), :meth:`delay` (every request waits), :meth:`stop`/:meth:`start`
(the registry down, then back), :attr:`requests` and :meth:`clear_requests`
(count the HTTP calls a client makes). Faulted and delayed requests are
logged in :attr:`requests` too: they reached the server.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web

from aioproducer.testing import _avro_compat as avro
from aioproducer.testing._loop_thread import LoopThreadService

__all__ = ["RegistryClosedError", "SchemaRegistry"]


CONTENT_TYPE: Final = "application/vnd.schemaregistry.v1+json"
SCHEMA_TYPES: Final = ("AVRO", "JSON", "PROTOBUF")
MODES: Final = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_LEVEL: Final = "BACKWARD"
#: What garbage_next() answers with status 200: a proxy's error page, not JSON.
GARBAGE: Final = b"<html><body>502 Bad Gateway (injected by SchemaRegistry.garbage_next)</body></html>"
_MAX_VERSION: Final = 2**31 - 1

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RegistryClosedError(RuntimeError):
    """A :class:`SchemaRegistry` method was called after :meth:`~SchemaRegistry.close`."""


class _Refusal(Exception):
    """An error answer: HTTP ``status`` and the registry's ``{"error_code", "message"}`` body."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _subject_not_found(subject: str) -> _Refusal:
    return _Refusal(404, 40401, f"Subject '{subject}' not found.")


def _version_not_found(subject: str, version: int) -> _Refusal:
    return _Refusal(404, 40402, f"Version {version} not found for subject '{subject}'.")


def _invalid(message: str) -> _Refusal:
    return _Refusal(422, 42201, f"Invalid schema: {message}")


# ----------------------------------------------------------------- the data


@dataclass(slots=True)
class _Schema:
    """One schema, known by a global id and a GUID, shared by every subject version that has it."""

    id: int
    guid: str
    type: str
    text: str
    references: list[dict[str, Any]]
    #: Parsed Avro (None for JSON and Protobuf), for compatibility checks and as a reference.
    avro: avro.AvroSchema | None

    def body(self) -> dict[str, Any]:
        """The schema fields of an answer: ``schemaType`` only when not AVRO, as the real registry does."""
        out: dict[str, Any] = {"schema": self.text}
        if self.type != "AVRO":
            out["schemaType"] = self.type
        if self.references:
            out["references"] = self.references
        return out


@dataclass(slots=True)
class _Version:
    number: int
    schema: _Schema
    deleted: bool = False


@dataclass(slots=True)
class _Candidate:
    """A schema from a request body, validated; not stored yet."""

    type: str
    text: str
    references: list[dict[str, Any]]
    avro: avro.AvroSchema | None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.type, self.text, json.dumps(self.references, sort_keys=True))


@dataclass
class _Store:
    """Everything the registry knows; touched only on the server's loop."""

    schemas: dict[int, _Schema] = field(default_factory=dict)
    by_key: dict[tuple[str, str, str], _Schema] = field(default_factory=dict)
    by_guid: dict[str, _Schema] = field(default_factory=dict)
    subjects: dict[str, list[_Version]] = field(default_factory=dict)
    level: str = DEFAULT_LEVEL
    levels: dict[str, str] = field(default_factory=dict)
    mode: str = "READWRITE"
    modes: dict[str, str] = field(default_factory=dict)

    def versions(self, subject: str, deleted: bool = False) -> list[_Version]:
        """The subject's versions, oldest first (soft-deleted ones only with ``deleted``); 40401 if none."""
        found = [v for v in self.subjects.get(subject, []) if deleted or not v.deleted]
        if not found:
            raise _subject_not_found(subject)
        return found

    def version(self, subject: str, spec: str, deleted: bool = False) -> _Version:
        """Version ``spec`` ("latest", "-1" or a number) of ``subject``: 42202, 40401, 40402 as the real registry."""
        number = _parse_version(spec)
        versions = self.versions(subject, deleted)
        if number == -1:
            return versions[-1]
        for v in versions:
            if v.number == number:
                return v
        raise _version_not_found(subject, number)

    def schema(self, schema_id: str) -> _Schema:
        found = self.schemas.get(int(schema_id)) if schema_id.lstrip("-").isdigit() else None
        if found is None:
            raise _Refusal(404, 40403, f"Schema {schema_id} not found")
        return found

    def add(self, c: _Candidate) -> _Schema:
        """The stored schema equal to ``c``, or ``c`` stored under the next id."""
        found = self.by_key.get(c.key)
        if found is None:
            found = _Schema(len(self.schemas) + 1, str(uuid.uuid4()), c.type, c.text, c.references, c.avro)
            self.schemas[found.id] = found
            self.by_key[c.key] = found
            self.by_guid[found.guid] = found
        return found

    def level_of(self, subject: str) -> str:
        return self.levels.get(subject, self.level)

    def mode_of(self, subject: str) -> str:
        return self.modes.get(subject, self.mode)


def _parse_version(spec: str) -> int:
    """-1 for "latest"; 42202 for what is not a version number."""
    if spec in ("latest", "-1"):
        return -1
    if spec.isdigit() and 1 <= int(spec) <= _MAX_VERSION:
        return int(spec)
    raise _Refusal(
        422,
        42202,
        f"The specified version '{spec}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )


def _flag(request: web.Request, name: str) -> bool:
    """A boolean query parameter; confluent-kafka's client sends Python's ``True``/``False``."""
    return request.query.get(name, "false").lower() == "true"


def _shown(request: web.Request) -> Callable[[_Version], bool]:
    """Which versions a listing shows: live ones; with ``deleted=true`` soft-deleted too; ``deleted_only=true`` only those."""
    if _flag(request, "deleted_only"):
        return lambda v: v.deleted
    deleted = _flag(request, "deleted")
    return lambda v: deleted or not v.deleted


def _answer(body: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type=CONTENT_TYPE)


def _error(status: int, code: int, message: str) -> web.Response:
    return _answer({"error_code": code, "message": message}, status)


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.text())
    except ValueError as exc:
        raise _Refusal(400, 400, f"Request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise _Refusal(422, 422, "Request body must be a JSON object")
    return body


# ----------------------------------------------------------------- faults


@dataclass(slots=True)
class _Fault:
    """The next ``remaining`` requests answer ``status`` with ``body`` (garbage_next: 200 and not JSON)."""

    remaining: int
    status: int
    body: bytes
    content_type: str


class _Faults:
    """The knobs and the request log, shared between test threads and the server loop (under ``lock``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queue: collections.deque[_Fault] = collections.deque()
        self.delay = 0.0
        self.requests: list[tuple[str, str]] = []
        #: The ``Authorization`` headers let in (``basic_auth``, ``bearer_token``); None: every request.
        self.authorizations: frozenset[str] | None = None

    def admit(self, method: str, path_qs: str) -> tuple[float, _Fault | None]:
        """Log a request; the delay it waits and the fault it gets, if any (faults in the order they were set)."""
        with self.lock:
            self.requests.append((method, path_qs))
            if not self.queue:
                return self.delay, None
            fault = self.queue[0]
            fault.remaining -= 1
            if fault.remaining == 0:
                self.queue.popleft()
            return self.delay, fault


# ----------------------------------------------------------------- the server


class _Server:
    """The aiohttp application over a :class:`_Store`; lives on the registry's loop."""

    def __init__(self, faults: _Faults, ssl_context: ssl.SSLContext | None = None) -> None:
        self.store = _Store()
        self.faults = faults
        self.ssl_context = ssl_context
        self.runner: web.AppRunner | None = None
        #: Set to release requests waiting out a delay (delay(0), stop).
        self.wake = asyncio.Event()

    # -------------------------------------------------------- lifecycle

    async def start(self, host: str, port: int) -> int:
        """Serve on ``host:port`` (0: any); the port bound."""
        if self.runner is not None:
            return port
        self.wake = asyncio.Event()
        runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=self.ssl_context)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self.runner = runner
        return int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Close the listener and every connection; the store is kept."""
        runner, self.runner = self.runner, None
        self.wake.set()
        if runner is not None:
            await runner.cleanup()

    async def release_delayed(self) -> None:
        self.wake.set()
        self.wake = asyncio.Event()

    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        add = app.router.add_route
        for method, path, handler in self._routes():
            add(method, path, handler)
        return app

    def _routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("GET", "/schemas/types", self.schema_types),
            ("GET", "/schemas/ids/{id}", self.schema_by_id),
            ("GET", "/schemas/ids/{id}/subjects", self.subjects_of_id),
            ("GET", "/schemas/ids/{id}/versions", self.versions_of_id),
            ("GET", "/schemas/guids/{guid}", self.schema_by_guid),
            ("GET", "/subjects", self.list_subjects),
            ("POST", "/subjects/{subject}", self.lookup),
            ("DELETE", "/subjects/{subject}", self.delete_subject),
            ("GET", "/subjects/{subject}/versions", self.list_versions),
            ("POST", "/subjects/{subject}/versions", self.register),
            ("GET", "/subjects/{subject}/versions/{version}", self.get_version),
            ("DELETE", "/subjects/{subject}/versions/{version}", self.delete_version),
            ("POST", "/compatibility/subjects/{subject}/versions/{version}", self.compatibility),
            ("POST", "/compatibility/subjects/{subject}/versions", self.compatibility_all),
            ("GET", "/config", self.get_config),
            ("PUT", "/config", self.put_config),
            ("DELETE", "/config", self.delete_config),
            ("GET", "/config/{subject}", self.get_config),
            ("PUT", "/config/{subject}", self.put_config),
            ("DELETE", "/config/{subject}", self.delete_config),
            ("GET", "/mode", self.get_mode),
            ("PUT", "/mode", self.put_mode),
            ("DELETE", "/mode", self.delete_mode),
            ("GET", "/mode/{subject}", self.get_mode),
            ("PUT", "/mode/{subject}", self.put_mode),
            ("DELETE", "/mode/{subject}", self.delete_mode),
            ("GET", "/associations/resources/{namespace}/{name}", self.associations),
        ]

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Log, then delay and faults, then the handler; refusals and unknown paths as the registry's JSON errors."""
        delay, fault = self.faults.admit(request.method, request.path_qs)
        if delay > 0:
            try:
                await asyncio.wait_for(self.wake.wait(), delay)
            except TimeoutError:
                pass
        if fault is not None:
            return web.Response(status=fault.status, body=fault.body, content_type=fault.content_type)
        allowed = self.faults.authorizations
        if allowed is not None and request.headers.get("Authorization") not in allowed:
            return _error(401, 40101, "Unauthorized: missing or wrong credentials")
        try:
            return await handler(request)
        except _Refusal as r:
            return _error(r.status, r.code, r.message)
        except web.HTTPException as exc:  # no such path, or a method it does not take
            return _error(exc.status, exc.status, f"HTTP {exc.status} {exc.reason}")

    # -------------------------------------------------------- schemas

    async def schema_types(self, request: web.Request) -> web.Response:
        return _answer(list(SCHEMA_TYPES))

    async def schema_by_id(self, request: web.Request) -> web.Response:
        s = self.store.schema(request.match_info["id"])
        return _answer({**s.body(), "guid": s.guid})

    async def schema_by_guid(self, request: web.Request) -> web.Response:
        s = self.store.by_guid.get(request.match_info["guid"])
        if s is None:
            raise _Refusal(404, 40403, f"Schema {request.match_info['guid']} not found")
        return _answer({**s.body(), "id": s.id, "guid": s.guid})

    def _uses(self, request: web.Request) -> list[tuple[str, _Version]]:
        """(subject, version) pairs holding the schema of ``{id}``, soft-deleted ones with ``deleted=true``."""
        s = self.store.schema(request.match_info["id"])
        deleted = _flag(request, "deleted")
        wanted = request.query.get("subject")
        return [
            (name, v)
            for name, versions in self.store.subjects.items()
            for v in versions
            if v.schema is s and (deleted or not v.deleted) and wanted in (None, name)
        ]

    async def subjects_of_id(self, request: web.Request) -> web.Response:
        return _answer(sorted({name for name, _ in self._uses(request)}))

    async def versions_of_id(self, request: web.Request) -> web.Response:
        return _answer([{"subject": name, "version": v.number} for name, v in self._uses(request)])

    # -------------------------------------------------------- subjects

    async def list_subjects(self, request: web.Request) -> web.Response:
        prefix, shown = request.query.get("subjectPrefix", ""), _shown(request)
        names = [
            name
            for name, versions in self.store.subjects.items()
            if name.startswith(prefix) and any(shown(v) for v in versions)
        ]
        return _answer(sorted(names))

    async def list_versions(self, request: web.Request) -> web.Response:
        versions = self.store.versions(request.match_info["subject"], deleted=True)
        numbers = [v.number for v in versions if _shown(request)(v)]
        if not numbers:
            raise _subject_not_found(request.match_info["subject"])
        return _answer(numbers)

    async def get_version(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        v = self.store.version(subject, request.match_info["version"], _flag(request, "deleted"))
        return _answer(_version_body(subject, v))

    async def register(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        if self.store.mode_of(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise _Refusal(422, 42205, f"Subject {subject} is in read-only mode")
        normalize = _flag(request, "normalize")
        c = self._candidate(await _json_body(request), normalize)
        live = [v for v in self.store.subjects.get(subject, []) if not v.deleted]
        for v in live:
            if _same(v.schema, c, normalize):
                return _answer(_registered(subject, v))
        self._check_registration(subject, c, live)
        versions = self.store.subjects.setdefault(subject, [])
        v = _Version(versions[-1].number + 1 if versions else 1, self.store.add(c))
        versions.append(v)
        return _answer(_registered(subject, v))

    def _check_registration(self, subject: str, c: _Candidate, live: list[_Version]) -> None:
        """409 with every problem, if ``c`` breaks the subject's compatibility level."""
        level = self.store.level_of(subject)
        problems = _problems(level, c, live)
        if problems:
            raise _Refusal(
                409,
                409,
                f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
                f"details: [{'; '.join(problems)}] (compatibility: {level})",
            )

    async def lookup(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        normalize = _flag(request, "normalize")
        c = self._candidate(await _json_body(request), normalize)
        for v in reversed(self.store.versions(subject, _flag(request, "deleted"))):
            if _same(v.schema, c, normalize):
                return _answer(_version_body(subject, v))
        raise _Refusal(404, 40403, "Schema not found")

    async def delete_subject(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        versions = self.store.versions(subject, deleted=True)
        live = [v for v in versions if not v.deleted]
        if not _flag(request, "permanent"):
            if not live:
                raise _Refusal(
                    404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
                )
            for v in live:
                v.deleted = True
            return _answer([v.number for v in live])
        if live:
            raise _Refusal(
                404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
            )
        del self.store.subjects[subject]
        return _answer([v.number for v in versions])

    async def delete_version(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        v = self.store.version(subject, request.match_info["version"], deleted=True)
        if not _flag(request, "permanent"):
            if v.deleted:
                raise _Refusal(
                    404,
                    40406,
                    f"Subject '{subject}' Version {v.number} was soft deleted.Set permanent=true to delete permanently",
                )
            v.deleted = True
            return _answer(v.number)
        if not v.deleted:
            raise _Refusal(
                404,
                40407,
                f"Subject '{subject}' Version {v.number} was not deleted first before being permanently deleted",
            )
        remaining = [x for x in self.store.subjects[subject] if x is not v]
        if remaining:
            self.store.subjects[subject] = remaining
        else:
            del self.store.subjects[subject]
        return _answer(v.number)

    # -------------------------------------------------------- compatibility

    async def compatibility(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        c = self._candidate(await _json_body(request), _flag(request, "normalize"))
        v = self.store.version(subject, request.match_info["version"])
        base = self.store.level_of(subject).removesuffix("_TRANSITIVE")
        return _compat_answer(request, _problems(base, c, [v]))

    async def compatibility_all(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        c = self._candidate(await _json_body(request), _flag(request, "normalize"))
        live = [v for v in self.store.subjects.get(subject, []) if not v.deleted]
        return _compat_answer(request, _problems(self.store.level_of(subject), c, live))

    # -------------------------------------------------------- config and mode

    async def get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        if subject is None:
            return _answer({"compatibilityLevel": self.store.level})
        level = self.store.levels.get(subject)
        if level is None and _flag(request, "defaultToGlobal"):
            level = self.store.level
        if level is None:
            raise _Refusal(
                404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
            )
        return _answer({"compatibilityLevel": level})

    async def put_config(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        level = str(body.get("compatibility") or body.get("compatibilityLevel") or "").upper()
        if level not in avro.LEVELS:
            raise _Refusal(
                422,
                42203,
                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                "backward_transitive, forward_transitive, and full_transitive",
            )
        subject = request.match_info.get("subject")
        if subject is None:
            self.store.level = level
        else:
            self.store.levels[subject] = level
        return _answer({"compatibility": level})

    async def delete_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        if subject is None:
            previous, self.store.level = self.store.level, DEFAULT_LEVEL
            return _answer({"compatibilityLevel": previous})
        if subject not in self.store.levels:
            raise _subject_not_found(subject)
        return _answer({"compatibilityLevel": self.store.levels.pop(subject)})

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        if subject is None:
            return _answer({"mode": self.store.mode})
        mode = self.store.modes.get(subject)
        if mode is None and _flag(request, "defaultToGlobal"):
            mode = self.store.mode
        if mode is None:
            raise _Refusal(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")
        return _answer({"mode": mode})

    async def put_mode(self, request: web.Request) -> web.Response:
        mode = str((await _json_body(request)).get("mode", "")).upper()
        if mode not in MODES:
            raise _Refusal(
                422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT."
            )
        subject = request.match_info.get("subject")
        if subject is None:
            self.store.mode = mode
        else:
            self.store.modes[subject] = mode
        return _answer({"mode": mode})

    async def delete_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        if subject is None:
            previous, self.store.mode = self.store.mode, "READWRITE"
            return _answer({"mode": previous})
        if subject not in self.store.modes:
            raise _subject_not_found(subject)
        return _answer({"mode": self.store.modes.pop(subject)})

    async def associations(self, request: web.Request) -> web.Response:
        """None kept: confluent-kafka 2.16's default subject name strategy asks first, then falls back to TOPIC."""
        return _answer([])

    # -------------------------------------------------------- request bodies

    def _candidate(self, body: Mapping[str, Any], normalize: bool) -> _Candidate:
        """The schema of a request body, validated (42201) and, for Avro with ``normalize``, in normal form."""
        text, kind = body.get("schema"), body.get("schemaType") or "AVRO"
        if kind not in SCHEMA_TYPES:
            raise _invalid(f"unknown schemaType {kind!r}; this registry knows {', '.join(SCHEMA_TYPES)}")
        if not isinstance(text, str) or not text.strip():
            raise _invalid("empty schema")
        references = self._references(body.get("references") or [])
        if kind == "PROTOBUF":
            return _Candidate(kind, text, references, None)
        try:
            compact = json.dumps(json.loads(text), separators=(",", ":"))
        except ValueError as exc:
            raise _invalid(f"{kind} schema is not JSON: {exc}") from None
        if kind == "JSON":
            return _Candidate(kind, compact, references, None)
        try:
            parsed = avro.parse_avro(text, self._named(references))
        except avro.InvalidAvroSchema as exc:
            raise _invalid(str(exc)) from None
        return _Candidate(kind, avro.normal_form(parsed) if normalize else compact, references, parsed)

    def _references(self, refs: Any) -> list[dict[str, Any]]:
        """``references`` as stored: each must name an existing subject version (42201 otherwise)."""
        if not isinstance(refs, list):
            raise _invalid("references must be a list")
        out = []
        for ref in refs:
            if not isinstance(ref, dict) or not {"name", "subject", "version"} <= ref.keys():
                raise _invalid(f"a reference needs name, subject and version: {ref!r}")
            try:
                v = self.store.version(str(ref["subject"]), str(ref["version"]))
            except _Refusal:
                raise _invalid(f"reference {ref['name']!r}: {ref['subject']} version {ref['version']} not found")
            out.append({"name": ref["name"], "subject": ref["subject"], "version": v.number})
        return out

    def _named(self, references: list[dict[str, Any]]) -> dict[str, Any]:
        """The named Avro types the referenced schemas (and theirs, already parsed) define."""
        named: dict[str, Any] = {}
        for ref in references:
            s = self.store.version(ref["subject"], str(ref["version"])).schema
            if s.avro is not None:
                named.update(s.avro.named)
        return named


def _same(s: _Schema, c: _Candidate, normalize: bool) -> bool:
    """Whether stored ``s`` is the schema ``c`` (in normal form on both sides for Avro with ``normalize``)."""
    if s.type != c.type or s.references != c.references:
        return False
    if normalize and s.avro is not None and c.avro is not None:
        return avro.normal_form(s.avro) == avro.normal_form(c.avro)
    return s.text == c.text


def _problems(level: str, c: _Candidate, olds: list[_Version]) -> list[str]:
    """Why ``c`` is incompatible with ``olds`` at ``level``: Avro by resolution; other types not checked."""
    if level == "NONE" or not olds:
        return []
    changed = [v.number for v in olds if v.schema.type != c.type]
    if changed:
        return [f"schemaType {c.type} differs from version {changed[-1]}'s {olds[-1].schema.type}"]
    if c.avro is None:
        return []
    return avro.check_level(level, c.avro, [(v.number, v.schema.avro) for v in olds if v.schema.avro is not None])


def _compat_answer(request: web.Request, problems: list[str]) -> web.Response:
    body: dict[str, Any] = {"is_compatible": not problems}
    if _flag(request, "verbose"):
        body["messages"] = problems
    return _answer(body)


def _version_body(subject: str, v: _Version) -> dict[str, Any]:
    return {"subject": subject, "version": v.number, "id": v.schema.id, "guid": v.schema.guid, **v.schema.body()}


def _registered(subject: str, v: _Version) -> dict[str, Any]:
    return {"id": v.schema.id, "guid": v.schema.guid, "subject": subject, "version": v.number}


# ----------------------------------------------------------------- the public object



def _authorizations(basic_auth: tuple[str, str] | None, bearer_token: str | None) -> frozenset[str] | None:
    """The ``Authorization`` headers the registry lets in (either credential), or None: no authentication."""
    allowed: set[str] = set()
    if basic_auth is not None:
        if not (isinstance(basic_auth, tuple) and len(basic_auth) == 2 and all(isinstance(x, str) for x in basic_auth)):
            raise ValueError("basic_auth must be a (user, password) tuple of str")
        import base64

        allowed.add("Basic " + base64.b64encode(f"{basic_auth[0]}:{basic_auth[1]}".encode()).decode("ascii"))
    if bearer_token is not None:
        if not isinstance(bearer_token, str) or not bearer_token:
            raise ValueError("bearer_token must be a non-empty str")
        allowed.add(f"Bearer {bearer_token}")
    return frozenset(allowed) if allowed else None


class SchemaRegistry(LoopThreadService):
    """An in-memory Confluent-compatible Schema Registry on ``http://host:port``, for tests.

    ``basic_auth=(user, password)`` and/or ``bearer_token=`` make it answer 401 (error code
    40101) to a request without those credentials, to test a client's authentication;
    ``ssl_context=`` (a server context) serves HTTPS, and ``url`` says ``https``.

    See the module docstring for the API it serves and how it differs from the
    real one. It serves from construction until :meth:`close`; ``port=0``
    lets the OS pick a port, kept across :meth:`stop`/:meth:`start`.
    """

    _kind = "SchemaRegistry"
    _closed_error = RegistryClosedError

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        basic_auth: tuple[str, str] | None = None,
        bearer_token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
            raise ValueError(f"ssl_context must be an ssl.SSLContext (a server one) or None, got {type(ssl_context).__name__}")
        self._ssl_context = ssl_context
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int in 0..65535, got {port!r}")
        self.host = host
        self.port: int = port
        self._faults = _Faults()
        self._faults.authorizations = _authorizations(basic_auth, bearer_token)
        self._start_thread("schema-registry")
        try:
            self._server: _Server = self._run(self._make_server())
            self.start()
        except BaseException:
            self.close()
            raise
        self._thread.name = f"schema-registry-{self.port}"

    async def _make_server(self) -> _Server:
        return _Server(self._faults, self._ssl_context)  # made on the loop that owns its Event

    # ------------------------------------------------------------ state

    @property
    def url(self) -> str:
        """The base URL clients take (``{"url": registry.url}``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self._ssl_context is not None else 'http'}://{host}:{self.port}"

    @property
    def requests(self) -> list[tuple[str, str]]:
        """``(method, path with query)`` of every request received since the last :meth:`clear_requests`, in order."""
        with self._faults.lock:
            return list(self._faults.requests)

    def clear_requests(self) -> None:
        """Forget the requests logged so far (to count only what a test's step makes)."""
        with self._faults.lock:
            self._faults.requests.clear()

    # ------------------------------------------------------------ faults

    def fail_next(self, status: int = 500, count: int = 1, body: str | bytes | Mapping[str, Any] | None = None) -> None:
        """The next ``count`` requests answer ``status`` (400..599) instead of being served.

        ``body``: the answer's body (a mapping is sent as JSON); by default the
        registry's error shape, ``{"error_code": status, "message": ...}``.
        Faults queue up in the order they were set (with :meth:`garbage_next`).
        """
        if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
            raise ValueError(f"status must be an HTTP error status (400..599), got {status!r}")
        _check_count(count)
        if body is None:
            body = {"error_code": status, "message": f"Injected failure (SchemaRegistry.fail_next({status}))"}
        if isinstance(body, Mapping):
            raw = json.dumps(body).encode()
        elif isinstance(body, str):
            raw = body.encode()
        elif isinstance(body, bytes):
            raw = body
        else:
            raise TypeError(f"body must be str, bytes, a mapping or None, got {type(body).__name__}")
        self._queue(_Fault(count, status, raw, CONTENT_TYPE))

    def garbage_next(self, count: int = 1) -> None:
        """The next ``count`` requests answer 200 with a body that is not JSON (an HTML page)."""
        _check_count(count)
        self._queue(_Fault(count, 200, GARBAGE, CONTENT_TYPE))

    def delay(self, seconds: float) -> None:
        """Every request from now on waits ``seconds`` before it is answered; ``delay(0)`` ends it.

        ``delay(0)`` (and :meth:`stop`) also releases the requests waiting now.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
            raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r}")
        with self._faults.lock:
            self._faults.delay = float(seconds)
        if seconds == 0:
            self._run(self._server.release_delayed())

    def clear_faults(self) -> None:
        """Drop the queued :meth:`fail_next`/:meth:`garbage_next` faults and the delay."""
        with self._faults.lock:
            self._faults.queue.clear()
        self.delay(0)

    def _queue(self, fault: _Fault) -> None:
        if self._closed:
            raise RegistryClosedError(f"{self!r} is closed")
        with self._faults.lock:
            self._faults.queue.append(fault)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Serve (again, after :meth:`stop`) on the same port, with the same contents; no-op while serving."""
        self.port = self._run(self._server.start(self.host, self.port))

    def stop(self) -> None:
        """Close the listener and every connection (clients see the registry down); contents are kept."""
        self._run(self._server.stop())

    @property
    def serving(self) -> bool:
        """Whether the registry accepts connections (between :meth:`start` and :meth:`stop`)."""
        return not self._closed and self._server.runner is not None

    def _shutdown(self) -> Coroutine[Any, Any, None] | None:
        """At ``close()``: stop serving (then the loop stops and the thread is joined, even if this failed)."""
        server: _Server | None = getattr(self, "_server", None)
        return None if server is None else server.stop()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("serving" if self._server_running() else "stopped")
        return f"<SchemaRegistry {self.url} {state}>"

    def _server_running(self) -> bool:
        server: _Server | None = getattr(self, "_server", None)
        return server is not None and server.runner is not None


def _check_count(count: int) -> None:
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"count must be an int >= 1, got {count!r}")
