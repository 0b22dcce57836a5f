"""An agent's wakes as a server-sent-events stream: ``GET /v1/agents/{agent_id}/wakes/stream``.

- ``Authorization: Bearer <token>`` is required (401 ``unauthenticated``, problem+json); ``{agent_id}`` must
  be the token's agent, checked as every call's principal is (``engine.service.calls.bind``: 403
  ``not_permitted``). Both before the stream starts.
- The stream (``text/event-stream``) opens with ``event: ready`` (``data``: the agent and the feed's log
  position; with ``id: <position>`` when the request does not resume), then one event per wake queued for
  the agent::

      id: <seq>            the log position of the event that queued the wake
      event: wake
      data: {...}          the wake, read through the dispatcher as the token's agent (``World.get_wake``)

  A wake the agent may not read is not sent. Comments (``: heartbeat``) keep an idle stream alive.
- Resume: a request with ``Last-Event-ID: <seq>`` first gets, from the log, every wake of the agent queued
  after ``seq`` (those queued while it was away), then the live ones: none lost, none twice
  (``engine.service.wake_feed``). A bad ``Last-Event-ID`` is 400 ``invalid_input``. One more than the
  feed's ``replay_limit`` positions behind reads nothing: the stream ends at once with ``end`` /
  ``replay_too_far`` (``after_seq``, ``position``, ``limit``): re-sync with a fresh read (``list_wakes``),
  then stream from ``position``.
- One token holds at most :data:`DEFAULT_STREAMS_PER_TOKEN` (8) open streams (``PMW_SSE_STREAMS_PER_TOKEN``,
  read when the route is mounted): one more is refused **429** ``too_many_streams`` (problem+json, fields
  ``limit``, ``per``) before it opens; the open ones go on, and another token's streams are never refused
  for it. (Refused rather than closing the oldest: a client that leaks streams learns at once, and a
  second holder of the token cannot cut the first one's streams.)
- The token is checked again before each wake is read and, while idle, through ONE check shared by all the
  streams of that token (:class:`TokenStreams`: at most one authentication per token every
  :data:`CHECK_S` seconds, whatever its number of streams): a revoked or expired token (or a removed
  agent) ends every stream of it within about ``2 * CHECK_S`` with ``event: end`` (``data``: the error as
  a problem document has it: ``code``, ``message``, the error's fields in ``fields``, :func:`end_data`). So
  do a stopped server
  (``feed_stopped``), a client too slow to take its wakes (``overflow``: resume from the last id) and a PDP
  that cannot answer (``policy_unavailable``). The client reconnects with its last id and misses nothing.

No lock is held while a stream waits: it waits on its subscription; each read takes the dispatcher's lock
for one call, on a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from engine.errors import (
    InvalidInput,
    NotFound,
    NotPermitted,
    PMWError,
    PolicyUnavailable,
    StoreUnavailable,
    TooManyStreams,
    Unauthenticated,
)
from engine.models.tokens import TokenPrincipal
from engine.service.calls import WORLD_CALLS, bind, spec_of
from engine.service.http_app import bearer, problem
from engine.service.wake_feed import WakeNotice, WakeSubscription, replay_too_far
from engine.service.wire import to_wire

if TYPE_CHECKING:
    from engine.service.host import Service

PATH = "/v1/agents/{agent_id}/wakes/stream"
#: Seconds between two checks of the token while nothing happens (a revocation ends the stream within it).
CHECK_S = 0.5
#: Seconds between two heartbeat comments on an idle stream.
HEARTBEAT_S = 5.0
MAX_LAST_EVENT_ID_CHARS = 20
#: Open streams one token may hold (``PMW_SSE_STREAMS_PER_TOKEN`` overrides it).
DEFAULT_STREAMS_PER_TOKEN = 8
STREAMS_ENV = "PMW_SSE_STREAMS_PER_TOKEN"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def last_event_id(request: Request) -> int | None:
    """The ``Last-Event-ID`` header as a log position (None when absent or empty); ``InvalidInput`` else."""
    raw = request.headers.get("last-event-id")
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if len(text) > MAX_LAST_EVENT_ID_CHARS or not text.isdigit() or not text.isascii():
        raise InvalidInput("Last-Event-ID", "must be the id of an event of this stream (a log position)")
    return int(text)


def streams_per_token(env: Mapping[str, str] | None = None) -> int:
    """The cap of open streams per token from ``env`` (``os.environ``): ``PMW_SSE_STREAMS_PER_TOKEN``, default
    :data:`DEFAULT_STREAMS_PER_TOKEN`; ``InvalidInput`` naming the variable unless a positive integer."""
    raw = (os.environ if env is None else env).get(STREAMS_ENV, "").strip()
    if not raw:
        return DEFAULT_STREAMS_PER_TOKEN
    if not raw.isdigit() or not raw.isascii() or int(raw) < 1:
        raise InvalidInput(STREAMS_ENV, f"{raw[:40]!r} is not a positive integer")
    return int(raw)


class TokenStreams:
    """The open streams of one token and the one validity check they share: :meth:`check` authenticates
    the token again (on a worker thread, through the dispatcher) at most once every :data:`CHECK_S`
    seconds; every other stream of the token gets that answer. Used on the server's event loop only."""

    def __init__(self, authenticate: Callable[[str | None], object]) -> None:
        self._authenticate = authenticate
        self.open = 0
        #: authentications this token's streams made (what the sharing saves is measurable)
        self.checks = 0
        self._checked_at = -math.inf
        self._error: PMWError | None = None
        self._lock = asyncio.Lock()

    async def check(self, token: str | None) -> PMWError | None:
        """The error that ends the streams (None: the token is still good), at most ``CHECK_S`` old."""
        async with self._lock:
            if _loop_time() - self._checked_at >= CHECK_S:
                try:
                    await to_thread.run_sync(self._authenticate, token)
                    self._error = None
                except PMWError as exc:
                    self._error = exc
                self.checks += 1
                self._checked_at = _loop_time()
            return self._error


