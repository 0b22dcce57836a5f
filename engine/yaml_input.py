"""YAML from outside (scenario files, rule files, sweep values): read safely, or refused with a typed error.

:func:`parse_yaml` checks the document's *event stream* before any node or value is built, in one pass
and without recursion:

* size: at most :data:`MAX_YAML_BYTES` bytes of UTF-8;
* depth: mappings and sequences nested at most :data:`MAX_YAML_DEPTH` deep (PyYAML's composer recurses,
  so a deeper document would end in ``RecursionError``);
* aliases: an alias to an anchor that is still open (a recursive document) is refused, and the nodes that
  aliases add (each alias counted as the full copy of what it names, computed from sizes, never by
  expanding) may not exceed :data:`ALIAS_BUDGET` or the document's own node count, whichever is larger. A
  "billion laughs" alias bomb of a few hundred bytes is refused in microseconds; the documents PMW writes
  itself (``yaml.safe_dump`` shares repeated lists as ``&id001``/``*id001``) pass.

Only then is the document composed (for line numbers) and constructed with PyYAML's safe constructor,
and the result is returned as plain data: dicts, lists and scalars, no two places sharing one object
(an alias becomes a copy, so a caller may mutate what it got). Scalars a value cannot be made of (an
integer of more than 4,300 digits, a date that does not exist) are refused too.

Every refusal is :class:`~engine.errors.YamlRefused` (``yaml_refused``: file, line, reason); a file that is
not UTF-8 is refused naming the file, the byte offset and the line. YAML *syntax* errors are
``yaml.YAMLError`` as before, so each loader keeps its own ``file:line`` message for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.errors import YamlRefused

MAX_YAML_BYTES = 16 * 1024 * 1024
MAX_YAML_DEPTH = 64
ALIAS_BUDGET = 100_000

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it


@dataclass(frozen=True)
class YamlDocument:
    """One parsed document: ``data`` as plain values, ``node`` the composed root (``None`` for an empty
    document) whose marks give each value's line."""

    data: Any
    node: yaml.Node | None


def read_yaml_text(path: Path, *, max_bytes: int = MAX_YAML_BYTES) -> str:
    """The text of ``path``: at most ``max_bytes`` bytes, decoded as UTF-8 (``YamlRefused`` naming the file
    otherwise). ``OSError`` (missing, unreadable) is left to the caller, who knows what the file was for."""
    size = path.stat().st_size
    if size > max_bytes:
        raise YamlRefused(str(path), 0, f"the file is {size} bytes; the limit is {max_bytes}")
    raw = path.read_bytes()
    if len(raw) > max_bytes:  # grew since stat
        raise YamlRefused(str(path), 0, f"the file is over {max_bytes} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise YamlRefused(str(path), line, f"not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
                                           f"({exc.reason})") from None


def load_yaml(path: Path, *, max_bytes: int = MAX_YAML_BYTES) -> YamlDocument:
    """:func:`read_yaml_text` then :func:`parse_yaml`, errors naming ``path``."""
    return parse_yaml(read_yaml_text(path, max_bytes=max_bytes), str(path), max_bytes=max_bytes)


