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
- The token is checked again before each wake is read and at least every :data:`CHECK_S` seconds: a
  revoked or expired token (or a removed agent) ends the stream with ``event: end`` (``data``: the error
  as the calls report it: ``code``, ``message`` and its fields). So do a stopped server
  (``feed_stopped``), a client too slow to take its wakes (``overflow``: resume from the last id) and a PDP
  that cannot answer (``policy_unavailable``). The client reconnects with its last id and misses nothing.

No lock is held while a stream waits: it waits on its subscription; each read takes the dispatcher's lock
for one call, on a worker thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from engine.errors import (
    InvalidInput,
    NotFound,
    NotPermitted,
    PMWError,
    PolicyUnavailable,
    StoreUnavailable,
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


def frame(event: str, data: Any, event_id: int | None = None) -> bytes:
    """One SSE event (``data`` as one line of JSON)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'), sort_keys=True)}\n\n".encode()


def end_frame(sub: WakeSubscription) -> bytes:
    """The ``end`` event of a subscription that ended (its ``end_reason`` as ``code``; ``replay_too_far``
    with the error's fields)."""
    if sub.end_reason == "replay_too_far":
        return frame("end", to_wire(replay_too_far(sub).to_dict()))
    reason = str(sub.end_reason)
    return frame("end", {"code": reason, "message": _END_REASONS.get(reason, "")})


def mount(app: FastAPI, service: Service) -> None:
    """Add the stream route to ``app``."""
    dispatch = service.dispatch
    own_agent = spec_of(WORLD_CALLS, "world", "get_wake")  # a read: any token scope; its principal: actor

    def authorize(token: str | None, agent_id: str) -> TokenPrincipal:
        """The token's principal, when ``agent_id`` is its agent (the calls' own principal check)."""
        principal = dispatch.principal(token)
        bind(own_agent, principal, {"actor": agent_id})
        return principal

    def read_wake(token: str | None, wake_id: str) -> Any:
        return to_wire(dispatch.run(token, lambda p: dispatch.world_call(p, "get_wake", {"wake_id": wake_id})))

    async def events(token: str | None, principal: TokenPrincipal, sub: WakeSubscription, resuming: bool
                     ) -> AsyncIterator[bytes]:
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
                        yield frame("end", to_wire(exc.to_dict()))
                        return
                    last_check = last_beat = now
                    yield frame("wake", wake, notice.seq)
                    continue
                if sub.end_reason is not None:
                    yield end_frame(sub)
                    return
                if now - last_check >= CHECK_S:
                    try:
                        await to_thread.run_sync(dispatch.principal, token)
                    except PMWError as exc:
                        yield frame("end", to_wire(exc.to_dict()))
                        return
                    last_check = now
                if now - last_beat >= HEARTBEAT_S:
                    yield b": heartbeat\n\n"
                    last_beat = now
        finally:
            sub.close()

    @app.get(PATH)
    async def wakes_stream(agent_id: str, request: Request) -> Response:
        token = bearer(request)
        try:
            principal = await to_thread.run_sync(authorize, token, agent_id)
            after = last_event_id(request)
            sub = service.wake_feed.subscribe(principal.agent_id, after)
        except PMWError as exc:
            return problem(exc)
        return StreamingResponse(events(token, principal, sub, after is not None), media_type="text/event-stream",
                                 headers=HEADERS)


_END_REASONS = {
    "overflow": "the client took its wakes too slowly; reconnect with Last-Event-ID",
    "feed_stopped": "the server is stopping; reconnect with Last-Event-ID",
    "closed": "the stream was closed",
}


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


__all__ = ["CHECK_S", "HEARTBEAT_S", "PATH", "frame", "last_event_id", "mount"]
