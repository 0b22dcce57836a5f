"""Who is asking for a console page: a token proven as the API proves it, from the session cookie or from an
``Authorization: Bearer`` header, and whether its agent governs or only reviews.

A request without a token, or with one that proves nothing (revoked, expired, malformed...), is
``Unauthenticated`` (401), exactly as the API refuses it; a session whose token no longer proves its agent
is ended. A principal that is neither a live governor (the PDP's ``agent:grant`` on itself, as
``GovernanceCalls`` decides it) nor a reviewer (its role, ``reviewer``) is ``NotPermitted`` (403). Reviewers
get read-only pages; what they may not do, the calls themselves refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fastapi import Request

from engine.console.sessions import COOKIE, Session, SessionStore, check_csrf
from engine.errors import NotPermitted, Unauthenticated
from engine.models.tokens import TokenPrincipal
from engine.service.dispatch import Dispatcher
from engine.service.http_app import bearer

Standing = Literal["governor", "reviewer"]
REVIEWER_ROLE = "reviewer"


@dataclass(frozen=True)
class Viewer:
    """A signed-in principal: its standing, and its session when it came with the cookie (None: a header)."""

    principal: TokenPrincipal
    standing: Standing
    session: Session | None

    @property
    def agent_id(self) -> str:
        return self.principal.agent_id

    @property
    def read_only(self) -> bool:
        """Whether the pages offer no action (a reviewer, or a read-scoped token)."""
        return self.standing != "governor" or self.principal.scope != "act"

    @property
    def csrf(self) -> str:
        """The form secret the pages put in every form (empty for a header-signed request: no cookie, no CSRF)."""
        return self.session.csrf if self.session is not None else ""

    def check_form(self, given: str | None) -> None:
        """``CsrfRefused`` unless the form carries the session's secret (a bearer-header request carries no
        ambient credential a foreign page could send, so it needs none)."""
        if self.session is not None:
            check_csrf(self.session.csrf, given)


def standing_of(dispatch: Dispatcher, principal: TokenPrincipal) -> Standing:
    """``governor`` or ``reviewer``, decided by the same calls any client makes; ``NotPermitted`` otherwise."""
    def ask(p: TokenPrincipal) -> Standing | None:
        allowed = dispatch.world_call(p, "allowed_actions", {"kind": "agent", "ident": p.agent_id})
        if "grant" in allowed.allowed:
            return "governor"
        agent = dispatch.world_call(p, "get_agent", {"agent_id": p.agent_id})
        return "reviewer" if agent.role_id == REVIEWER_ROLE else None
    found = dispatch.run_as(principal, ask)
    if found is None:
        raise NotPermitted(principal.agent_id, "open", "console", "console",
                           "the console is for governors (and, read-only, reviewers)")
    return found


def viewer_of(request: Request, dispatch: Dispatcher, sessions: SessionStore) -> Viewer:
    """The request's viewer (blocking: run it on a worker thread). A bearer header wins over the cookie."""
    token = bearer(request)
    session: Session | None = None
    if token is None:
        session = sessions.get(request.cookies.get(COOKIE))
        if session is None:
            raise Unauthenticated("missing")
        token = session.token
    try:
        principal = dispatch.principal(token)
    except Unauthenticated:
        if session is not None:
            sessions.close(session.session_id)
        raise
    if session is not None and principal.token_id != session.token_id:
        sessions.close(session.session_id)
        raise Unauthenticated("invalid", session.token_id)
    return Viewer(principal, standing_of(dispatch, principal), session)


__all__ = ["REVIEWER_ROLE", "Standing", "Viewer", "standing_of", "viewer_of"]
