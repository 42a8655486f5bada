"""An asyncio client of a Confluent-compatible Schema Registry, on aiohttp.

The configuration dict is confluent-kafka's ``SchemaRegistryClient`` one, so a user's
``{"url": ..., "basic.auth.user.info": ...}`` moves over unchanged:

* ``url``: one URL or several, comma-separated; a request that cannot connect, times out or
  gets a retriable status (408, 429, 500, 502, 503, 504) tries the next URL, and a round of
  URLs is retried ``max.retries`` times (default 3) after a jittered exponential backoff from
  ``retries.wait.ms`` (1000) up to ``retries.max.wait.ms`` (20000);
* ``timeout``: seconds for one HTTP request (default 10: never a hang);
* ``basic.auth.credentials.source`` (``USER_INFO``, the default when ``basic.auth.user.info``
  is given, or ``URL``: the URL's ``user:password@``) and ``basic.auth.user.info`` (``user:password``);
* ``bearer.auth.credentials.source``: ``STATIC_TOKEN`` with ``bearer.auth.token`` (and
  ``bearer.auth.logical.cluster``, ``bearer.auth.identity.pool.id``, sent as Confluent Cloud's
  headers), or ``CUSTOM`` with ``bearer.auth.custom.provider.function`` (a callable, sync or
  async, given ``bearer.auth.custom.provider.config`` and returning a dict with
  ``bearer.auth.token`` and those two); ``OAUTHBEARER`` is refused with a ``ConfigError`` (use
  ``CUSTOM`` with your token fetch);
* ``ssl.ca.location`` (a file or directory; ``False`` turns verification off),
  ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``;
* ``cache.capacity`` (1000 schemas each way), ``cache.latest.ttl.sec`` (how long a subject's
  latest version is trusted; default: until the client is closed).

Anything else is a ``ConfigError`` naming it. One ``aiohttp.ClientSession`` per client (and per
event loop), opened at the first request and reused; ``close()`` releases it and a later request
opens a new one, so closing a client two producers share never breaks the other.

Caches both ways: a schema's id under a subject (register and lookup) and a schema by its id, so
a serializer's steady state makes no HTTP request. Errors are :class:`SchemaRegistryError` with
the registry's HTTP status, its ``error_code`` and its message (an incompatible schema is 409 with
the registry's reason), and the URL asked.

A registry's answer is not trusted: it is read up to :data:`MAX_RESPONSE_BYTES` and refused past
it, unread; an answer of the wrong JSON shape (a list where an object belongs, or the reverse) is
refused naming what came; a schema id must be what Kafka's and Confluent's clients frame, a Java
``int`` that is not negative (:func:`is_schema_id`): ``3.7``, ``true``, ``-5`` or ``2**32`` are
refused naming the value, the subject and the URL, before any record is framed with them. Each is
a :class:`SchemaRegistryError` (status 200: not retried; asking again gets the same answer).
The registry's text an error quotes never carries the request's credentials, even from a
registry or gateway that echoes the request (:mod:`aioproducer.security.redaction`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import ssl
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from aioproducer.errors import ConfigError
from aioproducer.network.http_body import BodyTooLargeError, read_capped
from aioproducer.security.redaction import authorization_secrets, redact

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "RegisteredSchema",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "is_schema_id",
]

#: Every configuration key ``SchemaRegistryClient`` takes (anything else is a ConfigError).
CONFIG_KEYS: Final = frozenset({
    "url", "timeout", "cache.capacity", "cache.latest.ttl.sec", "max.retries", "retries.wait.ms", "retries.max.wait.ms",
    "basic.auth.credentials.source", "basic.auth.user.info",
    "bearer.auth.credentials.source", "bearer.auth.token", "bearer.auth.logical.cluster", "bearer.auth.identity.pool.id",
    "bearer.auth.custom.provider.function", "bearer.auth.custom.provider.config",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
})

#: Statuses worth asking again (or asking the next URL): timeouts, throttling, a server's trouble.
RETRIABLE_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504})
_ACCEPT: Final = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
_CONTENT_TYPE: Final = "application/vnd.schemaregistry.v1+json"
#: The largest schema id: the wire format's id is a Java ``int`` (Confluent's serializers write it
#: with ``ByteBuffer.putInt``), and the registry hands out ids from 0 up.
MAX_SCHEMA_ID: Final = 2**31 - 1
#: The most of one answer read. A schema is stored as one record of the registry's ``_schemas``
#: topic, so it is at most the broker's message size (1 MiB by default, rarely raised past a few);
#: a list of every subject of a large registry (100,000 subjects of ~100 bytes) is ~10 MiB.
#: 16 MiB holds both with room, and stops a proxy's download or a lying server from growing the
#: producer's process by whatever it sends.
MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024
#: How much of a registry's unexpected answer a message quotes.
_MAX_QUOTED: Final = 200


def is_schema_id(value: object) -> bool:
    """Whether ``value`` is a schema id: an ``int`` (not a ``bool``) in ``0..2**31-1``, what the wire format frames."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SCHEMA_ID


