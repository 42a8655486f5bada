"""Web-framework integrations: a producer that lives as long as the web application.

``aioproducer.integrations.fastapi`` (FastAPI/Starlette lifespan, dependency, exception
handlers) and ``aioproducer.integrations.aiohttp`` (an aiohttp ``cleanup_ctx``). Each imports
its framework, so install the matching extra (``aioproducer[fastapi]``, ``aioproducer[aiohttp]``);
the producer itself needs neither.

Both share one shutdown (``_common.shutdown_producer``): ``flush()`` bounded by the close
timeout, then ``close()`` with whatever is left of it, then one log line saying how many
records were not delivered. A web server's shutdown must end within what the orchestrator
grants it (Kubernetes kills after ``terminationGracePeriodSeconds``); losing records silently
is worse than losing them with a log line that counts them.
"""
