"""A PMW client never follows a redirect, so its bearer token never reaches another host (attack finding 12).

Two real loopback HTTP servers (stdlib ``http.server`` on port 0, each stopped in the test): a "server" that
answers every request with a redirect (301, 302, 303, 307, 308) to a second one, which records every request
it gets and whether it carried an ``Authorization`` header. ``engine.client.http.ServerClient`` (what the CLI's
client mode and ``engine.client.connect`` use) and the MCP server's ``RemoteBackend`` (its commands sent as
REST actions) must raise ``ServerUnreachable`` naming the ``Location`` and send nothing to the second server.
Without the fix (urllib's default opener) the second server receives the token.
"""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from engine.client.http import ServerClient
from engine.errors import ServerUnreachable
from engine.service.mcp_backend import RemoteBackend

TOKEN = "pmw_tok_0123456789abcdef_" + "s" * 64


@dataclass
class Seen:
    """What the other host received: one ``(method, path, Authorization)`` per request."""

    requests: list[tuple[str, str, str | None]] = field(default_factory=list)


@dataclass
class Hosts:
    redirector: http.server.HTTPServer
    sink: http.server.HTTPServer
    sink_seen: Seen
    redirector_seen: Seen

    def url(self, code: int) -> str:
        return f"http://127.0.0.1:{self.redirector.server_port}/r{code}"

    @property
    def sink_url(self) -> str:
        return f"http://127.0.0.1:{self.sink.server_port}/steal"


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    sink_seen, redirector_seen = Seen(), Seen()

    class Sink(http.server.BaseHTTPRequestHandler):
        def answer(self) -> None:
            sink_seen.requests.append((self.command, self.path, self.headers.get("Authorization")))
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            body = b'{"result": {"agent_id": "thief"}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self.answer()

        def do_POST(self) -> None:
            self.answer()

        def log_message(self, *args: object) -> None:
            pass

    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)

    class Redirector(http.server.BaseHTTPRequestHandler):
        def answer(self) -> None:
            redirector_seen.requests.append((self.command, self.path, self.headers.get("Authorization")))
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            code = int(self.path.split("/")[1][1:])
            self.send_response(code)
            self.send_header("Location", f"http://127.0.0.1:{sink.server_port}/steal")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            self.answer()

        def do_POST(self) -> None:
            self.answer()

        def log_message(self, *args: object) -> None:
            pass

    redirector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirector)
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
               for s in (sink, redirector)]
    for thread in threads:
        thread.start()
    try:
        yield Hosts(redirector, sink, sink_seen, redirector_seen)
    finally:
        for server in (sink, redirector):
            server.shutdown()
            server.server_close()
        for thread in threads:
            thread.join(5)


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_server_client_follows_no_redirect_and_sends_the_token_nowhere_else(hosts: Hosts, code: int) -> None:
    client = ServerClient(hosts.url(code), TOKEN, timeout_s=5)
    with pytest.raises(ServerUnreachable) as refused:
        client.call("world", "list_agents", (), {})
    assert f"HTTP {code}" in refused.value.reason and hosts.sink_url in refused.value.reason
    with pytest.raises(ServerUnreachable):
        client.request("GET", "/v1/whoami")
    assert hosts.sink_seen.requests == []  # the other host got nothing: no token
    assert [auth for _, _, auth in hosts.redirector_seen.requests] == [f"Bearer {TOKEN}"] * 2


@pytest.mark.parametrize("code", [302, 307])
def test_the_mcp_remote_backend_follows_no_redirect(hosts: Hosts, code: int) -> None:
    backend = RemoteBackend(hosts.url(code), timeout_s=5)
    for name, arguments in (("compare_and_set_state", {"key": "k", "expected_version": 0, "value": 1}),
                            ("list_agents", {})):
        with pytest.raises(ServerUnreachable) as refused:
            asyncio.run(backend.call(TOKEN, name, arguments))
        assert f"HTTP {code}" in refused.value.reason and hosts.sink_url in refused.value.reason
    assert hosts.sink_seen.requests == []
    assert len(hosts.redirector_seen.requests) == 2
