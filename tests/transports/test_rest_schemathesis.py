"""schemathesis against the REST API's generated OpenAPI document, on a real ``pmw serve`` with an agent's
token: every operation with positive and negative examples (bounded, derandomized), then the stateful links
(a created task -> its read, claim, ...; the names each scenario draws made its own). For every answer:
no 5xx; the response conforms to the document
(status documented, content type, body and header schemas); a refusal is a problem document whose ``code``
is one of PMW's and whose ``type`` says that code; and the store's row counts (every table, read from the
SQLite file read-only) are unchanged by a refused (4xx) request, but for the one ``policy.denied`` audit
event a PDP denial records. The server runs without its controller (``--no-controller``): the controller
reacts to accepted writes on its own schedule, and its rows would blur what each request wrote; with it off
nothing but the requests writes, so the counts after one request are the baseline of the next."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import strategies as st
from schemathesis import Case as AnyCase
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from engine.service.rest_openapi import error_codes
from engine.service.rest_routes import Route, all_routes
from tests.hypothesis_budget import examples
from tests.service.support import Served
from tests.transports.test_rest_support import AGENT_CAPABILITIES, changed, denial_only, row_counts

# per operation (positive and negative requests, derandomized): 5 in CI, the 10 it drew before the suite was cut
# to CI's time limit under HYPOTHESIS_PROFILE=thorough (tests/hypothesis_budget.py)
EXAMPLES_PER_OPERATION = examples(ci=5, thorough=10)
STATEFUL_SCENARIOS = 20
STATEFUL_STEPS = 6
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance]
CODES = set(error_codes())
Case = AnyCase[Any]
#: the resources whose answers link to further operations (what the stateful scenarios walk)
LINKED = "^/v1/(tasks|state|memory|handoffs|artifacts|rooms)"


class World:
    """The served world, the agent's token, the loaded schema and what the run saw."""

    def __init__(self, served: Served, token: str, schema: Any) -> None:
        self.served = served
        self.token = token
        self.schema = schema
        self.db = Path(served.data) / "world.db"
        self.statuses: dict[int, int] = {}
        self.baseline = row_counts(self.db)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def check(self, case: Case, response: Any) -> None:
        """The checks of every answer (module docstring)."""
        before, self.baseline = self.baseline, row_counts(self.db)
        status = response.status_code
        self.statuses[status] = self.statuses.get(status, 0) + 1
        assert status < 500, (case.method, case.formatted_path, status, response.text[:500])
        if status >= 400:
            assert response.headers["content-type"][0].startswith("application/problem+json"), response.text[:300]
            body = response.json()
            assert body["code"] in CODES and body["type"] == f"urn:pmw:error:{body['code']}", body
            assert body["status"] == status, body
            diff = changed(before, self.baseline)
            assert not diff or (body["code"] == "policy_denied" and denial_only(diff)), (
                case.method, case.formatted_path, body["code"], diff)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with Served(tmp_path_factory.mktemp("rest-fuzz"), serve_args=["--no-controller"]) as served:
        token = served.add_agent("alice", AGENT_CAPABILITIES)
        schema = schemathesis.openapi.from_url(served.url + "/v1/openapi.json")
        yield World(served, token, schema)
        assert served.health()["status"] == "ok"


def _settings(examples: int) -> hypothesis.settings:
    return hypothesis.settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                               phases=[Phase.explicit, Phase.generate],
                               suppress_health_check=list(HealthCheck), print_blob=False)


@pytest.mark.parametrize("route", all_routes(), ids=lambda r: f"{r.method} {r.path}")
def test_every_operation_answers_as_documented(world: World, route: Route) -> None:
    operation = world.schema[route.path][route.method]
    strategy = st.one_of(operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
                         operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))

    @_settings(EXAMPLES_PER_OPERATION)
    @given(case=strategy)
    def run(case: Case) -> None:
        response = case.call(headers=world.headers, timeout=60)
        world.check(case, response)
        case.validate_response(response, checks=CHECKS, headers=world.headers)
    run()


def test_stateful_links(world: World) -> None:
    """Follow the document's links (create a task, then read/claim/complete it; set a key, then read it ...)."""
    linked_schema = schemathesis.openapi.from_url(world.served.url + "/v1/openapi.json").include(path_regex=LINKED)
    linked_schema.config.generation.modes = [GenerationMode.POSITIVE]  # valid requests, so that links lead on
    base = linked_schema.as_state_machine()
    seen = world
    seen.statuses.clear()
    linked: list[str] = []  # calls whose path names what an earlier answer created (a followed link)
    answered: set[str] = set()

    scenarios = iter(range(1, 10**6))

    class Machine(base):  # type: ignore[misc, valid-type]
        """The server's world persists between scenarios, so a name one scenario drew (a key it set, an id it
        gave) would meet that scenario's writes in the next: the same choices would get other answers and
        hypothesis would refuse the run as flaky (FlakyStrategyDefinition, seen under load). Every name a
        scenario drew itself (not one an answer gave it) is made its own by a suffix: each scenario's answers
        depend only on its own calls."""

        def __init__(self) -> None:
            super().__init__()
            self.suffix = f"s{next(scenarios)}"

        def own(self, value: Any) -> Any:
            return f"{value}{self.suffix}" if isinstance(value, str) and value not in answered else value

        def before_call(self, case: Case) -> None:
            for name, value in (case.path_parameters or {}).items():
                case.path_parameters[name] = self.own(str(value))
            if isinstance(case.body, dict):
                for name, value in case.body.items():
                    if name.endswith("_id") or name == "key":
                        case.body[name] = self.own(value)

        def get_call_kwargs(self, case: Case) -> dict[str, Any]:
            return {"headers": seen.headers, "timeout": 60}

        def after_call(self, response: Any, case: Case) -> None:
            seen.check(case, response)
            if set(map(str, (case.path_parameters or {}).values())) & answered:
                linked.append(f"{case.method} {case.path} -> {response.status_code}")
            if response.status_code == 200 and isinstance(body := response.json(), dict):
                answered.update(str(v) for k, v in body.items() if k.endswith("_id") or k == "key")

        def validate_response(self, response: Any, case: Case, additional_checks: Any = None,
                              **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS, headers=seen.headers)

    settings = hypothesis.settings(_settings(STATEFUL_SCENARIOS), stateful_step_count=STATEFUL_STEPS)
    Machine.run(settings=settings)
    assert seen.statuses.get(200, 0) > 0, seen.statuses  # some calls of the scenarios were accepted
    print(f"stateful: {sum(seen.statuses.values())} calls, statuses {seen.statuses}, linked {linked[:20]}")
    assert linked, "no scenario followed a link"
