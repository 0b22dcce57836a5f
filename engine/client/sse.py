"""Reading a server's wake stream (``GET /v1/agents/{id}/wakes/stream``, ``engine.service.sse_routes``).

:func:`parse_events` turns the bytes of a ``text/event-stream`` into :class:`SseEvent` s (the WHATWG rules
this server needs: ``id``, ``event``, ``data`` lines, comments skipped, an event ends at a blank line).
:class:`WakeStream` iterates an agent's wakes and resumes by ``Last-Event-ID`` when the connection drops or
the server ends the stream for a reason a reconnect cures (``overflow``, ``feed_stopped``, a lost
connection, a PDP that did not answer): nothing queued meanwhile is lost, nothing is delivered twice. A
refusal (no token, a revoked or expired one, another agent's stream) is raised as the typed error the
server named (``engine.client.errors``). Stdlib only.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from engine.client.errors import typed_error
from engine.client.http import RemoteError, ServerClient
from engine.errors import InvalidInput, PMWError, ServerUnreachable

#: Codes of an ``end`` event after which a reconnect (with the last id) goes on where the stream stopped.
RESUMABLE = frozenset({"overflow", "feed_stopped", "closed", "policy_unavailable", "store_unavailable"})
#: The longest wait between two reconnects (the wait doubles from ``backoff_s`` up to it).
MAX_BACKOFF_S = 2.0
#: Seconds a read may wait for a byte: the server sends a heartbeat every few seconds.
READ_TIMEOUT_S = 30.0


class _Waited(Exception):
    """Internal: ``wait_s`` passed without a wake."""


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: its ``event`` type, ``data`` (lines joined by newlines) and ``id``."""

    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


def parse_events(lines: Iterable[bytes]) -> Iterator[SseEvent]:
    """The events of a stream given line by line (a final event without its blank line is dropped)."""
    event, ident = "message", None
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield SseEvent(event, "\n".join(data), ident)
            event, data, ident = "message", [], None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            ident = value


def stream_path(agent_id: str) -> str:
    return f"/v1/agents/{urllib.parse.quote(agent_id, safe='')}/wakes/stream"


def open_stream(client: ServerClient, agent_id: str, last_event_id: int | None, *,
                read_timeout_s: float = READ_TIMEOUT_S) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """Connect to ``agent_id``'s stream (resuming after ``last_event_id``): the connection and its response,
    or the server's refusal as a typed error, or ``ServerUnreachable``."""
    parsed = urllib.parse.urlsplit(client.server)
    conn_type = http.client.HTTPSConnection if parsed.scheme == "https" else http.client.HTTPConnection
    conn = conn_type(parsed.netloc, timeout=read_timeout_s)
    headers = {"Accept": "text/event-stream"}
    if client.token:
        headers["Authorization"] = f"Bearer {client.token}"
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    try:
        conn.request("GET", parsed.path.rstrip("/") + stream_path(agent_id), headers=headers)
        response = conn.getresponse()
    except OSError as exc:
        conn.close()
        raise ServerUnreachable(client.server, str(exc)) from None
    if response.status != 200:
        raw = response.read()
        conn.close()
        try:
            problem = json.loads(raw or b"{}")
        except ValueError:
            problem = {}
        if isinstance(problem, dict) and "code" in problem:
            raise typed_error(RemoteError(problem)) from None
        raise ServerUnreachable(client.server, f"HTTP {response.status} without a PMW error")
    return conn, response


