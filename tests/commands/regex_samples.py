"""Strings of an exact length that match (or, one past the bound, no longer match) a regular expression.

Enough of Python's regex syntax for the schemas' patterns: literals, character classes (ranges,
categories), groups, alternation, bounded and unbounded repeats, anchors. ``sample(p, n)`` is a string of
length ``n`` that ``re.fullmatch(p, ...)`` accepts (``None`` if there is none); ``variant`` picks other
characters, so that ``distinct(p, k)`` gives ``k`` different matches.
"""

from __future__ import annotations

import math
import re
import re._constants as C  # noqa: N812
import re._parser as P  # noqa: N812
import string
from collections.abc import Iterator
from typing import Any

INF = math.inf
_PRINTABLE = list(string.ascii_letters + string.digits + "_.:-/ |")
_CATEGORY = {C.CATEGORY_DIGIT: "0123456789", C.CATEGORY_SPACE: " ", C.CATEGORY_WORD: string.ascii_letters + "_",
             C.CATEGORY_NOT_DIGIT: string.ascii_letters, C.CATEGORY_NOT_SPACE: string.ascii_letters,
             C.CATEGORY_NOT_WORD: "-. "}


def _chars(items: list[tuple[Any, Any]]) -> list[str]:
    out: list[str] = []
    negate = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            out.append(chr(av))
        elif op is C.RANGE:
            out.extend(chr(c) for c in range(av[0], av[1] + 1))
        elif op is C.CATEGORY:
            out.extend(_CATEGORY[av])
        else:
            raise NotImplementedError(op)
    if negate:
        return [c for c in _PRINTABLE if c not in out]
    return list(dict.fromkeys(out))


def _bounds(seq: Any) -> tuple[int, float]:
    lo, hi = 0, 0.0
    for op, av in seq:
        a, b = _node_bounds(op, av)
        lo, hi = lo + a, hi + b
    return lo, hi


def _node_bounds(op: Any, av: Any) -> tuple[int, float]:
    if op in (C.LITERAL, C.NOT_LITERAL, C.IN, C.ANY):
        return 1, 1
    if op is C.AT:
        return 0, 0
    if op is C.SUBPATTERN:
        return _bounds(av[3])
    if op is C.BRANCH:
        bounds = [_bounds(alt) for alt in av[1]]
        return min(b[0] for b in bounds), max(b[1] for b in bounds)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT):
        low, high, sub = av
        a, b = _bounds(sub)
        top = INF if high is C.MAXREPEAT else high
        return low * a, (INF if top == INF and b > 0 else top * b)
    raise NotImplementedError(op)


def _gen_seq(seq: list[Any], n: int, pick: Iterator[int]) -> str | None:
    if not seq:
        return "" if n == 0 else None
    (op, av), rest = seq[0], seq[1:]
    lo, hi = _node_bounds(op, av)
    rlo, rhi = _bounds(rest)
    first = max(lo, n - rhi)
    last = min(hi, n - rlo)
    length = int(first)
    while length <= last:
        head = _gen_node(op, av, length, pick)
        if head is not None:
            tail = _gen_seq(rest, n - length, pick)
            if tail is not None:
                return head + tail
        length += 1
    return None


