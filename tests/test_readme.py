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


def test_the_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (code,) = blocks("python")
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    world = namespace["world"]
    assert world.get_state("plan").value == {"step": 2}  # type: ignore[attr-defined]
    world.close()  # type: ignore[attr-defined]


def test_the_cli_example_runs(tmp_path: Path) -> None:
    cli_block = next(b for b in blocks("sh") if "pmw init" in b)
    env = {**os.environ, "PMW_DB_URL": f"sqlite:///{tmp_path / 'world.db'}"}
    for line in cli_block.strip().splitlines():
        args = shlex.split(line)
        assert args[0] == "pmw"
        done = subprocess.run([sys.executable, "-m", "engine.cli", *args[1:]], check=False, env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (line, done.stderr)
