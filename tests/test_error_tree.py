"""The error tree drawn in ``engine/errors.py``'s docstring is the tree the module defines: every error class
is drawn once, under its base, with its code and CLI exit code (readers rely on that table)."""

from __future__ import annotations

import inspect

import engine.errors as errors
from engine.errors import PMWError


def _drawn() -> dict[str, tuple[str | None, str, int, int]]:
    """Each drawn class: (its drawn parent, its code, its exit code, its depth)."""
    doc = errors.__doc__ or ""
    rows: dict[str, tuple[str | None, str, int, int]] = {}
    stack: list[str] = []
    for line in doc.splitlines():
        if "PMWError" in line and "code" in line and "CLI exit" in line:
            stack = ["PMWError"]
            continue
        if not stack or not line.strip().startswith(("├", "│", "└")):
            continue
        prefix = line.split("──", 1)[0]
        depth = len(prefix) // 4  # each level is four columns wide
        rest = line.split("── ", 1)[1].split()
        name = rest[0]
        code, exit_code = (rest[1], int(rest[2])) if not rest[1].isdigit() else ("", int(rest[1]))
        del stack[depth:]
        rows[name] = (stack[-1] if stack else None, code, exit_code, depth)
        stack.append(name)
    return rows


def test_every_error_class_is_drawn_under_its_base_with_its_code_and_exit() -> None:
    drawn = _drawn()
    defined = {name: cls for name, cls in inspect.getmembers(errors, inspect.isclass)
               if issubclass(cls, PMWError) and cls is not PMWError and cls.__module__ == errors.__name__}
    assert sorted(set(defined) - set(drawn)) == [], "error classes missing from the docstring's tree"
    assert sorted(set(drawn) - set(defined)) == [], "the docstring draws classes the module does not define"
    for name, cls in defined.items():
        parent, code, exit_code, _ = drawn[name]
        assert parent == cls.__mro__[1].__name__, f"{name} is drawn under {parent}"
        assert exit_code == cls.exit_code, f"{name} drawn with exit {exit_code}, defined {cls.exit_code}"
        if code:
            assert code == cls.code, f"{name} drawn with code {code}, defined {cls.code}"
