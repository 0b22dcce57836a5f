"""``pmw`` starts light: what importing the command line imports (exact module names, never timings; the
timings are ``benchmarks/cli_latency.py``'s).

- ``import engine.cli.app`` (everything ``pmw --help`` loads), run with ``python -X importtime`` in a fresh
  interpreter, imports none of the heavy packages: pydantic (so no model), the store (SQLAlchemy), the PDP
  client (gRPC, Cerbos), the controller (durable_rules), the simulations (matplotlib, numpy), the server
  (FastAPI, uvicorn) and the World, runtime, controller, run loop, protocol and service packages.
- Every command module imports with pydantic (and every heavy package above) made unimportable, its package
  ``engine.cli`` taken without its ``__init__`` (which imports the whole app): so none of them needs any of
  them at start-up, whatever the order the app imports them in.
- The light homes of what the help texts name are the very objects the heavy modules use.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

HEAVY_PACKAGES = ("pydantic", "pydantic_core", "sqlalchemy", "grpc", "cerbos", "durable_rules", "matplotlib",
                  "numpy", "simulations", "fastapi", "uvicorn")
HEAVY_ENGINE = ("store", "engine.world", "engine.runtime", "engine.controller", "engine.runloop",
                "engine.protocol", "engine.service", "engine.commands", "engine.policy.model", "engine.settings")
# Every module ``engine.cli.app`` imports at start-up.
LIGHT_MODULES = ("agents", "artifacts", "audit", "commands", "events", "handoffs", "memory", "options", "output",
                 "permissions", "policy", "receipts", "rooms", "runloop_cmds", "runtime", "serve", "simulate",
                 "state", "tasks", "tokens", "topology", "wakes", "world_cmds", "pull", "backup", "mcp", "app")


def imported_modules(code: str) -> list[str]:
    """The modules a fresh interpreter imports to run ``code``, from ``-X importtime``'s report."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    names = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
             if line.startswith("import time:") and line.count("|") == 2]
    assert "typer" in names  # the report was read (a format change would make every check below vacuous)
    return [n for n in names if n != "imported package"]  # the report's header line


def under(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_app_import_loads_no_heavy_package() -> None:
    names = imported_modules("import engine.cli.app")
    assert "engine.cli.app" in names and "engine.cli.agents" in names
    heavy = sorted(n for n in names if under(n, HEAVY_PACKAGES + HEAVY_ENGINE))
    assert heavy == []


def test_a_client_call_loads_no_heavy_package() -> None:
    """A read sent to a server (one that does not answer: exit 8, ``server_unreachable``) parses its options,
    builds the request and reports the error with none of the heavy packages: what a call against a running
    server costs beyond the HTTP exchange."""
    code = ("import sys; from engine.cli.app import app\n"
            "sys.argv = ['pmw', '--server', 'http://127.0.0.1:9', '--json', 'agents', 'show', 'gov']\n"
            "try:\n    app(prog_name='pmw')\nexcept SystemExit as exc:\n    assert exc.code == 8, exc.code\n")
    names = imported_modules(code)
    assert "engine.client.http" in names
    assert sorted(n for n in names if under(n, HEAVY_PACKAGES + HEAVY_ENGINE)) == []


def test_the_check_sees_a_heavy_import() -> None:
    """The same check on code that does import a heavy package finds it (the test can fail)."""
    names = imported_modules("import engine.cli.app, engine.cli.simulate\nimport simulations.run")
    assert any(under(n, ("simulations",)) for n in names)
    assert any(under(n, ("matplotlib",)) for n in names)


@pytest.mark.parametrize("module", LIGHT_MODULES)
def test_command_module_imports_without_pydantic(module: str) -> None:
    blocked = (*HEAVY_PACKAGES, *HEAVY_ENGINE)
    code = textwrap.dedent(f"""
        import importlib, pathlib, sys, types
        import engine
        package = types.ModuleType("engine.cli")  # the package without its __init__ (the whole app)
        package.__path__ = [str(pathlib.Path(engine.__file__).parent / "cli")]
        sys.modules["engine.cli"] = package
        for name in {blocked!r}:
            sys.modules[name] = None  # importing it raises ModuleNotFoundError
        importlib.import_module("engine.cli.{module}")
        """)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_blocking_pydantic_is_seen() -> None:
    """A module that imports pydantic (``engine.models.common``) fails the same check (the check can fail)."""
    code = textwrap.dedent("""
        import importlib, pathlib, sys, types
        import engine
        package = types.ModuleType("engine.cli")
        package.__path__ = [str(pathlib.Path(engine.__file__).parent / "cli")]
        sys.modules["engine.cli"] = package
        sys.modules["pydantic"] = None
        importlib.import_module("engine.models.common")
        """)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode != 0 and "pydantic" in done.stderr


def test_light_homes_are_the_objects_the_engine_uses() -> None:
    from engine.cli import runloop_cmds
    from engine.models import agents, enums, handoffs, memory, receipts, tasks, topology, wakes
    from engine.policy import model, vocabulary
    from engine.runloop import DEFAULT_RULES

    assert runloop_cmds.DEFAULT_RULES == DEFAULT_RULES
    assert model.ACTIONS is vocabulary.ACTIONS and model.KINDS is vocabulary.KINDS
    assert model.CapabilityClass is vocabulary.CapabilityClass
    for home, name in ((agents, "Presence"), (handoffs, "HandoffStatus"), (memory, "EpistemicType"),
                       (tasks, "TaskStatus"), (topology, "EdgeType"), (receipts, "Decision"),
                       (receipts, "Outcome"), (wakes, "WakeStatus")):
        assert getattr(home, name) is getattr(enums, name)
        assert name in home.__all__