def parse_yaml(text: str, source: str = "<yaml>", *, max_bytes: int = MAX_YAML_BYTES) -> YamlDocument:
    """Check ``text`` (see the module docstring), then compose and construct it; ``source`` names it in
    errors. Raises :class:`~engine.errors.YamlRefused`, or ``yaml.YAMLError`` for a syntax error."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:  # lone surrogates in text handed over by a caller
        raise YamlRefused(source, text.count("\n", 0, exc.start) + 1,
                          f"not UTF-8: a lone surrogate at position {exc.start}") from None
    if size > max_bytes:
        raise YamlRefused(source, 0, f"the document is {size} bytes; the limit is {max_bytes}")
    if "\x00" in text:
        raise YamlRefused(source, text.count("\n", 0, text.index("\x00")) + 1, "contains a NUL character")
    _check_events(text, source)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlDocument(None, None)
        try:
            data = loader.construct_document(node)
        except (ValueError, OverflowError, TypeError) as exc:  # int('1' * 5000), a date that does not exist
            raise YamlRefused(source, 0, f"a value cannot be read: {exc}") from None
        return YamlDocument(_unshared(data), node)
    finally:
        loader.dispose()


def parse_yaml_data(text: str, source: str = "<yaml>", *, max_bytes: int = MAX_YAML_BYTES) -> Any:
    """The plain data of ``text``; every problem, a syntax error included, is ``YamlRefused`` (for callers
    with no error style of their own: sweep values, the constants of rule files)."""
    try:
        return parse_yaml(text, source, max_bytes=max_bytes).data
    except yaml.YAMLError as exc:
        raise YamlRefused(source, _line_of(exc), f"YAML syntax: {_problem_of(exc)}") from None


def load_yaml_data(path: Path, *, max_bytes: int = MAX_YAML_BYTES) -> Any:
    """:func:`parse_yaml_data` of the file at ``path`` (read by :func:`read_yaml_text`)."""
    return parse_yaml_data(read_yaml_text(path, max_bytes=max_bytes), str(path), max_bytes=max_bytes)


def _line_of(exc: yaml.YAMLError) -> int:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return int(mark.line) + 1 if mark is not None else 0


def _problem_of(exc: yaml.YAMLError) -> str:
    return str(getattr(exc, "problem", None) or exc)


class _Frame:
    """A mapping or sequence being scanned: its anchor and the nodes under it so far (aliases expanded)."""

    __slots__ = ("anchor", "nodes")

    def __init__(self, anchor: str | None) -> None:
        self.anchor = anchor
        self.nodes = 1


def _check_events(text: str, source: str) -> None:
    """Depth, recursive aliases and the alias expansion budget, from the event stream alone."""
    try:
        _scan(text, source)
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in _problem_of(exc):  # libyaml's own limit (1000) met before ours
            raise YamlRefused(source, _line_of(exc), f"nested deeper than {MAX_YAML_DEPTH} levels") from None
        raise


def _scan(text: str, source: str) -> None:
    sizes: dict[str, int] = {}  # anchor -> nodes of its value, aliases included
    open_anchors: set[str] = set()
    stack: list[_Frame] = []
    own = 0  # nodes written out in the document
    added = 0  # nodes aliases add
    for event in yaml.parse(text, Loader=_Loader):
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, yaml.AliasEvent):
            anchor = str(event.anchor)
            if anchor in open_anchors:
                raise YamlRefused(source, line, f"alias *{anchor} refers to a node that contains it "
                                                "(a recursive document)")
            if anchor not in sizes:
                raise YamlRefused(source, line, f"alias *{anchor} names no anchor")
            count = sizes[anchor]
            added += count
            if added > max(ALIAS_BUDGET, own):
                raise YamlRefused(source, line, f"aliases expand past the budget of {max(ALIAS_BUDGET, own)} "
                                                "nodes (an alias bomb?)")
        elif isinstance(event, yaml.ScalarEvent):
            own += 1
            count = 1
            if event.anchor is not None:
                sizes[str(event.anchor)] = 1
        elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            own += 1
            if len(stack) >= MAX_YAML_DEPTH:
                raise YamlRefused(source, line, f"nested deeper than {MAX_YAML_DEPTH} levels")
            opened = str(event.anchor) if event.anchor is not None else None
            if opened is not None:
                open_anchors.add(opened)
            stack.append(_Frame(opened))
            continue
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            frame = stack.pop()
            count = frame.nodes
            if frame.anchor is not None:
                open_anchors.discard(frame.anchor)
                sizes[frame.anchor] = count
        else:
            continue
        if stack:
            stack[-1].nodes += count


def _unshared(value: Any) -> Any:
    """``value`` with every dict and list copied, so that no two places hold one object (what an alias
    constructs). The recursion is bounded by :data:`MAX_YAML_DEPTH` (checked before), the work by the
    alias budget."""
    if isinstance(value, dict):
        return {k: _unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshared(v) for v in value]
    return value



def node_line(node: Any, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the deepest YAML node on ``loc`` (a pydantic or condition path) under ``node``;
    None when there is no node. Shared by every loader that reports ``file:line: field``."""
    if node is None:
        return None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)),
                         None)
            if found is None:
                break
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
        else:
            break
    return int(node.start_mark.line) + 1

__all__ = [
    "ALIAS_BUDGET",
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "YamlDocument",
    "load_yaml",
    "load_yaml_data",
    "node_line",
    "parse_yaml",
    "parse_yaml_data",
    "read_yaml_text",
]
