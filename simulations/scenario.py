"""Scenario files: what a simulation runs, validated before anything is written.

A scenario is YAML (``simulations/scenarios/*.yaml``; the full format is in ``docs/simulations.md``)::

    name: flagship
    seed: 42
    clock: {bucket_s: 10}
    stop: {at_s: 120}
    agents:
      - {id: alice, behaviour: worker, capabilities: [state.write, task.create, task.work]}
    world:
      tasks: [{id: t1, goal: write the plan, owner: alice, steps: 3}]
    timeline:
      - {at: 1, kind: wake, target: alice, task: t1}

:func:`load_scenario` reads a file and returns a :class:`Scenario`, or raises
:class:`~simulations.errors.ScenarioError` naming the file, the line and the field (unknown behaviour,
unknown or mistyped field, duplicate key, YAML syntax) or :class:`~simulations.errors.ScenarioTimelineError`
(times out of order or past the stop, an entry naming an agent, task or room the scenario does not
declare, a fault the agent's setup cannot have). Lines come from the YAML nodes: the file is composed,
every value's path is mapped to its line, and pydantic's error location is mapped back through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from engine.commands.state import EVENT_TYPE_PATTERN
from engine.errors import YamlRefused
from engine.models.common import ID_PATTERN
from engine.yaml_input import parse_yaml, read_yaml_text
from simulations.errors import ScenarioError, ScenarioTimelineError
from simulations.plugins import PLUGIN_PATTERN
from simulations.rules import declared_constants

REPO_ROOT = Path(__file__).resolve().parents[1]
BEHAVIOURS = ("worker", "reviewer", "disagreeing_reviewer", "flaky", "human_governor")
Behaviour = Literal["worker", "reviewer", "disagreeing_reviewer", "flaky", "human_governor"]
_PLUGIN = re.compile(PLUGIN_PATTERN)


def _known_behaviour(value: str) -> str:
    """A library behaviour's name, or ``MODULE:ATTR`` (an agent of one's own: :mod:`simulations.plugins`,
    resolved before the world opens)."""
    if value in BEHAVIOURS or _PLUGIN.match(value):
        return value
    raise ValueError(f"unknown behaviour {value!r}; the library has: {', '.join(BEHAVIOURS)}; or MODULE:ATTR, "
                     "an agent of one's own")


BehaviourName = Annotated[str, AfterValidator(_known_behaviour)]
Representation = Literal["transcript", "summary", "structured", "pointers"]
AgentId = Annotated[str, Field(pattern=ID_PATTERN)]
Seconds = Annotated[float, Field(ge=0)]
JsonScalar = str | int | float | bool | None


class Strict(BaseModel):
    """Every scenario model refuses unknown fields and is immutable once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# -- agents ------------------------------------------------------------------------------------------

class ClaimSpec(Strict):
    """A claim an agent asserts when it has done its part: ``value`` for ``term``."""

    term: str = Field(min_length=1, max_length=200)
    value: str = Field(min_length=1, max_length=200)


class HandoffSpec(Strict):
    """Hand the task to ``to`` after ``after_steps`` steps, showing it ``representation``."""

    to: AgentId
    after_steps: int = Field(ge=1)
    representation: Representation = "pointers"


class NoteSpec(Strict):
    """A memory the agent stores (private) on its first wake; ``propose``: on the next, it proposes it for
    review (a candidate the controller routes to a reviewer; never a shared fact before review)."""

    content: str = Field(min_length=1, max_length=2000)
    epistemic_type: Literal["observation", "inference", "hypothesis", "decision", "plan"] = "observation"
    propose: bool = False


class ArtifactSpec(Strict):
    """The task's artifact of ``type``, written with each step: registered (for the task) on the first step
    the agent takes when its view shows none, else revised on the head version its view shows
    (``WorldView.artifacts``: compare-and-set on that version). Found in the registry, never remembered."""

    type: AgentId = "report"