class SchemaRegistryError(Exception):
    """The registry refused a request, or could not be asked.

    ``http_status_code`` (-1 when no answer came), ``error_code`` (the registry's, e.g. 40401
    subject not found, 409 incompatible; -1 when it gave none) and ``error_message`` (its message).
    """

    def __init__(self, http_status_code: int, error_code: int, error_message: str, url: str = "") -> None:
        self.http_status_code = http_status_code
        self.error_code = error_code
        self.error_message = error_message
        self.url = url
        where = f" ({url})" if url else ""
        super().__init__(f"schema registry{where}: HTTP {http_status_code}, error {error_code}: {error_message}")


@dataclass(frozen=True)
class SchemaReference:
    """A schema this one imports (Avro named types, Protobuf imports, JSON ``$ref``): ``name`` as used in it."""

    name: str
    subject: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema's text and type (``AVRO``, ``JSON`` or ``PROTOBUF``), as the registry stores it."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [r.to_dict() for r in self.references]
        return body

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> Schema:
        refs = tuple(
            SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in body.get("references") or ()
        )
        return cls(str(body["schema"]), str(body.get("schemaType") or "AVRO"), refs)


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema under a subject: its global ``schema_id``, its ``version`` there, and its ``guid`` if the registry gives one."""

    schema_id: int
    schema: Schema
    subject: str
    version: int
    guid: str | None = None


K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class _BadAnswer(ValueError):
    """A 2xx answer this client cannot take (its shape, a value that is not what it says); made a SchemaRegistryError with the URL.

    The message is ``before``, the offending ``value`` (shown redacted and cut short by the
    request that knows what it sent, :meth:`SchemaRegistryClient._once`), then ``after``.
    """

    def __init__(self, before: str, value: object, after: str = "") -> None:
        super().__init__(before)
        self.before, self.value, self.after = before, value, after

    def message(self, secrets: Collection[str]) -> str:
        return f"{self.before}{_shown(self.value, secrets)}{self.after}"


class _LruCache(Generic[K, V]):
    """A bounded mapping that forgets the least recently used entry first (``cache.capacity``)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


_BearerProvider = Callable[[Mapping[str, Any]], "Mapping[str, Any] | Awaitable[Mapping[str, Any]]"]