class StreamSlots:
    """The open streams of every token, by token id, each token at most ``limit`` (event loop only)."""

    def __init__(self, limit: int, authenticate: Callable[[str | None], object]) -> None:
        self.limit = limit
        self._authenticate = authenticate
        self.tokens: dict[str, TokenStreams] = {}

    def acquire(self, token_id: str) -> TokenStreams:
        """One more open stream of ``token_id``; ``TooManyStreams`` (nothing taken) when it holds ``limit``."""
        entry = self.tokens.get(token_id)
        if entry is None:
            entry = self.tokens[token_id] = TokenStreams(self._authenticate)
        if entry.open >= self.limit:
            raise TooManyStreams(self.limit)
        entry.open += 1
        return entry

    def release(self, token_id: str, entry: TokenStreams) -> None:
        """One stream of ``token_id`` closed (the token's entry is forgotten with its last stream)."""
        entry.open -= 1
        if entry.open <= 0 and self.tokens.get(token_id) is entry:
            del self.tokens[token_id]


class ClosingStream(StreamingResponse):
    """A streamed answer that calls ``on_close`` once it ends, however it ends (the client gone before the
    first byte included: a generator never started runs no ``finally``)."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


def frame(event: str, data: Any, event_id: int | None = None) -> bytes:
    """One SSE event (``data`` as one line of JSON)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'), sort_keys=True)}\n\n".encode()


#: The members of an ``end`` event's data that are not the error's fields.
END_MEMBERS = frozenset({"code", "message", "fields"})


def end_data(exc: PMWError) -> dict[str, Any]:
    """An ``end`` event's data for ``exc``, as a problem document has it: ``code``, ``message``, every field
    of the error in ``fields``, and each also as a member of its own name unless that is one of
    :data:`END_MEMBERS`."""
    fields = to_wire(exc.details())
    return {**{k: v for k, v in fields.items() if k not in END_MEMBERS}, "code": exc.code, "message": exc.message,
            "fields": fields}


def end_frame(sub: WakeSubscription) -> bytes:
    """The ``end`` event of a subscription that ended (its ``end_reason`` as ``code``; ``replay_too_far``
    with the error's fields)."""
    if sub.end_reason == "replay_too_far":
        return frame("end", end_data(replay_too_far(sub)))
    reason = str(sub.end_reason)
    return frame("end", {"code": reason, "message": _END_REASONS.get(reason, "")})


