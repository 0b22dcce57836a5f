"""The simulation reports ``pmw simulate`` writes (``sim-out/<scenario>/``: ``metrics.json``, ``report.md``,
``report.html``, plots as PNG, ``events.jsonl``), browsable from one configured directory.

A run is a direct sub-folder of the reports directory; a file is one of :data:`SHOWN_FILES` or a PNG of a
plain name. Every name is matched against :data:`SAFE_NAME` and the resolved path must stay inside the
reports directory (symlinks out of it included): anything else is ``NotFound`` naming what was asked, and
nothing outside is read. ``events.jsonl`` is never served (a run's log may hold its agents' private memory).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import NotFound

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SHOWN_FILES = ("report.md", "metrics.json", "report.html")
MAX_RUNS = 500
MAX_TEXT_BYTES = 1024 * 1024
MEDIA = {".png": "image/png", ".md": "text/plain; charset=utf-8", ".json": "application/json",
         ".html": "text/html; charset=utf-8"}


@dataclass(frozen=True)
class ReportRun:
    """One run's folder: its name and the files the console shows of it."""

    name: str
    files: list[str]
    plots: list[str]


def _inside(root: Path, *names: str) -> Path:
    """``root/names...`` resolved, if every name is safe and the result lies inside ``root``."""
    for name in names:
        if not isinstance(name, str) or not SAFE_NAME.fullmatch(name) or ".." in name:
            raise NotFound("report", str(name)[:100])
    base = root.resolve()
    path = base.joinpath(*names).resolve()
    if not path.is_relative_to(base) or path == base:
        raise NotFound("report", "/".join(names)[:200])
    return path


def list_runs(root: Path) -> list[ReportRun]:
    """The runs under ``root`` (none when it does not exist), by name, at most :data:`MAX_RUNS`."""
    if not root.is_dir():
        return []
    runs = []
    for child in sorted(root.iterdir())[:MAX_RUNS]:
        if child.is_dir() and SAFE_NAME.fullmatch(child.name):
            try:
                runs.append(run_of(root, child.name))
            except NotFound:
                continue
    return runs


def run_of(root: Path, name: str) -> ReportRun:
    """The run ``name`` (``NotFound`` unless it is a folder of ``root`` holding a report)."""
    folder = _inside(root, name)
    if not folder.is_dir():
        raise NotFound("report", name)
    files = [f for f in SHOWN_FILES if (folder / f).is_file()]
    plots = sorted(p.name for p in folder.glob("*.png") if p.is_file() and SAFE_NAME.fullmatch(p.name))
    if not files:
        raise NotFound("report", name)
    return ReportRun(name, files, plots)


def report_file(root: Path, run: str, name: str) -> tuple[Path, str]:
    """A file of a run the console serves, and its media type (``NotFound`` for any other)."""
    if name not in SHOWN_FILES and not name.endswith(".png"):
        raise NotFound("report file", str(name)[:100])
    path = _inside(root, run, name)
    if not path.is_file() or path.parent.resolve() != _inside(root, run):
        raise NotFound("report file", f"{run}/{name}"[:200])
    return path, MEDIA[path.suffix]


def report_text(root: Path, run: str, name: str) -> str:
    """The text of ``report.md`` or ``metrics.json`` (cut at :data:`MAX_TEXT_BYTES`)."""
    path, _ = report_file(root, run, name)
    return path.read_bytes()[:MAX_TEXT_BYTES].decode("utf-8", errors="replace")


def report_metrics(root: Path, run: str) -> dict[str, Any]:
    """``metrics.json`` as an object (empty when the run has none or it is not a JSON object)."""
    try:
        found = json.loads(report_text(root, run, "metrics.json"))
    except (NotFound, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


__all__ = ["SAFE_NAME", "SHOWN_FILES", "ReportRun", "list_runs", "report_file", "report_metrics", "report_text",
           "run_of"]