@dataclass
class _ClientConfig:
    """The client's configuration, checked: every bad value is a ConfigError naming its key."""

    urls: list[str]
    auth: tuple[str, str] | None = None
    timeout_s: float = 10.0
    cache_capacity: int = 1000
    cache_latest_ttl_s: float | None = None
    max_retries: int = 3
    retries_wait_ms: int = 1000
    retries_max_wait_ms: int = 20000
    ssl_context: ssl.SSLContext | None = None
    bearer_static: dict[str, str] | None = None
    bearer_provider: _BearerProvider | None = None
    bearer_provider_config: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, conf: Mapping[str, Any]) -> _ClientConfig:
        if not isinstance(conf, Mapping):
            raise ConfigError(f"SchemaRegistryClient(conf): conf must be a dict like {{'url': ...}}, got {type(conf).__name__}")
        rest = dict(conf)
        url = rest.pop("url", None)
        if not isinstance(url, str) or not url.strip():
            raise ConfigError(f"schema registry 'url' must be a non-empty string of one or more comma-separated URLs, got {url!r}")
        urls, url_auth = _parse_urls(url)
        cfg = cls(urls)
        cfg.timeout_s = _number(rest, "timeout", 10.0, positive=True)
        cfg.cache_capacity = int(_number(rest, "cache.capacity", 1000, positive=True))
        if rest.get("cache.latest.ttl.sec") is not None:
            cfg.cache_latest_ttl_s = _number(rest, "cache.latest.ttl.sec", 0, positive=False)
        rest.pop("cache.latest.ttl.sec", None)
        cfg.max_retries = int(_number(rest, "max.retries", 3, positive=False))
        cfg.retries_wait_ms = int(_number(rest, "retries.wait.ms", 1000, positive=False))
        cfg.retries_max_wait_ms = int(_number(rest, "retries.max.wait.ms", 20000, positive=False))
        cfg.auth = _basic_auth(rest, url_auth)
        cfg.ssl_context = _ssl_context(rest)
        _bearer(rest, cfg)
        if rest:
            raise ConfigError(f"unknown schema registry configuration: {', '.join(sorted(map(str, rest)))}")
        return cfg


def _parse_urls(value: str) -> tuple[list[str], tuple[str, str] | None]:
    urls: list[str] = []
    auth: tuple[str, str] | None = None
    for raw in value.split(","):
        raw = raw.strip().rstrip("/")
        parsed = urllib.parse.urlsplit(raw)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConfigError(f"schema registry 'url': {raw!r} is not an http(s) URL")
        if parsed.username is not None and auth is None:
            auth = (urllib.parse.unquote(parsed.username), urllib.parse.unquote(parsed.password or ""))
        netloc = parsed.hostname if parsed.port is None else f"{parsed.hostname}:{parsed.port}"
        if ":" in parsed.hostname:  # an IPv6 literal
            netloc = f"[{parsed.hostname}]" + ("" if parsed.port is None else f":{parsed.port}")
        urls.append(urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, "", "")))
    return urls, auth


def _number(rest: dict[str, Any], key: str, default: float, *, positive: bool) -> float:
    value = rest.pop(key, None)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (positive and value == 0):
        raise ConfigError(f"schema registry {key!r} must be a {'positive' if positive else 'non-negative'} number, got {value!r}")
    return float(value)


def _basic_auth(rest: dict[str, Any], url_auth: tuple[str, str] | None) -> tuple[str, str] | None:
    source = rest.pop("basic.auth.credentials.source", None)
    info = rest.pop("basic.auth.user.info", None)
    if source is None:
        source = "USER_INFO" if info is not None else "URL"
    if source == "URL":
        if info is not None:
            raise ConfigError("basic.auth.user.info is given but basic.auth.credentials.source is URL: use one of them")
        return url_auth
    if source == "USER_INFO":
        if url_auth is not None:
            raise ConfigError("basic.auth.user.info and credentials in the URL both given: remove one")
        if not isinstance(info, str) or ":" not in info:
            raise ConfigError("basic.auth.user.info must be 'user:password' (the secret is not shown)")
        user, password = info.split(":", 1)
        return user, password
    raise ConfigError(f"basic.auth.credentials.source must be USER_INFO or URL, got {source!r}")


