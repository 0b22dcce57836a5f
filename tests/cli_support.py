"""What the CLI tests share: ONE Cerbos PDP per test session, running ``pmw`` in-process against it, and
worlds with a governor and agents holding the capabilities the commands need.

Starting a PDP costs over a second (``cerbos compile`` with every suite, then the server), so the CLI is
pointed at a session-wide PDP through ``PMW_PDP_ADDRESS`` (plus its admin credentials); only the tests of
the CLI's own PDP run without it. A test module imports :func:`pdp_fixture` (fixture ``pdp``); however many
modules do, the PDP is started once per session. Without the Cerbos binary the tests are skipped (``npm ci``
in the repository root installs it), except in CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer.main
import typer.testing
from click.testing import Result
from typer.testing import CliRunner

from engine.cli import app
from engine.errors import PolicyUnavailable
from engine.policy import governance
from engine.policy.pdp_process import ManagedPdp, PdpAddress, cerbos_binary
from engine.runtime import Runtime
from engine.settings import Settings, load_settings
from engine.world import World
from engine.world.book import RuntimeBook
from store import Store

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
REPO = Path(__file__).resolve().parents[1]
POLICY_DIR = REPO / "policies"
GOVERNOR = "gov"
# Every capability of the contract that the CLI's commands need (docs/policy-contract.md).
ALL_CAPS = ("artifact.invoke", "artifact.write", "handoff.create", "memory.invoke", "memory.review",
            "memory.write", "message.send", "room.open", "state.write", "task.assign", "task.create", "task.work",
            "topology.write", "wake.enqueue")
PDP_ENV_VARS = ("PMW_PDP_ADDRESS", "PMW_PDP_ADMIN_USER", "PMW_PDP_ADMIN_PASSWORD")
CLEAN_ENV: dict[str, str | None] = {
    **dict.fromkeys(("PMW_ACTOR", "PMW_DB_URL", "PMW_ARTIFACT_DIR", "PMW_POLICY_DIR", *PDP_ENV_VARS)),
    "CERBOS_NO_TELEMETRY": "1"}
RUNNER = CliRunner()
_COMMANDS: dict[int, Any] = {}


def _command_of(typer_app: typer.Typer) -> Any:
    """``typer.main.get_command``, built once per app: Typer rebuilds the whole click tree from the
    annotations on every ``CliRunner.invoke`` (a tenth of a second here), and the bad-input matrix
    invokes the app hundreds of times. The click command itself is reusable (a new context per call)."""
    key = id(typer_app)
    if key not in _COMMANDS:
        _COMMANDS[key] = typer.main.get_command(typer_app)
    return _COMMANDS[key]


typer.testing._get_command = _command_of  # type: ignore[attr-defined,assignment]


@dataclass(frozen=True)
class Pdp:
    """A running PDP: its address (with admin credentials), where its deployments live, and its epoch."""

    address: PdpAddress
    deploy_root: Path
    epoch: str

    @property
    def env(self) -> dict[str, str | None]:
        """The environment that points ``pmw`` at this PDP."""
        return {"PMW_PDP_ADDRESS": self.address.grpc, "PMW_PDP_ADMIN_USER": self.address.admin_user,
                "PMW_PDP_ADMIN_PASSWORD": self.address.admin_password}

    def settings(self, db_url: str) -> Settings:
        return load_settings(db_url=db_url, pdp_address=self.address.grpc, pdp_admin_user=self.address.admin_user,
                             pdp_admin_password=self.address.admin_password)


def require_cerbos() -> None:
    """Skip (fail in CI) when the pinned Cerbos binary is not installed."""
    try:
        cerbos_binary()
    except PolicyUnavailable as exc:
        message = f"the CLI tests need the Cerbos PDP: `npm ci` in the repository root installs it ({exc})"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


def start_pdp(deploy_root: Path, policy_dir: Path = POLICY_DIR) -> tuple[ManagedPdp, Pdp]:
    """Deploy ``policy_dir`` into ``deploy_root`` and start a PDP serving ``deploy_root/current`` (the link
    itself, so that a reload follows a later deployment)."""
    deployment = governance.deploy(policy_dir, deploy_root)
    managed = ManagedPdp(deploy_root / "current")
    address = managed.start()
    return managed, Pdp(address=address, deploy_root=deploy_root, epoch=deployment.epoch)


_SHARED: list[Pdp] = []


@pytest.fixture(scope="session", name="pdp")
def pdp_fixture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pdp:
    """The session's PDP, serving the repository's policies (started once, stopped at session end)."""
    if not _SHARED:
        require_cerbos()
        managed, shared = start_pdp(tmp_path_factory.mktemp("pdp") / "policy-deploys")
        request.config.add_cleanup(managed.stop)
        _SHARED.append(shared)
    return _SHARED[0]


@pytest.fixture(name="db_url")
def sqlite_db_url_fixture(tmp_path: Path) -> str:
    """A SQLite world file of the test's own (the CLI tests run on the embedded default only: this overrides
    the backend-parametrized ``db_url`` of tests/conftest.py where it is imported)."""
    return f"sqlite:///{tmp_path / 'world.db'}"


@pytest.fixture(name="pmw")
def pmw_fixture(db_url: str, pdp: Pdp) -> Pmw:
    """A migrated world with its governor (``gov``), under the session's PDP."""
    cli = Pmw(db_url, pdp)
    cli.init()
    return cli


# -- running pmw --------------------------------------------------------------------------------------


