"""A loopback reverse proxy that adds one bearer token to every request, for the MCP conformance suite.

Why it exists: ``@modelcontextprotocol/conformance`` (``conformance server --url ...``) sends no
``Authorization`` header and has no option to send one, but ``pmw serve``'s ``/mcp`` refuses any request
without an agent's bearer token. The proxy sits between the suite and the server and adds
``Authorization: Bearer <token>`` (replacing any the client sent), and nothing else:

- every other request header is forwarded byte for byte, ``Host`` and ``Origin`` included, so the suite's
  DNS-rebinding scenario (a request with ``Host: evil.example.com``) still reaches the server as the attacker
  sent it and tests the server's own Host/Origin checks, not the proxy;
- the response (status, headers, body) is streamed back as it arrives, so server-sent-event streams flow
  through unbuffered;
- one request per connection: the proxy sets ``Connection: close`` on the request it forwards (the server
  then closes after its answer and says so in the response), so every request's head passes through the
  rewrite; the client opens a new connection for the next one.

It records each request's method, target, ``Host`` and ``Origin`` (:attr:`TokenProxy.seen`), so a test can
check what the server was sent. It runs its own event loop on a daemon thread; :meth:`TokenProxy.close`
stops it and closes every connection (bounded waits).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass

MAX_HEAD_BYTES = 64 * 1024
CHUNK = 64 * 1024
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
#: request headers the proxy replaces (compared lower-case): the token is its own, one request per connection
REPLACED = frozenset({b"authorization", b"connection", b"proxy-connection", b"keep-alive"})


@dataclass(frozen=True)
class SeenRequest:
    """One request as the proxy forwarded it (``host``/``origin``: ``None`` when the client sent none)."""

    method: str
    target: str
    host: str | None
    origin: str | None


def rewrite_head(head: bytes, token: str) -> tuple[bytes, SeenRequest]:
    """The request head ``head`` (request line and header lines, ending with the blank line) with
    ``Authorization: Bearer <token>`` and ``Connection: close`` in place of any such headers; every other
    line is kept exactly as sent. ``ValueError`` on a head that is not an HTTP/1.x request."""
    lines = head.split(b"\r\n")
    request_line = lines[0]
    parts = request_line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise ValueError(f"not an HTTP/1.x request line: {request_line[:100]!r}")
    kept: list[bytes] = [request_line]
    host: str | None = None
    origin: str | None = None
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            raise ValueError(f"not a header line: {line[:100]!r}")
        lower = name.strip().lower()
        if lower in REPLACED:
            continue
        if lower == b"host":
            host = value.strip().decode("latin-1")
        elif lower == b"origin":
            origin = value.strip().decode("latin-1")
        kept.append(line)
    kept += [b"Authorization: Bearer " + token.encode("ascii"), b"Connection: close", b"", b""]
    seen = SeenRequest(parts[0].decode("latin-1"), parts[1].decode("latin-1"), host, origin)
    return b"\r\n".join(kept), seen


class TokenProxy:
    """A proxy on ``127.0.0.1:<free port>`` to ``upstream_host:upstream_port`` that adds ``token``.
    Use as a context manager; :attr:`url` is ``http://127.0.0.1:<port>``."""

    def __init__(self, upstream_host: str, upstream_port: int, token: str) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.token = token
        self.seen: list[SeenRequest] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="token-proxy", daemon=True)
        self._ready = threading.Event()
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._error: OSError | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> TokenProxy:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise AssertionError(f"the token proxy did not listen within {START_TIMEOUT_S} s")
        if self._error is not None:
            raise AssertionError(f"the token proxy failed to start: {self._error!r}")
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0, limit=MAX_HEAD_BYTES))
            self.port = int(self._server.sockets[0].getsockname()[1])
        except OSError as exc:  # no port to listen on: reported by start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        up_writer: asyncio.StreamWriter | None = None
        try:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
                forwarded, seen = rewrite_head(head, self.token)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            self.seen.append(seen)
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            up_writer.write(forwarded)
            # the request body up, the answer down as it arrives; the exchange ends when either side closes
            # (the server after its answer, or the client giving up on a stream it no longer reads)
            pipes = {asyncio.ensure_future(self._pipe(reader, up_writer)),
                     asyncio.ensure_future(self._pipe(up_reader, writer))}
            try:
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pipe in pipes:
                    pipe.cancel()
                for pipe in pipes:
                    with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                        await pipe
        except (ConnectionError, asyncio.CancelledError):  # a reset, or the proxy closing
            pass
        finally:
            for w in (up_writer, writer):
                if w is not None:
                    w.close()
                    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                        await w.wait_closed()
            self._connections.discard(task)

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while chunk := await source.read(CHUNK):
            sink.write(chunk)
            await sink.drain()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=STOP_TIMEOUT_S)

    def close(self) -> None:
        """Stop listening, end every open connection, stop the loop's thread (bounded)."""
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(STOP_TIMEOUT_S + 5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(STOP_TIMEOUT_S)
        if not self._loop.is_running():
            self._loop.close()

    def __enter__(self) -> TokenProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["SeenRequest", "TokenProxy", "rewrite_head"]