def _ssl_context(rest: dict[str, Any]) -> ssl.SSLContext | None:
    ca = rest.pop("ssl.ca.location", None)
    cert = rest.pop("ssl.certificate.location", None)
    key = rest.pop("ssl.key.location", None)
    password = rest.pop("ssl.key.password", None)
    if ca is None and cert is None and key is None and password is None:
        return None  # aiohttp's default: the system's trust store
    if (key is not None or password is not None) and cert is None:
        raise ConfigError("ssl.key.location / ssl.key.password need ssl.certificate.location")
    try:
        if ca is False:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif isinstance(ca, str):
            context = ssl.create_default_context(capath=ca) if os.path.isdir(ca) else ssl.create_default_context(cafile=ca)
        elif ca is None:
            context = ssl.create_default_context()
        else:
            raise ConfigError(f"ssl.ca.location must be a path or False, got {ca!r}")
        if cert is not None:
            context.load_cert_chain(certfile=cert, keyfile=key, password=password)
    except (OSError, ssl.SSLError, TypeError) as exc:  # a missing file, a bad key, a path that is not a str
        raise ConfigError(f"schema registry TLS settings: {exc}") from exc
    return context


def _bearer(rest: dict[str, Any], cfg: _ClientConfig) -> None:
    source = rest.pop("bearer.auth.credentials.source", None)
    keys = ("bearer.auth.token", "bearer.auth.logical.cluster", "bearer.auth.identity.pool.id")
    given = {k: rest.pop(k) for k in keys if k in rest}
    function = rest.pop("bearer.auth.custom.provider.function", None)
    provider_config = rest.pop("bearer.auth.custom.provider.config", None)
    if source is None:
        if given or function is not None or provider_config is not None:
            raise ConfigError("bearer.auth.* is given without bearer.auth.credentials.source (STATIC_TOKEN or CUSTOM)")
        return
    if cfg.auth is not None:
        raise ConfigError("basic and bearer authentication both configured for the schema registry: use one")
    if source == "STATIC_TOKEN":
        if not isinstance(given.get("bearer.auth.token"), str) or not given["bearer.auth.token"]:
            raise ConfigError("bearer.auth.credentials.source=STATIC_TOKEN needs bearer.auth.token")
        cfg.bearer_static = {k: str(v) for k, v in given.items()}
    elif source == "CUSTOM":
        if not callable(function):
            raise ConfigError("bearer.auth.credentials.source=CUSTOM needs a callable bearer.auth.custom.provider.function")
        cfg.bearer_provider = function
        cfg.bearer_provider_config = dict(provider_config or {})
    elif source == "OAUTHBEARER":
        raise ConfigError(
            "bearer.auth.credentials.source=OAUTHBEARER is not supported by aioproducer's schema registry client: "
            "use CUSTOM with a bearer.auth.custom.provider.function that fetches the token"
        )
    else:
        raise ConfigError(f"bearer.auth.credentials.source must be STATIC_TOKEN or CUSTOM, got {source!r}")


