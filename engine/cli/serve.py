"""``pmw serve`` (one long-lived owner of a world, with an HTTP API) and ``pmw login`` (a client's token)."""

import ipaddress
import math
import signal
import socket
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from engine.cli.runtime import invocation
from engine.errors import InvalidInput

LOOPBACK_NAMES = ("localhost",)


def _loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (loopback by default; anything "
                                                     "else needs --allow-remote).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port (0: any free port; the "
                                                                        "address is printed).")] = 8765,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Listen on a non-loopback address (put TLS in front of it).")] = False,
    agents: Annotated[list[str] | None, typer.Option(
        "--agent", metavar="AGENT=MODULE:ATTR", help="An in-process agent the server's worker runs "
                                                    "(repeatable); other agents pull their own wakes.")] = None,
    controller: Annotated[bool, typer.Option("--controller/--no-controller",
                                             help="Run the world's controller.")] = True,
    rules: Annotated[Path | None, typer.Option("--rules", help="The controller's rule directory.")] = None,
    worker_id: Annotated[str, typer.Option("--worker-id", help="Names the in-process worker's leases.")]
    = "serve-worker",
    lease: Annotated[float, typer.Option("--lease-seconds", min=1.0, max=3600.0)] = 30.0,
    poll: Annotated[float, typer.Option("--poll-seconds", min=0.05, max=60.0)] = 0.5,
    role: Annotated[str, typer.Option("--role", help="api (HTTP only), worker (runs its --agent's wakes), "
                                                     "controller (the controller, while elected leader) or all "
                                                     "(everything; the default).")] = "all",
    pdp: Annotated[list[str] | None, typer.Option(
        "--pdp", metavar="HOST:PORT", help="An external PDP replica's gRPC address (repeatable; replaces "
                                           "PMW_PDP_ADDRESS(ES)).")] = None,
    pdp_replicas: Annotated[int | None, typer.Option(
        "--pdp-replicas", min=1, max=16, help="How many PDPs to start (without --pdp; PMW_PDP_REPLICAS).")] = None,
    leader_lease: Annotated[float, typer.Option(
        "--leader-lease-seconds", min=0.5, max=3600.0, help="The controller leader's lease (role controller): "
                                                             "a standby takes over within about that long.")] = 5.0,
) -> None:
    """Serve the world of --db until SIGTERM/SIGINT: its store, one supervised PDP on the world's policy
    deployment, the controller, a worker for --agent's, and the HTTP API (tokens: `pmw tokens`). Prints one
    JSON line with the URL and PID once it listens. --as names the governor that grants the controller's
    agent on the first start. Two servers never own one world (the data directory's serve.lock) in role all;
    roles api, worker and controller run side by side on one store (PostgreSQL across hosts,
    docs/operations.md "Beyond one machine")."""
    with invocation(ctx) as run:
        run.embedded_only("pmw serve")
        if not (_loopback(host) or allow_remote):
            raise InvalidInput("--host", f"{host} is not a loopback address: pass --allow-remote to listen on it")
        import json

        import uvicorn

        from engine.cli.runloop_cmds import load_adapter
        from engine.controller import load_rule_dir
        from engine.controller.actions import ACTIONS
        from engine.runloop import DEFAULT_RULES
        from engine.service.host import ROLES, Service
        from engine.service.http_app import build_app
        from engine.validation import check_id

        check_id("--worker-id", worker_id)  # every option is checked before the world is opened
        _check_options(role, ROLES, {"--lease-seconds": lease, "--poll-seconds": poll,
                                     "--leader-lease-seconds": leader_lease})
        settings = _with_pdps(run.settings(), pdp or [], pdp_replicas)
        if controller and role in ("all", "controller"):
            load_rule_dir(rules or DEFAULT_RULES, ACTIONS)
        adapters = dict(load_adapter(s) for s in agents or [])
        service = Service(settings, adapters=adapters, controller=controller, rules=rules or DEFAULT_RULES,
                          governor=run.actor_or_none, worker_id=worker_id, lease_seconds=lease, poll_s=poll,
                          role=role,  # type: ignore[arg-type]  # checked against ROLES above
                          leader_lease_s=leader_lease)
        service.allowed_hosts.add(f"[{host}]" if ":" in host else host)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # proto IPPROTO_TCP: asyncio turns Nagle off (TCP_NODELAY) only on accepted sockets of that proto; with
        # proto 0 every answer written in two parts (head, body) waited ~40 ms for the client's delayed ACK
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(128)  # connections wait in the backlog until uvicorn accepts them: ready once printed
        except OSError as exc:
            sock.close()
            raise InvalidInput("--port", f"cannot listen on {host}:{port}: {exc}") from None
        try:
            service.start()
            bound_port = sock.getsockname()[1]
            url = f"http://{'[' + host + ']' if family == socket.AF_INET6 else host}:{bound_port}"
            info = service.announce(url)
            server = _Server(uvicorn.Config(build_app(service), log_level="warning", access_log=False,
                                            lifespan="on", timeout_graceful_shutdown=10), service)
            typer.echo(json.dumps({"serving": url, **info}, sort_keys=True))
            sys.stdout.flush()
            # uvicorn handles SIGTERM/SIGINT (a graceful stop), then raises the signal again with the handler
            # it found installed: ours ignores it, so the service below is stopped in order, not killed.
            previous = {s: signal.signal(s, _stopped) for s in (signal.SIGTERM, signal.SIGINT)}
            try:
                server.run(sockets=[sock])
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)
        finally:
            sock.close()
            service.stop()


