"""The shared limits of engine/models/common.py, on their own: what a boundary model accepts, both JSON
encoders and both stores can hold; what they refuse is refused by an iterative walk (no recursion, however
deep), quickly (a shared-reference "bomb" or a cycle is bounded), with a field path and a typed error.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field
from pydantic_core import PydanticCustomError

from engine.errors import InvalidInput, PayloadTooLarge
from engine.models.common import (
    INT64_MAX,
    INT64_MIN,
    MAX_JSON_DEPTH,
    JsonValue,
    Model,
    Name,
    Payload,
    Text,
    canonical_json,
    check_values,
)
from engine.validation import build, check_id, check_int64, parse_json_text
from tests.hardening.support import deep_dict, deep_list


class Request(Model):
    payload: Payload = Field(default_factory=dict)
    value: JsonValue = None
    name: Name = "n"
    text: Text = "t"
    free: str = ""
    count: int = 0
    ratio: float = 0.0
    tags: list[str] = Field(default_factory=list)
    nested: list[Any] = Field(default_factory=list)


# Any JSON-ish value, bad ones included: integers of any size, every code point (lone surrogates and NUL
# too), floats with NaN and infinities, nesting up to the strategy's own limit.
anything = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
              st.floats(allow_nan=True, allow_infinity=True),
              st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=6)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=4), inner, max_size=4),
    max_leaves=25)


def _storable(value: Any) -> bool:
    """What both stores hold: ints in 64 bits, finite floats, UTF-8 strings without NUL."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, int) and not INT64_MIN <= item <= INT64_MAX:
            return False
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, str):
            if "\x00" in item:
                return False
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        if isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        if isinstance(item, list):
            stack += item
    return True


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(value=anything)
def test_accepted_values_are_exactly_the_storable_ones(value: Any) -> None:
    """A value passes the check iff both stores can hold it; then neither encoder can fail on it."""
    try:
        check_values(value, json_only=True)
    except PydanticCustomError:
        assert not _storable(value), value
        with pytest.raises(InvalidInput):
            canonical_json(value)
        return
    assert _storable(value), value
    orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    json.loads(canonical_json(value))


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 10_000, 200_000])
@pytest.mark.parametrize("build_deep", [deep_list, deep_dict], ids=["lists", "dicts"])
def test_deep_nesting_is_refused_without_recursion(depth: int, build_deep: Any) -> None:
    value = build_deep(depth)
    started = time.perf_counter()
    for field, bad in (("payload", {"v": value}), ("value", value), ("nested", [value])):
        with pytest.raises(InvalidInput) as refused:
            build(Request, **{field: bad})
        assert refused.value.field.startswith(field)
    with pytest.raises(InvalidInput, match="nested deeper"):
        canonical_json(value)
    assert time.perf_counter() - started < 2.0


def test_the_depth_limit_is_exact() -> None:
    build(Request, value=deep_list(MAX_JSON_DEPTH - 1))  # JsonValue is stored inside one more object
    with pytest.raises(InvalidInput, match="nested deeper than 64"):
        build(Request, value=deep_list(MAX_JSON_DEPTH + 1))


def test_shared_references_and_cycles_are_bounded() -> None:
    bomb: Any = ["x"]
    for _ in range(60):  # 2**60 leaves if expanded
        bomb = [bomb, bomb]
    started = time.perf_counter()
    with pytest.raises(PayloadTooLarge):
        build(Request, payload={"b": bomb[0]})
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(InvalidInput, match="nested deeper"):
        build(Request, value=cycle)
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize(("fields", "field", "fragment"), [
    ({"count": 2**63}, "count", "outside signed 64 bits"),
    ({"count": INT64_MIN - 1}, "count", "outside signed 64 bits"),
    ({"payload": {"a": [1, {"b": 2**64}]}}, "payload.a[1].b", "65 bits"),
    ({"payload": {"k\x00": 1}}, "payload", "NUL"),
    ({"payload": {"a": {"\ud800": 1}}}, "payload.a", "lone surrogate"),
    ({"value": "\udcff"}, "value", "lone surrogate"),
    ({"free": "a\x00"}, "free", "NUL"),
    ({"free": "\udfff"}, "free", "lone surrogate"),
    ({"name": "a\x00"}, "name", "NUL"),
    ({"text": "t\x00"}, "text", "NUL"),
    ({"tags": ["ok", "a\x00"]}, "tags[1]", "NUL"),
    ({"ratio": math.inf}, "ratio", "finite"),
    ({"value": {"f": math.nan}}, "value.f", "finite"),
    ({"free": "x" * 70_000}, "free", "exceeds the limit"),
], ids=lambda v: str(v)[:40])
def test_each_refusal_names_the_field_and_the_path(fields: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        build(Request, **fields)
    assert (refused.value.field, refused.value.code in ("invalid_input", "payload_too_large")) == (field, True)
    assert fragment in refused.value.reason


def test_the_edges_of_the_ranges_are_accepted() -> None:
    ok = build(Request, count=INT64_MAX, payload={"min": INT64_MIN, "max": INT64_MAX, "s": "é\u2028😀"})
    assert ok.count == INT64_MAX
    assert check_int64("limit", INT64_MIN) == INT64_MIN
    with pytest.raises(InvalidInput, match="outside signed 64 bits"):
        check_int64("limit", INT64_MAX + 1)
    with pytest.raises(InvalidInput, match="16610 bits"):  # 5,000 digits: never converted to text
        check_int64("limit", 10**5000)


@pytest.mark.parametrize(("text", "fragment"), [
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 64"),
    ('{"a": ' * 70 + "1" + "}" * 70, "nested deeper than 64"),
    ('{"k\\u0000": 1}', "NUL"),
    ('["\\ud800"]', "lone surrogate"),
    ('{"n": 18446744073709551616}', "outside signed 64 bits"),
    ('{"n": ' + "9" * 5000 + "}", "not valid JSON"),
    ('{"f": 1e400}', "finite"),
    ('{"v": NaN}', "not valid JSON"),
    ("{", "not valid JSON"),
], ids=["deep-100k", "deep-objects", "nul", "surrogate", "2**64", "5000-digits", "1e400", "nan", "broken"])
def test_json_text_is_parsed_with_the_same_limits(text: str, fragment: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_json_text("--payload", text)
    assert refused.value.field == "--payload" and fragment in refused.value.reason


def test_json_text_depth_scan_ignores_brackets_inside_strings() -> None:
    text = json.dumps({"s": "[" * 200 + '\\"{' * 100})
    assert parse_json_text("--payload", text)["s"].startswith("[[[")


@pytest.mark.parametrize("bad", ["abc\n", "a\x00", "a\udcff", "", "x" * 129, "a b"])
def test_ids_must_match_the_pattern_in_full(bad: str) -> None:
    with pytest.raises(InvalidInput):
        check_id("agent_id", bad)
    assert check_id("agent_id", "a.b:c-d_1") == "a.b:c-d_1"
