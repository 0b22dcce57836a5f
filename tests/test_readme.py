"""The README's examples run as written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.DOTALL)


def test_the_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 policy_deployment: Path) -> None:  # policy_deployment: needs Cerbos
    monkeypatch.chdir(tmp_path)
    (code,) = blocks("python")
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    world = namespace["world"]  # the runtime has closed it; read the file it left behind
    from engine.policy.enforcement import LocalScopeRules
    from engine.world.book import open_world
    from tests.conftest import close_world, kept

    again = kept(open_world("sqlite:///pmw-data/world.db", policy=LocalScopeRules()))
    assert again.get_state("plan").value == {"step": 2}
    assert world is not None
    close_world(again)


def test_the_cli_example_runs(tmp_path: Path, policy_deployment: Path) -> None:  # needs Cerbos
    cli_block = next(b for b in blocks("sh") if "pmw init" in b)
    env = {**os.environ, "PMW_DB_URL": f"sqlite:///{tmp_path / 'world.db'}"}
    for line in cli_block.strip().splitlines():
        args = shlex.split(line)
        assert args[0] == "pmw"
        done = subprocess.run([sys.executable, "-m", "engine.cli", *args[1:]], check=False, env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (line, done.stderr)