class WakeStream:
    """An agent's wakes from the server, as they are queued (an iterator of the wakes as JSON, or as
    ``engine.models.wakes.Wake`` with ``models=True``). :attr:`last_seq` is the log position of the last wake
    given (pass it as ``after_seq`` to resume in a later process). Reconnects at most ``max_reconnects``
    times in a row (waiting ``backoff_s``, doubling up to 2 s, between tries: ~35 s in all, a server restart)
    before raising the last error; :meth:`close` ends it.
    With ``wait_s``, ``next`` raises ``TimeoutError`` when no wake came within that many seconds (looked at
    on every line the server sends: its heartbeats come every few seconds); the next ``next`` reconnects
    after :attr:`last_seq`, so nothing is lost.
    """

    def __init__(self, client: ServerClient, agent_id: str, *, after_seq: int | None = None, models: bool = True,
                 max_reconnects: int = 20, backoff_s: float = 0.2, read_timeout_s: float = READ_TIMEOUT_S,
                 wait_s: float | None = None) -> None:
        if after_seq is not None and (isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < 0):
            raise InvalidInput("after_seq", "must be a log position: an integer >= 0")
        self.client = client
        self.agent_id = agent_id
        self.last_seq = after_seq
        self.models = models
        self.max_reconnects = max_reconnects
        self.backoff_s = backoff_s
        self.read_timeout_s = read_timeout_s
        self.wait_s = wait_s
        self._deadline: float | None = None
        #: how many times the stream was opened again after a drop
        self.reconnects = 0
        self._conn: http.client.HTTPConnection | None = None
        self._events: Iterator[SseEvent] | None = None
        self._closed = False

    def __iter__(self) -> WakeStream:
        return self

    def open(self) -> WakeStream:
        """Connect now (else the first ``next`` does): wakes queued from this call on are delivered. The
        server's refusal is raised here as its typed error."""
        if self._events is None and not self._closed:
            self._connect()
        return self

    def __next__(self) -> Any:
        failures = 0
        self._deadline = None if self.wait_s is None else time.monotonic() + self.wait_s
        while not self._closed:
            try:
                if self._events is None:
                    self._connect()
                assert self._events is not None
                for event in self._events:
                    if event.event == "wake" and event.id is not None:
                        self.last_seq = int(event.id)
                        return self._wake(event.json())
                    if event.event == "end":
                        self._ended(event)
                        break
                self._drop()
                failures += 1
            except _Waited:
                self._drop()  # the next call reconnects after last_seq: nothing is lost
                raise TimeoutError(f"no wake for {self.agent_id!r} within {self.wait_s} s") from None
            except (ServerUnreachable, OSError, http.client.HTTPException) as exc:
                self._drop()
                failures += 1
                if failures > self.max_reconnects:
                    self.close()
                    if isinstance(exc, PMWError):
                        raise
                    raise ServerUnreachable(self.client.server, str(exc)) from None
            if failures > self.max_reconnects:
                self.close()
                raise ServerUnreachable(self.client.server, "the wake stream kept ending")
            self.reconnects += 1
            time.sleep(min(MAX_BACKOFF_S, self.backoff_s * 2 ** (failures - 1)))
        raise StopIteration

    def _ended(self, event: SseEvent) -> None:
        """An ``end`` event: a resumable one is left to the reconnect; any other is raised, typed."""
        end = event.json()
        code = str(end.get("code"))
        if code not in RESUMABLE:
            self.close()
            raise typed_error(RemoteError({**end, "detail": end.get("message")}))

    def _connect(self) -> None:
        """Open the stream and read up to its ``ready`` event (a fresh stream's position becomes
        :attr:`last_seq`, so a reconnect resumes from where it began)."""
        self._conn, response = open_stream(self.client, self.agent_id, self.last_seq,
                                           read_timeout_s=self.read_timeout_s)
        self._events = parse_events(self._lines(response))
        for event in self._events:
            if event.event == "ready":
                if event.id is not None and self.last_seq is None:
                    self.last_seq = int(event.id)
                return
            if event.event == "end":
                self._drop()
                self._ended(event)
                raise ServerUnreachable(self.client.server, f"the wake stream ended at once: {event.data}")
        self._drop()
        raise ServerUnreachable(self.client.server, "the wake stream closed before it was ready")

    def _lines(self, response: http.client.HTTPResponse) -> Iterator[bytes]:
        while line := response.readline():
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise _Waited
            yield line

    def _wake(self, data: Any) -> Any:
        if not self.models:
            return data
        from engine.models.wakes import Wake

        return Wake.model_validate(data)

    def _drop(self) -> None:
        conn, self._conn, self._events = self._conn, None, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """End the stream (idempotent)."""
        self._closed = True
        self._drop()

    def __enter__(self) -> WakeStream:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["RESUMABLE", "SseEvent", "WakeStream", "open_stream", "parse_events", "stream_path"]
