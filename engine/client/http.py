"""Calling a running server over HTTP: :class:`ServerClient` and the facades the CLI uses in client mode.

:class:`RemoteFacade` stands in for the World (``facade="world"``) or the governance calls
(``facade="governance"``): ``facade.get_task("t1", actor="@token")`` is sent as
``POST /v1/world/get_task`` with ``{"positional": ["t1"], "arguments": {"actor": "@token"}}``. The server
binds the arguments with the call's own signature and makes the token's agent its principal. An error
answer (``application/problem+json``) is raised as :class:`RemoteError`, which carries the server's
stable code, message, exit code and fields, so the CLI reports it exactly as in process.

No redirect is ever followed (:func:`open_url`): a ``3xx`` answer is ``ServerUnreachable`` naming its
``Location``, so the bearer token never goes to another host (urllib's default opener re-sends the
``Authorization`` header to wherever a redirect points).
"""

from __future__ import annotations

import importlib
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import IO, Any

from engine.errors import InvalidInput, PMWError, ServerUnreachable

DEFAULT_TIMEOUT_S = 60.0
#: What a client sends for "the token's agent" where a principal is expected (the CLI's ``--as`` when it
#: was not given); the server fills in the token's agent.
TOKEN_AGENT = "@token"
#: The problem document's own members: in a document without ``fields`` (an older server) every other member
#: is one of the error's fields.
_PROBLEM_MEMBERS = ("type", "title", "status", "detail", "instance", "code", "exit_code", "message", "fields")
_MODEL_PREFIX = "engine."


class RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is never followed: urllib then raises the ``3xx`` as an ``HTTPError``."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Any, newurl: str) -> None:
        return None


_OPENER = urllib.request.build_opener(RefuseRedirects)


def open_url(request: urllib.request.Request, timeout_s: float, server: str) -> Any:
    """``request`` sent with an opener that follows no redirect: its response (a context manager), an
    ``urllib.error.HTTPError`` for a 4xx/5xx answer, ``ServerUnreachable`` (naming the ``Location``) for a
    3xx one, ``urllib.error.URLError`` / ``OSError`` when nothing answered."""
    try:
        return _OPENER.open(request, timeout=timeout_s)
    except urllib.error.HTTPError as exc:
        if not 300 <= exc.code < 400:
            raise
        location = str(exc.headers.get("Location", "") if exc.headers is not None else "")
        exc.close()
        raise ServerUnreachable(server, f"HTTP {exc.code}: redirected to {location[:200]!r}, not followed (the "
                                        "token would go with it); use the server's own address") from None


class RemoteError(PMWError):
    """An error the server answered: its ``code``, ``message``, ``exit_code`` and fields, as sent. The fields
    are the document's ``fields`` object (all of the error's fields, one named like a member, e.g.
    ``IllegalTransition.status``, included); a document without it (an older server) has them as its
    members other than the problem document's own."""

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(str(problem.get("detail") or problem.get("message") or "the server refused the call"))
        self.remote_code = str(problem.get("code") or "pmw_error")
        exit_code = problem.get("exit_code")
        self.remote_exit = exit_code if isinstance(exit_code, int) and 1 <= exit_code <= 125 else 1
        sent = problem.get("fields")
        self.fields = dict(sent) if isinstance(sent, dict) else {
            k: v for k, v in problem.items() if k not in _PROBLEM_MEMBERS}
        #: the problem document as sent (``engine.client.errors`` rebuilds the typed error from it)
        self.problem = dict(problem)

    @property  # the server's code, per instance
    def code(self) -> str:  # type: ignore[override]
        return self.remote_code

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return self.remote_exit

    def details(self) -> dict[str, Any]:
        return dict(self.fields)


class ServerClient:
    """One server (``http://127.0.0.1:PORT``) and the token every request carries."""

    def __init__(self, server: str, token: str | None, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        parsed = urllib.parse.urlsplit(server)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidInput("PMW_SERVER", f"{server!r} is not an http(s) URL like http://127.0.0.1:8765")
        self.server = server.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request; the decoded answer, or :class:`RemoteError` / :class:`ServerUnreachable`."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with open_url(req, self.timeout_s, self.server) as response:
                return _decoded(response.read(), self.server)
        except urllib.error.HTTPError as exc:
            try:
                raw = exc.read()
            finally:
                exc.close()  # the error holds the connection: never leave it to the garbage collector
            answer = _decoded(raw, self.server)
            if "code" in answer:
                raise RemoteError(answer) from None
            raise ServerUnreachable(self.server, f"HTTP {exc.code} without a PMW error") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ServerUnreachable(self.server, str(getattr(exc, "reason", exc))) from None

    def call(self, facade: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], *,
             rebuild: bool = True) -> Any:
        """One call of ``facade`` (``world`` or ``governance``); its result, models rebuilt when the
        server names them (only models of this package are ever imported). ``rebuild=False``: the JSON as
        sent (what ``--json`` prints; it spares the client importing pydantic)."""
        answer = self.request("POST", f"/v1/{facade}/{urllib.parse.quote(name, safe='')}",
                              {"arguments": kwargs, "positional": list(args)})
        return rebuilt(answer.get("result"), answer.get("model")) if rebuild else answer.get("result")

    def health(self) -> dict[str, Any]:
        """The server's health report (a degraded server answers it with 503, raised as RemoteError)."""
        return self.request("GET", "/v1/health")


class RemoteFacade:
    """The World (or the governance calls) of a server: any method name becomes a call of it."""

    def __init__(self, client: ServerClient, facade: str, *, rebuild: bool = True) -> None:
        self._client = client
        self._facade = facade
        self._rebuild = rebuild

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._client.call(self._facade, name, args, kwargs, rebuild=self._rebuild)
        return call


def rebuilt(value: Any, model: Any) -> Any:
    """``value`` as the models ``model`` (``module:Class``) names, when it names one of this package's;
    else as sent."""
    if not isinstance(model, str) or not model.startswith(_MODEL_PREFIX) or value is None:
        return value
    module_name, _, attr = model.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError):
        return value
    if getattr(cls, "model_validate", None) is None:
        return value
    from engine.service.wire import revived  # pydantic is loaded already: cls is a model (bytes as sent)

    if isinstance(value, list):
        return [revived(cls, v) for v in value]
    return revived(cls, value)


def _decoded(raw: bytes, server: str) -> dict[str, Any]:
    try:
        found = json.loads(raw or b"{}")
    except ValueError:
        raise ServerUnreachable(server, "the answer is not JSON (is this a PMW server?)") from None
    if not isinstance(found, dict):
        raise ServerUnreachable(server, "the answer is not a JSON object")
    return found


__all__ = ["TOKEN_AGENT", "RefuseRedirects", "RemoteError", "RemoteFacade", "ServerClient", "open_url", "rebuilt"]