class SchemaRegistryClient:
    """An asyncio Schema Registry client (see the module docstring for ``conf``).

    Use it as ``async with SchemaRegistryClient(conf) as client:`` or call ``await client.close()``
    at the end (a producer closes the serializers it was given, and they close their client).
    """

    def __init__(self, conf: Mapping[str, Any]) -> None:
        self._config = _ClientConfig.parse(conf)
        # Written only by the request path (_session_for); read by close().
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        capacity = self._config.cache_capacity
        #: (subject, schema, normalize) -> its RegisteredSchema: what register and lookup found.
        self._by_schema: _LruCache[tuple[str, Schema, bool], RegisteredSchema] = _LruCache(capacity)
        #: schema id -> Schema.
        self._by_id: _LruCache[int, Schema] = _LruCache(capacity)
        #: subject -> (its latest RegisteredSchema, when it was fetched on the monotonic clock).
        self._latest: dict[str, tuple[RegisteredSchema, float]] = {}

    @property
    def urls(self) -> list[str]:
        return list(self._config.urls)

    @property
    def latest_ttl_s(self) -> float | None:
        """``cache.latest.ttl.sec``: how long a latest version is trusted (None: until closed)."""
        return self._config.cache_latest_ttl_s

    # ------------------------------------------------------------------ the API
    async def register_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False) -> int:
        """Register ``schema`` under ``subject_name`` (or find it there): its global id."""
        return (await self.register_schema_full_response(subject_name, schema, normalize_schemas)).schema_id

    async def register_schema_full_response(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema:
        """As ``register_schema``, with the version and guid when the registry returns them."""
        _check_subject(subject_name)
        key = (subject_name, schema, normalize_schemas)
        cached = self._by_schema.get(key)
        if cached is not None:
            return cached
        registered = await self._request(
            "POST", f"subjects/{_quote(subject_name)}/versions", {"normalize": _bool(normalize_schemas)}, schema.to_dict(),
            parse=lambda body: _registration(body, subject_name, schema),
        )
        self._by_schema.put(key, registered)
        self._by_id.put(registered.schema_id, schema)
        return registered

    async def lookup_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False) -> RegisteredSchema:
        """The registered version of ``schema`` under ``subject_name`` (40403 if it is not there)."""
        _check_subject(subject_name)
        key = (subject_name, schema, normalize_schemas)
        cached = self._by_schema.get(key)
        if cached is not None and cached.version:
            return cached
        registered = await self._request(
            "POST", f"subjects/{_quote(subject_name)}", {"normalize": _bool(normalize_schemas)}, schema.to_dict(),
            parse=lambda body: _registered(body, subject_name, default_schema=schema),
        )
        self._by_schema.put(key, registered)
        self._by_id.put(registered.schema_id, registered.schema)
        return registered

    async def get_schema(self, schema_id: int, subject_name: str | None = None) -> Schema:
        """The schema with global id ``schema_id``."""
        if not is_schema_id(schema_id):
            raise ValueError(f"schema_id must be a schema id (an int in 0..{MAX_SCHEMA_ID}), got {schema_id!r}")
        cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        query = {"subject": subject_name} if subject_name else None
        schema = await self._request("GET", f"schemas/ids/{schema_id}", query, parse=lambda body: _schema(_object(body)))
        self._by_id.put(schema_id, schema)
        return schema

    async def get_latest_version(self, subject_name: str) -> RegisteredSchema:
        """The subject's latest version (cached for ``cache.latest.ttl.sec``, or until closed)."""
        _check_subject(subject_name)
        hit = self._latest.get(subject_name)
        ttl = self._config.cache_latest_ttl_s
        if hit is not None and (ttl is None or time.monotonic() - hit[1] < ttl):
            return hit[0]
        registered = await self._request(
            "GET", f"subjects/{_quote(subject_name)}/versions/latest", parse=lambda body: _registered(body, subject_name)
        )
        self._latest[subject_name] = (registered, time.monotonic())
        self._by_id.put(registered.schema_id, registered.schema)
        return registered

    async def get_version(self, subject_name: str, version: int | str) -> RegisteredSchema:
        """Version ``version`` (or ``"latest"``) of the subject, uncached."""
        _check_subject(subject_name)
        return await self._request(
            "GET", f"subjects/{_quote(subject_name)}/versions/{version}", parse=lambda body: _registered(body, subject_name)
        )

    async def get_subjects(self) -> list[str]:
        return await self._request("GET", "subjects", parse=lambda body: _list_of(body, str, "subject names"))

    async def get_versions(self, subject_name: str) -> list[int]:
        _check_subject(subject_name)
        return await self._request("GET", f"subjects/{_quote(subject_name)}/versions", parse=_versions)

    async def delete_subject(self, subject_name: str, permanent: bool = False) -> list[int]:
        """Delete the subject (soft, or ``permanent``); the versions it had. Forgets what was cached of it."""
        _check_subject(subject_name)
        query = {"permanent": _bool(permanent)} if permanent else None
        versions = await self._request("DELETE", f"subjects/{_quote(subject_name)}", query, parse=_versions)
        self._latest.pop(subject_name, None)
        self._by_schema.clear()
        return versions

    async def test_compatibility(self, subject_name: str, schema: Schema, version: int | str = "latest") -> bool:
        """Whether ``schema`` may be registered after ``version`` under the subject's compatibility rule."""
        _check_subject(subject_name)
        body = await self._request(
            "POST", f"compatibility/subjects/{_quote(subject_name)}/versions/{version}", None, schema.to_dict(), parse=_object
        )
        return bool(body.get("is_compatible"))

    async def set_compatibility(self, subject_name: str | None = None, level: str = "BACKWARD") -> str:
        """Set the compatibility rule of a subject, or the registry's default (``subject_name=None``)."""
        path = "config" if subject_name is None else f"config/{_quote(subject_name)}"
        body = await self._request("PUT", path, None, {"compatibility": level.upper()}, parse=_object)
        return str(body.get("compatibility") or body.get("compatibilityLevel") or level.upper())

    async def get_compatibility(self, subject_name: str | None = None) -> str:
        path = "config" if subject_name is None else f"config/{_quote(subject_name)}"
        body = await self._request("GET", path, parse=_object)
        return str(body.get("compatibilityLevel") or body.get("compatibility"))

    async def close(self) -> None:
        """Release the HTTP session now; a later request opens a new one. Caches are kept."""
        session, self._session, self._session_loop = self._session, None, None
        if session is not None and not session.closed:
            await session.close()

    async def __aenter__(self) -> SchemaRegistryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (Spark ships serializers to its workers): the session and caches stay behind."""
        state = self.__dict__.copy()
        state["_session"] = state["_session_loop"] = None
        capacity = self._config.cache_capacity
        state["_by_schema"], state["_by_id"], state["_latest"] = _LruCache(capacity), _LruCache(capacity), {}
        return state

    def __repr__(self) -> str:
        return f"<SchemaRegistryClient {','.join(self._config.urls)}>"

    # ------------------------------------------------------------------ HTTP
    async def _session_for(self) -> aiohttp.ClientSession:
        """This loop's session: one per client, reused; a new one if the client moved to another loop."""
        import aiohttp

        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._session_loop is not loop:
            old_loop = self._session_loop
            if session is not None and not session.closed and old_loop is not None and old_loop.is_running():
                # Used from another loop now (a new asyncio.run()): the old session closes on its own loop.
                asyncio.run_coroutine_threadsafe(session.close(), old_loop)
            connector = aiohttp.TCPConnector(ssl=self._config.ssl_context if self._config.ssl_context is not None else True)
            session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=self._config.timeout_s))
            self._session, self._session_loop = session, loop
        return session

    async def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {"Accept": _ACCEPT}
        if has_body:
            headers["Content-Type"] = _CONTENT_TYPE
        if self._config.auth is not None:
            user, password = self._config.auth
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        fields: Mapping[str, Any] | None = self._config.bearer_static
        provider = self._config.bearer_provider
        if provider is not None:
            got = provider(self._config.bearer_provider_config)
            fields = await got if isinstance(got, Awaitable) else got
            if not isinstance(fields, Mapping) or not fields.get("bearer.auth.token"):
                raise ConfigError("bearer.auth.custom.provider.function must return a dict with 'bearer.auth.token'")
        if fields is not None:
            headers["Authorization"] = f"Bearer {fields['bearer.auth.token']}"
            if fields.get("bearer.auth.logical.cluster"):
                headers["target-sr-cluster"] = str(fields["bearer.auth.logical.cluster"])
            if fields.get("bearer.auth.identity.pool.id"):
                headers["Confluent-Identity-Pool-Id"] = str(fields["bearer.auth.identity.pool.id"])
        return headers

    async def _request(
        self, method: str, path: str, query: Mapping[str, str] | None = None, body: Any = None, *, parse: Callable[[Any], T]
    ) -> T:
        """One request, over every URL and the retries; the answer's JSON as ``parse`` reads it, or SchemaRegistryError.

        ``parse`` raises :class:`_BadAnswer` for an answer it cannot take: a SchemaRegistryError
        naming the URL, raised at once (a 2xx: another URL or a retry would answer the same).
        """
        cfg = self._config
        last: SchemaRegistryError | None = None
        for attempt in range(cfg.max_retries + 1):
            if attempt:
                cap = min(cfg.retries_wait_ms * (2.0 ** (attempt - 1)), cfg.retries_max_wait_ms)
                await asyncio.sleep(random.random() * cap / 1000.0)  # full jitter: spread the clients out
            for url in cfg.urls:
                outcome = await self._once(url, method, path, query, body, parse)
                if not isinstance(outcome, SchemaRegistryError):
                    return outcome
                last = outcome
                if outcome.http_status_code != -1 and outcome.http_status_code not in RETRIABLE_STATUSES:
                    raise outcome  # the registry's answer (404, 409, 422, ...): asking again changes nothing
        assert last is not None
        raise last

    async def _once(
        self, base: str, method: str, path: str, query: Mapping[str, str] | None, body: Any, parse: Callable[[Any], T]
    ) -> T | SchemaRegistryError:
        """The parsed answer, or the error to retry or raise (status -1: no answer)."""
        import aiohttp

        url = f"{base}/{path}"
        session = await self._session_for()
        data = None if body is None else json.dumps(body)
        headers = await self._headers(data is not None)
        try:
            async with session.request(method, url, params=query, data=data, headers=headers) as response:
                status = response.status
                raw = await read_capped(response, MAX_RESPONSE_BYTES)
        except BodyTooLargeError as exc:
            return SchemaRegistryError(status, -1, f"answered with {exc}", url)
        except asyncio.TimeoutError:
            return SchemaRegistryError(-1, -1, f"no answer within timeout={self._config.timeout_s:g} s", url)
        except aiohttp.ClientError as exc:
            return SchemaRegistryError(-1, -1, f"cannot reach it: {exc}", url)
        return _answer(status, raw, url, self._sent_secrets(headers), parse)

    def _sent_secrets(self, headers: Mapping[str, str]) -> frozenset[str]:
        """What a request carried that is secret (its Basic or Bearer credentials), cut out of any answer an error quotes."""
        found = authorization_secrets(headers.get("Authorization", ""))
        if self._config.auth is not None:
            found.add(self._config.auth[1])
        return frozenset(found)


