"""What every command shares: the global options, one runtime per invocation, argument parsing and the
mapping of :class:`~engine.errors.PMWError` to an exit code.

A command body runs inside ``with invocation(ctx) as run:``. Inside it, the command parses its
arguments (JSON with :func:`json_arg`), calls exactly one World method on ``run.world`` and prints the
result with ``run.show``. A ``PMWError`` raised anywhere in the block is printed (``to_dict()`` JSON on
stderr with ``--json``, else one ``error:`` line) and becomes the process exit code; never a traceback.

``run.world`` is the world of an :class:`~engine.runtime.Runtime`: every call is decided by a Cerbos PDP
(the runtime's own, started on loopback, or the external one ``PMW_PDP_ADDRESS`` names). The runtime is
opened lazily, on first use of ``run.world`` (or ``run.runtime``), so arguments are checked before a PDP
is started or the store is touched, and it is closed (its PDP stopped) when the block ends.

**Client mode.** With ``--server URL`` (or ``PMW_SERVER``) the CLI is a client of ``pmw serve``:
``run.world`` and ``run.governance`` send each call to the server (``engine.client.http``) with the token
of ``PMW_TOKEN`` (or the credentials file, ``engine.client.credentials``); the token's agent is the
principal, and ``--as`` may only name that agent. Commands that need the world's own runtime (workers,
snapshots, demos, ``init``) refuse client mode with exit 3. Nothing heavy is imported on this path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import typer

from engine.cli.output import emit, report_error
from engine.errors import InvalidInput, PMWError, StoreUnavailable

if TYPE_CHECKING:
    from engine.client.http import ServerClient
    from engine.runtime import Runtime
    from engine.settings import Settings
    from engine.sources import Clock, IdSource
    from engine.world import World
    from engine.world.book import RuntimeBook

ACTOR_HINT = "this command acts as an agent (reads are decided by the policy too): give --as ACTOR or set PMW_ACTOR"


@dataclass(frozen=True)
class Globals:
    """The root options: ``db`` (None: PMW_DB_URL or the default), ``actor`` (--as / PMW_ACTOR), ``json``,
    ``server`` (--server / PMW_SERVER: client mode)."""

    db: str | None = None
    actor: str | None = None
    json: bool = False
    server: str | None = None


def globals_of(ctx: typer.Context) -> Globals:
    """The root callback's options (defaults if the root callback did not run)."""
    found = ctx.find_object(Globals)
    return found if found is not None else Globals()


