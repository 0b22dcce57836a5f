"""The policy repository compiles and passes every suite; a broken copy is refused with file:line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.errors import PolicyRejected
from engine.policy.governance import current_deployment, deploy, policy_digest, run_policy_tests

REPO_POLICIES = Path(__file__).resolve().parents[2] / "policies"
KINDS = ("agent", "state", "task", "artifact", "memory", "wake", "handoff", "receipt", "room", "topology",
         "channel", "message", "approval", "tool")


@pytest.fixture
def policy_copy(tmp_path: Path, policy_deployment: Path) -> Path:  # policy_deployment: needs Cerbos
    copy = tmp_path / "policies"
    shutil.copytree(REPO_POLICIES, copy)
    return copy


def test_every_kind_has_a_policy_and_a_suite() -> None:
    for kind in KINDS:
        assert (REPO_POLICIES / "resources" / f"{kind}.yaml").is_file(), kind
        assert (REPO_POLICIES / "tests" / f"{kind}_test.yaml").is_file(), kind


def test_the_repository_compiles_and_every_suite_passes(policy_copy: Path, tmp_path: Path) -> None:
    report = run_policy_tests(policy_copy, junit=tmp_path / "junit.xml")
    assert report.ok, report.output
    assert "FAILED" not in report.output
    assert "<testsuites" in (tmp_path / "junit.xml").read_text()


def test_a_syntax_error_fails_with_file_and_line(policy_copy: Path) -> None:
    task = policy_copy / "resources" / "task.yaml"
    task.write_text(task.read_text().replace('derivedRoles: ["owner"]', 'derivedRoles: ["ownr"]', 1))
    report = run_policy_tests(policy_copy)
    assert (report.ok, report.exit_code) == (False, 3)
    assert "resources/task.yaml:" in report.output


def test_a_regressed_rule_fails_a_suite(policy_copy: Path) -> None:
    memory = policy_copy / "resources" / "memory.yaml"
    text = memory.read_text()
    assert "P.attr.clearance < R.attr.sensitivity" in text
    memory.write_text(text.replace("P.attr.clearance < R.attr.sensitivity", "false"))
    report = run_policy_tests(policy_copy)
    assert (report.ok, report.exit_code) == (False, 4)


def test_an_emptied_policy_file_is_caught_by_the_suites(policy_copy: Path) -> None:
    (policy_copy / "resources" / "memory.yaml").write_text("")
    assert not run_policy_tests(policy_copy).ok


def test_a_broken_set_is_never_deployed(policy_copy: Path, tmp_path: Path) -> None:
    root = tmp_path / "deploys"
    good = deploy(policy_copy, root)
    (policy_copy / "resources" / "room.yaml").write_text("resourcePolicy: [broken")
    with pytest.raises(PolicyRejected) as err:
        deploy(policy_copy, root)
    assert "room.yaml" in err.value.output
    assert current_deployment(root) == good


def test_the_epoch_is_the_digest_of_the_set(policy_copy: Path, tmp_path: Path) -> None:
    first = deploy(policy_copy, tmp_path / "d")
    assert first.epoch == f"p-{policy_digest(policy_copy)[:16]}"
    (policy_copy / "resources" / "room.yaml").write_text(
        (policy_copy / "resources" / "room.yaml").read_text() + "\n# a comment changes the epoch\n")
    assert deploy(policy_copy, tmp_path / "d").epoch != first.epoch
    assert 'policy_epoch: "p-' in (tmp_path / "d" / "current" / "_epoch" / "epoch.yaml").read_text()