def invoke(db_url: str | None, *args: str, actor: str | None = None, as_json: bool = False,
           env: Mapping[str, str | None] | None = None) -> Result:
    """Run ``pmw [--db URL] [--as ACTOR] [--json] ARGS`` in-process with a clean PMW_ environment (plus
    ``env``: a PDP's address, usually)."""
    argv: list[str] = []
    if db_url is not None:
        argv += ["--db", db_url]
    if actor is not None:
        argv += ["--as", actor]
    if as_json:
        argv.append("--json")
    return RUNNER.invoke(app, [*argv, *args], env={**CLEAN_ENV, **(env or {})})


def assert_clean_failure(result: Result, code: int) -> None:
    """Exit ``code``, a message on stderr, no traceback and no unexpected exception."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.stderr.strip(), "expected a message on stderr"
    assert "Traceback" not in result.output


@functools.lru_cache(maxsize=4)
def _store(db_url: str) -> Store:
    """A store per database, kept open across checks (the bad-input matrix counts rows ~1000 times)."""
    return Store(db_url)


def counts(db_url: str) -> dict[str, Any]:
    """Row counts and version sums of every table of the world at ``db_url`` (no PDP needed)."""
    return _store(db_url).read.counts_and_versions()


def last_event(db_url: str) -> dict[str, Any]:
    """The newest event of the log (read from the store directly)."""
    return _store(db_url).read.events(0, 1, newest=True)[0]


def assert_one_denial(before: Mapping[str, Any], db_url: str, actor: str) -> None:
    """The store is as ``before`` except for one more event: ``actor``'s ``policy.denied`` audit record."""
    after = counts(db_url)
    assert after["events"] == before["events"] + 1
    assert {k: v for k, v in after.items() if k != "events"} == {k: v for k, v in before.items() if k != "events"}
    event = last_event(db_url)
    assert (event["event_type"], event["actor_id"]) == ("policy.denied", actor), event


@dataclass
class Pmw:
    """``pmw`` bound to one database and PDP: ``ok`` expects exit 0, ``js`` also parses the JSON output,
    ``fails`` expects an exit code and returns the JSON error."""

    db_url: str
    pdp: Pdp
    env: dict[str, str | None] = field(default_factory=dict)

    def run(self, *args: str, actor: str | None = None, as_json: bool = False) -> Result:
        return invoke(self.db_url, *args, actor=actor, as_json=as_json, env={**self.pdp.env, **self.env})

    def ok(self, *args: str, actor: str | None = None) -> str:
        result = self.run(*args, actor=actor)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return result.stdout

    def js(self, *args: str, actor: str | None = None) -> Any:
        result = self.run(*args, actor=actor, as_json=True)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return json.loads(result.stdout)

    def fails(self, code: int, *args: str, actor: str | None = None) -> dict[str, Any]:
        """Expect exit ``code`` with a JSON error on stderr; returns it."""
        result = self.run(*args, actor=actor, as_json=True)
        assert_clean_failure(result, code)
        error: dict[str, Any] = json.loads(result.stderr)
        return error

    def init(self, governor: str = GOVERNOR) -> None:
        """``pmw init --governor``: migrate and bootstrap the first governor."""
        self.ok("init", "--governor", governor, "--name", governor.title(), "--term", f"term-{governor}")

    @contextmanager
    def world(self) -> Iterator[World]:
        """The world under the same PDP, in-process (for fast set-up)."""
        with Runtime.open(self.pdp.settings(self.db_url)) as runtime:
            yield runtime.world

    @contextmanager
    def book(self) -> Iterator[RuntimeBook]:
        """The runtime's book of the same world, in-process (for the runtime's side of a check)."""
        with Runtime.open(self.pdp.settings(self.db_url)) as runtime:
            yield runtime.book

    def agents(self, *agents: str, roles: Mapping[str, str] | None = None, caps: Sequence[str] = ALL_CAPS,
               clearance: int = 0, governor: str = GOVERNOR) -> None:
        """Register and activate ``agents`` (each on its own terminal ``term-<agent>``; role ``tester``
        unless ``roles`` says otherwise); the governor grants each ``caps`` and ``clearance``."""
        with self.world() as world:
            setup_agents(world, agents, roles=roles, caps=caps, clearance=clearance, governor=governor)


def setup_agents(world: World, agents: Sequence[str], *, roles: Mapping[str, str] | None = None,
                 caps: Sequence[str] = ALL_CAPS, clearance: int = 0, governor: str = GOVERNOR,
                 terms: Mapping[str, str] | None = None) -> None:
    """Register, activate and grant ``agents`` in ``world`` (whose governor is ``governor``). Each registers
    itself as a ``tester``; another role in ``roles`` is the governor's grant (no agent takes a role itself)."""
    for agent in agents:
        term = (terms or {}).get(agent, f"term-{agent}")
        role = (roles or {}).get(agent, "tester")
        world.register_agent(agent, agent.upper() if len(agent) <= 3 else agent.title(), "tester", term)
        world.activate_session(f"agent:{agent}")
        world.grant(governor, agent, capabilities=list(caps), clearance=clearance,
                    role_id=role if role != "tester" else None)


__all__ = ["ALL_CAPS", "CLEAN_ENV", "GOVERNOR", "IN_CI", "POLICY_DIR", "Pdp", "Pmw", "assert_clean_failure",
           "assert_one_denial", "counts", "invoke", "last_event", "pdp_fixture", "require_cerbos", "setup_agents",
           "start_pdp"]
