"""A PDP of its own on an undeployed policy set, for the governance calls that ask "what would this set
decide" (``explain`` with a directory, ``shadow``): validated, started on loopback, stopped after.

Nothing is deployed and the world's epoch does not move: the candidate is served from where it is, with
no decision log (its answers are questions, not decisions), by a ``ManagedPdp`` that is stopped (and its
working directory removed) when the block ends.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.errors import InvalidInput, PolicyRejected, PolicyUnavailable
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.governance import policy_digest
from engine.policy.pdp_process import ManagedPdp, cerbos_binary


def candidate_dir(field: str, value: object) -> Path:
    """A policy directory argument: an existing directory (``InvalidInput`` naming ``field`` otherwise)."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise InvalidInput(field, f"{value!r} is not a directory path")
    path = Path(value)
    if not path.is_dir():
        raise InvalidInput(field, f"{value!r} is not a directory")
    return path.absolute()


def candidate_epoch(policy_dir: Path) -> str:
    """The epoch ``policy_dir`` would be deployed under (``p-`` + its digest), as ``governance.deploy`` names it."""
    return f"p-{policy_digest(policy_dir)[:16]}"


def check_compiles(policy_dir: Path, *, timeout: float = 120) -> None:
    """``cerbos compile --skip-tests``: ``PolicyRejected`` with file:line output if the set does not compile.
    The suites are not run: a candidate under edit is asked about before its suites are brought up to date."""
    try:
        done = subprocess.run([str(cerbos_binary()), "compile", "--skip-tests", str(policy_dir)],
                              capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, "CERBOS_NO_TELEMETRY": "1"})
    except subprocess.TimeoutExpired as exc:
        raise PolicyUnavailable(f"cerbos compile did not finish within {exc.timeout} s") from exc
    if done.returncode != 0:
        raise PolicyRejected(str(policy_dir), (done.stdout + done.stderr).strip())


@contextmanager
def candidate_pdp(policy_dir: Path, *, timeout_s: float = 5.0) -> Iterator[CerbosPdp]:
    """A client of a fresh PDP serving ``policy_dir`` (which must compile); stopped when the block ends."""
    check_compiles(policy_dir)
    managed = ManagedPdp(policy_dir)
    try:
        address = managed.start()
        client = CerbosPdp(address, timeout_s=timeout_s)
        try:
            yield client
        finally:
            client.close()
    finally:
        managed.stop()


__all__ = ["candidate_dir", "candidate_epoch", "candidate_pdp", "check_compiles"]
