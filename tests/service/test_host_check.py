"""``engine.service.http_app.HostCheck`` (DNS rebinding) on the API's own routes: a ``Host`` is exactly one of
the server's names, with or without a port; anything after it (``@evil.com``, a name glued to the bracket)
is refused before the app runs. The check took the text before the first ``:``, so
``127.0.0.1:8765@evil.com`` and ``[::1]evil.com`` passed: these cases fail on that."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from engine.service.http_app import HostCheck

ALLOWED = ["127.0.0.1", "localhost", "[::1]"]


def client() -> TestClient:
    async def hello(_request: Request) -> PlainTextResponse:
        return PlainTextResponse("reached")
    return TestClient(HostCheck(Starlette(routes=[Route("/", hello)]), ALLOWED))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8765", "localhost:1", "LOCALHOST:8765", "[::1]:8765",
                                  "[::1]"])
def test_the_servers_own_names_reach_the_app(host: str) -> None:
    answer = client().get("/", headers={"Host": host})
    assert (answer.status_code, answer.text) == (200, "reached")


@pytest.mark.parametrize("host", ["127.0.0.1:8765@evil.com", "[::1]evil.com", "127.0.0.1.evil.com", "evil.com",
                                  "127.0.0.1:99999", "127.0.0.1:", "localhost:8765:1", ""])
def test_anything_else_is_refused_before_the_app(host: str) -> None:
    answer = client().get("/", headers={"Host": host})
    assert answer.status_code == 400 and answer.json()["code"] == "invalid_input", answer.text
    assert "reached" not in answer.text
