"""Contract files are validated at load: every problem is `file:line: field`, and nothing of a bad directory
is used. The repository's own contracts load."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.contracts import load_contracts
from engine.errors import ContractInvalid

GOOD = """\
action: ping
input_schema:
  type: object
  properties:
    to: {type: string}
side_effect: S1
idempotency:
  policy: natural
required_authority:
  capability: tool:ping
timeout_s: 1
compensation:
  kind: NO_COMPENSATION
evidence: E1
"""


def _dir_with(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / "actions").mkdir(exist_ok=True)
    (tmp_path / "actions" / f"{name}.yaml").write_text(text)
    return tmp_path


def _refusal(tmp_path: Path, text: str, name: str = "ping") -> ContractInvalid:
    with pytest.raises(ContractInvalid) as caught:
        load_contracts(_dir_with(tmp_path, name, text))
    return caught.value


def test_repository_contracts_load() -> None:
    book = load_contracts()
    assert {"send_message", "recall_message", "publish_release", "label_thread"} <= set(book)
    assert book.contract("publish_release").needs_approval
    assert not book.contract("send_message").needs_approval


def test_a_good_file_loads(tmp_path: Path) -> None:
    assert load_contracts(_dir_with(tmp_path, "ping", GOOD)).contract("ping").timeout_s == 1


def test_unknown_field_names_its_line(tmp_path: Path) -> None:
    error = _refusal(tmp_path, GOOD + "run: rm -rf /\n")
    assert (error.line, error.field, error.reason) == (15, "run", "unknown field")
    assert error.message.startswith(f"{tmp_path / 'actions' / 'ping.yaml'}:15: run:")


def test_schema_keyword_outside_the_subset_names_the_keyword(tmp_path: Path) -> None:
    error = _refusal(tmp_path, GOOD.replace("    to: {type: string}", "    to: {type: string, $ref: 'http://x'}"))
    assert error.field == "input_schema.properties.to.$ref"
    assert error.line == 5


def test_s3_without_approval_is_refused(tmp_path: Path) -> None:
    text = GOOD.replace("side_effect: S1", "side_effect: S3").replace("evidence: E1", "evidence: E3")
    error = _refusal(tmp_path, text)
    assert "S3 action needs approval" in error.reason


def test_external_action_without_idempotency_is_never_retried(tmp_path: Path) -> None:
    text = (GOOD.replace("side_effect: S1", "side_effect: S2").replace("evidence: E1", "evidence: E2")
            .replace("policy: natural", "policy: none") + "retry:\n  max_attempts: 3\n")
    assert "never retried" in _refusal(tmp_path, text).reason


def test_rollback_names_an_inverse_that_exists(tmp_path: Path) -> None:
    text = GOOD.replace("kind: NO_COMPENSATION", "kind: TRUE_ROLLBACK\n  inverse: unping")
    error = _refusal(tmp_path, text)
    assert (error.field, error.line) == ("compensation.inverse", 14)


def test_file_name_is_the_action(tmp_path: Path) -> None:
    assert _refusal(tmp_path, GOOD, name="pong").field == "action"


def test_yaml_tags_construct_nothing(tmp_path: Path) -> None:
    error = _refusal(tmp_path, GOOD.replace("timeout_s: 1", "timeout_s: !!python/object/apply:os.system ['id']"))
    assert error.line == 11 and "YAML" in error.reason


def test_duplicate_key_is_refused(tmp_path: Path) -> None:
    assert _refusal(tmp_path, GOOD + "timeout_s: 2\n").field == "timeout_s"
