"""contracts/retention.yaml is validated at load (`file:line: field`); the repository's file loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.contracts.retention import load_retention
from engine.errors import ContractInvalid


def test_repository_rules_load() -> None:
    rules = load_retention()
    assert rules.artifacts["scratch"] == 86400
    assert rules.memory_expiry_us("hypothesis", 0, None) == 2592000 * 1_000_000
    assert rules.memory_expiry_us("hypothesis", 0, 5) == 5  # its own TTL first
    assert rules.memory_expiry_us("verified_fact", 0, None) is None


def test_no_file_keeps_everything(tmp_path: Path) -> None:
    assert load_retention(tmp_path).memory == {}


@pytest.mark.parametrize(("text", "line", "field"), [
    ("memory:\n  hypothesis: 10\n  gossip: 5\n", 3, "memory.gossip"),
    ("artifacts:\n  scratch: -1\n", 2, "artifacts.scratch"),
    ("memory: {}\nforever: true\n", 2, "forever"),
])
def test_bad_rules_name_file_line_and_field(tmp_path: Path, text: str, line: int, field: str) -> None:
    (tmp_path / "retention.yaml").write_text(text)
    with pytest.raises(ContractInvalid) as caught:
        load_retention(tmp_path)
    assert (caught.value.field, caught.value.line) == (field, line)
    assert caught.value.message.startswith(f"{tmp_path / 'retention.yaml'}:{line}: {field}:")