def _check_options(role: str, roles: tuple[str, ...], seconds: dict[str, float]) -> None:
    """``InvalidInput`` naming the option: a role not among ``roles``, a duration that is not a number."""
    for option, value in seconds.items():
        if not math.isfinite(value):
            raise InvalidInput(option, f"{value!r} is not a number of seconds")
    if role not in roles:
        raise InvalidInput("--role", f"{role!r} is not one of {', '.join(roles)}")


def _with_pdps(settings: Any, pdp: list[str], replicas: int | None) -> Any:
    """``settings`` with the PDPs of ``--pdp`` (replacing ``PMW_PDP_ADDRESS(ES)``; each address checked,
    ``InvalidInput`` naming ``--pdp``, then the setting's own check) and ``--pdp-replicas``."""
    from engine.settings import load_settings

    if pdp:
        for address in pdp:  # each named as the user gave it, not as the setting's pattern
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536 or "," in address:
                raise InvalidInput("--pdp", f"{address[:100]!r} is not HOST:PORT (a PDP replica's gRPC address)")
        load_settings(pdp_addresses=",".join(pdp))
        settings = settings.model_copy(update={"pdp_address": None, "pdp_addresses": ",".join(pdp)})
    if replicas is not None:
        settings = settings.model_copy(update={"pdp_replicas": replicas})
    return settings


def _Server(config: Any, service: Any) -> Any:  # noqa: N802 - stands in for the class it builds (imported late)
    """A ``uvicorn.Server`` that ends the service's pushed streams when its graceful stop begins (an open
    SSE stream or MCP listen stream would otherwise hold the stop for its whole timeout, then be cut)."""
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            service.end_streams()
            await super().shutdown(sockets=sockets)

    return Server(config)


def _stopped(_signum: int, _frame: object) -> None:
    """The stop signal, once uvicorn has served its last request: the service is stopped after it."""


def login(
    ctx: typer.Context,
    token_stdin: Annotated[bool, typer.Option("--token-stdin", help="Read the token from stdin.")] = False,
) -> None:
    """Check a token against --server (PMW_SERVER) and keep it in the credentials file (600; PMW_CREDENTIALS
    or ~/.config/pmw/credentials.json) for later calls. The token comes from stdin with --token-stdin, else
    from PMW_TOKEN."""
    with invocation(ctx) as run:
        import os

        from engine.client.credentials import save_token
        from engine.client.http import ServerClient

        if not run.remote:
            raise InvalidInput("--server", "pmw login needs --server URL (or PMW_SERVER)")
        token = sys.stdin.readline().strip() if token_stdin else os.environ.get("PMW_TOKEN", "")
        if not token:
            raise InvalidInput("--token-stdin", "no token given: pipe it in with --token-stdin, or set PMW_TOKEN")
        server = run.options.server or ""
        who = ServerClient(server, token).request("GET", "/v1/whoami")["result"]
        path = save_token(server, token)
        run.show({"server": server, "agent_id": who.get("agent_id"), "token_id": who.get("token_id"),
                  "credentials": str(path)})


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("login")(login)
