"""Web-framework integrations: a producer that lives as long as the web application.

``aioproducer.integrations.fastapi`` (FastAPI/Starlette lifespan, dependency, exception
handlers) and ``aioproducer.integrations.aiohttp`` (an aiohttp ``cleanup_ctx``). Each imports
its framework, so install the matching extra (``aioproducer[fastapi]``, ``aioproducer[aiohttp]``);
the producer itself needs neither.

Both share (``_common``) how they start, answer and stop:

* ``wait_ready=False`` starts the producer in a background task that retries until it
  started or the application stops; readiness (``Producer.ready``) is false until then.
  ``Producer.ready`` says whether the producer takes records, not whether a broker is
  reachable now: it stays true through an outage, during which requests get 503s.
* The producer errors a request can meet map to the same HTTP answers in both
  (``ERROR_STATUS``): brokers down or shutting down is 503 with ``Retry-After``.
* ``metrics_route="/metrics"`` (on ``producer_lifespan`` and ``setup_producer``) serves the
  producer's metrics in Prometheus' text format on that path, from a registry of the route's
  own holding a ``ProducerCollector`` (``aioproducer[prometheus]``; without it, ImportError at
  the call that asked for the route).
* Shutdown: ``flush()`` bounded by the close timeout, then ``close()`` with whatever is left
  of it, then one log line counting the records not delivered over the producer's life (and
  how many of them during the close). A web server's shutdown must end within what the
  orchestrator grants it (Kubernetes kills after ``terminationGracePeriodSeconds``); losing
  records silently is worse than losing them with a log line that counts them.

The defaults of ``max.block.ms`` (60 s) and ``delivery.timeout.ms`` (120 s) are a
pipeline's: a request waiting for its acknowledgement wants a few seconds (the docs'
"Web services" page, docs/how-to/web-services.md, gives sizes and reasons; the examples use them).
"""
