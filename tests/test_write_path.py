"""The gateway is the only write path: a static check over the source tree, shown able to fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.write_path import violations

ROOT = Path(__file__).resolve().parents[1]


def test_the_repository_has_one_write_path() -> None:
    assert violations(ROOT) == []


@pytest.fixture
def copy_of_repo(tmp_path: Path) -> Path:
    for package in ("engine", "store", "simulations"):
        if (ROOT / package).exists():
            shutil.copytree(ROOT / package, tmp_path / package)
    return tmp_path


@pytest.mark.parametrize(("path", "code", "reason"), [
    ("engine/sneaky.py", "import sqlalchemy\n", "imports sqlalchemy"),
    ("engine/sneaky.py", "from sqlite3 import connect\n", "imports sqlite3"),
    ("store/reads.py", "from sqlalchemy import update\n", "imports update"),
    ("store/reads.py", "def f(t):\n    return t.delete()\n", ".delete() call"),
    ("store/reads.py", "Q = 'UPDATE tasks SET status = 1'\n", "SQL text"),
    ("store/migrations.py", "def f(conn):\n    conn.execute(insert(tasks), [{}])\n", "other than schema_migrations"),
])
def test_a_second_write_path_is_caught(copy_of_repo: Path, path: str, code: str, reason: str) -> None:
    target = copy_of_repo / path
    target.write_text(target.read_text() + "\n" + code if target.exists() else code)
    found = violations(copy_of_repo)
    assert any(path in v and reason in v for v in found), found


def test_world_mixins_define_no_method_twice() -> None:
    """Call groups are mixins of one class: a private helper defined twice would silently shadow the other."""
    from engine.world import World

    owners: dict[str, list[str]] = {}
    for cls in World.__mro__:
        for name, value in vars(cls).items():
            if callable(value) or isinstance(value, staticmethod | classmethod):
                owners.setdefault(name, []).append(cls.__name__)
    assert {n: c for n, c in owners.items() if len(c) > 1 and not n.startswith("__")} == {}
