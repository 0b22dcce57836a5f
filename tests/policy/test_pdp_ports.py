"""A PDP's ports are its own: the runtime trusts a health answer only from its own Cerbos process.

A port is picked free and released before Cerbos binds it, so another process can take it in between
(another runtime's PDP starting at the same moment: two test workers, two ``pmw`` processes). Here that race
is made to happen every time: the port picker hands out a port a squatter already listens on, and the
squatter answers the health check as a healthy Cerbos would. A first start must see that the answer is not
its server's, pick new ports and serve there (its checks reach its own policies); a restart on the
addresses clients hold must fail closed rather than hand them a stranger."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import PolicyUnavailable
from engine.policy import pdp_process
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.pdp_process import ManagedPdp, port_holder
from engine.runtime import probe_epoch
from tests.procs.pids import alive


class _Healthy(http.server.BaseHTTPRequestHandler):
    """Answers every GET 200, as a healthy Cerbos answers ``/_cerbos/health``."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def squatter() -> Iterator[int]:
    """A loopback port held by a server of this process that answers health checks."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Healthy)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()
    thread.join(10)


def test_a_first_start_on_a_taken_port_moves_to_others(squatter: int, policy_deployment: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    real = pdp_process._free_port
    handed = iter([squatter, squatter])  # both ports of the first launch: the squatter's

    def racing_free_port() -> int:
        return next(handed, None) or real()
    monkeypatch.setattr(pdp_process, "_free_port", racing_free_port)
    managed = ManagedPdp(policy_deployment, run_dir=tmp_path / "run")
    try:
        address = managed.start()
        assert managed.pid is not None
        grpc_port, http_port = (int(address.grpc.rsplit(":", 1)[1]), int(address.http.rsplit(":", 1)[1]))
        assert squatter not in (grpc_port, http_port), "the runtime took a stranger's health answer for its PDP's"
        assert port_holder(managed.pid, grpc_port) == port_holder(managed.pid, http_port) == "this"
        assert port_holder(managed.pid, squatter) == "another"
        client = CerbosPdp(address, timeout_s=10.0)
        try:
            assert probe_epoch(client)  # a real decision from its own server
        finally:
            client.close()
    finally:
        managed.stop()


def test_a_restart_on_a_taken_port_fails_closed(policy_deployment: Path, tmp_path: Path) -> None:
    managed = ManagedPdp(policy_deployment, run_dir=tmp_path / "run")
    address = managed.start()
    http_port = int(address.http.rsplit(":", 1)[1])
    first = managed.pid
    assert first is not None
    managed.stop(keep_files=True)  # the addresses are kept: clients hold them
    server = http.server.ThreadingHTTPServer(("127.0.0.1", http_port), _Healthy)  # taken meanwhile
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        with pytest.raises(PolicyUnavailable, match="ports"):
            managed.start(timeout=30)
        assert managed.proc is None and managed.address == address  # nothing runs; the addresses stay
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
        managed.stop()
    assert not alive(first)