def _answer(status: int, raw: bytes, url: str, secrets: Collection[str], parse: Callable[[Any], T]) -> T | SchemaRegistryError:
    """A 2xx answer as ``parse`` reads it, or the error the answer is; the registry's text quoted redacted.

    A registry, or a gateway in front of it, may echo the request: its credentials must not come back out through us.
    """
    text = raw.decode("utf-8", "replace")
    decoded = _decode(text)
    if 200 <= status < 300:
        if text and decoded is _UNDECODABLE:
            return SchemaRegistryError(status, -1, f"answered with a body that is not JSON: {_shown(text, secrets)}", url)
        try:
            return parse(None if not text else decoded)
        except _BadAnswer as exc:
            return SchemaRegistryError(status, -1, exc.message(secrets), url)
    if isinstance(decoded, Mapping) and "message" in decoded:
        return SchemaRegistryError(status, _error_code(decoded.get("error_code")), redact(str(decoded["message"]), secrets), url)
    return SchemaRegistryError(status, -1, f"unexpected answer: {_shown(text, secrets)}", url)


_UNDECODABLE: Final = object()


def _decode(text: str) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return _UNDECODABLE


def _error_code(value: object) -> int:
    """The registry's ``error_code``, or -1 when it gave none that is a number."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value else -1


def _shown(value: object, secrets: Collection[str]) -> str:
    """A value from an answer, for a message: its repr, redacted, then cut short (a cut must not leave half a secret)."""
    text = redact(repr(value), secrets)
    return text if len(text) <= _MAX_QUOTED else f"{text[:_MAX_QUOTED]}..."


def _kind(value: object) -> str:
    return {dict: "a JSON object", list: "a JSON array", str: "a JSON string", bool: "a JSON boolean",
            int: "a JSON number", float: "a JSON number", type(None): "no body (or null)"}.get(type(value), type(value).__name__)


def _object(body: Any) -> Mapping[str, Any]:
    """The answer as a JSON object, which it must be."""
    if not isinstance(body, Mapping):
        raise _BadAnswer(f"answered {_kind(body)} where a JSON object belongs: ", body)
    return body


def _list_of(body: Any, kind: type[T], what: str) -> list[T]:
    """The answer as a JSON array of ``kind``, which it must be."""
    if not isinstance(body, list):
        raise _BadAnswer(f"answered {_kind(body)} where a JSON array of {what} belongs: ", body)
    wrong = [item for item in body if not isinstance(item, kind) or isinstance(item, bool)]
    if wrong:
        raise _BadAnswer(f"answered {what} with ", wrong[0], f" among them, which is not a {kind.__name__}")
    return body


def _versions(body: Any) -> list[int]:
    versions = _list_of(body, int, "versions")
    if any(v < 1 for v in versions):
        raise _BadAnswer("answered a version that is not a version (an int >= 1): ", min(versions))
    return versions


def _schema_id(body: Mapping[str, Any], subject: str) -> int:
    """The answer's ``id``, checked to be a schema id: a record must never be framed with anything else."""
    if "id" not in body:
        raise _BadAnswer(f"answered without a schema id for subject {subject!r}: ", body)
    value = body["id"]
    if not is_schema_id(value):
        raise _BadAnswer(
            "the registry returned a schema id that is not an id: ", value,
            f" for subject {subject!r} (a schema id is an int in 0..{MAX_SCHEMA_ID})",
        )
    assert isinstance(value, int)
    return value


