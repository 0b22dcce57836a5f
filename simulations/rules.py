"""A scenario's rule directory: the rule files it names, with its constants applied.

``rules.constants`` in a scenario (and a sweep's ``rules.constants.<name>``) override the constants the
rule files declare (``constants:`` of ``rules/wake_storm.yaml``: ``max_depth``, ``cooldown_us`` ...). The
files are copied into the run's work folder with the new values, so the repository's rules are never
edited; the controller then validates and compiles the copy as usual. The files are read with
:mod:`engine.yaml_input` (UTF-8, size, depth and alias expansion bounded: ``YamlRefused`` otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from engine.errors import InvalidInput
from engine.yaml_input import load_yaml_data, parse_yaml_data, read_yaml_text


def prepare_rules(source: Path, constants: Mapping[str, int | float | str], dest: Path, *,
                  strict: bool = True) -> Path:
    """Copy every ``*.yaml`` of ``source`` into ``dest`` (replaced), overriding ``constants`` wherever a
    file declares them; returns ``dest``. With ``strict`` a constant no file declares is ``InvalidInput``."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.yaml"):
        old.unlink()
    used: set[str] = set()
    for path in sorted(source.glob("*.yaml")):
        text = read_yaml_text(path)
        data = parse_yaml_data(text, str(path)) if constants else None
        declared = data.get("constants") if isinstance(data, dict) else None
        if isinstance(declared, dict) and declared.keys() & constants.keys():
            for name in declared.keys() & constants.keys():
                declared[name] = constants[name]
                used.add(name)
            text = yaml.safe_dump(data, sort_keys=False)
        (dest / path.name).write_text(text, encoding="utf-8")
    missing = sorted(set(constants) - used)
    if strict and missing:
        raise InvalidInput("rules.constants", f"no rule file in {source} declares {', '.join(missing)}")
    return dest


def declared_constants(source: Path) -> dict[str, object]:
    """Every constant the rule files of ``source`` declare, with its value."""
    found: dict[str, object] = {}
    for path in sorted(source.glob("*.yaml")):
        data = load_yaml_data(path)
        if isinstance(data, dict) and isinstance(data.get("constants"), dict):
            found.update(data["constants"])
    return found


__all__ = ["declared_constants", "prepare_rules"]
