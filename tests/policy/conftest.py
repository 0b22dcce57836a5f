"""Fixtures of the policy tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.runtime import Runtime
from tests.conftest import runtime_on_policy_copy


@pytest.fixture
def runtime(tmp_path: Path, policy_deployment: Path) -> Iterator[Runtime]:  # policy_deployment: needs Cerbos
    """A runtime deciding with an editable copy of the repository's policies (``tmp_path / "policies-a"``),
    closed after the test: the reload, rollback and revocation tests edit and reload that copy."""
    rt = runtime_on_policy_copy(tmp_path, "policies-a")
    yield rt
    rt.close()
