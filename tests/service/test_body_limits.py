"""A body of no declared length (chunked) on a real ``pmw serve``: the server answers long before the
client could finish sending it. With a valid token the body is refused (413) as soon as what arrived passes
the cap (reading stops there, no more than the cap is held); without one it is refused (401) before a byte
of it is read. Before the fix the server read the whole body (hundreds of MiB into memory) and only then
refused it, so the answer came after the last chunk: these tests fail on that."""

from __future__ import annotations

import json
import select
import socket
import time
import urllib.parse
from collections.abc import Iterator

import pytest

from engine.service.http_app import MAX_BODY_BYTES
from tests.service.support import Served

CHUNK = 1 << 20
BODY_BYTES = 32 * MAX_BODY_BYTES  # what the client would send if nobody stopped it (256 MiB)
#: what may be on the way when the answer is seen: the cap plus the loopback socket buffers (a few MiB)
SENT_BOUND = 3 * MAX_BODY_BYTES
ANSWER_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("serve-body"), serve_args=["--no-controller"]) as server:
        yield server


@pytest.fixture(scope="module")
def token(served: Served) -> str:
    return served.add_agent("alice", ["state.write"])


def send_chunked_until_answered(url: str, path: str, token: str | None) -> tuple[int, dict[str, object], int]:
    """POST ``path`` with a chunked body of up to :data:`BODY_BYTES`, looking for the answer after every
    chunk; the status, the problem document and how many body bytes had been sent when it arrived (or when
    the server stopped taking them)."""
    netloc = urllib.parse.urlsplit(url).netloc
    host, _, port = netloc.rpartition(":")
    head = [f"POST {path} HTTP/1.1", f"Host: {netloc}", "Content-Type: application/json",
            "Transfer-Encoding: chunked"]
    if token is not None:
        head.append(f"Authorization: Bearer {token}")
    sent = 0
    with socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT_S) as conn:
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        chunk = f"{CHUNK:x}\r\n".encode() + b"[" * CHUNK + b"\r\n"
        try:
            while sent < BODY_BYTES:
                if select.select([conn], [], [], 0)[0]:
                    break  # the server answered while the body was still being sent
                conn.sendall(chunk)
                sent += CHUNK
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed: the answer is in the receive buffer
        answer = b""
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while b"\r\n\r\n" not in answer or not _complete(answer):
            if time.monotonic() > deadline:
                raise AssertionError(f"no whole answer within {ANSWER_TIMEOUT_S} s: {answer[:300]!r}")
            part = conn.recv(65536)
            if not part:
                break
            answer += part
    status = int(answer.split(b" ", 2)[1])
    body = answer.split(b"\r\n\r\n", 1)[1]
    return status, json.loads(body[: body.rindex(b"}") + 1]), sent


def _complete(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return False


@pytest.mark.parametrize("path", ["/v1/world/list_agents", "/v1/tasks"])
def test_a_chunked_body_over_the_cap_is_refused_as_it_arrives(served: Served, token: str, path: str) -> None:
    status, document, sent = send_chunked_until_answered(served.url, path, token)
    assert status == 413 if path == "/v1/tasks" else status in (400, 413), document
    assert document["code"] == "payload_too_large", document
    assert sent < SENT_BOUND, f"the answer came only after {sent} bytes were sent"


@pytest.mark.parametrize("path", ["/v1/world/list_agents", "/v1/tasks", "/v1/wakes/pull"])
def test_without_a_token_no_byte_of_the_body_is_read(served: Served, path: str) -> None:
    status, document, sent = send_chunked_until_answered(served.url, path, None)
    assert (status, document["code"]) == (401, "unauthenticated"), document
    assert sent < SENT_BOUND, f"the answer came only after {sent} bytes were sent"