class Run:
    """One command invocation: its options, its (lazily opened) runtime and its output."""

    def __init__(self, options: Globals) -> None:
        self.options = options
        self._runtime: Runtime | None = None
        self._client: ServerClient | None = None

    @property
    def remote(self) -> bool:
        """Whether this invocation is a client of a server (``--server`` / ``PMW_SERVER``)."""
        return bool(self.options.server)

    @property
    def client(self) -> ServerClient:
        """The server client (client mode only), with the token of PMW_TOKEN or the credentials file."""
        if self._client is None:
            from engine.client.credentials import token_for
            from engine.client.http import ServerClient

            server = self.options.server or ""
            self._client = ServerClient(server, token_for(server))
        return self._client

    @property
    def actor(self) -> str:
        """The acting agent id; ``InvalidInput`` (exit 3) naming --as / PMW_ACTOR when not given. In client
        mode the token's agent (``--as`` may only repeat it; the server refuses another)."""
        if self.remote:
            from engine.client.http import TOKEN_AGENT

            return self.options.actor or TOKEN_AGENT
        if not self.options.actor:
            raise InvalidInput("--as", ACTOR_HINT)
        return self.options.actor

    @property
    def actor_or_none(self) -> str | None:
        """The acting agent id if given (the World then defaults it, e.g. to the agent itself)."""
        return self.options.actor or None

    def settings(self) -> Settings:
        """Settings from the environment with ``--db`` applied."""
        from engine.settings import load_settings

        return load_settings(db_url=self.options.db)

    def embedded_only(self, what: str) -> None:
        """Refuse client mode for a command that needs the world's own runtime."""
        if self.remote:
            raise InvalidInput("--server", f"{what} runs on the world's own runtime, not as a client of a "
                                           "server: unset PMW_SERVER / --server (or run it where pmw serve runs)")

    @property
    def runtime(self) -> Runtime:
        """The runtime of ``--db`` (its PDP started, the store migrated), opened on first use."""
        self.embedded_only("this command")
        if self._runtime is None:
            self._runtime = self.open(self.settings())
        return self._runtime

    @property
    def world(self) -> World:
        """The PDP-decided World of ``--db``, opened (and migrated) on first use; in client mode the
        server's World (each call sent to it)."""
        if self.remote:
            from engine.client.http import RemoteFacade

            # the World's calls, remote; with --json the answers are printed as sent (no models rebuilt)
            return RemoteFacade(self.client, "world", rebuild=not self.options.json)  # type: ignore[return-value]
        return self.runtime.world

    @property
    def governance(self) -> Any:
        """The governance calls (``engine.service.governance.GovernanceCalls``) of this invocation's runtime:
        policy history, reload, explain, shadow, audit. Every call takes the acting governor first. In
        client mode the server's (each call sent to it)."""
        if self.remote:
            from engine.client.http import RemoteFacade

            return RemoteFacade(self.client, "governance", rebuild=not self.options.json)
        from engine.service.governance import GovernanceCalls

        return GovernanceCalls(self.runtime)

    @property
    def book(self) -> RuntimeBook:
        """The runtime's own bookkeeping (``pmw init``'s bootstrap, workers, controllers, shadow replays)."""
        return self.runtime.book

    def open(self, settings: Settings, *, clock: Clock | None = None, ids: IdSource | None = None) -> Runtime:
        """Open the runtime ``settings`` describe and own it (closing any runtime opened before)."""
        from engine.runtime import Runtime

        self.embedded_only("this command")
        try:
            runtime = Runtime.open(settings, clock=clock, ids=ids)
        except OSError as exc:  # e.g. the SQLite file's directory cannot be created
            raise StoreUnavailable(f"cannot open {settings.db_url!r}: {exc}") from exc
        self.close()
        self._runtime = runtime
        return runtime

    def show(self, value: Any, *, columns: Sequence[str] | None = None) -> None:
        """Print ``value`` (a model, a list of models or None) as JSON or for humans."""
        emit(value, as_json=self.options.json, columns=columns)

    def close(self) -> None:
        if self._runtime is not None:
            runtime, self._runtime = self._runtime, None
            runtime.close()


@contextmanager
def invocation(ctx: typer.Context, *, acting: bool = False, as_json: bool = False) -> Iterator[Run]:
    """Run one command. ``acting``: the command acts (or reads) as ``--as``, checked before anything
    else. ``as_json``: the command's own ``--json`` flag (the same as the global one). A ``PMWError`` is
    reported and becomes the exit code."""
    options = globals_of(ctx)
    if as_json and not options.json:
        options = dataclasses.replace(options, json=True)
    run = Run(options)
    try:
        try:
            if acting:
                _ = run.actor
            yield run
        finally:
            run.close()
    except PMWError as exc:
        report_error(exc, as_json=options.json)
        raise typer.Exit(exc.exit_code) from None


def json_arg(option: str, text: str | None) -> Any:
    """``json.loads(text)`` (None stays None); bad JSON, and the non-standard constants ``NaN`` and
    ``Infinity`` that ``json.loads`` would accept, are ``InvalidInput`` naming ``option``."""
    if text is None:
        return None
    from engine.validation import parse_json_text

    return parse_json_text(option, text)


def json_object(option: str, text: str | None) -> dict[str, Any] | None:
    """A JSON object argument (payloads, constraints, results); anything else is ``InvalidInput``."""
    value = json_arg(option, text)
    if value is not None and not isinstance(value, dict):
        raise InvalidInput(option, f"must be a JSON object, not {type(value).__name__}")
    return value


def listed(values: Sequence[str] | None) -> list[str] | None:
    """A repeatable option's values (None when not given)."""
    return list(values) if values else None


def choices(enum: type[StrEnum]) -> str:
    """The allowed values of an enum, for help texts."""
    return ", ".join(m.value for m in enum)


__all__ = ["ACTOR_HINT", "Globals", "Run", "choices", "globals_of", "invocation", "json_arg", "json_object",
           "listed"]