async def stream_events(read_wake: Callable[[str | None, str], Any], token: str | None,
                        principal: TokenPrincipal, sub: WakeSubscription, resuming: bool, shared: TokenStreams
                        ) -> AsyncIterator[bytes]:
    """The stream's events (see the module docstring): ``ready``, the wakes read with ``read_wake(token,
    wake_id)``, heartbeats, and ``end``; the token checked through ``shared`` while idle."""
    loop_time = _loop_time
    try:
        ready = {"agent_id": principal.agent_id, "position": sub.live_from, "resumed_after": sub.after_seq}
        yield frame("ready", ready, None if resuming else sub.live_from)
        last_check = last_beat = loop_time()
        while True:
            notice: WakeNotice | None = await sub.next_notice(CHECK_S)
            now = loop_time()
            if notice is not None:
                try:
                    wake = await to_thread.run_sync(read_wake, token, notice.wake_id)
                except (NotPermitted, NotFound):
                    continue  # not a wake this agent may read: not shown
                except (Unauthenticated, PolicyUnavailable, StoreUnavailable) as exc:
                    yield frame("end", end_data(exc))
                    return
                last_check = last_beat = now
                yield frame("wake", wake, notice.seq)
                continue
            if sub.end_reason is not None:
                yield end_frame(sub)
                return
            if now - last_check >= CHECK_S:
                error = await shared.check(token)
                if error is not None:
                    yield frame("end", end_data(error))
                    return
                last_check = now
            if now - last_beat >= HEARTBEAT_S:
                yield b": heartbeat\n\n"
                last_beat = now
    finally:
        sub.close()


def mount(app: FastAPI, service: Service) -> None:
    """Add the stream route to ``app`` (the per-token cap read from the environment now:
    :func:`streams_per_token`; ``app.state.sse_slots`` holds the open streams)."""
    dispatch = service.dispatch
    slots = StreamSlots(streams_per_token(), dispatch.principal)
    app.state.sse_slots = slots
    own_agent = spec_of(WORLD_CALLS, "world", "get_wake")  # a read: any token scope; its principal: actor

    def authorize(token: str | None, agent_id: str) -> TokenPrincipal:
        """The token's principal, when ``agent_id`` is its agent (the calls' own principal check)."""
        principal = dispatch.principal(token)
        bind(own_agent, principal, {"actor": agent_id})
        return principal

    def read_wake(token: str | None, wake_id: str) -> Any:
        return to_wire(dispatch.run(token, lambda p: dispatch.world_call(p, "get_wake", {"wake_id": wake_id})))

    @app.get(PATH)
    async def wakes_stream(agent_id: str, request: Request) -> Response:
        token = bearer(request)
        try:
            principal = await to_thread.run_sync(authorize, token, agent_id)
            after = last_event_id(request)
            shared = slots.acquire(principal.token_id)
        except TooManyStreams as exc:
            return problem(exc, status=429)
        except PMWError as exc:
            return problem(exc)
        try:
            sub = service.wake_feed.subscribe(principal.agent_id, after)
        except PMWError as exc:
            slots.release(principal.token_id, shared)
            return problem(exc)

        def closed() -> None:
            sub.close()
            slots.release(principal.token_id, shared)
        return ClosingStream(stream_events(read_wake, token, principal, sub, after is not None, shared), closed,
                             media_type="text/event-stream", headers=HEADERS)


_END_REASONS = {
    "overflow": "the client took its wakes too slowly; reconnect with Last-Event-ID",
    "feed_stopped": "the server is stopping; reconnect with Last-Event-ID",
    "closed": "the stream was closed",
}


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


__all__ = ["CHECK_S", "DEFAULT_STREAMS_PER_TOKEN", "HEARTBEAT_S", "PATH", "STREAMS_ENV", "ClosingStream",
           "StreamSlots", "TokenStreams", "end_frame", "frame", "last_event_id", "mount", "streams_per_token"]