def _gen_node(op: Any, av: Any, n: int, pick: Iterator[int]) -> str | None:
    if op is C.AT:
        return "" if n == 0 else None
    if op is C.LITERAL:
        return chr(av) if n == 1 else None
    if op in (C.IN, C.ANY, C.NOT_LITERAL):
        if n != 1:
            return None
        choices = _chars(av) if op is C.IN else [c for c in _PRINTABLE if op is C.ANY or ord(c) != av]
        return choices[next(pick) % len(choices)]
    if op is C.SUBPATTERN:
        return _gen_seq(list(av[3]), n, pick)
    if op is C.BRANCH:
        for alt in av[1]:
            found = _gen_seq(list(alt), n, pick)
            if found is not None:
                return found
        return None
    if op in (C.MAX_REPEAT, C.MIN_REPEAT):
        low, high, sub = av
        slo, shi = _bounds(sub)
        top = n if high is C.MAXREPEAT else high
        for count in range(low, int(top) + 1):
            if count * slo <= n <= count * shi or (count == 0 and n == 0):
                sizes = [slo] * count
                extra = n - count * slo
                for i in range(count):
                    add = int(min(extra, shi - slo))
                    sizes[i] += add
                    extra -= add
                parts = [_gen_seq(list(sub), size, pick) for size in sizes]
                if all(p is not None for p in parts):
                    return "".join(p for p in parts if p is not None)
        return None
    raise NotImplementedError(op)


def _digits(variant: int) -> Iterator[int]:
    while True:
        yield variant % 10
        variant //= 10


def sample(pattern: str, n: int, variant: int = 0) -> str | None:
    """A string of length ``n`` matching ``pattern`` in full (``None`` when no match has that length)."""
    found = _gen_seq(list(P.parse(pattern)), n, _digits(variant))
    if found is not None and not re.fullmatch(pattern, found):
        return None
    return found


def length_bounds(pattern: str) -> tuple[int, float]:
    """The shortest and longest match of ``pattern`` (``inf``: unbounded)."""
    return _bounds(P.parse(pattern))


def shortest(pattern: str, variant: int = 0) -> str:
    lo, hi = length_bounds(pattern)
    for n in range(lo, int(min(hi, lo + 64)) + 1):
        found = sample(pattern, n, variant)
        if found is not None:
            return found
    raise ValueError(f"no short match of {pattern!r}")


def longest(pattern: str) -> str | None:
    """The longest match (``None`` when unbounded)."""
    lo, hi = length_bounds(pattern)
    if hi == INF:
        return None
    for n in range(int(hi), lo - 1, -1):
        found = sample(pattern, n)
        if found is not None:
            return found
    return None


def overlong(pattern: str) -> str | None:
    """A string one character longer than any match, made of what the pattern accepts (its last bounded
    repeat allowed once more): refused only for its length. ``None`` when the pattern is unbounded."""
    best = longest(pattern)
    if best is None:
        return None
    relaxed = _relax(P.parse(pattern).data)
    found = _gen_seq(relaxed, len(best) + 1, _digits(0))
    if found is None or re.fullmatch(pattern, found):
        return None
    return found


def _relax(seq: list[Any]) -> list[Any]:
    out: list[Any] = []
    for op, av in seq:
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            low, high, sub = av
            out.append((op, (low, high if high is C.MAXREPEAT else high + 1, _relax(list(sub)))))
        elif op is C.SUBPATTERN:
            out.append((op, (av[0], av[1], av[2], _relax(list(av[3])))))
        elif op is C.BRANCH:
            out.append((op, (av[0], [_relax(list(alt)) for alt in av[1]])))
        else:
            out.append((op, av))
    return out


def nth(pattern: str, variant: int) -> str:
    """A short match of ``pattern``, the ``variant``-th of its length (different variants mostly differ)."""
    lo, hi = length_bounds(pattern)
    n = max(lo, len(str(variant)))
    while n <= min(hi, n + 64):
        found = sample(pattern, n, variant)
        if found is not None:
            return found
        n += 1
    return shortest(pattern)


def distinct(pattern: str, count: int) -> list[str]:
    """``count`` different matches of ``pattern`` (as short as possible)."""
    lo, hi = length_bounds(pattern)
    n = max(lo, len(str(max(count - 1, 0))))
    while n <= hi:
        values = [sample(pattern, n, i) for i in range(count)]
        if all(v is not None for v in values) and len(set(values)) == count:
            return [v for v in values if v is not None]
        n += 1
    raise ValueError(f"cannot make {count} distinct matches of {pattern!r}")
