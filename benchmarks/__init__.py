"""aioproducer's benchmark suite against its peers: ``python -m benchmarks.run``.

See ``benchmarks/README.md``. Nothing here is part of the installed package.
"""
