"""A static check that the store has one write path.

Rules: (1) outside ``store/`` nothing imports a database driver or SQLAlchemy; (2) inside ``store/`` only
``gateway.py`` builds write statements (``insert``/``update``/``delete`` imports or zero-argument
``.insert()``/``.update()``/``.delete()`` calls, or SQL text starting with INSERT/UPDATE/DELETE/REPLACE);
(3) ``migrations.py`` may write only its own ``schema_migrations`` bookkeeping table.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

DB_MODULES = ("sqlalchemy", "sqlite3", "psycopg", "psycopg2", "asyncpg")
WRITE_NAMES = {"insert", "update", "delete"}
WRITE_SQL = re.compile(
    r"^\s*(insert\s+(or\s+\w+\s+)?into|update\s+\S+\s+set|delete\s+from|replace\s+into|merge\s+into)\b",
    re.IGNORECASE)
PACKAGES = ("engine", "store", "simulations")


def _imports_db(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] in DB_MODULES:
                return alias.name
    if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in DB_MODULES:
        return node.module
    return None


def _write_constructs(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "sqlalchemy":
            found += [(node.lineno, f"imports {a.name}") for a in node.names if a.name in WRITE_NAMES]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in WRITE_NAMES and not node.args and not node.keywords):
            found.append((node.lineno, f".{node.func.attr}() call"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and WRITE_SQL.match(node.value):
            found.append((node.lineno, f"SQL text {node.value[:30]!r}"))
    return found


def _migration_writes(tree: ast.AST) -> list[tuple[int, str]]:
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in WRITE_NAMES:
            target = node.args[0] if node.args else None
            if not (isinstance(target, ast.Name) and target.id == "schema_migrations"):
                bad.append((node.lineno, f"{node.func.id}() of something other than schema_migrations"))
    return bad


def violations(root: Path) -> list[str]:
    """Every place under ``root`` that breaks the one-write-path rule, as ``path:line: reason``."""
    out: list[str] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(), filename=rel)
            if not rel.startswith("store/"):
                out += [f"{rel}:{n.lineno}: imports {m}" for n in ast.walk(tree) if (m := _imports_db(n))]
            elif rel == "store/migrations.py":
                out += [f"{rel}:{line}: {why}" for line, why in _migration_writes(tree)]
            elif rel != "store/gateway.py":
                out += [f"{rel}:{line}: {why}" for line, why in _write_constructs(tree)]
    return out
