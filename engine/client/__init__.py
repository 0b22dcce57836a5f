"""A client of ``pmw serve``: what the CLI (and any Python program) uses to call a running server.

Stdlib only at import time, so a CLI call against a server starts fast (no SQLAlchemy, gRPC, Cerbos or
durable_rules in the client process).
"""
