"""Controller fixtures: each test gets its own controllers (each with its own durable_rules host)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.controller import Controller
from tests.controller.support import copy_rules

MakeController = Callable[..., Controller]


@pytest.fixture
def rule_dir(tmp_path: Path) -> Path:
    """A private copy of the repository's rules, free to edit."""
    return copy_rules(tmp_path / "rules")


@pytest.fixture
def make_controller(rule_dir: Path) -> Iterator[MakeController]:
    """Loaded controllers for world ``w1`` (or another), closed after the test."""
    made: list[Controller] = []

    def make(world: str = "w1", directory: Path | None = None, **kwargs: object) -> Controller:
        controller = Controller(world, directory or rule_dir, **kwargs)  # type: ignore[arg-type]
        made.append(controller)
        controller.load()
        return controller

    yield make
    for controller in made:
        controller.close()