class CheckSpec(Strict):
    """The agent's lightweight check (the layered wake's layer 2, seed 001 §45): told only what triggered a
    wake (``payload.trigger``: the event's type and subject), it finds the wake worth a full run when the
    subject is one of ``subjects`` or the type one of ``types``; a wake that names no trigger always is."""

    subjects: list[str] = Field(default_factory=list, max_length=100)
    types: list[str] = Field(default_factory=list, max_length=100)


class BehaviourParams(Strict):
    """Parameters of the behaviour library (``simulations.behaviours``); each behaviour reads its own."""

    steps_per_wake: int = Field(default=1, ge=1, le=1000)
    claim: ClaimSpec | None = None
    handoff: HandoffSpec | None = None
    fail_every: int = Field(default=0, ge=0, description="flaky: every n-th wake ends without acting")
    forward_to: AgentId | None = Field(default=None, description="post a delta the next agent subscribes to")
    answer: str | None = Field(default=None, description="the blind answer it commits in any open room it sits in")
    note: NoteSpec | None = None
    follows: AgentId | None = Field(default=None, description="a task whose committed step bounds mine: I "
                                    "advance only up to it (a reviewer of another's work)")
    join: AgentId | None = Field(default=None, description="a room it joins on its first wake")
    artifact: ArtifactSpec | None = Field(default=None, description="with each step, register or revise the "
                                          "task's artifact of this type, on the version the view shows")
    check: CheckSpec | None = Field(default=None, description="a lightweight check for layered wakes (none: "
                                    "a wake routed to the check gets a full run)")


class Authority(Strict):
    clearance: int = Field(default=0, ge=0, le=5)


class AgentSpec(Strict):
    id: AgentId
    role: str = Field(default="worker", pattern=ID_PATTERN)
    capabilities: list[str] = Field(default_factory=list, max_length=64)
    authority: Authority = Authority()
    behaviour: BehaviourName
    model: str = Field(default="rules-v1", min_length=1, max_length=100)
    params: BehaviourParams = BehaviourParams()


# -- the initial world -------------------------------------------------------------------------------

class TaskSpec(Strict):
    id: AgentId
    goal: str = Field(min_length=1, max_length=2000)
    owner: AgentId
    assignee: AgentId | None = None
    steps: int = Field(default=1, ge=1, le=100_000, description="steps of work the task needs")


class RoomSpec(Strict):
    id: AgentId
    goal: str = Field(min_length=1, max_length=2000)
    opener: AgentId
    members: list[AgentId] = Field(default_factory=list)


class SubscriptionSpec(Strict):
    agent: AgentId
    subject: str = Field(min_length=1, max_length=300)


class EdgeSpec(Strict):
    src: AgentId
    dst: AgentId
    edge_type: Literal["info", "review", "delegate"] = "info"


class MemorySpec(Strict):
    """A memory in the initial world: private to its owner, or in a room (``sensitivity`` above an agent's
    clearance keeps it from that agent even inside the room)."""

    owner: AgentId
    content: str = Field(min_length=1, max_length=2000)
    epistemic_type: str = Field(default="observation", min_length=1, max_length=30)
    scope: Literal["private", "room"] = "private"
    room: AgentId | None = None
    sensitivity: int = Field(default=0, ge=0, le=5)


class WorldSpec(Strict):
    tasks: list[TaskSpec] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    rooms: list[RoomSpec] = Field(default_factory=list)
    memories: list[MemorySpec] = Field(default_factory=list)
    subscriptions: list[SubscriptionSpec] = Field(default_factory=list)
    edges: list[EdgeSpec] = Field(default_factory=list)


# -- the timeline: events and faults at virtual times ------------------------------------------------

class Entry(Strict):
    at: Seconds


