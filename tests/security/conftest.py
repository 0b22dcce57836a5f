"""Fixtures for the security tests: the repository's PDP (``pworld``, from ``tests/conftest.py``) and a
PDP deployed from a deliberately lax copy of the policies, to show what the runtime's and controller's own
checks hold when a policy lets too much through."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.governance import deploy
from engine.policy.pdp_process import ManagedPdp
from engine.world import World
from tests.conftest import REPO, close_world, open_pdp_world

# The rule that keeps decision events to the roles the policy names, and what the lax copy puts instead.
DECISION_RULE = "- expr: P.attr.role in C.decision_events[R.attr.event_type]"
LAX_RULE = '- expr: "true"'


@pytest.fixture(scope="module")
def lax_pdp(tmp_path_factory: pytest.TempPathFactory, policy_deployment: Path) -> Iterator[CerbosPdp]:
    """A PDP whose event policy lets any live agent with state.write append decision events (a governance
    mistake; its suite, which would catch it, removed so that it deploys)."""
    source = tmp_path_factory.mktemp("lax") / "policies"
    shutil.copytree(REPO / "policies", source)
    event_policy = source / "resources" / "event.yaml"
    text = event_policy.read_text()
    assert DECISION_RULE in text
    event_policy.write_text(text.replace(DECISION_RULE, LAX_RULE))
    (source / "tests" / "event_test.yaml").unlink()
    deployment = deploy(source, tmp_path_factory.mktemp("lax-deploys"))
    pdp = ManagedPdp(deployment.path)
    pdp.start()
    assert pdp.address is not None
    client = CerbosPdp(pdp.address)
    try:
        yield client
    finally:
        client.close()
        pdp.stop()


@pytest.fixture
def lax_world(tmp_path: Path, lax_pdp: CerbosPdp) -> Iterator[World]:
    w = open_pdp_world(f"sqlite:///{tmp_path / 'lax.db'}", lax_pdp, tmp_path / "artifacts")
    yield w
    close_world(w)
