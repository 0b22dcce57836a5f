"""Who a caller is: agent tokens checked against the store (``engine.auth.tokens``). No World needed."""

from __future__ import annotations

from engine.auth.tokens import authenticate, hash_secret, new_secret, parse_token, scope_allows, token_string

__all__ = ["authenticate", "hash_secret", "new_secret", "parse_token", "scope_allows", "token_string"]