class WakeEntry(Entry):
    """Wake ``target`` (about ``task``); ``deliveries`` > 1 delivers the same idempotency key again;
    ``every_s``/``count``/``jitter_s`` repeat it (jitter drawn from the scenario's seed)."""

    kind: Literal["wake"]
    target: AgentId
    task: AgentId | None = None
    cause: str = Field(default="scenario", min_length=1, max_length=200)
    key: str | None = Field(default=None, min_length=1, max_length=200)
    deliveries: int = Field(default=1, ge=1, le=1000)
    every_s: float | None = Field(default=None, gt=0)
    count: int = Field(default=1, ge=1, le=100_000)
    jitter_s: Seconds = 0.0


class EventEntry(Entry):
    """``agent`` appends an event ``type`` about ``subject`` (``subject_kind``, default ``note``) with
    ``payload``: what happens in the world that is no agent's task (chatter, a sensor, an operator's change);
    its subscribers are woken by the controller. ``every_s``/``count``/``jitter_s`` repeat it as a wake's."""

    kind: Literal["event"]
    agent: AgentId
    type: str = Field(pattern=EVENT_TYPE_PATTERN)
    subject: str = Field(min_length=1, max_length=256)
    subject_kind: str = Field(default="note", pattern=ID_PATTERN)
    payload: dict[str, Any] = Field(default_factory=dict)
    every_s: float | None = Field(default=None, gt=0)
    count: int = Field(default=1, ge=1, le=100_000)
    jitter_s: Seconds = 0.0


class ClaimEntry(Entry):
    kind: Literal["claim"]
    agent: AgentId
    term: str = Field(min_length=1, max_length=200)
    value: str = Field(min_length=1, max_length=200)


class ResolveEntry(Entry):
    kind: Literal["resolve"]
    agent: AgentId
    term: str = Field(min_length=1, max_length=200)
    value: str = Field(min_length=1, max_length=200)


class OpenRoomEntry(Entry):
    """``opener`` (default: the governor, who then leaves: it convenes, it does not answer) opens ``room``
    with ``members``; the controller wakes each member."""

    kind: Literal["open_room"]
    room: AgentId
    goal: str = Field(default="convened by the scenario", min_length=1, max_length=2000)
    members: list[AgentId] = Field(min_length=1)
    opener: AgentId | None = None


class StateWriteEntry(Entry):
    kind: Literal["state_write"]
    agent: AgentId
    key: str = Field(min_length=1, max_length=256)
    value: Any


class GrantEntry(Entry):
    kind: Literal["grant"]
    agent: AgentId
    capabilities: list[str] = Field(max_length=64)


class WorkerCrash(Entry):
    """The next claimed wake is abandoned after its effects, before its ack."""

    kind: Literal["worker_crash"]


class DuplicateDelivery(Entry):
    kind: Literal["duplicate_delivery"]
    target: AgentId
    task: AgentId | None = None
    key: str = Field(min_length=1, max_length=200)
    deliveries: int = Field(ge=1, le=1000)


class StaleWrite(Entry):
    """``agent`` writes ``key`` with a version ``behind`` the current one (it must be refused)."""

    kind: Literal["stale_write"]
    agent: AgentId
    key: str = Field(min_length=1, max_length=256)
    behind: int = Field(default=1, ge=1)


class PdpOutage(Entry):
    kind: Literal["pdp_outage"]
    duration_s: float = Field(gt=0)


class PolicyChange(Entry):
    """Deploy ``policy_dir`` (with the files of ``overlay`` laid over a copy of it, if given) as a new policy
    epoch and reload the PDP."""

    kind: Literal["policy_change"]
    policy_dir: str
    overlay: str | None = None


class RuleChange(Entry):
    kind: Literal["rule_change"]
    rule_dir: str


class ModelReplacement(Entry):
    kind: Literal["model_replacement"]
    agent: AgentId
    model: str = Field(min_length=1, max_length=100)
    behaviour: BehaviourName | None = None


class ConversationReplacement(Entry):
    """The agent's conversation is gone: a new adapter instance with nothing in memory, a new session."""

    kind: Literal["conversation_replacement"]
    agent: AgentId


