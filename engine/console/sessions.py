"""The console's sign-in sessions: a random session id (the cookie) mapped, in the server's memory only, to
the token pasted at sign-in and a per-session CSRF secret.

A session is bound to its token's id: every request proves the token again (``Dispatcher.principal``, read
from the store), so a revoked or expired token ends its session at the next request; a principal whose
token id is not the session's is refused. Sessions are bounded (:data:`MAX_SESSIONS`, the oldest dropped
first) and idle ones expire after :data:`IDLE_S`. Nothing is written to disk; a server restart signs
everyone out.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from engine.errors import CsrfRefused

COOKIE = "pmw_console"
PRE_COOKIE = "pmw_console_pre"  # the sign-in form's own CSRF secret (double submit, before a session exists)
MAX_SESSIONS = 1000
IDLE_S = 8 * 3600.0


@dataclass
class Session:
    """One signed-in browser: its token (kept server-side only), the token's id and the form secret."""

    session_id: str
    token: str
    token_id: str
    csrf: str
    seen_at: float = field(default_factory=time.monotonic)


def new_secret() -> str:
    """A fresh unguessable value (32 random bytes, URL-safe)."""
    return secrets.token_urlsafe(32)


def check_csrf(expected: str | None, given: str | None) -> None:
    """``CsrfRefused`` unless ``given`` is ``expected`` (compared in constant time)."""
    if not given or not expected:
        raise CsrfRefused("missing")
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise CsrfRefused("mismatch")


class SessionStore:
    """The live sessions of one server, safe to use from many threads."""

    def __init__(self, *, max_sessions: int = MAX_SESSIONS, idle_s: float = IDLE_S) -> None:
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()
        self.max_sessions = max_sessions
        self.idle_s = idle_s

    def open(self, token: str, token_id: str) -> Session:
        """A new session for ``token`` (already proven by the caller); the oldest is dropped over the cap."""
        session = Session(new_secret(), token, token_id, new_secret())
        with self._lock:
            self._sessions[session.session_id] = session
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of ``session_id`` (None: none, or idle too long, which ends it)."""
        if not session_id:
            return None
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            now = time.monotonic()
            if now - session.seen_at > self.idle_s:
                del self._sessions[session_id]
                return None
            session.seen_at = now
            self._sessions.move_to_end(session_id)
            return session

    def close(self, session_id: str | None) -> None:
        """End the session (nothing happens for an unknown id)."""
        with self._lock:
            self._sessions.pop(session_id or "", None)


__all__ = ["COOKIE", "IDLE_S", "MAX_SESSIONS", "PRE_COOKIE", "Session", "SessionStore", "check_csrf", "new_secret"]