def _schema(body: Mapping[str, Any]) -> Schema:
    """The schema in an answer (``schema``, ``schemaType``, ``references``), each checked for its type."""
    refs = body.get("references") or []
    if not isinstance(body.get("schema"), str) or not isinstance(body.get("schemaType") or "", str) or not isinstance(refs, list):
        raise _BadAnswer("answered a schema that is not one (schema a string, schemaType a string, references a list): ", body)
    try:
        return Schema.from_dict(body)
    except (KeyError, TypeError, ValueError):
        raise _BadAnswer("answered schema references that are not references: ", refs) from None


def _version(body: Mapping[str, Any], subject: str) -> int:
    """The answer's ``version``, 0 when it gives none (a registration's answer may not)."""
    version = body.get("version") or 0
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= MAX_SCHEMA_ID:
        raise _BadAnswer(f"answered a version that is not a version (an int >= 1) for subject {subject!r}: ", version)
    return version


def _registration(body: Any, subject: str, schema: Schema) -> RegisteredSchema:
    """A registration's answer: the id (checked) and version of ``schema`` under ``subject``."""
    answer = _object(body)
    return RegisteredSchema(_schema_id(answer, subject), schema, subject, _version(answer, subject), _guid(answer))


def _registered(body: Any, subject: str, default_schema: Schema | None = None) -> RegisteredSchema:
    """A version of a subject as the registry answers it: its id (checked), schema, subject and version."""
    answer = _object(body)
    schema_id = _schema_id(answer, subject)
    schema = _schema(answer) if "schema" in answer else default_schema
    if schema is None:
        raise _BadAnswer(f"answered without a schema for subject {subject!r}: ", body)
    return RegisteredSchema(schema_id, schema, str(answer.get("subject") or subject), _version(answer, subject), _guid(answer))


def _guid(body: Mapping[str, Any]) -> str | None:
    guid = body.get("guid")
    return None if guid is None else str(guid)


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _check_subject(subject: str) -> None:
    if not isinstance(subject, str) or not subject:
        raise ValueError(f"subject_name must be a non-empty str, got {subject!r}")
