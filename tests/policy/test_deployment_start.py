"""One owned policy deployment: a start serves the world's own deployment, never the working tree (only a
world's first start deploys it); a ``current`` link that disagrees with the store's recorded epoch (a
reload that deployed and died before its activation was recorded) is repaired to the recorded epoch."""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.policy import governance
from engine.runtime import Runtime
from engine.settings import Settings, load_settings
from tests.cli_support import POLICY_DIR, require_cerbos

EXTRA_RULE = """
    - name: test-extra-guard
      actions: ["write"]
      effect: EFFECT_DENY
      roles: ["*"]
      condition:
        match:
          expr: P.id == "nobody-at-all"
"""


def settings_for(tmp_path: Path, source: Path) -> Settings:
    return load_settings(db_url=f"sqlite:///{tmp_path / 'data' / 'w.db'}", policy_dir=source)


def copy_policies(tmp_path: Path, name: str, *, edited: bool = False) -> Path:
    target = tmp_path / name
    shutil.copytree(POLICY_DIR, target)
    if edited:
        state = target / "resources" / "state.yaml"
        state.write_text(state.read_text() + EXTRA_RULE)
    return target


def served_epochs(rt: Runtime) -> tuple[str, str | None, list[str]]:
    """(the epoch the PDP decides under, the store's current epoch, the activation history)."""
    from engine.runtime import probe_epoch

    current = rt.book.current_policy_epoch()
    return probe_epoch(rt.pdp), current.epoch if current else None, [h.epoch for h in rt.book.policy_history()]


def test_only_the_first_start_deploys_the_working_tree(tmp_path: Path) -> None:
    require_cerbos()
    source = copy_policies(tmp_path, "policies")
    with Runtime.open(settings_for(tmp_path, source)) as rt:
        first = served_epochs(rt)
    assert first[0] == first[1] and first[2] == [first[0]]
    state = source / "resources" / "state.yaml"
    state.write_text(state.read_text() + EXTRA_RULE)  # an edit nobody reloads
    with Runtime.open(settings_for(tmp_path, source)) as rt:
        assert served_epochs(rt) == first
    (source / "resources" / "task.yaml").write_text("not: [valid")  # a broken working tree changes nothing
    with Runtime.open(settings_for(tmp_path, source)) as rt:
        assert served_epochs(rt) == first
    assert len(list((tmp_path / "data" / "policy-deploys").glob("p-*"))) == 1  # nothing was deployed again


def test_a_deployment_the_store_never_recorded_is_repaired_to_the_recorded_epoch(tmp_path: Path) -> None:
    require_cerbos()
    source = copy_policies(tmp_path, "policies")
    with Runtime.open(settings_for(tmp_path, source)) as rt:
        recorded = served_epochs(rt)
    deploy_root = tmp_path / "data" / "policy-deploys"
    half_done = governance.deploy(copy_policies(tmp_path, "policies-b", edited=True), deploy_root)
    assert governance.current_deployment(deploy_root).epoch == half_done.epoch != recorded[0]  # type: ignore[union-attr]
    with Runtime.open(settings_for(tmp_path, source)) as rt:
        assert served_epochs(rt) == recorded  # the PDP serves what the store says; nothing new recorded
    assert governance.current_deployment(deploy_root).epoch == recorded[0]  # type: ignore[union-attr]


def test_a_new_store_on_an_existing_deployment_records_the_deployment(tmp_path: Path) -> None:
    require_cerbos()
    source = copy_policies(tmp_path, "policies")
    deploy_root = tmp_path / "data" / "policy-deploys"
    edited = governance.deploy(copy_policies(tmp_path, "policies-b", edited=True), deploy_root)
    with Runtime.open(settings_for(tmp_path, source)) as rt:  # no epoch in the store yet: the deployment's
        assert served_epochs(rt) == (edited.epoch, edited.epoch, [edited.epoch])