TimelineEntry = Annotated[
    WakeEntry | EventEntry | ClaimEntry | ResolveEntry | OpenRoomEntry | StateWriteEntry | GrantEntry | WorkerCrash
    | DuplicateDelivery
    | StaleWrite | PdpOutage | PolicyChange | RuleChange | ModelReplacement | ConversationReplacement,
    Field(discriminator="kind")]
FAULT_KINDS = ("worker_crash", "duplicate_delivery", "stale_write", "pdp_outage", "policy_change", "rule_change",
               "model_replacement", "conversation_replacement")


# -- the scenario ------------------------------------------------------------------------------------

class ClockSpec(Strict):
    start: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    bucket_s: float = Field(default=10.0, gt=0, le=86_400, description="width of the report's time buckets")
    think_s: float = Field(default=1.0, ge=0, le=3600, description="virtual time an agent takes to decide")

    def start_us(self) -> int:
        start = self.start if self.start.tzinfo else self.start.replace(tzinfo=UTC)
        return int(start.timestamp()) * 1_000_000 + start.microsecond


class StopSpec(Strict):
    at_s: float = Field(gt=0, le=10_000_000)
    max_rounds: int = Field(default=100_000, ge=1, le=10_000_000)
    all_tasks_done: bool = False


class RulesSpec(Strict):
    dir: str = "rules"
    constants: dict[str, int | float | str] = Field(default_factory=dict)


class Bounds(Strict):
    min: float | None = None
    max: float | None = None


class Scenario(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]{0,63}$")
    description: str = ""
    seed: int = Field(default=0, ge=0)
    governor: AgentId = "gov"
    clock: ClockSpec = ClockSpec()
    stop: StopSpec
    rules: RulesSpec = RulesSpec()
    agents: list[AgentSpec] = Field(min_length=1, max_length=100_000)
    world: WorldSpec = WorldSpec()
    timeline: list[TimelineEntry] = Field(default_factory=list)
    expect: dict[str, float | Bounds] = Field(default_factory=dict)
    source: str = Field(default="", exclude=True, description="the file it was loaded from")
    base_dir: str = Field(default=".", exclude=True)

    def agent(self, agent_id: str) -> AgentSpec:
        for a in self.agents:
            if a.id == agent_id:
                return a
        raise KeyError(agent_id)

    def resolve_path(self, value: str) -> Path:
        """A path named in the scenario: relative to the scenario's folder, else to the repository."""
        for base in (Path(self.base_dir), REPO_ROOT):
            candidate = (base / value).resolve()
            if candidate.exists():
                return candidate
        return (Path(self.base_dir) / value).resolve()


# -- loading -----------------------------------------------------------------------------------------

Path_ = tuple[str | int, ...]


