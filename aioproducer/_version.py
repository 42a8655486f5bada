"""The package's version, at the bottom of the package: the connection sends it to brokers (ApiVersions'
``client_software_version``), and it must not import the package root (the whole producer) for it."""

__version__ = "0.1.0"
