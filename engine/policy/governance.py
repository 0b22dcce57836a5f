"""The governance workflow: test a policy set, deploy it under a new epoch, explain a decision.

A deployment is a validated copy of the governance-edited source directory, stamped with its epoch
(``p-`` + the first 16 hex digits of the sha256 of its files) and published by swapping the ``current``
symlink. A set that fails ``cerbos compile`` or any test suite is refused and the last good deployment
stays in force.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.errors import InvalidInput, PolicyRejected
from engine.models.common import Model
from engine.policy.pdp_process import cerbos_binary

EPOCH_FILE = Path("_epoch") / "epoch.yaml"
POLICY_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class PolicyTestReport:
    ok: bool
    exit_code: int  # cerbos compile: 0 ok, 3 load/compile errors, 4 test failures
    output: str
    junit_path: Path | None = None


class PolicyTestResult(Model):
    """A policy set that compiled and passed every test suite (or every test the filters select)."""

    policy_dir: str
    ok: bool
    exit_code: int
    junit_path: str | None
    output: str


@dataclass(frozen=True)
class Deployment:
    epoch: str
    path: Path


def _compile(policy_dir: Path, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cerbos_binary()), "compile", *extra, str(policy_dir)], capture_output=True, text=True,
        timeout=timeout, check=False, env={**os.environ, "CERBOS_NO_TELEMETRY": "1"})


TEST_FILTER_DIMENSIONS = ("suite", "test", "principal", "resource", "action")


def check_test_filter(text: str) -> str:
    """A ``cerbos compile --test-filter`` value: ``dimension=glob1,glob2;...`` with dimensions among
    :data:`TEST_FILTER_DIMENSIONS`; anything else is ``InvalidInput`` naming ``--test-filter``."""
    parts = [part for part in text.split(";") if part.strip()]
    if not parts or len(text) > 2000:
        raise InvalidInput("--test-filter", f"{text!r} is not 'dimension=glob1,glob2;...'")
    for part in parts:
        dimension, eq, globs = part.partition("=")
        if not eq or dimension.strip() not in TEST_FILTER_DIMENSIONS or not globs.strip():
            raise InvalidInput("--test-filter", f"{part!r} is not 'dimension=glob1,glob2' with a dimension among "
                               f"{', '.join(TEST_FILTER_DIMENSIONS)}")
    return text


def run_policy_tests(policy_dir: Path, *, junit: Path | None = None, verbose: bool = False,
                     test_filters: Sequence[str] = ()) -> PolicyTestReport:
    """``cerbos compile`` with every test suite: errors come with file:line:column; ``junit`` also writes
    the suites' results as JUnit XML. ``verbose`` and ``test_filters`` are passed through (``--verbose``:
    the evaluation trace of each failing test; ``--test-filter``: run only the matching tests, see
    :func:`check_test_filter`)."""
    extra = [*(["--verbose"] if verbose else []), *(f"--test-filter={check_test_filter(f)}" for f in test_filters)]
    done = _compile(policy_dir, *extra)
    if junit is not None:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_text(_compile(policy_dir, *extra, "--test-output=junit").stdout)
    return PolicyTestReport(ok=done.returncode == 0, exit_code=done.returncode,
                            output=(done.stdout + done.stderr).strip(), junit_path=junit)


def policy_digest(policy_dir: Path) -> str:
    """sha256 over every policy file (relative path and content), the epoch file excluded."""
    h = hashlib.sha256()
    for path in sorted(p for p in policy_dir.rglob("*") if p.is_file() and p.suffix in POLICY_SUFFIXES):
        rel = path.relative_to(policy_dir)
        if rel == EPOCH_FILE:
            continue
        h.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _stamp(directory: Path, epoch: str) -> None:
    (directory / EPOCH_FILE).parent.mkdir(parents=True, exist_ok=True)
    (directory / EPOCH_FILE).write_text(
        "# Written by the PMW runtime at deployment: the digest of this policy set.\n"
        "apiVersion: api.cerbos.dev/v1\nexportConstants:\n  name: pmw_epoch\n  definitions:\n"
        f'    policy_epoch: "{epoch}"\n')


def deploy(source: Path, deploy_root: Path) -> Deployment:
    """Validate ``source`` (compile + all suites), copy it to ``deploy_root/<epoch>`` stamped with its epoch
    and point ``deploy_root/current`` at it. Raises :class:`PolicyRejected`; then nothing changes.
    A set whose digest was deployed before was validated then: it is only made current again."""
    epoch = f"p-{policy_digest(source)[:16]}"
    target = deploy_root / epoch
    if not target.exists():
        report = run_policy_tests(source)
        if not report.ok:
            raise PolicyRejected(str(source), report.output)
        deploy_root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=deploy_root))
        shutil.copytree(source, staging, dirs_exist_ok=True)
        _stamp(staging, epoch)
        stamped = _compile(staging, "--skip-tests")
        if stamped.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise PolicyRejected(str(source), stamped.stdout + stamped.stderr)
        try:
            staging.rename(target)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # a concurrent deploy of the same set won the race
            if not target.exists():
                raise
    link = deploy_root / "current"
    tmp_link = deploy_root / f".current-{os.getpid()}"
    tmp_link.unlink(missing_ok=True)
    tmp_link.symlink_to(target.name)
    tmp_link.replace(link)  # atomic swap
    return Deployment(epoch=epoch, path=target)


def current_deployment(deploy_root: Path) -> Deployment | None:
    link = deploy_root / "current"
    if not link.is_symlink():
        return None
    target = link.resolve()
    return Deployment(epoch=target.name, path=target)


__all__ = ["TEST_FILTER_DIMENSIONS", "Deployment", "PolicyTestReport", "PolicyTestResult", "check_test_filter",
           "current_deployment", "deploy", "policy_digest", "run_policy_tests"]