def load_scenario(path: Path | str, overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Read, validate and return the scenario at ``path``; ``overrides`` maps dotted keys to values
    (a sweep's ``rules.constants.max_depth``) applied before validation. Raises ``ScenarioError``."""
    file = Path(path)
    try:
        text = read_yaml_text(file)
    except OSError as exc:
        raise ScenarioError(str(file), 0, "", f"cannot read the file: {exc.strerror or exc}") from exc
    except YamlRefused as exc:  # not UTF-8, or over the size limit
        raise ScenarioError(str(file), exc.line, "", exc.reason) from None
    return parse_scenario(text, str(file), base_dir=file.resolve().parent, overrides=overrides)


def parse_scenario(text: str, file: str = "<scenario>", *, base_dir: Path | None = None,
                   overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Validate scenario ``text`` (named ``file`` in errors). See :func:`load_scenario`."""
    data, lines = _compose(text, file)
    for key, value in (overrides or {}).items():
        _override(data, key, value, file)
    try:
        scenario = Scenario.model_validate({**data, "source": file, "base_dir": str(base_dir or Path.cwd())})
    except ValidationError as exc:
        raise _first_error(exc, file, lines) from None
    _check_references(scenario, file, lines)
    return scenario


def _compose(text: str, file: str) -> tuple[dict[str, Any], dict[Path_, int]]:
    """The scenario's plain data and the line of every value's path, read by :mod:`engine.yaml_input`
    (size, depth and alias expansion bounded before anything is built)."""
    try:
        document = parse_yaml(text, file)
    except YamlRefused as exc:
        raise ScenarioError(file, exc.line, "", exc.reason) from None
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        raise ScenarioError(file, mark.line + 1 if mark else 0, "", f"YAML: {exc.problem}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ScenarioError(file, mark.line + 1 if mark else 0, "", f"YAML syntax: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(file, 0, "", f"YAML: {exc}") from None
    node = document.node
    if node is None or not isinstance(node, yaml.MappingNode) or not isinstance(document.data, dict):
        raise ScenarioError(file, node.start_mark.line + 1 if node else 1, "", "a scenario is a YAML mapping")
    lines: dict[Path_, int] = {}
    _map_lines(node, (), lines, file)
    return document.data, lines


def _map_lines(node: yaml.Node, path: Path_, lines: dict[Path_, int], file: str) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                raise ScenarioError(file, key_node.start_mark.line + 1, _dotted((*path, key)), "duplicate key")
            seen.add(key)
            _map_lines(value_node, (*path, key), lines, file)
            lines[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _map_lines(item, (*path, index), lines, file)


def _dotted(path: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in path)


def _line_of(loc: Sequence[str | int], lines: Mapping[Path_, int]) -> tuple[int, str]:
    """The line of the deepest part of ``loc`` present in the file, and the field path (union tags,
    which are not in the file, are dropped)."""
    path: Path_ = ()
    field: list[str | int] = []
    for part in loc:
        if (*path, part) in lines:
            path = (*path, part)
            field.append(part)
        elif isinstance(part, str) and part not in BEHAVIOURS and not _is_tag(part):
            field.append(part)
    return lines.get(path, 1), _dotted(field)


def _is_tag(part: str) -> bool:
    """Pydantic names the union member in the location (``wake``, ``function-after[...]``)."""
    kinds = {"wake", "claim", "resolve", "open_room", "state_write", "grant", *FAULT_KINDS}
    return part in kinds or "[" in part


def _first_error(exc: ValidationError, file: str, lines: Mapping[Path_, int]) -> ScenarioError:
    err = exc.errors(include_url=False)[0]
    line, field = _line_of(tuple(err["loc"]), lines)
    reason = err["msg"]
    if err["type"] == "extra_forbidden":
        reason = "unknown field"
    elif err["type"] == "literal_error" and field.endswith("behaviour"):
        reason = f"unknown behaviour {err['input']!r}; the library has: {', '.join(BEHAVIOURS)}"
    elif err["type"] == "value_error":
        reason = str(err["msg"]).removeprefix("Value error, ")
    elif err["type"] == "union_tag_invalid":
        reason = f"unknown timeline kind {err['input'].get('kind')!r}" if isinstance(err["input"], dict) else reason
    elif "input" in err and not isinstance(err["input"], dict | list):
        reason = f"{reason} (got {err['input']!r})"
    return ScenarioError(file, line, field, reason)


def _override(data: dict[str, Any], dotted: str, value: Any, file: str) -> None:
    parts = dotted.split(".")
    target: Any = data
    for part in parts[:-1]:
        if isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        elif isinstance(target, dict):
            target = target.setdefault(part, {})
        else:
            raise ScenarioError(file, 0, dotted, "the sweep key does not name a value of the scenario")
    if not isinstance(target, dict):
        raise ScenarioError(file, 0, dotted, "the sweep key does not name a value of the scenario")
    target[parts[-1]] = value


# -- cross-checks: what pydantic cannot see ------------------------------------------------------------

def _check_references(s: Scenario, file: str, lines: Mapping[Path_, int]) -> None:
    def fail(path: Path_, reason: str, *, timeline: bool = True) -> None:
        line, field = _line_of(path, lines)
        cls = ScenarioTimelineError if timeline else ScenarioError
        raise cls(file, line, field, reason)

    agents = {a.id for a in s.agents}
    if s.governor in agents:
        fail(("governor",), f"{s.governor!r} is the governor; declare it once (behaviour human_governor "
                            "agents are separate principals)", timeline=False)
    seen: set[str] = set()
    tasks = {t.id for t in s.world.tasks}
    rooms = {r.id for r in s.world.rooms} | {e.room for e in s.timeline if isinstance(e, OpenRoomEntry)}
    for i, a in enumerate(s.agents):
        if a.id in seen:
            fail(("agents", i, "id"), f"agent {a.id!r} is declared twice", timeline=False)
        seen.add(a.id)
        for key in ("handoff", "forward_to"):
            target = a.params.handoff.to if key == "handoff" and a.params.handoff else getattr(a.params, key, None)
            if isinstance(target, str) and target not in agents:
                fail(("agents", i, "params", key), f"names agent {target!r}, which is not declared", timeline=False)
        if a.params.follows is not None and a.params.follows not in tasks:
            fail(("agents", i, "params", "follows"), f"names task {a.params.follows!r}, which is not declared "
                 "in world.tasks", timeline=False)
        if a.params.join is not None and a.params.join not in rooms:
            fail(("agents", i, "params", "join"), f"names room {a.params.join!r}, which neither world.rooms nor "
                 "an open_room entry declares", timeline=False)
    _check_world(s, agents, fail)
    _check_timeline(s, agents, fail)
    _check_paths(s, fail)
    _check_expect(s, fail)


def _check_expect(s: Scenario, fail: Any) -> None:
    """Every ``expect`` key names a figure a run reports (a typo fails here, not after the run as NOT MET)."""
    from difflib import get_close_matches

    from simulations.figure_names import figure_names, is_figure

    for name in s.expect:
        if not is_figure(name):
            close = get_close_matches(name, sorted(figure_names()), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else "; see docs/simulations.md, The metrics"
            fail(("expect", name), f"unknown figure {name!r}{hint}", timeline=False)


def _check_world(s: Scenario, agents: set[str], fail: Any) -> None:
    tasks = set()
    for i, t in enumerate(s.world.tasks):
        for field in ("owner", "assignee"):
            who = getattr(t, field)
            if who is not None and who not in agents:
                fail(("world", "tasks", i, field), f"names agent {who!r}, which is not declared", timeline=False)
        if "task.create" not in s.agent(t.owner).capabilities:
            fail(("world", "tasks", i, "owner"), f"{t.owner!r} creates the task but lacks capability task.create",
                 timeline=False)
        if t.id in tasks:
            fail(("world", "tasks", i, "id"), f"task {t.id!r} is declared twice", timeline=False)
        tasks.add(t.id)
    for i, r in enumerate(s.world.rooms):
        for j, who in enumerate([r.opener, *r.members]):
            if who not in agents:
                path = ("world", "rooms", i, "opener") if j == 0 else ("world", "rooms", i, "members", j - 1)
                fail(path, f"names agent {who!r}, which is not declared", timeline=False)
    rooms = {r.id for r in s.world.rooms}
    for i, m in enumerate(s.world.memories):
        if m.owner not in agents:
            fail(("world", "memories", i, "owner"), f"names agent {m.owner!r}, which is not declared", timeline=False)
        if (m.scope == "room") != (m.room is not None):
            fail(("world", "memories", i, "room"), "a room memory names its room; a private one names none",
                 timeline=False)
        if m.room is not None and m.room not in rooms:
            fail(("world", "memories", i, "room"), f"names room {m.room!r}, which is not declared in world.rooms",
                 timeline=False)
    for i, sub in enumerate(s.world.subscriptions):
        if sub.agent not in agents:
            fail(("world", "subscriptions", i, "agent"), f"names agent {sub.agent!r}, which is not declared",
                 timeline=False)
    for i, e in enumerate(s.world.edges):
        for field in ("src", "dst"):
            if getattr(e, field) not in agents:
                fail(("world", "edges", i, field), f"names agent {getattr(e, field)!r}, which is not declared",
                     timeline=False)


def _check_timeline(s: Scenario, agents: set[str], fail: Any) -> None:
    tasks = {t.id for t in s.world.tasks}
    previous = 0.0
    for i, entry in enumerate(s.timeline):
        if entry.at < previous:
            fail(("timeline", i, "at"), f"time {entry.at:g} s is before the previous entry's {previous:g} s")
        previous = entry.at
        repeated = entry if isinstance(entry, WakeEntry | EventEntry) else None
        last = entry.at + ((repeated.count - 1) * repeated.every_s if repeated is not None and repeated.every_s
                           else 0.0)
        if last > s.stop.at_s:
            fail(("timeline", i, "at"), f"at {last:g} s this entry is past the stop at {s.stop.at_s:g} s")
        for field in ("agent", "target"):
            who = getattr(entry, field, None)
            if who is not None and who not in agents:
                fail(("timeline", i, field), f"names agent {who!r}, which is not declared")
        if isinstance(entry, OpenRoomEntry):
            for j, who in enumerate(entry.members):
                if who not in agents:
                    fail(("timeline", i, "members", j), f"names agent {who!r}, which is not declared")
            if entry.opener is not None and entry.opener not in agents and entry.opener != s.governor:
                fail(("timeline", i, "opener"), f"names agent {entry.opener!r}, which is not declared")
        task = getattr(entry, "task", None)
        if task is not None and task not in tasks:
            fail(("timeline", i, "task"), f"names task {task!r}, which is not declared in world.tasks")
        if repeated is not None and repeated.count > 1 and repeated.every_s is None:
            fail(("timeline", i, "count"), "count > 1 needs every_s")
        if isinstance(entry, PdpOutage) and entry.at + entry.duration_s > s.stop.at_s:
            fail(("timeline", i, "duration_s"), "the outage would outlast the stop")


def _check_paths(s: Scenario, fail: Any) -> None:
    rule_dir = s.resolve_path(s.rules.dir)
    if not rule_dir.is_dir():
        fail(("rules", "dir"), f"rule directory {s.rules.dir!r} not found", timeline=False)
    declared = declared_constants(rule_dir)
    for name in s.rules.constants:
        if name not in declared:
            fail(("rules", "constants", name), f"no rule file in {s.rules.dir!r} declares constant {name!r}; "
                 f"declared: {', '.join(sorted(declared))}", timeline=False)
    for i, entry in enumerate(s.timeline):
        fields = ("policy_dir", "overlay") if isinstance(entry, PolicyChange) else \
            ("rule_dir",) if isinstance(entry, RuleChange) else ()
        for field in fields:
            value = getattr(entry, field)
            if value is not None and not s.resolve_path(value).is_dir():
                fail(("timeline", i, field), f"directory {value!r} not found", timeline=False)


def iter_entries(s: Scenario) -> Iterator[tuple[int, Entry]]:
    """The timeline in order, with each entry's index in the file."""
    yield from enumerate(s.timeline)


__all__ = ["BEHAVIOURS", "FAULT_KINDS", "AgentSpec", "ArtifactSpec", "Behaviour", "BehaviourName", "BehaviourParams",
           "CheckSpec", "ClaimEntry", "ConversationReplacement", "DuplicateDelivery", "EventEntry", "GrantEntry",
           "MemorySpec", "ModelReplacement", "NoteSpec", "OpenRoomEntry", "PdpOutage", "PolicyChange",
           "Representation", "ResolveEntry", "RuleChange", "Scenario", "StaleWrite", "StateWriteEntry", "TaskSpec",
           "TimelineEntry", "WakeEntry", "WorkerCrash", "iter_entries", "load_scenario", "parse_scenario"]
