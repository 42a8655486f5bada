"""Security for broker connections: TLS and SASL (issue #13)."""
