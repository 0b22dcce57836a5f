"""A reload that fails after the PDP took the new set (its activation not recorded) leaves the world deciding
under the old epoch: the deployment's ``current`` points back at the old set and the PDP reloads it. Before,
the PDP kept the new set while the store kept the old epoch, and every later decision was refused
(``policy_unavailable``) until a restart: what a loaded machine showed when a reload's confirmation was late."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.errors import StoreUnavailable
from engine.policy.deployment import CURRENT
from engine.runtime import Runtime, probe_epoch
from tests.conftest import REPO, add_agent


def _another_set(tmp_path: Path) -> Path:
    b = tmp_path / "policies-b"
    shutil.copytree(REPO / "policies", b)
    (b / "resources" / "state.yaml").write_text((b / "resources" / "state.yaml").read_text() + "\n# set B\n")
    return b


def test_a_reload_not_activated_leaves_the_old_set_deciding(runtime: Runtime, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    world, book = runtime.world, runtime.book
    add_agent(world, "alice", ["state.write"])
    epoch_a = probe_epoch(runtime.pdp)

    def store_gone(*_args: object, **_kwargs: object) -> None:
        raise StoreUnavailable("the store went away at the activation")

    monkeypatch.setattr(book, "activate_policy_epoch", store_gone)
    with pytest.raises(StoreUnavailable):
        runtime.reload_policies(_another_set(tmp_path))
    monkeypatch.undo()
    assert book.current_policy_epoch().epoch == epoch_a  # type: ignore[union-attr]
    assert (runtime.deploy_root(runtime.settings) / CURRENT).resolve().name == epoch_a
    assert probe_epoch(runtime.pdp) == epoch_a
    entry = world.compare_and_set_state("alice", "after", 0, {"ok": True})  # decided: the world is not stuck
    assert entry.version == 1
